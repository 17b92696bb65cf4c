//! One-shot operations: documented in the layer's docs (`protocol/mod.rs`, "One-shot operations").

use crate::config::{LeaseConfig, Protocol};
use crate::entropy::Entropy;
use crate::protocol::cas::CasSteps;
use crate::protocol::engine::{Answer, Ctx, Engine, Kind, Next, Plan, Steps};
use crate::protocol::epochs::EpochSteps;
use crate::protocol::machine::{CallId, Machine, OpOutcome, Output};
use crate::protocol::mutex::MutexSteps;
use crate::protocol::outcome::BreakRequest;
use crate::protocol::outcome::{
    AcquireOutcome, BreakOutcome, Claim, Lease, LeaseError, Observation, ReleaseOutcome,
    RenewOutcome,
};
use crate::store::StoreReply;
use crate::time::{Mono, Now, StoreDate};
use core::marker::PhantomData;

/// A one-shot lease operation, run by the protocol `cfg.protocol` names:
/// the CAS lease (this module), [epoch objects](crate::protocol#epoch-objects) or the
/// [create/delete mutex](crate::protocol#the-create-delete-mutex). The goal `G` ([`Acquire`],
/// [`Renew`], [`Release`], [`Inspect`], [`Break`]) fixes what it finishes
/// with, so a match on its outcome has only the arms that can happen:
///
/// | goal | outcome (`Ok`) |
/// |---|---|
/// | [`Acquire`] | [`AcquireOutcome`]: `Acquired(lease)` or `Busy(busy)` |
/// | [`Renew`] | [`RenewOutcome`]: `Renewed(lease)` or `Lost(reason)` |
/// | [`Release`] | [`ReleaseOutcome`]: `Released`, `AlreadyLost` or `Unknown` |
/// | [`Inspect`] | `Option<`[`Observation`]`>` |
/// | [`Break`] | [`BreakOutcome`] |
///
/// Every protocol answers with the same outcomes, so electors and
/// adapters work with any of them.
#[derive(Clone, Debug)]
pub struct LeaseOp<G> {
    op: AnyOp,
    goal: PhantomData<G>,
}

/// The goal of a [`LeaseOp`]: take the lease.
#[derive(Clone, Copy, Debug)]
pub enum Acquire {}
/// The goal of a [`LeaseOp`]: extend a held lease.
#[derive(Clone, Copy, Debug)]
pub enum Renew {}
/// The goal of a [`LeaseOp`]: give a held lease back.
#[derive(Clone, Copy, Debug)]
pub enum Release {}
/// The goal of a [`LeaseOp`]: read the lease object.
#[derive(Clone, Copy, Debug)]
pub enum Inspect {}
/// The goal of a [`LeaseOp`]: an operator's release of the version seen.
#[derive(Clone, Copy, Debug)]
pub enum Break {}

/// The engine, with the steps of the protocol a configuration names: one
/// engine for the three protocols (its code is in a wasm module once, not
/// once per protocol).
type AnyOp = Engine<AnySteps>;

/// One protocol's [`Steps`], chosen at run time.
// One per operation (the elector boxes its own): the variants' sizes do
// not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
enum AnySteps {
    Cas(CasSteps),
    Epochs(EpochSteps),
    Mutex(MutexSteps),
}

/// `$body` with `$s` bound to the protocol's steps.
macro_rules! each {
    ($steps:expr, $s:ident => $body:expr) => {
        match $steps {
            AnySteps::Cas($s) => $body,
            AnySteps::Epochs($s) => $body,
            AnySteps::Mutex($s) => $body,
        }
    };
}

impl AnySteps {
    fn new(protocol: Protocol, kind: Kind) -> AnySteps {
        match protocol {
            Protocol::Cas => AnySteps::Cas(CasSteps::new(kind)),
            Protocol::Epochs => AnySteps::Epochs(EpochSteps::new(kind)),
            Protocol::Mutex => AnySteps::Mutex(MutexSteps::new(kind)),
        }
    }
}

impl Steps for AnySteps {
    fn first(&mut self, cx: &mut Ctx) -> Next {
        each!(self, s => s.first(cx))
    }
    fn reply(&mut self, cx: &mut Ctx, now: Now, answer: Answer<'_>) -> Next {
        each!(self, s => s.reply(cx, now, answer))
    }
    fn kind(&self) -> &Kind {
        each!(self, s => s.kind())
    }
    fn resume(&mut self, cx: &mut Ctx, seen: &Observation) -> Plan {
        each!(self, s => s.resume(cx, seen))
    }
    fn resume_absent(&mut self, cx: &mut Ctx) -> Option<Plan> {
        each!(self, s => s.resume_absent(cx))
    }
    fn give_back(&self, cx: &mut Ctx, lease: &Lease) -> Plan {
        each!(self, s => s.give_back(cx, lease))
    }
    fn gives_back_creates_by_delete(&self) -> bool {
        each!(self, s => s.gives_back_creates_by_delete())
    }
    fn deadline(&self) -> Option<Mono> {
        each!(self, s => s.deadline())
    }
}

impl<G> LeaseOp<G> {
    fn start(cfg: LeaseConfig, entropy: Entropy, kind: Kind) -> LeaseOp<G> {
        let steps = AnySteps::new(cfg.protocol, kind);
        LeaseOp::wrap(Engine::new(cfg, entropy, steps))
    }

    fn wrap(op: AnyOp) -> LeaseOp<G> {
        LeaseOp {
            op,
            goal: PhantomData,
        }
    }

    /// Continue call ids from `next` (an elector keeps ids unique across
    /// the operations it runs).
    pub(crate) fn with_ids_from(self, next: u64) -> LeaseOp<G> {
        LeaseOp::wrap(self.op.with_ids_from(next))
    }

    /// The id the next call will get.
    pub(crate) fn next_id(&self) -> u64 {
        self.op.next_id()
    }

    /// Ends the operation at `by` at the latest (a run's time limit), as
    /// its own deadline (`op_timeout`) would: with the writes whose
    /// outcome is unknown handed on as claims.
    pub(crate) fn with_deadline(self, by: Mono) -> LeaseOp<G> {
        LeaseOp::wrap(self.op.with_deadline(by))
    }

    /// Polls the engine and hands a finished outcome to `typed`.
    fn poll_typed<T>(
        &mut self,
        now: Now,
        typed: fn(OpOutcome) -> Result<T, LeaseError>,
    ) -> Output<Result<T, LeaseError>> {
        match self.op.poll(now) {
            Output::Call(id, op) => Output::Call(id, op),
            Output::Event(e) => Output::Event(e),
            Output::Wait(at) => Output::Wait(at),
            Output::Done(outcome) => Output::Done(outcome.and_then(typed)),
        }
    }
}

impl LeaseOp<Acquire> {
    /// Acquire the lease. CAS: 2 store calls when it is free (GET, PUT), 1
    /// when it is busy. Epochs: LIST + GET + PUT + LIST (+ deletes of old
    /// epochs; on a key's first acquisition, + the PUT of its marker).
    /// Mutex: GET + PUT (+ a conditional DELETE of a stale lock).
    pub fn acquire(cfg: LeaseConfig, entropy: Entropy) -> LeaseOp<Acquire> {
        LeaseOp::start(cfg, entropy, Kind::Acquire)
    }

    /// Acquire starting from a read the caller just made (an
    /// [`inspect`](LeaseOp::inspect)): when it shows the lease free, the
    /// first call is the write.
    pub fn acquire_from(
        cfg: LeaseConfig,
        entropy: Entropy,
        seen: &Observation,
    ) -> LeaseOp<Acquire> {
        let steps = AnySteps::new(cfg.protocol, Kind::Acquire);
        LeaseOp::wrap(Engine::acquire_from(cfg, entropy, steps, seen))
    }

    /// Acquire when a read the caller just made found no object at the
    /// key, its reply's date anchored at `clock` ([`LeaseOp::store_clock`]
    /// of that read): CAS sends its create (`If-None-Match: *`) at once,
    /// one request where a plain acquire makes two; the other protocols
    /// start as [`acquire`](LeaseOp::acquire) does. A refused create reads
    /// the key and goes on from what it finds, as after any lost race.
    pub(crate) fn acquire_absent(
        cfg: LeaseConfig,
        entropy: Entropy,
        clock: (StoreDate, Mono),
    ) -> LeaseOp<Acquire> {
        match cfg.protocol {
            Protocol::Cas => {
                let steps = AnySteps::new(cfg.protocol, Kind::Acquire);
                LeaseOp::wrap(Engine::acquire_absent(cfg, entropy, steps, clock))
            }
            // Epochs marks a key before its first epoch; the mutex reads.
            _ => LeaseOp::acquire(cfg, entropy),
        }
    }

    /// Tells an acquire about records of ours that earlier operations may
    /// have left on the store ([`Claim`]s: a write whose outcome stayed
    /// unknown, a renewal in flight when a lease expired): a live record of
    /// one of these sessions is taken over as free instead of blocking us
    /// as another holder's lease.
    pub fn with_claims(self, claims: Vec<Claim>) -> LeaseOp<Acquire> {
        LeaseOp::wrap(self.op.with_claims(claims))
    }
}

impl LeaseOp<Renew> {
    /// Renew a held lease: CAS 1 store call; epochs 1 PUT and the delete of
    /// the previous epoch. The mutex cannot be renewed (an error).
    pub fn renew(cfg: LeaseConfig, entropy: Entropy, lease: Lease) -> LeaseOp<Renew> {
        LeaseOp::start(cfg, entropy, Kind::Renew(lease))
    }
}

impl LeaseOp<Release> {
    /// Release a held lease: 1 store call.
    pub fn release(cfg: LeaseConfig, entropy: Entropy, lease: Lease) -> LeaseOp<Release> {
        LeaseOp::start(cfg, entropy, Kind::Release(lease))
    }
}

impl LeaseOp<Inspect> {
    /// Read and decode the lease object: 1 store call (epochs: LIST + GET).
    pub fn inspect(cfg: LeaseConfig, entropy: Entropy) -> LeaseOp<Inspect> {
        LeaseOp::start(cfg, entropy, Kind::Inspect)
    }

    /// The store date the read's reply carried, with the local send time
    /// of the call (`None` before a dated reply).
    pub(crate) fn store_clock(&self) -> Option<(StoreDate, Mono)> {
        self.op.store_clock()
    }
}

impl LeaseOp<Break> {
    /// Break the lease at the version the operator saw: 2 store calls
    /// (epochs: 3).
    pub fn break_lease(
        cfg: LeaseConfig,
        entropy: Entropy,
        request: BreakRequest,
    ) -> LeaseOp<Break> {
        LeaseOp::start(cfg, entropy, Kind::Break(request))
    }
}

/// The engine built for one goal finishes with that goal's outcomes only
/// (each protocol's steps match on the goal to build them); anything else
/// would be a defect in the engine, reported as an error, not a panic.
fn misfiled(goal: &str, outcome: OpOutcome) -> LeaseError {
    let outcome = outcome.name();
    debug_assert!(false, "{goal} finished with {outcome}");
    LeaseError::Unexpected {
        reply: format!("internal: {goal} finished with {outcome}"),
        unsettled: Box::default(),
    }
}

macro_rules! goal {
    ($goal:ty, $outcome:ty, |$o:ident| $typed:expr) => {
        impl Machine for LeaseOp<$goal> {
            type Outcome = Result<$outcome, LeaseError>;

            fn poll(&mut self, now: Now) -> Output<Self::Outcome> {
                self.poll_typed(now, |$o| $typed)
            }

            fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
                self.op.handle_reply(now, id, reply)
            }
        }
    };
}

goal!(Acquire, AcquireOutcome, |o| match o {
    OpOutcome::Acquired(lease) => Ok(AcquireOutcome::Acquired(lease)),
    OpOutcome::Busy(busy) => Ok(AcquireOutcome::Busy(busy)),
    other => Err(misfiled("acquire", other)),
});
goal!(Renew, RenewOutcome, |o| match o {
    OpOutcome::Renewed(lease) => Ok(RenewOutcome::Renewed(lease)),
    OpOutcome::Lost(reason) => Ok(RenewOutcome::Lost(reason)),
    other => Err(misfiled("renew", other)),
});
goal!(Release, ReleaseOutcome, |o| match o {
    OpOutcome::Released { token } => Ok(ReleaseOutcome::Released { token }),
    OpOutcome::AlreadyLost(reason) => Ok(ReleaseOutcome::AlreadyLost(reason)),
    OpOutcome::ReleaseUnknown { token, now } => Ok(ReleaseOutcome::Unknown { token, now }),
    other => Err(misfiled("release", other)),
});
goal!(Inspect, Option<Observation>, |o| match o {
    OpOutcome::Inspected(seen) => Ok(seen),
    other => Err(misfiled("inspect", other)),
});
goal!(Break, BreakOutcome, |o| match o {
    OpOutcome::Broken { token } => Ok(BreakOutcome { token }),
    other => Err(misfiled("break", other)),
});
