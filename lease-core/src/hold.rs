//! Holding a lease while some work runs: what the `lease run` command, the
//! Lambda singleton and the Workers cron helper share.
//!
//! [`hold_while`] renews the lease in the background (an
//! [`Elector::hold`]) while `work` runs. If the work finishes first, the
//! lease is released and the work's output returned; if the lease is lost
//! first (a renewal refused, the local deadline passed), the work future is
//! dropped at once (cancelled) and the loss reported. Dropping is all a
//! future can be told; a child process must be stopped by the caller.
//!
//! Runtime-agnostic like [`drive`](crate::drive): no executor, no spawning.

use crate::config::LeaseConfig;
use crate::drive::{drive_until, Clock, Store};
use crate::elector::{Elector, ElectorExit};
use crate::entropy::Entropy;
use crate::machine::{Event, Lease, LeaseError, LostReason, OpOutcome};
use core::cell::Cell;
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;

/// How holding ended.
// Returned once per hold: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Held<T> {
    /// The work finished while the lease was held; the lease was then
    /// released (`released` is that outcome: an error there only means the
    /// lease expires on its own).
    Finished {
        /// The work's output.
        output: T,
        /// The release's outcome.
        released: Option<Result<OpOutcome, LeaseError>>,
    },
    /// The lease was lost before the work finished; the work was dropped.
    Lost {
        /// The token that was lost.
        token: u64,
        /// Why.
        reason: LostReason,
    },
}

/// Runs `work` while holding `lease` (see the module docs). `entropy`
/// seeds the renewals' nonces; `on_event` sees the elector's events
/// (renewals, at-risk, loss).
pub async fn hold_while<T>(
    cfg: &LeaseConfig,
    store: &impl Store,
    clock: &impl Clock,
    entropy: Entropy,
    lease: Lease,
    work: impl Future<Output = T>,
    on_event: impl FnMut(Event),
) -> Held<T> {
    let token = lease.token;
    let mut elector = Elector::hold(cfg.clone(), entropy, lease);
    // Set once the work is done; the holding future is polled right after,
    // so its stop signal needs no waker of its own.
    let done = Cell::new(false);
    let stop = poll_fn(|_| {
        if done.get() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    });
    let mut holding = pin!(drive_until(&mut elector, store, clock, on_event, stop));
    let mut work = pin!(work);
    // The work first: work that is done is done, whatever the renewals
    // found meanwhile (the lease was held when it finished).
    let output = poll_fn(|cx| {
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
    // The work is done: resign, which releases the lease.
    done.set(true);
    match holding.await {
        ElectorExit::Resigned { released } => Held::Finished { output, released },
        // Lost while resigning: the work had finished while it was held.
        ElectorExit::Lost(reason) => Held::Finished {
            output,
            released: Some(Ok(OpOutcome::AlreadyLost(reason))),
        },
    }
}

fn lost<T>(token: u64, exit: ElectorExit) -> Held<T> {
    match exit {
        ElectorExit::Lost(reason) => Held::Lost { token, reason },
        // A holder resigns only when asked, and nobody asked yet.
        ElectorExit::Resigned { .. } => Held::Lost {
            token,
            reason: LostReason::Expired,
        },
    }
}
