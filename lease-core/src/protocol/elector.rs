//! Leader election: documented in the layer's docs (`protocol/mod.rs`, "Leader election").

use crate::config::{check_holder, LeaseConfig};
use crate::entropy::Entropy;
use crate::protocol::lease::{Acquire, LeaseOp, Release, Renew};
use crate::protocol::machine::{CallId, Machine, Output};
use crate::protocol::outcome::hand_on;
use crate::protocol::outcome::{
    AcquireOutcome, Claim, Event, Leader, Lease, LeaseError, LostReason, ReleaseOutcome,
    RenewOutcome,
};
use crate::protocol::wait::{HANDOFF_POLL, HANDOFF_TO};
use crate::store::StoreReply;
use crate::tick::{record_run, TickRun};
use crate::time::{Mono, Now, UnixMillis};
use std::collections::VecDeque;

/// How an [`Elector`] finished.
// Returned once per elector: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum ElectorExit {
    /// Stopped on request; `released` is the release outcome when it held
    /// the lease (`None` when it was not leading).
    Resigned {
        /// Outcome of the release, when there was a lease to release.
        released: Option<Result<ReleaseOutcome, LeaseError>>,
    },
    /// The campaign met an error no retry can fix: the bucket does not
    /// exist, the settings are unusable, the store cannot host leases, or
    /// it denied us before we ever held the lease. Any other error is an
    /// [`Event::Error`] and the campaign goes on.
    Failed(LeaseError),
}

/// How a [`Holder`] finished.
// Returned once per holder: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum HolderExit {
    /// Stopped on request; `released` is the release outcome (`None` when
    /// the lease was lost while stopping).
    Resigned {
        /// Outcome of the release.
        released: Option<Result<ReleaseOutcome, LeaseError>>,
    },
    /// The lease was lost.
    Lost(LostReason),
}

/// How the machine under both finished.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
enum Exit {
    Resigned {
        released: Option<Result<ReleaseOutcome, LeaseError>>,
    },
    /// Only a holder (it does not campaign again).
    Lost(LostReason),
    /// Only a campaigner.
    Failed(LeaseError),
}

#[derive(Debug)]
enum Phase {
    Waiting {
        until: Mono,
    },
    Campaigning(Box<LeaseOp<Acquire>>),
    Holding {
        lease: Lease,
        renew_at: Mono,
    },
    Renewing {
        op: Box<LeaseOp<Renew>>,
        lease: Lease,
    },
    Releasing(Box<LeaseOp<Release>>),
    Finished(Option<Exit>),
}

/// The leader-election machine (see the module docs): campaigns until
/// stopped, or until an error no retry can fix.
#[derive(Debug)]
pub struct Elector(Core);

/// A holder of a lease acquired already: renews it until stopped (then
/// releases) or until it is lost (then finishes), without campaigning.
#[derive(Debug)]
pub struct Holder(Core);

impl Elector {
    /// An elector that starts campaigning at the first poll.
    pub fn new(cfg: LeaseConfig, entropy: Entropy) -> Elector {
        Elector(Core::with_phase(
            cfg,
            entropy,
            Phase::Waiting { until: Mono(0) },
            true,
        ))
    }

    /// The lease while this node leads and its deadline has not passed.
    pub fn lease(&self, now: Mono) -> Option<&Lease> {
        self.0.lease(now)
    }

    /// The leader as last observed (this node included).
    pub fn leader(&self) -> Option<&Leader> {
        self.0.leader.as_ref()
    }
}

impl Holder {
    /// A holder of `lease`, which renews from the first poll on.
    pub fn new(cfg: LeaseConfig, entropy: Entropy, lease: Lease) -> Holder {
        let renew_at = renew_at(&cfg, &lease);
        Holder(Core::with_phase(
            cfg,
            entropy,
            Phase::Holding { lease, renew_at },
            false,
        ))
    }

    /// The lease while its deadline has not passed.
    pub fn lease(&self, now: Mono) -> Option<&Lease> {
        self.0.lease(now)
    }

    /// A run's time limit: the hold's renewals end by `limit.stop` (when
    /// its work is stopped) and its release by `limit.end`, each cut short
    /// there as by its own deadline, its writes whose outcome is unknown
    /// kept as claims.
    pub fn limited(mut self, limit: Option<HoldLimit>) -> Holder {
        self.0.limit = limit;
        self
    }

    /// The release that ends this hold records `run` as a completed tick
    /// in the lease record (dropping ticks finished before `oldest`): the
    /// write it makes anyway carries it (`crate::tick`).
    pub fn complete_tick(&mut self, run: TickRun, oldest: UnixMillis) {
        self.0.completed = Some((run, oldest));
    }
}

/// A run's time limit on a [`Holder`]: its renewals end by `stop` (when
/// the run's work is stopped) and its release by `end` (when the run's
/// time is up), as `Leases::run` sets it for [`Run::within`](crate::client::Run::within).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HoldLimit {
    /// Renewals end by then.
    pub stop: Mono,
    /// The release ends by then.
    pub end: Mono,
}

/// The exit of the machine under both, as the one that ran it sees it.
/// A holder never campaigns, so it cannot fail a campaign; an elector
/// campaigns again after a loss, so it finishes only when stopped or
/// failed. The other combinations are defects, reported as errors.
fn exit_of_elector(exit: Exit) -> ElectorExit {
    match exit {
        Exit::Resigned { released } => ElectorExit::Resigned { released },
        Exit::Failed(e) => ElectorExit::Failed(e),
        Exit::Lost(reason) => {
            debug_assert!(false, "an elector finished lost: {reason:?}");
            ElectorExit::Failed(LeaseError::Unexpected {
                reply: format!("internal: an elector finished lost ({reason})"),
                unsettled: Box::default(),
            })
        }
    }
}

fn exit_of_holder(exit: Exit) -> HolderExit {
    match exit {
        Exit::Resigned { released } => HolderExit::Resigned { released },
        Exit::Lost(reason) => HolderExit::Lost(reason),
        Exit::Failed(e) => {
            debug_assert!(false, "a holder failed a campaign: {e:?}");
            HolderExit::Lost(LostReason::Expired)
        }
    }
}

impl Machine for Elector {
    type Outcome = ElectorExit;

    fn poll(&mut self, now: Now) -> Output<ElectorExit> {
        map_done(self.0.poll(now), exit_of_elector)
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        self.0.handle_reply(now, id, reply)
    }

    /// Resign: a leader releases (after any renewal in flight settles); a
    /// contender stops after any acquire in flight settles, releasing if
    /// that acquire won.
    fn stop(&mut self, _now: Now) {
        self.0.stopping = true;
    }

    /// A planned handoff to the holder named `to` (see
    /// [`Leadership::hand_over`](crate::client::Leadership::hand_over)).
    fn hand_over(&mut self, _now: Now, to: &str) {
        self.0.hand_over(to)
    }
}

impl Machine for Holder {
    type Outcome = HolderExit;

    fn poll(&mut self, now: Now) -> Output<HolderExit> {
        map_done(self.0.poll(now), exit_of_holder)
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        self.0.handle_reply(now, id, reply)
    }

    /// Resign: release after any renewal in flight settles.
    fn stop(&mut self, _now: Now) {
        self.0.stopping = true;
    }
}

fn map_done<T, U>(out: Output<T>, f: impl FnOnce(T) -> U) -> Output<U> {
    match out {
        Output::Done(t) => Output::Done(f(t)),
        Output::Call(id, op) => Output::Call(id, op),
        Output::Event(e) => Output::Event(e),
        Output::Wait(at) => Output::Wait(at),
    }
}

#[derive(Debug)]
struct Core {
    cfg: LeaseConfig,
    entropy: Entropy,
    phase: Phase,
    campaign: bool,
    stopping: bool,
    at_risk_sent: bool,
    next_id: u64,
    events: VecDeque<Event>,
    leader: Option<Leader>,
    /// Records of ours that may be live unseen (see [`Claim`]): a campaign
    /// takes them over instead of waiting behind itself.
    claims: Vec<Claim>,
    /// Whether this elector has held the lease: a store that let us write
    /// once and then denies us may be rotating credentials, so the
    /// campaign goes on; one that denies us from the start is
    /// misconfigured, and the campaign ends.
    held_before: bool,
    /// A completed tick the release records (a holder's, see
    /// [`Holder::complete_tick`]).
    completed: Option<(TickRun, UnixMillis)>,
    /// A holder's time limit ([`Holder::limited`]).
    limit: Option<HoldLimit>,
    /// A planned handoff ([`Machine::hand_over`]): the successor, and when
    /// the renewal that announced it was confirmed.
    handoff: Option<(String, Option<Mono>)>,
}

impl Core {
    fn with_phase(cfg: LeaseConfig, entropy: Entropy, phase: Phase, campaign: bool) -> Core {
        Core {
            cfg,
            entropy,
            phase,
            campaign,
            stopping: false,
            at_risk_sent: false,
            next_id: 1,
            events: VecDeque::new(),
            leader: None,
            completed: None,
            limit: None,
            claims: Vec::new(),
            held_before: false,
            handoff: None,
        }
    }

    fn lease(&self, now: Mono) -> Option<&Lease> {
        match &self.phase {
            Phase::Holding { lease, .. } | Phase::Renewing { lease, .. } if lease.is_valid(now) => {
                Some(lease)
            }
            _ => None,
        }
    }

    fn observe(&mut self, leader: Option<Leader>) {
        let same = match (&self.leader, &leader) {
            (Some(a), Some(b)) => a.holder == b.holder && a.token == b.token,
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.events.push_back(Event::LeaderChanged(leader.clone()));
        }
        self.leader = leader;
    }

    /// The renewal of `lease` (ending by a holder's time limit's stop),
    /// announcing a planned handoff's successor in its record.
    fn renewal(&mut self, mut lease: Lease) -> Box<LeaseOp<Renew>> {
        if let Some((to, _)) = &self.handoff {
            lease.record.meta.insert(HANDOFF_TO.into(), to.clone());
        }
        let op = self.start(|c, e| LeaseOp::renew(c, e, lease));
        match self.limit {
            Some(limit) => Box::new(op.with_deadline(limit.stop)),
            None => op,
        }
    }

    /// The release of `lease`, carrying a completed tick if there is one.
    fn release(&mut self, mut lease: Lease) -> Box<LeaseOp<Release>> {
        if let Some((run, oldest)) = self.completed.take() {
            record_run(&mut lease.record.runs, run, oldest);
        }
        let op = self.start(|c, e| LeaseOp::release(c, e, lease));
        match self.limit {
            Some(limit) => Box::new(op.with_deadline(limit.end)),
            None => op,
        }
    }

    /// A new operation with its own randomness, continuing the call ids.
    fn start<G>(
        &mut self,
        make: impl FnOnce(LeaseConfig, Entropy) -> LeaseOp<G>,
    ) -> Box<LeaseOp<G>> {
        Box::new(make(self.cfg.clone(), self.entropy.fork()).with_ids_from(self.next_id))
    }

    /// Remembers a record of ours that may be live unseen.
    fn claim(&mut self, claim: Claim) {
        hand_on(&mut self.claims, claim);
    }

    /// A lease that expired with a renewal perhaps in flight: a record of
    /// its session may appear later.
    fn claim_lease(&mut self, lease: &Lease) {
        self.claim(Claim::of_lease(&self.cfg, lease));
    }

    /// A planned handoff to `to`: a leader announces it in a renewal made
    /// at once, leads on until the successor has had time to read it
    /// ([`Core::announce_wait`]), then releases (the release keeps the
    /// announcement: other contenders leave it to the successor for
    /// [`HANDOFF_GRACE`](crate::protocol::HANDOFF_GRACE)). A node that does
    /// not lead resigns; so does one asked to name what no holder can be
    /// called (empty, over 512 bytes): a record naming it could not be
    /// read by anyone.
    fn hand_over(&mut self, to: &str) {
        if check_holder(to).is_err() {
            self.stopping = true;
            return;
        }
        match &mut self.phase {
            Phase::Holding { renew_at, .. } => {
                self.handoff = Some((to.to_string(), None));
                *renew_at = Mono(0);
            }
            // The renewal under way does not announce it: the next does,
            // at once (see `renewed`).
            Phase::Renewing { .. } => self.handoff = Some((to.to_string(), None)),
            _ => self.stopping = true,
        }
    }

    /// How long after its announcement a handoff's release waits: the
    /// successor polls every `poll_every` (and a tenth of jitter) and its
    /// read takes up to a request timeout.
    fn announce_wait(&self) -> std::time::Duration {
        self.cfg.poll_every.mul_f64(1.1) + self.cfg.request_timeout
    }

    fn lost(&mut self, now: Mono, token: u64, reason: LostReason) {
        self.events.push_back(Event::Lost {
            token,
            reason: reason.clone(),
        });
        self.at_risk_sent = false;
        if self
            .leader
            .as_ref()
            .is_some_and(|l| l.token == token && l.holder == self.cfg.holder)
        {
            self.observe(None);
        }
        // (A handoff under way ends the campaign as a resign would.)
        self.phase = if self.stopping || self.handoff.is_some() {
            Phase::Finished(Some(Exit::Resigned { released: None }))
        } else if self.campaign {
            Phase::Waiting { until: now }
        } else {
            Phase::Finished(Some(Exit::Lost(reason)))
        };
    }

    fn leading(&mut self, lease: Lease, first: bool) {
        self.at_risk_sent = false;
        self.held_before = true;
        // Claims of earlier acquisitions are kept until they expire: a late
        // create of one can still land once this lease is given back.
        if mutant!(ForgetClaimsOnAcquire) {
            self.claims.clear();
        }
        let event = if first {
            Event::Acquired {
                token: lease.token,
                valid_until: lease.valid_until,
            }
        } else {
            Event::Renewed {
                token: lease.token,
                valid_until: lease.valid_until,
            }
        };
        self.events.push_back(event);
        self.observe(Some(Leader {
            holder: lease.record.holder.clone(),
            token: lease.token,
            expires_at: lease.record.expires_at,
        }));
        if self.stopping {
            let op = self.release(lease);
            self.phase = Phase::Releasing(op);
        } else {
            let renew_at = renew_at(&self.cfg, &lease);
            self.phase = Phase::Holding { lease, renew_at };
        }
    }

    /// Drives the current operation one step; returns an output to pass on.
    fn step_op(&mut self, now: Now) -> Option<Output<Exit>> {
        match &mut self.phase {
            Phase::Campaigning(op) => {
                let out = split(op.poll(now));
                self.next_id = op.next_id();
                match out {
                    Ok(acquired) => self.campaigned(now, acquired),
                    Err(out) => return Some(out),
                }
            }
            Phase::Renewing { op, lease } => {
                let out = split(op.poll(now));
                self.next_id = op.next_id();
                match out {
                    Ok(renewed) => {
                        let old = lease.clone();
                        self.renewed(now, old, renewed)
                    }
                    // Wake at the at-risk time, then at the deadline, to
                    // report each on time.
                    Err(Output::Wait(t)) if !self.at_risk_sent => {
                        let at_risk = lease.valid_until.saturating_sub(self.cfg.renew_every);
                        return Some(Output::Wait(t.min(at_risk)));
                    }
                    Err(Output::Wait(t)) => return Some(Output::Wait(t.min(lease.valid_until))),
                    Err(out) => return Some(out),
                }
            }
            Phase::Releasing(op) => {
                let out = split(op.poll(now));
                self.next_id = op.next_id();
                match out {
                    Ok(released) => self.released(now, released),
                    Err(out) => return Some(out),
                }
            }
            Phase::Waiting { .. } | Phase::Holding { .. } | Phase::Finished(_) => {}
        }
        None
    }

    /// An error on the way to the lease: retried at the next poll, unless
    /// no retry can fix it ([`fatal`]), and then the elector finishes with
    /// it instead of campaigning against a store that cannot work.
    fn failed(&mut self, now: Now, e: LeaseError) {
        if fatal(&e, self.held_before) {
            self.phase = Phase::Finished(Some(Exit::Failed(e)));
            return;
        }
        self.events.push_back(Event::Error(e));
        self.wait_for_poll(now);
    }

    fn campaigned(&mut self, now: Now, acquired: Result<AcquireOutcome, LeaseError>) {
        match acquired {
            // Learned only after its deadline (a pause, a slow cleanup):
            // the lease was never usable, so it was never ours to announce.
            Ok(AcquireOutcome::Acquired(lease)) if !lease.is_valid(now.mono) => {
                self.wait_for_poll(now)
            }
            Ok(AcquireOutcome::Acquired(lease)) => self.leading(lease, true),
            Ok(AcquireOutcome::Busy(busy)) => {
                for claim in busy.unsettled {
                    // A create of ours may still land: not a lockout then.
                    self.claim(claim);
                }
                let successor = busy.handoff_to.as_deref() == Some(self.cfg.holder.as_str());
                self.observe(Some(Leader {
                    holder: busy.holder,
                    token: busy.token,
                    expires_at: busy.expires_at,
                }));
                self.wait_for_poll(now);
                // Named successor of a planned handoff: read again soon.
                if let (true, Phase::Waiting { until }) = (successor, &mut self.phase) {
                    *until = (*until).min(now.mono + HANDOFF_POLL);
                }
            }
            Err(e) => {
                // A record of ours left live, or perhaps live: kept as a
                // claim (the error still says so).
                for claim in e.unsettled() {
                    self.claim(claim.clone());
                }
                self.failed(now, e);
            }
        }
    }

    fn renewed(&mut self, now: Now, old: Lease, renewed: Result<RenewOutcome, LeaseError>) {
        match renewed {
            Ok(RenewOutcome::Renewed(lease)) if !lease.is_valid(now.mono) => {
                self.claim_lease(&lease);
                self.lost(now.mono, old.token, LostReason::Expired)
            }
            Ok(RenewOutcome::Renewed(lease)) => {
                let announced = self
                    .handoff
                    .as_ref()
                    .map(|(to, _)| lease.record.meta.get(HANDOFF_TO) == Some(to));
                self.leading(lease, false);
                let release_at = now.mono + self.announce_wait();
                if let (Some(announced), Phase::Holding { renew_at, .. }) =
                    (announced, &mut self.phase)
                {
                    if announced {
                        // Announced: released once the successor had time
                        // to read it (the renewals go on meanwhile).
                        *renew_at = (*renew_at).min(release_at);
                        if let Some((_, at)) = &mut self.handoff {
                            at.get_or_insert(now.mono);
                        }
                    } else {
                        *renew_at = now.mono;
                    }
                }
            }
            Ok(RenewOutcome::Lost(reason)) => {
                if reason == LostReason::Expired {
                    self.claim_lease(&old);
                }
                self.lost(now.mono, old.token, reason)
            }
            Err(e) => {
                for claim in e.unsettled() {
                    self.claim(claim.clone());
                }
                // Renewal failed for a reason that retrying soon may fix;
                // the deadline still decides when the lease is lost.
                self.events.push_back(Event::Error(e));
                let renew_at = now.mono + self.cfg.backoff_max;
                self.phase = Phase::Holding {
                    lease: old,
                    renew_at,
                };
            }
        }
    }

    fn released(&mut self, now: Now, released: Result<ReleaseOutcome, LeaseError>) {
        match &released {
            Ok(ReleaseOutcome::Released { token }) => {
                self.events.push_back(Event::Released { token: *token });
                self.observe(None);
            }
            // Given back at its deadline, and another holds it now
            // (whether through this release or after expiry): no longer
            // leader either way.
            Ok(ReleaseOutcome::Unknown { token, now }) => {
                self.events.push_back(Event::Lost {
                    token: *token,
                    reason: now.clone(),
                });
            }
            Ok(ReleaseOutcome::AlreadyLost(_)) | Err(_) => {}
        }
        self.phase = if self.stopping {
            Phase::Finished(Some(Exit::Resigned {
                released: Some(released),
            }))
        } else if self.campaign {
            // A term ended (a protocol without renewal).
            Phase::Waiting {
                until: now.mono + self.cfg.poll_every,
            }
        } else {
            Phase::Finished(Some(Exit::Lost(LostReason::Expired)))
        };
    }

    fn wait_for_poll(&mut self, now: Now) {
        self.phase = if self.stopping {
            Phase::Finished(Some(Exit::Resigned { released: None }))
        } else {
            // A little jitter keeps contenders from polling in lockstep.
            let jitter = self.cfg.poll_every.mul_f64(self.entropy.unit() * 0.1);
            Phase::Waiting {
                until: now.mono + self.cfg.poll_every + jitter,
            }
        };
    }

    fn at_risk_time(&self, lease: &Lease) -> Mono {
        lease.valid_until.saturating_sub(self.cfg.renew_every)
    }
}

impl Core {
    fn poll(&mut self, now: Now) -> Output<Exit> {
        loop {
            if let Some(e) = self.events.pop_front() {
                return Output::Event(e);
            }
            match &mut self.phase {
                Phase::Finished(exit) => {
                    return match exit.take() {
                        Some(x) => Output::Done(x),
                        None => Output::Wait(Mono(u64::MAX)),
                    }
                }
                Phase::Waiting { until } => {
                    if self.stopping {
                        self.phase = Phase::Finished(Some(Exit::Resigned { released: None }));
                    } else if now.mono >= *until {
                        self.claims.retain(|c| c.live_until > now.mono);
                        let claims = self.claims.clone();
                        let op = self.start(|c, e| LeaseOp::acquire(c, e).with_claims(claims));
                        self.phase = Phase::Campaigning(op);
                    } else {
                        return Output::Wait(*until);
                    }
                }
                Phase::Holding { lease, renew_at } => {
                    let (lease, renew_at) = (lease.clone(), *renew_at);
                    if let Some(wait) = self.holding(now, lease, renew_at) {
                        return wait;
                    }
                }
                Phase::Renewing { lease, .. } => {
                    let lease = lease.clone();
                    if !lease.is_valid(now.mono) {
                        // The deadline passed with the renewal unanswered:
                        // the lease is lost now, not when the renewal ends.
                        // Its write may still land: claim what it makes.
                        self.claim_lease(&lease);
                        self.lost(now.mono, lease.token, LostReason::Expired);
                        continue;
                    }
                    if !self.at_risk_sent
                        && now.mono >= self.at_risk_time(&lease)
                        && lease.is_valid(now.mono)
                    {
                        self.at_risk_sent = true;
                        self.events.push_back(Event::AtRisk {
                            token: lease.token,
                            valid_until: lease.valid_until,
                        });
                        continue;
                    }
                    if let Some(out) = self.step_op(now) {
                        return out;
                    }
                }
                Phase::Campaigning(_) | Phase::Releasing(_) => {
                    if let Some(out) = self.step_op(now) {
                        return out;
                    }
                }
            }
        }
    }

    /// A step of a held term: lost at its deadline, given back when
    /// stopping or handing over, renewed when due; else the wait until the
    /// next of those (`Some`).
    fn holding(&mut self, now: Now, lease: Lease, renew_at: Mono) -> Option<Output<Exit>> {
        if !lease.is_valid(now.mono) {
            self.claim_lease(&lease);
            self.lost(now.mono, lease.token, LostReason::Expired);
            if !self.cfg.protocol.renews() && !self.stopping {
                // The end of a term: give the lock back at once.
                let op = self.release(lease);
                self.phase = Phase::Releasing(op);
            }
        } else if self.stopping {
            let op = self.release(lease);
            self.phase = Phase::Releasing(op);
        } else if let Some((to, _)) = self
            .handoff
            .clone()
            .filter(|(_, at)| at.is_some_and(|at| now.mono >= at + self.announce_wait()))
        {
            // The successor has read the announcement: from now on this
            // node does not lead, and gives back.
            self.events.push_back(Event::HandingOver {
                token: lease.token,
                to,
            });
            self.stopping = true;
            let op = self.release(lease);
            self.phase = Phase::Releasing(op);
        } else if now.mono >= renew_at {
            let op = self.renewal(lease.clone());
            self.phase = Phase::Renewing { op, lease };
        } else {
            // (A handoff's release is due on its own time, which a
            // renewal in between must not push back.)
            let handoff = self.handoff.as_ref().and_then(|(_, at)| *at);
            let release = handoff.map_or(Mono(u64::MAX), |at| at + self.announce_wait());
            return Some(Output::Wait(renew_at.min(lease.valid_until).min(release)));
        }
        None
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        match &mut self.phase {
            Phase::Campaigning(op) => op.handle_reply(now, id, reply),
            Phase::Releasing(op) => op.handle_reply(now, id, reply),
            Phase::Renewing { op, .. } => op.handle_reply(now, id, reply),
            _ => {}
        }
    }
}

/// Whether no retry of a campaign can fix `e`. A denial counts only
/// before the elector first held the lease (credentials can rotate under a
/// running service; a service that never got in is misconfigured).
fn fatal(e: &LeaseError, held_before: bool) -> bool {
    match e {
        LeaseError::NoSuchBucket { .. }
        | LeaseError::Config { .. }
        | LeaseError::Unsupported { .. }
        | LeaseError::UnsafeStore { .. } => true,
        LeaseError::Denied { .. } => !held_before,
        _ => false,
    }
}

/// An operation's outcome, or the output to pass on.
fn split<T>(out: Output<T>) -> Result<T, Output<Exit>> {
    match out {
        Output::Done(outcome) => Ok(outcome),
        Output::Call(id, op) => Err(Output::Call(id, op)),
        Output::Event(e) => Err(Output::Event(e)),
        Output::Wait(at) => Err(Output::Wait(at)),
    }
}

/// When a holder next renews: `renew_every` after its last write, or never
/// for a protocol without renewal (its term ends at the local deadline).
fn renew_at(cfg: &LeaseConfig, lease: &Lease) -> Mono {
    if cfg.protocol.renews() {
        lease.written_at + cfg.renew_every
    } else {
        Mono(u64::MAX)
    }
}
