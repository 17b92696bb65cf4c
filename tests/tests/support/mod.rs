//! Shared by the real-server tests: the harness's servers with a bucket,
//! the settings and stores that reach them, running machines and the
//! conformance lifecycle on them, and the `lease` binary.

#![allow(dead_code)] // each test file uses a different part

use lease_conformance::{lifecycle, Expect, Options, Report, Step, Subject};
use lease_core::client::drive;
use lease_core::wire::EtagQuoting;
use lease_core::wire::Provider;
use lease_core::{
    AcquireOutcome, Clock, Lease, LeaseConfig, LeaseError, LeaseOp, Machine, Protocol, Store,
    StoreOp, StoreReply,
};
use lease_native::clock::SystemClock;
use lease_native::os_entropy;
use lease_native::settings::{Credentials, ReqwestStore, StoreSettings};
use lease_tests::servers::{
    node_modules_dir, send_signal, workspace_root, Azurite, Moto, MotoOptions, S3rver, STOP_GRACE,
};
use std::collections::HashMap;
use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::mpsc::{channel, Receiver};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

pub const BUCKET: &str = "locks";

/// The bucket no test creates.
pub const MISSING_BUCKET: &str = "no-such-bucket";

/// The container the Azurite tests use.
pub const AZURE_CONTAINER: &str = "locks";

/// moto with signature checking on and a bucket.
pub fn moto(serialized: bool) -> Moto {
    let moto = Moto::start(MotoOptions {
        auth: true,
        serialized,
    })
    .expect("moto starts (run `make setup` first)");
    moto.create_bucket(BUCKET).expect("bucket");
    moto
}

/// [`moto`] and the [`moto_settings`] that reach it.
pub fn moto_and_settings(serialized: bool) -> (Moto, StoreSettings) {
    let moto = moto(serialized);
    let settings = moto_settings(&moto);
    (moto, settings)
}

pub fn moto_settings(moto: &Moto) -> StoreSettings {
    let c = moto.credentials().expect("auth is on");
    StoreSettings {
        provider: Provider::Generic,
        account: None,
        azure: None,
        ambient: None,
        endpoint: Some(moto.endpoint()),
        bucket: BUCKET.into(),
        region: Moto::REGION.into(),
        path_style: true,
        etag_quoting: EtagQuoting::Quoted,
        credentials: Some(Credentials {
            access_key_id: c.access_key_id.clone(),
            secret_access_key: c.secret_access_key.clone(),
            session_token: None,
        }),
    }
}

/// Azurite with a fresh account key and [`AZURE_CONTAINER`].
pub fn azurite() -> Azurite {
    Azurite::start(AZURE_CONTAINER).expect("azurite starts (run `make setup` first)")
}

/// Settings as an adapter reads them from its environment.
pub fn settings_from(vars: &[(&str, &str)]) -> Result<StoreSettings, String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    StoreSettings::from_lookup(|k| map.get(k).cloned()).map_err(|e| e.to_string())
}

/// `LEASE_PROVIDER=azure` settings for `azurite`'s container, signed with
/// the account key.
pub fn azure_settings(azurite: &Azurite) -> StoreSettings {
    settings_from(&[
        ("LEASE_PROVIDER", "azure"),
        ("LEASE_ENDPOINT", &azurite.endpoint()),
        ("LEASE_BUCKET", AZURE_CONTAINER),
        ("AZURE_STORAGE_ACCOUNT", azurite.account()),
        ("AZURE_STORAGE_KEY", azurite.key()),
    ])
    .expect("valid settings")
}

pub fn s3rver_settings(s3rver: &S3rver) -> StoreSettings {
    StoreSettings {
        provider: Provider::Generic,
        account: None,
        azure: None,
        ambient: None,
        endpoint: Some(s3rver.endpoint()),
        bucket: s3rver.bucket().into(),
        region: "us-east-1".into(),
        path_style: true,
        etag_quoting: EtagQuoting::Quoted,
        credentials: Some(Credentials {
            access_key_id: S3rver::ACCESS_KEY_ID.into(),
            secret_access_key: S3rver::SECRET_ACCESS_KEY.into(),
            session_token: None,
        }),
    }
}

pub fn config(protocol: Protocol, key: &str, holder: &str, ttl: Duration) -> LeaseConfig {
    let mut cfg = LeaseConfig::new(key, holder, ttl);
    cfg.protocol = protocol;
    cfg
}

pub fn store(settings: &StoreSettings) -> ReqwestStore {
    lease_native::settings::store(settings, Duration::from_secs(5)).expect("store")
}

/// Runs `future` to completion on a fresh current-thread runtime (timers
/// and I/O on: the native transport needs both).
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// Runs `machine` against `store` on `clock`, on a fresh runtime.
pub fn run_on<M: Machine>(store: &impl Store, clock: &impl Clock, mut machine: M) -> M::Outcome {
    block_on(drive(&mut machine, store, clock, |_| {}))
}

/// Runs `machine` against `store` on the system clock, on a fresh runtime.
pub fn run<M: Machine>(store: &ReqwestStore, machine: M) -> M::Outcome {
    run_on(store, &SystemClock::new(), machine)
}

/// One store call, on a fresh runtime.
pub fn call(store: &impl Store, op: StoreOp) -> StoreReply {
    block_on(store.call(op))
}

/// The `lease` binary, built once per test process.
pub fn lease_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-q", "-p", "lease-cli", "--bin", "lease"])
            .current_dir(workspace_root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the lease binary failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target"));
        target.join("debug").join("lease")
    })
    .clone()
}

/// A `lease` command with the store settings in its environment (and
/// nothing from the caller's AWS environment).
pub fn lease(settings: &StoreSettings, key: &str) -> Command {
    let mut cmd = Command::new(lease_bin());
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "LEASE_PROTOCOL",
        "LEASE_TTL",
        "LEASE_HOLDER",
    ] {
        cmd.env_remove(var);
    }
    cmd.env(
        "LEASE_ENDPOINT",
        settings.endpoint.as_deref().unwrap_or_default(),
    )
    .env("LEASE_BUCKET", &settings.bucket)
    .env("AWS_REGION", &settings.region)
    .env("LEASE_KEY", key)
    // No probe verdict kept between invocations (a free port can serve
    // another kind of server later); `tests/cli.rs` turns it on to test it.
    .env("LEASE_PROBE_CACHE_DIR", "");
    if let Some(c) = &settings.credentials {
        cmd.env("AWS_ACCESS_KEY_ID", &c.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", &c.secret_access_key);
    }
    cmd
}

/// Runs a `lease` command to completion: (exit code, stdout JSON or
/// Null, stderr).
pub fn lease_json(cmd: &mut Command) -> (i32, serde_json::Value, String) {
    let out = cmd.output().expect("lease runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        format!("{stdout}{stderr}"),
    )
}

/// Runs a `lease` command that must exit 0: its stdout JSON or Null.
pub fn lease_ok(cmd: &mut Command) -> serde_json::Value {
    let (code, json, out) = lease_json(cmd);
    assert_eq!(code, 0, "{out}");
    json
}

/// Waits (up to `within`) until `lease inspect` finds the lease at `key`
/// written, as a `lease run` started in the background takes it: its
/// etag.
pub fn written_etag(settings: &StoreSettings, key: &str, within: Duration) -> String {
    let started = Instant::now();
    loop {
        let (code, json, _) = lease_json(lease(settings, key).args(["inspect", "--json"]));
        if code == 0 && json["exists"] == true {
            return json["etag"].as_str().expect("etag").to_string();
        }
        assert!(
            started.elapsed() < within,
            "the lease at {key} was never written"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// The exit code of `child` once it ends within `limit`; else it is
/// killed (by its own pid) and reaped, and the answer is `None`.
pub fn wait_with_timeout(child: &mut Child, limit: Duration) -> Option<i32> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The lines `child` writes to its piped stdout, each with the time it
/// arrived, read on a thread of their own.
pub fn stdout_lines(child: &mut Child) -> Receiver<(Instant, String)> {
    let stdout = child.stdout.take().expect("piped");
    let (send, lines) = channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    lines
}

/// Everything a finished child wrote to its piped stderr.
pub fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut s).ok();
    }
    s
}

/// `lease replay --json TRACE`: its exit code and its report.
pub fn replay_json(trace: &std::path::Path) -> (Option<i32>, serde_json::Value) {
    let out = Command::new(lease_bin())
        .args(["replay", "--json"])
        .arg(trace)
        .env_clear()
        .output()
        .expect("lease replay runs");
    let report = serde_json::from_slice(&out.stdout).expect("a JSON report");
    (out.status.code(), report)
}

pub const TTL: Duration = Duration::from_secs(3);

pub fn acquired(outcome: Result<AcquireOutcome, LeaseError>) -> Lease {
    match outcome {
        Ok(AcquireOutcome::Acquired(lease)) => lease,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// The token the next holder gets after `token` was released: the cas
/// release keeps the token (the next is one more); the epochs release is
/// itself epoch `token + 1`, created released, so the next is `token + 2`.
pub fn next_after_release(protocol: Protocol, token: u64) -> u64 {
    match protocol {
        Protocol::Epochs => token + 2,
        _ => token + 1,
    }
}

/// The conformance subject of the store `settings` reach, as the native
/// adapter builds it, on the system clock; its missing bucket is
/// [`MISSING_BUCKET`] on the same endpoint.
pub fn native_subject(name: &str, settings: &StoreSettings) -> Subject<ReqwestStore, SystemClock> {
    let mut missing = settings.clone();
    missing.bucket = MISSING_BUCKET.into();
    Subject {
        name: name.into(),
        store: Rc::new(store(settings)),
        clock: SystemClock::new(),
        entropy: os_entropy,
        missing_bucket: Some(store(&missing)),
    }
}

/// Runs the conformance lifecycle on `subject` for each protocol, expecting
/// what `expect` says of it; prints each report and its time. The first
/// failure fails the test, naming its step.
pub fn conform<S: Store + 'static, C: Clock + Clone + 'static>(
    subject: &Subject<S, C>,
    options: &Options,
    protocols: &[(Protocol, Expect)],
) -> Vec<Report> {
    let buckets = subject.missing_bucket.is_some();
    let mut reports = Vec::new();
    for &(protocol, expect) in protocols {
        let started = Instant::now();
        let report = match block_on(lifecycle(subject, protocol, expect, options)) {
            Ok(report) => report,
            Err(failure) => panic!("{failure}"),
        };
        print!("{report}");
        println!(
            "{} {protocol}: passed in {:.1} s",
            subject.name,
            started.elapsed().as_secs_f64()
        );
        let steps: Vec<Step> = report.steps.iter().map(|(step, _)| *step).collect();
        assert_eq!(steps, Step::expected(protocol, expect, buckets), "{report}");
        reports.push(report);
    }
    reports
}

/// Every protocol, each expected to be carried.
pub const EVERY_PROTOCOL: [(Protocol, Expect); 3] = [
    (Protocol::Cas, Expect::Supported),
    (Protocol::Epochs, Expect::Supported),
    (Protocol::Mutex, Expect::Supported),
];

/// `n` contenders acquiring `key` at once, each with its own store.
pub fn contend(
    settings: &StoreSettings,
    protocol: Protocol,
    key: &str,
    n: usize,
    ttl: Duration,
) -> Vec<Result<AcquireOutcome, LeaseError>> {
    thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                scope.spawn(move || {
                    let cfg = config(protocol, key, &format!("n{i}"), ttl);
                    run(&store(settings), LeaseOp::acquire(cfg, os_entropy()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    })
}

/// (winners, busy) among `outcomes`.
pub fn tally(outcomes: &[Result<AcquireOutcome, LeaseError>]) -> (usize, usize) {
    let winners = outcomes
        .iter()
        .filter(|o| matches!(o, Ok(AcquireOutcome::Acquired(_))))
        .count();
    let busy = outcomes
        .iter()
        .filter(|o| matches!(o, Ok(AcquireOutcome::Busy(_))))
        .count();
    (winners, busy)
}

/// How a Node script ended: whether it exited 0, and what it printed.
pub struct ScriptRun {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `node tests/cloudflare/<script> <workspace>/<build>` against the
/// Worker built in `build` (`make worker-build`), with moto's address and
/// credentials in `MOTO_ENDPOINT`, `MOTO_BUCKET`, `MOTO_REGION`,
/// `MOTO_KEY_ID` and `MOTO_SECRET`. A script still running after
/// `timeout` is stopped by its PID (SIGTERM: it disposes of workerd; then
/// SIGKILL) and the run fails.
pub fn run_worker_script(script: &str, build: &str, moto: &Moto, timeout: Duration) -> ScriptRun {
    run_worker_script_with(script, build, moto, timeout, &[])
}

/// [`run_worker_script`] with `env` added to the script's environment.
pub fn run_worker_script_with(
    script: &str,
    build: &str,
    moto: &Moto,
    timeout: Duration,
    env: &[(&str, String)],
) -> ScriptRun {
    let root = workspace_root();
    let build = root.join(build);
    for file in ["index.js", "index_bg.wasm"] {
        assert!(
            build.join(file).exists(),
            "{} is missing: run `make worker-build` first",
            build.join(file).display()
        );
    }
    node_modules_dir().expect("npm packages");
    let credentials = moto.credentials().expect("auth is on");
    let mut child = Command::new("node")
        .arg(root.join("tests/cloudflare").join(script))
        .arg(&build)
        .current_dir(&root)
        .env("MOTO_ENDPOINT", moto.endpoint())
        .env("MOTO_BUCKET", BUCKET)
        .env("MOTO_REGION", Moto::REGION)
        .env("MOTO_KEY_ID", &credentials.access_key_id)
        .env("MOTO_SECRET", &credentials.secret_access_key)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let started = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break status;
        }
        if started.elapsed() > timeout && !timed_out {
            timed_out = true;
            let _ = send_signal(child.id(), 15);
            let grace = Instant::now();
            while grace.elapsed() < STOP_GRACE && child.try_wait().ok().flatten().is_none() {
                thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
        }
        thread::sleep(Duration::from_millis(50));
    };
    let stderr = stderr.join().unwrap_or_default();
    ScriptRun {
        success: status.success() && !timed_out,
        stdout: stdout.join().unwrap_or_default(),
        stderr: if timed_out {
            format!("{stderr}\n(stopped after {timeout:?})")
        } else {
            stderr
        },
    }
}

/// The example leader as `holder` with lease time `ttl` (e.g. `4s`), in
/// the environment the `lease` command gets for `settings` (no
/// `LEASE_KEY`: the example names its own).
pub fn example_leader_command(settings: &StoreSettings, holder: &str, ttl: &str) -> Command {
    let mut env = lease(settings, "unused");
    env.env_remove("LEASE_KEY");
    let mut cmd = Command::new(example_leader());
    cmd.envs(env.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("LEASE_TTL", ttl)
        .env("LEASE_HOLDER", holder);
    cmd
}

/// The example service `native/examples/leader` (leader election on
/// `lease_native::from_env`), built once per test binary.
pub fn example_leader() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-q", "-p", "lease-native", "--example", "leader"])
            .current_dir(workspace_root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the example failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target"));
        target.join("debug").join("examples").join("leader")
    })
    .clone()
}
