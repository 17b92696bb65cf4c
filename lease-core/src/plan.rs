//! Planning a lease before adopting it (`lease plan`): how long a failover
//! can take, how many requests a month the leases send and what they cost
//! at list prices, how many noncurrent versions a versioned bucket keeps,
//! and which limits the settings break. Pure arithmetic on the settings: no
//! request is made, so no bucket or credentials are needed.
//!
//! Every figure follows from how the machines work; `docs/operations.md`
//! ("Planning a lease: failover and cost") gives each formula.
//!
//! - **Failover**, from a holder's death to the next holder's acquisition,
//!   worst case. A holder that dies just after sending a renewal leaves a
//!   record that expires `ttl` later on the store's clock, plus the drift
//!   its clock may have gained since the store date it stamped from
//!   (`drift_rate × renew_every`). A contender sees it expired only when the
//!   `Date` of its own read is past `expires_at` (`docs/design.md` §4): a
//!   `Date` of whole seconds lags the store's time by up to the date
//!   resolution, and a front end's clock by up to `margin`. Then it depends
//!   on how the contender waits: an [`Elector`](crate::Elector) campaigns
//!   every `poll_every` plus up to 10 % jitter, so it may read just before
//!   the lapse and again `1.1 × poll_every` later; a waiting acquire
//!   ([`protocol::wait`](crate::protocol#trying-again), `lease acquire --wait`) retries no later than
//!   the expiry it read plus one date resolution plus up to
//!   [`FIRST_RETRY`] of jitter. Without store dates
//!   (some bindings) `max_skew` stands where the date resolution does; both
//!   default to one second. The acquisition's own round trips come on top.
//! - **Requests**, per 30-day month ([`MONTH`]): the leader's writes per
//!   renewal (cas: 1 PUT; epochs: PUT + LIST + DELETE; the mutex cannot
//!   renew, so a leader holds one term of `ttl`, releases (DELETE) and
//!   campaigns again (GET + PUT) after `poll_every`), and each waiting
//!   contender's reads per poll (cas and mutex: 1 GET; epochs: LIST + GET).
//!   Contenders are counted at one poll per `poll_every` (jitter only
//!   lowers it).
//! - **Cost**: writes and listings at the provider's class A price, reads
//!   at class B, deletes free ([`Prices`], dated).
//! - **Noncurrent versions**: on a versioned bucket, every overwrite (cas's
//!   renewals) and every delete (epochs' cleanup, the mutex's release)
//!   keeps the old version until a lifecycle rule expires it.
//! - **Limits**: the settings that [`LeaseConfig::validate`] refuses, and a
//!   write to one object sooner after the previous write to it than the
//!   provider allows ([`per_object_spacing`]).

use crate::config::{ConfigError, LeaseConfig, Protocol};
use crate::number::decimal;
use crate::protocol::wait::FIRST_RETRY;
use crate::wire::provider::Provider;
use core::fmt;
use std::time::Duration;

/// The month the figures are for: 30 days.
pub const MONTH: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The date of the prices in [`Prices::of`].
pub const PRICES_AS_OF: &str = "2026-11";

/// A provider's list prices per request, in US dollars per million.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    /// What the prices are for (tier, region).
    pub tier: &'static str,
    /// Writes (PUT) and listings (LIST): S3's PUT/LIST, R2's and GCS's
    /// class A, Azure's write and list operations.
    pub class_a_per_million: f64,
    /// Reads (GET): S3's GET, R2's and GCS's class B, Azure's reads.
    pub class_b_per_million: f64,
    /// Where the prices are published.
    pub source: &'static str,
    /// Whether the project could confirm them as of [`PRICES_AS_OF`];
    /// `false`: take them as an estimate and check the page.
    pub confirmed: bool,
}

impl Prices {
    /// The list prices of `provider` as of [`PRICES_AS_OF`] (deletes are
    /// free on each); `None` for a server without a price list (MinIO,
    /// another S3-compatible server).
    pub fn of(provider: Provider) -> Option<Prices> {
        match provider {
            Provider::Aws => Some(Prices {
                tier: "S3 Standard, us-east-1",
                class_a_per_million: 5.00,
                class_b_per_million: 0.40,
                source: "https://aws.amazon.com/s3/pricing/",
                confirmed: true,
            }),
            Provider::R2 => Some(Prices {
                tier: "R2 Standard (before the monthly free allowance)",
                class_a_per_million: 4.50,
                class_b_per_million: 0.36,
                source: "https://developers.cloudflare.com/r2/pricing/",
                confirmed: true,
            }),
            Provider::Gcs => Some(Prices {
                tier: "Cloud Storage Standard, a regional bucket",
                class_a_per_million: 5.00,
                class_b_per_million: 0.40,
                source: "https://cloud.google.com/storage/pricing",
                confirmed: true,
            }),
            Provider::Azure => Some(Prices {
                tier: "Blob Storage hot tier, LRS (varies by region)",
                class_a_per_million: 5.00,
                class_b_per_million: 0.40,
                source: "https://azure.microsoft.com/pricing/details/storage/blobs/",
                confirmed: false,
            }),
            Provider::Tigris => Some(Prices {
                tier: "Tigris Standard",
                class_a_per_million: 5.00,
                class_b_per_million: 0.50,
                source: "https://www.tigrisdata.com/pricing/",
                confirmed: false,
            }),
            _ => None,
        }
    }
}

/// The shortest time the provider allows between two writes to one
/// object: the preset's spacing (GCS and R2, about one write per second
/// per object, answered 429 beyond), or a documented limit no preset
/// spaces by itself.
pub fn per_object_spacing(provider: Provider) -> Duration {
    let documented = match provider {
        Provider::R2 | Provider::Gcs => Duration::from_secs(1),
        _ => Duration::ZERO,
    };
    provider.preset().min_write_interval.max(documented)
}

/// Requests of one kind of call, per month.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    /// PUTs (creates and conditional writes).
    pub put: u64,
    /// LISTs.
    pub list: u64,
    /// GETs.
    pub get: u64,
    /// DELETEs.
    pub delete: u64,
}

impl Requests {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.put
            .saturating_add(self.list)
            .saturating_add(self.get)
            .saturating_add(self.delete)
    }

    fn times(self, n: u64) -> Requests {
        Requests {
            put: self.put.saturating_mul(n),
            list: self.list.saturating_mul(n),
            get: self.get.saturating_mul(n),
            delete: self.delete.saturating_mul(n),
        }
    }

    fn plus(self, other: Requests) -> Requests {
        Requests {
            put: self.put.saturating_add(other.put),
            list: self.list.saturating_add(other.list),
            get: self.get.saturating_add(other.get),
            delete: self.delete.saturating_add(other.delete),
        }
    }

    /// Their cost at `prices`, in dollars.
    pub fn cost(&self, prices: &Prices) -> f64 {
        (self.put.saturating_add(self.list) as f64 * prices.class_a_per_million
            + self.get as f64 * prices.class_b_per_million)
            / 1_000_000.0
    }
}

/// A limit the settings break.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum BrokenLimit {
    /// The settings fail [`LeaseConfig::validate`] (with the provider's
    /// write spacing).
    Config(ConfigError),
    /// One object is written again sooner than the provider allows.
    Spacing {
        /// The provider.
        provider: Provider,
        /// The time it needs between two writes to one object.
        spacing: Duration,
        /// The time between two writes of the lease to one object.
        every: Duration,
    },
}

impl fmt::Display for BrokenLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrokenLimit::Config(e) => write!(f, "the settings are refused: {e}"),
            BrokenLimit::Spacing {
                provider,
                spacing,
                every,
            } => write!(
                f,
                "{provider} allows one write to an object about every {}, and the lease writes one every {}: \
                 writes would be throttled (429); lengthen the renewal interval or the ttl",
                secs(*spacing),
                secs(*every)
            ),
        }
    }
}

/// What `lease plan` computes (see the module docs for each formula).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The provider planned for.
    pub provider: Provider,
    /// The protocol.
    pub protocol: Protocol,
    /// The lease's ttl.
    pub ttl: Duration,
    /// How often the leader renews (cas, epochs) or, for the mutex, how
    /// long one term lasts (`ttl`) before the lock is given back.
    pub renew_every: Duration,
    /// How often a campaigning contender re-reads.
    pub poll_every: Duration,
    /// How many leases.
    pub leases: u64,
    /// Waiting contenders per lease.
    pub contenders: u64,
    /// The record's expiry after the holder's last write: `ttl +
    /// drift_rate × renew_every`.
    pub expiry: Duration,
    /// How late a contender's read may see the lapse: `margin + date
    /// resolution`.
    pub read_lag: Duration,
    /// Worst case from a holder's death to an elector's acquisition:
    /// `expiry + read_lag + 1.1 × poll_every`.
    pub failover_elector: Duration,
    /// Worst case from a holder's death to a waiting acquire's
    /// acquisition: `expiry + read_lag + date resolution + FIRST_RETRY`.
    pub failover_waiter: Duration,
    /// The leader's writes and reads per month, for one lease.
    pub leader: Requests,
    /// One waiting contender's reads per month.
    pub contender: Requests,
    /// Every request per month, all leases and contenders.
    pub total: Requests,
    /// The provider's prices, when it has a price list.
    pub prices: Option<Prices>,
    /// Noncurrent versions a versioned bucket keeps per lease per month.
    pub noncurrent_versions: u64,
    /// Limits the settings break (empty: none).
    pub violations: Vec<BrokenLimit>,
}

/// How many times `every` fits in a month.
fn per_month(every: Duration) -> u64 {
    (MONTH.as_millis() / every.as_millis().max(1)) as u64
}

/// `d × factor`, saturating (settings up to
/// [`MAX_DURATION`](crate::time::MAX_DURATION) stay far below the limit;
/// a plan of absurd ones must not panic).
fn scale(d: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// A duration in seconds, to the millisecond (`42.2 s`).
fn secs(d: Duration) -> String {
    format!("{} s", decimal(d.as_secs_f64(), 3))
}

/// A lease's requests per month while held (the leader's), a contender's
/// per poll, and how often the leader rewrites one object, by protocol.
fn requests_of(cfg: &LeaseConfig) -> (Requests, Requests, Duration) {
    match cfg.protocol {
        Protocol::Epochs => (
            Requests {
                put: 1,
                list: 1,
                delete: 1,
                get: 0,
            }
            .times(per_month(cfg.renew_every)),
            Requests {
                list: 1,
                get: 1,
                ..Requests::default()
            },
            // Each epoch object is written once; the one before the
            // previous is deleted at a renewal.
            cfg.renew_every.saturating_mul(2),
        ),
        Protocol::Mutex => (
            // A term: the create (GET + PUT), the release (DELETE),
            // and a poll's wait before the next campaign.
            Requests {
                get: 1,
                put: 1,
                delete: 1,
                list: 0,
            }
            .times(per_month(cfg.ttl.saturating_add(cfg.poll_every))),
            Requests {
                get: 1,
                ..Requests::default()
            },
            cfg.ttl,
        ),
        // Cas, and any protocol added later until it has its own row.
        _ => (
            Requests {
                put: 1,
                ..Requests::default()
            }
            .times(per_month(cfg.renew_every)),
            Requests {
                get: 1,
                ..Requests::default()
            },
            cfg.renew_every,
        ),
    }
}

/// The limits `cfg` breaks on `provider`: its settings with the
/// provider's write interval, and the per-object spacing of writes.
fn broken_limits(
    cfg: &LeaseConfig,
    provider: Provider,
    rewrite_every: Duration,
) -> Vec<BrokenLimit> {
    let mut violations = Vec::new();
    let mut checked = cfg.clone();
    checked.min_write_interval = provider.preset().min_write_interval;
    if let Err(e) = checked.validate() {
        violations.push(BrokenLimit::Config(e));
    }
    let spacing = per_object_spacing(provider);
    if !spacing.is_zero() && rewrite_every <= spacing {
        violations.push(BrokenLimit::Spacing {
            provider,
            spacing,
            every: rewrite_every,
        });
    }
    violations
}

impl Plan {
    /// The plan for `leases` leases configured as `cfg` (its ttl,
    /// `renew_every`, `poll_every`, margins and protocol) on `provider`,
    /// each with `contenders` contenders waiting.
    pub fn new(cfg: &LeaseConfig, provider: Provider, leases: u64, contenders: u64) -> Plan {
        let renews = cfg.protocol.renews();
        let renew_every = if renews { cfg.renew_every } else { cfg.ttl };
        let expiry = cfg.ttl.saturating_add(scale(renew_every, cfg.drift_rate));
        let read_lag = cfg.margin.saturating_add(cfg.date_resolution);
        let failover_elector = expiry
            .saturating_add(read_lag)
            .saturating_add(scale(cfg.poll_every, 1.1));
        let failover_waiter = expiry
            .saturating_add(read_lag)
            .saturating_add(cfg.date_resolution)
            .saturating_add(FIRST_RETRY);
        let (leader, per_poll, rewrite_every) = requests_of(cfg);
        let contender = per_poll.times(per_month(cfg.poll_every));
        let total = leader.plus(contender.times(contenders)).times(leases);
        // Overwrites leave the old version; deletes leave the deleted one.
        let noncurrent_versions = match cfg.protocol {
            Protocol::Epochs | Protocol::Mutex => leader.delete,
            _ => leader.put,
        };
        let violations = broken_limits(cfg, provider, rewrite_every);
        Plan {
            provider,
            protocol: cfg.protocol,
            ttl: cfg.ttl,
            renew_every,
            poll_every: cfg.poll_every,
            leases,
            contenders,
            expiry,
            read_lag,
            failover_elector,
            failover_waiter,
            leader,
            contender,
            total,
            prices: Prices::of(provider),
            noncurrent_versions,
            violations,
        }
    }

    /// The month's bill for every request, at list prices (`None` without
    /// a price list).
    pub fn monthly_cost(&self) -> Option<f64> {
        self.prices.as_ref().map(|p| self.total.cost(p))
    }

    /// The plan as JSON (durations in milliseconds, money in dollars).
    pub fn to_json(&self) -> serde_json::Value {
        let ms = |d: Duration| d.as_millis() as u64;
        let requests = |r: &Requests| {
            serde_json::json!({
                "put": r.put, "list": r.list, "get": r.get, "delete": r.delete, "total": r.total(),
            })
        };
        serde_json::json!({
            "provider": self.provider.name(),
            "protocol": self.protocol.name(),
            "ttl_ms": ms(self.ttl),
            "renew_every_ms": ms(self.renew_every),
            "poll_every_ms": ms(self.poll_every),
            "leases": self.leases,
            "contenders": self.contenders,
            "failover": {
                "elector_ms": ms(self.failover_elector),
                "waiting_acquire_ms": ms(self.failover_waiter),
                "expiry_ms": ms(self.expiry),
                "read_lag_ms": ms(self.read_lag),
            },
            "requests_per_month": {
                "leader": requests(&self.leader),
                "contender": requests(&self.contender),
                "total": requests(&self.total),
            },
            "cost_per_month_usd": self.monthly_cost(),
            "prices": self.prices.map(|p| serde_json::json!({
                "as_of": PRICES_AS_OF,
                "tier": p.tier,
                "class_a_per_million_usd": p.class_a_per_million,
                "class_b_per_million_usd": p.class_b_per_million,
                "source": p.source,
                "confirmed": p.confirmed,
            })),
            "noncurrent_versions_per_lease_per_month": self.noncurrent_versions,
            "violations": self.violations.iter().map(ToString::to_string).collect::<Vec<_>>(),
        })
    }
}

/// A count with thousands separators (`259,200`).
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Dollars to the cent, or to a tenth of a cent below one cent.
fn dollars(x: f64) -> String {
    if x > 0.0 && x < 0.01 {
        format!("${}", decimal(x, 4))
    } else {
        let cents = (x * 100.0).round() as u64;
        format!("${}.{:02}", count(cents / 100), cents % 100)
    }
}

/// `r` as one line: `1 PUT, 0 LIST, 2 GET, 0 DELETE`.
fn requests(r: &Requests) -> String {
    format!(
        "{} PUT, {} LIST, {} GET, {} DELETE",
        count(r.put),
        count(r.list),
        count(r.get),
        count(r.delete)
    )
}

impl Plan {
    /// The failover lines of the plan's text.
    fn write_failover(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "failover, worst case from a holder's death to the next acquisition:"
        )?;
        writeln!(
            f,
            "  an elector polling every {}: {} (expiry {} + read lag {} + 1.1 x poll {})",
            secs(self.poll_every),
            secs(self.failover_elector),
            secs(self.expiry),
            secs(self.read_lag),
            secs(scale(self.poll_every, 1.1))
        )?;
        writeln!(
            f,
            "  a waiting acquire (--wait): {} (expiry {} + read lag {} + date resolution and jitter {})",
            secs(self.failover_waiter),
            secs(self.expiry),
            secs(self.read_lag),
            secs(
                self.failover_waiter
                    .saturating_sub(self.expiry)
                    .saturating_sub(self.read_lag)
            )
        )?;
        writeln!(f, "  plus the acquisition's own round trips")?;
        Ok(())
    }

    /// The requests, cost and versions lines of the plan's text.
    fn write_requests(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "requests per month (30 days):")?;
        writeln!(f, "  leader, per lease: {}", requests(&self.leader))?;
        if self.contenders > 0 {
            writeln!(f, "  each waiting contender: {}", requests(&self.contender))?;
        }
        writeln!(
            f,
            "  all: {} ({} requests)",
            requests(&self.total),
            count(self.total.total())
        )?;
        match &self.prices {
            Some(p) => writeln!(
                f,
                "cost at list prices: {} a month ({}, as of {PRICES_AS_OF}{}: PUT/LIST {} per million, GET {} per million, DELETE free)",
                dollars(self.total.cost(p)),
                p.tier,
                if p.confirmed { "" } else { ", unconfirmed" },
                dollars(p.class_a_per_million),
                dollars(p.class_b_per_million)
            )?,
            None => writeln!(f, "cost: {} publishes no request prices", self.provider)?,
        }
        writeln!(
            f,
            "versioned bucket: {} noncurrent versions per lease a month (about {} a day) until a lifecycle rule expires them",
            count(self.noncurrent_versions),
            count(self.noncurrent_versions / 30)
        )?;
        Ok(())
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let every = if self.protocol.renews() {
            format!("renewed every {}", secs(self.renew_every))
        } else {
            format!("one term of {} (no renewal)", secs(self.ttl))
        };
        writeln!(
            f,
            "plan: {} lease(s), protocol {} on {}, ttl {}, {every}, {} waiting contender(s) per lease",
            self.leases,
            self.protocol,
            self.provider,
            secs(self.ttl),
            self.contenders
        )?;
        self.write_failover(f)?;
        self.write_requests(f)?;
        if self.violations.is_empty() {
            write!(f, "limits: none violated")
        } else {
            for (i, v) in self.violations.iter().enumerate() {
                if i > 0 {
                    writeln!(f)?;
                }
                write!(f, "VIOLATION: {v}")?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(protocol: Protocol, ttl_s: u64) -> LeaseConfig {
        let mut cfg = LeaseConfig::new("plan", "plan", Duration::from_secs(ttl_s));
        cfg.protocol = protocol;
        cfg
    }

    #[test]
    fn failover_is_expiry_read_lag_and_the_contenders_wait() {
        // ttl 30 s: renew and poll every 10 s, drift 1 %, margin 100 ms,
        // date resolution 1 s.
        let plan = Plan::new(&cfg(Protocol::Cas, 30), Provider::Aws, 1, 0);
        // 30 + 0.01 × 10 = 30.1 s.
        assert_eq!(plan.expiry, Duration::from_millis(30_100));
        // 0.1 + 1 = 1.1 s.
        assert_eq!(plan.read_lag, Duration::from_millis(1_100));
        // 30.1 + 1.1 + 1.1 × 10 = 42.2 s.
        assert_eq!(plan.failover_elector, Duration::from_millis(42_200));
        // 30.1 + 1.1 + 1 + 0.25 = 32.45 s.
        assert_eq!(plan.failover_waiter, Duration::from_millis(32_450));
        // The mutex: a term is one ttl, so the drift counts over it.
        let plan = Plan::new(&cfg(Protocol::Mutex, 30), Provider::Aws, 1, 0);
        assert_eq!(plan.expiry, Duration::from_millis(30_300));
    }

    #[test]
    fn cas_requests_and_cost_match_the_hand_computed_table() {
        // docs/protocols.md's cost model: ttl 30 s, renewed every 10 s:
        // 2,592,000 s / 10 s = 259,200 PUTs; $0.005 per 1,000 = $1.296.
        let plan = Plan::new(&cfg(Protocol::Cas, 30), Provider::Aws, 1, 1);
        assert_eq!(
            plan.leader,
            Requests {
                put: 259_200,
                ..Requests::default()
            }
        );
        assert_eq!(
            plan.contender,
            Requests {
                get: 259_200,
                ..Requests::default()
            }
        );
        // 259,200 × $5 / M + 259,200 × $0.40 / M = $1.296 + $0.10368.
        let cost = plan.monthly_cost().unwrap();
        assert!((cost - 1.39968).abs() < 1e-9, "{cost}");
        assert_eq!(plan.noncurrent_versions, 259_200);
        // R2: 259,200 × $4.50 / M = $1.1664.
        let r2 = Plan::new(&cfg(Protocol::Cas, 30), Provider::R2, 1, 0);
        assert!((r2.monthly_cost().unwrap() - 1.1664).abs() < 1e-9);
        // Ten leases cost ten times one.
        let ten = Plan::new(&cfg(Protocol::Cas, 30), Provider::Aws, 10, 1);
        assert_eq!(ten.total.put, 2_592_000);
        assert_eq!(ten.total.get, 2_592_000);
        assert!(Plan::new(&cfg(Protocol::Cas, 30), Provider::Minio, 1, 0)
            .monthly_cost()
            .is_none());
    }

    #[test]
    fn epochs_and_mutex_count_their_own_calls() {
        // Epochs at ttl 30 s: per renewal PUT + LIST + DELETE, 259,200
        // each; a contender LIST + GET per poll. Cost: (259,200 PUT +
        // 259,200 LIST) × $5 / M = $2.592 (deletes free).
        let plan = Plan::new(&cfg(Protocol::Epochs, 30), Provider::Aws, 1, 1);
        assert_eq!(
            plan.leader,
            Requests {
                put: 259_200,
                list: 259_200,
                get: 0,
                delete: 259_200
            }
        );
        assert_eq!(
            (plan.contender.list, plan.contender.get),
            (259_200, 259_200)
        );
        assert_eq!(plan.noncurrent_versions, 259_200);
        let leader_only = Plan::new(&cfg(Protocol::Epochs, 30), Provider::Aws, 1, 0);
        assert!((leader_only.monthly_cost().unwrap() - 2.592).abs() < 1e-9);
        // The mutex at ttl 30 s: a term of 30 s plus a poll of 10 s, so
        // 2,592,000 / 40 = 64,800 terms of GET + PUT + DELETE.
        let plan = Plan::new(&cfg(Protocol::Mutex, 30), Provider::Aws, 1, 0);
        assert_eq!(
            plan.leader,
            Requests {
                put: 64_800,
                list: 0,
                get: 64_800,
                delete: 64_800
            }
        );
        assert_eq!(plan.noncurrent_versions, 64_800);
    }

    #[test]
    fn spacing_and_validation_are_reported() {
        // A renewal every 900 ms on R2 (about one write per second to a
        // key) and on GCS; none on S3.
        let mut fast = cfg(Protocol::Cas, 3);
        fast.renew_every = Duration::from_millis(900);
        let r2 = Plan::new(&fast, Provider::R2, 1, 0);
        // The preset's spacing fails validation, and the spacing is named.
        assert!(matches!(
            r2.violations[0],
            BrokenLimit::Config(ConfigError::WriteInterval { .. })
        ));
        assert_eq!(
            r2.violations[1],
            BrokenLimit::Spacing {
                provider: Provider::R2,
                spacing: Duration::from_secs(1),
                every: Duration::from_millis(900)
            }
        );
        assert!(r2.to_string().contains("VIOLATION: r2 allows one write"));
        let gcs = Plan::new(&fast, Provider::Gcs, 1, 0);
        // GCS's preset spacing also fails validation.
        assert!(matches!(
            gcs.violations[0],
            BrokenLimit::Config(ConfigError::WriteInterval { .. })
        ));
        assert!(matches!(gcs.violations[1], BrokenLimit::Spacing { .. }));
        assert!(Plan::new(&fast, Provider::Aws, 1, 0).violations.is_empty());
        // Epochs write each object once, so no object is written too
        // often; the settings still refuse a renewal interval under the
        // preset's spacing (every protocol's writes are spaced by it).
        let mut epochs = fast.clone();
        epochs.protocol = Protocol::Epochs;
        assert!(matches!(
            Plan::new(&epochs, Provider::R2, 1, 0).violations[..],
            [BrokenLimit::Config(ConfigError::WriteInterval { .. })]
        ));
        // A ttl that leaves no room for a renewal.
        let short = Plan::new(&cfg(Protocol::Cas, 2), Provider::Aws, 1, 0);
        assert!(matches!(
            short.violations[..],
            [BrokenLimit::Config(ConfigError::TtlTooShort { .. })]
        ));
    }

    #[test]
    fn absurd_settings_are_reported_not_a_panic() {
        let mut c = cfg(Protocol::Mutex, 1);
        c.ttl = Duration::MAX;
        c.renew_every = Duration::MAX;
        c.poll_every = Duration::MAX;
        let plan = Plan::new(&c, Provider::R2, u64::MAX, u64::MAX);
        assert!(matches!(
            plan.violations[0],
            BrokenLimit::Config(ConfigError::TooLong { .. })
        ));
        let _ = (plan.to_string(), plan.to_json());
    }

    #[test]
    fn text_and_json_show_the_figures() {
        let plan = Plan::new(&cfg(Protocol::Cas, 30), Provider::Aws, 1, 0);
        let text = plan.to_string();
        for needle in [
            "an elector polling every 10 s: 42.2 s",
            "a waiting acquire (--wait): 32.45 s",
            "leader, per lease: 259,200 PUT, 0 LIST, 0 GET, 0 DELETE",
            "cost at list prices: $1.30 a month",
            "as of 2026-11",
            "259,200 noncurrent versions per lease a month (about 8,640 a day)",
            "limits: none violated",
        ] {
            assert!(text.contains(needle), "{needle} not in\n{text}");
        }
        let json = plan.to_json();
        assert_eq!(json["failover"]["elector_ms"], 42_200);
        assert_eq!(json["requests_per_month"]["total"]["put"], 259_200);
        assert_eq!(json["prices"]["as_of"], PRICES_AS_OF);
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(dollars(0.004), "$0.004");
        assert_eq!(dollars(1234.5), "$1,234.50");
    }
}
