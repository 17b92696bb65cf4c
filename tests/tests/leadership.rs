//! Leader election as a newcomer writes it: the 15-line example service
//! (`native/examples/leader.rs`, on tokio's multi-threaded runtime), two
//! instances against moto. One leads; the other does not while it does;
//! when the leader is killed (`SIGKILL`, no release) the other takes over
//! with the next fencing token, after the lease expires and not before.

mod support;

use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};
use support::*;

const TTL: Duration = Duration::from_secs(4);

/// One instance, its stdout lines arriving on a channel with their time.
struct Instance {
    child: Child,
    lines: Receiver<(Instant, String)>,
}

impl Instance {
    fn start(settings: &lease_native::settings::StoreSettings, holder: &str) -> Instance {
        // The same environment as the CLI's, and a short ttl.
        let mut child = example_leader_command(settings, holder, &format!("{}s", TTL.as_secs()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the example starts");
        let lines = stdout_lines(&mut child);
        Instance { child, lines }
    }

    /// The next line within `limit`.
    fn next(&self, limit: Duration) -> Option<(Instant, String)> {
        self.lines.recv_timeout(limit).ok()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // By its own pid, pass or fail.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn one_instance_leads_and_the_other_takes_over_when_it_dies() {
    let (_moto, settings) = moto_and_settings(false);
    let a = Instance::start(&settings, "a");
    let (_, first) = a.next(Duration::from_secs(30)).expect("a leads");
    assert_eq!(first, "leading with token 1");
    let b = Instance::start(&settings, "b");
    // b campaigns for three ttls and never leads while a is alive.
    assert_eq!(b.next(TTL * 3), None, "b must not lead while a does");

    let mut a = a;
    a.child.kill().expect("SIGKILL to a");
    let killed = Instant::now();
    let _ = a.child.wait();
    let (at, line) = b.next(TTL * 4).expect("b takes over");
    assert_eq!(line, "leading with token 2");
    let after = at - killed;
    // Not before a's lease expired on the store (a renewed at most
    // renew_every before it was killed), and within ttl plus a poll.
    assert!(after >= TTL / 3, "b took over {after:?} after the kill");
    assert!(after <= TTL * 3, "b took over {after:?} after the kill");
    eprintln!("b took over {after:?} after a was killed (ttl {TTL:?})");
}

#[test]
fn a_missing_bucket_is_a_clear_error_not_an_endless_retry() {
    let (_moto, mut settings) = moto_and_settings(false);
    settings.bucket = "no-such-bucket".into();
    let mut cmd = lease(&settings, "unused");
    cmd.env_remove("LEASE_KEY");
    let out = Command::new(example_leader())
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .output()
        .expect("the example runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("NoSuchBucket"), "{stderr}");
}
