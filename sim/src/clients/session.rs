//! The session clients ([`ClientKind::Session`](super::ClientKind::Session)):
//! a process with a session, owning keys under it.

use super::config::session_key;
use super::env::{job, said_of, Env, Says};
use super::handles::SimClock;
use super::processes::{first_of, process_client, run_beside, sample, sample_gap, sample_owns};
use super::state::Said;
use crate::world::clock::EPOCH;
use core::cell::Cell;
use core::future::pending;
use lease_core::{Clock, Entropy, Mono};
use lease_core::{OwnOutcome, Session};
use std::time::Duration;

impl Says for OwnOutcome {
    fn said(&self) -> Said {
        match self {
            OwnOutcome::Owned(owned) => Said::Acquired {
                token: owned.token,
                session: None,
            },
            OwnOutcome::Busy(b) => Said::Busy {
                holder: b.holder.clone(),
                token: b.token,
                expires: b.expires_at.0.saturating_sub(EPOCH.0),
            },
            OwnOutcome::NoSession => Said::Other("no session".into()),
            // `OwnOutcome` is non-exhaustive outside lease-core.
            other => Said::Other(format!("an outcome the simulator does not know: {other:?}")),
        }
    }
}

/// A process with a session at its node's [`session_key`], as a service
/// that owns partitions would run one: the campaign; work in each term
/// (own up to every key in a random order, then a job on each key owned,
/// each stopped when the term ends, and each key kept for the next term's
/// `own` or given back, half and half, a give-back in two handed over to
/// another session process); a `close()` at `stop_after`; and
/// the answers of `owns()` for every key and of the session's lease
/// sampled every ttl/40 to ttl/8 (every 20 ms for two seconds after the
/// close).
///
/// Judged as the other clients are, per key: each `own` ("own", on the
/// key's lease) and `disown` ("disown") by the outcome rules, the jobs on
/// each key by the job rules, the samples by the services' rule, all
/// against the store's truth of an owned key: held while its session's
/// term is ([`Inner::settle_owned`](super::state::Inner::settle_owned)).
pub(super) async fn session_proc(
    env: Env,
    mut rng: Entropy,
    stop_after: Option<Duration>,
    job_max: Duration,
) {
    let mut senv = env.clone();
    let keys: Vec<(&'static str, Env)> = env.with(|w| {
        let skey = session_key(env.node);
        senv.lease = w
            .keys
            .iter()
            .position(|k| *k == skey)
            .expect("a followed session key");
        w.cfg
            .owned_keys()
            .into_iter()
            .map(|key| {
                let mut kenv = env.clone();
                kenv.lease = w
                    .keys
                    .iter()
                    .position(|k| k == key)
                    .expect("a followed key");
                (key, kenv)
            })
            .collect()
    });
    // The holders of the other session processes: successors to hand a
    // key to.
    let successors: Vec<String> = env.with(|w| {
        let clients = &w.cfg.clients;
        (0..clients.len())
            .filter(|&n| n != env.node && clients[n] == super::ClientKind::Session)
            .map(|n| w.cfg.lease_config(n).holder)
            .collect()
    });
    let leases = process_client(&env, false);
    let (session, campaign) = leases.session(&session_key(env.node));
    let clock = env.clock();
    let closed_at: Cell<Option<Mono>> = Cell::new(None);
    let mut work_rng = rng.fork();
    let work = async {
        while session.until_open().await.is_ok() {
            let lost = session.lost();
            let mut order: Vec<usize> = (0..keys.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, (work_rng.unit() * (i + 1) as f64) as usize % (i + 1));
            }
            let mut held = Vec::new();
            for &i in &order {
                let (key, kenv) = &keys[i];
                // Kept from an earlier round of this term: no request.
                if let Some(token) = session.owns(key) {
                    held.push((i, token));
                    continue;
                }
                let op = kenv.op_start("own", Some(Duration::ZERO));
                let owned = session.own(key).await;
                kenv.say(op, said_of(&owned, true));
                kenv.op_end(op);
                if let Ok(OwnOutcome::Owned(o)) = owned {
                    held.push((i, o.token));
                }
            }
            let jobs = async {
                for &(i, token) in &held {
                    // Only on a key still owned (the term may have ended).
                    if session.owns(keys[i].0) != Some(token) {
                        continue;
                    }
                    let len = env
                        .rng_duration(&mut work_rng, Duration::ZERO, job_max)
                        .max(Duration::from_millis(10));
                    job(keys[i].1.clone(), token, len, None).await;
                }
            };
            first_of(lost, jobs).await;
            for &(i, _) in &held {
                if work_rng.unit() < 0.5 {
                    let (key, kenv) = &keys[i];
                    // Half of the give-backs hand the key to another
                    // session process (which takes it when its own round
                    // comes, or leaves it to the grace's end).
                    let to = (!successors.is_empty() && work_rng.unit() < 0.5).then(|| {
                        let pick = (work_rng.unit() * successors.len() as f64) as usize;
                        successors[pick.min(successors.len() - 1)].as_str()
                    });
                    let op = kenv.op_start("disown", None);
                    let released = match to {
                        Some(to) => session.hand_over(key, to).await,
                        None => session.disown(key).await,
                    };
                    kenv.say(op, said_of(&released, false));
                    kenv.op_end(op);
                }
            }
            // Between terms' work, a pause of up to a ttl.
            let rest = env.rng_duration(&mut work_rng, Duration::ZERO, env.cfg.ttl);
            clock.sleep_until(clock.now().mono + rest).await;
        }
    };
    let closer = async {
        if let Some(after) = stop_after {
            clock.sleep_until(clock.now().mono + after).await;
            session.close();
            closed_at.set(Some(clock.now().mono));
            sample_all(&senv, &keys, &session, true);
        }
        pending::<()>().await
    };
    let sampler = async {
        loop {
            let now = clock.now().mono;
            let gap = sample_gap(&env, &mut rng, now, closed_at.get());
            clock.sleep_until(now + gap).await;
            sample_all(&senv, &keys, &session, closed_at.get().is_some());
        }
    };
    let op = senv.op_start("session", None);
    // The session's renewals belong to it, whatever operation on a key is
    // under way.
    senv.with(|w| w.procs[senv.pid].lease_op = Some((senv.lease, op)));
    run_beside(campaign, closer, work, sampler).await;
    senv.op_end(op);
}

/// Notes what the session answers now: its lease, on the session's lane,
/// and `owns()` for every key, on the key's.
fn sample_all(
    senv: &Env,
    keys: &[(&'static str, Env)],
    session: &Session<super::handles::SimStore, SimClock>,
    closed: bool,
) {
    sample(senv, session.leadership(), closed);
    for (key, kenv) in keys {
        let token = session.owns(key);
        sample_owns(kenv, token, closed);
    }
}
