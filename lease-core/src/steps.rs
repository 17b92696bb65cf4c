//! The call engine shared by the epoch and mutex machines.
//!
//! A protocol supplies [`Steps`]: which call to make first and what to do
//! with each reply. The [`Engine`] does the rest the same way for every
//! protocol: call ids, request timeouts (a missing reply becomes a transport
//! error with an unknown outcome), backoff, the bounded retry budget, the
//! local lease deadline (a timer, checked before anything else), and the
//! stamping of every record written with a nonce, `expires_at` and the
//! local validity it buys.

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::lease::{note_date, stamp, BreakRequest, Kind};
use crate::machine::{CallId, Lease, LeaseError, LostReason, Observation, OpOutcome, Output};
use crate::record::{LeaseRecord, RecordError};
use crate::retry::{Retries, WriteSpacing};
use crate::store::{Etag, PutCondition, ReplyKind, StoreOp, StoreReply, TransportErrorKind};
use crate::time::{Mono, Now, StoreDate, UnixMillis};

/// The next call a protocol wants.
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
    /// A best-effort DELETE after the outcome is known: its reply, whatever
    /// it is, only moves on to the next cleanup.
    Cleanup(String),
}

impl Plan {
    /// The key this call writes (PUT or DELETE), if it writes.
    fn written_key(&self) -> Option<&str> {
        match self {
            Plan::Write { key, .. } | Plan::Delete { key, .. } | Plan::Cleanup(key) => Some(key),
            Plan::Get(_) | Plan::List { .. } => None,
        }
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
}

/// What the engine knows besides the protocol's own state.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    pub cfg: LeaseConfig,
    pub entropy: Entropy,
    pub retries: Retries,
    /// The latest store date and the local send time it is anchored to.
    pub clock: Option<(StoreDate, Mono)>,
    pub writes: Vec<Write>,
    session: Option<String>,
    cleanups: Vec<String>,
    spacing: WriteSpacing,
}

impl Ctx {
    /// A record for a new acquisition with `token` (one session per op).
    pub fn fresh_record(&mut self, token: u64) -> LeaseRecord {
        let session = self
            .session
            .get_or_insert_with(|| self.entropy.id())
            .clone();
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

    /// A released record an operator's break leaves behind.
    pub fn broken_record(&self, token: u64) -> LeaseRecord {
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

    /// The write of ours that `record` is, if any.
    pub fn our_write(&self, record: &LeaseRecord) -> Option<usize> {
        if record.nonce.is_empty() {
            return None;
        }
        self.writes
            .iter()
            .position(|w| w.record.nonce == record.nonce)
    }

    /// The lease our write number `write` established, as `etag`.
    pub fn lease_from(&self, write: usize, etag: Etag) -> Lease {
        let w = &self.writes[write];
        Lease {
            key: w.key.clone(),
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

    /// Spends one retry, then `plan` now (or the error once spent).
    pub fn retry(&mut self, last: &ReplyKind, plan: Plan) -> Next {
        match self.retries.spend(&self.cfg, last) {
            Ok(()) => Next::Send(plan),
            Err(e) => Next::Done(Err(e)),
        }
    }

    /// Spends one retry, then `plan` after a jittered backoff.
    pub fn retry_later(&mut self, now: Now, last: &ReplyKind, plan: Plan) -> Next {
        match self.retries.spend(&self.cfg, last) {
            Ok(()) => {
                let until =
                    self.retries
                        .backoff_until(&self.cfg, &mut self.entropy, now.mono, last);
                Next::At(until, plan)
            }
            Err(e) => Next::Done(Err(e)),
        }
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

    /// Queues a best-effort delete to run before the outcome is reported.
    pub fn cleanup(&mut self, key: String) {
        self.cleanups.push(key);
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
        _ => Err(LeaseError::Unreadable { etag, error }),
    })
}

/// A protocol's decisions (see the module docs).
pub(crate) trait Steps {
    /// The first call (or an outcome known without one).
    fn first(&mut self, cx: &mut Ctx) -> Next;
    /// Decides what follows `reply` to `plan` (`write` indexes
    /// [`Ctx::writes`] when the call was a write). Terminal replies (denied,
    /// no bucket, unsupported, unexpected) never reach here.
    fn reply(
        &mut self,
        cx: &mut Ctx,
        now: Now,
        plan: &Plan,
        write: Option<usize>,
        date: StoreDate,
        reply: ReplyKind,
    ) -> Next;
    /// The operation being run.
    fn kind(&self) -> &Kind;

    /// The first call of an acquire that starts from a read the caller
    /// made, which showed the lease free.
    fn resume(&mut self, cx: &mut Ctx, seen: &Observation) -> Plan;

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
    InFlight {
        id: CallId,
        plan: Plan,
        write: Option<usize>,
        sent: Mono,
        deadline: Mono,
    },
    Backoff {
        until: Mono,
        then: Plan,
    },
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
    next_id: u64,
    /// The outcome, once known (reported after the cleanups).
    outcome: Option<Result<OpOutcome, LeaseError>>,
}

impl<S: Steps> Engine<S> {
    pub fn new(cfg: LeaseConfig, entropy: Entropy, mut steps: S) -> Engine<S> {
        let valid = cfg.validate();
        // A held lease's writes are stamped from the store clock it saw.
        let clock = match steps.kind() {
            Kind::Renew(lease) | Kind::Release(lease) => Some(lease.clock),
            _ => None,
        };
        // Writes keep `min_write_interval` apart, counted from the write
        // that established a lease being renewed or released.
        let mut spacing = WriteSpacing::new(cfg.min_write_interval);
        if let Kind::Renew(lease) | Kind::Release(lease) = steps.kind() {
            spacing.wrote(&lease.key, lease.written_at);
        }
        let mut cx = Ctx {
            cfg,
            entropy,
            retries: Retries::default(),
            clock,
            writes: Vec::new(),
            session: None,
            cleanups: Vec::new(),
            spacing,
        };
        let first = match valid {
            Ok(()) => steps.first(&mut cx),
            Err(e) => Next::Done(Err(e.into())),
        };
        let mut engine = Engine {
            cx,
            steps,
            state: State::Finished(None),
            next_id: 1,
            outcome: None,
        };
        engine.apply(first);
        engine
    }

    /// An acquire starting from `seen`, a read the caller just made: when
    /// it showed the lease free, the first call is the one taking it over.
    pub fn acquire_from(cfg: LeaseConfig, entropy: Entropy, steps: S, seen: &Observation) -> Self {
        let mut engine = Engine::new(cfg, entropy, steps);
        if seen.free && matches!(engine.state, State::Ready(_)) {
            engine.cx.clock = Some((seen.date, seen.read_at));
            let plan = engine.steps.resume(&mut engine.cx, seen);
            engine.state = State::Ready(plan);
        }
        engine
    }

    pub fn with_ids_from(mut self, next: u64) -> Self {
        self.next_id = next;
        self
    }

    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    fn apply(&mut self, next: Next) {
        self.state = match next {
            Next::Send(plan) => State::Ready(plan),
            Next::At(until, then) => State::Backoff { until, then },
            Next::Done(outcome) => {
                self.outcome = Some(outcome);
                State::CleaningUp
            }
        };
    }

    fn send(&mut self, now: Now, plan: Plan) -> Output<Result<OpOutcome, LeaseError>> {
        let id = CallId(self.next_id);
        self.next_id += 1;
        let deadline = now.mono + self.cx.cfg.request_timeout;
        if let Some(key) = plan.written_key() {
            self.cx.spacing.wrote(key, now.mono);
        }
        let mut write = None;
        let op = match &plan {
            Plan::Get(key) => StoreOp::Get { key: key.clone() },
            Plan::List {
                prefix,
                continuation,
            } => StoreOp::List {
                prefix: prefix.clone(),
                continuation: continuation.clone(),
            },
            Plan::Delete { key, if_match } => StoreOp::Delete {
                key: key.clone(),
                if_match: if_match.clone(),
            },
            Plan::Cleanup(key) => StoreOp::Delete {
                key: key.clone(),
                if_match: None,
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
                    let date = self.cx.clock.map(|(d, _)| d.unix_ms).unwrap_or_default();
                    record.expires_at = date.min(record.expires_at);
                } else {
                    record.expires_at = expires_at;
                    if record.acquired_at.is_none() {
                        let ttl = self.cx.cfg.ttl.as_millis() as u64;
                        record.acquired_at = Some(UnixMillis(expires_at.0.saturating_sub(ttl)));
                    }
                }
                let body = record.encode();
                self.cx.writes.push(Write {
                    key: key.clone(),
                    record,
                    sent: now.mono,
                    valid_until,
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
            id,
            plan,
            write,
            sent: now.mono,
            deadline,
        };
        Output::Call(id, op)
    }

    fn on_reply(
        &mut self,
        now: Now,
        plan: Plan,
        write: Option<usize>,
        sent: Mono,
        reply: StoreReply,
    ) {
        let date = note_date(&self.cx.cfg, &mut self.cx.clock, now, sent, &reply);
        if let Plan::Cleanup(_) = plan {
            // Best effort: whatever happened, the outcome stands.
            self.state = State::CleaningUp;
            return;
        }
        if let Some(e) = crate::machine::terminal_error(&reply.kind) {
            return self.apply(Next::Done(Err(e)));
        }
        let next = self
            .steps
            .reply(&mut self.cx, now, &plan, write, date, reply.kind);
        self.apply(next);
    }

    pub fn poll(&mut self, now: Now) -> Output<Result<OpOutcome, LeaseError>> {
        loop {
            if let State::Finished(out) = &mut self.state {
                return match out.take() {
                    Some(o) => Output::Done(o),
                    None => Output::Wait(Mono(u64::MAX)),
                };
            }
            // Before the outcome: the deadline of the lease being renewed.
            // After it (cleanups under way): the deadline of the lease won,
            // whose holder must hear of it before then.
            let lease_deadline = match &self.outcome {
                None => self.steps.deadline(),
                Some(Ok(OpOutcome::Acquired(l) | OpOutcome::Renewed(l))) => Some(l.valid_until),
                Some(_) => None,
            };
            if lease_deadline.is_some_and(|d| now.mono >= d) {
                self.state = State::Finished(Some(match self.outcome.take() {
                    Some(outcome) => outcome,
                    None => Ok(OpOutcome::Lost(LostReason::Expired)),
                }));
                continue;
            }
            let lease_deadline = lease_deadline.unwrap_or(Mono(u64::MAX));
            match std::mem::replace(&mut self.state, State::Finished(None)) {
                State::Ready(plan) => {
                    let wait = plan
                        .written_key()
                        .and_then(|key| self.cx.spacing.wait_until(key, now.mono));
                    if let Some(until) = wait {
                        self.state = State::Backoff { until, then: plan };
                        continue;
                    }
                    return self.send(now, plan);
                }
                State::InFlight {
                    id,
                    plan,
                    write,
                    sent,
                    deadline,
                } => {
                    if now.mono >= deadline {
                        let reply = StoreReply::transport(
                            TransportErrorKind::Timeout,
                            format!("no reply within {:?}", self.cx.cfg.request_timeout),
                        );
                        self.on_reply(now, plan, write, sent, reply);
                        continue;
                    }
                    self.state = State::InFlight {
                        id,
                        plan,
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
                State::CleaningUp => match self.cx.cleanups.pop() {
                    Some(key) => self.state = State::Ready(Plan::Cleanup(key)),
                    None => self.state = State::Finished(self.outcome.take()),
                },
                finished @ State::Finished(_) => self.state = finished,
            }
        }
    }
}

impl<S: Steps> Engine<S> {
    pub fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        let State::InFlight { id: expected, .. } = &self.state else {
            return;
        };
        if *expected != id {
            return;
        }
        let State::InFlight {
            plan, write, sent, ..
        } = std::mem::replace(&mut self.state, State::Finished(None))
        else {
            return;
        };
        if self.outcome.is_none() && self.steps.deadline().is_some_and(|d| now.mono >= d) {
            // Confirmation came too late: the lease already counted as lost.
            self.state = State::Finished(Some(Ok(OpOutcome::Lost(LostReason::Expired))));
            return;
        }
        self.on_reply(now, plan, write, sent, reply);
    }
}
