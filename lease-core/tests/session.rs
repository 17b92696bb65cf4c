//! Sessions and the keys they own (`Leases::session`, `Session::own`):
//! what another client sees of an owned key while its session lives, when
//! it lapses, is closed or broken, and what holding many keys costs.

mod support;

use lease_core::client::join;
use lease_core::record::{
    CALLER_BYTES, MAX_META_ENTRIES, MAX_RECORD_BYTES, MAX_STRING_BYTES, RESERVED_META,
};
use lease_core::store::{PutCondition, StoreOp};
use lease_core::{
    AcquireOutcome, Clock, ConfigError, LeaseConfig, LeaseError, Leases, MemStore, Protocol,
    ReleaseOutcome, Settings, VirtualClock,
};
use lease_core::{OwnOutcome, Session};
use pollster::block_on;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{entropy, mem_world as world, record_at, Counted};

const TTL: Duration = Duration::from_secs(30);

fn client<S: lease_core::Store>(
    store: S,
    clock: &VirtualClock,
    holder: &str,
) -> Leases<S, VirtualClock> {
    let settings = Settings::new(holder).ttl(TTL).probe(false);
    Leases::new(store, clock.clone(), settings, entropy).expect("valid settings")
}

/// Sleeps `total` in steps of a second, so that a campaign driven beside
/// it keeps its schedule on the virtual clock.
async fn pass(clock: &VirtualClock, total: Duration) {
    let until = clock.now().mono + total;
    while clock.now().mono < until {
        clock
            .sleep_until(clock.now().mono + Duration::from_secs(1))
            .await;
    }
}

fn owned(outcome: Result<OwnOutcome, LeaseError>) -> u64 {
    match outcome {
        Ok(OwnOutcome::Owned(owned)) => owned.token,
        other => panic!("expected the key owned: {other:?}"),
    }
}

fn busy(outcome: Result<OwnOutcome, LeaseError>) -> lease_core::Busy {
    match outcome {
        Ok(OwnOutcome::Busy(busy)) => busy,
        other => panic!("expected the key busy: {other:?}"),
    }
}

/// Runs `work` beside the campaign of `session` (the campaign polled
/// first, so its sleeps set the pace) until `work` ends; the session is
/// then closed and its campaign run to its end.
fn with_session<S, F>(
    session: &Session<S, VirtualClock>,
    campaign: impl std::future::Future,
    work: F,
) -> F::Output
where
    S: lease_core::Store + 'static,
    F: std::future::Future,
{
    let work = async {
        let out = work.await;
        session.close();
        out
    };
    block_on(join(campaign, work)).1
}

#[test]
fn an_owned_key_is_held_while_its_session_is_and_free_when_it_closes() {
    let (store, clock) = world();
    let (a, b) = (
        client(store.clone(), &clock, "a"),
        client(store.clone(), &clock, "b"),
    );
    let (sa, campaign) = a.session("sessions/a");
    let (sb, _) = b.session("sessions/b");
    let out = with_session(&sa, campaign, async {
        sa.until_open().await.expect("the session opens");
        let token = owned(sa.own("tenants/1").await);
        assert_eq!(token, 1);
        assert_eq!(sa.owns("tenants/1"), Some(1));
        // The record names the session; its holder's lease stays busy
        // for minutes, far past the key's own stamp, while the session
        // is renewed.
        let record = record_at(&store, "tenants/1");
        let by = record.owned_by.clone().expect("an owned record");
        assert_eq!(
            (by.key.as_str(), Some(by.token)),
            ("sessions/a", sa.token())
        );
        pass(&clock, TTL * 4).await;
        assert_eq!(sa.owns("tenants/1"), Some(1));
        // A plain acquire sees it busy, until the session's expiry.
        let AcquireOutcome::Busy(seen) = b.acquire("tenants/1").await.expect("read") else {
            panic!("a plain acquire took an owned key")
        };
        assert_eq!(seen.expires_at, record_at(&store, "sessions/a").expires_at);
        // Inspect tells the same.
        let inspected = b
            .inspect("tenants/1")
            .await
            .expect("read")
            .expect("a record");
        assert!(!inspected.free);
        // So does a listing, past the key's own stamp.
        let listed = b.list("").await.expect("a listing");
        let key = listed
            .leases
            .iter()
            .find(|l| l.key == "tenants/1")
            .expect("the key");
        assert!(key.free(), "its own stamp has passed");
        assert_eq!(listed.held(key), Some(true), "held by its session");
        "done"
    });
    assert_eq!(out, "done");
    // Closed: the session's lease released, the key free at once for a
    // plain acquire, with the next token.
    assert!(record_at(&store, "sessions/a").released);
    assert!(sa.owns("tenants/1").is_none());
    let AcquireOutcome::Acquired(lease) = block_on(b.acquire("tenants/1")).expect("acquire") else {
        panic!("the key of a closed session stayed busy")
    };
    assert_eq!(lease.token, 2);
    drop(sb);
}

#[test]
fn a_lapsed_session_loses_its_keys_and_another_session_takes_them_with_the_next_token() {
    let (store, clock) = world();
    let (a, b) = (
        client(store.clone(), &clock, "a"),
        client(store.clone(), &clock, "b"),
    );
    let (sa, campaign_a) = a.session("sessions/a");
    let (sb, campaign_b) = b.session("sessions/b");
    // a's campaign runs until a owns the key, then is starved (a paused
    // process): its session lapses.
    let mut campaign_a = Box::pin(campaign_a);
    block_on(async {
        let work = std::pin::pin!(async {
            sa.until_open().await.expect("a opens");
            owned(sa.own("tenants/1").await)
        });
        let mut work = work;
        std::future::poll_fn(|cx| {
            let _ = campaign_a.as_mut().poll(cx);
            work.as_mut().poll(cx)
        })
        .await
    });
    assert_eq!(sa.owns("tenants/1"), Some(1));
    with_session(&sb, campaign_b, async {
        sb.until_open().await.expect("b opens");
        let seen = busy(sb.own("tenants/1").await);
        assert_eq!(seen.holder, "a");
        // Past a's session's expiry (a's campaign is not polled).
        pass(&clock, TTL + Duration::from_secs(2)).await;
        assert_eq!(
            sa.owns("tenants/1"),
            None,
            "a key trusted after its session lapsed"
        );
        assert!(!sa.is_open());
        // A listing says so: the session's term is over, its key free.
        let listed = b.list("").await.expect("a listing");
        let seen = listed.sessions();
        let a_seen = seen
            .iter()
            .find(|s| s.key == "sessions/a")
            .expect("a's session");
        assert_eq!(
            (a_seen.live, &a_seen.owns[..]),
            (Some(false), &["tenants/1".to_string()][..])
        );
        let key = listed
            .leases
            .iter()
            .find(|l| l.key == "tenants/1")
            .expect("the key");
        assert_eq!(listed.held(key), Some(false));
        assert_eq!(owned(sb.own("tenants/1").await), 2);
        // Fenced writes: b's with token 2 lands; a, which lost the key,
        // sends nothing, and a write with its old token is refused.
        let wrote = sb
            .fenced_write("tenants/1", "data/tenant-1", b"b".to_vec())
            .await;
        assert!(
            matches!(wrote, Ok(Some(lease_core::FenceOutcome::Accepted { .. }))),
            "{wrote:?}"
        );
        let stale = sa
            .fenced_write("tenants/1", "data/tenant-1", b"a".to_vec())
            .await;
        assert_eq!(stale, Ok(None));
        let mut op = lease_core::protocol::FenceOp::new(
            a.config("tenants/1"),
            entropy(),
            "data/tenant-1",
            1,
            b"a".to_vec(),
        );
        let refused = lease_core::client::drive(&mut op, &store, &clock, |_| {}).await;
        assert!(
            matches!(
                refused,
                Ok(lease_core::FenceOutcome::Rejected { current: 2 })
            ),
            "{refused:?}"
        );
        // Owned again: answered from memory.
        assert_eq!(owned(sb.own("tenants/1").await), 2);
        // Given back: a tombstone, the token kept.
        let released = sb.disown("tenants/1").await.expect("release");
        assert_eq!(released, ReleaseOutcome::Released { token: 2 });
        assert!(record_at(&store, "tenants/1").released);
        assert_eq!(sb.owns("tenants/1"), None);
    });
}

#[test]
fn breaking_a_session_frees_its_keys() {
    let (store, clock) = world();
    let (a, b) = (
        client(store.clone(), &clock, "a"),
        client(store.clone(), &clock, "op"),
    );
    let (sa, campaign) = a.session("sessions/a");
    with_session(&sa, campaign, async {
        sa.until_open().await.expect("a opens");
        owned(sa.own("tenants/1").await);
        owned(sa.own("tenants/2").await);
        let seen = b
            .inspect("sessions/a")
            .await
            .expect("read")
            .expect("a record");
        b.break_lease("sessions/a", seen.etag.as_str(), None)
            .await
            .expect("break");
        // Both keys are free to another client at once.
        for key in ["tenants/1", "tenants/2"] {
            let got = b.acquire(key).await.expect("acquire");
            assert!(
                matches!(got, AcquireOutcome::Acquired(ref l) if l.token == 2),
                "{key}: {got:?}"
            );
        }
        // a learns of the break at its next renewal: from then on it owns
        // nothing (the fencing tokens cover the time before).
        pass(&clock, TTL / 2).await;
        assert!(sa.owned().is_empty(), "{:?}", sa.owned());
    });
}

#[test]
fn a_key_handed_over_is_the_successors_at_once_and_busy_to_others_for_the_grace() {
    let (store, clock) = world();
    let (a, b, c) = (
        client(store.clone(), &clock, "a"),
        client(store.clone(), &clock, "b"),
        client(store.clone(), &clock, "c"),
    );
    let (sa, campaign_a) = a.session("sessions/a");
    let (sb, campaign_b) = b.session("sessions/b");
    let grace = lease_core::protocol::HANDOFF_GRACE;
    let work = async {
        sa.until_open().await.expect("a opens");
        sb.until_open().await.expect("b opens");
        assert_eq!(owned(sa.own("tenants/1").await), 1);
        assert_eq!(owned(sa.own("tenants/2").await), 1);
        let released = sa.hand_over("tenants/1", "b").await.expect("hand over");
        assert_eq!(released, ReleaseOutcome::Released { token: 1 });
        assert_eq!(sa.owns("tenants/1"), None, "a's no longer");
        // The release names the successor; to anyone else the key is busy
        // for the grace, and says whose it is to be.
        let record = record_at(&store, "tenants/1");
        assert!(record.released);
        assert_eq!(record.meta.get("handoff_to").map(String::as_str), Some("b"));
        let AcquireOutcome::Busy(seen) = c.acquire("tenants/1").await.expect("read") else {
            panic!("another took a key handed to b")
        };
        assert_eq!(seen.handoff_to.as_deref(), Some("b"));
        // The successor takes it at once, with the next token, under its
        // own session.
        assert_eq!(owned(sb.own("tenants/1").await), 2);
        let by = record_at(&store, "tenants/1").owned_by.expect("owned");
        assert_eq!(by.key, "sessions/b");
        // A successor that does not come: the key is free to anyone once
        // the grace is over.
        sa.hand_over("tenants/2", "nobody")
            .await
            .expect("hand over");
        assert!(matches!(
            c.acquire("tenants/2").await.expect("read"),
            AcquireOutcome::Busy(_)
        ));
        pass(&clock, grace + Duration::from_secs(1)).await;
        let got = c.acquire("tenants/2").await.expect("acquire");
        assert!(
            matches!(got, AcquireOutcome::Acquired(ref l) if l.token == 2),
            "{got:?}"
        );
        sa.close();
        sb.close();
    };
    block_on(join(join(campaign_a, campaign_b), work));
}

/// `meta` of as many entries as a configuration may give, of `len` bytes
/// each.
fn full_meta(len: usize) -> std::collections::BTreeMap<String, String> {
    (0..MAX_META_ENTRIES - 1)
        .map(|i| (format!("k{i:02}"), "v".repeat(len)))
        .collect()
}

/// Each of `full_meta`'s entries as long as a record leaves room for
/// beside a short holder name and a session's key: `"kNN":"…",`.
const FULL: usize = (CALLER_BYTES - 64) / (MAX_META_ENTRIES - 1) - 9;

/// A client whose records carry about all the `meta` it may give: the
/// break's and the handoff's entries still fit, so every record stays
/// readable (with 16 entries, or entries too long, a break or a handoff
/// left a record nobody could read, the key stuck until an operator
/// deleted it).
fn with_full_meta(
    store: MemStore,
    clock: &VirtualClock,
    holder: &str,
) -> Leases<MemStore, VirtualClock> {
    let mut template = LeaseConfig::new("", holder, TTL);
    template.meta = full_meta(FULL);
    Leases::with_config(store, clock.clone(), template, false, entropy).expect("valid settings")
}

#[test]
fn records_with_all_the_meta_a_client_may_give_stay_readable_through_a_handoff_and_a_break() {
    // One entry more than the records leave room for, more bytes, or a
    // name the library writes, is refused with the settings.
    let mut template = LeaseConfig::new("k", "a", TTL);
    template.meta = full_meta(1);
    template.meta.insert("one more".into(), "v".into());
    assert_eq!(template.validate(), Err(ConfigError::Meta));
    template.meta = full_meta(MAX_STRING_BYTES);
    assert!(matches!(
        template.validate(),
        Err(ConfigError::TooLarge { .. })
    ));
    template.meta = full_meta(FULL);
    assert_eq!(template.validate(), Ok(()));
    // A session's key is named in its keys' records: 512 bytes at most.
    let mut member = LeaseConfig::new("k", "a", TTL);
    member.owned_by = Some(lease_core::record::OwnedBy {
        key: "s".repeat(MAX_STRING_BYTES + 1),
        token: 1,
    });
    assert_eq!(member.validate(), Err(ConfigError::SessionKey));
    member.owned_by = Some(lease_core::record::OwnedBy {
        key: String::new(),
        token: 1,
    });
    assert_eq!(member.validate(), Err(ConfigError::SessionKey));
    for name in RESERVED_META {
        template.meta = [(name.to_string(), "x".to_string())].into();
        assert_eq!(template.validate(), Err(ConfigError::Meta), "{name}");
    }
    let (store, clock) = world();
    let (a, operator) = (
        with_full_meta(store.clone(), &clock, "a"),
        with_full_meta(store.clone(), &clock, "operator"),
    );
    let c = client(store.clone(), &clock, "c");
    let (sa, campaign) = a.session("sessions/a");
    let work = async {
        sa.until_open().await.expect("a opens");
        assert_eq!(owned(sa.own("tenants/1").await), 1);
        assert_eq!(owned(sa.own("tenants/2").await), 1);
        // A successor no holder can be named is refused before any
        // request, and the key is kept.
        for bad in ["", &"b".repeat(MAX_STRING_BYTES + 1)] {
            let refused = sa.hand_over("tenants/2", bad).await;
            assert!(
                matches!(
                    refused,
                    Err(LeaseError::Config {
                        error: ConfigError::Holder,
                        ..
                    })
                ),
                "{refused:?}"
            );
        }
        assert_eq!(sa.owns("tenants/2"), Some(1));
        let successor = "b".repeat(MAX_STRING_BYTES);
        sa.hand_over("tenants/1", &successor)
            .await
            .expect("hand over");
        let record = record_at(&store, "tenants/1");
        assert_eq!(record.meta.len(), MAX_META_ENTRIES);
        let AcquireOutcome::Busy(seen) = c.acquire("tenants/1").await.expect("readable") else {
            panic!("another took a key handed over")
        };
        assert_eq!(seen.handoff_to.as_deref(), Some(successor.as_str()));
        sa.close();
    };
    block_on(join(campaign, work));
    // An operator's break adds its name to its own full meta.
    let AcquireOutcome::Acquired(held) = block_on(c.acquire("tenants/3")).expect("acquire") else {
        panic!("a free key busy")
    };
    let seen = block_on(operator.inspect("tenants/3"))
        .expect("read")
        .expect("a record");
    block_on(operator.break_lease("tenants/3", seen.etag.as_str(), None)).expect("broken");
    assert_eq!(record_at(&store, "tenants/3").meta.len(), MAX_META_ENTRIES);
    let AcquireOutcome::Acquired(next) = block_on(c.acquire("tenants/3")).expect("readable") else {
        panic!("a broken lease busy")
    };
    assert!(next.token > held.token);
}

/// Another client's record may give its holder and acquisition id 512
/// bytes each of characters JSON escapes six times (6 KB of a readable
/// record): an operator with all the `meta` it may give breaks it, and
/// the record left is still one every client reads, whatever the
/// holder's length (the break keeps the broken names only when they fit
/// once stamped; kept at the longest, it was 9 KB, the key stuck).
#[test]
fn a_break_of_a_record_with_the_longest_names_leaves_a_readable_record() {
    let acquisition = "\u{1}".repeat(MAX_STRING_BYTES);
    for len in 0..=MAX_STRING_BYTES {
        let (store, clock) = world();
        let operator = with_full_meta(store.clone(), &clock, "operator");
        let holder = format!("h{}", "\u{1}".repeat(len.saturating_sub(1)));
        let expires = (clock.now().wall.0 + 3_600_000) as f64 / 1000.0;
        let body = serde_json::json!({
            "v": 1, "token": 7, "expires_at": expires, "holder": holder,
            "session": acquisition, "nonce": "n", "protocol": "cas",
        });
        store.apply(&StoreOp::Put {
            key: "k".into(),
            body: body.to_string().into_bytes(),
            condition: PutCondition::None,
        });
        let seen = block_on(operator.inspect("k"))
            .expect("readable")
            .expect("a record");
        assert_eq!(seen.record.holder, holder);
        block_on(operator.break_lease("k", seen.etag.as_str(), None)).expect("broken");
        let (_, left) = store.get("k").expect("a record");
        assert!(
            left.len() <= MAX_RECORD_BYTES,
            "{len}: {} bytes",
            left.len()
        );
        let broken = record_at(&store, "k");
        assert!(broken.released, "{broken:?}");
        assert_eq!(broken.meta.len(), MAX_META_ENTRIES);
        if len == MAX_STRING_BYTES {
            assert!(
                broken.holder.is_empty(),
                "names that do not fit are not kept"
            );
            let c = client(store.clone(), &clock, "c");
            let got = block_on(c.acquire("k")).expect("readable");
            assert!(
                matches!(got, AcquireOutcome::Acquired(ref l) if l.token == 8),
                "{got:?}"
            );
        }
    }
}

#[test]
fn sessions_need_the_cas_protocol_and_cannot_own_their_own_key() {
    let (store, clock) = world();
    let settings = Settings::new("a")
        .ttl(TTL)
        .probe(false)
        .protocol(Protocol::Epochs);
    let epochs = Leases::new(store.clone(), clock.clone(), settings, entropy).expect("valid");
    let (se, campaign) = epochs.session("sessions/e");
    with_session(&se, campaign, async {
        se.until_open().await.expect("opens");
        let refused = se.own("tenants/1").await;
        assert!(
            matches!(
                refused,
                Err(LeaseError::Config {
                    error: ConfigError::SessionsNeedCas(Protocol::Epochs),
                    ..
                })
            ),
            "{refused:?}"
        );
    });
    let a = client(store.clone(), &clock, "a");
    let (sa, campaign) = a.session("sessions/a");
    with_session(&sa, campaign, async {
        sa.until_open().await.expect("opens");
        let refused = sa.own("sessions/a").await;
        assert!(
            matches!(
                refused,
                Err(LeaseError::Config {
                    error: ConfigError::OwnsItsSession,
                    ..
                })
            ),
            "{refused:?}"
        );
        // Before it opens, or once it is closed: nothing is sent.
        sa.close();
        assert_eq!(sa.own("tenants/1").await, Ok(OwnOutcome::NoSession));
    });
    assert!(store.get("tenants/1").is_none());
}

/// The cost the issue names: one process holding 1,000 keys for ten
/// minutes, as owned keys of one session and as 1,000 leases of their own
/// each renewed every ttl/3 (the figure in BENCHMARKS.md).
#[test]
fn a_thousand_owned_keys_cost_one_renewal_per_interval() {
    const KEYS: usize = 1000;
    let (store, clock) = world();
    let calls = Arc::new(AtomicU64::new(0));
    let counted = Counted(store.clone(), calls.clone());
    let a = client(counted, &clock, "a");
    let (sa, campaign) = a.session("sessions/a");
    let (taking, holding) = with_session(&sa, campaign, async {
        sa.until_open().await.expect("opens");
        calls.store(0, Ordering::SeqCst);
        for k in 0..KEYS {
            owned(sa.own(&format!("tenants/{k}")).await);
        }
        let taking = calls.swap(0, Ordering::SeqCst);
        pass(&clock, Duration::from_secs(600)).await;
        assert_eq!(sa.owned().len(), KEYS);
        (taking, calls.load(Ordering::SeqCst))
    });
    // Taking each free key: a GET and a PUT.
    assert_eq!(taking, 2 * KEYS as u64);
    // Holding them ten minutes: the session's renewals only, one every
    // ttl/3 (a request or so either way at the ends).
    assert!(
        (59..=61).contains(&holding),
        "{holding} requests in ten minutes"
    );
    // The same keys as leases of their own: each renewed every ttl/3.
    let per_key = 600 / (TTL.as_secs() / 3) * KEYS as u64;
    assert!(per_key >= 100 * holding, "{per_key} against {holding}");
    println!(
        "1,000 keys held ten minutes: {holding} requests as owned keys of one session, \
         {per_key} as leases of their own ({}x)",
        per_key / holding
    );
}

/// Owned records are format version 2, which clients that know only
/// version 1 refuse (an unreadable record is never taken over), so an
/// older client cannot judge an owned key by its own stamp; plain records
/// stay version 1.
#[test]
fn owned_records_are_a_version_older_clients_refuse() {
    let (store, clock) = world();
    let a = client(store.clone(), &clock, "a");
    let (sa, campaign) = a.session("sessions/a");
    with_session(&sa, campaign, async {
        sa.until_open().await.expect("opens");
        owned(sa.own("tenants/1").await);
        let (_, body) = store.get("tenants/1").expect("the key");
        assert!(String::from_utf8(body).unwrap().contains(r#""v":2"#));
        let (_, body) = store.get("sessions/a").expect("the session");
        assert!(String::from_utf8(body).unwrap().contains(r#""v":1"#));
    });
}

/// A session record that cannot be read does not free the keys that name
/// it: they are busy (for a ttl from the read), whatever their own stamps
/// say; inspect shows the stored record (not released) and its state.
#[test]
fn an_unreadable_session_keeps_its_keys_busy() {
    use lease_core::store::PutCondition;
    use lease_core::StoreOp;
    let (store, clock) = world();
    let (a, b) = (
        client(store.clone(), &clock, "a"),
        client(store.clone(), &clock, "b"),
    );
    let (sa, campaign) = a.session("sessions/a");
    with_session(&sa, campaign, async {
        sa.until_open().await.expect("opens");
        owned(sa.own("tenants/1").await);
    });
    // Closed (released), then overwritten with junk by another tool.
    store.apply(&StoreOp::Put {
        key: "sessions/a".into(),
        body: b"not a lease".to_vec(),
        condition: PutCondition::None,
    });
    block_on(pass(&clock, TTL * 2));
    let got = block_on(b.acquire("tenants/1")).expect("a read");
    assert!(matches!(got, AcquireOutcome::Busy(_)), "{got:?}");
    let seen = block_on(b.inspect("tenants/1"))
        .expect("read")
        .expect("a record");
    assert!(!seen.free && !seen.record.released, "{seen:?}");
}
