//! `lease run` stops the whole job, not CMD alone (issue 24), with real
//! processes against moto: four job shapes, each in two situations.
//!
//! Shapes (every process that does the work writes its pid, then a
//! timestamp in Unix ms every 50 ms, to files the test reads):
//! - `cmd`: the job is CMD itself;
//! - `shell_child`: the job is a child of CMD's shell (`sh -c 'job; notify'`);
//! - `stubborn_grandchild`: a grandchild that ignores TERM;
//! - `setsid_daemon`: CMD starts a daemon with `setsid -f` (its own
//!   session, its parent gone at once) and keeps working itself.
//!
//! Situations:
//! - `partition`: the fault proxy cuts `lease run` off the bucket; the
//!   lease expires and another holder acquires it straight from moto. The
//!   job's last heartbeat must come before that holder's acquire was sent
//!   (overlap 0), and `lease run` exits 4 (lost);
//! - `sigkill`: `lease run` is killed with `SIGKILL`; every process of the
//!   job must be gone, and its last heartbeat written, before the expiry of
//!   the lease record on the store (when another holder could get in).
//!
//! Each case runs twice: with the cgroup per run where this machine allows
//! it (`auto`), and with `LEASE_RUN_CGROUP=off`, which leaves the subreaper
//! and the walk of the keeper's descendants (what a machine without a
//! writable cgroup v2 gets). After each case no process of the job may be
//! left: the test looks for its marker in every process's environment, and
//! kills by pid whatever it finds when the case ends, pass or fail.

#![cfg(target_os = "linux")]

mod support;

use lease_core::wire::EtagQuoting;
use lease_core::wire::Provider;
use lease_native::settings::{Credentials, StoreSettings};
use lease_tests::lab::proxy::{Dialect, FaultProxy};
use lease_tests::servers::{send_signal, Moto, MotoOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{lease, lease_json, wait_with_timeout, written_etag, BUCKET};

const TTL: &str = "3s";
const GRACE: &str = "200ms";
const SIGKILL: i32 = 9;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    Cmd,
    ShellChild,
    StubbornGrandchild,
    SetsidDaemon,
}

impl Shape {
    /// The processes that beat: each writes `<name>.pid` and `<name>.hb`.
    fn beaters(self) -> &'static [&'static str] {
        match self {
            Shape::Cmd => &["cmd"],
            Shape::ShellChild => &["child"],
            Shape::StubbornGrandchild => &["grandchild"],
            Shape::SetsidDaemon => &["daemon", "cmd"],
        }
    }

    /// CMD and its arguments (`$LR_DIR` is the case's directory).
    fn cmd(self, dir: &Path) -> Vec<String> {
        let beat = dir.join("beat.sh").display().to_string();
        let sh = |script: String| vec!["sh".to_string(), "-c".to_string(), script];
        match self {
            Shape::Cmd => vec!["sh".into(), beat, "cmd".into()],
            Shape::ShellChild => sh(format!("sh {beat} child; echo notify")),
            Shape::StubbornGrandchild => sh(format!(
                "sh -c 'sh {beat} grandchild ignore-term; true'; true"
            )),
            Shape::SetsidDaemon => sh(format!("setsid -f sh {beat} daemon; sh {beat} cmd")),
        }
    }
}

const BEAT: &str = r#"#!/bin/sh
# beat.sh NAME [ignore-term]: its pid, then the time (Unix ms) every 50 ms.
[ "$2" = ignore-term ] && trap '' TERM
echo $$ > "$LR_DIR/$1.pid"
while :; do date +%s%3N >> "$LR_DIR/$1.hb"; sleep 0.05; done
"#;

/// The processes whose environment holds `LR_MARKER=<marker>`.
fn marked(marker: &str) -> Vec<u32> {
    let needle = format!("LR_MARKER={marker}\0");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

/// One case's directory and marker; kills what is left of the job and
/// removes the directory when dropped, pass or fail.
struct Case {
    dir: PathBuf,
    marker: String,
    shape: Shape,
}

impl Case {
    fn new(shape: Shape, label: &str) -> Case {
        let marker = format!("lr-{}-{label}-{}", std::process::id(), now_ms());
        let dir = std::env::temp_dir().join(&marker);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("beat.sh"), BEAT).unwrap();
        Case { dir, marker, shape }
    }

    /// `lease run` with this case's directory, marker and cgroup setting,
    /// its JSON notes to `stderr.jsonl`; CMD is for the caller to add.
    fn lease_run(&self, settings: &StoreSettings, key: &str, cgroup: &str) -> Command {
        let stderr = std::fs::File::create(self.dir.join("stderr.jsonl")).unwrap();
        let mut cmd = lease(settings, key);
        cmd.args([
            "run",
            "--json",
            "--no-probe",
            "--ttl",
            TTL,
            "--grace",
            GRACE,
            "--",
        ])
        .env("LR_DIR", &self.dir)
        .env("LR_MARKER", &self.marker)
        .env("LEASE_RUN_CGROUP", cgroup)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
        cmd
    }

    /// `lease run` of this case's job.
    fn run(&self, settings: &StoreSettings, key: &str, cgroup: &str) -> Child {
        self.lease_run(settings, key, cgroup)
            .args(self.shape.cmd(&self.dir))
            .spawn()
            .expect("lease run starts")
    }

    fn notes(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join("stderr.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn mechanism(&self) -> String {
        self.notes()
            .iter()
            .find_map(|n| n["job"]["mechanism"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("unknown: {:?}", self.notes()))
    }

    fn beats(&self, name: &str) -> Vec<u64> {
        std::fs::read_to_string(self.dir.join(format!("{name}.hb")))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Waits until every beater has beaten twice.
    fn wait_beating(&self, lease_run: &mut Child) {
        let started = Instant::now();
        while !self
            .shape
            .beaters()
            .iter()
            .all(|name| self.beats(name).len() >= 2)
        {
            if let Ok(Some(status)) = lease_run.try_wait() {
                panic!("lease run ended early ({status}): {:?}", self.notes());
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the job never beat: {:?}",
                self.notes()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn last_beat(&self) -> u64 {
        self.shape
            .beaters()
            .iter()
            .filter_map(|name| self.beats(name).last().copied())
            .max()
            .unwrap_or(0)
    }

    /// The pids the beaters recorded that still run (not zombies).
    fn recorded_alive(&self) -> Vec<u32> {
        self.shape
            .beaters()
            .iter()
            .filter_map(|name| {
                std::fs::read_to_string(self.dir.join(format!("{name}.pid")))
                    .ok()?
                    .trim()
                    .parse::<u32>()
                    .ok()
            })
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| lease_cli::job::parse_stat(&s).map(|_| s))
                    .is_some_and(|s| {
                        let state = s.rsplit_once(')').map(|(_, t)| t.trim_start());
                        !state.is_some_and(|t| t.starts_with('Z'))
                    })
                    && marked(&self.marker).contains(pid)
            })
            .collect()
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        for pid in marked(&self.marker) {
            let _ = send_signal(pid, SIGKILL);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn settings(endpoint: String) -> StoreSettings {
    StoreSettings {
        provider: Provider::Generic,
        account: None,
        azure: None,
        ambient: None,
        endpoint: Some(endpoint),
        bucket: BUCKET.into(),
        region: Moto::REGION.into(),
        path_style: true,
        etag_quoting: EtagQuoting::Quoted,
        credentials: Some(Credentials {
            access_key_id: "lr".into(),
            secret_access_key: "lr-secret".into(),
            session_token: None,
        }),
    }
}

fn moto() -> Moto {
    // Signature checking off: the fault proxy forwards requests signed for
    // its own address.
    let moto = Moto::start(MotoOptions {
        auth: false,
        serialized: false,
    })
    .expect("moto starts (run `make setup` first)");
    moto.create_bucket(BUCKET).expect("bucket");
    moto
}

fn expected_mechanism(cgroup: &str, mechanism: &str) {
    // Without a cgroup the keeper's subreaper and descendant walk contain
    // the job; with `auto` the cgroup is used where cgroup v2 is writable
    // (this machine), else the same fallback (CI may differ).
    match cgroup {
        "off" => assert_eq!(mechanism, "subreaper"),
        _ => assert!(
            mechanism == "cgroup" || mechanism == "subreaper",
            "{mechanism}"
        ),
    }
}

/// The partition: the job must be stopped before another holder gets in.
fn partition(shape: Shape) {
    let moto = moto();
    for cgroup in ["auto", "off"] {
        let key = format!("run/{shape:?}/partition/{cgroup}");
        let case = Case::new(shape, &format!("{shape:?}-partition-{cgroup}"));
        let mut proxy =
            FaultProxy::start(&moto.endpoint(), 1, &key, "unused", Dialect::S3, 1).unwrap();
        let mut lease_run = case.run(&settings(proxy.endpoint(0)), &key, cgroup);
        case.wait_beating(&mut lease_run);
        proxy.blackhole(0, Instant::now() + Duration::from_secs(120));
        let cut_ms = now_ms();
        // The other holder, straight to the store, until it wins.
        let direct = settings(moto.endpoint());
        let started = Instant::now();
        let acquire_sent_ms = loop {
            let sent = now_ms();
            let (code, _, out) = lease_json(lease(&direct, &key).args([
                "acquire",
                "--json",
                "--no-probe",
                "--holder",
                "other",
                "--ttl",
                "30s",
            ]));
            match code {
                0 => break sent,
                3 => {}
                _ => panic!("the other holder's acquire: {out}"),
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the lease never expired"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let code = wait_with_timeout(&mut lease_run, Duration::from_secs(60));
        // Anything left would beat on: give it time to show.
        std::thread::sleep(Duration::from_millis(300));
        let last = case.last_beat();
        let left = marked(&case.marker);
        let mechanism = case.mechanism();
        println!(
            "{shape:?} partition cgroup={cgroup}: mechanism {mechanism}; cut at +0, last heartbeat at +{} ms, \
             the other holder's winning acquire sent at +{} ms: overlap {} ms, gap {} ms; {} process(es) left",
            last as i64 - cut_ms as i64,
            acquire_sent_ms as i64 - cut_ms as i64,
            last.saturating_sub(acquire_sent_ms),
            acquire_sent_ms as i64 - last as i64,
            left.len(),
        );
        assert_eq!(
            code,
            Some(4),
            "lease run must exit 4 (lost): {:?}",
            case.notes()
        );
        assert!(
            last < acquire_sent_ms,
            "the job beat at {last}, after the other holder's acquire was sent at {acquire_sent_ms}"
        );
        assert!(left.is_empty(), "left running: {left:?}");
        assert!(case.recorded_alive().is_empty());
        expected_mechanism(cgroup, &mechanism);
        proxy.stop();
    }
}

/// `kill -9` of `lease run`: the keeper must kill the whole job before
/// the lease could pass to anyone.
fn sigkill(shape: Shape) {
    let moto = moto();
    let direct = settings(moto.endpoint());
    for cgroup in ["auto", "off"] {
        let key = format!("run/{shape:?}/sigkill/{cgroup}");
        let case = Case::new(shape, &format!("{shape:?}-sigkill-{cgroup}"));
        let mut lease_run = case.run(&direct, &key, cgroup);
        case.wait_beating(&mut lease_run);
        let expires = || {
            let (code, json, out) = lease_json(lease(&direct, &key).args(["inspect", "--json"]));
            assert_eq!(code, 0, "{out}");
            json["expires_at_ms"].as_u64().expect("expires_at_ms")
        };
        lease_run.kill().expect("SIGKILL to lease run");
        lease_run.wait().expect("reaped");
        let killed_ms = now_ms();
        let started = Instant::now();
        while !marked(&case.marker).is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the job outlived lease run: {:?} still running",
                marked(&case.marker)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let gone_ms = now_ms();
        std::thread::sleep(Duration::from_millis(300));
        let last = case.last_beat();
        // A renewal sent just before the kill may land after it: the
        // record's latest expiry is when another holder could get in.
        let expires_at = expires();
        let mechanism = case.mechanism();
        println!(
            "{shape:?} sigkill cgroup={cgroup}: mechanism {mechanism}; killed at +0, every process gone by +{} ms, \
             last heartbeat at +{} ms; the record expires at +{} ms; {} process(es) left",
            gone_ms as i64 - killed_ms as i64,
            last as i64 - killed_ms as i64,
            expires_at as i64 - killed_ms as i64,
            marked(&case.marker).len(),
        );
        assert!(
            gone_ms < expires_at && last < expires_at,
            "the job ran until {gone_ms} (last beat {last}), the lease expired at {expires_at}"
        );
        assert!(case.recorded_alive().is_empty());
        assert!(
            case.notes().iter().any(|n| n["orphaned"] == true),
            "the keeper says it killed the orphaned job: {:?}",
            case.notes()
        );
        expected_mechanism(cgroup, &mechanism);
    }
}

/// Each shape in each situation, a test of its own.
macro_rules! cases {
    ($($name:ident: $situation:ident($shape:ident);)*) => {
        $(
            #[test]
            fn $name() {
                $situation(Shape::$shape);
            }
        )*
    };
}

cases! {
    partition_stops_cmd_itself: partition(Cmd);
    partition_stops_a_child_of_the_shell: partition(ShellChild);
    partition_stops_a_grandchild_that_ignores_term: partition(StubbornGrandchild);
    partition_stops_a_setsid_daemon: partition(SetsidDaemon);
    sigkill_of_lease_run_stops_cmd_itself: sigkill(Cmd);
    sigkill_of_lease_run_stops_a_child_of_the_shell: sigkill(ShellChild);
    sigkill_of_lease_run_stops_a_grandchild_that_ignores_term: sigkill(StubbornGrandchild);
    sigkill_of_lease_run_stops_a_setsid_daemon: sigkill(SetsidDaemon);
}

#[test]
fn leftovers_are_stopped_before_the_lease_is_released() {
    // CMD exits 0 at once, leaving a TERM-ignoring child and a setsid
    // daemon running: both are gone (TERM, grace, KILL) before `lease run`
    // releases the lease and exits with CMD's status.
    let moto = moto();
    let direct = settings(moto.endpoint());
    for cgroup in ["auto", "off"] {
        let key = format!("run/leftovers/{cgroup}");
        let case = Case::new(Shape::SetsidDaemon, &format!("leftovers-{cgroup}"));
        let beat = case.dir.join("beat.sh").display().to_string();
        let script = format!(
            "setsid -f sh {beat} daemon; sh {beat} cmd ignore-term & \
             while [ ! -s $LR_DIR/cmd.hb ] || [ ! -s $LR_DIR/daemon.hb ]; do sleep 0.02; done; exit 0"
        );
        let started = Instant::now();
        let out = case
            .lease_run(&direct, &key, cgroup)
            .args(["sh", "-c", &script])
            .status()
            .expect("lease run runs");
        let ended_ms = now_ms();
        let left = marked(&case.marker);
        println!(
            "leftovers cgroup={cgroup}: mechanism {}; lease run exited {:?} after {:?}; {} process(es) left",
            case.mechanism(),
            out.code(),
            started.elapsed(),
            left.len()
        );
        assert_eq!(out.code(), Some(0), "{:?}", case.notes());
        assert!(left.is_empty(), "left running: {left:?}");
        assert!(
            case.notes()
                .iter()
                .any(|n| n["leftovers"].as_u64().is_some_and(|n| n >= 2)),
            "{:?}",
            case.notes()
        );
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            case.last_beat() <= ended_ms,
            "a leftover beat after lease run exited"
        );
        // Released, not left to expire.
        let (_, json, _) = lease_json(lease(&direct, &key).args(["inspect", "--json"]));
        assert_eq!(json["released"], true, "{json}");
        expected_mechanism(cgroup, &case.mechanism());
    }
}

/// A lease taken over while CMD runs (an operator's break): CMD is sent
/// TERM when the loss is seen and ends on it, well before the KILL the
/// deadline would bring, in both containments. CMD is `sleep` itself, not
/// a shell (a shell clears its signal mask; `sleep` does not): the keeper
/// blocks TERM for itself, and CMD used to inherit the blocked mask and
/// only ever die of the KILL.
#[test]
fn a_takeover_sends_cmd_a_term_it_receives() {
    let moto = moto();
    let settings = settings(moto.endpoint());
    for cgroup in ["auto", "off"] {
        let key = format!("lr/term-{cgroup}");
        let mut run = lease(&settings, &key)
            .args([
                "--json", "run", "--ttl", "6s", "--grace", "1s", "--", "sleep", "60",
            ])
            .env("LEASE_RUN_CGROUP", cgroup)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("lease run starts");
        let etag = written_etag(&settings, &key, Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(300));
        let broke = Instant::now();
        let (code, _, out) = lease_json(lease(&settings, &key).args(["break", "--etag", &etag]));
        assert_eq!(code, 0, "{out}");
        let exit = wait_with_timeout(&mut run, Duration::from_secs(15));
        let took = broke.elapsed();
        let mut notes = String::new();
        use std::io::Read;
        run.stderr
            .take()
            .unwrap()
            .read_to_string(&mut notes)
            .unwrap();
        assert_eq!(exit, Some(4), "lease run exits lost ({cgroup}): {notes}");
        assert!(notes.contains("\"lost\":true"), "{notes}");
        assert!(
            !notes.contains("\"killed\""),
            "CMD did not end on TERM and was killed ({cgroup}): {notes}"
        );
        // The loss is seen at the next renewal (every 2 s at a 6 s ttl);
        // the deadline's KILL would come about 2 s after that.
        assert!(
            took < Duration::from_millis(3_000),
            "{took:?} ({cgroup}): {notes}"
        );
    }
}
