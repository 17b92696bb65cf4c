//! The flight recorder: a client's recorded runs replay to the same
//! outputs, the replay's rules catch a broken variant's trace, and a trace
//! keeps no credential.
#![cfg(all(feature = "trace", feature = "unsafe-variants"))]

use lease_core::store::ReplyKind;
use lease_core::time::StoreDate;
use lease_core::trace::replay::{replay, BrokenRule, Line, ReplayReport, Replayed, Trace};
use lease_core::trace::Recorder;
use lease_core::variants::Variant;
use lease_core::{
    AcquireOutcome, Clock, Entropy, LeaseConfig, Leases, LostReason, MemStore, Mono, Run, RunError,
    RunOutcome, Store, StoreOp, StoreReply, UnixMillis, VirtualClock,
};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const EPOCH: UnixMillis = UnixMillis(1_790_000_000_000);

/// The in-memory store behind an HTTP-like front end: dates in whole
/// seconds (as a `Date` header), and from `fail_from` (local ms) on every
/// call answered 503 without being applied (an outage).
#[derive(Clone)]
struct FrontEnd {
    mem: MemStore,
    clock: VirtualClock,
    fail_from: Arc<AtomicU64>,
    /// A denial's message, to show what a trace keeps of it.
    denied: Option<String>,
    /// How long every other request takes to reach the store (a late
    /// delivery): its reply is dated this long after the send.
    delay_ms: u64,
    calls: Arc<AtomicU64>,
}

impl FrontEnd {
    fn new(clock: &VirtualClock) -> FrontEnd {
        FrontEnd {
            mem: MemStore::new(clock.clone()),
            clock: clock.clone(),
            fail_from: Arc::new(AtomicU64::new(u64::MAX)),
            denied: None,
            delay_ms: 0,
            calls: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Store for FrontEnd {
    async fn call(&self, op: StoreOp) -> StoreReply {
        if self.delay_ms > 0 && self.calls.fetch_add(1, Ordering::SeqCst) % 2 == 1 {
            let at = self.clock.now().mono.0 + self.delay_ms;
            self.clock.sleep_until(Mono(at)).await;
        }
        let now = self.clock.now();
        let kind = if let Some(message) = &self.denied {
            ReplyKind::Denied {
                code: Some("SignatureDoesNotMatch".into()),
                message: Some(message.clone()),
            }
        } else if now.mono.0 >= self.fail_from.load(Ordering::SeqCst) {
            ReplyKind::ServerError {
                status: 503,
                code: None,
            }
        } else {
            self.mem.apply(&op).kind
        };
        let date = StoreDate::from_http_date(UnixMillis(now.wall.0 / 1000 * 1000));
        StoreReply::dated(kind, date)
    }
}

fn entropy() -> Entropy {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    Entropy::from_seed(NEXT.fetch_add(1, Ordering::Relaxed) as u128)
}

fn client(
    store: &FrontEnd,
    clock: &VirtualClock,
    variant: Variant,
) -> Leases<FrontEnd, VirtualClock> {
    let mut template = LeaseConfig::new("", "node-a", Duration::from_secs(30));
    template.variant = variant;
    Leases::with_config(store.clone(), clock.clone(), template, false, entropy).expect("settings")
}

/// A lease taken, held while work runs in 1 s steps, and lost when the
/// store stops answering: the incident a flight recorder is for.
fn record_an_outage(variant: Variant) -> (String, Result<RunOutcome<()>, RunError<String>>) {
    let clock = VirtualClock::new(EPOCH);
    let store = FrontEnd::new(&clock);
    let leases = client(&store, &clock, variant);
    let recorder = Recorder::default();
    leases.record_to(recorder.clone());
    let held = pollster::block_on(async {
        // A first holder releases, so the trace has three kinds of run.
        let AcquireOutcome::Acquired(first) = leases.acquire("jobs/nightly").await.unwrap() else {
            panic!("busy")
        };
        leases.release(first).await.unwrap();
        // The store goes away 25 s in: two renewals land, then none.
        store
            .fail_from
            .store(clock.now().mono.0 + 25_000, Ordering::SeqCst);
        let work = |_token| async {
            recorder.note("work-start", clock.now().mono);
            for _ in 0..120 {
                let at = clock.now().mono.0 + 1_000;
                clock.sleep_until(Mono(at)).await;
            }
            Ok::<_, String>(())
        };
        let held = leases.run("jobs/nightly", Run::new(), work).await;
        recorder.note("work-end", clock.now().mono);
        held
    });
    (recorder.to_jsonl(), held)
}

#[test]
fn a_lost_lease_replays_to_the_same_outputs_and_breaks_no_rule() {
    let (text, held) = record_an_outage(Variant::Safe);
    assert!(
        matches!(
            held,
            Err(RunError::LeaseLost {
                reason: LostReason::Expired,
                ..
            })
        ),
        "{held:?}"
    );
    let trace = Trace::parse(&text).expect("the trace reads back");
    let report = replay(&trace);
    let ops: Vec<&str> = report.runs.iter().map(|r| r.op).collect();
    assert_eq!(ops, ["acquire", "release", "acquire", "hold"]);
    for run in &report.runs {
        assert!(
            matches!(run.replayed, Replayed::Identical { outputs } if outputs > 0),
            "run {} {:?}",
            run.run,
            run.replayed
        );
    }
    let hold = &report.runs[3];
    assert!(
        hold.events.iter().any(|e| e.starts_with("Renewed")),
        "{:?}",
        hold.events
    );
    assert!(
        hold.events.iter().any(|e| e.starts_with("Lost")),
        "{:?}",
        hold.events
    );
    assert_eq!(hold.outcome.as_deref(), Some("Lost(Expired)"));
    assert!(report.broken.is_empty(), "{:?}", report.broken);
    // Both acquisitions and the renewals were judged against the store.
    assert!(report.deadlines_judged >= 4, "{report:?}");
    assert_eq!(report.deadlines_unjudged, 0);
}

#[test]
fn the_rules_catch_a_client_that_holds_without_margins() {
    let (text, _) = record_an_outage(Variant::NoMargins);
    let report = replay(&Trace::parse(&text).unwrap());
    // The same build replays it exactly: what is wrong is the protocol.
    assert!(report.diverged().is_none(), "{:?}", report.diverged());
    assert!(
        report
            .broken
            .iter()
            .any(|b| matches!(b, BrokenRule::DeadlinePastExpiry { .. })),
        "{:?}",
        report.broken
    );
}

#[test]
fn work_past_its_deadline_is_reported() {
    let (text, _) = record_an_outage(Variant::Safe);
    // Move the work's end a minute later, as a job that ignored its TERM.
    let report = replay(&Trace::parse(&end_work_late(&text, 60_000, None)).unwrap());
    assert_work_past_deadline(&report);
}

/// Asserts the replay found the work ran past its deadline, and nothing else.
fn assert_work_past_deadline(report: &ReplayReport) {
    assert!(
        matches!(
            report.broken.as_slice(),
            [BrokenRule::WorkPastDeadline { .. }]
        ),
        "{:?}",
        report.broken
    );
}

/// The trace of [`record_an_outage`] with its `work-end` moved `late_ms`
/// later, and a `work-killed` note at `killed` ms after the original end
/// (if any) just before it.
fn end_work_late(text: &str, late_ms: u64, killed: Option<i64>) -> String {
    let mut out = String::new();
    for l in text.lines() {
        if l.contains("\"work-end\"") {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let at = v["at"].as_u64().unwrap();
            if let Some(k) = killed {
                let k = at.checked_add_signed(k).unwrap();
                out.push_str(&format!("{{\"note\":\"work-killed\",\"at\":{k}}}\n"));
            }
            out.push_str(&format!(
                "{{\"note\":\"work-end\",\"at\":{}}}\n",
                at + late_ms
            ));
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// A job sent KILL in time ran no longer, however late its end was seen
/// (a loaded machine); one sent KILL too late did.
#[test]
fn work_killed_in_time_is_judged_by_its_kill() {
    let (text, _) = record_an_outage(Variant::Safe);
    let report = replay(&Trace::parse(&end_work_late(&text, 60_000, Some(0))).unwrap());
    assert!(report.ok(), "{:?}", report.broken);
    let report = replay(&Trace::parse(&end_work_late(&text, 60_000, Some(30_000))).unwrap());
    assert_work_past_deadline(&report);
    // Without a KILL the late end counts, as before.
    let report = replay(&Trace::parse(&end_work_late(&text, 60_000, None)).unwrap());
    assert_work_past_deadline(&report);
}

/// Every other request reaches the store 3 s late, so such a write's own
/// reply is dated 3 s after its send, and only the prompt reply before it
/// bounds the store's clock at the send as tightly as the client's stamp
/// did. A trace cut at
/// any line (as the bounded buffer cuts it) may have dropped that reply:
/// the cut run's deadlines are counted unjudged, never a false break.
#[test]
fn a_cut_runs_deadlines_are_not_judged_without_their_dates() {
    let clock = VirtualClock::new(EPOCH);
    let mut store = FrontEnd::new(&clock);
    store.delay_ms = 3_000;
    let leases = client(&store, &clock, Variant::Safe);
    let recorder = Recorder::default();
    leases.record_to(recorder.clone());
    pollster::block_on(async {
        // The virtual clock jumps to a sleep's end: work in 1 s steps.
        let work = |_token| async {
            for _ in 0..120 {
                let at = clock.now().mono.0 + 1_000;
                clock.sleep_until(Mono(at)).await;
            }
            Ok::<_, String>(())
        };
        let held = leases.run("jobs/nightly", Run::new(), work).await;
        assert!(matches!(held, Ok(RunOutcome::Ran { .. })), "{held:?}");
    });
    let text = recorder.to_jsonl();
    let whole = replay(&Trace::parse(&text).unwrap());
    assert!(whole.ok(), "{whole:?}");
    assert!(whole.deadlines_judged >= 10, "{whole:?}");
    let lines: Vec<&str> = text.lines().skip(1).collect();
    let mut unjudged = 0;
    for dropped in 1..lines.len() {
        let kept = &lines[dropped..];
        // Runs with a line kept whose start was dropped.
        let started: BTreeSet<u64> = lines[..dropped]
            .iter()
            .filter_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.get("start").and(v["run"].as_u64())
            })
            .collect();
        let cut: Vec<u64> = started
            .into_iter()
            .filter(|r| {
                kept.iter().any(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v["run"].as_u64() == Some(*r)
                })
            })
            .collect();
        let cut_text = format!(
            "{{\"lease_trace\":1,\"dropped_lines\":{dropped},\"cut_runs\":{cut:?}}}\n{}\n",
            kept.join("\n")
        );
        let report = replay(&Trace::parse(&cut_text).unwrap());
        assert!(
            report.broken.is_empty(),
            "cut after {dropped} lines: {:?}",
            report.broken
        );
        unjudged += report.deadlines_unjudged;
    }
    assert!(unjudged > 0);
}

#[test]
fn an_edited_reply_makes_the_replay_diverge() {
    let (text, _) = record_an_outage(Variant::Safe);
    // The first 503 answered as a write: the holder would have renewed.
    let mut edited = String::new();
    let mut done = false;
    for l in text.lines() {
        if !done && l.contains("\"server-error\"") {
            edited.push_str(&l.replace("\"kind\":\"server-error\"", "\"kind\":\"missing\""));
            done = true;
        } else {
            edited.push_str(l);
        }
        edited.push('\n');
    }
    assert!(done);
    let report = replay(&Trace::parse(&edited).unwrap());
    let diverged = report.diverged().expect("a divergence");
    assert_eq!(diverged.op, "hold");
}

#[test]
fn a_trace_keeps_no_credential() {
    let clock = VirtualClock::new(EPOCH);
    let mut store = FrontEnd::new(&clock);
    store.denied = Some(
        "The request signature we calculated does not match.\nAKIAZZZZNEWLINE00001 AWSAccessKeyId AKIAIOSFODNN7EXAMPLE, \
         https://b.example/k?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20261128&X-Amz-Signature=3f1c9e2ab0&X-Amz-Security-Token=IQoJb3JpZ2luX2Vj, sas sig=Zm9vYmFy"
            .into(),
    );
    let leases = client(&store, &clock, Variant::Safe);
    let recorder = Recorder::default();
    leases.record_to(recorder.clone());
    let denied = pollster::block_on(leases.acquire("jobs/nightly"));
    assert!(denied.is_err(), "{denied:?}");
    let text = recorder.to_jsonl();
    for secret in [
        "AKIAIOSFODNN7EXAMPLE",
        // After a newline: `Debug` writes it `\nAKIA…`.
        "AKIAZZZZNEWLINE00001",
        "3f1c9e2ab0",
        "IQoJb3JpZ2luX2Vj",
        "Zm9vYmFy",
    ] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(text.contains("[redacted]"));
    // Scrubbed on the way in and on the way out: the replay agrees.
    let report = replay(&Trace::parse(&text).unwrap());
    assert!(report.ok(), "{report:?}");
}

#[test]
fn a_bounded_recorder_keeps_the_newest_lines_and_marks_cut_runs() {
    let clock = VirtualClock::new(EPOCH);
    let store = FrontEnd::new(&clock);
    let leases = client(&store, &clock, Variant::Safe);
    let recorder = Recorder::new(40);
    leases.record_to(recorder.clone());
    pollster::block_on(async {
        for _ in 0..20 {
            let AcquireOutcome::Acquired(l) = leases.acquire("jobs/a").await.unwrap() else {
                panic!("busy")
            };
            leases.release(l).await.unwrap();
        }
    });
    assert_eq!(recorder.len(), 40);
    let trace = Trace::parse(&recorder.to_jsonl()).unwrap();
    assert!(trace.dropped_lines > 0);
    let report = replay(&trace);
    // The oldest run kept lost its start (cut), the rest replay.
    assert!(report.runs.len() >= 4);
    assert!(
        report
            .runs
            .iter()
            .filter(|r| r.replayed == Replayed::Cut)
            .count()
            <= 1
    );
    assert!(report
        .runs
        .iter()
        .any(|r| matches!(r.replayed, Replayed::Identical { .. })));
    assert!(report.broken.is_empty(), "{:?}", report.broken);
}

#[test]
fn bad_traces_are_refused_with_their_line() {
    assert_eq!(Trace::parse("").unwrap_err().line, 1);
    let e = Trace::parse("{\"lease_trace\":9}\n").unwrap_err();
    assert!(e.message.contains("version 9"), "{e}");
    let e = Trace::parse("{\"lease_trace\":1}\n{\"run\":1,\"poll\":[1]}\n").unwrap_err();
    assert_eq!(e.line, 2);
    let e = Trace::parse("{\"nope\":1}\n").unwrap_err();
    assert!(e.message.contains("not a lease trace"), "{e}");
}

/// Hostile traces (numbers replaced by extremes, lines dropped, repeated,
/// swapped or cut short) are refused with their line or replayed to a
/// verdict: never a panic. The seed is fresh on every run and printed;
/// `TRACE_FUZZ_SEED` replays one.
#[test]
fn edited_traces_never_panic_the_replay() {
    let seed: u64 = std::env::var("TRACE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("TRACE_FUZZ_SEED={seed}");
    let (text, _) = record_an_outage(Variant::Safe);
    let lines: Vec<&str> = text.lines().collect();
    let mut rng = Entropy::from_seed(seed as u128);
    let mut below = |n: usize| (rng.next_u64() % n as u64) as usize;
    let extremes = [
        "0",
        "1",
        "18446744073709551615",
        "9223372036854775807",
        "-1",
        "1e308",
        "null",
        "\"x\"",
    ];
    let (mut refused, mut judged) = (0, 0);
    for case in 0..300 {
        let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        for _ in 0..1 + below(3) {
            let at = 1 + below(edited.len() - 1);
            match below(5) {
                0 => {
                    // A number replaced.
                    let l = &edited[at];
                    let digits: Vec<usize> = l
                        .char_indices()
                        .filter(|(i, c)| {
                            c.is_ascii_digit() && !l[..*i].ends_with(|p: char| p.is_ascii_digit())
                        })
                        .map(|(i, _)| i)
                        .collect();
                    if digits.is_empty() {
                        continue;
                    }
                    let start = digits[below(digits.len())];
                    let end = start
                        + l[start..]
                            .find(|c: char| !c.is_ascii_digit())
                            .unwrap_or(l.len() - start);
                    let with = extremes[below(extremes.len())];
                    edited[at] = format!("{}{with}{}", &l[..start], &l[end..]);
                }
                1 => {
                    edited.remove(at);
                }
                2 => {
                    let l = edited[at].clone();
                    edited.insert(at, l);
                }
                3 => {
                    let other = 1 + below(edited.len() - 1);
                    edited.swap(at, other);
                }
                _ => {
                    let l = &edited[at];
                    let mut cut = below(l.len().max(1));
                    while !l.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    edited[at] = l[..cut].to_string();
                }
            }
            if edited.len() < 2 {
                break;
            }
        }
        let text = edited.join("\n");
        let outcome = std::panic::catch_unwind(|| match Trace::parse(&text) {
            Err(e) => {
                assert!(!e.message.is_empty());
                false
            }
            Ok(trace) => {
                let report = replay(&trace);
                let _ = report.ok();
                true
            }
        });
        match outcome {
            Ok(true) => judged += 1,
            Ok(false) => refused += 1,
            Err(_) => panic!("case {case} of TRACE_FUZZ_SEED={seed} panicked:\n{text}"),
        }
    }
    println!("{refused} refused, {judged} replayed");
    assert!(refused > 0 && judged > 0);
}

/// Tokens are per lease: a client that records two keys acquires a lower
/// token on the second without breaking the token rule.
#[test]
fn tokens_are_judged_per_key() {
    let clock = VirtualClock::new(EPOCH);
    let store = FrontEnd::new(&clock);
    let leases = client(&store, &clock, Variant::Safe);
    let recorder = Recorder::default();
    leases.record_to(recorder.clone());
    pollster::block_on(async {
        for key in ["jobs/a", "jobs/a", "jobs/a", "jobs/b"] {
            let AcquireOutcome::Acquired(l) = leases.acquire(key).await.unwrap() else {
                panic!("busy")
            };
            leases.release(l).await.unwrap();
        }
    });
    let report = replay(&Trace::parse(&recorder.to_jsonl()).unwrap());
    assert!(report.ok(), "{report:?}");
}

/// A configuration's `drift_rate` reads back to the same bits (serde_json's
/// `float_roundtrip`, which feature `trace` turns on; without it one rate
/// in a few thousand read back one ULP off, and the replay stamps
/// deadlines with it). Random rates, fresh seed (`TRACE_DRIFT_SEED`).
#[test]
fn a_configurations_drift_rate_reads_back_to_the_same_bits() {
    let seed = std::env::var("TRACE_DRIFT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("TRACE_DRIFT_SEED={seed}");
    let (text, _) = record_an_outage(Variant::Safe);
    let start = text
        .lines()
        .find(|l| l.contains("\"start\""))
        .expect("a start line");
    let recorded: serde_json::Value = serde_json::from_str(start).unwrap();
    let mut x = seed;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let rate = (x >> 11) as f64 / (1u64 << 53) as f64 * 0.2;
        let mut line = recorded.clone();
        line["start"]["config"]["drift_rate"] = rate.into();
        let trace = format!("{{\"lease_trace\":1}}\n{line}\n");
        let parsed = Trace::parse(&trace).unwrap();
        let Line::Start { start, .. } = &parsed.lines[0].1 else {
            panic!("not a start line")
        };
        assert_eq!(
            start.config().drift_rate.to_bits(),
            rate.to_bits(),
            "TRACE_DRIFT_SEED={seed}: {rate:e} read back as {:e}",
            start.config().drift_rate
        );
    }
}
