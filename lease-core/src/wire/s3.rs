//! The S3 dialect: documented in the layer's docs (`wire/mod.rs`, "The S3 dialect").

use super::text::{
    check_key, classify_status, dated_reply, excerpt, found, header_str, is_path, listed,
    parse_error_body, percent_encode, render, retry_after, walk_xml, Endpoint, ErrorBody, Render,
    GOOG_GENERATION,
};
use super::{Dialect, RenderError};
use crate::store::{Etag, ListEntry, ReplyKind, StoreOp, StoreReply};
use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, ETAG, HOST, IF_MATCH,
    IF_NONE_MATCH,
};
use http::{Request, Response};

#[cfg(test)]
use super::text::MAX_MESSAGE_CHARS;

/// How the bucket appears in request URLs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressing {
    /// `https://endpoint/{bucket}/{key}`: MinIO, moto, R2, Tigris, and AWS
    /// (deprecated there, but still served).
    PathStyle,
    /// `https://{bucket}.endpoint/{key}`: the AWS default.
    VirtualHosted,
}

/// How an etag is written in `If-Match`.
///
/// RFC 9110 wants `"quoted"` etags, and AWS, R2 and moto accept that; some
/// S3-compatible servers only match the bare value. The capability probe
/// finds out which form a server takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EtagQuoting {
    /// `If-Match: "abc"`.
    #[default]
    Quoted,
    /// `If-Match: abc`.
    Unquoted,
}

/// Where and how to reach an S3 bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Config {
    /// Service endpoint without the bucket: `https://s3.us-east-1.amazonaws.com`,
    /// `http://127.0.0.1:9000`, `https://<account>.r2.cloudflarestorage.com`.
    /// Scheme `http` or `https`, a host, an optional port, no path or query.
    pub endpoint: String,
    /// Bucket name.
    pub bucket: String,
    /// Signing region (`auto` for R2). The dialect only validates it; the
    /// signer needs it.
    pub region: String,
    /// Path-style or virtual-hosted URLs.
    pub addressing: Addressing,
    /// How `If-Match` etags are written.
    pub etag_quoting: EtagQuoting,
    /// `Content-Type` of every PUT. Lease records are JSON; some servers
    /// (moto) need a content type on PUT at all.
    pub content_type: String,
    /// Shortest time between writes to one object the provider allows
    /// (R2: about one a second, [`R2_MIN_WRITE_INTERVAL`]); every machine
    /// spaces its writes to a key by it ([`Dialect::min_write_interval`]).
    pub min_write_interval: core::time::Duration,
}

/// R2 allows about one write per second to one object (Cloudflare's
/// documented limit for R2; more is answered 429): writes to a key are
/// spaced this far apart with the `r2` preset and on the Workers binding.
pub const R2_MIN_WRITE_INTERVAL: core::time::Duration = core::time::Duration::from_secs(1);

impl S3Config {
    /// AWS S3 in `region`, virtual-hosted: requests go to
    /// `https://{bucket}.s3.{region}.amazonaws.com`.
    pub fn aws(region: impl Into<String>, bucket: impl Into<String>) -> Self {
        let region = region.into();
        S3Config {
            endpoint: format!("https://s3.{region}.amazonaws.com"),
            bucket: bucket.into(),
            region,
            addressing: Addressing::VirtualHosted,
            etag_quoting: EtagQuoting::Quoted,
            content_type: "application/json".to_string(),
            min_write_interval: core::time::Duration::ZERO,
        }
    }

    /// Cloudflare R2 through its S3 API: endpoint
    /// `https://{account_id}.r2.cloudflarestorage.com`, region `auto`,
    /// path-style, writes to one object a second apart.
    pub fn r2(account_id: impl Into<String>, bucket: impl Into<String>) -> Self {
        S3Config {
            endpoint: format!("https://{}.r2.cloudflarestorage.com", account_id.into()),
            region: "auto".to_string(),
            min_write_interval: R2_MIN_WRITE_INTERVAL,
            ..S3Config::custom("", bucket, "")
        }
    }

    /// Any other S3-compatible server (MinIO, moto, Tigris...), path-style.
    pub fn custom(
        endpoint: impl Into<String>,
        bucket: impl Into<String>,
        region: impl Into<String>,
    ) -> Self {
        S3Config {
            endpoint: endpoint.into(),
            bucket: bucket.into(),
            region: region.into(),
            addressing: Addressing::PathStyle,
            etag_quoting: EtagQuoting::Quoted,
            content_type: "application/json".to_string(),
            min_write_interval: core::time::Duration::ZERO,
        }
    }

    /// Checks that the settings form valid request URLs and headers.
    pub fn validate(&self) -> Result<(), RenderError> {
        Origin::new(self, Versions::Etags).map(drop)
    }
}

/// The parts of every request URL that come from the configuration, checked
/// once.
#[derive(Clone, Debug)]
struct Origin {
    /// `scheme://authority`, with the bucket in the host when virtual-hosted.
    base: String,
    /// `""` (virtual-hosted) or `/{bucket}` (path-style).
    bucket_path: String,
    /// The `host` header: the authority without a default port, as browsers
    /// and most HTTP clients send it (and so as it must be signed).
    host: HeaderValue,
    content_type: HeaderValue,
}

impl Origin {
    fn new(config: &S3Config, versions: Versions) -> Result<Origin, RenderError> {
        let invalid = |reason: String| RenderError::InvalidEndpoint { reason };
        let validate_bucket = match versions {
            Versions::Etags => validate_bucket,
            Versions::Generations => validate_gcs_bucket,
        };
        validate_bucket(&config.bucket)
            .map_err(|why| invalid(format!("bucket name {:?} {why}", excerpt(&config.bucket))))?;
        if config.region.is_empty()
            || !config
                .region
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(invalid(format!(
                "region {:?} must be non-empty letters, digits and '-'",
                excerpt(&config.region)
            )));
        }
        let content_type = HeaderValue::from_str(&config.content_type)
            .map_err(|_| invalid("content_type is not a valid header value".to_string()))?;

        let endpoint = Endpoint::parse(&config.endpoint, false).map_err(invalid)?;
        let (scheme, port) = (endpoint.scheme, &endpoint.port);
        let host = endpoint.host.as_str();

        let (host, bucket_path) = match config.addressing {
            Addressing::PathStyle => (host.to_string(), format!("/{}", config.bucket)),
            Addressing::VirtualHosted => {
                if endpoint.host_is_ip() {
                    return Err(invalid(
                        "virtual-hosted addressing needs a DNS name, not an IP address; \
                         use path-style"
                            .to_string(),
                    ));
                }
                if scheme == "https" && config.bucket.contains('.') {
                    return Err(invalid(
                        "a bucket name with '.' cannot be virtual-hosted over https: \
                         the server's wildcard certificate covers one DNS label only; \
                         use path-style"
                            .to_string(),
                    ));
                }
                (format!("{}.{host}", config.bucket), String::new())
            }
        };
        let host = format!("{host}{port}");
        let host_header = HeaderValue::from_str(&host)
            .map_err(|_| invalid("endpoint host is not a valid header value".to_string()))?;
        Ok(Origin {
            base: format!("{scheme}://{host}"),
            bucket_path,
            host: host_header,
            content_type,
        })
    }
}

/// S3 bucket naming rules: 3-63 characters of `a-z 0-9 . -`, starting and
/// ending with a letter or digit, no `..`, not shaped like an IPv4 address.
fn validate_bucket(bucket: &str) -> Result<(), &'static str> {
    let bytes = bucket.as_bytes();
    if !(3..=63).contains(&bytes.len()) {
        return Err("must be 3 to 63 characters long");
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'.' || *b == b'-')
    {
        return Err("may contain only lowercase letters, digits, '.' and '-'");
    }
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.first().is_some_and(alnum) || !bytes.last().is_some_and(alnum) {
        return Err("must start and end with a letter or digit");
    }
    if bytes.windows(2).any(|pair| pair == b"..") {
        return Err("must not contain '..'");
    }
    if super::text::ipv4_shaped(bucket) {
        return Err("must not be an IP address");
    }
    Ok(())
}

/// GCS bucket naming rules: 3-63 characters of `a-z 0-9 . - _` (up to 222
/// when dotted, each dot-separated part at most 63), starting and ending
/// with a letter or digit, not shaped like an IPv4 address.
fn validate_gcs_bucket(bucket: &str) -> Result<(), &'static str> {
    let bytes = bucket.as_bytes();
    let max = if bucket.contains('.') { 222 } else { 63 };
    if !(3..=max).contains(&bytes.len()) || bucket.split('.').any(|part| part.len() > 63) {
        return Err("must be 3 to 63 characters long (222 with dots, 63 between dots)");
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err("may contain only lowercase letters, digits, '.', '-' and '_'");
    }
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.first().is_some_and(alnum) || !bytes.last().is_some_and(alnum) {
        return Err("must start and end with a letter or digit");
    }
    if super::text::ipv4_shaped(bucket) {
        return Err("must not be an IP address");
    }
    Ok(())
}

/// Renders [`StoreOp`]s as S3 REST requests and classifies S3 responses.
#[derive(Clone, Debug)]
pub struct S3Dialect {
    config: S3Config,
    origin: Origin,
    versions: Versions,
}

/// What names an object's version in conditions and replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Versions {
    /// The `ETag` header, `If-None-Match: *` and `If-Match` (S3).
    Etags,
    /// The `x-goog-generation` header and `x-goog-if-generation-match`
    /// (`0` for "absent"): the GCS XML API.
    Generations,
}

/// GCS's generation headers.
const GOOG_IF_GENERATION_MATCH: HeaderName = HeaderName::from_static("x-goog-if-generation-match");

impl S3Dialect {
    /// A dialect for `config`, once it has been [validated](S3Config::validate).
    pub fn new(config: S3Config) -> Result<Self, RenderError> {
        Self::with_versions(config, Versions::Etags)
    }

    /// The dialect with `versions` naming object versions (the GCS
    /// dialect is this one with generations).
    pub(crate) fn with_versions(config: S3Config, versions: Versions) -> Result<Self, RenderError> {
        let origin = Origin::new(&config, versions)?;
        Ok(S3Dialect {
            config,
            origin,
            versions,
        })
    }

    /// The configuration this dialect was built from.
    pub fn config(&self) -> &S3Config {
        &self.config
    }
}

impl Render for S3Dialect {
    fn common_headers(&self, headers: &mut HeaderMap) {
        headers.insert(HOST, self.origin.host.clone());
    }

    // (A GCS version is a generation, which `If-None-Match` does not name:
    // there the read is a plain one.)
    fn if_none_match(&self, key: &str, etag: &Etag) -> Result<Option<HeaderValue>, RenderError> {
        match self.versions {
            Versions::Etags => self.if_match(key, etag).map(Some),
            Versions::Generations => Ok(None),
        }
    }

    fn put_headers(&self, headers: &mut HeaderMap, body: &[u8]) {
        headers.insert(CONTENT_TYPE, self.origin.content_type.clone());
        headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    }

    fn object_uri(&self, key: &str) -> Result<String, RenderError> {
        check_key(key, false)?;
        let mut uri = format!("{}{}/", self.origin.base, self.origin.bucket_path);
        percent_encode(&mut uri, key, true);
        Ok(uri)
    }

    fn list_uri(
        &self,
        prefix: &str,
        continuation: Option<&str>,
        max_keys: Option<u32>,
    ) -> Result<String, RenderError> {
        check_key(prefix, true)?;
        let path = if self.origin.bucket_path.is_empty() {
            "/"
        } else {
            &self.origin.bucket_path
        };
        let mut uri = format!("{}{path}?list-type=2&prefix=", self.origin.base);
        percent_encode(&mut uri, prefix, false);
        if let Some(token) = continuation {
            uri.push_str("&continuation-token=");
            percent_encode(&mut uri, token, false);
        }
        if let Some(n) = max_keys {
            uri.push_str(&format!("&max-keys={}", n.max(1)));
        }
        Ok(uri)
    }

    fn condition(
        &self,
        key: &str,
        etag: Option<&Etag>,
    ) -> Result<(HeaderName, HeaderValue), RenderError> {
        match (self.versions, etag) {
            (Versions::Etags, None) => Ok((IF_NONE_MATCH, HeaderValue::from_static("*"))),
            (Versions::Etags, Some(etag)) => Ok((IF_MATCH, self.if_match(key, etag)?)),
            (Versions::Generations, None) => {
                Ok((GOOG_IF_GENERATION_MATCH, HeaderValue::from_static("0")))
            }
            (Versions::Generations, Some(generation)) => {
                let g = generation.as_str();
                if g.is_empty() || !g.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(RenderError::InvalidKey {
                        key: excerpt(key),
                        reason: "its expected version is not a GCS generation number",
                    });
                }
                Ok((
                    GOOG_IF_GENERATION_MATCH,
                    HeaderValue::from_str(g).map_err(|_| RenderError::InvalidKey {
                        key: excerpt(key),
                        reason: "its expected version is not a GCS generation number",
                    })?,
                ))
            }
        }
    }
}

impl S3Dialect {
    fn if_match(&self, key: &str, etag: &Etag) -> Result<HeaderValue, RenderError> {
        let value = match self.config.etag_quoting {
            EtagQuoting::Quoted => etag.quoted(),
            EtagQuoting::Unquoted => etag.as_str().to_string(),
        };
        HeaderValue::from_str(&value).map_err(|_| RenderError::InvalidKey {
            key: excerpt(key),
            reason: "its If-Match etag is not a valid header value",
        })
    }
}

impl Dialect for S3Dialect {
    fn min_write_interval(&self) -> core::time::Duration {
        self.config.min_write_interval
    }

    fn render(&self, op: &StoreOp) -> Result<Request<Vec<u8>>, RenderError> {
        render(self, op)
    }

    fn parse(&self, op: &StoreOp, response: &Response<Vec<u8>>) -> StoreReply {
        dated_reply(response, |status, headers, body, date_ms| {
            classify(self.versions, op, status, headers, body, date_ms)
        })
    }
}

/// Sorts one response into a [`ReplyKind`] (see the module docs for the table).
fn classify(
    versions: Versions,
    op: &StoreOp,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    date_ms: Option<u64>,
) -> ReplyKind {
    let (version_header, missing) = match versions {
        Versions::Etags => (ETAG, "MissingETag"),
        Versions::Generations => (GOOG_GENERATION, "MissingGeneration"),
    };
    let etag = header_str(headers, version_header.clone())
        .map(Etag::new)
        .filter(|e| !e.as_str().is_empty());
    match (status, op) {
        (200, StoreOp::Get { .. } | StoreOp::GetIfNoneMatch { .. }) => {
            found(status, etag, body, missing, version_header.as_str())
        }
        (304, StoreOp::GetIfNoneMatch { .. }) => ReplyKind::NotModified,
        (200, StoreOp::Put { .. }) => ReplyKind::Written { etag },
        (200 | 204, StoreOp::Delete { .. }) => ReplyKind::Deleted,
        (200, StoreOp::List { .. }) => listed(
            status,
            parse_listing(body, versions),
            "ListObjectsV2 listing",
        ),
        (412, _) => ReplyKind::PreconditionFailed,
        (429 | 503, _) => ReplyKind::Throttled {
            retry_after: retry_after(headers, date_ms),
        },
        _ => classify_error(op, status, parse_error_body(body)),
    }
}

/// Classifies the statuses whose meaning depends on the error code.
fn classify_error(op: &StoreOp, status: u16, error: ErrorBody) -> ReplyKind {
    let code = error.code.as_deref().unwrap_or("");
    match status {
        404 if code == "NoSuchBucket" => ReplyKind::NoSuchBucket,
        404 => ReplyKind::Missing,
        409 if matches!(code, "ConditionalRequestConflict" | "OperationAborted") => {
            ReplyKind::Conflict
        }
        _ => classify_status(
            op,
            status,
            error,
            &[
                "ExpiredToken",
                "InvalidToken",
                "AuthorizationHeaderMalformed",
            ],
            &["NotImplemented", "InvalidArgument", "InvalidRequest"],
        ),
    }
}

/// Entries and continuation token of a ListObjectsV2 body; `None` unless
/// the body is a well-formed `ListBucketResult` whose every `Contents` has a
/// `Key` and a numeric or absent `Size`, and which names the next page when
/// truncated.
fn parse_listing(body: &[u8], versions: Versions) -> Option<(Vec<ListEntry>, Option<String>)> {
    const ROOT: &str = "ListBucketResult";
    let version = match versions {
        Versions::Etags => "ETag",
        Versions::Generations => "Generation",
    };
    let mut entries = Vec::new();
    let (mut key, mut etag, mut size) = (None, None, None);
    let (mut truncated, mut token, mut closed, mut valid) = (false, None, false, true);
    walk_xml(body, |path, text| {
        if is_path(path, &[ROOT, "Contents", "Key"]) {
            key = Some(text);
        } else if is_path(path, &[ROOT, "Contents", version]) {
            etag = Some(Etag::new(&text)).filter(|e| !e.as_str().is_empty());
        } else if is_path(path, &[ROOT, "Contents", "Size"]) {
            size = text.trim().parse::<u64>().ok();
            valid &= size.is_some();
        } else if is_path(path, &[ROOT, "Contents"]) {
            match key.take() {
                Some(key) => entries.push(ListEntry {
                    key,
                    etag: etag.take(),
                    size: size.take().unwrap_or(0),
                }),
                None => valid = false,
            }
        } else if is_path(path, &[ROOT, "IsTruncated"]) {
            truncated = text.trim().eq_ignore_ascii_case("true");
        } else if is_path(path, &[ROOT, "NextContinuationToken"]) {
            token = Some(text.trim().to_string()).filter(|t| !t.is_empty());
        } else if is_path(path, &[ROOT]) {
            closed = true;
        }
    })
    .ok()?;
    let next = if truncated { Some(token?) } else { None };
    (valid && closed).then_some((entries, next))
}

#[cfg(test)]
mod tests {
    use super::super::text::testing::{header, response};
    use super::super::text::KEY_EXCERPT_CHARS;
    use super::*;
    use crate::store::PutCondition;
    use crate::time::{StoreDate, UnixMillis};
    use http::Method;
    use std::time::Duration;

    fn path_style() -> S3Dialect {
        S3Dialect::new(S3Config::custom(
            "http://127.0.0.1:9000",
            "locks",
            "us-east-1",
        ))
        .expect("valid config")
    }

    fn virtual_hosted() -> S3Dialect {
        S3Dialect::new(S3Config::aws("eu-west-2", "locks")).expect("valid config")
    }

    fn get(key: &str) -> StoreOp {
        StoreOp::Get { key: key.into() }
    }

    fn put(key: &str, condition: PutCondition) -> StoreOp {
        StoreOp::Put {
            key: key.into(),
            body: br#"{"token":1}"#.to_vec(),
            condition,
        }
    }

    fn list(prefix: &str, continuation: Option<&str>) -> StoreOp {
        StoreOp::List {
            prefix: prefix.into(),
            continuation: continuation.map(String::from),
            max_keys: None,
        }
    }

    fn kind(op: &StoreOp, status: u16, headers: &[(&str, &str)], body: &str) -> ReplyKind {
        path_style()
            .parse(op, &response(status, headers, body))
            .kind
    }

    fn error_xml(code: &str) -> String {
        format!("<?xml version=\"1.0\"?><Error><Code>{code}</Code><Message>m</Message></Error>")
    }

    #[test]
    fn constructors_pick_endpoint_region_and_addressing() {
        let aws = S3Config::aws("us-east-1", "locks");
        assert_eq!(aws.endpoint, "https://s3.us-east-1.amazonaws.com");
        assert_eq!(aws.addressing, Addressing::VirtualHosted);
        let r2 = S3Config::r2("0123abcd", "locks");
        assert_eq!(r2.endpoint, "https://0123abcd.r2.cloudflarestorage.com");
        assert_eq!(
            (r2.region.as_str(), r2.addressing),
            ("auto", Addressing::PathStyle)
        );
        assert_eq!(r2.content_type, "application/json");
        assert_eq!(r2.etag_quoting, EtagQuoting::Quoted);
        assert!(aws.validate().is_ok() && r2.validate().is_ok());
    }

    #[test]
    fn path_style_urls_and_host() {
        let d = path_style();
        let req = d.render(&get("leases/a")).unwrap();
        assert_eq!(req.method(), Method::GET);
        assert_eq!(req.uri(), "http://127.0.0.1:9000/locks/leases/a");
        assert_eq!(header(&req, "host"), Some("127.0.0.1:9000"));
        assert!(req.body().is_empty());
    }

    #[test]
    fn virtual_hosted_urls_and_host() {
        let req = virtual_hosted().render(&get("leases/a")).unwrap();
        assert_eq!(
            req.uri(),
            "https://locks.s3.eu-west-2.amazonaws.com/leases/a"
        );
        assert_eq!(
            header(&req, "host"),
            Some("locks.s3.eu-west-2.amazonaws.com")
        );
    }

    #[test]
    fn host_header_drops_only_default_ports() {
        let d = S3Dialect::new(S3Config::custom("https://minio.local:443/", "locks", "x")).unwrap();
        let req = d.render(&get("k")).unwrap();
        assert_eq!(header(&req, "host"), Some("minio.local"));
        assert_eq!(req.uri(), "https://minio.local/locks/k");
        let d = S3Dialect::new(S3Config::custom("http://minio.local:443", "locks", "x")).unwrap();
        assert_eq!(
            header(&d.render(&get("k")).unwrap(), "host"),
            Some("minio.local:443")
        );
    }

    #[test]
    fn keys_are_encoded_per_byte_keeping_slashes() {
        let req = path_style()
            .render(&get("a b/c+d&e=f?g#h%i/é/~-._/日"))
            .unwrap();
        assert_eq!(
            req.uri().path(),
            "/locks/a%20b/c%2Bd%26e%3Df%3Fg%23h%25i/%C3%A9/~-._/%E6%97%A5"
        );
        assert_eq!(req.uri().query(), None);
    }

    #[test]
    fn invalid_keys_are_refused_with_an_excerpt() {
        let d = path_style();
        let reason = |key: &str| match d.render(&get(key)) {
            Err(RenderError::InvalidKey { key, reason }) => {
                assert!(key.chars().count() <= KEY_EXCERPT_CHARS);
                reason
            }
            other => panic!("expected InvalidKey, got {other:?}"),
        };
        assert_eq!(reason(""), "is empty");
        assert_eq!(reason(&"k".repeat(1025)), "is longer than 1024 bytes");
        assert_eq!(reason("a\nb"), "contains control characters");
        assert_eq!(reason("a\u{7f}"), "contains control characters");
        assert_eq!(reason("a/../b"), "has a '.' or '..' path segment");
        assert_eq!(reason("./b"), "has a '.' or '..' path segment");
        assert!(d.render(&get(&"k".repeat(1024))).is_ok());
        assert!(d.render(&get("a/.../b.c")).is_ok());
    }

    #[test]
    fn put_headers_per_condition() {
        let d = path_style();
        let req = d.render(&put("k", PutCondition::IfAbsent)).unwrap();
        assert_eq!(req.method(), Method::PUT);
        assert_eq!(req.body(), br#"{"token":1}"#);
        assert_eq!(header(&req, "content-type"), Some("application/json"));
        assert_eq!(header(&req, "content-length"), Some("11"));
        assert_eq!(header(&req, "if-none-match"), Some("*"));
        assert_eq!(header(&req, "if-match"), None);

        let req = d
            .render(&put("k", PutCondition::IfMatch(Etag::new("\"abc\""))))
            .unwrap();
        assert_eq!(header(&req, "if-match"), Some("\"abc\""));
        assert_eq!(header(&req, "if-none-match"), None);

        let req = d.render(&put("k", PutCondition::None)).unwrap();
        assert_eq!(header(&req, "if-match"), None);
        assert_eq!(header(&req, "if-none-match"), None);
        assert!(req.headers().get("x-amz-content-sha256").is_none());
    }

    #[test]
    fn unquoted_etags_and_custom_content_type() {
        let mut config = S3Config::custom("http://127.0.0.1:9000", "locks", "us-east-1");
        config.etag_quoting = EtagQuoting::Unquoted;
        config.content_type = "application/octet-stream".into();
        let d = S3Dialect::new(config).unwrap();
        let req = d
            .render(&put("k", PutCondition::IfMatch(Etag::new("\"abc\""))))
            .unwrap();
        assert_eq!(header(&req, "if-match"), Some("abc"));
        assert_eq!(
            header(&req, "content-type"),
            Some("application/octet-stream")
        );
    }

    #[test]
    fn unsendable_etag_is_a_render_error() {
        let op = put("k", PutCondition::IfMatch(Etag::new("a\u{1}b")));
        assert!(matches!(
            path_style().render(&op),
            Err(RenderError::InvalidKey { .. })
        ));
    }

    #[test]
    fn delete_with_and_without_if_match() {
        let d = virtual_hosted();
        let req = d
            .render(&StoreOp::Delete {
                key: "k".into(),
                if_match: Some(Etag::new("abc")),
            })
            .unwrap();
        assert_eq!(req.method(), Method::DELETE);
        assert_eq!(header(&req, "if-match"), Some("\"abc\""));
        let req = d
            .render(&StoreOp::Delete {
                key: "k".into(),
                if_match: None,
            })
            .unwrap();
        assert_eq!(header(&req, "if-match"), None);
    }

    #[test]
    fn list_query_encodes_values_including_slashes() {
        let req = path_style()
            .render(&list("leases/a b", Some("tok/+=")))
            .unwrap();
        assert_eq!(req.method(), Method::GET);
        assert_eq!(
            req.uri(),
            "http://127.0.0.1:9000/locks?list-type=2&prefix=leases%2Fa%20b&continuation-token=tok%2F%2B%3D"
        );
        let req = virtual_hosted().render(&list("", None)).unwrap();
        assert_eq!(
            req.uri(),
            "https://locks.s3.eu-west-2.amazonaws.com/?list-type=2&prefix="
        );
        assert!(path_style().render(&list("a\u{0}", None)).is_err());
        let paged = StoreOp::List {
            prefix: "p".into(),
            continuation: Some("t".into()),
            max_keys: Some(1),
        };
        assert_eq!(
            path_style().render(&paged).unwrap().uri(),
            "http://127.0.0.1:9000/locks?list-type=2&prefix=p&continuation-token=t&max-keys=1"
        );
    }

    #[test]
    fn config_validation() {
        let bad = |config: S3Config| match S3Dialect::new(config) {
            Err(RenderError::InvalidEndpoint { reason }) => reason,
            other => panic!("expected InvalidEndpoint, got {other:?}"),
        };
        let custom = |endpoint: &str, bucket: &str| S3Config::custom(endpoint, bucket, "r1");
        assert!(bad(custom("ftp://h", "locks")).contains("scheme"));
        assert!(bad(custom("127.0.0.1:9000", "locks")).contains("scheme"));
        assert!(bad(custom("http://h/?x=1", "locks")).contains("query"));
        assert!(bad(custom("http://h/base", "locks")).contains("path"));
        assert!(bad(custom("http://u:p@h", "locks")).contains("user info"));
        assert!(bad(custom("not a uri", "locks")).contains("not a URI"));
        for bucket in [
            "ab",
            "Locks",
            "-locks",
            "locks-",
            "lo..cks",
            "lo_cks",
            "10.0.0.1",
            "192.168.05.4",
        ] {
            assert!(
                bad(custom("http://h", bucket)).contains("bucket name"),
                "{bucket}"
            );
        }
        assert!(bad(S3Config::custom("http://h", "locks", "")).contains("region"));
        assert!(bad(S3Config::custom("http://h", "locks", "us/east")).contains("region"));
        // Shaped like an address only with four groups of digits.
        for bucket in ["1.2.3", "1.2.3.4.5", "a1.2.3.4", "1.2.3.4444", "10.0.0.1x"] {
            assert!(
                S3Dialect::new(custom("http://h", bucket)).is_ok(),
                "{bucket}"
            );
        }
        let mut config = custom("http://h", "locks");
        config.content_type = "a\nb".into();
        assert!(bad(config).contains("content_type"));

        // Virtual-hosted: dotted buckets only over plain http, never on IPs.
        assert!(bad(S3Config::aws("us-east-1", "my.locks")).contains("certificate"));
        let mut config = custom("http://s3.local:9000", "my.locks");
        config.addressing = Addressing::VirtualHosted;
        let req = S3Dialect::new(config).unwrap().render(&get("k")).unwrap();
        assert_eq!(req.uri(), "http://my.locks.s3.local:9000/k");
        for endpoint in ["http://127.0.0.1:9000", "http://[::1]:9000"] {
            let mut config = custom(endpoint, "locks");
            config.addressing = Addressing::VirtualHosted;
            assert!(bad(config).contains("IP address"));
        }
    }

    #[test]
    fn date_header_dates_every_reply() {
        let date = ("date", "Sun, 22 Nov 2026 03:10:05 GMT");
        let reply = path_style().parse(&get("k"), &response(404, &[date], ""));
        let expected = StoreDate::from_http_date(UnixMillis(1_795_317_005_000));
        assert_eq!(reply.date, Some(expected));
        for garbled in ["yesterday", "Sun, 22 Nov 1969 03:10:05 GMT", ""] {
            let reply = path_style().parse(&get("k"), &response(404, &[("date", garbled)], ""));
            assert_eq!(reply.date, None, "{garbled}");
        }
        assert_eq!(
            path_style().parse(&get("k"), &response(404, &[], "")).date,
            None
        );
    }

    #[test]
    fn success_replies() {
        let etag = ("etag", "\"e1\"");
        assert_eq!(
            kind(&get("k"), 200, &[etag], "{}"),
            ReplyKind::Found {
                etag: Etag::new("e1"),
                body: b"{}".to_vec()
            }
        );
        assert_eq!(
            kind(&put("k", PutCondition::IfAbsent), 200, &[etag], ""),
            ReplyKind::Written {
                etag: Some(Etag::new("e1"))
            }
        );
        assert_eq!(
            kind(&put("k", PutCondition::IfAbsent), 200, &[], ""),
            ReplyKind::Written { etag: None }
        );
        let delete = StoreOp::Delete {
            key: "k".into(),
            if_match: None,
        };
        assert_eq!(kind(&delete, 204, &[], ""), ReplyKind::Deleted);
        assert_eq!(kind(&delete, 200, &[], ""), ReplyKind::Deleted);
    }

    #[test]
    fn get_without_etag_is_unexpected() {
        for headers in [&[][..], &[("etag", "\"\"")][..]] {
            match kind(&get("k"), 200, headers, "{}") {
                ReplyKind::Unexpected {
                    status: 200, code, ..
                } => {
                    assert_eq!(code.as_deref(), Some("MissingETag"))
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn listing_pages() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>locks</Name><Prefix>leases/</Prefix><KeyCount>2</KeyCount>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>leases/ a&amp;b </Key><ETag>&quot;e1&quot;</ETag><Size>12</Size></Contents>
  <Contents><Key><![CDATA[leases/<c>]]></Key><Size>0</Size></Contents>
  <NextContinuationToken>tok+/=</NextContinuationToken>
</ListBucketResult>"#;
        assert_eq!(
            kind(&list("leases/", None), 200, &[], body),
            ReplyKind::Listed {
                entries: vec![
                    ListEntry {
                        key: "leases/ a&b ".into(),
                        etag: Some(Etag::new("e1")),
                        size: 12
                    },
                    ListEntry {
                        key: "leases/<c>".into(),
                        etag: None,
                        size: 0
                    },
                ],
                next: Some("tok+/=".into()),
            }
        );
        let last_page = "<ListBucketResult><IsTruncated>false</IsTruncated>\
                         <NextContinuationToken>t</NextContinuationToken></ListBucketResult>";
        assert_eq!(
            kind(&list("", None), 200, &[], last_page),
            ReplyKind::Listed {
                entries: vec![],
                next: None
            }
        );
    }

    #[test]
    fn malformed_listings() {
        for body in [
            "",
            "<html><body>proxy login</body></html>",
            "<ListBucketResult><Contents><Key>a</Key>",
            "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
            "<ListBucketResult><Contents><Key>a</Key><Size>x</Size></Contents></ListBucketResult>",
            "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
            "<ListBucketResult><Contents><Key>&nbsp;</Key></Contents></ListBucketResult>",
            "<ListBucketResult></Wrong>",
        ] {
            match kind(&list("", None), 200, &[], body) {
                ReplyKind::Unexpected {
                    status: 200, code, ..
                } => {
                    assert_eq!(code.as_deref(), Some("MalformedListing"), "{body}")
                }
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn not_found_replies() {
        let ops = [
            get("k"),
            put("k", PutCondition::IfMatch(Etag::new("e"))),
            list("", None),
        ];
        for op in &ops {
            assert_eq!(
                kind(op, 404, &[], &error_xml("NoSuchKey")),
                ReplyKind::Missing
            );
            assert_eq!(kind(op, 404, &[], ""), ReplyKind::Missing);
            assert_eq!(
                kind(op, 404, &[], &error_xml("NoSuchBucket")),
                ReplyKind::NoSuchBucket
            );
        }
    }

    #[test]
    fn precondition_and_conflict() {
        let op = put("k", PutCondition::IfAbsent);
        assert_eq!(
            kind(&op, 412, &[], &error_xml("PreconditionFailed")),
            ReplyKind::PreconditionFailed
        );
        assert_eq!(kind(&op, 412, &[], ""), ReplyKind::PreconditionFailed);
        for code in ["ConditionalRequestConflict", "OperationAborted"] {
            assert_eq!(kind(&op, 409, &[], &error_xml(code)), ReplyKind::Conflict);
        }
        assert!(matches!(
            kind(&op, 409, &[], &error_xml("BucketNotEmpty")),
            ReplyKind::Unexpected { status: 409, .. }
        ));
    }

    #[test]
    fn throttling_and_retry_after() {
        let op = get("k");
        let throttled = |headers: &[(&str, &str)], status| match kind(&op, status, headers, "") {
            ReplyKind::Throttled { retry_after } => retry_after,
            other => panic!("{other:?}"),
        };
        assert_eq!(throttled(&[], 429), None);
        assert_eq!(
            throttled(&[("retry-after", " 7 ")], 503),
            Some(Duration::from_secs(7))
        );
        let date = ("date", "Sun, 22 Nov 2026 03:10:05 GMT");
        let later = ("retry-after", "Sun, 22 Nov 2026 03:10:35 GMT");
        assert_eq!(
            throttled(&[date, later], 503),
            Some(Duration::from_secs(30))
        );
        let earlier = ("retry-after", "Sun, 22 Nov 2026 03:00:00 GMT");
        assert_eq!(throttled(&[date, earlier], 429), Some(Duration::ZERO));
        assert_eq!(throttled(&[later], 503), None);
        assert_eq!(throttled(&[("retry-after", "soon")], 503), None);
        assert_eq!(
            throttled(&[("retry-after", "99999999999999999999999")], 503),
            None
        );
        assert!(matches!(
            kind(&op, 503, &[], &error_xml("SlowDown")),
            ReplyKind::Throttled { .. }
        ));
    }

    #[test]
    fn server_errors_and_denials() {
        let op = put("k", PutCondition::IfAbsent);
        assert_eq!(
            kind(&op, 500, &[], &error_xml("InternalError")),
            ReplyKind::ServerError {
                status: 500,
                code: Some("InternalError".into())
            }
        );
        assert_eq!(
            kind(&op, 502, &[], "<html>bad gateway</html>"),
            ReplyKind::ServerError {
                status: 502,
                code: None
            }
        );
        for (status, code) in [
            (403, "AccessDenied"),
            (403, "SignatureDoesNotMatch"),
            (401, "Unauthorized"),
            (400, "ExpiredToken"),
            (400, "AuthorizationHeaderMalformed"),
        ] {
            assert_eq!(
                kind(&op, status, &[], &error_xml(code)),
                ReplyKind::Denied {
                    code: Some(code.into()),
                    message: Some("m".into())
                }
            );
        }
        assert_eq!(
            kind(&op, 403, &[], ""),
            ReplyKind::Denied {
                code: None,
                message: None
            }
        );
    }

    #[test]
    fn unsupported_conditions() {
        let conditional = [
            put("k", PutCondition::IfAbsent),
            put("k", PutCondition::IfMatch(Etag::new("e"))),
            StoreOp::Delete {
                key: "k".into(),
                if_match: Some(Etag::new("e")),
            },
        ];
        for op in &conditional {
            for code in ["NotImplemented", "InvalidArgument", "InvalidRequest"] {
                assert_eq!(
                    kind(op, 400, &[], &error_xml(code)),
                    ReplyKind::Unsupported {
                        status: 400,
                        code: Some(code.into())
                    }
                );
            }
        }
        assert_eq!(
            kind(&get("k"), 501, &[], ""),
            ReplyKind::Unsupported {
                status: 501,
                code: None
            }
        );
        let unconditional = put("k", PutCondition::None);
        assert!(matches!(
            kind(&unconditional, 400, &[], &error_xml("InvalidArgument")),
            ReplyKind::Unexpected { status: 400, .. }
        ));
    }

    #[test]
    fn other_statuses_are_unexpected() {
        for status in [100, 201, 206, 301, 304, 307, 400, 418, 600, 999] {
            assert!(
                matches!(
                    kind(&get("k"), status, &[("etag", "e")], ""),
                    ReplyKind::Unexpected { .. }
                ),
                "{status}"
            );
        }
        assert_eq!(
            kind(&get("k"), 301, &[], &error_xml("PermanentRedirect")),
            ReplyKind::Unexpected {
                status: 301,
                code: Some("PermanentRedirect".into()),
                message: Some("m".into())
            }
        );
    }

    #[test]
    fn error_bodies_tolerate_bom_namespaces_and_garbage() {
        let parsed = |body: &[u8]| parse_error_body(body);
        let full = ErrorBody {
            code: Some("NoSuchKey".into()),
            message: Some("gone & done".into()),
        };
        assert_eq!(
            parsed(b"\xEF\xBB\xBF<?xml version=\"1.0\"?>\n <Error>\n<Code> NoSuchKey </Code><Message>gone &amp; done</Message></Error>\n"),
            full
        );
        assert_eq!(
            parsed(b"<s3:Error xmlns:s3=\"urn:x\"><s3:Code>NoSuchKey</s3:Code><s3:Message>gone &#38; done</s3:Message></s3:Error>"),
            full
        );
        // Cut off mid-document: what came before still counts.
        assert_eq!(
            parsed(b"<Error><Code>SlowDown</Code><Message>tr")
                .code
                .as_deref(),
            Some("SlowDown")
        );
        for garbage in [
            &b""[..],
            b"<!doctype html><html><p>503</html>",
            b"\xff\xfe\x00<",
            b"<Code>X</Code>",
        ] {
            assert_eq!(parsed(garbage), ErrorBody::default());
        }
        let long = format!("<Error><Message>{}</Message></Error>", "é".repeat(500));
        let message = parsed(long.as_bytes()).message.unwrap();
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS);
    }
}
