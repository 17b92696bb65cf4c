//! The fleet view: documented in the layer's docs (`protocol/mod.rs`, "The fleet view").

use crate::config::{LeaseConfig, Protocol};
use crate::entropy::Entropy;
use crate::protocol::calls::{self, Calls, Next, OneAtATime};
use crate::protocol::machine::terminal_error;
use crate::protocol::outcome::LeaseError;
use crate::record::{split_epoch_key, LeaseRecord};
use crate::store::{Etag, ListEntry, ReplyKind, StoreOp, StoreReply};
use crate::time::{Now, StoreDate};
use std::collections::BTreeMap;
use std::time::Duration;

/// The most pages a listing is followed for.
pub const LISTING_MAX_PAGES: usize = 10_000;

/// How often an epochs lease whose newest epoch was gone by its read is
/// listed again.
pub const EPOCH_LIST_TRIES: u32 = 3;

/// One lease found under the prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    /// The lease's key (for epochs, the key the epochs are under).
    pub key: String,
    /// The object read: the key itself, or the newest epoch's.
    pub object: String,
    /// The protocol that wrote it; `None` for a simple client's record or
    /// another tool's lock.
    pub protocol: Option<Protocol>,
    /// The etag of the version read.
    pub etag: Etag,
    /// The record.
    pub record: LeaseRecord,
    /// The store's date at the read, when the reply carried one.
    pub date: Option<StoreDate>,
}

impl Listed {
    /// How long the lease has left by the store's clock at the read: zero
    /// when it is released or expired; `None` without a store date, or for
    /// a lock held until broken ([`LeaseRecord::held_until_broken`]).
    pub fn time_left(&self) -> Option<Duration> {
        let date = self.date?;
        if self.record.held_until_broken() {
            return None;
        }
        if self.record.released {
            return Some(Duration::ZERO);
        }
        Some(Duration::from_millis(
            self.record.expires_at.0.saturating_sub(date.unix_ms.0),
        ))
    }

    /// Whether the lease is free: released, or expired by the store's
    /// clock at the read (`false` when that is unknown and not released).
    pub fn free(&self) -> bool {
        self.record.released || self.time_left() == Some(Duration::ZERO)
    }
}

/// What [`Listing`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListReport {
    /// The leases, by key.
    pub leases: Vec<Listed>,
    /// Objects under the prefix that are not lease records (or could not
    /// be read).
    pub others: Vec<String>,
}

/// A session seen in a listing ([`ListReport::sessions`]): the keys owned
/// under it, and whether its term that owns them is live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSeen {
    /// The session lease's key.
    pub key: String,
    /// Its current token, when its record was listed.
    pub token: Option<u64>,
    /// Whether that term is live by the store's clock at the read; `None`
    /// when the session's record is not under the prefix (or its expiry
    /// is unknown).
    pub live: Option<bool>,
    /// The keys owned under its current term (records not released),
    /// held while the term is live.
    pub owns: Vec<String>,
}

impl ListReport {
    /// Whether `l` is held now: for a key owned under a session
    /// (`owned_by`), whether that session's term is live (`None` when the
    /// session's record is not in the listing, or its expiry is unknown);
    /// for any other, not [`Listed::free`].
    pub fn held(&self, l: &Listed) -> Option<bool> {
        let Some(by) = &l.record.owned_by else {
            return Some(!l.free());
        };
        if l.record.released {
            return Some(false);
        }
        let session = self.leases.iter().find(|s| s.key == by.key)?;
        if session.record.token != by.token || session.record.released {
            return Some(false);
        }
        session.date.map(|_| !session.free())
    }

    /// The sessions the owned keys in the listing name, by key, each with
    /// the keys owned under its current term.
    pub fn sessions(&self) -> Vec<SessionSeen> {
        let mut seen: BTreeMap<&str, SessionSeen> = BTreeMap::new();
        for l in &self.leases {
            let Some(by) = &l.record.owned_by else {
                continue;
            };
            let session = self.leases.iter().find(|s| s.key == by.key);
            let entry = seen.entry(by.key.as_str()).or_insert_with(|| SessionSeen {
                key: by.key.clone(),
                token: session.map(|s| s.record.token),
                live: session.and_then(|s| {
                    let released = s.record.released;
                    (released || s.date.is_some()).then(|| !s.free())
                }),
                owns: Vec::new(),
            });
            let current = entry.token.is_none_or(|t| t == by.token);
            if current && !l.record.released {
                entry.owns.push(l.key.clone());
            }
        }
        seen.into_values().collect()
    }
}

#[derive(Clone, Debug)]
enum State {
    /// Listing; the next page's token.
    List(Option<String>),
    /// Reading the objects left.
    Read,
    /// Listing the epochs of the lease at this key again (its newest was
    /// gone by its read).
    Relist(String),
    Done(Option<Result<ListReport, LeaseError>>),
}

/// The fleet view's machine (see the module docs).
#[derive(Clone, Debug)]
pub struct Listing {
    cfg: LeaseConfig,
    entropy: Entropy,
    calls: Calls,
    prefix: String,
    state: State,
    /// Every key listed, in order.
    keys: Vec<String>,
    /// Objects to read: (lease key, object key), in key order.
    reads: Vec<(String, String)>,
    report: ListReport,
    /// The read under way.
    reading: Option<(String, String)>,
    /// Pages listed, and the continuation tokens seen.
    pages: usize,
    tokens: std::collections::BTreeSet<String>,
    /// Re-listings made for the epochs lease read next.
    epoch_tries: BTreeMap<String, u32>,
}

impl Listing {
    /// Lists the leases under `prefix`; `cfg` gives the timeouts and the
    /// retry budget (its key is not used).
    pub fn new(cfg: LeaseConfig, entropy: Entropy, prefix: impl Into<String>) -> Self {
        Listing {
            calls: Calls::new(&cfg),
            cfg,
            entropy,
            prefix: prefix.into(),
            state: State::List(None),
            keys: Vec::new(),
            reads: Vec::new(),
            report: ListReport::default(),
            reading: None,
            pages: 0,
            tokens: Default::default(),
            epoch_tries: BTreeMap::new(),
        }
    }

    /// A fresh deadline and retry budget for the next call (each page and
    /// each read is an operation of its own).
    fn next_operation(&mut self) {
        self.calls = Calls::new(&self.cfg).with_ids_from(self.calls.next_id());
    }

    fn finish(&mut self, outcome: Result<ListReport, LeaseError>) {
        self.state = State::Done(Some(outcome));
    }

    /// The reads the listing calls for (see the module docs).
    fn plan_reads(&mut self) {
        let mut newest: BTreeMap<&str, (u64, &str)> = BTreeMap::new();
        for key in &self.keys {
            if let Some((base, n)) = split_epoch_key(key) {
                let e = newest.entry(base).or_insert((n, key));
                if n > e.0 {
                    *e = (n, key);
                }
            }
        }
        let mut reads: Vec<(String, String)> = newest
            .iter()
            .map(|(base, (_, key))| (base.to_string(), key.to_string()))
            .collect();
        for key in &self.keys {
            if split_epoch_key(key).is_some()
                || newest.contains_key(key.as_str())
                || key.contains(".probe/")
            {
                continue;
            }
            reads.push((key.clone(), key.clone()));
        }
        reads.sort();
        // Popped from the end: the first key is read first.
        reads.reverse();
        self.reads = reads;
        self.state = State::Read;
    }

    /// The listing of one epochs lease again (an epoch was gone since
    /// the first): its newest epoch now is read (one page: a lease keeps
    /// few).
    fn on_relisted(&mut self, base: String, entries: &[ListEntry]) {
        let newest = entries
            .iter()
            .filter_map(|e| {
                split_epoch_key(&e.key)
                    .filter(|(b, _)| *b == base)
                    .map(|(_, n)| (n, e.key.clone()))
            })
            .max();
        if let Some((_, key)) = newest {
            self.reads.push((base, key));
        }
        self.next_operation();
        self.state = State::Read;
    }

    /// A page of the listing came back (its keys taken): the next page,
    /// or the reads.
    fn on_page(&mut self, next: Option<String>) {
        self.next_operation();
        self.pages += 1;
        match next {
            Some(token) if self.pages >= LISTING_MAX_PAGES || !self.tokens.insert(token.clone()) => {
                self.finish(Err(LeaseError::Unexpected {
                    reply: format!(
                        "the listing of {:?} did not end after {} pages (or repeated a continuation token)",
                        self.prefix, self.pages
                    ),
                    unsettled: Box::default(),
                }))
            }
            Some(token) => self.state = State::List(Some(token)),
            None => self.plan_reads(),
        }
    }

    fn on_reply(&mut self, now: Now, reply: StoreReply) {
        let one_object = matches!(self.state, State::Read)
            && matches!(
                reply.kind,
                ReplyKind::Denied { .. } | ReplyKind::Invalid { .. }
            );
        if let Some(e) = terminal_error(&reply.kind).filter(|_| !one_object) {
            return self.finish(Err(e));
        }
        match (reply.kind, &self.state) {
            (ReplyKind::Listed { entries, next }, State::List(_)) => {
                self.keys.extend(entries.into_iter().map(|e| e.key));
                self.on_page(next);
            }
            (ReplyKind::Listed { entries, .. }, State::Relist(base)) => {
                let base = base.clone();
                self.on_relisted(base, &entries)
            }
            (ReplyKind::Found { etag, body }, State::Read) => {
                let (key, object) = self.reading.take().unwrap_or_default();
                match LeaseRecord::decode(&body) {
                    Ok(record) => self.report.leases.push(Listed {
                        protocol: protocol_of(&record, &object),
                        key,
                        object,
                        etag,
                        record,
                        date: reply.date,
                    }),
                    Err(_) => self.report.others.push(object),
                }
                self.next_operation();
            }
            (ReplyKind::Missing, State::Read) => {
                self.next_operation();
                // An epoch gone since the listing: list its lease again.
                if let Some((key, object)) = self.reading.take() {
                    let tries = self.epoch_tries.entry(key.clone()).or_insert(0);
                    if object != key && *tries < EPOCH_LIST_TRIES {
                        *tries += 1;
                        self.state = State::Relist(key);
                    }
                }
            }
            // One object that cannot be read does not end the listing.
            (ReplyKind::Denied { .. } | ReplyKind::Invalid { .. }, State::Read) => {
                if let Some((_, object)) = self.reading.take() {
                    self.report.others.push(object);
                }
                self.next_operation();
            }
            (kind, _) if kind.is_retryable() => {
                if let Some(read) = self.reading.take() {
                    self.reads.push(read);
                }
                if let Err(e) =
                    self.calls
                        .retry(&self.cfg, &mut self.entropy, now.mono, &kind, true)
                {
                    self.finish(Err(e));
                }
            }
            (kind, _) => self.finish(Err(LeaseError::unexpected(&kind))),
        }
    }
}

/// The protocol of a record read at `object`. A record of ours names
/// it; one written before records did is an epoch object's (epochs) or
/// the key's own (cas, the default then); a simple client's record (or
/// another tool's lock) has none.
fn protocol_of(record: &LeaseRecord, object: &str) -> Option<Protocol> {
    if record.is_foreign() {
        return None;
    }
    let named = record.protocol.as_deref().and_then(Protocol::parse);
    Some(named.unwrap_or(if split_epoch_key(object).is_some() {
        Protocol::Epochs
    } else {
        Protocol::Cas
    }))
}

impl OneAtATime for Listing {
    type Outcome = Result<ListReport, LeaseError>;

    fn calls(&mut self) -> (&LeaseConfig, &mut Calls) {
        (&self.cfg, &mut self.calls)
    }

    fn take_outcome(&mut self, _now: Now) -> Option<Self::Outcome> {
        match &mut self.state {
            State::Done(out) => out.take(),
            _ => None,
        }
    }

    fn is_parked(&self) -> bool {
        matches!(self.state, State::Done(None))
    }

    fn on_expired(&mut self, _now: Now, error: LeaseError) {
        self.finish(Err(error));
    }

    fn on_reply(&mut self, now: Now, _write: bool, reply: StoreReply) {
        Listing::on_reply(self, now, reply)
    }

    fn next(&mut self, _now: Now) -> Next {
        Next::Call(match &self.state {
            State::List(continuation) => StoreOp::List {
                prefix: self.prefix.clone(),
                continuation: continuation.clone(),
                max_keys: None,
            },
            State::Read => match self.reads.pop() {
                Some((key, object)) => {
                    let op = StoreOp::Get {
                        key: object.clone(),
                    };
                    self.reading = Some((key, object));
                    op
                }
                None => {
                    let report = std::mem::take(&mut self.report);
                    self.finish(Ok(report));
                    return Next::Again;
                }
            },
            State::Relist(base) => StoreOp::List {
                prefix: format!("{base}/"),
                continuation: None,
                max_keys: None,
            },
            State::Done(_) => return Next::Again,
        })
    }
}

calls::machine_of_calls!(Listing => Result<ListReport, LeaseError>);
