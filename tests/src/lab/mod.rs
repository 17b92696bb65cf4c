//! The fleet lab: real processes against one real store, with faults.
//!
//! A run starts a store (serialised moto, Azurite, or s3rver for the
//! negative case), a [`proxy::FaultProxy`] in front of it with one listener
//! per process slot, and the slots:
//!
//! - **runners**: `lease run -- lab-job` again and again, as cron would,
//!   each holding the lease while its job runs (`src/bin/lab-job.rs`): the
//!   job is lab-job itself, a shell's child, or lab-job with a
//!   TERM-ignoring grandchild or a `setsid` daemon that journal `alive`
//!   until stopped;
//! - **services**: `lab-service`, a long-running process that campaigns
//!   with the `Elector` and runs jobs while it leads, restarted when it
//!   dies; after a few jobs as leader it steps down (resigns, releasing
//!   the lease, and exits, as a pod drained in a rolling deploy does), so
//!   that the lease changes hands in calms too and the runners and
//!   functions get it;
//! - **functions**: the example Lambda function `scheduled-singleton`
//!   under the lab's own Runtime API ([`runtime`]), invoked on every tick,
//!   running its job (a sleep, then a fenced result write) under
//!   `Leases::run`; restarted when it dies, as Lambda would;
//! - **shard members**: `lab-shard` (`src/bin/lab-shard.rs`), the members
//!   of one fleet (`Leases::shards` at `shardfleet`) that splits
//!   `shards` shards among them. A member works on each shard it owns:
//!   every `shard_every` it appends a record to the shard's own protected
//!   object (`shardwork/<i>.log`) with the fenced append and the shard's
//!   token from `Assigned`, never past its session's deadline and only
//!   while `owns` says so; on `Revoking` the work stops, then `drained`.
//!   Restarted when it dies, under its slot's member name (`m<slot>`).
//!
//! The run alternates storms and calms. In a storm the proxy answers some
//! requests with faults (reply dropped after the store applied it; 500,
//! 503, 409, 429 with `Retry-After` up to an hour; a request held past the
//! client's timeout and delivered later) and processes are hit: `SIGKILL`
//! (of `lease run`: its keeper kills its job; of a service), `SIGSTOP` of a
//! whole process group (and any daemon a job started) for longer than the
//! ttl then `SIGCONT`, a blackhole
//! of a slot's traffic (a partition from the bucket). Every process starts
//! with its own wall-clock offset (`LEASE_CLOCK_OFFSET_MS`, up to ten
//! minutes either way). In a calm nothing is injected, and the lease must
//! be held again within a bound.
//!
//! The shard fleet has a stream of process faults of its own in storms
//! (every `shard_fault_every` on average, on a random member), the kinds
//! in turn: `SIGKILL`, `SIGSTOP` for one to two ttls then `SIGCONT`, a
//! blackhole, `SIGKILL`, `SIGSTOP`, and `TERM` (the member leaves the
//! fleet, drains and exits). Its bound is longer than the lease's: a calm
//! must outlast it after the storm's last fault to be judged, so with a
//! `long_calm` every third calm, and the run's last, lasts that long.
//! At the end of every calm the lab reads the fleet's objects from the
//! store (the assignment, each shard's record, each member's session).
//!
//! Every job appends start and end records to one protected object with
//! the fenced append, and notes what its process believed in a journal.
//! [`check`] then judges what happened from the protected object, the
//! journals, the proxy's log and the lab's own record of processes and
//! faults; [`shard_check`] judges the shard fleet from the shards'
//! protected objects, the members' journals and the store's fleet objects
//! at the end of each calm: no two members work on a shard at once, its
//! object's tokens never go down, and after a calm of the fleet's bound
//! (`docs/protocols.md`, "Shards": four ttls, two requests' retries and
//! 3 s; 20 s at the lab's 3 s ttl) every shard is owned by a live member
//! and the shares are balanced within one. Errors in a calm are
//! failures, not noise, for members as for every process. A run writes
//! its logs under `target/lab/`, keeps them when the run fails (or with
//! `LAB_KEEP=1`), and prints a one-screen summary.
//!
//! A run's settings are a [`LabConfig`]; `make chaos` reads `LAB_SECONDS`,
//! `LAB_RUNNERS`, `LAB_SERVICES`, `LAB_FUNCTIONS`, `LAB_SHARD_MEMBERS`,
//! `LAB_SHARDS`, `LAB_SEED` and `LAB_RATE` over its own
//! ([`LabConfig::from_env`]).

pub mod check;
mod config;
pub mod fleet;
pub mod job;
pub mod proxy;
pub mod runtime;
pub mod shard_check;

use crate::servers::{http_request, workspace_root, Azurite, Moto, MotoOptions, S3rver};
use check::{Facts, Judgement, ProcRecord, ProcessFault};
pub use config::{now_ms, Binaries, LabConfig, Rng, StoreKind};
use fleet::{FleetFacts, Snapshot};
use lease_core::store::ReplyKind;
use lease_core::{Store, StoreOp};
use proxy::{Dialect, FaultProxy, FaultSettings, Kind};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const BUCKET: &str = "lab";
const LEASE_KEY: &str = "fleet/leader";
const FENCE_KEY: &str = "fleet/protected.log";
const RESULT_KEY: &str = "fleet/function-result.json";
/// The shard fleet's prefix (`<prefix>/members/…`, `/shards/<i>`,
/// `/coordinator`, `/assignment`).
const SHARD_PREFIX: &str = "shardfleet";
/// Where the shards' protected objects are: `<SHARD_DATA>/<i>.log`.
const SHARD_DATA: &str = "shardwork";

/// The store the lab started, and how processes reach it.
enum LabStore {
    Moto(Moto),
    Azurite(Azurite),
    S3rver(S3rver),
}

impl LabStore {
    fn start(kind: StoreKind) -> Result<LabStore, String> {
        Ok(match kind {
            StoreKind::Moto => {
                let moto = Moto::start(MotoOptions {
                    auth: false,
                    serialized: true,
                })?;
                moto.create_bucket(BUCKET)?;
                LabStore::Moto(moto)
            }
            StoreKind::Azurite => LabStore::Azurite(Azurite::start(BUCKET)?),
            StoreKind::S3rver => {
                let s3rver = S3rver::start(BUCKET)?;
                // s3rver removes a directory when its last object is
                // deleted, and a PUT into it at that instant crashes the
                // server (ENOENT on a write stream's unhandled error). The
                // probes of concurrent processes create and delete their
                // scratch objects under `<key>.probe/`: one object that
                // stays there keeps the directory.
                let keep = format!("/{BUCKET}/{LEASE_KEY}.probe/keep");
                let put = http_request(&s3rver.endpoint(), "PUT", &keep, &[], b"keep")?;
                if put.status != 200 {
                    return Err(format!("s3rver: PUT {keep} answered {}", put.status));
                }
                LabStore::S3rver(s3rver)
            }
        })
    }

    /// The store's own endpoint (host and port; Azurite's account path is
    /// added by [`LabStore::env`]).
    fn address(&self) -> String {
        match self {
            LabStore::Moto(m) => m.endpoint(),
            LabStore::Azurite(a) => {
                let e = a.endpoint();
                e.rsplit_once('/').map(|(h, _)| h.to_string()).unwrap_or(e)
            }
            LabStore::S3rver(s) => s.endpoint(),
        }
    }

    fn dialect(&self) -> Dialect {
        match self {
            LabStore::Azurite(_) => Dialect::Azure,
            _ => Dialect::S3,
        }
    }

    /// The settings a process needs to reach the store through `endpoint`
    /// (`http://127.0.0.1:PORT` of its proxy listener).
    fn env(&self, endpoint: &str) -> Vec<(&'static str, String)> {
        match self {
            LabStore::Moto(_) | LabStore::S3rver(_) => {
                let (id, secret) = match self {
                    LabStore::S3rver(_) => (S3rver::ACCESS_KEY_ID, S3rver::SECRET_ACCESS_KEY),
                    // moto does not check signatures here; it needs one.
                    _ => ("lab", "lab-secret"),
                };
                vec![
                    ("LEASE_PROVIDER", "generic".into()),
                    ("LEASE_ENDPOINT", endpoint.into()),
                    ("LEASE_BUCKET", BUCKET.into()),
                    ("LEASE_PATH_STYLE", "true".into()),
                    ("AWS_REGION", "us-east-1".into()),
                    ("AWS_ACCESS_KEY_ID", id.into()),
                    ("AWS_SECRET_ACCESS_KEY", secret.into()),
                ]
            }
            LabStore::Azurite(a) => vec![
                ("LEASE_PROVIDER", "azure".into()),
                ("LEASE_ENDPOINT", format!("{endpoint}/{}", a.account())),
                ("LEASE_BUCKET", BUCKET.into()),
                ("AZURE_STORAGE_ACCOUNT", a.account().into()),
                ("AZURE_STORAGE_KEY", a.key().into()),
            ],
        }
    }

    /// Reads `key` straight from the store (not through the proxy).
    fn read(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        Ok(self.read_many(&[key.to_string()])?.remove(0))
    }

    /// Reads `keys` straight from the store (not through the proxy), one
    /// after the other.
    fn read_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, String> {
        let direct = self.env(&self.address());
        let map: BTreeMap<&str, String> = direct.into_iter().collect();
        let settings = lease_core::StoreSettings::from_lookup(|k| map.get(k).cloned())
            .map_err(|e| e.to_string())?;
        let store = lease_native::settings::store(&settings, Duration::from_secs(10))
            .map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for key in keys {
            let reply = runtime.block_on(store.call(StoreOp::Get { key: key.clone() }));
            out.push(match reply.kind {
                ReplyKind::Found { body, .. } => Some(body),
                ReplyKind::Missing => None,
                other => {
                    return Err(format!(
                        "reading {key}: {other:?}; last lines of the store's log:\n{}",
                        self.log_tail(30)
                    ))
                }
            });
        }
        Ok(out)
    }

    /// The last `lines` lines of the store process's log.
    fn log_tail(&self, lines: usize) -> String {
        match self {
            LabStore::Moto(m) => m.log_tail(lines),
            LabStore::Azurite(a) => a.log_tail(lines),
            LabStore::S3rver(s) => s.log_tail(lines),
        }
    }
}

/// Sends `sig` to process `pid` (positive) or process group `-pid`.
fn signal(target: i32, sig: i32) -> bool {
    extern "C" {
        #[link_name = "kill"]
        fn libc_kill(pid: i32, sig: i32) -> i32;
    }
    // Never 0 or -1 (the caller's group, every process).
    if target == 0 || target == -1 {
        return false;
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc_kill(target, sig) == 0 }
}

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;
const SIGCONT: i32 = 18;
const SIGSTOP: i32 = 19;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Runner,
    Service,
    Function,
    /// A member of the shard fleet (`lab-shard`).
    Shard,
}

/// A slot's process now, for the fault actor.
#[derive(Default)]
struct SlotNow {
    pid: Option<u32>,
    frozen: bool,
    /// Processes of the slot outside its process group that a freeze
    /// stopped (a `lease run` job's daemon), to thaw with it.
    stopped: Vec<u32>,
}

/// Sends `sig` to the process group `pid` leads and to every descendant
/// of `pid` (a daemon of a `lease run` job has left the group but is still
/// a descendant, through the keeper); returns those outside the group.
fn signal_tree(pid: u32, sig: i32) -> Vec<u32> {
    signal(-(pid as i32), sig);
    let mut others = Vec::new();
    for p in lease_cli::job::descendants(pid) {
        signal(p as i32, sig);
        others.push(p);
    }
    others
}

/// Whether any process of the group `pid` leads is left.
fn group_alive(pid: u32) -> bool {
    signal(-(pid as i32), 0)
}

struct Shared {
    stop: AtomicBool,
    storm: AtomicBool,
    slots: Vec<Mutex<SlotNow>>,
    procs: Mutex<Vec<ProcRecord>>,
    faults: Mutex<Vec<ProcessFault>>,
}

/// What a run produced: the judgement, the summary and where the logs are.
pub struct LabReport {
    /// The checker's verdict and figures.
    pub judgement: Judgement,
    /// The one-screen summary.
    pub summary: String,
    /// The run's log directory (removed after a clean run unless
    /// `LAB_KEEP=1`).
    pub dir: PathBuf,
}

/// Runs the lab (see the module docs) and judges it.
pub fn run(cfg: &LabConfig, bins: &Binaries) -> Result<LabReport, String> {
    let dir = workspace_root().join("target").join("lab").join(format!(
        "{}-{}-{}",
        cfg.name,
        cfg.seed,
        now_ms()
    ));
    fs::create_dir_all(dir.join("journals")).map_err(|e| e.to_string())?;
    fs::create_dir_all(dir.join("procs")).map_err(|e| e.to_string())?;
    fs::create_dir_all(dir.join("traces")).map_err(|e| e.to_string())?;
    if cfg.members > 0 && !(1..=lease_core::client::MAX_SHARDS).contains(&cfg.shards) {
        return Err(format!(
            "a shard fleet of {} members needs 1 to {} shards, not {}",
            cfg.members,
            lease_core::client::MAX_SHARDS,
            cfg.shards
        ));
    }
    let store = LabStore::start(cfg.store)?;
    let slots = cfg.runners + cfg.services + cfg.functions + cfg.members;
    let mut proxy = FaultProxy::start(
        &store.address(),
        slots,
        LEASE_KEY,
        FENCE_KEY,
        store.dialect(),
        cfg.seed,
    )?;
    proxy.set_latency(cfg.store_latency);
    let lease_cfg = lease_core::LeaseConfig::new(LEASE_KEY, "lab", cfg.ttl);
    lease_cfg.validate().map_err(|e| e.to_string())?;
    if cfg.request_faults {
        proxy.set(Some(FaultSettings {
            storm: false,
            rate: cfg.fault_rate,
            kinds: Kind::ALL.to_vec(),
            clients: Vec::new(),
            faults: Vec::new(),
            client_timeout: lease_cfg.request_timeout,
            max_retry_after_s: 5,
        }));
    }
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        storm: AtomicBool::new(false),
        slots: (0..slots).map(|_| Mutex::new(SlotNow::default())).collect(),
        procs: Mutex::new(Vec::new()),
        faults: Mutex::new(Vec::new()),
    });
    let started_ms = now_ms();
    let mut threads = Vec::new();
    let journal = |slot: usize| dir.join("journals").join(format!("slot-{slot}.jsonl"));
    let mut apis = BTreeMap::new();
    for slot in cfg.runners + cfg.services..cfg.runners + cfg.services + cfg.functions {
        apis.insert(
            slot,
            Arc::new(runtime::RuntimeApi::start(slot, journal(slot))?),
        );
    }
    for slot in 0..slots {
        let role = if slot < cfg.runners {
            Role::Runner
        } else if slot < cfg.runners + cfg.services {
            Role::Service
        } else if slot < cfg.runners + cfg.services + cfg.functions {
            Role::Function
        } else {
            Role::Shard
        };
        let spawn = SpawnCtx {
            slot,
            role,
            runtime: apis.get(&slot).map(|a| a.address()),
            env: store.env(&proxy.endpoint(slot)),
            cfg: cfg.clone(),
            bins: bins.clone(),
            dir: dir.clone(),
            shared: shared.clone(),
        };
        threads.push(thread::spawn(move || spawn.run_slot()));
    }
    // The schedule: every function slot gets a tick event per `tick`
    // (one waits at most: a dead function's ticks do not pile up).
    let ticker = {
        let (apis, shared, tick) = (apis.clone(), shared.clone(), cfg.tick);
        thread::spawn(move || {
            let mut n = 0u64;
            while !shared.stop.load(Ordering::SeqCst) {
                n += 1;
                for api in apis.values() {
                    if api.pending() == 0 {
                        api.invoke(serde_json::json!({
                            "version": "0", "id": format!("tick-{n}"), "detail-type": "Scheduled Event",
                            "source": "aws.events", "time": n.to_string(),
                            "detail": {"work_ms": 200 + (n * 7919) % 1500},
                        }));
                    }
                }
                thread::sleep(tick);
            }
        })
    };
    // Storms and calms, with the process faults in storms: the lease
    // fleet's and the shard fleet's, each at its own rate.
    let mut phases = Vec::new();
    let mut snapshots = Vec::new();
    let mut rng = Rng::new(cfg.seed ^ 0xFA17);
    let mut member_rng = Rng::new(cfg.seed ^ 0x5A4D);
    let mut member_faults = 0usize;
    let end = Instant::now() + cfg.duration;
    let mut storm = true;
    let mut calms = 0;
    let pause = |rng: &mut Rng, every: Duration| {
        let mean = every.as_millis() as u64;
        Instant::now() + Duration::from_millis(mean / 2 + rng.below(mean.max(1)))
    };
    while Instant::now() < end {
        let left = end.saturating_duration_since(Instant::now());
        let (is_storm, length) = cfg.phase(storm, calms, left);
        storm = is_storm;
        calms += usize::from(!storm);
        let phase_end = (Instant::now() + length).min(end);
        let from = now_ms();
        shared.storm.store(storm, Ordering::SeqCst);
        proxy.set_storm(storm);
        let mut next_lease = pause(&mut rng, cfg.process_fault_every);
        let mut next_member = pause(&mut member_rng, cfg.shard_fault_every);
        while Instant::now() < phase_end {
            let wake = next_lease.min(next_member).min(phase_end);
            thread::sleep(wake.saturating_duration_since(Instant::now()));
            let now = Instant::now();
            if now >= next_lease {
                if storm && cfg.process_faults && now < phase_end {
                    inject(&shared, cfg, &proxy, &mut rng);
                }
                next_lease = pause(&mut rng, cfg.process_fault_every);
            }
            if now >= next_member {
                if storm && cfg.process_faults && cfg.members > 0 && now < phase_end {
                    inject_member(&shared, cfg, &proxy, &mut member_rng, member_faults);
                    member_faults += 1;
                }
                next_member = pause(&mut member_rng, cfg.shard_fault_every);
            }
        }
        // The end of a calm: the shard fleet as the store holds it.
        if !storm && cfg.members > 0 {
            snapshots.push(fleet_snapshot(&store, cfg)?);
        }
        phases.push((storm, from, now_ms()));
        storm = !storm;
    }
    proxy.set_storm(false);
    shared.stop.store(true, Ordering::SeqCst);
    for t in threads {
        let _ = t.join();
    }
    let _ = ticker.join();
    drop(apis);
    let ended_ms = now_ms();
    // Requests held by the proxy land late: wait until none is left.
    let settle = Instant::now() + Duration::from_secs(10);
    while proxy.in_flight() > 0 && Instant::now() < settle {
        thread::sleep(Duration::from_millis(50));
    }
    proxy.stop();
    let object = store.read(FENCE_KEY)?;
    let lease = store.read(LEASE_KEY)?;
    let fleet = if cfg.members > 0 {
        let keys: Vec<String> = (0..cfg.shards)
            .map(|i| format!("{SHARD_DATA}/{i}.log"))
            .collect();
        let members = (slots - cfg.members..slots).collect();
        let lease_cfg = lease_core::LeaseConfig::new(SHARD_PREFIX, "lab", cfg.ttl);
        FleetFacts {
            prefix: SHARD_PREFIX.into(),
            shards: cfg.shards,
            members,
            bound_ms: shard_bound(&lease_cfg),
            objects: store.read_many(&keys)?,
            snapshots,
        }
    } else {
        FleetFacts::default()
    };
    let facts = Facts {
        ttl_ms: cfg.ttl.as_millis() as u64,
        started_ms,
        ended_ms,
        phases,
        journals: read_journals(&dir, slots)?,
        object,
        lease,
        log: proxy.log(),
        procs: shared.procs.lock().unwrap().clone(),
        faults: shared.faults.lock().unwrap().clone(),
        probe: cfg.probe,
        traces: replay_traces(&bins.lease, &dir.join("traces"))?,
        fleet,
    };
    let mut judgement = check::judge(&facts);
    // 7. The shard fleet, by its own rules.
    judgement.fleet = shard_check::judge(&facts);
    judgement.violations.append(&mut judgement.fleet.violations);
    let summary = check::summary(cfg, &facts, &judgement, |s| {
        shard_check::summary(s, cfg, &facts, &judgement.fleet)
    });
    write_logs(&dir, &facts, &judgement, &summary)?;
    let keep =
        !judgement.violations.is_empty() || std::env::var("LAB_KEEP").is_ok_and(|v| v == "1");
    if !keep {
        let _ = fs::remove_dir_all(&dir);
    }
    drop(store);
    Ok(LabReport {
        judgement,
        summary,
        dir,
    })
}

/// Every trace `lease run` wrote under `dir`, replayed by `lease replay
/// --json` (exit 0: identical and no rule broken; 6: not).
pub fn replay_traces(lease: &Path, dir: &Path) -> Result<Vec<check::ReplayedTrace>, String> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut traces = Vec::new();
    for file in files {
        let out = Command::new(lease)
            .args(["replay", "--json"])
            .arg(&file)
            .env_clear()
            .output()
            .map_err(|e| format!("lease replay: {e}"))?;
        let report = serde_json::from_slice(&out.stdout).map_err(|e| {
            format!(
                "lease replay {} printed no report ({e}): {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        traces.push(check::ReplayedTrace {
            file: file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            report,
        });
    }
    Ok(traces)
}

/// One process fault on a random slot of the lease fleet (runners,
/// services, functions): kill, freeze or blackhole.
fn inject(shared: &Arc<Shared>, cfg: &LabConfig, proxy: &FaultProxy, rng: &mut Rng) {
    let slots = cfg.runners + cfg.services + cfg.functions;
    if slots == 0 {
        return;
    }
    // Half the time the holder (the last to write the lease), else any
    // slot with a live process, else any slot.
    let live: Vec<usize> = (0..slots)
        .filter(|&i| shared.slots[i].lock().unwrap().pid.is_some())
        .collect();
    let slot = match proxy.last_writer() {
        Some(holder) if rng.chance(0.5) => holder,
        _ if !live.is_empty() => live[rng.below(live.len() as u64) as usize],
        _ => rng.below(slots as u64) as usize,
    };
    let has_pid = shared.slots[slot].lock().unwrap().pid.is_some();
    let kind = match rng.below(3) {
        0 | 1 if !has_pid => "blackhole",
        0 => "kill",
        1 => "freeze",
        _ => "blackhole",
    };
    hit(shared, cfg, proxy, rng, slot, kind);
}

/// The shard fleet's faults, in turn: each kind comes round within six.
const MEMBER_FAULTS: [&str; 6] = ["kill", "freeze", "blackhole", "kill", "freeze", "leave"];

/// The `n`th process fault on the shard fleet, on a random member with a
/// live process (else any member): a kill (`SIGKILL`), a freeze (`SIGSTOP`
/// for one to two ttls), a blackhole, or a `TERM`, which makes the
/// member leave the fleet and exit.
fn inject_member(
    shared: &Arc<Shared>,
    cfg: &LabConfig,
    proxy: &FaultProxy,
    rng: &mut Rng,
    n: usize,
) {
    let first = shared.slots.len() - cfg.members;
    let live: Vec<usize> = (first..shared.slots.len())
        .filter(|&i| shared.slots[i].lock().unwrap().pid.is_some())
        .collect();
    let slot = if live.is_empty() {
        first + rng.below(cfg.members as u64) as usize
    } else {
        live[rng.below(live.len() as u64) as usize]
    };
    let kind = match MEMBER_FAULTS[n % MEMBER_FAULTS.len()] {
        _ if live.is_empty() => "blackhole",
        kind => kind,
    };
    hit(shared, cfg, proxy, rng, slot, kind);
}

/// Hits `slot` with a process fault of `kind` (`kill`, `freeze`,
/// `blackhole`, `leave`) and records it.
fn hit(
    shared: &Arc<Shared>,
    cfg: &LabConfig,
    proxy: &FaultProxy,
    rng: &mut Rng,
    slot: usize,
    kind: &str,
) {
    let ttl = cfg.ttl.as_millis() as u64;
    let at = now_ms();
    let record = |pid: u32, to_ms: u64| {
        shared.faults.lock().unwrap().push(ProcessFault {
            kind: kind.into(),
            slot,
            pid,
            from_ms: at,
            to_ms,
        });
    };
    match kind {
        "kill" | "leave" => {
            let pid = shared.slots[slot].lock().unwrap().pid;
            let sig = if kind == "kill" { SIGKILL } else { SIGTERM };
            if let Some(pid) = pid {
                if signal(pid as i32, sig) {
                    record(pid, at);
                }
            }
        }
        "freeze" => {
            let mut now = shared.slots[slot].lock().unwrap();
            let Some(pid) = now.pid else { return };
            if now.frozen || !group_alive(pid) {
                return;
            }
            // The whole slot, as a frozen VM or container: the group and
            // any daemon of the job.
            now.stopped = signal_tree(pid, SIGSTOP);
            now.frozen = true;
            drop(now);
            let length = ttl + rng.below(ttl + 1);
            record(pid, at + length);
            let thaw = Instant::now() + Duration::from_millis(length);
            let shared = shared.clone();
            thread::spawn(move || {
                thread::sleep(thaw.saturating_duration_since(Instant::now()));
                let mut now = shared.slots[slot].lock().unwrap();
                // Only the group it froze (the slot may have a new one).
                if now.pid == Some(pid) {
                    signal_tree(pid, SIGCONT);
                    for p in std::mem::take(&mut now.stopped) {
                        signal(p as i32, SIGCONT);
                    }
                    now.frozen = false;
                }
            });
        }
        _ => {
            let length = ttl / 2 + rng.below(ttl * 3 / 2 + 1);
            proxy.blackhole(slot, Instant::now() + Duration::from_millis(length));
            record(0, at + length);
        }
    }
}

/// The store's fleet objects now: the assignment, every shard's record
/// and every member's session record.
fn fleet_snapshot(store: &LabStore, cfg: &LabConfig) -> Result<Snapshot, String> {
    use lease_core::client::{assignment_key, shard_key};
    let at_ms = now_ms();
    let first = cfg.runners + cfg.services + cfg.functions;
    let members: Vec<usize> = (first..first + cfg.members).collect();
    let mut keys = vec![assignment_key(SHARD_PREFIX)];
    keys.extend((0..cfg.shards).map(|i| shard_key(SHARD_PREFIX, i)));
    keys.extend(
        members
            .iter()
            .map(|&slot| lease_core::client::member_key(SHARD_PREFIX, &FleetFacts::holder(slot))),
    );
    let mut read = store.read_many(&keys)?.into_iter();
    let assignment = read.next().flatten();
    let shards = read.by_ref().take(cfg.shards as usize).collect();
    Ok(Snapshot {
        at_ms,
        assignment,
        shards,
        members: members.into_iter().zip(read).collect(),
    })
}

/// The bound within which a quiet shard fleet is covered and balanced
/// again (`docs/protocols.md`, "Shards", the simulation's `shard_bound`):
/// four ttls, the retries of two requests and 3 s. Late deliveries, which
/// the simulation adds, are in the lab's calm's faults already.
fn shard_bound(cfg: &lease_core::LeaseConfig) -> u64 {
    let retries = (cfg.request_timeout + cfg.backoff_max) * 2;
    (cfg.ttl * 4 + retries + Duration::from_secs(3)).as_millis() as u64
}

struct SpawnCtx {
    slot: usize,
    role: Role,
    /// A function slot's Runtime API address.
    runtime: Option<String>,
    env: Vec<(&'static str, String)>,
    cfg: LabConfig,
    bins: Binaries,
    dir: PathBuf,
    shared: Arc<Shared>,
}

impl SpawnCtx {
    fn command(&self, rng: &mut Rng) -> (Command, i64) {
        let mut cmd = Command::new(match self.role {
            Role::Runner => &self.bins.lease,
            Role::Service => &self.bins.service,
            Role::Function => &self.bins.function,
            Role::Shard => &self.bins.shard,
        });
        // Nothing from the caller's environment but the basics: the
        // settings are all the lab's.
        cmd.env_clear();
        for var in ["PATH", "HOME", "TMPDIR"] {
            if let Ok(v) = std::env::var(var) {
                cmd.env(var, v);
            }
        }
        match self.role {
            Role::Runner => {
                let c = &mut cmd;
                c.arg("run").arg("--json").arg("--grace").arg("200ms");
                if !self.cfg.probe {
                    c.arg("--no-probe");
                }
                // The job's shape: lab-job as CMD; as a shell's child; with
                // a TERM-ignoring grandchild; with a setsid daemon. All of
                // it must stop before the lease can pass on.
                match rng.below(4) {
                    0 => {
                        c.arg("--").arg(&self.bins.job);
                    }
                    1 => {
                        c.args(["--", "sh", "-c", "\"$0\"; true"])
                            .arg(&self.bins.job);
                    }
                    n => {
                        c.arg("--").arg(&self.bins.job);
                        c.env("LAB_JOB_SHAPE", if n == 2 { "stubborn" } else { "setsid" });
                    }
                }
                let work = 100 + rng.below(self.cfg.max_work.as_millis() as u64);
                c.env("LAB_WORK_MS", work.to_string());
                // A flight recorder, written on a lost lease or an error.
                static TRACES: AtomicU64 = AtomicU64::new(0);
                let n = TRACES.fetch_add(1, Ordering::Relaxed);
                c.env(
                    "LEASE_TRACE",
                    self.dir
                        .join("traces")
                        .join(format!("slot-{}-{n}.jsonl", self.slot)),
                );
            }
            Role::Service => {
                cmd.env(
                    "LAB_WORK_MS_MAX",
                    (self.cfg.max_work.as_millis() as u64).to_string(),
                );
                if self.cfg.service_term_jobs > 0 {
                    let term = 1 + rng.below(self.cfg.service_term_jobs);
                    cmd.env("LAB_TERM_JOBS", term.to_string());
                }
            }
            Role::Function => {
                let c = &mut cmd;
                let stream = format!("l{}-{}", self.slot, rng.next_u64() % 1_000_000);
                c.env(
                    "AWS_LAMBDA_RUNTIME_API",
                    self.runtime.clone().unwrap_or_default(),
                )
                .env("AWS_LAMBDA_FUNCTION_NAME", "lab")
                .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
                .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
                .env("AWS_LAMBDA_LOG_STREAM_NAME", stream)
                .env("RESULT_KEY", RESULT_KEY);
            }
            Role::Shard => {
                cmd.env("LAB_SHARD_PREFIX", SHARD_PREFIX)
                    .env("LAB_SHARD_DATA", SHARD_DATA)
                    .env("LAB_SHARDS", self.cfg.shards.to_string())
                    .env(
                        "LAB_SHARD_DRAIN_MS",
                        self.cfg.shard_drain.as_millis().to_string(),
                    )
                    .env(
                        "LAB_SHARD_EVERY_MS",
                        self.cfg.shard_every.as_millis().to_string(),
                    );
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        // The function's clock is Lambda's own (the example takes no
        // offset); the others get one each.
        let offset = if self.cfg.process_faults && self.role != Role::Function {
            rng.below(1_200_001) as i64 - 600_000
        } else {
            0
        };
        let prefix = match self.role {
            Role::Runner => "r",
            Role::Service => "s",
            Role::Function => "l",
            Role::Shard => "m",
        };
        cmd.env("LEASE_KEY", LEASE_KEY)
            .env("LEASE_TTL", format!("{}ms", self.cfg.ttl.as_millis()))
            .env("LEASE_PROTOCOL", "cas")
            .env("LEASE_CLOCK_OFFSET_MS", offset.to_string())
            // `lease run`'s holder name is HOSTNAME-pid.
            .env("HOSTNAME", format!("{prefix}{}", self.slot))
            .env("LEASE_HOLDER_PREFIX", prefix)
            .env("LAB_SLOT", self.slot.to_string())
            .env("LAB_FENCE_KEY", FENCE_KEY)
            .env(
                "LAB_JOURNAL",
                self.dir
                    .join("journals")
                    .join(format!("slot-{}.jsonl", self.slot)),
            )
            .env("RUST_LOG", "off")
            // Each slot is a host: its own per-host probe cache (`lease`),
            // under the run's directory, never the user's.
            .env(
                "LEASE_PROBE_CACHE_DIR",
                self.dir
                    .join("probe-cache")
                    .join(format!("slot-{}", self.slot)),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Its own process group: a freeze stops `lease run` and its job
            // together, as a frozen VM or container would be.
            .process_group(0);
        if let Role::Service = self.role {
            cmd.env("LEASE_HOLDER", format!("s{}", self.slot));
        }
        // A member's name is its slot's: a restarted member comes back
        // as the same member, once its predecessor's session is over.
        if let Role::Shard = self.role {
            cmd.env("LEASE_HOLDER", FleetFacts::holder(self.slot));
        }
        (cmd, offset)
    }

    fn run_slot(self) {
        let mut rng = Rng::new(self.cfg.seed ^ (self.slot as u64 + 1).wrapping_mul(0xABCD));
        let log_path = self
            .dir
            .join("procs")
            .join(format!("slot-{}.log", self.slot));
        while !self.shared.stop.load(Ordering::SeqCst) {
            let (mut cmd, offset) = self.command(&mut rng);
            // The file its flight recorder is written to, if any.
            let trace = cmd
                .get_envs()
                .find(|(k, _)| *k == "LEASE_TRACE")
                .and_then(|(_, v)| Path::new(v?).file_name())
                .map(|n| n.to_string_lossy().into_owned());
            let log = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .and_then(|f| f.try_clone().map(|g| (f, g)));
            if let Ok((_, err)) = log {
                cmd.stderr(Stdio::from(err));
            } else {
                cmd.stderr(Stdio::null());
            }
            let spawned_ms = now_ms();
            let mut child: Child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => {
                    let _ = fs::write(&log_path, format!("cannot spawn: {e}\n"));
                    thread::sleep(Duration::from_millis(500));
                    continue;
                }
            };
            let pid = child.id();
            *self.shared.slots[self.slot].lock().unwrap() = SlotNow {
                pid: Some(pid),
                ..SlotNow::default()
            };
            let status = loop {
                if let Ok(Some(status)) = child.try_wait() {
                    break Some(status);
                }
                if self.shared.stop.load(Ordering::SeqCst) {
                    if self.role == Role::Runner {
                        // `lease run` alone: its keeper kills the job.
                        let stopped = self.shared.slots[self.slot].lock().unwrap().stopped.clone();
                        signal_tree(pid, SIGCONT);
                        for p in stopped {
                            signal(p as i32, SIGCONT);
                        }
                        signal(pid as i32, SIGKILL);
                    } else {
                        // The whole group: the process and anything it ran.
                        signal(-(pid as i32), SIGKILL);
                        signal(-(pid as i32), SIGCONT);
                    }
                    let _ = child.wait();
                    break None;
                }
                thread::sleep(Duration::from_millis(5));
            };
            let exited_ms = now_ms();
            let stopped =
                std::mem::take(&mut *self.shared.slots[self.slot].lock().unwrap()).stopped;
            // `lease run` killed (a fault, or the end of the run) leaves its
            // keeper killing the job: thaw what a freeze stopped and let it
            // finish; the keeper stays in the group until the job is gone.
            signal(-(pid as i32), SIGCONT);
            for p in stopped {
                signal(p as i32, SIGCONT);
            }
            let settle = Instant::now() + Duration::from_secs(10);
            while self.role == Role::Runner && group_alive(pid) && Instant::now() < settle {
                thread::sleep(Duration::from_millis(5));
            }
            // Anything left (it should be gone already): nothing of this
            // process may live on.
            signal(-(pid as i32), SIGCONT);
            signal(-(pid as i32), SIGKILL);
            use std::os::unix::process::ExitStatusExt;
            self.shared.procs.lock().unwrap().push(ProcRecord {
                slot: self.slot,
                pid,
                service: self.role != Role::Runner,
                member: self.role == Role::Shard,
                spawned_ms,
                exited_ms,
                code: status.and_then(|s| s.code()),
                signal: status.and_then(|s| s.signal()),
                clock_offset_ms: offset,
                trace,
            });
            // A runner that found the lease busy (exit 3) tries again
            // within a poll interval, as a cron job or a retrying
            // supervisor would; otherwise at once, a new job.
            let poll = self.cfg.ttl.as_millis() as u64 / 3;
            let pause = match (self.role, status.and_then(|s| s.code())) {
                (Role::Runner, Some(3)) => poll / 2 + rng.below(poll),
                (Role::Runner, _) => 20 + rng.below(200),
                (Role::Service | Role::Function | Role::Shard, _) => 200 + rng.below(800),
            };
            thread::sleep(Duration::from_millis(pause));
        }
    }
}

fn read_journals(dir: &Path, slots: usize) -> Result<Vec<serde_json::Value>, String> {
    let mut all = Vec::new();
    for slot in 0..slots {
        let path = dir.join("journals").join(format!("slot-{slot}.jsonl"));
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| format!("{}: unreadable line {line:?}: {e}", path.display()))?;
            all.push(v);
        }
    }
    all.sort_by_key(|v| v["t"].as_u64().unwrap_or(0));
    Ok(all)
}

fn write_logs(dir: &Path, facts: &Facts, j: &Judgement, summary: &str) -> Result<(), String> {
    use std::io::Write;
    let mut f = File::create(dir.join("proxy.jsonl")).map_err(|e| e.to_string())?;
    for x in &facts.log {
        let line = serde_json::json!({
            "client": x.client, "arrived_ms": x.arrived_ms, "applied_ms": x.applied_ms,
            "applied_seq": x.applied_seq, "method": x.method, "path": x.path,
            "kind": x.kind.name(), "fault": x.fault.name(), "store_status": x.store_status,
            "body": String::from_utf8_lossy(&x.body),
        });
        writeln!(f, "{line}").map_err(|e| e.to_string())?;
    }
    let mut f = File::create(dir.join("faults.jsonl")).map_err(|e| e.to_string())?;
    for p in &facts.faults {
        writeln!(
            f,
            "{}",
            serde_json::to_string(&p.to_json()).unwrap_or_default()
        )
        .map_err(|e| e.to_string())?;
    }
    let mut f = File::create(dir.join("procs.jsonl")).map_err(|e| e.to_string())?;
    for p in &facts.procs {
        writeln!(f, "{}", p.to_json()).map_err(|e| e.to_string())?;
    }
    if let Some(o) = &facts.object {
        fs::write(dir.join("protected.log"), o).map_err(|e| e.to_string())?;
    }
    // The shard fleet: each shard's protected object, and the store's
    // fleet objects at the end of each calm.
    for (i, o) in facts.fleet.objects.iter().enumerate() {
        if let Some(o) = o {
            fs::write(dir.join(format!("shard-{i}.log")), o).map_err(|e| e.to_string())?;
        }
    }
    if !facts.fleet.snapshots.is_empty() {
        let text =
            |b: &Option<Vec<u8>>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
        let mut f = File::create(dir.join("fleet-snapshots.jsonl")).map_err(|e| e.to_string())?;
        for snap in &facts.fleet.snapshots {
            let members: BTreeMap<String, Option<String>> = snap
                .members
                .iter()
                .map(|(slot, b)| (FleetFacts::holder(*slot), text(b)))
                .collect();
            let line = serde_json::json!({
                "at_ms": snap.at_ms, "assignment": text(&snap.assignment),
                "shards": snap.shards.iter().map(text).collect::<Vec<_>>(), "members": members,
            });
            writeln!(f, "{line}").map_err(|e| e.to_string())?;
        }
    }
    let mut all = j.violations.join("\n");
    all.push('\n');
    fs::write(dir.join("violations.txt"), all).map_err(|e| e.to_string())?;
    fs::write(dir.join("summary.txt"), summary).map_err(|e| e.to_string())
}
