//! A service's metrics and health check (`lease_native::ops`), scraped from
//! the example leader (`native/examples/leader.rs` with
//! `LEASE_METRICS_ADDR`) against moto: during an acquisition, a loss (an
//! operator's break, then the store stopped until the term ends, with
//! `/healthz` failing while the renewal is overdue) and a takeover by a
//! second instance after the first is killed.

mod support;

use lease_tests::servers::http_request;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};
use support::*;

const KEY: &str = "locks/leader-example";

struct Instance {
    child: Child,
    lines: Receiver<(Instant, String)>,
    endpoint: String,
}

impl Instance {
    fn start(settings: &lease_native::settings::StoreSettings, holder: &str) -> Instance {
        let mut child = example_leader_command(settings, holder, "4s")
            .env("LEASE_METRICS_ADDR", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the example starts");
        let lines = stdout_lines(&mut child);
        let (_, first) = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the example prints its address");
        let endpoint = first
            .strip_prefix("metrics and health on ")
            .unwrap_or_else(|| panic!("first line: {first}"))
            .trim_end_matches('/')
            .to_string();
        Instance {
            child,
            lines,
            endpoint,
        }
    }

    fn wait_for(&self, what: &str, limit: Duration) -> String {
        let until = Instant::now() + limit;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok((_, line)) if line.contains(what) => return line,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!("no line with {what:?} within {limit:?}")
    }

    fn get(&self, path: &str) -> (u16, String) {
        let r = http_request(&self.endpoint, "GET", path, &[], b"").expect("the endpoint answers");
        (r.status, r.text())
    }

    /// The value of the sample `name{labels}` (labels as rendered), if any.
    fn metric(&self, sample: &str) -> Option<f64> {
        let (_, text) = self.get("/metrics");
        text.lines()
            .find(|l| l.starts_with(sample) && l[sample.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    /// The sample once it reads `value`, within `limit` (else its last
    /// value). The metrics follow the elector's events, and `/healthz` and
    /// the log the local deadline, read on the clock: a term's end is seen
    /// there first, and its `Lost` event a moment later.
    fn metric_becomes(&self, sample: &str, value: f64, limit: Duration) -> Option<f64> {
        let until = Instant::now() + limit;
        loop {
            let v = self.metric(sample);
            if v == Some(value) || Instant::now() > until {
                return v;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // By its own pid, pass or fail.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `signal` to the process `pid` (by its pid, never by name).
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[test]
fn metrics_and_health_follow_acquire_loss_and_takeover() {
    let (moto, settings) = moto_and_settings(false);
    let a = Instance::start(&settings, "alpha");
    a.wait_for("leading with token 1", Duration::from_secs(60));

    // Acquired.
    let held = format!("lease_held{{key=\"{KEY}\"}}");
    let master = format!("leader_election_master_status{{name=\"{KEY}\"}}");
    assert_eq!(a.metric(&held), Some(1.0));
    assert_eq!(a.metric(&master), Some(1.0));
    assert_eq!(
        a.metric(&format!("lease_token{{key=\"{KEY}\"}}")),
        Some(1.0)
    );
    assert_eq!(
        a.metric(&format!("lease_transitions_total{{key=\"{KEY}\"}}")),
        Some(1.0)
    );
    let left = a
        .metric(&format!("lease_seconds_to_deadline{{key=\"{KEY}\"}}"))
        .expect("deadline");
    assert!(left > 0.0 && left <= 4.0, "{left}");
    assert!(
        a.metric("lease_store_requests_total{op=\"PUT\",status_class=\"2xx\"}")
            .unwrap_or(0.0)
            >= 1.0
    );
    let (_, text) = a.get("/metrics");
    assert!(
        text.contains("lease_store_request_duration_seconds_bucket{op=\"GET\""),
        "{text}"
    );
    let (status, body) = a.get("/healthz");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("leading with token 1"), "{body}");
    let (status, _) = a.get("/nothing");
    assert_eq!(status, 404);

    // A loss: an operator breaks the term.
    let (code, json, out) = lease_json(lease(&settings, KEY).args(["inspect", "--json"]));
    assert_eq!(code, 0, "{out}");
    let etag = json["etag"].as_str().expect("etag").to_string();
    let (code, _, out) = lease_json(lease(&settings, KEY).args(["break", "--etag", &etag]));
    assert_eq!(code, 0, "{out}");
    a.wait_for("stopped leading (token 1)", Duration::from_secs(20));
    assert_eq!(
        a.metric(&format!(
            "lease_lost_total{{key=\"{KEY}\",reason=\"broken\"}}"
        )),
        Some(1.0)
    );
    // It campaigns again and leads with the next token.
    a.wait_for("leading with token 2", Duration::from_secs(30));
    assert_eq!(a.metric(&held), Some(1.0));

    // The store stops answering: the renewal is overdue, /healthz fails
    // until the term ends; the loss is `expired`.
    signal(moto.pid(), "-STOP");
    let until = Instant::now() + Duration::from_secs(10);
    let mut unhealthy = None;
    while Instant::now() < until {
        let (status, body) = a.get("/healthz");
        if status == 503 {
            unhealthy = Some(body);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let body = unhealthy.expect("/healthz failed while the renewal was overdue");
    assert!(body.contains("renewal overdue"), "{body}");
    a.wait_for("stopped leading (token 2)", Duration::from_secs(10));
    let (status, body) = a.get("/healthz");
    assert_eq!((status, body.trim()), (200, "ok: not leading"));
    assert_eq!(
        a.metric_becomes(&held, 0.0, Duration::from_secs(5)),
        Some(0.0)
    );
    assert_eq!(
        a.metric_becomes(
            &format!("lease_lost_total{{key=\"{KEY}\",reason=\"expired\"}}"),
            1.0,
            Duration::from_secs(5)
        ),
        Some(1.0)
    );
    signal(moto.pid(), "-CONT");
    let at_risk = a
        .metric(&format!(
            "lease_renew_total{{key=\"{KEY}\",outcome=\"at_risk\"}}"
        ))
        .unwrap_or(0.0);
    assert!(
        at_risk >= 1.0,
        "the term was at risk before it ended: {at_risk}"
    );

    // A takeover: a second instance, then the first killed.
    a.wait_for("leading with token 3", Duration::from_secs(60));
    let b = Instance::start(&settings, "bravo");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(b.metric(&held), None, "b has not led");
    let (status, body) = b.get("/healthz");
    assert_eq!((status, body.trim()), (200, "ok: not leading"));
    drop(a);
    let line = b.wait_for("leading with token", Duration::from_secs(30));
    assert!(line.ends_with("token 4"), "{line}");
    assert_eq!(b.metric(&held), Some(1.0));
    assert_eq!(
        b.metric(&format!("lease_token{{key=\"{KEY}\"}}")),
        Some(4.0)
    );
    assert_eq!(
        b.metric(&format!("lease_transitions_total{{key=\"{KEY}\"}}")),
        Some(1.0)
    );
}
