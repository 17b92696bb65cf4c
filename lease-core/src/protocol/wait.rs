//! Trying again: documented in the layer's docs (`protocol/mod.rs`, "Trying again").

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use std::time::Duration;

/// The first retry's delay, before jitter.
pub const FIRST_RETRY: Duration = Duration::from_millis(250);

/// Under fair waiting ([`LeaseConfig::fair`]): the longest delay between
/// two retries, so that a lease given back is found by a waiter soon.
pub const FAIR_POLL: Duration = Duration::from_secs(1);

/// Under fair waiting: how long a lease stays busy to the holder that
/// released it, counted on the store's clock from the release, so that
/// contenders already waiting (re-reading at least every [`FAIR_POLL`])
/// take it first.
pub const COURTESY: Duration = Duration::from_secs(1);

/// A planned handoff ([`Leadership::hand_over`](crate::client::Leadership::hand_over)):
/// how long the lease its holder released for a named successor stays busy
/// to every other contender, counted on the store's clock from the
/// release, so that the successor (re-reading every [`HANDOFF_POLL`])
/// takes it first.
pub const HANDOFF_GRACE: Duration = Duration::from_secs(2);

/// A planned handoff: how often the named successor, once it read the
/// holder's announcement, reads the lease until it takes it.
pub const HANDOFF_POLL: Duration = Duration::from_millis(250);

pub use crate::record::HANDOFF_TO;

/// How long to wait before retry number `attempt` (0 for the first) of an
/// acquire that found the lease busy with `expires_in` left (by the store's
/// clock at the read; `None` when unknown).
pub fn next_try(
    cfg: &LeaseConfig,
    attempt: u32,
    expires_in: Option<Duration>,
    entropy: &mut Entropy,
) -> Duration {
    let cap = if cfg.fair {
        cfg.poll_every.min(FAIR_POLL)
    } else {
        cfg.poll_every
    }
    .max(FIRST_RETRY);
    let base = FIRST_RETRY
        .checked_mul(1u32 << attempt.min(16))
        .map_or(cap, |d| d.min(cap));
    // Equal jitter: half fixed, half random.
    let mut delay = base / 2 + base.mul_f64(entropy.unit() / 2.0);
    if let Some(left) = expires_in {
        let lapse = left + cfg.date_resolution + FIRST_RETRY.mul_f64(entropy.unit());
        delay = delay.min(lapse);
    }
    delay.max(cfg.min_write_interval)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LeaseConfig {
        LeaseConfig::new("k", "a", Duration::from_secs(30))
    }

    #[test]
    fn delays_grow_from_first_to_poll_every_with_jitter() {
        let cfg = cfg();
        let mut e = Entropy::from_seed(1);
        for attempt in 0..20 {
            let base = FIRST_RETRY
                .checked_mul(1 << attempt.min(16))
                .unwrap()
                .min(cfg.poll_every);
            for _ in 0..50 {
                let d = next_try(&cfg, attempt, None, &mut e);
                assert!(d >= base / 2 && d <= base, "{attempt}: {d:?}");
            }
        }
        // Contenders drawing alike would poll in step: they do not.
        let draws: std::collections::BTreeSet<_> =
            (0..20).map(|_| next_try(&cfg, 3, None, &mut e)).collect();
        assert!(draws.len() > 15, "{draws:?}");
    }

    #[test]
    fn a_lease_about_to_lapse_is_tried_just_after_its_expiry() {
        let cfg = cfg();
        let mut e = Entropy::from_seed(2);
        for _ in 0..50 {
            let d = next_try(&cfg, 10, Some(Duration::from_millis(300)), &mut e);
            let earliest = Duration::from_millis(300) + cfg.date_resolution;
            assert!(d >= earliest && d <= earliest + FIRST_RETRY, "{d:?}");
        }
    }

    #[test]
    fn under_fair_waiting_a_waiter_re_reads_at_least_every_second() {
        let mut cfg = cfg();
        cfg.fair = true;
        let mut e = Entropy::from_seed(4);
        for attempt in 0..20 {
            let d = next_try(&cfg, attempt, None, &mut e);
            assert!(d <= FAIR_POLL, "{attempt}: {d:?}");
        }
        // Without it, the backoff grows to poll_every (10 s at a 30 s ttl).
        cfg.fair = false;
        assert!(next_try(&cfg, 20, None, &mut e) > FAIR_POLL);
    }

    #[test]
    fn the_write_spacing_is_a_floor() {
        let mut cfg = cfg();
        cfg.min_write_interval = Duration::from_secs(1);
        let mut e = Entropy::from_seed(3);
        for attempt in 0..3 {
            assert!(
                next_try(&cfg, attempt, Some(Duration::ZERO), &mut e) >= cfg.min_write_interval
            );
        }
    }
}
