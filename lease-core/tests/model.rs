//! Exhaustive model checking of the real protocol machines with `stateright`.
//!
//! The model runs the crate's own [`Elector`]s (and through them every
//! `LeaseOp` branch) for 2 or 3 nodes against the real conditional semantics
//! of [`MemStore::apply`], over a network that may lose, duplicate, delay and
//! reorder messages, a store that may fail or refuse requests, and processes
//! that may pause, resign, die and be restarted. Nothing of the protocol is
//! re-implemented here: the model only decides *which* input each machine
//! gets *when*, and checks, in every reachable state:
//!
//! 1. at no instant do two nodes both believe they hold a valid lease
//!    (`Elector::lease(local_now).is_some()` for two nodes at one global time);
//! 2. fencing tokens strictly increase from one acquisition to the next
//!    (each `Event::Acquired { token }` is above every earlier one);
//! 3. the token in the store's record never decreases;
//! 4. **no self-loss**: a node never reports `Event::Lost` for a reason other
//!    than expiry (`TakenBy`, `Vanished`, `Overwritten`) while the store's
//!    record is one of its own: its holder name, a session this process
//!    wrote, not released. (`Lost { reason: Expired }` is the local deadline
//!    passing without a confirmed renewal; the record may well still be the
//!    node's then, and that is right.)
//! 5. **never locked out by its own record**: a node's acquire never ends
//!    `Busy` on a live record of its own (same holder name, a session this
//!    process wrote, not released): such a record must be taken over (the
//!    elector's `Claim`s), not waited out for a ttl. A restarted process is a
//!    new process: waiting behind its predecessor's record is right.
//! 6. **liveness, bounded**: once nothing has disrupted the system for a
//!    bound derived from the settings, some live node holds the lease and the
//!    store's record is that lease's (same holder and session, not
//!    released), unless no node is a candidate (alive, not resigning, not
//!    finished) or the horizon is reached.
//!
//! and that the lease is acquired at all and changes hands (and, when the
//! run has them, that a resignation releases it and that a restarted
//! process acquires it), so that the checks are not vacuous.
//!
//! # Liveness as a safety property
//!
//! Each state carries `calm_at`: the global time from which some node must
//! hold. Every disruption at time `t` raises it to at least `t + bound`:
//!
//! - `settle` = `request_timeout + max(backoff_max, longest Retry-After
//!   under op_timeout) + 1.1 poll_every + margin` (+ 8 `max_delay`): a node
//!   waiting on a lost reply learns of it within one request timeout, its
//!   retry waits at most one backoff or Retry-After (a longer Retry-After
//!   ends the operation at once), a failed campaign is tried again within a
//!   jittered poll interval, and a record of its own it is not sure of is
//!   taken over through its claims. 2.7 s with the model's settings (ttl
//!   3 s, poll 1 s, request timeout 0.5 s, Retry-After 1 s or 5 s).
//!   For every fault on a live candidate's message (loss, duplicate, 500,
//!   hold-back and late delivery, 429, 409), a pause, a restart, and a
//!   call the node gives up on (its request timeout, or the lease's
//!   deadline) while its request or reply is still within its latency:
//!   with `latency_step`, a round trip can take the whole request timeout,
//!   which the node cannot tell from a lost reply.
//!   At the start, before anything went wrong, the first acquisition has
//!   `8 max_delay` for its round trips (0 without latency).
//! - `orphan` = `settle + ttl + date_resolution` (+ `max_delay`): 6.7 s.
//!   When the disruption may leave a live record that no live node will
//!   take over (it has to expire on the store's clock, seen through dates
//!   truncated to the second): a crash; a fault on a message of a dead or
//!   resigning node; a resignation. (A contender's acquire in flight may
//!   still win, and nothing gives that back; a renewal in flight may end in
//!   losing the lease by expiry, and then nothing is released; a release
//!   may spend its retry budget on the 412 a late renewal of its own
//!   causes. Each was a counterexample with the shorter bound.)
//!
//! The property is checked in *settled* states (no timer due, no message
//! due now: what happens at this instant has happened). The bounds are
//! derived, not measured, and not loose: the longest stall the default runs
//! see after a 429 and a loss is about 1.4 s (`stall_is_caught_with_a_bound_
//! too_short`).
//!
//! # What the model found in the core
//!
//! Check 5 failed for the safe core in three ways, each a write of the
//! node's that could be live on the store while its elector kept no claim
//! on it: the node (and everyone else) then waited out its own record, up
//! to a ttl and a date's resolution. Safety was not affected. Each is fixed
//! in the core, and each configuration is now a default test that passes
//! (and failed, with the fix undone, at check 5):
//!
//! - **A**: a PUT sent twice by the transport: one copy applies, the other
//!   is answered 412 (or 404, 409, 429), which the engine took as settled;
//!   the re-read that should decide is answered 500, the retry budget is
//!   spent, and the acquire gave up with no claim. Now a refused write is
//!   settled only by a read of its key after the refusal, and an error
//!   before one hands it on as a claim (`Write::refused_unread` in the
//!   engine). (`finding_a_a_refused_write_whose_copy_applied`: 1 duplicate
//!   + 1 500.)
//! - **B**: a create applies and is answered, then the acquire ends without
//!   the lease (its LIST check throttled past the operation's deadline) and
//!   left the record live with no claim. Already fixed on the way by the
//!   core's "pending win": such a create is given back (a conditional
//!   delete) and handed on as a claim. (`finding_b_a_won_create_abandoned`:
//!   1 429.)
//! - **C**: a create held in the network past its timeout; the re-read
//!   finds another node's new record and the acquire ends `Busy`. That
//!   record is then given back (its LIST check failed: a delete), and the
//!   late create lands on the free key. `Busy` now carries a write of the
//!   acquire still open as a claim (`Busy::unsettled`), which the elector
//!   and the singleton keep. (`finding_c_a_late_create_after_a_give_back`:
//!   1 loss + 1 500 + 1 late.)
//!
//! # How the machines live inside model states
//!
//! A model checker must copy, hash and compare states, but the machines are
//! neither `Clone` nor `Hash` (and the library is not changed for the
//! model). A node's *identity* in the state is a 128-bit fingerprint of its
//! machine's `Debug` output, which prints every field of every nested
//! struct (no `HashMap`s inside, so it is canonical and deterministic): two
//! machines with equal `Debug` output behave identically from then on,
//! whatever inputs brought them there. The elector's phase and the call its
//! operation waits for (private fields) are read from the same text. The
//! machine is deterministic, so it can be rebuilt from `Elector::new` and a
//! list of inputs (poll / reply / stop, each with its local time): the model
//! records, for each machine state, how it was first reached (a fresh
//! machine's seed, or the state before and the input), and replays that.
//! Because the same node state recurs in many global states, each (node
//! state, input) transition is computed once and memoised; the first input
//! to a machine state takes the machine that transition produced instead
//! of replaying. `verify` runs also keep each state's own input history,
//! replay it at every state and compare the result with the memoised view.
//! (This machinery, the fingerprints and the checker's harness are in
//! `tests/model_kit`, shared with `tests/model_sessions.rs`.)
//!
//! The network is a multiset of messages, each identified by a fingerprint
//! of its content and kept sorted; the store is its lease object (etag and
//! body, or none: a create given back is deleted) plus its version counter,
//! and every request (GET, PUT, the LIST of `<key>/` that follows every
//! acquisition, the conditional DELETE of a give-back) is applied by a
//! `MemStore` rebuilt from that snapshot, so etags come out exactly as the
//! real store would number them. Fingerprints are two-lane multiply-xorshift
//! hashes (fast in the debug builds the tests run in).
//!
//! # Time and faults
//!
//! Global time is discrete. Every node's monotonic and wall clocks are the
//! global time plus a per-node offset (equal rates: drift is covered by the
//! simulator). Time advances only to the next instant some node wants to be
//! polled (a renew or poll timer, a request timeout, a backoff end), or, when
//! `latency_step` is set and a message is in flight, by at most that step.
//! Timers due at the current instant are polled as separate actions,
//! interleaved with message deliveries in every order. The store dates each
//! reply with its own clock, at one-second resolution like an HTTP `Date`
//! header (or exactly, when `http_dates` is off).
//!
//! Every message must be delivered or lost within `max_delay` of being sent
//! (0 in the configurations here: the store applies a request at some point
//! of the instant it was sent, in any order with everything else happening
//! then). Unbounded delay is a fault with a budget, like the others: a
//! message may be held back and delivered at any later point, or never
//! (a write landing after its sender timed out, re-read and moved on).
//! Without such a bound every message could linger across every instant,
//! which is an unbounded number of faults and an unbounded state space.
//! The faults, each with its own budget per run:
//!
//! - lose a request or a reply;
//! - deliver a request twice (a transport retry);
//! - answer 500, having applied a write or not;
//! - hold a message back (late delivery);
//! - answer 429 (or 503: the same `ReplyKind::Throttled`) with a
//!   `Retry-After` of 1 s (waited out) or 5 s (past the operation's
//!   deadline, `op_timeout` = ttl: the operation ends at once), not applied;
//! - answer a PUT 409 (`ReplyKind::Conflict`, S3's concurrent conditional
//!   write), not applied;
//! - let time pass while a node's timer is due (a process pause);
//! - ask a node to resign (it releases when it holds);
//! - kill a node's process: its machine is dropped, replies to its calls go
//!   nowhere, its requests already sent may still land. At any later point
//!   (or never) it is restarted: a fresh `Elector`, same holder name, new
//!   entropy seed and so new sessions; messages carry the machine they
//!   belong to.
//!
//! # Every check can fail
//!
//! Each check is shown failing on a broken variant of the core or a broken
//! setting, found by a default test (`*_is_caught*`); with `Params::only`
//! a run checks one property alone, so that no other violation ends the
//! path first:
//!
//! 1. two holders: `Variant::NaiveClock` (wall clocks 1.5 s apart),
//!    `Variant::TrustReplies`, and (ignored, large) `Variant::NoMargins`;
//! 2. a token repeated: `Variant::TrustReplies`;
//! 3. the stored token going back: a store that may apply a PUT with its
//!    condition ignored (`Budget::blind_writes`; no real object store, and
//!    one the capability probe refuses);
//! 4. a self-loss: a store whose GET may answer the version before the
//!    current one (`Budget::stale_reads`: S3, GCS and Azure are
//!    read-after-write consistent);
//! 5. a lockout: the `NoSettle` mutant (a write of unknown outcome given up
//!    with no claim), and a program that replaces its elector by a fresh
//!    one after any `Lost` or `Error` (`Client::Amnesiac`: the process's
//!    records stay its own, the new elector knows nothing of them);
//! 6. a stall: the `UncappedRetryAfter` mutant (a 5 s Retry-After waited out
//!    by both nodes), and the safe core with the bounds cut by 1.5 s.
//!
//! # Reductions
//!
//! Two reductions keep the space small without losing behaviour: messages
//! that can no longer change anything (replies, and replies-to-be of reads,
//! for calls their machine no longer waits for, or whose machine is gone)
//! are removed; and a state that violates a check is not expanded, so each
//! reported counterexample ends at its first violation. `verify` runs check
//! the memoised view against replays with and without the first reduction.
//!
//! The default tests run in debug within a minute; the larger
//! configurations are ignored: run them with
//! `cargo test -p lease-core --release --features unsafe-variants --test model -- --ignored --nocapture`.
#![cfg(feature = "unsafe-variants")]

use lease_core::protocol::CallId;
use lease_core::store::{PutCondition, ReplyKind, TransportErrorKind};
use lease_core::variants::Variant;
use lease_core::verify;
use lease_core::{
    Elector, Entropy, Etag, Event, LeaseConfig, LeaseRecord, LostReason, Machine, MemStore, Mono,
    Now, Output, StoreOp, StoreReply, UnixMillis, VirtualClock,
};
use stateright::{Model, Property};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

mod model_kit;
use model_kit::{
    body_fp, by_identity, describe_condition, fp_debug_with, in_flight_of, obj_fp, op_fp, phase_of,
    reply_fp, session_fp, Fp, History, Identity, Phase, Replays, Settings, Transitions,
};

const KEY: &str = "locks/model";

// ---------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------

/// How many faults of each kind one run may suffer (what is left of it is
/// part of a state's identity: its derived `Hash`, the fields in order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct Budget {
    /// A request or a reply vanishes (a lost reply to a write that applied
    /// is the classic unknown outcome).
    losses: u8,
    /// A request is delivered twice (a transport-level retry).
    dups: u8,
    /// The store answers 500, having applied the request or not.
    errors: u8,
    /// A message is held back with no bound on its delay (it may arrive
    /// after its sender timed out, retried and moved on, or never).
    delays: u8,
    /// Time moves on while a node has a timer due (a process pause).
    pauses: u8,
    /// A node is asked to resign (and releases).
    stops: u8,
    /// The store answers 429/503 with a `Retry-After` (one of
    /// `Params::retry_after_ms`) without applying the request.
    throttles: u8,
    /// The store answers a PUT with 409 (S3's `ConditionalRequestConflict`)
    /// without applying it.
    conflicts: u8,
    /// A node's process dies: its machine is dropped, the replies to its
    /// calls go nowhere, its requests already sent may still land. It may
    /// be restarted later as a new process (a fresh `Elector`, same holder
    /// name, new entropy and so new sessions).
    crashes: u8,
    /// Not a fault of a real object store (S3, GCS and Azure are read-after-
    /// write consistent): a GET is answered from the version before the
    /// current one. Only for showing what `NO_SELF_LOSS` catches.
    stale_reads: u8,
    /// Not a fault of a real object store either: a PUT is applied with its
    /// condition ignored (a store that does not honour conditional writes,
    /// which the capability probe refuses). Only for showing what
    /// `STORE_TOKEN_MONOTONE` catches.
    blind_writes: u8,
}

/// How the program around each `Elector` behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Client {
    /// As the library intends: one `Elector` for the life of the process.
    Sound,
    /// Broken on purpose: whenever the elector reports `Lost` or `Error`,
    /// the program drops it and starts a fresh one in the same process (new
    /// entropy, so new sessions). The fresh elector does not know the
    /// records its predecessor may have left: it forgets their claims.
    Amnesiac,
}

#[derive(Clone, Debug)]
struct Params {
    nodes: usize,
    variant: Variant,
    /// No time advance beyond this (global milliseconds).
    horizon_ms: u64,
    budget: Budget,
    /// Store dates at one-second resolution (HTTP `Date`) or exact.
    http_dates: bool,
    /// Milliseconds past a whole second on the store's clock at global
    /// time 0 (with `http_dates`: how much the dates of replies at timer
    /// instants are truncated).
    store_phase: u64,
    /// Per-node offsets of the wall clock from the store's clock (ms).
    wall_offsets: Vec<i64>,
    /// Every message not held back by a `delays` fault is delivered (or
    /// lost) within this many milliseconds of being sent.
    max_delay: u64,
    /// When set, time may also advance by this much while a message is in
    /// flight (message latency at this granularity).
    latency_step: Option<u64>,
    /// Seeds of each node's entropy (jitter, nonces): every combination is
    /// an initial state.
    seeds: Vec<u128>,
    /// The `Retry-After` values a throttled reply may carry (ms).
    retry_after_ms: Vec<u64>,
    /// Taken off both liveness bounds (to show they are not loose).
    bound_cut_ms: u64,
    /// Check only this safety property: the others neither fail the run
    /// nor end a path (to show that it fails on its own).
    only: Option<&'static str>,
    client: Client,
    /// Rebuild every machine from its history at every state and check the
    /// memoised identity and lease belief against the real `Elector`.
    verify: bool,
    /// Remove in-flight messages that can no longer change anything.
    collect_garbage: bool,
    /// Explore depth first: the same states, but memory holds the visited
    /// fingerprints and the current paths instead of the whole frontier
    /// of states (with latency, the breadth-first frontier outgrows the
    /// machine).
    depth_first: bool,
    /// A fix undone (a test build's, `--cfg lease_mutants`).
    #[cfg(lease_mutants)]
    mutant: Option<lease_core::mutants::Mutant>,
}

impl Params {
    fn config(&self, node: usize) -> LeaseConfig {
        let mut cfg = LeaseConfig::new(KEY, holder(node), Duration::from_secs(3));
        // Bounds the retries inside one operation (and so the state space).
        cfg.max_attempts = 1;
        cfg.backoff_base = Duration::from_millis(200);
        cfg.backoff_max = Duration::from_millis(400);
        cfg.variant = self.variant;
        cfg.validate().expect("model settings validate");
        cfg
    }

    /// The liveness bounds `(settle, orphan)`, derived from the settings
    /// (see the module docs): after a disruption, some live node must hold
    /// the lease within `settle`; within `orphan` when the disruption may
    /// have left a live record nobody will take back (a crash, a
    /// resignation, a fault on a message of a node that is resigning or
    /// dead).
    fn bounds(&self) -> (u64, u64) {
        let cfg = self.config(0);
        let ms = |d: Duration| d.as_millis() as u64;
        // The longest Retry-After an operation waits out: a longer one ends
        // it at once, past its deadline (`op_timeout`, the ttl). The bound
        // assumes that cap also for the `UncappedRetryAfter` mutant, which is
        // what `uncapped_retry_after_mutant_is_caught`
        // shows failing.
        let wait = self
            .retry_after_ms
            .iter()
            .copied()
            .filter(|&ra| ra < ms(cfg.op_timeout))
            .max()
            .unwrap_or(0)
            .max(ms(cfg.backoff_max));
        let poll = ms(cfg.poll_every) * 11 / 10;
        let settle = ms(cfg.request_timeout) + wait + poll + ms(cfg.margin) + 8 * self.max_delay;
        let orphan = settle + ms(cfg.ttl) + ms(cfg.date_resolution) + self.max_delay;
        (settle - self.bound_cut_ms, orphan - self.bound_cut_ms)
    }

    /// Node `node`'s clocks at global time `t`: its monotonic clock from its
    /// own origin, its wall clock the store's plus its offset.
    fn now(&self, node: usize, t: u64) -> Now {
        let wall = self.store_time(t) as i64 + self.wall_offsets.get(node).copied().unwrap_or(0);
        Now::new(Mono(t + self.mono_offset(node)), UnixMillis(wall as u64))
    }
}

impl Settings for Params {
    fn store_clock(&self) -> (u64, bool) {
        (self.store_phase, self.http_dates)
    }
}

fn holder(node: usize) -> String {
    format!("n{node}")
}

/// The node a holder name is, if it is one.
fn node_of(holder: &str) -> Option<usize> {
    holder.strip_prefix('n').and_then(|n| n.parse().ok())
}

// ---------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------

/// A decoded lease record (what the checks need of it).
#[derive(Debug, PartialEq, Eq)]
struct Rec {
    token: u64,
    holder: String,
    /// The model's node of that holder name.
    node: Option<usize>,
    session: u64,
    released: bool,
    expires_at: u64,
}

impl Rec {
    fn of(body: &[u8]) -> Option<Arc<Rec>> {
        LeaseRecord::decode(body).ok().map(|r| {
            Arc::new(Rec {
                token: r.token,
                node: node_of(&r.holder),
                holder: r.holder,
                session: session_fp(&r.acquisition),
                released: r.released,
                expires_at: r.expires_at.0,
            })
        })
    }
}

/// One input given to a node's machine.
#[derive(Clone, Debug)]
enum Input {
    Poll(Now),
    /// The reply in `Body::Reply` to call `CallId` (the id given here is
    /// the one fed; the body's own id is ignored).
    Reply(Now, CallId, Arc<Body>),
    Stop(Now),
}

impl Input {
    fn fp(&self) -> u128 {
        match self {
            Input::Poll(now) => Fp::new(1).u64(now.mono.0).u64(now.wall.0).finish(),
            Input::Stop(now) => Fp::new(3).u64(now.mono.0).u64(now.wall.0).finish(),
            Input::Reply(now, id, body) => Fp::new(2)
                .u64(now.mono.0)
                .u64(now.wall.0)
                .u64(id.0)
                .u128(body.content())
                .finish(),
        }
    }
}

/// A machine's identity, phase and awaited call.
fn machine_fp(e: &Elector) -> (u128, Phase, u64) {
    let (fp, (phase, in_flight)) = fp_debug_with(e, |t| (phase_of(t), in_flight_of(t)));
    (fp, phase, in_flight)
}

#[derive(Clone)]
struct Node {
    /// Not part of the identity (see the module docs): the entropy seed
    /// the machine was created with and (`verify` only) its inputs since.
    seed: u128,
    history: History<Input>,
    /// Seed of the node's first process: later machines derive theirs.
    base_seed: u128,
    /// Identity: hash of the machine's `Debug` output (0: no machine).
    fp: u128,
    phase: Phase,
    /// The call it waits for (0: none).
    in_flight: u64,
    /// Global time of the next wanted poll (`u64::MAX`: none).
    wake: u64,
    /// Global deadline of the lease the node holds (`Elector::lease` was
    /// `Some` at its last input), or `None`.
    held_until: Option<u64>,
    /// Session of that lease (0: none).
    lease_session: u64,
    /// Machines this node has had (crashes, restarts, rebuilt electors):
    /// messages carry it, and replies to an earlier machine go nowhere.
    inc: u8,
    alive: bool,
    /// Asked to resign.
    stopping: bool,
    /// Sessions of the records this process has written (sorted): its own.
    sessions: Vec<u64>,
}

impl Node {
    /// Alive and still wanting the lease.
    fn candidate(&self) -> bool {
        self.alive && !self.stopping && self.phase != Phase::Finished
    }

    fn holds(&self, now: u64) -> bool {
        self.held_until.is_some_and(|v| now < v)
    }
}

impl Identity for Node {
    fn identity(&self, f: &mut Fp) {
        f.u128(self.fp)
            .u64(self.phase as u64)
            .u64(self.wake)
            .opt(self.held_until)
            .u64(self.lease_session)
            .u64(self.inc as u64)
            .u64(self.alive as u64)
            .u64(self.stopping as u64)
            .u64(self.sessions.len() as u64);
        for s in &self.sessions {
            f.u64(*s);
        }
    }
}

/// A call a machine made, with what the model needs of it.
struct CallOp {
    op: StoreOp,
    /// Fingerprint of `op`.
    content: u128,
    /// For a PUT: the body's fingerprint and record.
    put: Option<(u128, Option<Arc<Rec>>)>,
}

impl fmt::Debug for CallOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.op)
    }
}

/// What the model needs of an elector's events.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ev {
    Acquired(u64),
    Released,
    Lost { token: u64, expired: bool },
    Error,
}

/// What one input did to a node: memoised per (node identity, input).
struct Step {
    fp: u128,
    phase: Phase,
    in_flight: u64,
    wake: Mono,
    held_until: Option<Mono>,
    lease_session: u64,
    /// `Elector::leader()`: holder (as a node), token, expiry.
    leader: Option<(Option<usize>, u64, u64)>,
    calls: Vec<(CallId, Arc<CallOp>)>,
    events: Vec<Ev>,
    /// Any event at all (including those `Ev` leaves out).
    any_event: bool,
}

/// Feeds one input to a machine and drains its outputs until it waits.
fn feed(e: &mut Elector, input: &Input) -> (Vec<(CallId, StoreOp)>, Vec<Event>, Mono, Now) {
    let now = match input {
        Input::Poll(now) => *now,
        Input::Reply(now, id, body) => {
            let Body::Reply { reply, .. } = &**body else {
                panic!("a request fed as a reply")
            };
            e.handle_reply(*now, *id, reply.clone());
            *now
        }
        Input::Stop(now) => {
            e.stop(*now);
            *now
        }
    };
    let (mut calls, mut events) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        match e.poll(now) {
            Output::Call(id, op) => calls.push((id, op)),
            Output::Event(ev) => events.push(ev),
            Output::Done(_) => {}
            Output::Wait(t) => return (calls, events, t, now),
        }
    }
    panic!("machine did not settle: {e:?}");
}

// ---------------------------------------------------------------------------
// Network and store
// ---------------------------------------------------------------------------

#[derive(Debug)]
enum Body {
    Request {
        node: usize,
        inc: u8,
        id: CallId,
        call: Arc<CallOp>,
    },
    Reply {
        node: usize,
        inc: u8,
        id: CallId,
        reply: StoreReply,
        /// For a `Found`: the record read and its body's fingerprint.
        read: Option<(Option<Arc<Rec>>, u128)>,
        content: u128,
    },
}

impl Body {
    fn fp(&self) -> u128 {
        let (node, inc) = self.sender();
        let (tag, id) = match self {
            Body::Request { id, .. } => (0xA1, id),
            Body::Reply { id, .. } => (0xA2, id),
        };
        Fp::new(tag)
            .u64(node as u64)
            .u64(inc as u64)
            .u64(id.0)
            .u128(self.content())
            .finish()
    }

    fn content(&self) -> u128 {
        match self {
            Body::Request { call, .. } => call.content,
            Body::Reply { content, .. } => *content,
        }
    }

    /// A request that may change the store.
    fn is_write(&self) -> bool {
        matches!(self, Body::Request { call, .. } if call.op.is_write())
    }

    fn sender(&self) -> (usize, u8) {
        match self {
            Body::Request { node, inc, .. } | Body::Reply { node, inc, .. } => (*node, *inc),
        }
    }
}

/// A message in a trace line.
impl fmt::Display for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Request {
                node,
                inc,
                id,
                call,
            } => write!(f, "n{node}#{inc} call #{} {}", id.0, describe_op(&call.op)),
            Body::Reply {
                node,
                inc,
                id,
                reply,
                ..
            } => write!(
                f,
                "reply to n{node}#{inc} #{}: {}",
                id.0,
                lease_core::protocol::summarize(&reply.kind)
            ),
        }
    }
}

impl model_kit::Message for Body {
    fn is_reply(&self) -> bool {
        matches!(self, Body::Reply { .. })
    }
}

type Msg = model_kit::Msg<Body>;

/// One version of the lease object.
#[derive(Clone)]
struct Obj {
    etag: Etag,
    body: Arc<Vec<u8>>,
    body_fp: u128,
    rec: Option<Arc<Rec>>,
}

impl Obj {
    /// The fingerprint of a version (0: none).
    fn fp(obj: &Option<Arc<Obj>>) -> u128 {
        obj_fp(obj.as_ref().map(|o| (&o.etag, o.body_fp)))
    }
}

/// The store's content: the lease object and the version counter its
/// etags are numbered from (and, with stale reads, the version before).
#[derive(Clone)]
struct StoreState {
    versions: u64,
    object: Option<Arc<Obj>>,
    previous: Option<Arc<Obj>>,
}

impl StoreState {
    /// A real `MemStore` holding exactly this content at global time `t`:
    /// `versions` unconditional writes, the last one with the current body,
    /// and a delete when the object is gone.
    fn rebuild(&self, at: UnixMillis) -> MemStore {
        let store = MemStore::new(VirtualClock::new(at));
        for v in 1..=self.versions {
            let body = match (&self.object, v == self.versions) {
                (Some(o), true) => o.body.to_vec(),
                _ => Vec::new(),
            };
            store.apply(&StoreOp::Put {
                key: KEY.into(),
                body,
                condition: PutCondition::None,
            });
        }
        if self.object.is_none() && self.versions > 0 {
            store.apply(&StoreOp::Delete {
                key: KEY.into(),
                if_match: None,
            });
        }
        debug_assert_eq!(
            store.get(KEY).map(|(e, _)| e),
            self.object.as_ref().map(|o| o.etag.clone())
        );
        store
    }

    fn record(&self) -> Option<&Rec> {
        self.object.as_ref().and_then(|o| o.rec.as_deref())
    }
}

impl Identity for StoreState {
    fn identity(&self, f: &mut Fp) {
        f.u64(self.versions)
            .u128(Obj::fp(&self.object))
            .u128(Obj::fp(&self.previous));
    }
}

/// How the store answers a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Answer {
    /// As `MemStore::apply` does.
    Apply,
    /// 500, having applied the request or not.
    ServerError { applied: bool },
    /// 429/503 with this `Retry-After` (ms), not applied.
    Throttled(u64),
    /// 409, not applied.
    Conflict,
    /// A GET answered from the version before the current one.
    Stale,
    /// A PUT applied with its condition ignored.
    Blind,
}

// ---------------------------------------------------------------------------
// States and actions
// ---------------------------------------------------------------------------

#[derive(Clone)]
struct State {
    now: u64,
    nodes: Vec<Node>,
    store: StoreState,
    /// In-flight messages, sorted by fingerprint (a canonical multiset).
    net: Vec<Msg>,
    budget: Budget,
    /// Highest token of any `Event::Acquired` so far.
    max_acquired: u64,
    /// Number of acquisitions so far (saturating at 3: only "how many
    /// takeovers" matters for the reachability properties).
    acquisitions: u8,
    /// A resignation released the lease (`Event::Released`).
    released: bool,
    /// A restarted process acquired the lease.
    restarted_acquired: bool,
    /// From this global time on, some live node must hold the lease (0:
    /// already due). See the module docs.
    calm_at: u64,
    /// First acquisition whose token was not above every earlier one.
    token_regressed: Option<(u64, u64)>,
    /// First write that lowered the record's token.
    store_regressed: Option<(u64, u64)>,
    /// A node reported losing the lease to someone else while the record
    /// was its own (node, token).
    self_loss: Option<(usize, u64)>,
    /// A node took its own live record for another holder's (node, token).
    locked_out: Option<(usize, u64)>,
}

impl State {
    /// Everything that determines the future, and nothing else (input
    /// histories are left out: see the module docs).
    fn identity(&self) -> u128 {
        let mut f =
            model_kit::state_fp(self.now, &self.nodes, &self.store, &self.net, &self.budget);
        f.u64(self.max_acquired)
            .u64(self.acquisitions as u64)
            .u64(self.released as u64)
            .u64(self.restarted_acquired as u64)
            .u64(self.calm_at);
        for flag in [
            self.token_regressed,
            self.store_regressed,
            self.self_loss.map(|(n, t)| (n as u64, t)),
            self.locked_out.map(|(n, t)| (n as u64, t)),
        ] {
            f.pair(flag);
        }
        f.finish()
    }

    fn holders(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].holds(self.now))
            .collect()
    }

    /// No timer is due and no message must be delivered now: everything
    /// that happens at this instant has happened (time may advance next).
    fn settled(&self) -> bool {
        self.nodes.iter().all(|n| n.wake > self.now)
            && self.net.iter().all(|m| m.deadline > self.now)
    }

    /// Some node holds the lease and the store's record is that lease's.
    fn held_on_store(&self) -> bool {
        let Some(rec) = self.store.record() else {
            return false;
        };
        self.nodes.iter().enumerate().any(|(i, n)| {
            n.holds(self.now)
                && !rec.released
                && rec.node == Some(i)
                && rec.session == n.lease_session
        })
    }

    /// The liveness property's violation (see the module docs).
    fn stalled(&self) -> bool {
        self.now >= self.calm_at
            && self.settled()
            && self.nodes.iter().any(Node::candidate)
            && !self.held_on_store()
    }

    /// Each safety property, with whether this state violates it.
    fn failing(&self) -> [(&'static str, bool); 6] {
        [
            (AT_MOST_ONE, self.holders().len() > 1),
            (TOKENS_INCREASE, self.token_regressed.is_some()),
            (STORE_TOKEN_MONOTONE, self.store_regressed.is_some()),
            (NO_SELF_LOSS, self.self_loss.is_some()),
            (NOT_LOCKED_OUT, self.locked_out.is_some()),
            (LIVE, self.stalled()),
        ]
    }
}

by_identity!(State);

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}ms holders={:?}", self.now, self.holders())?;
        for (i, n) in self.nodes.iter().enumerate() {
            write!(f, " n{i}")?;
            if n.inc > 0 {
                write!(f, "#{}", n.inc)?;
            }
            write!(f, "[{:?}", n.phase)?;
            if n.stopping {
                write!(f, " resigning")?;
            }
            if n.wake != u64::MAX {
                write!(f, " wake {}", n.wake)?;
            }
            if let Some(v) = n.held_until {
                write!(f, " holds until {v}")?;
            }
            write!(f, "]")?;
        }
        match self.store.object.as_ref() {
            Some(o) => match &o.rec {
                Some(r) => write!(
                    f,
                    " store[{} token {} holder {} session {:04x} expires {}{}]",
                    o.etag,
                    r.token,
                    r.holder,
                    r.session & 0xFFFF,
                    r.expires_at,
                    if r.released { " released" } else { "" }
                )?,
                None => write!(f, " store[{} unreadable]", o.etag)?,
            },
            None => write!(f, " store[empty]")?,
        }
        if self.calm_at > self.now {
            write!(f, " calm at {}", self.calm_at)?;
        }
        write!(f, " in-flight {} budget {:?}", self.net.len(), self.budget)
    }
}

/// What else may happen to a node's process (`Action::Node`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Process {
    /// It is asked to resign.
    Stop,
    /// It dies.
    Crash,
    /// A dead node's process starts again.
    Restart,
}

type Action = model_kit::Action<Answer, Process>;

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

/// `verify`: what replaying an input history gave: the machine's identity,
/// phase, awaited call, and the lease (deadline, session) when the phase
/// keeps one.
type Replayed = (u128, Phase, u64, Option<(Mono, u64)>);

struct LeaseModel {
    p: Params,
    cfgs: Vec<LeaseConfig>,
    /// `Params::bounds`.
    settle: u64,
    orphan: u64,
    /// The electors' memoised transitions.
    machines: Transitions<Elector, Input, Step>,
    replayed: Replays<Replayed>,
    /// The reply fed to probe whether a node still waits for a call.
    probe: Arc<Body>,
}

/// What a disruption may leave behind (see `Params::bounds`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Disruption {
    Settle,
    Orphan,
}

impl LeaseModel {
    fn new(p: Params) -> LeaseModel {
        assert!(p.nodes >= 1 && !p.seeds.is_empty());
        let cfgs = (0..p.nodes).map(|i| p.config(i)).collect();
        let (settle, orphan) = p.bounds();
        let reply = StoreReply::transport(TransportErrorKind::Reset, "");
        let content = reply_fp(&reply, None);
        LeaseModel {
            p,
            cfgs,
            settle,
            orphan,
            machines: Transitions::default(),
            replayed: Replays::default(),
            probe: Arc::new(Body::Reply {
                node: 0,
                inc: 0,
                id: CallId(0),
                reply,
                read: None,
                content,
            }),
        }
    }

    fn fresh(&self, node: usize, seed: u128) -> Elector {
        Elector::new(self.cfgs[node].clone(), Entropy::from_seed(seed))
    }

    /// A node with a new machine (a first start, a restart, a rebuilt
    /// elector).
    fn start(&self, i: usize, base_seed: u128, inc: u8, sessions: Vec<u64>) -> Node {
        let seed = base_seed + ((inc as u128) << 64);
        let (fp, phase, in_flight) = machine_fp(&self.fresh(i, seed));
        self.machines.fresh(fp, seed);
        Node {
            seed,
            history: History::default(),
            base_seed,
            fp,
            phase,
            in_flight,
            // A new elector campaigns at its first poll.
            wake: self.p.to_global(i, Mono(0)),
            held_until: None,
            lease_session: 0,
            inc,
            alive: true,
            stopping: false,
            sessions,
        }
    }

    /// Node `i`'s machine in state `fp`, rebuilt by replaying the inputs
    /// that first led there.
    fn derive(&self, i: usize, fp: u128) -> Elector {
        self.machines.derive(
            fp,
            |seed| self.fresh(i, seed),
            |e, input| {
                self.feed(e, input);
            },
        )
    }

    /// [`feed`], with this thread's machines built as the model asks (a
    /// test build's mutant, `Params::mutant`; the checker's threads are its
    /// own).
    fn feed(
        &self,
        e: &mut Elector,
        input: &Input,
    ) -> (Vec<(CallId, StoreOp)>, Vec<Event>, Mono, Now) {
        #[cfg(lease_mutants)]
        lease_core::mutants::set(self.p.mutant);
        feed(e, input)
    }

    /// The node's machine, rebuilt by replaying its own history (`verify`).
    fn rebuild(&self, i: usize, node: &Node) -> Elector {
        let mut e = self.fresh(i, node.seed);
        for input in node.history.oldest_first() {
            self.feed(&mut e, &input);
        }
        e
    }

    /// Gives `input` to node `i` of `s`, memoised.
    fn step(&self, s: &State, i: usize, input: Input) -> (Node, Arc<Step>) {
        let node = &s.nodes[i];
        debug_assert!(node.alive);
        let input_fp = input.fp();
        let rebuild = || {
            let e = self.derive(i, node.fp);
            if self.p.verify {
                assert_eq!(machine_fp(&e).0, node.fp, "replay is not deterministic");
            }
            e
        };
        let step = self.machines.step(node.fp, &input, input_fp, rebuild, |e| {
            let (calls, events, wake, now) = self.feed(e, &input);
            let (fp, phase, in_flight) = machine_fp(e);
            let lease = e.lease(now.mono);
            let step = Step {
                fp,
                phase,
                in_flight,
                wake,
                held_until: lease.map(|l| l.valid_until),
                lease_session: lease.map_or(0, |l| session_fp(&l.acquisition)),
                leader: e
                    .leader()
                    .map(|l| (node_of(&l.holder), l.token, l.expires_at.0)),
                calls: calls
                    .into_iter()
                    .map(|(id, op)| {
                        let put = match &op {
                            StoreOp::Put { body, .. } => Some((body_fp(body), Rec::of(body))),
                            _ => None,
                        };
                        let content = op_fp(&op);
                        (id, Arc::new(CallOp { op, content, put }))
                    })
                    .collect(),
                any_event: !events.is_empty(),
                events: events
                    .iter()
                    .filter_map(|ev| match ev {
                        Event::Acquired { token, .. } => Some(Ev::Acquired(*token)),
                        Event::Released { .. } => Some(Ev::Released),
                        Event::Lost { token, reason } => Some(Ev::Lost {
                            token: *token,
                            expired: *reason == LostReason::Expired,
                        }),
                        Event::Error(_) => Some(Ev::Error),
                        _ => None,
                    })
                    .collect(),
            };
            (fp, step)
        });
        let next = Node {
            history: node.history.after(input, input_fp, self.p.verify),
            fp: step.fp,
            phase: step.phase,
            in_flight: step.in_flight,
            wake: self.p.to_global(i, step.wake),
            held_until: step.held_until.map(|v| self.p.to_global(i, v)),
            lease_session: step.lease_session,
            ..node.clone()
        };
        (next, step)
    }

    /// Node `i` takes `input`; its calls go out, its events are checked.
    /// `read` is the record of a `Found` reply being delivered.
    fn node_input(&self, s: &mut State, i: usize, input: Input, read: Option<&Rec>) {
        let before = s.nodes[i].phase;
        let (node, step) = self.step(s, i, input);
        s.nodes[i] = node;
        for (_, c) in &step.calls {
            if let Some((_, Some(rec))) = &c.put {
                let n = &mut s.nodes[i];
                if let Err(at) = n.sessions.binary_search(&rec.session) {
                    n.sessions.insert(at, rec.session);
                }
            }
        }
        let own = |s: &State, rec: &Rec| {
            !rec.released && rec.node == Some(i) && s.nodes[i].sessions.contains(&rec.session)
        };
        let mut failed = false;
        for ev in &step.events {
            match *ev {
                Ev::Acquired(token) => {
                    let highest = (s.acquisitions > 0).then_some(s.max_acquired);
                    if !verify::token_follows(highest, token) && s.token_regressed.is_none() {
                        s.token_regressed = Some((s.max_acquired, token));
                    }
                    s.max_acquired = s.max_acquired.max(token);
                    s.acquisitions = s.acquisitions.saturating_add(1).min(3);
                    if s.nodes[i].inc > 0 {
                        s.restarted_acquired = true;
                    }
                }
                Ev::Released => s.released = true,
                Ev::Lost { token, expired } => {
                    failed = true;
                    if !expired
                        && s.store.record().is_some_and(|r| own(s, r))
                        && s.self_loss.is_none()
                    {
                        s.self_loss = Some((i, token));
                    }
                }
                Ev::Error => failed = true,
            }
        }
        // Went from campaigning to waiting on the record just read, with
        // the leader it names: the acquire ended `Busy` on that record.
        if let Some(rec) = read {
            let busy = before == Phase::Campaigning
                && matches!(step.phase, Phase::Waiting | Phase::Finished)
                && !step
                    .events
                    .iter()
                    .any(|e| matches!(e, Ev::Acquired(_) | Ev::Error))
                && step.leader == Some((rec.node, rec.token, rec.expires_at));
            if busy && !s.nodes[i].stopping && own(s, rec) && s.locked_out.is_none() {
                s.locked_out = Some((i, rec.token));
            }
        }
        let inc = s.nodes[i].inc;
        for (id, call) in &step.calls {
            self.send(
                s,
                Body::Request {
                    node: i,
                    inc,
                    id: *id,
                    call: call.clone(),
                },
            );
        }
        if failed && !s.nodes[i].stopping && self.p.client == Client::Amnesiac {
            // Same process: its records stay its own.
            let n = &s.nodes[i];
            s.nodes[i] = self.start(i, n.base_seed, n.inc + 1, n.sessions.clone());
        }
    }

    /// The store applies `op` as `MemStore::apply` does: the reply's kind,
    /// and the version read for a `Found`.
    fn apply(
        &self,
        s: &mut State,
        op: &StoreOp,
        put: &Option<(u128, Option<Arc<Rec>>)>,
    ) -> (ReplyKind, Option<Arc<Obj>>) {
        let store = s.store.rebuild(UnixMillis(self.p.store_time(s.now)));
        let answer = store.apply(op);
        match &answer.kind {
            ReplyKind::Written { .. } => {
                let (etag, body) = store.get(KEY).expect("written object exists");
                let (body_fp, rec) = put.clone().expect("a PUT wrote");
                let old = s.store.record().map(|r| r.token);
                if let (Some(old), Some(new)) = (old, rec.as_ref().map(|r| r.token)) {
                    if !verify::not_lowered(old, new) && s.store_regressed.is_none() {
                        s.store_regressed = Some((old, new));
                    }
                }
                let previous = self.previous(&mut s.store);
                s.store = StoreState {
                    versions: s.store.versions + 1,
                    object: Some(Arc::new(Obj {
                        etag,
                        body: Arc::new(body),
                        body_fp,
                        rec,
                    })),
                    previous,
                };
                (answer.kind, None)
            }
            ReplyKind::Found { .. } => (answer.kind, s.store.object.clone()),
            ReplyKind::Deleted => {
                // A create given back (a pending win the operation could
                // not keep): the key is as it was before it.
                let previous = self.previous(&mut s.store);
                s.store = StoreState {
                    versions: s.store.versions,
                    object: None,
                    previous,
                };
                (answer.kind, None)
            }
            _ => (answer.kind, None),
        }
    }

    /// The object a write replaces, kept as the one a stale read may
    /// still see (only where stale reads are in the budget).
    fn previous(&self, store: &mut StoreState) -> Option<Arc<Obj>> {
        if self.p.budget.stale_reads > 0 {
            store.object.take()
        } else {
            None
        }
    }

    /// The store answers request `msg` (its node's call `id`) as `how` says.
    fn serve(&self, s: &mut State, msg: &Msg, how: Answer) {
        let Body::Request {
            node,
            inc,
            id,
            call,
        } = &*msg.body
        else {
            panic!("the store was sent a reply")
        };
        let (op, put) = (&call.op, &call.put);
        let (kind, read) = match how {
            Answer::Apply => self.apply(s, op, put),
            Answer::ServerError { applied } => {
                if applied {
                    self.apply(s, op, put);
                }
                (
                    ReplyKind::ServerError {
                        status: 500,
                        code: Some("InternalError".into()),
                    },
                    None,
                )
            }
            Answer::Throttled(ms) => (
                ReplyKind::Throttled {
                    retry_after: Some(Duration::from_millis(ms)),
                },
                None,
            ),
            Answer::Conflict => (ReplyKind::Conflict, None),
            Answer::Blind => {
                let StoreOp::Put { key, body, .. } = op else {
                    panic!("a blind write that is not a PUT")
                };
                let blind = StoreOp::Put {
                    key: key.clone(),
                    body: body.clone(),
                    condition: PutCondition::None,
                };
                self.apply(s, &blind, put)
            }
            Answer::Stale => match s.store.previous.clone() {
                Some(o) => (
                    ReplyKind::Found {
                        etag: o.etag.clone(),
                        body: o.body.to_vec(),
                    },
                    Some(o),
                ),
                None => (ReplyKind::Missing, None),
            },
        };
        let reply = StoreReply::dated(kind, self.p.store_date(s.now));
        let content = reply_fp(&reply, read.as_ref().map(|o| o.body_fp));
        self.send(
            s,
            Body::Reply {
                node: *node,
                inc: *inc,
                id: *id,
                reply,
                read: read.map(|o| (o.rec.clone(), o.body_fp)),
                content,
            },
        );
    }

    /// Delivers a reply to its node (if that machine still exists).
    fn deliver_reply(&self, s: &mut State, msg: &Msg) {
        let Body::Reply {
            node,
            inc,
            id,
            read,
            ..
        } = &*msg.body
        else {
            panic!("not a reply")
        };
        let n = &s.nodes[*node];
        if !n.alive || n.inc != *inc {
            return;
        }
        let input = Input::Reply(self.p.now(*node, s.now), *id, msg.body.clone());
        let read = read.as_ref().and_then(|(rec, _)| rec.as_deref());
        self.node_input(s, *node, input, read);
    }

    /// A disruption now: some live node must hold the lease again by the
    /// bound it allows.
    fn disrupt(&self, s: &mut State, what: Disruption) {
        let bound = match what {
            Disruption::Settle => self.settle,
            Disruption::Orphan => self.orphan,
        };
        s.calm_at = s.calm_at.max(s.now + bound);
    }

    /// A fault on a message: it may leave a record nobody takes back when
    /// its sender is dead or resigning.
    fn disrupt_msg(&self, s: &mut State, body: &Body) {
        let (node, inc) = body.sender();
        let n = &s.nodes[node];
        let what = if n.candidate() && n.inc == inc {
            Disruption::Settle
        } else {
            Disruption::Orphan
        };
        self.disrupt(s, what);
    }

    /// Whether node `i` would ignore any reply to call `id` now, found by
    /// feeding it one (memoised like any input); only meaningful when the
    /// node has no timer due, so the probe's poll does nothing else. Checks
    /// `Node::in_flight` in `verify` runs.
    fn ignores(&self, s: &State, i: usize, id: CallId) -> bool {
        let n = &s.nodes[i];
        if n.wake <= s.now {
            return false;
        }
        let probe = Input::Reply(self.p.now(i, s.now), id, self.probe.clone());
        let (next, step) = self.step(s, i, probe);
        next.fp == n.fp && next.wake == n.wake && step.calls.is_empty() && !step.any_event
    }

    /// Removes messages that can no longer change anything: replies to calls
    /// their machine no longer waits for (or to a machine that is gone), and
    /// reads whose replies would be such. (Writes stay: a late write can
    /// still land.) Delivering or losing such a message leaves every machine
    /// and the store as they are, so removing them merges states without
    /// losing any behaviour.
    fn collect_garbage(&self, s: &mut State) {
        let mut keep = Vec::with_capacity(s.net.len());
        for m in std::mem::take(&mut s.net) {
            // Call ids only grow: a call the machine no longer waits for
            // (timed out, moved on) is never waited for again.
            let dead = match &*m.body {
                _ if m.body.is_write() => false,
                Body::Reply { node, inc, id, .. } | Body::Request { node, inc, id, .. } => {
                    let n = &s.nodes[*node];
                    !n.alive || n.inc != *inc || n.in_flight != id.0
                }
            };
            if !dead {
                keep.push(m);
            }
        }
        s.net = keep;
    }

    fn due(&self, s: &State) -> bool {
        s.nodes.iter().any(|n| n.wake <= s.now)
    }

    /// The next instant time may advance to, if any.
    fn next_time(&self, s: &State) -> Option<u64> {
        let wakes = s.nodes.iter().map(|n| n.wake);
        model_kit::next_time(s.now, wakes, self.p.latency_step, &s.net, self.p.horizon_ms)
    }

    /// Puts a message in flight, to be delivered (or lost) within
    /// `max_delay`.
    fn send(&self, s: &mut State, body: Body) {
        let msg = Msg {
            fp: body.fp(),
            deadline: s.now + self.p.max_delay,
            body: Arc::new(body),
        };
        model_kit::insert(&mut s.net, msg);
    }
}

impl Model for LeaseModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let start = |i, seed| self.start(i, seed, 0, Vec::new());
        model_kit::initial_nodes(self.p.nodes, &self.p.seeds, start)
            .into_iter()
            .map(|nodes| State {
                now: 0,
                nodes,
                store: StoreState {
                    versions: 0,
                    object: None,
                    previous: None,
                },
                net: Vec::new(),
                budget: self.p.budget,
                max_acquired: 0,
                acquisitions: 0,
                released: false,
                restarted_acquired: false,
                // The first acquisition takes its round trips (read, create,
                // list): with latency, nobody holds until they are done.
                calm_at: 8 * self.p.max_delay,
                token_regressed: None,
                store_regressed: None,
                self_loss: None,
                locked_out: None,
            })
            .collect()
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        // A violating state is not expanded (see `model_kit::violates`).
        if model_kit::violates(self.p.only, &s.failing()) {
            return;
        }
        let b = s.budget;
        for (i, m) in model_kit::distinct(&s.net) {
            actions.push(Action::Deliver(i));
            if let Body::Request { call, .. } = &*m.body {
                let op = &call.op;
                let mut fault = |answer| actions.push(Action::Fault { msg: i, answer });
                if b.errors > 0 {
                    fault(Answer::ServerError { applied: true });
                    if op.is_write() {
                        fault(Answer::ServerError { applied: false });
                    }
                }
                if b.throttles > 0 {
                    for &ra in &self.p.retry_after_ms {
                        fault(Answer::Throttled(ra));
                    }
                }
                if b.conflicts > 0 && matches!(op, StoreOp::Put { .. }) {
                    fault(Answer::Conflict);
                }
                if b.stale_reads > 0 && matches!(op, StoreOp::Get { .. }) {
                    fault(Answer::Stale);
                }
                if b.blind_writes > 0 && matches!(op, StoreOp::Put { .. }) {
                    fault(Answer::Blind);
                }
                if b.dups > 0 {
                    actions.push(Action::Duplicate(i));
                }
            }
            if b.losses > 0 {
                actions.push(Action::Drop(i));
            }
            if b.delays > 0 && !m.held_back() {
                actions.push(Action::Delay(i));
            }
        }
        for (i, n) in s.nodes.iter().enumerate() {
            if n.wake <= s.now {
                actions.push(Action::Poll(i));
            }
            if b.stops > 0 && n.alive && !n.stopping && n.wake != u64::MAX {
                actions.push(Action::Node(i, Process::Stop));
            }
            if b.crashes > 0 && n.alive && n.wake != u64::MAX {
                actions.push(Action::Node(i, Process::Crash));
            }
            if !n.alive {
                actions.push(Action::Node(i, Process::Restart));
            }
        }
        if let Some(t) = self.next_time(s) {
            if !self.due(s) || b.pauses > 0 {
                actions.push(Action::Tick(t));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Deliver(i) => {
                let msg = s.net.remove(i);
                if msg.held_back() {
                    // A late delivery is a fault too.
                    self.disrupt_msg(&mut s, &msg.body);
                }
                match &*msg.body {
                    Body::Request { .. } => self.serve(&mut s, &msg, Answer::Apply),
                    Body::Reply { .. } => self.deliver_reply(&mut s, &msg),
                }
            }
            Action::Fault { msg, answer } => {
                let msg = s.net.remove(msg);
                let b = &mut s.budget;
                match answer {
                    Answer::Apply => unreachable!("not a fault"),
                    Answer::ServerError { .. } => b.errors -= 1,
                    Answer::Throttled(_) => b.throttles -= 1,
                    Answer::Conflict => b.conflicts -= 1,
                    Answer::Stale => b.stale_reads -= 1,
                    Answer::Blind => b.blind_writes -= 1,
                }
                self.disrupt_msg(&mut s, &msg.body);
                self.serve(&mut s, &msg, answer);
            }
            Action::Drop(i) => {
                let msg = s.net.remove(i);
                s.budget.losses -= 1;
                self.disrupt_msg(&mut s, &msg.body);
            }
            Action::Delay(i) => {
                s.budget.delays -= 1;
                let body = model_kit::hold_back(&mut s.net, i);
                self.disrupt_msg(&mut s, &body);
            }
            Action::Duplicate(i) => {
                // One copy is delivered now; the other stays in flight.
                s.budget.dups -= 1;
                let msg = s.net[i].clone();
                self.disrupt_msg(&mut s, &msg.body);
                self.serve(&mut s, &msg, Answer::Apply);
            }
            Action::Poll(i) => {
                // A message of the call the node waits for, still in the
                // network within its normal latency (one held back was a
                // disruption when the fault held it): if the poll moves the
                // node on from that call, the call timed out (latency reached
                // the request timeout, or the lease's deadline came first).
                // From the node's side that is a lost reply: a disruption,
                // like one.
                let waited = s.nodes[i].in_flight;
                let slow = s
                    .net
                    .iter()
                    .filter(|m| !m.held_back())
                    .find(|m| match &*m.body {
                        Body::Request { node, inc, id, .. } | Body::Reply { node, inc, id, .. } => {
                            *node == i && *inc == s.nodes[i].inc && waited != 0 && id.0 == waited
                        }
                    })
                    .map(|m| m.body.clone());
                let input = Input::Poll(self.p.now(i, s.now));
                self.node_input(&mut s, i, input, None);
                if let Some(body) = slow {
                    if s.nodes[i].in_flight != waited {
                        self.disrupt_msg(&mut s, &body);
                    }
                }
            }
            Action::Node(i, Process::Stop) => {
                s.budget.stops -= 1;
                // The node may leave a record behind (see the module docs).
                self.disrupt(&mut s, Disruption::Orphan);
                let input = Input::Stop(self.p.now(i, s.now));
                self.node_input(&mut s, i, input, None);
                s.nodes[i].stopping = true;
            }
            Action::Node(i, Process::Crash) => {
                s.budget.crashes -= 1;
                self.disrupt(&mut s, Disruption::Orphan);
                let n = &mut s.nodes[i];
                *n = Node {
                    seed: 0,
                    history: History::default(),
                    fp: 0,
                    phase: Phase::Crashed,
                    in_flight: 0,
                    wake: u64::MAX,
                    held_until: None,
                    lease_session: 0,
                    alive: false,
                    stopping: false,
                    sessions: Vec::new(),
                    ..n.clone()
                };
            }
            Action::Node(i, Process::Restart) => {
                self.disrupt(&mut s, Disruption::Settle);
                let n = &s.nodes[i];
                s.nodes[i] = self.start(i, n.base_seed, n.inc + 1, Vec::new());
            }
            Action::Tick(t) => {
                let paused = self.due(&s);
                s.now = t;
                if paused {
                    s.budget.pauses -= 1;
                    self.disrupt(&mut s, Disruption::Settle);
                }
            }
        }
        if self.p.collect_garbage {
            self.collect_garbage(&mut s);
        }
        if s.calm_at <= s.now {
            s.calm_at = 0;
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let safety: [Property<Self>; 6] = [
            Property::always(AT_MOST_ONE, |_, s: &State| s.holders().len() <= 1),
            Property::always(TOKENS_INCREASE, |_, s: &State| s.token_regressed.is_none()),
            Property::always(STORE_TOKEN_MONOTONE, |_, s: &State| {
                s.store_regressed.is_none()
            }),
            Property::always(NO_SELF_LOSS, |_, s: &State| s.self_loss.is_none()),
            Property::always(NOT_LOCKED_OUT, |_, s: &State| s.locked_out.is_none()),
            Property::always(LIVE, |_, s: &State| !s.stalled()),
        ];
        let mut props = model_kit::checked(self.p.only, safety);
        props.extend([
            // Reachability: the checks are not vacuous.
            Property::sometimes(ACQUIRED, |_, s: &State| s.acquisitions >= 1),
            Property::sometimes(TAKEOVER, |_, s: &State| s.acquisitions >= 2),
        ]);
        if self.p.verify {
            props.push(Property::always(VERIFIED, |m: &LeaseModel, s: &State| {
                m.verify(s);
                true
            }));
        }
        if self.p.budget.stops > 0 {
            props.push(Property::sometimes(RELEASED, |_, s: &State| s.released));
        }
        if self.p.budget.crashes > 0 {
            props.push(Property::sometimes(RESTARTED, |_, s: &State| {
                s.restarted_acquired
            }));
        }
        props
    }

    fn format_step(&self, last: &State, action: Action) -> Option<String> {
        Some(describe(last, &action))
    }
}

const AT_MOST_ONE: &str = "at most one node believes it holds the lease";
const TOKENS_INCREASE: &str = "fencing tokens strictly increase";
const STORE_TOKEN_MONOTONE: &str = "the stored token never decreases";
const NO_SELF_LOSS: &str =
    "no node reports losing the lease to another while the record is its own";
const NOT_LOCKED_OUT: &str = "no node takes its own live record for another holder's";
const LIVE: &str = "after a calm spell some live node holds the lease";
const VERIFIED: &str = "the memoised view agrees with a replay of the machines";
const SAFETY: [&str; 6] = [
    AT_MOST_ONE,
    TOKENS_INCREASE,
    STORE_TOKEN_MONOTONE,
    NO_SELF_LOSS,
    NOT_LOCKED_OUT,
    LIVE,
];
const ACQUIRED: &str = "a lease is acquired";
const TAKEOVER: &str = "a second acquisition";
const RELEASED: &str = "a resignation releases the lease";
const RESTARTED: &str = "a restarted process acquires the lease";
impl LeaseModel {
    /// Rebuilds every machine of `s` from its history and checks that the
    /// state's memoised view is the machine's: identity, phase, and
    /// `Elector::lease(local now)` against `held_until`.
    fn verify(&self, s: &State) {
        for (i, n) in s.nodes.iter().enumerate() {
            if !n.alive {
                continue;
            }
            let (fp, phase, in_flight, lease) = self.replayed.get(&n.history, n.seed, || {
                let e = self.rebuild(i, n);
                let (fp, phase, in_flight) = machine_fp(&e);
                // `lease(now)` is `Some` while `now` is before the deadline
                // of a lease the phase keeps.
                let lease = e
                    .lease(Mono(0))
                    .map(|l| (l.valid_until, session_fp(&l.acquisition)));
                (fp, phase, in_flight, lease)
            });
            assert_eq!(fp, n.fp, "node {i}: memoised identity differs");
            assert_eq!(phase, n.phase, "node {i}: memoised phase differs");
            assert_eq!(in_flight, n.in_flight, "node {i}: memoised call differs");
            // The reading of the awaited call agrees with the machine: a
            // reply to any other call in flight changes nothing.
            if n.wake > s.now {
                for m in &s.net {
                    let (node, inc) = m.body.sender();
                    let id = match &*m.body {
                        Body::Request { id, .. } | Body::Reply { id, .. } => id.0,
                    };
                    if node == i && inc == n.inc {
                        assert_eq!(
                            self.ignores(s, i, CallId(id)),
                            id != n.in_flight,
                            "node {i}: call {id} misread"
                        );
                    }
                }
            }
            let now = self.p.now(i, s.now).mono;
            let lease = lease.filter(|(valid_until, _)| now < *valid_until);
            assert_eq!(
                lease.is_some(),
                n.holds(s.now),
                "node {i} at t={}: lease belief differs",
                s.now
            );
            if let Some((_, session)) = lease {
                assert_eq!(session, n.lease_session, "node {i}: lease session differs");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Running the checker
// ---------------------------------------------------------------------------

type Report = model_kit::Report<State, Action>;

fn check(name: &str, p: Params, stop_at_first_failure: bool) -> Report {
    println!("[{name}] {p:?}");
    let depth_first = p.depth_first;
    let model = LeaseModel::new(p);
    println!(
        "[{name}] liveness bounds: {} ms after a disruption, {} ms when it may orphan a record",
        model.settle, model.orphan
    );
    model_kit::check(name, model, depth_first, stop_at_first_failure, &SAFETY)
}

fn describe_op(op: &StoreOp) -> String {
    match op {
        StoreOp::Put {
            body, condition, ..
        } => {
            let cond = describe_condition(condition);
            match LeaseRecord::decode(body) {
                Ok(r) => format!(
                    "PUT {cond} [{} token {} session {:04x} expires {}{}]",
                    r.holder,
                    r.token,
                    session_fp(&r.acquisition) & 0xFFFF,
                    r.expires_at,
                    if r.released { " released" } else { "" }
                ),
                Err(_) => format!("PUT {cond}"),
            }
        }
        other => other.verb().to_string(),
    }
}

/// One step of a counterexample, in words.
fn describe(s: &State, a: &Action) -> String {
    let how = |answer: &Answer| match answer {
        Answer::Apply => "normally".to_string(),
        Answer::ServerError { applied: true } => "500 after applying".into(),
        Answer::ServerError { applied: false } => "500 without applying".into(),
        Answer::Throttled(ra) => format!("429 Retry-After {ra} ms to"),
        Answer::Conflict => "409 to".into(),
        Answer::Stale => "with the previous version (stale read) to".into(),
        Answer::Blind => "ignoring the condition of".into(),
    };
    let process = |p: &Process| match p {
        Process::Stop => "asked to resign".to_string(),
        Process::Crash => "process dies".into(),
        Process::Restart => "process starts again".into(),
    };
    model_kit::describe(&s.net, a, holder, how, process)
}

/// Two nodes over two ttls (6 s of 3 s leases), HTTP dates, no latency,
/// no faults: each test adds the faults it is about.
fn base(variant: Variant) -> Params {
    Params {
        nodes: 2,
        variant,
        horizon_ms: 6_000,
        budget: Budget::default(),
        http_dates: true,
        store_phase: 700,
        wall_offsets: vec![0, 0, 0],
        max_delay: 0,
        latency_step: None,
        seeds: vec![1],
        retry_after_ms: vec![1_000, 5_000],
        bound_cut_ms: 0,
        only: None,
        client: Client::Sound,
        verify: false,
        collect_garbage: true,
        depth_first: false,
        #[cfg(lease_mutants)]
        mutant: None,
    }
}

fn faults(losses: u8, dups: u8, errors: u8, delays: u8) -> Budget {
    Budget {
        losses,
        dups,
        errors,
        delays,
        ..Budget::default()
    }
}

/// Checks a configuration of the safe protocol: no counterexample to any
/// safety property, and every reachability property shown (the faults do
/// make the lease change hands, so the checks are not vacuous).
fn assert_safe(name: &str, p: Params) -> Report {
    let mut expected = vec![ACQUIRED, TAKEOVER];
    if p.budget.stops > 0 {
        expected.push(RELEASED);
    }
    if p.budget.crashes > 0 {
        expected.push(RESTARTED);
    }
    expected.sort();
    let r = check(name, p, false);
    r.assert_safe(name, &[]);
    assert_eq!(
        r.examples, expected,
        "[{name}] the model never exercised a takeover"
    );
    r
}

/// Checks that a broken setting is caught: some safety property has a
/// counterexample (the checker stops at the first).
fn assert_caught(name: &str, p: Params) -> Report {
    let r = check(name, p, true);
    assert!(
        !r.failures.is_empty(),
        "[{name}] the broken variant was not caught"
    );
    r
}

// ---------------------------------------------------------------------------
// The safe protocol
// ---------------------------------------------------------------------------

#[test]
fn safe_two_nodes_with_loss_duplication_and_500s() {
    let p = Params {
        horizon_ms: 4_500,
        budget: faults(1, 1, 1, 0),
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 4.5 s, 1 loss + 1 duplicate + 1 500", p);
}

#[test]
fn safe_two_nodes_with_late_delivery() {
    // A message held back indefinitely: a write that lands after its
    // sender timed out, re-read and moved on.
    let p = Params {
        horizon_ms: 4_500,
        budget: faults(1, 0, 0, 1),
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 4.5 s, 1 loss + 1 late", p);
}

#[test]
fn safe_two_nodes_throttled_and_refused() {
    // 429 with a Retry-After of 1 s (waited out) or 5 s (past the
    // operation's deadline: it ends at once), 409 on a PUT, a loss: two
    // of them at a time (all three: `safe_two_nodes_throttled_refused_
    // and_lossy`, ignored).
    for (throttles, conflicts, losses) in [(1, 1, 0), (1, 0, 1), (0, 1, 1)] {
        let p = Params {
            budget: Budget {
                throttles,
                conflicts,
                losses,
                ..Budget::default()
            },
            ..base(Variant::Safe)
        };
        assert_safe(
            &format!("safe: 2 nodes, 6 s, {throttles} 429 + {conflicts} 409 + {losses} loss"),
            p,
        );
    }
}

#[test]
fn safe_two_nodes_crashing_restarting_and_resigning() {
    // A crash (the process may be restarted later) with a resignation over
    // one and a half ttls; and a crash alone over three, so that the
    // liveness bound after a crash (the dead process's record must expire
    // first) falls inside the horizon.
    for (horizon_ms, stops) in [(4_500, 1), (9_000, 0)] {
        let p = Params {
            horizon_ms,
            budget: Budget {
                crashes: 1,
                stops,
                ..Budget::default()
            },
            ..base(Variant::Safe)
        };
        assert_safe(
            &format!(
                "safe: 2 nodes, {} s, 1 crash (and restart) + {stops} resignation",
                horizon_ms as f64 / 1000.0
            ),
            p,
        );
    }
}

#[test]
fn safe_two_nodes_resigning_while_throttled_or_refused() {
    for (throttles, conflicts) in [(1, 0), (0, 1)] {
        let p = Params {
            budget: Budget {
                stops: 1,
                throttles,
                conflicts,
                ..Budget::default()
            },
            ..base(Variant::Safe)
        };
        assert_safe(
            &format!("safe: 2 nodes, 6 s, 1 resignation + {throttles} 429 + {conflicts} 409"),
            p,
        );
    }
}

#[test]
fn model_agrees_with_the_machines() {
    // Rebuilds every machine from its inputs at every state and compares
    // with the memoised view: identity, phase, awaited call (checked
    // against feeding the machine a reply), lease belief and session. With
    // the garbage collection of dead messages, and (for the faults that
    // leave most of them: a late delivery and a loss) without it: the
    // reduction must not change the verdict.
    let budgets = [
        (
            Budget {
                losses: 1,
                delays: 1,
                ..Budget::default()
            },
            &[true, false][..],
        ),
        (
            Budget {
                throttles: 1,
                crashes: 1,
                ..Budget::default()
            },
            &[true],
        ),
        (
            Budget {
                dups: 1,
                conflicts: 1,
                stops: 1,
                ..Budget::default()
            },
            &[true],
        ),
    ];
    for (budget, gcs) in budgets {
        for &collect_garbage in gcs {
            let p = Params {
                budget,
                horizon_ms: 3_000,
                verify: true,
                collect_garbage,
                ..base(Variant::Safe)
            };
            let name = format!("safe, verified: 2 nodes, 3 s, {budget:?}, gc {collect_garbage}");
            check(&name, p, false).assert_safe(&name, &[TAKEOVER]);
        }
    }
}

// ---------------------------------------------------------------------------
// What the model found in the core, fixed (see the module docs)
// ---------------------------------------------------------------------------

#[test]
fn finding_a_a_refused_write_whose_copy_applied() {
    // A create is sent twice by the transport: one copy applies, the other
    // is answered 412. The re-read that would have found the record is
    // answered 500. The refusal did not settle the write: the re-read is
    // made again (a read that settles a refused write goes on past the
    // retry budget, to the operation's deadline), and an operation that
    // still gives up hands the write on as a claim, so the next campaign
    // takes the record over instead of waiting behind it (it used to wait,
    // and everyone with it, for up to a ttl). A lost message is added so
    // that the lease changes hands within the run.
    let p = Params {
        budget: faults(1, 1, 1, 0),
        ..base(Variant::Safe)
    };
    assert_safe("finding A: 2 nodes, 6 s, 1 loss + 1 duplicate + 1 500", p);
}

#[test]
fn finding_b_a_won_create_abandoned() {
    // A create applies and is answered; the LIST check that follows is
    // throttled with a Retry-After past the operation's deadline. The
    // acquire gives the create back (a conditional delete) and hands it on
    // as a claim (it used to give up with neither).
    let p = Params {
        budget: Budget {
            throttles: 1,
            ..Budget::default()
        },
        retry_after_ms: vec![5_000],
        ..base(Variant::Safe)
    };
    // One fault, spent on the first acquisition: the lease never changes
    // hands again, so only the safety properties and liveness are asked.
    let name = "finding B: 2 nodes, 6 s, 1 429";
    check(name, p, false).assert_safe(name, &[ACQUIRED]);
}

#[test]
fn finding_c_a_late_create_after_a_give_back() {
    // Node 1's create is held in the network past its timeout; its re-read
    // finds node 0's new record and the acquire ends `Busy`. Node 0's LIST
    // check is lost and its re-read answered 500: it gives its create back
    // (a conditional delete). Then node 1's create lands, on a free key.
    // The `Busy` handed the open create on as a claim, so node 1 takes the
    // record over at its next campaign (it used to wait behind it).
    // The lockout came at node 1's second campaign, at 1.54 s; over two
    // ttls: `safe_two_nodes_with_loss_500s_and_late_delivery` (ignored).
    let p = Params {
        horizon_ms: 1_600,
        budget: faults(1, 0, 1, 1),
        ..base(Variant::Safe)
    };
    let name = "finding C: 2 nodes, 1.6 s, 1 loss + 1 500 + 1 late";
    check(name, p, false).assert_safe(name, &[ACQUIRED]);
}

// ---------------------------------------------------------------------------
// Broken variants and settings are caught
// ---------------------------------------------------------------------------

#[test]
fn trust_replies_is_caught() {
    // Taking a lost reply (timeout) or a 500 on a write as success: two
    // holders, and (checked on its own) a token handed out twice.
    for only in [AT_MOST_ONE, TOKENS_INCREASE] {
        let p = Params {
            budget: faults(1, 0, 1, 0),
            only: Some(only),
            ..base(Variant::TrustReplies)
        };
        let r = assert_caught(
            &format!("trust-replies: 2 nodes, 6 s, 1 loss + 1 500, only \"{only}\""),
            p,
        );
        assert_eq!(r.failures[0].0, only);
    }
}

#[test]
fn store_token_regression_is_caught_with_blind_writes() {
    // A store that may apply a PUT with its condition ignored (not S3, GCS
    // or Azure: one the capability probe refuses). A renewal held back in
    // the network lands, unconditionally, over the record of a later
    // acquisition (token 2, taken over after the lease expired): the stored
    // token goes back to 1.
    let p = Params {
        budget: Budget {
            delays: 1,
            blind_writes: 1,
            ..Budget::default()
        },
        only: Some(STORE_TOKEN_MONOTONE),
        ..base(Variant::Safe)
    };
    let r = assert_caught("blind writes: 2 nodes, 6 s, 1 late + 1 blind write", p);
    assert_eq!(r.failures[0].0, STORE_TOKEN_MONOTONE);
}

/// Run by `make test-mutants` (a test build with `--cfg lease_mutants`).
#[test]
#[cfg(lease_mutants)]
fn no_settle_mutant_is_caught() {
    // The fix undone that gives up on a write of unknown outcome with no
    // claim (finding 2, docs/verification.md): a create applied and
    // answered 500, its re-read answered 500 too; the node then waits
    // behind its own record.
    let p = Params {
        budget: faults(0, 0, 2, 0),
        mutant: Some(lease_core::mutants::Mutant::NoSettle),
        ..base(Variant::Safe)
    };
    let r = assert_caught("no-settle: 2 nodes, 6 s, 2 500s", p);
    assert_eq!(r.failures[0].0, NOT_LOCKED_OUT);
}

#[test]
fn naive_clock_is_caught() {
    // Trusting wall clocks: node 1's clock runs 1.5 s ahead of node 0's.
    let p = Params {
        budget: faults(1, 1, 1, 0),
        wall_offsets: vec![0, 1_500],
        ..base(Variant::NaiveClock)
    };
    let r = assert_caught("naive-clock: 2 nodes, 6 s, wall +1.5 s", p);
    assert_eq!(r.failures[0].0, AT_MOST_ONE);
}

#[test]
fn self_loss_is_caught_with_stale_reads() {
    // A store that may answer a GET from the previous version (not S3,
    // GCS or Azure: a cache in front of one). A renewal answered 409
    // re-reads, sees the version before its own create (none), and reports
    // the lease lost (vanished) while the record is its own.
    let p = Params {
        budget: Budget {
            conflicts: 1,
            stale_reads: 1,
            ..Budget::default()
        },
        ..base(Variant::Safe)
    };
    let r = assert_caught("stale reads: 2 nodes, 6 s, 1 409 + 1 stale read", p);
    assert_eq!(r.failures[0].0, NO_SELF_LOSS);
}

#[test]
fn lockout_is_caught_with_an_amnesiac_client() {
    // A program that replaces its elector after an error: a renewal
    // throttled past its retry budget, and the fresh elector, which knows
    // nothing of the records its predecessor wrote, waits behind the
    // process's own live record.
    let p = Params {
        budget: Budget {
            throttles: 1,
            ..Budget::default()
        },
        retry_after_ms: vec![1_000],
        client: Client::Amnesiac,
        ..base(Variant::Safe)
    };
    let r = assert_caught("amnesiac client: 2 nodes, 6 s, 1 429", p);
    assert_eq!(r.failures[0].0, NOT_LOCKED_OUT);
}

#[test]
fn stall_is_caught_with_a_bound_too_short() {
    // The settle bound (2.7 s here) is derived, not measured, but not loose
    // either: cut to 1.2 s, it fails for the safe protocol itself, whose
    // longest stall after a 429 and a loss is about 1.4 s.
    let p = Params {
        budget: Budget {
            throttles: 1,
            losses: 1,
            ..Budget::default()
        },
        bound_cut_ms: 1_500,
        ..base(Variant::Safe)
    };
    let r = assert_caught("bound 1.5 s short: 2 nodes, 6 s, 1 429 + 1 loss", p);
    assert_eq!(r.failures[0].0, LIVE);
}

/// Run by `make test-mutants` (a test build with `--cfg lease_mutants`).
#[test]
#[cfg(lease_mutants)]
fn uncapped_retry_after_mutant_is_caught() {
    // The fix undone that leaves an operation no overall deadline (finding
    // 3 of the safety issue): a Retry-After of 5 s is waited out instead of
    // ending the operation, and with both nodes throttled nobody holds the
    // lease for longer than the bound.
    let p = Params {
        budget: Budget {
            throttles: 2,
            ..Budget::default()
        },
        retry_after_ms: vec![5_000],
        mutant: Some(lease_core::mutants::Mutant::UncappedRetryAfter),
        ..base(Variant::Safe)
    };
    let r = assert_caught("uncapped Retry-After: 2 nodes, 6 s, 2 429", p);
    assert_eq!(r.failures[0].0, LIVE);
}

// ---------------------------------------------------------------------------
// The larger configurations: run with
// `cargo test -p lease-core --release --test model -- --ignored --nocapture`.
// ---------------------------------------------------------------------------

#[test]
#[ignore = "large: run in release with --ignored"]
fn no_margins_is_caught() {
    // Without the date-resolution margin, a holder that stamped its expiry
    // from a truncated `Date` still believes in its lease after a
    // contender's read has seen it expire. Needs the dates' truncation to
    // line up with the faults' timing: several faults.
    let p = Params {
        budget: faults(1, 1, 1, 1),
        only: Some(AT_MOST_ONE),
        ..base(Variant::NoMargins)
    };
    let r = assert_caught("no-margins: 2 nodes, 6 s, 1 of each fault", p);
    assert_eq!(r.failures[0].0, AT_MOST_ONE);
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_over_two_ttls_with_loss_duplication_and_500s() {
    let p = Params {
        budget: faults(1, 1, 1, 0),
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 6 s, 1 loss + 1 duplicate + 1 500", p);
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_throttled_refused_and_lossy() {
    let p = Params {
        budget: Budget {
            throttles: 1,
            conflicts: 1,
            losses: 1,
            ..Budget::default()
        },
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 6 s, 1 429 + 1 409 + 1 loss", p);
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_with_loss_500s_and_late_delivery() {
    // Finding C's faults over two ttls.
    let p = Params {
        budget: faults(1, 0, 1, 1),
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 6 s, 1 loss + 1 500 + 1 late", p);
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_with_late_delivery_and_duplication() {
    let p = Params {
        budget: faults(1, 1, 0, 1),
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 6 s, 1 loss + 1 duplicate + 1 late", p);
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_with_network_faults_and_refusals() {
    let p = Params {
        budget: Budget {
            throttles: 1,
            conflicts: 1,
            ..faults(1, 0, 1, 0)
        },
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 6 s, 1 loss + 1 500 + 1 429 + 1 409", p);
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_crashing_with_network_faults() {
    let p = Params {
        horizon_ms: 9_000,
        budget: Budget {
            crashes: 1,
            ..faults(1, 0, 1, 0)
        },
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 9 s, 1 crash + 1 loss + 1 500", p);
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_crashing_and_resigning_over_three_ttls() {
    let p = Params {
        horizon_ms: 9_000,
        budget: Budget {
            crashes: 1,
            stops: 1,
            pauses: 1,
            ..Budget::default()
        },
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 9 s, 1 crash + 1 resignation + 1 pause", p);
}

/// One crash, one resignation, one 429 and one 409.
fn crash_429_409() -> Budget {
    Budget {
        crashes: 1,
        stops: 1,
        throttles: 1,
        conflicts: 1,
        ..Budget::default()
    }
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_crashing_resigning_throttled_and_refused() {
    let p = Params {
        budget: crash_429_409(),
        ..base(Variant::Safe)
    };
    assert_safe(
        "safe: 2 nodes, 6 s, 1 crash + 1 resignation + 1 429 + 1 409",
        p,
    );
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_three_nodes_with_network_faults() {
    let p = Params {
        nodes: 3,
        budget: faults(1, 1, 1, 0),
        ..base(Variant::Safe)
    };
    assert_safe("safe: 3 nodes, 6 s, 1 loss + 1 duplicate + 1 500", p);
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_three_nodes_crashing_throttled_and_refused() {
    let p = Params {
        nodes: 3,
        budget: Budget {
            stops: 0,
            ..crash_429_409()
        },
        ..base(Variant::Safe)
    };
    assert_safe("safe: 3 nodes, 6 s, 1 crash + 1 429 + 1 409", p);
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_with_pauses_and_resignation() {
    let p = Params {
        budget: Budget {
            pauses: 1,
            stops: 1,
            ..faults(1, 1, 1, 0)
        },
        ..base(Variant::Safe)
    };
    assert_safe(
        "safe: 2 nodes, 6 s, 1 loss + 1 duplicate + 1 500 + 1 pause + 1 resignation",
        p,
    );
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_over_three_ttls_with_other_seeds_and_phases() {
    // Other jitter (entropy seeds) and other alignments of the store's
    // clock with whole seconds.
    for (seeds, phase) in [(vec![2, 3], 0), (vec![4, 5], 999)] {
        let p = Params {
            horizon_ms: 9_000,
            budget: faults(1, 1, 1, 0),
            seeds,
            store_phase: phase,
            ..base(Variant::Safe)
        };
        assert_safe(
            &format!("safe: 2 nodes, 9 s, 1 loss + 1 duplicate + 1 500, store phase {phase}"),
            p,
        );
    }
}

#[test]
#[ignore = "large: run in release with --ignored"]
fn safe_two_nodes_with_latency() {
    // Messages take 0 or 250 ms: requests and replies cross each other,
    // and the store stamps dates between the timer instants.
    let p = Params {
        horizon_ms: 3_500,
        max_delay: 250,
        latency_step: Some(250),
        budget: faults(1, 0, 0, 0),
        depth_first: true,
        ..base(Variant::Safe)
    };
    assert_safe("safe: 2 nodes, 3.5 s, latency 0-250 ms, 1 loss", p);
}
