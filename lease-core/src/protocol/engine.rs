//! The call engine shared by the lease protocols.
//!
//! A protocol supplies [`Steps`]: which call to make first and what to do
//! with each reply. The [`Engine`] does the rest the same way for every
//! protocol: its calls go through the shared discipline (`calls::Calls`:
//! ids, request timeouts where a missing reply becomes a transport error
//! with an unknown outcome, backoff, the bounded retry budget with the
//! settle-by-read rule, the operation's overall deadline `op_timeout` that
//! also caps a store's `Retry-After`, the store's write spacing); on top it
//! keeps the local lease deadline (a timer, checked before anything else),
//! the stamping of every record written with a nonce, `expires_at` and the
//! local validity it buys, the writes made and what became of them, and
//! the give-back of a win that came too late.
//!
//! Three rules hold for every protocol here:
//!
//! - **No lease past its deadline.** An acquisition confirmed only after
//!   its local deadline is given back and ends in
//!   [`LeaseError::WonTooLate`]; a renewal confirmed too late ends in
//!   [`LostReason::Expired`] after giving the new record back.
//! - **No write abandoned unsettled.** While a write's outcome is unknown,
//!   re-reads go on past the retry budget, until the operation's deadline;
//!   if that passes first the error carries the write as a [`Claim`]. A
//!   write refused (412, 404, 409, 429) is settled only by a read of its
//!   key after the refusal: a copy of the same request (a transport's
//!   retry) may have applied, and an operation that ends in an error
//!   before such a read hands it on as a claim too. An acquire that ends
//!   [`Busy`](crate::protocol::outcome::Busy) with a write still open hands it on
//!   in the `Busy` (a create can land late, once the key is free).
//! - **Our records are known by holder, session, token and nonce**, not by
//!   the nonce alone, so two clients that drew the same nonce (a fixed
//!   seed) cannot both win.

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::protocol::calls::{self, op_deadline, Calls, OneAtATime, Why};
use crate::protocol::machine::{CallId, OpOutcome, Output};
use crate::protocol::outcome::BreakRequest;
use crate::protocol::outcome::{Claim, Event, Lease, LeaseError, LostReason, Observation};
use crate::protocol::validity::{note_date, stamp};
use crate::record::{LeaseRecord, RecordError, BROKEN_BY, HELD_UNTIL_BROKEN, MAX_RECORD_BYTES};
use crate::store::{Etag, PutCondition, ReplyKind, StoreOp, StoreReply, TransportErrorKind};
use crate::tick::TickRun;
use crate::time::{Dur, Mono, Now, StoreDate, UnixMillis};
use std::time::Duration;

/// The next call a protocol wants.
// An operation holds one plan at a time; boxing the record would cost an
// allocation per write to save a few hundred bytes.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    /// GET the key.
    Get(String),
    /// One LIST page.
    List {
        prefix: String,
        continuation: Option<String>,
    },
    /// DELETE, conditional when an etag is given.
    Delete { key: String, if_match: Option<Etag> },
    /// PUT a record; the engine stamps nonce, expiry and validity at send.
    Write {
        key: String,
        condition: PutCondition,
        record: LeaseRecord,
    },
    /// A best-effort DELETE after the outcome is known (conditional when an
    /// etag is given): its reply, whatever it is, only moves on to the next
    /// cleanup.
    Cleanup { key: String, if_match: Option<Etag> },
    /// PUT `If-None-Match: *` of the epochs marker at the lease key
    /// ([`crate::record::EPOCHS_MARKER`]): not a lease record, so not
    /// stamped or kept among the operation's writes.
    Mark(String),
}

impl Plan {
    /// The key this call writes (PUT or DELETE), if it writes.
    fn written_key(&self) -> Option<&str> {
        match self {
            Plan::Write { key, .. }
            | Plan::Delete { key, .. }
            | Plan::Cleanup { key, .. }
            | Plan::Mark(key) => Some(key),
            Plan::Get(_) | Plan::List { .. } => None,
        }
    }

    fn is_read(&self) -> bool {
        matches!(self, Plan::Get(_) | Plan::List { .. })
    }
}

/// What to do after a reply.
#[derive(Clone, Debug)]
pub(crate) enum Next {
    /// Make this call now.
    Send(Plan),
    /// Make this call at the given time (after a backoff).
    At(Mono, Plan),
    /// The operation's outcome; any cleanups queued with
    /// [`Ctx::cleanup`] run first.
    Done(Result<OpOutcome, LeaseError>),
}

/// A write sent by this operation, recognised later by its nonce.
#[derive(Clone, Debug)]
pub(crate) struct Write {
    pub key: String,
    pub record: LeaseRecord,
    pub sent: Mono,
    pub valid_until: Mono,
    /// From this local time no record this write made can be live on the
    /// store (its stamped expiry has passed on the store's clock).
    pub dead_at: Mono,
    /// A reply said what became of it (applied, or refused).
    pub answered: bool,
    /// A reply refused it (412, 404, 409, 429) and no read of its key has
    /// come back since. The refusal speaks for one copy of the request: a
    /// copy sent again by a transport may have applied (the refusal is
    /// then its echo), so until a read settles it a record of it may be
    /// live, and an error hands it on as a claim.
    pub refused_unread: bool,
    /// It was a create (`If-None-Match: *`).
    pub created: bool,
    /// The etag a reply said it was written as (it landed).
    pub landed: Option<Etag>,
}

/// What the engine knows besides the protocol's own state.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    pub cfg: LeaseConfig,
    pub entropy: Entropy,
    /// Ids, timeouts, the deadline, retries, backoff and write spacing.
    pub calls: Calls,
    /// The latest store date and the local send time it is anchored to.
    pub clock: Option<(StoreDate, Mono)>,
    pub writes: Vec<Write>,
    /// Records of ours from earlier operations (see [`Claim`]).
    pub claims: Vec<Claim>,
    /// Strays inherited from the lease being renewed or released.
    inherited_strays: Option<Mono>,
    /// An end the caller set, before the operation's own deadline: a run's
    /// time limit (a hold's renewals and its release).
    by: Option<Mono>,
    /// A release's write or delete, sent while the lease was valid, got no
    /// clear answer: it may be what freed the lease.
    release_maybe_landed: bool,
    /// A release's write or delete sent at or after the lease's local
    /// deadline got no clear answer: whether it freed the lease or the
    /// lease had expired first, no read can tell.
    release_late_unclear: bool,
    /// A winning write that landed and awaits its protocol check: ours and
    /// live, but not a lease yet. An operation that ends in an error
    /// meanwhile gives it back (a create is deleted, an epoch is released
    /// above it; a write that replaced a record is released, keeping its
    /// token) and hands it on as a claim.
    pending_win: Option<(usize, Etag)>,
    acquisition: Option<String>,
    cleanups: Vec<(String, Option<Etag>)>,
    /// The completed ticks of the newest record read (the highest token),
    /// which a new record carries on (`crate::tick`).
    runs_seen: (u64, Vec<TickRun>),
    /// The last record read is a simple client's, which carries no ticks
    /// (cas: a release's read of one ends the operation, so it is the
    /// read the outcome comes from).
    simple_seen: bool,
}

impl Ctx {
    /// Notes the completed ticks of a record read.
    fn saw(&mut self, record: &LeaseRecord) {
        self.simple_seen = record.is_foreign();
        if record.token >= self.runs_seen.0 && !mutant!(DropRunsOnTakeover) {
            self.runs_seen = (record.token, record.runs.clone());
        }
    }

    /// Whether the newest record read carries the newest completed tick
    /// of `lease`'s release (true when it has none). A tick the lease's
    /// record listed before is carried whether the release landed or not;
    /// one the release added, only if it landed. (Not by token: an epochs
    /// renewal moves the lease's token past the one its tick ran with.)
    fn carried(&self, lease: &Lease) -> bool {
        if mutant!(TrustUnclearTickRelease) {
            return true;
        }
        match lease.record.runs.last() {
            Some(run) => self
                .runs_seen
                .1
                .iter()
                .any(|seen| seen.tick == run.tick && seen.token == run.token),
            None => true,
        }
    }

    /// A record for a new acquisition with `token` (one acquisition id per op).
    pub fn fresh_record(&mut self, token: u64) -> LeaseRecord {
        let acquisition = self
            .acquisition
            .get_or_insert_with(|| self.entropy.id())
            .clone();
        LeaseRecord {
            token,
            expires_at: UnixMillis(0),
            holder: self.cfg.holder.clone(),
            acquisition,
            nonce: String::new(),
            acquired_at: None,
            ttl_ms: Some(self.cfg.ttl.as_millis() as u64),
            released: false,
            released_at: None,
            meta: self.cfg.meta.clone(),
            protocol: Some(self.cfg.protocol.name().into()),
            strays: false,
            runs: self.runs_seen.1.clone(),
            foreign: None,
            owned_by: self.cfg.owned_by.clone(),
        }
    }

    /// A released record an operator's break leaves behind.
    pub fn broken_record(&self, token: u64) -> LeaseRecord {
        let mut meta = self.cfg.meta.clone();
        meta.insert(BROKEN_BY.into(), self.cfg.holder.clone());
        LeaseRecord {
            token,
            expires_at: UnixMillis(u64::MAX),
            holder: String::new(),
            acquisition: String::new(),
            nonce: String::new(),
            acquired_at: None,
            ttl_ms: None,
            released: true,
            released_at: None,
            meta,
            protocol: Some(self.cfg.protocol.name().into()),
            strays: false,
            runs: self.runs_seen.1.clone(),
            foreign: None,
            owned_by: None,
        }
    }

    /// The released record an operator's break of `seen` leaves, with
    /// `token`: `seen`'s holder and acquisition id kept (its holder then
    /// knows whose lease was broken), unless they would not fit beside
    /// the operator's `meta` and the newest tick (another client's record
    /// may give each 512 bytes of characters JSON escapes six times): then
    /// neither is kept, so the record stays one every client reads. The
    /// size is measured with the fields the write stamps at their longest.
    pub fn broken_of(&self, seen: &LeaseRecord, token: u64) -> LeaseRecord {
        let mut broken = LeaseRecord {
            holder: seen.holder.clone(),
            acquisition: seen.acquisition.clone(),
            ..self.broken_record(token)
        };
        let stamped = LeaseRecord {
            nonce: "0".repeat(32),
            expires_at: HELD_UNTIL_BROKEN,
            released_at: Some(HELD_UNTIL_BROKEN),
            ..broken.clone()
        };
        if stamped.clone().encode_fitting().len() > MAX_RECORD_BYTES {
            broken.holder.clear();
            broken.acquisition.clear();
        }
        broken
    }

    /// The write of ours that `record` is, if any: same nonce, holder,
    /// session and token. (Two clients seeded alike draw the same nonces
    /// and sessions; their holder names still tell them apart.)
    pub fn our_write(&self, record: &LeaseRecord) -> Option<usize> {
        if record.nonce.is_empty() {
            return None;
        }
        if mutant!(NonceOnly) {
            return self
                .writes
                .iter()
                .position(|w| w.record.nonce == record.nonce);
        }
        self.writes.iter().position(|w| {
            w.record.nonce == record.nonce
                && w.record.acquisition == record.acquisition
                && w.record.holder == record.holder
                && w.record.token == record.token
        })
    }

    /// Whether `record` is one of ours from an earlier operation that this
    /// one was told about ([`Claim`]): free for us to take over.
    pub fn claimed(&self, record: &LeaseRecord) -> bool {
        self.claims.iter().any(|c| c.owns(&self.cfg.holder, record))
    }

    /// Until when a write of an earlier operation of ours to `key` (a
    /// claim handed to this one) may still land, if one may.
    pub fn claims_until(&self, key: &str) -> Option<Mono> {
        self.claims
            .iter()
            .filter(|c| c.key == key)
            .map(|c| c.live_until)
            .max()
    }

    /// The lease our write number `write` established, as `etag`.
    pub fn lease_from(&self, write: usize, etag: Etag) -> Lease {
        let w = &self.writes[write];
        // Other writes of ours whose fate stayed unknown may still land:
        // this operation's, and earlier operations' (its claims: a wait's
        // earlier attempt, a lost reply of a run before).
        let strays = self
            .writes
            .iter()
            .enumerate()
            .filter(|(i, other)| *i != write && !other.answered && other.key == w.key)
            .map(|(_, other)| other.dead_at)
            .chain(self.inherited_strays)
            .chain(self.claims_until(&w.key))
            .max();
        Lease {
            key: w.key.clone(),
            token: w.record.token,
            acquisition: w.record.acquisition.clone(),
            etag,
            record: w.record.clone(),
            valid_until: w.valid_until,
            written_at: w.sent,
            clock: self
                .clock
                .unwrap_or((StoreDate::exact(UnixMillis(0)), w.sent)),
            strays_until: strays,
        }
    }

    /// Whether a release's write or delete got no clear answer (it may
    /// have landed).
    pub fn release_unclear(&self) -> bool {
        self.release_maybe_landed || self.release_late_unclear
    }

    /// Whether a write of ours may have landed without our knowing:
    /// unanswered, or refused and not read back since (a transport's retry
    /// of the same request may have applied it). A read that settles it is
    /// not refused for the retry budget.
    pub fn unsettled(&self) -> bool {
        self.writes.iter().any(|w| !w.answered || w.refused_unread)
    }

    /// The newest write whose outcome is unknown (unanswered, refused but
    /// not read back since, or a pending win), as a claim.
    fn claim(&self) -> Option<Claim> {
        if mutant!(NoSettle) {
            return None;
        }
        let pending = self.pending_win.as_ref().map(|(w, _)| *w);
        let open =
            |(i, w): &(usize, &Write)| !w.answered || w.refused_unread || Some(*i) == pending;
        let live_until = self
            .writes
            .iter()
            .enumerate()
            .filter(open)
            .map(|(_, w)| w.dead_at)
            .max()?;
        let (_, w) = self.writes.iter().enumerate().rev().find(open)?;
        Some(Claim {
            key: self.cfg.key.clone(),
            holder: w.record.holder.clone(),
            acquisition: w.record.acquisition.clone(),
            token: w.record.token,
            live_until,
        })
    }

    /// The error that ends an operation out of attempts or time.
    pub fn gave_up(&self, last: String) -> LeaseError {
        LeaseError::GaveUp {
            attempts: self.calls.attempts(),
            last,
            unsettled: self.claim().into_iter().collect(),
        }
    }

    /// Spends one retry, then `plan` now (or the error once spent). A
    /// re-read that settles a write of unknown outcome is never refused
    /// for the budget: only the operation's deadline ends it.
    pub fn retry<'a>(&mut self, why: impl Into<Why<'a>>, plan: Plan) -> Next {
        match self.spend(why.into(), &plan, None) {
            Ok(_) => Next::Send(plan),
            Err(e) => Next::Done(Err(e)),
        }
    }

    /// Spends one retry, then `plan` after a jittered backoff, never
    /// before the server's `Retry-After`; a backoff that would end past
    /// the operation's deadline ends the operation now instead.
    pub fn retry_later<'a>(&mut self, now: Now, why: impl Into<Why<'a>>, plan: Plan) -> Next {
        match self.spend(why.into(), &plan, Some(now.mono)) {
            Ok(Some(until)) => Next::At(until, plan),
            Ok(None) => Next::Send(plan),
            Err(e) => Next::Done(Err(e)),
        }
    }

    fn spend(
        &mut self,
        why: Why<'_>,
        plan: &Plan,
        backoff_from: Option<Mono>,
    ) -> Result<Option<Mono>, LeaseError> {
        let settling = plan.is_read() && self.unsettled() && !mutant!(NoSettle);
        self.calls
            .retry_settling(&self.cfg, &mut self.entropy, why, backoff_from, settling)
            .map_err(|e| e.error(self.claim().into_iter().collect()))
    }

    /// Inspect's outcome for a record read with a reply dated `date`.
    pub fn inspected(
        &self,
        now: Now,
        etag: Etag,
        record: LeaseRecord,
        date: StoreDate,
        free: bool,
    ) -> Next {
        let read_at = self.clock.map_or(now.mono, |(_, sent)| sent);
        Next::Done(Ok(OpOutcome::Inspected(Some(Observation {
            etag,
            record,
            date,
            read_at,
            free,
        }))))
    }

    /// Our winning write landed as `etag` and awaits a check before it is
    /// a lease (see `pending_win`).
    pub fn win_pending(&mut self, write: usize, etag: Etag) {
        self.pending_win = Some((write, etag));
    }

    /// The check of a pending win is over, whatever it found.
    pub fn win_checked(&mut self) {
        self.pending_win = None;
    }

    /// Queues a best-effort delete to run before the outcome is reported
    /// (conditional on `if_match` when given; once per key and etag).
    pub fn cleanup(&mut self, key: String, if_match: Option<Etag>) {
        if !self.cleanups.contains(&(key.clone(), if_match.clone())) {
            self.cleanups.push((key, if_match));
        }
    }

    /// Drops any cleanup queued for `key` (it holds what the operation
    /// reports).
    pub fn keep(&mut self, key: &str) {
        self.cleanups.retain(|(k, _)| k != key);
    }

    /// The claim a pending win leaves, should its give-back fail.
    fn pending_claim(&self) -> Option<Claim> {
        let (w, _) = self.pending_win.as_ref()?;
        if mutant!(NoSettle) {
            return None;
        }
        let w = &self.writes[*w];
        Some(Claim {
            key: self.cfg.key.clone(),
            holder: w.record.holder.clone(),
            acquisition: w.record.acquisition.clone(),
            token: w.record.token,
            live_until: w.dead_at,
        })
    }

    /// A record of another protocol at the key: refused.
    pub fn mismatch(&self, record: &LeaseRecord) -> Option<LeaseError> {
        let theirs = record.protocol.as_deref()?;
        (theirs != self.cfg.protocol.name()).then(|| LeaseError::ProtocolMismatch {
            unsettled: Box::default(),
            key: self.cfg.key.clone(),
            ours: self.cfg.protocol,
            theirs: theirs.to_string(),
        })
    }
}

/// The token floor of an operator's break aimed at exactly `etag` (the
/// only case in which an unreadable object is replaced).
pub(crate) fn break_floor(kind: &Kind, etag: &Etag) -> Option<u64> {
    match kind {
        Kind::Break(BreakRequest {
            etag: seen,
            token_floor: Some(floor),
        }) if seen == etag => Some(*floor),
        _ => None,
    }
}

/// What an unreadable object at the lease key means for `kind` (a break
/// with a token floor aside, see [`break_floor`]): a holder has lost it; for
/// anyone else it is an error to fix.
pub(crate) fn unreadable(kind: &Kind, etag: Etag, error: RecordError) -> Next {
    Next::Done(match kind {
        Kind::Renew(_) => Ok(OpOutcome::Lost(LostReason::Overwritten)),
        Kind::Release(_) => Ok(OpOutcome::AlreadyLost(LostReason::Overwritten)),
        _ => Err(LeaseError::Unreadable {
            etag,
            error,
            unsettled: Box::default(),
        }),
    })
}

/// A reply to one of a protocol's calls, as its steps see it.
pub(crate) struct Answer<'p> {
    /// The call it answers.
    pub plan: &'p Plan,
    /// The call's index in [`Ctx::writes`], when it was a write.
    pub write: Option<usize>,
    /// The reply's store date (the local clock's stand-in without one).
    pub date: StoreDate,
    /// What the store said.
    pub reply: ReplyKind,
}

impl<'p> Answer<'p> {
    /// The call, the write's index, the date and the reply.
    pub fn parts(self) -> (&'p Plan, Option<usize>, StoreDate, ReplyKind) {
        (self.plan, self.write, self.date, self.reply)
    }
}

/// A protocol's decisions (see the module docs).
pub(crate) trait Steps {
    /// The first call (or an outcome known without one).
    fn first(&mut self, cx: &mut Ctx) -> Next;
    /// Decides what follows a reply. Terminal replies (denied, no bucket,
    /// unsupported, unexpected) never reach here.
    fn reply(&mut self, cx: &mut Ctx, now: Now, answer: Answer<'_>) -> Next;
    /// The operation being run.
    fn kind(&self) -> &Kind;

    /// The first call of an acquire that starts from a read the caller
    /// made, which showed the lease free.
    fn resume(&mut self, cx: &mut Ctx, seen: &Observation) -> Plan;

    /// The first call of an acquire whose caller just read the key and
    /// found nothing there: the create itself, with no second read.
    /// `None`: the protocol starts as usual (epochs marks a key before its
    /// first epoch).
    fn resume_absent(&mut self, _cx: &mut Ctx) -> Option<Plan> {
        None
    }

    /// The conditional write that gives `lease` back: used when a record
    /// was won too late to be of use.
    fn give_back(&self, cx: &mut Ctx, lease: &Lease) -> Plan;

    /// Whether a create that won but cannot be kept (a pending win) is
    /// given back by deleting it, which leaves the key as it was before
    /// the create; otherwise it is given back as [`Steps::give_back`] does.
    fn gives_back_creates_by_delete(&self) -> bool {
        true
    }

    /// The local deadline of a held lease being renewed: when it passes,
    /// the operation ends with [`OpOutcome::Lost`].
    fn deadline(&self) -> Option<Mono> {
        match self.kind() {
            Kind::Renew(lease) => Some(lease.valid_until),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
enum State {
    Ready(Plan),
    /// The call is under way (its id and timeout are in `Ctx::calls`).
    InFlight {
        plan: Plan,
        write: Option<usize>,
        sent: Mono,
    },
    /// Waiting in `Ctx::calls` (a backoff, the store's write spacing, or a
    /// protocol's own wait) before this call.
    Backoff(Plan),
    /// The outcome is known; the queued cleanups run first.
    CleaningUp,
    Finished(Option<Result<OpOutcome, LeaseError>>),
}

/// Runs a protocol's [`Steps`] as a machine.
#[derive(Clone, Debug)]
pub(crate) struct Engine<S> {
    cx: Ctx,
    steps: S,
    state: State,
    /// The outcome, once known (reported after the cleanups).
    outcome: Option<Result<OpOutcome, LeaseError>>,
    /// A record won too late is being given back; then this is reported.
    giving_back: Option<Result<OpOutcome, LeaseError>>,
    /// A renewal passed its lease's deadline with a write unanswered: the
    /// operation reads on (no more writes) to say what became of it.
    settling: bool,
    /// An event to hand out at the next poll (the loss at the deadline of
    /// a renewal that reads on).
    event: Option<Event>,
    started: bool,
}

impl<S: Steps> Engine<S> {
    pub fn new(cfg: LeaseConfig, entropy: Entropy, mut steps: S) -> Engine<S> {
        let valid = cfg.validate();
        // A held lease's writes are stamped from the store clock it saw.
        let (clock, inherited_strays) = match steps.kind() {
            Kind::Renew(lease) | Kind::Release(lease) => (Some(lease.clock), lease.strays_until),
            _ => (None, None),
        };
        // Writes keep `min_write_interval` apart, counted from the write
        // that established a lease being renewed or released.
        let mut calls = Calls::new(&cfg);
        if let Kind::Renew(lease) | Kind::Release(lease) = steps.kind() {
            calls.wrote(&lease.key, lease.written_at);
        }
        let mut cx = Ctx {
            cfg,
            entropy,
            calls,
            clock,
            writes: Vec::new(),
            claims: Vec::new(),
            inherited_strays,
            by: None,
            release_maybe_landed: false,
            release_late_unclear: false,
            pending_win: None,
            acquisition: None,
            cleanups: Vec::new(),
            runs_seen: (0, Vec::new()),
            simple_seen: false,
        };
        let first = match valid {
            Ok(()) => steps.first(&mut cx),
            Err(e) => Next::Done(Err(e.into())),
        };
        let mut engine = Engine {
            cx,
            steps,
            state: State::Finished(None),
            outcome: None,
            giving_back: None,
            settling: false,
            event: None,
            started: false,
        };
        engine.apply(first);
        engine
    }

    /// An acquire starting from `seen`, a read the caller just made: when
    /// it showed the lease free, the first call is the one taking it over.
    pub fn acquire_from(cfg: LeaseConfig, entropy: Entropy, steps: S, seen: &Observation) -> Self {
        let mut engine = Engine::new(cfg, entropy, steps);
        engine.cx.saw(&seen.record);
        // A record of another protocol (an epochs marker, released and
        // token 0, reads as free): refused before any write, as the read
        // the acquire would have made refuses it.
        let mismatch = engine.cx.mismatch(&seen.record);
        if let (Some(e), false) = (mismatch, mutant!(NoProtocolCheck)) {
            engine.state = State::Finished(Some(Err(e)));
            return engine;
        }
        if seen.free && matches!(engine.state, State::Ready(_)) {
            engine.cx.clock = Some((seen.date, seen.read_at));
            let plan = engine.steps.resume(&mut engine.cx, seen);
            engine.state = State::Ready(plan);
        }
        engine
    }

    /// An acquire whose caller just read the key and found no object, the
    /// read's store date anchored at `clock` (its date and local send
    /// time): the first call is the conditional create where the protocol
    /// allows it, its record stamped from that date as after the
    /// acquire's own read (never from the local wall clock, which may be
    /// far off).
    pub fn acquire_absent(
        cfg: LeaseConfig,
        entropy: Entropy,
        steps: S,
        clock: (StoreDate, Mono),
    ) -> Self {
        let mut engine = Engine::new(cfg, entropy, steps);
        if matches!(engine.state, State::Ready(_)) {
            if let Some(plan) = engine.steps.resume_absent(&mut engine.cx) {
                engine.cx.clock = Some(clock);
                engine.state = State::Ready(plan);
            }
        }
        engine
    }

    /// The store date the operation's replies anchored (its latest), with
    /// the local send time of the call it answered.
    pub fn store_clock(&self) -> Option<(StoreDate, Mono)> {
        self.cx.clock
    }

    pub fn with_ids_from(mut self, next: u64) -> Self {
        self.cx.calls = self.cx.calls.with_ids_from(next);
        self
    }

    /// Records of ours from earlier operations (see [`Claim`]).
    pub fn with_claims(mut self, claims: Vec<Claim>) -> Self {
        self.cx.claims = claims;
        self
    }

    /// Ends the operation at `by` at the latest, as its own deadline would
    /// (a mutex release waiting out its strays included).
    pub fn with_deadline(mut self, by: Mono) -> Self {
        self.cx.by = Some(by);
        self
    }

    pub fn next_id(&self) -> u64 {
        self.cx.calls.next_id()
    }

    fn apply(&mut self, next: Next) {
        self.state = match next {
            Next::Send(plan) => State::Ready(plan),
            Next::At(until, then) => {
                self.cx.calls.hold_until(until);
                State::Backoff(then)
            }
            Next::Done(outcome) => {
                if let Ok(OpOutcome::Acquired(lease) | OpOutcome::Renewed(lease)) = &outcome {
                    // Never clean up the object reported as held (one
                    // queued for deletion, then found to be ours after all).
                    self.cx.cleanups.retain(|(key, _)| *key != lease.key);
                }
                let mut outcome = outcome;
                if let Ok(OpOutcome::Busy(busy)) = &mut outcome {
                    // Lost the race, perhaps with a create of ours still in
                    // the network: it would land once the key is free.
                    busy.unsettled = self.cx.claim().into_iter().collect();
                    // The read that found it busy is the latest reply.
                    busy.expires_in = self.cx.clock.map(|(date, _)| {
                        std::time::Duration::from_millis(
                            busy.expires_at.0.saturating_sub(date.unix_ms.0),
                        )
                    });
                }
                if let Err(e) = &mut outcome {
                    // Ended by an error with a write still open (unanswered,
                    // or refused and not read back): it may land, so the
                    // error hands it on, whatever the error (a protocol
                    // mismatch found while a create is held in the
                    // network, say).
                    if let Some(claim) = self.cx.claim() {
                        e.hand_on(claim);
                    }
                }
                if let (Err(e), Some(claim)) = (&mut outcome, self.cx.pending_claim()) {
                    // Won, then refused or failed to check the key: give
                    // the win back; the error carries it as a claim, should
                    // that fail.
                    e.hand_on(claim);
                    if let Some((w, etag)) = self.cx.pending_win.take() {
                        if !self.cx.writes[w].created || !self.steps.gives_back_creates_by_delete()
                        {
                            // It replaced a record whose token must live on
                            // (cas), or it is the newest epoch (epochs):
                            // given back as a released version.
                            let lease = self.cx.lease_from(w, etag);
                            return self.give_back(&lease, outcome);
                        }
                        // A create: deleted, the key is as it was.
                        let key = self.cx.writes[w].key.clone();
                        self.cx.cleanup(key, Some(etag));
                    }
                }
                self.outcome = Some(outcome);
                State::CleaningUp
            }
        };
    }

    /// The deadline of the lease being renewed passed before the renewal
    /// was reported: the lease is lost. A renewal that landed but was
    /// still being confirmed (epochs: the LIST after its create) is given
    /// back first, in every protocol, so no record of ours outlives the
    /// loss we report.
    fn expired(&mut self) {
        let landed = self
            .cx
            .writes
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, w)| w.landed.clone().map(|etag| (i, etag)));
        let renew = matches!(self.steps.kind(), Kind::Renew(_));
        match landed {
            Some((w, etag)) if renew => {
                let lease = self.cx.lease_from(w, etag);
                self.give_back(&lease, Ok(OpOutcome::Lost(LostReason::Expired)));
            }
            // Its write unanswered: it may land, or have landed. The
            // lease counts as lost (a holder stops its work at its
            // deadline, not at this report), but the outcome waits for
            // what a read can establish: renewed after all, lost, or the
            // write given back; or, out of time, an error that says the
            // write's outcome is unknown and hands it on as a claim.
            None if renew && !self.settling && self.cx.writes.iter().any(|w| !w.answered) => {
                self.settling = true;
                // The timer fires on time all the same: whoever drives
                // this renewal hears of the loss now.
                if let Kind::Renew(lease) = self.steps.kind() {
                    self.event = Some(Event::Lost {
                        token: lease.token,
                        reason: LostReason::Expired,
                    });
                }
            }
            _ => self.state = State::Finished(Some(Ok(OpOutcome::Lost(LostReason::Expired)))),
        }
    }

    /// The lease won is no use (its deadline passed before it was
    /// confirmed): give it back, then report `then`.
    fn give_back(&mut self, lease: &Lease, then: Result<OpOutcome, LeaseError>) {
        // Whatever call or backoff was under way, the give-back goes first.
        self.cx.calls.abandon();
        self.cx.cleanups.clear();
        self.outcome = None;
        self.giving_back = Some(then);
        let plan = self.steps.give_back(&mut self.cx, lease);
        self.state = State::Ready(plan);
    }

    /// The call `plan` makes, sent now (the write spacing has let it go,
    /// see `next`): a write is stamped, and kept among the operation's.
    fn stamp(&mut self, now: Now, plan: Plan) -> StoreOp {
        let mut write = None;
        let op = match &plan {
            Plan::Get(key) => StoreOp::Get { key: key.clone() },
            Plan::List {
                prefix,
                continuation,
            } => StoreOp::List {
                prefix: prefix.clone(),
                continuation: continuation.clone(),
                max_keys: None,
            },
            Plan::Delete { key, if_match } | Plan::Cleanup { key, if_match } => StoreOp::Delete {
                key: key.clone(),
                if_match: if_match.clone(),
            },
            Plan::Mark(key) => StoreOp::Put {
                key: key.clone(),
                body: crate::record::EPOCHS_MARKER.to_vec(),
                condition: PutCondition::IfAbsent,
            },
            Plan::Write {
                key,
                condition,
                record,
            } => {
                let mut record = record.clone();
                let (expires_at, valid_until) = stamp(&self.cx.cfg, self.cx.clock, now);
                record.nonce = self.cx.entropy.id();
                if record.released {
                    // Expired before any date a reader can see from now
                    // on: a simple client, which knows only `expires_at`
                    // and compares it with its read's `Date` (whole
                    // seconds), takes a released lease at once.
                    let date = self.cx.clock.map(|(d, _)| d.unix_ms).unwrap_or_default();
                    let resolution = self.cx.cfg.date_resolution.as_millis() as u64;
                    let before = UnixMillis(date.0.saturating_sub(resolution));
                    record.expires_at = before.min(record.expires_at);
                    // When it was given back, by the same reckoning as an
                    // expiry stamped now: fair waiting's courtesy counts
                    // from it, not from the date the lease last saw.
                    let ttl = self.cx.cfg.ttl.as_millis() as u64;
                    record.released_at = Some(UnixMillis(expires_at.0.saturating_sub(ttl)));
                } else {
                    record.released_at = None;
                    record.expires_at = expires_at;
                    if record.acquired_at.is_none() {
                        let ttl = self.cx.cfg.ttl.as_millis() as u64;
                        record.acquired_at = Some(UnixMillis(expires_at.0.saturating_sub(ttl)));
                    }
                }
                let body = record.encode_fitting();
                let dead_at = dead_at(&self.cx.cfg, self.cx.clock, now);
                self.cx.writes.push(Write {
                    key: key.clone(),
                    record,
                    sent: now.mono,
                    valid_until,
                    dead_at,
                    answered: false,
                    refused_unread: false,
                    created: *condition == PutCondition::IfAbsent,
                    landed: None,
                });
                write = Some(self.cx.writes.len() - 1);
                StoreOp::Put {
                    key: key.clone(),
                    body,
                    condition: condition.clone(),
                }
            }
        };
        self.state = State::InFlight {
            plan,
            write,
            sent: now.mono,
        };
        op
    }

    /// The reply to the call under way (or its timeout).
    fn answered(
        &mut self,
        now: Now,
        plan: Plan,
        write: Option<usize>,
        sent: Mono,
        reply: StoreReply,
    ) {
        let date = note_date(&self.cx.cfg, &mut self.cx.clock, now, sent, &reply);
        self.note_reply(&plan, write, sent, &reply.kind);
        if let Plan::Cleanup { .. } = plan {
            // Best effort: whatever happened, the outcome stands.
            self.state = State::CleaningUp;
            return;
        }
        if let Some(then) = self.giving_back.take() {
            // The give-back of a record won too late: reported, not retried.
            let released = matches!(reply.kind, ReplyKind::Written { .. } | ReplyKind::Deleted);
            let outcome = match then {
                Err(LeaseError::WonTooLate {
                    token, unsettled, ..
                }) => Err(LeaseError::WonTooLate {
                    token,
                    released,
                    unsettled: if released { Box::default() } else { unsettled },
                }),
                other => other,
            };
            self.state = State::Finished(Some(outcome));
            return;
        }
        if let Some(e) = crate::protocol::machine::terminal_error(&reply.kind) {
            return self.apply(Next::Done(Err(e)));
        }
        let answer = Answer {
            plan: &plan,
            write,
            date,
            reply: reply.kind,
        };
        let next = self.steps.reply(&mut self.cx, now, answer);
        self.apply(next);
    }

    /// What a reply tells about the operation's writes, whatever the
    /// protocol does next: which copy is answered or still open, the
    /// record seen, the refused writes a read settles, a release that may
    /// have landed.
    fn note_reply(&mut self, plan: &Plan, write: Option<usize>, sent: Mono, reply: &ReplyKind) {
        let unclear = matches!(
            reply,
            ReplyKind::Transport { .. } | ReplyKind::ServerError { .. }
        );
        if let Some(w) = write {
            // Only a lost reply or a 5xx leaves this copy's outcome open; a
            // refusal leaves open whether another copy applied.
            let w = &mut self.cx.writes[w];
            w.answered = !unclear;
            w.refused_unread = !unclear && !matches!(reply, ReplyKind::Written { .. });
            if let ReplyKind::Written { etag: Some(etag) } = reply {
                w.landed = Some(etag.clone());
            }
        }
        if let (Plan::Get(key), ReplyKind::Found { body, .. }) = (plan, reply) {
            // The lease's own objects only (its key, its epochs): not the
            // session an owned key names.
            let ours = *key == self.cx.cfg.key
                || key
                    .strip_prefix(self.cx.cfg.key.as_str())
                    .is_some_and(|rest| rest.starts_with('/'));
            if let (true, Ok(record)) = (ours, LeaseRecord::decode(body)) {
                self.cx.saw(&record);
            }
        }
        if let (Plan::Get(key), ReplyKind::Found { .. } | ReplyKind::Missing) = (plan, reply) {
            // What the key holds now settles every refused write to it: a
            // record of ours there is recognised by the protocol, and none
            // there means none of them is live.
            for w in self.cx.writes.iter_mut().filter(|w| w.key == *key) {
                w.refused_unread = false;
            }
        }
        if let (Kind::Release(lease), Plan::Write { .. } | Plan::Delete { .. }, true) =
            (self.steps.kind(), plan, unclear)
        {
            self.cx.release_maybe_landed |= sent < lease.valid_until;
            self.cx.release_late_unclear |=
                sent >= lease.valid_until && !mutant!(LateReleaseAlreadyLost);
        }
    }

    /// An outcome ready to be reported, or given back when it holds a
    /// lease whose deadline passed.
    fn report(&mut self, now: Now, outcome: Result<OpOutcome, LeaseError>) {
        match outcome {
            Ok(OpOutcome::Acquired(lease))
                if now.mono >= lease.valid_until && !mutant!(TrustLateWin) =>
            {
                let token = lease.token;
                let then = Err(LeaseError::WonTooLate {
                    token,
                    released: false,
                    unsettled: Box::new([Claim::of_lease(&self.cx.cfg, &lease)]),
                });
                self.give_back(&lease, then);
            }
            Ok(OpOutcome::Renewed(lease)) if now.mono >= lease.valid_until => {
                self.give_back(&lease, Ok(OpOutcome::Lost(LostReason::Expired)));
            }
            // The lease was ours when the release was sent and is not now:
            // the release may have landed, so "already lost" (which says
            // nothing of ours changed the store) cannot be claimed.
            Ok(OpOutcome::AlreadyLost(reason))
                if self.cx.release_maybe_landed || self.cx.release_late_unclear =>
            {
                let outcome = match self.steps.kind() {
                    // A release that recorded a completed tick tells: the
                    // holder after it carries our record's ticks on only
                    // if ours landed (it took over from it). A simple
                    // client's record carries none, whether it took over
                    // through our release or after the lease's expiry: no
                    // telling.
                    Kind::Release(lease)
                        if self.cx.release_maybe_landed
                            && !self.cx.carried(lease)
                            && (!self.cx.simple_seen || mutant!(SimpleRecordCarriesTicks)) =>
                    {
                        OpOutcome::AlreadyLost(reason)
                    }
                    Kind::Release(lease)
                        if self.cx.release_maybe_landed && self.cx.carried(lease) =>
                    {
                        OpOutcome::Released { token: lease.token }
                    }
                    // Sent only at or after the deadline (or over a simple
                    // client's record, above): another holder may have
                    // come in through it, or after the lease expired;
                    // "already lost" would claim the former impossible.
                    Kind::Release(lease) => OpOutcome::ReleaseUnknown {
                        token: lease.token,
                        now: reason,
                    },
                    _ => OpOutcome::AlreadyLost(reason),
                };
                self.state = State::Finished(Some(Ok(outcome)));
            }
            outcome => self.state = State::Finished(Some(outcome)),
        }
    }

    /// The operation's deadline passed: report what is known, or give up
    /// saying so.
    fn out_of_time(&mut self, now: Now) {
        let outcome = match (self.giving_back.take(), self.outcome.take()) {
            (Some(then), _) => then,
            (None, Some(outcome)) => outcome,
            (None, None) => Err(self.cx.gave_up(self.cx.calls.deadline_passed(&self.cx.cfg))),
        };
        self.state = State::Finished(None);
        self.report(now, outcome);
        if let State::Ready(_) = self.state {
            // A give-back needs time there is no more of.
            let then = self.giving_back.take();
            self.state = State::Finished(then);
        }
    }
    /// The deadline of the lease being renewed (before the outcome), or of
    /// the lease won (cleanups under way: its holder must hear of it
    /// before then).
    fn lease_deadline(&self) -> Option<Mono> {
        match &self.outcome {
            _ if self.giving_back.is_some() || self.settling => None,
            None => self.steps.deadline(),
            Some(Ok(OpOutcome::Acquired(l) | OpOutcome::Renewed(l))) => Some(l.valid_until),
            Some(_) => None,
        }
    }

    pub fn poll(&mut self, now: Now) -> Output<Result<OpOutcome, LeaseError>> {
        calls::poll(self, now)
    }

    pub fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        calls::handle_reply(self, now, id, reply)
    }
}

/// The engine on the one poll loop ([`calls::poll`]): the lease's
/// deadlines first, then the operation's (the call discipline's turn),
/// then the state's own turn.
impl<S: Steps> OneAtATime for Engine<S> {
    type Outcome = Result<OpOutcome, LeaseError>;

    fn calls(&mut self) -> (&LeaseConfig, &mut Calls) {
        (&self.cx.cfg, &mut self.cx.calls)
    }

    fn take_outcome(&mut self, _now: Now) -> Option<Self::Outcome> {
        match &mut self.state {
            State::Finished(out) => out.take(),
            _ => None,
        }
    }

    fn is_parked(&self) -> bool {
        matches!(self.state, State::Finished(None))
    }

    fn event(&mut self) -> Option<Event> {
        self.event.take()
    }

    fn own_deadlines(&mut self, now: Now) -> bool {
        if !self.started {
            self.started = true;
            let mut deadline = op_deadline(&self.cx.cfg, now.mono);
            if let Some(strays) = self.cx.inherited_strays {
                // A mutex release waits out its strays; leave it the time.
                deadline = deadline.max(strays + self.cx.cfg.op_timeout);
            }
            let limited = self.cx.by.is_some_and(|by| by < deadline);
            if let Some(by) = self.cx.by {
                deadline = deadline.min(by);
            }
            self.cx.calls.start_limited(deadline, limited);
        }
        if self.lease_deadline().is_none_or(|d| now.mono < d) {
            return false;
        }
        match self.outcome.take() {
            Some(outcome) => self.report(now, outcome),
            None => self.expired(),
        }
        true
    }

    fn on_expired(&mut self, now: Now, _error: LeaseError) {
        self.out_of_time(now)
    }

    fn wait(&mut self, _now: Now, at: Mono) -> Option<Mono> {
        Some(self.lease_deadline().map_or(at, |d| at.min(d)))
    }

    /// The reply to the call under way, or its timeout. A confirmation
    /// that came after the lease already counted as lost gives back a
    /// renewal that landed instead of keeping it.
    fn on_reply(&mut self, now: Now, _wrote: bool, reply: StoreReply) {
        if !matches!(self.state, State::InFlight { .. }) {
            // The machine moved on (a loss at the deadline); a late reply.
            return;
        }
        let State::InFlight { plan, write, sent } =
            std::mem::replace(&mut self.state, State::Finished(None))
        else {
            return;
        };
        let too_late = self.outcome.is_none()
            && self.giving_back.is_none()
            && !self.settling
            && self.steps.deadline().is_some_and(|d| now.mono >= d);
        if too_late {
            if let (Some(w), ReplyKind::Written { etag: Some(etag) }) = (write, &reply.kind) {
                self.cx.writes[w].answered = true;
                self.cx.writes[w].landed = Some(etag.clone());
            }
            self.expired();
            if self.settling {
                // Reading on past the deadline: this reply is the first
                // thing to settle by.
                self.answered(now, plan, write, sent, reply);
            }
            return;
        }
        self.answered(now, plan, write, sent, reply);
    }

    /// The state's own turn, when free to call: one match over the states,
    /// so every way an operation moves on is in one place.
    fn next(&mut self, now: Now) -> calls::Next {
        match std::mem::replace(&mut self.state, State::Finished(None)) {
            // Not reached (a call under way is waited for, its timeout
            // answered): treated as a call whose reply never came.
            State::InFlight { plan, write, sent } => {
                let reply = StoreReply::transport(
                    TransportErrorKind::Timeout,
                    format!("no reply within {:?}", Dur(self.cx.cfg.request_timeout)),
                );
                self.answered(now, plan, write, sent, reply)
            }
            State::Ready(plan)
                if self.settling
                    && self.outcome.is_none()
                    && matches!(plan, Plan::Write { .. } | Plan::Delete { .. }) =>
            {
                // Settling sends no write past the deadline (a retry of
                // the renewal would extend a lease already counted lost).
                self.state = State::Finished(Some(Ok(OpOutcome::Lost(LostReason::Expired))));
            }
            State::Ready(plan) => {
                let wait = plan
                    .written_key()
                    .and_then(|key| self.cx.calls.write_wait(key, now.mono));
                match wait {
                    // The store's spacing holds the write back (before it
                    // is stamped: its validity counts from its send).
                    Some(until) => {
                        self.cx.calls.hold_until(until);
                        self.state = State::Backoff(plan);
                    }
                    None => return calls::Next::Call(self.stamp(now, plan)),
                }
            }
            State::Backoff(plan) => self.state = State::Ready(plan),
            State::CleaningUp => match self.cx.cleanups.pop() {
                Some((key, if_match)) => self.state = State::Ready(Plan::Cleanup { key, if_match }),
                None => match self.outcome.take() {
                    Some(outcome) => self.report(now, outcome),
                    None => self.state = State::Finished(None),
                },
            },
            finished @ State::Finished(_) => self.state = finished,
        }
        calls::Next::Again
    }
}

/// From which local time the record a write sent at `now` stamps can no
/// longer be live: its `expires_at` is `D + (now - anchor) + ttl`, and the
/// store's clock reads at least `D` when the reply carrying it left, which
/// was before `now`; so after `now + (now - anchor) + ttl` plus the drift
/// over that span and the date's lead, the stamp has passed.
fn dead_at(cfg: &LeaseConfig, clock: Option<(StoreDate, Mono)>, now: Now) -> Mono {
    let (date, anchor) = clock.unwrap_or((StoreDate::local_wall(now.wall, cfg.max_skew), now.mono));
    let elapsed = now.mono - anchor;
    let span = elapsed + cfg.ttl;
    now.mono
        + span
        + Duration::from_millis(date.ahead_ms)
        + cfg.drift_margin(span)
        + cfg.date_resolution
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
