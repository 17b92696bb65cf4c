//! Epoch objects: documented in the layer's docs (`protocol/mod.rs`, "Epoch objects").

use crate::protocol::validity::{courtesy_until, is_free};

use crate::protocol::engine::Kind;
use crate::protocol::engine::{break_floor, unreadable, Answer, Ctx, Next, Plan, Steps};
use crate::protocol::machine::OpOutcome;
use crate::protocol::outcome::{Busy, Lease, LeaseError, LostReason, Observation};
use crate::record::{epoch_key, parse_epoch_key, LeaseRecord, EPOCHS_MARKER_LEN};
use crate::store::{Etag, ListEntry, PutCondition, ReplyKind};
use crate::time::{Now, StoreDate};

/// Most listing pages one operation reads before giving up.
const MAX_PAGES: u32 = 10_000;
/// Most times one operation lists again because the newest epoch read back
/// was another version than the one listed (each time, one was deleted and
/// its slot refilled by a late create in between; the simulation found an
/// acquire meet two such in a row, seed 480982519079).
const MAX_RELISTS: u32 = 3;
/// Most old epochs one operation deletes.
const MAX_CLEANUP: usize = 4;

/// The epoch protocol's decisions (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct EpochSteps {
    kind: Kind,
    /// Newest epoch the listing found so far.
    newest: Option<u64>,
    /// Its etag in the listing, when the store gave one.
    newest_etag: Option<Etag>,
    /// How many times the listing was made again because the newest epoch
    /// read back was not the version listed (at most [`MAX_RELISTS`]).
    relisted: u32,
    /// Release: our released epoch landed (sent at this local time) but a
    /// listing after it showed a newer one; whether that one is the epoch
    /// right above ours (then it came in through ours: see `on_verified`).
    release_landed: Option<(crate::time::Mono, bool)>,
    /// Older epochs the listing found (for cleanup), at most
    /// `MAX_CLEANUP + 1` (the one right below ours stays).
    older: Vec<u64>,
    pages: u32,
    max_seen: u64,
    /// Our create that the listing under way must show as the newest.
    verify: Option<(usize, Etag)>,
    /// The listing showed an object at the lease key itself other than
    /// our marker (another protocol's lease object, to be read).
    foreign: bool,
    /// The epochs marker is at the lease key: listed, created or read.
    marked: bool,
    /// A create of the marker is under way (sent, or settled by a read).
    marking: bool,
}

impl EpochSteps {
    pub(crate) fn new(kind: Kind) -> EpochSteps {
        EpochSteps {
            kind,
            newest: None,
            newest_etag: None,
            relisted: 0,
            release_landed: None,
            older: Vec::new(),
            pages: 0,
            max_seen: 0,
            verify: None,
            foreign: false,
            marked: false,
            marking: false,
        }
    }

    /// Lists every key starting with the lease key: the epochs under
    /// `<key>/`, and an object at `<key>` itself if another protocol uses it.
    fn list(&mut self, cx: &Ctx) -> Plan {
        self.newest = None;
        self.newest_etag = None;
        self.older.clear();
        self.pages = 0;
        self.foreign = false;
        self.marked = false;
        Plan::List {
            prefix: cx.cfg.key.clone(),
            continuation: None,
        }
    }

    /// The release of `lease`: epoch `after + 1` created as a released
    /// record of its session.
    fn release_create(&self, cx: &Ctx, lease: &Lease, after: u64) -> Plan {
        if mutant!(BlindEpochRelease) {
            // Broken on purpose: our epoch overwritten, whoever came since.
            return Plan::Write {
                key: epoch_key(&cx.cfg.key, lease.token),
                condition: PutCondition::None,
                record: LeaseRecord {
                    released: true,
                    ..lease.record.clone()
                },
            };
        }
        let record = LeaseRecord {
            token: after.saturating_add(1),
            released: true,
            ..lease.record.clone()
        };
        self.create(cx, record)
    }

    fn create(&self, cx: &Ctx, record: LeaseRecord) -> Plan {
        Plan::Write {
            key: epoch_key(&cx.cfg.key, record.token),
            condition: PutCondition::IfAbsent,
            record,
        }
    }

    fn take_over(&mut self, cx: &mut Ctx) -> Next {
        let record = cx.fresh_record(self.max_seen.saturating_add(1));
        Next::Send(self.create(cx, record))
    }

    fn renewal(&self, cx: &Ctx, lease: &crate::protocol::outcome::Lease) -> Plan {
        let record = LeaseRecord {
            token: lease.token.saturating_add(1),
            released: false,
            ..lease.record.clone()
        };
        self.create(cx, record)
    }

    fn on_listed(&mut self, cx: &mut Ctx, entries: Vec<ListEntry>, next: Option<String>) -> Next {
        for ListEntry { key, etag, size } in entries {
            if key == cx.cfg.key {
                // Our marker, known by its size; anything else there is
                // read (to name it) and refused.
                if size == EPOCHS_MARKER_LEN || mutant!(NoProtocolCheck | MarkerUnread) {
                    self.marked = true;
                } else {
                    self.foreign = true;
                }
                continue;
            }
            let Some(epoch) = parse_epoch_key(&cx.cfg.key, &key) else {
                continue;
            };
            self.max_seen = self.max_seen.max(epoch);
            match self.newest {
                Some(newest) if newest >= epoch => self.older.push(epoch),
                Some(newest) => {
                    self.older.push(newest);
                    self.newest = Some(epoch);
                    self.newest_etag = etag;
                }
                None => {
                    self.newest = Some(epoch);
                    self.newest_etag = etag;
                }
            }
        }
        // The newest of them (one more: the epoch right below ours stays).
        if self.older.len() > MAX_CLEANUP + 1 {
            // The few of a listing page (`sort`: the standard library's
            // sort would link about 3.5 KB of wasm for this alone).
            crate::sort::small(&mut self.older);
            self.older.drain(..self.older.len() - MAX_CLEANUP - 1);
        }
        self.pages += 1;
        if let Some(continuation) = next {
            if self.pages >= MAX_PAGES {
                return Next::Done(Err(LeaseError::Unexpected {
                    reply: format!(
                        "the listing of {}/ did not end after {MAX_PAGES} pages",
                        cx.cfg.key
                    ),
                    unsettled: Box::default(),
                }));
            }
            return Next::Send(Plan::List {
                prefix: cx.cfg.key.clone(),
                continuation: Some(continuation),
            });
        }
        // Another protocol at the key: an acquisition or renewal reads it,
        // and refuses naming it. A release or break goes on: what it
        // created is a released epoch, which must stay the newest (it
        // closes the slot a late renewal of ours could fill), not be given
        // back.
        // An inspect with no epoch reads it too: another tool's lock there
        // is what holds the key.
        let inspect_it = matches!(self.kind, Kind::Inspect) && self.newest.is_none();
        if self.foreign && (matches!(self.kind, Kind::Acquire | Kind::Renew(_)) || inspect_it) {
            return Next::Send(Plan::Get(cx.cfg.key.clone()));
        }
        // An acquisition on a key not yet marked marks it before it counts:
        // the one create-if-absent at the lease key that a cas or mutex
        // client would also need, so at most one protocol gets the key.
        if matches!(self.kind, Kind::Acquire) && !self.marked {
            self.marking = true;
            return Next::Send(Plan::Mark(cx.cfg.key.clone()));
        }
        self.after_listing(cx)
    }

    /// A complete listing, the key marked where it must be: the create it
    /// confirms, or the newest epoch to read.
    fn after_listing(&mut self, cx: &mut Ctx) -> Next {
        if let Some((write, etag)) = self.verify.take() {
            return self.on_verified(cx, write, etag);
        }
        match (self.newest, &self.kind) {
            (Some(epoch), _) => Next::Send(Plan::Get(epoch_key(&cx.cfg.key, epoch))),
            (None, Kind::Acquire) => self.take_over(cx),
            (None, Kind::Inspect) => Next::Done(Ok(OpOutcome::Inspected(None))),
            (None, _) => Next::Done(Err(LeaseError::Changed {
                current: None,
                unsettled: Box::default(),
            })),
        }
    }

    /// A record read at the newest epoch, judged per operation. One match
    /// over the operations and what the record says, kept whole so each
    /// case can be read against the others; longer than 80 lines for that.
    fn on_found(
        &mut self,
        cx: &mut Ctx,
        now: Now,
        epoch: u64,
        etag: Etag,
        body: &[u8],
        date: StoreDate,
    ) -> Next {
        let mut record = match LeaseRecord::decode(body) {
            Ok(r) => r,
            // An operator's break aimed at exactly that version replaces
            // it; otherwise, what an unreadable object means.
            Err(error) => match break_floor(&self.kind, &etag) {
                Some(floor) => {
                    let token = epoch.max(floor).saturating_add(1);
                    return Next::Send(self.create(cx, cx.broken_record(token)));
                }
                None => return unreadable(&self.kind, etag, error),
            },
        };
        // The key is what create-if-absent guarded: it is the token.
        record.token = epoch;
        self.max_seen = self.max_seen.max(epoch);
        if let Some(w) = cx.our_write(&record) {
            return self.on_written(cx, w, etag);
        }
        let free = is_free(&cx.cfg, &record, now, date);
        // A newer epoch of the session being renewed or released: a
        // renewal of ours whose reply was lost. Carry on above it.
        let ours = match &self.kind {
            Kind::Renew(lease) | Kind::Release(lease) => lease.same_session(&record),
            _ => false,
        };
        // Fair waiting: our own release is left to the waiters a while,
        // judged as a live lease until then.
        let courtesy = courtesy_until(&cx.cfg, &record, date)
            .filter(|_| matches!(self.kind, Kind::Acquire) && self.newest == Some(epoch));
        if let Some(until) = courtesy {
            record.released = false;
            record.expires_at = until;
        }
        let free = free && courtesy.is_none();
        match &self.kind {
            Kind::Inspect => cx.inspected(now, etag, record, date, free),
            Kind::Acquire if free || cx.claimed(&record) => self.take_over(cx),
            // Another's record at the key of our create, which is not the
            // newest listed: it won that epoch, or it is a late create
            // that filled the slot of an epoch deleted by cleanup, below
            // the live one. Only the newest is the lease: list again and
            // let it decide (busy on it, or free to take).
            Kind::Acquire if self.newest != Some(epoch) => {
                let plan = self.list(cx);
                cx.retry(
                    "a listing again: another's record at our create's epoch is not the newest",
                    plan,
                )
            }
            // A renewal or a release whose create was refused by a
            // released record (an operator's break, kept below a
            // takeover): the lease is lost, to the newest, which the
            // outcome names. (A live one there is the taker's.)
            Kind::Renew(_) | Kind::Release(_)
                if !ours && record.released && self.newest != Some(epoch) =>
            {
                let plan = self.list(cx);
                cx.retry(
                    "a listing again: our create was refused by a released record",
                    plan,
                )
            }
            Kind::Renew(lease) if ours => {
                let plan = self.renewal(
                    cx,
                    &Lease {
                        token: epoch,
                        ..lease.clone()
                    },
                );
                cx.retry("a renewal again, at the epoch our record holds", plan)
            }
            Kind::Release(lease) if ours => {
                let plan = self.release_create(cx, lease, epoch);
                cx.retry("a release again, at the epoch our record holds", plan)
            }
            Kind::Acquire => Next::Done(Ok(OpOutcome::Busy(Busy::held_by(record, etag)))),
            Kind::Renew(_) => Next::Done(Ok(OpOutcome::Lost(LostReason::taken_by(&record)))),
            Kind::Release(lease) => {
                Next::Done(Ok(self.release_ended(lease, LostReason::taken_by(&record))))
            }
            Kind::Break(req) if req.etag == etag => {
                let broken = cx.broken_of(&record, epoch.saturating_add(1));
                Next::Send(self.create(cx, broken))
            }
            Kind::Break(_) => Next::Done(Err(LeaseError::Changed {
                current: Some(etag),
                unsettled: Box::default(),
            })),
        }
    }

    /// A release of `lease` that found another's epoch the newest (`taken`):
    /// what became of its own released epoch.
    fn release_ended(&self, lease: &Lease, taken: LostReason) -> OpOutcome {
        match self.release_landed {
            // Our released epoch landed, and the epoch right above it is
            // the newest: the slot ours filled was never emptied (cleanup
            // keeps the epoch below the newest), so ours was the newest,
            // and the next came in through it. Sent while our lease was
            // valid: released.
            Some((sent, true)) if sent < lease.valid_until => {
                OpOutcome::Released { token: lease.token }
            }
            // Further below, or sent at or after the deadline: it may have
            // filled the slot of an epoch deleted since (an operator's
            // break, a takeover and its cleanup: garbage, changing nothing)
            // or freed the lease; no read can tell.
            Some(_) => OpOutcome::ReleaseUnknown {
                token: lease.token,
                now: taken,
            },
            None => OpOutcome::AlreadyLost(taken),
        }
    }

    fn on_written(&mut self, cx: &mut Ctx, write: usize, etag: Etag) -> Next {
        match &self.kind {
            // A new epoch counts only if it is the newest, whatever it
            // says (held, released, broken): list to check.
            // Broken on purpose: the blind release reports at once.
            Kind::Release(lease) if mutant!(BlindEpochRelease | UnconfirmedEpochWrites) => {
                Next::Done(Ok(OpOutcome::Released { token: lease.token }))
            }
            Kind::Break(_) if mutant!(UnconfirmedEpochWrites) => {
                Next::Done(Ok(OpOutcome::Broken {
                    token: cx.writes[write].record.token,
                }))
            }
            Kind::Acquire | Kind::Renew(_) | Kind::Release(_) | Kind::Break(_) => {
                if let Kind::Acquire = self.kind {
                    cx.win_pending(write, etag.clone());
                }
                self.verify = Some((write, etag));
                Next::Send(self.list(cx))
            }
            Kind::Inspect => Next::Done(Ok(OpOutcome::Inspected(None))),
        }
    }

    /// The listing after our create of epoch `token` is complete.
    fn on_verified(&mut self, cx: &mut Ctx, write: usize, etag: Etag) -> Next {
        cx.win_checked();
        let token = cx.writes[write].record.token;
        if self.newest != Some(token) {
            // A newer epoch exists: our create filled the slot of an epoch
            // deleted by cleanup, seen through a stale read. It is garbage;
            // the newest decides (busy, lost, or free to take; for a
            // release, lost or a renewal of ours to release above; for a
            // break, changed since the operator looked).
            // Right below the newest it stays: cleanup keeps that epoch.
            let old = mutant!(EpochCleanupEmptiesTheSlotBelow);
            let below_newest = self.newest == Some(token.saturating_add(1));
            if !below_newest || old {
                cx.cleanup(epoch_key(&cx.cfg.key, token), Some(etag));
            }
            // Nothing to give back should the deadline pass now.
            cx.writes[write].landed = None;
            if let Kind::Release(_) = self.kind {
                self.release_landed = Some((cx.writes[write].sent, below_newest || old));
            }
            return match self.newest {
                Some(newest) => Next::Send(Plan::Get(epoch_key(&cx.cfg.key, newest))),
                None => Next::Done(Err(LeaseError::Unexpected {
                    reply: format!("epoch {token} vanished right after it was created"),
                    unsettled: Box::default(),
                })),
            };
        }
        // Every older epoch but the one right below ours: that slot stays
        // filled while ours is the newest, so a release of the epoch
        // before it (which creates in that slot) is refused once anyone
        // holds ours, and a release that lands there knows ours came in
        // through it (`release_landed`).
        for epoch in std::mem::take(&mut self.older) {
            if epoch.saturating_add(1) != token || mutant!(EpochCleanupEmptiesTheSlotBelow) {
                cx.cleanup(epoch_key(&cx.cfg.key, epoch), None);
            }
        }
        // The newest epoch is never deleted, whatever was queued earlier
        // (a first create of it taken for garbage, say).
        cx.keep(&epoch_key(&cx.cfg.key, token));
        Next::Done(Ok(match &self.kind {
            Kind::Renew(_) => OpOutcome::Renewed(cx.lease_from(write, etag)),
            Kind::Release(lease) => OpOutcome::Released { token: lease.token },
            Kind::Break(_) => OpOutcome::Broken { token },
            _ => OpOutcome::Acquired(cx.lease_from(write, etag)),
        }))
    }

    /// The reply to our marker's create at the lease key.
    fn on_marked(&mut self, cx: &mut Ctx, now: Now, key: &str, reply: ReplyKind) -> Next {
        match reply {
            ReplyKind::Written { .. } => {
                self.marking = false;
                self.marked = true;
                self.after_listing(cx)
            }
            // Refused, or unknown: what is at the key decides.
            kind @ (ReplyKind::PreconditionFailed | ReplyKind::Transport { .. }) => {
                cx.retry(&kind, Plan::Get(key.into()))
            }
            kind @ (ReplyKind::ServerError { .. }
            | ReplyKind::Throttled { .. }
            | ReplyKind::Conflict) => cx.retry_later(now, &kind, Plan::Get(key.into())),
            kind => Next::Done(Err(LeaseError::unexpected(&kind))),
        }
    }

    /// The object at the lease key itself, read: our marker (someone's,
    /// or our own create whose reply was lost), nothing, or another
    /// protocol's lease or another tool's lock.
    fn on_lease_key(&mut self, cx: &mut Ctx, now: Now, date: StoreDate, reply: ReplyKind) -> Next {
        let ReplyKind::Found { etag, body } = reply else {
            // Gone since it was listed or refused our create (a mutex lock
            // released): an acquisition marks the key now.
            self.foreign = false;
            if !matches!(self.kind, Kind::Acquire) {
                return self.after_listing(cx);
            }
            self.marking = true;
            let mark = Plan::Mark(cx.cfg.key.clone());
            return cx.retry(&reply, mark);
        };
        let theirs = LeaseRecord::decode(&body).ok();
        if theirs.as_ref().is_some_and(LeaseRecord::is_epochs_marker) {
            self.marking = false;
            self.foreign = false;
            self.marked = true;
            return self.after_listing(cx);
        }
        // Another tool's lock (Litestream's, Terraform's): shown, and
        // busy while it lives, by the store's clock as a lease is.
        // Epochs cannot take it over (no `If-Match`): once it has
        // expired the key is refused below, as another protocol's.
        if let Some(lock) = theirs.as_ref().filter(|r| r.foreign.is_some()) {
            let free = is_free(&cx.cfg, lock, now, date);
            match self.kind {
                Kind::Inspect => return cx.inspected(now, etag, lock.clone(), date, free),
                Kind::Acquire if !free && self.verify.is_none() => {
                    return Next::Done(Ok(OpOutcome::Busy(Busy::held_by(lock.clone(), etag))));
                }
                _ => {}
            }
        }
        if matches!(self.kind, Kind::Inspect) {
            // Not another tool's lock: the epochs lease is what an epochs
            // inspect shows (none).
            self.foreign = false;
            return self.after_listing(cx);
        }
        // Another protocol's lease object at the lease key. A create of
        // ours is given back first: a renewal's is deleted (the epoch it
        // renews is still there below it); an acquisition's is a pending
        // win, which the engine gives back as a released epoch.
        if let Some((write, etag)) = self.verify.take() {
            if let Kind::Renew(_) = self.kind {
                let key = cx.writes[write].key.clone();
                cx.cleanup(key, Some(etag));
            }
        }
        let theirs = theirs
            .and_then(|r| r.protocol.or(r.foreign.map(|f| f.describe().to_string())))
            .unwrap_or_else(|| "cas or mutex (or a simple client)".into());
        Next::Done(Err(LeaseError::ProtocolMismatch {
            unsettled: Box::default(),
            key: cx.cfg.key.clone(),
            ours: cx.cfg.protocol,
            theirs,
        }))
    }

    /// A record read at an epoch's key.
    fn on_epoch_read(
        &mut self,
        cx: &mut Ctx,
        now: Now,
        key: &str,
        etag: Etag,
        body: &[u8],
        date: StoreDate,
    ) -> Next {
        match parse_epoch_key(&cx.cfg.key, key) {
            // The newest epoch listed, read back as another version: it
            // was deleted since the listing (a newer epoch exists) and its
            // slot filled again by a late create. That record is no lease;
            // list again (a few times at most: a store whose listings name
            // versions differently from its reads must not loop).
            Some(epoch)
                if Some(epoch) == self.newest
                    && self.newest_etag.as_ref().is_some_and(|e| *e != etag)
                    && self.verify.is_none()
                    && self.relisted < MAX_RELISTS =>
            {
                self.relisted += 1;
                let plan = self.list(cx);
                cx.retry(
                    "a listing again: the newest epoch changed as it was read",
                    plan,
                )
            }
            Some(epoch) => self.on_found(cx, now, epoch, etag, body, date),
            None => Next::Done(Err(LeaseError::Unexpected {
                reply: format!("read of {key}, which names no epoch"),
                unsettled: Box::default(),
            })),
        }
    }
}

impl Steps for EpochSteps {
    fn kind(&self) -> &Kind {
        &self.kind
    }

    /// A free newest epoch was just read: create the next one.
    fn resume(&mut self, cx: &mut Ctx, seen: &Observation) -> Plan {
        self.max_seen = seen.record.token;
        self.newest = Some(seen.record.token);
        let record = cx.fresh_record(seen.record.token.saturating_add(1));
        self.create(cx, record)
    }

    fn first(&mut self, cx: &mut Ctx) -> Next {
        match &self.kind {
            Kind::Acquire | Kind::Inspect | Kind::Break(_) => Next::Send(self.list(cx)),
            Kind::Renew(lease) => Next::Send(self.renewal(cx, lease)),
            Kind::Release(lease) => Next::Send(self.release_create(cx, lease, lease.token)),
        }
    }

    fn give_back(&self, cx: &mut Ctx, lease: &Lease) -> Plan {
        self.release_create(cx, lease, lease.token)
    }

    /// No: an acquisition's create of epoch `n + 1` is given back as a
    /// released epoch `n + 2`. Deleting it would not leave the key as it
    /// was: the epoch `n` it took over from may be gone (a release whose
    /// LIST showed our epoch above its released one deletes that as
    /// garbage), and the newest would go back to an older epoch, say the
    /// releaser's last renewal, live again though its holder was told
    /// `Released` (the newest epoch is never deleted, `docs/design.md` §7).
    fn gives_back_creates_by_delete(&self) -> bool {
        false
    }

    /// Every reply, by the call it answers: one match, so each call's
    /// cases sit together.
    fn reply(&mut self, cx: &mut Ctx, now: Now, answer: Answer<'_>) -> Next {
        let (plan, write, date, reply) = answer.parts();
        let transient = matches!(
            reply,
            ReplyKind::ServerError { .. } | ReplyKind::Throttled { .. } | ReplyKind::Conflict
        );
        match (plan, reply) {
            (Plan::List { .. }, ReplyKind::Listed { entries, next }) => {
                self.on_listed(cx, entries, next)
            }
            (Plan::Mark(key), kind) => self.on_marked(cx, now, key, kind),
            // The object at the lease key: our marker, or another
            // protocol's or tool's.
            (Plan::Get(key), kind @ (ReplyKind::Found { .. } | ReplyKind::Missing))
                if *key == cx.cfg.key =>
            {
                self.on_lease_key(cx, now, date, kind)
            }
            (Plan::Get(key), ReplyKind::Found { etag, body }) => {
                self.on_epoch_read(cx, now, key, etag, &body, date)
            }
            // An epoch vanished: a newer one exists (cleanup), or our write
            // did not land. Renew retries its create; the rest list again.
            (Plan::Get(_), kind @ ReplyKind::Missing) => match &self.kind {
                Kind::Renew(lease) => {
                    let plan = self.renewal(cx, lease);
                    cx.retry(&kind, plan)
                }
                Kind::Release(lease) => {
                    let plan = self.release_create(cx, lease, lease.token);
                    cx.retry(&kind, plan)
                }
                _ => {
                    let plan = self.list(cx);
                    cx.retry(&kind, plan)
                }
            },
            (Plan::Write { .. }, ReplyKind::Written { etag: Some(etag) }) => match write {
                Some(w) => self.on_written(cx, w, etag),
                None => Next::Done(Err(LeaseError::Unexpected {
                    reply: "a write reply for a read".into(),
                    unsettled: Box::default(),
                })),
            },
            // Unknown outcome, someone else's epoch, or no etag: read it.
            (
                Plan::Write { key, .. },
                kind @ (ReplyKind::Written { etag: None }
                | ReplyKind::PreconditionFailed
                | ReplyKind::Transport { .. }),
            ) => cx.retry(&kind, Plan::Get(key.clone())),
            (Plan::Write { key, .. }, kind) if transient => {
                cx.retry_later(now, &kind, Plan::Get(key.clone()))
            }
            (plan @ (Plan::List { .. } | Plan::Get(_)), kind)
                if transient || matches!(kind, ReplyKind::Transport { .. }) =>
            {
                cx.retry_later(now, &kind, plan.clone())
            }
            (_, kind) => Next::Done(Err(LeaseError::unexpected(&kind))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_keys_round_trip_and_sort() {
        assert_eq!(epoch_key("locks/a", 7), "locks/a/00000000000000000007.json");
        assert_eq!(
            parse_epoch_key("locks/a", &epoch_key("locks/a", u64::MAX)),
            Some(u64::MAX)
        );
        assert!(epoch_key("k", 9) < epoch_key("k", 10));
        for bad in [
            "locks/a/7.json",
            "locks/a/0000000000000000000x.json",
            "locks/ab/00000000000000000007.json",
            "locks/a/00000000000000000007.txt",
            "locks/a/99999999999999999999.json",
        ] {
            assert_eq!(parse_epoch_key("locks/a", bad), None, "{bad}");
        }
    }
}
