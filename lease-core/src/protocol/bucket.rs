//! What the bucket does around the protocol (`lease probe`, beside the
//! capability checks of [`crate::protocol::probe`]):
//!
//! | # | calls | what it tells |
//! |---|---|---|
//! | 1 | PUT `K.plain` with no condition | whether the bucket refuses an unconditional write to the lease prefix (a bucket policy can require `If-None-Match` / `If-Match`: `lease policy`); a misconfigured client could otherwise overwrite a lease |
//! | 2 | [`RACERS`] PUTs `K.race` `If-None-Match: *`, all sent at once | exactly one is written and the others refused: conditional creates hold under concurrency, not only one after another |
//! | 3 | DELETEs of what 1 and 2 wrote (`If-Match` on the etag written) | cleanup |
//!
//! (K is `<key>.probe/<random id>`.) Every write's reply also tells whether
//! the bucket keeps versions: a version id on it (S3's
//! `x-amz-version-id`, Azure's `x-ms-version-id`) means each renewal leaves
//! a noncurrent version behind ([`StoreReply::version_id`]).
//!
//! Each call is made once, with the lease's request timeout: a call with
//! no clear answer (a timeout, a 5xx, throttling) makes its row unclear
//! rather than failed, and a create with no answer may still land after
//! the cleanup: its key is then listed as possibly left behind. A store
//! that answers writes without version ids may still keep versions (GCS
//! always answers with a generation): `versioned` then says `false` and
//! the caller knows better. A denial of the race's creates or of the reads is
//! an error like any.

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::protocol::machine::{summarize, terminal_error, CallId, LeaseError, Machine, Output};
use crate::store::{Etag, PutCondition, ReplyKind, StoreOp, StoreReply};
use crate::time::{Mono, Now};
use core::fmt;
use std::collections::BTreeMap;

/// Creates sent at once in the race.
pub const RACERS: usize = 8;

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

/// How the concurrent creates ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Race {
    /// Creates written.
    pub winners: usize,
    /// Creates refused (412, 409).
    pub refused: usize,
    /// Creates with no clear answer.
    pub unclear: Vec<String>,
}

impl Race {
    /// Exactly one create won and every other was refused.
    pub fn passed(&self) -> bool {
        self.winners == 1 && self.refused == RACERS - 1
    }

    /// More than one create won (or none, with every answer clear): the
    /// store does not keep two contenders apart under concurrency.
    pub fn failed(&self) -> bool {
        self.winners > 1 || (self.winners == 0 && self.unclear.is_empty())
    }

    /// `pass`, `FAIL` or `unclear` (a create with no clear answer, and no
    /// second winner seen).
    pub fn verdict(&self) -> &'static str {
        if self.passed() {
            "pass"
        } else if self.failed() {
            "FAIL"
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
        writeln!(
            f,
            "{RACERS} concurrent creates of one key: {} written, {} refused{} ({})",
            r.winners,
            r.refused,
            if r.unclear.is_empty() {
                String::new()
            } else {
                format!(", {} unclear: {}", r.unclear.len(), r.unclear.join("; "))
            },
            match r.verdict() {
                "FAIL" => "FAIL: not exactly one winner",
                "unclear" => "unclear: a create got no clear answer; run the probe again",
                _ => "pass",
            }
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
    Race,
    Cleanup,
}

/// The machine (see the module docs).
#[derive(Clone, Debug)]
pub struct BucketProbe {
    cfg: LeaseConfig,
    plain_key: String,
    race_key: String,
    entropy: Entropy,
    stage: u8,
    next_id: u64,
    /// Calls under way: their purpose, key and when they time out.
    pending: BTreeMap<u64, (Purpose, String, Mono)>,
    queue: Vec<(Purpose, StoreOp)>,
    unconditional: Option<Unconditional>,
    race: Race,
    versioned: Option<bool>,
    /// What to delete at the end: key and the etag written, if known.
    written: Vec<(String, Option<Etag>)>,
    left: Vec<String>,
    failed: Option<LeaseError>,
    done: bool,
}

impl BucketProbe {
    /// The checks for the lease at `cfg.key` (scratch keys next to it).
    pub fn new(cfg: LeaseConfig, mut entropy: Entropy) -> Self {
        let base = format!("{}.probe/{}", cfg.key, entropy.id());
        BucketProbe {
            plain_key: format!("{base}.plain"),
            race_key: format!("{base}.race"),
            cfg,
            entropy,
            stage: 0,
            next_id: 1,
            pending: BTreeMap::new(),
            queue: Vec::new(),
            unconditional: None,
            race: Race::default(),
            versioned: None,
            written: Vec::new(),
            left: Vec::new(),
            failed: None,
            done: false,
        }
    }

    fn note_version(&mut self, reply: &StoreReply) {
        if matches!(reply.kind, ReplyKind::Written { .. }) {
            let has = reply.version_id.is_some();
            self.versioned = Some(self.versioned.unwrap_or(false) || has);
        }
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
            Purpose::Race => match reply.kind {
                ReplyKind::Written { etag } => {
                    self.race.winners += 1;
                    self.written.push((key, etag));
                }
                ReplyKind::PreconditionFailed | ReplyKind::Conflict => self.race.refused += 1,
                kind => {
                    if let Some(e) = terminal_error(&kind) {
                        self.failed.get_or_insert(e);
                    }
                    self.race.unclear.push(summarize(&kind));
                    if !self.written.iter().any(|(k, _)| *k == key) {
                        self.written.push((key, None));
                    }
                }
            },
            Purpose::Cleanup => match reply.kind {
                // A create with no answer may still land after this.
                ReplyKind::Deleted | ReplyKind::Missing
                    if key != self.race_key || self.race.unclear.is_empty() => {}
                _ => self.left.push(key),
            },
        }
    }

    /// The calls of the next stage, once the last one's are answered.
    fn next_stage(&mut self) {
        self.stage += 1;
        // An error (a missing bucket) ends the checks; the cleanup runs.
        if self.stage == 2 && self.failed.is_some() {
            self.stage = 3;
        }
        match self.stage {
            1 => self.queue.push((
                Purpose::Plain,
                StoreOp::Put {
                    key: self.plain_key.clone(),
                    body: b"{\"probe\":\"an unconditional write\"}".to_vec(),
                    condition: PutCondition::None,
                },
            )),
            2 => {
                for _ in 0..RACERS {
                    let body =
                        format!("{{\"probe\":\"race\",\"nonce\":\"{}\"}}", self.entropy.id());
                    self.queue.push((
                        Purpose::Race,
                        StoreOp::Put {
                            key: self.race_key.clone(),
                            body: body.into_bytes(),
                            condition: PutCondition::IfAbsent,
                        },
                    ));
                }
            }
            3 => {
                // A key written twice (a lost reply, then a win) is deleted
                // once, by the etag last known.
                let mut seen = BTreeMap::new();
                for (key, etag) in std::mem::take(&mut self.written) {
                    let e = seen.entry(key).or_insert(None);
                    if etag.is_some() {
                        *e = etag;
                    }
                }
                for (key, etag) in seen {
                    self.queue.push((
                        Purpose::Cleanup,
                        StoreOp::Delete {
                            key,
                            if_match: etag,
                        },
                    ));
                }
            }
            _ => self.done = true,
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
            self.next_stage();
        }
    }

    fn handle_reply(&mut self, _now: Now, id: CallId, reply: StoreReply) {
        if let Some((purpose, key, _)) = self.pending.remove(&id.0) {
            self.on_reply(purpose, key, reply);
        }
    }
}
