//! The product's clients in the deterministic simulation, judged by the
//! truth checker (`lease_core::sim::clients`).
#![cfg(feature = "sim")]

use lease_core::config::Protocol;
use lease_core::sim::clients::{run, ClientKind, ClientsConfig};

#[test]
fn smoke() {
    for protocol in Protocol::ALL {
        for kind in [
            ClientKind::Singleton,
            ClientKind::Hold,
            ClientKind::Cli,
            ClientKind::Elector,
        ] {
            let mut cfg = ClientsConfig::quiet(1, protocol, vec![kind; 3]);
            cfg.record_timeline = true;
            let r = run(cfg);
            eprintln!(
                "{protocol} {kind:?}: {} violations {:?}",
                r.violations.len(),
                r.counts
            );
            for v in r.violations.iter().take(5) {
                eprintln!("   {v}");
            }
        }
    }
}
