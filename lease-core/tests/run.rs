//! One run of a job under a lease (`Leases::run`, `lease_core::client::run`)
//! and the holding loop under it, against the in-memory store on a
//! virtual clock.

mod support;

use lease_core::client::Step;
use lease_core::store::PutCondition;
use lease_core::Clock as _;
use lease_core::{
    LeaseConfig, LeaseRecord, Leases, LostReason, MemStore, Run, RunError, RunOutcome, StoreOp,
    VirtualClock,
};
use std::future::pending;
use std::time::Duration;
use support::{entropy, mem_world as world};

const KEY: &str = "locks/nightly";

/// A client with a 30 s ttl that probes the store first if `probe`.
fn client(
    holder: &str,
    store: &MemStore,
    clock: &VirtualClock,
    probe: bool,
) -> Leases<MemStore, VirtualClock> {
    let cfg = LeaseConfig::new("", holder, Duration::from_secs(30));
    Leases::with_config(store.clone(), clock.clone(), cfg, probe, entropy).unwrap()
}

fn record(store: &MemStore) -> LeaseRecord {
    support::record_at(store, KEY)
}

type Client = Leases<MemStore, VirtualClock>;

/// Clients `a` and `b` on one store, `b` not probing; `a` has acquired
/// [`KEY`] (a 30 s lease).
fn b_behind_a() -> (Client, Client, VirtualClock) {
    let (store, clock) = world();
    let a = client("a", &store, &clock, false);
    let b = client("b", &store, &clock, false);
    a_acquires(&a);
    (a, b, clock)
}

fn a_acquires(a: &Client) {
    let held = pollster::block_on(a.acquire(KEY)).unwrap();
    assert!(matches!(held, lease_core::AcquireOutcome::Acquired(_)));
}

/// A job that returns its token.
async fn job(token: u64) -> Result<u64, String> {
    Ok(token)
}

#[test]
fn runs_the_job_with_the_token_then_releases() {
    let (store, clock) = world();
    let a = client("a", &store, &clock, true);
    let mut steps = Vec::new();
    let run = Run::new().observe(|s| steps.push(format!("{s:?}")));
    let out =
        pollster::block_on(a.run(KEY, run, |token| async move { Ok::<_, String>(token * 10) }));
    assert_eq!(
        out.unwrap(),
        RunOutcome::Ran {
            token: 1,
            output: 10,
            recorded: false,
            missed: None,
            seat: None,
        }
    );
    assert!(a.store_checked(), "the probe ran and passed");
    assert!(
        steps[0].starts_with("Acquired { lease: Lease { key: \"locks/nightly\", token: 1,")
            && steps[0].ends_with("tick: None, seat: None }"),
        "{steps:?}"
    );
    assert_eq!(
        steps.last().map(String::as_str),
        Some("Released(Released { token: 1 })"),
        "the release's outcome is the last step"
    );
    let r = record(&store);
    assert!(r.released && r.token == 1 && r.holder == "a", "{r:?}");
    // The next tick acquires with the next token.
    let out = pollster::block_on(a.run(
        KEY,
        Run::new(),
        |token| async move { Ok::<_, String>(token) },
    ));
    assert_eq!(
        out.unwrap(),
        RunOutcome::Ran {
            token: 2,
            output: 2,
            recorded: false,
            missed: None,
            seat: None,
        }
    );
}

#[test]
fn a_second_run_is_skipped_while_the_first_holds() {
    let (store, clock) = world();
    let a = client("a", &store, &clock, true);
    let b = client("b", &store, &clock, false);
    let mut skipped = None;
    let out = pollster::block_on(a.run(KEY, Run::new(), |token| {
        // While a's job runs, b's tick fires.
        let observe = |s: Step<'_>| {
            if let Step::Skipped(busy) = s {
                skipped = Some(busy.holder.clone());
            }
        };
        let b_out = pollster::block_on(b.run(KEY, Run::new().observe(observe), |_| async {
            Ok::<_, String>("b ran")
        }));
        async move { Ok::<_, String>((token, b_out.unwrap())) }
    }));
    let RunOutcome::Ran {
        token: 1,
        output:
            (
                1,
                RunOutcome::Skipped {
                    holder,
                    token,
                    expires_at_ms,
                },
            ),
        ..
    } = out.unwrap()
    else {
        panic!("a runs, b skips")
    };
    assert_eq!((holder.as_str(), token), ("a", 1));
    assert!(expires_at_ms >= 1_790_000_030_000, "{expires_at_ms}");
    assert_eq!(skipped.as_deref(), Some("a"));
}

#[test]
fn a_failed_job_still_releases() {
    let (store, clock) = world();
    let a = client("a", &store, &clock, false);
    let out = pollster::block_on(a.run(KEY, Run::new(), |_| async { Err::<(), _>("disk full") }));
    let err = out.unwrap_err();
    assert_eq!(
        (err.kind(), err.to_string().as_str()),
        ("JobFailed", "disk full")
    );
    assert!(record(&store).released);
}

#[test]
fn a_lost_lease_stops_the_job() {
    let (store, clock) = world();
    let a = client("a", &store, &clock, false);
    let mut lost_seen = false;
    let observe =
        |s: Step<'_>| lost_seen |= matches!(s, Step::Hold(lease_core::Event::Lost { .. }));
    let out = pollster::block_on(a.run(KEY, Run::new().observe(observe), |_| {
        // An operator hands the lease to someone else mid-job; the job
        // itself never finishes on its own.
        let mut other = record(&store);
        other.holder = "b".into();
        other.token += 1;
        other.nonce = "other".into();
        store.apply(&StoreOp::Put {
            key: KEY.into(),
            body: other.encode(),
            condition: PutCondition::None,
        });
        pending::<Result<(), String>>()
    }));
    let err = out.unwrap_err();
    assert!(
        matches!(
            err,
            RunError::LeaseLost {
                token: 1,
                reason: LostReason::TakenBy { .. }
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.kind(), "LeaseLost");
    assert!(lost_seen);
    assert_eq!(
        record(&store).holder,
        "b",
        "the new holder's record is untouched"
    );
}

/// The in-memory store, counting the calls it answers.
#[derive(Clone)]
struct Counted {
    store: MemStore,
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl lease_core::Store for Counted {
    fn call(&self, op: StoreOp) -> impl std::future::Future<Output = lease_core::StoreReply> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        std::future::ready(self.store.apply(&op))
    }
}

fn ticked(
    protocol: lease_core::Protocol,
) -> (Leases<Counted, VirtualClock>, Counted, VirtualClock) {
    let (store, clock) = world();
    let counted = Counted {
        store,
        calls: Default::default(),
    };
    let mut cfg = LeaseConfig::new("", "a", Duration::from_secs(30));
    cfg.protocol = protocol;
    let s = Leases::with_config(counted.clone(), clock.clone(), cfg, false, entropy).unwrap();
    (s, counted, clock)
}

fn calls(c: &Counted) -> usize {
    c.calls.swap(0, std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn a_completed_tick_delivered_again_is_answered_from_the_record_for_one_get() {
    use lease_core::tick::Tick;
    use lease_core::Protocol;
    let (s, store, clock) = ticked(Protocol::Cas);
    let tick = Tick::new("cron:0 * * * *@1790000000000").unwrap();
    let job = |token: u64| async move { Ok::<_, String>(format!("done by {token}")) };
    let first = pollster::block_on(s.run(KEY, Run::new().tick(&tick), job));
    assert!(
        matches!(first, Ok(RunOutcome::Ran { token: 1, .. })),
        "{first:?}"
    );
    // The first run on a key: the tick's read finds nothing, then the
    // create (no second read) and the release.
    let first_cost = calls(&store);
    clock.advance(Duration::from_secs(5));
    let again = pollster::block_on(s.run(KEY, Run::new().tick(&tick), job));
    match again {
        Ok(RunOutcome::AlreadyRan {
            tick: t,
            token: 1,
            result: Some(result),
            ..
        }) => {
            assert_eq!(t, tick.id());
            assert_eq!(result, "done by 1");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(calls(&store), 1, "a duplicate costs one GET");
    // A new tick costs what a run without one does on a key in use: the
    // GET, the PUT that acquires, the PUT that releases (and records the
    // tick).
    let next = Tick::new("cron:0 * * * *@1790003600000").unwrap();
    let out = pollster::block_on(s.run(KEY, Run::new().tick(&next), job));
    assert!(
        matches!(out, Ok(RunOutcome::Ran { token: 2, .. })),
        "{out:?}"
    );
    assert_eq!((first_cost, calls(&store)), (3, 3));
    // Both ticks are in the record.
    let runs = support::record_at(&store.store, KEY).runs;
    assert_eq!(runs.len(), 2, "{runs:?}");
}

/// "Keeps completed ticks in the record for `retention` ... A duplicate
/// delivered later runs again" (`Run::tick_retention`).
#[test]
fn a_duplicate_delivered_after_the_retention_runs_again() {
    use lease_core::tick::Tick;
    use lease_core::Protocol;
    let (s, _store, clock) = ticked(Protocol::Cas);
    let keep = Duration::from_secs(60);
    let tick = Tick::new("batch-7").unwrap();
    let job = |token: u64| async move { Ok::<_, String>(format!("done by {token}")) };
    let first = pollster::block_on(s.run(KEY, Run::new().tick(&tick).tick_retention(keep), job));
    assert!(
        matches!(first, Ok(RunOutcome::Ran { token: 1, .. })),
        "{first:?}"
    );
    // Within the retention: already ran.
    clock.advance(Duration::from_secs(30));
    let again = pollster::block_on(s.run(KEY, Run::new().tick(&tick).tick_retention(keep), job));
    assert!(
        matches!(again, Ok(RunOutcome::AlreadyRan { .. })),
        "{again:?}"
    );
    // Past it: forgotten by the next write, so the tick runs again. (The
    // record a run reads still lists the tick until a write drops it: a
    // run of another tick writes the record without it.)
    clock.advance(Duration::from_secs(60));
    let other = Tick::new("batch-8").unwrap();
    let out = pollster::block_on(s.run(KEY, Run::new().tick(&other).tick_retention(keep), job));
    assert!(matches!(out, Ok(RunOutcome::Ran { .. })), "{out:?}");
    let late = pollster::block_on(s.run(KEY, Run::new().tick(&tick).tick_retention(keep), job));
    assert!(matches!(late, Ok(RunOutcome::Ran { .. })), "{late:?}");
}

#[test]
fn a_failed_tick_runs_again_on_the_retry() {
    use lease_core::tick::Tick;
    use lease_core::Protocol;
    for protocol in [Protocol::Cas, Protocol::Epochs] {
        let (s, _, _) = ticked(protocol);
        let tick = Tick::new("t").unwrap();
        let failed = pollster::block_on(s.run(KEY, Run::new().tick(&tick), |_| async {
            Err::<String, _>("boom".to_string())
        }));
        assert!(matches!(failed, Err(RunError::Job(_))), "{failed:?}");
        let retried = pollster::block_on(s.run(KEY, Run::new().tick(&tick), |_| async {
            Ok::<_, String>("fine".to_string())
        }));
        let Ok(RunOutcome::Ran { token, .. }) = retried else {
            panic!("{protocol}: {retried:?}")
        };
        let third = pollster::block_on(s.run(KEY, Run::new().tick(&tick), |_| async {
            Ok::<_, String>("again".to_string())
        }));
        assert!(
            matches!(third, Ok(RunOutcome::AlreadyRan { token: t, .. }) if t == token),
            "{protocol}: {third:?}"
        );
    }
}

#[test]
fn a_tick_with_another_payload_or_on_the_mutex_is_refused_before_anything_runs() {
    use lease_core::tick::{Tick, TickError};
    use lease_core::Protocol;
    let (s, store, _) = ticked(Protocol::Cas);
    let one = Tick::from_payload(&serde_json::json!({"slot": 7, "n": 1}), "/slot").unwrap();
    let other = Tick::from_payload(&serde_json::json!({"slot": 7, "n": 2}), "/slot").unwrap();
    let job = |_| async { Ok::<_, String>("x".to_string()) };
    assert!(pollster::block_on(s.run(KEY, Run::new().tick(&one), job)).is_ok());
    calls(&store);
    let refused = pollster::block_on(s.run(KEY, Run::new().tick(&other), job));
    assert!(
        matches!(
            refused,
            Err(RunError::Tick(TickError::PayloadMismatch { .. }))
        ),
        "{refused:?}"
    );
    // Refused at the read: one GET, nothing written.
    assert_eq!(calls(&store), 1, "refused by the first read");
    assert_eq!(support::record_at(&store.store, KEY).token, 1);
    let (m, store, _) = ticked(Protocol::Mutex);
    let refused = pollster::block_on(m.run(KEY, Run::new().tick(&one), job));
    assert!(
        matches!(refused, Err(RunError::Tick(TickError::NoRecord))),
        "{refused:?}"
    );
    assert_eq!(calls(&store), 0, "nothing sent");
}

#[test]
fn a_run_without_time_for_its_requests_does_not_start_and_a_long_job_is_stopped_in_time() {
    use lease_core::client::{release_reserve, time_needed};
    use lease_core::tick::Tick;
    use lease_core::Clock;
    let (store, clock) = world();
    let counted = Counted {
        store,
        calls: Default::default(),
    };
    let cfg = LeaseConfig::new(KEY, "a", Duration::from_secs(60));
    let s = Leases::with_config(counted.clone(), clock.clone(), cfg.clone(), false, entropy);
    let s = s.unwrap();
    // ttl 60 s: request timeout 5 s, so a write and a retry after the
    // 2 s backoff; twice that to start.
    assert_eq!(release_reserve(&cfg), Duration::from_secs(12));
    assert_eq!(time_needed(&cfg), Duration::from_secs(24));
    let tick = Tick::new("t").unwrap();
    let job = |token: u64| async move { Ok::<_, String>(format!("by {token}")) };

    // 20 s left: refused before any request.
    let short = Run::new().tick(&tick).within(Duration::from_secs(20));
    let out = pollster::block_on(s.run(KEY, short, job));
    match out {
        Err(RunError::NoTime { remaining, needed }) => {
            assert_eq!(
                (remaining, needed),
                (Duration::from_secs(20), Duration::from_secs(24))
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(calls(&counted), 0, "nothing sent");

    // 40 s left and a job that would run on: stopped 12 s before the
    // end, the lease released, the tick not recorded.
    let started = clock.now().mono;
    let limited = Run::new().tick(&tick).within(Duration::from_secs(40));
    let out = pollster::block_on(s.run(KEY, limited, |_| pending::<Result<String, String>>()));
    match &out {
        Err(e @ RunError::Stopped { token: 1, ran_for }) => {
            assert_eq!(e.kind(), "Stopped");
            assert!(*ran_for <= Duration::from_secs(28), "{ran_for:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(clock.now().mono - started <= Duration::from_secs(40));
    let r = support::record_at(&counted.store, KEY);
    assert!(
        r.released && r.runs.is_empty(),
        "released, not recorded: {r:?}"
    );

    // The retry, with time enough, runs the tick; a job that ends in
    // time is not touched by the limit.
    let retry = Run::new().tick(&tick).within(Duration::from_secs(40));
    let out = pollster::block_on(s.run(KEY, retry, job));
    assert!(
        matches!(
            &out,
            Ok(RunOutcome::Ran {
                token: 2,
                recorded: true,
                ..
            })
        ),
        "{out:?}"
    );
    // A plain run (no tick) under a limit.
    let plain = Run::new().within(Duration::from_secs(40));
    let out = pollster::block_on(s.run(KEY, plain, job));
    assert!(
        matches!(
            &out,
            Ok(RunOutcome::Ran {
                token: 3,
                recorded: false,
                ..
            })
        ),
        "{out:?}"
    );
}

#[test]
fn a_run_reports_the_ticks_of_its_schedule_that_never_ran() {
    use lease_core::schedule::Schedule;
    use lease_core::tick::Tick;
    use lease_core::Protocol;
    let (s, store, _) = ticked(Protocol::Cas);
    let every_5m = Schedule::parse("*/5 * * * *").unwrap();
    let tick =
        |minute: u64| Tick::cron("*/5 * * * *", 1_795_514_400_000 + minute * 60_000).unwrap();
    let job = |token: u64| async move { Ok::<_, String>(format!("by {token}")) };
    let run = |t: &Tick| {
        let run = Run::new().tick(t).schedule(&every_5m);
        match pollster::block_on(s.run(KEY, run, job)) {
            Ok(RunOutcome::Ran { missed, .. }) => missed,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        run(&tick(0)),
        None,
        "the first run on a key: nothing to compare"
    );
    assert_eq!(run(&tick(5)), None, "the next tick: none missed");
    // 10:10 and 10:15 never came; 10:20 reports them.
    let missed = run(&tick(20)).expect("two missed");
    assert_eq!(missed.count, 2);
    assert_eq!(missed.since_ms, 1_795_514_400_000 + 5 * 60_000);
    assert_eq!(
        missed.first_ms,
        vec![
            1_795_514_400_000 + 10 * 60_000,
            1_795_514_400_000 + 15 * 60_000
        ]
    );
    // A late delivery of 10:10 runs (it never did) and reports nothing
    // missed before it; the record keeps when each tick was due.
    assert_eq!(run(&tick(10)), None);
    let runs = support::record_at(&store.store, KEY).runs;
    assert!(runs.iter().all(|r| r.scheduled.is_some()), "{runs:?}");
}

#[test]
fn a_due_time_the_record_cannot_keep_is_dropped_not_written() {
    use lease_core::tick::Tick;
    use lease_core::Protocol;
    use lease_core::UnixMillis;
    // A scheduled time in nanoseconds by mistake: the tick goes without
    // one, and the record stays readable.
    let (s, store, _) = ticked(Protocol::Cas);
    let tick = Tick::new("t")
        .unwrap()
        .scheduled_at(UnixMillis(1_795_514_400_000_000_000));
    assert_eq!(tick.scheduled(), None);
    let job = |_| async { Ok::<_, String>("ok".to_string()) };
    assert!(pollster::block_on(s.run(KEY, Run::new().tick(&tick), job)).is_ok());
    let runs = support::record_at(&store.store, KEY).runs;
    assert_eq!(runs.len(), 1);
}

/// The shared virtual clock, its wall time `offset_ms` off the store's: a
/// host whose clock disagrees with the store's.
#[derive(Clone)]
struct Skewed(VirtualClock, i64);

impl lease_core::Clock for Skewed {
    fn now(&self) -> lease_core::Now {
        let now = self.0.now();
        lease_core::Now {
            mono: now.mono,
            wall: lease_core::UnixMillis((now.wall.0 as i64 + self.1) as u64),
        }
    }
    fn sleep_until(&self, at: lease_core::Mono) -> impl std::future::Future<Output = ()> {
        self.0.sleep_until(at)
    }
}

#[test]
fn slot_runs_follow_the_stores_clock_not_the_hosts() {
    use lease_core::schedule::Schedule;
    use lease_core::tick::Slots;
    let (store, clock) = world();
    let host = |name: &str, offset_ms: i64| {
        let cfg = LeaseConfig::new("", name, Duration::from_secs(30));
        let clock = Skewed(clock.clone(), offset_ms);
        Leases::with_config(store.clone(), clock, cfg, false, entropy).unwrap()
    };
    // One host 45 s ahead of the store, one 45 s behind: by their own
    // clocks, the store's minute is the next one and the one before.
    let (ahead, behind) = (host("ahead", 45_000), host("behind", -45_000));
    let slots = Slots::new("nightly", Schedule::parse("1m").unwrap())
        .unwrap()
        .late_after(Some(Duration::from_secs(30)));
    let job = |token| async move { Ok::<_, String>(token) };
    let run = |leases: &Leases<MemStore, Skewed>| {
        pollster::block_on(leases.run(KEY, Run::new().slot(&slots), job))
    };
    // The store's clock is 20 s into a minute (EPOCH).
    let first = run(&ahead).unwrap();
    assert!(
        matches!(
            first,
            RunOutcome::Ran {
                token: 1,
                recorded: true,
                ..
            }
        ),
        "{first:?}"
    );
    let slot = record(&store).runs[0].tick.clone();
    assert!(
        slot.starts_with("slot:nightly@") && slot.ends_with(":00Z"),
        "{slot}"
    );
    clock.advance(Duration::from_secs(1));
    match run(&behind).unwrap() {
        RunOutcome::AlreadyRan { tick, token: 1, .. } => assert_eq!(tick, slot),
        other => panic!("{other:?}"),
    }
    // 5 s into the next minute by the store's clock: the next slot.
    clock.advance(Duration::from_secs(44));
    let next = run(&behind).unwrap();
    assert!(
        matches!(
            next,
            RunOutcome::Ran {
                token: 2,
                recorded: true,
                ..
            }
        ),
        "{next:?}"
    );
    assert_ne!(record(&store).runs.last().unwrap().tick, slot);
    // 40 s into the minute after, more than the 30 s allowed: not run,
    // and nothing written.
    clock.advance(Duration::from_secs(95));
    let before = store.get(KEY);
    match run(&ahead).unwrap() {
        RunOutcome::TooLate { late_by_ms, .. } => assert_eq!(late_by_ms, 40_000),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get(KEY), before);
}

/// "A run without a tick waits up to `wait` while another holder's lease
/// is live ... and is skipped only after that" (`Run::wait`, what
/// `lease run --wait` asks for).
#[test]
fn a_plain_run_told_to_wait_runs_once_the_holders_lease_lapses() {
    let (a, b, clock) = b_behind_a();
    // Not told to wait: skipped behind a's live lease.
    let out = pollster::block_on(b.run(KEY, Run::new(), job)).unwrap();
    assert!(matches!(out, RunOutcome::Skipped { .. }), "{out:?}");
    // Told to wait longer than a's ttl: a's lease lapses and b runs.
    let t0 = clock.now().mono;
    let how = Run::new().wait(Duration::from_secs(60));
    let out = pollster::block_on(b.run(KEY, how, job)).unwrap();
    assert!(matches!(out, RunOutcome::Ran { token: 2, .. }), "{out:?}");
    assert!(
        clock.now().mono - t0 >= Duration::from_secs(25),
        "it waited for the lapse"
    );
    // Told to wait less than the lease has left: skipped after the wait.
    a_acquires(&a);
    let how = Run::new().wait(Duration::from_secs(5));
    let out = pollster::block_on(b.run(KEY, how, job)).unwrap();
    assert!(matches!(out, RunOutcome::Skipped { .. }), "{out:?}");
}

#[test]
fn a_waiting_run_with_a_time_limit_waits_no_longer_than_its_time() {
    let (_a, b, clock) = b_behind_a();
    // 28 s left and told to wait a minute behind a's 30 s lease: the wait
    // ends when the job would be stopped, skipped; not at the lapse, with
    // the lease won and given back unrun for want of time.
    let t0 = clock.now().mono;
    let how = Run::new()
        .within(Duration::from_secs(28))
        .wait(Duration::from_secs(60));
    let out = pollster::block_on(b.run(KEY, how, job));
    let waited = clock.now().mono - t0;
    assert!(matches!(out, Ok(RunOutcome::Skipped { .. })), "{out:?}");
    // Its last attempt left an acquisition's and a release's share of the
    // time: a lease won then is won before the job would be stopped.
    let left = Duration::from_secs(28).saturating_sub(waited);
    let needed = lease_core::client::time_needed(&b.config(KEY));
    assert!(left >= needed, "waited {waited:?}, {left:?} left of 28 s");
}

/// A store that never answers a write once `down` is set: each attempt
/// of a release waits out its request timeout.
#[derive(Clone)]
struct WritesHang(MemStore, std::sync::Arc<std::sync::atomic::AtomicBool>);

impl lease_core::Store for WritesHang {
    async fn call(&self, op: StoreOp) -> lease_core::StoreReply {
        if op.is_write() && self.1.load(std::sync::atomic::Ordering::Relaxed) {
            return pending().await;
        }
        self.0.apply(&op)
    }
}

/// The release of a run with a time limit is cut short at the run's end
/// when the store leaves it hanging. (A renewal under way when a job is
/// stopped: `cas_lease.rs`, by hand.)
#[test]
fn a_run_with_a_time_limit_returns_in_time_when_its_release_cannot_finish() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (store, clock) = world();
    let down = std::sync::Arc::new(AtomicBool::new(false));
    let hanging = WritesHang(store.clone(), down.clone());
    let cfg = LeaseConfig::new("", "a", Duration::from_secs(30));
    let a = Leases::with_config(hanging, clock.clone(), cfg, false, entropy).unwrap();
    // 32 s left (the job stopped at 20 s, 12 s kept for the release); the
    // job ends at 19 s, as the store stops answering writes: the release,
    // whose attempts wait out their request timeouts until its own
    // deadline (the ttl), is cut short at the run's end, and the lease,
    // not given back, is kept as a claim the next run takes over.
    let t0 = clock.now().mono;
    let (c, d) = (clock.clone(), down.clone());
    let job = move |token: u64| async move {
        c.sleep_until(t0 + Duration::from_secs(19)).await;
        d.store(true, Ordering::Relaxed);
        Ok::<_, String>(token)
    };
    let mut steps = Vec::new();
    let how = Run::new()
        .within(Duration::from_secs(32))
        .observe(|s| steps.push(format!("{s:?}")));
    let out = pollster::block_on(a.run(KEY, how, job));
    let took = clock.now().mono - t0;
    assert!(
        matches!(out, Ok(RunOutcome::Ran { token: 1, .. })),
        "{out:?}"
    );
    assert!(took <= Duration::from_secs(32), "returned after {took:?}");
    assert!(
        steps
            .last()
            .is_some_and(|s| s.starts_with("ReleaseFailed(GaveUp")),
        "{steps:?}"
    );
    assert_eq!(a.claims(KEY).len(), 1, "the lease is kept as a claim");
    // The store answers again: the next run takes over the lease left.
    down.store(false, Ordering::Relaxed);
    let next = pollster::block_on(a.run(
        KEY,
        Run::new(),
        |token| async move { Ok::<_, String>(token) },
    ));
    assert!(
        matches!(next, Ok(RunOutcome::Ran { token: 2, .. })),
        "{next:?}"
    );
}

/// Completed ticks with the longest results, written by a holder whose
/// name and `meta` take all a record leaves them: every record stays
/// readable (at most `MAX_RECORD_BYTES`), the oldest results kept as
/// digests as needed, and every tick answered from the record. Before,
/// the record passed the size every client refuses, and the key was
/// stuck.
#[test]
fn ticks_with_long_results_keep_their_digests_and_the_record_stays_readable() {
    use lease_core::record::{CALLER_BYTES, MAX_META_ENTRIES, MAX_RECORD_BYTES};
    use lease_core::tick::{Tick, MAX_RESULT_BYTES, MAX_RUNS};
    // (The mutex keeps no ticks: its lock is deleted on release.)
    for protocol in [lease_core::Protocol::Cas, lease_core::Protocol::Epochs] {
        let (store, clock) = world();
        let holder = "h".repeat(400);
        let mut cfg = LeaseConfig::new("", &holder, Duration::from_secs(30));
        cfg.protocol = protocol;
        // `"kNN":"…",` per entry, beside the holder's name in quotes.
        let len = (CALLER_BYTES - holder.len() - 2) / (MAX_META_ENTRIES - 1) - 9;
        cfg.meta = (0..MAX_META_ENTRIES - 1)
            .map(|i| (format!("k{i:02}"), "v".repeat(len)))
            .collect();
        let a = Leases::with_config(store.clone(), clock.clone(), cfg, false, entropy)
            .expect("valid settings");
        // Results that JSON escapes at twice their length.
        let result = "\"".repeat(MAX_RESULT_BYTES);
        let mut last = None;
        for i in 0..MAX_RUNS + 2 {
            let tick = Tick::new(format!("t-{i:03}-{}", "x".repeat(100))).unwrap();
            let job = |_| async { Ok::<_, String>(result.clone()) };
            let ran = pollster::block_on(a.run(KEY, Run::new().tick(&tick), job));
            assert!(
                matches!(ran, Ok(RunOutcome::Ran { recorded: true, .. })),
                "{protocol} {i}: {ran:?}"
            );
            clock.advance(Duration::from_secs(1));
            last = Some(tick);
        }
        let seen = pollster::block_on(a.inspect(KEY))
            .expect("readable")
            .expect("a record");
        // The canonical body: what was written.
        let bytes = seen.record.encode().len();
        let kept = seen.record.runs.len();
        assert_eq!(kept, MAX_RUNS, "{protocol}: {kept} ticks kept");
        assert!(bytes <= MAX_RECORD_BYTES, "{protocol}: {bytes} bytes");
        let digests = seen.record.runs.iter().filter(|r| {
            r.result
                .as_deref()
                .is_some_and(|r| r.starts_with("fnv1a64:"))
        });
        let digests = digests.count();
        assert!(digests > 0, "{protocol}: no result kept as a digest");
        println!("{protocol}: {bytes} bytes, {kept} ticks kept, {digests} results as digests");
        let tick = last.expect("a tick");
        let again = pollster::block_on(a.run(KEY, Run::new().tick(&tick), |_| async {
            Ok::<_, String>(String::new())
        }));
        assert!(
            matches!(again, Ok(RunOutcome::AlreadyRan { .. })),
            "{protocol}: {again:?}"
        );
    }
}
