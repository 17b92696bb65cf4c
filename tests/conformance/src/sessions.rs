//! The session steps (cas only, see the crate docs): a session's keys as
//! the store holds them, busy to another client, fenced, freed by a break
//! of the session and by its close.
//!
//! The session's campaign runs beside the steps on one task
//! ([`beside`]): a campaign owns what it runs on, so the session's client
//! runs on the subject's store through [`Shared`], and on a clone of its
//! clock. No wait below sleeps on the clock: a bound is checked when the
//! task wakes anyway (the campaign's timers wake it), so a virtual clock
//! moves only as the campaign's own sleeps move it.
//!
//! The operator's break is made while a's campaign is not polled (a
//! process paused for a moment): on a virtual clock any wait of the
//! steps' (a store's write spacing: GCS answers 429 to a write within a
//! second of the session's last) lets the campaign's sleep jump to its
//! next renewal, whose write would land between the operator's read and
//! its break every time.

use crate::{describe, Fail, Run, Step};
use lease_core::client::{drive, join, Owned};
use lease_core::protocol::{FenceOp, HANDOFF_TO};
use lease_core::record::OwnedBy;
use lease_core::{
    AcquireOutcome, BreakOutcome, Clock, ElectorExit, Etag, FenceOutcome, Lease, LeaseConfig,
    LeaseError, LeaseRecord, Leases, Mono, OwnOutcome, Protocol, ReleaseOutcome, Session, Store,
    StoreOp, StoreReply,
};
use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

/// The subject's store, shared with a session's campaign.
pub(crate) struct Shared<S>(pub(crate) Rc<S>);

impl<S: Store> Store for Shared<S> {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        self.0.call(op)
    }

    fn min_write_interval(&self) -> Duration {
        self.0.min_write_interval()
    }
}

/// The keys of the session steps, beside the lifecycle's key.
struct Keys {
    /// a's session: `<key>.session`.
    session: String,
    /// The keys a owns: `<key>.owned-1`, `<key>.owned-2`.
    owned: [String; 2],
    /// The key a's next term hands over to b: `<key>.owned-3`.
    handed: String,
    /// The protected object written with the first owned key's tokens.
    target: String,
    /// a's campaign is not polled while set.
    paused: Cell<bool>,
}

/// `b`, not polled while `paused` is set (run beside another future
/// with `lease_core::client::join`, whose wakes poll it again).
async fn unless_paused<B: Future>(b: B, paused: &Cell<bool>) -> B::Output {
    let mut b = pin!(b);
    poll_fn(|cx| match paused.get() {
        true => Poll::Pending,
        false => b.as_mut().poll(cx),
    })
    .await
}

/// A plain client of the lifecycle (b, the operator).
type Plain<'s, S, C> = Leases<&'s S, &'s C>;

impl<'s, S: Store + 'static, C: Clock + Clone + 'static> Run<'s, S, C> {
    /// The session steps: a's session owns two keys; b is refused one;
    /// a fences with it; an operator breaks the session and b takes the
    /// key; a's next term takes the other key, and closes.
    pub(crate) async fn sessions(&mut self) -> Result<(), Fail> {
        let key = self.key.clone();
        let keys = Keys {
            session: format!("{key}.session"),
            owned: [format!("{key}.owned-1"), format!("{key}.owned-2")],
            handed: format!("{key}.owned-3"),
            target: format!("{key}.owned-1.fenced"),
            paused: Cell::new(false),
        };
        let a = self.session_client().await?;
        let b = self.client("b", self.options.ttl, Step::SessionBusy)?;
        // The store was probed at the lifecycle's key: its verdict, read.
        b.check_store(&key)
            .await
            .map_err(|e| (Step::SessionBusy, format!("b's check of the store: {e}")))?;
        let started = self.now();
        let (session, campaign) = a.session(&keys.session);
        let steps = async {
            let result = self.session_steps(&session, &b, &keys).await;
            session.close();
            result
        };
        let (result, _exit) = join(steps, unless_paused(campaign, &keys.paused)).await;
        let took = self.now().0 - started.0;
        if let Some((Step::SessionClose, detail)) = self.steps.last_mut() {
            detail.push_str(&format!(" (the session steps: {took} ms)"));
        }
        result
    }

    /// a's client: ttl the lifecycle's, renewals every third of the
    /// expiry step's ttl (no sooner than the store spaces writes), so that
    /// a learns of the break soon, and a short stall does not end a term.
    async fn session_client(&self) -> Result<Leases<Shared<S>, C>, Fail> {
        let mut template = LeaseConfig::new("", "a", self.options.ttl);
        template.protocol = Protocol::Cas;
        let spacing = self.subject.store.min_write_interval();
        template.renew_every = (self.options.expiry_ttl / 3).max(spacing * 5 / 4);
        let a = Leases::with_config(
            Shared(self.subject.store.clone()),
            self.subject.clock.clone(),
            template,
            self.options.probe,
            self.subject.entropy,
        )
        .map_err(|e| {
            (
                Step::SessionOwn,
                format!("the settings of a's session: {e}"),
            )
        })?;
        a.check_store(&self.key)
            .await
            .map_err(|e| (Step::SessionOwn, format!("a's check of the store: {e}")))?;
        Ok(a)
    }

    async fn session_steps(
        &mut self,
        session: &Session<Shared<S>, C>,
        b: &Plain<'s, S, C>,
        keys: &Keys,
    ) -> Result<(), Fail> {
        let (term, owned) = self.session_own(session, keys).await?;
        self.session_busy(b, &owned[0]).await?;
        self.session_fence(session, b, &owned[0], keys).await?;
        let lb = self.session_break(session, b, term, &owned, keys).await?;
        let lb3 = self.session_handoff(session, b, term, keys).await?;
        let lb2 = self.session_close(session, b, term, &owned[1]).await?;
        // Tidy: b gives the keys back.
        for lease in [lb, lb3, lb2] {
            match b.release(lease).await {
                Ok(ReleaseOutcome::Released { .. }) => {}
                other => return Err((Step::SessionClose, format!("b's release: {other:?}"))),
            }
        }
        Ok(())
    }

    /// The lease record at `key` and its etag, as the store holds it.
    async fn record_at(&self, key: &str, step: Step) -> Result<(Etag, LeaseRecord), Fail> {
        match self.object(key, step).await? {
            None => Err((step, format!("{key} does not exist"))),
            Some((etag, body)) => match LeaseRecord::decode(&body) {
                Ok(record) => Ok((etag, record)),
                Err(e) => Err((step, format!("{key} holds no lease record: {e}"))),
            },
        }
    }

    /// `future`'s output, or `None` once `limit` has passed on the clock,
    /// as seen when the task wakes (no timer of its own: see the module
    /// docs).
    async fn bounded<F: Future>(&self, limit: Duration, future: F) -> Option<F::Output> {
        let until = Mono(self.now().0 + limit.as_millis() as u64);
        let mut future = pin!(future);
        poll_fn(|cx| match future.as_mut().poll(cx) {
            Poll::Ready(out) => Poll::Ready(Some(out)),
            Poll::Pending if self.now() > until => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        })
        .await
    }

    /// Waits for the session's term: its token.
    async fn opened(&self, session: &Session<Shared<S>, C>, step: Step) -> Result<u64, Fail> {
        let limit = self.options.ttl * 2;
        match self.bounded(limit, session.until_open()).await {
            Some(Ok(token)) => Ok(token),
            Some(Err(e)) => Err((step, format!("a's session did not open: {e}"))),
            None => Err((step, format!("a's session not open after {limit:?}"))),
        }
    }

    /// Waits for the session's term after the `broken` one: its token.
    async fn next_term(
        &self,
        session: &Session<Shared<S>, C>,
        broken: u64,
        step: Step,
    ) -> Result<u64, Fail> {
        let term = self.opened(session, step).await?;
        ensure!(
            term > broken,
            step,
            "a's next term has token {term}, not above the broken {broken}"
        );
        Ok(term)
    }

    /// The session's record on the store is a's, live, at `term`.
    async fn session_held(&self, key: &str, term: u64, step: Step) -> Result<(), Fail> {
        let (etag, record) = self.record_at(key, step).await?;
        ensure!(
            record.holder == "a"
                && record.token == term
                && !record.released
                && record.owned_by.is_none(),
            step,
            "the session's record is {}, not a's live term {term}",
            describe(&etag, &record)
        );
        Ok(())
    }

    /// The record at `owned.key` names the session and `owned`'s term, with
    /// `owned`'s token.
    async fn owned_held(&self, owned: &Owned, session: &str, step: Step) -> Result<Etag, Fail> {
        let (etag, record) = self.record_at(&owned.key, step).await?;
        let by = OwnedBy {
            key: session.to_string(),
            token: owned.session_token,
        };
        ensure!(
            record.owned_by.as_ref() == Some(&by)
                && record.token == owned.token
                && record.holder == "a"
                && !record.released,
            step,
            "{} holds {} owned by {:?}; a owns it at token {} under {session} term {}",
            owned.key,
            describe(&etag, &record),
            record.owned_by,
            owned.token,
            owned.session_token
        );
        Ok(etag)
    }

    /// b acquires `key` with a plain acquire, at once.
    async fn b_takes(
        b: &Plain<'s, S, C>,
        key: &str,
        above: u64,
        step: Step,
    ) -> Result<Lease, Fail> {
        let lease = match b.acquire(key).await {
            Ok(AcquireOutcome::Acquired(lease)) => lease,
            other => return Err((step, format!("b's acquire of {key}: {other:?}"))),
        };
        ensure!(
            lease.token > above,
            step,
            "b took {key} at token {}, not above a's {above}",
            lease.token
        );
        Ok(lease)
    }

    /// The store holds b's lease at `lease.key`, a lease of its own.
    async fn b_holds(&self, lease: &Lease, step: Step) -> Result<(), Fail> {
        let (etag, record) = self.record_at(&lease.key, step).await?;
        ensure!(
            etag == lease.etag
                && record.holder == "b"
                && record.token == lease.token
                && record.owned_by.is_none()
                && !record.released,
            step,
            "{} holds {} (owned by {:?}), not b's lease at token {}",
            lease.key,
            describe(&etag, &record),
            record.owned_by,
            lease.token
        );
        Ok(())
    }

    /// a's session opens and owns both keys; the store shows each key's
    /// record naming the session and its term.
    async fn session_own(
        &mut self,
        session: &Session<Shared<S>, C>,
        keys: &Keys,
    ) -> Result<(u64, Vec<Owned>), Fail> {
        let step = Step::SessionOwn;
        let term = self.opened(session, step).await?;
        let mut owned = Vec::new();
        for key in &keys.owned {
            let got = match session.own(key).await {
                Ok(OwnOutcome::Owned(got)) => got,
                other => return Err((step, format!("a's own of {key}: {other:?}"))),
            };
            ensure!(
                got.key == *key && got.session_token == term && got.token > 0,
                step,
                "a's own of {key} gave {got:?} in term {term}"
            );
            ensure!(
                session.owns(key) == Some(got.token),
                step,
                "a owns {key} at token {}, yet owns() says {:?}",
                got.token,
                session.owns(key)
            );
            owned.push(got);
        }
        let listed: Vec<String> = session.owned().into_iter().map(|o| o.key).collect();
        ensure!(
            listed == keys.owned,
            step,
            "owned() lists {listed:?}, not {:?}",
            keys.owned
        );
        self.session_held(&keys.session, term, step).await?;
        for got in &owned {
            self.owned_held(got, &keys.session, step).await?;
        }
        self.passed(
            step,
            format!(
                "{} open, term {term}; {} at token {}, {} at token {}: each record owned by the session's term",
                keys.session, owned[0].key, owned[0].token, owned[1].key, owned[1].token
            ),
        );
        Ok((term, owned))
    }

    /// b's plain acquire of an owned key is busy, naming a; the key's
    /// version untouched.
    async fn session_busy(&mut self, b: &Plain<'s, S, C>, owned: &Owned) -> Result<(), Fail> {
        let step = Step::SessionBusy;
        let (before, _) = self.record_at(&owned.key, step).await?;
        match b.acquire(&owned.key).await {
            Ok(AcquireOutcome::Busy(busy)) => ensure!(
                busy.holder == "a" && busy.token == owned.token && busy.etag == before,
                step,
                "b was told {} holds token {} (etag {}); a owns token {} (etag {})",
                busy.holder,
                busy.token,
                busy.etag.as_str(),
                owned.token,
                before.as_str()
            ),
            other => return Err((step, format!("b, while a owns {}: {other:?}", owned.key))),
        }
        let (after, record) = self.record_at(&owned.key, step).await?;
        ensure!(
            after == before,
            step,
            "b's refused acquire changed {}: now {}",
            owned.key,
            describe(&after, &record)
        );
        self.passed(
            step,
            format!(
                "b's acquire of {} busy, naming a at token {}; its version untouched",
                owned.key, owned.token
            ),
        );
        Ok(())
    }

    /// A write with a token through `cfg`, as a holder of it would send it
    /// (a paused one that no longer holds included).
    async fn write_with(&self, cfg: LeaseConfig, target: &str, token: u64) -> FenceWrite {
        let entropy = (self.subject.entropy)();
        let mut op = FenceOp::new(cfg, entropy, target, token, b"stale".to_vec());
        drive(&mut op, &*self.subject.store, &self.subject.clock, |_| {}).await
    }

    /// a writes the protected object through its owned key; a write with a
    /// smaller token is refused.
    async fn session_fence(
        &mut self,
        session: &Session<Shared<S>, C>,
        b: &Plain<'s, S, C>,
        owned: &Owned,
        keys: &Keys,
    ) -> Result<(), Fail> {
        let step = Step::SessionFence;
        let target = &keys.target;
        let written = match session
            .fenced_write(&owned.key, target, b"a".to_vec())
            .await
        {
            Ok(Some(FenceOutcome::Accepted { etag })) => etag,
            other => return Err((step, format!("a's write through {}: {other:?}", owned.key))),
        };
        let (etag, fenced) = self.fenced_at(target, step).await?;
        ensure!(
            etag == written && fenced.token == owned.token && fenced.payload == b"a",
            step,
            "after a's write {target} holds token {} payload {:?}",
            fenced.token,
            String::from_utf8_lossy(&fenced.payload)
        );
        let stale = owned.token - 1;
        match self.write_with(b.config(&owned.key), target, stale).await {
            Ok(FenceOutcome::Rejected { current }) if current == owned.token => {}
            other => return Err((step, format!("a write with token {stale}: {other:?}"))),
        }
        let (after, _) = self.fenced_at(target, step).await?;
        ensure!(after == written, step, "the refused write changed {target}");
        self.passed(
            step,
            format!(
                "a's write through {} carries token {}; token {stale} refused, nothing changed",
                owned.key, owned.token
            ),
        );
        Ok(())
    }

    /// An operator breaks a's session; b takes an owned key at once; a's
    /// late write is refused; a learns, and owns nothing.
    async fn session_break(
        &mut self,
        session: &Session<Shared<S>, C>,
        b: &Plain<'s, S, C>,
        term: u64,
        owned: &[Owned],
        keys: &Keys,
    ) -> Result<Lease, Fail> {
        let step = Step::SessionBreak;
        ensure!(
            session.token() == Some(term),
            step,
            "a's session is at {:?}, no longer term {term}",
            session.token()
        );
        let lost = session.lost();
        keys.paused.set(true);
        let broken = self.break_session(&keys.session, term).await;
        keys.paused.set(false);
        let broken = broken?;
        let broke_at = self.now();
        let (etag, record) = self.record_at(&keys.session, step).await?;
        ensure!(
            record.released && record.token == broken,
            step,
            "broken (token {broken}), yet the session's record is {}",
            describe(&etag, &record)
        );
        let first = &owned[0];
        let lb = Self::b_takes(b, &first.key, first.token, step).await?;
        self.b_holds(&lb, step).await?;
        match b.fenced_write(&lb, &keys.target, b"b".to_vec()).await {
            Ok(FenceOutcome::Accepted { .. }) => {}
            other => return Err((step, format!("b's fenced write: {other:?}"))),
        }
        // a has not been told yet, or has: it writes, or it does not.
        let late = match session
            .fenced_write(&first.key, &keys.target, b"late a".to_vec())
            .await
        {
            Ok(None) => "a's session no longer writes with it",
            Ok(Some(FenceOutcome::Rejected { current })) if current == lb.token => {
                "a's session, not told yet, wrote and was refused"
            }
            other => return Err((step, format!("a's late write: {other:?}"))),
        };
        match self
            .write_with(b.config(&first.key), &keys.target, first.token)
            .await
        {
            Ok(FenceOutcome::Rejected { current }) if current == lb.token => {}
            other => {
                return Err((
                    step,
                    format!("a write with a's token {}: {other:?}", first.token),
                ))
            }
        }
        let (_, fenced) = self.fenced_at(&keys.target, step).await?;
        ensure!(
            fenced.token == lb.token && fenced.payload == b"b",
            step,
            "{} holds token {} payload {:?}, not b's",
            keys.target,
            fenced.token,
            String::from_utf8_lossy(&fenced.payload)
        );
        lost.await;
        let learned = self.now().0 - broke_at.0;
        let still: Vec<&str> = owned
            .iter()
            .filter(|o| session.owns(&o.key).is_some())
            .map(|o| o.key.as_str())
            .collect();
        ensure!(
            still.is_empty() && session.owned().is_empty(),
            step,
            "a's term {term} ended, yet a owns {still:?}"
        );
        self.passed(
            step,
            format!(
                "the operator broke {} (term {term}); b took {} at once, token {} after a's {}; {late}; a write with a's token {} refused, b's kept; a owns nothing {learned} ms after the break",
                keys.session, first.key, lb.token, first.token, first.token
            ),
        );
        Ok(lb)
    }

    /// The operator's break of the session's term: inspected, then broken
    /// by that etag (again if a renewal landed between).
    async fn break_session(&self, key: &str, term: u64) -> Result<u64, Fail> {
        let step = Step::SessionBreak;
        let operator = self.client("operator", self.options.ttl, step)?;
        operator
            .check_store(&self.key)
            .await
            .map_err(|e| (step, format!("the operator's check of the store: {e}")))?;
        let mut tries = 0;
        loop {
            tries += 1;
            let seen = match operator.inspect(key).await {
                Ok(Some(seen)) => seen,
                other => return Err((step, format!("the operator's read: {other:?}"))),
            };
            ensure!(
                seen.record.holder == "a" && seen.record.token == term && !seen.free,
                step,
                "inspect shows {} (free: {}); a's term is {term}",
                describe(&seen.etag, &seen.record),
                seen.free
            );
            match operator.break_lease(key, seen.etag.as_str(), None).await {
                Ok(BreakOutcome { token }) if token >= term => return Ok(token),
                // A renewal of a's between the read and the break.
                Err(LeaseError::Changed { .. }) if tries < 3 => continue,
                other => return Err((step, format!("the operator's break: {other:?}"))),
            }
        }
    }

    /// a's next term owns a third key and hands it over to b: the release
    /// names b; to c the key is busy, naming b as the successor, and c
    /// changes nothing; b takes it at once. a's campaign is not polled
    /// meanwhile, so that a virtual clock does not jump past the grace
    /// (the crate docs).
    async fn session_handoff(
        &mut self,
        session: &Session<Shared<S>, C>,
        b: &Plain<'s, S, C>,
        broken: u64,
        keys: &Keys,
    ) -> Result<Lease, Fail> {
        let step = Step::SessionHandoff;
        let term = self.next_term(session, broken, step).await?;
        let c = self.client("c", self.options.ttl, step)?;
        c.check_store(&self.key)
            .await
            .map_err(|e| (step, format!("c's check of the store: {e}")))?;
        keys.paused.set(true);
        let handed = self.hand_over(session, &c, b, &keys.handed).await;
        keys.paused.set(false);
        let (owned, busy, lb) = handed?;
        self.b_holds(&lb, step).await?;
        self.passed(
            step,
            format!(
                "a's term {term} owned {} at token {} and handed it to b: c was refused, naming b ({busy}); b took it at once, token {}",
                owned.key, owned.token, lb.token
            ),
        );
        Ok(lb)
    }

    /// a owns `key`, hands it to b; c is refused; b takes it: what a
    /// owned, what c was told, b's lease.
    async fn hand_over(
        &self,
        session: &Session<Shared<S>, C>,
        c: &Plain<'s, S, C>,
        b: &Plain<'s, S, C>,
        key: &str,
    ) -> Result<(Owned, String, Lease), Fail> {
        let step = Step::SessionHandoff;
        let owned = match session.own(key).await {
            Ok(OwnOutcome::Owned(owned)) => owned,
            other => return Err((step, format!("a's own of {key}: {other:?}"))),
        };
        match session.hand_over(key, "b").await {
            Ok(ReleaseOutcome::Released { token }) if token == owned.token => {}
            other => return Err((step, format!("a's hand-over of {key} to b: {other:?}"))),
        }
        let (etag, record) = self.record_at(key, step).await?;
        ensure!(
            record.released
                && record.token == owned.token
                && record.meta.get(HANDOFF_TO).map(String::as_str) == Some("b"),
            step,
            "handed over, yet {key} holds {} (meta {:?})",
            describe(&etag, &record),
            record.meta
        );
        let busy = match c.acquire(key).await {
            Ok(AcquireOutcome::Busy(busy)) if busy.handoff_to.as_deref() == Some("b") => busy,
            other => {
                return Err((
                    step,
                    format!("c's acquire of {key} in the grace: {other:?}"),
                ))
            }
        };
        let (after, _) = self.record_at(key, step).await?;
        ensure!(after == etag, step, "c's refused acquire changed {key}");
        let lb = Self::b_takes(b, key, owned.token, step).await?;
        let said = format!("holder {}, token {}", busy.holder, busy.token);
        Ok((owned, said, lb))
    }

    /// a's next term takes the other key over from the broken term; a
    /// closes the session; b takes the key at once.
    async fn session_close(
        &mut self,
        session: &Session<Shared<S>, C>,
        b: &Plain<'s, S, C>,
        broken: u64,
        before: &Owned,
    ) -> Result<Lease, Fail> {
        let step = Step::SessionClose;
        let term = self.next_term(session, broken, step).await?;
        let owned = match session.own(&before.key).await {
            Ok(OwnOutcome::Owned(owned)) => owned,
            other => return Err((step, format!("a's own of {}: {other:?}", before.key))),
        };
        ensure!(
            owned.session_token == term && owned.token > before.token,
            step,
            "a's next term owns {} as {owned:?}; the broken term had token {}",
            before.key,
            before.token
        );
        let session_key = session.key().to_string();
        self.owned_held(&owned, &session_key, step).await?;
        session.close();
        ensure!(
            session.owns(&owned.key).is_none(),
            step,
            "closed, yet a's session owns {}",
            owned.key
        );
        let limit = self.options.ttl;
        match self.bounded(limit, session.finished()).await {
            Some(ElectorExit::Resigned {
                released: Some(Ok(ReleaseOutcome::Released { token })),
            }) if token == term => {}
            Some(other) => return Err((step, format!("the session's campaign ended {other:?}"))),
            None => return Err((step, format!("the session not closed after {limit:?}"))),
        }
        let (etag, record) = self.record_at(&session_key, step).await?;
        ensure!(
            record.released && record.token == term,
            step,
            "closed, yet the session's record is {}",
            describe(&etag, &record)
        );
        let lb = Self::b_takes(b, &owned.key, owned.token, step).await?;
        self.b_holds(&lb, step).await?;
        self.passed(
            step,
            format!(
                "a's next term {term} took {} over from the broken one (token {} after {}); closed: the session's record released; b took it at once, token {}",
                owned.key, owned.token, before.token, lb.token
            ),
        );
        Ok(lb)
    }
}

/// What a fenced write gave.
type FenceWrite = Result<FenceOutcome, LeaseError>;
