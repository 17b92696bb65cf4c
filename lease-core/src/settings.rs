//! Where a lease lives and how to sign for it, read from named settings:
//! the environment of a Lambda or a process, a Worker's vars and secrets,
//! or a map in tests. Every adapter reads the same names, so one
//! configuration works everywhere.
//!
//! | setting | meaning |
//! |---|---|
//! | `LEASE_BUCKET` | bucket (required) |
//! | `AWS_REGION`, else `AWS_DEFAULT_REGION` | region (required for AWS; `us-east-1` when an endpoint is given; `auto` for R2) |
//! | `LEASE_ENDPOINT`, else `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL` | an S3-compatible endpoint (`http://127.0.0.1:9000`, `https://<account>.r2.cloudflarestorage.com`) |
//! | `LEASE_PATH_STYLE` | `true`/`false`: `endpoint/bucket/key` addressing (default: true with an endpoint, false on AWS) |
//! | `LEASE_ETAG_QUOTING` | `quoted` (default) or `unquoted` `If-Match` values |
//! | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` | credentials (the session token is what Lambda roles use) |
//! | `LEASE_UNSIGNED` | `true` to send unsigned requests (local emulators only) |
//!
//! and for the lease itself ([`LeaseSettings`]):
//!
//! | setting | meaning |
//! |---|---|
//! | `LEASE_KEY` | object key of the lease (required) |
//! | `LEASE_TTL` | lease duration: `60s` (default), `5m`, `1500ms` |
//! | `LEASE_PROTOCOL` | `cas` (default), `epochs` or `mutex` |
//! | `LEASE_PROBE` | `once` (default: check the store's conditional writes before the first use) or `off` |
//!
//! Errors name the setting and never contain a secret.

use crate::config::{LeaseConfig, Protocol};
use crate::http::s3::{Addressing, EtagQuoting, S3Config};
use core::fmt;
use std::time::Duration;

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
    /// From any variable lookup: the process environment, a Worker's
    /// vars and secrets, flags layered over the environment, a map.
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

    /// The SigV4 signer for these credentials, or `None` for unsigned
    /// requests.
    #[cfg(feature = "sigv4")]
    pub fn signer(&self) -> Option<crate::sign::SigV4Signer> {
        self.credentials.as_ref().map(|c| {
            crate::sign::SigV4Signer::new(
                c.access_key_id.clone(),
                c.secret_access_key.clone(),
                c.session_token.clone(),
                self.region.clone(),
            )
        })
    }
}

/// The lease's own settings (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSettings {
    /// Object key of the lease.
    pub key: String,
    /// Lease duration.
    pub ttl: Duration,
    /// The protocol.
    pub protocol: Protocol,
    /// Whether to run the capability probe before the first use.
    pub probe: bool,
}

impl LeaseSettings {
    /// From any variable lookup.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        let key = first(&get, &["LEASE_KEY"]).ok_or(SettingsError::Missing {
            variable: "LEASE_KEY",
            what: "object key of the lease",
        })?;
        let ttl = match first(&get, &["LEASE_TTL"]) {
            None => Duration::from_secs(60),
            Some(v) => parse_duration(&v).ok_or_else(|| SettingsError::Invalid {
                variable: "LEASE_TTL",
                reason: format!("`{v}` is not a duration like 60s, 5m or 1500ms"),
            })?,
        };
        let protocol = match first(&get, &["LEASE_PROTOCOL"]) {
            None => Protocol::Cas,
            Some(p) => Protocol::parse(&p).ok_or_else(|| SettingsError::Invalid {
                variable: "LEASE_PROTOCOL",
                reason: format!("`{p}` is not one of cas, epochs, mutex"),
            })?,
        };
        let probe = match first(&get, &["LEASE_PROBE"]).as_deref() {
            None | Some("once") => true,
            Some("off") => false,
            Some(other) => {
                return Err(SettingsError::Invalid {
                    variable: "LEASE_PROBE",
                    reason: format!("`{other}` is neither `once` nor `off`"),
                })
            }
        };
        let settings = LeaseSettings {
            key,
            ttl,
            protocol,
            probe,
        };
        settings.config("check")?;
        Ok(settings)
    }

    /// The lease configuration for `holder`, with the defaults for
    /// everything these settings do not name.
    pub fn config(&self, holder: impl Into<String>) -> Result<LeaseConfig, SettingsError> {
        let mut cfg = LeaseConfig::new(self.key.clone(), holder, self.ttl);
        cfg.protocol = self.protocol;
        cfg.validate().map_err(|e| SettingsError::Invalid {
            variable: "LEASE_TTL",
            reason: e.to_string(),
        })?;
        Ok(cfg)
    }
}

/// `30s`, `5m`, `1500ms`, `1h` or plain seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: f64 = number.parse().ok()?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(secs).ok()
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

    #[test]
    fn lease_settings() {
        let s = LeaseSettings::from_lookup(lookup(&[("LEASE_KEY", "locks/nightly")])).unwrap();
        assert_eq!(
            (s.ttl, s.protocol, s.probe),
            (Duration::from_secs(60), Protocol::Cas, true)
        );
        let cfg = s.config("w1").unwrap();
        assert_eq!(
            (cfg.key.as_str(), cfg.holder.as_str()),
            ("locks/nightly", "w1")
        );
        let s = LeaseSettings::from_lookup(lookup(&[
            ("LEASE_KEY", "k"),
            ("LEASE_TTL", "5m"),
            ("LEASE_PROTOCOL", "epochs"),
            ("LEASE_PROBE", "off"),
        ]))
        .unwrap();
        assert_eq!(
            (s.ttl, s.protocol, s.probe),
            (Duration::from_secs(300), Protocol::Epochs, false)
        );
        for (pairs, expected) in [
            (vec![], "LEASE_KEY is not set"),
            (
                vec![("LEASE_KEY", "k"), ("LEASE_TTL", "soon")],
                "LEASE_TTL is invalid",
            ),
            (
                vec![("LEASE_KEY", "k"), ("LEASE_TTL", "0s")],
                "LEASE_TTL is invalid",
            ),
            (
                vec![("LEASE_KEY", "k"), ("LEASE_PROTOCOL", "paxos")],
                "LEASE_PROTOCOL is invalid",
            ),
            (
                vec![("LEASE_KEY", "k"), ("LEASE_PROBE", "always")],
                "LEASE_PROBE is invalid",
            ),
        ] {
            let err = LeaseSettings::from_lookup(lookup(&pairs)).unwrap_err();
            assert!(err.to_string().starts_with(expected), "{err}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("-1s"), None);
    }
}
