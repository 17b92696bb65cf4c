//! `make qualify`: the emulator rows of the dated provider table in
//! docs/protocols.md ("Which stores, since when"), measured: each server
//! the tests start gets the capability probe (one request at a time) and
//! the concurrent races of `lease probe --concurrency 16 --rounds 10`,
//! and the run prints one Markdown row per server with today's date and
//! this version of the project. Paste the rows into the table.
//!
//! Long (a few minutes) and a report rather than a check: not part of
//! `make test`, whose conformance suite runs the same probe and races on
//! the same servers and must pass there (`tests/tests/conformance.rs`).

mod support;

use lease_core::{Clock, Leases, Protocol, Settings, Store};
use lease_native::clock::SystemClock;
use lease_native::os_entropy;
use lease_tests::servers::{Moto, MotoOptions, S3rver};
use std::time::Duration;
use support::*;

const BUCKET_RACERS: usize = 16;
const BUCKET_ROUNDS: u32 = 10;

/// One row: the probe's verdict per protocol, the races' verdict.
async fn row<S: Store, C: Clock>(name: &str, store: S, clock: C) -> String {
    let leases = Leases::new(
        store,
        clock,
        Settings::new("qualify").ttl(Duration::from_secs(30)),
        os_entropy,
    )
    .expect("valid settings");
    let key = format!("qualify/{}", os_entropy().id());
    let sequential = match leases.probe(&key).await {
        Ok(report) => Protocol::ALL
            .iter()
            .map(|p| match report.supports(*p) {
                Ok(()) => format!("{p} safe"),
                Err(lease_core::LeaseError::UnsafeStore { check, .. }) => {
                    format!("{p} refused (`{check}`)")
                }
                Err(e) => format!("{p}: {e}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("did not finish: {e}"),
    };
    let concurrent = match leases
        .check_bucket(&key, BUCKET_RACERS, BUCKET_ROUNDS)
        .await
    {
        Ok(report) => {
            let race = &report.race;
            match (race.verdict(), race.first_failure()) {
                ("FAIL", Some(failed)) => format!("**FAIL**: {failed}"),
                (verdict, _) => {
                    let throttled: usize = race.races.iter().map(|r| r.throttled).sum();
                    if throttled > 0 {
                        format!("{verdict} ({throttled} writes throttled)")
                    } else {
                        verdict.to_string()
                    }
                }
            }
        }
        Err(e) => format!("did not finish: {e}"),
    };
    format!(
        "| {name} | {} | {} | {sequential} | {concurrent} ({BUCKET_RACERS} racers × {BUCKET_ROUNDS} rounds) |",
        today(),
        env!("CARGO_PKG_VERSION")
    )
}

fn today() -> String {
    let now = SystemClock::new().now().wall;
    // `Sat, 28 Nov 2026 21:00:00 GMT` → `2026-11-28`.
    let http = now.to_http_date();
    let parts: Vec<&str> = http.split_whitespace().collect();
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])
    .map_or(0, |i| i + 1);
    format!("{}-{month:02}-{:0>2}", parts[3], parts[1])
}

#[test]
#[ignore = "a report: make qualify"]
fn qualify_the_emulators() {
    let mut rows = vec![
        "| store | date | lease version | probe, one request at a time | concurrent races |"
            .to_string(),
        "|---|---|---|---|---|".to_string(),
    ];
    let serial = moto(true);
    rows.push(block_on(row(
        "moto 5.2.5, one request at a time (`tests/servers/moto_serial.py`)",
        store(&moto_settings(&serial)),
        SystemClock::new(),
    )));
    drop(serial);
    let threaded = Moto::start(MotoOptions {
        auth: true,
        serialized: false,
    })
    .expect("moto starts (run `make setup` first)");
    threaded.create_bucket(BUCKET).expect("bucket");
    rows.push(block_on(row(
        "moto 5.2.5, its own threaded server (`moto_server`)",
        store(&moto_settings(&threaded)),
        SystemClock::new(),
    )));
    drop(threaded);
    let azurite = azurite();
    let azure =
        lease_native::settings::any_store(&azure_settings(&azurite), Duration::from_secs(5))
            .expect("store");
    rows.push(block_on(row("Azurite 3.35.0", azure, SystemClock::new())));
    drop(azurite);
    let s3rver = S3rver::start(BUCKET).expect("s3rver starts (run `make setup` first)");
    rows.push(block_on(row(
        "s3rver 3.7.1",
        store(&s3rver_settings(&s3rver)),
        SystemClock::new(),
    )));
    println!("\n{}\n", rows.join("\n"));
}
