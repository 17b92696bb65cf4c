//! Leases, outcomes, errors and events: documented in the layer's docs (`protocol/mod.rs`, "Leases, outcomes, errors and events").

use crate::config::{ConfigError, LeaseConfig, Protocol};
use crate::record::{ForeignLock, LeaseRecord, RecordError};
use crate::store::{Etag, ReplyKind};
use crate::time::{Mono, StoreDate, UnixMillis};
use core::fmt;
use std::time::Duration;

/// A lease this node holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Lease {
    /// Object key.
    pub key: String,
    /// Fencing token of this acquisition.
    pub token: u64,
    /// The id of this acquisition (the record's `session` field).
    pub acquisition: String,
    /// Etag of the version we last wrote.
    pub etag: Etag,
    /// The record as we last wrote it.
    pub record: LeaseRecord,
    /// Local monotonic deadline: the lease must be treated as lost from
    /// this instant unless a renewal was confirmed.
    pub valid_until: Mono,
    /// Local time the write that established `valid_until` was first sent.
    pub written_at: Mono,
    /// The latest store date seen, and the local send time of the request
    /// whose reply carried it (the anchor for the next write's expiry).
    pub clock: (StoreDate, Mono),
    /// Until when a write of this acquisition whose outcome stayed unknown
    /// (a create whose reply never came) could still land and be live: the
    /// mutex's release waits this out before it reports
    /// [`ReleaseOutcome::Released`], so a late create cannot leave a ghost lock.
    pub strays_until: Option<Mono>,
}

/// A record of ours that may be live on the store without our knowing it:
/// a write whose outcome was unknown when its operation ended (its reply
/// lost, the re-reads throttled until the operation's deadline, or a
/// refusal that a transport's retry of the same request may explain, not
/// read back), a create still in flight when an acquire found the lease
/// busy ([`Busy::unsettled`]), or the renewal of a lease that expired
/// while it was in flight.
///
/// Pass it to the next acquire ([`LeaseOp::with_claims`](crate::protocol::lease::LeaseOp::with_claims)):
/// a record of this holder and session is then known to be ours, free to
/// take over, instead of another holder's live lease that blocks us for a
/// ttl. [`Elector`](crate::protocol::elector::Elector) and
/// [`Leases`](crate::client::Leases) keep their claims themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The lease key.
    pub key: String,
    /// Our holder name.
    pub holder: String,
    /// The acquisition id the write carried.
    pub acquisition: String,
    /// The token the write carried.
    pub token: u64,
    /// Local time from which no record this write made can be live on the
    /// store any more (its stamped expiry has passed on the store's clock):
    /// the claim can be forgotten then.
    pub live_until: Mono,
}

/// Adds `claim` to `claims`, one per session: it replaces a claim of its
/// session already there, keeping the later of the two ends (what may be
/// live of a session is not forgotten early).
pub(crate) fn hand_on(claims: &mut Vec<Claim>, mut claim: Claim) {
    if let Some(at) = claims
        .iter()
        .position(|c| c.acquisition == claim.acquisition)
    {
        claim.live_until = claim.live_until.max(claims.swap_remove(at).live_until);
    }
    claims.push(claim);
}

impl Claim {
    /// The claim a held lease leaves when it is lost by expiry with a
    /// renewal perhaps in flight: any record that renewal makes is dead
    /// within two ttls (and margins) of the lease's deadline.
    pub fn of_lease(cfg: &LeaseConfig, lease: &Lease) -> Claim {
        let span = cfg.ttl * 2;
        Claim {
            key: cfg.key.clone(),
            holder: lease.record.holder.clone(),
            acquisition: lease.acquisition.clone(),
            token: lease.token,
            live_until: lease.valid_until + span + cfg.date_resolution + cfg.drift_margin(span),
        }
    }

    /// Whether `record` (read at lease key `key`) is this claim's.
    pub fn owns(&self, holder: &str, record: &LeaseRecord) -> bool {
        !self.acquisition.is_empty()
            && record.acquisition == self.acquisition
            && record.holder == holder
    }
}

impl Lease {
    /// Whether `record` is a live record of this lease's holder and
    /// session: ours, perhaps a later write of it whose reply was lost.
    pub(crate) fn same_session(&self, record: &LeaseRecord) -> bool {
        !record.released
            && record.acquisition == self.acquisition
            && record.holder == self.record.holder
    }

    /// Whether the lease may still be acted on at local time `now`.
    pub fn is_valid(&self, now: Mono) -> bool {
        now < self.valid_until
    }

    /// A lease taken up again from a fresh read of it (`seen`), by a
    /// process that did not write it: an operator's `renew` or `release`
    /// naming the etag, a manual endpoint. The caller must have checked
    /// that `seen` is the version it holds (its etag). The local deadline
    /// is the record's expiry as judged from this read's store date, less
    /// the drift margin; for epochs the key is the epoch object's.
    pub fn resume(cfg: &LeaseConfig, seen: Observation) -> Lease {
        let key = match cfg.protocol {
            Protocol::Epochs => crate::record::epoch_key(&cfg.key, seen.record.token),
            Protocol::Cas | Protocol::Mutex => cfg.key.clone(),
        };
        let left = seen
            .record
            .expires_at
            .0
            .saturating_sub(seen.date.latest().0);
        let left = Duration::from_millis(left).saturating_sub(cfg.drift_margin(Duration::ZERO));
        // A mutex lock whose acquisition left a create unanswered: that
        // create stamped an expiry no later than this record's (give or take
        // one date's resolution), so it cannot be live once this record's
        // expiry has passed by the latest the store's clock may read.
        let strays_until = (cfg.protocol == Protocol::Mutex && seen.record.strays).then(|| {
            let until = seen
                .record
                .expires_at
                .0
                .saturating_sub(seen.date.earliest().0);
            let span = Duration::from_millis(until);
            seen.read_at + span + cfg.date_resolution + cfg.drift_margin(span)
        });
        Lease {
            key,
            token: seen.record.token,
            acquisition: seen.record.acquisition.clone(),
            etag: seen.etag,
            valid_until: seen.read_at + left,
            written_at: seen.read_at,
            clock: (seen.date, seen.read_at),
            record: seen.record,
            strays_until,
        }
    }
}

impl Lease {
    /// The lease as JSON, for a caller that will act on it later (a CLI's
    /// output, an HTTP answer): key, holder, token, etag, session and the
    /// expiry on the store's clock (`expires_at_ms`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "key": self.key,
            "holder": self.record.holder,
            "token": self.token,
            "etag": self.etag.as_str(),
            "session": self.acquisition,
            "expires_at_ms": self.record.expires_at.0,
            "expires": self.record.expires_at.to_http_date(),
        })
    }

    /// [`Lease::resume`] after a fresh read (an inspect's outcome), when
    /// the version read is still `etag`, the one the caller holds.
    pub fn resume_version(
        cfg: &LeaseConfig,
        seen: Option<Observation>,
        etag: &Etag,
    ) -> Result<Lease, NotHeld> {
        match seen {
            None => Err(NotHeld::NoObject),
            Some(seen) if seen.etag != *etag => Err(NotHeld::Changed {
                etag: seen.etag,
                holder: seen.record.holder,
                token: seen.record.token,
            }),
            Some(seen) => Ok(Lease::resume(cfg, seen)),
        }
    }
}

/// Why a lease named by its etag cannot be taken up again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotHeld {
    /// There is no lease object.
    NoObject,
    /// The object is another version now.
    Changed {
        /// Its etag.
        etag: Etag,
        /// Its holder.
        holder: String,
        /// Its token.
        token: u64,
    },
}

impl std::error::Error for NotHeld {}

impl fmt::Display for NotHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotHeld::NoObject => f.write_str("there is no lease object"),
            NotHeld::Changed {
                etag,
                holder,
                token,
            } => write!(
                f,
                "the lease is now etag {etag} (holder {holder:?}, token {token}): it is not the version you hold"
            ),
        }
    }
}

/// A lease that another holder owns.
#[derive(Clone, Debug, PartialEq)]
pub struct Busy {
    /// Who holds it.
    pub holder: String,
    /// Their fencing token.
    pub token: u64,
    /// Store time after which it may be taken over.
    pub expires_at: UnixMillis,
    /// How long it had left by the store's clock when it was read (the
    /// read's `Date` to `expires_at`), when known: a waiting contender
    /// tries again no later than that ([`protocol::wait`](crate::protocol#trying-again)).
    pub expires_in: Option<std::time::Duration>,
    /// Etag of the version read.
    pub etag: Etag,
    /// Another tool's lock holds the key ([`LeaseRecord::foreign`]): a
    /// Terraform lock's `expires_at` is
    /// [`HELD_UNTIL_BROKEN`](crate::record::HELD_UNTIL_BROKEN).
    pub foreign: Option<ForeignLock>,
    /// Writes of this acquire whose outcome stayed unknown (a reply lost
    /// or a refusal not read back), and of a wait's earlier attempts: a
    /// create can still land once the key is free again (a late request, a
    /// transport's retry). Pass them to the next acquire
    /// ([`LeaseOp::with_claims`](crate::protocol::lease::LeaseOp::with_claims))
    /// so that a record one makes is taken over, not waited out as another
    /// holder's. Empty when every write was settled.
    pub unsettled: Box<[Claim]>,
    /// The holder the current one announced it hands the lease to (a
    /// planned handoff: [`Leadership::hand_over`](crate::client::Leadership::hand_over)),
    /// if any: that contender reads again soon
    /// ([`HANDOFF_POLL`](crate::protocol::HANDOFF_POLL)).
    pub handoff_to: Option<String>,
}

impl Busy {
    /// `record`, at version `etag`, holds the key. The time it has left
    /// and a write of ours still open are for the engine to fill in.
    pub(crate) fn held_by(record: LeaseRecord, etag: Etag) -> Busy {
        let handoff_to = record.meta.get(crate::protocol::HANDOFF_TO).cloned();
        Busy {
            holder: record.holder,
            token: record.token,
            expires_at: record.expires_at,
            expires_in: None,
            etag,
            foreign: record.foreign,
            unsettled: Box::default(),
            handoff_to,
        }
    }

    /// The lease a read saw held, with the time it had left by the read's
    /// date.
    pub(crate) fn seen(seen: Observation) -> Busy {
        let left = seen.record.expires_at.0.saturating_sub(seen.date.unix_ms.0);
        Busy {
            expires_in: Some(std::time::Duration::from_millis(left)),
            ..Busy::held_by(seen.record, seen.etag)
        }
    }

    /// Whether the lock holding the key never expires (Terraform's).
    pub fn held_until_broken(&self) -> bool {
        self.foreign == Some(ForeignLock::Terraform)
    }

    /// The JSON every adapter shows for it (CLI, Worker, logs): a lock
    /// held until broken has no expiry (`null`).
    pub fn to_json(&self) -> serde_json::Value {
        let until = (!self.held_until_broken()).then_some(self.expires_at);
        serde_json::json!({
            "holder": self.holder,
            "token": self.token,
            "etag": self.etag.as_str(),
            "expires_at_ms": until.map(|t| t.0),
            "expires": until.map(|t| t.to_http_date()),
            "foreign_lock": self.foreign.map(ForeignLock::name),
            "held_until_broken": self.held_until_broken(),
        })
    }
}

/// The lease at `key` as read (`None`: no lease object), as every adapter
/// shows it to an operator (CLI `inspect`, the Worker's `GET /lease`): the
/// `etag` that breaks or releases it included.
pub fn status_json(key: &str, seen: Option<&Observation>) -> serde_json::Value {
    match seen {
        None => serde_json::json!({"key": key, "exists": false, "free": true}),
        Some(seen) => {
            let r = &seen.record;
            let until = (!r.held_until_broken()).then_some(r.expires_at);
            let mut json = serde_json::json!({
                "key": key,
                "exists": true,
                "holder": r.holder,
                // A simple client's record or another tool's lock: its
                // holder and token as read.
                "foreign": r.is_foreign(),
                "foreign_lock": r.foreign.map(ForeignLock::name),
                "held_until_broken": r.held_until_broken(),
                "token": r.token,
                "session": r.acquisition,
                "released": r.released,
                "free": seen.free,
                "etag": seen.etag.as_str(),
                "expires_at_ms": until.map(|t| t.0),
                "expires": until.map(|t| t.to_http_date()),
                "store_date_ms": seen.date.unix_ms.0,
            });
            // A key owned under a session: held while that session's term
            // is (its expiry above is the session's, as the read found it).
            if let Some(by) = &r.owned_by {
                json["owned_by"] = serde_json::json!({"session": by.key, "token": by.token});
            }
            json
        }
    }
}

/// A decoded read of the lease object.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// Etag of the version read.
    pub etag: Etag,
    /// The record.
    pub record: LeaseRecord,
    /// Store date of the read.
    pub date: StoreDate,
    /// Local send time of the read.
    pub read_at: Mono,
    /// Released, or expired by the store's clock at the read.
    pub free: bool,
}

/// Why a held lease is gone.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LostReason {
    /// The local deadline passed before a renewal was confirmed.
    Expired,
    /// Someone else wrote the record.
    TakenBy {
        /// The holder the record names: the new holder, or, in a released
        /// record, the one it was released as (an operator's break keeps
        /// the broken holder's name, or leaves it empty when the names did
        /// not fit beside the break's own fields).
        holder: String,
        /// New token.
        token: u64,
        /// Whether the record is now released (broken by an operator).
        released: bool,
    },
    /// The object was deleted.
    Vanished,
    /// The object was overwritten with something unreadable.
    Overwritten,
}

impl LostReason {
    /// `record` is at the key now, written by someone else.
    pub(crate) fn taken_by(record: &LeaseRecord) -> LostReason {
        LostReason::TakenBy {
            holder: record.holder.clone(),
            token: record.token,
            released: record.released,
        }
    }
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::Expired => write!(f, "the lease expired"),
            // A simple client's record may name no holder, nor a break's
            // that had to clear the names.
            LostReason::TakenBy {
                holder,
                token,
                released,
            } => {
                let how = if *released {
                    "released as"
                } else {
                    "now held by"
                };
                if holder.is_empty() {
                    write!(f, "{how} no named holder (token {token})")
                } else {
                    write!(f, "{how} {holder:?} (token {token})")
                }
            }
            LostReason::Vanished => write!(f, "the lease object was deleted"),
            LostReason::Overwritten => write!(f, "the lease object was overwritten"),
        }
    }
}

/// What an acquire ([`LeaseOp<Acquire>`](crate::protocol::lease::LeaseOp)) finished with.
///
/// Exhaustive on purpose: a new outcome must fail to compile where
/// outcomes are matched, not fall into a catch-all.
// Returned once per operation: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum AcquireOutcome {
    /// The lease is ours.
    Acquired(Lease),
    /// Another holder's lease is live. No write was spent.
    Busy(Busy),
}

/// What a renewal ([`LeaseOp<Renew>`](crate::protocol::lease::LeaseOp)) finished with.
///
/// Exhaustive on purpose: a new outcome must fail to compile where
/// outcomes are matched, not fall into a catch-all.
// Returned once per operation: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum RenewOutcome {
    /// Extended: the new lease, with a later deadline.
    Renewed(Lease),
    /// Gone: stop the work it guarded.
    Lost(LostReason),
}

/// What a release ([`LeaseOp<Release>`](crate::protocol::lease::LeaseOp)) finished with.
///
/// Exhaustive on purpose: a new outcome must fail to compile where
/// outcomes are matched, not fall into a catch-all.
#[derive(Clone, Debug, PartialEq)]
pub enum ReleaseOutcome {
    /// Given back. No record of ours is live, and none can become live
    /// later. Also the answer when the release was sent while the lease
    /// was valid, got no clear reply, and another holder has it now: the
    /// release may be what freed it.
    Released {
        /// The token that was released.
        token: u64,
    },
    /// We had already lost it (reported, not an error). Nothing this
    /// release sent changed the store.
    AlreadyLost(LostReason),
    /// Its reply lost (or a 5xx), and another holder has the lease now:
    /// the store cannot tell whether this release is what freed the lease
    /// or the lease had expired before it landed. A release sent at or
    /// after the lease's local deadline says so; one sent before it, that
    /// recorded a completed tick, says so when the holder now is a simple
    /// client, whose record carries no ticks to tell by. Either way no
    /// record of ours is live and none can become live later, and the
    /// work under the lease had stopped when the release was sent.
    Unknown {
        /// The token that was being released.
        token: u64,
        /// Who holds the lease now.
        now: LostReason,
    },
}

/// What a break ([`LeaseOp<Break>`](crate::protocol::lease::LeaseOp)) finished with:
/// the record is now released, and the next acquirer gets `token + 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakOutcome {
    /// The token kept in the released record.
    pub token: u64,
}

/// Terminal failures: each says what to fix. Retryable conditions never
/// appear here unless the retry budget ran out ([`LeaseError::GaveUp`]).
///
/// Every variant carries `unsettled`: the writes of ours whose outcome is
/// unknown (this operation's, or earlier attempts' it was handed, one
/// claim per session), so that an error can never drop one. A record of
/// ours may be live until each claim's `live_until`; pass them to the next
/// acquire
/// ([`LeaseOp::with_claims`](crate::protocol::lease::LeaseOp::with_claims)).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LeaseError {
    /// The settings are unusable.
    Config {
        /// What is wrong with them.
        error: ConfigError,
        /// Writes of ours whose outcome is unknown ([`LeaseError::unsettled`]).
        unsettled: Box<[Claim]>,
    },
    /// 401/403: credentials, signature or permissions.
    Denied {
        /// Store error code.
        code: Option<String>,
        /// Store message.
        message: Option<String>,
        /// Writes of ours whose outcome is unknown ([`LeaseError::unsettled`]).
        unsettled: Box<[Claim]>,
    },
    /// The bucket does not exist.
    NoSuchBucket {
        /// Writes of ours whose outcome is unknown ([`LeaseError::unsettled`]).
        unsettled: Box<[Claim]>,
    },
    /// The store rejected the conditional request: it cannot host leases.
    Unsupported {
        /// HTTP status.
        status: u16,
        /// Store error code.
        code: Option<String>,
        /// Writes of ours whose outcome is unknown ([`LeaseError::unsettled`]).
        unsettled: Box<[Claim]>,
    },
    /// The lease object exists but is not a record we can read. It is never
    /// overwritten unless an operator breaks it with a token floor.
    Unreadable {
        /// Its etag (pass it to break).
        etag: Etag,
        /// Why it could not be read.
        error: RecordError,
        /// Writes of ours whose outcome is unknown ([`LeaseError::unsettled`]).
        unsettled: Box<[Claim]>,
    },
    /// The store answered something the protocol has no meaning for.
    Unexpected {
        /// What it answered.
        reply: String,
        /// Writes of ours whose outcome is unknown ([`LeaseError::unsettled`]).
        unsettled: Box<[Claim]>,
    },
    /// Retries or the operation's time (`op_timeout`) ran out; `last` says
    /// what the store answered last.
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// Last reply, summarised.
        last: String,
        /// Writes of ours whose outcome is unknown ([`LeaseError::unsettled`]).
        unsettled: Box<[Claim]>,
    },
    /// The acquisition landed, but its confirmation came after the lease's
    /// local deadline (replies lost, the store slow or throttling): it was
    /// never usable. The record was given back when `released`; otherwise
    /// it expires on its own. Nothing may run on it.
    WonTooLate {
        /// The token of the record won.
        token: u64,
        /// Whether the record was given back.
        released: bool,
        /// When it was not: the record, for the next operation to treat as
        /// ours ([`LeaseOp::with_claims`](crate::protocol::lease::LeaseOp::with_claims));
        /// or an earlier write of unknown outcome.
        unsettled: Box<[Claim]>,
    },
    /// The key is in use by another protocol (a rolling deploy changed
    /// `LEASE_PROTOCOL`, or two services disagree): leasing it under ours
    /// would give two holders.
    ProtocolMismatch {
        /// The lease key.
        key: String,
        /// The protocol this client runs.
        ours: crate::config::Protocol,
        /// The protocol the key's records were written by.
        theirs: String,
        /// A create of ours that landed before the other protocol was
        /// seen: given back, but should that have failed it is live until
        /// it expires (pass it on with `LeaseOp::with_claims`); or another
        /// write of unknown outcome.
        unsettled: Box<[Claim]>,
    },
    /// The capability probe found the store unsafe for the protocol: it
    /// failed the named check ([`protocol::probe`](crate::protocol#the-capability-probe)).
    UnsafeStore {
        /// The protocol refused.
        protocol: crate::config::Protocol,
        /// The failed check's name.
        check: &'static str,
        /// What the store answered.
        detail: String,
        /// Writes of ours whose outcome is unknown ([`LeaseError::unsettled`]).
        unsettled: Box<[Claim]>,
    },
    /// Break: the object is not the version the operator saw.
    Changed {
        /// Its current etag (`None`: no object).
        current: Option<Etag>,
        /// Writes of ours whose outcome is unknown ([`LeaseError::unsettled`]).
        unsettled: Box<[Claim]>,
    },
}

/// The `unsettled` slot of a [`LeaseError`] (every variant has one), by
/// reference or by mutable reference as `$e` is.
macro_rules! slot {
    ($e:expr) => {
        match $e {
            LeaseError::Config { unsettled, .. }
            | LeaseError::Denied { unsettled, .. }
            | LeaseError::NoSuchBucket { unsettled }
            | LeaseError::Unsupported { unsettled, .. }
            | LeaseError::Unreadable { unsettled, .. }
            | LeaseError::Unexpected { unsettled, .. }
            | LeaseError::GaveUp { unsettled, .. }
            | LeaseError::WonTooLate { unsettled, .. }
            | LeaseError::ProtocolMismatch { unsettled, .. }
            | LeaseError::UnsafeStore { unsettled, .. }
            | LeaseError::Changed { unsettled, .. } => unsettled,
        }
    };
}

impl LeaseError {
    /// A reply the operation does not expect at that step.
    pub(crate) fn unexpected(reply: &ReplyKind) -> LeaseError {
        LeaseError::Unexpected {
            reply: summarize(reply),
            unsettled: Box::default(),
        }
    }

    /// The records of ours this error leaves live, or perhaps live, on the
    /// store (writes of unknown outcome, this operation's or a wait's
    /// earlier attempts'; [`WonTooLate`](LeaseError::WonTooLate) not given
    /// back), one per session: pass them to the next operation with
    /// [`LeaseOp::with_claims`](crate::protocol::lease::LeaseOp::with_claims) so that
    /// it is not kept out by its own record. Empty when none is open.
    pub fn unsettled(&self) -> &[Claim] {
        slot!(self)
    }

    /// Attaches `claim` (every variant has room for any number: none is
    /// dropped; a claim of a session already named extends its time).
    pub(crate) fn hand_on(&mut self, claim: Claim) {
        let slot = slot!(self);
        let mut all = std::mem::take(slot).into_vec();
        hand_on(&mut all, claim);
        *slot = all.into_boxed_slice();
    }

    /// The bucket does not exist (no write left open).
    pub fn no_such_bucket() -> LeaseError {
        LeaseError::NoSuchBucket {
            unsettled: Box::default(),
        }
    }
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.describe(f)?;
        match self.unsettled() {
            [] => Ok(()),
            [c] => write!(
                f,
                "; a write's outcome is unknown: a record of session {} (token {}) may be live until it \
                 expires",
                c.acquisition, c.token
            ),
            all => {
                f.write_str("; writes' outcomes are unknown: a record of session ")?;
                for (i, c) in all.iter().enumerate() {
                    let or = if i == 0 { "" } else { " or " };
                    write!(f, "{or}{} (token {})", c.acquisition, c.token)?;
                }
                f.write_str(" may be live until it expires")
            }
        }
    }
}

impl LeaseError {
    /// What went wrong, without the unsettled write.
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::Config { error, .. } => write!(f, "invalid lease settings: {error}"),
            LeaseError::Denied { code, message, .. } => write!(
                f,
                "store denied the request ({}{}): check the credentials, the clock used for signing and the \
                 policy on the lease key",
                code.as_deref().unwrap_or("no code"),
                message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
            ),
            LeaseError::NoSuchBucket { .. } => f.write_str("the bucket does not exist: check the bucket name and region"),
            LeaseError::Unsupported { status, code, .. } => write!(
                f,
                "the store rejected a conditional write (HTTP {status}, {}): it cannot host leases safely",
                code.as_deref().unwrap_or("no code")
            ),
            LeaseError::Unreadable { etag, error, .. } => write!(
                f,
                "the lease object (etag {etag}) is not a lease record: {error}; fix or break it (with a token floor)"
            ),
            LeaseError::Unexpected { reply, .. } => write!(f, "unexpected store reply: {reply}"),
            LeaseError::GaveUp { attempts, last, .. } => {
                write!(f, "gave up after {attempts} attempts; last reply: {last}")
            }
            LeaseError::WonTooLate {
                token, released, ..
            } => write!(
                f,
                "the lease (token {token}) was confirmed only after its local deadline, so it was never usable; {}",
                if *released { "it was given back" } else { "it expires on its own" }
            ),
            LeaseError::ProtocolMismatch {
                key, ours, theirs, ..
            } => write!(
                f,
                "the lease key {key:?} is in use by protocol `{theirs}`, and this client runs `{ours}`: two \
                 protocols on one key would give two holders; configure the same protocol everywhere (or let \
                 the other's records expire and delete them to switch)"
            ),
            LeaseError::UnsafeStore {
                protocol, check, detail, ..
            } => write!(
                f,
                "refusing to lease with protocol `{protocol}`: the store failed the capability check `{check}` \
                 ({detail}); it would not keep two holders apart"
            ),
            LeaseError::Changed {
                current: Some(e), ..
            } => {
                write!(f, "the lease object changed (now etag {e}): inspect it again before breaking")
            }
            LeaseError::Changed { current: None, .. } => f.write_str("the lease object no longer exists"),
        }
    }
}

impl std::error::Error for LeaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LeaseError::Config { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl From<ConfigError> for LeaseError {
    fn from(error: ConfigError) -> Self {
        LeaseError::Config {
            error,
            unsettled: Box::default(),
        }
    }
}

/// The current leader as a node observed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// Holder name.
    pub holder: String,
    /// Fencing token.
    pub token: u64,
    /// Store time of expiry.
    pub expires_at: UnixMillis,
}

/// Things an [`Elector`](crate::protocol::elector::Elector) reports as they happen.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// This node became leader.
    Acquired {
        /// Fencing token.
        token: u64,
        /// Local deadline.
        valid_until: Mono,
    },
    /// A renewal was confirmed.
    Renewed {
        /// Fencing token.
        token: u64,
        /// New local deadline.
        valid_until: Mono,
    },
    /// Less than one renew interval of validity is left and the renewal is
    /// not confirmed yet: finish or pause work that needs the lease.
    AtRisk {
        /// Fencing token.
        token: u64,
        /// Local deadline.
        valid_until: Mono,
    },
    /// This node is no longer leader: stop acting now.
    Lost {
        /// Fencing token that was lost.
        token: u64,
        /// Why.
        reason: LostReason,
    },
    /// A planned handoff: this node no longer leads, and gives the lease
    /// back for `to` (its release follows).
    HandingOver {
        /// Fencing token of the term handed over.
        token: u64,
        /// The successor named.
        to: String,
    },
    /// This node gave the lease back.
    Released {
        /// Fencing token released.
        token: u64,
    },
    /// The observed leader changed (`None`: nobody holds it).
    LeaderChanged(Option<Leader>),
    /// An attempt failed with a terminal error; the elector tries again at
    /// its next poll.
    Error(LeaseError),
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Acquired { token, .. } => write!(f, "acquired, token {token}"),
            Event::Renewed { token, .. } => write!(f, "renewed, token {token}"),
            Event::AtRisk { token, .. } => write!(f, "at risk, token {token}"),
            Event::Lost { token, reason } => write!(f, "lost token {token}: {reason}"),
            Event::Released { token } => write!(f, "released token {token}"),
            Event::HandingOver { token, to } => write!(f, "handing token {token} over to {to}"),
            Event::LeaderChanged(Some(l)) => {
                write!(f, "sees leader {} (token {})", l.holder, l.token)
            }
            Event::LeaderChanged(None) => f.write_str("sees no leader"),
            Event::Error(e) => write!(f, "error: {e}"),
        }
    }
}

/// What to do when breaking a lease (operator force-unlock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakRequest {
    /// The etag the operator saw; the break applies only to that version.
    pub etag: Etag,
    /// Only for an unreadable object: the token to write into the released
    /// record, so the next acquirer continues above it.
    pub token_floor: Option<u64>,
}

/// A one-line description of a reply, for errors and timelines.
pub fn summarize(kind: &ReplyKind) -> String {
    match kind {
        ReplyKind::Found { etag, body } => format!("found etag {etag} ({} bytes)", body.len()),
        ReplyKind::Written { etag: Some(e) } => format!("written etag {e}"),
        ReplyKind::ServerError { status, code } | ReplyKind::Unsupported { status, code } => {
            format!("{} {status} {}", kind.name(), code.as_deref().unwrap_or(""))
        }
        ReplyKind::Unexpected {
            status,
            code,
            message,
        } => format!(
            "HTTP {status} {} {}",
            code.as_deref().unwrap_or(""),
            message.as_deref().unwrap_or("")
        ),
        ReplyKind::Denied { code, .. } => format!("denied {}", code.as_deref().unwrap_or("")),
        ReplyKind::Throttled {
            retry_after: Some(d),
        } => format!("throttled (retry after {:?})", crate::time::Dur(*d)),
        ReplyKind::Transport { kind: k, message } => format!("transport {k:?}: {message}"),
        ReplyKind::Invalid { reason } => format!("invalid request: {reason}"),
        other => other.name().to_string(),
    }
    .trim_end()
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_reasons_read_as_sentences() {
        let taken = |released| LostReason::TakenBy {
            holder: "node-2".into(),
            token: 7,
            released,
        };
        assert_eq!(LostReason::Expired.to_string(), "the lease expired");
        assert_eq!(taken(false).to_string(), "now held by \"node-2\" (token 7)");
        assert_eq!(taken(true).to_string(), "released as \"node-2\" (token 7)");
        let broken = LostReason::TakenBy {
            holder: String::new(),
            token: 8,
            released: true,
        };
        assert_eq!(broken.to_string(), "released as no named holder (token 8)");
        let simple = LostReason::TakenBy {
            holder: String::new(),
            token: 0,
            released: false,
        };
        assert_eq!(simple.to_string(), "now held by no named holder (token 0)");
        assert_eq!(
            LostReason::Vanished.to_string(),
            "the lease object was deleted"
        );
        assert_eq!(
            LostReason::Overwritten.to_string(),
            "the lease object was overwritten"
        );
    }
}
