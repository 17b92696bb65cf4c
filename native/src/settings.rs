//! Where the lease lives and how to sign for it: the core's
//! [`lease_core::settings`] (the standard AWS environment plus a few
//! `LEASE_*` variables; see there for the table), read from the process
//! environment, and the store built from them on reqwest.

use crate::clock::SystemClock;
use crate::transport::ReqwestTransport;
pub use lease_core::settings::{Ambient, Credentials};
use lease_core::wire::AnyDialect;
use lease_core::{HttpStore, Store, StoreOp, StoreReply};
pub use lease_core::{SettingsError, StoreSettings};
use std::time::Duration;

/// The store type this adapter builds: any provider's dialect
/// (`LEASE_PROVIDER`) over reqwest.
pub type ReqwestStore = HttpStore<AnyDialect, ReqwestTransport, SystemClock>;

/// The process environment as a settings lookup.
pub fn env(variable: &str) -> Option<String> {
    std::env::var(variable).ok()
}

/// The store: the provider's dialect, signed when there are credentials,
/// over reqwest with `request_timeout` per call.
pub fn store(
    settings: &StoreSettings,
    request_timeout: Duration,
) -> Result<ReqwestStore, SettingsError> {
    settings.http_store(
        crate::transport::for_calls(request_timeout)?,
        SystemClock::new(),
    )
}

/// The settings from the process environment: with feature
/// `cloud-credentials`, no key set means the platform's credentials
/// ([`StoreSettings::from_lookup_or_ambient`]); without it a key is
/// required.
pub fn from_env() -> Result<StoreSettings, SettingsError> {
    if cfg!(feature = "platform") {
        StoreSettings::from_lookup_or_ambient(env)
    } else {
        StoreSettings::from_lookup(env)
    }
}

/// A store signed with keys from the settings (or unsigned), or with the
/// platform's credentials, refreshed before they expire
/// ([`crate::credentials`]; feature `cloud-credentials`).
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyStore {
    /// Keys, a SAS, or unsigned: [`store`].
    Keys(ReqwestStore),
    /// The platform's credentials.
    #[cfg(feature = "platform")]
    Platform(crate::credentials::SignedStore<AnyDialect, ReqwestTransport, SystemClock>),
}

impl Store for AnyStore {
    fn min_write_interval(&self) -> Duration {
        match self {
            AnyStore::Keys(s) => s.min_write_interval(),
            #[cfg(feature = "platform")]
            AnyStore::Platform(s) => s.min_write_interval(),
        }
    }

    async fn call(&self, op: StoreOp) -> StoreReply {
        // With feature `ops`, every call is counted and timed (src/ops.rs).
        #[cfg(feature = "ops")]
        let sent = (op.verb(), op.key().to_string(), op.is_write());
        #[cfg(feature = "ops")]
        let started = std::time::Instant::now();
        let reply = match self {
            AnyStore::Keys(s) => s.call(op).await,
            #[cfg(feature = "platform")]
            AnyStore::Platform(s) => s.call(op).await,
        };
        #[cfg(feature = "ops")]
        crate::ops::record_call(sent.0, &sent.1, sent.2, started, &reply);
        reply
    }
}

/// The store for any settings: [`store`] when they hold keys (or say
/// unsigned); with [`StoreSettings::ambient`] set, the platform's
/// credentials (feature `cloud-credentials`; without it, an error naming
/// the key to set).
pub fn any_store(
    settings: &StoreSettings,
    request_timeout: Duration,
) -> Result<AnyStore, SettingsError> {
    #[cfg(feature = "platform")]
    if let Some(ambient) = settings.ambient {
        return crate::platform::store(settings, ambient, request_timeout).map(AnyStore::Platform);
    }
    store(settings, request_timeout).map(AnyStore::Keys)
}
