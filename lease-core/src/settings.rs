//! Where a lease lives and how to sign for it, read from named settings:
//! the environment of a Lambda or a process, a Worker's vars and secrets,
//! or a map in tests. Every adapter reads the same names, so one
//! configuration works everywhere.
//!
//! | setting | meaning |
//! |---|---|
//! | `LEASE_PROVIDER` | `aws`, `r2`, `minio`, `tigris`, `gcs`, `azure` or `generic` ([`Provider`]; default `aws`, or `generic` when an endpoint is given) |
//! | `LEASE_BUCKET` | bucket, or Azure container (required) |
//! | `AWS_REGION`, else `AWS_DEFAULT_REGION` | region (required for AWS; `us-east-1` when an endpoint is given; always `auto` for R2, Tigris and GCS) |
//! | `LEASE_ENDPOINT`, else `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL` | the endpoint (`http://127.0.0.1:9000`; required for `minio` and `generic`; others have the preset's) |
//! | `LEASE_ACCOUNT` | R2's account id, for its endpoint |
//! | `LEASE_PATH_STYLE` | `true`/`false`: `endpoint/bucket/key` addressing (default: true with an endpoint, else the preset's) |
//! | `LEASE_ETAG_QUOTING` | `quoted` (default) or `unquoted` `If-Match` values (S3 dialects) |
//! | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` | SigV4 credentials (the session token is what Lambda roles use; for GCS, an HMAC key) |
//! | `AZURE_STORAGE_ACCOUNT`, with `AZURE_STORAGE_KEY` or `AZURE_STORAGE_SAS_TOKEN` | Azure: the account, and its key (SharedKey) or a SAS token |
//! | `LEASE_UNSIGNED` | `true` to send unsigned requests (local emulators only) |
//!
//! With no key set, an adapter that can look up the platform's
//! credentials ([`StoreSettings::from_lookup_or_ambient`]: lease-native's
//! `cloud-credentials` feature, which the `lease` CLI has) uses them
//! ([`Ambient`]: the AWS default chain, Google's application default
//! credentials, Microsoft Entra ID); the others ask for a key.
//!
//! and for the leases themselves
//! ([`Settings::from_lookup`](crate::client::Settings::from_lookup), the
//! one settings type of a [`Leases`](crate::client::Leases) client;
//! [`lease_key`] for an adapter that guards one lease). A store's own
//! limits (GCS's and R2's one write per second to an object) are not a
//! setting: the client takes them from the store it is built on
//! ([`Store::min_write_interval`](crate::store::Store::min_write_interval)).
//!
//! | setting | meaning |
//! |---|---|
//! | `LEASE_KEY` | object key of the lease (required for one lease) |
//! | `LEASE_HOLDER` | the holder name (default: the adapter's, unique per process) |
//! | `LEASE_TTL` | lease duration: `60s` (default), `5m`, `1500ms` |
//! | `LEASE_PROTOCOL` | `cas` (default), `epochs` or `mutex` |
//! | `LEASE_PROBE` | `once` (default: check the store's conditional writes before the first use) or `off` |
//!
//! Errors name the setting and never contain a secret.

use crate::config::Protocol;
use crate::time::parse_duration;
#[cfg(feature = "azure")]
use crate::wire::azure::{AzureConfig, AzureDialect, SasSigner};
use crate::wire::gcs::{GcsConfig, GcsDialect};
use crate::wire::provider::{AnyDialect, DialectKind, Preset, Provider};
use crate::wire::s3::{Addressing, EtagQuoting, S3Config, S3Dialect};
use crate::wire::RenderError;
#[cfg(feature = "sigv4")]
use crate::wire::Signer;
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

/// How to authenticate to Azure Blob Storage. `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AzureAuth {
    /// The storage account key (base64), for `SharedKey` signing.
    Key(String),
    /// A shared access signature (`sv=...&sig=...`).
    Sas(String),
}

impl fmt::Debug for AzureAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AzureAuth::Key(_) => f.write_str("Key(<redacted>)"),
            AzureAuth::Sas(_) => f.write_str("Sas(<redacted>)"),
        }
    }
}

/// Credentials the platform provides, looked up and refreshed by an
/// adapter that can (the native adapter's `cloud-credentials` feature,
/// which the `lease` CLI has): chosen by
/// [`StoreSettings::from_lookup_or_ambient`] when no key is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ambient {
    /// The AWS default credential chain (environment, profiles and SSO,
    /// web identity, ECS container credentials, EC2 instance metadata),
    /// for any S3-speaking store.
    AwsChain,
    /// Google OAuth 2.0 tokens (a service-account key file, the metadata
    /// server, workload identity) for the GCS XML API.
    GoogleOAuth,
    /// Microsoft Entra ID tokens (managed identity, workload identity, a
    /// client secret) for Azure Blob Storage.
    AzureEntra,
}

impl Ambient {
    /// How the docs and errors name it.
    pub fn name(self) -> &'static str {
        match self {
            Ambient::AwsChain => "the AWS default credential chain",
            Ambient::GoogleOAuth => "Google OAuth 2.0 (application default credentials)",
            Ambient::AzureEntra => "Microsoft Entra ID",
        }
    }
}

/// Everything needed to reach the bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSettings {
    /// The provider preset (`LEASE_PROVIDER`).
    pub provider: Provider,
    /// Custom endpoint (`None`: AWS S3 in `region`). For other providers
    /// the preset's endpoint, filled in, is stored here.
    pub endpoint: Option<String>,
    /// Bucket (the container, on Azure).
    pub bucket: String,
    /// Region used for signing and the AWS endpoint.
    pub region: String,
    /// Path-style addressing.
    pub path_style: bool,
    /// How `If-Match` etags are written.
    pub etag_quoting: EtagQuoting,
    /// Account: R2's account id, Azure's storage account.
    pub account: Option<String>,
    /// SigV4 credentials (S3 dialects, and GCS HMAC keys); `None`: unsigned
    /// or Azure.
    pub credentials: Option<Credentials>,
    /// Azure authentication; `None` unless the provider is Azure and
    /// requests are signed with a key or a SAS.
    pub azure: Option<AzureAuth>,
    /// Credentials from the platform, for the adapter to look up (no key
    /// was set); `None` with static credentials or unsigned requests.
    pub ambient: Option<Ambient>,
}

/// A setting that is missing or unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

pub(crate) fn first(
    get: &impl Fn(&str) -> Option<String>,
    variables: &[&'static str],
) -> Option<String> {
    variables
        .iter()
        .filter_map(|v| get(v))
        .map(|v| v.trim().to_string())
        .find(|v| !v.is_empty())
}

/// The region to sign for: the preset's `auto` (GCS, R2, Tigris sign for
/// it whatever region a Lambda runs in), else `AWS_REGION`, else the
/// preset's, else `us-east-1` for a custom endpoint; Azure signs with none.
fn region(
    get: &impl Fn(&str) -> Option<String>,
    provider: Provider,
    preset: &Preset,
    has_endpoint: bool,
) -> Result<String, SettingsError> {
    match (
        first(get, &["AWS_REGION", "AWS_DEFAULT_REGION"]),
        preset.region,
        has_endpoint,
    ) {
        (_, Some(fixed @ "auto"), _) => Ok(fixed.to_string()),
        (Some(r), _, _) => Ok(r),
        (None, Some(r), _) => Ok(r.to_string()),
        (None, None, true) => Ok("us-east-1".to_string()),
        (None, None, false) if provider == Provider::Azure => Ok("none".to_string()),
        (None, None, false) => Err(SettingsError::Missing {
            variable: "AWS_REGION",
            what: "region of the bucket",
        }),
    }
}

/// The endpoint: the one given (without a trailing slash), else the
/// provider's, with the account or region filled in; `None` for AWS, whose
/// dialect derives it from the region.
fn endpoint_of(
    endpoint: Option<String>,
    provider: Provider,
    preset: &Preset,
    account: Option<&str>,
    region: &str,
) -> Result<Option<String>, SettingsError> {
    Ok(match endpoint {
        Some(e) => Some(e.trim_end_matches('/').to_string()),
        None if preset.endpoint.is_empty() => {
            return Err(SettingsError::Missing {
                variable: "LEASE_ENDPOINT",
                what: "endpoint of the server (this provider has no fixed one)",
            })
        }
        None if preset.endpoint.contains("{account}") => {
            let account = account.ok_or(match provider {
                Provider::Azure => SettingsError::Missing {
                    variable: "AZURE_STORAGE_ACCOUNT",
                    what: "Azure storage account name",
                },
                _ => SettingsError::Missing {
                    variable: "LEASE_ACCOUNT",
                    what: "account id in the endpoint (R2: the Cloudflare account id)",
                },
            })?;
            Some(preset.endpoint.replace("{account}", account))
        }
        // AWS: the dialect derives the endpoint from the region.
        None if provider == Provider::Aws => None,
        None => Some(preset.endpoint.replace("{region}", region)),
    })
}

impl StoreSettings {
    /// From any variable lookup: the process environment, a Worker's
    /// vars and secrets, flags layered over the environment, a map. The
    /// credentials must be set (a key, a SAS, or `LEASE_UNSIGNED`).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        StoreSettings::read::<false>(get)
    }

    /// As [`from_lookup`](Self::from_lookup), but when no key is set
    /// (neither `AWS_ACCESS_KEY_ID`, nor for Azure `AZURE_STORAGE_KEY` or
    /// `AZURE_STORAGE_SAS_TOKEN`) the credentials are the platform's:
    /// [`ambient`](Self::ambient) names where the adapter looks them up.
    pub fn from_lookup_or_ambient(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SettingsError> {
        StoreSettings::read::<true>(get)
    }

    /// `AMBIENT`: a constant, so that an adapter that never looks up the
    /// platform's credentials (a Worker) carries none of that code.
    fn read<const AMBIENT: bool>(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SettingsError> {
        let bucket = first(&get, &["LEASE_BUCKET"]).ok_or(SettingsError::Missing {
            variable: "LEASE_BUCKET",
            what: "bucket (Azure: container) that holds the lease",
        })?;
        let endpoint = first(
            &get,
            &["LEASE_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
        );
        let provider = provider(&get)?.unwrap_or(if endpoint.is_some() {
            Provider::Generic
        } else {
            Provider::Aws
        });
        let preset = provider.preset();
        let account = match provider {
            Provider::Azure => first(&get, &["AZURE_STORAGE_ACCOUNT", "LEASE_ACCOUNT"]),
            _ => first(&get, &["LEASE_ACCOUNT"]),
        };
        let region = region(&get, provider, &preset, endpoint.is_some())?;
        let explicit_endpoint = endpoint.is_some();
        let endpoint = endpoint_of(endpoint, provider, &preset, account.as_deref(), &region)?;
        let path_style = flag(&get, "LEASE_PATH_STYLE")?.unwrap_or(if explicit_endpoint {
            true
        } else {
            preset.path_style
        });
        let etag_quoting = etag_quoting(&get, preset.etag_quoting)?;
        let unsigned = flag(&get, "LEASE_UNSIGNED")?.unwrap_or(false);
        let (credentials, azure, ambient) = match unsigned {
            true => (None, None, None),
            false => auth::<AMBIENT>(&get, preset.dialect, account.as_deref())?,
        };
        let settings = StoreSettings {
            provider,
            endpoint,
            bucket,
            region,
            path_style,
            etag_quoting,
            account,
            credentials,
            azure,
            ambient,
        };
        settings.dialect()?;
        Ok(settings)
    }

    /// The S3 dialect configuration (meaningful for S3 providers).
    pub fn s3_config(&self) -> S3Config {
        let mut config = match &self.endpoint {
            Some(endpoint) => S3Config::custom(endpoint, &self.bucket, &self.region),
            None => S3Config::aws(&self.region, &self.bucket),
        };
        config.addressing = if self.path_style {
            Addressing::PathStyle
        } else {
            Addressing::VirtualHosted
        };
        config.etag_quoting = self.etag_quoting;
        config.min_write_interval = self.provider.preset().min_write_interval;
        config
    }

    /// The dialect the provider speaks, configured.
    pub fn dialect(&self) -> Result<AnyDialect, SettingsError> {
        let invalid = |e: RenderError| SettingsError::Invalid {
            variable: "LEASE_ENDPOINT or LEASE_BUCKET",
            reason: e.to_string(),
        };
        let endpoint = self.endpoint.clone().unwrap_or_default();
        Ok(match self.provider.preset().dialect {
            DialectKind::S3 => AnyDialect::S3(S3Dialect::new(self.s3_config()).map_err(invalid)?),
            DialectKind::Gcs => {
                let mut config = GcsConfig::custom(endpoint, &self.bucket);
                if !self.path_style {
                    config.addressing = Addressing::VirtualHosted;
                }
                AnyDialect::Gcs(GcsDialect::new(config).map_err(invalid)?)
            }
            #[cfg(feature = "azure")]
            DialectKind::Azure => AnyDialect::Azure(
                AzureDialect::new(AzureConfig::custom(endpoint, &self.bucket)).map_err(invalid)?,
            ),
            #[cfg(not(feature = "azure"))]
            DialectKind::Azure => return Err(no_azure()),
        })
    }

    /// A name of the store without secrets (`aws:https://host/bucket`), for
    /// logs and caches.
    pub fn describe(&self) -> String {
        let endpoint = match &self.endpoint {
            Some(e) => e.clone(),
            None => self.s3_config().endpoint,
        };
        format!("{}:{endpoint}/{}", self.provider, self.bucket)
    }

    /// The signer these settings call for: SigV4 (S3, and GCS with an HMAC
    /// key), Azure SharedKey or SAS; `None` for unsigned requests.
    #[cfg(feature = "sigv4")]
    pub fn signer(&self) -> Result<Option<AnySigner>, SettingsError> {
        if let Some(c) = &self.credentials {
            let mut signer = crate::wire::sign::SigV4Signer::new(
                c.access_key_id.clone(),
                c.secret_access_key.clone(),
                c.session_token.clone(),
                self.region.clone(),
            );
            if self.provider == Provider::Gcs {
                signer = signer.with_service(crate::wire::gcs::SIGNING_SERVICE);
            }
            return Ok(Some(AnySigner::SigV4(signer)));
        }
        if self.ambient.is_some() {
            // Never unsigned: this adapter cannot look them up (the
            // message is the one for a missing key, kept once in a Worker).
            return Err(MISSING_KEY_ID);
        }
        match &self.azure {
            None => Ok(None),
            #[cfg(feature = "azure")]
            Some(AzureAuth::Sas(token)) => SasSigner::new(token)
                .map(|s| Some(AnySigner::Sas(s)))
                .map_err(|e| SettingsError::Invalid {
                    variable: "AZURE_STORAGE_SAS_TOKEN",
                    reason: e.reason,
                }),
            #[cfg(feature = "sharedkey")]
            Some(AzureAuth::Key(key)) => {
                let account = self.account.clone().unwrap_or_default();
                crate::wire::azure::SharedKeySigner::new(account, key)
                    .map(|s| Some(AnySigner::SharedKey(s)))
                    .map_err(|e| SettingsError::Invalid {
                        variable: "AZURE_STORAGE_KEY",
                        reason: e.reason,
                    })
            }
            #[cfg(not(feature = "azure"))]
            Some(_) => Err(no_azure()),
            #[cfg(all(feature = "azure", not(feature = "sharedkey")))]
            Some(AzureAuth::Key(_)) => Err(SettingsError::Invalid {
                variable: "AZURE_STORAGE_KEY",
                reason: "this build has no SharedKey signing (lease-core feature `sharedkey`); \
                         use AZURE_STORAGE_SAS_TOKEN"
                    .to_string(),
            }),
        }
    }

    /// The store these settings describe, over `transport`, signed as
    /// [`signer`](Self::signer) says; `clock` supplies signing times.
    #[cfg(feature = "sigv4")]
    pub fn http_store<T, C>(
        &self,
        transport: T,
        clock: C,
    ) -> Result<crate::wire::HttpStore<AnyDialect, T, C>, SettingsError>
    where
        T: crate::wire::HttpTransport,
        C: crate::time::Clock,
    {
        let store = crate::wire::HttpStore::new(self.dialect()?, transport, clock);
        Ok(match self.signer()? {
            Some(signer) => store.with_signer(signer),
            None => store,
        })
    }
}

/// `LEASE_PROVIDER`, when set.
fn provider(get: &impl Fn(&str) -> Option<String>) -> Result<Option<Provider>, SettingsError> {
    match first(get, &["LEASE_PROVIDER"]) {
        None => Ok(None),
        #[cfg(not(feature = "azure"))]
        Some(p) if Provider::parse(&p) == Some(Provider::Azure) => Err(no_azure()),
        Some(p) => Provider::parse(&p)
            .map(Some)
            .ok_or_else(|| SettingsError::Invalid {
                variable: "LEASE_PROVIDER",
                reason: format!(
                    "`{p}` is not one of {}",
                    Provider::ALL.map(Provider::name).join(", ")
                ),
            }),
    }
}

/// `LEASE_PROVIDER=azure` in a build without the Azure dialect.
#[cfg(not(feature = "azure"))]
fn no_azure() -> SettingsError {
    SettingsError::Invalid {
        variable: "LEASE_PROVIDER",
        reason: "`azure`: this build has no Azure Blob dialect (lease-core's feature `azure`; \
                 a Worker's is lease-cloudflare's feature `azure`)"
            .to_string(),
    }
}

/// No key id set, and no way to look up the platform's credentials.
const MISSING_KEY_ID: SettingsError = SettingsError::Missing {
    variable: "AWS_ACCESS_KEY_ID",
    what: "access key id to sign requests with (GCS: the HMAC key's access id; \
           or set LEASE_UNSIGNED=true for an emulator)",
};

/// `LEASE_ETAG_QUOTING`, else the preset's.
fn etag_quoting(
    get: &impl Fn(&str) -> Option<String>,
    preset: EtagQuoting,
) -> Result<EtagQuoting, SettingsError> {
    match first(get, &["LEASE_ETAG_QUOTING"]).as_deref() {
        None => Ok(preset),
        Some("quoted") => Ok(EtagQuoting::Quoted),
        Some("unquoted") => Ok(EtagQuoting::Unquoted),
        Some(other) => Err(SettingsError::Invalid {
            variable: "LEASE_ETAG_QUOTING",
            reason: format!("`{other}` is neither `quoted` nor `unquoted`"),
        }),
    }
}

/// The credentials set for `dialect`'s requests. With nothing set, the
/// platform's when the caller can look them up (`AMBIENT`); a key id
/// without its secret is still an error.
#[allow(clippy::type_complexity)]
fn auth<const AMBIENT: bool>(
    get: &impl Fn(&str) -> Option<String>,
    dialect: DialectKind,
    account: Option<&str>,
) -> Result<(Option<Credentials>, Option<AzureAuth>, Option<Ambient>), SettingsError> {
    match dialect {
        DialectKind::Azure => match azure_auth(get, account) {
            Ok(auth) => Ok((None, Some(auth), None)),
            Err(SettingsError::Missing { .. })
                if AMBIENT && first(get, &["AZURE_STORAGE_KEY"]).is_none() =>
            {
                Ok((None, None, Some(Ambient::AzureEntra)))
            }
            Err(e) => Err(e),
        },
        DialectKind::S3 | DialectKind::Gcs => match credentials(get) {
            Ok(c) => Ok((Some(c), None, None)),
            // A secret or session token without its key id is a mistake,
            // not a wish for the platform's credentials.
            Err(SettingsError::Missing {
                variable: "AWS_ACCESS_KEY_ID",
                ..
            }) if AMBIENT
                && first(get, &["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]).is_none() =>
            {
                let ambient = match dialect {
                    DialectKind::Gcs => Ambient::GoogleOAuth,
                    _ => Ambient::AwsChain,
                };
                Ok((None, None, Some(ambient)))
            }
            Err(e) => Err(e),
        },
    }
}

/// SigV4 credentials from the AWS variables.
fn credentials(get: &impl Fn(&str) -> Option<String>) -> Result<Credentials, SettingsError> {
    let access_key_id = first(get, &["AWS_ACCESS_KEY_ID"]).ok_or(MISSING_KEY_ID)?;
    let secret_access_key =
        first(get, &["AWS_SECRET_ACCESS_KEY"]).ok_or(SettingsError::Missing {
            variable: "AWS_SECRET_ACCESS_KEY",
            what: "secret access key that goes with AWS_ACCESS_KEY_ID",
        })?;
    Ok(Credentials {
        access_key_id,
        secret_access_key,
        session_token: first(get, &["AWS_SESSION_TOKEN"]),
    })
}

/// Azure's SAS token or account key (the account must then be named).
fn azure_auth(
    get: &impl Fn(&str) -> Option<String>,
    account: Option<&str>,
) -> Result<AzureAuth, SettingsError> {
    if let Some(token) = first(get, &["AZURE_STORAGE_SAS_TOKEN"]) {
        #[cfg(feature = "azure")]
        SasSigner::new(&token).map_err(|e| SettingsError::Invalid {
            variable: "AZURE_STORAGE_SAS_TOKEN",
            reason: e.reason,
        })?;
        return Ok(AzureAuth::Sas(token));
    }
    let key = first(get, &["AZURE_STORAGE_KEY"]).ok_or(SettingsError::Missing {
        variable: "AZURE_STORAGE_KEY",
        what: "storage account key (or set AZURE_STORAGE_SAS_TOKEN)",
    })?;
    if account.is_none() {
        return Err(SettingsError::Missing {
            variable: "AZURE_STORAGE_ACCOUNT",
            what: "storage account the key belongs to",
        });
    }
    Ok(AzureAuth::Key(key))
}

/// The signer [`StoreSettings::signer`] picks.
#[cfg(feature = "sigv4")]
#[derive(Clone, Debug)]
pub enum AnySigner {
    /// AWS SigV4 (S3-compatible stores, GCS HMAC keys).
    SigV4(crate::wire::sign::SigV4Signer),
    /// Azure account key.
    #[cfg(feature = "sharedkey")]
    SharedKey(crate::wire::azure::SharedKeySigner),
    /// Azure shared access signature.
    #[cfg(feature = "azure")]
    Sas(SasSigner),
}

#[cfg(feature = "sigv4")]
impl Signer for AnySigner {
    fn sign(
        &self,
        request: &mut http::Request<Vec<u8>>,
        at: crate::time::UnixMillis,
    ) -> Result<(), crate::wire::SignError> {
        match self {
            AnySigner::SigV4(s) => s.sign(request, at),
            #[cfg(feature = "sharedkey")]
            AnySigner::SharedKey(s) => s.sign(request, at),
            #[cfg(feature = "azure")]
            AnySigner::Sas(s) => s.sign(request, at),
        }
    }
}

/// `LEASE_KEY`: the object key of the one lease an adapter guards (the
/// Lambda's, the Worker's, the CLI's `--key`).
pub fn lease_key(get: impl Fn(&str) -> Option<String>) -> Result<String, SettingsError> {
    first(&get, &["LEASE_KEY"]).ok_or(SettingsError::Missing {
        variable: "LEASE_KEY",
        what: "object key of the lease",
    })
}

/// `LEASE_TTL`, default [`DEFAULT_TTL`](crate::config::DEFAULT_TTL).
pub(crate) fn ttl(get: &impl Fn(&str) -> Option<String>) -> Result<Duration, SettingsError> {
    match first(get, &["LEASE_TTL"]) {
        None => Ok(crate::config::DEFAULT_TTL),
        Some(v) => parse_duration(&v).ok_or_else(|| SettingsError::Invalid {
            variable: "LEASE_TTL",
            reason: format!("`{v}` is not a duration like 60s, 5m or 1500ms"),
        }),
    }
}

/// `LEASE_PROTOCOL`, default `cas`.
pub(crate) fn protocol(get: &impl Fn(&str) -> Option<String>) -> Result<Protocol, SettingsError> {
    match first(get, &["LEASE_PROTOCOL"]) {
        None => Ok(Protocol::Cas),
        Some(p) => Protocol::parse(&p).ok_or_else(|| SettingsError::Invalid {
            variable: "LEASE_PROTOCOL",
            reason: format!("`{p}` is not one of cas, epochs, mutex"),
        }),
    }
}

/// `LEASE_PROBE`: `once` (default) or `off`.
pub(crate) fn probe(get: &impl Fn(&str) -> Option<String>) -> Result<bool, SettingsError> {
    match first(get, &["LEASE_PROBE"]).as_deref() {
        None | Some("once") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(SettingsError::Invalid {
            variable: "LEASE_PROBE",
            reason: format!("`{other}` is neither `once` nor `off`"),
        }),
    }
}

/// A lookup over fixed name/value pairs, for settings read from somewhere
/// other than the environment (a configuration file's values, a test's).
pub fn lookup_in<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
    |name| {
        let found = pairs.iter().find(|(k, _)| *k == name);
        found.map(|(_, v)| v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lookup_in as lookup;

    #[test]
    #[cfg(feature = "sigv4")]
    fn with_no_key_the_platform_provides_the_credentials_where_the_caller_can_look_them_up() {
        let cases = [
            (
                vec![("LEASE_BUCKET", "locks"), ("AWS_REGION", "eu-west-1")],
                Ambient::AwsChain,
            ),
            (
                vec![("LEASE_BUCKET", "locks"), ("LEASE_PROVIDER", "gcs")],
                Ambient::GoogleOAuth,
            ),
            #[cfg(feature = "azure")]
            (
                vec![
                    ("LEASE_BUCKET", "locks"),
                    ("LEASE_PROVIDER", "azure"),
                    ("AZURE_STORAGE_ACCOUNT", "acct"),
                ],
                Ambient::AzureEntra,
            ),
        ];
        for (pairs, ambient) in cases {
            let s = StoreSettings::from_lookup_or_ambient(lookup(&pairs)).unwrap();
            assert_eq!(s.ambient, Some(ambient));
            assert_eq!((s.credentials.as_ref(), s.azure.as_ref()), (None, None));
            // An adapter that cannot look them up asks for a key, and
            // never sends unsigned.
            let err = s.signer().unwrap_err().to_string();
            assert!(err.starts_with("AWS_ACCESS_KEY_ID is not set"), "{err}");
            // And without the caller's say-so, a key is required as before.
            assert!(matches!(
                StoreSettings::from_lookup(lookup(&pairs)),
                Err(SettingsError::Missing { .. })
            ));
        }
        // A key set wins; a key id without its secret is still an error.
        let keyed = [
            ("LEASE_BUCKET", "locks"),
            ("AWS_REGION", "r"),
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
        ];
        let s = StoreSettings::from_lookup_or_ambient(lookup(&keyed)).unwrap();
        assert_eq!((s.ambient, s.credentials.is_some()), (None, true));
        let err = StoreSettings::from_lookup_or_ambient(lookup(&keyed[..3])).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("AWS_SECRET_ACCESS_KEY is not set"),
            "{err}"
        );
        let unsigned = [
            ("LEASE_BUCKET", "locks"),
            ("LEASE_ENDPOINT", "http://127.0.0.1:9"),
            ("LEASE_UNSIGNED", "true"),
        ];
        let s = StoreSettings::from_lookup_or_ambient(lookup(&unsigned)).unwrap();
        assert_eq!(s.ambient, None);
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
    fn the_key_of_one_lease_is_required() {
        assert_eq!(
            lease_key(lookup(&[("LEASE_KEY", "locks/nightly")])).unwrap(),
            "locks/nightly"
        );
        let err = lease_key(lookup(&[])).unwrap_err();
        assert!(err.to_string().starts_with("LEASE_KEY is not set"), "{err}");
    }

    #[test]
    fn provider_presets_fill_in_endpoints_regions_and_limits() {
        let creds = [("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")];
        let with = |pairs: &[(&str, &str)]| {
            let mut all = pairs.to_vec();
            all.extend_from_slice(&creds);
            StoreSettings::from_lookup(lookup(&all))
        };
        let r2 = with(&[
            ("LEASE_PROVIDER", "r2"),
            ("LEASE_BUCKET", "locks"),
            ("LEASE_ACCOUNT", "abc123"),
            ("AWS_REGION", "eu-west-1"),
        ])
        .unwrap();
        assert_eq!(
            (r2.endpoint.as_deref(), r2.region.as_str(), r2.path_style),
            (
                Some("https://abc123.r2.cloudflarestorage.com"),
                "auto",
                true
            )
        );
        let err = with(&[("LEASE_PROVIDER", "r2"), ("LEASE_BUCKET", "locks")]).unwrap_err();
        assert!(
            err.to_string().starts_with("LEASE_ACCOUNT is not set"),
            "{err}"
        );
        let err = with(&[("LEASE_PROVIDER", "minio"), ("LEASE_BUCKET", "locks")]).unwrap_err();
        assert!(
            err.to_string().starts_with("LEASE_ENDPOINT is not set"),
            "{err}"
        );

        let gcs = with(&[("LEASE_PROVIDER", "gcs"), ("LEASE_BUCKET", "my_bucket")]).unwrap();
        assert_eq!(
            (gcs.endpoint.as_deref(), gcs.region.as_str()),
            (Some("https://storage.googleapis.com"), "auto")
        );
        assert!(matches!(gcs.dialect(), Ok(AnyDialect::Gcs(_))));
        assert_eq!(
            gcs.describe(),
            "gcs:https://storage.googleapis.com/my_bucket"
        );
        // The store GCS's settings make spaces writes to an object by a
        // second (a client takes it from there).
        use crate::wire::Dialect;
        let dialect = gcs.dialect().unwrap();
        assert_eq!(dialect.min_write_interval(), Duration::from_secs(1));

        let tigris = with(&[("LEASE_PROVIDER", "tigris"), ("LEASE_BUCKET", "locks")]).unwrap();
        assert_eq!(tigris.endpoint.as_deref(), Some("https://t3.storage.dev"));
        let aws = with(&[("LEASE_BUCKET", "locks"), ("AWS_REGION", "us-west-2")]).unwrap();
        assert_eq!(aws.provider, Provider::Aws);
        assert!(matches!(aws.dialect(), Ok(AnyDialect::S3(_))));
    }
}
