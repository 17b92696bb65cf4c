//! The singleton wrapper for `lambda_runtime`: one run per tick, never two
//! at once, even when a schedule fires twice or a run overlaps the next.
//!
//! [`Singleton::run_event`] is the core's [`Leases::run`](lease_core::Leases::run) on
//! reqwest and tokio. It takes the tick from the event (an EventBridge
//! scheduled event's `time`; see [`TickSource`]) and reads the lease once:
//! a tick that already ran to completion answers
//! [`RunOutcome::AlreadyRan`] from the lease record (the job does not run
//! again), a run under way elsewhere answers [`RunOutcome::Skipped`]
//! naming the holder and its expiry; both for the price of that one GET.
//! Otherwise it acquires the lease: the job runs with the fencing token
//! while the lease is renewed alongside it; if the lease is lost the job's
//! future is dropped and the invocation fails with
//! [`RunError::LeaseLost`]; when the job ends the lease is released,
//! and a job that succeeded is recorded as the tick's run in that release
//! (the same PUT). A failed job is not recorded, so Lambda's retry runs
//! the tick again. The invocation's deadline bounds the run: with less
//! time left than the lease's requests may need it does not start
//! ([`RunError::NoTime`]), and a job still running
//! [`release_reserve`](lease_core::client::release_reserve) before the deadline is stopped and
//! the lease released ([`RunError::Stopped`]; the tick is not
//! recorded, so Lambda's retry runs it), instead of the function being
//! killed holding the lease. The run is a `tracing` span `lease.singleton` with the
//! key, holder and tick; its events carry the token.
//!
//! ```no_run
//! use lambda_runtime::{service_fn, LambdaEvent};
//! use lease_lambda::singleton::{diagnostic, Singleton};
//!
//! # async fn main_() -> Result<(), lambda_runtime::Error> {
//! let singleton = &Singleton::from_env()?;
//! lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| async move {
//!     singleton
//!         .run_event(&event, |token| async move {
//!             // ... the job, passing `token` to whatever it writes ...
//!             Ok::<_, std::io::Error>(serde_json::json!({ "token": token }))
//!         })
//!         .await
//!         .map_err(diagnostic) // errorType: LeaseError, SettingsError, TickError, NoTime, Stopped, LeaseLost or JobFailed
//! }))
//! .await
//! # }
//! ```
//!
//! Settings: [`StoreSettings`] from the environment, plus `LEASE_KEY`
//! (required), `LEASE_TTL` (default 60 s), `LEASE_PROTOCOL` (default
//! `cas`; ticks need `cas` or `epochs`), `LEASE_TICK` ([`TickSource`]:
//! `auto`, `eventbridge`, `slot:NAME`, a JSON pointer, or `off`) and `LEASE_SCHEDULE`
//! (the rule's `rate(...)` or `cron(...)`, to report ticks that never ran:
//! [`Schedule`]) and `LEASE_DEADLINE` (`use`, the default, or `ignore`:
//! see [`Singleton::with_deadline`]). The holder name is
//! the function name and its log stream (one per execution environment).
//! The capability probe runs once per execution environment, at the first
//! invocation (`LEASE_PROBE=off` skips it); a store that fails it is
//! refused with an error naming the check.

use lambda_runtime::LambdaEvent;
use lease_core::client::Step;
pub use lease_core::schedule::{MissedTicks, Schedule};
use lease_core::settings::lease_key;
use lease_core::tick::slot_setting;
pub use lease_core::tick::{Tick, TickError};
use lease_core::{Event, LeaseConfig, Leases, Protocol, Run, Settings};
pub use lease_core::{RunError, RunOutcome};
use lease_native::clock::SystemClock;
use lease_native::os_entropy;
use lease_native::settings::{self, ReqwestStore, SettingsError, StoreSettings};
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};
use tracing::Instrument;

/// Where an invocation's tick comes from (`LEASE_TICK`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TickSource {
    /// `auto` (the default): an EventBridge scheduled event's `time`
    /// ([`Tick::eventbridge`]); any other event, or any event under the
    /// mutex protocol (which keeps no record of ticks), runs without one.
    Auto,
    /// `eventbridge`: every event must be an EventBridge scheduled event.
    EventBridge,
    /// A JSON pointer such as `/scheduled_time` (it starts with `/`): the
    /// tick is that value, with the payload's digest ([`Tick::from_payload`];
    /// for EventBridge Scheduler, put `<aws.scheduler.scheduled-time>` in
    /// the target's input).
    Pointer(String),
    /// `slot:NAME`: the slot of the rule's schedule (`LEASE_SCHEDULE`)
    /// that contains the event's `time`, named for the schedule
    /// ([`Tick::slot`]): the tick a Workers Cron Trigger names
    /// alike for the same slot, so that a job scheduled on several
    /// platforms against one key runs once per slot.
    Slot {
        /// The schedule's name, the same on every platform.
        name: String,
        /// The rule's schedule.
        schedule: Box<Schedule>,
    },
    /// `off`: no tick; duplicate deliveries are not recognised.
    Off,
}

impl TickSource {
    /// Parses `LEASE_TICK`'s value; `slot:NAME` needs the rule's
    /// `schedule` (`LEASE_SCHEDULE`).
    pub fn parse(value: &str, schedule: Option<&Schedule>) -> Result<TickSource, SettingsError> {
        match value.trim() {
            "" | "auto" => Ok(TickSource::Auto),
            "eventbridge" => Ok(TickSource::EventBridge),
            "off" => Ok(TickSource::Off),
            p if p.starts_with('/') => Ok(TickSource::Pointer(p.to_string())),
            other => {
                let Some(name) = slot_setting(other) else {
                    return Err(SettingsError::Invalid {
                        variable: "LEASE_TICK",
                        reason: format!(
                            "`{other}` is none of `auto`, `eventbridge`, `slot:NAME`, `off` or a JSON pointer (`/scheduled_time`)"
                        ),
                    });
                };
                let schedule = schedule.ok_or(SettingsError::Missing {
                    variable: "LEASE_SCHEDULE",
                    what: "rule's schedule (`cron(...)`), whose slots LEASE_TICK=slot:NAME names",
                })?;
                // The name is checked now, not at the first event.
                let name = name.map_err(|e| SettingsError::Invalid {
                    variable: "LEASE_TICK",
                    reason: e.to_string(),
                })?;
                Ok(TickSource::Slot {
                    name: name.to_string(),
                    schedule: Box::new(schedule.clone()),
                })
            }
        }
    }

    /// The tick of `event` (`None`: run without one).
    pub fn tick(&self, event: &Value) -> Result<Option<Tick>, TickError> {
        match self {
            TickSource::Auto if event["detail-type"] == "Scheduled Event" => {
                Tick::eventbridge(event).map(Some)
            }
            TickSource::Auto | TickSource::Off => Ok(None),
            TickSource::EventBridge => Tick::eventbridge(event).map(Some),
            TickSource::Pointer(p) => Tick::from_payload(event, p).map(Some),
            TickSource::Slot { name, schedule } => {
                Tick::eventbridge_slot(event, name, schedule).map(Some)
            }
        }
    }
}

/// A lease guarding one scheduled job (see the module docs): the core's
/// client ([`Leases::run`](lease_core::Leases::run)) for
/// one key, with the run traced. Kept for the execution environment's
/// life, it runs the probe once and keeps the claims earlier runs left.
#[derive(Debug)]
pub struct Singleton {
    /// On the environment's keys (a Lambda's role): no platform
    /// credential chain in the function (lease-native without
    /// `cloud-credentials`).
    leases: Leases<ReqwestStore, SystemClock>,
    cfg: LeaseConfig,
    ticks: TickSource,
    schedule: Option<Schedule>,
    /// Whether runs keep within the invocation's deadline.
    deadline: bool,
}

impl Singleton {
    /// A singleton for `cfg` on `store`; `probe`: check the store's
    /// conditional writes before the first run.
    pub fn new(
        cfg: LeaseConfig,
        store: ReqwestStore,
        probe: bool,
    ) -> Result<Singleton, SettingsError> {
        let leases = Leases::with_config(store, SystemClock::new(), cfg.clone(), probe, os_entropy)
            .map_err(|e| SettingsError::Invalid {
                variable: "LEASE_TTL",
                reason: e.to_string(),
            })?;
        Ok(Singleton {
            cfg: leases.config(&cfg.key),
            leases,
            ticks: TickSource::Auto,
            schedule: None,
            deadline: true,
        })
    }

    /// Whether a run keeps within the invocation's deadline (default
    /// yes; `LEASE_DEADLINE=ignore` turns it off, for a function whose
    /// timeout is shorter than the lease's requests may need and that
    /// accepts being killed holding the lease).
    pub fn with_deadline(mut self, keep: bool) -> Singleton {
        self.deadline = keep;
        self
    }

    /// The job runs on `schedule` (`LEASE_SCHEDULE`): a run reports the
    /// ticks that never ran since the newest completed one
    /// ([`RunOutcome::Ran`]'s `missed`, logged as a warning).
    pub fn with_schedule(mut self, schedule: Option<Schedule>) -> Singleton {
        self.schedule = schedule;
        self
    }

    /// Takes ticks from events as `ticks` says (the default: `Auto`).
    pub fn with_ticks(mut self, ticks: TickSource) -> Singleton {
        self.ticks = ticks;
        self
    }

    /// From the Lambda environment (see the module docs); errors name the
    /// variable to set.
    pub fn from_env() -> Result<Singleton, SettingsError> {
        let store_settings = StoreSettings::from_lookup(settings::env)?;
        let key = lease_key(settings::env)?;
        let var = |v| settings::env(v).filter(|s| !s.trim().is_empty());
        let holder = match (
            var("AWS_LAMBDA_FUNCTION_NAME"),
            var("AWS_LAMBDA_LOG_STREAM_NAME"),
        ) {
            (Some(name), Some(stream)) => format!("{name}/{stream}"),
            (Some(name), None) => format!("{name}/pid-{}", std::process::id()),
            _ => format!("lambda/pid-{}", std::process::id()),
        };
        // The holder is always the execution environment's own.
        let mut lease = Settings::from_lookup(settings::env, || holder.clone())?;
        lease.holder = holder;
        let cfg = lease.config(key);
        let store = settings::store(&store_settings, cfg.request_timeout)?;
        let schedule = match var("LEASE_SCHEDULE") {
            Some(text) => Some(Schedule::parse(&text).map_err(|e| SettingsError::Invalid {
                variable: "LEASE_SCHEDULE",
                reason: e.to_string(),
            })?),
            None => None,
        };
        let ticks = TickSource::parse(
            &settings::env("LEASE_TICK").unwrap_or_default(),
            schedule.as_ref(),
        )?;
        let deadline = match var("LEASE_DEADLINE").as_deref().map(str::trim) {
            None | Some("use") => true,
            Some("ignore") => false,
            Some(other) => {
                return Err(SettingsError::Invalid {
                    variable: "LEASE_DEADLINE",
                    reason: format!("{other:?} is not `use` or `ignore`"),
                })
            }
        };
        Ok(Singleton::new(cfg, store, lease.probe)?
            .with_ticks(ticks)
            .with_schedule(schedule)
            .with_deadline(deadline))
    }

    /// The lease settings.
    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    /// The client, for the job's own (fenced) writes.
    pub fn leases(&self) -> &Leases<ReqwestStore, SystemClock> {
        &self.leases
    }

    /// The store, for the job's own (fenced) writes.
    pub fn store(&self) -> &ReqwestStore {
        self.leases.store()
    }

    /// The clock the lease runs on.
    pub fn clock(&self) -> &SystemClock {
        self.leases.clock()
    }

    /// Runs `job` once for the tick of `event` (see the module docs): a
    /// duplicate delivery of a tick that completed is answered from the
    /// lease record ([`RunOutcome::AlreadyRan`], one GET) and the job
    /// does not run again; a run that fails is not recorded, so Lambda's
    /// retry runs the tick again. An event without a tick (see
    /// [`TickSource`]) is a plain run.
    pub async fn run_event<F, Fut, T, E>(
        &self,
        event: &LambdaEvent<Value>,
        job: F,
    ) -> Result<RunOutcome<T>, RunError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: fmt::Display,
        E: fmt::Display,
    {
        let span = self.span();
        // The mutex keeps no record of completed ticks: `auto` runs plainly
        // there (a tick asked for explicitly is refused by the core).
        let tick = match (&self.ticks, self.cfg.protocol) {
            (TickSource::Auto, Protocol::Mutex) => Ok(None),
            (ticks, _) => ticks.tick(&event.payload).map_err(RunError::Tick),
        };
        let ticked = matches!(tick, Ok(Some(_)));
        let out = match tick {
            Ok(tick) => {
                let run = self.run_for(event, tick.as_ref(), &span);
                self.leases
                    .run(&self.cfg.key, run, job)
                    .instrument(span.clone())
                    .await
            }
            Err(e) => Err(e),
        };
        log_outcome(&span, &out, ticked);
        out
    }

    /// The run for `event`: for `tick` if it has one, on the schedule, and
    /// within the invocation's deadline unless deadlines are ignored; the
    /// tick and the time left are recorded in `span`.
    fn run_for<'a, T: fmt::Display>(
        &'a self,
        event: &LambdaEvent<Value>,
        tick: Option<&'a Tick>,
        span: &tracing::Span,
    ) -> Run<'a, T> {
        if let Some(tick) = tick {
            span.record("tick", tick.id());
        }
        let mut run = Run::new().observe(observe as fn(Step<'_>));
        if let Some(tick) = tick {
            run = run.tick(tick);
        }
        if let Some(schedule) = &self.schedule {
            run = run.schedule(schedule);
        }
        let deadline = self.deadline.then_some(event.context.deadline());
        match deadline.map(|d| remaining(d, SystemTime::now())) {
            None => {}
            Some(Some(left)) => {
                span.record("remaining_ms", left.as_millis() as u64);
                run = run.within(left);
            }
            Some(None) => span.in_scope(|| {
                tracing::warn!(
                    deadline_ms = event.context.deadline,
                    "the invocation's deadline has passed before it started: \
                     not a real deadline (an emulator's), so the run has no time limit"
                )
            }),
        }
        run
    }

    fn span(&self) -> tracing::Span {
        let cfg = &self.cfg;
        tracing::info_span!("lease.singleton", key = %cfg.key, holder = %cfg.holder, tick = tracing::field::Empty, remaining_ms = tracing::field::Empty)
    }
}

/// Logs each step of a run.
fn observe(step: Step<'_>) {
    match step {
        Step::Acquired { lease, .. } => tracing::info!(token = lease.token, "acquired"),
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
        Step::Hold(_) | Step::Released(_) => {}
        Step::ReleaseFailed(e) => {
            tracing::warn!(error = %e, "release failed: the lease expires on its own")
        }
    }
}

/// Logs how a run ended: a tick answered from the record, ticks of the
/// schedule that never ran, a tick's completion not recorded (`ticked`:
/// the run was for a tick), a failure.
fn log_outcome<T, E: fmt::Display>(
    span: &tracing::Span,
    out: &Result<RunOutcome<T>, RunError<E>>,
    ticked: bool,
) {
    match out {
        Ok(RunOutcome::AlreadyRan { token, .. }) => span
            .in_scope(|| tracing::info!(token, "tick already ran: answered from the lease record")),
        Ok(RunOutcome::Ran {
            missed: Some(missed),
            ..
        }) => span.in_scope(|| {
            tracing::warn!(
                missed = missed.count,
                since_ms = missed.since_ms,
                first_ms = ?missed.first_ms,
                "ticks of the schedule never ran since the last completed one"
            )
        }),
        _ => {}
    }
    if let (
        Ok(RunOutcome::Ran {
            recorded: false, ..
        }),
        true,
    ) = (out, ticked)
    {
        span.in_scope(|| {
            tracing::warn!("the tick's completion was not recorded: a duplicate may run it again")
        })
    }
    failed(span, out);
}

/// Logs a failed run.
fn failed<O, E: fmt::Display>(span: &tracing::Span, out: &Result<O, RunError<E>>) {
    if let Err(e) = out {
        span.in_scope(|| tracing::error!(kind = e.kind(), error = %e, "run failed"));
    }
}

/// The time an invocation has left at `now`; `None` for a deadline
/// already past when it starts, which Lambda never gives (the runtime
/// would have stopped the function), but emulators do (a fixed value).
fn remaining(deadline: SystemTime, now: SystemTime) -> Option<Duration> {
    deadline.duration_since(now).ok()
}

/// The Lambda error report for a failed run: its `errorType` is the
/// failure's class ([`RunError::kind`]).
pub fn diagnostic<E: fmt::Display>(e: RunError<E>) -> lambda_runtime::Diagnostic {
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
        let skipped: RunOutcome<()> = RunOutcome::Skipped {
            holder: "f/stream".into(),
            token: 3,
            expires_at_ms: 1_790_000_000_000,
        };
        assert_eq!(
            serde_json::to_value(&skipped).unwrap(),
            serde_json::json!({"outcome": "skipped", "holder": "f/stream", "token": 3, "expires_at_ms": 1_790_000_000_000u64})
        );
        let ran = RunOutcome::Ran {
            token: 4,
            output: "done",
            recorded: true,
            missed: None,
            seat: None,
        };
        assert_eq!(
            serde_json::to_value(&ran).unwrap(),
            serde_json::json!({"outcome": "ran", "token": 4, "output": "done", "recorded": true, "missed": null})
        );
        // A pool's run says its seat; another run has no `seat` at all.
        let ran = RunOutcome::Ran {
            token: 4,
            output: "done",
            recorded: false,
            missed: None,
            seat: Some(2),
        };
        assert_eq!(
            serde_json::to_value(&ran).unwrap(),
            serde_json::json!({"outcome": "ran", "token": 4, "output": "done", "recorded": false, "missed": null, "seat": 2})
        );
    }

    #[test]
    fn tick_outcomes_serialise_for_the_invoker() {
        let again: RunOutcome<()> = RunOutcome::AlreadyRan {
            tick: "eventbridge:2026-11-22T03:00:00Z".into(),
            token: 4,
            finished_at_ms: 1_790_000_000_000,
            result: Some("done".into()),
        };
        assert_eq!(
            serde_json::to_value(&again).unwrap(),
            serde_json::json!({"outcome": "already_ran", "tick": "eventbridge:2026-11-22T03:00:00Z", "token": 4, "finished_at_ms": 1_790_000_000_000u64, "result": "done"})
        );
    }

    #[test]
    fn ticks_come_from_the_event_as_lease_tick_says() {
        let scheduled =
            serde_json::json!({"detail-type": "Scheduled Event", "time": "2026-11-22T03:00:00Z"});
        let other = serde_json::json!({"job": "x", "at": "2026-11-22"});
        let auto = TickSource::parse("", None).unwrap();
        assert_eq!(
            auto.tick(&scheduled).unwrap().unwrap().id(),
            "eventbridge:2026-11-22T03:00:00Z"
        );
        assert_eq!(auto.tick(&other).unwrap(), None);
        assert!(TickSource::parse("eventbridge", None)
            .unwrap()
            .tick(&other)
            .is_err());
        let pointer = TickSource::parse("/at", None).unwrap();
        assert_eq!(pointer.tick(&other).unwrap().unwrap().id(), "2026-11-22");
        assert!(pointer.tick(&scheduled).is_err());
        assert_eq!(
            TickSource::parse("off", None)
                .unwrap()
                .tick(&scheduled)
                .unwrap(),
            None
        );
        let e = TickSource::parse("time", None).unwrap_err().to_string();
        assert!(
            e.contains("LEASE_TICK") && e.contains("JSON pointer"),
            "{e}"
        );
    }

    #[test]
    fn a_slot_tick_is_the_rules_slot_by_name() {
        let rule = Schedule::parse("cron(0 3 * * ? *)").unwrap();
        let slot = TickSource::parse("slot:nightly", Some(&rule)).unwrap();
        // EventBridge's `time` is the slot's start; a late one is the same slot.
        for time in ["2026-11-22T03:00:00Z", "2026-11-22T03:00:59Z"] {
            let event = serde_json::json!({"detail-type": "Scheduled Event", "time": time});
            assert_eq!(
                slot.tick(&event).unwrap().unwrap().id(),
                "slot:nightly@2026-11-22T03:00:00Z"
            );
        }
        assert!(slot.tick(&serde_json::json!({"time": "22 Nov"})).is_err());
        let e = TickSource::parse("slot:nightly", None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("LEASE_SCHEDULE is not set"), "{e}");
        let e = TickSource::parse("slot:night ly", Some(&rule))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("LEASE_TICK is invalid: schedule name"), "{e}");
    }

    #[test]
    fn failures_report_their_class() {
        let d = diagnostic(RunError::<String>::Job("disk full".into()));
        assert_eq!(
            (d.error_type.as_str(), d.error_message.as_str()),
            ("JobFailed", "disk full")
        );
    }
}
