//! The sans-IO protocol machines: each computes the store calls an operation
//! needs and interprets their replies, and never performs I/O or reads a
//! clock. Drive one with [`crate::client::drive`], or by hand through the
//! [`Machine`](machine::Machine) trait.
//!
//! - [`machine`]: the [`Machine`](machine::Machine) interface;
//!   [`outcome`]: what operations take and give (leases, outcomes,
//!   errors, events);
//! - [`lease`]: one-shot operations ([`LeaseOp`](lease::LeaseOp)) on any
//!   of the three protocols, [`cas`], [`epochs`] and [`mutex`], whose
//!   decisions the lease engine runs (records stamped, writes tracked,
//!   wins given back);
//! - [`elector`]: campaigning and holding, built on one-shot operations;
//! - [`fence`]: writes to a protected object, fenced by the token;
//! - [`probe`]: whether a store enforces the conditions a protocol needs;
//!   [`verdict`]: its verdict, kept in the bucket for the whole fleet;
//! - [`list`]: every lease under a prefix; [`watch`]: leaderless time
//!   measured from listings;
//! - [`wait`]: when a contender that found the lease busy tries again, and
//!   how long a released lease stays busy to its releaser under fair
//!   waiting.
//!
//! Every machine makes its store calls through one call discipline
//! (private module `calls`: ids, reply timeout, the operation's deadline,
//! retries and backoff, store write spacing, settle-by-read), and every
//! protocol judges time the same way (private module `validity`):
//! a write stamps an expiry on the store's clock and is trusted locally
//! until a deadline short of it (`docs/protocols.md`).

pub mod bucket;
mod calls;
pub mod cas;
pub mod elector;
mod engine;
pub mod epochs;
pub mod fence;
pub mod lease;
pub mod list;
pub mod machine;
pub mod mutex;
pub mod outcome;
pub mod probe;
pub(crate) mod validity;
pub mod verdict;
pub mod wait;
pub mod watch;
