//! The three protocols, fenced writes and the capability probe against
//! real servers beyond the conformance lifecycle (`conformance.rs`):
//! concurrent contenders and a paused holder on moto with signature
//! checking on, credentials and a missing bucket named, and s3rver, which
//! ignores conditional headers, refused.

mod support;

use lease_conformance::failed_checks;
use lease_core::protocol::FenceOp;
use lease_core::protocol::{Checked, Probe};
use lease_core::{Entropy, FenceOutcome, LeaseError, LeaseOp, Protocol};
use lease_native::os_entropy;
use lease_tests::servers::S3rver;
use std::thread;
use std::time::Duration;
use support::*;

/// Concurrent contenders on a serialised moto (its conditional writes are
/// not atomic when threaded): exactly one winner per protocol.
#[test]
fn ten_concurrent_contenders_one_winner_per_protocol() {
    let (_moto, settings) = moto_and_settings(true);
    for protocol in Protocol::ALL {
        let key = format!("race/{protocol}");
        let outcomes = contend(&settings, protocol, &key, 10, Duration::from_secs(30));
        let (winners, busy) = tally(&outcomes);
        assert_eq!((winners, busy), (1, 9), "{protocol}: {outcomes:?}");
    }
}

#[test]
fn a_stale_holders_fenced_write_is_rejected() {
    let moto = moto(false);
    let s = store(&moto_settings(&moto));
    let cfg = |holder: &str| config(Protocol::Cas, "jobs/fenced", holder, TTL);
    let write = |holder: &str, token: u64, payload: &str| {
        run(
            &s,
            FenceOp::new(
                cfg(holder),
                os_entropy(),
                "data/report.json",
                token,
                payload.as_bytes().to_vec(),
            ),
        )
    };
    let a = acquired(run(&s, LeaseOp::acquire(cfg("a"), os_entropy())));
    assert!(matches!(
        write("a", a.token, "from a"),
        Ok(FenceOutcome::Accepted { .. })
    ));
    // a pauses past its ttl; b takes over and writes.
    thread::sleep(TTL + Duration::from_millis(1500));
    let b = acquired(run(&s, LeaseOp::acquire(cfg("b"), os_entropy())));
    assert_eq!(b.token, a.token + 1);
    assert!(matches!(
        write("b", b.token, "from b"),
        Ok(FenceOutcome::Accepted { .. })
    ));
    // a wakes up and writes with its old token: refused, b's data stays.
    match write("a", a.token, "zombie write") {
        Ok(FenceOutcome::Rejected { current }) => assert_eq!(current, b.token),
        other => panic!("expected Rejected, got {other:?}"),
    }
    match run(&s, LeaseOp::inspect(cfg("x"), os_entropy())) {
        Ok(Some(seen)) => assert_eq!(seen.record.holder, "b"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_probe_passes_on_moto_and_bad_credentials_or_bucket_are_named() {
    let (_moto, settings) = moto_and_settings(false);
    let report = run(
        &store(&settings),
        Probe::new(config(Protocol::Cas, "jobs/probe", "p", TTL), os_entropy()),
    )
    .expect("probe runs");
    for r in &report.results {
        assert!(r.passed, "{}: {}", r.check.name(), r.detail);
    }

    // Signature checking is on: a wrong secret is refused, and said so.
    let mut wrong = settings.clone();
    if let Some(c) = &mut wrong.credentials {
        c.secret_access_key = "not-the-secret-key-0000000000000000000000".into();
    }
    let err = run(
        &store(&wrong),
        LeaseOp::acquire(config(Protocol::Cas, "jobs/x", "a", TTL), os_entropy()),
    )
    .unwrap_err();
    assert!(
        matches!(&err, LeaseError::Denied { code: Some(code), .. } if code == "SignatureDoesNotMatch"),
        "{err:?}"
    );
    assert!(err.to_string().contains("check the credentials"), "{err}");

    let mut missing = settings.clone();
    missing.bucket = "no-such-bucket".into();
    let err = run(
        &store(&missing),
        LeaseOp::acquire(config(Protocol::Cas, "jobs/x", "a", TTL), os_entropy()),
    )
    .unwrap_err();
    assert_eq!(err, LeaseError::no_such_bucket());
    assert!(err.to_string().contains("bucket does not exist"), "{err}");
}

/// s3rver ignores conditional headers: the probe must say so and a checked
/// acquire must refuse instead of "succeeding" twice.
#[test]
fn s3rver_is_flagged_and_leasing_on_it_is_refused() {
    let s3rver = S3rver::start(BUCKET).expect("s3rver starts (run `make setup` first)");
    let s = store(&s3rver_settings(&s3rver));
    let report = run(
        &s,
        Probe::new(config(Protocol::Cas, "jobs/probe", "p", TTL), os_entropy()),
    )
    .expect("probe runs");
    let failed = failed_checks(&report);
    assert!(failed.contains(&"second_create_refused"), "{report}");
    assert!(failed.contains(&"if_match_stale_refused"), "{report}");
    for protocol in Protocol::ALL {
        let cfg = config(protocol, "jobs/unsafe", "a", TTL);
        let op = LeaseOp::acquire(cfg.clone(), Entropy::from_seed(1));
        match run(&s, Checked::new(cfg, os_entropy(), op)) {
            Err(LeaseError::UnsafeStore { check, .. }) => {
                assert_eq!(check, "second_create_refused")
            }
            other => panic!("{protocol}: expected UnsafeStore, got {other:?}"),
        }
    }
    // An unchecked acquire does "succeed" there (and lands on disk, which
    // shows the check below can see a write)...
    let cfg = config(Protocol::Cas, "jobs/unchecked", "a", TTL);
    acquired(run(&s, LeaseOp::acquire(cfg, os_entropy())));
    let files = walk(&s3rver.data_dir());
    assert!(
        files.iter().any(|p| p.contains("jobs/unchecked")),
        "{files:?}"
    );
    // ...while the refused ones wrote nothing at their key.
    let leftovers: Vec<_> = files.iter().filter(|p| p.contains("jobs/unsafe")).collect();
    assert!(
        leftovers.is_empty(),
        "the refused acquire wrote {leftovers:?}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.display().to_string());
            if p.is_dir() {
                out.extend(walk(&p));
            }
        }
    }
    out
}
