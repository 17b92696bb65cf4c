//! The bucket's races: documented in the layer's docs (`protocol/mod.rs`, "The bucket's races").

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::protocol::machine::{terminal_error, CallId, Machine, Output};
use crate::protocol::outcome::summarize;
use crate::protocol::outcome::LeaseError;
use crate::store::{Etag, PutCondition, ReplyKind, StoreOp, StoreReply};
use crate::time::{Mono, Now};
use core::fmt;
use std::collections::BTreeMap;

/// Writes sent at once in each race, by default.
pub const BUCKET_RACERS: usize = 8;

/// Rounds of races (a create race and a replace race each), by default.
pub const BUCKET_ROUNDS: u32 = 3;

/// What the bucket did with an unconditional write to the lease prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unconditional {
    /// Refused (a bucket policy that requires conditional writes).
    Refused {
        /// The store's error code.
        code: Option<String>,
    },
    /// Written: any client with write access can overwrite a lease.
    Accepted,
    /// No clear answer.
    Unclear(String),
}

/// Which conditional write a race is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RaceKind {
    /// `If-None-Match: *` on a new key.
    Create,
    /// `If-Match` on the version the create race wrote.
    Replace,
}

impl RaceKind {
    /// `create` or `replace`.
    pub fn name(self) -> &'static str {
        match self {
            RaceKind::Create => "create",
            RaceKind::Replace => "replace",
        }
    }
}

/// How one race ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceRound {
    /// The round (from 1).
    pub round: u32,
    /// Creates or replaces.
    pub kind: RaceKind,
    /// The racers (numbered from 1) whose write was written.
    pub winners: Vec<usize>,
    /// Writes refused (412, 409).
    pub refused: usize,
    /// Writes the store throttled (429, 503 SlowDown): not applied. A store
    /// that allows one write per second per object (GCS, R2) throttles
    /// most racers; they prove nothing either way.
    pub throttled: usize,
    /// Writes with no clear answer (no reply, 5xx: they may have applied).
    pub unclear: Vec<String>,
}

impl RaceRound {
    /// Exactly one writer won, at least one was refused, and every other
    /// was refused or throttled.
    pub fn passed(&self) -> bool {
        self.winners.len() == 1 && self.unclear.is_empty() && self.refused > 0
    }

    /// One writer won and every other was throttled: no racer met the
    /// condition, so the race proves nothing either way (a store that
    /// allows one write per object per second answers a burst so).
    pub fn throttled_only(&self) -> bool {
        self.winners.len() == 1 && self.unclear.is_empty() && self.refused == 0
    }

    /// More than one writer won, or none did with every answer clear and
    /// some refused (a refusal on a fresh key means a write did land): the
    /// store does not keep two contenders apart under concurrency.
    pub fn failed(&self) -> bool {
        self.winners.len() > 1
            || (self.winners.is_empty()
                && self.unclear.is_empty()
                && (self.refused > 0 || self.throttled == 0))
    }
}

impl fmt::Display for RaceRound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let winners: Vec<String> = self.winners.iter().map(|w| format!("#{w}")).collect();
        write!(
            f,
            "round {} {}s: {} written{}, {} refused",
            self.round,
            self.kind.name(),
            self.winners.len(),
            if winners.is_empty() {
                String::new()
            } else {
                format!(" (racer {})", winners.join(", "))
            },
            self.refused
        )?;
        if self.throttled > 0 {
            write!(f, ", {} throttled", self.throttled)?;
        }
        if !self.unclear.is_empty() {
            write!(
                f,
                ", {} unclear: {}",
                self.unclear.len(),
                self.unclear.join("; ")
            )?;
        }
        Ok(())
    }
}

/// How the concurrent writes ended, round by round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Race {
    /// Writes sent at once in each race.
    pub racers: usize,
    /// The rounds asked for.
    pub rounds: u32,
    /// Every race run, in order (a replace race is skipped when its
    /// round's create race had no single winner with an etag).
    pub races: Vec<RaceRound>,
}

impl Race {
    /// Every round ran and every race had exactly one winner and a
    /// refusal.
    pub fn passed(&self) -> bool {
        self.all_ran() && self.races.iter().all(RaceRound::passed)
    }

    /// Every round ran, every race had one winner, and in some the others
    /// were all throttled: nothing was shown either way there.
    pub fn throttled(&self) -> bool {
        self.all_ran()
            && !self.passed()
            && self.races.iter().all(|r| r.passed() || r.throttled_only())
    }

    fn all_ran(&self) -> bool {
        self.races
            .iter()
            .filter(|r| r.kind == RaceKind::Create)
            .count()
            == self.rounds as usize
    }

    /// Some race had two winners (or none, every answer clear): the store
    /// does not keep two contenders apart under concurrency.
    pub fn failed(&self) -> bool {
        self.races.iter().any(RaceRound::failed)
    }

    /// The first race that failed.
    pub fn first_failure(&self) -> Option<&RaceRound> {
        self.races.iter().find(|r| r.failed())
    }

    /// `pass`, `FAIL`, `throttled` ([`Race::throttled`]) or `unclear` (a
    /// write with no clear answer, and no second winner seen).
    pub fn verdict(&self) -> &'static str {
        if self.passed() {
            "pass"
        } else if self.failed() {
            "FAIL"
        } else if self.throttled() {
            "throttled"
        } else {
            "unclear"
        }
    }
}

/// What [`BucketProbe`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketReport {
    /// The unconditional write (row 1).
    pub unconditional: Unconditional,
    /// The concurrent creates (row 2).
    pub race: Race,
    /// Whether writes came back with a version id: `Some(true)` a
    /// versioned bucket, `Some(false)` not, `None` no write was answered.
    pub versioned: Option<bool>,
    /// Scratch keys the cleanup could not delete, or that a create with no
    /// answer may still write after it.
    pub left: Vec<String>,
}

impl fmt::Display for BucketReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plain = match &self.unconditional {
            Unconditional::Refused { code } => format!(
                "refused ({}): writes to the prefix must be conditional",
                code.as_deref().unwrap_or("no code")
            ),
            Unconditional::Accepted => {
                "accepted: a client that ignores the protocol can overwrite a lease (see `lease policy`)"
                    .into()
            }
            Unconditional::Unclear(why) => format!("unclear: {why}"),
        };
        writeln!(f, "unconditional write to the prefix: {plain}")?;
        let r = &self.race;
        let verdict = match (r.verdict(), r.first_failure()) {
            ("FAIL", Some(race)) => format!("FAIL: not exactly one winner in {race}"),
            ("unclear", _) => {
                let unclear: Vec<String> = r
                    .races
                    .iter()
                    .filter(|x| !x.unclear.is_empty())
                    .map(ToString::to_string)
                    .collect();
                format!(
                    "unclear: a write got no clear answer ({}); run the probe again",
                    unclear.join("; ")
                )
            }
            ("throttled", _) => {
                let throttled: usize = r.races.iter().map(|x| x.throttled).sum();
                format!(
                    "throttled: one winner in every race, but in some every other racer was throttled ({throttled} writes in all): the store spaces writes to an object, and those races prove nothing either way"
                )
            }
            _ => {
                let throttled: usize = r.races.iter().map(|x| x.throttled).sum();
                if throttled == 0 {
                    "pass: one winner in every race".into()
                } else {
                    format!(
                        "pass: one winner in every race ({throttled} writes throttled, which prove nothing either way)"
                    )
                }
            }
        };
        writeln!(
            f,
            "{} concurrent creates, then {} concurrent replaces, of one key, {} round(s): {verdict}",
            r.racers, r.racers, r.rounds
        )?;
        let versions = match self.versioned {
            Some(true) => "yes: every renewal leaves a noncurrent version (docs/operations.md: a lifecycle rule for the lease prefix)",
            Some(false) => "no",
            None => "unknown",
        };
        write!(f, "bucket keeps versions: {versions}")?;
        if !self.left.is_empty() {
            write!(f, "\nscratch objects left: {}", self.left.join(", "))?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    Plain,
    /// A racer's write: its round (from 1), kind and number (from 1).
    Race(u32, RaceKind, usize),
    /// A DELETE of a scratch key: `If-Match` on the etag written (`true`),
    /// or with no condition.
    Cleanup(bool),
}

/// What the machine does: the stages, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Plain,
    Race(u32, RaceKind),
    Cleanup,
    Done,
}

/// The machine (see the module docs).
#[derive(Clone, Debug)]
pub struct BucketProbe {
    cfg: LeaseConfig,
    plain_key: String,
    /// The race keys are this and the round's number.
    race_base: String,
    entropy: Entropy,
    stage: Stage,
    next_id: u64,
    /// Calls under way: their purpose, key and when they time out.
    pending: BTreeMap<u64, (Purpose, String, Mono)>,
    queue: Vec<(Purpose, StoreOp)>,
    unconditional: Option<Unconditional>,
    race: Race,
    /// The etag the current round's create race was won with.
    won: Option<Etag>,
    /// The next stage starts then (the store's write spacing).
    next_at: Option<Mono>,
    versioned: Option<bool>,
    /// What to delete at the end: key and the etag written, if known.
    written: Vec<(String, Option<Etag>)>,
    left: Vec<String>,
    failed: Option<LeaseError>,
    done: bool,
}

impl BucketProbe {
    /// The checks for the lease at `cfg.key` (scratch keys next to it),
    /// with [`BUCKET_ROUNDS`] rounds of [`BUCKET_RACERS`] racers.
    pub fn new(cfg: LeaseConfig, mut entropy: Entropy) -> Self {
        let base = format!("{}.probe/{}", cfg.key, entropy.id());
        BucketProbe {
            plain_key: format!("{base}.plain"),
            race_base: format!("{base}.race"),
            cfg,
            entropy,
            stage: Stage::Start,
            next_id: 1,
            pending: BTreeMap::new(),
            queue: Vec::new(),
            unconditional: None,
            race: Race {
                racers: BUCKET_RACERS,
                rounds: BUCKET_ROUNDS,
                races: Vec::new(),
            },
            won: None,
            next_at: None,
            versioned: None,
            written: Vec::new(),
            left: Vec::new(),
            failed: None,
            done: false,
        }
    }

    /// With `racers` writes sent at once in each race (at least 2) and
    /// `rounds` rounds (at least 1).
    pub fn with_race(mut self, racers: usize, rounds: u32) -> Self {
        self.race.racers = racers.max(2);
        self.race.rounds = rounds.max(1);
        self
    }

    fn race_key(&self, round: u32) -> String {
        format!("{}{round}", self.race_base)
    }

    fn note_version(&mut self, reply: &StoreReply) {
        if matches!(reply.kind, ReplyKind::Written { .. }) {
            let has = reply.version_id.is_some();
            self.versioned = Some(self.versioned.unwrap_or(false) || has);
        }
    }

    /// The race of `round` and `kind`, as recorded so far.
    fn race_of(&mut self, round: u32, kind: RaceKind) -> &mut RaceRound {
        let at = match self
            .race
            .races
            .iter()
            .position(|r| r.round == round && r.kind == kind)
        {
            Some(at) => at,
            None => {
                self.race.races.push(RaceRound {
                    round,
                    kind,
                    winners: Vec::new(),
                    refused: 0,
                    throttled: 0,
                    unclear: Vec::new(),
                });
                self.race.races.len() - 1
            }
        };
        &mut self.race.races[at]
    }

    fn on_reply(&mut self, purpose: Purpose, key: String, reply: StoreReply) {
        self.note_version(&reply);
        match purpose {
            Purpose::Plain => {
                self.unconditional = Some(match reply.kind {
                    ReplyKind::Written { etag } => {
                        self.written.push((key, etag));
                        Unconditional::Accepted
                    }
                    ReplyKind::Denied { code, .. } => Unconditional::Refused { code },
                    // 412 to a write with no condition: a policy of the
                    // store's own that refuses it.
                    ReplyKind::PreconditionFailed => Unconditional::Refused {
                        code: Some("PreconditionFailed".into()),
                    },
                    kind => {
                        if let Some(e) = terminal_error(&kind) {
                            self.failed.get_or_insert(e);
                        }
                        // It may have been written.
                        self.written.push((key, None));
                        Unconditional::Unclear(summarize(&kind))
                    }
                });
            }
            Purpose::Race(round, kind, racer) => match reply.kind {
                ReplyKind::Written { etag } => {
                    self.race_of(round, kind).winners.push(racer);
                    if kind == RaceKind::Create {
                        self.won = etag.clone();
                    }
                    self.written.push((key, etag));
                }
                ReplyKind::PreconditionFailed | ReplyKind::Conflict => {
                    self.race_of(round, kind).refused += 1
                }
                ReplyKind::Throttled { .. } => self.race_of(round, kind).throttled += 1,
                other => {
                    if let Some(e) = terminal_error(&other) {
                        self.failed.get_or_insert(e);
                    }
                    self.race_of(round, kind).unclear.push(summarize(&other));
                    if !self.written.iter().any(|(k, _)| *k == key) {
                        self.written.push((key, None));
                    }
                }
            },
            // A store with no conditional DELETE (the R2 binding) answers
            // it 501: the scratch key is ours alone, so it is deleted with
            // no condition.
            Purpose::Cleanup(true) if matches!(reply.kind, ReplyKind::Unsupported { .. }) => {
                self.queue.push((
                    Purpose::Cleanup(false),
                    StoreOp::Delete {
                        key,
                        if_match: None,
                    },
                ));
            }
            Purpose::Cleanup(_) => {
                // A write with no answer may still land after this.
                let unclear = self
                    .race
                    .races
                    .iter()
                    .any(|r| !r.unclear.is_empty() && key == self.race_key(r.round));
                match reply.kind {
                    ReplyKind::Deleted | ReplyKind::Missing if !unclear => {}
                    _ => self.left.push(key),
                }
            }
        }
    }

    /// The race of `round` and `kind`: `racers` writes queued at once.
    fn queue_race(&mut self, round: u32, kind: RaceKind) {
        let key = self.race_key(round);
        let condition = match (kind, &self.won) {
            (RaceKind::Create, _) => PutCondition::IfAbsent,
            (RaceKind::Replace, Some(etag)) => PutCondition::IfMatch(etag.clone()),
            (RaceKind::Replace, None) => return,
        };
        // Popped from the end: queued last first, so racer 1 goes first.
        for racer in (1..=self.race.racers).rev() {
            let body = format!(
                "{{\"probe\":\"{} race\",\"round\":{round},\"racer\":{racer},\"nonce\":\"{}\"}}",
                kind.name(),
                self.entropy.id()
            );
            self.queue.push((
                Purpose::Race(round, kind, racer),
                StoreOp::Put {
                    key: key.clone(),
                    body: body.into_bytes(),
                    condition: condition.clone(),
                },
            ));
        }
    }

    /// The stage after `stage`.
    fn after(&self, stage: Stage) -> Stage {
        match stage {
            Stage::Start => Stage::Plain,
            // An error (a missing bucket) ends the checks; the cleanup runs.
            _ if self.failed.is_some() => match stage {
                Stage::Cleanup | Stage::Done => Stage::Done,
                _ => Stage::Cleanup,
            },
            Stage::Plain => Stage::Race(1, RaceKind::Create),
            Stage::Race(r, RaceKind::Create) => Stage::Race(r, RaceKind::Replace),
            Stage::Race(r, RaceKind::Replace) if r < self.race.rounds => {
                Stage::Race(r + 1, RaceKind::Create)
            }
            Stage::Race(..) => Stage::Cleanup,
            Stage::Cleanup | Stage::Done => Stage::Done,
        }
    }

    /// The calls of the next stage, once the last one's are answered.
    fn next_stage(&mut self) {
        self.stage = self.after(self.stage);
        match self.stage {
            Stage::Start => {}
            Stage::Plain => self.queue.push((
                Purpose::Plain,
                StoreOp::Put {
                    key: self.plain_key.clone(),
                    body: b"{\"probe\":\"an unconditional write\"}".to_vec(),
                    condition: PutCondition::None,
                },
            )),
            Stage::Race(round, kind) => {
                if kind == RaceKind::Create {
                    self.won = None;
                } else {
                    // A replace race needs one create winner, with its etag.
                    let single = self.race.races.iter().any(|r| {
                        r.round == round
                            && r.kind == RaceKind::Create
                            && (r.passed() || r.throttled_only())
                    });
                    if !single {
                        self.won = None;
                    }
                }
                self.queue_race(round, kind);
            }
            Stage::Cleanup => {
                // A key written more than once is deleted once, by the etag
                // last known.
                let mut seen = BTreeMap::new();
                for (key, etag) in std::mem::take(&mut self.written) {
                    let e = seen.entry(key).or_insert(None);
                    if etag.is_some() {
                        *e = etag;
                    }
                }
                for (key, etag) in seen {
                    self.queue.push((
                        Purpose::Cleanup(etag.is_some()),
                        StoreOp::Delete {
                            key,
                            if_match: etag,
                        },
                    ));
                }
            }
            Stage::Done => self.done = true,
        }
    }
}

impl Machine for BucketProbe {
    type Outcome = Result<BucketReport, LeaseError>;

    fn poll(&mut self, now: Now) -> Output<Self::Outcome> {
        loop {
            if self.done {
                if let Some(e) = self.failed.take() {
                    return Output::Done(Err(e));
                }
                return match self.unconditional.take() {
                    Some(unconditional) => Output::Done(Ok(BucketReport {
                        unconditional,
                        race: std::mem::take(&mut self.race),
                        versioned: self.versioned,
                        left: std::mem::take(&mut self.left),
                    })),
                    None => Output::Wait(Mono(u64::MAX)),
                };
            }
            if let Some((purpose, op)) = self.queue.pop() {
                let id = self.next_id;
                self.next_id += 1;
                self.pending.insert(
                    id,
                    (
                        purpose,
                        op.key().to_string(),
                        now.mono + self.cfg.request_timeout,
                    ),
                );
                return Output::Call(CallId(id), op);
            }
            let expired: Vec<u64> = self
                .pending
                .iter()
                .filter(|(_, (_, _, at))| now.mono >= *at)
                .map(|(id, _)| *id)
                .collect();
            for id in expired {
                if let Some((purpose, key, _)) = self.pending.remove(&id) {
                    let reply = StoreReply::transport(
                        crate::store::TransportErrorKind::Timeout,
                        "no reply within the request timeout",
                    );
                    self.on_reply(purpose, key, reply);
                }
            }
            if let Some(at) = self.pending.values().map(|(_, _, at)| *at).min() {
                return Output::Wait(at);
            }
            // A store that allows one write per object per interval (GCS,
            // R2: `min_write_interval`) gets it between stages, which
            // write the same keys again.
            let spacing = self.cfg.min_write_interval;
            if !spacing.is_zero() && self.stage != Stage::Start {
                let at = *self.next_at.get_or_insert(now.mono + spacing);
                if now.mono < at {
                    return Output::Wait(at);
                }
                self.next_at = None;
            }
            self.next_stage();
        }
    }

    fn handle_reply(&mut self, _now: Now, id: CallId, reply: StoreReply) {
        if let Some((purpose, key, _)) = self.pending.remove(&id.0) {
            self.on_reply(purpose, key, reply);
        }
    }
}
