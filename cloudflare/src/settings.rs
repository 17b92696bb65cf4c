//! The Worker's settings: the core's [`lease_core::settings`] names, read
//! from the Worker's vars and secrets, plus the choice of store.
//!
//! | setting | kind | meaning |
//! |---|---|---|
//! | `LEASE_R2_BINDING` | var | name of an R2 bucket binding (e.g. `LOCKS`): use the binding, no credentials needed |
//! | `LEASE_PROVIDER`, `LEASE_BUCKET`, `LEASE_ENDPOINT`, `LEASE_ACCOUNT`, `AWS_REGION`, `LEASE_PATH_STYLE`, `LEASE_ETAG_QUOTING` | vars | signed fetch (S3, R2's S3 endpoint, GCS, Azure), when there is no binding |
//! | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`; `AZURE_STORAGE_ACCOUNT` with `AZURE_STORAGE_KEY` or `AZURE_STORAGE_SAS_TOKEN` | secrets | credentials for signed fetch (`wrangler secret put`) |
//! | `LEASE_KEY`, `LEASE_TTL`, `LEASE_PROTOCOL`, `LEASE_PROBE` | vars | the lease ([`Settings::from_lookup`](lease_core::client::Settings::from_lookup), [`lease_key`](lease_core::settings::lease_key)) |
//! | `LEASE_HOLDER` | var | holder name prefix (default `worker`); a random suffix makes each run its own holder |
//! | `LEASE_TIME_LIMIT` | var | how long a scheduled run may take (default `15m`, a Cron Trigger's wall-clock limit; `off`: no limit): see [`WorkerLease::run`](crate::lease::WorkerLease::run) |
//! | `LEASE_ADMIN_TOKEN` | secret | bearer token of the HTTP routes that act on the lease ([`crate::auth`]); unset, they answer 403 |
//!
//! Errors name the setting; secret values are never part of one.

use crate::clock::WorkerClock;
use crate::fetch::FetchTransport;
use crate::r2::R2Store;
pub use lease_core::settings::{SettingsError, StoreSettings};
use lease_core::store::Store;
use lease_core::store::{StoreOp, StoreReply};
use lease_core::wire::provider::AnyDialect;
use lease_core::wire::HttpStore;
use std::time::Duration;
use worker::Env;

/// Signed fetch to S3, R2's S3 endpoint, GCS or Azure (`LEASE_PROVIDER`).
pub type FetchStore = HttpStore<AnyDialect, FetchTransport, WorkerClock>;

/// The store a Worker's settings choose.
#[derive(Debug)]
pub enum WorkerStore {
    /// The R2 bucket binding.
    Binding(R2Store),
    /// Signed fetch to S3, R2's S3 endpoint, GCS or Azure.
    Signed(Box<FetchStore>),
}

impl Store for WorkerStore {
    async fn call(&self, op: StoreOp) -> StoreReply {
        match self {
            WorkerStore::Binding(s) => s.call(op).await,
            WorkerStore::Signed(s) => s.call(op).await,
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
