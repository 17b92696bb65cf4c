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
//! `--configs` runs only some of them: names separated by commas or spaces,
//! `baseline`, `<protocol>-busy` (the busy loop), `<protocol>-wait` (the
//! built-in wait) and `<protocol>-fair` (cas and epochs), or `all` (the
//! default); e.g. `--configs cas-wait,cas-fair,epochs-wait,epochs-fair`.
//! `baseline` and the busy loops run once per `--busy-ms`, in the usual
//! order.
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
//!
//! Fairness by handoffs: for every acquisition, the handoffs it waited are
//! the acquisitions by other contenders that returned after its contender
//! began waiting (as for the acquire latency) and before its own returned;
//! given as p50, p90 and max over the acquisitions. Under strict turns
//! every acquisition past the first round waits N - 1; an unfair lock shows
//! as many 0s (the releaser took it back) and a long tail. A wait still
//! open at the deadline has no acquisition, so it is counted apart: how
//! many there were and the most handoffs one of them had seen. "Back to
//! the releaser" is the share of handoffs (acquisitions after the first)
//! that went to the previous holder: the same events as "same holder
//! again", which divides by all acquisitions.

use aws_sdk_s3::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_s3::config::{
    BehaviorVersion, ConfigBag, Credentials, Intercept, Region, RuntimeComponents,
};
use aws_sdk_s3::error::{BoxError, DisplayErrorContext};
use aws_sdk_s3::primitives::ByteStream;
use lease_core::{AcquireOutcome, Entropy, Lease, LeaseError, Leases, Protocol, ReleaseOutcome, Settings, Store, StoreOp, StoreReply, UnixMillis};
use lease_core::store::ReplyKind;
use lease_native::clock::SystemClock;
use lease_native::settings::{ReqwestStore, StoreSettings};
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
    /// The configurations to run, by short name (see [`Kind::short_name`]).
    configs: Vec<String>,
}

/// Every configuration's short name, in the order they run (`--configs`).
fn all_config_names() -> Vec<String> {
    plan_kinds().into_iter().map(Kind::short_name).collect()
}

/// Every configuration, in the order they run (the busy-wait ones repeat
/// per busy wait).
fn plan_kinds() -> Vec<Kind> {
    let mut kinds = vec![Kind::Baseline];
    kinds.extend(Protocol::ALL.map(Kind::BusyLoop));
    kinds.extend(Protocol::ALL.map(Kind::BuiltIn));
    // Fair waiting needs the record a release leaves: not the mutex.
    kinds.extend([Protocol::Cas, Protocol::Epochs].map(Kind::Fair));
    kinds
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        contenders: 100,
        seconds: 60,
        hold: Duration::from_millis(200),
        busy_ms: vec![100, 1000],
        seed: lease_native::os_entropy().next_u64() >> 16,
        report: "target/bench-contention/report.md".into(),
        configs: all_config_names(),
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
            "--configs" => {
                let known = all_config_names();
                let mut configs = Vec::new();
                for name in value.split([' ', ',']).filter(|s| !s.is_empty()) {
                    if name == "all" {
                        configs.extend(known.iter().cloned());
                    } else if known.iter().any(|k| k == name) {
                        configs.push(name.to_string());
                    } else {
                        return Err(format!(
                            "--configs: unknown configuration {name:?} (known: all, {})",
                            known.join(", ")
                        ));
                    }
                }
                if configs.is_empty() {
                    return Err("--configs names no configuration".into());
                }
                args.configs = configs;
            }
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
    inner: ReqwestStore,
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

impl Kind {
    /// The name `--configs` takes: `baseline`, `cas-busy`, `cas-wait`,
    /// `cas-fair`, ...
    fn short_name(self) -> String {
        match self {
            Kind::Baseline => "baseline".into(),
            Kind::BusyLoop(p) => format!("{p}-busy"),
            Kind::BuiltIn(p) => format!("{p}-wait"),
            Kind::Fair(p) => format!("{p}-fair"),
        }
    }

    /// Whether it sleeps a busy wait between attempts (runs once per
    /// `--busy-ms`).
    fn busy_waits(self) -> bool {
        matches!(self, Kind::Baseline | Kind::BusyLoop(_))
    }
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
    /// The contender's first attempt after its previous release, or its
    /// start.
    waiting_since: Instant,
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
    /// The start of a wait still open at the deadline.
    open_wait: Option<Instant>,
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
                    waiting_since: started,
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
    log.open_wait = trying_since;
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
    /// Handoffs waited per acquisition: p50, p90.
    handoffs_waited: [f64; 2],
    handoffs_waited_max: usize,
    /// Waits open at the deadline, and the most handoffs one had seen.
    open_waits: usize,
    open_wait_max: usize,
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
    let open_waits: Vec<Instant> = logs.iter().filter_map(|l| l.open_wait).collect();
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
    // Handoffs waited: acquisitions returned in (waiting since, acquired).
    // The contender's own earlier ones returned before its release, so
    // before its wait began.
    let acquired: Vec<Instant> = holds.iter().map(|h| h.acquired).collect();
    let after = |t: Instant| acquired.len() - acquired.partition_point(|&a| a <= t);
    let waited: Vec<usize> = holds
        .iter()
        .map(|h| (after(h.waiting_since) - after(h.acquired)).saturating_sub(1))
        .collect();
    let handoffs_waited_max = waited.iter().copied().max().unwrap_or(0);
    let handoffs_waited = p50_p90(waited.iter().map(|&n| n as f64).collect());
    let open_wait_max = open_waits.iter().map(|&t| after(t)).max().unwrap_or(0);
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
        handoffs_waited,
        handoffs_waited_max,
        open_waits: open_waits.len(),
        open_wait_max,
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
        "| configuration | busy wait | acq/s | same holder again | back to the releaser \
         | handoffs waited p50 / p90 / max | open waits (max handoffs) \
         | handoff p50 / p90 (ms) | acquire p50 / p90 (ms) \
         | req/acq | GET | PUT (412) | LIST | DELETE | $ per M acq | errors (GaveUp) \
         | waits timed out | starved | overlaps |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let per = |n: u64| n as f64 / r.acquisitions.max(1) as f64;
        let [get, put, refused, list, delete] = r.counts;
        let cost = 1e6 * (per(put + list) * PRICE_WRITE + per(get) * PRICE_GET);
        let busy = r.busy_ms.map_or("-".into(), |ms| format!("{ms} ms"));
        let handoffs = r.acquisitions.saturating_sub(1);
        let back = 100.0 * r.repeats as f64 / handoffs.max(1) as f64;
        let _ = writeln!(
            out,
            "| {} | {busy} | {:.2} | {:.0}% | {back:.0}% ({} of {handoffs}) | {:.0} / {:.0} / {} | {} ({}) \
             | {:.0} / {:.0} | {:.0} / {:.0} | {:.2} | {:.2} | {:.2} ({:.2}) \
             | {:.2} | {:.2} | {cost:.2} | {} ({}) | {} | {} | {} |",
            r.name,
            r.per_second,
            100.0 * per(r.repeats as u64),
            r.repeats,
            r.handoffs_waited[0],
            r.handoffs_waited[1],
            r.handoffs_waited_max,
            r.open_waits,
            r.open_wait_max,
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
         a fresh one per configuration; seed {}; {}. Configurations: {}.\n\n",
        args.contenders,
        args.seconds,
        args.hold.as_millis(),
        args.busy_ms,
        WAIT_BUDGET.as_secs(),
        TTL.as_secs(),
        moto_version(),
        args.seed,
        UnixMillis(now_ms.as_millis() as u64).to_http_date(),
        if args.configs == all_config_names() {
            "all".to_string()
        } else {
            args.configs.join(", ")
        },
    );
    print!("{report}");
    let chosen = |kind: Kind| args.configs.contains(&kind.short_name());
    let mut plan: Vec<(Kind, Option<u64>)> = Vec::new();
    for &busy in &args.busy_ms {
        let busy_kinds = plan_kinds().into_iter().filter(|&k| k.busy_waits());
        plan.extend(busy_kinds.filter(|&k| chosen(k)).map(|k| (k, Some(busy))));
    }
    let waiting_kinds = plan_kinds().into_iter().filter(|&k| !k.busy_waits());
    plan.extend(waiting_kinds.filter(|&k| chosen(k)).map(|k| (k, None)));
    let mut rows = Vec::new();
    let total = plan.len();
    for (n, (kind, busy)) in plan.into_iter().enumerate() {
        let row = run_config(&rt, &args, kind, busy, args.seed.wrapping_add(n as u64))?;
        eprintln!(
            "[{}/{total}] {}{}: {} acquisitions, {} errors, {} overlaps, \
             handoffs waited p90 {} max {}, {} back to the releaser",
            n + 1,
            row.name,
            busy.map_or(String::new(), |ms| format!(" ({ms} ms)")),
            row.acquisitions,
            row.errors,
            row.overlaps,
            row.handoffs_waited[1],
            row.handoffs_waited_max,
            row.repeats,
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
         Acquire: a contender's first attempt to success (contenders that never won add none). \
         Handoffs waited: per acquisition, the acquisitions by others between its contender's \
         first attempt and its success (strict turns: N - 1 past the first round). Open waits: \
         waits unfinished at the deadline, and the most handoffs one of them had seen. Back to \
         the releaser: handoffs (acquisitions after the first) won by the previous holder, the \
         same events as \"same holder again\", which divides by all acquisitions.\n",
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
