//! The pool clients ([`ClientKind::Pool`](super::ClientKind::Pool)): runs
//! of `Leases::run` in any free seat of the world's pool.

use super::config::POOL_KEY;
use super::env::{job, Env};
use super::processes::{end_acquisition, process_client, said_of_run_error, say_step, SimCmd};
use super::state::Said;
use core::cell::Cell;
use core::convert::Infallible;
use lease_core::client::default_grace;
use lease_core::client::{time_needed, Step};
use lease_core::protocol::most_check_time;
use lease_core::{Run, RunError, RunOutcome};
use std::rc::Rc;
use std::time::Duration;

/// One run in any free seat of the pool at [`POOL_KEY`] (`Run::pool`), as
/// its own process: most runs wait for a seat (up to two ttls), half of
/// them (with time limits on) within an invocation's time, and one in five
/// (a scale-down under way) gives a smaller pool than the others; even
/// processes run as `lease run --seats` does (`Leases::supervise`, the job
/// as CMD). Its job fences its writes with its seat's token at its seat's
/// protected object.
///
/// Judged like a singleton's run: the acquisition ("pool acquire": busy
/// against every seat, since a full pool names the seat that frees soonest
/// without saying which), the holding ("pool run", on the seat taken), the
/// time limit ("pool time limit"), and the job on its seat's lease.
pub(super) async fn pool_run(env: Env, len: Duration, probe: bool) {
    let (full, ttl, time_limits, max_drift) = env.with(|w| {
        let c = &w.cfg;
        (c.pool_seats, c.ttl, c.time_limits, c.max_drift)
    });
    let mut rng = env.with(|w| w.rng.fork());
    let seats = if full > 1 && rng.unit() < 0.2 {
        1 + (rng.unit() * f64::from(full - 1)) as u32
    } else {
        full
    };
    let wait = (rng.unit() < 0.7).then(|| ttl.mul_f64(2.0 * rng.unit()));
    let needed = time_needed(&env.cfg);
    let remaining = (time_limits && rng.unit() < 0.5)
        .then(|| needed.mul_f64(0.8) + (len * 2).mul_f64(rng.unit()));
    let s = process_client(&env, probe);
    let check = if probe {
        most_check_time(&env.cfg)
    } else {
        Duration::ZERO
    };
    let op = env.op_start("pool acquire", Some(check + wait.unwrap_or_default()));
    let run = env.op_start("pool run", None);
    let limit = remaining.map(|left| {
        let drift = 1.0 + 2.0 * max_drift;
        env.op_start_exact(
            "pool time limit",
            left.mul_f64(drift) + Duration::from_millis(100),
        )
    });
    env.with(|w| w.procs[env.pid].op = Some(op));
    let mut acquire_open = true;
    // The seat taken, for the job (it starts after the step that says it).
    let taken = Rc::new(Cell::new(None::<u32>));
    let (envj, takenj) = (env.clone(), taken.clone());
    let work = move |token| {
        let mut envj = envj;
        envj.lease = takenj.get().map_or(0, |seat| seat as usize + 1);
        async move {
            job(envj, token, len, None).await;
            Ok::<_, String>(())
        }
    };
    let observe = |step: Step<'_>| match step {
        Step::Acquired { lease, seat, .. } => {
            let Some(seat) = seat.filter(|&seat| seat < seats) else {
                panic!(
                    "a run in a pool of {seats} took seat {seat:?} ({})",
                    lease.key
                );
            };
            taken.set(Some(seat));
            env.with(|w| {
                w.ops[op].lane.key = seat as usize + 1;
                w.ops[run].lane.key = seat as usize + 1;
            });
            env.say(
                op,
                Said::Acquired {
                    token: lease.token,
                    session: None,
                },
            );
            env.op_end(op);
            acquire_open = false;
            env.with(|w| w.procs[env.pid].op = Some(run));
        }
        step => {
            if let Step::Skipped(_) = step {
                env.with(|w| w.ops[op].pool_seats = Some(seats));
            }
            say_step(&env, (op, run), &step)
        }
    };
    // Runs of even processes are `lease run --seats`: the job as CMD under
    // `Leases::supervise` (TERM and KILL before the seat's deadline).
    let said = if env.pid % 2 == 0 {
        let start = |token| {
            let mut envj = env.clone();
            envj.lease = taken.get().map_or(0, |seat| seat as usize + 1);
            let job = job(envj, token, len, None);
            async move { Ok::<_, Infallible>(SimCmd::new(job)) }
        };
        let grace = default_grace(&env.cfg);
        let mut how = Run::new().pool(seats).observe(observe);
        if let Some(left) = remaining {
            how = how.within(left);
        }
        let result = match wait {
            Some(wait) => {
                s.supervise(POOL_KEY, how.wait(wait), start, grace, |_| {})
                    .await
            }
            None => s.supervise(POOL_KEY, how, start, grace, |_| {}).await,
        };
        said_of_result(&env, &result, (acquire_open, remaining, probe))
    } else {
        let mut how = Run::new().pool(seats).observe(observe);
        if let Some(left) = remaining {
            how = how.within(left);
        }
        let result = match wait {
            Some(wait) => s.run(POOL_KEY, how.wait(wait), work).await,
            None => s.run(POOL_KEY, how, work).await,
        };
        said_of_result(&env, &result, (acquire_open, remaining, probe))
    };
    let said = end_acquisition(&env, (op, acquire_open, limit), said);
    env.say(run, said);
    env.op_end(run);
}

/// What a pool run's result says (see [`said_of_run_error`]).
fn said_of_result<T: std::fmt::Debug, E: std::fmt::Debug>(
    env: &Env,
    result: &Result<RunOutcome<T>, RunError<E>>,
    how: (bool, Option<Duration>, bool),
) -> Said {
    match result {
        Ok(RunOutcome::Ran { .. }) => Said::Other("ran".into()),
        Ok(RunOutcome::Skipped { .. }) => Said::Other("skipped".into()),
        Ok(other) => Said::Other(format!("impossible without a tick: {other:?}")),
        Err(e) => said_of_run_error(env, e, how),
    }
}
