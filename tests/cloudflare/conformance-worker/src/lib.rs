//! A Worker for the tests only: the store conformance lifecycle
//! (`lease_conformance`) run inside workerd on the store the Worker's
//! settings name, as the adapter reads them (`lease_cloudflare::settings`):
//! the R2 binding in `LEASE_R2_BINDING`, a store that exists only inside a
//! Worker, or signed `fetch()` to an S3-compatible endpoint.
//!
//! `POST /conformance` with `{"protocol": "cas", "expect": "supported"}`
//! (`expect`: `supported` or `refused`; an optional `prefix` for the keys)
//! answers 200 with the run's verdict (`lease_conformance::verdict_json`).
//! The run writes to the bucket, so the route needs `Authorization: Bearer
//! <LEASE_ADMIN_TOKEN>` as the example Worker's acting routes do (401
//! without it, 403 while the secret is not set: `lease_cloudflare::auth`).
//! With signed fetch, the missing-bucket step uses the same settings with
//! the bucket `no-such-bucket`; a binding has no bucket to miss.

use lease_cloudflare::auth::{self, Access};
use lease_cloudflare::clock::WorkerClock;
use lease_cloudflare::fetch::FetchTransport;
use lease_cloudflare::lease::{entropy, Reply};
use lease_cloudflare::settings::{self, lookup, StoreSettings, WorkerStore};
use lease_conformance::{lifecycle, verdict_json, Expect, Options, Subject};
use lease_core::Protocol;
use serde_json::{json, Value};
use std::rc::Rc;
use std::time::Duration;
use worker::*;

/// How long one store request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The bucket the missing-bucket step names.
const MISSING_BUCKET: &str = "no-such-bucket";

fn bad_request(message: &str) -> Result<Response> {
    Reply::new(400, json!({"error": "request", "message": message})).into_response()
}

/// The store the environment names, and the same on a bucket that does
/// not exist (signed fetch only).
fn subject(env: &Env) -> std::result::Result<Subject<WorkerStore, WorkerClock>, Reply> {
    let clock = WorkerClock::new();
    let (store, name) =
        settings::store(env, &clock, REQUEST_TIMEOUT).map_err(|e| Reply::settings(&e))?;
    let missing_bucket = match &store {
        WorkerStore::Binding(_) => None,
        WorkerStore::Signed(_) => {
            let mut missing =
                StoreSettings::from_lookup(lookup(env)).map_err(|e| Reply::settings(&e))?;
            missing.bucket = MISSING_BUCKET.into();
            let store = missing
                .http_store(FetchTransport::new(REQUEST_TIMEOUT), clock.clone())
                .map_err(|e| Reply::settings(&e))?;
            Some(WorkerStore::Signed(Box::new(store)))
        }
    };
    Ok(Subject {
        name: format!("{name} in workerd"),
        store: Rc::new(store),
        clock,
        entropy,
        missing_bucket,
    })
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> Result<Response> {
    if req.path() != "/conformance" {
        return Reply::new(404, json!({"error": "not found"})).into_response();
    }
    if req.method() != Method::Post {
        return Reply::new(405, json!({"error": "method not allowed"}))
            .with_header("Allow", "POST")
            .into_response();
    }
    if let Access::Denied(reply) = auth::require(&req, &env) {
        return reply.into_response();
    }
    let body: Value = match req.json().await {
        Ok(body) => body,
        Err(_) => {
            return bad_request(
                "the body must be JSON: {\"protocol\": \"cas\", \"expect\": \"supported\"}",
            )
        }
    };
    let Some(protocol) = body["protocol"].as_str().and_then(Protocol::parse) else {
        return bad_request("`protocol` must be cas, epochs or mutex");
    };
    let expect = match body["expect"].as_str() {
        Some("supported") => Expect::Supported,
        Some("refused") => Expect::Refused,
        _ => return bad_request("`expect` must be supported or refused"),
    };
    let mut options = Options::real_time();
    // R2 spaces writes to a key 1 s apart: the short lease of the expiry
    // step renews no faster than that (ttl 4 s renews every 1.33 s).
    options.expiry_ttl = std::time::Duration::from_secs(4);
    if let Some(prefix) = body["prefix"].as_str() {
        options.prefix = prefix.into();
    }
    let subject = match subject(&env) {
        Ok(subject) => subject,
        Err(reply) => return reply.into_response(),
    };
    let verdict = lifecycle(&subject, protocol, expect, &options).await;
    Reply::new(200, verdict_json(&verdict)).into_response()
}
