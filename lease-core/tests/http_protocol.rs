//! The lease machines over HTTP: [`LeaseOp`] and [`Elector`] driven by
//! [`drive`] through a real `HttpStore<S3Dialect, CannedTransport,
//! VirtualClock>` (SigV4-signed with feature `sigv4`, unsigned otherwise).
//!
//! `CannedTransport` is an S3 emulator in a box: it interprets each rendered
//! `http::Request` (method, path, `If-None-Match` / `If-Match`, body) against
//! a [`MemStore`] and answers as moto 5.x does, reusing the responses
//! captured in `tests/data/moto/` as templates (status, headers, XML error
//! bodies) with a fresh `Date` from the box's clock and the object's `ETag`.
//! With `sigv4`, the box also checks every signature by signing the request
//! again with the credentials it knows (as moto does with auth on, it does
//! not enforce a limit on clock skew). A script can replace the box's answer
//! for the next requests: canned responses (moto captures where they exist,
//! AWS-shaped bodies otherwise), replies lost after the write applied, or no
//! reply at all. Every test asserts the exact HTTP exchanges.

mod support;
use core::future::poll_fn;
use core::task::Poll;
use http::header::{
    HeaderName, HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, DATE, ETAG, HOST,
    IF_MATCH, IF_NONE_MATCH,
};
use http::{HeaderMap, Method, Request, Response};
use lease_core::client::{drive, drive_until};
use lease_core::protocol::Acquire;
use lease_core::protocol::BreakRequest;
use lease_core::record::RecordErrorKind;
use lease_core::store::{PutCondition, ReplyKind, TransportErrorKind};
use lease_core::time::StoreDate;
#[cfg(feature = "sigv4")]
use lease_core::wire::SigV4Signer;
#[cfg(feature = "sigv4")]
use lease_core::wire::Signer;
use lease_core::wire::{S3Config, S3Dialect};
use lease_core::{
    AcquireOutcome, BreakOutcome, Event, Lease, LeaseError, LostReason, ReleaseOutcome,
    RenewOutcome,
};
use lease_core::{
    Clock, Elector, ElectorExit, Entropy, Etag, HttpStore, HttpTransport, LeaseConfig, LeaseOp,
    LeaseRecord, Machine, MemStore, Mono, Output, Store, StoreOp, TransportError, UnixMillis,
    VirtualClock,
};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};
use support::{moto, percent_decode};

const ENDPOINT: &str = "http://127.0.0.1:9000";
const REGION: &str = "us-east-1";
/// Bucket and key the moto captures were made with, so their bodies fit.
const BUCKET: &str = "locks";
const KEY: &str = "leases/a";
/// Sun, 22 Nov 2026 03:10:47 GMT: the `Date` of the moto captures.
const EPOCH: UnixMillis = UnixMillis(1_795_317_047_000);
const TTL: Duration = Duration::from_secs(30);
const HOUR: Duration = Duration::from_secs(3600);
#[cfg(feature = "sigv4")]
const AKID: &str = "AKIDEXAMPLE";
#[cfg(feature = "sigv4")]
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

// ---- responses ----

/// An error as AWS S3 sends it (no moto capture exists for these).
fn aws_error(status: u16, code: &str, message: &str, extra: &[(&str, &str)]) -> Response<Vec<u8>> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message>\
         <RequestId>4442587FB7D0A2F9</RequestId><HostId>5xqLdDs4U+8LqN0V+Tm6jh8mXh+2jVbzfMvy8ZuAq6OWlKbJ0UGgF0D+7zV0UvZeBQHvhq7Axk0=</HostId></Error>"
    );
    let mut response = Response::builder()
        .status(status)
        .header("x-amz-request-id", "4442587FB7D0A2F9")
        .header(
            "x-amz-id-2",
            "5xqLdDs4U+8LqN0V+Tm6jh8mXh+2jVbzfMvy8ZuAq6OWlKbJ0UGgF0D+7zV0UvZeBQHvhq7Axk0=",
        )
        .header(CONTENT_TYPE, "application/xml")
        .header("transfer-encoding", "chunked")
        .header(DATE, "Sun, 22 Nov 2026 03:10:47 GMT")
        .header("server", "AmazonS3")
        .header("connection", "close");
    for (name, value) in extra {
        response = response.header(*name, *value);
    }
    response.body(body.into_bytes()).unwrap()
}

/// The trace of a create answered `status` and not applied: the re-read
/// finds no object, and the create is sent again.
fn created_again_after(status: &str) -> [String; 4] {
    let refused = format!("PUT If-None-Match {status}");
    ["GET 404", &refused, "GET 404", "PUT If-None-Match 200"].map(String::from)
}

fn conflict_409() -> Response<Vec<u8>> {
    aws_error(
        409,
        "ConditionalRequestConflict",
        "A conflicting conditional operation is currently in progress against this resource. Try again.",
        &[],
    )
}

fn slow_down_503() -> Response<Vec<u8>> {
    aws_error(
        503,
        "SlowDown",
        "Please reduce your request rate.",
        &[("retry-after", "2")],
    )
}

fn internal_error_500() -> Response<Vec<u8>> {
    aws_error(
        500,
        "InternalError",
        "We encountered an internal error. Please try again.",
        &[],
    )
}

fn not_implemented_501(header: &str) -> Response<Vec<u8>> {
    let mut response = aws_error(
        501,
        "NotImplemented",
        "A header you provided implies functionality that is not implemented",
        &[],
    );
    let body = String::from_utf8(response.body().clone()).unwrap().replace(
        "</Message>",
        &format!("</Message><Header>{header}</Header>"),
    );
    *response.body_mut() = body.into_bytes();
    response
}

fn set(response: &mut Response<Vec<u8>>, name: HeaderName, value: &str) {
    response
        .headers_mut()
        .insert(name, HeaderValue::from_str(value).unwrap());
}

fn http_date(at: UnixMillis) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(at.0))
}

/// `x-amz-date` (`YYYYMMDD'T'HHMMSS'Z'`) in milliseconds since the epoch.
#[cfg(feature = "sigv4")]
fn parse_amz_date(s: &str) -> UnixMillis {
    let n = |r: core::ops::Range<usize>| s[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(4..6), n(6..8));
    // Days from civil (H. Hinnant).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + n(9..11) * 3600 + n(11..13) * 60 + n(13..15);
    UnixMillis(u64::try_from(secs * 1000).unwrap())
}

// ---- the S3 emulator in a box ----

/// An S3 server over a [`MemStore`], answering like moto.
struct S3Box {
    objects: MemStore,
    clock: VirtualClock,
    /// How far the server's clock runs ahead of `clock`'s wall time.
    ahead: Duration,
    /// The only credentials the server knows.
    #[cfg(feature = "sigv4")]
    credentials: SigV4Signer,
}

impl S3Box {
    fn date(&self) -> UnixMillis {
        self.clock.wall() + self.ahead
    }

    /// `response` as sent now: `Date` from the server's clock.
    fn dated(&self, mut response: Response<Vec<u8>>) -> Response<Vec<u8>> {
        set(&mut response, DATE, &http_date(self.date()));
        response
    }

    fn serve(&self, request: &Request<Vec<u8>>) -> Response<Vec<u8>> {
        self.dated(self.answer(request))
    }

    fn answer(&self, request: &Request<Vec<u8>>) -> Response<Vec<u8>> {
        if let Some(refused) = self.authenticate(request) {
            return refused;
        }
        let path = request.uri().path();
        if path.trim_matches('/') == BUCKET && *request.method() == Method::GET {
            return self.list(request.uri().query().unwrap_or(""));
        }
        let (bucket, key) = path
            .strip_prefix('/')
            .and_then(|p| p.split_once('/'))
            .unwrap_or_else(|| panic!("not a path-style object URL: {path}"));
        if bucket != BUCKET {
            return moto("get_no_such_bucket");
        }
        let key = String::from_utf8(percent_decode(key)).unwrap();
        let header = |name: HeaderName| {
            request
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        match *request.method() {
            Method::GET => match self.objects.apply(&StoreOp::Get { key }).kind {
                ReplyKind::Found { etag, body } => {
                    let mut response = moto("get_found");
                    set(&mut response, ETAG, &etag.quoted());
                    set(&mut response, CONTENT_LENGTH, &body.len().to_string());
                    set(
                        &mut response,
                        HeaderName::from_static("last-modified"),
                        &http_date(self.date()),
                    );
                    response.headers_mut().remove("x-amz-content-sha256");
                    *response.body_mut() = body;
                    response
                }
                ReplyKind::Missing => moto("get_no_such_key"),
                other => panic!("GET: {other:?}"),
            },
            Method::PUT => {
                let body = request.body().clone();
                assert_eq!(
                    header(CONTENT_LENGTH),
                    Some(body.len().to_string()),
                    "Content-Length"
                );
                assert_eq!(header(CONTENT_TYPE).as_deref(), Some("application/json"));
                let condition = match (header(IF_NONE_MATCH), header(IF_MATCH)) {
                    (Some(star), None) if star == "*" => PutCondition::IfAbsent,
                    (None, Some(etag)) => {
                        assert!(
                            etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'),
                            "If-Match etags are quoted: {etag}"
                        );
                        PutCondition::IfMatch(Etag::new(&etag))
                    }
                    (None, None) => PutCondition::None,
                    other => panic!("conditional headers {other:?}"),
                };
                let if_absent = condition == PutCondition::IfAbsent;
                let op = StoreOp::Put {
                    key,
                    body,
                    condition,
                };
                match self.objects.apply(&op).kind {
                    ReplyKind::Written { etag: Some(etag) } => {
                        let mut response = moto("put_created");
                        set(&mut response, ETAG, &etag.quoted());
                        set(
                            &mut response,
                            HeaderName::from_static("last-modified"),
                            &http_date(self.date()),
                        );
                        response
                    }
                    ReplyKind::PreconditionFailed if if_absent => moto("put_if_none_match_exists"),
                    ReplyKind::PreconditionFailed => moto("put_if_match_stale"),
                    ReplyKind::Missing => moto("put_if_match_missing_key"),
                    other => panic!("PUT: {other:?}"),
                }
            }
            Method::DELETE => {
                let if_match = header(IF_MATCH).map(|e| Etag::new(&e));
                match self.objects.apply(&StoreOp::Delete { key, if_match }).kind {
                    ReplyKind::Deleted => moto("delete_ok"),
                    ReplyKind::Missing => moto("delete_missing"),
                    ReplyKind::PreconditionFailed => moto("delete_if_match_stale"),
                    other => panic!("DELETE: {other:?}"),
                }
            }
            ref other => panic!("method {other}"),
        }
    }

    /// ListObjectsV2, in one page, as moto lists it.
    fn list(&self, query: &str) -> Response<Vec<u8>> {
        let mut prefix = String::new();
        for pair in query.split('&') {
            if let Some(value) = pair.strip_prefix("prefix=") {
                prefix = String::from_utf8(percent_decode(value)).unwrap();
            }
        }
        let contents: String = self
            .objects
            .keys(&prefix)
            .iter()
            .map(|k| format!("<Contents><Key>{k}</Key><Size>1</Size></Contents>"))
            .collect();
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>{BUCKET}</Name>\
             <Prefix>{prefix}</Prefix><IsTruncated>false</IsTruncated>{contents}</ListBucketResult>"
        );
        Response::builder()
            .status(200)
            .header(CONTENT_TYPE, "application/xml")
            .body(body.into_bytes())
            .unwrap()
    }

    /// moto with auth on: no signature is an HTML 500, an unknown key id
    /// `InvalidAccessKeyId`, a wrong signature `SignatureDoesNotMatch`.
    #[cfg(feature = "sigv4")]
    fn authenticate(&self, request: &Request<Vec<u8>>) -> Option<Response<Vec<u8>>> {
        let Some(auth) = request.headers().get(AUTHORIZATION) else {
            return Some(moto("unsigned_html_500"));
        };
        let auth = auth.to_str().unwrap();
        let credential = format!(
            "AWS4-HMAC-SHA256 Credential={}/",
            self.credentials.access_key_id()
        );
        if !auth.starts_with(&credential) {
            return Some(moto("denied_invalid_access_key"));
        }
        let at = parse_amz_date(request.headers()["x-amz-date"].to_str().unwrap());
        let mut expected = Request::builder()
            .method(request.method())
            .uri(request.uri())
            .body(request.body().clone())
            .unwrap();
        *expected.headers_mut() = request.headers().clone();
        self.credentials.sign(&mut expected, at).unwrap();
        (expected.headers()[AUTHORIZATION] != auth).then(|| moto("denied_signature_mismatch"))
    }

    #[cfg(not(feature = "sigv4"))]
    fn authenticate(&self, request: &Request<Vec<u8>>) -> Option<Response<Vec<u8>>> {
        assert!(!request.headers().contains_key(AUTHORIZATION), "unsigned");
        None
    }
}

// ---- the transport ----

/// What the transport does with the next request.
enum Step {
    /// The box answers.
    Serve,
    /// The box never sees the request; the client gets this response.
    Answer(Response<Vec<u8>>),
    /// The box applies the request; the client gets this response instead.
    ApplyThen(Response<Vec<u8>>),
    /// The request never reaches the box and no response comes.
    Lose(TransportErrorKind),
    /// The box applies the request; its response is lost.
    ApplyThenLose(TransportErrorKind),
}

/// One request as sent and what came back.
struct Exchange {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Vec<u8>,
    /// The box's monotonic time when the request arrived.
    at: Mono,
    /// `None`: no response reached the client.
    status: Option<u16>,
    etag: Option<String>,
}

impl Exchange {
    fn header(&self, name: HeaderName) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    fn record(&self) -> LeaseRecord {
        LeaseRecord::decode(&self.body).unwrap()
    }

    /// `GET 404`, `PUT If-None-Match 200`, `PUT If-Match lost`...
    fn line(&self) -> String {
        let condition = if self.headers.contains_key(IF_NONE_MATCH) {
            " If-None-Match"
        } else if self.headers.contains_key(IF_MATCH) {
            " If-Match"
        } else {
            ""
        };
        let status = self
            .status
            .map_or_else(|| "lost".to_string(), |s| s.to_string());
        let verb = if self.method == Method::GET && self.path.trim_matches('/') == BUCKET {
            "LIST".to_string()
        } else {
            self.method.to_string()
        };
        format!("{verb}{condition} {status}")
    }
}

struct Net {
    s3: S3Box,
    script: RefCell<VecDeque<Step>>,
    log: RefCell<Vec<Exchange>>,
}

/// [`HttpTransport`] into the box, under a script (see the module docs).
#[derive(Clone)]
struct CannedTransport(Rc<Net>);

impl HttpTransport for CannedTransport {
    async fn send(&self, request: Request<Vec<u8>>) -> Result<Response<Vec<u8>>, TransportError> {
        let net = &self.0;
        assert_eq!(request.headers()[HOST], "127.0.0.1:9000");
        let step = net.script.borrow_mut().pop_front().unwrap_or(Step::Serve);
        let lost = |kind| TransportError {
            kind,
            message: format!("{kind:?} (scripted)"),
        };
        let result = match step {
            Step::Serve => Ok(net.s3.serve(&request)),
            Step::Answer(response) => Ok(net.s3.dated(response)),
            Step::ApplyThen(response) => {
                net.s3.serve(&request);
                Ok(net.s3.dated(response))
            }
            Step::Lose(kind) => Err(lost(kind)),
            Step::ApplyThenLose(kind) => {
                net.s3.serve(&request);
                Err(lost(kind))
            }
        };
        let response = result.as_ref().ok();
        net.log.borrow_mut().push(Exchange {
            method: request.method().clone(),
            path: request.uri().path().to_string(),
            headers: request.headers().clone(),
            body: request.body().clone(),
            at: net.s3.clock.now().mono,
            status: response.map(|r| r.status().as_u16()),
            etag: response
                .and_then(|r| r.headers().get(ETAG))
                .map(|v| v.to_str().unwrap().to_string()),
        });
        result
    }
}

type S3Store = HttpStore<S3Dialect, CannedTransport, VirtualClock>;

fn new_net(clock: VirtualClock, ahead: Duration) -> Rc<Net> {
    Rc::new(Net {
        s3: S3Box {
            objects: MemStore::new(clock.clone()),
            clock,
            ahead,
            #[cfg(feature = "sigv4")]
            credentials: SigV4Signer::new(AKID, SECRET, None, REGION),
        },
        script: RefCell::default(),
        log: RefCell::default(),
    })
}

/// A client of `net` whose clock (signing time, wall fallback) is `clock`.
fn client(net: &Rc<Net>, clock: VirtualClock, bucket: &str) -> S3Store {
    let dialect = S3Dialect::new(S3Config::custom(ENDPOINT, bucket, REGION)).unwrap();
    signed(HttpStore::new(dialect, CannedTransport(net.clone()), clock))
}

#[cfg(feature = "sigv4")]
fn signed(store: S3Store) -> S3Store {
    store.with_signer(SigV4Signer::new(AKID, SECRET, None, REGION))
}

#[cfg(not(feature = "sigv4"))]
fn signed(store: S3Store) -> S3Store {
    store
}

fn cfg(holder: &str) -> LeaseConfig {
    LeaseConfig::new(KEY, holder, TTL)
}

fn run<M: Machine>(store: &S3Store, clock: &VirtualClock, machine: M) -> M::Outcome {
    support::run(store, clock, machine)
}

fn acquire_on(store: &S3Store, clock: &VirtualClock, holder: &str, seed: u128) -> AcquireOutcome {
    run(
        store,
        clock,
        LeaseOp::acquire(cfg(holder), Entropy::from_seed(seed)),
    )
    .unwrap_or_else(|e| panic!("acquire by {holder}: {e}"))
}

/// One client whose clock is the server's clock.
struct World {
    clock: VirtualClock,
    net: Rc<Net>,
    store: S3Store,
}

impl World {
    fn new() -> World {
        let clock = VirtualClock::new(EPOCH);
        let net = new_net(clock.clone(), Duration::ZERO);
        let store = client(&net, clock.clone(), BUCKET);
        World { clock, net, store }
    }

    fn run<M: Machine>(&self, machine: M) -> M::Outcome {
        run(&self.store, &self.clock, machine)
    }

    fn acquire(&self, holder: &str, seed: u128) -> Result<AcquireOutcome, LeaseError> {
        self.run(LeaseOp::acquire(cfg(holder), Entropy::from_seed(seed)))
    }

    fn acquired(&self, holder: &str, seed: u128) -> Lease {
        match self.acquire(holder, seed) {
            Ok(AcquireOutcome::Acquired(lease)) => lease,
            other => panic!("expected acquired, got {other:?}"),
        }
    }

    fn script(&self, steps: impl IntoIterator<Item = Step>) {
        self.net.script.borrow_mut().extend(steps);
    }

    fn trace(&self) -> Vec<String> {
        self.net.log.borrow().iter().map(Exchange::line).collect()
    }

    fn log(&self) -> std::cell::Ref<'_, Vec<Exchange>> {
        self.net.log.borrow()
    }

    fn clear(&self) {
        self.net.log.borrow_mut().clear();
    }

    fn object(&self) -> Option<(Etag, Vec<u8>)> {
        self.net.s3.objects.get(KEY)
    }

    fn record(&self) -> (Etag, LeaseRecord) {
        let (etag, body) = self.object().expect("lease object exists");
        (etag, LeaseRecord::decode(&body).unwrap())
    }
}

// ---- (a) against the emulator ----

#[test]
fn acquire_missing_is_get_404_then_put_if_none_match_200() {
    let w = World::new();
    let lease = w.acquired("a", 1);
    assert_eq!(w.trace(), ["GET 404", "PUT If-None-Match 200"]);
    let log = w.log();
    assert!(log.iter().take(2).all(|e| e.path == "/locks/leases/a"));
    assert_eq!(log[0].header(IF_NONE_MATCH), None);
    assert_eq!(log[0].header(IF_MATCH), None);
    assert!(log[0].body.is_empty());
    assert_eq!(log[1].header(IF_NONE_MATCH), Some("*"));
    assert_eq!(log[1].header(IF_MATCH), None);
    // The body sent is the lease's record, and it is what the store holds.
    let (etag, stored) = w.record();
    assert_eq!(log[1].record(), lease.record);
    assert_eq!(stored, lease.record);
    assert_eq!(lease.etag, etag);
    assert_eq!(log[1].etag, Some(etag.quoted()));
    assert_eq!(
        (lease.token, stored.holder.as_str(), stored.released),
        (1, "a", false)
    );
    // The store's Date stamps the expiry; its 1 s resolution is subtracted
    // from the local validity.
    assert_eq!(stored.expires_at, EPOCH + TTL);
    assert_eq!(lease.clock, (StoreDate::from_http_date(EPOCH), Mono(0)));
    let c = cfg("a");
    assert_eq!(
        lease.valid_until,
        Mono(0) + (TTL - Duration::from_secs(1) - c.drift_margin(Duration::ZERO))
    );
    if cfg!(feature = "sigv4") {
        for e in log.iter() {
            let auth = e.header(AUTHORIZATION).unwrap();
            assert!(
                auth.starts_with(
                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/us-east-1/s3/aws4_request"
                ),
                "{auth}"
            );
            assert_eq!(
                e.header(HeaderName::from_static("x-amz-date")),
                Some("20261122T031047Z")
            );
        }
        let put_auth = log[1].header(AUTHORIZATION).unwrap();
        assert!(put_auth.contains("if-none-match"), "{put_auth}");
    }
}

#[test]
fn busy_is_one_get_and_no_put() {
    let w = World::new();
    let lease = w.acquired("a", 1);
    w.clock.advance(Duration::from_secs(5));
    w.clear();
    match w.acquire("b", 2) {
        Ok(AcquireOutcome::Busy(busy)) => {
            assert_eq!(
                (busy.holder.as_str(), busy.token, busy.expires_at),
                ("a", 1, EPOCH + TTL)
            );
            assert_eq!(busy.etag, lease.etag);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.trace(), ["GET 200"]);
    assert_eq!(w.record().0, lease.etag, "nothing written");
}

#[test]
fn renew_and_release_are_one_put_if_match_each() {
    let w = World::new();
    let lease = w.acquired("a", 1);
    w.clock.advance(Duration::from_secs(10));
    w.clear();
    let renewed = match w.run(LeaseOp::renew(
        cfg("a"),
        Entropy::from_seed(2),
        lease.clone(),
    )) {
        Ok(RenewOutcome::Renewed(l)) => l,
        other => panic!("{other:?}"),
    };
    assert_eq!(w.trace(), ["PUT If-Match 200"]);
    let quoted = lease.etag.quoted();
    assert_eq!(w.log()[0].header(IF_MATCH), Some(quoted.as_str()));
    assert_eq!(w.log()[0].header(IF_NONE_MATCH), None);
    let (etag, stored) = w.record();
    assert_eq!(renewed.etag, etag);
    assert_ne!(renewed.etag, lease.etag);
    assert_eq!(
        (renewed.token, &renewed.acquisition),
        (lease.token, &lease.acquisition)
    );
    // Stamped from the last Date seen (at acquisition) plus local elapsed time.
    assert_eq!(stored.expires_at, EPOCH + Duration::from_secs(40));
    assert!(renewed.valid_until > lease.valid_until);

    w.clear();
    assert_eq!(
        w.run(LeaseOp::release(
            cfg("a"),
            Entropy::from_seed(3),
            renewed.clone()
        )),
        Ok(ReleaseOutcome::Released { token: 1 })
    );
    assert_eq!(w.trace(), ["PUT If-Match 200"]);
    let quoted = renewed.etag.quoted();
    assert_eq!(w.log()[0].header(IF_MATCH), Some(quoted.as_str()));
    let (released_etag, stored) = w.record();
    assert!(stored.released);
    assert_eq!(stored.token, 1, "release keeps the token");
    assert!(stored.expires_at <= w.net.s3.date());

    // Released: the next acquirer takes it at once with token + 1.
    w.clear();
    let next = w.acquired("b", 4);
    assert_eq!(w.trace(), ["GET 200", "PUT If-Match 200"]);
    let quoted = released_etag.quoted();
    assert_eq!(w.log()[1].header(IF_MATCH), Some(quoted.as_str()));
    assert_eq!(next.token, 2);
}

#[test]
fn expired_lease_is_taken_over_with_token_plus_one_in_two_requests() {
    let w = World::new();
    let old = w.acquired("a", 1);
    assert_eq!(old.record.expires_at, EPOCH + TTL);
    // Dates are truncated to the second: at 30.999 s the store says 30 s,
    // which is not past expires_at.
    w.clock.advance(Duration::from_millis(30_999));
    w.clear();
    assert!(matches!(w.acquire("b", 2), Ok(AcquireOutcome::Busy(_))));
    assert_eq!(w.trace(), ["GET 200"]);
    w.clock.advance(Duration::from_millis(1));
    w.clear();
    let lease = w.acquired("b", 3);
    assert_eq!(w.trace(), ["GET 200", "PUT If-Match 200"]);
    let quoted = old.etag.quoted();
    assert_eq!(w.log()[1].header(IF_MATCH), Some(quoted.as_str()));
    assert_eq!(lease.token, 2);
    let (_, stored) = w.record();
    assert_eq!((stored.holder.as_str(), stored.token), ("b", 2));
    assert_eq!(stored.expires_at, EPOCH + Duration::from_secs(31) + TTL);
    assert_ne!(stored.acquisition, old.acquisition);
}

#[test]
fn stale_renew_gets_moto_412_and_rereads_to_lost() {
    let w = World::new();
    let a = w.acquired("a", 1);
    // Within a's validity only an operator's break lets b in.
    let broken = BreakRequest {
        etag: a.etag.clone(),
        token_floor: None,
    };
    assert_eq!(
        w.run(LeaseOp::break_lease(
            cfg("op"),
            Entropy::from_seed(2),
            broken
        )),
        Ok(BreakOutcome { token: 1 })
    );
    let b = w.acquired("b", 3);
    assert_eq!(b.token, 2);
    let taken = LostReason::TakenBy {
        holder: "b".into(),
        token: 2,
        released: false,
    };
    w.clock.advance(Duration::from_secs(10));
    w.clear();
    assert_eq!(
        w.run(LeaseOp::renew(cfg("a"), Entropy::from_seed(4), a.clone())),
        Ok(RenewOutcome::Lost(taken.clone()))
    );
    assert_eq!(w.trace(), ["PUT If-Match 412", "GET 200"]);
    let quoted = a.etag.quoted();
    assert_eq!(w.log()[0].header(IF_MATCH), Some(quoted.as_str()));
    w.clear();
    assert_eq!(
        w.run(LeaseOp::release(cfg("a"), Entropy::from_seed(5), a)),
        Ok(ReleaseOutcome::AlreadyLost(taken))
    );
    assert_eq!(w.trace(), ["PUT If-Match 412", "GET 200"]);
    assert_eq!(w.record().0, b.etag, "b's lease untouched");
}

#[test]
fn elector_campaigns_renews_and_resigns_over_http() {
    let w = World::new();
    let mut elector = Elector::new(cfg("a"), Entropy::from_seed(1));
    let mut events = vec![];
    let clock = w.clock.clone();
    let stop = poll_fn(move |_| {
        if clock.now().mono >= Mono(45_000) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    });
    let exit = pollster::block_on(drive_until(
        &mut elector,
        &w.store,
        &w.clock,
        |e| events.push(e),
        stop,
    ));
    assert_eq!(
        exit,
        ElectorExit::Resigned {
            released: Some(Ok(ReleaseOutcome::Released { token: 1 }))
        }
    );
    // Renewals at 10, 20, 30, 40 and 50 s (the stop is noticed while the
    // last one is in flight), then the release.
    let renewals = ["PUT If-Match 200"; 6];
    assert_eq!(
        w.trace(),
        [&["GET 404", "PUT If-None-Match 200"][..], &renewals].concat()
    );
    // Each write is conditional on the etag the previous one returned.
    let all: Vec<(Option<String>, Option<String>, u64, LeaseRecord)> = w
        .log()
        .iter()
        .filter(|e| e.method != Method::GET)
        .map(|e| {
            (
                e.header(IF_MATCH).map(str::to_string),
                e.etag.clone(),
                e.at.0,
                e.record(),
            )
        })
        .collect();
    let log = &all;
    for i in 1..log.len() {
        assert_eq!(log[i].0, log[i - 1].1, "{i}");
    }
    let at: Vec<u64> = log.iter().map(|e| e.2).collect();
    assert_eq!(at, [0, 10_000, 20_000, 30_000, 40_000, 50_000, 50_000]);
    let records: Vec<LeaseRecord> = log.iter().map(|e| e.3.clone()).collect();
    assert!(records.iter().all(|r| r.token == 1));
    assert!(records[..records.len() - 1].iter().all(|r| !r.released));
    assert!(records[records.len() - 1].released);
    let expected_expiry: Vec<UnixMillis> = [30, 40, 50, 60, 70, 80]
        .iter()
        .map(|s| EPOCH + Duration::from_secs(*s))
        .collect();
    let expiry: Vec<UnixMillis> = records[..6].iter().map(|r| r.expires_at).collect();
    assert_eq!(expiry, expected_expiry);

    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            Event::Acquired { token, .. } => format!("acquired {token}"),
            Event::Renewed { token, .. } => format!("renewed {token}"),
            Event::Released { token } => format!("released {token}"),
            Event::LeaderChanged(Some(l)) => format!("leader {} {}", l.holder, l.token),
            Event::LeaderChanged(None) => "leader none".to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    let (renewed, after) = (["renewed 1"; 5], ["released 1", "leader none"]);
    assert_eq!(
        kinds,
        [&["acquired 1", "leader a 1"][..], &renewed, &after].concat()
    );

    // The next candidate finds the released record and takes it in 2
    // requests; stopped as soon as it leads, it releases with 1 more.
    w.clear();
    let mut next = Elector::new(cfg("b"), Entropy::from_seed(2));
    let acquired = std::cell::Cell::new(None);
    let stop = poll_fn(|_| match acquired.get() {
        Some(_) => Poll::Ready(()),
        None => Poll::Pending,
    });
    let exit = pollster::block_on(drive_until(
        &mut next,
        &w.store,
        &w.clock,
        |e| {
            if let Event::Acquired { token, .. } = e {
                acquired.set(Some(token));
            }
        },
        stop,
    ));
    assert_eq!(acquired.get(), Some(2));
    assert_eq!(
        exit,
        ElectorExit::Resigned {
            released: Some(Ok(ReleaseOutcome::Released { token: 2 }))
        }
    );
    assert_eq!(
        w.trace(),
        ["GET 200", "PUT If-Match 200", "PUT If-Match 200"]
    );
}

// ---- (b) scripted failures ----

/// Failure mode 1: a retried PUT of ours that had applied comes back 412.
#[test]
fn precondition_failed_on_our_applied_put_is_resolved_by_the_nonce() {
    let w = World::new();
    w.script([
        Step::Serve,
        Step::ApplyThen(moto("put_if_none_match_exists")),
    ]);
    let lease = w.acquired("a", 1);
    assert_eq!(w.trace(), ["GET 404", "PUT If-None-Match 412", "GET 200"]);
    let (etag, stored) = w.record();
    assert_eq!(lease.etag, etag);
    assert_eq!(stored.nonce, lease.record.nonce);
    assert_eq!(w.log()[1].record().nonce, lease.record.nonce);
}

/// Failure mode 7: 409 ConditionalRequestConflict: re-read, then retry.
#[test]
fn conflict_409_is_reread_and_retried() {
    let w = World::new();
    w.script([Step::Serve, Step::Answer(conflict_409())]);
    let lease = w.acquired("a", 1);
    assert_eq!(w.trace(), created_again_after("409"));
    assert_eq!(lease.token, 1);
    let log = w.log();
    // A short jittered backoff (base 100 ms, equal jitter) before the re-read.
    let pause = log[2].at - log[1].at;
    assert!(
        (Duration::from_millis(50)..=Duration::from_millis(100)).contains(&pause),
        "{pause:?}"
    );
    // The retry is a new write: a new nonce, the same session and token.
    let (first, second) = (log[1].record(), log[3].record());
    assert_ne!(first.nonce, second.nonce);
    assert_eq!(
        (first.acquisition, first.token),
        (second.acquisition, second.token)
    );
}

#[test]
fn slow_down_503_honours_retry_after_on_the_virtual_clock() {
    let w = World::new();
    w.script([
        Step::Answer(slow_down_503()),
        Step::Serve,
        Step::Answer(slow_down_503()),
    ]);
    let lease = w.acquired("a", 1);
    assert_eq!(w.trace()[0], "GET 503");
    assert_eq!(w.trace()[1..], created_again_after("503"));
    let log = w.log();
    assert!(log[1].at - log[0].at >= Duration::from_secs(2));
    assert!(log[3].at - log[2].at >= Duration::from_secs(2));
    assert!(w.clock.now().mono >= Mono(4_000));
    // The retried requests carry the later time: the expiry is stamped from
    // the last Date, and with SigV4 each request is signed when it is sent.
    let sent = log[4].at;
    assert_eq!(
        lease.record.expires_at,
        EPOCH + Duration::from_millis(sent.0 - sent.0 % 1000) + TTL
    );
    if cfg!(feature = "sigv4") {
        let amz_date = |e: &Exchange| {
            e.header(HeaderName::from_static("x-amz-date"))
                .map(String::from)
        };
        assert_ne!(amz_date(&log[0]), amz_date(&log[1]));
    }
}

#[test]
fn internal_error_500_on_an_applied_put_rereads_and_acquires() {
    let w = World::new();
    w.script([Step::Serve, Step::ApplyThen(internal_error_500())]);
    let lease = w.acquired("a", 1);
    assert_eq!(w.trace(), ["GET 404", "PUT If-None-Match 500", "GET 200"]);
    assert_eq!(w.record().0, lease.etag);

    // Not applied: the re-read shows no object, and the PUT is sent again.
    let w = World::new();
    w.script([Step::Serve, Step::Answer(internal_error_500())]);
    assert_eq!(w.acquired("a", 1).token, 1);
    assert_eq!(w.trace(), created_again_after("500"));
}

#[test]
fn timeouts_are_unknown_outcomes_resolved_by_a_reread() {
    // The PUT applied; its reply was lost.
    let w = World::new();
    w.script([
        Step::Serve,
        Step::ApplyThenLose(TransportErrorKind::Timeout),
    ]);
    let lease = w.acquired("a", 1);
    assert_eq!(w.trace(), ["GET 404", "PUT If-None-Match lost", "GET 200"]);
    assert_eq!(w.record().0, lease.etag);

    // The PUT never arrived.
    let w = World::new();
    w.script([Step::Serve, Step::Lose(TransportErrorKind::Timeout)]);
    assert_eq!(w.acquired("a", 1).token, 1);
    assert_eq!(w.trace(), created_again_after("lost"));

    // A lost GET is simply retried after a backoff.
    let w = World::new();
    w.script([Step::Lose(TransportErrorKind::Reset)]);
    w.acquired("a", 1);
    assert_eq!(w.trace(), ["GET lost", "GET 404", "PUT If-None-Match 200"]);

    // A renewal whose reply is lost is confirmed by the re-read.
    let w = World::new();
    let lease = w.acquired("a", 1);
    w.clear();
    w.script([Step::ApplyThenLose(TransportErrorKind::Timeout)]);
    match w.run(LeaseOp::renew(cfg("a"), Entropy::from_seed(2), lease)) {
        Ok(RenewOutcome::Renewed(l)) => assert_eq!(l.etag, w.record().0),
        other => panic!("{other:?}"),
    }
    assert_eq!(w.trace(), ["PUT If-Match lost", "GET 200"]);
}

#[test]
fn denied_403_is_terminal_with_its_code_and_never_retried() {
    for (capture, code, message) in [
        support::DENIED_SIGNATURE_MISMATCH,
        ("denied_access_denied", "AccessDenied", "Access Denied"),
    ] {
        let w = World::new();
        w.script([Step::Answer(moto(capture))]);
        let expected = LeaseError::Denied {
            code: Some(code.into()),
            message: Some(message.into()),
            unsettled: Box::default(),
        };
        assert_eq!(w.acquire("a", 1), Err(expected.clone()), "{capture}");
        assert_eq!(w.trace(), ["GET 403"], "{capture}");
        assert!(expected.to_string().contains(code));

        // On the write too. A refusal speaks for one copy of the request
        // (a transport may have sent another), so the create is handed on
        // as a write whose outcome no read has settled.
        let w = World::new();
        w.script([Step::Serve, Step::Answer(moto(capture))]);
        let denied = w.acquire("a", 1);
        let Err(LeaseError::Denied {
            code: got_code,
            unsettled,
            ..
        }) = &denied
        else {
            panic!("{capture}: {denied:?}")
        };
        assert_eq!(got_code.as_deref(), Some(code), "{capture}");
        let [claim] = &unsettled[..] else {
            panic!("{capture}: one claim expected, got {unsettled:?}")
        };
        assert_eq!((claim.holder.as_str(), claim.token), ("a", 1), "{capture}");
        assert_eq!(w.trace(), ["GET 404", "PUT If-None-Match 403"], "{capture}");
        assert!(w.object().is_none());
    }
}

/// The box checks signatures like moto with auth on.
#[cfg(feature = "sigv4")]
#[test]
fn wrong_credentials_are_refused_by_the_box() {
    let w = World::new();
    let dialect = S3Dialect::new(S3Config::custom(ENDPOINT, BUCKET, REGION)).unwrap();
    let transport = CannedTransport(w.net.clone());
    let wrong_secret = HttpStore::new(dialect.clone(), transport.clone(), w.clock.clone())
        .with_signer(SigV4Signer::new(AKID, "not-the-secret", None, REGION));
    let op = || LeaseOp::acquire(cfg("a"), Entropy::from_seed(1));
    match run(&wrong_secret, &w.clock, op()) {
        Err(LeaseError::Denied { code, .. }) => {
            assert_eq!(code.as_deref(), Some("SignatureDoesNotMatch"))
        }
        other => panic!("{other:?}"),
    }
    let unknown_key = HttpStore::new(dialect.clone(), transport.clone(), w.clock.clone())
        .with_signer(SigV4Signer::new("AKIDUNKNOWN", SECRET, None, REGION));
    match run(&unknown_key, &w.clock, op()) {
        Err(LeaseError::Denied { code, .. }) => {
            assert_eq!(code.as_deref(), Some("InvalidAccessKeyId"))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.trace(), ["GET 403", "GET 403"]);
    // Unsigned, moto answers an HTML 500: retried as a server error until
    // the attempts run out.
    let unsigned = HttpStore::new(dialect, transport, w.clock.clone());
    w.clear();
    assert!(matches!(
        run(&unsigned, &w.clock, op()),
        Err(LeaseError::GaveUp { .. })
    ));
    assert_eq!(w.trace().len() as u32, cfg("a").max_attempts + 1);
    assert!(w.object().is_none());
}

#[test]
fn no_such_bucket_404_is_terminal() {
    let w = World::new();
    let elsewhere = client(&w.net, w.clock.clone(), "nobucket");
    let result = run(
        &elsewhere,
        &w.clock,
        LeaseOp::acquire(cfg("a"), Entropy::from_seed(1)),
    );
    assert_eq!(result, Err(LeaseError::no_such_bucket()));
    assert_eq!(w.trace(), ["GET 404"]);
    assert!(w.log()[0].path.starts_with("/nobucket/"));
}

#[test]
fn not_implemented_501_on_a_conditional_put_is_unsupported() {
    let w = World::new();
    w.script([
        Step::Serve,
        Step::Answer(not_implemented_501("If-None-Match")),
    ]);
    // The refused create is handed on (a refusal speaks for one copy).
    assert!(matches!(
        w.acquire("a", 1),
        Err(LeaseError::Unsupported {
            status: 501,
            code: Some(ref code),
            ref unsettled,
        }) if code == "NotImplemented" && !unsettled.is_empty()
    ));
    assert_eq!(w.trace(), ["GET 404", "PUT If-None-Match 501"]);
    assert!(w.object().is_none());

    // If-Match on renewal, likewise.
    let w = World::new();
    let lease = w.acquired("a", 1);
    w.clear();
    w.script([Step::Answer(not_implemented_501("If-Match"))]);
    assert!(matches!(
        w.run(LeaseOp::renew(cfg("a"), Entropy::from_seed(2), lease)),
        Err(LeaseError::Unsupported {
            status: 501,
            ref unsettled,
            ..
        }) if !unsettled.is_empty()
    ));
    assert_eq!(w.trace(), ["PUT If-Match 501"]);
}

#[test]
fn html_500_page_is_a_server_error_retried_within_the_budget() {
    let w = World::new();
    w.script([Step::Answer(moto("unsigned_html_500"))]);
    w.acquired("a", 1);
    assert_eq!(w.trace(), ["GET 500", "GET 404", "PUT If-None-Match 200"]);

    let w = World::new();
    w.script([Step::Serve, Step::Answer(moto("unsigned_html_500"))]);
    w.acquired("a", 1);
    assert_eq!(w.trace(), created_again_after("500"));

    let w = World::new();
    let attempts = cfg("a").max_attempts + 1;
    w.script((0..attempts).map(|_| Step::Answer(moto("unsigned_html_500"))));
    assert_eq!(
        w.acquire("a", 1),
        Err(LeaseError::GaveUp {
            attempts,
            last: "server-error 500".into(),
            unsettled: Box::default(),
        })
    );
    assert_eq!(w.trace(), vec!["GET 500"; attempts as usize]);
}

#[test]
fn a_body_that_is_not_a_lease_record_is_unreadable_and_never_overwritten() {
    for (body, json) in [
        (&b"{\"x\":1}"[..], true),
        (b"<html><body>Bucket listing disabled</body></html>", false),
    ] {
        let w = World::new();
        let ReplyKind::Written { etag: Some(etag) } = w
            .net
            .s3
            .objects
            .apply(&StoreOp::Put {
                key: KEY.into(),
                body: body.to_vec(),
                condition: PutCondition::None,
            })
            .kind
        else {
            panic!("raw put")
        };
        match w.acquire("a", 1) {
            Err(LeaseError::Unreadable { etag: e, error, .. }) => {
                assert_eq!(e, etag);
                let expected = String::from_utf8_lossy(body);
                assert_eq!(error.excerpt, expected);
                if json {
                    assert_eq!(error.kind, RecordErrorKind::Missing("expires_at"));
                } else {
                    assert!(matches!(error.kind, RecordErrorKind::Syntax(_)));
                }
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(w.trace(), ["GET 200"]);
        assert_eq!(w.object(), Some((etag, body.to_vec())));
    }
}

/// The store's `Date`, not any client's wall clock, decides expiry.
#[test]
fn the_store_date_not_client_wall_clocks_decides_expiry() {
    // The server's clock is one hour ahead of a's wall clock; b's wall clock
    // is one hour past the server's, c's two hours behind it.
    let server = VirtualClock::new(EPOCH);
    let net = new_net(server.clone(), HOUR);
    let a_clock = VirtualClock::new(EPOCH);
    let b_clock = VirtualClock::new(EPOCH + HOUR * 2);
    let c_clock = VirtualClock::new(UnixMillis(EPOCH.0 - HOUR.as_millis() as u64));
    let clocks = [&server, &a_clock, &b_clock, &c_clock];
    let advance = |d: Duration| clocks.iter().for_each(|c| c.advance(d));
    let a = client(&net, a_clock.clone(), BUCKET);
    let b = client(&net, b_clock.clone(), BUCKET);
    let c = client(&net, c_clock.clone(), BUCKET);
    let store_start = EPOCH + HOUR;

    let lease = match acquire_on(&a, &a_clock, "a", 1) {
        AcquireOutcome::Acquired(lease) => lease,
        other => panic!("{other:?}"),
    };
    // Stamped in the store's time, not a's (an hour behind).
    assert_eq!(lease.record.expires_at, store_start + TTL);
    assert_eq!(lease.clock.0, StoreDate::from_http_date(store_start));

    // By b's wall clock a's lease ended long ago; by c's it has hours left.
    assert!(b_clock.wall().0 - lease.record.expires_at.0 > 59 * 60 * 1000);
    assert!(lease.record.expires_at.0 - c_clock.wall().0 > 119 * 60 * 1000);
    for (store, clock) in [(&b, &b_clock), (&c, &c_clock)] {
        match acquire_on(store, clock, "x", 2) {
            AcquireOutcome::Busy(busy) => assert_eq!(busy.expires_at, store_start + TTL),
            other => panic!("{other:?}"),
        }
    }
    // Store Date == expires_at: still busy for both.
    advance(TTL);
    assert!(matches!(
        acquire_on(&b, &b_clock, "b", 3),
        AcquireOutcome::Busy(_)
    ));
    assert!(matches!(
        acquire_on(&c, &c_clock, "c", 4),
        AcquireOutcome::Busy(_)
    ));
    // Store Date > expires_at: c takes over, although its own wall clock
    // still puts a's expiry two hours ahead.
    advance(Duration::from_secs(1));
    assert!(c_clock.wall() < lease.record.expires_at);
    let taken = match acquire_on(&c, &c_clock, "c", 5) {
        AcquireOutcome::Acquired(lease) => lease,
        other => panic!("{other:?}"),
    };
    assert_eq!(taken.token, 2);
    assert_eq!(
        taken.record.expires_at,
        store_start + TTL + Duration::from_secs(1) + TTL
    );
    match acquire_on(&b, &b_clock, "b", 6) {
        AcquireOutcome::Busy(busy) => assert_eq!((busy.holder.as_str(), busy.token), ("c", 2)),
        other => panic!("{other:?}"),
    }
    let trace: Vec<String> = net.log.borrow().iter().map(Exchange::line).collect();
    let (reads, after) = (["GET 200"; 5], ["PUT If-Match 200", "GET 200"]);
    let expected = [&["GET 404", "PUT If-None-Match 200"][..], &reads, &after].concat();
    assert_eq!(trace, expected);
}

/// A renewal is stamped from the store's Date it last saw plus local
/// elapsed time: the client's wall clock plays no part.
#[test]
fn renewal_under_clock_skew_is_stamped_in_store_time() {
    let server = VirtualClock::new(EPOCH);
    let net = new_net(server.clone(), HOUR);
    let a_clock = VirtualClock::new(EPOCH);
    let a = client(&net, a_clock.clone(), BUCKET);
    let lease = match acquire_on(&a, &a_clock, "a", 1) {
        AcquireOutcome::Acquired(lease) => lease,
        other => panic!("{other:?}"),
    };
    for clock in [&server, &a_clock] {
        clock.advance(Duration::from_secs(10));
    }
    let renewed = match run(
        &a,
        &a_clock,
        LeaseOp::renew(cfg("a"), Entropy::from_seed(2), lease),
    ) {
        Ok(RenewOutcome::Renewed(lease)) => lease,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        renewed.record.expires_at,
        EPOCH + HOUR + Duration::from_secs(10) + TTL
    );
    assert_eq!(
        renewed.clock.0,
        StoreDate::from_http_date(EPOCH + HOUR + Duration::from_secs(10))
    );
    let trace: Vec<String> = net.log.borrow().iter().map(Exchange::line).collect();
    assert_eq!(
        trace,
        ["GET 404", "PUT If-None-Match 200", "PUT If-Match 200",]
    );
}

/// moto (like AWS) answers `If-Match` on a deleted key 404 NoSuchKey.
#[test]
fn renewal_of_a_deleted_object_gets_404_and_reports_vanished() {
    let w = World::new();
    let lease = w.acquired("a", 1);
    w.net.s3.objects.apply(&StoreOp::Delete {
        key: KEY.into(),
        if_match: None,
    });
    w.clear();
    assert_eq!(
        w.run(LeaseOp::renew(
            cfg("a"),
            Entropy::from_seed(2),
            lease.clone()
        )),
        Ok(RenewOutcome::Lost(LostReason::Vanished))
    );
    assert_eq!(w.trace(), ["PUT If-Match 404", "GET 404"]);
    assert!(w.object().is_none(), "a renewal never recreates the object");
    w.clear();
    assert_eq!(
        w.run(LeaseOp::release(cfg("a"), Entropy::from_seed(3), lease)),
        Ok(ReleaseOutcome::AlreadyLost(LostReason::Vanished))
    );
    assert_eq!(w.trace(), ["PUT If-Match 404", "GET 404"]);
}

/// A server that answers PUT 200 without an ETag: the etag is learnt (and
/// the write confirmed) by reading.
#[test]
fn put_200_without_etag_is_confirmed_by_a_read() {
    let w = World::new();
    let mut no_etag = moto("put_created");
    no_etag.headers_mut().remove(ETAG);
    w.script([Step::Serve, Step::ApplyThen(no_etag)]);
    let lease = w.acquired("a", 1);
    assert_eq!(w.trace(), ["GET 404", "PUT If-None-Match 200", "GET 200"]);
    assert_eq!(w.log()[1].etag, None);
    assert_eq!(lease.etag, w.record().0);
}

/// Two contenders both read 404; the second `If-None-Match: *` PUT gets
/// moto's 412 and the re-read shows the winner.
#[test]
fn racing_creators_one_wins_the_other_gets_412_and_reads_busy() {
    let w = World::new();
    let mut b = LeaseOp::acquire(cfg("b"), Entropy::from_seed(2));
    let next_call = |b: &mut LeaseOp<Acquire>| match b.poll(w.clock.now()) {
        Output::Call(id, op) => (id, op),
        other => panic!("expected a call, got {other:?}"),
    };
    let (id, get) = next_call(&mut b);
    let reply = pollster::block_on(w.store.call(get));
    b.handle_reply(w.clock.now(), id, reply);
    let (id, put) = next_call(&mut b);
    assert!(matches!(
        put,
        StoreOp::Put {
            condition: PutCondition::IfAbsent,
            ..
        }
    ));
    // a reads and creates between b's read and b's write.
    let a = w.acquired("a", 1);
    let reply = pollster::block_on(w.store.call(put));
    b.handle_reply(w.clock.now(), id, reply);
    match pollster::block_on(drive(&mut b, &w.store, &w.clock, |_| {})) {
        Ok(AcquireOutcome::Busy(busy)) => {
            assert_eq!((busy.holder.as_str(), busy.token), ("a", 1));
            assert_eq!(busy.etag, a.etag);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        w.trace(),
        [
            "GET 404",
            "GET 404",
            "PUT If-None-Match 200",
            "PUT If-None-Match 412",
            "GET 200"
        ]
    );
    assert_eq!(w.record().0, a.etag, "a's lease untouched");
}
