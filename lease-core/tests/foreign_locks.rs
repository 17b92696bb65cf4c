//! Other tools' lock objects at a lease key, on the in-memory store:
//! Litestream's lease (`lock.json`) keeps every protocol's acquire busy
//! until its `expires_at` by the store's clock, and is taken over after
//! it by cas and the mutex (epochs, which cannot overwrite, refuses the
//! key then); Terraform's state lock (`.tflock`) has no expiry and keeps
//! every protocol busy for good. Inspect and the listing name the holder.

mod support;

use lease_core::record::{ForeignLock, HELD_UNTIL_BROKEN};
use lease_core::store::{PutCondition, ReplyKind};
use lease_core::{
    AcquireOutcome, Busy, LeaseError, LeaseRecord, Leases, MemStore, Protocol, Settings, StoreOp,
    UnixMillis, VirtualClock,
};
use pollster::block_on;
use std::time::Duration;
use support::{entropy, mem_world, record_at, EPOCH};

/// Litestream's lock, expiring 30 s after [`EPOCH`] (2026-09-21T14:13:20Z).
const LITESTREAM: &str =
    r#"{"generation":7,"expires_at":"2026-09-21T14:13:50.000000123Z","owner":"db-1:4242"}"#;
const LITESTREAM_EXPIRES: UnixMillis = UnixMillis(1_790_000_030_000);

/// Terraform's lock, taken 1,000 s before [`EPOCH`].
const TFLOCK: &str = r#"{"ID":"08887bf0-8171-6457-9f43-9375d2070577","Operation":"OperationTypeApply","Info":"","Who":"ci@runner-4","Version":"1.10.2","Created":"2026-09-21T13:56:40Z","Path":"infra/terraform.tfstate"}"#;

fn put(store: &MemStore, key: &str, body: &str) {
    let reply = store.apply(&StoreOp::Put {
        key: key.into(),
        body: body.as_bytes().to_vec(),
        condition: PutCondition::IfAbsent,
    });
    assert!(matches!(reply.kind, ReplyKind::Written { .. }), "{reply:?}");
}

fn client(
    store: &MemStore,
    clock: &VirtualClock,
    protocol: Protocol,
) -> Leases<MemStore, VirtualClock> {
    let settings = Settings::new("ours")
        .ttl(Duration::from_secs(30))
        .protocol(protocol)
        .probe(false);
    Leases::new(store.clone(), clock.clone(), settings, entropy).expect("valid settings")
}

fn busy(outcome: Result<AcquireOutcome, LeaseError>) -> Busy {
    match outcome {
        Ok(AcquireOutcome::Busy(b)) => b,
        other => panic!("expected Busy, got {other:?}"),
    }
}

#[test]
fn every_protocol_waits_out_a_litestream_lock_and_cas_and_mutex_take_it_over() {
    for protocol in Protocol::ALL {
        let (store, clock) = mem_world();
        let key = "db/lock.json";
        put(&store, key, LITESTREAM);
        let leases = client(&store, &clock, protocol);
        let b = busy(block_on(leases.acquire(key)));
        assert_eq!(
            (b.holder.as_str(), b.token, b.expires_at, b.foreign),
            (
                "db-1:4242",
                7,
                LITESTREAM_EXPIRES,
                Some(ForeignLock::Litestream)
            ),
            "{protocol}"
        );
        assert_eq!(b.expires_in, Some(Duration::from_secs(30)), "{protocol}");
        // At its expiry to the millisecond, by the store's clock: still busy.
        clock.advance(Duration::from_secs(30));
        assert_eq!(clock.wall(), LITESTREAM_EXPIRES);
        busy(block_on(leases.acquire(key)));
        assert!(
            store
                .get(key)
                .is_some_and(|(_, body)| body == LITESTREAM.as_bytes()),
            "{protocol}: the lock is untouched while it lives"
        );
        clock.advance(Duration::from_millis(1));
        match (protocol, block_on(leases.acquire(key))) {
            (Protocol::Epochs, Err(LeaseError::ProtocolMismatch { theirs, .. })) => {
                assert!(theirs.contains("Litestream"), "{theirs}");
            }
            (Protocol::Cas | Protocol::Mutex, Ok(AcquireOutcome::Acquired(lease))) => {
                let record = record_at(&store, key);
                assert_eq!((record.holder.as_str(), record.foreign), ("ours", None));
                // Taken over as a simple client's record is: a token from the
                // store's time, above the lock's generation.
                assert!(
                    lease.token >= LITESTREAM_EXPIRES.0,
                    "{protocol}: {}",
                    lease.token
                );
            }
            (_, other) => panic!("{protocol}: {other:?}"),
        }
    }
}

#[test]
fn a_terraform_lock_keeps_every_protocol_busy_for_good() {
    for protocol in Protocol::ALL {
        let (store, clock) = mem_world();
        let key = "infra/terraform.tfstate.tflock";
        put(&store, key, TFLOCK);
        let leases = client(&store, &clock, protocol);
        for _ in 0..2 {
            let b = busy(block_on(leases.acquire(key)));
            assert_eq!(
                (b.holder.as_str(), b.foreign, b.expires_at),
                (
                    "ci@runner-4",
                    Some(ForeignLock::Terraform),
                    HELD_UNTIL_BROKEN
                ),
                "{protocol}"
            );
            assert!(b.held_until_broken());
            assert_eq!(b.to_json()["expires_at_ms"], serde_json::Value::Null);
            // Ten years on, by the store's clock.
            clock.advance(Duration::from_secs(10 * 365 * 86_400));
        }
        // A wait gives up busy; the lock is never touched.
        let waited = block_on(leases.acquire_within(key, Duration::from_secs(20)));
        busy(waited);
        assert!(store
            .get(key)
            .is_some_and(|(_, body)| body == TFLOCK.as_bytes()));
    }
}

#[test]
fn inspect_and_the_listing_name_the_foreign_holder() {
    let (store, clock) = mem_world();
    put(&store, "locks/db/lock.json", LITESTREAM);
    put(&store, "locks/state.tflock", TFLOCK);
    put(&store, "locks/notes.txt", "not a lock");
    for protocol in Protocol::ALL {
        let leases = client(&store, &clock, protocol);
        let seen = block_on(leases.inspect("locks/db/lock.json"))
            .unwrap()
            .expect("an object");
        assert_eq!(
            (seen.record.foreign, seen.record.holder.as_str(), seen.free),
            (Some(ForeignLock::Litestream), "db-1:4242", false),
            "{protocol}"
        );
        let seen = block_on(leases.inspect("locks/state.tflock"))
            .unwrap()
            .expect("an object");
        assert!(seen.record.held_until_broken() && !seen.free, "{protocol}");
        let json = lease_core::protocol::status_json("locks/state.tflock", Some(&seen));
        assert_eq!(
            (
                &json["foreign_lock"],
                &json["held_until_broken"],
                &json["expires"]
            ),
            (
                &serde_json::json!("terraform"),
                &serde_json::json!(true),
                &serde_json::Value::Null
            )
        );
    }
    let leases = client(&store, &clock, Protocol::Cas);
    let listed = block_on(leases.list("locks/")).unwrap();
    assert_eq!(listed.others, ["locks/notes.txt"]);
    let found: Vec<_> = listed
        .leases
        .iter()
        .map(|l| {
            (
                l.key.as_str(),
                l.protocol,
                l.record.foreign,
                l.record.holder.as_str(),
                l.time_left(),
                l.free(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "locks/db/lock.json",
                None,
                Some(ForeignLock::Litestream),
                "db-1:4242",
                Some(Duration::from_secs(30)),
                false
            ),
            (
                "locks/state.tflock",
                None,
                Some(ForeignLock::Terraform),
                "ci@runner-4",
                None,
                false
            ),
        ]
    );
    // The takeover of a lapsed Litestream lock is then shown as ours.
    clock.advance(Duration::from_secs(31));
    assert!(matches!(
        block_on(leases.acquire("locks/db/lock.json")),
        Ok(AcquireOutcome::Acquired(_))
    ));
    let r: LeaseRecord = record_at(&store, "locks/db/lock.json");
    assert_eq!((r.foreign, r.protocol.as_deref()), (None, Some("cas")));
    assert!(r.token >= EPOCH.0 + 31_000, "{}", r.token);
}
