//! The fleet lab's job, run by `lease run` (which sets `LEASE_TOKEN`): it
//! appends a start record to the protected object with the fenced append,
//! works `LAB_WORK_MS`, and appends an end record, writing what it
//! believed to its journal (see `lease_tests::lab::job`). Store settings
//! come from the same environment as `lease run`'s.

use lease_core::fence::FenceOutcome;
use lease_lambda::clock::SystemClock;
use lease_lambda::settings::{self, LeaseSettings, StoreSettings};
use lease_tests::lab::job::JobEnv;
use serde_json::json;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let env = match JobEnv::from_env() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("lab-job: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(job(&env)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            env.note(json!({"ev": "error", "error": e}));
            ExitCode::from(1)
        }
    }
}

async fn job(env: &JobEnv) -> Result<(), String> {
    let token: u64 = std::env::var("LEASE_TOKEN")
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or("LEASE_TOKEN is not set: run me under `lease run`")?;
    let work = Duration::from_millis(
        std::env::var("LAB_WORK_MS")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(500),
    );
    let store_settings = StoreSettings::from_lookup(settings::env).map_err(|e| e.to_string())?;
    let lease = LeaseSettings::from_lookup(settings::env).map_err(|e| e.to_string())?;
    let holder = std::env::var("LEASE_HOLDER").unwrap_or_else(|_| "lab-job".into());
    let cfg = lease.config(holder).map_err(|e| e.to_string())?;
    let store = settings::store(&store_settings, cfg.request_timeout).map_err(|e| e.to_string())?;
    let clock = SystemClock::new();
    match env
        .record((&cfg, &store, &clock), token, 0, "start", None)
        .await
    {
        Ok(FenceOutcome::Accepted { .. }) => {}
        Ok(FenceOutcome::Rejected { current }) => {
            env.note(json!({"ev": "fenced", "phase": "start", "token": token, "current": current}));
            return Ok(());
        }
        Err(e) => return Err(format!("start record: {e}")),
    }
    env.note(json!({"ev": "begin", "token": token, "seq": 0, "kind": "run"}));
    tokio::time::sleep(work).await;
    env.note(json!({"ev": "finishing", "token": token, "seq": 0}));
    match env
        .record((&cfg, &store, &clock), token, 0, "end", None)
        .await
    {
        Ok(FenceOutcome::Accepted { .. }) => {
            env.note(json!({"ev": "end", "token": token, "seq": 0, "accepted": true}))
        }
        Ok(FenceOutcome::Rejected { current }) => env.note(
            json!({"ev": "end", "token": token, "seq": 0, "accepted": false, "current": current}),
        ),
        Err(e) => return Err(format!("end record: {e}")),
    }
    Ok(())
}
