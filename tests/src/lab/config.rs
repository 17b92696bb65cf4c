//! What a lab run is given (its settings, the executables it runs) and
//! the two things every part of the lab shares: its time line and its
//! seeded choices.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Real wall-clock time in Unix milliseconds (the lab's one time line:
/// the proxy, the lab and every journal use it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// A small seeded generator (xorshift64*): the lab's choices are
/// reproducible from its seed as far as process scheduling allows.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// From a seed (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// Which store the lab runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// moto served one request at a time (atomic conditional writes).
    Moto,
    /// Azurite (Azure Blob; atomic).
    Azurite,
    /// s3rver: ignores conditional headers (the negative case).
    S3rver,
}

/// The executables the lab runs.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// The `lease` CLI.
    pub lease: PathBuf,
    /// `lab-job`, run by `lease run`.
    pub job: PathBuf,
    /// `lab-service`.
    pub service: PathBuf,
    /// The example Lambda function `scheduled-singleton`.
    pub function: PathBuf,
    /// `lab-shard`, a member of the shard fleet.
    pub shard: PathBuf,
}

/// A lab run's settings.
#[derive(Clone, Debug)]
pub struct LabConfig {
    /// Names the run's log directory.
    pub name: String,
    /// The store.
    pub store: StoreKind,
    /// `lease run` slots.
    pub runners: usize,
    /// `lab-service` slots.
    pub services: usize,
    /// Lambda function slots.
    pub functions: usize,
    /// How often each function slot is invoked.
    pub tick: Duration,
    /// How long processes run.
    pub duration: Duration,
    /// The lease's ttl.
    pub ttl: Duration,
    /// Seeds every choice the lab makes.
    pub seed: u64,
    /// Whether `lease run` runs the capability probe first.
    pub probe: bool,
    /// Request faults in storms.
    pub request_faults: bool,
    /// Process faults (kill, freeze, blackhole) in storms, and clock offsets.
    pub process_faults: bool,
    /// How long a storm lasts.
    pub storm: Duration,
    /// How long a calm lasts.
    pub calm: Duration,
    /// Probability of a fault per request in a storm.
    pub fault_rate: f64,
    /// Mean time between process faults in a storm.
    pub process_fault_every: Duration,
    /// Longest job of a runner.
    pub max_work: Duration,
    /// A service steps down after 1 to this many jobs as leader (0: it
    /// leads until it dies).
    pub service_term_jobs: u64,
    /// Added by the proxy to every request it forwards (a slow store).
    pub store_latency: Duration,
    /// `lab-shard` slots: the members of one shard fleet (0: none).
    pub members: usize,
    /// The shards the fleet splits.
    pub shards: u32,
    /// The drain's bound a member is given for a shard moved away.
    pub shard_drain: Duration,
    /// How often a member appends a record for each shard it works on.
    pub shard_every: Duration,
    /// Mean time between process faults on the shard fleet in a storm
    /// (its own stream, beside the other slots').
    pub shard_fault_every: Duration,
    /// When not zero, every third calm lasts this long, and so does the
    /// run's last (at least): long enough for the shard fleet's bound
    /// (`docs/protocols.md`, "Shards": four ttls, two requests' retries
    /// and 3 s, 20 s at the lab's 3 s ttl) after a storm's faults end.
    pub long_calm: Duration,
}

impl LabConfig {
    /// The short run `make test` makes: 3 runners, 1 service and 1 Lambda
    /// function for
    /// `duration`, ttl 3 s, storms of 8 s and calms of 12 s.
    pub fn short(name: &str, store: StoreKind, duration: Duration, seed: u64) -> LabConfig {
        LabConfig {
            name: name.to_string(),
            store,
            runners: 3,
            services: 1,
            functions: 1,
            tick: Duration::from_millis(1500),
            duration,
            ttl: Duration::from_secs(3),
            seed,
            probe: true,
            request_faults: true,
            process_faults: true,
            storm: Duration::from_secs(8),
            calm: Duration::from_secs(12),
            fault_rate: 0.08,
            process_fault_every: Duration::from_millis(1500),
            max_work: Duration::from_millis(2500),
            service_term_jobs: 4,
            store_latency: Duration::ZERO,
            members: 0,
            shards: 0,
            shard_drain: Duration::from_secs(2),
            shard_every: Duration::from_millis(2000),
            shard_fault_every: Duration::from_millis(2000),
            long_calm: Duration::ZERO,
        }
    }

    /// The length of the phase that begins now, `left` before the end of
    /// the run, and whether it is a storm (`storm`: it would be), after
    /// `calms` calms. Storms and calms alternate; with a
    /// [`long_calm`](Self::long_calm), every third calm is long and the
    /// run ends with a calm at least that long (a storm or a calm with
    /// no room after it for a storm and a long calm gives way to it).
    pub fn phase(&self, storm: bool, calms: usize, left: Duration) -> (bool, Duration) {
        if self.long_calm.is_zero() {
            return (storm, if storm { self.storm } else { self.calm });
        }
        if storm {
            if left >= self.storm + self.long_calm {
                return (true, self.storm);
            }
            return (false, left);
        }
        let length = if calms % 3 == 2 {
            self.long_calm
        } else {
            self.calm
        };
        if left < length + self.storm + self.long_calm {
            (false, left)
        } else {
            (false, length)
        }
    }

    /// Settings from `LAB_*` variables over `self`: `LAB_SECONDS`,
    /// `LAB_RUNNERS`, `LAB_SERVICES`, `LAB_FUNCTIONS`, `LAB_SHARD_MEMBERS`,
    /// `LAB_SHARDS`, `LAB_SEED`, `LAB_RATE`.
    pub fn from_env(mut self) -> LabConfig {
        let var = |n: &str| std::env::var(n).ok().and_then(|v| v.parse::<u64>().ok());
        if let Some(s) = var("LAB_SECONDS") {
            self.duration = Duration::from_secs(s);
        }
        if let Some(n) = var("LAB_RUNNERS") {
            self.runners = n as usize;
        }
        if let Some(n) = var("LAB_SERVICES") {
            self.services = n as usize;
        }
        if let Some(n) = var("LAB_FUNCTIONS") {
            self.functions = n as usize;
        }
        if let Some(n) = var("LAB_SHARD_MEMBERS") {
            self.members = n as usize;
        }
        if let Some(n) = var("LAB_SHARDS") {
            self.shards = n as u32;
        }
        if let Some(n) = var("LAB_SEED") {
            self.seed = n;
        }
        if let Some(r) = std::env::var("LAB_RATE")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
        {
            self.fault_rate = r;
        }
        self
    }
}
