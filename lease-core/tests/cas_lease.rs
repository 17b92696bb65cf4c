//! Every branch of the CAS-lease protocol (`docs/design.md` §3), against the in-memory
//! store with scripted faults, with round-trip counts asserted.

mod support;

use lease_core::client::drive;
use lease_core::protocol::BreakRequest;
use lease_core::protocol::{HoldLimit, Holder, HolderExit};
use lease_core::record::RecordErrorKind;
use lease_core::store::{PutCondition, ReplyKind, TransportErrorKind};
use lease_core::time::StoreDate;
use lease_core::{
    AcquireOutcome, BreakOutcome, Event, Lease, LeaseError, LostReason, ReleaseOutcome,
    RenewOutcome,
};
use lease_core::{
    Clock, Elector, ElectorExit, Entropy, Etag, LeaseConfig, LeaseOp, LeaseRecord, Machine,
    MemStore, Mono, Output, Store, StoreOp, StoreReply, UnixMillis, VirtualClock,
};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::Duration;
use support::EPOCH;

const KEY: &str = "locks/job";

/// What the scripted store does with one call.
#[derive(Clone, Debug)]
enum Fault {
    /// Apply the call to the store, answer truthfully.
    Pass,
    /// Do not apply it; answer this instead.
    Reply(ReplyKind),
    /// Apply it, then answer this instead (a lost or rewritten reply).
    ApplyThen(ReplyKind),
    /// Apply a foreign write first, then the call.
    Before(StoreOp),
    /// Advance the virtual clock, then pass.
    Slow(Duration),
}

struct Scripted {
    store: MemStore,
    clock: VirtualClock,
    script: RefCell<VecDeque<Fault>>,
    log: RefCell<Vec<StoreOp>>,
    dated: bool,
}

impl Scripted {
    fn new() -> Scripted {
        let clock = VirtualClock::new(EPOCH);
        Scripted {
            store: MemStore::new(clock.clone()),
            clock,
            script: RefCell::default(),
            log: RefCell::default(),
            dated: true,
        }
    }

    fn script(&self, faults: impl IntoIterator<Item = Fault>) {
        self.script.borrow_mut().extend(faults);
    }

    fn ops(&self) -> Vec<String> {
        self.log
            .borrow()
            .iter()
            .map(|op| match op {
                StoreOp::Put {
                    condition: PutCondition::IfAbsent,
                    ..
                } => "PUT-absent".to_string(),
                StoreOp::Put {
                    condition: PutCondition::IfMatch(_),
                    ..
                } => "PUT-match".to_string(),
                other => other.verb().to_string(),
            })
            .collect()
    }

    fn record(&self) -> LeaseRecord {
        let (_, body) = self.store.get(KEY).expect("lease object exists");
        LeaseRecord::decode(&body).expect("readable record")
    }

    fn raw_put(&self, body: &[u8]) -> Etag {
        match self
            .store
            .apply(&StoreOp::Put {
                key: KEY.into(),
                body: body.to_vec(),
                condition: PutCondition::None,
            })
            .kind
        {
            ReplyKind::Written { etag: Some(e) } => e,
            other => panic!("raw put failed: {other:?}"),
        }
    }
}

impl Store for Scripted {
    async fn call(&self, op: StoreOp) -> StoreReply {
        self.log.borrow_mut().push(op.clone());
        let fault = self.script.borrow_mut().pop_front().unwrap_or(Fault::Pass);
        let date = Some(StoreDate::exact(self.clock.wall()));
        let mut reply = match fault {
            Fault::Pass => self.store.apply(&op),
            Fault::Reply(kind) => StoreReply {
                kind,
                date,
                version_id: None,
            },
            Fault::ApplyThen(kind) => {
                self.store.apply(&op);
                StoreReply {
                    kind,
                    date,
                    version_id: None,
                }
            }
            Fault::Before(foreign) => {
                self.store.apply(&foreign);
                self.store.apply(&op)
            }
            Fault::Slow(d) => {
                self.clock.advance(d);
                self.store.apply(&op)
            }
        };
        if !self.dated {
            reply.date = None;
        }
        reply
    }
}

fn cfg(holder: &str) -> LeaseConfig {
    let mut c = LeaseConfig::new(KEY, holder, Duration::from_secs(30));
    c.date_resolution = Duration::from_millis(1);
    c
}

fn run<M: Machine>(m: M, s: &Scripted) -> M::Outcome {
    support::run(s, &s.clock, m)
}

fn acquire(s: &Scripted, holder: &str, seed: u128) -> Result<AcquireOutcome, LeaseError> {
    run(LeaseOp::acquire(cfg(holder), Entropy::from_seed(seed)), s)
}

fn acquired(s: &Scripted, holder: &str, seed: u128) -> Lease {
    match acquire(s, holder, seed) {
        Ok(AcquireOutcome::Acquired(l)) => l,
        other => panic!("expected acquired, got {other:?}"),
    }
}

/// An operator's break of the version `etag` names.
fn break_lease(s: &Scripted, etag: Etag, seed: u128) -> Result<BreakOutcome, LeaseError> {
    let req = BreakRequest {
        etag,
        token_floor: None,
    };
    run(
        LeaseOp::break_lease(cfg("op"), Entropy::from_seed(seed), req),
        s,
    )
}

/// b's create of a lease with token 1.
fn theirs_created() -> StoreOp {
    let theirs = LeaseRecord {
        token: 1,
        holder: "b".into(),
        nonce: "theirs".into(),
        ..s_record(EPOCH, 30)
    };
    StoreOp::Put {
        key: KEY.into(),
        body: theirs.encode(),
        condition: PutCondition::IfAbsent,
    }
}

fn throttled() -> ReplyKind {
    ReplyKind::Throttled { retry_after: None }
}

fn timeout() -> ReplyKind {
    ReplyKind::Transport {
        kind: TransportErrorKind::Timeout,
        message: "timed out".into(),
    }
}

fn server_error() -> ReplyKind {
    ReplyKind::ServerError {
        status: 500,
        code: Some("InternalError".into()),
    }
}

#[test]
fn acquire_missing_takes_two_calls_and_token_one() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    assert_eq!(s.ops(), ["GET", "PUT-absent"]);
    assert_eq!(lease.token, 1);
    let r = s.record();
    assert_eq!((r.token, r.holder.as_str(), r.released), (1, "a", false));
    assert_eq!(r.acquisition, lease.acquisition);
    assert_eq!(r.expires_at, EPOCH + Duration::from_secs(30));
}

#[test]
fn busy_costs_one_get_and_no_put() {
    let s = Scripted::new();
    acquired(&s, "a", 1);
    s.log.borrow_mut().clear();
    match acquire(&s, "b", 2) {
        Ok(AcquireOutcome::Busy(b)) => assert_eq!((b.holder.as_str(), b.token), ("a", 1)),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.ops(), ["GET"]);
}

#[test]
fn expired_lease_is_taken_with_token_plus_one_in_one_write() {
    let s = Scripted::new();
    acquired(&s, "a", 1);
    // Not expired until the store's date is past expires_at.
    s.clock.advance(Duration::from_secs(30));
    assert!(matches!(acquire(&s, "b", 2), Ok(AcquireOutcome::Busy(_))));
    s.clock.advance(Duration::from_millis(1));
    s.log.borrow_mut().clear();
    let lease = acquired(&s, "b", 3);
    assert_eq!(s.ops(), ["GET", "PUT-match"]);
    assert_eq!(lease.token, 2);
}

#[test]
fn renew_and_release_take_one_call_each() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    s.clock.advance(Duration::from_secs(10));
    s.log.borrow_mut().clear();
    let renewed = match run(
        LeaseOp::renew(cfg("a"), Entropy::from_seed(2), lease.clone()),
        &s,
    ) {
        Ok(RenewOutcome::Renewed(l)) => l,
        other => panic!("{other:?}"),
    };
    assert_eq!(s.ops(), ["PUT-match"]);
    assert_eq!(
        (renewed.token, &renewed.acquisition),
        (lease.token, &lease.acquisition)
    );
    assert_ne!(renewed.etag, lease.etag);
    assert!(renewed.valid_until > lease.valid_until);
    assert_eq!(s.record().expires_at, EPOCH + Duration::from_secs(40));
    s.log.borrow_mut().clear();
    assert_eq!(
        run(
            LeaseOp::release(cfg("a"), Entropy::from_seed(3), renewed),
            &s
        ),
        Ok(ReleaseOutcome::Released { token: 1 })
    );
    assert_eq!(s.ops(), ["PUT-match"]);
    let r = s.record();
    assert!(r.released);
    assert_eq!(r.token, 1, "release keeps the token");
    assert!(
        r.expires_at <= s.clock.wall(),
        "released records read as expired to simple clients"
    );
    // Released: the next acquirer takes it at once, with token + 1.
    assert_eq!(acquired(&s, "b", 4).token, 2);
}

#[test]
fn cached_free_read_acquires_without_a_read() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    run(LeaseOp::release(cfg("a"), Entropy::from_seed(2), lease), &s).unwrap();
    let seen = match run(LeaseOp::inspect(cfg("b"), Entropy::from_seed(3)), &s) {
        Ok(Some(o)) => o,
        other => panic!("{other:?}"),
    };
    assert!(seen.free);
    s.log.borrow_mut().clear();
    match run(
        LeaseOp::acquire_from(cfg("b"), Entropy::from_seed(4), &seen),
        &s,
    ) {
        Ok(AcquireOutcome::Acquired(l)) => assert_eq!(l.token, 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.ops(), ["PUT-match"]);
}

/// Failure mode 1: a transport-level retry turns our successful PUT into a 412.
#[test]
fn precondition_failed_after_our_own_write_is_resolved_by_nonce() {
    let s = Scripted::new();
    s.script([Fault::Pass, Fault::ApplyThen(ReplyKind::PreconditionFailed)]);
    let lease = acquired(&s, "a", 1);
    assert_eq!(s.ops(), ["GET", "PUT-absent", "GET"]);
    assert_eq!(lease.etag, s.store.get(KEY).unwrap().0);
    assert_eq!(s.record().nonce, lease.record.nonce);
}

/// Failure mode 1 when the re-read cannot settle it (model finding A): a
/// transport's retry turned our applied create into a 412, and every read
/// after it fails. The refusal does not settle the write, so the error hands
/// it on as a claim, and the next acquire that carries the claim takes the
/// record over instead of waiting behind its own lease for a ttl. The same
/// in every protocol (the rule is the call engine's).
#[test]
fn a_refused_write_not_read_back_is_handed_on_as_a_claim() {
    use lease_core::Protocol;
    for protocol in [Protocol::Cas, Protocol::Epochs, Protocol::Mutex] {
        let s = Scripted::new();
        let config = |holder: &str| LeaseConfig {
            protocol,
            ..cfg(holder)
        };
        // The first read (GET, or LIST for epochs, then the marker's
        // create) passes; the create applies and is answered 412; every
        // call after it fails.
        s.script([Fault::Pass]);
        if protocol == Protocol::Epochs {
            s.script([Fault::Pass]);
        }
        s.script([Fault::ApplyThen(ReplyKind::PreconditionFailed)]);
        s.script(std::iter::repeat_n(Fault::Reply(server_error()), 50));
        let err = match run(LeaseOp::acquire(config("a"), Entropy::from_seed(1)), &s) {
            Err(e @ LeaseError::GaveUp { .. }) => e,
            other => panic!("{protocol:?}: expected GaveUp, got {other:?}"),
        };
        s.script.borrow_mut().clear();
        let ours = s
            .store
            .keys(KEY)
            .iter()
            .map(|k| LeaseRecord::decode(&s.store.get(k).unwrap().1).unwrap())
            .find(|r| !r.is_epochs_marker())
            .expect("the create applied");
        let [claim] = err.unsettled() else {
            panic!("the refused write is handed on: {err:?}")
        };
        assert_eq!(
            (
                claim.holder.as_str(),
                claim.acquisition.as_str(),
                claim.token
            ),
            ("a", ours.acquisition.as_str(), ours.token),
            "{protocol:?}"
        );
        // Without the claim the next acquire waits behind its own record...
        match run(LeaseOp::acquire(config("a"), Entropy::from_seed(2)), &s) {
            Ok(AcquireOutcome::Busy(b)) => assert_eq!(b.holder, "a", "{protocol:?}"),
            other => panic!("{protocol:?}: expected Busy, got {other:?}"),
        }
        // ...with it, it takes the record over.
        let op =
            LeaseOp::acquire(config("a"), Entropy::from_seed(3)).with_claims(vec![claim.clone()]);
        match run(op, &s) {
            Ok(AcquireOutcome::Acquired(l)) => assert!(l.token > ours.token, "{protocol:?}"),
            other => panic!("{protocol:?}: expected Acquired, got {other:?}"),
        }
    }
}

/// A late create (model finding C): our create is held in the network past
/// its timeout, the re-read finds another's lease and the acquire ends
/// `Busy`. The other's create is then given back (deleted) and ours lands.
/// The `Busy` carries our open create as a claim: with it, the next
/// acquire takes the record over; without it, we would wait behind our
/// own lease for a ttl, and everyone with us.
#[test]
fn busy_hands_on_a_create_still_in_flight_as_a_claim() {
    let s = Scripted::new();
    s.script([
        Fault::Pass,
        // Our create: no reply in time, not applied (yet).
        Fault::Reply(timeout()),
        // Their create lands before our re-read.
        Fault::Before(theirs_created()),
    ]);
    let busy = match acquire(&s, "a", 1) {
        Ok(AcquireOutcome::Busy(b)) => b,
        other => panic!("expected Busy, got {other:?}"),
    };
    assert_eq!(s.ops(), ["GET", "PUT-absent", "GET"]);
    assert_eq!(busy.holder, "b");
    let [claim] = &busy.unsettled[..] else {
        panic!("the open create is handed on: {busy:?}")
    };
    // Theirs is given back; ours lands late.
    let ours = s.log.borrow()[1].clone();
    s.store.apply(&StoreOp::Delete {
        key: KEY.into(),
        if_match: None,
    });
    assert!(matches!(
        s.store.apply(&ours).kind,
        ReplyKind::Written { .. }
    ));
    assert_eq!(
        (s.record().holder.as_str(), s.record().acquisition.as_str()),
        ("a", claim.acquisition.as_str())
    );
    match acquire(&s, "a", 2) {
        Ok(AcquireOutcome::Busy(b)) => {
            assert_eq!(b.holder, "a", "without the claim: our own record")
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    let op = LeaseOp::acquire(cfg("a"), Entropy::from_seed(3)).with_claims(busy.unsettled.to_vec());
    match run(op, &s) {
        Ok(AcquireOutcome::Acquired(l)) => assert_eq!(l.token, 2),
        other => panic!("expected Acquired, got {other:?}"),
    }
}

#[test]
fn precondition_failed_because_another_won_reports_busy() {
    let s = Scripted::new();
    s.script([Fault::Pass, Fault::Before(theirs_created())]);
    match acquire(&s, "a", 1) {
        Ok(AcquireOutcome::Busy(b)) => assert_eq!(b.holder, "b"),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.ops(), ["GET", "PUT-absent", "GET"]);
}

fn s_record(at: UnixMillis, ttl_s: u64) -> LeaseRecord {
    LeaseRecord {
        token: 1,
        expires_at: at + Duration::from_secs(ttl_s),
        holder: String::new(),
        acquisition: "s".into(),
        nonce: "n".into(),
        acquired_at: None,
        ttl_ms: None,
        released: false,
        released_at: None,
        meta: Default::default(),
        protocol: None,
        strays: false,
        runs: Vec::new(),
        foreign: None,
        owned_by: None,
    }
}

/// Failure mode 7: 409 ConditionalRequestConflict is retried after a re-read.
#[test]
fn conflict_is_retried_after_a_reread() {
    let s = Scripted::new();
    s.script([Fault::Pass, Fault::Reply(ReplyKind::Conflict)]);
    let lease = acquired(&s, "a", 1);
    assert_eq!(s.ops(), ["GET", "PUT-absent", "GET", "PUT-absent"]);
    assert_eq!(lease.token, 1);
}

#[test]
fn unknown_write_outcome_applied_means_acquired() {
    for kind in [timeout(), server_error()] {
        let s = Scripted::new();
        s.script([Fault::Pass, Fault::ApplyThen(kind.clone())]);
        let lease = acquired(&s, "a", 1);
        assert_eq!(s.ops(), ["GET", "PUT-absent", "GET"], "{kind:?}");
        assert_eq!(s.record().nonce, lease.record.nonce);
    }
}

#[test]
fn unknown_write_outcome_not_applied_means_retry() {
    let s = Scripted::new();
    acquired(&s, "a", 1);
    s.clock.advance(Duration::from_secs(31));
    s.log.borrow_mut().clear();
    s.script([Fault::Pass, Fault::Reply(timeout())]);
    let lease = acquired(&s, "b", 2);
    assert_eq!(s.ops(), ["GET", "PUT-match", "GET", "PUT-match"]);
    assert_eq!(lease.token, 2);
}

#[test]
fn throttling_backs_off_with_retry_after_and_is_bounded() {
    let s = Scripted::new();
    s.script([Fault::Reply(ReplyKind::Throttled {
        retry_after: Some(Duration::from_secs(3)),
    })]);
    let before = s.clock.now().mono;
    acquired(&s, "a", 1);
    assert_eq!(s.ops(), ["GET", "GET", "PUT-absent"]);
    assert!(
        s.clock.now().mono - before >= Duration::from_secs(3),
        "Retry-After honoured"
    );

    let s = Scripted::new();
    s.script(std::iter::repeat_n(Fault::Reply(throttled()), 100));
    match acquire(&s, "a", 1) {
        Err(LeaseError::GaveUp { attempts, last, .. }) => {
            assert_eq!(attempts, cfg("a").max_attempts + 1);
            assert!(last.contains("throttled"), "{last}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.log.borrow().len() as u32, cfg("a").max_attempts + 1);
}

#[test]
fn backoff_delays_grow_and_are_jittered() {
    let s = Scripted::new();
    let c = LeaseConfig {
        max_attempts: 4,
        ..cfg("a")
    };
    let mut op = LeaseOp::acquire(c, Entropy::from_seed(9));
    let mut waits = vec![];
    let mut now = s.clock.now();
    for _ in 0..4 {
        let Output::Call(id, _) = op.poll(now) else {
            panic!("expected a call")
        };
        op.handle_reply(now, id, StoreReply::new(throttled()));
        let Output::Wait(at) = op.poll(now) else {
            panic!("expected a wait")
        };
        waits.push(at - now.mono);
        now.mono = at;
    }
    // base 100 ms doubling, equal jitter: [50,100], [100,200], [200,400], [400,800].
    for (i, w) in waits.iter().enumerate() {
        let cap = 100u64 << i;
        assert!(
            (cap / 2..=cap).contains(&(w.as_millis() as u64)),
            "wait {i}: {w:?}"
        );
    }
}

#[test]
fn terminal_errors_stop_at_once() {
    let cases = [
        (
            ReplyKind::Denied {
                code: Some("AccessDenied".into()),
                message: None,
            },
            "Denied",
        ),
        (ReplyKind::NoSuchBucket, "NoSuchBucket"),
        (
            ReplyKind::Unsupported {
                status: 501,
                code: Some("NotImplemented".into()),
            },
            "Unsupported",
        ),
        (
            ReplyKind::Unexpected {
                status: 400,
                code: Some("Weird".into()),
                message: None,
            },
            "Unexpected",
        ),
    ];
    for (kind, name) in cases {
        let s = Scripted::new();
        s.script([Fault::Reply(kind)]);
        let err = acquire(&s, "a", 1).unwrap_err();
        assert!(format!("{err:?}").starts_with(name), "{err:?}");
        assert_eq!(s.ops(), ["GET"], "{name}: no retry");
    }
    // On the write, too: the error is reported, not retried.
    let s = Scripted::new();
    s.script([
        Fault::Pass,
        Fault::Reply(ReplyKind::Unsupported {
            status: 400,
            code: Some("NotImplemented".into()),
        }),
    ]);
    assert!(matches!(
        acquire(&s, "a", 1),
        Err(LeaseError::Unsupported { status: 400, .. })
    ));
    assert_eq!(s.ops(), ["GET", "PUT-absent"]);
}

#[test]
fn unreadable_record_is_reported_and_never_overwritten() {
    let s = Scripted::new();
    let etag = s.raw_put(b"<html>not a lease</html>");
    match acquire(&s, "a", 1) {
        Err(LeaseError::Unreadable { etag: e, error, .. }) => {
            assert_eq!(e, etag);
            assert!(matches!(error.kind, RecordErrorKind::Syntax(_)));
            assert!(error.excerpt.starts_with("<html>"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.ops(), ["GET"]);
    assert_eq!(s.store.get(KEY).unwrap().1, b"<html>not a lease</html>");
}

#[test]
fn renew_is_lost_when_another_took_over() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    // Within a's validity only an operator's break lets b in.
    break_lease(&s, lease.etag.clone(), 5).unwrap();
    let b = acquired(&s, "b", 2);
    let out = run(LeaseOp::renew(cfg("a"), Entropy::from_seed(3), lease), &s);
    assert_eq!(
        out,
        Ok(RenewOutcome::Lost(LostReason::TakenBy {
            holder: "b".into(),
            token: b.token,
            released: false
        }))
    );
}

#[test]
fn renew_confirms_its_own_write_after_an_ambiguous_reply() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    s.script([Fault::ApplyThen(ReplyKind::PreconditionFailed)]);
    s.log.borrow_mut().clear();
    match run(LeaseOp::renew(cfg("a"), Entropy::from_seed(2), lease), &s) {
        Ok(RenewOutcome::Renewed(l)) => assert_eq!(l.etag, s.store.get(KEY).unwrap().0),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.ops(), ["PUT-match", "GET"]);
}

/// Failure mode 8: the deadline is a timer; it fires when no reply comes.
/// The renewal's write was never answered, so it may yet land: the loss is
/// announced at the deadline (an event), and the operation then reads on,
/// sending no write, until its own deadline, and ends saying the write's
/// outcome is unknown, handing it on as a claim.
#[test]
fn renew_deadline_fires_without_any_reply() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    let mut op = LeaseOp::renew(cfg("a"), Entropy::from_seed(2), lease.clone());
    let mut now = s.clock.now();
    let Output::Call(_, StoreOp::Put { .. }) = op.poll(now) else {
        panic!("expected the renew PUT")
    };
    // The reply never comes. Follow the machine's own timers.
    let mut steps = 0;
    let mut lost_at = None;
    let outcome = loop {
        steps += 1;
        assert!(steps < 200, "machine never gave up");
        match op.poll(now) {
            Output::Wait(at) => {
                if lost_at.is_none() {
                    assert!(at <= lease.valid_until, "a wait past the deadline: {at:?}");
                }
                now.mono = at;
            }
            Output::Call(_, call) => {
                // Re-reads after the request timeout; never answered either.
                assert!(
                    !call.is_write() || lost_at.is_none(),
                    "a write past the deadline"
                );
            }
            Output::Done(o) => break o,
            Output::Event(Event::Lost { token, reason }) => {
                assert_eq!((token, reason), (lease.token, LostReason::Expired));
                lost_at = Some(now.mono);
            }
            Output::Event(_) => {}
        }
    };
    assert_eq!(
        lost_at,
        Some(lease.valid_until),
        "the loss is told at the deadline"
    );
    match outcome {
        Err(LeaseError::GaveUp { unsettled, .. }) if unsettled.len() == 1 => {
            assert_eq!(unsettled[0].acquisition, lease.acquisition)
        }
        other => panic!("expected GaveUp with the renewal as a claim, got {other:?}"),
    }
}

#[test]
fn validity_ends_before_the_store_expiry() {
    let s = Scripted::new();
    s.clock.advance(Duration::from_millis(1234));
    let sent = s.clock.now();
    let lease = acquired(&s, "a", 1);
    let c = cfg("a");
    let valid_for = lease.valid_until - sent.mono;
    let store_for = Duration::from_millis(lease.record.expires_at.0 - sent.wall.0);
    // The local deadline leaves the drift margin and the date resolution.
    assert_eq!(store_for, c.ttl);
    assert_eq!(
        valid_for,
        c.ttl - Duration::from_millis(1) - c.drift_margin(Duration::ZERO)
    );
}

#[test]
fn without_store_dates_the_wall_clock_is_used_with_its_skew() {
    let mut s = Scripted::new();
    s.dated = false;
    let sent = s.clock.now();
    let lease = acquired(&s, "a", 1);
    let c = cfg("a");
    assert_eq!(
        lease.valid_until - sent.mono,
        c.ttl - c.max_skew - c.drift_margin(Duration::ZERO)
    );
    // A contender with no dates must wait out the skew too.
    s.clock.advance(c.ttl + Duration::from_millis(1));
    assert!(matches!(acquire(&s, "b", 2), Ok(AcquireOutcome::Busy(_))));
    s.clock.advance(c.max_skew);
    assert_eq!(acquired(&s, "b", 3).token, 2);
}

#[test]
fn release_after_loss_is_reported_not_raised() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    s.clock.advance(Duration::from_secs(31));
    acquired(&s, "b", 2);
    match run(LeaseOp::release(cfg("a"), Entropy::from_seed(3), lease), &s) {
        Ok(ReleaseOutcome::AlreadyLost(LostReason::TakenBy { holder, .. })) => {
            assert_eq!(holder, "b")
        }
        other => panic!("{other:?}"),
    }
    assert!(!s.record().released, "b's lease untouched");
}

/// Failure mode 2: a 429 or 5xx on release is neither success nor failure.
#[test]
fn throttled_or_failed_release_is_retried_until_confirmed() {
    for kind in [throttled(), server_error(), timeout()] {
        let s = Scripted::new();
        let lease = acquired(&s, "a", 1);
        s.log.borrow_mut().clear();
        s.script([Fault::Reply(kind.clone())]);
        assert_eq!(
            run(LeaseOp::release(cfg("a"), Entropy::from_seed(2), lease), &s),
            Ok(ReleaseOutcome::Released { token: 1 })
        );
        assert_eq!(s.ops(), ["PUT-match", "GET", "PUT-match"], "{kind:?}");
        assert!(s.record().released);
    }
    // Applied, but the reply said 503: the re-read shows our release.
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    s.script([Fault::ApplyThen(ReplyKind::Throttled { retry_after: None })]);
    assert_eq!(
        run(LeaseOp::release(cfg("a"), Entropy::from_seed(2), lease), &s),
        Ok(ReleaseOutcome::Released { token: 1 })
    );
    // Never confirmed: an error that says so, not a false success.
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    s.script(std::iter::repeat_n(Fault::Reply(server_error()), 100));
    assert!(matches!(
        run(LeaseOp::release(cfg("a"), Entropy::from_seed(2), lease), &s),
        Err(LeaseError::GaveUp { .. })
    ));
}

#[test]
fn inspect_reports_state() {
    let s = Scripted::new();
    assert_eq!(
        run(LeaseOp::inspect(cfg("x"), Entropy::from_seed(1)), &s),
        Ok(None)
    );
    let lease = acquired(&s, "a", 1);
    match run(LeaseOp::inspect(cfg("x"), Entropy::from_seed(1)), &s) {
        Ok(Some(o)) => {
            assert_eq!(
                (o.record.holder.as_str(), o.record.token, o.free),
                ("a", 1, false)
            );
            assert_eq!(o.etag, lease.etag);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn break_needs_the_etag_seen_and_keeps_the_token() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    assert!(matches!(
        break_lease(&s, Etag::new("stale"), 2),
        Err(LeaseError::Changed {
            current: Some(_),
            ..
        })
    ));
    assert_eq!(
        break_lease(&s, lease.etag.clone(), 3),
        Ok(BreakOutcome { token: 1 })
    );
    let r = s.record();
    assert!(r.released);
    assert_eq!(r.meta.get("broken_by").map(String::as_str), Some("op"));
    // The holder notices at its next renewal; the next acquirer gets token + 1.
    assert!(matches!(
        run(LeaseOp::renew(cfg("a"), Entropy::from_seed(4), lease), &s),
        Ok(RenewOutcome::Lost(LostReason::TakenBy {
            released: true,
            ..
        }))
    ));
    assert_eq!(acquired(&s, "b", 5).token, 2);
}

#[test]
fn break_of_an_unreadable_object_needs_a_token_floor() {
    let s = Scripted::new();
    let etag = s.raw_put(b"garbage");
    assert!(matches!(
        break_lease(&s, etag.clone(), 1),
        Err(LeaseError::Unreadable { .. })
    ));
    let req = BreakRequest {
        etag,
        token_floor: Some(41),
    };
    assert_eq!(
        run(
            LeaseOp::break_lease(cfg("op"), Entropy::from_seed(2), req),
            &s
        ),
        Ok(BreakOutcome { token: 41 })
    );
    assert_eq!(acquired(&s, "b", 3).token, 42);
}

#[test]
fn invalid_settings_fail_before_any_call() {
    let s = Scripted::new();
    let c = LeaseConfig::new(KEY, "a", Duration::from_secs(1));
    assert!(matches!(
        run(LeaseOp::acquire(c, Entropy::from_seed(1)), &s),
        Err(LeaseError::Config { .. })
    ));
    assert!(s.ops().is_empty());
}

#[test]
fn simple_clients_records_are_respected() {
    let s = Scripted::new();
    let exp = (EPOCH + Duration::from_secs(5)).as_secs_f64();
    s.raw_put(format!(r#"{{"expires_at": {exp}, "token": 9}}"#).as_bytes());
    assert!(matches!(acquire(&s, "a", 1), Ok(AcquireOutcome::Busy(b)) if b.token == 9));
    s.clock.advance(Duration::from_secs(6));
    // Above its token and the latest the store's time may have been at
    // the read, in ms (this store's dates are exact to 1 ms): a simple
    // client's token may be anything.
    let token = acquired(&s, "a", 2).token;
    assert_eq!(token, (EPOCH + Duration::from_secs(6)).0 + 1);
}

// ---- elector ----

fn elector_events(e: &mut Elector, s: &Scripted, until: Mono) -> Vec<Event> {
    let mut events = vec![];
    loop {
        let now = s.clock.now();
        match e.poll(now) {
            Output::Call(id, op) => {
                let reply = pollster::block_on(s.call(op));
                e.handle_reply(s.clock.now(), id, reply);
            }
            Output::Event(ev) => events.push(ev),
            Output::Wait(at) => {
                if at > until {
                    pollster::block_on(s.clock.sleep_until(until));
                    return events;
                }
                pollster::block_on(s.clock.sleep_until(at));
            }
            Output::Done(x) => panic!("elector finished: {x:?}"),
        }
    }
}

#[test]
fn elector_campaigns_renews_and_fails_over_after_a_crash() {
    let s = Scripted::new();
    let mut a = Elector::new(cfg("a"), Entropy::from_seed(1));
    let mut b = Elector::new(cfg("b"), Entropy::from_seed(2));
    let ev = elector_events(&mut a, &s, Mono(0));
    assert!(matches!(ev[0], Event::Acquired { token: 1, .. }), "{ev:?}");
    let ev = elector_events(&mut b, &s, s.clock.now().mono);
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::LeaderChanged(Some(l)) if l.holder == "a")),
        "{ev:?}"
    );
    // a keeps renewing for a minute while b polls.
    for _ in 0..6 {
        let t = s.clock.now().mono + Duration::from_secs(10);
        let ev = elector_events(&mut a, &s, t);
        assert!(
            ev.iter()
                .all(|e| matches!(e, Event::Renewed { token: 1, .. })),
            "{ev:?}"
        );
        assert!(elector_events(&mut b, &s, t)
            .iter()
            .all(|e| !matches!(e, Event::Acquired { .. })));
    }
    // a crashes (never polled again): b takes over within ttl + poll + margins.
    let crash = s.clock.now().mono;
    let c = cfg("b");
    let limit = crash + c.ttl + c.poll_every + c.poll_every / 10 + Duration::from_secs(1);
    let mut taken = None;
    while s.clock.now().mono < limit && taken.is_none() {
        let t = s.clock.now().mono + Duration::from_secs(1);
        for e in elector_events(&mut b, &s, t) {
            if let Event::Acquired { token, .. } = e {
                taken = Some((token, s.clock.now().mono));
            }
        }
    }
    let (token, _) = taken.expect("b took over within ttl + poll interval + margins");
    assert_eq!(token, 2);
}

#[test]
fn an_elector_ends_on_a_missing_bucket_instead_of_campaigning_forever() {
    let s = Scripted::new();
    s.script([Fault::Reply(ReplyKind::NoSuchBucket)]);
    let mut a = Elector::new(cfg("a"), Entropy::from_seed(1));
    let exit = pollster::block_on(drive(&mut a, &s, &s.clock, |_| {}));
    assert_eq!(exit, ElectorExit::Failed(LeaseError::no_such_bucket()));
    assert_eq!(s.ops(), ["GET"], "one call, then the end");
}

#[test]
fn an_elector_denied_from_the_start_ends_but_one_that_held_keeps_campaigning() {
    let denied = || {
        Fault::Reply(ReplyKind::Denied {
            code: Some("AccessDenied".into()),
            message: None,
        })
    };
    let s = Scripted::new();
    s.script([denied()]);
    let mut a = Elector::new(cfg("a"), Entropy::from_seed(1));
    let exit = pollster::block_on(drive(&mut a, &s, &s.clock, |_| {}));
    assert!(
        matches!(exit, ElectorExit::Failed(LeaseError::Denied { .. })),
        "{exit:?}"
    );

    // Credentials rotating under a leader: its renewals are denied until
    // the lease is lost; the campaign then goes on and wins again once the
    // store lets it in.
    let s = Scripted::new();
    let mut b = Elector::new(cfg("b"), Entropy::from_seed(2));
    let ev = elector_events(&mut b, &s, Mono(0));
    assert!(matches!(ev[0], Event::Acquired { token: 1, .. }), "{ev:?}");
    s.script((0..12).map(|_| denied()));
    let ev = elector_events(&mut b, &s, s.clock.now().mono + cfg("b").ttl * 2);
    let lost = ev
        .iter()
        .position(|e| matches!(e, Event::Lost { token: 1, .. }));
    let again = ev
        .iter()
        .position(|e| matches!(e, Event::Acquired { token: 2, .. }));
    assert!(
        matches!((lost, again), (Some(l), Some(a)) if l < a),
        "{ev:?}"
    );
    assert!(ev[..lost.unwrap_or(0)]
        .iter()
        .any(|e| matches!(e, Event::Error(LeaseError::Denied { .. }))));
}

#[test]
fn elector_resigns_by_releasing_and_the_next_takes_over_at_its_poll() {
    let s = Scripted::new();
    let mut a = Elector::new(cfg("a"), Entropy::from_seed(1));
    let mut b = Elector::new(cfg("b"), Entropy::from_seed(2));
    elector_events(&mut a, &s, Mono(0));
    elector_events(&mut b, &s, Mono(0));
    a.stop(s.clock.now());
    let exit = pollster::block_on(drive(&mut a, &s, &s.clock, |_| {}));
    assert_eq!(
        exit,
        ElectorExit::Resigned {
            released: Some(Ok(ReleaseOutcome::Released { token: 1 }))
        }
    );
    let resigned_at = s.clock.now().mono;
    let ev = elector_events(&mut b, &s, resigned_at + cfg("b").poll_every * 2);
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Acquired { token: 2, .. })),
        "{ev:?}"
    );
}

#[test]
fn elector_warns_at_risk_then_loses_when_renewals_fail() {
    let s = Scripted::new();
    let mut a = Elector::new(cfg("a"), Entropy::from_seed(1));
    elector_events(&mut a, &s, Mono(0));
    s.script(std::iter::repeat_n(Fault::Reply(timeout()), 1000));
    let ev = elector_events(&mut a, &s, Mono(60_000));
    let risk = ev
        .iter()
        .position(|e| matches!(e, Event::AtRisk { token: 1, .. }));
    let lost = ev.iter().position(|e| {
        matches!(
            e,
            Event::Lost {
                token: 1,
                reason: LostReason::Expired
            }
        )
    });
    assert!(risk.is_some() && lost.is_some() && risk < lost, "{ev:?}");
}

#[test]
fn holder_finishes_when_its_lease_is_broken() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    let mut h = Holder::new(cfg("a"), Entropy::from_seed(2), lease.clone());
    break_lease(&s, lease.etag.clone(), 3).unwrap();
    let mut events = vec![];
    let exit = pollster::block_on(drive(&mut h, &s, &s.clock, |e| events.push(e)));
    assert!(
        matches!(
            exit,
            HolderExit::Lost(LostReason::TakenBy { released: true, .. })
        ),
        "{exit:?}"
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::Lost { token: 1, .. })));
}

/// A holder under a run's time limit: a renewal under way when its work
/// is stopped ends at the limit's stop (not after its request timeout,
/// its retries or at the lease's deadline), and the release follows at
/// once and ends by the limit's end, however long the store keeps them
/// waiting.
#[test]
fn a_limited_holder_ends_its_renewal_at_the_stop_and_its_release_by_the_end() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    let t0 = s.clock.now().mono;
    let limit = HoldLimit {
        stop: t0 + Duration::from_secs(21),
        end: t0 + Duration::from_secs(33),
    };
    let mut h = Holder::new(cfg("a"), Entropy::from_seed(2), lease).limited(Some(limit));
    let at = |mono: Mono| {
        if mono > s.clock.now().mono {
            s.clock.advance(mono - s.clock.now().mono);
        }
        s.clock.now()
    };
    // Polled until it renews (every 10 s); the store never answers.
    let mut t = t0;
    loop {
        match h.poll(at(t)) {
            Output::Call(_, op) => {
                assert_eq!(op.verb(), "PUT", "{op:?}");
                break;
            }
            Output::Wait(until) => t = until,
            Output::Event(_) => {}
            Output::Done(exit) => panic!("{exit:?}"),
        }
    }
    // The work is stopped at the limit's stop.
    h.stop(at(limit.stop));
    let (mut t, mut calls) = (limit.stop, Vec::new());
    let exit = loop {
        match h.poll(at(t)) {
            Output::Call(_, op) => calls.push((t, op.verb())),
            Output::Wait(until) => t = until,
            Output::Event(_) => {}
            Output::Done(exit) => break exit,
        }
    };
    assert_eq!(
        calls.first(),
        Some(&(limit.stop, "PUT")),
        "the release, at once"
    );
    assert!(t <= limit.end, "done at {t:?}, the end {:?}", limit.end);
    assert!(
        matches!(
            exit,
            HolderExit::Resigned {
                released: Some(Err(LeaseError::GaveUp { .. }))
            }
        ),
        "{exit:?}"
    );
}

#[test]
fn a_renewal_confirmed_after_the_deadline_counts_as_lost() {
    let s = Scripted::new();
    let lease = acquired(&s, "a", 1);
    // The store is slow: the reply comes back after the local deadline.
    let late = lease.valid_until - s.clock.now().mono + Duration::from_millis(1);
    s.script([Fault::Slow(late)]);
    let out = run(LeaseOp::renew(cfg("a"), Entropy::from_seed(2), lease), &s);
    assert_eq!(out, Ok(RenewOutcome::Lost(LostReason::Expired)));
}

/// A record of a simple client (`{"expires_at": …}`, perhaps a token, none
/// of our fields) is a lease held by an unnamed holder: busy until it
/// expires by the store's clock, then taken over with `If-Match` and a
/// token no lower than the store's time in milliseconds (above any token a
/// counter can have reached); a simple client writing over our released
/// record is treated the same way.
#[test]
fn a_simple_clients_record_is_busy_until_it_expires_then_taken_over_above_it() {
    let s = Scripted::new();
    let expires = EPOCH + Duration::from_secs(20);
    let body = format!(r#"{{"expires_at": {}}}"#, expires.as_secs_f64());
    let etag = s.raw_put(body.as_bytes());
    match acquire(&s, "a", 1) {
        Ok(AcquireOutcome::Busy(b)) => {
            assert_eq!((b.holder.as_str(), b.token, b.expires_at), ("", 0, expires));
            assert_eq!(b.expires_in, Some(Duration::from_secs(20)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.ops(), ["GET"]);
    s.clock.advance(Duration::from_secs(22));
    s.log.borrow_mut().clear();
    let lease = acquired(&s, "a", 2);
    assert_eq!(s.ops(), ["GET", "PUT-match"]);
    let date_ms = s.clock.wall().0 / 1000 * 1000;
    assert!(lease.token >= date_ms, "{} < {date_ms}", lease.token);
    assert_ne!(lease.etag, etag);

    // Our release, then the simple client writes over it (`If-Match`, a
    // token of its own that is lower): our next acquisition stays above.
    let released = lease.token;
    assert!(matches!(
        run(LeaseOp::release(cfg("a"), Entropy::from_seed(3), lease), &s),
        Ok(ReleaseOutcome::Released { .. })
    ));
    let theirs = EPOCH + Duration::from_secs(40);
    s.raw_put(format!(r#"{{"expires_at": {}, "token": 7}}"#, theirs.as_secs_f64()).as_bytes());
    assert!(matches!(acquire(&s, "b", 4), Ok(AcquireOutcome::Busy(_))));
    s.clock.advance(Duration::from_secs(20));
    let next = acquired(&s, "b", 5);
    assert!(next.token > released, "{} <= {released}", next.token);
}

/// A contender that loses race after race (each time it writes over a
/// released record, another holder has taken the lease and given it back
/// before its re-read) is not failed for it: a lost race is another's
/// progress and spends no retry, so once the others stop it takes the
/// lease. (Under load, contenders used to give up after three lost races.)
#[test]
fn lost_races_spend_no_retries() {
    let s = Scripted::new();
    let released = |holder: &str, token: u64| {
        let mut r = LeaseRecord::decode(br#"{"v":1,"token":1,"expires_at":0.0}"#).unwrap();
        r.holder = holder.into();
        r.acquisition = format!("s-{holder}-{token}");
        r.nonce = format!("n-{token}");
        r.token = token;
        r.released = true;
        r.protocol = Some("cas".into());
        r
    };
    s.raw_put(&released("x", 1).encode());
    let races = u64::from(cfg("a").max_attempts) * 2;
    for n in 0..races {
        s.script([
            Fault::Pass,
            Fault::Before(StoreOp::Put {
                key: KEY.into(),
                body: released("y", 2 + n).encode(),
                condition: PutCondition::None,
            }),
        ]);
    }
    let lease = acquired(&s, "a", 1);
    assert_eq!(lease.token, 2 + races);
    let lost = s.ops().iter().filter(|op| *op == "PUT-match").count() as u64;
    assert_eq!(lost, races + 1, "every race lost, then the win");
}
