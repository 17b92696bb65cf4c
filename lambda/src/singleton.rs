//! The singleton wrapper for `lambda_runtime`: one run per tick, never two
//! at once, even when a schedule fires twice or a run overlaps the next.
//!
//! [`Singleton::run`] acquires the lease before the job. Busy: the job does
//! not run and the outcome is [`SingletonOutcome::Skipped`], naming the
//! holder and its expiry, for the price of one GET. Acquired: the job runs
//! with the fencing token while the lease is renewed in the background; if
//! the lease is lost the job's future is dropped and the invocation fails
//! with [`SingletonError::LeaseLost`]; when the job ends (success or
//! error) the lease is released. Each step is a `tracing` span
//! (`lease.acquire`, `lease.hold`) with the key, token and holder.
//!
//! ```no_run
//! use lambda_runtime::{service_fn, LambdaEvent};
//! use lease_lambda::singleton::Singleton;
//!
//! # async fn main_() -> Result<(), lambda_runtime::Error> {
//! let singleton = Singleton::from_env()?;
//! lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| {
//!     singleton.run(move |token| async move {
//!         // ... the job, passing `token` to whatever it writes ...
//!         Ok::<_, std::io::Error>(serde_json::json!({ "token": token, "event": event.payload }))
//!     })
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

use crate::clock::SystemClock;
use crate::hold::{hold_while, Held};
use crate::os_entropy;
use crate::settings::{S3Store, SettingsError, StoreSettings};
use lease_core::config::{LeaseConfig, Protocol};
use lease_core::drive::drive;
use lease_core::lease::LeaseOp;
use lease_core::machine::{Event, LeaseError, LostReason, OpOutcome};
use lease_core::probe::Probe;
use serde::Serialize;
use std::fmt;
use std::future::Future;
use std::time::Duration;
use tracing::Instrument;

/// What an invocation did.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SingletonOutcome<T> {
    /// This invocation held the lease and ran the job.
    Ran {
        /// The fencing token the job ran with.
        token: u64,
        /// The job's output.
        output: T,
    },
    /// Another run holds the lease: the job did not run.
    Skipped {
        /// Who holds it.
        holder: String,
        /// Their token.
        token: u64,
        /// When their lease expires unless renewed (Unix ms, store clock).
        expires_at_ms: u64,
    },
}

/// Why an invocation failed.
#[derive(Debug)]
pub enum SingletonError<E> {
    /// The lease could not be acquired or checked (credentials, bucket,
    /// an unsafe store, settings): nothing ran.
    Lease(LeaseError),
    /// The settings are missing or invalid: nothing ran.
    Settings(SettingsError),
    /// The lease was lost while the job ran; the job was stopped.
    LeaseLost {
        /// The token that was lost.
        token: u64,
        /// Why.
        reason: LostReason,
    },
    /// The job itself failed (the lease was released).
    Job(E),
}

impl<E: fmt::Display> fmt::Display for SingletonError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SingletonError::Lease(e) => write!(f, "lease: {e}"),
            SingletonError::Settings(e) => write!(f, "settings: {e}"),
            SingletonError::LeaseLost { token, reason } => {
                write!(f, "the lease (token {token}) was lost while the job ran ({reason:?}); the job was stopped")
            }
            SingletonError::Job(e) => write!(f, "{e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for SingletonError<E> {}

impl<E: fmt::Display> From<SingletonError<E>> for lambda_runtime::Diagnostic {
    fn from(e: SingletonError<E>) -> Self {
        let error_type = match &e {
            SingletonError::Lease(_) => "LeaseError",
            SingletonError::Settings(_) => "SettingsError",
            SingletonError::LeaseLost { .. } => "LeaseLost",
            SingletonError::Job(_) => "JobFailed",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.into(),
            error_message: e.to_string(),
        }
    }
}

/// A lease guarding one scheduled job (see the module docs).
pub struct Singleton {
    cfg: LeaseConfig,
    store: S3Store,
    clock: SystemClock,
    probe: tokio::sync::OnceCell<()>,
    skip_probe: bool,
}

impl fmt::Debug for Singleton {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Singleton")
            .field("cfg", &self.cfg)
            .field("skip_probe", &self.skip_probe)
            .finish_non_exhaustive()
    }
}

fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

impl Singleton {
    /// A singleton for `cfg` on `store`.
    pub fn new(cfg: LeaseConfig, store: S3Store) -> Singleton {
        Singleton {
            cfg,
            store,
            clock: SystemClock::new(),
            probe: tokio::sync::OnceCell::new(),
            skip_probe: false,
        }
    }

    /// Skips the capability probe (a store already known to be safe).
    pub fn without_probe(mut self) -> Singleton {
        self.skip_probe = true;
        self
    }

    /// From the Lambda environment (see the module docs); errors name the
    /// variable to set.
    pub fn from_env() -> Result<Singleton, SettingsError> {
        let settings = StoreSettings::from_env()?;
        let key = env("LEASE_KEY").ok_or(SettingsError::Missing {
            variable: "LEASE_KEY",
            what: "object key of the lease",
        })?;
        let ttl = match env("LEASE_TTL") {
            None => Duration::from_secs(60),
            Some(v) => parse_duration(&v).ok_or_else(|| SettingsError::Invalid {
                variable: "LEASE_TTL",
                reason: format!("`{v}` is not a duration like 60s, 5m or 1500ms"),
            })?,
        };
        let holder = match (
            env("AWS_LAMBDA_FUNCTION_NAME"),
            env("AWS_LAMBDA_LOG_STREAM_NAME"),
        ) {
            (Some(name), Some(stream)) => format!("{name}/{stream}"),
            (Some(name), None) => format!("{name}/pid-{}", std::process::id()),
            _ => format!("lambda/pid-{}", std::process::id()),
        };
        let mut cfg = LeaseConfig::new(key, holder, ttl);
        if let Some(p) = env("LEASE_PROTOCOL") {
            cfg.protocol = Protocol::parse(&p).ok_or_else(|| SettingsError::Invalid {
                variable: "LEASE_PROTOCOL",
                reason: format!("`{p}` is not one of cas, epochs, mutex"),
            })?;
        }
        cfg.validate().map_err(|e| SettingsError::Invalid {
            variable: "LEASE_TTL",
            reason: e.to_string(),
        })?;
        let skip_probe = match env("LEASE_PROBE").as_deref() {
            None | Some("once") => false,
            Some("off") => true,
            Some(other) => {
                return Err(SettingsError::Invalid {
                    variable: "LEASE_PROBE",
                    reason: format!("`{other}` is neither `once` nor `off`"),
                })
            }
        };
        let store = settings.store(cfg.request_timeout)?;
        let singleton = Singleton::new(cfg, store);
        Ok(if skip_probe {
            singleton.without_probe()
        } else {
            singleton
        })
    }

    /// The lease settings.
    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    /// The store, for the job's own (fenced) writes.
    pub fn store(&self) -> &S3Store {
        &self.store
    }

    /// The clock the lease runs on.
    pub fn clock(&self) -> &SystemClock {
        &self.clock
    }

    async fn check_store(&self) -> Result<(), LeaseError> {
        if self.skip_probe {
            return Ok(());
        }
        self.probe
            .get_or_try_init(|| async {
                let mut probe = Probe::new(self.cfg.clone(), os_entropy());
                let report = drive(&mut probe, &self.store, &self.clock, |_| {}).await?;
                report.supports(self.cfg.protocol)
            })
            .await
            .map(|_| ())
    }

    /// Runs `job` with the fencing token if this invocation gets the lease
    /// (see the module docs).
    pub async fn run<F, Fut, T, E>(&self, job: F) -> Result<SingletonOutcome<T>, SingletonError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: fmt::Display,
    {
        let span =
            tracing::info_span!("lease.acquire", key = %self.cfg.key, holder = %self.cfg.holder);
        let acquired = async {
            self.check_store().await?;
            let mut op = LeaseOp::acquire(self.cfg.clone(), os_entropy());
            drive(&mut op, &self.store, &self.clock, |_| {}).await
        }
        .instrument(span.clone())
        .await;
        let lease = match acquired.map_err(SingletonError::Lease)? {
            OpOutcome::Acquired(lease) => lease,
            OpOutcome::Busy(busy) => {
                span.in_scope(
                    || tracing::info!(holder = %busy.holder, token = busy.token, "busy: skipped"),
                );
                return Ok(SingletonOutcome::Skipped {
                    holder: busy.holder,
                    token: busy.token,
                    expires_at_ms: busy.expires_at.0,
                });
            }
            other => {
                return Err(SingletonError::Lease(LeaseError::Unexpected {
                    reply: format!("{other:?}"),
                }))
            }
        };
        let token = lease.token;
        let span = tracing::info_span!("lease.hold", key = %self.cfg.key, token);
        span.in_scope(|| tracing::info!("acquired"));
        let on_event = |event: Event| match event {
            Event::Renewed { token, .. } => tracing::debug!(token, "renewed"),
            Event::AtRisk { token, .. } => {
                tracing::warn!(token, "renewal late: the lease is at risk")
            }
            Event::Lost { token, reason } => tracing::error!(token, ?reason, "lease lost"),
            Event::Error(e) => tracing::warn!(error = %e, "renewal failed, retrying"),
            _ => {}
        };
        let held = hold_while(
            &self.cfg,
            &self.store,
            &self.clock,
            lease,
            job(token),
            on_event,
        )
        .instrument(span.clone())
        .await;
        match held {
            Held::Finished { output, released } => {
                if let Some(Err(e)) = released {
                    span.in_scope(|| tracing::warn!(error = %e, "release failed: the lease expires on its own"));
                }
                match output {
                    Ok(output) => Ok(SingletonOutcome::Ran { token, output }),
                    Err(e) => Err(SingletonError::Job(e)),
                }
            }
            Held::Lost { token, reason } => Err(SingletonError::LeaseLost { token, reason }),
        }
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
    fn durations() {
        assert_eq!(parse_duration("60s"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("soon"), None);
    }
}
