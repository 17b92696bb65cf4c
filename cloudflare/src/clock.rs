//! The Worker's clocks. `Date.now()` is both: inside a Worker it is frozen
//! while code runs and moves only across I/O (a fetch, an R2 call, a
//! timer), which is exactly when the lease machines look at it. The
//! monotonic reading never goes back, even if the wall clock is stepped.
//! A Worker is not suspended while it runs; were it, `Date.now()` would
//! count the suspend (unlike the native adapter's `Instant`, see
//! `lease_lambda::clock`).

use lease_core::{Clock, Mono, Now, UnixMillis};
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// Milliseconds since this clock was made (never decreasing) and the wall
/// clock, both from `Date.now()`; sleeps are `setTimeout`. Clones share
/// the same readings.
#[derive(Clone, Debug)]
pub struct WorkerClock {
    start: u64,
    last: Rc<Cell<u64>>,
}

fn date_now() -> u64 {
    worker::js_sys::Date::now() as u64
}

impl WorkerClock {
    /// A clock not read yet (outside a Worker, where `Date.now()` is not
    /// there to read: the crate's native unit tests).
    #[cfg(test)]
    pub(crate) fn unread() -> Self {
        WorkerClock {
            start: 0,
            last: Rc::default(),
        }
    }

    /// A clock whose monotonic zero is now.
    pub fn new() -> Self {
        WorkerClock {
            start: date_now(),
            last: Rc::default(),
        }
    }
}

impl Default for WorkerClock {
    fn default() -> Self {
        WorkerClock::new()
    }
}

impl Clock for WorkerClock {
    fn now(&self) -> Now {
        let wall = date_now();
        let mono = self.last.get().max(wall.saturating_sub(self.start));
        self.last.set(mono);
        Now {
            mono: Mono(mono),
            wall: UnixMillis(wall),
        }
    }

    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        // Far deadlines mean "no timer": setTimeout takes at most 2^31-1 ms.
        let ms = at.0.saturating_sub(self.now().mono.0).min(i32::MAX as u64);
        worker::Delay::from(Duration::from_millis(ms))
    }
}
