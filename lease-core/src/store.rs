//! The semantic store verbs the protocol needs ([`StoreOp`]) and the
//! classified replies it understands ([`StoreReply`]).
//!
//! Every backend (the S3 dialect, the in-memory store, an R2 binding)
//! translates the same verbs and sorts whatever its server answered into the
//! same classes, so the machines never look at a status code.

use crate::time::StoreDate;
use core::fmt;
use core::future::Future;
use std::time::Duration;

/// An entity tag, normalised: surrounding quotes and a weak `W/` prefix are
/// removed, so etags from different servers (and from headers vs. XML
/// bodies) compare equal when they name the same version.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Etag(String);

impl Etag {
    /// Normalises `raw` (trims whitespace, a `W/` prefix and one pair of
    /// double quotes).
    pub fn new(raw: &str) -> Etag {
        let t = raw.trim();
        let t = t.strip_prefix("W/").unwrap_or(t);
        let t = t
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or(t);
        Etag(t.to_string())
    }

    /// An etag already normalised, taken as it is (a trace read back:
    /// [`Etag::new`] again would strip a `W/` that was part of the value).
    #[cfg(feature = "trace")]
    pub(crate) fn verbatim(normalised: &str) -> Etag {
        Etag(normalised.to_string())
    }

    /// The bare value, without quotes.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value in double quotes, as RFC 9110 writes it in `If-Match`.
    pub fn quoted(&self) -> String {
        format!("\"{}\"", self.0)
    }
}

impl fmt::Debug for Etag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Etag({})", self.0)
    }
}

impl fmt::Display for Etag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The condition under which a PUT may apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PutCondition {
    /// `If-None-Match: *`: only if no object exists at the key.
    IfAbsent,
    /// `If-Match: <etag>`: only if the current version has this etag.
    IfMatch(Etag),
    /// No condition. The lease machines never send this; it exists for the
    /// capability probe and for demonstrating the naive protocol.
    None,
}

/// A store call the protocol needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreOp {
    /// Read an object.
    Get {
        /// Object key.
        key: String,
    },
    /// Read an object unless its current etag is `etag` (`If-None-Match`):
    /// an unchanged object is answered [`ReplyKind::NotModified`], without
    /// its body. A backend that cannot ask so (or a server that ignores the
    /// header) answers as for [`StoreOp::Get`]. The machines never send it:
    /// a waiting client's re-reads are made conditional below them
    /// ([`crate::client::Revalidating`]).
    GetIfNoneMatch {
        /// Object key.
        key: String,
        /// The etag of the version the caller already holds.
        etag: Etag,
    },
    /// Write an object under a condition.
    Put {
        /// Object key.
        key: String,
        /// The whole new object body.
        body: Vec<u8>,
        /// When the write may apply.
        condition: PutCondition,
    },
    /// Delete an object, only if its etag matches when one is given.
    Delete {
        /// Object key.
        key: String,
        /// `If-Match` etag; `None` for an unconditional delete.
        if_match: Option<Etag>,
    },
    /// List keys under a prefix, one page at a time.
    List {
        /// Key prefix.
        prefix: String,
        /// Continuation token from the previous page.
        continuation: Option<String>,
        /// Most entries wanted on this page (S3 and GCS `max-keys`, Azure
        /// `maxresults`, R2 `limit`; 0 is sent as 1); `None` for the store's
        /// default (1,000 on S3 and GCS, 5,000 on Azure). A store may answer
        /// fewer, and some ignore it, so no caller may rely on it: the
        /// machines never set it; the capability probe asks for one key per
        /// page to see that continuation tokens are followed correctly.
        max_keys: Option<u32>,
    },
}

impl StoreOp {
    /// The key (or prefix) this call is about.
    pub fn key(&self) -> &str {
        match self {
            StoreOp::Get { key }
            | StoreOp::GetIfNoneMatch { key, .. }
            | StoreOp::Put { key, .. }
            | StoreOp::Delete { key, .. } => key,
            StoreOp::List { prefix, .. } => prefix,
        }
    }

    /// The verb, for logs and timelines.
    pub fn verb(&self) -> &'static str {
        match self {
            StoreOp::Get { .. } | StoreOp::GetIfNoneMatch { .. } => "GET",
            StoreOp::Put { .. } => "PUT",
            StoreOp::Delete { .. } => "DELETE",
            StoreOp::List { .. } => "LIST",
        }
    }

    /// Whether the call may change the store (and so has an unknown outcome
    /// when its reply is lost).
    pub fn is_write(&self) -> bool {
        matches!(self, StoreOp::Put { .. } | StoreOp::Delete { .. })
    }
}

/// One entry of a listing page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListEntry {
    /// Full key.
    pub key: String,
    /// Etag of the listed version, when the server gave one.
    pub etag: Option<Etag>,
    /// Size in bytes.
    pub size: u64,
}

/// Why a call never produced a reply. The outcome of a write is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportErrorKind {
    /// No answer in time.
    Timeout,
    /// Could not connect.
    Connect,
    /// Connection reset or closed mid-exchange.
    Reset,
    /// Anything else below HTTP (TLS, malformed response framing...).
    Other,
    /// The request was never sent: no usable credentials (a look-up or
    /// refresh of expiring credentials failed and the last ones expired).
    /// Treated as any store fault: retried within the budget, and no lease
    /// is thought lost or won because of it.
    Credentials,
}

/// The class of a store's answer: what happened, not how it was spelled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyKind {
    /// GET: the object exists.
    Found {
        /// Its current etag.
        etag: Etag,
        /// Its body.
        body: Vec<u8>,
    },
    /// GET with `If-None-Match` ([`StoreOp::GetIfNoneMatch`]): the object
    /// still has the etag named (HTTP 304), so the caller's copy is current.
    NotModified,
    /// GET or DELETE: no object at the key. (A PUT with `If-Match` on a
    /// missing key is also answered `Missing` by some servers; the machines
    /// treat that as a failed precondition.)
    Missing,
    /// PUT applied.
    Written {
        /// The new version's etag, when the server returned one.
        etag: Option<Etag>,
    },
    /// DELETE applied.
    Deleted,
    /// One page of a listing.
    Listed {
        /// Entries on this page.
        entries: Vec<ListEntry>,
        /// Token for the next page, if the listing was truncated.
        next: Option<String>,
    },
    /// The condition did not hold (412, or Azure's 409 `BlobAlreadyExists`
    /// on create).
    PreconditionFailed,
    /// A concurrent conditional write conflicted (S3 409
    /// `ConditionalRequestConflict`): nothing applied, retry after a re-read.
    Conflict,
    /// Throttled (429, 503 `SlowDown`): back off.
    Throttled {
        /// The server's `Retry-After`, when given.
        retry_after: Option<Duration>,
    },
    /// 5xx: for a write, the outcome is unknown.
    ServerError {
        /// HTTP status.
        status: u16,
        /// Error code from the body, when there was one.
        code: Option<String>,
    },
    /// 401/403: credentials or permissions.
    Denied {
        /// Error code (e.g. `AccessDenied`, `SignatureDoesNotMatch`).
        code: Option<String>,
        /// The server's message, when given.
        message: Option<String>,
    },
    /// The bucket (or container) does not exist.
    NoSuchBucket,
    /// The server does not implement the conditional request (400/501 for
    /// the conditional headers).
    Unsupported {
        /// HTTP status.
        status: u16,
        /// Error code from the body, when there was one.
        code: Option<String>,
    },
    /// Any other HTTP answer the protocol has no meaning for.
    Unexpected {
        /// HTTP status.
        status: u16,
        /// Error code from the body, when there was one.
        code: Option<String>,
        /// The server's message, when given.
        message: Option<String>,
    },
    /// The call could not be made at all (invalid key, signing failed):
    /// nothing was sent.
    Invalid {
        /// What is wrong, for humans.
        reason: String,
    },
    /// No HTTP answer at all: for a write, the outcome is unknown.
    Transport {
        /// What went wrong.
        kind: TransportErrorKind,
        /// Details for humans (never containing credentials).
        message: String,
    },
}

impl ReplyKind {
    /// A reply that may pass if the call is made again: throttled, a
    /// server error, a conflict, or no reply at all.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ReplyKind::Throttled { .. }
                | ReplyKind::ServerError { .. }
                | ReplyKind::Transport { .. }
                | ReplyKind::Conflict
        )
    }

    /// Whether the call may have been applied though no success came
    /// back: a server error, or no reply at all.
    pub fn is_ambiguous(&self) -> bool {
        matches!(
            self,
            ReplyKind::ServerError { .. } | ReplyKind::Transport { .. }
        )
    }

    /// A short name for logs and timelines.
    pub fn name(&self) -> &'static str {
        match self {
            ReplyKind::Found { .. } => "found",
            ReplyKind::NotModified => "not-modified",
            ReplyKind::Missing => "missing",
            ReplyKind::Written { .. } => "written",
            ReplyKind::Deleted => "deleted",
            ReplyKind::Listed { .. } => "listed",
            ReplyKind::PreconditionFailed => "precondition-failed",
            ReplyKind::Conflict => "conflict",
            ReplyKind::Throttled { .. } => "throttled",
            ReplyKind::ServerError { .. } => "server-error",
            ReplyKind::Denied { .. } => "denied",
            ReplyKind::NoSuchBucket => "no-such-bucket",
            ReplyKind::Unsupported { .. } => "unsupported",
            ReplyKind::Unexpected { .. } => "unexpected",
            ReplyKind::Invalid { .. } => "invalid",
            ReplyKind::Transport { .. } => "transport",
        }
    }
}

/// A classified reply, with the store's clock when the reply carried one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreReply {
    /// What happened.
    pub kind: ReplyKind,
    /// The store's time at the reply (the `Date` header), if known.
    pub date: Option<StoreDate>,
    /// The version id a write's reply carried (S3's `x-amz-version-id`,
    /// Azure's `x-ms-version-id`): the bucket keeps versions, and every
    /// write leaves the one before as a noncurrent version. `None` when
    /// the reply had none (or the backend cannot tell).
    pub version_id: Option<String>,
}

impl StoreReply {
    /// A reply of `kind` with no date.
    pub fn new(kind: ReplyKind) -> Self {
        StoreReply {
            kind,
            date: None,
            version_id: None,
        }
    }

    /// A reply of `kind` dated `date`.
    pub fn dated(kind: ReplyKind, date: StoreDate) -> Self {
        StoreReply {
            kind,
            date: Some(date),
            version_id: None,
        }
    }

    /// A transport failure (no HTTP answer).
    pub fn transport(kind: TransportErrorKind, message: impl Into<String>) -> Self {
        StoreReply::new(ReplyKind::Transport {
            kind,
            message: message.into(),
        })
    }
}

/// Performs store calls. Must not retry on its own: every retry decision is
/// the machine's.
pub trait Store {
    /// Performs `op` and classifies the answer.
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply>;

    /// The shortest time the store allows between writes to one object
    /// (GCS: one second): leases on it space their writes so. Zero when
    /// it sets no such limit.
    fn min_write_interval(&self) -> Duration {
        Duration::ZERO
    }
}

impl<S: Store + ?Sized> Store for &S {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        (**self).call(op)
    }

    fn min_write_interval(&self) -> Duration {
        (**self).min_write_interval()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_normalise_quotes_and_weak_prefix() {
        assert_eq!(Etag::new("\"abc\""), Etag::new("abc"));
        assert_eq!(Etag::new("W/\"abc\""), Etag::new("abc"));
        assert_eq!(Etag::new(" \"abc\" ").as_str(), "abc");
        assert_eq!(Etag::new("abc").quoted(), "\"abc\"");
        // A lone quote is not a pair: kept as-is.
        assert_eq!(Etag::new("\"abc").as_str(), "\"abc");
    }

    #[test]
    fn op_accessors() {
        let put = StoreOp::Put {
            key: "k".into(),
            body: vec![],
            condition: PutCondition::IfAbsent,
        };
        assert_eq!(put.key(), "k");
        assert_eq!(put.verb(), "PUT");
        assert!(put.is_write());
        assert!(!StoreOp::Get { key: "k".into() }.is_write());
    }
}
