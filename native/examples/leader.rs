//! A service that needs a leader: every instance runs this; one leads at a
//! time, and another takes over when it dies. Settings from the
//! environment (`LEASE_BUCKET`, `AWS_REGION`, credentials; see
//! `lease_core::settings`). `tests/tests/leadership.rs` runs two of them
//! against a real S3 server.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let leases = lease_native::from_env()?;
    let leader = lease_native::lead(&leases, "locks/leader-example");
    loop {
        let token = leader.until_leader().await?; // pass it to every write
        println!("leading with token {token}");
        leader.lost().await; // the leader's work runs until this completes
        println!("stopped leading (token {token})");
    }
}
