//! The Azure dialect: documented in the layer's docs (`wire/mod.rs`, "The Azure dialect").

use super::text::{
    check_key, classify_status, dated_reply, excerpt, found, header_str, is_path, listed,
    parse_error_body, percent_encode, render, retry_after, walk_xml, Endpoint, Render,
    MS_ERROR_CODE,
};
use super::{Dialect, RenderError, SignError, Signer};
use crate::store::{Etag, ListEntry, PutCondition, ReplyKind, StoreOp, StoreReply};
use crate::time::UnixMillis;
use core::fmt;
use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_MATCH, IF_NONE_MATCH,
};
use http::{Request, Response};

/// The Blob service REST version sent in `x-ms-version`.
pub const AZURE_API_VERSION: &str = "2023-11-03";

const MS_VERSION: HeaderName = HeaderName::from_static("x-ms-version");
const MS_BLOB_TYPE: HeaderName = HeaderName::from_static("x-ms-blob-type");

/// Where an Azure container is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AzureConfig {
    /// The account's blob service URL: `https://{account}.blob.core.windows.net`,
    /// or an emulator's `http://127.0.0.1:10000/{account}`. No query.
    pub endpoint: String,
    /// Container name (3-63 characters of `a-z 0-9 -`).
    pub container: String,
    /// `x-ms-version` of every request.
    pub api_version: String,
    /// `Content-Type` of every Put Blob.
    pub content_type: String,
}

impl AzureConfig {
    /// `container` in storage account `account` on Azure.
    pub fn account(account: &str, container: impl Into<String>) -> Self {
        AzureConfig::custom(
            format!("https://{account}.blob.core.windows.net"),
            container,
        )
    }

    /// `container` behind any endpoint (Azurite, a private endpoint).
    pub fn custom(endpoint: impl Into<String>, container: impl Into<String>) -> Self {
        AzureConfig {
            endpoint: endpoint.into(),
            container: container.into(),
            api_version: AZURE_API_VERSION.to_string(),
            content_type: "application/json".to_string(),
        }
    }

    /// Checks that the settings form valid request URLs and headers.
    pub fn validate(&self) -> Result<(), RenderError> {
        AzureDialect::new(self.clone()).map(drop)
    }
}

/// Container naming rules: 3-63 characters of `a-z 0-9 -`, starting and
/// ending with a letter or digit, no `--`.
fn validate_container(name: &str) -> Result<(), &'static str> {
    let bytes = name.as_bytes();
    if !(3..=63).contains(&bytes.len()) {
        return Err("must be 3 to 63 characters long");
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
    {
        return Err("may contain only lowercase letters, digits and '-'");
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err("must start and end with a letter or digit and not contain '--'");
    }
    Ok(())
}

/// Renders [`StoreOp`]s as Blob service requests and classifies its replies.
#[derive(Clone, Debug)]
pub struct AzureDialect {
    config: AzureConfig,
    /// `scheme://host[:port][/path]/{container}`.
    base: String,
    version: HeaderValue,
    content_type: HeaderValue,
}

impl AzureDialect {
    /// A dialect for `config`.
    pub fn new(config: AzureConfig) -> Result<Self, RenderError> {
        let invalid = |reason: String| RenderError::InvalidEndpoint { reason };
        validate_container(&config.container).map_err(|why| {
            invalid(format!(
                "container name {:?} {why}",
                excerpt(&config.container)
            ))
        })?;
        let endpoint = Endpoint::parse(&config.endpoint, true).map_err(invalid)?;
        let version = HeaderValue::from_str(&config.api_version)
            .ok()
            .filter(|_| !config.api_version.is_empty())
            .ok_or_else(|| invalid("api_version is not a valid header value".to_string()))?;
        let content_type = HeaderValue::from_str(&config.content_type)
            .map_err(|_| invalid("content_type is not a valid header value".to_string()))?;
        let base = format!(
            "{}://{}{}{}/{}",
            endpoint.scheme, endpoint.host, endpoint.port, endpoint.path, config.container
        );
        Ok(AzureDialect {
            config,
            base,
            version,
            content_type,
        })
    }

    /// The configuration this dialect was built from.
    pub fn config(&self) -> &AzureConfig {
        &self.config
    }
}

impl Render for AzureDialect {
    fn common_headers(&self, headers: &mut HeaderMap) {
        headers.insert(MS_VERSION, self.version.clone());
    }

    fn if_none_match(&self, key: &str, etag: &Etag) -> Result<Option<HeaderValue>, RenderError> {
        if_match(key, etag).map(Some)
    }

    fn put_headers(&self, headers: &mut HeaderMap, body: &[u8]) {
        headers.insert(MS_BLOB_TYPE, HeaderValue::from_static("BlockBlob"));
        headers.insert(CONTENT_TYPE, self.content_type.clone());
        headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    }

    fn condition(
        &self,
        key: &str,
        etag: Option<&Etag>,
    ) -> Result<(HeaderName, HeaderValue), RenderError> {
        match etag {
            None => Ok((IF_NONE_MATCH, HeaderValue::from_static("*"))),
            Some(etag) => Ok((IF_MATCH, if_match(key, etag)?)),
        }
    }

    fn object_uri(&self, key: &str) -> Result<String, RenderError> {
        check_key(key, false)?;
        // Azure trims a trailing dot and maps '\' to '/': such a name would
        // silently address another blob.
        let reason = if key.ends_with('.') || key.ends_with('/') {
            Some("ends with '.' or '/', which Azure drops from blob names")
        } else if key.contains('\\') {
            Some("contains '\\', which Azure reads as '/'")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(RenderError::InvalidKey {
                key: excerpt(key),
                reason,
            });
        }
        let mut uri = format!("{}/", self.base);
        percent_encode(&mut uri, key, true);
        Ok(uri)
    }

    fn list_uri(
        &self,
        prefix: &str,
        marker: Option<&str>,
        max_keys: Option<u32>,
    ) -> Result<String, RenderError> {
        check_key(prefix, true)?;
        let mut uri = format!("{}?restype=container&comp=list&prefix=", self.base);
        percent_encode(&mut uri, prefix, false);
        if let Some(marker) = marker {
            uri.push_str("&marker=");
            percent_encode(&mut uri, marker, false);
        }
        if let Some(n) = max_keys {
            uri.push_str(&format!("&maxresults={}", n.max(1)));
        }
        Ok(uri)
    }
}

fn if_match(key: &str, etag: &Etag) -> Result<HeaderValue, RenderError> {
    HeaderValue::from_str(&etag.quoted()).map_err(|_| RenderError::InvalidKey {
        key: excerpt(key),
        reason: "its If-Match etag is not a valid header value",
    })
}

impl Dialect for AzureDialect {
    fn render(&self, op: &StoreOp) -> Result<Request<Vec<u8>>, RenderError> {
        render(self, op)
    }

    fn parse(&self, op: &StoreOp, response: &Response<Vec<u8>>) -> StoreReply {
        dated_reply(response, |status, headers, body, date_ms| {
            classify(op, status, headers, body, date_ms)
        })
    }
}

/// Sorts one response into a [`ReplyKind`] (see the module docs).
fn classify(
    op: &StoreOp,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    date_ms: Option<u64>,
) -> ReplyKind {
    let etag = header_str(headers, ETAG)
        .map(Etag::new)
        .filter(|e| !e.as_str().is_empty());
    match (status, op) {
        (200, StoreOp::Get { .. } | StoreOp::GetIfNoneMatch { .. }) => {
            return found(status, etag, body, "MissingETag", "ETag")
        }
        (304, StoreOp::GetIfNoneMatch { .. }) => return ReplyKind::NotModified,
        (200 | 201, StoreOp::Put { .. }) => return ReplyKind::Written { etag },
        (200 | 202 | 204, StoreOp::Delete { .. }) => return ReplyKind::Deleted,
        (200, StoreOp::List { .. }) => {
            return listed(status, parse_listing(body), "List Blobs listing")
        }
        (412, _) => return ReplyKind::PreconditionFailed,
        (429 | 503, _) => {
            return ReplyKind::Throttled {
                retry_after: retry_after(headers, date_ms),
            }
        }
        _ => {}
    }
    let mut error = parse_error_body(body);
    if let Some(code) = header_str(headers, MS_ERROR_CODE).map(str::trim) {
        if !code.is_empty() {
            error.code = Some(excerpt(code));
        }
    }
    let code = error.code.as_deref().unwrap_or("");
    let create = matches!(
        op,
        StoreOp::Put {
            condition: PutCondition::IfAbsent,
            ..
        }
    );
    match status {
        404 if code == "ContainerNotFound" => ReplyKind::NoSuchBucket,
        404 => ReplyKind::Missing,
        409 if create && code == "BlobAlreadyExists" => ReplyKind::PreconditionFailed,
        _ => classify_status(
            op,
            status,
            error,
            &["InvalidAuthenticationInfo", "AuthenticationFailed"],
            &["UnsupportedHeader", "InvalidHeaderValue", "NotImplemented"],
        ),
    }
}

/// Entries and next marker of a List Blobs body; `None` unless it is a
/// well-formed `EnumerationResults` whose every `Blob` has a `Name` and a
/// numeric or absent `Content-Length`.
fn parse_listing(body: &[u8]) -> Option<(Vec<ListEntry>, Option<String>)> {
    const ROOT: &str = "EnumerationResults";
    let mut entries = Vec::new();
    let (mut name, mut etag, mut size) = (None, None, None);
    let (mut next, mut closed, mut valid) = (None, false, true);
    walk_xml(body, |path, text| {
        if is_path(path, &[ROOT, "Blobs", "Blob", "Name"]) {
            name = Some(text);
        } else if is_path(path, &[ROOT, "Blobs", "Blob", "Properties", "Etag"]) {
            etag = Some(Etag::new(&text)).filter(|e| !e.as_str().is_empty());
        } else if is_path(
            path,
            &[ROOT, "Blobs", "Blob", "Properties", "Content-Length"],
        ) {
            size = text.trim().parse::<u64>().ok();
            valid &= size.is_some();
        } else if is_path(path, &[ROOT, "Blobs", "Blob"]) {
            match name.take() {
                Some(key) => entries.push(ListEntry {
                    key,
                    etag: etag.take(),
                    size: size.take().unwrap_or(0),
                }),
                None => valid = false,
            }
        } else if is_path(path, &[ROOT, "NextMarker"]) {
            next = Some(text.trim().to_string()).filter(|t| !t.is_empty());
        } else if is_path(path, &[ROOT]) {
            closed = true;
        }
    })
    .ok()?;
    (valid && closed).then_some((entries, next))
}

/// Authenticates with a shared access signature: its query parameters are
/// appended to every request URL. `Debug` hides the signature.
#[derive(Clone, PartialEq, Eq)]
pub struct SasSigner {
    query: String,
}

impl SasSigner {
    /// From a SAS token (`sv=...&sig=...`, with or without the leading
    /// `?`). The error never quotes the token.
    pub fn new(token: &str) -> Result<Self, SignError> {
        let query = token.trim().trim_start_matches('?');
        let error = |reason: &str| SignError {
            reason: format!("SAS token {reason}"),
        };
        if query.is_empty() {
            return Err(error("is empty"));
        }
        if !query
            .split('&')
            .any(|p| p.starts_with("sig=") && p.len() > 4)
        {
            return Err(error("has no sig= parameter"));
        }
        if !query
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~%!$'()*+,;=:@/?&".contains(&b))
        {
            return Err(error(
                "contains characters a URL query cannot carry (is it URL-encoded?)",
            ));
        }
        Ok(SasSigner {
            query: query.to_string(),
        })
    }
}

impl fmt::Debug for SasSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SasSigner")
            .field("query", &"<redacted>")
            .finish()
    }
}

impl Signer for SasSigner {
    fn sign(&self, request: &mut Request<Vec<u8>>, _at: UnixMillis) -> Result<(), SignError> {
        let uri = request.uri().to_string();
        let joined = if request.uri().query().is_some() {
            format!("{uri}&{}", self.query)
        } else {
            format!("{uri}?{}", self.query)
        };
        *request.uri_mut() = joined.parse().map_err(|_| SignError {
            reason: "the SAS token does not form a valid URL".to_string(),
        })?;
        Ok(())
    }
}

#[cfg(feature = "sharedkey")]
pub use shared_key::SharedKeySigner;

#[cfg(feature = "sharedkey")]
mod shared_key {
    use super::*;

    const MS_DATE: HeaderName = HeaderName::from_static("x-ms-date");
    const CONTENT_MD5: HeaderName = HeaderName::from_static("content-md5");
    use crate::wire::base64;
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    /// Authenticates with the storage account's key (the `SharedKey`
    /// scheme, version 2009-09-19 and later): sets `x-ms-date` from the
    /// time passed in and `Authorization: SharedKey {account}:{signature}`,
    /// an HMAC-SHA256 of the canonical request under the decoded key.
    /// `Debug` shows the account only.
    #[derive(Clone, PartialEq, Eq)]
    pub struct SharedKeySigner {
        account: String,
        key: Vec<u8>,
    }

    impl fmt::Debug for SharedKeySigner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("SharedKeySigner")
                .field("account", &self.account)
                .field("key", &"<redacted>")
                .finish()
        }
    }

    impl SharedKeySigner {
        /// For `account`, with its base64 account key. The error never
        /// quotes the key.
        pub fn new(account: impl Into<String>, key_base64: &str) -> Result<Self, SignError> {
            let account = account.into();
            if account.is_empty()
                || !account
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            {
                return Err(SignError {
                    reason: format!(
                        "account name {:?} must be lowercase letters and digits",
                        excerpt(&account)
                    ),
                });
            }
            let key = base64::decode(key_base64.trim())
                .filter(|k| !k.is_empty())
                .ok_or_else(|| SignError {
                    reason: "the account key is not base64 (copy it as the portal shows it)"
                        .to_string(),
                })?;
            Ok(SharedKeySigner { account, key })
        }

        /// The account name.
        pub fn account(&self) -> &str {
            &self.account
        }

        /// The string the signature is computed over (for tests and
        /// debugging a `403 AuthenticationFailed`; it holds no secret).
        pub fn string_to_sign(&self, request: &Request<Vec<u8>>) -> String {
            let h = |name: HeaderName| {
                request
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string()
            };
            let length = h(CONTENT_LENGTH);
            let length = if length == "0" { String::new() } else { length };
            let mut out = [
                request.method().as_str().to_string(),
                h(http::header::CONTENT_ENCODING),
                h(http::header::CONTENT_LANGUAGE),
                length,
                h(CONTENT_MD5),
                h(CONTENT_TYPE),
                h(http::header::DATE),
                h(http::header::IF_MODIFIED_SINCE),
                h(IF_MATCH),
                h(IF_NONE_MATCH),
                h(http::header::IF_UNMODIFIED_SINCE),
                h(http::header::RANGE),
            ]
            .join("\n");
            out.push('\n');
            // x-ms-* headers: lowercase names (the http crate keeps them
            // so), sorted, whitespace runs folded.
            let mut names: Vec<&str> = request
                .headers()
                .keys()
                .map(HeaderName::as_str)
                .filter(|n| n.starts_with("x-ms-"))
                .collect();
            crate::sort::small(&mut names);
            for name in names {
                let values: Vec<String> = request
                    .headers()
                    .get_all(name)
                    .iter()
                    .map(|v| {
                        String::from_utf8_lossy(v.as_bytes())
                            .split_whitespace()
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect();
                out.push_str(&format!("{name}:{}\n", values.join(",")));
            }
            // The resource: /account + the path as sent, then each query
            // parameter, decoded, by lowercase name.
            out.push('/');
            out.push_str(&self.account);
            out.push_str(request.uri().path());
            let mut params: Vec<(String, Vec<String>)> = Vec::new();
            for pair in request.uri().query().unwrap_or("").split('&') {
                if pair.is_empty() {
                    continue;
                }
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                // ASCII: every parameter name here is the dialect's own
                // (`to_lowercase` would link Unicode's case tables).
                let name = percent_decode(name).to_ascii_lowercase();
                let value = percent_decode(value);
                match params.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, values)) => values.push(value),
                    None => params.push((name, vec![value])),
                }
            }
            crate::sort::small(&mut params);
            for (name, mut values) in params {
                crate::sort::small(&mut values);
                out.push_str(&format!("\n{name}:{}", values.join(",")));
            }
            out
        }
    }

    /// Decodes `%XX` escapes (and nothing else); invalid escapes stay as
    /// written.
    fn percent_decode(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    impl Signer for SharedKeySigner {
        fn sign(&self, request: &mut Request<Vec<u8>>, at: UnixMillis) -> Result<(), SignError> {
            let date = HeaderValue::from_str(&at.to_http_date()).map_err(|_| SignError {
                reason: "the signing time is not a valid date".to_string(),
            })?;
            request.headers_mut().insert(MS_DATE, date);
            let string_to_sign = self.string_to_sign(request);
            let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).map_err(|_| SignError {
                reason: "the account key cannot key an HMAC".to_string(),
            })?;
            mac.update(string_to_sign.as_bytes());
            let signature = base64::encode(&mac.finalize().into_bytes());
            let value = HeaderValue::from_str(&format!("SharedKey {}:{signature}", self.account))
                .map_err(|_| SignError {
                reason: "the authorization header is not a valid header value".to_string(),
            })?;
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, value);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::text::testing::{header, response};
    use super::*;
    use crate::store::PutCondition;
    use http::Method;

    fn dialect() -> AzureDialect {
        AzureDialect::new(AzureConfig::account("leases", "locks")).unwrap()
    }

    fn emulator() -> AzureDialect {
        AzureDialect::new(AzureConfig::custom(
            "http://127.0.0.1:10000/devaccount",
            "locks",
        ))
        .unwrap()
    }

    fn put(condition: PutCondition) -> StoreOp {
        StoreOp::Put {
            key: "jobs/nightly".into(),
            body: br#"{"token":1}"#.to_vec(),
            condition,
        }
    }

    fn error(status: u16, code: &str) -> Response<Vec<u8>> {
        // As the Blob service writes them: the code in a header and the body.
        response(
            status,
            &[("x-ms-error-code", code)],
            &format!(
                "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{code}</Code>\
                 <Message>The condition specified using HTTP conditional header(s) is not met.\n\
                 RequestId:0\nTime:2026-11-22T10:00:00.0000000Z</Message></Error>"
            ),
        )
    }

    #[test]
    fn urls_for_azure_and_the_emulator() {
        let get = StoreOp::Get {
            key: "jobs/a b+é".into(),
        };
        assert_eq!(
            dialect().render(&get).unwrap().uri(),
            "https://leases.blob.core.windows.net/locks/jobs/a%20b%2B%C3%A9"
        );
        assert_eq!(
            emulator().render(&get).unwrap().uri(),
            "http://127.0.0.1:10000/devaccount/locks/jobs/a%20b%2B%C3%A9"
        );
        let list = StoreOp::List {
            prefix: "jobs/".into(),
            continuation: Some("2!72!MDAw".into()),
            max_keys: Some(1),
        };
        assert_eq!(
            emulator().render(&list).unwrap().uri(),
            "http://127.0.0.1:10000/devaccount/locks?restype=container&comp=list\
             &prefix=jobs%2F&marker=2%2172%21MDAw&maxresults=1"
        );
    }

    #[test]
    fn put_blob_headers_per_condition() {
        let d = dialect();
        let create = d.render(&put(PutCondition::IfAbsent)).unwrap();
        assert_eq!(create.method(), Method::PUT);
        assert_eq!(header(&create, "x-ms-blob-type"), Some("BlockBlob"));
        assert_eq!(header(&create, "x-ms-version"), Some(AZURE_API_VERSION));
        assert_eq!(header(&create, "content-type"), Some("application/json"));
        assert_eq!(header(&create, "content-length"), Some("11"));
        assert_eq!(header(&create, "if-none-match"), Some("*"));
        assert_eq!(create.body(), br#"{"token":1}"#);

        let update = d
            .render(&put(PutCondition::IfMatch(Etag::new("0x8DCB1A2B3C4D5E6"))))
            .unwrap();
        assert_eq!(header(&update, "if-match"), Some("\"0x8DCB1A2B3C4D5E6\""));
        assert_eq!(header(&update, "if-none-match"), None);

        let delete = d
            .render(&StoreOp::Delete {
                key: "k".into(),
                if_match: Some(Etag::new("\"0x1\"")),
            })
            .unwrap();
        assert_eq!(delete.method(), Method::DELETE);
        assert_eq!(header(&delete, "if-match"), Some("\"0x1\""));
        assert_eq!(header(&delete, "x-ms-version"), Some(AZURE_API_VERSION));
    }

    #[test]
    fn names_azure_would_rewrite_are_refused() {
        for key in ["jobs/", "jobs/a.", "a\\b", "", "a/../b"] {
            let err = dialect()
                .render(&StoreOp::Get { key: key.into() })
                .unwrap_err();
            assert!(
                matches!(err, RenderError::InvalidKey { .. }),
                "{key}: {err}"
            );
        }
    }

    #[test]
    fn config_validation() {
        assert!(AzureConfig::account("leases", "ok-name").validate().is_ok());
        for container in ["ab", "Upper", "a--b", "-ab", "under_score"] {
            assert!(
                AzureConfig::account("leases", container)
                    .validate()
                    .is_err(),
                "{container}"
            );
        }
        assert!(AzureConfig::custom("http://h:1/acct?x=1", "abc")
            .validate()
            .is_err());
        assert!(AzureConfig::custom("ftp://h", "abc").validate().is_err());
        let mut c = AzureConfig::account("leases", "abc");
        c.api_version = String::new();
        assert!(c.validate().is_err());
    }

    #[test]
    fn success_replies() {
        let d = dialect();
        let date = ("Date", "Sun, 22 Nov 2026 10:00:00 GMT");
        let get = StoreOp::Get { key: "k".into() };
        let found = d.parse(&get, &response(200, &[("ETag", "\"0x8DC1\""), date], "{}"));
        assert_eq!(
            found.kind,
            ReplyKind::Found {
                etag: Etag::new("0x8DC1"),
                body: b"{}".to_vec()
            }
        );
        assert!(found.date.is_some());
        assert!(matches!(
            d.parse(&get, &response(200, &[], "{}")).kind,
            ReplyKind::Unexpected { code: Some(ref c), .. } if c == "MissingETag"
        ));
        assert_eq!(
            d.parse(
                &put(PutCondition::IfAbsent),
                &response(201, &[("ETag", "\"0x8DC2\"")], "")
            )
            .kind,
            ReplyKind::Written {
                etag: Some(Etag::new("0x8DC2"))
            }
        );
        let delete = StoreOp::Delete {
            key: "k".into(),
            if_match: None,
        };
        assert_eq!(
            d.parse(&delete, &response(202, &[], "")).kind,
            ReplyKind::Deleted
        );
    }

    #[test]
    fn blob_already_exists_on_create_is_a_failed_precondition() {
        let d = dialect();
        let create = put(PutCondition::IfAbsent);
        assert_eq!(
            d.parse(&create, &error(409, "BlobAlreadyExists")).kind,
            ReplyKind::PreconditionFailed
        );
        // Only for a create: elsewhere a 409 is not a condition's answer.
        let plain = put(PutCondition::None);
        assert!(matches!(
            d.parse(&plain, &error(409, "BlobAlreadyExists")).kind,
            ReplyKind::Unexpected { status: 409, .. }
        ));
        assert!(matches!(
            d.parse(&create, &error(409, "LeaseIdMissing")).kind,
            ReplyKind::Unexpected { code: Some(ref c), .. } if c == "LeaseIdMissing"
        ));
        let update = put(PutCondition::IfMatch(Etag::new("0x1")));
        assert_eq!(
            d.parse(&update, &error(412, "ConditionNotMet")).kind,
            ReplyKind::PreconditionFailed
        );
    }

    #[test]
    fn error_replies() {
        let d = dialect();
        let get = StoreOp::Get { key: "k".into() };
        let update = put(PutCondition::IfMatch(Etag::new("0x1")));
        assert_eq!(
            d.parse(&get, &error(404, "BlobNotFound")).kind,
            ReplyKind::Missing
        );
        assert_eq!(
            d.parse(&update, &error(404, "ContainerNotFound")).kind,
            ReplyKind::NoSuchBucket
        );
        assert!(matches!(
            d.parse(&update, &response(503, &[("x-ms-error-code", "ServerBusy"), ("Retry-After", "3")], "")).kind,
            ReplyKind::Throttled { retry_after: Some(r) } if r.as_secs() == 3
        ));
        assert_eq!(
            d.parse(&update, &error(500, "OperationTimedOut")).kind,
            ReplyKind::ServerError {
                status: 500,
                code: Some("OperationTimedOut".into())
            }
        );
        assert!(matches!(
            d.parse(&get, &error(403, "AuthenticationFailed")).kind,
            ReplyKind::Denied { code: Some(ref c), .. } if c == "AuthenticationFailed"
        ));
        assert!(matches!(
            d.parse(&get, &error(400, "InvalidAuthenticationInfo")).kind,
            ReplyKind::Denied { .. }
        ));
        assert!(matches!(
            d.parse(&update, &error(400, "UnsupportedHeader")).kind,
            ReplyKind::Unsupported { status: 400, .. }
        ));
        assert!(matches!(
            d.parse(&get, &error(400, "UnsupportedHeader")).kind,
            ReplyKind::Unexpected { status: 400, .. }
        ));
        // The header names the code even when the body is not XML.
        assert!(matches!(
            d.parse(&get, &response(403, &[("x-ms-error-code", "AuthorizationFailure")], "<html>")).kind,
            ReplyKind::Denied { code: Some(ref c), .. } if c == "AuthorizationFailure"
        ));
    }

    #[test]
    fn listings() {
        let body = "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?>\
<EnumerationResults ServiceEndpoint=\"http://127.0.0.1:10000/devaccount\" ContainerName=\"locks\">\
<Prefix>jobs/</Prefix><MaxResults>5000</MaxResults><Blobs>\
<Blob><Name>jobs/a</Name><Properties><Creation-Time>Sun, 22 Nov 2026 10:00:00 GMT</Creation-Time>\
<Etag>0x8DC1</Etag><Content-Length>120</Content-Length><BlobType>BlockBlob</BlobType></Properties></Blob>\
<Blob><Name>jobs/b &amp; c</Name><Properties><Etag>\"0x8DC2\"</Etag><Content-Length>7</Content-Length></Properties></Blob>\
</Blobs><NextMarker>2!72!MDAw</NextMarker></EnumerationResults>";
        let op = StoreOp::List {
            prefix: "jobs/".into(),
            continuation: None,
            max_keys: None,
        };
        assert_eq!(
            dialect().parse(&op, &response(200, &[], body)).kind,
            ReplyKind::Listed {
                entries: vec![
                    ListEntry {
                        key: "jobs/a".into(),
                        etag: Some(Etag::new("0x8DC1")),
                        size: 120
                    },
                    ListEntry {
                        key: "jobs/b & c".into(),
                        etag: Some(Etag::new("0x8DC2")),
                        size: 7
                    },
                ],
                next: Some("2!72!MDAw".into())
            }
        );
        let last_page = "<EnumerationResults><Blobs/><NextMarker/></EnumerationResults>";
        assert_eq!(
            dialect().parse(&op, &response(200, &[], last_page)).kind,
            ReplyKind::Listed {
                entries: vec![],
                next: None
            }
        );
        for bad in [
            "<EnumerationResults><Blobs><Blob><Properties/></Blob></Blobs></EnumerationResults>",
            "<EnumerationResults><Blobs><Blob><Name>a</Name><Properties><Content-Length>x</Content-Length></Properties></Blob></Blobs></EnumerationResults>",
            "<EnumerationResults>",
            "not xml",
        ] {
            assert!(
                matches!(dialect().parse(&op, &response(200, &[], bad)).kind, ReplyKind::Unexpected { .. }),
                "{bad}"
            );
        }
    }

    #[test]
    fn sas_is_appended_and_never_shown() {
        let sas = SasSigner::new("?sv=2023-11-03&sr=c&sp=racwdl&sig=abc%2Bdef%3D").unwrap();
        assert!(!format!("{sas:?}").contains("abc"));
        let mut get = emulator()
            .render(&StoreOp::Get { key: "k".into() })
            .unwrap();
        sas.sign(&mut get, UnixMillis(0)).unwrap();
        assert_eq!(
            get.uri(),
            "http://127.0.0.1:10000/devaccount/locks/k?sv=2023-11-03&sr=c&sp=racwdl&sig=abc%2Bdef%3D"
        );
        let mut list = emulator()
            .render(&StoreOp::List {
                prefix: "p".into(),
                continuation: None,
                max_keys: None,
            })
            .unwrap();
        sas.sign(&mut list, UnixMillis(0)).unwrap();
        assert!(list
            .uri()
            .to_string()
            .ends_with("prefix=p&sv=2023-11-03&sr=c&sp=racwdl&sig=abc%2Bdef%3D"));

        for bad in ["", "?", "sv=1&sp=r", "sv=1&sig=", "sv=1&sig=a b"] {
            let err = SasSigner::new(bad).unwrap_err();
            assert!(!err.reason.contains("sv=1"), "{err}");
        }
    }

    #[cfg(feature = "sharedkey")]
    #[test]
    fn shared_key_string_to_sign() {
        // Key "key!" in base64; the signature is checked against Azurite in
        // the real-server tests, the layout here against the documented one.
        let signer = SharedKeySigner::new("devaccount", "a2V5IQ==").unwrap();
        let mut list = emulator()
            .render(&StoreOp::List {
                prefix: "jobs/a b".into(),
                continuation: Some("m".into()),
                max_keys: None,
            })
            .unwrap();
        signer
            .sign(&mut list, UnixMillis(1_795_000_000_000))
            .unwrap();
        assert_eq!(
            signer.string_to_sign(&list),
            "GET\n\n\n\n\n\n\n\n\n\n\n\n\
             x-ms-date:Wed, 18 Nov 2026 11:06:40 GMT\n\
             x-ms-version:2023-11-03\n\
             /devaccount/devaccount/locks\n\
             comp:list\nmarker:m\nprefix:jobs/a b\nrestype:container"
        );
        let auth = header(&list, "authorization").unwrap();
        assert!(auth.starts_with("SharedKey devaccount:"), "{auth}");
        assert_eq!(auth.len(), "SharedKey devaccount:".len() + 44);

        let mut create = emulator().render(&put(PutCondition::IfAbsent)).unwrap();
        signer
            .sign(&mut create, UnixMillis(1_795_000_000_000))
            .unwrap();
        assert_eq!(
            signer.string_to_sign(&create),
            "PUT\n\n\n11\n\napplication/json\n\n\n\n*\n\n\n\
             x-ms-blob-type:BlockBlob\n\
             x-ms-date:Wed, 18 Nov 2026 11:06:40 GMT\n\
             x-ms-version:2023-11-03\n\
             /devaccount/devaccount/locks/jobs/nightly"
        );
        assert!(!format!("{signer:?}").contains("a2V5"));
        assert!(SharedKeySigner::new("devaccount", "not base64!").is_err());
        assert!(SharedKeySigner::new("Dev", "a2V5IQ==").is_err());
    }
}
