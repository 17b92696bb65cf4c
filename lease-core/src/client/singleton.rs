//! One run per tick, never two at once: the scheduled-job guard the Lambda
//! and Workers adapters share.
//!
//! [`Singleton::run`] checks the store once (the capability probe, unless
//! turned off), then acquires the lease. Busy: the job does not run and the
//! outcome is [`SingletonOutcome::Skipped`], naming the holder and its
//! expiry, for the price of one GET. Acquired: the job runs with the
//! fencing token while the lease is renewed alongside it
//! ([`hold_while`](crate::client::hold::hold_while)); if the lease is lost the
//! job's future is dropped and the run fails with
//! [`SingletonError::LeaseLost`]; when the job ends (success or error) the
//! lease is released. Each step is reported to an observer, for logs.
//!
//! The job is never started on a lease that is not valid at that instant
//! (one confirmed too late is given back: [`LeaseError::WonTooLate`]), and
//! a job that finishes after the lease's deadline fails with
//! [`SingletonError::Overrun`] instead of counting as run. A run that
//! may leave a record of ours behind leaves a [`Claim`] (an acquire whose
//! write's outcome stayed unknown, a create still in flight when it found
//! the lease busy, a lease lost or not released, as last renewed): the
//! same `Singleton` takes such a record over at its next runs, until it can
//! no longer be live, instead of skipping ticks as busy behind itself. A
//! later run's acquisition does not end an earlier run's claim: that run's
//! late create can still land once the later lease is released.

use crate::client::drive::drive;
use crate::client::hold::{hold_while_then, Held};
use crate::config::LeaseConfig;
use crate::config::Protocol;
use crate::entropy::Entropy;
use crate::protocol::lease::LeaseOp;
use crate::protocol::machine::{
    AcquireOutcome, Busy, Claim, Event, LeaseError, LostReason, Observation, ReleaseOutcome,
};
use crate::protocol::verdict::SharedProbe;
use crate::schedule::{MissedTicks, Schedule};
use crate::settings::SettingsError;
use crate::store::Store;
use crate::tick::{Tick, TickError, TickRun};
use crate::time::Clock;
use crate::time::{Mono, StoreDate, UnixMillis};
use core::fmt;
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::Poll;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// What a run did.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "outcome", rename_all = "snake_case")
)]
pub enum SingletonOutcome<T> {
    /// This run held the lease and ran the job.
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

/// What a run for a tick did ([`Singleton::run_tick`]): as
/// [`SingletonOutcome`], and the tick may have run already.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "outcome", rename_all = "snake_case")
)]
pub enum TickOutcome<T> {
    /// This run held the lease and ran the job.
    Ran {
        /// The fencing token the job ran with.
        token: u64,
        /// The job's output.
        output: T,
        /// The release that recorded the tick as completed was confirmed.
        /// `false`: it was not (the store failed, or the lease was lost as
        /// the job ended), and a duplicate delivery of the tick may run it
        /// again.
        recorded: bool,
        /// Ticks of the schedule that never ran between the newest
        /// completed one and this one ([`ScheduledRun::schedule`]; `None`:
        /// none missed, or no schedule or scheduled times to tell).
        missed: Option<MissedTicks>,
    },
    /// This tick already ran to completion: the job did not run again;
    /// this is what the lease record says of it.
    AlreadyRan {
        /// The tick.
        tick: String,
        /// The token of the run that completed it.
        token: u64,
        /// When it finished (Unix ms, the store's clock as its holder knew it).
        finished_at_ms: u64,
        /// Its result as recorded (a digest when it was long).
        result: Option<String>,
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

/// How a run's two common outcomes are made, for a plain run and a run
/// for a tick alike.
trait Outcome<T> {
    fn ran(token: u64, output: T, recorded: bool, missed: Option<MissedTicks>) -> Self;
    fn skipped(busy: Busy) -> Self;
}

impl<T> Outcome<T> for SingletonOutcome<T> {
    fn ran(token: u64, output: T, _: bool, _: Option<MissedTicks>) -> Self {
        SingletonOutcome::Ran { token, output }
    }
    fn skipped(busy: Busy) -> Self {
        SingletonOutcome::Skipped {
            holder: busy.holder,
            token: busy.token,
            expires_at_ms: busy.expires_at.0,
        }
    }
}

impl<T> Outcome<T> for TickOutcome<T> {
    fn ran(token: u64, output: T, recorded: bool, missed: Option<MissedTicks>) -> Self {
        TickOutcome::Ran {
            token,
            output,
            recorded,
            missed,
        }
    }
    fn skipped(busy: Busy) -> Self {
        TickOutcome::Skipped {
            holder: busy.holder,
            token: busy.token,
            expires_at_ms: busy.expires_at.0,
        }
    }
}

impl<T> From<SingletonOutcome<T>> for TickOutcome<T> {
    /// A plain run's outcome, for code that runs ticks and plain runs alike
    /// (an event without a tick): it recorded nothing.
    fn from(outcome: SingletonOutcome<T>) -> Self {
        match outcome {
            SingletonOutcome::Ran { token, output } => TickOutcome::Ran {
                token,
                output,
                recorded: false,
                missed: None,
            },
            SingletonOutcome::Skipped {
                holder,
                token,
                expires_at_ms,
            } => TickOutcome::Skipped {
                holder,
                token,
                expires_at_ms,
            },
        }
    }
}

impl<T> From<TickRun> for TickOutcome<T> {
    /// The outcome for a tick the record shows completed.
    fn from(run: TickRun) -> Self {
        TickOutcome::AlreadyRan {
            tick: run.tick,
            token: run.token,
            finished_at_ms: run.finished_at.0,
            result: run.result,
        }
    }
}

/// What a run for a tick adds to a plain run: the tick, the outcome for a
/// tick already completed, and the job's output as the record keeps it.
struct ForTick<'a, T, O> {
    tick: &'a Tick,
    schedule: Option<&'a Schedule>,
    already_ran: fn(TickRun) -> O,
    describe: fn(&T) -> String,
}

/// Why a run failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum SingletonError<E> {
    /// The lease could not be acquired or checked (credentials, bucket,
    /// an unsafe store): nothing ran.
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
    /// The job finished after the lease's local deadline: it may have
    /// run alongside another holder's (its output is dropped; its writes
    /// must have been fenced).
    Overrun {
        /// The token it ran with.
        token: u64,
        /// How long after the deadline it finished.
        late_by: Duration,
    },
    /// The job itself failed (the lease was released).
    Job(E),
    /// The tick cannot be run once: another payload under its id, or a
    /// protocol that keeps no record of completed ticks. Nothing ran.
    Tick(TickError),
    /// The invocation has too little time left for the lease's own
    /// requests ([`time_needed`]): the job did not start (nothing was
    /// sent, or a lease acquired too late was given back). Raise the function's timeout or lower the lease's
    /// `request_timeout` / `op_timeout` (they follow the ttl).
    NoTime {
        /// The time the invocation had left.
        remaining: Duration,
        /// The time the lease's requests may need.
        needed: Duration,
    },
    /// The job was stopped before the invocation's time ran out, keeping
    /// [`release_reserve`] for the release: the lease was given back (or,
    /// if that failed, left to expire) and the tick was not recorded, so a retry runs it again. Work the job
    /// did before it was stopped stays done (its writes are fenced).
    Stopped {
        /// The token it ran with.
        token: u64,
        /// How long the run took, from its start to the release.
        ran_for: Duration,
    },
}

impl<E> SingletonError<E> {
    /// A stable name for the failure's class (`LeaseError`,
    /// `SettingsError`, `LeaseLost`, `Overrun`, `JobFailed`, `TickError`,
    /// `NoTime`, `Stopped`), for error reports.
    pub fn kind(&self) -> &'static str {
        match self {
            SingletonError::Lease(_) => "LeaseError",
            SingletonError::Settings(_) => "SettingsError",
            SingletonError::LeaseLost { .. } => "LeaseLost",
            SingletonError::Overrun { .. } => "Overrun",
            SingletonError::Job(_) => "JobFailed",
            SingletonError::Tick(_) => "TickError",
            SingletonError::NoTime { .. } => "NoTime",
            SingletonError::Stopped { .. } => "Stopped",
        }
    }
}

impl<E: fmt::Display> fmt::Display for SingletonError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SingletonError::Lease(e) => write!(f, "lease: {e}"),
            SingletonError::Settings(e) => write!(f, "settings: {e}"),
            SingletonError::LeaseLost { token, reason } => {
                write!(
                    f,
                    "the lease (token {token}) was lost while the job ran ({reason}); the job was stopped"
                )
            }
            SingletonError::Overrun { token, late_by } => write!(
                f,
                "the job (token {token}) finished {late_by:?} after the lease's deadline: it may have run \
                 alongside another holder"
            ),
            SingletonError::Job(e) => write!(f, "{e}"),
            SingletonError::Tick(e) => write!(f, "tick: {e}"),
            SingletonError::NoTime { remaining, needed } => write!(
                f,
                "{remaining:?} left, the lease's requests may need {needed:?}: the job did not \
                 start (raise the function's timeout, or lower the lease's ttl)"
            ),
            SingletonError::Stopped { token, ran_for } => write!(
                f,
                "the job (token {token}) was stopped after {ran_for:?}, before the time ran out; \
                 its tick is not recorded (a retry runs it)"
            ),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for SingletonError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SingletonError::Lease(e) => Some(e),
            SingletonError::Settings(e) => Some(e),
            SingletonError::Tick(e) => Some(e),
            _ => None,
        }
    }
}

impl<E> From<SettingsError> for SingletonError<E> {
    fn from(e: SettingsError) -> Self {
        SingletonError::Settings(e)
    }
}

/// A step of a run, for the caller's logs.
#[derive(Debug)]
pub enum Step<'a> {
    /// The lease is ours: the job starts with this token.
    Acquired {
        /// The fencing token.
        token: u64,
    },
    /// Another run holds the lease: the job is skipped.
    Skipped(&'a Busy),
    /// An event of the renewals while the job runs (renewed, at risk,
    /// lost, a failed attempt).
    Hold(Event),
    /// The job finished but the release failed: the lease expires on its
    /// own after the ttl.
    ReleaseFailed(&'a LeaseError),
}

/// A lease guarding one scheduled job (see the module docs).
pub struct Singleton<S, C> {
    cfg: LeaseConfig,
    store: S,
    clock: C,
    entropy: fn() -> Entropy,
    probe: bool,
    probed: AtomicBool,
    /// Records of ours earlier runs may have left behind.
    claims: Mutex<Vec<Claim>>,
    /// How long completed ticks are kept in the record.
    retention: Duration,
}

/// How long a lease record keeps completed ticks unless set otherwise
/// ([`Singleton::tick_retention`]): longer than the platforms retry a
/// delivery (Lambda's asynchronous retries, up to six hours).
pub const TICK_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// One scheduled run's particulars ([`Singleton::run_scheduled`]): the
/// tick it runs for, if any, and the time the invocation has left.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScheduledRun<'a> {
    tick: Option<&'a Tick>,
    remaining: Option<Duration>,
    schedule: Option<&'a Schedule>,
}

impl<'a> ScheduledRun<'a> {
    /// A run for `tick` (as [`Singleton::run_tick`]), or a plain run (as
    /// [`Singleton::run`]) when there is none.
    pub fn new(tick: Option<&'a Tick>) -> Self {
        ScheduledRun {
            tick,
            remaining: None,
            schedule: None,
        }
    }

    /// The job runs on `schedule`: a run for a tick with a scheduled time
    /// reports the ticks that never ran since the newest completed one
    /// ([`TickOutcome::Ran`]'s `missed`, [`crate::schedule`]).
    pub fn schedule(mut self, schedule: &'a Schedule) -> Self {
        self.schedule = Some(schedule);
        self
    }

    /// The invocation has `remaining` left (Lambda's context deadline, a
    /// Worker's limit): the run refuses to start when the lease's own
    /// requests may not fit ([`SingletonError::NoTime`]), and stops the job
    /// [`release_reserve`] before the time runs out, releasing the lease
    /// ([`SingletonError::Stopped`]), instead of being killed holding it.
    pub fn within(mut self, remaining: Duration) -> Self {
        self.remaining = Some(remaining);
        self
    }

    /// The time the invocation had left, if known.
    pub fn remaining(&self) -> Option<Duration> {
        self.remaining
    }
}

/// The time a run keeps for its release once the job is stopped: a write
/// and one retry after a backoff (and GCS's write interval), at most the
/// operation timeout. With the default settings and a 60 s ttl: 12 s.
pub fn release_reserve(cfg: &LeaseConfig) -> Duration {
    let attempts = cfg.request_timeout * 2 + cfg.backoff_max + cfg.min_write_interval;
    attempts.min(cfg.op_timeout)
}

/// The least time an invocation must have left for a run to start: an
/// acquisition and a release, each given [`release_reserve`].
pub fn time_needed(cfg: &LeaseConfig) -> Duration {
    release_reserve(cfg) * 2
}

/// `NoTime` when `remaining` is less than [`time_needed`].
pub(crate) fn enough_time<E>(
    cfg: &LeaseConfig,
    remaining: Duration,
) -> Result<(), SingletonError<E>> {
    let needed = time_needed(cfg);
    if remaining < needed {
        return Err(SingletonError::NoTime { remaining, needed });
    }
    Ok(())
}

/// How a job's future ended under a time limit.
enum Ended<T, E> {
    /// It finished.
    Done(Result<T, E>),
    /// It was stopped at the limit.
    Stopped,
}

/// Where a tick's run starts, after the read that checks the record.
enum TickRead {
    /// The tick ran already.
    Completed(TickRun),
    /// It did not: how to go on.
    Start(TickStart),
}

/// How a run goes on.
enum TickStart {
    /// The tick ran with another payload.
    Refused(TickError),
    /// Another run holds the lease.
    Busy(Observation),
    /// Acquire, from the read when there was one.
    Acquire(Option<Observation>),
    /// The read found no object: acquire by creating it, stamped from the
    /// read's store date.
    Create((StoreDate, Mono)),
}

/// `job`, stopped when `stop` (if any) completes first.
async fn until<T, E>(
    job: impl Future<Output = Result<T, E>>,
    stop: Option<impl Future<Output = ()>>,
) -> Ended<T, E> {
    let mut job = pin!(job);
    let mut stop = pin!(stop);
    poll_fn(|cx| {
        if let Poll::Ready(out) = job.as_mut().poll(cx) {
            return Poll::Ready(Ended::Done(out));
        }
        match stop.as_mut().as_pin_mut().map(|s| s.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Ended::Stopped),
            _ => Poll::Pending,
        }
    })
    .await
}

impl<S, C> fmt::Debug for Singleton<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Singleton")
            .field("cfg", &self.cfg)
            .field("probe", &self.probe)
            .field("probed", &self.probed)
            .finish_non_exhaustive()
    }
}

impl<S: Store, C: Clock> Singleton<S, C> {
    /// A singleton for `cfg` on `store`; `entropy` seeds each operation's
    /// nonces (the OS's randomness in production).
    pub fn new(cfg: LeaseConfig, store: S, clock: C, entropy: fn() -> Entropy) -> Self {
        Singleton {
            cfg,
            store,
            clock,
            entropy,
            probe: true,
            probed: AtomicBool::new(false),
            claims: Mutex::new(Vec::new()),
            retention: TICK_RETENTION,
        }
    }

    /// Keeps completed ticks in the record for `retention` (default
    /// [`TICK_RETENTION`]; at most [`MAX_RUNS`](crate::tick::MAX_RUNS)
    /// ticks whatever the time): a write to the record (a run of another
    /// tick, a renewal) drops the ticks older than that, and a duplicate
    /// delivered after it runs again. Until such a write, an older tick
    /// still answers `AlreadyRan`.
    pub fn tick_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// Starts with the claims a `Singleton` of an earlier invocation left
    /// ([`Singleton::claims`]), for a runtime that builds a new one per
    /// invocation but can keep a little state between them.
    pub fn with_claims(self, claims: Vec<Claim>) -> Self {
        *self.claims.lock().unwrap_or_else(PoisonError::into_inner) = claims;
        self
    }

    /// Records of ours that earlier runs may have left live (see
    /// [`Claim`]): hand them to the next `Singleton` with
    /// [`Singleton::with_claims`] when this one does not live on.
    pub fn claims(&self) -> Vec<Claim> {
        self.claims
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Skips the capability probe (a store already known to be safe).
    pub fn without_probe(mut self) -> Self {
        self.probe = false;
        self
    }

    /// The lease settings.
    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    /// The store, for the job's own (fenced) writes.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The clock the lease runs on.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Fresh entropy for an operation of the job's own (a fenced write).
    pub fn entropy(&self) -> Entropy {
        (self.entropy)()
    }

    /// Whether the store has passed the probe (or the probe is off).
    pub fn store_checked(&self) -> bool {
        !self.probe || self.probed.load(Ordering::Relaxed)
    }

    /// Checks the store unless it passed already or the probe is off, and
    /// refuses a store that cannot carry the configured protocol: the
    /// verdict the fleet shares, or a probe that earns it
    /// ([`crate::protocol::verdict`]).
    pub async fn check_store(&self) -> Result<(), LeaseError> {
        if self.store_checked() {
            return Ok(());
        }
        let mut check = SharedProbe::new(self.cfg.clone(), self.entropy());
        let shared = drive(&mut check, &self.store, &self.clock, |_| {}).await?;
        shared.supports(self.cfg.protocol, &self.cfg.key)?;
        self.probed.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Runs `job` with the fencing token if this run gets the lease (see
    /// the module docs); `observe` sees each step.
    pub async fn run<F, Fut, T, E>(
        &self,
        job: F,
        observe: impl FnMut(Step<'_>),
    ) -> Result<SingletonOutcome<T>, SingletonError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.run_inner(
            None::<ForTick<'_, T, SingletonOutcome<T>>>,
            None,
            job,
            observe,
        )
        .await
    }

    /// Runs `job` as `run` says: for its tick if it has one (as
    /// [`run_tick`](Self::run_tick); a plain run otherwise, as
    /// [`run`](Self::run)), within the time the invocation has left if
    /// known ([`ScheduledRun::within`]).
    pub async fn run_scheduled<F, Fut, T, E>(
        &self,
        run: ScheduledRun<'_>,
        job: F,
        observe: impl FnMut(Step<'_>),
    ) -> Result<TickOutcome<T>, SingletonError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: fmt::Display,
    {
        // One instantiation of the run for both (a plain run's outcome
        // as a `TickOutcome` records nothing): half the code in a wasm
        // build.
        let for_tick = match run.tick {
            Some(_) if self.cfg.protocol == Protocol::Mutex => {
                return Err(SingletonError::Tick(TickError::NoRecord))
            }
            Some(tick) => Some(ForTick {
                tick,
                schedule: run.schedule,
                already_ran: TickOutcome::from,
                describe: T::to_string,
            }),
            None => None,
        };
        self.run_inner(for_tick, run.remaining, job, observe).await
    }

    /// Runs `job` for `tick` once: as [`Singleton::run`], and a tick that
    /// already ran to completion is answered from the lease record
    /// ([`TickOutcome::AlreadyRan`]) for the read a busy check costs
    /// (cas: one GET). A run that completes records the tick, with its
    /// output as text, in the release it makes anyway; a run that fails is
    /// not recorded, so the platform's retry runs the tick again. Needs
    /// the cas or epochs protocol (a mutex's record goes with its lock).
    pub async fn run_tick<F, Fut, T, E>(
        &self,
        tick: &Tick,
        job: F,
        observe: impl FnMut(Step<'_>),
    ) -> Result<TickOutcome<T>, SingletonError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: fmt::Display,
    {
        self.run_scheduled(ScheduledRun::new(Some(tick)), job, observe)
            .await
    }

    /// The read before a tick's acquisition: the record's completed ticks
    /// and whether another run holds the lease.
    async fn tick_start(&self, tick: &Tick, claims: &[Claim]) -> Result<TickRead, LeaseError> {
        let mut op = LeaseOp::inspect(self.cfg.clone(), self.entropy());
        let Some(seen) = drive(&mut op, &self.store, &self.clock, |_| {}).await? else {
            return Ok(TickRead::Start(match op.store_clock() {
                Some(clock) => TickStart::Create(clock),
                None => TickStart::Acquire(None),
            }));
        };
        let runs = if mutant!(IgnoreCompletedTicks) {
            &[][..]
        } else {
            &seen.record.runs[..]
        };
        let start = match tick.find(runs) {
            Ok(Some(run)) => return Ok(TickRead::Completed(run.clone())),
            Err(e) => return Ok(TickRead::Start(TickStart::Refused(e))),
            Ok(None) => TickStart::Acquire,
        };
        // A record of ours from an earlier run is taken over by the
        // acquire (it knows the claim); another's live one is busy.
        let ours = claims.iter().any(|c| c.session == seen.record.session);
        Ok(TickRead::Start(if seen.free || ours {
            start(Some(seen))
        } else {
            TickStart::Busy(seen)
        }))
    }

    /// Longer than 80 lines: a run's steps (probe, the tick's read,
    /// acquire, hold, job, release, and what each failure means) read in
    /// order in one place.
    async fn run_inner<F, Fut, T, E, O>(
        &self,
        for_tick: Option<ForTick<'_, T, O>>,
        remaining: Option<Duration>,
        job: F,
        mut observe: impl FnMut(Step<'_>),
    ) -> Result<O, SingletonError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        O: Outcome<T>,
    {
        let started = self.clock.now().mono;
        // The instant the job is stopped, keeping the release's time; a
        // run that may not fit does not send a request.
        let stop_at = match remaining {
            Some(remaining) => {
                enough_time(&self.cfg, remaining)?;
                Some(started + (remaining - release_reserve(&self.cfg)))
            }
            None => None,
        };
        self.check_store().await.map_err(SingletonError::Lease)?;
        let now = self.clock.now().mono;
        let claims = {
            let mut claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
            claims.retain(|c| c.live_until > now);
            // Broken on purpose (a test build only): the acquisition forgets
            // the earlier runs' claims.
            if mutant!(ForgetClaimsOnAcquire) {
                claims.clear();
            }
            claims.clone()
        };
        let start = match &for_tick {
            Some(t) => match self.tick_start(t.tick, &claims).await {
                Ok(TickRead::Completed(run)) => return Ok((t.already_ran)(run)),
                Ok(TickRead::Start(start)) => start,
                Err(e) => return Err(SingletonError::Lease(e)),
            },
            None => TickStart::Acquire(None),
        };
        let mut op = match start {
            TickStart::Refused(e) => return Err(SingletonError::Tick(e)),
            TickStart::Busy(seen) => {
                let busy = Busy {
                    holder: seen.record.holder,
                    token: seen.record.token,
                    expires_at: seen.record.expires_at,
                    expires_in: Some(Duration::from_millis(
                        seen.record.expires_at.0.saturating_sub(seen.date.unix_ms.0),
                    )),
                    etag: seen.etag,
                    foreign: seen.record.foreign,
                    unsettled: None,
                };
                observe(Step::Skipped(&busy));
                return Ok(O::skipped(busy));
            }
            TickStart::Acquire(Some(seen)) if seen.free => {
                LeaseOp::acquire_from(self.cfg.clone(), self.entropy(), &seen)
            }
            TickStart::Create(clock) => {
                LeaseOp::acquire_absent(self.cfg.clone(), self.entropy(), clock)
            }
            TickStart::Acquire(_) => LeaseOp::acquire(self.cfg.clone(), self.entropy()),
        }
        .with_claims(claims);
        let lease = match drive(&mut op, &self.store, &self.clock, |_| {}).await {
            Ok(AcquireOutcome::Acquired(lease)) => lease,
            Ok(AcquireOutcome::Busy(busy)) => {
                if let Some(claim) = &busy.unsettled {
                    self.remember((**claim).clone());
                }
                observe(Step::Skipped(&busy));
                return Ok(O::skipped(busy));
            }
            Err(e) => {
                if let Some(claim) = e.unsettled() {
                    self.remember(claim.clone());
                }
                return Err(SingletonError::Lease(e));
            }
        };
        let token = lease.token;
        // Not one instant on a lease past its deadline: the job is not
        // even built.
        if !lease.is_valid(self.clock.now().mono) && !variant!(self.cfg, trusts_late_wins) {
            let claim = Claim::of_lease(&self.cfg, &lease);
            self.remember(claim.clone());
            return Err(SingletonError::Lease(LeaseError::WonTooLate {
                token,
                released: false,
                unsettled: Some(Box::new(claim)),
            }));
        }
        // The tick may have been completed between the read and the
        // acquisition: the record taken over says so.
        let taken_over = if mutant!(IgnoreCompletedTicks) {
            &[][..]
        } else {
            &lease.record.runs[..]
        };
        let answered = for_tick
            .as_ref()
            .and_then(|t| match t.tick.find(taken_over) {
                Ok(None) => None,
                Ok(Some(run)) => Some(Ok((t.already_ran)(run.clone()))),
                Err(e) => Some(Err(SingletonError::Tick(e))),
            });
        // An acquisition that took the time the job had: given back too.
        let late = stop_at.filter(|at| self.clock.now().mono >= *at).map(|_| {
            let spent = self.clock.now().mono - started;
            Err(SingletonError::NoTime {
                remaining: remaining.unwrap_or_default().saturating_sub(spent),
                needed: release_reserve(&self.cfg),
            })
        });
        // The ticks that never ran since the newest completed one.
        let missed = for_tick.as_ref().and_then(|t| {
            let since = t.tick.previous(&lease.record.runs)?;
            t.schedule?.missed(since, t.tick.scheduled()?)
        });
        if let Some(answer) = answered.or(late) {
            // Given back untouched: the job does not run. A release that
            // failed leaves the record as ours: the next run takes it over.
            let claim = Claim::of_lease(&self.cfg, &lease);
            let mut release = LeaseOp::release(self.cfg.clone(), self.entropy(), lease);
            if drive(&mut release, &self.store, &self.clock, |_| {})
                .await
                .is_err()
            {
                self.remember(claim);
            }
            return answer;
        }
        observe(Step::Acquired { token });
        // A completed tick is stamped on the store's clock as the lease
        // last read it.
        let (date, anchor) = lease.clock;
        let retention = self.retention;
        let clock = &self.clock;
        let complete = |output: &Ended<T, E>| {
            let (Some(t), Ended::Done(Ok(output))) = (&for_tick, output) else {
                return None;
            };
            let elapsed = clock.now().mono - anchor;
            let finished_at = UnixMillis(date.unix_ms.0 + elapsed.as_millis() as u64);
            let oldest = UnixMillis(finished_at.0.saturating_sub(retention.as_millis() as u64));
            let text = (t.describe)(output);
            Some((
                TickRun::new(t.tick, token, finished_at, Some(&text)),
                oldest,
            ))
        };
        // The lease as last renewed: what a record of ours left behind
        // (a renewal in flight at a loss, a release that failed) is, so
        // that the next run takes it over instead of skipping behind it.
        // (A mutex, not a cell: the run's future stays `Send`.)
        let last = Mutex::new(lease.clone());
        let held = hold_while_then(
            &self.cfg,
            &self.store,
            &self.clock,
            self.entropy(),
            lease,
            until(job(token), stop_at.map(|at| self.clock.sleep_until(at))),
            |event| {
                if let (Event::Renewed { token, valid_until }, false) =
                    (&event, mutant!(ClaimOfFirstLease))
                {
                    let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
                    last.token = *token;
                    last.valid_until = *valid_until;
                }
                observe(Step::Hold(event))
            },
            complete,
        )
        .await;
        let given_back = matches!(
            &held,
            Held::Finished {
                released: Some(Ok(_)),
                ..
            }
        );
        let expired = matches!(
            &held,
            Held::Lost {
                reason: LostReason::Expired,
                ..
            }
        );
        if !given_back && (expired || !mutant!(ClaimOfFirstLease)) {
            let last = last.into_inner().unwrap_or_else(PoisonError::into_inner);
            self.remember(Claim::of_lease(&self.cfg, &last));
        }
        match held {
            Held::Finished { output, released } => {
                if let Some(Err(e)) = &released {
                    observe(Step::ReleaseFailed(e));
                }
                let recorded = matches!(released, Some(Ok(ReleaseOutcome::Released { .. })));
                match output {
                    Ended::Done(Ok(output)) => Ok(O::ran(
                        token,
                        output,
                        for_tick.is_some() && recorded,
                        missed,
                    )),
                    Ended::Done(Err(e)) => Err(SingletonError::Job(e)),
                    Ended::Stopped => Err(SingletonError::Stopped {
                        token,
                        ran_for: self.clock.now().mono - started,
                    }),
                }
            }
            Held::Overrun { token, late_by, .. } => Err(SingletonError::Overrun { token, late_by }),
            Held::Lost { token, reason } => Err(SingletonError::LeaseLost { token, reason }),
        }
    }

    fn remember(&self, claim: Claim) {
        let mut claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        claims.retain(|c| c.session != claim.session);
        claims.push(claim);
    }
}
