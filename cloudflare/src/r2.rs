//! The core's [`Store`] directly on an R2 bucket binding: no HTTP, no
//! signing, no credentials.
//!
//! | verb | binding call |
//! |---|---|
//! | GET | `get(key)`: `null` is missing |
//! | GET `If-None-Match: e` | `get(key, {onlyIf: {etagDoesNotMatch: e}})`: an object without a body is unchanged |
//! | PUT `If-None-Match: *` | `put(key, body, {onlyIf: {etagDoesNotMatch: "*"}})`: `null` is a failed precondition |
//! | PUT `If-Match: e` | `put(key, body, {onlyIf: {etagMatches: e}})`, with `e` unquoted |
//! | DELETE | `delete(key)`, unconditional only |
//! | LIST | `list({prefix, cursor})` |
//!
//! **Time.** The binding's replies carry no `Date`. A write's reply is the
//! stored object, whose `uploaded` time is the store's clock at the write:
//! it dates the reply (millisecond resolution). A read's `uploaded` is the
//! time of an *earlier* write, so it never dates a read: a read is dated by
//! the Worker's own clock within the configured skew
//! ([`LeaseConfig::max_skew`](lease_core::LeaseConfig::max_skew)),
//! which the core handles as it does any store without dates.
//!
//! **One write per second per object.** R2 allows about one write a
//! second to one object (more is answered 429, read as throttling): the
//! store's [`min_write_interval`](Store::min_write_interval) is
//! [`R2_MIN_WRITE_INTERVAL`], so every machine spaces its writes to a key,
//! and a renewal interval shorter than it is refused by validation.
//!
//! **No conditional DELETE.** The binding cannot delete only if the etag
//! matches, so a conditional DELETE is answered
//! [`ReplyKind::Unsupported`] and nothing is deleted: the `mutex` protocol
//! (create/delete) cannot run on the binding, and the capability probe
//! says so. `cas` (the default) and `epochs` can.

use lease_core::store::{ListEntry, PutCondition, ReplyKind};
use lease_core::time::StoreDate;
use lease_core::wire::R2_MIN_WRITE_INTERVAL;
use lease_core::{Etag, Store, StoreOp, StoreReply, UnixMillis};
use std::time::Duration;
use worker::{Bucket, Conditional};

/// The lease store on an R2 bucket binding.
#[derive(Debug)]
pub struct R2Store {
    bucket: Bucket,
}

impl R2Store {
    /// A store on `bucket` (from `env.bucket("LOCKS")`).
    pub fn new(bucket: Bucket) -> Self {
        R2Store { bucket }
    }
}

/// An exception from the binding: the call may or may not have applied.
/// R2 reports overload as error 10058; everything else is an internal
/// error whose outcome is unknown (the machine re-reads before trusting a
/// write).
fn failed(e: worker::Error) -> StoreReply {
    let message = e.to_string();
    let kind = if message.contains("10058") || message.contains("Too Many Requests") {
        ReplyKind::Throttled { retry_after: None }
    } else {
        ReplyKind::ServerError {
            status: 500,
            code: Some(message.chars().take(200).collect()),
        }
    };
    StoreReply::new(kind)
}

impl R2Store {
    /// `get(key)`, with `{onlyIf: {etagDoesNotMatch: e}}` when `unless` is
    /// given: an object whose etag is `e` comes back without a body.
    async fn get(&self, key: String, unless: Option<String>) -> StoreReply {
        let conditional = unless.is_some();
        let get = self.bucket.get(key).only_if(Conditional {
            etag_does_not_match: unless,
            ..Conditional::default()
        });
        match get.execute().await {
            Ok(None) => StoreReply::new(ReplyKind::Missing),
            Ok(Some(object)) => {
                let etag = Etag::new(&object.etag());
                let body = match object.body() {
                    Some(body) => match body.bytes().await {
                        Ok(b) => b,
                        Err(e) => return failed(e),
                    },
                    None if conditional => return StoreReply::new(ReplyKind::NotModified),
                    None => Vec::new(),
                };
                StoreReply::new(ReplyKind::Found { etag, body })
            }
            Err(e) => failed(e),
        }
    }
}

impl Store for R2Store {
    /// R2 allows about one write per second to one object: every machine
    /// spaces its writes to a key by this.
    fn min_write_interval(&self) -> Duration {
        R2_MIN_WRITE_INTERVAL
    }

    /// One match over the store's verbs, each mapped to the R2 binding's
    /// call and its answer classified; longer than 80 lines for that.
    async fn call(&self, op: StoreOp) -> StoreReply {
        match op {
            StoreOp::Get { key } => self.get(key, None).await,
            StoreOp::GetIfNoneMatch { key, etag } => self.get(key, Some(etag.to_string())).await,
            StoreOp::Put {
                key,
                body,
                condition,
            } => {
                let only_if = match condition {
                    PutCondition::IfAbsent => Some(Conditional {
                        etag_does_not_match: Some("*".into()),
                        ..Conditional::default()
                    }),
                    PutCondition::IfMatch(etag) => Some(Conditional {
                        etag_matches: Some(etag.as_str().to_string()),
                        ..Conditional::default()
                    }),
                    PutCondition::None => None,
                };
                let mut put = self.bucket.put(key, body);
                if let Some(only_if) = only_if {
                    put = put.only_if(only_if);
                }
                match put.execute().await {
                    Ok(Some(object)) => StoreReply::dated(
                        ReplyKind::Written {
                            etag: Some(Etag::new(&object.etag())),
                        },
                        StoreDate::exact(UnixMillis(object.uploaded().as_millis())),
                    ),
                    Ok(None) => StoreReply::new(ReplyKind::PreconditionFailed),
                    Err(e) => failed(e),
                }
            }
            StoreOp::Delete {
                if_match: Some(_), ..
            } => StoreReply::new(ReplyKind::Unsupported {
                status: 501,
                code: Some("R2BindingHasNoConditionalDelete".into()),
            }),
            StoreOp::Delete {
                key,
                if_match: None,
            } => match self.bucket.delete(key).await {
                Ok(()) => StoreReply::new(ReplyKind::Deleted),
                Err(e) => failed(e),
            },
            StoreOp::List {
                prefix,
                continuation,
                max_keys,
            } => {
                let mut list = self.bucket.list().prefix(prefix);
                if let Some(cursor) = continuation {
                    list = list.cursor(cursor);
                }
                if let Some(n) = max_keys {
                    list = list.limit(n.max(1));
                }
                match list.execute().await {
                    Ok(page) => StoreReply::new(ReplyKind::Listed {
                        entries: page
                            .objects()
                            .iter()
                            .map(|o| ListEntry {
                                key: o.key(),
                                etag: Some(Etag::new(&o.etag())),
                                size: o.size(),
                            })
                            .collect(),
                        next: page.truncated().then(|| page.cursor()).flatten(),
                    }),
                    Err(e) => failed(e),
                }
            }
        }
    }
}
