//! Contention on one lease key: N contenders (tokio tasks in this process,
//! each with its own client and holder name `c<i>`) against a serialised
//! moto, which answers one request at a time, so requests are the
//! bottleneck as on a throttled S3 prefix.
//!
//! Configurations, each for `--seconds` on a fresh moto:
//!
//! - `baseline`: a plain create/delete lock on the stock `aws-sdk-s3`
//!   client: acquire = PutObject with `If-None-Match: *` (412 = busy),
//!   release = DeleteObject. Busy: sleep a busy wait, try again.
//! - `<protocol>, busy loop` (cas, epochs, mutex): [`Leases::acquire`] in
//!   the same busy-wait loop.
//! - `<protocol>, built-in wait`: [`Leases::acquire_within`] with a 30 s
//!   budget and no loop of the caller's (a `Busy` after the budget is a
//!   timed-out wait, and it waits again).
//! - `<protocol>, fair wait` (cas, epochs): the same with fair waiting
//!   (`Settings::fair`): a releaser finds its own lease busy for a second,
//!   and waiters re-read at least every second.
//!
//! Each contender loops until the time is up: acquire; on success hold for
//! `--hold-ms`, then release; on busy (or an error) sleep uniformly in
//! [0.5, 1.5] × the busy wait and try again. An attempt still running at
//! the deadline is dropped; a lease acquired before it is held and released.
//!
//! Measured per configuration: acquisitions per second; the handoff gap
//! (a release's return to the next acquisition's return, by anyone; it can
//! be slightly negative when the next winner's reply is read before the
//! releaser's); the acquire latency (a contender's first attempt after its
//! previous release, or its start, to success); store requests per
//! acquisition by kind (a wrapper around our [`Store`]; an SDK interceptor
//! counting every HTTP attempt for the baseline), refused PUTs (412)
//! among them, and their price at S3's list prices; errors (`GaveUp`
//! apart); contenders that never acquired; and overlaps: every hold is an
//! interval [acquire returned, release started] on one monotonic clock, and
//! no two may overlap (the process exits 1 if any do).

use aws_sdk_s3::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_s3::config::{
    BehaviorVersion, ConfigBag, Credentials, Intercept, Region, RuntimeComponents,
};
use aws_sdk_s3::error::{BoxError, DisplayErrorContext};
use aws_sdk_s3::primitives::ByteStream;
use lease_core::client::{Leases, Settings};
use lease_core::config::Protocol;
use lease_core::entropy::Entropy;
use lease_core::protocol::machine::{AcquireOutcome, Lease, LeaseError, ReleaseOutcome};
use lease_core::store::{ReplyKind, Store, StoreOp, StoreReply};
use lease_core::time::UnixMillis;
use lease_native::clock::SystemClock;
use lease_native::settings::{S3Store, StoreSettings};
use lease_tests::servers::{venv_dir, Moto, MotoOptions};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const BUCKET: &str = "locks";
const KEY: &str = "bench/lease";
const TTL: Duration = Duration::from_secs(30);
/// The core's default for a 30 s ttl: ttl / 6, at most 5 s.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The budget of one [`Leases::acquire_within`].
const WAIT_BUDGET: Duration = Duration::from_secs(30);
/// The pause after an error when the configuration has no busy wait.
const ERROR_PAUSE: Duration = Duration::from_millis(250);
/// S3 Standard list prices, dollars per request: PUT, COPY, POST, LIST;
/// GET. DELETE is free.
const PRICE_WRITE: f64 = 0.005 / 1000.0;
const PRICE_GET: f64 = 0.0004 / 1000.0;

/// The knobs, from the command line (`make bench-contention` passes them).
struct Args {
    contenders: usize,
    seconds: u64,
    hold: Duration,
    busy_ms: Vec<u64>,
    seed: u64,
    report: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        contenders: 100,
        seconds: 60,
        hold: Duration::from_millis(200),
        busy_ms: vec![100, 1000],
        seed: lease_native::os_entropy().next_u64() >> 16,
        report: "target/bench-contention/report.md".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: std::num::ParseIntError| format!("{flag} {value:?}: {e}");
        match flag.as_str() {
            "--contenders" => args.contenders = value.parse().map_err(bad)?,
            "--seconds" => args.seconds = value.parse().map_err(bad)?,
            "--hold-ms" => args.hold = Duration::from_millis(value.parse().map_err(bad)?),
            "--seed" => args.seed = value.parse().map_err(bad)?,
            "--report" => args.report = value,
            "--busy-ms" => {
                args.busy_ms = value
                    .split([' ', ','])
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().map_err(bad))
                    .collect::<Result<_, _>>()?
            }
            _ => {
                return Err(format!(
                    "unknown flag {flag} (see tests/bench/contention/README.md)"
                ))
            }
        }
    }
    Ok(args)
}

/// Requests sent, by kind.
#[derive(Default, Debug)]
struct Counts {
    get: AtomicU64,
    put: AtomicU64,
    /// PUTs refused with 412 (a precondition failed).
    refused: AtomicU64,
    list: AtomicU64,
    delete: AtomicU64,
}

impl Counts {
    fn count(&self, method: &str) {
        match method {
            "GET" => &self.get,
            "PUT" => &self.put,
            "LIST" => &self.list,
            "DELETE" => &self.delete,
            _ => return,
        }
        .fetch_add(1, Relaxed);
    }

    /// GET, PUT, refused PUT, LIST, DELETE.
    fn snapshot(&self) -> [u64; 5] {
        [
            &self.get,
            &self.put,
            &self.refused,
            &self.list,
            &self.delete,
        ]
        .map(|c| c.load(Relaxed))
    }
}

/// Our S3 store, counting every request it sends.
struct CountingStore {
    inner: S3Store,
    counts: Arc<Counts>,
}

impl Store for CountingStore {
    async fn call(&self, op: StoreOp) -> StoreReply {
        let put = matches!(op, StoreOp::Put { .. });
        self.counts.count(op.verb());
        let reply = self.inner.call(op).await;
        if put && reply.kind == ReplyKind::PreconditionFailed {
            self.counts.refused.fetch_add(1, Relaxed);
        }
        reply
    }

    fn min_write_interval(&self) -> Duration {
        self.inner.min_write_interval()
    }
}

/// Counts the SDK's HTTP attempts (retries included) by method.
#[derive(Debug)]
struct SdkCounter(Arc<Counts>);

impl Intercept for SdkCounter {
    fn name(&self) -> &'static str {
        "SdkCounter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.count(context.request().method());
        Ok(())
    }
}

/// What one configuration runs.
#[derive(Clone, Copy)]
enum Kind {
    Baseline,
    BusyLoop(Protocol),
    BuiltIn(Protocol),
    /// `acquire_within` with fair waiting (`Settings::fair`).
    Fair(Protocol),
}

/// One contender's lock.
enum Locker {
    Sdk(aws_sdk_s3::Client, Arc<Counts>),
    Ours(Leases<CountingStore, SystemClock>, Option<Duration>),
}

/// An attempt's end. `Acquired(None)` is the baseline's lock.
// One per attempt, moved once: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Attempt {
    Acquired(Option<Lease>),
    Busy,
    Failed(Failure),
}

struct Failure {
    gave_up: bool,
    message: String,
}

impl Failure {
    fn sdk<E: std::error::Error + 'static>(what: &str, e: E) -> Failure {
        let message = format!("{what}: {}", DisplayErrorContext(e));
        Failure {
            gave_up: false,
            message,
        }
    }

    fn ours(what: &str, e: LeaseError) -> Failure {
        let gave_up = matches!(e, LeaseError::GaveUp { .. });
        let message = format!("{what}: {e}");
        Failure { gave_up, message }
    }
}

impl Locker {
    fn new(
        kind: Kind,
        endpoint: &str,
        holder: String,
        counts: &Arc<Counts>,
    ) -> Result<Self, String> {
        let (protocol, wait, fair) = match kind {
            Kind::Baseline => {
                let config = aws_sdk_s3::Config::builder()
                    .behavior_version(BehaviorVersion::latest())
                    .region(Region::new(Moto::REGION))
                    .endpoint_url(endpoint)
                    .credentials_provider(Credentials::new("test", "test", None, None, "bench"))
                    .force_path_style(true)
                    .interceptor(SdkCounter(counts.clone()))
                    .build();
                let s3 = aws_sdk_s3::Client::from_conf(config);
                return Ok(Locker::Sdk(s3, counts.clone()));
            }
            Kind::BusyLoop(p) => (p, None, false),
            Kind::BuiltIn(p) => (p, Some(WAIT_BUDGET), false),
            Kind::Fair(p) => (p, Some(WAIT_BUDGET), true),
        };
        // Dummy SigV4 credentials: moto without auth checks none, but
        // refuses anonymous requests on an existing key.
        let vars = [
            ("LEASE_BUCKET", BUCKET),
            ("LEASE_ENDPOINT", endpoint),
            ("AWS_REGION", Moto::REGION),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
        ];
        let lookup = |name: &str| vars.iter().find(|v| v.0 == name).map(|v| v.1.to_string());
        let settings = StoreSettings::from_lookup(lookup).map_err(|e| e.to_string())?;
        let store =
            lease_native::settings::store(&settings, REQUEST_TIMEOUT).map_err(|e| e.to_string())?;
        let store = CountingStore {
            inner: store,
            counts: counts.clone(),
        };
        let settings = Settings::new(holder)
            .ttl(TTL)
            .protocol(protocol)
            .fair(fair)
            .probe(false);
        let leases = Leases::new(
            store,
            SystemClock::new(),
            settings,
            lease_native::os_entropy,
        )
        .map_err(|e| e.to_string())?;
        Ok(Locker::Ours(leases, wait))
    }

    async fn acquire(&self) -> Attempt {
        match self {
            Locker::Sdk(s3, counts) => {
                let put = s3.put_object().bucket(BUCKET).key(KEY).if_none_match("*");
                match put.body(ByteStream::from_static(b"{}")).send().await {
                    Ok(_) => Attempt::Acquired(None),
                    Err(e) if e.raw_response().map(|r| r.status().as_u16()) == Some(412) => {
                        counts.refused.fetch_add(1, Relaxed);
                        Attempt::Busy
                    }
                    Err(e) => Attempt::Failed(Failure::sdk("PutObject", e)),
                }
            }
            Locker::Ours(leases, wait) => {
                let outcome = match wait {
                    Some(wait) => leases.acquire_within(KEY, *wait).await,
                    None => leases.acquire(KEY).await,
                };
                match outcome {
                    Ok(AcquireOutcome::Acquired(lease)) => Attempt::Acquired(Some(lease)),
                    Ok(AcquireOutcome::Busy(_)) => Attempt::Busy,
                    Err(e) => Attempt::Failed(Failure::ours("acquire", e)),
                }
            }
        }
    }

    async fn release(&self, lease: Option<Lease>) -> Result<(), Failure> {
        match (self, lease) {
            (Locker::Sdk(s3, _), _) => s3
                .delete_object()
                .bucket(BUCKET)
                .key(KEY)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| Failure::sdk("DeleteObject", e)),
            (Locker::Ours(leases, _), Some(lease)) => match leases.release(lease).await {
                Ok(ReleaseOutcome::Released { .. }) => Ok(()),
                Ok(other) => Err(Failure {
                    gave_up: false,
                    message: format!("release: {other:?}"),
                }),
                Err(e) => Err(Failure::ours("release", e)),
            },
            (Locker::Ours(..), None) => unreachable!("our acquisitions carry their lease"),
        }
    }
}

/// One hold, on the process's monotonic clock.
struct Hold {
    contender: usize,
    acquired: Instant,
    release_started: Instant,
    released: Instant,
}

/// What one contender saw.
#[derive(Default)]
struct Log {
    holds: Vec<Hold>,
    latencies: Vec<Duration>,
    errors: u64,
    gave_up: u64,
    waits_timed_out: u64,
    messages: BTreeMap<String, u64>,
}

impl Log {
    fn fail(&mut self, failure: Failure) {
        self.errors += 1;
        self.gave_up += u64::from(failure.gave_up);
        // Grouped with numbers, ids and tokens masked: "gave up after #
        // attempts; ... session # (token #".
        let words = failure.message.split(' ').map(|word| {
            if word.contains(|c: char| c.is_ascii_digit()) {
                "#"
            } else {
                word
            }
        });
        let message = words.collect::<Vec<_>>().join(" ");
        let message = message.chars().take(160).collect();
        *self.messages.entry(message).or_default() += 1;
    }
}

/// One contender's loop until `deadline` (see the module docs).
async fn contend(
    contender: usize,
    locker: Locker,
    busy: Option<Duration>,
    hold: Duration,
    deadline: Instant,
    mut rng: Entropy,
) -> Log {
    let mut log = Log::default();
    let mut trying_since = None;
    let end = tokio::time::Instant::from_std(deadline);
    while Instant::now() < deadline {
        let started = *trying_since.get_or_insert_with(Instant::now);
        let Ok(attempt) = tokio::time::timeout_at(end, locker.acquire()).await else {
            break;
        };
        let pause = match attempt {
            Attempt::Acquired(lease) => {
                let acquired = Instant::now();
                log.latencies.push(acquired - started);
                tokio::time::sleep(hold).await;
                let release_started = Instant::now();
                if let Err(failure) = locker.release(lease).await {
                    log.fail(failure);
                }
                let released = Instant::now();
                log.holds.push(Hold {
                    contender,
                    acquired,
                    release_started,
                    released,
                });
                trying_since = None;
                continue;
            }
            Attempt::Busy => match busy {
                Some(busy) => busy,
                None => {
                    log.waits_timed_out += 1;
                    continue;
                }
            },
            Attempt::Failed(failure) => {
                log.fail(failure);
                busy.unwrap_or(ERROR_PAUSE)
            }
        };
        let wake = tokio::time::Instant::now() + pause.mul_f64(0.5 + rng.unit());
        tokio::time::sleep_until(wake.min(end)).await;
    }
    log
}

/// One table row.
struct Row {
    name: String,
    busy_ms: Option<u64>,
    acquisitions: usize,
    per_second: f64,
    gap_ms: [f64; 2],
    /// Acquisitions by the previous hold's own contender.
    repeats: usize,
    latency_ms: [f64; 2],
    counts: [u64; 5],
    errors: u64,
    gave_up: u64,
    waits_timed_out: u64,
    starved: usize,
    overlaps: usize,
    messages: BTreeMap<String, u64>,
}

/// `b - a` in milliseconds, negative when `b` is earlier.
fn ms_between(a: Instant, b: Instant) -> f64 {
    match b.checked_duration_since(a) {
        Some(d) => d.as_secs_f64() * 1e3,
        None => -(a - b).as_secs_f64() * 1e3,
    }
}

/// The p50 and p90 of `values` (nearest rank); NaN when empty.
fn p50_p90(mut values: Vec<f64>) -> [f64; 2] {
    values.sort_by(f64::total_cmp);
    [0.5, 0.9].map(|q| match values.len() {
        0 => f64::NAN,
        n => values[((q * n as f64).ceil() as usize).clamp(1, n) - 1],
    })
}

/// Runs one configuration on a fresh serialised moto.
fn run_config(
    rt: &tokio::runtime::Runtime,
    args: &Args,
    kind: Kind,
    busy_ms: Option<u64>,
    seed: u64,
) -> Result<Row, String> {
    let moto = Moto::start(MotoOptions {
        serialized: true,
        auth: false,
    })?;
    moto.create_bucket(BUCKET)?;
    let counts = Arc::new(Counts::default());
    let lockers = (0..args.contenders)
        .map(|i| Locker::new(kind, &moto.endpoint(), format!("c{i}"), &counts))
        .collect::<Result<Vec<_>, _>>()?;
    let busy = busy_ms.map(Duration::from_millis);
    let logs = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(args.seconds);
        let tasks: Vec<_> = (lockers.into_iter().enumerate())
            .map(|(i, locker)| {
                let rng = Entropy::from_seed(u128::from(seed) << 32 | i as u128);
                tokio::spawn(contend(i, locker, busy, args.hold, deadline, rng))
            })
            .collect();
        let mut logs = Vec::new();
        for task in tasks {
            logs.push(
                task.await
                    .map_err(|e| format!("a contender panicked: {e}"))?,
            );
        }
        Ok::<_, String>(logs)
    })?;
    drop(moto);

    let starved = logs.iter().filter(|l| l.holds.is_empty()).count();
    let mut holds = Vec::new();
    let mut latencies = Vec::new();
    let mut messages = BTreeMap::new();
    let (mut errors, mut gave_up, mut waits_timed_out) = (0, 0, 0);
    for log in logs {
        holds.extend(log.holds);
        latencies.extend(log.latencies.iter().map(|d| d.as_secs_f64() * 1e3));
        errors += log.errors;
        gave_up += log.gave_up;
        waits_timed_out += log.waits_timed_out;
        for (message, n) in log.messages {
            *messages.entry(message).or_default() += n;
        }
    }
    holds.sort_by_key(|h| h.acquired);
    let mut overlaps = 0;
    let mut max_end: Option<Instant> = None;
    for hold in &holds {
        if max_end.is_some_and(|end| hold.acquired < end) {
            overlaps += 1;
        }
        max_end = max_end.max(Some(hold.release_started));
    }
    let repeats = (holds.windows(2))
        .filter(|w| w[0].contender == w[1].contender)
        .count();
    let gaps = holds
        .windows(2)
        .map(|w| ms_between(w[0].released, w[1].acquired))
        .collect();
    let name = match kind {
        Kind::Baseline => "baseline (aws-sdk-s3)".to_string(),
        Kind::BusyLoop(p) => format!("{p}, busy loop"),
        Kind::BuiltIn(p) => format!("{p}, built-in wait"),
        Kind::Fair(p) => format!("{p}, fair wait"),
    };
    Ok(Row {
        name,
        busy_ms,
        acquisitions: holds.len(),
        per_second: holds.len() as f64 / args.seconds as f64,
        gap_ms: p50_p90(gaps),
        repeats,
        latency_ms: p50_p90(latencies),
        counts: counts.snapshot(),
        errors,
        gave_up,
        waits_timed_out,
        starved,
        overlaps,
        messages,
    })
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| configuration | busy wait | acq/s | same holder again | handoff p50 / p90 (ms) | acquire p50 / p90 (ms) \
         | req/acq | GET | PUT (412) | LIST | DELETE | $ per M acq | errors (GaveUp) \
         | waits timed out | starved | overlaps |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let per = |n: u64| n as f64 / r.acquisitions.max(1) as f64;
        let [get, put, refused, list, delete] = r.counts;
        let cost = 1e6 * (per(put + list) * PRICE_WRITE + per(get) * PRICE_GET);
        let busy = r.busy_ms.map_or("-".into(), |ms| format!("{ms} ms"));
        let _ = writeln!(
            out,
            "| {} | {busy} | {:.2} | {:.0}% | {:.0} / {:.0} | {:.0} / {:.0} | {:.2} | {:.2} | {:.2} ({:.2}) \
             | {:.2} | {:.2} | {cost:.2} | {} ({}) | {} | {} | {} |",
            r.name,
            r.per_second,
            100.0 * per(r.repeats as u64),
            r.gap_ms[0],
            r.gap_ms[1],
            r.latency_ms[0],
            r.latency_ms[1],
            per(get + put + list + delete),
            per(get),
            per(put),
            per(refused),
            per(list),
            per(delete),
            r.errors,
            r.gave_up,
            r.waits_timed_out,
            r.starved,
            r.overlaps,
        );
    }
    for r in rows.iter().filter(|r| !r.messages.is_empty()) {
        let busy = r.busy_ms.map_or(String::new(), |ms| format!(", {ms} ms"));
        let _ = writeln!(out, "\nErrors of {}{busy} (most frequent first):", r.name);
        let mut messages: Vec<_> = r.messages.iter().collect();
        messages.sort_by(|a, b| b.1.cmp(a.1));
        for (message, n) in messages.into_iter().take(5) {
            let _ = writeln!(out, "- {n} × {message}");
        }
    }
    out
}

/// moto's version in the venv the harness starts it from.
fn moto_version() -> String {
    let script = "import importlib.metadata as m; print(m.version('moto'))";
    venv_dir()
        .ok()
        .and_then(|venv| {
            std::process::Command::new(venv.join("bin/python"))
                .args(["-c", script])
                .output()
                .ok()
        })
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("bench-contention: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let mut report = format!(
        "# Contention on one lease key\n\n\
         {} contenders (tokio tasks, one client each) on `{KEY}`, {} s per configuration, \
         hold {} ms, busy waits {:?} ms (uniform in [0.5, 1.5] x), built-in wait budget {} s, \
         ttl {} s, probe off; serialised moto {} (one request at a time, HTTP/1.0), \
         a fresh one per configuration; seed {}; {}.\n\n",
        args.contenders,
        args.seconds,
        args.hold.as_millis(),
        args.busy_ms,
        WAIT_BUDGET.as_secs(),
        TTL.as_secs(),
        moto_version(),
        args.seed,
        UnixMillis(now_ms.as_millis() as u64).to_http_date(),
    );
    print!("{report}");
    let mut plan: Vec<(Kind, Option<u64>)> = Vec::new();
    for &busy in &args.busy_ms {
        plan.push((Kind::Baseline, Some(busy)));
        plan.extend(Protocol::ALL.map(|p| (Kind::BusyLoop(p), Some(busy))));
    }
    plan.extend(Protocol::ALL.map(|p| (Kind::BuiltIn(p), None)));
    // Fair waiting needs the record a release leaves: not the mutex.
    plan.extend([Protocol::Cas, Protocol::Epochs].map(|p| (Kind::Fair(p), None)));
    let mut rows = Vec::new();
    let total = plan.len();
    for (n, (kind, busy)) in plan.into_iter().enumerate() {
        let row = run_config(&rt, &args, kind, busy, args.seed.wrapping_add(n as u64))?;
        eprintln!(
            "[{}/{total}] {}{}: {} acquisitions, {} errors, {} overlaps",
            n + 1,
            row.name,
            busy.map_or(String::new(), |ms| format!(" ({ms} ms)")),
            row.acquisitions,
            row.errors,
            row.overlaps
        );
        rows.push(row);
    }
    let overlaps: usize = rows.iter().map(|r| r.overlaps).sum();
    let table = table(&rows);
    println!("{table}");
    report.push_str(&table);
    report.push_str(
        "\nreq/acq and the kinds: requests per acquisition (all requests of the run, \
         busy reads and refused writes included); `$ per M acq`: their price per million \
         acquisitions at S3 Standard list prices (PUT, LIST $0.005 per 1,000; GET $0.0004; \
         DELETE free). Handoff: a release's return to the next acquisition's return. \
         Acquire: a contender's first attempt to success (contenders that never won add none).\n",
    );
    if let Some(dir) = std::path::Path::new(&args.report).parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(&args.report, &report).map_err(|e| format!("{}: {e}", args.report))?;
    println!("report written to {}", args.report);
    if overlaps > 0 {
        eprintln!("bench-contention: {overlaps} overlapping holds: two holders at once");
        std::process::exit(1);
    }
    Ok(())
}
