//! The singleton wrapper for `lambda_runtime`: one run per tick, never two
//! at once, even when a schedule fires twice or a run overlaps the next.
//!
//! [`Singleton::run`] is the core's [`lease_core::client::singleton`] on reqwest and
//! tokio: it acquires the lease before the job. Busy: the job does not run
//! and the outcome is [`SingletonOutcome::Skipped`], naming the holder and
//! its expiry, for the price of one GET. Acquired: the job runs with the
//! fencing token while the lease is renewed alongside it; if the lease is
//! lost the job's future is dropped and the invocation fails with
//! [`SingletonError::LeaseLost`]; when the job ends (success or error) the
//! lease is released. The run is a `tracing` span `lease.singleton` with
//! the key and holder; its events carry the token.
//!
//! ```no_run
//! use lambda_runtime::{service_fn, LambdaEvent};
//! use lease_lambda::singleton::{diagnostic, Singleton};
//!
//! # async fn main_() -> Result<(), lambda_runtime::Error> {
//! let singleton = &Singleton::from_env()?;
//! lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| async move {
//!     singleton
//!         .run(|token| async move {
//!             // ... the job, passing `token` to whatever it writes ...
//!             Ok::<_, std::io::Error>(serde_json::json!({ "token": token, "event": event.payload }))
//!         })
//!         .await
//!         .map_err(diagnostic) // errorType: LeaseError, SettingsError, LeaseLost or JobFailed
//! }))
//! .await
//! # }
//! ```
//!
//! Settings: [`StoreSettings`] from the environment, plus `LEASE_KEY`
//! (required), `LEASE_TTL` (default 60 s) and `LEASE_PROTOCOL` (default
//! `cas`). The holder name is the function name and its log stream (one
//! per execution environment). The capability probe runs once per
//! execution environment, at the first invocation (`LEASE_PROBE=off` skips
//! it); a store that fails it is refused with an error naming the check.

use lease_core::client::singleton::Step;
pub use lease_core::client::singleton::{SingletonError, SingletonOutcome};
use lease_core::config::LeaseConfig;
use lease_core::protocol::machine::Event;
use lease_native::clock::SystemClock;
use lease_native::os_entropy;
use lease_native::settings::{self, LeaseSettings, S3Store, SettingsError, StoreSettings};
use lease_native::Leases;
use std::fmt;
use std::future::Future;
use tracing::Instrument;

/// A lease guarding one scheduled job (see the module docs): the core's
/// client ([`Leases::run_once`](lease_core::client::Leases::run_once)) for
/// one key, with the run traced. Kept for the execution environment's
/// life, it runs the probe once and keeps the claims earlier runs left.
#[derive(Debug)]
pub struct Singleton {
    leases: Leases,
    cfg: LeaseConfig,
}

impl Singleton {
    /// A singleton for `cfg` on `store`; `probe`: check the store's
    /// conditional writes before the first run.
    pub fn new(cfg: LeaseConfig, store: S3Store, probe: bool) -> Result<Singleton, SettingsError> {
        let leases = Leases::with_config(store, SystemClock::new(), cfg.clone(), probe, os_entropy)
            .map_err(|e| SettingsError::Invalid {
                variable: "LEASE_TTL",
                reason: e.to_string(),
            })?;
        Ok(Singleton {
            cfg: leases.config(&cfg.key),
            leases,
        })
    }

    /// From the Lambda environment (see the module docs); errors name the
    /// variable to set.
    pub fn from_env() -> Result<Singleton, SettingsError> {
        let store_settings = StoreSettings::from_lookup(settings::env)?;
        let lease = LeaseSettings::from_lookup(settings::env)?;
        let var = |v| settings::env(v).filter(|s| !s.trim().is_empty());
        let holder = match (
            var("AWS_LAMBDA_FUNCTION_NAME"),
            var("AWS_LAMBDA_LOG_STREAM_NAME"),
        ) {
            (Some(name), Some(stream)) => format!("{name}/{stream}"),
            (Some(name), None) => format!("{name}/pid-{}", std::process::id()),
            _ => format!("lambda/pid-{}", std::process::id()),
        };
        let cfg = lease.config(holder)?;
        let store = settings::store(&store_settings, cfg.request_timeout)?;
        Singleton::new(cfg, store, lease.probe)
    }

    /// The lease settings.
    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    /// The client, for the job's own (fenced) writes.
    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// The store, for the job's own (fenced) writes.
    pub fn store(&self) -> &S3Store {
        self.leases.store()
    }

    /// The clock the lease runs on.
    pub fn clock(&self) -> &SystemClock {
        self.leases.clock()
    }

    /// Runs `job` with the fencing token if this invocation gets the lease
    /// (see the module docs).
    pub async fn run<F, Fut, T, E>(&self, job: F) -> Result<SingletonOutcome<T>, SingletonError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: fmt::Display,
    {
        let cfg = &self.cfg;
        let span = tracing::info_span!("lease.singleton", key = %cfg.key, holder = %cfg.holder);
        let observe = |step: Step<'_>| match step {
            Step::Acquired { token } => tracing::info!(token, "acquired"),
            Step::Skipped(busy) => {
                tracing::info!(holder = %busy.holder, token = busy.token, "busy: skipped")
            }
            Step::Hold(Event::Renewed { token, .. }) => tracing::debug!(token, "renewed"),
            Step::Hold(Event::AtRisk { token, .. }) => {
                tracing::warn!(token, "renewal late: the lease is at risk")
            }
            Step::Hold(Event::Lost { token, reason }) => {
                tracing::error!(token, %reason, "lease lost")
            }
            Step::Hold(Event::Error(e)) => tracing::warn!(error = %e, "renewal failed, retrying"),
            Step::Hold(_) => {}
            Step::ReleaseFailed(e) => {
                tracing::warn!(error = %e, "release failed: the lease expires on its own")
            }
        };
        let out = self
            .leases
            .run_once_observed(&cfg.key, job, observe)
            .instrument(span.clone())
            .await;
        if let Err(e) = &out {
            span.in_scope(|| tracing::error!(kind = e.kind(), error = %e, "run failed"));
        }
        out
    }
}

/// The Lambda error report for a failed run: its `errorType` is the
/// failure's class ([`SingletonError::kind`]).
pub fn diagnostic<E: fmt::Display>(e: SingletonError<E>) -> lambda_runtime::Diagnostic {
    lambda_runtime::Diagnostic {
        error_type: e.kind().into(),
        error_message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_serialise_for_the_invoker() {
        let skipped: SingletonOutcome<()> = SingletonOutcome::Skipped {
            holder: "f/stream".into(),
            token: 3,
            expires_at_ms: 1_790_000_000_000,
        };
        assert_eq!(
            serde_json::to_value(&skipped).unwrap(),
            serde_json::json!({"outcome": "skipped", "holder": "f/stream", "token": 3, "expires_at_ms": 1_790_000_000_000u64})
        );
        let ran = SingletonOutcome::Ran {
            token: 4,
            output: "done",
        };
        assert_eq!(
            serde_json::to_value(&ran).unwrap(),
            serde_json::json!({"outcome": "ran", "token": 4, "output": "done"})
        );
    }

    #[test]
    fn failures_report_their_class() {
        let d = diagnostic(SingletonError::<String>::Job("disk full".into()));
        assert_eq!(
            (d.error_type.as_str(), d.error_message.as_str()),
            ("JobFailed", "disk full")
        );
    }
}
