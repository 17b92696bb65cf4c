//! The lease object: one small JSON document per lease key.
//!
//! The format is a superset of the widely used single-object lease
//! `{"expires_at": <float seconds since the UNIX epoch>, "token": <int>}`:
//! those two fields keep their meaning, so a client that knows only them
//! interoperates (it sees who may act until when, and the fencing token).
//! Our fields add who holds it and enough identity to resolve lost replies:
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `v` | int | format major version ([`FORMAT_VERSION`]): 1, or 2 for a key owned under a session; absent means 1 |
//! | `token` | int | fencing token: strictly increases with every acquisition (absent in some simple clients' records: read as 0) |
//! | `expires_at` | float s | store time after which contenders may take over |
//! | `holder` | string | who holds it, for humans |
//! | `session` | string | unique per acquisition; kept by renewals |
//! | `nonce` | string | unique per write: tells a writer its own write landed |
//! | `acquired_at` | float s | store time of the acquisition |
//! | `ttl_ms` | int | the holder's ttl |
//! | `released` | bool | given back: free to take at once |
//! | `released_at` | float s | store time of the release, as its writer reckons it (fair waiting's courtesy counts from it) |
//! | `meta` | object of strings | small caller data (at most [`MAX_META_ENTRIES`]) |
//! | `protocol` | string | the protocol that wrote it: `cas`, `epochs` or `mutex` |
//! | `strays` | bool | (mutex) an earlier create of this acquisition may still land, until `expires_at` |
//! | `owned_by` | object | a key owned under a session: `key`, the session's lease key, and `token`, its term's; held while that term is, whatever `expires_at` says (`docs/protocols.md`, "Sessions") |
//! | `runs` | list | a scheduled job's last completed ticks: `tick`, `token`, `finished_at` (float s), `result`, `payload` digest, `scheduled_at` (float s, when the tick was due) ([`crate::tick`]) |
//!
//! `protocol` keeps two protocols off one key: a client configured for one
//! refuses a key another protocol's record is using (see
//! [`LeaseError::ProtocolMismatch`](crate::protocol::outcome::LeaseError::ProtocolMismatch)).
//! A record without it (a simple client's, or one written before the field
//! existed) counts as the reader's own protocol for cas and the mutex; an
//! epochs client refuses any such object at the lease key, which is where
//! its marker goes (a simple client's lease can be taken over by cas
//! only).
//!
//! A record with none of the fields our clients always write (`session`,
//! `nonce`, `protocol`) is a simple client's ([`LeaseRecord::is_foreign`]):
//! shown as held by an unnamed holder, busy until its `expires_at` by the
//! store's clock, then taken over with `If-Match` and a token no lower than
//! the store's time in milliseconds, above any token a counter or the mutex
//! can have handed out before (a simple client's own token, if it writes
//! one, may be anything).
//!
//! Two other tools' lock objects are recognised too
//! ([`LeaseRecord::foreign`], [`ForeignLock`]), so that a lease key where
//! one lives is busy, not unreadable, and `lease inspect` and `lease ls`
//! name their holder:
//!
//! - **Litestream**'s lease (`lock.json`: `{"generation": <int>,
//!   "expires_at": "<RFC 3339>", "owner": "<host:pid>"}`; earlier releases
//!   wrote `token` for `generation`): the owner is the holder, the
//!   generation the token, and it is busy until its `expires_at` by the
//!   store's clock, then taken over like a simple client's record.
//! - **Terraform's and OpenTofu's** state lock (`<state>.tflock`: `ID`,
//!   `Operation`, `Who`, `Version`, `Created`, `Path`, `Info`): `Who` is
//!   the holder, `Created` the acquisition; it has no expiry, so it is
//!   held until broken ([`LeaseRecord::held_until_broken`]: `terraform
//!   force-unlock`, or the object deleted), and never taken over.
//!
//! Decoding is strict and total: any byte string gives either a record or a
//! [`RecordError`] with a short excerpt, never a panic. Unknown fields are
//! ignored (a later minor version may add some); a higher major `v` is
//! refused, because its meaning cannot be known.

use crate::tick::{TickRun, MAX_RUNS};
use crate::time::{StoreDate, UnixMillis, MAX_TIME_MS};
use core::fmt;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The format major version this crate understands. It writes 1, and 2
/// for a key owned under a session (`owned_by`): a client that knows only
/// version 1 would judge such a key by its own `expires_at` and take it
/// while its session lives, so it must refuse the record instead (an
/// unreadable record is never taken over).
pub const FORMAT_VERSION: u64 = 2;
/// Largest body accepted or produced, in bytes.
pub const MAX_RECORD_BYTES: usize = 8 * 1024;
/// Most `meta` entries allowed in a record. A configuration may give one
/// fewer (a lease configuration's `meta`): the
/// library adds one of its own to some records ([`BROKEN_BY`] to a
/// broken one, `handoff_to` to a handoff's), and every record it writes
/// must stay readable.
pub const MAX_META_ENTRIES: usize = 16;
/// The `meta` entry an operator's break adds to the released record it
/// leaves: the operator's holder name.
pub const BROKEN_BY: &str = "broken_by";
/// The `meta` entry a holder's record carries while it hands the lease to
/// the holder it names, and in its release.
pub const HANDOFF_TO: &str = "handoff_to";
/// The `meta` names the library writes itself ([`BROKEN_BY`],
/// [`HANDOFF_TO`]), which no configuration may give.
pub const RESERVED_META: [&str; 2] = [BROKEN_BY, HANDOFF_TO];
/// What a record spends at most on all but its caller's part
/// ([`CALLER_BYTES`]): the fixed fields, the session and nonce ids, one
/// `meta` entry of the library's own naming a holder (a break's, a
/// handoff's) and one completed tick, each string at its longest and
/// escaped at its worst. Checked against the encoder in this module's
/// tests.
pub const LIBRARY_BYTES: usize = 5_376;
/// What a configuration's holder name, `meta` and the key of the session
/// that owns its key take of a record at most, as JSON (quotes and
/// escapes counted): the rest of [`MAX_RECORD_BYTES`] after
/// [`LIBRARY_BYTES`], so that every record written stays readable with at
/// least its newest completed tick (results kept as digests, then older
/// ticks left out, while a record would not fit:
/// [`LeaseRecord::encode_fitting`]).
pub const CALLER_BYTES: usize = MAX_RECORD_BYTES - LIBRARY_BYTES;

/// The length of `s` as a JSON string, quotes and escapes included (as
/// [`LeaseRecord::encode`] writes it).
fn json_len(s: &str) -> usize {
    let escaped = |b: u8| match b {
        b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
        0..=0x1f => 6,
        _ => 1,
    };
    2 + s.bytes().map(escaped).sum::<usize>()
}

/// The caller's part of a record (see [`CALLER_BYTES`]): `holder`, `meta`
/// and the owning session's key, as JSON.
pub(crate) fn caller_bytes(
    holder: &str,
    meta: &BTreeMap<String, String>,
    owned_by: Option<&str>,
) -> usize {
    // Each entry `"k":"v",`.
    let entries = meta.iter().map(|(k, v)| json_len(k) + json_len(v) + 2);
    json_len(holder) + entries.sum::<usize>() + owned_by.map_or(0, json_len)
}
/// Longest string allowed in `holder`, `session`, `nonce` and `meta`.
pub const MAX_STRING_BYTES: usize = 512;
const EXCERPT_CHARS: usize = 80;

/// A decoded lease record.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseRecord {
    /// Fencing token.
    pub token: u64,
    /// Store time after which the lease may be taken over.
    pub expires_at: UnixMillis,
    /// Human-readable holder name (empty when written by a simple client).
    pub holder: String,
    /// Unique per acquisition: the record's `session` field (empty when
    /// written by a simple client).
    pub acquisition: String,
    /// Unique per write (empty when written by a simple client).
    pub nonce: String,
    /// Store time of the acquisition, when recorded.
    pub acquired_at: Option<UnixMillis>,
    /// The holder's ttl in milliseconds, when recorded.
    pub ttl_ms: Option<u64>,
    /// The holder gave the lease back (or an operator broke it).
    pub released: bool,
    /// The store time of the release, as its writer reckons it (the
    /// latest store date it had seen, plus the local time since): fair
    /// waiting's courtesy counts from it ([`crate::protocol::wait::COURTESY`]).
    /// `expires_at` of a released record lies before any date a reader
    /// can see, for clients that know only it.
    pub released_at: Option<UnixMillis>,
    /// Small caller data.
    pub meta: BTreeMap<String, String>,
    /// The protocol that wrote it (`cas`, `epochs`, `mutex`), when recorded.
    pub protocol: Option<String>,
    /// A mutex lock whose acquisition sent an earlier create with no
    /// answer: that create may still land (a stray lock of this session)
    /// until this record's `expires_at`. A release made from another
    /// process, which cannot know, waits it out when this is set.
    pub strays: bool,
    /// The last completed ticks of a scheduled job (`crate::tick`), carried
    /// from record to record.
    pub runs: Vec<TickRun>,
    /// Another tool's lock read as a record ([`ForeignLock`]): its holder,
    /// token and expiry are in the fields above (a Terraform lock's
    /// expiry is [`HELD_UNTIL_BROKEN`]), what else it says in `meta`.
    /// `None` for our records and simple clients'. Never written:
    /// [`encode`](Self::encode) writes our format, and a record we write
    /// is ours.
    pub foreign: Option<ForeignLock>,
    /// A key owned under a session ([`OwnedBy`]): held while that session
    /// is, whatever this record's own `expires_at` says.
    pub owned_by: Option<OwnedBy>,
}

/// The session a key is owned under (`"owned_by": {"key": …, "token": …}`
/// in the record): the session lease's key and the token of the term the
/// key was taken in. The key is held exactly while that term is, by the
/// store's clock: until the session record at `key` is released, expired,
/// gone or at another token (`docs/protocols.md`, "Sessions").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedBy {
    /// The session lease's key.
    pub key: String,
    /// The session term's token.
    pub token: u64,
}

/// Another tool's lock object, recognised where a lease record is read
/// (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ForeignLock {
    /// Litestream's lease (`lock.json`): busy until its `expires_at`.
    Litestream,
    /// Terraform's or OpenTofu's state lock (`.tflock`): no expiry, held
    /// until broken.
    Terraform,
}

impl ForeignLock {
    /// The name in JSON and `lease ls` (`litestream`, `terraform`).
    pub fn name(self) -> &'static str {
        match self {
            ForeignLock::Litestream => "litestream",
            ForeignLock::Terraform => "terraform",
        }
    }

    /// What it is, for people.
    pub fn describe(self) -> &'static str {
        match self {
            ForeignLock::Litestream => "a Litestream lease (lock.json)",
            ForeignLock::Terraform => "a Terraform/OpenTofu state lock (.tflock)",
        }
    }
}

impl fmt::Display for ForeignLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The `expires_at` of a lock that never expires (Terraform's): later
/// than any time a record can state ([`MAX_TIME_MS`]), so no store date
/// passes it.
pub const HELD_UNTIL_BROKEN: UnixMillis = UnixMillis(MAX_TIME_MS);

/// Why a body is not a lease record we can use.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordErrorKind {
    /// Larger than [`MAX_RECORD_BYTES`].
    TooLarge {
        /// Body length.
        len: usize,
    },
    /// Not UTF-8.
    NotUtf8,
    /// Not JSON (the parser's message).
    Syntax(String),
    /// JSON, but not an object.
    NotAnObject,
    /// A required field is absent.
    Missing(&'static str),
    /// A field has the wrong JSON type.
    WrongType {
        /// Field name.
        field: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A field has a value outside its range.
    Invalid {
        /// Field name.
        field: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Written by a newer, incompatible format version.
    UnsupportedVersion(u64),
}

/// A body that could not be decoded, with a short excerpt of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    /// What is wrong.
    pub kind: RecordErrorKind,
    /// The first characters of the body (lossily decoded), for humans.
    pub excerpt: String,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            RecordErrorKind::TooLarge { len } => {
                write!(f, "lease record is {len} bytes, more than the {MAX_RECORD_BYTES} allowed")?
            }
            RecordErrorKind::NotUtf8 => f.write_str("lease record is not UTF-8")?,
            RecordErrorKind::Syntax(m) => write!(f, "lease record is not JSON: {m}")?,
            RecordErrorKind::NotAnObject => f.write_str("lease record is not a JSON object")?,
            RecordErrorKind::Missing(field) => write!(f, "lease record has no `{field}`")?,
            RecordErrorKind::WrongType { field, expected } => {
                write!(f, "lease record field `{field}` should be {expected}")?
            }
            RecordErrorKind::Invalid { field, reason } => {
                write!(f, "lease record field `{field}` is invalid: {reason}")?
            }
            RecordErrorKind::UnsupportedVersion(v) => write!(
                f,
                "lease record has format version {v}; this library understands up to {FORMAT_VERSION}"
            )?,
        }
        write!(f, " (body starts {:?})", self.excerpt)
    }
}

impl std::error::Error for RecordError {}

/// The first characters of `body`, for error messages.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(EXCERPT_CHARS * 4)]);
    let mut out: String = text.chars().take(EXCERPT_CHARS).collect();
    if text.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    out
}

impl LeaseRecord {
    /// Decodes a body. Total: never panics, whatever the bytes.
    pub fn decode(body: &[u8]) -> Result<LeaseRecord, RecordError> {
        let fail = |kind| RecordError {
            kind,
            excerpt: excerpt(body),
        };
        if body.len() > MAX_RECORD_BYTES {
            return Err(fail(RecordErrorKind::TooLarge { len: body.len() }));
        }
        let text = core::str::from_utf8(body).map_err(|_| fail(RecordErrorKind::NotUtf8))?;
        let value: Value =
            serde_json::from_str(text).map_err(|e| fail(RecordErrorKind::Syntax(e.to_string())))?;
        let Value::Object(obj) = value else {
            return Err(fail(RecordErrorKind::NotAnObject));
        };
        // Not ours (a string `expires_at`, or none): perhaps another
        // tool's lock; if not, the error says why it is not ours.
        Self::from_object(&obj)
            .or_else(|kind| foreign_lock(&obj).ok_or(kind))
            .map_err(fail)
    }

    fn from_object(obj: &Map<String, Value>) -> Result<LeaseRecord, RecordErrorKind> {
        let v = opt_u64(obj, "v")?.unwrap_or(1);
        if v == 0 {
            return Err(invalid("v", "format versions start at 1"));
        }
        if v > FORMAT_VERSION {
            return Err(RecordErrorKind::UnsupportedVersion(v));
        }
        // A simple client may write no token: read as 0 (see `is_foreign`).
        let token = opt_u64(obj, "token")?.unwrap_or(0);
        let expires_at =
            opt_secs(obj, "expires_at")?.ok_or(RecordErrorKind::Missing("expires_at"))?;
        let meta = match obj.get("meta") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(Value::Object(m)) => {
                if m.len() > MAX_META_ENTRIES {
                    return Err(invalid("meta", "too many entries"));
                }
                let mut meta = BTreeMap::new();
                for (k, v) in m {
                    let Value::String(s) = v else {
                        return Err(RecordErrorKind::WrongType {
                            field: format!("meta.{}", excerpt(k.as_bytes())),
                            expected: "a string",
                        });
                    };
                    check_len("meta", k)?;
                    check_len("meta", s)?;
                    meta.insert(k.clone(), s.clone());
                }
                meta
            }
            Some(_) => return Err(wrong("meta", "an object of strings")),
        };
        Ok(LeaseRecord {
            token,
            expires_at,
            holder: opt_string(obj, "holder")?,
            acquisition: opt_string(obj, "session")?,
            nonce: opt_string(obj, "nonce")?,
            acquired_at: opt_secs(obj, "acquired_at")?,
            ttl_ms: opt_u64(obj, "ttl_ms")?,
            released: match obj.get("released") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(wrong("released", "a boolean")),
            },
            released_at: opt_secs(obj, "released_at")?,
            meta,
            protocol: Some(opt_string(obj, "protocol")?).filter(|p| !p.is_empty()),
            strays: match obj.get("strays") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(wrong("strays", "a boolean")),
            },
            runs: parse_runs(obj.get("runs"))?,
            foreign: None,
            owned_by: parse_owned_by(obj.get("owned_by"))?,
        })
    }

    /// The body to write: [`encode`](Self::encode)d, made to fit
    /// [`MAX_RECORD_BYTES`] (a larger record no client could read) while
    /// it would not, in `self` too: first the completed ticks' results are
    /// kept as their digests, oldest first (as a result too long to keep
    /// is), then the oldest ticks are left out. A record of a valid
    /// configuration keeps at least its newest tick ([`CALLER_BYTES`]).
    pub fn encode_fitting(&mut self) -> Vec<u8> {
        if mutant!(RecordNotFitted) {
            return self.encode();
        }
        let mut digested = 0;
        loop {
            let body = self.encode();
            if body.len() <= MAX_RECORD_BYTES || self.runs.is_empty() {
                return body;
            }
            if digested == self.runs.len() && mutant!(OldTicksKept) {
                return body;
            }
            match self.runs.get_mut(digested) {
                Some(run) => {
                    // Not one already as short as a digest (a digest).
                    if let Some(result) = run.result.as_mut().filter(|r| json_len(r) > 26) {
                        *result = crate::tick::digest(result.as_bytes());
                    }
                    digested += 1;
                }
                None => {
                    self.runs.remove(0);
                }
            }
        }
    }

    /// Encodes to the canonical JSON body (fields in a fixed order).
    pub fn encode(&self) -> Vec<u8> {
        let mut obj = Map::new();
        let v: u64 = if self.owned_by.is_some() { 2 } else { 1 };
        obj.insert("v".into(), v.into());
        obj.insert("token".into(), self.token.into());
        obj.insert("expires_at".into(), secs_value(self.expires_at));
        obj.insert("holder".into(), self.holder.clone().into());
        obj.insert("session".into(), self.acquisition.clone().into());
        obj.insert("nonce".into(), self.nonce.clone().into());
        if let Some(at) = self.acquired_at {
            obj.insert("acquired_at".into(), secs_value(at));
        }
        if let Some(ttl) = self.ttl_ms {
            obj.insert("ttl_ms".into(), ttl.into());
        }
        obj.insert("released".into(), self.released.into());
        if let Some(at) = self.released_at {
            obj.insert("released_at".into(), secs_value(at));
        }
        if !self.meta.is_empty() {
            // Inserted one by one: `collect` into a map links a stable sort
            // (about 3 KB of wasm) to order what is already in order.
            let mut meta = Map::new();
            for (k, v) in &self.meta {
                meta.insert(k.clone(), Value::String(v.clone()));
            }
            obj.insert("meta".into(), Value::Object(meta));
        }
        if let Some(protocol) = &self.protocol {
            obj.insert("protocol".into(), protocol.clone().into());
        }
        if self.strays {
            obj.insert("strays".into(), true.into());
        }
        if !self.runs.is_empty() {
            obj.insert("runs".into(), runs_value(&self.runs));
        }
        if let Some(owned) = &self.owned_by {
            let mut by = Map::new();
            by.insert("key".into(), owned.key.clone().into());
            by.insert("token".into(), owned.token.into());
            obj.insert("owned_by".into(), Value::Object(by));
        }
        // Serialising a map of plain values cannot fail.
        serde_json::to_vec(&Value::Object(obj)).unwrap_or_default()
    }

    /// Whether a contender that read this record with a reply dated `read_at`
    /// (the earliest the store's time may have been) may take it over:
    /// released, or expired by the store's own clock; never a lock held
    /// until broken.
    pub fn is_free_at(&self, read_at_earliest: UnixMillis) -> bool {
        if mutant!(ForeignRecordsFree) && self.is_foreign() {
            return true;
        }
        !self.held_until_broken() && (self.released || read_at_earliest > self.expires_at)
    }

    /// Whether this is a lock with no expiry (Terraform's): busy until an
    /// operator breaks it or its tool deletes it.
    pub fn held_until_broken(&self) -> bool {
        self.foreign == Some(ForeignLock::Terraform)
    }
}

/// `owned_by`: absent, or an object with a session key (not empty) and a
/// token.
fn parse_owned_by(value: Option<&Value>) -> Result<Option<OwnedBy>, RecordErrorKind> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(by)) => {
            let key = opt_string(by, "key")?;
            if key.is_empty() {
                return Err(invalid("owned_by.key", "empty"));
            }
            let token = opt_u64(by, "token")?.ok_or(RecordErrorKind::Missing("owned_by.token"))?;
            Ok(Some(OwnedBy { key, token }))
        }
        Some(_) => Err(wrong("owned_by", "an object with a key and a token")),
    }
}

/// Checks a caller-supplied string against the record's limits.
pub(crate) fn check_len(field: &'static str, s: &str) -> Result<(), RecordErrorKind> {
    if s.len() > MAX_STRING_BYTES {
        return Err(invalid(field, "longer than 512 bytes"));
    }
    Ok(())
}

fn invalid(field: &str, reason: &'static str) -> RecordErrorKind {
    RecordErrorKind::Invalid {
        field: field.to_string(),
        reason,
    }
}

fn wrong(field: &str, expected: &'static str) -> RecordErrorKind {
    RecordErrorKind::WrongType {
        field: field.to_string(),
        expected,
    }
}

fn opt_u64(obj: &Map<String, Value>, field: &'static str) -> Result<Option<u64>, RecordErrorKind> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(x) => Ok(Some(x)),
            None => Err(invalid(field, "not a non-negative integer")),
        },
        Some(_) => Err(wrong(field, "an integer")),
    }
}

fn opt_secs(
    obj: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<UnixMillis>, RecordErrorKind> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            // Up to year ~2286 in ms fits easily; beyond 1e13 s is nonsense.
            Some(x) if x.is_finite() && (0.0..(MAX_TIME_MS / 1000) as f64).contains(&x) => {
                Ok(Some(UnixMillis::from_secs_f64(x)))
            }
            _ => Err(invalid(field, "not seconds since the UNIX epoch")),
        },
        Some(_) => Err(wrong(field, "a number of seconds")),
    }
}

fn opt_string(obj: &Map<String, Value>, field: &'static str) -> Result<String, RecordErrorKind> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => {
            check_len(field, s)?;
            Ok(s.clone())
        }
        Some(_) => Err(wrong(field, "a string")),
    }
}

/// `s` cut to [`MAX_STRING_BYTES`] at a character boundary: another
/// tool's strings are shown, not refused, when long.
fn clip(s: &str) -> String {
    let mut end = s.len().min(MAX_STRING_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Another tool's lock object (see the module docs), strictly: every
/// field it names has its type, and a body with a field only our records
/// carry is not one.
fn foreign_lock(obj: &Map<String, Value>) -> Option<LeaseRecord> {
    if ["v", "session", "nonce", "protocol", "holder"]
        .iter()
        .any(|f| obj.contains_key(*f))
    {
        return None;
    }
    // `None`: the wrong type; `Some(None)`: absent.
    let text = |field: &str| match obj.get(field) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) => Some(Some(s.as_str())),
        Some(_) => None,
    };
    let number = |field: &str| match obj.get(field) {
        None | Some(Value::Null) => Some(None),
        Some(Value::Number(n)) => n.as_u64().map(Some),
        Some(_) => None,
    };
    let mut record = LeaseRecord {
        token: 0,
        expires_at: UnixMillis(0),
        holder: String::new(),
        acquisition: String::new(),
        nonce: String::new(),
        acquired_at: None,
        ttl_ms: None,
        released: false,
        released_at: None,
        meta: BTreeMap::new(),
        protocol: None,
        strays: false,
        runs: Vec::new(),
        foreign: None,
        owned_by: None,
    };
    if let Some(Value::String(expires_at)) = obj.get("expires_at") {
        record.expires_at = UnixMillis::from_rfc3339(expires_at)?;
        record.token = number("generation")?.or(number("token")?).unwrap_or(0);
        record.holder = clip(text("owner")?.unwrap_or_default());
        record.foreign = Some(ForeignLock::Litestream);
        return Some(record);
    }
    // Terraform writes every field; `ID` and `Operation` say it is its lock.
    let (Some(id), Some(_)) = (text("ID")?, text("Operation")?) else {
        return None;
    };
    if id.is_empty() || obj.contains_key("expires_at") {
        return None;
    }
    record.acquired_at = match text("Created")? {
        None | Some("") => None,
        Some(at) => Some(UnixMillis::from_rfc3339(at)?),
    };
    record.holder = clip(text("Who")?.unwrap_or_default());
    for (field, name) in [
        ("ID", "id"),
        ("Operation", "operation"),
        ("Version", "version"),
        ("Path", "path"),
        ("Info", "info"),
    ] {
        if let Some(value) = text(field)?.filter(|v| !v.is_empty()) {
            record.meta.insert(name.to_string(), clip(value));
        }
    }
    record.expires_at = HELD_UNTIL_BROKEN;
    record.foreign = Some(ForeignLock::Terraform);
    Some(record)
}

fn secs_value(t: UnixMillis) -> Value {
    // Whole milliseconds are exact in f64 for any realistic date.
    serde_json::Number::from_f64(t.as_secs_f64())
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// The body of the epochs protocol's marker: the object an epochs client
/// creates at the lease key itself (`If-None-Match: *`) before its first
/// epoch, and never deletes. It makes the key's protocol visible where the
/// single-object protocols already look: a cas or mutex client's GET, or
/// its refused create, finds a record whose `protocol` is `epochs` and
/// refuses the key ([`LeaseError::ProtocolMismatch`](crate::protocol::outcome::LeaseError::ProtocolMismatch)),
/// with no request of its own for the check. An epochs client knows the
/// marker in its own LIST by its size ([`EPOCHS_MARKER_LEN`]) without
/// reading it: no record our clients write is that short (they carry a
/// session, a nonce, `acquired_at` and `ttl_ms`). A record of a released,
/// expired lease with token 0, so a reader of the simple format sees no
/// live lease in it. `docs/design.md` §7.
pub const EPOCHS_MARKER: &[u8] = br#"{"v":1,"token":0,"expires_at":0,"holder":"","session":"","nonce":"","released":true,"protocol":"epochs"}"#;

/// The length of [`EPOCHS_MARKER`]: a listed object of this size at the
/// lease key is taken for it.
pub const EPOCHS_MARKER_LEN: u64 = EPOCHS_MARKER.len() as u64;

impl LeaseRecord {
    /// Whether a client of the simple format wrote this: none of the
    /// fields our clients always write (`session`, `nonce`, `protocol`).
    pub fn is_foreign(&self) -> bool {
        self.acquisition.is_empty() && self.nonce.is_empty() && self.protocol.is_none()
    }

    /// The token of an acquisition that takes over this record, read with
    /// a reply dated `date` (`at_least`: one more than the highest token
    /// seen): a simple client's record may carry any token or none, so the
    /// next one is also no lower than the latest the store's time may have
    /// been at that read, in milliseconds ([`StoreDate::latest`]: a `Date`
    /// of whole seconds, plus one second). The takeover's write waits until
    /// the store's clock is past that ([`foreign_floor_passed_after`](Self::foreign_floor_passed_after)),
    /// so a later takeover, which reads after it, draws a greater one:
    /// tokens handed out this way only grow, however fine the `Date`,
    /// provided simple clients' own tokens stay below the store's time in
    /// milliseconds (a greater one is carried on, and a later simple
    /// client's record may drop it).
    pub fn next_token(&self, at_least: u64, date: StoreDate) -> u64 {
        if self.is_foreign() {
            at_least.max(date.latest().0)
        } else {
            at_least
        }
    }

    /// How long after the send of the read dated `date` the store's clock
    /// is past [`next_token`](Self::next_token)'s floor, by a clock that
    /// drifts up to `drift_rate`, with `margin` to spare (front ends'
    /// clocks differ a little): a takeover of a simple client's record
    /// sends its write no sooner. Zero for our own records.
    pub fn foreign_floor_passed_after(
        &self,
        date: StoreDate,
        drift_rate: f64,
        margin: core::time::Duration,
    ) -> core::time::Duration {
        if !self.is_foreign() {
            return core::time::Duration::ZERO;
        }
        let spread = (date.behind_ms + date.ahead_ms) as f64 / 1000.0;
        core::time::Duration::from_secs_f64(spread / (1.0 - drift_rate).max(0.5)) + margin
    }

    /// Whether this is the epochs protocol's marker ([`EPOCHS_MARKER`]).
    pub fn is_epochs_marker(&self) -> bool {
        self.protocol.as_deref() == Some("epochs")
            && self.token == 0
            && self.acquisition.is_empty()
            && self.nonce.is_empty()
            && self.released
    }
}

/// The object key of `epoch` under lease key `key`.
pub fn epoch_key(key: &str, epoch: u64) -> String {
    format!("{key}/{epoch:020}.json")
}

/// The epoch an object key under lease key `key` names, if it is one.
pub fn parse_epoch_key(key: &str, object_key: &str) -> Option<u64> {
    split_epoch_key(object_key)
        .filter(|(base, _)| *base == key)
        .map(|(_, epoch)| epoch)
}

/// The lease key and epoch of an epoch object's key
/// (`<key>/<20 digits>.json`, as [`epoch_key`] writes it), if it is one.
pub fn split_epoch_key(object_key: &str) -> Option<(&str, u64)> {
    let (key, name) = object_key.rsplit_once('/')?;
    let digits = name.strip_suffix(".json")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((key, digits.parse().ok()?))
}

/// The `runs` field's JSON.
fn runs_value(runs: &[TickRun]) -> Value {
    let mut list = Vec::with_capacity(runs.len());
    for r in runs {
        let mut obj = Map::new();
        obj.insert("tick".into(), r.tick.clone().into());
        obj.insert("token".into(), r.token.into());
        obj.insert("finished_at".into(), secs_value(r.finished_at));
        if let Some(result) = &r.result {
            obj.insert("result".into(), result.clone().into());
        }
        if let Some(payload) = &r.payload {
            obj.insert("payload".into(), payload.clone().into());
        }
        if r.failed {
            obj.insert("failed".into(), true.into());
        }
        if let Some(at) = r.scheduled.filter(|at| at.0 < MAX_TIME_MS) {
            obj.insert("scheduled_at".into(), secs_value(at));
        }
        list.push(Value::Object(obj));
    }
    Value::Array(list)
}

/// The `runs` field, strictly: a list of at most [`MAX_RUNS`] completed
/// ticks.
fn parse_runs(value: Option<&Value>) -> Result<Vec<TickRun>, RecordErrorKind> {
    let wrong = || RecordErrorKind::WrongType {
        field: "runs".into(),
        expected: "a list of completed ticks",
    };
    let list = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) if list.len() <= MAX_RUNS => list,
        Some(_) => return Err(wrong()),
    };
    let mut runs = Vec::with_capacity(list.len());
    for item in list {
        let Value::Object(obj) = item else {
            return Err(wrong());
        };
        let text = |name: &'static str| match obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => check_len("runs", s).map(|_| Some(s.clone())),
            Some(_) => Err(wrong()),
        };
        let number = |name: &'static str| obj.get(name).and_then(Value::as_u64).ok_or_else(wrong);
        runs.push(TickRun {
            tick: text("tick")?.ok_or_else(wrong)?,
            token: number("token")?,
            finished_at: opt_secs(obj, "finished_at")?.ok_or_else(wrong)?,
            result: text("result")?,
            payload: text("payload")?,
            failed: obj.get("failed").and_then(Value::as_bool).unwrap_or(false),
            scheduled: opt_secs(obj, "scheduled_at")?,
        });
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The largest record the library writes for a valid configuration:
    /// the caller's part at [`CALLER_BYTES`], all else at its longest and
    /// escaped at its worst (control characters), with `runs` completed
    /// ticks.
    fn largest(runs: usize) -> LeaseRecord {
        let worst = |n: usize| "\u{1}".repeat(n);
        // Dates of 14 digits of seconds, held exactly (the latest a record
        // may hold print a few characters longer: the margin covers them).
        let late = UnixMillis(99_999_999_999_999);
        let (holder, owned) = ("h".repeat(MAX_STRING_BYTES), "s".repeat(MAX_STRING_BYTES));
        let mut meta = BTreeMap::new();
        for i in 0..MAX_META_ENTRIES - 1 {
            let used = caller_bytes(&holder, &meta, Some(&owned));
            let key = format!("k{i:02}");
            let Some(room) = CALLER_BYTES.checked_sub(used + json_len(&key) + 4) else {
                break;
            };
            meta.insert(key, "v".repeat(room.min(MAX_STRING_BYTES)));
        }
        assert_eq!(caller_bytes(&holder, &meta, Some(&owned)), CALLER_BYTES);
        meta.insert(HANDOFF_TO.into(), worst(MAX_STRING_BYTES));
        let run = |i: usize| TickRun {
            tick: format!("{i:02}{}", worst(crate::tick::MAX_TICK_BYTES - 2)),
            token: u64::MAX,
            finished_at: late,
            result: Some(worst(crate::tick::MAX_RESULT_BYTES)),
            payload: Some(crate::tick::digest(b"payload")),
            failed: true,
            scheduled: Some(late),
        };
        LeaseRecord {
            token: u64::MAX,
            expires_at: late,
            holder,
            acquisition: "f".repeat(32),
            nonce: "f".repeat(32),
            acquired_at: Some(late),
            ttl_ms: Some(u64::MAX),
            released: true,
            released_at: Some(late),
            meta,
            protocol: Some("epochs".into()),
            strays: true,
            runs: (0..runs).map(run).collect(),
            foreign: None,
            owned_by: Some(OwnedBy {
                key: owned,
                token: u64::MAX,
            }),
        }
    }

    #[test]
    fn the_largest_record_a_valid_configuration_writes_is_readable_with_its_newest_tick() {
        let one = largest(1);
        let body = one.encode();
        println!(
            "largest record: {} bytes, the library's part {}",
            body.len(),
            body.len() - CALLER_BYTES
        );
        assert!(body.len() <= MAX_RECORD_BYTES, "{} bytes", body.len());
        assert_eq!(LeaseRecord::decode(&body), Ok(one));
        // With every tick it may keep, the oldest are left out until it
        // fits; the newest stays.
        let mut full = largest(MAX_RUNS);
        let newest = full.runs.last().map(|r| r.tick.clone());
        let body = full.encode_fitting();
        assert!(body.len() <= MAX_RECORD_BYTES, "{} bytes", body.len());
        assert!(full.runs.len() < MAX_RUNS);
        assert_eq!(full.runs.last().map(|r| r.tick.clone()), newest);
        assert!(full.runs.iter().all(|r| r
            .result
            .as_deref()
            .is_some_and(|r| r.starts_with("fnv1a64:"))));
        assert_eq!(LeaseRecord::decode(&body), Ok(full));
        // Plain tick ids at their longest keep every tick, their results
        // (quotes: twice their length in JSON) kept as digests, oldest
        // first, while the record would not fit.
        let mut plain = sample();
        plain.runs = largest(MAX_RUNS).runs;
        for (i, run) in plain.runs.iter_mut().enumerate() {
            run.tick = format!("{i:02}{}", "t".repeat(crate::tick::MAX_TICK_BYTES - 2));
            run.result = Some("\"".repeat(crate::tick::MAX_RESULT_BYTES));
        }
        let body = plain.encode_fitting();
        assert!(body.len() <= MAX_RECORD_BYTES, "{} bytes", body.len());
        assert_eq!(plain.runs.len(), MAX_RUNS);
        let kept = |r: &TickRun| r.result.as_deref().is_some_and(|r| r.starts_with('"'));
        assert!(kept(&plain.runs[MAX_RUNS - 1]) && !kept(&plain.runs[0]));
        // A record that fits keeps all its ticks.
        let mut small = sample();
        small.runs = largest(3)
            .runs
            .into_iter()
            .map(|mut r| {
                r.result = None;
                r.tick.truncate(8);
                r
            })
            .collect();
        let before = small.clone();
        assert_eq!(small.encode_fitting(), before.encode());
        assert_eq!(small, before);
    }

    fn sample() -> LeaseRecord {
        LeaseRecord {
            token: 7,
            expires_at: UnixMillis(1_790_000_000_250),
            holder: "worker-a".into(),
            acquisition: "s1".into(),
            nonce: "n1".into(),
            acquired_at: Some(UnixMillis(1_789_999_990_000)),
            ttl_ms: Some(10_000),
            released: false,
            released_at: None,
            meta: [("job".to_string(), "nightly".to_string())].into(),
            protocol: Some("cas".into()),
            strays: false,
            runs: Vec::new(),
            foreign: None,
            owned_by: None,
        }
    }

    #[test]
    fn completed_ticks_round_trip_and_a_bad_list_is_refused() {
        use crate::tick::Tick;
        let mut record = sample();
        let tick = Tick::from_payload(&serde_json::json!({"at": "t1"}), "/at")
            .unwrap()
            .scheduled_at(UnixMillis(1_790_000_000_000));
        record.runs = vec![
            TickRun::new(&tick, 3, UnixMillis(1_790_000_000_250), Some("ok")),
            TickRun {
                failed: true,
                ..TickRun::new(
                    &Tick::new("t2").unwrap(),
                    4,
                    UnixMillis(1_790_000_001_000),
                    None,
                )
            },
        ];
        assert_eq!(LeaseRecord::decode(&record.encode()).unwrap(), record);
        for bad in [
            r#""runs":"x""#,
            r#""runs":[1]"#,
            r#""runs":[{"token":1,"finished_at":1.0}]"#,
            r#""runs":[{"tick":"a","token":-1,"finished_at":1.0}]"#,
        ] {
            let body = format!(r#"{{"token":1,"expires_at":1.0,{bad}}}"#);
            assert!(LeaseRecord::decode(body.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn round_trips() {
        let r = sample();
        assert_eq!(LeaseRecord::decode(&r.encode()), Ok(r));
    }

    #[test]
    fn an_owned_record_names_its_session_and_a_bad_one_is_refused() {
        let owned = LeaseRecord {
            owned_by: Some(OwnedBy {
                key: "sessions/a".into(),
                token: 7,
            }),
            ..sample()
        };
        let body = owned.encode();
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(
            text.contains(r#""owned_by":{"key":"sessions/a","token":7}"#),
            "{text}"
        );
        assert_eq!(LeaseRecord::decode(&body), Ok(owned));
        assert!(!String::from_utf8(sample().encode())
            .unwrap()
            .contains("owned_by"));
        let base = r#"{"v":1,"token":1,"expires_at":1,"holder":"h","session":"s","nonce":"n","#;
        for bad in [
            r#""owned_by":"sessions/a"}"#,
            r#""owned_by":{"key":"","token":1}}"#,
            r#""owned_by":{"key":"sessions/a"}}"#,
            r#""owned_by":{"key":"sessions/a","token":-1}}"#,
        ] {
            let body = format!("{base}{bad}");
            assert!(LeaseRecord::decode(body.as_bytes()).is_err(), "{body}");
        }
    }

    #[test]
    fn strays_is_written_only_when_set_and_read_strictly() {
        let plain = sample();
        assert!(!String::from_utf8(plain.encode())
            .unwrap()
            .contains("strays"));
        let marked = LeaseRecord {
            strays: true,
            ..sample()
        };
        assert_eq!(LeaseRecord::decode(&marked.encode()), Ok(marked));
        let bad = br#"{"expires_at": 1790000000.5, "token": 3, "strays": "yes"}"#;
        assert!(matches!(
            LeaseRecord::decode(bad).map_err(|e| e.kind),
            Err(RecordErrorKind::WrongType { field, .. }) if field == "strays"
        ));
    }

    #[test]
    fn reads_the_simple_format() {
        let r = LeaseRecord::decode(br#"{"expires_at": 1790000000.5, "token": 3}"#).unwrap();
        assert_eq!(r.token, 3);
        assert_eq!(r.expires_at, UnixMillis(1_790_000_000_500));
        assert_eq!(r.holder, "");
        assert!(!r.released);
    }

    #[test]
    fn writes_fields_simple_clients_read() {
        let v: Value = serde_json::from_slice(&sample().encode()).unwrap();
        assert_eq!(v["token"], 7);
        assert_eq!(v["expires_at"].as_f64(), Some(1_790_000_000.25));
    }

    #[test]
    fn ignores_unknown_fields() {
        assert!(LeaseRecord::decode(br#"{"expires_at":1,"token":1,"future":[1]}"#).is_ok());
    }

    fn kind(body: &[u8]) -> RecordErrorKind {
        LeaseRecord::decode(body).unwrap_err().kind
    }

    #[test]
    fn typed_errors() {
        assert_eq!(kind(&[0xff, 0xfe]), RecordErrorKind::NotUtf8);
        assert!(matches!(kind(b"{not json"), RecordErrorKind::Syntax(_)));
        assert_eq!(kind(b"[1,2]"), RecordErrorKind::NotAnObject);
        assert_eq!(
            kind(br#"{"token":1}"#),
            RecordErrorKind::Missing("expires_at")
        );
        // A simple client's record: no token, read as 0.
        let simple = LeaseRecord::decode(br#"{"expires_at": 1790000000.2}"#).unwrap();
        assert_eq!((simple.token, simple.expires_at.0), (0, 1_790_000_000_200));
        assert!(simple.is_foreign() && !simple.released);
        assert!(matches!(
            kind(br#"{"expires_at":1,"token":"1"}"#),
            RecordErrorKind::WrongType { .. }
        ));
        assert!(matches!(
            kind(br#"{"expires_at":1,"token":-1}"#),
            RecordErrorKind::Invalid { .. }
        ));
        assert!(matches!(
            kind(br#"{"expires_at":1,"token":1.5}"#),
            RecordErrorKind::Invalid { .. }
        ));
        assert!(matches!(
            kind(br#"{"expires_at":-3,"token":1}"#),
            RecordErrorKind::Invalid { .. }
        ));
        assert!(matches!(
            kind(br#"{"expires_at":1,"token":1,"released":"yes"}"#),
            RecordErrorKind::WrongType { .. }
        ));
        assert!(matches!(
            kind(br#"{"expires_at":1,"token":1,"meta":{"a":1}}"#),
            RecordErrorKind::WrongType { .. }
        ));
        assert_eq!(
            kind(br#"{"v":3,"expires_at":1,"token":1}"#),
            RecordErrorKind::UnsupportedVersion(3)
        );
        let big = vec![b' '; MAX_RECORD_BYTES + 1];
        assert_eq!(
            kind(&big),
            RecordErrorKind::TooLarge {
                len: MAX_RECORD_BYTES + 1
            }
        );
        let long_holder = format!(
            r#"{{"expires_at":1,"token":1,"holder":"{}"}}"#,
            "x".repeat(600)
        );
        assert!(matches!(
            kind(long_holder.as_bytes()),
            RecordErrorKind::Invalid { .. }
        ));
    }

    #[test]
    fn litestreams_lease_is_read_as_a_foreign_lock_until_its_expiry() {
        // As Litestream writes it (Go's time.Time in JSON: RFC 3339 with
        // nanoseconds), and as its earlier releases did (`token`).
        for body in [
            r#"{"generation":7,"expires_at":"2026-09-21T14:13:50.250000123Z","owner":"db-1:4242"}"#,
            r#"{"token":7,"expires_at":"2026-09-21T16:13:50.25+02:00","owner":"db-1:4242"}"#,
        ] {
            let r = LeaseRecord::decode(body.as_bytes()).unwrap();
            assert_eq!(r.foreign, Some(ForeignLock::Litestream), "{body}");
            assert_eq!(
                (r.holder.as_str(), r.token, r.expires_at),
                ("db-1:4242", 7, UnixMillis(1_790_000_030_250))
            );
            assert!(r.is_foreign() && !r.released && !r.held_until_broken());
            // Busy up to its expiry by the store's clock, free after.
            assert!(!r.is_free_at(r.expires_at));
            assert!(r.is_free_at(r.expires_at + std::time::Duration::from_millis(1)));
        }
        // No owner, no generation; a release by write (Go's zero time).
        let r = LeaseRecord::decode(br#"{"expires_at":"0001-01-01T00:00:00Z"}"#).unwrap();
        assert_eq!(
            (r.foreign, r.token, r.expires_at, r.holder.as_str()),
            (Some(ForeignLock::Litestream), 0, UnixMillis(0), "")
        );
        assert!(r.is_free_at(UnixMillis(1)));
    }

    #[test]
    fn terraforms_lock_is_held_until_broken() {
        let body = br#"{"ID":"08887bf0-8171-6457-9f43-9375d2070577","Operation":"OperationTypeApply","Info":"","Who":"ci@runner-4","Version":"1.10.2","Created":"2026-09-21T13:56:40.01334311Z","Path":"infra/terraform.tfstate"}"#;
        let r = LeaseRecord::decode(body).unwrap();
        assert_eq!(r.foreign, Some(ForeignLock::Terraform));
        assert_eq!(r.holder, "ci@runner-4");
        assert_eq!(r.acquired_at, Some(UnixMillis(1_789_999_000_013)));
        assert_eq!(r.expires_at, HELD_UNTIL_BROKEN);
        assert!(r.held_until_broken() && r.is_foreign());
        assert!(!r.is_free_at(UnixMillis(u64::MAX)));
        assert_eq!(
            r.meta
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
            [
                "id=08887bf0-8171-6457-9f43-9375d2070577",
                "operation=OperationTypeApply",
                "path=infra/terraform.tfstate",
                "version=1.10.2"
            ]
        );
        // Only the two fields that name it; a long holder is cut, not refused.
        let long = format!(
            r#"{{"ID":"x","Operation":"","Who":"{}é"}}"#,
            "w".repeat(511)
        );
        let r = LeaseRecord::decode(long.as_bytes()).unwrap();
        assert_eq!((r.holder.len(), r.acquired_at), (511, None));
        assert!(r.held_until_broken());
    }

    #[test]
    fn bodies_near_the_foreign_formats_stay_unreadable() {
        for body in [
            // Litestream's shape with a field of the wrong type or value.
            r#"{"generation":7,"expires_at":"tomorrow","owner":"a"}"#,
            r#"{"generation":7,"expires_at":"2026-09-21T14:13:50","owner":"a"}"#,
            r#"{"generation":-1,"expires_at":"2026-09-21T14:13:50Z"}"#,
            r#"{"generation":"7","expires_at":"2026-09-21T14:13:50Z"}"#,
            r#"{"expires_at":"2026-09-21T14:13:50Z","owner":5}"#,
            r#"{"expires_at":["2026-09-21T14:13:50Z"]}"#,
            // A broken record of ours is not another tool's lock.
            r#"{"expires_at":"2026-09-21T14:13:50Z","session":"s","nonce":"n"}"#,
            r#"{"v":1,"expires_at":"2026-09-21T14:13:50Z"}"#,
            // Terraform's shape, not quite.
            r#"{"ID":"","Operation":"OperationTypeApply"}"#,
            r#"{"ID":"x","Who":"a"}"#,
            r#"{"id":"x","operation":"OperationTypeApply"}"#,
            r#"{"ID":1,"Operation":"OperationTypeApply"}"#,
            r#"{"ID":"x","Operation":"OperationTypeApply","Who":["a"]}"#,
            r#"{"ID":"x","Operation":"OperationTypeApply","Created":"yesterday"}"#,
            r#"{"ID":"x","Operation":"OperationTypeApply","holder":"a"}"#,
            r#"["ID","Operation"]"#,
        ] {
            assert!(LeaseRecord::decode(body.as_bytes()).is_err(), "{body}");
        }
        // The error is still about our format.
        assert_eq!(
            kind(br#"{"ID":"x","Who":"a"}"#),
            RecordErrorKind::Missing("expires_at")
        );
    }

    #[test]
    fn errors_carry_a_short_excerpt() {
        let body = format!("<html>{}</html>", "x".repeat(500));
        let err = LeaseRecord::decode(body.as_bytes()).unwrap_err();
        assert!(err.excerpt.starts_with("<html>xxx"));
        assert!(err.excerpt.chars().count() <= EXCERPT_CHARS + 1);
        assert!(err.to_string().contains("not JSON"));
    }

    #[test]
    fn freeness_uses_the_store_clock() {
        let r = sample();
        assert!(!r.is_free_at(r.expires_at));
        assert!(r.is_free_at(r.expires_at + std::time::Duration::from_millis(1)));
        let released = LeaseRecord {
            released: true,
            ..sample()
        };
        assert!(released.is_free_at(UnixMillis(0)));
    }

    proptest! {
        #[test]
        fn decode_is_total(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = LeaseRecord::decode(&body);
        }

        #[test]
        fn decode_is_total_on_json_like_input(body in r#"\{("[a-z_]{1,12}":(-?[0-9.e]{1,8}|"[^"]{0,8}"|true|null|\[\]|\{\}),?){0,6}\}"#) {
            let _ = LeaseRecord::decode(body.as_bytes());
        }

        #[test]
        fn encode_decode_round_trip(token in any::<u64>(), exp in 0u64..4_000_000_000_000, holder in "[ -~]{0,40}", released in any::<bool>()) {
            let r = LeaseRecord { token, expires_at: UnixMillis(exp), holder, released, ..sample() };
            prop_assert_eq!(LeaseRecord::decode(&r.encode()), Ok(r));
        }
    }
}
