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
//! the caller as store calls.

use crate::config::{LeaseConfig, Protocol, Variant};
use crate::entropy::Entropy;
use crate::epoch::EpochSteps;
use crate::machine::{
    summarize, terminal_error, Busy, CallId, Lease, LeaseError, LostReason, Machine, Observation,
    OpOutcome, Output,
};
use crate::mutex::MutexSteps;
use crate::record::LeaseRecord;
use crate::retry::Retries;
use crate::steps::Engine;
use crate::store::{Etag, PutCondition, ReplyKind, StoreOp, StoreReply};
use crate::time::{Mono, Now, StoreDate, UnixMillis};
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
/// [create/delete mutex](crate::mutex). Every protocol answers with the same
/// [`OpOutcome`]s, so electors and adapters work with any of them.
#[derive(Clone, Debug)]
pub struct LeaseOp(Inner);

#[derive(Clone, Debug)]
enum Inner {
    Cas(CasOp),
    Epochs(Engine<EpochSteps>),
    Mutex(Engine<MutexSteps>),
}

impl LeaseOp {
    fn start(cfg: LeaseConfig, entropy: Entropy, kind: Kind) -> LeaseOp {
        LeaseOp(match cfg.protocol {
            Protocol::Cas => Inner::Cas(CasOp::start(cfg, entropy, kind)),
            Protocol::Epochs => Inner::Epochs(Engine::new(cfg, entropy, EpochSteps::new(kind))),
            Protocol::Mutex => Inner::Mutex(Engine::new(cfg, entropy, MutexSteps::new(kind))),
        })
    }

    /// Acquire the lease. CAS: 2 store calls when it is free, 1 when it is
    /// busy. Epochs: LIST + GET + PUT (+ deletes of old epochs). Mutex:
    /// GET + PUT (+ a conditional DELETE of a stale lock).
    pub fn acquire(cfg: LeaseConfig, entropy: Entropy) -> LeaseOp {
        LeaseOp::start(cfg, entropy, Kind::Acquire)
    }

    /// Acquire starting from a read the caller just made
    /// ([`OpOutcome::Inspected`]): when it shows the lease free, the first
    /// call is the write.
    pub fn acquire_from(cfg: LeaseConfig, entropy: Entropy, seen: &Observation) -> LeaseOp {
        LeaseOp(match cfg.protocol {
            Protocol::Cas => Inner::Cas(CasOp::acquire_from(cfg, entropy, seen)),
            Protocol::Epochs => Inner::Epochs(Engine::acquire_from(
                cfg,
                entropy,
                EpochSteps::new(Kind::Acquire),
                seen,
            )),
            Protocol::Mutex => Inner::Mutex(Engine::acquire_from(
                cfg,
                entropy,
                MutexSteps::new(Kind::Acquire),
                seen,
            )),
        })
    }

    /// Renew a held lease: CAS 1 store call; epochs 1 PUT and the delete of
    /// the previous epoch. The mutex cannot be renewed (an error).
    pub fn renew(cfg: LeaseConfig, entropy: Entropy, lease: Lease) -> LeaseOp {
        LeaseOp::start(cfg, entropy, Kind::Renew(lease))
    }

    /// Release a held lease: 1 store call.
    pub fn release(cfg: LeaseConfig, entropy: Entropy, lease: Lease) -> LeaseOp {
        LeaseOp::start(cfg, entropy, Kind::Release(lease))
    }

    /// Read and decode the lease object: 1 store call (epochs: LIST + GET).
    pub fn inspect(cfg: LeaseConfig, entropy: Entropy) -> LeaseOp {
        LeaseOp::start(cfg, entropy, Kind::Inspect)
    }

    /// Break the lease at the version the operator saw: 2 store calls
    /// (epochs: 3).
    pub fn break_lease(cfg: LeaseConfig, entropy: Entropy, request: BreakRequest) -> LeaseOp {
        LeaseOp::start(cfg, entropy, Kind::Break(request))
    }

    /// Continue call ids from `next` (an elector keeps ids unique across
    /// the operations it runs).
    pub(crate) fn with_ids_from(self, next: u64) -> LeaseOp {
        LeaseOp(match self.0 {
            Inner::Cas(mut op) => {
                op.next_id = next;
                Inner::Cas(op)
            }
            Inner::Epochs(e) => Inner::Epochs(e.with_ids_from(next)),
            Inner::Mutex(e) => Inner::Mutex(e.with_ids_from(next)),
        })
    }

    /// The id the next call will get.
    pub(crate) fn next_id(&self) -> u64 {
        match &self.0 {
            Inner::Cas(op) => op.next_id,
            Inner::Epochs(e) => e.next_id(),
            Inner::Mutex(e) => e.next_id(),
        }
    }
}

impl Machine for LeaseOp {
    type Outcome = Result<OpOutcome, LeaseError>;

    fn poll(&mut self, now: Now) -> Output<Self::Outcome> {
        match &mut self.0 {
            Inner::Cas(op) => op.poll(now),
            Inner::Epochs(e) => e.poll(now),
            Inner::Mutex(e) => e.poll(now),
        }
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        match &mut self.0 {
            Inner::Cas(op) => op.handle_reply(now, id, reply),
            Inner::Epochs(e) => e.handle_reply(now, id, reply),
            Inner::Mutex(e) => e.handle_reply(now, id, reply),
        }
    }
}

/// Which one-shot operation a machine runs.
#[derive(Clone, Debug)]
pub(crate) enum Kind {
    Acquire,
    Renew(Lease),
    Release(Lease),
    Inspect,
    Break(BreakRequest),
}

/// A write the op has sent, whose nonce identifies it in a later read.
#[derive(Clone, Debug)]
struct Write {
    record: LeaseRecord,
    sent: Mono,
    valid_until: Mono,
}

#[derive(Clone, Debug)]
enum Plan {
    Read,
    Write {
        condition: PutCondition,
        record: LeaseRecord,
    },
}

#[derive(Clone, Debug)]
enum State {
    Ready(Plan),
    InFlight {
        id: CallId,
        write: Option<usize>,
        sent: Mono,
        deadline: Mono,
    },
    Backoff {
        until: Mono,
        then: Plan,
    },
    Finished(Option<Result<OpOutcome, LeaseError>>),
}

/// The CAS-lease machine (see the module docs).
#[derive(Clone, Debug)]
struct CasOp {
    cfg: LeaseConfig,
    kind: Kind,
    entropy: Entropy,
    state: State,
    next_id: u64,
    retries: Retries,
    writes: Vec<Write>,
    session: Option<String>,
    clock: Option<(StoreDate, Mono)>,
    max_token_seen: u64,
}

impl CasOp {
    fn new(cfg: LeaseConfig, kind: Kind, entropy: Entropy, first: Plan) -> CasOp {
        let state = match cfg.validate() {
            Ok(()) => State::Ready(first),
            Err(e) => State::Finished(Some(Err(e.into()))),
        };
        let clock = match &kind {
            Kind::Renew(l) | Kind::Release(l) => Some(l.clock),
            _ => None,
        };
        CasOp {
            cfg,
            kind,
            entropy,
            state,
            next_id: 1,
            retries: Retries::default(),
            writes: Vec::new(),
            session: None,
            clock,
            max_token_seen: 0,
        }
    }

    fn acquire_from(cfg: LeaseConfig, entropy: Entropy, seen: &Observation) -> CasOp {
        let mut op = CasOp::new(cfg, Kind::Acquire, entropy, Plan::Read);
        if matches!(op.state, State::Ready(_)) && seen.free {
            op.clock = Some((seen.date, seen.read_at));
            op.max_token_seen = seen.record.token;
            let record = op.fresh_record(seen.record.token.saturating_add(1));
            op.state = State::Ready(Plan::Write {
                condition: PutCondition::IfMatch(seen.etag.clone()),
                record,
            });
        }
        op
    }

    fn start(cfg: LeaseConfig, entropy: Entropy, kind: Kind) -> CasOp {
        let first = match &kind {
            Kind::Acquire | Kind::Inspect | Kind::Break(_) => Plan::Read,
            Kind::Renew(lease) => Plan::Write {
                condition: PutCondition::IfMatch(lease.etag.clone()),
                record: lease.record.clone(),
            },
            Kind::Release(lease) => Plan::Write {
                condition: PutCondition::IfMatch(lease.etag.clone()),
                record: LeaseRecord {
                    released: true,
                    ..lease.record.clone()
                },
            },
        };
        CasOp::new(cfg, kind, entropy, first)
    }

    fn fresh_record(&mut self, token: u64) -> LeaseRecord {
        let session = match &self.session {
            Some(s) => s.clone(),
            None => {
                let s = self.entropy.id();
                self.session = Some(s.clone());
                s
            }
        };
        LeaseRecord {
            token,
            expires_at: UnixMillis(0),
            holder: self.cfg.holder.clone(),
            session,
            nonce: String::new(),
            acquired_at: None,
            ttl_ms: Some(self.cfg.ttl.as_millis() as u64),
            released: false,
            meta: self.cfg.meta.clone(),
        }
    }

    fn finish(&mut self, outcome: Result<OpOutcome, LeaseError>) {
        self.state = State::Finished(Some(outcome));
    }

    /// A Lease from a write of ours that landed with `etag`.
    fn lease_from(&self, write: usize, etag: Etag) -> Lease {
        let w = &self.writes[write];
        Lease {
            key: self.cfg.key.clone(),
            token: w.record.token,
            session: w.record.session.clone(),
            etag,
            record: w.record.clone(),
            valid_until: w.valid_until,
            written_at: w.sent,
            clock: self
                .clock
                .unwrap_or((StoreDate::exact(UnixMillis(0)), w.sent)),
        }
    }

    fn our_write(&self, record: &LeaseRecord) -> Option<usize> {
        if record.nonce.is_empty() {
            return None;
        }
        self.writes
            .iter()
            .position(|w| w.record.nonce == record.nonce)
    }

    /// Counts one retry; false (and finished) when the budget is spent.
    fn spend_attempt(&mut self, last: &ReplyKind) -> bool {
        match self.retries.spend(&self.cfg, last) {
            Ok(()) => true,
            Err(e) => {
                self.finish(Err(e));
                false
            }
        }
    }

    fn local_deadline(&self) -> Option<Mono> {
        match &self.kind {
            Kind::Renew(l) => Some(l.valid_until),
            _ => None,
        }
    }

    /// Starts the planned call at `now`.
    fn send(&mut self, now: Now, plan: Plan) -> Output<Result<OpOutcome, LeaseError>> {
        let id = CallId(self.next_id);
        self.next_id += 1;
        let deadline = now.mono + self.cfg.request_timeout;
        let key = self.cfg.key.clone();
        match plan {
            Plan::Read => {
                self.state = State::InFlight {
                    id,
                    write: None,
                    sent: now.mono,
                    deadline,
                };
                Output::Call(id, StoreOp::Get { key })
            }
            Plan::Write {
                condition,
                mut record,
            } => {
                let (expires_at, valid_until) = self.stamp(now);
                record.nonce = self.entropy.id();
                record.expires_at = if record.released {
                    // A released record is expired for simple clients too.
                    self.clock
                        .map(|(d, _)| d.unix_ms)
                        .unwrap_or(UnixMillis(0))
                        .min(record.expires_at)
                } else {
                    expires_at
                };
                if matches!(self.kind, Kind::Acquire) {
                    // The store time the write was sent at, as estimated for the stamp.
                    record.acquired_at = Some(UnixMillis(
                        expires_at.0.saturating_sub(self.cfg.ttl.as_millis() as u64),
                    ));
                }
                let body = record.encode();
                self.writes.push(Write {
                    record,
                    sent: now.mono,
                    valid_until,
                });
                self.state = State::InFlight {
                    id,
                    write: Some(self.writes.len() - 1),
                    sent: now.mono,
                    deadline,
                };
                Output::Call(
                    id,
                    StoreOp::Put {
                        key,
                        body,
                        condition,
                    },
                )
            }
        }
    }

    fn stamp(&self, now: Now) -> (UnixMillis, Mono) {
        stamp(&self.cfg, self.clock, now)
    }

    fn note_date(&mut self, now: Now, sent: Mono, reply: &StoreReply) -> StoreDate {
        note_date(&self.cfg, &mut self.clock, now, sent, reply)
    }

    fn on_reply(&mut self, now: Now, write: Option<usize>, sent: Mono, reply: StoreReply) {
        let date = self.note_date(now, sent, &reply);
        if let Some(e) = terminal_error(&reply.kind) {
            return self.finish(Err(e));
        }
        if let (Variant::TrustReplies, Some(w)) = (self.cfg.variant, write) {
            if matches!(
                reply.kind,
                ReplyKind::ServerError { .. } | ReplyKind::Transport { .. }
            ) {
                // The unsafe shortcut: no re-read, no nonce check.
                return self.on_written(w, Etag::new("unconfirmed"));
            }
        }
        match (reply.kind, write) {
            (ReplyKind::Found { etag, body }, None) => self.on_found(now, etag, &body, date),
            (ReplyKind::Missing, None) => self.on_missing(),
            (ReplyKind::Written { etag: Some(etag) }, Some(w)) => self.on_written(w, etag),
            // No etag in the reply: learn it (and confirm the write) by reading.
            (kind @ ReplyKind::Written { etag: None }, Some(_))
            // 412, or 404 for If-Match on a vanished key: someone else wrote,
            // or a retried request of ours already applied. The read decides.
            | (kind @ (ReplyKind::PreconditionFailed | ReplyKind::Missing), Some(_))
            // Unknown outcome: the read decides.
            | (kind @ ReplyKind::Transport { .. }, Some(_)) => {
                if self.spend_attempt(&kind) {
                    self.state = State::Ready(Plan::Read);
                }
            }
            (kind @ (ReplyKind::Conflict | ReplyKind::ServerError { .. } | ReplyKind::Throttled { .. }), Some(_)) => {
                self.retry_later(now, kind, Plan::Read)
            }
            (kind @ (ReplyKind::ServerError { .. } | ReplyKind::Throttled { .. } | ReplyKind::Transport { .. }), None) => {
                self.retry_later(now, kind, Plan::Read)
            }
            (kind, _) => self.finish(Err(LeaseError::Unexpected { reply: summarize(&kind) })),
        }
    }

    fn retry_later(&mut self, now: Now, kind: ReplyKind, then: Plan) {
        if self.spend_attempt(&kind) {
            let until = self
                .retries
                .backoff_until(&self.cfg, &mut self.entropy, now.mono, &kind);
            self.state = State::Backoff { until, then };
        }
    }

    fn on_written(&mut self, write: usize, etag: Etag) {
        let outcome = match &self.kind {
            Kind::Acquire => OpOutcome::Acquired(self.lease_from(write, etag)),
            Kind::Renew(_) => OpOutcome::Renewed(self.lease_from(write, etag)),
            Kind::Release(_) => OpOutcome::Released {
                token: self.writes[write].record.token,
            },
            Kind::Break(_) => OpOutcome::Broken {
                token: self.writes[write].record.token,
            },
            Kind::Inspect => OpOutcome::Inspected(None),
        };
        self.finish(Ok(outcome));
    }

    fn on_missing(&mut self) {
        match &self.kind {
            Kind::Acquire => {
                // Continue above any token seen during this operation: a
                // deleted object must not hand out a token twice to us.
                let record = self.fresh_record(self.max_token_seen.saturating_add(1));
                self.retry_or_write(PutCondition::IfAbsent, record);
            }
            Kind::Inspect => self.finish(Ok(OpOutcome::Inspected(None))),
            Kind::Renew(_) => self.finish(Ok(OpOutcome::Lost(LostReason::Vanished))),
            Kind::Release(_) => self.finish(Ok(OpOutcome::AlreadyLost(LostReason::Vanished))),
            Kind::Break(_) => self.finish(Err(LeaseError::Changed { current: None })),
        }
    }

    /// Plans a write; after the first, each one spends an attempt.
    fn retry_or_write(&mut self, condition: PutCondition, record: LeaseRecord) {
        if !self.writes.is_empty() && !self.spend_attempt(&ReplyKind::PreconditionFailed) {
            return;
        }
        self.state = State::Ready(Plan::Write { condition, record });
    }

    /// Whether a record read with a reply dated `date` may be taken over.
    fn is_free(&self, record: &LeaseRecord, now: Now, date: StoreDate) -> bool {
        is_free(&self.cfg, record, now, date)
    }

    fn on_found(&mut self, now: Now, etag: Etag, body: &[u8], date: StoreDate) {
        let record = match LeaseRecord::decode(body) {
            Ok(r) => r,
            Err(error) => {
                return match &self.kind {
                    Kind::Renew(_) => self.finish(Ok(OpOutcome::Lost(LostReason::Overwritten))),
                    Kind::Release(_) => {
                        self.finish(Ok(OpOutcome::AlreadyLost(LostReason::Overwritten)))
                    }
                    Kind::Break(req) if req.etag == etag && req.token_floor.is_some() => {
                        let token = req.token_floor.unwrap_or_default();
                        let record = self.broken_record(token);
                        self.retry_or_write(PutCondition::IfMatch(etag), record)
                    }
                    _ => self.finish(Err(LeaseError::Unreadable { etag, error })),
                };
            }
        };
        self.max_token_seen = self.max_token_seen.max(record.token);
        if let Some(w) = self.our_write(&record) {
            return self.on_written(w, etag);
        }
        let taken = |r: &LeaseRecord| LostReason::TakenBy {
            holder: r.holder.clone(),
            token: r.token,
            released: r.released,
        };
        match &self.kind {
            Kind::Inspect => {
                let free = self.is_free(&record, now, date);
                let seen = Observation {
                    etag,
                    record,
                    date,
                    read_at: now.mono,
                    free,
                };
                self.finish(Ok(OpOutcome::Inspected(Some(seen))))
            }
            Kind::Acquire => {
                if self.is_free(&record, now, date) {
                    let fresh = self.fresh_record(self.max_token_seen.saturating_add(1));
                    self.retry_or_write(PutCondition::IfMatch(etag), fresh)
                } else {
                    let busy = Busy {
                        holder: record.holder,
                        token: record.token,
                        expires_at: record.expires_at,
                        etag,
                    };
                    self.finish(Ok(OpOutcome::Busy(busy)))
                }
            }
            Kind::Renew(lease) | Kind::Release(lease) => {
                if etag == lease.etag {
                    // Our previous write did not land and nothing else did:
                    // the same write may be tried again.
                    let record = lease.record.clone();
                    let released = matches!(self.kind, Kind::Release(_));
                    let record = LeaseRecord { released, ..record };
                    self.retry_or_write(PutCondition::IfMatch(etag), record)
                } else if matches!(self.kind, Kind::Renew(_)) {
                    self.finish(Ok(OpOutcome::Lost(taken(&record))))
                } else {
                    self.finish(Ok(OpOutcome::AlreadyLost(taken(&record))))
                }
            }
            Kind::Break(req) => {
                if etag == req.etag {
                    let mut broken = self.broken_record(record.token);
                    broken.holder = record.holder.clone();
                    broken.session = record.session.clone();
                    self.retry_or_write(PutCondition::IfMatch(etag), broken)
                } else {
                    self.finish(Err(LeaseError::Changed {
                        current: Some(etag),
                    }))
                }
            }
        }
    }

    fn broken_record(&self, token: u64) -> LeaseRecord {
        let mut meta = self.cfg.meta.clone();
        meta.insert("broken_by".into(), self.cfg.holder.clone());
        LeaseRecord {
            token,
            expires_at: UnixMillis(u64::MAX),
            holder: String::new(),
            session: String::new(),
            nonce: String::new(),
            acquired_at: None,
            ttl_ms: None,
            released: true,
            meta,
        }
    }
}

impl Machine for CasOp {
    type Outcome = Result<OpOutcome, LeaseError>;

    fn poll(&mut self, now: Now) -> Output<Self::Outcome> {
        loop {
            if let State::Finished(out) = &mut self.state {
                return match out.take() {
                    Some(o) => Output::Done(o),
                    None => Output::Wait(Mono(u64::MAX)),
                };
            }
            if let Some(deadline) = self.local_deadline() {
                if now.mono >= deadline {
                    self.finish(Ok(OpOutcome::Lost(LostReason::Expired)));
                    continue;
                }
            }
            let lease_deadline = self.local_deadline().unwrap_or(Mono(u64::MAX));
            match std::mem::replace(&mut self.state, State::Finished(None)) {
                State::Ready(plan) => return self.send(now, plan),
                State::InFlight {
                    id,
                    write,
                    sent,
                    deadline,
                } => {
                    if now.mono >= deadline {
                        let reply = StoreReply::transport(
                            crate::store::TransportErrorKind::Timeout,
                            format!("no reply within {:?}", self.cfg.request_timeout),
                        );
                        self.on_reply(now, write, sent, reply);
                        continue;
                    }
                    self.state = State::InFlight {
                        id,
                        write,
                        sent,
                        deadline,
                    };
                    return Output::Wait(deadline.min(lease_deadline));
                }
                State::Backoff { until, then } => {
                    if now.mono >= until {
                        self.state = State::Ready(then);
                        continue;
                    }
                    self.state = State::Backoff { until, then };
                    return Output::Wait(until.min(lease_deadline));
                }
                finished @ State::Finished(_) => self.state = finished,
            }
        }
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        if let State::InFlight {
            id: expected,
            write,
            sent,
            ..
        } = self.state
        {
            if expected == id {
                if let Some(deadline) = self.local_deadline() {
                    if now.mono >= deadline {
                        // Confirmation came too late: the lease already
                        // counted as lost locally.
                        return self.finish(Ok(OpOutcome::Lost(LostReason::Expired)));
                    }
                }
                self.state = State::Finished(None);
                self.on_reply(now, write, sent, reply);
            }
        }
    }
}

/// `expires_at` for a write sent now, and the local deadline it buys.
///
/// With `D` the latest store date (sent at local time `s`), a write sent
/// at `w` stamps `D + (w - s) + ttl`, and is trusted locally until
/// `w + ttl - resolution - drift·(ttl + w - s) - margin`: the store's
/// clock cannot have passed the stamp by then, whatever the offsets
/// between nodes (see the README's safety section).
pub(crate) fn stamp(
    cfg: &LeaseConfig,
    clock: Option<(StoreDate, Mono)>,
    now: Now,
) -> (UnixMillis, Mono) {
    if cfg.variant == Variant::NaiveClock {
        return (now.wall + cfg.ttl, now.mono + cfg.ttl);
    }
    let (date, anchor) = clock.unwrap_or((StoreDate::local_wall(now.wall, cfg.max_skew), now.mono));
    let elapsed = now.mono - anchor;
    let expires_at = date.unix_ms + elapsed + cfg.ttl;
    let lost = match cfg.variant {
        Variant::NoMargins => Duration::ZERO,
        _ => Duration::from_millis(date.behind_ms) + cfg.drift_margin(elapsed),
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
    match cfg.variant {
        Variant::NaiveClock => record.is_free_at(now.wall),
        _ => record.is_free_at(date.earliest()),
    }
}
