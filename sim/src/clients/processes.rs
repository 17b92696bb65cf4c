//! The clients: the product's code paths, each run as an async process.

use super::config::{Broken, ClientKind, LEASE_KEY};
use super::env::{claims_of, error_name, job, named, said_of, Env, Says};
use super::handles::{sim_entropy, SimClock, SimStore};
use super::state::{Ev, Said, Sample, TickReport};
use crate::world::clock::EPOCH;
use core::cell::{Cell, RefCell};
use core::convert::Infallible;
use core::future::{pending, poll_fn, Future};
use core::pin::{pin, Pin};
use core::task::Poll;
use lease_core::client::Revalidating;
use lease_core::client::{default_grace, Supervised, WorkError};
use lease_core::client::{drive, drive_until, Lead};
use lease_core::client::{time_needed, Step};
use lease_core::protocol::most_check_time;
use lease_core::tick::{Slots, Tick, MAX_RESULT_BYTES, MAX_TICK_BYTES};
use lease_core::{
    AcquireOutcome, ByEtagError, Clock, Elector, Entropy, Event, Leadership, LeaseError, LeaseOp,
    Leases, Mono, Protocol, ReleaseOutcome, RenewOutcome, Run, RunError, RunOutcome,
};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

/// What a singleton's run is for: scheduled tick `tick` (`retry`: the
/// platform's retries of it so far).
pub(super) struct Delivery {
    pub(super) tick: u64,
    pub(super) retry: u32,
}

/// One delivery to a singleton. With cas and epochs the run is for the
/// tick ([`Leases::run`] with a tick: a tick already completed does not
/// run again); the mutex keeps no record, so its runs are plain.
pub(super) async fn singleton_tick(env: Env, len: Duration, probe: bool, delivery: Delivery) {
    if env.with(|w| w.cfg.broken) == Some(Broken::StartPastDeadline) {
        return broken_singleton(env, len).await;
    }
    // A warm execution environment keeps what its last run left: the
    // claims live in the node (a crash loses them, as a new environment).
    let claims = env.with(|w| w.nodes[env.node].claims.clone());
    let key = env.cfg.key.clone();
    let s = process_client(&env, probe);
    s.add_claims(&key, claims);
    let check = if probe {
        most_check_time(&env.cfg)
    } else {
        Duration::ZERO
    };
    // With time limits, half the deliveries carry the invocation's
    // remaining time, from too little for the lease's requests to more
    // than the job needs: a job still running near the end is stopped and
    // the lease released. (Without, nothing is drawn: a schedule found
    // before time limits existed replays as it was.)
    let needed = time_needed(&env.cfg);
    let remaining = env.with(|w| {
        if !w.cfg.time_limits {
            return None;
        }
        let mut rng = w.rng.fork();
        (rng.unit() < 0.5).then(|| needed.mul_f64(0.8) + (len * 2).mul_f64(rng.unit()))
    });
    // A mutex singleton's run is plain (no record, no tick): with a time
    // limit and waiting CLI clients in the world (`cli_wait`), half of
    // them wait that long for a busy lease, as a library user's
    // `Run::wait` within the invocation's time, the wait cut short so
    // that a lease won is won in time.
    let wait = remaining
        .filter(|_| env.cfg.protocol == Protocol::Mutex)
        .and_then(|_| {
            env.with(|w| {
                let wait = w.cfg.cli_wait;
                (!wait.is_zero() && w.rng.fork().unit() < 0.5).then_some(wait)
            })
        });
    let op = env.op_start("singleton acquire", Some(check + wait.unwrap_or_default()));
    let mut acquire_open = true;
    let run = env.op_start("singleton run", None);
    env.with(|w| w.procs[env.pid].op = Some(op));
    // The tick's id.
    let long = env.with(|w| w.cfg.long_records);
    let tick_id = tick_id(delivery.tick, long);
    let id = Rc::new(RefCell::new(Some(tick_id.clone())));
    let envj = env.clone();
    let idj = id.clone();
    let work = move |token| {
        let envj = envj.clone();
        let tick = idj.borrow().clone();
        async move {
            let mut said = format!("{} token {token}", tick.as_deref().unwrap_or("no tick"));
            if long {
                // The token, then control characters to the longest
                // result kept as it is: JSON escapes them at six times
                // their length.
                said = format!("token {token} ");
                said.push_str(&"\u{1}".repeat(MAX_RESULT_BYTES - said.len()));
            }
            job(envj, token, len, tick).await;
            Ok::<_, String>(said)
        }
    };
    let observe = |step: Step<'_>| match step {
        Step::Acquired { lease, .. } => {
            let token = lease.token;
            env.say(
                op,
                Said::Acquired {
                    token,
                    session: None,
                },
            );
            env.op_end(op);
            acquire_open = false;
            env.with(|w| w.procs[env.pid].op = Some(run));
        }
        step => say_step(&env, (op, run), &step),
    };
    let mut how = Run::new().observe(observe);
    // A run given a time limit has returned when it is up: its time on the
    // node's clock, which may run slow, its pauses not counted, 100 ms
    // for the wake-ups at its end (its acquisition ends by the job's stop
    // time, its renewals too, its release by the end).
    let limit = remaining.map(|left| {
        let drift = 1.0 + 2.0 * env.with(|w| w.cfg.max_drift);
        env.op_start_exact(
            "singleton time limit",
            left.mul_f64(drift) + Duration::from_millis(100),
        )
    });
    env.with(|w| w.procs[env.pid].op = Some(op));
    if let Some(left) = remaining {
        how = how.within(left);
    }
    let given = Tick::new(tick_id).expect("a valid id");
    let result = if env.cfg.protocol == Protocol::Mutex {
        let ran = match wait {
            Some(wait) => s.run(&key, how.wait(wait), work).await,
            None => s.run(&key, how, work).await,
        };
        ran.map(|out| match out {
            RunOutcome::Ran { .. } => "ran",
            RunOutcome::Skipped { .. } => "skipped",
            RunOutcome::AlreadyRan { .. } => "already ran (impossible without a tick)",
            RunOutcome::TooLate { .. } => "too late (impossible without a slot)",
        })
    } else {
        s.run(&key, how.tick(&given), work)
            .await
            .map(|out| match out {
                RunOutcome::Ran { recorded, .. } => {
                    report_tick(&env, id.borrow().clone().unwrap_or_default(), recorded);
                    "ran"
                }
                RunOutcome::AlreadyRan { .. } => "already ran",
                RunOutcome::Skipped { .. } => "skipped",
                RunOutcome::TooLate { .. } => "too late",
            })
    };
    let said = match &result {
        // A run that ran says nothing of its release (it may have
        // expired on its own): nothing to judge but the job.
        Ok(what) => Said::Other((*what).into()),
        Err(e) => said_of_run_error(&env, e, (acquire_open, remaining, probe)),
    };
    let said = end_acquisition(&env, (op, acquire_open, limit), said);
    // Merged, not replaced: a duplicate tick running alongside on the
    // same node must not drop the claims this run left.
    let left = s.claims(&key);
    env.with(|w| {
        let node = &mut w.nodes[env.node];
        for claim in left {
            node.claims.retain(|c| c.acquisition != claim.acquisition);
            node.claims.push(claim);
        }
        // A failed run is retried by the platform (Lambda retries an
        // asynchronous invocation twice), half a ttl later.
        let Delivery { tick, retry } = delivery;
        if result.is_err() && retry < PLATFORM_RETRIES {
            let at = w.now + w.cfg.ttl.as_millis() as u64 / 2;
            let node = env.node;
            w.schedule(
                at,
                Ev::Deliver {
                    node,
                    tick,
                    retry: retry + 1,
                },
            );
        }
    });
    env.say(run, said);
    env.op_end(run);
}

/// Says what a run's step says, its acquisition aside: a busy on the
/// acquisition's operation `op`, the holding's on the run's `run`.
pub(super) fn say_step(env: &Env, (op, run): (usize, usize), step: &Step<'_>) {
    match step {
        Step::Skipped(busy) => env.say(
            op,
            Said::Busy {
                holder: busy.holder.clone(),
                token: busy.token,
                expires: busy.expires_at.0.saturating_sub(EPOCH.0),
            },
        ),
        Step::Hold(Event::Renewed { token, .. }) => env.say(run, Said::Renewed { token: *token }),
        Step::Acquired { .. } | Step::Hold(_) | Step::Released(_) => {}
        Step::ReleaseFailed(_) => env.say(run, Said::Other("release failed".into())),
    }
}

/// What a run's error says (`acquire_open`: it ended before the lease
/// was taken; the run's time limit, `remaining`, and whether it probed).
pub(super) fn said_of_run_error<E: std::fmt::Debug>(
    env: &Env,
    e: &RunError<E>,
    (acquire_open, remaining, probe): (bool, Option<Duration>, bool),
) -> Said {
    match e {
        RunError::Tick(_) => Said::Other("tick refused".into()),
        // The store's check did not fit the invocation's time (another
        // client's probe under way, a crashed prober's claim not lapsed):
        // the run could not wait, and said so. Not a failure of the
        // acquire: a run with the check's whole time waits it out (a run
        // given that much is judged as any).
        RunError::Lease(LeaseError::GaveUp { last, .. })
            if remaining.is_some_and(|left| left < most_check_time(&env.cfg))
                && probe
                && last.contains("capability") =>
        {
            Said::Other("no time for the store's check".into())
        }
        // (A pool's writes are judged each in its own seat's lease.)
        RunError::Lease(e) => Said::Failed {
            acquire: acquire_open,
            what: error_name(e),
            claims: claims_of(e),
        },
        RunError::LeaseLost { reason, .. } => Said::Lost {
            named: named(reason),
        },
        RunError::Job(_) => Said::Other("job failed".into()),
        RunError::Overrun { .. } => {
            env.with(|w| w.counts.overruns_reported += 1);
            Said::Other("overrun".into())
        }
        RunError::Settings(_) => Said::Other("settings".into()),
        RunError::NoTime { .. } => Said::Other("no time".into()),
        RunError::Stopped { .. } => Said::Other("stopped at the time limit".into()),
        // `RunError` is non-exhaustive outside lease-core.
        other => unreachable!("an error the simulator does not know: {other:?}"),
    }
}

/// Ends a run's acquisition operation `op` if still open, and its time
/// limit's, if any; a failed acquisition is the acquisition's outcome,
/// said there (judged with the writes it made: the unsettled-write rule).
/// What is left to say for the run.
pub(super) fn end_acquisition(
    env: &Env,
    (op, acquire_open, limit): (usize, bool, Option<usize>),
    said: Said,
) -> Said {
    let said = match said {
        failed @ Said::Failed { acquire: true, .. } => {
            env.say(op, failed);
            Said::Other("acquisition failed".into())
        }
        said => said,
    };
    if acquire_open {
        env.op_end(op);
    }
    if let Some(limit) = limit {
        env.op_end(limit);
    }
    said
}

/// A run of `tick` that ran its job says whether its completion was
/// `recorded`, for the tick rules.
fn report_tick(env: &Env, tick: String, recorded: bool) {
    env.with(|w| {
        let at = w.stamp();
        let lane = env.lane(w);
        w.tick_reports.push(TickReport {
            at,
            pid: env.pid,
            node: env.node,
            lane,
            tick,
            recorded,
        });
    });
}

/// The id of tick number `tick`: `sim:<tick>`, padded in a world of long
/// records to [`MAX_TICK_BYTES`] with control characters (JSON escapes
/// each as six bytes: sixteen such ticks pass a record's 8 KiB even as
/// digests, so the oldest are left out).
fn tick_id(tick: u64, long: bool) -> String {
    let id = format!("sim:{tick}");
    match long {
        true => format!("{id}:{}", "\u{1}".repeat(MAX_TICK_BYTES - id.len() - 1)),
        false => id,
    }
}

/// How many times the platform retries a failed run of a tick.
const PLATFORM_RETRIES: u32 = 2;

/// Broken on purpose: acquires, then starts the job once the lease's local
/// deadline has passed, without holding it.
async fn broken_singleton(env: Env, len: Duration) {
    let op = env.op_start("broken acquire", Some(Duration::ZERO));
    let mut acquire = LeaseOp::acquire(env.cfg.clone(), sim_entropy());
    let out = drive(&mut acquire, &env.store(), &env.clock(), |_| {}).await;
    env.say_outcome(op, &out, true);
    env.op_end(op);
    if let Ok(AcquireOutcome::Acquired(lease)) = out {
        env.clock()
            .sleep_until(lease.valid_until + Duration::from_millis(1))
            .await;
        job(env.clone(), lease.token, len, None).await;
    }
}

/// `lease run`: once, or, for a cron host (`slots`), `lease run --every`
/// (with cas and epochs; the mutex keeps no record, so its runs are
/// plain), a new process each firing (no claims kept).
pub(super) async fn lease_run(env: Env, len: Duration, probe: bool, slots: Option<Box<Slots>>) {
    if env.with(|w| w.cfg.broken) == Some(Broken::IgnoreDeadline) {
        return broken_lease_run(env, len).await;
    }
    // The store's check may wait for another's probe, then probe.
    let check = if probe {
        most_check_time(&env.cfg)
    } else {
        Duration::ZERO
    };
    // `lease run --wait` as the CLI's waiting acquires do (`cli_wait`); a
    // cron host's run never waits.
    let wait = if slots.is_some() {
        Duration::ZERO
    } else {
        env.with(|w| w.cfg.cli_wait)
    };
    let op = env.op_start("run acquire", Some(check + wait));
    let mut acquire_open = true;
    // The holding's operation, from the acquisition on.
    let run = Cell::new(None);
    env.with(|w| w.procs[env.pid].op = Some(op));
    // As `lease run` runs CMD: `Leases::supervise` (the store's check,
    // the acquisition, the library's TERM and KILL schedule, the release),
    // with the CLI's default grace, on a client of its own (a process).
    let leases = process_client(&env, probe);
    let grace = default_grace(&env.cfg);
    let mut released = None;
    // The slot the store's clock chose, for the job.
    let id = RefCell::new(None::<String>);
    let observe = |step: Step<'_>| match step {
        Step::Acquired { lease, tick, .. } => {
            *id.borrow_mut() = tick.map(str::to_string);
            env.say(op, AcquireOutcome::Acquired(lease.clone()).said());
            env.op_end(op);
            acquire_open = false;
            let hold = env.op_start("run hold", None);
            run.set(Some(hold));
            env.with(|w| w.procs[env.pid].op = Some(hold));
        }
        Step::Skipped(busy) => env.say(op, AcquireOutcome::Busy(busy.clone()).said()),
        Step::Hold(Event::Renewed { token, .. }) => {
            if let Some(hold) = run.get() {
                env.say(hold, Said::Renewed { token })
            }
        }
        Step::Hold(_) => {}
        Step::Released(r) => released = Some(r.said()),
        Step::ReleaseFailed(e) => {
            released = Some(said_of::<ReleaseOutcome>(&Err(e.clone()), false))
        }
    };
    let start = |token| {
        let job = job(env.clone(), token, len, id.borrow().clone());
        async move {
            Ok::<_, Infallible>(SimCmd {
                job: Some(Box::pin(job)),
            })
        }
    };
    let how = Run::new().observe(observe);
    let result = match slots.as_deref() {
        Some(slots) if env.cfg.protocol != Protocol::Mutex => {
            let how = how.slot(slots);
            leases
                .supervise(&env.cfg.key, how, start, grace, |_| {})
                .await
        }
        _ if !wait.is_zero() => {
            let how = how.wait(wait);
            leases
                .supervise(&env.cfg.key, how, start, grace, |_| {})
                .await
        }
        _ => {
            leases
                .supervise(&env.cfg.key, how, start, grace, |_| {})
                .await
        }
    };
    if let (Ok(RunOutcome::Ran { recorded, .. }), Some(tick)) = (&result, id.borrow().clone()) {
        report_tick(&env, tick, *recorded);
    }
    let said = match result {
        Ok(RunOutcome::Skipped { .. }) => None,
        Ok(RunOutcome::Ran { .. }) | Err(RunError::Job(WorkError::Stopped(_))) => {
            Some(released.unwrap_or_else(|| Said::Other("finished, no release".into())))
        }
        Ok(RunOutcome::AlreadyRan { .. }) => Some(Said::Other("already ran".into())),
        Ok(RunOutcome::TooLate { .. }) => Some(Said::Other("too late".into())),
        Err(RunError::Tick(_)) => Some(Said::Other("tick refused".into())),
        Err(RunError::Lease(e)) => Some(Said::Failed {
            acquire: acquire_open,
            what: error_name(&e),
            claims: claims_of(&e),
        }),
        Err(RunError::LeaseLost { reason, .. }) => Some(Said::Lost {
            named: named(&reason),
        }),
        Err(RunError::Overrun { .. }) => Some(Said::Other("overrun".into())),
        Err(other) => unreachable!("`lease run` cannot end {other:?}"),
    };
    match (said, run.get()) {
        (Some(said), Some(hold)) => env.say(hold, said),
        (Some(said), None) => env.say(op, said),
        (None, _) => {}
    }
    if acquire_open {
        env.op_end(op);
    }
    if let Some(hold) = run.get() {
        env.op_end(hold);
    }
}

/// Broken on purpose: acquires, then runs the job to its end whatever
/// happens to the lease (renewals are not even attempted).
async fn broken_lease_run(env: Env, len: Duration) {
    let op = env.op_start("run acquire", Some(Duration::ZERO));
    let mut acquire = LeaseOp::acquire(env.cfg.clone(), sim_entropy());
    let out = drive(&mut acquire, &env.store(), &env.clock(), |_| {}).await;
    env.say_outcome(op, &out, true);
    env.op_end(op);
    if let Ok(AcquireOutcome::Acquired(lease)) = out {
        job(env.clone(), lease.token, len, None).await;
    }
}

/// CMD under `lease run`, in the simulation: the job, which stops at once
/// on TERM or KILL (its end is recorded when its future is dropped).
pub(super) struct SimCmd {
    job: Option<Pin<Box<dyn Future<Output = ()>>>>,
}

impl SimCmd {
    /// CMD doing `job`.
    pub(super) fn new(job: impl Future<Output = ()> + 'static) -> SimCmd {
        SimCmd {
            job: Some(Box::pin(job)),
        }
    }
}

impl Supervised for SimCmd {
    /// What a slot's record keeps of it.
    type Status = &'static str;

    fn wait(&mut self) -> impl Future<Output = &'static str> {
        poll_fn(move |cx| {
            let Some(job) = self.job.as_mut() else {
                return Poll::Ready("stopped");
            };
            let ended = job.as_mut().poll(cx);
            if ended.is_ready() {
                self.job = None;
            }
            ended.map(|()| "exit 0")
        })
    }

    fn terminate(&mut self) {
        self.job = None;
    }

    fn kill(&mut self) {
        self.job = None;
    }
}

/// A fresh [`Leases`] for the process of `env` (no claims, no probe
/// verdict), with the probe on or off.
pub(super) fn process_client(env: &Env, probe: bool) -> Leases<SimStore, SimClock> {
    Leases::with_config(
        env.store(),
        env.clock(),
        env.cfg.clone(),
        probe,
        sim_entropy,
    )
    .expect("the simulation's settings are valid")
}

/// The client one `lease` command builds: a fresh [`Leases`] (a new
/// process: no claims, no probe verdict), with `LEASE_PROBE=off`.
fn cli_client(env: &Env) -> Leases<SimStore, SimClock> {
    let leases = process_client(env, false);
    // With the flight recorder built in, every command records, as
    // `lease run --trace` does; the checker replays each trace.
    #[cfg(feature = "trace")]
    {
        let recorder = lease_core::trace::Recorder::default();
        leases.record_to(recorder.clone());
        env.with(|w| w.traces.push((env.node, recorder)));
    }
    leases
}

/// Runs one CLI command through the client, as the `lease` command does,
/// and says its outcome.
async fn cli_call<T: Says>(
    env: &Env,
    name: &'static str,
    wait: Duration,
    call: impl Future<Output = Result<T, LeaseError>>,
) -> Result<T, LeaseError> {
    // A wait is spent on the node's clock, which may run slow.
    let k = env.op_start(
        name,
        Some(wait.mul_f64(1.0 + 2.0 * env.with(|w| w.cfg.max_drift))),
    );
    let out = call.await;
    env.say_outcome(k, &out, name == "cli acquire");
    env.op_end(k);
    out
}

/// A CLI command on a lease named by its etag (`lease renew --etag`,
/// `lease release --etag`), through the client: `not_held` is what it says
/// when that version is no longer the lease.
async fn cli_by_etag<T: Says>(
    env: &Env,
    name: &'static str,
    call: impl Future<Output = Result<T, ByEtagError>>,
    not_held: Said,
) -> Option<T> {
    let k = env.op_start(name, Some(Duration::ZERO));
    let out = call.await;
    let said = match &out {
        Ok(outcome) => outcome.said(),
        Err(ByEtagError::Lease(e)) => said_of::<T>(&Err(e.clone()), false),
        Err(ByEtagError::NotHeld(_)) => not_held,
    };
    env.say(k, said);
    env.op_end(k);
    out.ok()
}

pub(super) async fn cli_script(env: Env, mut rng: Entropy) {
    let cfg = env.cfg.clone();
    let key = cfg.key.clone();
    let mut first = true;
    loop {
        // Each round is one run of the operator's script (acquire, renews,
        // release): a new logical client, which cannot know an earlier
        // round's lease if that round gave up on it. Each command is a
        // process of its own, with a client of its own.
        if !std::mem::take(&mut first) {
            env.with(|w| {
                let owner = w.new_owner();
                w.procs[env.pid].owner = owner;
            });
        }
        let wait = env.with(|w| w.cfg.cli_wait);
        let client = cli_client(&env);
        let out = if wait.is_zero() {
            cli_call(&env, "cli acquire", wait, client.acquire(&key)).await
        } else {
            cli_call(&env, "cli acquire", wait, client.acquire_within(&key, wait)).await
        };
        if let Ok(AcquireOutcome::Acquired(lease)) = out {
            let mut etag = lease.etag.clone();
            let mut token = lease.token;
            let mut held = true;
            let renews = if cfg.protocol.renews() {
                (rng.unit() * 3.0) as u32
            } else {
                0
            };
            for _ in 0..renews {
                let wait = env.rng_duration(&mut rng, Duration::ZERO, cfg.renew_every);
                let clock = env.clock();
                clock.sleep_until(clock.now().mono + wait).await;
                let client = cli_client(&env);
                let renewed = cli_by_etag(
                    &env,
                    "cli renew",
                    client.renew_by_etag(&key, etag.as_str()),
                    Said::Lost { named: None },
                )
                .await;
                match renewed {
                    Some(RenewOutcome::Renewed(l)) => {
                        etag = l.etag;
                        token = l.token;
                    }
                    _ => {
                        held = false;
                        break;
                    }
                }
            }
            if held {
                let wait = env.rng_duration(&mut rng, Duration::ZERO, cfg.renew_every);
                let clock = env.clock();
                clock.sleep_until(clock.now().mono + wait).await;
                let client = cli_client(&env);
                if env.with(|w| w.cfg.broken) == Some(Broken::BlindRelease) {
                    // Broken on purpose: reports Released without asking.
                    let k = env.op_start("cli release", Some(Duration::ZERO));
                    env.say(k, Said::Released { token });
                    env.op_end(k);
                } else if rng.unit() < env.with(|w| w.cfg.late_release) {
                    // Released at the lease's local deadline exactly: the
                    // client's two halves of `release_by_etag` (find the
                    // version held, release it) with the wait between them.
                    let k = env.op_start("cli inspect", Some(Duration::ZERO));
                    let lease = client.held(&key, etag.as_str()).await;
                    env.say(k, Said::Other("inspected".into()));
                    env.op_end(k);
                    if let Ok(lease) = lease {
                        env.clock().sleep_until(lease.valid_until).await;
                        let _ =
                            cli_call(&env, "cli release", Duration::ZERO, client.release(lease))
                                .await;
                    }
                } else {
                    let _ = cli_by_etag(
                        &env,
                        "cli release",
                        client.release_by_etag(&key, etag.as_str()),
                        Said::AlreadyLost { named: None },
                    )
                    .await;
                }
            }
        }
        let (lo, hi) = env.with(|w| w.cfg.tick_every);
        let wait = env.rng_duration(&mut rng, lo, hi);
        let clock = env.clock();
        clock.sleep_until(clock.now().mono + wait).await;
    }
}

pub(super) async fn operator(env: Env, mut rng: Entropy) {
    let cfg = env.cfg.clone();
    loop {
        let wait = env.rng_duration(&mut rng, cfg.ttl, cfg.ttl * 4);
        let clock = env.clock();
        clock.sleep_until(clock.now().mono + wait).await;
        // `lease inspect`, then maybe `lease break --etag`: each a process
        // with a client of its own.
        let inspect = cli_client(&env);
        let seen = cli_call(
            &env,
            "operator inspect",
            Duration::ZERO,
            inspect.inspect(&cfg.key),
        )
        .await;
        if let Ok(Some(seen)) = seen {
            if !seen.record.released && rng.unit() < 0.4 {
                // Thinking it over: the lease may change hands meanwhile.
                let delay = env.with(|w| w.cfg.break_delay);
                let delay = env.rng_duration(&mut rng, Duration::ZERO, delay);
                let clock = env.clock();
                clock.sleep_until(clock.now().mono + delay).await;
                let client = cli_client(&env);
                let _ = cli_call(
                    &env,
                    "operator break",
                    Duration::ZERO,
                    client.break_lease(&cfg.key, seen.etag.as_str(), None),
                )
                .await;
            }
        }
    }
}

pub(super) async fn elector_proc(
    env: Env,
    mut rng: Entropy,
    stop_after: Option<Duration>,
    job_max: Duration,
) {
    let mut elector = Elector::new(env.cfg.clone(), sim_entropy());
    let events: RefCell<VecDeque<Event>> = RefCell::new(VecDeque::new());
    let clock = env.clock();
    let stop_at = stop_after.map(|d| clock.now().mono + d);
    let stop_clock = clock.clone();
    let stop = async move {
        match stop_at {
            Some(at) => stop_clock.sleep_until(at).await,
            None => pending::<()>().await,
        }
    };
    let op = env.op_start("elector", None);
    // As `Leadership` drives it: re-reads conditional.
    let store = Revalidating::new(env.store());
    let mut driving = pin!(drive_until(
        &mut elector,
        &store,
        &clock,
        |e| events.borrow_mut().push_back(e),
        stop
    ));
    let mut work: Option<Pin<Box<dyn Future<Output = ()>>>> = None;
    // The token and local deadline of the last Acquired/Renewed event: new
    // work starts only before the deadline, as the events' docs ask.
    let mut leading: Option<(u64, Mono)> = None;
    let mut exit = None;
    poll_fn(|cx| loop {
        // A user stops its work before it resigns.
        if stop_at.is_some_and(|at| clock.now().mono >= at) {
            leading = None;
            work = None;
        }
        if exit.is_none() {
            if let Poll::Ready(x) = driving.as_mut().poll(cx) {
                exit = Some(x);
            }
        }
        let next = events.borrow_mut().pop_front();
        if let Some(e) = next {
            match e {
                Event::Acquired { token, valid_until } => {
                    env.say(
                        op,
                        Said::Acquired {
                            token,
                            session: None,
                        },
                    );
                    leading = Some((token, valid_until));
                    let len = env.rng_duration(&mut rng, Duration::ZERO, job_max);
                    work = Some(Box::pin(job(env.clone(), token, len, None)));
                }
                Event::Renewed { token, valid_until } => {
                    env.say(op, Said::Renewed { token });
                    leading = Some((token, valid_until));
                }
                Event::Lost { reason, .. } => {
                    env.say(
                        op,
                        Said::Lost {
                            named: named(&reason),
                        },
                    );
                    leading = None;
                    work = None;
                }
                Event::Released { token } => {
                    env.say(op, Said::Released { token });
                    leading = None;
                    work = None;
                }
                Event::AtRisk { .. } | Event::LeaderChanged(_) | Event::Error(_) => {}
                // `Event` is non-exhaustive outside lease-core.
                other => unreachable!("an event the simulator does not know: {other:?}"),
            }
            continue;
        }
        if exit.is_some() {
            return Poll::Ready(());
        }
        if let Some(w) = work.as_mut() {
            if w.as_mut().poll(cx).is_ready() {
                work = leading
                    .filter(|(_, until)| clock.now().mono < *until)
                    .map(|(token, _)| {
                        let len = env.rng_duration(&mut rng, Duration::ZERO, job_max);
                        Box::pin(job(env.clone(), token, len, None))
                            as Pin<Box<dyn Future<Output = ()>>>
                    });
                continue;
            }
        }
        return Poll::Pending;
    })
    .await;
    drop(work);
    env.op_end(op);
}

/// How long a process's sampler waits for its next sample: 20 ms for two
/// seconds after it was stopped (at `stopped_at`), while its release is
/// under way, ttl/40 to ttl/8 otherwise.
pub(super) fn sample_gap(
    env: &Env,
    rng: &mut Entropy,
    now: Mono,
    stopped_at: Option<Mono>,
) -> Duration {
    if stopped_at.is_some_and(|at| now - at < Duration::from_secs(2)) {
        Duration::from_millis(20)
    } else {
        env.rng_duration(rng, env.cfg.ttl / 40, env.cfg.ttl / 8)
    }
}

/// Notes what `leadership` answers now.
pub(super) fn sample(env: &Env, leadership: &Leadership<SimClock>, resigned: bool) {
    let (token, health) = (leadership.token(), leadership.health());
    note_sample(env, leadership.is_leader(), token, health, resigned);
}

/// Notes what a session's `owns()` answered now for the key of `env`'s
/// lease (a session's key or a fleet's shard): a yes with its token, or a
/// no, judged as a `Leadership`'s answers are.
pub(super) fn sample_owns(env: &Env, token: Option<u64>, closed: bool) {
    let health = lease_core::client::Health::Following;
    note_sample(env, token.is_some(), token, health, closed);
}

fn note_sample(
    env: &Env,
    is_leader: bool,
    token: Option<u64>,
    health: lease_core::client::Health,
    resigned: bool,
) {
    let (pid, node) = (env.pid, env.node);
    env.with(|w| {
        let at = w.stamp();
        let owner = w.procs[pid].owner;
        let lane = env.lane(w);
        w.samples.push(Sample {
            at,
            pid,
            owner,
            node,
            lane,
            is_leader,
            token,
            health,
            resigned,
        });
    });
}

/// A service on `Leadership`, as the native example runs one: the
/// campaign, work that runs from `until_leader` until `lost` (the `lost`
/// future made at once, first polled after a setup of up to half a ttl
/// one time in three), a `resign()` at `stop_after`, and the handle's
/// answers sampled every ttl/40 to ttl/8 (every 20 ms for two seconds
/// after the resign, while the release is under way).
pub(super) async fn service_proc(
    env: Env,
    mut rng: Entropy,
    stop_after: Option<Duration>,
    job_max: Duration,
) {
    let op = env.op_start("service", None);
    let leases = process_client(&env, false);
    let said = env.clone();
    let (leadership, campaign) = leases.lead(Lead::new(LEASE_KEY).on_event(move |event| {
        let s = match event {
            Event::Acquired { token, .. } => Said::Acquired {
                token: *token,
                session: None,
            },
            Event::Renewed { token, .. } => Said::Renewed { token: *token },
            Event::Lost { reason, .. } => Said::Lost {
                named: named(reason),
            },
            Event::Released { token } => Said::Released { token: *token },
            Event::AtRisk { .. }
            | Event::LeaderChanged(_)
            | Event::Error(_)
            | Event::HandingOver { .. } => return,
            // `Event` is non-exhaustive outside lease-core.
            other => unreachable!("an event the simulator does not know: {other:?}"),
        };
        said.say(op, s);
    }));
    let clock = env.clock();
    let resigned_at: Cell<Option<Mono>> = Cell::new(None);
    let mut work_rng = rng.fork();
    let work = async {
        while let Ok(token) = leadership.until_leader().await {
            let lost = leadership.lost();
            if work_rng.unit() < 0.3 {
                let setup = env.rng_duration(&mut work_rng, Duration::ZERO, env.cfg.ttl / 2);
                clock.sleep_until(clock.now().mono + setup).await;
            }
            let len = env
                .rng_duration(&mut work_rng, Duration::ZERO, job_max)
                .max(Duration::from_millis(10));
            // The work stops when `lost` completes (polled first: work
            // whose term is over does not start).
            first_of(lost, job(env.clone(), token, len, None)).await;
        }
    };
    // Another service's holder, for a planned handoff instead of a resign
    // (processes of odd ids, when there is one; no draw, so that the
    // world's schedule stays as it was).
    let successor = env.with(|w| {
        let other = (0..w.cfg.clients.len())
            .filter(|&n| n != env.node && w.cfg.clients[n] == ClientKind::Service)
            .min_by_key(|&n| (n + w.cfg.clients.len() - env.node) % w.cfg.clients.len());
        other
            .filter(|_| env.pid % 2 == 1)
            .map(|n| w.cfg.lease_config(n).holder)
    });
    let resigned = Cell::new(false);
    let resigner = async {
        if let Some(after) = stop_after {
            clock.sleep_until(clock.now().mono + after).await;
            match &successor {
                // Leads on while the successor reads the announcement:
                // the handle says no from its `HandingOver` on, judged
                // against the store like every answer.
                // A holder's name from the world's settings: valid.
                Some(to) => leadership.hand_over(to).expect("a holder's name"),
                None => {
                    leadership.resign();
                    resigned.set(true);
                    sample(&env, &leadership, true);
                }
            }
            resigned_at.set(Some(clock.now().mono));
        }
        pending::<()>().await
    };
    let sampler = async {
        loop {
            let now = clock.now().mono;
            let gap = sample_gap(&env, &mut rng, now, resigned_at.get());
            clock.sleep_until(now + gap).await;
            sample(&env, &leadership, resigned.get());
        }
    };
    run_beside(campaign, resigner, work, sampler).await;
    env.op_end(op);
}

/// Runs `campaign` and `work` to their ends on one task, polling
/// `stopper` and `sampler` beside them (neither ends the run), in that
/// order: a service's or a session's process.
pub(super) async fn run_beside(
    campaign: impl Future,
    stopper: impl Future<Output = ()>,
    work: impl Future<Output = ()>,
    sampler: impl Future<Output = ()>,
) {
    let (mut campaign, mut work) = (pin!(campaign), pin!(work));
    let (mut stopper, mut sampler) = (pin!(stopper), pin!(sampler));
    let (mut campaign_done, mut work_done) = (false, false);
    poll_fn(|cx| {
        if !campaign_done {
            campaign_done = campaign.as_mut().poll(cx).is_ready();
        }
        let _ = stopper.as_mut().poll(cx);
        if !work_done {
            work_done = work.as_mut().poll(cx).is_ready();
        }
        let _ = sampler.as_mut().poll(cx);
        if campaign_done && work_done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}

/// Runs `work` until `stop` completes (`stop` polled first).
pub(super) async fn first_of(stop: impl Future<Output = ()>, work: impl Future<Output = ()>) {
    let (mut stop, mut work) = (pin!(stop), pin!(work));
    poll_fn(|cx| {
        if stop.as_mut().poll(cx).is_ready() || work.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}
