//! The executor: a world that spawns the processes, polls them when
//! something for them happens, and injects the node faults.

use super::checker::check;
use super::config::{ClientKind, ClientsConfig, NodeFault, SuspendClock, LEASE_KEY};
use super::env::Env;
use super::handles::CURRENT;
use super::pool::pool_run;
use super::processes::{
    cli_script, elector_proc, lease_run, operator, service_proc, singleton_tick, Delivery,
};
use super::report::{Counts, Report};
use super::session::session_proc;
use super::shard::shard_proc;
use super::simple::simple_proc;
use super::state::{Ev, Inner, NodeState, ProcState, Shared};
use crate::world::clock::{NodeClock, EPOCH};
use crate::world::faults::Bucket;
use crate::world::queue::Queue;
use core::cell::RefCell;
use core::future::Future;
use core::pin::Pin;
use core::task::Context;
use lease_core::schedule::Schedule;
use lease_core::tick::Slots;
use lease_core::{Entropy, StoreOp};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

/// A process's waker: a wake marks the process to be polled again at the
/// current instant (a `Leadership` handle wakes the work waiting on it
/// when the campaign changes the term).
struct PidWaker {
    pub(super) pid: usize,
    pub(super) woken: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl std::task::Wake for PidWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(self.pid);
    }
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// A world running the product's clients (see the module docs).
pub struct ClientWorld {
    pub(super) sh: Shared,
    tasks: Vec<Option<Task>>,
    /// Processes their wakers woke since the executor last looked.
    pub(super) wakes: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl ClientWorld {
    /// A world ready to run `cfg`.
    pub fn new(cfg: ClientsConfig) -> ClientWorld {
        let cfg = Rc::new(cfg);
        let mut rng = Entropy::from_seed(cfg.seed as u128);
        let bucket = Bucket::new(cfg.front_end_skew)
            .with_page_size(cfg.page_size)
            .with_spacing(cfg.spacing);
        for i in 0..cfg.junk_keys {
            bucket.store().apply(&StoreOp::Put {
                key: format!("{LEASE_KEY}/0-other-{i:02}"),
                body: b"another application's object".to_vec(),
                condition: lease_core::store::PutCondition::IfAbsent,
            });
        }
        let nodes = (0..cfg.clients.len())
            .map(|i| NodeState {
                clock: NodeClock::draw(cfg.max_drift, cfg.max_offset, &mut rng),
                lags: Vec::new(),
                lagged_since: None,
                suspended_until: 0,
                kind: cfg.clients[i],
                protocol: cfg.lease_config(i).protocol,
                spawned: 0,
                main: None,
                claims: Vec::new(),
            })
            .collect();
        let inner = Inner {
            #[cfg(feature = "trace")]
            traces: Vec::new(),
            scripted_uses: vec![0; cfg.scripted.len()],
            cfg: cfg.clone(),
            now: 0,
            step: 0,
            rng,
            queue: Queue::new(),
            bucket,
            nodes,
            procs: Vec::new(),
            owners: 0,
            calls: BTreeMap::new(),
            timers: BTreeMap::new(),
            next_id: 0,
            woken: BTreeSet::new(),
            keys: cfg.lease_keys(),
            hists: cfg
                .lease_keys()
                .iter()
                .map(|_| [Vec::new(), Vec::new()])
                .collect(),
            epoch_by_operator: BTreeMap::new(),
            sessions: BTreeMap::new(),
            writes: BTreeMap::new(),
            ops: Vec::new(),
            jobs: Vec::new(),
            ticks: 0,
            tick_reports: Vec::new(),
            samples: Vec::new(),
            fence_highest: BTreeMap::new(),
            fault_times: Vec::new(),
            violations: Vec::new(),
            counts: Counts::default(),
            timeline: Vec::new(),
            operators: BTreeSet::new(),
        };
        let sh = Rc::new(RefCell::new(inner));
        {
            let mut w = sh.borrow_mut();
            for node in 0..cfg.clients.len() {
                let random = (w.rng.unit() * 1000.0) as u64;
                let at = cfg.start_at.get(node).copied().unwrap_or(random);
                let ev = match cfg.clients[node] {
                    ClientKind::Singleton => Ev::Tick { node },
                    ClientKind::Cron => {
                        // The first slot its clock comes to.
                        let every = cfg.cron_every.as_millis().max(1) as u64;
                        let wall = EPOCH.0 as i64 + w.nodes[node].clock.offset_ms;
                        let slot = (wall.max(0) as u64).div_ceil(every);
                        let at = cron_fire_at(&mut w, node, slot);
                        w.schedule(at, Ev::Cron { node, slot });
                        continue;
                    }
                    _ => Ev::Run { node },
                };
                w.schedule(at, ev);
            }
            for f in &cfg.node_faults {
                w.schedule(f.at_ms(), Ev::NodeFault(f.clone()));
            }
        }
        ClientWorld {
            sh,
            tasks: Vec::new(),
            wakes: Arc::default(),
        }
    }

    /// When a long-lived process (elector, service, session, shard member)
    /// resigns or leaves: at a random time in half the worlds that resign, or
    /// `resign_after`.
    fn stop_after(cfg: &ClientsConfig, rng: &mut Entropy) -> Option<std::time::Duration> {
        (cfg.resign && rng.unit() < 0.5)
            .then(|| cfg.duration.mul_f64(rng.unit()))
            .or(cfg.resign_after)
    }

    /// Starts a process on `node`; a singleton's runs `tick` (its id and
    /// retries so far), or a new tick.
    fn spawn(&mut self, node: usize, tick: Option<(u64, u32)>) -> usize {
        let mut w = self.sh.borrow_mut();
        let cfg = w.cfg.clone();
        let kind = w.nodes[node].kind;
        let k = w.nodes[node].spawned;
        w.nodes[node].spawned += 1;
        let entropy = if cfg.same_entropy && node < 2 {
            Entropy::from_seed((cfg.seed as u128) << 32 | k as u128)
        } else {
            w.rng.fork()
        };
        let owner = w.new_owner();
        if kind == ClientKind::Operator {
            w.operators.insert(owner);
        }
        let pid = w.procs.len();
        let now = w.now;
        w.procs.push(ProcState {
            node,
            owner,
            alive: true,
            paused_until: None,
            pauses: Vec::new(),
            entropy: Some(entropy),
            op: None,
            lease_op: None,
            retry_after_max: 0,
            started: now,
            ended: None,
            crashed: false,
        });
        w.counts.processes += 1;
        let mut rng = w.rng.fork();
        let env = Env {
            sh: self.sh.clone(),
            pid,
            node,
            cfg: cfg.lease_config(node),
            lease: 0,
        };
        let len = cfg.job_max.mul_f64(rng.unit());
        let probe = cfg.probe;
        let task: Task = match kind {
            ClientKind::Singleton => {
                let (tick, retry) = tick.unwrap_or_else(|| {
                    w.ticks += 1;
                    (w.ticks, 0)
                });
                Box::pin(singleton_tick(env, len, probe, Delivery { tick, retry }))
            }
            // `lease run --every` on a cron host.
            ClientKind::Cron => {
                let slots = Slots::new("sim", Schedule::Every(cfg.cron_every))
                    .expect("a valid name")
                    .late_after(cfg.cron_late);
                Box::pin(lease_run(env, len, probe, Some(Box::new(slots))))
            }
            ClientKind::Hold => Box::pin(lease_run(env, len, probe, None)),
            ClientKind::Pool => Box::pin(pool_run(env, len, probe)),
            ClientKind::Cli => Box::pin(cli_script(env, rng)),
            ClientKind::Operator => Box::pin(operator(env, rng)),
            ClientKind::Elector => {
                let stop = Self::stop_after(&cfg, &mut rng);
                let job_max = cfg.ttl;
                Box::pin(elector_proc(env, rng, stop, job_max))
            }
            ClientKind::Service => {
                let stop = Self::stop_after(&cfg, &mut rng);
                let job_max = cfg.ttl;
                Box::pin(service_proc(env, rng, stop, job_max))
            }
            ClientKind::Shard => {
                let stop = Self::stop_after(&cfg, &mut rng);
                Box::pin(shard_proc(env, rng, stop))
            }
            ClientKind::Session => {
                let stop = Self::stop_after(&cfg, &mut rng);
                let job_max = cfg.ttl;
                Box::pin(session_proc(env, rng, stop, job_max))
            }
            ClientKind::Simple => Box::pin(simple_proc(env, rng)),
        };
        if kind.long_lived() {
            w.nodes[node].main = Some(pid);
        }
        w.log(|| format!("pid {pid} starts on node {node} ({kind:?})"));
        w.woken.insert(pid);
        let suspended = w.nodes[node].suspended_until.saturating_sub(now);
        if suspended > 0 {
            pause_proc(&mut w, pid, suspended);
        }
        drop(w);
        self.tasks.push(Some(task));
        pid
    }

    fn poll(&mut self, pid: usize) {
        let Some(task) = self.tasks[pid].as_mut() else {
            return;
        };
        let entropy = self.sh.borrow_mut().procs[pid].entropy.take();
        CURRENT.with(|c| *c.borrow_mut() = entropy);
        let waker = std::task::Waker::from(Arc::new(PidWaker {
            pid,
            woken: self.wakes.clone(),
        }));
        let mut cx = Context::from_waker(&waker);
        let ready = task.as_mut().poll(&mut cx).is_ready();
        let entropy = CURRENT.with(|c| c.borrow_mut().take());
        let (crash, pause) = {
            let mut w = self.sh.borrow_mut();
            w.procs[pid].entropy = entropy;
            let (pc, pp) = (w.cfg.poll_crash, w.cfg.poll_pause);
            (!ready && w.chance(pc), !ready && w.chance(pp))
        };
        if ready {
            self.finish(pid, false);
        } else if crash {
            self.sh.borrow_mut().fault(Some(pid), "crash at a poll");
            self.finish(pid, true);
        } else if pause {
            let mut w = self.sh.borrow_mut();
            let length = w.cfg.ttl.mul_f64(2.0 * w.rng.unit()).as_millis() as u64;
            w.fault(Some(pid), "pause at a poll");
            pause_proc(&mut w, pid, length);
        }
    }

    /// Ends process `pid` (dropping its future outside any borrow).
    fn finish(&mut self, pid: usize, crashed: bool) {
        let task = self.tasks[pid].take();
        drop(task);
        let mut w = self.sh.borrow_mut();
        let now = w.now;
        let p = &mut w.procs[pid];
        p.alive = false;
        p.ended = Some(now);
        p.crashed = crashed;
        if let Some(until) = p.paused_until.take() {
            // Cut the inert window at the end.
            if let Some(last) = p.pauses.last_mut() {
                last.1 = last.1.min(until).min(now);
            }
        }
        let node = p.node;
        if w.nodes[node].main == Some(pid) {
            w.nodes[node].main = None;
        }
        w.log(|| format!("pid {pid} ends (crashed: {crashed})"));
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive {
                call,
                pid,
                op,
                fault,
            } => self.sh.borrow_mut().arrive(call, pid, op, fault),
            Ev::Reply { call, reply } => {
                let mut w = self.sh.borrow_mut();
                // A reply to a dropped call (its sender crashed or moved on)
                // is lost.
                if let Some(slot) = w.calls.get_mut(&call) {
                    slot.reply = Some(reply);
                    let pid = slot.pid;
                    w.wake(pid);
                }
            }
            Ev::Timer { timer } => {
                let mut w = self.sh.borrow_mut();
                if let Some((pid, fired)) = w.timers.get_mut(&timer) {
                    *fired = true;
                    let pid = *pid;
                    w.wake(pid);
                }
            }
            Ev::Tick { node } => {
                let (lo, hi, dup, dur) = {
                    let w = self.sh.borrow();
                    (
                        w.cfg.tick_every.0.as_millis() as f64,
                        w.cfg.tick_every.1.as_millis() as f64,
                        w.cfg.duplicate_tick,
                        w.cfg.ttl.as_millis() as f64,
                    )
                };
                let tick = {
                    let mut w = self.sh.borrow_mut();
                    w.ticks += 1;
                    w.ticks
                };
                self.spawn(node, Some((tick, 0)));
                let mut w = self.sh.borrow_mut();
                if w.chance(dup) {
                    // At-least-once delivery: the same tick again, maybe
                    // while the first still runs; every other one to the
                    // next singleton's environment.
                    let later = (w.rng.unit() * 2.0 * dur) as u64;
                    let at = w.now + later;
                    w.fault(None, "tick delivered twice");
                    let n = w.nodes.len();
                    let to = (1..n)
                        .map(|i| (node + i) % n)
                        .find(|&o| w.nodes[o].kind == ClientKind::Singleton)
                        .filter(|_| tick % 2 == 1)
                        .unwrap_or(node);
                    w.schedule(
                        at,
                        Ev::Deliver {
                            node: to,
                            tick,
                            retry: 0,
                        },
                    );
                }
                let next = w.now + (lo + (hi - lo) * w.rng.unit()) as u64;
                w.schedule(next, Ev::Tick { node });
            }
            Ev::Cron { node, slot } => {
                self.spawn(node, None);
                let mut w = self.sh.borrow_mut();
                let at = cron_fire_at(&mut w, node, slot + 1);
                w.schedule(
                    at,
                    Ev::Cron {
                        node,
                        slot: slot + 1,
                    },
                );
            }
            Ev::Deliver { node, tick, retry } => {
                self.spawn(node, Some((tick, retry)));
            }
            Ev::Run { node } => {
                let kind = self.sh.borrow().nodes[node].kind;
                self.spawn(node, None);
                if matches!(kind, ClientKind::Hold | ClientKind::Pool) {
                    let mut w = self.sh.borrow_mut();
                    let (lo, hi) = (
                        w.cfg.tick_every.0.as_millis() as f64,
                        w.cfg.tick_every.1.as_millis() as f64,
                    );
                    let next = w.now + (lo + (hi - lo) * w.rng.unit()) as u64;
                    w.schedule(next, Ev::Run { node });
                }
            }
            Ev::NodeFault(f) => self.node_fault(f),
            Ev::Resume { pid } => {
                let mut w = self.sh.borrow_mut();
                // A suspend may have made the inert window longer.
                let later = w.procs[pid].paused_until.is_some_and(|u| u > w.now);
                if w.procs[pid].alive && !later {
                    w.procs[pid].paused_until = None;
                    w.wake(pid);
                    w.log(|| format!("pid {pid} resumes"));
                }
            }
        }
    }

    fn node_fault(&mut self, f: NodeFault) {
        let procs = |w: &Inner, node: usize| -> Vec<usize> {
            (0..w.procs.len())
                .filter(|&p| w.procs[p].node == node && w.procs[p].alive)
                .collect()
        };
        match f {
            NodeFault::Crash {
                node,
                restart_after,
                ..
            } => {
                let (pids, main_kind) = {
                    let mut w = self.sh.borrow_mut();
                    w.fault(None, "node crash");
                    let kind = w.nodes[node].kind;
                    (procs(&w, node), kind)
                };
                let had_main = self.sh.borrow().nodes[node].main.is_some();
                for pid in pids {
                    self.finish(pid, true);
                }
                if let (true, Some(after), true) = (had_main, restart_after, main_kind.long_lived())
                {
                    let mut w = self.sh.borrow_mut();
                    let at = w.now + after.as_millis() as u64;
                    w.schedule(at, Ev::Run { node });
                }
            }
            NodeFault::Pause { node, length, .. }
            | NodeFault::MonoStall {
                node,
                length,
                catch_up: true,
                ..
            } => {
                let mut w = self.sh.borrow_mut();
                w.fault(None, "node pause");
                for pid in procs(&w, node) {
                    pause_proc(&mut w, pid, length.as_millis() as u64);
                }
            }
            NodeFault::MonoStall {
                node,
                length,
                catch_up: false,
                ..
            } => {
                let mut w = self.sh.borrow_mut();
                w.fault(None, "monotonic clock lags");
                let now = w.now;
                w.nodes[node]
                    .lags
                    .push((now, now + length.as_millis() as u64));
                w.nodes[node].lagged_since.get_or_insert(now);
            }
            NodeFault::Suspend { node, length, .. } => {
                let mut w = self.sh.borrow_mut();
                w.fault(None, "node suspend");
                let (now, length) = (w.now, length.as_millis() as u64);
                let until = now + length;
                w.nodes[node].suspended_until = w.nodes[node].suspended_until.max(until);
                for pid in procs(&w, node) {
                    suspend_proc(&mut w, pid, until);
                }
                // Not `lagged_since`: a clock that stops in a suspend is a
                // defect of the product's clock, not outside the
                // documented assumptions, and its violations count.
                if w.cfg.suspend_clock == SuspendClock::StopsInSuspend {
                    // Time already lost (an overlapping suspend) is not
                    // lost twice.
                    let lags = &mut w.nodes[node].lags;
                    let from = lags.iter().map(|l| l.1).max().unwrap_or(0).max(now);
                    if until > from {
                        lags.push((from, until));
                    }
                }
                // The resume is a disturbance too: liveness and quiet
                // acquires are judged from a settling time after it.
                w.fault_times.push(until);
            }
            NodeFault::WallStep { node, by_ms, .. } => {
                let mut w = self.sh.borrow_mut();
                w.fault(None, "wall clock step");
                w.nodes[node].clock.offset_ms += by_ms;
            }
        }
    }

    /// Runs the whole schedule and checks it.
    pub fn run(mut self) -> Report {
        let end = self.sh.borrow().cfg.duration.as_millis() as u64;
        loop {
            loop {
                let next = {
                    let mut w = self.sh.borrow_mut();
                    let woken = std::mem::take(
                        &mut *self
                            .wakes
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    );
                    w.woken.extend(woken);
                    let ready: Vec<usize> = w
                        .woken
                        .iter()
                        .copied()
                        .filter(|&p| w.procs[p].alive && w.procs[p].paused_until.is_none())
                        .collect();
                    for p in &ready {
                        w.woken.remove(p);
                    }
                    // Woken dead processes are forgotten.
                    let dead: Vec<usize> = w
                        .woken
                        .iter()
                        .copied()
                        .filter(|&p| !w.procs[p].alive)
                        .collect();
                    for p in dead {
                        w.woken.remove(&p);
                    }
                    ready
                };
                if next.is_empty() {
                    break;
                }
                for pid in next {
                    self.poll(pid);
                }
            }
            let ev = {
                let mut w = self.sh.borrow_mut();
                let Some((at, ev)) = w.queue.pop_until(end) else {
                    break;
                };
                w.now = w.now.max(at);
                w.step += 1;
                ev
            };
            self.handle(ev);
        }
        // The end of the run: every process stops here.
        self.sh.borrow_mut().now = end;
        for pid in 0..self.tasks.len() {
            if self.tasks[pid].is_some() {
                self.finish(pid, false);
            }
        }
        let sh = self.sh.clone();
        drop(self);
        let mut w = sh.borrow_mut();
        check(&mut w, end)
    }
}

/// Runs one schedule and checks it.
pub fn run(cfg: ClientsConfig) -> Report {
    ClientWorld::new(cfg).run()
}

fn pause_proc(w: &mut Inner, pid: usize, length: u64) {
    if !w.procs[pid].alive || w.procs[pid].paused_until.is_some() {
        return;
    }
    let until = w.now + length;
    w.procs[pid].paused_until = Some(until);
    let now = w.now;
    w.procs[pid].pauses.push((now, until));
    w.log(|| format!("pid {pid} paused until {until}ms"));
    w.schedule(until, Ev::Resume { pid });
}

/// Makes `pid` inert until `until`, lengthening a pause under way.
fn suspend_proc(w: &mut Inner, pid: usize, until: u64) {
    match w.procs[pid].paused_until {
        None => pause_proc(w, pid, until - w.now),
        Some(u) if u < until => {
            w.procs[pid].paused_until = Some(until);
            if let Some(last) = w.procs[pid].pauses.last_mut() {
                last.1 = until;
            }
            w.log(|| format!("pid {pid} suspended until {until}ms"));
            w.schedule(until, Ev::Resume { pid });
        }
        Some(_) => {}
    }
}

/// When a cron host fires for `slot` (Unix ms / `cron_every`): when its
/// wall clock (offset from the store's) comes to the slot's start, late by
/// up to 60 % of a slot.
fn cron_fire_at(w: &mut Inner, node: usize, slot: u64) -> u64 {
    let every = w.cfg.cron_every.as_millis().max(1) as u64;
    let at = (slot * every) as i64 - EPOCH.0 as i64 - w.nodes[node].clock.offset_ms;
    let late = (w.rng.unit() * 0.6 * every as f64) as i64;
    (at + late).max(w.now as i64) as u64
}
