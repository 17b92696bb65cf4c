//! One-shot lease operations: acquire, renew, release, inspect, break.
//!
//! [`LeaseOp`] runs the protocol the configuration names: the
//! [CAS lease](super::cas), [epoch objects](super::epochs) or the
//! [create/delete mutex](super::mutex), each a set of decisions the shared
//! call engine runs (ids, timeouts, backoff, write spacing, settle-by-read).

use crate::config::{LeaseConfig, Protocol};
use crate::entropy::Entropy;
use crate::protocol::cas::CasSteps;
use crate::protocol::engine::Engine;
use crate::protocol::engine::Kind;
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
/// the CAS lease (this module), [epoch objects](crate::protocol::epochs) or the
/// [create/delete mutex](crate::protocol::mutex). The goal `G` ([`Acquire`],
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

/// The engine of one protocol, for any goal.
// One per operation (the elector boxes its own): the variants' sizes do
// not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
enum AnyOp {
    Cas(Engine<CasSteps>),
    Epochs(Engine<EpochSteps>),
    Mutex(Engine<MutexSteps>),
}

impl AnyOp {
    fn start(cfg: LeaseConfig, entropy: Entropy, kind: Kind) -> AnyOp {
        match cfg.protocol {
            Protocol::Cas => AnyOp::Cas(Engine::new(cfg, entropy, CasSteps::new(kind))),
            Protocol::Epochs => AnyOp::Epochs(Engine::new(cfg, entropy, EpochSteps::new(kind))),
            Protocol::Mutex => AnyOp::Mutex(Engine::new(cfg, entropy, MutexSteps::new(kind))),
        }
    }

    fn poll(&mut self, now: Now) -> Output<Result<OpOutcome, LeaseError>> {
        match self {
            AnyOp::Cas(e) => e.poll(now),
            AnyOp::Epochs(e) => e.poll(now),
            AnyOp::Mutex(e) => e.poll(now),
        }
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        match self {
            AnyOp::Cas(e) => e.handle_reply(now, id, reply),
            AnyOp::Epochs(e) => e.handle_reply(now, id, reply),
            AnyOp::Mutex(e) => e.handle_reply(now, id, reply),
        }
    }
}

impl<G> LeaseOp<G> {
    fn start(cfg: LeaseConfig, entropy: Entropy, kind: Kind) -> LeaseOp<G> {
        LeaseOp::wrap(AnyOp::start(cfg, entropy, kind))
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
        LeaseOp::wrap(match self.op {
            AnyOp::Cas(e) => AnyOp::Cas(e.with_ids_from(next)),
            AnyOp::Epochs(e) => AnyOp::Epochs(e.with_ids_from(next)),
            AnyOp::Mutex(e) => AnyOp::Mutex(e.with_ids_from(next)),
        })
    }

    /// The id the next call will get.
    pub(crate) fn next_id(&self) -> u64 {
        match &self.op {
            AnyOp::Cas(e) => e.next_id(),
            AnyOp::Epochs(e) => e.next_id(),
            AnyOp::Mutex(e) => e.next_id(),
        }
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
        let kind = Kind::Acquire;
        LeaseOp::wrap(match cfg.protocol {
            Protocol::Cas => AnyOp::Cas(Engine::acquire_from(
                cfg,
                entropy,
                CasSteps::new(kind),
                seen,
            )),
            Protocol::Epochs => AnyOp::Epochs(Engine::acquire_from(
                cfg,
                entropy,
                EpochSteps::new(kind),
                seen,
            )),
            Protocol::Mutex => AnyOp::Mutex(Engine::acquire_from(
                cfg,
                entropy,
                MutexSteps::new(kind),
                seen,
            )),
        })
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
            Protocol::Cas => LeaseOp::wrap(AnyOp::Cas(Engine::acquire_absent(
                cfg,
                entropy,
                CasSteps::new(Kind::Acquire),
                clock,
            ))),
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
        LeaseOp::wrap(match self.op {
            AnyOp::Cas(e) => AnyOp::Cas(e.with_claims(claims)),
            AnyOp::Epochs(e) => AnyOp::Epochs(e.with_claims(claims)),
            AnyOp::Mutex(e) => AnyOp::Mutex(e.with_claims(claims)),
        })
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
        match &self.op {
            AnyOp::Cas(e) => e.store_clock(),
            AnyOp::Epochs(e) => e.store_clock(),
            AnyOp::Mutex(e) => e.store_clock(),
        }
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
