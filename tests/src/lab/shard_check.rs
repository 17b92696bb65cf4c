//! The checker's rules for the lab's shard fleet: `lab-shard` members of
//! one fleet (`Leases::shards`) that work on the shards they own, each
//! work a record appended now and then to the shard's own protected
//! object with the fenced append and the shard's token. Judged from the
//! shards' protected objects, the members' journals, the store's shard
//! records, sessions and assignment read at the end of every calm, and
//! the lab's record of processes, faults and phases:
//!
//! 1. **Each shard's protected object is consistent.** Its records'
//!    tokens never go down (a stale member's write was refused, not
//!    applied); no record appears twice; a token is written by one
//!    process only; and every record was made inside its process's work
//!    on that shard with that token (`shard_begin` to `shard_end` in its
//!    journal, or to its death).
//! 2. **No two members work on a shard at once.** The spans of work on a
//!    shard of different processes never overlap, nor two of one
//!    process. An overlap is excused only when the older holder's
//!    process was frozen during it (a pause past the session's deadline
//!    is outside the safety assumptions) *and* it left no record made
//!    after the newer work began.
//! 3. **A calm settles the fleet.** At the end of every calm whose last
//!    disruption (a fault, a held request, a member starting or ending)
//!    came at least the fleet's bound before it, every shard is owned on
//!    the store (its record at `<prefix>/shards/<i>` not released and
//!    owned under the session of a member with a live process, that
//!    session's record live at the term the shard names), the members'
//!    process works on it under the record's token, the assignment gives
//!    it to that member, and the live members' numbers of shards differ
//!    by one at most; and from the bound on to the end of the calm no
//!    work on a shard began or ended (a settled fleet stays put: a move
//!    then is a session lapsing in a calm, or a needless move). The
//!    bound is `docs/protocols.md`'s ("Shards", the
//!    simulation's `shard_bound`): four ttls, the retries of two requests
//!    (`2 · (request_timeout + backoff_max)`) and 3 s, 20 s at the lab's
//!    3 s ttl; late deliveries are in the calm's faults already.
//! 4. **No member fails in a calm.** A member process that exits in a
//!    calm after its faults ended exits 0 (it left the fleet); errors a
//!    member notes in its journal in a calm are rule 5 of
//!    [`check`](super::check), as every process's.

use super::check::{faults_end, frozen_during, Facts};
use super::fleet::{FleetFacts, FleetJudgement, Snapshot};
use super::LabConfig;
use lease_core::{Fenced, LeaseRecord};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// A member process's work on a shard under one token.
#[derive(Clone, Debug)]
pub struct Span {
    /// The shard.
    pub shard: u64,
    /// The process (slot, pid).
    pub owner: (u64, u64),
    /// The shard's token.
    pub token: u64,
    /// `shard_begin` (Unix ms).
    pub begin: u64,
    /// `shard_end`, or the process's end.
    pub end: u64,
}

/// A record of a shard's protected object: (writer, token, made at).
type Made = ((u64, u64), u64, u64);

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(u64::MAX)
}

/// The spans of work, from the journals and the process records.
pub fn spans(facts: &Facts, bad: &mut Vec<String>) -> Vec<Span> {
    let mut open: BTreeMap<(u64, u64, u64, u64), u64> = BTreeMap::new();
    let mut done = Vec::new();
    let span = |(slot, pid, shard, token), begin, end| Span {
        shard,
        owner: (slot, pid),
        token,
        begin,
        end,
    };
    for v in &facts.journals {
        let id = (n(v, "slot"), n(v, "pid"), n(v, "shard"), n(v, "token"));
        let t = v["t"].as_u64().unwrap_or(0);
        match v["ev"].as_str().unwrap_or_default() {
            "shard_begin" => {
                if let Some(begin) = open.insert(id, t) {
                    bad.push(format!(
                        "shard {}: process {:?} began its work with token {} again ({begin}, {t})",
                        id.2,
                        (id.0, id.1),
                        id.3
                    ));
                }
            }
            "shard_end" => {
                if let Some(begin) = open.remove(&id) {
                    done.push(span(id, begin, t));
                }
            }
            _ => {}
        }
    }
    // Work that never said it ended ended with its process.
    for (id, begin) in open {
        let end = facts
            .procs
            .iter()
            .find(|p| p.slot as u64 == id.0 && p.pid as u64 == id.1)
            .map_or(facts.ended_ms, |p| p.exited_ms);
        done.push(span(id, begin, end));
    }
    done.sort_by_key(|s| (s.shard, s.begin));
    done
}

/// Rule 1 over shard `shard`'s object: the records it holds, as made.
fn object(shard: u64, body: &[u8], spans: &[Span], bad: &mut Vec<String>) -> Vec<Made> {
    let Some(fenced) = Fenced::decode(body) else {
        bad.push(format!(
            "shard {shard}: its protected object is not a fenced object"
        ));
        return Vec::new();
    };
    let mut made = Vec::new();
    let mut last = 0;
    let mut seen = BTreeSet::new();
    let mut writers: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (_, line) in fenced.entries() {
        let Ok(r) = serde_json::from_slice::<Value>(line) else {
            bad.push(format!(
                "shard {shard}: unreadable record {:?}",
                String::from_utf8_lossy(line)
            ));
            continue;
        };
        let (owner, token, seq, t) = (
            (n(&r, "slot"), n(&r, "pid")),
            n(&r, "token"),
            n(&r, "seq"),
            n(&r, "t"),
        );
        if n(&r, "shard") != shard {
            bad.push(format!(
                "shard {shard}: a record of another shard in its object: {r}"
            ));
        }
        if token < last {
            bad.push(format!(
                "shard {shard}: token lowered: {r} after token {last}"
            ));
        }
        last = last.max(token);
        if !seen.insert((owner, token, seq)) {
            bad.push(format!("shard {shard}: record written twice: {r}"));
        }
        let writer = *writers.entry(token).or_insert(owner);
        if writer != owner {
            bad.push(format!(
                "shard {shard}: token {token} written by two processes, {writer:?} and {owner:?}"
            ));
        }
        let inside = spans.iter().any(|s| {
            s.shard == shard && s.owner == owner && s.token == token && s.begin <= t && t <= s.end
        });
        if !inside {
            bad.push(format!("shard {shard}: record {r} was made outside its process's work on the shard with that token"));
        }
        made.push((owner, token, t));
    }
    if fenced.token < last {
        bad.push(format!(
            "shard {shard}: the object's fence token {} is below its last record's {last}",
            fenced.token
        ));
    }
    made
}

/// Rule 2: the overlaps of work on each shard.
fn overlaps(
    facts: &Facts,
    spans: &[Span],
    made: &BTreeMap<u64, Vec<Made>>,
    j: &mut FleetJudgement,
) {
    let mut by_shard: BTreeMap<u64, Vec<&Span>> = BTreeMap::new();
    for s in spans {
        by_shard.entry(s.shard).or_default().push(s);
    }
    for (shard, list) in by_shard {
        j.moves += list.len() - 1;
        let windows: Vec<(u64, u64)> = list.iter().map(|s| (s.begin, s.end)).collect();
        for (a, b, from) in lease_core::verify::overlaps(&windows) {
            let (a, b) = (list[a], list[b]);
            let overlap = a.end.min(b.end) - from;
            if a.owner == b.owner {
                j.violations.push(format!(
                    "shard {shard}: process {:?} worked on it twice at once, with tokens {} and {}",
                    a.owner, a.token, b.token
                ));
                continue;
            }
            if a.token == b.token {
                j.violations.push(format!("shard {shard}: processes {:?} and {:?} worked on it at once with one token {} for {overlap} ms", a.owner, b.owner, a.token));
                continue;
            }
            let (old, new) = if a.token < b.token { (a, b) } else { (b, a) };
            let recorded_after = made.get(&shard).is_some_and(|m| {
                m.iter().any(|&(owner, token, t)| {
                    owner == old.owner && token == old.token && t >= new.begin
                })
            });
            if frozen_during(facts, old.owner, from, from + overlap) && !recorded_after {
                j.excused_overlaps += 1;
            } else {
                j.violations.push(format!(
                    "shard {shard}: processes {:?} (token {}, {}..{}) and {:?} (token {}, {}..{}) worked on it at once for {overlap} ms{}",
                    old.owner, old.token, old.begin, old.end, new.owner, new.token, new.begin, new.end,
                    if recorded_after { ", and the older recorded after the newer began" } else { "" }
                ));
            }
        }
    }
}

/// The member slot and token that own `shard` on the store in `snap`, or
/// why none does.
fn owner(fleet: &FleetFacts, snap: &Snapshot, shard: usize) -> Result<(usize, u64), String> {
    let body = snap
        .shards
        .get(shard)
        .and_then(Option::as_ref)
        .ok_or("it has no record")?;
    let record = LeaseRecord::decode(body).map_err(|e| format!("its record is unreadable: {e}"))?;
    if record.released {
        return Err(format!("its record (token {}) is released", record.token));
    }
    let by = record
        .owned_by
        .ok_or("its record is not owned under a session")?;
    let slot = *fleet
        .members
        .iter()
        .find(|&&slot| fleet.member_key(slot) == by.key)
        .ok_or_else(|| format!("it is owned under {}, no member's session", by.key))?;
    let session = snap
        .members
        .get(&slot)
        .and_then(Option::as_ref)
        .ok_or_else(|| format!("it is owned under {}, which has no record", by.key))?;
    let session =
        LeaseRecord::decode(session).map_err(|e| format!("{}: unreadable: {e}", by.key))?;
    if session.released || session.token != by.token {
        return Err(format!(
            "it is owned under {} at term {}, but that session's record is at token {}{}",
            by.key,
            by.token,
            session.token,
            if session.released { ", released" } else { "" }
        ));
    }
    if session.expires_at.0 < snap.at_ms {
        return Err(format!(
            "it is owned under {}, which expired at {}",
            by.key, session.expires_at.0
        ));
    }
    Ok((slot, record.token))
}

/// An assignment's shards (empty when it is not one).
fn assignment(body: Option<&[u8]>) -> Vec<Option<String>> {
    let v: Value = body
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or(Value::Null);
    v["shards"]
        .as_array()
        .map(|a| a.iter().map(|m| m.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Rule 3 at one snapshot, once the calm has settled at `settled`.
fn settled_calm(
    facts: &Facts,
    spans: &[Span],
    snap: &Snapshot,
    settled: u64,
    j: &mut FleetJudgement,
) {
    let (fleet, at) = (&facts.fleet, snap.at_ms);
    let place = format!(
        "at the end of a calm ({at}; settled at {settled}, bound {} ms)",
        fleet.bound_ms
    );
    let live: BTreeMap<usize, u64> = fleet
        .members
        .iter()
        .filter_map(|&slot| {
            let p = facts
                .procs
                .iter()
                .find(|p| p.member && p.slot == slot && p.spawned_ms <= at && at < p.exited_ms)?;
            Some((slot, p.pid as u64))
        })
        .collect();
    let assigned = assignment(snap.assignment.as_deref());
    let mut counts: BTreeMap<usize, usize> = live.keys().map(|&slot| (slot, 0)).collect();
    for shard in 0..fleet.shards as usize {
        let (slot, token) = match owner(fleet, snap, shard) {
            Ok(o) => o,
            Err(why) => {
                j.violations.push(format!(
                    "shard {shard} is not owned by a live member {place}: {why}"
                ));
                continue;
            }
        };
        let Some(&pid) = live.get(&slot) else {
            j.violations.push(format!(
                "shard {shard} is owned by m{slot}, which has no live process, {place}"
            ));
            continue;
        };
        *counts.entry(slot).or_default() += 1;
        let works = spans.iter().any(|s| {
            s.shard == shard as u64
                && s.owner == (slot as u64, pid)
                && s.token == token
                && s.begin <= at
                && at < s.end
        });
        if !works {
            j.violations.push(format!("shard {shard} is owned on the store by m{slot} (token {token}) but its process {pid} does not work on it {place}"));
        }
        let key = fleet.member_key(slot);
        if assigned.get(shard).and_then(Option::as_deref) != Some(key.as_str()) {
            j.violations.push(format!(
                "shard {shard}: the assignment gives it to {:?}, the store's owner is {key}, {place}",
                assigned.get(shard).cloned().flatten()
            ));
        }
    }
    let (lo, hi) = (
        counts.values().min().copied(),
        counts.values().max().copied(),
    );
    if let (Some(lo), Some(hi)) = (lo, hi) {
        if hi - lo > 1 {
            j.violations.push(format!(
                "the shares are not balanced within one {place}: {counts:?} (slot: shards)"
            ));
        }
    }
    // Settled, the fleet stays put: no work begins or ends once the
    // bound has passed (a session lapsing in a calm, a needless move).
    for s in spans {
        for (what, t) in [("began", s.begin), ("ended", s.end)] {
            if t > settled + fleet.bound_ms && t <= at {
                j.violations.push(format!(
                    "shard {}: the work of {:?} with token {} {what} at {t}, after the fleet's bound had passed in a calm (settled at {settled}, bound {} ms)",
                    s.shard, s.owner, s.token, fleet.bound_ms
                ));
            }
        }
    }
    let last = spans
        .iter()
        .flat_map(|s| [s.begin, s.end])
        .filter(|&t| t > settled && t <= at)
        .max();
    j.max_settle_ms = j.max_settle_ms.max(last.map_or(0, |t| t - settled));
}

/// Rules 3 and 4.
fn calms(facts: &Facts, spans: &[Span], j: &mut FleetJudgement) {
    let members: Vec<_> = facts.procs.iter().filter(|p| p.member).collect();
    for snap in &facts.fleet.snapshots {
        let at = snap.at_ms;
        let Some(&(_, from, to)) = facts.phases.iter().find(|p| !p.0 && p.1 <= at && at <= p.2)
        else {
            continue;
        };
        let mut settled = faults_end(facts, from, to);
        for p in &members {
            for t in [p.spawned_ms, p.exited_ms] {
                if t <= at {
                    settled = settled.max(t);
                }
            }
        }
        if settled + facts.fleet.bound_ms > at {
            j.calms.1 += 1;
            continue;
        }
        j.calms.0 += 1;
        settled_calm(facts, spans, snap, settled, j);
    }
    for &(storm, from, to) in &facts.phases {
        let quiet = faults_end(facts, from, to);
        for p in members
            .iter()
            .filter(|p| !storm && quiet < p.exited_ms && p.exited_ms <= to)
        {
            if p.code != Some(0) {
                j.violations.push(format!(
                    "shard member m{} (pid {}) exited in a calm with {} at {}",
                    p.slot,
                    p.pid,
                    p.code
                        .map_or_else(|| format!("signal {:?}", p.signal), |c| format!("exit {c}")),
                    p.exited_ms
                ));
            }
        }
    }
}

/// Judges the shard fleet (see the module docs).
pub fn judge(facts: &Facts) -> FleetJudgement {
    let mut j = FleetJudgement::default();
    if facts.fleet.members.is_empty() {
        return j;
    }
    let spans = spans(facts, &mut j.violations);
    j.holdings = spans.len();
    let mut made = BTreeMap::new();
    for (shard, body) in facts.fleet.objects.iter().enumerate() {
        if let Some(body) = body {
            let records = object(shard as u64, body, &spans, &mut j.violations);
            j.records += records.len();
            made.insert(shard as u64, records);
        }
    }
    overlaps(facts, &spans, &made, &mut j);
    calms(facts, &spans, &mut j);
    let count = |ev: &str| facts.journals.iter().filter(|v| v["ev"] == ev).count();
    j.fenced = count("shard_fenced");
    j.abandoned = count("shard_abandoned");
    j
}

/// The fleet's lines of the run's summary.
pub fn summary(s: &mut String, cfg: &LabConfig, facts: &Facts, j: &FleetJudgement) {
    if facts.fleet.members.is_empty() {
        return;
    }
    let procs: Vec<_> = facts.procs.iter().filter(|p| p.member).collect();
    let mut exits: BTreeMap<String, usize> = BTreeMap::new();
    for p in &procs {
        let k = match (p.code, p.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(9)) => "killed".into(),
            (None, Some(sig)) => format!("signal {sig}"),
            _ => "stopped".into(),
        };
        *exits.entry(k).or_default() += 1;
    }
    let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
    for f in facts
        .faults
        .iter()
        .filter(|f| facts.fleet.members.contains(&f.slot))
    {
        *faults.entry(f.kind.as_str()).or_default() += 1;
    }
    let _ = writeln!(
        s,
        "shard fleet: {} members splitting {} shards (drain {} ms); {} member processes, exits {exits:?}; faults on members {faults:?}",
        cfg.members,
        cfg.shards,
        cfg.shard_drain.as_millis(),
        procs.len()
    );
    let _ = writeln!(
        s,
        "shard work: {} holdings, {} moves; {} records in the shards' objects; {} refused by the fence, {} appends dropped at the drain's bound; overlaps excused (frozen, nothing recorded after): {}",
        j.holdings, j.moves, j.records, j.fenced, j.abandoned, j.excused_overlaps
    );
    let _ = writeln!(
        s,
        "shard calms: {} judged, {} too short for the bound of {} ms; the longest from a calm's last disruption to covered and balanced: {} ms",
        j.calms.0, j.calms.1, facts.fleet.bound_ms, j.max_settle_ms
    );
}

/// The fleet's rules, each broken on purpose: the checker must be able to
/// fail.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::check::{fenced_object, judge as judge_run, ProcRecord, ProcessFault};
    use serde_json::json;

    const PREFIX: &str = "shardfleet";

    fn proc_(slot: usize, pid: u32, exited_ms: u64, code: Option<i32>) -> ProcRecord {
        ProcRecord {
            slot,
            pid,
            service: true,
            member: true,
            spawned_ms: 0,
            exited_ms,
            code,
            signal: None,
            clock_offset_ms: 0,
            trace: None,
        }
    }

    fn ev(ev: &str, t: u64, slot: u64, pid: u64, shard: u64, token: u64) -> Value {
        json!({"ev": ev, "t": t, "slot": slot, "pid": pid, "shard": shard, "token": token})
    }

    /// A shard's protected object: (slot, pid, token, seq, t) records.
    fn object(shard: u64, records: &[(u64, u64, u64, u64, u64)]) -> Vec<u8> {
        let lines: Vec<Value> = records
            .iter()
            .map(|&(slot, pid, token, seq, t)| {
                json!({"slot": slot, "pid": pid, "shard": shard, "token": token, "seq": seq, "t": t})
            })
            .collect();
        fenced_object(&lines)
    }

    fn session(token: u64, expires_s: f64, released: bool) -> Vec<u8> {
        json!({"v": 1, "token": token, "expires_at": expires_s, "holder": "m", "session": "s",
            "nonce": "n", "protocol": "cas", "released": released})
        .to_string()
        .into_bytes()
    }

    fn owned(token: u64, slot: usize, term: u64, released: bool) -> Vec<u8> {
        json!({"v": 2, "token": token, "expires_at": 1.0, "holder": format!("m{slot}"),
            "session": "s", "nonce": "n", "protocol": "cas", "released": released,
            "owned_by": {"key": format!("{PREFIX}/members/m{slot}"), "token": term}})
        .to_string()
        .into_bytes()
    }

    /// Members m3 (pid 30) and m4 (pid 40), two shards. Shard 0: m3 with
    /// token 1 from 1000 to 5000 (revoked), then m4 with token 2 from
    /// 5500; shard 1: m3 with token 1 from 1000. A storm to 1000, a calm
    /// to 40 000, the store read at 39 000: m4 owns shard 0, m3 shard 1.
    fn clean() -> Facts {
        let journals = vec![
            ev("shard_begin", 1000, 3, 30, 0, 1),
            ev("shard_begin", 1000, 3, 30, 1, 1),
            ev("shard_end", 5000, 3, 30, 0, 1),
            ev("shard_begin", 5500, 4, 40, 0, 2),
        ];
        let snapshot = Snapshot {
            at_ms: 39_000,
            assignment: Some(
                json!({"v": 1, "shards": [format!("{PREFIX}/members/m4"), format!("{PREFIX}/members/m3")]})
                    .to_string()
                    .into_bytes(),
            ),
            shards: vec![Some(owned(2, 4, 8, false)), Some(owned(1, 3, 7, false))],
            members: BTreeMap::from([(3, Some(session(7, 41.0, false))), (4, Some(session(8, 41.0, false)))]),
        };
        Facts {
            ttl_ms: 3000,
            started_ms: 0,
            ended_ms: 50_000,
            phases: vec![(true, 0, 1000), (false, 1000, 40_000)],
            journals,
            object: None,
            lease: None,
            log: Vec::new(),
            procs: vec![proc_(3, 30, 50_000, None), proc_(4, 40, 50_000, None)],
            faults: Vec::new(),
            probe: true,
            traces: Vec::new(),
            fleet: FleetFacts {
                prefix: PREFIX.into(),
                shards: 2,
                members: vec![3, 4],
                bound_ms: 20_000,
                objects: vec![
                    Some(object(
                        0,
                        &[
                            (3, 30, 1, 1, 1200),
                            (3, 30, 1, 2, 4000),
                            (4, 40, 2, 1, 5600),
                        ],
                    )),
                    Some(object(1, &[(3, 30, 1, 1, 1300)])),
                ],
                snapshots: vec![snapshot],
            },
        }
    }

    fn violations(f: &Facts) -> Vec<String> {
        judge(f).violations
    }

    fn caught(f: &Facts, what: &str) {
        let v = violations(f);
        assert!(v.iter().any(|v| v.contains(what)), "{what:?} not in {v:#?}");
    }

    #[test]
    fn a_clean_fleet_passes() {
        let f = clean();
        let j = judge(&f);
        assert!(j.violations.is_empty(), "{:#?}", j.violations);
        assert_eq!((j.holdings, j.moves, j.records, j.calms), (3, 1, 4, (1, 0)));
        assert_eq!(
            j.max_settle_ms, 4500,
            "the last change, at 5500, after the calm settled at 1000"
        );
        // And as part of the run's judgement, whose rule 4 has no lease
        // fleet to judge here.
        assert!(judge_run(&f).violations.is_empty());
    }

    #[test]
    fn two_members_working_on_one_shard_at_once_are_caught_unless_the_older_was_frozen() {
        let mut f = clean();
        // m4 begins shard 0 at 4000, while m3 works on it until 5000.
        f.journals[3]["t"] = json!(4000);
        f.journals.sort_by_key(|v| v["t"].as_u64());
        f.fleet.objects[0] = Some(object(0, &[(3, 30, 1, 1, 1200), (4, 40, 2, 1, 4100)]));
        caught(
            &f,
            "shard 0: processes (3, 30) (token 1, 1000..5000) and (4, 40) (token 2, 4000..",
        );
        caught(&f, "worked on it at once for 1000 ms");
        // m3 was frozen past its deadline then, and recorded nothing
        // after m4 began: excused.
        f.faults.push(ProcessFault {
            kind: "freeze".into(),
            slot: 3,
            pid: 30,
            from_ms: 3000,
            to_ms: 4900,
        });
        let j = judge(&f);
        assert!(j.violations.is_empty(), "{:#?}", j.violations);
        assert_eq!(j.excused_overlaps, 1);
        // Frozen, but a record of it made after m4 began is no excuse.
        f.fleet.objects[0] = Some(object(
            0,
            &[
                (3, 30, 1, 1, 1200),
                (3, 30, 1, 2, 4050),
                (4, 40, 2, 1, 4100),
            ],
        ));
        caught(&f, "and the older recorded after the newer began");
        // Nor is one token in two processes' hands.
        let mut f = clean();
        f.journals[3]["t"] = json!(4000);
        f.journals[3]["token"] = json!(1);
        f.journals.sort_by_key(|v| v["t"].as_u64());
        caught(&f, "worked on it at once with one token 1");
    }

    #[test]
    fn a_shard_unowned_after_a_calm_is_caught() {
        // Shard 1's record was given back and nobody took it again.
        let mut f = clean();
        f.fleet.snapshots[0].shards[1] = Some(owned(1, 3, 7, true));
        caught(&f, "shard 1 is not owned by a live member at the end of a calm (39000; settled at 1000, bound 20000 ms): its record (token 1) is released");
        // Owned under a term of m3's session that is over.
        let mut f = clean();
        f.fleet.snapshots[0]
            .members
            .insert(3, Some(session(9, 41.0, false)));
        caught(&f, "shard 1 is not owned by a live member");
        caught(&f, "but that session's record is at token 9");
        // Owned under a session that expired.
        let mut f = clean();
        f.fleet.snapshots[0]
            .members
            .insert(3, Some(session(7, 30.0, false)));
        caught(&f, "which expired at 30000");
        // Owned by a member whose process is gone.
        let mut f = clean();
        f.procs[0].exited_ms = 10_000;
        f.procs[0].signal = Some(9);
        caught(&f, "shard 1 is owned by m3, which has no live process");
        // Owned on the store, but its member's process does not work on it.
        let mut f = clean();
        f.journals.push(ev("shard_end", 30_000, 3, 30, 1, 1));
        caught(
            &f,
            "shard 1 is owned on the store by m3 (token 1) but its process 30 does not work on it",
        );
        // No record at all.
        let mut f = clean();
        f.fleet.snapshots[0].shards[0] = None;
        caught(&f, "shard 0 is not owned by a live member");
    }

    #[test]
    fn a_move_after_the_bound_in_a_calm_is_caught() {
        // m3's session lapsed at 30 000, settled plus the bound being
        // 21 000, and it took shard 1 again with a new token.
        let mut f = clean();
        f.journals.push(ev("shard_end", 30_000, 3, 30, 1, 1));
        f.journals.push(ev("shard_begin", 31_000, 3, 30, 1, 3));
        f.fleet.snapshots[0].shards[1] = Some(owned(3, 3, 7, false));
        caught(&f, "shard 1: the work of (3, 30) with token 1 ended at 30000, after the fleet's bound had passed in a calm");
        caught(
            &f,
            "shard 1: the work of (3, 30) with token 3 began at 31000",
        );
        // Before the bound, moves are the fleet settling.
        let mut f = clean();
        f.journals.push(ev("shard_end", 20_000, 3, 30, 1, 1));
        f.journals.push(ev("shard_begin", 20_500, 3, 30, 1, 3));
        f.fleet.snapshots[0].shards[1] = Some(owned(3, 3, 7, false));
        assert!(violations(&f).is_empty(), "{:#?}", violations(&f));
    }

    #[test]
    fn unbalanced_shares_and_a_stale_assignment_are_caught() {
        let mut f = clean();
        f.fleet.shards = 3;
        f.fleet.objects.push(None);
        f.fleet.snapshots[0]
            .shards
            .push(Some(owned(1, 3, 7, false)));
        f.journals.push(ev("shard_begin", 1000, 3, 30, 2, 1));
        f.journals.sort_by_key(|v| v["t"].as_u64());
        // m3 owns shards 1 and 2, m4 shard 0: within one; but the
        // assignment names nobody for shard 2.
        caught(
            &f,
            "shard 2: the assignment gives it to None, the store's owner is shardfleet/members/m3",
        );
        assert!(!violations(&f).iter().any(|v| v.contains("balanced")));
        // m3 owns all three, m4 none.
        f.fleet.snapshots[0].shards[0] = Some(owned(3, 3, 7, false));
        f.journals.push(ev("shard_begin", 6000, 3, 30, 0, 3));
        f.journals.sort_by_key(|v| v["t"].as_u64());
        caught(
            &f,
            "the shares are not balanced within one at the end of a calm",
        );
        caught(&f, "{3: 3, 4: 0}");
    }

    #[test]
    fn a_lowered_token_and_work_outside_a_holding_are_caught() {
        let mut f = clean();
        f.fleet.objects[0] = Some(object(0, &[(4, 40, 2, 1, 5600), (3, 30, 1, 3, 4500)]));
        caught(&f, "shard 0: token lowered");
        let mut f = clean();
        // A record of m3's token 1 made after its work on shard 0 ended.
        f.fleet.objects[0] = Some(object(0, &[(3, 30, 1, 1, 1200), (3, 30, 1, 2, 5200)]));
        caught(
            &f,
            "was made outside its process's work on the shard with that token",
        );
        let mut f = clean();
        f.fleet.objects[1] = Some(object(1, &[(3, 30, 1, 1, 1300), (3, 30, 1, 1, 1300)]));
        caught(&f, "shard 1: record written twice");
        let mut f = clean();
        f.fleet.objects[1] = Some(object(1, &[(3, 30, 1, 1, 1300), (4, 40, 1, 1, 1400)]));
        caught(&f, "shard 1: token 1 written by two processes");
    }

    #[test]
    fn a_calm_too_short_for_the_bound_is_not_judged_and_a_member_failing_in_a_calm_is() {
        let mut f = clean();
        f.fleet.snapshots[0].shards[1] = None;
        // A freeze that ended at 25 000: settled then, 14 000 ms before
        // the store was read, less than the bound.
        f.faults.push(ProcessFault {
            kind: "freeze".into(),
            slot: 4,
            pid: 40,
            from_ms: 500,
            to_ms: 25_000,
        });
        let j = judge(&f);
        assert_eq!(j.calms, (0, 1));
        assert!(j.violations.is_empty(), "{:#?}", j.violations);
        // A member that exits 1 in a calm after its faults.
        let mut f = clean();
        f.procs.push(ProcRecord {
            pid: 31,
            spawned_ms: 2000,
            exited_ms: 3000,
            code: Some(1),
            ..proc_(3, 31, 0, None)
        });
        caught(
            &f,
            "shard member m3 (pid 31) exited in a calm with exit 1 at 3000",
        );
        // One that left the fleet (exit 0) did not fail.
        f.procs[2].code = Some(0);
        assert!(!violations(&f)
            .iter()
            .any(|v| v.contains("exited in a calm")));
    }
}
