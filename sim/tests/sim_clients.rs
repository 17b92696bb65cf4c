//! The product's clients in the deterministic simulation, judged by the
//! truth checker (`lease_sim::clients`).

mod support;

use lease_core::variants::Variant;
use lease_core::Protocol;
use lease_sim::clients::scenarios;
use lease_sim::clients::{
    run, Broken, ClientKind, ClientsConfig, NodeFault, Report, Rule, SuspendClock,
};
use std::time::{Duration, Instant};
use support::SimSeeds;

const ALL_CLIENTS: [ClientKind; 4] = [
    ClientKind::Singleton,
    ClientKind::Hold,
    ClientKind::Cli,
    ClientKind::Elector,
];

/// The client mixes the random runs draw from, per protocol: each client
/// alone, all of them, and services on `Leadership` beside electors (a
/// world whose liveness is judged) and beside the clients that run jobs.
fn mixes() -> Vec<Vec<ClientKind>> {
    vec![
        vec![ClientKind::Singleton],
        vec![ClientKind::Hold],
        vec![ClientKind::Cli, ClientKind::Cli, ClientKind::Operator],
        vec![ClientKind::Elector],
        ALL_CLIENTS.to_vec(),
        SERVICES.to_vec(),
        SERVICES_AND_JOBS.to_vec(),
        vec![ClientKind::Cron, ClientKind::Cron, ClientKind::Cron],
        POOLS.to_vec(),
    ]
}

/// [`mixes`], and under cas the processes with sessions and the shard
/// fleets (both need cas).
fn mixes_for(protocol: Protocol) -> Vec<Vec<ClientKind>> {
    let mut mixes = mixes();
    if protocol == Protocol::Cas {
        mixes.push(SESSIONS.to_vec());
        mixes.push(SHARDS.to_vec());
        mixes.push(SIMPLE.to_vec());
    }
    mixes
}

/// Simple clients of the one-object format (another implementation's,
/// written in the simulator) on the key beside every cas client that
/// takes it, and an operator who breaks theirs and ours.
const SIMPLE: [ClientKind; 5] = [
    ClientKind::Simple,
    ClientKind::Singleton,
    ClientKind::Hold,
    ClientKind::Cli,
    ClientKind::Operator,
];

/// Members of a shard fleet (`Leases::shards`), beside singletons on the
/// lease at another key.
const SHARDS: [ClientKind; 4] = [
    ClientKind::Shard,
    ClientKind::Shard,
    ClientKind::Shard,
    ClientKind::Singleton,
];

/// Shard fleets of 8 to 50 members (one to three shards a member) under
/// the random fault mix, crashes and pauses on some members, members
/// leaving: every rule per shard, and the fleet's balance and coverage
/// once it is quiet. Fresh seeds on every run.
#[test]
fn shard_fleets_of_eight_to_fifty_members_are_safe_balanced_and_covered() {
    let seeds = SimSeeds::from_env("shard fleets", 10);
    for seed in seeds.range() {
        let mut cfg = ClientsConfig::random(seed, Protocol::Cas, &SHARDS);
        let members = 8 + (seed % 43) as usize;
        cfg.clients = vec![ClientKind::Shard; members];
        cfg.protocols = vec![Protocol::Cas; members];
        cfg.shards = (members * (1 + (seed % 3) as usize)) as u32;
        let r = run(cfg);
        assert!(
            r.violations.is_empty(),
            "{} ({} to replay)",
            r.summary(),
            seeds.replay()
        );
        assert!(r.counts.jobs_started > 0, "{}", r.summary());
    }
}

/// A quiet fleet of eight: every shard owned, balanced within one, and the
/// shard rules checked (the run is quiet long enough).
#[test]
fn a_quiet_fleet_splits_its_shards_evenly() {
    let mut cfg = ClientsConfig::quiet(3, Protocol::Cas, vec![ClientKind::Shard; 8]);
    cfg.shards = 20;
    let r = run(cfg);
    assert!(r.violations.is_empty(), "{}", r.summary());
    let assigned = r.counts.outcomes.get("shard assigned: acquired").copied();
    assert!(assigned.is_some_and(|n| n >= 20), "{}", r.summary());
}

/// Processes with sessions owning keys under them (`Leases::session`),
/// beside singletons on the lease at one of those keys.
const SESSIONS: [ClientKind; 4] = [
    ClientKind::Session,
    ClientKind::Session,
    ClientKind::Session,
    ClientKind::Singleton,
];

/// Runs in a pool's seats (`Run::pool`), beside singletons on the lease
/// at the other key: a pool's seats are leases of their own.
const POOLS: [ClientKind; 4] = [
    ClientKind::Pool,
    ClientKind::Pool,
    ClientKind::Pool,
    ClientKind::Singleton,
];

/// Services on `Leadership`, and electors: the lease is always wanted, so
/// its liveness is judged.
const SERVICES: [ClientKind; 3] = [
    ClientKind::Service,
    ClientKind::Service,
    ClientKind::Elector,
];

/// Services beside the clients that run jobs for a tick or a command, and
/// an operator who breaks leases under them.
const SERVICES_AND_JOBS: [ClientKind; 6] = [
    ClientKind::Service,
    ClientKind::Service,
    ClientKind::Singleton,
    ClientKind::Hold,
    ClientKind::Cli,
    ClientKind::Operator,
];

fn rules(r: &Report) -> Vec<Rule> {
    let mut v: Vec<Rule> = r.violations.iter().map(|v| v.rule).collect();
    v.dedup();
    v
}

#[test]
fn equal_configs_give_equal_runs() {
    for protocol in Protocol::ALL {
        for seed in [3, 80, 124] {
            let mut cfg = ClientsConfig::random(seed, protocol, &ALL_CLIENTS);
            cfg.record_timeline = true;
            let a = run(cfg.clone());
            let b = run(cfg);
            assert!(!a.timeline.is_empty());
            assert_eq!(a, b, "seed {seed} {protocol} did not replay");
        }
    }
}

/// No faults: every client of every protocol runs clean (the mutex's
/// holds aside, see `mutex_holds_stop_the_job_before_giving_the_lock_back`).
#[test]
fn quiet_worlds_are_clean() {
    for protocol in Protocol::ALL {
        for kind in ALL_CLIENTS.into_iter().chain([ClientKind::Service]) {
            if protocol == Protocol::Mutex
                && matches!(kind, ClientKind::Singleton | ClientKind::Hold)
            {
                continue;
            }
            for seed in 0..5 {
                let r = run(ClientsConfig::quiet(seed, protocol, vec![kind; 3]));
                assert!(r.violations.is_empty(), "{}", r.summary());
                assert!(r.counts.acquisitions >= 1, "{}", r.summary());
                if kind != ClientKind::Cli {
                    assert!(r.counts.jobs_started > 2, "{}", r.summary());
                }
            }
        }
    }
}

/// Processes with sessions in a quiet world: keys are owned (three at least),
/// jobs run on each, and no rule breaks.
#[test]
fn quiet_sessions_own_keys_and_work_on_them() {
    for seed in 0..5 {
        let mut cfg = ClientsConfig::quiet(seed, Protocol::Cas, SESSIONS.to_vec());
        cfg.resign = true;
        let r = run(cfg);
        assert!(r.violations.is_empty(), "{}", r.summary());
        let owned = r.counts.outcomes.get("own: acquired").copied().unwrap_or(0);
        assert!(owned >= 3, "{owned} keys owned: {}", r.summary());
        assert!(r.counts.jobs_started > 3, "{}", r.summary());
    }
}

/// Sixty contenders on one key in a quiet world (no faults: every failure
/// is `FailedWhenQuiet`), each starting a run every 0.1-1 s for a minute
/// of simulated time, on every protocol: a lost race is never an error
/// (no `GaveUp`), no two jobs overlap, and the lease changes hands. Fresh
/// seeds on every run (`SIM_SEED_BASE` replays one).
/// CLI contenders that wait (`lease acquire --wait`) re-read the lease
/// with `If-None-Match`: an unchanged lease is answered 304 and the
/// acquire goes on from its copy, with every rule of the checker kept.
/// Fresh seeds on every run.
#[test]
fn waiting_contenders_re_read_conditionally() {
    let seeds = SimSeeds::from_env("waiting contenders", 3);
    for protocol in Protocol::ALL {
        let (mut acquisitions, mut not_modified) = (0, 0);
        for seed in seeds.range() {
            let mut cfg = ClientsConfig::quiet(seed, protocol, vec![ClientKind::Cli; 6]);
            cfg.cli_wait = cfg.ttl * 3;
            let r = run(cfg);
            assert!(
                r.violations.is_empty(),
                "{protocol} seed {seed}: {}",
                r.summary()
            );
            acquisitions += r.counts.acquisitions;
            not_modified += r.counts.not_modified;
        }
        eprintln!("{protocol}: {acquisitions} acquisitions, {not_modified} re-reads answered 304");
        assert!(acquisitions > 10, "{protocol}: {acquisitions}");
        // cas and mutex re-read the key, epochs the newest epoch object.
        assert!(not_modified > 0, "{protocol}: no conditional re-read");
    }
}

#[test]
fn sixty_contenders_never_give_up() {
    let seeds = SimSeeds::from_env("sixty contenders", 2);
    let (mut acquisitions, mut busy) = (0, 0);
    for protocol in Protocol::ALL {
        // The mutex's one-ttl terms end `lease run`'s hold (finding 8);
        // its contenders are the one-shot CLI.
        let kinds: &[ClientKind] = match protocol {
            Protocol::Mutex => &[ClientKind::Cli],
            _ => &[ClientKind::Hold, ClientKind::Cli, ClientKind::Singleton],
        };
        for seed in seeds.range() {
            let clients = (0..60).map(|i| kinds[i % kinds.len()]).collect();
            let mut cfg = ClientsConfig::quiet(seed, protocol, clients);
            cfg.duration = Duration::from_secs(60);
            cfg.tick_every = (Duration::from_millis(100), Duration::from_secs(1));
            cfg.job_max = Duration::from_millis(400);
            let r = run(cfg);
            let gave_up: u64 = r
                .counts
                .outcomes
                .iter()
                .filter(|(name, _)| name.contains("gave up"))
                .map(|(_, n)| n)
                .sum();
            assert_eq!(gave_up, 0, "{protocol} seed {seed}: {}", r.summary());
            assert!(
                r.violations.is_empty(),
                "{protocol} seed {seed}: {}",
                r.summary()
            );
            assert!(
                r.counts.acquisitions > 20,
                "{protocol} seed {seed}: {}",
                r.summary()
            );
            acquisitions += r.counts.acquisitions;
            busy += r
                .counts
                .outcomes
                .iter()
                .filter(|(name, _)| name.ends_with(": busy"))
                .map(|(_, n)| n)
                .sum::<u64>();
        }
    }
    // Contention, not turns: most runs find the lease busy.
    assert!(busy > acquisitions, "{busy} busy, {acquisitions} acquired");
    eprintln!("sixty contenders: {acquisitions} acquisitions, {busy} busy, 0 gave up");
}

/// Finding 8 (found by this simulation): with the mutex, the holding loop
/// reaches the end of the one-ttl term, gives the lock back (DELETE) and
/// only drops the job when that release has answered: the job runs without
/// the lock for a round trip (or for the release's retries).
#[test]
fn mutex_holds_stop_the_job_before_giving_the_lock_back() {
    for kind in [ClientKind::Singleton, ClientKind::Hold] {
        let r = run(ClientsConfig::quiet(0, Protocol::Mutex, vec![kind; 3]));
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
}

// ---------------------------------------------------------------------
// Proof the checker can fail: broken clients and the core's variants.

#[test]
fn a_singleton_starting_after_its_deadline_is_caught() {
    for protocol in Protocol::ALL {
        let mut cfg = ClientsConfig::quiet(2, protocol, vec![ClientKind::Singleton; 2]);
        cfg.broken = Some(Broken::StartPastDeadline);
        let r = run(cfg);
        // Just past the local deadline the record may still be live (the
        // margins), but not for the job's length.
        assert!(
            r.has(Rule::JobWithoutLease) || r.has(Rule::JobPastValidity),
            "{}",
            r.summary()
        );
    }
}

#[test]
fn a_hold_that_ignores_the_deadline_is_caught() {
    for protocol in Protocol::ALL {
        let mut cfg = ClientsConfig::quiet(2, protocol, vec![ClientKind::Hold; 2]);
        cfg.broken = Some(Broken::IgnoreDeadline);
        let r = run(cfg);
        assert!(
            r.has(Rule::JobPastValidity) && r.has(Rule::JobsOverlap),
            "{}",
            r.summary()
        );
    }
}

#[test]
fn a_release_that_does_not_ask_the_store_is_caught() {
    for protocol in Protocol::ALL {
        let mut cfg = ClientsConfig::quiet(2, protocol, vec![ClientKind::Cli; 2]);
        cfg.broken = Some(Broken::BlindRelease);
        let r = run(cfg);
        assert!(r.has(Rule::OutcomeMismatch), "{}", r.summary());
    }
}

#[test]
fn an_acquire_that_fails_with_nothing_wrong_is_caught() {
    for kind in [ClientKind::Singleton, ClientKind::Hold, ClientKind::Cli] {
        let mut cfg = ClientsConfig::quiet(2, Protocol::Cas, vec![kind; 2]);
        assert!(!run(cfg.clone()).has(Rule::FailedWhenQuiet));
        cfg.broken = Some(Broken::NoPatience);
        let r = run(cfg);
        assert!(r.has(Rule::FailedWhenQuiet), "{kind:?}: {}", r.summary());
    }
}

/// The first seed in `seeds` where `variant` breaks `rule` in the product
/// clients while the safe protocol, on the same schedule, does not.
fn caught(
    variant: Variant,
    rule: Rule,
    kinds: &[ClientKind],
    seeds: std::ops::Range<u64>,
) -> Option<(u64, String)> {
    for seed in seeds {
        let cfg = ClientsConfig::random(seed, Protocol::Cas, kinds);
        let broken = run(ClientsConfig {
            variant,
            ..cfg.clone()
        });
        if broken.has(rule) && !run(cfg).has(rule) {
            let v = broken.violations.iter().find(|v| v.rule == rule).unwrap();
            return Some((seed, v.to_string()));
        }
    }
    None
}

#[test]
fn the_cores_unsafe_variants_are_caught_in_the_product_clients() {
    let mix = [ClientKind::Hold, ClientKind::Elector, ClientKind::Singleton];
    for (variant, rule) in [
        (Variant::NaiveClock, Rule::JobsOverlap),
        (Variant::TrustReplies, Rule::JobWithoutLease),
        (Variant::NoMargins, Rule::JobPastValidity),
    ] {
        let found = caught(variant, rule, &mix, 0..400);
        eprintln!("{variant:?}: {found:?}");
        assert!(
            found.is_some(),
            "{variant:?} was not caught breaking {rule:?}"
        );
    }
}

/// The flight recorder's replay judges the CLI clients' traces from what
/// they hold alone, and its deadline rule catches a client that holds
/// without margins on the first schedule of CLI clients, where the safe
/// core's traces replay identically and clean.
#[test]
fn the_replays_deadline_rule_catches_no_margins_in_the_clients_traces() {
    let cfg = ClientsConfig::random(1, Protocol::Cas, &[ClientKind::Cli]);
    let safe = run(cfg.clone());
    assert!(safe.counts.traces_replayed > 0, "{}", safe.summary());
    assert!(!safe.has(Rule::TraceRuleBroken) && !safe.has(Rule::TraceDiverged));
    let broken = run(ClientsConfig {
        variant: Variant::NoMargins,
        ..cfg
    });
    assert!(broken.has(Rule::TraceRuleBroken), "{}", broken.summary());
    assert!(!broken.has(Rule::TraceDiverged), "{}", broken.summary());
}

/// The default run's seed budget per protocol and client mix.
const DEFAULT_SEEDS: u64 = 670;

/// `BlindFence`: a holder's fenced write is held in the network until a
/// later holder has written; the blind PUT then lowers the token. The safe
/// fence's conditional PUT is refused.
#[test]
fn a_blind_fence_is_caught() {
    use lease_sim::world::faults::{FaultKind, Scripted};
    let schedule = |variant| {
        let mut cfg = ClientsConfig::quiet(
            4,
            Protocol::Cas,
            vec![ClientKind::Hold, ClientKind::Elector],
        );
        cfg.variant = variant;
        cfg.start_at = vec![0, 500];
        cfg.latency = (Duration::from_millis(5), Duration::from_millis(10));
        cfg.job_max = Duration::from_secs(5);
        cfg.tick_every = (Duration::from_secs(600), Duration::from_secs(600));
        // Node 0's second write is its fenced PUT (the first took the lease).
        cfg.scripted = vec![Scripted::next_write(
            0,
            25,
            FaultKind::Late {
                extra: Duration::from_secs(25),
            },
        )];
        run(cfg)
    };
    let blind = schedule(Variant::BlindFence);
    assert!(blind.has(Rule::FenceTokenDecreased), "{}", blind.summary());
    let safe = schedule(Variant::Safe);
    assert!(!safe.has(Rule::FenceTokenDecreased), "{}", safe.summary());
}

// ---------------------------------------------------------------------
// The findings, by hand-built schedules. The `finding_N_is_caught` tests
// pin what the checker finds in the current core; the ignored
// `finding_N_is_fixed` tests are the safety the core must reach (when a
// fix lands, flip the pair).

#[test]
fn finding_1_is_fixed() {
    for protocol in Protocol::ALL {
        for kind in [ClientKind::Hold, ClientKind::Singleton] {
            let r = scenarios::acquire_reply_lost_then_outage_with(protocol, kind);
            assert!(r.violations.is_empty(), "{}", r.summary());
        }
        let r = scenarios::acquire_reply_lost_then_retry_after(protocol);
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
}

#[test]
fn finding_2_is_fixed() {
    for protocol in [Protocol::Cas, Protocol::Epochs] {
        let r = scenarios::renewal_gives_up_unsettled(protocol);
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
    for protocol in Protocol::ALL {
        let r = scenarios::acquire_gives_up_unsettled(protocol);
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
}

#[test]
fn finding_3_is_fixed() {
    for protocol in Protocol::ALL {
        let r = scenarios::retry_after_a_day(protocol);
        assert!(r.violations.is_empty(), "{}", r.summary());
        let r = scenarios::retry_after_a_day_in_election(protocol);
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
}

/// A mutex released by the CLI in a new process (inspect, resume by etag,
/// release) after its acquire left a create in the network: the record
/// says so (`strays`), and the release waits until that create could no
/// longer be live, deleting it if it lands meanwhile.
#[test]
fn finding_5_is_fixed_for_the_mutex_released_from_another_process() {
    let r = scenarios::late_create_after_release();
    assert!(r.violations.is_empty(), "{}", r.summary());
    assert_eq!(r.counts.faults.get("late delivery"), Some(&1));
}

#[test]
fn finding_5_is_fixed_for_epochs() {
    let r = scenarios::late_renewal_after_release();
    assert!(r.violations.is_empty(), "{}", r.summary());
}

#[test]
fn finding_6_is_fixed() {
    for protocol in Protocol::ALL {
        let r = scenarios::identical_seeds(protocol);
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
}

#[test]
fn finding_7_is_fixed() {
    for (a, b) in [
        (Protocol::Cas, Protocol::Epochs),
        (Protocol::Epochs, Protocol::Cas),
        (Protocol::Mutex, Protocol::Epochs),
        (Protocol::Epochs, Protocol::Mutex),
    ] {
        let r = scenarios::two_protocols_on_one_key(a, b);
        assert!(!r.has(Rule::JobsOverlap), "{a}/{b}: {}", r.summary());
    }
}

// ---------------------------------------------------------------------
// A suspended machine (issue 24).

/// The holders a suspend is tried on.
const SUSPENDED_HOLDERS: [ClientKind; 3] =
    [ClientKind::Singleton, ClientKind::Hold, ClientKind::Elector];

#[test]
fn a_holder_suspended_past_its_ttl_stops_on_resume() {
    for protocol in Protocol::ALL {
        for holder in SUSPENDED_HOLDERS {
            let r =
                scenarios::holder_suspended_past_ttl(protocol, holder, SuspendClock::CountsSuspend);
            assert!(r.violations.is_empty(), "{holder:?}: {}", r.summary());
            assert!(r.excused.is_empty(), "{holder:?}: {}", r.summary());
            assert_eq!(r.counts.faults.get("node suspend"), Some(&1));
            // Node 0 worked before the suspend, node 1 after it.
            assert!(r.counts.jobs_started >= 2, "{holder:?}: {}", r.summary());
        }
    }
}

#[test]
fn a_clock_that_stops_in_a_suspend_is_caught() {
    for protocol in Protocol::ALL {
        for holder in SUSPENDED_HOLDERS {
            let r = scenarios::holder_suspended_past_ttl(
                protocol,
                holder,
                SuspendClock::StopsInSuspend,
            );
            assert!(
                r.has(Rule::JobsOverlap) && r.has(Rule::JobPastValidity),
                "{protocol} {holder:?}: {}",
                r.summary()
            );
            assert!(r.excused.is_empty(), "{holder:?}: {}", r.summary());
        }
    }
}

/// The clock that stops in a suspend (`Instant`, before issue 24) is found
/// by the default random run (its schedules, in its order, within its
/// seed budget) making jobs overlap or outlive their lease where the
/// clock that counts the suspend, on the same schedule, does not; and the
/// schedule replays from its seed.
#[test]
fn a_clock_that_stops_in_a_suspend_is_caught_by_the_default_run() {
    let found = (0..DEFAULT_SEEDS).find_map(|seed| {
        Protocol::ALL.into_iter().find_map(|protocol| {
            mixes().into_iter().find_map(|kinds| {
                let cfg = ClientsConfig::random(seed, protocol, &kinds);
                // Without a suspend the two clocks are the same.
                if !cfg
                    .node_faults
                    .iter()
                    .any(|f| matches!(f, NodeFault::Suspend { .. }))
                {
                    return None;
                }
                let broken = run(ClientsConfig {
                    suspend_clock: SuspendClock::StopsInSuspend,
                    ..cfg.clone()
                });
                let safe = run(cfg.clone());
                let new: Vec<Rule> = rules(&broken)
                    .into_iter()
                    .filter(|r| matches!(r, Rule::JobsOverlap | Rule::JobPastValidity))
                    .filter(|r| !safe.has(*r))
                    .collect();
                (!new.is_empty()).then_some((seed, protocol, kinds, cfg, broken, new))
            })
        })
    });
    let Some((seed, protocol, kinds, cfg, broken, new)) = found else {
        panic!("StopsInSuspend was not caught within {DEFAULT_SEEDS} seeds");
    };
    let again = run(ClientsConfig {
        suspend_clock: SuspendClock::StopsInSuspend,
        ..cfg
    });
    assert_eq!(
        again.violations, broken.violations,
        "seed {seed} does not replay"
    );
    eprintln!(
        "StopsInSuspend: seed {seed} {protocol} {kinds:?} breaks {new:?}; first: {}",
        broken.violations[0]
    );
}

// ---------------------------------------------------------------------
// Random schedules.

/// The random runs' schedule for `seed`: [`ClientsConfig::random`], with
/// fair waiting ([`LeaseConfig::fair`]) on in one seed of four (these chosen from
/// the seed, not drawn, so that the fixed seeds elsewhere replay as found).
fn random_config(seed: u64, protocol: Protocol, kinds: &[ClientKind]) -> ClientsConfig {
    let mut cfg = ClientsConfig::random(seed, protocol, kinds);
    cfg.fair = seed % 4 == 1;
    // Two runs in three, CLI acquires wait (`--wait`) up to one or two ttl.
    cfg.cli_wait = cfg.ttl * (seed % 3) as u32;
    // One in eleven, long records (holder names, tick ids and results at
    // their longest, ticks often): a record's completed ticks would pass
    // what a client reads (a remainder no fixed seed here has).
    if seed % 11 == 8 {
        cfg = cfg.with_long_records();
    }
    cfg
}

/// Runs `seeds` of every protocol and client mix; returns the reports'
/// failures (seed, protocol, mix, summary) and the totals.
fn random_runs(seeds: std::ops::Range<u64>) -> (Vec<String>, u64, u64, u64, (u64, u64)) {
    let (mut failures, mut schedules, mut calls, mut jobs) = (Vec::new(), 0, 0, 0);
    let (mut not_modified, mut traces) = (0, 0);
    for protocol in Protocol::ALL {
        for kinds in mixes_for(protocol) {
            for seed in seeds.clone() {
                let r = run(random_config(seed, protocol, &kinds));
                schedules += 1;
                calls += r.counts.store_calls;
                jobs += r.counts.jobs_started;
                not_modified += r.counts.not_modified;
                traces += r.counts.traces_replayed;
                if !r.violations.is_empty() {
                    if std::env::var_os("SIM_PRINT").is_some() {
                        eprintln!("FAIL seed {seed} {protocol} {kinds:?} {}", r.summary());
                    }
                    failures.push(format!("{protocol} {kinds:?} {}", r.summary()));
                }
            }
        }
    }
    (failures, schedules, calls, jobs, (not_modified, traces))
}

/// The default run: every protocol and client mix under the random fault
/// mix (3 protocols x 9 client mixes, and the sessions', the shard
/// fleets' and the simple clients' mixes under cas: 30 schedules a seed;
/// `SIM_SEEDS` seeds, 670 by default: 20,100 schedules), judged by every
/// rule of the checker. The seeds are fresh
/// on every run, from a random base unless `SIM_SEED_BASE` names it (see
/// `support::SimSeeds`); the fixed-seed tests above are the regression
/// tests. The release long run (`make sim-long`) is the same test with
/// more seeds:
/// `SIM_SEEDS=33334 cargo test -p lease-sim --release --all-features --test sim_clients random_schedules_are_safe`
/// (1,000,020 schedules: 33,334 seeds x 30).
#[test]
fn random_schedules_are_safe() {
    let seeds = SimSeeds::from_env("product simulation", DEFAULT_SEEDS);
    let started = Instant::now();
    let (failures, schedules, calls, jobs, (not_modified, traces)) = random_runs(seeds.range());
    let elapsed = started.elapsed();
    eprintln!(
        "{schedules} schedules, {calls} store calls ({not_modified} answered 304), {jobs} jobs, {traces} CLI traces replayed, in {elapsed:?} ({:.0} schedules/s); {} with violations",
        schedules as f64 / elapsed.as_secs_f64(),
        failures.len()
    );
    assert!(not_modified > 0, "no conditional re-read was made");
    assert!(jobs > schedules, "schedules should run jobs");
    let mut by_rule = std::collections::BTreeMap::new();
    for f in &failures {
        // The summary's violation lines, "  [Rule] t=...": not the client
        // mix ("[Hold]") or an empty list ("[]") elsewhere in it.
        let lines = f.lines().filter_map(|l| l.strip_prefix("  ["));
        for rule in lines.filter_map(|l| l.split(']').next()) {
            *by_rule.entry(rule.to_string()).or_insert(0) += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing schedules, by rule {by_rule:?} ({} to replay); first:\n{}",
        failures.len(),
        seeds.replay(),
        failures[0]
    );
}

#[test]
#[ignore = "exploration"]
fn explore() {
    use std::collections::BTreeMap;
    let n: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let started = std::time::Instant::now();
    for protocol in Protocol::ALL {
        for kinds in mixes_for(protocol) {
            let mut by_rule: BTreeMap<String, (u64, u64, String)> = BTreeMap::new();
            let mut excused = 0;
            for seed in 0..n {
                let r = run(ClientsConfig::random(seed, protocol, &kinds));
                excused += r.excused.len();
                for v in &r.violations {
                    let e =
                        by_rule
                            .entry(format!("{:?}", v.rule))
                            .or_insert((0, seed, v.to_string()));
                    e.0 += 1;
                }
            }
            eprintln!("== {protocol} {kinds:?}: excused {excused}");
            for (rule, (count, seed, text)) in by_rule {
                eprintln!("   {rule}: {count} (first seed {seed}: {text})");
            }
        }
    }
    eprintln!("{:?}", started.elapsed());
}

#[test]
#[ignore = "debugging aid: SIM_SEED, SIM_PROTOCOL, SIM_KINDS=singleton,hold,cli,operator,elector,service,cron,pool,session,shard,simple"]
fn replay_one() {
    let seed: u64 = std::env::var("SIM_SEED").unwrap().parse().unwrap();
    let protocol = Protocol::parse(&std::env::var("SIM_PROTOCOL").unwrap_or("cas".into())).unwrap();
    let kinds: Vec<ClientKind> = std::env::var("SIM_KINDS")
        .unwrap_or("singleton".into())
        .split(',')
        .map(|k| match k {
            "singleton" => ClientKind::Singleton,
            "hold" => ClientKind::Hold,
            "cli" => ClientKind::Cli,
            "operator" => ClientKind::Operator,
            "service" => ClientKind::Service,
            "cron" => ClientKind::Cron,
            "pool" => ClientKind::Pool,
            "session" => ClientKind::Session,
            "shard" => ClientKind::Shard,
            "simple" => ClientKind::Simple,
            _ => ClientKind::Elector,
        })
        .collect();
    let mut cfg = random_config(seed, protocol, &kinds);
    cfg.record_timeline = true;
    let r = run(cfg);
    for line in &r.timeline {
        println!("{line}");
    }
    println!("{}", r.summary());
}

#[test]
#[ignore = "debugging aid"]
fn scenarios_print() {
    use lease_sim::clients::scenarios as s;
    let all: Vec<(&str, lease_sim::clients::Report)> = vec![
        (
            "f1 cas hold",
            s::acquire_reply_lost_then_outage(Protocol::Cas),
        ),
        (
            "f1 epochs hold",
            s::acquire_reply_lost_then_outage(Protocol::Epochs),
        ),
        (
            "f1 mutex hold",
            s::acquire_reply_lost_then_outage(Protocol::Mutex),
        ),
        (
            "f1 cas singleton",
            s::acquire_reply_lost_then_outage_with(Protocol::Cas, ClientKind::Singleton),
        ),
        (
            "f1 cas retry-after",
            s::acquire_reply_lost_then_retry_after(Protocol::Cas),
        ),
        (
            "f2 cas elector",
            s::renewal_gives_up_unsettled(Protocol::Cas),
        ),
        (
            "f2 epochs elector",
            s::renewal_gives_up_unsettled(Protocol::Epochs),
        ),
        (
            "f2 cas acquire",
            s::acquire_gives_up_unsettled(Protocol::Cas),
        ),
        ("f3 cas cli", s::retry_after_a_day(Protocol::Cas)),
        (
            "f3 cas elector",
            s::retry_after_a_day_in_election(Protocol::Cas),
        ),
        ("f5 mutex", s::late_create_after_release()),
        ("f5 epochs", s::late_renewal_after_release()),
        ("f6 cas", s::identical_seeds(Protocol::Cas)),
        ("f6 epochs", s::identical_seeds(Protocol::Epochs)),
        (
            "f7 cas/epochs",
            s::two_protocols_on_one_key(Protocol::Cas, Protocol::Epochs),
        ),
        (
            "f7 mutex/epochs",
            s::two_protocols_on_one_key(Protocol::Mutex, Protocol::Epochs),
        ),
    ];
    for (name, r) in all {
        println!("== {name}: {} violations", r.violations.len());
        for v in r.violations.iter().take(4) {
            println!("   {v}");
        }
    }
}

#[test]
#[ignore = "debugging aid"]
fn scenario_timeline() {
    use lease_sim::clients::scenarios as s;
    let r = match std::env::var("SIM_SCENARIO").unwrap().as_str() {
        "f1" => s::acquire_reply_lost_then_outage(Protocol::Cas),
        "f1r" => s::acquire_reply_lost_then_retry_after(Protocol::Cas),
        "f5m" => s::late_create_after_release(),
        _ => s::acquire_gives_up_unsettled(Protocol::Cas),
    };
    for l in r.timeline.iter().take(80) {
        println!("{l}");
    }
}

/// Schedules that failed on seeds no fix had been tuned against (the long
/// run on fresh ranges: 500,000, 7,000,000, 123,456,789 and 9,000,000,000;
/// 11 of 400,020 failed), kept as fixed regression scenarios:
/// - the checker's liveness rule took a paused elector for a running one,
///   and a pause's end for no fault (NoTakeover; a false alarm);
/// - a mutex release whose DELETE went unanswered, finding another's lock,
///   said `Released` without waiting out a late create of its own, which
///   then landed as a lock nobody held (LateWrite);
/// - the busy rule matched a record of the same holder and token written
///   after the operation (OwnRecord; a false alarm);
/// - an epochs acquire read the newest epoch listed after cleanup had
///   deleted it and a late create had filled its slot again, and reported
///   busy on that zombie (OutcomeMismatch).
#[test]
fn fresh_seed_findings_are_fixed() {
    use ClientKind::{Cli, Elector, Hold, Operator, Service, Singleton};
    let cases: &[(u64, Protocol, &[ClientKind])] = &[
        (501975, Protocol::Epochs, &[Elector]),
        (505885, Protocol::Mutex, &[Elector]),
        (7001255, Protocol::Cas, &[Elector]),
        (7001256, Protocol::Epochs, &[Elector]),
        (123458032, Protocol::Mutex, &[Elector]),
        (123458142, Protocol::Mutex, &[Elector]),
        (503901, Protocol::Mutex, &[Cli, Cli, Operator]),
        (123463279, Protocol::Mutex, &[Cli, Cli, Operator]),
        (123457137, Protocol::Mutex, &[Singleton]),
        (9000000086, Protocol::Cas, &[Singleton]),
        (9000004886, Protocol::Epochs, &[Singleton]),
        // Found on the way, with the new faults and rules: an epochs
        // release create given back for a foreign object at the key; an
        // epochs release overtaken during its LIST said AlreadyLost; a
        // mutex break whose delete went unanswered; a renewal reading on
        // past its deadline lost the reply it was handed (stalled); a
        // duplicate tick judged against a run still under way; a protocol
        // mismatch that dropped a create held in the network.
        (214, Protocol::Epochs, &[Hold]),
        (548765223204, Protocol::Epochs, &[Hold]),
        (338716757126, Protocol::Mutex, &[Cli, Cli, Operator]),
        (155778378942, Protocol::Cas, &[Cli, Cli, Operator]),
        (155778378902, Protocol::Epochs, &[Cli, Cli, Operator]),
        (338716757381, Protocol::Cas, &[Singleton]),
        (
            226602195715,
            Protocol::Epochs,
            &[Singleton, Hold, Cli, Elector],
        ),
        // The first 1,000,005-schedule run on fresh seeds: a tick that
        // began in the millisecond its environment's previous run ended
        // was judged against claims it could not have read yet.
        (533800123356, Protocol::Cas, &[Singleton]),
        // The second (SIM_SEED_BASE=615983593386, 8 of 1,000,005 failed):
        // an epochs acquire that could not confirm its create deleted it,
        // after the releaser whose released epoch it had taken over had
        // deleted that one (ours was above it): the releaser's last
        // renewal was the live lease again (OwnRecord, OutcomeMismatch).
        (615983612905, Protocol::Epochs, &[Singleton]),
        (615983649660, Protocol::Epochs, &[Singleton]),
        (615983602405, Protocol::Epochs, &[Hold]),
        (
            615983628784,
            Protocol::Epochs,
            &[Singleton, Hold, Cli, Elector],
        ),
        (
            615983635093,
            Protocol::Epochs,
            &[Singleton, Hold, Cli, Elector],
        ),
        (
            615983650023,
            Protocol::Epochs,
            &[Singleton, Hold, Cli, Elector],
        ),
        // And an epochs acquire whose create was refused or lost read a
        // late create of another below the live epoch at that key and
        // reported busy on it (OutcomeMismatch).
        (615983641588, Protocol::Epochs, &[Singleton]),
        (
            615983647890,
            Protocol::Epochs,
            &[Singleton, Hold, Cli, Elector],
        ),
        // After the two simulators shared one fault model
        // (SIM_SEED_BASE=530914406765, 9 of 1,000,005 failed): a probe whose
        // request was held in the network gave up, and the request's
        // late arrival, after the probe had ended, was the only fault the
        // quiet-acquire rule saw (a late delivery is noted when sent now).
        (530914441176, Protocol::Cas, &[Hold]),
        (530914441176, Protocol::Epochs, &[Hold]),
        (530914430702, Protocol::Epochs, &[Singleton]),
        (
            530914459782,
            Protocol::Epochs,
            &[Singleton, Hold, Cli, Elector],
        ),
        (530914408579, Protocol::Mutex, &[Hold]),
        (530914455840, Protocol::Mutex, &[Hold]),
        // The probe the fleet shares (SIM_SEED_BASE=145683923729): a
        // `lease run` waited out a crashed process's claim to probe (40 s)
        // and was held to an acquire's bound (OpStalled); the bound of a
        // run that checks the store now counts the check's time.
        (145683923852, Protocol::Cas, &[Hold]),
        // A probe whose LIST was throttled past its time failed the listing
        // checks, and its refusal, kept for the fleet, refused every later
        // client in a quiet time (FailedWhenQuiet): a check that failed for
        // want of an answer refuses the prober only.
        (
            472854141000,
            Protocol::Cas,
            &[Service, Service, Singleton, Hold, Cli, Operator],
        ),
        // The 100,002-schedule run (SIM_SEED_BASE=529654687565): the
        // probe's own first create, held in the network, landed during its
        // delete checks, which then failed; kept for the fleet, the mutex
        // was refused in a quiet time. A probe with a write of unclear
        // outcome (no reply, a 5xx) keeps no refusal for the fleet.
        (
            529654690082,
            Protocol::Mutex,
            &[Service, Service, Singleton, Hold, Cli, Operator],
        ),
        (
            530914432895,
            Protocol::Mutex,
            &[Singleton, Hold, Cli, Elector],
        ),
        (
            530914440453,
            Protocol::Mutex,
            &[Singleton, Hold, Cli, Elector],
        ),
        // The same run: a mutex `lease release --etag` after an operator
        // had broken the lock and a create of the same acquisition, held
        // in the network, had landed over it, said AlreadyLost (right: the
        // version it was handed was gone) while a record of its session
        // was live: no process knew that version; the rule excuses it.
        (530914458861, Protocol::Mutex, &[Cli, Cli, Operator]),
        (530914472152, Protocol::Mutex, &[Cli, Cli, Operator]),
        // Once per tick, the first fresh run with its rules: a release
        // that recorded a tick, sent while the lease was valid, was lost;
        // the node paused past the expiry and another holder took over
        // without the tick; the release said Released and the run said
        // the tick recorded (TickNotRecorded). It says AlreadyLost now:
        // the holder after it would carry the tick on had it landed.
        (
            300543066640,
            Protocol::Cas,
            &[Singleton, Hold, Cli, Elector],
        ),
        // The same with epochs (SIM_SEED_BASE=859874275330, 2 of 100,005
        // failed): a renewal had moved the lease's token past the one the
        // tick ran with, and the check looked for the tick by the lease's
        // token, so a lost release still said Released.
        (859874281740, Protocol::Epochs, &[Singleton]),
        (859874275836, Protocol::Epochs, &[Singleton]),
        // The 1,000,005-schedule run from SIM_SEED_BASE=799166243058 (1
        // failed): in a mixed world (node 3 on epochs) a renewal's create
        // of epoch 3, given back by a late DELETE, left the slot to a
        // concurrent run's acquisition, and a duplicate tick skipped
        // behind that one; the busy rule matched the earlier run's epoch 3
        // by holder and token alone (OwnRecord; a false alarm).
        (
            799166277726,
            Protocol::Mutex,
            &[Singleton, Hold, Cli, Elector],
        ),
        // A tick's create without a second read (issue 27), first written
        // to stamp its record from the local wall clock, which the nodes
        // here have up to an hour off: records expired on the store as
        // they were written (SIM_SEED_BASE=368260588705, 421 of 10,050
        // failed; 533800123356 above failed too). It is stamped from the
        // tick read's store date now.
        (368260588709, Protocol::Cas, &[Singleton]),
    ];
    for &(seed, protocol, kinds) in cases {
        let mut cfg = ClientsConfig::random(seed, protocol, kinds);
        // Found before the simulation gave runs time limits: replayed as
        // they were found.
        cfg.time_limits = false;
        let r = run(cfg);
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
    // Found with time limits, replayed as found. The first fresh run after
    // the epochs marker replaced the LIST after a cas or mutex win
    // (SIM_SEED_BASE=290083773369, 19 of 10,050 failed): a singleton's
    // busy check read the marker, released and token 0, as a free lease
    // and acquired from that read with a PUT `If-Match` over it: epochs and
    // cas clients held the key at once (JobsOverlap). An acquire from a
    // read now refuses another protocol's record before any write.
    // And (SIM_SEED_BASE=480982518995, 1 of 100,005 failed): an epochs
    // acquire read the newest epoch listed as a version a late create had
    // refilled after cleanup, a second time in one operation; it listed
    // again only once, and reported busy on that zombie (OutcomeMismatch).
    // It lists again up to three times now.
    let found_with_time_limits: &[(u64, Protocol, &[ClientKind])] = &[
        (290083773414, Protocol::Cas, &[Singleton]),
        (480982519079, Protocol::Epochs, &[Singleton]),
    ];
    for &(seed, protocol, kinds) in found_with_time_limits {
        let r = run(ClientsConfig::random(seed, protocol, kinds));
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
    // Found with waiting CLI clients (`random_config`: `cli_wait`, fair
    // waiting), SIM_SEED_BASE=988577036409, 1 of 10,050 failed: a mutex
    // acquire's create got no answer, its attempt found the lock busy, and
    // the wait's next attempt won; the release did not wait out the first
    // attempt's create (a claim, not a write of its own operation), which
    // landed after it and left a lock of ours behind (OutcomeMismatch).
    // A claim handed to an acquisition now counts as a stray of the lease.
    //
    // The first release run that replayed the CLI clients' traces
    // (SIM_SEED_BASE=754887420673, 1 of 100,005 failed): the same wait's
    // first attempt left its create unsettled, and the next gave up (a
    // 429 with a `Retry-After` beyond the operation's time): the failure
    // named no write while the first attempt's create was live
    // (UnsettledWrite). A wait that ends in an error, or busy, now hands
    // on an earlier attempt's unsettled write when its last has none.
    //
    // The release run from SIM_SEED_BASE=467453455583 (1 of 100,008
    // failed): the first attempt's create was delivered 4 s late, the
    // second's was throttled (a refusal not read back) as the wait gave
    // up, and the error named only the second's session while the first's
    // lock landed (UnsettledWrite). An error or busy now hands on every
    // attempt's open write, one claim per session.
    for seed in [988577037025, 754887422482, 467453456129] {
        let r = run(random_config(seed, Protocol::Mutex, &[Cli, Cli, Operator]));
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
    // The first fresh seeds after the simulation's singleton ran
    // `Leases::run`, with its store check within the invocation's time as
    // the Lambda's and the Worker's always were (SIM_SEED_BASE=445530052814,
    // 9 of 14,070 failed, FailedWhenQuiet): runs whose time could not
    // cover waiting out another client's probe, or a crashed prober's
    // claim (33 s old), gave up saying so. Expected of a run that short
    // (one with time waits it out): the run says it had no time for the
    // store's check, as it says when it has none for its own requests.
    for seed in [445530052872, 445530053162] {
        let r = run(random_config(seed, Protocol::Cas, &[Singleton]));
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
    // The same class, from the release run at SIM_SEED_BASE=413264046884
    // (2 of 100,008 failed, FailedWhenQuiet): a run with 12 s left whose
    // own probe, its scratch object's writes throttled by the store's
    // per-object write rate, could not finish in that time gave up naming
    // only "the operation's deadline": it now says the store's capability
    // probe did not finish, as a run short of time for the check does.
    let r = run(random_config(
        413264047447,
        Protocol::Cas,
        &[Singleton, Hold, Cli, Elector],
    ));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // The two findings of the 600,000-schedule run from
    // SIM_SEED_BASE=374893873343 (docs/verification.md), closed by issue
    // "the client layer tells the truth":
    // - a mutex `lease acquire --wait` whose first attempt's create was
    //   delivered 20 s late: the next attempt acquired (its lock marked
    //   `strays`), an operator broke it, the late create landed, and the
    //   release (at the deadline, from the lease `held` found) named that
    //   record of its own as the taker (OwnRecord). A release now knows a
    //   stray of its acquisition (its holder, a lower token, an expiry no
    //   later, and the lock marked) and gives it back: Released.
    // - an epochs `lease run` whose renewal landed unreported (500, its
    //   confirming LIST throttled) when the work ended; the release found
    //   that epoch its own, the node paused past its expiry and another
    //   took the next epoch: AlreadyLost, judged against the renewal's
    //   write (AlreadyLostChanged). `AlreadyLost` speaks for the release's
    //   own writes (`Held::Finished`), and the rule now judges those.
    let r = run(random_config(
        374893899577,
        Protocol::Mutex,
        &[Cli, Cli, Operator],
    ));
    assert!(r.violations.is_empty(), "{}", r.summary());
    let r = run(random_config(
        374893898528,
        Protocol::Epochs,
        &[Hold, Hold, Hold],
    ));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // The first fresh seeds after the simulation judged a singleton's time
    // limit (a run given `Run::within` has returned when its time is up,
    // its pauses not counted, its clock's drift and, then, one request's
    // timeout allowed): SIM_SEED_BASE=948385773103, 43 of 9,600 failed
    // (OpStalled). A mutex singleton's job (its nodes ran mixed
    // protocols, a rolling deploy; node 0 the mutex) ended with 20 s of
    // its 28.5 s left; its release's DELETE reply was lost and the release waited out
    // the lock's strays for its whole `op_timeout` (the ttl): the run
    // returned after 34.4 s, where an invocation would have been killed
    // mid-release. A run's operations now end by its time: an acquisition
    // by the job's stop time, the release (and a won lease given back
    // unrun) by the run's end, cut short there as by their own deadline,
    // their unknown writes kept as claims (the renewals, after a review,
    // by the job's stop time too, and the rule's slack is now 100 ms).
    let r = run(random_config(948385773370, Protocol::Epochs, &[Singleton]));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // The first 1,000,026-schedule run with pools
    // (SIM_SEED_BASE=166931360600 SIM_SEEDS=37038): 4 failed, all a pool
    // run with a time limit whose node paused mid-round (or whose reads
    // were slow): the round ended at the job's stop time with seats
    // unread, and the run said `Skipped`, the pool "full", with a seat it
    // never read free all along (OutcomeMismatch, the full-pool rule). A
    // round cut short with seats unread now gives up, and the run says
    // `NoTime`. (Since the pool clients' even processes run as `lease run
    // --seats`, those four schedules run otherwise; 166931379935, mutex,
    // from the same base, is one that fails without the fix now.)
    for (seed, protocol) in [
        (166931372087, Protocol::Cas),
        (166931393378, Protocol::Epochs),
        (166931376597, Protocol::Mutex),
        (166931380672, Protocol::Mutex),
        (166931379935, Protocol::Mutex),
    ] {
        let r = run(random_config(seed, protocol, &POOLS));
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
    // The first 100,016-schedule run with sessions
    // (SIM_SEED_BASE=515276145948 SIM_SEEDS=3572): 1 failed, in a pool
    // world with the probe on: a probe that could not finish (a request
    // lost) made the fleet back off (the shared verdict), and a singleton
    // that read that verdict 14 s later failed at once, in a calm, by
    // design. The quiet rule now judges the probe's own failure where it
    // happened and not the fleet's documented backoff after it.
    let r = run(random_config(515276148819, Protocol::Cas, &POOLS));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // make test's run of 2026-11-30 (SIM_SEED_BASE=398940555253): a
    // session's `disown` whose release gave up with its outcome unknown
    // kept the key for another try, and `owns()` answered for it again
    // while the release had landed (StaleYes, JobWithoutLease). A key
    // being given back is never answered for again.
    let r = run(random_config(398940555524, Protocol::Cas, &SESSIONS));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // 300,005 fresh schedules on a6d3005 (SIM_SEED_BASE=850871955776
    // SIM_SEEDS=10345): 3 failed, OutcomeMismatch: a singleton read a
    // release a service had handed to another (`Leadership::hand_over`)
    // and said busy until the handoff's grace ended, as designed; the
    // busy rule did not know the grace. It does now (a checker fix).
    let r = run(random_config(
        850871962945,
        Protocol::Cas,
        &SERVICES_AND_JOBS,
    ));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // 100,021 fresh schedules on 4721082 (SIM_SEED_BASE=449706494539
    // SIM_SEEDS=3449): 3 failed, OutcomeMismatch: an `own` said busy on a
    // key whose session's term had ended for its holder, while a renewal
    // that landed late showed that term on the store again (busy is the
    // safe answer); the busy rule judged by the term's first end. It now
    // judges an owned key's busy by its session's record (a checker fix).
    let r = run(random_config(449706494758, Protocol::Cas, &SESSIONS));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // 100,021 fresh schedules on c419b2d (SIM_SEED_BASE=295780949584
    // SIM_SEEDS=3449): 1 failed, NoTakeover: an epochs elector waiting
    // fairly, its calls hung for 14 s after an acquisition's create
    // landed unanswered, settled that create with a release stamped from
    // its wall clock (16 minutes ahead of the store's), because the lost
    // replies, carrying no date, had made the wall clock its anchor: fair
    // waiting's courtesy then kept it out of its own lease for those 16
    // minutes. No reply at all now leaves the store's anchor as it is (a
    // product fix; the mutant `DatelessReplySetsClock` undoes it).
    let r = run(random_config(295780950873, Protocol::Epochs, &[Elector]));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // 100,021 fresh schedules on the first version of the fix that keeps
    // records readable (SIM_SEED_BASE=826435411008 SIM_SEEDS=3449): 15
    // failed, TickRanTwice, all in worlds of long records: the fix left
    // the oldest completed ticks out of a record that would not fit, and
    // a duplicate delivery of one ran again. Results are now kept as
    // digests first; with plain tick ids no tick is left out (a product
    // fix before it landed).
    let r = run(random_config(826435411150, Protocol::Cas, &[Singleton]));
    assert!(r.config.long_records, "a world of long records");
    assert!(r.violations.is_empty(), "{}", r.summary());
    // 17,400 fresh schedules once the long records' tick ids reached the
    // last step of fitting a record (SIM_SEED_BASE=599068282882
    // SIM_SEEDS=600): 1 failed, TickRanTwice: a duplicate of tick 10 ran
    // at t=43 s, when the record, 8,027 bytes, kept ticks 21 to 39 only.
    // That is the documented behaviour of a record too large for all its
    // ticks (the oldest left out, a duplicate of one runs again), which
    // the rule did not know: its "full" record now includes one within a
    // tick of 8 KiB (a checker fix).
    let r = run(random_config(599068283184, Protocol::Cas, &[Singleton]));
    assert!(r.config.long_records, "a world of long records");
    assert!(r.violations.is_empty(), "{}", r.summary());
    // 1,000,007 fresh schedules on c82d773 (SIM_SEED_BASE=392338226318
    // SIM_SEEDS=34483): 4 failed, TickNotRecorded, all in worlds of long
    // records: a singleton paused for 25 s between its release, which
    // recorded its tick, and its report; by then later ticks had left the
    // tick out of the full record, as documented. TickNotRecorded now
    // excuses a tick a record listed after the run's job started and a
    // full record has left out since (a checker fix).
    let r = run(random_config(392338233053, Protocol::Cas, &[Singleton]));
    assert!(r.config.long_records, "a world of long records");
    assert!(r.violations.is_empty(), "{}", r.summary());
    // The first simple clients in the simulation (`ClientKind::Simple`,
    // SIM_SEED_BASE=305636045649, 1 of 300 failed): an operator broke a
    // simple client's released record, which carried no token; the break
    // kept its token, 0, in a released record of ours, and the next
    // acquisition trusted it: token 1 after 1790000053000
    // (TokenNotIncreasing). A break of a simple client's record keeps the
    // floor a takeover would draw, and waits for it as a takeover does.
    let r = run(random_config(305636045934, Protocol::Cas, &SIMPLE));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // The first default run with them (SIM_SEED_BASE=616883774320, 1 of
    // 20,100 failed): a CLI release whose write landed with its reply lost
    // found a simple client's record, which carries no ticks, and judged
    // by them as by ours' that its write had not landed: AlreadyLost
    // (AlreadyLostChanged). Over a simple client's record it says it
    // cannot tell (`ReleaseOutcome::Unknown`).
    let r = run(random_config(616883774471, Protocol::Cas, &SIMPLE));
    assert!(r.violations.is_empty(), "{}", r.summary());
    // The 1,000,020-schedule run from SIM_SEED_BASE=682157526209 (found
    // before the fixes above were in it): cas singletons contending for a
    // key of long records on a store that allows one write a second per
    // object. Each 429 that another's write had provoked spent a retry,
    // and its write again another: three rounds spent the six, and an
    // acquisition gave up in a quiet world (FailedWhenQuiet). A 429 whose
    // read back shows another writer's newer version is a lost race now,
    // as a 412 is: it spends no retry.
    for seed in [682157553976, 682157543812] {
        let r = run(random_config(seed, Protocol::Cas, &[Singleton]));
        assert!(r.violations.is_empty(), "{}", r.summary());
    }
}

/// An epochs client reads an object at the lease key that is not its
/// marker, and refuses the key (see the scenario).
#[test]
fn an_epochs_client_refuses_another_protocols_object_at_the_key() {
    for protocol in [Protocol::Cas, Protocol::Mutex] {
        let r = scenarios::another_protocols_object_at_an_epochs_key(protocol);
        assert!(r.violations.is_empty(), "{}", r.summary());
        assert!(r.counts.jobs_started >= 1, "{}", r.summary());
    }
}

/// A renewal that landed unseen late in a long job is taken over by the
/// next tick's run (see the scenario).
#[test]
fn a_renewal_landed_unseen_late_in_a_long_job_does_not_keep_the_next_tick_out() {
    for protocol in [Protocol::Cas, Protocol::Epochs] {
        let r = scenarios::renewal_landed_unseen_late_in_a_long_job(protocol);
        assert!(r.violations.is_empty(), "{}", r.summary());
        assert!(r.counts.jobs_started >= 2, "{protocol}: {}", r.summary());
    }
}

/// Cron hosts (`lease run --every`: `Leases::supervise` with `Run::slot`):
/// three hosts of one crontab, their clocks up
/// to an hour apart, each firing when its own clock comes to a slot and
/// late by up to 60 % of it, under the fault mix. Every job ran for the
/// slot the store's clock chose (`SlotNotTheStores`) and no slot twice
/// (`TickRanTwice`); the hosts ran slots, answered slots already run, and
/// (with a late limit) refused stale ones. The random runs draw the same
/// mix on fresh seeds.
#[test]
fn cron_hosts_run_each_slot_of_the_stores_clock_once() {
    let mut totals = std::collections::BTreeMap::new();
    for seed in 0..40 {
        for protocol in [Protocol::Cas, Protocol::Epochs] {
            let cfg = ClientsConfig::random(seed, protocol, &[ClientKind::Cron; 3]);
            let r = run(cfg);
            assert!(
                r.violations.is_empty(),
                "seed {seed} {protocol}: {}",
                r.summary()
            );
            for (k, v) in r.counts.outcomes {
                *totals.entry(k).or_insert(0u64) += v;
            }
        }
    }
    eprintln!("{totals:?}");
    for what in ["acquired", "already ran", "too late"] {
        let n = totals.get(&format!("run acquire: {what}")).copied();
        assert!(n.unwrap_or(0) > 0, "no {what:?} among {totals:?}");
    }
}
