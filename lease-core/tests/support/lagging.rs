//! A store whose listings lag behind its writes, for tests only: the
//! in-memory store, except that a LIST hides every object created less than
//! `lag` ago (an eventually consistent listing, as S3 had before December
//! 2020 and some S3-compatible stores still have). Reads and writes stay
//! strongly consistent. Each call takes `rtt` of virtual time.
//!
//! Kept out of `MemStore` on purpose: the product has no setting that makes
//! its store unsafe.

use lease_core::{Clock, MemStore, Store, StoreOp, StoreReply, VirtualClock};

use lease_core::store::ReplyKind;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

pub struct LaggingListings {
    pub store: MemStore,
    pub clock: VirtualClock,
    /// A listing hides every object created less than this long ago.
    pub lag: Duration,
    /// Each call takes this long: the clock moves on before it applies.
    pub rtt: Duration,
    /// When the object now at each key was created (local ms); keys
    /// written straight into `store` are not here and always listed.
    created: RefCell<HashMap<String, u64>>,
}

impl LaggingListings {
    pub fn new(lag: Duration, rtt: Duration) -> LaggingListings {
        let clock = VirtualClock::new(super::EPOCH);
        LaggingListings {
            store: MemStore::new(clock.clone()),
            clock,
            lag,
            rtt,
            created: RefCell::default(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.clock.now().mono.0
    }

    /// Applies `op` as the lagging store would answer it.
    pub fn apply(&self, op: &StoreOp) -> StoreReply {
        self.clock.advance(self.rtt);
        let now = self.now_ms();
        let existed = self.store.get(op.key()).is_some();
        let mut reply = self.store.apply(op);
        match (op, &mut reply.kind) {
            (StoreOp::Put { key, .. }, ReplyKind::Written { .. }) if !existed => {
                self.created.borrow_mut().insert(key.clone(), now);
            }
            (StoreOp::Delete { key, .. }, ReplyKind::Deleted) => {
                self.created.borrow_mut().remove(key);
            }
            (StoreOp::List { .. }, ReplyKind::Listed { entries, .. }) => {
                let created = self.created.borrow();
                let lag = self.lag.as_millis() as u64;
                entries.retain(|e| created.get(&e.key).is_none_or(|t| now - t >= lag));
            }
            _ => {}
        }
        reply
    }
}

impl Store for LaggingListings {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        std::future::ready(self.apply(&op))
    }
}
