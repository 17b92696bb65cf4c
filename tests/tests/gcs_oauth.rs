//! Google OAuth 2.0 for GCS (lease-native's `gcs-oauth`, by `gcp_auth`):
//! a service-account key file (`GOOGLE_APPLICATION_CREDENTIALS`) whose
//! `token_uri` is a stand-in on 127.0.0.1, against the GCS box (the XML
//! API's behaviour, accepting the bearer tokens it is told to). A lease is
//! taken and renewed across its first token's expiry: the keeper fetches
//! the next token half-way through the first's life, and the renewal after
//! the first expired is accepted with the second. One test in this file:
//! it sets the process environment `gcp_auth` reads.

mod support;

use lease_core::wire::Provider;
use lease_core::wire::{GcsConfig, GcsDialect};
use lease_core::{HttpStore, LeaseConfig, LeaseOp, RenewOutcome, UnixMillis, VirtualClock};
use lease_native::clock::SystemClock;
use lease_native::credentials::{Keeper, SignedStore, Signing};
use lease_native::os_entropy;
use lease_native::platform::gcs::Adc;
use lease_tests::gcs::GcsBox;
use lease_tests::servers::{IdentityStandIn, Issued};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{acquired, block_on};

const BUCKET: &str = "lease_bucket";

#[test]
fn a_service_account_key_signs_and_its_token_is_refreshed_during_a_hold() {
    let dir = std::env::temp_dir().join(format!("lease-gcs-oauth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pem = dir.join("key.pem");
    let made = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&pem)
        .output()
        .expect("openssl runs");
    assert!(made.status.success(), "{made:?}");
    let token_server =
        IdentityStandIn::start(Issued::bearer("ya29.first-token", Duration::from_secs(22)));
    let key_file = dir.join("service-account.json");
    std::fs::write(
        &key_file,
        serde_json::json!({
            "type": "service_account",
            "project_id": "lease-tests",
            "private_key_id": "0123456789abcdef",
            "private_key": std::fs::read_to_string(&pem).unwrap(),
            "client_email": "leases@lease-tests.iam.gserviceaccount.com",
            "client_id": "100000000000000000001",
            "token_uri": format!("{}/token", token_server.endpoint()),
        })
        .to_string(),
    )
    .unwrap();
    // Only this test in this binary reads the environment.
    std::env::set_var("GOOGLE_APPLICATION_CREDENTIALS", &key_file);

    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let box_clock = VirtualClock::new(UnixMillis(now_ms));
    let gcs = GcsBox::new(box_clock.clone(), BUCKET);
    gcs.accept_bearer("ya29.first-token");
    let dialect = GcsDialect::new(GcsConfig::new(BUCKET)).unwrap();
    let store = SignedStore::new(
        HttpStore::new(dialect, gcs.clone(), SystemClock::new()),
        Keeper::new(Adc::default()),
        Signing::Bearer,
        SystemClock::new(),
    );
    let clock = SystemClock::new();
    let mut cfg = LeaseConfig::new("leases/nightly", "svc", Duration::from_secs(60));
    cfg.min_write_interval = Provider::Gcs.preset().min_write_interval;
    block_on(async {
        let started = Instant::now();
        // The box's clock follows real time (its one-write-per-second rule).
        let sleep_until = |at: Duration| {
            let box_clock = box_clock.clone();
            async move {
                let left = at.saturating_sub(started.elapsed());
                tokio::time::sleep(left).await;
                box_clock.advance(left);
            }
        };
        let lease = acquired(
            lease_core::client::drive(
                &mut LeaseOp::acquire(cfg.clone(), os_entropy()),
                &store,
                &clock,
                |_| {},
            )
            .await,
        );
        assert_eq!(token_server.handed_out(), 1);
        // From now on the endpoint hands out the second token.
        token_server.issue(Issued::bearer(
            "ya29.second-token",
            Duration::from_secs(3600),
        ));
        gcs.accept_bearer("ya29.second-token");
        // Past half the first token's life: this renewal signs with the
        // first, and the refresh runs beside it.
        sleep_until(Duration::from_secs(12)).await;
        let renew = |lease| {
            let (store, clock, cfg) = (&store, &clock, cfg.clone());
            async move {
                lease_core::client::drive(
                    &mut LeaseOp::renew(cfg, os_entropy(), lease),
                    store,
                    clock,
                    |_| {},
                )
                .await
            }
        };
        let lease = match renew(lease).await {
            Ok(RenewOutcome::Renewed(lease)) => lease,
            other => panic!("{other:?}"),
        };
        // The first token has expired: refused from now on.
        sleep_until(Duration::from_secs(23)).await;
        gcs.revoke_bearer("ya29.first-token");
        match renew(lease).await {
            Ok(RenewOutcome::Renewed(_)) => {}
            other => panic!("the renewal after the first token expired: {other:?}"),
        }
    });
    assert_eq!(token_server.handed_out(), 2, "{:?}", token_server.log());
    // The token request was the JWT bearer grant of the service account.
    let first = &token_server.log()[0];
    assert!(
        first
            .body
            .contains("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"),
        "{first:?}"
    );
    assert!(
        gcs.log().iter().all(|s| s.status == 200 || s.status == 404),
        "{:?}",
        gcs.log().iter().map(|s| s.status).collect::<Vec<_>>()
    );
    let shown = format!("{store:?}");
    assert!(!shown.contains("ya29"), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}
