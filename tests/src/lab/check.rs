//! The lab's checker: it judges what happened, from what the store holds
//! (the protected object, and the lease writes the store applied, in the
//! order it applied them, from the proxy's log), what each process believed
//! (its journal) and what the lab did (processes, faults, phases). Nothing
//! it uses comes from the code under test's own view of success.
//!
//! The rules:
//!
//! 1. **The protected object is consistent.** Its records' tokens never
//!    decrease (no fenced write lowered the token); no record appears twice;
//!    between a job's start and end records no other job's record appears,
//!    except a newer token's start, or a later job of the same process
//!    under the same token (the earlier one was stopped at its deadline
//!    and left no end record; rule 3 checks that a process never runs two
//!    jobs at once); after either, the older job's end must never be
//!    accepted.
//! 2. **Every accepted write's token was held.** When the store applied a
//!    protected write carrying token `T`, the lease record it held had
//!    token `T`; or it had when the write was sent and the network delivered
//!    it late (counted; the fence's documented limit). Otherwise it is a
//!    violation, unless the writer was frozen (outside the safety
//!    assumptions: counted as excused).
//! 3. **No overlap of beliefs.** No two jobs of different processes
//!    believed they held the lease at one real instant (from `begin` to
//!    `finishing` or `aborted` in their journals, or to their process's
//!    death; and on to the last `alive` of a process the job started, a
//!    shell's child or a daemon, when that comes later). An overlap is excused only when the older job's process was
//!    frozen during it (a pause longer than the deadline is outside the
//!    safety assumptions) *and* the fence kept the older job's end record
//!    out of the protected object.
//! 4. **Liveness.** In every calm, once the last fault has ended (a
//!    freeze, a blackhole or a held request can outlast its storm), some
//!    job is running within `ttl + 1 s + ttl/3 + 2 s`: a record left by a
//!    dead or frozen holder expires within the ttl (and a `Date`'s
//!    one-second resolution), a contender tries again within a poll
//!    interval (`ttl/3`), and starting a process with its probe and the
//!    job's start record takes under 2 s here. Gaps between jobs inside
//!    the calm are held to the same bound.
//! 5. **No error in a calm.** Once a calm's faults have ended, every
//!    `lease run` that starts and ends in it ends done (0), busy (3) or
//!    lost (4); every function invocation in it gets a response, not an
//!    error; no job or service notes an error. (A slow or queued store is
//!    no excuse: a fleet must not drown its own store, with probes or
//!    anything else.)
//! 6. **Every flight recorder replays** (see below).
//! 7. **The shard fleet** is judged by its own rules
//!    ([`shard_check`](super::shard_check)): no two members work on a
//!    shard at once, its protected object's tokens never go down, and
//!    after a calm of the fleet's bound every shard is owned by a live
//!    member, balanced within one. Its members' errors in a calm are
//!    rule 5's.
//!
//! The summary also counts the capability probe's requests (to
//! `<key>.probe/…`) against all requests, in all and after the first
//! minute: a fleet probes once, then reads the shared verdict.

use super::fleet::{FleetFacts, FleetJudgement};
use super::proxy::{Exchange, Fault, Kind};
use super::LabConfig;
use lease_core::Fenced;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// One process the lab ran.
#[derive(Clone, Debug)]
pub struct ProcRecord {
    /// Its slot.
    pub slot: usize,
    /// Its pid (`lease run`'s for a runner: its job's parent).
    pub pid: u32,
    /// Not a `lease run`: a service, a function or a shard member.
    pub service: bool,
    /// A member of the shard fleet (`lab-shard`).
    pub member: bool,
    /// When it was spawned (Unix ms).
    pub spawned_ms: u64,
    /// When the lab saw it exit.
    pub exited_ms: u64,
    /// Its exit code.
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Its wall-clock offset.
    pub clock_offset_ms: i64,
    /// The name of its flight recorder's file (`lease run`).
    pub trace: Option<String>,
}

impl ProcRecord {
    /// As JSON, for the logs.
    pub fn to_json(&self) -> Value {
        json!({"slot": self.slot, "pid": self.pid, "service": self.service, "member": self.member,
            "spawned_ms": self.spawned_ms, "exited_ms": self.exited_ms, "code": self.code,
            "signal": self.signal, "clock_offset_ms": self.clock_offset_ms, "trace": self.trace})
    }
}

/// A process fault the lab injected.
#[derive(Clone, Debug)]
pub struct ProcessFault {
    /// `kill`, `freeze` or `blackhole`.
    pub kind: String,
    /// The slot hit.
    pub slot: usize,
    /// The process hit (0 for a blackhole, which hits the slot's traffic).
    pub pid: u32,
    /// From (Unix ms).
    pub from_ms: u64,
    /// To (the same as `from_ms` for a kill).
    pub to_ms: u64,
}

impl ProcessFault {
    /// As JSON, for the logs.
    pub fn to_json(&self) -> Value {
        json!({"kind": self.kind, "slot": self.slot, "pid": self.pid,
            "from_ms": self.from_ms, "to_ms": self.to_ms})
    }
}

/// Everything the checker looks at.
pub struct Facts {
    /// The lease's ttl.
    pub ttl_ms: u64,
    /// When the processes started.
    pub started_ms: u64,
    /// When the last one was stopped.
    pub ended_ms: u64,
    /// (storm, from, to) windows.
    pub phases: Vec<(bool, u64, u64)>,
    /// Every journal line, by time.
    pub journals: Vec<Value>,
    /// The protected object at the end.
    pub object: Option<Vec<u8>>,
    /// The lease object at the end.
    pub lease: Option<Vec<u8>>,
    /// The proxy's log.
    pub log: Vec<Exchange>,
    /// The processes.
    pub procs: Vec<ProcRecord>,
    /// The process faults.
    pub faults: Vec<ProcessFault>,
    /// Whether `lease run` probed the store first.
    pub probe: bool,
    /// The flight recorders `lease run` wrote (on a lost lease or an
    /// error), each replayed by `lease replay`.
    pub traces: Vec<ReplayedTrace>,
    /// The shard fleet's own facts (none when the run had no members).
    pub fleet: FleetFacts,
}

/// One `lease run --trace` file and what `lease replay --json` made of it.
#[derive(Clone, Debug)]
pub struct ReplayedTrace {
    /// The file's name.
    pub file: String,
    /// `lease replay`'s JSON report (`ok`, `runs`, `broken`).
    pub report: Value,
}

impl ReplayedTrace {
    /// Replayed identically, no rule broken.
    pub fn ok(&self) -> bool {
        self.report["ok"] == true
    }

    /// Replayed identically, and every rule it broke is the work rule.
    pub fn only_late_work(&self) -> bool {
        let identical = self.report["runs"]
            .as_array()
            .is_some_and(|runs| runs.iter().all(|r| r["replayed"] != "diverged"));
        let broken = self.report["broken"].as_array();
        identical
            && broken.is_some_and(|b| {
                !b.is_empty()
                    && b.iter().all(|r| {
                        r.as_str()
                            .is_some_and(|r| r.contains("work ends by its deadline: it ended"))
                    })
            })
    }

    /// It records a lost lease (a `Lost` event of a hold).
    pub fn lost(&self) -> bool {
        self.report["runs"].as_array().is_some_and(|runs| {
            runs.iter().any(|r| {
                r["events"].as_array().is_some_and(|e| {
                    e.iter()
                        .any(|e| e.as_str().is_some_and(|e| e.starts_with("Lost")))
                })
            })
        })
    }
}

/// A job as its journal and the lab saw it.
#[derive(Clone, Debug)]
pub struct Job {
    /// (slot, pid, token, seq): the same in the journal and the object.
    pub id: (u64, u64, u64, u64),
    /// The process that held the lease for it (`lease run`, or the service).
    pub owner: (u64, u64),
    /// When it began believing.
    pub begin: u64,
    /// When it stopped believing.
    pub end: u64,
    /// Its end record was accepted (in the object).
    pub end_recorded: bool,
}

/// The checker's verdict and figures.
#[derive(Clone, Debug, Default)]
pub struct Judgement {
    /// What broke a rule, one line each.
    pub violations: Vec<String>,
    /// Jobs that began.
    pub jobs: usize,
    /// Distinct tokens that wrote records.
    pub tokens: usize,
    /// Changes of token in the protected object.
    pub handoffs: usize,
    /// Overlaps excused (frozen past the deadline and fenced).
    pub excused_overlaps: usize,
    /// Fenced rejections the jobs saw.
    pub fenced: usize,
    /// Accepted writes sent while held and delivered late.
    pub late_accepted: usize,
    /// Accepted stale writes of frozen writers.
    pub excused_stale: usize,
    /// The longest time with no job running (ms), after the first job.
    pub max_unavailable_ms: u64,
    /// The longest wait in a calm after the faults ended (ms).
    pub max_calm_wait_ms: u64,
    /// Calms whose liveness was checked.
    pub calms_checked: usize,
    /// `lease run` processes that lived wholly in a calm after its faults
    /// ended, and how many of them ended in an error (not done, busy or
    /// lost: exit 1, 5, a signal of their own).
    pub calm_runs: (usize, usize),
    /// Function invocations in a calm after its faults ended, and how
    /// many the Runtime API saw end in an error.
    pub calm_invocations: (usize, usize),
    /// Errors jobs and services noted in their journals in a calm after
    /// its faults ended.
    pub calm_noted_errors: usize,
    /// Requests the capability probe made (to `<key>.probe/…`): in all,
    /// and after the first minute; and every request after the first
    /// minute.
    pub probe_requests: (usize, usize, usize),
    /// Traces replayed, how many of them record a lost lease, and how
    /// many broke only the work rule after a freeze (excused).
    pub traces: (usize, usize, usize),
    /// The shard fleet's figures ([`shard_check`](super::shard_check)).
    pub fleet: FleetJudgement,
}

fn key_of(v: &Value) -> (u64, u64, u64, u64) {
    let n = |k: &str| v[k].as_u64().unwrap_or(u64::MAX);
    (n("slot"), n("pid"), n("token"), n("seq"))
}

/// The jobs, from the journals and the process records.
pub fn jobs(facts: &Facts, recorded_ends: &BTreeSet<(u64, u64, u64, u64)>) -> Vec<Job> {
    let mut open: BTreeMap<(u64, u64, u64, u64), Job> = BTreeMap::new();
    let mut alive: BTreeMap<(u64, u64, u64, u64), u64> = BTreeMap::new();
    let mut done = Vec::new();
    for v in &facts.journals {
        let t = v["t"].as_u64().unwrap_or(0);
        match v["ev"].as_str().unwrap_or_default() {
            "begin" => {
                let id = key_of(v);
                let service = v["kind"] == "service";
                // A `lease run` job names its `lease run` (`owner`: its
                // process group, which the lab gives each `lease run`);
                // journals without it name their parent.
                let owner_pid = if service {
                    v["pid"].as_u64()
                } else {
                    v["owner"].as_u64().or_else(|| v["ppid"].as_u64())
                }
                .unwrap_or(0);
                open.insert(
                    id,
                    Job {
                        id,
                        owner: (id.0, owner_pid),
                        begin: t,
                        end: u64::MAX,
                        end_recorded: recorded_ends.contains(&id),
                    },
                );
            }
            // A function's run, as its Runtime API saw it answered: the
            // job's own times are in the output of a run that ran.
            "response" if v["body"]["outcome"] == "ran" => {
                let body = &v["body"];
                let result = &body["output"]["result"];
                let slot = v["slot"].as_u64().unwrap_or(u64::MAX);
                let owner = facts
                    .procs
                    .iter()
                    .find(|p| p.slot as u64 == slot && p.spawned_ms <= t && t <= p.exited_ms)
                    .map_or(0, |p| p.pid as u64);
                let seq = v["id"]
                    .as_str()
                    .and_then(|id| id.rsplit('-').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let token = body["token"].as_u64().unwrap_or(0);
                done.push(Job {
                    id: (slot, owner, token, seq),
                    owner: (slot, owner),
                    begin: result["started_at_ms"].as_u64().unwrap_or(t),
                    end: result["finished_at_ms"].as_u64().unwrap_or(t),
                    // Its result write was accepted (fenced): nothing of it
                    // was kept out.
                    end_recorded: true,
                });
            }
            "finishing" | "aborted" => {
                if let Some(mut job) = open.remove(&key_of(v)) {
                    job.end = t;
                    done.push(job);
                }
            }
            // A process the job started (a shell's child, a daemon) works
            // for it: the job's belief lasts until its last sign of life.
            "alive" => {
                let n = |k: &str| v[k].as_u64().unwrap_or(u64::MAX);
                let id = (n("slot"), n("job_pid"), n("token"), n("seq"));
                let last = alive.entry(id).or_insert(t);
                *last = (*last).max(t);
            }
            _ => {}
        }
    }
    // Jobs that never said they finished ended with their process.
    for (_, mut job) in open {
        job.end = facts
            .procs
            .iter()
            .find(|p| p.slot as u64 == job.owner.0 && p.pid as u64 == job.owner.1)
            .map_or(facts.ended_ms, |p| p.exited_ms);
        done.push(job);
    }
    for job in &mut done {
        if let Some(&last) = alive.get(&job.id) {
            job.end = job.end.max(last);
        }
    }
    done.sort_by_key(|j| j.begin);
    done
}

/// Whether the process `owner` (slot, pid) was frozen by the lab at some
/// instant of `from..=to`.
pub(super) fn frozen_during(facts: &Facts, owner: (u64, u64), from: u64, to: u64) -> bool {
    facts.faults.iter().any(|f| {
        f.kind == "freeze"
            && f.slot as u64 == owner.0
            && f.pid as u64 == owner.1
            && f.from_ms <= to
            && f.to_ms >= from
    })
}

/// The records of the protected object: (nonce, record).
fn records(object: &[u8]) -> Result<(Fenced, Vec<Value>), String> {
    let fenced = Fenced::decode(object).ok_or("the protected object is not a fenced object")?;
    let mut out = Vec::new();
    for (_, line) in fenced.entries() {
        out.push(
            serde_json::from_slice(line).map_err(|e| {
                format!("unreadable record {:?}: {e}", String::from_utf8_lossy(line))
            })?,
        );
    }
    Ok((fenced, out))
}

/// Judges a run (see the module docs).
pub fn judge(facts: &Facts) -> Judgement {
    let mut j = Judgement::default();
    let mut violations = Vec::new();
    let mut bad = |s: String| violations.push(s);

    // 1. The protected object.
    let mut recorded_ends = BTreeSet::new();
    let mut superseded = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut tokens = BTreeSet::new();
    let mut handoffs = 0;
    if let Some(object) = &facts.object {
        match records(object) {
            Err(e) => bad(e),
            Ok((fenced, recs)) => {
                let mut last_token = 0;
                let mut open: Option<(u64, u64, u64, u64)> = None;
                for r in &recs {
                    let id = key_of(r);
                    let phase = r["phase"].as_str().unwrap_or_default().to_string();
                    if id.2 < last_token {
                        bad(format!("token lowered: {r} after token {last_token}"));
                    }
                    if id.2 != last_token && last_token != 0 {
                        handoffs += 1;
                    }
                    last_token = last_token.max(id.2);
                    tokens.insert(id.2);
                    if !seen.insert((id, phase.clone())) {
                        bad(format!("record written twice: {r}"));
                    }
                    match phase.as_str() {
                        "start" => {
                            if let Some(k) = open {
                                // A process runs its jobs one at a time (rule
                                // 3 checks it from the journals): an earlier
                                // job of its own under the same token left no
                                // end record because it was stopped at its
                                // deadline, or its end write failed.
                                let own_earlier =
                                    (k.0, k.1, k.2) == (id.0, id.1, id.2) && k.3 < id.3;
                                if k.2 >= id.2 && !own_earlier {
                                    bad(format!(
                                        "job {id:?} started while job {k:?} (token {}) was open",
                                        k.2
                                    ));
                                }
                                superseded.insert(k);
                            }
                            open = Some(id);
                        }
                        "end" => {
                            if superseded.contains(&id) {
                                bad(format!(
                                    "the end of job {id:?} was accepted after a newer job started"
                                ));
                            } else if open != Some(id) {
                                bad(format!("the end of job {id:?} has no open start"));
                            }
                            recorded_ends.insert(id);
                            open = None;
                        }
                        other => bad(format!("record with phase {other:?}: {r}")),
                    }
                }
                if fenced.token < last_token {
                    bad(format!(
                        "the object's fence token {} is below its last record's {last_token}",
                        fenced.token
                    ));
                }
            }
        }
    }
    j.tokens = tokens.len();
    j.handoffs = handoffs;

    // 2. Accepted writes were held (store order from the proxy's log).
    let mut applied: Vec<&Exchange> = facts
        .log
        .iter()
        .filter(|x| {
            x.applied_seq.is_some() && x.store_status.is_some_and(|s| (200..300).contains(&s))
        })
        .collect();
    applied.sort_by_key(|x| x.applied_seq);
    let mut lease_token = 0u64;
    // (applied_ms, token) of every lease write, to look up the time of sending.
    let mut lease_history: Vec<(u64, u64)> = Vec::new();
    let jobs_now = jobs(facts, &recorded_ends);
    for x in &applied {
        match x.kind {
            Kind::LeaseWrite => {
                if let Ok(v) = serde_json::from_slice::<Value>(&x.body) {
                    if let Some(t) = v["token"].as_u64() {
                        lease_token = t;
                        lease_history.push((x.applied_ms.unwrap_or(0), t));
                    }
                }
            }
            Kind::FenceWrite => {
                let Some(f) = Fenced::decode(&x.body) else {
                    bad(format!("a protected write that is not fenced: {}", x.path));
                    continue;
                };
                let Some(line) = f
                    .entries()
                    .last()
                    .and_then(|(_, l)| serde_json::from_slice::<Value>(l).ok())
                else {
                    continue;
                };
                let token = f.token;
                if token == lease_token {
                    continue;
                }
                let at_send = lease_history
                    .iter()
                    .rev()
                    .find(|(t, _)| *t <= x.arrived_ms)
                    .map_or(0, |(_, tok)| *tok);
                if token == at_send {
                    j.late_accepted += 1;
                    continue;
                }
                let id = key_of(&line);
                let owner = jobs_now
                    .iter()
                    .find(|job| job.id == id)
                    .map(|job| job.owner);
                let frozen =
                    owner.is_some_and(|o| frozen_during(facts, o, 0, x.applied_ms.unwrap_or(0)));
                if frozen {
                    j.excused_stale += 1;
                } else {
                    bad(format!(
                        "a write of token {token} ({line}) was accepted while the lease record had token {lease_token} (and {at_send} when it was sent)"
                    ));
                }
            }
            _ => {}
        }
    }

    // 3. Beliefs never overlap.
    let jobs = jobs_now;
    j.jobs = jobs.len();
    let spans: Vec<_> = jobs.iter().map(|job| (job.begin, job.end)).collect();
    for (a, b, _) in lease_core::verify::overlaps(&spans) {
        let (a, b) = (&jobs[a], &jobs[b]);
        if a.owner == b.owner {
            bad(format!(
                "one process ran two jobs at once: {:?} and {:?}",
                a.id, b.id
            ));
            continue;
        }
        let (old, new) = if a.id.2 <= b.id.2 { (a, b) } else { (b, a) };
        let overlap = a.end.min(b.end) - b.begin;
        if old.id.2 == new.id.2 {
            bad(format!(
                "two processes ran jobs with token {} at once for {overlap} ms: {:?} and {:?}",
                old.id.2, old.id, new.id
            ));
        } else if frozen_during(facts, old.owner, old.begin, old.end) && !old.end_recorded {
            j.excused_overlaps += 1;
        } else {
            bad(format!(
                "jobs {:?} [{}..{}] and {:?} [{}..{}] overlapped for {overlap} ms{}",
                old.id,
                old.begin,
                old.end,
                new.id,
                new.begin,
                new.end,
                if old.end_recorded {
                    " and both were recorded"
                } else {
                    ""
                }
            ));
        }
    }
    j.fenced = facts
        .journals
        .iter()
        .filter(|v| v["ev"] == "fenced" || (v["ev"] == "end" && v["accepted"] == false))
        .count();

    // 4. Liveness: gaps with no job running.
    let mut busy: Vec<(u64, u64)> = jobs.iter().map(|job| (job.begin, job.end)).collect();
    busy.sort();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (b, e) in busy {
        match merged.last_mut() {
            Some(last) if b <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((b, e)),
        }
    }
    for w in merged.windows(2) {
        j.max_unavailable_ms = j.max_unavailable_ms.max(w[1].0 - w[0].1);
    }
    let bound = facts.ttl_ms + 1_000 + facts.ttl_ms / 3 + 2_000;
    let faults_end = |from: u64, to: u64| faults_end(facts, from, to);
    // (A run of the shard fleet alone has no lease to hold.)
    let lease_fleet = facts.procs.is_empty() || facts.procs.iter().any(|p| !p.member);
    for &(storm, from, to) in &facts.phases {
        if storm || !lease_fleet {
            continue;
        }
        let quiet = faults_end(from, to);
        if quiet + bound > to {
            continue; // too short to judge
        }
        j.calms_checked += 1;
        // The first job running after `quiet`, then every gap up to `to`.
        let mut cursor = quiet;
        for &(b, e) in &merged {
            if e <= cursor {
                continue;
            }
            if b >= to {
                break;
            }
            let wait = b.saturating_sub(cursor);
            j.max_calm_wait_ms = j.max_calm_wait_ms.max(wait);
            if wait > bound {
                bad(format!(
                    "no job ran for {wait} ms in a calm ({cursor}..{b}), more than the bound {bound} ms"
                ));
            }
            cursor = e;
        }
        if cursor < to && to - cursor > bound {
            bad(format!(
                "no job ran for {} ms at the end of a calm ({cursor}..{to}), more than the bound {bound} ms",
                to - cursor
            ));
        }
    }
    // 5. No error in a calm: once a calm's faults have ended, every `lease
    //    run` and function invocation that starts and ends in it ends
    //    done, busy or lost, and no job or service notes an error.
    let quiet_calms: Vec<(u64, u64)> = facts
        .phases
        .iter()
        .filter(|p| !p.0)
        .map(|&(_, from, to)| (faults_end(from, to), to))
        .filter(|(quiet, to)| quiet < to)
        .collect();
    let in_calm = |from: u64, to: u64| quiet_calms.iter().any(|&(q, t)| from >= q && to <= t);
    for p in facts.procs.iter().filter(|p| !p.service) {
        if !in_calm(p.spawned_ms, p.exited_ms) {
            continue;
        }
        j.calm_runs.0 += 1;
        if !matches!((p.code, p.signal), (Some(0 | 3 | 4), _)) {
            j.calm_runs.1 += 1;
            bad(format!(
                "`lease run` (slot {}, pid {}) ended in a calm with {} ({}..{})",
                p.slot,
                p.pid,
                p.code
                    .map_or_else(|| format!("signal {:?}", p.signal), |c| format!("exit {c}")),
                p.spawned_ms,
                p.exited_ms
            ));
        }
    }
    // An invocation's outcome is judged with its start: one that began in
    // a storm (frozen, blackholed) and failed just after the calm's last
    // fault did not start and end in the calm.
    let invoked: BTreeMap<&str, u64> = facts
        .journals
        .iter()
        .filter(|v| v["ev"] == "invoke")
        .filter_map(|v| Some((v["id"].as_str()?, v["t"].as_u64()?)))
        .collect();
    for v in &facts.journals {
        let t = v["t"].as_u64().unwrap_or(0);
        let from = v["id"]
            .as_str()
            .and_then(|id| invoked.get(id).copied())
            .unwrap_or(t);
        if !in_calm(from, t) {
            continue;
        }
        match v["ev"].as_str().unwrap_or_default() {
            "invoke" => j.calm_invocations.0 += 1,
            "function_error" | "init_error" => {
                j.calm_invocations.1 += 1;
                bad(format!(
                    "a function invocation failed in a calm at {t}: {v}"
                ));
            }
            "error" => {
                j.calm_noted_errors += 1;
                bad(format!("an error noted in a calm at {t}: {v}"));
            }
            _ => {}
        }
    }
    let first_minute = facts.started_ms + 60_000;
    for x in &facts.log {
        let late = x.arrived_ms >= first_minute;
        let probe = x.path.contains(".probe/");
        j.probe_requests.0 += usize::from(probe);
        j.probe_requests.1 += usize::from(probe && late);
        j.probe_requests.2 += usize::from(late);
    }
    // 6. Every flight recorder replays to the outputs it recorded and
    //    breaks no rule of `lease replay` (tokens, deadlines within the
    //    store's expiry, work ended by its deadline). Excused, as an
    //    overlap is: work that ended late because the lab froze its
    //    process past the deadline (outside the safety assumptions), when
    //    nothing else is wrong with the trace.
    let mut excused = 0;
    for t in &facts.traces {
        if t.ok() {
            continue;
        }
        let frozen = facts
            .procs
            .iter()
            .find(|p| p.trace.as_deref() == Some(t.file.as_str()))
            .is_some_and(|p| {
                facts
                    .faults
                    .iter()
                    .any(|f| f.kind == "freeze" && f.pid == p.pid)
            });
        if frozen && t.only_late_work() {
            excused += 1;
        } else {
            bad(format!(
                "trace {} does not replay cleanly: {}",
                t.file, t.report
            ));
        }
    }
    j.traces = (
        facts.traces.len(),
        facts.traces.iter().filter(|t| t.lost()).count(),
        excused,
    );
    j.violations = violations;
    // 7. The shard fleet is judged by its own module, beside this one
    // (`lab::run`), into `j.fleet`.
    j
}

/// When the faults of the phase `from..to` ended: the last process fault
/// begun before `to` and the last request fault that arrived before it
/// (a freeze, a blackhole or a held request can outlast its storm), and
/// `from` when there was none.
pub(super) fn faults_end(facts: &Facts, from: u64, to: u64) -> u64 {
    let mut end = from;
    for f in &facts.faults {
        if f.from_ms < to {
            end = end.max(f.to_ms);
        }
    }
    for x in &facts.log {
        if x.fault != Fault::None && x.arrived_ms < to {
            end = end.max(x.applied_ms.unwrap_or(x.arrived_ms));
        }
    }
    end
}

/// The one-screen summary of a run.
///
/// `fleet` writes the shard fleet's lines (`shard_check::summary`) before
/// the violations.
pub fn summary(
    cfg: &LabConfig,
    facts: &Facts,
    j: &Judgement,
    fleet: impl FnOnce(&mut String),
) -> String {
    let mut s = String::new();
    let seconds = (facts.ended_ms - facts.started_ms) as f64 / 1000.0;
    let _ = writeln!(
        s,
        "fleet lab {:?}: {:?} store, seed {}, {:.0} s, ttl {} ms, probe {}",
        cfg.name,
        cfg.store,
        cfg.seed,
        seconds,
        facts.ttl_ms,
        if facts.probe { "on" } else { "off" }
    );
    let runs = facts.procs.iter().filter(|p| !p.service).count();
    let services = facts.procs.iter().filter(|p| p.service).count();
    let mut exits: BTreeMap<String, usize> = BTreeMap::new();
    for p in &facts.procs {
        let k = match (p.code, p.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(9)) => "killed".into(),
            (None, Some(sig)) => format!("signal {sig}"),
            _ => "stopped".into(),
        };
        *exits.entry(k).or_default() += 1;
    }
    let _ = writeln!(
        s,
        "processes: {} slots ({} runners, {} services, {} functions, {} shard members); {runs} `lease run` and {services} service, function or member processes; exits {exits:?}",
        cfg.runners + cfg.services + cfg.functions + cfg.members,
        cfg.runners,
        cfg.services,
        cfg.functions,
        cfg.members
    );
    let noted_errors = facts.journals.iter().filter(|v| v["ev"] == "error").count();
    if noted_errors > 0 {
        let _ = writeln!(
            s,
            "errors noted by jobs and services in their journals: {noted_errors}"
        );
    }
    if cfg.functions > 0 {
        let mut runs: BTreeMap<String, usize> = BTreeMap::new();
        for v in &facts.journals {
            let what = match v["ev"].as_str() {
                Some("response") => v["body"]["outcome"].as_str().unwrap_or("?").to_string(),
                Some("function_error") => {
                    format!("error {}", v["body"]["errorType"].as_str().unwrap_or("?"))
                }
                Some("init_error") => "init error".into(),
                _ => continue,
            };
            *runs.entry(what).or_default() += 1;
        }
        let invoked = facts
            .journals
            .iter()
            .filter(|v| v["ev"] == "invoke")
            .count();
        let _ = writeln!(
            s,
            "functions: {} slots; {invoked} invocations: {runs:?}",
            cfg.functions
        );
    }
    let mut faults: BTreeMap<String, usize> = BTreeMap::new();
    for x in &facts.log {
        if x.fault != Fault::None {
            *faults.entry(x.fault.name()).or_default() += 1;
        }
    }
    for f in &facts.faults {
        *faults.entry(f.kind.clone()).or_default() += 1;
    }
    let offsets = facts
        .procs
        .iter()
        .filter(|p| p.clock_offset_ms != 0)
        .count();
    if offsets > 0 {
        faults.insert("clock-offset".into(), offsets);
    }
    let _ = writeln!(
        s,
        "faults injected: {} in all: {faults:?}",
        faults.values().sum::<usize>()
    );
    let _ = writeln!(
        s,
        "requests: {} through the proxy; storms {}, calms {} ({} checked for liveness)",
        facts.log.len(),
        facts.phases.iter().filter(|p| p.0).count(),
        facts.phases.iter().filter(|p| !p.0).count(),
        j.calms_checked
    );
    let share = |part: usize, all: usize| {
        if all == 0 {
            "-".to_string()
        } else {
            format!("{:.1} %", 100.0 * part as f64 / all as f64)
        }
    };
    let (probes, late_probes, late) = j.probe_requests;
    let _ = writeln!(
        s,
        "probe requests: {probes} of {} ({}); after the first minute {late_probes} of {late} ({})",
        facts.log.len(),
        share(probes, facts.log.len()),
        share(late_probes, late)
    );
    let _ = writeln!(
        s,
        "in calms after their faults: {} `lease run`, {} ended in an error ({}); {} function invocations, {} failed ({}); {} errors noted by jobs and services",
        j.calm_runs.0,
        j.calm_runs.1,
        share(j.calm_runs.1, j.calm_runs.0),
        j.calm_invocations.0,
        j.calm_invocations.1,
        share(j.calm_invocations.1, j.calm_invocations.0),
        j.calm_noted_errors
    );
    let _ = writeln!(
        s,
        "jobs run: {}; tokens {}; handoffs {}; fenced rejections {}",
        j.jobs, j.tokens, j.handoffs, j.fenced
    );
    let _ = writeln!(
        s,
        "overlaps: {} (excused, frozen past the deadline and fenced: {}); stale writes accepted: late-delivered {}, of frozen writers {}",
        j.violations.iter().filter(|v| v.contains("overlapped") || v.contains("at once")).count(),
        j.excused_overlaps,
        j.late_accepted,
        j.excused_stale
    );
    let _ = writeln!(
        s,
        "max unavailability: {} ms; longest wait in a calm after the faults: {} ms",
        j.max_unavailable_ms, j.max_calm_wait_ms
    );
    let _ = writeln!(
        s,
        "flight recorders: {} written by `lease run`, {} of them a lost lease; each replayed by `lease replay` ({} broke only the work rule after the lab froze the process past its deadline: excused)",
        j.traces.0, j.traces.1, j.traces.2
    );
    fleet(&mut s);
    let _ = writeln!(s, "violations: {}", j.violations.len());
    for v in j.violations.iter().take(10) {
        let _ = writeln!(s, "  - {v}");
    }
    if j.violations.len() > 10 {
        let _ = writeln!(s, "  ... and {} more", j.violations.len() - 10);
    }
    s
}

/// The checker must be able to fail: each rule, broken on purpose.
/// A protected object holding `lines` (JSON records with a `token` each),
/// fenced at their highest token, as the lab's jobs leave it.
#[cfg(test)]
pub(crate) fn fenced_object(lines: &[Value]) -> Vec<u8> {
    let mut payload = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        payload.extend_from_slice(format!("n{i} {line}\n").as_bytes());
    }
    Fenced {
        token: lines
            .iter()
            .filter_map(|l| l["token"].as_u64())
            .max()
            .unwrap_or(0),
        nonce: "last".into(),
        payload,
    }
    .encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(records: &[(u64, u64, u64, &str)]) -> Vec<u8> {
        let with_seq: Vec<_> = records
            .iter()
            .map(|&(slot, pid, token, phase)| (slot, pid, token, 0, phase))
            .collect();
        object_seq(&with_seq)
    }

    fn object_seq(records: &[(u64, u64, u64, u64, &str)]) -> Vec<u8> {
        let lines: Vec<Value> = records
            .iter()
            .map(|(slot, pid, token, seq, phase)| {
                json!({"slot": slot, "pid": pid, "token": token, "seq": seq, "phase": phase})
            })
            .collect();
        fenced_object(&lines)
    }

    fn begin(t: u64, slot: u64, pid: u64, token: u64) -> Value {
        json!({"ev": "begin", "t": t, "slot": slot, "pid": pid, "ppid": pid + 1000, "token": token, "seq": 0, "kind": "run"})
    }

    fn finishing(t: u64, slot: u64, pid: u64, token: u64) -> Value {
        json!({"ev": "finishing", "t": t, "slot": slot, "pid": pid, "token": token, "seq": 0})
    }

    fn facts(journals: Vec<Value>, object_bytes: Option<Vec<u8>>) -> Facts {
        Facts {
            ttl_ms: 3000,
            started_ms: 0,
            ended_ms: 100_000,
            phases: Vec::new(),
            journals,
            object: object_bytes,
            lease: None,
            log: Vec::new(),
            procs: Vec::new(),
            faults: Vec::new(),
            probe: true,
            traces: Vec::new(),
            fleet: FleetFacts::default(),
        }
    }

    #[test]
    fn a_trace_that_breaks_a_rule_is_a_violation_unless_its_process_was_frozen() {
        let late = json!({"ok": false, "broken": ["line 9: work ends by its deadline: it ended 900 ms after it"],
            "runs": [{"replayed": "identical"}]});
        let diverged = json!({"ok": false, "broken": [], "runs": [{"replayed": "diverged"}]});
        let proc_ = |pid, trace: &str| ProcRecord {
            slot: 0,
            pid,
            service: false,
            member: false,
            spawned_ms: 0,
            exited_ms: 10,
            code: Some(4),
            signal: None,
            clock_offset_ms: 0,
            trace: Some(trace.into()),
        };
        let mut f = facts(Vec::new(), None);
        f.traces = vec![
            ReplayedTrace {
                file: "a.jsonl".into(),
                report: late.clone(),
            },
            ReplayedTrace {
                file: "b.jsonl".into(),
                report: diverged,
            },
        ];
        f.procs = vec![proc_(10, "a.jsonl"), proc_(11, "b.jsonl")];
        let j = judge(&f);
        assert_eq!(j.violations.len(), 2, "{:?}", j.violations);
        // Frozen: the late work is excused; the divergence never is.
        for pid in [10, 11] {
            f.faults.push(ProcessFault {
                kind: "freeze".into(),
                slot: 0,
                pid,
                from_ms: 1,
                to_ms: 5,
            });
        }
        let j = judge(&f);
        assert_eq!(j.violations.len(), 1, "{:?}", j.violations);
        assert!(j.violations[0].contains("b.jsonl"));
        assert_eq!(j.traces, (2, 0, 1));
    }

    #[test]
    fn a_clean_history_passes() {
        let f = facts(
            vec![
                begin(1000, 0, 10, 1),
                finishing(2000, 0, 10, 1),
                begin(2500, 1, 20, 2),
                finishing(3000, 1, 20, 2),
            ],
            Some(object(&[
                (0, 10, 1, "start"),
                (0, 10, 1, "end"),
                (1, 20, 2, "start"),
                (1, 20, 2, "end"),
            ])),
        );
        let j = judge(&f);
        assert!(j.violations.is_empty(), "{:?}", j.violations);
        assert_eq!((j.jobs, j.tokens, j.handoffs), (2, 2, 1));
    }

    #[test]
    fn a_lowered_token_and_a_stale_end_are_caught() {
        let f = facts(
            Vec::new(),
            Some(object(&[
                (0, 10, 2, "start"),
                (1, 20, 3, "start"),
                (0, 10, 2, "end"),
            ])),
        );
        let v = judge(&f).violations;
        assert!(v.iter().any(|v| v.contains("token lowered")), "{v:?}");
        assert!(
            v.iter().any(|v| v.contains("accepted after a newer job")),
            "{v:?}"
        );
    }

    #[test]
    fn a_job_stopped_at_its_deadline_may_be_followed_by_its_process_alone() {
        // A service's job 1 stopped at the deadline (no end record); the
        // renewal landed and the same process runs job 2 under the same
        // token: fine. Another process starting under that token is not,
        // nor is the stopped job's end accepted afterwards.
        let ok = object_seq(&[
            (3, 30, 1, 1, "start"),
            (3, 30, 1, 2, "start"),
            (3, 30, 1, 2, "end"),
        ]);
        let j = judge(&facts(Vec::new(), Some(ok)));
        assert!(j.violations.is_empty(), "{:?}", j.violations);
        let other = object_seq(&[(3, 30, 1, 1, "start"), (4, 40, 1, 1, "start")]);
        let v = judge(&facts(Vec::new(), Some(other))).violations;
        assert!(v.iter().any(|v| v.contains("was open")), "{v:?}");
        let late_end = object_seq(&[
            (3, 30, 1, 1, "start"),
            (3, 30, 1, 2, "start"),
            (3, 30, 1, 1, "end"),
        ]);
        let v = judge(&facts(Vec::new(), Some(late_end))).violations;
        assert!(
            v.iter().any(|v| v.contains("accepted after a newer job")),
            "{v:?}"
        );
    }

    #[test]
    fn a_process_the_job_left_running_extends_its_belief() {
        // Job 1 finished at 2000, but a daemon it started beat until 2700,
        // after job 2 began at 2500.
        let journals = vec![
            begin(1000, 0, 10, 1),
            finishing(2000, 0, 10, 1),
            json!({"ev": "alive", "t": 2700, "slot": 0, "pid": 11, "job_pid": 10, "token": 1, "seq": 0}),
            begin(2500, 1, 20, 2),
            finishing(3000, 1, 20, 2),
        ];
        let j = judge(&facts(journals, None));
        assert!(
            j.violations
                .iter()
                .any(|v| v.contains("overlapped for 200 ms")),
            "{:?}",
            j.violations
        );
    }

    #[test]
    fn an_overlap_is_caught_unless_frozen_and_fenced() {
        let journals = vec![
            begin(1000, 0, 10, 1),
            begin(1500, 1, 20, 2),
            finishing(2000, 0, 10, 1),
            finishing(2500, 1, 20, 2),
        ];
        let o = object(&[(0, 10, 1, "start"), (1, 20, 2, "start"), (1, 20, 2, "end")]);
        let mut f = facts(journals, Some(o));
        let v = judge(&f).violations;
        assert!(
            v.iter().any(|v| v.contains("overlapped for 500 ms")),
            "{v:?}"
        );
        // The older job's process (its parent, `lease run`) was frozen
        // during it, and the fence kept its end out: excused.
        f.faults.push(ProcessFault {
            kind: "freeze".into(),
            slot: 0,
            pid: 1010,
            from_ms: 1200,
            to_ms: 1900,
        });
        let j = judge(&f);
        assert!(j.violations.is_empty(), "{:?}", j.violations);
        assert_eq!(j.excused_overlaps, 1);
    }

    #[test]
    fn a_write_accepted_for_a_token_not_held_is_caught() {
        let lease = |seq, token: u64| Exchange {
            client: 0,
            arrived_ms: seq * 10,
            applied_ms: Some(seq * 10 + 1),
            applied_seq: Some(seq),
            method: "PUT".into(),
            path: "/lab/fleet/leader".into(),
            kind: Kind::LeaseWrite,
            fault: Fault::None,
            store_status: Some(200),
            body: json!({"token": token}).to_string().into_bytes(),
        };
        let mut fence = lease(2, 0);
        fence.kind = Kind::FenceWrite;
        fence.body = object(&[(0, 10, 1, "start")]);
        let mut f = facts(Vec::new(), None);
        f.log = vec![lease(0, 1), lease(1, 2), fence];
        let v = judge(&f).violations;
        assert!(
            v.iter()
                .any(|v| v.contains("accepted while the lease record had token 2")),
            "{v:?}"
        );
    }

    #[test]
    fn a_calm_without_a_holder_is_caught() {
        let mut f = facts(vec![begin(1000, 0, 10, 1), finishing(2000, 0, 10, 1)], None);
        f.phases = vec![(true, 0, 1000), (false, 1000, 21_000)];
        let j = judge(&f);
        assert_eq!(j.calms_checked, 1);
        assert!(
            j.violations
                .iter()
                .any(|v| v.contains("at the end of a calm")),
            "{:?}",
            j.violations
        );
    }

    /// The functions' tally counts what the Runtime API received, not the
    /// errors jobs and services note in their own journals (the chaos run
    /// once reported 11 function errors "of no type" that were job errors).
    #[test]
    fn the_summary_tells_function_errors_from_job_errors() {
        let cfg = LabConfig::short(
            "t",
            crate::lab::StoreKind::Moto,
            std::time::Duration::from_secs(60),
            1,
        );
        let f = facts(
            vec![
                json!({"ev": "invoke", "id": "a", "t": 1, "slot": 4}),
                json!({"ev": "function_error", "id": "a", "t": 2, "slot": 4,
                       "body": {"errorType": "LeaseError", "errorMessage": "busy"}}),
                json!({"ev": "error", "error": "start record: timed out", "t": 3, "slot": 0}),
            ],
            None,
        );
        let text = summary(&cfg, &f, &judge(&f), |_| {});
        assert!(
            text.contains(r#"1 invocations: {"error LeaseError": 1}"#),
            "{text}"
        );
        assert!(
            text.contains("errors noted by jobs and services in their journals: 1"),
            "{text}"
        );
    }

    /// Rule 5 judges an invocation by its start and its end: one that
    /// started in a storm (its process frozen) and failed just after the
    /// calm's last fault is no error in a calm; one that starts and fails
    /// in the calm is.
    #[test]
    fn an_invocation_is_in_a_calm_only_if_it_started_in_it() {
        let mut f = facts(
            vec![
                json!({"ev": "invoke", "id": "storm", "t": 500, "slot": 4}),
                json!({"ev": "function_error", "id": "storm", "t": 1500, "slot": 4,
                       "body": {"errorType": "LeaseError", "errorMessage": "gave up"}}),
            ],
            None,
        );
        f.phases = vec![(true, 0, 1000), (false, 1000, 21_000)];
        let calm_errors = |f: &Facts| {
            judge(f)
                .violations
                .iter()
                .filter(|v| v.contains("failed in a calm"))
                .count()
        };
        assert_eq!(calm_errors(&f), 0);
        f.journals.extend([
            json!({"ev": "invoke", "id": "calm", "t": 2000, "slot": 4}),
            json!({"ev": "function_error", "id": "calm", "t": 2500, "slot": 4,
                   "body": {"errorType": "LeaseError", "errorMessage": "gave up"}}),
        ]);
        assert_eq!(calm_errors(&f), 1);
    }
}
