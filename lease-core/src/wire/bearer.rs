//! Bearer tokens: documented in the layer's docs (`wire/mod.rs`, "Bearer tokens").

use crate::time::UnixMillis;
use crate::wire::{SignError, Signer};
use core::fmt;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION};

const MS_DATE: HeaderName = HeaderName::from_static("x-ms-date");

/// Sets `Authorization: Bearer <token>` (and, for Azure, `x-ms-date`, which
/// the Blob service wants on every authorized request). `Debug` never
/// shows the token.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerSigner {
    token: String,
    ms_date: bool,
}

impl fmt::Debug for BearerSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerSigner")
            .field("token", &"<redacted>")
            .field("ms_date", &self.ms_date)
            .finish()
    }
}

impl BearerSigner {
    /// A signer sending `token` (an OAuth 2.0 access token).
    pub fn new(token: impl Into<String>) -> Self {
        BearerSigner {
            token: token.into(),
            ms_date: false,
        }
    }

    /// Also sets `x-ms-date` to the signing time (Azure Blob Storage).
    pub fn with_ms_date(mut self) -> Self {
        self.ms_date = true;
        self
    }
}

impl Signer for BearerSigner {
    fn sign(&self, request: &mut http::Request<Vec<u8>>, at: UnixMillis) -> Result<(), SignError> {
        if self.ms_date {
            let date = HeaderValue::from_str(&at.to_http_date()).map_err(|_| SignError {
                reason: "the signing time is not a valid date".to_string(),
            })?;
            request.headers_mut().insert(MS_DATE, date);
        }
        let mut value =
            HeaderValue::from_str(&format!("Bearer {}", self.token)).map_err(|_| SignError {
                reason: "the access token is not a valid header value".to_string(),
            })?;
        value.set_sensitive(true);
        request.headers_mut().insert(AUTHORIZATION, value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_token_and_never_shows_it() {
        let signer = BearerSigner::new("ya29.SECRET-TOKEN").with_ms_date();
        let mut request = http::Request::get("https://acct.blob.core.windows.net/c/k")
            .body(Vec::new())
            .unwrap();
        signer
            .sign(&mut request, UnixMillis(1_795_317_005_000))
            .unwrap();
        let auth = request.headers().get(AUTHORIZATION).unwrap();
        assert_eq!(auth.to_str().unwrap(), "Bearer ya29.SECRET-TOKEN");
        assert!(auth.is_sensitive());
        assert_eq!(
            request.headers().get("x-ms-date").unwrap(),
            "Sun, 22 Nov 2026 03:10:05 GMT"
        );
        assert!(!format!("{signer:?}").contains("SECRET"));
        assert!(!format!("{:?}", request.headers()).contains("SECRET"));
        let err = BearerSigner::new("bad\nSECRET").sign(&mut request, UnixMillis(0));
        assert!(!err.unwrap_err().to_string().contains("SECRET"));
    }
}
