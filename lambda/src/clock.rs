//! The process clocks: [`std::time::Instant`] for monotonic time, the
//! system clock for wall time (used only for signing and as a bounded
//! fallback when a store sends no `Date`), tokio for sleeping.

use lease_core::drive::Clock;
use lease_core::time::{Mono, Now, UnixMillis};
use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Monotonic milliseconds since this clock was made, and the wall clock
/// (shifted by a fixed offset, zero unless set).
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    start: Instant,
    wall_offset_ms: i64,
}

/// The variable [`SystemClock::from_env`] reads: milliseconds added to the
/// wall clock (negative: behind). For tests of clock skew, such as the
/// fleet lab's; lease timing does not depend on the wall clock when the
/// store sends `Date` headers, signing does.
pub const CLOCK_OFFSET_VAR: &str = "LEASE_CLOCK_OFFSET_MS";

impl SystemClock {
    /// A clock whose monotonic zero is now.
    pub fn new() -> Self {
        SystemClock {
            start: Instant::now(),
            wall_offset_ms: 0,
        }
    }

    /// The same clock with its wall time `offset_ms` milliseconds ahead
    /// (behind when negative).
    pub fn with_wall_offset_ms(mut self, offset_ms: i64) -> Self {
        self.wall_offset_ms = offset_ms;
        self
    }

    /// A new clock, its wall time offset by [`CLOCK_OFFSET_VAR`] when that
    /// is set; an error names the variable when it is not an integer.
    pub fn from_env() -> Result<Self, String> {
        let offset = match std::env::var(CLOCK_OFFSET_VAR) {
            Ok(v) if !v.trim().is_empty() => v.trim().parse::<i64>().map_err(|_| {
                format!("{CLOCK_OFFSET_VAR} must be whole milliseconds, like -1500 (got {v:?})")
            })?,
            _ => 0,
        };
        Ok(SystemClock::new().with_wall_offset_ms(offset))
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
        let wall = (wall.as_millis() as u64).saturating_add_signed(self.wall_offset_ms);
        Now {
            mono: Mono(self.start.elapsed().as_millis() as u64),
            wall: UnixMillis(wall),
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
