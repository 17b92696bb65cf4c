//! Promises the client layer's documentation makes that no other test
//! held (issue "the client layer tells the truth": every public promise
//! of `Leases`, `Leadership`, `acquire_within`, `Leases::run` and the
//! foreign-record path is a rule of the simulation or a deterministic
//! test; docs/verification.md lists which holds which). On the in-memory
//! store and a virtual clock.

mod support;

use core::convert::Infallible;
use lease_core::client::WorkError;
use lease_core::client::WorkStep::{self, Ended, Killed, Started, Stopping};
use lease_core::client::{join, Lead};
use lease_core::client::{time_needed, Step};
use lease_core::store::PutCondition;
use lease_core::{
    Claim, Clock, ElectorExit, Event, LeadError, Leadership, LeaseError, LeaseRecord, Leases,
    MemStore, Mono, Run, RunError, RunOutcome, Settings, Store, StoreOp, StoreReply, VirtualClock,
};
use pollster::block_on;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{acquired, drive_until, entropy, mem_world as world, record_at, Blind, Counted};

/// A 30 s ttl, no probe.
fn settings(holder: &str) -> Settings {
    Settings::new(holder)
        .ttl(Duration::from_secs(30))
        .probe(false)
}

fn client(store: &MemStore, clock: &VirtualClock, holder: &str) -> Leases<MemStore, VirtualClock> {
    Leases::new(store.clone(), clock.clone(), settings(holder), entropy).expect("valid settings")
}

/// "A clone is cheap and shares the claims and the probe's verdict"
/// (`client`, *The client*).
#[test]
fn a_clone_shares_the_claims_and_the_probes_verdict() {
    let (store, clock) = world();
    let calls = Arc::new(AtomicU64::new(0));
    let settings = Settings::new("a").ttl(Duration::from_secs(30));
    let a = Leases::new(Counted(store, calls.clone()), clock, settings, entropy).unwrap();
    acquired(block_on(a.acquire("k")));
    let probed = calls.load(Ordering::Relaxed);
    assert!(probed > 5, "the probe ran: {probed} calls");
    let b = a.clone();
    acquired(block_on(b.acquire("other")));
    assert_eq!(
        calls.load(Ordering::Relaxed) - probed,
        2,
        "the clone did not probe again: a GET and a create"
    );
    let claim = Claim {
        key: "k".into(),
        holder: "a".into(),
        acquisition: "s".into(),
        token: 9,
        live_until: Mono(u64::MAX),
    };
    a.add_claims("k", [claim.clone()]);
    assert_eq!(b.claims("k"), [claim]);
}

/// "`claims`: those that can still be live now".
#[test]
fn claims_that_can_no_longer_be_live_are_forgotten() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let now = clock.now().mono;
    let claim = Claim {
        key: "k".into(),
        holder: "a".into(),
        acquisition: "s".into(),
        token: 1,
        live_until: now + Duration::from_secs(1),
    };
    a.add_claims("k", [claim]);
    assert_eq!(a.claims("k").len(), 1);
    clock.advance(Duration::from_secs(2));
    assert!(a.claims("k").is_empty());
}

/// "A session claimed already keeps the later of the two ends"
/// (`Leases::add_claims`).
#[test]
fn a_sessions_claim_added_again_keeps_its_later_end() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let now = clock.now().mono;
    let claim = |token, secs| Claim {
        key: "k".into(),
        holder: "a".into(),
        acquisition: "s".into(),
        token,
        live_until: now + Duration::from_secs(secs),
    };
    a.add_claims("k", [claim(1, 60)]);
    // A later claim of the session that ends sooner: the record may still
    // be live until the first one's end.
    a.add_claims("k", [claim(2, 10)]);
    assert_eq!(a.claims("k"), [claim(2, 60)]);
    clock.advance(Duration::from_secs(30));
    assert_eq!(a.claims("k").len(), 1, "not forgotten at the shorter end");
    // One that ends later extends it.
    a.add_claims("k", [claim(3, 90)]);
    assert_eq!(a.claims("k"), [claim(3, 90)]);
}

/// A store whose writes fail (500, not applied) once `failing` is set.
#[derive(Clone)]
struct Failing(MemStore, Arc<AtomicBool>);

impl Store for Failing {
    async fn call(&self, op: StoreOp) -> StoreReply {
        if op.is_write() && self.1.load(Ordering::Relaxed) {
            return StoreReply::new(lease_core::store::ReplyKind::ServerError {
                status: 500,
                code: None,
            });
        }
        self.0.apply(&op)
    }
}

/// Client "a" on `store`, whose writes fail once the flag returned is set.
fn failing_client(
    store: MemStore,
    clock: &VirtualClock,
) -> (Leases<Failing, VirtualClock>, Arc<AtomicBool>) {
    let failing = Arc::new(AtomicBool::new(false));
    let a = Leases::new(
        Failing(store, failing.clone()),
        clock.clone(),
        settings("a"),
        entropy,
    );
    (a.unwrap(), failing)
}

/// "A run whose lease was not given back leaves a claim for the next
/// acquire".
#[test]
fn a_run_whose_lease_was_not_given_back_leaves_a_claim() {
    let (store, clock) = world();
    let (a, failing) = failing_client(store.clone(), &clock);
    // Once the job starts no renewal lands: the lease is lost at its
    // deadline, with renewals of unknown outcome behind it.
    let job = |_token| async {
        failing.store(true, Ordering::Relaxed);
        let until = clock.now().mono + Duration::from_secs(60);
        clock.sleep_until(until).await;
        Ok::<_, String>(())
    };
    // (Lost at the deadline, or, as the virtual clock jumps to the work's
    // end, finished past it: neither gives the lease back.)
    let out = block_on(a.run("k", Run::new(), job));
    assert!(
        matches!(
            out,
            Err(RunError::LeaseLost { .. } | RunError::Overrun { .. })
        ),
        "{out:?}"
    );
    let record = record_at(&store, "k");
    let claims = a.claims("k");
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!(
        (claims[0].acquisition.as_str(), claims[0].token),
        (record.acquisition.as_str(), 1)
    );
}

/// "A job finishing after the deadline is `Overrun`, never counted as
/// run" (`client`, *Holding a lease while work runs*).
#[test]
fn work_that_finishes_past_the_deadline_is_an_overrun() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    // The local validity of a lease taken now (another key, same settings).
    let t0 = clock.now().mono;
    let validity = acquired(block_on(a.acquire("other"))).valid_until - t0;
    // Work that keeps the thread past the deadline (as a blocking call
    // would) and then returns, with no await the holder could stop it at.
    let job = |_token| async {
        clock.advance(Duration::from_secs(40));
        Ok::<_, String>(7)
    };
    match block_on(a.run("k", Run::new(), job)) {
        Err(RunError::Overrun { token, late_by }) => {
            assert_eq!(token, 1);
            assert_eq!(late_by, Duration::from_secs(40) - validity);
        }
        other => panic!("expected Overrun, got {other:?}"),
    }
}

/// A store that allows one write per second per object, as GCS does.
struct Spaced(MemStore);

impl Store for Spaced {
    async fn call(&self, op: StoreOp) -> StoreReply {
        self.0.apply(&op)
    }

    fn min_write_interval(&self) -> Duration {
        Duration::from_secs(1)
    }
}

/// "`Leases::new` applies the store's write spacing".
#[test]
fn a_client_spaces_its_writes_as_its_store_asks() {
    let (store, clock) = world();
    let settings = Settings::new("a").probe(false);
    let a = Leases::new(Spaced(store.clone()), clock.clone(), settings, entropy).unwrap();
    assert_eq!(a.config("k").min_write_interval, Duration::from_secs(1));
    // A ttl whose renewals would come faster than the store allows is
    // refused, naming the setting.
    let short = Settings::new("a").ttl(Duration::from_secs(3));
    let err = Leases::new(Spaced(store), clock, short, entropy).unwrap_err();
    assert!(err.to_string().contains("min_write_interval"), "{err}");
}

/// Clients "a" and "b" campaign for "leader", driven until a leads and b
/// has seen it: b, a's and b's leaderships, and a's and b's campaigns.
#[allow(clippy::type_complexity)]
fn a_leads_and_b_follows(
    store: &MemStore,
    clock: &VirtualClock,
) -> (
    Leases<MemStore, VirtualClock>,
    [Leadership<VirtualClock>; 2],
    Pin<Box<impl Future<Output = ElectorExit>>>,
    Pin<Box<impl Future<Output = ElectorExit>>>,
) {
    let (a, b) = (client(store, clock, "a"), client(store, clock, "b"));
    let (la, campaign_a) = a.lead("leader");
    let (lb, campaign_b) = b.lead("leader");
    let (mut ca, mut cb) = (Box::pin(campaign_a), Box::pin(campaign_b));
    drive_until(&mut ca, || la.is_leader());
    drive_until(&mut cb, || lb.leader().is_some());
    (b, [la, lb], ca, cb)
}

/// "A resigned contender stops campaigning" (`Leadership::resign`).
#[test]
fn a_resigned_contender_never_leads() {
    let (store, clock) = world();
    let (b, [la, lb], ca, cb) = a_leads_and_b_follows(&store, &clock);
    // b has campaigned once and found a leading: it resigns.
    lb.resign();
    // a gives the lease back: b, resigned, does not take it.
    la.resign();
    let exit_b = block_on(cb);
    assert!(
        matches!(exit_b, ElectorExit::Resigned { released: None }),
        "{exit_b:?}"
    );
    let _ = block_on(ca);
    assert!(!lb.is_leader());
    assert_eq!(block_on(lb.until_leader()), Err(LeadError::Resigned));
    assert!(
        block_on(b.inspect("leader"))
            .unwrap()
            .unwrap()
            .record
            .released
    );
}

/// "`until_leader` errs once the campaign has ended: ... a store that
/// cannot host leases" (docs/guide.md).
#[test]
fn a_campaign_on_a_store_the_probe_refuses_ends_with_the_error() {
    let (store, clock) = world();
    let settings = Settings::new("a").ttl(Duration::from_secs(30));
    let a = Leases::new(Blind(store.clone()), clock, settings, entropy).unwrap();
    let (la, campaign) = a.lead("leader");
    let (waited, exit) = block_on(join(la.until_leader(), campaign));
    assert!(
        matches!(exit, ElectorExit::Failed(LeaseError::UnsafeStore { .. })),
        "{exit:?}"
    );
    assert!(
        matches!(
            waited,
            Err(LeadError::Failed(LeaseError::UnsafeStore { .. }))
        ),
        "{waited:?}"
    );
    assert!(store.get("leader").is_none(), "nothing leased");
}

/// "`leader()`: the leader as last observed; another node is seen at the
/// campaign's next poll".
#[test]
fn a_follower_sees_the_leader() {
    let (store, clock) = world();
    let (_, [_, lb], _, _) = a_leads_and_b_follows(&store, &clock);
    let seen = lb.leader().unwrap();
    assert_eq!((seen.holder.as_str(), seen.token), ("a", 1));
    assert!(!lb.is_leader());
}

/// "Events reach `Lead::on_event` in the documented order: ... then `Lost`
/// (or `Released`), `LeaderChanged(None)`".
#[test]
fn a_lost_term_is_followed_by_no_leader() {
    let (store, clock) = world();
    let (a, operator) = (client(&store, &clock, "a"), client(&store, &clock, "op"));
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let seen = events.clone();
    let (la, campaign) =
        a.lead(Lead::new("leader").on_event(move |e| seen.lock().unwrap().push(e.clone())));
    let mut campaign = Box::pin(campaign);
    drive_until(&mut campaign, || la.is_leader());
    let record = block_on(operator.inspect("leader")).unwrap().unwrap();
    block_on(operator.break_lease("leader", record.etag.as_str(), None)).unwrap();
    let start = clock.now().mono;
    drive_until(&mut campaign, || {
        let events = events.lock().unwrap();
        if clock.now().mono - start > Duration::from_secs(120) {
            panic!("no loss in two minutes: {events:?}");
        }
        let at = events.iter().position(|e| matches!(e, Event::Lost { .. }));
        at.is_some_and(|at| events.len() > at + 1)
    });
    let events = events.lock().unwrap();
    let at = events
        .iter()
        .position(|e| matches!(e, Event::Lost { .. }))
        .unwrap();
    assert!(
        matches!(events.get(at + 1), Some(Event::LeaderChanged(None))),
        "{events:?}"
    );
    assert!(
        matches!(events.first(), Some(Event::Acquired { .. })),
        "{events:?}"
    );
}

/// Records of a simple client may carry a token above the store's time in
/// milliseconds: "a greater one is carried on" (`LeaseRecord::next_token`).
#[test]
fn a_simple_clients_large_token_is_carried_on() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let big = 9_000_000_000_000_000u64;
    store.apply(&StoreOp::Put {
        key: "k".into(),
        body: format!(r#"{{"expires_at": 1.0, "token": {big}}}"#).into_bytes(),
        condition: PutCondition::None,
    });
    assert_eq!(acquired(block_on(a.acquire("k"))).token, big + 1);
}

/// With the flight recorder, "acquire, renew, release, hold and lead are
/// recorded" (docs/operations.md): a campaign's run replays identically.
#[cfg(feature = "trace")]
#[test]
fn a_campaign_is_recorded_and_replays() {
    use lease_core::trace::replay::{replay, Trace};
    use lease_core::trace::Recorder;
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let recorder = Recorder::default();
    a.record_to(recorder.clone());
    let (la, campaign) = a.lead("leader");
    let mut campaign = Box::pin(campaign);
    drive_until(&mut campaign, || la.is_leader());
    la.resign();
    let exit = block_on(campaign);
    assert!(matches!(exit, ElectorExit::Resigned { .. }), "{exit:?}");
    let text = recorder.to_jsonl();
    assert!(text.contains("\"elect\""), "{text}");
    let report = replay(&Trace::parse(&text).expect("a trace"));
    assert!(report.diverged().is_none(), "{text}");
    assert!(report.broken.is_empty(), "{:?}", report.broken);
}

/// A store every call of which takes `delay` (it moves the virtual clock).
struct Slow(MemStore, VirtualClock, Duration);

impl Store for Slow {
    async fn call(&self, op: StoreOp) -> StoreReply {
        self.1.advance(self.2);
        self.0.apply(&op)
    }
}

/// "An acquisition that took the time the job had: given back too"
/// (`Leases::run`: `NoTime` once the acquisition itself ate the time).
#[test]
fn a_run_whose_acquisition_ate_its_time_does_not_start_and_gives_the_lease_back() {
    use lease_core::LeaseConfig;
    let (store, clock) = world();
    let cfg = LeaseConfig::new("", "a", Duration::from_secs(30));
    // 24 s needed (two release reserves of 12 s); 25 s left: the job must
    // start within 13 s, and the acquisition's two calls take 16.
    assert_eq!(time_needed(&cfg), Duration::from_secs(24));
    let slow = Slow(store.clone(), clock.clone(), Duration::from_secs(8));
    let s = Leases::with_config(slow, clock.clone(), cfg, false, entropy).unwrap();
    let run = Run::new().within(Duration::from_secs(25));
    let ran = AtomicBool::new(false);
    let job = |_token: u64| {
        ran.store(true, Ordering::Relaxed);
        async { Ok::<_, String>(0u8) }
    };
    let out = block_on(s.run("k", run, job));
    assert!(matches!(out, Err(RunError::NoTime { .. })), "{out:?}");
    assert!(!ran.load(Ordering::Relaxed), "the job did not start");
    let record = record_at(&store, "k");
    assert!(record.released, "the lease was given back: {record:?}");
}

/// "`Leases::run` checks the time before the probe, and the
/// time the probe took is the run's no longer".
#[test]
fn a_scheduled_run_counts_the_probes_time_against_the_invocations() {
    let (store, clock) = world();
    let calls = Duration::from_millis(400);
    let settings = Settings::new("a").ttl(Duration::from_secs(30));
    let a = Leases::new(
        Slow(store.clone(), clock.clone(), calls),
        clock.clone(),
        settings,
        entropy,
    )
    .unwrap();
    // Too little even before the probe: nothing is sent.
    let t0 = clock.now().mono;
    let out = block_on(
        a.run("k", Run::new().within(Duration::from_secs(20)), |_| async {
            Ok::<_, String>(0u8)
        }),
    );
    assert!(matches!(out, Err(RunError::NoTime { .. })), "{out:?}");
    assert_eq!(clock.now().mono, t0, "no request sent");
    // Enough before the probe (25 s of the 24 needed), not after it.
    let out = block_on(
        a.run("k", Run::new().within(Duration::from_secs(25)), |_| async {
            Ok::<_, String>(0u8)
        }),
    );
    assert!(matches!(out, Err(RunError::NoTime { .. })), "{out:?}");
    assert!(
        clock.now().mono - t0 > Duration::from_secs(1),
        "the probe ran"
    );
    assert!(store.get("k").is_none(), "no lease taken");
}

/// Work for [`Leases::supervise`](lease_core::Leases::supervise)
/// that ends when told to (or on TERM, if `stops_on_term`), noting when
/// each signal came.
struct Work {
    clock: VirtualClock,
    ends_now: bool,
    stops_on_term: bool,
    termed_at: Option<Mono>,
    killed_at: Option<Mono>,
}

impl lease_core::client::Supervised for &mut Work {
    type Status = &'static str;

    fn wait(&mut self) -> impl core::future::Future<Output = &'static str> {
        let status = if self.killed_at.is_some() {
            Some("killed")
        } else if self.termed_at.is_some() && self.stops_on_term {
            Some("termed")
        } else if self.ends_now {
            Some("ended")
        } else {
            None
        };
        core::future::poll_fn(move |_| match status {
            Some(s) => core::task::Poll::Ready(s),
            None => core::task::Poll::Pending,
        })
    }

    fn terminate(&mut self) {
        self.termed_at.get_or_insert(self.clock.now().mono);
    }

    fn kill(&mut self) {
        self.killed_at.get_or_insert(self.clock.now().mono);
    }
}

fn work(clock: &VirtualClock, ends_now: bool, stops_on_term: bool) -> Work {
    Work {
        clock: clock.clone(),
        ends_now,
        stops_on_term,
        termed_at: None,
        killed_at: None,
    }
}

/// What [`supervise`] returns: the run's outcome (the work's status).
type Supervised = Result<RunOutcome<&'static str>, RunError<WorkError<Infallible, &'static str>>>;

/// Supervises `w` at `k` with `grace`, the store failing from the
/// acquisition on when `fail` is given: the outcome, the steps it
/// reported, and the acquired lease's deadline.
fn supervise<S: Store>(
    a: &Leases<S, VirtualClock>,
    w: &mut Work,
    grace: Duration,
    fail: Option<&AtomicBool>,
) -> (Supervised, Vec<WorkStep>, Option<Mono>) {
    let mut steps = Vec::new();
    let mut deadline = None;
    let run = Run::new().observe(|step| {
        if let Step::Acquired { lease, .. } = step {
            deadline = Some(lease.valid_until);
            if let Some(fail) = fail {
                fail.store(true, Ordering::Relaxed);
            }
        }
    });
    let start = |_token| async { Ok(w) };
    let out = block_on(a.supervise("k", run, start, grace, |s| steps.push(s)));
    (out, steps, deadline)
}

/// "`supervise`: with no renewal confirmed, TERM `grace` before the kill
/// time and KILL before the lease's deadline" (`client`, *Supervised work*, what
/// `lease run` does to CMD).
#[test]
fn supervised_work_is_termed_then_killed_before_the_deadline_when_renewals_fail() {
    use lease_core::client::stop_times;
    let (store, clock) = world();
    let (a, failing) = failing_client(store, &clock);
    let grace = Duration::from_secs(5);
    let mut w = work(&clock, false, false);
    let (out, steps, deadline) = supervise(&a, &mut w, grace, Some(&failing));
    assert_eq!(steps, [Started, Stopping { grace }, Killed, Ended]);
    assert!(
        matches!(out, Err(RunError::Job(WorkError::Stopped("killed")))),
        "{out:?}"
    );
    let deadline = deadline.expect("acquired");
    let (term_at, kill_at) = stop_times(&a.config("k"), deadline, grace);
    assert_eq!(w.termed_at, Some(term_at));
    assert_eq!(w.killed_at, Some(kill_at));
    assert!(
        kill_at < deadline,
        "KILL {kill_at:?} before the deadline {deadline:?}"
    );
}

/// "`supervise`: work that stops on TERM is not killed; work that ends by
/// itself is neither, and the lease is released" (`client`, *Supervised work*).
#[test]
fn supervised_work_that_ends_or_stops_on_term_is_not_killed() {
    let (store, clock) = world();
    let (a, failing) = failing_client(store.clone(), &clock);
    let grace = Duration::from_secs(5);

    let mut w = work(&clock, true, false);
    let (out, steps, _) = supervise(&a, &mut w, grace, None);
    assert_eq!(steps, [Started, Ended]);
    assert_eq!((w.termed_at, w.killed_at), (None, None));
    assert!(
        matches!(
            out,
            Ok(RunOutcome::Ran {
                output: "ended",
                ..
            })
        ),
        "{out:?}"
    );
    let record = LeaseRecord::decode(&store.get("k").expect("a record").1).unwrap();
    assert!(record.released, "the lease was released: {record:?}");

    let mut w = work(&clock, false, true);
    let (out, steps, _) = supervise(&a, &mut w, grace, Some(&failing));
    assert_eq!(steps, [Started, Stopping { grace }, Ended]);
    assert!(w.termed_at.is_some() && w.killed_at.is_none());
    assert!(
        matches!(out, Err(RunError::Job(WorkError::Stopped("termed")))),
        "{out:?}"
    );
}

/// A virtual clock whose sleeps end in the order of their times: the
/// earliest pending one moves the clock (`VirtualClock`'s own sleeps move
/// it to whichever is polled twice first).
#[derive(Clone)]
struct Ordered(VirtualClock, Arc<Mutex<Vec<Mono>>>);

/// A sleep of [`Ordered`]: registered while pending, dropped with it.
struct Sleep(Ordered, Mono, bool);

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let (clock, at) = (self.0.clone(), self.1);
        let now = clock.0.now().mono;
        let mut pending = clock.1.lock().unwrap();
        if at <= now {
            pending.retain(|p| *p != at);
            return std::task::Poll::Ready(());
        }
        if !self.2 {
            self.2 = true;
            pending.push(at);
        } else if pending.iter().all(|p| at <= *p) {
            clock.0.advance(at - now);
            pending.retain(|p| *p != at);
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if self.2 {
            let mut pending = self.0 .1.lock().unwrap();
            if let Some(i) = pending.iter().position(|p| *p == self.1) {
                pending.remove(i);
            }
        }
    }
}

impl lease_core::Clock for Ordered {
    fn now(&self) -> lease_core::Now {
        self.0.now()
    }
    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        Sleep(self.clone(), at, false)
    }
}

/// Found by review: with a time limit (`Run::within`) the run let go of
/// the work and gave the lease back before the work was told to stop, so
/// a child process ran on while another host could take the lease. The
/// work is now TERMed and KILLed before the run lets go of it.
#[test]
fn supervised_work_is_stopped_before_a_time_limited_run_gives_the_lease_back() {
    let (store, clock) = world();
    let ordered = Ordered(clock.clone(), Arc::default());
    let a = Leases::new(store, ordered, settings("a"), entropy).unwrap();
    let grace = Duration::from_secs(2);
    let mut w = work(&clock, false, false);
    let released_at = std::cell::Cell::new(None);
    let run = Run::new().within(Duration::from_secs(40)).observe(|step| {
        if let Step::Released(_) = step {
            released_at.set(Some(clock.now().mono));
        }
    });
    let held = &mut w;
    let start = move |_token| async move { Ok::<_, Infallible>(held) };
    let mut steps = Vec::new();
    let out = block_on(a.supervise("k", run, start, grace, |s| steps.push(s)));
    assert_eq!(
        steps,
        [Started, Stopping { grace }, Killed, Ended],
        "{out:?}"
    );
    let killed = w.killed_at.expect("killed");
    let released = released_at.get().expect("the lease was given back");
    assert!(
        killed <= released,
        "KILL at {killed:?}, the lease given back at {released:?}"
    );
    assert!(
        matches!(out, Err(RunError::Job(WorkError::Stopped("killed")))),
        "{out:?}"
    );
}

/// "`supervise` refuses a grace the ttl cannot cover, before anything is
/// done" (`client::check_grace`).
#[test]
fn supervise_refuses_a_grace_longer_than_the_ttl_allows() {
    let (store, clock) = world();
    let a = client(&store, &clock, "a");
    let mut w = work(&clock, true, false);
    let (out, steps, _) = supervise(&a, &mut w, Duration::from_secs(3600), None);
    assert!(
        matches!(out, Err(RunError::Lease(LeaseError::Config { .. }))),
        "{out:?}"
    );
    assert!(steps.is_empty());
    assert!(store.get("k").is_none(), "nothing was written");
}
