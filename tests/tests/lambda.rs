//! The example function `scheduled-singleton`, built from `lambda/` and run
//! by `cargo lambda watch` (the Runtime API emulator of the `cargo-lambda`
//! package), against moto with signature checking on.

mod support;

use lease_core::protocol::BreakRequest;
use lease_core::store::ReplyKind;
use lease_core::{BreakOutcome, Fenced, LeaseOp, Observation, Protocol, StoreOp};
use lease_native::os_entropy;
use lease_native::settings::StoreSettings;
use lease_tests::servers::{workspace_root, CargoLambda};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};
use support::*;

const FUNCTION: &str = "scheduled-singleton";
const KEY: &str = "jobs/nightly";
const RESULT_KEY: &str = "results/nightly.json";
const TTL: Duration = Duration::from_secs(4);

/// Builds the function once, so that `cargo lambda watch`'s `cargo run`
/// only starts it.
fn build_function() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "-q",
                "--locked",
                "-p",
                "lease-lambda",
                "--bin",
                FUNCTION,
            ])
            .current_dir(workspace_root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building {FUNCTION} failed");
    });
}

fn function_env(settings: &StoreSettings) -> Vec<(&'static str, String)> {
    let c = settings.credentials.clone().expect("credentials");
    vec![
        (
            "LEASE_ENDPOINT",
            settings.endpoint.clone().unwrap_or_default(),
        ),
        ("LEASE_BUCKET", settings.bucket.clone()),
        ("AWS_REGION", settings.region.clone()),
        ("AWS_ACCESS_KEY_ID", c.access_key_id),
        ("AWS_SECRET_ACCESS_KEY", c.secret_access_key),
        ("LEASE_KEY", KEY.into()),
        ("LEASE_TTL", format!("{}s", TTL.as_secs())),
        ("RESULT_KEY", RESULT_KEY.into()),
        // The rule's schedule: a run reports the hours that never ran.
        ("LEASE_SCHEDULE", "rate(1 hour)".into()),
        ("RUST_LOG", "info".into()),
    ]
}

fn emulator(settings: &StoreSettings, concurrency: u32) -> CargoLambda {
    build_function();
    let env = function_env(settings);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    CargoLambda::start("lambda", concurrency, &env)
        .expect("cargo lambda watch starts (run `make setup` first)")
}

/// An EventBridge scheduled event for the tick at `time` whose job takes
/// `work_ms` (and fails when `fail`).
fn event_at(time: &str, work_ms: u64, fail: bool) -> String {
    json!({
        "version": "0", "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa", "detail-type": "Scheduled Event",
        "source": "aws.events", "account": "123456789012", "time": time,
        "region": "us-east-1", "resources": ["arn:aws:events:us-east-1:123456789012:rule/nightly"],
        "detail": {"work_ms": work_ms, "fail": fail}
    })
    .to_string()
}

/// The tick most tests deliver.
fn event(work_ms: u64) -> String {
    event_at("2026-11-22T03:00:00Z", work_ms, false)
}

/// (status, JSON body) of one invocation with `event`.
fn invoke_event(lambda: &CargoLambda, event: &str) -> (u16, Value) {
    let response = lambda
        .invoke(FUNCTION, event)
        .expect("the emulator answers");
    let body = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response.status, body)
}

/// (status, JSON body) of one invocation.
fn invoke(lambda: &CargoLambda, work_ms: u64) -> (u16, Value) {
    invoke_event(lambda, &event(work_ms))
}

/// An invocation answered on another thread (for a job to interfere with).
fn invoke_in_background(
    lambda: &CargoLambda,
    work_ms: u64,
) -> thread::JoinHandle<Result<lease_tests::servers::HttpResponse, String>> {
    let endpoint = lambda.endpoint();
    thread::spawn(move || {
        lease_tests::servers::http_request(
            &endpoint,
            "POST",
            &format!("/2015-03-31/functions/{FUNCTION}/invocations"),
            &[("Content-Type", "application/json")],
            event(work_ms).as_bytes(),
        )
    })
}

fn inspect(settings: &StoreSettings) -> Option<Observation> {
    let cfg = config(Protocol::Cas, KEY, "test", TTL);
    match run(&store(settings), LeaseOp::inspect(cfg, os_entropy())) {
        Ok(seen) => seen,
        other => panic!("{other:?}"),
    }
}

/// Waits until a function holds the lease; returns what was read.
fn wait_for_holder(settings: &StoreSettings, lambda: &CargoLambda) -> Observation {
    let started = Instant::now();
    loop {
        if let Some(seen) = inspect(settings).filter(|s| !s.free) {
            return seen;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no function took the lease; emulator log:\n{}",
            lambda.log_tail(40)
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// The fencing token stamped on the job's result, if there is one.
fn result_token(settings: &StoreSettings) -> Option<u64> {
    let reply = call(
        &store(settings),
        StoreOp::Get {
            key: RESULT_KEY.into(),
        },
    );
    match reply.kind {
        ReplyKind::Found { body, .. } => {
            Some(Fenced::decode(&body).expect("a fenced object").token)
        }
        ReplyKind::Missing => None,
        other => panic!("{other:?}"),
    }
}

#[test]
fn ten_concurrent_scheduled_invocations_run_the_job_once() {
    let moto = moto(true);
    let settings = moto_settings(&moto);
    let lambda = emulator(&settings, 10);
    let results: Vec<(u16, Value)> = thread::scope(|scope| {
        let handles: Vec<_> = (0..10)
            .map(|_| scope.spawn(|| invoke(&lambda, 6_000)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    let ran: Vec<&Value> = results
        .iter()
        .filter(|(_, b)| b["outcome"] == "ran")
        .map(|(_, b)| b)
        .collect();
    let skipped: Vec<&Value> = results
        .iter()
        .filter(|(_, b)| b["outcome"] == "skipped")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(
        (ran.len(), skipped.len()),
        (1, 9),
        "{results:?}\nemulator log:\n{}",
        lambda.log_tail(60)
    );
    let token = ran[0]["token"].as_u64().expect("token");
    for s in &skipped {
        assert_eq!(
            s["token"].as_u64(),
            Some(token),
            "skipped ones name the holder's token: {s}"
        );
        assert!(
            s["holder"]
                .as_str()
                .is_some_and(|h| h.starts_with("scheduled-singleton/")),
            "{s}"
        );
        assert!(s["expires_at_ms"].as_u64().is_some(), "{s}");
    }
    assert_eq!(ran[0]["output"]["result"]["token"].as_u64(), Some(token));
    assert_eq!(
        result_token(&settings),
        Some(token),
        "the result is stamped with the token"
    );
    // The run released the lease when the job ended.
    assert!(inspect(&settings).is_some_and(|s| s.record.released));
}

#[test]
fn a_killed_holder_is_replaced_after_the_ttl_with_the_next_token() {
    let moto = moto(false);
    let settings = moto_settings(&moto);
    let lambda = emulator(&settings, 2);
    // A long job, killed mid-way with SIGKILL (no release).
    let long = invoke_in_background(&lambda, 25_000);
    let seen = wait_for_holder(&settings, &lambda);
    let pid: i32 = seen
        .record
        .holder
        .rsplit("pid-")
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("holder names its pid: {}", seen.record.holder));
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let killed_at = Instant::now();
    // The killed invocation's own answer does not matter (the emulator
    // reports a dead function in its own way): leave its thread be.
    drop(long);

    // Right away: still held by the dead run, so skipped.
    let (_, body) = invoke(&lambda, 0);
    assert_eq!(body["outcome"], "skipped", "{body}");
    // After the ttl (on the store's clock, one-second dates): ran, token + 1.
    let body = loop {
        thread::sleep(Duration::from_millis(500));
        let (_, body) = invoke(&lambda, 0);
        if body["outcome"] == "ran" {
            break body;
        }
        assert!(killed_at.elapsed() < TTL * 4, "never taken over: {body}");
    };
    assert!(
        killed_at.elapsed() >= TTL - Duration::from_secs(2),
        "taken over before the ttl"
    );
    assert_eq!(
        body["token"].as_u64(),
        Some(seen.record.token + 1),
        "{body}"
    );
}

#[test]
fn a_lease_broken_from_outside_stops_the_job_with_lease_lost() {
    let moto = moto(false);
    let settings = moto_settings(&moto);
    let lambda = emulator(&settings, 1);
    let started = Instant::now();
    let long = invoke_in_background(&lambda, 20_000);
    let seen = wait_for_holder(&settings, &lambda);
    // An operator breaks exactly the version the function wrote; if a
    // renewal landed meanwhile, break the newer one.
    let mut etag = seen.etag;
    let cfg = config(Protocol::Cas, KEY, "operator", TTL);
    loop {
        let request = BreakRequest {
            etag: etag.clone(),
            token_floor: None,
        };
        match run(
            &store(&settings),
            LeaseOp::break_lease(cfg.clone(), os_entropy(), request),
        ) {
            Ok(BreakOutcome { .. }) => break,
            Err(lease_core::LeaseError::Changed {
                current: Some(now), ..
            }) => etag = now,
            other => panic!("{other:?}"),
        }
    }
    let response = long
        .join()
        .expect("no panic")
        .expect("the emulator answers");
    let body: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    assert_ne!(response.status, 200, "{body}");
    assert_eq!(
        body["errorType"],
        "LeaseLost",
        "{body}\nlog:\n{}",
        lambda.log_tail(40)
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "stopped only after {:?}",
        started.elapsed()
    );
    assert_eq!(
        result_token(&settings),
        None,
        "the stopped job wrote no result"
    );
}

#[test]
fn wrong_credentials_and_a_missing_bucket_are_named() {
    let moto = moto(false);
    let mut wrong = moto_settings(&moto);
    if let Some(c) = &mut wrong.credentials {
        c.secret_access_key = "wrong-secret-0000000000000000000000000000".into();
    }
    let lambda = emulator(&wrong, 1);
    let (status, body) = invoke(&lambda, 0);
    assert_ne!(status, 200);
    assert_eq!(body["errorType"], "LeaseError", "{body}");
    let message = body["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("SignatureDoesNotMatch") && message.contains("check the credentials"),
        "{message}"
    );
    assert!(
        !message.contains("wrong-secret"),
        "the secret leaked: {message}"
    );
    drop(lambda);

    let mut missing = moto_settings(&moto);
    missing.bucket = "no-such-bucket".into();
    let lambda = emulator(&missing, 1);
    let (_, body) = invoke(&lambda, 0);
    assert_eq!(body["errorType"], "LeaseError", "{body}");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("the bucket does not exist"),
        "{body}"
    );
}

/// EventBridge delivers at least once and Lambda retries a failed
/// invocation: the same tick again after it ran is answered from the
/// lease record (the job does not run, its result is not rewritten); a
/// tick whose run failed runs on the retry; the next tick runs.
#[test]
fn a_tick_delivered_again_runs_once_and_a_failed_tick_runs_on_retry() {
    let moto = moto(false);
    let settings = moto_settings(&moto);
    let lambda = emulator(&settings, 1);
    let log = || lambda.log_tail(40);

    let first = event_at("2026-11-22T03:00:00Z", 0, false);
    let (status, ran) = invoke_event(&lambda, &first);
    assert_eq!(
        (status, &ran["outcome"]),
        (200, &json!("ran")),
        "{ran}\n{}",
        log()
    );
    let token = ran["token"].as_u64().expect("token");
    assert_eq!(ran["recorded"], true, "{ran}");
    let (_, again) = invoke_event(&lambda, &first);
    assert_eq!(again["outcome"], "already_ran", "{again}\n{}", log());
    assert_eq!(again["tick"], "eventbridge:2026-11-22T03:00:00Z", "{again}");
    assert_eq!(again["token"].as_u64(), Some(token), "{again}");
    assert!(again["finished_at_ms"].as_u64().is_some(), "{again}");
    assert_eq!(
        result_token(&settings),
        Some(token),
        "the job did not run again"
    );

    // A failed run is not recorded: the retry (the same tick) runs it.
    let failing = event_at("2026-11-22T04:00:00Z", 0, true);
    let (status, failed) = invoke_event(&lambda, &failing);
    assert_ne!(status, 200, "{failed}");
    assert_eq!(failed["errorType"], "JobFailed", "{failed}");
    let retry = event_at("2026-11-22T04:00:00Z", 0, false);
    let (_, ran) = invoke_event(&lambda, &retry);
    assert_eq!(ran["outcome"], "ran", "{ran}\n{}", log());
    let retried = ran["token"].as_u64().expect("token");
    assert!(retried > token, "{ran}");
    let (_, again) = invoke_event(&lambda, &retry);
    assert_eq!(again["outcome"], "already_ran", "{again}");
    assert_eq!(again["token"].as_u64(), Some(retried), "{again}");

    // The next tick is a new one; the first is still answered.
    let (_, next) = invoke_event(&lambda, &event_at("2026-11-22T05:00:00Z", 0, false));
    assert_eq!(next["outcome"], "ran", "{next}");
    let (_, first_again) = invoke_event(&lambda, &first);
    assert_eq!(first_again["outcome"], "already_ran", "{first_again}");
    assert_eq!(first_again["token"].as_u64(), Some(token), "{first_again}");
    assert_eq!(result_token(&settings), next["token"].as_u64());
    assert_eq!(next["missed"], Value::Null, "04:00 then 05:00: {next}");

    // 06:00 and 07:00 never came: the 08:00 run names them.
    let (_, late) = invoke_event(&lambda, &event_at("2026-11-22T08:00:00Z", 0, false));
    assert_eq!(late["outcome"], "ran", "{late}");
    let hour = 3_600_000u64;
    let five = 1_795_323_600_000u64; // 2026-11-22T05:00:00Z
    assert_eq!(
        late["missed"],
        json!({"since_ms": five, "count": 2, "first_ms": [five + hour, five + 2 * hour]}),
        "{late}"
    );
}

/// One tick across platforms (docs/guide.md): the example Lambda (its
/// rule `cron(0 3 * * ? *)`) and the example Worker in workerd (its
/// trigger `0 3 * * *`), both with `LEASE_TICK=slot:nightly` and one lease
/// key in one moto bucket, run each day's slot once, whichever delivers it
/// first; a late delivery names the same slot.
#[test]
fn a_slot_named_alike_runs_once_whether_lambda_or_worker_delivers_it() {
    const SHARED: &str = "jobs/shared-slot";
    let moto = moto(true);
    let settings = moto_settings(&moto);
    build_function();
    let mut env = function_env(&settings);
    for (name, value) in [
        ("LEASE_KEY", SHARED),
        ("LEASE_TICK", "slot:nightly"),
        ("LEASE_SCHEDULE", "cron(0 3 * * ? *)"),
    ] {
        env.retain(|(k, _)| *k != name);
        env.push((name, value.to_string()));
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let lambda = CargoLambda::start("lambda", 1, &env)
        .expect("cargo lambda watch starts (run `make setup` first)");
    // The Worker's delivery of the slot starting at `time_ms`: its lease
    // log lines.
    let worker = |time_ms: u64| -> Vec<Value> {
        let run = run_worker_script_with(
            "slot.mjs",
            "cloudflare/example/build",
            &moto,
            Duration::from_secs(120),
            &[
                ("SLOT_KEY", SHARED.to_string()),
                ("SLOT_TICK", "slot:nightly".to_string()),
                ("SLOT_CRON", "0 3 * * *".to_string()),
                ("SLOT_TIME", time_ms.to_string()),
            ],
        );
        assert!(
            run.success,
            "slot.mjs failed:\n{}\n{}",
            run.stdout, run.stderr
        );
        run.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let line = |lines: &[Value], what: &str| -> Option<Value> {
        lines.iter().find(|l| l["lease"] == what).cloned()
    };
    let day = 86_400_000u64;
    let first = 1_795_316_400_000u64; // 2026-11-22T03:00:00Z

    // The Lambda first: it runs the slot, and the Worker's delivery of
    // that slot answers from the record.
    let (status, ran) = invoke_event(&lambda, &event_at("2026-11-22T03:00:00Z", 0, false));
    assert_eq!(
        (status, &ran["outcome"]),
        (200, &json!("ran")),
        "{ran}\n{}",
        lambda.log_tail(40)
    );
    let token = ran["token"].as_u64().expect("token");
    let lines = worker(first);
    let again = line(&lines, "already-ran").unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(
        again["tick"], "slot:nightly@2026-11-22T03:00:00Z",
        "{again}"
    );
    assert_eq!(again["token"].as_u64(), Some(token), "{again}");
    assert!(line(&lines, "acquired").is_none(), "{lines:?}");

    // The Worker first the next day: the Lambda's delivery, 7 s late,
    // names the same slot and does not run it again.
    let lines = worker(first + day);
    let acquired = line(&lines, "acquired").unwrap_or_else(|| panic!("{lines:?}"));
    let worker_token = acquired["token"].as_u64().expect("token");
    assert!(worker_token > token, "{lines:?}");
    assert!(line(&lines, "finished").is_some(), "{lines:?}");
    let (_, again) = invoke_event(&lambda, &event_at("2026-11-23T03:00:07Z", 0, false));
    assert_eq!(
        again["outcome"],
        "already_ran",
        "{again}\n{}",
        lambda.log_tail(40)
    );
    assert_eq!(
        again["tick"], "slot:nightly@2026-11-23T03:00:00Z",
        "{again}"
    );
    assert_eq!(again["token"].as_u64(), Some(worker_token), "{again}");
}
