//! A simulation that runs the product: the code users run
//! ([`Singleton::run`], [`hold_while`], one-shot [`LeaseOp`]s driven as the
//! `lease` CLI drives them, the [`Elector`] through [`drive_until`]) inside a
//! deterministic, seed-replayable world, judged by a checker that looks at
//! when work really ran and what the store really held.
//!
//! # The world
//!
//! **Executor.** Every simulated process is a boxed future polled by a tiny
//! single-threaded executor. A process is polled when something for it
//! happens: a reply is delivered, a timer it registered is due, it starts
//! or resumes, or its waker is woken (a `Leadership` handle wakes the
//! work waiting on it), at the same instant. Events wait in the simulators' shared
//! [`Queue`] (by real time, then in the order they were scheduled);
//! processes woken at the same instant are polled in id order. No
//! threads, no real time, no hash-map iteration: equal [`ClientsConfig`]s
//! give equal runs.
//!
//! **Store.** [`SimStore`] implements [`Store`]: `call` sends the request
//! through the simulators' shared fault model ([`crate::world::faults`]: the fault
//! it meets, its latency, when it arrives) and resolves when the world
//! delivers the reply. Like the real transports it has a timeout of its own
//! (the config's `request_timeout`, on the node's monotonic clock): a
//! request that hangs resolves to a transport `Timeout`, and the hang
//! consumes simulated time. Behind it is the shared [`Bucket`]: the real
//! `MemStore`, applied at the store's true time; replies carry an HTTP
//! `Date` (one-second resolution) from a front end whose clock is off by up
//! to `front_end_skew`. A request dropped by its sender (a crash, a timeout)
//! stays in the network and may still land.
//!
//! **Clock.** [`SimClock`] implements [`Clock`] for one node, on the shared
//! [`NodeClock`]: monotonic time runs at `1 + drift` times real time (but
//! for the stalls this simulation adds), the wall clock has an offset that
//! [`NodeFault::WallStep`] can step, and `sleep_until` registers a timer at
//! the real time at which the node's monotonic clock reaches the instant.
//!
//! **Faults** (drawn from the seed by the shared model, or scripted by hand
//! with [`Scripted`]):
//! outages in which every call hangs to its timeout or is throttled;
//! `Retry-After` from zero to hours on 429/503; requests held in the network
//! past their sender's timeout and delivered later; writes applied but the
//! reply lost or answered 500; 409; dropped requests; wall-clock steps;
//! monotonic clocks that stall; crashes and pauses at any await point
//! (crash = the process's future is dropped at a poll; pause = it is not
//! polled for a while); machines suspended for a fraction of a ttl to
//! several ttls ([`NodeFault::Suspend`]: no process of the node is polled
//! or started, while the store's time goes on). Across a suspend the
//! node's monotonic clock does what [`ClientsConfig::suspend_clock`] says:
//! by default it counts the suspend, as the native adapter's clock does
//! (`CLOCK_BOOTTIME`); [`SuspendClock::StopsInSuspend`] is the clock it
//! replaced (`Instant`), which stops and stays behind, and which the
//! checker catches. The processes are polled at the resume instant, so a
//! deadline that passed during the suspend is seen then; the native clock
//! sees it up to one sleep slice (500 ms) later, a gap it documents and
//! this model leaves out.
//!
//! # The truth, and the rules the checker applies
//!
//! The store's history is recorded after every applied write: for the CAS
//! lease and the mutex the object at the key, for epochs the newest epoch
//! object. A *session* belongs to the logical client (the *owner*) whose
//! process first wrote it: one singleton invocation, one `lease run`, one
//! CLI script (acquire, renews and release carry its etag), one elector
//! process.
//!
//! - **Validity.** Session `S` is *valid* at real time `t` when the record
//!   current at `t` (for `S`'s protocol) carries `S`, is not released, and
//!   its `expires_at` is later than the store's clock at `t` (the store's
//!   clock is real time; front-end skew only affects the `Date` headers).
//! - **Jobs.** A job *acts* at its first poll (its start) and throughout
//!   `(start, end)` except while its process is inert (paused). The end is
//!   its completion or the drop of its future. Every instant at which a job
//!   acts must lie in a validity interval of its session (the session of its
//!   owner with the job's token), and no two jobs may act at the same time.
//!   A process that resumes after a pause and is stopped (or finishes) at
//!   that instant has not acted past its deadline: zero width.
//! - **Outcomes**, judged at the real time they are reported:
//!   `Acquired`/`Renewed` (and the elector's events) → a record of this
//!   owner's with that token is live on the store (unless it was written
//!   during the operation and an operator broke it since); `Busy`/`Skipped` → the
//!   named record was live during the operation and is not our own;
//!   `Lost`/`AlreadyLost` name a record that is not our own, and after
//!   `AlreadyLost` no record of ours is live and no write of the operation
//!   was applied; after `Released` no record of ours is live, the current
//!   record is not another session's written before the release began, and
//!   no write of the released session lands later and makes a record of it
//!   live again; an acquire that failed
//!   leaves no record of its own live; tokens reported by acquisitions
//!   strictly increase (CAS, epochs); the fenced object's token never
//!   decreases; an operation reports within a bound (retries, timeouts and
//!   backoffs of the configuration, plus a ttl).
//! - **Liveness** (elector worlds): the lease is *covered* while a live
//!   record belongs to an elector that is running and leading. A gap in
//!   coverage that contains a fault-free window of `ttl + poll + settle +
//!   margins` with some elector running throughout is a violation. For the
//!   clients that tick (singleton, `lease run`, CLI): an acquire that saw
//!   no fault of any kind, from a settling time before it to its end, must
//!   not fail (a busy answer is judged by the outcome rules: the record
//!   named must have been live, and not our own).
//!
//! **Outside the documented assumptions** (docs/protocols.md, "Safety assumptions"): a
//! monotonic clock that stalls and stays behind runs slower than the drift
//! bound allows. Violations involving a node whose clock lost time before
//! them are reported in [`Report::excused`], not as violations; a stall
//! that catches up is simulated as a pause (the process is inert). Jobs
//! that overrun only because an operator broke the lease are excused too.
//! A suspend is *within* the assumptions, since the product's clock counts
//! it: violations after one are never excused, whichever
//! [`SuspendClock`] the run has (with `StopsInSuspend` the clock loses
//! time, but that is the defect under test, not an excuse).

use crate::world::clock::{NodeClock, EPOCH};
use crate::world::faults::{self, Bucket, FaultKind, FaultRates, Request, Scripted};
use crate::world::queue::Queue;
use core::cell::{Cell, RefCell};
use core::future::{pending, poll_fn, Future};
use core::pin::{pin, Pin};
use core::task::{Context, Poll};
use lease_core::client::drive::{drive, drive_until};
use lease_core::client::hold::{hold_while, Held};
use lease_core::client::leadership::{Health, Leadership};
use lease_core::client::revalidate::Revalidating;
use lease_core::client::singleton::{
    time_needed, ScheduledRun, Singleton, SingletonError, Step, TickOutcome,
};
use lease_core::client::{ByEtagError, Leases};
use lease_core::config::{LeaseConfig, Protocol};
use lease_core::entropy::Entropy;
use lease_core::protocol::elector::Elector;
use lease_core::protocol::fence::{FenceOp, Fenced};
use lease_core::protocol::lease::LeaseOp;
use lease_core::protocol::machine::{
    AcquireOutcome, Event, LeaseError, LostReason, Observation, ReleaseOutcome, RenewOutcome,
};
use lease_core::protocol::verdict::{most_check_time, SharedProbe};
use lease_core::record::parse_epoch_key;
use lease_core::record::LeaseRecord;
use lease_core::store::Store;
use lease_core::store::{ReplyKind, StoreOp, StoreReply, TransportErrorKind};
use lease_core::tick::Tick;
use lease_core::time::Clock;
use lease_core::time::{Mono, Now};
use lease_core::variants::Variant;
use lease_core::verify;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

pub mod scenarios;

/// The lease key every client contends for.
pub const LEASE_KEY: &str = "leases/product";
/// The object jobs write to with fenced writes (CAS and epochs).
pub const PROTECTED_KEY: &str = "data/protected";

/// Which product path a node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClientKind {
    /// `Singleton::run` per scheduler tick (Lambda, Workers cron): each tick
    /// its own process, ticks sometimes delivered twice.
    Singleton,
    /// `lease run`: an acquire, then `hold_while` with the job; repeated as
    /// new processes.
    Hold,
    /// One-shot CLI commands: acquire, renew(s), release, each a separate
    /// operation; renew and release resumed from the etag by inspect +
    /// `Lease::resume_version`.
    Cli,
    /// An operator who inspects and sometimes breaks the lease.
    Operator,
    /// An `Elector` run with `drive_until`, with work while it leads.
    Elector,
    /// A service on [`Leadership`]
    /// (`Leases::lead_with`): work gated on `until_leader` and `lost`
    /// (sometimes made a while before it is first polled), `resign()` at a
    /// random moment, and `is_leader()`, `token()` and `health()` sampled
    /// throughout; the checker judges every answer against the store.
    Service,
}

/// Deliberately broken clients, built in the harness to prove the checker
/// can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// A singleton that starts the job after its lease's deadline passed.
    StartPastDeadline,
    /// A hold that does not stop the job when the lease is lost.
    IgnoreDeadline,
    /// A release that reports `Released` without asking the store.
    BlindRelease,
    /// No patience: a request timeout of 1 ms, below the network's
    /// latency, so an acquire fails though nothing is wrong.
    NoPatience,
}

/// A node-level fault.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeFault {
    /// Every process of the node dies; long-lived ones (CLI script,
    /// elector) start again after `restart_after`.
    Crash {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Delay before a new process, if any.
        restart_after: Option<Duration>,
    },
    /// Every process of the node stops being polled (a frozen VM).
    Pause {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Length.
        length: Duration,
    },
    /// The node's wall clock jumps (monotonic time is untouched).
    WallStep {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Jump (ms, either way).
        by_ms: i64,
    },
    /// The node's monotonic clock stops for `length`. With `catch_up` it
    /// then jumps to where it would have been: simulated as a pause (the
    /// processes are inert meanwhile). Without, it stays behind for good:
    /// outside the documented assumptions (see the module docs).
    MonoStall {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Length.
        length: Duration,
        /// Whether it catches up afterwards.
        catch_up: bool,
    },
    /// The machine is suspended (a laptop's lid closed, a VM suspended):
    /// its processes are inert for `length`, none starts, while wall time
    /// and the store's time go on. Its monotonic clock follows
    /// [`ClientsConfig::suspend_clock`].
    Suspend {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Length.
        length: Duration,
    },
}

/// What a node's monotonic clock does across a [`NodeFault::Suspend`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SuspendClock {
    /// It counts the suspend, as the native adapter's clock does
    /// (`CLOCK_BOOTTIME`): on resume it reads what it would have read had
    /// the machine run on.
    #[default]
    CountsSuspend,
    /// It stops during the suspend and stays behind afterwards, as
    /// `std::time::Instant` does (`CLOCK_MONOTONIC` on Linux): the broken
    /// clock the checker must catch.
    StopsInSuspend,
}

impl NodeFault {
    fn at_ms(&self) -> u64 {
        match self {
            NodeFault::Crash { at_ms, .. }
            | NodeFault::Pause { at_ms, .. }
            | NodeFault::WallStep { at_ms, .. }
            | NodeFault::MonoStall { at_ms, .. }
            | NodeFault::Suspend { at_ms, .. } => *at_ms,
        }
    }
}

/// Everything that defines a run.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientsConfig {
    /// The seed of every random choice.
    pub seed: u64,
    /// The client each node runs.
    pub clients: Vec<ClientKind>,
    /// The protocol each node uses (normally all equal).
    pub protocols: Vec<Protocol>,
    /// The core's protocol variant.
    pub variant: Variant,
    /// A broken client built in the harness.
    pub broken: Option<Broken>,
    /// Lease ttl.
    pub ttl: Duration,
    /// Simulated duration.
    pub duration: Duration,
    /// One-way latency range.
    pub latency: (Duration, Duration),
    /// Store front ends' clocks are off by up to this.
    pub front_end_skew: Duration,
    /// Node wall clocks are off by up to this.
    pub max_offset: Duration,
    /// Node clock rates differ from real time by up to this fraction.
    pub max_drift: f64,
    /// Random store faults.
    pub faults: FaultRates,
    /// Faults by window (outages, hand-built schedules).
    pub scripted: Vec<Scripted>,
    /// Node faults.
    pub node_faults: Vec<NodeFault>,
    /// The nodes' monotonic clocks across a [`NodeFault::Suspend`].
    pub suspend_clock: SuspendClock,
    /// Probability that a process is crashed right after a poll.
    pub poll_crash: f64,
    /// Probability that a process is paused (up to 2 ttl) after a poll.
    pub poll_pause: f64,
    /// Interval between scheduler ticks (singleton), or between runs
    /// (hold, CLI), drawn in this range.
    pub tick_every: (Duration, Duration),
    /// Probability that a tick is delivered twice.
    pub duplicate_tick: f64,
    /// Longest job.
    pub job_max: Duration,
    /// Whether the singleton and `lease run` probe the store first.
    pub probe: bool,
    /// Nodes 0 and 1 draw identical entropy (seeded alike).
    pub same_entropy: bool,
    /// Electors resign at a random time (else they run to the end).
    pub resign: bool,
    /// Electors resign this long after they start (overrides `resign`).
    pub resign_after: Option<Duration>,
    /// When each node first starts (real ms); empty: within the first
    /// second, at random.
    pub start_at: Vec<u64>,
    /// Keep a timeline.
    pub record_timeline: bool,
    /// Keys per listing page of the store (S3 pages at 1,000).
    pub page_size: usize,
    /// The store answers 429 to a write to a key within this of the last
    /// write to it (R2, GCS: about one a second), and says so
    /// ([`Store::min_write_interval`]): every client spaces its writes.
    pub spacing: Duration,
    /// Other objects under `<key>/` (another application's), listed
    /// before any epoch object: with small pages, a check that reads only
    /// the first pages misses the epochs.
    pub junk_keys: usize,
    /// Chance that a CLI script releases at its lease's local deadline
    /// (late: a reply lost then leaves open whether it freed the lease).
    pub late_release: f64,
    /// Longest time an operator takes between reading the lease and
    /// breaking it (the world moves on meanwhile: a late break).
    pub break_delay: Duration,
    /// Half the singleton deliveries carry the invocation's remaining time
    /// (from too little for the lease's requests to more than the job
    /// needs): a job still running near the end is stopped and its lease
    /// released ([`ScheduledRun::within`]).
    pub time_limits: bool,
    /// Every node waits fairly ([`LeaseConfig::fair`]): a run finds the
    /// lease its node gave back busy for the courtesy. Off unless a test
    /// turns it on, so that fixed seeds replay as they were found.
    pub fair: bool,
    /// A CLI script's acquire waits up to this while the lease is busy
    /// (`lease acquire --wait`: [`Leases::acquire_within`], its re-reads
    /// conditional); zero: it does not wait. Zero unless a test sets it,
    /// so that fixed seeds replay as they were found.
    pub cli_wait: Duration,
}

impl ClientsConfig {
    /// A quiet world: every node runs `client` on `protocol`, no faults.
    pub fn quiet(seed: u64, protocol: Protocol, clients: Vec<ClientKind>) -> Self {
        let n = clients.len();
        ClientsConfig {
            seed,
            protocols: vec![protocol; n],
            clients,
            variant: Variant::Safe,
            broken: None,
            ttl: Duration::from_secs(10),
            duration: Duration::from_secs(120),
            latency: (Duration::from_millis(1), Duration::from_millis(20)),
            front_end_skew: Duration::ZERO,
            max_offset: Duration::ZERO,
            max_drift: 0.0,
            faults: FaultRates::none(),
            scripted: Vec::new(),
            node_faults: Vec::new(),
            suspend_clock: SuspendClock::CountsSuspend,
            poll_crash: 0.0,
            poll_pause: 0.0,
            tick_every: (Duration::from_secs(2), Duration::from_secs(20)),
            duplicate_tick: 0.0,
            job_max: Duration::from_secs(20),
            probe: false,
            same_entropy: false,
            resign: false,
            resign_after: None,
            start_at: Vec::new(),
            record_timeline: false,
            page_size: 1000,
            spacing: Duration::ZERO,
            junk_keys: 0,
            late_release: 0.0,
            break_delay: Duration::ZERO,
            time_limits: false,
            fair: false,
            cli_wait: Duration::ZERO,
        }
    }

    /// A random schedule from the fault mix, determined by `seed`: 2-4
    /// nodes running clients drawn from `kinds`, ttl 6-20 s, 6-10 ttl of
    /// simulated time, store faults up to 6 % of calls, an outage in about
    /// a third of the runs, long `Retry-After`s in a quarter, late
    /// deliveries, node faults, crashes and pauses at random polls; in one
    /// run in ten a node on another protocol (a rolling deploy), and in one
    /// in ten two nodes whose entropy is seeded alike.
    pub fn random(seed: u64, protocol: Protocol, kinds: &[ClientKind]) -> Self {
        let mut rng = Entropy::from_seed(seed as u128 ^ 0xC11E_0000_0000);
        let mut pick = |lo: f64, hi: f64| lo + (hi - lo) * rng.unit();
        let nodes = pick(2.0, 5.0) as usize;
        let clients: Vec<ClientKind> = (0..nodes)
            .map(|_| kinds[(pick(0.0, kinds.len() as f64) as usize).min(kinds.len() - 1)])
            .collect();
        let ttl = Duration::from_secs(pick(6.0, 21.0) as u64);
        let duration = ttl * pick(6.0, 11.0) as u32;
        let p = pick(0.0, 0.06);
        let long_retry_after = pick(0.0, 1.0) < 0.25;
        let faults = FaultRates {
            drop_request: p * pick(0.0, 1.0),
            drop_reply: p * pick(0.0, 1.0),
            apply_5xx: p * pick(0.0, 1.0),
            conflict: p * pick(0.0, 1.0),
            throttle: p * pick(0.0, 1.0),
            late: p * pick(0.0, 0.5),
            late_max: ttl.mul_f64(pick(0.0, 2.0)),
            retry_after_max: if long_retry_after {
                Duration::from_secs(3 * 3600)
            } else {
                Duration::from_secs(2)
            },
            ..FaultRates::none()
        };
        let dur_ms = duration.as_millis() as f64;
        let mut scripted = Vec::new();
        if pick(0.0, 1.0) < 0.35 {
            let from_ms = pick(0.0, dur_ms * 0.7) as u64;
            let length = pick(3000.0, ttl.as_millis() as f64 * 1.6) as u64;
            let node = (pick(0.0, 1.0) < 0.5).then(|| pick(0.0, nodes as f64) as usize);
            let kind = if pick(0.0, 1.0) < 0.5 {
                FaultKind::Hang
            } else {
                FaultKind::Throttle {
                    retry_after: (pick(0.0, 1.0) < 0.5)
                        .then(|| Duration::from_millis(pick(0.0, 3000.0) as u64)),
                }
            };
            scripted.push(Scripted::window(node, from_ms, from_ms + length, kind));
        }
        let mut node_faults = Vec::new();
        for _ in 0..pick(0.0, 4.0) as usize {
            let node = pick(0.0, nodes as f64) as usize;
            let at_ms = pick(0.0, dur_ms * 0.8) as u64;
            let fault = match pick(0.0, 5.0) as u32 {
                0 => NodeFault::Crash {
                    node,
                    at_ms,
                    restart_after: Some(ttl.mul_f64(pick(0.1, 2.0))),
                },
                1 => NodeFault::Pause {
                    node,
                    at_ms,
                    length: ttl.mul_f64(pick(0.05, 2.0)),
                },
                2 => NodeFault::WallStep {
                    node,
                    at_ms,
                    by_ms: pick(-3_600_000.0, 3_600_000.0) as i64,
                },
                3 => NodeFault::MonoStall {
                    node,
                    at_ms,
                    length: ttl.mul_f64(pick(0.05, 1.5)),
                    catch_up: true,
                },
                _ => NodeFault::Suspend {
                    node,
                    at_ms,
                    length: ttl.mul_f64(pick(0.1, 4.0)),
                },
            };
            node_faults.push(fault);
        }
        // A rolling deploy that changed the protocol of one node, and two
        // nodes whose entropy was seeded alike, in a few runs each.
        let mut protocols = vec![protocol; nodes];
        if pick(0.0, 1.0) < 0.1 {
            let node = pick(0.0, nodes as f64) as usize;
            protocols[node.min(nodes - 1)] = Protocol::ALL[pick(0.0, 3.0) as usize % 3];
        }
        let same_entropy = pick(0.0, 1.0) < 0.1;
        let mut cfg = ClientsConfig {
            seed,
            protocols,
            clients,
            variant: Variant::Safe,
            broken: None,
            ttl,
            duration,
            latency: (
                Duration::from_millis(1),
                Duration::from_millis(pick(2.0, 150.0) as u64),
            ),
            front_end_skew: Duration::from_millis(50),
            max_offset: Duration::from_secs(3600),
            max_drift: 0.009,
            faults,
            scripted,
            node_faults,
            suspend_clock: SuspendClock::CountsSuspend,
            poll_crash: pick(0.0, 0.004),
            poll_pause: pick(0.0, 0.002),
            tick_every: (ttl / 4, ttl * 3),
            duplicate_tick: pick(0.0, 0.3),
            job_max: ttl * 2,
            probe: pick(0.0, 1.0) < 0.1,
            same_entropy,
            resign: pick(0.0, 1.0) < 0.3,
            resign_after: None,
            start_at: Vec::new(),
            record_timeline: false,
            page_size: 1000,
            spacing: Duration::ZERO,
            junk_keys: 0,
            late_release: 0.0,
            break_delay: Duration::ZERO,
            time_limits: false,
            fair: false,
            cli_wait: Duration::ZERO,
        };
        // Drawn after everything else, so that older seeds keep the rest
        // of their schedule: small listing pages with other objects under
        // the key, long jobs (many renewals, the claim follows the last),
        // releases at the deadline, late breaks.
        // (Two keys or more a page: one key a page with 13 other objects
        // makes the protocol check's walk of `<key>/` outlast a 6 s lease
        // at 150 ms latency, a liveness cost no real page size comes near:
        // stores page at 1,000 keys. The scenarios cover one key a page.)
        if pick(0.0, 1.0) < 0.3 {
            cfg.page_size = 2 + pick(0.0, 3.0) as usize;
            cfg.junk_keys = pick(0.0, 14.0) as usize;
        }
        if pick(0.0, 1.0) < 0.2 {
            cfg.job_max = ttl * 6;
        }
        cfg.late_release = pick(0.0, 0.5);
        cfg.break_delay = ttl.mul_f64(pick(0.0, 2.0));
        cfg.time_limits = pick(0.0, 1.0) < 0.5;
        // A store with R2's and GCS's per-key write limit.
        if pick(0.0, 1.0) < 0.2 {
            cfg.spacing = Duration::from_secs(1);
        }
        cfg
    }

    /// The lease settings node `node` uses.
    pub fn lease_config(&self, node: usize) -> LeaseConfig {
        let mut cfg = LeaseConfig::new(LEASE_KEY, format!("node-{node}"), self.ttl);
        cfg.variant = self.variant;
        cfg.protocol = self.protocols.get(node).copied().unwrap_or_default();
        cfg.fair = self.fair;
        cfg.min_write_interval = self.spacing;
        if self.broken == Some(Broken::NoPatience) {
            cfg.request_timeout = Duration::from_millis(1);
        }
        cfg
    }
}

/// A rule the run broke (see the module docs for each rule's meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// A job started while its session held no valid lease.
    JobWithoutLease,
    /// A job acted after its session's validity ended.
    JobPastValidity,
    /// Two jobs acted at the same time.
    JobsOverlap,
    /// A reported outcome does not match the store.
    OutcomeMismatch,
    /// A client lost to, or was kept out by, its own record.
    OwnRecord,
    /// An operation reported failure while its write was applied and live.
    UnsettledWrite,
    /// A write of a released session landed after the release and made a
    /// record of that session live again.
    LateWrite,
    /// A release reported `Released` after another session took over.
    ReleasedAfterTakeover,
    /// A release reported `AlreadyLost` but its write changed the store.
    AlreadyLostChanged,
    /// An acquisition's token was not greater than an earlier one's.
    TokenNotIncreasing,
    /// The protected object's token went down.
    FenceTokenDecreased,
    /// An operation did not report within its bound.
    OpStalled,
    /// Nobody held the lease through a quiet window.
    NoTakeover,
    /// An acquire failed though nothing went wrong in or before it: no
    /// store or node fault from a settling time before it to its end.
    FailedWhenQuiet,
    /// A job for a tick started while the store's record said that tick
    /// had completed (and the record was not full: the oldest ticks leave
    /// it): a duplicate delivery ran it again.
    TickRanTwice,
    /// A run reported that its release recorded the tick it ran, and the
    /// store's record then did not have it.
    TickNotRecorded,
    /// A CLI client's flight-recorder trace (`lease_core::trace`, feature
    /// `trace`) did not replay to the outputs it recorded: the machines
    /// took an input the recorder does not keep.
    TraceDiverged,
    /// A CLI client's trace broke a rule of `lease replay` (tokens, a
    /// deadline past the store's expiry as the trace's dates show it).
    TraceRuleBroken,
    /// A `Leadership` handle said it leads (`is_leader()`, `token()` or a
    /// leading `health()`) while the store's record was not its live lease
    /// with that token, or after its `resign()` was called.
    StaleYes,
    /// A `Leadership` handle's `health()` said a leader is healthy while no
    /// write of its term sent within the overdue bound (the renew interval
    /// and a request timeout, on its clock) had landed.
    HealthyWhenOverdue,
}

/// One broken rule, with when and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which rule.
    pub rule: Rule,
    /// Real time (ms).
    pub at_ms: u64,
    /// The node concerned, if one.
    pub node: Option<usize>,
    /// What happened, for humans.
    pub text: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:?}] t={}ms", self.rule, self.at_ms)?;
        if let Some(n) = self.node {
            write!(f, " node {n}")?;
        }
        write!(f, ": {}", self.text)
    }
}

/// Counters of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Store requests sent.
    pub store_calls: u64,
    /// Processes started.
    pub processes: u64,
    /// Acquisitions reported.
    pub acquisitions: u64,
    /// Jobs started.
    pub jobs_started: u64,
    /// Jobs that ran to completion.
    pub jobs_finished: u64,
    /// Jobs dropped (lost lease, crash, end of run).
    pub jobs_dropped: u64,
    /// Runs reported as overrunning the deadline (an error naming it).
    pub overruns_reported: u64,
    /// Conditional re-reads answered 304 (the lease unchanged).
    pub not_modified: u64,
    /// Flight-recorder traces of CLI clients replayed (feature `trace`).
    pub traces_replayed: u64,
    /// Outcomes reported, by kind.
    pub outcomes: BTreeMap<String, u64>,
    /// Faults that took effect, by kind.
    pub faults: BTreeMap<String, u64>,
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The configuration (replay it with [`run`]).
    pub config: ClientsConfig,
    /// Broken rules.
    pub violations: Vec<Violation>,
    /// Broken rules outside the documented assumptions (not failures).
    pub excused: Vec<Violation>,
    /// Counters.
    pub counts: Counts,
    /// The timeline, when asked for.
    pub timeline: Vec<String>,
}

impl Report {
    /// Whether any violation has this rule.
    pub fn has(&self, rule: Rule) -> bool {
        self.violations.iter().any(|v| v.rule == rule)
    }

    /// Counts, violations, and the config to replay, for a failure message.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "seed {} ({} nodes {:?}, {:?}, variant {:?}, broken {:?}): {} violations, {} excused\n",
            self.config.seed,
            self.config.clients.len(),
            self.config.clients,
            self.config.protocols,
            self.config.variant,
            self.config.broken,
            self.violations.len(),
            self.excused.len()
        );
        for v in &self.violations {
            s += &format!("  {v}\n");
        }
        for v in &self.excused {
            s += &format!("  excused: {v}\n");
        }
        s += &format!("  counts: {:?}\n", self.counts);
        s += &format!("  replay: lease_sim::clients::run({:?})\n", self.config);
        s
    }
}

// ---------------------------------------------------------------------
// The world's shared state.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Stamp(u64, u64);

#[derive(Debug)]
enum Ev {
    Arrive {
        call: u64,
        pid: usize,
        op: StoreOp,
        fault: Option<FaultKind>,
    },
    Reply {
        call: u64,
        reply: StoreReply,
    },
    Timer {
        timer: u64,
    },
    Run {
        node: usize,
    },
    Tick {
        node: usize,
    },
    /// A tick delivered again (at-least-once delivery), or retried by the
    /// platform after a failed run (`retry` counts those).
    Deliver {
        node: usize,
        tick: u64,
        retry: u32,
    },
    NodeFault(NodeFault),
    Resume {
        pid: usize,
    },
}

struct NodeState {
    clock: NodeClock,
    /// Monotonic stalls that never catch up: (start, end) real ms.
    lags: Vec<(u64, u64)>,
    /// Real ms at which its clock first lost time.
    lagged_since: Option<u64>,
    /// Real ms until which the machine is suspended.
    suspended_until: u64,
    kind: ClientKind,
    protocol: Protocol,
    /// Processes started on this node (for entropy seeding).
    spawned: u64,
    /// The long-lived process, if any.
    main: Option<usize>,
    /// The claims its singleton's last run left (a warm environment).
    claims: Vec<lease_core::protocol::machine::Claim>,
}

impl NodeState {
    fn lost(&self, real: u64) -> u64 {
        self.lags
            .iter()
            .map(|&(a, b)| real.min(b).saturating_sub(a))
            .sum()
    }

    /// The node's clocks at real time `real`: its monotonic clock ran all
    /// along but for its lags.
    fn now(&self, real: u64) -> Now {
        self.clock.now(real - self.lost(real))
    }

    /// An estimate of the real time at which the monotonic clock reads
    /// `at` (a timer re-checks and re-arms when a stall delays it).
    fn real_of(&self, now: u64, at: Mono) -> u64 {
        let mono = self.clock.mono(now - self.lost(now));
        now + self.clock.real_between(mono, at)
    }
}

struct ProcState {
    node: usize,
    owner: usize,
    alive: bool,
    paused_until: Option<u64>,
    /// Inert windows (real ms).
    pauses: Vec<(u64, u64)>,
    entropy: Option<Entropy>,
    op: Option<usize>,
    /// Largest `Retry-After` it was sent (ms).
    retry_after_max: u64,
    /// Started and not finished (for liveness: an elector's life).
    started: u64,
    ended: Option<u64>,
    /// It ended by a crash (its environment's memory, claims included,
    /// is gone).
    crashed: bool,
}

struct CallSlot {
    pid: usize,
    reply: Option<StoreReply>,
}

/// A record as the checker sees it.
#[derive(Clone, Debug, PartialEq)]
struct Rec {
    session: String,
    holder: String,
    token: u64,
    /// `expires_at` as real ms.
    expires: u64,
    released: bool,
    /// `released_at` as real ms.
    released_at: Option<u64>,
    by_operator: bool,
    /// The completed ticks it records.
    ticks: Vec<String>,
}

/// What the store held for one protocol from a time on.
struct Snapshot {
    at: Stamp,
    rec: Option<Rec>,
    /// Made by an operator's write (a break: the mutex's leaves no record).
    by_operator: bool,
}

struct SessionInfo {
    owner: usize,
    protocol: Protocol,
    tokens: BTreeSet<u64>,
}

struct SentWrite {
    pid: usize,
    owner: usize,
    /// Real ms it was sent.
    sent_at: u64,
    op: Option<usize>,
    session: Option<String>,
    released: bool,
    applied: Option<Stamp>,
    /// Applied and left only our own released record, or nothing.
    benign: bool,
}

#[derive(Clone, Debug, PartialEq)]
enum Said {
    Acquired {
        token: u64,
        session: Option<String>,
    },
    Renewed {
        token: u64,
    },
    Busy {
        holder: String,
        token: u64,
        /// The `expires_at` of the version read (real ms): with holder and
        /// token it names that version (an epoch deleted and created again
        /// keeps its number, and a node's runs share the holder).
        expires: u64,
    },
    Lost {
        named: Option<(String, u64)>,
    },
    AlreadyLost {
        named: Option<(String, u64)>,
    },
    Released {
        token: u64,
    },
    /// A release at the deadline that cannot tell whether it freed the
    /// lease: judged as `Released` but for the takeover rule.
    ReleaseUnknown {
        token: u64,
    },
    /// An operator's break: the released record it wrote (or, for the
    /// mutex, the lock it deleted) was the current one.
    Broken {
        token: u64,
    },
    Failed {
        acquire: bool,
        what: String,
        /// The session of the unsettled write the error hands on (a
        /// [`Claim`](lease_core::protocol::machine::Claim)), if it carries one.
        claim: Option<String>,
    },
    Other(String),
}

struct OpRec {
    pid: usize,
    owner: usize,
    node: usize,
    protocol: Protocol,
    name: &'static str,
    started: Stamp,
    bound: Option<u64>,
    said: Vec<(Stamp, Said)>,
    done: Option<Stamp>,
}

struct JobRec {
    pid: usize,
    owner: usize,
    node: usize,
    protocol: Protocol,
    token: u64,
    /// The scheduled tick it runs for (a singleton's).
    tick: Option<u64>,
    start: Stamp,
    end: Option<Stamp>,
}

/// What a `Leadership` handle answered at one instant.
struct Sample {
    at: Stamp,
    pid: usize,
    owner: usize,
    node: usize,
    protocol: Protocol,
    is_leader: bool,
    token: Option<u64>,
    health: Health,
    /// Its `resign()` had been called.
    resigned: bool,
}

/// A singleton run's report that it ran a tick's job.
struct TickReport {
    at: Stamp,
    pid: usize,
    node: usize,
    protocol: Protocol,
    tick: u64,
    /// It says its release recorded the tick.
    recorded: bool,
}

struct Inner {
    cfg: Rc<ClientsConfig>,
    now: u64,
    step: u64,
    rng: Entropy,
    queue: Queue<Ev>,
    bucket: Bucket,
    nodes: Vec<NodeState>,
    procs: Vec<ProcState>,
    owners: u64,
    calls: BTreeMap<u64, CallSlot>,
    timers: BTreeMap<u64, (usize, bool)>,
    next_id: u64,
    woken: BTreeSet<usize>,
    scripted_uses: Vec<u32>,
    // Checker state.
    hist_obj: Vec<Snapshot>,
    hist_epoch: Vec<Snapshot>,
    /// Whether each epoch object on the store was written by an operator.
    epoch_by_operator: BTreeMap<String, bool>,
    sessions: BTreeMap<String, SessionInfo>,
    writes: BTreeMap<u64, SentWrite>,
    ops: Vec<OpRec>,
    jobs: Vec<JobRec>,
    /// Scheduled ticks so far (a tick's id is its number).
    ticks: u64,
    tick_reports: Vec<TickReport>,
    /// What the services' `Leadership` handles answered.
    samples: Vec<Sample>,
    fence_highest: u64,
    fault_times: Vec<u64>,
    violations: Vec<Violation>,
    counts: Counts,
    timeline: Vec<String>,
    operators: BTreeSet<usize>,
    /// Each CLI client's flight recorder, with its node, replayed and
    /// judged at the end of the run.
    #[cfg(feature = "trace")]
    traces: Vec<(usize, lease_core::trace::Recorder)>,
}

type Shared = Rc<RefCell<Inner>>;

impl Inner {
    fn stamp(&mut self) -> Stamp {
        self.step += 1;
        Stamp(self.now, self.step)
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.queue.push(at, ev);
    }

    fn log(&mut self, what: impl FnOnce() -> String) {
        if self.cfg.record_timeline {
            let line = format!("t={}ms {}", self.now, what());
            self.timeline.push(line);
        }
    }

    fn fault(&mut self, pid: Option<usize>, name: &str) {
        *self.counts.faults.entry(name.to_string()).or_default() += 1;
        self.fault_times.push(self.now);
        self.log(|| format!("fault {name} (pid {pid:?})"));
    }

    fn wake(&mut self, pid: usize) {
        self.woken.insert(pid);
    }

    fn proc_now(&self, pid: usize) -> Now {
        self.nodes[self.procs[pid].node].now(self.now)
    }

    fn add_timer(&mut self, pid: usize, at: Mono) -> u64 {
        let node = self.procs[pid].node;
        let real = self.nodes[node].real_of(self.now, at).max(self.now + 1);
        self.next_id += 1;
        let id = self.next_id;
        self.timers.insert(id, (pid, false));
        self.schedule(real, Ev::Timer { timer: id });
        id
    }

    fn chance(&mut self, p: f64) -> bool {
        faults::chance(&mut self.rng, p)
    }

    fn request_timeout(&self, pid: usize) -> Duration {
        self.cfg.lease_config(self.procs[pid].node).request_timeout
    }

    /// Sends `op` from `pid`: decides its fate and schedules its arrival.
    fn send(&mut self, pid: usize, op: StoreOp) -> u64 {
        self.next_id += 1;
        let call = self.next_id;
        let now = self.now;
        self.counts.store_calls += 1;
        self.calls.insert(call, CallSlot { pid, reply: None });
        let write = op.is_write();
        let node = self.procs[pid].node;
        if let StoreOp::Put { body, .. } = &op {
            if let Ok(record) = LeaseRecord::decode(body) {
                let owner = self.procs[pid].owner;
                let protocol = self.nodes[node].protocol;
                let sid = sid(&record.holder, &record.session);
                if !sid.is_empty() && !self.operators.contains(&owner) {
                    let info = self.sessions.entry(sid.clone()).or_insert(SessionInfo {
                        owner,
                        protocol,
                        tokens: BTreeSet::new(),
                    });
                    info.tokens.insert(record.token);
                }
                let op_idx = self.procs[pid].op;
                self.writes.insert(
                    call,
                    SentWrite {
                        pid,
                        owner,
                        sent_at: now,
                        op: op_idx,
                        session: (!sid.is_empty()).then_some(sid),
                        released: record.released,
                        applied: None,
                        benign: false,
                    },
                );
            }
        } else if let StoreOp::Delete { .. } = &op {
            let owner = self.procs[pid].owner;
            let op_idx = self.procs[pid].op;
            self.writes.insert(
                call,
                SentWrite {
                    pid,
                    owner,
                    sent_at: now,
                    op: op_idx,
                    session: None,
                    released: true,
                    applied: None,
                    benign: false,
                },
            );
        }
        let request = Request {
            node,
            at_ms: now,
            write,
        };
        let cfg = &self.cfg;
        let used = &mut self.scripted_uses;
        let fault = faults::draw(&cfg.faults, &cfg.scripted, used, request, &mut self.rng);
        self.log(|| {
            format!(
                "pid {pid} node {node} sends #{call} {} {} ({})",
                op.verb(),
                op.key(),
                fault.as_ref().map_or("no fault", FaultKind::name)
            )
        });
        if let Some(late @ FaultKind::Late { .. }) = &fault {
            // Noted when sent: the sender has lost the request from now on,
            // and its arrival may come after the operation has ended (the
            // quiet-acquire rule must see the fault inside its span).
            self.fault(Some(pid), late.name());
        }
        let timeout = self.request_timeout(pid);
        let latency = self.cfg.latency;
        let Some(at) = faults::arrival(now, latency, fault.as_ref(), timeout, &mut self.rng) else {
            self.fault(Some(pid), FaultKind::DropRequest.name());
            return call;
        };
        self.schedule(
            at,
            Ev::Arrive {
                call,
                pid,
                op,
                fault,
            },
        );
        call
    }

    fn arrive(&mut self, call: u64, pid: usize, op: StoreOp, fault: Option<FaultKind>) {
        let served = self
            .bucket
            .serve(self.now, &op, fault.as_ref(), &mut self.rng);
        match &fault {
            Some(FaultKind::Throttle {
                retry_after: Some(d),
            }) => {
                let ms = d.as_millis() as u64;
                let p = &mut self.procs[pid];
                p.retry_after_max = p.retry_after_max.max(ms);
                // Counted apart: the waits an operation's deadline caps.
                let long = *d > Duration::from_secs(60);
                let name = if long {
                    "throttled, Retry-After > 1 min"
                } else {
                    "throttled"
                };
                self.fault(Some(pid), name);
            }
            Some(FaultKind::Late { .. }) | None => {} // a late one is noted when sent
            Some(k) => self.fault(Some(pid), k.name()),
        }
        if served.wrote {
            self.applied(call, &op);
        }
        if let Some(StoreReply {
            kind: ReplyKind::NotModified,
            ..
        }) = served.reply
        {
            self.counts.not_modified += 1;
        }
        self.log(|| {
            format!(
                "store gets #{call} {} {}: {}",
                op.verb(),
                op.key(),
                served.reply.as_ref().map_or("no reply".to_string(), |r| {
                    lease_core::protocol::machine::summarize(&r.kind)
                })
            )
        });
        if let Some(reply) = served.reply {
            let latency = self.cfg.latency;
            let at = faults::reply_arrival(self.now, latency, fault.as_ref(), &mut self.rng);
            self.schedule(at, Ev::Reply { call, reply });
        }
    }

    /// Bookkeeping after a write was applied.
    fn applied(&mut self, call: u64, op: &StoreOp) {
        let at = self.stamp();
        if let Some(w) = self.writes.get_mut(&call) {
            w.applied = Some(at);
        }
        let key = op.key().to_string();
        if key == PROTECTED_KEY {
            if let StoreOp::Put { body, .. } = op {
                let token = Fenced::decode(body).map_or(0, |f| f.token);
                if !verify::not_lowered(self.fence_highest, token) {
                    self.violations.push(Violation {
                        rule: Rule::FenceTokenDecreased,
                        at_ms: self.now,
                        node: self.writes.get(&call).map(|w| self.procs[w.pid].node),
                        text: format!(
                            "the protected object went from token {} to {token}",
                            self.fence_highest
                        ),
                    });
                }
                self.fence_highest = self.fence_highest.max(token);
            }
            return;
        }
        let by_operator = self
            .writes
            .get(&call)
            .is_some_and(|w| self.operators.contains(&w.owner));
        let session = self.writes.get(&call).and_then(|w| w.session.clone());
        let benign = |rec: &Option<Rec>| match rec {
            None => true,
            Some(r) => r.released && session.as_ref() == Some(&r.session),
        };
        if key == LEASE_KEY {
            let rec = self.read_rec(LEASE_KEY, None, by_operator);
            let ok = benign(&rec);
            if let Some(w) = self.writes.get_mut(&call) {
                w.benign = ok;
            }
            self.hist_obj.push(Snapshot {
                at,
                rec,
                by_operator,
            });
        } else if parse_epoch_key(LEASE_KEY, &key).is_some() {
            // Who wrote each epoch object (the newest may be another's
            // than this call's: a cleanup deletes an older one).
            if self.bucket.store().get(&key).is_some() {
                self.epoch_by_operator.insert(key.clone(), by_operator);
            } else {
                self.epoch_by_operator.remove(&key);
            }
            let newest = self
                .bucket
                .store()
                .keys(&format!("{LEASE_KEY}/"))
                .into_iter()
                .filter_map(|k| parse_epoch_key(LEASE_KEY, &k).map(|e| (e, k)))
                .max();
            let rec = newest.and_then(|(e, k)| {
                let by_operator = self.epoch_by_operator.get(&k).copied().unwrap_or(false);
                self.read_rec(&k, Some(e), by_operator)
            });
            // An epoch write is benign when it left ours, released, as the
            // newest, or did not change the newest (an old epoch's slot).
            let before = self.hist_epoch.last().and_then(|s| s.rec.as_ref());
            let ok = benign(&rec) || (rec.is_some() && rec.as_ref() == before);
            if let Some(w) = self.writes.get_mut(&call) {
                w.benign = ok;
            }
            self.hist_epoch.push(Snapshot {
                at,
                rec,
                by_operator,
            });
        }
    }

    fn read_rec(&self, key: &str, epoch: Option<u64>, by_operator: bool) -> Option<Rec> {
        let (_, body) = self.bucket.store().get(key)?;
        let r = LeaseRecord::decode(&body).ok()?;
        Some(Rec {
            session: sid(&r.holder, &r.session),
            holder: r.holder,
            token: epoch.unwrap_or(r.token),
            expires: r.expires_at.0.saturating_sub(EPOCH.0),
            released: r.released,
            released_at: r.released_at.map(|at| at.0.saturating_sub(EPOCH.0)),
            by_operator,
            ticks: r.runs.into_iter().map(|run| run.tick).collect(),
        })
    }

    fn hist(&self, protocol: Protocol) -> &[Snapshot] {
        match protocol {
            Protocol::Epochs => &self.hist_epoch,
            Protocol::Cas | Protocol::Mutex => &self.hist_obj,
            // `Protocol` is non-exhaustive outside lease-core.
            other => unreachable!("a protocol the simulator does not know: {other:?}"),
        }
    }

    /// The record current at `at` for `protocol`.
    fn current(&self, protocol: Protocol, at: Stamp) -> Option<&Rec> {
        let hist = self.hist(protocol);
        let k = hist.partition_point(|s| s.at <= at);
        k.checked_sub(1).and_then(|k| hist[k].rec.as_ref())
    }

    /// The record live at `at`, if any.
    fn live(&self, protocol: Protocol, at: Stamp) -> Option<&Rec> {
        self.current(protocol, at)
            .filter(|r| !r.released && r.expires > at.0)
    }

    fn owner_of(&self, session: &str) -> Option<usize> {
        self.sessions.get(session).map(|s| s.owner)
    }

    fn new_owner(&mut self) -> usize {
        self.owners += 1;
        self.owners as usize
    }
}

// ---------------------------------------------------------------------
// Store, clock and entropy handles.

/// A [`Store`] for one simulated process (see the module docs).
#[derive(Clone)]
pub struct SimStore {
    sh: Shared,
    pid: usize,
}

impl fmt::Debug for SimStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimStore(pid {})", self.pid)
    }
}

struct CallFuture {
    sh: Shared,
    pid: usize,
    op: Option<StoreOp>,
    call: Option<u64>,
    deadline: Mono,
    timer: Option<u64>,
}

impl Future for CallFuture {
    type Output = StoreReply;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<StoreReply> {
        let sh = self.sh.clone();
        let mut w = sh.borrow_mut();
        let pid = self.pid;
        let call = match self.call {
            Some(c) => c,
            None => {
                let op = self
                    .op
                    .take()
                    .expect("a call future is polled after it sent");
                let timeout = w.request_timeout(pid);
                self.deadline = w.proc_now(pid).mono + timeout;
                let c = w.send(pid, op);
                self.call = Some(c);
                c
            }
        };
        if let Some(reply) = w.calls.get_mut(&call).and_then(|s| s.reply.take()) {
            w.calls.remove(&call);
            return Poll::Ready(reply);
        }
        if w.proc_now(pid).mono >= self.deadline {
            w.calls.remove(&call);
            return Poll::Ready(StoreReply::transport(
                TransportErrorKind::Timeout,
                "no reply within the transport's timeout",
            ));
        }
        let rearm = match self.timer {
            None => true,
            Some(t) => w.timers.get(&t).is_none_or(|&(_, fired)| fired),
        };
        if rearm {
            if let Some(t) = self.timer {
                w.timers.remove(&t);
            }
            let deadline = self.deadline;
            self.timer = Some(w.add_timer(pid, deadline));
        }
        Poll::Pending
    }
}

impl Drop for CallFuture {
    fn drop(&mut self) {
        let mut w = self.sh.borrow_mut();
        if let Some(c) = self.call {
            w.calls.remove(&c);
        }
        if let Some(t) = self.timer {
            w.timers.remove(&t);
        }
    }
}

impl Store for SimStore {
    fn min_write_interval(&self) -> Duration {
        self.sh.borrow().cfg.spacing
    }

    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        CallFuture {
            sh: self.sh.clone(),
            pid: self.pid,
            op: Some(op),
            call: None,
            deadline: Mono(0),
            timer: None,
        }
    }
}

/// A [`Clock`] for one simulated process, on its node's clocks.
#[derive(Clone)]
pub struct SimClock {
    sh: Shared,
    pid: usize,
}

impl fmt::Debug for SimClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimClock(pid {})", self.pid)
    }
}

struct SleepFuture {
    sh: Shared,
    pid: usize,
    at: Mono,
    timer: Option<u64>,
}

impl Future for SleepFuture {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let sh = self.sh.clone();
        let mut w = sh.borrow_mut();
        if w.proc_now(self.pid).mono >= self.at {
            if let Some(t) = self.timer.take() {
                w.timers.remove(&t);
            }
            return Poll::Ready(());
        }
        let rearm = match self.timer {
            None => true,
            Some(t) => w.timers.get(&t).is_none_or(|&(_, fired)| fired),
        };
        if rearm {
            if let Some(t) = self.timer {
                w.timers.remove(&t);
            }
            let (pid, at) = (self.pid, self.at);
            self.timer = Some(w.add_timer(pid, at));
        }
        Poll::Pending
    }
}

impl Drop for SleepFuture {
    fn drop(&mut self) {
        if let Some(t) = self.timer {
            self.sh.borrow_mut().timers.remove(&t);
        }
    }
}

impl Clock for SimClock {
    fn now(&self) -> Now {
        self.sh.borrow().proc_now(self.pid)
    }

    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        SleepFuture {
            sh: self.sh.clone(),
            pid: self.pid,
            at,
            timer: None,
        }
    }
}

thread_local! {
    /// The entropy of the process being polled (the executor moves it in
    /// and out around each poll), for `Singleton`'s `fn() -> Entropy`.
    static CURRENT: RefCell<Option<Entropy>> = const { RefCell::new(None) };
}

/// Fresh entropy for the process being polled: what the OS's randomness is
/// to a real process. Deterministic: each process's generator is seeded
/// from the run's seed.
pub fn sim_entropy() -> Entropy {
    CURRENT.with(|c| {
        c.borrow_mut()
            .as_mut()
            .map_or_else(|| Entropy::from_seed(0), Entropy::fork)
    })
}

// ---------------------------------------------------------------------
// What clients tell the checker.

#[derive(Clone)]
struct Env {
    sh: Shared,
    pid: usize,
    node: usize,
    cfg: LeaseConfig,
}

impl Env {
    fn store(&self) -> SimStore {
        SimStore {
            sh: self.sh.clone(),
            pid: self.pid,
        }
    }

    fn clock(&self) -> SimClock {
        SimClock {
            sh: self.sh.clone(),
            pid: self.pid,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut self.sh.borrow_mut())
    }

    /// Starts an operation; `bound` adds to the standard bound (a job's
    /// length), `None` for no bound.
    fn op_start(&self, name: &'static str, bound: Option<Duration>) -> usize {
        let (pid, node) = (self.pid, self.node);
        let cfg = &self.cfg;
        let standard = (cfg.request_timeout + cfg.backoff_max) * (cfg.max_attempts + 2)
            + cfg.ttl
            + Duration::from_secs(2);
        self.with(|w| {
            let started = w.stamp();
            let protocol = w.nodes[node].protocol;
            w.ops.push(OpRec {
                pid,
                owner: w.procs[pid].owner,
                node,
                protocol,
                name,
                started,
                bound: bound.map(|b| (b + standard).as_millis() as u64),
                said: Vec::new(),
                done: None,
            });
            let k = w.ops.len() - 1;
            w.procs[pid].op = Some(k);
            k
        })
    }

    fn say(&self, op: usize, said: Said) {
        self.with(|w| {
            let at = w.stamp();
            let name = match &said {
                Said::Acquired { .. } => "acquired".to_string(),
                Said::Renewed { .. } => "renewed".to_string(),
                Said::Busy { .. } => "busy".to_string(),
                Said::Lost { .. } => "lost".to_string(),
                Said::AlreadyLost { .. } => "already lost".to_string(),
                Said::Released { .. } => "released".to_string(),
                Said::ReleaseUnknown { .. } => "release unknown".to_string(),
                Said::Broken { .. } => "broken".to_string(),
                Said::Failed { what, .. } => format!("error: {what}"),
                Said::Other(what) => what.clone(),
            };
            if let Said::Acquired { .. } = said {
                w.counts.acquisitions += 1;
            }
            *w.counts
                .outcomes
                .entry(format!("{}: {name}", w.ops[op].name))
                .or_default() += 1;
            let pid = w.ops[op].pid;
            let op_name = w.ops[op].name;
            w.log(|| format!("pid {pid} {op_name}: {said:?}"));
            w.ops[op].said.push((at, said));
        });
    }

    fn op_end(&self, op: usize) {
        self.with(|w| {
            let at = w.stamp();
            w.ops[op].done = Some(at);
            let pid = w.ops[op].pid;
            if w.procs[pid].op == Some(op) {
                w.procs[pid].op = None;
            }
        });
    }

    fn say_outcome<T: Says>(&self, op: usize, outcome: &Result<T, LeaseError>, acquire: bool) {
        self.say(op, said_of(outcome, acquire));
    }

    fn rng_duration(&self, rng: &mut Entropy, lo: Duration, hi: Duration) -> Duration {
        lo + (hi.saturating_sub(lo)).mul_f64(rng.unit())
    }
}

fn named(reason: &LostReason) -> Option<(String, u64)> {
    match reason {
        LostReason::TakenBy { holder, token, .. } => Some((holder.clone(), *token)),
        _ => None,
    }
}

/// The checker's name of a session: the holder with the session id (two
/// clients seeded alike draw the same ids; their holder names differ).
fn sid(holder: &str, session: &str) -> String {
    if session.is_empty() {
        String::new()
    } else {
        format!("{holder}/{session}")
    }
}

/// The first characters of a session's id, for humans.
fn short(sid: &str) -> &str {
    let id = sid.rsplit('/').next().unwrap_or(sid);
    id.get(..8).unwrap_or(id)
}

/// What an operation's outcome says, for the checker.
trait Says {
    fn said(&self) -> Said;
}

impl Says for AcquireOutcome {
    fn said(&self) -> Said {
        match self {
            AcquireOutcome::Acquired(l) => Said::Acquired {
                token: l.token,
                session: Some(sid(&l.record.holder, &l.session)),
            },
            AcquireOutcome::Busy(b) => Said::Busy {
                holder: b.holder.clone(),
                token: b.token,
                expires: b.expires_at.0.saturating_sub(EPOCH.0),
            },
        }
    }
}

impl Says for RenewOutcome {
    fn said(&self) -> Said {
        match self {
            RenewOutcome::Renewed(l) => Said::Renewed { token: l.token },
            RenewOutcome::Lost(r) => Said::Lost { named: named(r) },
        }
    }
}

impl Says for ReleaseOutcome {
    fn said(&self) -> Said {
        match self {
            ReleaseOutcome::Released { token } => Said::Released { token: *token },
            ReleaseOutcome::AlreadyLost(r) => Said::AlreadyLost { named: named(r) },
            ReleaseOutcome::Unknown { token, .. } => Said::ReleaseUnknown { token: *token },
        }
    }
}

impl Says for Option<Observation> {
    fn said(&self) -> Said {
        Said::Other("inspected".into())
    }
}

impl Says for lease_core::protocol::machine::BreakOutcome {
    fn said(&self) -> Said {
        Said::Broken { token: self.token }
    }
}

fn said_of<T: Says>(outcome: &Result<T, LeaseError>, acquire: bool) -> Said {
    match outcome {
        Ok(outcome) => outcome.said(),
        Err(e) => Said::Failed {
            acquire,
            what: error_name(e),
            claim: claim_of(e),
        },
    }
}

/// The session an error hands on as unsettled, if any.
fn claim_of(e: &LeaseError) -> Option<String> {
    e.unsettled()
        .map(|claim| sid(&claim.holder, &claim.session))
}

fn error_name(e: &LeaseError) -> String {
    match e {
        LeaseError::GaveUp { .. } => "gave up".into(),
        LeaseError::Config { .. } => "config".into(),
        LeaseError::Unexpected { .. } => "unexpected".into(),
        LeaseError::Changed { .. } => "changed".into(),
        LeaseError::UnsafeStore { .. } => "unsafe store".into(),
        LeaseError::WonTooLate { released, .. } => format!("won too late (released: {released})"),
        LeaseError::ProtocolMismatch { .. } => "protocol mismatch".into(),
        LeaseError::Denied { .. } => "denied".into(),
        LeaseError::NoSuchBucket { .. } => "no such bucket".into(),
        LeaseError::Unsupported { .. } => "unsupported".into(),
        LeaseError::Unreadable { .. } => "unreadable".into(),
        // `LeaseError` is non-exhaustive outside lease-core.
        other => unreachable!("an error the simulator does not know: {other:?}"),
    }
}

/// Records a job's start at its first poll and its end (completion or
/// drop) when dropped.
struct JobGuard {
    sh: Shared,
    job: usize,
    finished: bool,
}

impl JobGuard {
    fn start(env: &Env, token: u64, tick: Option<u64>) -> JobGuard {
        let (pid, node) = (env.pid, env.node);
        let job = env.with(|w| {
            let start = w.stamp();
            w.counts.jobs_started += 1;
            let protocol = w.nodes[node].protocol;
            w.jobs.push(JobRec {
                pid,
                owner: w.procs[pid].owner,
                node,
                protocol,
                token,
                tick,
                start,
                end: None,
            });
            w.log(|| format!("pid {pid} node {node} job starts with token {token}"));
            w.jobs.len() - 1
        });
        JobGuard {
            sh: env.sh.clone(),
            job,
            finished: false,
        }
    }
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        let mut w = self.sh.borrow_mut();
        let end = w.stamp();
        w.jobs[self.job].end = Some(end);
        if self.finished {
            w.counts.jobs_finished += 1;
        } else {
            w.counts.jobs_dropped += 1;
        }
        let (job, finished) = (self.job, self.finished);
        w.log(|| format!("job {job} ends (finished: {finished})"));
    }
}

/// The work a holder does: a fenced write (CAS, epochs), then `len` of
/// activity on the node's clock.
async fn job(env: Env, token: u64, len: Duration, tick: Option<u64>) {
    let mut guard = JobGuard::start(&env, token, tick);
    if env.cfg.protocol.fences() {
        let payload = format!("job of node {} token {token}", env.node).into_bytes();
        let mut op = FenceOp::new(
            env.cfg.clone(),
            sim_entropy(),
            PROTECTED_KEY,
            token,
            payload,
        );
        let _ = drive(&mut op, &env.store(), &env.clock(), |_| {}).await;
    }
    let clock = env.clock();
    let until = clock.now().mono + len;
    clock.sleep_until(until).await;
    guard.finished = true;
}

// ---------------------------------------------------------------------
// The clients.

/// One delivery of scheduled tick `tick` to a singleton (`retry`: the
/// platform's retries of it so far). With cas and epochs the run is for
/// the tick ([`Singleton::run_tick`]: a tick already completed does not
/// run again); the mutex keeps no record, so its runs are plain.
async fn singleton_tick(env: Env, len: Duration, probe: bool, tick: u64, retry: u32) {
    if env.with(|w| w.cfg.broken) == Some(Broken::StartPastDeadline) {
        return broken_singleton(env, len).await;
    }
    // A warm execution environment keeps what its last run left: the
    // claims live in the node (a crash loses them, as a new environment).
    let claims = env.with(|w| w.nodes[env.node].claims.clone());
    let s =
        Singleton::new(env.cfg.clone(), env.store(), env.clock(), sim_entropy).with_claims(claims);
    let s = if probe { s } else { s.without_probe() };
    let check = if probe {
        most_check_time(&env.cfg)
    } else {
        Duration::ZERO
    };
    let op = env.op_start("singleton acquire", Some(check));
    let mut acquire_open = true;
    let run = env.op_start("singleton run", None);
    env.with(|w| w.procs[env.pid].op = Some(op));
    let envj = env.clone();
    let work = move |token| {
        let envj = envj.clone();
        async move {
            job(envj, token, len, Some(tick)).await;
            Ok::<_, String>(format!("tick {tick} token {token}"))
        }
    };
    let observe = |step: Step<'_>| match step {
        Step::Acquired { token } => {
            env.say(
                op,
                Said::Acquired {
                    token,
                    session: None,
                },
            );
            env.op_end(op);
            acquire_open = false;
            env.with(|w| w.procs[env.pid].op = Some(run));
        }
        Step::Skipped(busy) => env.say(
            op,
            Said::Busy {
                holder: busy.holder.clone(),
                token: busy.token,
                expires: busy.expires_at.0.saturating_sub(EPOCH.0),
            },
        ),
        Step::Hold(Event::Renewed { token, .. }) => env.say(run, Said::Renewed { token }),
        Step::Hold(_) => {}
        Step::ReleaseFailed(_) => env.say(run, Said::Other("release failed".into())),
    };
    // With time limits, half the deliveries carry the invocation's
    // remaining time, from too little for the lease's requests to more
    // than the job needs: a job still running near the end is stopped and
    // the lease released. (Without, nothing is drawn: a schedule found
    // before time limits existed replays as it was.)
    let needed = time_needed(&env.cfg);
    let remaining = env.with(|w| {
        if !w.cfg.time_limits {
            return None;
        }
        let mut rng = w.rng.fork();
        (rng.unit() < 0.5).then(|| needed.mul_f64(0.8) + (len * 2).mul_f64(rng.unit()))
    });
    fn within(run: ScheduledRun<'_>, remaining: Option<Duration>) -> ScheduledRun<'_> {
        match remaining {
            Some(left) => run.within(left),
            None => run,
        }
    }
    let result = if env.cfg.protocol == Protocol::Mutex {
        let run = within(ScheduledRun::new(None), remaining);
        s.run_scheduled(run, work, observe)
            .await
            .map(|out| match out {
                TickOutcome::Ran { .. } => "ran",
                TickOutcome::Skipped { .. } => "skipped",
                TickOutcome::AlreadyRan { .. } => "already ran (impossible without a tick)",
            })
    } else {
        let id = Tick::new(format!("sim:{tick}")).expect("a valid tick id");
        let run = within(ScheduledRun::new(Some(&id)), remaining);
        s.run_scheduled(run, work, observe)
            .await
            .map(|out| match out {
                TickOutcome::Ran { recorded, .. } => {
                    env.with(|w| {
                        let at = w.stamp();
                        let protocol = w.nodes[env.node].protocol;
                        w.tick_reports.push(TickReport {
                            at,
                            pid: env.pid,
                            node: env.node,
                            protocol,
                            tick,
                            recorded,
                        });
                    });
                    "ran"
                }
                TickOutcome::AlreadyRan { .. } => "already ran",
                TickOutcome::Skipped { .. } => "skipped",
            })
    };
    let said = match &result {
        // A run that ran says nothing of its release (it may have
        // expired on its own): nothing to judge but the job.
        Ok(what) => Said::Other((*what).into()),
        Err(SingletonError::Tick(_)) => Said::Other("tick refused".into()),
        Err(SingletonError::Lease(e)) => Said::Failed {
            acquire: acquire_open,
            what: error_name(e),
            claim: claim_of(e),
        },
        Err(SingletonError::LeaseLost { reason, .. }) => Said::Lost {
            named: named(reason),
        },
        Err(SingletonError::Job(_)) => Said::Other("job failed".into()),
        Err(SingletonError::Overrun { .. }) => {
            env.with(|w| w.counts.overruns_reported += 1);
            Said::Other("overrun".into())
        }
        Err(SingletonError::Settings(_)) => Said::Other("settings".into()),
        Err(SingletonError::NoTime { .. }) => Said::Other("no time".into()),
        Err(SingletonError::Stopped { .. }) => Said::Other("stopped at the time limit".into()),
        // `SingletonError` is non-exhaustive outside lease-core.
        Err(other) => unreachable!("an error the simulator does not know: {other:?}"),
    };
    if acquire_open {
        env.op_end(op);
    }
    // Merged, not replaced: a duplicate tick running alongside on the
    // same node must not drop the claims this run left.
    env.with(|w| {
        let node = &mut w.nodes[env.node];
        for claim in s.claims() {
            node.claims.retain(|c| c.session != claim.session);
            node.claims.push(claim);
        }
        // A failed run is retried by the platform (Lambda retries an
        // asynchronous invocation twice), half a ttl later.
        if result.is_err() && retry < PLATFORM_RETRIES {
            let at = w.now + w.cfg.ttl.as_millis() as u64 / 2;
            let node = env.node;
            w.schedule(
                at,
                Ev::Deliver {
                    node,
                    tick,
                    retry: retry + 1,
                },
            );
        }
    });
    env.say(run, said);
    env.op_end(run);
}

/// How many times the platform retries a failed run of a tick.
const PLATFORM_RETRIES: u32 = 2;

/// Broken on purpose: acquires, then starts the job once the lease's local
/// deadline has passed, without holding it.
async fn broken_singleton(env: Env, len: Duration) {
    let op = env.op_start("broken acquire", Some(Duration::ZERO));
    let mut acquire = LeaseOp::acquire(env.cfg.clone(), sim_entropy());
    let out = drive(&mut acquire, &env.store(), &env.clock(), |_| {}).await;
    env.say_outcome(op, &out, true);
    env.op_end(op);
    if let Ok(AcquireOutcome::Acquired(lease)) = out {
        env.clock()
            .sleep_until(lease.valid_until + Duration::from_millis(1))
            .await;
        job(env.clone(), lease.token, len, None).await;
    }
}

async fn lease_run(env: Env, len: Duration, probe: bool) {
    // The store's check may wait for another's probe, then probe.
    let check = if probe {
        most_check_time(&env.cfg)
    } else {
        Duration::ZERO
    };
    let op = env.op_start("run acquire", Some(check));
    let mut acquire = LeaseOp::acquire(env.cfg.clone(), sim_entropy());
    // As `lease run` checks the store: the verdict the fleet shares, or a
    // probe that earns it (`Leases::check_store`).
    let checked = if probe {
        let mut check = SharedProbe::new(env.cfg.clone(), sim_entropy());
        drive(&mut check, &env.store(), &env.clock(), |_| {})
            .await
            .and_then(|s| s.supports(env.cfg.protocol, &env.cfg.key))
    } else {
        Ok(())
    };
    let out = match checked {
        Ok(()) => drive(&mut acquire, &env.store(), &env.clock(), |_| {}).await,
        Err(e) => Err(e),
    };
    env.say_outcome(op, &out, true);
    env.op_end(op);
    let Ok(AcquireOutcome::Acquired(lease)) = out else {
        return;
    };
    let token = lease.token;
    if env.with(|w| w.cfg.broken) == Some(Broken::IgnoreDeadline) {
        // Broken on purpose: the job runs to its end whatever happens to
        // the lease (renewals are not even attempted).
        return job(env.clone(), token, len, None).await;
    }
    let run = env.op_start("run hold", None);
    let held = hold_while(
        &env.cfg,
        &env.store(),
        &env.clock(),
        sim_entropy(),
        lease,
        job(env.clone(), token, len, None),
        |e| {
            if let Event::Renewed { token, .. } = e {
                env.say(run, Said::Renewed { token })
            }
        },
    )
    .await;
    let said = match held {
        Held::Finished {
            released: Some(r), ..
        } => said_of(&r, false),
        Held::Finished { released: None, .. } => Said::Other("finished, no release".into()),
        Held::Lost { reason, .. } => Said::Lost {
            named: named(&reason),
        },
        Held::Overrun { .. } => Said::Other("overrun".into()),
    };
    env.say(run, said);
    env.op_end(run);
}

/// A fresh [`Leases`] for the process of `env` (no claims, no probe
/// verdict), the probe off.
fn process_client(env: &Env) -> Leases<SimStore, SimClock> {
    Leases::with_config(
        env.store(),
        env.clock(),
        env.cfg.clone(),
        false,
        sim_entropy,
    )
    .expect("the simulation's settings are valid")
}

/// The client one `lease` command builds: a fresh [`Leases`] (a new
/// process: no claims, no probe verdict), with `LEASE_PROBE=off`.
fn cli_client(env: &Env) -> Leases<SimStore, SimClock> {
    let leases = process_client(env);
    // With the flight recorder built in, every command records, as
    // `lease run --trace` does; the checker replays each trace.
    #[cfg(feature = "trace")]
    {
        let recorder = lease_core::trace::Recorder::default();
        leases.record_to(recorder.clone());
        env.with(|w| w.traces.push((env.node, recorder)));
    }
    leases
}

/// Every CLI client's trace, written out and read back as a file would
/// be, replayed: a divergence means the machines took an input the
/// recorder missed; a broken rule, a deadline or token the trace itself
/// shows to be wrong.
#[cfg(feature = "trace")]
fn check_traces(w: &mut Inner, end: u64, found: &mut Vec<Violation>) {
    use lease_core::trace::replay::{replay, Trace};
    for (node, recorder) in std::mem::take(&mut w.traces) {
        if recorder.is_empty() {
            continue;
        }
        w.counts.traces_replayed += 1;
        let text = recorder.to_jsonl();
        let report = match Trace::parse(&text) {
            Ok(trace) => replay(&trace),
            Err(e) => {
                found.push(Violation {
                    rule: Rule::TraceDiverged,
                    at_ms: end,
                    node: Some(node),
                    text: format!("the trace does not read back: {e}"),
                });
                continue;
            }
        };
        if let Some(run) = report.diverged() {
            found.push(Violation {
                rule: Rule::TraceDiverged,
                at_ms: end,
                node: Some(node),
                text: format!("run {} ({}): {:?}", run.run, run.op, run.replayed),
            });
        }
        for broken in &report.broken {
            found.push(Violation {
                rule: Rule::TraceRuleBroken,
                at_ms: end,
                node: Some(node),
                text: broken.to_string(),
            });
        }
    }
}

/// Runs one CLI command through the client, as the `lease` command does,
/// and says its outcome.
async fn cli_call<T: Says>(
    env: &Env,
    name: &'static str,
    wait: Duration,
    call: impl Future<Output = Result<T, LeaseError>>,
) -> Result<T, LeaseError> {
    // A wait is spent on the node's clock, which may run slow.
    let k = env.op_start(
        name,
        Some(wait.mul_f64(1.0 + 2.0 * env.with(|w| w.cfg.max_drift))),
    );
    let out = call.await;
    env.say_outcome(k, &out, name == "cli acquire");
    env.op_end(k);
    out
}

/// A CLI command on a lease named by its etag (`lease renew --etag`,
/// `lease release --etag`), through the client: `not_held` is what it says
/// when that version is no longer the lease.
async fn cli_by_etag<T: Says>(
    env: &Env,
    name: &'static str,
    call: impl Future<Output = Result<T, ByEtagError>>,
    not_held: Said,
) -> Option<T> {
    let k = env.op_start(name, Some(Duration::ZERO));
    let out = call.await;
    let said = match &out {
        Ok(outcome) => outcome.said(),
        Err(ByEtagError::Lease(e)) => said_of::<T>(&Err(e.clone()), false),
        Err(ByEtagError::NotHeld(_)) => not_held,
    };
    env.say(k, said);
    env.op_end(k);
    out.ok()
}

async fn cli_script(env: Env, mut rng: Entropy) {
    let cfg = env.cfg.clone();
    let key = cfg.key.clone();
    let mut first = true;
    loop {
        // Each round is one run of the operator's script (acquire, renews,
        // release): a new logical client, which cannot know an earlier
        // round's lease if that round gave up on it. Each command is a
        // process of its own, with a client of its own.
        if !std::mem::take(&mut first) {
            env.with(|w| {
                let owner = w.new_owner();
                w.procs[env.pid].owner = owner;
            });
        }
        let wait = env.with(|w| w.cfg.cli_wait);
        let client = cli_client(&env);
        let out = if wait.is_zero() {
            cli_call(&env, "cli acquire", wait, client.acquire(&key)).await
        } else {
            cli_call(&env, "cli acquire", wait, client.acquire_within(&key, wait)).await
        };
        if let Ok(AcquireOutcome::Acquired(lease)) = out {
            let mut etag = lease.etag.clone();
            let mut token = lease.token;
            let mut held = true;
            let renews = if cfg.protocol.renews() {
                (rng.unit() * 3.0) as u32
            } else {
                0
            };
            for _ in 0..renews {
                let wait = env.rng_duration(&mut rng, Duration::ZERO, cfg.renew_every);
                let clock = env.clock();
                clock.sleep_until(clock.now().mono + wait).await;
                let client = cli_client(&env);
                let renewed = cli_by_etag(
                    &env,
                    "cli renew",
                    client.renew_by_etag(&key, etag.as_str()),
                    Said::Lost { named: None },
                )
                .await;
                match renewed {
                    Some(RenewOutcome::Renewed(l)) => {
                        etag = l.etag;
                        token = l.token;
                    }
                    _ => {
                        held = false;
                        break;
                    }
                }
            }
            if held {
                let wait = env.rng_duration(&mut rng, Duration::ZERO, cfg.renew_every);
                let clock = env.clock();
                clock.sleep_until(clock.now().mono + wait).await;
                let client = cli_client(&env);
                if env.with(|w| w.cfg.broken) == Some(Broken::BlindRelease) {
                    // Broken on purpose: reports Released without asking.
                    let k = env.op_start("cli release", Some(Duration::ZERO));
                    env.say(k, Said::Released { token });
                    env.op_end(k);
                } else if rng.unit() < env.with(|w| w.cfg.late_release) {
                    // Released at the lease's local deadline exactly: the
                    // client's two halves of `release_by_etag` (find the
                    // version held, release it) with the wait between them.
                    let k = env.op_start("cli inspect", Some(Duration::ZERO));
                    let lease = client.held(&key, etag.as_str()).await;
                    env.say(k, Said::Other("inspected".into()));
                    env.op_end(k);
                    if let Ok(lease) = lease {
                        env.clock().sleep_until(lease.valid_until).await;
                        let _ =
                            cli_call(&env, "cli release", Duration::ZERO, client.release(lease))
                                .await;
                    }
                } else {
                    let _ = cli_by_etag(
                        &env,
                        "cli release",
                        client.release_by_etag(&key, etag.as_str()),
                        Said::AlreadyLost { named: None },
                    )
                    .await;
                }
            }
        }
        let (lo, hi) = env.with(|w| w.cfg.tick_every);
        let wait = env.rng_duration(&mut rng, lo, hi);
        let clock = env.clock();
        clock.sleep_until(clock.now().mono + wait).await;
    }
}

async fn operator(env: Env, mut rng: Entropy) {
    let cfg = env.cfg.clone();
    loop {
        let wait = env.rng_duration(&mut rng, cfg.ttl, cfg.ttl * 4);
        let clock = env.clock();
        clock.sleep_until(clock.now().mono + wait).await;
        // `lease inspect`, then maybe `lease break --etag`: each a process
        // with a client of its own.
        let inspect = cli_client(&env);
        let seen = cli_call(
            &env,
            "operator inspect",
            Duration::ZERO,
            inspect.inspect(&cfg.key),
        )
        .await;
        if let Ok(Some(seen)) = seen {
            if !seen.record.released && rng.unit() < 0.4 {
                // Thinking it over: the lease may change hands meanwhile.
                let delay = env.with(|w| w.cfg.break_delay);
                let delay = env.rng_duration(&mut rng, Duration::ZERO, delay);
                let clock = env.clock();
                clock.sleep_until(clock.now().mono + delay).await;
                let client = cli_client(&env);
                let _ = cli_call(
                    &env,
                    "operator break",
                    Duration::ZERO,
                    client.break_lease(&cfg.key, seen.etag.as_str(), None),
                )
                .await;
            }
        }
    }
}

async fn elector_proc(env: Env, mut rng: Entropy, stop_after: Option<Duration>, job_max: Duration) {
    let mut elector = Elector::new(env.cfg.clone(), sim_entropy());
    let events: RefCell<VecDeque<Event>> = RefCell::new(VecDeque::new());
    let clock = env.clock();
    let stop_at = stop_after.map(|d| clock.now().mono + d);
    let stop_clock = clock.clone();
    let stop = async move {
        match stop_at {
            Some(at) => stop_clock.sleep_until(at).await,
            None => pending::<()>().await,
        }
    };
    let op = env.op_start("elector", None);
    // As `Leadership` drives it: re-reads conditional.
    let store = Revalidating::new(env.store());
    let mut driving = pin!(drive_until(
        &mut elector,
        &store,
        &clock,
        |e| events.borrow_mut().push_back(e),
        stop
    ));
    let mut work: Option<Pin<Box<dyn Future<Output = ()>>>> = None;
    // The token and local deadline of the last Acquired/Renewed event: new
    // work starts only before the deadline, as the events' docs ask.
    let mut leading: Option<(u64, Mono)> = None;
    let mut exit = None;
    poll_fn(|cx| loop {
        // A user stops its work before it resigns.
        if stop_at.is_some_and(|at| clock.now().mono >= at) {
            leading = None;
            work = None;
        }
        if exit.is_none() {
            if let Poll::Ready(x) = driving.as_mut().poll(cx) {
                exit = Some(x);
            }
        }
        let next = events.borrow_mut().pop_front();
        if let Some(e) = next {
            match e {
                Event::Acquired { token, valid_until } => {
                    env.say(
                        op,
                        Said::Acquired {
                            token,
                            session: None,
                        },
                    );
                    leading = Some((token, valid_until));
                    let len = env.rng_duration(&mut rng, Duration::ZERO, job_max);
                    work = Some(Box::pin(job(env.clone(), token, len, None)));
                }
                Event::Renewed { token, valid_until } => {
                    env.say(op, Said::Renewed { token });
                    leading = Some((token, valid_until));
                }
                Event::Lost { reason, .. } => {
                    env.say(
                        op,
                        Said::Lost {
                            named: named(&reason),
                        },
                    );
                    leading = None;
                    work = None;
                }
                Event::Released { token } => {
                    env.say(op, Said::Released { token });
                    leading = None;
                    work = None;
                }
                Event::AtRisk { .. } | Event::LeaderChanged(_) | Event::Error(_) => {}
                // `Event` is non-exhaustive outside lease-core.
                other => unreachable!("an event the simulator does not know: {other:?}"),
            }
            continue;
        }
        if exit.is_some() {
            return Poll::Ready(());
        }
        if let Some(w) = work.as_mut() {
            if w.as_mut().poll(cx).is_ready() {
                work = leading
                    .filter(|(_, until)| clock.now().mono < *until)
                    .map(|(token, _)| {
                        let len = env.rng_duration(&mut rng, Duration::ZERO, job_max);
                        Box::pin(job(env.clone(), token, len, None))
                            as Pin<Box<dyn Future<Output = ()>>>
                    });
                continue;
            }
        }
        return Poll::Pending;
    })
    .await;
    drop(work);
    env.op_end(op);
}

/// Notes what `leadership` answers now.
fn sample(env: &Env, leadership: &Leadership<SimClock>, resigned: bool) {
    let (is_leader, token, health) = (
        leadership.is_leader(),
        leadership.token(),
        leadership.health(),
    );
    let (pid, node) = (env.pid, env.node);
    env.with(|w| {
        let at = w.stamp();
        let owner = w.procs[pid].owner;
        let protocol = w.nodes[node].protocol;
        w.samples.push(Sample {
            at,
            pid,
            owner,
            node,
            protocol,
            is_leader,
            token,
            health,
            resigned,
        });
    });
}

/// A service on `Leadership`, as the native example runs one: the
/// campaign, work that runs from `until_leader` until `lost` (the `lost`
/// future made at once, first polled after a setup of up to half a ttl
/// one time in three), a `resign()` at `stop_after`, and the handle's
/// answers sampled every ttl/40 to ttl/8 (every 20 ms for two seconds
/// after the resign, while the release is under way).
async fn service_proc(env: Env, mut rng: Entropy, stop_after: Option<Duration>, job_max: Duration) {
    let op = env.op_start("service", None);
    let leases = process_client(&env);
    let said = env.clone();
    let (leadership, campaign) = leases.lead_with(LEASE_KEY, move |event| {
        let s = match event {
            Event::Acquired { token, .. } => Said::Acquired {
                token: *token,
                session: None,
            },
            Event::Renewed { token, .. } => Said::Renewed { token: *token },
            Event::Lost { reason, .. } => Said::Lost {
                named: named(reason),
            },
            Event::Released { token } => Said::Released { token: *token },
            Event::AtRisk { .. } | Event::LeaderChanged(_) | Event::Error(_) => return,
            // `Event` is non-exhaustive outside lease-core.
            other => unreachable!("an event the simulator does not know: {other:?}"),
        };
        said.say(op, s);
    });
    let clock = env.clock();
    let resigned_at: Cell<Option<Mono>> = Cell::new(None);
    let mut work_rng = rng.fork();
    let work = async {
        while let Ok(token) = leadership.until_leader().await {
            let lost = leadership.lost();
            if work_rng.unit() < 0.3 {
                let setup = env.rng_duration(&mut work_rng, Duration::ZERO, env.cfg.ttl / 2);
                clock.sleep_until(clock.now().mono + setup).await;
            }
            let len = env
                .rng_duration(&mut work_rng, Duration::ZERO, job_max)
                .max(Duration::from_millis(10));
            // The work stops when `lost` completes (polled first: work
            // whose term is over does not start).
            first_of(lost, job(env.clone(), token, len, None)).await;
        }
    };
    let resigner = async {
        if let Some(after) = stop_after {
            clock.sleep_until(clock.now().mono + after).await;
            leadership.resign();
            resigned_at.set(Some(clock.now().mono));
            sample(&env, &leadership, true);
        }
        pending::<()>().await
    };
    let sampler = async {
        loop {
            let now = clock.now().mono;
            let recent = resigned_at
                .get()
                .is_some_and(|r| now - r < Duration::from_secs(2));
            let gap = if recent {
                Duration::from_millis(20)
            } else {
                env.rng_duration(&mut rng, env.cfg.ttl / 40, env.cfg.ttl / 8)
            };
            clock.sleep_until(now + gap).await;
            sample(&env, &leadership, resigned_at.get().is_some());
        }
    };
    let (mut campaign, mut work) = (pin!(campaign), pin!(work));
    let (mut resigner, mut sampler) = (pin!(resigner), pin!(sampler));
    let (mut campaign_done, mut work_done) = (false, false);
    poll_fn(|cx| {
        if !campaign_done {
            campaign_done = campaign.as_mut().poll(cx).is_ready();
        }
        let _ = resigner.as_mut().poll(cx);
        if !work_done {
            work_done = work.as_mut().poll(cx).is_ready();
        }
        let _ = sampler.as_mut().poll(cx);
        if campaign_done && work_done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    env.op_end(op);
}

/// Runs `work` until `stop` completes (`stop` polled first).
async fn first_of(stop: impl Future<Output = ()>, work: impl Future<Output = ()>) {
    let (mut stop, mut work) = (pin!(stop), pin!(work));
    poll_fn(|cx| {
        if stop.as_mut().poll(cx).is_ready() || work.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

// ---------------------------------------------------------------------
// The executor.

/// A process's waker: a wake marks the process to be polled again at the
/// current instant (a `Leadership` handle wakes the work waiting on it
/// when the campaign changes the term).
struct PidWaker {
    pid: usize,
    woken: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl std::task::Wake for PidWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(self.pid);
    }
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// A world running the product's clients (see the module docs).
pub struct ClientWorld {
    sh: Shared,
    tasks: Vec<Option<Task>>,
    /// Processes their wakers woke since the executor last looked.
    wakes: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl ClientWorld {
    /// A world ready to run `cfg`.
    pub fn new(cfg: ClientsConfig) -> ClientWorld {
        let cfg = Rc::new(cfg);
        let mut rng = Entropy::from_seed(cfg.seed as u128);
        let bucket = Bucket::new(cfg.front_end_skew)
            .with_page_size(cfg.page_size)
            .with_spacing(cfg.spacing);
        for i in 0..cfg.junk_keys {
            bucket.store().apply(&StoreOp::Put {
                key: format!("{LEASE_KEY}/0-other-{i:02}"),
                body: b"another application's object".to_vec(),
                condition: lease_core::store::PutCondition::IfAbsent,
            });
        }
        let nodes = (0..cfg.clients.len())
            .map(|i| NodeState {
                clock: NodeClock::draw(cfg.max_drift, cfg.max_offset, &mut rng),
                lags: Vec::new(),
                lagged_since: None,
                suspended_until: 0,
                kind: cfg.clients[i],
                protocol: cfg.protocols.get(i).copied().unwrap_or_default(),
                spawned: 0,
                main: None,
                claims: Vec::new(),
            })
            .collect();
        let inner = Inner {
            #[cfg(feature = "trace")]
            traces: Vec::new(),
            scripted_uses: vec![0; cfg.scripted.len()],
            cfg: cfg.clone(),
            now: 0,
            step: 0,
            rng,
            queue: Queue::new(),
            bucket,
            nodes,
            procs: Vec::new(),
            owners: 0,
            calls: BTreeMap::new(),
            timers: BTreeMap::new(),
            next_id: 0,
            woken: BTreeSet::new(),
            hist_obj: Vec::new(),
            hist_epoch: Vec::new(),
            epoch_by_operator: BTreeMap::new(),
            sessions: BTreeMap::new(),
            writes: BTreeMap::new(),
            ops: Vec::new(),
            jobs: Vec::new(),
            ticks: 0,
            tick_reports: Vec::new(),
            samples: Vec::new(),
            fence_highest: 0,
            fault_times: Vec::new(),
            violations: Vec::new(),
            counts: Counts::default(),
            timeline: Vec::new(),
            operators: BTreeSet::new(),
        };
        let sh = Rc::new(RefCell::new(inner));
        {
            let mut w = sh.borrow_mut();
            for node in 0..cfg.clients.len() {
                let random = (w.rng.unit() * 1000.0) as u64;
                let at = cfg.start_at.get(node).copied().unwrap_or(random);
                let ev = match cfg.clients[node] {
                    ClientKind::Singleton => Ev::Tick { node },
                    _ => Ev::Run { node },
                };
                w.schedule(at, ev);
            }
            for f in &cfg.node_faults {
                w.schedule(f.at_ms(), Ev::NodeFault(f.clone()));
            }
        }
        ClientWorld {
            sh,
            tasks: Vec::new(),
            wakes: Arc::default(),
        }
    }

    /// Starts a process on `node`; a singleton's runs `tick` (its id and
    /// retries so far), or a new tick.
    fn spawn(&mut self, node: usize, tick: Option<(u64, u32)>) -> usize {
        let mut w = self.sh.borrow_mut();
        let cfg = w.cfg.clone();
        let kind = w.nodes[node].kind;
        let k = w.nodes[node].spawned;
        w.nodes[node].spawned += 1;
        let entropy = if cfg.same_entropy && node < 2 {
            Entropy::from_seed((cfg.seed as u128) << 32 | k as u128)
        } else {
            w.rng.fork()
        };
        let owner = w.new_owner();
        if kind == ClientKind::Operator {
            w.operators.insert(owner);
        }
        let pid = w.procs.len();
        let now = w.now;
        w.procs.push(ProcState {
            node,
            owner,
            alive: true,
            paused_until: None,
            pauses: Vec::new(),
            entropy: Some(entropy),
            op: None,
            retry_after_max: 0,
            started: now,
            ended: None,
            crashed: false,
        });
        w.counts.processes += 1;
        let mut rng = w.rng.fork();
        let env = Env {
            sh: self.sh.clone(),
            pid,
            node,
            cfg: cfg.lease_config(node),
        };
        let len = cfg.job_max.mul_f64(rng.unit());
        let probe = cfg.probe;
        let task: Task = match kind {
            ClientKind::Singleton => {
                let (tick, retry) = tick.unwrap_or_else(|| {
                    w.ticks += 1;
                    (w.ticks, 0)
                });
                Box::pin(singleton_tick(env, len, probe, tick, retry))
            }
            ClientKind::Hold => Box::pin(lease_run(env, len, probe)),
            ClientKind::Cli => Box::pin(cli_script(env, rng)),
            ClientKind::Operator => Box::pin(operator(env, rng)),
            ClientKind::Elector => {
                let stop = (cfg.resign && rng.unit() < 0.5)
                    .then(|| cfg.duration.mul_f64(rng.unit()))
                    .or(cfg.resign_after);
                let job_max = cfg.ttl;
                Box::pin(elector_proc(env, rng, stop, job_max))
            }
            ClientKind::Service => {
                let stop = (cfg.resign && rng.unit() < 0.5)
                    .then(|| cfg.duration.mul_f64(rng.unit()))
                    .or(cfg.resign_after);
                let job_max = cfg.ttl;
                Box::pin(service_proc(env, rng, stop, job_max))
            }
        };
        if matches!(
            kind,
            ClientKind::Cli | ClientKind::Operator | ClientKind::Elector | ClientKind::Service
        ) {
            w.nodes[node].main = Some(pid);
        }
        w.log(|| format!("pid {pid} starts on node {node} ({kind:?})"));
        w.woken.insert(pid);
        let suspended = w.nodes[node].suspended_until.saturating_sub(now);
        if suspended > 0 {
            pause_proc(&mut w, pid, suspended);
        }
        drop(w);
        self.tasks.push(Some(task));
        pid
    }

    fn poll(&mut self, pid: usize) {
        let Some(task) = self.tasks[pid].as_mut() else {
            return;
        };
        let entropy = self.sh.borrow_mut().procs[pid].entropy.take();
        CURRENT.with(|c| *c.borrow_mut() = entropy);
        let waker = std::task::Waker::from(Arc::new(PidWaker {
            pid,
            woken: self.wakes.clone(),
        }));
        let mut cx = Context::from_waker(&waker);
        let ready = task.as_mut().poll(&mut cx).is_ready();
        let entropy = CURRENT.with(|c| c.borrow_mut().take());
        let (crash, pause) = {
            let mut w = self.sh.borrow_mut();
            w.procs[pid].entropy = entropy;
            let (pc, pp) = (w.cfg.poll_crash, w.cfg.poll_pause);
            (!ready && w.chance(pc), !ready && w.chance(pp))
        };
        if ready {
            self.finish(pid, false);
        } else if crash {
            self.sh.borrow_mut().fault(Some(pid), "crash at a poll");
            self.finish(pid, true);
        } else if pause {
            let mut w = self.sh.borrow_mut();
            let length = w.cfg.ttl.mul_f64(2.0 * w.rng.unit()).as_millis() as u64;
            w.fault(Some(pid), "pause at a poll");
            pause_proc(&mut w, pid, length);
        }
    }

    /// Ends process `pid` (dropping its future outside any borrow).
    fn finish(&mut self, pid: usize, crashed: bool) {
        let task = self.tasks[pid].take();
        drop(task);
        let mut w = self.sh.borrow_mut();
        let now = w.now;
        let p = &mut w.procs[pid];
        p.alive = false;
        p.ended = Some(now);
        p.crashed = crashed;
        if let Some(until) = p.paused_until.take() {
            // Cut the inert window at the end.
            if let Some(last) = p.pauses.last_mut() {
                last.1 = last.1.min(until).min(now);
            }
        }
        let node = p.node;
        if w.nodes[node].main == Some(pid) {
            w.nodes[node].main = None;
        }
        w.log(|| format!("pid {pid} ends (crashed: {crashed})"));
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive {
                call,
                pid,
                op,
                fault,
            } => self.sh.borrow_mut().arrive(call, pid, op, fault),
            Ev::Reply { call, reply } => {
                let mut w = self.sh.borrow_mut();
                // A reply to a dropped call (its sender crashed or moved on)
                // is lost.
                if let Some(slot) = w.calls.get_mut(&call) {
                    slot.reply = Some(reply);
                    let pid = slot.pid;
                    w.wake(pid);
                }
            }
            Ev::Timer { timer } => {
                let mut w = self.sh.borrow_mut();
                if let Some((pid, fired)) = w.timers.get_mut(&timer) {
                    *fired = true;
                    let pid = *pid;
                    w.wake(pid);
                }
            }
            Ev::Tick { node } => {
                let (lo, hi, dup, dur) = {
                    let w = self.sh.borrow();
                    (
                        w.cfg.tick_every.0.as_millis() as f64,
                        w.cfg.tick_every.1.as_millis() as f64,
                        w.cfg.duplicate_tick,
                        w.cfg.ttl.as_millis() as f64,
                    )
                };
                let tick = {
                    let mut w = self.sh.borrow_mut();
                    w.ticks += 1;
                    w.ticks
                };
                self.spawn(node, Some((tick, 0)));
                let mut w = self.sh.borrow_mut();
                if w.chance(dup) {
                    // At-least-once delivery: the same tick again, maybe
                    // while the first still runs; every other one to the
                    // next singleton's environment.
                    let later = (w.rng.unit() * 2.0 * dur) as u64;
                    let at = w.now + later;
                    w.fault(None, "tick delivered twice");
                    let n = w.nodes.len();
                    let to = (1..n)
                        .map(|i| (node + i) % n)
                        .find(|&o| w.nodes[o].kind == ClientKind::Singleton)
                        .filter(|_| tick % 2 == 1)
                        .unwrap_or(node);
                    w.schedule(
                        at,
                        Ev::Deliver {
                            node: to,
                            tick,
                            retry: 0,
                        },
                    );
                }
                let next = w.now + (lo + (hi - lo) * w.rng.unit()) as u64;
                w.schedule(next, Ev::Tick { node });
            }
            Ev::Deliver { node, tick, retry } => {
                self.spawn(node, Some((tick, retry)));
            }
            Ev::Run { node } => {
                let kind = self.sh.borrow().nodes[node].kind;
                self.spawn(node, None);
                if kind == ClientKind::Hold {
                    let mut w = self.sh.borrow_mut();
                    let (lo, hi) = (
                        w.cfg.tick_every.0.as_millis() as f64,
                        w.cfg.tick_every.1.as_millis() as f64,
                    );
                    let next = w.now + (lo + (hi - lo) * w.rng.unit()) as u64;
                    w.schedule(next, Ev::Run { node });
                }
            }
            Ev::NodeFault(f) => self.node_fault(f),
            Ev::Resume { pid } => {
                let mut w = self.sh.borrow_mut();
                // A suspend may have made the inert window longer.
                let later = w.procs[pid].paused_until.is_some_and(|u| u > w.now);
                if w.procs[pid].alive && !later {
                    w.procs[pid].paused_until = None;
                    w.wake(pid);
                    w.log(|| format!("pid {pid} resumes"));
                }
            }
        }
    }

    fn node_fault(&mut self, f: NodeFault) {
        let procs = |w: &Inner, node: usize| -> Vec<usize> {
            (0..w.procs.len())
                .filter(|&p| w.procs[p].node == node && w.procs[p].alive)
                .collect()
        };
        match f {
            NodeFault::Crash {
                node,
                restart_after,
                ..
            } => {
                let (pids, main_kind) = {
                    let mut w = self.sh.borrow_mut();
                    w.fault(None, "node crash");
                    let kind = w.nodes[node].kind;
                    (procs(&w, node), kind)
                };
                let had_main = self.sh.borrow().nodes[node].main.is_some();
                for pid in pids {
                    self.finish(pid, true);
                }
                if let (true, Some(after), true) = (
                    had_main,
                    restart_after,
                    matches!(
                        main_kind,
                        ClientKind::Cli
                            | ClientKind::Operator
                            | ClientKind::Elector
                            | ClientKind::Service
                    ),
                ) {
                    let mut w = self.sh.borrow_mut();
                    let at = w.now + after.as_millis() as u64;
                    w.schedule(at, Ev::Run { node });
                }
            }
            NodeFault::Pause { node, length, .. }
            | NodeFault::MonoStall {
                node,
                length,
                catch_up: true,
                ..
            } => {
                let mut w = self.sh.borrow_mut();
                w.fault(None, "node pause");
                for pid in procs(&w, node) {
                    pause_proc(&mut w, pid, length.as_millis() as u64);
                }
            }
            NodeFault::MonoStall {
                node,
                length,
                catch_up: false,
                ..
            } => {
                let mut w = self.sh.borrow_mut();
                w.fault(None, "monotonic clock lags");
                let now = w.now;
                w.nodes[node]
                    .lags
                    .push((now, now + length.as_millis() as u64));
                w.nodes[node].lagged_since.get_or_insert(now);
            }
            NodeFault::Suspend { node, length, .. } => {
                let mut w = self.sh.borrow_mut();
                w.fault(None, "node suspend");
                let (now, length) = (w.now, length.as_millis() as u64);
                let until = now + length;
                w.nodes[node].suspended_until = w.nodes[node].suspended_until.max(until);
                for pid in procs(&w, node) {
                    suspend_proc(&mut w, pid, until);
                }
                // Not `lagged_since`: a clock that stops in a suspend is a
                // defect of the product's clock, not outside the
                // documented assumptions, and its violations count.
                if w.cfg.suspend_clock == SuspendClock::StopsInSuspend {
                    // Time already lost (an overlapping suspend) is not
                    // lost twice.
                    let lags = &mut w.nodes[node].lags;
                    let from = lags.iter().map(|l| l.1).max().unwrap_or(0).max(now);
                    if until > from {
                        lags.push((from, until));
                    }
                }
                // The resume is a disturbance too: liveness and quiet
                // acquires are judged from a settling time after it.
                w.fault_times.push(until);
            }
            NodeFault::WallStep { node, by_ms, .. } => {
                let mut w = self.sh.borrow_mut();
                w.fault(None, "wall clock step");
                w.nodes[node].clock.offset_ms += by_ms;
            }
        }
    }

    /// Runs the whole schedule and checks it.
    pub fn run(mut self) -> Report {
        let end = self.sh.borrow().cfg.duration.as_millis() as u64;
        loop {
            loop {
                let next = {
                    let mut w = self.sh.borrow_mut();
                    let woken = std::mem::take(
                        &mut *self
                            .wakes
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    );
                    w.woken.extend(woken);
                    let ready: Vec<usize> = w
                        .woken
                        .iter()
                        .copied()
                        .filter(|&p| w.procs[p].alive && w.procs[p].paused_until.is_none())
                        .collect();
                    for p in &ready {
                        w.woken.remove(p);
                    }
                    // Woken dead processes are forgotten.
                    let dead: Vec<usize> = w
                        .woken
                        .iter()
                        .copied()
                        .filter(|&p| !w.procs[p].alive)
                        .collect();
                    for p in dead {
                        w.woken.remove(&p);
                    }
                    ready
                };
                if next.is_empty() {
                    break;
                }
                for pid in next {
                    self.poll(pid);
                }
            }
            let ev = {
                let mut w = self.sh.borrow_mut();
                let Some((at, ev)) = w.queue.pop_until(end) else {
                    break;
                };
                w.now = w.now.max(at);
                w.step += 1;
                ev
            };
            self.handle(ev);
        }
        // The end of the run: every process stops here.
        self.sh.borrow_mut().now = end;
        for pid in 0..self.tasks.len() {
            if self.tasks[pid].is_some() {
                self.finish(pid, false);
            }
        }
        let sh = self.sh.clone();
        drop(self);
        let mut w = sh.borrow_mut();
        check(&mut w, end)
    }
}

fn pause_proc(w: &mut Inner, pid: usize, length: u64) {
    if !w.procs[pid].alive || w.procs[pid].paused_until.is_some() {
        return;
    }
    let until = w.now + length;
    w.procs[pid].paused_until = Some(until);
    let now = w.now;
    w.procs[pid].pauses.push((now, until));
    w.log(|| format!("pid {pid} paused until {until}ms"));
    w.schedule(until, Ev::Resume { pid });
}

/// Makes `pid` inert until `until`, lengthening a pause under way.
fn suspend_proc(w: &mut Inner, pid: usize, until: u64) {
    match w.procs[pid].paused_until {
        None => pause_proc(w, pid, until - w.now),
        Some(u) if u < until => {
            w.procs[pid].paused_until = Some(until);
            if let Some(last) = w.procs[pid].pauses.last_mut() {
                last.1 = until;
            }
            w.log(|| format!("pid {pid} suspended until {until}ms"));
            w.schedule(until, Ev::Resume { pid });
        }
        Some(_) => {}
    }
}

// ---------------------------------------------------------------------
// The checker.

/// Runs one schedule and checks it.
pub fn run(cfg: ClientsConfig) -> Report {
    ClientWorld::new(cfg).run()
}

fn lagged(w: &Inner, node: usize, at: u64) -> bool {
    w.nodes[node].lagged_since.is_some_and(|t| t <= at)
}

/// Half-open real-ms intervals, sorted and merged.
fn merge(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.retain(|(a, b)| b > a);
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// `a` minus `b` (both merged).
fn subtract(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(mut s, e) in a {
        for &(bs, be) in b {
            if be <= s || bs >= e {
                continue;
            }
            if bs > s {
                out.push((s, bs));
            }
            s = s.max(be);
            if s >= e {
                break;
            }
        }
        if s < e {
            out.push((s, e));
        }
    }
    out
}

fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(s, e) in a {
        for &(bs, be) in b {
            let (x, y) = (s.max(bs), e.min(be));
            if x < y {
                out.push((x, y));
            }
        }
    }
    merge(out)
}

fn describe(rec: Option<&Rec>, w: &Inner, at: u64) -> String {
    match rec {
        None => "no record".into(),
        Some(r) => format!(
            "{} token {} session {}… of owner {:?}{}{}",
            r.holder,
            r.token,
            short(&r.session),
            w.owner_of(&r.session),
            if r.released { ", released" } else { "" },
            if r.expires <= at {
                format!(", expired {}ms before", at - r.expires)
            } else {
                String::new()
            }
        ),
    }
}

/// When session `session` was valid for `protocol`; `lenient` ignores
/// operator breaks (whose effect on a running holder is excused): a
/// record an operator's write replaced stays valid until its expiry,
/// whoever took the lease after the break (the holder is not told; the
/// fence refuses its writes).
fn validity(w: &Inner, protocol: Protocol, session: &str, lenient: bool) -> Vec<(u64, u64)> {
    let hist = w.hist(protocol);
    let mut out = Vec::new();
    for (i, s) in hist.iter().enumerate() {
        let Some(r) = &s.rec else { continue };
        if r.session != session || r.released {
            continue;
        }
        // An operator's write that changed the record (a write of theirs
        // below the live epoch leaves the newest as it was: no break).
        let broken = lenient
            && hist
                .get(i + 1)
                .is_some_and(|n| n.by_operator && n.rec.as_ref() != Some(r));
        let next = match hist.get(i + 1) {
            Some(n) if !broken => n.at.0,
            _ => u64::MAX,
        };
        out.push((s.at.0, next.min(r.expires)));
    }
    merge(out)
}

/// Whether `at` lies in `spans`.
fn within(spans: &[(u64, u64)], at: u64) -> bool {
    spans.iter().any(|&(a, b)| a <= at && at < b)
}

fn job_active(w: &Inner, job: &JobRec, end: u64) -> Vec<(u64, u64)> {
    let stop = job.end.map_or(end, |e| e.0);
    let pauses = merge(w.procs[job.pid].pauses.clone());
    let mut active = subtract(&[(job.start.0, stop)], &pauses);
    // The first poll acts, however short the job.
    active.push((job.start.0, job.start.0 + 1));
    merge(active)
}

fn check_jobs(w: &Inner, end: u64, found: &mut Vec<Violation>, excused: &mut Vec<Violation>) {
    let mut actives = Vec::new();
    // Each job's session's validity, strict and lenient (see `validity`).
    let mut validities = Vec::new();
    for (k, job) in w.jobs.iter().enumerate() {
        let active = job_active(w, job, end);
        // The owner's session with this token; several may have sent it
        // (an epoch renewal that lost its create): the one valid at start.
        let candidates: Vec<String> = w
            .sessions
            .iter()
            .filter(|(_, i)| i.owner == job.owner && i.protocol == job.protocol)
            .filter(|(_, i)| i.tokens.contains(&job.token))
            .map(|(s, _)| s.clone())
            .collect();
        // (The one valid at start; else the one an operator's break left
        // valid to its holder then.)
        let valid_at_start = |lenient: bool| {
            move |s: &&String| within(&validity(w, job.protocol, s, lenient), job.start.0)
        };
        let session = candidates
            .iter()
            .find(valid_at_start(false))
            .or_else(|| candidates.iter().find(valid_at_start(true)))
            .or(candidates.first())
            .cloned();
        let (strict, lenient) = match &session {
            Some(s) => (
                validity(w, job.protocol, s, false),
                validity(w, job.protocol, s, true),
            ),
            None => (Vec::new(), Vec::new()),
        };
        let node = Some(job.node);
        let start_ok = strict
            .iter()
            .any(|&(a, b)| a <= job.start.0 && job.start.0 < b);
        let lenient_start_ok = lenient
            .iter()
            .any(|&(a, b)| a <= job.start.0 && job.start.0 < b);
        if !start_ok {
            let v = Violation {
                rule: Rule::JobWithoutLease,
                at_ms: job.start.0,
                node,
                text: format!(
                    "job {k} (pid {}) started with token {} but its session {} held no valid lease; the store's record was {}",
                    job.pid,
                    job.token,
                    session.as_deref().map_or("(none of its own)", short),
                    describe(w.current(job.protocol, job.start), w, job.start.0)
                ),
            };
            if lenient_start_ok || lagged(w, job.node, job.start.0) {
                excused.push(v);
            } else {
                found.push(v);
            }
        } else {
            let past = subtract(&active, &strict);
            if let Some(&(a, _)) = past.first() {
                let total: u64 = past.iter().map(|(a, b)| b - a).sum();
                let v = Violation {
                    rule: Rule::JobPastValidity,
                    at_ms: a,
                    node,
                    text: format!(
                        "job {k} (pid {}, token {}) acted {total}ms beyond its lease's validity, from t={a}ms; the store's record then was {}",
                        job.pid,
                        job.token,
                        describe(w.current(job.protocol, Stamp(a, u64::MAX)), w, a)
                    ),
                };
                if subtract(&active, &lenient).is_empty() || lagged(w, job.node, a) {
                    excused.push(v);
                } else {
                    found.push(v);
                }
            }
        }
        actives.push(active);
        validities.push((strict, lenient));
    }
    // Rule 1 finds the jobs whose active spans may meet; they overlap if
    // their active instants intersect.
    let spans: Vec<_> = (0..w.jobs.len())
        .map(|k| (w.jobs[k].start.0, actives[k].last().map_or(0, |l| l.1)))
        .collect();
    for (i, j, _) in verify::overlaps(&spans) {
        // Ended before the other began (one after the other at one
        // instant: the first poll's millisecond is not an overlap).
        if w.jobs[i].end.is_some_and(|e| e <= w.jobs[j].start) {
            continue;
        }
        let both = intersect(&actives[i], &actives[j]);
        if let Some(&(a, _)) = both.first() {
            let (ji, jj) = (&w.jobs[i], &w.jobs[j]);
            let v = Violation {
                rule: Rule::JobsOverlap,
                at_ms: a,
                node: Some(jj.node),
                text: format!(
                    "two jobs at once from t={a}ms: job {i} (node {}, pid {}, token {}) and job {j} (node {}, pid {}, token {})",
                    ji.node, ji.pid, ji.token, jj.node, jj.pid, jj.token
                ),
            };
            // A job acting only because an operator broke its lease
            // without telling it (valid leniently, not strictly).
            let broken = |k: usize| {
                let (strict, lenient) = &validities[k];
                !within(strict, a) && within(lenient, a)
            };
            if lagged(w, ji.node, a) || lagged(w, jj.node, a) || broken(i) || broken(j) {
                excused.push(v);
            } else {
                found.push(v);
            }
        }
    }
}

/// Snapshots naming `holder` and `token`, with their indexes.
fn named_records<'a>(
    w: &'a Inner,
    protocol: Protocol,
    holder: &'a str,
    token: u64,
) -> impl Iterator<Item = (usize, &'a Rec)> + 'a {
    w.hist(protocol)
        .iter()
        .enumerate()
        .filter_map(move |(i, s)| s.rec.as_ref().map(|r| (i, r)))
        .filter(move |(_, r)| r.holder == holder && r.token == token && !r.by_operator)
}

fn check_ops(w: &Inner, end: u64, found: &mut Vec<Violation>) {
    let mut tokens: BTreeMap<(u8, u64, u64), (u64, bool, usize)> = BTreeMap::new();
    for (k, op) in w.ops.iter().enumerate() {
        let p = op.protocol;
        let node = Some(op.node);
        let ours = |session: &str| w.owner_of(session) == Some(op.owner);
        let mut v = |rule: Rule, at: u64, text: String| {
            found.push(Violation {
                rule,
                at_ms: at,
                node,
                text: format!("{} (pid {}, op {k}): {text}", op.name, op.pid),
            })
        };
        for (at, said) in &op.said {
            let live = w.live(p, *at);
            match said {
                Said::Acquired { token, .. } | Said::Renewed { token } => {
                    let session = session_of(said);
                    let good = live.is_some_and(|r| {
                        r.token == *token
                            && ours(&r.session)
                            && session.is_none_or(|s| *s == r.session)
                    });
                    // An operator's break during the operation takes the
                    // lease without telling its holder (the fence refuses
                    // its writes): a report made stale by it is no lie.
                    // (Ours was written during the operation, then broken.)
                    let during: Vec<&Snapshot> = w
                        .hist(p)
                        .iter()
                        .filter(|s| op.started <= s.at && s.at <= *at)
                        .collect();
                    let won = during.iter().position(|s| {
                        s.rec
                            .as_ref()
                            .is_some_and(|r| r.token == *token && ours(&r.session))
                    });
                    let broken_meanwhile =
                        won.is_some_and(|i| during[i..].iter().any(|s| s.by_operator));
                    if !good && broken_meanwhile {
                        continue;
                    }
                    if !good {
                        v(
                            Rule::OutcomeMismatch,
                            at.0,
                            format!(
                                "reported {said:?} but the store's record was {}",
                                describe(w.current(p, *at), w, at.0)
                            ),
                        );
                    }
                    if p.fences() {
                        let acquired = matches!(said, Said::Acquired { .. });
                        tokens.insert((p as u8, at.0, at.1), (*token, acquired, k));
                    }
                }
                Said::Busy {
                    holder,
                    token,
                    expires,
                } => {
                    let hist = w.hist(p);
                    // Fair waiting: the node's own release, current during
                    // the operation, is busy to it until the courtesy ends,
                    // which the busy names as its expiry: the courtesy
                    // after the release's `released_at`. (How long it
                    // lasts is judged by the contention benchmark.)
                    if w.cfg.fair {
                        let cfg = w.cfg.lease_config(op.node);
                        let courtesy = lease_core::protocol::wait::COURTESY.as_millis() as u64;
                        let resolution = cfg.date_resolution.as_millis() as u64;
                        let own_release = *holder == cfg.holder
                            && named_records(w, p, holder, *token).any(|(i, r)| {
                                let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
                                let from = r.released_at.unwrap_or(r.expires + resolution);
                                r.released
                                    && hist[i].at <= *at
                                    && next > op.started.0
                                    && from + courtesy == *expires
                            });
                        if own_release {
                            continue;
                        }
                    }
                    // The versions with that holder and token that were
                    // current at some time during the operation (a record
                    // of the same name written later, by a process of ours
                    // that shares the holder, is not the one it saw).
                    let recs: Vec<(usize, &Rec)> = named_records(w, p, holder, *token)
                        .filter(|&(i, r)| {
                            let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
                            hist[i].at <= *at && next > op.started.0 && r.expires == *expires
                        })
                        .collect();
                    if let Some((_, r)) = recs.iter().find(|(_, r)| ours(&r.session)) {
                        v(
                            Rule::OwnRecord,
                            at.0,
                            format!(
                                "reported busy on its own record ({})",
                                describe(Some(r), w, at.0)
                            ),
                        );
                        continue;
                    }
                    // A singleton's run keeps out of its way only runs of
                    // other environments: a record that an earlier run of
                    // its own (warm) environment left, which ended without
                    // a crash before this one began, is one it knows (a
                    // claim) and must take over.
                    let earlier_run = |r: &Rec| {
                        let Some(owner) = w.owner_of(&r.session) else {
                            return false;
                        };
                        let mut runs = w.procs.iter().filter(|q| q.owner == owner).peekable();
                        runs.peek().is_some()
                            && runs.all(|q| {
                                q.node == op.node
                                    && q.ended.is_some_and(|e| e < op.started.0)
                                    && !q.crashed
                                    && w.nodes[q.node].kind == ClientKind::Singleton
                            })
                    };
                    if w.nodes[op.node].kind == ClientKind::Singleton {
                        if let Some((_, r)) = recs.iter().find(|(_, r)| earlier_run(r)) {
                            v(
                                Rule::OwnRecord,
                                at.0,
                                format!(
                                    "skipped behind the record of an earlier run of its own environment ({})",
                                    describe(Some(r), w, at.0)
                                ),
                            );
                            continue;
                        }
                    }
                    // A contender judges expiry by a Date header: up to one
                    // second (and the front ends' skew) behind.
                    let tolerance = 1000 + w.cfg.front_end_skew.as_millis() as u64;
                    let was_live = recs.iter().any(|&(i, r)| {
                        let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
                        let (a, b) = (
                            hist[i].at.0.max(op.started.0),
                            next.min(r.expires + tolerance).min(at.0 + 1),
                        );
                        !r.released && a < b
                    });
                    if !was_live {
                        v(
                            Rule::OutcomeMismatch,
                            at.0,
                            format!(
                                "reported busy ({holder} token {token}) but that record was not live during the operation; the store's record was {}",
                                describe(w.current(p, *at), w, at.0)
                            ),
                        );
                    }
                }
                Said::Lost { named } | Said::AlreadyLost { named } => {
                    if let Some((holder, token)) = named {
                        // The version named is the latest with that holder
                        // and token (an operator's break keeps both).
                        let latest = w
                            .hist(p)
                            .iter()
                            .take_while(|s| s.at <= *at)
                            .filter_map(|s| s.rec.as_ref())
                            .filter(|r| r.holder == *holder && r.token == *token)
                            .last();
                        if let Some(r) = latest.filter(|r| !r.by_operator && ours(&r.session)) {
                            v(
                                Rule::OwnRecord,
                                at.0,
                                format!(
                                    "reported {said:?}, naming its own record ({})",
                                    describe(Some(r), w, at.0)
                                ),
                            );
                        }
                    }
                    if let Said::AlreadyLost { .. } = said {
                        // An operator broke this acquisition, and then a
                        // create of it held in the network landed (the
                        // mutex's strays): that version was never any
                        // process's to know (it expires at its ttl), and
                        // the lease this one was handed was taken away.
                        let hist = w.hist(p);
                        let now = hist.partition_point(|s| s.at <= *at);
                        let stray_after_break = |r: &Rec| {
                            let mine = |s: &Snapshot| {
                                s.rec.as_ref().is_some_and(|x| x.session == r.session)
                            };
                            let before = &hist[..now.saturating_sub(1)];
                            before.iter().position(mine).is_some_and(|first| {
                                before[first..].iter().any(|s| s.by_operator && !mine(s))
                            })
                        };
                        if let Some(r) = live.filter(|r| ours(&r.session) && !stray_after_break(r))
                        {
                            v(
                                Rule::OwnRecord,
                                at.0,
                                format!(
                                    "reported AlreadyLost while its own record is live ({})",
                                    describe(Some(r), w, at.0)
                                ),
                            );
                        }
                        // Writes of the release: those that give the lease
                        // back (a released record, or a delete), applied
                        // after the operation's last success. A `lease run`
                        // reports its renewals and its release as one
                        // operation, and `AlreadyLost` speaks for the
                        // release: a renewal still in flight when the work
                        // ended may have extended the lease unreported (the
                        // release finds it and gives it back, or finds it
                        // lapsed), as `Held::Finished` documents.
                        let since = op
                            .said
                            .iter()
                            .rev()
                            .filter(|(t, s)| {
                                t < at && matches!(s, Said::Acquired { .. } | Said::Renewed { .. })
                            })
                            .map(|(t, _)| *t)
                            .next();
                        let changed = w
                            .writes
                            .values()
                            .filter(|x| x.op == Some(k) && x.released && !x.benign)
                            .filter_map(|x| x.applied)
                            .filter(|a| since.is_none_or(|s| *a > s))
                            .min();
                        // A write that left our own record released is benign
                        // alone, but not when another session came in
                        // after it: it may be what let them in.
                        let opened = w
                            .writes
                            .values()
                            .filter(|x| x.op == Some(k) && x.released && x.benign)
                            .filter_map(|x| x.applied)
                            .filter(|a| since.is_none_or(|s| *a > s) && a < at)
                            // It made our released record (or no record)
                            // the current one: it freed the lease.
                            .filter(|a| {
                                w.current(p, *a)
                                    .is_none_or(|r| r.released && ours(&r.session))
                            })
                            .find(|a| {
                                w.hist(p).iter().any(|s| {
                                    *a < s.at
                                        && s.at <= *at
                                        && s.rec.as_ref().is_some_and(|r| {
                                            !r.by_operator && !r.released && !ours(&r.session)
                                        })
                                })
                            });
                        if let Some(c) = changed.or(opened) {
                            v(
                                Rule::AlreadyLostChanged,
                                at.0,
                                format!(
                                    "reported AlreadyLost, but its write was applied at t={}ms",
                                    c.0
                                ),
                            );
                        }
                    }
                }
                Said::Released { token } | Said::ReleaseUnknown { token } => {
                    if let Some(r) = live.filter(|r| ours(&r.session)) {
                        v(
                            Rule::OutcomeMismatch,
                            at.0,
                            format!(
                                "reported Released token {token} but its own record is live ({})",
                                describe(Some(r), w, at.0)
                            ),
                        );
                    }
                    let hist = w.hist(p);
                    let i = hist.partition_point(|s| s.at <= *at);
                    if let Some(s) = i.checked_sub(1).map(|i| &hist[i]) {
                        if let Some(r) = &s.rec {
                            if !r.released
                                && !r.by_operator
                                && !ours(&r.session)
                                && s.at < op.started
                                && matches!(said, Said::Released { .. })
                            {
                                v(
                                    Rule::ReleasedAfterTakeover,
                                    at.0,
                                    format!(
                                        "reported Released token {token}, but {} had taken over before the release began",
                                        describe(Some(r), w, at.0)
                                    ),
                                );
                            }
                        }
                    }
                    for (session, info) in &w.sessions {
                        if info.owner != op.owner || !info.tokens.contains(token) {
                            continue;
                        }
                        // One that makes a record of the session live again
                        // (an old epoch created after newer ones is not).
                        let late = w
                            .writes
                            .values()
                            .filter(|x| x.session.as_deref() == Some(session) && !x.released)
                            .filter_map(|x| x.applied)
                            .filter(|a| a > at)
                            .filter(|a| w.live(p, *a).is_some_and(|r| r.session == *session))
                            .min();
                        if let Some(a) = late {
                            v(
                                Rule::LateWrite,
                                a.0,
                                format!(
                                    "a write of session {}… landed at t={}ms, after it reported Released at t={}ms",
                                    short(session),
                                    a.0,
                                    at.0
                                ),
                            );
                        }
                    }
                }
                Said::Broken { token } => {
                    // What the break wrote became the current record
                    // during the operation (a create below the live epoch
                    // did not), or, for the mutex, its delete removed the
                    // current lock.
                    // (A mutex break whose delete got no clear reply and
                    // finds the lock gone cannot tell its delete from the
                    // holder's release: the lock going is what it claims.)
                    let made_current = w
                        .hist(p)
                        .iter()
                        .filter(|s| op.started <= s.at && s.at <= *at)
                        .any(|s| match (&s.rec, p) {
                            (None, Protocol::Mutex) => true,
                            (Some(r), _) => {
                                s.by_operator && r.released && r.by_operator && r.token == *token
                            }
                            (None, _) => false,
                        });
                    if !made_current {
                        v(
                            Rule::OutcomeMismatch,
                            at.0,
                            format!(
                                "reported Broken token {token}, but no break of its made the record current; the store's record is {}",
                                describe(w.current(p, *at), w, at.0)
                            ),
                        );
                    }
                }
                Said::Failed {
                    acquire: true,
                    what,
                    claim,
                } => {
                    // A failure that hands the write on as a claim settled
                    // it the other way the protocol allows.
                    let left = w
                        .writes
                        .values()
                        .filter(|x| x.op == Some(k) && x.applied.is_some())
                        .filter_map(|x| x.session.as_deref())
                        .filter(|s| claim.as_deref() != Some(*s))
                        .find(|s| live.is_some_and(|r| r.session == *s));
                    if let Some(s) = left {
                        v(
                            Rule::UnsettledWrite,
                            at.0,
                            format!(
                                "reported failure ({what}) with nothing running, but its own write is live on the store (session {}…, {})",
                                short(s),
                                describe(live, w, at.0)
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
        if let Some(bound) = op.bound {
            let stop = op
                .done
                .map_or_else(|| w.procs[op.pid].ended.unwrap_or(end), |d| d.0);
            let paused: u64 = intersect(
                &merge(w.procs[op.pid].pauses.clone()),
                &[(op.started.0, stop)],
            )
            .iter()
            .map(|(a, b)| b - a)
            .sum();
            let took = stop.saturating_sub(op.started.0).saturating_sub(paused);
            if took > bound {
                v(
                    Rule::OpStalled,
                    op.started.0 + bound,
                    format!(
                        "{} after {}ms (bound {bound}ms)",
                        if op.done.is_some() {
                            "reported only"
                        } else {
                            "had not reported"
                        },
                        took
                    ),
                );
            }
        }
    }
    // Tokens of acquisitions strictly increase, per protocol.
    let mut highest: BTreeMap<u8, (u64, usize)> = BTreeMap::new();
    for (&(p, at, _), &(token, acquired, k)) in &tokens {
        let prev = highest.get(&p).copied();
        if let (true, Some((h, hk))) = (acquired, prev) {
            if !verify::token_follows(Some(h), token) && hk != k {
                found.push(Violation {
                    rule: Rule::TokenNotIncreasing,
                    at_ms: at,
                    node: Some(w.ops[k].node),
                    text: format!(
                        "{} (pid {}) acquired token {token} after token {h} was reported (pid {})",
                        w.ops[k].name, w.ops[k].pid, w.ops[hk].pid
                    ),
                });
            }
        }
        if prev.is_none_or(|(h, _)| token > h) {
            highest.insert(p, (token, k));
        }
    }
}

fn session_of(said: &Said) -> Option<&String> {
    match said {
        Said::Acquired { session, .. } => session.as_ref(),
        _ => None,
    }
}

/// Elector worlds: no gap in coverage holds a quiet window (see the
/// module docs).
/// Liveness of the clients that tick (singleton, `lease run`, the CLI):
/// an acquire whose whole span, and a settling time before it, saw no
/// fault of any kind must not fail (busy on a record that is not live, or
/// on our own, is judged by the outcome rules).
/// Once per tick (cas and epochs, whose records keep completed ticks): no
/// job for a tick starts while the store's record has said it completed,
/// and a run that says its release recorded its tick left a record that
/// has it.
fn check_ticks(w: &Inner, found: &mut Vec<Violation>) {
    for job in w.jobs.iter().filter(|j| j.protocol != Protocol::Mutex) {
        let Some(tick) = job.tick else { continue };
        let id = format!("sim:{tick}");
        let hist = w.hist(job.protocol);
        let upto = hist.partition_point(|s| s.at <= job.start);
        let since = hist[..upto]
            .iter()
            .find(|s| s.rec.as_ref().is_some_and(|r| r.ticks.contains(&id)));
        let full = w
            .current(job.protocol, job.start)
            .is_some_and(|r| r.ticks.len() >= lease_core::tick::MAX_RUNS);
        if let (Some(since), false) = (since, full) {
            found.push(Violation {
                rule: Rule::TickRanTwice,
                at_ms: job.start.0,
                node: Some(job.node),
                text: format!(
                    "job for tick {tick} (pid {}, token {}) started while the store's record has said since t={}ms that the tick completed; the record then was {}",
                    job.pid,
                    job.token,
                    since.at.0,
                    describe(w.current(job.protocol, job.start), w, job.start.0)
                ),
            });
        }
    }
    for r in w.tick_reports.iter().filter(|r| r.recorded) {
        let id = format!("sim:{}", r.tick);
        let current = w.current(r.protocol, r.at);
        if !current.is_some_and(|rec| rec.ticks.contains(&id)) {
            found.push(Violation {
                rule: Rule::TickNotRecorded,
                at_ms: r.at.0,
                node: Some(r.node),
                text: format!(
                    "pid {} reported tick {} ran and recorded, but the store's record then was {}",
                    r.pid,
                    r.tick,
                    describe(current, w, r.at.0)
                ),
            });
        }
    }
}

/// The services' `Leadership` answers, judged by the store: a yes
/// (`is_leader()`, `token()`, or `health()` naming a term) only while the
/// store's record is the handle's live lease with that token, and never
/// after its `resign()`; a healthy leader only while a write of its term
/// sent within the overdue bound has landed. (At most one handle says yes
/// at any instant follows: one record is live at a time.)
fn check_services(w: &Inner, found: &mut Vec<Violation>, excused: &mut Vec<Violation>) {
    for s in &w.samples {
        let t = s.at.0;
        let health_token = match s.health {
            Health::Leading { token, .. } | Health::RenewalOverdue { token, .. } => Some(token),
            Health::Following => None,
        };
        if !s.is_leader && s.token.is_none() && health_token.is_none() {
            continue;
        }
        let said = format!(
            "pid {} said is_leader {}, token {:?}, health {:?}",
            s.pid, s.is_leader, s.token, s.health
        );
        let mut judge = |rule: Rule, text: String, excuse: bool| {
            let v = Violation {
                rule,
                at_ms: t,
                node: Some(s.node),
                text,
            };
            if excuse || lagged(w, s.node, t) {
                excused.push(v);
            } else {
                found.push(v);
            }
        };
        if s.resigned {
            judge(Rule::StaleYes, format!("{said} after its resign()"), false);
            continue;
        }
        let Some(token) = s.token.or(health_token) else {
            judge(
                Rule::StaleYes,
                format!("{said}: a yes with no token"),
                false,
            );
            continue;
        };
        let candidates: Vec<&String> = w
            .sessions
            .iter()
            .filter(|(_, i)| i.owner == s.owner && i.protocol == s.protocol)
            .filter(|(_, i)| i.tokens.contains(&token))
            .map(|(session, _)| session)
            .collect();
        let live = w.live(s.protocol, s.at);
        if !live.is_some_and(|r| candidates.contains(&&r.session)) {
            // An operator's break takes the lease without telling its
            // holder (the fence refuses its writes).
            let broken = candidates.iter().any(|c| {
                validity(w, s.protocol, c, true)
                    .iter()
                    .any(|&(a, b)| a <= t && t < b)
            });
            judge(
                Rule::StaleYes,
                format!(
                    "{said}, but the store's record was {}",
                    describe(w.current(s.protocol, s.at), w, t)
                ),
                broken,
            );
            continue;
        }
        if let Health::Leading { .. } = s.health {
            let cfg = w.cfg.lease_config(s.node);
            let overdue = Health::overdue_after(&cfg).as_millis() as f64;
            let bound = (overdue / (1.0 - w.cfg.max_drift)) as u64 + 2;
            let fresh = w.writes.values().any(|x| {
                !x.released
                    && x.applied.is_some_and(|a| a <= s.at)
                    && x.sent_at + bound >= t
                    && x.session.as_ref().is_some_and(|c| candidates.contains(&c))
            });
            if !fresh {
                judge(
                    Rule::HealthyWhenOverdue,
                    format!(
                        "{said}, but no write of its term sent in the last {bound}ms had landed"
                    ),
                    false,
                );
            }
        }
    }
}

fn check_quiet_acquires(w: &Inner, found: &mut Vec<Violation>) {
    if w.cfg
        .protocols
        .iter()
        .any(|q| Some(q) != w.cfg.protocols.first())
    {
        return; // another protocol at the key: a refusal is the answer
    }
    if w.cfg.same_entropy && w.cfg.probe {
        // Alike-seeded clients probe under one id and see each other's
        // objects: the probe refuses the store (it fails closed).
        return;
    }
    let cfg = w.cfg.lease_config(0);
    let latency = w.cfg.latency.1.as_millis() as u64;
    let settle = ((cfg.request_timeout + cfg.backoff_max) * 2).as_millis() as u64 + 4 * latency;
    for (k, op) in w.ops.iter().enumerate() {
        let Some(done) = op.done else { continue };
        let from = op.started.0.saturating_sub(settle);
        if w.fault_times.iter().any(|&f| from <= f && f <= done.0) {
            continue;
        }
        for (at, said) in &op.said {
            if let Said::Failed {
                acquire: true,
                what,
                ..
            } = said
            {
                found.push(Violation {
                    rule: Rule::FailedWhenQuiet,
                    at_ms: at.0,
                    node: Some(op.node),
                    text: format!(
                        "{} (pid {}, op {k}) failed ({what}) with no fault from t={from}ms on",
                        op.name, op.pid
                    ),
                });
            }
        }
    }
}

fn check_liveness(w: &Inner, end: u64, found: &mut Vec<Violation>) {
    if w.cfg
        .clients
        .iter()
        .any(|k| !matches!(k, ClientKind::Elector | ClientKind::Service))
    {
        return;
    }
    let Some(&p) = w.cfg.protocols.first() else {
        return;
    };
    if w.cfg.protocols.iter().any(|q| *q != p) {
        return;
    }
    let cfg = w.cfg.lease_config(0);
    let latency = w.cfg.latency.1.as_millis() as u64;
    let settle = ((cfg.request_timeout + cfg.backoff_max) * 2).as_millis() as u64 + 4 * latency;
    let slack = 1000 + cfg.drift_margin(cfg.ttl).as_millis() as u64 + 1500;
    let window = (cfg.ttl + cfg.poll_every.mul_f64(1.1)).as_millis() as u64 + settle + slack;
    // Leading intervals per owner, from the electors' own reports.
    let mut leading: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for op in w
        .ops
        .iter()
        .filter(|o| o.name == "elector" || o.name == "service")
    {
        let stop = op
            .done
            .map_or(w.procs[op.pid].ended.unwrap_or(end), |d| d.0);
        let mut since = None;
        for (at, said) in &op.said {
            match said {
                Said::Acquired { .. } => since = since.or(Some(at.0)),
                Said::Lost { .. } | Said::Released { .. } => {
                    if let Some(s) = since.take() {
                        leading.entry(op.owner).or_default().push((s, at.0));
                    }
                }
                _ => {}
            }
        }
        if let Some(s) = since {
            leading.entry(op.owner).or_default().push((s, stop));
        }
    }
    let mut covered = Vec::new();
    let hist = w.hist(p);
    for (i, s) in hist.iter().enumerate() {
        let Some(r) = &s.rec else { continue };
        if r.released {
            continue;
        }
        let Some(owner) = w.owner_of(&r.session) else {
            continue;
        };
        let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
        let live = [(s.at.0, next.min(r.expires))];
        if let Some(l) = leading.get(&owner) {
            covered.extend(intersect(&live, &merge(l.clone())));
        }
    }
    let covered = merge(covered);
    let gaps = subtract(&[(0, end)], &covered);
    // A pause ends a quiet window too: the paused process resumes, with
    // its operation's deadline passed (a pause starts one: it is a fault).
    let mut faults = w.fault_times.clone();
    faults.extend(
        w.procs
            .iter()
            .flat_map(|p| p.pauses.iter().map(|&(_, b)| b)),
    );
    faults.sort_unstable();
    for (g0, g1) in gaps {
        let mut cuts = vec![g0];
        cuts.extend(faults.iter().copied().filter(|&f| f > g0 && f < g1));
        cuts.push(g1);
        for pair in cuts.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b - a < window {
                continue;
            }
            // An inert (paused, suspended) process cannot take over.
            let runner = w.procs.iter().enumerate().find(|(_, pr)| {
                pr.started <= a
                    && pr.ended.unwrap_or(u64::MAX) >= a + window
                    && intersect(&[(a, a + window)], &merge(pr.pauses.clone())).is_empty()
            });
            if let Some((pid, pr)) = runner {
                found.push(Violation {
                    rule: Rule::NoTakeover,
                    at_ms: a + window,
                    node: None,
                    text: format!(
                        "nobody held the lease from t={g0}ms to t={g1}ms, though t={a}..{}ms was fault-free and node {} (pid {pid}) ran throughout",
                        a + window,
                        pr.node
                    ),
                });
                break;
            }
        }
    }
}

fn check(w: &mut Inner, end: u64) -> Report {
    let mut found = std::mem::take(&mut w.violations);
    let mut excused = Vec::new();
    check_jobs(w, end, &mut found, &mut excused);
    check_ops(w, end, &mut found);
    check_liveness(w, end, &mut found);
    check_quiet_acquires(w, &mut found);
    check_ticks(w, &mut found);
    check_services(w, &mut found, &mut excused);
    #[cfg(feature = "trace")]
    check_traces(w, end, &mut found);
    let (lag, mut violations): (Vec<Violation>, Vec<Violation>) = found
        .into_iter()
        .partition(|v| v.node.is_some_and(|n| lagged(w, n, v.at_ms)));
    excused.extend(lag);
    violations.sort_by_key(|a| (a.at_ms, a.rule));
    excused.sort_by_key(|a| (a.at_ms, a.rule));
    Report {
        config: (*w.cfg).clone(),
        violations,
        excused,
        counts: w.counts.clone(),
        timeline: std::mem::take(&mut w.timeline),
    }
}
