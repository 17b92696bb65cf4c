//! The retry budget and backoff shared by the one-shot machines.

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::store::ReplyKind;
use crate::time::Mono;
use std::time::Duration;

/// Counts retries within one operation against `max_attempts`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Retries {
    attempts: u32,
    /// When the first retry was counted (machines without an engine count
    /// their `op_timeout` from there).
    first: Option<Mono>,
}

impl Retries {
    /// Counts one retry; `Err` once the budget is spent.
    pub(crate) fn spend(&mut self, cfg: &LeaseConfig, _last: &ReplyKind) -> Result<(), ()> {
        self.attempts += 1;
        if self.attempts > cfg.max_attempts {
            return Err(());
        }
        Ok(())
    }

    /// For machines without an engine (fenced writes, the probe): counts
    /// one retry after `last` at `now`, and says when to make it (`None`:
    /// at once); the error once the budget or `op_timeout`, counted from
    /// the first retry, is spent. A `Retry-After` beyond that ends it.
    pub(crate) fn next_try(
        &mut self,
        cfg: &LeaseConfig,
        entropy: &mut Entropy,
        now: Mono,
        last: &ReplyKind,
        backoff: bool,
    ) -> Result<Option<Mono>, crate::protocol::machine::LeaseError> {
        let deadline = *self.first.get_or_insert(now) + cfg.op_timeout;
        let gave_up = |attempts, why: String| crate::protocol::machine::LeaseError::GaveUp {
            attempts,
            last: why,
            unsettled: None,
        };
        if self.spend(cfg, last).is_err() {
            return Err(gave_up(
                self.attempts,
                crate::protocol::machine::summarize(last),
            ));
        }
        if !backoff {
            return Ok(None);
        }
        let until = self.backoff_until(cfg, entropy, now, last);
        if until >= deadline {
            return Err(gave_up(
                self.attempts,
                format!(
                    "{}; waiting {:?} would pass the operation's deadline (op_timeout {:?})",
                    crate::protocol::machine::summarize(last),
                    until - now,
                    cfg.op_timeout
                ),
            ));
        }
        Ok(Some(until))
    }

    /// Attempts counted so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }

    /// When to retry after `last`: exponential from `backoff_base`, capped
    /// at `backoff_max`, with "equal jitter" (half fixed, half random, so
    /// retries spread out but never collapse to zero), and never before the
    /// server's `Retry-After`.
    pub(crate) fn backoff_until(
        &self,
        cfg: &LeaseConfig,
        entropy: &mut Entropy,
        now: Mono,
        last: &ReplyKind,
    ) -> Mono {
        let exp = cfg
            .backoff_base
            .saturating_mul(1u32 << self.attempts.saturating_sub(1).min(16));
        let cap = exp.min(cfg.backoff_max);
        let delay = cap / 2 + cap.mul_f64(entropy.unit() / 2.0);
        let retry_after = match last {
            ReplyKind::Throttled { retry_after } => retry_after.unwrap_or_default(),
            _ => Default::default(),
        };
        now + delay.max(retry_after)
    }
}

/// Keeps writes to one object at least `min_write_interval` apart
/// (`LeaseConfig::min_write_interval`: GCS allows about one write per second
/// per object).
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteSpacing {
    interval: Duration,
    /// The last send of a write, per key (a handful of keys at most).
    last: Vec<(String, Mono)>,
}

impl WriteSpacing {
    pub(crate) fn new(interval: Duration) -> Self {
        WriteSpacing {
            interval,
            last: Vec::new(),
        }
    }

    /// Notes a write to `key` sent at `at`.
    pub(crate) fn wrote(&mut self, key: &str, at: Mono) {
        if self.interval.is_zero() {
            return;
        }
        match self.last.iter_mut().find(|(k, _)| k == key) {
            Some((_, last)) => *last = (*last).max(at),
            None => self.last.push((key.to_string(), at)),
        }
    }

    /// The earliest time a write to `key` may be sent, when that is after
    /// `now`.
    pub(crate) fn wait_until(&self, key: &str, now: Mono) -> Option<Mono> {
        let (_, last) = self.last.iter().find(|(k, _)| k == key)?;
        let at = *last + self.interval;
        (now < at).then_some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_to_one_key_are_spaced() {
        let mut s = WriteSpacing::new(Duration::from_secs(1));
        assert_eq!(s.wait_until("a", Mono(0)), None);
        s.wrote("a", Mono(500));
        assert_eq!(s.wait_until("a", Mono(600)), Some(Mono(1500)));
        assert_eq!(s.wait_until("a", Mono(1500)), None);
        assert_eq!(s.wait_until("b", Mono(600)), None, "other keys are free");
        s.wrote("a", Mono(400));
        assert_eq!(
            s.wait_until("a", Mono(600)),
            Some(Mono(1500)),
            "keeps the latest"
        );

        let mut off = WriteSpacing::new(Duration::ZERO);
        off.wrote("a", Mono(500));
        assert_eq!(off.wait_until("a", Mono(500)), None);
    }
}
