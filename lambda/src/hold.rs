//! Holding a lease while some work runs: the piece the `lease run` command
//! and the Lambda singleton share.
//!
//! [`hold_while`] renews the lease in the background (an
//! [`Elector::hold`]) while `work` runs. If the work finishes first, the
//! lease is released and the work's output returned; if the lease is lost
//! first (a renewal refused, the local deadline passed), the work future is
//! dropped at once (cancelled) and the loss reported. Dropping is all a
//! future can be told; a child process must be stopped by the caller.

use crate::os_entropy;
use lease_core::config::LeaseConfig;
use lease_core::drive::{drive_until, Clock, Store};
use lease_core::elector::{Elector, ElectorExit};
use lease_core::machine::{Event, Lease, LeaseError, LostReason, OpOutcome};
use std::future::Future;
use std::pin::pin;

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

/// Runs `work` while holding `lease` (see the module docs). `on_event`
/// sees the elector's events (renewals, at-risk, loss).
pub async fn hold_while<T>(
    cfg: &LeaseConfig,
    store: &impl Store,
    clock: &impl Clock,
    lease: Lease,
    work: impl Future<Output = T>,
    on_event: impl FnMut(Event),
) -> Held<T> {
    let token = lease.token;
    let mut elector = Elector::hold(cfg.clone(), os_entropy(), lease);
    let (done, stop) = tokio::sync::oneshot::channel::<()>();
    let mut holding = pin!(drive_until(&mut elector, store, clock, on_event, async {
        let _ = stop.await;
    }));
    let mut work = pin!(work);
    let output = tokio::select! {
        exit = &mut holding => return lost(token, exit),
        output = &mut work => output,
    };
    // The work is done: resign, which releases the lease.
    let _ = done.send(());
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
