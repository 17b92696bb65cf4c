//! Shared by the integration tests and the benches: the in-memory world on
//! a virtual clock, seeded entropy, running a machine to its outcome, the
//! outcomes tests expect and moto's captured responses. [`lagging`] is a
//! store whose listings lag behind its writes.

#![allow(dead_code)] // each test file uses a different part

pub mod lagging;

use lease_core::client::drive;

use lease_core::{
    AcquireOutcome, Clock, Entropy, Lease, LeaseError, LeaseRecord, Machine, MemStore, ProbeReport,
    RenewOutcome, Store, UnixMillis, VirtualClock,
};

use std::sync::atomic::{AtomicU64, Ordering};

/// Where the virtual clocks of the in-memory tests start (2026-09-21).
pub const EPOCH: UnixMillis = UnixMillis(1_790_000_000_000);

/// An empty in-memory store and the virtual clock it dates its replies by.
pub fn mem_world() -> (MemStore, VirtualClock) {
    let clock = VirtualClock::new(EPOCH);
    (MemStore::new(clock.clone()), clock)
}

/// Entropy seeded from a counter: every call different, every run the same.
pub fn entropy() -> Entropy {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    Entropy::from_seed(u128::from(NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// Drives `machine` against `store` on `clock` to its outcome (on this
/// thread: the stores here answer at once, the virtual clock jumps).
pub fn run<M: Machine>(store: &impl Store, clock: &impl Clock, mut machine: M) -> M::Outcome {
    pollster::block_on(drive(&mut machine, store, clock, |_| {}))
}

/// The lease an acquire got; any other outcome fails the test.
pub fn acquired(outcome: Result<AcquireOutcome, LeaseError>) -> Lease {
    match outcome {
        Ok(AcquireOutcome::Acquired(lease)) => lease,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// The lease a renewal extended; any other outcome fails the test.
pub fn renewed(outcome: Result<RenewOutcome, LeaseError>) -> Lease {
    match outcome {
        Ok(RenewOutcome::Renewed(lease)) => lease,
        other => panic!("expected Renewed, got {other:?}"),
    }
}

/// The lease record `store` holds at `key`.
pub fn record_at(store: &MemStore, key: &str) -> LeaseRecord {
    let (_, body) = store.get(key).expect("object exists");
    LeaseRecord::decode(&body).expect("readable record")
}

/// The names of the checks `report` failed, in its order.
pub fn failed_checks(report: &ProbeReport) -> Vec<&'static str> {
    let failed = report.results.iter().filter(|r| !r.passed);
    failed.map(|r| r.check.name()).collect()
}

/// moto's 403 for a request signed with the wrong secret: (capture, error
/// code, message).
pub const DENIED_SIGNATURE_MISMATCH: (&str, &str, &str) = (
    "denied_signature_mismatch",
    "SignatureDoesNotMatch",
    "The request signature we calculated does not match the signature you provided. \
     Check your key and signing method.",
);

/// Reads `tests/data/moto/{name}.http`: a raw response captured from moto
/// 5.2.1 (status line, headers, blank line, body).
pub fn moto(name: &str) -> http::Response<Vec<u8>> {
    let path = format!("{}/tests/data/moto/{name}.http", env!("CARGO_MANIFEST_DIR"));
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let split = raw
        .windows(2)
        .position(|w| w == b"\n\n")
        .expect("blank line after the headers");
    let head = std::str::from_utf8(&raw[..split]).expect("ASCII headers");
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let mut response = http::Response::builder().status(status);
    for line in lines {
        let (name, value) = line.split_once(": ").expect("header line");
        response = response.header(name, value);
    }
    response
        .body(raw[split + 2..].to_vec())
        .expect("valid response")
}

/// Decodes `%XX` escapes in a rendered path or query value.
#[allow(dead_code)] // not every test crate that includes this uses it
pub fn percent_decode(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: String = bytes.by_ref().take(2).map(char::from).collect();
            out.push(u8::from_str_radix(&hex, 16).expect("two hex digits"));
        } else {
            out.push(b);
        }
    }
    out
}

/// Drives `campaign` (an elector's, say) until `done` holds, on this
/// thread: the virtual clock moves when the campaign sleeps.
pub fn drive_until<F: std::future::Future>(
    campaign: &mut std::pin::Pin<Box<F>>,
    done: impl Fn() -> bool,
) {
    pollster::block_on(std::future::poll_fn(|cx| {
        if !done() {
            let _ = campaign.as_mut().poll(cx);
        }
        if done() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }));
}

/// A store that counts its calls.
#[derive(Clone)]
pub struct Counted(pub MemStore, pub std::sync::Arc<AtomicU64>);

impl Store for Counted {
    async fn call(&self, op: lease_core::StoreOp) -> lease_core::StoreReply {
        self.1.fetch_add(1, Ordering::Relaxed);
        self.0.apply(&op)
    }
}

/// A store that drops every condition on a PUT: what the probe must refuse.
#[derive(Clone)]
pub struct Blind(pub MemStore);

impl Store for Blind {
    async fn call(&self, op: lease_core::StoreOp) -> lease_core::StoreReply {
        use lease_core::store::PutCondition;
        use lease_core::StoreOp;
        let op = match op {
            StoreOp::Put { key, body, .. } => StoreOp::Put {
                key,
                body,
                condition: PutCondition::None,
            },
            other => other,
        };
        self.0.apply(&op)
    }
}
