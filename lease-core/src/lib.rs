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
//! [`Busy`](machine::Busy), having spent one GET and no PUT. Released or
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
//! # Layers
//!
//! - [`record`]: the JSON lease object, strict total decoding.
//! - [`store`]: the verbs ([`StoreOp`](store::StoreOp)) and reply classes
//!   ([`StoreReply`](store::StoreReply)).
//! - [`http`]: dialects from verbs to HTTP and back ([`http::s3`]); [`sign`]
//!   (feature `sigv4`): AWS SigV4 with the signing time passed in.
//! - [`machine`], [`lease`], [`elector`]: the protocol machines. The CAS
//!   lease is the default; [`epoch`] (epoch objects, for stores without
//!   `If-Match`) and [`mutex`] (create/delete) are chosen with
//!   [`LeaseConfig::protocol`](config::LeaseConfig::protocol);
//!   [`fence`]: fenced writes to a protected object; [`probe`]: the
//!   capability probe that refuses a store ignoring the conditions.
//! - [`drive`]: a runtime-agnostic async driver over a
//!   [`Store`](drive::Store) and a [`Clock`](drive::Clock); `HttpStore`.
//! - [`mem`]: a linearizable in-memory store and a virtual clock.
//!
//! # Example
//!
//! Two nodes contend for a lease in the in-memory store; time is virtual, so
//! the whole story runs instantly.
//!
//! ```
//! use lease_core::config::LeaseConfig;
//! use lease_core::drive::drive;
//! use lease_core::entropy::Entropy;
//! use lease_core::lease::LeaseOp;
//! use lease_core::machine::{AcquireOutcome, ReleaseOutcome, RenewOutcome};
//! use lease_core::mem::{MemStore, VirtualClock};
//! use lease_core::time::UnixMillis;
//! use std::time::Duration;
//!
//! let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
//! let store = MemStore::new(clock.clone());
//! let config = |holder: &str| LeaseConfig::new("locks/nightly", holder, Duration::from_secs(30));
//! // Entropy comes from the caller: the OS in production, a seed in tests.
//!
//! // Node a acquires: GET (missing) + PUT If-None-Match: *.
//! let mut acquire = LeaseOp::acquire(config("a"), Entropy::from_seed(1));
//! let Ok(AcquireOutcome::Acquired(lease)) = pollster::block_on(drive(&mut acquire, &store, &clock, |_| {})) else {
//!     panic!("a should acquire")
//! };
//! assert_eq!(lease.token, 1);
//!
//! // Node b finds it busy: one GET, no PUT.
//! let mut acquire = LeaseOp::acquire(config("b"), Entropy::from_seed(2));
//! let Ok(AcquireOutcome::Busy(busy)) = pollster::block_on(drive(&mut acquire, &store, &clock, |_| {})) else {
//!     panic!("b should see a busy lease")
//! };
//! assert_eq!((busy.holder.as_str(), busy.token), ("a", 1));
//!
//! // a renews, then releases; b acquires with the next fencing token.
//! let mut renew = LeaseOp::renew(config("a"), Entropy::from_seed(3), lease);
//! let Ok(RenewOutcome::Renewed(lease)) = pollster::block_on(drive(&mut renew, &store, &clock, |_| {})) else {
//!     panic!("a should renew")
//! };
//! let mut release = LeaseOp::release(config("a"), Entropy::from_seed(4), lease);
//! let released = pollster::block_on(drive(&mut release, &store, &clock, |_| {}));
//! assert_eq!(released, Ok(ReleaseOutcome::Released { token: 1 }));
//! let mut acquire = LeaseOp::acquire(config("b"), Entropy::from_seed(5));
//! let Ok(AcquireOutcome::Acquired(lease)) = pollster::block_on(drive(&mut acquire, &store, &clock, |_| {})) else {
//!     panic!("b should acquire")
//! };
//! assert_eq!(lease.token, 2);
//! ```

/// Whether the named broken variant ([`mutants::Mutant`]) is active: only
/// ever in the test build (`--cfg lease_mutants`); the constant `false`
/// in every other build.
macro_rules! mutant {
    ($name:ident) => {{
        #[cfg(lease_mutants)]
        {
            $crate::mutants::active($crate::mutants::Mutant::$name)
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
pub mod drive;
pub mod elector;
pub mod entropy;
pub mod epoch;
pub mod fence;
pub mod hold;
pub mod http;
pub mod leadership;
pub mod lease;
pub mod machine;
pub mod mem;
#[cfg(lease_mutants)]
pub mod mutants;
pub mod mutex;
pub mod probe;
pub mod provider;
pub mod record;
mod retry;
pub mod settings;
#[cfg(feature = "sigv4")]
pub mod sign;
#[cfg(feature = "sim")]
pub mod sim;
pub mod singleton;
mod steps;
pub mod store;
pub mod time;
#[cfg(feature = "unsafe-variants")]
pub mod variants;
