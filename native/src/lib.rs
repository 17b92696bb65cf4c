#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! The native adapter of `lease-core`, for a service on ECS, Kubernetes or
//! a VM (and the base of the Lambda wrapper and the `lease` CLI): a
//! [`reqwest`] transport with no retries and set timeouts ([`transport`]),
//! the process clocks on tokio ([`clock`]), settings from the environment
//! ([`settings`]), and the core's [`Leases`](lease_core::Leases)
//! client on them.
//!
//! Leader election in a service, against the bucket the environment names
//! (`LEASE_BUCKET`, `AWS_REGION`; see [`lease_core::settings`]), signed
//! with the platform's credentials (the AWS default chain: a profile, ECS
//! container credentials, instance metadata...; Google's or Azure's for
//! their stores), refreshed before they expire ([`credentials`], feature
//! `cloud-credentials`, on by default):
//!
//! ```no_run
//! # async fn work(_token: u64) {}
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let leases = lease_native::from_env()?;
//!     let leader = lease_native::lead(&leases, "locks/scheduler");
//!     loop {
//!         let token = leader.until_leader().await?; // the fencing token
//!         tokio::select! {
//!             _ = leader.lost() => eprintln!("lost the lease: work stopped"),
//!             _ = work(token) => {}
//!         }
//!     }
//! }
//! ```

pub mod clock;
pub mod credentials;
#[cfg(feature = "ops")]
pub mod ops;
#[cfg(feature = "platform")]
pub mod platform;
pub mod settings;
pub mod transport;

use clock::SystemClock;
use lease_core::{Entropy, Leadership};
use settings::{AnyStore, SettingsError};
use std::time::Duration;

/// The client on the native store (keys, or the platform's credentials)
/// and clock.
pub type Leases = lease_core::Leases<AnyStore, SystemClock>;

/// A seed for [`Entropy`] from the operating system.
pub fn os_entropy() -> Entropy {
    let mut seed = [0u8; 16];
    // Without OS randomness, fall back on the time and pid: ids must only
    // be unlikely to collide, not secret.
    if getrandom::fill(&mut seed).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        seed = (now ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    Entropy::from_seed(u128::from_le_bytes(seed))
}

/// A holder name unique to this process: `$HOSTNAME` (a pod's name on
/// Kubernetes), the pid and a random suffix.
pub fn default_holder() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| "process".into());
    let suffix = os_entropy().next_u64() as u32;
    format!("{}-{}-{suffix:08x}", host.trim(), std::process::id())
}

/// A client from the process environment: the store from
/// [`settings::from_env`] (with no key set, the platform's credentials),
/// the leases' settings from `LEASE_TTL`, `LEASE_PROTOCOL`, `LEASE_PROBE`
/// and `LEASE_HOLDER` (else [`default_holder`]). Errors name the variable
/// to set.
pub fn from_env() -> Result<Leases, SettingsError> {
    let store_settings = settings::from_env()?;
    let client = lease_core::Settings::from_lookup(settings::env, default_holder)?;
    let store = settings::any_store(&store_settings, request_timeout())?;
    Leases::new(store, SystemClock::new(), client, os_entropy).map_err(|e| SettingsError::Invalid {
        variable: "LEASE_TTL",
        reason: e.to_string(),
    })
}

/// The per-call timeout of [`from_env`]'s store: the core's default
/// `request_timeout`.
fn request_timeout() -> Duration {
    lease_core::LeaseConfig::new("k", "h", lease_core::DEFAULT_TTL).request_timeout
}

/// Campaigns for the lease at `key` on a tokio task (see
/// [`lease_core::Leadership`]) and returns the handle. Call it within a
/// tokio runtime (any flavour). The campaign runs until
/// [`Leadership::resign`] or an error no retry can fix;
/// [`Leadership::finished`] says which.
pub fn lead(leases: &Leases, key: &str) -> Leadership<SystemClock> {
    // With feature `ops`, every event is recorded (src/ops.rs).
    #[cfg(feature = "ops")]
    let (leadership, campaign) = {
        let (name, clock) = (key.to_string(), *leases.clock());
        leases.lead(lease_core::Lead::new(key).on_event(move |event| {
            use lease_core::Clock;
            ops::record_event(&name, event, clock.now().mono)
        }))
    };
    #[cfg(not(feature = "ops"))]
    let (leadership, campaign) = leases.lead(lease_core::Lead::new(key));
    tokio::spawn(campaign);
    leadership
}
