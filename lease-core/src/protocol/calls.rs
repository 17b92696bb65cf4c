//! The call discipline every machine shares: call ids, one reply timeout,
//! an operation deadline counted from the operation's first poll, a retry
//! budget with capped, jittered backoff that honours `Retry-After` only
//! within that deadline, and the store's spacing between writes to one
//! object, and the settle-by-read rule (a read that settles a write of
//! unknown outcome is not refused for the retry budget). Every machine
//! that talks to the store makes its calls through [`Calls`], one at a
//! time, in one poll loop ([`poll`] over a [`OneAtATime`] machine): the
//! lease protocols' engine (`engine`), fenced writes, the listing, the
//! probe and the verdict's reads and writes.

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::protocol::machine::{CallId, Output};
use crate::protocol::outcome::summarize;
use crate::protocol::outcome::{Event, LeaseError};
use crate::store::{ReplyKind, StoreOp, StoreReply, TransportErrorKind};
use crate::time::{Dur, Mono, Now};
use std::time::Duration;

/// The deadline of an operation that starts at `now`: `op_timeout` later
/// (never, in the broken variant with no overall deadline).
pub(crate) fn op_deadline(cfg: &LeaseConfig, now: Mono) -> Mono {
    if mutant!(UncappedRetryAfter) {
        Mono(u64::MAX / 2)
    } else {
        now + cfg.op_timeout
    }
}

/// Why an operation tries again: a reply it got, or a step of its
/// protocol (said in words: `GaveUp::last` shows it when the retries run
/// out).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Why<'a> {
    /// The store's reply (a `Retry-After` in it is honoured).
    Reply(&'a ReplyKind),
    /// A step of the protocol: what it does again, and why.
    Step(&'static str),
}

impl Why<'_> {
    fn said(self) -> String {
        match self {
            Why::Reply(kind) => summarize(kind),
            Why::Step(step) => step.to_string(),
        }
    }
}

impl<'a> From<&'a ReplyKind> for Why<'a> {
    fn from(kind: &'a ReplyKind) -> Self {
        Why::Reply(kind)
    }
}

impl From<&'static str> for Why<'_> {
    fn from(step: &'static str) -> Self {
        Why::Step(step)
    }
}

/// Counts retries within one operation against `max_attempts`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Retries {
    attempts: u32,
}

impl Retries {
    /// Counts one retry; `Err` once the budget is spent.
    pub(crate) fn spend(&mut self, cfg: &LeaseConfig) -> Result<(), ()> {
        self.attempts += 1;
        if self.attempts > cfg.max_attempts {
            return Err(());
        }
        Ok(())
    }

    /// Attempts counted so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }

    /// When to retry after `last`: exponential from `backoff_base`, capped
    /// at `backoff_max`, with "equal jitter" (half fixed, half random, so
    /// retries spread out but never collapse to zero), and never before the
    /// server's `Retry-After`.
    pub(crate) fn backoff_until(
        &self,
        cfg: &LeaseConfig,
        entropy: &mut Entropy,
        now: Mono,
        why: Why<'_>,
    ) -> Mono {
        let exp = cfg
            .backoff_base
            .saturating_mul(1u32 << self.attempts.saturating_sub(1).min(16));
        let cap = exp.min(cfg.backoff_max);
        let delay = cap / 2 + cap.mul_f64(entropy.unit() / 2.0);
        let retry_after = match why {
            Why::Reply(ReplyKind::Throttled { retry_after }) => retry_after.unwrap_or_default(),
            _ => Default::default(),
        };
        now + delay.max(retry_after)
    }
}

/// Keeps writes to one object at least `min_write_interval` apart
/// (`LeaseConfig::min_write_interval`: GCS allows about one write per second
/// per object).
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteSpacing {
    interval: Duration,
    /// The last send of a write, per key (a handful of keys at most).
    last: Vec<(String, Mono)>,
}

impl WriteSpacing {
    pub(crate) fn new(interval: Duration) -> Self {
        WriteSpacing {
            interval,
            last: Vec::new(),
        }
    }

    /// Notes a write to `key` sent at `at`.
    pub(crate) fn wrote(&mut self, key: &str, at: Mono) {
        if self.interval.is_zero() {
            return;
        }
        match self.last.iter_mut().find(|(k, _)| k == key) {
            Some((_, last)) => *last = (*last).max(at),
            None => self.last.push((key.to_string(), at)),
        }
    }

    /// The earliest time a write to `key` may be sent, when that is after
    /// `now`.
    pub(crate) fn wait_until(&self, key: &str, now: Mono) -> Option<Mono> {
        let (_, last) = self.last.iter().find(|(k, _)| k == key)?;
        let at = *last + self.interval;
        (now < at).then_some(at)
    }
}

/// What a machine making one call at a time finds at a poll.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Turn {
    /// A call or a backoff is under way: poll again then.
    Wait(Mono),
    /// Free to make the next call.
    Free,
    /// The call under way got no reply within the reply timeout: this is
    /// its reply (a transport timeout), and whether it wrote.
    TimedOut(StoreReply, bool),
    /// The operation's deadline passed: it ends with this error.
    Expired(LeaseError),
}

/// An operation out of retries or out of time: attempts made and why.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GiveUp {
    pub attempts: u32,
    pub last: String,
}

impl GiveUp {
    /// As the error that ends the operation, handing on `unsettled`.
    pub(crate) fn error(self, unsettled: Box<[crate::protocol::outcome::Claim]>) -> LeaseError {
        LeaseError::GaveUp {
            attempts: self.attempts,
            last: self.last,
            unsettled,
        }
    }
}

/// One call at a time with the shared discipline (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Calls {
    next_id: u64,
    /// The call under way: its id, when it times out, whether it writes.
    in_flight: Option<(CallId, Mono, bool)>,
    backoff_until: Option<Mono>,
    retries: Retries,
    spacing: WriteSpacing,
    /// The operation's deadline, set at its first poll.
    deadline: Option<Mono>,
    /// Whether the caller's end (a run's time limit) set the deadline,
    /// before `op_timeout` would have.
    limited: bool,
    request_timeout: Duration,
}

impl Calls {
    pub(crate) fn new(cfg: &LeaseConfig) -> Calls {
        Calls {
            next_id: 1,
            in_flight: None,
            backoff_until: None,
            retries: Retries::default(),
            spacing: WriteSpacing::new(cfg.min_write_interval),
            deadline: None,
            limited: false,
            request_timeout: cfg.request_timeout,
        }
    }

    /// Call ids continue from `next` (to share an id space with other
    /// machines of the same node).
    pub(crate) fn with_ids_from(mut self, next: u64) -> Calls {
        self.next_id = next;
        self
    }

    /// What a poll at `now` finds; the first poll starts the operation's
    /// deadline, and no wait runs past it.
    pub(crate) fn turn(&mut self, cfg: &LeaseConfig, now: Mono) -> Turn {
        let deadline = *self.deadline.get_or_insert_with(|| op_deadline(cfg, now));
        if now >= deadline {
            self.in_flight = None;
            return Turn::Expired(LeaseError::GaveUp {
                attempts: self.retries.attempts(),
                last: self.deadline_passed(cfg),
                unsettled: Box::default(),
            });
        }
        if let Some((_, timeout_at, write)) = self.in_flight {
            if now < timeout_at {
                return Turn::Wait(timeout_at.min(deadline));
            }
            self.in_flight = None;
            let reply = StoreReply::transport(
                TransportErrorKind::Timeout,
                format!("no reply within {:?}", Dur(self.request_timeout)),
            );
            return Turn::TimedOut(reply, write);
        }
        match self.backoff_until {
            Some(until) if now < until => Turn::Wait(until.min(deadline)),
            _ => {
                self.backoff_until = None;
                Turn::Free
            }
        }
    }

    /// Makes `op` now, or, for a write the store's spacing holds back,
    /// waits until it may go (`Err`: the time to poll again).
    pub(crate) fn send<T>(&mut self, now: Mono, op: StoreOp) -> Result<Output<T>, Mono> {
        let write = op.is_write();
        if write {
            if let Some(until) = self.spacing.wait_until(op.key(), now) {
                self.backoff_until = Some(until);
                return Err(until);
            }
            self.spacing.wrote(op.key(), now);
        }
        let id = CallId(self.next_id);
        self.next_id += 1;
        self.in_flight = Some((id, now + self.request_timeout, write));
        Ok(Output::Call(id, op))
    }

    /// Whether `id` is the call under way; if so it is answered, and this
    /// says whether it wrote.
    pub(crate) fn answer(&mut self, id: CallId) -> Option<bool> {
        match self.in_flight {
            Some((expected, _, write)) if expected == id => {
                self.in_flight = None;
                Some(write)
            }
            _ => None,
        }
    }

    /// Counts one retry after `last` at `now` and schedules it (at once,
    /// or after a backoff); the error once the retry budget is spent or the
    /// backoff (a `Retry-After` included) would pass the deadline.
    pub(crate) fn retry(
        &mut self,
        cfg: &LeaseConfig,
        entropy: &mut Entropy,
        now: Mono,
        last: &ReplyKind,
        backoff: bool,
    ) -> Result<(), LeaseError> {
        self.retry_settling(
            cfg,
            entropy,
            Why::Reply(last),
            backoff.then_some(now),
            false,
        )
        .map(|_| ())
        .map_err(|e| e.error(Box::default()))
    }

    /// [`Calls::retry`], with the settle-by-read rule: with `settling` (the
    /// retry is a read that settles a write of unknown outcome) a spent
    /// budget does not end the operation; only its deadline does, since
    /// giving up would leave a write that may have landed unaccounted for.
    /// With `backoff_from`, the retry waits a backoff counted from then;
    /// `Ok` carries the end of that backoff.
    pub(crate) fn retry_settling(
        &mut self,
        cfg: &LeaseConfig,
        entropy: &mut Entropy,
        why: Why<'_>,
        backoff_from: Option<Mono>,
        settling: bool,
    ) -> Result<Option<Mono>, GiveUp> {
        if self.retries.spend(cfg).is_err() && !settling {
            return Err(GiveUp {
                attempts: self.retries.attempts(),
                last: why.said(),
            });
        }
        let Some(now) = backoff_from else {
            return Ok(None);
        };
        let deadline = *self.deadline.get_or_insert_with(|| op_deadline(cfg, now));
        let until = self.retries.backoff_until(cfg, entropy, now, why);
        if until >= deadline {
            return Err(GiveUp {
                attempts: self.retries.attempts(),
                last: format!(
                    "{}; waiting {:?} would pass {}",
                    why.said(),
                    Dur(until - now),
                    self.deadline_named(cfg)
                ),
            });
        }
        self.backoff_until = Some(until);
        Ok(Some(until))
    }

    /// Sets the operation's deadline before its first poll (a mutex
    /// release that waits out its strays needs longer than `op_timeout`).
    pub(crate) fn start(&mut self, deadline: Mono) {
        self.start_limited(deadline, false);
    }

    /// [`start`](Self::start), saying whether the caller's end (a run's
    /// time limit) set the deadline.
    pub(crate) fn start_limited(&mut self, deadline: Mono, limited: bool) {
        if self.deadline.is_none() {
            self.deadline = Some(deadline);
            self.limited = limited;
        }
    }

    /// What ended the operation's time, in words: its `op_timeout`, or
    /// the caller's end (a run's time limit).
    pub(crate) fn deadline_named(&self, cfg: &LeaseConfig) -> String {
        if self.limited {
            "the run's time limit".to_string()
        } else {
            format!(
                "the operation's deadline (op_timeout {:?})",
                Dur(cfg.op_timeout)
            )
        }
    }

    /// `GaveUp::last` for an operation whose time ran out.
    pub(crate) fn deadline_passed(&self, cfg: &LeaseConfig) -> String {
        format!("{} passed", self.deadline_named(cfg))
    }

    /// Stops waiting for the call under way and for any backoff: the
    /// machine has moved on (a lease won too late is given back at once);
    /// a reply to the abandoned call is ignored.
    pub(crate) fn abandon(&mut self) {
        self.in_flight = None;
        self.backoff_until = None;
    }

    /// Waits until `until` before the next call (a protocol's own wait).
    pub(crate) fn hold_until(&mut self, until: Mono) {
        self.backoff_until = Some(self.backoff_until.map_or(until, |b| b.max(until)));
    }

    /// A write to `key` made at `at` outside these calls (the write that
    /// established a lease being renewed), for the store's spacing.
    pub(crate) fn wrote(&mut self, key: &str, at: Mono) {
        self.spacing.wrote(key, at);
    }

    /// When the store's spacing lets the next write to `key` go, if later
    /// than `now`.
    pub(crate) fn write_wait(&self, key: &str, now: Mono) -> Option<Mono> {
        self.spacing.wait_until(key, now)
    }

    /// The id the next call gets.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Whether a call is under way (not a backoff).
    pub(crate) fn call_under_way(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Retries counted so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.retries.attempts()
    }

    /// A fresh retry budget (the deadline stands).
    pub(crate) fn fresh_budget(&mut self) {
        self.retries = Retries::default();
    }
}

/// What a machine that makes one call at a time does next, when it is free
/// to call.
pub(crate) enum Next {
    /// Make this call (a write the store's spacing holds back is asked for
    /// again once the spacing lets it go).
    Call(StoreOp),
    /// Nothing to send: the machine changed its state (finished, or moved
    /// to another step); look again.
    Again,
}

/// [`Machine`](crate::protocol::machine::Machine) for a [`OneAtATime`]
/// operation ending with `$outcome`: its loop is [`poll`] and its reply
/// routing [`handle_reply`].
macro_rules! machine_of_calls {
    ($machine:ty => $outcome:ty) => {
        impl $crate::protocol::machine::Machine for $machine {
            type Outcome = $outcome;

            fn poll(
                &mut self,
                now: $crate::time::Now,
            ) -> $crate::protocol::machine::Output<$outcome> {
                $crate::protocol::calls::poll(self, now)
            }

            fn handle_reply(
                &mut self,
                now: $crate::time::Now,
                id: $crate::protocol::machine::CallId,
                reply: $crate::store::StoreReply,
            ) {
                $crate::protocol::calls::handle_reply(self, now, id, reply)
            }
        }
    };
}
pub(crate) use machine_of_calls;

/// A machine that makes one call at a time through [`Calls`]: its poll
/// loop is [`poll`] and its reply routing [`handle_reply`], written once
/// here. The machine says what it has finished with, what a reply or the
/// deadline does to it, and what it calls next.
pub(crate) trait OneAtATime {
    /// What the operation ends with.
    type Outcome;

    /// Its configuration and its calls.
    fn calls(&mut self) -> (&LeaseConfig, &mut Calls);

    /// The outcome, handed out once, when the machine has finished; the
    /// machine is then parked ([`is_parked`](Self::is_parked)).
    fn take_outcome(&mut self, now: Now) -> Option<Self::Outcome>;

    /// Whether the outcome was handed out: nothing more happens.
    fn is_parked(&self) -> bool;

    /// The operation's deadline passed (with this error).
    fn on_expired(&mut self, now: Now, error: LeaseError);

    /// The reply to the call under way (or its timeout), and whether that
    /// call wrote.
    fn on_reply(&mut self, now: Now, write: bool, reply: StoreReply);

    /// The next call, when free to make one.
    fn next(&mut self, now: Now) -> Next;

    /// Until when to wait for the call under way or a backoff that ends at
    /// `at`; `None` to stop waiting and ask [`next`](Self::next) now (a
    /// holder's deadline that cuts a backoff short).
    fn wait(&mut self, _now: Now, at: Mono) -> Option<Mono> {
        Some(at)
    }

    /// An event to hand out before anything else (a lease lost at its
    /// deadline while a renewal reads on).
    fn event(&mut self) -> Option<Event> {
        None
    }

    /// The machine's own deadlines, looked at before the call discipline's
    /// turn (a lease being renewed, a lease won): `true` when one passed
    /// and the machine moved on.
    fn own_deadlines(&mut self, _now: Now) -> bool {
        false
    }
}

/// The poll of a machine that makes one call at a time.
pub(crate) fn poll<M: OneAtATime>(m: &mut M, now: Now) -> Output<M::Outcome> {
    loop {
        if let Some(event) = m.event() {
            return Output::Event(event);
        }
        if let Some(outcome) = m.take_outcome(now) {
            return Output::Done(outcome);
        }
        if m.is_parked() {
            return Output::Wait(Mono(u64::MAX));
        }
        if m.own_deadlines(now) {
            continue;
        }
        let (cfg, calls) = m.calls();
        match calls.turn(cfg, now.mono) {
            Turn::Expired(e) => {
                m.on_expired(now, e);
                continue;
            }
            Turn::TimedOut(reply, write) => {
                m.on_reply(now, write, reply);
                continue;
            }
            Turn::Wait(at) => {
                if let Some(until) = m.wait(now, at) {
                    return Output::Wait(until);
                }
            }
            Turn::Free => {}
        }
        match m.next(now) {
            Next::Call(op) => match m.calls().1.send(now.mono, op) {
                Ok(call) => return call,
                // The store's write spacing holds it back: the next turn
                // waits until it may go.
                Err(_) => continue,
            },
            Next::Again => continue,
        }
    }
}

/// Routes a reply to a machine that makes one call at a time: an answer
/// to the call under way, or nothing (a reply to an abandoned call).
pub(crate) fn handle_reply<M: OneAtATime>(m: &mut M, now: Now, id: CallId, reply: StoreReply) {
    if let Some(write) = m.calls().1.answer(id) {
        m.on_reply(now, write, reply);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_to_one_key_are_spaced() {
        let mut s = WriteSpacing::new(Duration::from_secs(1));
        assert_eq!(s.wait_until("a", Mono(0)), None);
        s.wrote("a", Mono(500));
        assert_eq!(s.wait_until("a", Mono(600)), Some(Mono(1500)));
        assert_eq!(s.wait_until("a", Mono(1500)), None);
        assert_eq!(s.wait_until("b", Mono(600)), None, "other keys are free");
        s.wrote("a", Mono(400));
        assert_eq!(
            s.wait_until("a", Mono(600)),
            Some(Mono(1500)),
            "keeps the latest"
        );

        let mut off = WriteSpacing::new(Duration::ZERO);
        off.wrote("a", Mono(500));
        assert_eq!(off.wait_until("a", Mono(500)), None);
    }
}
