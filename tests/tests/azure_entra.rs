//! Microsoft Entra ID for Azure Blob Storage (lease-native's
//! `azure-entra`, by `azure_identity`): a managed identity whose token
//! endpoint is a stand-in on 127.0.0.1 (App Service's identity endpoint,
//! `IDENTITY_ENDPOINT` and `IDENTITY_HEADER`, the managed-identity route
//! that can be pointed at loopback; a VM's IMDS address is fixed). The
//! blob service is a recorder that accepts the bearer tokens it is told
//! to (Azurite takes OAuth only over HTTPS), so what is checked is what
//! reaches the wire: the token, `x-ms-date` and `x-ms-version`, and the
//! next token after the first expired. One test in this file: it sets the
//! process environment `azure_identity` reads.

mod support;

use lease_core::settings::Ambient;
use lease_core::store::TransportErrorKind;
use lease_core::wire::{AzureConfig, AzureDialect};
use lease_core::{HttpStore, HttpTransport, LeaseConfig, LeaseOp, TransportError};
use lease_native::clock::SystemClock;
use lease_native::credentials::SignedStore;
use lease_native::os_entropy;
use lease_native::settings::StoreSettings;
use lease_tests::servers::{IdentityStandIn, Issued};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::block_on;

/// A request the blob service saw: its `Authorization`, `x-ms-date`,
/// `x-ms-version`, and the status answered.
type Seen = (String, Option<String>, Option<String>, u16);

/// The blob service: 404 to a GET of a blob signed with an accepted
/// token, 401 otherwise; records each request's headers.
#[derive(Clone, Default)]
struct Blobs {
    accepted: Arc<Mutex<Vec<String>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl HttpTransport for Blobs {
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> impl std::future::Future<Output = Result<http::Response<Vec<u8>>, TransportError>> {
        let header = |n: &str| {
            request
                .headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let auth = header("authorization").unwrap_or_default();
        let ok = auth
            .strip_prefix("Bearer ")
            .is_some_and(|t| self.accepted.lock().unwrap().iter().any(|a| a == t));
        let status = if ok { 404 } else { 401 };
        self.seen
            .lock()
            .unwrap()
            .push((auth, header("x-ms-date"), header("x-ms-version"), status));
        let code = if ok {
            "BlobNotFound"
        } else {
            "InvalidAuthenticationInfo"
        };
        let response = http::Response::builder()
            .status(status)
            .header("x-ms-error-code", code)
            .header("date", "Fri, 27 Nov 2026 22:00:00 GMT")
            .body(Vec::new())
            .map_err(|e| TransportError {
                kind: TransportErrorKind::Other,
                message: e.to_string(),
            });
        async move { response }
    }
}

#[test]
fn a_managed_identity_signs_and_its_token_is_refreshed() {
    let identity = IdentityStandIn::start(Issued::bearer(
        "eyJ0.first-entra-token",
        Duration::from_secs(22),
    ));
    // Only this test in this binary reads the environment.
    for var in [
        "AZURE_CLIENT_SECRET",
        "AZURE_FEDERATED_TOKEN_FILE",
        "AZURE_CLIENT_ID",
    ] {
        std::env::remove_var(var);
    }
    std::env::set_var(
        "IDENTITY_ENDPOINT",
        format!("{}/msi/token", identity.endpoint()),
    );
    std::env::set_var("IDENTITY_HEADER", IdentityStandIn::IDENTITY_HEADER);

    // Settings with no key: the platform's, Entra ID for Azure.
    let vars = [
        ("LEASE_PROVIDER", "azure"),
        ("LEASE_BUCKET", "locks"),
        ("AZURE_STORAGE_ACCOUNT", "leaseacct"),
    ];
    let settings = StoreSettings::from_lookup_or_ambient(|k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
    .expect("settings");
    assert_eq!(settings.ambient, Some(Ambient::AzureEntra));
    let (keeper, signing) =
        lease_native::platform::keeper(&settings, Ambient::AzureEntra).expect("a managed identity");
    let blobs = Blobs::default();
    blobs
        .accepted
        .lock()
        .unwrap()
        .push("eyJ0.first-entra-token".into());
    let dialect = AzureDialect::new(AzureConfig::account("leaseacct", "locks")).unwrap();
    let store = SignedStore::new(
        HttpStore::new(dialect, blobs.clone(), SystemClock::new()),
        keeper,
        signing,
        SystemClock::new(),
    );
    let clock = SystemClock::new();
    let cfg = LeaseConfig::new("leases/nightly", "svc", Duration::from_secs(60));
    let inspect = || {
        let (store, clock, cfg) = (&store, &clock, cfg.clone());
        async move {
            lease_core::client::drive(
                &mut LeaseOp::inspect(cfg, os_entropy()),
                store,
                clock,
                |_| {},
            )
            .await
        }
    };
    block_on(async {
        let started = Instant::now();
        assert!(matches!(inspect().await, Ok(None)));
        identity.issue(Issued::bearer(
            "eyJ0.second-entra-token",
            Duration::from_secs(3600),
        ));
        blobs
            .accepted
            .lock()
            .unwrap()
            .push("eyJ0.second-entra-token".into());
        // Half-way through the first token's life the refresh starts...
        tokio::time::sleep(Duration::from_secs(12).saturating_sub(started.elapsed())).await;
        assert!(matches!(inspect().await, Ok(None)));
        // ... and once it has expired, only the second is accepted.
        tokio::time::sleep(Duration::from_secs(23).saturating_sub(started.elapsed())).await;
        blobs.accepted.lock().unwrap().remove(0);
        let after = inspect().await;
        assert!(matches!(after, Ok(None)), "{after:?}");
    });
    let seen = blobs.seen.lock().unwrap().clone();
    assert!(seen.iter().all(|s| s.3 == 404), "{seen:?}");
    assert_eq!(seen.last().unwrap().0, "Bearer eyJ0.second-entra-token");
    assert!(
        seen.iter().all(|s| s.1.is_some() && s.2.is_some()),
        "{seen:?}"
    );
    assert_eq!(identity.handed_out(), 2, "{:?}", identity.log());
    // The managed identity asked for the storage resource.
    assert!(
        identity.log()[0]
            .path
            .contains("resource=https%3A%2F%2Fstorage.azure.com"),
        "{:?}",
        identity.log()
    );
    let shown = format!("{store:?}");
    assert!(!shown.contains("entra-token"), "{shown}");
}
