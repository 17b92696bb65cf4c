//! The example Worker in the real Workers runtime: workerd through
//! Miniflare's Node API (`tests/cloudflare/worker.mjs`), with its R2
//! binding and with signed fetch to moto (signature checking on, one
//! request at a time so conditional writes are atomic). Its routes are
//! called without the admin secret configured, with wrong credentials and
//! with the right ones; none that acts answers without the secret.
//!
//! Needs the built Worker (`make worker-build`, which `make test` runs
//! first) and the npm packages (`make setup`).

mod support;

use std::time::Duration;

#[test]
fn the_example_worker_in_workerd() {
    let moto = support::moto(true);
    let run = support::run_worker_script(
        "worker.mjs",
        "cloudflare/example/build",
        &moto,
        Duration::from_secs(300),
    );
    println!("{}", run.stdout);
    assert!(
        run.success,
        "worker.mjs failed:\n{}\n{}\nmoto log:\n{}",
        run.stdout,
        run.stderr,
        moto.log_tail(30)
    );
    assert!(run.stdout.contains("18 steps passed"), "{}", run.stdout);
}
