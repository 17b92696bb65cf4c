//! Holding a lease while some work runs (see the layer's docs, `client/mod.rs`).

use crate::client::drive::drive_until;
use crate::config::{ConfigError, LeaseConfig};
#[cfg(doc)]
use crate::protocol::elector::Holder;
use crate::protocol::elector::HolderExit;
use crate::protocol::machine::{CallId, Machine, Output};
use crate::protocol::outcome::{Event, LeaseError, LostReason, ReleaseOutcome};
use crate::store::Store;
use crate::store::StoreReply;
use crate::tick::TickRun;
use crate::time::Clock;
use crate::time::{Mono, Now, UnixMillis};
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::task::Poll;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How holding ended.
// Returned once per hold: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Held<T> {
    /// The work finished while the lease was held; the lease was then
    /// released (`released` is that outcome: an error there only means the
    /// lease expires on its own).
    Finished {
        /// The work's output.
        output: T,
        /// The release's outcome. It speaks for the release's own writes:
        /// `AlreadyLost` says none of them changed the store. A renewal
        /// still in flight when the work finished may have extended the
        /// lease unreported; the release finds such a version and gives it
        /// back like the one in hand, or, if it lapsed first (the process
        /// paused) and another holder came in, says `AlreadyLost`.
        released: Option<Result<ReleaseOutcome, LeaseError>>,
    },
    /// The work finished, but after the lease's local deadline: it may
    /// have acted while another holder did. The lease was given back if it
    /// was still ours.
    Overrun {
        /// The token it ran with.
        token: u64,
        /// How long after the deadline it finished.
        late_by: Duration,
    },
    /// The lease was lost before the work finished; the work was dropped.
    Lost {
        /// The token that was lost.
        token: u64,
        /// Why.
        reason: LostReason,
    },
}

/// Runs `work` while holding the lease of the term `(token, deadline)`
/// (see the client layer's docs), renewed by `holder`; `on_event` sees the
/// holder's events (renewals, at-risk, loss). The release after work that
/// finished in time records the completed tick `complete` makes of its
/// output, if any (with the oldest finish time the record keeps; see
/// `crate::tick`), handed to the holder by `complete_tick`. A client that
/// records its machines passes the holder in its recording layer.
///
/// Longer than 80 lines: the race between the work, the holder and the
/// deadline, and the release after it, read in order in one place.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn hold_with<T, H: Machine<Outcome = HolderExit>>(
    store: &impl Store,
    clock: &impl Clock,
    (holder, complete_tick): (H, impl FnOnce(&mut H, TickRun, UnixMillis)),
    (token, valid_until): (u64, Mono),
    work: impl Future<Output = T>,
    on_event: impl FnMut(Event),
    complete: impl FnOnce(&T) -> Option<(TickRun, UnixMillis)>,
) -> Held<T> {
    let trusting = mutant!(TrustLateWin);
    if clock.now().mono >= valid_until && !trusting {
        // Won too late to be of use: the work never starts.
        return Held::Lost {
            token,
            reason: LostReason::Expired,
        };
    }
    // The deadline as renewals move it (the elector reports each one).
    // Atomics, not cells: the future stays `Send`.
    let valid_until = AtomicU64::new(valid_until.0);
    let deadline = || crate::time::Mono(valid_until.load(Ordering::Relaxed));
    let mut on_event = on_event;
    let track = |event: Event| {
        if let Event::Renewed { valid_until: v, .. } = &event {
            valid_until.store(v.0, Ordering::Relaxed);
        }
        on_event(event)
    };
    // The completed tick, handed to the holder as it is stopped.
    let completed = Mutex::new(None);
    let mut elector = Completing {
        holder,
        complete_tick: Some(complete_tick),
        completed: &completed,
    };
    // Set once the work is done; the holding future is polled right after,
    // so its stop signal needs no waker of its own.
    let done = AtomicBool::new(false);
    let stop = poll_fn(|_| {
        if done.load(Ordering::Relaxed) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    });
    let mut holding = pin!(drive_until(&mut elector, store, clock, track, stop));
    let mut work = pin!(work);
    // The deadline first: once it has passed, the work is dropped unpolled,
    // however late this wake-up came. Then the work (work that is done
    // while the lease is valid is done), then the renewals.
    let output = poll_fn(|cx| {
        if clock.now().mono >= deadline() && !trusting {
            return Poll::Ready(Err(HolderExit::Lost(LostReason::Expired)));
        }
        if let Poll::Ready(output) = work.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        holding.as_mut().poll(cx).map(Err)
    })
    .await;
    let output = match output {
        Ok(output) => output,
        Err(exit) => return lost(token, exit),
    };
    // Judged against the deadline the work ran under, before the resign
    // (a renewal settling meanwhile must not excuse it).
    let finished_at = clock.now().mono;
    let late_by = finished_at - deadline();
    let overrun = finished_at >= deadline();
    // The work is done: resign, which releases the lease (recording the
    // tick it completed).
    if !overrun {
        *completed.lock().unwrap_or_else(PoisonError::into_inner) = complete(&output);
    }
    done.store(true, Ordering::Relaxed);
    let exit = holding.await;
    if overrun {
        return Held::Overrun { token, late_by };
    }
    match exit {
        HolderExit::Resigned { released } => Held::Finished { output, released },
        // Lost while resigning: the work had finished while it was held.
        HolderExit::Lost(reason) => Held::Finished {
            output,
            released: Some(Ok(ReleaseOutcome::AlreadyLost(reason))),
        },
    }
}

/// A holder that is handed a completed tick as it is stopped.
struct Completing<'a, H, F> {
    holder: H,
    complete_tick: Option<F>,
    completed: &'a Mutex<Option<(TickRun, UnixMillis)>>,
}

impl<H: Machine<Outcome = HolderExit>, F: FnOnce(&mut H, TickRun, UnixMillis)> Machine
    for Completing<'_, H, F>
{
    type Outcome = HolderExit;

    fn poll(&mut self, now: Now) -> Output<HolderExit> {
        self.holder.poll(now)
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        self.holder.handle_reply(now, id, reply)
    }

    fn stop(&mut self, now: Now) {
        let completed = self
            .completed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((run, oldest)) = completed {
            if let Some(complete_tick) = self.complete_tick.take() {
                complete_tick(&mut self.holder, run, oldest);
            }
        }
        self.holder.stop(now)
    }
}

/// When to stop a child process that works under a lease valid until
/// `valid_until` (local monotonic time): TERM at the first instant, KILL
/// at the second, `grace` later and still `margin` before the deadline, so
/// the process is gone by then. A renewal confirmed before the TERM moves
/// both (recompute from the new deadline).
pub fn stop_times(
    cfg: &LeaseConfig,
    valid_until: crate::time::Mono,
    grace: Duration,
) -> (crate::time::Mono, crate::time::Mono) {
    let kill = valid_until.saturating_sub(cfg.margin);
    (kill.saturating_sub(grace), kill)
}

/// The longest grace period [`check_grace`] accepts at `cfg`'s ttl: the
/// time from the latest a renewal can be confirmed (`renew_every` +
/// `request_timeout` after the write) to the KILL (`margin` before the
/// write's local deadline), less a millisecond.
///
/// The write's local deadline is `ttl - date_resolution - drift` after its
/// send, where the drift is counted over `ttl` plus the age of the store
/// date it was stamped from (see `lease::stamp`). For a renewal that date
/// came with the reply to the previous write and is anchored at that
/// write's send, `renew_every` earlier: the drift is counted over `ttl +
/// renew_every`. (Counting it over `ttl` alone, as before, let the longest
/// grace TERM a healthy command `drift_rate * renew_every` before its
/// renewal was overdue: 99 ms at the default 30 s ttl.)
pub fn max_grace(cfg: &LeaseConfig) -> Duration {
    let deadline = cfg
        .ttl
        .saturating_sub(cfg.date_resolution + cfg.drift_margin(cfg.renew_every));
    deadline
        .saturating_sub(cfg.renew_every + cfg.request_timeout + cfg.margin)
        .saturating_sub(Duration::from_millis(1))
}

/// Refuses a grace period (TERM to KILL) that the ttl cannot cover: the
/// TERM for a deadline must come after the renewal that would move it has
/// had its chance (`renew_every` + `request_timeout` after the write), or
/// every renewal would stop the process.
pub fn check_grace(cfg: &LeaseConfig, grace: Duration) -> Result<(), ConfigError> {
    let max = max_grace(cfg);
    if grace > max {
        return Err(ConfigError::Grace { grace, max });
    }
    Ok(())
}

fn lost<T>(token: u64, exit: HolderExit) -> Held<T> {
    match exit {
        HolderExit::Lost(reason) => Held::Lost { token, reason },
        // A holder resigns only when asked, and nobody asked yet.
        HolderExit::Resigned { .. } => Held::Lost {
            token,
            reason: LostReason::Expired,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_must_leave_room_for_a_renewal() {
        // The figure docs/protocols.md quotes: at a 30 s ttl, grace under 13.4 s.
        let cfg = LeaseConfig::new("k", "h", Duration::from_secs(30));
        assert_eq!(max_grace(&cfg), Duration::from_millis(13_399));
        assert_eq!(check_grace(&cfg, Duration::from_secs(10)), Ok(()));
        assert_eq!(check_grace(&cfg, Duration::from_millis(13_399)), Ok(()));
        assert!(matches!(
            check_grace(&cfg, Duration::from_millis(13_400)),
            Err(ConfigError::Grace { .. })
        ));
        // A 3 s ttl leaves a few hundred milliseconds; 2 s is refused.
        let short = LeaseConfig::new("k", "h", Duration::from_secs(3));
        assert!(check_grace(&short, Duration::from_millis(200)).is_ok());
        let err = check_grace(&short, Duration::from_secs(2)).unwrap_err();
        assert!(err.to_string().contains("grace 2s is too long"), "{err}");
    }

    #[test]
    fn the_longest_grace_leaves_room_for_a_renewal_whose_date_anchor_has_aged() {
        // A renewal's deadline is stamped from the store date the previous
        // write's reply carried, anchored at that write's send time: a
        // renewal sent `renew_every` after it pays drift on `ttl +
        // renew_every`, not on `ttl` alone. With the longest grace
        // accepted, the TERM for that deadline must still come after the
        // next renewal has had its chance (sent `renew_every` after this
        // write, answered within `request_timeout`).
        for ttl_ms in [3_000, 6_000, 30_000, 300_000] {
            let cfg = LeaseConfig::new("k", "h", Duration::from_millis(ttl_ms));
            let grace = max_grace(&cfg);
            let previous_write = crate::time::Mono(50_000);
            let this_write = previous_write + cfg.renew_every;
            let anchor = (
                crate::time::StoreDate::from_http_date(crate::time::UnixMillis(1_700_000_000_000)),
                previous_write,
            );
            let now = crate::time::Now::new(this_write, crate::time::UnixMillis(0));
            let (_, valid_until) = crate::protocol::validity::stamp(&cfg, Some(anchor), now);
            let (term, kill) = stop_times(&cfg, valid_until, grace);
            let next_renewal_overdue = this_write + cfg.renew_every + cfg.request_timeout;
            assert!(
                term > next_renewal_overdue,
                "ttl {ttl_ms} ms: TERM at {term:?} before the next renewal is overdue at {next_renewal_overdue:?}"
            );
            assert!(kill < valid_until);
        }
    }

    #[test]
    fn kill_lands_a_margin_before_the_deadline_and_term_a_grace_before_that() {
        let cfg = LeaseConfig::new("k", "h", Duration::from_secs(30));
        let (term, kill) = stop_times(&cfg, crate::time::Mono(28_600), Duration::from_secs(10));
        assert_eq!(
            (term, kill),
            (crate::time::Mono(18_500), crate::time::Mono(28_500))
        );
    }
}
