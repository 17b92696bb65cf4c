#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! Leases, locks and leader election on object storage, sans-IO.
//!
//! Object stores with conditional writes (`If-None-Match: *`,
//! `If-Match: <etag>`) can host a lease: one small JSON object per key
//! holding a holder, an expiry on the store's clock and a fencing token.
//! This crate computes the requests and interprets the replies; it never
//! performs I/O, reads a clock or draws randomness, so the same code runs in
//! a Lambda, a Cloudflare Worker, a browser and a deterministic simulator.
//!
//! # The protocol in one page
//!
//! **Acquire**: GET the object. Missing: PUT `If-None-Match: *` with token 1.
//! Held by another and not expired by the *store's* clock: report
//! [`Busy`], having spent one GET and no PUT. Released or
//! expired: PUT `If-Match: <etag>` with `token + 1` and a fresh session.
//!
//! **Ambiguous writes**: every write carries a unique `nonce`. When a write's
//! reply is a 412 (possibly our own retried request), a 409, a 5xx or lost,
//! the machine re-reads: our nonce means our write landed; the same etag as
//! before means it did not and may be retried; anything else means another
//! writer won. Throttling backs off with jitter; every retry is bounded and
//! visible as a store call.
//!
//! **Renew**: PUT `If-Match: <our etag>`, same token. **Release**: the same
//! with `released = true` (never DELETE: that would reset the token).
//! **Break**: an operator's release of the version they saw.
//!
//! **Time** ([`time`]): a writer stamps `expires_at` from the latest store
//! `Date` it saw plus local elapsed time plus ttl, and trusts the lease
//! locally only until `send time + ttl - date resolution - drift margin` on
//! its own monotonic clock. Contenders judge expiry by the `Date` of their
//! own read. No two nodes' wall clocks need to agree; clocks need only run
//! at nearly the same rate. The deadline is a timer: a leader whose renewal
//! gets no reply still loses the lease on time.
//!
//! **Fencing**: tokens strictly increase with each acquisition; the
//! protected resource must reject a lower token than it has seen.
//!
//! This is the CAS lease, the default of three protocols ([`protocol`]
//! maps the machines). Every step with its store calls, and what each
//! operation promises: `docs/protocols.md`.
//!
//! # Layers
//!
//! Each layer uses only those below it (a file may use others of its own
//! layer, never in a circle); the common names are re-exported at the
//! crate root. The table is checked against the code: `tests/tests/layers.rs`
//! reads every import (`use` lines and inline `crate::` paths alike) and
//! fails `make test` on a cycle, an import that runs up this table, or a
//! module no row places.
//!
//! | layer | modules | what it holds |
//! |---|---|---|
//! | client | [`client`], [`plan`] | [`Leases`], one client per store (acquire, renew, release, inspect, break, fenced writes, the probe, [`run`](Leases::run) (a job, once or once per tick), [`supervise`](Leases::supervise) (`lease run`'s TERM and KILL schedule), [`lead`](Leases::lead) → [`Leadership`], [`session`](Leases::session) → [`Session`], [`shards`](Leases::shards) → [`Shards`]); the [driver](client::drive) that runs any machine over a [`Store`] and a [`Clock`]; a fleet's costs and failover bound, planned |
//! | settings | [`settings`] | a store, a lease and a client from `LEASE_*`/`AWS_*`/`AZURE_*` variables, every error naming its variable |
//! | recorder | [`trace`] | the flight recorder's names, and (feature `trace`) the recorder and its replay |
//! | protocol | [`protocol`] | the sans-IO machines: [`LeaseOp`] on the [CAS lease](crate::protocol#the-cas-lease) (default), [epoch objects](crate::protocol#epoch-objects) or the [create/delete mutex](crate::protocol#the-create-delete-mutex); the [`Elector`]; [fenced writes](crate::protocol#fenced-writes); the capability [probe](crate::protocol#the-capability-probe); when a busy contender [tries again](crate::protocol#trying-again) |
//! | wire | [`wire`] | dialects from store verbs to HTTP and back (S3, GCS, Azure), the signers, the provider presets, [`HttpStore`] over an adapter's [`HttpTransport`] |
//! | foundation | [`config`], [`record`], [`tick`], [`schedule`], [`store`], [`time`], [`entropy`], [`mem`], [`number`], `sort`, `verify`, `variants`, `mutants` | settings of one lease, the JSON record and the runs it keeps per tick, schedules, the store's verbs and the [`Store`] trait, time and the [`Clock`] trait, the caller's randomness, an in-memory store and a virtual clock, small helpers, and the verification hooks (the shared safety rules, the broken variants and the mutants' switch) |
//!
//! Errors, and settings that may grow (a provider, a protocol, a check),
//! are `#[non_exhaustive]`. Outcomes are not, nor enums that name a closed
//! set (etag quoting, addressing, why a lease is not held): a match on them
//! needs no arm that cannot happen, and a new arm would be a breaking
//! change on purpose.
//!
//! Verification sits beside the product: the safety rules every checker
//! applies (`verify`, feature `verify`) and the broken variants the
//! checkers are shown to catch (`variants`, feature `unsafe-variants`) are
//! not part of a product build; the deterministic simulator that runs them
//! is a crate of its own, `lease-sim` (`docs/verification.md`).
//!
//! # Example: the client
//!
//! Two clients contend for a lease in the in-memory store; time is
//! virtual, so the whole story runs at once.
//!
//! ```
//! use lease_core::{AcquireOutcome, Entropy, Leases, MemStore, ReleaseOutcome, Settings, UnixMillis, VirtualClock};
//!
//! let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
//! let store = MemStore::new(clock.clone());
//! // Entropy comes from the caller: the OS in production, a seed in tests.
//! let a = Leases::new(store.clone(), clock.clone(), Settings::new("a"), || Entropy::from_seed(1))?;
//! let b = Leases::new(store.clone(), clock.clone(), Settings::new("b"), || Entropy::from_seed(2))?;
//! pollster::block_on(async {
//!     // a acquires: GET (missing), then PUT If-None-Match: *.
//!     let AcquireOutcome::Acquired(lease) = a.acquire("locks/nightly").await? else { panic!() };
//!     assert_eq!(lease.token, 1);
//!     // b finds it busy: one GET, no PUT.
//!     let AcquireOutcome::Busy(busy) = b.acquire("locks/nightly").await? else { panic!() };
//!     assert_eq!((busy.holder.as_str(), busy.token), ("a", 1));
//!     // a releases (the token stays in the record); b acquires with the next token.
//!     assert_eq!(a.release(lease).await?, ReleaseOutcome::Released { token: 1 });
//!     let AcquireOutcome::Acquired(lease) = b.acquire("locks/nightly").await? else { panic!() };
//!     assert_eq!(lease.token, 2);
//!     Ok::<_, lease_core::LeaseError>(())
//! })?;
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # Example: a machine driven by hand
//!
//! Under the client, each operation is a [`Machine`]: it answers
//! [`poll`](Machine::poll) with a store call to make, an event, a time to
//! wake at, or its outcome, and takes each reply through
//! [`handle_reply`](Machine::handle_reply). An adapter with its own event
//! loop drives it so; [`client::drive`] is that loop as a future.
//!
//! ```
//! use lease_core::{AcquireOutcome, Entropy, LeaseConfig, LeaseOp, Machine, MemStore, Output, UnixMillis, VirtualClock};
//! use lease_core::Clock;
//! use std::time::Duration;
//!
//! let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
//! let store = MemStore::new(clock.clone());
//! let config = LeaseConfig::new("locks/nightly", "a", Duration::from_secs(30));
//! let mut op = LeaseOp::acquire(config, Entropy::from_seed(1));
//! let mut calls = 0;
//! let outcome = loop {
//!     match op.poll(clock.now()) {
//!         Output::Call(id, call) => {
//!             calls += 1;
//!             let reply = store.apply(&call); // a real adapter sends it over HTTP
//!             op.handle_reply(clock.now(), id, reply);
//!         }
//!         Output::Event(_) => {}
//!         Output::Wait(at) => clock.advance(at - clock.now().mono),
//!         Output::Done(outcome) => break outcome,
//!     }
//! };
//! assert!(matches!(outcome, Ok(AcquireOutcome::Acquired(ref lease)) if lease.token == 1));
//! // GET (missing), then PUT If-None-Match: *.
//! assert_eq!(calls, 2);
//! ```

/// Whether the named broken variant ([`mutants::Mutant`]), or one of the
/// names given as `A | B`, is active: only ever in the test build
/// (`--cfg lease_mutants`); the constant `false` in every other build.
macro_rules! mutant {
    ($($name:ident)|+) => {{
        #[cfg(lease_mutants)]
        {
            false $(|| $crate::mutants::active($crate::mutants::Mutant::$name))+
        }
        #[cfg(not(lease_mutants))]
        {
            false
        }
    }};
}

/// Whether this machine runs the named broken variant: only with the
/// feature `unsafe-variants` (the simulator's and the demo's), where
/// `$cfg.variant.$check()` decides; the constant `false` in every other
/// build.
macro_rules! variant {
    ($cfg:expr, $check:ident) => {{
        #[cfg(feature = "unsafe-variants")]
        {
            $cfg.variant.$check()
        }
        #[cfg(not(feature = "unsafe-variants"))]
        {
            let _ = &$cfg;
            false
        }
    }};
}

pub mod client;
pub mod config;
pub mod entropy;
pub mod mem;
#[cfg(lease_mutants)]
pub mod mutants;
pub mod number;
pub mod plan;
pub mod protocol;
pub mod record;
pub mod schedule;
pub mod settings;
mod sort;
pub mod store;
pub mod tick;
pub mod time;
pub mod trace;
#[cfg(feature = "unsafe-variants")]
pub mod variants;
#[cfg(feature = "verify")]
pub mod verify;
pub mod wire;

pub use client::{ByEtagError, Leases, Run, RunError, RunOutcome, Settings};
pub use client::{Lead, LeadError, Leadership, OwnOutcome, Session, ShardEvent, Shards};
pub use config::{ConfigError, LeaseConfig, Protocol, DEFAULT_TTL};
pub use entropy::Entropy;
pub use mem::{MemStore, VirtualClock};
pub use protocol::elector::{Elector, ElectorExit};
pub use protocol::fence::{FenceOutcome, Fenced};
pub use protocol::lease::LeaseOp;
pub use protocol::machine::{Machine, Output};
pub use protocol::outcome::{
    AcquireOutcome, BreakOutcome, Busy, Claim, Event, Lease, LeaseError, LostReason, Observation,
    ReleaseOutcome, RenewOutcome,
};
pub use protocol::probe::ProbeReport;
pub use record::LeaseRecord;
pub use settings::{SettingsError, StoreSettings};
pub use store::{Etag, Store, StoreOp, StoreReply};
pub use time::{Clock, Mono, Now, UnixMillis};
pub use wire::{HttpStore, HttpTransport, TransportError};
