//! `lease run`'s supervision: work the caller can ask to stop and make stop
//! (a child process: TERM and KILL), run while a lease is held, and never
//! left running past the lease's deadline.
//!
//! [`Leases::supervise`] holds the lease ([`crate::client::hold`]) while the work
//! runs, and owns the stop schedule ([`stop_times`]):
//! - while renewals are confirmed, the deadline moves on and nothing is
//!   sent;
//! - when no renewal has been confirmed `grace` before the kill time (the
//!   lease's local deadline less its margin), the work is asked to stop
//!   ([`Supervised::terminate`]), and made to at the kill time
//!   ([`Supervised::kill`]) if it has not: KILL lands before the deadline
//!   even when no renewal reply ever comes;
//! - when the lease is lost (taken over, broken, a renewal refused), the
//!   work is asked to stop at once, and made to by the deadline it held
//!   (at once if that has passed).
//!
//! The work's own end is awaited in every case, so the caller learns its
//! status. What the supervisor does is passed to `on_step`, for logs and
//! the flight recorder's work span. Runtime-agnostic: the work's end and
//! the clock's sleeps are raced by polling, no executor needed.

use crate::client::hold::{check_grace, max_grace, stop_times, Held};
use crate::client::leases::Leases;
use crate::config::ConfigError;
use crate::config::LeaseConfig;
use crate::protocol::outcome::{Event, Lease, LeaseError, LostReason, ReleaseOutcome};
use crate::store::Store;
use crate::time::{Clock, Mono};
use core::cell::Cell;
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
    /// The lease was lost while the work ran: it was asked to stop, and
    /// is killed by the deadline it held.
    StoppingOnLoss,
    /// The work did not stop in time: it was killed.
    Killed,
    /// The work ended (its span ends), before the lease's release.
    Ended,
}

/// How a supervised run ended.
#[derive(Debug)]
pub enum Supervision<S> {
    /// The work ended while the lease was held, and the lease was released
    /// (`released`: that outcome; an error only means the lease expires on
    /// its own).
    Finished {
        /// The work's status.
        status: S,
        /// The release's outcome.
        released: Option<Result<ReleaseOutcome, LeaseError>>,
        /// The work was stopped because no renewal was confirmed in time
        /// ([`WorkStep::Stopping`]): it did not end of its own accord.
        stopped: bool,
    },
    /// The work ended after the lease's local deadline: it may have acted
    /// while another holder did.
    Overrun {
        /// The work's status.
        status: S,
        /// How long after the deadline it ended.
        late_by: Duration,
    },
    /// The lease was lost while the work ran; the work was stopped.
    Lost {
        /// The work's status.
        status: S,
        /// The token that was lost.
        token: u64,
        /// Why.
        reason: LostReason,
    },
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

impl<S: Store, C: Clock> Leases<S, C> {
    /// Runs `work` (already started) while holding `lease`, and stops it
    /// before the lease's deadline (see the [module docs](self)).
    /// `on_event` sees the renewals and the loss, `on_step` what the
    /// supervisor did. A `grace` the ttl cannot cover is refused
    /// ([`check_grace`]) before anything is done: check it before starting
    /// the work.
    pub async fn supervise<W: Supervised>(
        &self,
        lease: Lease,
        work: &mut W,
        grace: Duration,
        mut on_event: impl FnMut(Event),
        mut on_step: impl FnMut(WorkStep),
    ) -> Result<Supervision<W::Status>, ConfigError> {
        let cfg = self.config(&lease.key);
        check_grace(&cfg, grace)?;
        let clock = self.clock();
        // The deadline as renewals move it.
        let valid_until = Cell::new(lease.valid_until);
        let stopped = Cell::new(false);
        let step = Cell::new(Some(&mut on_step));
        let note = |s: WorkStep| {
            if let Some(f) = step.take() {
                f(s);
                step.set(Some(f));
            }
        };
        note(WorkStep::Started);
        let events = |event: Event| {
            if let Event::Renewed { valid_until: v, .. } = &event {
                valid_until.set(*v);
            }
            on_event(event)
        };
        let supervised = async {
            let mut termed = false;
            loop {
                let (term_at, kill_at) = stop_times(&cfg, valid_until.get(), grace);
                let next = if termed { kill_at } else { term_at };
                if let Woke::Ended(status) = until(work, clock, next).await {
                    note(WorkStep::Ended);
                    return status;
                }
                // The deadline may have moved while we slept.
                let (term_at, kill_at) = stop_times(&cfg, valid_until.get(), grace);
                let now = clock.now().mono;
                if !termed && now >= term_at {
                    termed = true;
                    stopped.set(true);
                    note(WorkStep::Stopping { grace });
                    work.terminate();
                } else if termed && now >= kill_at {
                    note(WorkStep::Killed);
                    work.kill();
                    let status = work.wait().await;
                    note(WorkStep::Ended);
                    return status;
                }
            }
        };
        let held = self.hold(lease, supervised, events).await;
        let outcome = match held {
            Held::Finished { output, released } => Supervision::Finished {
                status: output,
                released,
                stopped: stopped.get(),
            },
            Held::Overrun {
                output, late_by, ..
            } => Supervision::Overrun {
                status: output,
                late_by,
            },
            Held::Lost { token, reason } => {
                note(WorkStep::StoppingOnLoss);
                let (_, kill_at) = stop_times(&cfg, valid_until.get(), grace);
                Supervision::Lost {
                    status: stop_by(work, clock, kill_at, &note).await,
                    token,
                    reason,
                }
            }
        };
        Ok(outcome)
    }
}
