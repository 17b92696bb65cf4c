//! Leader election: a long-lived machine that campaigns, renews, observes
//! and resigns, reporting [`Event`]s.
//!
//! The elector runs one [`LeaseOp`] at a time: acquire while campaigning
//! (every `poll_every` while someone else leads), renew every `renew_every`
//! while leading, release when asked to stop. Its local deadline is a timer:
//! [`Event::Lost`] is emitted when it passes without a confirmed renewal,
//! whether or not any reply ever arrives. [`Elector::hold`] makes a holder
//! that keeps an already acquired lease alive and finishes when it is lost
//! (the singleton pattern), instead of campaigning again.
//!
//! With a protocol that cannot renew (the [mutex](crate::mutex)), a term
//! lasts one ttl: at the local deadline the elector reports
//! [`Event::Lost`], gives the lock back, and campaigns again after one
//! `poll_every`.

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::lease::LeaseOp;
use crate::machine::{
    CallId, Claim, Event, Leader, Lease, LeaseError, LostReason, Machine, OpOutcome, Output,
};
use crate::store::StoreReply;
use crate::time::{Mono, Now};
use std::collections::VecDeque;

/// How an elector finished.
// Returned once per elector: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum ElectorExit {
    /// Stopped on request; `released` is the release outcome when it held
    /// the lease (`None` when it was not leading).
    Resigned {
        /// Outcome of the release, when there was a lease to release.
        released: Option<Result<OpOutcome, LeaseError>>,
    },
    /// A holder-only elector lost its lease.
    Lost(LostReason),
}

#[derive(Debug)]
enum Phase {
    Waiting { until: Mono },
    Campaigning(Box<LeaseOp>),
    Holding { lease: Lease, renew_at: Mono },
    Renewing { op: Box<LeaseOp>, lease: Lease },
    Releasing(Box<LeaseOp>),
    Finished(Option<ElectorExit>),
}

/// The leader-election machine (see the module docs).
#[derive(Debug)]
pub struct Elector {
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
}

impl Elector {
    /// An elector that starts campaigning at the first poll.
    pub fn new(cfg: LeaseConfig, entropy: Entropy) -> Elector {
        Elector::with_phase(cfg, entropy, Phase::Waiting { until: Mono(0) }, true)
    }

    /// A holder for a lease acquired already: renews it until stopped
    /// (then releases) or until it is lost (then finishes).
    pub fn hold(cfg: LeaseConfig, entropy: Entropy, lease: Lease) -> Elector {
        let renew_at = renew_at(&cfg, &lease);
        Elector::with_phase(cfg, entropy, Phase::Holding { lease, renew_at }, false)
    }

    fn with_phase(cfg: LeaseConfig, entropy: Entropy, phase: Phase, campaign: bool) -> Elector {
        Elector {
            cfg,
            entropy,
            phase,
            campaign,
            stopping: false,
            at_risk_sent: false,
            next_id: 1,
            events: VecDeque::new(),
            leader: None,
            claims: Vec::new(),
        }
    }

    /// The lease while this node leads and its deadline has not passed.
    pub fn lease(&self, now: Mono) -> Option<&Lease> {
        match &self.phase {
            Phase::Holding { lease, .. } | Phase::Renewing { lease, .. } if lease.is_valid(now) => {
                Some(lease)
            }
            _ => None,
        }
    }

    /// The leader as last observed (this node included).
    pub fn leader(&self) -> Option<&Leader> {
        self.leader.as_ref()
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

    /// A new operation with its own randomness, continuing the call ids.
    fn start(&mut self, make: impl FnOnce(LeaseConfig, Entropy) -> LeaseOp) -> Box<LeaseOp> {
        Box::new(make(self.cfg.clone(), self.entropy.fork()).with_ids_from(self.next_id))
    }

    /// Remembers a record of ours that may be live unseen.
    fn claim(&mut self, claim: Claim) {
        self.claims.retain(|c| c.session != claim.session);
        self.claims.push(claim);
    }

    /// A lease that expired with a renewal perhaps in flight: a record of
    /// its session may appear later.
    fn claim_lease(&mut self, lease: &Lease) {
        self.claim(Claim::of_lease(&self.cfg, lease));
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
        self.phase = if self.stopping {
            Phase::Finished(Some(ElectorExit::Resigned { released: None }))
        } else if self.campaign {
            Phase::Waiting { until: now }
        } else {
            Phase::Finished(Some(ElectorExit::Lost(reason)))
        };
    }

    fn leading(&mut self, lease: Lease, first: bool) {
        self.at_risk_sent = false;
        // Claims of earlier sessions are kept until they expire: a late
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
            let op = self.start(|c, e| LeaseOp::release(c, e, lease));
            self.phase = Phase::Releasing(op);
        } else {
            let renew_at = renew_at(&self.cfg, &lease);
            self.phase = Phase::Holding { lease, renew_at };
        }
    }

    /// Drives the current operation one step; returns an output to pass on.
    fn step_op(&mut self, now: Now) -> Option<Output<ElectorExit>> {
        let (op, lease) = match &mut self.phase {
            Phase::Campaigning(op) | Phase::Releasing(op) => (op, None),
            Phase::Renewing { op, lease } => (op, Some(lease.clone())),
            _ => return None,
        };
        let out = op.poll(now);
        self.next_id = op.next_id();
        let result = match out {
            Output::Call(id, call) => return Some(Output::Call(id, call)),
            Output::Event(e) => return Some(Output::Event(e)),
            Output::Wait(t) => {
                let t = match &lease {
                    Some(l) if !self.at_risk_sent && l.is_valid(now.mono) => {
                        t.min(self.at_risk_time(l))
                    }
                    // Wake at the deadline to report the loss on time.
                    Some(l) if l.is_valid(now.mono) => t.min(l.valid_until),
                    _ => t,
                };
                return Some(Output::Wait(t));
            }
            Output::Done(result) => result,
        };
        let releasing = matches!(self.phase, Phase::Releasing(_));
        match (result, lease) {
            (released, _) if releasing => {
                match &released {
                    Ok(OpOutcome::Released { token }) => {
                        self.events.push_back(Event::Released { token: *token });
                        self.observe(None);
                    }
                    // Given back at its deadline, and another holds it now
                    // (whether through this release or after expiry): no
                    // longer leader either way.
                    Ok(OpOutcome::ReleaseUnknown { token, now }) => {
                        self.events.push_back(Event::Lost {
                            token: *token,
                            reason: now.clone(),
                        });
                    }
                    _ => {}
                }
                self.phase = if self.stopping {
                    Phase::Finished(Some(ElectorExit::Resigned {
                        released: Some(released),
                    }))
                } else if self.campaign {
                    // A term ended (a protocol without renewal).
                    Phase::Waiting {
                        until: now.mono + self.cfg.poll_every,
                    }
                } else {
                    Phase::Finished(Some(ElectorExit::Lost(LostReason::Expired)))
                };
            }
            // Learned only after its deadline (a pause, a slow cleanup):
            // the lease was never usable, so it was never ours to announce.
            (Ok(OpOutcome::Acquired(lease)), None) if !lease.is_valid(now.mono) => {
                self.wait_for_poll(now)
            }
            (Ok(OpOutcome::Acquired(lease)), None) => self.leading(lease, true),
            (Ok(OpOutcome::Renewed(lease)), Some(old)) if !lease.is_valid(now.mono) => {
                self.claim_lease(&lease);
                self.lost(now.mono, old.token, LostReason::Expired)
            }
            (Ok(OpOutcome::Busy(busy)), None) => {
                if let Some(claim) = busy.unsettled {
                    // A create of ours may still land: not a lockout then.
                    self.claim(*claim);
                }
                self.observe(Some(Leader {
                    holder: busy.holder,
                    token: busy.token,
                    expires_at: busy.expires_at,
                }));
                self.wait_for_poll(now);
            }
            (Ok(OpOutcome::Renewed(lease)), Some(_)) => self.leading(lease, false),
            (Ok(OpOutcome::Lost(reason)), Some(old)) => {
                if reason == LostReason::Expired {
                    self.claim_lease(&old);
                }
                self.lost(now.mono, old.token, reason)
            }
            // A record of ours left live, or perhaps live: kept as a claim
            // (the error still says so).
            (Err(e), lease) if e.unsettled().is_some() => {
                if let Some(claim) = e.unsettled() {
                    self.claim(claim.clone());
                }
                self.events.push_back(Event::Error(e));
                match lease {
                    Some(lease) => {
                        let renew_at = now.mono + self.cfg.backoff_max;
                        self.phase = Phase::Holding { lease, renew_at };
                    }
                    None => self.wait_for_poll(now),
                }
            }
            (Err(e), Some(lease)) => {
                // Renewal failed for a reason that retrying soon may fix;
                // the deadline still decides when the lease is lost.
                self.events.push_back(Event::Error(e));
                let renew_at = now.mono + self.cfg.backoff_max;
                self.phase = Phase::Holding { lease, renew_at };
            }
            (Err(e), None) => {
                self.events.push_back(Event::Error(e));
                self.wait_for_poll(now);
            }
            (other, _) => {
                self.events.push_back(Event::Error(LeaseError::Unexpected {
                    reply: format!("{other:?}"),
                }));
                self.wait_for_poll(now);
            }
        }
        None
    }

    fn wait_for_poll(&mut self, now: Now) {
        self.phase = if self.stopping {
            Phase::Finished(Some(ElectorExit::Resigned { released: None }))
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

impl Machine for Elector {
    type Outcome = ElectorExit;

    fn poll(&mut self, now: Now) -> Output<ElectorExit> {
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
                        self.phase =
                            Phase::Finished(Some(ElectorExit::Resigned { released: None }));
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
                    if !lease.is_valid(now.mono) {
                        self.claim_lease(&lease);
                        self.lost(now.mono, lease.token, LostReason::Expired);
                        if !self.cfg.protocol.renews() && !self.stopping {
                            // The end of a term: give the lock back at once.
                            let op = self.start(|c, e| LeaseOp::release(c, e, lease));
                            self.phase = Phase::Releasing(op);
                        }
                    } else if self.stopping {
                        let op = self.start(|c, e| LeaseOp::release(c, e, lease));
                        self.phase = Phase::Releasing(op);
                    } else if now.mono >= renew_at {
                        let op = self.start(|c, e| LeaseOp::renew(c, e, lease.clone()));
                        self.phase = Phase::Renewing { op, lease };
                    } else {
                        return Output::Wait(renew_at.min(lease.valid_until));
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

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        match &mut self.phase {
            Phase::Campaigning(op) | Phase::Releasing(op) | Phase::Renewing { op, .. } => {
                op.handle_reply(now, id, reply)
            }
            _ => {}
        }
    }

    /// Resign: a leader releases (after any renewal in flight settles); a
    /// contender stops after any acquire in flight settles, releasing if
    /// that acquire won.
    fn stop(&mut self, _now: Now) {
        self.stopping = true;
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
