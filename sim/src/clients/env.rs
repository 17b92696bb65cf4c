//! What clients tell the checker: a process's environment, the outcomes
//! it reports, and the jobs it runs.

use super::handles::{sim_entropy, SimClock, SimStore};
use super::state::{sid, Inner, JobRec, Lane, OpRec, Said, Shared};
use crate::world::clock::EPOCH;
use lease_core::client::drive;
use lease_core::protocol::FenceOp;
use lease_core::{
    AcquireOutcome, LeaseError, LostReason, Observation, ReleaseOutcome, RenewOutcome,
};
use lease_core::{Clock, Entropy, LeaseConfig};
use std::time::Duration;

#[derive(Clone)]
pub(super) struct Env {
    pub(super) sh: Shared,
    pub(super) pid: usize,
    pub(super) node: usize,
    pub(super) cfg: LeaseConfig,
    /// The lease its jobs hold (an index into `Inner::keys`: 0, the
    /// lease; a pool's run sets its seat's once it took one).
    pub(super) lease: usize,
}

impl Env {
    pub(super) fn store(&self) -> SimStore {
        SimStore {
            sh: self.sh.clone(),
            pid: self.pid,
        }
    }

    pub(super) fn clock(&self) -> SimClock {
        SimClock {
            sh: self.sh.clone(),
            pid: self.pid,
        }
    }

    pub(super) fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut self.sh.borrow_mut())
    }

    /// The lane of the lease its jobs hold, on its node's protocol.
    pub(super) fn lane(&self, w: &Inner) -> Lane {
        Lane {
            key: self.lease,
            protocol: w.nodes[self.node].protocol,
        }
    }

    /// Starts an operation judged against `bound` alone, no standard
    /// bound added (a run's time limit: [`lease_core::Run::within`]).
    pub(super) fn op_start_exact(&self, name: &'static str, bound: Duration) -> usize {
        let k = self.op_start(name, None);
        self.with(|w| w.ops[k].bound = Some(bound.as_millis() as u64));
        k
    }

    /// Starts an operation; `bound` adds to the standard bound (a job's
    /// length), `None` for no bound.
    pub(super) fn op_start(&self, name: &'static str, bound: Option<Duration>) -> usize {
        let (pid, node) = (self.pid, self.node);
        let cfg = &self.cfg;
        let standard = (cfg.request_timeout + cfg.backoff_max) * (cfg.max_attempts + 2)
            + cfg.ttl
            + Duration::from_secs(2);
        self.with(|w| {
            let started = w.stamp();
            let lane = self.lane(w);
            w.ops.push(OpRec {
                pid,
                owner: w.procs[pid].owner,
                node,
                lane,
                pool_seats: None,
                name,
                started,
                bound: bound.map(|b| (b + standard).as_millis() as u64),
                said: Vec::new(),
                done: None,
            });
            let k = w.ops.len() - 1;
            w.procs[pid].op = Some(k);
            k
        })
    }

    pub(super) fn say(&self, op: usize, said: Said) {
        self.with(|w| {
            let at = w.stamp();
            let name = match &said {
                Said::Acquired { .. } => "acquired".to_string(),
                Said::Renewed { .. } => "renewed".to_string(),
                Said::Busy { .. } => "busy".to_string(),
                Said::Lost { .. } => "lost".to_string(),
                Said::AlreadyLost { .. } => "already lost".to_string(),
                Said::Released { .. } => "released".to_string(),
                Said::ReleaseUnknown { .. } => "release unknown".to_string(),
                Said::Broken { .. } => "broken".to_string(),
                Said::Failed { what, .. } => format!("error: {what}"),
                Said::Other(what) => what.clone(),
            };
            if let Said::Acquired { .. } = said {
                w.counts.acquisitions += 1;
            }
            *w.counts
                .outcomes
                .entry(format!("{}: {name}", w.ops[op].name))
                .or_default() += 1;
            let pid = w.ops[op].pid;
            let op_name = w.ops[op].name;
            w.log(|| format!("pid {pid} {op_name}: {said:?}"));
            w.ops[op].said.push((at, said));
        });
    }

    pub(super) fn op_end(&self, op: usize) {
        self.with(|w| {
            let at = w.stamp();
            w.ops[op].done = Some(at);
            let pid = w.ops[op].pid;
            if w.procs[pid].op == Some(op) {
                w.procs[pid].op = None;
            }
        });
    }

    pub(super) fn say_outcome<T: Says>(
        &self,
        op: usize,
        outcome: &Result<T, LeaseError>,
        acquire: bool,
    ) {
        self.say(op, said_of(outcome, acquire));
    }

    pub(super) fn rng_duration(&self, rng: &mut Entropy, lo: Duration, hi: Duration) -> Duration {
        lo + (hi.saturating_sub(lo)).mul_f64(rng.unit())
    }
}

pub(super) fn named(reason: &LostReason) -> Option<(String, u64)> {
    match reason {
        LostReason::TakenBy { holder, token, .. } => Some((holder.clone(), *token)),
        _ => None,
    }
}

/// What an operation's outcome says, for the checker.
pub(super) trait Says {
    fn said(&self) -> Said;
}

impl Says for AcquireOutcome {
    fn said(&self) -> Said {
        match self {
            AcquireOutcome::Acquired(l) => Said::Acquired {
                token: l.token,
                session: Some(sid(&l.record.holder, &l.acquisition)),
            },
            AcquireOutcome::Busy(b) => Said::Busy {
                holder: b.holder.clone(),
                token: b.token,
                expires: b.expires_at.0.saturating_sub(EPOCH.0),
            },
        }
    }
}

impl Says for RenewOutcome {
    fn said(&self) -> Said {
        match self {
            RenewOutcome::Renewed(l) => Said::Renewed { token: l.token },
            RenewOutcome::Lost(r) => Said::Lost { named: named(r) },
        }
    }
}

impl Says for ReleaseOutcome {
    fn said(&self) -> Said {
        match self {
            ReleaseOutcome::Released { token } => Said::Released { token: *token },
            ReleaseOutcome::AlreadyLost(r) => Said::AlreadyLost { named: named(r) },
            ReleaseOutcome::Unknown { token, .. } => Said::ReleaseUnknown { token: *token },
        }
    }
}

impl Says for Option<Observation> {
    fn said(&self) -> Said {
        Said::Other("inspected".into())
    }
}

impl Says for lease_core::BreakOutcome {
    fn said(&self) -> Said {
        Said::Broken { token: self.token }
    }
}

pub(super) fn said_of<T: Says>(outcome: &Result<T, LeaseError>, acquire: bool) -> Said {
    match outcome {
        Ok(outcome) => outcome.said(),
        Err(e) => Said::Failed {
            acquire,
            what: error_name(e),
            claims: claims_of(e),
        },
    }
}

/// The sessions an error hands on as unsettled.
pub(super) fn claims_of(e: &LeaseError) -> Vec<String> {
    e.unsettled()
        .iter()
        .map(|claim| sid(&claim.holder, &claim.acquisition))
        .collect()
}

/// What a failure that is the fleet's backoff after an unfinished probe
/// is called ([`error_name`]).
pub(super) const FLEET_BACKOFF: &str = "gave up: the fleet backs off its probe";

pub(super) fn error_name(e: &LeaseError) -> String {
    match e {
        // The fleet backing off after a probe that could not finish (the
        // shared verdict): caused by that probe's failure, which is judged
        // where it happened.
        LeaseError::GaveUp { last, .. } if last.contains("no client probes again") => {
            FLEET_BACKOFF.into()
        }
        LeaseError::GaveUp { .. } => "gave up".into(),
        LeaseError::Config { .. } => "config".into(),
        LeaseError::Unexpected { .. } => "unexpected".into(),
        LeaseError::Changed { .. } => "changed".into(),
        LeaseError::UnsafeStore { .. } => "unsafe store".into(),
        LeaseError::WonTooLate { released, .. } => format!("won too late (released: {released})"),
        LeaseError::ProtocolMismatch { .. } => "protocol mismatch".into(),
        LeaseError::Denied { .. } => "denied".into(),
        LeaseError::NoSuchBucket { .. } => "no such bucket".into(),
        LeaseError::Unsupported { .. } => "unsupported".into(),
        LeaseError::Unreadable { .. } => "unreadable".into(),
        // `LeaseError` is non-exhaustive outside lease-core.
        other => unreachable!("an error the simulator does not know: {other:?}"),
    }
}

/// Records a job's start at its first poll and its end (completion or
/// drop) when dropped.
struct JobGuard {
    pub(super) sh: Shared,
    pub(super) job: usize,
    pub(super) finished: bool,
}

impl JobGuard {
    pub(super) fn start(env: &Env, token: u64, tick: Option<String>) -> JobGuard {
        let (pid, node) = (env.pid, env.node);
        let job = env.with(|w| {
            let start = w.stamp();
            w.counts.jobs_started += 1;
            let lane = env.lane(w);
            w.jobs.push(JobRec {
                pid,
                owner: w.procs[pid].owner,
                node,
                lane,
                token,
                tick,
                start,
                end: None,
            });
            w.log(|| format!("pid {pid} node {node} job starts with token {token}"));
            w.jobs.len() - 1
        });
        JobGuard {
            sh: env.sh.clone(),
            job,
            finished: false,
        }
    }
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        let mut w = self.sh.borrow_mut();
        let end = w.stamp();
        w.jobs[self.job].end = Some(end);
        if self.finished {
            w.counts.jobs_finished += 1;
        } else {
            w.counts.jobs_dropped += 1;
        }
        let (job, finished) = (self.job, self.finished);
        w.log(|| format!("job {job} ends (finished: {finished})"));
    }
}

/// The work a holder does: a fenced write (CAS, epochs), then `len` of
/// activity on the node's clock.
pub(super) async fn job(env: Env, token: u64, len: Duration, tick: Option<String>) {
    let fenced = env.cfg.protocol.fences();
    work(env, token, len, tick, fenced).await;
}

/// A job of `len` with `token`, with the fenced write first if `fenced`.
pub(super) async fn work(env: Env, token: u64, len: Duration, tick: Option<String>, fenced: bool) {
    let mut guard = JobGuard::start(&env, token, tick);
    if fenced {
        let payload = format!("job of node {} token {token}", env.node).into_bytes();
        let protected = env.with(|w| env.lane(w).protected_key());
        let mut op = FenceOp::new(env.cfg.clone(), sim_entropy(), &protected, token, payload);
        let _ = drive(&mut op, &env.store(), &env.clock(), |_| {}).await;
    }
    let clock = env.clock();
    let until = clock.now().mono + len;
    clock.sleep_until(until).await;
    guard.finished = true;
}
