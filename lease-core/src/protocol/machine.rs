//! The machine interface: documented in the layer's docs (`protocol/mod.rs`, "The machine interface").

use crate::protocol::outcome::{
    summarize, Busy, Event, Lease, LeaseError, LostReason, Observation,
};
use crate::store::{ReplyKind, StoreOp, StoreReply};
use crate::time::{Mono, Now};

/// Identifies one store call so its reply can be matched to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId(pub u64);

/// What a machine wants next.
#[derive(Clone, Debug, PartialEq)]
pub enum Output<T> {
    /// Perform this store call and feed its reply back with the same id.
    Call(CallId, StoreOp),
    /// Something happened that the caller may want to know.
    Event(Event),
    /// Nothing to do until a reply arrives or local time reaches this.
    Wait(Mono),
    /// Finished. Returned once; afterwards the machine only waits.
    Done(T),
}

/// A protocol machine (see the module docs).
pub trait Machine {
    /// What the machine finishes with.
    type Outcome;
    /// The next output at local time `now`. Handles due timers first.
    fn poll(&mut self, now: Now) -> Output<Self::Outcome>;
    /// Feeds the reply to call `id`. Replies to calls the machine no longer
    /// waits for (timed out, superseded) are ignored.
    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply);
    /// Asks the machine to wind down (an elector resigns and releases).
    /// One-shot operations ignore it.
    fn stop(&mut self, _now: Now) {}
    /// Asks the machine to wind down, handing what it holds to the holder
    /// named `to` (an elector's planned handoff,
    /// [`Leadership::hand_over`](crate::client::Leadership::hand_over)).
    /// Machines with nothing to hand over stop.
    fn hand_over(&mut self, now: Now, _to: &str) {
        self.stop(now)
    }
}

/// What the protocol engine finishes an operation with, before
/// [`LeaseOp`](crate::protocol::lease::LeaseOp) hands each goal its own type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum OpOutcome {
    Acquired(Lease),
    Busy(Busy),
    Renewed(Lease),
    Lost(LostReason),
    Released { token: u64 },
    AlreadyLost(LostReason),
    ReleaseUnknown { token: u64, now: LostReason },
    Inspected(Option<Observation>),
    Broken { token: u64 },
}

impl OpOutcome {
    /// The variant's name, for the engine's internal error: formatting the
    /// whole outcome with `Debug` would link the `Debug` of every record
    /// type into every build (a few KB of each wasm module).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            OpOutcome::Acquired(_) => "Acquired",
            OpOutcome::Busy(_) => "Busy",
            OpOutcome::Renewed(_) => "Renewed",
            OpOutcome::Lost(_) => "Lost",
            OpOutcome::Released { .. } => "Released",
            OpOutcome::AlreadyLost(_) => "AlreadyLost",
            OpOutcome::ReleaseUnknown { .. } => "ReleaseUnknown",
            OpOutcome::Inspected(_) => "Inspected",
            OpOutcome::Broken { .. } => "Broken",
        }
    }
}

/// Classifies a reply that ends an operation, or `None` when it is one the
/// machines handle themselves.
pub(crate) fn terminal_error(kind: &ReplyKind) -> Option<LeaseError> {
    match kind {
        ReplyKind::Denied { code, message } => Some(LeaseError::Denied {
            code: code.clone(),
            message: message.clone(),
            unsettled: Box::default(),
        }),
        ReplyKind::NoSuchBucket => Some(LeaseError::no_such_bucket()),
        ReplyKind::Unsupported { status, code } => Some(LeaseError::Unsupported {
            status: *status,
            code: code.clone(),
            unsettled: Box::default(),
        }),
        ReplyKind::Unexpected { .. } | ReplyKind::Invalid { .. } => Some(LeaseError::Unexpected {
            reply: summarize(kind),
            unsettled: Box::default(),
        }),
        _ => None,
    }
}
