//! What the lab gathers about its shard fleet and what the checker finds
//! in it: the data [`check`](super::check) and
//! [`shard_check`](super::shard_check) share (the rules are
//! `shard_check`'s; `check` holds these in its facts and verdict).

use lease_core::client::member_key;
use std::collections::BTreeMap;

/// What the lab gathered about its shard fleet.
#[derive(Clone, Debug, Default)]
pub struct FleetFacts {
    /// The fleet's prefix.
    pub prefix: String,
    /// The shards it splits.
    pub shards: u32,
    /// The members' slots (member `m<slot>`).
    pub members: Vec<usize>,
    /// The bound of rule 3 (ms).
    pub bound_ms: u64,
    /// Each shard's protected object at the end.
    pub objects: Vec<Option<Vec<u8>>>,
    /// The store's fleet objects at the end of each calm.
    pub snapshots: Vec<Snapshot>,
}

impl FleetFacts {
    /// The holder name of the member in `slot`.
    pub fn holder(slot: usize) -> String {
        format!("m{slot}")
    }

    /// The session key of the member in `slot`.
    pub fn member_key(&self, slot: usize) -> String {
        member_key(&self.prefix, &Self::holder(slot))
    }
}

/// The fleet's objects as the store held them at one instant.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// When the reads began (Unix ms).
    pub at_ms: u64,
    /// `<prefix>/assignment`.
    pub assignment: Option<Vec<u8>>,
    /// `<prefix>/shards/<i>`, by shard.
    pub shards: Vec<Option<Vec<u8>>>,
    /// Each member slot's session record.
    pub members: BTreeMap<usize, Option<Vec<u8>>>,
}

/// The fleet's verdict and figures.
#[derive(Clone, Debug, Default)]
pub struct FleetJudgement {
    /// What broke a rule (moved into the run's violations).
    pub violations: Vec<String>,
    /// Spans of work on a shard (holdings).
    pub holdings: usize,
    /// Holdings after a shard's first: moves.
    pub moves: usize,
    /// Records in the shards' protected objects.
    pub records: usize,
    /// Records the fence refused.
    pub fenced: usize,
    /// Appends dropped under way at the drain's bound.
    pub abandoned: usize,
    /// Overlaps excused (the older holder frozen, and nothing of it
    /// recorded after the newer began).
    pub excused_overlaps: usize,
    /// Calms judged by rule 3, and those too short for the bound.
    pub calms: (usize, usize),
    /// The longest a judged calm took, from its last disruption, to the
    /// last change of work that left every shard covered and balanced.
    pub max_settle_ms: u64,
}
