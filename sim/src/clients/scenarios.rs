//! Hand-built, deterministic schedules reproducing the known findings (numbered
//! as in the table of `docs/verification.md`),
//! each returning the checker's [`Report`]. Run one with, for example,
//! `scenarios::acquire_reply_lost_then_outage(Protocol::Cas)` and read
//! [`Report::summary`].

use super::{run, ClientKind, ClientsConfig, NodeFault, Report, SuspendClock};
use crate::world::faults::{FaultKind, FaultRates, Scripted};
use lease_core::Protocol;
use std::time::Duration;

fn two(protocol: Protocol, kind: ClientKind, ttl_s: u64) -> ClientsConfig {
    let mut cfg = ClientsConfig::quiet(1, protocol, vec![kind, kind]);
    cfg.ttl = Duration::from_secs(ttl_s);
    cfg.duration = Duration::from_secs(ttl_s * 8);
    cfg.latency = (Duration::from_millis(5), Duration::from_millis(10));
    cfg.faults = FaultRates::none();
    cfg.record_timeline = true;
    cfg
}

/// Finding 1: node 0's acquire (`kind`: `lease run` or the singleton, run
/// once) is applied but its reply lost, then every re-read of node 0 hangs
/// to its timeout for about a ttl; the last re-read finds its nonce in a
/// record already expired. Meanwhile node 1, an elector polling every
/// ttl / 3, takes the lease over and works.
pub fn acquire_reply_lost_then_outage_with(protocol: Protocol, kind: ClientKind) -> Report {
    let mut cfg = two(protocol, kind, 10);
    cfg.clients = vec![kind, ClientKind::Elector];
    cfg.start_at = vec![0, 400];
    cfg.tick_every = (Duration::from_secs(600), Duration::from_secs(600));
    cfg.job_max = Duration::from_secs(20);
    cfg.scripted = vec![
        Scripted::next_write(0, 0, FaultKind::DropReply),
        Scripted::window(Some(0), 200, 11_500, FaultKind::Hang),
    ];
    run(cfg)
}

/// Finding 1 with `lease run` (see [`acquire_reply_lost_then_outage_with`]).
pub fn acquire_reply_lost_then_outage(protocol: Protocol) -> Report {
    acquire_reply_lost_then_outage_with(protocol, ClientKind::Hold)
}

/// Finding 1, the throttled form: one 503 whose `Retry-After` is longer
/// than the ttl on node 0's re-read after its acquire's reply was lost.
pub fn acquire_reply_lost_then_retry_after(protocol: Protocol) -> Report {
    let mut cfg = two(protocol, ClientKind::Hold, 10);
    cfg.clients = vec![ClientKind::Hold, ClientKind::Elector];
    cfg.start_at = vec![0, 400];
    cfg.tick_every = (Duration::from_secs(600), Duration::from_secs(600));
    cfg.job_max = Duration::from_secs(20);
    cfg.scripted = vec![
        Scripted::next_write(0, 0, FaultKind::DropReply),
        Scripted {
            uses: Some(1),
            ..Scripted::window(
                Some(0),
                200,
                u64::MAX,
                FaultKind::Throttle {
                    retry_after: Some(Duration::from_secs(12)),
                },
            )
        },
    ];
    run(cfg)
}

/// Finding 2: the leader's renewal is applied but answered 500 and its
/// re-reads are throttled until the renewal gives up; its next renewal
/// then meets its own record and reports the lease taken by itself.
pub fn renewal_gives_up_unsettled(protocol: Protocol) -> Report {
    let mut cfg = two(protocol, ClientKind::Elector, 20);
    cfg.start_at = vec![0, 3_000];
    cfg.scripted = vec![
        Scripted::next_write(0, 6_000, FaultKind::Apply5xx),
        Scripted::window(
            Some(0),
            6_000,
            13_000,
            FaultKind::Throttle { retry_after: None },
        ),
    ];
    run(cfg)
}

/// Finding 2 at acquire: `lease run`'s acquire is applied but answered
/// 500, its re-reads are throttled until it gives up; nothing ran, yet its
/// record blocks everyone for a ttl.
pub fn acquire_gives_up_unsettled(protocol: Protocol) -> Report {
    let mut cfg = two(protocol, ClientKind::Hold, 10);
    cfg.clients = vec![ClientKind::Hold, ClientKind::Elector];
    cfg.start_at = vec![0, 400];
    cfg.tick_every = (Duration::from_secs(600), Duration::from_secs(600));
    cfg.scripted = vec![
        Scripted::next_write(0, 0, FaultKind::Apply5xx),
        Scripted::window(Some(0), 0, 9_000, FaultKind::Throttle { retry_after: None }),
    ];
    run(cfg)
}

/// Finding 3: one 429 with `Retry-After: 86400` on a CLI acquire's first
/// read stalls the operation for a day.
pub fn retry_after_a_day(protocol: Protocol) -> Report {
    let mut cfg = two(protocol, ClientKind::Cli, 10);
    cfg.clients = vec![ClientKind::Cli];
    cfg.protocols = vec![protocol];
    cfg.start_at = vec![0];
    cfg.scripted = vec![Scripted {
        uses: Some(1),
        ..Scripted::window(
            Some(0),
            0,
            u64::MAX,
            FaultKind::Throttle {
                retry_after: Some(Duration::from_secs(86_400)),
            },
        )
    }];
    run(cfg)
}

/// Finding 3 in an election: the leader resigns while the only other
/// contender's acquire waits out a 429's `Retry-After` of a day: nobody
/// leads through a quiet window.
pub fn retry_after_a_day_in_election(protocol: Protocol) -> Report {
    let mut cfg = two(protocol, ClientKind::Elector, 10);
    cfg.start_at = vec![0, 2_000];
    cfg.resign_after = None;
    cfg.node_faults = vec![NodeFault::Crash {
        node: 0,
        at_ms: 20_000,
        restart_after: None,
    }];
    cfg.scripted = vec![Scripted {
        uses: Some(1),
        ..Scripted::window(
            Some(1),
            15_000,
            u64::MAX,
            FaultKind::Throttle {
                retry_after: Some(Duration::from_secs(86_400)),
            },
        )
    }];
    run(cfg)
}

/// Finding 5, mutex: a CLI acquire's create is held in the network past
/// its timeout; the retried create wins, the CLI releases, and the first
/// create lands afterwards: a ghost lock for a ttl.
pub fn late_create_after_release() -> Report {
    let mut cfg = two(Protocol::Mutex, ClientKind::Cli, 10);
    cfg.clients = vec![ClientKind::Cli];
    cfg.protocols = vec![Protocol::Mutex];
    cfg.start_at = vec![0];
    cfg.tick_every = (Duration::from_secs(60), Duration::from_secs(60));
    // Lands after the release, before the expiry it stamps (10 s).
    cfg.scripted = vec![Scripted::next_write(
        0,
        0,
        FaultKind::Late {
            extra: Duration::from_secs(5),
        },
    )];
    run(cfg)
}

/// Finding 5, epochs: a leader's renewal create is held in the network;
/// the renewal gives up (throttled), the leader resigns and releases its
/// epoch, and the held create lands afterwards: a live epoch nobody holds.
pub fn late_renewal_after_release() -> Report {
    let mut cfg = two(Protocol::Epochs, ClientKind::Elector, 20);
    cfg.clients = vec![ClientKind::Elector];
    cfg.protocols = vec![Protocol::Epochs];
    cfg.start_at = vec![0];
    cfg.resign_after = Some(Duration::from_secs(13));
    cfg.scripted = vec![
        Scripted::next_write(
            0,
            6_000,
            FaultKind::Late {
                extra: Duration::from_secs(30),
            },
        ),
        Scripted::window(
            Some(0),
            6_000,
            14_000,
            FaultKind::Throttle { retry_after: None },
        ),
    ];
    run(cfg)
}

/// Finding 6: two `lease run` processes whose entropy has the same seed
/// race for an absent key at the same instant; both report token 1.
pub fn identical_seeds(protocol: Protocol) -> Report {
    let mut cfg = two(protocol, ClientKind::Hold, 10);
    cfg.same_entropy = true;
    cfg.start_at = vec![0, 0];
    cfg.latency = (Duration::from_millis(5), Duration::from_millis(5));
    cfg.tick_every = (Duration::from_secs(60), Duration::from_secs(60));
    cfg.job_max = Duration::from_secs(15);
    run(cfg)
}

/// Finding 7: node 0 holds the lease with protocol `a`, node 1 acquires
/// the same key with protocol `b` and does not see it.
pub fn two_protocols_on_one_key(a: Protocol, b: Protocol) -> Report {
    let mut cfg = two(a, ClientKind::Hold, 10);
    cfg.protocols = vec![a, b];
    cfg.start_at = vec![0, 2_000];
    cfg.tick_every = (Duration::from_secs(60), Duration::from_secs(60));
    cfg.job_max = Duration::from_secs(15);
    run(cfg)
}

/// Issue 24: node 0 (`holder`: a singleton tick, a `lease run` or an
/// elector) takes the lease and starts its job; 3 s later its machine is
/// suspended for 2.5 ttl, long enough for the lease to expire on the store
/// and for node 1, an elector, to take it over and work. With the clock
/// that counts the suspend, node 0 sees on resume that its deadline has
/// passed and drops the job at once; with `SuspendClock::StopsInSuspend`
/// (`Instant`) it believes it has most of its ttl left and works on beside
/// the new leader until its next renewal fails.
pub fn holder_suspended_past_ttl(
    protocol: Protocol,
    holder: ClientKind,
    clock: SuspendClock,
) -> Report {
    let mut cfg = two(protocol, holder, 10);
    cfg.clients = vec![holder, ClientKind::Elector];
    cfg.start_at = vec![0, 400];
    cfg.tick_every = (Duration::from_secs(600), Duration::from_secs(600));
    cfg.job_max = Duration::from_secs(60);
    cfg.suspend_clock = clock;
    cfg.node_faults = vec![NodeFault::Suspend {
        node: 0,
        at_ms: 3_000,
        length: Duration::from_secs(25),
    }];
    run(cfg)
}

/// Node 0, on `protocol` (cas or mutex), holds the key's object through
/// a long job when node 1, on epochs (a rolling deploy), comes to the same
/// key: its listing shows an object at the lease key that is not its
/// marker, and it must read it and refuse. An epochs client that takes
/// any object there for its marker runs a job alongside node 0's.
pub fn another_protocols_object_at_an_epochs_key(protocol: Protocol) -> Report {
    let mut cfg = two(protocol, ClientKind::Singleton, 10);
    cfg.seed = 3;
    cfg.protocols = vec![protocol, Protocol::Epochs];
    cfg.start_at = vec![0, 1_500];
    cfg.tick_every = (Duration::from_secs(600), Duration::from_secs(600));
    cfg.job_max = Duration::from_secs(60);
    run(cfg)
}

/// A singleton's renewal late in a long job lands but its reply is lost,
/// and every read of that node hangs until the lease's deadline: the run
/// ends lost. The next tick comes while that renewal's record is still
/// live: the run takes it over, as the claim the last renewal left says
/// it may, instead of skipping the tick behind its own record.
pub fn renewal_landed_unseen_late_in_a_long_job(protocol: Protocol) -> Report {
    let mut cfg = ClientsConfig::quiet(5, protocol, vec![ClientKind::Singleton]);
    cfg.ttl = Duration::from_secs(10);
    cfg.duration = Duration::from_secs(60);
    cfg.latency = (Duration::from_millis(5), Duration::from_millis(10));
    cfg.record_timeline = true;
    cfg.start_at = vec![0];
    cfg.tick_every = (Duration::from_secs(37), Duration::from_secs(37));
    cfg.job_max = Duration::from_secs(200);
    cfg.scripted = vec![
        Scripted::next_write(0, 30_000, FaultKind::DropReply),
        Scripted::window(Some(0), 30_000, 36_000, FaultKind::Hang),
    ];
    run(cfg)
}
