//! The create-delete mutex: documented in the layer's docs (`protocol/mod.rs`, "The create-delete mutex").

use crate::config::{ConfigError, Protocol};
use crate::protocol::engine::Kind;
use crate::protocol::engine::{break_floor, unreadable, Answer, Ctx, Next, Plan, Steps};
use crate::protocol::machine::OpOutcome;
use crate::protocol::outcome::{Busy, Lease, LeaseError, LostReason, Observation};
use crate::protocol::validity::is_free;
use crate::record::LeaseRecord;
use crate::store::{Etag, PutCondition, ReplyKind};
use crate::time::{Now, StoreDate};

/// The mutex protocol's decisions (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct MutexSteps {
    kind: Kind,
    /// Token of the newest lock seen (a broken predecessor).
    max_seen: u64,
    /// A delete of ours had an unknown outcome: a missing lock may be its work.
    deleted_maybe: bool,
    /// Release: our lock is deleted; waiting out late creates of ours.
    watching: bool,
    /// Release: what to report once the wait for late creates is over.
    after_watch: Option<OpOutcome>,
}

impl MutexSteps {
    pub(crate) fn new(kind: Kind) -> MutexSteps {
        MutexSteps {
            kind,
            max_seen: 0,
            deleted_maybe: false,
            watching: false,
            after_watch: None,
        }
    }

    /// Our create landed as `etag`: the lock is ours. No check for another
    /// protocol follows: an epochs client marks the key before its first
    /// epoch, so the create would have been refused (`docs/design.md` §7).
    fn created(&mut self, cx: &mut Ctx, write: usize, etag: Etag) -> Next {
        // Another create of ours is unanswered and the lock does not say so
        // (it was sent after this one, which won): rewrite the lock marked.
        // The rewrite's expiry is later than that create's, as the bound a
        // release from another process waits out needs.
        let unmarked = !cx.writes[write].record.strays
            && (cx
                .writes
                .iter()
                .enumerate()
                .any(|(i, w)| i != write && !w.answered && w.created && w.key == cx.cfg.key)
                || cx.claims_until(&cx.cfg.key).is_some());
        if unmarked && !mutant!(IgnoreStrays) {
            let record = LeaseRecord {
                strays: true,
                ..cx.writes[write].record.clone()
            };
            return Next::Send(Plan::Write {
                key: cx.cfg.key.clone(),
                condition: PutCondition::IfMatch(etag),
                record,
            });
        }
        Next::Done(Ok(OpOutcome::Acquired(cx.lease_from(write, etag))))
    }

    /// Our lock is gone (or may be: a delete of ours with no clear
    /// answer, and another's lock or none there now): `outcome`, but only
    /// once no create of ours can still land.
    fn released(&mut self, cx: &Ctx, now: Now, lease: &Lease, outcome: OpOutcome) -> Next {
        match lease.strays_until {
            Some(until) if now.mono < until && !self.watching && !mutant!(IgnoreStrays) => {
                self.watching = true;
                self.after_watch = Some(outcome);
                Next::At(until, Plan::Get(cx.cfg.key.clone()))
            }
            _ => Next::Done(Ok(self.after_watch.take().unwrap_or(outcome))),
        }
    }

    fn create(&self, cx: &mut Ctx, date: StoreDate) -> Next {
        let token = self.max_seen.saturating_add(1).max(date.unix_ms.0);
        let mut record = cx.fresh_record(token);
        // An earlier create of ours with no answer may still land (this
        // operation's, or an earlier one's handed over as a claim): say so,
        // for a release made from another process (see `Lease::resume`).
        record.strays = cx
            .writes
            .iter()
            .any(|w| !w.answered && w.created && w.key == cx.cfg.key)
            || cx.claims_until(&cx.cfg.key).is_some();
        Next::Send(Plan::Write {
            key: cx.cfg.key.clone(),
            condition: PutCondition::IfAbsent,
            record,
        })
    }

    fn delete(cx: &Ctx, etag: Etag) -> Plan {
        Plan::Delete {
            key: cx.cfg.key.clone(),
            if_match: Some(etag),
        }
    }

    /// A lock read at the key, judged per operation: one match over the
    /// operations and what the lock says, so each case can be read against
    /// the others.
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
                        self.max_seen = floor;
                        Next::Send(Self::delete(cx, etag))
                    }
                    None => unreadable(&self.kind, etag, error),
                };
            }
        };
        self.max_seen = self.max_seen.max(record.token);
        if let Some(w) = cx.our_write(&record) {
            if matches!(self.kind, Kind::Acquire) {
                return self.created(cx, w, etag);
            }
        }
        if !matches!(self.kind, Kind::Inspect) {
            if let Some(e) = cx.mismatch(&record) {
                return Next::Done(Err(e));
            }
        }
        let free = is_free(&cx.cfg, &record, now, date);
        let ours = match &self.kind {
            Kind::Release(lease) => late_create_of(lease, &record),
            _ => false,
        };
        match &self.kind {
            Kind::Inspect => cx.inspected(now, etag, record, date, free),
            Kind::Acquire if free || cx.claimed(&record) => Next::Send(Self::delete(cx, etag)),
            Kind::Acquire => Next::Done(Ok(OpOutcome::Busy(Busy::held_by(record, etag)))),
            // Our delete's outcome was unknown and the lock is unchanged,
            // or a late create of ours landed: delete that version.
            Kind::Release(lease) if lease.etag == etag || ours => {
                let plan = Self::delete(cx, etag);
                cx.retry("a delete again: our last one's outcome is unknown, or a late create of ours landed", plan)
            }
            // Waiting out our late creates, we found another's lock.
            Kind::Release(lease) if self.watching => Next::Done(Ok(self
                .after_watch
                .take()
                .unwrap_or(OpOutcome::Released { token: lease.token }))),
            Kind::Release(lease) if cx.release_unclear() => {
                // Another's lock, and a delete of ours went unanswered: it
                // may be what freed the lock, so a late create of ours
                // could land once that lock goes too. Wait those out; the
                // engine then says released (or unknown, for a delete sent
                // at the deadline).
                let lease = lease.clone();
                let taken = OpOutcome::AlreadyLost(LostReason::taken_by(&record));
                self.released(cx, now, &lease, taken)
            }
            Kind::Release(_) | Kind::Renew(_) => {
                Next::Done(Ok(OpOutcome::AlreadyLost(LostReason::taken_by(&record))))
            }
            Kind::Break(req) if req.etag == etag => Next::Send(Self::delete(cx, etag)),
            Kind::Break(_) => Next::Done(Err(LeaseError::Changed {
                current: Some(etag),
                unsettled: Box::default(),
            })),
        }
    }

    /// The lock is gone (our delete applied, or it never existed).
    fn on_gone(&mut self, cx: &mut Ctx, now: Now, date: StoreDate, deleted_by_us: bool) -> Next {
        match &self.kind {
            Kind::Acquire => self.create(cx, date),
            Kind::Inspect => Next::Done(Ok(OpOutcome::Inspected(None))),
            Kind::Release(lease) if deleted_by_us || self.watching || cx.release_unclear() => {
                let lease = lease.clone();
                let token = lease.token;
                self.released(cx, now, &lease, OpOutcome::Released { token })
            }
            Kind::Release(_) | Kind::Renew(_) => {
                Next::Done(Ok(OpOutcome::AlreadyLost(LostReason::Vanished)))
            }
            Kind::Break(_) if deleted_by_us => Next::Done(Ok(OpOutcome::Broken {
                token: self.max_seen,
            })),
            Kind::Break(_) => Next::Done(Err(LeaseError::Changed {
                current: None,
                unsettled: Box::default(),
            })),
        }
    }
}

/// Whether `record` is a lock of the session of `lease` (being released)
/// other than the version in hand: a late create of ours. Or one an
/// earlier create of its acquisition left, which the lock says may land
/// (`strays`): ours, sent before the lock (a lower token, an expiry no
/// later), though of another session (an earlier attempt's, or a run's
/// before).
fn late_create_of(lease: &Lease, record: &LeaseRecord) -> bool {
    let stray = lease.record.strays
        && record.token < lease.token
        && record.expires_at <= lease.record.expires_at
        && !mutant!(StraysOfOtherSessionsForeign);
    !record.released
        && record.holder == lease.record.holder
        && (record.acquisition == lease.acquisition || stray)
}

impl Steps for MutexSteps {
    fn kind(&self) -> &Kind {
        &self.kind
    }

    /// A stale lock was just read: delete that version, then create.
    fn resume(&mut self, cx: &mut Ctx, seen: &Observation) -> Plan {
        self.max_seen = seen.record.token;
        Self::delete(cx, seen.etag.clone())
    }

    fn first(&mut self, cx: &mut Ctx) -> Next {
        match &self.kind {
            Kind::Acquire | Kind::Inspect | Kind::Break(_) => {
                Next::Send(Plan::Get(cx.cfg.key.clone()))
            }
            Kind::Renew(_) => Next::Done(Err(LeaseError::from(ConfigError::NotRenewable(
                Protocol::Mutex,
            )))),
            Kind::Release(lease) => Next::Send(Self::delete(cx, lease.etag.clone())),
        }
    }

    fn give_back(&self, cx: &mut Ctx, lease: &Lease) -> Plan {
        Self::delete(cx, lease.etag.clone())
    }

    fn reply(&mut self, cx: &mut Ctx, now: Now, answer: Answer<'_>) -> Next {
        let (plan, write, date, reply) = answer.parts();
        let read = Plan::Get(cx.cfg.key.clone());
        match (plan, reply) {
            (Plan::Get(_), ReplyKind::Found { etag, body }) => {
                self.on_found(cx, now, etag, &body, date)
            }
            (Plan::Get(_), ReplyKind::Missing) => self.on_gone(cx, now, date, self.deleted_maybe),
            (Plan::Delete { .. }, ReplyKind::Deleted) => self.on_gone(cx, now, date, true),
            // 404 to a conditional delete: nothing to delete.
            (Plan::Delete { .. }, ReplyKind::Missing) => self.on_gone(cx, now, date, false),
            (Plan::Write { .. }, ReplyKind::Written { etag: Some(etag) }) => match write {
                Some(w) => self.created(cx, w, etag),
                None => Next::Done(Err(LeaseError::Unexpected {
                    reply: "a write reply for a read".into(),
                    unsettled: Box::default(),
                })),
            },
            // Someone else's version, our own retried request, an unknown
            // outcome or no etag: the read decides.
            (
                Plan::Write { .. } | Plan::Delete { .. },
                kind @ (ReplyKind::Written { etag: None }
                | ReplyKind::PreconditionFailed
                | ReplyKind::Transport { .. }),
            ) => {
                self.deleted_maybe |= matches!(plan, Plan::Delete { .. });
                cx.retry(&kind, read)
            }
            (
                _,
                kind @ (ReplyKind::ServerError { .. }
                | ReplyKind::Throttled { .. }
                | ReplyKind::Conflict),
            ) => {
                self.deleted_maybe |= matches!(plan, Plan::Delete { .. });
                cx.retry_later(now, &kind, read)
            }
            (Plan::Get(_), kind @ ReplyKind::Transport { .. }) => cx.retry_later(now, &kind, read),
            (_, kind) => Next::Done(Err(LeaseError::unexpected(&kind))),
        }
    }
}
