//! The fleet lab's job, run by `lease run` (which sets `LEASE_TOKEN`): it
//! appends a start record to the protected object with the fenced append,
//! works `LAB_WORK_MS`, and appends an end record, writing what it
//! believed to its journal (see `lease_tests::lab::job`). Store settings
//! come from the same environment as `lease run`'s.
//!
//! `LAB_JOB_SHAPE` adds a process that works for the job and outlives it
//! (this binary again, as a helper that journals `alive` every 50 ms until
//! killed, or 3 s after the job's work): `stubborn`, a grandchild through
//! a shell, ignoring TERM; `setsid`, a daemon in a session of its own
//! (`setsid -f`). `lease run` must stop it before the lease can pass on.

use lease_core::FenceOutcome;
use lease_native::clock::SystemClock;
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
    if let Ok(of) = std::env::var("LAB_HELPER_OF") {
        helper(&env, &of);
        return ExitCode::SUCCESS;
    }
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
    // Registered first: a TERM that comes before the work is held for it.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("TERM handler: {e}"))?;
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
    let (leases, key) = lease_tests::lab::job::client("lab-job", SystemClock::new())?;
    let (cfg, store, clock) = (leases.config(&key), leases.store(), leases.clock());
    match env
        .record((&cfg, store, clock), token, 0, "start", None)
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
    start_helper(token, work);
    // `lease run` sends TERM when the renewal is not confirmed in time or
    // the lease is lost: the job stops believing then, and says so, as a
    // job that handles TERM does (the checker ends the job there).
    tokio::select! {
        _ = tokio::time::sleep(work) => {}
        _ = term.recv() => {
            env.note(json!({"ev": "aborted", "token": token, "seq": 0, "signal": "TERM"}));
            return Ok(());
        }
    }
    env.note(json!({"ev": "finishing", "token": token, "seq": 0}));
    match env
        .record((&cfg, store, clock), token, 0, "end", None)
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

/// Starts the helper `LAB_JOB_SHAPE` asks for, if any.
fn start_helper(token: u64, work: Duration) {
    let shape = std::env::var("LAB_JOB_SHAPE").unwrap_or_default();
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut command = match shape.as_str() {
        "stubborn" => {
            let mut c = std::process::Command::new("sh");
            c.args(["-c", "trap '' TERM; \"$0\" & wait"]).arg(&exe);
            c
        }
        "setsid" => {
            let mut c = std::process::Command::new("setsid");
            c.arg("-f").arg(&exe);
            c
        }
        _ => return,
    };
    let life = work + Duration::from_secs(3);
    command
        .env(
            "LAB_HELPER_OF",
            format!("{}:{}:{}", std::process::id(), token, life.as_millis()),
        )
        .env("LAB_OWNER", lease_tests::lab::job::owner().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    // Not waited for: the keeper reaps what outlives this process.
    let _ = command.spawn();
}

/// The helper: `alive` for the job `of` (`pid:token:life_ms`) every 50 ms
/// until killed or its life is over.
fn helper(env: &JobEnv, of: &str) {
    let mut parts = of.split(':').map(|p| p.parse::<u64>().unwrap_or(0));
    let (job_pid, token, life) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(life) {
        env.note(json!({"ev": "alive", "job_pid": job_pid, "token": token, "seq": 0}));
        std::thread::sleep(Duration::from_millis(50));
    }
}
