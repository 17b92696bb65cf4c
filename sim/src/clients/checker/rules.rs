//! The rules beside the outcomes: jobs (each within its session's
//! validity, never two at once), ticks (once per tick), the services'
//! `Leadership` answers, liveness, and the CLI clients' traces.

use super::facts::{describe, intersect, job_active, lagged, merge, subtract, validity, within};
use crate::clients::config::ClientKind;
use crate::clients::env::FLEET_BACKOFF;
use crate::clients::report::{Rule, Violation};
use crate::clients::state::{short, Inner, Lane, Rec, Said, Snapshot, Stamp};
use crate::world::clock::EPOCH;
use lease_core::client::Health;
use lease_core::verify;
use lease_core::Protocol;
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) fn check_jobs(
    w: &Inner,
    end: u64,
    found: &mut Vec<Violation>,
    excused: &mut Vec<Violation>,
) {
    let mut actives = Vec::new();
    // Each job's session's validity, strict and lenient (see `validity`).
    let mut validities = Vec::new();
    for (k, job) in w.jobs.iter().enumerate() {
        let active = job_active(w, job, end);
        // The owner's session with this token; several may have sent it
        // (an epoch renewal that lost its create): the one valid at start.
        let candidates: Vec<String> = w
            .sessions
            .iter()
            .filter(|(_, i)| i.owner == job.owner && i.lane == job.lane)
            .filter(|(_, i)| i.tokens.contains(&job.token))
            .map(|(s, _)| s.clone())
            .collect();
        // (The one valid at start; else the one an operator's break left
        // valid to its holder then.)
        let valid_at_start = |lenient: bool| {
            move |s: &&String| within(&validity(w, job.lane, s, lenient), job.start.0)
        };
        let session = candidates
            .iter()
            .find(valid_at_start(false))
            .or_else(|| candidates.iter().find(valid_at_start(true)))
            .or(candidates.first())
            .cloned();
        let (strict, lenient) = match &session {
            Some(s) => (
                validity(w, job.lane, s, false),
                validity(w, job.lane, s, true),
            ),
            None => (Vec::new(), Vec::new()),
        };
        let node = Some(job.node);
        let start_ok = strict
            .iter()
            .any(|&(a, b)| a <= job.start.0 && job.start.0 < b);
        let lenient_start_ok = lenient
            .iter()
            .any(|&(a, b)| a <= job.start.0 && job.start.0 < b);
        if !start_ok {
            let v = Violation {
                rule: Rule::JobWithoutLease,
                at_ms: job.start.0,
                node,
                text: format!(
                    "job {k} (pid {}) started with token {} but its session {} held no valid lease; the store's record was {}",
                    job.pid,
                    job.token,
                    session.as_deref().map_or("(none of its own)", short),
                    describe(w.current(job.lane, job.start), w, job.start.0)
                ),
            };
            if lenient_start_ok || lagged(w, job.node, job.start.0) {
                excused.push(v);
            } else {
                found.push(v);
            }
        } else {
            let past = subtract(&active, &strict);
            if let Some(&(a, _)) = past.first() {
                let total: u64 = past.iter().map(|(a, b)| b - a).sum();
                let v = Violation {
                    rule: Rule::JobPastValidity,
                    at_ms: a,
                    node,
                    text: format!(
                        "job {k} (pid {}, token {}) acted {total}ms beyond its lease's validity, from t={a}ms; the store's record then was {}",
                        job.pid,
                        job.token,
                        describe(w.current(job.lane, Stamp(a, u64::MAX)), w, a)
                    ),
                };
                if subtract(&active, &lenient).is_empty() || lagged(w, job.node, a) {
                    excused.push(v);
                } else {
                    found.push(v);
                }
            }
        }
        actives.push(active);
        validities.push((strict, lenient));
    }
    // Rule 1 finds the jobs whose active spans may meet; they overlap if
    // their active instants intersect.
    let spans: Vec<_> = (0..w.jobs.len())
        .map(|k| (w.jobs[k].start.0, actives[k].last().map_or(0, |l| l.1)))
        .collect();
    for (i, j, _) in verify::overlaps(&spans) {
        // Jobs of different leases (a pool's seats) may run at once.
        if w.jobs[i].lane.key != w.jobs[j].lane.key {
            continue;
        }
        // Ended before the other began (one after the other at one
        // instant: the first poll's millisecond is not an overlap).
        if w.jobs[i].end.is_some_and(|e| e <= w.jobs[j].start) {
            continue;
        }
        let both = intersect(&actives[i], &actives[j]);
        if let Some(&(a, _)) = both.first() {
            let (ji, jj) = (&w.jobs[i], &w.jobs[j]);
            let v = Violation {
                rule: Rule::JobsOverlap,
                at_ms: a,
                node: Some(jj.node),
                text: format!(
                    "two jobs at once from t={a}ms: job {i} (node {}, pid {}, token {}) and job {j} (node {}, pid {}, token {})",
                    ji.node, ji.pid, ji.token, jj.node, jj.pid, jj.token
                ),
            };
            // A job acting only because an operator broke its lease
            // without telling it (valid leniently, not strictly).
            let broken = |k: usize| {
                let (strict, lenient) = &validities[k];
                !within(strict, a) && within(lenient, a)
            };
            if lagged(w, ji.node, a) || lagged(w, jj.node, a) || broken(i) || broken(j) {
                excused.push(v);
            } else {
                found.push(v);
            }
        }
    }
}

/// Every CLI client's trace, written out and read back as a file would
/// be, replayed: a divergence means the machines took an input the
/// recorder missed; a broken rule, a deadline or token the trace itself
/// shows to be wrong.
#[cfg(feature = "trace")]
pub(super) fn check_traces(w: &mut Inner, end: u64, found: &mut Vec<Violation>) {
    use lease_core::trace::replay::{replay, Trace};
    for (node, recorder) in std::mem::take(&mut w.traces) {
        if recorder.is_empty() {
            continue;
        }
        w.counts.traces_replayed += 1;
        let text = recorder.to_jsonl();
        let report = match Trace::parse(&text) {
            Ok(trace) => replay(&trace),
            Err(e) => {
                found.push(Violation {
                    rule: Rule::TraceDiverged,
                    at_ms: end,
                    node: Some(node),
                    text: format!("the trace does not read back: {e}"),
                });
                continue;
            }
        };
        if let Some(run) = report.diverged() {
            found.push(Violation {
                rule: Rule::TraceDiverged,
                at_ms: end,
                node: Some(node),
                text: format!("run {} ({}): {:?}", run.run, run.op, run.replayed),
            });
        }
        for broken in &report.broken {
            found.push(Violation {
                rule: Rule::TraceRuleBroken,
                at_ms: end,
                node: Some(node),
                text: broken.to_string(),
            });
        }
    }
}

/// The most one completed tick adds to a record once the older ticks'
/// results are digests: its id at `MAX_TICK_BYTES` of characters JSON
/// escapes six times (768), a digest result and payload and the fields'
/// names and numbers.
const TICK_ENTRY_BYTES: usize = 1_000;

/// A record at its capacity: `MAX_RUNS` ticks, or within one tick of the
/// 8 KiB a client reads (its oldest ticks are left out to fit).
fn full(r: &Rec) -> bool {
    r.ticks.len() >= lease_core::tick::MAX_RUNS
        || r.bytes + TICK_ENTRY_BYTES > lease_core::record::MAX_RECORD_BYTES
}

/// Once per tick (cas and epochs, whose records keep completed ticks):
/// - `TickRanTwice`: no job for a tick starts while the store's record
///   has said it completed, unless the record now is full (`MAX_RUNS`
///   ticks, or within one tick of the 8 KiB a client reads: its oldest
///   ticks are left out, and a duplicate of one runs again) and no longer
///   lists it;
/// - `TickNotRecorded`: a run that says its release recorded its tick left
///   a record that has it, unless a record listed the tick after the
///   run's job started and a full record has left it out since.
pub(super) fn check_ticks(w: &Inner, found: &mut Vec<Violation>) {
    for job in w.jobs.iter().filter(|j| j.lane.protocol != Protocol::Mutex) {
        let Some(tick) = &job.tick else { continue };
        let hist = w.hist(job.lane);
        let upto = hist.partition_point(|s| s.at <= job.start);
        let lists = |s: &Snapshot| s.rec.as_ref().is_some_and(|r| r.ticks.contains(tick));
        let first = hist[..upto].iter().position(lists);
        let last = hist[..upto].iter().rposition(lists);
        let current = w.current(job.lane, job.start);
        let unlisted = current.is_none_or(|r| !r.ticks.contains(tick));
        // Full, and the tick left out of it; or a simple client's write
        // since the last record that listed it (it keeps no ticks).
        let dropped = unlisted
            && (current.is_some_and(full)
                || last.is_some_and(|i| by_simple_client(&hist[i..upto])));
        if let (Some(since), false) = (first.map(|i| &hist[i]), dropped) {
            found.push(Violation {
                rule: Rule::TickRanTwice,
                at_ms: job.start.0,
                node: Some(job.node),
                text: format!(
                    "job for tick {tick} (pid {}, token {}) started while the store's record has said since t={}ms that the tick completed; the record then was {}",
                    job.pid,
                    job.token,
                    since.at.0,
                    describe(w.current(job.lane, job.start), w, job.start.0)
                ),
            });
        }
    }
    check_slots(w, found);
    for r in w.tick_reports.iter().filter(|r| r.recorded) {
        let current = w.current(r.lane, r.at);
        // A report made late (its process paused after its release): a
        // record of the run's since then, now left out of a full record.
        let started = w
            .jobs
            .iter()
            .find(|j| j.pid == r.pid && j.tick.as_ref() == Some(&r.tick));
        let hist = w.hist(r.lane);
        let listed_since = started.is_some_and(|j| {
            hist.iter()
                .filter(|s| s.at >= j.start && s.at <= r.at)
                .any(|s| {
                    s.rec
                        .as_ref()
                        .is_some_and(|rec| rec.ticks.contains(&r.tick))
                })
        });
        // Or a simple client's write after the last record that listed
        // it (it keeps no ticks).
        let dropped = started.is_some_and(|j| {
            let from = hist.partition_point(|s| s.at < j.start);
            let to = hist.partition_point(|s| s.at <= r.at);
            let listed = hist[from..to].iter().rposition(|s| {
                s.rec
                    .as_ref()
                    .is_some_and(|rec| rec.ticks.contains(&r.tick))
            });
            listed.is_some_and(|i| by_simple_client(&hist[from + i..to]))
        });
        let left_out = listed_since && (current.is_some_and(full) || dropped);
        if !current.is_some_and(|rec| rec.ticks.contains(&r.tick)) && !left_out {
            found.push(Violation {
                rule: Rule::TickNotRecorded,
                at_ms: r.at.0,
                node: Some(r.node),
                text: format!(
                    "pid {} reported tick {} ran and recorded, but the store's record then was {}",
                    r.pid,
                    r.tick,
                    describe(current, w, r.at.0)
                ),
            });
        }
    }
}

/// Whether a simple client's record is among `snaps`: its write kept none
/// of the completed ticks the record before it listed
/// (`docs/protocols.md`, "Once per tick").
fn by_simple_client(snaps: &[Snapshot]) -> bool {
    snaps
        .iter()
        .any(|s| s.rec.as_ref().is_some_and(|r| r.foreign))
}

/// A cron host's job is for a slot the store's clock chose: the slot
/// (`slot:<name>@<start>`, `cron_every` long) contains an instant, by the
/// store's clock, between its process's start and the job's start (the
/// run read the record in between; the store's `Date` is that instant to
/// the second, its front ends off by up to `front_end_skew`), and with
/// `cron_late` the read was no later than that into the slot.
fn check_slots(w: &Inner, found: &mut Vec<Violation>) {
    let every = w.cfg.cron_every.as_millis() as u64;
    let skew = w.cfg.front_end_skew.as_millis() as u64;
    for job in w
        .jobs
        .iter()
        .filter(|j| w.nodes[j.node].kind == ClientKind::Cron)
    {
        let Some(tick) = &job.tick else { continue };
        let Some(start) = tick
            .rsplit_once('@')
            .and_then(|(_, at)| lease_core::schedule::parse_utc(at))
        else {
            continue;
        };
        // The slot in real (simulated) ms, and the window of the read.
        let slot = start.0 as i64 - EPOCH.0 as i64;
        let read_from = w.procs[job.pid].started as i64 - skew as i64 - 1_000;
        let read_to = job.start.0 as i64 + skew as i64;
        let late = w.cfg.cron_late.map(|l| l.as_millis() as i64);
        let contains = slot <= read_to && slot + every as i64 > read_from;
        let in_time = late.is_none_or(|late| read_from <= slot + late);
        if !(contains && in_time) {
            found.push(Violation {
                rule: Rule::SlotNotTheStores,
                at_ms: job.start.0,
                node: Some(job.node),
                text: format!(
                    "cron job (pid {}, token {}) ran for {tick}, which starts at t={slot}ms and lasts {every} ms, but its run read the store between t={read_from}ms and t={read_to}ms{}",
                    job.pid,
                    job.token,
                    late.map(|l| format!(" and may start at most {l} ms into its slot")).unwrap_or_default()
                ),
            });
        }
    }
}

/// The services' `Leadership` answers, judged by the store: a yes
/// (`is_leader()`, `token()`, or `health()` naming a term) only while the
/// store's record is the handle's live lease with that token, and never
/// after its `resign()`; a healthy leader only while a write of its term
/// sent within the overdue bound has landed. (At most one handle says yes
/// at any instant follows: one record is live at a time.)
pub(super) fn check_services(w: &Inner, found: &mut Vec<Violation>, excused: &mut Vec<Violation>) {
    for s in &w.samples {
        let t = s.at.0;
        let health_token = match s.health {
            Health::Leading { token, .. } | Health::RenewalOverdue { token, .. } => Some(token),
            Health::Following => None,
        };
        if !s.is_leader && s.token.is_none() && health_token.is_none() {
            continue;
        }
        let said = format!(
            "pid {} said is_leader {}, token {:?}, health {:?}",
            s.pid, s.is_leader, s.token, s.health
        );
        let mut judge = |rule: Rule, text: String, excuse: bool| {
            let v = Violation {
                rule,
                at_ms: t,
                node: Some(s.node),
                text,
            };
            if excuse || lagged(w, s.node, t) {
                excused.push(v);
            } else {
                found.push(v);
            }
        };
        if s.resigned {
            judge(Rule::StaleYes, format!("{said} after its resign()"), false);
            continue;
        }
        let Some(token) = s.token.or(health_token) else {
            judge(
                Rule::StaleYes,
                format!("{said}: a yes with no token"),
                false,
            );
            continue;
        };
        let candidates: Vec<&String> = w
            .sessions
            .iter()
            .filter(|(_, i)| i.owner == s.owner && i.lane == s.lane)
            .filter(|(_, i)| i.tokens.contains(&token))
            .map(|(session, _)| session)
            .collect();
        let live = w.live(s.lane, s.at);
        if !live.is_some_and(|r| candidates.contains(&&r.session)) {
            // An operator's break takes the lease without telling its
            // holder (the fence refuses its writes).
            let broken = candidates.iter().any(|c| {
                validity(w, s.lane, c, true)
                    .iter()
                    .any(|&(a, b)| a <= t && t < b)
            });
            judge(
                Rule::StaleYes,
                format!(
                    "{said}, but the store's record was {}",
                    describe(w.current(s.lane, s.at), w, t)
                ),
                broken,
            );
            continue;
        }
        if let Health::Leading { .. } = s.health {
            let cfg = w.cfg.lease_config(s.node);
            let overdue = Health::overdue_after(&cfg).as_millis() as f64;
            let bound = (overdue / (1.0 - w.cfg.max_drift)) as u64 + 2;
            let fresh = w.writes.values().any(|x| {
                !x.released
                    && x.applied.is_some_and(|a| a <= s.at)
                    && x.sent_at + bound >= t
                    && x.session.as_ref().is_some_and(|c| candidates.contains(&c))
            });
            if !fresh {
                judge(
                    Rule::HealthyWhenOverdue,
                    format!(
                        "{said}, but no write of its term sent in the last {bound}ms had landed"
                    ),
                    false,
                );
            }
        }
    }
}

/// Liveness of the clients that tick (singleton, `lease run`, the CLI):
/// an acquire whose whole span, and a settling time before it, saw no
/// fault of any kind must not fail (busy on a record that is not live, or
/// on our own, is judged by the outcome rules).
pub(super) fn check_quiet_acquires(w: &Inner, found: &mut Vec<Violation>) {
    if w.cfg
        .protocols
        .iter()
        .any(|q| Some(q) != w.cfg.protocols.first())
    {
        return; // another protocol at the key: a refusal is the answer
    }
    if w.cfg.same_entropy && w.cfg.probe {
        // Alike-seeded clients probe under one id and see each other's
        // objects: the probe refuses the store (it fails closed).
        return;
    }
    let cfg = w.cfg.lease_config(0);
    let latency = w.cfg.latency.1.as_millis() as u64;
    let settle = ((cfg.request_timeout + cfg.backoff_max) * 2).as_millis() as u64 + 4 * latency;
    for (k, op) in w.ops.iter().enumerate() {
        let Some(done) = op.done else { continue };
        let from = op.started.0.saturating_sub(settle);
        if w.fault_times.iter().any(|&f| from <= f && f <= done.0) {
            continue;
        }
        for (at, said) in &op.said {
            if let Said::Failed {
                acquire: true,
                what,
                ..
            } = said
            {
                // The fleet's backoff after a probe that could not finish
                // (`docs/protocols.md`, "The shared verdict") outlasts the
                // settling time by design: that probe's failure is judged
                // in its own operation.
                let backoff = lease_core::protocol::PROBE_MAX_BACKOFF.as_millis() as u64;
                if what == FLEET_BACKOFF
                    && w.fault_times
                        .iter()
                        .any(|&f| f <= at.0 && at.0 - f <= backoff)
                {
                    continue;
                }
                found.push(Violation {
                    rule: Rule::FailedWhenQuiet,
                    at_ms: at.0,
                    node: Some(op.node),
                    text: format!(
                        "{} (pid {}, op {k}) failed ({what}) with no fault from t={from}ms on",
                        op.name, op.pid
                    ),
                });
            }
        }
    }
}

/// Elector worlds: no gap in coverage holds a quiet window (see the
/// module docs).
pub(super) fn check_liveness(w: &Inner, end: u64, found: &mut Vec<Violation>) {
    if w.cfg
        .clients
        .iter()
        .any(|k| !matches!(k, ClientKind::Elector | ClientKind::Service))
    {
        return;
    }
    let Some(&p) = w.cfg.protocols.first() else {
        return;
    };
    if w.cfg.protocols.iter().any(|q| *q != p) {
        return;
    }
    let cfg = w.cfg.lease_config(0);
    let latency = w.cfg.latency.1.as_millis() as u64;
    let settle = ((cfg.request_timeout + cfg.backoff_max) * 2).as_millis() as u64 + 4 * latency;
    let slack = 1000 + cfg.drift_margin(cfg.ttl).as_millis() as u64 + 1500;
    let window = (cfg.ttl + cfg.poll_every.mul_f64(1.1)).as_millis() as u64 + settle + slack;
    // Leading intervals per owner, from the electors' own reports.
    let mut leading: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for op in w
        .ops
        .iter()
        .filter(|o| o.name == "elector" || o.name == "service")
    {
        let stop = op
            .done
            .map_or(w.procs[op.pid].ended.unwrap_or(end), |d| d.0);
        let mut since = None;
        for (at, said) in &op.said {
            match said {
                Said::Acquired { .. } => since = since.or(Some(at.0)),
                Said::Lost { .. } | Said::Released { .. } => {
                    if let Some(s) = since.take() {
                        leading.entry(op.owner).or_default().push((s, at.0));
                    }
                }
                _ => {}
            }
        }
        if let Some(s) = since {
            leading.entry(op.owner).or_default().push((s, stop));
        }
    }
    let mut covered = Vec::new();
    let hist = w.hist(Lane {
        key: 0,
        protocol: p,
    });
    for (i, s) in hist.iter().enumerate() {
        let Some(r) = &s.rec else { continue };
        if r.released {
            continue;
        }
        let Some(owner) = w.owner_of(&r.session) else {
            continue;
        };
        let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
        let live = [(s.at.0, next.min(r.expires))];
        if let Some(l) = leading.get(&owner) {
            covered.extend(intersect(&live, &merge(l.clone())));
        }
    }
    let covered = merge(covered);
    let gaps = subtract(&[(0, end)], &covered);
    // A pause ends a quiet window too: the paused process resumes, with
    // its operation's deadline passed (a pause starts one: it is a fault).
    let mut faults = w.fault_times.clone();
    faults.extend(
        w.procs
            .iter()
            .flat_map(|p| p.pauses.iter().map(|&(_, b)| b)),
    );
    faults.sort_unstable();
    for (g0, g1) in gaps {
        let mut cuts = vec![g0];
        cuts.extend(faults.iter().copied().filter(|&f| f > g0 && f < g1));
        cuts.push(g1);
        for pair in cuts.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b - a < window {
                continue;
            }
            // An inert (paused, suspended) process cannot take over.
            let runner = w.procs.iter().enumerate().find(|(_, pr)| {
                pr.started <= a
                    && pr.ended.unwrap_or(u64::MAX) >= a + window
                    && intersect(&[(a, a + window)], &merge(pr.pauses.clone())).is_empty()
            });
            if let Some((pid, pr)) = runner {
                found.push(Violation {
                    rule: Rule::NoTakeover,
                    at_ms: a + window,
                    node: None,
                    text: format!(
                        "nobody held the lease from t={g0}ms to t={g1}ms, though t={a}..{}ms was fault-free and node {} (pid {pid}) ran throughout",
                        a + window,
                        pr.node
                    ),
                });
                break;
            }
        }
    }
}

/// How long a shard fleet takes to settle after its last disruption, with
/// its settings: a dead member's session or the coordinator's lease
/// expires (a ttl, a date's resolution), a new coordinator's poll, its
/// round, the old owner's round that revokes, the drain's bound
/// (ttl/2), the round that gives back, the new owner's round: a ttl and
/// five poll intervals (ttl/3) and a half, with retries and latency; late
/// deliveries add their delay.
pub(super) fn shard_bound(w: &Inner) -> u64 {
    let cfg = w.cfg.lease_config(0);
    let retries = (cfg.request_timeout + cfg.backoff_max) * 2;
    let late = if w.cfg.faults.late > 0.0 {
        w.cfg.faults.late_max
    } else {
        Duration::ZERO
    };
    (cfg.ttl * 4 + retries + late + Duration::from_secs(3)).as_millis() as u64
}

/// Shard fleets: once nothing disrupted the fleet for [`shard_bound`] (no
/// fault, no member starting, ending, leaving or paused), every shard is
/// owned, on the store, by a live member, and the members' numbers of
/// shards differ by at most one.
pub(super) fn check_shards(w: &Inner, end: u64, found: &mut Vec<Violation>) {
    if w.cfg.shards == 0 {
        return;
    }
    let members: Vec<usize> = (0..w.procs.len())
        .filter(|&pid| w.nodes[w.procs[pid].node].kind == ClientKind::Shard)
        .collect();
    let mut last = w.fault_times.iter().copied().max().unwrap_or(0);
    for &pid in &members {
        let p = &w.procs[pid];
        last = last.max(p.started);
        if let Some(e) = p.ended.filter(|&e| e < end) {
            last = last.max(e);
        }
        for &(_, until) in &p.pauses {
            last = last.max(until);
        }
    }
    let at = last + shard_bound(w);
    if at >= end {
        return;
    }
    if members.iter().any(|&pid| lagged(w, w.procs[pid].node, at)) {
        return;
    }
    let live: Vec<usize> = members
        .iter()
        .copied()
        .filter(|&pid| w.procs[pid].started <= at && w.procs[pid].ended.is_none_or(|e| e > at))
        .collect();
    if live.is_empty() {
        return;
    }
    let stamp = Stamp(at, u64::MAX);
    let mut count: BTreeMap<usize, u32> = live.iter().map(|&pid| (w.procs[pid].owner, 0)).collect();
    for shard in 0..w.cfg.shards {
        let key = lease_core::client::shard_key(crate::clients::config::SHARD_PREFIX, shard);
        let Some(k) = w.keys.iter().position(|x| *x == key) else {
            continue;
        };
        let lane = Lane {
            key: k,
            protocol: Protocol::Cas,
        };
        let owner = w.live(lane, stamp).and_then(|r| w.owner_of(&r.session));
        match owner.and_then(|o| count.get_mut(&o)) {
            Some(n) => *n += 1,
            None => found.push(Violation {
                rule: Rule::ShardUnowned,
                at_ms: at,
                node: None,
                text: format!(
                    "shard {shard} owned by no live member {}ms after the fleet's last disruption (t={last}ms); the store's record was {}",
                    at - last,
                    describe(w.current(lane, stamp), w, at)
                ),
            }),
        }
    }
    let (lo, hi) = (
        count.values().min().copied().unwrap_or(0),
        count.values().max().copied().unwrap_or(0),
    );
    if hi > lo + 1 {
        found.push(Violation {
            rule: Rule::ShardsUnbalanced,
            at_ms: at,
            node: None,
            text: format!(
                "shards per live member (by owner) {count:?}, {}ms after the fleet's last disruption (t={last}ms)",
                at - last
            ),
        });
    }
}
