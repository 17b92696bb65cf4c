//! The epoch-objects and create/delete mutex protocols (`docs/design.md` §7) and the
//! capability probe (`docs/design.md` §8), against the in-memory store, with the
//! calls each operation makes asserted.

mod support;

use lease_core::protocol::BreakRequest;
use lease_core::protocol::CallId;
use lease_core::protocol::{Check, Checked, Probe};
use lease_core::record::epoch_key;
use lease_core::store::{PutCondition, ReplyKind, TransportErrorKind};
use lease_core::{
    AcquireOutcome, BreakOutcome, Claim, Event, Lease, LeaseError, LostReason, Observation,
    ReleaseOutcome, RenewOutcome,
};
use lease_core::{
    Clock, ConfigError, Elector, Entropy, Etag, LeaseConfig, LeaseOp, LeaseRecord, Machine,
    MemStore, Mono, Output, ProbeReport, Protocol, Store, StoreOp, StoreReply, UnixMillis,
    VirtualClock,
};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;
use support::lagging::LaggingListings;
use support::{acquired, renewed};

const KEY: &str = "locks/job";
const TTL: Duration = Duration::from_secs(30);

/// What the store does with one call, scripted in order (then it passes).
#[derive(Clone, Debug)]
enum Fault {
    /// Apply the call and answer truthfully.
    Pass,
    /// Hold the call in the network, not applied yet; the sender times out.
    Hold,
    /// The oldest held call lands first; then this one passes.
    LandHeld,
    /// Another client's write lands first; then this call passes.
    Before(StoreOp),
    /// Other clients' writes land first, in order; then this call passes.
    BeforeAll(Vec<StoreOp>),
    /// The call is not applied; the store answers this.
    Reply(ReplyKind),
    /// The call is applied, but its reply is lost; the sender times out.
    Lost,
    /// The store is slow: the clock advances, then the call passes.
    Slow(Duration),
    /// The call (a LIST) is answered by a replica that has not seen this
    /// key, or any that sorts after it, yet: the listing leaves them out.
    ListingMisses(String),
}

/// The in-memory store, with a log of calls, an optional "ignore every
/// condition" mode (a store like s3rver), an optional lost reply and
/// scripted faults.
struct Logged {
    store: MemStore,
    clock: VirtualClock,
    log: RefCell<Vec<String>>,
    ignore_conditions: bool,
    /// Apply the next write, then answer 500.
    fail_next_write: Cell<bool>,
    /// Listings in reverse order (no store promises an order to rely on).
    reverse_listings: bool,
    faults: RefCell<VecDeque<Fault>>,
    held: RefCell<VecDeque<StoreOp>>,
}

impl Logged {
    fn new() -> Logged {
        let (store, clock) = support::mem_world();
        Logged {
            store,
            clock,
            log: RefCell::default(),
            ignore_conditions: false,
            fail_next_write: Cell::new(false),
            reverse_listings: false,
            faults: RefCell::default(),
            held: RefCell::default(),
        }
    }

    fn script(&self, faults: impl IntoIterator<Item = Fault>) {
        self.faults.borrow_mut().extend(faults);
    }

    fn ignoring() -> Logged {
        Logged {
            ignore_conditions: true,
            ..Logged::new()
        }
    }

    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.borrow_mut())
    }

    fn run<M: Machine>(&self, machine: M) -> M::Outcome {
        support::run(self, &self.clock, machine)
    }

    /// The keys the store holds, but for the epochs marker (which an
    /// epochs acquisition leaves at the lease key for good).
    fn keys(&self) -> Vec<String> {
        let marker = |k: &String| {
            self.store
                .get(k)
                .is_some_and(|(_, body)| body == lease_core::record::EPOCHS_MARKER)
        };
        self.store
            .keys("")
            .into_iter()
            .filter(|k| !marker(k))
            .collect()
    }

    /// Marks the key as an epochs client does on its first acquisition.
    fn mark(&self) {
        self.store.apply(&StoreOp::Put {
            key: KEY.into(),
            body: lease_core::record::EPOCHS_MARKER.to_vec(),
            condition: PutCondition::IfAbsent,
        });
    }
}

impl Store for Logged {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        let name = match &op {
            StoreOp::Put {
                condition: PutCondition::IfAbsent,
                ..
            } => "PUT-absent",
            StoreOp::Put {
                condition: PutCondition::IfMatch(_),
                ..
            } => "PUT-match",
            StoreOp::Put { .. } => "PUT",
            StoreOp::Delete {
                if_match: Some(_), ..
            } => "DELETE-match",
            other => other.verb(),
        };
        self.log.borrow_mut().push(name.to_string());
        let op = match op {
            StoreOp::Put { key, body, .. } if self.ignore_conditions => StoreOp::Put {
                key,
                body,
                condition: PutCondition::None,
            },
            StoreOp::Delete { key, .. } if self.ignore_conditions => StoreOp::Delete {
                key,
                if_match: None,
            },
            op => op,
        };
        let mut misses = None;
        match self.faults.borrow_mut().pop_front() {
            Some(Fault::ListingMisses(key)) => misses = Some(key),
            Some(Fault::Hold) => {
                self.held.borrow_mut().push_back(op);
                return std::future::ready(StoreReply::transport(
                    TransportErrorKind::Timeout,
                    "held in the network",
                ));
            }
            Some(Fault::LandHeld) => {
                let held = self.held.borrow_mut().pop_front().expect("a held call");
                self.store.apply(&held);
            }
            Some(Fault::Slow(d)) => self.clock.advance(d),
            Some(Fault::Before(foreign)) => {
                self.store.apply(&foreign);
            }
            Some(Fault::BeforeAll(foreign)) => {
                for op in &foreign {
                    self.store.apply(op);
                }
            }
            Some(Fault::Reply(kind)) => return std::future::ready(StoreReply::new(kind)),
            Some(Fault::Lost) => {
                self.store.apply(&op);
                return std::future::ready(StoreReply::transport(
                    TransportErrorKind::Timeout,
                    "reply lost",
                ));
            }
            Some(Fault::Pass) | None => {}
        }
        let mut reply = self.store.apply(&op);
        if let (true, ReplyKind::Listed { entries, .. }) = (self.reverse_listings, &mut reply.kind)
        {
            entries.reverse();
        }
        if let (Some(missed), ReplyKind::Listed { entries, .. }) = (&misses, &mut reply.kind) {
            entries.retain(|e| e.key < *missed);
        }
        if op.is_write() && self.fail_next_write.replace(false) {
            reply.kind = ReplyKind::ServerError {
                status: 500,
                code: Some("InternalError".into()),
            };
        }
        std::future::ready(reply)
    }
}

fn config(protocol: Protocol, holder: &str) -> LeaseConfig {
    let mut cfg = LeaseConfig::new(KEY, holder, TTL);
    cfg.protocol = protocol;
    cfg
}

fn seed(n: u128) -> Entropy {
    Entropy::from_seed(n)
}

fn record_at(s: &Logged, key: &str) -> LeaseRecord {
    support::record_at(&s.store, key)
}

// ---- epochs ----

#[test]
fn epochs_acquire_busy_renew_release_and_take_over() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    assert_eq!((a.token, a.key.as_str()), (1, epoch_key(KEY, 1).as_str()));
    // LIST (empty) + mark the key + create epoch 1 + LIST to confirm it
    // is the newest.
    assert_eq!(s.take_log(), ["LIST", "PUT-absent", "PUT-absent", "LIST"]);
    assert_eq!(
        s.store.get(KEY).map(|(_, body)| body),
        Some(lease_core::record::EPOCHS_MARKER.to_vec()),
        "the key is marked"
    );

    match s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(2))) {
        Ok(AcquireOutcome::Busy(busy)) => assert_eq!((busy.holder.as_str(), busy.token), ("a", 1)),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["LIST", "GET"], "busy spends no write");

    // A renewal is the next epoch; the previous one stays right below it
    // (cleanup keeps the epoch below the newest).
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(3), a)));
    assert_eq!(a.token, 2);
    assert_eq!(s.take_log(), ["PUT-absent", "LIST"]);
    assert_eq!(s.keys(), [epoch_key(KEY, 1), epoch_key(KEY, 2)]);
    assert_eq!(
        record_at(&s, &a.key).acquisition,
        a.acquisition,
        "same session across the renewal"
    );

    assert_eq!(
        s.run(LeaseOp::release(config(Protocol::Epochs, "a"), seed(4), a)),
        Ok(ReleaseOutcome::Released { token: 2 })
    );
    // The release is epoch 3, created as a released record: conditional,
    // and it closes the slot a late renewal of ours could fill. A LIST
    // confirms it is the newest (as for an acquisition); epoch 1 goes.
    assert_eq!(s.take_log(), ["PUT-absent", "LIST", "DELETE"]);
    assert!(record_at(&s, &epoch_key(KEY, 3)).released);
    assert_eq!(s.keys(), [epoch_key(KEY, 2), epoch_key(KEY, 3)]);

    // On a marked key an acquisition costs nothing more: the LIST knows
    // the marker by its size.
    let b = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(5))));
    assert_eq!(b.token, 4);
    assert_eq!(
        s.take_log(),
        ["LIST", "GET", "PUT-absent", "LIST", "DELETE"]
    );
    assert_eq!(s.keys(), [epoch_key(KEY, 3), epoch_key(KEY, 4)]);
}

#[test]
fn epochs_expire_on_the_store_clock() {
    let s = Logged::new();
    acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    s.clock.advance(TTL - Duration::from_secs(2));
    assert!(matches!(
        s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(2))),
        Ok(AcquireOutcome::Busy(_))
    ));
    // The store date has one second of resolution: wait it out.
    s.clock.advance(Duration::from_secs(3));
    let b = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(3))));
    assert_eq!(b.token, 2);
}

/// Finding 4: a release of an epoch someone took over after it expired is
/// `AlreadyLost`, and changes nothing (it used to overwrite the old epoch
/// and say `Released`).
#[test]
fn epochs_release_after_a_takeover_is_already_lost_and_writes_nothing() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    s.clock.advance(TTL + Duration::from_secs(2));
    let b = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(2))));
    assert_eq!(b.token, 2);
    let before: Vec<(String, LeaseRecord)> = s
        .keys()
        .into_iter()
        .map(|k| (k.clone(), record_at(&s, &k)))
        .collect();
    s.take_log();
    match s.run(LeaseOp::release(config(Protocol::Epochs, "a"), seed(3), a)) {
        Ok(ReleaseOutcome::AlreadyLost(LostReason::TakenBy { holder, token, .. })) => {
            assert_eq!((holder.as_str(), token), ("b", 2))
        }
        other => panic!("expected AlreadyLost, got {other:?}"),
    }
    // One conditional create, refused, and the read that names the holder.
    assert_eq!(s.take_log(), ["PUT-absent", "GET"]);
    let after: Vec<(String, LeaseRecord)> = s
        .keys()
        .into_iter()
        .map(|k| (k.clone(), record_at(&s, &k)))
        .collect();
    assert_eq!(before, after, "the store is unchanged");
}

#[test]
fn epochs_renewal_loses_to_a_contender_that_created_the_next_epoch() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    // Someone else holds epoch 2 (as after a takeover a slow renewal missed).
    let mut theirs = a.record.clone();
    theirs.token = 2;
    theirs.holder = "b".into();
    theirs.nonce = "theirs".into();
    s.store.apply(&StoreOp::Put {
        key: epoch_key(KEY, 2),
        body: theirs.encode(),
        condition: PutCondition::IfAbsent,
    });
    s.take_log();
    match s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(2), a)) {
        Ok(RenewOutcome::Lost(LostReason::TakenBy { holder, token, .. })) => {
            assert_eq!((holder.as_str(), token), ("b", 2))
        }
        other => panic!("expected Lost, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["PUT-absent", "GET"]);
}

#[test]
fn a_stale_read_cannot_refill_a_deleted_epoch() {
    // Epoch 1 was read; epochs 2, 3 and 4 came, and 1 and 2 were cleaned
    // up (cleanup keeps the epoch below the newest: 3).
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let seen = match s.run(LeaseOp::inspect(config(Protocol::Epochs, "x"), seed(2))) {
        Ok(Some(seen)) => seen,
        other => panic!("{other:?}"),
    };
    assert!(!seen.free);
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(3), a)));
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(4), a)));
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(6), a)));
    assert_eq!(
        (a.token, s.keys()),
        (4, vec![epoch_key(KEY, 3), epoch_key(KEY, 4)])
    );
    // A contender acting on its old read of epoch 1 (pretend it saw it free)
    // creates epoch 2 again: the confirming LIST shows epoch 4 is live.
    let stale = lease_core::Observation { free: true, ..seen };
    s.take_log();
    match s.run(LeaseOp::acquire_from(
        config(Protocol::Epochs, "x"),
        seed(5),
        &stale,
    )) {
        Ok(AcquireOutcome::Busy(busy)) => assert_eq!((busy.holder.as_str(), busy.token), ("a", 4)),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["PUT-absent", "LIST", "GET", "DELETE-match"]);
    assert_eq!(
        s.keys(),
        [epoch_key(KEY, 3), epoch_key(KEY, 4)],
        "the refilled epoch is deleted again"
    );
}

#[test]
fn epochs_settle_an_ambiguous_create_by_the_nonce() {
    let s = Logged::new();
    s.mark();
    s.fail_next_write.set(true);
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    assert_eq!(a.token, 1, "our create applied before the 500: it is ours");
    assert_eq!(s.take_log(), ["LIST", "PUT-absent", "GET", "LIST"]);
}

#[test]
fn epochs_break_creates_a_released_next_epoch() {
    let s = Logged::new();
    acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let seen = match s.run(LeaseOp::inspect(config(Protocol::Epochs, "op"), seed(2))) {
        Ok(Some(seen)) => seen,
        other => panic!("{other:?}"),
    };
    let request = BreakRequest {
        etag: seen.etag.clone(),
        token_floor: None,
    };
    assert_eq!(
        s.run(LeaseOp::break_lease(
            config(Protocol::Epochs, "op"),
            seed(3),
            request.clone()
        )),
        Ok(BreakOutcome { token: 2 })
    );
    let broken = record_at(&s, &epoch_key(KEY, 2));
    assert!(broken.released);
    // It names what was broken: the holder and session of epoch 1.
    assert_eq!(
        (broken.holder.as_str(), broken.acquisition.as_str()),
        ("a", seen.record.acquisition.as_str())
    );
    assert_eq!(
        s.run(LeaseOp::break_lease(
            config(Protocol::Epochs, "op"),
            seed(4),
            request
        )),
        Err(LeaseError::Changed {
            current: Some(s.store.get(&epoch_key(KEY, 2)).unwrap().0),
            unsettled: Box::default(),
        }),
        "a second break on the old etag is refused"
    );
    let b = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(5))));
    assert_eq!(b.token, 3);
}

// ---- mutex ----

#[test]
fn mutex_acquire_busy_release_and_no_renewal() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    // The LIST: no epochs client uses the key.
    assert_eq!(s.take_log(), ["GET", "PUT-absent"]);
    assert!(matches!(
        s.run(LeaseOp::acquire(config(Protocol::Mutex, "b"), seed(2))),
        Ok(AcquireOutcome::Busy(_))
    ));
    assert_eq!(s.take_log(), ["GET"]);
    assert_eq!(
        s.run(LeaseOp::renew(
            config(Protocol::Mutex, "a"),
            seed(3),
            a.clone()
        )),
        Err(LeaseError::from(ConfigError::NotRenewable(Protocol::Mutex)))
    );
    assert_eq!(
        s.take_log(),
        Vec::<String>::new(),
        "a refused renewal sends nothing"
    );
    assert_eq!(
        s.run(LeaseOp::release(
            config(Protocol::Mutex, "a"),
            seed(4),
            a.clone()
        )),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    assert_eq!(s.take_log(), ["DELETE-match"]);
    assert!(s.keys().is_empty(), "released means deleted");
    acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "b"), seed(5))));
}

#[test]
fn mutex_breaks_a_stale_lock_only_after_its_ttl_by_a_conditional_delete() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    s.clock.advance(TTL + Duration::from_secs(2));
    s.take_log();
    let b = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "b"), seed(2))));
    assert_eq!(s.take_log(), ["GET", "DELETE-match", "PUT-absent"]);
    assert!(
        b.token > a.token,
        "a later second of store time: {} > {}",
        b.token,
        a.token
    );
    // a's late release must not delete b's lock.
    match s.run(LeaseOp::release(config(Protocol::Mutex, "a"), seed(3), a)) {
        Ok(ReleaseOutcome::AlreadyLost(LostReason::TakenBy { holder, .. })) => {
            assert_eq!(holder, "b")
        }
        other => panic!("expected AlreadyLost, got {other:?}"),
    }
    assert_eq!(record_at(&s, KEY).holder, "b");
}

#[test]
fn mutex_ambiguous_release_is_settled_by_a_read() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    s.take_log();
    s.fail_next_write.set(true);
    assert_eq!(
        s.run(LeaseOp::release(
            config(Protocol::Mutex, "a"),
            seed(2),
            a.clone()
        )),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    assert_eq!(s.take_log(), ["DELETE-match", "GET"]);
}

// ---- probe ----

fn probe(s: &Logged) -> ProbeReport {
    s.run(Probe::new(config(Protocol::Cas, "prober"), seed(9)))
        .expect("probe finishes")
}

#[test]
fn the_probe_passes_a_store_that_enforces_conditions_and_cleans_up() {
    let s = Logged::new();
    let report = probe(&s);
    for r in &report.results {
        assert!(r.passed, "{}: {}", r.check.name(), r.detail);
    }
    assert_eq!(report.results.len(), Check::ALL.len());
    for p in Protocol::ALL {
        assert_eq!(report.supports(p), Ok(()));
    }
    assert!(report.key.starts_with("locks/job.probe/"));
    assert!(s.keys().is_empty(), "scratch objects left: {:?}", s.keys());
    assert_eq!(
        s.take_log(),
        [
            "PUT-absent",
            "PUT-absent",
            "PUT-match",
            "PUT-match",
            "PUT-match",
            "GET",
            // The second scratch key, then its listing, one key per page.
            "PUT-absent",
            "LIST",
            "LIST",
            "DELETE-match",
            "DELETE-match",
            "DELETE"
        ]
    );
}

/// A probe that ends with its scratch key still there (here the store
/// refused the conditional DELETE) deletes it, unconditionally, on the way
/// out, and the second scratch key too.
#[test]
fn the_probe_deletes_what_it_left_behind() {
    let s = Logged::new();
    s.script(
        std::iter::repeat_n(Fault::Pass, 10).chain([Fault::Reply(ReplyKind::PreconditionFailed)]),
    );
    let report = probe(&s);
    assert!(!report.passed(Check::DeleteIfMatchCurrent), "{report}");
    assert!(s.keys().is_empty(), "scratch objects left: {:?}", s.keys());
    let log = s.take_log();
    assert_eq!(log[10..], ["DELETE-match", "DELETE", "DELETE"], "{log:?}");
}

#[test]
fn the_probe_flags_a_store_that_ignores_conditions() {
    let s = Logged::ignoring();
    let report = probe(&s);
    let failed = support::failed_checks(&report);
    assert_eq!(
        failed,
        [
            "second_create_refused",
            "if_match_stale_refused",
            "if_match_missing_refused",
            "if_match_missing_not_created",
            "delete_if_match_stale_refused",
            "delete_if_match_current"
        ]
    );
    for p in Protocol::ALL {
        match report.supports(p) {
            Err(LeaseError::UnsafeStore { check, .. }) => {
                assert_eq!(check, "second_create_refused")
            }
            other => panic!("{p}: {other:?}"),
        }
    }
    assert!(s.keys().is_empty(), "scratch objects left: {:?}", s.keys());
    let table = report.to_string();
    assert!(
        table.contains("second_create_refused          FAIL"),
        "{table}"
    );
    assert!(table.contains("protocol cas: REFUSED"), "{table}");
}

#[test]
fn a_checked_acquire_refuses_an_unsafe_store_without_touching_the_lease() {
    let s = Logged::ignoring();
    let cfg = config(Protocol::Cas, "a");
    let op = LeaseOp::acquire(cfg.clone(), seed(1));
    let err = s.run(Checked::new(cfg, seed(2), op)).unwrap_err();
    assert!(
        err.to_string()
            .contains("capability check `second_create_refused`"),
        "{err}"
    );
    assert!(
        s.store.get(KEY).is_none(),
        "nothing written to the lease key"
    );

    let s = Logged::new();
    let cfg = config(Protocol::Epochs, "a");
    let op = LeaseOp::acquire(cfg.clone(), seed(1));
    let lease = acquired(s.run(Checked::new(cfg, seed(2), op)));
    assert_eq!(lease.token, 1);
}

#[test]
fn epochs_list_every_page_to_find_the_newest() {
    // Pages of 2 keys, and old epochs plus unrelated keys under the prefix
    // (left by a crashed holder and by people): the newest is on the last page.
    let mut s = Logged::new();
    s.store = MemStore::new(s.clock.clone()).with_page_size(2);
    let mut record = LeaseRecord::decode(br#"{"v":1,"token":1,"expires_at":0.0}"#).expect("record");
    for epoch in [3, 4, 5, 7] {
        record.token = epoch;
        record.released = true;
        s.store.apply(&StoreOp::Put {
            key: epoch_key(KEY, epoch),
            body: record.encode(),
            condition: PutCondition::IfAbsent,
        });
    }
    for other in [
        "locks/job/notes.txt",
        "locks/job/00000000000000000009.json.bak",
    ] {
        s.store.apply(&StoreOp::Put {
            key: other.into(),
            body: b"x".to_vec(),
            condition: PutCondition::IfAbsent,
        });
    }
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    assert_eq!(a.token, 8, "above the newest epoch, not the unrelated keys");
    let log = s.take_log();
    assert_eq!(
        log.iter().filter(|c| *c == "LIST").count(),
        3 + 4,
        "3 pages, then 4 with ours: {log:?}"
    );
    // Old epochs are cleaned up but the one below ours; the unrelated
    // keys are left alone.
    assert_eq!(
        s.keys(),
        [
            epoch_key(KEY, 7),
            epoch_key(KEY, 8),
            "locks/job/00000000000000000009.json.bak".to_string(),
            "locks/job/notes.txt".to_string()
        ]
    );
}

/// One acquire deletes at most 4 old epochs, the newest of them but the
/// one right below its own: a key with thousands left behind costs a
/// bounded number of calls.
#[test]
fn epochs_clean_up_at_most_four_old_epochs_per_operation() {
    let s = Logged::new();
    let mut record = LeaseRecord::decode(br#"{"v":1,"token":1,"expires_at":0.0}"#).expect("record");
    for epoch in 1..=9 {
        record.token = epoch;
        record.released = true;
        s.store.apply(&StoreOp::Put {
            key: epoch_key(KEY, epoch),
            body: record.encode(),
            condition: PutCondition::IfAbsent,
        });
    }
    s.take_log();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    assert_eq!(a.token, 10);
    let deletes = s
        .take_log()
        .iter()
        .filter(|c| c.starts_with("DELETE"))
        .count();
    assert_eq!(deletes, 4);
    let left: Vec<String> = (1..=4).chain([9, 10]).map(|e| epoch_key(KEY, e)).collect();
    assert_eq!(
        s.keys(),
        left,
        "epochs 5-8 deleted, 9 kept below ours, the oldest left for later"
    );
}

/// A renewal that finds the next epoch already ours (our earlier renewal
/// landed unseen) renews from it instead of reporting a loss to itself.
#[test]
fn epochs_renewal_continues_from_its_own_unseen_renewal() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let mut unseen = a.record.clone();
    unseen.token = 2;
    unseen.nonce = "an earlier renewal".into();
    s.store.apply(&StoreOp::Put {
        key: epoch_key(KEY, 2),
        body: unseen.encode(),
        condition: PutCondition::IfAbsent,
    });
    let renewed = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(2), a)));
    assert_eq!(renewed.token, 3);
}

/// A cas renewal or release that finds a newer version of its own session
/// (an earlier write of ours that landed unseen) goes on from it instead of
/// reporting a loss to itself.
#[test]
fn cas_renew_and_release_go_on_from_their_own_unseen_write() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))));
    let mut unseen = a.record.clone();
    unseen.nonce = "an earlier renewal".into();
    s.store.apply(&StoreOp::Put {
        key: KEY.into(),
        body: unseen.encode(),
        condition: PutCondition::IfMatch(a.etag.clone()),
    });
    let b = renewed(s.run(LeaseOp::renew(
        config(Protocol::Cas, "a"),
        seed(2),
        a.clone(),
    )));
    assert_eq!(b.token, a.token);
    s.store.apply(&StoreOp::Put {
        key: KEY.into(),
        body: unseen.encode(),
        condition: PutCondition::IfMatch(b.etag.clone()),
    });
    assert_eq!(
        s.run(LeaseOp::release(config(Protocol::Cas, "a"), seed(3), b)),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    assert!(record_at(&s, KEY).released);
}

/// An epochs acquire on a key that holds a cas lease object refuses,
/// naming both protocols, and writes nothing.
#[test]
fn epochs_refuse_a_key_with_a_cas_lease_object() {
    let s = Logged::new();
    acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))));
    let before = s.keys();
    match s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(2))) {
        Err(LeaseError::ProtocolMismatch { ours, theirs, .. }) => {
            assert_eq!((ours, theirs.as_str()), (Protocol::Epochs, "cas"))
        }
        other => panic!("expected ProtocolMismatch, got {other:?}"),
    }
    assert_eq!(s.keys(), before);
}

/// The newest epoch is the highest number listed, whatever order the
/// listing comes in.
#[test]
fn epochs_find_the_newest_in_a_listing_in_any_order() {
    let mut s = Logged::new();
    s.reverse_listings = true;
    let mut record = LeaseRecord::decode(br#"{"v":1,"token":1,"expires_at":0.0}"#).expect("record");
    for epoch in [3, 4, 9] {
        record.token = epoch;
        record.released = true;
        s.store.apply(&StoreOp::Put {
            key: epoch_key(KEY, epoch),
            body: record.encode(),
            condition: PutCondition::IfAbsent,
        });
    }
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    assert_eq!(a.token, 10, "above the newest epoch");
    assert_eq!(
        s.keys(),
        [epoch_key(KEY, 9), epoch_key(KEY, 10)],
        "the older epochs cleaned up but the one below ours"
    );
}

#[test]
fn a_lease_resumed_from_a_read_renews_and_releases_in_every_renewing_protocol() {
    for protocol in [Protocol::Cas, Protocol::Epochs] {
        let s = Logged::new();
        let held = acquired(s.run(LeaseOp::acquire(config(protocol, "a"), seed(1))));
        s.clock.advance(Duration::from_secs(5));
        let seen = match s.run(LeaseOp::inspect(config(protocol, "a"), seed(2))) {
            Ok(Some(seen)) => seen,
            other => panic!("{protocol}: {other:?}"),
        };
        let read_at = seen.read_at;
        let lease = Lease::resume(&config(protocol, "a"), seen);
        assert_eq!(
            (lease.key.as_str(), lease.token),
            (held.key.as_str(), held.token),
            "{protocol}"
        );
        // About 24 s of the 30 s ttl are left, less the 1 s date resolution
        // and the drift margin: the deadline is conservative.
        let left = lease.valid_until.0 - read_at.0;
        assert!((22_000..25_000).contains(&left), "{protocol}: {left} ms");
        let lease = renewed(s.run(LeaseOp::renew(config(protocol, "a"), seed(3), lease)));
        assert_eq!(
            s.run(LeaseOp::release(
                config(protocol, "a"),
                seed(4),
                lease.clone()
            )),
            Ok(ReleaseOutcome::Released { token: lease.token }),
            "{protocol}"
        );
    }
}

// ---- surviving mutants (issue 16) ----

/// A cas acquire on a key holding a mutex lock refuses, naming both
/// protocols, even once the lock is stale (taking it over would give two
/// holders), and writes nothing; an inspect still reads the lock.
#[test]
fn cas_refuses_a_key_with_a_mutex_lock_and_inspect_still_reads_it() {
    let s = Logged::new();
    acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    s.clock.advance(TTL + Duration::from_secs(2));
    let before = s.store.get(KEY);
    s.take_log();
    match s.run(LeaseOp::acquire(config(Protocol::Cas, "b"), seed(2))) {
        Err(LeaseError::ProtocolMismatch { ours, theirs, .. }) => {
            assert_eq!((ours, theirs.as_str()), (Protocol::Cas, "mutex"))
        }
        other => panic!("expected ProtocolMismatch, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["GET"]);
    assert_eq!(s.store.get(KEY), before, "the lock is untouched");
    match s.run(LeaseOp::inspect(config(Protocol::Cas, "b"), seed(3))) {
        Ok(Some(seen)) => assert_eq!(
            (seen.record.holder.as_str(), seen.record.protocol.as_deref()),
            ("a", Some("mutex"))
        ),
        other => panic!("expected Inspected, got {other:?}"),
    }
}

/// A cas break leaves a released record that keeps the token and names
/// the holder and session it broke.
#[test]
fn cas_break_names_the_holder_and_session_it_broke() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))));
    let request = BreakRequest {
        etag: a.etag.clone(),
        token_floor: None,
    };
    assert_eq!(
        s.run(LeaseOp::break_lease(
            config(Protocol::Cas, "op"),
            seed(2),
            request
        )),
        Ok(BreakOutcome { token: a.token })
    );
    let broken = record_at(&s, KEY);
    assert!(broken.released);
    assert_eq!(
        (
            broken.holder.as_str(),
            broken.acquisition.as_str(),
            broken.token
        ),
        ("a", a.acquisition.as_str(), a.token)
    );
}

/// A cas acquisition confirmed only after its local deadline (the store
/// was slow) is given back as a released record with its token: the next
/// contender takes over at once, above it.
#[test]
fn cas_win_confirmed_too_late_is_given_back_released() {
    let s = Logged::new();
    let mut cfg = config(Protocol::Cas, "a");
    cfg.op_timeout = TTL * 2;
    s.script([Fault::Pass, Fault::Slow(TTL + Duration::from_secs(2))]);
    match s.run(LeaseOp::acquire(cfg, seed(1))) {
        Err(LeaseError::WonTooLate {
            token: 1,
            released: true,
            ref unsettled,
        }) if unsettled.is_empty() => {}
        other => panic!("expected WonTooLate, given back, got {other:?}"),
    }
    // The write's reply timed out; the read found it ours; the check; the
    // give-back.
    assert_eq!(s.take_log(), ["GET", "PUT-absent", "GET", "PUT-match"]);
    let record = record_at(&s, KEY);
    assert!((record.released, record.token) == (true, 1), "{record:?}");
    let b = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "b"), seed(2))));
    assert_eq!(b.token, 2);
}

/// A mutex create that landed but was answered 500 is settled by one read:
/// the lock is ours as it stands, not rewritten (no other create of ours
/// is open), and leaves no strays to wait out.
#[test]
fn mutex_ambiguous_create_is_settled_by_a_read() {
    let s = Logged::new();
    s.fail_next_write.set(true);
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    assert_eq!(s.take_log(), ["GET", "PUT-absent", "GET"]);
    let lock = record_at(&s, KEY);
    assert_eq!(
        (lock.acquisition.as_str(), lock.strays),
        (a.acquisition.as_str(), false)
    );
    assert_eq!(a.strays_until, None);
}

/// A mutex create held in the network lands while a later create of ours
/// is unanswered: the lock it made is rewritten marked `strays` (one more
/// PUT), so that a release from another process waits out the later one.
#[test]
fn mutex_lock_won_by_an_earlier_create_is_marked_for_a_later_open_one() {
    let s = Logged::new();
    s.script([
        Fault::Pass,
        Fault::Hold,
        Fault::Pass,
        Fault::Hold,
        Fault::LandHeld,
    ]);
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    assert_eq!(
        s.take_log(),
        ["GET", "PUT-absent", "GET", "PUT-absent", "GET", "PUT-match",]
    );
    let lock = record_at(&s, KEY);
    assert_eq!(
        (lock.acquisition.as_str(), lock.token, lock.strays),
        (a.acquisition.as_str(), a.token, true)
    );
    assert!(a.strays_until.is_some());
}

/// An epochs renewal or release whose create never landed (held in the
/// network) learns from one read of that epoch that it is still free, and
/// creates it again.
#[test]
fn epochs_renewal_and_release_retry_a_create_that_did_not_land() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    s.take_log();
    s.script([Fault::Hold]);
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(2), a)));
    assert_eq!(a.token, 2);
    assert_eq!(s.take_log(), ["PUT-absent", "GET", "PUT-absent", "LIST"]);
    assert_eq!(s.keys(), [epoch_key(KEY, 1), epoch_key(KEY, 2)]);
    s.script([Fault::Hold]);
    assert_eq!(
        s.run(LeaseOp::release(config(Protocol::Epochs, "a"), seed(3), a)),
        Ok(ReleaseOutcome::Released { token: 2 })
    );
    assert_eq!(
        s.take_log(),
        ["PUT-absent", "GET", "PUT-absent", "LIST", "DELETE"]
    );
    assert!(record_at(&s, &epoch_key(KEY, 3)).released);
}

/// An elector's call ids stay unique across the operations it runs, so a
/// reply delivered late (held in the network) is never taken for the
/// answer to a later call: here the answer to the campaign's first read
/// arrives again before each renewal's answer, and is ignored.
#[test]
fn elector_call_ids_are_unique_across_its_operations() {
    let s = Logged::new();
    let mut e = Elector::new(config(Protocol::Cas, "a"), seed(1));
    let until = s.clock.now().mono + TTL;
    let (mut ids, mut events) = (Vec::new(), Vec::new());
    let mut first: Option<(CallId, StoreReply)> = None;
    loop {
        match e.poll(s.clock.now()) {
            Output::Call(id, op) => {
                ids.push(id);
                let reply = pollster::block_on(s.call(op));
                match &first {
                    None => first = Some((id, reply.clone())),
                    Some((old, stale)) if ids.len() > 3 => {
                        e.handle_reply(s.clock.now(), *old, stale.clone())
                    }
                    Some(_) => {}
                }
                e.handle_reply(s.clock.now(), id, reply);
            }
            Output::Event(ev) => events.push(ev),
            Output::Wait(at) if at > until => break,
            Output::Wait(at) => pollster::block_on(s.clock.sleep_until(at)),
            Output::Done(exit) => panic!("elector finished: {exit:?}"),
        }
    }
    let mut unique = ids.clone();
    unique.sort_unstable_by_key(|id| id.0);
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "call ids repeat: {ids:?}");
    let renewals = events
        .iter()
        .filter(|ev| matches!(ev, Event::Renewed { token: 1, .. }))
        .count();
    assert!(renewals >= 2, "{events:?}");
    assert!(
        !events.iter().any(|ev| matches!(ev, Event::Error(_))),
        "{events:?}"
    );
    let mut log = s.take_log();
    assert_eq!(log.drain(..2).collect::<Vec<_>>(), ["GET", "PUT-absent"]);
    assert!(log.iter().all(|c| c == "PUT-match"), "{log:?}");
}

/// A mutex lease whose acquisition left a create in the network: the
/// scripted acquire of `mutex_lock_won_by_an_earlier_create_is_marked_for_a_later_open_one`
/// (the later create stays held).
fn mutex_lease_with_a_stray(s: &Logged) -> Lease {
    s.script([
        Fault::Pass,
        Fault::Hold,
        Fault::Pass,
        Fault::Hold,
        Fault::LandHeld,
    ]);
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    assert!(a.strays_until.is_some());
    s.take_log();
    a
}

/// A mutex release whose acquisition left a create in the network deletes
/// the lock, waits until that create could no longer be live, and deletes
/// the lock it made when it landed meanwhile: no ghost lock is left.
#[test]
fn mutex_release_waits_out_a_late_create_and_deletes_its_lock() {
    let s = Logged::new();
    let a = mutex_lease_with_a_stray(&s);
    let until = a.strays_until.expect("a stray");
    // The held create lands just before the release's read.
    s.script([Fault::Pass, Fault::LandHeld]);
    assert_eq!(
        s.run(LeaseOp::release(
            config(Protocol::Mutex, "a"),
            seed(2),
            a.clone()
        )),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    assert_eq!(s.take_log(), ["DELETE-match", "GET", "DELETE-match"]);
    assert!(s.keys().is_empty(), "ghost lock left: {:?}", s.keys());
    assert!(s.clock.now().mono >= until, "the release waited");
}

/// Waiting out late creates, a release that finds a lock of the same
/// holder name but another session (the holder acquired again, from
/// another process) leaves it alone.
#[test]
fn mutex_release_waiting_out_strays_leaves_another_sessions_lock() {
    let s = Logged::new();
    let a = mutex_lease_with_a_stray(&s);
    let theirs = LeaseRecord {
        acquisition: "another session".into(),
        nonce: "another nonce".into(),
        strays: false,
        ..a.record.clone()
    };
    s.script([
        Fault::Pass,
        Fault::Before(StoreOp::Put {
            key: KEY.into(),
            body: theirs.encode(),
            condition: PutCondition::IfAbsent,
        }),
    ]);
    assert_eq!(
        s.run(LeaseOp::release(
            config(Protocol::Mutex, "a"),
            seed(2),
            a.clone()
        )),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    assert_eq!(s.take_log(), ["DELETE-match", "GET"]);
    assert_eq!(record_at(&s, KEY).acquisition, "another session");
}

/// A mutex release made once its strays can no longer be live (here at
/// exactly that instant) is one DELETE: nothing to wait out.
#[test]
fn mutex_release_after_its_strays_are_dead_does_not_wait() {
    let s = Logged::new();
    let a = mutex_lease_with_a_stray(&s);
    let until = a.strays_until.expect("a stray");
    s.clock.advance(until - s.clock.now().mono);
    assert_eq!(
        s.run(LeaseOp::release(
            config(Protocol::Mutex, "a"),
            seed(2),
            a.clone()
        )),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    assert_eq!(s.take_log(), ["DELETE-match"]);
    assert!(s.keys().is_empty());
}

/// A mutex release whose DELETE never landed (held in the network) finds
/// its lock unchanged and deletes it again.
#[test]
fn mutex_release_whose_delete_was_lost_deletes_again() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    s.take_log();
    s.script([Fault::Hold]);
    assert_eq!(
        s.run(LeaseOp::release(
            config(Protocol::Mutex, "a"),
            seed(2),
            a.clone()
        )),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    assert_eq!(s.take_log(), ["DELETE-match", "GET", "DELETE-match"]);
    assert!(s.keys().is_empty());
}

/// A mutex create sent while an earlier create of ours is unanswered says
/// so in the lock at once (`strays`), with no rewrite.
#[test]
fn mutex_create_after_an_unanswered_one_is_marked_strays() {
    let s = Logged::new();
    s.script([Fault::Pass, Fault::Hold]);
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    assert_eq!(s.take_log(), ["GET", "PUT-absent", "GET", "PUT-absent"]);
    let lock = record_at(&s, KEY);
    assert_eq!(
        (lock.acquisition.as_str(), lock.strays),
        (a.acquisition.as_str(), true)
    );
    assert!(a.strays_until.is_some());
}

/// A mutex create refused (412: another lock came first, stale, and was
/// broken) is answered: the next create is not marked `strays`.
#[test]
fn mutex_create_after_a_refused_one_is_not_marked_strays() {
    let s = Logged::new();
    let mut stale =
        LeaseRecord::decode(br#"{"v":1,"token":5,"expires_at":1789999000.0}"#).expect("record");
    stale.holder = "z".into();
    s.script([
        Fault::Pass,
        Fault::Before(StoreOp::Put {
            key: KEY.into(),
            body: stale.encode(),
            condition: PutCondition::IfAbsent,
        }),
    ]);
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    assert_eq!(
        s.take_log(),
        ["GET", "PUT-absent", "GET", "DELETE-match", "PUT-absent",]
    );
    let lock = record_at(&s, KEY);
    assert_eq!((lock.holder.as_str(), lock.strays), ("a", false));
    assert_eq!(a.strays_until, None);
}

/// A mutex acquire on a key holding a cas record (released, so free to a
/// cas client) refuses, naming both protocols, and leaves the record and
/// its token alone.
#[test]
fn mutex_refuses_a_key_with_a_cas_record() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))));
    s.run(LeaseOp::release(config(Protocol::Cas, "a"), seed(2), a))
        .expect("released");
    let before = s.store.get(KEY);
    s.take_log();
    match s.run(LeaseOp::acquire(config(Protocol::Mutex, "b"), seed(3))) {
        Err(LeaseError::ProtocolMismatch { ours, theirs, .. }) => {
            assert_eq!((ours, theirs.as_str()), (Protocol::Mutex, "cas"))
        }
        other => panic!("expected ProtocolMismatch, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["GET"]);
    assert_eq!(s.store.get(KEY), before, "the cas record is untouched");
}

/// An operator's mutex break deletes the lock at the version seen, and
/// only that: its holder's release then hears the lock vanished (not by
/// its hand), a break of a lock already gone is refused, and a break aimed
/// at the old version leaves the next holder's lock alone.
#[test]
fn mutex_break_deletes_only_the_lock_seen() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
    let request = BreakRequest {
        etag: a.etag.clone(),
        token_floor: None,
    };
    let op = |n| LeaseOp::break_lease(config(Protocol::Mutex, "op"), seed(n), request.clone());
    s.take_log();
    assert_eq!(s.run(op(2)), Ok(BreakOutcome { token: a.token }));
    assert_eq!(s.take_log(), ["GET", "DELETE-match"]);
    assert!(s.keys().is_empty());
    assert_eq!(
        s.run(LeaseOp::release(config(Protocol::Mutex, "a"), seed(3), a)),
        Ok(ReleaseOutcome::AlreadyLost(LostReason::Vanished))
    );
    assert_eq!(
        s.run(op(4)),
        Err(LeaseError::Changed {
            current: None,
            unsettled: Box::default(),
        }),
        "nothing left to break"
    );
    let b = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "b"), seed(5))));
    s.take_log();
    assert_eq!(
        s.run(op(6)),
        Err(LeaseError::Changed {
            current: Some(b.etag.clone()),
            unsettled: Box::default(),
        })
    );
    assert_eq!(s.take_log(), ["GET"]);
    assert_eq!(record_at(&s, KEY).holder, "b");
}

/// With `min_write_interval` set (some stores allow about one write per
/// second per object), a write to the lease key waits out the interval
/// counted from the write that established the lease: a cas renewal, and a
/// mutex release (a DELETE is a write), right after the acquisition.
#[test]
fn writes_to_the_lease_key_keep_the_minimum_interval() {
    let interval = Duration::from_secs(1);
    let s = Logged::new();
    let mut cfg = config(Protocol::Cas, "a");
    cfg.min_write_interval = interval;
    let a = acquired(s.run(LeaseOp::acquire(cfg.clone(), seed(1))));
    assert_eq!(s.clock.now().mono, a.written_at, "one write: no wait");
    let b = renewed(s.run(LeaseOp::renew(cfg, seed(2), a.clone())));
    assert_eq!(b.written_at - a.written_at, interval);

    let s = Logged::new();
    let mut cfg = config(Protocol::Mutex, "a");
    cfg.min_write_interval = interval;
    let a = acquired(s.run(LeaseOp::acquire(cfg.clone(), seed(1))));
    assert_eq!(s.clock.now().mono, a.written_at, "one write: no wait");
    assert_eq!(
        s.run(LeaseOp::release(cfg, seed(2), a.clone())),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    assert_eq!(s.clock.now().mono - a.written_at, interval);
}

/// Re-reads that settle a write of unknown outcome go on past the retry
/// budget (here 1, with the reads throttled twice): the write landed, and
/// the lease is ours.
#[test]
fn rereads_settling_an_unanswered_write_go_on_past_the_retry_budget() {
    let s = Logged::new();
    let mut cfg = config(Protocol::Cas, "a");
    cfg.max_attempts = 1;
    let throttled = || Fault::Reply(ReplyKind::Throttled { retry_after: None });
    s.fail_next_write.set(true);
    s.script([Fault::Pass, Fault::Pass, throttled(), throttled()]);
    let a = acquired(s.run(LeaseOp::acquire(cfg, seed(1))));
    assert_eq!(s.take_log(), ["GET", "PUT-absent", "GET", "GET", "GET"]);
    assert_eq!(record_at(&s, KEY).acquisition, a.acquisition);
}

/// Past the retry budget no new write is sent, even while an earlier one
/// is unsettled: the operation gives up, handing on that write as a claim.
#[test]
fn past_the_retry_budget_no_write_is_sent_while_one_is_unsettled() {
    let s = Logged::new();
    let mut cfg = config(Protocol::Cas, "a");
    cfg.max_attempts = 1;
    s.script([Fault::Pass, Fault::Hold]);
    match s.run(LeaseOp::acquire(cfg, seed(1))) {
        Err(LeaseError::GaveUp { ref unsettled, .. }) if unsettled.len() == 1 => {
            assert_eq!((unsettled[0].holder.as_str(), unsettled[0].token), ("a", 1))
        }
        other => panic!("expected GaveUp with a claim, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["GET", "PUT-absent", "GET"]);
    assert!(s.keys().is_empty());
}

/// An acquire told of a live record of ours from an earlier operation (a
/// claim) takes it over as free instead of reporting itself busy, in every
/// protocol.
#[test]
fn a_claimed_record_of_ours_is_taken_over_in_every_protocol() {
    for protocol in Protocol::ALL {
        let s = Logged::new();
        let a = acquired(s.run(LeaseOp::acquire(config(protocol, "a"), seed(1))));
        assert!(
            matches!(
                s.run(LeaseOp::acquire(config(protocol, "a"), seed(2))),
                Ok(AcquireOutcome::Busy(_))
            ),
            "{protocol}: unclaimed, our own record blocks us"
        );
        let claim = Claim::of_lease(&config(protocol, "a"), &a);
        let b = acquired(
            s.run(LeaseOp::acquire(config(protocol, "a"), seed(3)).with_claims(vec![claim])),
        );
        assert!(b.token > a.token, "{protocol}");
        assert_ne!(b.acquisition, a.acquisition, "{protocol}");
        assert_eq!(
            record_at(&s, &b.key).acquisition,
            b.acquisition,
            "{protocol}"
        );
    }
}

/// A mutex break whose DELETE landed but was not answered (reply lost, or
/// a 500) learns from the read that the lock is gone by its hand: broken.
#[test]
fn mutex_break_whose_delete_landed_unanswered_is_broken() {
    for lost in [true, false] {
        let s = Logged::new();
        let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Mutex, "a"), seed(1))));
        let request = BreakRequest {
            etag: a.etag.clone(),
            token_floor: None,
        };
        if lost {
            s.script([Fault::Pass, Fault::Lost]);
        } else {
            s.script([Fault::Pass]);
            s.fail_next_write.set(true);
        }
        s.take_log();
        assert_eq!(
            s.run(LeaseOp::break_lease(
                config(Protocol::Mutex, "op"),
                seed(2),
                request
            )),
            Ok(BreakOutcome { token: a.token }),
            "reply lost: {lost}"
        );
        assert_eq!(s.take_log(), ["GET", "DELETE-match", "GET"]);
        assert!(s.keys().is_empty());
    }
}

/// An operation that gives up after a refusal it could not read back hands
/// the write on as a claim; one that wrote nothing hands on nothing.
#[test]
fn giving_up_after_a_refusal_not_read_back_hands_the_write_on_and_with_no_write_nothing() {
    // A refusal speaks for one copy of the request (a transport may have
    // sent another that applied): until a read of the key comes back, the
    // write is handed on as a claim.
    let s = Logged::new();
    let mut cfg = config(Protocol::Cas, "a");
    cfg.max_attempts = 1;
    // Reads that would settle it go on past the retry budget, to the
    // operation's deadline: here every one is throttled.
    s.script([Fault::Pass, Fault::Reply(ReplyKind::PreconditionFailed)]);
    s.script(std::iter::repeat_n(
        Fault::Reply(ReplyKind::Throttled { retry_after: None }),
        200,
    ));
    match s.run(LeaseOp::acquire(cfg.clone(), seed(1))) {
        Err(LeaseError::GaveUp { ref unsettled, .. }) if unsettled.len() == 1 => {
            assert_eq!((unsettled[0].holder.as_str(), unsettled[0].token), ("a", 1))
        }
        other => panic!("expected GaveUp with a claim, got {other:?}"),
    }
    let log = s.take_log();
    assert_eq!(log[..3], ["GET", "PUT-absent", "GET"]);
    assert!(log[2..].iter().all(|c| c == "GET"), "{log:?}");
    s.faults.borrow_mut().clear();
    assert!(s.keys().is_empty());

    // Nothing written: nothing to hand on.
    let s = Logged::new();
    s.script([
        Fault::Reply(ReplyKind::Throttled { retry_after: None }),
        Fault::Reply(ReplyKind::Throttled { retry_after: None }),
    ]);
    match s.run(LeaseOp::acquire(cfg, seed(1))) {
        Err(LeaseError::GaveUp { ref unsettled, .. }) if unsettled.is_empty() => {}
        other => panic!("expected GaveUp with no claim, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["GET", "GET"]);
}

/// A cas or mutex acquire on a key an epochs client uses finds the epochs
/// marker in the GET it makes anyway and refuses, writing nothing: the
/// check costs no request. An epochs acquire on a cas key lists an object
/// at the key that is not its marker, reads it and refuses. An epoch object
/// under a cas key (a late create of an epochs client that was refused)
/// does not stop the cas client: every epochs client refuses that key.
#[test]
fn another_protocols_key_is_refused_at_no_extra_cost() {
    for protocol in [Protocol::Cas, Protocol::Mutex] {
        let s = Logged::new();
        acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
        s.take_log();
        match s.run(LeaseOp::acquire(config(protocol, "b"), seed(2))) {
            Err(LeaseError::ProtocolMismatch { ours, theirs, .. }) => {
                assert_eq!((ours, theirs.as_str()), (protocol, "epochs"))
            }
            other => panic!("{protocol}: expected ProtocolMismatch, got {other:?}"),
        }
        assert_eq!(s.take_log(), ["GET"], "{protocol}");
        assert_eq!(s.keys(), [epoch_key(KEY, 1)], "{protocol}");

        // The other way round: the key is the cas or mutex client's.
        let s = Logged::new();
        acquired(s.run(LeaseOp::acquire(config(protocol, "a"), seed(3))));
        s.take_log();
        match s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(4))) {
            Err(LeaseError::ProtocolMismatch { ours, theirs, .. }) => {
                assert_eq!((ours, theirs.as_str()), (Protocol::Epochs, protocol.name()))
            }
            other => panic!("{protocol}: expected ProtocolMismatch, got {other:?}"),
        }
        assert_eq!(s.take_log(), ["LIST", "GET"], "{protocol}");
        assert_eq!(s.keys(), [KEY], "{protocol}: nothing written");
    }

    let s = Logged::new();
    let old = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "x"), seed(3))));
    let mut epoch = LeaseRecord::decode(br#"{"v":1,"token":1,"expires_at":0.0}"#).expect("record");
    epoch.protocol = Some("epochs".into());
    s.store.apply(&StoreOp::Put {
        key: epoch_key(KEY, 1),
        body: epoch.encode(),
        condition: PutCondition::IfAbsent,
    });
    s.clock.advance(TTL + Duration::from_secs(2));
    s.take_log();
    let b = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "b"), seed(4))));
    assert_eq!(b.token, old.token + 1);
    assert_eq!(s.take_log(), ["GET", "PUT-match"]);
    assert!(matches!(
        s.run(LeaseOp::acquire(config(Protocol::Epochs, "y"), seed(5))),
        Err(LeaseError::ProtocolMismatch { .. })
    ));
}

/// Two epochs clients mark a fresh key at once: one create of the marker
/// wins, the other is refused, reads the marker and goes on. A marker
/// create whose reply is lost is settled the same way.
#[test]
fn a_refused_or_unanswered_marker_create_is_settled_by_reading_the_key() {
    let s = Logged::new();
    s.script([
        Fault::Pass,
        Fault::Before(StoreOp::Put {
            key: KEY.into(),
            body: lease_core::record::EPOCHS_MARKER.to_vec(),
            condition: PutCondition::IfAbsent,
        }),
    ]);
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    assert_eq!(a.token, 1);
    assert_eq!(
        s.take_log(),
        ["LIST", "PUT-absent", "GET", "PUT-absent", "LIST"]
    );

    let s = Logged::new();
    s.script([Fault::Pass, Fault::Lost]);
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    assert_eq!(a.token, 1);
    assert_eq!(
        s.take_log(),
        ["LIST", "PUT-absent", "GET", "PUT-absent", "LIST"]
    );
}

/// An epochs create found not to be the newest (made from a stale read) is
/// garbage: it is deleted, and an operation that then gives up hands on no
/// claim for it (its check is over; it never was a win).
#[test]
fn an_epochs_create_found_stale_is_no_claim_when_the_operation_gives_up() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let seen = match s.run(LeaseOp::inspect(config(Protocol::Epochs, "x"), seed(2))) {
        Ok(Some(seen)) => seen,
        other => panic!("{other:?}"),
    };
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(3), a)));
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(4), a)));
    renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(6), a)));
    let stale = Observation { free: true, ..seen };
    let mut cfg = config(Protocol::Epochs, "x");
    cfg.max_attempts = 1;
    let throttled = || Fault::Reply(ReplyKind::Throttled { retry_after: None });
    s.take_log();
    s.script([Fault::Pass, Fault::Pass, throttled(), throttled()]);
    match s.run(LeaseOp::acquire_from(cfg, seed(5), &stale)) {
        Err(LeaseError::GaveUp { ref unsettled, .. }) if unsettled.is_empty() => {}
        other => panic!("expected GaveUp with no claim, got {other:?}"),
    }
    assert_eq!(
        s.take_log(),
        ["PUT-absent", "LIST", "GET", "GET", "DELETE-match"]
    );
    assert_eq!(s.keys(), [epoch_key(KEY, 3), epoch_key(KEY, 4)]);
}

/// An epochs acquire whose create won but whose LIST check could not be
/// made (throttled past the operation's deadline) gives the create back as
/// a released epoch above it, never by deleting it: the released epoch it
/// took over from may be gone already (its writer's LIST saw ours above it
/// and deleted it as garbage), and deleting ours would make the holder's
/// older epoch, live though released, the lease again. (Found by the
/// product simulation: seed 615983649660 and three more.)
#[test]
fn an_epochs_win_given_back_is_released_above_not_deleted() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    // a's release: epoch 2, released (epoch 1 is still there).
    let released = LeaseRecord {
        token: 2,
        released: true,
        ..a.record.clone()
    };
    s.store.apply(&StoreOp::Put {
        key: epoch_key(KEY, 2),
        body: released.encode(),
        condition: PutCondition::IfAbsent,
    });
    s.take_log();
    // b takes over through epoch 2; as its create of epoch 3 lands, a's
    // release, whose LIST showed epoch 3 above, deletes epoch 2. b's LIST
    // is throttled for an hour.
    s.script([
        Fault::Pass,
        Fault::Pass,
        Fault::Before(StoreOp::Delete {
            key: epoch_key(KEY, 2),
            if_match: None,
        }),
        Fault::Reply(ReplyKind::Throttled {
            retry_after: Some(Duration::from_secs(3600)),
        }),
    ]);
    match s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(2))) {
        Err(LeaseError::GaveUp { ref unsettled, .. }) if unsettled.len() == 1 => {
            assert_eq!((unsettled[0].holder.as_str(), unsettled[0].token), ("b", 3))
        }
        other => panic!("expected GaveUp with a claim, got {other:?}"),
    }
    assert_eq!(
        s.take_log(),
        ["LIST", "GET", "PUT-absent", "LIST", "PUT-absent"]
    );
    let newest = record_at(&s, &epoch_key(KEY, 4));
    assert_eq!((newest.holder.as_str(), newest.released), ("b", true));
    // The lease is free: not a's epoch 1 again.
    let c = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "c"), seed(3))));
    assert_eq!(c.token, 5);
}

/// An epochs acquire whose create is refused and whose read of that
/// epoch finds another's live record that is not the newest (a late create
/// that filled the slot of an epoch deleted by cleanup) lists again: only
/// the newest is the lease, and here it is released, so the acquire takes
/// it instead of reporting busy on the stale record. (Found by the product
/// simulation: seed 615983641588.)
#[test]
fn an_epochs_acquire_refused_by_a_record_below_the_newest_lists_again() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let seen = match s.run(LeaseOp::inspect(config(Protocol::Epochs, "x"), seed(2))) {
        Ok(Some(seen)) => seen,
        other => panic!("{other:?}"),
    };
    // a released at epoch 3; z's late create filled epoch 2, live.
    for (token, holder, released) in [(3, "a", true), (2, "z", false)] {
        let record = LeaseRecord {
            token,
            holder: holder.into(),
            released,
            ..a.record.clone()
        };
        s.store.apply(&StoreOp::Put {
            key: epoch_key(KEY, token),
            body: record.encode(),
            condition: PutCondition::IfAbsent,
        });
    }
    s.take_log();
    // b read epoch 1 as free long ago: it creates epoch 2, refused.
    let stale = Observation { free: true, ..seen };
    let cfg = config(Protocol::Epochs, "b");
    let b = acquired(s.run(LeaseOp::acquire_from(cfg, seed(3), &stale)));
    assert_eq!(b.token, 4);
    let log = s.take_log();
    assert_eq!(
        log[..6],
        ["PUT-absent", "GET", "LIST", "GET", "PUT-absent", "LIST"],
        "{log:?}"
    );
}

/// A break with a token floor replaces an unreadable object only at the
/// version the operator saw: aimed at another, it is refused and the object
/// is left as it is.
#[test]
fn a_break_of_an_unreadable_object_at_another_version_is_refused() {
    let s = Logged::new();
    s.store.apply(&StoreOp::Put {
        key: KEY.into(),
        body: b"not a lease".to_vec(),
        condition: PutCondition::IfAbsent,
    });
    let (etag, body) = s.store.get(KEY).expect("object");
    let request = BreakRequest {
        etag: Etag::new("another version"),
        token_floor: Some(7),
    };
    match s.run(LeaseOp::break_lease(
        config(Protocol::Cas, "op"),
        seed(1),
        request,
    )) {
        Err(LeaseError::Unreadable { etag: current, .. }) => assert_eq!(current, etag),
        other => panic!("expected Unreadable, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["GET"]);
    assert_eq!(s.store.get(KEY), Some((etag, body)));
}

/// A holder that finds its lease object overwritten with something
/// unreadable has lost it: a renewal says `Lost`, a release `AlreadyLost`
/// (not an error), and neither touches the object.
#[test]
fn renew_and_release_of_an_overwritten_cas_lease_report_it_lost() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))));
    s.store.apply(&StoreOp::Put {
        key: KEY.into(),
        body: b"not a lease".to_vec(),
        condition: PutCondition::None,
    });
    let before = s.store.get(KEY);
    assert_eq!(
        s.run(LeaseOp::renew(
            config(Protocol::Cas, "a"),
            seed(2),
            a.clone()
        )),
        Ok(RenewOutcome::Lost(LostReason::Overwritten))
    );
    assert_eq!(
        s.run(LeaseOp::release(config(Protocol::Cas, "a"), seed(3), a)),
        Ok(ReleaseOutcome::AlreadyLost(LostReason::Overwritten))
    );
    assert_eq!(s.store.get(KEY), before);
}

/// An acquire starting from a read that showed the lease held starts over
/// with a read of its own (busy: nothing written), never writing over it.
#[test]
fn an_acquire_from_a_read_that_showed_the_lease_held_writes_nothing() {
    let s = Logged::new();
    acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))));
    let seen = match s.run(LeaseOp::inspect(config(Protocol::Cas, "b"), seed(2))) {
        Ok(Some(seen)) => seen,
        other => panic!("{other:?}"),
    };
    assert!(!seen.free);
    let before = s.store.get(KEY);
    s.take_log();
    assert!(matches!(
        s.run(LeaseOp::acquire_from(
            config(Protocol::Cas, "b"),
            seed(3),
            &seen
        )),
        Ok(AcquireOutcome::Busy(_))
    ));
    assert_eq!(s.take_log(), ["GET"]);
    assert_eq!(s.store.get(KEY), before);
}

/// A cas release whose write landed but whose reply was lost, after which
/// another holder took over, may have been what freed the lease: it says
/// `Released`, not `AlreadyLost` (which claims nothing of ours changed the
/// store). Sent once the lease had run out locally (here at its deadline
/// exactly; the store's record may still be live, the deadline keeps
/// margins), it may or may not have freed it: `ReleaseUnknown`, never
/// `AlreadyLost`.
#[test]
fn a_release_that_may_have_landed_before_a_takeover_is_released() {
    for late in [false, true] {
        let s = Logged::new();
        let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))));
        if late {
            s.clock.advance(a.valid_until - s.clock.now().mono);
        }
        let theirs = LeaseRecord {
            holder: "b".into(),
            acquisition: "b's session".into(),
            nonce: "b's nonce".into(),
            token: a.token + 1,
            ..a.record.clone()
        };
        s.script([
            Fault::Lost,
            Fault::Before(StoreOp::Put {
                key: KEY.into(),
                body: theirs.encode(),
                condition: PutCondition::None,
            }),
        ]);
        s.take_log();
        let out = s.run(LeaseOp::release(
            config(Protocol::Cas, "a"),
            seed(2),
            a.clone(),
        ));
        assert_eq!(s.take_log(), ["PUT-match", "GET"], "late: {late}");
        if late {
            match out {
                Ok(ReleaseOutcome::Unknown {
                    now: LostReason::TakenBy { holder, .. },
                    ..
                }) => assert_eq!(holder, "b"),
                other => panic!("expected ReleaseUnknown, got {other:?}"),
            }
        } else {
            assert_eq!(out, Ok(ReleaseOutcome::Released { token: a.token }));
        }
        assert_eq!(record_at(&s, KEY).holder, "b");
    }
}

/// A `Retry-After` longer than the operation's deadline ends the operation
/// at once (no day-long stall): it gives up, having waited for nothing.
#[test]
fn a_retry_after_past_the_operations_deadline_gives_up_at_once() {
    let s = Logged::new();
    let t0 = s.clock.now().mono;
    s.script([Fault::Reply(ReplyKind::Throttled {
        retry_after: Some(Duration::from_secs(86_400)),
    })]);
    match s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))) {
        Err(LeaseError::GaveUp { .. }) => {}
        other => panic!("expected GaveUp, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["GET"]);
    assert_eq!(s.clock.now().mono, t0, "no time spent waiting");
}

/// An epochs renewal whose cleanup (the delete of the epoch before the previous) takes
/// longer than the new lease lasts gives the new epoch back and reports
/// the lease lost: it expired before the renewal could be reported.
#[test]
fn an_epochs_renewal_outlasted_by_its_cleanup_is_lost_and_given_back() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    // Renewed once: epoch 1 stays below 2, and the next renewal cleans it.
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(3), a)));
    let mut cfg = config(Protocol::Epochs, "a");
    cfg.op_timeout = TTL * 2;
    s.take_log();
    s.script([
        Fault::Pass,
        Fault::Pass,
        Fault::Slow(TTL + Duration::from_secs(2)),
    ]);
    assert_eq!(
        s.run(LeaseOp::renew(cfg, seed(2), a)),
        Ok(RenewOutcome::Lost(LostReason::Expired))
    );
    assert_eq!(s.take_log(), ["PUT-absent", "LIST", "DELETE", "PUT-absent"]);
    assert!(record_at(&s, &epoch_key(KEY, 4)).released);
}

/// Drives `machine` by hand: each call goes to the store at once (its
/// scripted fault may advance the clock) and its reply is handed back
/// before the next poll, unless `hang(op)`: such a call is never answered.
/// Returns the outcome and the local time it was reported.
fn drive_by_hand<M: Machine>(
    s: &Logged,
    mut machine: M,
    hang: impl Fn(&StoreOp) -> bool,
) -> (M::Outcome, Mono) {
    loop {
        match machine.poll(s.clock.now()) {
            Output::Call(_, op) if hang(&op) => {}
            Output::Call(id, op) => {
                let reply = pollster::block_on(s.call(op));
                machine.handle_reply(s.clock.now(), id, reply);
            }
            Output::Event(_) => {}
            Output::Wait(at) => pollster::block_on(s.clock.sleep_until(at)),
            Output::Done(outcome) => return (outcome, s.clock.now().mono),
        }
    }
}

/// A cas renewal confirmed after the lease's deadline gives the new record
/// back (released) before it reports the lease lost.
#[test]
fn a_renewal_confirmed_too_late_gives_the_record_back() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))));
    let late = a.valid_until - s.clock.now().mono + Duration::from_millis(1);
    s.take_log();
    s.script([Fault::Slow(late)]);
    let (out, _) = drive_by_hand(
        &s,
        LeaseOp::renew(config(Protocol::Cas, "a"), seed(2), a),
        |_| false,
    );
    assert_eq!(out, Ok(RenewOutcome::Lost(LostReason::Expired)));
    assert_eq!(s.take_log(), ["PUT-match", "PUT-match"]);
    assert!(record_at(&s, KEY).released);
}

/// An acquisition whose cleanup hangs is reported at the lease's deadline,
/// not at the cleanup's timeout: there is still time to give the lease
/// back (here the confirmation came slowly, so the deadline is near).
#[test]
fn a_win_whose_cleanup_hangs_is_given_back_at_its_deadline() {
    let s = Logged::new();
    let mut old = LeaseRecord::decode(br#"{"v":1,"token":1,"expires_at":0.0}"#).expect("record");
    old.released = true;
    // Two old epochs: the win (3) cleans up 1 and keeps 2 below it.
    for epoch in [1, 2] {
        old.token = epoch;
        s.store.apply(&StoreOp::Put {
            key: epoch_key(KEY, epoch),
            body: old.encode(),
            condition: PutCondition::IfAbsent,
        });
    }
    s.mark();
    let mut cfg = config(Protocol::Epochs, "a");
    cfg.request_timeout = Duration::from_secs(15);
    let t0 = s.clock.now().mono;
    s.script([
        Fault::Pass,
        Fault::Pass,
        Fault::Slow(Duration::from_secs(20)),
    ]);
    let (out, at) = drive_by_hand(&s, LeaseOp::acquire(cfg.clone(), seed(1)), |op| {
        matches!(op, StoreOp::Delete { .. })
    });
    match out {
        Err(LeaseError::WonTooLate {
            token: 3,
            released: true,
            ..
        }) => {}
        other => panic!("expected WonTooLate, given back, got {other:?}"),
    }
    assert!(at < t0 + cfg.ttl, "reported at {at:?}");
    assert_eq!(
        s.take_log(),
        ["LIST", "GET", "PUT-absent", "LIST", "PUT-absent"]
    );
    assert!(record_at(&s, &epoch_key(KEY, 4)).released);
}

/// What b does while an old create of epoch 2 is on its way: takes the
/// expired epoch 1 over (epoch 2), renews twice (epochs 3 and 4) and cleans
/// epoch 2 up (cleanup keeps the epoch below the newest, 3), so that slot
/// is free again below the live epoch.
fn epochs_moved_on_to_4(s: &Logged) -> Vec<StoreOp> {
    let mut b = LeaseRecord::decode(br#"{"v":1,"token":2,"expires_at":0.0}"#).expect("record");
    b.holder = "b".into();
    b.acquisition = "b-session".into();
    b.nonce = "b-nonce".into();
    b.protocol = Some("epochs".into());
    b.expires_at = UnixMillis(s.clock.wall().0 + 60_000);
    let create = |token: u64| StoreOp::Put {
        key: epoch_key(KEY, token),
        body: LeaseRecord { token, ..b.clone() }.encode(),
        condition: PutCondition::IfAbsent,
    };
    vec![
        create(2),
        create(3),
        create(4),
        StoreOp::Delete {
            key: epoch_key(KEY, 2),
            if_match: None,
        },
    ]
}

/// An epochs release whose create of epoch 2 lands only after the lease
/// moved on (a paused holder, a late delivery: epoch 2 was created by b and
/// deleted by its cleanup) fills a slot below the live epoch 4. The LIST
/// after it shows epoch 4 as the newest; the garbage is deleted. Sent after
/// the lease's deadline, the release cannot tell this from a release that
/// was the newest and let b in: `ReleaseUnknown`, never `Released`.
#[test]
fn an_epochs_release_landing_below_the_live_epoch_is_not_released() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    s.clock.advance(Duration::from_millis(
        a.valid_until.0 - s.clock.now().mono.0,
    ));
    s.take_log();
    s.script([Fault::BeforeAll(epochs_moved_on_to_4(&s))]);
    match s.run(LeaseOp::release(config(Protocol::Epochs, "a"), seed(2), a)) {
        Ok(ReleaseOutcome::Unknown {
            now: LostReason::TakenBy { holder, token, .. },
            ..
        }) => assert_eq!((holder.as_str(), token), ("b", 4)),
        other => panic!("expected ReleaseUnknown with b holding, got {other:?}"),
    }
    let log = s.take_log();
    assert_eq!(log[..3], ["PUT-absent", "LIST", "GET"], "{log:?}");
    assert!(log.contains(&"DELETE-match".to_string()), "{log:?}");
    assert!(
        s.store.get(&epoch_key(KEY, 2)).is_none(),
        "the garbage epoch is deleted"
    );
    assert_eq!(record_at(&s, &epoch_key(KEY, 4)).holder, "b");
}

/// A release sent while the lease was valid whose epoch landed as the
/// newest, after which b took over before the confirming LIST: b came in
/// through it. `Released`.
#[test]
fn an_epochs_release_overtaken_before_its_list_is_released() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let token = a.token;
    s.take_log();
    let mut b = LeaseRecord::decode(br#"{"v":1,"token":3,"expires_at":0.0}"#).expect("record");
    b.holder = "b".into();
    b.acquisition = "b-session".into();
    b.protocol = Some("epochs".into());
    b.expires_at = UnixMillis(s.clock.wall().0 + 60_000);
    s.script([
        Fault::Pass,
        Fault::Before(StoreOp::Put {
            key: epoch_key(KEY, 3),
            body: b.encode(),
            condition: PutCondition::IfAbsent,
        }),
    ]);
    assert_eq!(
        s.run(LeaseOp::release(config(Protocol::Epochs, "a"), seed(2), a)),
        Ok(ReleaseOutcome::Released { token })
    );
}

/// The same for an operator's break: a break that lands below the live
/// epoch is never reported `BreakOutcome`; the operator is told the lease
/// changed, naming the live epoch's etag.
#[test]
fn an_epochs_break_landing_below_the_live_epoch_reports_the_change() {
    let s = Logged::new();
    acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let seen = match s.run(LeaseOp::inspect(config(Protocol::Epochs, "op"), seed(2))) {
        Ok(Some(seen)) => seen,
        other => panic!("expected a record, got {other:?}"),
    };
    s.take_log();
    // The break's LIST and GET see epoch 1; b moves on before its create.
    s.script([
        Fault::Pass,
        Fault::Pass,
        Fault::BeforeAll(epochs_moved_on_to_4(&s)),
    ]);
    let request = BreakRequest {
        etag: seen.etag,
        token_floor: None,
    };
    let live = |s: &Logged| s.store.get(&epoch_key(KEY, 4)).map(|(etag, _)| etag);
    match s.run(LeaseOp::break_lease(
        config(Protocol::Epochs, "op"),
        seed(3),
        request,
    )) {
        Err(LeaseError::Changed { current, .. }) => assert_eq!(current, live(&s)),
        other => panic!("expected Changed, got {other:?}"),
    }
    assert!(s.store.get(&epoch_key(KEY, 2)).is_none());
    assert!(
        !record_at(&s, &epoch_key(KEY, 4)).released,
        "b's lease stands"
    );
}

/// An epochs renewal whose create landed, but whose confirming LIST is
/// answered only after the lease's local deadline, reports the lease lost
/// and gives the new epoch back (a released epoch above it), as the CAS
/// lease gives back a renewal confirmed too late: no record of ours
/// outlives the loss reported.
#[test]
fn an_epochs_renewal_confirmed_after_the_deadline_is_given_back() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let mut cfg = config(Protocol::Epochs, "a");
    cfg.op_timeout = TTL * 2;
    s.take_log();
    // The create passes; the LIST is answered a ttl later.
    s.script([Fault::Pass, Fault::Slow(TTL + Duration::from_secs(2))]);
    assert_eq!(
        s.run(LeaseOp::renew(cfg, seed(2), a)),
        Ok(RenewOutcome::Lost(LostReason::Expired))
    );
    assert_eq!(s.take_log(), ["PUT-absent", "LIST", "PUT-absent"]);
    assert_eq!(record_at(&s, &epoch_key(KEY, 2)).holder, "a");
    assert!(
        record_at(&s, &epoch_key(KEY, 3)).released,
        "epoch 2 is given back by a released epoch 3"
    );
}

/// The same when the LIST is still unanswered at the deadline (the timer
/// fires with no reply): the landed epoch is given back.
#[test]
fn an_epochs_renewal_unconfirmed_at_the_deadline_is_given_back() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let deadline = a.valid_until;
    let mut cfg = config(Protocol::Epochs, "a");
    cfg.op_timeout = TTL * 2;
    s.take_log();
    let (outcome, at) = drive_by_hand(&s, LeaseOp::renew(cfg, seed(2), a), |op| {
        matches!(op, StoreOp::List { .. })
    });
    assert_eq!(outcome, Ok(RenewOutcome::Lost(LostReason::Expired)));
    assert_eq!(at, deadline, "reported at the deadline");
    assert!(record_at(&s, &epoch_key(KEY, 3)).released);
}

/// A release sent at the lease's local deadline (the record may still be
/// live on the store: the deadline keeps margins) whose reply is lost, and
/// which then finds another holder, cannot tell whether it freed the
/// lease: it says so (`ReleaseUnknown`), never `AlreadyLost`, which would
/// claim nothing it sent changed the store. Here it did: it landed, then b
/// came in.
#[test]
fn a_release_at_the_deadline_with_its_reply_lost_reports_unknown() {
    for protocol in [Protocol::Cas, Protocol::Mutex] {
        let s = Logged::new();
        let a = acquired(s.run(LeaseOp::acquire(config(protocol, "a"), seed(1))));
        s.clock.advance(Duration::from_millis(
            a.valid_until.0 - s.clock.now().mono.0,
        ));
        s.take_log();
        let mut b = LeaseRecord::decode(br#"{"v":1,"token":2,"expires_at":0.0}"#).expect("record");
        b.holder = "b".into();
        b.acquisition = "b-session".into();
        b.protocol = Some(protocol.name().into());
        b.expires_at = UnixMillis(s.clock.wall().0 + 60_000);
        let takeover = StoreOp::Put {
            key: KEY.into(),
            body: b.encode(),
            condition: PutCondition::None,
        };
        s.script([Fault::Lost, Fault::Before(takeover)]);
        match s.run(LeaseOp::release(config(protocol, "a"), seed(2), a.clone())) {
            Ok(ReleaseOutcome::Unknown {
                token,
                now: LostReason::TakenBy { holder, .. },
            }) => assert_eq!((token, holder.as_str()), (a.token, "b"), "{protocol}"),
            other => panic!("{protocol}: expected ReleaseUnknown, got {other:?}"),
        }
        assert_eq!(
            s.take_log()[1],
            "GET",
            "{protocol}: one read settles what it can"
        );
        assert_eq!(record_at(&s, KEY).holder, "b");
    }
}

/// An epochs acquire lists epoch 1 as the newest; before its read of that
/// epoch, the holder renews to epoch 2, its cleanup deletes epoch 1, and a
/// late create of another client fills the slot of epoch 1 again. The read
/// finds a version of epoch 1 other than the one listed: no lease, garbage
/// below the live epoch. The acquire lists again and reports the real
/// holder (a, epoch 2), not the zombie.
#[test]
fn an_epochs_acquire_reading_a_refilled_epoch_lists_again() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let mut renewal = a.record.clone();
    renewal.token = 2;
    renewal.nonce = "a-renewal".into();
    renewal.expires_at = UnixMillis(s.clock.wall().0 + 60_000);
    let mut zombie = a.record.clone();
    zombie.holder = "c".into();
    zombie.acquisition = "c-session".into();
    zombie.nonce = "c-nonce".into();
    zombie.expires_at = UnixMillis(s.clock.wall().0 + 60_000);
    s.take_log();
    s.script([
        Fault::Pass,
        Fault::BeforeAll(vec![
            StoreOp::Put {
                key: epoch_key(KEY, 2),
                body: renewal.encode(),
                condition: PutCondition::IfAbsent,
            },
            StoreOp::Delete {
                key: epoch_key(KEY, 1),
                if_match: None,
            },
            StoreOp::Put {
                key: epoch_key(KEY, 1),
                body: zombie.encode(),
                condition: PutCondition::IfAbsent,
            },
        ]),
    ]);
    match s.run(LeaseOp::acquire(config(Protocol::Epochs, "b"), seed(2))) {
        Ok(AcquireOutcome::Busy(busy)) => assert_eq!((busy.holder.as_str(), busy.token), ("a", 2)),
        other => panic!("expected Busy on a's epoch 2, got {other:?}"),
    }
    assert_eq!(s.take_log(), ["LIST", "GET", "LIST", "GET"]);
}

/// A one-shot renewal whose write is still unanswered at the lease's
/// deadline does not stop at "lost": it reads on to establish what became
/// of the write. Landed (its reply lost): the lease is renewed after all,
/// and says so. Not landed: lost, and no write is sent past the deadline.
#[test]
fn a_renewal_unanswered_at_the_deadline_reports_what_a_read_establishes() {
    for landed in [true, false] {
        let s = Logged::new();
        let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Cas, "a"), seed(1))));
        let deadline = a.valid_until;
        s.take_log();
        // The renewal is sent just before the deadline and never
        // answered; it applied (its reply lost) or not.
        s.clock.advance(Duration::from_millis(
            deadline.0 - s.clock.now().mono.0 - 10,
        ));
        let mut cfg = config(Protocol::Cas, "a");
        cfg.op_timeout = TTL * 2;
        let puts = Cell::new(0);
        let (outcome, at) = drive_by_hand(&s, LeaseOp::renew(cfg, seed(2), a.clone()), |op| {
            let put = matches!(op, StoreOp::Put { .. });
            if put {
                puts.set(puts.get() + 1);
                if landed {
                    s.store.apply(op);
                }
            }
            put
        });
        assert!(at > deadline, "landed {landed}: settled after the deadline");
        assert_eq!(puts.get(), 1, "landed {landed}: no write past the deadline");
        assert_eq!(s.take_log(), ["GET"], "landed {landed}");
        if landed {
            let lease = renewed(outcome);
            assert_eq!(lease.token, a.token);
            assert_eq!(record_at(&s, KEY).nonce, lease.record.nonce);
            assert!(lease.valid_until > at, "a live lease");
        } else {
            assert_eq!(outcome, Ok(RenewOutcome::Lost(LostReason::Expired)));
        }
    }
}

// ---- listings that lag ----

/// Runs `machine` on `s` until it is about to send a call `hold(op)` picks:
/// returns that call, unsent; or the outcome, if it finished first.
fn run_until<M: Machine>(
    s: &LaggingListings,
    machine: &mut M,
    mut hold: impl FnMut(&StoreOp) -> bool,
) -> Result<(CallId, StoreOp), M::Outcome> {
    loop {
        match machine.poll(s.clock.now()) {
            Output::Call(id, op) if hold(&op) => return Ok((id, op)),
            Output::Call(id, op) => {
                let reply = s.apply(&op);
                machine.handle_reply(s.clock.now(), id, reply);
            }
            Output::Event(_) => {}
            Output::Wait(at) => pollster::block_on(s.clock.sleep_until(at)),
            Output::Done(outcome) => return Err(outcome),
        }
    }
}

fn finish<M: Machine>(s: &LaggingListings, machine: &mut M) -> M::Outcome {
    match run_until(s, machine, |_| false) {
        Err(outcome) => outcome,
        Ok(call) => unreachable!("{call:?}"),
    }
}

/// On a store whose listings hide objects for a second after their
/// creation, the marker still keeps an epochs client and a cas (or mutex)
/// client apart: it is one object at the lease key, created with
/// `If-None-Match: *` before the first epoch, and the other protocols read
/// that key anyway (no listing is involved). Epochs still needs listings
/// that show its own writes (its confirming LIST), so the probe refuses
/// that store for both protocols.
#[test]
fn on_a_store_whose_listings_lag_the_marker_keeps_epochs_and_cas_or_mutex_apart() {
    for protocol in [Protocol::Cas, Protocol::Mutex] {
        let s = LaggingListings::new(Duration::from_secs(1), Duration::ZERO);
        // e lists (nothing there), marks the key and creates epoch 1; its
        // confirming LIST is held back.
        let mut e = LeaseOp::acquire(config(Protocol::Epochs, "e"), seed(1));
        let mut writes = 0;
        let (id, confirm) = run_until(&s, &mut e, |op| {
            writes += usize::from(op.is_write());
            writes == 2 && matches!(op, StoreOp::List { .. })
        })
        .unwrap_or_else(|outcome| panic!("{outcome:?}"));
        // Half a second later c comes to the key: its GET finds the marker.
        s.clock.advance(Duration::from_millis(500));
        match finish(&s, &mut LeaseOp::acquire(config(protocol, "c"), seed(2))) {
            Err(LeaseError::ProtocolMismatch { theirs, .. }) => assert_eq!(theirs, "epochs"),
            other => panic!("{protocol}: expected ProtocolMismatch, got {other:?}"),
        }
        s.clock.advance(Duration::from_millis(600));
        let reply = s.apply(&confirm);
        e.handle_reply(s.clock.now(), id, reply);
        let e = acquired(finish(&s, &mut e));
        assert_eq!((e.token, e.key.as_str()), (1, epoch_key(KEY, 1).as_str()));

        // The probe refuses the same store for both protocols.
        let s = LaggingListings::new(Duration::from_secs(1), Duration::ZERO);
        for p in [Protocol::Epochs, protocol] {
            let cfg = config(p, "x");
            let op = LeaseOp::acquire(cfg.clone(), seed(3));
            match finish(&s, &mut Checked::new(cfg, seed(4), op)) {
                Err(LeaseError::UnsafeStore { check, .. }) => {
                    assert_eq!(check, "list_after_write", "{p}")
                }
                other => panic!("{p}: expected UnsafeStore, got {other:?}"),
            }
        }
        assert!(s.store.keys("").is_empty(), "{:?}", s.store.keys(""));
    }
}

/// Why epochs itself needs listings that show every write made before
/// them. a holds epoch 4 (3 kept below it); x, acting on an old read of
/// epoch 1 (a pause), refills the cleaned-up slot of epoch 2, and its
/// confirming LIST is answered by a replica that has not seen epochs 3 and
/// 4 yet: epoch 2 looks like the newest, and x holds epoch 2 while a holds
/// epoch 4. (A listing that
/// hides every object alike for a while after its creation does not do it
/// here: it would hide x's fresh epoch 2 as well, and x's create would not
/// count; `a_stale_read_cannot_refill_a_deleted_epoch` is this run with a
/// listing that keeps up.)
#[test]
fn a_listing_that_misses_the_live_epoch_lets_two_epochs_clients_hold_the_key() {
    let s = Logged::new();
    let a = acquired(s.run(LeaseOp::acquire(config(Protocol::Epochs, "a"), seed(1))));
    let seen = match s.run(LeaseOp::inspect(config(Protocol::Epochs, "x"), seed(2))) {
        Ok(Some(seen)) => seen,
        other => panic!("{other:?}"),
    };
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(3), a)));
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(4), a)));
    let a = renewed(s.run(LeaseOp::renew(config(Protocol::Epochs, "a"), seed(6), a)));
    assert_eq!(
        (a.token, s.keys()),
        (4, vec![epoch_key(KEY, 3), epoch_key(KEY, 4)])
    );
    let stale = Observation { free: true, ..seen };
    s.take_log();
    s.script([Fault::Pass, Fault::ListingMisses(epoch_key(KEY, 3))]);
    let x = acquired(s.run(LeaseOp::acquire_from(
        config(Protocol::Epochs, "x"),
        seed(5),
        &stale,
    )));
    assert_eq!(s.take_log(), ["PUT-absent", "LIST"]);
    assert_eq!(x.token, 2);
    let now = s.clock.now().mono;
    assert!(
        now < a.valid_until && now < x.valid_until,
        "both hold the key"
    );
    assert_eq!(
        s.keys(),
        [epoch_key(KEY, 2), epoch_key(KEY, 3), epoch_key(KEY, 4)]
    );
}
