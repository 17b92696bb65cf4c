//! Example Worker: a cron job guarded by a lease, and the lease's HTTP
//! endpoints. Settings: `lease_cloudflare::settings`; `wrangler.toml`.
//!
//! - `scheduled`: one run per tick, never two at once. The job records its
//!   run at `RESULT_KEY.runs/<scheduled time>/<holder>` and writes
//!   `RESULT_KEY` as a fenced write stamped with the token, so a run that
//!   lost the lease cannot overwrite a newer run's result. `JOB_MS` makes
//!   the job take that long (for trying overlaps).
//! - `GET /lease`: the lease as stored (holder, token, expires, released).
//! - `GET /lease/probe`: the capability probe's report for this store.
//! - `POST /lease/acquire`: take the lease by hand (200, or 409 busy).
//! - `POST /lease/release` with `{"etag": "..."}`: give it back.

use lease_cloudflare::lease::{Reply, WorkerLease};
use lease_cloudflare::settings::lookup;
use lease_core::drive::{drive, Store};
use lease_core::fence::{FenceOp, FenceOutcome};
use lease_core::store::{PutCondition, ReplyKind, StoreOp};
use serde_json::{json, Value};
use std::time::Duration;
use worker::*;

fn respond(reply: Reply) -> Result<Response> {
    Ok(Response::from_json(&reply.body)?.with_status(reply.status))
}

fn bad_request(message: &str) -> Result<Response> {
    respond(Reply {
        status: 400,
        body: json!({"error": "request", "message": message}),
    })
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let route = (req.method(), req.path());
    let lease = match route.1.as_str() {
        "/lease" | "/lease/probe" | "/lease/acquire" | "/lease/release" => {
            match WorkerLease::from_env(&env) {
                Ok(lease) => lease,
                Err(e) => return respond(Reply::settings(&e)),
            }
        }
        _ => {
            return respond(Reply {
                status: 404,
                body: json!({"error": "not found"}),
            })
        }
    };
    match route {
        (Method::Get, p) if p == "/lease" => respond(lease.status().await),
        (Method::Get, p) if p == "/lease/probe" => respond(lease.probe().await),
        (Method::Post, p) if p == "/lease/acquire" => respond(lease.acquire().await),
        (Method::Post, p) if p == "/lease/release" => {
            let body: Value = match req.json().await {
                Ok(body) => body,
                Err(_) => return bad_request("the body must be JSON: {\"etag\": \"...\"}"),
            };
            match body["etag"].as_str() {
                Some(etag) if !etag.is_empty() => respond(lease.release(etag).await),
                _ => bad_request("the body must name the etag you acquired: {\"etag\": \"...\"}"),
            }
        }
        _ => respond(Reply {
            status: 405,
            body: json!({"error": "method not allowed"}),
        }),
    }
}

#[event(scheduled)]
async fn scheduled(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
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
    let scheduled = event.schedule() as u64;
    let lease = &lease;
    let outcome = lease
        .run(|token| async move {
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
    if let Ok(outcome) = outcome {
        console_log!(
            "{}",
            json!({"job": outcome_name(&outcome), "scheduled_ms": scheduled})
        );
    }
}

fn outcome_name<T>(outcome: &lease_core::singleton::SingletonOutcome<T>) -> &'static str {
    match outcome {
        lease_core::singleton::SingletonOutcome::Ran { .. } => "ran",
        lease_core::singleton::SingletonOutcome::Skipped { .. } => "skipped",
    }
}
