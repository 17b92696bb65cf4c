//! One run of a job under a lease, [`Leases::run`] (see the layer's docs, `client/mod.rs`).

use crate::client::drive::drive;
use crate::client::hold::Held;
use crate::client::leases::Leases;
use crate::client::pool::{check_seats, seat_key};
use crate::config::{LeaseConfig, Protocol};
use crate::protocol::elector::HoldLimit;
use crate::protocol::lease::LeaseOp;
use crate::protocol::outcome::{
    AcquireOutcome, Busy, Claim, Event, Lease, LeaseError, LostReason, Observation, ReleaseOutcome,
};
use crate::schedule::{MissedTicks, Schedule};
use crate::settings::SettingsError;
use crate::store::Store;
use crate::tick::{Slots, Tick, TickError, TickRun};
use crate::time::Clock;
use crate::time::{Dur, Mono, StoreDate, UnixMillis};
use core::fmt;
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// What a run did ([`Leases::run`]): ran, skipped as busy, or, for a run
/// of a tick, answered from the record as already run.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "outcome", rename_all = "snake_case")
)]
pub enum RunOutcome<T> {
    /// This run held the lease and ran the job.
    Ran {
        /// The fencing token the job ran with.
        token: u64,
        /// The job's output.
        output: T,
        /// The release that recorded the tick as completed was confirmed.
        /// `false`: it was not (the store failed, or the lease was lost as
        /// the job ended), and a duplicate delivery of the tick may run it
        /// again; always `false` for a run without a tick.
        recorded: bool,
        /// Ticks of the schedule that never ran between the newest
        /// completed one and this one ([`Run::schedule`]; `None`:
        /// none missed, or no schedule or scheduled times to tell).
        missed: Option<MissedTicks>,
        /// The seat the job ran in, for a run in a pool ([`Run::pool`]).
        #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
        seat: Option<u32>,
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
        /// Its result as recorded (a digest when it was long, or when the
        /// record would not fit otherwise: `docs/protocols.md`, "Every
        /// record stays readable").
        result: Option<String>,
    },
    /// A run of a schedule's slots ([`Run::slot`]) started later into its
    /// slot than allowed ([`Slots::late_after`]), by the store's clock:
    /// the job did not run, and nothing was written.
    TooLate {
        /// The slot.
        tick: String,
        /// How late into the slot the run started.
        late_by_ms: u64,
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

/// Why a run failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError<E> {
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
    /// if that failed or did not finish in time, kept as a claim this
    /// client's next run takes over, and otherwise left to expire) and the
    /// tick was not recorded, so a retry runs it again. Work the job
    /// did before it was stopped stays done (its writes are fenced).
    Stopped {
        /// The token it ran with.
        token: u64,
        /// How long the run took, from its start to the release.
        ran_for: Duration,
    },
}

impl<E> RunError<E> {
    /// A stable name for the failure's class (`LeaseError`,
    /// `SettingsError`, `LeaseLost`, `Overrun`, `JobFailed`, `TickError`,
    /// `NoTime`, `Stopped`), for error reports.
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::Lease(_) => "LeaseError",
            RunError::Settings(_) => "SettingsError",
            RunError::LeaseLost { .. } => "LeaseLost",
            RunError::Overrun { .. } => "Overrun",
            RunError::Job(_) => "JobFailed",
            RunError::Tick(_) => "TickError",
            RunError::NoTime { .. } => "NoTime",
            RunError::Stopped { .. } => "Stopped",
        }
    }
}

impl<E: fmt::Display> fmt::Display for RunError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Lease(e) => write!(f, "lease: {e}"),
            RunError::Settings(e) => write!(f, "settings: {e}"),
            RunError::LeaseLost { token, reason } => {
                write!(
                    f,
                    "the lease (token {token}) was lost while the job ran ({reason}); the job was stopped"
                )
            }
            RunError::Overrun { token, late_by } => write!(
                f,
                "the job (token {token}) finished {late_by:?} after the lease's deadline: it may have run \
                 alongside another holder",
                late_by = Dur(*late_by)
            ),
            RunError::Job(e) => write!(f, "{e}"),
            RunError::Tick(e) => write!(f, "tick: {e}"),
            RunError::NoTime { remaining, needed } => write!(
                f,
                "{remaining:?} left, the lease's requests may need {needed:?}: the job did not \
                 start (raise the function's timeout, or lower the lease's ttl)",
                remaining = Dur(*remaining),
                needed = Dur(*needed)
            ),
            RunError::Stopped { token, ran_for } => write!(
                f,
                "the job (token {token}) was stopped after {ran_for:?}, before the time ran out; \
                 its tick is not recorded (a retry runs it)",
                ran_for = Dur(*ran_for)
            ),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for RunError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Lease(e) => Some(e),
            RunError::Settings(e) => Some(e),
            RunError::Tick(e) => Some(e),
            _ => None,
        }
    }
}

impl<E> From<SettingsError> for RunError<E> {
    fn from(e: SettingsError) -> Self {
        RunError::Settings(e)
    }
}

/// A step of a run, for the caller's logs.
#[derive(Debug)]
pub enum Step<'a> {
    /// The lease is ours: the job starts with its token.
    Acquired {
        /// The lease (its fencing token, its local deadline).
        lease: &'a Lease,
        /// The tick the run is for, if any: for a slot's run
        /// ([`Run::slot`]), the slot the store's clock chose.
        tick: Option<&'a str>,
        /// The seat taken, for a run in a pool ([`Run::pool`]): the
        /// lease is the seat's ([`seat_key`]).
        seat: Option<u32>,
    },
    /// Another run holds the lease: the job is skipped.
    Skipped(&'a Busy),
    /// An event of the renewals while the job runs (renewed, at risk,
    /// lost, a failed attempt).
    Hold(Event),
    /// The job finished and the lease was released: what the release
    /// says (given back, already lost, unknown).
    Released(&'a ReleaseOutcome),
    /// The job finished but the release failed: the lease expires on its
    /// own after the ttl.
    ReleaseFailed(&'a LeaseError),
}

/// What one run is ([`Leases::run`]): a plain run by default; for a tick
/// of a schedule ([`tick`](Run::tick)), on a schedule that names the
/// ticks missed ([`schedule`](Run::schedule)), within the time an
/// invocation has left ([`within`](Run::within)), with each step passed
/// to an observer ([`observe`](Run::observe)), waiting for the lease
/// ([`wait`](Run::wait)), in any free seat of a pool ([`pool`](Run::pool)).
/// `T` is the job's output, `O` the observer, `A` how a plain run takes
/// the lease ([`Take`]).
pub struct Run<'a, T, O = fn(Step<'_>), A = AtOnce> {
    /// The tick, and how its record keeps the job's output.
    tick: Option<(Which<'a>, Describe<T>)>,
    schedule: Option<&'a Schedule>,
    remaining: Option<Duration>,
    take: A,
    retention: Duration,
    observe: O,
}

/// How a run without a tick takes the lease: at once ([`AtOnce`], the
/// default), waiting while another holder's lease is live ([`Waiting`],
/// from [`Run::wait`]), or in any free seat of a pool ([`InPool`], from
/// [`Run::pool`]). A type, not a setting: a run that never waits (a
/// Worker's) carries no waiting code, and one that takes no pool's seat no
/// pool's.
pub trait Take: fmt::Debug + take::Sealed {
    /// The same, waiting up to a while ([`Run::wait`]).
    type Waited: Take;

    /// Takes the lease `cfg` names, taking over `claims`, waiting (if it
    /// waits) until `stop_at` at the latest, each operation ending by then
    /// too: a run with a time limit stops its job then, and waits no
    /// longer. With the seat taken, for a pool's.
    #[doc(hidden)]
    fn take<S: Store, C: Clock>(
        &self,
        leases: &Leases<S, C>,
        ask: Ask<'_>,
    ) -> impl Future<Output = Taken>;

    /// The same, waiting up to `wait`.
    #[doc(hidden)]
    fn waiting(self, wait: Duration) -> Self::Waited;

    /// How long it waits, if it does.
    #[doc(hidden)]
    fn wait(&self) -> Option<Duration>;

    /// The pool's size, for a pool's run.
    #[doc(hidden)]
    fn seats(&self) -> Option<u32> {
        None
    }
}

/// What a [`Take`] takes: the lease's settings, the claims it takes over
/// and when it must end.
pub(crate) type Ask<'a> = (&'a LeaseConfig, Vec<Claim>, Option<Mono>);

/// What a [`Take`] answers: the outcome, and the seat taken in a pool.
pub(crate) type Taken = Result<(AcquireOutcome, Option<u32>), LeaseError>;

mod take {
    /// Only this module's acquisitions are [`super::Take`]s.
    pub trait Sealed {}
    impl Sealed for super::AtOnce {}
    impl Sealed for super::Waiting {}
    impl Sealed for super::InPool {}
}

/// A plain run takes the lease if it is free, and is skipped otherwise.
#[derive(Clone, Copy, Debug, Default)]
pub struct AtOnce;

/// A plain run waits up to this long for the lease ([`Run::wait`]).
#[derive(Clone, Copy, Debug)]
pub struct Waiting(pub Duration);

/// A run takes any free seat of a pool of `seats` at its key
/// ([`Run::pool`]), waiting up to `wait` for one if set.
#[derive(Clone, Copy, Debug)]
pub struct InPool {
    /// The pool's size.
    pub seats: u32,
    /// How long it waits for a seat ([`Run::wait`]).
    pub wait: Option<Duration>,
}

impl Take for AtOnce {
    type Waited = Waiting;

    /// As [`Leases::acquire`] (and recorded as one).
    async fn take<S: Store, C: Clock>(&self, leases: &Leases<S, C>, ask: Ask<'_>) -> Taken {
        let (cfg, claims, stop_at) = ask;
        let cfg = leases.ending_by(cfg, stop_at);
        let acquired = leases.acquire_recorded(leases.store(), cfg, claims).await;
        acquired.map(|outcome| (outcome, None))
    }

    fn waiting(self, wait: Duration) -> Waiting {
        Waiting(wait)
    }

    fn wait(&self) -> Option<Duration> {
        None
    }
}

impl Take for Waiting {
    type Waited = Waiting;

    /// As [`Leases::acquire_within`] (which keeps its attempts' claims),
    /// for no longer than the run has: its last attempt starts while the
    /// acquisition's own share of the time ([`release_reserve`]) is left
    /// before `stop_at`, and each attempt ends by `stop_at`, so that a
    /// lease it wins is won before the job's time is up. (The run's start
    /// checked that one attempt fits.)
    async fn take<S: Store, C: Clock>(&self, leases: &Leases<S, C>, ask: Ask<'_>) -> Taken {
        let (cfg, _claims, stop_at) = ask;
        let wait = wait_within(self.0, cfg, stop_at, leases.clock().now().mono);
        let acquired = leases.acquire_waiting(&cfg.key, wait, stop_at).await;
        acquired.map(|outcome| (outcome, None))
    }

    fn waiting(self, wait: Duration) -> Waiting {
        Waiting(wait)
    }

    fn wait(&self) -> Option<Duration> {
        Some(self.0)
    }
}

impl Take for InPool {
    type Waited = InPool;

    /// Any free seat of the pool at `cfg`'s key, waiting as [`Waiting`]
    /// does if told to ([`Leases::take_seat`]).
    async fn take<S: Store, C: Clock>(&self, leases: &Leases<S, C>, ask: Ask<'_>) -> Taken {
        let (cfg, _claims, stop_at) = ask;
        let now = leases.clock().now().mono;
        let wait = self
            .wait
            .map_or(Duration::ZERO, |wait| wait_within(wait, cfg, stop_at, now));
        let taken = leases.take_seat(&cfg.key, self.seats, wait, stop_at).await;
        taken.map(|(outcome, seat)| (outcome, Some(seat)))
    }

    fn waiting(self, wait: Duration) -> InPool {
        InPool {
            wait: Some(wait),
            ..self
        }
    }

    fn wait(&self) -> Option<Duration> {
        self.wait
    }

    fn seats(&self) -> Option<u32> {
        Some(self.seats)
    }
}

/// How long a run waits for the lease, told `wait`, starting at `now`: no
/// longer than leaves an acquisition's time ([`release_reserve`]) before
/// `stop_at`.
fn wait_within(wait: Duration, cfg: &LeaseConfig, stop_at: Option<Mono>, now: Mono) -> Duration {
    match stop_at.filter(|_| !mutant!(UncappedWait)) {
        Some(at) if at > now => wait.min((at - now).saturating_sub(release_reserve(cfg))),
        Some(_) => Duration::ZERO,
        None => wait,
    }
}

/// How a tick's record keeps a job's output: as text.
type Describe<T> = fn(&T) -> String;

/// Which tick a run is for: one given, or a schedule's slot chosen by the
/// store's clock, by a function that only [`Run::slot`] names (a Worker,
/// which never runs a slot, does not carry the slot's arithmetic).
#[derive(Clone, Copy, Debug)]
enum Which<'a> {
    Tick(&'a Tick),
    Slot(&'a Slots, SlotAt),
}

/// [`Slots::tick_at`].
type SlotAt = fn(&Slots, UnixMillis) -> Result<(Tick, Option<Duration>), TickError>;

impl<T> Default for Run<'_, T> {
    fn default() -> Self {
        Run::new()
    }
}

impl<'a, T> Run<'a, T> {
    /// A plain run: the job runs if the lease is free, whatever ran
    /// before.
    pub fn new() -> Self {
        Run {
            tick: None,
            schedule: None,
            remaining: None,
            take: AtOnce,
            retention: TICK_RETENTION,
            observe: |_| {},
        }
    }
}

impl<'a, T, O, A> Run<'a, T, O, A> {
    /// The run is for `tick` (see [the client layer](crate::client)): a tick already
    /// completed answers [`RunOutcome::AlreadyRan`] without running the
    /// job, and a run that completes records the tick with its output as
    /// text. Needs the cas or epochs protocol ([`RunError::Tick`]
    /// otherwise).
    pub fn tick(mut self, tick: &'a Tick) -> Self
    where
        T: fmt::Display,
    {
        self.tick = Some((Which::Tick(tick), T::to_string));
        self
    }

    /// The run is for the slot of `slots` that contains its start by the
    /// store's clock, read from the `Date` of the read that checks the
    /// record ([`Slots`]): runs on hosts whose clocks disagree agree on the
    /// slot. Otherwise as [`tick`](Self::tick): a slot already completed
    /// answers [`RunOutcome::AlreadyRan`], one still running elsewhere
    /// [`RunOutcome::Skipped`]; and a start later into the slot than
    /// [`Slots::late_after`] allows answers [`RunOutcome::TooLate`]. The
    /// slot's schedule is the run's ([`schedule`](Self::schedule)), for
    /// the ticks it missed.
    pub fn slot(mut self, slots: &'a Slots) -> Self
    where
        T: fmt::Display,
    {
        self.tick = Some((Which::Slot(slots, Slots::tick_at), T::to_string));
        self.schedule = Some(slots.schedule());
        self
    }

    /// The job runs on `schedule`: a run for a tick with a scheduled time
    /// reports the ticks that never ran since the newest completed one
    /// ([`RunOutcome::Ran`]'s `missed`, [`crate::schedule`]).
    pub fn schedule(mut self, schedule: &'a Schedule) -> Self {
        self.schedule = Some(schedule);
        self
    }

    /// The invocation has `remaining` left (Lambda's context deadline, a
    /// Worker's limit): the run refuses to start when the lease's own
    /// requests may not fit ([`RunError::NoTime`]), and stops the job
    /// [`release_reserve`] before the time runs out, releasing the lease
    /// ([`RunError::Stopped`]), instead of being killed holding it.
    pub fn within(mut self, remaining: Duration) -> Self {
        self.remaining = Some(remaining);
        self
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

    /// A run without a tick waits up to `wait` while another holder's
    /// lease is live, as [`Leases::acquire_within`] does, and is skipped
    /// only after that; with a time limit ([`within`](Self::within)), its
    /// last attempt still leaves an acquisition's time ([`release_reserve`])
    /// before its job would be stopped. A run for a tick never waits: a
    /// tick busy elsewhere is being run there.
    pub fn wait(self, wait: Duration) -> Run<'a, T, O, A::Waited>
    where
        A: Take,
    {
        self.taking(|take| take.waiting(wait))
    }

    /// The run's key names a pool of `seats` leases ([`seat_key`]: seats
    /// `<key>/seat-0` to `<key>/seat-<seats - 1>`), and the job runs in
    /// any free one: at most `seats` such jobs run at once, each with its
    /// seat's fencing token. Busy when every seat is; with
    /// [`wait`](Self::wait) (before or after), it waits for one to free.
    /// The seat taken is in [`Step::Acquired`] and [`RunOutcome::Ran`]. A
    /// pool has from 1 to [`MAX_SEATS`](crate::client::MAX_SEATS) seats,
    /// and no tick (a tick runs once, in one place): [`RunError::Settings`]
    /// otherwise, before any request. Every run of a pool should give the
    /// same `seats`: a smaller pool leaves its seats above alone (a run of
    /// the larger one still takes them), and no seat's object is deleted.
    pub fn pool(self, seats: u32) -> Run<'a, T, O, InPool>
    where
        A: Take,
    {
        self.taking(|take| InPool {
            seats,
            wait: take.wait(),
        })
    }

    /// The run, taking the lease as `make` says from how it did.
    fn taking<B>(self, make: impl FnOnce(A) -> B) -> Run<'a, T, O, B> {
        Run {
            tick: self.tick,
            schedule: self.schedule,
            remaining: self.remaining,
            take: make(self.take),
            retention: self.retention,
            observe: self.observe,
        }
    }

    /// Each step of the run is passed to `observe` (for logs).
    pub fn observe<P: FnMut(Step<'_>)>(self, observe: P) -> Run<'a, T, P, A> {
        self.map_observer(|_| observe)
    }

    /// The run with its observer made from the one it has.
    pub(crate) fn map_observer<P>(self, make: impl FnOnce(O) -> P) -> Run<'a, T, P, A> {
        Run {
            tick: self.tick,
            schedule: self.schedule,
            remaining: self.remaining,
            take: self.take,
            retention: self.retention,
            observe: make(self.observe),
        }
    }

    /// The time the invocation had left, if known.
    pub fn remaining(&self) -> Option<Duration> {
        self.remaining
    }

    /// The pool's size, for a run in a pool ([`pool`](Self::pool)).
    pub fn seats(&self) -> Option<u32>
    where
        A: Take,
    {
        self.take.seats()
    }
}

impl<T, O, A: fmt::Debug> fmt::Debug for Run<'_, T, O, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("tick", &self.tick.map(|(t, _)| t))
            .field("schedule", &self.schedule)
            .field("remaining", &self.remaining)
            .field("take", &self.take)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

/// How long a lease record keeps completed ticks unless set otherwise
/// ([`Run::tick_retention`]): longer than the platforms retry a
/// delivery (Lambda's asynchronous retries, up to six hours).
pub const TICK_RETENTION: Duration = Duration::from_secs(24 * 3600);

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
pub(crate) fn enough_time<E>(cfg: &LeaseConfig, remaining: Duration) -> Result<(), RunError<E>> {
    let needed = time_needed(cfg);
    if remaining < needed {
        return Err(RunError::NoTime { remaining, needed });
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
    /// The run started this late into its slot, later than allowed.
    TooLate(Tick, Duration),
    /// The tick cannot run: another payload, or no slot.
    Refused(TickError),
    /// It did not run: how to go on, for which tick.
    Start(Box<(TickStart, Tick)>),
}

/// How a run goes on.
enum TickStart {
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

/// The answer for a tick the record taken over shows completed (between
/// the tick's read and the acquisition), if it does.
fn ran_already<T, E>(tick: &Tick, lease: &Lease) -> Option<Result<RunOutcome<T>, RunError<E>>> {
    let taken_over = if mutant!(IgnoreCompletedTicks) {
        &[][..]
    } else {
        &lease.record.runs[..]
    };
    match tick.find(taken_over) {
        Ok(None) => None,
        Ok(Some(run)) => Some(Ok(run.clone().into())),
        Err(e) => Some(Err(RunError::Tick(e))),
    }
}

/// The completed run of `tick` with `token`, finished at `now`, stamped on
/// the store's clock as the lease last read it (`lease_clock`), with the
/// oldest finish time the record keeps (`retention` before it).
fn tick_run(
    tick: &Tick,
    token: u64,
    (date, anchor): (StoreDate, Mono),
    now: Mono,
    retention: Duration,
    result: &str,
) -> (TickRun, UnixMillis) {
    let finished_at = UnixMillis(date.unix_ms.0 + (now - anchor).as_millis() as u64);
    let oldest = UnixMillis(finished_at.0.saturating_sub(retention.as_millis() as u64));
    (TickRun::new(tick, token, finished_at, Some(result)), oldest)
}

/// An acquisition that took the time the job had: `NoTime`, with what
/// was left at `now` of the run's time (`limit`).
fn no_time_left<T, E>(
    cfg: &LeaseConfig,
    limit: Option<HoldLimit>,
    now: Mono,
) -> Result<RunOutcome<T>, RunError<E>> {
    let end = limit.map_or(now, |l| l.end);
    Err(RunError::NoTime {
        remaining: if end > now { end - now } else { Duration::ZERO },
        needed: release_reserve(cfg),
    })
}

/// How a run for a tick goes on after the read that checks the record:
/// acquiring (how, for which tick), or answered (`Err`: already ran, too
/// late, refused, the read failed).
#[allow(clippy::type_complexity)]
fn tick_read<T, E>(
    read: Result<TickRead, LeaseError>,
) -> Result<(TickStart, Option<Box<Tick>>), Result<RunOutcome<T>, RunError<E>>> {
    match read {
        Ok(TickRead::Completed(run)) => Err(Ok(run.into())),
        Ok(TickRead::TooLate(tick, late)) => Err(Ok(RunOutcome::TooLate {
            tick: tick.id().to_string(),
            late_by_ms: late.as_millis() as u64,
        })),
        Ok(TickRead::Refused(e)) => Err(Err(RunError::Tick(e))),
        Ok(TickRead::Start(start)) => {
            let (start, tick) = *start;
            Ok((start, Some(Box::new(tick))))
        }
        Err(e) => Err(Err(RunError::Lease(e))),
    }
}

/// Why a run cannot start, before any request: a tick on the mutex (which
/// keeps no record), a pool of a size there cannot be, or for a tick.
fn refused<E>(cfg: &LeaseConfig, for_tick: bool, seats: Option<u32>) -> Result<(), RunError<E>> {
    if let Some(seats) = seats {
        check_seats(seats)?;
        if for_tick {
            return Err(RunError::Settings(SettingsError::Invalid {
                variable: "pool",
                reason: "a run for a tick runs once, in one place: it cannot take a pool's seat"
                    .into(),
            }));
        }
    }
    if for_tick && cfg.protocol == Protocol::Mutex {
        return Err(RunError::Tick(TickError::NoRecord));
    }
    Ok(())
}

/// The ticks of `schedule` that never ran between the newest completed one
/// the record taken over shows and `tick`.
fn missed_since(tick: &Tick, lease: &Lease, schedule: Option<&Schedule>) -> Option<MissedTicks> {
    let since = tick.previous(&lease.record.runs)?;
    schedule?.missed(since, tick.scheduled()?)
}

/// How a run that held the lease (`token`, in `seat` of a pool) ended: its
/// job's output with whether a tick's run was recorded (`for_tick`), or
/// why it failed. `ran_for`: the time since the run started.
fn ran<T, E>(
    held: Held<Ended<T, E>>,
    (token, seat, for_tick): (u64, Option<u32>, bool),
    missed: Option<MissedTicks>,
    ran_for: impl FnOnce() -> Duration,
    mut observe: impl FnMut(Step<'_>),
) -> Result<RunOutcome<T>, RunError<E>> {
    match held {
        Held::Finished { output, released } => {
            match &released {
                Some(Ok(r)) => observe(Step::Released(r)),
                Some(Err(e)) => observe(Step::ReleaseFailed(e)),
                None => {}
            }
            let recorded = matches!(released, Some(Ok(ReleaseOutcome::Released { .. })));
            match output {
                Ended::Done(Ok(output)) => Ok(RunOutcome::Ran {
                    token,
                    output,
                    recorded: for_tick && recorded,
                    missed,
                    seat,
                }),
                Ended::Done(Err(e)) => Err(RunError::Job(e)),
                Ended::Stopped => Err(RunError::Stopped {
                    token,
                    ran_for: ran_for(),
                }),
            }
        }
        Held::Overrun { token, late_by, .. } => Err(RunError::Overrun { token, late_by }),
        Held::Lost { token, reason } => Err(RunError::LeaseLost { token, reason }),
    }
}

impl<S: Store, C: Clock> Leases<S, C> {
    /// Runs `job` at `key` as `run` says (see [the client layer](crate::client)): with the
    /// fencing token, if this run gets the lease; skipped when another run
    /// holds it; for a tick, answered from the record when the tick ran
    /// already.
    pub async fn run<T, E, F, Fut, O, A>(
        &self,
        key: &str,
        run: Run<'_, T, O, A>,
        job: F,
    ) -> Result<RunOutcome<T>, RunError<E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        O: FnMut(Step<'_>),
        A: Take,
    {
        let Run {
            tick: for_tick,
            schedule,
            remaining,
            take,
            retention,
            mut observe,
        } = run;
        let cfg = self.config(key);
        refused(&cfg, for_tick.is_some(), take.seats())?;
        let clock = self.clock();
        let started = clock.now().mono;
        let limit = self.run_budget(key, &cfg, remaining, started).await?;
        let stop_at = limit.map(|l| l.stop);
        let held_limit = limit.filter(|_| !mutant!(RunOpsPastTimeLimit));
        let which = for_tick.as_ref().map(|(which, _)| *which);
        let acquired = self.run_acquire(key, &cfg, (which, &take, stop_at), &mut observe);
        let past_stop = || stop_at.is_some_and(|at| clock.now().mono >= at);
        let (lease, tick, seat) = match acquired.await {
            Ok(acquired) => acquired,
            // Cut short at the job's stop time: no time left (its unknown
            // writes are kept as claims).
            Err(Err(RunError::Lease(LeaseError::GaveUp { .. }))) if past_stop() => {
                return no_time_left(&cfg, limit, clock.now().mono)
            }
            Err(ended) => return ended,
        };
        let tick = tick.as_deref();
        let token = lease.token;
        // In a pool, the lease is the seat's.
        let cfg = seat.map_or(cfg, |seat| self.config(&seat_key(key, seat)));
        // The tick may have been completed between the read and the
        // acquisition (the record taken over says so), or the acquisition
        // took the time the job had: the lease is given back untouched and
        // the job does not run.
        let late = past_stop().then(|| no_time_left(&cfg, limit, clock.now().mono));
        if let Some(answer) = tick.and_then(|t| ran_already(t, &lease)).or(late) {
            self.give_back_unrun(&cfg, lease, held_limit.map(|l| l.end))
                .await;
            return answer;
        }
        let missed = tick.and_then(|tick| missed_since(tick, &lease, schedule));
        observe(Step::Acquired {
            lease: &lease,
            tick: tick.map(Tick::id),
            seat,
        });
        let lease_clock = lease.clock;
        let complete = |output: &Ended<T, E>| match (tick, &for_tick, output) {
            (Some(tick), Some((_, describe)), Ended::Done(Ok(output))) => {
                let (now, result) = (clock.now().mono, describe(output));
                Some(tick_run(tick, token, lease_clock, now, retention, &result))
            }
            _ => None,
        };
        let work = until(job(token), stop_at.map(|at| clock.sleep_until(at)));
        let hold = (lease, tick.is_none(), held_limit);
        let held = self
            .hold_run(&cfg, hold, work, &mut observe, complete)
            .await;
        let took = || clock.now().mono - started;
        ran(held, (token, seat, tick.is_some()), missed, took, observe)
    }

    /// A run's time, before its first request, when it has a limit: the
    /// instant its job is stopped, keeping the release's time before its
    /// end (an acquisition and the renewals end by the stop, the release
    /// by the end). A run that may not fit does not send a request (not
    /// even the probe's), and the probe's time is the run's.
    async fn run_budget<E>(
        &self,
        key: &str,
        cfg: &LeaseConfig,
        remaining: Option<Duration>,
        started: Mono,
    ) -> Result<Option<HoldLimit>, RunError<E>> {
        let Some(remaining) = remaining else {
            self.check_store_within(key, None)
                .await
                .map_err(RunError::Lease)?;
            return Ok(None);
        };
        enough_time(cfg, remaining)?;
        self.check_store_within(key, Some(remaining))
            .await
            .map_err(RunError::Lease)?;
        let spent = self.clock().now().mono - started;
        enough_time(cfg, remaining.saturating_sub(spent))?;
        Ok(Some(HoldLimit {
            stop: started + (remaining - release_reserve(cfg)),
            end: started + remaining,
        }))
    }

    /// A run's acquisition (from the tick's read, for a tick; as `take`
    /// says for a plain run): the lease, valid now, or how
    /// the run ends without one. What may be left of ours on the store is
    /// kept as a claim.
    async fn run_acquire<T, E>(
        &self,
        key: &str,
        cfg: &LeaseConfig,
        (which, take, stop_at): (Option<Which<'_>>, &impl Take, Option<Mono>),
        observe: &mut impl FnMut(Step<'_>),
    ) -> Result<(Lease, Option<Box<Tick>>, Option<u32>), Result<RunOutcome<T>, RunError<E>>> {
        // Broken on purpose (a test build only): the acquisition forgets
        // the earlier runs' claims.
        #[cfg(lease_mutants)]
        if mutant!(ForgetClaimsOnAcquire) {
            self.forget_claims(key);
        }
        let claims = self.claims(key);
        let (start, tick) = match which {
            Some(which) => {
                let cfg = self.ending_by(cfg, stop_at);
                tick_read(self.tick_start(&cfg, which, &claims).await)?
            }
            None => (TickStart::Acquire(None), None),
        };
        let acquired = match start {
            TickStart::Busy(seen) => Ok((AcquireOutcome::Busy(Busy::seen(seen)), None)),
            // After the tick's read: the acquisition goes on from it.
            TickStart::Acquire(Some(seen)) if seen.free => {
                let op = LeaseOp::acquire_from(self.ending_by(cfg, stop_at), self.entropy(), &seen);
                self.call(op.with_claims(claims)).await.map(|o| (o, None))
            }
            TickStart::Create(at) => {
                let op = LeaseOp::acquire_absent(self.ending_by(cfg, stop_at), self.entropy(), at);
                self.call(op.with_claims(claims)).await.map(|o| (o, None))
            }
            // A plain run: as its `Take` says (only it may wait, or take a
            // pool's seat).
            TickStart::Acquire(None) if tick.is_none() => {
                take.take(self, (cfg, claims, stop_at)).await
            }
            // As `acquire` (and recorded as one).
            TickStart::Acquire(_) => AtOnce.take(self, (cfg, claims, stop_at)).await,
        };
        let (acquired, seat) = match acquired {
            Ok((outcome, seat)) => (Ok(outcome), seat),
            Err(e) => (Err(e), None),
        };
        let lease = match acquired {
            Ok(AcquireOutcome::Acquired(lease)) => lease,
            Ok(AcquireOutcome::Busy(busy)) => {
                self.keep_claims(&busy.unsettled);
                observe(Step::Skipped(&busy));
                return Err(Ok(RunOutcome::skipped(busy)));
            }
            Err(e) => {
                self.keep_claims(e.unsettled());
                return Err(Err(RunError::Lease(e)));
            }
        };
        // Not one instant on a lease past its deadline: the job is not
        // even built.
        if !lease.is_valid(self.clock().now().mono) && !mutant!(TrustLateWin) {
            let seat_cfg = seat.map(|seat| self.config(&seat_key(key, seat)));
            let claim = Claim::of_lease(seat_cfg.as_ref().unwrap_or(cfg), &lease);
            self.keep_claims(core::slice::from_ref(&claim));
            return Err(Err(RunError::Lease(LeaseError::WonTooLate {
                token: lease.token,
                released: false,
                unsettled: Box::new([claim]),
            })));
        }
        Ok((lease, tick, seat))
    }

    /// Gives `lease` back untouched (its job did not run), by the run's
    /// `end` if it has one. A release that failed leaves the record as
    /// ours: a claim the next run takes over.
    async fn give_back_unrun(&self, cfg: &LeaseConfig, lease: Lease, end: Option<Mono>) {
        let claim = Claim::of_lease(cfg, &lease);
        let mut release = LeaseOp::release(cfg.clone(), self.entropy(), lease);
        if let Some(end) = end {
            release = release.with_deadline(end);
        }
        if self.call(release).await.is_err() {
            self.add_claims(&cfg.key, [claim]);
        }
    }

    /// Holds `lease` (recorded as a plain run when `record` says so) while
    /// `work` runs, each holder event observed, within the run's time
    /// `limit` if it has one. Unless its release gave the
    /// lease back, the lease as last renewed is left as a claim: what a
    /// record of ours left behind (a renewal in flight at a loss, a release
    /// that failed) is, so that the next run takes it over instead of
    /// skipping behind it.
    async fn hold_run<T>(
        &self,
        cfg: &LeaseConfig,
        (lease, record, limit): (Lease, bool, Option<HoldLimit>),
        work: impl Future<Output = T>,
        observe: &mut impl FnMut(Step<'_>),
        complete: impl FnOnce(&T) -> Option<(TickRun, UnixMillis)>,
    ) -> Held<T> {
        // (A mutex, not a cell: the run's future stays `Send`.)
        let last = Mutex::new(lease.clone());
        let on_event = |event| {
            if let (Event::Renewed { token, valid_until }, false) =
                (&event, mutant!(ClaimOfFirstLease))
            {
                let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
                last.token = *token;
                last.valid_until = *valid_until;
            }
            observe(Step::Hold(event))
        };
        let held = self
            .hold_on(cfg, (lease, record, limit), work, on_event, complete)
            .await;
        let last = last.into_inner().unwrap_or_else(PoisonError::into_inner);
        self.leave_claim(cfg, &held, last);
        held
    }

    /// After a held run: unless its release gave the lease back, the
    /// lease as last renewed is left as a claim.
    fn leave_claim<T>(&self, cfg: &LeaseConfig, held: &Held<T>, last: Lease) {
        let given_back = matches!(
            held,
            Held::Finished {
                released: Some(Ok(_)),
                ..
            }
        );
        let expired = matches!(
            held,
            Held::Lost {
                reason: LostReason::Expired,
                ..
            }
        );
        if !given_back && (expired || !mutant!(ClaimOfFirstLease)) {
            self.add_claims(&cfg.key, [Claim::of_lease(cfg, &last)]);
        }
    }

    /// The read before a tick's acquisition: the record's completed ticks
    /// and whether another run holds the lease.
    async fn tick_start(
        &self,
        cfg: &LeaseConfig,
        which: Which<'_>,
        claims: &[Claim],
    ) -> Result<TickRead, LeaseError> {
        let mut op = LeaseOp::inspect(cfg.clone(), self.entropy());
        let seen = drive(&mut op, self.store(), self.clock(), |_| {}).await?;
        let tick = match which {
            Which::Tick(tick) => tick.clone(),
            // The slot that contains the read, by the store's clock.
            Which::Slot(slots, slot_at) => {
                let date = match &seen {
                    Some(seen) => Some(seen.date),
                    None => op.store_clock().map(|(date, _)| date),
                };
                let Some(date) = date else {
                    return Ok(TickRead::Refused(TickError::NoSlot(
                        "the store's reply had no Date, which chooses the slot".into(),
                    )));
                };
                let at = if mutant!(SlotByLocalClock) {
                    self.clock().now().wall
                } else {
                    date.earliest()
                };
                match slot_at(slots, at) {
                    Ok((tick, None)) => tick,
                    Ok((tick, Some(_))) if mutant!(IgnoreLateAfter) => tick,
                    Ok((tick, Some(late))) => return Ok(TickRead::TooLate(tick, late)),
                    Err(e) => return Ok(TickRead::Refused(e)),
                }
            }
        };
        let Some(seen) = seen else {
            let start = match op.store_clock() {
                Some(clock) => TickStart::Create(clock),
                None => TickStart::Acquire(None),
            };
            return Ok(TickRead::Start(Box::new((start, tick))));
        };
        let runs = if mutant!(IgnoreCompletedTicks) {
            &[][..]
        } else {
            &seen.record.runs[..]
        };
        match tick.find(runs) {
            Ok(Some(run)) => return Ok(TickRead::Completed(run.clone())),
            Err(e) => return Ok(TickRead::Refused(e)),
            Ok(None) => {}
        };
        // A record of ours from an earlier run is taken over by the
        // acquire (it knows the claim); another's live one is busy.
        let ours = claims
            .iter()
            .any(|c| c.acquisition == seen.record.acquisition);
        let start = if seen.free || ours {
            TickStart::Acquire(Some(seen))
        } else {
            TickStart::Busy(seen)
        };
        Ok(TickRead::Start(Box::new((start, tick))))
    }
}

impl<T> RunOutcome<T> {
    fn skipped(busy: Busy) -> Self {
        RunOutcome::Skipped {
            holder: busy.holder,
            token: busy.token,
            expires_at_ms: busy.expires_at.0,
        }
    }
}

impl<T> From<TickRun> for RunOutcome<T> {
    /// The outcome for a tick the record shows completed.
    fn from(run: TickRun) -> Self {
        RunOutcome::AlreadyRan {
            tick: run.tick,
            token: run.token,
            finished_at_ms: run.finished_at.0,
            result: run.result,
        }
    }
}
