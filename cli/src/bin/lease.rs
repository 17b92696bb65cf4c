//! `lease`: leases, locks and leader election on S3-compatible object
//! storage, from the command line. See `lease --help` and docs/guide.md.

use clap::Parser;
use lease_cli::job::{self, note};
use lease_cli::probe_cache::ProbeCache;
use lease_cli::{code, run_grace, Cli, CliError, Command};
use lease_core::client::check_grace;
use lease_core::client::Health;
use lease_core::client::{seat_key, Step};
use lease_core::client::{Supervised, WorkError, WorkStep};
use lease_core::protocol::verdict_key;
use lease_core::protocol::Check;
use lease_core::protocol::Watch;
use lease_core::protocol::{status_json, NotHeld};
use lease_core::protocol::{BucketReport, Race, Unconditional};
use lease_core::protocol::{ListReport, Listed};
use lease_core::schedule::Schedule;
use lease_core::tick::{Slots, Tick};
use lease_core::time::Dur;
use lease_core::trace::{replay, Recorder};
use lease_core::wire::EtagQuoting;
use lease_core::wire::{DialectKind, Provider};
use lease_core::{
    AcquireOutcome, ByEtagError, Clock, Event, LeaseConfig, LeaseError, LostReason, Mono,
    ProbeReport, Protocol, ReleaseOutcome, RenewOutcome, Run, RunError, RunOutcome,
};
use lease_native::settings::{self as native_settings, StoreSettings};
use lease_native::{clock::SystemClock, default_holder, os_entropy, Leases};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::Duration;

/// A failure with its exit code and a message for humans.
struct Failure {
    code: u8,
    kind: &'static str,
    message: String,
}

impl Failure {
    fn new(code: u8, kind: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            kind,
            message: message.into(),
        }
    }
}

impl From<LeaseError> for Failure {
    fn from(e: LeaseError) -> Failure {
        let (code, kind) = match &e {
            LeaseError::UnsafeStore { .. } => (code::UNSAFE_STORE, "unsafe_store"),
            LeaseError::Changed { .. } => (code::LOST, "changed"),
            LeaseError::Denied { .. } => (code::ERROR, "denied"),
            LeaseError::NoSuchBucket { .. } => (code::ERROR, "no_such_bucket"),
            LeaseError::Config { .. } => (code::ERROR, "config"),
            LeaseError::Unsupported { .. } => (code::ERROR, "unsupported"),
            _ => (code::ERROR, "store"),
        };
        Failure::new(code, kind, e.to_string())
    }
}

impl From<CliError> for Failure {
    fn from(e: CliError) -> Failure {
        let kind = match &e {
            CliError::Settings(_) => "settings",
            CliError::Config(_) => "config",
        };
        Failure::new(code::ERROR, kind, e.to_string())
    }
}

/// What a command prints: JSON, and the same for humans.
struct Report {
    code: u8,
    json: Value,
    text: String,
}

struct Ctx {
    /// The client every command goes through.
    leases: Leases,
    /// The lease's key, and its configuration (`leases.config(key)`).
    key: String,
    cfg: LeaseConfig,
    json: bool,
    /// `run`: try a cgroup per run (`LEASE_RUN_CGROUP`).
    cgroup: bool,
}

impl From<ByEtagError> for Failure {
    fn from(e: ByEtagError) -> Failure {
        match e {
            ByEtagError::Lease(e) => e.into(),
            ByEtagError::NotHeld(e) => {
                let what = match e {
                    NotHeld::NoObject => "lost",
                    NotHeld::Changed { .. } => "changed",
                };
                Failure::new(code::LOST, what, e.to_string())
            }
        }
    }
}

fn busy(b: &lease_core::Busy) -> Report {
    Report {
        code: code::BUSY,
        json: {
            let mut json = b.to_json();
            json["acquired"] = json!(false);
            json["busy"] = json!(true);
            json
        },
        text: format!(
            "busy: held by {}{} (token {}) {}",
            if b.holder.is_empty() {
                "an unnamed holder"
            } else {
                &b.holder
            },
            b.foreign
                .map(|f| format!(", {}", f.describe()))
                .unwrap_or_default(),
            b.token,
            if b.held_until_broken() {
                "until broken: it never expires".to_string()
            } else {
                format!("until {}", b.expires_at.to_http_date())
            }
        ),
    }
}

fn lost(reason: &LostReason) -> Report {
    let text = format!("lost: {reason}");
    Report {
        code: code::LOST,
        json: json!({"lost": true, "reason": format!("{reason:?}")}),
        text,
    }
}

async fn inspect(cx: &Ctx) -> Result<Report, Failure> {
    Ok(match cx.leases.inspect(&cx.key).await? {
        None => Report {
            code: code::OK,
            json: status_json(&cx.key, None),
            text: format!("{}: no lease (free)", cx.cfg.key),
        },
        Some(seen) => {
            let r = &seen.record;
            Report {
                code: code::OK,
                json: {
                    let mut json = status_json(&cx.key, Some(&seen));
                    json["protocol"] = json!(cx.cfg.protocol.name());
                    json
                },
                text: format!(
                    "{}: holder {}, token {}, {}, {}, etag {}{}",
                    cx.cfg.key,
                    match r.foreign {
                        Some(lock) => format!("{:?} ({})", r.holder, lock.describe()),
                        None if r.is_foreign() => "unnamed (a simple client's record)".to_string(),
                        None => format!("{:?}", r.holder),
                    },
                    r.token,
                    if r.released {
                        "released"
                    } else if seen.free {
                        "expired (free)"
                    } else {
                        "live"
                    },
                    if r.held_until_broken() {
                        "held until broken (no expiry)".to_string()
                    } else {
                        format!("expires {}", r.expires_at.to_http_date())
                    },
                    seen.etag,
                    r.owned_by.as_ref().map_or(String::new(), |by| format!(
                        ", owned under session {} (token {}): held while it is",
                        by.key, by.token
                    ))
                ),
            }
        }
    })
}

/// An acquire, waiting up to `wait` (jittered retries, see
/// `lease_core::protocol::wait`) while another holder's lease is live.
async fn take(cx: &Ctx, wait: Option<Duration>) -> Result<AcquireOutcome, LeaseError> {
    match wait {
        Some(wait) => cx.leases.acquire_within(&cx.key, wait).await,
        None => cx.leases.acquire(&cx.key).await,
    }
}

async fn acquire(cx: &Ctx, wait: Option<Duration>) -> Result<Report, Failure> {
    Ok(match take(cx, wait).await? {
        AcquireOutcome::Acquired(lease) => Report {
            code: code::OK,
            json: json!({"acquired": true, "lease": lease.to_json()}),
            text: format!(
                "acquired {} with token {}; etag {}",
                lease.key, lease.token, lease.etag
            ),
        },
        AcquireOutcome::Busy(b) => busy(&b),
    })
}

async fn renew(cx: &Ctx, etag: &str) -> Result<Report, Failure> {
    Ok(match cx.leases.renew_by_etag(&cx.key, etag).await? {
        RenewOutcome::Renewed(lease) => Report {
            code: code::OK,
            json: json!({"renewed": true, "lease": lease.to_json()}),
            text: format!(
                "renewed {} (token {}) until {}; etag {}",
                lease.key,
                lease.token,
                lease.record.expires_at.to_http_date(),
                lease.etag
            ),
        },
        RenewOutcome::Lost(reason) => lost(&reason),
    })
}

async fn release(cx: &Ctx, etag: &str) -> Result<Report, Failure> {
    Ok(
        match cx.leases.release_by_etag(&cx.key, etag).await? {
            ReleaseOutcome::Released { token } => Report {
                code: code::OK,
                json: json!({"released": true, "token": token}),
                text: format!("released token {token}"),
            },
            ReleaseOutcome::AlreadyLost(reason) => lost(&reason),
            ReleaseOutcome::Unknown { token, now } => Report {
                code: code::LOST,
                json: json!({"released": null, "token": token, "lost": true, "reason": format!("{now:?}")}),
                text: format!(
                    "the release of token {token} got no clear answer; the lease is {now} now, and whether \
                     this release freed it or it had expired first cannot be told"
                ),
            },
        },
    )
}

async fn break_lease(cx: &Ctx, etag: &str, token_floor: Option<u64>) -> Result<Report, Failure> {
    let token = cx
        .leases
        .break_lease(&cx.key, etag, token_floor)
        .await?
        .token;
    Ok(Report {
        code: code::OK,
        json: json!({"broken": true, "token": token}),
        text: format!(
            "broken: the lease is released (token {token}); the next holder gets a higher token"
        ),
    })
}

async fn probe(
    cx: &Ctx,
    settings: &StoreSettings,
    racers: usize,
    rounds: u32,
) -> Result<Report, Failure> {
    let report = cx.leases.probe(&cx.key).await?;
    let verdict = report.supports(cx.cfg.protocol);
    let mut json = report.to_json();
    let mut text = report.to_string();
    // S3 dialects: does the store take the other etag quoting too? (GCS
    // conditions name generations, Azure's etags are always quoted.)
    if settings.provider.preset().dialect == DialectKind::S3 {
        let (quoting, said) = etag_quoting(cx, settings, &report).await?;
        json["etag_quoting"] = quoting;
        text.push_str(&said);
    }
    // Around the protocol: unconditional writes, concurrent creates,
    // versions (lease_core::protocol::bucket).
    let bucket = cx.leases.check_bucket(&cx.key, racers, rounds).await?;
    // GCS answers every write with a generation, versioned or not: the
    // probe cannot tell there.
    let gcs = settings.provider.preset().dialect == DialectKind::Gcs;
    let versioned = if gcs { None } else { bucket.versioned };
    json["bucket"] = bucket_json(&bucket, versioned);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&bucket_text(&cx.cfg, &bucket, gcs, versioned));
    json["provider"] = json!(settings.provider.name());
    // Two winners of one create is as unsafe as a create that is not
    // refused; an unclear race (a lost reply) proves nothing either way.
    let unsafe_race = bucket.race.failed();
    keep_verdict(cx, &report, &bucket.race, &mut json, &mut text).await;
    Ok(Report {
        code: if verdict.is_ok() && !unsafe_race {
            code::OK
        } else {
            code::UNSAFE_STORE
        },
        json,
        text,
    })
}

/// `lease probe` on an S3 dialect: whether If-Match is accepted with
/// quoted and with unquoted etags (the probe again with the other
/// quoting), as JSON and as a line for humans.
async fn etag_quoting(
    cx: &Ctx,
    settings: &StoreSettings,
    report: &ProbeReport,
) -> Result<(Value, String), Failure> {
    let mut other = settings.clone();
    other.etag_quoting = match settings.etag_quoting {
        EtagQuoting::Quoted => EtagQuoting::Unquoted,
        EtagQuoting::Unquoted => EtagQuoting::Quoted,
    };
    let other_store = native_settings::any_store(&other, cx.cfg.request_timeout)
        .map_err(|e| Failure::new(code::ERROR, "settings", e.to_string()))?;
    let other_leases = Leases::with_config(
        other_store,
        *cx.leases.clock(),
        cx.cfg.clone(),
        false,
        os_entropy,
    )
    .map_err(|e| Failure::new(code::ERROR, "config", e.to_string()))?;
    let other_report = other_leases.probe(&cx.key).await?;
    let quoting = |s: &StoreSettings| format!("{:?}", s.etag_quoting).to_lowercase();
    let accepted = |r: &ProbeReport| r.passed(Check::IfMatchCurrent);
    let word = |r: &ProbeReport| if accepted(r) { "accepted" } else { "refused" };
    let json = json!({
        quoting(settings): accepted(report),
        quoting(&other): accepted(&other_report),
    });
    let text = format!(
        "If-Match with {} etags: {}; with {} etags: {}",
        quoting(settings),
        word(report),
        quoting(&other),
        word(&other_report),
    );
    Ok((json, text))
}

/// `lease probe`'s `bucket` JSON: the unconditional write, the
/// concurrent creates, versions (`versioned`: as far as the probe can
/// tell) and scratch keys left.
fn bucket_json(bucket: &BucketReport, versioned: Option<bool>) -> Value {
    json!({
        "unconditional_write": match &bucket.unconditional {
            Unconditional::Refused { code } => json!({"refused": true, "code": code}),
            Unconditional::Accepted => json!({"refused": false}),
            Unconditional::Unclear(why) => json!({"unclear": why}),
        },
        "concurrent": {
            "racers": bucket.race.racers,
            "rounds": bucket.race.rounds,
            "races": bucket.race.races.iter().map(|r| json!({
                "round": r.round, "kind": r.kind.name(), "winners": r.winners,
                "refused": r.refused, "unclear": r.unclear, "passed": r.passed(),
            })).collect::<Vec<_>>(),
            "passed": bucket.race.passed(),
            "verdict": bucket.race.verdict(),
        },
        "versioned": versioned,
        "left": bucket.left,
    })
}

/// The same for humans: GCS's versions are unknown, and a versioned
/// bucket gets a warning about the noncurrent versions renewals leave.
fn bucket_text(
    cfg: &LeaseConfig,
    bucket: &BucketReport,
    gcs: bool,
    versioned: Option<bool>,
) -> String {
    let shown = bucket.to_string();
    let mut text = if gcs {
        shown.replace(
            "bucket keeps versions: no",
            "bucket keeps versions: unknown (GCS: check versioning.enabled)",
        )
    } else {
        shown
    };
    if versioned == Some(true) {
        text.push_str(&format!(
            "\nwarning: each renewal leaves a noncurrent version: about {} a day for one lease renewed every {:?}; expire noncurrent versions under the lease prefix (docs/operations.md)",
            86_400 / cfg.renew_every.as_secs().max(1),
            cfg.renew_every
        ));
    }
    text
}

/// Keeps the probe's verdict where the fleet reads it instead of probing
/// (a fresh one each `lease probe`; a race with two winners refuses every
/// protocol), and says where, or why it could not.
async fn keep_verdict(
    cx: &Ctx,
    report: &ProbeReport,
    race: &Race,
    json: &mut Value,
    text: &mut String,
) {
    let kept = verdict_key(&cx.key);
    match cx.leases.share_verdict(&cx.key, report, Some(race)).await {
        Ok(()) => {
            text.push_str(&format!("\nverdict kept for the fleet at {kept}"));
            json["verdict_key"] = json!(kept);
        }
        Err(e) => text.push_str(&format!(
            "\nwarning: the verdict could not be kept at {kept}: {e}"
        )),
    }
}

/// `lease probe --read-only`: only the checks that read (no write
/// permission needed).
async fn probe_read_only(cx: &Ctx) -> Result<Report, Failure> {
    let report = cx.leases.probe_read_only(&cx.key).await?;
    Ok(Report {
        code: if report.ok() {
            code::OK
        } else {
            code::UNSAFE_STORE
        },
        json: report.to_json(),
        text: report.to_string(),
    })
}

/// `lease policy`: an AWS S3 bucket policy statement that refuses writes
/// under the lease prefix without a condition (see docs/operations.md).
fn policy(cx: &Ctx, settings: &StoreSettings, deletes: bool) -> Result<Report, Failure> {
    // AWS's policy language; a generic endpoint may be AWS-compatible.
    if !matches!(settings.provider, Provider::Aws | Provider::Generic) {
        return Err(Failure::new(
            code::ERROR,
            "settings",
            format!(
                "{} has no bucket policy on conditional-write headers (AWS S3 has); docs/operations.md says what protects the lease prefix there",
                settings.provider.name()
            ),
        ));
    }
    if deletes && cx.cfg.protocol == Protocol::Epochs {
        return Err(Failure::new(
            code::ERROR,
            "settings",
            "--deletes would refuse the epochs protocol's deletes of the epochs it superseded (they carry no If-Match); use it with cas or mutex leases".to_string(),
        ));
    }
    let policy = if deletes {
        lease_core::wire::s3_conditional_deletes_only(&settings.bucket, &cx.key)
    } else {
        lease_core::wire::s3_conditional_writes_only(&settings.bucket, &cx.key)
    };
    Ok(Report {
        code: code::OK,
        json: policy.clone(),
        text: serde_json::to_string_pretty(&policy).unwrap_or_default(),
    })
}

/// In the keeper (see `lease_cli::job`), between fork and exec of CMD:
/// the signals the keeper blocks for itself are unblocked again (a blocked
/// mask survives exec, and CMD would see no TERM); and CMD must not
/// outlive its keeper. The keeper survives `lease run`'s death to kill the whole job,
/// but if the keeper itself is killed (`kill -9`, the OOM killer), the
/// kernel kills CMD too (Linux's parent-death signal). A keeper that died
/// before CMD set it up makes the spawn fail.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = nix::unistd::getpid();
    // SAFETY: between fork and exec the closure only makes three system
    // calls (sigprocmask, prctl and getppid), which are async-signal-safe;
    // it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            // The keeper blocks these for itself (`lease_cli::job::keep`),
            // and a blocked mask survives exec: CMD would never see the
            // TERM it is sent, only the KILL after it.
            let mut keeper_blocked = nix::sys::signal::SigSet::empty();
            for sig in lease_cli::job::KEEPER_BLOCKS {
                keeper_blocked.add(sig);
            }
            keeper_blocked
                .thread_unblock()
                .map_err(std::io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != parent {
                // The keeper died before CMD started (ESRCH, not a
                // message: nothing may allocate here).
                return Err(std::io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
}

/// Elsewhere CMD only gets the signal mask the keeper blocked for itself
/// cleared (see the Linux version).
#[cfg(not(target_os = "linux"))]
fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure only calls sigprocmask,
    // which is async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(|| {
            let mut keeper_blocked = nix::sys::signal::SigSet::empty();
            for sig in lease_cli::job::KEEPER_BLOCKS {
                keeper_blocked.add(sig);
            }
            keeper_blocked
                .thread_unblock()
                .map_err(std::io::Error::from)
        });
    }
}

/// The keeper mode (`lease __lease-run-keeper ...`, started by `lease
/// run` only): see `lease_cli::job`.
fn keeper_main(args: &[std::ffi::OsString]) -> ExitCode {
    use std::os::fd::FromRawFd;
    let args = match job::KeeperArgs::parse(args) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("lease: {e}");
            return ExitCode::from(code::ERROR);
        }
    };
    // SAFETY: `lease run` made this descriptor (its end of a socket pair,
    // inherited across exec) for this process alone, and passed its number
    // here; nothing else in this process owns it (`parse` refuses 0 to 2).
    // Run by hand with another number, reads and writes on it fail or go
    // to whatever that descriptor is, and the keeper ends.
    let control = unsafe { std::os::unix::net::UnixStream::from_raw_fd(args.control_fd) };
    // Not for CMD.
    let _ = nix::fcntl::fcntl(
        &control,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    ExitCode::from(job::keep(&args, control, die_with_parent))
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        (None, None) => code::ERROR,
    }
}

/// `run --trace`: the flight recorder the client records to, and the file
/// it is written to.
struct FlightRecorder {
    recorder: Recorder,
    path: std::path::PathBuf,
}

impl FlightRecorder {
    /// A flight recorder the client records to from now on, to be written
    /// to `path`.
    fn install(cx: &Ctx, path: &std::path::Path) -> FlightRecorder {
        let recorder = Recorder::default();
        cx.leases.record_to(recorder.clone());
        FlightRecorder {
            recorder,
            path: path.to_path_buf(),
        }
    }

    /// Writes the trace as it is now and says so on stderr.
    fn write(&self, json: bool, why: &str) {
        write_trace(&self.path, &self.recorder.to_jsonl(), json, why)
    }

    /// The same, off the thread that renews the lease and times the job's
    /// TERM and KILL (a slow disk must hold back neither): the trace as it
    /// is now, written by the runtime's blocking pool, which the runtime
    /// waits for before the process ends.
    fn write_in_background(&self, json: bool, why: &'static str) {
        let text = self.recorder.to_jsonl();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || write_trace(&path, &text, json, why));
    }
}

/// Writes `text` to `path` whole, or not at all (a temporary file renamed
/// over it), and says so on stderr.
fn write_trace(path: &std::path::Path, text: &str, json: bool, why: &str) {
    // Per process and per write: runs that share a path (one
    // `LEASE_TRACE` for a fleet), or two writes of one run, never publish
    // each other's half-written file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    let path = path.display();
    match written {
        Ok(()) => note(
            json,
            json!({"trace": path.to_string(), "why": why}),
            &format!(
                "flight recorder written to {path} ({why}); `lease replay {path}` runs it again"
            ),
        ),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            note(
                json,
                json!({"error": format!("cannot write the trace to {path}: {e}")}),
                &format!("cannot write the flight recorder to {path}: {e}"),
            )
        }
    }
}

/// The term as `lease run` holds it (token, deadline, and when a renewal
/// is overdue), for /healthz (lease_native::ops).
type Term = std::sync::Arc<std::sync::Mutex<Option<(u64, Mono, Mono)>>>;

/// What `lease run` runs for, from its flags: a schedule's slots
/// (`--cron`, `--every`, named `--slot-name`, `--late-after`), a tick
/// (`--tick`), or once (waiting `--wait`). A value that cannot be read is
/// a usage error (exit 2).
fn run_for(
    (cron, every, tick): (Option<&str>, Option<Duration>, Option<&str>),
    slot_name: &str,
    late_after: Option<Duration>,
    wait: Option<Duration>,
) -> Result<RunFor, Failure> {
    let usage = |e: String| Failure::new(code::USAGE, "usage", e);
    let slots = |schedule| {
        Slots::new(slot_name, schedule)
            .map(|slots| RunFor::Slots(slots.late_after(late_after)))
            .map_err(|e| usage(format!("--slot-name: {e}")))
    };
    match (cron, every, tick) {
        (Some(expr), _, _) => {
            slots(Schedule::parse(expr).map_err(|e| usage(format!("--cron: {e}")))?)
        }
        (_, Some(every), _) => slots(Schedule::every(every).ok_or_else(|| {
            usage("--every: less than a second, or longer than 100 years".into())
        })?),
        (_, _, Some(id)) => Tick::new(id)
            .map(RunFor::Tick)
            .map_err(|e| usage(format!("--tick: {e}"))),
        _ => Ok(RunFor::Once(wait)),
    }
}

/// What `lease run` runs for: once (waiting for the lease, if told to), a
/// tick, or the slots of a schedule.
enum RunFor {
    Once(Option<Duration>),
    Tick(Tick),
    Slots(Slots),
}

/// `run --trace`'s flight recorder, installed; none for a run for a tick,
/// which is not recorded yet (docs/operations.md): a trace without its
/// holding would replay as work unleased, so the flag is ignored, saying
/// so.
fn recorder_for(
    cx: &Ctx,
    trace: Option<&std::path::Path>,
    run_for: &RunFor,
) -> Option<FlightRecorder> {
    let path = trace?;
    if !matches!(run_for, RunFor::Once(_)) {
        note(
            cx.json,
            json!({"trace": null, "why": "a run for a tick is not recorded yet"}),
            "the flight recorder does not record a run for a tick yet: --trace / LEASE_TRACE ignored",
        );
        return None;
    }
    Some(FlightRecorder::install(cx, path))
}

/// `lease run`'s exit codes that flags can change: busy, lost, already ran.
struct RunCodes {
    busy: u8,
    lost: u8,
    already_ran: u8,
}

/// `lease run` from acquire to exit code, in order: acquire (for a tick:
/// after the read that checks it), start CMD, hold, stop at the deadline,
/// release (for a tick that CMD completed: recording it), exit. The run is
/// `Leases::supervise`'s.
async fn run(
    cx: &Ctx,
    cmd: &[String],
    grace: Duration,
    (run_for, seats): (RunFor, Option<u32>),
    codes: RunCodes,
    metrics_addr: Option<std::net::SocketAddr>,
    recorder: Option<&FlightRecorder>,
) -> Result<u8, Failure> {
    check_grace(&cx.cfg, grace).map_err(|e| Failure::new(code::ERROR, "config", e.to_string()))?;
    // First: until it is handled, SIGUSR1 (the flight recorder's "write it
    // now") would end the process.
    let mut usr1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        .map_err(|e| Failure::new(code::ERROR, "signal", e.to_string()))?;
    let term = Term::default();
    if let Some(addr) = metrics_addr {
        serve_metrics(cx, addr, term.clone()).await?;
    }
    let record = |event: &Event| hold_term(cx, &term, event);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure::new(code::ERROR, "signal", e.to_string()))?;
    // The tick the store's clock chose and the seat taken, for CMD's
    // environment.
    let of_run = std::cell::RefCell::new(OfRun::default());
    let observe = |step: Step<'_>| say_run_step(cx, recorder, (&record, &of_run), step);
    let (terminate, usr1) = (&mut terminate, &mut usr1);
    let start = |token| {
        let of_run = of_run.take();
        async move {
            let job = start_job(cx, cmd, grace, token, of_run).await?;
            if cx.json {
                note(true, json!({"job": job.containment().to_json()}), "");
            }
            Ok(Cmd {
                job,
                interrupted: false,
                terminate,
                usr1,
                recorder,
                json: cx.json,
            })
        }
    };
    let on_step = |step: WorkStep| say_step(cx, recorder, grace, step);
    let how = Run::new().observe(observe);
    let leases = &cx.leases;
    let ran = match (&run_for, seats) {
        (RunFor::Once(wait), Some(seats)) => {
            let how = how.pool(seats);
            match wait {
                Some(wait) => leases.supervise(&cx.key, how.wait(*wait), start, grace, on_step),
                None => leases.supervise(&cx.key, how, start, grace, on_step),
            }
            .await
        }
        (RunFor::Once(None), None) => leases.supervise(&cx.key, how, start, grace, on_step).await,
        (RunFor::Once(Some(wait)), None) => {
            let how = how.wait(*wait);
            leases.supervise(&cx.key, how, start, grace, on_step).await
        }
        (RunFor::Tick(tick), _) => {
            let how = how.tick(tick);
            leases.supervise(&cx.key, how, start, grace, on_step).await
        }
        (RunFor::Slots(slots), _) => {
            let how = how.slot(slots);
            leases.supervise(&cx.key, how, start, grace, on_step).await
        }
    };
    let ticked = !matches!(run_for, RunFor::Once(_));
    ran_exit(cx, ran, recorder, (codes, ticked))
}

/// Says a step of `lease run`'s run (the acquisition with the lease's
/// JSON, busy, the holding's events, a failed release), records it for
/// the metrics (`record`), and keeps the tick for CMD's environment.
fn say_run_step(
    cx: &Ctx,
    recorder: Option<&FlightRecorder>,
    (record, of_run): (&impl Fn(&Event), &std::cell::RefCell<OfRun>),
    step: Step<'_>,
) {
    match step {
        Step::Acquired { lease, tick, seat } => {
            record(&Event::Acquired {
                token: lease.token,
                valid_until: lease.valid_until,
            });
            *of_run.borrow_mut() = OfRun {
                tick: tick.map(str::to_string),
                seat: seat.map(|seat| (seat, seat_key(&cx.cfg.key, seat))),
            };
            let for_tick = tick.map(|t| format!(" for {t}")).unwrap_or_default();
            note(
                cx.json,
                json!({"acquired": true, "lease": lease.to_json(), "tick": tick, "seat": seat}),
                &format!(
                    "acquired {} with token {}{for_tick}",
                    lease.key, lease.token
                ),
            );
        }
        Step::Skipped(b) => {
            let report = busy(b);
            note(cx.json, report.json, &report.text);
        }
        Step::Hold(event) => {
            record(&event);
            say_event(cx.json, event);
        }
        Step::Released(_) => {}
        Step::ReleaseFailed(e) => {
            if let Some(t) = recorder {
                t.write(cx.json, "the release failed");
            }
            note(
                cx.json,
                json!({"error": e.to_string()}),
                &format!("release failed: {e} (the lease expires on its own)"),
            );
        }
    }
}

/// Says what a run that ran CMD left to know: the slots it missed, and a
/// tick whose completion was not recorded (`unrecorded`).
fn say_ran(json: bool, missed: Option<lease_core::schedule::MissedTicks>, unrecorded: bool) {
    if let Some(m) = missed {
        note(
            json,
            json!({"missed": m.count, "since_ms": m.since_ms, "first_ms": m.first_ms}),
            &format!(
                "{} tick(s) of the schedule never ran since the last completed one",
                m.count
            ),
        );
    }
    if unrecorded {
        note(
            json,
            json!({"recorded": false}),
            "the tick's completion was not recorded (its release was not confirmed): a later start may run it again",
        );
    }
}

/// `lease run`'s exit code once the run is over: CMD's own, a busy,
/// already-ran or too-late code when it did not run, or the lost code when
/// the lease was lost, CMD was stopped for want of a renewal or ended
/// after the deadline (the flight recorder is written then).
fn ran_exit(
    cx: &Ctx,
    ran: Result<RunOutcome<Exit>, RunError<WorkError<Failure, Exit>>>,
    recorder: Option<&FlightRecorder>,
    (codes, ticked): (RunCodes, bool),
) -> Result<u8, Failure> {
    let lost = |why: &str| {
        if let Some(t) = recorder {
            t.write(cx.json, why);
        }
        Ok(codes.lost)
    };
    match ran {
        Ok(RunOutcome::Ran {
            output,
            recorded,
            missed,
            ..
        }) => {
            say_ran(cx.json, missed, !recorded && ticked);
            output.code()
        }
        Ok(RunOutcome::Skipped { .. }) => Ok(codes.busy),
        Ok(RunOutcome::AlreadyRan {
            tick,
            token,
            finished_at_ms,
            result,
        }) => {
            let finished = lease_core::UnixMillis(finished_at_ms).to_rfc3339();
            let text = format!(
                "{tick} already ran (token {token}, finished {finished}{}): CMD not run again",
                result
                    .as_ref()
                    .map(|r| format!(", {r}"))
                    .unwrap_or_default()
            );
            let json = json!({"already_ran": true, "tick": tick, "token": token, "finished_at_ms": finished_at_ms, "result": result});
            note(cx.json, json, &text);
            Ok(codes.already_ran)
        }
        Ok(RunOutcome::TooLate { tick, late_by_ms }) => {
            note(
                cx.json,
                json!({"too_late": true, "tick": tick, "late_by_ms": late_by_ms}),
                &format!(
                    "too late for {tick}: started {} into it, later than --late-after: CMD not run",
                    Dur(Duration::from_millis(late_by_ms))
                ),
            );
            Ok(code::TOO_LATE)
        }
        Err(RunError::Job(WorkError::Start(f))) => Err(f),
        Err(RunError::Job(WorkError::Failed(status))) => status.code(),
        Err(RunError::Job(WorkError::Stopped(_))) | Err(RunError::LeaseLost { .. }) => {
            lost("the lease was lost while CMD ran")
        }
        Err(RunError::Overrun { late_by, .. }) => {
            note(
                cx.json,
                json!({"overrun": true, "late_by_ms": late_by.as_millis() as u64}),
                &format!("CMD ended {} after the lease's deadline", Dur(late_by)),
            );
            lost("CMD ended after the lease's deadline")
        }
        Err(RunError::Lease(e)) => Err(e.into()),
        Err(RunError::Tick(e)) => Err(Failure::new(code::ERROR, "tick", e.to_string())),
        Err(RunError::Settings(e)) => Err(Failure::new(code::ERROR, "config", e.to_string())),
        Err(other) => Err(Failure::new(
            code::ERROR,
            "run",
            format!("the run ended unexpectedly ({})", other.kind()),
        )),
    }
}

/// `run --metrics-addr`: Prometheus metrics, and /healthz from `term`,
/// served on `addr`; says where.
async fn serve_metrics(cx: &Ctx, addr: std::net::SocketAddr, term: Term) -> Result<(), Failure> {
    let handle = lease_native::ops::install_prometheus()
        .map_err(|e| Failure::new(code::ERROR, "metrics", e))?;
    let (clock, after) = (*cx.leases.clock(), Health::overdue_after(&cx.cfg));
    let health = Box::new(move || {
        let held = *term.lock().unwrap_or_else(|e| e.into_inner());
        Health::of(held, clock.now().mono, after)
    });
    let bound = lease_native::ops::serve(addr, handle, health)
        .await
        .map_err(|e| {
            Failure::new(
                code::ERROR,
                "metrics",
                format!("cannot serve metrics on {addr}: {e}"),
            )
        })?;
    note(
        cx.json,
        json!({"metrics": format!("http://{bound}/metrics"), "health": format!("http://{bound}/healthz")}),
        &format!("metrics on http://{bound}/metrics, health on http://{bound}/healthz"),
    );
    Ok(())
}

/// Records a lease event in the metrics, and in `term` the term it
/// gives (none once the lease is lost or released).
fn hold_term(cx: &Ctx, term: &Term, event: &Event) {
    let now = cx.leases.clock().now().mono;
    lease_native::ops::record_event(&cx.cfg.key, event, now);
    let mut held = term.lock().unwrap_or_else(|e| e.into_inner());
    match event {
        Event::Acquired { token, valid_until } | Event::Renewed { token, valid_until } => {
            *held = Some((
                *token,
                *valid_until,
                Health::sent_by(*valid_until, cx.cfg.ttl),
            ))
        }
        Event::Lost { .. } | Event::Released { .. } => *held = None,
        _ => {}
    }
}

/// What CMD's environment says of its run besides the token: the tick
/// the store's clock chose, and the seat taken in a pool with its key.
#[derive(Default)]
struct OfRun {
    tick: Option<String>,
    seat: Option<(u32, String)>,
}

/// Starts CMD under its keeper (`lease_cli::job`), with the lease's key,
/// token and holder (the tick, for a tick's run; the seat and the pool,
/// for a pool's) in its environment.
async fn start_job(
    cx: &Ctx,
    cmd: &[String],
    grace: Duration,
    token: u64,
    OfRun { tick, seat }: OfRun,
) -> Result<job::Job, Failure> {
    let key = seat.as_ref().map_or(&cx.cfg.key, |(_, key)| key);
    let mut env = vec![
        ("LEASE_KEY".into(), key.clone()),
        ("LEASE_TOKEN".into(), token.to_string()),
        ("LEASE_HOLDER".into(), cx.cfg.holder.clone()),
    ];
    env.extend(tick.map(|tick| ("LEASE_TICK".into(), tick)));
    if let Some((seat, _)) = seat {
        env.push(("LEASE_SEAT".into(), seat.to_string()));
        env.push(("LEASE_POOL".into(), cx.cfg.key.clone()));
    }
    let spec = job::JobSpec {
        cmd: cmd.to_vec(),
        env,
        grace,
        json: cx.json,
        cgroup: cx.cgroup,
    };
    let started = match job::own_exe() {
        Ok(exe) => job::Job::start(&exe, &spec).await,
        Err(e) => Err(job::StartError::Keeper(format!(
            "cannot find this program to start the job's keeper: {e}"
        ))),
    };
    started.map_err(|e| match e {
        job::StartError::CannotRun(m) => Failure::new(code::CANNOT_RUN, "cannot_run", m),
        job::StartError::Keeper(m) => Failure::new(code::ERROR, "keeper", m),
    })
}

/// Says what the lease's holding does while CMD runs: a loss, or a
/// renewal's trouble.
fn say_event(json: bool, event: Event) {
    match event {
        Event::Lost { token, reason } => note(
            json,
            json!({"lost": true, "token": token, "reason": format!("{reason:?}")}),
            &format!("lost the lease (token {token}): {reason}"),
        ),
        Event::Error(e) => note(
            json,
            json!({"error": e.to_string()}),
            &format!("renewal trouble: {e}"),
        ),
        _ => {}
    }
}

/// Says a step of CMD's supervision (TERM, KILL), and notes the job's
/// span in the flight recorder, for `lease replay`'s rule that work ends
/// by its deadline.
fn say_step(cx: &Ctx, recorder: Option<&FlightRecorder>, grace: Duration, step: WorkStep) {
    let work_note = |what: &str| {
        if let Some(t) = recorder {
            t.recorder.note(what, cx.leases.clock().now().mono);
        }
    };
    match step {
        WorkStep::Started => work_note("work-start"),
        WorkStep::Stopping { grace } => note(
            cx.json,
            json!({"stopping": true, "signal": "TERM", "grace_ms": grace.as_millis() as u64}),
            &format!("renewal not confirmed in time: TERM to CMD and every process it started, KILL in {grace:?} (before the lease's deadline)"),
        ),
        WorkStep::StoppingOnLoss => {}
        WorkStep::Killed => {
            note(
                cx.json,
                json!({"killed": true}),
                &format!("CMD did not stop in time (grace {grace:?}, before the lease's deadline): killing it"),
            );
            work_note("work-killed");
        }
        WorkStep::Ended => work_note("work-end"),
    }
}

/// CMD as the library supervises it: its end, our own TERM passed on to
/// it, and the flight recorder written on SIGUSR1 while it runs.
struct Cmd<'a> {
    job: job::Job,
    /// A TERM sent to `lease` was passed on: CMD did not end of its own
    /// accord, whatever its status.
    interrupted: bool,
    terminate: &'a mut tokio::signal::unix::Signal,
    usr1: &'a mut tokio::signal::unix::Signal,
    recorder: Option<&'a FlightRecorder>,
    json: bool,
}

impl Supervised for Cmd<'_> {
    type Status = Exit;

    async fn wait(&mut self) -> Exit {
        loop {
            tokio::select! {
                status = self.job.wait() => {
                    return Exit {
                        status,
                        interrupted: self.interrupted,
                    }
                }
                // Passed on to the whole job.
                _ = self.terminate.recv() => {
                    self.interrupted = true;
                    self.job.terminate()
                }
                // The flight recorder, on request.
                _ = self.usr1.recv() => {
                    if let Some(t) = self.recorder {
                        t.write_in_background(self.json, "on request");
                    }
                }
            }
        }
    }

    fn terminate(&mut self) {
        self.job.terminate()
    }

    fn kill(&mut self) {
        self.job.kill()
    }

    /// Exit status 0, and not after a TERM sent to `lease`: a tick is
    /// recorded only then.
    fn succeeded(status: &Exit) -> bool {
        !status.interrupted && matches!(&status.status, Ok(s) if s.success())
    }
}

/// How CMD ended: its exit status, as a tick's record keeps it.
struct Exit {
    status: std::io::Result<std::process::ExitStatus>,
    /// After a TERM sent to `lease` and passed on to CMD.
    interrupted: bool,
}

impl Exit {
    /// `lease run`'s exit code for it: CMD's own (128 + signal if a
    /// signal ended it).
    fn code(self) -> Result<u8, Failure> {
        let status = self
            .status
            .map_err(|e| Failure::new(code::ERROR, "wait", e.to_string()))?;
        Ok(exit_code(status))
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.status {
            Ok(status) => write!(f, "{status}"),
            Err(e) => write!(f, "not known: {e}"),
        }
    }
}

/// `lease replay TRACE`: the trace's runs built again and fed the same
/// inputs, their outcomes, and the rules it breaks (`lease_core::trace`).
fn replay_trace(path: &std::path::Path) -> Result<Report, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::new(
            code::ERROR,
            "trace",
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let trace = replay::Trace::parse(&text)
        .map_err(|e| Failure::new(code::ERROR, "trace", format!("{}: {e}", path.display())))?;
    let report = replay::replay(&trace);
    let mut lines = Vec::new();
    let mut runs = Vec::new();
    for run in &report.runs {
        runs.push(replayed_run(run, &mut lines));
    }
    let broken: Vec<String> = report.broken.iter().map(ToString::to_string).collect();
    for b in &broken {
        lines.push(format!("BROKEN {b}"));
    }
    let verdict = if report.ok() {
        "the same outputs, no rule broken"
    } else if report.diverged().is_some() {
        "DIVERGED: this build answers otherwise"
    } else {
        "RULE BROKEN"
    };
    lines.push(format!(
        "{} run(s), {} deadline(s) judged against the store's expiry ({} could not be), {} line(s) dropped by the recorder: {verdict}",
        report.runs.len(),
        report.deadlines_judged,
        report.deadlines_unjudged,
        trace.dropped_lines
    ));
    Ok(Report {
        code: if report.ok() { code::OK } else { code::BROKEN },
        json: json!({
            "ok": report.ok(),
            "runs": runs,
            "broken": broken,
            "deadlines_judged": report.deadlines_judged,
            "deadlines_unjudged": report.deadlines_unjudged,
            "dropped_lines": trace.dropped_lines,
        }),
        text: lines.join("\n"),
    })
}

/// One run of `lease replay`: its lines for humans (added to `lines`:
/// the verdict, its events, where it diverged) and its JSON.
fn replayed_run(run: &replay::RunReport, lines: &mut Vec<String>) -> Value {
    let (verdict, detail) = match &run.replayed {
        replay::Replayed::Identical { outputs } => ("identical", json!({"outputs": outputs})),
        replay::Replayed::Diverged {
            line,
            recorded,
            replayed,
        } => (
            "diverged",
            json!({"line": line, "recorded": recorded, "replayed": replayed}),
        ),
        replay::Replayed::Cut => ("cut", Value::Null),
    };
    let outcome = run.outcome.as_deref().unwrap_or("(not finished)");
    lines.push(format!(
        "run {} {} {}: {verdict}, {} call(s), {} event(s); {outcome}",
        run.run,
        run.op,
        run.key.as_deref().unwrap_or("?"),
        run.calls,
        run.events.len()
    ));
    for event in &run.events {
        lines.push(format!("  event {event}"));
    }
    if let replay::Replayed::Diverged {
        line,
        recorded,
        replayed,
    } = &run.replayed
    {
        lines.push(format!(
            "  diverged at line {line}: recorded {recorded}, replayed {replayed}"
        ));
    }
    json!({
        "run": run.run, "op": run.op, "key": run.key, "replayed": verdict,
        "detail": detail, "events": run.events, "outcome": run.outcome, "calls": run.calls,
    })
}

/// `lease plan`: failover, requests, cost, versions and broken limits
/// (`lease_core::plan`); exit 1 when a limit is broken.
fn plan(
    cli: &Cli,
    renew_every: Option<Duration>,
    leases: u64,
    contenders: u64,
) -> Result<Report, Failure> {
    let plan = cli.plan(native_settings::env, renew_every, leases, contenders)?;
    Ok(Report {
        code: if plan.violations.is_empty() {
            code::OK
        } else {
            code::ERROR
        },
        json: plan.to_json(),
        text: plan.to_string(),
    })
}

/// What wrote a listed lease: its protocol, the other tool whose lock
/// it is (`litestream`, `terraform`), or `foreign` for a simple client.
fn protocol_shown(l: &Listed) -> &'static str {
    match (l.protocol, l.record.foreign) {
        (Some(p), _) => p.name(),
        (None, Some(lock)) => lock.name(),
        (None, None) => "foreign",
    }
}

/// `ls --watch EVERY [--for D]`: lists the prefix every `every`, prints
/// each key's changes as they are seen (lease_core::protocol::watch), and
/// after `for_` each key's leaderless time. A listing that fails is said
/// and the watch goes on.
async fn watch(cx: &Ctx, every: Duration, for_: Option<Duration>) -> Result<Report, Failure> {
    let clock = cx.leases.clock();
    let started = clock.now().mono;
    let mut seen = Watch::new();
    loop {
        let now = clock.now();
        match cx.leases.list(&cx.key).await {
            Ok(report) => {
                for event in seen.observe(now.wall.0, &report) {
                    if cx.json {
                        println!("{}", event.to_json(now.wall.0));
                    } else {
                        println!("{} {event}", now.wall.to_http_date());
                    }
                }
            }
            Err(e) if cx.json => println!(
                "{}",
                json!({"at_ms": now.wall.0, "event": "error", "error": e.to_string()})
            ),
            Err(e) => println!("{} listing failed: {e}", now.wall.to_http_date()),
        }
        if for_.is_some_and(|d| clock.now().mono - started >= d) {
            break;
        }
        tokio::time::sleep(every).await;
    }
    let end = clock.now().wall.0;
    let keys = seen.summary(end);
    let json = json!({
        "event": "summary",
        "keys": keys.iter().map(|(k, w)| (k.clone(), json!({
            "leaderless_ms": w.leaderless_ms, "longest_ms": w.longest_ms,
            "handoffs": w.handoffs, "held": w.held.as_ref().map(|(h, t)| json!({"holder": h, "token": t})),
        }))).collect::<serde_json::Map<_, _>>(),
    });
    let text = keys
        .iter()
        .map(|(k, w)| {
            format!(
                "{k}: leaderless {} ms in all, longest {} ms, {} handoffs, now {}",
                w.leaderless_ms,
                w.longest_ms,
                w.handoffs,
                w.held
                    .as_ref()
                    .map_or("leaderless".to_string(), |(h, t)| format!(
                        "held by {h} (token {t})"
                    ))
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Report {
        code: code::OK,
        json,
        text,
    })
}

/// `lease ls`: every lease under the prefix (`--key` when none is given),
/// as a table or JSON.
async fn ls(cx: &Ctx) -> Result<Report, Failure> {
    let found = cx.leases.list(&cx.key).await?;
    let mut lines = vec![format!(
        "{:<32} {:<10} {:<28} {:>15} {:>9}  STATE",
        "KEY", "PROTOCOL", "HOLDER", "TOKEN", "LEFT"
    )];
    lines.extend(found.leases.iter().map(|l| listed_row(&found, l)));
    if found.leases.is_empty() {
        lines.push(format!("(no lease under {:?})", cx.key));
    }
    if !found.others.is_empty() {
        lines.push(format!(
            "{} other object(s) under the prefix are not lease records",
            found.others.len()
        ));
    }
    let pools = pool_lines(&found, &mut lines);
    let sessions = session_lines(&found, &mut lines);
    let rows: Vec<Value> = found
        .leases
        .iter()
        .map(|l| owned_row(&found, l, listed_json(l)))
        .collect();
    Ok(Report {
        code: code::OK,
        json: json!({"prefix": cx.key, "leases": rows, "others": found.others, "pools": pools, "sessions": sessions}),
        text: lines.join("\n"),
    })
}

/// `lease ls`'s pools (`run --seats`) among the leases listed: a line
/// each (its seats, how many held), and their JSON.
fn pool_lines(found: &ListReport, lines: &mut Vec<String>) -> Vec<Value> {
    let mut pools: std::collections::BTreeMap<&str, (u32, u32)> = Default::default();
    for l in &found.leases {
        if let Some((pool, _)) = lease_core::client::pool_of(&l.key) {
            let (seats, held) = pools.entry(pool).or_default();
            *seats += 1;
            *held += u32::from(!l.free());
        }
    }
    for (pool, (seats, held)) in &pools {
        lines.push(format!("pool {pool}: {held} of {seats} seat(s) held"));
    }
    pools
        .iter()
        .map(|(pool, (seats, held))| json!({"pool": pool, "seats": seats, "held": held}))
        .collect()
}

/// `lease ls`'s sessions, those the owned keys name (`Leases::session`):
/// a line each with the keys owned under its current term, and their JSON.
fn session_lines(found: &ListReport, lines: &mut Vec<String>) -> Vec<Value> {
    let sessions = found.sessions();
    for s in &sessions {
        let state = match s.live {
            Some(true) => "live",
            Some(false) => "over: its keys are free",
            None => "not under the prefix",
        };
        let token = s.token.map_or(String::new(), |t| format!(" token {t}"));
        lines.push(format!(
            "session {}{token} ({state}): owns {} key(s){}{}",
            s.key,
            s.owns.len(),
            if s.owns.is_empty() { "" } else { ": " },
            s.owns.join(", ")
        ));
    }
    sessions
        .iter()
        .map(|s| json!({"session": s.key, "token": s.token, "live": s.live, "owns": s.owns}))
        .collect()
}

/// A listed lease's JSON `row` with whether it is held, and for a key
/// owned under a session, the session and the session's expiry.
fn owned_row(found: &ListReport, l: &Listed, mut row: Value) -> Value {
    row["held"] = json!(found.held(l));
    if let Some(by) = &l.record.owned_by {
        row["owned_by"] = json!({"session": by.key, "token": by.token});
        // Its own expiry says nothing: its session's does (when listed, at
        // the term the key names).
        row["free"] = json!(found.held(l).map(|held| !held));
        let session = found
            .leases
            .iter()
            .find(|s| s.key == by.key && s.record.token == by.token);
        row["expires_at_ms"] = json!(session.map(|s| s.record.expires_at.0));
        row["time_left_ms"] = json!(session
            .and_then(|s| s.time_left())
            .map(|d| d.as_millis() as u64));
    }
    row
}

/// A listed lease as `lease ls --json` shows it.
fn listed_json(l: &Listed) -> Value {
    let r = &l.record;
    json!({
        "key": l.key,
        "object": l.object,
        "protocol": protocol_shown(l),
        "holder": r.holder,
        "foreign": r.is_foreign(),
        "foreign_lock": r.foreign.map(|f| f.name()),
        "held_until_broken": r.held_until_broken(),
        "token": r.token,
        "etag": l.etag.as_str(),
        "released": r.released,
        "free": l.free(),
        "expires_at_ms": (!r.held_until_broken()).then_some(r.expires_at.0),
        "time_left_ms": l.time_left().map(|d| d.as_millis() as u64),
    })
}

/// A listed lease as a row of `lease ls`'s table (`found`: the whole
/// listing, where an owned key's session is).
fn listed_row(found: &ListReport, l: &Listed) -> String {
    let r = &l.record;
    let holder = match r.foreign {
        Some(_) if r.holder.is_empty() => "(unnamed)".to_string(),
        Some(_) => r.holder.clone(),
        None if r.is_foreign() => "(unnamed: simple client)".to_string(),
        None => r.holder.clone(),
    };
    let left = match l.time_left() {
        _ if r.held_until_broken() => "never".into(),
        // An owned key's own stamp says nothing: its session's does.
        _ if r.owned_by.is_some() => "session".into(),
        None => "?".into(),
        Some(d) => format!("{:.1}s", d.as_secs_f64()),
    };
    let owned = r.owned_by.as_ref().map(|by| match found.held(l) {
        _ if r.released => "released".to_string(),
        Some(true) => format!("held: owned under session {}", by.key),
        Some(false) => format!("free: session {} over", by.key),
        None => format!("owned under session {} (not listed)", by.key),
    });
    let state = if let Some(owned) = &owned {
        owned.as_str()
    } else if r.released {
        "released"
    } else if r.held_until_broken() {
        "held until broken"
    } else if l.free() {
        "expired"
    } else {
        "held"
    };
    format!(
        "{:<32} {:<10} {:<28} {:>15} {:>9}  {state}",
        l.key,
        protocol_shown(l),
        holder,
        r.token,
        left
    )
}

async fn main_async(cli: Cli) -> Result<Option<Report>, Failure> {
    if let Command::Replay { trace } = &cli.command {
        return replay_trace(trace).map(Some);
    }
    // Arithmetic on the settings: no store, bucket or credentials.
    if let Command::Plan {
        renew_every,
        leases,
        contenders,
    } = &cli.command
    {
        return plan(&cli, *renew_every, *leases, *contenders).map(Some);
    }
    let settings = cli
        .store_settings(native_settings::env)
        .map_err(|e| Failure::new(code::ERROR, "settings", e.to_string()))?;
    let (_, lease_settings) = cli.lease_settings(native_settings::env, default_holder)?;
    let cfg = cli.lease_config(native_settings::env, || lease_settings.holder)?;
    let store = native_settings::any_store(&settings, cfg.request_timeout)
        .map_err(|e| Failure::new(code::ERROR, "settings", e.to_string()))?;
    let clock = SystemClock::from_env().map_err(|e| Failure::new(code::ERROR, "settings", e))?;
    // A probe passed within a day is not run again (`lease probe` always
    // runs); see lease_cli::probe_cache.
    let cache = match &cli.command {
        Command::Probe { .. } => None,
        _ if lease_settings.probe => {
            ProbeCache::locate(native_settings::env, &settings, cfg.protocol)
        }
        _ => None,
    };
    let now_ms = clock.now().wall.0;
    let cached = cache.as_ref().is_some_and(|c| c.fresh(now_ms));
    let probe = lease_settings.probe && !cached;
    let leases = Leases::with_config(store, clock, cfg.clone(), probe, os_entropy)
        .map_err(|e| Failure::new(code::ERROR, "config", e.to_string()))?;
    let cx = Ctx {
        key: cfg.key.clone(),
        cfg: leases.config(&cfg.key),
        leases,
        json: cli.json,
        cgroup: job::cgroup_wanted(native_settings::env)
            .map_err(|e| Failure::new(code::ERROR, "settings", e))?,
    };
    let outcome = command(&cli, &cx, &settings).await;
    if let Some(cache) = &cache {
        match &outcome {
            Err(f) if matches!(f.kind, "unsafe_store" | "unsupported") => cache.forget(),
            _ if probe && cx.leases.store_checked() => cache.remember(now_ms),
            _ => {}
        }
    }
    outcome
}

/// The command itself, once the client is built.
async fn command(cli: &Cli, cx: &Ctx, settings: &StoreSettings) -> Result<Option<Report>, Failure> {
    let report = match &cli.command {
        Command::Inspect => inspect(cx).await?,
        Command::Acquire { wait } => acquire(cx, *wait).await?,
        Command::Renew { etag } => renew(cx, etag).await?,
        Command::Release { etag } => release(cx, etag).await?,
        Command::Break { etag, token_floor } => break_lease(cx, etag, *token_floor).await?,
        Command::Probe {
            read_only: true, ..
        } => probe_read_only(cx).await?,
        Command::Probe {
            concurrency,
            rounds,
            ..
        } => probe(cx, settings, usize::from(*concurrency), *rounds).await?,
        Command::Ls {
            watch: Some(every),
            for_,
            ..
        } => watch(cx, *every, *for_).await?,
        Command::Ls { .. } => ls(cx).await?,
        Command::Policy { deletes } => policy(cx, settings, *deletes)?,
        Command::Replay { trace } => replay_trace(trace)?,
        Command::Plan {
            renew_every,
            leases,
            contenders,
        } => plan(cli, *renew_every, *leases, *contenders)?,
        Command::Run {
            grace,
            wait,
            seats,
            cron,
            every,
            tick,
            slot_name,
            late_after,
            busy_exit,
            lost_exit,
            already_ran_exit,
            metrics_addr,
            trace,
            cmd,
        } => {
            let grace = run_grace(*grace, &cx.cfg);
            let schedule = (cron.as_deref(), *every, tick.as_deref());
            let run_for = run_for(schedule, slot_name, *late_after, *wait)?;
            let codes = RunCodes {
                busy: *busy_exit,
                lost: *lost_exit,
                already_ran: *already_ran_exit,
            };
            let recorder = recorder_for(cx, trace.as_deref(), &run_for);
            let ran = run(
                cx,
                cmd,
                grace,
                (run_for, *seats),
                codes,
                *metrics_addr,
                recorder.as_ref(),
            )
            .await;
            if let (Err(f), Some(t)) = (&ran, &recorder) {
                t.write(cx.json, f.kind);
            }
            let code = ran?;
            return Ok(Some(Report {
                code,
                json: Value::Null,
                text: String::new(),
            }));
        }
    };
    Ok(Some(report))
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == job::KEEPER_MARKER) {
        return keeper_main(&args[2..]);
    }
    let cli = <Cli as Parser>::parse_from(args);
    let json = cli.json;
    let is_run = matches!(cli.command, Command::Run { .. });
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lease: cannot start: {e}");
            return ExitCode::from(code::ERROR);
        }
    };
    match runtime.block_on(main_async(cli)) {
        Ok(Some(report)) => {
            if !is_run {
                if json {
                    println!("{}", report.json);
                } else {
                    println!("{}", report.text);
                }
            }
            ExitCode::from(report.code)
        }
        Ok(None) => ExitCode::from(code::OK),
        Err(failure) => {
            if json {
                let value = json!({"error": failure.kind, "message": failure.message});
                if is_run {
                    eprintln!("{value}");
                } else {
                    println!("{value}");
                }
            } else {
                eprintln!("lease: {}", failure.message);
            }
            ExitCode::from(failure.code)
        }
    }
}
