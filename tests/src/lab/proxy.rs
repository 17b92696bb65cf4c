//! The lab's fault proxy: one listener on `127.0.0.1` per client, all in
//! front of one store, that can (per client and per request kind) drop a
//! reply after the store applied the request, answer 500 / 503 / 409 / 429
//! itself (with `Retry-After`), hold a request past the client's timeout
//! and deliver it later, or blackhole a client for a while (a partition
//! from the bucket). Every request is logged with what was done to it and
//! what the store answered, in the order the store applied them.
//!
//! Plain threads over `std::net`: one thread per connection, one request
//! per connection (`Connection: close` both ways), so a held request holds
//! nothing but its own thread. The store is asked with `Connection: close`
//! and read to the end, so any framing it uses (length, chunked, HTTP/1.0)
//! is relayed as it came.

use super::Rng;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What a request does, as the proxy tells from its method, path and
/// headers (the lab's lease and protected keys are known).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// GET or HEAD of the lease object.
    LeaseRead,
    /// A PUT of the lease object (create, compare-and-swap, release).
    LeaseWrite,
    /// A DELETE of the lease object (the mutex protocol's release).
    LeaseDelete,
    /// A LIST (the check for other protocols' clients).
    List,
    /// A GET of the protected object.
    FenceRead,
    /// A PUT of the protected object (a job's fenced append).
    FenceWrite,
    /// Anything else: the capability probe's objects.
    Other,
}

impl Kind {
    /// Every kind, for per-kind settings.
    pub const ALL: [Kind; 7] = [
        Kind::LeaseRead,
        Kind::LeaseWrite,
        Kind::LeaseDelete,
        Kind::List,
        Kind::FenceRead,
        Kind::FenceWrite,
        Kind::Other,
    ];

    /// A short name for logs and summaries.
    pub fn name(self) -> &'static str {
        match self {
            Kind::LeaseRead => "lease-read",
            Kind::LeaseWrite => "lease-write",
            Kind::LeaseDelete => "lease-delete",
            Kind::List => "list",
            Kind::FenceRead => "fence-read",
            Kind::FenceWrite => "fence-write",
            Kind::Other => "other",
        }
    }
}

/// What the proxy did to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forwarded; the store's reply relayed.
    None,
    /// Forwarded and applied; the reply dropped (the connection closed).
    DropReply,
    /// Answered by the proxy with this status (500, 503, 409 or 429),
    /// never forwarded; 503 and 429 carry `Retry-After` (seconds).
    Status {
        /// The status code.
        code: u16,
        /// `Retry-After`, in seconds.
        retry_after: Option<u64>,
    },
    /// Held `delay_ms` (past the client's timeout), then forwarded; the
    /// client gets no reply.
    Late {
        /// How long the request was held.
        delay_ms: u64,
    },
    /// The client is cut off: no forward, no reply, until the blackhole
    /// ends.
    Blackhole,
}

impl Fault {
    /// A short name for counts: `drop-reply`, `500`, `503`, `409`, `429`,
    /// `late`, `blackholed-request`.
    pub fn name(&self) -> String {
        match self {
            Fault::None => "none".into(),
            Fault::DropReply => "drop-reply".into(),
            Fault::Status { code, .. } => code.to_string(),
            Fault::Late { .. } => "late".into(),
            Fault::Blackhole => "blackholed-request".into(),
        }
    }
}

/// A fault the proxy can be told to choose from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Apply, then drop the reply.
    DropReply,
    /// Answer 500.
    ServerError,
    /// Answer 503 with `Retry-After`.
    Unavailable,
    /// Answer 409 (S3's `ConditionalRequestConflict`).
    Conflict,
    /// Answer 429 with `Retry-After`.
    Throttled,
    /// Deliver after the client's timeout.
    Late,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 6] = [
        FaultKind::DropReply,
        FaultKind::ServerError,
        FaultKind::Unavailable,
        FaultKind::Conflict,
        FaultKind::Throttled,
        FaultKind::Late,
    ];
}

/// Which store dialect the replies the proxy makes up imitate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// S3 (moto, s3rver): XML errors; 409 `ConditionalRequestConflict`.
    S3,
    /// Azure Blob (Azurite): XML errors; no 409 is made up (Azure's 409s
    /// are answers about the blob, never transient).
    Azure,
}

/// The fault settings, changed by the lab while the proxy runs.
#[derive(Clone, Debug)]
pub struct FaultSettings {
    /// Whether request faults are on (a storm) or off (a calm).
    pub storm: bool,
    /// Probability that a request of a faultable kind gets a fault in a
    /// storm.
    pub rate: f64,
    /// The kinds that may get faults.
    pub kinds: Vec<Kind>,
    /// The clients that may get faults (empty: every client).
    pub clients: Vec<usize>,
    /// The faults to choose from (empty: every kind that suits the
    /// dialect: no 409 for Azure, whose 409s are answers, not faults).
    pub faults: Vec<FaultKind>,
    /// The client's request timeout: a late delivery is held past it.
    pub client_timeout: Duration,
    /// The longest `Retry-After` made up, in seconds (sometimes far more
    /// than the ttl: clients must cap it).
    pub max_retry_after_s: u64,
}

/// One logged request.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The client (listener) it came from.
    pub client: usize,
    /// When it arrived (Unix ms).
    pub arrived_ms: u64,
    /// When the store answered it (Unix ms), if it was forwarded and the
    /// store answered.
    pub applied_ms: Option<u64>,
    /// The order in which the store answered (the store applies one
    /// request at a time: this is the order of application).
    pub applied_seq: Option<u64>,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// What it does.
    pub kind: Kind,
    /// What the proxy did to it.
    pub fault: Fault,
    /// The store's status, if it was forwarded and answered.
    pub store_status: Option<u16>,
    /// The request body (writes of the lease and protected objects only).
    pub body: Vec<u8>,
}

#[derive(Default)]
struct Shared {
    settings: Option<FaultSettings>,
    blackholes: BTreeMap<usize, Instant>,
    log: Vec<Exchange>,
    in_flight: usize,
    /// The client whose lease write the store applied last.
    last_writer: Option<usize>,
    rng: Option<Rng>,
    /// Added before every request is forwarded (a slow store).
    latency: Duration,
}

/// The proxy: listeners for `clients` clients in front of `store`.
pub struct FaultProxy {
    ports: Vec<u16>,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

struct Target {
    store: SocketAddr,
    lease_key: String,
    fence_key: String,
    dialect: Dialect,
    seq: AtomicU64,
}

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 16 * 1024 * 1024;
const STORE_TIMEOUT: Duration = Duration::from_secs(30);

fn now_ms() -> u64 {
    super::now_ms()
}

impl FaultProxy {
    /// Starts `clients` listeners on free ports of `127.0.0.1`, forwarding
    /// to `store` (`http://127.0.0.1:PORT`). Requests whose path ends in
    /// `/<lease_key>` or `/<fence_key>` are the lease's and the protected
    /// object's.
    pub fn start(
        store: &str,
        clients: usize,
        lease_key: &str,
        fence_key: &str,
        dialect: Dialect,
        seed: u64,
    ) -> Result<FaultProxy, String> {
        let authority = store
            .strip_prefix("http://")
            .ok_or_else(|| format!("store endpoint {store:?} must start with http://"))?;
        let authority = authority.split('/').next().unwrap_or(authority);
        let store: SocketAddr = authority
            .parse()
            .map_err(|e| format!("store address {authority:?}: {e}"))?;
        let target = Arc::new(Target {
            store,
            lease_key: lease_key.to_string(),
            fence_key: fence_key.to_string(),
            dialect,
            seq: AtomicU64::new(0),
        });
        let shared = Arc::new(Mutex::new(Shared {
            rng: Some(Rng::new(seed)),
            ..Shared::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let mut ports = Vec::new();
        let mut threads = Vec::new();
        for client in 0..clients {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .map_err(|e| format!("proxy cannot bind 127.0.0.1:0: {e}"))?;
            listener
                .set_nonblocking(true)
                .map_err(|e| format!("proxy listener: {e}"))?;
            ports.push(listener.local_addr().map_err(|e| e.to_string())?.port());
            let (shared, stop, target) = (shared.clone(), stop.clone(), target.clone());
            threads.push(thread::spawn(move || {
                accept_loop(client, listener, shared, stop, target)
            }));
        }
        Ok(FaultProxy {
            ports,
            shared,
            stop,
            threads,
        })
    }

    /// The endpoint client `client` talks to.
    pub fn endpoint(&self, client: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[client])
    }

    /// Replaces the fault settings (`None`: forward everything).
    pub fn set(&self, settings: Option<FaultSettings>) {
        self.shared.lock().unwrap().settings = settings;
    }

    /// Holds every request this long before forwarding it: a slow store,
    /// with or without faults.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.lock().unwrap().latency = latency;
    }

    /// Turns request faults on or off, keeping the other settings.
    pub fn set_storm(&self, storm: bool) {
        if let Some(s) = self.shared.lock().unwrap().settings.as_mut() {
            s.storm = storm;
        }
    }

    /// Cuts `client` off the store until `until`.
    pub fn blackhole(&self, client: usize, until: Instant) {
        self.shared.lock().unwrap().blackholes.insert(client, until);
    }

    /// The log so far, in arrival order.
    pub fn log(&self) -> Vec<Exchange> {
        self.shared.lock().unwrap().log.clone()
    }

    /// The client whose write of the lease object the store applied last
    /// (most likely the holder: the lab aims faults at it).
    pub fn last_writer(&self) -> Option<usize> {
        self.shared.lock().unwrap().last_writer
    }

    /// Requests being served now (held ones included).
    pub fn in_flight(&self) -> usize {
        self.shared.lock().unwrap().in_flight
    }

    /// Stops accepting; requests in flight finish on their own threads.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(
    client: usize,
    listener: TcpListener,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    target: Arc<Target>,
) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((conn, _)) => {
                let (shared, target) = (shared.clone(), target.clone());
                shared.lock().unwrap().in_flight += 1;
                thread::spawn(move || {
                    let _ = conn.set_nonblocking(false);
                    serve(client, conn, &shared, &target);
                    shared.lock().unwrap().in_flight -= 1;
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(2))
            }
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// A request as read from the client.
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) head: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

/// Reads one HTTP/1.1 request (head and `Content-Length` body); `None` when
/// the connection closed before a request began.
pub(crate) fn read_request(conn: &mut TcpStream) -> Result<Option<Request>, String> {
    conn.set_read_timeout(Some(STORE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err("request head too large".into());
        }
        let n = conn.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err("connection closed mid-request".into())
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let text = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let head: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    if head
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v != "identity")
    {
        return Err("chunked request bodies are not supported by the fault proxy".into());
    }
    let length: usize = header(&head, "content-length")
        .map(|v| v.parse().map_err(|_| format!("bad Content-Length {v:?}")))
        .transpose()?
        .unwrap_or(0);
    if length > MAX_BODY {
        return Err(format!("request body of {length} bytes is too large"));
    }
    let mut body = buf[end + 4..].to_vec();
    while body.len() < length {
        let n = conn.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed mid-body".into());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(Some(Request {
        method,
        path,
        head,
        body,
    }))
}

fn header<'a>(head: &'a [(String, String)], name: &str) -> Option<&'a str> {
    head.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn classify(target: &Target, req: &Request) -> Kind {
    let (path, query) = req.path.split_once('?').unwrap_or((&req.path, ""));
    let is = |key: &str| path.ends_with(&format!("/{key}"));
    let listing = query
        .split('&')
        .any(|p| p.starts_with("list-type") || p == "comp=list" || p.starts_with("prefix="));
    match req.method.as_str() {
        _ if listing => Kind::List,
        "GET" | "HEAD" if is(&target.lease_key) => Kind::LeaseRead,
        "PUT" if is(&target.lease_key) => Kind::LeaseWrite,
        "DELETE" if is(&target.lease_key) => Kind::LeaseDelete,
        "GET" | "HEAD" if is(&target.fence_key) => Kind::FenceRead,
        "PUT" if is(&target.fence_key) => Kind::FenceWrite,
        _ => Kind::Other,
    }
}

fn decide(shared: &Mutex<Shared>, target: &Target, client: usize, kind: Kind) -> Fault {
    let mut s = shared.lock().unwrap();
    if let Some(until) = s.blackholes.get(&client) {
        if Instant::now() < *until {
            return Fault::Blackhole;
        }
    }
    let Some(settings) = s.settings.clone() else {
        return Fault::None;
    };
    let rng = s.rng.as_mut().expect("rng");
    let targeted = settings.clients.is_empty() || settings.clients.contains(&client);
    if !settings.storm || !targeted || !settings.kinds.contains(&kind) || !rng.chance(settings.rate)
    {
        return Fault::None;
    }
    let retry_after = |rng: &mut Rng| {
        // Mostly short; one in five far past any ttl (an hour).
        if rng.chance(0.2) {
            3600
        } else {
            rng.below(settings.max_retry_after_s + 1)
        }
    };
    let choices: Vec<FaultKind> = if settings.faults.is_empty() {
        FaultKind::ALL
            .into_iter()
            .filter(|f| target.dialect == Dialect::S3 || *f != FaultKind::Conflict)
            .collect()
    } else {
        settings.faults.clone()
    };
    match choices[rng.below(choices.len() as u64) as usize] {
        FaultKind::DropReply => Fault::DropReply,
        FaultKind::ServerError => Fault::Status {
            code: 500,
            retry_after: None,
        },
        FaultKind::Unavailable => Fault::Status {
            code: 503,
            retry_after: Some(retry_after(rng)),
        },
        FaultKind::Conflict => Fault::Status {
            code: 409,
            retry_after: None,
        },
        FaultKind::Throttled => Fault::Status {
            code: 429,
            retry_after: Some(retry_after(rng)),
        },
        FaultKind::Late => Fault::Late {
            delay_ms: settings.client_timeout.as_millis() as u64 + 100 + rng.below(2_000),
        },
    }
}

fn serve(client: usize, mut conn: TcpStream, shared: &Mutex<Shared>, target: &Target) {
    let arrived_ms = now_ms();
    let req = match read_request(&mut conn) {
        Ok(Some(req)) => req,
        Ok(None) => return,
        Err(e) => {
            let _ = respond(&mut conn, 400, None, target.dialect, &e);
            return;
        }
    };
    let kind = classify(target, &req);
    let fault = decide(shared, target, client, kind);
    let keep_body = matches!(kind, Kind::LeaseWrite | Kind::FenceWrite);
    let mut entry = Exchange {
        client,
        arrived_ms,
        applied_ms: None,
        applied_seq: None,
        method: req.method.clone(),
        path: req.path.clone(),
        kind,
        fault: fault.clone(),
        store_status: None,
        body: if keep_body {
            req.body.clone()
        } else {
            Vec::new()
        },
    };
    match fault {
        Fault::None | Fault::DropReply => {
            let latency = shared.lock().unwrap().latency;
            if !latency.is_zero() {
                thread::sleep(latency);
            }
            let reply = forward(target, &req, &mut entry);
            if fault == Fault::None {
                match reply {
                    Ok(bytes) => {
                        let _ = conn.write_all(&bytes);
                    }
                    Err(e) => {
                        let _ = respond(&mut conn, 502, None, target.dialect, &e);
                    }
                }
            }
        }
        Fault::Status { code, retry_after } => {
            let _ = respond(&mut conn, code, retry_after, target.dialect, "injected");
        }
        Fault::Late { delay_ms } => {
            // The client gives up at its timeout; the request goes on.
            drop(conn);
            thread::sleep(Duration::from_millis(delay_ms));
            let _ = forward(target, &req, &mut entry);
        }
        Fault::Blackhole => {
            let until = shared.lock().unwrap().blackholes.get(&client).copied();
            if let Some(until) = until {
                let left = until.saturating_duration_since(Instant::now());
                thread::sleep(left.min(STORE_TIMEOUT));
            }
        }
    }
    let mut s = shared.lock().unwrap();
    if entry.kind == Kind::LeaseWrite && entry.store_status.is_some_and(|c| (200..300).contains(&c))
    {
        s.last_writer = Some(client);
    }
    s.log.push(entry);
}

/// Sends `req` to the store; the raw response with `Connection: close`.
fn forward(target: &Target, req: &Request, entry: &mut Exchange) -> Result<Vec<u8>, String> {
    let mut store = TcpStream::connect_timeout(&target.store, STORE_TIMEOUT)
        .map_err(|e| format!("store: {e}"))?;
    let _ = store.set_read_timeout(Some(STORE_TIMEOUT));
    let mut out = format!("{} {} HTTP/1.1\r\n", req.method, req.path).into_bytes();
    for (n, v) in &req.head {
        if n.eq_ignore_ascii_case("connection") || n.eq_ignore_ascii_case("keep-alive") {
            continue;
        }
        out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out.extend_from_slice(&req.body);
    store
        .write_all(&out)
        .map_err(|e| format!("store write: {e}"))?;
    let mut raw = Vec::new();
    store
        .read_to_end(&mut raw)
        .map_err(|e| format!("store read: {e}"))?;
    entry.applied_seq = Some(target.seq.fetch_add(1, Ordering::SeqCst));
    entry.applied_ms = Some(now_ms());
    let head_end = find(&raw, b"\r\n\r\n").ok_or("store reply without a head")?;
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    entry.store_status = head.split(' ').nth(1).and_then(|code| code.parse().ok());
    // Relay with `Connection: close`: the client opens a connection per
    // request, as the proxy serves one per connection.
    let mut reply = Vec::with_capacity(raw.len() + 20);
    for line in head.split("\r\n") {
        let name = line.split(':').next().unwrap_or_default().trim();
        if name.eq_ignore_ascii_case("connection") || name.eq_ignore_ascii_case("keep-alive") {
            continue;
        }
        reply.extend_from_slice(line.as_bytes());
        reply.extend_from_slice(b"\r\n");
    }
    reply.extend_from_slice(b"Connection: close\r\n\r\n");
    reply.extend_from_slice(&raw[head_end + 4..]);
    Ok(reply)
}

/// A reply made up by the proxy, shaped like the store's errors.
fn respond(
    conn: &mut TcpStream,
    code: u16,
    retry_after: Option<u64>,
    dialect: Dialect,
    message: &str,
) -> std::io::Result<()> {
    let (reason, s3_code, azure_code) = match code {
        500 => ("Internal Server Error", "InternalError", "InternalError"),
        503 => ("Service Unavailable", "SlowDown", "ServerBusy"),
        409 => (
            "Conflict",
            "ConditionalRequestConflict",
            "OperationTimedOut",
        ),
        429 => ("Too Many Requests", "SlowDown", "ServerBusy"),
        400 => ("Bad Request", "InvalidRequest", "InvalidInput"),
        _ => ("Bad Gateway", "InternalError", "InternalError"),
    };
    let error_code = match dialect {
        Dialect::S3 => s3_code,
        Dialect::Azure => azure_code,
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{error_code}</Code><Message>fault proxy: {message}</Message></Error>"
    );
    let date = lease_core::UnixMillis(now_ms()).to_http_date();
    let mut head = format!(
        "HTTP/1.1 {code} {reason}\r\nDate: {date}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(s) = retry_after {
        head.push_str(&format!("Retry-After: {s}\r\n"));
    }
    if dialect == Dialect::Azure {
        head.push_str(&format!("x-ms-error-code: {error_code}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes())?;
    conn.write_all(body.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::http_request;

    /// A store stand-in: answers every request 200 `ok` and counts them.
    fn counting_server() -> (String, Arc<AtomicU64>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(AtomicU64::new(0));
        let seen = count.clone();
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                if let Ok(Some(_)) = read_request(&mut conn) {
                    seen.fetch_add(1, Ordering::SeqCst);
                    let _ = conn.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nETag: \"e\"\r\nConnection: close\r\n\r\nok",
                    );
                }
            }
        });
        (addr, count)
    }

    fn proxy_with(fault: Option<FaultKind>, clients: Vec<usize>) -> (FaultProxy, Arc<AtomicU64>) {
        let (store, count) = counting_server();
        let proxy = FaultProxy::start(&store, 2, "k", "f", Dialect::S3, 1).unwrap();
        proxy.set(fault.map(|f| FaultSettings {
            storm: true,
            rate: 1.0,
            kinds: Kind::ALL.to_vec(),
            clients,
            faults: vec![f],
            client_timeout: Duration::from_millis(100),
            max_retry_after_s: 5,
        }));
        (proxy, count)
    }

    fn put(proxy: &FaultProxy, client: usize) -> Result<u16, String> {
        http_request(
            &proxy.endpoint(client),
            "PUT",
            "/b/k",
            &[("If-Match", "\"e\"")],
            b"x",
        )
        .map(|r| r.status)
    }

    fn wait_for(count: &AtomicU64, n: u64) {
        let until = Instant::now() + Duration::from_secs(5);
        while count.load(Ordering::SeqCst) < n && Instant::now() < until {
            thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn each_fault_does_what_it_says_and_is_logged() {
        let (proxy, count) = proxy_with(None, vec![]);
        assert_eq!(put(&proxy, 0), Ok(200));
        assert_eq!(count.load(Ordering::SeqCst), 1);

        let (proxy, count) = proxy_with(Some(FaultKind::DropReply), vec![]);
        assert!(put(&proxy, 0).is_err(), "no reply after applying");
        assert_eq!(count.load(Ordering::SeqCst), 1, "applied");

        let (proxy, count) = proxy_with(Some(FaultKind::Throttled), vec![]);
        let reply = http_request(&proxy.endpoint(0), "GET", "/b/k", &[], b"").unwrap();
        assert_eq!(reply.status, 429);
        assert!(reply.header("Retry-After").is_some());
        assert!(reply.header("Date").is_some());
        assert_eq!(count.load(Ordering::SeqCst), 0, "never forwarded");

        let (proxy, count) = proxy_with(Some(FaultKind::Late), vec![]);
        let sent = Instant::now();
        assert!(put(&proxy, 0).is_err(), "no reply");
        assert_eq!(count.load(Ordering::SeqCst), 0, "not yet delivered");
        wait_for(&count, 1);
        assert_eq!(count.load(Ordering::SeqCst), 1, "delivered late");
        assert!(sent.elapsed() >= Duration::from_millis(200));
        let log = proxy.log();
        assert_eq!(log.len(), 1);
        assert!(matches!(log[0].fault, Fault::Late { .. }));
        assert_eq!(
            (log[0].kind, log[0].store_status),
            (Kind::LeaseWrite, Some(200))
        );
    }

    #[test]
    fn faults_hit_only_the_clients_named_and_blackholes_cut_one_off() {
        let (proxy, count) = proxy_with(Some(FaultKind::ServerError), vec![1]);
        assert_eq!(put(&proxy, 0), Ok(200));
        assert_eq!(put(&proxy, 1), Ok(500));
        assert_eq!(count.load(Ordering::SeqCst), 1);

        let (proxy, count) = proxy_with(None, vec![]);
        proxy.blackhole(0, Instant::now() + Duration::from_millis(300));
        let sent = Instant::now();
        assert!(put(&proxy, 0).is_err(), "blackholed");
        assert!(sent.elapsed() >= Duration::from_millis(250));
        assert_eq!(put(&proxy, 1), Ok(200), "the other client is not cut off");
        assert_eq!(put(&proxy, 0), Ok(200), "the blackhole ended");
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }
}
