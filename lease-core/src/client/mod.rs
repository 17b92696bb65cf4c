//! The client layer: futures over the protocol machines, for any
//! [`Store`](crate::store::Store) and [`Clock`](crate::time::Clock).
//!
//! - [`Leases`]: one client per store, every operation by key with its own
//!   typed result;
//! - [`Leases::run`]: one run of a job under a lease, once or once per
//!   tick (the Lambda's, the Worker's, a user's scheduled code), or in any
//!   free seat of a pool, as a [`Run`] says;
//! - [`Leases::supervise`]: `lease run`'s supervision of work it can TERM
//!   and KILL, never left running past the lease's deadline;
//! - [`Leases::lead`]: a [`Leadership`] handle for a service that needs a
//!   leader;
//! - [`Leases::session`]: a [`Session`] that owns any number of keys for
//!   one renewal;
//! - [`Leases::shards`]: a member of a fleet that splits `n` shards
//!   among its live members ([`Shards`]);
//! - [`drive`]: runs any machine against a store and a clock;
//! - [`wait`](crate::protocol#trying-again): when a contender that found the
//!   lease busy tries again (a policy of the protocol layer);
//! - [`Revalidating`]: re-reads of an unchanged lease answered 304.
//!
//! The items live in private files and are named here
//! (`lease_core::client::Run`), the most used at the crate root too
//! (`lease_core::Run`).
//!
//! # The client: `Leases`
//!
//! The client: one value per store that runs every operation a user needs,
//! each returning its own result type.
//!
//! [`Leases`] wraps a [`Store`], a [`Clock`] and the [`Settings`] every
//! lease of this client shares (holder name, ttl, protocol, whether to
//! probe the store first). The key is an argument of each call, so one
//! client serves any number of leases:
//!
//! | call | result |
//! |---|---|
//! | [`acquire`](Leases::acquire) | [`AcquireOutcome`]: `Acquired(lease)` or `Busy(busy)` |
//! | [`acquire_within`](Leases::acquire_within) | the same, waiting up to a budget while it is busy |
//! | [`renew`](Leases::renew) | [`RenewOutcome`]: `Renewed(lease)` or `Lost(reason)` |
//! | [`release`](Leases::release) | [`ReleaseOutcome`] |
//! | [`renew_by_etag`](Leases::renew_by_etag), [`release_by_etag`](Leases::release_by_etag) | the same, for a lease known by its etag (another process acquired it) |
//! | [`inspect`](Leases::inspect) | the record as stored, if any |
//! | [`break_lease`](Leases::break_lease) | [`BreakOutcome`]: an operator's release of the version seen |
//! | [`fenced_write`](Leases::fenced_write) | [`FenceOutcome`]: a write a stale holder cannot make |
//! | [`probe`](Leases::probe) | the store's [`ProbeReport`] |
//! | [`run`](Leases::run) | a job run under the lease, renewed alongside and dropped when it is lost: ran, skipped as busy, or (for a tick) already ran (below, *Runs of a job*) |
//! | [`supervise`](Leases::supervise) | a child process (`lease run`) run as [`run`](Leases::run) runs a job (once, for a tick or a slot, waiting), sent TERM and KILL before its deadline |
//! | [`lead`](Leases::lead) | a [`Leadership`] for a service that needs a leader |
//! | [`shards`](Leases::shards) | a [`Shards`] member: the shards assigned to it, balanced over the live members, as [`ShardEvent`]s |
//! | [`session`](Leases::session) | a [`Session`]: one renewed lease per process, and keys owned under it ([`Session::own`]) for no renewal of their own |
//!
//! The client remembers, per key, records of its own that an operation may
//! have left on the store without knowing it ([`Claim`]s: a write whose
//! reply was lost), so its next acquire takes them over instead of waiting
//! behind itself; and it runs the capability probe ([`protocol::probe`](crate::protocol#the-capability-probe)) once
//! per protocol before the first acquire, unless told not to.
//!
//! Every future it returns is `Send` when the store's calls and the
//! clock's sleeps are, so it can run on a multi-threaded runtime. A clone
//! is cheap and shares the claims and the probe's verdict.
//!
//! ```
//! use lease_core::{AcquireOutcome, Entropy, Leases, MemStore, Settings, UnixMillis, VirtualClock};
//!
//! # fn entropy() -> Entropy { Entropy::from_seed(7) }
//! let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
//! let leases = Leases::new(MemStore::new(clock.clone()), clock, Settings::new("node-a"), entropy)?;
//! pollster::block_on(async {
//!     match leases.acquire("locks/nightly").await? {
//!         AcquireOutcome::Acquired(lease) => {
//!             println!("token {}", lease.token);
//!             leases.release(lease).await?;
//!         }
//!         AcquireOutcome::Busy(busy) => println!("held by {}", busy.holder),
//!     }
//!     Ok::<_, lease_core::LeaseError>(())
//! })?;
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # Runs of a job: `Leases::run`
//!
//! One run of a job under a lease: [`Leases::run`], the one entry the
//! Lambda and Workers adapters, `lease run` (through
//! [`Leases::supervise`], which runs a child process as the job) and a
//! user's own scheduled code share. [`Run`] says what the run is: once
//! (waiting for the lease, if told to), for a tick or a schedule's slot,
//! within the time an invocation has left, observed.
//!
//! The run checks the store once per client (the capability probe, unless
//! turned off), then acquires the lease. Busy: the job does not run and the
//! outcome is [`RunOutcome::Skipped`], naming the holder and its expiry,
//! for the price of one GET. Acquired: the job runs with the fencing token
//! while the lease is renewed alongside it (below, *Holding a lease while work runs*); if
//! the lease is lost the job's future is dropped and the run fails with
//! [`RunError::LeaseLost`]; when the job ends (success or error) the lease
//! is released. Each step is reported to the run's observer, for logs.
//!
//! A run for a tick ([`Run::tick`]) runs the tick once: a tick the lease
//! record shows completed is answered from the record
//! ([`RunOutcome::AlreadyRan`]) for the read a busy check costs (cas: one
//! GET). A run that completes records the tick, with its output as text,
//! in the release it makes anyway; a run that fails is not recorded, so
//! the platform's retry runs the tick again. Needs the cas or epochs
//! protocol (a mutex's record goes with its lock).
//!
//! The job is never started on a lease that is not valid at that instant
//! (one confirmed too late is given back: [`LeaseError::WonTooLate`]), and
//! a job that finishes after the lease's deadline fails with
//! [`RunError::Overrun`] instead of counting as run. A run that may leave
//! a record of ours behind leaves a [`Claim`] with the client (an acquire
//! whose write's outcome stayed unknown, a create still in flight when it
//! found the lease busy, a lease lost or not released, as last renewed):
//! the client's next runs take such a record over, until it can no longer
//! be live, instead of skipping ticks as busy behind themselves. A later
//! run's acquisition does not end an earlier run's claim: that run's late
//! create can still land once the later lease is released.
//!
//! ```
//! use lease_core::tick::Tick;
//! use lease_core::{Entropy, Leases, MemStore, Run, RunOutcome, Settings, UnixMillis, VirtualClock};
//!
//! # fn entropy() -> Entropy { Entropy::from_seed(7) }
//! let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
//! let leases = Leases::new(MemStore::new(clock.clone()), clock, Settings::new("node-a"), entropy)?;
//! let tick = Tick::new("2026-11-29T03:00:00Z")?;
//! pollster::block_on(async {
//!     let job = |token: u64| async move { Ok::<_, String>(format!("report {token}")) };
//!     let first = leases.run("locks/nightly", Run::new().tick(&tick), job).await?;
//!     assert!(matches!(first, RunOutcome::Ran { recorded: true, .. }));
//!     // A second delivery of the same tick does not run the job again.
//!     let again = leases.run("locks/nightly", Run::new().tick(&tick), job).await?;
//!     assert!(matches!(again, RunOutcome::AlreadyRan { .. }));
//!     Ok::<_, lease_core::RunError<String>>(())
//! })?;
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # Pools: `Run::pool`
//!
//! A pool is `seats` leases under one key: a run told [`Run::pool`] takes
//! any free one, so at most `seats` jobs run at once across every client,
//! each with its seat's fencing token. Seat `i` is the lease at
//! [`seat_key`] `(key, i)`, `<key>/seat-<i>`, a lease like any other. A
//! round reads the seats from one drawn at random and takes the first
//! free one ([`Step::Acquired`] and [`RunOutcome::Ran`] name it); a full
//! pool is [`RunOutcome::Skipped`], or read again after a busy lease's
//! delay when told to [`wait`](Run::wait). Which seat, cost, tokens and
//! size: `docs/protocols.md`, "Pools: at most N at once".
//!
//! # Supervised work: `Leases::supervise`
//!
//! `lease run`'s supervision: work the caller can ask to stop and make stop
//! (a child process: TERM and KILL), run under a lease as
//! [`Leases::run`] runs a job (once, for a tick or a schedule's slot,
//! waiting for the lease, observed: a [`Run`]), and never left running
//! past the lease's deadline.
//!
//! [`Leases::supervise`] starts the work once the lease is held, with its
//! fencing token, and owns the stop schedule ([`stop_times`]):
//! - while renewals are confirmed, the deadline moves on and nothing is
//!   sent;
//! - when no renewal has been confirmed `grace` before the kill time (the
//!   lease's local deadline less its margin), the work is asked to stop
//!   ([`Supervised::terminate`]), and made to at the kill time
//!   ([`Supervised::kill`]) if it has not: KILL lands before the deadline
//!   even when no renewal reply ever comes;
//! - with a time limit ([`Run::within`]), the work is asked to stop
//!   `grace` before the run lets go of it ([`release_reserve`] before the
//!   limit) and made to by then, before the lease is given back;
//! - when the lease is lost (taken over, broken, a renewal refused), the
//!   work is asked to stop at once, and made to by the deadline it held
//!   (at once if that has passed).
//!
//! The work's own end is awaited in every case. A run for a tick records
//! the tick only when the work succeeded ([`Supervised::succeeded`]) of its
//! own accord. What the supervisor does is passed to `on_step`, for logs
//! and the flight recorder's work span. Runtime-agnostic: the work's end
//! and the clock's sleeps are raced by polling, no executor needed.
//!
//! # Holding a lease while work runs
//!
//! Holding a lease while some work runs: what `Leases::run` and
//! `Leases::supervise` (`lease run`) share.
//!
//! The holding renews the lease in the background (a [`Holder`]) while
//! the work runs. If the work finishes first, the
//! lease is released and the work's output returned; if the lease is lost
//! first (a renewal refused, the local deadline passed), the work future is
//! dropped at once (cancelled) and the loss reported. Dropping is all a
//! future can be told; a child process must be stopped by the caller,
//! before the deadline: [`stop_times`] says when to send it TERM and KILL,
//! and [`check_grace`] refuses a grace period the ttl cannot cover.
//!
//! Three rules keep work inside the lease:
//! - work is never started (not even polled) on a lease whose local
//!   deadline has passed;
//! - at each wake-up the deadline is looked at before the work: once it
//!   has passed, the work is dropped without being polled again;
//! - work that finishes after the deadline (it blocked the thread past
//!   it, say) is reported as an overrun, never as finished.
//!
//! Runtime-agnostic like [`drive`]: no executor, no spawning.
//!
//! # Leadership: `Leases::lead`
//!
//! Leader election for a service: a handle to ask "am I the leader?" and a
//! campaign that keeps the answer true.
//!
//! [`Leases::lead`] returns a [`Leadership`] and the campaign: a future
//! that runs the [`Elector`] (campaign, renew, observe, resign) until it
//! is resigned or meets an error no retry can fix. Spawn the campaign on
//! your runtime (it is `Send` when the store's calls and the clock's
//! sleeps are; the native adapter's `lead` spawns it for you on tokio) and
//! keep the handle:
//!
//! - [`is_leader`](Leadership::is_leader) and [`token`](Leadership::token)
//!   answer from the local deadline, read on the clock at the moment of
//!   the call, so a campaign starved of CPU never lets a stale "yes"
//!   through;
//! - [`until_leader`](Leadership::until_leader) waits for a term and gives
//!   its fencing token; [`lost`](Leadership::lost) resolves when that term
//!   ends: at the latest its local deadline, whether or not the campaign
//!   ran meanwhile;
//! - [`leader`](Leadership::leader) is the leader as last observed;
//! - [`resign`](Leadership::resign) releases the lease and ends the
//!   campaign; [`finished`](Leadership::finished) waits for that;
//! - [`hand_over`](Leadership::hand_over) hands the lease to a named
//!   follower with no poll interval's gap (`docs/protocols.md`, "A
//!   planned handoff").
//!
//! Events reach a [`Lead`]'s [`on_event`](Lead::on_event) callback in the order
//! [`protocol::elector`](crate::protocol#leader-election) documents: `Acquired`, `LeaderChanged(us)`, then
//! `Renewed`/`AtRisk`, then `Lost` (or `Released`, after `HandingOver` for
//! a planned handoff), `LeaderChanged(None)`.
//!
//! ```
//! use lease_core::{Entropy, Leases, MemStore, Settings, UnixMillis, VirtualClock};
//!
//! # fn entropy() -> Entropy { Entropy::from_seed(7) }
//! let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
//! let leases = Leases::new(MemStore::new(clock.clone()), clock, Settings::new("node-a"), entropy)?;
//! let (leadership, campaign) = leases.lead("locks/scheduler");
//! // A service spawns `campaign` (`tokio::spawn(campaign)`); here one
//! // thread drives both.
//! let work = async {
//!     let token = leadership.until_leader().await?;
//!     assert!(leadership.is_leader());
//!     // ... lead, passing `token` to every write it makes ...
//!     leadership.resign();
//!     Ok::<_, lease_core::LeadError>(token)
//! };
//! let (token, exit) = pollster::block_on(lease_core::client::join(work, campaign));
//! assert_eq!(token?, 1);
//! assert!(matches!(exit, lease_core::ElectorExit::Resigned { .. }));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # Sessions: `Leases::session`
//!
//! A process that holds many keys opens one [`Session`]: a lease at a key
//! of its own, renewed by a campaign to spawn as [`Leases::lead`]'s is,
//! and any number of keys owned under it ([`Session::own`]), each a record
//! that names the session's term instead of being renewed. Holding 1,000
//! keys costs the session's renewals alone. An owned key is held exactly
//! while that term is ([`Session::owns`] answers from the term's local
//! deadline, as [`Leadership::is_leader`] does) and lost with it; each key
//! keeps its own fencing token, rising with every owner. Any cas client
//! (`lease acquire` included) finds an owned key busy while its session
//! lives, by reading the session's record. A key is given back with
//! [`Session::disown`], or handed to a named successor with
//! [`Session::hand_over`] (busy to everyone else for a short grace). The
//! protocol, its safety argument and its cost: `docs/protocols.md`,
//! "Sessions".
//!
//! ```
//! use lease_core::client::join;
//! use lease_core::{Entropy, Leases, MemStore, OwnOutcome, Settings, UnixMillis, VirtualClock};
//!
//! # fn entropy() -> Entropy { Entropy::from_seed(7) }
//! let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
//! let leases = Leases::new(MemStore::new(clock.clone()), clock, Settings::new("node-a"), entropy)?;
//! let (session, campaign) = leases.session("sessions/node-a");
//! let work = async {
//!     session.until_open().await?;
//!     for tenant in ["tenants/1", "tenants/2"] {
//!         if let OwnOutcome::Owned(owned) = session.own(tenant).await? {
//!             // ... work on the tenant, fencing with `owned.token` ...
//!             assert_eq!(session.owns(tenant), Some(owned.token));
//!         }
//!     }
//!     session.close(); // both keys are free once the session's release lands
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! };
//! let (done, _exit) = pollster::block_on(join(work, campaign));
//! done?;
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # Shards: `Leases::shards`
//!
//! A fleet that splits `n` shards (partitions, tenants, cron cells) among
//! its live members: each member opens a session, one member coordinates
//! (a lease) and writes the assignment, balanced within one over the live
//! members, and each member owns the shards assigned to it (keys owned
//! under its session, each with its own fencing token) and gives back
//! those the fleet moves away once its work on them is drained. The
//! member's events ([`Shards::next`]) come in this order for each shard:
//! [`ShardEvent::Assigned`], then [`ShardEvent::Revoking`] (stop the work
//! by its `by`, then [`Shards::drained`]) and [`ShardEvent::Revoked`], or
//! `Revoked` alone (the session's term ended). Work on a shard only while
//! [`Shards::owns`] says so. The protocol, the moves and their times:
//! `docs/protocols.md`, "Shards".
//!
//! ```
//! use lease_core::client::join;
//! use lease_core::{Entropy, Leases, MemStore, Settings, ShardEvent, UnixMillis, VirtualClock};
//! use std::time::Duration;
//!
//! # fn entropy() -> Entropy { Entropy::from_seed(7) }
//! let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
//! let leases = Leases::new(MemStore::new(clock.clone()), clock, Settings::new("node-a"), entropy)?;
//! let (member, campaign) = leases.shards("fleets/ingest", 4, Duration::from_secs(10))?;
//! let work = async {
//!     let mut mine = Vec::new();
//!     while let Some(event) = member.next().await {
//!         match event {
//!             // ... start the shard's work, fencing with `token` ...
//!             ShardEvent::Assigned { shard, token } => mine.push((shard, token)),
//!             // ... stop it, then say so ...
//!             ShardEvent::Revoking { shard, .. } => member.drained(shard),
//!             _ => {}
//!         }
//!         // Alone in the fleet, this member gets all four.
//!         if mine.len() == 4 {
//!             member.leave();
//!         }
//!     }
//!     mine
//! };
//! let (mine, _exit) = pollster::block_on(join(work, campaign));
//! assert_eq!(mine.len(), 4);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # Conditional re-reads: `Revalidating`
//!
//! A client that reads the same lease again and again (a contender waiting
//! in [`Leases::acquire_within`], a follower of a [`Leadership`], a pool's
//! seats) sends each read after the first with `If-None-Match` on the etag
//! it last saw, so an unchanged lease is answered 304 with no body.
//! [`Revalidating`] sits between the machines and the store: they still
//! send a plain [`StoreOp::Get`] and receive [`ReplyKind::Found`], the copy
//! kept here dated by the 304, so no protocol rule sees a difference.
//! Stores that refuse the header, GCS, and what it saves:
//! `docs/protocols.md`, "Under contention" (*Conditional re-reads*).
//!
//! # The driver: `drive`
//!
//! Running machines: a runtime-agnostic async driver over two small traits.
//!
//! An adapter supplies a [`Store`] (perform a
//! [`StoreOp`](crate::store::StoreOp)) and a [`Clock`] (read the time, sleep
//! until an instant) and nothing more; [`drive`] runs any [`Machine`]
//! against them. For HTTP stores, [`HttpStore`](crate::wire::HttpStore)
//! combines a dialect, an optional signer and a transport, so a new
//! transport is a few dozen lines. No executor, no spawning: the driver is a
//! plain future that polls store calls, a timer and an optional stop signal.
//!
//! [`Store`]: crate::Store
//! [`Clock`]: crate::Clock
//! [`Claim`]: crate::Claim
//! [`StoreOp::Get`]: crate::StoreOp::Get
//! [`ReplyKind::Found`]: crate::store::ReplyKind::Found
//! [`AcquireOutcome`]: crate::AcquireOutcome
//! [`RenewOutcome`]: crate::RenewOutcome
//! [`ReleaseOutcome`]: crate::ReleaseOutcome
//! [`BreakOutcome`]: crate::BreakOutcome
//! [`FenceOutcome`]: crate::FenceOutcome
//! [`ProbeReport`]: crate::ProbeReport
//! [`Machine`]: crate::Machine
//! [`Elector`]: crate::Elector
//! [`Holder`]: crate::protocol::elector::Holder
//! [`LeaseError::WonTooLate`]: crate::LeaseError::WonTooLate

pub(crate) mod drive;
pub(crate) mod hold;
pub(crate) mod leadership;
pub(crate) mod leases;
pub(crate) mod pool;
pub(crate) mod revalidate;
pub(crate) mod run;
pub(crate) mod session;
pub(crate) mod shards;
pub(crate) mod supervise;

pub use drive::{drive, drive_until};
pub use hold::{check_grace, max_grace, stop_times};
pub use leadership::{join, Health, Lead, LeadError, Leadership};
pub use leases::{ByEtagError, Leases, Settings};
pub use pool::{pool_of, seat_key, seat_of, MAX_SEATS};
pub use revalidate::Revalidating;
pub use run::{
    release_reserve, time_needed, AtOnce, InPool, Run, RunError, RunOutcome, Step, Take, Waiting,
    TICK_RETENTION,
};
pub use session::{OwnOutcome, Owned, Session};
pub use shards::{
    assignment_key, balance, coordinator_key, member_key, shard_key, ShardEvent, Shards, MAX_SHARDS,
};
pub use supervise::{default_grace, Supervised, WorkError, WorkStep};
