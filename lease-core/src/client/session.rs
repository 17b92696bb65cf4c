//! Sessions: one renewed lease per process, and any number of keys owned
//! under it for no renewal of their own (see the layer's docs,
//! `client/mod.rs`, and `docs/protocols.md`, "Sessions").

use crate::client::leadership::{Lead, Leadership};
use crate::client::Leases;
use crate::config::check_holder;
use crate::protocol::elector::ElectorExit;
use crate::protocol::fence::{FenceOp, FenceOutcome};
use crate::protocol::outcome::ReleaseOutcome;
use crate::protocol::outcome::{AcquireOutcome, Busy, Lease, LeaseError, LostReason};
use crate::record::OwnedBy;
use crate::store::Store;
use crate::time::Clock;
use crate::LeadError;
use core::fmt;
use core::future::Future;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A process's session: a lease at its own key, renewed by the campaign
/// [`Leases::session`] returns, and the keys owned under it
/// ([`own`](Self::own)). An owned key is held exactly while the session's
/// term that took it is: it costs no renewal, and it is lost with that
/// term (the session's lease lost, expired or closed). Clones share it.
pub struct Session<S, C> {
    leases: Leases<S, C>,
    leadership: Leadership<C>,
    key: String,
    owned: Arc<Mutex<BTreeMap<String, Entry>>>,
}

/// A key owned now, as [`Session::own`] took it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    /// The owned key.
    pub key: String,
    /// The key's fencing token: it rises with every new owner of the key
    /// (under a session or as a lease of its own) and never goes down.
    pub token: u64,
    /// The token of the session's term the key is owned in.
    pub session_token: u64,
}

/// What [`Session::own`] did.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum OwnOutcome {
    /// The key is ours, under the session's current term.
    Owned(Owned),
    /// Another holder has the key: a lease of its own, or a key owned
    /// under a session that is still live (`expires_at`: that session's).
    Busy(Busy),
    /// The session holds no term: not open yet, lapsed, or closed; or its
    /// term ended before the key's write was confirmed (the record then
    /// names a term that is over, so it holds the key for nobody).
    NoSession,
}

/// A key owned by this process: its lease (for the release) and the
/// number of the session's term it was taken in.
#[derive(Clone, Debug)]
struct Entry {
    lease: Lease,
    term: u64,
    session_token: u64,
    /// A `disown` began: never answered for again, whatever its outcome.
    giving_back: bool,
}

impl<S, C: Clone> Clone for Session<S, C> {
    fn clone(&self) -> Self {
        Session {
            leases: self.leases.clone(),
            leadership: self.leadership.clone(),
            key: self.key.clone(),
            owned: self.owned.clone(),
        }
    }
}

impl<S, C> fmt::Debug for Session<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let owned: Vec<String> = self.lock().keys().cloned().collect();
        f.debug_struct("Session")
            .field("key", &self.key)
            .field("leadership", &self.leadership)
            .field("owned", &owned)
            .finish_non_exhaustive()
    }
}

impl<S, C> Session<S, C> {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.owned.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session lease's key.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl<S, C> Session<S, C>
where
    S: Store + 'static,
    C: Clock + Clone + 'static,
{
    /// The current term's token, while the session is open (its lease
    /// confirmed and its local deadline not passed).
    pub fn token(&self) -> Option<u64> {
        self.leadership.token()
    }

    /// Whether the session is open now.
    pub fn is_open(&self) -> bool {
        self.leadership.is_leader()
    }

    /// Waits until the session is open, and gives its term's token. An
    /// error once the campaign has ended (closed or failed).
    pub async fn until_open(&self) -> Result<u64, LeadError> {
        self.leadership.until_leader().await
    }

    /// Completes when the term current at this call is over (at once when
    /// the session is not open): every key owned in that term is lost
    /// then. Call it before any await after [`own`](Self::own), as
    /// [`Leadership::lost`].
    pub fn lost(&self) -> impl Future<Output = ()> + '_ {
        self.leadership.lost()
    }

    /// Takes `key` under the session's current term if it is free: one GET
    /// and a PUT (`If-None-Match: *` or `If-Match`) when it is, and a GET
    /// of the holder's session record when the key is owned under another
    /// session. The key's token goes on from its record's (it is never
    /// deleted), so it rises with every new owner.
    ///
    /// Already owned in this term: answered from memory, no request.
    /// Run one `own` of a key at a time per session. An error may leave
    /// the key's write unsettled (its reply lost): call `own` again, which
    /// takes a record of this term's back at once, before giving it back.
    ///
    /// A session never reads its keys again once it owns them: an
    /// operator's break of one key is not seen by its holder, whose
    /// `owns` goes on saying yes for the term (fencing tokens refuse its
    /// writes). Break the session, which the holder sees at its next
    /// renewal.
    pub async fn own(&self, key: &str) -> Result<OwnOutcome, LeaseError> {
        let Some((term, session_token, _)) = self.leadership.current_term() else {
            return Ok(OwnOutcome::NoSession);
        };
        if let Some(owned) = self.owns_entry(key) {
            return Ok(OwnOutcome::Owned(owned));
        }
        self.leases.check_store(key).await?;
        let mut cfg = self.leases.config(key);
        cfg.owned_by = Some(OwnedBy {
            key: self.key.clone(),
            token: session_token,
        });
        match self.leases.acquire_as(self.leases.store(), cfg).await? {
            AcquireOutcome::Busy(busy) => Ok(OwnOutcome::Busy(busy)),
            AcquireOutcome::Acquired(lease) => {
                // Held only if the term that the record names is still
                // the session's: a term is valid for one span of time,
                // so valid now means valid at the confirmation.
                let now = self.leadership.current_term();
                if now.map(|(n, _, _)| n) != Some(term) {
                    return Ok(OwnOutcome::NoSession);
                }
                let owned = Owned {
                    key: key.to_string(),
                    token: lease.token,
                    session_token,
                };
                let entry = Entry {
                    lease,
                    term,
                    session_token,
                    giving_back: false,
                };
                self.lock().insert(key.to_string(), entry);
                Ok(OwnOutcome::Owned(owned))
            }
        }
    }

    /// The key's entry if it is owned now: taken in the session's current
    /// term, which has not passed its local deadline.
    fn owns_entry(&self, key: &str) -> Option<Owned> {
        let term = self.leadership.current_term().map(|(n, _, _)| n);
        let owned = self.lock();
        let entry = owned.get(key).filter(|e| !e.giving_back)?;
        let current = mutant!(OwnedOutlivesSession) || Some(entry.term) == term;
        current.then(|| Owned {
            key: key.to_string(),
            token: entry.lease.token,
            session_token: entry.session_token,
        })
    }

    /// The key's fencing token, if the session owns it now.
    pub fn owns(&self, key: &str) -> Option<u64> {
        self.owns_entry(key).map(|o| o.token)
    }

    /// Every key the session owns now.
    pub fn owned(&self) -> Vec<Owned> {
        let keys: Vec<String> = self.lock().keys().cloned().collect();
        keys.iter().filter_map(|k| self.owns_entry(k)).collect()
    }

    /// Gives `key` back: a released record, its token kept, so that a
    /// contender takes it without reading the session. A key of a term
    /// that is over is given back too (it is free once that term is over
    /// on the store; the release may make it so sooner), judged as a
    /// release at its deadline (so are a closed session's keys). A key
    /// this session does not know (never owned, or given back already)
    /// answers `AlreadyLost` with no request.
    pub async fn disown(&self, key: &str) -> Result<ReleaseOutcome, LeaseError> {
        self.give_back(key, None).await
    }

    /// Hands `key` to the holder named `to` (its [`Settings`](crate::Settings)
    /// holder, e.g. another process's host name): gives it back as
    /// [`disown`](Self::disown) does, with a release that names `to`. For
    /// [`HANDOFF_GRACE`](crate::protocol::HANDOFF_GRACE) after the release
    /// the key is busy to every other contender (their `Busy` names `to`
    /// in `handoff_to`, and expires when the grace does), so that `to`'s
    /// next [`own`](Self::own) (or acquire) takes it at once, with no ttl
    /// between the two owners; after the grace the key is free to anyone.
    /// Finish the work on the key first: the successor may start as soon
    /// as the release lands. Telling `to` to take the key is the caller's
    /// (a shard assignment, a message); a successor that does not come
    /// within the grace leaves the key free. A name no holder can have
    /// (empty, over 512 bytes) is refused before any request
    /// ([`ConfigError::Holder`](crate::config::ConfigError::Holder)), the key still owned: a release naming it
    /// could not be read by anyone.
    pub async fn hand_over(&self, key: &str, to: &str) -> Result<ReleaseOutcome, LeaseError> {
        check_holder(to).map_err(|error| LeaseError::Config {
            error,
            unsettled: Box::default(),
        })?;
        self.give_back(key, Some(to)).await
    }

    /// [`disown`](Self::disown), naming a successor or not.
    async fn give_back(&self, key: &str, to: Option<&str>) -> Result<ReleaseOutcome, LeaseError> {
        // From here on the key is not answered for, whatever the release
        // says (it may have landed when it errs); an entry kept for a
        // `disown` again if it fails.
        let Some(entry) = self.lock().get_mut(key).map(|e| {
            e.giving_back = true;
            e.clone()
        }) else {
            return Ok(ReleaseOutcome::AlreadyLost(LostReason::Expired));
        };
        // The key is valid as long as its session's term: its release is
        // judged against that term's deadline, not the key's own stamp
        // (and as late once the term is over).
        let now = self.leases.clock().now().mono;
        let valid_until = match self.leadership.current_term() {
            Some((term, _, until)) if term == entry.term => until,
            _ => entry.lease.valid_until.min(now),
        };
        let mut lease = Lease {
            valid_until,
            ..entry.lease
        };
        if let Some(to) = to {
            let meta = &mut lease.record.meta;
            meta.insert(crate::protocol::HANDOFF_TO.into(), to.into());
        }
        let released = self.leases.release(lease).await;
        if released.is_ok() {
            self.lock().remove(key);
        }
        released
    }

    /// Writes `payload` to the protected object `target` with `key`'s
    /// fencing token, while the session owns `key`
    /// ([`protocol::fence`](crate::protocol#fenced-writes)): refused when
    /// an owner with a greater token has written, and never sent after the
    /// session term's local deadline. `Ok(None)`, with no request, when the
    /// session does not own `key` now.
    pub async fn fenced_write(
        &self,
        key: &str,
        target: &str,
        payload: Vec<u8>,
    ) -> Result<Option<FenceOutcome>, LeaseError> {
        let Some((term, _, valid_until)) = self.leadership.current_term() else {
            return Ok(None);
        };
        let token = match self.lock().get(key) {
            Some(entry) if entry.term == term && !entry.giving_back => entry.lease.token,
            _ => return Ok(None),
        };
        let cfg = self.leases.config(key);
        let op =
            FenceOp::new(cfg, self.leases.entropy(), target, token, payload).until(valid_until);
        self.leases.call(op).await.map(Some)
    }

    /// Ends the session: from this call on it owns nothing and is not open
    /// ([`Leadership::resign`]); the campaign then releases the session's
    /// lease, which frees every key owned under it at once.
    pub fn close(&self) {
        self.leadership.resign();
    }

    /// Waits for the campaign to end, and says how.
    pub async fn finished(&self) -> ElectorExit {
        self.leadership.finished().await
    }

    /// The session's lease as a [`Leadership`] (its health, for a probe).
    pub fn leadership(&self) -> &Leadership<C> {
        &self.leadership
    }
}

impl<S, C> Leases<S, C>
where
    S: Store + 'static,
    C: Clock + Clone + 'static,
{
    /// Opens a session at `key` (one key per process, e.g.
    /// `sessions/<host>`): returns the handle and the campaign that
    /// acquires and renews the session's lease, a future to spawn (as
    /// [`lead`](Self::lead)). A session lapsed (a pause, the store
    /// unreachable for a ttl) is acquired again, as a new term that owns
    /// nothing. Needs the cas protocol.
    pub fn session(
        &self,
        key: &str,
    ) -> (Session<S, C>, impl Future<Output = ElectorExit> + 'static) {
        let (leadership, campaign) = self.campaign(Lead::new(key));
        let session = Session {
            leases: self.clone(),
            leadership,
            key: key.to_string(),
            owned: Arc::default(),
        };
        (session, campaign)
    }
}
