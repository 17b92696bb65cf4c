//! The capability probe under lost replies: a write of the probe's that
//! applied but whose reply was lost must not make a good store look unsafe
//! (the fleet lab saw `lease run` refuse moto, exit 5, after one dropped
//! reply to the probe's first create).

use lease_core::config::{LeaseConfig, Protocol};
use lease_core::drive::{drive, Store};
use lease_core::entropy::Entropy;
use lease_core::mem::{MemStore, VirtualClock};
use lease_core::probe::{Check, Probe, ProbeReport};
use lease_core::store::{ReplyKind, StoreOp, StoreReply, TransportErrorKind};
use lease_core::time::UnixMillis;
use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

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
        let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
        Lossy {
            store: MemStore::new(clock.clone()),
            clock,
            writes: Cell::new(0),
            lose: lose.to_vec(),
            server_error,
        }
    }

    fn probe(&self) -> ProbeReport {
        let cfg = LeaseConfig::new("locks/job", "prober", Duration::from_secs(30));
        let mut probe = Probe::new(cfg, Entropy::from_seed(9));
        pollster::block_on(drive(&mut probe, self, &self.clock, |_| {})).expect("probe finishes")
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
    // Writes: 1-5 the PUTs, 6 the stale DELETE (refused), 7 the DELETE.
    let s = Lossy::new(&[7], false);
    assert_all_pass(&s.probe(), "delete");
    assert!(
        s.store.keys("").is_empty(),
        "scratch left: {:?}",
        s.store.keys("")
    );
}

#[test]
fn every_single_lost_reply_leaves_a_good_store_judged_safe() {
    for n in 1..=8 {
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
