//! The sans-IO protocol machines: each computes the store calls an operation
//! needs and interprets their replies, and never performs I/O or reads a
//! clock. Drive one with [`crate::client::drive`], or by hand through the
//! [`Machine`] trait.
//!
//! - [the machine interface](#the-machine-interface), and [what
//!   operations take and give](#leases-outcomes-errors-and-events)
//!   (leases, outcomes, errors, events);
//! - [one-shot operations](#one-shot-operations) ([`LeaseOp`]) on any of
//!   the three protocols, [the CAS lease](#the-cas-lease), [epoch
//!   objects](#epoch-objects) and [the create-delete
//!   mutex](#the-create-delete-mutex), whose decisions the lease engine
//!   runs (records stamped, writes tracked, wins given back);
//! - [leader election](#leader-election) ([`Elector`]): campaigning and
//!   holding, built on one-shot operations;
//! - [fenced writes](#fenced-writes) ([`FenceOp`]): writes to a protected
//!   object, fenced by the token;
//! - [the capability probe](#the-capability-probe) ([`Probe`]): whether a
//!   store enforces the conditions a protocol needs; [its shared
//!   verdict](#the-shared-verdict) ([`SharedProbe`]), kept in the bucket
//!   for the whole fleet; [the bucket's races](#the-buckets-races)
//!   ([`BucketProbe`]);
//! - [the fleet view](#the-fleet-view) ([`Listing`]): every lease under a
//!   prefix; [leaderless time](#leaderless-time) ([`Watch`]) measured from
//!   listings;
//! - [trying again](#trying-again) ([`next_try`]): when a contender that
//!   found the lease busy tries again, and how long a released lease stays
//!   busy to its releaser under fair waiting.
//!
//! Every machine makes its store calls through one call discipline
//! (private module `calls`: ids, reply timeout, the operation's deadline,
//! retries and backoff, store write spacing, settle-by-read), and every
//! protocol judges time the same way (private module `validity`):
//! a write stamps an expiry on the store's clock and is trusted locally
//! until a deadline short of it (`docs/protocols.md`).
//!
//! This page is a map. The protocols in detail, every step and every
//! promise, are in `docs/protocols.md` (and the fleet view in
//! `docs/operations.md`); why they are so is in `docs/design.md`.
//!
//! # The machine interface
//!
//! The shape every protocol machine shares (what they report is in
//! [what operations take and give](#leases-outcomes-errors-and-events)).
//!
//! A machine is driven by three calls, in the manner of quinn-proto and
//! str0m: [`poll`](Machine::poll) (what next?), [`handle_reply`](Machine::handle_reply)
//! (a store call finished) and [`stop`](Machine::stop) (the caller wants out).
//! Time is an argument of each. After every input the driver polls until it
//! gets [`Output::Wait`] or [`Output::Done`]; calling `poll` early or often is
//! harmless. A machine never blocks, reads a clock, draws randomness or does
//! I/O, so the same inputs always give the same outputs.
//!
//! # Leases, outcomes, errors and events
//!
//! What the protocols take and answer: a held [`Lease`] and the [`Claim`]
//! of a record of ours that may be live, each operation's outcome
//! ([`AcquireOutcome`], [`Busy`], [`RenewOutcome`], [`ReleaseOutcome`],
//! [`BreakOutcome`], an [`Observation`] of the key), why a lease was lost
//! ([`LostReason`]), the one error type ([`LeaseError`]) and an elector's
//! [`Event`]s. The machines that produce them are in [the machine interface](#the-machine-interface).
//!
//! # One-shot operations
//!
//! One-shot lease operations: acquire, renew, release, inspect, break.
//!
//! [`LeaseOp`] runs the protocol the configuration names: the
//! [CAS lease](#the-cas-lease), [epoch objects](#epoch-objects) or the
//! [create/delete mutex](#the-create-delete-mutex), each a set of decisions the shared
//! call engine runs (ids, timeouts, backoff, write spacing, settle-by-read).
//!
//! # The CAS lease
//!
//! The default protocol: one object at the key, updated with `If-Match`.
//! [`LeaseOp`] runs it when the configuration names
//! [`Protocol::Cas`](crate::config::Protocol::Cas). Its steps (acquire,
//! ambiguous writes, renew, release, break) are on the crate's front page,
//! [the protocol in one page](crate#the-protocol-in-one-page); a record of
//! another protocol at the key is refused with
//! [`LeaseError::ProtocolMismatch`], at no request of its own. Every step,
//! its store calls and what each operation promises: `docs/protocols.md`,
//! "The protocol".
//!
//! # Epoch objects
//!
//! For stores that can create an object only if it is absent but cannot
//! compare an etag on PUT ([`Protocol::Epochs`](crate::config::Protocol::Epochs)).
//! Each leadership epoch is its own object, `<key>/<epoch:020>.json`,
//! created with `If-None-Match: *`; the newest listed is the lease and its
//! number the fencing token, so a renewal is a new epoch. Cleanup deletes
//! old epochs, so every create counts only once a LIST made after it
//! shows it as the newest. Each operation step by step: `docs/protocols.md`,
//! "Epoch objects"; why: `docs/design.md` §7.
//!
//! # The create-delete mutex
//!
//! The lock file ([`Protocol::Mutex`](crate::config::Protocol::Mutex)):
//! the lock exists while someone holds it, created with `If-None-Match: *`
//! and deleted with `DELETE If-Match`, which also breaks a stale lock
//! safely. It cannot renew (an [`Elector`] holds it one ttl at a time) and
//! keeps no fencing token. A release waits out creates of its acquisition
//! whose replies were lost ([`Lease::strays_until`]), which the lock
//! itself marks for a release from another process. Each operation:
//! `docs/protocols.md`, "The create/delete mutex".
//!
//! # Leader election
//!
//! The [`Elector`] campaigns, renews, observes and resigns, running one
//! [`LeaseOp`] at a time and reporting [`Event`]s; its local deadline is a
//! timer, so [`Event::Lost`] comes on time whether or not a reply arrives.
//! A [`Holder`] keeps an acquired lease alive until it is lost, without
//! campaigning. Events come in one order: `Acquired`,
//! `LeaderChanged(Some(us))`, `Renewed` (and `AtRisk`), then `Lost`, or
//! `Released` (after `HandingOver` for [`Machine::hand_over`]), then
//! `LeaderChanged(None)`. Every event, errors and the mutex's one-ttl
//! terms: `docs/protocols.md`, "Leader election".
//!
//! # Fenced writes
//!
//! A holder's write to a protected object that a stale holder cannot make
//! (`docs/design.md` §5): [`FenceOp`] reads the token on the object's
//! first line, refuses if it is greater than ours, and writes with
//! `If-Match` on the version read; [`FenceOp::append`] makes the object a
//! journal, whose lines [`Fenced::entries`] reads back. Detail:
//! `docs/protocols.md`, "Fenced writes".
//!
//! # The capability probe
//!
//! Does this store really enforce the conditions the protocols rely on?
//! [`Probe`] runs every [`Check`] on scratch keys next to the lease key
//! (`<key>.probe/<random id>`), deletes what it created, and reports a
//! [`ProbeReport`]; [`ProbeReport::supports`] turns a failed check into
//! [`LeaseError::UnsafeStore`] naming it, and [`Checked`] runs a lease
//! operation only after the probe passed for its protocol. The calls in
//! order, the checks and their cleanup: `docs/protocols.md`, "Capability
//! probe"; why: `docs/design.md` §8.
//!
//! # The shared verdict
//!
//! [`SharedProbe`] keeps the probe's verdict in the bucket, at
//! [`verdict_key`] (`<key>.probe/verdict.json`), so a fleet probes once,
//! not once per process or cold start: a trusted verdict costs one GET
//! ([`VERDICT_TRUSTED_FOR`], [`REFUSAL_TRUSTED_FOR`]), one client at a time
//! claims the probe, which runs on its own budget ([`probe_config`]), and
//! a probe that cannot finish backs off fleet-wide ([`probe_backoff`]).
//! The record and every case: `docs/protocols.md`, "The shared verdict".
//!
//! # The bucket's races
//!
//! What the bucket does around the protocol (`lease probe`, beside the
//! capability checks): [`BucketProbe`] sends [`BUCKET_RACERS`] conditional
//! creates of one scratch key at once, then as many conditional replaces,
//! for [`BUCKET_ROUNDS`] rounds ([`BucketProbe::with_race`]), each race
//! needing exactly one winner; it also tells whether the bucket refuses an
//! unconditional write to the lease prefix and whether it keeps versions.
//! Detail: `docs/protocols.md`, "Under concurrency".
//!
//! # The fleet view
//!
//! [`Listing`] (`lease ls PREFIX`) lists a prefix, every page, and reads
//! each lease once, whatever protocol or client wrote it (an epochs lease
//! by its newest epoch, a simple client's record, another tool's lock);
//! other objects are counted in [`ListReport::others`]. It only reads.
//! Detail: `docs/operations.md`, "Who holds what: `lease ls`".
//!
//! # Trying again
//!
//! [`next_try`]: when a contender that found the lease busy tries again
//! ([`Leases::acquire_within`](crate::client::Leases::acquire_within), the
//! CLI's `--wait`). A backoff from [`FIRST_RETRY`] with jitter, up to
//! `poll_every`, never later than the holder's published expiry and never
//! sooner than the store's write spacing; under fair waiting
//! ([`LeaseConfig::fair`](crate::config::LeaseConfig::fair)) the cap is
//! [`FAIR_POLL`] and a releaser finds its lease busy for [`COURTESY`].
//! Pure, so the simulation replays it. Detail: `docs/protocols.md`, "Under
//! contention: waiting, and what a handoff costs".
//!
//! # Leaderless time
//!
//! Measured from the outside (`lease ls --watch`): a [`Watch`], fed each
//! [`ListReport`] of a prefix listed again and again, tells when each key
//! lost its holder, when it got one again and for how long it had none,
//! in the observer's time and to the listing interval. Detail:
//! `docs/operations.md`, "Alerts" (*From the outside*).

pub(crate) mod bucket;
mod calls;
pub(crate) mod cas;
pub(crate) mod elector;
mod engine;
pub(crate) mod epochs;
pub(crate) mod fence;
pub(crate) mod lease;
pub(crate) mod list;
pub(crate) mod machine;
pub(crate) mod mutex;
pub(crate) mod outcome;
pub(crate) mod probe;
pub(crate) mod validity;
pub(crate) mod verdict;
pub(crate) mod wait;
pub(crate) mod watch;

pub use bucket::{
    BucketProbe, BucketReport, Race, RaceKind, RaceRound, Unconditional, BUCKET_RACERS,
    BUCKET_ROUNDS,
};
pub use elector::{Elector, ElectorExit, HoldLimit, Holder, HolderExit};
pub use fence::{FenceOp, FenceOutcome, Fenced};
pub use lease::{Acquire, Break, Inspect, LeaseOp, Release, Renew};
pub use list::{ListReport, Listed, Listing, SessionSeen, EPOCH_LIST_TRIES, LISTING_MAX_PAGES};
pub use machine::{CallId, Machine, Output};
pub use outcome::{
    status_json, summarize, AcquireOutcome, BreakOutcome, BreakRequest, Busy, Claim, Event, Leader,
    Lease, LeaseError, LostReason, NotHeld, Observation, ReleaseOutcome, RenewOutcome,
};
pub use probe::{Check, CheckResult, Checked, Probe, ProbeReport, MAX_LIST_PAGES};
pub use verdict::{
    judge, most_check_time, probe_backoff, probe_config, probe_time, verdict_key, OneCall,
    ReadOnlyReport, Reading, Refusal, Shared, SharedProbe, Verdict, CONCURRENT_WRITES,
    MAX_PROBE_TIME, PROBE_ATTEMPTS, PROBE_BUDGET, PROBE_CLAIM_MARGIN, PROBE_FIRST_BACKOFF,
    PROBE_MAX_BACKOFF, REFUSAL_TRUSTED_FOR, VERDICT_POLL, VERDICT_TRUSTED_FOR,
};
pub use wait::{
    next_try, COURTESY, FAIR_POLL, FIRST_RETRY, HANDOFF_GRACE, HANDOFF_POLL, HANDOFF_TO,
};
pub use watch::{KeyWatch, Watch, WatchEvent};
