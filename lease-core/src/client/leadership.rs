//! Leader election for a service, [`Leadership`] (see the layer's docs, `client/mod.rs`).

use crate::client::drive::drive_until;
use crate::client::revalidate::Revalidating;
use crate::client::Leases;
use crate::config::{check_holder, ConfigError};
use crate::protocol::elector::{Elector, ElectorExit};
use crate::protocol::outcome::{Event, Leader, LeaseError};
use crate::store::Store;
use crate::time::Clock;
use crate::time::Mono;
use crate::trace::Start;
use core::fmt;
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::{Poll, Waker};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A service's view of its leadership (see [the client layer](crate::client)). Clones share
/// it.
pub struct Leadership<C> {
    shared: Arc<Shared>,
    clock: C,
    /// How long after its last confirmation a term's renewal is overdue
    /// (the renew interval and a request timeout: [`Health`]).
    overdue_after: Duration,
}

/// A leader's health, for a liveness or readiness probe (the native
/// adapter serves it as `/healthz`): as client-go's leader-election
/// health check, only a leader that is not renewing is unhealthy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Not leading: nothing to be late for.
    Following,
    /// Leading, the write that last extended its term (its renewal or
    /// acquisition) sent within a renew interval and a request timeout.
    Leading {
        /// The term's fencing token.
        token: u64,
        /// Time to the local deadline.
        time_left: Duration,
    },
    /// Leading, but no write sent in the last renew interval and request
    /// timeout has been confirmed: a renewal is overdue (the store unreachable,
    /// throttling, credentials refused), and the term ends at its deadline
    /// unless one is confirmed.
    RenewalOverdue {
        /// The term's fencing token.
        token: u64,
        /// Time to the local deadline.
        time_left: Duration,
    },
}

impl Health {
    /// The health of a holder whose term is `term` (token, local
    /// deadline, and a local time no later than the send of the write that
    /// last confirmed it), at local time `now`: overdue once
    /// `overdue_after` (the renew interval and a request timeout:
    /// [`Health::overdue_after`]) has passed since that write was sent.
    pub fn of(term: Option<(u64, Mono, Mono)>, now: Mono, overdue_after: Duration) -> Health {
        match term {
            Some((token, valid_until, confirmed_at)) if now < valid_until => {
                let time_left = valid_until - now;
                if now - confirmed_at > overdue_after && !mutant!(NeverOverdue) {
                    Health::RenewalOverdue { token, time_left }
                } else {
                    Health::Leading { token, time_left }
                }
            }
            _ => Health::Following,
        }
    }

    /// A local time no later than the send of the write that bought the
    /// local deadline `valid_until` on a lease of `ttl` (that deadline is
    /// the send time plus the ttl less the safety margins): the third part
    /// of the term [`Health::of`] takes.
    pub fn sent_by(valid_until: Mono, ttl: Duration) -> Mono {
        valid_until.saturating_sub(ttl)
    }

    /// How long after a confirmation the next renewal of a lease of `cfg`
    /// is overdue: it is sent `renew_every` after, and answered within
    /// `request_timeout`.
    pub fn overdue_after(cfg: &crate::config::LeaseConfig) -> Duration {
        cfg.renew_every + cfg.request_timeout
    }

    /// Everything but an overdue renewal.
    pub fn healthy(&self) -> bool {
        !matches!(self, Health::RenewalOverdue { .. })
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Health::Following => f.write_str("not leading"),
            Health::Leading { token, time_left } => {
                write!(
                    f,
                    "leading with token {token}, {} ms to the deadline",
                    time_left.as_millis()
                )
            }
            Health::RenewalOverdue { token, time_left } => write!(
                f,
                "leading with token {token}, renewal overdue: {} ms to the deadline",
                time_left.as_millis()
            ),
        }
    }
}

impl<C: Clone> Clone for Leadership<C> {
    fn clone(&self) -> Self {
        Leadership {
            overdue_after: self.overdue_after,
            shared: self.shared.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl<C> fmt::Debug for Leadership<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("Leadership")
            .field("term", &state.term)
            .field("leader", &state.leader)
            .field("ended", &state.ended)
            .finish_non_exhaustive()
    }
}

/// Why [`Leadership::until_leader`] gave up waiting.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LeadError {
    /// The campaign was resigned.
    Resigned,
    /// The campaign met an error no retry can fix (no bucket, unusable
    /// settings, a store that cannot host leases, credentials denied).
    Failed(LeaseError),
}

impl fmt::Display for LeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeadError::Resigned => f.write_str("the campaign was resigned"),
            LeadError::Failed(e) => write!(f, "the campaign ended: {e}"),
        }
    }
}

impl std::error::Error for LeadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LeadError::Resigned => None,
            LeadError::Failed(e) => Some(e),
        }
    }
}

/// One term as leader: its fencing token and local deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Term {
    /// Counts the terms of this campaign (1 for the first): a term is
    /// told from the next by it, not by its token (a mutex's repeat).
    number: u64,
    token: u64,
    valid_until: Mono,
    /// The deadline less the ttl: no later than the local send time of the
    /// write that last confirmed the term (its acquisition or renewal).
    confirmed_at: Mono,
}

#[derive(Debug, Default)]
struct State {
    term: Option<Term>,
    /// Terms begun so far (the number of the latest).
    terms: u64,
    leader: Option<Leader>,
    ended: Option<ElectorExit>,
    resign: bool,
    /// A planned handoff asked for ([`Leadership::hand_over`]).
    successor: Option<String>,
    /// Bumped on every change, so a waiter knows whether it missed one.
    version: u64,
    wakers: Vec<Waker>,
}

/// A state a handle shares with its campaign: every change bumps its
/// version and wakes the tasks waiting for one (a [`Leadership`]'s, a
/// shard member's).
#[derive(Debug, Default)]
pub(crate) struct Watched<T>(Mutex<T>);

/// What [`Watched`] needs of its state: its version and the tasks
/// waiting for the next.
pub(crate) trait Versioned {
    fn versioned(&mut self) -> (&mut u64, &mut Vec<Waker>);
}

impl<T: Versioned> Watched<T> {
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn update(&self, change: impl FnOnce(&mut T)) {
        let wakers = {
            let mut state = self.lock();
            change(&mut state);
            let (version, wakers) = state.versioned();
            *version += 1;
            std::mem::take(wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Completes once the state changes after version `since`.
    pub(crate) fn changed(&self, since: u64) -> impl Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            let mut state = self.lock();
            let (version, wakers) = state.versioned();
            if *version != since {
                return Poll::Ready(());
            }
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
    }
}

impl Versioned for State {
    fn versioned(&mut self) -> (&mut u64, &mut Vec<Waker>) {
        (&mut self.version, &mut self.wakers)
    }
}

type Shared = Watched<State>;

impl Shared {
    fn apply(&self, event: &Event, ttl: Duration) {
        match event {
            Event::Acquired { token, valid_until } | Event::Renewed { token, valid_until } => {
                let renewed = matches!(event, Event::Renewed { .. });
                self.update(|s| {
                    // Resigned: no term from now on, whatever a renewal
                    // in flight confirms (its release comes next).
                    if s.resign && !mutant!(YesUntilReleased) {
                        s.term = None;
                        return;
                    }
                    let number = match s.term {
                        Some(t) if renewed => t.number,
                        _ => {
                            s.terms += 1;
                            s.terms
                        }
                    };
                    s.term = Some(Term {
                        number,
                        token: *token,
                        valid_until: *valid_until,
                        confirmed_at: Health::sent_by(*valid_until, ttl),
                    });
                });
            }
            Event::Lost { .. } | Event::Released { .. } => self.update(|s| s.term = None),
            // The handoff's release is next: from now on, no term.
            Event::HandingOver { .. } if !mutant!(HandoverKeepsYes) => self.update(|s| {
                s.resign = true;
                s.term = None;
            }),
            Event::HandingOver { .. } => {}
            Event::LeaderChanged(leader) => self.update(|s| s.leader = leader.clone()),
            Event::AtRisk { .. } | Event::Error(_) => {}
        }
    }
}

impl<C: Clock> Leadership<C> {
    /// The current term, if its local deadline has not passed and the
    /// campaign was not resigned.
    fn term(&self) -> (Option<Term>, u64) {
        let now = self.clock.now().mono;
        let state = self.shared.lock();
        let resigned = state.resign && !mutant!(YesUntilReleased);
        let term = state.term.filter(|t| now < t.valid_until && !resigned);
        (term, state.version)
    }

    /// The current term as `(number, token, local deadline)`: a
    /// [`Session`](crate::client::Session) tells its terms apart by number.
    pub(crate) fn current_term(&self) -> Option<(u64, u64, Mono)> {
        self.term().0.map(|t| (t.number, t.token, t.valid_until))
    }

    /// Whether this node leads now: a term confirmed by the store whose
    /// local deadline has not passed.
    pub fn is_leader(&self) -> bool {
        self.term().0.is_some()
    }

    /// How this node's leadership is doing ([`Health`]): unhealthy only
    /// while it leads with a renewal overdue.
    pub fn health(&self) -> Health {
        let now = self.clock.now().mono;
        let term = self
            .term()
            .0
            .map(|t| (t.token, t.valid_until, t.confirmed_at));
        Health::of(term, now, self.overdue_after)
    }

    /// The fencing token of the current term, while this node leads.
    pub fn token(&self) -> Option<u64> {
        self.term().0.map(|t| t.token)
    }

    /// The leader as last observed (this node included; `None`: nobody is
    /// known to lead). Another node is seen at the campaign's next poll,
    /// not the instant it acquired.
    pub fn leader(&self) -> Option<Leader> {
        self.shared.lock().leader.clone()
    }

    /// Waits until this node leads, and gives the term's fencing token. An
    /// error once the campaign has ended (resigned or failed).
    pub async fn until_leader(&self) -> Result<u64, LeadError> {
        loop {
            let (term, version) = self.term();
            if let Some(term) = term {
                return Ok(term.token);
            }
            {
                let state = self.shared.lock();
                match &state.ended {
                    Some(ElectorExit::Failed(e)) => return Err(LeadError::Failed(e.clone())),
                    Some(ElectorExit::Resigned { .. }) => return Err(LeadError::Resigned),
                    None if state.resign => return Err(LeadError::Resigned),
                    None => {}
                }
            }
            self.shared.changed(version).await;
        }
    }

    /// Completes when the term current at this call is over: at once when
    /// this node does not lead at the call, else when that term ends (lost,
    /// released, resigned, or its local deadline reached, whichever comes
    /// first, even if the campaign is not polled meanwhile). Stop the work
    /// begun in that term when it completes.
    ///
    /// The term is fixed when `lost` is called, not when the future is
    /// first polled: a future created in one term and first polled in a
    /// later one (another node led in between, or this node lost and won
    /// again) completes at once. So call it as soon as
    /// [`until_leader`](Self::until_leader) returns, before any await:
    ///
    /// ```text
    /// let token = leadership.until_leader().await?;
    /// let lost = leadership.lost(); // this term's end
    /// // ... set up, then run the work until `lost` completes ...
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + '_ {
        let number = self.term().0.map(|t| t.number);
        async move {
            let Some(number) = number else { return };
            loop {
                let (term, version) = self.term();
                let term = if mutant!(LostFollowsCurrentTerm) {
                    term
                } else {
                    term.filter(|t| t.number == number)
                };
                let Some(term) = term else { return };
                let changed = pin!(self.shared.changed(version));
                let deadline = pin!(self.clock.sleep_until(term.valid_until));
                race(changed, deadline).await;
            }
        }
    }

    /// Asks the campaign to end: from this call on the handle says this
    /// node does not lead ([`is_leader`](Self::is_leader) is false,
    /// [`token`](Self::token) `None`, [`lost`](Self::lost) completes,
    /// [`until_leader`](Self::until_leader) errs), whatever a renewal in
    /// flight confirms; a leader then releases its lease (after any
    /// renewal in flight settles), a contender stops campaigning.
    pub fn resign(&self) {
        self.shared.update(|s| s.resign = true);
    }

    /// Hands the lease to the contender whose holder name is `to` (a
    /// planned handoff, `docs/protocols.md`, "A planned handoff"): a
    /// leader announces it in a renewal made at once, leads on until `to`
    /// (campaigning on the same key) has had time to read it (a poll
    /// interval and a request timeout), then stops leading (an
    /// [`Event::HandingOver`], after which this handle says no as after
    /// [`resign`](Self::resign)) and releases; other contenders leave the
    /// released lease to `to` for a grace, and `to`, polling fast since it
    /// read the announcement, takes it within a fraction of a second
    /// instead of at its next poll. The campaign then ends. A node that
    /// does not lead resigns. A name no holder can have (empty, over 512
    /// bytes: [`ConfigError::Holder`]) is refused before anything changes:
    /// the campaign goes on.
    pub fn hand_over(&self, to: &str) -> Result<(), ConfigError> {
        check_holder(to)?;
        let leading = self.term().0.is_some();
        self.shared.update(|s| {
            if !leading {
                // Nothing to hand over: a term won from now on is given
                // back at once, and never said.
                s.resign = true;
            } else if !s.resign {
                s.successor = Some(to.to_string());
            }
        });
        Ok(())
    }

    /// Waits for the campaign to end, and says how.
    pub async fn finished(&self) -> ElectorExit {
        loop {
            let version = {
                let state = self.shared.lock();
                if let Some(exit) = &state.ended {
                    return exit.clone();
                }
                state.version
            };
            self.shared.changed(version).await;
        }
    }
}

/// A campaign to run ([`Leases::lead`]): the lease's key and, if asked,
/// a callback for every event, in the order
/// [`protocol::elector`](crate::protocol#leader-election) documents (for
/// logs, or client-go style callbacks: `Acquired` as started leading,
/// `Lost`/`Released` as stopped, `LeaderChanged` as a new leader). A key
/// alone converts into one.
pub struct Lead<F = fn(&Event)> {
    key: String,
    on_event: F,
}

impl Lead {
    /// A campaign for the lease at `key`, with no callback (a key that
    /// is not `'static` goes through here: the campaign owns its copy).
    pub fn new(key: &str) -> Lead {
        Lead {
            key: key.to_string(),
            on_event: |_| {},
        }
    }
}

impl<F: FnMut(&Event)> Lead<F> {
    /// Passes every event to `on_event`, on the campaign's task, once the
    /// handle's answers show it.
    pub fn on_event<G: FnMut(&Event)>(self, on_event: G) -> Lead<G> {
        Lead {
            key: self.key,
            on_event,
        }
    }
}

impl From<&'static str> for Lead {
    fn from(key: &'static str) -> Lead {
        Lead::new(key)
    }
}

impl From<String> for Lead {
    fn from(key: String) -> Lead {
        Lead {
            key,
            ..Lead::new("")
        }
    }
}

impl<F> fmt::Debug for Lead<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lead")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl<S, C> Leases<S, C>
where
    S: Store + 'static,
    C: Clock + Clone + 'static,
{
    /// Campaigns for a lease (see [the client layer](crate::client)): a
    /// key (`leases.lead("locks/scheduler")`, or a `String`), or a
    /// [`Lead`] (`Lead::new(&key).on_event(…)`). Returns the handle and
    /// the campaign, a future to spawn.
    pub fn lead<F: FnMut(&Event) + 'static>(
        &self,
        lead: impl Into<Lead<F>>,
    ) -> (Leadership<C>, impl Future<Output = ElectorExit> + 'static) {
        // The campaign is built where the key's borrow is not in scope.
        self.campaign(lead.into())
    }

    pub(crate) fn campaign<F: FnMut(&Event) + 'static>(
        &self,
        Lead { key, mut on_event }: Lead<F>,
    ) -> (Leadership<C>, impl Future<Output = ElectorExit> + 'static) {
        let shared = Arc::new(Shared::default());
        let ttl = self.config(&key).ttl;
        let leadership = Leadership {
            shared: shared.clone(),
            clock: self.clock().clone(),
            overdue_after: Health::overdue_after(&self.config(&key)),
        };
        let leases = self.clone();
        let campaign = async move {
            let exit = match leases.check_store(&key).await {
                Err(e) => ElectorExit::Failed(e),
                Ok(()) => {
                    let parts = (leases.config(&key), leases.entropy());
                    let elector = leases.taps().tap(
                        parts,
                        |(cfg, entropy)| Elector::new(cfg, entropy),
                        |(cfg, entropy)| Start::Elect { cfg, entropy },
                    );
                    let resigned = poll_fn(|cx| {
                        let mut state = shared.lock();
                        if state.resign || state.successor.is_some() {
                            return Poll::Ready(());
                        }
                        if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                            state.wakers.push(cx.waker().clone());
                        }
                        Poll::Pending
                    });
                    let events = |event: Event| {
                        shared.apply(&event, ttl);
                        on_event(&event);
                    };
                    // A follower's polls of an unchanged lease are
                    // answered 304 (`crate::client::revalidate`).
                    let store = Revalidating::new(leases.store());
                    let mut elector = Stopping {
                        machine: elector,
                        shared: shared.clone(),
                    };
                    drive_until(&mut elector, &store, leases.clock(), events, resigned).await
                }
            };
            shared.update(|s| {
                s.term = None;
                s.ended = Some(exit.clone());
            });
            exit
        };
        (leadership, campaign)
    }
}

/// The campaign's machine, stopped as the handle asked: a resign, or a
/// planned handoff to the successor it names.
struct Stopping<M> {
    machine: M,
    shared: Arc<Shared>,
}

impl<M: crate::protocol::machine::Machine> crate::protocol::machine::Machine for Stopping<M> {
    type Outcome = M::Outcome;

    fn poll(&mut self, now: crate::time::Now) -> crate::protocol::machine::Output<M::Outcome> {
        self.machine.poll(now)
    }

    fn handle_reply(
        &mut self,
        now: crate::time::Now,
        id: crate::protocol::machine::CallId,
        reply: crate::store::StoreReply,
    ) {
        self.machine.handle_reply(now, id, reply)
    }

    fn stop(&mut self, now: crate::time::Now) {
        let successor = self.shared.lock().successor.clone();
        match successor {
            Some(to) if !self.shared.lock().resign => self.machine.hand_over(now, &to),
            _ => self.machine.stop(now),
        }
    }
}

/// Completes when either future does.
pub(crate) async fn race(
    mut a: impl Future<Output = ()> + Unpin,
    mut b: impl Future<Output = ()> + Unpin,
) {
    poll_fn(|cx| {
        if core::pin::Pin::new(&mut a).poll(cx).is_ready()
            || core::pin::Pin::new(&mut b).poll(cx).is_ready()
        {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Runs two futures to completion on one task and gives both outputs: for
/// driving a campaign and the work beside it without a runtime (tests,
/// examples, a single-threaded host).
pub async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut out_a, mut out_b) = (None, None);
    poll_fn(|cx| {
        if out_a.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                out_a = Some(v);
            }
        }
        if out_b.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                out_b = Some(v);
            }
        }
        match (out_a.take(), out_b.take()) {
            (Some(a), Some(b)) => Poll::Ready((a, b)),
            (a, b) => {
                out_a = a;
                out_b = b;
                Poll::Pending
            }
        }
    })
    .await
}

#[cfg(test)]
mod health_tests {
    use super::*;

    #[test]
    fn only_a_leader_whose_renewal_is_overdue_is_unhealthy() {
        let after = Duration::from_secs(15);
        assert_eq!(Health::of(None, Mono(0), after), Health::Following);
        // Confirmed at 0, deadline 28 s: healthy until 15 s have passed.
        let leading = Health::of(Some((3, Mono(28_000), Mono(0))), Mono(15_000), after);
        assert_eq!(
            leading,
            Health::Leading {
                token: 3,
                time_left: Duration::from_secs(13)
            }
        );
        assert!(leading.healthy());
        let overdue = Health::of(Some((3, Mono(28_000), Mono(0))), Mono(15_001), after);
        assert!(matches!(overdue, Health::RenewalOverdue { token: 3, .. }));
        assert!(!overdue.healthy());
        // docs/operations.md: a renewal of a 60 s lease is overdue 25 s
        // after the write that last extended it was sent.
        let cfg = crate::config::LeaseConfig::new("k", "a", Duration::from_secs(60));
        assert_eq!(Health::overdue_after(&cfg), Duration::from_secs(25));
        // Past the deadline the term is over: not leading.
        assert_eq!(
            Health::of(Some((3, Mono(28_000), Mono(0))), Mono(28_000), after),
            Health::Following
        );
    }
}
