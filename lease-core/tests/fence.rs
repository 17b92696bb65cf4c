//! Fenced writes (`docs/design.md` §5) against the in-memory store.

mod support;

use lease_core::protocol::FenceOp;
use lease_core::store::{ReplyKind, TransportErrorKind};
use lease_core::{
    Entropy, FenceOutcome, Fenced, LeaseConfig, Machine, MemStore, Output, Store, StoreReply,
    VirtualClock,
};
use std::time::Duration;
use support::{mem_world as setup, run};

const KEY: &str = "data/report.csv";

fn cfg() -> LeaseConfig {
    LeaseConfig::new("locks/job", "writer", Duration::from_secs(30))
}

fn write(
    store: &MemStore,
    clock: &VirtualClock,
    token: u64,
    payload: &str,
    seed: u128,
) -> FenceOutcome {
    let op = FenceOp::new(
        cfg(),
        Entropy::from_seed(seed),
        KEY,
        token,
        payload.as_bytes().to_vec(),
    );
    run(store, clock, op).expect("no store error")
}

fn stored(store: &MemStore) -> Fenced {
    Fenced::decode(&store.get(KEY).expect("object exists").1).expect("fenced object")
}

#[test]
fn holders_write_in_token_order_and_stale_ones_are_refused() {
    let (store, clock) = setup();
    assert!(matches!(
        write(&store, &clock, 1, "one", 1),
        FenceOutcome::Accepted { .. }
    ));
    assert!(matches!(
        write(&store, &clock, 1, "one again", 2),
        FenceOutcome::Accepted { .. }
    ));
    assert!(matches!(
        write(&store, &clock, 3, "three", 3),
        FenceOutcome::Accepted { .. }
    ));
    assert_eq!(
        write(&store, &clock, 2, "zombie", 4),
        FenceOutcome::Rejected { current: 3 }
    );
    let f = stored(&store);
    assert_eq!((f.token, f.payload.as_slice()), (3, b"three".as_slice()));
}

#[test]
fn a_stale_holder_that_read_first_loses_on_the_precondition() {
    let (store, clock) = setup();
    write(&store, &clock, 1, "one", 1);
    // The zombie (token 1) reads, then a newer holder writes, then the
    // zombie's write arrives: If-Match fails, the re-read sees token 2.
    let mut zombie = FenceOp::new(cfg(), Entropy::from_seed(2), KEY, 1, b"late".to_vec());
    let now = lease_core::Clock::now(&clock);
    let Output::Call(id, get) = zombie.poll(now) else {
        panic!("expected the read")
    };
    let read = pollster::block_on(store.call(get));
    assert!(matches!(
        write(&store, &clock, 2, "two", 3),
        FenceOutcome::Accepted { .. }
    ));
    zombie.handle_reply(now, id, read);
    let outcome = run(&store, &clock, zombie);
    assert_eq!(outcome, Ok(FenceOutcome::Rejected { current: 2 }));
    assert_eq!(stored(&store).payload, b"two");
}

#[test]
fn an_applied_write_with_a_lost_reply_is_confirmed_by_its_nonce() {
    let (store, clock) = setup();
    let mut op = FenceOp::new(cfg(), Entropy::from_seed(1), KEY, 5, b"data".to_vec());
    let now = lease_core::Clock::now(&clock);
    let Output::Call(id, get) = op.poll(now) else {
        panic!()
    };
    op.handle_reply(now, id, pollster::block_on(store.call(get)));
    let Output::Call(id, put) = op.poll(now) else {
        panic!()
    };
    pollster::block_on(store.call(put)); // applied; the reply is lost
    op.handle_reply(
        now,
        id,
        StoreReply::transport(TransportErrorKind::Reset, "reset"),
    );
    let outcome = run(&store, &clock, op);
    assert!(
        matches!(outcome, Ok(FenceOutcome::Accepted { .. })),
        "{outcome:?}"
    );
    assert_eq!(stored(&store).token, 5);
}

#[test]
fn an_object_that_is_not_fenced_is_an_error() {
    let (store, clock) = setup();
    store.apply(&lease_core::StoreOp::Put {
        key: KEY.into(),
        body: b"plain".to_vec(),
        condition: lease_core::store::PutCondition::None,
    });
    let op = FenceOp::new(cfg(), Entropy::from_seed(1), KEY, 1, b"x".to_vec());
    assert!(run(&store, &clock, op).is_err());
    assert!(
        matches!(store.apply(&lease_core::StoreOp::Get { key: KEY.into() }).kind, ReplyKind::Found { body, .. } if body == b"plain")
    );
}

fn append(
    store: &MemStore,
    clock: &VirtualClock,
    token: u64,
    line: &str,
    seed: u128,
) -> FenceOutcome {
    let op = FenceOp::append(cfg(), Entropy::from_seed(seed), KEY, token, line);
    run(store, clock, op).expect("no store error")
}

fn lines(store: &MemStore) -> Vec<String> {
    stored(store)
        .entries()
        .map(|(_, line)| String::from_utf8_lossy(line).into_owned())
        .collect()
}

#[test]
fn appends_keep_every_line_in_order_and_refuse_stale_holders() {
    let (store, clock) = setup();
    assert!(matches!(
        append(&store, &clock, 1, "a", 1),
        FenceOutcome::Accepted { .. }
    ));
    assert!(matches!(
        append(&store, &clock, 1, "b\nc", 2),
        FenceOutcome::Accepted { .. }
    ));
    assert!(matches!(
        append(&store, &clock, 2, "d", 3),
        FenceOutcome::Accepted { .. }
    ));
    assert_eq!(
        append(&store, &clock, 1, "stale", 4),
        FenceOutcome::Rejected { current: 2 }
    );
    assert_eq!(lines(&store), ["a", "b c", "d"]);
    assert_eq!(stored(&store).token, 2);
    // Every line starts with the nonce of the write that appended it.
    let nonces: Vec<_> = stored(&store).entries().map(|(n, _)| n.to_vec()).collect();
    assert!(nonces.iter().all(|n| !n.is_empty()));
    assert_eq!(nonces.len(), 3);
}

#[test]
fn an_append_whose_reply_was_lost_is_found_behind_later_lines_and_not_repeated() {
    let (store, clock) = setup();
    append(&store, &clock, 1, "first", 1);
    let mut op = FenceOp::append(cfg(), Entropy::from_seed(2), KEY, 1, "mine");
    let now = lease_core::Clock::now(&clock);
    let Output::Call(id, get) = op.poll(now) else {
        panic!("expected the read")
    };
    op.handle_reply(now, id, pollster::block_on(store.call(get)));
    let Output::Call(id, put) = op.poll(now) else {
        panic!("expected the write")
    };
    pollster::block_on(store.call(put)); // applied; the reply is lost
    op.handle_reply(
        now,
        id,
        StoreReply::transport(TransportErrorKind::Reset, "reset"),
    );
    // Another writer of the same token appends behind it before the re-read.
    append(&store, &clock, 1, "theirs", 3);
    let outcome = run(&store, &clock, op);
    assert!(
        matches!(outcome, Ok(FenceOutcome::Accepted { .. })),
        "{outcome:?}"
    );
    assert_eq!(lines(&store), ["first", "mine", "theirs"]);
}

#[test]
fn a_precondition_failure_appends_to_what_is_there_now() {
    let (store, clock) = setup();
    append(&store, &clock, 1, "one", 1);
    let mut op = FenceOp::append(cfg(), Entropy::from_seed(2), KEY, 2, "two");
    let now = lease_core::Clock::now(&clock);
    let Output::Call(id, get) = op.poll(now) else {
        panic!("expected the read")
    };
    op.handle_reply(now, id, pollster::block_on(store.call(get)));
    // Someone appends between our read and our write: If-Match fails, and
    // the retry extends the new payload, losing nothing.
    append(&store, &clock, 1, "one more", 3);
    let outcome = run(&store, &clock, op);
    assert!(
        matches!(outcome, Ok(FenceOutcome::Accepted { .. })),
        "{outcome:?}"
    );
    assert_eq!(lines(&store), ["one", "one more", "two"]);
}

#[test]
fn a_write_until_the_deadline_sends_nothing_after_it() {
    let (store, clock) = setup();
    append(&store, &clock, 1, "one", 1);
    let now = lease_core::Clock::now(&clock);
    let deadline = now.mono + Duration::from_secs(2);
    let mut op = FenceOp::append(cfg(), Entropy::from_seed(2), KEY, 1, "late").until(deadline);
    let Output::Call(id, _get) = op.poll(now) else {
        panic!("expected the read")
    };
    // The read is answered 503 with a long Retry-After: the backoff would
    // outlast the deadline, which ends the write instead, with no request.
    op.handle_reply(
        now,
        id,
        StoreReply {
            kind: ReplyKind::Throttled {
                retry_after: Some(Duration::from_secs(10)),
            },
            date: None,
            version_id: None,
        },
    );
    let wake = match op.poll(now) {
        Output::Wait(at) => at,
        other => panic!("expected a wait, got {other:?}"),
    };
    assert!(
        wake <= deadline,
        "woke at {wake:?} after the deadline {deadline:?}"
    );
    let later = lease_core::Now {
        mono: deadline,
        wall: now.wall,
    };
    match op.poll(later) {
        Output::Done(Err(lease_core::LeaseError::GaveUp { last, .. })) => {
            assert!(last.contains("deadline"), "{last}")
        }
        other => panic!("expected GaveUp at the deadline, got {other:?}"),
    }
    assert_eq!(lines(&store), ["one"]);
}

/// Drives `op` by hand: each call is answered by `answer` (given the call
/// and the time), and the times of the calls are returned with the
/// outcome.
fn run_by_hand(
    op: &mut FenceOp,
    clock: &VirtualClock,
    mut answer: impl FnMut(&lease_core::StoreOp, lease_core::Mono) -> StoreReply,
) -> (
    Vec<(String, lease_core::Mono)>,
    Result<FenceOutcome, lease_core::LeaseError>,
) {
    use lease_core::Clock;
    let mut calls = Vec::new();
    loop {
        match op.poll(clock.now()) {
            Output::Call(id, call) => {
                let verb = format!("{call:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap()
                    .to_string();
                calls.push((verb, clock.now().mono));
                let reply = answer(&call, clock.now().mono);
                op.handle_reply(clock.now(), id, reply);
            }
            Output::Wait(at) => clock.advance(at - clock.now().mono),
            Output::Event(_) => {}
            Output::Done(outcome) => return (calls, outcome),
        }
    }
}

#[test]
fn fenced_writes_keep_the_stores_write_spacing() {
    // On GCS (one write per second per object) a write refused once and
    // made again waits out the second since the first, as lease writes do.
    let (store, clock) = setup();
    let mut cfg = cfg();
    cfg.min_write_interval = Duration::from_secs(1);
    let mut op = FenceOp::new(cfg, Entropy::from_seed(1), KEY, 1, b"one".to_vec());
    let mut refused = false;
    let (calls, outcome) = run_by_hand(&mut op, &clock, |call, _| {
        if matches!(call, lease_core::StoreOp::Put { .. }) && !refused {
            refused = true;
            return StoreReply::new(ReplyKind::PreconditionFailed);
        }
        store.apply(call)
    });
    assert!(
        matches!(outcome, Ok(FenceOutcome::Accepted { .. })),
        "{outcome:?}"
    );
    let puts: Vec<_> = calls.iter().filter(|(verb, _)| verb == "Put").collect();
    assert_eq!(puts.len(), 2, "{calls:?}");
    assert!(
        puts[1].1 - puts[0].1 >= Duration::from_secs(1),
        "the second write came {:?} after the first: {calls:?}",
        puts[1].1 - puts[0].1
    );
}

#[test]
fn a_fenced_writes_deadline_counts_from_its_start() {
    // The operation's deadline (op_timeout) counts from its first call, as
    // a lease operation's does, not from its first retry: a read answered
    // only near the deadline, then throttled, ends the write instead of
    // starting a fresh op_timeout (the wait would end past it).
    let (store, clock) = setup();
    let mut cfg = cfg();
    cfg.op_timeout = Duration::from_secs(10);
    cfg.request_timeout = Duration::from_secs(20);
    let mut op = FenceOp::new(cfg, Entropy::from_seed(1), KEY, 1, b"one".to_vec());
    let mut first = true;
    let (calls, outcome) = run_by_hand(&mut op, &clock, |call, _| {
        if first {
            first = false;
            // The reply takes 9.5 s, then says 503 with Retry-After: 1.
            clock.advance(Duration::from_millis(9_500));
            return StoreReply::new(ReplyKind::Throttled {
                retry_after: Some(Duration::from_secs(1)),
            });
        }
        store.apply(call)
    });
    match outcome {
        Err(lease_core::LeaseError::GaveUp { last, .. }) => {
            assert!(last.contains("deadline"), "{last}")
        }
        other => panic!("expected GaveUp at the deadline, got {other:?} after {calls:?}"),
    }
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(store.get(KEY).is_none());
}

#[test]
fn a_call_sent_before_the_holders_deadline_is_waited_for_without_spinning() {
    // The read goes out before the deadline and its reply is slow: past the
    // deadline the write waits for that reply (or its timeout), asking to
    // be woken then, not at once over and over.
    let (_store, clock) = setup();
    let now = lease_core::Clock::now(&clock);
    let deadline = now.mono + Duration::from_secs(1);
    let mut op =
        FenceOp::new(cfg(), Entropy::from_seed(3), KEY, 1, b"one".to_vec()).until(deadline);
    let Output::Call(_, _get) = op.poll(now) else {
        panic!("expected the read")
    };
    let later = lease_core::Now {
        mono: deadline + Duration::from_millis(500),
        wall: now.wall,
    };
    match op.poll(later) {
        Output::Wait(at) => assert!(
            at > later.mono,
            "woken at {at:?}, not after {:?}",
            later.mono
        ),
        other => panic!("expected a wait for the reply, got {other:?}"),
    }
}

#[test]
fn a_write_of_unknown_outcome_is_settled_by_reads_past_the_retry_budget() {
    // The write is applied but its reply is lost; the reads that follow
    // fail (503) more times than the retry budget allows. Giving up would
    // leave a write that landed reported as an error: the reads go on
    // until one settles it (the operation's deadline still bounds them).
    let (store, clock) = setup();
    let mut c = cfg();
    c.max_attempts = 2;
    let mut op = FenceOp::new(c, Entropy::from_seed(9), KEY, 4, b"data".to_vec());
    let (mut reads, mut wrote) = (0, false);
    let (calls, outcome) = run_by_hand(&mut op, &clock, |call, _| {
        let reply = pollster::block_on(store.call(call.clone()));
        match call {
            lease_core::StoreOp::Put { .. } => {
                wrote = true;
                StoreReply::transport(TransportErrorKind::Timeout, "reply lost")
            }
            _ if wrote && reads < 4 => {
                reads += 1;
                StoreReply::new(ReplyKind::ServerError {
                    status: 503,
                    code: Some("SlowDown".into()),
                })
            }
            _ => reply,
        }
    });
    assert!(
        matches!(outcome, Ok(FenceOutcome::Accepted { .. })),
        "{outcome:?} after {calls:?}"
    );
    assert_eq!(stored(&store).token, 4);
    // One PUT only: the reads settled it, nothing was written again.
    assert_eq!(calls.iter().filter(|(v, _)| v == "Put").count(), 1);
}
