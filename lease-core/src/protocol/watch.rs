//! Leaderless time: documented in the layer's docs (`protocol/mod.rs`, "Leaderless time").

use crate::protocol::list::{ListReport, Listed};
use std::collections::BTreeMap;

/// What changed at one key between two listings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// Held, first seen (the watch's start, or a new key).
    Held {
        /// The key.
        key: String,
        /// The holder.
        holder: String,
        /// Its token.
        token: u64,
    },
    /// It has no live holder any more (released, expired, or gone).
    Leaderless {
        /// The key.
        key: String,
        /// Who held it last.
        was: Option<String>,
        /// When it was first seen without one (observer's ms).
        since_ms: u64,
    },
    /// Held again after a leaderless time.
    Led {
        /// The key.
        key: String,
        /// The new holder.
        holder: String,
        /// Its token.
        token: u64,
        /// How long the key was seen without a holder (ms).
        leaderless_ms: u64,
    },
    /// Another holder took over with no leaderless listing between (a
    /// handoff faster than the interval, or a break).
    HandedOver {
        /// The key.
        key: String,
        /// The previous holder.
        from: String,
        /// The new holder.
        to: String,
        /// The new token.
        token: u64,
    },
}

/// What a key's watch has seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyWatch {
    /// The holder and token at the last listing, if held.
    pub held: Option<(String, u64)>,
    /// Since when it has been seen leaderless (observer's ms), if it is.
    pub leaderless_since: Option<u64>,
    /// Leaderless time ended so far (ms).
    pub leaderless_ms: u64,
    /// The longest leaderless stretch that ended (ms).
    pub longest_ms: u64,
    /// Changes of holder seen.
    pub handoffs: u64,
}

/// Watches the keys of a prefix (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Watch {
    keys: BTreeMap<String, KeyWatch>,
}

impl Watch {
    /// A watch of nothing yet.
    pub fn new() -> Watch {
        Watch::default()
    }

    /// Takes the listing made at `now_ms` (observer's clock) and tells
    /// what changed.
    pub fn observe(&mut self, now_ms: u64, report: &ListReport) -> Vec<WatchEvent> {
        let live: BTreeMap<&str, &Listed> = report
            .leases
            .iter()
            // An owned key by its session (held when that session is not
            // listed: nothing says it is free).
            .filter(|l| report.held(l).unwrap_or(true))
            .map(|l| (l.key.as_str(), l))
            .collect();
        let listed: Vec<&str> = report.leases.iter().map(|l| l.key.as_str()).collect();
        let mut keys: Vec<String> = listed.iter().map(|k| k.to_string()).collect();
        keys.extend(self.keys.keys().cloned());
        let mut events = Vec::new();
        for key in keys {
            if events.iter().any(|e: &WatchEvent| event_key(e) == key) {
                continue;
            }
            let first = !self.keys.contains_key(&key);
            let w = self.keys.entry(key.clone()).or_default();
            match (live.get(key.as_str()), w.held.clone(), w.leaderless_since) {
                (Some(l), None, None) if first => {
                    w.held = Some((l.record.holder.clone(), l.record.token));
                    events.push(WatchEvent::Held {
                        key,
                        holder: l.record.holder.clone(),
                        token: l.record.token,
                    });
                }
                (Some(l), _, Some(since)) => {
                    let gap = now_ms.saturating_sub(since);
                    w.leaderless_ms += gap;
                    w.longest_ms = w.longest_ms.max(gap);
                    w.leaderless_since = None;
                    w.handoffs += 1;
                    w.held = Some((l.record.holder.clone(), l.record.token));
                    events.push(WatchEvent::Led {
                        key,
                        holder: l.record.holder.clone(),
                        token: l.record.token,
                        leaderless_ms: gap,
                    });
                }
                (Some(l), Some((holder, token)), None)
                    if token != l.record.token || holder != l.record.holder =>
                {
                    w.handoffs += 1;
                    w.held = Some((l.record.holder.clone(), l.record.token));
                    events.push(WatchEvent::HandedOver {
                        key,
                        from: holder,
                        to: l.record.holder.clone(),
                        token: l.record.token,
                    });
                }
                (Some(_), _, None) => {}
                (None, held, None) => {
                    w.leaderless_since = Some(now_ms);
                    w.held = None;
                    events.push(WatchEvent::Leaderless {
                        key,
                        was: held.map(|(h, _)| h),
                        since_ms: now_ms,
                    });
                }
                (None, _, Some(_)) => {}
            }
        }
        events
    }

    /// Every key watched, with what was seen of it; a key leaderless at
    /// `now_ms` counts its open stretch too.
    pub fn summary(&self, now_ms: u64) -> BTreeMap<String, KeyWatch> {
        self.keys
            .iter()
            .map(|(k, w)| {
                let mut w = w.clone();
                if let Some(since) = w.leaderless_since {
                    let open = now_ms.saturating_sub(since);
                    w.leaderless_ms += open;
                    w.longest_ms = w.longest_ms.max(open);
                }
                (k.clone(), w)
            })
            .collect()
    }
}

fn event_key(e: &WatchEvent) -> &str {
    match e {
        WatchEvent::Held { key, .. }
        | WatchEvent::Leaderless { key, .. }
        | WatchEvent::Led { key, .. }
        | WatchEvent::HandedOver { key, .. } => key,
    }
}

impl WatchEvent {
    /// As one JSON line.
    pub fn to_json(&self, at_ms: u64) -> serde_json::Value {
        use serde_json::json;
        match self {
            WatchEvent::Held { key, holder, token } => {
                json!({"at_ms": at_ms, "event": "held", "key": key, "holder": holder, "token": token})
            }
            WatchEvent::Leaderless { key, was, since_ms } => {
                json!({"at_ms": at_ms, "event": "leaderless", "key": key, "was": was, "since_ms": since_ms})
            }
            WatchEvent::Led {
                key,
                holder,
                token,
                leaderless_ms,
            } => json!({"at_ms": at_ms, "event": "led", "key": key, "holder": holder,
                        "token": token, "leaderless_ms": leaderless_ms}),
            WatchEvent::HandedOver {
                key,
                from,
                to,
                token,
            } => json!({"at_ms": at_ms, "event": "handed_over", "key": key, "from": from,
                        "to": to, "token": token}),
        }
    }
}

impl core::fmt::Display for WatchEvent {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WatchEvent::Held { key, holder, token } => {
                write!(f, "{key}: held by {holder} (token {token})")
            }
            WatchEvent::Leaderless { key, was, .. } => write!(
                f,
                "{key}: LEADERLESS (was {})",
                was.as_deref().unwrap_or("not held")
            ),
            WatchEvent::Led {
                key,
                holder,
                token,
                leaderless_ms,
            } => write!(
                f,
                "{key}: held by {holder} (token {token}) after {leaderless_ms} ms leaderless"
            ),
            WatchEvent::HandedOver {
                key,
                from,
                to,
                token,
            } => write!(f, "{key}: handed over from {from} to {to} (token {token})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::LeaseRecord;
    use crate::store::Etag;
    use crate::time::{StoreDate, UnixMillis};

    fn listed(key: &str, holder: &str, token: u64, released: bool) -> Listed {
        let now = 1_795_000_000_000;
        let record = LeaseRecord {
            token,
            expires_at: UnixMillis(now + 30_000),
            holder: holder.into(),
            acquisition: "s".into(),
            nonce: "n".into(),
            acquired_at: None,
            ttl_ms: None,
            released,
            released_at: None,
            meta: Default::default(),
            protocol: Some("cas".into()),
            strays: false,
            runs: Vec::new(),
            foreign: None,
            owned_by: None,
        };
        Listed {
            key: key.into(),
            object: key.into(),
            protocol: None,
            etag: Etag::new("e"),
            record,
            date: Some(StoreDate::from_http_date(UnixMillis(now))),
        }
    }

    fn report(leases: Vec<Listed>) -> ListReport {
        ListReport {
            leases,
            others: Vec::new(),
        }
    }

    #[test]
    fn a_leaderless_stretch_is_timed_from_the_first_free_listing_to_the_next_holder() {
        let mut w = Watch::new();
        let e = w.observe(0, &report(vec![listed("k", "a", 1, false)]));
        assert!(
            matches!(&e[..], [WatchEvent::Held { token: 1, .. }]),
            "{e:?}"
        );
        assert!(w
            .observe(500, &report(vec![listed("k", "a", 1, false)]))
            .is_empty());
        let e = w.observe(1_000, &report(vec![listed("k", "a", 1, true)]));
        assert!(
            matches!(&e[..], [WatchEvent::Leaderless { was: Some(a), since_ms: 1_000, .. }] if a == "a"),
            "{e:?}"
        );
        assert!(
            w.observe(2_000, &report(vec![])).is_empty(),
            "gone: still leaderless"
        );
        let e = w.observe(3_500, &report(vec![listed("k", "b", 2, false)]));
        assert!(
            matches!(
                &e[..],
                [WatchEvent::Led {
                    token: 2,
                    leaderless_ms: 2_500,
                    ..
                }]
            ),
            "{e:?}"
        );
        let e = w.observe(4_000, &report(vec![listed("k", "c", 3, false)]));
        assert!(
            matches!(&e[..], [WatchEvent::HandedOver { token: 3, .. }]),
            "{e:?}"
        );
        let s = w.summary(4_000);
        assert_eq!(
            (s["k"].leaderless_ms, s["k"].longest_ms, s["k"].handoffs),
            (2_500, 2_500, 2)
        );
        // An open stretch counts to the end.
        w.observe(5_000, &report(vec![]));
        assert_eq!(w.summary(6_000)["k"].leaderless_ms, 3_500);
    }

    #[test]
    fn a_key_first_seen_free_is_leaderless_from_then() {
        let mut w = Watch::new();
        let e = w.observe(0, &report(vec![listed("k", "a", 1, true)]));
        assert!(
            matches!(&e[..], [WatchEvent::Leaderless { was: None, .. }]),
            "{e:?}"
        );
    }
}
