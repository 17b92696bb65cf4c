//! What a write buys: the expiry it stamps on the store's clock and the
//! local deadline until which the writer may trust it, and when another's
//! record may be taken over. Every protocol judges time here (the time
//! model and the safety assumptions are in `docs/protocols.md`).

use crate::config::LeaseConfig;
use crate::record::{LeaseRecord, BROKEN_BY};
use crate::store::{ReplyKind, StoreReply};
use crate::time::{Mono, Now, StoreDate, UnixMillis};
use std::time::Duration;

/// `expires_at` for a write sent now, and the local deadline it buys.
///
/// With `D` the latest store date (sent at local time `s`), a write sent
/// at `w` stamps `D + (w - s) + ttl`, and is trusted locally until
/// `w + ttl - resolution - drift·(ttl + w - s) - margin`: the store's
/// clock cannot have passed the stamp by then, whatever the offsets
/// between nodes (see the safety assumptions in docs/protocols.md).
pub(crate) fn stamp(
    cfg: &LeaseConfig,
    clock: Option<(StoreDate, Mono)>,
    now: Now,
) -> (UnixMillis, Mono) {
    if variant!(cfg, trusts_wall_clock) {
        return (now.wall + cfg.ttl, now.mono + cfg.ttl);
    }
    let (date, anchor) = clock.unwrap_or((StoreDate::local_wall(now.wall, cfg.max_skew), now.mono));
    let elapsed = now.mono - anchor;
    let expires_at = date.unix_ms + elapsed + cfg.ttl;
    let lost = if variant!(cfg, no_margins) {
        Duration::ZERO
    } else {
        Duration::from_millis(date.behind_ms) + cfg.drift_margin(elapsed)
    };
    let valid_until = (now.mono + cfg.ttl).saturating_sub(lost);
    (expires_at, valid_until)
}

/// Records the store date of `reply` (to a call sent at `sent`) as the
/// freshest anchor, or the local wall clock bounded by `max_skew` when the
/// reply has none; returns the date the reply is judged by.
pub(crate) fn note_date(
    cfg: &LeaseConfig,
    clock: &mut Option<(StoreDate, Mono)>,
    now: Now,
    sent: Mono,
    reply: &StoreReply,
) -> StoreDate {
    let lost = matches!(reply.kind, ReplyKind::Transport { .. });
    let (date, anchor) = match (reply.date, *clock) {
        (Some(d), _) => (d, sent),
        // No reply at all (a timeout, a connection lost): no word from the
        // store, so the anchor stands, and the outcome is judged by it,
        // widened for the time between. Only a reply the store made
        // without a date (a store that never dates its replies) stands in
        // the local wall clock, trusted to `max_skew`: a node's wall clock
        // may be off by far more than that from a store that does date
        // them, and a write stamped from it would expire long before (or
        // after) its holder believes.
        (None, Some((d, at))) if lost && !mutant!(DatelessReplySetsClock) => {
            return extrapolate(cfg, d, at, sent, now.mono)
        }
        (None, _) => (StoreDate::local_wall(now.wall, cfg.max_skew), now.mono),
    };
    // Replies arrive one at a time, so the newest is the freshest bound.
    *clock = Some((date, anchor));
    date
}

/// The store's time at a reply to a call sent at `sent` and answered by
/// `answered` (local), from the anchor `date` read at `at`: at least the
/// anchor's earliest plus the time to the send less drift, at most its
/// latest plus the time to the answer with drift.
fn extrapolate(
    cfg: &LeaseConfig,
    date: StoreDate,
    at: Mono,
    sent: Mono,
    answered: Mono,
) -> StoreDate {
    let to_send = sent - at;
    let to_answer = answered - at;
    let ms = |d: Duration| d.as_millis() as u64;
    StoreDate {
        unix_ms: date.unix_ms + to_send,
        ahead_ms: date.ahead_ms + ms(cfg.drift_margin(to_send)),
        behind_ms: date.behind_ms
            + ms(to_answer.saturating_sub(to_send))
            + ms(cfg.drift_margin(to_answer)),
    }
}

/// Under fair waiting ([`LeaseConfig::fair`]), the store time until which
/// `record`, released by this very holder, stays busy to it; `None` when
/// that time has passed by `date` or does not apply.
pub(crate) fn courtesy_until(
    cfg: &LeaseConfig,
    record: &LeaseRecord,
    date: StoreDate,
) -> Option<UnixMillis> {
    // A record an operator broke keeps its holder but was not given back
    // by it (`broken_by`): no courtesy.
    if !cfg.fair
        || !record.released
        || record.holder.is_empty()
        || record.holder != cfg.holder
        // A scan of the few keys, not the map's search (which a Worker
        // would link for this alone).
        || record.meta.keys().any(|k| k == BROKEN_BY)
    {
        return None;
    }
    // Counted from the release (`released_at`, the store's time at its
    // send as the releaser reckoned it). A record released before that
    // field existed: from its expiry, one date resolution before the Date
    // its release was stamped from (see the engine's write), which may be
    // long before the release.
    let from = match record.released_at {
        Some(at) => at,
        _ => record.expires_at + cfg.date_resolution,
    };
    let until = from + crate::protocol::wait::COURTESY;
    (date.unix_ms < until).then_some(until)
}

/// A release that hands the lease to a named successor (`meta`'s
/// [`HANDOFF_TO`](crate::protocol::wait::HANDOFF_TO)): the store time until
/// which it stays busy to any other contender
/// ([`HANDOFF_GRACE`](crate::protocol::wait::HANDOFF_GRACE) from its
/// release); `None` for the successor, after the grace, or for any other
/// record.
pub(crate) fn handoff_until(
    cfg: &LeaseConfig,
    record: &LeaseRecord,
    date: StoreDate,
) -> Option<UnixMillis> {
    let to = record.meta.get(crate::protocol::wait::HANDOFF_TO)?;
    if !record.released || *to == cfg.holder || record.meta.contains_key(BROKEN_BY) {
        return None;
    }
    let until = record.released_at? + crate::protocol::wait::HANDOFF_GRACE;
    (date.unix_ms < until).then_some(until)
}

/// Whether `record`, read with a reply dated `date`, may be taken over.
pub(crate) fn is_free(cfg: &LeaseConfig, record: &LeaseRecord, now: Now, date: StoreDate) -> bool {
    if variant!(cfg, trusts_wall_clock) {
        record.is_free_at(now.wall)
    } else {
        record.is_free_at(date.earliest())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TransportErrorKind;

    fn now(mono: u64, wall: u64) -> Now {
        Now {
            mono: Mono(mono),
            wall: UnixMillis(wall),
        }
    }

    /// A lost reply is no word from the store: a node whose wall clock is
    /// far off keeps stamping from the store's anchor (found by the
    /// product simulation: a release stamped from a wall clock 16 minutes
    /// ahead kept its own holder out for as long).
    #[test]
    fn a_reply_without_a_date_keeps_the_stores_anchor() {
        let cfg = LeaseConfig::new("k", "h", Duration::from_secs(16));
        let store = StoreDate::from_http_date(UnixMillis(1_000_000));
        let mut clock = None;
        let dated = StoreReply::dated(ReplyKind::Missing, store);
        note_date(
            &cfg,
            &mut clock,
            now(10_000, 5_000_000),
            Mono(9_000),
            &dated,
        );
        assert_eq!(clock, Some((store, Mono(9_000))));
        // The wall clock is an hour ahead; the call times out.
        let lost = StoreReply::transport(TransportErrorKind::Timeout, "no reply");
        let judged = note_date(
            &cfg,
            &mut clock,
            now(25_000, 4_600_000),
            Mono(20_000),
            &lost,
        );
        assert_eq!(clock, Some((store, Mono(9_000))), "the anchor stands");
        assert_eq!(judged.unix_ms, UnixMillis(1_011_000));
        assert!(judged.earliest() <= UnixMillis(1_011_000));
        assert!(judged.latest() >= UnixMillis(1_000_000 + 1_000 + 16_000));
        // A write stamped now expires a ttl after the store's time, not the wall's.
        let (expires_at, _) = stamp(&cfg, clock, now(25_000, 4_600_000));
        assert_eq!(expires_at, UnixMillis(1_000_000 + 16_000 + 16_000));
    }

    /// A store that never dates its replies (the R2 binding): the wall
    /// clock, trusted to `max_skew`, read afresh at every reply (an anchor
    /// kept would widen with drift until no lease were valid), and kept
    /// across a lost reply as a store's date is.
    #[test]
    fn a_store_without_dates_is_judged_by_the_wall_clock() {
        let cfg = LeaseConfig::new("k", "h", Duration::from_secs(16));
        let mut clock = None;
        let judged = note_date(
            &cfg,
            &mut clock,
            now(10_000, 5_000_000),
            Mono(9_000),
            &StoreReply::new(ReplyKind::Missing),
        );
        assert_eq!(
            judged,
            StoreDate::local_wall(UnixMillis(5_000_000), cfg.max_skew)
        );
        assert_eq!(clock, Some((judged, Mono(10_000))));
        let later = note_date(
            &cfg,
            &mut clock,
            now(70_000, 5_060_000),
            Mono(69_000),
            &StoreReply::new(ReplyKind::Missing),
        );
        let wall = StoreDate::local_wall(UnixMillis(5_060_000), cfg.max_skew);
        assert_eq!(later, wall);
        assert_eq!(clock, Some((later, Mono(70_000))), "read afresh");
        let lost = StoreReply::transport(TransportErrorKind::Timeout, "no reply");
        note_date(
            &cfg,
            &mut clock,
            now(80_000, 5_070_000),
            Mono(75_000),
            &lost,
        );
        assert_eq!(clock, Some((later, Mono(70_000))), "kept");
    }
}
