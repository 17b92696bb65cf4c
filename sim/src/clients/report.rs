//! What a run reports: the rules it broke, its counters.

use super::config::ClientsConfig;
use std::collections::BTreeMap;
use std::fmt;

/// A rule the run broke (see the module docs for each rule's meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// A job started while its session held no valid lease.
    JobWithoutLease,
    /// A job acted after its session's validity ended.
    JobPastValidity,
    /// Two jobs acted at the same time.
    JobsOverlap,
    /// A reported outcome does not match the store.
    OutcomeMismatch,
    /// A client lost to, or was kept out by, its own record.
    OwnRecord,
    /// An operation reported failure while its write was applied and live.
    UnsettledWrite,
    /// A write of a released session landed after the release and made a
    /// record of that session live again.
    LateWrite,
    /// A release reported `Released` after another session took over.
    ReleasedAfterTakeover,
    /// A release reported `AlreadyLost` but its write changed the store.
    AlreadyLostChanged,
    /// An acquisition's token was not greater than an earlier one's.
    TokenNotIncreasing,
    /// The protected object's token went down.
    FenceTokenDecreased,
    /// An operation did not report within its bound (a run given a time
    /// limit: had not returned when its time was up).
    OpStalled,
    /// Nobody held the lease through a quiet window.
    NoTakeover,
    /// An acquire failed though nothing went wrong in or before it: no
    /// store or node fault from a settling time before it to its end.
    FailedWhenQuiet,
    /// A job for a tick started while the store's record said that tick
    /// had completed (and the record was not full: the oldest ticks leave
    /// it): a duplicate delivery ran it again.
    TickRanTwice,
    /// A write left at a lease's key a record no client reads (over
    /// 8 KiB, a string too long): the key is busy to everyone until an
    /// operator breaks it.
    RecordUnreadable,
    /// A run reported that its release recorded the tick it ran, and the
    /// store's record then did not have it.
    TickNotRecorded,
    /// A cron host's job ran for a slot that did not contain, by the
    /// store's clock, any instant from its process's start to the job's
    /// start (the slot was not the store's), or that its run began later
    /// into than `cron_late` allows.
    SlotNotTheStores,
    /// A CLI client's flight-recorder trace (`lease_core::trace`, feature
    /// `trace`) did not replay to the outputs it recorded: the machines
    /// took an input the recorder does not keep.
    TraceDiverged,
    /// A CLI client's trace broke a rule of `lease replay` (tokens, a
    /// deadline past the store's expiry as the trace's dates show it).
    TraceRuleBroken,
    /// A `Leadership` handle said it leads (`is_leader()`, `token()` or a
    /// leading `health()`) while the store's record was not its live lease
    /// with that token, or after its `resign()` was called.
    StaleYes,
    /// A `Leadership` handle's `health()` said a leader is healthy while no
    /// write of its term sent within the overdue bound (the renew interval
    /// and a request timeout, on its clock) had landed.
    HealthyWhenOverdue,
    /// A shard fleet quiet for the stated bound (no fault, no member
    /// joining, leaving, ending or paused: `check_shards`) had a shard no
    /// live member owned on the store.
    ShardUnowned,
    /// A shard fleet quiet for the stated bound had two live members whose
    /// numbers of owned shards differed by more than one.
    ShardsUnbalanced,
}

/// One broken rule, with when and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which rule.
    pub rule: Rule,
    /// Real time (ms).
    pub at_ms: u64,
    /// The node concerned, if one.
    pub node: Option<usize>,
    /// What happened, for humans.
    pub text: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:?}] t={}ms", self.rule, self.at_ms)?;
        if let Some(n) = self.node {
            write!(f, " node {n}")?;
        }
        write!(f, ": {}", self.text)
    }
}

/// Counters of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Store requests sent.
    pub store_calls: u64,
    /// Processes started.
    pub processes: u64,
    /// Acquisitions reported.
    pub acquisitions: u64,
    /// Jobs started.
    pub jobs_started: u64,
    /// Jobs that ran to completion.
    pub jobs_finished: u64,
    /// Jobs dropped (lost lease, crash, end of run).
    pub jobs_dropped: u64,
    /// Runs reported as overrunning the deadline (an error naming it).
    pub overruns_reported: u64,
    /// Conditional re-reads answered 304 (the lease unchanged).
    pub not_modified: u64,
    /// Flight-recorder traces of CLI clients replayed (feature `trace`).
    pub traces_replayed: u64,
    /// Outcomes reported, by kind.
    pub outcomes: BTreeMap<String, u64>,
    /// Faults that took effect, by kind.
    pub faults: BTreeMap<String, u64>,
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The configuration (replay it with [`run`](super::run)).
    pub config: ClientsConfig,
    /// Broken rules.
    pub violations: Vec<Violation>,
    /// Broken rules outside the documented assumptions (not failures).
    pub excused: Vec<Violation>,
    /// Counters.
    pub counts: Counts,
    /// The timeline, when asked for.
    pub timeline: Vec<String>,
}

impl Report {
    /// Whether any violation has this rule.
    pub fn has(&self, rule: Rule) -> bool {
        self.violations.iter().any(|v| v.rule == rule)
    }

    /// Counts, violations, and the config to replay, for a failure message.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "seed {} ({} nodes {:?}, {:?}, variant {:?}, broken {:?}): {} violations, {} excused\n",
            self.config.seed,
            self.config.clients.len(),
            self.config.clients,
            self.config.protocols,
            self.config.variant,
            self.config.broken,
            self.violations.len(),
            self.excused.len()
        );
        for v in &self.violations {
            s += &format!("  {v}\n");
        }
        for v in &self.excused {
            s += &format!("  excused: {v}\n");
        }
        s += &format!("  counts: {:?}\n", self.counts);
        s += &format!("  replay: lease_sim::clients::run({:?})\n", self.config);
        s
    }
}
