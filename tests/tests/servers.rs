//! The server harness itself: moto and s3rver start on free ports, behave
//! as documented, and are gone once dropped (also when the test panics).

use lease_tests::servers::{
    http_request, process_exists, venv_dir, HttpResponse, Moto, MotoOptions, S3rver, ServerProcess,
    STOP_GRACE,
};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const OCTET: (&str, &str) = ("Content-Type", "application/octet-stream");
/// moto (auth off) wants an Authorization header, any (see `Moto`); s3rver
/// takes unsigned requests (a SigV4 header there must use key id `S3RVER`).
const AUTH: (&str, &str) = ("Authorization", Moto::UNCHECKED_AUTHORIZATION);

/// A PUT with `Content-Type` and the unchecked `Authorization` header.
fn put(endpoint: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> HttpResponse {
    let mut all = vec![OCTET, AUTH];
    all.extend_from_slice(headers);
    http_request(endpoint, "PUT", path, &all, body).unwrap()
}

/// A PUT with `Content-Type` only: no `Authorization` header.
fn put_anonymous(endpoint: &str, path: &str, body: &[u8]) -> HttpResponse {
    http_request(endpoint, "PUT", path, &[OCTET], body).unwrap()
}

fn get(endpoint: &str, path: &str) -> HttpResponse {
    http_request(endpoint, "GET", path, &[AUTH], b"").unwrap()
}

/// The process is reaped and no longer exists: kill(pid, 0) fails and
/// /proc/<pid> is absent.
fn assert_gone(pid: u32) {
    assert!(!process_exists(pid), "pid {pid} still exists");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "/proc/{pid} exists"
    );
}

#[test]
fn moto_creates_a_bucket_and_honours_if_none_match() {
    let moto = Moto::start(MotoOptions::default()).unwrap();
    let pid = moto.pid();
    assert!(process_exists(pid));
    assert!(moto.endpoint().starts_with("http://127.0.0.1:"));
    assert!(moto.credentials().is_none());
    moto.create_bucket("locks").unwrap();

    let ep = moto.endpoint();
    let first = put(&ep, "/locks/leader", &[("If-None-Match", "*")], b"one");
    assert_eq!(first.status, 200, "{}", first.text());
    let second = put(&ep, "/locks/leader", &[("If-None-Match", "*")], b"two");
    assert_eq!(second.status, 412, "{}", second.text());
    assert!(second.text().contains("PreconditionFailed"));
    assert_eq!(get(&ep, "/locks/leader").body, b"one");
    // Without an Authorization header moto refuses an existing key (403,
    // empty body) before it looks at the condition.
    let anonymous = put_anonymous(&ep, "/locks/leader", b"x");
    assert_eq!(anonymous.status, 403, "{}", anonymous.text());
    assert!(anonymous.body.is_empty());

    let etag = first.header("ETag").unwrap().to_string();
    let stale = put(&ep, "/locks/leader", &[("If-Match", "\"stale\"")], b"x");
    assert_eq!(stale.status, 412);
    let swap = put(
        &ep,
        "/locks/leader",
        &[("If-Match", etag.as_str())],
        b"three",
    );
    assert_eq!(swap.status, 200, "{}", swap.text());

    drop(moto);
    assert_gone(pid);
}

#[test]
fn moto_with_auth_rejects_unsigned_requests_and_accepts_its_own_key() {
    let moto = Moto::start(MotoOptions {
        auth: true,
        serialized: false,
    })
    .unwrap();
    let creds = moto.credentials().expect("auth on: credentials").clone();
    assert!(creds.access_key_id.starts_with("AKIA"), "{creds:?}");
    assert_eq!(creds.access_key_id.len(), 20);
    assert_eq!(creds.secret_access_key.len(), 40);
    moto.create_bucket("locks").unwrap();
    let ep = moto.endpoint();

    // Authentication is back on after create_bucket: an unsigned PUT is
    // refused (moto 5.2.5 answers 500, from a KeyError on the missing
    // Authorization header) and nothing is stored.
    let unsigned = put_anonymous(&ep, "/locks/unsigned", b"x");
    assert!(
        unsigned.status == 500 || unsigned.status == 403,
        "unsigned PUT: {} {}",
        unsigned.status,
        unsigned.text()
    );
    // Keys moto's IAM does not know get 403 InvalidAccessKeyId.
    for key in ["test", "AKIAIOSFODNN7EXAMPLE"] {
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential={key}/20260101/us-east-1/s3/aws4_request, \
             SignedHeaders=host;x-amz-date, Signature=00"
        );
        let headers = [
            OCTET,
            ("Authorization", auth.as_str()),
            ("X-Amz-Date", "20260101T000000Z"),
        ];
        let r = http_request(&ep, "PUT", "/locks/unknown-key", &headers, b"x").unwrap();
        assert_eq!(r.status, 403, "{key}: {}", r.text());
        assert!(r.text().contains("InvalidAccessKeyId"), "{}", r.text());
    }

    // A real SDK (boto3, from the same venv) signing with the harness's
    // key: its conditional PUTs work, a wrong secret is refused, and the
    // unsigned PUT above stored nothing.
    let script = r#"
import sys, boto3, botocore
from botocore.config import Config
ep, ak, sk = sys.argv[1:4]
def client(secret):
    return boto3.client("s3", endpoint_url=ep, aws_access_key_id=ak,
        aws_secret_access_key=secret, region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}))
def call(f):
    try:
        return str(f()["ResponseMetadata"]["HTTPStatusCode"])
    except botocore.exceptions.ClientError as e:
        return "%s %s" % (e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"])
good, bad = client(sk), client("wrong" + sk[5:])
print(call(lambda: good.put_object(Bucket="locks", Key="signed", Body=b"1", IfNoneMatch="*")))
print(call(lambda: good.put_object(Bucket="locks", Key="signed", Body=b"2", IfNoneMatch="*")))
print(call(lambda: bad.put_object(Bucket="locks", Key="other", Body=b"3")))
print(call(lambda: good.head_object(Bucket="locks", Key="unsigned")))
"#;
    let out = Command::new(venv_dir().unwrap().join("bin/python"))
        .args([
            "-c",
            script,
            &ep,
            &creds.access_key_id,
            &creds.secret_access_key,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "200",
            "412 PreconditionFailed",
            "403 SignatureDoesNotMatch",
            "404 404"
        ]
    );

    let pid = moto.pid();
    drop(moto);
    assert_gone(pid);
}

/// With `serialized`, a connection whose request is not complete yet holds
/// the server: a second client gets no answer until the first is done.
/// moto's own (threaded) server answers the second client meanwhile.
#[test]
fn moto_serialized_serves_one_connection_at_a_time() {
    for serialized in [true, false] {
        let moto = Moto::start(MotoOptions {
            auth: false,
            serialized,
        })
        .unwrap();
        moto.create_bucket("locks").unwrap();
        let addr = format!("127.0.0.1:{}", moto.port());

        // Client A: the head of a PUT whose 5-byte body is not sent yet.
        let mut a = TcpStream::connect(&addr).unwrap();
        write!(
            a,
            "PUT /locks/a HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/octet-stream\r\n\
             Authorization: {}\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
            Moto::UNCHECKED_AUTHORIZATION
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));

        // Client B: a complete GET.
        let mut b = TcpStream::connect(&addr).unwrap();
        write!(
            b,
            "GET /locks HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        b.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let mut first = [0u8; 12];
        let b_early = b.read(&mut first);
        if serialized {
            let err = b_early.expect_err("serialized moto answered B while A was pending");
            assert!(
                matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
                "{err}"
            );
        } else {
            let n = b_early.expect("threaded moto should answer B at once");
            assert!(first[..n].starts_with(b"HTTP/1."), "{first:?}");
        }

        // A completes: A is answered, then (serialized) B.
        a.write_all(b"hello").unwrap();
        a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut a_response = String::new();
        a.read_to_string(&mut a_response).unwrap();
        assert!(a_response.starts_with("HTTP/1."), "{a_response}");
        assert!(a_response.contains(" 200 "), "{a_response}");
        if serialized {
            b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut b_response = String::new();
            b.read_to_string(&mut b_response).unwrap();
            assert!(b_response.starts_with("HTTP/1.0 200"), "{b_response}");
        }
    }
}

/// Serialized moto: of several concurrent `If-None-Match: *` PUTs of one
/// key, exactly one wins in every round.
#[test]
fn moto_serialized_conditional_puts_have_one_winner() {
    const WRITERS: usize = 6;
    const BUCKET_ROUNDS: usize = 25;
    let moto = Moto::start(MotoOptions {
        auth: false,
        serialized: true,
    })
    .unwrap();
    moto.create_bucket("locks").unwrap();
    let ep = moto.endpoint();
    for round in 0..BUCKET_ROUNDS {
        let barrier = Arc::new(Barrier::new(WRITERS));
        let handles: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let barrier = Arc::clone(&barrier);
                let ep = ep.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let path = format!("/locks/round-{round}");
                    put(
                        &ep,
                        &path,
                        &[("If-None-Match", "*")],
                        format!("writer {writer}").as_bytes(),
                    )
                    .status
                })
            })
            .collect();
        let mut statuses: Vec<u16> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        statuses.sort_unstable();
        let mut expected = vec![412; WRITERS];
        expected[0] = 200;
        assert_eq!(statuses, expected, "round {round}");
    }
}

#[test]
fn s3rver_ignores_if_none_match() {
    let s3rver = S3rver::start("locks").unwrap();
    let (pid, data_dir) = (s3rver.pid(), s3rver.data_dir());
    assert_eq!(s3rver.bucket(), "locks");
    assert!(data_dir.is_dir());
    // The PID kept is node's own, not a wrapper's.
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert!(exe.to_string_lossy().contains("node"), "{}", exe.display());

    let ep = s3rver.endpoint();
    let put = |body: &[u8]| {
        let headers = [OCTET, ("If-None-Match", "*")];
        http_request(&ep, "PUT", "/locks/leader", &headers, body).unwrap()
    };
    let first = put(b"one");
    assert_eq!(first.status, 200, "{}", first.text());
    let second = put(b"two");
    assert_eq!(
        second.status,
        200,
        "s3rver honoured If-None-Match? {}",
        second.text()
    );
    let now = http_request(&ep, "GET", "/locks/leader", &[], b"").unwrap();
    assert_eq!(now.body, b"two");

    drop(s3rver);
    assert_gone(pid);
    assert!(!data_dir.exists(), "{} not removed", data_dir.display());
}

#[test]
fn servers_are_stopped_when_the_test_panics() {
    let mut seen = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let s3rver = S3rver::start("locks").unwrap();
        let moto = Moto::start(MotoOptions::default()).unwrap();
        seen = Some((s3rver.pid(), moto.pid(), s3rver.data_dir()));
        panic!("deliberate failure with servers running");
    }));
    assert!(result.is_err());
    let (s3rver_pid, moto_pid, data_dir) = seen.unwrap();
    assert_gone(s3rver_pid);
    assert_gone(moto_pid);
    assert!(!data_dir.exists());
}

/// A process that ignores SIGTERM is killed after the grace period.
#[test]
fn a_server_ignoring_sigterm_is_killed() {
    let server = ServerProcess::spawn("stubborn", 0, |_dir| {
        let mut c = Command::new("sh");
        c.args(["-c", "trap '' TERM; exec sleep 600"]);
        c
    })
    .unwrap();
    let pid = server.pid();
    std::thread::sleep(Duration::from_millis(200));
    assert!(process_exists(pid));
    let start = Instant::now();
    drop(server);
    let took = start.elapsed();
    assert_gone(pid);
    assert!(
        took >= STOP_GRACE,
        "stopped after {took:?}: SIGTERM was not ignored?"
    );
}
