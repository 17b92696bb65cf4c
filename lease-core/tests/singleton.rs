//! The scheduled-job guard (`lease_core::client::singleton`) and the holding loop
//! under it, against the in-memory store on a virtual clock.

mod support;

use lease_core::client::singleton::{Singleton, SingletonError, SingletonOutcome, Step};
use lease_core::config::LeaseConfig;
use lease_core::mem::{MemStore, VirtualClock};
use lease_core::protocol::machine::LostReason;
use lease_core::record::LeaseRecord;
use lease_core::store::{PutCondition, StoreOp};
use std::future::pending;
use std::time::Duration;
use support::{entropy, mem_world as world};

const KEY: &str = "locks/nightly";

fn singleton(
    holder: &str,
    store: &MemStore,
    clock: &VirtualClock,
) -> Singleton<MemStore, VirtualClock> {
    let cfg = LeaseConfig::new(KEY, holder, Duration::from_secs(30));
    Singleton::new(cfg, store.clone(), clock.clone(), entropy)
}

fn record(store: &MemStore) -> LeaseRecord {
    support::record_at(store, KEY)
}

#[test]
fn runs_the_job_with_the_token_then_releases() {
    let (store, clock) = world();
    let a = singleton("a", &store, &clock);
    let mut steps = Vec::new();
    let out = pollster::block_on(a.run(
        |token| async move { Ok::<_, String>(token * 10) },
        |s| steps.push(format!("{s:?}")),
    ));
    assert_eq!(
        out.unwrap(),
        SingletonOutcome::Ran {
            token: 1,
            output: 10
        }
    );
    assert!(a.store_checked(), "the probe ran and passed");
    assert!(steps[0].starts_with("Acquired { token: 1 }"), "{steps:?}");
    let r = record(&store);
    assert!(r.released && r.token == 1 && r.holder == "a", "{r:?}");
    // The next tick acquires with the next token.
    let out = pollster::block_on(a.run(|token| async move { Ok::<_, String>(token) }, |_| {}));
    assert_eq!(
        out.unwrap(),
        SingletonOutcome::Ran {
            token: 2,
            output: 2
        }
    );
}

#[test]
fn a_second_run_is_skipped_while_the_first_holds() {
    let (store, clock) = world();
    let a = singleton("a", &store, &clock);
    let b = singleton("b", &store, &clock).without_probe();
    let mut skipped = None;
    let out = pollster::block_on(a.run(
        |token| {
            // While a's job runs, b's tick fires.
            let b_out = pollster::block_on(b.run(
                |_| async { Ok::<_, String>("b ran") },
                |s| {
                    if let Step::Skipped(busy) = s {
                        skipped = Some(busy.holder.clone());
                    }
                },
            ));
            async move { Ok::<_, String>((token, b_out.unwrap())) }
        },
        |_| {},
    ));
    let SingletonOutcome::Ran {
        token: 1,
        output:
            (
                1,
                SingletonOutcome::Skipped {
                    holder,
                    token,
                    expires_at_ms,
                },
            ),
    } = out.unwrap()
    else {
        panic!("a runs, b skips")
    };
    assert_eq!((holder.as_str(), token), ("a", 1));
    assert!(expires_at_ms >= 1_790_000_030_000, "{expires_at_ms}");
    assert_eq!(skipped.as_deref(), Some("a"));
}

#[test]
fn a_failed_job_still_releases() {
    let (store, clock) = world();
    let a = singleton("a", &store, &clock).without_probe();
    let out = pollster::block_on(a.run(|_| async { Err::<(), _>("disk full") }, |_| {}));
    let err = out.unwrap_err();
    assert_eq!(
        (err.kind(), err.to_string().as_str()),
        ("JobFailed", "disk full")
    );
    assert!(record(&store).released);
}

#[test]
fn a_lost_lease_stops_the_job() {
    let (store, clock) = world();
    let a = singleton("a", &store, &clock).without_probe();
    let mut lost_seen = false;
    let out = pollster::block_on(a.run(
        |_| {
            // An operator hands the lease to someone else mid-job; the job
            // itself never finishes on its own.
            let mut other = record(&store);
            other.holder = "b".into();
            other.token += 1;
            other.nonce = "other".into();
            store.apply(&StoreOp::Put {
                key: KEY.into(),
                body: other.encode(),
                condition: PutCondition::None,
            });
            pending::<Result<(), String>>()
        },
        |s| {
            lost_seen |= matches!(
                s,
                Step::Hold(lease_core::protocol::machine::Event::Lost { .. })
            )
        },
    ));
    let err = out.unwrap_err();
    assert!(
        matches!(
            err,
            SingletonError::LeaseLost {
                token: 1,
                reason: LostReason::TakenBy { .. }
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.kind(), "LeaseLost");
    assert!(lost_seen);
    assert_eq!(
        record(&store).holder,
        "b",
        "the new holder's record is untouched"
    );
}
