//! The elector simulation: N nodes running the real [`Elector`] machines
//! against the in-memory store, through a network with latency and loss
//! and a store with injected faults, on a simulated clock, all driven by
//! one seed. The simulation tests and the browser demo both use this
//! module.
//!
//! The world is the simulators' shared one: each node's [`NodeClock`]
//! (a monotonic clock running at `1 + drift` times real time, a wall clock
//! offset), and the store fault model of [`crate::world::faults`]: the store's
//! replies carry an HTTP style `Date` (one-second resolution) from a front
//! end whose clock may be off by up to `front_end_skew`, and a request
//! meets a fault drawn from [`SimConfig::faults`] (lost request, write
//! applied but reply lost, write applied but answered 5xx, 409, 429/503,
//! slow reply, and the others of [`FaultKind`]) or one scripted
//! ([`SimConfig::scripted`]; the demo's buttons arm them with
//! [`World::arm`]). Node faults: crash (optionally followed by a restart),
//! stop-the-world pause, resignation, release, a pause before a write.
//!
//! The [`ElectorReport`] lists every safety and liveness [`ElectorViolation`] the checker
//! found; [`World::timeline`] has every call, reply, event and fault. Equal
//! [`SimConfig`]s give equal runs: a failing seed replays exactly.

use crate::world::clock::NodeClock;
use crate::world::faults::{self, Bucket, FaultKind, FaultRates, Request, Scripted};
use crate::world::queue::Queue;
use lease_core::protocol::CallId;
use lease_core::protocol::FenceOp;
use lease_core::variants::Variant;
use lease_core::verify;
use lease_core::{
    Elector, Entropy, Event, FenceOutcome, Fenced, LeaseConfig, Machine, Mono, Now, Output,
    Protocol, StoreOp, StoreReply, UnixMillis,
};
use std::fmt;
use std::time::Duration;

/// A node-level fault at a simulated instant.
#[derive(Clone, Debug, PartialEq)]
pub enum ElectorFault {
    /// The node's process dies; with `restart_after`, a fresh process with
    /// the same holder name starts that much later.
    Crash {
        /// Node index.
        node: usize,
        /// Real time of the crash (ms from the start).
        at_ms: u64,
        /// Delay before a new process starts, if one does.
        restart_after: Option<Duration>,
    },
    /// Stop-the-world pause (a long GC, a frozen VM).
    Pause {
        /// Node index.
        node: usize,
        /// Real time the pause starts (ms from the start).
        at_ms: u64,
        /// Its length.
        length: Duration,
    },
    /// The node resigns: the elector releases the lease and stops.
    Resign {
        /// Node index.
        node: usize,
        /// Real time (ms from the start).
        at_ms: u64,
    },
    /// The node gives the lease back (when it holds it) and campaigns again
    /// with a fresh elector once the release is done.
    Release {
        /// Node index.
        node: usize,
        /// Real time (ms from the start).
        at_ms: u64,
    },
    /// The next time the node sets out to write to the protected object,
    /// token in hand, it stops for `length` before sending anything: the
    /// classic GC pause between "am I the leader?" and the write.
    PauseBeforeWrite {
        /// Node index.
        node: usize,
        /// Real time the fault is armed (ms from the start).
        at_ms: u64,
        /// Length of the pause.
        length: Duration,
    },
}

impl ElectorFault {
    fn node_and_time(&self) -> (usize, u64) {
        match self {
            ElectorFault::Crash { node, at_ms, .. }
            | ElectorFault::Pause { node, at_ms, .. }
            | ElectorFault::PauseBeforeWrite { node, at_ms, .. }
            | ElectorFault::Resign { node, at_ms }
            | ElectorFault::Release { node, at_ms } => (*node, *at_ms),
        }
    }

    fn at(mut self, now: u64) -> ElectorFault {
        match &mut self {
            ElectorFault::Crash { at_ms, .. }
            | ElectorFault::Pause { at_ms, .. }
            | ElectorFault::PauseBeforeWrite { at_ms, .. }
            | ElectorFault::Resign { at_ms, .. }
            | ElectorFault::Release { at_ms, .. } => *at_ms = now,
        }
        self
    }
}

/// Everything that defines a run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// The seed of every random choice in the run.
    pub seed: u64,
    /// Number of nodes.
    pub nodes: usize,
    /// Lease ttl.
    pub ttl: Duration,
    /// Simulated duration.
    pub duration: Duration,
    /// Protocol variant every node runs.
    pub variant: Variant,
    /// The lease protocol every node runs. With one that gives no fencing
    /// token (the mutex) the token and fenced-write checks are skipped.
    pub protocol: Protocol,
    /// Node wall clocks are offset by up to this, either way.
    pub max_offset: Duration,
    /// Node clock rates differ from real time by up to this fraction.
    pub max_drift: f64,
    /// Store front-end clocks differ from real time by up to this.
    pub front_end_skew: Duration,
    /// One-way network latency range.
    pub latency: (Duration, Duration),
    /// Store faults drawn at random.
    pub faults: FaultRates,
    /// Store faults by window, and those armed by hand ([`World::arm`]).
    pub scripted: Vec<Scripted>,
    /// Node faults.
    pub node_faults: Vec<ElectorFault>,
    /// Keep a timeline (off for bulk runs).
    pub record_timeline: bool,
}

impl SimConfig {
    /// The lease key every node contends for.
    pub const LEASE_KEY: &'static str = "leases/sim";

    /// A quiet world: `nodes` nodes, no faults, 1-10 ms latency.
    pub fn quiet(seed: u64, nodes: usize, variant: Variant) -> Self {
        SimConfig {
            seed,
            nodes,
            ttl: Duration::from_secs(10),
            duration: Duration::from_secs(60),
            variant,
            protocol: Protocol::Cas,
            max_offset: Duration::ZERO,
            max_drift: 0.0,
            front_end_skew: Duration::ZERO,
            latency: (Duration::from_millis(1), Duration::from_millis(10)),
            faults: FaultRates::none(),
            scripted: Vec::new(),
            node_faults: Vec::new(),
            record_timeline: false,
        }
    }

    /// A random schedule from the fault mix, entirely determined by `seed`:
    /// 2-5 nodes, wall clocks off by up to an hour, drift and front-end
    /// skew within the safe protocol's bounds, store faults, crashes,
    /// restarts, pauses and resignations.
    pub fn random(seed: u64, variant: Variant) -> Self {
        let mut rng = Entropy::from_seed(seed as u128 ^ 0x5EED_0000_0000);
        let mut pick = |lo: f64, hi: f64| lo + (hi - lo) * rng.unit();
        let nodes = pick(2.0, 6.0) as usize;
        let ttl = Duration::from_secs(pick(5.0, 20.0) as u64);
        let duration = ttl * pick(4.0, 10.0) as u32;
        let p = pick(0.0, 0.08);
        let faults = FaultRates {
            drop_request: p * pick(0.0, 1.0),
            drop_reply: p * pick(0.0, 1.0),
            apply_5xx: p * pick(0.0, 1.0),
            conflict: p * pick(0.0, 1.0),
            throttle: p * pick(0.0, 1.0),
            slow_reply: p * pick(0.0, 1.0),
            slow_reply_max: Duration::from_millis(pick(0.0, 3000.0) as u64),
            late: p * pick(0.0, 0.5),
            late_max: ttl.mul_f64(pick(0.0, 2.0)),
            retry_after_max: Duration::from_secs(2),
        };
        let mut node_faults = Vec::new();
        for _ in 0..pick(0.0, 4.0) as usize {
            let node = pick(0.0, nodes as f64) as usize;
            let at_ms = pick(0.0, duration.as_millis() as f64 * 0.8) as u64;
            let fault = match pick(0.0, 3.0) as u32 {
                0 => ElectorFault::Crash {
                    node,
                    at_ms,
                    restart_after: (pick(0.0, 1.0) < 0.5).then(|| ttl.mul_f64(pick(0.1, 2.0))),
                },
                1 => ElectorFault::Pause {
                    node,
                    at_ms,
                    length: ttl.mul_f64(pick(0.05, 2.0)),
                },
                _ => ElectorFault::Resign { node, at_ms },
            };
            node_faults.push(fault);
        }
        SimConfig {
            seed,
            nodes,
            ttl,
            duration,
            variant,
            protocol: Protocol::Cas,
            max_offset: Duration::from_secs(3600),
            max_drift: 0.009,
            front_end_skew: Duration::from_millis(50),
            latency: (
                Duration::from_millis(1),
                Duration::from_millis(pick(2.0, 200.0) as u64),
            ),
            faults,
            scripted: Vec::new(),
            node_faults,
            record_timeline: false,
        }
    }

    /// The lease settings each node uses.
    pub fn lease_config(&self, node: usize) -> LeaseConfig {
        let mut cfg = LeaseConfig::new(Self::LEASE_KEY, format!("node-{node}"), self.ttl);
        cfg.variant = self.variant;
        cfg.protocol = self.protocol;
        cfg
    }
}

/// What happened, for the timeline.
#[derive(Clone, Debug, PartialEq)]
pub enum Happening {
    /// A node sent a store call.
    Call {
        /// Call id.
        id: CallId,
        /// The call.
        op: StoreOp,
    },
    /// A reply reached a node.
    Reply {
        /// Call id.
        id: CallId,
        /// Reply class.
        kind: String,
    },
    /// A node's machine reported an event.
    Event(Event),
    /// A fault took effect.
    Fault(String),
}

/// One timeline entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Real time, ms from the start.
    pub at_ms: u64,
    /// The node concerned (`None`: the store).
    pub node: Option<usize>,
    /// What happened.
    pub what: Happening,
}

/// A property the run broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElectorViolation {
    /// Two nodes believed they held a valid lease at the same real time.
    TwoHolders {
        /// First node and token.
        a: (usize, u64),
        /// Second node and token.
        b: (usize, u64),
        /// Real time (ms) from which both believed.
        at_ms: u64,
    },
    /// An acquisition's token was not greater than an earlier one's.
    TokenNotIncreasing {
        /// The earlier token.
        earlier: u64,
        /// The later token.
        later: u64,
        /// Real time (ms) of the later acquisition.
        at_ms: u64,
    },
    /// A write the store applied lowered the protected object's fence token.
    FenceTokenDecreased {
        /// Highest token written before.
        highest: u64,
        /// The lower token written.
        token: u64,
        /// Real time (ms).
        at_ms: u64,
    },
    /// After the holder crashed or resigned, no live node held the lease
    /// within the bound.
    NoTakeover {
        /// What happened to the holder, and when (ms).
        after: String,
        /// The bound that passed (ms).
        bound_ms: u64,
    },
}

impl fmt::Display for ElectorViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElectorViolation::TwoHolders { a, b, at_ms } => write!(
                f,
                "two holders at t={at_ms}ms: node {} (token {}) and node {} (token {})",
                a.0, a.1, b.0, b.1
            ),
            ElectorViolation::TokenNotIncreasing {
                earlier,
                later,
                at_ms,
            } => {
                write!(
                    f,
                    "token {later} acquired at t={at_ms}ms after token {earlier}"
                )
            }
            ElectorViolation::FenceTokenDecreased {
                highest,
                token,
                at_ms,
            } => {
                write!(
                    f,
                    "protected object went from token {highest} to {token} at t={at_ms}ms"
                )
            }
            ElectorViolation::NoTakeover { after, bound_ms } => {
                write!(f, "no takeover within {bound_ms}ms after {after}")
            }
        }
    }
}

/// The outcome of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ElectorReport {
    /// Everything the checker found (empty: the run was correct).
    pub violations: Vec<ElectorViolation>,
    /// Acquisitions: (real ms, node, token).
    pub acquisitions: Vec<(u64, usize, u64)>,
    /// Store calls made.
    pub store_calls: u64,
    /// Fenced writes to the protected object that were accepted.
    pub fenced_accepted: u64,
    /// Fenced writes refused because a newer holder had written (zombies).
    pub fenced_rejected: u64,
    /// Faults that took effect.
    pub faults: u64,
}

#[derive(Clone, Debug)]
enum Ev {
    Wake {
        node: usize,
        generation: u64,
    },
    Request {
        node: usize,
        incarnation: u32,
        id: CallId,
        op: StoreOp,
        fault: Option<FaultKind>,
    },
    Reply {
        node: usize,
        incarnation: u32,
        id: CallId,
        reply: StoreReply,
    },
    Fault(ElectorFault),
    Restart {
        node: usize,
    },
    Rejoin {
        node: usize,
    },
    Resume {
        node: usize,
    },
}

/// A belief interval: a node believed it held `token` over `[start, end)`
/// (real ms from the start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Belief {
    /// Node index.
    pub node: usize,
    /// The token it believed it held.
    pub token: u64,
    /// Start (real ms).
    pub start: u64,
    /// End (real ms): the deadline it believed in, or when it gave up.
    pub end: u64,
}

/// What the viewer of a running world sees of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    /// The process is running (not crashed, not resigned and finished).
    pub alive: bool,
    /// Paused until this real time (ms).
    pub paused_until: Option<u64>,
    /// The node resigned (it leaves once its release is done).
    pub resigned: bool,
    /// Its wall clock's offset from real time (ms).
    pub offset_ms: i64,
    /// What it believes it holds now.
    pub holding: Option<Belief>,
}

struct Node {
    elector: Elector,
    clock: NodeClock,
    alive: bool,
    resigned: bool,
    incarnation: u32,
    paused_until: Option<u64>,
    generation: u64,
    deferred: Vec<Ev>,
    belief: Option<Belief>,
    next_work: u64,
    fence: Option<FenceOp>,
    fence_ids: u64,
    /// Campaign again (a fresh elector) once the current one finishes.
    rejoin: bool,
    /// Pause this long when next setting out to write.
    pause_at_write: Option<Duration>,
}

impl Node {
    /// A running node that has not started yet.
    fn new(elector: Elector, clock: NodeClock) -> Node {
        Node {
            elector,
            clock,
            alive: true,
            resigned: false,
            incarnation: 0,
            paused_until: None,
            generation: 0,
            deferred: Vec::new(),
            belief: None,
            next_work: 0,
            fence: None,
            fence_ids: FENCE_IDS,
            rejoin: false,
            pause_at_write: None,
        }
    }
}

/// Call ids of a node's fenced writes start here, apart from the elector's.
const FENCE_IDS: u64 = 1 << 40;
/// Key of the protected object holders write to.
pub const PROTECTED_KEY: &str = "data/protected";

/// A simulated world (see the module docs).
pub struct World {
    cfg: SimConfig,
    rng: Entropy,
    now: u64,
    queue: Queue<Ev>,
    nodes: Vec<Node>,
    bucket: Bucket,
    /// Requests each of `cfg.scripted` has hit so far.
    scripted_used: Vec<u32>,
    /// The nodes' request timeout (they share their settings but the
    /// holder name), which a late call outlasts.
    request_timeout: Duration,
    timeline: Vec<Entry>,
    beliefs: Vec<Belief>,
    report: ElectorReport,
    protected_highest: u64,
    /// Holders gone, for liveness: (real ms, node, whether it released
    /// the lease rather than crashed).
    holder_gone: Vec<(u64, usize, bool)>,
}

impl World {
    /// A world ready to run.
    pub fn new(cfg: SimConfig) -> World {
        let mut rng = Entropy::from_seed(cfg.seed as u128);
        let bucket = Bucket::new(cfg.front_end_skew);
        let scripted_used = vec![0; cfg.scripted.len()];
        let mut nodes = Vec::with_capacity(cfg.nodes);
        let mut request_timeout = Duration::ZERO;
        for i in 0..cfg.nodes {
            let clock = NodeClock::draw(cfg.max_drift, cfg.max_offset, &mut rng);
            let lease = cfg.lease_config(i);
            request_timeout = lease.request_timeout;
            let elector = Elector::new(lease, rng.fork());
            nodes.push(Node::new(elector, clock));
        }
        let mut world = World {
            cfg,
            rng,
            now: 0,
            queue: Queue::new(),
            nodes,
            bucket,
            scripted_used,
            request_timeout,
            timeline: Vec::new(),
            beliefs: Vec::new(),
            report: ElectorReport::default(),
            protected_highest: 0,
            holder_gone: Vec::new(),
        };
        for node in 0..world.cfg.nodes {
            // Staggered starts, as processes really come up.
            let at = (world.rng.unit() * 1000.0) as u64;
            world.schedule(
                at,
                Ev::Wake {
                    node,
                    generation: 0,
                },
            );
        }
        for fault in world.cfg.node_faults.clone() {
            world.schedule(fault.node_and_time().1, Ev::Fault(fault));
        }
        world
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.queue.push(at, ev);
    }

    fn log(&mut self, node: Option<usize>, what: Happening) {
        if self.cfg.record_timeline {
            self.timeline.push(Entry {
                at_ms: self.now,
                node,
                what,
            });
        }
    }

    /// Node `i`'s clocks at real time `real`.
    fn local_now(&self, i: usize, real: u64) -> Now {
        self.nodes[i].clock.now(real)
    }

    /// The real time at which node `i`'s monotonic clock reads `mono`.
    fn real_of_local(&self, i: usize, mono: Mono) -> u64 {
        self.nodes[i].clock.real_between(Mono(0), mono)
    }

    /// Runs the whole schedule and checks it.
    pub fn run(mut self) -> (ElectorReport, Vec<Entry>) {
        self.run_until(self.cfg.duration.as_millis() as u64);
        self.finish()
    }

    /// Processes every event up to real time `until_ms`.
    pub fn run_until(&mut self, until_ms: u64) {
        while let Some((at, ev)) = self.queue.pop_until(until_ms) {
            self.now = self.now.max(at);
            self.handle(ev);
        }
        self.now = self.now.max(until_ms);
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Wake { node, generation } => {
                if self.nodes[node].generation == generation {
                    self.step(node);
                }
            }
            Ev::Request {
                node,
                incarnation,
                id,
                op,
                fault,
            } => self.arrive(node, incarnation, id, op, fault),
            Ev::Reply {
                node,
                incarnation,
                id,
                reply,
            } => {
                let n = &mut self.nodes[node];
                if !n.alive || n.incarnation != incarnation {
                    return;
                }
                if n.paused_until.is_some() {
                    n.deferred.push(Ev::Reply {
                        node,
                        incarnation,
                        id,
                        reply,
                    });
                    return;
                }
                self.log(
                    Some(node),
                    Happening::Reply {
                        id,
                        kind: lease_core::protocol::summarize(&reply.kind),
                    },
                );
                let now = self.local_now(node, self.now);
                match &mut self.nodes[node].fence {
                    Some(fence) if id.0 >= FENCE_IDS => fence.handle_reply(now, id, reply),
                    _ => self.nodes[node].elector.handle_reply(now, id, reply),
                }
                self.step(node);
            }
            Ev::Fault(fault) => self.fault(fault),
            Ev::Restart { node } => {
                self.report.faults += 1;
                self.log(Some(node), Happening::Fault("restarted".into()));
                self.fresh_elector(node);
            }
            Ev::Rejoin { node } => {
                self.log(Some(node), Happening::Fault("campaigning again".into()));
                self.fresh_elector(node);
            }
            Ev::Resume { node } => {
                self.nodes[node].paused_until = None;
                self.log(Some(node), Happening::Fault("resumed".into()));
                let deferred = std::mem::take(&mut self.nodes[node].deferred);
                self.step(node);
                for ev in deferred {
                    self.handle(ev);
                }
            }
        }
    }

    /// A new process for node `node`, with the same holder name.
    fn fresh_elector(&mut self, node: usize) {
        let cfg = self.cfg.lease_config(node);
        let entropy = self.rng.fork();
        let n = &mut self.nodes[node];
        n.elector = Elector::new(cfg, entropy);
        n.alive = true;
        n.resigned = false;
        n.incarnation += 1;
        n.generation += 1;
        n.deferred.clear();
        n.fence = None;
        self.step(node);
    }

    fn fault(&mut self, fault: ElectorFault) {
        self.report.faults += 1;
        match fault {
            ElectorFault::Crash {
                node,
                restart_after,
                ..
            } => {
                if !self.nodes[node].alive {
                    return;
                }
                if self.nodes[node].belief.is_some_and(|b| b.end > self.now) {
                    self.holder_gone.push((self.now, node, false));
                }
                self.close_belief(node, self.now);
                let n = &mut self.nodes[node];
                n.alive = false;
                n.paused_until = None;
                n.generation += 1;
                self.log(Some(node), Happening::Fault("crashed".into()));
                if let Some(after) = restart_after {
                    self.schedule(self.now + after.as_millis() as u64, Ev::Restart { node });
                }
            }
            ElectorFault::Pause { node, length, .. } => {
                self.pause(node, length, "");
            }
            ElectorFault::PauseBeforeWrite { node, length, .. } => {
                if self.nodes[node].alive {
                    self.nodes[node].pause_at_write = Some(length);
                    self.log(
                        Some(node),
                        Happening::Fault(format!(
                            "will pause {}ms before its next write",
                            length.as_millis() as u64
                        )),
                    );
                }
            }
            ElectorFault::Resign { node, .. } | ElectorFault::Release { node, .. } => {
                if !self.nodes[node].alive || self.nodes[node].resigned {
                    return;
                }
                let rejoin = matches!(fault, ElectorFault::Release { .. });
                self.nodes[node].resigned = !rejoin;
                self.nodes[node].rejoin = rejoin;
                let now = self.local_now(node, self.now);
                self.nodes[node].elector.stop(now);
                let what = if rejoin { "releasing" } else { "resigning" };
                self.log(Some(node), Happening::Fault(what.into()));
                self.step(node);
            }
        }
    }

    fn pause(&mut self, node: usize, length: Duration, why: &str) {
        if !self.nodes[node].alive || self.nodes[node].paused_until.is_some() {
            return;
        }
        let until = self.now + length.as_millis() as u64;
        self.nodes[node].paused_until = Some(until);
        self.log(
            Some(node),
            // As u64, like `until` above: `u128`'s Display is 1 KB of the demo.
            Happening::Fault(format!("paused for {}ms{why}", length.as_millis() as u64)),
        );
        self.schedule(until, Ev::Resume { node });
    }

    /// Sends node `node`'s call `op`: the fault it meets is decided now,
    /// and its arrival at the store scheduled (unless it is lost).
    fn send(&mut self, node: usize, id: CallId, op: StoreOp) {
        self.report.store_calls += 1;
        let request = Request {
            node,
            at_ms: self.now,
            write: op.is_write(),
        };
        let cfg = &self.cfg;
        let used = &mut self.scripted_used;
        let fault = faults::draw(&cfg.faults, &cfg.scripted, used, request, &mut self.rng);
        let (latency, timeout) = (self.cfg.latency, self.request_timeout);
        match faults::arrival(self.now, latency, fault.as_ref(), timeout, &mut self.rng) {
            None => self.fault_log(node, FaultKind::DropRequest.name()),
            Some(at) => {
                let incarnation = self.nodes[node].incarnation;
                self.schedule(
                    at,
                    Ev::Request {
                        node,
                        incarnation,
                        id,
                        op,
                        fault,
                    },
                );
            }
        }
    }

    /// A call reaches the store: it is served under its fault, and the
    /// reply, if any, sent back.
    fn arrive(
        &mut self,
        node: usize,
        incarnation: u32,
        id: CallId,
        op: StoreOp,
        fault: Option<FaultKind>,
    ) {
        let served = self
            .bucket
            .serve(self.now, &op, fault.as_ref(), &mut self.rng);
        if let Some(f) = &fault {
            self.fault_log(node, f.name());
        }
        if served.wrote {
            self.watch_protected(&op);
        }
        if let Some(reply) = served.reply {
            let latency = self.cfg.latency;
            let at = faults::reply_arrival(self.now, latency, fault.as_ref(), &mut self.rng);
            self.schedule(
                at,
                Ev::Reply {
                    node,
                    incarnation,
                    id,
                    reply,
                },
            );
        }
    }

    /// Every applied write to the protected object must keep or raise its
    /// fence token.
    fn watch_protected(&mut self, op: &StoreOp) {
        let StoreOp::Put { key, body, .. } = op else {
            return;
        };
        if key != PROTECTED_KEY {
            return;
        }
        let token = Fenced::decode(body).map(|f| f.token).unwrap_or(0);
        if !verify::not_lowered(self.protected_highest, token) {
            let at_ms = self.now;
            self.report
                .violations
                .push(ElectorViolation::FenceTokenDecreased {
                    highest: self.protected_highest,
                    token,
                    at_ms,
                });
        }
        self.protected_highest = self.protected_highest.max(token);
    }

    fn fault_log(&mut self, node: usize, what: &str) {
        self.report.faults += 1;
        self.log(Some(node), Happening::Fault(what.to_string()));
    }

    /// Drains node `i`'s outputs at the current real time: its elector,
    /// then any fenced write it has under way; one wake-up for the earlier
    /// of their timers.
    fn step(&mut self, i: usize) {
        if !self.nodes[i].alive || self.nodes[i].paused_until.is_some() {
            return;
        }
        let mut wake = self.drain(i, false);
        self.update_belief(i);
        if self.nodes[i].paused_until.is_some() {
            // Paused on its way to a write: the resume steps it again.
            return;
        }
        if self.nodes[i].fence.is_some() {
            wake = match (wake, self.drain(i, true)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        if let Some(at) = wake {
            let real = self.real_of_local(i, at).max(self.now);
            self.nodes[i].generation += 1;
            let generation = self.nodes[i].generation;
            self.schedule(
                real,
                Ev::Wake {
                    node: i,
                    generation,
                },
            );
        }
    }

    /// Polls one of node `i`'s machines until it waits; returns the wait.
    fn drain(&mut self, i: usize, fence: bool) -> Option<Mono> {
        loop {
            let now = self.local_now(i, self.now);
            let out = if fence {
                match self.nodes[i].fence.as_mut()?.poll(now) {
                    Output::Done(result) => {
                        self.nodes[i].fence = None;
                        match result {
                            Ok(FenceOutcome::Accepted { .. }) => self.report.fenced_accepted += 1,
                            Ok(FenceOutcome::Rejected { current }) => {
                                self.report.fenced_rejected += 1;
                                self.log(
                                    Some(i),
                                    Happening::Fault(format!(
                                        "fenced write refused: token {current} is newer"
                                    )),
                                );
                            }
                            Err(_) => {}
                        }
                        return None;
                    }
                    Output::Call(id, op) => Output::Call(id, op),
                    Output::Wait(at) => Output::Wait(at),
                    Output::Event(e) => Output::Event(e),
                }
            } else {
                self.nodes[i].elector.poll(now)
            };
            match out {
                Output::Call(id, op) => {
                    self.log(Some(i), Happening::Call { id, op: op.clone() });
                    self.send(i, id, op);
                }
                Output::Event(e) => {
                    if let Event::Acquired { token, .. } = e {
                        self.report.acquisitions.push((self.now, i, token));
                    }
                    if let Event::Released { .. } = e {
                        if self.nodes[i].belief.is_some() {
                            self.holder_gone.push((self.now, i, true));
                        }
                    }
                    self.log(Some(i), Happening::Event(e));
                }
                Output::Wait(at) => {
                    // A wait for a time already passed would spin forever.
                    assert!(
                        at > now.mono,
                        "node {i} waits for {}ms, already passed at {}ms",
                        at.0,
                        now.mono.0
                    );
                    return (at.0 < u64::MAX / 2).then_some(at);
                }
                Output::Done(_) => {
                    self.nodes[i].alive = false;
                    if std::mem::take(&mut self.nodes[i].rejoin) {
                        self.schedule(self.now, Ev::Rejoin { node: i });
                    }
                    return None;
                }
            }
        }
    }

    fn update_belief(&mut self, i: usize) {
        let now = self.local_now(i, self.now);
        let held = self.nodes[i]
            .elector
            .lease(now.mono)
            .map(|l| (l.token, l.valid_until));
        match (held, self.nodes[i].belief) {
            (Some((token, until)), Some(b)) if b.token == token => {
                let end = self.real_of_local(i, until);
                if let Some(b) = &mut self.nodes[i].belief {
                    b.end = end;
                }
            }
            (Some((token, until)), _) => {
                self.close_belief(i, self.now);
                let end = self.real_of_local(i, until);
                self.nodes[i].belief = Some(Belief {
                    node: i,
                    token,
                    start: self.now,
                    end,
                });
                self.nodes[i].next_work = self.now;
            }
            (None, Some(_)) => self.close_belief(i, self.now),
            (None, None) => {}
        }
        // A holder writes to the protected object while it believes it
        // holds, one fenced write at a time.
        if let Some(b) = self.nodes[i].belief {
            if self.now >= self.nodes[i].next_work
                && self.now < b.end
                && self.nodes[i].fence.is_none()
                && self.cfg.protocol.fences()
            {
                self.nodes[i].next_work = self.now + self.cfg.ttl.as_millis() as u64 / 5;
                let payload = format!("work of node {i} at {}ms", self.now).into_bytes();
                let entropy = self.rng.fork();
                let first_id = self.nodes[i].fence_ids;
                // A fenced write's deadline outlasts the pauses the
                // simulation injects, so a holder paused mid-write resumes
                // and meets the token check (a zombie) instead of giving
                // up at its operation's deadline.
                let mut cfg = self.cfg.lease_config(i);
                cfg.op_timeout = cfg.ttl * 3;
                let op = FenceOp::new(cfg, entropy, PROTECTED_KEY, b.token, payload)
                    .with_ids_from(first_id);
                self.nodes[i].fence_ids += 1_000;
                self.nodes[i].fence = Some(op);
                if let Some(length) = self.nodes[i].pause_at_write.take() {
                    self.pause(i, length, " on its way to a write, token in hand");
                }
            }
        }
    }

    fn close_belief(&mut self, i: usize, at: u64) {
        if let Some(mut b) = self.nodes[i].belief.take() {
            b.end = b.end.min(at);
            insert_in_order(&mut self.beliefs, b);
        }
    }

    fn finish(mut self) -> (ElectorReport, Vec<Entry>) {
        let end = self.now;
        for i in 0..self.nodes.len() {
            self.close_belief(i, end);
        }
        let beliefs = std::mem::take(&mut self.beliefs);
        let found = self.safety(&beliefs);
        self.report.violations.extend(found);
        self.check_liveness(&beliefs, end);
        (self.report, self.timeline)
    }

    /// Two holders at once and tokens that do not increase, in `beliefs`
    /// (sorted by start) and the acquisitions so far.
    fn safety(&self, beliefs: &[Belief]) -> Vec<ElectorViolation> {
        let mut found = Vec::new();
        // Its callers pass the beliefs in order of their starts.
        let spans: Vec<_> = beliefs.iter().map(|b| (b.start, b.end)).collect();
        for (a, b, from) in verify::overlaps_sorted(&spans) {
            let (a, b) = (&beliefs[a], &beliefs[b]);
            if a.node != b.node {
                found.push(ElectorViolation::TwoHolders {
                    a: (a.node, a.token),
                    b: (b.node, b.token),
                    at_ms: from,
                });
            }
        }
        if self.cfg.protocol.fences() {
            let acquisitions = &self.report.acquisitions;
            for (i, highest) in verify::tokens_not_increasing(acquisitions.iter().map(|a| a.2)) {
                found.push(ElectorViolation::TokenNotIncreasing {
                    earlier: highest,
                    later: acquisitions[i].2,
                    at_ms: acquisitions[i].0,
                });
            }
        }
        found
    }

    /// After a holder crashes, a live contender must hold the lease within
    /// ttl + poll interval + margins; after a release, within one poll.
    /// Checked only when some contender stayed alive and unfaulted in the
    /// window and the store injected no faults (faults may legitimately
    /// delay a takeover).
    fn check_liveness(&mut self, beliefs: &[Belief], end: u64) {
        let cfg = self.cfg.lease_config(0);
        let quiet_store = self.cfg.faults == FaultRates::none() && self.cfg.scripted.is_empty();
        let slack = cfg.poll_every.as_millis() as u64 / 10
            + 1000 // date resolution
            + cfg.drift_margin(cfg.ttl).as_millis() as u64
            + 4 * self.cfg.latency.1.as_millis() as u64
            + 1500; // staggered start and rounding
        for (at, gone, released) in self.holder_gone.clone() {
            let bound = if released {
                cfg.poll_every.as_millis() as u64 + slack
            } else {
                (cfg.ttl + cfg.poll_every).as_millis() as u64 + slack
            };
            if !quiet_store || at + bound > end {
                continue;
            }
            let window = at..at + bound;
            let faulted_in_window = |node: usize| {
                self.cfg.node_faults.iter().any(|f| match f {
                    ElectorFault::Crash { node: n, at_ms, .. }
                    | ElectorFault::Resign { node: n, at_ms }
                    | ElectorFault::Release { node: n, at_ms }
                    | ElectorFault::PauseBeforeWrite { node: n, at_ms, .. } => {
                        *n == node && *at_ms <= window.end
                    }
                    ElectorFault::Pause {
                        node: n,
                        at_ms,
                        length,
                    } => {
                        *n == node
                            && *at_ms <= window.end
                            && at_ms + length.as_millis() as u64 >= window.start
                    }
                })
            };
            if !(0..self.cfg.nodes).any(|n| n != gone && !faulted_in_window(n)) {
                continue;
            }
            if !beliefs
                .iter()
                .any(|b| b.node != gone && b.start > at && b.start <= window.end)
            {
                let what = if released { "released" } else { "crashed" };
                self.report.violations.push(ElectorViolation::NoTakeover {
                    after: format!("node {gone} {what} at {at}ms"),
                    bound_ms: bound,
                });
            }
        }
    }

    /// The timeline so far.
    pub fn timeline(&self) -> &[Entry] {
        &self.timeline
    }

    /// Real time now (ms from the start).
    pub fn now_ms(&self) -> u64 {
        self.now
    }

    /// The settings the world was made with, and the faults injected since.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// When the next pending event happens (real ms), if any.
    pub fn next_at(&self) -> Option<u64> {
        self.queue.next_at()
    }

    /// Processes the next pending event alone (a single step) and returns
    /// its time; `None` when nothing is pending.
    pub fn step_next(&mut self) -> Option<u64> {
        let (at, ev) = self.queue.pop()?;
        self.now = self.now.max(at);
        self.handle(ev);
        Some(at)
    }

    /// A node fault that takes effect now, whatever its `at_ms` says. It is
    /// recorded in [`World::config`]'s `node_faults` like a planned one.
    pub fn inject(&mut self, fault: ElectorFault) -> Result<(), SimError> {
        let node = fault.node_and_time().0;
        if node >= self.nodes.len() {
            return Err(SimError::NoSuchNode(node));
        }
        let fault = fault.at(self.now);
        self.cfg.node_faults.push(fault.clone());
        self.schedule(self.now, Ev::Fault(fault));
        Ok(())
    }

    /// Starts a fresh process for a node that crashed or resigned (a new
    /// elector with the same holder name); refused while it runs.
    pub fn restart(&mut self, node: usize) -> Result<(), SimError> {
        let n = self.nodes.get(node).ok_or(SimError::NoSuchNode(node))?;
        if n.alive {
            return Err(SimError::Running(node));
        }
        self.schedule(self.now, Ev::Restart { node });
        Ok(())
    }

    /// Arms `fault` for the next call any node sends that it can happen to
    /// (a write, for the faults that hit only writes). It is recorded in
    /// [`World::config`]'s `scripted` like a planned one.
    pub fn arm(&mut self, fault: FaultKind) {
        self.cfg.scripted.push(Scripted::next_call(self.now, fault));
        self.scripted_used.push(0);
    }

    /// Scripted faults (armed ones among them) not yet used up, oldest
    /// first.
    pub fn armed(&self) -> impl Iterator<Item = &FaultKind> {
        faults::pending(&self.cfg.scripted, &self.scripted_used).map(|s| &s.kind)
    }

    /// Starts one more node now (named `node-N`); returns its index.
    pub fn add_node(&mut self) -> usize {
        let i = self.nodes.len();
        self.cfg.nodes += 1;
        let lease = self.cfg.lease_config(i);
        self.request_timeout = lease.request_timeout;
        let elector = Elector::new(lease, self.rng.fork());
        self.nodes.push(Node::new(elector, NodeClock::default()));
        self.log(Some(i), Happening::Fault("started".into()));
        self.schedule(
            self.now,
            Ev::Wake {
                node: i,
                generation: 0,
            },
        );
        i
    }

    /// Steps node `node`'s wall clock to `offset_ms` from real time (its
    /// monotonic clock is untouched, as with a real clock step).
    pub fn set_clock_offset(&mut self, node: usize, offset_ms: i64) -> Result<(), SimError> {
        let n = self.nodes.get_mut(node).ok_or(SimError::NoSuchNode(node))?;
        n.clock.offset_ms = offset_ms;
        self.log(
            Some(node),
            Happening::Fault(format!("wall clock set {offset_ms:+}ms off")),
        );
        self.step(node);
        Ok(())
    }

    /// Node `node`'s wall clock at real time `at_ms`.
    pub fn wall_at(&self, node: usize, at_ms: u64) -> Option<UnixMillis> {
        self.nodes
            .get(node)
            .map(|_| self.local_now(node, at_ms).wall)
    }

    /// What each node is and believes now.
    pub fn nodes(&self) -> Vec<NodeView> {
        self.nodes
            .iter()
            .map(|n| NodeView {
                alive: n.alive,
                paused_until: n.paused_until,
                resigned: n.resigned,
                offset_ms: n.clock.offset_ms,
                holding: n.belief.filter(|b| b.end > self.now),
            })
            .collect()
    }

    /// Every belief so far, ended ones and current ones (cut at now), by
    /// start time.
    pub fn beliefs(&self) -> Vec<Belief> {
        let mut all = self.beliefs.clone();
        for n in &self.nodes {
            if let Some(mut b) = n.belief {
                b.end = b.end.min(self.now);
                insert_in_order(&mut all, b);
            }
        }
        all
    }

    /// The safety violations so far: two holders at once, tokens that did
    /// not increase, a fenced object whose token went down. (Liveness is
    /// judged only at the end of a run.)
    pub fn violations(&self) -> Vec<ElectorViolation> {
        let mut found = self.report.violations.clone();
        found.extend(self.safety(&self.beliefs()));
        found
    }

    /// The counters so far (violations are in [`World::violations`]).
    pub fn report(&self) -> &ElectorReport {
        &self.report
    }

    /// The store's object at `key`, if any.
    pub fn object(&self, key: &str) -> Option<(lease_core::Etag, Vec<u8>)> {
        self.bucket.store().get(key)
    }

    /// The store's current lease object, if any.
    /// For epochs, the newest epoch object.
    pub fn lease_object(&self) -> Option<(lease_core::Etag, Vec<u8>)> {
        match self.cfg.protocol {
            Protocol::Epochs => {
                let key = SimConfig::LEASE_KEY;
                let newest = self
                    .bucket
                    .store()
                    .keys(&format!("{key}/"))
                    .into_iter()
                    .filter(|k| lease_core::record::parse_epoch_key(key, k).is_some())
                    .max()?;
                self.bucket.store().get(&newest)
            }
            _ => self.bucket.store().get(SimConfig::LEASE_KEY),
        }
    }
}

/// Inserts `b` into `beliefs`, kept in order of (start, node), after any
/// equal; an empty belief is left out. Kept in order as they close, the
/// beliefs need no sort when they are judged (a sort was 4.5 KB of the
/// demo's wasm, which reads them many times a second).
fn insert_in_order(beliefs: &mut Vec<Belief>, b: Belief) {
    if b.end > b.start {
        let at = beliefs.partition_point(|a| (a.start, a.node) <= (b.start, b.node));
        beliefs.insert(at, b);
    }
}

/// A request the world cannot carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// There is no node with this index.
    NoSuchNode(usize),
    /// The node is running (so it cannot be restarted).
    Running(usize),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::NoSuchNode(i) => write!(f, "there is no node {i}"),
            SimError::Running(i) => write!(f, "node {i} is running"),
        }
    }
}

impl std::error::Error for SimError {}

/// Runs one schedule and checks it.
pub fn run(cfg: SimConfig) -> ElectorReport {
    World::new(cfg).run().0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_checker_flags_a_missing_takeover() {
        let cfg = SimConfig::quiet(1, 2, Variant::Safe);
        let mut world = World::new(cfg);
        world.holder_gone.push((1_000, 0, false));
        // Node 1 only takes over long after ttl + poll + margins.
        let late = Belief {
            node: 1,
            token: 2,
            start: 40_000,
            end: 50_000,
        };
        world.check_liveness(&[late], 60_000);
        assert!(
            matches!(
                world.report.violations.as_slice(),
                [ElectorViolation::NoTakeover { .. }]
            ),
            "{:?}",
            world.report.violations
        );
        // A takeover in time satisfies it.
        let mut world = World::new(SimConfig::quiet(1, 2, Variant::Safe));
        world.holder_gone.push((1_000, 0, false));
        world.check_liveness(
            &[Belief {
                node: 1,
                token: 2,
                start: 12_000,
                end: 20_000,
            }],
            60_000,
        );
        assert!(world.report.violations.is_empty());
    }
}
