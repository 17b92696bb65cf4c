//! The capability probe under lost replies: a write of the probe's that
//! applied but whose reply was lost must not make a good store look unsafe
//! (the fleet lab saw `lease run` refuse moto, exit 5, after one dropped
//! reply to the probe's first create).

mod support;

use lease_core::protocol::{Check, Probe};
use lease_core::store::{ReplyKind, TransportErrorKind};
use lease_core::{
    Clock, Entropy, LeaseConfig, LeaseError, MemStore, ProbeReport, Protocol, Store, StoreOp,
    StoreReply, VirtualClock,
};
use std::cell::Cell;
use std::future::Future;
use std::time::Duration;
use support::lagging::LaggingListings;
use support::EPOCH;

/// The probe's report on `store`, its scratch key beside `locks/job`.
fn probe_report(store: &impl Store, clock: &impl Clock) -> ProbeReport {
    let cfg = LeaseConfig::new("locks/job", "prober", Duration::from_secs(30));
    support::run(store, clock, Probe::new(cfg, Entropy::from_seed(9))).expect("probe finishes")
}

/// The in-memory store; the writes (PUT and DELETE, counted from 1) named
/// in `lose` are applied and their replies lost.
struct Lossy {
    store: MemStore,
    clock: VirtualClock,
    writes: Cell<usize>,
    lose: Vec<usize>,
    server_error: bool,
}

impl Lossy {
    fn new(lose: &[usize], server_error: bool) -> Lossy {
        let clock = VirtualClock::new(EPOCH);
        Lossy {
            store: MemStore::new(clock.clone()),
            clock,
            writes: Cell::new(0),
            lose: lose.to_vec(),
            server_error,
        }
    }

    fn probe(&self) -> ProbeReport {
        probe_report(self, &self.clock)
    }
}

impl Store for Lossy {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        let mut reply = self.store.apply(&op);
        if op.is_write() {
            let n = self.writes.get() + 1;
            self.writes.set(n);
            if self.lose.contains(&n) {
                reply = if self.server_error {
                    StoreReply {
                        kind: ReplyKind::ServerError {
                            status: 500,
                            code: Some("InternalError".into()),
                        },
                        date: reply.date,
                        version_id: None,
                    }
                } else {
                    StoreReply::transport(TransportErrorKind::Timeout, "reply lost")
                };
            }
        }
        std::future::ready(reply)
    }
}

fn assert_all_pass(report: &ProbeReport, what: &str) {
    for r in &report.results {
        assert!(r.passed, "{what}: {}: {}", r.check.name(), r.detail);
    }
    assert_eq!(report.results.len(), Check::ALL.len(), "{what}: {report}");
    for p in Protocol::ALL {
        assert_eq!(report.supports(p), Ok(()), "{what}");
    }
}

#[test]
fn a_lost_reply_to_the_first_create_does_not_make_the_store_unsafe() {
    for server_error in [false, true] {
        let s = Lossy::new(&[1], server_error);
        let report = s.probe();
        assert_all_pass(&report, "create");
        let detail = &report
            .results
            .iter()
            .find(|r| r.check == Check::CreateIfAbsent)
            .unwrap()
            .detail;
        assert!(detail.contains("reply was lost"), "{detail}");
        assert!(
            s.store.keys("").is_empty(),
            "scratch left: {:?}",
            s.store.keys("")
        );
    }
}

#[test]
fn a_lost_reply_to_the_if_match_write_does_not_make_the_store_unsafe() {
    // Writes: 1 create, 2 second create (refused), 3 If-Match current.
    let s = Lossy::new(&[3], false);
    assert_all_pass(&s.probe(), "if-match");
    assert!(
        s.store.keys("").is_empty(),
        "scratch left: {:?}",
        s.store.keys("")
    );
}

#[test]
fn a_lost_reply_to_the_delete_does_not_make_the_store_unsafe() {
    // Writes: 1-6 the PUTs, 7 the stale DELETE (refused), 8 the DELETE.
    let s = Lossy::new(&[8], false);
    assert_all_pass(&s.probe(), "delete");
    assert!(
        s.store.keys("").is_empty(),
        "scratch left: {:?}",
        s.store.keys("")
    );
}

#[test]
fn every_single_lost_reply_leaves_a_good_store_judged_safe() {
    // 1-6 the PUTs (6 the second scratch key), 7-8 the DELETEs of the
    // scratch key, 9 the DELETE of the second one.
    for n in 1..=9 {
        for server_error in [false, true] {
            let s = Lossy::new(&[n], server_error);
            let report = s.probe();
            for p in Protocol::ALL {
                assert_eq!(
                    report.supports(p),
                    Ok(()),
                    "write {n} lost (500: {server_error}):\n{report}"
                );
            }
        }
    }
}

#[test]
fn a_lost_reply_to_the_second_scratch_create_does_not_fail_the_listing_checks() {
    for server_error in [false, true] {
        let s = Lossy::new(&[6], server_error);
        assert_all_pass(&s.probe(), "second scratch key");
        assert!(
            s.store.keys("").is_empty(),
            "scratch left: {:?}",
            s.store.keys("")
        );
    }
}

fn probe_on(store: &LaggingListings) -> ProbeReport {
    probe_report(store, &store.clock)
}

/// A store whose listings hide objects for 100 ms after their creation
/// (calls take 20 ms): the LIST sent right after the second scratch key's
/// create does not show it, and every protocol is refused, naming
/// `list_after_write`. Every other check passes, and the scratch key
/// created six calls earlier is listed: a probe that only looked for a key
/// created a while before (the old `list` check) would have judged this
/// store safe, and on it an epochs client and a cas or mutex client can
/// both hold the key (`tests/epochs_mutex_probe.rs`,
/// `on_a_store_whose_listings_lag_epochs_and_cas_or_mutex_both_hold_the_key`).
#[test]
fn the_probe_refuses_a_store_whose_listings_lag() {
    let store = LaggingListings::new(Duration::from_millis(100), Duration::from_millis(20));
    let report = probe_on(&store);
    let failed = support::failed_checks(&report);
    assert_eq!(failed, ["list_after_write", "list_pages"], "{report}");
    let row = report.result(Check::ListAfterWrite).unwrap();
    assert!(row.detail.contains("did not list it"), "{}", row.detail);
    assert!(
        report
            .result(Check::ListPages)
            .unwrap()
            .detail
            .starts_with("not verified"),
        "{report}"
    );
    for p in Protocol::ALL {
        match report.supports(p) {
            Err(LeaseError::UnsafeStore { check, .. }) => assert_eq!(check, "list_after_write"),
            other => panic!("{p}: expected UnsafeStore, got {other:?}"),
        }
    }
    let table = report.to_string();
    assert!(
        table.contains("list_after_write               FAIL"),
        "{table}"
    );
    assert!(
        store.store.keys("").is_empty(),
        "{:?}",
        store.store.keys("")
    );

    // The same store with a listing that keeps up passes everything.
    let store = LaggingListings::new(Duration::ZERO, Duration::from_millis(20));
    assert_all_pass(&probe_on(&store), "no lag");
}

/// The paging check, on a store that pages: two scratch keys, one per page,
/// are read by following the token; a store that ignores `max-keys`
/// answers both on one page and passes, saying paging was not exercised.
#[test]
fn the_probe_reads_its_listing_page_by_page() {
    let s = Lossy::new(&[], false);
    let report = s.probe();
    assert_all_pass(&report, "pages");
    let row = report.result(Check::ListPages).unwrap();
    assert!(
        row.detail.starts_with("2 pages of one key"),
        "{}",
        row.detail
    );
}

/// How [`Pager`] mangles listings.
#[derive(Clone, Copy)]
enum Paging {
    /// Answers with its own page size, whatever `max-keys` says.
    IgnoresMaxKeys,
    /// Ignores the continuation token: every page is the first.
    IgnoresToken,
}

/// The in-memory store with a broken listing.
struct Pager {
    store: MemStore,
    clock: VirtualClock,
    paging: Paging,
}

impl Pager {
    fn probe(paging: Paging) -> (ProbeReport, Vec<String>) {
        let (store, clock) = support::mem_world();
        let s = Pager {
            store,
            clock,
            paging,
        };
        let report = probe_report(&s, &s.clock);
        (report, s.store.keys(""))
    }
}

impl Store for Pager {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        let op = match (self.paging, op) {
            (
                Paging::IgnoresMaxKeys,
                StoreOp::List {
                    prefix,
                    continuation,
                    ..
                },
            ) => StoreOp::List {
                prefix,
                continuation,
                max_keys: None,
            },
            (
                Paging::IgnoresToken,
                StoreOp::List {
                    prefix, max_keys, ..
                },
            ) => StoreOp::List {
                prefix,
                continuation: None,
                max_keys,
            },
            (_, op) => op,
        };
        std::future::ready(self.store.apply(&op))
    }
}

#[test]
fn a_store_that_ignores_max_keys_passes_without_paging_exercised() {
    let (report, left) = Pager::probe(Paging::IgnoresMaxKeys);
    assert_all_pass(&report, "ignores max-keys");
    let row = report.result(Check::ListPages).unwrap();
    assert!(
        row.detail.contains("paging not exercised"),
        "{}",
        row.detail
    );
    assert!(left.is_empty(), "{left:?}");
}

/// A store that answers every page as the first would make a listing
/// never end (the protocols would read it until their page limit and fail
/// closed): the probe sees the same token twice and refuses it.
#[test]
fn a_store_whose_continuation_tokens_do_not_work_is_refused() {
    let (report, left) = Pager::probe(Paging::IgnoresToken);
    let row = report.result(Check::ListPages).unwrap();
    assert!(
        !row.passed && row.detail.contains("already followed"),
        "{report}"
    );
    assert!(!report.passed(Check::ListAfterWrite), "{report}");
    for p in Protocol::ALL {
        assert!(
            matches!(report.supports(p), Err(LeaseError::UnsafeStore { .. })),
            "{p}: {report}"
        );
    }
    assert!(left.is_empty(), "{left:?}");
}

/// The in-memory store, where the calls `fails` picks are not applied and
/// answered with a transport timeout.
struct Failing {
    store: MemStore,
    clock: VirtualClock,
    fails: fn(&StoreOp) -> bool,
}

impl Store for Failing {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        let reply = if (self.fails)(&op) {
            StoreReply::transport(TransportErrorKind::Timeout, "no reply")
        } else {
            self.store.apply(&op)
        };
        std::future::ready(reply)
    }
}

fn failing_probe(fails: fn(&StoreOp) -> bool) -> (Result<ProbeReport, LeaseError>, Vec<String>) {
    let (store, clock) = support::mem_world();
    let s = Failing {
        store,
        clock,
        fails,
    };
    let cfg = LeaseConfig::new("locks/job", "prober", Duration::from_secs(30));
    let outcome = support::run(&s, &s.clock, Probe::new(cfg, Entropy::from_seed(9)));
    (outcome, s.store.keys(""))
}

#[test]
fn a_probe_that_gives_up_deletes_its_scratch_objects() {
    // Every read of the key that must stay missing fails: the probe runs
    // out of retries after it created its scratch key, and still deletes it
    // (and the key its refused write was sent to) before reporting.
    let (outcome, left) =
        failing_probe(|op| matches!(op, StoreOp::Get { key } if key.ends_with(".missing")));
    assert!(
        matches!(outcome, Err(LeaseError::GaveUp { .. })),
        "{outcome:?}"
    );
    assert_eq!(left, Vec::<String>::new(), "scratch objects left behind");
}

#[test]
fn a_probe_cut_off_before_its_cleanup_names_what_it_left() {
    // After the first create nothing gets through: the probe gives up and
    // cannot delete; the error names the scratch key that remains.
    let (outcome, left) = failing_probe(|op| {
        !matches!(op, StoreOp::Put { condition, .. } if *condition == lease_core::store::PutCondition::IfAbsent)
            || matches!(op, StoreOp::Put { key, .. } if key.ends_with(".listed"))
    });
    assert_eq!(left.len(), 1, "{left:?}");
    let Err(LeaseError::GaveUp { last, .. }) = &outcome else {
        panic!("{outcome:?}")
    };
    assert!(last.contains(&left[0]), "{last}");
}
