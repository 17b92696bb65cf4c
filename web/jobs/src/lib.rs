//! The browser demo's scheduled-job view, a WebAssembly module of its own
//! that the page loads when the view is opened (so the demo's first load
//! stays small): the core's [`Leases::run`] (what the Lambda and
//! the Worker cron run for each tick) on a few simulated instances sharing
//! the in-memory store, on a virtual clock.
//!
//! The visitor delivers ticks: to one instance, twice (a duplicate), to
//! every instance at once, or with too little invocation time left. Each
//! delivery is one [`Leases::run`] for its tick, whose job takes `job_ms` of
//! virtual time; the view shows what each run did (ran, skipped, already
//! ran, stopped, refused), when each job ran, and the record the store
//! holds. The checker is the job log itself: two jobs running at once, or
//! one tick completed twice, is a violation.
//!
//! A tiny executor drives the runs: every run is polled until it waits for
//! a timer; then the clock jumps to the earliest timer. The store answers
//! at once (no latency), so the only time that passes is the jobs' own
//! and the waits the lease asks for.

use lease_core::client::{release_reserve, time_needed};
use lease_core::store::PutCondition;
use lease_core::tick::Tick;
use lease_core::{
    Clock, Entropy, LeaseConfig, LeaseRecord, Leases, MemStore, Mono, Now, RunError, RunOutcome,
    Store, StoreOp, StoreReply, UnixMillis, VirtualClock,
};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use wasm_bindgen::prelude::wasm_bindgen;

/// talc for Rust's allocations, as in the demo's main module.
// SAFETY: a page runs this module on its one thread, which is what
// `new_global` asks for; talc then grows the wasm memory as it needs.
#[cfg(target_family = "wasm")]
#[global_allocator]
static ALLOCATOR: talc::TalckWasm = unsafe { talc::TalckWasm::new_global() };

/// The lease key the scheduled job runs under.
const KEY: &str = "jobs/report";
/// Where the virtual clock's wall time starts.
const EPOCH: UnixMillis = UnixMillis(1_790_000_000_000);
/// The most runs `state()` shows, newest first (all are kept: a visit
/// delivers a few dozen).
const MAX_RUNS: usize = 200;

thread_local! {
    /// The next seed for an operation's randomness: deterministic per view.
    static NEXT_SEED: Cell<u128> = const { Cell::new(1) };
}

fn demo_entropy() -> Entropy {
    NEXT_SEED.with(|s| {
        let seed = s.get();
        s.set(seed.wrapping_add(0x9E37_79B9_7F4A_7C15));
        Entropy::from_seed(seed)
    })
}

/// The view's clock: the in-memory store's virtual clock, with timers the
/// executor jumps to.
#[derive(Clone)]
struct TickClock {
    clock: VirtualClock,
    timers: Rc<RefCell<BTreeSet<u64>>>,
}

impl Clock for TickClock {
    fn now(&self) -> Now {
        self.clock.now()
    }

    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        let me = self.clone();
        std::future::poll_fn(move |_| {
            if me.clock.now().mono >= at {
                Poll::Ready(())
            } else {
                me.timers.borrow_mut().insert(at.0);
                Poll::Pending
            }
        })
    }
}

/// The view's store: the in-memory store, honouring conditional writes or
/// (to show what the capability probe is for) ignoring them as some
/// S3-compatible servers do.
#[derive(Clone)]
struct DemoStore {
    mem: MemStore,
    /// Each call takes 10 to 100 ms (drawn from the view's seed), so that
    /// runs delivered at once race as they do on a real store.
    clock: TickClock,
    latency: Rc<RefCell<Entropy>>,
    /// Ignores `If-None-Match: *` on creates.
    ignores_if_none_match: bool,
    /// Ignores `If-Match` on writes and deletes too.
    ignores_if_match: bool,
}

impl Store for DemoStore {
    async fn call(&self, op: StoreOp) -> StoreReply {
        let op = match op {
            StoreOp::Put {
                key,
                body,
                condition,
            } => {
                let ignored = match condition {
                    PutCondition::IfAbsent => self.ignores_if_none_match,
                    PutCondition::IfMatch(_) => self.ignores_if_match,
                    PutCondition::None => false,
                };
                StoreOp::Put {
                    key,
                    body,
                    condition: if ignored {
                        PutCondition::None
                    } else {
                        condition
                    },
                }
            }
            StoreOp::Delete { key, .. } if self.ignores_if_match => StoreOp::Delete {
                key,
                if_match: None,
            },
            op => op,
        };
        let latency = 10 + (self.latency.borrow_mut().unit() * 90.0) as u64;
        self.clock
            .sleep_until(self.clock.now().mono + Duration::from_millis(latency))
            .await;
        self.mem.apply(&op)
    }
}

/// One delivery of a tick to an instance, and what became of it.
struct Run {
    node: u32,
    tick: String,
    delivered_ms: u64,
    /// The job's start and end (ms), when it started.
    job: Option<(u64, Option<u64>)>,
    /// `None` while the run is under way.
    outcome: Option<String>,
    /// Short class of the outcome: ran, skipped, already-ran, stopped, error.
    class: &'static str,
    token: Option<u64>,
}

/// The scheduled-job view (see the module docs).
#[wasm_bindgen]
pub struct Ticks {
    store: DemoStore,
    /// Runs check the store first (the capability probe), as they do in
    /// production.
    probe: bool,
    clock: TickClock,
    ttl_ms: u32,
    job_ms: u32,
    runs: Rc<RefCell<Vec<Run>>>,
    tasks: Vec<Pin<Box<dyn Future<Output = ()>>>>,
    violations: Rc<RefCell<Vec<String>>>,
    /// Each instance's client, kept between its deliveries (a warm
    /// execution environment): it checks the store at its first run and
    /// keeps the claims its runs leave.
    clients: BTreeMap<u32, Leases<DemoStore, TickClock>>,
}

#[wasm_bindgen]
impl Ticks {
    /// A view whose job takes `job_ms` (100 ms to 10 min) under a lease
    /// of `ttl_ms` (1 s to 120 s); `seed` draws the runs' nonces. `store`
    /// is `safe`, `ignores-if-none-match` or `ignores-conditions` (a store
    /// that takes every write unconditionally); with `probe` each run
    /// checks the store first, as in production, and refuses an unsafe one.
    #[wasm_bindgen(constructor)]
    pub fn new(
        ttl_ms: u32,
        job_ms: u32,
        seed: u32,
        store: &str,
        probe: bool,
    ) -> Result<Ticks, String> {
        let (ignores_if_none_match, ignores_if_match) = match store {
            "safe" => (false, false),
            "ignores-if-none-match" => (true, false),
            "ignores-conditions" => (true, true),
            other => {
                return Err(format!(
                    "unknown store {other:?}; expected safe, ignores-if-none-match or ignores-conditions"
                ))
            }
        };
        if !(1_000..=120_000).contains(&ttl_ms) {
            return Err(format!("ttl must be 1000 to 120000 ms, not {ttl_ms}"));
        }
        if !(100..=600_000).contains(&job_ms) {
            return Err(format!("the job must take 100 to 600000 ms, not {job_ms}"));
        }
        NEXT_SEED.with(|s| s.set(u128::from(seed) << 64 | 1));
        let clock = VirtualClock::new(EPOCH);
        let mem = MemStore::new(clock.clone());
        let clock = TickClock {
            clock,
            timers: Rc::default(),
        };
        Ok(Ticks {
            store: DemoStore {
                mem,
                clock: clock.clone(),
                latency: Rc::new(RefCell::new(Entropy::from_seed(seed.into()))),
                ignores_if_none_match,
                ignores_if_match,
            },
            probe,
            clock,
            ttl_ms,
            job_ms,
            runs: Rc::default(),
            tasks: Vec::new(),
            violations: Rc::default(),
            clients: BTreeMap::new(),
        })
    }

    /// The least time an invocation must have left for a run to start
    /// (the lease's acquisition and release: [`time_needed`]), in ms; a
    /// run with less is refused (`NoTime`), one with a little more starts
    /// and is stopped before its time runs out. An instance's first run
    /// also checks the store (with the probe on), within the same time.
    pub fn time_needed_ms(&self) -> f64 {
        ceil_ms(time_needed(&self.config(0)))
    }

    /// How long before the invocation's time runs out a job is stopped, to
    /// leave the release its time ([`release_reserve`]), in ms.
    pub fn release_reserve_ms(&self) -> f64 {
        ceil_ms(release_reserve(&self.config(0)))
    }

    /// Virtual time now, in ms from the start.
    pub fn now_ms(&self) -> f64 {
        self.clock.now().mono.0 as f64
    }

    /// Delivers tick `tick` to instance `node` (0 to 7) now; with
    /// `limit_ms` above zero, the invocation has that long left (a Lambda's
    /// remaining time): a job still running near the end is stopped.
    pub fn deliver(&mut self, tick: u32, node: u32, limit_ms: f64) -> Result<(), String> {
        if node > 7 {
            return Err(format!("instance must be 0 to 7, not {node}"));
        }
        if !(limit_ms.is_finite() && (0.0..=3_600_000.0).contains(&limit_ms)) {
            return Err("the time left must be 0 to 3600000 ms".into());
        }
        let id = format!("tick-{tick}");
        let tick = Tick::new(id.clone()).map_err(|e| e.to_string())?;
        let cfg = self.config(node);
        cfg.validate().map_err(|e| e.to_string())?;
        let key = cfg.key.clone();
        let leases = match self.clients.get(&node) {
            Some(leases) => leases.clone(),
            None => {
                let leases = Leases::with_config(
                    self.store.clone(),
                    self.clock.clone(),
                    cfg,
                    self.probe,
                    demo_entropy,
                )
                .map_err(|e| e.to_string())?;
                self.clients.insert(node, leases.clone());
                leases
            }
        };
        let now = self.clock.now().mono.0;
        let index = {
            let mut runs = self.runs.borrow_mut();
            runs.push(Run {
                node,
                tick: id,
                delivered_ms: now,
                job: None,
                outcome: None,
                class: "running",
                token: None,
            });
            runs.len() - 1
        };
        let (runs, violations, clock) = (
            self.runs.clone(),
            self.violations.clone(),
            self.clock.clone(),
        );
        let job_len = Duration::from_millis(self.job_ms.into());
        let limit = (limit_ms > 0.0).then(|| Duration::from_millis(limit_ms as u64));
        self.tasks.push(Box::pin(async move {
            let job = |token: u64| {
                let (runs, violations, clock) = (runs.clone(), violations.clone(), clock.clone());
                async move {
                    let start = clock.now().mono;
                    {
                        let mut all = runs.borrow_mut();
                        let busy = all
                            .iter()
                            .filter(|r| matches!(r.job, Some((_, None))))
                            .count();
                        if busy > 0 {
                            violations
                                .borrow_mut()
                                .push(format!("two jobs at once at t={}ms", start.0));
                        }
                        all[index].job = Some((start.0, None));
                        all[index].token = Some(token);
                    }
                    // Ends the job's span however it ends (a stop drops it).
                    let _end = JobEnd {
                        runs: runs.clone(),
                        index,
                        clock: clock.clone(),
                    };
                    clock.sleep_until(start + job_len).await;
                    Ok::<&'static str, String>("report written")
                }
            };
            let mut run = lease_core::Run::new().tick(&tick);
            if let Some(limit) = limit {
                run = run.within(limit);
            }
            let outcome = leases.run(&key, run, job).await;
            let (class, text) = describe(&outcome);
            let mut all = runs.borrow_mut();
            if class == "ran" {
                let tick = &all[index].tick;
                let twice = all
                    .iter()
                    .enumerate()
                    .any(|(i, r)| i != index && r.class == "ran" && &r.tick == tick);
                if twice {
                    violations.borrow_mut().push(format!("{tick} ran twice"));
                }
            }
            all[index].class = class;
            all[index].outcome = Some(text);
        }));
        self.run_until(now);
        Ok(())
    }

    /// Runs the view `ms` of virtual time further.
    pub fn advance(&mut self, ms: f64) -> Result<(), String> {
        if !(ms.is_finite() && (0.0..=86_400_000.0).contains(&ms)) {
            return Err("advance: 0 to 86400000 ms".into());
        }
        let target = self.clock.now().mono.0 + ms as u64;
        self.run_until(target);
        Ok(())
    }

    /// The view now, as JSON: time, runs (instance, tick, outcome, the
    /// job's span), the record at the key, violations.
    pub fn state(&self) -> String {
        let runs = self.runs.borrow();
        let list: Vec<Value> = runs
            .iter()
            .rev()
            .take(MAX_RUNS)
            .map(|r| {
                json!({
                    "node": r.node, "tick": r.tick, "delivered": r.delivered_ms,
                    "class": r.class, "outcome": r.outcome, "token": r.token,
                    "job": r.job.map(|(s, e)| json!([s, e])),
                })
            })
            .collect();
        let record = self.store.mem.get(KEY).map(|(etag, body)| {
            let r = LeaseRecord::decode(&body).ok();
            json!({
                "etag": etag.quoted(),
                "holder": r.as_ref().map(|r| r.holder.clone()),
                "token": r.as_ref().map(|r| r.token),
                "released": r.as_ref().map(|r| r.released),
                "ticks": r.map(|r| r.runs.iter().map(|t| t.tick.clone()).collect::<Vec<_>>()),
            })
        });
        json!({
            "now_ms": self.clock.now().mono.0,
            "ttl_ms": self.ttl_ms,
            "job_ms": self.job_ms,
            "runs": list,
            "record": record,
            "violations": *self.violations.borrow(),
        })
        .to_string()
    }
}

impl Ticks {
    /// The lease settings of instance `node`: the defaults for the ttl, and
    /// the in-memory store's exact clock (1 ms date resolution).
    fn config(&self, node: u32) -> LeaseConfig {
        let mut cfg = LeaseConfig::new(
            KEY,
            format!("instance-{node}"),
            Duration::from_millis(self.ttl_ms.into()),
        );
        cfg.date_resolution = Duration::from_millis(1);
        cfg
    }

    /// Polls every run until each waits for a timer, then jumps the clock
    /// to the earliest timer, up to `target`.
    fn run_until(&mut self, target: u64) {
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            // Runs answer one another through the store at once: poll
            // until a whole round finishes nothing.
            for _ in 0..64 {
                let before = self.tasks.len();
                self.tasks
                    .retain_mut(|t| t.as_mut().poll(&mut cx).is_pending());
                if self.tasks.len() == before {
                    break;
                }
            }
            let now = self.clock.now().mono.0;
            let next = {
                let mut timers = self.clock.timers.borrow_mut();
                timers.retain(|&t| t > now);
                timers.first().copied()
            };
            match next {
                Some(t) if t <= target => self.clock.clock.advance(Duration::from_millis(t - now)),
                _ => {
                    if target > now {
                        self.clock
                            .clock
                            .advance(Duration::from_millis(target - now));
                    }
                    // Timers due exactly at the target run now.
                    self.tasks
                        .retain_mut(|t| t.as_mut().poll(&mut cx).is_pending());
                    return;
                }
            }
        }
    }
}

/// `d` in whole ms, rounded up.
fn ceil_ms(d: Duration) -> f64 {
    d.as_micros().div_ceil(1000) as f64
}

/// Closes a job's span when the job's future ends or is dropped.
struct JobEnd {
    runs: Rc<RefCell<Vec<Run>>>,
    index: usize,
    clock: TickClock,
}

impl Drop for JobEnd {
    fn drop(&mut self) {
        if let Some((start, end @ None)) = self.runs.borrow_mut()[self.index].job.as_mut() {
            let _ = start;
            *end = Some(self.clock.now().mono.0);
        }
    }
}

/// A run's outcome: its class and a sentence.
fn describe(outcome: &Result<RunOutcome<&str>, RunError<String>>) -> (&'static str, String) {
    match outcome {
        Ok(RunOutcome::Ran { token, recorded, .. }) => (
            "ran",
            format!(
                "ran with token {token}{}",
                if *recorded { ", tick recorded" } else { ", tick NOT recorded" }
            ),
        ),
        Ok(RunOutcome::Skipped { holder, token, .. }) => {
            ("skipped", format!("skipped: {holder} holds token {token}"))
        }
        Ok(RunOutcome::AlreadyRan { token, .. }) => {
            ("already-ran", format!("already ran (token {token}): not run again"))
        }
        Ok(RunOutcome::TooLate { tick, late_by_ms }) => (
            "too-late",
            format!("{tick}: started {late_by_ms} ms into its slot, too late: not run"),
        ),
        Err(RunError::Stopped { token, ran_for }) => (
            "stopped",
            format!(
                "stopped before the invocation's time ran out (token {token}, after {} ms); the tick stays open for a retry",
                ran_for.as_millis()
            ),
        ),
        Err(e) => ("error", format!("{}: {e}", e.kind())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(t: &Ticks) -> Value {
        serde_json::from_str(&t.state()).unwrap()
    }

    /// The runs' classes, oldest first.
    fn classes(t: &Ticks) -> Vec<String> {
        let s = state(t);
        let mut v: Vec<String> = s["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {} {}",
                    r["node"],
                    r["tick"].as_str().unwrap(),
                    r["class"].as_str().unwrap()
                )
            })
            .collect();
        v.reverse();
        v
    }

    #[test]
    fn a_tick_runs_once_whoever_it_is_delivered_to() {
        let mut t = Ticks::new(10_000, 3_000, 1, "safe", true).unwrap();
        t.deliver(1, 0, 0.0).unwrap();
        t.deliver(1, 1, 0.0).unwrap(); // at once: skipped behind the first
        t.advance(5_000.0).unwrap();
        t.deliver(1, 2, 0.0).unwrap(); // later: a duplicate
        t.advance(1_000.0).unwrap();
        assert_eq!(
            classes(&t),
            ["0 tick-1 ran", "1 tick-1 skipped", "2 tick-1 already-ran"]
        );
        let s = state(&t);
        assert_eq!(s["record"]["ticks"], json!(["tick-1"]));
        assert_eq!(s["record"]["released"], true);
        let job = &s["runs"][2]["job"];
        assert_eq!(
            job[1].as_u64().unwrap() - job[0].as_u64().unwrap(),
            3000,
            "{job}"
        );
        assert_eq!(s["violations"], json!([]));
    }

    #[test]
    fn an_overlapping_tick_is_skipped_and_the_next_one_runs() {
        let mut t = Ticks::new(10_000, 20_000, 2, "safe", true).unwrap();
        t.deliver(1, 0, 0.0).unwrap();
        t.advance(5_000.0).unwrap();
        t.deliver(2, 1, 0.0).unwrap(); // tick 1's job still runs (renewed)
        t.advance(30_000.0).unwrap();
        t.deliver(3, 1, 0.0).unwrap();
        t.advance(30_000.0).unwrap();
        assert_eq!(
            classes(&t),
            ["0 tick-1 ran", "1 tick-2 skipped", "1 tick-3 ran"]
        );
        assert_eq!(state(&t)["violations"], json!([]));
    }

    #[test]
    fn a_job_longer_than_the_invocation_is_stopped_and_the_tick_left_open() {
        let mut t = Ticks::new(10_000, 30_000, 3, "safe", true).unwrap();
        t.deliver(1, 0, 15_000.0).unwrap();
        t.advance(20_000.0).unwrap();
        let s = state(&t);
        assert_eq!(classes(&t), ["0 tick-1 stopped"], "{s}");
        let job = &s["runs"][0]["job"];
        assert!(job[1].as_u64().unwrap() < 15_000, "{job}");
        // The retry (no limit) runs it.
        t.deliver(1, 1, 0.0).unwrap();
        t.advance(40_000.0).unwrap();
        assert_eq!(classes(&t), ["0 tick-1 stopped", "1 tick-1 ran"]);
        assert_eq!(state(&t)["violations"], json!([]));
    }

    #[test]
    fn the_time_the_page_offers_is_enough_to_start() {
        let mut t = Ticks::new(10_000, 10_000, 4, "safe", true).unwrap();
        // A warm instance (its store check made at its first run).
        t.deliver(1, 0, 0.0).unwrap();
        t.advance(30_000.0).unwrap();
        t.deliver(2, 0, t.time_needed_ms()).unwrap();
        t.advance(30_000.0).unwrap();
        assert_eq!(classes(&t), ["0 tick-1 ran", "0 tick-2 stopped"]);
        // A cold one has no time for the store's check within it: refused,
        // nothing run.
        t.deliver(3, 1, t.time_needed_ms()).unwrap();
        t.advance(30_000.0).unwrap();
        let s = state(&t);
        assert!(classes(&t).contains(&"1 tick-3 error".to_string()), "{s}");
        let cold = &s["runs"][0];
        assert_eq!(cold["tick"], "tick-3", "{s}");
        assert!(cold["job"].is_null(), "{s}");
        assert!(
            cold["outcome"].as_str().unwrap().starts_with("NoTime"),
            "{s}"
        );
    }

    /// A store that ignores conditions: with the probe, every run is
    /// refused and nothing runs; without it, two instances run one tick at
    /// once, which the checker reports.
    #[test]
    fn an_unsafe_store_is_refused_by_the_probe() {
        for store in ["ignores-if-none-match", "ignores-conditions"] {
            let mut t = Ticks::new(10_000, 3_000, 5, store, true).unwrap();
            t.deliver(1, 0, 0.0).unwrap();
            t.deliver(1, 1, 0.0).unwrap();
            t.advance(10_000.0).unwrap();
            let s = state(&t);
            assert_eq!(classes(&t), ["0 tick-1 error", "1 tick-1 error"], "{s}");
            assert!(
                s["runs"][0]["outcome"]
                    .as_str()
                    .unwrap()
                    .contains("second_create_refused"),
                "{s}"
            );
            assert_eq!(s["violations"], json!([]));

            let mut t = Ticks::new(10_000, 3_000, 5, store, false).unwrap();
            t.deliver(1, 0, 0.0).unwrap();
            t.deliver(1, 1, 0.0).unwrap();
            t.advance(10_000.0).unwrap();
            let s = state(&t);
            assert_eq!(classes(&t), ["0 tick-1 ran", "1 tick-1 ran"], "{s}");
            let v = s["violations"].to_string();
            assert!(
                v.contains("two jobs at once") && v.contains("tick-1 ran twice"),
                "{v}"
            );
        }
        assert!(Ticks::new(10_000, 3_000, 5, "leaky", true).is_err());
    }

    #[test]
    fn bad_inputs_are_refused_and_change_nothing() {
        assert!(Ticks::new(10, 3_000, 1, "safe", true).is_err());
        assert!(Ticks::new(10_000, 1, 1, "safe", true).is_err());
        let mut t = Ticks::new(10_000, 3_000, 1, "safe", true).unwrap();
        let before = t.state();
        assert_eq!(
            t.deliver(1, 9, 0.0).unwrap_err(),
            "instance must be 0 to 7, not 9"
        );
        assert!(t.deliver(1, 0, f64::NAN).is_err());
        assert!(t.advance(-1.0).is_err());
        assert_eq!(t.state(), before);
    }
}
