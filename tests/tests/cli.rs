//! The `lease` command-line tool end to end, against moto (signature
//! checking on) and s3rver.

mod support;

use lease_tests::servers::S3rver;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn etag_of(settings: &lease_native::settings::StoreSettings, key: &str) -> String {
    let (code, json, out) = lease_json(lease(settings, key).args(["inspect", "--json"]));
    assert_eq!(code, 0, "{out}");
    json["etag"].as_str().expect("etag").to_string()
}

/// `$TMPDIR/lease-cli-NAME-PID`, not created.
fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("lease-cli-{name}-{}", std::process::id()))
}

/// [`temp_path`] created as a directory.
fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = temp_path(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn inspect_acquire_renew_release_as_json() {
    let (_moto, settings) = moto_and_settings(false);
    let key = "cli/basic";

    let (code, json, out) = lease_json(lease(&settings, key).args(["inspect", "--json"]));
    assert_eq!(
        (code, &json["exists"]),
        (0, &serde_json::json!(false)),
        "{out}"
    );

    let (code, json, out) = lease_json(
        lease(&settings, key).args(["acquire", "--json", "--holder", "alice", "--ttl", "30s"]),
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(json["acquired"], true);
    assert_eq!(json["lease"]["holder"], "alice");
    assert_eq!(json["lease"]["token"], 1);
    let etag = json["lease"]["etag"].as_str().expect("etag").to_string();

    // Busy for anyone else: exit 3, naming the holder.
    let (code, json, out) =
        lease_json(lease(&settings, key).args(["acquire", "--json", "--holder", "bob"]));
    assert_eq!(
        (code, &json["holder"]),
        (3, &serde_json::json!("alice")),
        "{out}"
    );

    let (code, json, out) = lease_json(lease(&settings, key).args(["inspect", "--json"]));
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        (
            json["holder"].as_str(),
            json["token"].as_u64(),
            json["free"].as_bool()
        ),
        (Some("alice"), Some(1), Some(false))
    );
    assert_eq!(json["etag"], etag.as_str());

    let (code, json, out) =
        lease_json(lease(&settings, key).args(["renew", "--json", "--etag", &etag]));
    assert_eq!(
        (code, &json["renewed"]),
        (0, &serde_json::json!(true)),
        "{out}"
    );
    let renewed = json["lease"]["etag"].as_str().expect("etag").to_string();
    // The old etag no longer names the lease: exit 4, and nothing changes.
    let (code, json, out) =
        lease_json(lease(&settings, key).args(["release", "--json", "--etag", &etag]));
    assert_eq!(
        (code, &json["error"]),
        (4, &serde_json::json!("changed")),
        "{out}"
    );

    let (code, json, out) =
        lease_json(lease(&settings, key).args(["release", "--json", "--etag", &renewed]));
    assert_eq!(
        (code, &json["released"], &json["token"]),
        (0, &serde_json::json!(true), &serde_json::json!(1)),
        "{out}"
    );
    let (_, json, _) = lease_json(lease(&settings, key).args(["inspect", "--json"]));
    assert_eq!(
        (json["released"].as_bool(), json["free"].as_bool()),
        (Some(true), Some(true))
    );
}

#[test]
fn settings_errors_name_what_is_missing_and_hide_secrets() {
    let (_moto, settings) = moto_and_settings(false);
    // `lease inspect` with a variable removed (`None`) or set: exit 1,
    // saying what is wrong.
    for (var, value, says) in [
        ("LEASE_BUCKET", None, "LEASE_BUCKET is not set"),
        (
            "AWS_SECRET_ACCESS_KEY",
            None,
            "AWS_SECRET_ACCESS_KEY is not set",
        ),
        (
            "AWS_SECRET_ACCESS_KEY",
            Some("wrong-secret-value-0000"),
            "SignatureDoesNotMatch",
        ),
        ("LEASE_TTL", Some("2s"), "raise `ttl`"),
    ] {
        let mut cmd = lease(&settings, "cli/x");
        match value {
            Some(value) => cmd.env(var, value),
            None => cmd.env_remove(var),
        };
        let (code, _, out) = lease_json(cmd.arg("inspect"));
        assert_eq!(code, 1, "{out}");
        assert!(out.contains(says), "{out}");
        assert!(
            !out.contains("wrong-secret-value"),
            "the secret leaked: {out}"
        );
    }
}

#[test]
fn run_holds_the_lease_and_exits_with_the_commands_status() {
    let (_moto, settings) = moto_and_settings(false);
    let key = "cli/run";
    let dir = scratch_dir("run");
    let seen = dir.join("seen.json");
    // The command sees its token, and while it runs the lease is held (the
    // ttl is short, so it is renewed a few times meanwhile).
    let script = format!(
        "echo $LEASE_TOKEN > {dir}/token; sleep 4; {bin} inspect --json > {seen}; exit 7",
        dir = dir.display(),
        bin = lease_bin().display(),
        seen = seen.display()
    );
    let started = Instant::now();
    let (code, _, out) = lease_json(lease(&settings, key).args([
        "run", "--ttl", "3s", "--holder", "runner", "--", "sh", "-c", &script,
    ]));
    assert_eq!(code, 7, "{out}");
    assert!(started.elapsed() >= Duration::from_secs(4));
    assert_eq!(
        std::fs::read_to_string(dir.join("token")).unwrap().trim(),
        "1"
    );
    let during: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(
        (during["holder"].as_str(), during["free"].as_bool()),
        (Some("runner"), Some(false)),
        "{during}"
    );
    // After CMD ended the lease was released.
    let (_, after, _) = lease_json(lease(&settings, key).args(["inspect", "--json"]));
    assert_eq!(after["released"], true, "{after}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_exits_busy_at_once_without_running_the_command() {
    let (_moto, settings) = moto_and_settings(false);
    let key = "cli/busy";
    lease_ok(lease(&settings, key).args(["acquire", "--holder", "other", "--ttl", "60s"]));
    let marker = temp_path("busy");
    let started = Instant::now();
    let (code, _, out) =
        lease_json(lease(&settings, key).args(["run", "--", "touch", marker.to_str().unwrap()]));
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("held by other"), "{out}");
    assert!(
        !marker.exists(),
        "the command ran although the lease was busy"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let (code, _, _) =
        lease_json(lease(&settings, key).args(["run", "--busy-exit", "75", "--", "true"]));
    assert_eq!(code, 75);
}

/// `run --seats 2`: two commands run at once, each in its own seat (its
/// key and index in LEASE_KEY and LEASE_SEAT, the pool in LEASE_POOL); a
/// third finds both taken and exits 3 without running; one told to wait
/// runs in the first seat that frees, after its holder ended.
#[test]
fn run_in_a_pool_runs_as_many_commands_at_once_as_it_has_seats() {
    let (_moto, settings) = moto_and_settings(false);
    let pool = "cli/pool";
    let dir = scratch_dir("pool");
    // Each command writes what it saw, and when it started and ended.
    let script = |name: &str, secs: u32| {
        format!(
            "echo $LEASE_SEAT $LEASE_KEY $LEASE_POOL $LEASE_TOKEN > {d}/{name}.env; \
             touch {d}/{name}.started; sleep {secs}; touch {d}/{name}.ended",
            d = dir.display()
        )
    };
    let run = |name: &str, secs: u32, wait: Option<&str>| {
        let mut cmd = lease(&settings, pool);
        cmd.args(["run", "--ttl", "3s", "--holder", name, "--seats", "2"]);
        if let Some(wait) = wait {
            cmd.args(["--wait", wait]);
        }
        cmd.args(["--", "sh", "-c", &script(name, secs)]);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        cmd
    };
    let mut first = run("first", 4, None).spawn().unwrap();
    let mut second = run("second", 4, None).spawn().unwrap();
    let started = |name: &str| dir.join(format!("{name}.started")).exists();
    let until = Instant::now() + Duration::from_secs(20);
    while !(started("first") && started("second")) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(started("first") && started("second"), "two run at once");
    // Both seats taken: a third does not run.
    let (code, _, out) = lease_json(&mut run("third", 0, None));
    assert_eq!(code, 3, "{out}");
    assert!(!started("third"), "it ran with both seats taken");
    // One told to wait runs once a seat frees, after its holder ended.
    let (code, _, out) = lease_json(&mut run("waiter", 0, Some("30s")));
    assert_eq!(code, 0, "{out}");
    assert!(started("waiter"));
    let ended = |name: &str| std::fs::metadata(dir.join(format!("{name}.ended")));
    let waiter_start = std::fs::metadata(dir.join("waiter.started"))
        .and_then(|m| m.modified())
        .unwrap();
    let first_end = ended("first").and_then(|m| m.modified()).ok();
    let second_end = ended("second").and_then(|m| m.modified()).ok();
    assert!(
        [first_end, second_end]
            .into_iter()
            .flatten()
            .any(|end| end <= waiter_start),
        "the waiter started before either holder ended"
    );
    for child in [&mut first, &mut second] {
        assert!(child.wait().unwrap().success());
    }
    // Each saw its seat, the seat's key, the pool and a token; the first
    // two in different seats.
    let env = |name: &str| std::fs::read_to_string(dir.join(format!("{name}.env"))).unwrap();
    let mut seats = Vec::new();
    for name in ["first", "second", "waiter"] {
        let env = env(name);
        let words: Vec<&str> = env.split_whitespace().collect();
        let [seat, key, in_pool, token] = words[..] else {
            panic!("{name}: {env}")
        };
        assert!(seat == "0" || seat == "1", "{name}: {env}");
        assert_eq!(key, format!("{pool}/seat-{seat}"), "{name}: {env}");
        assert_eq!(in_pool, pool, "{name}: {env}");
        assert!(token.parse::<u64>().is_ok(), "{name}: {env}");
        seats.push(seat.to_string());
    }
    assert_ne!(seats[0], seats[1], "the first two shared a seat");
    // Both seats were given back, as released records (never deleted).
    for seat in 0..2 {
        let (code, json, out) = lease_json(
            lease(&settings, &format!("{pool}/seat-{seat}")).args(["inspect", "--json"]),
        );
        assert_eq!(
            (code, &json["released"]),
            (0, &serde_json::json!(true)),
            "{out}"
        );
    }
    // `lease ls` shows the pool with its seats.
    let (code, json, out) = lease_json(lease(&settings, pool).args(["ls", "--json"]));
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        json["pools"],
        serde_json::json!([{"pool": pool, "seats": 2, "held": 0}]),
        "{out}"
    );
    let (_, _, text) = lease_json(lease(&settings, pool).args(["ls"]));
    assert!(
        text.contains("pool cli/pool: 0 of 2 seat(s) held"),
        "{text}"
    );
    // A pool of 0 or 1001 seats is a usage error (exit 2), before any
    // request.
    for bad in ["0", "1001"] {
        let (code, _, out) =
            lease_json(lease(&settings, pool).args(["run", "--seats", bad, "--", "true"]));
        assert_eq!(code, 2, "{out}");
        assert!(out.contains("--seats"), "{out}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `--wait`: a wait that runs out while another holder's lease is live
/// exits 3 (busy) once it is spent; a lease that lapses during the wait is
/// taken, by `acquire` and by `run` (which then runs the command).
#[test]
fn wait_gives_up_busy_or_takes_a_lease_that_lapses() {
    let (moto, settings) = moto_and_settings(false);
    let key = "cli/wait";
    lease_ok(lease(&settings, key).args(["acquire", "--holder", "alice", "--ttl", "60s"]));
    let started = Instant::now();
    let (code, json, out) = lease_json(
        lease(&settings, key).args(["acquire", "--json", "--holder", "bob", "--wait", "2s"]),
    );
    assert_eq!(
        (code, &json["holder"]),
        (3, &serde_json::json!("alice")),
        "{out}"
    );
    assert!(started.elapsed() >= Duration::from_secs(2), "gave up early");
    // Its re-reads named the version it had read (`If-None-Match`): moto
    // answered the unchanged lease 304, without a body.
    let log = std::fs::read_to_string(moto.log_path()).unwrap_or_default();
    // (werkzeug colours some lines: `"\x1b[36mGET /.. HTTP/1.1\x1b[0m" 304 -`)
    let plain = |l: &str| l.replace("\x1b[0m", "").replace("\x1b[36m", "");
    let reads = |status: &str| {
        log.lines()
            .map(plain)
            .filter(|l| l.contains("\"GET /") && l.contains("/cli/wait HTTP/1.1\""))
            .filter(|l| l.contains(&format!("HTTP/1.1\" {status} ")))
            .count()
    };
    assert!(
        reads("304") >= 2 && reads("200") >= 1,
        "re-reads: {} answered 304, {} answered 200\n{}",
        reads("304"),
        reads("200"),
        moto.log_tail(30)
    );

    // A lease of 3 s nobody renews: a waiter takes it once it lapses.
    let key = "cli/wait-lapse";
    lease_ok(lease(&settings, key).args(["acquire", "--holder", "alice", "--ttl", "3s"]));
    let (code, json, out) = lease_json(lease(&settings, key).args([
        "acquire", "--json", "--holder", "bob", "--ttl", "3s", "--wait", "30s",
    ]));
    assert_eq!(
        (code, &json["lease"]["holder"], &json["lease"]["token"]),
        (0, &serde_json::json!("bob"), &serde_json::json!(2)),
        "{out}"
    );
    let marker = temp_path("wait");
    lease_ok(lease(&settings, key).args([
        "run",
        "--ttl",
        "3s",
        "--wait",
        "30s",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]));
    assert!(marker.exists(), "the command ran once the lease lapsed");
    std::fs::remove_file(&marker).ok();
}

#[test]
fn run_stops_the_command_when_the_lease_is_broken_from_outside() {
    let (_moto, settings) = moto_and_settings(false);
    let key = "cli/broken";
    let mut child = start(
        lease(&settings, key).args([
            "run", "--ttl", "3s", "--grace", "200ms", "--", "sleep", "60",
        ]),
        Stdio::piped(),
    );
    // Wait until it holds the lease, then break the version it wrote.
    let etag = written_etag(&settings, key, Duration::from_secs(20));
    let (code, json, out) =
        lease_json(lease(&settings, key).args(["break", "--json", "--etag", &etag]));
    if code == 4 {
        // A renewal landed between the inspect and the break: break the new version.
        let etag = etag_of(&settings, key);
        let (code, _, out) = lease_json(lease(&settings, key).args(["break", "--etag", &etag]));
        assert_eq!(code, 0, "{out}");
    } else {
        assert_eq!(
            (code, &json["broken"]),
            (0, &serde_json::json!(true)),
            "{out}"
        );
    }
    let broken_at = Instant::now();
    let status = wait_with_timeout(&mut child, Duration::from_secs(20));
    let stderr = stderr_of(&mut child);
    assert_eq!(status, Some(4), "lease run should exit 4 (lost): {stderr}");
    // Lost at the next renewal (ttl/3 = 1 s), then TERM stops `sleep` at once.
    assert!(
        broken_at.elapsed() < Duration::from_secs(6),
        "took {:?}: {stderr}",
        broken_at.elapsed()
    );
    assert!(stderr.contains("lost the lease"), "{stderr}");
}

#[test]
fn run_killed_with_sigkill_takes_its_command_with_it() {
    // `kill -9` of `lease run` leaves nothing to renew the lease or stop
    // CMD before the deadline: CMD must die with it, not run on unleased.
    let (_moto, settings) = moto_and_settings(false);
    let dir = scratch_dir("kill9");
    let pid_file = dir.join("cmd.pid");
    let script = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let mut child = start(
        lease(&settings, "cli/kill9").args([
            "run", "--ttl", "3s", "--grace", "200ms", "--", "sh", "-c", &script,
        ]),
        Stdio::null(),
    );
    let started = Instant::now();
    let cmd_pid: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "CMD never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(lease_tests::servers::process_exists(cmd_pid));
    child.kill().expect("SIGKILL to lease run");
    child.wait().expect("reaped");
    let killed_at = Instant::now();
    // CMD was re-parented when lease run died; it is gone (and reaped by
    // whoever adopted it) within moments, long before the 3 s ttl ends.
    while lease_tests::servers::process_exists(cmd_pid) {
        assert!(
            killed_at.elapsed() < Duration::from_secs(2),
            "CMD (pid {cmd_pid}) outlived lease run by {:?}",
            killed_at.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_refuses_a_grace_the_ttl_cannot_cover() {
    let (_moto, settings) = moto_and_settings(false);
    let (code, _, out) = lease_json(
        lease(&settings, "cli/grace").args(["run", "--ttl", "3s", "--grace", "2s", "--", "true"]),
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("grace 2s is too long"), "{out}");
    // Nothing was acquired.
    let (_, json, _) = lease_json(lease(&settings, "cli/grace").args(["inspect", "--json"]));
    assert_eq!(json["exists"], false, "{json}");
}

/// `cmd` started in the background, its stdout discarded, its stderr
/// piped (for [`stderr_of`]) or discarded.
fn start(cmd: &mut Command, stderr: Stdio) -> std::process::Child {
    cmd.stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("lease starts")
}

#[test]
fn probe_and_acquire_refuse_a_store_that_ignores_conditions() {
    let s3rver = S3rver::start(BUCKET).expect("s3rver starts");
    let settings = s3rver_settings(&s3rver);
    let (code, json, out) = lease_json(lease(&settings, "cli/unsafe").args(["probe", "--json"]));
    assert_eq!(code, 5, "{out}");
    assert_eq!(json["protocols"]["cas"]["safe"], false, "{json}");
    let (code, _, out) = lease_json(lease(&settings, "cli/unsafe").arg("acquire"));
    assert_eq!(code, 5, "{out}");
    assert!(
        out.contains("capability check `second_create_refused`"),
        "{out}"
    );

    let moto = moto(false);
    let (code, json, out) =
        lease_json(lease(&moto_settings(&moto), "cli/safe").args(["probe", "--json"]));
    assert_eq!(code, 0, "{out}");
    for protocol in ["cas", "epochs", "mutex"] {
        assert_eq!(json["protocols"][protocol]["safe"], true, "{json}");
    }
    assert_eq!(json["etag_quoting"]["quoted"], true, "{json}");
}

#[test]
fn help_lists_commands_exit_codes_and_examples() {
    let out = Command::new(lease_bin())
        .arg("--help")
        .output()
        .expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "inspect",
        "acquire",
        "renew",
        "release",
        "break",
        "probe",
        "run",
        "Exit codes",
        "Examples",
        "--json",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
    }
}

/// A client of the simple single-object format, written as such clients
/// are: the record is `{"expires_at": <seconds>}` and nothing else; it
/// reads the key, creates it with `If-None-Match: *` when absent, and
/// takes it over with `If-Match` once `expires_at` has passed by the
/// reply's `Date`. `true` when it holds the lease for `ttl`.
fn simple_client_acquires(
    settings: &lease_native::settings::StoreSettings,
    key: &str,
    ttl: f64,
) -> bool {
    use lease_core::store::{PutCondition, ReplyKind};
    use lease_core::StoreOp;
    let store = store(settings);
    let read = call(&store, StoreOp::Get { key: key.into() });
    let now = read.date.expect("the store sends Date").unix_ms.0 as f64 / 1000.0;
    let condition = match read.kind {
        ReplyKind::Missing => PutCondition::IfAbsent,
        ReplyKind::Found { etag, body } => {
            let record: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
            let expires_at = record["expires_at"].as_f64().expect("expires_at");
            if expires_at >= now {
                return false;
            }
            PutCondition::IfMatch(etag)
        }
        other => panic!("{other:?}"),
    };
    let body = format!(r#"{{"expires_at": {}}}"#, now + ttl);
    let written = call(
        &store,
        StoreOp::Put {
            key: key.into(),
            body: body.into_bytes(),
            condition,
        },
    );
    matches!(written.kind, ReplyKind::Written { .. })
}

/// A simple client's record (`{"expires_at": …}`, no token, none of our
/// fields): `inspect` shows it held by an unnamed holder, `acquire` is busy
/// until it expires and then takes it over with a token no lower than the
/// store's time in ms; after our release the simple client takes the key,
/// and ours comes back above the token it had.
#[test]
fn a_simple_clients_record_is_shown_waited_for_and_taken_over() {
    let (_moto, settings) = moto_and_settings(false);
    let key = "cli/simple";
    // The binary first: building it must not eat the record's 3 s.
    support::lease_bin();
    assert!(simple_client_acquires(&settings, key, 3.0));
    let (code, json, out) = lease_json(lease(&settings, key).args(["inspect", "--json"]));
    assert_eq!(
        (code, &json["foreign"], &json["free"], &json["holder"]),
        (
            0,
            &serde_json::json!(true),
            &serde_json::json!(false),
            &serde_json::json!("")
        ),
        "{out}"
    );
    let (code, _, out) = lease_json(lease(&settings, key).arg("inspect"));
    assert!(code == 0 && out.contains("unnamed"), "{out}");
    let (code, _, out) = lease_json(lease(&settings, key).args(["acquire", "--holder", "bob"]));
    assert!(code == 3 && out.contains("unnamed holder"), "{out}");

    let (code, json, out) = lease_json(lease(&settings, key).args([
        "acquire", "--json", "--holder", "bob", "--ttl", "30s", "--wait", "30s",
    ]));
    assert_eq!(code, 0, "{out}");
    let token = json["lease"]["token"].as_u64().expect("token");
    assert!(
        token > 1_700_000_000_000,
        "a token from the store's time: {token}"
    );
    assert!(
        !simple_client_acquires(&settings, key, 3.0),
        "our live lease keeps it out"
    );
    let etag = json["lease"]["etag"].as_str().expect("etag").to_string();
    let (code, _, out) = lease_json(lease(&settings, key).args(["release", "--etag", &etag]));
    assert_eq!(code, 0, "{out}");

    // The simple client takes our released record; we wait it out.
    assert!(simple_client_acquires(&settings, key, 3.0));
    let (code, json, out) = lease_json(
        lease(&settings, key).args(["acquire", "--json", "--holder", "carol", "--wait", "30s"]),
    );
    assert_eq!(code, 0, "{out}");
    let next = json["lease"]["token"].as_u64().expect("token");
    assert!(next > token, "{next} <= {token}");
}

/// Requests moto has logged so far (one line per request, written as it
/// answers: read until the count holds still for a moment).
fn requests_logged(moto: &lease_tests::servers::Moto) -> usize {
    let count = || {
        std::fs::read_to_string(moto.log_path())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" HTTP/1.1"))
            .count()
    };
    let mut last = count();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = count();
        if now == last {
            return now;
        }
        last = now;
    }
}

/// A passed probe is kept (`lease_cli::probe_cache`): the next `acquire`
/// costs what the operation costs, 2 requests on a fresh key (GET, PUT);
/// `lease probe` probes afresh anyway.
#[test]
fn a_cached_probe_makes_an_acquire_two_requests() {
    let (moto, settings) = moto_and_settings(false);
    let dir = temp_path("probe-cache");
    let cached = |key: &str| {
        let mut cmd = lease(&settings, key);
        cmd.env("LEASE_PROBE_CACHE_DIR", &dir);
        cmd
    };
    let before = requests_logged(&moto);
    lease_ok(cached("cli/cached-1").arg("acquire"));
    let first = requests_logged(&moto) - before;
    assert!(first > 6, "the first acquire probes: {first} requests");

    let before = requests_logged(&moto);
    lease_ok(cached("cli/cached-2").arg("acquire"));
    assert_eq!(requests_logged(&moto) - before, 2, "GET and PUT only");

    let before = requests_logged(&moto);
    lease_ok(cached("cli/cached-3").arg("probe"));
    assert!(
        requests_logged(&moto) - before > 6,
        "lease probe probes afresh"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `lease ls PREFIX`: every lease under the prefix, whichever protocol or
/// client wrote it (a cas lease held, an epochs lease renewed once, listed
/// by its newest epoch, a mutex lock released, a simple client's record,
/// Litestream's and Terraform's locks with their holders), objects that are
/// not leases counted apart, other prefixes left out; as JSON and as a
/// table. `inspect` and `acquire` name the other tools' locks too.
#[test]
fn ls_lists_every_lease_under_a_prefix() {
    use lease_core::store::PutCondition;
    use lease_core::StoreOp;
    use serde_json::json;
    let (_moto, settings) = moto_and_settings(false);
    lease_ok(lease(&settings, "fleet/a").args(["acquire", "--holder", "alice", "--ttl", "60s"]));
    let b = lease_ok(lease(&settings, "fleet/b").args([
        "acquire",
        "--json",
        "--holder",
        "bob",
        "--protocol",
        "epochs",
        "--ttl",
        "60s",
    ]));
    let etag = b["lease"]["etag"].as_str().expect("etag").to_string();
    lease_ok(lease(&settings, "fleet/b").args([
        "renew",
        "--etag",
        &etag,
        "--holder",
        "bob",
        "--protocol",
        "epochs",
        "--ttl",
        "60s",
    ]));
    lease_ok(lease(&settings, "fleet/c").args([
        "acquire",
        "--holder",
        "carol",
        "--protocol",
        "mutex",
        "--ttl",
        "60s",
    ]));
    let e = lease_ok(lease(&settings, "fleet/e").args(["acquire", "--json", "--holder", "erin"]));
    let etag = e["lease"]["etag"].as_str().expect("etag").to_string();
    lease_ok(lease(&settings, "fleet/e").args(["release", "--etag", &etag]));
    assert!(simple_client_acquires(&settings, "fleet/d", 60.0));
    let put = call(
        &store(&settings),
        StoreOp::Put {
            key: "fleet/notes.txt".into(),
            body: b"not a lease".to_vec(),
            condition: PutCondition::None,
        },
    );
    assert!(
        matches!(put.kind, lease_core::store::ReplyKind::Written { .. }),
        "{put:?}"
    );
    lease_ok(lease(&settings, "elsewhere/x").args(["acquire", "--holder", "dave"]));
    // Other tools' locks: Litestream's (live for a minute by the store's
    // clock) and Terraform's (no expiry).
    let now = call(
        &store(&settings),
        StoreOp::Get {
            key: "fleet/a".into(),
        },
    )
    .date
    .expect("the store sends Date")
    .unix_ms;
    let litestream = format!(
        r#"{{"generation":3,"expires_at":"{}","owner":"db-1:4242"}}"#,
        rfc3339(now + Duration::from_secs(60))
    );
    let tflock = r#"{"ID":"6c3b2f1e-0000-4000-8000-000000000001","Operation":"OperationTypeApply","Info":"","Who":"ci@runner-4","Version":"1.10.2","Created":"2026-09-21T13:56:40Z","Path":"fleet/terraform.tfstate"}"#;
    for (key, body) in [
        ("fleet/db/lock.json", litestream.as_str()),
        ("fleet/terraform.tfstate.tflock", tflock),
    ] {
        let put = call(
            &store(&settings),
            StoreOp::Put {
                key: key.into(),
                body: body.as_bytes().to_vec(),
                condition: PutCondition::IfAbsent,
            },
        );
        assert!(
            matches!(put.kind, lease_core::store::ReplyKind::Written { .. }),
            "{put:?}"
        );
    }

    // The positional prefix wins over LEASE_KEY.
    let listed = lease_ok(lease(&settings, "elsewhere/x").args(["ls", "fleet/", "--json"]));
    let leases = listed["leases"].as_array().expect("leases");
    let row = |key: &str| {
        leases
            .iter()
            .find(|l| l["key"] == key)
            .unwrap_or_else(|| panic!("{key} not listed: {listed}"))
    };
    assert_eq!(leases.len(), 7, "{listed}");
    let a = row("fleet/a");
    assert_eq!(
        (&a["protocol"], &a["holder"], &a["free"]),
        (&json!("cas"), &json!("alice"), &json!(false))
    );
    assert!(a["time_left_ms"].as_u64().unwrap() > 40_000, "{a}");
    let b = row("fleet/b");
    assert_eq!(
        (&b["protocol"], &b["holder"], &b["token"]),
        (&json!("epochs"), &json!("bob"), &json!(2))
    );
    assert_eq!(b["object"], "fleet/b/00000000000000000002.json", "{b}");
    let c = row("fleet/c");
    assert_eq!(
        (&c["protocol"], &c["holder"], &c["free"]),
        (&json!("mutex"), &json!("carol"), &json!(false))
    );
    // A cas lease given back keeps its record, released.
    let e = row("fleet/e");
    assert_eq!(
        (&e["protocol"], &e["released"], &e["free"]),
        (&json!("cas"), &json!(true), &json!(true))
    );
    let d = row("fleet/d");
    assert_eq!(
        (&d["protocol"], &d["foreign"], &d["free"]),
        (&json!("foreign"), &json!(true), &json!(false))
    );
    assert_eq!(listed["others"], json!(["fleet/notes.txt"]));
    let l = row("fleet/db/lock.json");
    assert_eq!(
        (&l["protocol"], &l["holder"], &l["token"], &l["free"]),
        (
            &json!("litestream"),
            &json!("db-1:4242"),
            &json!(3),
            &json!(false)
        )
    );
    assert!(l["time_left_ms"].as_u64().unwrap() > 40_000, "{l}");
    let t = row("fleet/terraform.tfstate.tflock");
    assert_eq!(
        (
            &t["protocol"],
            &t["holder"],
            &t["held_until_broken"],
            &t["time_left_ms"]
        ),
        (
            &json!("terraform"),
            &json!("ci@runner-4"),
            &json!(true),
            &json!(null)
        )
    );
    // inspect names them; acquire is busy on both.
    let (code, _, out) =
        lease_json(lease(&settings, "fleet/terraform.tfstate.tflock").arg("inspect"));
    assert!(
        code == 0 && out.contains("\"ci@runner-4\" (a Terraform/OpenTofu state lock (.tflock))"),
        "{out}"
    );
    assert!(out.contains("held until broken"), "{out}");
    let (code, _, out) = lease_json(
        lease(&settings, "fleet/terraform.tfstate.tflock").args(["acquire", "--holder", "bob"]),
    );
    assert!(code == 3 && out.contains("until broken"), "{out}");
    let (code, _, out) =
        lease_json(lease(&settings, "fleet/db/lock.json").args(["acquire", "--holder", "bob"]));
    assert!(
        code == 3 && out.contains("held by db-1:4242, a Litestream lease"),
        "{out}"
    );

    let (code, _, out) = lease_json(lease(&settings, "fleet/").arg("ls"));
    assert_eq!(code, 0, "{out}");
    for shown in [
        "fleet/a",
        "alice",
        "held",
        "epochs",
        "released",
        "(unnamed: simple client)",
        "litestream",
        "held until broken",
        "1 other object",
    ] {
        assert!(out.contains(shown), "{shown} not in:\n{out}");
    }
    assert!(!out.contains("elsewhere"), "{out}");
}

/// `at` as RFC 3339 (`2026-09-21T14:13:50.250Z`), as Go writes a time
/// in JSON (Litestream's `expires_at`).
fn rfc3339(at: lease_core::UnixMillis) -> String {
    let secs = at.0 / 1000;
    let (y, m, d) = lease_core::time::civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        at.0 % 1000
    )
}

/// `lease probe` checks the bucket around the protocol too: moto takes an
/// unconditional write (no bucket policy: an emulator enforces none), one
/// of eight concurrent creates wins, and once versioning is on the probe
/// notices it and warns. `lease policy` prints the statement to apply
/// (checked as text; no test applies it to a bucket).
#[test]
fn probe_checks_the_bucket_and_policy_prints_the_statement() {
    use serde_json::json;
    // One request at a time: the probe races concurrent creates and
    // replaces, and moto's threaded server lets two of them win now and
    // then (docs/protocols.md, "Which stores"; `make qualify`'s row), which
    // the probe rightly reports as a failure.
    let (moto, settings) = moto_and_settings(true);
    let (code, json, out) = lease_json(lease(&settings, "locks/p").args(["probe", "--json"]));
    assert_eq!(code, 0, "{out}");
    let bucket = &json["bucket"];
    assert_eq!(
        bucket["unconditional_write"],
        json!({"refused": false}),
        "{out}"
    );
    let concurrent = &bucket["concurrent"];
    assert_eq!(
        (&concurrent["verdict"], &concurrent["passed"]),
        (&json!("pass"), &json!(true)),
        "{out}"
    );
    let races = concurrent["races"].as_array().expect("races");
    assert_eq!(races.len(), 6, "3 rounds of creates and replaces: {out}");
    assert!(
        races
            .iter()
            .all(|r| r["winners"].as_array().map(Vec::len) == Some(1)),
        "{out}"
    );
    assert_eq!(bucket["versioned"], json!(false), "{out}");
    assert_eq!(bucket["left"], json!([]), "{out}");

    moto.enable_versioning(&settings.bucket)
        .expect("versioning on");
    let (code, json, out) = lease_json(lease(&settings, "locks/p").args(["probe", "--json"]));
    assert_eq!(code, 0, "{out}");
    assert_eq!(json["bucket"]["versioned"], json!(true), "{out}");
    let (code, _, out) = lease_json(lease(&settings, "locks/p").args(["probe", "--ttl", "30s"]));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("bucket keeps versions: yes") && out.contains("about 8640 a day"),
        "{out}"
    );

    let (code, policy, out) = lease_json(lease(&settings, "locks/").args(["policy", "--json"]));
    assert_eq!(code, 0, "{out}");
    let statement = &policy["Statement"][0];
    assert_eq!(statement["Effect"], "Deny", "{out}");
    assert_eq!(statement["Action"], "s3:PutObject");
    assert_eq!(
        statement["Resource"],
        format!("arn:aws:s3:::{}/locks/*", settings.bucket)
    );
    assert_eq!(
        statement["Condition"]["Null"],
        json!({"s3:if-none-match": "true", "s3:if-match": "true"})
    );
    assert!(policy["Statement"].get(1).is_none(), "{out}");
    // With --deletes (cas, the default): deletes without If-Match too.
    let (code, policy, out) =
        lease_json(lease(&settings, "locks/").args(["policy", "--deletes", "--json"]));
    assert_eq!(code, 0, "{out}");
    assert_eq!(policy["Statement"][0], *statement);
    let deletes = &policy["Statement"][1];
    assert_eq!(deletes["Effect"], "Deny", "{out}");
    assert_eq!(deletes["Action"], "s3:DeleteObject");
    assert_eq!(
        deletes["Resource"],
        format!("arn:aws:s3:::{}/locks/*", settings.bucket)
    );
    assert_eq!(deletes["Condition"]["Null"], json!({"s3:if-match": "true"}));
    // Not for epochs, which deletes superseded epochs without If-Match.
    let (code, _, out) = lease_json(lease(&settings, "locks/").args([
        "--protocol",
        "epochs",
        "policy",
        "--deletes",
        "--json",
    ]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("epochs"), "{out}");
}

/// `lease run --metrics-addr`: while CMD runs under the lease, `/healthz`
/// says it leads and `/metrics` shows the lease held and its renewals.
#[test]
fn run_serves_metrics_and_health_while_it_holds() {
    use lease_tests::servers::{free_port, http_request};
    let (_moto, settings) = moto_and_settings(false);
    let addr = format!("127.0.0.1:{}", free_port().expect("a free port"));
    let mut child = start(
        lease(&settings, "cli/metrics").args([
            "run",
            "--ttl",
            "4s",
            "--metrics-addr",
            &addr,
            "--",
            "sleep",
            "6",
        ]),
        Stdio::null(),
    );
    let endpoint = format!("http://{addr}");
    let get = |path: &str| http_request(&endpoint, "GET", path, &[], b"").ok();
    // The endpoint is up before the lease is taken ("not leading"), then
    // says it leads.
    let started = Instant::now();
    let health = loop {
        match get("/healthz") {
            Some(r) if r.text().contains("leading with") => break r,
            Some(r) => assert_eq!(r.status, 200, "{}", r.text()),
            None => {}
        }
        assert!(started.elapsed() < Duration::from_secs(30), "never leading");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(health.status, 200, "{}", health.text());
    assert!(
        health.text().contains("leading with token 1"),
        "{}",
        health.text()
    );
    // After a renewal or two.
    std::thread::sleep(Duration::from_secs(3));
    let metrics = get("/metrics").expect("/metrics answers").text();
    assert!(
        metrics.contains("lease_held{key=\"cli/metrics\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("lease_renew_total{key=\"cli/metrics\",outcome=\"renewed\"}"),
        "{metrics}"
    );
    let status = child.wait().expect("lease run ends");
    assert_eq!(status.code(), Some(0));
}

/// `lease run --trace` writes its flight recorder at once on SIGUSR1,
/// while CMD goes on, and the trace replays: the acquisition and the
/// holding so far, with their deadlines judged.
#[test]
fn run_writes_its_flight_recorder_on_sigusr1_and_it_replays() {
    let (_moto, settings) = moto_and_settings(false);
    let key = "cli/usr1";
    let dir = scratch_dir("usr1");
    let trace = dir.join("run.trace");
    let mut child = start(
        lease(&settings, key)
            .args(["run", "--ttl", "3s", "--trace"])
            .arg(&trace)
            .args(["--", "sleep", "5"]),
        Stdio::piped(),
    );
    // Held, and renewed once (ttl/3 = 1 s), before it is asked.
    written_etag(&settings, key, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(!trace.exists());
    let kill = Command::new("kill")
        .args(["-USR1", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let asked = Instant::now();
    while !trace.exists() {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "no trace written"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // CMD was not disturbed: it ends on its own, the lease released.
    let status = wait_with_timeout(&mut child, Duration::from_secs(20));
    let stderr = stderr_of(&mut child);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stderr.contains("(on request)"), "{stderr}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let c = settings.credentials.as_ref().unwrap();
    assert!(!text.contains(&c.access_key_id) && !text.contains(&c.secret_access_key));
    let (code, report) = replay_json(&trace);
    assert_eq!(code, Some(0), "{report:#}");
    let runs = report["runs"].as_array().unwrap();
    let ops: Vec<&str> = runs.iter().map(|r| r["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["acquire", "hold"], "{report:#}");
    assert!(
        runs.iter().all(|r| r["replayed"] == "identical"),
        "{report:#}"
    );
    // Written mid-hold: the holding has no outcome yet.
    assert!(runs[1]["outcome"].is_null(), "{report:#}");
    assert!(
        report["deadlines_judged"].as_u64().unwrap() >= 2,
        "{report:#}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// An auditor's credentials (moto's IAM: `s3:GetObject` and
/// `s3:ListBucket` only): `lease probe --read-only` and `lease ls` work and
/// write nothing, the read-only probe shows the fleet's verdict and says
/// what it could not check; the full probe is denied (exit 1), and so is
/// an acquire.
#[test]
fn read_only_credentials_probe_read_only_and_list() {
    use lease_core::settings::Credentials;
    let (moto, settings) = moto_and_settings(false);
    // The fleet: a lease held, and the verdict its probe kept.
    lease_ok(lease(&settings, "audit/job").args(["probe"]));
    lease_ok(lease(&settings, "audit/job").args(["acquire", "--holder", "alice"]));
    let reader = moto.create_read_only_credentials().expect("a reader");
    let mut read_only = settings.clone();
    read_only.credentials = Some(Credentials {
        access_key_id: reader.access_key_id.clone(),
        secret_access_key: reader.secret_access_key.clone(),
        session_token: None,
    });
    let before = list_keys(&settings, "audit/");
    let (code, json, out) =
        lease_json(lease(&read_only, "audit/job").args(["probe", "--read-only", "--json"]));
    assert_eq!(code, 0, "{out}");
    let checks = json["checks"].as_array().expect("checks");
    let result = |name: &str| {
        checks
            .iter()
            .find(|c| c["check"] == name)
            .map(|c| c["passed"].clone())
            .unwrap_or_default()
    };
    assert_eq!(result("read"), true, "{out}");
    assert_eq!(result("date_header"), true, "{out}");
    assert_eq!(result("not_modified"), true, "{out}");
    assert_eq!(result("list"), true, "{out}");
    assert!(
        result("versioning").is_null(),
        "unknown without a write: {out}"
    );
    assert_eq!(json["fleet_verdict"]["state"], "passed", "{out}");
    let not_checked = json["not_checked"].as_array().expect("listed");
    assert!(not_checked.iter().any(|c| c == "create_if_absent"), "{out}");
    assert!(
        not_checked.iter().any(|c| c == "concurrent_writes"),
        "{out}"
    );
    let (code, _, out) = lease_json(lease(&read_only, "audit/").args(["ls", "--json"]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("alice"), "{out}");
    assert_eq!(list_keys(&settings, "audit/"), before, "nothing written");
    // What needs writes is denied, and says so.
    let (code, _, out) = lease_json(lease(&read_only, "audit/job").args(["probe"]));
    assert_eq!(code, 1, "{out}");
    assert!(out.to_lowercase().contains("denied"), "{out}");
}

fn list_keys(settings: &lease_native::settings::StoreSettings, prefix: &str) -> Vec<String> {
    use lease_core::store::ReplyKind;
    use lease_core::StoreOp;
    match call(
        &store(settings),
        StoreOp::List {
            prefix: prefix.into(),
            continuation: None,
            max_keys: None,
        },
    )
    .kind
    {
        ReplyKind::Listed { entries, .. } => entries.into_iter().map(|e| e.key).collect(),
        other => panic!("listing {prefix}: {other:?}"),
    }
}

/// Leaderless time measured from the outside: `lease ls --watch` sees a
/// leader's lease go free after its `lease run` is killed (`SIGKILL`: no
/// release, the record expires after its ttl), and held again by the next
/// leader, and says for how long the key had none.
#[test]
fn ls_watch_measures_the_leaderless_time_after_a_leader_is_killed() {
    let (_moto, settings) = moto_and_settings(true);
    let key = "watch/leader";
    let watcher = lease(&settings, "watch/")
        .args(["ls", "--json", "--watch", "200ms", "--for", "20s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lease ls --watch runs");
    let mut alice = start(
        lease(&settings, key).args([
            "run", "--ttl", "3s", "--holder", "alice", "--", "sleep", "60",
        ]),
        Stdio::null(),
    );
    written_etag(&settings, key, Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(1));
    alice.kill().expect("SIGKILL to alice's lease run");
    let _ = alice.wait();
    let killed = Instant::now();
    // The record expires 3 s after alice's last renewal; bob starts later.
    std::thread::sleep(Duration::from_secs(6));
    let mut bob = start(
        lease(&settings, key).args(["run", "--ttl", "3s", "--holder", "bob", "--", "sleep", "60"]),
        Stdio::null(),
    );
    let out = watcher.wait_with_output().expect("the watch ends");
    let bob_started = killed.elapsed();
    let _ = bob.kill();
    let _ = bob.wait();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let at = |what: &str| {
        events
            .iter()
            .find(|e| e["event"] == what && e["key"] == key)
            .unwrap_or_else(|| panic!("no {what} event for {key}: {text}"))
            .clone()
    };
    assert_eq!(at("held")["holder"], "alice", "{text}");
    assert_eq!(at("leaderless")["was"], "alice", "{text}");
    let led = at("led");
    assert_eq!(led["holder"], "bob", "{text}");
    let gap = led["leaderless_ms"].as_u64().expect("ms");
    // From the record's expiry (2 to 4 s after the kill) to bob's
    // acquisition (6 s after it, and his start-up): a few seconds, never
    // more than the time from the kill to bob's start.
    assert!(
        (1_000..=bob_started.as_millis() as u64).contains(&gap),
        "leaderless {gap} ms, bob started {bob_started:?} after the kill: {text}"
    );
    let summary = events
        .iter()
        .find(|e| e["event"] == "summary")
        .expect("a summary");
    assert_eq!(summary["keys"][key]["leaderless_ms"], gap, "{text}");
    assert_eq!(summary["keys"][key]["held"]["holder"], "bob", "{text}");
}
