//! The process clocks: [`std::time::Instant`] for monotonic time, the
//! system clock for wall time (used only for signing and as a bounded
//! fallback when a store sends no `Date`), tokio for sleeping.

use lease_core::drive::Clock;
use lease_core::time::{Mono, Now, UnixMillis};
use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Monotonic milliseconds since this clock was made, and the wall clock.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock whose monotonic zero is now.
    pub fn new() -> Self {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Now {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Now {
            mono: Mono(self.start.elapsed().as_millis() as u64),
            wall: UnixMillis(wall.as_millis() as u64),
        }
    }

    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        // Far deadlines mean "no timer": cap them instead of overflowing.
        let at = Duration::from_millis(at.0.min(u64::MAX / 4));
        let deadline = self
            .start
            .checked_add(at)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        tokio::time::sleep_until(deadline.into())
    }
}
