//! Lease settings and their validation.

use crate::record::{caller_bytes, check_len, CALLER_BYTES, MAX_META_ENTRIES, RESERVED_META};
use crate::time::{Dur, MAX_DURATION};
use core::fmt;
use std::collections::BTreeMap;
use std::time::Duration;

/// The lease duration when none is set: every adapter, the CLI and
/// [`crate::client::Settings`] share it.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

/// Everything a lease machine needs to know besides time and replies.
///
/// Build with [`LeaseConfig::new`], adjust fields, then [`validate`](Self::validate)
/// (the machines validate again when they start).
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseConfig {
    /// Object key of the lease.
    pub key: String,
    /// Human-readable name of this holder (a host, function or worker name).
    pub holder: String,
    /// How long a write keeps the lease, counted on the store's clock.
    pub ttl: Duration,
    /// How often the holder renews (default ttl / 3).
    pub renew_every: Duration,
    /// How often a contender re-reads a busy lease (default ttl / 3).
    pub poll_every: Duration,
    /// How long the machine waits for a reply before treating the call as
    /// failed with an unknown outcome (default min(5 s, ttl / 6)).
    pub request_timeout: Duration,
    /// Assumed worst-case rate difference between clocks, as a fraction
    /// (default 0.01 = 1 %).
    pub drift_rate: f64,
    /// Fixed safety margin: front-end clock disagreement and scheduling
    /// slop (default 100 ms).
    pub margin: Duration,
    /// Resolution of the store's dates (default 1 s, as in HTTP `Date`).
    pub date_resolution: Duration,
    /// Bound on a node's wall-clock error, used only when replies carry no
    /// store date (default 1 s).
    pub max_skew: Duration,
    /// Most retries (re-reads, backoffs) within one operation (default 6).
    pub max_attempts: u32,
    /// First backoff delay (default 100 ms); doubles per retry, jittered.
    pub backoff_base: Duration,
    /// Longest backoff delay (default 2 s).
    pub backoff_max: Duration,
    /// Longest time one operation may take, retries, backoffs and a
    /// store's `Retry-After` included (default: the ttl). A `Retry-After`
    /// beyond it ends the operation at once with
    /// [`LeaseError::GaveUp`](crate::protocol::outcome::LeaseError::GaveUp).
    pub op_timeout: Duration,
    /// Small caller data written into the record: at most
    /// [`MAX_META_ENTRIES`] less one
    /// entries (a record may carry one of the library's as well), none
    /// named as those ([`RESERVED_META`]).
    pub meta: BTreeMap<String, String>,
    /// The broken variant this machine runs, in a verification build only
    /// (feature `unsafe-variants`, see [`crate::variants`]); a product
    /// build has no such field.
    #[cfg(feature = "unsafe-variants")]
    pub variant: crate::variants::Variant,
    /// Which protocol guards the lease (default the CAS lease).
    pub protocol: Protocol,
    /// Shortest time between two writes (PUT or DELETE) this process sends
    /// to the same object (default zero: no limit). GCS allows about one
    /// write per second per object; its [preset](crate::wire::provider::Provider)
    /// sets one second. A write due sooner waits, counted from the send of
    /// the previous write to that key on the local monotonic clock.
    pub min_write_interval: Duration,
    /// Fair waiting (default off): a record this holder released less
    /// than [`COURTESY`](crate::protocol::wait::COURTESY) ago, by the store's
    /// clock, is busy to it, so that contenders already waiting take the
    /// lease before its releaser takes it back, and a waiting contender
    /// re-reads at least every [`FAIR_POLL`](crate::protocol::wait::FAIR_POLL).
    /// It only ever makes an acquire wait (safety is unchanged); it needs a
    /// record after the release, so it applies to `cas` and `epochs`, and
    /// to [`LeaseOp::acquire`](crate::protocol::lease::LeaseOp::acquire), not
    /// to an acquire from a read the caller made.
    pub fair: bool,
    /// Acquire the key as owned under a session (`None`, the default: a
    /// lease of its own). Set by [`Session::own`](crate::client::Session::own):
    /// the record written names the session's key and term, and the key is
    /// held while that term is, with no renewal of its own
    /// (`docs/protocols.md`, "Sessions"). The cas protocol only. An
    /// acquisition may win after the term it names ended (its write
    /// confirmed late): the key is the caller's only if that term is still
    /// valid when the outcome arrives, which `Session::own` checks; check it
    /// too when driving a `LeaseOp` with this set.
    pub owned_by: Option<crate::record::OwnedBy>,
}

/// The lease protocols (`docs/design.md` §7). Each needs different store features; the
/// capability probe ([`protocol::probe`](crate::protocol#the-capability-probe)) checks the ones a protocol relies on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Protocol {
    /// One object updated with `If-Match` (section 4 of the design): needs
    /// create-if-absent and `If-Match` on PUT. Renew and release cost one
    /// PUT each; the token survives release.
    #[default]
    Cas,
    /// One object per leadership epoch, `<key>/<epoch:020>.json`, created
    /// with `If-None-Match: *`; the newest is found by listing. Needs
    /// create-if-absent and LIST only, for stores without `If-Match`. Each
    /// renewal creates the next epoch (so the token grows with every renewal)
    /// and deletes the one before the previous (the epoch right below the
    /// newest stays).
    Epochs,
    /// A lock object created with `If-None-Match: *` and deleted with
    /// `DELETE If-Match` to give it back. It cannot be renewed: a holder has
    /// one ttl. A stale lock is broken only after its ttl passed, by a
    /// conditional delete. The token is not kept between holders (see
    /// [`protocol::mutex`](crate::protocol#the-create-delete-mutex)), so it is no fencing token.
    Mutex,
}

impl Protocol {
    /// Every protocol, in documentation order.
    pub const ALL: [Protocol; 3] = [Protocol::Cas, Protocol::Epochs, Protocol::Mutex];

    /// The name used in flags, JSON and the demo.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Cas => "cas",
            Protocol::Epochs => "epochs",
            Protocol::Mutex => "mutex",
        }
    }

    /// Parses a [`name`](Self::name).
    pub fn parse(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether a holder can extend its lease.
    pub fn renews(self) -> bool {
        !matches!(self, Protocol::Mutex)
    }

    /// Whether each acquisition's token is strictly greater than every
    /// earlier one's (a fencing token).
    pub fn fences(self) -> bool {
        !matches!(self, Protocol::Mutex)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl LeaseConfig {
    /// Defaults for `ttl`, with every derived setting computed from it.
    pub fn new(key: impl Into<String>, holder: impl Into<String>, ttl: Duration) -> Self {
        LeaseConfig {
            key: key.into(),
            holder: holder.into(),
            ttl,
            renew_every: ttl / 3,
            poll_every: ttl / 3,
            request_timeout: (ttl / 6).min(Duration::from_secs(5)),
            drift_rate: 0.01,
            margin: Duration::from_millis(100),
            date_resolution: Duration::from_secs(1),
            max_skew: Duration::from_secs(1),
            max_attempts: 6,
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            op_timeout: ttl,
            meta: BTreeMap::new(),
            #[cfg(feature = "unsafe-variants")]
            variant: crate::variants::Variant::Safe,
            protocol: Protocol::Cas,
            min_write_interval: Duration::ZERO,
            fair: false,
            owned_by: None,
        }
    }

    /// The safety margin subtracted from a write's validity when the store
    /// date it was stamped from is `elapsed` old: drift over the whole span
    /// plus the fixed margin.
    pub fn drift_margin(&self, elapsed: Duration) -> Duration {
        let span = (self.ttl + elapsed).as_secs_f64();
        Duration::from_secs_f64(span * self.drift_rate) + self.margin
    }

    /// Checks that the settings are usable together. The error names the
    /// number to change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_names()?;
        self.check_durations()?;
        self.check_together()
    }

    /// The key, the holder, `meta` and the drift rate, each on its own.
    fn check_names(&self) -> Result<(), ConfigError> {
        if self.key.is_empty() {
            return Err(ConfigError::EmptyKey);
        }
        check_holder(&self.holder)?;
        // One entry kept for the library's own (`RESERVED_META`: a break's,
        // a handoff's), so that every record written stays readable.
        if self.meta.len() >= MAX_META_ENTRIES
            || self.meta.iter().any(|(k, v)| {
                RESERVED_META.contains(&k.as_str())
                    || check_len("meta", k).is_err()
                    || check_len("meta", v).is_err()
            })
        {
            return Err(ConfigError::Meta);
        }
        let owned_by = self.owned_by.as_ref().map(|o| o.key.as_str());
        // A session's key is named in the records of the keys it owns.
        if owned_by.is_some_and(|key| key.is_empty() || check_len("owned_by", key).is_err()) {
            return Err(ConfigError::SessionKey);
        }
        let bytes = caller_bytes(&self.holder, &self.meta, owned_by);
        if bytes > CALLER_BYTES {
            return Err(ConfigError::TooLarge { bytes });
        }
        if !(0.0..0.5).contains(&self.drift_rate) {
            return Err(ConfigError::DriftRate(self.drift_rate));
        }
        Ok(())
    }

    /// Every duration within bounds, and none zero that divides time.
    fn check_durations(&self) -> Result<(), ConfigError> {
        // First, so that the sums of `check_together` cannot overflow.
        for (name, value) in [
            ("ttl", self.ttl),
            ("renew_every", self.renew_every),
            ("poll_every", self.poll_every),
            ("request_timeout", self.request_timeout),
            ("margin", self.margin),
            ("date_resolution", self.date_resolution),
            ("max_skew", self.max_skew),
            ("backoff_base", self.backoff_base),
            ("backoff_max", self.backoff_max),
            ("op_timeout", self.op_timeout),
            ("min_write_interval", self.min_write_interval),
        ] {
            if value > MAX_DURATION {
                return Err(ConfigError::TooLong { name, value });
            }
        }
        for (name, d) in [
            ("renew_every", self.renew_every),
            ("poll_every", self.poll_every),
            ("request_timeout", self.request_timeout),
            ("backoff_base", self.backoff_base),
        ] {
            if d.is_zero() {
                return Err(ConfigError::Zero(name));
            }
        }
        if self.min_write_interval >= self.renew_every {
            return Err(ConfigError::WriteInterval {
                min_write_interval: self.min_write_interval,
                renew_every: self.renew_every,
            });
        }
        Ok(())
    }

    /// The settings against each other: a session's key, the retries, the
    /// operation's time and the ttl a renewal needs.
    fn check_together(&self) -> Result<(), ConfigError> {
        if let Some(owned) = &self.owned_by {
            if self.protocol != Protocol::Cas {
                return Err(ConfigError::SessionsNeedCas(self.protocol));
            }
            if owned.key == self.key {
                return Err(ConfigError::OwnsItsSession);
            }
        }
        if self.max_attempts == 0 {
            return Err(ConfigError::Zero("max_attempts"));
        }
        if self.backoff_max < self.backoff_base {
            return Err(ConfigError::BackoffMax);
        }
        if self.op_timeout < self.request_timeout {
            return Err(ConfigError::OpTimeout {
                op_timeout: self.op_timeout,
                request_timeout: self.request_timeout,
            });
        }
        let needed = self.request_timeout
            + self.renew_every
            + self.date_resolution
            + self.drift_margin(Duration::ZERO);
        if self.ttl <= needed {
            return Err(ConfigError::TtlTooShort {
                ttl: self.ttl,
                request_timeout: self.request_timeout,
                renew_every: self.renew_every,
                date_resolution: self.date_resolution,
                drift_margin: self.drift_margin(Duration::ZERO),
            });
        }
        Ok(())
    }
}

/// Settings that cannot work, naming the number to change.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `key` is empty.
    EmptyKey,
    /// `holder` is empty or longer than 512 bytes.
    Holder,
    /// `meta` has more than 15 entries, a string longer than 512 bytes,
    /// or a name the library writes itself
    /// ([`RESERVED_META`]).
    Meta,
    /// `holder`, `meta` and the owning session's key would take more of a
    /// lease record than [`CALLER_BYTES`]:
    /// with what the library adds, a record could pass the size every
    /// client refuses to read.
    TooLarge {
        /// The bytes they take, as JSON.
        bytes: usize,
    },
    /// `drift_rate` is outside `[0, 0.5)`.
    DriftRate(f64),
    /// The named duration or count is zero.
    Zero(&'static str),
    /// The named duration is longer than [`MAX_DURATION`].
    TooLong {
        /// The field (`ttl`, `op_timeout`...).
        name: &'static str,
        /// Its value.
        value: Duration,
    },
    /// `backoff_max` is below `backoff_base`.
    BackoffMax,
    /// A child's grace period (TERM to KILL) leaves no room for a renewal
    /// before the TERM (see [`crate::client::hold::check_grace`]).
    Grace {
        /// The grace period asked for.
        grace: Duration,
        /// The longest grace period this ttl allows.
        max: Duration,
    },
    /// `op_timeout` is shorter than one request's timeout.
    OpTimeout {
        /// The operation timeout.
        op_timeout: Duration,
        /// The request timeout.
        request_timeout: Duration,
    },
    /// A renewal was asked of a protocol that has none.
    NotRenewable(Protocol),
    /// Keys owned under a session ([`LeaseConfig::owned_by`]) need the
    /// cas protocol: the session and its keys are records updated with
    /// `If-Match`.
    SessionsNeedCas(Protocol),
    /// A session cannot own its own lease's key.
    OwnsItsSession,
    /// A session's key is empty or longer than 512 bytes: the records of
    /// the keys it owns name it, and no client could read them.
    SessionKey,
    /// `min_write_interval` is not shorter than `renew_every`: every
    /// renewal would have to wait.
    WriteInterval {
        /// The write interval.
        min_write_interval: Duration,
        /// The renew interval.
        renew_every: Duration,
    },
    /// The ttl does not leave room for one renewal.
    TtlTooShort {
        /// The ttl.
        ttl: Duration,
        /// The request timeout.
        request_timeout: Duration,
        /// The renew interval.
        renew_every: Duration,
        /// The store date resolution.
        date_resolution: Duration,
        /// The drift margin at that ttl.
        drift_margin: Duration,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::EmptyKey => f.write_str("lease key is empty: set `key`"),
            ConfigError::Holder => f.write_str("`holder` must be 1 to 512 bytes"),
            ConfigError::TooLarge { bytes } => write!(
                f,
                "`holder`, `meta` and a session's key take {bytes} bytes of a lease record, more than {CALLER_BYTES}"
            ),
            ConfigError::Meta => f.write_str(
                "`meta` allows at most 15 entries of at most 512 bytes, none named `broken_by` or `handoff_to`",
            ),
            ConfigError::DriftRate(r) => {
                write!(f, "`drift_rate` {} must be at least 0 and below 0.5", crate::number::decimal(*r, 6))
            }
            ConfigError::Zero(name) => write!(f, "`{name}` must be greater than zero"),
            ConfigError::TooLong { name, value } => write!(
                f,
                "`{name}` {} is longer than the 100 years allowed (a mistake, or a unit missing: 60s, 5m, 1500ms)",
                Dur(*value)
            ),
            ConfigError::BackoffMax => f.write_str("`backoff_max` must be at least `backoff_base`"),
            ConfigError::Grace { grace, max } => write!(
                f,
                "grace {grace:?} is too long for this ttl: the command must be stopped (TERM, then KILL after \
                 the grace) before the lease's deadline, and the TERM must come after a renewal had its chance; \
                 use a grace of at most {max:?} or raise `ttl`",
                grace = Dur(*grace),
                max = Dur(*max)
            ),
            ConfigError::OpTimeout { op_timeout, request_timeout } => write!(
                f,
                "`op_timeout` {:?} must be at least `request_timeout` {:?}",
                Dur(*op_timeout),
                Dur(*request_timeout)
            ),
            ConfigError::NotRenewable(p) => write!(
                f,
                "protocol `{p}` cannot renew a lease (a holder has one ttl); use protocol `cas` or `epochs` to renew"
            ),
            ConfigError::SessionsNeedCas(p) => write!(
                f,
                "sessions and the keys they own need protocol `cas`, not `{p}`"
            ),
            ConfigError::OwnsItsSession => {
                f.write_str("a session cannot own its own key: name another key")
            }
            ConfigError::SessionKey => f.write_str(
                "a session's key must be 1 to 512 bytes",
            ),
            ConfigError::WriteInterval { min_write_interval, renew_every } => write!(
                f,
                "`min_write_interval` {min_write_interval:?} must be shorter than `renew_every` {renew_every:?}; \
                 raise `ttl` (renew_every is ttl / 3 by default)",
                min_write_interval = Dur(*min_write_interval),
                renew_every = Dur(*renew_every)
            ),
            ConfigError::TtlTooShort { ttl, request_timeout, renew_every, date_resolution, drift_margin } => write!(
                f,
                "ttl {ttl:?} leaves no room for a renewal: request_timeout {request_timeout:?} + renew_every \
                 {renew_every:?} + date resolution {date_resolution:?} + drift margin {drift_margin:?} must be \
                 less than ttl; raise `ttl` or lower `renew_every` / `request_timeout`",
                ttl = Dur(*ttl),
                request_timeout = Dur(*request_timeout),
                renew_every = Dur(*renew_every),
                date_resolution = Dur(*date_resolution),
                drift_margin = Dur(*drift_margin)
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A holder's name as a record may carry it: 1 to
/// [`MAX_STRING_BYTES`](crate::record::MAX_STRING_BYTES) bytes (a
/// configuration's `holder`, and the successor a handoff names).
pub(crate) fn check_holder(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || check_len("holder", name).is_err() {
        return Err(ConfigError::Holder);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_reads_as_display_prints_it() {
        assert_eq!(
            ConfigError::DriftRate(0.7).to_string(),
            "`drift_rate` 0.7 must be at least 0 and below 0.5"
        );
    }

    #[test]
    fn durations_beyond_100_years_are_refused() {
        // Found by the `settings_env` fuzz target: LEASE_TTL=12618374452099416064s
        // was accepted, and the first acquire panicked adding durations.
        let c = LeaseConfig::new("k", "h", Duration::from_secs(12_618_374_452_099_416_064));
        assert_eq!(
            c.validate(),
            Err(ConfigError::TooLong {
                name: "ttl",
                value: Duration::from_secs(12_618_374_452_099_416_064)
            })
        );
        assert!(c.validate().unwrap_err().to_string().contains("100 years"));
        assert_eq!(LeaseConfig::new("k", "h", MAX_DURATION).validate(), Ok(()));
        // Any duration, not only the ttl, and before the sums that would overflow.
        let mut c = LeaseConfig::new("k", "h", Duration::from_secs(30));
        c.renew_every = Duration::MAX;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::TooLong {
                name: "renew_every",
                ..
            })
        ));
    }

    #[test]
    fn defaults_validate_for_common_ttls() {
        for secs in [3, 10, 30, 60, 300] {
            let c = LeaseConfig::new("k", "h", Duration::from_secs(secs));
            assert_eq!(c.validate(), Ok(()), "ttl {secs}s");
        }
    }

    #[test]
    fn smallest_default_ttl_with_http_dates() {
        // docs/protocols.md quotes this bound.
        assert_eq!(
            LeaseConfig::new("k", "h", Duration::from_millis(2300)).validate(),
            Ok(())
        );
        assert!(LeaseConfig::new("k", "h", Duration::from_millis(2200))
            .validate()
            .is_err());
    }

    #[test]
    fn short_ttl_names_the_numbers() {
        let c = LeaseConfig::new("k", "h", Duration::from_secs(2));
        let err = c.validate().unwrap_err();
        assert!(matches!(err, ConfigError::TtlTooShort { .. }));
        let msg = err.to_string();
        assert!(
            msg.contains("raise `ttl`") && msg.contains("renew_every"),
            "{msg}"
        );
    }

    #[test]
    fn bad_settings_are_refused() {
        let base = LeaseConfig::new("k", "h", Duration::from_secs(30));
        assert_eq!(
            LeaseConfig {
                key: String::new(),
                ..base.clone()
            }
            .validate(),
            Err(ConfigError::EmptyKey)
        );
        assert_eq!(
            LeaseConfig {
                holder: String::new(),
                ..base.clone()
            }
            .validate(),
            Err(ConfigError::Holder)
        );
        assert_eq!(
            LeaseConfig {
                drift_rate: 0.7,
                ..base.clone()
            }
            .validate(),
            Err(ConfigError::DriftRate(0.7))
        );
        assert_eq!(
            LeaseConfig {
                renew_every: Duration::ZERO,
                ..base.clone()
            }
            .validate(),
            Err(ConfigError::Zero("renew_every"))
        );
        assert_eq!(
            LeaseConfig {
                max_attempts: 0,
                ..base.clone()
            }
            .validate(),
            Err(ConfigError::Zero("max_attempts"))
        );
        assert_eq!(
            LeaseConfig {
                backoff_max: Duration::from_millis(1),
                ..base
            }
            .validate(),
            Err(ConfigError::BackoffMax)
        );
    }

    #[test]
    fn drift_margin_grows_with_the_span() {
        let c = LeaseConfig::new("k", "h", Duration::from_secs(10));
        assert_eq!(c.drift_margin(Duration::ZERO), Duration::from_millis(200));
        assert_eq!(
            c.drift_margin(Duration::from_secs(10)),
            Duration::from_millis(300)
        );
    }
}
