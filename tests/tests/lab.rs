//! The fleet lab (see `lease_tests::lab`): real `lease run` and service
//! processes against one real store behind the fault proxy, with kills,
//! freezes, blackholes, clock offsets and request faults, judged by the
//! checker. The short runs are part of `make test`; `make chaos` runs the
//! long one (`chaos_long`, ignored here) with more processes for longer.
//!
//! The runs take the machine's two cores: they run one at a time.

mod support;

use lease_tests::lab::{self, Binaries, LabConfig, StoreKind};
use std::sync::Mutex;
use std::time::Duration;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The example Lambda function, built once per test process.
fn function_bin() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args([
                    "build",
                    "-q",
                    "-p",
                    "lease-lambda",
                    "--bin",
                    "scheduled-singleton",
                ])
                .current_dir(lease_tests::servers::workspace_root())
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building scheduled-singleton failed");
            support::lease_bin().with_file_name("scheduled-singleton")
        })
        .clone()
}

fn binaries() -> Binaries {
    Binaries {
        lease: support::lease_bin(),
        job: env!("CARGO_BIN_EXE_lab-job").into(),
        service: env!("CARGO_BIN_EXE_lab-service").into(),
        function: function_bin(),
    }
}

fn run(cfg: &LabConfig) -> lab::LabReport {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let report = lab::run(cfg, &binaries()).expect("the lab runs");
    println!("{}", report.summary);
    report
}

fn assert_clean(report: &lab::LabReport) {
    assert!(
        report.judgement.violations.is_empty(),
        "{}\nlogs kept in {}",
        report.summary,
        report.dir.display()
    );
}

#[test]
fn short_run_on_serialised_moto_is_safe_and_live() {
    let cfg = LabConfig::short("moto", StoreKind::Moto, Duration::from_secs(60), 1).from_env();
    let report = run(&cfg);
    assert_clean(&report);
    let j = &report.judgement;
    // Not vacuous: jobs ran, the lease changed hands, calms were judged.
    assert!(j.jobs >= 10, "{}", report.summary);
    assert!(j.handoffs >= 3, "{}", report.summary);
    assert!(j.calms_checked >= 1, "{}", report.summary);
}

#[test]
fn short_run_on_azurite_is_safe_and_live() {
    let cfg =
        LabConfig::short("azurite", StoreKind::Azurite, Duration::from_secs(30), 2).from_env();
    let report = run(&cfg);
    assert_clean(&report);
    assert!(report.judgement.jobs >= 5, "{}", report.summary);
}

/// s3rver ignores conditional headers. With the probe off, the fleet runs
/// on it and the checker must see the damage; with the probe on, no
/// process may start a job. The store is made slow (250 ms a request) for
/// the first part: the runners all start at once, and each one's read
/// finds the key absent before anyone's create lands, so on a store that
/// ignores `If-None-Match` they all win (on localhost the window between
/// a read and a create is a few milliseconds, and whether two runners hit
/// it was left to chance).
#[test]
fn on_a_store_that_ignores_conditions_the_lab_reports_overlaps_unless_the_probe_refuses() {
    let mut cfg = LabConfig::short(
        "s3rver-no-probe",
        StoreKind::S3rver,
        Duration::from_secs(15),
        3,
    );
    cfg.probe = false;
    cfg.request_faults = false;
    cfg.process_faults = false;
    cfg.services = 0;
    cfg.functions = 0;
    cfg.runners = 5;
    cfg.store_latency = Duration::from_millis(250);
    let report = run(&cfg);
    let overlaps = report
        .judgement
        .violations
        .iter()
        .filter(|v| v.contains("overlapped") || v.contains("at once") || v.contains("open"))
        .count();
    assert!(
        overlaps > 0,
        "s3rver without the probe must show overlaps:\n{}",
        report.summary
    );

    let mut cfg = LabConfig::short("s3rver-probe", StoreKind::S3rver, Duration::from_secs(8), 4);
    cfg.request_faults = false;
    cfg.process_faults = false;
    cfg.services = 0;
    cfg.functions = 0;
    cfg.runners = 5;
    let report = run(&cfg);
    assert_eq!(report.judgement.jobs, 0, "{}", report.summary);
    assert!(
        report.summary.contains("\"exit 5\""),
        "every lease run must exit 5 (unsafe store):\n{}",
        report.summary
    );
    assert!(
        !report.summary.contains("\"exit 0\""),
        "no lease run may succeed:\n{}",
        report.summary
    );
}

/// `make chaos`: 20+ processes, 10+ minutes, every fault kind (settings
/// from `LAB_*`, see `LabConfig::from_env`).
#[test]
#[ignore = "long: make chaos"]
fn chaos_long() {
    let mut cfg = LabConfig::short("chaos", StoreKind::Moto, Duration::from_secs(600), 7);
    cfg.runners = 14;
    cfg.services = 4;
    cfg.functions = 4;
    cfg.process_fault_every = Duration::from_millis(800);
    let cfg = cfg.from_env();
    let report = run(&cfg);
    assert_clean(&report);
}
