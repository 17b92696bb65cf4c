//! Runs in a pool of seats (`Run::pool`), against the in-memory store on a
//! virtual clock: at most as many jobs at once as the pool has seats, each
//! with its seat's token; busy when every seat is; waiting for one.

mod support;

use lease_core::client::{seat_key, Step};
use lease_core::tick::Tick;
use lease_core::Clock as _;
use lease_core::{
    AcquireOutcome, LeaseConfig, Leases, MemStore, Protocol, Run, RunError, RunOutcome,
    VirtualClock,
};
use std::time::Duration;
use support::{entropy, mem_world as world};

const POOL: &str = "pools/render";

fn client(
    holder: &str,
    store: &MemStore,
    clock: &VirtualClock,
    protocol: Protocol,
) -> Leases<MemStore, VirtualClock> {
    let mut cfg = LeaseConfig::new("", holder, Duration::from_secs(30));
    cfg.protocol = protocol;
    Leases::with_config(store.clone(), clock.clone(), cfg, false, entropy).unwrap()
}

/// Runs of `pool(2)` by `a` (holding its seat while the others run), `b`
/// and `c`: the first two run at once in different seats; the third finds
/// both taken.
fn two_seats_three_runs(protocol: Protocol) {
    let (store, clock) = world();
    let (a, b, c) = (
        client("a", &store, &clock, protocol),
        client("b", &store, &clock, protocol),
        client("c", &store, &clock, protocol),
    );
    fn seat_of(run: &mut Option<(u32, String)>) -> impl FnMut(Step<'_>) + '_ {
        move |s| {
            if let Step::Acquired { lease, seat, .. } = s {
                *run = seat.map(|seat| (seat, seat_key(POOL, seat)));
                // The seat's object (epochs: an epoch object under it).
                let (_, key) = run.as_ref().unwrap();
                assert!(lease.key.starts_with(key.as_str()), "{} {key}", lease.key);
            }
        }
    }
    let (mut a_seat, mut b_seat) = (None, None);
    let out = pollster::block_on(a.run(
        POOL,
        Run::new().pool(2).observe(seat_of(&mut a_seat)),
        |a_token| {
            // While a's job runs, b's and then c's.
            let b_out = pollster::block_on(b.run(
                POOL,
                Run::new().pool(2).observe(seat_of(&mut b_seat)),
                |b_token| {
                    let c_out = pollster::block_on(c.run(POOL, Run::new().pool(2), |_| async {
                        Ok::<_, String>("c ran")
                    }));
                    async move { Ok::<_, String>((b_token, c_out)) }
                },
            ));
            async move { Ok::<_, String>((a_token, b_out)) }
        },
    ));
    let out = out.unwrap();
    let RunOutcome::Ran {
        output:
            (
                _,
                Ok(RunOutcome::Ran {
                    output: (_, c_out), ..
                }),
            ),
        ..
    } = out
    else {
        panic!("a and b run at once: {out:?}")
    };
    assert!(
        matches!(c_out, Ok(RunOutcome::Skipped { .. })),
        "c finds both seats taken: {c_out:?}"
    );
    let (a_seat, b_seat) = (a_seat.unwrap(), b_seat.unwrap());
    assert_ne!(a_seat.0, b_seat.0, "different seats");
    for (seat, key) in [a_seat, b_seat] {
        assert!(seat < 2);
        let seen = pollster::block_on(c.inspect(&key)).unwrap();
        assert!(
            seen.as_ref().is_none_or(|seen| seen.free),
            "each seat was given back: {seen:?}"
        );
    }
}

#[test]
fn a_pool_of_two_runs_two_jobs_at_once_and_no_third_cas() {
    two_seats_three_runs(Protocol::Cas);
}

#[test]
fn a_pool_of_two_runs_two_jobs_at_once_and_no_third_epochs() {
    two_seats_three_runs(Protocol::Epochs);
}

#[test]
fn a_pool_of_two_runs_two_jobs_at_once_and_no_third_mutex() {
    two_seats_three_runs(Protocol::Mutex);
}

#[test]
fn a_seats_tokens_go_on_across_runs_and_a_smaller_pool() {
    let (store, clock) = world();
    let a = client("a", &store, &clock, Protocol::Cas);
    let job = |token: u64| async move { Ok::<_, String>(token) };
    // A pool of one is one seat: its token rises with each run.
    for want in 1..=3 {
        let out = pollster::block_on(a.run(POOL, Run::new().pool(1), job)).unwrap();
        assert!(
            matches!(out, RunOutcome::Ran { token, seat: Some(0), .. } if token == want),
            "{out:?}"
        );
    }
    // Grown to 3 and shrunk to 1 again: seat 0 goes on from its token.
    for _ in 0..6 {
        pollster::block_on(a.run(POOL, Run::new().pool(3), job)).unwrap();
    }
    let before = support::record_at(&store, &seat_key(POOL, 0)).token;
    let out = pollster::block_on(a.run(POOL, Run::new().pool(1), job)).unwrap();
    assert!(
        matches!(out, RunOutcome::Ran { token, .. } if token == before + 1),
        "{out:?} after {before}"
    );
}

#[test]
fn a_waiting_run_takes_the_first_seat_that_frees() {
    let (store, clock) = world();
    let a = client("a", &store, &clock, Protocol::Cas);
    let b = client("b", &store, &clock, Protocol::Cas);
    // a holds both seats (and never releases them).
    for seat in 0..2 {
        let held = pollster::block_on(a.acquire(&seat_key(POOL, seat))).unwrap();
        assert!(matches!(held, AcquireOutcome::Acquired(_)));
    }
    let job = |token: u64| async move { Ok::<_, String>(token) };
    let out = pollster::block_on(b.run(POOL, Run::new().pool(2), job)).unwrap();
    assert!(matches!(out, RunOutcome::Skipped { holder, .. } if holder == "a"));
    // Told to wait past a's ttl: a seat lapses and b runs in it.
    let t0 = clock.now().mono;
    let how = Run::new().pool(2).wait(Duration::from_secs(60));
    let out = pollster::block_on(b.run(POOL, how, job)).unwrap();
    assert!(matches!(out, RunOutcome::Ran { token: 2, .. }), "{out:?}");
    assert!(
        clock.now().mono - t0 >= Duration::from_secs(25),
        "it waited"
    );
    // Told to wait less than a's leases have left: skipped after the wait.
    for seat in 0..2 {
        pollster::block_on(a.acquire(&seat_key(POOL, seat))).unwrap();
    }
    let how = Run::new().pool(2).wait(Duration::from_secs(5));
    let out = pollster::block_on(b.run(POOL, how, job)).unwrap();
    assert!(matches!(out, RunOutcome::Skipped { .. }), "{out:?}");
}

#[test]
fn a_bad_pool_is_refused_before_any_request() {
    let (store, clock) = world();
    let a = client("a", &store, &clock, Protocol::Cas);
    let job = |token: u64| async move { Ok::<_, String>(token) };
    let tick = Tick::new("t1").unwrap();
    for (how, says) in [
        (Run::new().pool(0), "from 1 to 1000 seats, not 0"),
        (Run::new().pool(1001), "from 1 to 1000 seats, not 1001"),
        (Run::new().pool(2).tick(&tick), "cannot take a pool's seat"),
    ] {
        let out = pollster::block_on(a.run(POOL, how, job));
        let Err(e @ RunError::Settings(_)) = out else {
            panic!("{out:?}")
        };
        assert!(e.to_string().contains(says), "{e}");
    }
    assert!(store.keys("").is_empty(), "nothing was written");
    // On the mutex too, a pool's run for a tick is a settings error.
    let m = client("m", &store, &clock, Protocol::Mutex);
    let out = pollster::block_on(m.run(POOL, Run::new().pool(2).tick(&tick), job));
    assert!(matches!(out, Err(RunError::Settings(_))), "{out:?}");
    assert!(store.keys("").is_empty(), "nothing was written");
}

/// A store whose every call takes `per_call` of the virtual clock.
#[derive(Clone)]
struct Slow(MemStore, VirtualClock, Duration);

impl lease_core::Store for Slow {
    async fn call(&self, op: lease_core::StoreOp) -> lease_core::StoreReply {
        self.1.advance(self.2);
        self.0.apply(&op)
    }
}

/// A round of a large pool whose seats are all taken, on a slow store,
/// ends at the run's stop time: the run returns within its time limit
/// (it would take 40 reads of 1 s each), saying it had no time (it did
/// not read every seat, so it cannot say the pool is full).
#[test]
fn a_full_pools_round_ends_at_the_runs_time_limit() {
    let (store, clock) = world();
    let a = client("a", &store, &clock, Protocol::Cas);
    for seat in 0..40 {
        let held = pollster::block_on(a.acquire(&seat_key(POOL, seat))).unwrap();
        assert!(matches!(held, AcquireOutcome::Acquired(_)));
    }
    let slow = Slow(store.clone(), clock.clone(), Duration::from_secs(1));
    let cfg = LeaseConfig::new("", "b", Duration::from_secs(30));
    let b = Leases::with_config(slow, clock.clone(), cfg, false, entropy).unwrap();
    let job = |token: u64| async move { Ok::<_, String>(token) };
    let t0 = clock.now().mono;
    let limit = Duration::from_secs(25);
    let out = pollster::block_on(b.run(POOL, Run::new().pool(40).within(limit), job));
    let took = clock.now().mono - t0;
    assert!(matches!(out, Err(RunError::NoTime { .. })), "{out:?}");
    assert!(took <= limit, "took {took:?} of {limit:?}");
}
