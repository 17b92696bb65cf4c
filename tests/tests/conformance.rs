//! The store conformance suite: the one lifecycle of `lease_conformance`
//! (its crate docs list the steps) run unchanged, for every protocol,
//! against every store the tests start:
//!
//! | store | dialect | clock |
//! |---|---|---|
//! | `MemStore` | none (the core's own store) | virtual |
//! | the GCS stand-in (`lease_tests::gcs`), through `LEASE_PROVIDER=gcs` settings | GCS XML API, HMAC-signed | virtual |
//! | moto, signatures checked | S3 | system |
//! | Azurite, account key | Azure Blob | system |
//! | R2 in workerd: the conformance Worker runs the lifecycle on its binding (the mutex must be refused: no conditional DELETE) | R2 binding | the Worker's |
//! | moto by signed `fetch()` from the same Worker | S3 | the Worker's |
//!
//! For cas the lifecycle runs the session steps too (a session's keys
//! owned, busy to another client, fenced, freed by a break of the session
//! and by its close), on every store above.
//!
//! It is shown to fail where a store cannot keep two holders apart: a store
//! that ignores `If-None-Match` fails at the probe; one that ignores every
//! condition (the in-memory store made blind, and s3rver, the real one)
//! fails at the probe, and with the probe off at the stale holder's
//! renewal or release, which overwrites the new holder's lease.

mod support;

use lease_conformance::{lifecycle, Expect, Failure, Options, Step, Subject};
use lease_core::store::PutCondition;
use lease_core::{Clock, MemStore, Protocol, Store, StoreOp, StoreReply, UnixMillis, VirtualClock};
use lease_native::os_entropy;
use lease_tests::gcs::GcsBox;
use lease_tests::servers::S3rver;
use serde_json::Value;
use std::rc::Rc;
use std::time::Duration;
use support::*;

/// Where the virtual clocks start.
const EPOCH: UnixMillis = UnixMillis(1_795_317_047_000);

fn memory(
    store: impl Store + 'static,
    clock: VirtualClock,
    name: &str,
) -> Subject<impl Store + 'static, VirtualClock> {
    Subject {
        name: name.into(),
        store: Rc::new(store),
        clock,
        entropy: os_entropy,
        missing_bucket: None,
    }
}

#[test]
fn the_in_memory_store_conforms() {
    let clock = VirtualClock::new(EPOCH);
    let subject = memory(MemStore::new(clock.clone()), clock, "memory");
    conform(&subject, &Options::virtual_time(), &EVERY_PROTOCOL);
}

#[test]
fn the_gcs_stand_in_conforms() {
    let clock = VirtualClock::new(EPOCH);
    let gcs = GcsBox::new(clock.clone(), "lease_bucket");
    // As an adapter builds it from LEASE_PROVIDER=gcs and an HMAC key.
    let store = |bucket: &str| {
        let settings = settings_from(&[
            ("LEASE_PROVIDER", "gcs"),
            ("LEASE_BUCKET", bucket),
            ("AWS_ACCESS_KEY_ID", "GOOG1EXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
        ])
        .expect("valid settings");
        settings
            .http_store(gcs.clone(), clock.clone())
            .expect("a store")
    };
    let subject = Subject {
        name: "GCS stand-in".into(),
        store: Rc::new(store("lease_bucket")),
        clock: clock.clone(),
        entropy: os_entropy,
        missing_bucket: Some(store(MISSING_BUCKET)),
    };
    // Its versions are generations, which `If-None-Match` does not name:
    // conditional re-reads are sent plain and answered in full.
    let options = Options {
        not_modified: false,
        ..Options::virtual_time()
    };
    conform(&subject, &options, &EVERY_PROTOCOL);
    // Writes to one object were spaced as GCS requires: a second write to
    // an object within a second is answered 429 and retried; the lease's
    // own client never sends one.
    println!("GCS stand-in: {} requests answered 429", gcs.throttled());
}

#[test]
fn moto_conforms() {
    // One request at a time: the lifecycle's `concurrent` step races
    // conditional creates, and moto's threaded server lets two of them win
    // now and then (it checks, then writes, without a lock:
    // docs/protocols.md, "Which stores"). The threaded server's race is
    // `make qualify`'s row, not a conformance failure of ours.
    let moto = moto(true);
    let subject = native_subject("moto", &moto_settings(&moto));
    conform(&subject, &Options::real_time(), &EVERY_PROTOCOL);
}

#[test]
fn azurite_conforms() {
    let azurite = azurite();
    let subject = native_subject("Azurite", &azure_settings(&azurite));
    conform(&subject, &Options::real_time(), &EVERY_PROTOCOL);
}

/// R2 lives inside a Worker: the conformance Worker runs the lifecycle
/// there, driven by `tests/cloudflare/conformance.mjs` in workerd, on its
/// R2 binding (the mutex refused: the binding has no conditional DELETE)
/// and, by signed fetch from the Worker, on moto. The script checks the
/// route's authentication and reads the bucket back through Miniflare's
/// own R2 API; each run's verdict is judged here.
#[test]
fn r2_in_workerd_conforms() {
    let moto = moto(true);
    let run = run_worker_script(
        "conformance.mjs",
        "tests/cloudflare/conformance-worker/build",
        &moto,
        Duration::from_secs(300),
    );
    let verdicts: Vec<Value> = run
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line.get("run").cloned())
        .collect();
    let runs: Vec<(String, String)> = verdicts
        .iter()
        .map(|v| (v["store"].to_string(), v["protocol"].to_string()))
        .collect();
    assert_eq!(
        verdicts.len(),
        6,
        "runs {runs:?}\n{}\n{}",
        run.stdout,
        run.stderr
    );
    for verdict in &verdicts {
        let store = verdict["store"].as_str().unwrap_or_default();
        let protocol = verdict["protocol"].as_str().unwrap_or_default();
        let steps: Vec<&str> = verdict["steps"]
            .as_array()
            .map(|steps| steps.iter().filter_map(|s| s["step"].as_str()).collect())
            .unwrap_or_default();
        for step in &verdict["steps"].as_array().cloned().unwrap_or_default() {
            let (name, detail) = (&step["step"], &step["detail"]);
            println!(
                "{store} {protocol}: {}: {}",
                name.as_str().unwrap_or_default(),
                detail.as_str().unwrap_or_default()
            );
        }
        assert_eq!(
            verdict["passed"],
            Value::Bool(true),
            "{store} {protocol} failed at {}",
            verdict["failed"]
        );
        let expect = match verdict["expect"].as_str() {
            Some("refused") => Expect::Refused,
            _ => Expect::Supported,
        };
        let signed = !store.starts_with("r2-binding");
        let protocol = Protocol::parse(protocol).expect("a protocol's name");
        let expected: Vec<&str> = Step::expected(protocol, expect, signed)
            .into_iter()
            .map(Step::name)
            .collect();
        assert_eq!(steps, expected, "{store} {protocol}");
        println!("{store} {protocol}: passed in {} s", verdict["seconds"]);
    }
    assert!(
        run.success,
        "conformance.mjs failed:\n{}\n{}\nmoto log:\n{}",
        run.stdout,
        run.stderr,
        moto.log_tail(30)
    );
    let refused: Vec<&Value> = verdicts
        .iter()
        .filter(|v| v["expect"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "only the binding's mutex is refused");
    assert_eq!(refused[0]["protocol"], "mutex");
    for line in run.stdout.lines().filter(|l| !l.starts_with('{')) {
        println!("{line}");
    }
}

/// The in-memory store, blind to some conditions: it applies a write
/// whatever its `If-None-Match` (and, if `if_match`, its `If-Match` on PUT
/// and DELETE) says.
struct Ignoring {
    store: MemStore,
    if_match: bool,
}

impl Store for Ignoring {
    async fn call(&self, op: StoreOp) -> StoreReply {
        let op = match op {
            StoreOp::Put {
                key,
                body,
                condition: PutCondition::IfAbsent,
            } => StoreOp::Put {
                key,
                body,
                condition: PutCondition::None,
            },
            StoreOp::Put {
                key,
                body,
                condition: PutCondition::IfMatch(_),
            } if self.if_match => StoreOp::Put {
                key,
                body,
                condition: PutCondition::None,
            },
            StoreOp::Delete {
                key,
                if_match: Some(_),
            } if self.if_match => StoreOp::Delete {
                key,
                if_match: None,
            },
            op => op,
        };
        self.store.apply(&op)
    }
}

fn ignoring(if_match: bool) -> Subject<impl Store + 'static, VirtualClock> {
    let clock = VirtualClock::new(EPOCH);
    let store = Ignoring {
        store: MemStore::new(clock.clone()),
        if_match,
    };
    let name = if if_match {
        "memory, ignoring every condition"
    } else {
        "memory, ignoring If-None-Match"
    };
    memory(store, clock, name)
}

/// Runs the lifecycle of `protocol` on `subject`, which must fail it at
/// `step`; returns the failure.
fn fails_at<S: Store + 'static, C: Clock + Clone + 'static>(
    subject: &Subject<S, C>,
    protocol: Protocol,
    options: &Options,
    step: Step,
) -> Failure {
    match block_on(lifecycle(subject, protocol, Expect::Supported, options)) {
        Ok(report) => panic!("{} {protocol} passed:\n{report}", subject.name),
        Err(failure) => {
            println!("caught: {failure}");
            assert_eq!(failure.step, step, "{failure}");
            failure
        }
    }
}

/// The probe's second create is the race two contenders run, made
/// deterministic: a store that ignores `If-None-Match` fails there, for
/// every protocol, before any lease is written.
#[test]
fn a_store_that_ignores_if_none_match_fails_at_the_probe() {
    let subject = ignoring(false);
    for protocol in Protocol::ALL {
        let failure = fails_at(&subject, protocol, &Options::virtual_time(), Step::Probe);
        assert!(
            failure.detail.contains("second_create_refused"),
            "{failure}"
        );
    }
}

/// A store that ignores every condition fails at the probe; with the probe
/// off, the lifecycle's own steps catch it: the stale holder's renewal
/// (cas) or release (mutex) overwrites the new holder's lease, which the
/// store then no longer holds. The epochs protocol confirms each create by
/// a listing, so one client after another does not show it: only the
/// probe (or a race) does.
#[test]
fn a_store_that_ignores_every_condition_fails_at_the_probe_or_as_two_holders() {
    let options = Options::virtual_time();
    for protocol in Protocol::ALL {
        fails_at(&ignoring(true), protocol, &options, Step::Probe);
    }
    let unprobed = Options {
        probe: false,
        ..Options::virtual_time()
    };
    for protocol in [Protocol::Cas, Protocol::Mutex] {
        fails_at(&ignoring(true), protocol, &unprobed, Step::StaleHolder);
    }
}

/// s3rver, the real store that ignores conditional headers: the same
/// failures as the blind in-memory store.
#[test]
fn s3rver_fails_at_the_probe_or_as_two_holders() {
    let s3rver = S3rver::start(BUCKET).expect("s3rver starts (run `make setup` first)");
    let subject = native_subject("s3rver", &s3rver_settings(&s3rver));
    for protocol in Protocol::ALL {
        let failure = fails_at(&subject, protocol, &Options::real_time(), Step::Probe);
        assert!(
            failure.detail.contains("second_create_refused"),
            "{failure}"
        );
    }
    let unprobed = Options {
        probe: false,
        prefix: "unprobed".into(),
        ..Options::real_time()
    };
    fails_at(&subject, Protocol::Cas, &unprobed, Step::StaleHolder);
}
