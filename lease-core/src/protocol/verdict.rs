//! The shared verdict: documented in the layer's docs (`protocol/mod.rs`, "The shared verdict").

use crate::config::{LeaseConfig, Protocol};
use crate::entropy::Entropy;
use crate::protocol::calls::{self, Calls, Next, OneAtATime};
use crate::protocol::machine::terminal_error;
use crate::protocol::outcome::summarize;
use crate::protocol::outcome::LeaseError;
use crate::protocol::probe::{Check, Probe, ProbeReport};
use crate::store::{Etag, PutCondition, ReplyKind, StoreOp, StoreReply};
use crate::time::{Dur, Mono, Now, StoreDate, UnixMillis};
use core::fmt;
use serde_json::{json, Value};
use std::time::Duration;

/// How long a passed verdict is trusted, by the store's clock.
pub const VERDICT_TRUSTED_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a verdict that refused a protocol is trusted.
pub const REFUSAL_TRUSTED_FOR: Duration = Duration::from_secs(60 * 60);

/// The least time the probe is given, whatever the lease's `op_timeout`.
pub const PROBE_BUDGET: Duration = Duration::from_secs(30);

/// The most time the probe is given, whatever the lease's `op_timeout`.
pub const MAX_PROBE_TIME: Duration = Duration::from_secs(120);

/// The least retry budget the probe is given (its twelve calls share it).
pub const PROBE_ATTEMPTS: u32 = 24;

/// A claim to probe lasts the probe's time ([`probe_time`]) and this
/// much more (the verdict's write, clocks a little apart).
pub const PROBE_CLAIM_MARGIN: Duration = Duration::from_secs(10);

/// How often a client waiting for another's probe reads the verdict.
pub const VERDICT_POLL: Duration = Duration::from_secs(1);

/// The first wait after a probe that could not finish; it doubles with
/// each failure in a row, up to [`PROBE_MAX_BACKOFF`].
pub const PROBE_FIRST_BACKOFF: Duration = Duration::from_secs(10);

/// The longest wait between probes that cannot finish.
pub const PROBE_MAX_BACKOFF: Duration = Duration::from_secs(10 * 60);

/// The longest a check of the store with `cfg` takes ([`SharedProbe`]):
/// a wait for another client's claim, then our own probe and the
/// verdict's write, with room to spare.
pub fn most_check_time(cfg: &LeaseConfig) -> Duration {
    probe_time(cfg) * 2 + PROBE_CLAIM_MARGIN + cfg.request_timeout * 4
}

/// The probe's own time: the lease's `op_timeout`, but no less than
/// [`PROBE_BUDGET`] (a short lease's is a few seconds) and no more than
/// [`MAX_PROBE_TIME`] (a long one's may be hours).
pub fn probe_time(cfg: &LeaseConfig) -> Duration {
    cfg.op_timeout
        .clamp(PROBE_BUDGET, MAX_PROBE_TIME)
        .max(cfg.request_timeout)
}

/// The format's number, in every verdict.
const FORMAT: u64 = 1;

/// Where the verdict for `key` is kept.
pub fn verdict_key(key: &str) -> String {
    format!("{key}.probe/verdict.json")
}

/// The configuration the probe runs with: `cfg` with its own time
/// ([`probe_time`]) and at least [`PROBE_ATTEMPTS`] retries.
pub fn probe_config(cfg: &LeaseConfig) -> LeaseConfig {
    let mut cfg = cfg.clone();
    cfg.op_timeout = probe_time(&cfg);
    cfg.max_attempts = cfg.max_attempts.max(PROBE_ATTEMPTS);
    cfg
}

/// The check a refusal carries when the concurrent races (`lease probe`)
/// had two winners: no sequential probe can see that, so it stands until
/// an operator's `lease probe` writes a new verdict.
pub const CONCURRENT_WRITES: &str = "concurrent_writes";

/// The wait before the next probe after `failures` probes in a row could
/// not finish: [`PROBE_FIRST_BACKOFF`] doubled per failure, at most
/// [`PROBE_MAX_BACKOFF`].
pub fn probe_backoff(failures: u32) -> Duration {
    PROBE_FIRST_BACKOFF
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(PROBE_MAX_BACKOFF)
}

/// A protocol the probe refused, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The protocol.
    pub protocol: Protocol,
    /// The failed check's name.
    pub check: String,
    /// What the store answered.
    pub detail: String,
}

/// What the shared record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The probe finished: which protocols the store can carry.
    Passed {
        /// The store's time before the probe.
        at: UnixMillis,
        /// The library version that probed.
        version: String,
        /// The protocols the store is safe for.
        safe: Vec<Protocol>,
        /// The protocols it is not, with the check each failed.
        refused: Vec<Refusal>,
    },
    /// A client is probing.
    Probing {
        /// The store's time at the claim's read.
        at: UnixMillis,
        /// The library version that probes.
        version: String,
        /// The claim lapses then (the store's clock).
        until: UnixMillis,
        /// The claimant's nonce (to recognise its own claim on a re-read).
        by: String,
        /// Probes in a row that could not finish before this one.
        failures: u32,
    },
    /// The probe could not finish.
    Unfinished {
        /// The store's time before the probe.
        at: UnixMillis,
        /// The library version that probed.
        version: String,
        /// Probes in a row that could not finish.
        failures: u32,
        /// No probe before this (the store's clock).
        retry_at: UnixMillis,
        /// Why the last one could not finish.
        error: String,
    },
}

impl Verdict {
    /// The verdict of a finished probe's `report`, earned at `at`. A
    /// protocol refused only by checks that failed for want of an answer
    /// ([`CheckResult::inconclusive`](crate::protocol::probe::CheckResult::inconclusive):
    /// the store throttling or failing while it probed) is neither safe nor
    /// refused: the next client probes for it again, rather than the
    /// whole fleet being refused for an hour by a passing fault.
    pub fn from_report(report: &ProbeReport, at: UnixMillis) -> Verdict {
        let mut safe = Vec::new();
        let mut refused = Vec::new();
        for p in Protocol::ALL {
            let failed = || {
                report
                    .results
                    .iter()
                    .filter(|r| !r.passed && r.check.needed_by().contains(&p))
            };
            if failed().next().is_some() && failed().all(|r| r.inconclusive) {
                continue;
            }
            match report.supports(p) {
                Ok(()) => safe.push(p),
                Err(LeaseError::UnsafeStore { check, detail, .. }) => refused.push(Refusal {
                    protocol: p,
                    check: check.to_string(),
                    detail,
                }),
                Err(e) => refused.push(Refusal {
                    protocol: p,
                    check: "probe".into(),
                    detail: e.to_string(),
                }),
            }
        }
        Verdict::Passed {
            at,
            version: env!("CARGO_PKG_VERSION").into(),
            safe,
            refused,
        }
    }

    /// The verdict after `failures` probes in a row could not finish, the
    /// last at `at` with `error`.
    pub fn unfinished(at: UnixMillis, failures: u32, error: &LeaseError) -> Verdict {
        Verdict::Unfinished {
            at,
            version: env!("CARGO_PKG_VERSION").into(),
            failures,
            retry_at: UnixMillis(at.0.saturating_add(probe_backoff(failures).as_millis() as u64)),
            error: error.to_string(),
        }
    }

    /// Moves every protocol `refusals` name from safe to refused (the
    /// races' refusals a new probe carries over).
    pub fn refuse(&mut self, refusals: &[Refusal]) {
        if let Verdict::Passed { safe, refused, .. } = self {
            for r in refusals {
                safe.retain(|p| *p != r.protocol);
                if !refused.iter().any(|x| x.protocol == r.protocol) {
                    refused.push(r.clone());
                }
            }
        }
    }

    /// Ok when a passed verdict found the store safe for `protocol`;
    /// otherwise [`LeaseError::UnsafeStore`] naming the check it failed
    /// (the verdict kept at `key`).
    pub fn supports(&self, protocol: Protocol, key: &str) -> Result<(), LeaseError> {
        let refusal = match self {
            Verdict::Passed { safe, .. } if safe.contains(&protocol) => return Ok(()),
            Verdict::Passed { refused, .. } => refused.iter().find(|r| r.protocol == protocol),
            _ => None,
        };
        let (check, detail) = refusal.map_or(("probe", "not checked"), |r| {
            (Check::static_name(&r.check), r.detail.as_str())
        });
        Err(LeaseError::UnsafeStore {
            protocol,
            check,
            detail: format!("{detail} (the probe's verdict kept at {key})"),
            unsettled: Box::default(),
        })
    }

    /// As stored.
    pub fn encode(&self) -> Vec<u8> {
        let v = match self {
            Verdict::Passed {
                at,
                version,
                safe,
                refused,
            } => json!({
                "lease_probe": FORMAT, "version": version, "state": "passed", "at_ms": at.0,
                "safe": safe.iter().map(|p| p.name()).collect::<Vec<_>>(),
                "refused": refused.iter().map(|r| json!({
                    "protocol": r.protocol.name(), "check": r.check, "detail": r.detail,
                })).collect::<Vec<_>>(),
            }),
            Verdict::Probing {
                at,
                version,
                until,
                by,
                failures,
            } => json!({
                "lease_probe": FORMAT, "version": version, "state": "probing", "at_ms": at.0,
                "until_ms": until.0, "by": by, "failures": failures,
            }),
            Verdict::Unfinished {
                at,
                version,
                failures,
                retry_at,
                error,
            } => json!({
                "lease_probe": FORMAT, "version": version, "state": "unfinished", "at_ms": at.0,
                "failures": failures, "retry_at_ms": retry_at.0, "error": error,
            }),
        };
        v.to_string().into_bytes()
    }

    /// A stored verdict, or `None` for anything else (another format,
    /// another tool's object, garbage).
    pub fn decode(body: &[u8]) -> Option<Verdict> {
        let v: Value = serde_json::from_slice(body).ok()?;
        if v.get("lease_probe")?.as_u64()? != FORMAT {
            return None;
        }
        let at = UnixMillis(v.get("at_ms")?.as_u64()?);
        let version = v.get("version")?.as_str()?.to_string();
        let protocol = |v: &Value| v.as_str().and_then(Protocol::parse);
        let failures = || u32::try_from(v.get("failures")?.as_u64()?).ok();
        match v.get("state")?.as_str()? {
            "passed" => Some(Verdict::Passed {
                at,
                version,
                safe: v
                    .get("safe")?
                    .as_array()?
                    .iter()
                    .map(protocol)
                    .collect::<Option<_>>()?,
                refused: v
                    .get("refused")?
                    .as_array()?
                    .iter()
                    .map(|r| {
                        Some(Refusal {
                            protocol: protocol(r.get("protocol")?)?,
                            check: r.get("check")?.as_str()?.to_string(),
                            detail: r.get("detail")?.as_str()?.to_string(),
                        })
                    })
                    .collect::<Option<_>>()?,
            }),
            "probing" => Some(Verdict::Probing {
                at,
                version,
                until: UnixMillis(v.get("until_ms")?.as_u64()?),
                by: v.get("by")?.as_str()?.to_string(),
                failures: failures()?,
            }),
            "unfinished" => Some(Verdict::Unfinished {
                at,
                version,
                failures: failures()?,
                retry_at: UnixMillis(v.get("retry_at_ms")?.as_u64()?),
                error: v.get("error")?.as_str()?.to_string(),
            }),
            _ => None,
        }
    }
}

impl Check {
    /// The `&'static` name of the check named `name` (a recorded verdict's),
    /// or `"probe"` for a name no check has.
    fn static_name(name: &str) -> &'static str {
        Check::ALL
            .into_iter()
            .map(Check::name)
            .find(|n| *n == name)
            .unwrap_or("probe")
    }
}

/// What a client does after reading the shared verdict.
#[derive(Clone, Debug, PartialEq)]
pub enum Reading {
    /// A trusted verdict: no probe (it may refuse the protocol:
    /// [`Verdict::supports`]).
    Trusted(Verdict),
    /// A client is probing until `until` (the store's clock): wait for
    /// its verdict. `by`: its nonce.
    Probing {
        /// When its claim lapses.
        until: UnixMillis,
        /// The claimant's nonce.
        by: String,
    },
    /// A probe could not finish lately: none is made before `retry_at`
    /// (the store's clock); `error` says so.
    BackOff {
        /// When the next probe is due.
        retry_at: UnixMillis,
        /// The error to end with when the wait is too long.
        error: LeaseError,
    },
    /// Probe. `etag`: the version read (none: no verdict), the claim's
    /// condition; `failures`: probes in a row that could not finish before
    /// this one.
    Probe {
        /// The version read, if any.
        etag: Option<Etag>,
        /// Unfinished probes in a row so far.
        failures: u32,
    },
}

/// Judges the verdict read at `key` (`found`: its body and etag, or none)
/// for `protocol` at the store's time `now` (see the module docs).
pub fn judge(
    key: &str,
    found: Option<(&[u8], Etag)>,
    protocol: Protocol,
    now: UnixMillis,
) -> Reading {
    let Some((body, etag)) = found else {
        return Reading::Probe {
            etag: None,
            failures: 0,
        };
    };
    let probe = |failures| Reading::Probe {
        etag: Some(etag.clone()),
        failures,
    };
    match Verdict::decode(body) {
        Some(v) if v.trusted_for(protocol, now) => Reading::Trusted(v),
        Some(Verdict::Passed { .. }) | None => probe(0),
        Some(Verdict::Probing {
            at,
            until,
            by,
            failures,
            ..
        }) => {
            let longest = MAX_PROBE_TIME + PROBE_CLAIM_MARGIN;
            if now.0 < until.0 && fresh(at, now, longest) {
                Reading::Probing { until, by }
            } else {
                // The claimant died or could not write its verdict: a
                // probe that did not finish.
                probe(failures.saturating_add(1))
            }
        }
        Some(Verdict::Unfinished {
            failures,
            retry_at,
            error,
            at,
            ..
        }) => {
            if now.0 < retry_at.0 && fresh(at, now, PROBE_MAX_BACKOFF) {
                let wait = Dur(Duration::from_millis(retry_at.0 - now.0));
                Reading::BackOff {
                    retry_at,
                    error: LeaseError::GaveUp {
                        attempts: 0,
                        last: format!(
                            "the store's capability probe could not finish {failures} time(s) in a row ({error}); no client probes again for {wait:?} ({key})"
                        ),
                        unsettled: Box::default(),
                    },
                }
            } else {
                probe(failures)
            }
        }
    }
}

/// Whether `at` is younger than `window` at `now` and not from the future
/// (beyond a minute of the clocks' disagreement, for a verdict dated by a
/// local clock).
fn fresh(at: UnixMillis, now: UnixMillis, window: Duration) -> bool {
    at.0 <= now.0.saturating_add(60_000) && now.0.saturating_sub(at.0) < window.as_millis() as u64
}

impl Verdict {
    /// Whether a client of this build trusts this verdict for `protocol`
    /// at `now`: one that passed, written by this version, and fresh (a
    /// refusal is trusted for a shorter time, but for the concurrent
    /// races', which no probe a client makes sees).
    fn trusted_for(&self, protocol: Protocol, now: UnixMillis) -> bool {
        let Verdict::Passed {
            at,
            version,
            safe,
            refused,
        } = self
        else {
            return false;
        };
        let refusal = refused.iter().find(|r| r.protocol == protocol);
        version == env!("CARGO_PKG_VERSION")
            && match refusal {
                _ if safe.contains(&protocol) => fresh(*at, now, VERDICT_TRUSTED_FOR),
                Some(r) if r.check == CONCURRENT_WRITES => fresh(*at, now, VERDICT_TRUSTED_FOR),
                Some(_) => fresh(*at, now, REFUSAL_TRUSTED_FOR),
                None => false,
            }
    }
}

/// What `lease probe --read-only` found: the checks a client without write
/// permission can make (an auditor's, a dashboard's credentials), each
/// `Some(passed)` or `None` when it could not tell, and what it could not
/// check at all. Made by [`crate::client::Leases::probe_read_only`]:
///
/// | check | calls | passes when |
/// |---|---|---|
/// | `read` | GET the lease key | an answer (found or missing) |
/// | `date_header` | the GET's `Date` | present, and within `max_skew` of the local clock |
/// | `not_modified` | GET `If-None-Match: <etag read>` (a lease there) | 304 (a store that answers in full costs a waiting contender a full read) |
/// | `list` | LIST the lease key as a prefix | an answer; the lease object read is listed |
/// | `versioning` | the replies' version ids | a version id seen: the bucket keeps versions (none seen: unknown) |
///
/// The fleet's shared verdict ([`protocol::verdict`](crate::protocol#the-shared-verdict)), if kept, is
/// read and shown. Nothing is written.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadOnlyReport {
    /// The lease key looked at.
    pub key: String,
    /// Each check: its name, `Some(passed)` or `None` (could not tell),
    /// what the store answered.
    pub checks: Vec<(&'static str, Option<bool>, String)>,
    /// The fleet's verdict, if one is kept and readable.
    pub verdict: Option<Verdict>,
}

/// One check of a [`ReadOnlyReport`]: its name, `Some(passed)` or `None`
/// (could not tell), what the store answered.
type ReadCheck = (&'static str, Option<bool>, String);

impl ReadOnlyReport {
    /// Whether a read's `Date` is within `max_skew` (and a second) of the
    /// local clock at `local`.
    pub(crate) fn date_check(
        date: Option<StoreDate>,
        local: UnixMillis,
        max_skew: Duration,
    ) -> ReadCheck {
        let Some(date) = date else {
            let detail =
                "no Date header: the local clock stands in for the store's (within max_skew)";
            return ("date_header", Some(false), detail.into());
        };
        let off = date.unix_ms.0 as i64 - local.0 as i64;
        let sane = off.unsigned_abs() <= max_skew.as_millis() as u64 + 1_000;
        let detail = format!(
            "{} ({off:+} ms from the local clock; max_skew {:?})",
            date.unix_ms.to_http_date(),
            Dur(max_skew),
        );
        ("date_header", Some(sane), detail)
    }

    /// Whether a read again with `If-None-Match` was answered 304.
    pub(crate) fn not_modified_check(again: &ReplyKind) -> ReadCheck {
        let not_modified = matches!(again, ReplyKind::NotModified);
        let detail = if not_modified {
            "304: a waiting contender's re-read costs no body".to_string()
        } else {
            format!(
                "{}: the store answers in full (each re-read costs a full GET)",
                summarize(again)
            )
        };
        ("not_modified", Some(not_modified), detail)
    }

    /// Whether a listing of `key` as prefix names the lease object read
    /// there (`found`).
    pub(crate) fn list_check(listed: &ReplyKind, key: &str, found: bool) -> ReadCheck {
        let ReplyKind::Listed { entries, .. } = listed else {
            return ("list", Some(false), summarize(listed));
        };
        let n = entries.len();
        let shows = entries.iter().any(|e| e.key == key);
        match (found, shows) {
            (false, _) => (
                "list",
                Some(true),
                format!("{n} keys (no lease object to look for)"),
            ),
            (true, true) => (
                "list",
                Some(true),
                format!("{n} keys; the lease object read is listed"),
            ),
            (true, false) => (
                "list",
                Some(false),
                format!("{n} keys; the lease object read is NOT listed"),
            ),
        }
    }

    /// Whether a reply carried a version id.
    pub(crate) fn versioning_check(versioned: bool) -> ReadCheck {
        let detail = if versioned {
            "a version id on a reply: the bucket keeps versions (docs/operations.md)"
        } else {
            "no version id seen: unknown without a write"
        };
        ("versioning", versioned.then_some(true), detail.into())
    }

    /// What needs write permission and was not checked.
    pub fn not_checked() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Check::ALL
            .into_iter()
            .filter(|c| *c != Check::DateHeader)
            .map(Check::name)
            .collect();
        names.push("concurrent_writes");
        names
    }

    /// Whether no check failed (checks that could not tell do not fail).
    pub fn ok(&self) -> bool {
        self.checks
            .iter()
            .all(|(_, passed, _)| *passed != Some(false))
    }

    /// As JSON.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let verdict = self
            .verdict
            .as_ref()
            .map(|v| serde_json::from_slice::<serde_json::Value>(&v.encode()).unwrap_or_default());
        json!({
            "read_only": true,
            "key": self.key,
            "checks": self.checks.iter().map(|(name, passed, detail)| json!({
                "check": name, "passed": passed, "detail": detail,
            })).collect::<Vec<_>>(),
            "not_checked": ReadOnlyReport::not_checked(),
            "fleet_verdict": verdict,
            "ok": self.ok(),
        })
    }
}

impl fmt::Display for ReadOnlyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:<14} {:<8} detail", "check", "result")?;
        for (name, passed, detail) in &self.checks {
            let result = match passed {
                Some(true) => "ok",
                Some(false) => "FAIL",
                None => "unknown",
            };
            writeln!(f, "{name:<14} {result:<8} {detail}")?;
        }
        writeln!(
            f,
            "not checked (they write): {}",
            ReadOnlyReport::not_checked().join(", ")
        )?;
        match &self.verdict {
            Some(Verdict::Passed {
                at, version, safe, ..
            }) => write!(
                f,
                "the fleet's verdict: passed at {} by version {version}, safe for {}",
                at.to_http_date(),
                if safe.is_empty() {
                    "no protocol".to_string()
                } else {
                    safe.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
                }
            ),
            Some(other) => write!(
                f,
                "the fleet's verdict: {}",
                String::from_utf8_lossy(&other.encode())
            ),
            None => write!(f, "the fleet's verdict: none kept"),
        }
    }
}

/// What [`SharedProbe`] ends with.
#[derive(Clone, Debug, PartialEq)]
pub struct Shared {
    /// The verdict: read and trusted, or this client's own.
    pub verdict: Verdict,
    /// The probe's report, when this client probed.
    pub report: Option<ProbeReport>,
}

impl Shared {
    /// Ok when the store may carry `protocol` at `key`: by this client's
    /// own probe, if it made one (its refusals in full, a passing fault's
    /// included), and by the verdict (the races' refusals it carries).
    pub fn supports(&self, protocol: Protocol, key: &str) -> Result<(), LeaseError> {
        if let Some(report) = &self.report {
            report.supports(protocol)?;
        }
        self.verdict.supports(protocol, &verdict_key(key))
    }
}

/// Where [`SharedProbe`] is.
#[derive(Clone, Debug)]
enum Phase {
    /// Read the verdict (at or after this time).
    Read(Mono),
    /// Write a `probing` claim on `condition`.
    Claim(PutCondition, u32),
    /// Our probe runs.
    Probing(Box<Probe>),
    /// Write the verdict (over our claim, `etag`), then end with `then`.
    Publish(Verdict, Option<Etag>, Box<Result<Shared, LeaseError>>),
    /// Finished.
    Done,
}

/// The verdict shared by the fleet, read, or earned by a probe and
/// written (see the module docs): the one way a client checks a store.
#[derive(Clone, Debug)]
pub struct SharedProbe {
    cfg: LeaseConfig,
    protocol: Protocol,
    entropy: Entropy,
    key: String,
    /// Our claim's nonce.
    nonce: String,
    phase: Phase,
    /// The calls of the phase under way (not the probe's).
    calls: Calls,
    /// The store's time at the last read (the verdict's `at`), and the
    /// local time it was read at.
    at: UnixMillis,
    read_at: Mono,
    /// The etag of our claim, once written.
    claim: Option<Etag>,
    /// Probes in a row that could not finish before ours.
    failures: u32,
    /// Refusals of the concurrent races in the verdict read: carried into
    /// the verdict our probe writes (no sequential probe sees them).
    carried: Vec<Refusal>,
    /// The version a claim of ours was refused over: read unchanged again,
    /// the store does not honour `If-Match` (or not as written), and we
    /// probe without a claim.
    claim_refused_over: Option<Etag>,
    /// The whole check's deadline, set at the first poll.
    end: Option<Mono>,
    /// A limit on it, from the caller (`within`).
    limit: Option<Duration>,
    /// What the phase under way ended with.
    finished: Option<Result<Shared, LeaseError>>,
}

impl SharedProbe {
    /// Checks the store for `cfg.protocol` at `cfg.key` (`cfg`: the
    /// lease's timeouts; the probe gets [`probe_config`]).
    pub fn new(cfg: LeaseConfig, mut entropy: Entropy) -> SharedProbe {
        let nonce = entropy.id();
        let calls = Calls::new(&cfg);
        SharedProbe {
            protocol: cfg.protocol,
            key: verdict_key(&cfg.key),
            cfg,
            entropy,
            nonce,
            phase: Phase::Read(Mono(0)),
            calls,
            at: UnixMillis(0),
            read_at: Mono(0),
            claim: None,
            failures: 0,
            carried: Vec::new(),
            claim_refused_over: None,
            end: None,
            limit: None,
            finished: None,
        }
    }

    /// Ends by `limit` from its first poll (the time a run has left): a
    /// wait or a probe that cannot fit ends with [`LeaseError::GaveUp`].
    pub fn within(mut self, limit: Duration) -> SharedProbe {
        self.limit = Some(limit);
        self
    }

    /// The whole check's time ([`most_check_time`]), or the caller's
    /// limit if shorter.
    fn budget(&self) -> Duration {
        let most = most_check_time(&self.cfg);
        self.limit.map_or(most, |l| l.min(most))
    }

    /// The phase's calls: a fresh budget, within the whole deadline.
    fn begin(&mut self, now: Mono, phase: Phase) {
        let end = self.end.unwrap_or(now);
        // A read after a wait: its calls' time counts from the wait's end.
        let from = match phase {
            Phase::Read(at) => at.max(now),
            _ => now,
        };
        let mut calls = Calls::new(&self.cfg).with_ids_from(self.next_id());
        calls.start((from + self.cfg.op_timeout).min(end));
        if let Phase::Read(at) = phase {
            // The read waits until then.
            calls.hold_until(at);
        }
        self.calls = calls;
        self.phase = phase;
    }

    /// The id the next call gets (the probe's, while it runs).
    fn next_id(&self) -> u64 {
        match &self.phase {
            Phase::Probing(probe) => probe.next_id(),
            _ => self.calls.next_id(),
        }
    }

    fn give_up(&self, why: String) -> LeaseError {
        LeaseError::GaveUp {
            attempts: self.calls.attempts(),
            last: format!("{why} ({})", self.key),
            unsettled: Box::default(),
        }
    }

    /// Waits (reading again at `at`) if that leaves time for what follows
    /// it (the read, a claim, a probe of [`Self::least_probe_time`], the
    /// verdict's write), else ends with `error` at once.
    fn wait_or(&mut self, now: Mono, at: Mono, error: LeaseError) {
        let end = self.end.unwrap_or(now);
        if at + self.least_probe_time() + self.cfg.request_timeout * 3 <= end {
            self.begin(now, Phase::Read(at));
        } else {
            self.finished = Some(Err(error));
        }
    }

    fn on_read(&mut self, now: Now, reply: StoreReply) {
        self.at = reply.date.map_or(now.wall, |d| d.unix_ms);
        self.read_at = now.mono;
        let found = match reply.kind {
            ReplyKind::Found { etag, body } => Some((body, etag)),
            ReplyKind::Missing => None,
            kind => {
                let error = LeaseError::Unexpected {
                    reply: format!(
                        "{} answered {}",
                        self.key,
                        crate::protocol::outcome::summarize(&kind)
                    ),
                    unsettled: Box::default(),
                };
                self.finished = Some(Err(error));
                return;
            }
        };
        self.carried = found
            .as_ref()
            .and_then(|(body, _)| match Verdict::decode(body) {
                Some(Verdict::Passed { refused, .. }) => Some(refused),
                _ => None,
            })
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.check == CONCURRENT_WRITES)
            .collect();
        let found_ref = found.as_ref().map(|(b, e)| (b.as_slice(), e.clone()));
        match judge(&self.key, found_ref, self.protocol, self.at) {
            Reading::Trusted(verdict) => {
                self.finished = Some(Ok(Shared {
                    verdict,
                    report: None,
                }))
            }
            Reading::Probing { by, .. } if by == self.nonce => {
                // Our claim landed though its reply was lost.
                self.claim = found.map(|(_, e)| e);
                self.start_probe(now.mono);
            }
            Reading::Probing { until, .. } => {
                let lapse = Duration::from_millis(until.0.saturating_sub(self.at.0));
                let at = now.mono + VERDICT_POLL.min(lapse);
                let error = self.give_up(format!(
                    "another client's capability probe of the store was still under way for {:?}",
                    Dur(lapse)
                ));
                self.wait_or(now.mono, at, error);
            }
            Reading::BackOff { retry_at, error } => {
                let wait = Duration::from_millis(retry_at.0.saturating_sub(self.at.0));
                // Spread out: the fleet's waiters do not claim at one instant.
                let jitter = VERDICT_POLL.mul_f64(2.0 * self.entropy.unit());
                self.wait_or(now.mono, now.mono + wait + jitter, error);
            }
            Reading::Probe { etag, failures } => {
                self.failures = failures;
                if etag.is_some() && etag == self.claim_refused_over {
                    // Our `If-Match` on this very version was refused: the
                    // store does not honour it. Probe without a claim (the
                    // probe will say what the store does).
                    self.claim = None;
                    self.start_probe(now.mono);
                    return;
                }
                self.claim_refused_over = etag.clone();
                let condition = etag.map_or(PutCondition::IfAbsent, PutCondition::IfMatch);
                self.begin(now.mono, Phase::Claim(condition, failures));
            }
        }
    }

    /// The least time a probe is started with: two requests' timeouts.
    fn least_probe_time(&self) -> Duration {
        self.cfg.request_timeout * 2
    }

    /// Runs our probe, on its own budget ([`probe_config`]) or the time
    /// left, if shorter (but no shorter than [`Self::least_probe_time`]).
    fn start_probe(&mut self, now: Mono) {
        let end = self.end.unwrap_or(now);
        // Kept back for writing the verdict: one request's time.
        let left = (end - now).saturating_sub(self.cfg.request_timeout);
        if left < self.least_probe_time() {
            self.finished = Some(Err(
                self.give_up("no time left for the store's capability probe".into())
            ));
            return;
        }
        let mut cfg = probe_config(&self.cfg);
        cfg.op_timeout = cfg.op_timeout.min(left);
        let probe = Probe::new(cfg, self.entropy.clone()).with_ids_from(self.next_id());
        self.phase = Phase::Probing(Box::new(probe));
    }

    fn on_claim(&mut self, now: Now, reply: StoreReply) {
        match reply.kind {
            ReplyKind::Written { etag } => {
                self.claim = etag;
                self.start_probe(now.mono);
            }
            // Another client claimed first (or our claim landed and this
            // is a retry's refusal): read whose it is, after a moment.
            ReplyKind::PreconditionFailed | ReplyKind::Missing => {
                let jitter = VERDICT_POLL.mul_f64(self.entropy.unit() / 2.0);
                self.begin(now.mono, Phase::Read(now.mono + jitter))
            }
            kind => {
                self.finished = Some(Err(LeaseError::Unexpected {
                    reply: crate::protocol::outcome::summarize(&kind),
                    unsettled: Box::default(),
                }))
            }
        }
    }

    /// Our probe ended with `outcome`: write the verdict it earned.
    fn probed(&mut self, now: Mono, failures: u32, outcome: Result<ProbeReport, LeaseError>) {
        let (verdict, then) = match outcome {
            Ok(report) => {
                let mut verdict = Verdict::from_report(&report, self.at);
                verdict.refuse(&self.carried);
                let shared = Shared {
                    verdict: verdict.clone(),
                    report: Some(report),
                };
                (verdict, Ok(shared))
            }
            // No write can land (no bucket, no permission): nothing to keep.
            Err(e @ (LeaseError::Denied { .. } | LeaseError::NoSuchBucket { .. })) => {
                self.finished = Some(Err(e));
                return;
            }
            // Out of time or retries: the store is slow, throttling or
            // failing. The fleet backs off; the backoff counts from the
            // probe's end (the store's time at the read, and the time since).
            Err(LeaseError::GaveUp {
                attempts,
                last,
                unsettled,
            }) => {
                // Said of the check, not of the operation that asked for it.
                let e = LeaseError::GaveUp {
                    attempts,
                    last: format!("the store's capability probe did not finish: {last}"),
                    unsettled,
                };
                let ended = UnixMillis(self.at.0 + (now - self.read_at).as_millis() as u64);
                (
                    Verdict::unfinished(ended, failures.saturating_add(1), &e),
                    Err(e),
                )
            }
            // Anything else may be this client's alone: no backoff for the
            // fleet (the claim lapses).
            Err(e) => {
                self.finished = Some(Err(e));
                return;
            }
        };
        let over = self.claim.clone();
        self.begin(now, Phase::Publish(verdict, over, Box::new(then)));
    }

    fn op(&mut self) -> Option<StoreOp> {
        let key = self.key.clone();
        Some(match &self.phase {
            Phase::Read(_) => StoreOp::Get { key },
            Phase::Claim(condition, failures) => StoreOp::Put {
                key,
                body: Verdict::Probing {
                    at: self.at,
                    version: env!("CARGO_PKG_VERSION").into(),
                    until: UnixMillis(
                        self.at.0 + (probe_time(&self.cfg) + PROBE_CLAIM_MARGIN).as_millis() as u64,
                    ),
                    by: self.nonce.clone(),
                    failures: *failures,
                }
                .encode(),
                condition: condition.clone(),
            },
            Phase::Publish(verdict, over, _) => StoreOp::Put {
                key,
                body: verdict.encode(),
                // Only over our own claim: never over a verdict another
                // client (an operator's `lease probe`) wrote meanwhile. A
                // passed verdict of a probe made with no claim (the store
                // does not honour `If-Match`) over whatever is there.
                condition: match (verdict, over) {
                    (_, Some(etag)) => PutCondition::IfMatch(etag.clone()),
                    (Verdict::Passed { .. }, None) => PutCondition::None,
                    (_, None) => PutCondition::IfAbsent,
                },
            },
            Phase::Probing(_) | Phase::Done => return None,
        })
    }

    fn answered(&mut self, now: Now, write: bool, reply: StoreReply) {
        if let Phase::Publish(_, _, then) = &mut self.phase {
            // Best effort: a verdict that cannot be written only means the
            // next client probes too.
            let retry = reply.kind.is_retryable();
            let then = (**then).clone();
            if matches!(reply.kind, ReplyKind::PreconditionFailed)
                && matches!(&then, Ok(s) if matches!(s.verdict, Verdict::Passed { .. }))
            {
                // Our claim was replaced (an operator's verdict, or our
                // claim lapsed and another client's): read what is there.
                self.claim = None;
                self.begin(now.mono, Phase::Read(now.mono));
                return;
            }
            if !retry
                || self
                    .calls
                    .retry(&self.cfg, &mut self.entropy, now.mono, &reply.kind, true)
                    .is_err()
            {
                self.finished = Some(then);
            }
            return;
        }
        if matches!(self.phase, Phase::Claim(..))
            && matches!(reply.kind, ReplyKind::Unsupported { .. })
        {
            // The store refuses the claim's condition: probe without a
            // claim (the probe will say what the store does).
            self.claim = None;
            self.start_probe(now.mono);
            return;
        }
        if let Some(e) = terminal_error(&reply.kind) {
            self.finished = Some(Err(e));
            return;
        }
        match &reply.kind {
            kind if kind.is_retryable() => {
                // A claim whose outcome is unknown is settled by a read
                // (which recognises our nonce).
                let settle = write && kind.is_ambiguous();
                match self
                    .calls
                    .retry(&self.cfg, &mut self.entropy, now.mono, &reply.kind, true)
                {
                    Ok(()) if settle => self.phase = Phase::Read(now.mono),
                    Ok(()) => {}
                    Err(e) => self.finished = Some(Err(e)),
                }
            }
            _ => match self.phase {
                Phase::Read(_) => self.on_read(now, reply),
                Phase::Claim(..) => self.on_claim(now, reply),
                _ => {}
            },
        }
    }
}

/// The check on the one poll loop ([`calls::poll`]): its own calls, or,
/// while our probe runs, the probe's; all within the whole check's
/// deadline.
impl OneAtATime for SharedProbe {
    type Outcome = Result<Shared, LeaseError>;

    fn calls(&mut self) -> (&LeaseConfig, &mut Calls) {
        match &mut self.phase {
            Phase::Probing(probe) => probe.calls(),
            _ => (&self.cfg, &mut self.calls),
        }
    }

    fn take_outcome(&mut self, now: Now) -> Option<Self::Outcome> {
        let budget = self.budget();
        self.end.get_or_insert(now.mono + budget);
        if let Phase::Probing(probe) = &mut self.phase {
            if let Some(outcome) = probe.take_outcome(now) {
                self.probed(now.mono, self.failures, outcome);
            }
        }
        let out = self.finished.take()?;
        self.phase = Phase::Done;
        Some(out)
    }

    fn is_parked(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// The whole check's deadline (our probe keeps within it by its own).
    fn own_deadlines(&mut self, now: Now) -> bool {
        let end = self.end.unwrap_or(now.mono);
        if matches!(self.phase, Phase::Probing(_)) || now.mono < end {
            return false;
        }
        self.finished = Some(match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Publish(_, _, then) => *then,
            _ => Err(self.give_up(format!(
                "the store's capability check ran out of its time ({:?})",
                Dur(self.budget())
            ))),
        });
        true
    }

    fn on_expired(&mut self, now: Now, error: LeaseError) {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Probing(mut probe) => {
                probe.on_expired(now, error);
                self.phase = Phase::Probing(probe);
            }
            Phase::Publish(_, _, then) => self.finished = Some(*then),
            _ => self.finished = Some(Err(error)),
        }
    }

    fn on_reply(&mut self, now: Now, write: bool, reply: StoreReply) {
        match &mut self.phase {
            Phase::Probing(probe) => OneAtATime::on_reply(&mut **probe, now, write, reply),
            _ => self.answered(now, write, reply),
        }
    }

    fn next(&mut self, now: Now) -> Next {
        if let Phase::Probing(probe) = &mut self.phase {
            return probe.next(now);
        }
        match self.op() {
            Some(op) => Next::Call(op),
            None => Next::Again,
        }
    }

    fn wait(&mut self, now: Now, at: Mono) -> Option<Mono> {
        let end = self.end.unwrap_or(at);
        let at = match &mut self.phase {
            Phase::Probing(probe) => probe.wait(now, at)?,
            _ => at,
        };
        Some(at.min(end))
    }
}

calls::machine_of_calls!(SharedProbe => Result<Shared, LeaseError>);

/// One call with the shared discipline (timeouts, retries of throttling,
/// 5xx and lost replies, the deadline): `lease probe`'s write of the
/// verdict it earned, and the reads of `lease probe --read-only`.
#[derive(Clone, Debug)]
pub struct OneCall {
    cfg: LeaseConfig,
    entropy: Entropy,
    op: StoreOp,
    calls: Calls,
    done: Option<Result<StoreReply, LeaseError>>,
    finished: bool,
}

impl OneCall {
    /// Reads the verdict for `cfg.key` (`cfg`: the lease's timeouts).
    pub fn read(cfg: &LeaseConfig, entropy: Entropy) -> OneCall {
        OneCall::new(
            cfg,
            entropy,
            StoreOp::Get {
                key: verdict_key(&cfg.key),
            },
        )
    }

    /// Writes `verdict` for `cfg.key` on `condition`.
    pub fn write(
        cfg: &LeaseConfig,
        entropy: Entropy,
        verdict: &Verdict,
        condition: PutCondition,
    ) -> OneCall {
        OneCall::new(
            cfg,
            entropy,
            StoreOp::Put {
                key: verdict_key(&cfg.key),
                body: verdict.encode(),
                condition,
            },
        )
    }

    /// Makes `op` (`cfg`: the timeouts and retry budget).
    pub fn new(cfg: &LeaseConfig, entropy: Entropy, op: StoreOp) -> OneCall {
        OneCall {
            calls: Calls::new(cfg),
            cfg: cfg.clone(),
            entropy,
            op,
            done: None,
            finished: false,
        }
    }

    fn on_reply(&mut self, now: Now, reply: StoreReply) {
        if let Some(e) = terminal_error(&reply.kind) {
            self.done = Some(Err(e));
            return;
        }
        match &reply.kind {
            kind if kind.is_retryable() => {
                if let Err(e) =
                    self.calls
                        .retry(&self.cfg, &mut self.entropy, now.mono, &reply.kind, true)
                {
                    self.done = Some(Err(e));
                }
            }
            _ => self.done = Some(Ok(reply)),
        }
    }
}

impl OneAtATime for OneCall {
    type Outcome = Result<StoreReply, LeaseError>;

    fn calls(&mut self) -> (&LeaseConfig, &mut Calls) {
        (&self.cfg, &mut self.calls)
    }

    fn take_outcome(&mut self, _now: Now) -> Option<Self::Outcome> {
        let done = self.done.take()?;
        self.finished = true;
        Some(done)
    }

    fn is_parked(&self) -> bool {
        self.finished
    }

    fn on_expired(&mut self, _now: Now, error: LeaseError) {
        self.done = Some(Err(error));
    }

    fn on_reply(&mut self, now: Now, _write: bool, reply: StoreReply) {
        OneCall::on_reply(self, now, reply)
    }

    fn next(&mut self, _now: Now) -> Next {
        Next::Call(self.op.clone())
    }
}

calls::machine_of_calls!(OneCall => Result<StoreReply, LeaseError>);

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = UnixMillis(1_795_000_000_000);

    fn passed(at: u64, safe: &[Protocol]) -> Verdict {
        Verdict::Passed {
            at: UnixMillis(at),
            version: env!("CARGO_PKG_VERSION").into(),
            safe: safe.to_vec(),
            refused: Protocol::ALL
                .into_iter()
                .filter(|p| !safe.contains(p))
                .map(|protocol| Refusal {
                    protocol,
                    check: "delete_if_match_current".into(),
                    detail: "deleted anyway".into(),
                })
                .collect(),
        }
    }

    fn read(v: &Verdict, protocol: Protocol) -> Reading {
        judge(
            "k.probe/verdict.json",
            Some((&v.encode(), Etag::new("e1"))),
            protocol,
            NOW,
        )
    }

    #[test]
    fn a_verdict_reads_back_as_written() {
        let v = passed(NOW.0, &[Protocol::Cas, Protocol::Epochs]);
        assert_eq!(Verdict::decode(&v.encode()), Some(v));
        let u = Verdict::unfinished(NOW, 3, &LeaseError::no_such_bucket());
        assert_eq!(Verdict::decode(&u.encode()), Some(u));
        for junk in [
            &b"{}"[..],
            b"not json",
            br#"{"lease_probe":2,"state":"passed"}"#,
        ] {
            assert_eq!(Verdict::decode(junk), None);
        }
    }

    #[test]
    fn a_fresh_passed_verdict_of_this_version_stands_for_the_probe() {
        let v = passed(NOW.0 - 1_800_000, &[Protocol::Cas, Protocol::Epochs]);
        assert_eq!(read(&v, Protocol::Cas), Reading::Trusted(v.clone()));
        assert!(v.supports(Protocol::Cas, "k").is_ok());
        assert_eq!(read(&v, Protocol::Mutex), Reading::Trusted(v.clone()));
        assert!(matches!(
            v.supports(Protocol::Mutex, "k"),
            Err(LeaseError::UnsafeStore {
                check: "delete_if_match_current",
                ..
            })
        ));
        let old = passed(
            NOW.0 - VERDICT_TRUSTED_FOR.as_millis() as u64,
            &[Protocol::Cas],
        );
        assert!(matches!(
            read(&old, Protocol::Cas),
            Reading::Probe { failures: 0, .. }
        ));
        let future = passed(NOW.0 + 3_600_000, &[Protocol::Cas]);
        assert!(matches!(
            read(&future, Protocol::Cas),
            Reading::Probe { .. }
        ));
        let Verdict::Passed {
            at, safe, refused, ..
        } = passed(NOW.0, &[Protocol::Cas])
        else {
            unreachable!()
        };
        let other = Verdict::Passed {
            at,
            version: "0.0.0-other".into(),
            safe,
            refused,
        };
        assert!(matches!(read(&other, Protocol::Cas), Reading::Probe { .. }));
        // A refusal is trusted for an hour only: a fixed store is probed again.
        let refused_long_ago = passed(NOW.0 - 2 * 3_600_000, &[Protocol::Cas]);
        assert!(matches!(
            read(&refused_long_ago, Protocol::Mutex),
            Reading::Probe { .. }
        ));
    }

    /// A refusal for want of an answer (the store throttled the probe's
    /// listing past its time) refuses the prober, not the fleet: the
    /// verdict names the protocol neither safe nor refused.
    #[test]
    fn an_inconclusive_refusal_is_not_kept_for_the_fleet() {
        use crate::protocol::probe::{Check, CheckResult, ProbeReport};
        let results = Check::ALL
            .into_iter()
            .map(|check| {
                let listing = matches!(check, Check::ListAfterWrite | Check::ListPages);
                CheckResult {
                    check,
                    passed: !listing,
                    detail: "LIST throttled past the probe's time".into(),
                    inconclusive: listing,
                }
            })
            .collect();
        let report = ProbeReport {
            key: "k.probe/x".into(),
            results,
            left_behind: Vec::new(),
        };
        assert!(
            report.supports(Protocol::Cas).is_err(),
            "the prober is refused"
        );
        let Verdict::Passed { safe, refused, .. } = Verdict::from_report(&report, NOW) else {
            unreachable!()
        };
        assert!(
            safe.is_empty() && refused.is_empty(),
            "{safe:?} {refused:?}"
        );
        let v = Verdict::from_report(&report, NOW);
        assert!(matches!(read(&v, Protocol::Cas), Reading::Probe { .. }));
    }

    #[test]
    fn an_unfinished_probe_makes_the_fleet_wait_growing_times() {
        assert_eq!(probe_backoff(1), PROBE_FIRST_BACKOFF);
        assert_eq!(probe_backoff(2), PROBE_FIRST_BACKOFF * 2);
        assert_eq!(probe_backoff(30), PROBE_MAX_BACKOFF);
        let u = Verdict::unfinished(UnixMillis(NOW.0 - 1_000), 2, &LeaseError::no_such_bucket());
        match read(&u, Protocol::Cas) {
            Reading::BackOff { retry_at, error } => {
                assert_eq!(retry_at.0, NOW.0 - 1_000 + 20_000);
                assert!(
                    error.to_string().contains("no client probes again for 19s"),
                    "{error}"
                );
            }
            other => panic!("{other:?}"),
        }
        let due = Verdict::unfinished(UnixMillis(NOW.0 - 20_000), 2, &LeaseError::no_such_bucket());
        assert_eq!(
            read(&due, Protocol::Cas),
            Reading::Probe {
                etag: Some(Etag::new("e1")),
                failures: 2
            }
        );
        assert_eq!(
            judge("k", None, Protocol::Cas, NOW),
            Reading::Probe {
                etag: None,
                failures: 0
            }
        );
    }
}
