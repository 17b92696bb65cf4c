//! Micro-benchmarks of the hot paths: one acquire's two HTTP calls (render,
//! sign, parse), the record codec, a whole lease cycle against the in-memory
//! store, and one elector renewal round.
//!
//! Run with `cargo bench -p lease-core --all-features` (signing needs the
//! `sigv4` feature; without it the first bench renders and parses only and
//! is named `render_parse_acquire`).

#[path = "../tests/support/mod.rs"]
mod support;
use criterion::{criterion_group, criterion_main, Criterion};
use lease_core::client::drive;
use lease_core::store::PutCondition;
use lease_core::wire::Dialect;
use lease_core::wire::{S3Config, S3Dialect};
use lease_core::{
    AcquireOutcome, Clock, Elector, Entropy, Event, Lease, LeaseConfig, LeaseOp, LeaseRecord,
    Machine, MemStore, Output, RenewOutcome, StoreOp, UnixMillis, VirtualClock,
};
use std::hint::black_box;
use std::time::Duration;
use support::moto;

const KEY: &str = "leases/a";
/// Sun, 22 Nov 2026 03:10:47 GMT.
const EPOCH: UnixMillis = UnixMillis(1_795_317_047_000);
const TTL: Duration = Duration::from_secs(30);

fn record() -> LeaseRecord {
    LeaseRecord {
        token: 42,
        expires_at: EPOCH + TTL,
        holder: "worker-7.eu-west-1".into(),
        acquisition: "9f2c4e0a1b3d5f7e9f2c4e0a1b3d5f7e".into(),
        nonce: "0123456789abcdef0123456789abcdef".into(),
        acquired_at: Some(EPOCH),
        ttl_ms: Some(30_000),
        released: false,
        released_at: None,
        meta: [("job".to_string(), "nightly-compaction".to_string())].into(),
        protocol: Some("cas".into()),
        strays: false,
        runs: Vec::new(),
        foreign: None,
        owned_by: None,
    }
}

#[cfg(feature = "sigv4")]
const NAME: &str = "render_sign_parse_acquire";
#[cfg(not(feature = "sigv4"))]
const NAME: &str = "render_parse_acquire";

/// Signs in place at the moto captures' time (or does nothing unsigned).
#[cfg(feature = "sigv4")]
fn signer() -> impl Fn(&mut http::Request<Vec<u8>>) {
    use lease_core::wire::Signer;
    let signer = lease_core::wire::SigV4Signer::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        "us-east-1",
    );
    move |request| signer.sign(request, EPOCH).unwrap()
}

#[cfg(not(feature = "sigv4"))]
fn signer() -> impl Fn(&mut http::Request<Vec<u8>>) {
    |_| {}
}

/// An acquire's two calls: the GET and the conditional create of [`record`].
fn get_and_create() -> (StoreOp, StoreOp) {
    let put = StoreOp::Put {
        key: KEY.into(),
        body: record().encode(),
        condition: PutCondition::IfAbsent,
    };
    (StoreOp::Get { key: KEY.into() }, put)
}

/// Benchmarks `calls` (each an op and the store's response) as `name`:
/// rendered, signed with `sign` and parsed by `dialect`.
fn bench_calls(
    c: &mut Criterion,
    name: &str,
    dialect: &impl Dialect,
    sign: impl Fn(&mut http::Request<Vec<u8>>),
    calls: &[(StoreOp, http::Response<Vec<u8>>)],
) {
    c.bench_function(name, |b| {
        b.iter(|| {
            for (op, response) in calls {
                let mut request = dialect.render(black_box(op)).unwrap();
                sign(&mut request);
                black_box(&request);
                black_box(dialect.parse(op, black_box(response)));
            }
        })
    });
}

/// One acquire of a missing key: GET → 404, PUT `If-None-Match: *` → 200.
fn render_sign_parse_acquire(c: &mut Criterion) {
    let dialect = S3Dialect::new(S3Config::custom(
        "http://127.0.0.1:9000",
        "locks",
        "us-east-1",
    ))
    .unwrap();
    let sign = signer();
    let (get, put) = get_and_create();
    let calls = [(get, moto("get_no_such_key")), (put, moto("put_created"))];
    bench_calls(c, NAME, &dialect, sign, &calls);
}

/// The same acquire on Azure Blob: Get Blob → 404 `BlobNotFound`, Put Blob
/// `If-None-Match: *` → 201, signed with SharedKey when the feature is on
/// (and nothing without the Azure dialect, feature `azure`).
#[cfg(not(feature = "azure"))]
fn render_sign_parse_acquire_azure(_: &mut Criterion) {}

/// The same acquire on Azure Blob: Get Blob → 404 `BlobNotFound`, Put Blob
/// `If-None-Match: *` → 201, signed with SharedKey when the feature is on.
#[cfg(feature = "azure")]
fn render_sign_parse_acquire_azure(c: &mut Criterion) {
    use lease_core::wire::{AzureConfig, AzureDialect};
    let dialect = AzureDialect::new(AzureConfig::custom(
        "http://127.0.0.1:10000/leaseaccount",
        "locks",
    ))
    .unwrap();
    #[cfg(feature = "sharedkey")]
    let sign = {
        use lease_core::wire::Signer;
        let signer = lease_core::wire::SharedKeySigner::new(
            "leaseaccount",
            "a2V5LWZvci1iZW5jaG1hcmtzLW9ubHktMDEyMzQ1Njc4OWFiY2RlZg==",
        )
        .unwrap();
        move |request: &mut http::Request<Vec<u8>>| signer.sign(request, EPOCH).unwrap()
    };
    #[cfg(not(feature = "sharedkey"))]
    let sign = |_: &mut http::Request<Vec<u8>>| {};
    let response = |status: u16, headers: &[(&str, &str)], body: &str| {
        let mut b = http::Response::builder()
            .status(status)
            .header("Date", "Sun, 22 Nov 2026 03:10:47 GMT")
            .header("x-ms-version", "2023-11-03");
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        b.body(body.as_bytes().to_vec()).unwrap()
    };
    let (get, put) = get_and_create();
    let calls = [
        (
            get,
            response(
                404,
                &[("x-ms-error-code", "BlobNotFound")],
                "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>BlobNotFound</Code>\
                 <Message>The specified blob does not exist.</Message></Error>",
            ),
        ),
        (put, response(201, &[("ETag", "\"0x8DCB1A2B3C4D5E6\"")], "")),
    ];
    bench_calls(c, "render_sign_parse_acquire_azure", &dialect, sign, &calls);
}

fn record_encode_decode(c: &mut Criterion) {
    let record = record();
    c.bench_function("record_encode_decode", |b| {
        b.iter(|| LeaseRecord::decode(&black_box(&record).encode()).unwrap())
    });
}

fn run<M: Machine>(machine: &mut M, store: &MemStore, clock: &VirtualClock) -> M::Outcome {
    pollster::block_on(drive(machine, store, clock, |_| {}))
}

/// acquire (2 calls) → renew (1) → release (1) on a fresh in-memory store.
fn cycle_mem(c: &mut Criterion) {
    let cfg = LeaseConfig::new(KEY, "worker-7", TTL);
    c.bench_function("cycle_mem", |b| {
        b.iter(|| {
            let clock = VirtualClock::new(EPOCH);
            let store = MemStore::new(clock.clone());
            let mut acquire = LeaseOp::acquire(cfg.clone(), Entropy::from_seed(1));
            let lease: Lease = match run(&mut acquire, &store, &clock) {
                Ok(AcquireOutcome::Acquired(lease)) => lease,
                other => panic!("{other:?}"),
            };
            clock.advance(TTL / 3);
            let mut renew = LeaseOp::renew(cfg.clone(), Entropy::from_seed(2), lease);
            let lease = match run(&mut renew, &store, &clock) {
                Ok(RenewOutcome::Renewed(lease)) => lease,
                other => panic!("{other:?}"),
            };
            let mut release = LeaseOp::release(cfg.clone(), Entropy::from_seed(3), lease);
            black_box(run(&mut release, &store, &clock))
        })
    });
}

/// One renewal round of a leading elector: due timer → PUT → reply →
/// `Renewed` event → wait.
fn elector_step(c: &mut Criterion) {
    let cfg = LeaseConfig::new(KEY, "worker-7", TTL);
    let renew_every = cfg.renew_every;
    let clock = VirtualClock::new(EPOCH);
    let store = MemStore::new(clock.clone());
    let mut elector = Elector::new(cfg, Entropy::from_seed(1));
    let round = move |elector: &mut Elector| {
        let mut renewed = false;
        loop {
            match elector.poll(clock.now()) {
                Output::Call(id, op) => {
                    let reply = store.apply(&op);
                    elector.handle_reply(clock.now(), id, reply);
                }
                Output::Event(e) => {
                    renewed |= matches!(e, Event::Acquired { .. } | Event::Renewed { .. });
                }
                Output::Wait(_) => break,
                Output::Done(exit) => panic!("{exit:?}"),
            }
        }
        assert!(renewed, "no renewal this round");
        clock.advance(renew_every);
    };
    round(&mut elector); // campaign and acquire
    c.bench_function("elector_step", |b| b.iter(|| round(&mut elector)));
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    targets = render_sign_parse_acquire, render_sign_parse_acquire_azure, record_encode_decode,
        cycle_mem, elector_step
}
criterion_main!(benches);
