//! The capability probe: documented in the layer's docs (`protocol/mod.rs`, "The capability probe").

use crate::config::{LeaseConfig, Protocol};
use crate::entropy::Entropy;
use crate::protocol::calls::{self, op_deadline, Calls, Next, OneAtATime};
use crate::protocol::lease::LeaseOp;
use crate::protocol::machine::{CallId, Machine, Output};
use crate::protocol::outcome::summarize;
use crate::protocol::outcome::LeaseError;
use crate::store::{Etag, PutCondition, ReplyKind, StoreOp, StoreReply};
use crate::time::{Mono, Now};
use core::fmt;

/// One capability the probe checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Check {
    /// `If-None-Match: *` on a new key writes it.
    CreateIfAbsent,
    /// A second `If-None-Match: *` on the same key is refused.
    SecondCreateRefused,
    /// PUT answers with an etag (otherwise every write costs a read).
    PutReturnsEtag,
    /// Replies carry a `Date` header (otherwise the local clock is used).
    DateHeader,
    /// `If-Match` with the current etag writes.
    IfMatchCurrent,
    /// `If-Match` with a stale etag is refused.
    IfMatchStale,
    /// `If-Match` on a missing key is refused.
    IfMatchMissing,
    /// ... and does not create the key.
    IfMatchMissingNotCreated,
    /// A listing sent right after a create's reply arrived lists the new
    /// key (read-after-write listings).
    ListAfterWrite,
    /// A listing of two keys asked for one key per page is read whole by
    /// following its continuation token.
    ListPages,
    /// `DELETE If-Match` with a stale etag is refused.
    DeleteIfMatchStale,
    /// `DELETE If-Match` with the current etag deletes.
    DeleteIfMatchCurrent,
}

impl Check {
    /// Every check, in the order the probe runs them.
    pub const ALL: [Check; 12] = [
        Check::CreateIfAbsent,
        Check::SecondCreateRefused,
        Check::PutReturnsEtag,
        Check::DateHeader,
        Check::IfMatchCurrent,
        Check::IfMatchStale,
        Check::IfMatchMissing,
        Check::IfMatchMissingNotCreated,
        Check::ListAfterWrite,
        Check::ListPages,
        Check::DeleteIfMatchStale,
        Check::DeleteIfMatchCurrent,
    ];

    /// The check's name in reports and errors.
    pub fn name(self) -> &'static str {
        match self {
            Check::CreateIfAbsent => "create_if_absent",
            Check::SecondCreateRefused => "second_create_refused",
            Check::PutReturnsEtag => "put_returns_etag",
            Check::DateHeader => "date_header",
            Check::IfMatchCurrent => "if_match_current",
            Check::IfMatchStale => "if_match_stale_refused",
            Check::IfMatchMissing => "if_match_missing_refused",
            Check::IfMatchMissingNotCreated => "if_match_missing_not_created",
            Check::ListAfterWrite => "list_after_write",
            Check::ListPages => "list_pages",
            Check::DeleteIfMatchStale => "delete_if_match_stale_refused",
            Check::DeleteIfMatchCurrent => "delete_if_match_current",
        }
    }

    /// The protocols that are unsafe (or cannot work) without it.
    pub fn needed_by(self) -> &'static [Protocol] {
        use Protocol::*;
        match self {
            Check::CreateIfAbsent | Check::SecondCreateRefused => &[Cas, Epochs, Mutex],
            Check::IfMatchCurrent
            | Check::IfMatchStale
            | Check::IfMatchMissing
            | Check::IfMatchMissingNotCreated => &[Cas],
            // Epochs finds the newest epoch and confirms its own creates by
            // listing. Cas and mutex hold a lease without listing (their
            // one-protocol check reads the key), but the fleet view
            // (`Leases::list`, `lease ls`) lists for them too.
            Check::ListAfterWrite | Check::ListPages => &[Cas, Epochs, Mutex],
            Check::DeleteIfMatchStale | Check::DeleteIfMatchCurrent => &[Mutex],
            Check::PutReturnsEtag | Check::DateHeader => &[],
        }
    }
}

/// The result of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    /// Which check.
    pub check: Check,
    /// Whether the store behaved as the protocols need.
    pub passed: bool,
    /// What the store answered.
    pub detail: String,
    /// Failed for want of an answer (the store kept failing or throttling,
    /// the time ran out, an earlier step failed), not by what the store
    /// did with a condition: it refuses this client, but the verdict the
    /// fleet shares does not keep it ([`protocol::verdict`](crate::protocol#the-shared-verdict)).
    pub inconclusive: bool,
}

/// What the probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeReport {
    /// The scratch key used.
    pub key: String,
    /// One row per [`Check`], in [`Check::ALL`] order.
    pub results: Vec<CheckResult>,
    /// Scratch keys whose DELETE was not confirmed (no reply, an error):
    /// they may remain in the bucket, to be deleted by hand. Usually empty.
    pub left_behind: Vec<String>,
}

impl ProbeReport {
    /// The result of `check`.
    pub fn result(&self, check: Check) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.check == check)
    }

    /// Whether `check` passed.
    pub fn passed(&self, check: Check) -> bool {
        self.result(check).is_some_and(|r| r.passed)
    }

    /// The report as JSON: each check (passed, detail, the protocols that
    /// need it) and, per protocol, whether this store can carry it safely.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let checks: Vec<serde_json::Value> = self
            .results
            .iter()
            .map(|r| {
                json!({"check": r.check.name(), "passed": r.passed, "detail": r.detail,
                       "needed_by": r.check.needed_by().iter().map(|p| p.name()).collect::<Vec<_>>()})
            })
            .collect();
        // Inserted one by one: collecting a map sorts its entries first,
        // which links a sort for this one type.
        let mut protocols = serde_json::Map::new();
        for p in Protocol::ALL {
            let verdict = match self.supports(p) {
                Ok(()) => json!({"safe": true}),
                Err(e) => json!({"safe": false, "error": e.to_string()}),
            };
            protocols.insert(p.name().to_string(), verdict);
        }
        json!({"scratch_key": self.key, "checks": checks, "protocols": protocols})
    }

    /// Ok when every check `protocol` needs passed; otherwise
    /// [`LeaseError::UnsafeStore`] naming the first that failed.
    pub fn supports(&self, protocol: Protocol) -> Result<(), LeaseError> {
        for check in Check::ALL {
            if !check.needed_by().contains(&protocol) {
                continue;
            }
            match self.result(check) {
                Some(r) if r.passed => {}
                Some(r) => {
                    return Err(LeaseError::UnsafeStore {
                        protocol,
                        check: check.name(),
                        detail: r.detail.clone(),
                        unsettled: Box::default(),
                    })
                }
                None => {
                    return Err(LeaseError::UnsafeStore {
                        protocol,
                        check: check.name(),
                        detail: "not checked".into(),
                        unsettled: Box::default(),
                    })
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for ProbeReport {
    /// A plain-text table: check, result, protocols that need it, detail.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<30} {:<6} {:<18} detail",
            "check", "result", "needed by"
        )?;
        for r in &self.results {
            let needed: Vec<&str> = r.check.needed_by().iter().map(|p| p.name()).collect();
            let needed = if needed.is_empty() {
                "-".to_string()
            } else {
                needed.join(",")
            };
            let result = if r.passed { "ok" } else { "FAIL" };
            writeln!(
                f,
                "{:<30} {:<6} {:<18} {}",
                r.check.name(),
                result,
                needed,
                r.detail
            )?;
        }
        for p in Protocol::ALL {
            match self.supports(p) {
                Ok(()) => writeln!(f, "protocol {p}: safe on this store")?,
                Err(e) => writeln!(f, "protocol {p}: REFUSED ({e})")?,
            }
        }
        for key in &self.left_behind {
            writeln!(f, "scratch object not confirmed deleted: {key}")?;
        }
        Ok(())
    }
}

/// The probe's calls (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    CreateFirst,
    LearnEtag,
    CreateSecond,
    IfMatchCurrent,
    IfMatchStale,
    IfMatchMissing,
    GetMissing,
    /// Creates the second scratch key the listing checks look for.
    CreateListed,
    /// One page of the listing made right after `CreateListed`.
    ListPage,
    DeleteStale,
    DeleteCurrent,
    /// A read after `IfMatchCurrent` was refused on a retry: did an earlier
    /// attempt, whose reply was lost, write?
    VerifyIfMatch,
    /// A read after `DeleteCurrent` was refused on a retry: did an earlier
    /// attempt delete?
    VerifyDelete,
    CleanupScratch,
    CleanupListed,
    CleanupMissing,
    Done,
}

/// Most pages the probe's listing of its two (or three) scratch keys may
/// take: one key per page, and a last page that may come back empty.
pub const MAX_LIST_PAGES: u32 = 4;

/// What the probe's listing has shown so far.
#[derive(Clone, Debug, Default)]
struct ListState {
    pages: u32,
    most_on_a_page: usize,
    /// Continuation tokens received, in order (the last is the next page's).
    tokens: Vec<String>,
    saw_scratch: bool,
    saw_listed: bool,
}

/// A made-up etag that matches no version. Digits only and within an
/// int64, so it also reads as a GCS generation, and never `0` (which GCS
/// takes as "only if absent": a probe of `If-Match` on a missing key would
/// then create it).
const NO_SUCH_ETAG: &str = "1000000000000000001";

/// A reply to one of the probe's steps, as the step judges it.
struct Answer {
    kind: ReplyKind,
    /// The reply in words, for the report.
    said: String,
    /// Refused with 412 (or a 409 the dialect maps to it).
    refused: bool,
    /// An earlier attempt of this step had an unknown outcome.
    ambiguous: bool,
    /// Written (with the etag the reply named, if any).
    written: Option<Option<Etag>>,
}

/// The capability probe machine (see the module docs).
#[derive(Clone, Debug)]
pub struct Probe {
    cfg: LeaseConfig,
    entropy: Entropy,
    key: String,
    listed_key: String,
    missing_key: String,
    step: Step,
    calls: Calls,
    results: Vec<CheckResult>,
    first_etag: Option<Etag>,
    current_etag: Option<Etag>,
    dates: (u32, u32),
    scratch_exists: bool,
    listed_exists: bool,
    missing_created: bool,
    /// The listing under way: pages read, the most entries on one page,
    /// the tokens handed out, whether K and L were seen.
    list: ListState,
    /// The current step's write had an attempt whose outcome is unknown
    /// (no reply, or 5xx): a refusal on a retry may be that attempt's own
    /// doing, and is checked by a read before it counts against the store.
    ambiguous: bool,
    finished: Option<Result<ProbeReport, LeaseError>>,
    done: bool,
    /// Scratch keys a write was sent to: K, L, M (a write whose reply was
    /// lost may have created one).
    sent: [bool; 3],
    /// The probe's own deadline (`op_timeout` from its first poll); the
    /// checks end [`CLEANUP_RESERVE`] requests earlier, so that an error
    /// leaves time to delete what may have been created.
    end: Option<Mono>,
    /// A write of ours got no clear answer (no reply, a 5xx): it may still
    /// land, during a later check.
    in_doubt: bool,
    /// The error the probe ends with, held while the cleanup runs.
    failing: Option<LeaseError>,
    /// The cleanup after an error has been started (it runs once).
    cleaning: bool,
    /// Scratch keys whose cleanup DELETE was not confirmed.
    left_behind: Vec<String>,
}

/// Request timeouts kept back from the checks for the cleanup that follows
/// an error (at most half the operation's time): three deletes, one each.
const CLEANUP_RESERVE: u32 = 3;

impl Probe {
    /// A probe on a scratch key next to `cfg.key`, using `cfg`'s timeouts
    /// and retry budget.
    pub fn new(cfg: LeaseConfig, mut entropy: Entropy) -> Probe {
        let key = format!("{}.probe/{}", cfg.key, entropy.id());
        let listed_key = format!("{key}.listed");
        let missing_key = format!("{key}.missing");
        let finished = cfg.validate().err().map(|e| Err(e.into()));
        let calls = Calls::new(&cfg);
        Probe {
            cfg,
            entropy,
            key,
            listed_key,
            missing_key,
            step: Step::CreateFirst,
            calls,
            results: Vec::new(),
            first_etag: None,
            current_etag: None,
            dates: (0, 0),
            scratch_exists: false,
            listed_exists: false,
            missing_created: false,
            list: ListState::default(),
            ambiguous: false,
            finished,
            done: false,
            sent: [false; 3],
            end: None,
            failing: None,
            in_doubt: false,
            cleaning: false,
            left_behind: Vec::new(),
        }
    }

    /// Starts the deadlines at the first poll: the probe's own, and the
    /// checks', a reserve earlier.
    fn start(&mut self, now: Mono) {
        if self.end.is_some() {
            return;
        }
        let end = op_deadline(&self.cfg, now);
        let reserve = (self.cfg.request_timeout * CLEANUP_RESERVE).min(self.cfg.op_timeout / 2);
        self.end = Some(end);
        self.calls
            .start(Mono(end.0.saturating_sub(reserve.as_millis() as u64)));
    }

    /// Ends in `error`, after deleting the scratch keys a write of ours may
    /// have created (each one DELETE, answered or not, within the time the
    /// checks left); `false` when there is nothing to delete or no time.
    fn clean_up_after(&mut self, now: Mono, error: &LeaseError) -> bool {
        if std::mem::replace(&mut self.cleaning, true)
            || matches!(error, LeaseError::NoSuchBucket { .. })
        {
            return false;
        }
        let [k, l, m] = self.sent;
        self.scratch_exists |= k;
        self.listed_exists |= l;
        self.missing_created |= m;
        let end = self.end.unwrap_or(now);
        self.step = self.cleanup();
        if self.step == Step::Done || now >= end {
            return false;
        }
        let mut calls = Calls::new(&self.cfg).with_ids_from(self.calls.next_id());
        calls.start(end);
        self.calls = calls;
        true
    }

    /// `error`, naming the scratch keys that may be left behind.
    fn with_leftovers(&self, error: LeaseError) -> LeaseError {
        let left: Vec<&str> = [
            (self.scratch_exists, self.key.as_str()),
            (self.listed_exists, self.listed_key.as_str()),
            (self.missing_created, self.missing_key.as_str()),
        ]
        .into_iter()
        .filter_map(|(left, key)| left.then_some(key))
        .chain(self.left_behind.iter().map(String::as_str))
        .collect();
        match error {
            LeaseError::GaveUp {
                attempts,
                last,
                unsettled,
            } if !left.is_empty() => LeaseError::GaveUp {
                attempts,
                last: format!(
                    "{last}; scratch objects may be left behind: {}",
                    left.join(", ")
                ),
                unsettled,
            },
            error => error,
        }
    }

    /// Call ids continue from `next` (a machine that runs the probe inside
    /// its own calls, [`crate::protocol::verdict::SharedProbe`]).
    pub fn with_ids_from(mut self, next: u64) -> Probe {
        self.calls = self.calls.with_ids_from(next);
        self
    }

    /// The id the probe's next call gets.
    pub fn next_id(&self) -> u64 {
        self.calls.next_id()
    }

    /// The scratch key this probe writes.
    pub fn key(&self) -> &str {
        &self.key
    }

    fn record(&mut self, check: Check, passed: bool, detail: impl Into<String>) {
        self.results.push(CheckResult {
            check,
            passed,
            detail: detail.into(),
            inconclusive: false,
        });
    }

    /// `check` passed (`pass` says how) or failed (`fail` says how).
    fn judged(
        &mut self,
        check: Check,
        ok: bool,
        pass: impl Into<String>,
        fail: impl FnOnce() -> String,
    ) {
        let detail = if ok { pass.into() } else { fail() };
        self.record(check, ok, detail);
    }

    /// Whether a write's reply carried an etag.
    fn record_put_etag(&mut self, etag: bool) {
        let detail = if etag {
            "PUT answered with an ETag"
        } else {
            "PUT answered without an ETag: every write is confirmed by a read"
        };
        self.record(Check::PutReturnsEtag, etag, detail);
    }

    /// `check` failed for want of an answer ([`CheckResult::inconclusive`]).
    fn record_inconclusive(&mut self, check: Check, detail: impl Into<String>) {
        self.record(check, false, detail);
        if let Some(r) = self.results.last_mut() {
            r.inconclusive = true;
        }
    }

    fn body(&self, step: &str) -> Vec<u8> {
        format!(
            "{{\"probe\":\"{step}\",\"holder\":{}}}",
            serde_json::Value::from(self.cfg.holder.as_str())
        )
        .into_bytes()
    }

    fn stale_etag(&self) -> Etag {
        match (&self.first_etag, &self.current_etag) {
            (Some(first), Some(current)) if first != current => first.clone(),
            _ => Etag::new(NO_SUCH_ETAG),
        }
    }

    fn op(&self) -> Option<StoreOp> {
        let key = self.key.clone();
        let if_match = |e: Option<&Etag>| {
            PutCondition::IfMatch(e.cloned().unwrap_or_else(|| Etag::new(NO_SUCH_ETAG)))
        };
        Some(match self.step {
            Step::CreateFirst => StoreOp::Put {
                key,
                body: self.body("create"),
                condition: PutCondition::IfAbsent,
            },
            Step::LearnEtag | Step::VerifyIfMatch | Step::VerifyDelete => StoreOp::Get { key },
            Step::CleanupScratch => StoreOp::Delete {
                key,
                if_match: None,
            },
            Step::CreateSecond => StoreOp::Put {
                key,
                body: self.body("second create"),
                condition: PutCondition::IfAbsent,
            },
            Step::IfMatchCurrent => StoreOp::Put {
                key,
                body: self.body("if-match current"),
                condition: if_match(self.current_etag.as_ref()),
            },
            Step::IfMatchStale => StoreOp::Put {
                key,
                body: self.body("if-match stale"),
                condition: PutCondition::IfMatch(self.stale_etag()),
            },
            Step::IfMatchMissing => StoreOp::Put {
                key: self.missing_key.clone(),
                body: self.body("if-match missing"),
                condition: if_match(self.current_etag.as_ref()),
            },
            Step::GetMissing => StoreOp::Get {
                key: self.missing_key.clone(),
            },
            Step::CreateListed => StoreOp::Put {
                key: self.listed_key.clone(),
                body: self.body("listed"),
                condition: PutCondition::IfAbsent,
            },
            Step::ListPage => StoreOp::List {
                prefix: key,
                continuation: self.list.tokens.last().cloned(),
                max_keys: Some(1),
            },
            Step::DeleteStale => StoreOp::Delete {
                key,
                if_match: Some(self.stale_etag()),
            },
            Step::DeleteCurrent => StoreOp::Delete {
                key,
                if_match: Some(
                    self.current_etag
                        .clone()
                        .unwrap_or_else(|| Etag::new(NO_SUCH_ETAG)),
                ),
            },
            Step::CleanupListed => StoreOp::Delete {
                key: self.listed_key.clone(),
                if_match: None,
            },
            Step::CleanupMissing => StoreOp::Delete {
                key: self.missing_key.clone(),
                if_match: None,
            },
            Step::Done => return None,
        })
    }

    /// The DELETE the current step makes, when it is a cleanup.
    fn cleaning_op(&self) -> Option<StoreOp> {
        match self.step {
            Step::CleanupScratch | Step::CleanupListed | Step::CleanupMissing => self.op(),
            _ => None,
        }
    }

    /// The first cleanup call, once the checks are done.
    fn cleanup(&mut self) -> Step {
        if self.scratch_exists {
            Step::CleanupScratch
        } else if self.listed_exists {
            Step::CleanupListed
        } else if self.missing_created {
            Step::CleanupMissing
        } else {
            Step::Done
        }
    }

    /// Whether a check every protocol needs failed by what the store
    /// answered (not for want of an answer).
    fn every_protocol_refused(&self) -> bool {
        self.results.iter().any(|r| {
            !r.passed && !r.inconclusive && r.check.needed_by().len() == Protocol::ALL.len()
        })
    }

    /// Marks every check not run yet as failed with `why`.
    fn skip_rest(&mut self, why: &str) {
        for check in Check::ALL {
            if self.result(check).is_none() && check != Check::DateHeader {
                self.record_inconclusive(check, format!("not checked: {why}"));
            }
        }
    }

    fn result(&self, check: Check) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.check == check)
    }

    fn on_reply(&mut self, now: Now, reply: StoreReply) {
        let kind = reply.kind;
        if let (Some(StoreOp::Delete { key, .. }), false) = (
            self.cleaning_op(),
            matches!(kind, ReplyKind::Deleted | ReplyKind::Missing),
        ) {
            // Not confirmed gone: say so.
            self.left_behind.push(key);
        }
        match self.step {
            // Best effort: whatever a cleanup call answers, move on.
            Step::CleanupScratch => {
                self.scratch_exists = false;
                self.step = self.cleanup();
                return;
            }
            Step::CleanupListed => {
                self.listed_exists = false;
                self.step = self.cleanup();
                return;
            }
            Step::CleanupMissing => {
                self.missing_created = false;
                self.step = self.cleanup();
                return;
            }
            _ => {}
        }
        if !matches!(kind, ReplyKind::Transport { .. }) {
            self.dates.0 += 1;
            self.dates.1 += u32::from(reply.date.is_some());
        }
        if self.retried_or_ended(now, &kind) {
            return;
        }
        let answer = Answer {
            said: summarize(&kind),
            refused: matches!(kind, ReplyKind::PreconditionFailed),
            // An answer (not a retry): the next step starts with no doubt.
            ambiguous: std::mem::take(&mut self.ambiguous),
            written: match &kind {
                ReplyKind::Written { etag } => Some(etag.clone()),
                _ => None,
            },
            kind,
        };
        self.step = self.next_step(answer);
    }

    /// Retries what may pass later, or ends on what no retry can fix;
    /// `false` for a reply the step judges.
    fn retried_or_ended(&mut self, now: Now, kind: &ReplyKind) -> bool {
        match kind {
            kind if kind.is_retryable() => {
                if kind.is_ambiguous() {
                    self.ambiguous = true;
                    // A read that failed changes nothing; a write may land.
                    self.in_doubt |= matches!(
                        self.op(),
                        Some(StoreOp::Put { .. } | StoreOp::Delete { .. })
                    );
                }
                if self.step == Step::ListPage && self.every_protocol_refused() {
                    // Retrying the listing cannot change the verdict: the
                    // store is refused for every protocol already.
                    self.listing_failed(
                        format!(
                            "not retried after {}: the store is refused for every protocol already",
                            summarize(kind)
                        ),
                        true,
                    );
                    self.ambiguous = false;
                    self.calls.fresh_budget();
                    self.step = Step::DeleteStale;
                    return true;
                }
                match self
                    .calls
                    .retry(&self.cfg, &mut self.entropy, now.mono, kind, true)
                {
                    Ok(()) => {}
                    // A store that keeps failing the paged listing fails the
                    // listing checks (it is refused for them), and the probe
                    // goes on with a fresh budget: what it answers to the
                    // rest is worth knowing too.
                    Err(e) if self.step == Step::ListPage => {
                        self.listing_failed(
                            format!("LIST of prefix {} with one key per page: {e}", self.key),
                            true,
                        );
                        self.ambiguous = false;
                        self.calls.fresh_budget();
                        self.step = Step::DeleteStale;
                    }
                    Err(e) => self.finished = Some(Err(e)),
                }
                true
            }
            ReplyKind::Denied { code, message } => {
                self.finished = Some(Err(LeaseError::Denied {
                    code: code.clone(),
                    message: message.clone(),
                    unsettled: Box::default(),
                }));
                true
            }
            ReplyKind::NoSuchBucket => {
                self.finished = Some(Err(LeaseError::no_such_bucket()));
                true
            }
            _ => false,
        }
    }

    /// The step after the current one's reply `a`.
    fn next_step(&mut self, a: Answer) -> Step {
        match self.step {
            Step::CreateFirst => self.created_first(a),
            Step::LearnEtag => self.learned_etag(a),
            Step::CreateSecond => self.created_second(a),
            Step::IfMatchCurrent if a.refused && a.ambiguous => Step::VerifyIfMatch,
            Step::VerifyIfMatch => self.verified_if_match(a),
            Step::DeleteCurrent
                if a.ambiguous && (a.refused || matches!(a.kind, ReplyKind::Missing)) =>
            {
                Step::VerifyDelete
            }
            Step::VerifyDelete => self.verified_delete(a),
            Step::IfMatchCurrent => self.wrote_if_match_current(a),
            Step::IfMatchStale => self.wrote_if_match_stale(a),
            Step::IfMatchMissing => self.wrote_if_match_missing(a),
            Step::GetMissing => self.read_missing(a),
            Step::CreateListed => self.created_listed(a),
            Step::ListPage => self.listed_page(a),
            Step::DeleteStale => self.deleted_stale(a),
            Step::DeleteCurrent => self.deleted_current(a),
            step @ (Step::CleanupScratch
            | Step::CleanupListed
            | Step::CleanupMissing
            | Step::Done) => step,
        }
    }

    /// The step after [`Step::CreateFirst`]'s reply.
    fn created_first(&mut self, a: Answer) -> Step {
        let Answer {
            kind,
            said,
            refused,
            ambiguous,
            written,
        } = a;
        match written {
            Some(etag) => {
                self.scratch_exists = true;
                self.record(Check::CreateIfAbsent, true, said);
                self.record_put_etag(etag.is_some());
                self.first_etag = etag.clone();
                self.current_etag = etag.clone();
                if etag.is_some() {
                    Step::CreateSecond
                } else {
                    Step::LearnEtag
                }
            }
            // The scratch key is this probe's own: refused on a retry,
            // it can only have been created by an earlier attempt whose
            // reply was lost. Read it back for its etag.
            None if refused && ambiguous => {
                self.scratch_exists = true;
                self.record(
                    Check::CreateIfAbsent,
                    true,
                    "written by an attempt whose reply was lost (the retry was refused)",
                );
                Step::LearnEtag
            }
            None => {
                self.record(
                    Check::CreateIfAbsent,
                    false,
                    format!("PUT If-None-Match: * on a new key: {said}"),
                );
                self.skip_rest("the first create failed");
                self.scratch_exists = !matches!(kind, ReplyKind::Missing);
                self.cleanup()
            }
        }
    }

    /// The step after [`Step::LearnEtag`]'s reply.
    fn learned_etag(&mut self, a: Answer) -> Step {
        let Answer { kind, said, .. } = a;
        match kind {
            ReplyKind::Found { etag, .. } => {
                if self.first_etag.is_none() {
                    self.first_etag = Some(etag.clone());
                }
                self.current_etag = Some(etag);
                if self.result(Check::SecondCreateRefused).is_none() {
                    Step::CreateSecond
                } else {
                    Step::IfMatchStale
                }
            }
            _ => {
                self.skip_rest(&format!("reading the probe object back: {said}"));
                self.cleanup()
            }
        }
    }

    /// The step after [`Step::CreateSecond`]'s reply.
    fn created_second(&mut self, a: Answer) -> Step {
        let Answer {
            said,
            refused,
            written,
            ..
        } = a;
        let detail = if refused {
            "refused with 412 (or a 409 the dialect maps to it)".to_string()
        } else if written.is_some() {
            format!(
            "a second PUT If-None-Match: * was {said}: the store ignores the condition and would \
             hand the lease to every contender"
        )
        } else {
            said
        };
        if let Some(Some(etag)) = written {
            self.first_etag = Some(etag.clone());
            self.current_etag = Some(etag);
        }
        self.record(Check::SecondCreateRefused, refused, detail);
        Step::IfMatchCurrent
    }

    /// The step after [`Step::VerifyIfMatch`]'s reply.
    fn verified_if_match(&mut self, a: Answer) -> Step {
        let Answer { kind, said, .. } = a;
        match kind {
            ReplyKind::Found { etag, body } if body == self.body("if-match current") => {
                if self.result(Check::PutReturnsEtag).is_none() {
                    self.record(
                        Check::PutReturnsEtag,
                        false,
                        "not seen: the replies of the writes were lost",
                    );
                }
                self.record(
                    Check::IfMatchCurrent,
                    true,
                    "written by an attempt whose reply was lost (the retry was refused)",
                );
                self.current_etag = Some(etag);
                Step::IfMatchStale
            }
            _ => {
                self.record(
                    Check::IfMatchCurrent,
                    false,
                    format!("refused, and the object does not hold the write: {said}"),
                );
                Step::IfMatchStale
            }
        }
    }

    /// The step after [`Step::VerifyDelete`]'s reply.
    fn verified_delete(&mut self, a: Answer) -> Step {
        let Answer { kind, said, .. } = a;
        let ok = matches!(kind, ReplyKind::Missing);
        self.scratch_exists &= !ok;
        let pass = "deleted by an attempt whose reply was lost (the retry was refused)";
        let fail = || format!("refused, and the object is still there: {said}");
        self.judged(Check::DeleteIfMatchCurrent, ok, pass, fail);
        self.cleanup()
    }

    /// The step after [`Step::IfMatchCurrent`]'s reply.
    fn wrote_if_match_current(&mut self, a: Answer) -> Step {
        let Answer { said, written, .. } = a;
        if let (Some(etag), None) = (&written, self.result(Check::PutReturnsEtag)) {
            // The create's reply was lost: this write's tells.
            self.record_put_etag(etag.is_some());
        }
        let ok = written.is_some();
        let fail =
            || format!("{said} (if the etag's quoting is the problem, try the other quoting)");
        self.judged(Check::IfMatchCurrent, ok, said.clone(), fail);
        match written {
            Some(Some(etag)) => {
                self.current_etag = Some(etag);
                Step::IfMatchStale
            }
            Some(None) => Step::LearnEtag,
            None => Step::IfMatchStale,
        }
    }

    /// The step after [`Step::IfMatchStale`]'s reply.
    fn wrote_if_match_stale(&mut self, a: Answer) -> Step {
        let Answer {
            said,
            refused,
            written,
            ..
        } = a;
        if let Some(etag) = written {
            self.current_etag = etag;
        }
        let fail = || format!("a PUT with a stale If-Match was {said}");
        self.judged(Check::IfMatchStale, refused, "refused with 412", fail);
        Step::IfMatchMissing
    }

    /// The step after [`Step::IfMatchMissing`]'s reply.
    fn wrote_if_match_missing(&mut self, a: Answer) -> Step {
        let Answer {
            kind,
            said,
            refused,
            written,
            ..
        } = a;
        let ok = refused || matches!(kind, ReplyKind::Missing);
        self.missing_created = written.is_some();
        let fail = || format!("PUT If-Match on a missing key was {said}");
        self.judged(Check::IfMatchMissing, ok, said.clone(), fail);
        Step::GetMissing
    }

    /// The step after [`Step::GetMissing`]'s reply.
    fn read_missing(&mut self, a: Answer) -> Step {
        let Answer { kind, said, .. } = a;
        let ok = matches!(kind, ReplyKind::Missing);
        self.missing_created |= matches!(kind, ReplyKind::Found { .. });
        let pass = "the refused write created nothing";
        let fail = || format!("after the If-Match write on a missing key, GET: {said}");
        self.judged(Check::IfMatchMissingNotCreated, ok, pass, fail);
        Step::CreateListed
    }

    /// The step after [`Step::CreateListed`]'s reply.
    fn created_listed(&mut self, a: Answer) -> Step {
        let Answer {
            said,
            refused,
            written,
            ..
        } = a;
        // The key is this probe's own: refused, it exists (an
        // earlier attempt whose reply was lost wrote it).
        if written.is_some() || refused {
            self.listed_exists = true;
            Step::ListPage
        } else {
            let why = format!(
                "creating the second scratch key {}: {said}",
                self.listed_key
            );
            self.listing_failed(format!("not checked: {why}"), true);
            Step::DeleteStale
        }
    }

    /// Both listing checks fail, for `detail`.
    fn listing_failed(&mut self, detail: String, inconclusive: bool) {
        if inconclusive {
            self.record_inconclusive(Check::ListAfterWrite, detail.clone());
            self.record_inconclusive(Check::ListPages, detail);
        } else {
            self.record(Check::ListAfterWrite, false, detail.clone());
            self.record(Check::ListPages, false, detail);
        }
    }

    /// The step after [`Step::ListPage`]'s reply.
    fn listed_page(&mut self, a: Answer) -> Step {
        let Answer { kind, said, .. } = a;
        match kind {
            ReplyKind::Listed { entries, next } => self.on_list_page(entries, next),
            _ => {
                self.listing_failed(format!("LIST of prefix {}: {said}", self.key), false);
                Step::DeleteStale
            }
        }
    }

    /// The step after [`Step::DeleteStale`]'s reply.
    fn deleted_stale(&mut self, a: Answer) -> Step {
        let Answer {
            kind,
            said,
            refused,
            ..
        } = a;
        let deleted = matches!(kind, ReplyKind::Deleted);
        let fail = || format!("DELETE with a stale If-Match was {said}");
        self.judged(Check::DeleteIfMatchStale, refused, "refused with 412", fail);
        if deleted {
            self.scratch_exists = false;
            self.record(
                Check::DeleteIfMatchCurrent,
                false,
                "not checked: the stale delete already deleted the key",
            );
            self.cleanup()
        } else {
            Step::DeleteCurrent
        }
    }

    /// The step after [`Step::DeleteCurrent`]'s reply.
    fn deleted_current(&mut self, a: Answer) -> Step {
        let Answer { kind, said, .. } = a;
        let ok = matches!(kind, ReplyKind::Deleted);
        self.scratch_exists &= !ok;
        self.record(Check::DeleteIfMatchCurrent, ok, said);
        self.cleanup()
    }

    /// One page of the listing made right after L's create: the next page,
    /// or both listing checks judged.
    fn on_list_page(
        &mut self,
        entries: Vec<crate::store::ListEntry>,
        next: Option<String>,
    ) -> Step {
        let list = &mut self.list;
        list.pages += 1;
        list.most_on_a_page = list.most_on_a_page.max(entries.len());
        for e in &entries {
            list.saw_scratch |= e.key == self.key;
            list.saw_listed |= e.key == self.listed_key;
        }
        if let Some(token) = next {
            let repeated = list.tokens.contains(&token);
            if !repeated && list.pages < MAX_LIST_PAGES {
                list.tokens.push(token);
                return Step::ListPage;
            }
            let detail = if repeated {
                format!(
                    "page {} handed out a continuation token already followed: the listing would \
                     never end",
                    list.pages
                )
            } else {
                format!(
                    "a listing of at most three keys, one per page, did not end after {} pages: \
                     continuation tokens are not followed correctly",
                    list.pages
                )
            };
            self.record(Check::ListPages, false, detail);
            self.judge_list_after_write(true);
            return Step::DeleteStale;
        }
        let list = &self.list;
        let (passed, detail) = if list.most_on_a_page > 1 {
            let detail = format!(
                "asked for one key per page, the store answered {} on one page (it ignores \
                 max-keys): paging not exercised",
                list.most_on_a_page
            );
            (list.saw_scratch && list.saw_listed, detail)
        } else if list.saw_scratch && list.saw_listed {
            (
                true,
                format!(
                    "{} pages of one key, read by following the continuation token",
                    list.pages
                ),
            )
        } else {
            (
                false,
                format!(
                    "not verified: {} page(s) of one key did not list both scratch keys (see \
                     list_after_write)",
                    list.pages
                ),
            )
        };
        self.record(Check::ListPages, passed, detail);
        self.judge_list_after_write(false);
        Step::DeleteStale
    }

    /// `paging_broken`: the listing was cut short (see `list_pages`), so a
    /// key it did not show may lie past the pages read.
    fn judge_list_after_write(&mut self, paging_broken: bool) {
        let list = &self.list;
        let (passed, detail) = match (list.saw_scratch, list.saw_listed) {
            (false, _) | (_, false) if paging_broken => (
                false,
                "not verified: the listing's pages could not be read to the end (see list_pages)"
                    .to_string(),
            ),
            (true, true) => (
                true,
                "a LIST sent as the create's reply arrived listed the new key".to_string(),
            ),
            (true, false) => (
                false,
                format!(
                    "a LIST sent as the create of {} was answered did not list it: the store's \
                     listings lag behind its writes",
                    self.listed_key
                ),
            ),
            (false, true) => (
                false,
                format!("the listing did not show {}, created before it", self.key),
            ),
            (false, false) => (
                false,
                format!(
                    "the listing of {} showed neither scratch key: the store's listings lag \
                     behind its writes, or LIST by prefix does not work",
                    self.key
                ),
            ),
        };
        self.record(Check::ListAfterWrite, passed, detail);
    }

    fn report(&mut self) -> ProbeReport {
        let (replies, dated) = self.dates;
        let detail = format!("{dated} of {replies} replies carried a Date header");
        self.record(Check::DateHeader, replies > 0 && dated == replies, detail);
        let mut results = std::mem::take(&mut self.results);
        if self.in_doubt {
            // A write of ours got no clear answer and may have landed later
            // (held in the network), where a later check saw it: a failure
            // then proves nothing of the store to anyone but this prober.
            for r in results.iter_mut().filter(|r| !r.passed) {
                r.inconclusive = true;
            }
        }
        let rank = |r: &CheckResult| Check::ALL.iter().position(|c| *c == r.check);
        crate::sort::small_by(&mut results, |a, b| rank(a) < rank(b));
        ProbeReport {
            key: self.key.clone(),
            results,
            left_behind: self.left_behind.clone(),
        }
    }
}

impl OneAtATime for Probe {
    type Outcome = Result<ProbeReport, LeaseError>;

    fn calls(&mut self) -> (&LeaseConfig, &mut Calls) {
        (&self.cfg, &mut self.calls)
    }

    /// A failure first cleans up what the probe may have created; the
    /// outcome is handed out after that.
    fn take_outcome(&mut self, now: Now) -> Option<Self::Outcome> {
        if self.done {
            return None;
        }
        self.start(now.mono);
        match self.finished.take() {
            Some(Err(e)) if self.clean_up_after(now.mono, &e) => {
                self.failing = Some(e);
                None
            }
            Some(outcome) => {
                self.done = true;
                Some(outcome)
            }
            None => None,
        }
    }

    fn is_parked(&self) -> bool {
        self.done
    }

    fn on_expired(&mut self, _now: Now, error: LeaseError) {
        let e = match self.failing.take() {
            Some(failing) => self.with_leftovers(failing),
            None => error,
        };
        self.finished = Some(Err(e));
    }

    fn on_reply(&mut self, now: Now, _write: bool, reply: StoreReply) {
        Probe::on_reply(self, now, reply)
    }

    fn next(&mut self, _now: Now) -> Next {
        match self.op() {
            Some(op) => {
                if let StoreOp::Put { key, .. } = &op {
                    let which = [&self.key, &self.listed_key, &self.missing_key];
                    if let Some(i) = which.iter().position(|k| *k == key) {
                        self.sent[i] = true;
                    }
                }
                Next::Call(op)
            }
            None => {
                self.finished = Some(match self.failing.take() {
                    Some(failing) => Err(self.with_leftovers(failing)),
                    None => Ok(self.report()),
                });
                Next::Again
            }
        }
    }
}

calls::machine_of_calls!(Probe => Result<ProbeReport, LeaseError>);

/// Ids of the checked operation's calls start here, clear of the probe's.
const CHECKED_IDS: u64 = 1 << 32;

/// A lease operation that runs only on a store the probe found safe for
/// its protocol: otherwise it finishes with [`LeaseError::UnsafeStore`]
/// and sends nothing to the lease key.
#[derive(Clone, Debug)]
pub struct Checked<G> {
    probe: Option<Probe>,
    protocol: Protocol,
    op: Option<LeaseOp<G>>,
    report: Option<ProbeReport>,
}

impl<G> Checked<G> {
    /// Probes with `cfg` (scratch key next to `cfg.key`), then runs `op`.
    pub fn new(cfg: LeaseConfig, entropy: Entropy, op: LeaseOp<G>) -> Checked<G> {
        let protocol = cfg.protocol;
        Checked {
            probe: Some(Probe::new(cfg, entropy)),
            protocol,
            op: Some(op.with_ids_from(CHECKED_IDS)),
            report: None,
        }
    }

    /// The probe's report, once it finished.
    pub fn report(&self) -> Option<&ProbeReport> {
        self.report.as_ref()
    }
}

impl<G, T> Machine for Checked<G>
where
    LeaseOp<G>: Machine<Outcome = Result<T, LeaseError>>,
{
    type Outcome = Result<T, LeaseError>;

    fn poll(&mut self, now: Now) -> Output<Self::Outcome> {
        if let Some(probe) = &mut self.probe {
            match probe.poll(now) {
                Output::Done(Ok(report)) => {
                    self.probe = None;
                    let verdict = report.supports(self.protocol);
                    self.report = Some(report);
                    if let Err(e) = verdict {
                        self.op = None;
                        return Output::Done(Err(e));
                    }
                }
                Output::Done(Err(e)) => {
                    self.probe = None;
                    self.op = None;
                    return Output::Done(Err(e));
                }
                Output::Call(id, op) => return Output::Call(id, op),
                Output::Event(e) => return Output::Event(e),
                Output::Wait(t) => return Output::Wait(t),
            }
        }
        match &mut self.op {
            Some(op) => op.poll(now),
            None => Output::Wait(Mono(u64::MAX)),
        }
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        match &mut self.probe {
            Some(probe) => probe.handle_reply(now, id, reply),
            None => {
                if let Some(op) = &mut self.op {
                    op.handle_reply(now, id, reply);
                }
            }
        }
    }
}
