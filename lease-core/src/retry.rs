//! The retry budget and backoff shared by the one-shot machines.

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::machine::{summarize, LeaseError};
use crate::store::ReplyKind;
use crate::time::Mono;

/// Counts retries within one operation against `max_attempts`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Retries {
    attempts: u32,
}

impl Retries {
    /// Counts one retry after `last`; the error once the budget is spent.
    pub(crate) fn spend(&mut self, cfg: &LeaseConfig, last: &ReplyKind) -> Result<(), LeaseError> {
        self.attempts += 1;
        if self.attempts > cfg.max_attempts {
            return Err(LeaseError::GaveUp {
                attempts: self.attempts,
                last: summarize(last),
            });
        }
        Ok(())
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
