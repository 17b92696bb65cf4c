//! What the rules read from the world: half-open intervals of real time,
//! when a session was valid, when a job acted, and a record described for
//! a violation's text.

use crate::clients::state::{short, Inner, JobRec, Lane, Rec};

/// Whether `node`'s monotonic clock had lost time by `at` (a stall that
/// stayed behind: outside the documented assumptions).
pub(super) fn lagged(w: &Inner, node: usize, at: u64) -> bool {
    w.nodes[node].lagged_since.is_some_and(|t| t <= at)
}

/// Half-open real-ms intervals, sorted and merged.
pub(super) fn merge(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.retain(|(a, b)| b > a);
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// `a` minus `b` (both merged).
pub(super) fn subtract(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(mut s, e) in a {
        for &(bs, be) in b {
            if be <= s || bs >= e {
                continue;
            }
            if bs > s {
                out.push((s, bs));
            }
            s = s.max(be);
            if s >= e {
                break;
            }
        }
        if s < e {
            out.push((s, e));
        }
    }
    out
}

pub(super) fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(s, e) in a {
        for &(bs, be) in b {
            let (x, y) = (s.max(bs), e.min(be));
            if x < y {
                out.push((x, y));
            }
        }
    }
    merge(out)
}

pub(super) fn describe(rec: Option<&Rec>, w: &Inner, at: u64) -> String {
    match rec {
        None => "no record".into(),
        Some(r) => format!(
            "{} token {} session {}… of owner {:?}{}{}",
            r.holder,
            r.token,
            short(&r.session),
            w.owner_of(&r.session),
            if r.released { ", released" } else { "" },
            if r.expires <= at {
                format!(", expired {}ms before", at - r.expires)
            } else {
                String::new()
            }
        ),
    }
}

/// When session `session` was valid in `lane`; `lenient` ignores
/// operator breaks (whose effect on a running holder is excused): a
/// record an operator's write replaced stays valid until its expiry,
/// whoever took the lease after the break (the holder is not told; the
/// fence refuses its writes).
pub(super) fn validity(w: &Inner, lane: Lane, session: &str, lenient: bool) -> Vec<(u64, u64)> {
    let hist = w.hist(lane);
    let mut out = Vec::new();
    for (i, s) in hist.iter().enumerate() {
        let Some(r) = &s.rec else { continue };
        if r.session != session || r.released {
            continue;
        }
        // An operator's write that changed the record (a write of theirs
        // below the live epoch leaves the newest as it was: no break).
        let broken = lenient
            && hist
                .get(i + 1)
                .is_some_and(|n| n.by_operator && n.rec.as_ref() != Some(r));
        let next = match hist.get(i + 1) {
            Some(n) if !broken => n.at.0,
            _ => u64::MAX,
        };
        out.push((s.at.0, next.min(r.expires)));
    }
    merge(out)
}

/// Whether `at` lies in `spans`.
pub(super) fn within(spans: &[(u64, u64)], at: u64) -> bool {
    spans.iter().any(|&(a, b)| a <= at && at < b)
}

pub(super) fn job_active(w: &Inner, job: &JobRec, end: u64) -> Vec<(u64, u64)> {
    let stop = job.end.map_or(end, |e| e.0);
    let pauses = merge(w.procs[job.pid].pauses.clone());
    let mut active = subtract(&[(job.start.0, stop)], &pauses);
    // The first poll acts, however short the job.
    active.push((job.start.0, job.start.0 + 1));
    merge(active)
}
