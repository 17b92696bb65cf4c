//! The lease machines on the GCS dialect: [`LeaseOp`] and the probe driven
//! through a real `HttpStore<GcsDialect, GcsBox, VirtualClock>`.
//!
//! No installable GCS emulator honours generation preconditions on the XML
//! API (fake-gcs-server 1.54 and gcp-storage-emulator ignore
//! `x-goog-if-generation-match` there), so `GcsBox` is written from the
//! XML API's documented behaviour: objects carry a generation, returned in
//! `x-goog-generation`; `x-goog-if-generation-match: 0` means "only if
//! absent" and `: N` "only if at generation N", else 412
//! `PreconditionFailed`; and an object written again within a second of its
//! last write is refused with 429, as GCS does past about one write per
//! second per object. Every answer is dated by the box's clock.

mod support;

use http::{Method, Request, Response};
use lease_core::client::drive::drive;
use lease_core::config::{LeaseConfig, Protocol};
use lease_core::entropy::Entropy;
use lease_core::mem::VirtualClock;
use lease_core::protocol::lease::LeaseOp;
use lease_core::protocol::machine::{
    AcquireOutcome, Lease, LeaseError, Machine, ReleaseOutcome, RenewOutcome,
};
use lease_core::protocol::probe::{Check, Probe};
use lease_core::time::Clock;
use lease_core::time::{Mono, UnixMillis};
use lease_core::wire::gcs::{GcsConfig, GcsDialect, MIN_WRITE_INTERVAL};
use lease_core::wire::provider::Provider;
use lease_core::wire::{HttpStore, HttpTransport, TransportError};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

const BUCKET: &str = "lease_bucket";
const KEY: &str = "leases/nightly";
const EPOCH: UnixMillis = UnixMillis(1_795_317_047_000);

/// What the box saw: one line per request.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    key: String,
    at: Mono,
    status: u16,
}

#[derive(Default)]
struct Objects {
    /// name -> (generation, body, last write at)
    map: BTreeMap<String, (u64, Vec<u8>, Mono)>,
    next_generation: u64,
    log: Vec<Seen>,
}

#[derive(Clone)]
struct GcsBox {
    clock: VirtualClock,
    objects: Rc<RefCell<Objects>>,
}

fn xml_error(status: u16, code: &str, message: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    (
        status,
        vec![(
            "Content-Type".into(),
            "application/xml; charset=UTF-8".into(),
        )],
        format!(
            "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>\
             <Message>{message}</Message></Error>"
        )
        .into_bytes(),
    )
}

impl GcsBox {
    fn new(clock: VirtualClock) -> GcsBox {
        GcsBox {
            clock,
            objects: Rc::new(RefCell::new(Objects {
                next_generation: 1_700_000_000_000_001,
                ..Objects::default()
            })),
        }
    }

    fn writes_to(&self, key: &str) -> Vec<Seen> {
        let o = self.objects.borrow();
        o.log
            .iter()
            .filter(|s| s.key == key && matches!(s.method, Method::PUT | Method::DELETE))
            .cloned()
            .collect()
    }

    fn throttled(&self) -> usize {
        self.objects
            .borrow()
            .log
            .iter()
            .filter(|s| s.status == 429)
            .count()
    }

    fn answer(&self, request: &Request<Vec<u8>>) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let now = mono(&self.clock);
        let path = request.uri().path().to_string();
        let prefix = format!("/{BUCKET}");
        assert!(path.starts_with(&prefix), "{path}");
        #[cfg(feature = "sigv4")]
        {
            let auth = request.headers()["authorization"].to_str().unwrap();
            assert!(
                auth.starts_with("AWS4-HMAC-SHA256 Credential=GOOG1EXAMPLE/")
                    && auth.contains("/auto/s3/aws4_request"),
                "HMAC key, region auto, service s3: {auth}"
            );
        }
        let key = decode(path[prefix.len()..].trim_start_matches('/'));
        let condition = request
            .headers()
            .get("x-goog-if-generation-match")
            .map(|v| v.to_str().unwrap().parse::<u64>().expect("a generation"));
        let mut o = self.objects.borrow_mut();
        let current = o.map.get(&key).cloned();
        let holds = |c: Option<u64>| match (c, &current) {
            (None, _) => true,
            (Some(0), None) => true,
            (Some(0), Some(_)) => false,
            (Some(g), Some((gen, _, _))) => g == *gen,
            (Some(_), None) => false,
        };
        let headers = |generation: u64| {
            vec![
                ("ETag".into(), format!("\"{generation:x}\"")),
                ("x-goog-generation".into(), generation.to_string()),
                ("x-goog-metageneration".into(), "1".into()),
            ]
        };
        match *request.method() {
            Method::GET if request.uri().query().is_some() => {
                let query = request.uri().query().unwrap();
                let want = decode(
                    query
                        .split('&')
                        .find_map(|p| p.strip_prefix("prefix="))
                        .unwrap_or(""),
                );
                let contents: String = o
                    .map
                    .iter()
                    .filter(|(k, _)| k.starts_with(&want))
                    .map(|(k, (g, body, _))| {
                        format!(
                            "<Contents><Key>{k}</Key><Generation>{g}</Generation>\
                             <MetaGeneration>1</MetaGeneration><ETag>\"{g:x}\"</ETag>\
                             <Size>{}</Size></Contents>",
                            body.len()
                        )
                    })
                    .collect();
                let body = format!(
                    "<?xml version='1.0' encoding='UTF-8'?><ListBucketResult \
                     xmlns=\"http://doc.s3.amazonaws.com/2006-03-01\"><Name>{BUCKET}</Name>\
                     <Prefix>{want}</Prefix><IsTruncated>false</IsTruncated>{contents}\
                     </ListBucketResult>"
                );
                (200, vec![], body.into_bytes())
            }
            Method::GET => match current {
                Some((g, body, _)) => (200, headers(g), body),
                None => xml_error(404, "NoSuchKey", "The specified key does not exist."),
            },
            Method::PUT | Method::DELETE => {
                if let Some((_, _, last)) = &current {
                    if now < *last + Duration::from_secs(1) {
                        return xml_error(
                            429,
                            "SlowDown",
                            "The object exceeded the rate limit for object mutation operations \
                             (create, update, and delete).",
                        );
                    }
                }
                if !holds(condition) {
                    return xml_error(
                        412,
                        "PreconditionFailed",
                        "At least one of the pre-conditions you specified did not hold.",
                    );
                }
                if *request.method() == Method::DELETE {
                    return match o.map.remove(&key) {
                        Some(_) => (204, vec![], vec![]),
                        None => xml_error(404, "NoSuchKey", "The specified key does not exist."),
                    };
                }
                let g = o.next_generation;
                o.next_generation += 1;
                o.map.insert(key, (g, request.body().clone(), now));
                (200, headers(g), vec![])
            }
            _ => xml_error(405, "MethodNotAllowed", "no"),
        }
    }
}

impl HttpTransport for GcsBox {
    async fn send(&self, request: Request<Vec<u8>>) -> Result<Response<Vec<u8>>, TransportError> {
        let (status, headers, body) = self.answer(&request);
        let path = request.uri().path();
        self.objects.borrow_mut().log.push(Seen {
            method: request.method().clone(),
            key: decode(path.trim_start_matches(&format!("/{BUCKET}/"))),
            at: mono(&self.clock),
            status,
        });
        let mut response = Response::builder().status(status).header(
            "Date",
            httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(self.clock.wall().0)),
        );
        for (n, v) in headers {
            response = response.header(n, v);
        }
        Ok(response.body(body).unwrap())
    }
}

/// A percent-encoded path or query value, decoded.
fn decode(s: &str) -> String {
    String::from_utf8(support::percent_decode(s)).expect("UTF-8 key")
}

type GcsStore = HttpStore<GcsDialect, GcsBox, VirtualClock>;

fn world() -> (VirtualClock, GcsBox, GcsStore) {
    let clock = VirtualClock::new(EPOCH);
    let gcs = GcsBox::new(clock.clone());
    let dialect = GcsDialect::new(GcsConfig::new(BUCKET)).unwrap();
    let store = HttpStore::new(dialect, gcs.clone(), clock.clone());
    #[cfg(feature = "sigv4")]
    let store = store.with_signer(
        lease_core::wire::sign::SigV4Signer::new("GOOG1EXAMPLE", "secret", None, "auto")
            .with_service("s3"),
    );
    (clock, gcs, store)
}

fn run<M: Machine>(store: &GcsStore, clock: &VirtualClock, mut machine: M) -> M::Outcome {
    pollster::block_on(drive(&mut machine, store, clock, |_| {}))
}

fn acquired(outcome: Result<AcquireOutcome, LeaseError>) -> Lease {
    match outcome {
        Ok(AcquireOutcome::Acquired(lease)) => lease,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// The GCS preset's lease configuration.
fn gcs_cfg(holder: &str) -> LeaseConfig {
    let mut cfg = LeaseConfig::new(KEY, holder, Duration::from_secs(30));
    cfg.min_write_interval = Provider::Gcs.preset().min_write_interval;
    cfg
}

/// The box's local monotonic time.
fn mono(clock: &VirtualClock) -> Mono {
    Clock::now(clock).mono
}

#[test]
fn the_preset_spaces_writes_one_second_apart() {
    assert_eq!(MIN_WRITE_INTERVAL, Duration::from_secs(1));
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
