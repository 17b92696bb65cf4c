//! A lease configured from the Worker's environment, and what a Worker
//! does with it: guard a cron job ([`WorkerLease::run`]), report the lease
//! ([`WorkerLease::status`]), acquire and release it by hand.

use crate::clock::WorkerClock;
use crate::settings::{self, SettingsError, WorkerStore};
use lease_core::client::{seat_key, Step, Take};
use lease_core::protocol::status_json;
use lease_core::schedule::Schedule;
use lease_core::settings::lease_key;
use lease_core::tick::{slot_setting, Tick, TickError};
use lease_core::{
    AcquireOutcome, ByEtagError, Claim, Clock, Entropy, Event, LeaseConfig, LeaseError, Leases,
    Mono, Observation, Protocol, ReleaseOutcome, Run, RunError, RunOutcome, Settings, UnixMillis,
};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use worker::{console_error, console_log, Env};

/// Entropy for nonces, sessions and holder names, seeded from the
/// runtime's `crypto.getRandomValues` (the operating system's randomness,
/// as the Workers runtime exposes it; never a fixed seed).
pub fn entropy() -> Entropy {
    use worker::js_sys::{global, Function, Reflect, Uint8Array};
    use worker::wasm_bindgen::{JsCast, JsValue};
    let bytes = Uint8Array::new_with_length(16);
    let filled = Reflect::get(&global(), &JsValue::from_str("crypto"))
        .and_then(|crypto| {
            let fill: Function =
                Reflect::get(&crypto, &JsValue::from_str("getRandomValues"))?.dyn_into()?;
            fill.call1(&crypto, &bytes)
        })
        .is_ok();
    // Part of every Workers runtime: without it no id here could be trusted.
    assert!(filled, "crypto.getRandomValues is not available");
    let mut seed = [0u8; 16];
    bytes.copy_to(&mut seed);
    Entropy::from_seed(u128::from_le_bytes(seed))
}

thread_local! {
    /// Stores (and protocols) that passed the probe in this isolate: the
    /// probe runs once per isolate, not once per tick.
    static PROBED: RefCell<BTreeSet<String>> = const { RefCell::new(BTreeSet::new()) };
    /// Per store and key, records of ours that earlier runs in this
    /// isolate may have left live ([`Claim`]): a run takes them over
    /// instead of skipping its tick as busy behind an earlier run.
    static CLAIMS: RefCell<BTreeMap<String, Vec<Claim>>> = const { RefCell::new(BTreeMap::new()) };
}

/// A lease on the store the environment names (see [`settings`]): the
/// core's client ([`Leases`]) for one key, with what a Worker keeps
/// between requests in its isolate.
#[derive(Debug)]
pub struct WorkerLease {
    leases: Leases<WorkerStore, WorkerClock>,
    cfg: LeaseConfig,
    probe_id: String,
    /// When this lease was made (the handler's start, as `from_env` is
    /// called there).
    started: Mono,
    /// The wall-clock time a run may take from `started`.
    time_limit: Option<Duration>,
    /// `LEASE_TICK=slot:NAME`: a Cron Trigger's tick is the slot of its
    /// cron named NAME ([`Tick::slot`]), not `cron:<expr>@<time>`.
    slot: Option<String>,
}

/// A job, boxed: its future, given the fencing token.
type BoxedJob<'j, T, E> =
    Box<dyn FnOnce(u64) -> Pin<Box<dyn Future<Output = Result<T, E>> + 'j>> + 'j>;

/// A Cron Trigger's wall-clock limit: the default `LEASE_TIME_LIMIT`.
pub const CRON_TIME_LIMIT: Duration = Duration::from_secs(15 * 60);

/// An answer for an HTTP caller: a status code, a JSON body and any extra
/// headers (e.g. `WWW-Authenticate` on a 401).
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// JSON body.
    pub body: Value,
    /// Headers besides `Content-Type: application/json`.
    pub headers: Vec<(String, String)>,
}

impl Reply {
    /// `status` with the JSON `body`.
    pub fn new(status: u16, body: Value) -> Self {
        Reply {
            status,
            body,
            headers: Vec::new(),
        }
    }

    /// The same reply with one more header.
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// The Workers response: the JSON body, the status, the headers.
    pub fn into_response(self) -> worker::Result<worker::Response> {
        let mut response = worker::Response::from_json(&self.body)?.with_status(self.status);
        for (name, value) in &self.headers {
            response.headers_mut().set(name, value)?;
        }
        Ok(response)
    }

    /// A settings error: 500, naming the setting (never a value).
    pub fn settings(e: &SettingsError) -> Self {
        Reply::new(500, json!({"error": "settings", "message": e.to_string()}))
    }

    fn lease(e: &LeaseError) -> Self {
        Reply::new(502, json!({"error": "lease", "message": e.to_string()}))
    }
}

/// The lease as anyone may see it (`GET /lease` without the admin secret,
/// see [`crate::auth`]): whether it is free, and if not until when. No
/// holder, session, token or etag: nothing that helps act on the lease.
pub fn public_status_json(seen: Option<&Observation>) -> Value {
    match seen {
        Some(seen) if !seen.free => json!({
            "free": false,
            "expires_at_ms": seen.record.expires_at.0,
            "expires": seen.record.expires_at.to_http_date(),
        }),
        _ => json!({"free": true}),
    }
}

impl WorkerLease {
    /// From the Worker's vars and secrets. The holder is `LEASE_HOLDER`
    /// (default `worker`) and a random suffix: each run is its own holder.
    pub fn from_env(env: &Env) -> Result<WorkerLease, SettingsError> {
        let get = settings::lookup(env);
        let key = lease_key(&get)?;
        let prefix = get("LEASE_HOLDER").unwrap_or_else(|| "worker".into());
        let holder = format!("{prefix}/{:08x}", entropy().next_u64() as u32);
        // Each run is its own holder: `LEASE_HOLDER` is only the prefix.
        let mut lease = Settings::from_lookup(&get, || holder.clone())?;
        lease.holder = holder;
        let time_limit =
            match get("LEASE_TIME_LIMIT").as_deref().map(str::trim) {
                None | Some("") => Some(CRON_TIME_LIMIT),
                Some("off") => None,
                Some(v) => Some(lease_core::time::parse_duration(v).ok_or_else(|| {
                    SettingsError::Invalid {
                        variable: "LEASE_TIME_LIMIT",
                        reason: "not a duration (e.g. 15m, 30s) or `off`".into(),
                    }
                })?),
            };
        let slot = match get("LEASE_TICK").as_deref().map(str::trim) {
            None | Some("" | "cron") => None,
            Some(v) => {
                let name = slot_setting(v).ok_or_else(|| SettingsError::Invalid {
                    variable: "LEASE_TICK",
                    reason: format!("{v:?} is not `cron` or `slot:NAME`"),
                })?;
                let name = name.map_err(|e| SettingsError::Invalid {
                    variable: "LEASE_TICK",
                    reason: e.to_string(),
                })?;
                Some(name.to_string())
            }
        };
        let mut lease =
            WorkerLease::new(env, lease.config(key), lease.probe)?.with_time_limit(time_limit);
        lease.slot = slot;
        Ok(lease)
    }

    /// Runs keep within `limit` from now (`None`: no limit), see
    /// [`run`](Self::run).
    pub fn with_time_limit(mut self, limit: Option<Duration>) -> WorkerLease {
        self.started = self.clock().now().mono;
        self.time_limit = limit;
        self
    }

    /// For `cfg` on the store the environment names; `probe`: check the
    /// store's conditional writes once per isolate before the first use.
    pub fn new(env: &Env, cfg: LeaseConfig, probe: bool) -> Result<WorkerLease, SettingsError> {
        let clock = WorkerClock::new();
        let (store, store_id) = settings::store(env, &clock, cfg.request_timeout)?;
        let probe_id = format!("{store_id} {}", cfg.protocol.name());
        let probed = PROBED.with(|p| p.borrow().contains(&probe_id));
        let leases = Leases::with_config(store, clock, cfg.clone(), probe && !probed, entropy)
            .map_err(|e| SettingsError::Invalid {
                variable: "LEASE_TTL",
                reason: e.to_string(),
            })?;
        let claims_id = format!("{probe_id} {}", cfg.key);
        let kept = CLAIMS.with(|c| c.borrow().get(&claims_id).cloned().unwrap_or_default());
        // Each at its own key (a pool's at its seats').
        for claim in kept {
            leases.add_claims(&claim.key.clone(), [claim]);
        }
        Ok(WorkerLease {
            cfg: leases.config(&cfg.key),
            started: leases.clock().now().mono,
            leases,
            probe_id,
            time_limit: None,
            slot: None,
        })
    }

    /// The same lease settings at `key` (another lease of the Worker's, a
    /// pool: [`run`](Self::run)), with what this isolate kept of
    /// it.
    pub fn at(mut self, key: &str) -> WorkerLease {
        self.cfg = self.leases.config(key);
        let kept = CLAIMS.with(|c| c.borrow().get(&self.claims_id()).cloned());
        // Each at its own key (a pool's at its seats').
        for claim in kept.unwrap_or_default() {
            self.leases.add_claims(&claim.key.clone(), [claim]);
        }
        self
    }

    /// The lease settings.
    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    /// The store, for the job's own fenced writes.
    pub fn store(&self) -> &WorkerStore {
        self.leases.store()
    }

    /// The clock the lease runs on.
    pub fn clock(&self) -> &WorkerClock {
        self.leases.clock()
    }

    async fn checked(&self) -> Result<(), LeaseError> {
        self.leases.check_store(&self.cfg.key).await?;
        PROBED.with(|p| p.borrow_mut().insert(self.probe_id.clone()));
        Ok(())
    }

    /// Where the isolate keeps this lease's claims.
    fn claims_id(&self) -> String {
        format!("{} {}", self.probe_id, self.cfg.key)
    }

    /// Keeps this lease's claims (a pool of `seats`: its seats') in the
    /// isolate for the next request.
    fn keep_claims(&self, seats: Option<u32>) {
        let claims = match seats {
            None => self.leases.claims(&self.cfg.key),
            Some(seats) => (0..seats.min(lease_core::client::MAX_SEATS))
                .flat_map(|seat| self.leases.claims(&seat_key(&self.cfg.key, seat)))
                .collect(),
        };
        CLAIMS.with(|c| c.borrow_mut().insert(self.claims_id(), claims));
    }

    /// Guards a job as `run` says (`Run::new()`: once), as
    /// [`Leases::run`] does: acquire; busy → skipped (one read); else run
    /// `job` with the fencing token while renewing, then release. The
    /// handler awaits this, so the Worker stays alive until the lease is
    /// released; each step is logged as a JSON line. The run keeps within
    /// the Worker's time (`LEASE_TIME_LIMIT`, default 15 minutes, a Cron
    /// Trigger's wall-clock limit, counted from [`from_env`](Self::from_env)):
    /// it does not start when the lease's requests may not fit
    /// ([`RunError::NoTime`]) and stops the job in time to release the
    /// lease ([`RunError::Stopped`]). [`run_cron`](Self::run_cron) also
    /// recognises a tick that ran.
    ///
    /// `Run::new().pool(4)` runs the job in any free seat of a pool at this
    /// lease's key ([`at`](Self::at) names another): at most 4 such runs at
    /// once across every isolate, each with its seat's fencing token, for
    /// calls to an upstream that allows that many; every seat taken is
    /// [`RunOutcome::Skipped`]; the seat taken is logged (`acquired`) and
    /// in [`RunOutcome::Ran`]. A pool of 0 or more than
    /// [`MAX_SEATS`](lease_core::client::MAX_SEATS) seats fails with
    /// [`RunError::Settings`] before any request. `Run::new().wait(…)`
    /// waits for the lease a while.
    pub async fn run<F, Fut, T, E, A>(
        &self,
        run: Run<'_, T, fn(Step<'_>), A>,
        job: F,
    ) -> Result<RunOutcome<T>, RunError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: std::fmt::Display,
        A: Take,
    {
        self.run_as(run, None, job).await
    }

    /// [`run`](Self::run) for a Cron Trigger's delivery, as the runtime
    /// passes it to the `scheduled` export: the run is for its tick, its
    /// `cron` and `scheduledTime` ([`Tick::cron`]). A tick the lease record
    /// shows completed answers [`RunOutcome::AlreadyRan`] for one GET and
    /// the job does not run again; a run that completes records the tick in
    /// its release. The cron expression is the schedule, so a run reports
    /// the ticks that never ran since the newest completed one (`missed`,
    /// logged); and a delivery of a tick that already ran or runs elsewhere
    /// calls the controller's `noRetry()`, so the platform does not deliver
    /// it again. Under the mutex protocol, which keeps no record of
    /// completed ticks, the run is a plain one (logged as
    /// `no-tick-record`).
    pub async fn run_cron<F, Fut, T, E>(
        &self,
        event: &worker::worker_sys::ScheduledEvent,
        job: F,
    ) -> Result<RunOutcome<T>, RunError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: std::fmt::Display,
        E: std::fmt::Display,
    {
        let cron = event.cron().unwrap_or_default();
        let scheduled = event.scheduled_time().unwrap_or_default() as u64;
        // A cron with Quartz's L, W or # gives no missed-tick report (and
        // no slot).
        let schedule = Schedule::cron(&cron);
        let tick = match &self.slot {
            None => Tick::cron(&cron, scheduled),
            Some(name) => match &schedule {
                Ok(s) => Tick::slot(name, s, UnixMillis(scheduled)),
                Err(e) => Err(TickError::NoSlot(e.to_string())),
            },
        };
        let tick = match tick.map_err(RunError::Tick) {
            Ok(tick) => tick,
            Err(e) => {
                self.log_failure(&e);
                return Err(e);
            }
        };
        let schedule = schedule.ok();
        let mut run = Run::new();
        if self.cfg.protocol == Protocol::Mutex {
            self.log("no-tick-record", json!({"tick": tick.id()}));
        } else {
            run = run.tick(&tick);
            if let Some(schedule) = &schedule {
                run = run.schedule(schedule);
            }
        }
        let out = self.run_as(run, Some(tick.id()), job).await;
        if matches!(
            out,
            Ok(RunOutcome::AlreadyRan { .. } | RunOutcome::Skipped { .. })
        ) {
            no_retry(event);
        }
        out
    }

    /// `run` within the Worker's time, logged (`tick`: the tick's id for
    /// the log lines).
    async fn run_as<'j, F, Fut, T, E, A>(
        &self,
        run: Run<'_, T, fn(Step<'_>), A>,
        tick: Option<&str>,
        job: F,
    ) -> Result<RunOutcome<T>, RunError<E>>
    where
        F: FnOnce(u64) -> Fut + 'j,
        Fut: Future<Output = Result<T, E>> + 'j,
        E: std::fmt::Display,
        A: Take,
    {
        // Boxed, so that a Worker's jobs share one instantiation of the run
        // (the code of a run is in the wasm module once per job type, not
        // once per job).
        let job: BoxedJob<'j, T, E> = Box::new(move |token| Box::pin(job(token)));
        self.run_boxed(run, tick, job).await
    }

    /// [`run_as`](Self::run_as) for a boxed job.
    async fn run_boxed<T, E, A>(
        &self,
        mut run: Run<'_, T, fn(Step<'_>), A>,
        tick: Option<&str>,
        job: BoxedJob<'_, T, E>,
    ) -> Result<RunOutcome<T>, RunError<E>>
    where
        E: std::fmt::Display,
        A: Take,
    {
        let seats = run.seats();
        if let Some(limit) = self.time_limit {
            let spent = self.clock().now().mono - self.started;
            run = run.within(limit.saturating_sub(spent));
        }
        // The client probes the store first (after the time check, so that
        // a run without time sends nothing).
        let out = self
            .leases
            .run(&self.cfg.key, run.observe(|step| self.log_step(step)), job)
            .await;
        if self.leases.store_checked() {
            PROBED.with(|p| p.borrow_mut().insert(self.probe_id.clone()));
        }
        self.keep_claims(seats);
        match &out {
            Ok(RunOutcome::Ran {
                token,
                recorded,
                missed,
                seat,
                ..
            }) => self.log(
                "finished",
                json!({"token": token, "tick": tick, "recorded": recorded, "seat": seat,
                    "missed": missed.as_ref().map(|m| m.count),
                    "missed_since_ms": missed.as_ref().map(|m| m.since_ms)}),
            ),
            Ok(RunOutcome::AlreadyRan { token, .. }) => {
                self.log("already-ran", json!({"tick": tick, "token": token}))
            }
            // (No slot runs here: `TooLate` comes of `Run::slot` only.)
            Ok(RunOutcome::Skipped { .. } | RunOutcome::TooLate { .. }) => {}
            Err(e) => self.log_failure(e),
        }
        out
    }

    /// One JSON log line about this lease.
    fn log(&self, what: &str, extra: Value) {
        let cfg = &self.cfg;
        let mut line = json!({"lease": what, "key": cfg.key, "holder": cfg.holder});
        if let (Value::Object(line), Value::Object(extra)) = (&mut line, extra) {
            line.extend(extra);
        }
        console_log!("{line}");
    }

    fn log_step(&self, step: Step<'_>) {
        match step {
            Step::Acquired { lease, seat, .. } => {
                self.log("acquired", json!({"token": lease.token, "seat": seat}))
            }
            Step::Skipped(busy) => self.log("skipped", json!({"busy": busy.to_json()})),
            Step::Hold(Event::Renewed { token, .. }) => {
                self.log("renewed", json!({"token": token}))
            }
            Step::Hold(Event::AtRisk { token, .. }) => self.log("at-risk", json!({"token": token})),
            Step::Hold(Event::Lost { token, reason }) => self.log(
                "lost",
                json!({"token": token, "reason": reason.to_string()}),
            ),
            Step::Hold(Event::Error(e)) => {
                self.log("renew-failed", json!({"error": e.to_string()}))
            }
            Step::Hold(_) => {}
            Step::Released(_) => {}
            Step::ReleaseFailed(e) => self.log("release-failed", json!({"error": e.to_string()})),
        }
    }

    fn log_failure<E: std::fmt::Display>(&self, e: &RunError<E>) {
        console_error!(
            "{}",
            json!({"lease": "failed", "key": self.cfg.key, "kind": e.kind(), "error": e.to_string()})
        );
    }

    async fn inspect(&self) -> Result<Option<Observation>, LeaseError> {
        self.leases.inspect(&self.cfg.key).await
    }

    /// `GET /lease` for the holder of the admin secret: the lease as
    /// stored, with its etag (200). Guard it with [`crate::auth`].
    pub async fn status(&self) -> Reply {
        match self.inspect().await {
            Ok(seen) => Reply::new(200, status_json(&self.config().key, seen.as_ref())),
            Err(e) => Reply::lease(&e),
        }
    }

    /// `GET /lease` for anyone: free, or held until when (200; see
    /// [`public_status_json`]). A store error is logged and answered 502
    /// without its text, which may name the object's etag.
    pub async fn public_status(&self) -> Reply {
        match self.inspect().await {
            Ok(seen) => Reply::new(200, public_status_json(seen.as_ref())),
            Err(e) => {
                console_error!(
                    "{}",
                    json!({"lease": "status-failed", "key": self.config().key, "error": e.to_string()})
                );
                Reply::new(
                    502,
                    json!({"error": "lease", "message": "the lease could not be read; the Worker's log says why"}),
                )
            }
        }
    }

    /// `GET /lease/probe`: the capability probe's report (200), with
    /// whether the configured protocol can run on this store. On the R2
    /// binding the conditional-DELETE checks fail, so `mutex` is refused.
    pub async fn probe(&self) -> Reply {
        match self.leases.probe(&self.cfg.key).await {
            Ok(report) => {
                let mut body = report.to_json();
                body["protocol"] = json!(self.config().protocol.name());
                body["supported"] = json!(report.supports(self.config().protocol).is_ok());
                Reply::new(200, body)
            }
            Err(e) => Reply::lease(&e),
        }
    }

    /// `POST /lease/acquire`: 200 with the lease (keep its `etag` to
    /// release it), or 409 naming the live holder.
    pub async fn acquire(&self) -> Reply {
        if let Err(e) = self.checked().await {
            return Reply::lease(&e);
        }
        let acquired = self.leases.acquire(&self.cfg.key).await;
        self.keep_claims(None);
        match acquired {
            Ok(AcquireOutcome::Acquired(lease)) => {
                let mut body = lease.to_json();
                body["acquired"] = json!(true);
                Reply::new(200, body)
            }
            Ok(AcquireOutcome::Busy(busy)) => {
                let mut body = busy.to_json();
                body["acquired"] = json!(false);
                Reply::new(409, body)
            }
            Err(e) => Reply::lease(&e),
        }
    }

    /// `POST /lease/release` with `{"etag": "..."}` (the version acquired):
    /// 200 once released, 409 if the lease is another version now.
    pub async fn release(&self, etag: &str) -> Reply {
        let released = self.leases.release_by_etag(&self.cfg.key, etag).await;
        self.keep_claims(None);
        match released {
            Ok(ReleaseOutcome::Released { token }) => {
                Reply::new(200, json!({"released": true, "token": token}))
            }
            Ok(ReleaseOutcome::AlreadyLost(reason)) => Reply::new(
                409,
                json!({"released": false, "error": format!("lost: {reason}")}),
            ),
            Ok(ReleaseOutcome::Unknown { now, .. }) => Reply::new(
                409,
                json!({"released": null, "error": format!(
                    "the release got no clear answer; the lease is {now} now, and whether this release freed it cannot be told"
                )}),
            ),
            Err(ByEtagError::Lease(e)) => Reply::lease(&e),
            // Not held as that version (another holder, or none).
            Err(e) => Reply::new(409, json!({"released": false, "error": e.to_string()})),
        }
    }
}

#[worker::wasm_bindgen::prelude::wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen)]
extern "C" {
    /// The Cron Trigger controller the runtime passes to `scheduled`
    /// (`worker` keeps only its `cron` and `scheduledTime`).
    type ScheduledController;
    /// Asks the platform not to deliver this tick again.
    #[wasm_bindgen(method, js_name = noRetry)]
    fn no_retry(this: &ScheduledController);
}

/// Calls the Cron Trigger controller's `noRetry()` (with the controller
/// as `this`, as the runtime requires).
fn no_retry(event: &worker::worker_sys::ScheduledEvent) {
    use worker::wasm_bindgen::JsCast;
    event.unchecked_ref::<ScheduledController>().no_retry();
}
