//! The client layer: futures over the protocol machines, for any
//! [`Store`](crate::store::Store) and [`Clock`](crate::time::Clock).
//!
//! - [`Leases`] (in [`leases`]): one client per store, every operation by
//!   key with its own typed result;
//! - [`drive`]: runs any machine against a store and a clock;
//! - [`hold`]: runs work while a lease is held, stopping it at the deadline;
//! - [`supervise`]: `lease run`'s supervision of work it can TERM and KILL,
//!   never left running past the lease's deadline;
//! - [`run`]: one run of a job under a lease, once or once per tick (the
//!   Lambda's, the Worker's, a user's scheduled code);
//! - [`leadership`]: a [`Leadership`](leadership::Leadership) handle for a
//!   service that needs a leader;
//! - [`wait`](crate::protocol::wait): when a contender that found the
//!   lease busy tries again (a policy of the protocol layer);
//! - [`revalidate`]: re-reads of an unchanged lease answered 304.

pub mod drive;
pub mod hold;
pub mod leadership;
pub mod leases;
pub mod revalidate;
pub mod run;
pub mod supervise;

pub use leases::{ByEtagError, Leases, Settings};
pub use run::{Run, RunError, RunOutcome};
