//! The Worker's settings: the core's [`lease_core::settings`] names, read
//! from the Worker's vars and secrets, plus the choice of store.
//!
//! | setting | kind | meaning |
//! |---|---|---|
//! | `LEASE_R2_BINDING` | var | name of an R2 bucket binding (e.g. `LOCKS`): use the binding, no credentials needed |
//! | `LEASE_PROVIDER`, `LEASE_BUCKET`, `LEASE_ENDPOINT`, `LEASE_ACCOUNT`, `AWS_REGION`, `LEASE_PATH_STYLE`, `LEASE_ETAG_QUOTING` | vars | signed fetch (S3, R2's S3 endpoint, GCS; Azure with this crate's feature `azure`), when there is no binding |
//! | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`; `AZURE_STORAGE_ACCOUNT` with `AZURE_STORAGE_KEY` or `AZURE_STORAGE_SAS_TOKEN` | secrets | credentials for signed fetch (`wrangler secret put`) |
//! | `LEASE_KEY`, `LEASE_TTL`, `LEASE_PROTOCOL`, `LEASE_PROBE` | vars | the lease ([`Settings::from_lookup`](lease_core::Settings::from_lookup), [`lease_key`](lease_core::settings::lease_key)) |
//! | `LEASE_HOLDER` | var | holder name prefix (default `worker`); a random suffix makes each run its own holder |
//! | `LEASE_TICK` | var | a Cron Trigger's tick: `cron` (the default, `cron:<expression>@<scheduledTime>`) or `slot:NAME`, the slot of the cron named NAME that an EventBridge rule (the Lambda's `LEASE_TICK=slot:NAME`) names alike ([`Tick::slot`](lease_core::tick::Tick::slot)) |
//! | `LEASE_TIME_LIMIT` | var | how long a scheduled run may take (default `15m`, a Cron Trigger's wall-clock limit; `off`: no limit): see [`WorkerLease::run`](crate::lease::WorkerLease::run) |
//! | `LEASE_ADMIN_TOKEN` | secret | bearer token of the HTTP routes that act on the lease ([`crate::auth`]); unset, they answer 403 |
//!
//! Errors name the setting; secret values are never part of one.
//!
//! Azure Blob Storage needs this crate's feature `azure` (lease-core's
//! Azure dialect and SharedKey signing, about 13 KB of the Worker
//! gzipped); without it `LEASE_PROVIDER=azure` is refused with an error
//! that names the feature.

use crate::clock::WorkerClock;
use crate::fetch::FetchTransport;
use crate::r2::R2Store;
use lease_core::wire::AnyDialect;
use lease_core::{HttpStore, Store, StoreOp, StoreReply};
pub use lease_core::{SettingsError, StoreSettings};
use std::time::Duration;
use worker::Env;

/// Signed fetch to S3, R2's S3 endpoint, GCS or (feature `azure`) Azure
/// (`LEASE_PROVIDER`).
pub type FetchStore = HttpStore<AnyDialect, FetchTransport, WorkerClock>;

/// The store a Worker's settings choose.
#[derive(Debug)]
pub enum WorkerStore {
    /// The R2 bucket binding.
    Binding(R2Store),
    /// Signed fetch to S3, R2's S3 endpoint, GCS or (feature `azure`) Azure.
    Signed(Box<FetchStore>),
}

impl Store for WorkerStore {
    async fn call(&self, op: StoreOp) -> StoreReply {
        match self {
            WorkerStore::Binding(s) => s.call(op).await,
            WorkerStore::Signed(s) => s.call(op).await,
        }
    }

    /// The store's own spacing of writes to one object (R2's and GCS's one
    /// second), which the client applies ([`Leases::with_config`]).
    ///
    /// [`Leases::with_config`]: lease_core::Leases::with_config
    fn min_write_interval(&self) -> Duration {
        match self {
            WorkerStore::Binding(s) => s.min_write_interval(),
            WorkerStore::Signed(s) => s.min_write_interval(),
        }
    }
}

/// A setting from the Worker's environment (a var or a secret: both are
/// text bindings), blank counting as unset.
pub fn lookup(env: &Env) -> impl Fn(&str) -> Option<String> + '_ {
    |name| {
        env.var(name)
            .ok()
            .map(|v| v.to_string())
            .filter(|v| !v.trim().is_empty())
    }
}

/// The store named by the environment: the binding in `LEASE_R2_BINDING`
/// if set, else signed fetch per [`StoreSettings`]; `describe` is a
/// secret-free name of it (for probe caching and logs).
pub fn store(
    env: &Env,
    clock: &WorkerClock,
    request_timeout: Duration,
) -> Result<(WorkerStore, String), SettingsError> {
    let get = lookup(env);
    if let Some(binding) = get("LEASE_R2_BINDING") {
        let bucket = env.bucket(&binding).map_err(|_| SettingsError::Invalid {
            variable: "LEASE_R2_BINDING",
            reason: format!(
                "there is no R2 bucket binding named `{binding}` (add [[r2_buckets]] binding = \"{binding}\" to wrangler.toml)"
            ),
        })?;
        return Ok((
            WorkerStore::Binding(R2Store::new(bucket)),
            format!("r2-binding:{binding}"),
        ));
    }
    let settings = StoreSettings::from_lookup(&get)?;
    let store = settings.http_store(FetchTransport::new(request_timeout), clock.clone())?;
    Ok((WorkerStore::Signed(Box::new(store)), settings.describe()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spacing a client applies comes from its store: a Worker's
    /// signed store passes on its provider's (found missing once, when the
    /// provider preset stopped being a lease setting).
    #[test]
    fn a_signed_store_passes_on_its_providers_write_spacing() {
        for (provider, spacing) in [("gcs", 1), ("r2", 1), ("aws", 0)] {
            let get = |name: &str| match name {
                "LEASE_PROVIDER" => Some(provider.to_string()),
                "LEASE_BUCKET" => Some("locks".to_string()),
                "LEASE_ACCOUNT" => Some("abc123".to_string()),
                "AWS_REGION" => Some("us-east-1".to_string()),
                "AWS_ACCESS_KEY_ID" => Some("id".to_string()),
                "AWS_SECRET_ACCESS_KEY" => Some("secret".to_string()),
                _ => None,
            };
            let settings = StoreSettings::from_lookup(get).unwrap();
            let transport = FetchTransport::new(Duration::from_secs(5));
            let store = settings
                .http_store(transport, WorkerClock::unread())
                .unwrap();
            let store = WorkerStore::Signed(Box::new(store));
            assert_eq!(
                store.min_write_interval(),
                Duration::from_secs(spacing),
                "{provider}"
            );
        }
    }
}
