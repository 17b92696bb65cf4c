//! The same crontab line on three hosts (issue "once per tick
//! everywhere"): `lease run --every 8s` on three processes whose clocks are
//! 30 s behind, right and 30 s ahead (`LEASE_CLOCK_OFFSET_MS`), started at
//! staggered moments of each slot against moto, for 10 slots. Each slot's
//! CMD must complete exactly once, under the id of the slot that contains
//! the start by the store's clock: the first host runs it, a host after it
//! answers busy (3) or already ran (7). Every third slot the runner is
//! killed (SIGKILL) while CMD runs: its run is not recorded, so the host
//! that starts after its lease expired runs the slot. Then a start later
//! into a slot than `--late-after` allows exits 8 without running CMD or
//! writing anything. `--cron` takes its minute from the store's clock
//! alike.

#![cfg(target_os = "linux")]

mod support;

use lease_core::schedule::Schedule;
use lease_core::tick::Tick;
use lease_core::UnixMillis;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::{lease, lease_json, moto_and_settings, stderr_of, wait_with_timeout};

const SLOT_MS: u64 = 8_000;
const KEY: &str = "cron/nightly";
/// The hosts' clock offsets (ms).
const OFFSETS: [i64; 3] = [-30_000, 0, 30_000];
/// CMD: notes its start and its end, with the slot it ran for.
const CMD: &str = r#"echo "$LEASE_TICK $CRON_HOST start" >> "$CRON_LOG"; sleep 0.5; echo "$LEASE_TICK $CRON_HOST end" >> "$CRON_LOG""#;

/// A directory of the test's own, removed when dropped, pass or fail.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(label: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("cron-{label}-{}-{}", std::process::id(), now_ms()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// Sleeps until `at` (Unix ms, this machine's clock: moto's too).
fn sleep_until(at: u64) {
    let now = now_ms();
    if at > now {
        std::thread::sleep(Duration::from_millis(at - now));
    }
}

/// Host `h`'s `lease run --every 8s` for the crontab line, started now.
fn host(
    settings: &lease_native::settings::StoreSettings,
    log: &Path,
    h: usize,
    extra: &[&str],
) -> Child {
    let mut args = vec!["--every", "8s"];
    args.extend_from_slice(extra);
    host_at(settings, KEY, log, h, &args)
}

/// Host `h`'s `lease run` at `key` with `args` (the schedule), started
/// now.
fn host_at(
    settings: &lease_native::settings::StoreSettings,
    key: &str,
    log: &Path,
    h: usize,
    args: &[&str],
) -> Child {
    lease(settings, key)
        .env("LEASE_CLOCK_OFFSET_MS", OFFSETS[h].to_string())
        .env("LEASE_HOLDER", format!("host-{h}"))
        .env("CRON_HOST", format!("host-{h}"))
        .env("CRON_LOG", log)
        .args(["--json", "run", "--ttl", "3s"])
        .args(args)
        .args(["--", "sh", "-c", CMD])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lease run starts")
}

/// The log's lines for `tick`: (host, "start" or "end").
fn lines_of(log: &Path, tick: &str) -> Vec<(String, String)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            let (t, h, what) = (parts.next()?, parts.next()?, parts.next()?);
            (t == tick).then(|| (h.to_string(), what.to_string()))
        })
        .collect()
}

/// Waits (up to 5 s) until host `h` has started CMD for `tick`.
fn started(log: &Path, tick: &str, h: usize) -> bool {
    let until = now_ms() + 5_000;
    while now_ms() < until {
        let who = format!("host-{h}");
        if lines_of(log, tick)
            .iter()
            .any(|(host, what)| *host == who && what == "start")
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The exit code of `child` (`None`: killed by a signal or timed out) and
/// what it said.
fn finish(mut child: Child) -> (Option<i32>, String) {
    let code = wait_with_timeout(&mut child, Duration::from_secs(20));
    (code, stderr_of(&mut child))
}

#[test]
fn a_crontab_on_three_hosts_with_skewed_clocks_runs_each_slot_once() {
    let (_moto, settings) = moto_and_settings(false);
    // Built before the first slot, not during it.
    support::lease_bin();
    let dir = Dir::new("every");
    let log = dir.0.join("runs.log");
    let every = Schedule::every(Duration::from_millis(SLOT_MS)).expect("a schedule");
    let mut ran: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..10 {
        // The next slot that begins at least a second from now.
        let slot = (now_ms() + 500).div_ceil(SLOT_MS) * SLOT_MS;
        let tick = Tick::slot("run", &every, UnixMillis(slot))
            .expect("a slot")
            .id()
            .to_string();
        let first = i % 3;
        let killed = i % 3 == 2;
        let (second, third) = ((first + 1) % 3, (first + 2) % 3);
        // The first host fires 0.3 s into the slot.
        sleep_until(slot + 300);
        let a = host(&settings, &log, first, &[]);
        let a = if killed {
            // Killed while CMD runs: nothing recorded, the lease left to
            // expire.
            assert!(
                started(&log, &tick, first),
                "slot {i}: host-{first} ran CMD"
            );
            std::thread::sleep(Duration::from_millis(150));
            let mut a = a;
            a.kill().expect("SIGKILL to lease run");
            let _ = a.wait();
            (None, String::new())
        } else {
            finish(a)
        };
        sleep_until(slot + 2_000);
        let b = finish(host(&settings, &log, second, &[]));
        // After a killed runner's lease expired (3 s ttl from about 0.4 s).
        sleep_until(slot + 5_500);
        let c = finish(host(&settings, &log, third, &[]));
        let said = format!(
            "slot {i} ({tick}): host-{first} {a:?}, host-{second} {b:?}, host-{third} {c:?}"
        );
        if killed {
            assert_eq!(b.0, Some(3), "the killed runner's lease is busy: {said}");
            assert_eq!(c.0, Some(0), "the slot runs after the kill: {said}");
        } else {
            assert_eq!(a.0, Some(0), "the first host runs the slot: {said}");
            assert!(
                matches!(b.0, Some(3) | Some(7)),
                "busy or already ran: {said}"
            );
            assert_eq!(c.0, Some(7), "already ran: {said}");
            assert!(
                c.1.contains("\"already_ran\":true"),
                "the answer names the run: {said}"
            );
        }
        let lines = lines_of(&log, &tick);
        let ends: Vec<_> = lines.iter().filter(|(_, w)| w == "end").collect();
        assert_eq!(ends.len(), 1, "one completed run of CMD: {lines:?} {said}");
        let starts = lines.iter().filter(|(_, w)| w == "start").count();
        assert_eq!(starts, if killed { 2 } else { 1 }, "{lines:?} {said}");
        *ran.entry(tick).or_default() += 1;
    }
    // Every start was for the slot the store's clock chose: the log names
    // no other slot.
    let all = std::fs::read_to_string(&log).unwrap_or_default();
    let named: std::collections::BTreeSet<_> = all
        .lines()
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect();
    assert_eq!(
        named,
        ran.keys().cloned().collect(),
        "CMD ran only for the slots of the store's clock"
    );

    // A start 2.5 s into a slot with --late-after 1s: exit 8, CMD not run,
    // nothing written.
    let (_, before, _) = lease_json(lease(&settings, KEY).args(["inspect", "--json"]));
    let slot = (now_ms() + 500).div_ceil(SLOT_MS) * SLOT_MS;
    sleep_until(slot + 2_500);
    let late = finish(host(&settings, &log, 1, &["--late-after", "1s"]));
    assert_eq!(late.0, Some(8), "too late: {late:?}");
    assert!(late.1.contains("\"too_late\":true"), "{late:?}");
    let (_, after, _) = lease_json(lease(&settings, KEY).args(["inspect", "--json"]));
    assert_eq!(before["etag"], after["etag"], "nothing written");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap_or_default(),
        all,
        "CMD did not run"
    );
}

/// `--cron` names the minute by the store's clock too: a host 30 s ahead
/// runs it, and a host 30 s behind, in the same minute by the store's
/// clock (in the last or the next by its own), answers already ran; the
/// slot's id is the minute that holds the store's time.
#[test]
fn a_cron_expression_names_its_minute_by_the_stores_clock() {
    let (_moto, settings) = moto_and_settings(false);
    support::lease_bin();
    let dir = Dir::new("minutely");
    let log = dir.0.join("runs.log");
    let key = "cron/minutely";
    let args = ["--cron", "* * * * *", "--slot-name", "minutely"];
    // Well inside a minute: 40 s in, where the clocks 30 s off name the
    // next minute (ahead) and this one (behind), or 5 s in, where the
    // behind one names the last.
    let minute = now_ms() / 60_000 * 60_000;
    let at = if now_ms() < minute + 5_000 {
        minute + 5_000
    } else if now_ms() < minute + 40_000 {
        minute + 40_000
    } else {
        minute + 65_000
    };
    sleep_until(at);
    let start = at / 60_000 * 60_000;
    let tick = Tick::slot(
        "minutely",
        &Schedule::parse("* * * * *").unwrap(),
        UnixMillis(start),
    )
    .expect("a slot")
    .id()
    .to_string();
    let ahead = finish(host_at(&settings, key, &log, 2, &args));
    assert_eq!(ahead.0, Some(0), "runs: {ahead:?}");
    let behind = finish(host_at(&settings, key, &log, 0, &args));
    assert_eq!(behind.0, Some(7), "already ran: {behind:?}");
    assert_eq!(
        lines_of(&log, &tick),
        [
            ("host-2".to_string(), "start".to_string()),
            ("host-2".to_string(), "end".to_string())
        ],
        "one run, for {tick}"
    );
}
