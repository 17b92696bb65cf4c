//! The world both simulators run in, written once:
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

pub mod clock;
pub mod faults;
pub mod queue;
