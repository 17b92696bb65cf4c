//! `lease_core::protocol::bucket`: what the bucket does around the protocol
//! (an unconditional write to the prefix, concurrent creates of one key,
//! versions), driven by hand so that the creates are seen all in flight at
//! once before any is answered.

mod support;

use lease_core::protocol::{
    BucketProbe, BucketReport, RaceKind, Unconditional, BUCKET_RACERS, BUCKET_ROUNDS,
};
use lease_core::store::{PutCondition, ReplyKind, TransportErrorKind};
use lease_core::{
    Clock, Entropy, LeaseConfig, Machine, MemStore, Output, StoreOp, StoreReply, VirtualClock,
};
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
    /// In this race, the second racer's condition is checked before the
    /// first racer's write lands (a store that checks, then writes, in two
    /// steps): both are written.
    racy: Option<(u32, RaceKind)>,
    /// Every racer but the first is throttled (429), as a store that
    /// allows one write per second per object answers a burst.
    throttle_racers: bool,
    /// No conditional DELETE (the R2 binding): 501.
    no_conditional_delete: bool,
}

/// The round, kind and racer a race write's body names.
fn racer_of(body: &[u8]) -> Option<(u32, RaceKind, u64)> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let kind = match v["probe"].as_str()? {
        "create race" => RaceKind::Create,
        "replace race" => RaceKind::Replace,
        _ => return None,
    };
    Some((v["round"].as_u64()? as u32, kind, v["racer"].as_u64()?))
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
    if let StoreOp::Delete {
        if_match: Some(_), ..
    } = &op
    {
        if quirks.no_conditional_delete {
            return StoreReply::new(ReplyKind::Unsupported {
                status: 501,
                code: Some("R2BindingHasNoConditionalDelete".into()),
            });
        }
    }
    if let StoreOp::Put { body, .. } = &op {
        if quirks.throttle_racers && racer_of(body).is_some_and(|(_, _, racer)| racer > 1) {
            return StoreReply::new(ReplyKind::Throttled { retry_after: None });
        }
    }
    let op = match op {
        StoreOp::Put { key, body, .. }
            if quirks
                .racy
                .is_some_and(|(round, kind)| racer_of(&body) == Some((round, kind, 2))) =>
        {
            StoreOp::Put {
                key,
                body,
                condition: PutCondition::None,
            }
        }
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
    assert_eq!(
        report.race.races.len(),
        2 * BUCKET_ROUNDS as usize,
        "{report}"
    );
    for race in &report.race.races {
        assert_eq!(
            (race.winners.len(), race.refused),
            (1, BUCKET_RACERS - 1),
            "{race}"
        );
    }
    assert!(report.race.passed());
    assert_eq!(report.versioned, Some(false));
    assert_eq!(most, BUCKET_RACERS, "the creates are sent all at once");
    assert!(report.left.is_empty());
    assert_eq!(
        store.keys("locks/"),
        Vec::<String>::new(),
        "nothing left behind"
    );
    let shown = report.to_string();
    assert!(
        shown.contains("accepted") && shown.contains("pass: one winner in every race"),
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
    assert_eq!(report.race.races[0].winners.len(), BUCKET_RACERS);
    assert!(!report.race.passed() && report.race.failed());
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
    assert_eq!(report.race.races[0].unclear.len(), 1);
    // It may still land after the cleanup: named as possibly left.
    assert_eq!(report.left.len(), 1, "{report}");
    assert!(report.left[0].ends_with(".race1"), "{report}");
}

/// A store that checks a condition and writes in two steps lets two
/// concurrent writers win now and then: one such race in any round, of
/// creates or of replaces, refuses it, naming the round and the winners.
#[test]
fn one_race_with_two_winners_in_any_round_refuses_the_store() {
    for (round, kind) in [(2, RaceKind::Create), (3, RaceKind::Replace)] {
        let (report, _, store) = check(Quirks {
            racy: Some((round, kind)),
            ..Quirks::default()
        });
        assert!(report.race.failed() && !report.race.passed(), "{report}");
        let failure = report.race.first_failure().expect("a failed race");
        assert_eq!((failure.round, failure.kind), (round, kind));
        assert_eq!(failure.winners, vec![1, 2]);
        let shown = report.to_string();
        assert!(
            shown.contains(&format!(
                "FAIL: not exactly one winner in round {round} {}s: 2 written (racer #1, #2)",
                kind.name()
            )),
            "{shown}"
        );
        // The rounds before it passed: one race is not enough evidence.
        assert!(report
            .race
            .races
            .iter()
            .filter(|r| r.round < round)
            .all(|r| r.passed()));
        assert_eq!(store.keys("locks/"), Vec::<String>::new(), "{report}");
    }
}

#[test]
fn rounds_and_racers_are_the_callers() {
    let clock = VirtualClock::new(EPOCH);
    let store = MemStore::new(clock.clone());
    let cfg = LeaseConfig::new("locks/a", "probe", Duration::from_secs(30));
    let probe = BucketProbe::new(cfg, Entropy::from_seed(3)).with_race(16, 5);
    let report = support::run(&store, &clock, probe).expect("checked");
    assert_eq!((report.race.racers, report.race.rounds), (16, 5));
    assert_eq!(report.race.races.len(), 10);
    assert!(report.race.passed(), "{report}");
}

/// Throttled racers were not applied: one winner and the rest throttled
/// is neither a pass nor a failure ("throttled"): no racer met the
/// condition, so nothing was shown either way.
#[test]
fn throttled_racers_are_neither_winners_nor_refusals() {
    let (report, _, _) = check(Quirks {
        throttle_racers: true,
        ..Quirks::default()
    });
    assert!(!report.race.passed() && !report.race.failed(), "{report}");
    assert_eq!(report.race.verdict(), "throttled", "{report}");
    let first = &report.race.races[0];
    assert_eq!(
        (first.winners.len(), first.refused, first.throttled),
        (1, 0, BUCKET_RACERS - 1)
    );
    let throttled = 2 * BUCKET_ROUNDS as usize * (BUCKET_RACERS - 1);
    assert!(
        report
            .to_string()
            .contains(&format!("({throttled} writes in all)")),
        "{report}"
    );
}

/// A store with no conditional DELETE (the R2 binding): the scratch keys,
/// ours alone, are deleted with no condition.
#[test]
fn scratch_keys_are_cleaned_up_on_a_store_without_conditional_deletes() {
    let (report, _, store) = check(Quirks {
        no_conditional_delete: true,
        ..Quirks::default()
    });
    assert!(report.race.passed(), "{report}");
    assert!(report.left.is_empty(), "{report}");
    assert_eq!(store.keys("locks/"), Vec::<String>::new(), "{report}");
}
