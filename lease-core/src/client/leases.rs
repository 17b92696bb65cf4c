//! The client, [`Leases`] (the layer's docs, `client/mod.rs`, say what it does).

use crate::client::drive::drive;
use crate::client::hold::{hold_with, Held};
use crate::client::revalidate::Revalidating;
use crate::config::{ConfigError, LeaseConfig, Protocol, DEFAULT_TTL};
use crate::entropy::Entropy;
use crate::protocol::bucket::{BucketProbe, BucketReport, Race, RaceKind};
use crate::protocol::elector::{HoldLimit, Holder};
use crate::protocol::fence::{FenceOp, FenceOutcome};
use crate::protocol::lease::LeaseOp;
use crate::protocol::list::{ListReport, Listing};
use crate::protocol::machine::Machine;
use crate::protocol::outcome::BreakRequest;
use crate::protocol::outcome::{hand_on, summarize};
use crate::protocol::outcome::{
    AcquireOutcome, BreakOutcome, Claim, Event, Lease, LeaseError, LostReason, NotHeld,
    Observation, ReleaseOutcome, RenewOutcome,
};
use crate::protocol::probe::{Check, Probe, ProbeReport};
use crate::protocol::verdict::{self, OneCall, ReadOnlyReport, Refusal, SharedProbe, Verdict};
use crate::record::parse_epoch_key;
use crate::settings::{self, SettingsError};
use crate::store::Store;
use crate::store::{Etag, PutCondition, ReplyKind, StoreOp};
use crate::tick::TickRun;
use crate::time::Clock;
use crate::time::{Mono, UnixMillis};
#[cfg(feature = "trace")]
use crate::trace::Recorder;
use crate::trace::{Start, Tap, Taps, Traced};
use core::fmt;
use core::future::Future;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// What every lease of one client shares. The key is not here: it is an
/// argument of each call.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Settings {
    /// Who holds the leases this client takes: unique per process (a host
    /// name and pid, a task id, a Lambda log stream).
    pub holder: String,
    /// Lease duration (default [`DEFAULT_TTL`], 60 s).
    pub ttl: Duration,
    /// The protocol (default [`Protocol::Cas`]).
    pub protocol: Protocol,
    /// Whether to run the capability probe once before the first acquire
    /// (default `true`).
    pub probe: bool,
    /// Fair waiting (default off, see [`LeaseConfig::fair`]).
    pub fair: bool,
}

impl Settings {
    /// The defaults, for `holder`.
    pub fn new(holder: impl Into<String>) -> Settings {
        Settings {
            holder: holder.into(),
            ttl: DEFAULT_TTL,
            protocol: Protocol::Cas,
            probe: true,
            fair: false,
        }
    }

    /// With fair waiting on or off ([`LeaseConfig::fair`]): contenders
    /// that wait take a released lease before its releaser takes it back.
    pub fn fair(mut self, fair: bool) -> Settings {
        self.fair = fair;
        self
    }

    /// With lease duration `ttl`.
    pub fn ttl(mut self, ttl: Duration) -> Settings {
        self.ttl = ttl;
        self
    }

    /// With protocol `protocol`.
    pub fn protocol(mut self, protocol: Protocol) -> Settings {
        self.protocol = protocol;
        self
    }

    /// With the capability probe on or off.
    pub fn probe(mut self, probe: bool) -> Settings {
        self.probe = probe;
        self
    }

    /// The settings `get` names (`get` reads a variable, usually of the
    /// environment): `LEASE_TTL`, `LEASE_PROTOCOL`, `LEASE_PROBE` and
    /// `LEASE_HOLDER`, else `holder()`, the adapter's default, unique per
    /// process (the table is in [`crate::settings`]). No `LEASE_KEY`: a
    /// client names the key in each call. A bad value is an error naming
    /// its variable.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
        holder: impl FnOnce() -> String,
    ) -> Result<Settings, SettingsError> {
        let holder = settings::first(&get, &["LEASE_HOLDER"]).unwrap_or_else(holder);
        let out = Settings::new(holder)
            .ttl(settings::ttl(&get)?)
            .protocol(settings::protocol(&get)?)
            .probe(settings::probe(&get)?);
        out.config("check")
            .validate()
            .map_err(|e| SettingsError::Invalid {
                variable: "LEASE_TTL",
                reason: e.to_string(),
            })?;
        Ok(out)
    }

    /// The configuration of the lease at `key` these settings make, with
    /// the defaults for every timing they do not name (derived from the
    /// ttl) and no store's limits yet: a client built on a store applies
    /// them ([`Leases::config`] is the configuration it uses). Not
    /// validated.
    pub fn config(&self, key: impl Into<String>) -> LeaseConfig {
        let mut cfg = LeaseConfig::new(key, self.holder.clone(), self.ttl);
        cfg.protocol = self.protocol;
        cfg.fair = self.fair;
        cfg
    }
}

/// A lease client over one store (see [the client layer](crate::client)).
pub struct Leases<S, C> {
    inner: Arc<Inner<S, C>>,
}

struct Inner<S, C> {
    store: S,
    clock: C,
    /// The configuration of every lease, but for its key.
    template: LeaseConfig,
    probe: bool,
    entropy: fn() -> Entropy,
    /// The protocols the probe found the store safe for.
    probed: Mutex<Vec<Protocol>>,
    /// Per key: records of ours that may be live unseen.
    claims: Mutex<BTreeMap<String, Vec<Claim>>>,
    /// The flight recorder, if one is set.
    taps: Taps,
}

impl<S, C> Clone for Leases<S, C> {
    fn clone(&self) -> Self {
        Leases {
            inner: self.inner.clone(),
        }
    }
}

impl<S, C> fmt::Debug for Leases<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leases")
            .field("holder", &self.inner.template.holder)
            .field("ttl", &self.inner.template.ttl)
            .field("protocol", &self.inner.template.protocol)
            .field("probe", &self.inner.probe)
            .finish_non_exhaustive()
    }
}

/// A lease named by its key and the etag its holder was given: what a
/// process that did not acquire it (a later `lease renew`, a script) knows.
#[derive(Clone, Debug, PartialEq)]
pub enum ByEtagError {
    /// The store operation failed.
    Lease(LeaseError),
    /// The lease is not that version any more (or is gone).
    NotHeld(NotHeld),
}

impl fmt::Display for ByEtagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ByEtagError::Lease(e) => e.fmt(f),
            ByEtagError::NotHeld(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ByEtagError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ByEtagError::Lease(e) => Some(e),
            ByEtagError::NotHeld(e) => Some(e),
        }
    }
}

impl From<LeaseError> for ByEtagError {
    fn from(e: LeaseError) -> Self {
        ByEtagError::Lease(e)
    }
}

impl<S: Store, C: Clock> Leases<S, C> {
    /// A client of `store` on `clock`. `entropy` gives each operation fresh
    /// randomness for its nonces and session ids: the operating system's
    /// in production (the adapters' `os_entropy`), a seed in tests. The
    /// store's own limits ([`Store::min_write_interval`]) are applied.
    pub fn new(
        store: S,
        clock: C,
        settings: Settings,
        entropy: fn() -> Entropy,
    ) -> Result<Leases<S, C>, ConfigError> {
        Leases::with_config(store, clock, settings.config(""), settings.probe, entropy)
    }

    /// A client whose leases share `template` but for their key: for the
    /// timings [`Settings`] does not name (renewal interval, timeouts,
    /// retry budget, margins). The store's own limits
    /// ([`Store::min_write_interval`]) are applied here, the one place
    /// they are; then the whole is checked with [`LeaseConfig::validate`].
    pub fn with_config(
        store: S,
        clock: C,
        mut template: LeaseConfig,
        probe: bool,
        entropy: fn() -> Entropy,
    ) -> Result<Leases<S, C>, ConfigError> {
        template.min_write_interval = template.min_write_interval.max(store.min_write_interval());
        template.key = "check".into();
        template.validate()?;
        template.key.clear();
        Ok(Leases {
            inner: Arc::new(Inner {
                store,
                clock,
                template,
                probe,
                entropy,
                probed: Mutex::new(Vec::new()),
                claims: Mutex::new(BTreeMap::new()),
                taps: Taps::default(),
            }),
        })
    }

    /// The configuration of the lease at `key`.
    pub fn config(&self, key: &str) -> LeaseConfig {
        let mut cfg = self.inner.template.clone();
        cfg.key = key.to_string();
        cfg
    }

    /// The key `lease` was taken under: an epochs lease names its epoch
    /// object (`<key>/<epoch>.json`), the others the key itself.
    fn key_of<'l>(&self, lease: &'l Lease) -> &'l str {
        if self.inner.template.protocol == Protocol::Epochs {
            if let Some((key, _)) = lease.key.rsplit_once('/') {
                if parse_epoch_key(key, &lease.key).is_some() {
                    return key;
                }
            }
        }
        &lease.key
    }

    /// The store, for the job's own calls.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The clock leases run on.
    pub fn clock(&self) -> &C {
        &self.inner.clock
    }

    /// Fresh randomness for an operation of the caller's own.
    pub fn entropy(&self) -> Entropy {
        (self.inner.entropy)()
    }

    /// Runs `machine` against this client's store and clock.
    pub(crate) async fn call<M: crate::protocol::machine::Machine>(
        &self,
        mut machine: M,
    ) -> M::Outcome {
        drive(&mut machine, &self.inner.store, &self.inner.clock, |_| {}).await
    }

    /// Records every operation that holds a lease from now on (acquire,
    /// renew, release, a plain [`run`](Self::run)'s acquisition and holding,
    /// [`supervise`](Self::supervise), [`lead`](Self::lead)) to
    /// `recorder`, the flight recorder of [`crate::trace`] (feature
    /// `trace`). Clones of this client share it.
    #[cfg(feature = "trace")]
    pub fn record_to(&self, recorder: Recorder) {
        self.inner.taps.set(recorder);
    }

    /// The recorder set with [`record_to`](Self::record_to).
    #[cfg(feature = "trace")]
    pub fn recorder(&self) -> Option<Recorder> {
        self.inner.taps.get()
    }

    /// Runs the machine `build` makes of `parts` against `store`, recorded
    /// as the [`Start`] `start` makes of them when a recorder is set (the
    /// parts are cloned only then). A plain function, so that no layer is
    /// added to the operation's future.
    fn run_recorded<'a, P: Clone, M: Machine + 'a>(
        &'a self,
        store: &'a impl Store,
        parts: P,
        build: impl FnOnce(P) -> M,
        start: impl FnOnce(P) -> Start,
    ) -> impl Future<Output = M::Outcome> + 'a
    where
        M::Outcome: Traced,
    {
        self.run_on(store, self.taps().tap(parts, build, start))
    }

    /// The taps every machine of this client runs through (its flight
    /// recorder, if one is set).
    pub(crate) fn taps(&self) -> &Taps {
        &self.inner.taps
    }

    /// Runs `machine` against `store` (this client's, or a layer over it)
    /// and this client's clock.
    async fn run_on<M: crate::protocol::machine::Machine>(
        &self,
        store: &impl Store,
        mut machine: M,
    ) -> M::Outcome {
        drive(&mut machine, store, &self.inner.clock, |_| {}).await
    }

    /// What the bucket does around the protocol, with scratch keys next to
    /// `key` ([`protocol::bucket`](crate::protocol#the-buckets-races)): whether it refuses an
    /// unconditional write to the prefix, whether `racers` concurrent
    /// creates of one key, then as many concurrent replaces, have exactly
    /// one winner in each of `rounds` rounds, whether it keeps versions.
    pub async fn check_bucket(
        &self,
        key: &str,
        racers: usize,
        rounds: u32,
    ) -> Result<BucketReport, LeaseError> {
        let machine = BucketProbe::new(self.config(key), self.entropy()).with_race(racers, rounds);
        self.call(machine).await
    }

    /// Every lease under `prefix`, whatever protocol or client wrote it
    /// (the fleet view, `lease ls`; see [`protocol::list`](crate::protocol#the-fleet-view)). Reads
    /// only.
    pub async fn list(&self, prefix: &str) -> Result<ListReport, LeaseError> {
        self.call(Listing::new(self.config(prefix), self.entropy(), prefix))
            .await
    }

    /// The capability probe's report for the store, with its scratch key
    /// next to `key` (it writes and deletes `key.probe/<random>`), on the
    /// probe's own budget ([`verdict::probe_config`]). Always probes; the
    /// verdict is not shared (see [`share_verdict`](Self::share_verdict)).
    pub async fn probe(&self, key: &str) -> Result<ProbeReport, LeaseError> {
        let cfg = verdict::probe_config(&self.config(key));
        self.call(Probe::new(cfg, self.entropy())).await
    }

    /// The checks a client without write permission can make at `key`
    /// ([`ReadOnlyReport`]), and the fleet's verdict if one is kept:
    /// GETs and a LIST only, nothing written.
    pub async fn probe_read_only(&self, key: &str) -> Result<ReadOnlyReport, LeaseError> {
        let cfg = self.config(key);
        let call = |op| self.call(OneCall::new(&cfg, self.entropy(), op));
        let mut checks = Vec::new();
        let mut versioned = false;
        let kept = call(StoreOp::Get {
            key: verdict::verdict_key(key),
        })
        .await?;
        let verdict = match kept.kind {
            ReplyKind::Found { body, .. } => Verdict::decode(&body),
            _ => None,
        };
        let local = self.inner.clock.now().wall;
        let read = call(StoreOp::Get { key: key.into() }).await?;
        versioned |= read.version_id.is_some();
        let found = match &read.kind {
            ReplyKind::Found { etag, .. } => Some(etag.clone()),
            _ => None,
        };
        checks.push((
            "read",
            Some(matches!(
                read.kind,
                ReplyKind::Found { .. } | ReplyKind::Missing
            )),
            summarize(&read.kind),
        ));
        checks.push(ReadOnlyReport::date_check(read.date, local, cfg.max_skew));
        checks.push(match &found {
            None => (
                "not_modified",
                None,
                "no lease at the key to read again".into(),
            ),
            Some(etag) => {
                let again = call(StoreOp::GetIfNoneMatch {
                    key: key.into(),
                    etag: etag.clone(),
                })
                .await?;
                versioned |= again.version_id.is_some();
                ReadOnlyReport::not_modified_check(&again.kind)
            }
        });
        let listed = call(StoreOp::List {
            prefix: key.into(),
            continuation: None,
            max_keys: None,
        })
        .await?;
        checks.push(ReadOnlyReport::list_check(
            &listed.kind,
            key,
            found.is_some(),
        ));
        checks.push(ReadOnlyReport::versioning_check(versioned));
        Ok(ReadOnlyReport {
            key: key.into(),
            checks,
            verdict,
        })
    }

    /// Keeps `report`'s verdict at `key`'s shared verdict
    /// ([`verdict::verdict_key`]) for every client of the key, dated by
    /// the store's clock at a read made now: what
    /// [`check_store`](Self::check_store) reads before it would probe.
    /// `raced`: how a concurrent qualification ended
    /// ([`check_bucket`](Self::check_bucket)), if one ran; a race with two
    /// winners refuses every protocol.
    pub async fn share_verdict(
        &self,
        key: &str,
        report: &ProbeReport,
        raced: Option<&Race>,
    ) -> Result<(), LeaseError> {
        let cfg = self.config(key);
        let now = self.inner.clock.now();
        let read = self.call(OneCall::read(&cfg, self.entropy())).await?;
        let at = read.date.map_or(now.wall, |d| d.unix_ms);
        let mut verdict = Verdict::from_report(report, at);
        if let Some(race) = raced.and_then(Race::first_failure) {
            // Two creates won: every protocol is unsafe. Two replaces won:
            // the protocols that replace by `If-Match`.
            let refusals: Vec<Refusal> = Protocol::ALL
                .into_iter()
                .filter(|p| {
                    race.kind == RaceKind::Create || Check::IfMatchStale.needed_by().contains(p)
                })
                .map(|protocol| Refusal {
                    protocol,
                    check: verdict::CONCURRENT_WRITES.into(),
                    detail: format!("not exactly one winner in {race}"),
                })
                .collect();
            verdict.refuse(&refusals);
        }
        self.call(OneCall::write(
            &cfg,
            self.entropy(),
            &verdict,
            PutCondition::None,
        ))
        .await
        .map(|_| ())
    }

    /// Refuses a store that cannot keep two holders apart with this
    /// client's protocol: once per client, and once per fleet, since the
    /// probe's verdict is kept in the bucket next to `key` for every client
    /// ([`protocol::verdict`](crate::protocol#the-shared-verdict): one GET when a trusted verdict is
    /// there; one prober at a time, on its own budget, when none is; a
    /// fleet that backs off after a probe that could not finish).
    pub async fn check_store(&self, key: &str) -> Result<(), LeaseError> {
        self.check_store_within(key, None).await
    }

    /// [`check_store`](Self::check_store), ending by `limit` if given.
    pub(crate) async fn check_store_within(
        &self,
        key: &str,
        limit: Option<Duration>,
    ) -> Result<(), LeaseError> {
        let protocol = self.inner.template.protocol;
        if !self.inner.probe || lock(&self.inner.probed).contains(&protocol) {
            return Ok(());
        }
        let mut check = SharedProbe::new(self.config(key), self.entropy());
        if let Some(limit) = limit {
            check = check.within(limit);
        }
        let shared = self.call(check).await?;
        shared.supports(protocol, key)?;
        lock(&self.inner.probed).push(protocol);
        Ok(())
    }

    /// Whether the store has passed the probe for this client's protocol
    /// (or the probe is off).
    pub fn store_checked(&self) -> bool {
        !self.inner.probe || lock(&self.inner.probed).contains(&self.inner.template.protocol)
    }

    /// Records of ours at `key` that operations of this client may have
    /// left live on the store unseen ([`Claim`]), those that can still be
    /// live now. A host that cannot keep the client between invocations
    /// (a Worker's isolate may, a new one per request does not) hands them
    /// to the next client with [`add_claims`](Self::add_claims).
    pub fn claims(&self, key: &str) -> Vec<Claim> {
        let now = self.inner.clock.now().mono;
        let mut claims = lock(&self.inner.claims);
        let live = claims.entry(key.to_string()).or_default();
        live.retain(|c| c.live_until > now);
        live.clone()
    }

    /// Adds records of ours at `key` that an earlier client may have left
    /// live ([`claims`](Self::claims)): the next acquire takes them over
    /// instead of waiting behind them as another holder's. A session
    /// claimed already keeps the later of the two ends: what may be live
    /// of it is not forgotten early.
    pub fn add_claims(&self, key: &str, claims: impl IntoIterator<Item = Claim>) {
        let mut all = lock(&self.inner.claims);
        let kept = all.entry(key.to_string()).or_default();
        for claim in claims {
            hand_on(kept, claim);
        }
    }

    /// Keeps `claims`, each at its own key (a pool's come from its seats).
    pub(crate) fn keep_claims(&self, claims: &[Claim]) {
        for claim in claims {
            self.add_claims(&claim.key, [claim.clone()]);
        }
    }

    /// Forgets the claims at `key` (what a mutant of a test build does).
    #[cfg(lease_mutants)]
    pub(crate) fn forget_claims(&self, key: &str) {
        lock(&self.inner.claims).remove(key);
    }

    /// Takes the lease at `key` if it is free: `Busy` (no write; cas and
    /// mutex: one GET, epochs: a LIST and a GET)
    /// when another holder's lease is live.
    pub async fn acquire(&self, key: &str) -> Result<AcquireOutcome, LeaseError> {
        self.acquire_on(&self.inner.store, key, None).await
    }

    /// `cfg` for an operation that starts now and must end by `by` (a
    /// run's time limit): its `op_timeout` no longer than the time left,
    /// and no shorter than one request's timeout (one attempt always
    /// fits). The operation gives up at its deadline as at any, handing on
    /// the writes whose outcome is unknown as claims; a recorded one keeps
    /// the setting in its trace.
    pub(crate) fn ending_by(&self, cfg: &LeaseConfig, by: Option<Mono>) -> LeaseConfig {
        let mut cfg = cfg.clone();
        if let Some(by) = by.filter(|_| !mutant!(RunOpsPastTimeLimit)) {
            let now = self.clock().now().mono;
            let left = if by > now { by - now } else { Duration::ZERO };
            cfg.op_timeout = cfg.op_timeout.min(left).max(cfg.request_timeout);
        }
        cfg
    }

    /// [`acquire`](Self::acquire), its calls made through `store`, ending
    /// by `by` if set ([`ending_by`](Self::ending_by)).
    pub(crate) async fn acquire_on(
        &self,
        store: &impl Store,
        key: &str,
        by: Option<Mono>,
    ) -> Result<AcquireOutcome, LeaseError> {
        self.check_store(key).await?;
        // Its time counted from here: after the store's check.
        let cfg = self.ending_by(&self.config(key), by);
        self.acquire_as(store, cfg).await
    }

    /// One acquisition of the lease `cfg` names (the store checked),
    /// taking over this client's claims at its key and keeping those it
    /// leaves.
    pub(crate) async fn acquire_as(
        &self,
        store: &impl Store,
        cfg: LeaseConfig,
    ) -> Result<AcquireOutcome, LeaseError> {
        let key = cfg.key.clone();
        let acquired = self.acquire_recorded(store, cfg, self.claims(&key)).await;
        let unsettled = match &acquired {
            Ok(AcquireOutcome::Busy(busy)) => &busy.unsettled[..],
            Ok(AcquireOutcome::Acquired(_)) => &[],
            Err(e) => e.unsettled(),
        };
        self.add_claims(&key, unsettled.iter().cloned());
        acquired
    }

    /// One acquisition of the lease `cfg` names, taking over `claims`,
    /// recorded when a recorder is set.
    pub(crate) async fn acquire_recorded(
        &self,
        store: &impl Store,
        cfg: LeaseConfig,
        claims: Vec<Claim>,
    ) -> Result<AcquireOutcome, LeaseError> {
        let parts = (cfg, self.entropy(), claims);
        let build = |(cfg, entropy, claims)| LeaseOp::acquire(cfg, entropy).with_claims(claims);
        let start = |(cfg, entropy, claims)| Start::Acquire {
            cfg,
            entropy,
            claims,
        };
        self.run_recorded(store, parts, build, start).await
    }

    /// Takes the lease at `key`, waiting up to `wait` while another
    /// holder's lease is live: `Acquired`, or `Busy` (the last read) once
    /// the wait is spent. Retries are spread by [`protocol::wait`](crate::protocol#trying-again)
    /// (jittered backoff from 250 ms up to `poll_every`, never past the
    /// holder's published expiry, never sooner than the store's write
    /// spacing); each is one [`acquire`](Self::acquire), so a busy retry
    /// costs one GET (cas, mutex) and an error ends the wait at once.
    /// Each re-read asks for the lease only if it changed
    /// ([`revalidate`](crate::client::Revalidating)): an unchanged lease is
    /// answered 304, without its body.
    pub async fn acquire_within(
        &self,
        key: &str,
        wait: Duration,
    ) -> Result<AcquireOutcome, LeaseError> {
        self.acquire_waiting(key, wait, None).await
    }

    /// [`acquire_within`](Self::acquire_within), each attempt ending by
    /// `by` if set ([`ending_by`](Self::ending_by): a run's time limit).
    pub(crate) async fn acquire_waiting(
        &self,
        key: &str,
        wait: Duration,
        by: Option<Mono>,
    ) -> Result<AcquireOutcome, LeaseError> {
        let cfg = self.config(key);
        let until = self.clock().now().mono + wait;
        let mut entropy = self.entropy();
        let mut attempt = 0;
        let store = Revalidating::new(&self.inner.store);
        // Writes of earlier attempts whose outcome stayed unknown: if the
        // wait ends in an error or busy, the caller is told of every one
        // (beside the last attempt's own), since any may be live.
        let mut earlier: Vec<Claim> = Vec::new();
        loop {
            let outcome = self.acquire_on(&store, key, by).await;
            // One that cannot be live any more is not worth a word.
            let now = self.clock().now().mono;
            earlier.retain(|c| c.live_until > now);
            let mut outcome = match outcome {
                Ok(outcome) => outcome,
                Err(mut e) => {
                    for claim in earlier {
                        e.hand_on(claim);
                    }
                    return Err(e);
                }
            };
            let AcquireOutcome::Busy(busy) = &mut outcome else {
                return Ok(outcome);
            };
            for claim in std::mem::take(&mut busy.unsettled).into_vec() {
                crate::protocol::outcome::hand_on(&mut earlier, claim);
            }
            busy.unsettled = earlier.clone().into_boxed_slice();
            if now >= until {
                return Ok(outcome);
            }
            let delay =
                crate::protocol::wait::next_try(&cfg, attempt, busy.expires_in, &mut entropy);
            self.clock().sleep_until((now + delay).min(until)).await;
            attempt = attempt.saturating_add(1);
        }
    }

    /// Extends `lease`. `Lost` when it is gone; when no renewal is
    /// confirmed before its local deadline it is lost at that deadline.
    pub async fn renew(&self, lease: &Lease) -> Result<RenewOutcome, LeaseError> {
        let key = self.key_of(lease);
        let parts = (self.config(key), self.entropy(), lease.clone());
        let build = |(cfg, entropy, lease)| LeaseOp::renew(cfg, entropy, lease);
        let start = |(cfg, entropy, lease)| Start::Renew {
            cfg,
            entropy,
            lease,
        };
        let renewed = self
            .run_recorded(&self.inner.store, parts, build, start)
            .await;
        match &renewed {
            // A renewal in flight at the deadline may still land.
            Ok(RenewOutcome::Lost(LostReason::Expired)) => {
                let claim = Claim::of_lease(&self.config(key), lease);
                self.add_claims(key, [claim]);
            }
            Err(e) => self.add_claims(key, e.unsettled().iter().cloned()),
            Ok(_) => {}
        }
        renewed
    }

    /// Gives `lease` back (the token is kept: the next holder gets a
    /// greater one).
    pub async fn release(&self, lease: Lease) -> Result<ReleaseOutcome, LeaseError> {
        let key = self.key_of(&lease).to_string();
        let parts = (self.config(&key), self.entropy(), lease);
        let build = |(cfg, entropy, lease)| LeaseOp::release(cfg, entropy, lease);
        let start = |(cfg, entropy, lease)| Start::Release {
            cfg,
            entropy,
            lease,
        };
        let released = self
            .run_recorded(&self.inner.store, parts, build, start)
            .await;
        if let Err(e) = &released {
            self.add_claims(&key, e.unsettled().iter().cloned());
        }
        released
    }

    /// The lease at `key` as stored now, when its etag is still `etag`: how
    /// a process that did not acquire it (given the etag) resumes it.
    pub async fn held(&self, key: &str, etag: &str) -> Result<Lease, ByEtagError> {
        let seen = self.inspect(key).await?;
        Lease::resume_version(&self.config(key), seen, &Etag::new(etag))
            .map_err(ByEtagError::NotHeld)
    }

    /// [`renew`](Self::renew) the lease at `key` known by its `etag`.
    pub async fn renew_by_etag(&self, key: &str, etag: &str) -> Result<RenewOutcome, ByEtagError> {
        let lease = self.held(key, etag).await?;
        Ok(self.renew(&lease).await?)
    }

    /// [`release`](Self::release) the lease at `key` known by its `etag`.
    pub async fn release_by_etag(
        &self,
        key: &str,
        etag: &str,
    ) -> Result<ReleaseOutcome, ByEtagError> {
        let lease = self.held(key, etag).await?;
        Ok(self.release(lease).await?)
    }

    /// Reads the lease at `key` (`None`: no lease object).
    pub async fn inspect(&self, key: &str) -> Result<Option<Observation>, LeaseError> {
        self.call(LeaseOp::inspect(self.config(key), self.entropy()))
            .await
    }

    /// An operator's release of the version they saw (`etag`, from
    /// [`inspect`](Self::inspect)): the record is released, its token
    /// kept. `token_floor` is only for a record that cannot be read: the
    /// token to continue above. [`LeaseError::Changed`] when the lease is
    /// no longer that version.
    pub async fn break_lease(
        &self,
        key: &str,
        etag: &str,
        token_floor: Option<u64>,
    ) -> Result<BreakOutcome, LeaseError> {
        let request = BreakRequest {
            etag: Etag::new(etag),
            token_floor,
        };
        self.call(LeaseOp::break_lease(
            self.config(key),
            self.entropy(),
            request,
        ))
        .await
    }

    /// Writes `payload` to the protected object `target` on behalf of
    /// `lease`'s holder ([`protocol::fence`](crate::protocol#fenced-writes)): refused when a holder with a
    /// greater token has written, and never sent after the lease's local
    /// deadline.
    pub async fn fenced_write(
        &self,
        lease: &Lease,
        target: &str,
        payload: Vec<u8>,
    ) -> Result<FenceOutcome, LeaseError> {
        let op = FenceOp::new(
            self.config(self.key_of(lease)),
            self.entropy(),
            target,
            lease.token,
            payload,
        )
        .until(lease.valid_until);
        self.call(op).await
    }

    /// Runs `work` while `lease` is held (see [`crate::client::hold`]),
    /// the release recording the tick `complete` makes of the output, if
    /// any, within `limit` if set (a run's time limit). With `record` and a
    /// recorder set, the holding is recorded (only for a release that
    /// records no tick: a replay rebuilds the holder from its start, which
    /// knows of none).
    pub(crate) async fn hold_on<T>(
        &self,
        cfg: &LeaseConfig,
        (lease, record, limit): (Lease, bool, Option<HoldLimit>),
        work: impl Future<Output = T>,
        on_event: impl FnMut(Event),
        complete: impl FnOnce(&T) -> Option<(TickRun, UnixMillis)>,
    ) -> Held<T> {
        let entropy = self.entropy();
        let term = (lease.token, lease.valid_until);
        let (store, clock) = (&self.inner.store, &self.inner.clock);
        let parts = (cfg.clone(), entropy, lease);
        let holder = |(cfg, entropy, lease)| Holder::new(cfg, entropy, lease).limited(limit);
        let holder = match record {
            true => self
                .inner
                .taps
                .tap(parts, holder, |(cfg, entropy, lease)| Start::Hold {
                    cfg,
                    entropy,
                    lease,
                    limit,
                }),
            false => Tap::Plain(holder(parts)),
        };
        let complete_tick =
            |h: &mut Tap<Holder>, run, oldest| h.inner_mut().complete_tick(run, oldest);
        let machine = (holder, complete_tick);
        hold_with(store, clock, machine, term, work, on_event, complete).await
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
