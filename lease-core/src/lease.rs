//! One-shot lease operations: acquire, renew, release, inspect, break.
//!
//! [`LeaseOp`] runs the protocol the configuration names. This module
//! implements every branch of the default, the CAS lease:
//!
//! - **acquire**: GET; missing → PUT `If-None-Match: *`; held and live →
//!   [`Busy`] with no PUT spent; released or expired →
//!   PUT `If-Match` with `token + 1`, a new session and nonce.
//! - **ambiguous writes** (412 after a retried request, 409, 5xx, a lost or
//!   timed-out reply): re-read. Our nonce in the record means our write
//!   landed; the same etag as before means it did not and may be retried;
//!   anything else means someone else won.
//! - **throttling** (429/503): bounded exponential backoff with jitter,
//!   honouring `Retry-After`.
//! - **renew**: PUT `If-Match` our etag; lost unless confirmed before the
//!   local deadline, which is a timer and fires even when no reply comes.
//! - **release**: PUT `If-Match` with `released = true` and the same token
//!   (never DELETE: that would reset the fencing token).
//! - **break**: an operator's release on the etag they saw, keeping the token.
//!
//! Every retry is decided here, bounded by `max_attempts`, and visible to
//! the caller as store calls. The decisions live in `CasSteps`; the call
//! engine shared with the other protocols (ids, timeouts, backoff, the
//! deadline timer, stamping each write) runs them.

use crate::config::{LeaseConfig, Protocol};
use crate::entropy::Entropy;
use crate::epoch::EpochSteps;
use crate::machine::{
    summarize, AcquireOutcome, Broken, Busy, CallId, Claim, Lease, LeaseError, LostReason, Machine,
    Observation, OpOutcome, Output, ReleaseOutcome, RenewOutcome,
};
use crate::mutex::MutexSteps;
use crate::record::LeaseRecord;
use crate::steps::{break_floor, unreadable, Ctx, Engine, EpochsCheck, Next, Plan, Steps};
use crate::store::{Etag, PutCondition, ReplyKind, StoreReply};
use crate::time::{Mono, Now, StoreDate, UnixMillis};
use core::marker::PhantomData;
use std::time::Duration;

/// What to do when breaking a lease (operator force-unlock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakRequest {
    /// The etag the operator saw; the break applies only to that version.
    pub etag: Etag,
    /// Only for an unreadable object: the token to write into the released
    /// record, so the next acquirer continues above it.
    pub token_floor: Option<u64>,
}

/// A one-shot lease operation, run by the protocol `cfg.protocol` names:
/// the CAS lease (this module), [epoch objects](crate::epoch) or the
/// [create/delete mutex](crate::mutex). The goal `G` ([`Acquire`],
/// [`Renew`], [`Release`], [`Inspect`], [`Break`]) fixes what it finishes
/// with, so a match on its outcome has only the arms that can happen:
///
/// | goal | outcome (`Ok`) |
/// |---|---|
/// | [`Acquire`] | [`AcquireOutcome`]: `Acquired(lease)` or `Busy(busy)` |
/// | [`Renew`] | [`RenewOutcome`]: `Renewed(lease)` or `Lost(reason)` |
/// | [`Release`] | [`ReleaseOutcome`]: `Released`, `AlreadyLost` or `Unknown` |
/// | [`Inspect`] | `Option<`[`Observation`]`>` |
/// | [`Break`] | [`Broken`] |
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
    /// Acquire the lease. CAS: 3 store calls when it is free (GET, PUT,
    /// and a LIST that checks no epochs client uses the key), 1 when it is
    /// busy. Epochs: LIST + GET + PUT + LIST (+ deletes of old epochs).
    /// Mutex: GET + PUT + LIST (+ a conditional DELETE of a stale lock).
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
goal!(Break, Broken, |o| match o {
    OpOutcome::Broken { token } => Ok(Broken { token }),
    other => Err(misfiled("break", other)),
});

/// Which one-shot operation a machine runs.
#[derive(Clone, Debug)]
pub(crate) enum Kind {
    Acquire,
    Renew(Lease),
    Release(Lease),
    Inspect,
    Break(BreakRequest),
}

/// The CAS lease's decisions (see the module docs), run by the shared
/// [`Engine`].
#[derive(Clone, Debug)]
pub(crate) struct CasSteps {
    kind: Kind,
    /// Highest token read during this operation.
    max_token_seen: u64,
    /// The create that made the lease object is being checked against
    /// epochs clients of the same key.
    check: Option<EpochsCheck>,
}

impl CasSteps {
    pub(crate) fn new(kind: Kind) -> CasSteps {
        CasSteps {
            kind,
            max_token_seen: 0,
            check: None,
        }
    }

    fn read(cx: &Ctx) -> Plan {
        Plan::Get(cx.cfg.key.clone())
    }

    fn write(cx: &Ctx, condition: PutCondition, record: LeaseRecord) -> Plan {
        Plan::Write {
            key: cx.cfg.key.clone(),
            condition,
            record,
        }
    }

    /// A write; after the first, each one spends an attempt.
    fn retry_or_write(cx: &mut Ctx, condition: PutCondition, record: LeaseRecord) -> Next {
        let plan = CasSteps::write(cx, condition, record);
        if cx.writes.is_empty() {
            Next::Send(plan)
        } else {
            cx.retry(&ReplyKind::PreconditionFailed, plan)
        }
    }

    fn on_written(&mut self, cx: &mut Ctx, write: usize, etag: Etag, check: bool) -> Next {
        let token = cx.writes[write].record.token;
        Next::Done(Ok(match &self.kind {
            // Won: no epochs client may use the key.
            // Every acquisition, not only a create: a create that landed
            // late (its sender long gone) can leave an object at the key
            // while an epochs client holds it, and taking that over must
            // not go unchecked.
            Kind::Acquire if check && !variant!(cx.cfg, skips_protocol_check) => {
                let (check, plan) = EpochsCheck::start(cx, write, etag);
                self.check = Some(check);
                return Next::Send(plan);
            }
            Kind::Acquire => OpOutcome::Acquired(cx.lease_from(write, etag)),
            Kind::Renew(_) => OpOutcome::Renewed(cx.lease_from(write, etag)),
            Kind::Release(_) => OpOutcome::Released { token },
            Kind::Break(_) => OpOutcome::Broken { token },
            Kind::Inspect => OpOutcome::Inspected(None),
        }))
    }

    fn on_missing(&mut self, cx: &mut Ctx) -> Next {
        match &self.kind {
            Kind::Acquire => {
                // Continue above any token seen during this operation: a
                // deleted object must not hand out a token twice to us.
                let record = cx.fresh_record(self.max_token_seen.saturating_add(1));
                CasSteps::retry_or_write(cx, PutCondition::IfAbsent, record)
            }
            Kind::Inspect => Next::Done(Ok(OpOutcome::Inspected(None))),
            Kind::Renew(_) => Next::Done(Ok(OpOutcome::Lost(LostReason::Vanished))),
            Kind::Release(_) => Next::Done(Ok(OpOutcome::AlreadyLost(LostReason::Vanished))),
            Kind::Break(_) => Next::Done(Err(LeaseError::Changed { current: None })),
        }
    }

    fn on_found(
        &mut self,
        cx: &mut Ctx,
        now: Now,
        etag: Etag,
        body: &[u8],
        date: StoreDate,
    ) -> Next {
        let record = match LeaseRecord::decode(body) {
            Ok(r) => r,
            Err(error) => {
                return match break_floor(&self.kind, &etag) {
                    Some(floor) => {
                        let record = cx.broken_record(floor);
                        CasSteps::retry_or_write(cx, PutCondition::IfMatch(etag), record)
                    }
                    None => unreadable(&self.kind, etag, error),
                };
            }
        };
        self.max_token_seen = self.max_token_seen.max(record.token);
        if let Some(w) = cx.our_write(&record) {
            return self.on_written(cx, w, etag, true);
        }
        if !matches!(self.kind, Kind::Inspect) {
            if let Some(e) = cx.mismatch(&record) {
                return Next::Done(Err(e));
            }
        }
        // A record of the session being renewed or released, other than
        // the version in hand: a write of ours whose reply was lost.
        let ours = match &self.kind {
            Kind::Renew(lease) | Kind::Release(lease) => {
                !record.released
                    && record.session == lease.session
                    && record.holder == lease.record.holder
                    && record.token == lease.token
            }
            _ => false,
        };
        let taken = |r: &LeaseRecord| LostReason::TakenBy {
            holder: r.holder.clone(),
            token: r.token,
            released: r.released,
        };
        match &self.kind {
            Kind::Inspect => {
                let free = is_free(&cx.cfg, &record, now, date);
                cx.inspected(now, etag, record, date, free)
            }
            Kind::Acquire if is_free(&cx.cfg, &record, now, date) || cx.claimed(&record) => {
                let fresh = cx.fresh_record(self.max_token_seen.saturating_add(1));
                CasSteps::retry_or_write(cx, PutCondition::IfMatch(etag), fresh)
            }
            Kind::Acquire => Next::Done(Ok(OpOutcome::Busy(Busy {
                holder: record.holder,
                token: record.token,
                expires_at: record.expires_at,
                etag,
                // Filled in by the engine (`Ctx::claim`).
                unsettled: None,
            }))),
            Kind::Renew(lease) | Kind::Release(lease) if etag == lease.etag || ours => {
                // Our previous write did not land and nothing else did (or
                // an earlier write of ours landed unseen): the same write
                // may be tried again, over the version now there.
                let released = matches!(self.kind, Kind::Release(_));
                let record = LeaseRecord {
                    released,
                    ..lease.record.clone()
                };
                CasSteps::retry_or_write(cx, PutCondition::IfMatch(etag), record)
            }
            Kind::Renew(_) => Next::Done(Ok(OpOutcome::Lost(taken(&record)))),
            Kind::Release(_) => Next::Done(Ok(OpOutcome::AlreadyLost(taken(&record)))),
            Kind::Break(req) if etag == req.etag => {
                let broken = LeaseRecord {
                    holder: record.holder.clone(),
                    session: record.session.clone(),
                    ..cx.broken_record(record.token)
                };
                CasSteps::retry_or_write(cx, PutCondition::IfMatch(etag), broken)
            }
            Kind::Break(_) => Next::Done(Err(LeaseError::Changed {
                current: Some(etag),
            })),
        }
    }
}

impl Steps for CasSteps {
    fn kind(&self) -> &Kind {
        &self.kind
    }

    fn first(&mut self, cx: &mut Ctx) -> Next {
        Next::Send(match &self.kind {
            Kind::Acquire | Kind::Inspect | Kind::Break(_) => CasSteps::read(cx),
            Kind::Renew(lease) => CasSteps::write(
                cx,
                PutCondition::IfMatch(lease.etag.clone()),
                lease.record.clone(),
            ),
            Kind::Release(lease) => CasSteps::write(
                cx,
                PutCondition::IfMatch(lease.etag.clone()),
                LeaseRecord {
                    released: true,
                    ..lease.record.clone()
                },
            ),
        })
    }

    fn give_back(&self, cx: &mut Ctx, lease: &Lease) -> Plan {
        let released = LeaseRecord {
            released: true,
            ..lease.record.clone()
        };
        CasSteps::write(cx, PutCondition::IfMatch(lease.etag.clone()), released)
    }

    /// A free record was just read: write over that version.
    fn resume(&mut self, cx: &mut Ctx, seen: &Observation) -> Plan {
        self.max_token_seen = seen.record.token;
        let record = cx.fresh_record(seen.record.token.saturating_add(1));
        CasSteps::write(cx, PutCondition::IfMatch(seen.etag.clone()), record)
    }

    fn reply(
        &mut self,
        cx: &mut Ctx,
        now: Now,
        _plan: &Plan,
        write: Option<usize>,
        date: StoreDate,
        reply: ReplyKind,
    ) -> Next {
        if let (true, Some(w)) = (variant!(cx.cfg, trusts_replies), write) {
            if matches!(
                reply,
                ReplyKind::ServerError { .. } | ReplyKind::Transport { .. }
            ) {
                // The unsafe shortcut: no re-read, no nonce check.
                return self.on_written(cx, w, Etag::new("unconfirmed"), false);
            }
        }
        match (reply, write) {
            (ReplyKind::Found { etag, body }, None) => self.on_found(cx, now, etag, &body, date),
            (ReplyKind::Missing, None) => self.on_missing(cx),
            (ReplyKind::Written { etag: Some(etag) }, Some(w)) => {
                self.on_written(cx, w, etag, true)
            }
            (ReplyKind::Listed { entries, next }, None) => match self.check.as_mut() {
                Some(check) => {
                    let acquired = OpOutcome::Acquired;
                    check.on_listed(cx, entries.into_iter().map(|e| e.key), next, acquired)
                }
                None => Next::Done(Err(LeaseError::Unexpected {
                    reply: "a listing nobody asked for".into(),
                })),
            },
            // No etag in the reply: learn it (and confirm the write) by reading.
            (kind @ ReplyKind::Written { etag: None }, Some(_))
            // 412, or 404 for If-Match on a vanished key: someone else wrote,
            // or a retried request of ours already applied. The read decides.
            | (kind @ (ReplyKind::PreconditionFailed | ReplyKind::Missing), Some(_))
            // Unknown outcome: the read decides.
            | (kind @ ReplyKind::Transport { .. }, Some(_)) => {
                let read = CasSteps::read(cx);
                cx.retry(&kind, read)
            }
            (kind @ (ReplyKind::Conflict | ReplyKind::ServerError { .. } | ReplyKind::Throttled { .. }), Some(_))
            | (kind @ (ReplyKind::ServerError { .. } | ReplyKind::Throttled { .. } | ReplyKind::Transport { .. }), None) => {
                let read = CasSteps::read(cx);
                cx.retry_later(now, &kind, read)
            }
            (kind, _) => Next::Done(Err(LeaseError::Unexpected { reply: summarize(&kind) })),
        }
    }
}

/// `expires_at` for a write sent now, and the local deadline it buys.
///
/// With `D` the latest store date (sent at local time `s`), a write sent
/// at `w` stamps `D + (w - s) + ttl`, and is trusted locally until
/// `w + ttl - resolution - drift·(ttl + w - s) - margin`: the store's
/// clock cannot have passed the stamp by then, whatever the offsets
/// between nodes (see the safety assumptions in docs/protocols.md).
pub(crate) fn stamp(
    cfg: &LeaseConfig,
    clock: Option<(StoreDate, Mono)>,
    now: Now,
) -> (UnixMillis, Mono) {
    if variant!(cfg, trusts_wall_clock) {
        return (now.wall + cfg.ttl, now.mono + cfg.ttl);
    }
    let (date, anchor) = clock.unwrap_or((StoreDate::local_wall(now.wall, cfg.max_skew), now.mono));
    let elapsed = now.mono - anchor;
    let expires_at = date.unix_ms + elapsed + cfg.ttl;
    let lost = if variant!(cfg, no_margins) {
        Duration::ZERO
    } else {
        Duration::from_millis(date.behind_ms) + cfg.drift_margin(elapsed)
    };
    let valid_until = (now.mono + cfg.ttl).saturating_sub(lost);
    (expires_at, valid_until)
}

/// Records the store date of `reply` (to a call sent at `sent`) as the
/// freshest anchor, or the local wall clock bounded by `max_skew` when the
/// reply has none; returns the date the reply is judged by.
pub(crate) fn note_date(
    cfg: &LeaseConfig,
    clock: &mut Option<(StoreDate, Mono)>,
    now: Now,
    sent: Mono,
    reply: &StoreReply,
) -> StoreDate {
    let (date, anchor) = match reply.date {
        Some(d) => (d, sent),
        None => (StoreDate::local_wall(now.wall, cfg.max_skew), now.mono),
    };
    // Replies arrive one at a time, so the newest is the freshest bound.
    *clock = Some((date, anchor));
    date
}

/// Whether `record`, read with a reply dated `date`, may be taken over.
pub(crate) fn is_free(cfg: &LeaseConfig, record: &LeaseRecord, now: Now, date: StoreDate) -> bool {
    if variant!(cfg, trusts_wall_clock) {
        record.is_free_at(now.wall)
    } else {
        record.is_free_at(date.earliest())
    }
}
