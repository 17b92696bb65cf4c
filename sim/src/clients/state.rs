//! The world's shared state: the event queue's events, the nodes and
//! processes, the calls in flight, the store's history as the checker sees
//! it, and what the clients said.

use super::config::{ClientKind, ClientsConfig, NodeFault, PROTECTED_KEY};
use super::report::{Counts, Rule, Violation};
use crate::world::clock::{NodeClock, EPOCH};
use crate::world::faults::{self, Bucket, FaultKind, Request};
use crate::world::queue::Queue;
use core::cell::RefCell;
use lease_core::client::Health;
use lease_core::record::parse_epoch_key;
use lease_core::store::ReplyKind;
use lease_core::verify;
use lease_core::{Entropy, Fenced, LeaseRecord, Mono, Now, Protocol, StoreOp, StoreReply};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Stamp(pub(super) u64, pub(super) u64);

#[derive(Debug)]
pub(super) enum Ev {
    Arrive {
        call: u64,
        pid: usize,
        op: StoreOp,
        fault: Option<FaultKind>,
    },
    Reply {
        call: u64,
        reply: StoreReply,
    },
    Timer {
        timer: u64,
    },
    Run {
        node: usize,
    },
    Tick {
        node: usize,
    },
    /// A cron host's clock comes to the start of slot `slot` (Unix ms /
    /// `cron_every`).
    Cron {
        node: usize,
        slot: u64,
    },
    /// A tick delivered again (at-least-once delivery), or retried by the
    /// platform after a failed run (`retry` counts those).
    Deliver {
        node: usize,
        tick: u64,
        retry: u32,
    },
    NodeFault(NodeFault),
    Resume {
        pid: usize,
    },
}

pub(super) struct NodeState {
    pub(super) clock: NodeClock,
    /// Monotonic stalls that never catch up: (start, end) real ms.
    pub(super) lags: Vec<(u64, u64)>,
    /// Real ms at which its clock first lost time.
    pub(super) lagged_since: Option<u64>,
    /// Real ms until which the machine is suspended.
    pub(super) suspended_until: u64,
    pub(super) kind: ClientKind,
    pub(super) protocol: Protocol,
    /// Processes started on this node (for entropy seeding).
    pub(super) spawned: u64,
    /// The long-lived process, if any.
    pub(super) main: Option<usize>,
    /// The claims its singleton's last run left (a warm environment).
    pub(super) claims: Vec<lease_core::Claim>,
}

impl NodeState {
    pub(super) fn lost(&self, real: u64) -> u64 {
        self.lags
            .iter()
            .map(|&(a, b)| real.min(b).saturating_sub(a))
            .sum()
    }

    /// The node's clocks at real time `real`: its monotonic clock ran all
    /// along but for its lags.
    pub(super) fn now(&self, real: u64) -> Now {
        self.clock.now(real - self.lost(real))
    }

    /// An estimate of the real time at which the monotonic clock reads
    /// `at` (a timer re-checks and re-arms when a stall delays it).
    fn real_of(&self, now: u64, at: Mono) -> u64 {
        let mono = self.clock.mono(now - self.lost(now));
        now + self.clock.real_between(mono, at)
    }
}

pub(super) struct ProcState {
    pub(super) node: usize,
    pub(super) owner: usize,
    pub(super) alive: bool,
    pub(super) paused_until: Option<u64>,
    /// Inert windows (real ms).
    pub(super) pauses: Vec<(u64, u64)>,
    pub(super) entropy: Option<Entropy>,
    pub(super) op: Option<usize>,
    /// The operation its writes to one lease belong to whatever `op` is
    /// (a session's lease, renewed beside the operations on the keys it
    /// owns): the lease (an index into [`Inner::keys`]) and the operation.
    pub(super) lease_op: Option<(usize, usize)>,
    /// Largest `Retry-After` it was sent (ms).
    pub(super) retry_after_max: u64,
    /// Started and not finished (for liveness: an elector's life).
    pub(super) started: u64,
    pub(super) ended: Option<u64>,
    /// It ended by a crash (its environment's memory, claims included,
    /// is gone).
    pub(super) crashed: bool,
}

pub(super) struct CallSlot {
    pub(super) pid: usize,
    pub(super) reply: Option<StoreReply>,
}

/// A record as the checker sees it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Rec {
    pub(super) session: String,
    pub(super) holder: String,
    pub(super) token: u64,
    /// `expires_at` as real ms.
    pub(super) expires: u64,
    pub(super) released: bool,
    /// `released_at` as real ms.
    pub(super) released_at: Option<u64>,
    pub(super) by_operator: bool,
    /// The completed ticks it records.
    pub(super) ticks: Vec<String>,
    /// Its size on the store, in bytes.
    pub(super) bytes: usize,
    /// A key owned under a session: that session's lease (an index into
    /// [`Inner::keys`]) and term's token. Its `expires` is its session
    /// term's end, set once the run is over ([`Inner::settle_owned`]).
    pub(super) owned_by: Option<(usize, u64)>,
    /// The successor a planned handoff names (`meta`'s `handoff_to`).
    pub(super) handoff_to: Option<String>,
    /// A simple client's record (`LeaseRecord::is_foreign`): it keeps no
    /// completed ticks, whatever the record before it listed.
    pub(super) foreign: bool,
}

/// A lease the checker follows: its key (an index into [`Inner::keys`]:
/// 0 is [`LEASE_KEY`](super::config::LEASE_KEY), then the pool's seats, if the world has a pool) and
/// the protocol whose objects hold it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Lane {
    pub(super) key: usize,
    pub(super) protocol: Protocol,
}

impl Lane {
    /// The object a job of this lane's lease fences its writes at.
    pub(super) fn protected_key(self) -> String {
        match self.key {
            0 => PROTECTED_KEY.to_string(),
            seat => lease_core::client::seat_key(PROTECTED_KEY, seat as u32 - 1),
        }
    }
}

/// What the store held for one lease and protocol from a time on.
pub(super) struct Snapshot {
    pub(super) at: Stamp,
    pub(super) rec: Option<Rec>,
    /// Made by an operator's write (a break: the mutex's leaves no record).
    pub(super) by_operator: bool,
}

pub(super) struct SessionInfo {
    pub(super) owner: usize,
    pub(super) lane: Lane,
    pub(super) tokens: BTreeSet<u64>,
}

pub(super) struct SentWrite {
    pub(super) pid: usize,
    pub(super) owner: usize,
    /// Real ms it was sent.
    pub(super) sent_at: u64,
    pub(super) op: Option<usize>,
    pub(super) session: Option<String>,
    /// The lease its object is of (an index into `Inner::keys`).
    pub(super) lease: usize,
    pub(super) released: bool,
    pub(super) applied: Option<Stamp>,
    /// Applied and left only our own released record, or nothing.
    pub(super) benign: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Said {
    Acquired {
        token: u64,
        session: Option<String>,
    },
    Renewed {
        token: u64,
    },
    Busy {
        holder: String,
        token: u64,
        /// The `expires_at` of the version read (real ms): with holder and
        /// token it names that version (an epoch deleted and created again
        /// keeps its number, and a node's runs share the holder).
        expires: u64,
    },
    Lost {
        named: Option<(String, u64)>,
    },
    AlreadyLost {
        named: Option<(String, u64)>,
    },
    Released {
        token: u64,
    },
    /// A release at the deadline that cannot tell whether it freed the
    /// lease: judged as `Released` but for the takeover rule.
    ReleaseUnknown {
        token: u64,
    },
    /// An operator's break: the released record it wrote (or, for the
    /// mutex, the lock it deleted) was the current one.
    Broken {
        token: u64,
    },
    Failed {
        acquire: bool,
        what: String,
        /// The sessions of the unsettled writes the error hands on (its
        /// [`Claim`](lease_core::Claim)s).
        claims: Vec<String>,
    },
    Other(String),
}

pub(super) struct OpRec {
    pub(super) pid: usize,
    pub(super) owner: usize,
    pub(super) node: usize,
    /// The lease it is about (a run in a pool: the seat it took, once it
    /// took one).
    pub(super) lane: Lane,
    /// A run in a pool of this many seats that did not take one: its
    /// outcome is about any of them.
    pub(super) pool_seats: Option<u32>,
    pub(super) name: &'static str,
    pub(super) started: Stamp,
    pub(super) bound: Option<u64>,
    pub(super) said: Vec<(Stamp, Said)>,
    pub(super) done: Option<Stamp>,
}

pub(super) struct JobRec {
    pub(super) pid: usize,
    pub(super) owner: usize,
    pub(super) node: usize,
    pub(super) lane: Lane,
    pub(super) token: u64,
    /// The id of the tick it runs for (a singleton's `sim:<n>`, a cron
    /// host's slot).
    pub(super) tick: Option<String>,
    pub(super) start: Stamp,
    pub(super) end: Option<Stamp>,
}

/// What a `Leadership` handle answered at one instant.
pub(super) struct Sample {
    pub(super) at: Stamp,
    pub(super) pid: usize,
    pub(super) owner: usize,
    pub(super) node: usize,
    pub(super) lane: Lane,
    pub(super) is_leader: bool,
    pub(super) token: Option<u64>,
    pub(super) health: Health,
    /// Its `resign()` had been called.
    pub(super) resigned: bool,
}

/// A singleton run's report that it ran a tick's job.
pub(super) struct TickReport {
    pub(super) at: Stamp,
    pub(super) pid: usize,
    pub(super) node: usize,
    pub(super) lane: Lane,
    /// The tick's id.
    pub(super) tick: String,
    /// It says its release recorded the tick.
    pub(super) recorded: bool,
}

pub(super) struct Inner {
    pub(super) cfg: Rc<ClientsConfig>,
    pub(super) now: u64,
    pub(super) step: u64,
    pub(super) rng: Entropy,
    pub(super) queue: Queue<Ev>,
    pub(super) bucket: Bucket,
    pub(super) nodes: Vec<NodeState>,
    pub(super) procs: Vec<ProcState>,
    pub(super) owners: u64,
    pub(super) calls: BTreeMap<u64, CallSlot>,
    pub(super) timers: BTreeMap<u64, (usize, bool)>,
    pub(super) next_id: u64,
    pub(super) woken: BTreeSet<usize>,
    pub(super) scripted_uses: Vec<u32>,
    // Checker state.
    /// The leases followed: [`LEASE_KEY`](super::config::LEASE_KEY), then the pool's seats.
    pub(super) keys: Vec<String>,
    /// Each lease's history: of its object (cas, mutex) and of its newest
    /// epoch object (epochs).
    pub(super) hists: Vec<[Vec<Snapshot>; 2]>,
    /// Whether each epoch object on the store was written by an operator.
    pub(super) epoch_by_operator: BTreeMap<String, bool>,
    pub(super) sessions: BTreeMap<String, SessionInfo>,
    pub(super) writes: BTreeMap<u64, SentWrite>,
    pub(super) ops: Vec<OpRec>,
    pub(super) jobs: Vec<JobRec>,
    /// Scheduled ticks so far (a tick's id is its number).
    pub(super) ticks: u64,
    pub(super) tick_reports: Vec<TickReport>,
    /// What the services' `Leadership` handles answered.
    pub(super) samples: Vec<Sample>,
    /// The highest token each protected object was written with.
    pub(super) fence_highest: BTreeMap<String, u64>,
    pub(super) fault_times: Vec<u64>,
    pub(super) violations: Vec<Violation>,
    pub(super) counts: Counts,
    pub(super) timeline: Vec<String>,
    pub(super) operators: BTreeSet<usize>,
    /// Each CLI client's flight recorder, with its node, replayed and
    /// judged at the end of the run.
    #[cfg(feature = "trace")]
    pub(super) traces: Vec<(usize, lease_core::trace::Recorder)>,
}

pub(super) type Shared = Rc<RefCell<Inner>>;

impl Inner {
    pub(super) fn stamp(&mut self) -> Stamp {
        self.step += 1;
        Stamp(self.now, self.step)
    }

    pub(super) fn schedule(&mut self, at: u64, ev: Ev) {
        self.queue.push(at, ev);
    }

    pub(super) fn log(&mut self, what: impl FnOnce() -> String) {
        if self.cfg.record_timeline {
            let line = format!("t={}ms {}", self.now, what());
            self.timeline.push(line);
        }
    }

    pub(super) fn fault(&mut self, pid: Option<usize>, name: &str) {
        *self.counts.faults.entry(name.to_string()).or_default() += 1;
        self.fault_times.push(self.now);
        self.log(|| format!("fault {name} (pid {pid:?})"));
    }

    pub(super) fn wake(&mut self, pid: usize) {
        self.woken.insert(pid);
    }

    pub(super) fn proc_now(&self, pid: usize) -> Now {
        self.nodes[self.procs[pid].node].now(self.now)
    }

    pub(super) fn add_timer(&mut self, pid: usize, at: Mono) -> u64 {
        let node = self.procs[pid].node;
        let real = self.nodes[node].real_of(self.now, at).max(self.now + 1);
        self.next_id += 1;
        let id = self.next_id;
        self.timers.insert(id, (pid, false));
        self.schedule(real, Ev::Timer { timer: id });
        id
    }

    pub(super) fn chance(&mut self, p: f64) -> bool {
        faults::chance(&mut self.rng, p)
    }

    pub(super) fn request_timeout(&self, pid: usize) -> Duration {
        self.cfg.lease_config(self.procs[pid].node).request_timeout
    }

    /// Sends `op` from `pid`: decides its fate and schedules its arrival.
    pub(super) fn send(&mut self, pid: usize, op: StoreOp) -> u64 {
        self.next_id += 1;
        let call = self.next_id;
        let now = self.now;
        self.counts.store_calls += 1;
        self.calls.insert(call, CallSlot { pid, reply: None });
        let write = op.is_write();
        let node = self.procs[pid].node;
        let lease = self.lease_of(op.key()).map_or(0, |(key, _)| key);
        if let StoreOp::Put { body, .. } = &op {
            if let Ok(record) = LeaseRecord::decode(body) {
                let owner = self.procs[pid].owner;
                let lane = Lane {
                    key: lease,
                    protocol: self.nodes[node].protocol,
                };
                let sid = sid(&record.holder, &record.acquisition);
                if !sid.is_empty() && !self.operators.contains(&owner) {
                    let info = self.sessions.entry(sid.clone()).or_insert(SessionInfo {
                        owner,
                        lane,
                        tokens: BTreeSet::new(),
                    });
                    info.tokens.insert(record.token);
                }
                let op_idx = self.op_of(pid, lease);
                self.writes.insert(
                    call,
                    SentWrite {
                        pid,
                        owner,
                        sent_at: now,
                        op: op_idx,
                        session: (!sid.is_empty()).then_some(sid),
                        lease,
                        released: record.released,
                        applied: None,
                        benign: false,
                    },
                );
            }
        } else if let StoreOp::Delete { .. } = &op {
            let owner = self.procs[pid].owner;
            let op_idx = self.op_of(pid, lease);
            self.writes.insert(
                call,
                SentWrite {
                    pid,
                    owner,
                    sent_at: now,
                    op: op_idx,
                    session: None,
                    lease,
                    released: true,
                    applied: None,
                    benign: false,
                },
            );
        }
        let request = Request {
            node,
            at_ms: now,
            write,
        };
        let cfg = &self.cfg;
        let used = &mut self.scripted_uses;
        let fault = faults::draw(&cfg.faults, &cfg.scripted, used, request, &mut self.rng);
        self.log(|| {
            format!(
                "pid {pid} node {node} sends #{call} {} {} ({})",
                op.verb(),
                op.key(),
                fault.as_ref().map_or("no fault", FaultKind::name)
            )
        });
        if let Some(late @ FaultKind::Late { .. }) = &fault {
            // Noted when sent: the sender has lost the request from now on,
            // and its arrival may come after the operation has ended (the
            // quiet-acquire rule must see the fault inside its span).
            self.fault(Some(pid), late.name());
        }
        let timeout = self.request_timeout(pid);
        let latency = self.cfg.latency;
        let Some(at) = faults::arrival(now, latency, fault.as_ref(), timeout, &mut self.rng) else {
            self.fault(Some(pid), FaultKind::DropRequest.name());
            return call;
        };
        self.schedule(
            at,
            Ev::Arrive {
                call,
                pid,
                op,
                fault,
            },
        );
        call
    }

    pub(super) fn arrive(&mut self, call: u64, pid: usize, op: StoreOp, fault: Option<FaultKind>) {
        let served = self
            .bucket
            .serve(self.now, &op, fault.as_ref(), &mut self.rng);
        match &fault {
            Some(FaultKind::Throttle {
                retry_after: Some(d),
            }) => {
                let ms = d.as_millis() as u64;
                let p = &mut self.procs[pid];
                p.retry_after_max = p.retry_after_max.max(ms);
                // Counted apart: the waits an operation's deadline caps.
                let long = *d > Duration::from_secs(60);
                let name = if long {
                    "throttled, Retry-After > 1 min"
                } else {
                    "throttled"
                };
                self.fault(Some(pid), name);
            }
            Some(FaultKind::Late { .. }) | None => {} // a late one is noted when sent
            Some(k) => self.fault(Some(pid), k.name()),
        }
        if served.wrote {
            self.applied(call, pid, &op);
        }
        if let Some(StoreReply {
            kind: ReplyKind::NotModified,
            ..
        }) = served.reply
        {
            self.counts.not_modified += 1;
        }
        self.log(|| {
            // A write's body, so that a replay shows what the store holds.
            let body = match &op {
                StoreOp::Put { body, .. } => format!(" {}", String::from_utf8_lossy(body)),
                _ => String::new(),
            };
            format!(
                "store gets #{call} {} {}: {}{body}",
                op.verb(),
                op.key(),
                served.reply.as_ref().map_or("no reply".to_string(), |r| {
                    lease_core::protocol::summarize(&r.kind)
                })
            )
        });
        if let Some(reply) = served.reply {
            let latency = self.cfg.latency;
            let at = faults::reply_arrival(self.now, latency, fault.as_ref(), &mut self.rng);
            self.schedule(at, Ev::Reply { call, reply });
        }
    }

    /// Bookkeeping after a write was applied.
    pub(super) fn applied(&mut self, call: u64, pid: usize, op: &StoreOp) {
        let at = self.stamp();
        if let Some(w) = self.writes.get_mut(&call) {
            w.applied = Some(at);
        }
        let key = op.key().to_string();
        if key == PROTECTED_KEY || key.starts_with(&format!("{PROTECTED_KEY}/")) {
            if let StoreOp::Put { body, .. } = op {
                let token = Fenced::decode(body).map_or(0, |f| f.token);
                let highest = self.fence_highest.get(&key).copied().unwrap_or(0);
                if !verify::not_lowered(highest, token) {
                    self.violations.push(Violation {
                        rule: Rule::FenceTokenDecreased,
                        at_ms: self.now,
                        node: self.writes.get(&call).map(|w| self.procs[w.pid].node),
                        text: format!(
                            "the protected object {key} went from token {highest} to {token}"
                        ),
                    });
                }
                self.fence_highest.insert(key, highest.max(token));
            }
            return;
        }
        let by_operator = self
            .writes
            .get(&call)
            .is_some_and(|w| self.operators.contains(&w.owner));
        let session = self.writes.get(&call).and_then(|w| w.session.clone());
        let benign = |rec: &Option<Rec>| match rec {
            None => true,
            Some(r) => r.released && session.as_ref() == Some(&r.session),
        };
        let Some((lease, epoch)) = self.lease_of(&key) else {
            return;
        };
        self.check_readable(pid, &key);
        let lease_key = self.keys[lease].clone();
        let (rec, ok) = if !epoch {
            let rec = self.read_rec(&lease_key, None, by_operator);
            let ok = benign(&rec);
            (rec, ok)
        } else {
            // Who wrote each epoch object (the newest may be another's
            // than this call's: a cleanup deletes an older one).
            if self.bucket.store().get(&key).is_some() {
                self.epoch_by_operator.insert(key.clone(), by_operator);
            } else {
                self.epoch_by_operator.remove(&key);
            }
            let newest = self
                .bucket
                .store()
                .keys(&format!("{lease_key}/"))
                .into_iter()
                .filter_map(|k| parse_epoch_key(&lease_key, &k).map(|e| (e, k)))
                .max();
            let rec = newest.and_then(|(e, k)| {
                let by_operator = self.epoch_by_operator.get(&k).copied().unwrap_or(false);
                self.read_rec(&k, Some(e), by_operator)
            });
            // An epoch write is benign when it left ours, released, as
            // the newest, or did not change the newest (an old epoch's
            // slot).
            let before = self.hists[lease][1].last().and_then(|s| s.rec.as_ref());
            let ok = benign(&rec) || (rec.is_some() && rec.as_ref() == before);
            (rec, ok)
        };
        if let Some(w) = self.writes.get_mut(&call) {
            w.benign = ok;
        }
        self.hists[lease][usize::from(epoch)].push(Snapshot {
            at,
            rec,
            by_operator,
        });
    }

    /// The object a write of process `pid` left at a lease's key (or
    /// epoch) must be a record every client reads: every writer in the
    /// simulation writes records (the library's, and a simple client's
    /// `{"expires_at", "token", "holder"}`), and a client refuses a record
    /// it cannot decode (over 8 KiB, a string too long), which leaves the
    /// key busy to everyone until an operator breaks it.
    fn check_readable(&mut self, pid: usize, key: &str) {
        let Some((_, body)) = self.bucket.store().get(key) else {
            return;
        };
        if let Err(e) = LeaseRecord::decode(&body) {
            let node = Some(self.procs[pid].node);
            self.violations.push(Violation {
                rule: Rule::RecordUnreadable,
                at_ms: self.now,
                node,
                text: format!(
                    "a write left at {key} {} bytes no client reads: {e}",
                    body.len()
                ),
            });
        }
    }

    /// Gives every record of a key owned under a session the end of that
    /// session's term as its expiry: the first instant from the record's
    /// on at which the session's record is gone, at another token,
    /// released or expired on the store's clock (the simulation's real
    /// time). An owned key is held exactly that long (`docs/protocols.md`,
    /// "Sessions"); a term that lapsed and came back (a late renewal,
    /// given back) does not hold it again.
    pub(super) fn settle_owned(&mut self) {
        for lease in 0..self.hists.len() {
            let ends: Vec<Option<u64>> = self.hists[lease][0]
                .iter()
                .map(|snap| {
                    let (session, token) = snap.rec.as_ref()?.owned_by?;
                    Some(term_end(&self.hists[session][0], token, snap.at))
                })
                .collect();
            for (snap, end) in self.hists[lease][0].iter_mut().zip(ends) {
                if let (Some(rec), Some(end)) = (snap.rec.as_mut(), end) {
                    rec.expires = end;
                }
            }
        }
    }

    /// The operation a write of process `pid` to lease `lease` belongs to.
    fn op_of(&self, pid: usize, lease: usize) -> Option<usize> {
        match self.procs[pid].lease_op {
            Some((l, op)) if l == lease => Some(op),
            _ => self.procs[pid].op,
        }
    }

    /// The lease an object is of: its index in [`Inner::keys`], and
    /// whether it is one of its epoch objects.
    pub(super) fn lease_of(&self, key: &str) -> Option<(usize, bool)> {
        if let Some(lease) = self.keys.iter().position(|k| k == key) {
            return Some((lease, false));
        }
        let epoch = |lease: &String| parse_epoch_key(lease, key).is_some();
        self.keys.iter().position(epoch).map(|lease| (lease, true))
    }

    fn read_rec(&self, key: &str, epoch: Option<u64>, by_operator: bool) -> Option<Rec> {
        let (_, body) = self.bucket.store().get(key)?;
        let r = LeaseRecord::decode(&body).ok()?;
        let foreign = r.is_foreign();
        Some(Rec {
            session: sid(&r.holder, &r.acquisition),
            holder: r.holder,
            token: epoch.unwrap_or(r.token),
            expires: r.expires_at.0.saturating_sub(EPOCH.0),
            released: r.released,
            released_at: r.released_at.map(|at| at.0.saturating_sub(EPOCH.0)),
            by_operator,
            ticks: r.runs.into_iter().map(|run| run.tick).collect(),
            bytes: body.len(),
            handoff_to: r.meta.get(lease_core::protocol::HANDOFF_TO).cloned(),
            foreign,
            owned_by: r.owned_by.and_then(|by| {
                let session = self.keys.iter().position(|k| *k == by.key)?;
                Some((session, by.token))
            }),
        })
    }

    pub(super) fn hist(&self, lane: Lane) -> &[Snapshot] {
        let hists = &self.hists[lane.key];
        match lane.protocol {
            Protocol::Epochs => &hists[1],
            Protocol::Cas | Protocol::Mutex => &hists[0],
            // `Protocol` is non-exhaustive outside lease-core.
            other => unreachable!("a protocol the simulator does not know: {other:?}"),
        }
    }

    /// The record current at `at` in `lane`.
    pub(super) fn current(&self, lane: Lane, at: Stamp) -> Option<&Rec> {
        let hist = self.hist(lane);
        let k = hist.partition_point(|s| s.at <= at);
        k.checked_sub(1).and_then(|k| hist[k].rec.as_ref())
    }

    /// The record live at `at` in `lane`, if any.
    pub(super) fn live(&self, lane: Lane, at: Stamp) -> Option<&Rec> {
        self.current(lane, at)
            .filter(|r| !r.released && r.expires > at.0)
    }

    /// The lanes an operation's outcome may be about: its own, or, for a
    /// run in a pool that took no seat, every seat's.
    pub(super) fn lanes_of(&self, op: &OpRec) -> Vec<Lane> {
        let Some(seats) = op.pool_seats else {
            return vec![op.lane];
        };
        (1..=seats as usize)
            .map(|key| Lane {
                key,
                protocol: op.lane.protocol,
            })
            .collect()
    }

    pub(super) fn owner_of(&self, session: &str) -> Option<usize> {
        self.sessions.get(session).map(|s| s.owner)
    }

    pub(super) fn new_owner(&mut self) -> usize {
        self.owners += 1;
        self.owners as usize
    }
}

/// The end of the term `token` of the session whose history is `hist`,
/// from `from` on (see [`Inner::settle_owned`]); `u64::MAX` if it never
/// ended.
fn term_end(hist: &[Snapshot], token: u64, from: Stamp) -> u64 {
    let first = hist.partition_point(|s| s.at <= from);
    let Some(first) = first.checked_sub(1) else {
        return from.0;
    };
    for (i, snap) in hist.iter().enumerate().skip(first) {
        let start = if i == first { from.0 } else { snap.at.0 };
        let next = hist.get(i + 1).map_or(u64::MAX, |n| n.at.0);
        match &snap.rec {
            Some(r) if r.token == token && !r.released => {
                if r.expires < next {
                    return start.max(r.expires);
                }
            }
            _ => return start,
        }
    }
    u64::MAX
}

/// The checker's name of a session: the holder with the session id (two
/// clients seeded alike draw the same ids; their holder names differ). A
/// simple client's record has no session id: its holder names it (every
/// term of one simple client is one session). None for a record that names
/// neither (a break that cleared the names, the epochs marker).
pub(super) fn sid(holder: &str, session: &str) -> String {
    if session.is_empty() && holder.is_empty() {
        String::new()
    } else {
        format!("{holder}/{session}")
    }
}

/// The first characters of a session's id, for humans.
pub(super) fn short(sid: &str) -> &str {
    let id = sid.rsplit('/').next().unwrap_or(sid);
    id.get(..8).unwrap_or(id)
}
