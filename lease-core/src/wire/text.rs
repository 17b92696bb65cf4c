//! Wire helpers shared by the HTTP dialects: key checks, percent-encoding,
//! endpoint parsing, HTTP dates, `Retry-After`, and a small XML walker for
//! error bodies and listings. Everything here is total: any bytes give a
//! value or a typed refusal, never a panic.

use super::RenderError;
use crate::store::{Etag, ListEntry, PutCondition, ReplyKind, StoreOp, StoreReply};
use crate::time::{StoreDate, UnixMillis};
use http::header::{HeaderMap, HeaderName, HeaderValue, DATE, ETAG, IF_NONE_MATCH, RETRY_AFTER};
use http::{Method, Request, Response, Uri};
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::Event;
use quick_xml::Reader;
use std::time::Duration;

/// The longest object key S3 and GCS accept, in bytes (Azure: 1024
/// characters, never fewer bytes).
pub const MAX_KEY_BYTES: usize = 1024;

/// Error messages from the server are cut to this many characters.
pub const MAX_MESSAGE_CHARS: usize = 200;

/// How much of an invalid key a [`RenderError::InvalidKey`] quotes.
pub(crate) const KEY_EXCERPT_CHARS: usize = 64;

/// Rejects keys S3 (or the URL between us and S3) cannot carry. `prefix`
/// allows the empty string (list everything).
pub(crate) fn check_key(key: &str, prefix: bool) -> Result<(), RenderError> {
    let reason = if key.is_empty() && !prefix {
        Some("is empty")
    } else if key.len() > MAX_KEY_BYTES {
        Some("is longer than 1024 bytes")
    } else if key.chars().any(char::is_control) {
        Some("contains control characters")
    } else if !prefix && key.split('/').any(|s| s == "." || s == "..") {
        // HTTP clients and browsers resolve dot segments (even encoded as
        // %2E), so the request would name a different key.
        Some("has a '.' or '..' path segment")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(RenderError::InvalidKey {
            key: excerpt(key),
            reason,
        }),
        None => Ok(()),
    }
}

/// At most [`KEY_EXCERPT_CHARS`] characters of `s`.
pub(crate) fn excerpt(s: &str) -> String {
    s.chars().take(KEY_EXCERPT_CHARS).collect()
}

/// Appends `s` to `out`, percent-encoding every byte outside the unreserved
/// set `A-Z a-z 0-9 - . _ ~` (and keeping `/` when `keep_slash`): the
/// encoding SigV4 expects in paths and query values.
pub(crate) fn percent_encode(out: &mut String, s: &str, keep_slash: bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
}

/// GCS's object generation (the version a conditional write names).
pub(crate) const GOOG_GENERATION: HeaderName = HeaderName::from_static("x-goog-generation");
/// The version a write made in a versioned S3 bucket.
pub(crate) const AMZ_VERSION_ID: HeaderName = HeaderName::from_static("x-amz-version-id");
/// The version a write made in an Azure account with blob versioning.
pub(crate) const MS_VERSION_ID: HeaderName = HeaderName::from_static("x-ms-version-id");
/// Azure's error code, which a reply without a body (a HEAD's, a 412's)
/// carries only here.
pub(crate) const MS_ERROR_CODE: HeaderName = HeaderName::from_static("x-ms-error-code");

/// Every reply header a dialect reads: a transport may hand the dialect
/// only these (the Worker's does, so that it never parses a header name at
/// run time: `http`'s name parser is 12 KB of wasm). Reading any other
/// header of a reply fails in debug builds, so the list cannot fall behind.
pub const REPLY_HEADERS: [HeaderName; 7] = [
    DATE,
    ETAG,
    RETRY_AFTER,
    GOOG_GENERATION,
    MS_ERROR_CODE,
    AMZ_VERSION_ID,
    MS_VERSION_ID,
];

/// The [`REPLY_HEADERS`] entry named `name` (in any case), if it is one.
pub fn reply_header(name: &str) -> Option<HeaderName> {
    REPLY_HEADERS
        .iter()
        .find(|h| h.as_str().eq_ignore_ascii_case(name))
        .cloned()
}

/// A reply header's value, if it is visible ASCII; `name` must be one of
/// [`REPLY_HEADERS`].
pub(crate) fn header_str(headers: &HeaderMap, name: HeaderName) -> Option<&str> {
    debug_assert!(
        REPLY_HEADERS.contains(&name),
        "reply header {name} is read but not in REPLY_HEADERS"
    );
    headers.get(name)?.to_str().ok()
}

/// Milliseconds since the UNIX epoch of an HTTP-date.
pub(crate) fn http_date_ms(value: &str) -> Option<u64> {
    crate::time::UnixMillis::from_http_date(value).map(|at| at.0)
}

/// `Retry-After` as a delay: delta-seconds as given, an HTTP-date measured
/// from the reply's own `Date` (no date, no delay: the core reads no clock).
pub(crate) fn retry_after(headers: &HeaderMap, date_ms: Option<u64>) -> Option<Duration> {
    let value = header_str(headers, RETRY_AFTER)?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse().ok().map(Duration::from_secs);
    }
    let until = http_date_ms(value)?;
    Some(Duration::from_millis(until.saturating_sub(date_ms?)))
}

/// `Code` and `Message` of an XML error body (S3, GCS and Azure all write
/// `<Error><Code>..</Code><Message>..</Message></Error>`), as far as it has them.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ErrorBody {
    pub(crate) code: Option<String>,
    pub(crate) message: Option<String>,
}

pub(crate) fn parse_error_body(body: &[u8]) -> ErrorBody {
    let mut error = ErrorBody::default();
    // A body that stops being XML halfway still yields what came before.
    let _ = walk_xml(body, |path, text| {
        let field = if is_path(path, &["Error", "Code"]) {
            &mut error.code
        } else if is_path(path, &["Error", "Message"]) {
            &mut error.message
        } else {
            return;
        };
        let text: String = text.trim().chars().take(MAX_MESSAGE_CHARS).collect();
        if !text.is_empty() {
            *field = Some(text);
        }
    });
    error
}

/// `path` (local element names from the root) equals `want`.
pub(crate) fn is_path(path: &[Vec<u8>], want: &[&str]) -> bool {
    path.len() == want.len() && path.iter().zip(want).all(|(a, b)| a == b.as_bytes())
}

/// The bytes are not well-formed XML.
pub(crate) struct Malformed;

/// Calls `on_element(path, text)` as each element closes, with the local
/// names (namespace prefixes dropped) from the root down to the element and
/// the element's own character data, entities resolved and untrimmed (S3
/// keys may start or end with spaces).
pub(crate) fn walk_xml(
    body: &[u8],
    mut on_element: impl FnMut(&[Vec<u8>], String),
) -> Result<(), Malformed> {
    let mut reader = Reader::from_reader(body);
    let mut path: Vec<Vec<u8>> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    loop {
        match reader.read_event().map_err(|_| Malformed)? {
            Event::Start(e) => {
                path.push(e.local_name().as_ref().to_vec());
                texts.push(String::new());
            }
            Event::Empty(e) => {
                path.push(e.local_name().as_ref().to_vec());
                on_element(&path, String::new());
                path.pop();
            }
            Event::End(_) => {
                let text = texts.pop().ok_or(Malformed)?;
                on_element(&path, text);
                path.pop();
            }
            Event::Text(t) => {
                if let Some(text) = texts.last_mut() {
                    text.push_str(&t.xml10_content().map_err(|_| Malformed)?);
                }
            }
            Event::CData(c) => {
                if let Some(text) = texts.last_mut() {
                    text.push_str(&c.decode().map_err(|_| Malformed)?);
                }
            }
            Event::GeneralRef(r) => {
                if let Some(text) = texts.last_mut() {
                    match r.resolve_char_ref().map_err(|_| Malformed)? {
                        Some(c) => text.push(c),
                        None => {
                            let name = r.decode().map_err(|_| Malformed)?;
                            text.push_str(resolve_predefined_entity(&name).ok_or(Malformed)?);
                        }
                    }
                }
            }
            Event::Eof if path.is_empty() => return Ok(()),
            Event::Eof => return Err(Malformed),
            Event::Decl(_) | Event::PI(_) | Event::DocType(_) | Event::Comment(_) => {}
        }
    }
}

/// A parsed service endpoint: `scheme://host[:port][/path]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// `http` or `https`.
    pub(crate) scheme: &'static str,
    /// The host, as written (an IPv6 literal keeps its brackets).
    pub(crate) host: String,
    /// `:port`, or empty for the scheme's default port.
    pub(crate) port: String,
    /// The path without a trailing `/` (empty when there is none).
    pub(crate) path: String,
}

impl Endpoint {
    /// Parses `endpoint`; `allow_path` admits a path (Azure emulators put
    /// the account there), never a query or user info.
    pub(crate) fn parse(endpoint: &str, allow_path: bool) -> Result<Endpoint, String> {
        let uri: Uri = endpoint
            .parse()
            .map_err(|_| "endpoint is not a URI".to_string())?;
        let scheme = match uri.scheme_str() {
            Some("http") => "http",
            Some("https") => "https",
            _ => return Err("endpoint scheme must be http or https".to_string()),
        };
        let authority = uri
            .authority()
            .filter(|a| !a.host().is_empty())
            .ok_or_else(|| "endpoint has no host".to_string())?;
        if authority.as_str().contains('@') {
            return Err("endpoint must not contain user info".to_string());
        }
        let path = uri.path().trim_end_matches('/');
        if uri.query().is_some() || (!allow_path && !path.is_empty()) {
            return Err(if allow_path {
                "endpoint must not have a query".to_string()
            } else {
                "endpoint must not have a path or query".to_string()
            });
        }
        if path.split('/').any(|s| s == "." || s == "..") {
            return Err("endpoint path must not have '.' or '..' segments".to_string());
        }
        let default_port = if scheme == "https" { 443 } else { 80 };
        let port = match authority.port_u16() {
            Some(p) if p != default_port => format!(":{p}"),
            _ => String::new(),
        };
        Ok(Endpoint {
            scheme,
            host: authority.host().to_string(),
            port,
            path: path.to_string(),
        })
    }

    /// Whether the host is an IP address rather than a DNS name.
    pub(crate) fn host_is_ip(&self) -> bool {
        self.host.starts_with('[') || ipv4_shaped(&self.host)
    }
}

/// Whether `s` is shaped like an IPv4 address: four dot-separated groups
/// of one to three digits (no DNS name is, and the bucket rules refuse
/// such names). Written out: std's address parser is a KB of a wasm
/// module.
pub(crate) fn ipv4_shaped(s: &str) -> bool {
    let mut groups = 0;
    s.split('.').all(|group| {
        groups += 1;
        (1..=3).contains(&group.len()) && group.bytes().all(|b| b.is_ascii_digit())
    }) && groups == 4
}

/// What a dialect's requests differ in; [`render`] builds each request
/// from it the same way for every dialect.
pub(crate) trait Render {
    /// The headers every request carries.
    fn common_headers(&self, headers: &mut HeaderMap);
    /// The object at `key`.
    fn object_uri(&self, key: &str) -> Result<String, RenderError>;
    /// One page of the listing of `prefix`.
    fn list_uri(
        &self,
        prefix: &str,
        continuation: Option<&str>,
        max_keys: Option<u32>,
    ) -> Result<String, RenderError>;
    /// The header that makes a write conditional on the object being
    /// absent (`None`) or at version `etag`.
    fn condition(
        &self,
        key: &str,
        etag: Option<&Etag>,
    ) -> Result<(HeaderName, HeaderValue), RenderError>;
    /// The `If-None-Match` value of a read again, answered 304 when the
    /// object is unchanged (`None`: the read is a plain one).
    fn if_none_match(&self, key: &str, etag: &Etag) -> Result<Option<HeaderValue>, RenderError>;
    /// A write's headers besides its condition (type, length).
    fn put_headers(&self, headers: &mut HeaderMap, body: &[u8]);
}

/// The unsigned request for `op` in the dialect `d`.
pub(crate) fn render(d: &impl Render, op: &StoreOp) -> Result<Request<Vec<u8>>, RenderError> {
    let mut headers = HeaderMap::new();
    d.common_headers(&mut headers);
    let (method, uri, body) = match op {
        StoreOp::Get { key } => (Method::GET, d.object_uri(key)?, Vec::new()),
        StoreOp::GetIfNoneMatch { key, etag } => {
            if let Some(value) = d.if_none_match(key, etag)? {
                headers.insert(IF_NONE_MATCH, value);
            }
            (Method::GET, d.object_uri(key)?, Vec::new())
        }
        StoreOp::Put {
            key,
            body,
            condition,
        } => {
            let uri = d.object_uri(key)?;
            d.put_headers(&mut headers, body);
            let expected = match condition {
                PutCondition::IfAbsent => Some(None),
                PutCondition::IfMatch(etag) => Some(Some(etag)),
                PutCondition::None => None,
            };
            if let Some(expected) = expected {
                let (name, value) = d.condition(key, expected)?;
                headers.insert(name, value);
            }
            (Method::PUT, uri, body.clone())
        }
        StoreOp::Delete { key, if_match } => {
            let uri = d.object_uri(key)?;
            if let Some(etag) = if_match {
                let (name, value) = d.condition(key, Some(etag))?;
                headers.insert(name, value);
            }
            (Method::DELETE, uri, Vec::new())
        }
        StoreOp::List {
            prefix,
            continuation,
            max_keys,
        } => {
            let uri = d.list_uri(prefix, continuation.as_deref(), *max_keys)?;
            (Method::GET, uri, Vec::new())
        }
    };
    build_request(method, uri, headers, body)
}

/// The request, with `headers` replacing the builder's.
pub(crate) fn build_request(
    method: Method,
    uri: String,
    headers: HeaderMap,
    body: Vec<u8>,
) -> Result<Request<Vec<u8>>, RenderError> {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .body(body)
        .map_err(|e| RenderError::InvalidEndpoint {
            reason: format!("request URI does not parse: {e}"),
        })?;
    *request.headers_mut() = headers;
    Ok(request)
}

/// A reply dated by the response's `Date` header, its kind from
/// `classify(status, headers, body, date_ms)`.
pub(crate) fn dated_reply(
    response: &Response<Vec<u8>>,
    classify: impl FnOnce(u16, &HeaderMap, &[u8], Option<u64>) -> ReplyKind,
) -> StoreReply {
    let headers = response.headers();
    let date_ms = header_str(headers, DATE).and_then(http_date_ms);
    StoreReply {
        kind: classify(
            response.status().as_u16(),
            headers,
            response.body(),
            date_ms,
        ),
        date: date_ms.map(|ms| StoreDate::from_http_date(UnixMillis(ms))),
        // A versioned bucket names the version a write made (S3's "null"
        // is the version of a bucket whose versioning is suspended).
        version_id: [AMZ_VERSION_ID, MS_VERSION_ID]
            .into_iter()
            .find_map(|name| header_str(headers, name))
            .map(str::trim)
            .filter(|v| !v.is_empty() && *v != "null")
            .map(excerpt),
    }
}

/// A 200 to a read: found with `version`, or `Unexpected` with
/// `missing_code` when the header naming the version (`header`) is absent.
pub(crate) fn found(
    status: u16,
    version: Option<Etag>,
    body: &[u8],
    missing_code: &str,
    header: &str,
) -> ReplyKind {
    match version {
        Some(etag) => ReplyKind::Found {
            etag,
            body: body.to_vec(),
        },
        None => ReplyKind::Unexpected {
            status,
            code: Some(missing_code.to_string()),
            message: Some(format!("GET answered 200 without an {header} header")),
        },
    }
}

/// A 200 to a listing: the parsed page, or `Unexpected`
/// `MalformedListing` naming `what` was expected.
pub(crate) fn listed(
    status: u16,
    page: Option<(Vec<ListEntry>, Option<String>)>,
    what: &str,
) -> ReplyKind {
    match page {
        Some((entries, next)) => ReplyKind::Listed { entries, next },
        None => ReplyKind::Unexpected {
            status,
            code: Some("MalformedListing".to_string()),
            message: Some(format!("the body is not a valid {what}")),
        },
    }
}

/// Whether `op` carries a conditional header.
pub(crate) fn is_conditional(op: &StoreOp) -> bool {
    match op {
        StoreOp::Put { condition, .. } => *condition != PutCondition::None,
        StoreOp::Delete { if_match, .. } => if_match.is_some(),
        StoreOp::GetIfNoneMatch { .. } => true,
        StoreOp::Get { .. } | StoreOp::List { .. } => false,
    }
}

/// The error statuses every dialect reads alike, once its own cases (404,
/// 409...) are settled: 401/403 and a 400 with a code in `denied_400` are
/// denials; a 400 with a code in `unsupported_400` to a conditional call,
/// and any 501, mean the condition is not implemented; other 5xx are
/// server errors (a write's outcome unknown); the rest is unexpected.
pub(crate) fn classify_status(
    op: &StoreOp,
    status: u16,
    error: ErrorBody,
    denied_400: &[&str],
    unsupported_400: &[&str],
) -> ReplyKind {
    let code = error.code.as_deref().unwrap_or("");
    match status {
        401 | 403 => ReplyKind::Denied {
            code: error.code,
            message: error.message,
        },
        400 if denied_400.contains(&code) => ReplyKind::Denied {
            code: error.code,
            message: error.message,
        },
        400 if is_conditional(op) && unsupported_400.contains(&code) => ReplyKind::Unsupported {
            status,
            code: error.code,
        },
        501 => ReplyKind::Unsupported {
            status,
            code: error.code,
        },
        500..=599 => ReplyKind::ServerError {
            status,
            code: error.code,
        },
        _ => ReplyKind::Unexpected {
            status,
            code: error.code,
            message: error.message,
        },
    }
}

/// Request and response helpers for the dialects' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use http::{Request, Response};

    /// The value of header `name`, if present and text.
    pub(crate) fn header<'a>(request: &'a Request<Vec<u8>>, name: &str) -> Option<&'a str> {
        request.headers().get(name).and_then(|v| v.to_str().ok())
    }

    /// A response with `status`, `headers` and `body`.
    pub(crate) fn response(status: u16, headers: &[(&str, &str)], body: &str) -> Response<Vec<u8>> {
        let mut builder = Response::builder().status(status);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder
            .body(body.as_bytes().to_vec())
            .expect("valid response")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_headers_are_found_in_any_case_and_others_are_not() {
        assert_eq!(reply_header("ETag"), Some(ETAG));
        assert_eq!(reply_header("x-goog-generation"), Some(GOOG_GENERATION));
        assert_eq!(reply_header("X-Ms-Error-Code"), Some(MS_ERROR_CODE));
        assert_eq!(reply_header("retry-after"), Some(RETRY_AFTER));
        assert_eq!(reply_header("date"), Some(DATE));
        for other in ["content-type", "x-amz-request-id", "etag2", ""] {
            assert_eq!(reply_header(other), None, "{other}");
        }
    }
}
