//! Example Worker: a cron job guarded by a lease, and the lease's HTTP
//! endpoints. Settings: `lease_cloudflare::settings`; `wrangler.toml`.
//!
//! - `scheduled`: one run per tick, never two at once: a tick delivered
//!   again after its run completed is answered `already-ran` from the lease
//!   record (`WorkerLease::run_cron`; the delivery is then told `noRetry()`).
//!   The job records its
//!   run at `RESULT_KEY.runs/<scheduled time>/<holder>` and writes
//!   `RESULT_KEY` as a fenced write stamped with the token, so a run that
//!   lost the lease cannot overwrite a newer run's result. `JOB_MS` makes
//!   the job take that long (for trying overlaps).
//! - `GET /lease`: to anyone, whether the lease is free and if not until
//!   when; with `Authorization: Bearer <LEASE_ADMIN_TOKEN>`, the lease as
//!   stored (holder, token, expires, released, etag).
//! - `GET /lease/probe`: the capability probe's report for this store (it
//!   writes scratch objects).
//! - `POST /lease/acquire`: take the lease by hand (200, or 409 busy).
//! - `POST /lease/release` with `{"etag": "..."}`: give it back.
//! - `POST /upstream`: a call to an upstream that allows `POOL_SEATS`
//!   (default 2) calls at once, made in a free seat of the pool at
//!   `POOL_KEY` (default `pools/upstream`; `WorkerLease::run` with
//!   `Run::pool`): at most
//!   that many run at once across every isolate. 200 with the seat and
//!   its token once the call is done, 429 (`Retry-After`) with every seat
//!   taken. The call stands in for a real one: it takes `JOB_MS` and is
//!   recorded at `POOL_KEY.calls/<holder>` (the holder's `/` as `-`) with
//!   when it started and ended.
//!
//! The last four need `Authorization: Bearer <LEASE_ADMIN_TOKEN>` (401
//! without it) and are disabled (403) until that secret is set:
//! `lease_cloudflare::auth`.

use lease_cloudflare::auth::{Access, AdminAuth, Caller};
use lease_cloudflare::lease::{Reply, WorkerLease};
use lease_cloudflare::settings::lookup;
use lease_core::client::drive;
use lease_core::protocol::FenceOp;
use lease_core::store::{PutCondition, ReplyKind};
use lease_core::{Clock, FenceOutcome, Run, RunOutcome, Store, StoreOp};
use serde_json::{json, Value};
use std::time::Duration;
use worker::wasm_bindgen::prelude::wasm_bindgen;
use worker::*;

/// talc for Rust's allocations, in place of std's dlmalloc: about 2 KB
/// smaller gzipped, and as fast or faster in talc's own benchmarks.
// SAFETY: a Worker's isolate runs this module on one thread, which is what
// `new_global` asks for; talc then grows the wasm memory as it needs.
#[cfg(target_family = "wasm")]
#[global_allocator]
static ALLOCATOR: talc::TalckWasm = unsafe { talc::TalckWasm::new_global() };

fn bad_request(message: &str) -> Result<Response> {
    Reply::new(400, json!({"error": "request", "message": message})).into_response()
}

/// The routes, and who may call them.
#[derive(Clone, Copy, PartialEq)]
enum Route {
    /// Anyone: the public view; the admin: the whole record.
    Status,
    /// The admin only: it writes scratch objects to the bucket.
    Probe,
    /// The admin only.
    Acquire,
    /// The admin only.
    Release,
    /// The admin only: it takes a seat and writes to the bucket.
    Upstream,
}

fn route(method: Method, path: &str) -> std::result::Result<Route, Reply> {
    let (route, allow) = match path {
        "/lease" => (Route::Status, Method::Get),
        "/lease/probe" => (Route::Probe, Method::Get),
        "/lease/acquire" => (Route::Acquire, Method::Post),
        "/lease/release" => (Route::Release, Method::Post),
        "/upstream" => (Route::Upstream, Method::Post),
        _ => return Err(Reply::new(404, json!({"error": "not found"}))),
    };
    if method != allow {
        return Err(Reply::new(405, json!({"error": "method not allowed"}))
            .with_header("Allow", allow.to_string()));
    }
    Ok(route)
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let route = match route(req.method(), &req.path()) {
        Ok(route) => route,
        Err(reply) => return reply.into_response(),
    };
    // Who is asking, before any setting is read or the store is touched.
    let auth = AdminAuth::from_env(&env);
    let admin = match route {
        Route::Status => match auth.caller(&req) {
            Caller::Admin => true,
            Caller::Anonymous => false,
            Caller::Refused(reply) => return reply.into_response(),
        },
        Route::Probe | Route::Acquire | Route::Release | Route::Upstream => {
            match auth.require(&req) {
                Access::Allowed => true,
                Access::Denied(reply) => return reply.into_response(),
            }
        }
    };
    let lease = match WorkerLease::from_env(&env) {
        Ok(lease) => lease,
        Err(e) => return Reply::settings(&e).into_response(),
    };
    let reply = match route {
        Route::Upstream => upstream(lease, &env).await,
        Route::Status if admin => lease.status().await,
        Route::Status => lease.public_status().await,
        Route::Probe => lease.probe().await,
        Route::Acquire => lease.acquire().await,
        Route::Release => {
            // Read as text and parsed with serde_json, which the Worker
            // links anyway: `req.json()` would link a second JSON decoder
            // (serde_wasm_bindgen's).
            let body: Value = match req.text().await.map(|text| serde_json::from_str(&text)) {
                Ok(Ok(body)) => body,
                _ => return bad_request("the body must be JSON: {\"etag\": \"...\"}"),
            };
            match body["etag"].as_str() {
                Some(etag) if !etag.is_empty() => lease.release(etag).await,
                _ => {
                    return bad_request(
                        "the body must name the etag you acquired: {\"etag\": \"...\"}",
                    )
                }
            }
        }
    };
    reply.into_response()
}

/// `POST /upstream`: the call, in a free seat of the pool.
async fn upstream(lease: WorkerLease, env: &Env) -> Reply {
    let get = lookup(env);
    let pool = get("POOL_KEY").unwrap_or_else(|| "pools/upstream".into());
    let Some(seats) = get("POOL_SEATS").map_or(Some(2), |v| v.trim().parse().ok()) else {
        return Reply::new(
            500,
            json!({"error": "settings", "message": "POOL_SEATS is not a number"}),
        );
    };
    let work = Duration::from_millis(get("JOB_MS").and_then(|v| v.parse().ok()).unwrap_or(0));
    let lease = &lease.at(&pool);
    let holder = lease.config().holder.clone();
    let ran = lease
        .run(Run::new().pool(seats), |token| async move {
            let started_ms = lease.clock().now().wall.0;
            // The upstream call this seat allows.
            Delay::from(work).await;
            let ended_ms = lease.clock().now().wall.0;
            let call = json!({"token": token, "holder": holder,
                "started_ms": started_ms, "ended_ms": ended_ms});
            let put = StoreOp::Put {
                key: format!("{pool}.calls/{}", holder.replace('/', "-")),
                body: call.to_string().into_bytes(),
                condition: PutCondition::IfAbsent,
            };
            match lease.store().call(put).await.kind {
                ReplyKind::Written { .. } => Ok(call),
                other => Err(format!("recording the call: {}", other.name())),
            }
        })
        .await;
    match ran {
        Ok(RunOutcome::Ran { output, seat, .. }) => {
            Reply::new(200, json!({"seat": seat, "call": output}))
        }
        Ok(RunOutcome::Skipped { expires_at_ms, .. }) => {
            let now = lease.clock().now().wall.0;
            let wait_s = expires_at_ms.saturating_sub(now).div_ceil(1000).max(1);
            Reply::new(429, json!({"busy": true, "seats": seats}))
                .with_header("Retry-After", wait_s.to_string())
        }
        // (A run without a tick or a slot answers neither already-ran nor
        // too-late.)
        Ok(_) => Reply::new(500, json!({"error": "run"})),
        Err(e) => Reply::new(503, json!({"error": e.kind(), "message": e.to_string()})),
    }
}

/// The `scheduled` export, written out instead of `#[event(scheduled)]`:
/// that macro hands the handler a copy of the event without the
/// controller, whose `noRetry()` `WorkerLease::run_cron` calls for a tick
/// that already ran or runs elsewhere.
#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, wasm_bindgen_futures = ::worker::wasm_bindgen_futures)]
pub async fn scheduled(
    event: worker::worker_sys::ScheduledEvent,
    env: Env,
    _ctx: worker::worker_sys::ScheduleContext,
) {
    run_scheduled(&event, env).await;
}

async fn run_scheduled(event: &worker::worker_sys::ScheduledEvent, env: Env) {
    let lease = match WorkerLease::from_env(&env) {
        Ok(lease) => lease,
        Err(e) => {
            console_error!(
                "{}",
                json!({"lease": "failed", "kind": "SettingsError", "error": e.to_string()})
            );
            return;
        }
    };
    let get = lookup(&env);
    let result_key = get("RESULT_KEY").unwrap_or_else(|| "cron/last-run.json".into());
    let work = Duration::from_millis(get("JOB_MS").and_then(|v| v.parse().ok()).unwrap_or(0));
    let scheduled = event.scheduled_time().unwrap_or_default() as u64;
    let lease = &lease;
    // The outcome is logged by the lease (`finished`, `skipped`,
    // `already-ran`, `failed`).
    let _ = lease
        .run_cron(event, |token| async move {
            Delay::from(work).await;
            let cfg = lease.config();
            // The run, recorded under its tick: one object per run.
            let run_key = format!(
                "{result_key}.runs/{scheduled}/{}",
                cfg.holder.replace('/', "-")
            );
            let result = json!({"token": token, "holder": cfg.holder, "scheduled_ms": scheduled});
            let body = result.to_string().into_bytes();
            let put = StoreOp::Put {
                key: run_key,
                body: body.clone(),
                condition: PutCondition::IfAbsent,
            };
            match lease.store().call(put).await.kind {
                ReplyKind::Written { .. } => {}
                other => return Err(format!("recording the run: {}", other.name())),
            }
            let mut write = FenceOp::new(
                cfg.clone(),
                lease_cloudflare::lease::entropy(),
                &result_key,
                token,
                body,
            );
            match drive(&mut write, lease.store(), lease.clock(), |_| {}).await {
                Ok(FenceOutcome::Accepted { .. }) => Ok(result),
                Ok(FenceOutcome::Rejected { current }) => Err(format!(
                    "a newer run (token {current}) already wrote the result"
                )),
                Err(e) => Err(format!("writing the result: {e}")),
            }
        })
        .await;
}
