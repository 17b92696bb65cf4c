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
//! Both run in one world, written once:
//!
//! - [`queue`]: the event queue, by real time, then in the order events
//!   were scheduled;
//! - [`clock`]: real time, the store's clock (real time at [`clock::EPOCH`])
//!   and each node's clocks, with their drift and offset
//!   ([`clock::NodeClock`]; the product simulation adds its stalls on top);
//! - [`faults`]: the store-side fault model: what can happen to a request
//!   ([`faults::FaultKind`]), scripted faults by window or armed by hand
//!   ([`faults::Scripted`]), the rates random ones are drawn from
//!   ([`faults::FaultRates`], [`faults::draw`]), when a request and its
//!   reply travel, and what the in-memory store applies and answers under
//!   each, dated by a front end ([`faults::Bucket`]).
//!
//! What each simulator keeps to itself is what it runs (stepped machines
//! or async processes), its node faults, and its checker; the safety rules
//! they share are [`crate::verify`]'s.

pub mod clients;
pub mod clock;
pub mod elector;
pub mod faults;
pub mod queue;
