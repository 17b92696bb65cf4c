//! A linearizable in-memory store with real conditional semantics, and a
//! virtual clock to drive it with.
//!
//! [`MemStore`] answers exactly like a well-behaved object store: PUT with
//! `If-None-Match: *` fails on an existing key, `If-Match` fails on a stale
//! etag or a missing key (and never creates it), conditional DELETE is
//! honoured, every reply carries the store's date. Each call is applied
//! atomically under one lock. Used by doc examples, unit tests, the
//! simulator and the browser demo.
//!
//! [`VirtualClock`] is a [`Clock`] whose sleeps complete at once by moving
//! time forward: a whole lease lifetime runs in microseconds, and the store
//! dates its replies from the same clock.

use crate::time::Clock;

use crate::store::Store;
use crate::store::{Etag, ListEntry, PutCondition, ReplyKind, StoreOp, StoreReply};
use crate::time::{Mono, Now, StoreDate, UnixMillis};
use core::future::Future;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A virtual clock: monotonic time starts at zero, wall time at `epoch`;
/// sleeping jumps forward. Clones share the same time.
#[derive(Clone, Debug)]
pub struct VirtualClock {
    mono_ms: Arc<AtomicU64>,
    epoch: UnixMillis,
}

impl VirtualClock {
    /// A clock at monotonic zero whose wall time reads `epoch`.
    pub fn new(epoch: UnixMillis) -> Self {
        VirtualClock {
            mono_ms: Arc::new(AtomicU64::new(0)),
            epoch,
        }
    }

    /// Moves time forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.mono_ms
            .fetch_add(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// Current wall time.
    pub fn wall(&self) -> UnixMillis {
        self.epoch + Duration::from_millis(self.mono_ms.load(Ordering::SeqCst))
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Now {
        Now {
            mono: Mono(self.mono_ms.load(Ordering::SeqCst)),
            wall: self.wall(),
        }
    }

    /// Yields once, then jumps to `at` when polled again (not when
    /// created: a driver that finds a reply ready never polls its timer,
    /// and time must not move). The yield lets other futures on the same
    /// task (a leader's work beside its campaign) run before time moves.
    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        let mono_ms = self.mono_ms.clone();
        let mut yielded = false;
        core::future::poll_fn(move |cx| {
            if !yielded {
                yielded = true;
                cx.waker().wake_by_ref();
                return core::task::Poll::Pending;
            }
            mono_ms.fetch_max(at.0, Ordering::SeqCst);
            core::task::Poll::Ready(())
        })
    }
}

#[derive(Clone, Debug)]
struct Object {
    etag: Etag,
    body: Vec<u8>,
}

#[derive(Debug, Default)]
struct Objects {
    map: BTreeMap<String, Object>,
    versions: u64,
}

impl Objects {
    /// A page of at most `page_size` keys starting with `prefix`, after
    /// `continuation`.
    fn list(&self, prefix: &str, continuation: Option<&String>, page_size: usize) -> ReplyKind {
        let start = continuation.cloned().unwrap_or_default();
        let mut entries: Vec<ListEntry> = self
            .map
            .range(start..)
            .filter(|(k, _)| k.starts_with(prefix) && Some(*k) != continuation)
            .take(page_size + 1)
            .map(|(k, o)| ListEntry {
                key: k.clone(),
                etag: Some(o.etag.clone()),
                size: o.body.len() as u64,
            })
            .collect();
        let next = (entries.len() > page_size).then(|| {
            entries.truncate(page_size);
            entries.last().map(|e| e.key.clone()).unwrap_or_default()
        });
        ReplyKind::Listed { entries, next }
    }
}

/// The in-memory store (see the module docs). Clones share the same data.
#[derive(Clone, Debug)]
pub struct MemStore {
    objects: Arc<Mutex<Objects>>,
    clock: VirtualClock,
    page_size: usize,
}

impl MemStore {
    /// An empty store dated by `clock`.
    pub fn new(clock: VirtualClock) -> Self {
        MemStore {
            objects: Arc::default(),
            clock,
            page_size: 1000,
        }
    }

    /// Lists at most `n` keys per page (to exercise continuation).
    pub fn with_page_size(mut self, n: usize) -> Self {
        self.page_size = n.max(1);
        self
    }

    /// The current body and etag at `key`.
    pub fn get(&self, key: &str) -> Option<(Etag, Vec<u8>)> {
        let objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        objects
            .map
            .get(key)
            .map(|o| (o.etag.clone(), o.body.clone()))
    }

    /// Every key starting with `prefix`, in order.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        objects
            .map
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Applies one call atomically and answers it.
    pub fn apply(&self, op: &StoreOp) -> StoreReply {
        let mut objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        let kind = match op {
            StoreOp::Get { key } => match objects.map.get(key) {
                Some(o) => ReplyKind::Found {
                    etag: o.etag.clone(),
                    body: o.body.clone(),
                },
                None => ReplyKind::Missing,
            },
            StoreOp::GetIfNoneMatch { key, etag } => match objects.map.get(key) {
                Some(o) if &o.etag == etag => ReplyKind::NotModified,
                Some(o) => ReplyKind::Found {
                    etag: o.etag.clone(),
                    body: o.body.clone(),
                },
                None => ReplyKind::Missing,
            },
            StoreOp::Put {
                key,
                body,
                condition,
            } => {
                let current = objects.map.get(key).map(|o| &o.etag);
                let allowed = match (condition, current) {
                    (PutCondition::None, _) | (PutCondition::IfAbsent, None) => true,
                    (PutCondition::IfMatch(want), Some(have)) => want == have,
                    (PutCondition::IfAbsent, Some(_)) | (PutCondition::IfMatch(_), None) => false,
                };
                if allowed {
                    objects.versions += 1;
                    let etag = Etag::new(&format!("{:016x}", objects.versions));
                    objects.map.insert(
                        key.clone(),
                        Object {
                            etag: etag.clone(),
                            body: body.clone(),
                        },
                    );
                    ReplyKind::Written { etag: Some(etag) }
                } else if current.is_none() {
                    ReplyKind::Missing
                } else {
                    ReplyKind::PreconditionFailed
                }
            }
            StoreOp::Delete { key, if_match } => match (objects.map.get(key), if_match) {
                (None, _) => ReplyKind::Missing,
                (Some(o), Some(want)) if &o.etag != want => ReplyKind::PreconditionFailed,
                (Some(_), _) => {
                    objects.map.remove(key);
                    ReplyKind::Deleted
                }
            },
            StoreOp::List {
                prefix,
                continuation,
                max_keys,
            } => {
                let page_size = match max_keys {
                    Some(n) => self.page_size.min((*n).max(1) as usize),
                    None => self.page_size,
                };
                objects.list(prefix, continuation.as_ref(), page_size)
            }
        };
        StoreReply::dated(kind, StoreDate::exact(self.clock.wall()))
    }
}

impl Store for MemStore {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        core::future::ready(self.apply(&op))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, condition: PutCondition) -> StoreOp {
        StoreOp::Put {
            key: key.into(),
            body: b"x".to_vec(),
            condition,
        }
    }

    #[test]
    fn conditional_semantics() {
        let store = MemStore::new(VirtualClock::new(UnixMillis(1_000)));
        let ReplyKind::Written { etag: Some(e1) } =
            store.apply(&put("k", PutCondition::IfAbsent)).kind
        else {
            panic!("create failed")
        };
        assert_eq!(
            store.apply(&put("k", PutCondition::IfAbsent)).kind,
            ReplyKind::PreconditionFailed
        );
        let ReplyKind::Written { etag: Some(e2) } = store
            .apply(&put("k", PutCondition::IfMatch(e1.clone())))
            .kind
        else {
            panic!("update failed")
        };
        assert_eq!(
            store
                .apply(&put("k", PutCondition::IfMatch(e1.clone())))
                .kind,
            ReplyKind::PreconditionFailed
        );
        // If-Match on a missing key fails and does not create it.
        assert_eq!(
            store
                .apply(&put("other", PutCondition::IfMatch(e2.clone())))
                .kind,
            ReplyKind::Missing
        );
        assert!(store.get("other").is_none());
        let del = |m: Option<Etag>| StoreOp::Delete {
            key: "k".into(),
            if_match: m,
        };
        assert_eq!(
            store.apply(&del(Some(e1))).kind,
            ReplyKind::PreconditionFailed
        );
        assert_eq!(store.apply(&del(Some(e2))).kind, ReplyKind::Deleted);
        assert_eq!(store.apply(&del(None)).kind, ReplyKind::Missing);
        assert_eq!(
            store.apply(&StoreOp::Get { key: "k".into() }).date,
            Some(StoreDate::exact(UnixMillis(1_000)))
        );
    }

    #[test]
    fn listing_pages() {
        let store = MemStore::new(VirtualClock::new(UnixMillis(0))).with_page_size(2);
        for k in ["a/1", "a/2", "a/3", "b/1"] {
            store.apply(&put(k, PutCondition::IfAbsent));
        }
        let mut keys = vec![];
        let mut continuation = None;
        loop {
            let reply = store.apply(&StoreOp::List {
                prefix: "a/".into(),
                continuation: continuation.clone(),
                max_keys: None,
            });
            let ReplyKind::Listed { entries, next } = reply.kind else {
                panic!("not a listing")
            };
            keys.extend(entries.into_iter().map(|e| e.key));
            match next {
                Some(n) => continuation = Some(n),
                None => break,
            }
        }
        assert_eq!(keys, ["a/1", "a/2", "a/3"]);
    }
}
