//! Shared by the simulation tests: the seeds of a random run.

/// The seeds of a random simulation run: `count` seeds from `base`.
///
/// The random runs are a sample of schedules, and a sample the fixes were
/// made against says little about the rest: unless `SIM_SEED_BASE` names
/// the first seed, every run starts at a base drawn from the time and the
/// process id, and so runs schedules nobody has run before. The base is
/// printed at the start and in every failure ([`SimSeeds::replay`]), so a
/// failing run replays exactly. `SIM_SEEDS` sets the count.
#[derive(Clone, Copy, Debug)]
pub struct SimSeeds {
    /// The first seed.
    pub base: u64,
    /// How many seeds.
    pub count: u64,
}

/// Fresh bases stay below this, so `base + count` never overflows and the
/// printed number stays short (still 10^12 of them).
const SEED_BASE_RANGE: u64 = 1 << 40;

impl SimSeeds {
    /// From `SIM_SEED_BASE` and `SIM_SEEDS` where set; else a fresh base
    /// and `default_count`. Announces the range on stderr; `what` names the
    /// run.
    pub fn from_env(what: &str, default_count: u64) -> SimSeeds {
        let var = |name: &str| -> Option<u64> {
            let v = std::env::var(name).ok()?;
            Some(
                v.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name} must be a whole number, got {v:?}")),
            )
        };
        let seeds = SimSeeds {
            base: var("SIM_SEED_BASE").unwrap_or_else(fresh_seed_base),
            count: var("SIM_SEEDS").unwrap_or(default_count),
        };
        eprintln!(
            "{what}: seeds {}..{} ({} to replay)",
            seeds.base,
            seeds.base + seeds.count,
            seeds.replay()
        );
        seeds
    }

    /// The seeds, in order.
    pub fn range(&self) -> std::ops::Range<u64> {
        self.base..self.base + self.count
    }

    /// The environment that runs these seeds again.
    pub fn replay(&self) -> String {
        format!("SIM_SEED_BASE={} SIM_SEEDS={}", self.base, self.count)
    }
}

/// A base no earlier run is likely to have had: the clock's nanoseconds and
/// the process id, mixed (SplitMix64's finaliser) so that runs started
/// close together land far apart.
fn fresh_seed_base() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    let mut z = nanos ^ (u64::from(std::process::id()) << 32);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % SEED_BASE_RANGE
}
