//! SigV4 signing: documented in the layer's docs (`wire/mod.rs`, "SigV4 signing").

use crate::time::UnixMillis;
use crate::wire::{SignError, Signer};
use core::fmt;
use core::fmt::Write as _;
use hmac::{Hmac, Mac};
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, HOST};
use sha2::{Digest, Sha256};

/// The last millisecond SigV4 can express (`x-amz-date` has four year
/// digits): 9999-12-31T23:59:59.999Z.
const LAST_SIGNABLE_MS: u64 = 253_402_300_799_999;

const X_AMZ_DATE: HeaderName = HeaderName::from_static("x-amz-date");
const X_AMZ_CONTENT_SHA256: HeaderName = HeaderName::from_static("x-amz-content-sha256");
const X_AMZ_SECURITY_TOKEN: HeaderName = HeaderName::from_static("x-amz-security-token");

/// Headers this signer writes; removed before signing so that re-signing a
/// request (a retry at a later time) replaces them instead of signing them.
/// Names as constants, not strings: a name looked up from a string at run
/// time links `http`'s parser of header names (12 KB of a wasm module).
const SIGNATURE_HEADERS: [HeaderName; 4] = [
    AUTHORIZATION,
    X_AMZ_DATE,
    X_AMZ_CONTENT_SHA256,
    X_AMZ_SECURITY_TOKEN,
];

/// Headers left out of the signature (as `aws-sigv4` does): proxies and
/// clients may change them in transit.
const UNSIGNED_HEADERS: [&str; 4] = [
    "authorization",
    "user-agent",
    "x-amzn-trace-id",
    "transfer-encoding",
];

/// Signs requests with AWS SigV4 from static credentials.
#[derive(Clone)]
pub struct SigV4Signer {
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
    region: String,
    service: String,
}

impl SigV4Signer {
    /// A signer for service `s3` in `region` (`auto` for R2), with an
    /// optional session token (temporary credentials: STS, Lambda roles).
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
        region: impl Into<String>,
    ) -> Self {
        SigV4Signer {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token,
            region: region.into(),
            service: "s3".to_string(),
        }
    }

    /// The same signer for another service's signing name.
    pub fn with_service(mut self, service: impl Into<String>) -> Self {
        self.service = service.into();
        self
    }

    /// The access key id (not a secret).
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The signing region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The signing service name.
    pub fn service(&self) -> &str {
        &self.service
    }
}

impl fmt::Debug for SigV4Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let token = self.session_token.as_ref().map(|_| "<redacted>");
        f.debug_struct("SigV4Signer")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("session_token", &token)
            .field("region", &self.region)
            .field("service", &self.service)
            .finish()
    }
}

fn error(reason: impl Into<String>) -> SignError {
    SignError {
        reason: reason.into(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length: `new_from_slice` cannot fail here.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => return [0; 32],
    };
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// `(YYYYMMDD, YYYYMMDDTHHMMSSZ)` for a time in milliseconds since the epoch.
fn amz_dates(at: UnixMillis) -> (String, String) {
    let secs = at.0 / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let date = format!("{year:04}{month:02}{day:02}");
    let stamp = format!(
        "{date}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    (date, stamp)
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~')
}

/// Decodes `%XX` escapes (and nothing else: `+` stays `+`).
fn percent_decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex_at = |j: usize| bytes.get(j).and_then(|c| (*c as char).to_digit(16));
        match (bytes[i], hex_at(i + 1), hex_at(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn percent_encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len()), |mut out, &b| {
            if is_unreserved(b) {
                out.push(b as char);
            } else {
                let _ = write!(out, "%{b:02X}");
            }
            out
        })
}

/// Query parameters decoded, re-encoded canonically and sorted.
fn canonical_query(query: &str) -> String {
    let mut params: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (name, value) = p.split_once('=').unwrap_or((p, ""));
            (
                percent_encode(&percent_decode(name)),
                percent_encode(&percent_decode(value)),
            )
        })
        .collect();
    crate::sort::small(&mut params);
    params
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Trims a header value and folds runs of spaces to one.
fn canonical_value(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Signer for SigV4Signer {
    /// SigV4 in the order of its specification (canonical request, string
    /// to sign, signature, header), one step after another; longer than 80
    /// lines for that reason.
    fn sign(&self, request: &mut http::Request<Vec<u8>>, at: UnixMillis) -> Result<(), SignError> {
        if at.0 > LAST_SIGNABLE_MS {
            return Err(error(format!("signing time {at} is after the year 9999")));
        }
        if !request.headers().contains_key(HOST) {
            let authority = request
                .uri()
                .authority()
                .map(|a| a.as_str().to_string())
                .ok_or_else(|| error("request has neither a host header nor an absolute URI"))?;
            let host = HeaderValue::from_str(&authority)
                .map_err(|_| error("request host is not a valid header"))?;
            request.headers_mut().insert(HOST, host);
        }
        for name in SIGNATURE_HEADERS {
            request.headers_mut().remove(name);
        }
        let (date, stamp) = amz_dates(at);
        let payload_hash = hex(&Sha256::digest(request.body()));
        let mut added = vec![
            (X_AMZ_DATE, stamp.clone()),
            (X_AMZ_CONTENT_SHA256, payload_hash.clone()),
        ];
        if let Some(token) = &self.session_token {
            added.push((X_AMZ_SECURITY_TOKEN, token.clone()));
        }
        for (name, value) in added {
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| error(format!("{name} is not a valid header value")))?;
            value.set_sensitive(name == X_AMZ_SECURITY_TOKEN);
            request.headers_mut().insert(name, value);
        }

        // Canonical headers: lower-case names, sorted, repeated values joined.
        let mut headers: Vec<(&str, String)> = Vec::new();
        for (name, value) in request.headers() {
            if UNSIGNED_HEADERS.contains(&name.as_str()) {
                continue;
            }
            let value = value
                .to_str()
                .map_err(|_| error(format!("header {name} is not visible ASCII")))?;
            match headers.iter_mut().find(|(n, _)| *n == name.as_str()) {
                Some((_, joined)) => {
                    joined.push(',');
                    joined.push_str(&canonical_value(value));
                }
                None => headers.push((name.as_str(), canonical_value(value))),
            }
        }
        crate::sort::small(&mut headers);
        let signed_headers = headers
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(";");
        let canonical_headers: String = headers.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
        let path = match request.uri().path() {
            "" => "/",
            p => p,
        };
        let canonical_request = format!(
            "{}\n{path}\n{}\n{canonical_headers}\n{signed_headers}\n{payload_hash}",
            request.method().as_str(),
            canonical_query(request.uri().query().unwrap_or("")),
        );

        let scope = format!("{date}/{}/{}/aws4_request", self.region, self.service);
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
            hex(&Sha256::digest(canonical_request.as_bytes()))
        );
        let mut key = hmac(
            format!("AWS4{}", self.secret_access_key).as_bytes(),
            date.as_bytes(),
        );
        for part in [
            self.region.as_bytes(),
            self.service.as_bytes(),
            b"aws4_request",
        ] {
            key = hmac(&key, part);
        }
        let signature = hex(&hmac(&key, string_to_sign.as_bytes()));
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            self.access_key_id
        );
        let mut value = HeaderValue::from_str(&authorization)
            .map_err(|_| error("access key id, region or service is not a valid header value"))?;
        value.set_sensitive(true);
        request.headers_mut().insert(AUTHORIZATION, value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AKID: &str = "AKIDEXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const TOKEN: &str = "FQoGZXIvYXdzEXAMPLETOKEN//+=";
    /// 2026-11-22T03:04:05Z.
    const AT: UnixMillis = UnixMillis(1_795_316_645_000);

    fn put_request() -> http::Request<Vec<u8>> {
        http::Request::put("https://locks.s3.us-east-1.amazonaws.com/leases/a%20b")
            .header("host", "locks.s3.us-east-1.amazonaws.com")
            .header("content-type", "application/json")
            .header("content-length", "11")
            .header("if-none-match", "*")
            .body(br#"{"token":1}"#.to_vec())
            .unwrap()
    }

    fn signed(signer: &SigV4Signer, mut request: http::Request<Vec<u8>>) -> http::Request<Vec<u8>> {
        signer.sign(&mut request, AT).unwrap();
        request
    }

    fn header<'a>(request: &'a http::Request<Vec<u8>>, name: &str) -> &'a str {
        request.headers()[name].to_str().unwrap()
    }

    // The expected signatures were computed independently with botocore
    // 1.43's `S3SigV4Auth` for the same request, credentials and time.

    #[test]
    fn matches_botocore_for_a_conditional_put() {
        let signer = SigV4Signer::new(AKID, SECRET, None, "us-east-1");
        let request = signed(&signer, put_request());
        assert_eq!(
            header(&request, "authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/us-east-1/s3/aws4_request, \
             SignedHeaders=content-length;content-type;host;if-none-match;x-amz-content-sha256;x-amz-date, \
             Signature=5d64b2e1911060a96943573a4c7ca526ebbc4232e5dcb16c663c2aae33e332f3"
        );
        assert_eq!(header(&request, "x-amz-date"), "20261122T030405Z");
        assert_eq!(
            header(&request, "x-amz-content-sha256"),
            "52c45db3c7ffda39a07f7a42f8dacf0ee9680c1126a449905610c681b54b4300"
        );
        assert!(request.headers().get("x-amz-security-token").is_none());
        assert!(request.headers()["authorization"].is_sensitive());
    }

    #[test]
    fn session_token_is_sent_and_signed() {
        let signer = SigV4Signer::new(AKID, SECRET, Some(TOKEN.into()), "us-east-1");
        let request = signed(&signer, put_request());
        assert_eq!(header(&request, "x-amz-security-token"), TOKEN);
        assert!(request.headers()["x-amz-security-token"].is_sensitive());
        assert_eq!(
            header(&request, "authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/us-east-1/s3/aws4_request, \
             SignedHeaders=content-length;content-type;host;if-none-match;x-amz-content-sha256;x-amz-date;x-amz-security-token, \
             Signature=36c0b76fbc2aa8d173a477d2ce57939100cc93f28bf65dbdee46af02feaad0f0"
        );
    }

    #[test]
    fn matches_botocore_for_an_encoded_list_query() {
        let signer = SigV4Signer::new(AKID, SECRET, None, "us-east-1");
        let request = http::Request::get(
            "http://127.0.0.1:9000/locks?list-type=2&prefix=leases%2Fa%20b&continuation-token=tok%2F%2B%3D",
        )
        .header("host", "127.0.0.1:9000")
        .body(Vec::new())
        .unwrap();
        let request = signed(&signer, request);
        assert_eq!(
            header(&request, "authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/us-east-1/s3/aws4_request, \
             SignedHeaders=host;x-amz-content-sha256;x-amz-date, \
             Signature=aa8f5a9880d849c517536838b89b3572cfe20d2cf193bc5193553b5d4936820e"
        );
    }

    #[test]
    fn signing_is_deterministic_and_re_signing_replaces() {
        let signer = SigV4Signer::new(AKID, SECRET, Some(TOKEN.into()), "us-east-1");
        let once = signed(&signer, put_request());
        assert_eq!(once.headers(), signed(&signer, put_request()).headers());
        // A retry signed again (here without a token) carries no stale headers.
        let plain = SigV4Signer::new(AKID, SECRET, None, "us-east-1");
        let twice = signed(&plain, once);
        assert_eq!(twice.headers(), signed(&plain, put_request()).headers());
        // A different time gives a different signature and date.
        let mut later = put_request();
        plain.sign(&mut later, UnixMillis(AT.0 + 1000)).unwrap();
        assert_eq!(header(&later, "x-amz-date"), "20261122T030406Z");
        assert_ne!(
            header(&later, "authorization"),
            header(&twice, "authorization")
        );
    }

    #[test]
    fn shape_of_authorization_for_another_region() {
        let signer = SigV4Signer::new(AKID, SECRET, None, "auto");
        let auth = header(&signed(&signer, put_request()), "authorization").to_string();
        let signature = auth
            .strip_prefix("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/auto/s3/aws4_request, SignedHeaders=")
            .and_then(|rest| rest.split_once(", Signature="))
            .map(|(signed_headers, signature)| {
                assert!(signed_headers.contains("host"));
                assert!(signed_headers.ends_with("x-amz-content-sha256;x-amz-date"));
                signature
            })
            .unwrap();
        assert_eq!(signature.len(), 64);
        assert!(signature
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }

    #[test]
    fn debug_redacts_secret_and_token() {
        let signer = SigV4Signer::new(AKID, SECRET, Some(TOKEN.into()), "us-east-1");
        for shown in [format!("{signer:?}"), format!("{signer:#?}")] {
            assert!(shown.contains(AKID), "{shown}");
            assert!(!shown.contains(SECRET), "{shown}");
            assert!(!shown.contains(TOKEN), "{shown}");
        }
        assert_eq!(signer.access_key_id(), AKID);
        assert_eq!((signer.region(), signer.service()), ("us-east-1", "s3"));
        let signer = signer.with_service("s3express");
        assert_eq!(signer.service(), "s3express");
    }

    #[test]
    fn errors_carry_no_secrets() {
        // A token that cannot be a header value fails inside aws-sigv4.
        let bad_token = format!("{TOKEN}\n");
        let signer = SigV4Signer::new(AKID, SECRET, Some(bad_token), "us-east-1");
        let err = signer.sign(&mut put_request(), AT).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains(SECRET) && !shown.contains(TOKEN), "{shown}");

        let signer = SigV4Signer::new(AKID, SECRET, None, "us-east-1");
        let mut no_host = http::Request::get("/locks/k").body(Vec::new()).unwrap();
        let err = signer.sign(&mut no_host, AT).unwrap_err();
        assert!(err.reason.contains("host"), "{err}");

        let mut request = put_request();
        let err = signer.sign(&mut request, UnixMillis(u64::MAX)).unwrap_err();
        assert!(err.reason.contains("9999"), "{err}");
        assert!(request.headers().get("authorization").is_none());

        let mut request = put_request();
        request
            .headers_mut()
            .insert("x-meta", HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        let err = signer.sign(&mut request, AT).unwrap_err();
        assert!(err.reason.contains("x-meta"), "{err}");
    }

    #[test]
    fn last_signable_millisecond_signs() {
        let signer = SigV4Signer::new(AKID, SECRET, None, "us-east-1");
        let request = {
            let mut r = put_request();
            signer.sign(&mut r, UnixMillis(LAST_SIGNABLE_MS)).unwrap();
            r
        };
        assert_eq!(header(&request, "x-amz-date"), "99991231T235959Z");
    }
}
