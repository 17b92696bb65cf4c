//! Metrics and a health check for a service that leads (feature `ops`).
//!
//! The core reports what happens (the elector's [`Event`]s, each store
//! call and its reply); this module records it through the [`metrics`]
//! facade, so the service picks the exporter (Prometheus, OpenTelemetry,
//! StatsD...) by installing a recorder. Without one, recording costs a
//! few atomic loads. [`serve`] is a small exporter of our own: `/metrics`
//! in the Prometheus text format (a `metrics-exporter-prometheus`
//! recorder) and `/healthz` from
//! [`Leadership::health`](lease_core::Leadership::health).
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `lease_held` | gauge | `key` | 1 while this process holds the lease |
//! | `leader_election_master_status` | gauge | `name` | the same, under client-go's name (dashboards written for it work) |
//! | `lease_token` | gauge | `key` | the fencing token of the term held |
//! | `lease_seconds_to_deadline` | gauge | `key` | the local deadline of the term held, from the last event (0 when not held) |
//! | `lease_transitions_total` | counter | `key` | terms this process started |
//! | `lease_acquire_total` | counter | `key`, `outcome` | `acquired` |
//! | `lease_renew_total` | counter | `key`, `outcome` | `renewed`, `at_risk`, `lost` |
//! | `lease_lost_total` | counter | `key`, `reason` | [`loss_reason`]: `expired`, `replaced`, `broken`, `missing`, `overwritten` |
//! | `lease_errors_total` | counter | `key`, `kind` | failed attempts ([`LeaseError`] kinds; `denied` for 401/403) |
//! | `lease_store_requests_total` | counter | `op`, `status_class` | store calls: `2xx`, `304`, `4xx`, `5xx`, `throttled`, `transport`, `invalid` |
//! | `lease_ambiguous_writes_total` | counter | `key` | writes with no clear answer (5xx, no reply): settled by a read |
//! | `lease_store_request_duration_seconds` | histogram | `op` | time to the reply |
//!
//! Keys are lease keys: an epoch object's and the probe's scratch keys are
//! folded into the lease key they belong to, so labels stay few.

use lease_core::client::Health;
use lease_core::record::split_epoch_key;
use lease_core::store::ReplyKind;
use lease_core::{Event, LeaseError, LostReason, Mono, StoreReply};
use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The label of a loss: `expired` (no renewal confirmed before the local
/// deadline: the store unreachable, throttled or denying), `replaced`
/// (another holder wrote the record), `broken` (an operator released it),
/// `missing` (the object was deleted), `overwritten` (something unreadable
/// written over it).
pub fn loss_reason(reason: &LostReason) -> &'static str {
    match reason {
        LostReason::Expired => "expired",
        LostReason::TakenBy {
            released: false, ..
        } => "replaced",
        LostReason::TakenBy { released: true, .. } => "broken",
        LostReason::Vanished => "missing",
        LostReason::Overwritten => "overwritten",
        _ => "other",
    }
}

fn error_kind(e: &LeaseError) -> &'static str {
    match e {
        LeaseError::Denied { .. } => "denied",
        LeaseError::GaveUp { .. } => "gave_up",
        LeaseError::UnsafeStore { .. } => "unsafe_store",
        LeaseError::NoSuchBucket { .. } => "no_such_bucket",
        _ => "other",
    }
}

/// Records one of the elector's events for the lease at `key`, at local
/// time `now`.
pub fn record_event(key: &str, event: &Event, now: Mono) {
    let key = key.to_string();
    let held = |on: bool| {
        let v = if on { 1.0 } else { 0.0 };
        gauge!("lease_held", "key" => key.clone()).set(v);
        gauge!("leader_election_master_status", "name" => key.clone()).set(v);
    };
    let deadline = |valid_until: Mono| {
        let left = valid_until.0.saturating_sub(now.0) as f64 / 1000.0;
        gauge!("lease_seconds_to_deadline", "key" => key.clone()).set(left);
    };
    match event {
        Event::Acquired { token, valid_until } => {
            held(true);
            gauge!("lease_token", "key" => key.clone()).set(*token as f64);
            deadline(*valid_until);
            counter!("lease_transitions_total", "key" => key.clone()).increment(1);
            counter!("lease_acquire_total", "key" => key.clone(), "outcome" => "acquired")
                .increment(1);
        }
        Event::Renewed { token, valid_until } => {
            gauge!("lease_token", "key" => key.clone()).set(*token as f64);
            deadline(*valid_until);
            counter!("lease_renew_total", "key" => key.clone(), "outcome" => "renewed")
                .increment(1);
        }
        Event::AtRisk { valid_until, .. } => {
            deadline(*valid_until);
            counter!("lease_renew_total", "key" => key.clone(), "outcome" => "at_risk")
                .increment(1);
        }
        Event::Lost { reason, .. } => {
            held(false);
            gauge!("lease_seconds_to_deadline", "key" => key.clone()).set(0.0);
            counter!("lease_renew_total", "key" => key.clone(), "outcome" => "lost").increment(1);
            counter!("lease_lost_total", "key" => key.clone(), "reason" => loss_reason(reason))
                .increment(1);
        }
        Event::Released { .. } => {
            held(false);
            gauge!("lease_seconds_to_deadline", "key" => key.clone()).set(0.0);
        }
        Event::Error(e) => {
            counter!("lease_errors_total", "key" => key.clone(), "kind" => error_kind(e))
                .increment(1);
        }
        _ => {}
    }
}

/// The lease key a store key belongs to: an epoch object's
/// (`<key>/<20 digits>.json`) and the probe's scratch keys
/// (`<key>.probe/…`) fold into `<key>`.
pub fn lease_key_of(key: &str) -> &str {
    if let Some((base, _)) = key.split_once(".probe/") {
        return base;
    }
    split_epoch_key(key).map_or(key, |(base, _)| base)
}

fn status_class(kind: &ReplyKind) -> &'static str {
    match kind {
        ReplyKind::Found { .. }
        | ReplyKind::Written { .. }
        | ReplyKind::Deleted
        | ReplyKind::Listed { .. } => "2xx",
        ReplyKind::NotModified => "304",
        ReplyKind::Throttled { .. } => "throttled",
        ReplyKind::ServerError { .. } => "5xx",
        ReplyKind::Transport { .. } => "transport",
        ReplyKind::Invalid { .. } => "invalid",
        ReplyKind::Unsupported { status, .. } | ReplyKind::Unexpected { status, .. }
            if *status >= 500 =>
        {
            "5xx"
        }
        _ => "4xx",
    }
}

/// Records one store call: a `verb` (GET, PUT, DELETE, LIST) to `key`,
/// a write or not, sent at `started`, answered `reply`.
pub fn record_call(
    verb: &'static str,
    key: &str,
    write: bool,
    started: Instant,
    reply: &StoreReply,
) {
    histogram!("lease_store_request_duration_seconds", "op" => verb)
        .record(started.elapsed().as_secs_f64());
    counter!("lease_store_requests_total", "op" => verb, "status_class" => status_class(&reply.kind))
        .increment(1);
    if write && reply.kind.is_ambiguous() {
        counter!("lease_ambiguous_writes_total", "key" => lease_key_of(key).to_string())
            .increment(1);
    }
}

/// Installs a Prometheus recorder as the process's global one (once; the
/// second call fails) and returns the handle [`serve`] renders.
pub fn install_prometheus() -> Result<PrometheusHandle, String> {
    PrometheusBuilder::new()
        .set_buckets(&[
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ])
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| format!("a metrics recorder is already installed: {e}"))
}

/// What `/healthz` asks: the leadership's [`Health`] now (for a service,
/// `Box::new(move || leadership.health())`).
pub type HealthCheck = Box<dyn Fn() -> Health + Send + Sync>;

/// Serves `/metrics` (the Prometheus text of `metrics`) and `/healthz`
/// (200 `ok` or 503 with the reason, from `health`) on `addr` until the
/// runtime stops; returns the address bound (port 0 picks one). Any other
/// path is 404; only GET is answered. Bind to 127.0.0.1 or a private
/// interface: the metrics name your lease keys.
pub async fn serve(
    addr: SocketAddr,
    metrics: PrometheusHandle,
    health: HealthCheck,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let health = std::sync::Arc::new(health);
    // A few scrapers at a time; the rest wait in the listen backlog.
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let mut conn = match listener.accept().await {
                Ok((conn, _)) => conn,
                // Out of file descriptors, say: wait instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (metrics, health) = (metrics.clone(), health.clone());
            tokio::spawn(async move {
                let _slot = slot;
                let exchange = async {
                    let request = read_head(&mut conn).await?;
                    let (status, extra, kind, body) = answer(&request, &metrics, &health);
                    let head = format!(
                        "HTTP/1.1 {status}\r\n{extra}content-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    conn.write_all(head.as_bytes()).await?;
                    conn.write_all(body.as_bytes()).await?;
                    conn.shutdown().await
                };
                // A client that neither sends nor reads is dropped.
                let _ = tokio::time::timeout(Duration::from_secs(10), exchange).await;
            });
        }
    });
    Ok(bound)
}

/// Scrapes answered at once.
const MAX_CONNECTIONS: usize = 16;

/// The request's head (request line and headers), up to 8 KiB.
async fn read_head(conn: &mut tokio::net::TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// Status, extra header lines, content type and body for `request`.
fn answer(
    request: &str,
    metrics: &PrometheusHandle,
    health: &HealthCheck,
) -> (&'static str, &'static str, &'static str, String) {
    let line = request.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => ("200 OK", "", "text/plain; version=0.0.4", metrics.render()),
        ("GET", "/healthz") => {
            let h = health();
            if h.healthy() {
                ("200 OK", "", "text/plain", format!("ok: {h}\n"))
            } else {
                (
                    "503 Service Unavailable",
                    "",
                    "text/plain",
                    format!("unhealthy: {h}\n"),
                )
            }
        }
        ("GET", _) => ("404 Not Found", "", "text/plain", "not found\n".into()),
        _ => (
            "405 Method Not Allowed",
            "allow: GET\r\n",
            "text/plain",
            "GET only\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_keys_fold_into_their_lease_key() {
        assert_eq!(lease_key_of("locks/a"), "locks/a");
        assert_eq!(lease_key_of("locks/a/00000000000000000042.json"), "locks/a");
        assert_eq!(lease_key_of("locks/a.probe/0123abcd.race"), "locks/a");
        assert_eq!(lease_key_of("locks/a/notes.json"), "locks/a/notes.json");
    }

    #[test]
    fn losses_are_labelled_as_an_operator_reads_them() {
        let taken = |released| LostReason::TakenBy {
            holder: "b".into(),
            token: 2,
            released,
        };
        assert_eq!(loss_reason(&LostReason::Expired), "expired");
        assert_eq!(loss_reason(&taken(false)), "replaced");
        assert_eq!(loss_reason(&taken(true)), "broken");
        assert_eq!(loss_reason(&LostReason::Vanished), "missing");
        assert_eq!(loss_reason(&LostReason::Overwritten), "overwritten");
    }
}
