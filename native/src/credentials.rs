//! Credentials that expire, kept fresh: the platform's credentials (the
//! AWS default chain, Google's application default credentials, Microsoft
//! Entra ID; feature `cloud-credentials`) or any [`Source`] of your own,
//! and the store that signs with them ([`SignedStore`]).
//!
//! - **Refreshed ahead of expiry, off the lease's path.** Credentials are
//!   fetched before the first call. A grant is refreshed once it is past
//!   the refresh point (5 minutes before it expires, or half its lifetime
//!   when that is shorter); while it is still valid the refresh runs on a
//!   task of its own and calls go on signing with the grant they have, so
//!   a renewal never waits on a metadata server. Only a call with no valid
//!   grant left waits for the fetch.
//! - **Never mixed in a signature.** Each call takes one grant and signs
//!   the whole request with it; a refresh replaces the grant between
//!   calls, never during one.
//! - **A failure is a store fault.** When no valid grant can be had, the
//!   call is answered as a transport failure of kind
//!   [`TransportErrorKind::Credentials`] without sending anything: the
//!   lease machines retry within their budget as for any outage, and a
//!   held lease ends at its local deadline if renewals cannot be signed,
//!   never sooner and never later.
//! - **No secret is shown.** `Debug` of a [`Grant`] or [`Secret`] shows
//!   the AWS access key id at most (an identifier); errors carry a source's
//!   reason, never its material. Sources must keep to that in their
//!   reasons.

use lease_core::settings::Credentials;
use lease_core::store::TransportErrorKind;
use lease_core::wire::BearerSigner;
use lease_core::wire::SigV4Signer;
use lease_core::wire::{Dialect, Signer};
use lease_core::{Clock, HttpStore, HttpTransport, Store, StoreOp, StoreReply, UnixMillis};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A future a [`Source`] returns.
pub type Fetch<'a> = Pin<Box<dyn Future<Output = Result<Grant, CredentialsError>> + Send + 'a>>;

/// Secret material from a [`Source`].
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Secret {
    /// SigV4 keys (temporary ones carry a session token).
    SigV4(Credentials),
    /// An OAuth 2.0 access token (GCS, Azure).
    Bearer(String),
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The core's `Credentials` shows the key id only.
            Secret::SigV4(c) => f.debug_tuple("SigV4").field(c).finish(),
            Secret::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

/// Credentials and the time they stop working (`None`: they do not
/// expire, as long-lived keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The material.
    pub secret: Secret,
    /// When the store stops accepting it (the wall clock).
    pub expires_at: Option<UnixMillis>,
}

/// No usable credentials. Never holds secret material.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialsError {
    /// Where they were looked up (`the AWS default credential chain`).
    pub source: &'static str,
    /// Why the look-up failed.
    pub reason: String,
}

impl fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no usable credentials from {}: {}",
            self.source, self.reason
        )
    }
}

impl std::error::Error for CredentialsError {}

/// Where credentials come from. Implement it for a source of your own.
pub trait Source: Send + Sync + 'static {
    /// How errors name it.
    fn name(&self) -> &'static str;
    /// A fresh grant (the source may cache; [`Keeper`] asks only when its
    /// grant is due for refresh).
    fn fetch(&self) -> Fetch<'_>;
}

/// Refreshed this long before expiry at most ...
const REFRESH_BEFORE: Duration = Duration::from_secs(300);
/// ... and a grant is not used in its last seconds (clock error, the
/// time a request takes to arrive).
const SPARE: Duration = Duration::from_secs(10);
/// A source that handed back the grant held is asked again this long
/// before it expires (inside `gcp_auth`'s 20 s, before [`SPARE`]).
const ASK_AGAIN: Duration = Duration::from_secs(19);
/// A fetch that has not answered by then has failed.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

struct Held {
    grant: Grant,
    /// From this wall time it is refreshed.
    refresh_at: UnixMillis,
}

#[derive(Default)]
struct State {
    held: Option<Held>,
    refreshing: bool,
}

/// A [`Source`]'s grant, kept and refreshed ahead of its expiry (see the
/// module docs). Cheap to clone: clones share the grant.
#[derive(Clone)]
pub struct Keeper {
    source: Arc<dyn Source>,
    state: Arc<Mutex<State>>,
    /// One waiting fetch at a time.
    fetching: Arc<tokio::sync::Mutex<()>>,
}

impl fmt::Debug for Keeper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Keeper")
            .field("source", &self.source.name())
            .field(
                "expires_at",
                &state.held.as_ref().map(|h| h.grant.expires_at),
            )
            .finish_non_exhaustive()
    }
}

impl Keeper {
    /// Keeps `source`'s grants.
    pub fn new(source: impl Source) -> Keeper {
        Keeper {
            source: Arc::new(source),
            state: Arc::default(),
            fetching: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The source's name.
    pub fn source(&self) -> &'static str {
        self.source.name()
    }

    /// A grant valid at `now`: the one held, with a refresh started on a
    /// task when it is due (within a tokio runtime); else a fetch, awaited.
    pub async fn grant(&self, now: UnixMillis) -> Result<Grant, CredentialsError> {
        if let Some(grant) = self.held(now) {
            return Ok(grant);
        }
        let _one = self.fetching.lock().await;
        // Another call may have fetched meanwhile.
        if let Some(grant) = self.held(now) {
            return Ok(grant);
        }
        let grant = self.fetch().await?;
        if !usable(&grant, now) {
            return Err(CredentialsError {
                source: self.source.name(),
                reason: "the credentials it returned have expired".to_string(),
            });
        }
        self.keep(grant.clone(), now);
        Ok(grant)
    }

    /// The source's fetch, given up after [`FETCH_TIMEOUT`] (the crates'
    /// own clients set no timeout of their own on some paths).
    async fn fetch(&self) -> Result<Grant, CredentialsError> {
        match tokio::time::timeout(FETCH_TIMEOUT, self.source.fetch()).await {
            Ok(fetched) => fetched,
            Err(_) => Err(CredentialsError {
                source: self.source.name(),
                reason: format!("no answer within {} s", FETCH_TIMEOUT.as_secs()),
            }),
        }
    }

    /// The grant held when still usable at `now`, starting a background
    /// refresh when it is due.
    fn held(&self, now: UnixMillis) -> Option<Grant> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let held = state.held.as_ref()?;
        if !usable(&held.grant, now) {
            return None;
        }
        let grant = held.grant.clone();
        if now >= held.refresh_at && !state.refreshing {
            // Outside a runtime the call path fetches when the grant ends.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                state.refreshing = true;
                let keeper = self.clone();
                runtime.spawn(async move { keeper.refresh(now).await });
            }
        }
        Some(grant)
    }

    /// A background refresh: on failure the grant held stays in use until
    /// it expires, and the next call past the refresh point tries again.
    /// One fetch at a time with the calls' own (`fetching`).
    async fn refresh(self, now: UnixMillis) {
        // However the task ends (done, panicked, dropped with its
        // runtime), a later call may start another.
        struct Done(Arc<Mutex<State>>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .refreshing = false;
            }
        }
        let _done = Done(self.state.clone());
        let _one = self.fetching.lock().await;
        if let Ok(grant) = self.fetch().await {
            if usable(&grant, now) {
                self.keep(grant, now);
            }
        }
    }

    /// Keeps `grant` unless the one held lasts longer (a slower fetch
    /// finishing last). A source that hands back the grant it holds (its
    /// own cache: `gcp_auth` renews 20 s before expiry) is asked again
    /// just before that, while calls still sign with it.
    fn keep(&self, grant: Grant, now: UnixMillis) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let ends = |g: &Grant| g.expires_at.unwrap_or(UnixMillis(u64::MAX));
        match &mut state.held {
            Some(held) if ends(&held.grant) > ends(&grant) => {}
            Some(held) if ends(&held.grant) == ends(&grant) => {
                let again = UnixMillis(ends(&grant).0.saturating_sub(ASK_AGAIN.as_millis() as u64));
                held.refresh_at = held.refresh_at.max(again).max(now + Duration::from_secs(1));
            }
            _ => {
                state.held = Some(Held {
                    refresh_at: refresh_at(&grant, now),
                    grant,
                })
            }
        }
    }
}

/// Still valid at `now`, with [`SPARE`] to go.
fn usable(grant: &Grant, now: UnixMillis) -> bool {
    grant.expires_at.is_none_or(|at| now + SPARE < at)
}

/// [`REFRESH_BEFORE`] its expiry, or half its remaining life when that is
/// shorter (short-lived tokens are then not fetched on every call).
fn refresh_at(grant: &Grant, now: UnixMillis) -> UnixMillis {
    match grant.expires_at {
        None => UnixMillis(u64::MAX),
        Some(at) => {
            let life = Duration::from_millis(at.0.saturating_sub(now.0));
            UnixMillis(at.0.saturating_sub(REFRESH_BEFORE.min(life / 2).as_millis() as u64))
        }
    }
}

/// How a [`Secret`] signs for a provider.
#[derive(Clone, Debug)]
pub enum Signing {
    /// SigV4 for `region` (and `service`: `s3`, or GCS's for HMAC keys).
    SigV4 {
        /// The signing region.
        region: String,
        /// The signing service.
        service: &'static str,
    },
    /// `Authorization: Bearer` (GCS).
    Bearer,
    /// `Authorization: Bearer` with `x-ms-date` (Azure).
    AzureBearer,
}

impl Signing {
    fn signer(&self, secret: &Secret) -> Result<Box<dyn Signer + Send + Sync>, String> {
        Ok(match (self, secret) {
            (Signing::SigV4 { region, service }, Secret::SigV4(c)) => Box::new(
                SigV4Signer::new(
                    c.access_key_id.clone(),
                    c.secret_access_key.clone(),
                    c.session_token.clone(),
                    region.clone(),
                )
                .with_service(*service),
            ),
            (Signing::Bearer, Secret::Bearer(token)) => Box::new(BearerSigner::new(token.clone())),
            (Signing::AzureBearer, Secret::Bearer(token)) => {
                Box::new(BearerSigner::new(token.clone()).with_ms_date())
            }
            (signing, _) => {
                return Err(format!(
                    "the source's credentials do not sign for {signing:?}"
                ))
            }
        })
    }
}

/// An [`HttpStore`] signing each call with the [`Keeper`]'s grant of the
/// moment (see the module docs).
pub struct SignedStore<D, T, C> {
    inner: HttpStore<D, T, C>,
    keeper: Keeper,
    signing: Signing,
    clock: C,
}

impl<D, T, C> fmt::Debug for SignedStore<D, T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignedStore")
            .field("keeper", &self.keeper)
            .field("signing", &self.signing)
            .finish_non_exhaustive()
    }
}

impl<D: Dialect, T: HttpTransport, C: Clock + Clone> SignedStore<D, T, C> {
    /// `inner` (unsigned) signed with `keeper`'s grants as `signing` says;
    /// `clock` gives the wall time grants are judged by.
    pub fn new(inner: HttpStore<D, T, C>, keeper: Keeper, signing: Signing, clock: C) -> Self {
        SignedStore {
            inner,
            keeper,
            signing,
            clock,
        }
    }

    /// The keeper.
    pub fn keeper(&self) -> &Keeper {
        &self.keeper
    }

    /// The unsigned store inside.
    pub fn inner(&self) -> &HttpStore<D, T, C> {
        &self.inner
    }
}

impl<D: Dialect, T: HttpTransport, C: Clock + Clone> Store for SignedStore<D, T, C> {
    fn min_write_interval(&self) -> Duration {
        self.inner.min_write_interval()
    }

    async fn call(&self, op: StoreOp) -> StoreReply {
        let signer = match self.keeper.grant(self.clock.now().wall).await {
            Ok(grant) => self.signing.signer(&grant.secret),
            Err(e) => Err(e.to_string()),
        };
        match signer {
            Ok(signer) => self.inner.call_signed_by(op, signer.as_ref()).await,
            Err(reason) => StoreReply::transport(TransportErrorKind::Credentials, reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Grants numbered from 1, each `life` long from `now()`.
    struct Counting {
        fetched: Arc<AtomicU64>,
        life: Duration,
        now: Arc<AtomicU64>,
        fail: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Source for Counting {
        fn name(&self) -> &'static str {
            "a test source"
        }
        fn fetch(&self) -> Fetch<'_> {
            Box::pin(async move {
                if self.fail.load(Ordering::SeqCst) {
                    return Err(CredentialsError {
                        source: "a test source",
                        reason: "the metadata server said 500".into(),
                    });
                }
                let n = self.fetched.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(Grant {
                    secret: Secret::SigV4(Credentials {
                        access_key_id: format!("AKID{n}"),
                        secret_access_key: format!("SECRET{n}"),
                        session_token: Some(format!("TOKEN{n}")),
                    }),
                    expires_at: Some(UnixMillis(self.now.load(Ordering::SeqCst)) + self.life),
                })
            })
        }
    }

    fn key_id(grant: &Grant) -> String {
        match &grant.secret {
            Secret::SigV4(c) => c.access_key_id.clone(),
            Secret::Bearer(t) => t.clone(),
        }
    }

    #[tokio::test]
    async fn refreshes_ahead_of_expiry_without_making_calls_wait() {
        let now = Arc::new(AtomicU64::new(1_000_000));
        let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let fetched = Arc::new(AtomicU64::new(0));
        let keeper = Keeper::new(Counting {
            fetched: fetched.clone(),
            life: Duration::from_secs(3600),
            now: now.clone(),
            fail: fail.clone(),
        });
        let at = |s: u64| UnixMillis(1_000_000 + s * 1000);
        assert_eq!(key_id(&keeper.grant(at(0)).await.unwrap()), "AKID1");
        // Until 5 minutes before expiry: the same grant, no fetch.
        assert_eq!(key_id(&keeper.grant(at(3200)).await.unwrap()), "AKID1");
        assert_eq!(fetched.load(Ordering::SeqCst), 1);
        // Past the refresh point: this call signs with the grant it has,
        // and the refresh runs beside it.
        now.store(at(3310).0, Ordering::SeqCst);
        assert_eq!(key_id(&keeper.grant(at(3310)).await.unwrap()), "AKID1");
        tokio::task::yield_now().await;
        for _ in 0..100 {
            if fetched.load(Ordering::SeqCst) == 2 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(key_id(&keeper.grant(at(3311)).await.unwrap()), "AKID2");
        // A refresh that fails leaves the held grant in use until it
        // expires; then the call fails with a typed error, no secret in it.
        fail.store(true, Ordering::SeqCst);
        let late = at(3310 + 3600 - 200);
        assert_eq!(key_id(&keeper.grant(late).await.unwrap()), "AKID2");
        let err = keeper.grant(at(3310 + 3600)).await.unwrap_err();
        assert_eq!(err.source, "a test source");
        assert!(
            err.to_string().contains("metadata server said 500"),
            "{err}"
        );
        // And recovers when the source does.
        fail.store(false, Ordering::SeqCst);
        now.store(at(8000).0, Ordering::SeqCst);
        assert_eq!(key_id(&keeper.grant(at(8000)).await.unwrap()), "AKID3");
    }

    /// A transport that must never be reached.
    struct Unreachable;

    impl HttpTransport for Unreachable {
        async fn send(
            &self,
            _: http::Request<Vec<u8>>,
        ) -> Result<http::Response<Vec<u8>>, lease_core::TransportError> {
            panic!("a request was sent without credentials")
        }
    }

    /// No credentials to be had: the acquire sends nothing, retries as for
    /// any outage, and ends with an error that says why; it is neither
    /// busy nor acquired.
    #[tokio::test]
    async fn an_acquire_without_credentials_is_a_store_fault_and_sends_nothing() {
        use lease_core::wire::{S3Config, S3Dialect};
        use lease_core::LeaseError;
        use lease_core::LeaseOp;
        let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let keeper = Keeper::new(Counting {
            fetched: Arc::default(),
            life: Duration::from_secs(3600),
            now: Arc::new(AtomicU64::new(0)),
            fail,
        });
        let clock = crate::clock::SystemClock::new();
        let dialect = S3Dialect::new(S3Config::aws("eu-west-1", "locks")).unwrap();
        let store = SignedStore::new(
            HttpStore::new(dialect, Unreachable, clock),
            keeper,
            Signing::SigV4 {
                region: "eu-west-1".into(),
                service: "s3",
            },
            clock,
        );
        let mut cfg = lease_core::LeaseConfig::new("k", "h", Duration::from_secs(30));
        (cfg.max_attempts, cfg.backoff_base) = (3, Duration::from_millis(5));
        cfg.backoff_max = Duration::from_millis(20);
        let mut op = LeaseOp::acquire(cfg, lease_core::Entropy::from_seed(7));
        let outcome = lease_core::client::drive(&mut op, &store, &clock, |_| {}).await;
        match outcome {
            Err(LeaseError::GaveUp { attempts, last, .. }) => {
                assert!(attempts > 1, "retried: {attempts}");
                assert!(
                    last.contains("no usable credentials from a test source"),
                    "{last}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    /// Always the same grant (a source with a cache of its own).
    struct Cached(Arc<AtomicU64>);

    impl Source for Cached {
        fn name(&self) -> &'static str {
            "a caching source"
        }
        fn fetch(&self) -> Fetch<'_> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {
                Ok(Grant {
                    secret: Secret::Bearer("t".into()),
                    expires_at: Some(UnixMillis(1_000_000)),
                })
            })
        }
    }

    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    /// A source that hands back the grant held is asked again 19 s before
    /// it expires (when `gcp_auth` renews), not at every call meanwhile.
    #[tokio::test]
    async fn a_source_with_its_own_cache_is_asked_again_just_before_expiry() {
        let fetched = Arc::new(AtomicU64::new(0));
        let keeper = Keeper::new(Cached(fetched.clone()));
        let at = |s: u64| UnixMillis(s * 1000);
        keeper.grant(at(0)).await.unwrap();
        keeper.grant(at(700)).await.unwrap(); // past 5 min before expiry
        settle().await;
        assert_eq!(fetched.load(Ordering::SeqCst), 2);
        keeper.grant(at(900)).await.unwrap();
        keeper.grant(at(980)).await.unwrap();
        settle().await;
        assert_eq!(
            fetched.load(Ordering::SeqCst),
            2,
            "not asked again before 981 s"
        );
        keeper.grant(at(982)).await.unwrap();
        settle().await;
        assert_eq!(fetched.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn short_lived_grants_refresh_at_half_their_life() {
        let now = UnixMillis(1_000_000);
        let grant = |secs| Grant {
            secret: Secret::Bearer("t".into()),
            expires_at: Some(now + Duration::from_secs(secs)),
        };
        assert_eq!(refresh_at(&grant(60), now), now + Duration::from_secs(30));
        assert_eq!(
            refresh_at(&grant(3600), now),
            now + Duration::from_secs(3300)
        );
        assert!(!usable(&grant(5), now));
    }

    #[test]
    fn nothing_secret_in_debug() {
        let grant = Grant {
            secret: Secret::SigV4(Credentials {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: "wJalrSECRET".into(),
                session_token: Some("FwoGSESSION".into()),
            }),
            expires_at: None,
        };
        let shown = format!("{grant:?} {:?}", Secret::Bearer("ya29.TOKEN".into()));
        assert!(shown.contains("AKIDEXAMPLE"), "{shown}");
        for secret in ["wJalrSECRET", "FwoGSESSION", "ya29.TOKEN"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}
