//! The CAS lease: documented in the layer's docs (`protocol/mod.rs`, "The CAS lease").

use crate::protocol::engine::{break_floor, unreadable, Answer, Ctx, Kind, Next, Plan, Steps};
use crate::protocol::machine::OpOutcome;
use crate::protocol::outcome::{Busy, Lease, LeaseError, LostReason, Observation};
use crate::protocol::validity::{courtesy_until, handoff_until, is_free};
use crate::record::{LeaseRecord, RecordError};
use crate::store::{Etag, PutCondition, ReplyKind};
use crate::time::{Now, StoreDate};

/// The CAS lease's decisions (see the module docs), run by the shared
/// [`Engine`].
#[derive(Clone, Debug)]
pub(crate) struct CasSteps {
    kind: Kind,
    /// Highest token read during this operation.
    max_token_seen: u64,
    /// Our last write was refused (412, or 429 from a store that limits
    /// writes per object, which another writer's write provokes): the
    /// version it was sent over.
    refused_over: Option<Etag>,
    /// A key owned under a session was read held: the read (its version,
    /// record and date) waits on the read of that session's record, which
    /// says whether the key is still held.
    owned: Option<(Etag, LeaseRecord, StoreDate)>,
}

impl CasSteps {
    pub(crate) fn new(kind: Kind) -> CasSteps {
        CasSteps {
            kind,
            max_token_seen: 0,
            refused_over: None,
            owned: None,
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
            cx.retry(
                "a write again, over the record read after our last one",
                plan,
            )
        }
    }

    /// Our write landed. No check for another protocol follows: an epochs
    /// client marks the key before its first epoch, so our create would
    /// have been refused, or our read found its marker (`docs/design.md` §7).
    fn on_written(&mut self, cx: &mut Ctx, write: usize, etag: Etag) -> Next {
        let token = cx.writes[write].record.token;
        Next::Done(Ok(match &self.kind {
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
            Kind::Break(_) => Next::Done(Err(LeaseError::Changed {
                current: None,
                unsettled: Box::default(),
            })),
        }
    }

    /// A free record (or one of ours) read at version `etag`: the write
    /// that takes it over, with the next token.
    fn take_over(
        &mut self,
        cx: &mut Ctx,
        now: Now,
        etag: Etag,
        record: &LeaseRecord,
        date: StoreDate,
    ) -> Next {
        let token = record.next_token(self.max_token_seen.saturating_add(1), date);
        let fresh = cx.fresh_record(token);
        // A race lost to another writer (our write refused, and
        // the key read back as a version someone else wrote, free
        // again): their progress, not a failure of ours, so it
        // spends no retry; the operation's deadline still bounds
        // the attempts. Contenders under load otherwise gave up.
        let lost_race = self
            .refused_over
            .take()
            .is_some_and(|over| over != etag && !cx.claimed(record));
        let plan = CasSteps::write(cx, PutCondition::IfMatch(etag), fresh);
        let next = if lost_race || cx.writes.is_empty() {
            Next::Send(plan)
        } else {
            cx.retry("a write again, over the version read back", plan)
        };
        if mutant!(ForeignTokenFromDateAlone) {
            return next;
        }
        Self::not_before_floor(cx, now, record, date, next)
    }

    /// `next`, a write over `record` (read with a reply dated `date`), sent
    /// no sooner than the store's clock is past the token floor of a
    /// simple client's record (see `LeaseRecord::next_token`); at once over
    /// one of ours.
    fn not_before_floor(
        cx: &Ctx,
        now: Now,
        record: &LeaseRecord,
        date: StoreDate,
        next: Next,
    ) -> Next {
        let wait = record.foreign_floor_passed_after(date, cx.cfg.drift_rate, cx.cfg.margin);
        let read_sent = cx.clock.map_or(now.mono, |(_, sent)| sent);
        let not_before = read_sent + wait;
        match next {
            _ if wait.is_zero() => next,
            Next::Send(plan) => Next::At(not_before, plan),
            Next::At(at, plan) => Next::At(at.max(not_before), plan),
            done => done,
        }
    }

    /// An unreadable object at the key: replaced by an operator's break
    /// aimed at exactly that version, otherwise what it means for the
    /// operation.
    fn on_unreadable(&mut self, cx: &mut Ctx, etag: Etag, error: RecordError) -> Next {
        match break_floor(&self.kind, &etag) {
            Some(floor) => {
                let record = cx.broken_record(floor);
                CasSteps::retry_or_write(cx, PutCondition::IfMatch(etag), record)
            }
            None => unreadable(&self.kind, etag, error),
        }
    }

    /// A record read at the key, judged per operation: one match over the
    /// operations and what the record says, so each case can be read
    /// against the others.
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
            Err(error) => return self.on_unreadable(cx, etag, error),
        };
        self.max_token_seen = self.max_token_seen.max(record.token);
        if let Some(w) = cx.our_write(&record) {
            return self.on_written(cx, w, etag);
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
                lease.same_session(&record) && record.token == lease.token
            }
            _ => false,
        };
        let mut record = record;
        // (Before fair waiting's courtesy: a released owned record needs
        // no session read.)
        let owned = (!record.released)
            .then(|| record.owned_by.clone())
            .flatten();
        let grace = courtesy_until(&cx.cfg, &record, date)
            .or_else(|| handoff_until(&cx.cfg, &record, date));
        if let (Kind::Acquire, Some(until)) = (&self.kind, grace) {
            // Fair waiting: our own release is left to the waiters a
            // while, judged as a live lease until then; so is a release
            // handed to another contender, for a grace.
            record.released = false;
            record.expires_at = until;
        }
        if let (Kind::Acquire | Kind::Inspect, Some(by)) = (&self.kind, &owned) {
            // Owned under the very term this acquisition writes for (an
            // earlier write of this session's whose reply was lost): ours
            // to take again.
            let this_term = matches!(self.kind, Kind::Acquire)
                && cx.cfg.owned_by.as_ref() == Some(by)
                && record.holder == cx.cfg.holder;
            if this_term {
                record.released = true;
            }
            // Held while its session is: that record decides, not this
            // one's expiry (`docs/protocols.md`, "Sessions").
            if !record.released && !cx.claimed(&record) && !mutant!(OwnedIgnoresSession) {
                let read = Plan::Get(by.key.clone());
                self.owned = Some((etag, record, date));
                return Next::Send(read);
            }
        }
        self.judged(cx, now, etag, record, date, ours)
    }

    /// The operation's next step on a record judged by its own fields (an
    /// owned key's by its session: [`CasSteps::on_session`]).
    fn judged(
        &mut self,
        cx: &mut Ctx,
        now: Now,
        etag: Etag,
        record: LeaseRecord,
        date: StoreDate,
        ours: bool,
    ) -> Next {
        match &self.kind {
            Kind::Inspect => {
                let free = is_free(&cx.cfg, &record, now, date);
                cx.inspected(now, etag, record, date, free)
            }
            Kind::Acquire if is_free(&cx.cfg, &record, now, date) || cx.claimed(&record) => {
                self.take_over(cx, now, etag, &record, date)
            }
            Kind::Acquire => Next::Done(Ok(OpOutcome::Busy(Busy::held_by(record, etag)))),
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
            Kind::Renew(_) => Next::Done(Ok(OpOutcome::Lost(LostReason::taken_by(&record)))),
            Kind::Release(_) => {
                Next::Done(Ok(OpOutcome::AlreadyLost(LostReason::taken_by(&record))))
            }
            Kind::Break(req) if etag == req.etag => {
                // The token kept. A simple client's may be anything: the
                // released record of ours the break leaves, whose token the
                // next acquisition trusts, keeps the floor a takeover would
                // draw, and waits for it as a takeover does (neither
                // changes anything over a record of ours).
                let keep = mutant!(BreakKeepsForeignToken);
                let token = match keep {
                    true => record.token,
                    false => record.next_token(record.token, date),
                };
                let broken = cx.broken_of(&record, token);
                let next = CasSteps::retry_or_write(cx, PutCondition::IfMatch(etag), broken);
                match keep {
                    true => next,
                    false => Self::not_before_floor(cx, now, &record, date, next),
                }
            }
            Kind::Break(_) => Next::Done(Err(LeaseError::Changed {
                current: Some(etag),
                unsettled: Box::default(),
            })),
        }
    }
}

impl CasSteps {
    /// The session record an owned key names, read after the key
    /// (`session`: its body, `None` when there is none) with a reply dated
    /// `session_date`. The key is free when that term is over: the record
    /// gone, at another token, released, or expired by the store's clock
    /// at this read. Its holder's local deadline for the term has then
    /// passed, and no renewal can bring the term back (one confirmed after
    /// that deadline is given back). Otherwise it is held until the
    /// session's expiry, which stands for the key's own.
    fn on_session(
        &mut self,
        cx: &mut Ctx,
        now: Now,
        session: Option<&[u8]>,
        session_date: StoreDate,
    ) -> Next {
        let Some((etag, mut record, date)) = self.owned.take() else {
            return Next::Done(Err(LeaseError::unexpected(&ReplyKind::Missing)));
        };
        let Some(by) = record.owned_by.clone() else {
            return self.judged(cx, now, etag, record, date, false);
        };
        let term = session.map(LeaseRecord::decode);
        let over = match &term {
            None => true,
            Some(Ok(s)) => s.token != by.token || is_free(&cx.cfg, s, now, session_date),
            // An unreadable session record cannot say the term is over:
            // busy for a ttl from this read, whatever the key's own stamp.
            Some(Err(_)) => false,
        };
        let expires_at = match &term {
            Some(Ok(s)) => s.expires_at,
            _ => session_date.unix_ms + cx.cfg.ttl,
        };
        // Judged by the session read's date, whose send time is the
        // client's latest anchor now (a stamp or an observation pairs the
        // two).
        if let Kind::Inspect = self.kind {
            // The record as stored, with the session's expiry; free as the
            // session says.
            if !over {
                record.expires_at = expires_at;
            }
            return cx.inspected(now, etag, record, session_date, over);
        }
        if over {
            // Free: judged as released from here on (the write that takes
            // it over goes to the key, over the version read).
            record.released = true;
        } else {
            record.expires_at = expires_at;
        }
        self.judged(cx, now, etag, record, session_date, false)
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

    /// A free record was just read: write over that version. A simple
    /// client's is read again instead: its takeover waits out the token's
    /// floor (see `on_found`), which a plan sent at once cannot.
    fn resume(&mut self, cx: &mut Ctx, seen: &Observation) -> Plan {
        if seen.record.is_foreign() && !mutant!(ForeignTokenFromDateAlone) {
            return CasSteps::read(cx);
        }
        self.max_token_seen = seen.record.token;
        let token = seen
            .record
            .next_token(seen.record.token.saturating_add(1), seen.date);
        let record = cx.fresh_record(token);
        CasSteps::write(cx, PutCondition::IfMatch(seen.etag.clone()), record)
    }

    fn resume_absent(&mut self, cx: &mut Ctx) -> Option<Plan> {
        let record = cx.fresh_record(1);
        Some(CasSteps::write(cx, PutCondition::IfAbsent, record))
    }

    fn reply(&mut self, cx: &mut Ctx, now: Now, answer: Answer<'_>) -> Next {
        let (plan, write, date, reply) = answer.parts();
        if let (true, Some(w)) = (variant!(cx.cfg, trusts_replies), write) {
            if reply.is_ambiguous() {
                // The unsafe shortcut: no re-read, no nonce check.
                return self.on_written(cx, w, Etag::new("unconfirmed"));
            }
        }
        let session_read = match (&self.owned, plan) {
            (Some((_, record, _)), Plan::Get(key)) => {
                record.owned_by.as_ref().is_some_and(|by| by.key == *key)
            }
            _ => false,
        };
        match (reply, write) {
            (ReplyKind::Found { body, .. }, None) if session_read => {
                self.on_session(cx, now, Some(&body), date)
            }
            (ReplyKind::Missing, None) if session_read => self.on_session(cx, now, None, date),
            (ReplyKind::Found { etag, body }, None) => self.on_found(cx, now, etag, &body, date),
            (ReplyKind::Missing, None) => self.on_missing(cx),
            (ReplyKind::Written { etag: Some(etag) }, Some(w)) => self.on_written(cx, w, etag),
            // No etag in the reply: learn it (and confirm the write) by reading.
            (kind @ ReplyKind::Written { etag: None }, Some(_))
            // 412, or 404 for If-Match on a vanished key: someone else wrote,
            // or a retried request of ours already applied. The read decides.
            | (kind @ (ReplyKind::PreconditionFailed | ReplyKind::Missing), Some(_))
            // Unknown outcome: the read decides.
            | (kind @ ReplyKind::Transport { .. }, Some(_)) => {
                self.refused_over = refused_over(&kind, plan);
                let read = CasSteps::read(cx);
                cx.retry(&kind, read)
            }
            (kind @ (ReplyKind::Conflict | ReplyKind::ServerError { .. } | ReplyKind::Throttled { .. }), Some(_))
            | (kind @ (ReplyKind::ServerError { .. } | ReplyKind::Throttled { .. } | ReplyKind::Transport { .. }), None) => {
                // A failed read of an owned key's session starts over at
                // the key.
                self.owned = None;
                // A 429 on a write: the version read back tells whether
                // another writer's write provoked it (R2's and GCS's limit
                // of about one write a second per object).
                // (A failed read keeps what the write before it left.)
                if let (ReplyKind::Throttled { .. }, Some(_)) = (&kind, write) {
                    if !mutant!(ThrottleAlwaysSpends) {
                        self.refused_over = refused_over(&kind, plan);
                    }
                }
                let read = CasSteps::read(cx);
                cx.retry_later(now, &kind, read)
            }
            (kind, _) => Next::Done(Err(LeaseError::unexpected(&kind))),
        }
    }
}

/// The version a refused conditional write (`If-Match`) was sent over.
fn refused_over(kind: &ReplyKind, plan: &Plan) -> Option<Etag> {
    match (kind, plan) {
        (
            ReplyKind::PreconditionFailed | ReplyKind::Throttled { .. },
            Plan::Write {
                condition: PutCondition::IfMatch(over),
                ..
            },
        ) => Some(over.clone()),
        _ => None,
    }
}
