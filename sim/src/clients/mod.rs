//! A simulation that runs the product: the code users run
//! ([`Leases::run`], [`Leases::supervise`], one-shot [`LeaseOp`]s driven as the
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
//! The store's history is recorded after every applied write, per lease:
//! for the CAS lease and the mutex the object at the key, for epochs the
//! newest epoch object. The leases are the one at [`LEASE_KEY`] and, in a
//! world with pool clients, each seat of the pool at [`POOL_KEY`]; every
//! rule below holds per lease (a pool's jobs on different seats run at
//! once), and a job fences its writes at its own lease's protected
//! object. A *session* belongs to the logical client (the *owner*) whose
//! process first wrote it: one singleton invocation, one `lease run`, one
//! CLI script (acquire, renews and release carry its etag), one elector
//! process. A simple client of the one-object format (`ClientKind::Simple`,
//! written here as another implementation would be, `simple`) writes no
//! session id: its holder name names its session, and its jobs are judged
//! with ours.
//! - **Readable.** The object a write leaves at a lease's key or epoch is
//!   a record every client reads (`RecordUnreadable`).
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
//!   named record was live during the operation and is not our own (a run
//!   in a full pool names the seat that frees soonest without saying
//!   which: on one of the seats);
//!   `Lost`/`AlreadyLost` name a record that is not our own, and after
//!   `AlreadyLost` no record of ours is live and no write of the operation
//!   was applied; after `Released` no record of ours is live, the current
//!   record is not another session's written before the release began, and
//!   no write of the released session lands later and makes a record of it
//!   live again; an acquire that failed
//!   leaves no record of its own live; tokens reported by acquisitions
//!   strictly increase per lease (CAS, epochs); a fenced object's token never
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
//!
//! [`Leases::run`]: lease_core::Leases::run
//! [`Leases::supervise`]: lease_core::Leases::supervise
//! [`LeaseOp`]: lease_core::LeaseOp
//! [`Elector`]: lease_core::Elector
//! [`drive_until`]: lease_core::client::drive_until
//! [`Queue`]: crate::world::queue::Queue
//! [`Store`]: lease_core::Store
//! [`Bucket`]: crate::world::faults::Bucket
//! [`Clock`]: lease_core::Clock
//! [`NodeClock`]: crate::world::clock::NodeClock
//! [`Scripted`]: crate::world::faults::Scripted

// What defines a run (`config`) and what it reports (`report`); the
// world's shared state (`state`), the handles through which a process
// reaches it (`handles`: store, clock, entropy) and tells the checker what
// it did (`env`); the clients (`processes`, and `pool`, `session`,
// `shard` and `simple` for those kinds) and the executor that runs them
// (`executor`); the checker's rules (`checker`, its outcome rules in
// `checker::ops`); hand-built schedules (`scenarios`).
mod checker;
mod config;
mod env;
mod executor;
mod handles;
mod pool;
mod processes;
mod report;
pub mod scenarios;
mod session;
mod shard;
mod simple;
mod state;

pub use config::{
    session_key, Broken, ClientKind, ClientsConfig, NodeFault, SuspendClock, LEASE_KEY, OWNED_KEYS,
    POOL_KEY, PROTECTED_KEY, SHARD_PREFIX,
};
pub use executor::{run, ClientWorld};
pub use handles::{sim_entropy, SimClock, SimStore};
pub use report::{Counts, Report, Rule, Violation};
