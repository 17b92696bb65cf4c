//! The shard clients ([`ClientKind::Shard`](super::ClientKind::Shard)):
//! members of a fleet that splits shards.

use super::config::SHARD_PREFIX;
use super::env::{job, Env};
use super::handles::{SimClock, SimStore};
use super::processes::{first_of, process_client, sample, sample_owns};
use super::state::Said;
use core::cell::RefCell;
use core::future::{pending, poll_fn, Future};
use core::pin::{pin, Pin};
use core::task::Poll;
use lease_core::client::{coordinator_key, member_key, shard_key};
use lease_core::{Clock, Entropy};
use lease_core::{ShardEvent, Shards};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

type Work = Pin<Box<dyn Future<Output = ()>>>;

/// A member of the fleet at [`SHARD_PREFIX`], as a service that owns
/// partitions would run one (`Leases::shards`): the campaign; for each
/// `Assigned` shard, jobs on it one after another while `owns()` says so,
/// stopped at its term's end; on `Revoking`, the work goes on until it is
/// drained, at once (seven in ten) or after up to most of the drain's
/// bound (two in ten), then stopped and `drained()` called; or (one in
/// ten) stopped just before the bound without a word (the bound gives it
/// back); on `Revoked`, the work dropped; `leave()` at `stop_after`; `owns()` for every shard and the
/// coordinator's and session's answers sampled every ttl/40 to ttl/8.
///
/// Judged per shard as every lease is: jobs never overlap and stay within
/// their shard's validity, every yes is backed by the store, an `Assigned`
/// ("shard assigned") is an acquisition whose token rises; and the fleet
/// by the shard rules (balance and coverage once it is quiet).
pub(super) async fn shard_proc(env: Env, mut rng: Entropy, stop_after: Option<Duration>) {
    let (count, ttl) = env.with(|w| (w.cfg.shards, w.cfg.ttl));
    let drain = ttl / 2;
    let holder = env.cfg.holder.clone();
    let lane_of = |key: &str| env.with(|w| w.keys.iter().position(|k| k == key));
    let env_at = |key: &str| {
        let mut e = env.clone();
        e.lease = lane_of(key).expect("a followed key");
        e
    };
    let shard_envs: Vec<Env> = (0..count)
        .map(|i| env_at(&shard_key(SHARD_PREFIX, i)))
        .collect();
    let member_env = env_at(&member_key(SHARD_PREFIX, &holder));
    let coordinator_env = env_at(&coordinator_key(SHARD_PREFIX));
    let leases = process_client(&env, false);
    let (shards, campaign) = leases
        .shards(SHARD_PREFIX, count, drain)
        .expect("a valid fleet");
    let clock = env.clock();
    let op = member_env.op_start("shard member", None);
    let works: Rc<RefCell<BTreeMap<u32, Work>>> = Rc::default();
    // Revoked shards' drains under way, and the shards whose work they
    // stopped (the work is dropped once every future was polled).
    let drainers: Rc<RefCell<Vec<Work>>> = Rc::default();
    let stopped: Rc<RefCell<Vec<u32>>> = Rc::default();
    let mut work_rng = rng.fork();
    let events = async {
        while let Some(event) = shards.next().await {
            match event {
                ShardEvent::Assigned { shard, token } => {
                    // Said while it is so (the event may be read late).
                    if shards.owns(shard) != Some(token) {
                        continue;
                    }
                    let senv = shard_envs[shard as usize].clone();
                    let assigned = senv.op_start("shard assigned", None);
                    senv.say(
                        assigned,
                        Said::Acquired {
                            token,
                            session: None,
                        },
                    );
                    senv.op_end(assigned);
                    let lens: Vec<Duration> = (0..8)
                        .map(|_| env.rng_duration(&mut work_rng, Duration::from_millis(10), ttl))
                        .collect();
                    let member = shards.clone();
                    let work = async move {
                        let lost = member.session().lost();
                        let jobs = async {
                            for len in lens.into_iter().cycle() {
                                if member.owns(shard) != Some(token) {
                                    break;
                                }
                                job(senv.clone(), token, len, None).await;
                            }
                        };
                        first_of(lost, jobs).await;
                    };
                    works.borrow_mut().insert(shard, Box::pin(work));
                }
                ShardEvent::Revoking { shard, by } => {
                    // The work goes on until the drain: at once (seven in
                    // ten), after up to most of the drain's bound (two in
                    // ten), or, never calling `drained`, stopped just
                    // before the bound (the library gives it back then).
                    let draw = work_rng.unit();
                    let now = clock.now().mono;
                    let last = by.saturating_sub(Duration::from_millis(50)).max(now);
                    let (at, tell) = if draw < 0.7 {
                        (now, true)
                    } else if draw < 0.9 {
                        let most = last - now;
                        (
                            now + env.rng_duration(&mut work_rng, Duration::ZERO, most),
                            true,
                        )
                    } else {
                        (last, false)
                    };
                    let (member, stop, c) = (shards.clone(), stopped.clone(), clock.clone());
                    let drainer = async move {
                        c.sleep_until(at).await;
                        stop.borrow_mut().push(shard);
                        if tell {
                            member.drained(shard);
                        }
                    };
                    drainers.borrow_mut().push(Box::pin(drainer));
                }
                ShardEvent::Revoked { shard } => {
                    works.borrow_mut().remove(&shard);
                }
                // `ShardEvent` is non-exhaustive outside lease-core.
                other => unreachable!("an event the simulator does not know: {other:?}"),
            }
        }
    };
    let leaver = async {
        if let Some(after) = stop_after {
            clock.sleep_until(clock.now().mono + after).await;
            shards.leave();
            // A disruption of the fleet, for the shard rules.
            env.with(|w| w.fault(Some(env.pid), "member leaves"));
        }
        pending::<()>().await
    };
    let sampler = async {
        loop {
            let gap = env.rng_duration(&mut rng, ttl / 40, ttl / 8);
            clock.sleep_until(clock.now().mono + gap).await;
            sample_all(&shards, &shard_envs, &member_env, &coordinator_env);
        }
    };
    let (mut campaign, mut events) = (pin!(campaign), pin!(events));
    let (mut leaver, mut sampler) = (pin!(leaver), pin!(sampler));
    let (mut campaign_done, mut events_done) = (false, false);
    poll_fn(|cx| {
        if !campaign_done {
            campaign_done = campaign.as_mut().poll(cx).is_ready();
        }
        let _ = leaver.as_mut().poll(cx);
        if !events_done {
            events_done = events.as_mut().poll(cx).is_ready();
        }
        // The drains first, then the works (an event may add or drop one:
        // each is taken out while polled).
        let mut draining = std::mem::take(&mut *drainers.borrow_mut());
        draining.retain_mut(|d| d.as_mut().poll(cx).is_pending());
        drainers.borrow_mut().extend(draining);
        for shard in std::mem::take(&mut *stopped.borrow_mut()) {
            works.borrow_mut().remove(&shard);
        }
        let mut running = std::mem::take(&mut *works.borrow_mut());
        running.retain(|_, w| w.as_mut().poll(cx).is_pending());
        let mut now = works.borrow_mut();
        for (shard, w) in running {
            now.entry(shard).or_insert(w);
        }
        drop(now);
        let _ = sampler.as_mut().poll(cx);
        if campaign_done && events_done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    works.borrow_mut().clear();
    drainers.borrow_mut().clear();
    member_env.op_end(op);
}

/// Notes what the member answers now: `owns()` for every shard, on the
/// shard's lane, and its session and coordinator campaigns on theirs.
fn sample_all(
    shards: &Shards<SimStore, SimClock>,
    shard_envs: &[Env],
    member_env: &Env,
    coordinator_env: &Env,
) {
    sample(member_env, shards.session().leadership(), false);
    sample(coordinator_env, shards.coordinator(), false);
    for (shard, senv) in shard_envs.iter().enumerate() {
        let token = shards.owns(shard as u32);
        sample_owns(senv, token, false);
    }
}
