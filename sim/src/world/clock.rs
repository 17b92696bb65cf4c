//! Time in the simulated world. Real time is ms from the start of a run;
//! the store's clock is real time (at [`EPOCH`] on the wall); each node
//! reads its own clocks ([`NodeClock`]), which drift and are offset from
//! real time.

use lease_core::{Entropy, Mono, Now, UnixMillis};
use std::time::Duration;

/// The wall-clock time at which every run starts (2026-09-21), on the
/// store's clock.
pub const EPOCH: UnixMillis = UnixMillis(1_790_000_000_000);

/// A node's clocks: the monotonic clock runs at `1 + drift` times real
/// time from zero; the wall clock reads [`EPOCH`] plus the monotonic clock
/// plus `offset_ms`. A simulator that stops a node's monotonic clock for a
/// while (a stall) passes only the real time it ran.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeClock {
    /// How much faster (or, negative, slower) than real time it runs.
    pub drift: f64,
    /// The wall clock's offset from the store's (ms, either way).
    pub offset_ms: i64,
}

impl NodeClock {
    /// A clock drawn from `rng` (drift, then offset): drift within
    /// `±max_drift`, offset within `±max_offset`.
    pub fn draw(max_drift: f64, max_offset: Duration, rng: &mut Entropy) -> NodeClock {
        let drift = (rng.unit() * 2.0 - 1.0) * max_drift;
        let offset_ms = ((rng.unit() * 2.0 - 1.0) * max_offset.as_millis() as f64) as i64;
        NodeClock { drift, offset_ms }
    }

    /// The monotonic clock after it has run for `running` ms of real time.
    pub fn mono(&self, running: u64) -> Mono {
        Mono((running as f64 * (1.0 + self.drift)).floor() as u64)
    }

    /// Both clocks after the monotonic one has run for `running` ms.
    pub fn now(&self, running: u64) -> Now {
        let mono = self.mono(running);
        let wall = (EPOCH.0 as i64 + self.offset_ms + mono.0 as i64).max(0) as u64;
        Now::new(mono, UnixMillis(wall))
    }

    /// Real ms the monotonic clock takes to go from `from` to `to`, rounded
    /// up so that it has reached `to` by then (zero when `to` has passed):
    /// what turns a node's timer into a real time.
    pub fn real_between(&self, from: Mono, to: Mono) -> u64 {
        (to.0.saturating_sub(from.0) as f64 / (1.0 + self.drift)).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timer_set_by_the_node_clock_fires_when_that_clock_reaches_it() {
        for drift in [-0.009, 0.0, 0.009] {
            let clock = NodeClock {
                drift,
                offset_ms: -3_600_000,
            };
            for at in [1, 999, 10_000, 123_457] {
                let real = clock.real_between(Mono(0), Mono(at));
                assert!(clock.mono(real) >= Mono(at), "{drift} {at}");
                assert!(clock.mono(real - 1) < Mono(at), "{drift} {at}");
            }
            let now = clock.now(1_000);
            assert_eq!(now.mono, clock.mono(1_000));
            assert_eq!(now.wall.0, EPOCH.0 - 3_600_000 + now.mono.0);
        }
    }
}
