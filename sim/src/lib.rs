#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! Deterministic simulation of `lease-core`: the protocol's real code run
//! against the in-memory store on a simulated clock, every random choice
//! drawn from one seed, judged by a checker. Verification only, never in a
//! product build: it runs `lease-core` with its broken variants
//! (`unsafe-variants`) and its shared safety rules (`verify`). Two
//! simulators:
//!
//! - [`elector`]: N nodes of the sans-IO [`Elector`](lease_core::Elector)
//!   machines, stepped by hand, with fenced writes to a protected object;
//!   the simulation tests and the browser demo use it;
//! - [`clients`]: the product's clients (`Leases::run`, `Leases::supervise`,
//!   the CLI's flows, the elector's driver) as async processes on a tiny
//!   executor, judged by what the store held and when work really ran.
//!
//! Both run in one [`world`], written once: its event queue, its clocks
//! and its store-side fault model.
//!
//! What each simulator keeps to itself is what it runs (stepped machines
//! or async processes), its node faults, and its checker; the safety rules
//! they share are [`lease_core::verify`]'s.

pub mod clients;
pub mod elector;
pub mod world;
