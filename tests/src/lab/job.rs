//! What the lab's processes do while they believe they hold the lease: a
//! job that appends a start record to the protected object with the
//! project's fenced append ([`FenceOp::append`]), works, and appends an end
//! record; and the local journal of what the process believed, one JSON
//! line per event, appended to a file per process slot.
//!
//! Journal events (`ev`): `begin` (the start record was accepted: the job
//! works from here), `finishing` (the work is done, the end record is
//! about to be written: the belief ends here), `end` (`accepted` true or
//! false), `fenced` (the start record was refused: a newer token wrote),
//! `aborted` (the service's lease ended first: the work stopped), `leader`
//! and `lost` (the service's elector), `error`, `alive` (a heartbeat of a
//! process a `lease run` job started, for the job `job_pid`). Times are the real wall
//! clock in Unix milliseconds (`t`), never a lease clock with an offset.

use lease_core::client::drive;
use lease_core::protocol::FenceOp;
use lease_core::settings::lease_key;
use lease_core::{FenceOutcome, LeaseError, Leases, Settings};
use lease_native::clock::SystemClock;
use lease_native::os_entropy;
use lease_native::settings::{self, ReqwestStore, StoreSettings};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;

/// The `lease run` (or service) this process works for: `LAB_OWNER` when
/// its job passed it on (a daemon has left the process group), else its
/// process group, which the lab gives each process it starts (on Linux
/// `lease run`'s job stays in it). The checker ties jobs to it.
pub fn owner() -> u64 {
    if let Some(owner) = std::env::var("LAB_OWNER").ok().and_then(|o| o.parse().ok()) {
        return owner;
    }
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| lease_cli::job::parse_stat(&s))
        .map_or(0, |(_, _, pgrp)| u64::from(pgrp))
}

/// The settings every lab process reads from its environment.
pub struct JobEnv {
    /// The process slot (`LAB_SLOT`).
    pub slot: u64,
    /// The protected object's key (`LAB_FENCE_KEY`).
    pub fence_key: String,
    /// The journal file (`LAB_JOURNAL`).
    pub journal: PathBuf,
}

impl JobEnv {
    /// From `LAB_SLOT`, `LAB_FENCE_KEY` and `LAB_JOURNAL`.
    pub fn from_env() -> Result<JobEnv, String> {
        let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
        Ok(JobEnv {
            slot: var("LAB_SLOT")?
                .parse()
                .map_err(|_| "LAB_SLOT is not a number".to_string())?,
            fence_key: var("LAB_FENCE_KEY")?,
            journal: PathBuf::from(var("LAB_JOURNAL")?),
        })
    }

    /// Appends one event to the journal, stamped with the real time, the
    /// slot and the pid.
    pub fn note(&self, mut event: Value) {
        event["t"] = json!(super::now_ms());
        event["slot"] = json!(self.slot);
        event["pid"] = json!(std::process::id());
        event["ppid"] = json!(std::os::unix::process::parent_id());
        event["owner"] = json!(owner());
        let mut line = event.to_string();
        line.push('\n');
        // One write(2) of a short line to a file opened for appending: the
        // lines of concurrent writers never interleave.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.journal)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }

    /// Appends `{slot, pid, token, seq, phase}` to the protected object
    /// for the holder of `token`.
    pub async fn record(
        &self,
        (cfg, store, clock): (
            &lease_core::LeaseConfig,
            &ReqwestStore,
            &lease_native::clock::SystemClock,
        ),
        token: u64,
        seq: u64,
        phase: &str,
        deadline: Option<lease_core::Mono>,
    ) -> Result<FenceOutcome, LeaseError> {
        let line = json!({
            "slot": self.slot, "pid": std::process::id(), "token": token,
            "seq": seq, "phase": phase, "t": super::now_ms(),
        });
        let mut op = FenceOp::append(
            cfg.clone(),
            os_entropy(),
            self.fence_key.clone(),
            token,
            line.to_string(),
        );
        if let Some(deadline) = deadline {
            op = op.until(deadline);
        }
        drive(&mut op, store, clock, |_| {}).await
    }
}

/// A lab process's client on the store and lease the environment names
/// (as for `lease`; the holder `LEASE_HOLDER`, else `default_holder`), on
/// `clock`, with the key of its lease: [`Leases::config`] of that key is
/// the configuration with the store's limits applied.
pub fn client(
    default_holder: &str,
    clock: SystemClock,
) -> Result<(Leases<ReqwestStore, SystemClock>, String), String> {
    let store_settings = StoreSettings::from_lookup(settings::env).map_err(|e| e.to_string())?;
    let key = lease_key(settings::env).map_err(|e| e.to_string())?;
    let lease = Settings::from_lookup(settings::env, || default_holder.into())
        .map_err(|e| e.to_string())?;
    let timeout = lease.config(&key).request_timeout;
    let store = settings::store(&store_settings, timeout).map_err(|e| e.to_string())?;
    let leases = Leases::with_config(store, clock, lease.config(""), false, os_entropy)
        .map_err(|e| e.to_string())?;
    Ok((leases, key))
}
