//! A pool of seats, [`Run::pool`](crate::client::Run::pool) (see the layer's docs, `client/mod.rs`, *Pools*).

use crate::client::leases::Leases;
use crate::client::revalidate::Revalidating;
use crate::config::ConfigError;
use crate::protocol::outcome::{hand_on, AcquireOutcome, Busy, Claim, Lease, LeaseError};
use crate::settings::SettingsError;
use crate::store::Store;
use crate::time::{Clock, Mono};
use std::time::Duration;

/// The most seats a pool may have: a run that finds every seat busy has
/// read each of them once.
pub const MAX_SEATS: u32 = 1000;

/// The key of seat `seat` (counted from 0) of the pool at `pool`:
/// `<pool>/seat-<seat>`. Each seat is a lease of its own, with its own
/// fencing token; the pool deletes no seat's object (a release leaves a
/// released record; the mutex deletes its lock, as it always does), so a
/// seat's tokens go on from where they were when the pool shrinks and
/// grows again.
pub fn seat_key(pool: &str, seat: u32) -> String {
    format!("{pool}/seat-{seat}")
}

/// The seat `key` is of the pool at `pool`, if it is one of its seats'
/// keys ([`seat_key`]).
pub fn seat_of(pool: &str, key: &str) -> Option<u32> {
    let digits = key.strip_prefix(pool)?.strip_prefix("/seat-")?;
    // No sign, no leading zero: one key per seat.
    let canonical =
        digits.bytes().all(|b| b.is_ascii_digit()) && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

/// The pool `key` is a seat of, and the seat, if it is a seat's key
/// ([`seat_key`]): for listings, which group a pool's seats.
pub fn pool_of(key: &str) -> Option<(&str, u32)> {
    let (pool, _) = key.rsplit_once("/seat-")?;
    Some((pool, seat_of(pool, key)?))
}

/// A pool's size, checked: from 1 to [`MAX_SEATS`].
pub(crate) fn check_seats(seats: u32) -> Result<(), SettingsError> {
    if (1..=MAX_SEATS).contains(&seats) {
        return Ok(());
    }
    Err(SettingsError::Invalid {
        variable: "seats",
        reason: format!("a pool has from 1 to {MAX_SEATS} seats, not {seats}"),
    })
}

impl<S: Store, C: Clock> Leases<S, C> {
    /// Takes any free seat of the `seats` of the pool at `pool`, waiting
    /// up to `wait` while every seat is busy, each attempt ending by `by`
    /// if set (a run's time limit). A round reads the seats in turn from
    /// one drawn at random (contenders spread over the pool) and takes the
    /// first free one: `Acquired` with the seat's lease, and the seat. A
    /// round that comes to `by` with seats unread gives up (`GaveUp`: a
    /// run says it had no time), the pool not known to be full.
    /// When every seat read is busy it tries again after
    /// [`wait`](crate::protocol#trying-again)'s delay (from the soonest
    /// holder's published expiry), and answers `Busy` (the seat that frees
    /// soonest) once the wait is spent. An error ends the round at once:
    /// the store is failing, or a seat's object cannot be read (an
    /// operator breaks it). Writes of unknown outcome are kept as claims
    /// per seat, as [`acquire`](Leases::acquire) keeps them, and every
    /// attempt's are handed on in an error or the final `Busy`.
    pub(crate) async fn take_seat(
        &self,
        pool: &str,
        seats: u32,
        wait: Duration,
        by: Option<Mono>,
    ) -> Result<(AcquireOutcome, u32), LeaseError> {
        let cfg = self.config(pool);
        let until = self.clock().now().mono + wait;
        let mut entropy = self.entropy();
        // Each seat's re-reads are conditional on what it last read.
        let stores: Vec<_> = (0..seats)
            .map(|_| Revalidating::new(self.store()))
            .collect();
        // Broken on purpose (a test build only): a smaller pool tidies
        // away the seats above its size that are free, and their tokens
        // start again from 1 when the pool grows back.
        #[cfg(lease_mutants)]
        if mutant!(DeleteSeatsOnScaleDown) {
            self.delete_free_seats_above(pool, seats).await;
        }
        let mut attempt = 0;
        // Writes of every seat's attempts whose outcome stayed unknown:
        // kept per seat by `acquire_on`, and handed on whole, as a single
        // lease's wait hands on its attempts'.
        let mut earlier: Vec<Claim> = Vec::new();
        loop {
            let first = (entropy.next_u64() % u64::from(seats)) as u32;
            let round = self.seat_round((pool, seats, first), &stores, by, &mut earlier);
            let (mut busy, seat) = match round.await {
                Ok(Round::Taken(lease, seat)) => {
                    return Ok((AcquireOutcome::Acquired(lease), seat))
                }
                Ok(Round::Full(busy, seat)) => (busy, seat),
                Err(mut e) => {
                    for claim in earlier {
                        e.hand_on(claim);
                    }
                    return Err(e);
                }
            };
            let now = self.clock().now().mono;
            // One that cannot be live any more is not worth a word.
            earlier.retain(|c| c.live_until > now);
            if now >= until || by.is_some_and(|by| now >= by) {
                busy.unsettled = earlier.into_boxed_slice();
                return Ok((AcquireOutcome::Busy(busy), seat));
            }
            let delay =
                crate::protocol::wait::next_try(&cfg, attempt, busy.expires_in, &mut entropy);
            self.clock().sleep_until((now + delay).min(until)).await;
            attempt = attempt.saturating_add(1);
        }
    }

    /// One round of [`take_seat`](Self::take_seat): the seats of the pool
    /// in turn from `first`, through their own `stores`, until one is free
    /// or `by` comes (one seat is always read); the unsettled writes of
    /// busy answers go to `earlier`.
    async fn seat_round(
        &self,
        (pool, seats, first): (&str, u32, u32),
        stores: &[Revalidating<&S>],
        by: Option<Mono>,
        earlier: &mut Vec<Claim>,
    ) -> Result<Round, LeaseError> {
        let mut soonest: Option<(Busy, u32)> = None;
        for i in 0..seats {
            // A run's time limit ends the round (one seat is always read,
            // as one request always fits): with seats left unread the
            // pool is not known to be full, and the run has no time left.
            let now = self.clock().now().mono;
            if i > 0 && by.is_some_and(|by| now >= by) {
                return Err(LeaseError::GaveUp {
                    attempts: i,
                    last: format!(
                        "the run's time limit passed with {i} of the pool's {seats} seats read, \
                         all busy"
                    ),
                    unsettled: Box::default(),
                });
            }
            if i > 0 && mutant!(PoolReadsOneSeat) {
                break;
            }
            let seat = (first + i) % seats;
            let key = seat_key(pool, seat);
            match self.acquire_on(&stores[seat as usize], &key, by).await? {
                AcquireOutcome::Acquired(lease) => return Ok(Round::Taken(lease, seat)),
                AcquireOutcome::Busy(mut busy) => {
                    for claim in std::mem::take(&mut busy.unsettled).into_vec() {
                        hand_on(earlier, claim);
                    }
                    if soonest
                        .as_ref()
                        .is_none_or(|(s, _)| busy.expires_at < s.expires_at)
                    {
                        soonest = Some((busy, seat));
                    }
                }
            }
        }
        // Busy at every seat read (none only for a pool of no seats).
        match soonest {
            Some((busy, seat)) => Ok(Round::Full(busy, seat)),
            None => Err(LeaseError::Config {
                error: ConfigError::Zero("seats"),
                unsettled: Box::default(),
            }),
        }
    }
}

/// How a round of a pool's seats ended.
// One per round, at once taken apart: boxing the lease would cost an
// allocation per seat taken.
#[allow(clippy::large_enum_variant)]
enum Round {
    /// This seat was free: its lease.
    Taken(Lease, u32),
    /// Every seat read was busy: the one that frees soonest.
    Full(Busy, u32),
}

#[cfg(lease_mutants)]
impl<S: Store, C: Clock> Leases<S, C> {
    /// What [`Mutant::DeleteSeatsOnScaleDown`](crate::mutants::Mutant::DeleteSeatsOnScaleDown)
    /// does: deletes the seats above `seats` (up to [`MAX_SEATS`]) whose
    /// lease is free, each conditional on the version read.
    async fn delete_free_seats_above(&self, pool: &str, seats: u32) {
        for seat in seats..MAX_SEATS {
            let key = seat_key(pool, seat);
            match self.inspect(&key).await {
                Ok(Some(seen)) if seen.free => {
                    let op = crate::store::StoreOp::Delete {
                        key,
                        if_match: Some(seen.etag),
                    };
                    self.store().call(op).await;
                }
                Ok(Some(_)) => {}
                // No seat this far up: none above it either.
                Ok(None) | Err(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seat_key_names_its_seat_and_nothing_else_does() {
        assert_eq!(seat_key("jobs/render", 7), "jobs/render/seat-7");
        for seat in [0, 1, 9, 10, 999] {
            assert_eq!(
                seat_of("jobs/render", &seat_key("jobs/render", seat)),
                Some(seat)
            );
            let key = seat_key("jobs/render", seat);
            assert_eq!(pool_of(&key), Some(("jobs/render", seat)));
        }
        assert_eq!(pool_of("a/seat-1/seat-2"), Some(("a/seat-1", 2)));
        for key in [
            "jobs/render",
            "seat-1",
            "jobs/render/seat-01",
            "jobs/seat-x",
        ] {
            assert_eq!(pool_of(key), None, "{key}");
        }
        for key in [
            "jobs/render",
            "jobs/render/seat-",
            "jobs/render/seat-07",
            "jobs/render/seat-+7",
            "jobs/render/seat-7/x",
            "jobs/renderer/seat-7",
            "jobs/render/seat-99999999999",
        ] {
            assert_eq!(seat_of("jobs/render", key), None, "{key}");
        }
    }

    #[test]
    fn a_pool_has_from_one_to_max_seats() {
        assert!(check_seats(1).is_ok());
        assert!(check_seats(MAX_SEATS).is_ok());
        for bad in [0, MAX_SEATS + 1] {
            let e = check_seats(bad).unwrap_err().to_string();
            assert!(e.contains("from 1 to 1000 seats"), "{e}");
        }
    }
}
