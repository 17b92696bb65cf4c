//! `lease run`'s supervision, [`Leases::supervise`] (see the layer's docs, `client/mod.rs`).

use crate::client::hold::{check_grace, max_grace, stop_times};
use crate::client::leases::Leases;
use crate::client::run::{release_reserve, Run, RunError, RunOutcome, Step, Take};
use crate::config::LeaseConfig;
use crate::protocol::outcome::{Event, LeaseError};
use crate::store::Store;
use crate::time::{Clock, Mono};
use core::cell::Cell;
use core::fmt;
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;
use std::time::Duration;

/// Work the supervisor can stop: a child process, or anything shaped like
/// one.
pub trait Supervised {
    /// What the work ends with (an exit status).
    type Status;

    /// The work's end. Cancel-safe: the future is dropped when a stop time
    /// comes first, and asked for again after.
    fn wait(&mut self) -> impl Future<Output = Self::Status>;

    /// Asks the work to stop (TERM): it has until the kill time.
    fn terminate(&mut self);

    /// Stops the work at once (KILL).
    fn kill(&mut self);

    /// Whether the work succeeded (a process: exit status 0): a run for a
    /// tick records the tick only then. By default, always.
    fn succeeded(status: &Self::Status) -> bool {
        let _ = status;
        true
    }
}

/// A step of the supervision, in order, for logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkStep {
    /// The work started under the lease (its span begins).
    Started,
    /// No renewal was confirmed in time: the work was asked to stop, and
    /// is killed `grace` later, before the lease's deadline.
    Stopping {
        /// The time it has.
        grace: Duration,
    },
    /// The lease was lost (or the run's time limit came) while the work
    /// ran: it was asked to stop, and is killed by the deadline it held.
    StoppingOnLoss,
    /// The work did not stop in time: it was killed.
    Killed,
    /// The work ended (its span ends), before the lease's release.
    Ended,
}

/// Why supervised work did not succeed ([`RunError::Job`] of
/// [`Leases::supervise`]); the lease was released in each case.
#[derive(Debug)]
pub enum WorkError<E, S> {
    /// The work could not be started.
    Start(E),
    /// The work ended without success ([`Supervised::succeeded`]): its
    /// status. A tick's run is not recorded (a retry runs it again).
    Failed(S),
    /// No renewal was confirmed in time, or the run's time limit came
    /// ([`Run::within`]): the work was stopped ([`WorkStep::Stopping`])
    /// and did not end of its own accord; its status. Not recorded
    /// either.
    Stopped(S),
}

impl<E: fmt::Display, S> fmt::Display for WorkError<E, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkError::Start(e) => write!(f, "the work could not start: {e}"),
            WorkError::Failed(_) => f.write_str("the work failed"),
            WorkError::Stopped(_) => f.write_str(
                "the work was stopped: no renewal was confirmed in time, or the run's time ran out",
            ),
        }
    }
}

/// The grace `lease run` gives CMD between TERM and KILL unless told
/// otherwise: 10 s, or the most the ttl allows ([`max_grace`]).
pub fn default_grace(cfg: &LeaseConfig) -> Duration {
    Duration::from_secs(10).min(max_grace(cfg))
}

/// What came first: the work's end or a time.
enum Woke<S> {
    Ended(S),
    Time,
}

/// The work's end, or `at`, whichever comes first.
async fn until<W: Supervised>(work: &mut W, clock: &impl Clock, at: Mono) -> Woke<W::Status> {
    let mut ended = pin!(work.wait());
    let mut time = pin!(clock.sleep_until(at));
    poll_fn(|cx| {
        if let Poll::Ready(status) = ended.as_mut().poll(cx) {
            return Poll::Ready(Woke::Ended(status));
        }
        time.as_mut().poll(cx).map(|()| Woke::Time)
    })
    .await
}

/// Taken over (or broken) while the work runs: TERM now, and KILL still
/// before our deadline (at once if that has passed); the work's status.
async fn stop_by<W: Supervised>(
    work: &mut W,
    clock: &impl Clock,
    kill_at: Mono,
    note: &impl Fn(WorkStep),
) -> W::Status {
    work.terminate();
    let status = match until(work, clock, kill_at).await {
        Woke::Ended(status) => status,
        Woke::Time => {
            note(WorkStep::Killed);
            work.kill();
            work.wait().await
        }
    };
    note(WorkStep::Ended);
    status
}

/// How long before a time-limited run lets go of the work it is killed:
/// the time a killed process has to end and be reaped.
const REAPED_WITHIN: Duration = Duration::from_secs(1);

/// When to TERM and KILL the work: before the lease's deadline
/// (`valid_until`, [`stop_times`]), and before the run's time limit, if it
/// has one, at which the run lets go of the work and releases the lease.
fn stop_at(
    cfg: &LeaseConfig,
    valid_until: Mono,
    limit: Option<Mono>,
    grace: Duration,
) -> (Mono, Mono) {
    let (term_at, kill_at) = stop_times(cfg, valid_until, grace);
    match limit {
        Some(limit) => (term_at.min(limit.saturating_sub(grace)), kill_at.min(limit)),
        None => (term_at, kill_at),
    }
}

/// The work's stop schedule while its lease is held (`valid_until`, moved
/// by renewals) and the run's time lasts (`limit`): its status once it
/// ended, and whether it was asked to stop.
async fn stop_schedule<W: Supervised>(
    work: &mut W,
    (cfg, clock): (&LeaseConfig, &impl Clock),
    (valid_until, limit): (&Cell<Mono>, Option<Mono>),
    grace: Duration,
    note: &impl Fn(WorkStep),
) -> (W::Status, bool) {
    let mut termed = false;
    loop {
        let (term_at, kill_at) = stop_at(cfg, valid_until.get(), limit, grace);
        let next = if termed { kill_at } else { term_at };
        if let Woke::Ended(status) = until(work, clock, next).await {
            note(WorkStep::Ended);
            return (status, termed);
        }
        // The deadline may have moved while we slept.
        let (term_at, kill_at) = stop_at(cfg, valid_until.get(), limit, grace);
        let now = clock.now().mono;
        if !termed && now >= term_at {
            termed = true;
            note(WorkStep::Stopping { grace });
            work.terminate();
        } else if termed && now >= kill_at {
            note(WorkStep::Killed);
            work.kill();
            let status = work.wait().await;
            note(WorkStep::Ended);
            return (status, true);
        }
    }
}

impl<S: Store, C: Clock> Leases<S, C> {
    /// Runs work at `key` as `run` says (see [the client layer](crate::client), *Supervised work*):
    /// when this run gets the lease, `start` starts the work with the
    /// fencing token, and the work is held under the lease and stopped
    /// before its deadline. The outcomes are [`Leases::run`]'s: the work's
    /// status when it succeeded ([`RunOutcome::Ran`]), skipped, already
    /// run, too late; [`RunError::Job`] says why the work did not succeed
    /// ([`WorkError`]), [`RunError::LeaseLost`] that it was stopped on a
    /// loss. `on_step` sees what the supervisor did. A `grace` the ttl
    /// cannot cover is refused ([`LeaseError::Config`], from
    /// [`check_grace`]) before any request. `start`'s future is dropped
    /// if the lease is lost while it runs: it should start the work as its
    /// last step (the supervisor can only stop work it was handed).
    pub async fn supervise<W, E, F, Fut, O, A>(
        &self,
        key: &str,
        run: Run<'_, W::Status, O, A>,
        start: F,
        grace: Duration,
        mut on_step: impl FnMut(WorkStep),
    ) -> Result<RunOutcome<W::Status>, RunError<WorkError<E, W::Status>>>
    where
        W: Supervised,
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = Result<W, E>>,
        O: FnMut(Step<'_>),
        A: Take,
    {
        let cfg = self.config(key);
        check_grace(&cfg, grace).map_err(|error| {
            RunError::Lease(LeaseError::Config {
                error,
                unsettled: Box::default(),
            })
        })?;
        let clock = self.clock();
        // The run lets go of the work `release_reserve` before its time
        // runs out (`Run::within`): the work is killed `REAPED_WITHIN`
        // before that, so that it never runs on while the lease is given
        // back.
        let limit = run.remaining().map(|left| {
            clock.now().mono + left.saturating_sub(release_reserve(&cfg) + REAPED_WITHIN)
        });
        // The deadline as the acquisition and the renewals set it.
        let valid_until = &Cell::new(Mono(0));
        let run = run.map_observer(|mut observe| {
            move |step: Step<'_>| {
                match &step {
                    Step::Acquired { lease, .. } => valid_until.set(lease.valid_until),
                    Step::Hold(Event::Renewed { valid_until: v, .. }) => valid_until.set(*v),
                    _ => {}
                }
                observe(step)
            }
        });
        let step = Cell::new(Some(&mut on_step));
        let note = |s: WorkStep| {
            if let Some(f) = step.take() {
                f(s);
                step.set(Some(f));
            }
        };
        // The work, outside the job's future: a loss drops that future,
        // and the work must still be stopped.
        let mut work: Option<W> = None;
        let ended = Cell::new(false);
        let (work_at, ended_at, note_at, cfg_at) = (&mut work, &ended, &note, &cfg);
        let job = move |token| {
            let starting = start(token);
            async move {
                let started = starting.await.map_err(WorkError::Start)?;
                let w = work_at.insert(started);
                note_at(WorkStep::Started);
                let (status, stopped) =
                    stop_schedule(w, (cfg_at, clock), (valid_until, limit), grace, note_at).await;
                ended_at.set(true);
                match (stopped, W::succeeded(&status)) {
                    (true, _) => Err(WorkError::Stopped(status)),
                    (false, true) => Ok(status),
                    (false, false) => Err(WorkError::Failed(status)),
                }
            }
        };
        let outcome = self.run(key, run, job).await;
        // Lost: the job's future was dropped with the work still running.
        if let (Some(w), false) = (work.as_mut(), ended.get()) {
            note(WorkStep::StoppingOnLoss);
            let (_, kill_at) = stop_at(&cfg, valid_until.get(), limit, grace);
            stop_by(w, clock, kill_at, &note).await;
        }
        outcome
    }
}
