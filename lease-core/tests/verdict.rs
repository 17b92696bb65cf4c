//! The capability probe's verdict, shared by the fleet
//! (`lease_core::protocol::verdict`): a fleet probes once, every later
//! client reads one object, one client probes at a time, a probe that
//! cannot finish makes the fleet back off, a refusal is kept, and a stale,
//! foreign or abandoned verdict is probed over. Each through the entry
//! users call, [`Leases::check_store`], or the machine it runs.

mod support;

use lease_core::protocol::{
    verdict_key, SharedProbe, Verdict, PROBE_BUDGET, PROBE_CLAIM_MARGIN, PROBE_FIRST_BACKOFF,
    VERDICT_TRUSTED_FOR,
};
use lease_core::store::{PutCondition, ReplyKind};
use lease_core::{
    Clock, LeaseConfig, LeaseError, Leases, Machine, MemStore, Output, Protocol, Store, StoreOp,
    StoreReply, UnixMillis, VirtualClock,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Blind, Counted};

const KEY: &str = "locks/job";

fn cfg(protocol: Protocol) -> LeaseConfig {
    let mut cfg = LeaseConfig::new(KEY, "host-1", Duration::from_secs(30));
    cfg.protocol = protocol;
    cfg
}

/// A new client (a new process: nothing in memory) on `store`.
fn client<S: Store>(store: S, clock: &VirtualClock) -> Leases<S, VirtualClock> {
    let mut template = cfg(Protocol::Cas);
    template.key.clear();
    Leases::with_config(store, clock.clone(), template, true, support::entropy).expect("valid")
}

fn check<S: Store>(leases: &Leases<S, VirtualClock>) -> Result<(), LeaseError> {
    pollster::block_on(leases.check_store(KEY))
}

fn kept(store: &MemStore) -> Verdict {
    let (_, body) = store.get(&verdict_key(KEY)).expect("a verdict is kept");
    Verdict::decode(&body).expect("a verdict")
}

/// Scratch objects of probes (every key under `<key>.probe/` but the verdict).
fn scratch(store: &MemStore) -> Vec<String> {
    store
        .keys(&format!("{KEY}.probe/"))
        .into_iter()
        .filter(|k| *k != verdict_key(KEY))
        .collect()
}

#[test]
fn a_fleet_probes_once_then_each_new_client_reads_one_object() {
    let (store, clock) = support::mem_world();
    let calls = Arc::new(AtomicU64::new(0));
    let first = client(Counted(store.clone(), calls.clone()), &clock);
    check(&first).expect("a good store");
    let probed = calls.swap(0, Ordering::Relaxed);
    assert!(probed >= 12, "the first client probes: {probed} calls");
    assert!(
        matches!(kept(&store), Verdict::Passed { ref safe, .. } if safe.len() == 3),
        "{:?}",
        kept(&store)
    );
    assert_eq!(scratch(&store), Vec::<String>::new(), "nothing left behind");
    for n in 0..5 {
        clock.advance(Duration::from_secs(3600));
        let next = client(Counted(store.clone(), calls.clone()), &clock);
        check(&next).expect("trusted");
        assert!(next.store_checked());
        assert_eq!(calls.swap(0, Ordering::Relaxed), 1, "client {n}: one GET");
        // And nothing more within the client.
        check(&next).expect("trusted");
        assert_eq!(calls.load(Ordering::Relaxed), 0);
    }
    // A day after the probe, the verdict is stale: the next client probes.
    clock.advance(VERDICT_TRUSTED_FOR);
    check(&client(Counted(store.clone(), calls.clone()), &clock)).expect("a good store");
    assert!(calls.swap(0, Ordering::Relaxed) >= 12, "probed again");
}

/// Eight clients start at once on an empty bucket (their calls
/// interleaved one by one): one claims the probe and probes, the others
/// wait for its verdict.
#[test]
fn clients_that_start_at_once_probe_once() {
    let (store, clock) = support::mem_world();
    let mut machines: Vec<SharedProbe> = (0..8)
        .map(|_| SharedProbe::new(cfg(Protocol::Cas), support::entropy()))
        .collect();
    let mut outcomes: Vec<Option<Result<Verdict, LeaseError>>> = vec![None; machines.len()];
    let mut scratch_ids = std::collections::BTreeSet::new();
    let mut wake = vec![clock.now().mono; machines.len()];
    while outcomes.iter().any(Option::is_none) {
        let mut progressed = false;
        for (i, m) in machines.iter_mut().enumerate() {
            if outcomes[i].is_some() || clock.now().mono < wake[i] {
                continue;
            }
            match m.poll(clock.now()) {
                Output::Call(id, op) => {
                    if let StoreOp::Put { key, .. } = &op {
                        if key != &verdict_key(KEY) {
                            let id = key.trim_start_matches(&format!("{KEY}.probe/"));
                            scratch_ids.insert(id.split('.').next().unwrap().to_string());
                        }
                    }
                    let reply = store.apply(&op);
                    m.handle_reply(clock.now(), id, reply);
                    progressed = true;
                }
                Output::Done(out) => {
                    outcomes[i] = Some(out.map(|s| s.verdict));
                    progressed = true;
                }
                Output::Wait(at) => wake[i] = at,
                Output::Event(_) => progressed = true,
            }
        }
        if !progressed {
            let next = wake.iter().copied().min().unwrap();
            clock.advance(Duration::from_millis(
                next.0.saturating_sub(clock.now().mono.0).max(1),
            ));
        }
    }
    assert_eq!(scratch_ids.len(), 1, "one probe: {scratch_ids:?}");
    for out in outcomes {
        assert!(
            matches!(out, Some(Ok(Verdict::Passed { .. }))),
            "every client ends with the verdict: {out:?}"
        );
    }
}

/// A store that answers 503 to every write but the verdict's while `slow`
/// is set (a throttled or overloaded store): the probe cannot finish.
#[derive(Clone)]
struct Overloaded {
    store: MemStore,
    slow: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
}

impl Store for Overloaded {
    async fn call(&self, op: StoreOp) -> StoreReply {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.slow.load(Ordering::Relaxed) && op.is_write() && op.key() != verdict_key(KEY) {
            return StoreReply::new(ReplyKind::Throttled { retry_after: None });
        }
        self.store.apply(&op)
    }
}

#[test]
fn a_probe_that_cannot_finish_makes_the_fleet_back_off_instead_of_retrying() {
    let (store, clock) = support::mem_world();
    let slow = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicU64::new(0));
    let over = Overloaded {
        store: store.clone(),
        slow: slow.clone(),
        calls: calls.clone(),
    };
    let started = clock.now().mono;
    let error = check(&client(over.clone(), &clock)).expect_err("cannot finish");
    assert!(matches!(error, LeaseError::GaveUp { .. }), "{error}");
    let took = clock.now().mono - started;
    assert!(
        took >= Duration::from_secs(3) && took <= PROBE_BUDGET * 2,
        "the probe's own budget, not the lease's op_timeout: {took:?}"
    );
    assert!(
        matches!(kept(&store), Verdict::Unfinished { failures: 1, .. }),
        "{:?}",
        kept(&store)
    );
    assert_eq!(scratch(&store), Vec::<String>::new(), "cleaned up");
    // Every restart within the backoff: one GET and an error that says
    // when the next probe is due (a new process cannot wait that long
    // within the time its run has: the run's 25 s, short of a backoff and a probe).
    for _ in 0..3 {
        calls.store(0, Ordering::Relaxed);
        let leases = client(over.clone(), &clock);
        let error = pollster::block_on(leases.run(
            KEY,
            lease_core::Run::new().within(Duration::from_secs(25)),
            |_| async { Ok::<_, String>(String::new()) },
        ))
        .expect_err("backing off");
        assert!(
            error.to_string().contains("no client probes again for"),
            "{error}"
        );
        assert_eq!(calls.load(Ordering::Relaxed), 1, "one GET");
    }
    // A client with time waits the backoff out and probes, once the
    // store is well again.
    slow.store(false, Ordering::Relaxed);
    check(&client(over.clone(), &clock)).expect("probed after the backoff");
    assert!(matches!(kept(&store), Verdict::Passed { .. }));
    // Failing again, the backoff doubles.
    clock.advance(VERDICT_TRUSTED_FOR);
    slow.store(true, Ordering::Relaxed);
    check(&client(over.clone(), &clock)).expect_err("cannot finish");
    assert!(matches!(
        kept(&store),
        Verdict::Unfinished { failures: 1, .. }
    ));
    clock.advance(PROBE_FIRST_BACKOFF + Duration::from_secs(3));
    check(&client(over, &clock)).expect_err("cannot finish");
    match kept(&store) {
        Verdict::Unfinished {
            failures: 2,
            retry_at,
            at,
            ..
        } => assert_eq!(
            retry_at.0 - at.0,
            2 * PROBE_FIRST_BACKOFF.as_millis() as u64
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_refusal_is_kept_and_refuses_the_next_client_without_a_probe() {
    let (store, clock) = support::mem_world();
    let error = check(&client(Blind(store.clone()), &clock)).expect_err("unsafe");
    assert!(matches!(error, LeaseError::UnsafeStore { .. }), "{error}");
    assert!(matches!(kept(&store), Verdict::Passed { ref safe, .. } if safe.is_empty()));
    let calls = Arc::new(AtomicU64::new(0));
    let next = client(Counted(store.clone(), calls.clone()), &clock);
    let error = check(&next).expect_err("refused from the verdict");
    assert!(
        matches!(
            &error,
            LeaseError::UnsafeStore {
                check: "second_create_refused",
                ..
            }
        ) && error.to_string().contains("the probe's verdict kept at"),
        "{error}"
    );
    assert_eq!(calls.load(Ordering::Relaxed), 1, "one GET, no probe");
}

#[test]
fn a_foreign_or_other_versions_verdict_is_probed_over() {
    for body in [
        b"{\"lock\":\"someone else's\"}".to_vec(),
        br#"{"lease_probe":1,"version":"0.0.1","state":"passed","at_ms":0,"safe":["cas"],"refused":[]}"#
            .to_vec(),
    ] {
        let (store, clock) = support::mem_world();
        store.apply(&StoreOp::Put {
            key: verdict_key(KEY),
            body,
            condition: PutCondition::None,
        });
        let calls = Arc::new(AtomicU64::new(0));
        check(&client(Counted(store.clone(), calls.clone()), &clock)).expect("a good store");
        assert!(calls.load(Ordering::Relaxed) >= 12, "probed");
        assert!(matches!(kept(&store), Verdict::Passed { .. }));
    }
}

/// A claim whose prober died: the others wait until it lapses (reading
/// it now and then), then one of them probes.
#[test]
fn a_dead_probers_claim_lapses_and_the_next_client_probes() {
    let (store, clock) = support::mem_world();
    let now = clock.now().wall;
    let until = UnixMillis(now.0 + (PROBE_BUDGET + PROBE_CLAIM_MARGIN).as_millis() as u64);
    let claim = Verdict::Probing {
        at: now,
        version: env!("CARGO_PKG_VERSION").into(),
        until,
        by: "a-dead-process".into(),
        failures: 0,
    };
    store.apply(&StoreOp::Put {
        key: verdict_key(KEY),
        body: claim.encode(),
        condition: PutCondition::None,
    });
    let reads = Arc::new(Mutex::new(0u32));
    #[derive(Clone)]
    struct Reads(MemStore, Arc<Mutex<u32>>);
    impl Store for Reads {
        async fn call(&self, op: StoreOp) -> StoreReply {
            if matches!(&op, StoreOp::Get { key } if *key == verdict_key(KEY)) {
                *self.1.lock().unwrap() += 1;
            }
            self.0.apply(&op)
        }
    }
    let started = clock.now().wall;
    check(&client(Reads(store.clone(), reads.clone()), &clock)).expect("probed after the lapse");
    let waited = clock.now().wall.0 - started.0;
    assert!(
        waited >= (PROBE_BUDGET + PROBE_CLAIM_MARGIN).as_millis() as u64,
        "waited for the claim: {waited} ms"
    );
    let reads = *reads.lock().unwrap();
    assert!(
        (30..=60).contains(&reads),
        "read about once a second while waiting: {reads}"
    );
    // The dead probe counts as one that did not finish; this one did.
    assert!(matches!(kept(&store), Verdict::Passed { .. }));
}

fn put_verdict(store: &MemStore, v: &Verdict) {
    store.apply(&StoreOp::Put {
        key: verdict_key(KEY),
        body: v.encode(),
        condition: PutCondition::None,
    });
}

/// The races' refusal (`lease probe` saw two writers win) is what no
/// sequential probe can see: it stands past the hour other refusals are
/// trusted for, and a client that probes again after a day carries it
/// into the verdict it writes.
#[test]
fn a_refusal_of_the_races_stands_until_an_operator_probes_again() {
    use lease_core::protocol::{Refusal, CONCURRENT_WRITES};
    let (store, clock) = support::mem_world();
    let now = clock.now().wall.0;
    let refused = |at: u64| Verdict::Passed {
        at: UnixMillis(at),
        version: env!("CARGO_PKG_VERSION").into(),
        safe: Vec::new(),
        refused: Protocol::ALL
            .into_iter()
            .map(|protocol| Refusal {
                protocol,
                check: CONCURRENT_WRITES.into(),
                detail: "not exactly one winner in round 2 creates".into(),
            })
            .collect(),
    };
    put_verdict(&store, &refused(now - 2 * 3_600_000));
    let calls = Arc::new(AtomicU64::new(0));
    let error = check(&client(Counted(store.clone(), calls.clone()), &clock)).expect_err("refused");
    assert!(error.to_string().contains("round 2 creates"), "{error}");
    assert_eq!(calls.swap(0, Ordering::Relaxed), 1, "one GET, no probe");
    put_verdict(&store, &refused(now - 25 * 3_600_000));
    let error = check(&client(Counted(store.clone(), calls.clone()), &clock)).expect_err("refused");
    assert!(
        calls.load(Ordering::Relaxed) >= 12,
        "probed again after a day"
    );
    assert!(error.to_string().contains("round 2 creates"), "{error}");
    assert!(
        matches!(kept(&store), Verdict::Passed { ref safe, .. } if safe.is_empty()),
        "carried: {:?}",
        kept(&store)
    );
}

/// A backoff longer than the lease's `op_timeout` is waited out when the
/// check has the time (ttl 30 s: `op_timeout` 30 s; a third failure in a
/// row: 40 s).
#[test]
fn a_backoff_longer_than_the_operations_timeout_is_waited_out() {
    let (store, clock) = support::mem_world();
    let at = clock.now().wall;
    put_verdict(
        &store,
        &Verdict::unfinished(at, 3, &LeaseError::no_such_bucket()),
    );
    let started = clock.now().mono;
    check(&client(store.clone(), &clock)).expect("waited, then probed");
    assert!(clock.now().mono - started >= PROBE_FIRST_BACKOFF * 4);
    assert!(matches!(kept(&store), Verdict::Passed { .. }));
}

/// A store whose `If-Match` never matches the verdict's etag as written
/// (a quoting the server does not take): the claim over an old verdict is
/// refused, the verdict reads unchanged, and the client probes without a
/// claim rather than claiming again until its time runs out.
#[test]
fn a_claim_the_store_keeps_refusing_is_given_up_for_a_probe() {
    #[derive(Clone)]
    struct NoIfMatch(MemStore, Arc<AtomicU64>);
    impl Store for NoIfMatch {
        async fn call(&self, op: StoreOp) -> StoreReply {
            self.1.fetch_add(1, Ordering::Relaxed);
            if let StoreOp::Put {
                key,
                condition: PutCondition::IfMatch(_),
                ..
            } = &op
            {
                if *key == verdict_key(KEY) {
                    return StoreReply::new(ReplyKind::PreconditionFailed);
                }
            }
            self.0.apply(&op)
        }
    }
    let (store, clock) = support::mem_world();
    let old = clock.now().wall.0 - VERDICT_TRUSTED_FOR.as_millis() as u64 - 1;
    put_verdict(
        &store,
        &Verdict::Passed {
            at: UnixMillis(old),
            version: env!("CARGO_PKG_VERSION").into(),
            safe: vec![Protocol::Cas],
            refused: Vec::new(),
        },
    );
    let calls = Arc::new(AtomicU64::new(0));
    let started = clock.now().mono;
    check(&client(NoIfMatch(store.clone(), calls.clone()), &clock)).expect("probed");
    assert!(clock.now().mono - started < PROBE_BUDGET, "no claim loop");
    assert!(calls.load(Ordering::Relaxed) < 40, "{calls:?}");
    assert!(
        matches!(kept(&store), Verdict::Passed { at, .. } if at.0 > old),
        "a fresh verdict: {:?}",
        kept(&store)
    );
}
