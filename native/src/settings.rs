//! Where the lease lives and how to sign for it: the core's
//! [`lease_core::settings`] (the standard AWS environment plus a few
//! `LEASE_*` variables; see there for the table), read from the process
//! environment, and the store built from them on reqwest.

use crate::clock::SystemClock;
use crate::transport::ReqwestTransport;
pub use lease_core::settings::{Credentials, LeaseSettings, SettingsError, StoreSettings};
use lease_core::wire::provider::AnyDialect;
use lease_core::wire::HttpStore;
use std::time::Duration;

/// The store type this adapter builds: any provider's dialect
/// (`LEASE_PROVIDER`) over reqwest.
pub type S3Store = HttpStore<AnyDialect, ReqwestTransport, SystemClock>;

/// The process environment as a settings lookup.
pub fn env(variable: &str) -> Option<String> {
    std::env::var(variable).ok()
}

/// The store: the provider's dialect, signed when there are credentials,
/// over reqwest with `request_timeout` per call.
pub fn store(
    settings: &StoreSettings,
    request_timeout: Duration,
) -> Result<S3Store, SettingsError> {
    let transport =
        ReqwestTransport::new(request_timeout.min(Duration::from_secs(5)), request_timeout)
            .map_err(|e| SettingsError::Invalid {
                variable: "LEASE_ENDPOINT",
                reason: e.message,
            })?;
    settings.http_store(transport, SystemClock::new())
}
