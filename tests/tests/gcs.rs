//! The lease machines on the GCS dialect: [`LeaseOp`] and the probe driven
//! through a real `HttpStore<GcsDialect, GcsBox, VirtualClock>`, SigV4-signed
//! with service `s3` and region `auto`, against the stand-in that follows
//! the XML API's documented behaviour ([`lease_tests::gcs`]).

mod support;

use lease_core::protocol::{Check, Probe};
use lease_core::wire::Provider;
use lease_core::wire::SigV4Signer;
use lease_core::wire::{GcsConfig, GcsDialect, GCS_MIN_WRITE_INTERVAL};
use lease_core::{
    AcquireOutcome, Entropy, HttpStore, LeaseConfig, LeaseOp, Machine, Protocol, ReleaseOutcome,
    RenewOutcome, UnixMillis, VirtualClock,
};
use lease_tests::gcs::GcsBox;
use std::time::Duration;
use support::{acquired, run_on};

const BUCKET: &str = "lease_bucket";
const KEY: &str = "leases/nightly";
const EPOCH: UnixMillis = UnixMillis(1_795_317_047_000);

type GcsStore = HttpStore<GcsDialect, GcsBox, VirtualClock>;

fn world() -> (VirtualClock, GcsBox, GcsStore) {
    let clock = VirtualClock::new(EPOCH);
    let gcs = GcsBox::new(clock.clone(), BUCKET);
    let dialect = GcsDialect::new(GcsConfig::new(BUCKET)).unwrap();
    let store = HttpStore::new(dialect, gcs.clone(), clock.clone())
        .with_signer(SigV4Signer::new("GOOG1EXAMPLE", "secret", None, "auto").with_service("s3"));
    (clock, gcs, store)
}

fn run<M: Machine>(store: &GcsStore, clock: &VirtualClock, machine: M) -> M::Outcome {
    run_on(store, clock, machine)
}

/// The GCS preset's lease configuration.
fn gcs_cfg(holder: &str) -> LeaseConfig {
    let mut cfg = LeaseConfig::new(KEY, holder, Duration::from_secs(30));
    cfg.min_write_interval = Provider::Gcs.preset().min_write_interval;
    cfg
}

#[test]
fn the_preset_spaces_writes_one_second_apart() {
    assert_eq!(GCS_MIN_WRITE_INTERVAL, Duration::from_secs(1));
    let (clock, gcs, store) = world();
    // A singleton job that finishes at once: acquire, renew, release
    // back to back.
    let a = acquired(run(
        &store,
        &clock,
        LeaseOp::acquire(gcs_cfg("a"), Entropy::from_seed(1)),
    ));
    let a = match run(
        &store,
        &clock,
        LeaseOp::renew(gcs_cfg("a"), Entropy::from_seed(2), a),
    ) {
        Ok(RenewOutcome::Renewed(lease)) => lease,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        run(
            &store,
            &clock,
            LeaseOp::release(gcs_cfg("a"), Entropy::from_seed(3), a.clone())
        ),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    let writes = gcs.writes_to(KEY);
    assert_eq!(writes.len(), 3, "{writes:?}");
    for pair in writes.windows(2) {
        assert!(
            pair[1].at.0 - pair[0].at.0 >= 1000,
            "writes closer than 1 s: {writes:?}"
        );
    }
    assert_eq!(gcs.throttled(), 0);

    // The next holder continues the token from the released record.
    let b = acquired(run(
        &store,
        &clock,
        LeaseOp::acquire(gcs_cfg("b"), Entropy::from_seed(4)),
    ));
    assert_eq!(b.token, a.token + 1);
    assert!(
        b.etag.as_str().bytes().all(|c| c.is_ascii_digit()),
        "a generation"
    );
}

/// The control: without the preset's interval the same job is throttled,
/// so the spacing above is what keeps GCS from answering 429.
#[test]
fn without_the_interval_gcs_throttles() {
    let (clock, gcs, store) = world();
    let cfg = |h: &str| LeaseConfig::new(KEY, h, Duration::from_secs(30));
    let a = acquired(run(
        &store,
        &clock,
        LeaseOp::acquire(cfg("a"), Entropy::from_seed(1)),
    ));
    // The machine backs off on 429 and gets through eventually.
    assert_eq!(
        run(
            &store,
            &clock,
            LeaseOp::release(cfg("a"), Entropy::from_seed(3), a.clone())
        ),
        Ok(ReleaseOutcome::Released { token: a.token })
    );
    assert!(gcs.throttled() >= 1, "expected a 429");
}

#[test]
fn busy_and_takeover_use_generations() {
    let (clock, _gcs, store) = world();
    let a = acquired(run(
        &store,
        &clock,
        LeaseOp::acquire(gcs_cfg("a"), Entropy::from_seed(1)),
    ));
    match run(
        &store,
        &clock,
        LeaseOp::acquire(gcs_cfg("b"), Entropy::from_seed(2)),
    ) {
        Ok(AcquireOutcome::Busy(busy)) => assert_eq!(busy.holder, "a"),
        other => panic!("{other:?}"),
    }
    clock.advance(Duration::from_secs(31));
    match run(
        &store,
        &clock,
        LeaseOp::acquire(gcs_cfg("b"), Entropy::from_seed(3)),
    ) {
        Ok(AcquireOutcome::Acquired(b)) => assert_eq!(b.token, a.token + 1),
        other => panic!("{other:?}"),
    }
    // a's renewal names a's generation, which is gone: lost.
    match run(
        &store,
        &clock,
        LeaseOp::renew(gcs_cfg("a"), Entropy::from_seed(4), a),
    ) {
        Ok(RenewOutcome::Lost(_)) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_probe_passes_on_the_documented_behaviour_without_a_429() {
    let (clock, gcs, store) = world();
    let report = run(
        &store,
        &clock,
        Probe::new(gcs_cfg("prober"), Entropy::from_seed(9)),
    )
    .expect("probe runs");
    for protocol in Protocol::ALL {
        assert!(report.supports(protocol).is_ok(), "{protocol}: {report}");
    }
    assert!(report.passed(Check::IfMatchMissingNotCreated), "{report}");
    assert_eq!(gcs.throttled(), 0, "{report}");
}
