//! The fleet lab's shard member: joins the fleet at `LAB_SHARD_PREFIX`
//! that splits `LAB_SHARDS` shards (`Leases::shards`, drain bound
//! `LAB_SHARD_DRAIN_MS`) and works on each shard it owns: every
//! `LAB_SHARD_EVERY_MS` it appends a record to the shard's protected
//! object (`<LAB_SHARD_DATA>/<shard>.log`) with the fenced append and the
//! shard's token from `Assigned`, never after the session's local
//! deadline, and only while `owns(shard)` says so. On `Revoking` it stops
//! the shard's work (an append under way is let finish, or dropped at the
//! drain's bound less a request timeout), then calls `drained`; on
//! `Revoked` alone (the session's term ended) the work has stopped or
//! stops at once. `TERM` makes it leave the fleet (`Shards::leave`: every
//! shard revoked and drained, the session closed), then exit 0, as a pod
//! drained in a rolling deploy.
//!
//! What it believed goes to its journal (see `lease_tests::lab::job`):
//! `shard_join`; the events as they came, `shard_assigned` (`token`),
//! `shard_revoking` (`by_ms`: the bound, from now), `shard_revoked`; the
//! work on a shard, from `shard_begin` to `shard_end` (`reason`:
//! `stopped` for a revocation, `lost` when `owns` said no, `fenced` when
//! the fence refused a record, `drain-bound` when an append was dropped at
//! the bound); `shard_fenced` (`current`), `shard_abandoned` (an append
//! dropped under way: it may still land, and the token decides),
//! `shard_gave_up` (an append that ran out of time once the shard was no
//! longer ours to write), `error` (an append failed while the shard was
//! still ours, or the campaign failed), `shard_leave`, `shard_left`.
//! Every record names `slot`, `pid`, `shard`, `token`, `seq` and `t` (the
//! real time it was made, inside the work's span).

use lease_core::client::{drive, shard_key, Health, ShardEvent, Shards};
use lease_core::protocol::FenceOp;
use lease_core::{Clock, ElectorExit, FenceOutcome, Leases, Mono};
use lease_native::clock::SystemClock;
use lease_native::settings::ReqwestStore;
use lease_tests::lab::job::JobEnv;
use serde_json::json;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;
use tokio::task::JoinHandle;

fn main() -> ExitCode {
    let env = match JobEnv::from_env() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("lab-shard: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let env = Rc::new(env);
    let local = tokio::task::LocalSet::new();
    match local.block_on(&runtime, member(env.clone())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            env.note(json!({"ev": "error", "error": e}));
            ExitCode::from(1)
        }
    }
}

/// What every worker of this member shares.
struct Member {
    env: Rc<JobEnv>,
    leases: Leases<ReqwestStore, SystemClock>,
    shards: Shards<ReqwestStore, SystemClock>,
    /// The protected objects' prefix: shard `i` writes `<data>/<i>.log`.
    data: String,
    every: Duration,
}

/// A shard's worker: told to stop through `stop` (the drain's bound, or
/// now when the shard is already lost).
struct Worker {
    stop: Rc<Cell<Option<Mono>>>,
    done: JoinHandle<()>,
}

fn var<T: std::str::FromStr>(name: &str) -> Result<T, String> {
    std::env::var(name)
        .map_err(|_| format!("{name} is not set"))?
        .parse()
        .map_err(|_| format!("{name} is not a number"))
}

async fn member(env: Rc<JobEnv>) -> Result<(), String> {
    let prefix = std::env::var("LAB_SHARD_PREFIX").map_err(|_| "LAB_SHARD_PREFIX is not set")?;
    let data = std::env::var("LAB_SHARD_DATA").map_err(|_| "LAB_SHARD_DATA is not set")?;
    let n: u32 = var("LAB_SHARDS")?;
    let drain = Duration::from_millis(var("LAB_SHARD_DRAIN_MS")?);
    let every = Duration::from_millis(var("LAB_SHARD_EVERY_MS")?);
    // Registered first: a TERM that comes early is held for the loop.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("TERM handler: {e}"))?;
    let (leases, _) = lease_tests::lab::job::client("lab-shard", SystemClock::from_env()?)?;
    let (shards, campaign) = leases
        .shards(&prefix, n, drain)
        .map_err(|e| e.to_string())?;
    env.note(json!({"ev": "shard_join", "member": shards.session().key(), "shards": n}));
    let campaign = tokio::task::spawn_local(campaign);
    let ctx = Rc::new(Member {
        env: env.clone(),
        leases: leases.clone(),
        shards: shards.clone(),
        data,
        every,
    });
    let clock = leases.clock();
    let mut workers: BTreeMap<u32, Worker> = BTreeMap::new();
    let mut leaving = false;
    loop {
        let event = tokio::select! {
            event = shards.next() => event,
            _ = term.recv(), if !leaving => {
                leaving = true;
                env.note(json!({"ev": "shard_leave"}));
                shards.leave();
                continue;
            }
        };
        let now = clock.now().mono;
        match event {
            None => break,
            Some(ShardEvent::Assigned { shard, token }) => {
                env.note(json!({"ev": "shard_assigned", "shard": shard, "token": token}));
                // A worker of an earlier holding still finishing: the new
                // one starts once it has.
                let previous = workers.remove(&shard).map(|w| {
                    if w.stop.get().is_none() {
                        w.stop.set(Some(now));
                    }
                    w.done
                });
                let stop = Rc::new(Cell::new(None));
                let done = tokio::task::spawn_local(work(
                    ctx.clone(),
                    shard,
                    token,
                    stop.clone(),
                    previous,
                ));
                workers.insert(shard, Worker { stop, done });
            }
            Some(ShardEvent::Revoking { shard, by }) => {
                let by_ms = (by - now).as_millis() as u64;
                env.note(json!({"ev": "shard_revoking", "shard": shard, "by_ms": by_ms}));
                match workers.get(&shard) {
                    // Its work ended already (the fence refused it): done.
                    Some(w) if w.done.is_finished() => shards.drained(shard),
                    Some(w) if w.stop.get().is_none() => w.stop.set(Some(by)),
                    Some(_) => {}
                    None => shards.drained(shard),
                }
            }
            Some(ShardEvent::Revoked { shard }) => {
                env.note(json!({"ev": "shard_revoked", "shard": shard}));
                if let Some(w) = workers.get(&shard) {
                    if w.stop.get().is_none() {
                        w.stop.set(Some(now));
                    }
                }
            }
            Some(other) => env.note(json!({"ev": "shard_other", "event": format!("{other:?}")})),
        }
    }
    for (_, w) in workers {
        if w.stop.get().is_none() {
            w.stop.set(Some(clock.now().mono));
        }
        let _ = w.done.await;
    }
    match campaign.await {
        Ok(ElectorExit::Resigned { .. }) => {
            env.note(json!({"ev": "shard_left"}));
            Ok(())
        }
        Ok(ElectorExit::Failed(e)) => Err(format!("the member's campaign failed: {e}")),
        Err(e) => Err(format!("the member's campaign: {e}")),
    }
}

impl Member {
    /// The session's local deadline, while the member owns `shard` with
    /// `token`.
    fn deadline(&self, shard: u32, token: u64) -> Option<Mono> {
        if self.shards.owns(shard) != Some(token) {
            return None;
        }
        let now = self.leases.clock().now().mono;
        match self.shards.session().leadership().health() {
            Health::Leading { time_left, .. } | Health::RenewalOverdue { time_left, .. } => {
                Some(now + time_left)
            }
            Health::Following => None,
        }
    }

    /// Whether the work on `shard` must stop now.
    fn must_stop(&self, shard: u32, token: u64, stop: &Cell<Option<Mono>>) -> bool {
        stop.get().is_some() || self.shards.owns(shard) != Some(token)
    }

    /// Completes at the drain's bound less a request timeout, once the
    /// work was told to stop: an append still under way then is dropped.
    async fn drain_bound(&self, stop: &Cell<Option<Mono>>) {
        let clock = self.leases.clock();
        let timeout = self.leases.config("").request_timeout;
        loop {
            let now = clock.now().mono;
            let wake = match stop.get() {
                Some(by) if now >= by.saturating_sub(timeout) => return,
                Some(by) => by
                    .saturating_sub(timeout)
                    .min(now + Duration::from_millis(50)),
                None => now + Duration::from_millis(50),
            };
            clock.sleep_until(wake).await;
        }
    }

    /// Appends record `seq` for `shard` with `token`, sent only before
    /// `deadline`: `None` when it was dropped at the drain's bound.
    async fn append(
        &self,
        shard: u32,
        token: u64,
        seq: u64,
        deadline: Mono,
        stop: &Cell<Option<Mono>>,
    ) -> Option<Result<FenceOutcome, lease_core::LeaseError>> {
        let line = json!({
            "slot": self.env.slot, "pid": std::process::id(), "shard": shard,
            "token": token, "seq": seq, "t": lease_tests::lab::now_ms(),
        });
        let key = shard_key(self.shards.prefix(), shard);
        let target = format!("{}/{shard}.log", self.data);
        let mut op = FenceOp::append(
            self.leases.config(&key),
            self.leases.entropy(),
            target,
            token,
            line.to_string(),
        )
        .until(deadline);
        let (store, clock) = (self.leases.store(), self.leases.clock());
        tokio::select! {
            outcome = drive(&mut op, store, clock, |_| {}) => Some(outcome),
            _ = self.drain_bound(stop) => None,
        }
    }
}

/// The work on `shard` while this member holds it with `token`: a record
/// every `every`, until told to stop or the shard is no longer ours.
async fn work(
    ctx: Rc<Member>,
    shard: u32,
    token: u64,
    stop: Rc<Cell<Option<Mono>>>,
    previous: Option<JoinHandle<()>>,
) {
    if let Some(previous) = previous {
        let _ = previous.await;
    }
    let (env, clock) = (&ctx.env, ctx.leases.clock());
    env.note(json!({"ev": "shard_begin", "shard": shard, "token": token}));
    let mut seq = 0u64;
    let reason = loop {
        if stop.get().is_some() {
            break "stopped";
        }
        let Some(deadline) = ctx.deadline(shard, token) else {
            break "lost";
        };
        seq += 1;
        match ctx.append(shard, token, seq, deadline, &stop).await {
            None => {
                env.note(
                    json!({"ev": "shard_abandoned", "shard": shard, "token": token, "seq": seq}),
                );
                break "drain-bound";
            }
            Some(Ok(FenceOutcome::Accepted { .. })) => {}
            Some(Ok(FenceOutcome::Rejected { current })) => {
                env.note(json!({"ev": "shard_fenced", "shard": shard, "token": token, "seq": seq, "current": current}));
                break "fenced";
            }
            Some(Err(e)) => {
                let ours = !ctx.must_stop(shard, token, &stop) && clock.now().mono < deadline;
                let ev = if ours { "error" } else { "shard_gave_up" };
                env.note(json!({"ev": ev, "shard": shard, "token": token, "seq": seq,
                    "error": format!("shard {shard} record {seq}: {e}")}));
            }
        }
        // The pause before the next record, woken to notice a stop.
        let next = clock.now().mono + ctx.every;
        while clock.now().mono < next && !ctx.must_stop(shard, token, &stop) {
            let wake = next.min(clock.now().mono + Duration::from_millis(50));
            clock.sleep_until(wake).await;
        }
    };
    env.note(json!({"ev": "shard_end", "shard": shard, "token": token, "records": seq, "reason": reason}));
    // Revoking: the work is done, the shard can go (no effect otherwise).
    ctx.shards.drained(shard);
}
