//! Reading a trace back, running it again, and judging it.
//!
//! [`Trace::parse`] reads the JSON lines a [`Recorder`](super::Recorder)
//! wrote; [`replay`] builds each run's machine again from its `start`,
//! feeds it the recorded inputs in order and compares every output with
//! the recorded one, then applies the rules below to the recorded lines
//! (what the process did, whichever build replays it):
//!
//! 1. **tokens increase** ([`crate::verify::tokens_not_increasing`]): each
//!    acquisition's fencing token exceeds every earlier one in the trace
//!    (cas and epochs; a mutex's token is no fencing token);
//! 2. **a deadline lies within the store's expiry**: a local deadline
//!    (an acquisition's or a renewal's) never passes the time the store
//!    may drop the record it rests on, judged from the trace alone: the
//!    record's `expires_at` as written, the write's local send time, and
//!    every store date it holds (each reply's, with its resolution, or the
//!    wall clock and `max_skew` when a reply had none; and the one a lease
//!    handed to a run was anchored on), allowing the configured drift
//!    between the local clock and the store's;
//! 3. **work ends by its deadline**: work noted as ended
//!    ([`Recorder::note`](super::Recorder::note) `work-end`, or the
//!    `work-killed` before it, which the end cannot come after) ended
//!    before the latest deadline confirmed for it, and work noted as
//!    started started while a lease was held.
//!
//! A run whose first lines the bounded buffer dropped (cut) cannot be
//! built again, and its deadlines are counted unjudged: the store date a
//! deadline was stamped from may be among the dropped lines, and judging
//! without it would find a break that did not happen.

use super::json::{self, Bad};
use super::{Start, Traced};
use crate::config::{LeaseConfig, Protocol};
use crate::protocol::elector::{Elector, Holder};
use crate::protocol::lease::LeaseOp;
use crate::protocol::machine::{CallId, Machine};
use crate::record::LeaseRecord;
use crate::store::{ReplyKind, StoreReply};
use crate::time::{Mono, Now, UnixMillis};
use core::fmt;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One line of a trace, as read.
#[derive(Clone, Debug)]
pub enum Line {
    /// A run begins: what its machine was built from.
    Start {
        /// The run.
        run: u64,
        /// What it was asked to do.
        start: Box<Start>,
    },
    /// The machine was polled at `now` and answered `out`.
    Poll {
        /// The run.
        run: u64,
        /// Local times of the poll.
        now: Now,
        /// The output, as recorded.
        out: Value,
    },
    /// The reply to call `call` was handed over at `now`.
    Reply {
        /// The run.
        run: u64,
        /// Local times.
        now: Now,
        /// The call it answers.
        call: u64,
        /// The reply.
        reply: StoreReply,
    },
    /// The machine was asked to stop at `now` (handing over to `to`, if
    /// named: [`Machine::hand_over`]).
    Stop {
        /// The run.
        run: u64,
        /// Local times.
        now: Now,
        /// The successor named, if any.
        to: Option<String>,
    },
    /// The caller noted something at local time `at` (`work-start`,
    /// `work-killed`, `work-end`).
    Note {
        /// What.
        what: String,
        /// When (local monotonic ms).
        at: Mono,
    },
}

/// A trace read back.
#[derive(Clone, Debug)]
pub struct Trace {
    /// The lines after the header, each with its line number (1-based,
    /// the header is line 1).
    pub lines: Vec<(usize, Line)>,
    /// Runs whose first lines the bounded buffer dropped.
    pub cut_runs: BTreeSet<u64>,
    /// Lines the buffer dropped.
    pub dropped_lines: u64,
}

/// A trace that cannot be read: the line, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trace line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for TraceError {}

fn times(v: &Value) -> Result<Now, Bad> {
    let bad = || "times are [mono_ms, wall_ms]".to_string();
    let a = v.as_array().filter(|a| a.len() == 2).ok_or_else(bad)?;
    Ok(Now::new(
        Mono(a[0].as_u64().ok_or_else(bad)?),
        UnixMillis(a[1].as_u64().ok_or_else(bad)?),
    ))
}

fn run_of(o: &serde_json::Map<String, Value>) -> Result<u64, Bad> {
    o.get("run")
        .and_then(Value::as_u64)
        .filter(|r| *r > 0)
        .ok_or_else(|| "`run` is missing".to_string())
}

fn parse_line(v: &Value) -> Result<Line, Bad> {
    let o = json::object(v, "the line")?;
    if let Some(what) = o.get("note") {
        return Ok(Line::Note {
            what: what.as_str().ok_or("`note` is not a string")?.to_string(),
            at: Mono(
                o.get("at")
                    .and_then(Value::as_u64)
                    .ok_or("`at` is missing")?,
            ),
        });
    }
    let run = run_of(o)?;
    if let Some(start) = o.get("start") {
        return Ok(Line::Start {
            run,
            start: Box::new(json::parse_start(start)?),
        });
    }
    if let Some(now) = o.get("poll") {
        return Ok(Line::Poll {
            run,
            now: times(now)?,
            out: o.get("out").cloned().ok_or("`out` is missing")?,
        });
    }
    if let Some(now) = o.get("reply") {
        return Ok(Line::Reply {
            run,
            now: times(now)?,
            call: o
                .get("call")
                .and_then(Value::as_u64)
                .ok_or("`call` is missing")?,
            reply: json::parse_reply(o.get("is").ok_or("`is` is missing")?)?,
        });
    }
    if let Some(now) = o.get("stop") {
        return Ok(Line::Stop {
            run,
            now: times(now)?,
            to: o.get("to").and_then(Value::as_str).map(str::to_string),
        });
    }
    Err("not a start, poll, reply, stop or note".into())
}

impl Trace {
    /// Reads a trace (the JSON lines [`Recorder::to_jsonl`](super::Recorder::to_jsonl)
    /// wrote). Blank lines are skipped.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let err = |line: usize, message: String| TraceError { line, message };
        let (n, header) = lines
            .next()
            .ok_or_else(|| err(1, "the trace is empty".into()))?;
        let header: Value =
            serde_json::from_str(header).map_err(|e| err(n + 1, format!("not JSON: {e}")))?;
        match header.get("lease_trace").and_then(Value::as_u64) {
            Some(super::recorder::FORMAT) => {}
            Some(v) => {
                return Err(err(
                    n + 1,
                    format!("format version {v}, this build reads 1"),
                ))
            }
            None => {
                return Err(err(
                    n + 1,
                    "not a lease trace (no `lease_trace` header)".into(),
                ))
            }
        }
        let cut_runs = header
            .get("cut_runs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let dropped_lines = header
            .get("dropped_lines")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let mut parsed = Vec::new();
        for (i, text) in lines {
            let v: Value =
                serde_json::from_str(text).map_err(|e| err(i + 1, format!("not JSON: {e}")))?;
            parsed.push((i + 1, parse_line(&v).map_err(|m| err(i + 1, m))?));
        }
        Ok(Trace {
            lines: parsed,
            cut_runs,
            dropped_lines,
        })
    }
}

/// How one run's replay went.
#[derive(Clone, Debug, PartialEq)]
pub enum Replayed {
    /// Every output the rebuilt machine gave matched the recorded one.
    Identical {
        /// Outputs compared.
        outputs: usize,
    },
    /// The rebuilt machine answered otherwise (another build, or a trace
    /// edited by hand): the first difference.
    Diverged {
        /// The trace line.
        line: usize,
        /// What the trace holds.
        recorded: Value,
        /// What the machine answered.
        replayed: Value,
    },
    /// Its start line was dropped by the bounded buffer: judged, not
    /// replayed.
    Cut,
}

/// One run of a trace.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The run's number.
    pub run: u64,
    /// Its operation (`acquire`, `renew`, `release`, `hold`, `elect`), or
    /// `?` for a cut run.
    pub op: &'static str,
    /// The lease key.
    pub key: Option<String>,
    /// How the replay went.
    pub replayed: Replayed,
    /// Its events, as recorded (their `Debug` text).
    pub events: Vec<String>,
    /// How it finished, as recorded (`None`: it had not when the trace was
    /// written).
    pub outcome: Option<String>,
    /// Store calls it made.
    pub calls: usize,
}

/// A rule of the [module docs](self) that the trace breaks.
#[derive(Clone, Debug, PartialEq)]
pub enum BrokenRule {
    /// Rule 1: an acquisition's token did not exceed an earlier one.
    TokenNotIncreasing {
        /// The trace line of the later acquisition.
        line: usize,
        /// The highest token before it.
        earlier: u64,
        /// Its token.
        token: u64,
    },
    /// Rule 2: a local deadline past the earliest time the store may
    /// drop the record it rests on.
    DeadlinePastExpiry {
        /// The trace line that reported the deadline.
        line: usize,
        /// The token.
        token: u64,
        /// The deadline (local ms).
        valid_until: Mono,
        /// The latest deadline the trace supports (local ms).
        bound: Mono,
    },
    /// Rule 3: work ended after the deadline it ran under.
    WorkPastDeadline {
        /// The trace line of the `work-end` note.
        line: usize,
        /// How late.
        late_by_ms: u64,
    },
    /// Rule 3: work started while no lease was held.
    WorkUnleased {
        /// The trace line of the `work-start` note.
        line: usize,
    },
}

impl fmt::Display for BrokenRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrokenRule::TokenNotIncreasing {
                line,
                earlier,
                token,
            } => write!(
                f,
                "line {line}: tokens increase: acquired token {token} after token {earlier}"
            ),
            BrokenRule::DeadlinePastExpiry {
                line,
                token,
                valid_until,
                bound,
            } => write!(
                f,
                "line {line}: a deadline lies within the store's expiry: token {token} trusted until {} ms, {} ms past the {} ms the written record and the store's dates allow",
                valid_until.0,
                valid_until.0.saturating_sub(bound.0),
                bound.0
            ),
            BrokenRule::WorkPastDeadline { line, late_by_ms } => write!(
                f,
                "line {line}: work ends by its deadline: it ended {late_by_ms} ms after it"
            ),
            BrokenRule::WorkUnleased { line } => write!(
                f,
                "line {line}: work ends by its deadline: work started with no lease held"
            ),
        }
    }
}

/// A replayed and judged trace.
#[derive(Clone, Debug)]
pub struct ReplayReport {
    /// Each run, in the order they began.
    pub runs: Vec<RunReport>,
    /// The rules broken, in trace order.
    pub broken: Vec<BrokenRule>,
    /// Deadlines rule 2 judged.
    pub deadlines_judged: usize,
    /// Deadlines it could not judge (their write, or every dated reply,
    /// was dropped from the buffer).
    pub deadlines_unjudged: usize,
}

impl ReplayReport {
    /// Every run replayed identically (or was cut) and no rule broke.
    pub fn ok(&self) -> bool {
        self.broken.is_empty() && self.diverged().is_none()
    }

    /// The first run that diverged.
    pub fn diverged(&self) -> Option<&RunReport> {
        self.runs
            .iter()
            .find(|r| matches!(r.replayed, Replayed::Diverged { .. }))
    }
}

/// Feeds `machine` a run's recorded inputs and compares its outputs.
fn rerun<M: Machine>(mut machine: M, lines: &[&(usize, Line)]) -> Replayed
where
    M::Outcome: Traced,
{
    let mut outputs = 0;
    for (n, line) in lines {
        match line {
            Line::Poll { now, out, .. } => {
                let got = json::output(&machine.poll(*now));
                if got != *out {
                    return Replayed::Diverged {
                        line: *n,
                        recorded: out.clone(),
                        replayed: got,
                    };
                }
                outputs += 1;
            }
            Line::Reply {
                now, call, reply, ..
            } => machine.handle_reply(*now, CallId(*call), reply.clone()),
            Line::Stop { now, to: None, .. } => machine.stop(*now),
            Line::Stop {
                now, to: Some(to), ..
            } => machine.hand_over(*now, to),
            Line::Start { .. } | Line::Note { .. } => {}
        }
    }
    Replayed::Identical { outputs }
}

fn rebuild_and_rerun(start: &Start, lines: &[&(usize, Line)]) -> Replayed {
    match start.clone() {
        Start::Acquire {
            cfg,
            entropy,
            claims,
        } => rerun(LeaseOp::acquire(cfg, entropy).with_claims(claims), lines),
        Start::Renew {
            cfg,
            entropy,
            lease,
        } => rerun(LeaseOp::renew(cfg, entropy, lease), lines),
        Start::Release {
            cfg,
            entropy,
            lease,
        } => rerun(LeaseOp::release(cfg, entropy, lease), lines),
        Start::Hold {
            cfg,
            entropy,
            lease,
            limit,
        } => rerun(Holder::new(cfg, entropy, lease).limited(limit), lines),
        Start::Elect { cfg, entropy } => rerun(Elector::new(cfg, entropy), lines),
    }
}

/// Replays every run of `trace` and judges it (see the module docs).
pub fn replay(trace: &Trace) -> ReplayReport {
    let mut by_run: BTreeMap<u64, Vec<&(usize, Line)>> = BTreeMap::new();
    for entry in &trace.lines {
        let run = match &entry.1 {
            Line::Start { run, .. }
            | Line::Poll { run, .. }
            | Line::Reply { run, .. }
            | Line::Stop { run, .. } => *run,
            Line::Note { .. } => continue,
        };
        by_run.entry(run).or_default().push(entry);
    }
    let mut runs = Vec::new();
    for (run, lines) in &by_run {
        let start = lines.iter().find_map(|(_, l)| match l {
            Line::Start { start, .. } => Some(start.as_ref()),
            _ => None,
        });
        let mut events = Vec::new();
        let mut outcome = None;
        let mut calls = 0;
        for (_, line) in lines {
            if let Line::Poll { out, .. } = line {
                if let Some(e) = out.get("event").and_then(Value::as_str) {
                    events.push(e.to_string());
                }
                if let Some(d) = out.get("done").and_then(Value::as_str) {
                    outcome = Some(d.to_string());
                }
                calls += usize::from(out.get("call").is_some());
            }
        }
        runs.push(RunReport {
            run: *run,
            op: start.map_or("?", Start::op),
            key: start.map(|s| s.config().key.clone()),
            replayed: match start {
                Some(start) => rebuild_and_rerun(start, lines),
                None => Replayed::Cut,
            },
            events,
            outcome,
            calls,
        });
    }
    let mut judge = Judge::default();
    for entry in &trace.lines {
        judge.line(entry);
    }
    ReplayReport {
        runs,
        broken: judge.broken,
        deadlines_judged: judge.judged,
        deadlines_unjudged: judge.unjudged,
    }
}

/// A write of a record, as the rules see it.
struct Put {
    sent: Mono,
    token: u64,
    expires_at: u64,
    acquisition: String,
    nonce: String,
    confirmed: bool,
}

/// The rules' state, fed the trace line by line.
#[derive(Default)]
struct Judge {
    configs: BTreeMap<u64, LeaseConfig>,
    ops: BTreeMap<u64, &'static str>,
    /// Send times of calls, by run and call id.
    sent: BTreeMap<(u64, u64), Mono>,
    /// Record writes, by run and call id.
    puts: BTreeMap<(u64, u64), Put>,
    /// Upper bounds on the store's clock: (local anchor, store ms then).
    anchors: Vec<(Mono, u64)>,
    /// The highest token acquired so far, per lease key (a client may
    /// record several leases; tokens are per key).
    acquired: BTreeMap<String, u64>,
    /// The latest term: token and deadline.
    term: Option<(u64, Mono)>,
    /// When the work running now was sent KILL (the first time).
    killed: Option<Mono>,
    broken: Vec<BrokenRule>,
    judged: usize,
    unjudged: usize,
}

impl Judge {
    fn line(&mut self, (n, line): &(usize, Line)) {
        match line {
            Line::Start { run, start } => {
                self.configs.insert(*run, start.config().clone());
                self.ops.insert(*run, start.op());
                // A lease handed to a run carries the store date it was
                // last anchored on (a read this process made before, say
                // `lease renew --etag`'s), which bounds the store's clock
                // as any reply's date does.
                if let Start::Renew { lease, .. }
                | Start::Release { lease, .. }
                | Start::Hold { lease, .. } = start.as_ref()
                {
                    let (date, anchor) = lease.clock;
                    self.anchors
                        .push((anchor, date.unix_ms.0.saturating_add(date.behind_ms)));
                }
            }
            Line::Poll { run, now, out } => self.poll(*n, *run, *now, out),
            Line::Reply {
                run,
                now,
                call,
                reply,
            } => self.reply(*run, *now, *call, reply),
            Line::Stop { .. } => {}
            Line::Note { what, at } => self.note(*n, what, *at),
        }
    }

    fn poll(&mut self, n: usize, run: u64, now: Now, out: &Value) {
        if let Some(call) = out.get("call").and_then(Value::as_u64) {
            self.sent.insert((run, call), now.mono);
            let op = &out["op"];
            let body = op.get("body").and_then(Value::as_str);
            if op.get("verb").and_then(Value::as_str) == Some("PUT") {
                if let Some(record) = body.and_then(|b| LeaseRecord::decode(b.as_bytes()).ok()) {
                    self.puts.insert(
                        (run, call),
                        Put {
                            sent: now.mono,
                            token: record.token,
                            expires_at: record.expires_at.0,
                            acquisition: record.acquisition,
                            nonce: record.nonce,
                            confirmed: false,
                        },
                    );
                }
            }
        }
        let Some(held) = out.get("held").and_then(Value::as_array) else {
            return;
        };
        let (Some(token), Some(until)) = (
            held.first().and_then(Value::as_u64),
            held.get(1).and_then(Value::as_u64),
        ) else {
            return;
        };
        let until = Mono(until);
        let acquisition = out.get("acquired").and_then(Value::as_bool) == Some(true)
            || (out.get("done").is_some() && self.ops.get(&run) == Some(&"acquire"));
        // A cut run's configuration is unknown: its key and protocol too,
        // so its tokens are not judged.
        let fenced_key = self
            .configs
            .get(&run)
            .filter(|c| c.protocol != Protocol::Mutex)
            .map(|c| c.key.clone());
        if let (true, Some(key)) = (acquisition, fenced_key) {
            let highest = self.acquired.get(&key).copied();
            if !crate::verify::token_follows(highest, token) {
                self.broken.push(BrokenRule::TokenNotIncreasing {
                    line: n,
                    earlier: highest.unwrap_or_default(),
                    token,
                });
            }
            let top = self.acquired.entry(key).or_insert(token);
            *top = (*top).max(token);
        }
        match self.term {
            Some((t, u)) if t == token && u >= until => {}
            _ => self.term = Some((token, until)),
        }
        self.deadline(n, run, now.mono, token, until);
    }

    /// Rule 2 for a deadline `until` of `token` reported at `at`.
    fn deadline(&mut self, n: usize, run: u64, at: Mono, token: u64, until: Mono) {
        // A cut run (its start dropped): the store date its deadline was
        // stamped from may have been dropped with it.
        let Some(drift) = self.configs.get(&run).map(|c| c.drift_rate) else {
            self.unjudged += 1;
            return;
        };
        let bound = self
            .puts
            .iter()
            .filter(|((r, _), p)| *r == run && p.token == token && p.confirmed && p.sent <= at)
            .filter_map(|(_, p)| {
                // The latest the store's clock can read at the send.
                let store_at_send = self
                    .anchors
                    .iter()
                    .map(|(anchor, upper)| {
                        let since = p.sent.0.saturating_sub(anchor.0) as f64;
                        *upper as f64 + since * (1.0 + drift)
                    })
                    .reduce(f64::min)?;
                let left = (p.expires_at as f64 - store_at_send) / (1.0 + drift);
                Some(p.sent.0 as f64 + left)
            })
            .reduce(f64::max);
        let Some(bound) = bound else {
            self.unjudged += 1;
            return;
        };
        self.judged += 1;
        if until.0 as f64 > bound {
            self.broken.push(BrokenRule::DeadlinePastExpiry {
                line: n,
                token,
                valid_until: until,
                bound: Mono(bound.max(0.0) as u64),
            });
        }
    }

    fn reply(&mut self, run: u64, now: Now, call: u64, reply: &StoreReply) {
        match reply.date {
            Some(d) => {
                if let Some(sent) = self.sent.get(&(run, call)) {
                    self.anchors
                        .push((*sent, d.unix_ms.0.saturating_add(d.behind_ms)));
                }
            }
            None => {
                let skew = self
                    .configs
                    .get(&run)
                    .map_or(1_000, |c| c.max_skew.as_millis() as u64);
                self.anchors
                    .push((now.mono, now.wall.0.saturating_add(skew)));
            }
        }
        match &reply.kind {
            ReplyKind::Written { .. } => {
                if let Some(p) = self.puts.get_mut(&(run, call)) {
                    p.confirmed = true;
                }
            }
            ReplyKind::Found { body, .. } => {
                if let Ok(record) = LeaseRecord::decode(body) {
                    for ((r, _), p) in self.puts.iter_mut() {
                        if *r == run
                            && p.acquisition == record.acquisition
                            && p.nonce == record.nonce
                        {
                            p.confirmed = true;
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn note(&mut self, n: usize, what: &str, at: Mono) {
        match what {
            "work-start" => {
                self.killed = None;
                if self.term.is_none_or(|(_, until)| at >= until) {
                    self.broken.push(BrokenRule::WorkUnleased { line: n })
                }
            }
            "work-killed" => {
                self.killed.get_or_insert(at);
            }
            "work-end" => {
                // Nothing of the work ran after its KILL.
                let at = self.killed.take().map_or(at, |k| k.min(at));
                if let Some((_, until)) = self.term {
                    if at > until {
                        self.broken.push(BrokenRule::WorkPastDeadline {
                            line: n,
                            late_by_ms: at.0 - until.0,
                        });
                    }
                }
            }
            _ => {}
        }
    }
}
