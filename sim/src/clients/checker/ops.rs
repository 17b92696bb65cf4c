//! The outcome rules: every reported outcome judged against the store
//! when it was reported, and the tokens acquisitions handed out.

use super::facts::{describe, intersect, merge};
use crate::clients::config::ClientKind;
use crate::clients::report::{Rule, Violation};
use crate::clients::state::{short, Inner, Lane, OpRec, Rec, Said, Snapshot, Stamp};
use lease_core::protocol::COURTESY;
use lease_core::verify;
use lease_core::Protocol;
use std::collections::BTreeMap;

/// Snapshots naming `holder` and `token`, with their indexes.
fn named_records<'a>(
    w: &'a Inner,
    lane: Lane,
    holder: &'a str,
    token: u64,
) -> impl Iterator<Item = (usize, &'a Rec)> + 'a {
    w.hist(lane)
        .iter()
        .enumerate()
        .filter_map(move |(i, s)| s.rec.as_ref().map(|r| (i, r)))
        .filter(move |(_, r)| r.holder == holder && r.token == token && !r.by_operator)
}

/// The outcome rules for every operation's reports, each judged at the
/// real time it was reported, and its bound; then the tokens acquisitions
/// handed out.
pub(super) fn check_ops(w: &Inner, end: u64, found: &mut Vec<Violation>) {
    let mut tokens: Tokens = BTreeMap::new();
    for (k, op) in w.ops.iter().enumerate() {
        let mut c = OpCheck {
            w,
            op,
            k,
            found: &mut *found,
        };
        for (at, said) in &op.said {
            let live = w.live(op.lane, *at);
            match said {
                Said::Acquired { token, .. } | Said::Renewed { token } => {
                    c.acquired_or_renewed(at, said, token, live, &mut tokens)
                }
                Said::Busy {
                    holder,
                    token,
                    expires,
                } => c.busy(at, holder, token, expires),
                Said::Lost { named } => c.lost(at, said, named),
                Said::AlreadyLost { named } => {
                    c.lost(at, said, named);
                    c.already_lost(at, live);
                }
                Said::Released { token } | Said::ReleaseUnknown { token } => {
                    c.released(at, said, token, live)
                }
                Said::Broken { token } => c.broken(at, token),
                Said::Failed {
                    acquire: true,
                    what,
                    claims,
                } => c.failed_acquire(at, what, claims),
                _ => {}
            }
        }
        if let Some(bound) = op.bound {
            c.within_bound(bound, end);
        }
    }
    check_tokens(w, &tokens, found);
}

/// One operation under judgement: the world, the operation, its index,
/// and where its violations go.
struct OpCheck<'a> {
    w: &'a Inner,
    op: &'a OpRec,
    k: usize,
    found: &'a mut Vec<Violation>,
}

impl OpCheck<'_> {
    /// Reports a violation of this operation's.
    fn v(&mut self, rule: Rule, at: u64, text: String) {
        let (op, k) = (self.op, self.k);
        self.found.push(Violation {
            rule,
            at_ms: at,
            node: Some(op.node),
            text: format!("{} (pid {}, op {k}): {text}", op.name, op.pid),
        })
    }

    /// `Acquired` or `Renewed` (and the elector's events): a record of ours
    /// with that token is live, unless an operator broke it during the
    /// operation; the token is kept for [`check_tokens`].
    fn acquired_or_renewed(
        &mut self,
        at: &Stamp,
        said: &Said,
        token: &u64,
        live: Option<&Rec>,
        tokens: &mut Tokens,
    ) {
        let (w, op, p, k) = (self.w, self.op, self.op.lane, self.k);
        let ours = |session: &str| w.owner_of(session) == Some(op.owner);
        let session = session_of(said);
        let good = live.is_some_and(|r| {
            r.token == *token && ours(&r.session) && session.is_none_or(|s| *s == r.session)
        });
        // An operator's break during the operation takes the
        // lease without telling its holder (the fence refuses
        // its writes): a report made stale by it is no lie.
        // (Ours was written during the operation, then broken.)
        let during: Vec<&Snapshot> = w
            .hist(p)
            .iter()
            .filter(|s| op.started <= s.at && s.at <= *at)
            .collect();
        let won = during.iter().position(|s| {
            s.rec
                .as_ref()
                .is_some_and(|r| r.token == *token && ours(&r.session))
        });
        let broken_meanwhile = won.is_some_and(|i| during[i..].iter().any(|s| s.by_operator));
        if !good && broken_meanwhile {
            return;
        }
        if !good {
            self.v(
                Rule::OutcomeMismatch,
                at.0,
                format!(
                    "reported {said:?} but the store's record was {}",
                    describe(w.current(p, *at), w, at.0)
                ),
            );
        }
        if p.protocol.fences() {
            let acquired = matches!(said, Said::Acquired { .. });
            let lane = (p.key, p.protocol as u8);
            tokens.insert((lane, at.0, at.1), (*token, acquired, k));
        }
    }

    /// `Busy`: the record named was live during the operation and is not
    /// our own (nor an earlier run's of a singleton's environment).
    fn busy(&mut self, at: &Stamp, holder: &str, token: &u64, expires: &u64) {
        if let Some(seats) = self.op.pool_seats {
            self.pool_full(at, seats);
        }
        // A run in a pool that took no seat names the seat that frees
        // soonest, without saying which: judged against every seat.
        for lane in self.w.lanes_of(self.op) {
            if self.busy_in(lane, at, holder, token, expires) {
                return;
            }
        }
        let (w, p) = (self.w, self.op.lane);
        self.v(
            Rule::OutcomeMismatch,
            at.0,
            format!(
                "reported busy ({holder} token {token}) but that record was not live during the operation; the store's record was {}",
                describe(w.current(p, *at), w, at.0)
            ),
        );
    }

    /// A run in a pool of `seats` that found it full: each of its seats
    /// held another's live record at some time during the operation (a
    /// seat free throughout was one it did not take).
    fn pool_full(&mut self, at: &Stamp, seats: u32) {
        let (w, op) = (self.w, self.op);
        let ours = |session: &str| w.owner_of(session) == Some(op.owner);
        // A contender judges expiry by a Date header: up to one second
        // (and the front ends' skew) behind.
        let tolerance = 1000 + w.cfg.front_end_skew.as_millis() as u64;
        for seat in 0..seats {
            let lane = Lane {
                key: seat as usize + 1,
                protocol: op.lane.protocol,
            };
            let hist = w.hist(lane);
            let held = hist.iter().enumerate().any(|(i, s)| {
                let Some(r) = &s.rec else { return false };
                let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
                let (a, b) = (
                    s.at.0.max(op.started.0),
                    next.min(r.expires + tolerance).min(at.0 + 1),
                );
                // Fair waiting: the node's own release is busy to it for
                // the courtesy after its `released_at` (as `busy` allows).
                let courtesy = w.cfg.fair
                    && r.released
                    && r.holder == w.cfg.lease_config(op.node).holder
                    && r.released_at.is_some_and(|released| {
                        let until = released + COURTESY.as_millis() as u64 + tolerance;
                        a < next.min(until).min(at.0 + 1)
                    });
                courtesy || (!r.released && !ours(&r.session) && a < b)
            });
            if !held {
                self.v(
                    Rule::OutcomeMismatch,
                    at.0,
                    format!(
                        "reported its pool of {seats} full, but seat {seat} held no other's live record during the operation; it is {}",
                        describe(w.current(lane, *at), w, at.0)
                    ),
                );
                return;
            }
        }
    }

    /// [`busy`](Self::busy) in `lane`: whether it was right there (a
    /// violation found there is reported, and counts as judged).
    fn busy_in(&mut self, p: Lane, at: &Stamp, holder: &str, token: &u64, expires: &u64) -> bool {
        let (w, op) = (self.w, self.op);
        let ours = |session: &str| w.owner_of(session) == Some(op.owner);
        let hist = w.hist(p);
        // Fair waiting: the node's own release, current during
        // the operation, is busy to it until the courtesy ends,
        // which the busy names as its expiry: the courtesy
        // after the release's `released_at`. (How long it
        // lasts is judged by the contention benchmark.)
        if w.cfg.fair {
            let cfg = w.cfg.lease_config(op.node);
            let courtesy = lease_core::protocol::COURTESY.as_millis() as u64;
            let resolution = cfg.date_resolution.as_millis() as u64;
            let own_release = *holder == cfg.holder
                && named_records(w, p, holder, *token).any(|(i, r)| {
                    let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
                    let from = r.released_at.unwrap_or(r.expires + resolution);
                    r.released
                        && hist[i].at <= *at
                        && next > op.started.0
                        && from + courtesy == *expires
                });
            if own_release {
                return true;
            }
        }
        // A planned handoff: a release naming another successor is busy
        // to every other contender for the grace after its
        // `released_at`, which the busy names as its expiry.
        let me = w.cfg.lease_config(op.node).holder;
        let grace = lease_core::protocol::HANDOFF_GRACE.as_millis() as u64;
        let handed = named_records(w, p, holder, *token).any(|(i, r)| {
            let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
            r.released
                && r.handoff_to.as_ref().is_some_and(|to| *to != me)
                && hist[i].at <= *at
                && next > op.started.0
                && r.released_at.is_some_and(|from| from + grace == *expires)
        });
        if handed {
            return true;
        }
        // The versions with that holder and token that were
        // current at some time during the operation (a record
        // of the same name written later, by a process of ours
        // that shares the holder, is not the one it saw).
        let recs: Vec<(usize, &Rec)> = named_records(w, p, holder, *token)
            .filter(|&(i, r)| {
                let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
                // (An owned key's busy names its session's expiry at that
                // term, which its record does not carry.)
                let session_expiry = |(session, term): (usize, u64)| {
                    let lane = Lane {
                        key: session,
                        protocol: p.protocol,
                    };
                    w.hist(lane).iter().any(|snap| {
                        snap.rec
                            .as_ref()
                            .is_some_and(|x| x.token == term && x.expires == *expires)
                    })
                };
                let expiry = r.expires == *expires || r.owned_by.is_some_and(session_expiry);
                hist[i].at <= *at && next > op.started.0 && expiry
            })
            .collect();
        if let Some((_, r)) = recs.iter().find(|(_, r)| ours(&r.session)) {
            self.v(
                Rule::OwnRecord,
                at.0,
                format!(
                    "reported busy on its own record ({})",
                    describe(Some(r), w, at.0)
                ),
            );
            return true;
        }
        // A singleton's run keeps out of its way only runs of
        // other environments: a record that an earlier run of
        // its own (warm) environment left, which ended without
        // a crash before this one began, is one it knows (a
        // claim) and must take over.
        let earlier_run = |r: &Rec| {
            let Some(owner) = w.owner_of(&r.session) else {
                return false;
            };
            let mut runs = w.procs.iter().filter(|q| q.owner == owner).peekable();
            runs.peek().is_some()
                && runs.all(|q| {
                    q.node == op.node
                        && q.ended.is_some_and(|e| e < op.started.0)
                        && !q.crashed
                        && w.nodes[q.node].kind == ClientKind::Singleton
                })
        };
        if w.nodes[op.node].kind == ClientKind::Singleton {
            if let Some((_, r)) = recs.iter().find(|(_, r)| earlier_run(r)) {
                self.v(
                    Rule::OwnRecord,
                    at.0,
                    format!(
                        "skipped behind the record of an earlier run of its own environment ({})",
                        describe(Some(r), w, at.0)
                    ),
                );
                return true;
            }
        }
        // A contender judges expiry by a Date header: up to one
        // second (and the front ends' skew) behind.
        let tolerance = 1000 + w.cfg.front_end_skew.as_millis() as u64;
        let was_live = recs.iter().any(|&(i, r)| {
            let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
            let a = hist[i].at.0.max(op.started.0);
            if let Some((session, term)) = r.owned_by {
                // An owned key is busy to a contender while its session's
                // record at that term reads live: a renewal that landed
                // late may show the term again after it ended for its
                // holder (busy is then the safe answer).
                let b = next.min(at.0 + 1);
                let lane = Lane {
                    key: session,
                    protocol: p.protocol,
                };
                let shist = w.hist(lane);
                return !r.released
                    && shist.iter().enumerate().any(|(j, s)| {
                        let snext = shist.get(j + 1).map_or(u64::MAX, |n| n.at.0);
                        s.rec.as_ref().is_some_and(|x| {
                            x.token == term
                                && !x.released
                                && s.at.0.max(a) < snext.min(x.expires + tolerance).min(b)
                        })
                    });
            }
            let b = next.min(r.expires + tolerance).min(at.0 + 1);
            !r.released && a < b
        });
        was_live
    }

    /// `Lost` or `AlreadyLost`: the record named is not our own.
    fn lost(&mut self, at: &Stamp, said: &Said, named: &Option<(String, u64)>) {
        let (w, op, p) = (self.w, self.op, self.op.lane);
        let ours = |session: &str| w.owner_of(session) == Some(op.owner);
        if let Some((holder, token)) = named {
            // The version named is the latest with that holder
            // and token (an operator's break keeps both, unless the
            // holder's name would not fit: then it names no holder).
            let latest = w
                .hist(p)
                .iter()
                .take_while(|s| s.at <= *at)
                .filter_map(|s| s.rec.as_ref())
                .filter(|r| r.holder == *holder && r.token == *token)
                .last();
            if let Some(r) = latest.filter(|r| !r.by_operator && ours(&r.session)) {
                self.v(
                    Rule::OwnRecord,
                    at.0,
                    format!(
                        "reported {said:?}, naming its own record ({})",
                        describe(Some(r), w, at.0)
                    ),
                );
            }
        }
    }

    /// `AlreadyLost`: no record of ours is live, and no write of the
    /// release changed the store or freed the lease for the next holder.
    fn already_lost(&mut self, at: &Stamp, live: Option<&Rec>) {
        let (w, op, p, k) = (self.w, self.op, self.op.lane, self.k);
        let ours = |session: &str| w.owner_of(session) == Some(op.owner);
        // An operator broke this acquisition, and then a
        // create of it held in the network landed (the
        // mutex's strays): that version was never any
        // process's to know (it expires at its ttl), and
        // the lease this one was handed was taken away.
        let hist = w.hist(p);
        let now = hist.partition_point(|s| s.at <= *at);
        let stray_after_break = |r: &Rec| {
            let mine = |s: &Snapshot| s.rec.as_ref().is_some_and(|x| x.session == r.session);
            let before = &hist[..now.saturating_sub(1)];
            before
                .iter()
                .position(mine)
                .is_some_and(|first| before[first..].iter().any(|s| s.by_operator && !mine(s)))
        };
        if let Some(r) = live.filter(|r| ours(&r.session) && !stray_after_break(r)) {
            self.v(
                Rule::OwnRecord,
                at.0,
                format!(
                    "reported AlreadyLost while its own record is live ({})",
                    describe(Some(r), w, at.0)
                ),
            );
        }
        // Writes of the release: those that give the lease
        // back (a released record, or a delete), applied
        // after the operation's last success. A `lease run`
        // reports its renewals and its release as one
        // operation, and `AlreadyLost` speaks for the
        // release: a renewal still in flight when the work
        // ended may have extended the lease unreported (the
        // release finds it and gives it back, or finds it
        // lapsed), as `Held::Finished` documents.
        let since = op
            .said
            .iter()
            .rev()
            .filter(|(t, s)| t < at && matches!(s, Said::Acquired { .. } | Said::Renewed { .. }))
            .map(|(t, _)| *t)
            .next();
        let changed = w
            .writes
            .values()
            .filter(|x| x.op == Some(k) && x.released && !x.benign)
            .filter_map(|x| x.applied)
            .filter(|a| since.is_none_or(|s| *a > s))
            .min();
        // A write that left our own record released is benign
        // alone, but not when another session came in
        // after it: it may be what let them in.
        let opened = w
            .writes
            .values()
            .filter(|x| x.op == Some(k) && x.released && x.benign)
            .filter_map(|x| x.applied)
            .filter(|a| since.is_none_or(|s| *a > s) && a < at)
            // It made our released record (or no record)
            // the current one: it freed the lease.
            .filter(|a| {
                w.current(p, *a)
                    .is_none_or(|r| r.released && ours(&r.session))
            })
            .find(|a| {
                w.hist(p).iter().any(|s| {
                    *a < s.at
                        && s.at <= *at
                        && s.rec
                            .as_ref()
                            .is_some_and(|r| !r.by_operator && !r.released && !ours(&r.session))
                })
            });
        if let Some(c) = changed.or(opened) {
            self.v(
                Rule::AlreadyLostChanged,
                at.0,
                format!(
                    "reported AlreadyLost, but its write was applied at t={}ms",
                    c.0
                ),
            );
        }
    }

    /// `Released` or `ReleaseUnknown`: no record of ours is live, nobody
    /// took over before the release began (`Released` only), and no write
    /// of the released session lands later and makes it live again.
    fn released(&mut self, at: &Stamp, said: &Said, token: &u64, live: Option<&Rec>) {
        let (w, op, p) = (self.w, self.op, self.op.lane);
        let ours = |session: &str| w.owner_of(session) == Some(op.owner);
        if let Some(r) = live.filter(|r| ours(&r.session)) {
            self.v(
                Rule::OutcomeMismatch,
                at.0,
                format!(
                    "reported Released token {token} but its own record is live ({})",
                    describe(Some(r), w, at.0)
                ),
            );
        }
        let hist = w.hist(p);
        let i = hist.partition_point(|s| s.at <= *at);
        if let Some(s) = i.checked_sub(1).map(|i| &hist[i]) {
            if let Some(r) = &s.rec {
                if !r.released
                    && !r.by_operator
                    && !ours(&r.session)
                    && s.at < op.started
                    && matches!(said, Said::Released { .. })
                {
                    self.v(
                        Rule::ReleasedAfterTakeover,
                        at.0,
                        format!(
                            "reported Released token {token}, but {} had taken over before the release began",
                            describe(Some(r), w, at.0)
                        ),
                    );
                }
            }
        }
        for (session, info) in &w.sessions {
            // (A process with a session holds several leases: only this
            // one's sessions.)
            if info.owner != op.owner || info.lane != p || !info.tokens.contains(token) {
                continue;
            }
            // One that makes a record of the session live again
            // (an old epoch created after newer ones is not).
            let late = w
                .writes
                .values()
                .filter(|x| x.session.as_deref() == Some(session) && !x.released)
                .filter_map(|x| x.applied)
                .filter(|a| a > at)
                .filter(|a| w.live(info.lane, *a).is_some_and(|r| r.session == *session))
                .min();
            if let Some(a) = late {
                self.v(
                    Rule::LateWrite,
                    a.0,
                    format!(
                        "a write of session {}… landed at t={}ms, after it reported Released at t={}ms",
                        short(session),
                        a.0,
                        at.0
                    ),
                );
            }
        }
    }

    /// `Broken`: the break's released record became the current one (the
    /// mutex: the lock went).
    fn broken(&mut self, at: &Stamp, token: &u64) {
        let (w, op, p) = (self.w, self.op, self.op.lane);
        // What the break wrote became the current record
        // during the operation (a create below the live epoch
        // did not), or, for the mutex, its delete removed the
        // current lock.
        // (A mutex break whose delete got no clear reply and
        // finds the lock gone cannot tell its delete from the
        // holder's release: the lock going is what it claims.)
        let made_current = w
            .hist(p)
            .iter()
            .filter(|s| op.started <= s.at && s.at <= *at)
            .any(|s| match (&s.rec, p.protocol) {
                (None, Protocol::Mutex) => true,
                (Some(r), _) => s.by_operator && r.released && r.by_operator && r.token == *token,
                (None, _) => false,
            });
        if !made_current {
            self.v(
                Rule::OutcomeMismatch,
                at.0,
                format!(
                    "reported Broken token {token}, but no break of its made the record current; the store's record is {}",
                    describe(w.current(p, *at), w, at.0)
                ),
            );
        }
    }

    /// A failed acquire leaves no write of its own live, unless it handed
    /// it on as one of its claims.
    fn failed_acquire(&mut self, at: &Stamp, what: &str, claims: &[String]) {
        let (w, k, protocol) = (self.w, self.k, self.op.lane.protocol);
        // A failure that hands the write on as a claim settled
        // it the other way the protocol allows. (A pool's run wrote to
        // the seats it tried: each write is judged in its own.)
        let left = w
            .writes
            .values()
            .filter(|x| x.op == Some(k) && x.applied.is_some())
            .filter_map(|x| Some((x.session.as_deref()?, x.lease)))
            .filter(|(s, _)| !claims.iter().any(|c| c == s))
            .map(|(s, key)| (s, w.live(Lane { key, protocol }, *at)))
            .find(|(s, live)| live.is_some_and(|r| r.session == *s));
        if let Some((s, live)) = left {
            self.v(
                Rule::UnsettledWrite,
                at.0,
                format!(
                    "reported failure ({what}) with nothing running, but its own write is live on the store (session {}…, {})",
                    short(s),
                    describe(live, w, at.0)
                ),
            );
        }
    }

    /// The operation reported within its bound (its process's pauses
    /// not counted).
    fn within_bound(&mut self, bound: u64, end: u64) {
        let (w, op) = (self.w, self.op);
        let stop = op
            .done
            .map_or_else(|| w.procs[op.pid].ended.unwrap_or(end), |d| d.0);
        let paused: u64 = intersect(
            &merge(w.procs[op.pid].pauses.clone()),
            &[(op.started.0, stop)],
        )
        .iter()
        .map(|(a, b)| b - a)
        .sum();
        let took = stop.saturating_sub(op.started.0).saturating_sub(paused);
        if took > bound {
            self.v(
                Rule::OpStalled,
                op.started.0 + bound,
                format!(
                    "{} after {}ms (bound {bound}ms)",
                    if op.done.is_some() {
                        "reported only"
                    } else {
                        "had not reported"
                    },
                    took
                ),
            );
        }
    }
}

/// The tokens acquisitions reported, by lease and protocol and the time
/// of the report: (token, whether an acquisition, the operation).
type Tokens = BTreeMap<((usize, u8), u64, u64), (u64, bool, usize)>;

/// Tokens of acquisitions strictly increase, per lease and protocol.
fn check_tokens(w: &Inner, tokens: &Tokens, found: &mut Vec<Violation>) {
    let mut highest: BTreeMap<(usize, u8), (u64, usize)> = BTreeMap::new();
    for (&(p, at, _), &(token, acquired, k)) in tokens {
        let prev = highest.get(&p).copied();
        if let (true, Some((h, hk))) = (acquired, prev) {
            if !verify::token_follows(Some(h), token) && hk != k {
                found.push(Violation {
                    rule: Rule::TokenNotIncreasing,
                    at_ms: at,
                    node: Some(w.ops[k].node),
                    text: format!(
                        "{} (pid {}) acquired token {token} after token {h} was reported (pid {})",
                        w.ops[k].name, w.ops[k].pid, w.ops[hk].pid
                    ),
                });
            }
        }
        if prev.is_none_or(|(h, _)| token > h) {
            highest.insert(p, (token, k));
        }
    }
}

fn session_of(said: &Said) -> Option<&String> {
    match said {
        Said::Acquired { session, .. } => session.as_ref(),
        _ => None,
    }
}
