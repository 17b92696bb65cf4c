//! AWS Signature Version 4 for S3-compatible stores (feature `sigv4`).
//!
//! [`SigV4Signer`] signs a rendered request in place with `aws-sigv4`, using
//! the settings S3 needs: the payload hash goes in `x-amz-content-sha256`,
//! and the path is signed exactly as rendered (no second percent-encoding,
//! no dot-segment normalisation). The signing time is an argument: nothing
//! here reads a clock, so signing works on `wasm32-unknown-unknown`, where
//! `SystemTime::now()` panics.
//!
//! The secret access key and the session token never appear in `Debug`
//! output or in a [`SignError`]; only the access key id (which AWS itself
//! treats as an identifier, not a secret) is shown.

use crate::http::{SignError, Signer};
use crate::time::UnixMillis;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4::SigningParams;
use core::fmt;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, HOST};
use std::time::{Duration, UNIX_EPOCH};

/// The last millisecond SigV4 can express (`x-amz-date` has four year
/// digits): 9999-12-31T23:59:59.999Z.
const LAST_SIGNABLE_MS: u64 = 253_402_300_799_999;

/// Headers this signer writes; removed before signing so that re-signing a
/// request (a retry at a later time) replaces them instead of signing them.
const SIGNATURE_HEADERS: [&str; 4] = [
    "authorization",
    "x-amz-date",
    "x-amz-content-sha256",
    "x-amz-security-token",
];

/// Signs requests with AWS SigV4 from static credentials.
#[derive(Clone)]
pub struct SigV4Signer {
    credentials: Credentials,
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
            credentials: Credentials::new(
                access_key_id,
                secret_access_key,
                session_token,
                None,
                "lease-core",
            ),
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
        self.credentials.access_key_id()
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
        let token = self.credentials.session_token().map(|_| "<redacted>");
        f.debug_struct("SigV4Signer")
            .field("access_key_id", &self.credentials.access_key_id())
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

impl Signer for SigV4Signer {
    fn sign(&self, request: &mut http::Request<Vec<u8>>, at: UnixMillis) -> Result<(), SignError> {
        if at.0 > LAST_SIGNABLE_MS {
            return Err(error(format!("signing time {at} is after the year 9999")));
        }
        let time = UNIX_EPOCH + Duration::from_millis(at.0);
        if !request.headers().contains_key(HOST) && request.uri().host().is_none() {
            return Err(error(
                "request has neither a host header nor an absolute URI",
            ));
        }
        for name in SIGNATURE_HEADERS {
            request.headers_mut().remove(name);
        }

        let mut settings = SigningSettings::default();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        let identity = self.credentials.clone().into();
        let params = SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(&self.service)
            .time(time)
            .settings(settings)
            .build()
            .map_err(|e| error(format!("signing parameters: {e}")))?
            .into();

        let headers = request
            .headers()
            .iter()
            .map(|(name, value)| {
                value
                    .to_str()
                    .map(|value| (name.as_str(), value))
                    .map_err(|_| error(format!("header {name} is not visible ASCII")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let uri = request.uri().to_string();
        let signable = SignableRequest::new(
            request.method().as_str(),
            uri,
            headers.into_iter(),
            SignableBody::Bytes(request.body()),
        )
        .map_err(|e| error(e.to_string()))?;
        // aws-sigv4's errors name what failed, never a header value or key.
        let (instructions, _signature) = sign(signable, &params)
            .map_err(|e| error(e.to_string()))?
            .into_parts();

        // Applied here rather than with `apply_to_request_http1x`, which
        // panics on a header value it cannot represent.
        let (new_headers, _query) = instructions.into_parts();
        for header in new_headers {
            let name = HeaderName::from_bytes(header.name().as_bytes())
                .map_err(|_| error(format!("signed header name {:?}", header.name())))?;
            let mut value = HeaderValue::from_str(header.value())
                .map_err(|_| error(format!("signed header {name} is not a valid value")))?;
            value.set_sensitive(header.sensitive() || name == AUTHORIZATION);
            request.headers_mut().insert(name, value);
        }
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
