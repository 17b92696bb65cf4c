//! The store conformance lifecycle: what a store must do for the leases,
//! written once and run unchanged against every store the tests start.
//!
//! [`lifecycle`] takes a [`Subject`] (a store, the clock the clients run
//! on, the same store on a bucket that does not exist) and drives the
//! core's client ([`Leases`]) through the steps below for one protocol.
//! Every step judges by what the store holds, read back with plain GETs
//! and LISTs (the object at the key, or the newest epoch), not only by what
//! the client said. The first step that does not hold ends the run with a
//! [`Failure`] naming it; a run that passes returns a [`Report`] of what
//! each step saw. The lease-tests crate runs it on the in-memory store,
//! moto, Azurite and the GCS stand-in (`tests/tests/conformance.rs`), and
//! the conformance Worker runs it inside workerd on its R2 binding.
//!
//! | step | what is done | what must hold (on the store) |
//! |---|---|---|
//! | `probe` | the capability probe | it passes every check the protocol needs |
//! | `concurrent` | [`BUCKET_RACERS`] creates of one scratch key at once, then as many replaces of the winner's version at once, [`BUCKET_ROUNDS`] rounds (what `lease probe` runs) | exactly one winner in every race, the others refused (or, on a store that spaces writes to an object, throttled); a run with a write of no clear answer is made again, once |
//! | `acquire` | a acquires | a's record (holder, session, token, etag), live |
//! | `busy` | b acquires; a's object read with `If-None-Match` on its etag, then on another | `Busy` naming a and a's token; a's version untouched; the first read 304 (in full where [`Options::not_modified`] is off: GCS), the second a's version |
//! | `renew` | a renews (mutex: refused, it has no renewal) | a new version of a's record, expiry not earlier |
//! | `fenced_write` | a writes the protected object with its token, then with a stale one | a's write carries a's token; the stale one is refused and changes nothing |
//! | `release` | a releases | no live record (released, or gone) |
//! | `takeover` | b acquires; b writes the protected object; a, stale, writes again | b's record, token above a's (protocols that fence); a's late write refused, b's data kept |
//! | `inspect` | an operator reads the lease | holder b, b's token and the stored etag |
//! | `break` | the operator breaks it by that etag; c acquires | no live record after the break; then c's record |
//! | `stale_holder` | b renews and releases its broken lease | lost, already lost: c's version untouched (a store that ignores `If-Match` fails here) |
//! | `release_by_etag` | another process releases c's lease knowing only the key and etag; again | released, no live record; the second is refused (not held) |
//! | `expiry` | d acquires with a short ttl and stops; e polls | e gets it no earlier than the ttl less the store's date resolution, within 3 ttl, with a greater token |
//! | `pool` | a and b run in a pool of 2 seats at `<key>.pool` (`Run::pool`), each job waiting for the other; meanwhile c runs in it; then c runs again | while both run, the seats hold a's and b's records, live, at their jobs' tokens; c's first run `Skipped` by one of them, its job not run, no seat's version changed; a and b `Ran` in different seats, which hold no live lease after; c's second run in a freed seat, token above that seat's last (protocols that fence) |
//! | `session_own` | (cas only, from here to `session_close`) a opens a session at `<key>.session` (its campaign run beside the steps) and owns `<key>.owned-1` and `-2` | the session's record a's, live, at the term's token; each key's record owned by (`owned_by`) the session's key and that token, with the key's token (> 0) |
//! | `session_busy` | b acquires an owned key (a plain acquire) | `Busy` naming a and the key's token; the key's version untouched |
//! | `session_fence` | a writes a protected object through the owned key; a write with the token below | a's write carries the key's token; the other refused, nothing changed |
//! | `session_break` | the operator breaks the session as the `break` step does; b acquires the owned key; b writes; a writes through the key (if it does not know yet) and a write with a's token is sent | the session's record released; b's record, a lease of its own, token above a's, at once (no ttl waited); a's writes refused, b's kept; then a's term ends (`lost`) and a owns nothing |
//! | `session_handoff` | a's next term owns `<key>.owned-3` and hands it over to b (`Session::hand_over`); c acquires it; b acquires it | the key's record released at a's token, naming b (`handoff_to`); c `Busy`, naming b as the successor, the key's version untouched; b's record, a lease of its own, token above a's, at once |
//! | `session_close` | a's next term owns the other key (owned under the broken term); a closes the session; b acquires that key | the key's record names the new term, token above the old owner's; the campaign's release of the session lands (`Released`), its record released; b takes the key at once, token above a's |
//! | `cleanup` | list the probes' scratch prefix | nothing left under `<key>.probe/` but the verdict the fleet shares (`verdict.json`) |
//! | `missing_bucket` | acquire on a bucket that does not exist (stores with buckets) | `NoSuchBucket` after at most 2 calls: no retry |
//!
//! A protocol the store cannot carry ([`Expect::Refused`], as `mutex` on
//! the R2 binding, which has no conditional DELETE) runs `probe` (it must
//! refuse the protocol) and `refused` (a client's acquire fails with
//! `UnsafeStore` and writes nothing at the key) instead.
//!
//! Tokens are compared with `>` only where the protocol fences
//! ([`Protocol::fences`]): the mutex's tokens are the store's clock.
//!
//! Sessions need the cas protocol (`docs/protocols.md`, "Sessions"): the
//! session steps run for it alone. The session's campaign renews every
//! third of [`Options::expiry_ttl`] (a ttl of [`Options::ttl`]), so that
//! it learns of the break within a few seconds and nothing waits a ttl.
//! A campaign owns what it runs on: the subject's store is shared
//! ([`Subject::store`] is an `Rc`).
//!
//! ```
//! use lease_conformance::{lifecycle, Expect, Options, Subject};
//! use lease_core::Protocol;
//! use lease_core::Entropy;
//! use lease_core::{MemStore, VirtualClock};
//! use lease_core::UnixMillis;
//! use std::rc::Rc;
//!
//! fn entropy() -> Entropy {
//!     use std::sync::atomic::{AtomicU64, Ordering};
//!     static NEXT: AtomicU64 = AtomicU64::new(1);
//!     Entropy::from_seed(NEXT.fetch_add(1, Ordering::Relaxed).into())
//! }
//!
//! let clock = VirtualClock::new(UnixMillis(1_790_000_000_000));
//! let subject = Subject {
//!     name: "memory".into(),
//!     store: Rc::new(MemStore::new(clock.clone())),
//!     clock,
//!     entropy,
//!     missing_bucket: None,
//! };
//! let options = Options::virtual_time();
//! for protocol in Protocol::ALL {
//!     let report = pollster::block_on(lifecycle(&subject, protocol, Expect::Supported, &options));
//!     assert!(report.is_ok(), "{}", report.unwrap_err());
//! }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use lease_core::protocol::verdict_key;
use lease_core::protocol::{BUCKET_RACERS, BUCKET_ROUNDS};
use lease_core::record::parse_epoch_key;
use lease_core::store::ReplyKind;
use lease_core::{
    AcquireOutcome, BreakOutcome, ByEtagError, Clock, Entropy, Etag, FenceOutcome, Fenced, Lease,
    LeaseError, LeaseRecord, Leases, Mono, ProbeReport, Protocol, ReleaseOutcome, RenewOutcome,
    Settings, Store, StoreOp, StoreReply,
};
use serde_json::{json, Value};
use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// A store under test.
pub struct Subject<S, C> {
    /// The store's name in reports ("moto", "R2 binding in workerd").
    pub name: String,
    /// The store, as the adapters build it; shared, as a session's
    /// campaign (the session steps) owns what it runs on.
    pub store: Rc<S>,
    /// The clock the clients run on (the one the adapter uses with this
    /// store, or a virtual clock the store dates its replies by).
    pub clock: C,
    /// Fresh randomness for each operation.
    pub entropy: fn() -> Entropy,
    /// The same store for a bucket that does not exist; `None` where there
    /// is no bucket to name (the in-memory store, an R2 binding).
    pub missing_bucket: Option<S>,
}

/// Whether the store must carry a protocol or refuse it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The probe passes the protocol and the whole lifecycle holds.
    Supported,
    /// The probe refuses the protocol and no lease is written.
    Refused,
}

/// How the lifecycle runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Whether the clients run the capability probe before their first
    /// acquire, as they do by default. Off only to show that a store that
    /// ignores conditions is then caught by the steps themselves.
    pub probe: bool,
    /// The ttl of every lease but the one left to expire: long enough that
    /// no step outlasts it.
    pub ttl: Duration,
    /// The ttl of the lease the `expiry` step waits out.
    pub expiry_ttl: Duration,
    /// How often the `expiry` step's contender asks again.
    pub poll: Duration,
    /// The leases' keys are `<prefix>/<protocol>`.
    pub prefix: String,
    /// Whether the store answers a read with `If-None-Match` on the
    /// current etag 304 ([`ReplyKind::NotModified`]); otherwise it must
    /// answer it in full (GCS, whose versions are generations).
    pub not_modified: bool,
}

impl Options {
    /// For a real store on the system clock: the expiry step waits 3 s.
    pub fn real_time() -> Options {
        Options {
            probe: true,
            ttl: Duration::from_secs(30),
            expiry_ttl: Duration::from_secs(3),
            poll: Duration::from_millis(250),
            prefix: "conformance".into(),
            not_modified: true,
        }
    }

    /// For a store on a virtual clock, where waiting costs nothing: every
    /// ttl 30 s (a GCS stand-in needs more than 3 s: writes 1 s apart).
    pub fn virtual_time() -> Options {
        Options {
            expiry_ttl: Duration::from_secs(30),
            poll: Duration::from_secs(1),
            ..Options::real_time()
        }
    }
}

/// A step of the lifecycle (see the crate docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The capability probe.
    Probe,
    /// Concurrent creates and replaces of one key: one winner each.
    Concurrent,
    /// a acquires a free key.
    Acquire,
    /// b is refused while a holds it.
    Busy,
    /// a renews (or is refused, for a protocol with no renewal).
    Renew,
    /// Writes to the protected object with a's token and a stale one.
    FencedWrite,
    /// a releases.
    Release,
    /// b takes the released lease; a's late write is refused.
    Takeover,
    /// An operator reads the lease.
    Inspect,
    /// The operator breaks b's lease; c acquires.
    Break,
    /// b, broken, renews and releases: nothing changes.
    StaleHolder,
    /// c's lease released by key and etag only.
    ReleaseByEtag,
    /// A lease left to expire is taken over after its ttl.
    Expiry,
    /// The probes left nothing behind.
    Cleanup,
    /// A bucket that does not exist.
    MissingBucket,
    /// A protocol the store cannot carry is refused.
    Refused,
    /// Two runs hold both seats of a pool at once; a third is skipped.
    Pool,
    /// (cas) a's session owns two keys.
    SessionOwn,
    /// (cas) b is refused an owned key.
    SessionBusy,
    /// (cas) a fenced write through an owned key.
    SessionFence,
    /// (cas) the operator breaks the session: b takes an owned key.
    SessionBreak,
    /// (cas) a hands an owned key to b: busy to c, b's at once.
    SessionHandoff,
    /// (cas) a closes its session: b takes an owned key.
    SessionClose,
}

impl Step {
    /// The step's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Step::Probe => "probe",
            Step::Concurrent => "concurrent",
            Step::Acquire => "acquire",
            Step::Busy => "busy",
            Step::Renew => "renew",
            Step::FencedWrite => "fenced_write",
            Step::Release => "release",
            Step::Takeover => "takeover",
            Step::Inspect => "inspect",
            Step::Break => "break",
            Step::StaleHolder => "stale_holder",
            Step::ReleaseByEtag => "release_by_etag",
            Step::Expiry => "expiry",
            Step::Cleanup => "cleanup",
            Step::MissingBucket => "missing_bucket",
            Step::Refused => "refused",
            Step::Pool => "pool",
            Step::SessionOwn => "session_own",
            Step::SessionBusy => "session_busy",
            Step::SessionFence => "session_fence",
            Step::SessionBreak => "session_break",
            Step::SessionHandoff => "session_handoff",
            Step::SessionClose => "session_close",
        }
    }

    /// The steps a passing run of `protocol` reports, in order: for
    /// `expect`, on a store with (`buckets`) or without a bucket to miss.
    pub fn expected(protocol: Protocol, expect: Expect, buckets: bool) -> Vec<Step> {
        let mut steps = match expect {
            Expect::Supported => vec![
                Step::Probe,
                Step::Concurrent,
                Step::Acquire,
                Step::Busy,
                Step::Renew,
                Step::FencedWrite,
                Step::Release,
                Step::Takeover,
                Step::Inspect,
                Step::Break,
                Step::StaleHolder,
                Step::ReleaseByEtag,
                Step::Expiry,
                Step::Pool,
                Step::Cleanup,
            ],
            Expect::Refused => vec![Step::Probe, Step::Refused, Step::Cleanup],
        };
        if expect == Expect::Supported && protocol == Protocol::Cas {
            let cleanup = steps.len() - 1;
            steps.splice(
                cleanup..cleanup,
                [
                    Step::SessionOwn,
                    Step::SessionBusy,
                    Step::SessionFence,
                    Step::SessionBreak,
                    Step::SessionHandoff,
                    Step::SessionClose,
                ],
            );
        }
        if buckets {
            steps.push(Step::MissingBucket);
        }
        steps
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A run that passed: what each step saw.
#[derive(Clone, Debug)]
pub struct Report {
    /// The store.
    pub store: String,
    /// The protocol.
    pub protocol: Protocol,
    /// Each step and what it saw, in order.
    pub steps: Vec<(Step, String)>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (step, detail) in &self.steps {
            writeln!(f, "{} {}: {step}: {detail}", self.store, self.protocol)?;
        }
        Ok(())
    }
}

/// A run that failed: the step that did not hold, and those before it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The store.
    pub store: String,
    /// The protocol.
    pub protocol: Protocol,
    /// The step that did not hold.
    pub step: Step,
    /// What the store or the client did instead.
    pub detail: String,
    /// The steps that held before it.
    pub passed: Vec<(Step, String)>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: step `{}` failed: {}",
            self.store, self.protocol, self.step, self.detail
        )?;
        for (step, detail) in &self.passed {
            write!(f, "\n  passed {step}: {detail}")?;
        }
        Ok(())
    }
}

/// The names of the checks `report` failed, in its order.
pub fn failed_checks(report: &ProbeReport) -> Vec<&'static str> {
    report
        .results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.check.name())
        .collect()
}

/// A run's result as JSON (the conformance Worker answers with it):
/// `{"store", "protocol", "passed", "steps": [{"step", "detail"}],
/// "failed": {"step", "detail"} | null}`.
pub fn verdict_json(result: &Result<Report, Failure>) -> Value {
    let steps = |steps: &[(Step, String)]| -> Vec<Value> {
        steps
            .iter()
            .map(|(step, detail)| json!({"step": step.name(), "detail": detail}))
            .collect()
    };
    match result {
        Ok(report) => json!({
            "store": report.store,
            "protocol": report.protocol.name(),
            "passed": true,
            "steps": steps(&report.steps),
            "failed": null,
        }),
        Err(failure) => json!({
            "store": failure.store,
            "protocol": failure.protocol.name(),
            "passed": false,
            "steps": steps(&failure.passed),
            "failed": {"step": failure.step.name(), "detail": failure.detail},
        }),
    }
}

/// Runs the lifecycle of `protocol` on `subject` (see the crate docs).
pub async fn lifecycle<S: Store + 'static, C: Clock + Clone + 'static>(
    subject: &Subject<S, C>,
    protocol: Protocol,
    expect: Expect,
    options: &Options,
) -> Result<Report, Failure> {
    let key = format!("{}/{}", options.prefix, protocol.name());
    let mut run = Run {
        subject,
        protocol,
        options,
        target: format!("{key}.fenced"),
        key,
        steps: Vec::new(),
    };
    let result = match expect {
        Expect::Supported => run.supported().await,
        Expect::Refused => run.refused().await,
    };
    let result = match result {
        Ok(()) if expect == Expect::Supported => Box::pin(run.pool()).await,
        other => other,
    };
    let result = match result {
        Ok(()) if expect == Expect::Supported && protocol == Protocol::Cas => run.sessions().await,
        other => other,
    };
    let result = match result {
        Ok(()) => run.cleanup().await,
        Err(e) => Err(e),
    };
    let result = match result {
        Ok(()) => run.missing_bucket().await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => Ok(Report {
            store: subject.name.clone(),
            protocol,
            steps: run.steps,
        }),
        Err((step, detail)) => Err(Failure {
            store: subject.name.clone(),
            protocol,
            step,
            detail,
            passed: run.steps,
        }),
    }
}

/// A step that did not hold, and what happened instead.
type Fail = (Step, String);

macro_rules! ensure {
    ($cond:expr, $step:expr, $($why:tt)+) => {
        if !$cond {
            return Err(($step, format!($($why)+)));
        }
    };
}

mod pools;
mod sessions;

/// One record, for messages.
fn describe(etag: &Etag, record: &LeaseRecord) -> String {
    format!(
        "holder {:?} token {} session {:?}{} (etag {})",
        record.holder,
        record.token,
        record.acquisition,
        if record.released { ", released" } else { "" },
        etag.as_str()
    )
}

/// A store that counts the calls made to it.
struct Counted<'s, S> {
    inner: &'s S,
    calls: Cell<u32>,
}

impl<S: Store> Store for Counted<'_, S> {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        self.calls.set(self.calls.get() + 1);
        self.inner.call(op)
    }

    fn min_write_interval(&self) -> Duration {
        self.inner.min_write_interval()
    }
}

struct Run<'s, S, C> {
    subject: &'s Subject<S, C>,
    protocol: Protocol,
    options: &'s Options,
    key: String,
    /// The protected object of the fenced writes.
    target: String,
    steps: Vec<(Step, String)>,
}

impl<'s, S: Store + 'static, C: Clock + Clone + 'static> Run<'s, S, C> {
    fn passed(&mut self, step: Step, detail: String) {
        self.steps.push((step, detail));
    }

    /// A client of the store named `holder`, with the lifecycle's protocol.
    fn client(
        &self,
        holder: &str,
        ttl: Duration,
        step: Step,
    ) -> Result<Leases<&'s S, &'s C>, Fail> {
        let settings = Settings::new(holder)
            .ttl(ttl)
            .protocol(self.protocol)
            .probe(self.options.probe);
        Leases::new(
            &*self.subject.store,
            &self.subject.clock,
            settings,
            self.subject.entropy,
        )
        .map_err(|e| (step, format!("the settings of {holder}: {e}")))
    }

    fn now(&self) -> Mono {
        self.subject.clock.now().mono
    }

    async fn sleep(&self, d: Duration) {
        let until = Mono(self.now().0 + d.as_millis() as u64);
        self.subject.clock.sleep_until(until).await;
    }

    /// The object at `key` as the store holds it.
    async fn object(&self, key: &str, step: Step) -> Result<Option<(Etag, Vec<u8>)>, Fail> {
        let get = StoreOp::Get { key: key.into() };
        match self.subject.store.call(get).await.kind {
            ReplyKind::Found { etag, body } => Ok(Some((etag, body))),
            ReplyKind::Missing => Ok(None),
            other => Err((step, format!("reading {key} back: {other:?}"))),
        }
    }

    /// Reads a's object with `If-None-Match` on its etag (what a waiting
    /// contender's re-read sends): unchanged, so 304 where the store
    /// answers so, else the same version in full; then on another etag:
    /// the version in full.
    async fn reread(&self, la: &Lease) -> Result<String, Fail> {
        let ask = |etag: Etag| StoreOp::GetIfNoneMatch {
            key: la.key.clone(),
            etag,
        };
        let unchanged = self.subject.store.call(ask(la.etag.clone())).await.kind;
        let said = match unchanged {
            ReplyKind::NotModified => "a re-read naming a's etag is answered 304",
            ReplyKind::Found { etag, .. } if etag == la.etag && !self.options.not_modified => {
                "a re-read naming a's etag is answered in full"
            }
            other => {
                return Err((
                    Step::Busy,
                    format!("a re-read naming a's etag (unchanged): {other:?}"),
                ))
            }
        };
        match self.subject.store.call(ask(Etag::new("1"))).await.kind {
            ReplyKind::Found { etag, .. } if etag == la.etag => {
                Ok(format!("{said}, one naming another etag with a's version"))
            }
            other => Err((
                Step::Busy,
                format!("a re-read naming another etag: {other:?}"),
            )),
        }
    }

    /// Every key under `prefix`, all pages.
    async fn list(&self, prefix: &str, step: Step) -> Result<Vec<String>, Fail> {
        let mut keys = Vec::new();
        let mut continuation = None;
        for _ in 0..1000 {
            let list = StoreOp::List {
                prefix: prefix.into(),
                continuation: continuation.take(),
                max_keys: None,
            };
            match self.subject.store.call(list).await.kind {
                ReplyKind::Listed { entries, next } => {
                    keys.extend(entries.into_iter().map(|e| e.key));
                    match next {
                        Some(token) => continuation = Some(token),
                        None => return Ok(keys),
                    }
                }
                other => return Err((step, format!("listing {prefix}: {other:?}"))),
            }
        }
        Err((step, format!("listing {prefix}: more than 1000 pages")))
    }

    /// The lease record the store holds and its etag: the object at the
    /// key (cas, mutex) or the newest epoch (epochs).
    async fn stored(&self, step: Step) -> Result<Option<(Etag, LeaseRecord)>, Fail> {
        self.stored_at(&self.key, step).await
    }

    /// The lease record the store holds for `key`, as [`stored`](Self::stored).
    async fn stored_at(&self, key: &str, step: Step) -> Result<Option<(Etag, LeaseRecord)>, Fail> {
        let object_key = match self.protocol {
            Protocol::Epochs => {
                let listed = self.list(&format!("{key}/"), step).await?;
                let newest = listed
                    .into_iter()
                    .filter_map(|k| parse_epoch_key(key, &k).map(|epoch| (epoch, k)))
                    .max();
                match newest {
                    Some((_, k)) => k,
                    None => return Ok(None),
                }
            }
            // Cas and mutex: one object at the key.
            _ => key.to_owned(),
        };
        match self.object(&object_key, step).await? {
            None => Ok(None),
            Some((etag, body)) => match LeaseRecord::decode(&body) {
                Ok(record) => Ok(Some((etag, record))),
                Err(e) => Err((step, format!("{object_key} holds no lease record: {e}"))),
            },
        }
    }

    /// The store holds `lease`'s version, live.
    async fn holds(&self, lease: &Lease, step: Step) -> Result<LeaseRecord, Fail> {
        let holder = &lease.record.holder;
        match self.stored(step).await? {
            Some((etag, record)) => {
                ensure!(
                    etag == lease.etag
                        && record.holder == *holder
                        && record.acquisition == lease.acquisition
                        && record.token == lease.token
                        && !record.released,
                    step,
                    "the store holds {}, not {holder}'s lease (token {}, etag {})",
                    describe(&etag, &record),
                    lease.token,
                    lease.etag.as_str()
                );
                Ok(record)
            }
            None => Err((
                step,
                format!(
                    "the store holds no lease, while {holder} holds token {}",
                    lease.token
                ),
            )),
        }
    }

    /// The store holds no live lease: none, or a released record.
    async fn holds_none_live(&self, step: Step) -> Result<String, Fail> {
        match self.stored(step).await? {
            None => Ok("no lease object".into()),
            Some((_, record)) if record.released => {
                Ok(format!("a released record (token {})", record.token))
            }
            Some((etag, record)) => Err((
                step,
                format!(
                    "the store still holds a live lease: {}",
                    describe(&etag, &record)
                ),
            )),
        }
    }

    /// The protected object as the store holds it.
    async fn fenced(&self, step: Step) -> Result<(Etag, Fenced), Fail> {
        self.fenced_at(&self.target, step).await
    }

    /// The fenced object at `target` as the store holds it.
    async fn fenced_at(&self, target: &str, step: Step) -> Result<(Etag, Fenced), Fail> {
        match self.object(target, step).await? {
            Some((etag, body)) => match Fenced::decode(&body) {
                Some(fenced) => Ok((etag, fenced)),
                None => Err((step, format!("{target} is not a fenced object"))),
            },
            None => Err((step, format!("{target} does not exist"))),
        }
    }

    async fn acquired(client: &Leases<&'s S, &'s C>, key: &str, step: Step) -> Result<Lease, Fail> {
        match client.acquire(key).await {
            Ok(AcquireOutcome::Acquired(lease)) => Ok(lease),
            other => Err((step, format!("expected Acquired, got {other:?}"))),
        }
    }

    async fn supported(&mut self) -> Result<(), Fail> {
        let (key, ttl, protocol) = (self.key.clone(), self.options.ttl, self.protocol);
        let fences = protocol.fences();

        let a = self.client("a", ttl, Step::Probe)?;
        if self.options.probe {
            let report = a
                .probe(&key)
                .await
                .map_err(|e| (Step::Probe, format!("the probe did not finish: {e}")))?;
            if let Err(e) = report.supports(protocol) {
                return Err((Step::Probe, format!("{e}\n{report}")));
            }
            let passed = report.results.iter().filter(|r| r.passed).count();
            let failed = failed_checks(&report);
            self.passed(
                Step::Probe,
                format!("{passed} checks passed, failed {failed:?}: {protocol} is safe here"),
            );
        } else {
            self.passed(Step::Probe, "skipped: the clients run without it".into());
        }
        if self.options.probe {
            self.concurrent(&a, &key).await?;
        } else {
            self.passed(
                Step::Concurrent,
                "skipped: the clients run without the probe".into(),
            );
        }

        let la = Self::acquired(&a, &key, Step::Acquire).await?;
        self.holds(&la, Step::Acquire).await?;
        self.passed(
            Step::Acquire,
            format!(
                "a holds token {}; so does the store (etag {})",
                la.token,
                la.etag.as_str()
            ),
        );

        let b = self.client("b", ttl, Step::Busy)?;
        match b.acquire(&key).await {
            Ok(AcquireOutcome::Busy(busy)) => ensure!(
                busy.holder == "a" && busy.token == la.token && busy.etag == la.etag,
                Step::Busy,
                "b was told {} holds token {} (etag {}); a holds token {} (etag {})",
                busy.holder,
                busy.token,
                busy.etag.as_str(),
                la.token,
                la.etag.as_str()
            ),
            other => return Err((Step::Busy, format!("b, while a holds it: {other:?}"))),
        }
        self.holds(&la, Step::Busy).await?;
        let reread = self.reread(&la).await?;
        self.passed(
            Step::Busy,
            format!("b is refused, naming a; a's version is untouched; {reread}"),
        );

        let la = if protocol.renews() {
            let renewed = match a.renew(&la).await {
                Ok(RenewOutcome::Renewed(renewed)) => renewed,
                other => return Err((Step::Renew, format!("a's renewal: {other:?}"))),
            };
            ensure!(
                renewed.etag != la.etag && renewed.token >= la.token,
                Step::Renew,
                "renewed to token {} etag {} from token {} etag {}",
                renewed.token,
                renewed.etag.as_str(),
                la.token,
                la.etag.as_str()
            );
            let record = self.holds(&renewed, Step::Renew).await?;
            ensure!(
                record.expires_at >= la.record.expires_at,
                Step::Renew,
                "the renewal moved the expiry back: {} before {}",
                record.expires_at.0,
                la.record.expires_at.0
            );
            self.passed(
                Step::Renew,
                format!(
                    "a renewed: token {}, expiry {} ms later on the store",
                    renewed.token,
                    record.expires_at.0 - la.record.expires_at.0
                ),
            );
            renewed
        } else {
            match a.renew(&la).await {
                Err(LeaseError::Config { .. }) => {}
                other => {
                    return Err((
                        Step::Renew,
                        format!("{protocol} has no renewal, yet a's renewal gave {other:?}"),
                    ))
                }
            }
            self.holds(&la, Step::Renew).await?;
            self.passed(
                Step::Renew,
                format!("refused: {protocol} has no renewal; a's lock untouched"),
            );
            la
        };

        let target = self.target.clone();
        let written = match a.fenced_write(&la, &target, b"a".to_vec()).await {
            Ok(FenceOutcome::Accepted { etag }) => etag,
            other => return Err((Step::FencedWrite, format!("a's write: {other:?}"))),
        };
        let (etag, fenced) = self.fenced(Step::FencedWrite).await?;
        ensure!(
            etag == written && fenced.token == la.token && fenced.payload == b"a",
            Step::FencedWrite,
            "after a's write the store holds token {} payload {:?} (etag {})",
            fenced.token,
            String::from_utf8_lossy(&fenced.payload),
            etag.as_str()
        );
        let stale = Lease {
            token: la.token.saturating_sub(1),
            ..la.clone()
        };
        match a.fenced_write(&stale, &target, b"stale".to_vec()).await {
            Ok(FenceOutcome::Rejected { current }) if current == la.token => {}
            other => {
                return Err((
                    Step::FencedWrite,
                    format!("a write with the stale token {}: {other:?}", stale.token),
                ))
            }
        }
        let (etag, fenced) = self.fenced(Step::FencedWrite).await?;
        ensure!(
            etag == written && fenced.payload == b"a",
            Step::FencedWrite,
            "the refused write changed the object: token {} payload {:?}",
            fenced.token,
            String::from_utf8_lossy(&fenced.payload)
        );
        self.passed(
            Step::FencedWrite,
            format!(
                "a's write carries token {}; token {} refused, nothing changed",
                la.token, stale.token
            ),
        );

        match a.release(la.clone()).await {
            Ok(ReleaseOutcome::Released { token }) if token == la.token => {}
            other => return Err((Step::Release, format!("a's release: {other:?}"))),
        }
        let state = self.holds_none_live(Step::Release).await?;
        self.passed(Step::Release, format!("the store holds {state}"));

        let lb = Self::acquired(&b, &key, Step::Takeover).await?;
        ensure!(
            !fences || lb.token > la.token,
            Step::Takeover,
            "b's token {} is not above a's {}",
            lb.token,
            la.token
        );
        self.holds(&lb, Step::Takeover).await?;
        match b.fenced_write(&lb, &target, b"b".to_vec()).await {
            Ok(FenceOutcome::Accepted { .. }) => {}
            other => return Err((Step::Takeover, format!("b's fenced write: {other:?}"))),
        }
        if fences {
            // a, paused past its release, writes as if it still held.
            match a.fenced_write(&la, &target, b"late a".to_vec()).await {
                Ok(FenceOutcome::Rejected { current }) if current == lb.token => {}
                other => {
                    return Err((
                        Step::Takeover,
                        format!("a's late write with token {}: {other:?}", la.token),
                    ))
                }
            }
        }
        let (_, fenced) = self.fenced(Step::Takeover).await?;
        ensure!(
            fenced.token == lb.token && fenced.payload == b"b",
            Step::Takeover,
            "the protected object holds token {} payload {:?}, not b's",
            fenced.token,
            String::from_utf8_lossy(&fenced.payload)
        );
        self.passed(
            Step::Takeover,
            format!(
                "b holds token {} (a had {}); b's write kept{}",
                lb.token,
                la.token,
                if fences {
                    ", a's late write refused"
                } else {
                    ""
                }
            ),
        );

        let operator = self.client("operator", ttl, Step::Inspect)?;
        let seen = match operator.inspect(&key).await {
            Ok(Some(seen)) => seen,
            other => return Err((Step::Inspect, format!("the operator's read: {other:?}"))),
        };
        ensure!(
            seen.record.holder == "b"
                && seen.record.token == lb.token
                && seen.etag == lb.etag
                && !seen.free,
            Step::Inspect,
            "inspect shows {} (free: {}); b holds token {}",
            describe(&seen.etag, &seen.record),
            seen.free,
            lb.token
        );
        self.passed(
            Step::Inspect,
            format!("b, token {}, etag {}", lb.token, seen.etag.as_str()),
        );

        // The token the released record keeps: b's, or (epochs) that of
        // the released epoch above b's.
        let broken = match operator.break_lease(&key, seen.etag.as_str(), None).await {
            Ok(BreakOutcome { token }) if token >= lb.token => token,
            other => return Err((Step::Break, format!("the operator's break: {other:?}"))),
        };
        let state = match self.stored(Step::Break).await? {
            None => "no lease object".to_string(),
            Some((_, record)) if record.released && record.token == broken => {
                format!("a released record (token {broken})")
            }
            Some((etag, record)) => {
                return Err((
                    Step::Break,
                    format!(
                        "broken (token {broken}), yet the store holds {}",
                        describe(&etag, &record)
                    ),
                ))
            }
        };
        let c = self.client("c", ttl, Step::Break)?;
        let lc = Self::acquired(&c, &key, Step::Break).await?;
        ensure!(
            !fences || lc.token > broken,
            Step::Break,
            "c's token {} is not above the broken lease's {broken}",
            lc.token
        );
        self.holds(&lc, Step::Break).await?;
        self.passed(
            Step::Break,
            format!(
                "the store holds {state}; c acquired at once, token {}",
                lc.token
            ),
        );

        if protocol.renews() {
            match b.renew(&lb).await {
                Ok(RenewOutcome::Lost(_)) => {}
                other => {
                    return Err((
                        Step::StaleHolder,
                        format!("b renewed its broken lease while c holds it: {other:?}"),
                    ))
                }
            }
        }
        // Already lost, or (epochs: the break's released epoch is the very
        // record b's release would write) released: either way b holds
        // nothing, and the store must show that the release changed
        // nothing of c's.
        let released = match b.release(lb.clone()).await {
            Ok(outcome @ ReleaseOutcome::AlreadyLost(_))
            | Ok(outcome @ ReleaseOutcome::Released { .. }) => outcome,
            other => {
                return Err((
                    Step::StaleHolder,
                    format!("b's release of its broken lease: {other:?}"),
                ))
            }
        };
        self.holds(&lc, Step::StaleHolder).await?;
        let renewal = if protocol.renews() {
            "b's renewal: lost; "
        } else {
            ""
        };
        self.passed(
            Step::StaleHolder,
            format!("{renewal}b's release: {released:?}; c's version untouched"),
        );

        let other = self.client("c", ttl, Step::ReleaseByEtag)?;
        match other.release_by_etag(&key, lc.etag.as_str()).await {
            Ok(ReleaseOutcome::Released { token }) if token == lc.token => {}
            other => return Err((Step::ReleaseByEtag, format!("the release: {other:?}"))),
        }
        let state = self.holds_none_live(Step::ReleaseByEtag).await?;
        match other.release_by_etag(&key, lc.etag.as_str()).await {
            Err(ByEtagError::NotHeld(_)) => {}
            other => {
                return Err((
                    Step::ReleaseByEtag,
                    format!("a second release of the same version: {other:?}"),
                ))
            }
        }
        self.passed(
            Step::ReleaseByEtag,
            format!("released; the store holds {state}; again: not held"),
        );

        self.expiry().await
    }

    /// d acquires and stops; e takes over once d's lease expired on the
    /// store's clock, not before.
    async fn expiry(&mut self) -> Result<(), Fail> {
        let (key, ttl) = (self.key.clone(), self.options.expiry_ttl);
        let d = self.client("d", ttl, Step::Expiry)?;
        let e = self.client("e", ttl, Step::Expiry)?;
        let ld = Self::acquired(&d, &key, Step::Expiry).await?;
        self.holds(&ld, Step::Expiry).await?;
        let since = self.now();
        let le = loop {
            let waited = Duration::from_millis(self.now().0 - since.0);
            match e.acquire(&key).await {
                Ok(AcquireOutcome::Acquired(le)) => break le,
                Ok(AcquireOutcome::Busy(busy)) => {
                    ensure!(
                        busy.holder == "d",
                        Step::Expiry,
                        "e found {} holding it, not d",
                        busy.holder
                    );
                    ensure!(
                        waited < ttl * 3,
                        Step::Expiry,
                        "d's lease of {ttl:?} was not taken over after {waited:?}"
                    );
                }
                Err(err) => return Err((Step::Expiry, format!("e's acquire: {err}"))),
            }
            self.sleep(self.options.poll).await;
        };
        let waited = Duration::from_millis(self.now().0 - since.0);
        // The store's dates may be whole seconds.
        ensure!(
            waited + Duration::from_secs(1) >= ttl,
            Step::Expiry,
            "d's lease of {ttl:?} was taken over after {waited:?}"
        );
        ensure!(
            le.token > ld.token,
            Step::Expiry,
            "e's token {} is not above d's {}",
            le.token,
            ld.token
        );
        self.holds(&le, Step::Expiry).await?;
        match e.release(le.clone()).await {
            Ok(ReleaseOutcome::Released { .. }) => {}
            other => return Err((Step::Expiry, format!("e's release: {other:?}"))),
        }
        self.passed(
            Step::Expiry,
            format!(
                "d's lease of {ttl:?} taken over by e after {} ms, token {} after {}",
                waited.as_millis(),
                le.token,
                ld.token
            ),
        );
        Ok(())
    }

    async fn refused(&mut self) -> Result<(), Fail> {
        let (key, protocol) = (self.key.clone(), self.protocol);
        ensure!(
            self.options.probe,
            Step::Probe,
            "a refused protocol is shown refused by the probe: run with it"
        );
        let a = self.client("a", self.options.ttl, Step::Probe)?;
        let report = a
            .probe(&key)
            .await
            .map_err(|e| (Step::Probe, format!("the probe did not finish: {e}")))?;
        match report.supports(protocol) {
            Ok(()) => {
                return Err((
                    Step::Probe,
                    format!(
                        "the probe passed {protocol}, which this store cannot carry:\n{report}"
                    ),
                ))
            }
            Err(e) => self.passed(Step::Probe, format!("{protocol} refused: {e}")),
        }
        match a.acquire(&key).await {
            Err(LeaseError::UnsafeStore { .. }) => {}
            other => return Err((Step::Refused, format!("a's acquire: {other:?}"))),
        }
        match self.stored(Step::Refused).await? {
            None => {}
            Some((etag, record)) => {
                return Err((
                    Step::Refused,
                    format!("the refused acquire wrote {}", describe(&etag, &record)),
                ))
            }
        }
        self.passed(
            Step::Refused,
            "a's acquire refused with UnsafeStore; nothing at the key".into(),
        );
        Ok(())
    }

    /// The concurrent races `lease probe` runs: one winner in each. A run
    /// with a write of no clear answer (a reply lost or late) proves
    /// nothing either way and is made again, once.
    async fn concurrent(&mut self, a: &Leases<&'s S, &'s C>, key: &str) -> Result<(), Fail> {
        let mut tries = 0;
        loop {
            tries += 1;
            let report = a
                .check_bucket(key, BUCKET_RACERS, BUCKET_ROUNDS)
                .await
                .map_err(|e| (Step::Concurrent, format!("the races did not finish: {e}")))?;
            let race = &report.race;
            // A store that spaces writes to an object (R2, GCS) throttles
            // most racers: one winner and the rest throttled is all such a
            // store can show.
            let spaced = !self.subject.store.min_write_interval().is_zero();
            if race.passed() || (spaced && race.throttled()) {
                let races = race.races.len();
                self.passed(
                    Step::Concurrent,
                    format!(
                        "{BUCKET_RACERS} racers, {BUCKET_ROUNDS} rounds: one winner in each of {races} races"
                    ),
                );
                return Ok(());
            }
            ensure!(!race.failed() && tries < 2, Step::Concurrent, "{}", report);
        }
    }

    async fn cleanup(&mut self) -> Result<(), Fail> {
        let prefix = format!("{}.probe/", self.key);
        let verdict = verdict_key(&self.key);
        let left: Vec<String> = self
            .list(&prefix, Step::Cleanup)
            .await?
            .into_iter()
            .filter(|k| *k != verdict)
            .collect();
        ensure!(left.is_empty(), Step::Cleanup, "the probes left {left:?}");
        self.passed(
            Step::Cleanup,
            format!("nothing under {prefix} but the fleet's verdict"),
        );
        Ok(())
    }

    async fn missing_bucket(&mut self) -> Result<(), Fail> {
        let Some(missing) = &self.subject.missing_bucket else {
            return Ok(());
        };
        let counted = Counted {
            inner: missing,
            calls: Cell::new(0),
        };
        let settings = Settings::new("x")
            .ttl(self.options.ttl)
            .protocol(self.protocol)
            .probe(self.options.probe);
        let x = Leases::new(
            &counted,
            &self.subject.clock,
            settings,
            self.subject.entropy,
        )
        .map_err(|e| (Step::MissingBucket, format!("settings: {e}")))?;
        let since = self.now();
        let err = match x.acquire(&self.key).await {
            Err(err @ LeaseError::NoSuchBucket { .. }) => err,
            other => {
                return Err((
                    Step::MissingBucket,
                    format!("an acquire on a bucket that does not exist: {other:?}"),
                ))
            }
        };
        let calls = counted.calls.get();
        ensure!(
            calls <= 2,
            Step::MissingBucket,
            "NoSuchBucket only after {calls} calls: it was retried"
        );
        self.passed(
            Step::MissingBucket,
            format!(
                "after {calls} call(s), {} ms: \"{err}\"",
                self.now().0 - since.0
            ),
        );
        Ok(())
    }
}
