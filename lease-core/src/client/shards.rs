//! Shard ownership: a fleet splits `n` shards among its live members,
//! balanced, and moves them when a member joins, leaves or dies (see the
//! layer's docs, `client/mod.rs`, and `docs/protocols.md`, "Shards").

use crate::client::leadership::{join, race, Leadership, Versioned, Watched};
use crate::client::session::{OwnOutcome, Session};
use crate::client::Leases;
use crate::protocol::elector::ElectorExit;
use crate::protocol::verdict::OneCall;
use crate::settings::SettingsError;
use crate::store::{Etag, PutCondition, ReplyKind, Store, StoreOp};
use crate::time::{Clock, Mono};
use core::fmt;
use core::future::Future;
use core::pin::pin;
use core::task::Waker;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// The most shards a fleet may split.
pub const MAX_SHARDS: u32 = 4096;

/// The key of shard `shard` of the fleet at `prefix`: `<prefix>/shards/<shard>`,
/// a key owned under its owner's session, with its own fencing token.
pub fn shard_key(prefix: &str, shard: u32) -> String {
    format!("{prefix}/shards/{shard}")
}

/// The session key of member `holder` of the fleet at `prefix`:
/// `<prefix>/members/<holder>`.
pub fn member_key(prefix: &str, holder: &str) -> String {
    format!("{prefix}/members/{holder}")
}

/// The object that says which member each shard is assigned to, written by
/// the fleet's coordinator: `<prefix>/assignment`.
pub fn assignment_key(prefix: &str) -> String {
    format!("{prefix}/assignment")
}

/// The lease of the fleet's coordinator: `<prefix>/coordinator`.
pub fn coordinator_key(prefix: &str) -> String {
    format!("{prefix}/coordinator")
}

/// What happened to a shard of this member, in this order for each shard:
/// `Assigned`, then either `Revoking` and `Revoked` (the fleet moved it:
/// stop the work, then call [`Shards::drained`]) or `Revoked` alone (the
/// session's term ended: the shard is already lost, its work must have
/// stopped at [`Shards::owns`]'s no).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardEvent {
    /// The shard is this member's, with its fencing token: start its work.
    Assigned {
        /// The shard.
        shard: u32,
        /// Its fencing token.
        token: u64,
    },
    /// The fleet moved the shard to another member: finish its work and
    /// call [`Shards::drained`]; it is given back then, or at `by`.
    Revoking {
        /// The shard.
        shard: u32,
        /// The drain's bound, on the member's clock: the work must have
        /// stopped by then, drained or not (the shard is given back at the
        /// member's first round after it).
        by: Mono,
    },
    /// The shard is no longer this member's.
    Revoked {
        /// The shard.
        shard: u32,
    },
}

#[derive(Debug)]
struct Held {
    token: u64,
    /// When its revocation began (local), and whether the user drained it.
    revoking: Option<(Mono, bool)>,
}

#[derive(Debug, Default)]
struct State {
    events: VecDeque<ShardEvent>,
    held: BTreeMap<u32, Held>,
    leaving: bool,
    ended: bool,
    version: u64,
    wakers: Vec<Waker>,
}

impl Versioned for State {
    fn versioned(&mut self) -> (&mut u64, &mut Vec<Waker>) {
        (&mut self.version, &mut self.wakers)
    }
}

/// A member of a fleet that splits shards (see [`Leases::shards`]). Clones
/// share it.
pub struct Shards<S, C> {
    session: Session<S, C>,
    coordinator: Leadership<C>,
    prefix: String,
    shards: u32,
    drain: Duration,
    state: Arc<Watched<State>>,
}

impl<S, C: Clone> Clone for Shards<S, C> {
    fn clone(&self) -> Self {
        Shards {
            session: self.session.clone(),
            coordinator: self.coordinator.clone(),
            prefix: self.prefix.clone(),
            shards: self.shards,
            drain: self.drain,
            state: self.state.clone(),
        }
    }
}

impl<S, C> fmt::Debug for Shards<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shards")
            .field("prefix", &self.prefix)
            .field("shards", &self.shards)
            .field("session", &self.session)
            .field("state", &*self.state.lock())
            .finish_non_exhaustive()
    }
}

impl<S, C> Shards<S, C> {
    /// The next event of this member's shards, in the documented order;
    /// `None` once the member has left (or its campaign ended) and every
    /// event was taken.
    pub async fn next(&self) -> Option<ShardEvent> {
        loop {
            let version = {
                let mut state = self.state.lock();
                if let Some(event) = state.events.pop_front() {
                    return Some(event);
                }
                if state.ended {
                    return None;
                }
                state.version
            };
            self.state.changed(version).await;
        }
    }

    /// The work on `shard`, revoking, is done: it is given back at once.
    pub fn drained(&self, shard: u32) {
        self.state.update(|s| {
            if let Some((_, drained)) = s.held.get_mut(&shard).and_then(|h| h.revoking.as_mut()) {
                *drained = true;
            }
        });
    }

    /// Leaves the fleet: every shard is revoked (each given back once
    /// drained, or at the drain's bound), then the session is closed and
    /// the campaign ends. The fleet moves the shards to the others.
    pub fn leave(&self) {
        self.state.update(|s| s.leaving = true);
    }

    /// The fleet's prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

impl<S, C> Shards<S, C>
where
    S: Store + 'static,
    C: Clock + Clone + 'static,
{
    /// The shard's fencing token, if this member owns it now (its
    /// session's term is live): work on a shard only while this says so.
    pub fn owns(&self, shard: u32) -> Option<u64> {
        self.session.owns(&shard_key(&self.prefix, shard))
    }

    /// The shards this member owns now, with their tokens.
    pub fn owned(&self) -> Vec<(u32, u64)> {
        let shards: Vec<u32> = self.state.lock().held.keys().copied().collect();
        shards
            .into_iter()
            .filter_map(|shard| Some((shard, self.owns(shard)?)))
            .collect()
    }

    /// Whether this member is the fleet's coordinator now (it writes the
    /// assignment).
    pub fn is_coordinator(&self) -> bool {
        self.coordinator.is_leader()
    }

    /// The member's session (its key, token, health).
    pub fn session(&self) -> &Session<S, C> {
        &self.session
    }

    /// The member's campaign to coordinate the fleet, as a [`Leadership`].
    pub fn coordinator(&self) -> &Leadership<C> {
        &self.coordinator
    }

    /// One round of the member: the coordinator's, if it is the
    /// coordinator, then its own against the assignment.
    async fn round(&self, leases: &Leases<S, C>, me: &str) {
        self.revoke_lost();
        if self.coordinator.is_leader() {
            // An error leaves the assignment as it was until the next round.
            let _ = self.coordinate(leases).await;
        }
        let leaving = self.state.lock().leaving;
        let assignment = match read_assignment(leases, &self.prefix).await {
            Ok((_, assignment)) => assignment,
            Err(()) => return,
        };
        let mine: Vec<u32> = if leaving {
            Vec::new()
        } else {
            (0..self.shards)
                .filter(|&i| {
                    assignment
                        .get(i as usize)
                        .is_some_and(|m| m.as_deref() == Some(me))
                })
                .collect()
        };
        // The coordination and the reads above may have taken up to an
        // operation's time each: a term that ended meanwhile loses its
        // shards (`Revoked` alone), and the drain is counted from now.
        self.revoke_lost();
        self.give_back_moved(leases, &mine).await;
        self.take_assigned(mine).await;
    }

    /// Shards moved away from this member (not in `mine`): revoking, then
    /// given back once drained or at the drain's bound.
    async fn give_back_moved(&self, leases: &Leases<S, C>, mine: &[u32]) {
        let moving: Vec<(u32, Option<(Mono, bool)>)> = {
            let state = self.state.lock();
            state
                .held
                .iter()
                // (One being revoked is given back even if the fleet
                // moved it here again: its work was told to stop.)
                .filter(|(shard, held)| !mine.contains(shard) || held.revoking.is_some())
                .map(|(shard, held)| (*shard, held.revoking))
                .collect()
        };
        for (shard, revoking) in moving {
            // (Each give-back below may wait on the store too.)
            let now = leases.clock().now().mono;
            let revoking = match revoking {
                None => {
                    self.state.update(|s| {
                        if let Some(held) = s.held.get_mut(&shard) {
                            held.revoking = Some((now, false));
                            let by = now + self.drain;
                            s.events.push_back(ShardEvent::Revoking { shard, by });
                        }
                    });
                    (now, mutant!(GiveBackBeforeDrain))
                }
                Some(revoking) => revoking,
            };
            match revoking {
                (since, drained) if drained || now - since >= self.drain => {
                    let key = shard_key(&self.prefix, shard);
                    if self.session.disown(&key).await.is_err() {
                        // Not given back: again at the next round (or lost
                        // with the term).
                        continue;
                    }
                    self.state.update(|s| {
                        if s.held.remove(&shard).is_some() {
                            s.events.push_back(ShardEvent::Revoked { shard });
                        }
                    });
                }
                _ => {}
            }
        }
    }

    /// Shards assigned here (`mine`): taken once their last owner let go.
    async fn take_assigned(&self, mine: Vec<u32>) {
        for shard in mine {
            if self.state.lock().held.contains_key(&shard) {
                continue;
            }
            if let Ok(OwnOutcome::Owned(owned)) =
                self.session.own(&shard_key(&self.prefix, shard)).await
            {
                self.state.update(|s| {
                    s.held.insert(
                        shard,
                        Held {
                            token: owned.token,
                            revoking: None,
                        },
                    );
                    s.events.push_back(ShardEvent::Assigned {
                        shard,
                        token: owned.token,
                    });
                });
            }
        }
    }

    /// Shards whose session term ended: lost, whatever the assignment
    /// says (`Revoked` with no `Revoking`).
    fn revoke_lost(&self) {
        let lost: Vec<u32> = {
            let state = self.state.lock();
            state
                .held
                .iter()
                // (One being given back is followed by its rounds until
                // its release is through.)
                .filter(|(shard, held)| {
                    held.revoking.is_none() && self.owns(**shard) != Some(held.token)
                })
                .map(|(shard, _)| *shard)
                .collect()
        };
        if !lost.is_empty() {
            self.state.update(|s| {
                for shard in lost {
                    s.held.remove(&shard);
                    s.events.push_back(ShardEvent::Revoked { shard });
                }
            });
        }
    }

    /// The coordinator's round: the live members (their sessions under
    /// `<prefix>/members/`), and the assignment balanced over them,
    /// written if it changed.
    async fn coordinate(&self, leases: &Leases<S, C>) -> Result<(), ()> {
        let listed = leases
            .list(&format!("{}/members/", self.prefix))
            .await
            .map_err(|_| ())?;
        let members: Vec<String> = listed
            .leases
            .iter()
            .filter(|l| listed.held(l) == Some(true) || mutant!(CoordinatorCountsDeadMembers))
            .map(|l| l.key.clone())
            .collect();
        let (etag, previous) = read_assignment(leases, &self.prefix).await?;
        let next = balance(&previous, &members, self.shards);
        if next == previous {
            return Ok(());
        }
        let condition = etag.map_or(PutCondition::IfAbsent, PutCondition::IfMatch);
        let body = json!({"v": 1, "shards": next}).to_string().into_bytes();
        let cfg = leases.config(&assignment_key(&self.prefix));
        let op = StoreOp::Put {
            key: assignment_key(&self.prefix),
            body,
            condition,
        };
        // Refused: another coordinator wrote meanwhile; the next round
        // reads it.
        leases
            .call(OneCall::new(&cfg, leases.entropy(), op))
            .await
            .map(|_| ())
            .map_err(|_| ())
    }

    /// The member's life: rounds every poll interval (sooner when the user
    /// drains a shard or leaves) while its session is open; on leaving,
    /// every shard given back, then the session closed.
    async fn member(&self, leases: Leases<S, C>) {
        let me = self.session.key().to_string();
        let poll = leases.config(&me).poll_every;
        loop {
            self.revoke_lost();
            if self.session.until_open().await.is_err() {
                break;
            }
            self.round(&leases, &me).await;
            let (leaving, empty, version) = {
                let s = self.state.lock();
                (s.leaving, s.held.is_empty(), s.version)
            };
            if leaving && empty {
                break;
            }
            let clock = leases.clock();
            let sleep = pin!(clock.sleep_until(clock.now().mono + poll));
            let changed = pin!(self.state.changed(version));
            race(sleep, changed).await;
        }
        self.session.close();
        self.coordinator.resign();
        self.state.update(|s| {
            for shard in std::mem::take(&mut s.held).into_keys() {
                s.events.push_back(ShardEvent::Revoked { shard });
            }
            s.ended = true;
        });
    }
}

/// The assignment at `prefix` (its version, and each shard's member; none
/// when there is no readable one), or `Err` when it could not be read.
async fn read_assignment<S: Store, C: Clock>(
    leases: &Leases<S, C>,
    prefix: &str,
) -> Result<(Option<Etag>, Vec<Option<String>>), ()> {
    let key = assignment_key(prefix);
    let cfg = leases.config(&key);
    let reply = leases
        .call(OneCall::new(&cfg, leases.entropy(), StoreOp::Get { key }))
        .await
        .map_err(|_| ())?;
    match reply.kind {
        ReplyKind::Found { etag, body } => Ok((Some(etag), decode_assignment(&body))),
        ReplyKind::Missing => Ok((None, Vec::new())),
        _ => Err(()),
    }
}

/// An assignment's shards (empty when it is not one).
fn decode_assignment(body: &[u8]) -> Vec<Option<String>> {
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let Some(Value::Array(shards)) = obj.get("shards") else {
        return Vec::new();
    };
    shards
        .iter()
        .map(|m| m.as_str().map(str::to_string))
        .collect()
}

/// The assignment of `shards` shards over `members` (their session keys)
/// that keeps as much of `previous` as balance allows: each member gets
/// `shards / members` or one more (those that hold more now first), keeps
/// what it holds up to that, and the rest go to those below it. Every
/// shard is assigned when there is a member; none when there is none.
pub fn balance(
    previous: &[Option<String>],
    members: &[String],
    shards: u32,
) -> Vec<Option<String>> {
    let mut members: Vec<&String> = members.iter().collect();
    members.sort();
    members.dedup();
    let n = shards as usize;
    if members.is_empty() {
        return vec![None; n];
    }
    let held = |m: &String| {
        previous
            .iter()
            .take(n)
            .filter(|p| p.as_ref() == Some(m))
            .count()
    };
    // Those that hold more get the larger share first.
    let mut order: Vec<(usize, &String)> = members.iter().map(|m| (held(m), *m)).collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let (q, r) = (n / members.len(), n % members.len());
    let mut room: BTreeMap<&String, usize> = order
        .iter()
        .enumerate()
        .map(|(i, (_, m))| (*m, q + usize::from(i < r)))
        .collect();
    if mutant!(UnevenShares) && q > 0 && members.len() > 1 {
        // One share moved from the last member to the first.
        let (first, last) = (order[0].1, order[order.len() - 1].1);
        room.entry(last).and_modify(|l| *l -= 1);
        room.entry(first).and_modify(|l| *l += 1);
    }
    let mut next: Vec<Option<String>> = vec![None; n];
    for (shard, owner) in previous.iter().take(n).enumerate() {
        if let Some(left) = owner
            .as_ref()
            .and_then(|m| room.get_mut(m))
            .filter(|l| **l > 0)
        {
            *left -= 1;
            next[shard] = owner.clone();
        }
    }
    let mut takers = order.iter().map(|(_, m)| *m);
    let mut taker = takers.next();
    for slot in next.iter_mut().filter(|s| s.is_none()) {
        while let Some(m) = taker {
            if room.get(m).is_some_and(|l| *l > 0) {
                break;
            }
            taker = takers.next();
        }
        if let Some(m) = taker {
            if let Some(left) = room.get_mut(m) {
                *left -= 1;
            }
            *slot = Some(m.clone());
        }
    }
    next
}

impl<S, C> Leases<S, C>
where
    S: Store + 'static,
    C: Clock + Clone + 'static,
{
    /// Joins the fleet at `prefix` that splits `shards` shards (every
    /// member must give the same number): returns this member's handle and
    /// its campaign, a future to spawn (as [`lead`](Self::lead)). The
    /// member opens a session at `<prefix>/members/<holder>`, campaigns to
    /// coordinate (`<prefix>/coordinator`: the coordinator balances the
    /// shards over the live members and writes the assignment), and each
    /// poll interval owns the shards assigned to it and gives back those
    /// moved away (after the user drains them, or within `drain`). Events:
    /// [`Shards::next`]. Cas only, as sessions.
    pub fn shards(
        &self,
        prefix: &str,
        shards: u32,
        drain: Duration,
    ) -> Result<(Shards<S, C>, impl Future<Output = ElectorExit> + 'static), SettingsError> {
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(SettingsError::Invalid {
                variable: "shards",
                reason: format!("a fleet splits from 1 to {MAX_SHARDS} shards, not {shards}"),
            });
        }
        let me = member_key(prefix, &self.config(prefix).holder);
        let (session, session_campaign) = self.session(&me);
        let (coordinator, coordinator_campaign) = self.lead(coordinator_key(prefix));
        let member = Shards {
            session,
            coordinator,
            prefix: prefix.to_string(),
            shards,
            drain,
            state: Arc::default(),
        };
        let (handle, leases) = (member.clone(), self.clone());
        let campaign = async move {
            let life = member.member(leases);
            let ((exit, _), ()) = join(join(session_campaign, coordinator_campaign), life).await;
            exit
        };
        Ok((handle, campaign))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("f/members/m{i:02}")).collect()
    }

    fn counts(a: &[Option<String>]) -> BTreeMap<&str, usize> {
        let mut c = BTreeMap::new();
        for m in a.iter().flatten() {
            *c.entry(m.as_str()).or_default() += 1;
        }
        c
    }

    fn balanced(a: &[Option<String>], m: usize, n: u32) {
        assert_eq!(a.len(), n as usize);
        assert!(a.iter().all(Option::is_some), "every shard assigned");
        let c = counts(a);
        assert_eq!(c.len(), m.min(n as usize), "{c:?}");
        let (lo, hi) = (c.values().min().unwrap(), c.values().max().unwrap());
        assert!(hi - lo <= 1, "{c:?}");
    }

    #[test]
    fn no_member_no_assignment() {
        assert_eq!(balance(&[], &[], 4), vec![None; 4]);
    }

    #[test]
    fn shards_are_split_within_one_and_moves_are_few() {
        let all = members(50);
        let first = balance(&[], &all, 256);
        balanced(&first, 50, 256);
        // Stable: the same members keep the same assignment.
        assert_eq!(balance(&first, &all, 256), first);
        // One leaves: only its shards move.
        let fewer: Vec<String> = all[1..].to_vec();
        let after = balance(&first, &fewer, 256);
        balanced(&after, 49, 256);
        let moved = first.iter().zip(&after).filter(|(a, b)| a != b).count();
        let had = counts(&first)[all[0].as_str()];
        assert_eq!(moved, had, "only the leaver's shards move");
        // One joins: it gets its share, taken from the others, no more.
        let mut more = fewer.clone();
        more.push("f/members/zz".into());
        let joined = balance(&after, &more, 256);
        balanced(&joined, 50, 256);
        let moved = after.iter().zip(&joined).filter(|(a, b)| a != b).count();
        assert_eq!(
            moved,
            counts(&joined)["f/members/zz"],
            "only the newcomer's share moves"
        );
    }

    #[test]
    fn random_fleets_stay_balanced_and_keep_what_balance_allows() {
        let mut rng = crate::Entropy::from_seed(11);
        for _ in 0..500 {
            let n = 1 + (rng.unit() * 64.0) as u32;
            let m = 1 + (rng.unit() * 12.0) as usize;
            let all = members(16);
            let prev: Vec<Option<String>> = (0..n)
                .map(|_| (rng.unit() < 0.8).then(|| all[(rng.unit() * 16.0) as usize % 16].clone()))
                .collect();
            let live: Vec<String> = all.iter().take(m).cloned().collect();
            let next = balance(&prev, &live, n);
            balanced(&next, m, n);
            // A live member keeps min(what it held, its share) of its shards.
            let share = n as usize / m;
            for member in &live {
                let held = prev.iter().filter(|p| p.as_ref() == Some(member)).count();
                let kept = prev
                    .iter()
                    .zip(&next)
                    .filter(|(p, q)| p.as_ref() == Some(member) && q.as_ref() == Some(member))
                    .count();
                assert!(
                    kept >= held.min(share),
                    "{member}: held {held}, kept {kept}"
                );
            }
        }
    }

    #[test]
    fn assignments_read_back_and_junk_reads_as_none() {
        let a = vec![Some("f/members/a".to_string()), None];
        let body = json!({"v": 1, "shards": a}).to_string();
        assert_eq!(decode_assignment(body.as_bytes()), a);
        assert!(decode_assignment(b"not json").is_empty());
        assert!(decode_assignment(b"{\"shards\": 3}").is_empty());
    }
}
