//! Running machines, [`drive`] (see the layer's docs, `client/mod.rs`).

use crate::protocol::machine::{Machine, Output};
use crate::protocol::outcome::Event;
use crate::store::{Store, StoreReply};
use crate::time::{Clock, Mono};
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;

/// Deadlines this far out mean "no timer" (a finished machine waits forever).
const NO_TIMER: Mono = Mono(u64::MAX / 2);

/// Runs `machine` to completion, passing each event to `on_event`.
pub async fn drive<M: Machine>(
    machine: &mut M,
    store: &impl Store,
    clock: &impl Clock,
    on_event: impl FnMut(Event),
) -> M::Outcome {
    drive_until(machine, store, clock, on_event, core::future::pending()).await
}

/// Like [`drive`], but calls [`Machine::stop`] once `stop` completes (an
/// elector then resigns) and keeps driving until the machine finishes.
pub async fn drive_until<M: Machine>(
    machine: &mut M,
    store: &impl Store,
    clock: &impl Clock,
    mut on_event: impl FnMut(Event),
    stop: impl Future<Output = ()>,
) -> M::Outcome {
    let mut stop = pin!(stop);
    let mut stopped = false;
    // The store calls under way, by the ids the machine gave them. Their
    // type is the store's own future (not a boxed `dyn Future`), so the
    // driver is `Send` whenever the store's calls, the clock's sleeps, the
    // machine and the callbacks are.
    let mut in_flight = Vec::new();
    loop {
        let wake_at = match machine.poll(clock.now()) {
            Output::Call(id, op) => {
                in_flight.push((id, Box::pin(store.call(op))));
                continue;
            }
            Output::Event(e) => {
                on_event(e);
                continue;
            }
            Output::Done(outcome) => return outcome,
            Output::Wait(at) => at,
        };
        enum Woke {
            Reply(usize, StoreReply),
            Stop,
            Timer,
        }
        let mut sleep = (wake_at < NO_TIMER).then(|| Box::pin(clock.sleep_until(wake_at)));
        let woke = poll_fn(|cx| {
            if !stopped && stop.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Woke::Stop);
            }
            for (i, (_, call)) in in_flight.iter_mut().enumerate() {
                if let Poll::Ready(reply) = call.as_mut().poll(cx) {
                    return Poll::Ready(Woke::Reply(i, reply));
                }
            }
            match sleep.as_mut().map(|s| s.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(Woke::Timer),
                _ => Poll::Pending,
            }
        })
        .await;
        match woke {
            Woke::Reply(i, reply) => {
                let (id, _) = in_flight.swap_remove(i);
                machine.handle_reply(clock.now(), id, reply);
            }
            Woke::Stop => {
                stopped = true;
                machine.stop(clock.now());
            }
            Woke::Timer => {}
        }
    }
}
