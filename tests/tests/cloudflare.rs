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

use lease_tests::servers::{node_modules_dir, workspace_root, Moto};
use std::process::Command;

#[test]
fn the_example_worker_in_workerd() {
    let root = workspace_root();
    let build = root.join("cloudflare/example/build");
    for file in ["index.js", "index_bg.wasm"] {
        assert!(
            build.join(file).exists(),
            "{} is missing: run `make worker-build` first",
            build.join(file).display()
        );
    }
    node_modules_dir().expect("npm packages");
    let moto = support::moto(true);
    let credentials = moto.credentials().expect("auth is on");
    let output = Command::new("node")
        .arg(root.join("tests/cloudflare/worker.mjs"))
        .arg(&build)
        .current_dir(&root)
        .env("MOTO_ENDPOINT", moto.endpoint())
        .env("MOTO_BUCKET", support::BUCKET)
        .env("MOTO_REGION", Moto::REGION)
        .env("MOTO_KEY_ID", &credentials.access_key_id)
        .env("MOTO_SECRET", &credentials.secret_access_key)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "worker.mjs failed ({}):\n{stdout}\n{stderr}\nmoto log:\n{}",
        output.status,
        moto.log_tail(30)
    );
    assert!(stdout.contains("15 steps passed"), "{stdout}");
}
