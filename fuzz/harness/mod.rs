//! The fuzz targets' bodies, one function per target, each taking the raw
//! input bytes. The targets in `fuzz/fuzz_targets/` call them under
//! libFuzzer (nightly, `make fuzz`); `tests/tests/fuzz_corpus.rs` includes
//! this same file and replays every kept input through them on stable
//! (`make test`), so the replay runs exactly what the fuzzer ran.
//!
//! Every function must return normally for any input: a panic is a
//! finding. Besides "no panic", each asserts the properties that are cheap
//! to state (a record that decodes re-encodes to itself; a reply that
//! cannot be understood is never a success; an unreadable object is never
//! the target of a write; a machine fed any replies finishes in bounded
//! time; errors never quote a secret).
//!
//! Inputs are mostly text so that the kept corpus stays readable. A canned
//! HTTP response ([`response`]) is
//!
//! ```text
//! <status> [<delay ms>]
//! <name>: <value>
//! ...
//!
//! <body>
//! ```
//!
//! A status outside 100-999 stands for no response at all (a transport
//! error) where a target has a transport, else it is folded into range.

#![allow(dead_code)]

use lease_cli::{run_grace, Cli, Command};
use lease_core::client::drive;
use lease_core::client::{check_grace, max_grace, stop_times};
use lease_core::protocol::summarize;
use lease_core::protocol::BreakRequest;
use lease_core::protocol::FenceOp;
use lease_core::protocol::Probe;
use lease_core::record::MAX_RECORD_BYTES;
use lease_core::record::{epoch_key, parse_epoch_key};
use lease_core::settings::lease_key;
use lease_core::store::{PutCondition, ReplyKind, TransportErrorKind};
use lease_core::time::StoreDate;
use lease_core::wire::AnyDialect;
use lease_core::wire::SigV4Signer;
use lease_core::wire::{AzureConfig, AzureDialect, SharedKeySigner};
use lease_core::wire::{Dialect, RenderError, Signer};
use lease_core::wire::{EtagQuoting, S3Config, S3Dialect, MAX_MESSAGE_CHARS};
use lease_core::wire::{GcsConfig, GcsDialect};
use lease_core::{
    AcquireOutcome, Claim, Clock, Entropy, Etag, Fenced, HttpStore, HttpTransport, Lease,
    LeaseConfig, LeaseOp, LeaseRecord, MemStore, Mono, Observation, Protocol, ReleaseOutcome,
    RenewOutcome, Settings, Store, StoreOp, StoreReply, StoreSettings, TransportError, UnixMillis,
    VirtualClock,
};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A target's body.
pub type Body = fn(&[u8]);

/// Every target: its name (the file in `fuzz/fuzz_targets/`, the folders
/// in `fuzz/corpus/` and `fuzz/regressions/`) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("record", record),
    ("s3_reply", s3_reply),
    ("gcs_reply", gcs_reply),
    ("azure_reply", azure_reply),
    ("listing", listing),
    ("http_dates", http_dates),
    ("etag", etag),
    ("settings_env", settings_env),
    ("cli_flags", cli_flags),
    ("lease_ops", lease_ops),
];

/// The wall clock of every virtual store (2026-09-21).
const EPOCH: UnixMillis = UnixMillis(1_790_000_000_000);
const KEY: &str = "locks/fuzz";
const HOLDER: &str = "fuzz-a";

// ---------------------------------------------------------------------
// The lease record and the fenced object header.

/// `LeaseRecord::decode` and `Fenced::decode` on the bytes; what the
/// adapters do with a decoded record (print its dates, judge it free,
/// resume a lease from it) on the result.
pub fn record(data: &[u8]) {
    match LeaseRecord::decode(data) {
        Ok(record) => {
            let encoded = record.encode();
            match record.foreign {
                None => assert_eq!(
                    LeaseRecord::decode(&encoded).as_ref(),
                    Ok(&record),
                    "a decoded record re-encodes ({} bytes) to itself",
                    encoded.len()
                ),
                // Another tool's lock is read, never written as read: it
                // has none of our fields, and a Terraform lock never
                // expires (its stated expiry is past any a record holds).
                Some(lock) => {
                    assert!(record.is_foreign(), "{lock}: read as a foreign holder");
                    assert_eq!(
                        record.held_until_broken(),
                        !record.is_free_at(UnixMillis(u64::MAX)),
                        "{lock}: held until broken exactly when it never expires"
                    );
                }
            }
            assert!(
                encoded.len() <= MAX_RECORD_BYTES,
                "re-encoded within the limit"
            );
            // What the CLI, the Worker and the demo print and compute.
            let _ = record.expires_at.to_http_date();
            let _ = record.acquired_at.map(UnixMillis::to_http_date);
            let _ = record.is_free_at(EPOCH);
            let _ = record.is_free_at(UnixMillis(u64::MAX));
            for protocol in [Protocol::Cas, Protocol::Epochs, Protocol::Mutex] {
                let mut cfg = config(protocol);
                cfg.holder = record.holder.clone();
                let seen = Observation {
                    etag: Etag::new("e1"),
                    free: record.is_free_at(EPOCH),
                    record: record.clone(),
                    date: StoreDate::from_http_date(EPOCH),
                    read_at: Mono(1_000),
                };
                let lease = Lease::resume(&cfg, seen);
                let _ = lease.to_json();
                let _ = Claim::of_lease(&cfg, &lease);
            }
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert!(e.excerpt.chars().count() <= 81, "a short excerpt");
        }
    }
    if let Some(fenced) = Fenced::decode(data) {
        assert_eq!(Fenced::decode(&fenced.encode()), Some(fenced));
    }
}

// ---------------------------------------------------------------------
// Canned HTTP responses.

/// A response as the transport hands it over, with the time it took.
pub struct Canned {
    /// The status as written (any number).
    pub status: u64,
    /// How long the call took, in ms.
    pub delay_ms: u64,
    /// The headers, those `http` accepts (a transport drops the rest).
    pub headers: http::HeaderMap,
    /// The body.
    pub body: Vec<u8>,
}

fn split_once<'a>(data: &'a [u8], separator: &[u8]) -> (&'a [u8], Option<&'a [u8]>) {
    match data.windows(separator.len()).position(|w| w == separator) {
        Some(i) => (&data[..i], Some(&data[i + separator.len()..])),
        None => (data, None),
    }
}

fn number(word: &[u8]) -> Option<u64> {
    std::str::from_utf8(word).ok()?.trim().parse().ok()
}

/// Parses one canned response (see the module docs).
pub fn response(data: &[u8]) -> Canned {
    let (first, rest) = split_once(data, b"\n");
    let mut words = first.split(|b| *b == b' ').filter(|w| !w.is_empty());
    let status = words.next().and_then(number).unwrap_or(0);
    let delay_ms = words.next().and_then(number).unwrap_or(1);
    let (head, body) = match rest {
        Some(rest) => split_once(rest, b"\n\n"),
        None => (&[][..], None),
    };
    let mut headers = http::HeaderMap::new();
    for line in head.split(|b| *b == b'\n') {
        let (name, value) = split_once(line, b":");
        let Some(value) = value else { continue };
        let value = value.strip_suffix(b"\r").unwrap_or(value);
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name),
            http::HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    Canned {
        status,
        delay_ms,
        headers,
        body: body.unwrap_or_default().to_vec(),
    }
}

impl Canned {
    /// The HTTP response, its status folded into 100-999.
    pub fn http(&self) -> http::Response<Vec<u8>> {
        let status = if (100..=999).contains(&self.status) {
            self.status
        } else {
            100 + self.status % 900
        };
        let mut response = http::Response::new(self.body.clone());
        *response.status_mut() =
            http::StatusCode::from_u16(status as u16).unwrap_or(http::StatusCode::OK);
        *response.headers_mut() = self.headers.clone();
        response
    }
}

// ---------------------------------------------------------------------
// The dialects.

/// The three dialects, on emulator endpoints.
#[derive(Clone, Copy, Debug)]
pub enum Which {
    S3,
    Gcs,
    Azure,
}

pub fn dialect(which: Which) -> AnyDialect {
    match which {
        Which::S3 => AnyDialect::S3(
            S3Dialect::new(S3Config::custom(
                "http://127.0.0.1:9000",
                "locks",
                "us-east-1",
            ))
            .expect("valid S3 config"),
        ),
        Which::Gcs => AnyDialect::Gcs(
            GcsDialect::new(GcsConfig::custom("http://127.0.0.1:4443", "locks"))
                .expect("valid GCS config"),
        ),
        Which::Azure => AnyDialect::Azure(
            AzureDialect::new(AzureConfig::custom(
                "http://127.0.0.1:10000/devstoreaccount1",
                "locks",
            ))
            .expect("valid Azure config"),
        ),
    }
}

/// A signer of the kind the dialect is used with (made-up credentials).
fn signer(which: Which) -> Box<dyn Signer> {
    match which {
        Which::S3 => Box::new(SigV4Signer::new(
            "AKIDFUZZ",
            "fuzz-secret",
            None,
            "us-east-1",
        )),
        Which::Gcs => Box::new(SigV4Signer::new("GOOGFUZZ", "fuzz-secret", None, "auto")),
        Which::Azure => Box::new(
            SharedKeySigner::new("devstoreaccount1", "ZnV6ei1rZXktbm90LWEtc2VjcmV0")
                .expect("valid base64 key"),
        ),
    }
}

/// The header that carries a write's condition on a version.
fn version_header(which: Which) -> &'static str {
    match which {
        Which::S3 | Which::Azure => "if-match",
        Which::Gcs => "x-goog-if-generation-match",
    }
}

/// Renders `op`, signs it; a refusal must be a typed render error.
fn render_and_sign(which: Which, d: &dyn Dialect, op: &StoreOp) -> Option<http::Request<Vec<u8>>> {
    match d.render(op) {
        Ok(mut request) => {
            let _ = signer(which).sign(&mut request, EPOCH);
            Some(request)
        }
        Err(RenderError::InvalidKey { reason, .. }) => {
            assert!(!reason.is_empty());
            None
        }
        Err(e) => panic!("a valid endpoint refused for {op:?}: {e}"),
    }
}

/// A write conditional on `etag`, rendered: its condition names `etag`
/// again (or the render refused it with a typed error).
fn check_condition_round_trip(which: Which, d: &dyn Dialect, etag: &Etag) {
    for op in [
        StoreOp::Put {
            key: KEY.into(),
            body: b"{}".to_vec(),
            condition: PutCondition::IfMatch(etag.clone()),
        },
        StoreOp::Delete {
            key: KEY.into(),
            if_match: Some(etag.clone()),
        },
    ] {
        if let Some(request) = render_and_sign(which, d, &op) {
            let sent = request
                .headers()
                .get(version_header(which))
                .expect("a conditional write carries its condition");
            // Header values may carry any bytes but controls; this one is
            // the UTF-8 of the etag it was made from.
            let sent = std::str::from_utf8(sent.as_bytes()).expect("UTF-8 as it was read");
            assert_eq!(
                &Etag::new(sent),
                etag,
                "the condition names the version read"
            );
        }
    }
}

/// The store call a reply target answers (byte 0 of its input).
fn reply_op(selector: u8) -> StoreOp {
    let key = KEY.to_string();
    if selector >= 248 {
        return StoreOp::GetIfNoneMatch {
            key,
            etag: Etag::new("1"),
        };
    }
    match selector % 8 {
        0 => StoreOp::Get { key },
        1 => StoreOp::Put {
            key,
            body: b"{}".to_vec(),
            condition: PutCondition::IfAbsent,
        },
        2 => StoreOp::Put {
            key,
            body: b"{}".to_vec(),
            condition: PutCondition::IfMatch(Etag::new("1")),
        },
        3 => StoreOp::Put {
            key,
            body: b"{}".to_vec(),
            condition: PutCondition::None,
        },
        4 => StoreOp::Delete {
            key,
            if_match: None,
        },
        5 => StoreOp::Delete {
            key,
            if_match: Some(Etag::new("1")),
        },
        6 => StoreOp::List {
            prefix: format!("{KEY}/"),
            continuation: None,
            max_keys: None,
        },
        _ => StoreOp::List {
            prefix: format!("{KEY}/"),
            continuation: Some("page-2".into()),
            max_keys: Some(1),
        },
    }
}

/// What every parsed reply must satisfy, whatever the bytes.
fn check_reply(which: Which, d: &dyn Dialect, op: &StoreOp, canned: &Canned, reply: &StoreReply) {
    let status = canned.http().status().as_u16();
    let success = (200..300).contains(&status);
    let short = |s: &Option<String>| {
        s.as_ref()
            .is_none_or(|s| s.chars().count() <= MAX_MESSAGE_CHARS)
    };
    match &reply.kind {
        ReplyKind::Found { etag, body } => {
            assert!(
                success && matches!(op, StoreOp::Get { .. } | StoreOp::GetIfNoneMatch { .. }),
                "{status} {op:?}"
            );
            assert!(!etag.as_str().is_empty());
            assert_eq!(body, &canned.body);
            check_condition_round_trip(which, d, etag);
        }
        ReplyKind::Written { etag } => {
            assert!(
                success && matches!(op, StoreOp::Put { .. }),
                "{status} {op:?}"
            );
            if let Some(etag) = etag {
                assert!(!etag.as_str().is_empty());
                check_condition_round_trip(which, d, etag);
            }
        }
        ReplyKind::Deleted => {
            assert!(
                success && matches!(op, StoreOp::Delete { .. }),
                "{status} {op:?}"
            )
        }
        ReplyKind::Listed { entries, next } => {
            assert!(
                success && matches!(op, StoreOp::List { .. }),
                "{status} {op:?}"
            );
            check_listing(which, d, entries, next.as_deref());
        }
        ReplyKind::PreconditionFailed | ReplyKind::Conflict | ReplyKind::Throttled { .. } => {
            assert!(!success, "{status} read as {:?}", reply.kind)
        }
        ReplyKind::NotModified => assert!(
            status == 304 && matches!(op, StoreOp::GetIfNoneMatch { .. }),
            "{status} {op:?}"
        ),
        ReplyKind::Missing | ReplyKind::NoSuchBucket => assert_eq!(status, 404),
        ReplyKind::ServerError { code, .. } => {
            assert!((500..600).contains(&status));
            assert!(short(code));
        }
        ReplyKind::Denied { code, message } => {
            assert!(!success);
            assert!(short(code) && short(message));
        }
        ReplyKind::Unsupported { code, .. } => {
            assert!(!success);
            assert!(short(code));
        }
        ReplyKind::Unexpected { code, message, .. } => assert!(short(code) && short(message)),
        ReplyKind::Transport { .. } | ReplyKind::Invalid { .. } => {
            panic!("a parsed response is never {:?}", reply.kind)
        }
    }
    let _ = summarize(&reply.kind);
}

fn reply(which: Which, data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let op = reply_op(selector);
    let d = dialect(which);
    let canned = response(rest);
    let parsed = d.parse(&op, &canned.http());
    check_reply(which, &d, &op, &canned, &parsed);
}

/// An S3 reply to a call chosen by byte 0: status, headers (`ETag`,
/// `Date`, `Retry-After`...), XML error body or listing.
pub fn s3_reply(data: &[u8]) {
    reply(Which::S3, data)
}

/// A GCS XML API reply (`x-goog-generation`, `<Generation>` in listings).
pub fn gcs_reply(data: &[u8]) {
    reply(Which::Gcs, data)
}

/// An Azure Blob reply (`x-ms-error-code`, `EnumerationResults`).
pub fn azure_reply(data: &[u8]) {
    reply(Which::Azure, data)
}

// ---------------------------------------------------------------------
// Listings and continuation.

fn percent_decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ASCII");
            out.push(u8::from_str_radix(hex, 16).expect("hex"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// A listing page as the machines use it: epoch numbers from the keys,
/// the next page's request from the continuation token.
fn check_listing(
    which: Which,
    d: &dyn Dialect,
    entries: &[lease_core::store::ListEntry],
    next: Option<&str>,
) {
    for entry in entries {
        if let Some(etag) = &entry.etag {
            assert!(!etag.as_str().is_empty());
        }
        if let Some(epoch) = parse_epoch_key(KEY, &entry.key) {
            assert_eq!(epoch_key(KEY, epoch), entry.key);
        }
        render_and_sign(
            which,
            d,
            &StoreOp::Get {
                key: entry.key.clone(),
            },
        );
    }
    let Some(token) = next else { return };
    assert!(!token.is_empty() && token.trim() == token, "{token:?}");
    let op = StoreOp::List {
        prefix: format!("{KEY}/"),
        continuation: Some(token.to_string()),
        max_keys: None,
    };
    let request = render_and_sign(which, d, &op).expect("a continuation token always renders");
    let name = match which {
        Which::S3 | Which::Gcs => "continuation-token=",
        Which::Azure => "marker=",
    };
    let query = request.uri().query().expect("a listing has a query");
    let sent = query
        .split('&')
        .find_map(|p| p.strip_prefix(name))
        .expect("the token is sent");
    assert_eq!(
        percent_decode(sent),
        token.as_bytes(),
        "the token is sent as read"
    );
}

/// A 200 listing body for a dialect chosen by byte 0: S3's and GCS's
/// `ListBucketResult` with `NextContinuationToken`, Azure's
/// `EnumerationResults` with `NextMarker`.
pub fn listing(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let which = match selector % 3 {
        0 => Which::S3,
        1 => Which::Gcs,
        _ => Which::Azure,
    };
    let d = dialect(which);
    let op = reply_op(6 + (selector / 3) % 2);
    let mut response = http::Response::new(body.to_vec());
    *response.status_mut() = http::StatusCode::OK;
    match d.parse(&op, &response).kind {
        ReplyKind::Listed { entries, next } => check_listing(which, &d, &entries, next.as_deref()),
        ReplyKind::Unexpected { code, .. } => {
            assert_eq!(code.as_deref(), Some("MalformedListing"))
        }
        other => panic!("a 200 listing read as {other:?}"),
    }
}

// ---------------------------------------------------------------------
// Date and Retry-After.

/// The store date a reply with `Date: value` carries, in ms.
fn date_of(value: &[u8]) -> Option<u64> {
    let mut response = http::Response::new(Vec::new());
    *response.status_mut() = http::StatusCode::NOT_FOUND;
    response.headers_mut().insert(
        http::header::DATE,
        http::HeaderValue::from_bytes(value).ok()?,
    );
    let reply = dialect(Which::S3).parse(&StoreOp::Get { key: KEY.into() }, &response);
    reply.date.map(|d| d.unix_ms.0)
}

/// `Date` (first line) and `Retry-After` (the rest) on 429 and 503
/// replies of every dialect.
pub fn http_dates(data: &[u8]) {
    let (date, retry) = split_once(data, b"\n");
    let retry = retry.unwrap_or_default();
    let mut seen = None;
    for which in [Which::S3, Which::Gcs, Which::Azure] {
        for status in [429, 503] {
            let mut response = http::Response::new(Vec::new());
            *response.status_mut() = http::StatusCode::from_u16(status).expect("valid");
            for (name, value) in [
                (http::header::DATE, date),
                (http::header::RETRY_AFTER, retry),
            ] {
                if let Ok(value) = http::HeaderValue::from_bytes(value) {
                    response.headers_mut().insert(name, value);
                }
            }
            let reply = dialect(which).parse(&StoreOp::Get { key: KEY.into() }, &response);
            let ReplyKind::Throttled { retry_after } = reply.kind else {
                panic!("{status} read as {:?}", reply.kind);
            };
            // Every dialect reads the two headers alike.
            let now = (reply.date, retry_after);
            assert!(
                seen.is_none_or(|s| s == now),
                "{which:?} {status}: {now:?} vs {seen:?}"
            );
            seen = Some(now);
        }
    }
    let Some((date_read, retry_after)) = seen else {
        return;
    };
    if let Some(d) = date_read {
        assert_eq!(d.unix_ms.0 % 1000, 0, "HTTP dates are whole seconds");
        let printed = d.unix_ms.to_http_date();
        assert_eq!(date_of(printed.as_bytes()), Some(d.unix_ms.0), "{printed}");
    }
    let text = std::str::from_utf8(retry).ok().filter(|_| {
        http::HeaderValue::from_bytes(retry)
            .ok()
            .is_some_and(|v| v.to_str().is_ok())
    });
    if let Some(text) = text.map(str::trim) {
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            assert_eq!(retry_after, text.parse().ok().map(Duration::from_secs));
        } else if let (Some(until), Some(d)) = (date_of(text.as_bytes()), date_read) {
            assert_eq!(
                retry_after,
                Some(Duration::from_millis(until.saturating_sub(d.unix_ms.0)))
            );
        } else {
            assert_eq!(retry_after, None, "{text:?}");
        }
    }
}

// ---------------------------------------------------------------------
// Etags.

/// An etag as a server may spell it (header or listing), normalised,
/// compared, and sent back in every dialect's conditions.
pub fn etag(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let etag = Etag::new(&raw);
    assert_eq!(Etag::new(&etag.quoted()), etag, "quoting is undone");
    assert_eq!(
        Etag::new(&format!("W/{}", etag.quoted())),
        etag,
        "a weak etag names the same version"
    );
    for which in [Which::S3, Which::Azure] {
        check_condition_round_trip(which, &dialect(which), &etag);
    }
    // GCS conditions are generation numbers: anything else is refused.
    let gcs = dialect(Which::Gcs);
    let op = StoreOp::Delete {
        key: KEY.into(),
        if_match: Some(etag.clone()),
    };
    let generation = !etag.as_str().is_empty() && etag.as_str().bytes().all(|b| b.is_ascii_digit());
    assert_eq!(render_and_sign(Which::Gcs, &gcs, &op).is_some(), generation);
    // Unquoted S3 conditions send the bare value.
    let mut config = S3Config::custom("http://127.0.0.1:9000", "locks", "us-east-1");
    config.etag_quoting = EtagQuoting::Unquoted;
    let unquoted = S3Dialect::new(config).expect("valid S3 config");
    if let Some(request) = render_and_sign(Which::S3, &unquoted, &op) {
        assert_eq!(
            request.headers().get("if-match").map(|v| v.as_bytes()),
            Some(etag.as_str().as_bytes())
        );
    }
}

// ---------------------------------------------------------------------
// Settings from the environment.

/// Every variable the adapters read.
const VARIABLES: &[&str] = &[
    "LEASE_PROVIDER",
    "LEASE_BUCKET",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "LEASE_ENDPOINT",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "LEASE_ACCOUNT",
    "LEASE_PATH_STYLE",
    "LEASE_ETAG_QUOTING",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "LEASE_UNSIGNED",
    "LEASE_KEY",
    "LEASE_TTL",
    "LEASE_PROTOCOL",
    "LEASE_PROBE",
    "AWS_LAMBDA_LOG_LEVEL",
    "RUST_LOG",
];

const SECRETS: &[&str] = &[
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
];

/// Appended to every non-blank secret, so that a leak is recognisable.
const MARKER: &str = "Zq9SecretZq9";

/// `NAME=value` lines as an environment: the last line for a name wins; a
/// value that is not UTF-8 reads as unset, as `std::env::var` gives it to
/// `lease_native::settings::env`.
fn environment(data: &[u8]) -> Vec<(String, Option<String>)> {
    let mut vars = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        let (name, value) = split_once(line, b"=");
        let Some(value) = value else { continue };
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        let mut value = String::from_utf8(value.to_vec()).ok();
        if SECRETS.contains(&name) {
            value = value.map(|v| if v.trim().is_empty() { v } else { v + MARKER });
        }
        vars.push((name.to_string(), value));
    }
    vars
}

fn lookup(vars: &[(String, Option<String>)]) -> impl Fn(&str) -> Option<String> + '_ {
    move |name| {
        vars.iter()
            .rev()
            .find(|(k, _)| k.as_bytes() == name.as_bytes())
            .and_then(|(_, v)| v.clone())
    }
}

/// `StoreSettings`, `Settings` and `lease_key` from the lines, the signer and
/// dialect they make, the Lambda log level; no secret in any message; a
/// configuration the settings accept runs a lease cycle.
pub fn settings_env(data: &[u8]) {
    let vars = environment(data);
    let get = lookup(&vars);
    // A value that is not a secret may contain the marker: nothing to check then.
    let marked = vars.iter().any(|(name, value)| {
        !SECRETS.contains(&name.as_str()) && value.as_ref().is_some_and(|v| v.contains(MARKER))
    });
    let no_secret = |what: &str, text: String| {
        assert!(
            marked || !text.contains(MARKER),
            "{what} shows a secret: {text}"
        );
    };
    match StoreSettings::from_lookup(&get) {
        Ok(settings) => {
            no_secret("Debug", format!("{settings:?}"));
            no_secret("describe", settings.describe());
            let dialect = settings
                .dialect()
                .expect("accepted settings make a dialect");
            let _ = dialect.render(&StoreOp::Get { key: KEY.into() });
            match settings.signer() {
                Ok(signer) => no_secret("the signer's Debug", format!("{signer:?}")),
                Err(e) => no_secret("a signer error", e.to_string()),
            }
        }
        Err(e) => no_secret("an error", e.to_string()),
    }
    match (
        lease_key(&get),
        Settings::from_lookup(&get, || HOLDER.to_string()),
    ) {
        (Ok(key), Ok(settings)) => {
            let cfg = settings.config(key);
            cfg.validate()
                .expect("accepted settings make a valid config");
            exercise(&cfg);
        }
        (Err(e), _) | (_, Err(e)) => no_secret("an error", e.to_string()),
    }
    let _ = lease_lambda::logging::level(&get);
}

// ---------------------------------------------------------------------
// The CLI's flags.

#[cfg(unix)]
fn os_arg(bytes: &[u8]) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    std::ffi::OsString::from_vec(bytes.to_vec())
}

#[cfg(not(unix))]
fn os_arg(bytes: &[u8]) -> std::ffi::OsString {
    String::from_utf8_lossy(bytes).into_owned().into()
}

/// The `lease` command line, NUL-separated arguments after the program
/// name: parsed as the binary parses it, then its settings (with an empty
/// environment besides what clap reads itself) and configuration, the
/// grace period of `run`, the etag of `renew`/`release`/`break`, and a
/// lease cycle on the configuration it accepts.
pub fn cli_flags(data: &[u8]) {
    let args = std::iter::once(os_arg(b"lease")).chain(data.split(|b| *b == 0).map(os_arg));
    let cli = match Cli::parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Usage errors exit 2; --help and --version 0.
            assert!(matches!(e.exit_code(), 0 | 2), "{e}");
            let _ = e.to_string();
            return;
        }
    };
    // `plan` needs no store: arithmetic on any flags, never a panic.
    if let Command::Plan {
        renew_every,
        leases,
        contenders,
    } = &cli.command
    {
        if let Ok(plan) = cli.plan(|_| None, *renew_every, *leases, *contenders) {
            let _ = (plan.to_string(), plan.to_json());
        }
        return;
    }
    let Ok(settings) = cli.store_settings(|_| None) else {
        return;
    };
    let cfg = match cli.lease_config(|_| None, || HOLDER.to_string()) {
        Ok(cfg) => cfg,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    match &cli.command {
        Command::Run { grace, .. } => {
            let grace = run_grace(*grace, &cfg);
            if check_grace(&cfg, grace).is_ok() {
                assert!(grace <= max_grace(&cfg));
                let (term, kill) = stop_times(&cfg, Mono(1_000) + cfg.ttl, grace);
                assert!(term <= kill);
            }
        }
        Command::Renew { etag } | Command::Release { etag } | Command::Break { etag, .. } => {
            let etag = Etag::new(etag);
            if let Ok(dialect) = settings.dialect() {
                let _ = dialect.render(&StoreOp::Delete {
                    key: cfg.key.clone(),
                    if_match: Some(etag),
                });
            }
        }
        // `ls PREFIX`: the prefix is the key the settings were built with.
        Command::Ls {
            prefix: Some(prefix),
            ..
        } => assert_eq!(&cfg.key, prefix),
        Command::Inspect
        | Command::Acquire { .. }
        | Command::Probe { .. }
        | Command::Policy { .. }
        | Command::Replay { .. }
        | Command::Plan { .. }
        | Command::Ls { .. } => {}
    }
    exercise(&cfg);
}

// ---------------------------------------------------------------------
// Running machines to the end, on virtual time.

/// Polls `future` to its end with no real waiting (every store and clock
/// here completes at once); a future that never ends is a finding.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
    panic!("no progress after a million polls");
}

/// A configuration the settings accepted works: on an empty in-memory
/// store it acquires, renews (where the protocol renews) and releases.
fn exercise(cfg: &LeaseConfig) {
    let clock = VirtualClock::new(EPOCH);
    let store = MemStore::new(clock.clone());
    let acquired = block_on(drive(
        &mut LeaseOp::acquire(cfg.clone(), Entropy::from_seed(1)),
        &store,
        &clock,
        |_| {},
    ));
    let lease = match acquired {
        Ok(AcquireOutcome::Acquired(lease)) => lease,
        other => panic!("an accepted configuration does not acquire a free lease: {other:?}"),
    };
    let _ = Claim::of_lease(cfg, &lease);
    let _ = stop_times(cfg, lease.valid_until, run_grace(None, cfg));
    // The mutex has no renewal: one ttl per holder.
    let lease = if cfg.protocol.renews() {
        let renewed = block_on(drive(
            &mut LeaseOp::renew(cfg.clone(), Entropy::from_seed(2), lease),
            &store,
            &clock,
            |_| {},
        ));
        match renewed {
            Ok(RenewOutcome::Renewed(lease)) => lease,
            other => panic!("an accepted configuration does not renew: {other:?}"),
        }
    } else {
        lease
    };
    let released = block_on(drive(
        &mut LeaseOp::release(cfg.clone(), Entropy::from_seed(3), lease),
        &store,
        &clock,
        |_| {},
    ));
    assert!(
        matches!(released, Ok(ReleaseOutcome::Released { .. })),
        "an accepted configuration does not release: {released:?}"
    );
}

fn config(protocol: Protocol) -> LeaseConfig {
    let mut cfg = LeaseConfig::new(KEY, HOLDER, Duration::from_secs(10));
    cfg.protocol = protocol;
    cfg
}

/// The transport of [`lease_ops`]: each request gets the next canned
/// response, after its delay on the virtual clock (at least 1 ms, at most
/// the request timeout, then it is a timeout); once they run out, every
/// request times out.
struct CannedTransport<'a> {
    responses: RefCell<std::vec::IntoIter<&'a [u8]>>,
    clock: VirtualClock,
    request_timeout: Duration,
}

impl HttpTransport for CannedTransport<'_> {
    fn send(
        &self,
        _request: http::Request<Vec<u8>>,
    ) -> impl Future<Output = Result<http::Response<Vec<u8>>, TransportError>> {
        let next = self.responses.borrow_mut().next();
        async move {
            let timeout = || TransportError {
                kind: TransportErrorKind::Timeout,
                message: "no reply in time".into(),
            };
            let Some(chunk) = next else {
                self.clock.advance(self.request_timeout);
                return Err(timeout());
            };
            let canned = response(chunk);
            let delay = Duration::from_millis(canned.delay_ms.max(1));
            if delay > self.request_timeout {
                self.clock.advance(self.request_timeout);
                return Err(timeout());
            }
            self.clock.advance(delay);
            if !(100..=999).contains(&canned.status) {
                return Err(TransportError {
                    kind: match canned.status % 3 {
                        0 => TransportErrorKind::Connect,
                        1 => TransportErrorKind::Reset,
                        _ => TransportErrorKind::Other,
                    },
                    message: "canned transport error".into(),
                });
            }
            Ok(canned.http())
        }
    }
}

/// Watches every call and its reply: a version read as an unreadable
/// object must never be the condition of a write to it.
struct Watch<S> {
    inner: S,
    /// `(key, etag)` of versions read and not understood.
    unreadable: RefCell<BTreeSet<(String, Etag)>>,
    /// `(key, etag)` of versions the store said our own writes made: ours
    /// to replace or delete, whatever a read of them later shows.
    written: RefCell<BTreeSet<(String, Etag)>>,
    /// A break with a token floor replaces exactly this version, on purpose.
    floor_etag: Option<Etag>,
    fence_key: String,
    calls: RefCell<u64>,
}

impl<S: Store> Watch<S> {
    /// The lease object, its epoch objects, the fenced object.
    fn shared(&self, key: &str) -> bool {
        key == KEY || key.starts_with(&format!("{KEY}/")) || key == self.fence_key
    }

    fn understood(&self, key: &str, body: &[u8]) -> bool {
        if key == self.fence_key {
            Fenced::decode(body).is_some()
        } else if key == KEY || key.starts_with(&format!("{KEY}/")) {
            LeaseRecord::decode(body).is_ok()
        } else {
            true
        }
    }
}

impl<S: Store> Store for Watch<S> {
    async fn call(&self, op: StoreOp) -> StoreReply {
        *self.calls.borrow_mut() += 1;
        assert!(
            *self.calls.borrow() < 100_000,
            "an operation that never ends"
        );
        let target = match &op {
            StoreOp::Put {
                key,
                condition: PutCondition::IfMatch(etag),
                ..
            }
            | StoreOp::Delete {
                key,
                if_match: Some(etag),
            } => Some((key.clone(), etag.clone())),
            // The probe cleans up its own scratch keys unconditionally;
            // keys other clients share are only ever written conditionally.
            StoreOp::Put {
                key,
                condition: PutCondition::None,
                ..
            }
            | StoreOp::Delete {
                key,
                if_match: None,
            } if self.shared(key) => panic!("an unconditional write to {key}"),
            _ => None,
        };
        if let Some(target) = &target {
            let deliberate = self.floor_etag.as_ref() == Some(&target.1) && target.0 == KEY;
            let ours = self.written.borrow().contains(target);
            assert!(
                deliberate || ours || !self.unreadable.borrow().contains(target),
                "a write aimed at an object it could not read: {op:?}"
            );
        }
        let reply = self.inner.call(op.clone()).await;
        if std::env::var_os("FUZZ_TRACE").is_some() {
            eprintln!("{op:?}\n  -> {:?}", reply.kind);
        }
        if let (StoreOp::Put { key, .. }, ReplyKind::Written { etag: Some(etag) }) =
            (&op, &reply.kind)
        {
            self.written
                .borrow_mut()
                .insert((key.clone(), etag.clone()));
        }
        if let (StoreOp::Get { key }, ReplyKind::Found { etag, body }) = (&op, &reply.kind) {
            let entry = (key.clone(), etag.clone());
            if self.understood(key, body) {
                self.unreadable.borrow_mut().remove(&entry);
            } else {
                self.unreadable.borrow_mut().insert(entry);
            }
        }
        reply
    }
}

/// A lease operation (protocol, operation and dialect from bytes 0-2)
/// against canned responses separated by `\n~~~\n`: it finishes within
/// bounded virtual time, never writes over an object it could not read,
/// and its outcome can be shown.
pub fn lease_ops(data: &[u8]) {
    let [protocol, operation, which, rest @ ..] = data else {
        return;
    };
    let protocol = [Protocol::Cas, Protocol::Epochs, Protocol::Mutex][usize::from(*protocol % 3)];
    let which = [Which::S3, Which::Gcs, Which::Azure][usize::from(*which % 3)];
    let mut cfg = config(protocol);
    if matches!(which, Which::Gcs) {
        cfg.min_write_interval = lease_core::wire::GCS_MIN_WRITE_INTERVAL;
    }
    let mut responses = Vec::new();
    let mut rest = rest;
    loop {
        let (chunk, after) = split_once(rest, b"\n~~~\n");
        responses.push(chunk);
        match after {
            Some(after) => rest = after,
            None => break,
        }
    }
    let clock = VirtualClock::new(EPOCH);
    let transport = CannedTransport {
        responses: RefCell::new(responses.into_iter()),
        clock: clock.clone(),
        request_timeout: cfg.request_timeout,
    };
    let http_store = HttpStore::new(dialect(which), transport, clock.clone());
    let http_store = match which {
        Which::S3 | Which::Gcs => http_store.with_signer(SigV4Signer::new(
            "AKIDFUZZ",
            "fuzz-secret",
            None,
            "us-east-1",
        )),
        Which::Azure => http_store.with_signer(
            SharedKeySigner::new("devstoreaccount1", "ZnV6ei1rZXktbm90LWEtc2VjcmV0")
                .expect("valid base64 key"),
        ),
    };
    let floor = Etag::new("e0");
    let store = Watch {
        inner: http_store,
        unreadable: RefCell::default(),
        written: RefCell::default(),
        floor_etag: (operation % 8 == 5).then(|| floor.clone()),
        fence_key: "data/protected".into(),
        calls: RefCell::new(0),
    };
    let entropy = Entropy::from_seed(7);
    let held = || {
        let record = LeaseRecord {
            token: 5,
            expires_at: EPOCH + cfg.ttl,
            holder: HOLDER.into(),
            acquisition: "s0".into(),
            nonce: "n0".into(),
            acquired_at: Some(EPOCH),
            ttl_ms: Some(cfg.ttl.as_millis() as u64),
            released: false,
            released_at: None,
            meta: Default::default(),
            protocol: Some(protocol.name().into()),
            strays: false,
            runs: Vec::new(),
            foreign: None,
            owned_by: None,
        };
        Lease::resume(
            &cfg,
            Observation {
                etag: Etag::new("e0"),
                record,
                date: StoreDate::exact(EPOCH),
                read_at: Mono(0),
                free: false,
            },
        )
    };
    let started = clock.now().mono;
    let shown = match operation % 8 {
        0 => show(block_on(drive(
            &mut LeaseOp::acquire(cfg.clone(), entropy),
            &store,
            &clock,
            |_| {},
        ))),
        1 => show(block_on(drive(
            &mut LeaseOp::renew(cfg.clone(), entropy, held()),
            &store,
            &clock,
            |_| {},
        ))),
        2 => show(block_on(drive(
            &mut LeaseOp::release(cfg.clone(), entropy, held()),
            &store,
            &clock,
            |_| {},
        ))),
        3 => show(block_on(drive(
            &mut LeaseOp::inspect(cfg.clone(), entropy),
            &store,
            &clock,
            |_| {},
        ))),
        4 | 5 => {
            let request = BreakRequest {
                etag: floor,
                token_floor: (operation % 8 == 5).then_some(9),
            };
            show(block_on(drive(
                &mut LeaseOp::break_lease(cfg.clone(), entropy, request),
                &store,
                &clock,
                |_| {},
            )))
        }
        6 => {
            let mut fence = FenceOp::new(
                cfg.clone(),
                entropy,
                "data/protected",
                5,
                b"payload".to_vec(),
            );
            match block_on(drive(&mut fence, &store, &clock, |_| {})) {
                Ok(outcome) => format!("{outcome:?}"),
                Err(e) => e.to_string(),
            }
        }
        _ => match block_on(drive(
            &mut Probe::new(cfg.clone(), entropy),
            &store,
            &clock,
            |_| {},
        )) {
            Ok(report) => {
                let _ = report.supports(protocol);
                report.to_string()
            }
            Err(e) => e.to_string(),
        },
    };
    assert!(!shown.is_empty());
    // The probe runs a dozen calls, each bounded by op_timeout; a mutex
    // release may wait out a ttl for stray creates.
    let bound = cfg.op_timeout * 16 + cfg.ttl;
    let took = clock.now().mono - started;
    assert!(took <= bound, "took {took:?} of virtual time");
}

fn show<T: core::fmt::Debug>(outcome: Result<T, lease_core::LeaseError>) -> String {
    match outcome {
        Ok(outcome) => format!("{outcome:?}"),
        Err(e) => {
            let _ = e.unsettled();
            e.to_string()
        }
    }
}
