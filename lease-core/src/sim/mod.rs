//! Deterministic simulation (feature `sim`): the protocol's real code run
//! against the in-memory store on a simulated clock, every random choice
//! drawn from one seed, judged by a checker. Two simulators:
//!
//! - [`elector`]: N nodes of the sans-IO [`Elector`](crate::protocol::elector::Elector)
//!   machines, stepped by hand, with fenced writes to a protected object;
//!   the simulation tests and the browser demo use it;
//! - [`clients`]: the product's clients (`Singleton::run`, `hold_while`,
//!   the CLI's flows, the elector's driver) as async processes on a tiny
//!   executor, judged by what the store held and when work really ran.
//!
//! Both run on one world: its event queue ([`queue`]) and its clocks
//! ([`clock`]: real time, the store's, and each node's with its drift and
//! offset).

pub mod clients;
pub mod clock;
pub mod elector;
pub mod faults;
pub mod queue;
