//! A service that needs a leader: every instance runs this; one leads at a
//! time, and another takes over when it dies. Settings from the
//! environment (`LEASE_BUCKET`, `AWS_REGION`, credentials; see
//! `lease_core::settings`). With `LEASE_METRICS_ADDR` (e.g.
//! `127.0.0.1:9464`) it serves `/metrics` and `/healthz`
//! (`lease_native::ops`). `tests/tests/leadership.rs` and
//! `tests/tests/ops.rs` run it against a real S3 server.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let leases = lease_native::from_env()?;
    // Installed before the campaign starts, so that no event goes unseen.
    let metrics = match std::env::var("LEASE_METRICS_ADDR") {
        Ok(addr) => Some((addr.parse()?, lease_native::ops::install_prometheus()?)),
        Err(_) => None,
    };
    let leader = lease_native::lead(&leases, "locks/leader-example");
    if let Some((addr, handle)) = metrics {
        let health = leader.clone();
        let bound =
            lease_native::ops::serve(addr, handle, Box::new(move || health.health())).await?;
        println!("metrics and health on http://{bound}/");
    }
    loop {
        let token = leader.until_leader().await?; // pass it to every write
        println!("leading with token {token}");
        leader.lost().await; // the leader's work runs until this completes
        println!("stopped leading (token {token})");
    }
}
