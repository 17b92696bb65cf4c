//! `lease plan` end to end: the binary, run with no bucket, key or
//! credentials in its environment, prints the figures docs/operations.md
//! derives, as text and as JSON.

use std::process::Command;

/// The binary with an environment that names no store at all.
fn lease() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lease"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd
}

fn run(args: &[&str]) -> (i32, String) {
    let out = lease().args(args).output().expect("the binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn plan_prints_failover_requests_cost_and_versions_without_a_store() {
    let (code, text) = run(&[
        "plan",
        "--provider",
        "r2",
        "--ttl",
        "30s",
        "--leases",
        "20",
        "--contenders",
        "1",
    ]);
    assert_eq!(code, 0, "{text}");
    for needle in [
        // 30 s + 1 % of 10 s + 0.1 s margin + 1 s date + 1.1 × 10 s poll.
        "an elector polling every 10 s: 42.2 s",
        "a waiting acquire (--wait): 32.45 s",
        // 2,592,000 s / 10 s per lease, and as many GETs per contender.
        "leader, per lease: 259,200 PUT, 0 LIST, 0 GET, 0 DELETE",
        "all: 5,184,000 PUT, 0 LIST, 5,184,000 GET, 0 DELETE",
        // 5,184,000 × $4.50 / M + 5,184,000 × $0.36 / M = $25.19.
        "cost at list prices: $25.19 a month",
        "as of 2026-11",
        "259,200 noncurrent versions per lease a month",
        "limits: none violated",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
}

#[test]
fn plan_as_json_and_a_broken_limit_exits_1() {
    let (code, text) = run(&[
        "plan",
        "--json",
        "--provider",
        "r2",
        "--ttl",
        "3s",
        "--renew-every",
        "900ms",
    ]);
    assert_eq!(code, 1, "{text}");
    let json: serde_json::Value = serde_json::from_str(text.trim()).expect("JSON");
    assert_eq!(json["provider"], "r2");
    assert_eq!(json["renew_every_ms"], 900);
    // 2,592,000 s / 0.9 s.
    assert_eq!(json["requests_per_month"]["leader"]["put"], 2_880_000);
    let violations = json["violations"].as_array().expect("violations");
    // The r2 preset spaces writes 1 s apart: the settings are refused,
    // and the spacing is named.
    assert_eq!(violations.len(), 2, "{json}");
    assert!(
        violations[0]
            .as_str()
            .unwrap()
            .contains("`min_write_interval` 1s must be shorter than `renew_every` 900ms"),
        "{json}"
    );
    assert!(
        violations[1]
            .as_str()
            .unwrap()
            .contains("one write to an object about every 1 s"),
        "{json}"
    );
    // Epochs on GCS, ttl from the environment: its 1 s spacing holds.
    let out = lease()
        .args([
            "plan",
            "--json",
            "--provider",
            "gcs",
            "--protocol",
            "epochs",
        ])
        .env("LEASE_TTL", "30s")
        .output()
        .expect("runs");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!(json["ttl_ms"], 30_000);
    assert_eq!(json["requests_per_month"]["leader"]["list"], 259_200);
}
