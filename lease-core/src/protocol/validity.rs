//! What a write buys: the expiry it stamps on the store's clock and the
//! local deadline until which the writer may trust it, and when another's
//! record may be taken over. Every protocol judges time here (the time
//! model and the safety assumptions are in `docs/protocols.md`).

use crate::config::LeaseConfig;
use crate::record::LeaseRecord;
use crate::store::StoreReply;
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
    let (date, anchor) = match reply.date {
        Some(d) => (d, sent),
        None => (StoreDate::local_wall(now.wall, cfg.max_skew), now.mono),
    };
    // Replies arrive one at a time, so the newest is the freshest bound.
    *clock = Some((date, anchor));
    date
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
        || record.meta.keys().any(|k| k == "broken_by")
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
    if !record.released || *to == cfg.holder || record.meta.contains_key("broken_by") {
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
