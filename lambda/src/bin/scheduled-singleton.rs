//! Example function: an EventBridge schedule that must run its job once per
//! tick, never twice at the same time, even when the schedule fires twice
//! or a run overlaps the next. A duplicate delivery of a tick that
//! completed answers `already_ran` from the lease record; a failed run is
//! not recorded, so Lambda's retry runs the tick again.
//!
//! The job writes `RESULT_KEY` (default `scheduled-singleton/last-run.json`)
//! in the lease's bucket as a fenced write stamped with the fencing token:
//! a run that lost the lease cannot overwrite a newer run's result. An
//! event with `"detail": {"work_ms": N}` makes the job take N ms (for
//! trying overlaps); `"detail": {"fail": true}` makes it fail (for trying
//! retries). Settings: see `lease_lambda::singleton`.

use lambda_runtime::{service_fn, Diagnostic, Error, LambdaEvent};
use lease_core::client::drive;
use lease_core::protocol::FenceOp;
use lease_core::{Clock, FenceOutcome, LeaseError};
use lease_lambda::singleton::{diagnostic, RunOutcome, Singleton};
use lease_native::os_entropy;
use serde_json::{json, Value};
use std::fmt;
use std::time::Duration;

/// Why the job failed.
#[derive(Debug)]
enum JobError {
    /// A newer run already wrote its result: ours is stale.
    Fenced { current: u64 },
    /// The store refused the write.
    Store(LeaseError),
    /// The event asked the job to fail (`"detail": {"fail": true}`).
    Asked,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Fenced { current } => {
                write!(f, "a newer run (token {current}) already wrote the result")
            }
            JobError::Store(e) => write!(f, "writing the result: {e}"),
            JobError::Asked => f.write_str("the event asked the job to fail"),
        }
    }
}

async fn handle(
    singleton: &Singleton,
    result_key: &str,
    event: LambdaEvent<Value>,
) -> Result<RunOutcome<Value>, Diagnostic> {
    let work = Duration::from_millis(event.payload["detail"]["work_ms"].as_u64().unwrap_or(0));
    let scheduled = event.payload["time"].clone();
    let fail = event.payload["detail"]["fail"].as_bool().unwrap_or(false);
    singleton
        .run_event(&event, |token| async move {
            let started_at_ms = singleton.clock().now().wall.0;
            tokio::time::sleep(work).await;
            if fail {
                return Err(JobError::Asked);
            }
            let cfg = singleton.config();
            let result = json!({
                "token": token,
                "holder": cfg.holder,
                "scheduled_time": scheduled,
                "started_at_ms": started_at_ms,
                "finished_at_ms": singleton.clock().now().wall.0,
            });
            let mut write = FenceOp::new(
                cfg.clone(),
                os_entropy(),
                result_key,
                token,
                result.to_string().into_bytes(),
            );
            match drive(&mut write, singleton.store(), singleton.clock(), |_| {}).await {
                Ok(FenceOutcome::Accepted { etag }) => {
                    Ok(json!({"result_key": result_key, "etag": etag.as_str(), "result": result}))
                }
                Ok(FenceOutcome::Rejected { current }) => Err(JobError::Fenced { current }),
                Err(e) => Err(JobError::Store(e)),
            }
        })
        .await
        .map_err(diagnostic)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lease_lambda::logging::init();
    let singleton = Singleton::from_env()?;
    let result_key = std::env::var("RESULT_KEY")
        .ok()
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| "scheduled-singleton/last-run.json".to_string());
    lambda_runtime::run(service_fn(|event| handle(&singleton, &result_key, event))).await
}
