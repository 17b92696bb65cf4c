//! What the two `stateright` model checks share: `tests/model.rs` (electors
//! contending for one lease) and `tests/model_sessions.rs` (sessions and the
//! key they own). Each file's module docs describe its model; this module is
//! the machinery both run on:
//!
//! - **fingerprints** ([`Fp`]): two-lane multiply-xorshift hashes of words,
//!   bytes and `Debug` output (fast in the debug builds the tests run in,
//!   unlike SipHash), and those of store requests, replies and objects;
//! - **machines inside states**: a model checker must copy, hash and compare
//!   states, but the machines are neither `Clone` nor `Hash`. A machine's
//!   identity in a state is a fingerprint of its `Debug` output (which
//!   prints every field of every nested struct, so it is canonical: two
//!   machines with equal output behave identically from then on). The
//!   machine is deterministic, so it can be rebuilt from its seed and a list
//!   of inputs: [`Transitions`] records how each machine state was first
//!   reached and replays that, and memoises each (machine state, input)
//!   transition, the first input to a state taking the machine that
//!   transition produced instead of replaying. `verify` runs keep each
//!   node's own [`History`] and compare a replay of it ([`Replays`]) with
//!   the memoised view. The elector's phase and awaited call (private
//!   fields) are read from the same `Debug` text ([`phase_of`],
//!   [`in_flight_of`]);
//! - **time** ([`Settings`]): global time is discrete; a node's monotonic
//!   clock is global time plus its own origin, the store's clock is global
//!   time plus [`STORE_EPOCH`] and a phase, and the store dates its replies
//!   at one-second resolution like an HTTP `Date` (or exactly). Time
//!   advances only to the next instant something is due ([`next_time`]);
//! - **the network**: a multiset of messages ([`Msg`]), each identified by
//!   a fingerprint of its content and kept sorted (canonical), and the
//!   steps a model takes ([`Action`]): a message delivered, answered
//!   otherwise by the store, lost, held back or duplicated, a node polled
//!   or otherwise disturbed (each model's own faults), time advanced;
//! - **the state's identity** ([`state_fp`], [`by_identity!`]);
//! - **running the checker** ([`check`]): breadth or depth first, every
//!   safety property or only one ([`violates`], [`checked`]), each
//!   counterexample printed with its path, step by step ([`describe`]).
//!
//! Each test target includes it with `mod model_kit;` (a directory module,
//! so that cargo does not build it as a test target of its own).

use lease_core::store::{PutCondition, ReplyKind};
use lease_core::time::StoreDate;
use lease_core::{Etag, Mono, StoreOp, StoreReply, UnixMillis};
use stateright::{Checker, HasDiscoveries, Model, Property};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

// ---------------------------------------------------------------------------
// Fingerprints
// ---------------------------------------------------------------------------

/// A 128-bit fingerprint of a sequence of 64-bit words: two lanes, each a
/// bijection of its state per word (xor, odd multiply, xorshift), so two
/// inputs of equal length that differ in one word never collide. Cheap in
/// the debug builds the tests run in, unlike SipHash.
#[derive(Clone, Copy)]
pub struct Fp {
    a: u64,
    b: u64,
    n: u64,
}

impl Fp {
    pub fn new(tag: u64) -> Fp {
        let mut f = Fp {
            a: 0x243F_6A88_85A3_08D3,
            b: 0x1319_8A2E_0370_7344,
            n: 0,
        };
        f.u64(tag);
        f
    }

    pub fn u64(&mut self, w: u64) -> &mut Fp {
        self.n = self.n.wrapping_add(1);
        let a = (self.a ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.a = a ^ (a >> 29);
        let b = (self.b ^ w.rotate_left(32)).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        self.b = b ^ (b >> 31);
        self
    }

    pub fn u128(&mut self, v: u128) -> &mut Fp {
        self.u64(v as u64).u64((v >> 64) as u64)
    }

    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Fp {
        self.u64(bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.u64(u64::from_le_bytes([
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
            ]));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.u64(u64::from_le_bytes(w));
        }
        self
    }

    pub fn str(&mut self, s: &str) -> &mut Fp {
        self.bytes(s.as_bytes())
    }

    pub fn opt(&mut self, v: Option<u64>) -> &mut Fp {
        match v {
            Some(v) => self.u64(1).u64(v),
            None => self.u64(0),
        }
    }

    /// An optional pair of words (a violation's witness in a state).
    pub fn pair(&mut self, v: Option<(u64, u64)>) -> &mut Fp {
        match v {
            Some((a, b)) => self.u64(1).u64(a).u64(b),
            None => self.u64(0),
        }
    }

    /// `v`'s derived `Hash`, each integer a word (a struct of counters: its
    /// fields in declaration order).
    pub fn hashed(&mut self, v: &impl Hash) -> &mut Fp {
        v.hash(&mut Words(self));
        self
    }

    pub fn finish(&self) -> u128 {
        let a = fmix(self.a ^ self.n);
        let b = fmix(self.b ^ self.n.rotate_left(32) ^ a);
        ((a as u128) << 64) | b as u128
    }
}

fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    k ^= k >> 33;
    k = k.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    k ^ (k >> 33)
}

/// A `Hasher` that feeds an [`Fp`]: each integer written is one word.
struct Words<'a>(&'a mut Fp);

impl Hasher for Words<'_> {
    fn finish(&self) -> u64 {
        self.0.finish() as u64
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.bytes(bytes);
    }
    fn write_u8(&mut self, v: u8) {
        self.0.u64(v as u64);
    }
    fn write_u16(&mut self, v: u16) {
        self.0.u64(v as u64);
    }
    fn write_u32(&mut self, v: u32) {
        self.0.u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0.u64(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.0.u64(v as u64);
    }
}

thread_local! {
    static TEXT: RefCell<String> = RefCell::new(String::with_capacity(16 * 1024));
}

/// Fingerprint of a value's `Debug` output, and what `with` reads from the
/// text.
pub fn fp_debug_with<T>(value: &impl fmt::Debug, with: impl FnOnce(&str) -> T) -> (u128, T) {
    TEXT.with(|text| {
        let mut text = text.borrow_mut();
        text.clear();
        write!(text, "{value:?}").expect("formatting into a String");
        (Fp::new(0xDEB).str(&text).finish(), with(&text))
    })
}

pub fn body_fp(body: &[u8]) -> u128 {
    Fp::new(0xB0D).bytes(body).finish()
}

/// A record's acquisition (its session), as a word.
pub fn session_fp(session: &str) -> u64 {
    Fp::new(0x5E5).str(session).finish() as u64
}

pub fn op_fp(op: &StoreOp) -> u128 {
    let mut f = Fp::new(0x0B);
    match op {
        StoreOp::Get { key } => f.u64(1).str(key),
        StoreOp::Put {
            key,
            body,
            condition,
        } => {
            f.u64(2).str(key).u128(body_fp(body));
            match condition {
                PutCondition::IfAbsent => f.u64(1),
                PutCondition::IfMatch(e) => f.u64(2).str(e.as_str()),
                PutCondition::None => f.u64(3),
            }
        }
        other => f.u64(3).str(&format!("{other:?}")),
    };
    f.finish()
}

/// Fingerprint of a reply; `found` is the fingerprint of a `Found` body.
pub fn reply_fp(reply: &StoreReply, found: Option<u128>) -> u128 {
    let mut f = Fp::new(0x4E);
    match reply.date {
        Some(d) => f.u64(1).u64(d.unix_ms.0).u64(d.behind_ms).u64(d.ahead_ms),
        None => f.u64(0),
    };
    match &reply.kind {
        ReplyKind::Found { etag, body } => f
            .u64(1)
            .str(etag.as_str())
            .u128(found.unwrap_or_else(|| body_fp(body))),
        ReplyKind::Written { etag } => f.u64(2).str(etag.as_ref().map_or("-", |e| e.as_str())),
        ReplyKind::Missing => f.u64(3),
        ReplyKind::PreconditionFailed => f.u64(4),
        ReplyKind::Conflict => f.u64(5),
        ReplyKind::Throttled { retry_after } => {
            f.u64(6).opt(retry_after.map(|d| d.as_millis() as u64))
        }
        other => f.u64(7).str(&format!("{other:?}")),
    };
    f.finish()
}

/// Fingerprint of an object on the store (0: none), from its etag and its
/// body's fingerprint.
pub fn obj_fp(obj: Option<(&Etag, u128)>) -> u128 {
    obj.map_or(0, |(etag, body_fp)| {
        Fp::new(0x0B1).str(etag.as_str()).u128(body_fp).finish()
    })
}

/// A `HashMap` hasher for keys that are fingerprints already.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = self.0.rotate_left(23) ^ v as u64 ^ (v >> 64) as u64;
    }
}

type FpMap<V> = HashMap<u128, V, BuildHasherDefault<PassThrough>>;

/// What each (machine state, input) gave, by their fingerprints.
type Memo<S> = HashMap<(u128, u128), Arc<S>, BuildHasherDefault<PassThrough>>;

// ---------------------------------------------------------------------------
// Machines inside states
// ---------------------------------------------------------------------------

/// The elector's phase, read from its `Debug` output (the field is private).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Waiting,
    Campaigning,
    Holding,
    Renewing,
    Releasing,
    Finished,
    /// No machine: the process is dead.
    #[allow(dead_code)] // only model.rs's processes die
    Crashed,
}

/// The phase of the first elector in `text` (its `Debug` output).
pub fn phase_of(text: &str) -> Phase {
    let at = text
        .find(", phase: ")
        .expect("the elector prints its phase")
        + 9;
    let name: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    match name.as_str() {
        "Waiting" => Phase::Waiting,
        "Campaigning" => Phase::Campaigning,
        "Holding" => Phase::Holding,
        "Renewing" => Phase::Renewing,
        "Releasing" => Phase::Releasing,
        "Finished" => Phase::Finished,
        other => panic!("unknown elector phase {other:?}"),
    }
}

/// The call an operation waits for (0: none), read from its `Debug`
/// output: replies to any other call are ignored.
pub fn in_flight_of(text: &str) -> u64 {
    const AT: &str = "in_flight: Some((CallId(";
    match text.find(AT) {
        Some(at) => text[at + AT.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .expect("a call id"),
        None => 0,
    }
}

/// A node's input history, newest first (a persistent list: cheap to share
/// between the many states that extend it), with a fingerprint of the whole
/// sequence. Kept in `verify` runs only.
pub struct History<I>(Option<Arc<(I, History<I>, u128)>>);

impl<I> Clone for History<I> {
    fn clone(&self) -> Self {
        History(self.0.clone())
    }
}

impl<I> Default for History<I> {
    fn default() -> Self {
        History(None)
    }
}

impl<I> History<I> {
    /// The fingerprint of the whole sequence (0: empty).
    pub fn chain(&self) -> u128 {
        self.0.as_ref().map_or(0, |cell| cell.2)
    }
}

impl<I: Clone> History<I> {
    /// The history after `input` (its fingerprint `input_fp`): this one and
    /// `input` when histories are kept (`verify` runs), else none.
    pub fn after(&self, input: I, input_fp: u128, kept: bool) -> History<I> {
        if !kept {
            return History::default();
        }
        let chain = Fp::new(0xC4).u128(self.chain()).u128(input_fp).finish();
        History(Some(Arc::new((input, self.clone(), chain))))
    }

    pub fn oldest_first(&self) -> Vec<I> {
        let mut out = Vec::new();
        let mut cur = self;
        while let Some(cell) = &cur.0 {
            out.push(cell.0.clone());
            cur = &cell.1;
        }
        out.reverse();
        out
    }
}

/// At most this many spare machines are kept (a few KB each).
const SPARE_MACHINES: usize = 20_000;

/// How a machine state was first reached: a fresh machine's seed, or the
/// state before and the input.
enum Derivation<I> {
    Fresh(u128),
    Step(u128, I),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The memoised transitions of one model's machines `M` (an `Elector`, a
/// session's program) under inputs `I`, each with what the step did, `S`.
pub struct Transitions<M, I, S> {
    memo: Mutex<Memo<S>>,
    /// Machines not yet given any input in their state, by identity: the
    /// first input to a state takes its machine instead of replaying the
    /// inputs that led there (the machines are not `Clone`).
    spare: Mutex<FpMap<M>>,
    /// How each machine state was first reached: enough to rebuild it,
    /// whatever path a model state took to it (states keep no histories
    /// unless `verify`).
    derivations: Mutex<FpMap<Derivation<I>>>,
}

impl<M, I, S> Default for Transitions<M, I, S> {
    fn default() -> Self {
        Transitions {
            memo: Mutex::default(),
            spare: Mutex::default(),
            derivations: Mutex::default(),
        }
    }
}

impl<M, I: Clone, S> Transitions<M, I, S> {
    /// A fresh machine from `seed` is in state `fp`.
    pub fn fresh(&self, fp: u128, seed: u128) {
        lock(&self.derivations)
            .entry(fp)
            .or_insert(Derivation::Fresh(seed));
    }

    /// The machine in state `fp`, rebuilt by replaying the inputs that first
    /// led there: `fresh` makes a machine from a seed, `feed` gives it one
    /// input.
    pub fn derive(
        &self,
        fp: u128,
        fresh: impl FnOnce(u128) -> M,
        mut feed: impl FnMut(&mut M, &I),
    ) -> M {
        let (seed, inputs) = {
            let derivations = lock(&self.derivations);
            let mut inputs = Vec::new();
            let mut at = fp;
            loop {
                match derivations
                    .get(&at)
                    .expect("every machine state is derived")
                {
                    Derivation::Fresh(seed) => break (*seed, inputs),
                    Derivation::Step(before, input) => {
                        inputs.push(input.clone());
                        at = *before;
                    }
                }
            }
        };
        let mut m = fresh(seed);
        for input in inputs.iter().rev() {
            feed(&mut m, input);
        }
        m
    }

    /// What `input` (its fingerprint `input_fp`) does to a machine in state
    /// `from`, memoised. The machine is a spare one in that state, or
    /// `rebuild` makes it; `run` gives it the input and returns its new
    /// state's identity and what the step did.
    pub fn step(
        &self,
        from: u128,
        input: &I,
        input_fp: u128,
        rebuild: impl FnOnce() -> M,
        run: impl FnOnce(&mut M) -> (u128, S),
    ) -> Arc<S> {
        let key = (from, input_fp);
        let cached = lock(&self.memo).get(&key).cloned();
        if let Some(step) = cached {
            return step;
        }
        let spare = lock(&self.spare).remove(&from);
        let mut m = spare.unwrap_or_else(rebuild);
        let (fp, step) = run(&mut m);
        lock(&self.derivations)
            .entry(fp)
            .or_insert_with(|| Derivation::Step(from, input.clone()));
        let step = Arc::new(step);
        lock(&self.memo).insert(key, step.clone());
        let mut spare = lock(&self.spare);
        if spare.len() >= SPARE_MACHINES {
            spare.clear();
        }
        spare.entry(fp).or_insert(m);
        step
    }
}

/// `verify`: what replaying each input history gave (`R`), by the history's
/// fingerprint and the machine's seed.
pub struct Replays<R>(Mutex<FpMap<R>>);

impl<R> Default for Replays<R> {
    fn default() -> Self {
        Replays(Mutex::default())
    }
}

impl<R: Copy> Replays<R> {
    /// What replaying `history` on a machine made from `seed` gives:
    /// `replay`'s answer, computed once.
    pub fn get<I>(&self, history: &History<I>, seed: u128, replay: impl FnOnce() -> R) -> R {
        let key = Fp::new(0x7E).u128(history.chain()).u128(seed).finish();
        let cached = lock(&self.0).get(&key).copied();
        cached.unwrap_or_else(|| {
            let replayed = replay();
            lock(&self.0).insert(key, replayed);
            replayed
        })
    }
}

// ---------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------

/// The store's clock at global time 0, plus the run's phase: the sub-second
/// part decides how much the one-second truncation of HTTP dates loses at
/// each instant.
pub const STORE_EPOCH: u64 = 1_790_000_000_000;

/// The clocks of a run, from its parameters.
pub trait Settings {
    /// The store's phase (milliseconds past a whole second on its clock at
    /// global time 0), and whether its dates have one-second resolution
    /// (HTTP `Date`) or are exact.
    fn store_clock(&self) -> (u64, bool);

    /// The store's clock at global time `t`.
    fn store_time(&self, t: u64) -> u64 {
        STORE_EPOCH + self.store_clock().0 + t
    }

    /// The date the store stamps on a reply at global time `t`.
    fn store_date(&self, t: u64) -> StoreDate {
        let at = self.store_time(t);
        if self.store_clock().1 {
            StoreDate::from_http_date(UnixMillis(at / 1000 * 1000))
        } else {
            StoreDate::exact(UnixMillis(at))
        }
    }

    /// Arbitrary, different origins for the nodes' monotonic clocks: only
    /// differences of readings of one clock may matter.
    fn mono_offset(&self, node: usize) -> u64 {
        [0, 7_000, 13_500][node % 3] + 100_000 * (node as u64 / 3)
    }

    /// Global time of node `node`'s monotonic reading `local` (`u64::MAX`:
    /// never).
    fn to_global(&self, node: usize, local: Mono) -> u64 {
        if local.0 == u64::MAX {
            u64::MAX
        } else {
            local.0.saturating_sub(self.mono_offset(node))
        }
    }
}

/// The next instant time may advance to, if any: the first of the nodes'
/// `wakes` after `now` (with `latency_step`, and a message in flight, at
/// most that step later), unless past the horizon or past the deadline of
/// a message in flight (it must arrive, or be lost, by then).
pub fn next_time<B>(
    now: u64,
    wakes: impl Iterator<Item = u64>,
    latency_step: Option<u64>,
    net: &[Msg<B>],
    horizon_ms: u64,
) -> Option<u64> {
    let mut next = wakes.filter(|&w| w > now).min().unwrap_or(u64::MAX);
    if let Some(step) = latency_step {
        if !net.is_empty() {
            next = next.min(now + step);
        }
    }
    let overdue = net.iter().any(|m| m.deadline < next);
    (next <= horizon_ms && !overdue).then_some(next)
}

// ---------------------------------------------------------------------------
// The network, the steps and the state
// ---------------------------------------------------------------------------

/// A message in flight, with a body `B` of the model's.
pub struct Msg<B> {
    /// Identity of the body.
    pub fp: u128,
    /// Global time by which it must be delivered or lost (`u64::MAX`: held
    /// back by a fault, no bound).
    pub deadline: u64,
    pub body: Arc<B>,
}

impl<B> Clone for Msg<B> {
    fn clone(&self) -> Self {
        Msg {
            fp: self.fp,
            deadline: self.deadline,
            body: self.body.clone(),
        }
    }
}

impl<B> Msg<B> {
    /// What the network is sorted by (identical copies are interchangeable).
    pub fn key(&self) -> (u128, u64) {
        (self.fp, self.deadline)
    }

    /// Held back by a fault: no bound on its delay.
    pub fn held_back(&self) -> bool {
        self.deadline == u64::MAX
    }
}

/// Puts `msg` in flight: the network stays sorted (a canonical multiset).
pub fn insert<B>(net: &mut Vec<Msg<B>>, msg: Msg<B>) {
    let at = net.partition_point(|m| m.key() <= msg.key());
    net.insert(at, msg);
}

/// Holds message `i` back: no bound on its delay from now on (it may land
/// at any later point, or never). Returns its body.
pub fn hold_back<B>(net: &mut Vec<Msg<B>>, i: usize) -> Arc<B> {
    let mut msg = net.remove(i);
    msg.deadline = u64::MAX;
    let body = msg.body.clone();
    insert(net, msg);
    body
}

/// The messages in flight with their indices, each once: identical copies
/// are interchangeable.
pub fn distinct<B>(net: &[Msg<B>]) -> impl Iterator<Item = (usize, &Msg<B>)> {
    net.iter()
        .enumerate()
        .filter(|&(i, m)| i == 0 || net[i - 1].key() != m.key())
}

/// A step from a model state: something happens to a message in flight (by
/// its index in the network), to a node, or to time. `A` is how the store
/// may answer a request otherwise than by applying it, `N` what else may
/// happen to a node's process: each model's own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action<A, N> {
    /// Deliver in-flight message `i` (a request to the store, a reply to
    /// its node).
    Deliver(usize),
    /// The store answers request `msg` otherwise than by applying it.
    Fault { msg: usize, answer: A },
    /// Lose message `i`.
    Drop(usize),
    /// Hold message `i` back with no bound on its delay.
    Delay(usize),
    /// Deliver request `i` twice (the copy stays in flight).
    Duplicate(usize),
    /// A node's timer is due: poll it.
    Poll(usize),
    /// Something else happens to a node's process.
    Node(usize, N),
    /// Advance global time to the given instant.
    Tick(u64),
}

/// A model's message body: a trace line shows it as it displays.
pub trait Message: fmt::Display {
    /// A reply to a node (else a request to the store).
    fn is_reply(&self) -> bool;
}

/// A part of a model state that goes into its identity.
pub trait Identity {
    fn identity(&self, f: &mut Fp);
}

/// The start of a model state's identity: the global time, each node, the
/// store, the network (each message's fingerprint and deadline) and the
/// budget left (its derived `Hash`: its counters in declaration order).
/// The model adds the rest (its flags) and finishes it.
pub fn state_fp<N: Identity, S: Identity, B>(
    now: u64,
    nodes: &[N],
    store: &S,
    net: &[Msg<B>],
    budget: &impl Hash,
) -> Fp {
    let mut f = Fp::new(0x57A7E);
    f.u64(now);
    for n in nodes {
        n.identity(&mut f);
    }
    store.identity(&mut f);
    f.u64(net.len() as u64);
    for m in net {
        f.u128(m.fp).u64(m.deadline);
    }
    f.hashed(budget);
    f
}

/// `Hash`, `PartialEq` and `Eq` for a model state by its `identity()`: the
/// fingerprint of everything that determines its future, and nothing else.
macro_rules! by_identity {
    ($state:ty) => {
        impl std::hash::Hash for $state {
            fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
                h.write_u128(self.identity())
            }
        }

        impl PartialEq for $state {
            fn eq(&self, other: &Self) -> bool {
                self.identity() == other.identity()
            }
        }

        impl Eq for $state {}
    };
}
pub(crate) use by_identity;

/// The nodes of each initial state, `start(i, seed)`: one state for every
/// combination of their entropy seeds, node `i` of `nodes` taking
/// `s * 16 + i` for each `s` of `seeds`.
pub fn initial_nodes<N>(
    nodes: usize,
    seeds: &[u128],
    start: impl Fn(usize, u128) -> N,
) -> Vec<Vec<N>> {
    let mut combos: Vec<Vec<u128>> = vec![Vec::new()];
    for i in 0..nodes {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                seeds.iter().map(move |s| {
                    let mut c = c.clone();
                    c.push(s * 16 + i as u128);
                    c
                })
            })
            .collect();
    }
    combos
        .into_iter()
        .map(|seeds| {
            seeds
                .iter()
                .enumerate()
                .map(|(i, &s)| start(i, s))
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Running the checker
// ---------------------------------------------------------------------------

/// Whether a run checks safety property `property`: all of them, or only
/// `only` (to show that it fails on its own: the others then neither fail
/// the run nor end a path).
fn checks(only: Option<&str>, property: &str) -> bool {
    only.is_none_or(|only| only == property)
}

/// Whether a state violates a safety property the run checks (`failing`:
/// each property, with whether the state violates it). Such a state is not
/// expanded: stateright records the path of the last violating state it
/// visits, and this way each counterexample ends at its first violation.
pub fn violates(only: Option<&str>, failing: &[(&str, bool)]) -> bool {
    failing
        .iter()
        .any(|&(property, failing)| failing && checks(only, property))
}

/// The safety properties a run checks (see [`violates`]).
pub fn checked<M: Model>(
    only: Option<&str>,
    safety: impl IntoIterator<Item = Property<M>>,
) -> Vec<Property<M>> {
    safety
        .into_iter()
        .filter(|prop| checks(only, prop.name))
        .collect()
}

/// A path of states, each with the action taken from it (none for the last).
pub type Trace<S, A> = Vec<(S, Option<A>)>;

/// What a run found.
pub struct Report<S, A> {
    /// Safety properties with a counterexample, and its path.
    pub failures: Vec<(&'static str, Trace<S, A>)>,
    /// Reachability properties that were shown reachable.
    pub examples: Vec<&'static str>,
}

impl<S, A> Report<S, A> {
    /// Panics unless no safety property has a counterexample and each of
    /// `expected` was shown reachable (in the run called `name`).
    pub fn assert_safe(&self, name: &str, expected: &[&str]) {
        assert!(
            self.failures.is_empty(),
            "[{name}] safety violated: {:?}",
            self.failures.iter().map(|(p, _)| p).collect::<Vec<_>>()
        );
        for want in expected {
            assert!(
                self.examples.contains(want),
                "[{name}] never reached: \"{want}\""
            );
        }
    }
}

/// Checks `model` (on all cores, depth or breadth first; with
/// `stop_at_first_failure`, until a property has a discovery), prints what
/// it found, each counterexample step by step (in the words of the model's
/// `Model::format_step`), and returns it. A discovery of one of `safety` is
/// a counterexample; of any other property, an example.
pub fn check<M>(
    name: &str,
    model: M,
    depth_first: bool,
    stop_at_first_failure: bool,
    safety: &[&str],
) -> Report<M::State, M::Action>
where
    M: Model + Send + Sync + 'static,
    M::State: fmt::Debug + Hash + Send + Sync + Clone + PartialEq + 'static,
    M::Action: Clone + PartialEq,
{
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = Instant::now();
    let mut builder = model.checker().threads(threads);
    if stop_at_first_failure {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    if depth_first {
        report(name, threads, started, builder.spawn_dfs().join(), safety)
    } else {
        report(name, threads, started, builder.spawn_bfs().join(), safety)
    }
}

fn report<M>(
    name: &str,
    threads: usize,
    started: Instant,
    checker: impl Checker<M>,
    safety: &[&str],
) -> Report<M::State, M::Action>
where
    M: Model,
    M::State: fmt::Debug + Clone + PartialEq,
    M::Action: Clone + PartialEq,
{
    let elapsed = started.elapsed();
    let mut failures = Vec::new();
    let mut examples = Vec::new();
    for (prop, path) in checker.discoveries() {
        if safety.contains(&prop) {
            failures.push((prop, path.into_vec()));
        } else {
            examples.push(prop);
        }
    }
    failures.sort_by_key(|(prop, _)| *prop);
    examples.sort();
    println!(
        "[{name}] {} unique states ({} generated), max depth {}, {:.1} s, {} threads; reachable: {:?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        elapsed.as_secs_f64(),
        threads,
        examples
    );
    for (prop, path) in &failures {
        println!(
            "[{name}] counterexample to \"{prop}\": {} actions",
            path.len() - 1
        );
        for (state, action) in path {
            println!("    {state:?}");
            if let Some(step) = action
                .as_ref()
                .and_then(|a| checker.model().format_step(state, a.clone()))
            {
                println!("      -> {step}");
            }
        }
    }
    Report { failures, examples }
}

// ---------------------------------------------------------------------------
// Counterexamples in words
// ---------------------------------------------------------------------------

/// Step `a` from a state whose network is `net`, in words: `name` names a
/// node, `how` says how the store answers, `process` what else happens to
/// a node's process.
pub fn describe<A, N, B: Message, D: fmt::Display>(
    net: &[Msg<B>],
    a: &Action<A, N>,
    name: impl Fn(usize) -> D,
    how: impl Fn(&A) -> String,
    process: impl Fn(&N) -> String,
) -> String {
    let msg = |i: &usize| {
        let m = &net[*i];
        let late = if m.held_back() { " (held back)" } else { "" };
        format!("{}{late}", m.body)
    };
    match a {
        Action::Deliver(i) if net[*i].body.is_reply() => format!("delivered: {}", msg(i)),
        Action::Deliver(i) => format!("store applies {}", msg(i)),
        Action::Fault { msg: i, answer } => format!("store answers {} {}", how(answer), msg(i)),
        Action::Drop(i) => format!("lost: {}", msg(i)),
        Action::Delay(i) => format!("held back: {}", msg(i)),
        Action::Duplicate(i) => format!("duplicated, first copy applied now: {}", msg(i)),
        Action::Poll(i) => format!("{}: timer due, polled", name(*i)),
        Action::Node(i, what) => format!("{}: {}", name(*i), process(what)),
        Action::Tick(t) => format!("time advances to {t} ms"),
    }
}

/// A PUT's condition, as a trace line shows it.
pub fn describe_condition(condition: &PutCondition) -> String {
    match condition {
        PutCondition::IfAbsent => "if-none-match *".to_string(),
        PutCondition::IfMatch(e) => format!("if-match {e}"),
        PutCondition::None => "unconditional".to_string(),
    }
}
