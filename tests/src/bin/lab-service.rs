//! The fleet lab's service: a long-running process that campaigns for
//! leadership with the core's `Elector` and, while it leads, runs jobs back
//! to back (fenced start record, work, fenced end record), each stopped at
//! the lease's local deadline. What it believed goes to its journal (see
//! `lease_tests::lab::job`). Settings: the store's and the lease's from the
//! environment, as for `lease`; `LAB_WORK_MS_MAX` bounds a job's length;
//! with `LAB_TERM_JOBS=n` it steps down after `n` jobs as leader: it
//! starts no other job, resigns (the elector releases the lease) and
//! exits 0, as a service drained in a rolling deploy does.

use lease_core::client::drive_until;

use lease_core::{Clock, Elector, Event, FenceOutcome, Mono};
use lease_native::clock::SystemClock;
use lease_native::os_entropy;
use lease_tests::lab::job::JobEnv;
use serde_json::json;
use std::cell::Cell;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let env = match JobEnv::from_env() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("lab-service: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(service(&env)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            env.note(json!({"ev": "error", "error": e}));
            ExitCode::from(1)
        }
    }
}

async fn service(env: &JobEnv) -> Result<(), String> {
    let max_work: u64 = std::env::var("LAB_WORK_MS_MAX")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2_000);
    let term: Option<u64> = std::env::var("LAB_TERM_JOBS")
        .ok()
        .and_then(|t| t.parse().ok())
        .filter(|&n| n > 0);
    let (leases, key) = lease_tests::lab::job::client("lab-service", SystemClock::from_env()?)?;
    let (cfg, store, clock) = (leases.config(&key), leases.store(), leases.clock());
    // The lease as the elector reports it: (token, local deadline).
    let held: Cell<Option<(u64, Mono)>> = Cell::new(None);
    let mut elector = Elector::new(cfg.clone(), os_entropy());
    let on_event = |event: Event| match event {
        Event::Acquired { token, valid_until } => {
            held.set(Some((token, valid_until)));
            env.note(json!({"ev": "leader", "token": token}));
        }
        Event::Renewed { token, valid_until } => held.set(Some((token, valid_until))),
        Event::Lost { token, reason } => {
            held.set(None);
            env.note(json!({"ev": "lost", "token": token, "reason": format!("{reason:?}")}));
        }
        Event::Released { token } => {
            held.set(None);
            env.note(json!({"ev": "lost", "token": token, "reason": "released"}));
        }
        _ => {}
    };
    // Set once the service has run its term: the campaign then resigns.
    let stepping_down = Cell::new(false);
    let step_down = async {
        while !stepping_down.get() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let campaign = drive_until(&mut elector, store, clock, on_event, step_down);
    let work = async {
        let mut rng = os_entropy();
        let mut seq = 0u64;
        // Jobs begun as leader (under any token).
        let mut begun = 0u64;
        loop {
            if term.is_some_and(|n| begun >= n) {
                env.note(json!({"ev": "step_down", "jobs": begun}));
                stepping_down.set(true);
                return;
            }
            let Some((token, until)) = held.get() else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            if clock.now().mono >= until {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            seq += 1;
            match env
                .record((&cfg, store, clock), token, seq, "start", Some(until))
                .await
            {
                Ok(FenceOutcome::Accepted { .. }) => {}
                Ok(FenceOutcome::Rejected { current }) => {
                    env.note(json!({"ev": "fenced", "phase": "start", "token": token, "current": current}));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Err(e) => {
                    env.note(json!({"ev": "error", "error": format!("start record: {e}")}));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            }
            // The start record took time: the lease may have ended since.
            if !still_held(&held, clock, token) {
                env.note(json!({"ev": "aborted", "token": token, "seq": seq, "before": "begin"}));
                continue;
            }
            env.note(json!({"ev": "begin", "token": token, "seq": seq, "kind": "service"}));
            begun += 1;
            let length = Duration::from_millis(200 + rng.next_u64() % max_work.max(1));
            // The work, stopped at the deadline as renewals move it.
            let stopped = tokio::select! {
                _ = tokio::time::sleep(length) => false,
                _ = deadline(&held, clock, token) => true,
            };
            if stopped || !still_held(&held, clock, token) {
                env.note(json!({"ev": "aborted", "token": token, "seq": seq}));
                continue;
            }
            env.note(json!({"ev": "finishing", "token": token, "seq": seq}));
            // No request after the deadline known now (renewals only move
            // it later).
            let until = held.get().map_or(until, |(_, u)| u);
            match env
                .record((&cfg, store, clock), token, seq, "end", Some(until))
                .await
            {
                Ok(FenceOutcome::Accepted { .. }) => {
                    env.note(json!({"ev": "end", "token": token, "seq": seq, "accepted": true}))
                }
                Ok(FenceOutcome::Rejected { current }) => env.note(
                    json!({"ev": "end", "token": token, "seq": seq, "accepted": false, "current": current}),
                ),
                Err(e) => env.note(json!({"ev": "error", "error": format!("end record: {e}")})),
            }
        }
    };
    tokio::join!(campaign, work);
    Ok(())
}

fn still_held(held: &Cell<Option<(u64, Mono)>>, clock: &SystemClock, token: u64) -> bool {
    matches!(held.get(), Some((t, until)) if t == token && clock.now().mono < until)
}

/// Completes when the lease with `token` is lost or its deadline passes.
async fn deadline(held: &Cell<Option<(u64, Mono)>>, clock: &SystemClock, token: u64) {
    loop {
        match held.get() {
            Some((t, until)) if t == token => {
                let now = clock.now().mono;
                if now >= until {
                    return;
                }
                // Wake at the deadline, or sooner to notice a loss.
                let at = Mono(until.0.min(now.0 + 50));
                clock.sleep_until(at).await;
            }
            _ => return,
        }
    }
}
