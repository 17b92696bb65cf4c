//! Where the lease lives and how to sign for it, from the standard AWS
//! environment (what Lambda sets) plus a few `LEASE_*` variables.
//!
//! | variable | meaning |
//! |---|---|
//! | `LEASE_BUCKET` | bucket (required) |
//! | `AWS_REGION`, else `AWS_DEFAULT_REGION` | region (required for AWS; `us-east-1` when an endpoint is given) |
//! | `LEASE_ENDPOINT`, else `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL` | an S3-compatible endpoint (`http://127.0.0.1:9000`, `https://<account>.r2.cloudflarestorage.com`) |
//! | `LEASE_PATH_STYLE` | `true`/`false`: `endpoint/bucket/key` addressing (default: true with an endpoint, false on AWS) |
//! | `LEASE_ETAG_QUOTING` | `quoted` (default) or `unquoted` `If-Match` values |
//! | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` | credentials (the session token is what Lambda roles use) |
//! | `LEASE_UNSIGNED` | `true` to send unsigned requests (local emulators only) |
//!
//! Errors name the variable to set and never contain a secret.

use crate::clock::SystemClock;
use crate::transport::ReqwestTransport;
use lease_core::drive::HttpStore;
use lease_core::http::s3::{Addressing, EtagQuoting, S3Config, S3Dialect};
use lease_core::sign::SigV4Signer;
use std::fmt;
use std::time::Duration;

/// The store type this adapter builds.
pub type S3Store = HttpStore<S3Dialect, ReqwestTransport, SystemClock>;

/// Signing credentials. `Debug` shows the key id only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Access key id.
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
    /// Session token of temporary credentials.
    pub session_token: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Everything needed to reach the bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSettings {
    /// Custom endpoint (`None`: AWS S3 in `region`).
    pub endpoint: Option<String>,
    /// Bucket.
    pub bucket: String,
    /// Region used for signing and the AWS endpoint.
    pub region: String,
    /// Path-style addressing.
    pub path_style: bool,
    /// How `If-Match` etags are written.
    pub etag_quoting: EtagQuoting,
    /// `None`: unsigned requests (only when `LEASE_UNSIGNED` asks for it).
    pub credentials: Option<Credentials>,
}

/// A setting that is missing or unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettingsError {
    /// A required setting is not set.
    Missing {
        /// The variable (or flag) to set.
        variable: &'static str,
        /// What it is.
        what: &'static str,
    },
    /// A setting has a value that cannot work.
    Invalid {
        /// The variable (or flag).
        variable: &'static str,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingsError::Missing { variable, what } => {
                write!(f, "{variable} is not set: it is the {what}")
            }
            SettingsError::Invalid { variable, reason } => {
                write!(f, "{variable} is invalid: {reason}")
            }
        }
    }
}

impl std::error::Error for SettingsError {}

fn flag(
    get: &impl Fn(&str) -> Option<String>,
    variable: &'static str,
) -> Result<Option<bool>, SettingsError> {
    match get(variable).as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some("1" | "true" | "yes") => Ok(Some(true)),
        Some("0" | "false" | "no") => Ok(Some(false)),
        Some(other) => Err(SettingsError::Invalid {
            variable,
            reason: format!("`{other}` is not true or false"),
        }),
    }
}

fn first(get: &impl Fn(&str) -> Option<String>, variables: &[&'static str]) -> Option<String> {
    variables
        .iter()
        .filter_map(|v| get(v))
        .map(|v| v.trim().to_string())
        .find(|v| !v.is_empty())
}

impl StoreSettings {
    /// From the process environment.
    pub fn from_env() -> Result<Self, SettingsError> {
        StoreSettings::from_lookup(|k| std::env::var(k).ok())
    }

    /// From any variable lookup (the CLI layers its flags over the
    /// environment this way; tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        let bucket = first(&get, &["LEASE_BUCKET"]).ok_or(SettingsError::Missing {
            variable: "LEASE_BUCKET",
            what: "bucket that holds the lease",
        })?;
        let endpoint = first(
            &get,
            &["LEASE_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
        );
        let region = match (
            first(&get, &["AWS_REGION", "AWS_DEFAULT_REGION"]),
            &endpoint,
        ) {
            (Some(r), _) => r,
            (None, Some(_)) => "us-east-1".to_string(),
            (None, None) => {
                return Err(SettingsError::Missing {
                    variable: "AWS_REGION",
                    what: "region of the bucket",
                })
            }
        };
        let path_style = flag(&get, "LEASE_PATH_STYLE")?.unwrap_or(endpoint.is_some());
        let etag_quoting = match first(&get, &["LEASE_ETAG_QUOTING"]).as_deref() {
            None | Some("quoted") => EtagQuoting::Quoted,
            Some("unquoted") => EtagQuoting::Unquoted,
            Some(other) => {
                return Err(SettingsError::Invalid {
                    variable: "LEASE_ETAG_QUOTING",
                    reason: format!("`{other}` is neither `quoted` nor `unquoted`"),
                })
            }
        };
        let credentials = if flag(&get, "LEASE_UNSIGNED")?.unwrap_or(false) {
            None
        } else {
            let access_key_id = first(&get, &["AWS_ACCESS_KEY_ID"]).ok_or(SettingsError::Missing {
                variable: "AWS_ACCESS_KEY_ID",
                what: "access key id to sign requests with (or set LEASE_UNSIGNED=true for an emulator)",
            })?;
            let secret_access_key =
                first(&get, &["AWS_SECRET_ACCESS_KEY"]).ok_or(SettingsError::Missing {
                    variable: "AWS_SECRET_ACCESS_KEY",
                    what: "secret access key that goes with AWS_ACCESS_KEY_ID",
                })?;
            Some(Credentials {
                access_key_id,
                secret_access_key,
                session_token: first(&get, &["AWS_SESSION_TOKEN"]),
            })
        };
        let settings = StoreSettings {
            endpoint,
            bucket,
            region,
            path_style,
            etag_quoting,
            credentials,
        };
        settings
            .s3_config()
            .validate()
            .map_err(|e| SettingsError::Invalid {
                variable: "LEASE_ENDPOINT or LEASE_BUCKET",
                reason: e.to_string(),
            })?;
        Ok(settings)
    }

    /// The dialect configuration.
    pub fn s3_config(&self) -> S3Config {
        let mut config = match &self.endpoint {
            Some(endpoint) => {
                S3Config::custom(endpoint.trim_end_matches('/'), &self.bucket, &self.region)
            }
            None => S3Config::aws(&self.region, &self.bucket),
        };
        config.addressing = if self.path_style {
            Addressing::PathStyle
        } else {
            Addressing::VirtualHosted
        };
        config.etag_quoting = self.etag_quoting;
        config
    }

    /// The store: S3 dialect, signed when there are credentials, over
    /// reqwest with `request_timeout` per call.
    pub fn store(&self, request_timeout: Duration) -> Result<S3Store, SettingsError> {
        let dialect = S3Dialect::new(self.s3_config()).map_err(|e| SettingsError::Invalid {
            variable: "LEASE_ENDPOINT",
            reason: e.to_string(),
        })?;
        let transport =
            ReqwestTransport::new(request_timeout.min(Duration::from_secs(5)), request_timeout)
                .map_err(|e| SettingsError::Invalid {
                    variable: "LEASE_ENDPOINT",
                    reason: e.message,
                })?;
        let store = HttpStore::new(dialect, transport, SystemClock::new());
        Ok(match &self.credentials {
            Some(c) => store.with_signer(SigV4Signer::new(
                c.access_key_id.clone(),
                c.secret_access_key.clone(),
                c.session_token.clone(),
                self.region.clone(),
            )),
            None => store,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn lambda_environment() {
        let s = StoreSettings::from_lookup(lookup(&[
            ("LEASE_BUCKET", "locks"),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret"),
            ("AWS_SESSION_TOKEN", "token"),
        ]))
        .unwrap();
        assert_eq!(s.s3_config().endpoint, "https://s3.eu-west-1.amazonaws.com");
        assert!(!s.path_style);
        let debug = format!("{s:?}");
        assert!(
            !debug.contains("very-secret") && !debug.contains("\"token\""),
            "{debug}"
        );
    }

    #[test]
    fn missing_settings_are_named() {
        let err = StoreSettings::from_lookup(lookup(&[])).unwrap_err();
        assert!(
            err.to_string().starts_with("LEASE_BUCKET is not set"),
            "{err}"
        );
        let err = StoreSettings::from_lookup(lookup(&[("LEASE_BUCKET", "locks")])).unwrap_err();
        assert!(
            err.to_string().starts_with("AWS_REGION is not set"),
            "{err}"
        );
        let err =
            StoreSettings::from_lookup(lookup(&[("LEASE_BUCKET", "locks"), ("AWS_REGION", "r")]))
                .unwrap_err();
        assert!(
            err.to_string().starts_with("AWS_ACCESS_KEY_ID is not set"),
            "{err}"
        );
        let err = StoreSettings::from_lookup(lookup(&[
            ("LEASE_BUCKET", "locks"),
            ("AWS_REGION", "r"),
            ("AWS_ACCESS_KEY_ID", "k"),
        ]))
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("AWS_SECRET_ACCESS_KEY is not set"),
            "{err}"
        );
        let err = StoreSettings::from_lookup(lookup(&[
            ("LEASE_BUCKET", "locks"),
            ("LEASE_ENDPOINT", "not a url"),
            ("LEASE_UNSIGNED", "true"),
        ]))
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("LEASE_ENDPOINT or LEASE_BUCKET is invalid"),
            "{err}"
        );
        let err = StoreSettings::from_lookup(lookup(&[
            ("LEASE_BUCKET", "locks"),
            ("AWS_REGION", "eu-west-1"),
            ("LEASE_PATH_STYLE", "maybe"),
        ]))
        .unwrap_err();
        assert!(
            err.to_string().contains("LEASE_PATH_STYLE is invalid"),
            "{err}"
        );
    }

    #[test]
    fn an_endpoint_means_path_style_and_a_default_region() {
        let s = StoreSettings::from_lookup(lookup(&[
            ("LEASE_BUCKET", "locks"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/"),
            ("LEASE_UNSIGNED", "1"),
        ]))
        .unwrap();
        assert_eq!(
            (s.region.as_str(), s.path_style, s.credentials.clone()),
            ("us-east-1", true, None)
        );
        assert_eq!(s.s3_config().endpoint, "http://127.0.0.1:9000");
    }
}
