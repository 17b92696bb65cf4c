//! A stand-in for Google Cloud Storage's XML API, in process, on a virtual
//! clock: the transport under an `HttpStore` with the GCS dialect.
//!
//! No installable GCS emulator honours generation preconditions on the XML
//! API (fake-gcs-server 1.54 and gcp-storage-emulator ignore
//! `x-goog-if-generation-match` there), so [`GcsBox`] is written from the
//! XML API's documented behaviour:
//!
//! - objects carry a generation, returned in `x-goog-generation` (and as
//!   the `ETag`, in hex);
//! - `x-goog-if-generation-match: 0` means "only if absent" and `: N` "only
//!   if at generation N", else 412 `PreconditionFailed`, on PUT and DELETE;
//! - an object written again within a second of its last write is refused
//!   with 429 `SlowDown`, as GCS does past about one write per second per
//!   object;
//! - a request for another bucket than the box's is 404 `NoSuchBucket`;
//! - requests must be signed with an HMAC key (SigV4, region `auto`,
//!   service `s3`), else 403 `AccessDenied`; or carry an OAuth 2.0
//!   `Authorization: Bearer` token the box accepts
//!   ([`GcsBox::accept_bearer`]), else 401 `AuthenticationRequired`;
//! - listings (`GET /bucket?prefix=`) in the XML API's format, one page.
//!
//! Path-style (`/bucket/key`) and virtual-hosted
//! (`bucket.storage.googleapis.com/key`) requests are both understood.
//! Every answer is dated by the box's clock; the box logs every request
//! ([`GcsBox::log`]).
//!
//! ```
//! use lease_core::VirtualClock;
//! use lease_core::StoreSettings;
//! use lease_core::UnixMillis;
//! use lease_tests::gcs::GcsBox;
//!
//! let clock = VirtualClock::new(UnixMillis(1_795_317_047_000));
//! let gcs = GcsBox::new(clock.clone(), "lease_bucket");
//! let vars = [
//!     ("LEASE_PROVIDER", "gcs"),
//!     ("LEASE_BUCKET", "lease_bucket"),
//!     ("AWS_ACCESS_KEY_ID", "GOOG1EXAMPLE"),
//!     ("AWS_SECRET_ACCESS_KEY", "secret"),
//! ];
//! let get = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
//! let settings = StoreSettings::from_lookup(get).unwrap();
//! let store = settings.http_store(gcs.clone(), clock).unwrap(); // a lease store
//! # drop(store);
//! ```

use http::{Method, Request, Response};
use lease_core::{Clock, HttpTransport, Mono, TransportError, VirtualClock};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// The host of virtual-hosted requests: `<bucket>.storage.googleapis.com`.
const VIRTUAL_HOST_SUFFIX: &str = ".storage.googleapis.com";

/// One request the box answered.
#[derive(Clone, Debug)]
pub struct Seen {
    /// GET, PUT or DELETE.
    pub method: Method,
    /// The object key (decoded); empty for a listing.
    pub key: String,
    /// The box's monotonic time at the request.
    pub at: Mono,
    /// The status answered.
    pub status: u16,
}

/// An object: its generation, body, and when it was last written.
#[derive(Clone)]
struct Object {
    generation: u64,
    body: Vec<u8>,
    written_at: Mono,
}

struct Objects {
    map: BTreeMap<String, Object>,
    next_generation: u64,
    log: Vec<Seen>,
    /// OAuth 2.0 access tokens accepted.
    bearer: Vec<String>,
}

/// The stand-in (see the module docs). Clones share the same bucket.
#[derive(Clone)]
pub struct GcsBox {
    clock: VirtualClock,
    bucket: String,
    objects: Rc<RefCell<Objects>>,
}

/// A status, headers and body.
type Answer = (u16, Vec<(String, String)>, Vec<u8>);

fn xml_error(status: u16, code: &str, message: &str) -> Answer {
    (
        status,
        vec![(
            "Content-Type".into(),
            "application/xml; charset=UTF-8".into(),
        )],
        format!(
            "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>\
             <Message>{message}</Message></Error>"
        )
        .into_bytes(),
    )
}

/// A percent-encoded path or query value, decoded (invalid escapes and
/// UTF-8 are kept as they are: the key then simply matches nothing).
fn decode(s: &str) -> String {
    let mut out = Vec::new();
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: String = bytes.by_ref().take(2).map(char::from).collect();
            match u8::from_str_radix(&hex, 16) {
                Ok(byte) => out.push(byte),
                Err(_) => out.extend(format!("%{hex}").bytes()),
            }
        } else {
            out.push(b);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl GcsBox {
    /// An empty `bucket`, answering on `clock`.
    pub fn new(clock: VirtualClock, bucket: &str) -> GcsBox {
        GcsBox {
            clock,
            bucket: bucket.to_string(),
            objects: Rc::new(RefCell::new(Objects {
                map: BTreeMap::new(),
                next_generation: 1_700_000_000_000_001,
                log: Vec::new(),
                bearer: Vec::new(),
            })),
        }
    }

    /// Every request answered, in order.
    pub fn log(&self) -> Vec<Seen> {
        self.objects.borrow().log.clone()
    }

    /// The PUTs and DELETEs to `key`, in order.
    pub fn writes_to(&self, key: &str) -> Vec<Seen> {
        self.log()
            .into_iter()
            .filter(|s| s.key == key && matches!(s.method, Method::PUT | Method::DELETE))
            .collect()
    }

    /// How many requests were answered 429.
    pub fn throttled(&self) -> usize {
        self.log().iter().filter(|s| s.status == 429).count()
    }

    /// The body and generation stored at `key`.
    pub fn object(&self, key: &str) -> Option<(u64, Vec<u8>)> {
        let objects = self.objects.borrow();
        objects.map.get(key).map(|o| (o.generation, o.body.clone()))
    }

    fn mono(&self) -> Mono {
        Clock::now(&self.clock).mono
    }

    /// The bucket and the (still encoded) key a request names.
    fn target<'r>(&self, request: &'r Request<Vec<u8>>) -> (String, &'r str) {
        let path = request.uri().path().trim_start_matches('/');
        let host = request
            .uri()
            .host()
            .map(str::to_string)
            .or_else(|| {
                let header = request.headers().get("host")?;
                header.to_str().ok().map(str::to_string)
            })
            .unwrap_or_default();
        match host.strip_suffix(VIRTUAL_HOST_SUFFIX) {
            Some(bucket) if !bucket.is_empty() => (bucket.to_string(), path),
            _ => {
                let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
                (bucket.to_string(), key)
            }
        }
    }

    /// Accepts OAuth 2.0 bearer `token` from now on (as an access token a
    /// service account was issued).
    pub fn accept_bearer(&self, token: &str) {
        self.objects.borrow_mut().bearer.push(token.to_string());
    }

    /// Refuses bearer `token` from now on (it expired).
    pub fn revoke_bearer(&self, token: &str) {
        self.objects.borrow_mut().bearer.retain(|t| t != token);
    }

    fn signed(request: &Request<Vec<u8>>) -> bool {
        let auth = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        auth.starts_with("AWS4-HMAC-SHA256 Credential=") && auth.contains("/auto/s3/aws4_request")
    }

    /// The bearer token a request carries, if any.
    fn bearer(request: &Request<Vec<u8>>) -> Option<&str> {
        request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())?
            .strip_prefix("Bearer ")
    }

    fn answer(&self, request: &Request<Vec<u8>>, key: &str) -> Answer {
        let now = self.mono();
        if let Some(token) = GcsBox::bearer(request) {
            if !self.objects.borrow().bearer.iter().any(|t| t == token) {
                return xml_error(401, "AuthenticationRequired", "Invalid Credentials");
            }
        } else if !GcsBox::signed(request) {
            return xml_error(
                403,
                "AccessDenied",
                "Access denied: sign with an HMAC key (SigV4, region auto, service s3).",
            );
        }
        let condition = match request.headers().get("x-goog-if-generation-match") {
            None => None,
            Some(v) => match v.to_str().ok().and_then(|v| v.parse::<u64>().ok()) {
                Some(generation) => Some(generation),
                None => {
                    return xml_error(400, "InvalidArgument", "Invalid generation precondition.")
                }
            },
        };
        let mut objects = self.objects.borrow_mut();
        let current = objects.map.get(key).cloned();
        let holds = match (condition, &current) {
            (None, _) => true,
            (Some(0), current) => current.is_none(),
            (Some(g), Some(object)) => g == object.generation,
            (Some(_), None) => false,
        };
        let headers = |generation: u64| {
            vec![
                ("ETag".into(), format!("\"{generation:x}\"")),
                ("x-goog-generation".into(), generation.to_string()),
                ("x-goog-metageneration".into(), "1".into()),
            ]
        };
        let no_such_key = || xml_error(404, "NoSuchKey", "The specified key does not exist.");
        match *request.method() {
            Method::GET if key.is_empty() => {
                let query = request.uri().query().unwrap_or_default();
                let prefix = decode(
                    query
                        .split('&')
                        .find_map(|p| p.strip_prefix("prefix="))
                        .unwrap_or(""),
                );
                let contents: String = objects
                    .map
                    .iter()
                    .filter(|(k, _)| k.starts_with(&prefix))
                    .map(|(k, o)| {
                        format!(
                            "<Contents><Key>{k}</Key><Generation>{g}</Generation>\
                             <MetaGeneration>1</MetaGeneration><ETag>\"{g:x}\"</ETag>\
                             <Size>{}</Size></Contents>",
                            o.body.len(),
                            g = o.generation,
                        )
                    })
                    .collect();
                let body = format!(
                    "<?xml version='1.0' encoding='UTF-8'?><ListBucketResult \
                     xmlns=\"http://doc.s3.amazonaws.com/2006-03-01\"><Name>{}</Name>\
                     <Prefix>{prefix}</Prefix><IsTruncated>false</IsTruncated>{contents}\
                     </ListBucketResult>",
                    self.bucket
                );
                (200, vec![], body.into_bytes())
            }
            Method::GET => match current {
                Some(object) => (200, headers(object.generation), object.body),
                None => no_such_key(),
            },
            Method::PUT | Method::DELETE => {
                if let Some(object) = &current {
                    if now < object.written_at + Duration::from_secs(1) {
                        return xml_error(
                            429,
                            "SlowDown",
                            "The object exceeded the rate limit for object mutation operations \
                             (create, update, and delete).",
                        );
                    }
                }
                if !holds {
                    return xml_error(
                        412,
                        "PreconditionFailed",
                        "At least one of the pre-conditions you specified did not hold.",
                    );
                }
                if *request.method() == Method::DELETE {
                    return match objects.map.remove(key) {
                        Some(_) => (204, vec![], vec![]),
                        None => no_such_key(),
                    };
                }
                let generation = objects.next_generation;
                objects.next_generation += 1;
                objects.map.insert(
                    key.to_string(),
                    Object {
                        generation,
                        body: request.body().clone(),
                        written_at: now,
                    },
                );
                (200, headers(generation), vec![])
            }
            _ => xml_error(405, "MethodNotAllowed", "The method is not allowed."),
        }
    }
}

impl HttpTransport for GcsBox {
    async fn send(&self, request: Request<Vec<u8>>) -> Result<Response<Vec<u8>>, TransportError> {
        let (bucket, key) = self.target(&request);
        let key = decode(key);
        let (status, headers, body) = if bucket == self.bucket {
            self.answer(&request, &key)
        } else {
            xml_error(404, "NoSuchBucket", "The specified bucket does not exist.")
        };
        self.objects.borrow_mut().log.push(Seen {
            method: request.method().clone(),
            key,
            at: self.mono(),
            status,
        });
        let mut response = Response::builder()
            .status(status)
            .header("Date", self.clock.wall().to_http_date());
        for (name, value) in headers {
            response = response.header(name, value);
        }
        response.body(body).map_err(|e| TransportError {
            kind: lease_core::store::TransportErrorKind::Other,
            message: format!("the stand-in built a bad response: {e}"),
        })
    }
}
