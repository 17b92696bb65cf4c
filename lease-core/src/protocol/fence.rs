//! Fenced writes: documented in the layer's docs (`protocol/mod.rs`, "Fenced writes").

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::protocol::calls::{self, Calls, Next, OneAtATime};
use crate::protocol::machine::terminal_error;
use crate::protocol::outcome::LeaseError;
use crate::store::{Etag, PutCondition, ReplyKind, StoreOp, StoreReply};
use crate::time::{Mono, Now};

/// A protected object's body: its fence header and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fenced {
    /// Token of the holder that wrote it.
    pub token: u64,
    /// Unique per write.
    pub nonce: String,
    /// The protected data.
    pub payload: Vec<u8>,
}

impl Fenced {
    /// `{"fence_token":N,"nonce":"…"}\n` followed by the payload.
    pub fn encode(&self) -> Vec<u8> {
        let header = serde_json::json!({ "fence_token": self.token, "nonce": self.nonce });
        // `to_vec`, not `to_string`: a `Value`'s `Display` links a second,
        // pretty-printing serializer into every wasm module.
        let mut body = serde_json::to_vec(&header).unwrap_or_default();
        body.push(b'\n');
        body.extend_from_slice(&self.payload);
        body
    }

    /// Decodes a body written by [`encode`](Self::encode); `None` if it is
    /// not a fenced object.
    pub fn decode(body: &[u8]) -> Option<Fenced> {
        let end = body.iter().position(|b| *b == b'\n')?;
        let header: serde_json::Value = serde_json::from_slice(&body[..end]).ok()?;
        Some(Fenced {
            token: header.get("fence_token")?.as_u64()?,
            nonce: header.get("nonce")?.as_str()?.to_string(),
            payload: body[end + 1..].to_vec(),
        })
    }

    /// The lines appended by [`FenceOp::append`], oldest first, as
    /// `(nonce, line)`; a line that does not have the `<nonce> <line>`
    /// shape (a payload written by [`FenceOp::new`]) is returned whole with
    /// an empty nonce.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.payload
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| match line.iter().position(|b| *b == b' ') {
                Some(space) => (&line[..space], &line[space + 1..]),
                None => (&line[..0], line),
            })
    }
}

/// How a fenced write ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FenceOutcome {
    /// Written: the object now carries our token.
    Accepted {
        /// The new version's etag.
        etag: Etag,
    },
    /// Refused: a holder with a greater token has written.
    Rejected {
        /// The token found.
        current: u64,
    },
}

#[derive(Clone, Debug)]
enum State {
    /// The next call, or the call under way: a read (`None`) or a write
    /// on this condition.
    Ready(Option<PutCondition>),
    Finished(Option<Result<FenceOutcome, LeaseError>>),
}

/// The fenced-write machine (see the module docs): 2 store calls when
/// uncontended.
#[derive(Clone, Debug)]
pub struct FenceOp {
    cfg: LeaseConfig,
    key: String,
    token: u64,
    payload: Vec<u8>,
    /// Append `payload` as a line to what is there, instead of replacing it.
    append: bool,
    /// The payload read, when appending: the next write extends it.
    read: Vec<u8>,
    entropy: Entropy,
    nonces: Vec<String>,
    state: State,
    calls: Calls,
    /// No request is sent at or after this instant (the holder's deadline).
    until: Option<Mono>,
    /// A write of ours got no clear answer (lost reply, 5xx) and no read
    /// has come back since: it may have landed, so the reads that settle
    /// it are not refused for the retry budget.
    unsettled: bool,
}

impl FenceOp {
    /// Writes `payload` to `key` on behalf of the holder of `token`.
    /// `cfg` supplies timeouts and the retry budget.
    pub fn new(
        cfg: LeaseConfig,
        entropy: Entropy,
        key: impl Into<String>,
        token: u64,
        payload: Vec<u8>,
    ) -> Self {
        // The naive variant skips the read: a plain PUT, whatever is there.
        let first = variant!(cfg, unfenced_writes).then_some(PutCondition::None);
        FenceOp {
            calls: Calls::new(&cfg),
            cfg,
            key: key.into(),
            token,
            payload,
            append: false,
            read: Vec::new(),
            entropy,
            nonces: Vec::new(),
            unsettled: false,
            state: State::Ready(first),
            until: None,
        }
    }

    /// Sends no request at or after `deadline` (local monotonic time: the
    /// lease's `valid_until`): a holder whose lease has ended stops
    /// writing, even in the middle of retries. A request sent before it is
    /// still waited for; with none confirmed the write ends
    /// `LeaseError::GaveUp`, and an unanswered one may still land (the
    /// token rule then judges it).
    pub fn until(mut self, deadline: Mono) -> Self {
        self.until = Some(deadline);
        self
    }

    /// Appends `line` (a newline in it is replaced by a space) to the
    /// journal at `key` on behalf of the holder of `token` (see the module
    /// docs): the same token rule as [`new`](Self::new), and a line that
    /// lands once at most.
    pub fn append(
        cfg: LeaseConfig,
        entropy: Entropy,
        key: impl Into<String>,
        token: u64,
        line: impl Into<Vec<u8>>,
    ) -> Self {
        let line = line
            .into()
            .into_iter()
            .map(|b| if b == b'\n' { b' ' } else { b })
            .collect();
        let mut op = FenceOp::new(cfg, entropy, key, token, line);
        op.append = true;
        op
    }

    /// Whether one of our writes is in `stored` (by its nonce).
    fn ours(&self, stored: &Fenced) -> bool {
        self.nonces.contains(&stored.nonce)
            || (self.append
                && stored
                    .entries()
                    .any(|(nonce, _)| self.nonces.iter().any(|ours| ours.as_bytes() == nonce)))
    }

    /// The body our next write carries, with nonce `nonce`.
    fn body(&self, nonce: String) -> Vec<u8> {
        let payload = if self.append {
            let mut payload = self.read.clone();
            payload.extend_from_slice(nonce.as_bytes());
            payload.push(b' ');
            payload.extend_from_slice(&self.payload);
            payload.push(b'\n');
            payload
        } else {
            self.payload.clone()
        };
        Fenced {
            token: self.token,
            nonce,
            payload,
        }
        .encode()
    }

    /// Continue call ids from `next` (to share an id space with other
    /// machines of the same node).
    pub fn with_ids_from(mut self, next: u64) -> Self {
        self.calls = self.calls.with_ids_from(next);
        self
    }

    fn past_until(&self, now: Now) -> bool {
        self.until.is_some_and(|until| now.mono >= until)
    }

    /// The call `plan` asks for: a read, or a write of our payload with a
    /// fresh nonce on that condition.
    fn op(&mut self, plan: Option<PutCondition>) -> StoreOp {
        let key = self.key.clone();
        let Some(condition) = plan else {
            return StoreOp::Get { key };
        };
        let condition = if variant!(self.cfg, blind_fence) {
            PutCondition::None
        } else {
            condition
        };
        let nonce = self.entropy.id();
        self.nonces.push(nonce.clone());
        let body = self.body(nonce);
        StoreOp::Put {
            key,
            body,
            condition,
        }
    }

    fn finish(&mut self, outcome: Result<FenceOutcome, LeaseError>) {
        self.state = State::Finished(Some(outcome));
    }

    fn retry(&mut self, now: Mono, last: &ReplyKind, backoff: bool) {
        match self.calls.retry_settling(
            &self.cfg,
            &mut self.entropy,
            last.into(),
            backoff.then_some(now),
            self.unsettled,
        ) {
            Err(e) => self.finish(Err(e.error(Box::default()))),
            // A retry starts again from a read (after the backoff, if any).
            Ok(_) => self.state = State::Ready(None),
        }
    }

    fn on_reply(&mut self, now: Now, write: bool, reply: StoreReply) {
        if let Some(e) = terminal_error(&reply.kind) {
            return self.finish(Err(e));
        }
        match (&reply.kind, write) {
            (ReplyKind::Transport { .. } | ReplyKind::ServerError { .. }, true) => {
                self.unsettled = true
            }
            (ReplyKind::Found { .. } | ReplyKind::Missing, false) => self.unsettled = false,
            _ => {}
        }
        match (reply.kind, write) {
            (ReplyKind::Found { etag, body }, false) => match Fenced::decode(&body) {
                Some(f) if self.ours(&f) => self.finish(Ok(FenceOutcome::Accepted { etag })),
                Some(f) if f.token > self.token => {
                    self.finish(Ok(FenceOutcome::Rejected { current: f.token }))
                }
                Some(f) => {
                    self.read = f.payload;
                    self.state = State::Ready(Some(PutCondition::IfMatch(etag)));
                }
                None => self.finish(Err(LeaseError::Unexpected {
                    reply: format!(
                        "{} is not a fenced object ({})",
                        self.key,
                        crate::record::excerpt(&body)
                    ),
                    unsettled: Box::default(),
                })),
            },
            (ReplyKind::Missing, false) => {
                self.read.clear();
                self.state = State::Ready(Some(PutCondition::IfAbsent));
            }
            (ReplyKind::Written { etag: Some(etag) }, true) => {
                self.finish(Ok(FenceOutcome::Accepted { etag }))
            }
            (
                kind @ (ReplyKind::Written { etag: None }
                | ReplyKind::PreconditionFailed
                | ReplyKind::Missing),
                true,
            )
            | (kind @ ReplyKind::Transport { .. }, true) => self.retry(now.mono, &kind, false),
            (
                kind @ (ReplyKind::Conflict
                | ReplyKind::ServerError { .. }
                | ReplyKind::Throttled { .. }),
                _,
            )
            | (kind @ ReplyKind::Transport { .. }, false) => self.retry(now.mono, &kind, true),
            (kind, _) => self.finish(Err(LeaseError::unexpected(&kind))),
        }
    }
}

impl OneAtATime for FenceOp {
    type Outcome = Result<FenceOutcome, LeaseError>;

    fn calls(&mut self) -> (&LeaseConfig, &mut Calls) {
        (&self.cfg, &mut self.calls)
    }

    fn take_outcome(&mut self, _now: Now) -> Option<Self::Outcome> {
        match &mut self.state {
            State::Finished(out) => out.take(),
            State::Ready(_) => None,
        }
    }

    fn is_parked(&self) -> bool {
        matches!(self.state, State::Finished(None))
    }

    fn on_expired(&mut self, _now: Now, error: LeaseError) {
        self.finish(Err(error));
    }

    fn on_reply(&mut self, now: Now, write: bool, reply: StoreReply) {
        FenceOp::on_reply(self, now, write, reply)
    }

    /// A call already sent is waited for, the holder's deadline or not; a
    /// backoff is cut short by it (nothing is sent after it).
    fn wait(&mut self, now: Now, at: Mono) -> Option<Mono> {
        if self.calls.call_under_way() {
            Some(at)
        } else if !self.past_until(now) {
            Some(self.until.map_or(at, |u| at.min(u)))
        } else {
            None
        }
    }

    fn next(&mut self, now: Now) -> Next {
        if self.past_until(now) {
            self.finish(Err(LeaseError::GaveUp {
                attempts: self.calls.attempts(),
                last: "the holder's deadline passed: no request is sent after it".into(),
                unsettled: Box::default(),
            }));
            return Next::Again;
        }
        match &self.state {
            // Every reply moves the state on, so the plan stands while its
            // call is under way; a write the store's spacing holds back is
            // made again with a fresh nonce (the first stays recognised).
            State::Ready(plan) => {
                let plan = plan.clone();
                Next::Call(self.op(plan))
            }
            State::Finished(_) => Next::Again,
        }
    }
}

calls::machine_of_calls!(FenceOp => Result<FenceOutcome, LeaseError>);
