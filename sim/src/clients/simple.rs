//! A simple client of the one-object format, written here as another
//! implementation would be: only the store and the node's clock, none of
//! lease-core's machines (`ClientKind::Simple`). Its record is
//! `{"expires_at": <s>, "token": <n>, "holder": <its name>}`, the token
//! left out by half of them; the key is shared with cas clients, and the
//! checker judges its jobs with theirs (`docs/protocols.md`, "Simple
//! clients on the same key": mutual exclusion holds).

use super::env::{work, Env};
use super::processes::first_of;
use lease_core::store::{PutCondition, ReplyKind};
use lease_core::{Clock, Entropy, Etag, LeaseRecord, Mono, Store, StoreOp, StoreReply, UnixMillis};
use std::time::Duration;

/// What it keeps between the store's time it writes into its record and
/// the end of its own work: the `Date`'s second (it writes the earliest
/// the store's time may have been at its read), the front ends' skew and
/// more, and its clock's drift (up to 2 % of the ttl). It judges another's
/// record free only this long after its expiry, by the `Date`.
const SPARE: Duration = Duration::from_millis(1_500);

/// Takes the key whenever it is missing or expired, works while its own
/// record is live by its reckoning, gives it back, and tries again later;
/// until the world ends.
pub(super) async fn simple_proc(env: Env, mut rng: Entropy) {
    let clock = env.clock();
    let holder = format!("simple-{}", env.pid);
    let with_token = env.pid % 2 == 0;
    let ttl = env.cfg.ttl;
    loop {
        if let Some((etag, token, valid_until)) = take(&env, &holder, with_token).await {
            if clock.now().mono < valid_until {
                let len = env.rng_duration(&mut rng, Duration::ZERO, ttl);
                let job = work(env.clone(), token, len, None, false);
                first_of(clock.sleep_until(valid_until), job).await;
            }
            // Given back: an expiry long past, the token kept.
            let body = record(0, token, with_token, &holder);
            let _ = put(&env, body, PutCondition::IfMatch(etag)).await;
        }
        let gap = env.rng_duration(&mut rng, ttl / 8, ttl / 2);
        clock.sleep_until(clock.now().mono + gap).await;
    }
}

/// One attempt: a read, and a write if the key is missing or expired.
/// The etag and token of its record if it landed, and the local instant
/// its work must end by.
async fn take(env: &Env, holder: &str, with_token: bool) -> Option<(Etag, u64, Mono)> {
    let (store, clock) = (env.store(), env.clock());
    let key = env.cfg.key.clone();
    let read_sent = clock.now().mono;
    let read = store.call(StoreOp::Get { key: key.clone() }).await;
    let earliest = read.date?.earliest();
    let (condition, seen) = match read.kind {
        ReplyKind::Missing => (PutCondition::IfAbsent, 0),
        ReplyKind::Found { etag, body } => {
            let r = LeaseRecord::decode(&body).ok()?;
            if r.expires_at.0 + SPARE.as_millis() as u64 >= earliest.0 {
                return None;
            }
            (PutCondition::IfMatch(etag), r.token)
        }
        _ => return None,
    };
    let token = if with_token { seen + 1 } else { 0 };
    let ttl = env.cfg.ttl;
    let expires = earliest.0 + ttl.as_millis() as u64;
    let body = record(expires, token, with_token, holder);
    let valid_until = read_sent + ttl.saturating_sub(SPARE + ttl / 50);
    let etag = match put(env, body.clone(), condition).await.kind {
        ReplyKind::Written { etag: Some(etag) } => etag,
        // No etag, or no clear answer: its record is at the key or not.
        ReplyKind::Written { etag: None }
        | ReplyKind::Transport { .. }
        | ReplyKind::ServerError { .. } => match store.call(StoreOp::Get { key }).await.kind {
            ReplyKind::Found { etag, body: now } if now == body => etag,
            _ => return None,
        },
        _ => return None,
    };
    Some((etag, token, valid_until))
}

async fn put(env: &Env, body: Vec<u8>, condition: PutCondition) -> StoreReply {
    let key = env.cfg.key.clone();
    env.store()
        .call(StoreOp::Put {
            key,
            body,
            condition,
        })
        .await
}

/// Its record: `expires_at` (ms since the UNIX epoch, written in seconds),
/// the token if it writes one, its name.
fn record(expires_ms: u64, token: u64, with_token: bool, holder: &str) -> Vec<u8> {
    let expires = UnixMillis(expires_ms).as_secs_f64();
    let token = if with_token {
        format!(r#","token":{token}"#)
    } else {
        String::new()
    };
    format!(r#"{{"expires_at":{expires}{token},"holder":"{holder}"}}"#).into_bytes()
}
