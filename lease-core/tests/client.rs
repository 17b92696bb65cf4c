//! The client ([`Leases`]) and the leadership handle, on the in-memory
//! store: each operation's own result, claims kept per key, the probe run
//! once, and futures a multi-threaded runtime can spawn.

mod support;

use lease_core::client::join;
use lease_core::protocol::NotHeld;
use lease_core::store::PutCondition;
use lease_core::{
    AcquireOutcome, BreakOutcome, LeaseError, LostReason, ReleaseOutcome, RenewOutcome,
};
use lease_core::{
    ByEtagError, Clock, ElectorExit, FenceOutcome, LeadError, Leases, MemStore, Protocol, Run,
    RunOutcome, Settings, StoreOp, StoreReply, UnixMillis, VirtualClock,
};
use pollster::block_on;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{drive_until, entropy, mem_world as world, Blind, Counted};

fn client(store: &MemStore, clock: &VirtualClock, holder: &str) -> Leases<MemStore, VirtualClock> {
    let settings = Settings::new(holder).ttl(Duration::from_secs(30));
    Leases::new(store.clone(), clock.clone(), settings, entropy).expect("valid settings")
}

fn assert_send<T: Send>(_: &T) {}

#[test]
fn every_future_the_client_returns_is_send() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let lease = match block_on(a.acquire("k")) {
        Ok(AcquireOutcome::Acquired(lease)) => lease,
        other => panic!("{other:?}"),
    };
    assert_send(&a.acquire("k"));
    assert_send(&a.renew(&lease));
    assert_send(&a.release(lease.clone()));
    assert_send(&a.release_by_etag("k", "e"));
    assert_send(&a.inspect("k"));
    assert_send(&a.break_lease("k", "e", None));
    assert_send(&a.fenced_write(&lease, "data", vec![]));
    assert_send(&a.probe("k"));
    assert_send(&a.run("k", Run::new(), |t| async move { Ok::<_, String>(t) }));
    let tick = lease_core::tick::Tick::new("t1").unwrap();
    let run = Run::new().tick(&tick).observe(|_| {});
    assert_send(&a.run("k", run, |t| async move { Ok::<_, String>(t) }));
    let (leadership, campaign) = a.lead("k");
    assert_send(&campaign);
    assert_send(&leadership.until_leader());
    assert_send(&leadership.lost());
    assert_send(&leadership.finished());
}

#[test]
fn each_operation_answers_with_its_own_outcome() {
    let (store, clock) = world();
    let (a, b) = (client(&store, &clock, "a"), client(&store, &clock, "b"));
    let AcquireOutcome::Acquired(lease) = block_on(a.acquire("k")).unwrap() else {
        panic!("a acquires a free key")
    };
    let AcquireOutcome::Busy(busy) = block_on(b.acquire("k")).unwrap() else {
        panic!("b finds it busy")
    };
    assert_eq!((busy.holder.as_str(), busy.token), ("a", 1));
    let RenewOutcome::Renewed(lease) = block_on(a.renew(&lease)).unwrap() else {
        panic!("a renews")
    };
    // Another process knows the lease by its etag only.
    let by_etag = client(&store, &clock, "a");
    assert_eq!(
        block_on(by_etag.release_by_etag("k", lease.etag.as_str())),
        Ok(ReleaseOutcome::Released { token: 1 })
    );
    assert!(matches!(
        block_on(by_etag.renew_by_etag("k", lease.etag.as_str())),
        Err(ByEtagError::NotHeld(NotHeld::Changed { .. }))
    ));
    let AcquireOutcome::Acquired(next) = block_on(b.acquire("k")).unwrap() else {
        panic!("b acquires after the release")
    };
    assert_eq!(next.token, 2);
    // An operator breaks b's lease: b's renewal finds it lost.
    let seen = block_on(a.inspect("k")).unwrap().expect("a record");
    assert_eq!(
        block_on(a.break_lease("k", seen.etag.as_str(), None)),
        Ok(BreakOutcome { token: 2 })
    );
    assert!(matches!(
        block_on(b.renew(&next)),
        Ok(RenewOutcome::Lost(LostReason::TakenBy {
            released: true,
            ..
        }))
    ));
    assert!(matches!(
        block_on(a.break_lease("k", seen.etag.as_str(), None)),
        Err(LeaseError::Changed { .. })
    ));
}

#[test]
fn the_probe_runs_once_per_client_and_a_store_without_conditions_is_refused() {
    let (store, clock) = world();
    let counted = Counted(store.clone(), Arc::new(AtomicU64::new(0)));
    let calls = counted.1.clone();
    let a = Leases::new(counted, clock.clone(), Settings::new("a"), entropy).unwrap();
    assert!(block_on(a.acquire("k")).is_ok());
    let first = calls.load(Ordering::Relaxed);
    let AcquireOutcome::Acquired(lease) = block_on(a.acquire("j")).unwrap() else {
        panic!("a free key")
    };
    let second = calls.load(Ordering::Relaxed) - first;
    assert!(
        first > second + 5,
        "probe on the first acquire only: {first} then {second}"
    );
    block_on(a.release(lease)).unwrap();

    // A store that ignores If-None-Match: refused before any lease write.
    let blind = Blind(store.clone());
    let settings = Settings::new("c").protocol(Protocol::Cas);
    let c = Leases::new(blind, clock.clone(), settings, entropy).unwrap();
    assert!(matches!(
        block_on(c.acquire("m")),
        Err(LeaseError::UnsafeStore { .. })
    ));
    assert_eq!(
        block_on(a.inspect("m")),
        Ok(None),
        "nothing written at the key"
    );
}

#[test]
fn run_runs_the_job_with_the_token_and_skips_when_busy() {
    let (store, clock) = world();
    let (a, b) = (client(&store, &clock, "a"), client(&store, &clock, "b"));
    let job = |token| async move { Ok::<_, String>(token) };
    let ran = block_on(a.run("tick", Run::new(), job));
    assert!(
        matches!(
            ran,
            Ok(RunOutcome::Ran {
                token: 1,
                output: 1,
                recorded: false,
                missed: None,
                seat: None,
            })
        ),
        "{ran:?}"
    );
    let AcquireOutcome::Acquired(_held) = block_on(b.acquire("tick")).unwrap() else {
        panic!("free after a's run")
    };
    let skipped = block_on(a.run("tick", Run::new(), job));
    assert!(
        matches!(&skipped, Ok(RunOutcome::Skipped { holder, .. }) if holder == "b"),
        "{skipped:?}"
    );
}

#[test]
fn run_holds_the_lease_while_the_job_runs_and_releases_after() {
    let (store, clock) = world();
    let (a, b) = (client(&store, &clock, "a"), client(&store, &clock, "b"));
    let ran = block_on(a.run("job", Run::new(), |token| {
        let b = b.clone();
        async move {
            let busy = block_on(b.acquire("job"));
            Ok::<_, String>((token, busy))
        }
    }));
    let Ok(RunOutcome::Ran {
        output: (1, Ok(AcquireOutcome::Busy(_))),
        ..
    }) = ran
    else {
        panic!("{ran:?}")
    };
    // Released after: b takes it at once, with the next token.
    assert!(matches!(block_on(b.acquire("job")), Ok(AcquireOutcome::Acquired(l)) if l.token == 2));
}

#[test]
fn leadership_follows_the_term_and_hands_over_on_resign() {
    let (store, clock) = world();
    let (a, b) = (client(&store, &clock, "a"), client(&store, &clock, "b"));
    let (la, campaign_a) = a.lead("leader");
    let (lb, campaign_b) = b.lead("leader");
    assert!(!la.is_leader() && la.token().is_none());
    let work = async {
        let token = la.until_leader().await.expect("a leads");
        assert!(la.is_leader());
        assert_eq!(la.leader().map(|l| l.holder), Some("a".into()));
        assert!(!lb.is_leader());
        la.resign();
        assert_eq!(
            la.finished().await,
            ElectorExit::Resigned {
                released: Some(Ok(ReleaseOutcome::Released { token }))
            }
        );
        assert!(!la.is_leader());
        assert_eq!(la.until_leader().await, Err(LeadError::Resigned));
        // b takes over at its next poll, with the next token.
        let next = lb.until_leader().await.expect("b leads");
        assert_eq!(next, token + 1);
        lb.resign();
        lb.finished().await;
    };
    let campaigns = join(campaign_a, campaign_b);
    let ((), _) = block_on(join(work, campaigns));
}

#[test]
fn lost_completes_at_the_local_deadline_even_if_the_campaign_never_runs() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let (la, campaign) = a.lead("leader");
    // Drive the campaign only until it leads, then starve it.
    let mut campaign = Box::pin(campaign);
    let token = block_on(async {
        let until = std::pin::pin!(la.until_leader());
        let mut until = until;
        std::future::poll_fn(|cx| {
            let _ = campaign.as_mut().poll(cx);
            until.as_mut().poll(cx)
        })
        .await
    });
    assert_eq!(token, Ok(1));
    assert!(la.is_leader());
    // The term's local deadline, as the handle's health tells it.
    let lease_core::client::Health::Leading { time_left, .. } = la.health() else {
        panic!("leading: {:?}", la.health())
    };
    let deadline = clock.now().mono + time_left;
    block_on(la.lost());
    assert!(!la.is_leader(), "the deadline passed with no renewal");
    assert_eq!(
        clock.now().mono,
        deadline,
        "completed at the deadline exactly"
    );
}

/// Issue "the client layer tells the truth": a resigned handle said yes,
/// with its old token, until the campaign's `Released` event (while the
/// release's reply was slow, another node could take the lease and lead).
/// From `resign()` on it says no, whether or not the campaign runs.
#[test]
fn a_resigned_handle_says_no_from_the_moment_it_resigns() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let (la, campaign) = a.lead("leader");
    let mut campaign = Box::pin(campaign);
    drive_until(&mut campaign, || la.is_leader());
    assert_eq!(la.token(), Some(1));
    la.resign();
    // The campaign has not run since: its release is not even sent.
    assert!(!la.is_leader(), "a resigned handle said it leads");
    assert_eq!(la.token(), None);
    assert_eq!(la.health(), lease_core::client::Health::Following);
    block_on(la.lost());
    assert_eq!(block_on(la.until_leader()), Err(LeadError::Resigned));
    // The release goes ahead, and the handle still says no.
    let exit = block_on(campaign);
    assert!(matches!(exit, ElectorExit::Resigned { .. }), "{exit:?}");
    assert!(!la.is_leader());
}

/// Issue "the client layer tells the truth": `lost()` waited on whichever
/// term was current when it woke, so a future made in one term and first
/// polled in the next (the lease broken and won again meanwhile) stayed
/// pending, and the first term's work went on. It completes for the term
/// current when it was made.
#[test]
fn lost_completes_for_the_term_it_was_made_in_though_a_new_one_began() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let operator = client(&store, &clock, "operator");
    let (la, campaign) = a.lead("leader");
    let mut campaign = Box::pin(campaign);
    drive_until(&mut campaign, || la.is_leader());
    assert_eq!(la.token(), Some(1));
    let lost = la.lost();
    // An operator breaks the lease; the campaign loses it at its next
    // renewal and wins it again, with the next token.
    let seen = block_on(operator.inspect("leader")).unwrap().unwrap();
    block_on(operator.break_lease("leader", seen.etag.as_str(), None)).unwrap();
    drive_until(&mut campaign, || la.token().is_some_and(|t| t > 1));
    assert!(la.is_leader());
    let mut lost = Box::pin(lost);
    let polled = lost
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
    assert!(
        polled.is_ready(),
        "lost() of the first term is still pending in the second"
    );
}

#[test]
fn a_campaign_against_a_missing_bucket_ends_with_the_error() {
    let (_, clock) = world();
    let settings = Settings::new("a").probe(false);
    let a = Leases::new(NoBucket, clock, settings, entropy).unwrap();
    let (la, campaign) = a.lead("leader");
    let (waited, exit) = block_on(join(la.until_leader(), campaign));
    assert_eq!(exit, ElectorExit::Failed(LeaseError::no_such_bucket()));
    assert_eq!(waited, Err(LeadError::Failed(LeaseError::no_such_bucket())));
}

struct NoBucket;

impl lease_core::Store for NoBucket {
    async fn call(&self, _: StoreOp) -> StoreReply {
        StoreReply::new(lease_core::store::ReplyKind::NoSuchBucket)
    }
}

/// Issue "the client layer tells the truth": after an operator broke a
/// lease and another holder took it, an epochs release said `Released`
/// (its create filled the slot of the broken epoch, which the takeover's
/// cleanup had deleted; the listing after it showed the new holder's epoch
/// above, taken to have come in through ours), where cas and the mutex say
/// `AlreadyLost`. Cleanup keeps the epoch below the newest: the release's
/// create is refused, and every protocol says `AlreadyLost`, naming the
/// new holder.
#[test]
fn a_release_after_a_break_and_a_takeover_says_already_lost_on_every_protocol() {
    for protocol in Protocol::ALL {
        let (store, clock) = world();
        let client = |holder: &str| {
            let settings = Settings::new(holder)
                .ttl(Duration::from_secs(30))
                .protocol(protocol)
                .probe(false);
            Leases::new(store.clone(), clock.clone(), settings, entropy).unwrap()
        };
        let (a, b, operator) = (client("a"), client("b"), client("operator"));
        let AcquireOutcome::Acquired(lease) = block_on(a.acquire("k")).unwrap() else {
            panic!("{protocol}: a free key")
        };
        let seen = block_on(operator.inspect("k")).unwrap().unwrap();
        block_on(operator.break_lease("k", seen.etag.as_str(), None)).unwrap();
        let AcquireOutcome::Acquired(theirs) = block_on(b.acquire("k")).unwrap() else {
            panic!("{protocol}: b takes the broken lease")
        };
        match block_on(a.release(lease)) {
            Ok(ReleaseOutcome::AlreadyLost(LostReason::TakenBy { holder, token, .. })) => {
                assert_eq!((holder.as_str(), token), ("b", theirs.token), "{protocol}")
            }
            other => panic!("{protocol}: {other:?}"),
        }
        // b still holds it.
        let now = block_on(operator.inspect("k")).unwrap().unwrap();
        assert_eq!(now.record.holder, "b", "{protocol}");
        assert!(!now.free, "{protocol}");
    }
}

/// A store that answers by a script: the `n`th call (from 0) gets what
/// `script` says, else the in-memory store's reply.
struct Scripted {
    inner: MemStore,
    calls: AtomicU64,
    script: fn(u64, &StoreOp, &MemStore) -> Option<StoreReply>,
}

impl lease_core::Store for Scripted {
    async fn call(&self, op: StoreOp) -> StoreReply {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        (self.script)(n, &op, &self.inner).unwrap_or_else(|| self.inner.apply(&op))
    }
}

/// A wait of up to 20 s for `k` by a 30 s client `a` on a store answering
/// by `script`, which must end refused: its error.
fn a_wait_refused(script: fn(u64, &StoreOp, &MemStore) -> Option<StoreReply>) -> LeaseError {
    let (store, clock) = world();
    let settings = Settings::new("a").ttl(Duration::from_secs(30)).probe(false);
    let scripted = Scripted {
        inner: store,
        calls: AtomicU64::new(0),
        script,
    };
    let a = Leases::new(scripted, clock, settings, entropy).unwrap();
    match block_on(a.acquire_within("k", Duration::from_secs(20))) {
        Err(e @ LeaseError::Denied { .. }) => e,
        other => panic!("{other:?}"),
    }
}

/// The store refuses the credentials.
fn refused() -> StoreReply {
    StoreReply::new(lease_core::store::ReplyKind::Denied {
        code: Some("AccessDenied".into()),
        message: None,
    })
}

/// Our write to `key` is held in the network (its reply never comes)
/// while another holder's cas lease (`token`, `holder`, `ttl_ms`) lands
/// there with `condition`.
fn theirs_lands_instead(
    inner: &MemStore,
    key: &str,
    (token, holder, ttl_ms): (u64, &str, u64),
    condition: lease_core::store::PutCondition,
) -> Option<StoreReply> {
    let now = inner.apply(&StoreOp::Get { key: key.into() }).date?.unix_ms;
    inner.apply(&StoreOp::Put {
        key: key.into(),
        body: live_cas_record(token, holder, now, ttl_ms).encode(),
        condition,
    });
    Some(StoreReply::transport(
        lease_core::store::TransportErrorKind::Timeout,
        "no reply",
    ))
}

/// Another holder's cas record, written at `now` for `ttl_ms`: the JSON
/// another cas client puts at the key.
fn live_cas_record(
    token: u64,
    holder: &str,
    now: UnixMillis,
    ttl_ms: u64,
) -> lease_core::LeaseRecord {
    let (at, until) = (now.as_secs_f64(), UnixMillis(now.0 + ttl_ms).as_secs_f64());
    let json = format!(
        r#"{{"v":1,"token":{token},"expires_at":{until},"holder":"{holder}","session":"{holder}-session","nonce":"{holder}-nonce","acquired_at":{at},"ttl_ms":{ttl_ms},"released":false,"protocol":"cas"}}"#
    );
    lease_core::LeaseRecord::decode(json.as_bytes()).expect("a cas record")
}

/// Issue "the client layer tells the truth": an earlier attempt's
/// unsettled write was kept only by the errors with room for it
/// (`GaveUp`, `WonTooLate`, `ProtocolMismatch`), so a wait whose last
/// attempt was denied forgot a create still in the network, which could
/// land as a lock in the caller's name that nothing reported. Every error
/// carries it now.
#[test]
fn a_wait_that_ends_denied_carries_an_earlier_attempts_unsettled_create() {
    // Call 0: the GET finds the key absent. Call 1: our create is held in
    // the network (no reply) while another holder's lease lands. Then the
    // re-read finds that lease: busy, our create unsettled. From call 5
    // on, the credentials are refused.
    fn script(n: u64, op: &StoreOp, inner: &MemStore) -> Option<StoreReply> {
        match (n, op) {
            (1, StoreOp::Put { key, .. }) => {
                let theirs = (1, "b", 30_000);
                theirs_lands_instead(inner, key, theirs, PutCondition::IfAbsent)
            }
            (5.., _) => Some(refused()),
            _ => None,
        }
    }
    let e = a_wait_refused(script);
    let [claim] = e.unsettled() else {
        panic!("the first attempt's create is handed on: {e:?}")
    };
    assert_eq!(claim.holder, "a");
    assert!(e.to_string().contains("may be live"), "{e}");
}

/// Found by the simulation (mutex, a CLI `acquire --wait`, seed
/// 467453456129): a wait's first attempt left a create in the network, the
/// second's create was refused (and not read back) as the wait gave up,
/// and the error named only the second's session while the first's lock
/// was the one that landed. An error (or busy) now hands on every
/// attempt's open write, one claim per session.
#[test]
fn a_wait_hands_on_every_attempts_unsettled_write() {
    // Each of our creates is held in the network (no reply) while another
    // holder's two-second lease lands in its place: busy, our write
    // unsettled, and the next attempt once that lease expires. The third
    // create is refused (a transport's retry of it may have landed).
    static PUTS: AtomicU64 = AtomicU64::new(0);
    fn script(_: u64, op: &StoreOp, inner: &MemStore) -> Option<StoreReply> {
        let StoreOp::Put { key, .. } = op else {
            return None;
        };
        let n = PUTS.fetch_add(1, Ordering::SeqCst);
        if n >= 2 {
            return Some(refused());
        }
        let holder = format!("other-{n}");
        theirs_lands_instead(inner, key, (10 + n, &holder, 2_000), PutCondition::None)
    }
    let e = a_wait_refused(script);
    assert_eq!(PUTS.load(Ordering::SeqCst), 3, "three attempts wrote");
    let claims = e.unsettled();
    assert_eq!(
        claims.len(),
        3,
        "every attempt's create is handed on: {e:?}"
    );
    let mut sessions: Vec<_> = claims.iter().map(|c| c.acquisition.as_str()).collect();
    sessions.dedup();
    assert_eq!(sessions.len(), 3, "one claim per session: {claims:?}");
    assert!(claims.iter().all(|c| c.holder == "a"), "{claims:?}");
    let said = e.to_string();
    assert!(
        claims.iter().all(|c| said.contains(&c.acquisition)),
        "the error names every session: {said}"
    );
}

/// A store whose replies carry HTTP `Date` headers (one-second resolution),
/// as S3's do.
struct HttpDated(MemStore);

impl lease_core::Store for HttpDated {
    async fn call(&self, op: StoreOp) -> StoreReply {
        let mut reply = self.0.apply(&op);
        reply.date = reply.date.map(|d| {
            let secs = d.latest().0 / 1000 * 1000;
            lease_core::time::StoreDate::from_http_date(UnixMillis(secs))
        });
        reply
    }
}

/// A 30 s client `holder` on `store` as S3 dates its replies.
fn http_dated(
    store: &MemStore,
    clock: &VirtualClock,
    holder: &str,
) -> Leases<HttpDated, VirtualClock> {
    let settings = Settings::new(holder)
        .ttl(Duration::from_secs(30))
        .probe(false);
    Leases::new(HttpDated(store.clone()), clock.clone(), settings, entropy).unwrap()
}

/// A simple client writes `body` at `k` (no condition).
fn simple_writes(store: &MemStore, body: &str) {
    store.apply(&StoreOp::Put {
        key: "k".into(),
        body: body.as_bytes().to_vec(),
        condition: PutCondition::None,
    });
}

/// Issue "the client layer tells the truth": a takeover of a simple
/// client's record took its token floor from the read's `Date`, whole
/// seconds on S3: a takeover, an acquisition of our own after it (+1), and
/// a second takeover within the same second (the simple client had written
/// again) handed out tokens that went down. The floor is the latest the
/// store's time may have been at the read, and the write waits until the
/// store is past it: every takeover's token is above every token before.
#[test]
fn takeovers_of_a_simple_clients_record_within_one_second_hand_out_growing_tokens() {
    let (store, clock) = world();
    let (a, b) = (
        http_dated(&store, &clock, "a"),
        http_dated(&store, &clock, "b"),
    );
    // A simple client's record: an expiry long past and a small token.
    let simple = |token: u64| {
        simple_writes(
            &store,
            &format!(r#"{{"expires_at": 1.0, "token": {token}}}"#),
        );
    };
    let mut tokens = Vec::new();
    let mut take = |leases: &Leases<HttpDated, VirtualClock>| {
        let AcquireOutcome::Acquired(lease) = block_on(leases.acquire("k")).unwrap() else {
            panic!("free")
        };
        tokens.push(lease.token);
        block_on(leases.release(lease)).unwrap();
    };
    let started = clock.now().mono;
    simple(5);
    take(&a); // a takeover
    take(&a); // our own record: + 1
    simple(6);
    take(&b); // a takeover again
    let took = clock.now().mono - started;
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens {tokens:?} within {took:?}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// Found by the simulation's simple clients (seed 305636045934): an
/// operator's break of a simple client's record kept its token (0: it
/// wrote none) in a released record of ours, whose token the next
/// acquisition trusts: token 1 after a takeover's store-time token. The
/// break keeps the floor a takeover would draw, and waits for it as a
/// takeover does: a takeover of the next simple client's record within
/// the same `Date` second then still draws a greater token.
#[test]
fn a_break_of_a_simple_clients_record_keeps_the_token_floor() {
    let (store, clock) = world();
    let client = |holder: &str| http_dated(&store, &clock, holder);
    let (a, operator) = (client("a"), client("operator"));
    let simple = || simple_writes(&store, r#"{"expires_at": 1.0, "holder": "simple"}"#);
    simple();
    let AcquireOutcome::Acquired(lease) = block_on(a.acquire("k")).unwrap() else {
        panic!("free")
    };
    let taken = lease.token;
    block_on(a.release(lease)).unwrap();
    simple();
    let seen = block_on(operator.inspect("k")).unwrap().unwrap();
    block_on(operator.break_lease("k", seen.etag.as_str(), None)).unwrap();
    let after = client("b");
    let AcquireOutcome::Acquired(next) = block_on(after.acquire("k")).unwrap() else {
        panic!("free after the break")
    };
    assert!(next.token > taken, "{} after {taken}", next.token);
    block_on(after.release(next.clone())).unwrap();
    simple();
    let AcquireOutcome::Acquired(last) = block_on(client("c").acquire("k")).unwrap() else {
        panic!("free")
    };
    assert!(
        last.token > next.token,
        "{} after {}",
        last.token,
        next.token
    );
}

#[test]
fn a_30_s_lease_is_trusted_for_28_6_s_after_its_write_was_sent() {
    // The README's figure: ttl less the Date header's one second, the
    // 1 % drift allowance of the ttl, and the 100 ms margin.
    let (store, clock) = world();
    let a = http_dated(&store, &clock, "a");
    let AcquireOutcome::Acquired(lease) = block_on(a.acquire("k")).unwrap() else {
        panic!("a free key")
    };
    assert_eq!(
        lease.valid_until - lease.written_at,
        Duration::from_millis(28_600)
    );
}

/// An epochs lease names its epoch object (`<key>/<epoch>.json`): the
/// client must renew, write and release it under its lease key, as it
/// does the others. (The conformance suite found renew and release of an
/// epochs lease refused with a protocol mismatch.)
#[test]
fn every_protocols_lease_renews_writes_and_releases_through_the_client() {
    for protocol in Protocol::ALL {
        let (store, clock) = world();
        let client = |holder: &str| {
            let settings = Settings::new(holder)
                .ttl(Duration::from_secs(30))
                .protocol(protocol);
            Leases::new(store.clone(), clock.clone(), settings, entropy).unwrap()
        };
        let a = client("a");
        let AcquireOutcome::Acquired(lease) = block_on(a.acquire("k")).unwrap() else {
            panic!("{protocol}: a free key")
        };
        let lease = if protocol.renews() {
            match block_on(a.renew(&lease)) {
                Ok(RenewOutcome::Renewed(lease)) => lease,
                other => panic!("{protocol}: renew: {other:?}"),
            }
        } else {
            lease
        };
        assert!(
            matches!(
                block_on(a.fenced_write(&lease, "data", b"x".to_vec())),
                Ok(FenceOutcome::Accepted { .. })
            ),
            "{protocol}"
        );
        assert_eq!(
            block_on(a.release(lease.clone())),
            Ok(ReleaseOutcome::Released { token: lease.token }),
            "{protocol}: release"
        );
        // Another process knows the next lease by its etag only.
        let AcquireOutcome::Acquired(next) = block_on(a.acquire("k")).unwrap() else {
            panic!("{protocol}: free after the release")
        };
        let by_etag = client("a");
        let next = if protocol.renews() {
            match block_on(by_etag.renew_by_etag("k", next.etag.as_str())) {
                Ok(RenewOutcome::Renewed(lease)) => lease,
                other => panic!("{protocol}: renew by etag: {other:?}"),
            }
        } else {
            next
        };
        assert_eq!(
            block_on(by_etag.release_by_etag("k", next.etag.as_str())),
            Ok(ReleaseOutcome::Released { token: next.token }),
            "{protocol}: release by etag"
        );
        let seen = block_on(a.inspect("k"));
        assert!(
            matches!(&seen, Ok(None)) || matches!(&seen, Ok(Some(seen)) if seen.free),
            "{protocol}: {seen:?}"
        );
    }
}

#[test]
fn completed_ticks_in_a_record_are_carried_by_every_write_of_cas_and_epochs() {
    use lease_core::tick::{record_run, Tick, TickRun};
    for protocol in [Protocol::Cas, Protocol::Epochs] {
        let (store, clock) = world();
        let settings = Settings::new("a")
            .ttl(Duration::from_secs(30))
            .protocol(protocol);
        let a = Leases::new(store.clone(), clock.clone(), settings, entropy).unwrap();
        // A first holder completes a tick and gives the lease back with it.
        let mut lease = match block_on(a.acquire("k")) {
            Ok(AcquireOutcome::Acquired(lease)) => lease,
            other => panic!("{other:?}"),
        };
        let tick = Tick::new("t1").unwrap();
        let run = TickRun::new(&tick, lease.token, UnixMillis(1), Some("ok"));
        record_run(&mut lease.record.runs, run.clone(), UnixMillis(0));
        assert!(matches!(
            block_on(a.release(lease)),
            Ok(ReleaseOutcome::Released { .. })
        ));
        // The next acquisition, its renewal and its release keep it.
        let lease = match block_on(a.acquire("k")) {
            Ok(AcquireOutcome::Acquired(lease)) => lease,
            other => panic!("{protocol}: {other:?}"),
        };
        assert_eq!(lease.record.runs, vec![run.clone()], "{protocol}: acquired");
        clock.advance(Duration::from_secs(10));
        let lease = match block_on(a.renew(&lease)) {
            Ok(RenewOutcome::Renewed(lease)) => lease,
            other => panic!("{protocol}: {other:?}"),
        };
        assert_eq!(lease.record.runs, vec![run.clone()], "{protocol}: renewed");
        block_on(a.release(lease)).unwrap();
        let seen = block_on(a.inspect("k")).unwrap().expect("a record");
        assert_eq!(seen.record.runs, vec![run], "{protocol}: released");
    }
}

/// A wait that runs out while another holder's lease is live is `Busy`,
/// at the budget's end and not much later, with a few reads spread over
/// it (the backoff grows; a busy retry is one GET).
#[test]
fn a_wait_that_runs_out_is_busy_after_a_few_reads() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let AcquireOutcome::Acquired(_held) = block_on(a.acquire("k")).unwrap() else {
        panic!("a free key")
    };
    let counted = Counted(store.clone(), Arc::new(AtomicU64::new(0)));
    let calls = counted.1.clone();
    let settings = Settings::new("b").ttl(Duration::from_secs(30)).probe(false);
    let b = Leases::new(counted, clock.clone(), settings, entropy).unwrap();
    let start = clock.now().mono;
    match block_on(b.acquire_within("k", Duration::from_secs(8))) {
        Ok(AcquireOutcome::Busy(busy)) => assert_eq!(busy.holder, "a"),
        other => panic!("{other:?}"),
    }
    let waited = clock.now().mono - start;
    assert!(
        waited >= Duration::from_secs(8) && waited < Duration::from_secs(9),
        "{waited:?}"
    );
    let reads = calls.load(Ordering::Relaxed);
    assert!((4..=10).contains(&reads), "{reads} reads in 8 s");
}

/// A lease given back during the wait is taken; one that lapses is taken
/// within about the store date's resolution of its expiry, however long
/// the backoff has grown.
#[test]
fn a_wait_takes_a_lease_released_or_lapsed_during_it() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let b = client(&store, &clock, "b");
    let AcquireOutcome::Acquired(lease) = block_on(a.acquire("k")).unwrap() else {
        panic!("a free key")
    };
    let give_back = async {
        clock
            .sleep_until(clock.now().mono + Duration::from_secs(3))
            .await;
        a.release(lease).await
    };
    let (released, taken) = block_on(join(
        give_back,
        b.acquire_within("k", Duration::from_secs(20)),
    ));
    assert!(
        matches!(released, Ok(ReleaseOutcome::Released { .. })),
        "{released:?}"
    );
    match taken {
        Ok(AcquireOutcome::Acquired(lease)) => assert_eq!(lease.token, 2),
        other => panic!("{other:?}"),
    }

    // b's lease lapses (no renewal): a waits for it.
    let start = clock.now().mono;
    match block_on(a.acquire_within("k", Duration::from_secs(120))) {
        Ok(AcquireOutcome::Acquired(lease)) => assert_eq!(lease.token, 3),
        other => panic!("{other:?}"),
    }
    let waited = clock.now().mono - start;
    assert!(
        waited >= Duration::from_secs(27) && waited <= Duration::from_secs(33),
        "taken {waited:?} after the wait began (the ttl is 30 s)"
    );
}

/// Fair waiting: the holder that gave a lease back finds it busy for the
/// courtesy second (by the store's clock), so a contender already waiting
/// takes it first; another contender takes it at once, and after the
/// courtesy the releaser may take it again. Off by default.
#[test]
fn under_fair_waiting_a_releaser_leaves_its_lease_to_the_waiters_a_while() {
    use lease_core::protocol::COURTESY;
    for protocol in [Protocol::Cas, Protocol::Epochs] {
        let (store, clock) = world();
        let fair = |holder: &str| {
            let settings = Settings::new(holder)
                .ttl(Duration::from_secs(30))
                .protocol(protocol)
                .fair(true)
                .probe(false);
            Leases::new(store.clone(), clock.clone(), settings, entropy).unwrap()
        };
        let (a, b) = (fair("a"), fair("b"));
        let AcquireOutcome::Acquired(lease) = block_on(a.acquire("k")).unwrap() else {
            panic!("{protocol}: a free key")
        };
        block_on(a.release(lease)).unwrap();
        match block_on(a.acquire("k")) {
            Ok(AcquireOutcome::Busy(busy)) => {
                assert_eq!(busy.holder, "a", "{protocol}");
                let left = busy.expires_in.expect("known");
                assert!(
                    left > Duration::ZERO && left <= COURTESY + Duration::from_secs(1),
                    "{left:?}"
                );
            }
            other => panic!("{protocol}: {other:?}"),
        }
        // A waiter takes it at once.
        let AcquireOutcome::Acquired(lease) = block_on(b.acquire("k")).unwrap() else {
            panic!("{protocol}: b takes the released lease")
        };
        block_on(b.release(lease)).unwrap();
        // b's own wait for it again ends once the courtesy has passed.
        let start = clock.now().mono;
        assert!(matches!(
            block_on(b.acquire_within("k", Duration::from_secs(10))),
            Ok(AcquireOutcome::Acquired(_))
        ));
        let waited = clock.now().mono - start;
        assert!(
            waited >= COURTESY && waited <= COURTESY + Duration::from_secs(3),
            "{waited:?}"
        );

        // Off by default: the releaser takes its lease straight back.
        let c = client(&store, &clock, "c");
        clock.advance(Duration::from_secs(31));
        let AcquireOutcome::Acquired(lease) = block_on(c.acquire("j")).unwrap() else {
            panic!("free")
        };
        block_on(c.release(lease)).unwrap();
        assert!(matches!(
            block_on(c.acquire("j")),
            Ok(AcquireOutcome::Acquired(_))
        ));
    }
}

/// Issue "the client layer tells the truth": the courtesy counted from
/// the latest store date the releaser had seen (its acquisition's or last
/// renewal's), so a holder that gave the lease back more than a second
/// after it (every job longer than a second) took it straight back. It
/// counts from the release; and the released record still reads expired
/// to a client that knows only `expires_at`.
#[test]
fn the_courtesy_counts_from_the_release_not_the_last_renewal() {
    use lease_core::protocol::COURTESY;
    for protocol in [Protocol::Cas, Protocol::Epochs] {
        let (store, clock) = world();
        let settings = Settings::new("a")
            .ttl(Duration::from_secs(30))
            .protocol(protocol)
            .fair(true)
            .probe(false);
        let a = Leases::new(store.clone(), clock.clone(), settings, entropy).unwrap();
        let AcquireOutcome::Acquired(lease) = block_on(a.acquire("k")).unwrap() else {
            panic!("{protocol}: a free key")
        };
        // A job of five seconds, within one renew interval.
        clock.advance(Duration::from_secs(5));
        block_on(a.release(lease)).unwrap();
        let released_at = clock.now().wall;
        match block_on(a.acquire("k")) {
            Ok(AcquireOutcome::Busy(busy)) => {
                let left = busy.expires_in.expect("known");
                assert!(
                    left > Duration::ZERO && left <= COURTESY,
                    "{protocol}: {left:?}"
                );
            }
            other => panic!("{protocol}: the releaser took its lease straight back: {other:?}"),
        }
        let seen = block_on(a.inspect("k")).unwrap().expect("a record");
        assert!(seen.record.released);
        assert!(
            seen.record.expires_at < released_at,
            "{protocol}: a released record must read expired by its expiry alone"
        );
        clock.advance(COURTESY);
        assert!(
            matches!(block_on(a.acquire("k")), Ok(AcquireOutcome::Acquired(_))),
            "{protocol}: the courtesy is over"
        );
    }
}

/// The fleet view: every lease under a prefix (cas held, epochs by its
/// newest epoch, a simple client's record), other objects counted apart,
/// the probe's scratch skipped, other prefixes left out; a throttled call
/// is retried.
#[test]
fn list_shows_every_lease_under_a_prefix() {
    use lease_core::store::{PutCondition, ReplyKind};
    let (store, clock) = world();
    let cas = client(&store, &clock, "alice");
    assert!(matches!(
        block_on(cas.acquire("fleet/a")),
        Ok(AcquireOutcome::Acquired(_))
    ));
    let epochs = Leases::new(
        store.clone(),
        clock.clone(),
        Settings::new("bob")
            .ttl(Duration::from_secs(30))
            .protocol(Protocol::Epochs),
        entropy,
    )
    .unwrap();
    let lease = match block_on(epochs.acquire("fleet/b")) {
        Ok(AcquireOutcome::Acquired(lease)) => lease,
        other => panic!("{other:?}"),
    };
    assert!(matches!(
        block_on(epochs.renew(&lease)),
        Ok(RenewOutcome::Renewed(_))
    ));
    let put = |key: &str, body: &str| {
        store.apply(&StoreOp::Put {
            key: key.into(),
            body: body.as_bytes().to_vec(),
            condition: PutCondition::None,
        })
    };
    put("fleet/d", r#"{"expires_at": 1000000000.5}"#);
    put("fleet/notes.txt", "not a lease");
    put("fleet/a.probe/0123", "scratch");
    assert!(matches!(
        block_on(cas.acquire("other/x")),
        Ok(AcquireOutcome::Acquired(_))
    ));

    // The first page is throttled once: retried. The epochs lease renews
    // between the listing and the read of its newest epoch (epoch 3 made,
    // 2 deleted): its epochs are listed again and epoch 3 read. A record
    // the caller may not read (403) is counted apart.
    put("fleet/secret", "{}");
    let throttled = std::sync::atomic::AtomicBool::new(false);
    struct Once<'a>(&'a MemStore, &'a std::sync::atomic::AtomicBool);
    impl lease_core::Store for Once<'_> {
        async fn call(&self, op: StoreOp) -> StoreReply {
            if matches!(op, StoreOp::List { .. }) && !self.1.swap(true, Ordering::Relaxed) {
                return StoreReply::new(ReplyKind::Throttled { retry_after: None });
            }
            let second = "fleet/b/00000000000000000002.json";
            if matches!(&op, StoreOp::Get { key } if key == second) {
                if let Some((_, body)) = self.0.get(second) {
                    let body = String::from_utf8(body)
                        .unwrap()
                        .replace("\"token\":2", "\"token\":3");
                    self.0.apply(&StoreOp::Put {
                        key: "fleet/b/00000000000000000003.json".into(),
                        body: body.into_bytes(),
                        condition: PutCondition::IfAbsent,
                    });
                    self.0.apply(&StoreOp::Delete {
                        key: second.into(),
                        if_match: None,
                    });
                }
            }
            if matches!(&op, StoreOp::Get { key } if key == "fleet/secret") {
                return StoreReply::new(ReplyKind::Denied {
                    code: Some("AccessDenied".into()),
                    message: None,
                });
            }
            self.0.apply(&op)
        }
    }
    let lister = Leases::new(
        Once(&store, &throttled),
        clock.clone(),
        Settings::new("ops"),
        entropy,
    )
    .unwrap();
    let found = block_on(lister.list("fleet/")).expect("listed");
    assert!(throttled.load(Ordering::Relaxed));
    let shown: Vec<(String, Option<Protocol>, String, u64, bool)> = found
        .leases
        .iter()
        .map(|l| {
            (
                l.key.clone(),
                l.protocol,
                l.record.holder.clone(),
                l.record.token,
                l.free(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            (
                "fleet/a".into(),
                Some(Protocol::Cas),
                "alice".into(),
                1,
                false
            ),
            (
                "fleet/b".into(),
                Some(Protocol::Epochs),
                "bob".into(),
                3,
                false
            ),
            // A simple client's record, long expired.
            ("fleet/d".into(), None, String::new(), 0, true),
        ]
    );
    assert_eq!(found.leases[1].object, "fleet/b/00000000000000000003.json");
    assert!(found.leases[0].time_left().unwrap() > Duration::from_secs(20));
    assert_eq!(found.others, ["fleet/notes.txt", "fleet/secret"]);
}

/// A planned handoff: the leader announces its successor, leads on for a
/// poll interval, then stops leading (its handle says no from the
/// `HandingOver` on) and releases; the successor, reading fast since the
/// announcement, leads next with the next token.
#[test]
fn leadership_hands_over_to_a_named_successor() {
    let (store, clock) = world();
    let (a, b) = (client(&store, &clock, "a"), client(&store, &clock, "b"));
    let (la, campaign_a) = a.lead("leader");
    let (lb, campaign_b) = b.lead("leader");
    let work = async {
        let token = la.until_leader().await.expect("a leads");
        la.hand_over("b").expect("a holder's name");
        // Still leading while the successor reads the announcement.
        assert!(la.is_leader());
        let next = lb.until_leader().await.expect("b leads");
        assert_eq!(next, token + 1);
        assert!(!la.is_leader(), "a still says it leads");
        assert!(matches!(la.finished().await, ElectorExit::Resigned { .. }));
        assert_eq!(la.until_leader().await, Err(LeadError::Resigned));
        let record = support::record_at(&store, "leader");
        assert_eq!(record.holder, "b");
        lb.resign();
        lb.finished().await;
    };
    let campaigns = join(campaign_a, campaign_b);
    let ((), _) = block_on(join(work, campaigns));
}
