//! The store-side fault model both simulators use, written once:
//!
//! - what can happen to one request ([`FaultKind`]);
//! - which fault a request meets ([`draw`]): the first [`Scripted`] fault
//!   whose window and filter it matches (outages, hand-built schedules,
//!   the demo's buttons), else one drawn from the [`FaultRates`] with the
//!   run's seeded generator, in a fixed order, so a seed replays;
//! - when it travels ([`arrival`], [`reply_arrival`]): a one-way latency
//!   each way, a late request held past its sender's timeout, a slow reply;
//! - what the store does under it ([`Bucket::serve`]): whether the request
//!   is applied to the in-memory store at the store's true time, what the
//!   sender gets back (if anything), and the `Date` a front end puts on
//!   it, to the second, from a clock off by up to the bucket's skew.
//!
//! A simulator decides a request's fault when it is sent, schedules its
//! arrival, serves it there, and schedules the reply; what it records
//! about each (its timeline, its checker's facts) is its own.

use super::clock::EPOCH;
use lease_core::store::ReplyKind;
use lease_core::time::StoreDate;
use lease_core::{Entropy, MemStore, StoreOp, StoreReply, UnixMillis, VirtualClock};
use std::time::Duration;

/// What happens to one store request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultKind {
    /// The request never reaches the store.
    DropRequest,
    /// A write is applied but its reply is lost.
    DropReply,
    /// A write is applied but answered 500.
    Apply5xx,
    /// A write is answered 409 ConditionalRequestConflict, not applied.
    Conflict,
    /// Answered 429/503, not applied, with this `Retry-After`.
    Throttle {
        /// The server's `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// Not applied, never answered: the sender's timeout fires.
    Hang,
    /// Held in the network: reaches the store this much later than
    /// normal (past the sender's timeout), then is applied normally.
    Late {
        /// Extra delay.
        extra: Duration,
    },
    /// Applied normally; the reply takes this much longer to come back.
    SlowReply {
        /// Extra delay.
        extra: Duration,
    },
}

impl FaultKind {
    /// A short name, for timelines and counts.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::DropRequest => "request lost",
            FaultKind::DropReply => "write applied, reply lost",
            FaultKind::Apply5xx => "write applied, answered 500",
            FaultKind::Conflict => "answered 409",
            FaultKind::Throttle { .. } => "throttled",
            FaultKind::Hang => "hang",
            FaultKind::Late { .. } => "late delivery",
            FaultKind::SlowReply { .. } => "slow reply",
        }
    }

    /// Whether the fault can only happen to a write (PUT, DELETE).
    pub fn only_writes(&self) -> bool {
        matches!(
            self,
            FaultKind::DropReply | FaultKind::Apply5xx | FaultKind::Conflict
        )
    }
}

/// A fault applied to requests sent in a window, by hand or drawn from the
/// seed (outages).
#[derive(Clone, Debug, PartialEq)]
pub struct Scripted {
    /// Only requests from this node (`None`: every node).
    pub node: Option<usize>,
    /// Window start (real ms, send time).
    pub from_ms: u64,
    /// Window end (exclusive).
    pub to_ms: u64,
    /// Only writes (PUT, DELETE).
    pub writes_only: bool,
    /// Only this many requests (`None`: every one in the window).
    pub uses: Option<u32>,
    /// What happens to them.
    pub kind: FaultKind,
}

impl Scripted {
    /// Every request of `node` in the window.
    pub fn window(node: Option<usize>, from_ms: u64, to_ms: u64, kind: FaultKind) -> Scripted {
        Scripted {
            node,
            from_ms,
            to_ms,
            writes_only: false,
            uses: None,
            kind,
        }
    }

    /// The next write of `node` sent from `from_ms` on.
    pub fn next_write(node: usize, from_ms: u64, kind: FaultKind) -> Scripted {
        Scripted {
            node: Some(node),
            from_ms,
            to_ms: u64::MAX,
            writes_only: true,
            uses: Some(1),
            kind,
        }
    }

    /// The next request of any node sent from `from_ms` on that `kind` can
    /// happen to (a write, for the faults that hit only writes): a fault
    /// armed by hand.
    pub fn next_call(from_ms: u64, kind: FaultKind) -> Scripted {
        Scripted {
            node: None,
            from_ms,
            to_ms: u64::MAX,
            writes_only: false,
            uses: Some(1),
            kind,
        }
    }

    fn matches(&self, request: &Request, used: u32) -> bool {
        self.node.is_none_or(|n| n == request.node)
            && (self.from_ms..self.to_ms).contains(&request.at_ms)
            && (request.write || !self.writes_only)
            && (request.write || !self.kind.only_writes())
            && self.uses.is_none_or(|u| used < u)
    }
}

/// Store fault probabilities per request.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRates {
    /// Lost on the way to the store.
    pub drop_request: f64,
    /// Write applied, reply lost.
    pub drop_reply: f64,
    /// Write applied, answered 500.
    pub apply_5xx: f64,
    /// 409, not applied.
    pub conflict: f64,
    /// 429/503, not applied.
    pub throttle: f64,
    /// Held in the network past the sender's timeout.
    pub late: f64,
    /// Longest extra delay of a late request (beyond the timeout).
    pub late_max: Duration,
    /// Longest `Retry-After` on a throttle (half of them carry one, drawn
    /// log-uniform from 10 ms; zero: none carries one).
    pub retry_after_max: Duration,
    /// Applied, the reply slow to come back.
    pub slow_reply: f64,
    /// Longest extra delay of a slow reply.
    pub slow_reply_max: Duration,
}

impl FaultRates {
    /// No faults.
    pub fn none() -> Self {
        FaultRates {
            drop_request: 0.0,
            drop_reply: 0.0,
            apply_5xx: 0.0,
            conflict: 0.0,
            throttle: 0.0,
            late: 0.0,
            late_max: Duration::ZERO,
            retry_after_max: Duration::ZERO,
            slow_reply: 0.0,
            slow_reply_max: Duration::ZERO,
        }
    }
}

/// A request as the fault model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The sending node.
    pub node: usize,
    /// When it is sent (real ms).
    pub at_ms: u64,
    /// Whether it is a write (PUT, DELETE).
    pub write: bool,
}

/// `true` with probability `p`; draws nothing when `p` is zero, so a fault
/// a run does not have leaves its other draws as they were.
pub fn chance(rng: &mut Entropy, p: f64) -> bool {
    p > 0.0 && rng.unit() < p
}

/// The fault `request` meets, if any: the first scripted fault that
/// matches it (`used` counts each one's requests so far, one count for
/// each), else one drawn from `rates`.
pub fn draw(
    rates: &FaultRates,
    scripted: &[Scripted],
    used: &mut [u32],
    request: Request,
    rng: &mut Entropy,
) -> Option<FaultKind> {
    for (s, used) in scripted.iter().zip(used) {
        if s.matches(&request, *used) {
            *used += 1;
            return Some(s.kind);
        }
    }
    let write = request.write;
    let f = rates;
    if chance(rng, f.drop_request) {
        Some(FaultKind::DropRequest)
    } else if chance(rng, f.late) {
        let extra = Duration::from_millis((f.late_max.as_millis() as f64 * rng.unit()) as u64);
        Some(FaultKind::Late { extra })
    } else if write && chance(rng, f.conflict) {
        Some(FaultKind::Conflict)
    } else if chance(rng, f.throttle) {
        let retry_after = (!f.retry_after_max.is_zero() && rng.unit() < 0.5).then(|| {
            // Log-uniform from 10 ms to the maximum.
            let max = f.retry_after_max.as_millis().max(10) as f64;
            let ms = (10f64.ln() + (max.ln() - 10f64.ln()) * rng.unit()).exp();
            Duration::from_millis(ms as u64)
        });
        Some(FaultKind::Throttle { retry_after })
    } else if write && chance(rng, f.drop_reply) {
        Some(FaultKind::DropReply)
    } else if write && chance(rng, f.apply_5xx) {
        Some(FaultKind::Apply5xx)
    } else if chance(rng, f.slow_reply) {
        let extra =
            Duration::from_millis((f.slow_reply_max.as_millis() as f64 * rng.unit()) as u64);
        Some(FaultKind::SlowReply { extra })
    } else {
        None
    }
}

/// The scripted faults that have requests left to hit (the armed ones).
pub fn pending<'a>(
    scripted: &'a [Scripted],
    used: &'a [u32],
) -> impl Iterator<Item = &'a Scripted> {
    let left = |(s, used): (&'a Scripted, &u32)| s.uses.is_none_or(|u| *used < u).then_some(s);
    scripted.iter().zip(used).filter_map(left)
}

/// A one-way trip through the network: drawn from `range`, at least 1 ms.
pub fn latency(range: (Duration, Duration), rng: &mut Entropy) -> u64 {
    let (lo, hi) = (range.0.as_millis() as f64, range.1.as_millis() as f64);
    ((lo + (hi - lo) * rng.unit()) as u64).max(1)
}

/// When a request sent at `now` under `fault` reaches the store (`None`:
/// it never does); `timeout` is its sender's, which a late request outlasts.
pub fn arrival(
    now: u64,
    range: (Duration, Duration),
    fault: Option<&FaultKind>,
    timeout: Duration,
    rng: &mut Entropy,
) -> Option<u64> {
    let at = now + latency(range, rng);
    match fault {
        Some(FaultKind::DropRequest) => None,
        Some(FaultKind::Late { extra }) => Some(at + (timeout + *extra).as_millis() as u64),
        _ => Some(at),
    }
}

/// When a reply the store sends at `now` reaches its sender.
pub fn reply_arrival(
    now: u64,
    range: (Duration, Duration),
    fault: Option<&FaultKind>,
    rng: &mut Entropy,
) -> u64 {
    let at = now + latency(range, rng);
    match fault {
        Some(FaultKind::SlowReply { extra }) => at + extra.as_millis() as u64,
        _ => at,
    }
}

/// What the store did with one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    /// What the sender gets back (`None`: no reply ever comes).
    pub reply: Option<StoreReply>,
    /// The request was a write and the store applied it (it wrote or
    /// deleted), whatever the sender is told.
    pub wrote: bool,
}

/// The bucket both simulations run against: the real [`MemStore`], whose
/// clock is real time, behind front ends whose clocks are off by up to
/// `skew` and which date replies to the second, as HTTP's `Date` does.
#[derive(Debug)]
pub struct Bucket {
    store: MemStore,
    clock: VirtualClock,
    skew: Duration,
    /// Writes to one key closer than this are answered 429 (not applied).
    spacing: Duration,
    /// When each key was last written (real time, ms).
    written: core::cell::RefCell<std::collections::BTreeMap<String, u64>>,
}

impl Bucket {
    /// An empty bucket whose front ends are off by up to `skew`.
    pub fn new(skew: Duration) -> Bucket {
        let clock = VirtualClock::new(EPOCH);
        Bucket {
            store: MemStore::new(clock.clone()),
            clock,
            skew,
            spacing: Duration::ZERO,
            written: Default::default(),
        }
    }

    /// Answers 429 to a write to a key within `spacing` of the last write
    /// applied to it, as R2 and GCS do (about one write a second per
    /// object): not applied.
    pub fn with_spacing(mut self, spacing: Duration) -> Bucket {
        self.spacing = spacing;
        self
    }

    /// Lists at most `n` keys a page.
    pub fn with_page_size(mut self, n: usize) -> Bucket {
        self.store = self.store.with_page_size(n);
        self
    }

    /// The store behind the front ends, to read (or to fill before a run).
    pub fn store(&self) -> &MemStore {
        &self.store
    }

    /// The `Date` a front end puts on a reply at real time `now`.
    fn date(&self, now: u64, rng: &mut Entropy) -> StoreDate {
        let skew = ((rng.unit() * 2.0 - 1.0) * self.skew.as_millis() as f64) as i64;
        let front_end = (EPOCH.0 as i64 + now as i64 + skew).max(0) as u64;
        StoreDate::from_http_date(UnixMillis(front_end / 1000 * 1000))
    }

    /// Serves `op` arriving at real time `now` under `fault`: a hang, a
    /// 409 or a throttle leave the store alone; any other request is
    /// applied at the store's true time, and a write's reply is then lost
    /// or replaced by a 500 if the fault says so. Every reply carries a
    /// front end's `Date`.
    pub fn serve(
        &self,
        now: u64,
        op: &StoreOp,
        fault: Option<&FaultKind>,
        rng: &mut Entropy,
    ) -> Served {
        let date = self.date(now, rng);
        let refused = |kind| Served {
            reply: Some(StoreReply::dated(kind, date)),
            wrote: false,
        };
        match fault {
            Some(FaultKind::Hang) => Served {
                reply: None,
                wrote: false,
            },
            Some(FaultKind::Conflict) => refused(ReplyKind::Conflict),
            Some(FaultKind::Throttle { retry_after }) => refused(ReplyKind::Throttled {
                retry_after: *retry_after,
            }),
            _ if op.is_write()
                && !self.spacing.is_zero()
                && self
                    .written
                    .borrow()
                    .get(op.key())
                    .is_some_and(|&at| now < at + self.spacing.as_millis() as u64) =>
            {
                refused(ReplyKind::Throttled { retry_after: None })
            }
            _ => {
                let behind = (EPOCH.0 + now).saturating_sub(self.clock.wall().0);
                self.clock.advance(Duration::from_millis(behind));
                let mut reply = self.store.apply(op);
                reply.date = Some(date);
                let write = op.is_write();
                let wrote =
                    write && matches!(reply.kind, ReplyKind::Written { .. } | ReplyKind::Deleted);
                if wrote {
                    self.written.borrow_mut().insert(op.key().to_string(), now);
                }
                let reply = match fault {
                    Some(FaultKind::DropReply) if write => None,
                    Some(FaultKind::Apply5xx) if write => Some(StoreReply::dated(
                        ReplyKind::ServerError {
                            status: 500,
                            code: Some("InternalError".into()),
                        },
                        date,
                    )),
                    _ => Some(reply),
                };
                Served { reply, wrote }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lease_core::store::PutCondition;

    fn put(key: &str) -> StoreOp {
        StoreOp::Put {
            key: key.into(),
            body: b"x".to_vec(),
            condition: PutCondition::IfAbsent,
        }
    }

    fn request(node: usize, at_ms: u64, write: bool) -> Request {
        Request { node, at_ms, write }
    }

    #[test]
    fn scripted_faults_hit_what_they_name_and_no_more() {
        let scripted = [
            Scripted::next_call(100, FaultKind::DropReply),
            Scripted::window(Some(1), 0, 50, FaultKind::Hang),
        ];
        let (mut used, mut rng) = ([0; 2], Entropy::from_seed(1));
        let mut fault = |r| draw(&FaultRates::none(), &scripted, &mut used, r, &mut rng);
        assert_eq!(fault(request(0, 10, true)), None);
        assert_eq!(fault(request(1, 10, false)), Some(FaultKind::Hang));
        assert_eq!(fault(request(1, 50, false)), None);
        // Armed for a write: a read passes, the next write takes it, once.
        assert_eq!(fault(request(0, 100, false)), None);
        assert_eq!(fault(request(2, 120, true)), Some(FaultKind::DropReply));
        assert_eq!(fault(request(2, 130, true)), None);
        assert_eq!(pending(&scripted, &used).count(), 1);
    }

    #[test]
    fn rates_draw_each_fault_and_only_writes_get_write_faults() {
        let rates = FaultRates {
            conflict: 0.3,
            drop_reply: 0.3,
            apply_5xx: 0.3,
            throttle: 0.1,
            retry_after_max: Duration::from_secs(3600),
            ..FaultRates::none()
        };
        let mut rng = Entropy::from_seed(7);
        let (mut seen, mut long) = (std::collections::BTreeSet::new(), false);
        for i in 0..2_000 {
            let write = i % 2 == 0;
            let fault = draw(&rates, &[], &mut [], request(0, i, write), &mut rng);
            if let Some(f) = fault {
                assert!(write || !f.only_writes(), "{f:?} on a read");
                seen.insert(f.name());
                if let FaultKind::Throttle {
                    retry_after: Some(d),
                } = f
                {
                    long |= d > Duration::from_secs(60);
                }
            }
        }
        let want = [
            "answered 409",
            "throttled",
            "write applied, answered 500",
            "write applied, reply lost",
        ];
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), want);
        assert!(long, "no Retry-After over a minute in 2,000 draws");
    }

    #[test]
    fn the_store_applies_what_the_fault_lets_through_and_dates_it_to_the_second() {
        let bucket = Bucket::new(Duration::from_millis(50));
        let mut rng = Entropy::from_seed(3);
        let refused = bucket.serve(1_500, &put("a"), Some(&FaultKind::Conflict), &mut rng);
        assert!(!refused.wrote && bucket.store().get("a").is_none());
        assert_eq!(refused.reply.unwrap().kind, ReplyKind::Conflict);
        let lost = bucket.serve(2_500, &put("a"), Some(&FaultKind::DropReply), &mut rng);
        assert!(lost.wrote && lost.reply.is_none() && bucket.store().get("a").is_some());
        let again = bucket
            .serve(3_500, &put("a"), None, &mut rng)
            .reply
            .unwrap();
        assert_eq!(again.kind, ReplyKind::PreconditionFailed);
        let date = again.date.unwrap().unix_ms.0;
        assert_eq!(date % 1000, 0);
        assert!(date.abs_diff(EPOCH.0 + 3_500) <= 1_000, "{date}");
        let hang = bucket.serve(4_000, &put("b"), Some(&FaultKind::Hang), &mut rng);
        assert_eq!((hang.reply, hang.wrote), (None, false));
    }
}
