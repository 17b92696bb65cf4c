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
//! Both run on one world: its event queue ([`queue`]).

pub mod clients;
pub mod elector;
pub mod queue;
