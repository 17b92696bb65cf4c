//! The process clocks: a monotonic clock that keeps counting while the
//! machine is suspended, the system clock for wall time (used only for
//! signing and as a bounded fallback when a store sends no `Date`), tokio
//! for sleeping.
//!
//! # Why not [`std::time::Instant`]
//!
//! A lease is timed on the store's clock, which runs on while a laptop
//! sleeps or a VM is suspended. `Instant` does not on the platforms that
//! matter: on Linux it reads `CLOCK_MONOTONIC`, which stops during a
//! suspend, and on macOS `CLOCK_UPTIME_RAW`, which stops during sleep.
//! After a resume a holder timed by `Instant` would believe it still had
//! the rest of its ttl while the store's lease had expired long before,
//! and another holder could be working. So the monotonic reading here is
//! taken from the clock that counts a suspend:
//!
//! - Linux and Android: `CLOCK_BOOTTIME` (`CLOCK_MONOTONIC` plus the time
//!   spent suspended);
//! - macOS and iOS: `CLOCK_MONOTONIC` through `clock_gettime`, which there
//!   "continues to increment while the system is asleep" (clock_gettime(3));
//! - elsewhere: `Instant` (Windows' `QueryPerformanceCounter` counts sleep;
//!   whether another platform's does is not checked here).
//!
//! # Sleeping across a suspend
//!
//! Tokio's timers run on `CLOCK_MONOTONIC` (`Instant`), so a timer armed
//! for a lease deadline before a suspend would fire late by the length of
//! the suspend, while the job goes on. [`SystemClock::sleep_until`]
//! therefore sleeps in slices of at most [`SLEEP_SLICE`] and re-reads the
//! suspend-counting clock after each: a deadline that passed during a
//! suspend is seen at most one slice after the resume. What cannot be
//! prevented: the job's own processes resume at the same instant as the
//! holder, so they run for up to that slice (plus the time to stop them)
//! on a lease that may have expired during the suspend. A suspend longer
//! than the time left on the lease is a pause (docs/protocols.md, "Safety
//! assumptions"); fencing tokens keep the data safe through that window.
//!
//! The Cloudflare adapter's clock is left as it is: a Worker is not
//! suspended while it runs, and its monotonic reading comes from
//! `Date.now()`, which would count a suspend anyway.

use lease_core::{Clock, Mono, Now, UnixMillis};
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest single tokio sleep in [`SystemClock::sleep_until`]: how long
/// after a resume a deadline that passed during the suspend can go unseen.
/// Half a second is below the smallest ttl that validates (2.3 s) by a
/// wide margin, and costs at most two wake-ups a second per pending sleep.
pub const SLEEP_SLICE: Duration = Duration::from_millis(500);

/// A reading of a monotonic clock, from an arbitrary origin.
type Source = fn() -> Duration;

/// Monotonic milliseconds since this clock was made, on a clock that
/// counts time spent suspended (see the module docs), and the wall clock
/// (shifted by a fixed offset, zero unless set).
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    source: Source,
    start: Duration,
    wall_offset_ms: i64,
}

/// The variable [`SystemClock::from_env`] reads: milliseconds added to the
/// wall clock (negative: behind). For tests of clock skew, such as the
/// fleet lab's; lease timing does not depend on the wall clock when the
/// store sends `Date` headers, signing does.
pub const CLOCK_OFFSET_VAR: &str = "LEASE_CLOCK_OFFSET_MS";

/// The clock that counts a suspend, where it is known.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn suspend_counting() -> Duration {
    read(rustix::time::ClockId::Boottime)
}

/// The clock that counts a suspend, where it is known.
#[cfg(any(target_os = "macos", target_os = "ios"))]
fn suspend_counting() -> Duration {
    read(rustix::time::ClockId::Monotonic)
}

#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios"
))]
fn read(id: rustix::time::ClockId) -> Duration {
    // Infallible: these clocks exist on every kernel the targets support
    // (CLOCK_BOOTTIME since Linux 2.6.39).
    let ts = rustix::time::clock_gettime(id);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Elsewhere, `Instant`, from the first reading in the process.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios"
)))]
fn suspend_counting() -> Duration {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed()
}

impl SystemClock {
    /// A clock whose monotonic zero is now.
    pub fn new() -> Self {
        SystemClock::with_source(suspend_counting)
    }

    fn with_source(source: Source) -> Self {
        SystemClock {
            source,
            start: source(),
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

    fn mono(&self) -> Mono {
        Mono((self.source)().saturating_sub(self.start).as_millis() as u64)
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
            mono: self.mono(),
            wall: UnixMillis(wall),
        }
    }

    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        let clock = *self;
        async move {
            // Far deadlines mean "no timer" (the core's is u64::MAX / 2).
            if at.0 >= u64::MAX / 4 {
                return std::future::pending().await;
            }
            // Tokio's timer does not count a suspend: re-read our clock
            // at least every slice (see the module docs).
            loop {
                let now = clock.mono();
                if now >= at {
                    return;
                }
                let left = Duration::from_millis(at.0 - now.0);
                tokio::time::sleep(left.min(SLEEP_SLICE)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::pin::pin;

    #[cfg(any(target_os = "linux", target_os = "android"))]
    const SUSPEND_COUNTING: rustix::time::ClockId = rustix::time::ClockId::Boottime;
    #[cfg(any(target_os = "macos", target_os = "ios"))]
    const SUSPEND_COUNTING: rustix::time::ClockId = rustix::time::ClockId::Monotonic;

    /// `now()` reads the suspend-counting clock: side by side with a direct
    /// `clock_gettime`, the reading lies between the one before and the
    /// one after.
    #[cfg(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos",
        target_os = "ios"
    ))]
    #[test]
    fn now_reads_the_clock_that_counts_a_suspend() {
        let direct = || {
            let ts = rustix::time::clock_gettime(SUSPEND_COUNTING);
            Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
        };
        let clock = SystemClock::new();
        std::thread::sleep(Duration::from_millis(30));
        for _ in 0..100 {
            let before = direct().saturating_sub(clock.start).as_millis() as u64;
            let mono = clock.now().mono.0;
            let after = direct().saturating_sub(clock.start).as_millis() as u64;
            assert!(
                before <= mono && mono <= after,
                "{before} <= {mono} <= {after}"
            );
        }
        assert!(clock.now().mono.0 >= 30);
    }

    thread_local! {
        /// Tokio's time at the test source's zero.
        static ORIGIN: Cell<Option<tokio::time::Instant>> = const { Cell::new(None) };
        /// Time the test source has counted that tokio's clock has not.
        static SUSPENDED: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    }

    /// A suspend-counting clock as a process sees it: it runs with tokio's
    /// (paused) clock, and jumps forward by the length of a suspend.
    fn test_source() -> Duration {
        let origin = ORIGIN.with(|o| {
            let origin = o.get().unwrap_or_else(tokio::time::Instant::now);
            o.set(Some(origin));
            origin
        });
        origin.elapsed() + SUSPENDED.with(Cell::get)
    }

    fn suspend(length: Duration) {
        SUSPENDED.with(|s| s.set(s.get() + length));
    }

    /// A 60 s sleep, then a 60 s suspend: in tokio's time (which, like
    /// `CLOCK_MONOTONIC`, did not run during the suspend) the sleep ends
    /// within one slice of the resume. A sleep on tokio's timer alone, as
    /// this clock slept when it read `Instant`, is still asleep then, and
    /// would be for the whole minute.
    #[tokio::test(start_paused = true)]
    async fn a_deadline_that_passed_in_a_suspend_is_seen_within_a_slice() {
        let clock = SystemClock::with_source(test_source);
        let deadline = Mono(clock.now().mono.0 + 60_000);
        let mut sleep = pin!(clock.sleep_until(deadline));
        let mut instant_sleep = pin!(tokio::time::sleep_until(
            tokio::time::Instant::now() + Duration::from_secs(60)
        ));
        // Ten seconds of ordinary time: both still asleep.
        assert!(tokio::time::timeout(Duration::from_secs(10), &mut sleep)
            .await
            .is_err());
        assert!(tokio::time::timeout(Duration::ZERO, &mut instant_sleep)
            .await
            .is_err());
        assert_eq!(clock.now().mono.0, 10_000);

        suspend(Duration::from_secs(60));
        let resumed = tokio::time::Instant::now();
        tokio::time::timeout(SLEEP_SLICE, &mut sleep)
            .await
            .expect("the suspend-counting sleep ends within one slice of the resume");
        assert!(resumed.elapsed() <= SLEEP_SLICE);
        assert!(clock.now().mono >= deadline);

        let resumed = tokio::time::Instant::now();
        assert!(
            tokio::time::timeout(SLEEP_SLICE, &mut instant_sleep)
                .await
                .is_err(),
            "a sleep on tokio's clock does not see the suspend"
        );
        instant_sleep.await;
        assert!(resumed.elapsed() >= Duration::from_secs(49));
    }

    /// The core's "no timer" deadline never completes (and is not a
    /// busy loop of slices).
    #[tokio::test(start_paused = true)]
    async fn a_far_deadline_never_completes() {
        let clock = SystemClock::with_source(test_source);
        let sleep = clock.sleep_until(Mono(u64::MAX / 2));
        assert!(
            tokio::time::timeout(Duration::from_secs(86_400 * 365), sleep)
                .await
                .is_err()
        );
    }
}
