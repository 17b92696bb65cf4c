//! The platform's credentials, each from the crate its provider keeps
//! (features `aws-chain`, `gcs-oauth`, `azure-entra`; all three in
//! `cloud-credentials`), as [`Source`](crate::credentials::Source)s for a [`Keeper`]. What each looks
//! up, in order, is in `docs/credentials.md`.

use crate::clock::SystemClock;
#[allow(unused_imports)]
use crate::credentials::{CredentialsError, Fetch, Grant, Keeper, Secret, SignedStore, Signing};
use crate::transport::ReqwestTransport;
use lease_core::settings::Ambient;
use lease_core::wire::AnyDialect;
use lease_core::{HttpStore, SettingsError, StoreSettings, UnixMillis};
use std::time::Duration;

/// The store for settings whose credentials are the platform's.
pub(crate) fn store(
    settings: &StoreSettings,
    ambient: Ambient,
    request_timeout: Duration,
) -> Result<SignedStore<AnyDialect, ReqwestTransport, SystemClock>, SettingsError> {
    https_or_loopback(settings.endpoint.as_deref())?;
    let transport = crate::transport::for_calls(request_timeout)?;
    let (keeper, signing) = keeper(settings, ambient)?;
    let inner = HttpStore::new(settings.dialect()?, transport, SystemClock::new());
    Ok(SignedStore::new(inner, keeper, signing, SystemClock::new()))
}

/// The platform's credentials go only over HTTPS, or plain HTTP to a
/// loopback emulator: a bearer token is the credential itself, and a
/// signed request can be replayed for minutes.
fn https_or_loopback(endpoint: Option<&str>) -> Result<(), SettingsError> {
    let Some(rest) = endpoint.and_then(|e| e.strip_prefix("http://")) else {
        return Ok(());
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        return Ok(());
    }
    Err(SettingsError::Invalid {
        variable: "LEASE_ENDPOINT",
        reason: "the platform's credentials are sent only over https (or http to a \
                 loopback emulator); set a key to sign plain http"
            .to_string(),
    })
}

/// The keeper of `ambient`'s credentials, and how they sign.
pub fn keeper(
    settings: &StoreSettings,
    ambient: Ambient,
) -> Result<(Keeper, Signing), SettingsError> {
    let missing = |feature: &str| SettingsError::Invalid {
        variable: match ambient {
            Ambient::AzureEntra => "AZURE_STORAGE_KEY",
            _ => "AWS_ACCESS_KEY_ID",
        },
        reason: format!(
            "it is not set, and this build cannot look up {} (lease-native's feature \
             `{feature}`); set a key",
            ambient.name()
        ),
    };
    match ambient {
        #[cfg(feature = "aws-chain")]
        Ambient::AwsChain => Ok((
            Keeper::new(aws::Chain::new(aws::sts_region(settings))),
            Signing::SigV4 {
                region: settings.region.clone(),
                service: "s3",
            },
        )),
        #[cfg(feature = "gcs-oauth")]
        Ambient::GoogleOAuth => Ok((Keeper::new(gcs::Adc::default()), Signing::Bearer)),
        #[cfg(feature = "azure-entra")]
        Ambient::AzureEntra => Ok((
            Keeper::new(
                azure::Entra::from_env().map_err(|reason| SettingsError::Invalid {
                    variable: "AZURE_CLIENT_ID",
                    reason,
                })?,
            ),
            Signing::AzureBearer,
        )),
        #[cfg(not(feature = "aws-chain"))]
        Ambient::AwsChain => Err(missing("aws-chain")),
        #[cfg(not(feature = "gcs-oauth"))]
        Ambient::GoogleOAuth => Err(missing("gcs-oauth")),
        #[cfg(not(feature = "azure-entra"))]
        Ambient::AzureEntra => Err(missing("azure-entra")),
        _ => Err(missing("cloud-credentials")),
    }
}

/// A wall time from the crates' own time types, in whole milliseconds.
#[allow(dead_code)]
fn unix_ms(ms: i64) -> UnixMillis {
    UnixMillis(u64::try_from(ms).unwrap_or(0))
}

/// The AWS default credential chain of `aws-config`.
#[cfg(feature = "aws-chain")]
pub mod aws {
    use super::*;
    use aws_config::default_provider::credentials::DefaultCredentialsChain;
    use aws_config::provider_config::ProviderConfig;
    use aws_config::Region;
    use aws_credential_types::provider::ProvideCredentials;
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    use lease_core::settings::Credentials;
    use lease_core::wire::Provider as Store;

    /// How errors name it.
    pub const NAME: &str = "the AWS default credential chain";

    /// The region STS and SSO are asked in: `AWS_REGION` (or
    /// `AWS_DEFAULT_REGION`) when set, the bucket's region on AWS, else
    /// `us-east-1` (an R2 or MinIO bucket's region says nothing of IAM's).
    pub fn sts_region(settings: &StoreSettings) -> String {
        ["AWS_REGION", "AWS_DEFAULT_REGION"]
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .find(|v| !v.trim().is_empty())
            .unwrap_or_else(|| match settings.provider {
                Store::Aws => settings.region.clone(),
                _ => "us-east-1".to_string(),
            })
    }

    /// Environment, shared config and credentials files (profiles, SSO,
    /// `credential_process`, role assumption), web identity, ECS container
    /// credentials, EC2 instance metadata (IMDSv2), in that order. The
    /// chain caches nothing itself: the [`Keeper`] does.
    pub struct Chain {
        region: String,
        chain: tokio::sync::OnceCell<DefaultCredentialsChain>,
    }

    impl Chain {
        /// The chain, built at its first fetch, asking STS and SSO in
        /// `region`.
        pub fn new(region: String) -> Chain {
            Chain {
                region,
                chain: tokio::sync::OnceCell::new(),
            }
        }

        async fn chain(&self) -> &DefaultCredentialsChain {
            self.chain
                .get_or_init(|| async {
                    // rustls on ring, as the store's own client.
                    let http = aws_smithy_http_client::Builder::new()
                        .tls_provider(Provider::Rustls(CryptoMode::Ring))
                        .build_https();
                    DefaultCredentialsChain::builder()
                        .configure(ProviderConfig::default().with_http_client(http))
                        .region(Region::new(self.region.clone()))
                        .build()
                        .await
                })
                .await
        }
    }

    impl crate::credentials::Source for Chain {
        fn name(&self) -> &'static str {
            NAME
        }

        fn fetch(&self) -> Fetch<'_> {
            Box::pin(async move {
                let c = self
                    .chain()
                    .await
                    .provide_credentials()
                    .await
                    .map_err(|e| CredentialsError {
                        source: NAME,
                        reason: chain_of(&e),
                    })?;
                let expires_at = c.expiry().map(|t| {
                    let ms = t
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64);
                    unix_ms(ms)
                });
                Ok(Grant {
                    secret: Secret::SigV4(Credentials {
                        access_key_id: c.access_key_id().to_string(),
                        secret_access_key: c.secret_access_key().to_string(),
                        // An empty token is none (long-lived keys served as
                        // temporary ones).
                        session_token: c
                            .session_token()
                            .filter(|t| !t.is_empty())
                            .map(str::to_string),
                    }),
                    expires_at,
                })
            })
        }
    }

    /// An error and its causes, one line.
    fn chain_of(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            out.push_str(": ");
            out.push_str(&s.to_string());
            source = s.source();
        }
        out
    }
}

/// Google's application default credentials, by `gcp_auth`.
#[cfg(feature = "gcs-oauth")]
pub mod gcs {
    use super::*;
    use std::sync::Arc;

    /// How errors name it.
    pub const NAME: &str = "Google application default credentials";

    /// Read and write objects, nothing else of the project.
    pub const SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_write";

    /// `GOOGLE_APPLICATION_CREDENTIALS` (a service-account key file), the
    /// gcloud user's credentials, the metadata server (GCE, GKE Workload
    /// Identity, Cloud Run), `gcloud auth print-access-token`, in that
    /// order; the provider is found at the first fetch.
    #[derive(Default)]
    pub struct Adc {
        provider: tokio::sync::OnceCell<Arc<dyn gcp_auth::TokenProvider>>,
    }

    impl crate::credentials::Source for Adc {
        fn name(&self) -> &'static str {
            NAME
        }

        fn fetch(&self) -> Fetch<'_> {
            Box::pin(async move {
                let failed = |e: gcp_auth::Error| CredentialsError {
                    source: NAME,
                    reason: e.to_string(),
                };
                let provider = self
                    .provider
                    .get_or_try_init(gcp_auth::provider)
                    .await
                    .map_err(failed)?;
                let token = provider.token(&[SCOPE]).await.map_err(failed)?;
                Ok(Grant {
                    secret: Secret::Bearer(token.as_str().to_string()),
                    expires_at: Some(unix_ms(token.expires_at().timestamp_millis())),
                })
            })
        }
    }
}

/// Microsoft Entra ID tokens, by `azure_identity`.
#[cfg(feature = "azure-entra")]
pub mod azure {
    use super::*;
    use azure_core::credentials::TokenCredential;
    use azure_identity::{
        ClientSecretCredential, ManagedIdentityCredential, ManagedIdentityCredentialOptions,
        UserAssignedId, WorkloadIdentityCredential,
    };
    use std::sync::Arc;

    /// How errors name it.
    pub const NAME: &str = "Microsoft Entra ID";

    /// The Blob service's scope.
    pub const SCOPE: &str = "https://storage.azure.com/.default";

    /// One credential, chosen from the environment: a client secret
    /// (`AZURE_TENANT_ID`, `AZURE_CLIENT_ID`, `AZURE_CLIENT_SECRET`), else
    /// workload identity (`AZURE_FEDERATED_TOKEN_FILE`, as AKS sets it),
    /// else the managed identity (user-assigned when `AZURE_CLIENT_ID` is
    /// set).
    pub struct Entra {
        credential: Arc<dyn TokenCredential>,
    }

    impl Entra {
        /// The credential the environment calls for.
        pub fn from_env() -> Result<Entra, String> {
            // azure_identity builds its own reqwest client (this one's
            // version, without a crypto provider): rustls's ring, as the
            // store's transport installs it.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let var = |v: &str| std::env::var(v).ok().filter(|s| !s.trim().is_empty());
            let failed = |e: azure_core::Error| e.to_string();
            let credential: Arc<dyn TokenCredential> = if let Some(secret) =
                var("AZURE_CLIENT_SECRET")
            {
                let tenant = var("AZURE_TENANT_ID")
                    .ok_or("AZURE_TENANT_ID is not set (it goes with AZURE_CLIENT_SECRET)")?;
                let client = var("AZURE_CLIENT_ID")
                    .ok_or("AZURE_CLIENT_ID is not set (it goes with AZURE_CLIENT_SECRET)")?;
                ClientSecretCredential::new(&tenant, client, secret.into(), None).map_err(failed)?
            } else if var("AZURE_FEDERATED_TOKEN_FILE").is_some() {
                WorkloadIdentityCredential::new(None).map_err(failed)?
            } else {
                let options = ManagedIdentityCredentialOptions {
                    user_assigned_id: var("AZURE_CLIENT_ID").map(UserAssignedId::ClientId),
                    ..Default::default()
                };
                ManagedIdentityCredential::new(Some(options)).map_err(failed)?
            };
            Ok(Entra { credential })
        }
    }

    impl crate::credentials::Source for Entra {
        fn name(&self) -> &'static str {
            NAME
        }

        fn fetch(&self) -> Fetch<'_> {
            Box::pin(async move {
                let token = self
                    .credential
                    .get_token(&[SCOPE], None)
                    .await
                    .map_err(|e| CredentialsError {
                        source: NAME,
                        reason: e.to_string(),
                    })?;
                Ok(Grant {
                    secret: Secret::Bearer(token.token.secret().to_string()),
                    expires_at: Some(unix_ms(token.expires_on.unix_timestamp() * 1000)),
                })
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_credentials_go_over_https_or_to_loopback_only() {
        for ok in [
            None,
            Some("https://s3.example.com"),
            Some("http://127.0.0.1:9000"),
            Some("http://localhost:9000/x"),
            Some("http://[::1]:9000"),
        ] {
            assert!(https_or_loopback(ok).is_ok(), "{ok:?}");
        }
        for refused in [
            "http://10.0.0.5:9000",
            "http://minio.internal",
            "http://[fd00::1]:80",
        ] {
            let err = https_or_loopback(Some(refused)).unwrap_err().to_string();
            assert!(err.contains("only over https"), "{refused}: {err}");
        }
    }
}
