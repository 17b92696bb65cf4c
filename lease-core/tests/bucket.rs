//! `lease_core::protocol::bucket`: what the bucket does around the protocol
//! (an unconditional write to the prefix, concurrent creates of one key,
//! versions), driven by hand so that the creates are seen all in flight at
//! once before any is answered.

mod support;

use lease_core::config::LeaseConfig;
use lease_core::entropy::Entropy;
use lease_core::mem::{MemStore, VirtualClock};
use lease_core::protocol::bucket::{BucketProbe, BucketReport, Unconditional, RACERS};
use lease_core::protocol::machine::{Machine, Output};
use lease_core::store::{PutCondition, ReplyKind, StoreOp, StoreReply, TransportErrorKind};
use lease_core::time::Clock;
use std::time::Duration;
use support::EPOCH;

/// How the store under test answers: the in-memory store, changed.
#[derive(Default)]
struct Quirks {
    /// 403 to a PUT with no condition (a bucket policy).
    deny_unconditional: bool,
    /// Ignores `If-None-Match: *`.
    ignore_if_none_match: bool,
    /// Writes come back with a version id.
    versioned: bool,
    /// The third create of the race gets no answer (it was not applied).
    lose_a_create: bool,
}

/// Runs the checks; also returns the most calls that were in flight at once.
fn check(quirks: Quirks) -> (BucketReport, usize, MemStore) {
    let clock = VirtualClock::new(EPOCH);
    let store = MemStore::new(clock.clone());
    let cfg = LeaseConfig::new("locks/a", "probe", Duration::from_secs(30));
    let mut probe = BucketProbe::new(cfg, Entropy::from_seed(9));
    let mut in_flight = Vec::new();
    let mut most = 0;
    let mut answered = 0;
    loop {
        match probe.poll(clock.now()) {
            Output::Call(id, op) => {
                in_flight.push((id, op));
                most = most.max(in_flight.len());
            }
            Output::Done(report) => return (report.expect("checked"), most, store),
            Output::Event(_) => {}
            Output::Wait(_) => {
                assert!(!in_flight.is_empty(), "waits with nothing in flight");
                // Answered in the order sent.
                let (id, op) = in_flight.remove(0);
                answered += 1;
                let reply = answer(&store, &quirks, op, answered);
                probe.handle_reply(clock.now(), id, reply);
            }
        }
    }
}

fn answer(store: &MemStore, quirks: &Quirks, op: StoreOp, n: usize) -> StoreReply {
    if quirks.lose_a_create && n == 3 {
        return StoreReply::transport(TransportErrorKind::Timeout, "lost");
    }
    let op = match op {
        StoreOp::Put {
            condition: PutCondition::None,
            ..
        } if quirks.deny_unconditional => {
            return StoreReply::new(ReplyKind::Denied {
                code: Some("AccessDenied".into()),
                message: None,
            })
        }
        StoreOp::Put {
            key,
            body,
            condition: PutCondition::IfAbsent,
        } if quirks.ignore_if_none_match => StoreOp::Put {
            key,
            body,
            condition: PutCondition::None,
        },
        op => op,
    };
    let mut reply = store.apply(&op);
    if quirks.versioned && matches!(reply.kind, ReplyKind::Written { .. }) {
        reply.version_id = Some("3HL4kqtJlcpXroDTDmjVBH40Nrjfkd".into());
    }
    reply
}

#[test]
fn a_plain_bucket_accepts_unconditional_writes_and_one_create_wins() {
    let (report, most, store) = check(Quirks::default());
    assert_eq!(report.unconditional, Unconditional::Accepted);
    assert_eq!((report.race.winners, report.race.refused), (1, RACERS - 1));
    assert!(report.race.passed());
    assert_eq!(report.versioned, Some(false));
    assert_eq!(most, RACERS, "the creates are sent all at once");
    assert!(report.left.is_empty());
    assert_eq!(
        store.keys("locks/"),
        Vec::<String>::new(),
        "nothing left behind"
    );
    let shown = report.to_string();
    assert!(
        shown.contains("accepted") && shown.contains("1 written, 7 refused"),
        "{shown}"
    );
}

#[test]
fn a_policy_that_refuses_unconditional_writes_is_seen() {
    let (report, _, store) = check(Quirks {
        deny_unconditional: true,
        ..Quirks::default()
    });
    assert_eq!(
        report.unconditional,
        Unconditional::Refused {
            code: Some("AccessDenied".into())
        }
    );
    assert!(report.race.passed());
    assert_eq!(store.keys("locks/"), Vec::<String>::new());
}

#[test]
fn a_store_that_ignores_if_none_match_has_many_winners() {
    let (report, _, store) = check(Quirks {
        ignore_if_none_match: true,
        ..Quirks::default()
    });
    assert_eq!(report.race.winners, RACERS);
    assert!(!report.race.passed());
    assert!(report.to_string().contains("FAIL"), "{report}");
    assert_eq!(store.keys("locks/"), Vec::<String>::new());
}

#[test]
fn a_versioned_bucket_is_noticed() {
    let (report, _, _) = check(Quirks {
        versioned: true,
        ..Quirks::default()
    });
    assert_eq!(report.versioned, Some(true));
    assert!(
        report.to_string().contains("noncurrent version"),
        "{report}"
    );
}

#[test]
fn a_create_with_no_answer_makes_the_race_unclear_not_failed() {
    let (report, _, _) = check(Quirks {
        lose_a_create: true,
        ..Quirks::default()
    });
    assert_eq!(report.race.verdict(), "unclear", "{report}");
    assert!(!report.race.passed() && !report.race.failed());
    assert_eq!(report.race.unclear.len(), 1);
    // It may still land after the cleanup: named as possibly left.
    assert_eq!(report.left.len(), 1, "{report}");
    assert!(report.left[0].ends_with(".race"), "{report}");
}
