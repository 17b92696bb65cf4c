//! What defines a run: the clients each node runs, the faults, and the
//! random schedules drawn from a seed ([`ClientsConfig::random`]).

use crate::world::faults::{FaultKind, FaultRates, Scripted};
use lease_core::variants::Variant;
use lease_core::{Entropy, LeaseConfig, Protocol};
use std::time::Duration;

/// The lease key every client contends for.
pub const LEASE_KEY: &str = "leases/product";
/// The object jobs write to with fenced writes (CAS and epochs); a
/// pool's jobs write to their seat's, `<PROTECTED_KEY>/seat-<i>`.
pub const PROTECTED_KEY: &str = "data/protected";
/// The pool the pool clients ([`ClientKind::Pool`]) run in: its seats are
/// the leases `<POOL_KEY>/seat-<i>`.
pub const POOL_KEY: &str = "leases/pool";
/// Keys the session clients ([`ClientKind::Session`]) own, beside
/// [`LEASE_KEY`] (which they own too when every node runs cas).
pub const OWNED_KEYS: [&str; 2] = ["leases/owned-0", "leases/owned-1"];

/// The fleet the shard clients ([`ClientKind::Shard`]) are members of.
pub const SHARD_PREFIX: &str = "fleet";

/// The key of node `node`'s session ([`ClientKind::Session`]).
pub fn session_key(node: usize) -> String {
    format!("sessions/node-{node}")
}

/// Which product path a node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClientKind {
    /// `Leases::run` per scheduler tick (Lambda, Workers cron): each tick
    /// its own process, ticks sometimes delivered twice.
    Singleton,
    /// `lease run`: an acquire, then the job under the library's
    /// supervision (`Leases::supervise`: TERM and KILL before the lease's
    /// deadline, the job stopping on TERM), as the CLI runs CMD; repeated as
    /// new processes.
    Hold,
    /// One-shot CLI commands: acquire, renew(s), release, each a separate
    /// operation; renew and release resumed from the etag by inspect +
    /// `Lease::resume_version`.
    Cli,
    /// An operator who inspects and sometimes breaks the lease.
    Operator,
    /// An `Elector` run with `drive_until`, with work while it leads.
    Elector,
    /// A service on [`Leadership`]
    /// (`Leases::lead` with a `Lead::on_event` callback): work gated on `until_leader` and `lost`
    /// (sometimes made a while before it is first polled), `resign()` at a
    /// random moment, and `is_leader()`, `token()` and `health()` sampled
    /// throughout; the checker judges every answer against the store.
    ///
    /// [`Leadership`]: lease_core::Leadership
    Service,
    /// A host of a crontab that several hosts share (`lease run --cron`):
    /// it fires when its own wall clock (offset up to `max_offset`) comes
    /// to each slot of a `cron_every` schedule, late by up to most of a
    /// slot, each firing a new process, `lease run --every` as the CLI
    /// runs it (`Leases::supervise` with `Run::slot`), whose run is for
    /// the slot the store's clock says, not its own.
    Cron,
    /// `Leases::run` (or, as `lease run --seats`, `Leases::supervise`) in
    /// any free seat of a pool of
    /// [`ClientsConfig::pool_seats`] at [`POOL_KEY`] (`Run::pool`): at
    /// most that many jobs at once, each on its seat's lease and fencing
    /// with its seat's token; every other run waits for a seat
    /// (`Run::wait`), some with a time limit. Each run its own process,
    /// as a singleton's tick.
    Pool,
    /// A process with a session (`Leases::session`, cas), owning keys
    /// under it (`Session::own`): [`OWNED_KEYS`], and [`LEASE_KEY`] when
    /// every node runs cas (beside the other clients there). It owns
    /// keys, works on each while its session's term lasts (stopped by
    /// `Session::lost`), keeps some across terms and gives some back
    /// (`Session::disown`), sometimes closes the session; `owns()` for
    /// every key and the session's own answers are sampled throughout. A
    /// crashed one starts again with a new session term.
    Session,
    /// A member of the fleet at [`SHARD_PREFIX`] that splits
    /// [`ClientsConfig::shards`] shards (`Leases::shards`, cas): it works
    /// on each shard from `Assigned` until `Revoking` or `Revoked` (or its
    /// term's end), drains most revoked shards at once, some late, some
    /// never (the drain's bound gives them back), and may leave at a
    /// random time; `owns()` for every shard and the coordinator's answers
    /// are sampled throughout. A crashed one joins again as a new member
    /// term.
    Shard,
    /// A simple client of the one-object format (`{"expires_at": <s>}`,
    /// with a token in half of them, and its name in `holder`), written in
    /// the simulator as another implementation would be, not with
    /// lease-core: it takes a key that is missing or expired by the
    /// store's `Date` (with a second and a half to spare) with
    /// `If-None-Match` / `If-Match`, works until its ttl from the read
    /// less that and its clock's drift, gives the key back by writing an
    /// expiry of 0, and tries again a while later. It shares the key with
    /// cas clients (`docs/protocols.md`, "Simple clients on the same
    /// key"): a world with one runs cas on every node. Not beside
    /// sessions: a key owned under a session is not shared with simple
    /// clients (`docs/protocols.md`, "Sessions: many keys for one renewal").
    Simple,
}

impl ClientKind {
    /// A process that runs for the whole world (started again after its
    /// node crashed), not one per tick or run.
    pub(super) fn long_lived(self) -> bool {
        matches!(
            self,
            ClientKind::Cli
                | ClientKind::Operator
                | ClientKind::Elector
                | ClientKind::Service
                | ClientKind::Session
                | ClientKind::Shard
                | ClientKind::Simple
        )
    }
}

/// Deliberately broken clients, built in the harness to prove the checker
/// can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// A singleton that starts the job after its lease's deadline passed.
    StartPastDeadline,
    /// A hold that does not stop the job when the lease is lost.
    IgnoreDeadline,
    /// A release that reports `Released` without asking the store.
    BlindRelease,
    /// No patience: a request timeout of 1 ms, below the network's
    /// latency, so an acquire fails though nothing is wrong.
    NoPatience,
}

/// A node-level fault.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeFault {
    /// Every process of the node dies; long-lived ones (CLI script,
    /// elector) start again after `restart_after`.
    Crash {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Delay before a new process, if any.
        restart_after: Option<Duration>,
    },
    /// Every process of the node stops being polled (a frozen VM).
    Pause {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Length.
        length: Duration,
    },
    /// The node's wall clock jumps (monotonic time is untouched).
    WallStep {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Jump (ms, either way).
        by_ms: i64,
    },
    /// The node's monotonic clock stops for `length`. With `catch_up` it
    /// then jumps to where it would have been: simulated as a pause (the
    /// processes are inert meanwhile). Without, it stays behind for good:
    /// outside the documented assumptions (see the module docs).
    MonoStall {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Length.
        length: Duration,
        /// Whether it catches up afterwards.
        catch_up: bool,
    },
    /// The machine is suspended (a laptop's lid closed, a VM suspended):
    /// its processes are inert for `length`, none starts, while wall time
    /// and the store's time go on. Its monotonic clock follows
    /// [`ClientsConfig::suspend_clock`].
    Suspend {
        /// Node.
        node: usize,
        /// Real ms.
        at_ms: u64,
        /// Length.
        length: Duration,
    },
}

/// What a node's monotonic clock does across a [`NodeFault::Suspend`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SuspendClock {
    /// It counts the suspend, as the native adapter's clock does
    /// (`CLOCK_BOOTTIME`): on resume it reads what it would have read had
    /// the machine run on.
    #[default]
    CountsSuspend,
    /// It stops during the suspend and stays behind afterwards, as
    /// `std::time::Instant` does (`CLOCK_MONOTONIC` on Linux): the broken
    /// clock the checker must catch.
    StopsInSuspend,
}

impl NodeFault {
    pub(super) fn at_ms(&self) -> u64 {
        match self {
            NodeFault::Crash { at_ms, .. }
            | NodeFault::Pause { at_ms, .. }
            | NodeFault::WallStep { at_ms, .. }
            | NodeFault::MonoStall { at_ms, .. }
            | NodeFault::Suspend { at_ms, .. } => *at_ms,
        }
    }
}

/// Everything that defines a run.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientsConfig {
    /// The seed of every random choice.
    pub seed: u64,
    /// The client each node runs.
    pub clients: Vec<ClientKind>,
    /// The protocol each node uses (normally all equal).
    pub protocols: Vec<Protocol>,
    /// The core's protocol variant.
    pub variant: Variant,
    /// A broken client built in the harness.
    pub broken: Option<Broken>,
    /// Lease ttl.
    pub ttl: Duration,
    /// Simulated duration.
    pub duration: Duration,
    /// One-way latency range.
    pub latency: (Duration, Duration),
    /// Store front ends' clocks are off by up to this.
    pub front_end_skew: Duration,
    /// Node wall clocks are off by up to this.
    pub max_offset: Duration,
    /// Node clock rates differ from real time by up to this fraction.
    pub max_drift: f64,
    /// Random store faults.
    pub faults: FaultRates,
    /// Faults by window (outages, hand-built schedules).
    pub scripted: Vec<Scripted>,
    /// Node faults.
    pub node_faults: Vec<NodeFault>,
    /// The nodes' monotonic clocks across a [`NodeFault::Suspend`].
    pub suspend_clock: SuspendClock,
    /// Probability that a process is crashed right after a poll.
    pub poll_crash: f64,
    /// Probability that a process is paused (up to 2 ttl) after a poll.
    pub poll_pause: f64,
    /// Interval between scheduler ticks (singleton), or between runs
    /// (hold, CLI), drawn in this range.
    pub tick_every: (Duration, Duration),
    /// Probability that a tick is delivered twice.
    pub duplicate_tick: f64,
    /// The cron hosts' schedule: a slot every this long (UTC, counted from
    /// the epoch).
    pub cron_every: Duration,
    /// A cron host's run that starts later than this into its slot (by
    /// the store's clock) does not run it (`Slots::late_after`).
    pub cron_late: Option<Duration>,
    /// Longest job.
    pub job_max: Duration,
    /// Whether the singleton and `lease run` probe the store first.
    pub probe: bool,
    /// Nodes 0 and 1 draw identical entropy (seeded alike).
    pub same_entropy: bool,
    /// Electors resign at a random time (else they run to the end).
    pub resign: bool,
    /// Electors resign this long after they start (overrides `resign`).
    pub resign_after: Option<Duration>,
    /// When each node first starts (real ms); empty: within the first
    /// second, at random.
    pub start_at: Vec<u64>,
    /// Keep a timeline.
    pub record_timeline: bool,
    /// Keys per listing page of the store (S3 pages at 1,000).
    pub page_size: usize,
    /// The store answers 429 to a write to a key within this of the last
    /// write to it (R2, GCS: about one a second), and says so
    /// ([`Store::min_write_interval`]): every client spaces its writes.
    ///
    /// [`Store::min_write_interval`]: lease_core::Store::min_write_interval
    pub spacing: Duration,
    /// Other objects under `<key>/` (another application's), listed
    /// before any epoch object: with small pages, a check that reads only
    /// the first pages misses the epochs.
    pub junk_keys: usize,
    /// Chance that a CLI script releases at its lease's local deadline
    /// (late: a reply lost then leaves open whether it freed the lease).
    pub late_release: f64,
    /// Longest time an operator takes between reading the lease and
    /// breaking it (the world moves on meanwhile: a late break).
    pub break_delay: Duration,
    /// Half the singleton deliveries carry the invocation's remaining time
    /// (from too little for the lease's requests to more than the job
    /// needs): a job still running near the end is stopped and its lease
    /// released ([`Run::within`]).
    ///
    /// [`Run::within`]: lease_core::Run::within
    pub time_limits: bool,
    /// Every node waits fairly ([`LeaseConfig::fair`]): a run finds the
    /// lease its node gave back busy for the courtesy. Off unless a test
    /// turns it on, so that fixed seeds replay as they were found.
    pub fair: bool,
    /// A CLI script's acquire waits up to this while the lease is busy
    /// (`lease acquire --wait`: [`Leases::acquire_within`], its re-reads
    /// conditional); zero: it does not wait. Zero unless a test sets it,
    /// so that fixed seeds replay as they were found.
    ///
    /// [`Leases::acquire_within`]: lease_core::Leases::acquire_within
    pub cli_wait: Duration,
    /// The seats of the pool at [`POOL_KEY`] the pool clients run in
    /// (none without pool clients).
    pub pool_seats: u32,
    /// The shards the fleet at [`SHARD_PREFIX`] splits (none without
    /// shard clients).
    pub shards: u32,
    /// Holder names, tick ids and job results at their longest (holder
    /// names of over 400 bytes; tick ids of `MAX_TICK_BYTES` and results of
    /// `MAX_RESULT_BYTES`, both of characters JSON escapes at six times
    /// their size): a lease record with its completed ticks then passes the
    /// 8 KiB a client reads unless its ticks' results are kept as digests
    /// and its oldest ticks left out. Off unless a test turns
    /// it on, so that fixed seeds replay as they were found.
    pub long_records: bool,
}

impl ClientsConfig {
    /// A quiet world: every node runs `client` on `protocol`, no faults.
    pub fn quiet(seed: u64, protocol: Protocol, clients: Vec<ClientKind>) -> Self {
        let n = clients.len();
        ClientsConfig {
            seed,
            protocols: vec![protocol; n],
            clients,
            variant: Variant::Safe,
            broken: None,
            ttl: Duration::from_secs(10),
            duration: Duration::from_secs(120),
            latency: (Duration::from_millis(1), Duration::from_millis(20)),
            front_end_skew: Duration::ZERO,
            max_offset: Duration::ZERO,
            max_drift: 0.0,
            faults: FaultRates::none(),
            scripted: Vec::new(),
            node_faults: Vec::new(),
            suspend_clock: SuspendClock::CountsSuspend,
            poll_crash: 0.0,
            poll_pause: 0.0,
            tick_every: (Duration::from_secs(2), Duration::from_secs(20)),
            duplicate_tick: 0.0,
            cron_every: Duration::from_secs(30),
            cron_late: None,
            job_max: Duration::from_secs(20),
            probe: false,
            same_entropy: false,
            resign: false,
            resign_after: None,
            start_at: Vec::new(),
            record_timeline: false,
            page_size: 1000,
            spacing: Duration::ZERO,
            junk_keys: 0,
            late_release: 0.0,
            break_delay: Duration::ZERO,
            time_limits: false,
            fair: false,
            cli_wait: Duration::ZERO,
            pool_seats: 0,
            shards: 0,
            long_records: false,
        }
    }

    /// The world with long records ([`long_records`](Self::long_records))
    /// and ticks often and short enough that a record keeps many: a tick
    /// every eighth to half a ttl, jobs of up to a quarter of one.
    pub fn with_long_records(self) -> Self {
        ClientsConfig {
            long_records: true,
            tick_every: (self.ttl / 8, self.ttl / 2),
            job_max: self.ttl / 4,
            ..self
        }
    }

    /// A random schedule from the fault mix, determined by `seed`: 2-4
    /// nodes running clients drawn from `kinds`, ttl 6-20 s, 6-10 ttl of
    /// simulated time, store faults up to 6 % of calls, an outage in about
    /// a third of the runs, long `Retry-After`s in a quarter, late
    /// deliveries, node faults, crashes and pauses at random polls; in one
    /// run in ten a node on another protocol (a rolling deploy), and in one
    /// in ten two nodes whose entropy is seeded alike.
    pub fn random(seed: u64, protocol: Protocol, kinds: &[ClientKind]) -> Self {
        let mut rng = Entropy::from_seed(seed as u128 ^ 0xC11E_0000_0000);
        let mut pick = |lo: f64, hi: f64| lo + (hi - lo) * rng.unit();
        let nodes = pick(2.0, 5.0) as usize;
        let clients: Vec<ClientKind> = (0..nodes)
            .map(|_| kinds[(pick(0.0, kinds.len() as f64) as usize).min(kinds.len() - 1)])
            .collect();
        let ttl = Duration::from_secs(pick(6.0, 21.0) as u64);
        let duration = ttl * pick(6.0, 11.0) as u32;
        let p = pick(0.0, 0.06);
        let long_retry_after = pick(0.0, 1.0) < 0.25;
        let faults = FaultRates {
            drop_request: p * pick(0.0, 1.0),
            drop_reply: p * pick(0.0, 1.0),
            apply_5xx: p * pick(0.0, 1.0),
            conflict: p * pick(0.0, 1.0),
            throttle: p * pick(0.0, 1.0),
            late: p * pick(0.0, 0.5),
            late_max: ttl.mul_f64(pick(0.0, 2.0)),
            retry_after_max: if long_retry_after {
                Duration::from_secs(3 * 3600)
            } else {
                Duration::from_secs(2)
            },
            ..FaultRates::none()
        };
        let dur_ms = duration.as_millis() as f64;
        let mut scripted = Vec::new();
        if pick(0.0, 1.0) < 0.35 {
            let from_ms = pick(0.0, dur_ms * 0.7) as u64;
            let length = pick(3000.0, ttl.as_millis() as f64 * 1.6) as u64;
            let node = (pick(0.0, 1.0) < 0.5).then(|| pick(0.0, nodes as f64) as usize);
            let kind = if pick(0.0, 1.0) < 0.5 {
                FaultKind::Hang
            } else {
                FaultKind::Throttle {
                    retry_after: (pick(0.0, 1.0) < 0.5)
                        .then(|| Duration::from_millis(pick(0.0, 3000.0) as u64)),
                }
            };
            scripted.push(Scripted::window(node, from_ms, from_ms + length, kind));
        }
        let mut node_faults = Vec::new();
        for _ in 0..pick(0.0, 4.0) as usize {
            let node = pick(0.0, nodes as f64) as usize;
            let at_ms = pick(0.0, dur_ms * 0.8) as u64;
            let fault = match pick(0.0, 5.0) as u32 {
                0 => NodeFault::Crash {
                    node,
                    at_ms,
                    restart_after: Some(ttl.mul_f64(pick(0.1, 2.0))),
                },
                1 => NodeFault::Pause {
                    node,
                    at_ms,
                    length: ttl.mul_f64(pick(0.05, 2.0)),
                },
                2 => NodeFault::WallStep {
                    node,
                    at_ms,
                    by_ms: pick(-3_600_000.0, 3_600_000.0) as i64,
                },
                3 => NodeFault::MonoStall {
                    node,
                    at_ms,
                    length: ttl.mul_f64(pick(0.05, 1.5)),
                    catch_up: true,
                },
                _ => NodeFault::Suspend {
                    node,
                    at_ms,
                    length: ttl.mul_f64(pick(0.1, 4.0)),
                },
            };
            node_faults.push(fault);
        }
        // A rolling deploy that changed the protocol of one node, and two
        // nodes whose entropy was seeded alike, in a few runs each.
        let mut protocols = vec![protocol; nodes];
        if pick(0.0, 1.0) < 0.1 {
            let node = pick(0.0, nodes as f64) as usize;
            protocols[node.min(nodes - 1)] = Protocol::ALL[pick(0.0, 3.0) as usize % 3];
        }
        // Sessions and shards need cas (no draw: older seeds keep their
        // schedule).
        for (p, kind) in protocols.iter_mut().zip(&clients) {
            if matches!(kind, ClientKind::Session | ClientKind::Shard) {
                *p = Protocol::Cas;
            }
        }
        // Simple clients share a key with cas only.
        if clients.contains(&ClientKind::Simple) {
            protocols.fill(Protocol::Cas);
        }
        let same_entropy = pick(0.0, 1.0) < 0.1;
        let mut cfg = ClientsConfig {
            seed,
            protocols,
            clients,
            variant: Variant::Safe,
            broken: None,
            ttl,
            duration,
            latency: (
                Duration::from_millis(1),
                Duration::from_millis(pick(2.0, 150.0) as u64),
            ),
            front_end_skew: Duration::from_millis(50),
            max_offset: Duration::from_secs(3600),
            max_drift: 0.009,
            faults,
            scripted,
            node_faults,
            suspend_clock: SuspendClock::CountsSuspend,
            poll_crash: pick(0.0, 0.004),
            poll_pause: pick(0.0, 0.002),
            tick_every: (ttl / 4, ttl * 3),
            duplicate_tick: pick(0.0, 0.3),
            cron_every: Duration::from_secs(30),
            cron_late: None,
            job_max: ttl * 2,
            probe: pick(0.0, 1.0) < 0.1,
            same_entropy,
            resign: pick(0.0, 1.0) < 0.3,
            resign_after: None,
            start_at: Vec::new(),
            record_timeline: false,
            page_size: 1000,
            spacing: Duration::ZERO,
            junk_keys: 0,
            late_release: 0.0,
            break_delay: Duration::ZERO,
            time_limits: false,
            fair: false,
            cli_wait: Duration::ZERO,
            pool_seats: 0,
            shards: 0,
            long_records: false,
        };
        // Drawn after everything else, so that older seeds keep the rest
        // of their schedule: small listing pages with other objects under
        // the key, long jobs (many renewals, the claim follows the last),
        // releases at the deadline, late breaks.
        // (Two keys or more a page: one key a page with 13 other objects
        // makes the protocol check's walk of `<key>/` outlast a 6 s lease
        // at 150 ms latency, a liveness cost no real page size comes near:
        // stores page at 1,000 keys. The scenarios cover one key a page.)
        if pick(0.0, 1.0) < 0.3 {
            cfg.page_size = 2 + pick(0.0, 3.0) as usize;
            cfg.junk_keys = pick(0.0, 14.0) as usize;
        }
        if pick(0.0, 1.0) < 0.2 {
            cfg.job_max = ttl * 6;
        }
        cfg.late_release = pick(0.0, 0.5);
        cfg.break_delay = ttl.mul_f64(pick(0.0, 2.0));
        cfg.time_limits = pick(0.0, 1.0) < 0.5;
        // A store with R2's and GCS's per-key write limit.
        if pick(0.0, 1.0) < 0.2 {
            cfg.spacing = Duration::from_secs(1);
        }
        // Drawn only for pools, whose mixes are newer than the rest: up to
        // as many seats as pool clients, so that the pool is full at times.
        let pool_clients = cfg
            .clients
            .iter()
            .filter(|&&k| k == ClientKind::Pool)
            .count();
        if pool_clients > 0 {
            cfg.pool_seats = 1 + pick(0.0, pool_clients as f64) as u32;
        }
        // Drawn only for shard fleets, newer than the rest: one to three
        // shards a member.
        let members = cfg
            .clients
            .iter()
            .filter(|&&k| k == ClientKind::Shard)
            .count();
        if members > 0 {
            cfg.shards = members as u32 * (1 + pick(0.0, 3.0) as u32);
        }
        // Drawn only for cron hosts, whose mixes are newer than the rest.
        if kinds.contains(&ClientKind::Cron) {
            cfg.cron_every = Duration::from_secs(ttl.as_secs() * pick(1.0, 4.0) as u64);
            if pick(0.0, 1.0) < 0.5 {
                cfg.cron_late = Some(cfg.cron_every.mul_f64(pick(0.1, 0.5)));
            }
        }
        cfg
    }

    /// The leases the checker follows: [`LEASE_KEY`], then the pool's
    /// seats, then (with session clients) the owned keys and every
    /// node's session.
    pub fn lease_keys(&self) -> Vec<String> {
        let seats = (0..self.pool_seats).map(|seat| lease_core::client::seat_key(POOL_KEY, seat));
        let mut keys: Vec<String> = std::iter::once(LEASE_KEY.to_string())
            .chain(seats)
            .collect();
        if self.clients.contains(&ClientKind::Session) {
            keys.extend(OWNED_KEYS.iter().map(|k| k.to_string()));
            keys.extend((0..self.clients.len()).map(session_key));
        }
        if self.clients.contains(&ClientKind::Shard) {
            use lease_core::client::{coordinator_key, member_key, shard_key};
            keys.extend((0..self.shards).map(|i| shard_key(SHARD_PREFIX, i)));
            let holder = |node| self.lease_config(node).holder;
            keys.extend((0..self.clients.len()).map(|n| member_key(SHARD_PREFIX, &holder(n))));
            keys.push(coordinator_key(SHARD_PREFIX));
        }
        keys
    }

    /// The keys the session clients own: [`OWNED_KEYS`], and
    /// [`LEASE_KEY`] first when every node runs cas.
    pub fn owned_keys(&self) -> Vec<&'static str> {
        let all_cas = self.protocols.iter().all(|p| *p == Protocol::Cas);
        let lease = all_cas.then_some(LEASE_KEY);
        lease.into_iter().chain(OWNED_KEYS).collect()
    }

    /// The lease settings node `node` uses.
    pub fn lease_config(&self, node: usize) -> LeaseConfig {
        let mut holder = format!("node-{node}");
        if self.long_records {
            holder.push_str(&format!("-{}", "h".repeat(400)));
        }
        let mut cfg = LeaseConfig::new(LEASE_KEY, holder, self.ttl);
        cfg.variant = self.variant;
        cfg.protocol = self.protocols.get(node).copied().unwrap_or_default();
        // Sessions need cas.
        if matches!(
            self.clients.get(node),
            Some(ClientKind::Session | ClientKind::Shard)
        ) {
            cfg.protocol = Protocol::Cas;
        }
        cfg.fair = self.fair;
        cfg.min_write_interval = self.spacing;
        if self.broken == Some(Broken::NoPatience) {
            cfg.request_timeout = Duration::from_millis(1);
        }
        cfg
    }
}
