//! A trace's values as JSON, both ways where a replay reads them back
//! (starts, replies), one way where it only compares them (outputs). The
//! format is in `docs/operations.md`.

use super::{Start, Traced};
use crate::config::{LeaseConfig, Protocol};
use crate::entropy::Entropy;
use crate::protocol::elector::HoldLimit;
use crate::protocol::machine::Output;
use crate::protocol::outcome::{Claim, Event, Lease};
use crate::record::LeaseRecord;
use crate::store::{
    Etag, ListEntry, PutCondition, ReplyKind, StoreOp, StoreReply, TransportErrorKind,
};
use crate::time::{Mono, StoreDate, UnixMillis};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// What went wrong reading a trace value back: the field, and why.
pub(crate) type Bad = String;

fn nanos(d: Duration) -> Value {
    // Durations in a trace are nanoseconds, so that they come back exact.
    Value::from(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a Value, Bad> {
    obj.get(name).ok_or_else(|| format!("`{name}` is missing"))
}

fn u64_of(obj: &Map<String, Value>, name: &str) -> Result<u64, Bad> {
    field(obj, name)?
        .as_u64()
        .ok_or_else(|| format!("`{name}` is not a whole number"))
}

fn str_of<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a str, Bad> {
    field(obj, name)?
        .as_str()
        .ok_or_else(|| format!("`{name}` is not a string"))
}

fn opt_str(obj: &Map<String, Value>, name: &str) -> Result<Option<String>, Bad> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{name}` is not a string")),
    }
}

fn dur_of(obj: &Map<String, Value>, name: &str) -> Result<Duration, Bad> {
    u64_of(obj, name).map(Duration::from_nanos)
}

fn bool_of(obj: &Map<String, Value>, name: &str) -> Result<bool, Bad> {
    field(obj, name)?
        .as_bool()
        .ok_or_else(|| format!("`{name}` is not true or false"))
}

pub(crate) fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, Bad> {
    v.as_object()
        .ok_or_else(|| format!("{what} is not an object"))
}

fn within<T>(what: &str, r: Result<T, Bad>) -> Result<T, Bad> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// A body as text when it is UTF-8 (a lease record always is), else
/// base64 under `body_b64`.
fn put_body(obj: &mut Map<String, Value>, body: &[u8]) {
    match core::str::from_utf8(body) {
        Ok(text) => obj.insert("body".into(), text.into()),
        Err(_) => obj.insert("body_b64".into(), crate::wire::base64::encode(body).into()),
    };
}

fn body_of(obj: &Map<String, Value>) -> Result<Vec<u8>, Bad> {
    if let Some(text) = obj.get("body").and_then(Value::as_str) {
        return Ok(text.as_bytes().to_vec());
    }
    let b64 = str_of(obj, "body_b64")?;
    crate::wire::base64::decode(b64).ok_or_else(|| "`body_b64` is not base64".into())
}

pub(crate) fn config(cfg: &LeaseConfig) -> Value {
    #[allow(unused_mut)]
    let mut v = json!({
        "key": cfg.key,
        "holder": cfg.holder,
        "protocol": cfg.protocol.name(),
        "ttl_ns": nanos(cfg.ttl),
        "renew_every_ns": nanos(cfg.renew_every),
        "poll_every_ns": nanos(cfg.poll_every),
        "request_timeout_ns": nanos(cfg.request_timeout),
        "drift_rate": cfg.drift_rate,
        "margin_ns": nanos(cfg.margin),
        "date_resolution_ns": nanos(cfg.date_resolution),
        "max_skew_ns": nanos(cfg.max_skew),
        "max_attempts": cfg.max_attempts,
        "backoff_base_ns": nanos(cfg.backoff_base),
        "backoff_max_ns": nanos(cfg.backoff_max),
        "op_timeout_ns": nanos(cfg.op_timeout),
        "min_write_interval_ns": nanos(cfg.min_write_interval),
        "fair": cfg.fair,
        "meta": cfg.meta,
    });
    if let Some(owned) = &cfg.owned_by {
        v["owned_by"] = json!({"key": owned.key, "token": owned.token});
    }
    #[cfg(feature = "unsafe-variants")]
    if cfg.variant != crate::variants::Variant::Safe {
        v["variant"] = format!("{:?}", cfg.variant).into();
    }
    v
}

pub(crate) fn parse_config(v: &Value) -> Result<LeaseConfig, Bad> {
    let o = object(v, "the configuration")?;
    let protocol = str_of(o, "protocol")?;
    let mut cfg = LeaseConfig::new(
        str_of(o, "key")?,
        str_of(o, "holder")?,
        dur_of(o, "ttl_ns")?,
    );
    cfg.protocol =
        Protocol::parse(protocol).ok_or_else(|| format!("unknown protocol {protocol:?}"))?;
    cfg.renew_every = dur_of(o, "renew_every_ns")?;
    cfg.poll_every = dur_of(o, "poll_every_ns")?;
    cfg.request_timeout = dur_of(o, "request_timeout_ns")?;
    cfg.drift_rate = field(o, "drift_rate")?
        .as_f64()
        .ok_or("`drift_rate` is not a number")?;
    cfg.margin = dur_of(o, "margin_ns")?;
    cfg.date_resolution = dur_of(o, "date_resolution_ns")?;
    cfg.max_skew = dur_of(o, "max_skew_ns")?;
    cfg.max_attempts = u32::try_from(u64_of(o, "max_attempts")?)
        .map_err(|_| "`max_attempts` is too large".to_string())?;
    cfg.backoff_base = dur_of(o, "backoff_base_ns")?;
    cfg.backoff_max = dur_of(o, "backoff_max_ns")?;
    cfg.op_timeout = dur_of(o, "op_timeout_ns")?;
    cfg.min_write_interval = dur_of(o, "min_write_interval_ns")?;
    cfg.fair = bool_of(o, "fair")?;
    if let Some(meta) = o.get("meta") {
        for (k, v) in object(meta, "`meta`")? {
            let v = v.as_str().ok_or("`meta` values must be strings")?;
            cfg.meta.insert(k.clone(), v.to_string());
        }
    }
    if let Some(owned) = o.get("owned_by") {
        let owned = object(owned, "`owned_by`")?;
        cfg.owned_by = Some(crate::record::OwnedBy {
            key: str_of(owned, "key")?.to_string(),
            token: u64_of(owned, "token")?,
        });
    }
    if let Some(variant) = o.get("variant") {
        let name = variant.as_str().ok_or("`variant` is not a string")?;
        set_variant(&mut cfg, name)?;
    }
    Ok(cfg)
}

#[cfg(feature = "unsafe-variants")]
fn set_variant(cfg: &mut LeaseConfig, name: &str) -> Result<(), Bad> {
    cfg.variant = crate::variants::Variant::ALL
        .into_iter()
        .find(|v| format!("{v:?}") == name)
        .ok_or_else(|| format!("unknown variant {name:?}"))?;
    Ok(())
}

#[cfg(not(feature = "unsafe-variants"))]
fn set_variant(_: &mut LeaseConfig, name: &str) -> Result<(), Bad> {
    Err(format!(
        "the trace was recorded by the broken variant {name:?} of a verification build; \
         only such a build (feature `unsafe-variants`) replays it"
    ))
}

pub(crate) fn entropy(e: &Entropy) -> Value {
    e.state()
        .iter()
        .map(|w| Value::from(format!("{w:016x}")))
        .collect()
}

pub(crate) fn parse_entropy(v: &Value) -> Result<Entropy, Bad> {
    let words = v.as_array().ok_or("`entropy` is not a list")?;
    let mut s = [0u64; 4];
    if words.len() != 4 {
        return Err("`entropy` must hold four words".into());
    }
    for (slot, w) in s.iter_mut().zip(words) {
        let text = w.as_str().ok_or("`entropy` words are hex strings")?;
        *slot = u64::from_str_radix(text, 16).map_err(|_| format!("bad entropy word {text:?}"))?;
    }
    Ok(Entropy::from_state(s))
}

fn date(d: &StoreDate) -> Value {
    json!([d.unix_ms.0, d.behind_ms, d.ahead_ms])
}

fn parse_date(v: &Value) -> Result<StoreDate, Bad> {
    let bad = || "a date is [unix_ms, behind_ms, ahead_ms]".to_string();
    let a = v.as_array().filter(|a| a.len() == 3).ok_or_else(bad)?;
    let n = |i: usize| a[i].as_u64().ok_or_else(bad);
    Ok(StoreDate {
        unix_ms: UnixMillis(n(0)?),
        behind_ms: n(1)?,
        ahead_ms: n(2)?,
    })
}

fn opt_mono(o: &Map<String, Value>, name: &str) -> Result<Option<Mono>, Bad> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|m| Some(Mono(m)))
            .ok_or_else(|| format!("`{name}` is not a whole number")),
    }
}

pub(crate) fn lease(l: &Lease) -> Value {
    json!({
        "key": l.key,
        "token": l.token,
        "session": l.acquisition,
        "etag": l.etag.as_str(),
        "record": String::from_utf8_lossy(&l.record.encode()),
        "valid_until": l.valid_until.0,
        "written_at": l.written_at.0,
        "clock": [date(&l.clock.0), l.clock.1 .0],
        "strays_until": l.strays_until.map(|m| m.0),
    })
}

pub(crate) fn parse_lease(v: &Value) -> Result<Lease, Bad> {
    let o = object(v, "the lease")?;
    let record = LeaseRecord::decode(str_of(o, "record")?.as_bytes())
        .map_err(|e| format!("`record`: {e}"))?;
    let clock = field(o, "clock")?
        .as_array()
        .filter(|a| a.len() == 2)
        .ok_or("`clock` is [date, mono]")?;
    Ok(Lease {
        key: str_of(o, "key")?.to_string(),
        token: u64_of(o, "token")?,
        acquisition: str_of(o, "session")?.to_string(),
        etag: Etag::verbatim(str_of(o, "etag")?),
        record,
        valid_until: Mono(u64_of(o, "valid_until")?),
        written_at: Mono(u64_of(o, "written_at")?),
        clock: (
            parse_date(&clock[0])?,
            Mono(
                clock[1]
                    .as_u64()
                    .ok_or("`clock`'s mono is a whole number")?,
            ),
        ),
        strays_until: opt_mono(o, "strays_until")?,
    })
}

fn claim(c: &Claim) -> Value {
    json!({
        "key": c.key,
        "holder": c.holder,
        "session": c.acquisition,
        "token": c.token,
        "live_until": c.live_until.0,
    })
}

fn parse_claim(v: &Value) -> Result<Claim, Bad> {
    let o = object(v, "a claim")?;
    Ok(Claim {
        key: str_of(o, "key")?.to_string(),
        holder: str_of(o, "holder")?.to_string(),
        acquisition: str_of(o, "session")?.to_string(),
        token: u64_of(o, "token")?,
        live_until: Mono(u64_of(o, "live_until")?),
    })
}

pub(crate) fn start(s: &Start) -> Value {
    let (cfg, entropy_v) = match s {
        Start::Acquire { cfg, entropy, .. }
        | Start::Renew { cfg, entropy, .. }
        | Start::Release { cfg, entropy, .. }
        | Start::Hold { cfg, entropy, .. }
        | Start::Elect { cfg, entropy } => (cfg, entropy),
    };
    let mut v = json!({
        "op": s.op(),
        "config": config(cfg),
        "entropy": entropy(entropy_v),
    });
    match s {
        Start::Acquire { claims, .. } => {
            v["claims"] = claims.iter().map(claim).collect();
        }
        Start::Renew { lease: l, .. } | Start::Release { lease: l, .. } => v["lease"] = lease(l),
        Start::Hold {
            lease: l, limit, ..
        } => {
            v["lease"] = lease(l);
            if let Some(limit) = limit {
                v["limit"] = json!({"stop": limit.stop.0, "end": limit.end.0});
            }
        }
        Start::Elect { .. } => {}
    }
    v
}

pub(crate) fn parse_start(v: &Value) -> Result<Start, Bad> {
    let o = object(v, "`start`")?;
    let cfg = within("`config`", parse_config(field(o, "config")?))?;
    let entropy = parse_entropy(field(o, "entropy")?)?;
    let lease = || within("`lease`", parse_lease(field(o, "lease")?));
    Ok(match str_of(o, "op")? {
        "acquire" => {
            let claims = match o.get("claims") {
                None => Vec::new(),
                Some(c) => c
                    .as_array()
                    .ok_or("`claims` is not a list")?
                    .iter()
                    .map(parse_claim)
                    .collect::<Result<_, _>>()?,
            };
            Start::Acquire {
                cfg,
                entropy,
                claims,
            }
        }
        "renew" => Start::Renew {
            cfg,
            entropy,
            lease: lease()?,
        },
        "release" => Start::Release {
            cfg,
            entropy,
            lease: lease()?,
        },
        "hold" => Start::Hold {
            cfg,
            entropy,
            lease: lease()?,
            limit: match o.get("limit") {
                None | Some(Value::Null) => None,
                Some(v) => {
                    let l = object(v, "`limit`")?;
                    Some(HoldLimit {
                        stop: Mono(u64_of(l, "stop")?),
                        end: Mono(u64_of(l, "end")?),
                    })
                }
            },
        },
        "elect" => Start::Elect { cfg, entropy },
        other => return Err(format!("unknown operation {other:?}")),
    })
}

/// Removes what could be a credential from a server's or a transport's
/// free text: anything shaped like an AWS access key id, and the value of
/// a signed URL's credential parameters (`X-Amz-Signature=`,
/// `X-Amz-Credential=`, `X-Amz-Security-Token=`, a SAS `sig=`) or of a
/// `Signature=`, `Credential=`, `token=` or `key=` pair.
pub fn scrub(text: &str) -> String {
    const PARAMS: [&str; 8] = [
        "x-amz-signature=",
        "x-amz-credential=",
        "x-amz-security-token=",
        "signature=",
        "credential=",
        "sig=",
        "token=",
        "key=",
    ];
    const KEY_IDS: [&str; 8] = [
        "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA",
    ];
    // Nearly every text has neither a parameter nor a key id.
    if !text.contains('=') && !KEY_IDS.iter().any(|k| text.contains(k)) {
        return text.to_string();
    }
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if let Some(p) = PARAMS.iter().find(|p| lower[i..].starts_with(*p)) {
            let start = i + p.len();
            let end = start
                + bytes[start..]
                    .iter()
                    .position(|b| b.is_ascii_whitespace() || b"&,;\"'<>\\".contains(b))
                    .unwrap_or(bytes.len() - start);
            out.push_str(&text[i..start]);
            if end > start {
                out.push_str("[redacted]");
            }
            i = end;
            continue;
        }
        // After a `Debug` escape (`\n`, `\t`) a key id starts a word too.
        let word_start =
            i == 0 || !bytes[i - 1].is_ascii_alphanumeric() || (i >= 2 && bytes[i - 2] == b'\\');
        if word_start && KEY_IDS.iter().any(|k| text[i..].starts_with(k)) {
            let len = bytes[i..]
                .iter()
                .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
                .count();
            if len >= 16 {
                out.push_str("[redacted]");
                i += len;
                continue;
            }
        }
        let ch = text[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

fn scrubbed(s: &Option<String>) -> Value {
    s.as_deref().map(scrub).into()
}

fn transport_name(kind: TransportErrorKind) -> &'static str {
    match kind {
        TransportErrorKind::Timeout => "timeout",
        TransportErrorKind::Connect => "connect",
        TransportErrorKind::Reset => "reset",
        TransportErrorKind::Other => "other",
        TransportErrorKind::Credentials => "credentials",
    }
}

/// A reply as a trace keeps it (free text scrubbed, see [`scrub`]).
pub(crate) fn reply(r: &StoreReply) -> Value {
    let mut o = Map::new();
    o.insert("kind".into(), r.kind.name().into());
    match &r.kind {
        ReplyKind::Found { etag, body } => {
            o.insert("etag".into(), etag.as_str().into());
            put_body(&mut o, body);
        }
        ReplyKind::Written { etag } => {
            o.insert("etag".into(), etag.as_ref().map(Etag::as_str).into());
        }
        ReplyKind::Listed { entries, next } => {
            let list: Vec<Value> = entries
                .iter()
                .map(|e| json!([e.key, e.etag.as_ref().map(Etag::as_str), e.size]))
                .collect();
            o.insert("entries".into(), list.into());
            o.insert("next".into(), next.clone().into());
        }
        ReplyKind::Throttled { retry_after } => {
            o.insert("retry_after_ns".into(), retry_after.map(nanos).into());
        }
        ReplyKind::ServerError { status, code } | ReplyKind::Unsupported { status, code } => {
            o.insert("status".into(), (*status).into());
            o.insert("code".into(), scrubbed(code));
        }
        ReplyKind::Denied { code, message } => {
            o.insert("code".into(), scrubbed(code));
            o.insert("message".into(), scrubbed(message));
        }
        ReplyKind::Unexpected {
            status,
            code,
            message,
        } => {
            o.insert("status".into(), (*status).into());
            o.insert("code".into(), scrubbed(code));
            o.insert("message".into(), scrubbed(message));
        }
        ReplyKind::Invalid { reason } => {
            o.insert("reason".into(), scrub(reason).into());
        }
        ReplyKind::Transport { kind, message } => {
            o.insert("transport".into(), transport_name(*kind).into());
            o.insert("message".into(), scrub(message).into());
        }
        ReplyKind::NotModified
        | ReplyKind::Missing
        | ReplyKind::Deleted
        | ReplyKind::PreconditionFailed
        | ReplyKind::Conflict
        | ReplyKind::NoSuchBucket => {}
    }
    if let Some(d) = &r.date {
        o.insert("date".into(), date(d));
    }
    if let Some(v) = &r.version_id {
        o.insert("version_id".into(), v.clone().into());
    }
    Value::Object(o)
}

fn status_of(o: &Map<String, Value>) -> Result<u16, Bad> {
    u16::try_from(u64_of(o, "status")?).map_err(|_| "`status` is not an HTTP status".into())
}

/// A listing's `entries`, each `[key, etag, size]`.
fn entries_of(o: &Map<String, Value>) -> Result<Vec<ListEntry>, Bad> {
    let bad = || "`entries` are [key, etag, size]".to_string();
    field(o, "entries")?
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|e| {
            let a = e.as_array().filter(|a| a.len() == 3).ok_or_else(bad)?;
            Ok(ListEntry {
                key: a[0].as_str().ok_or_else(bad)?.to_string(),
                etag: a[1].as_str().map(Etag::verbatim),
                size: a[2].as_u64().ok_or_else(bad)?,
            })
        })
        .collect()
}

pub(crate) fn parse_reply(v: &Value) -> Result<StoreReply, Bad> {
    let o = object(v, "the reply")?;
    let kind = match str_of(o, "kind")? {
        "found" => ReplyKind::Found {
            etag: Etag::verbatim(str_of(o, "etag")?),
            body: body_of(o)?,
        },
        "not-modified" => ReplyKind::NotModified,
        "missing" => ReplyKind::Missing,
        "written" => ReplyKind::Written {
            etag: opt_str(o, "etag")?.map(|e| Etag::verbatim(&e)),
        },
        "deleted" => ReplyKind::Deleted,
        "listed" => ReplyKind::Listed {
            entries: entries_of(o)?,
            next: opt_str(o, "next")?,
        },
        "precondition-failed" => ReplyKind::PreconditionFailed,
        "conflict" => ReplyKind::Conflict,
        "throttled" => ReplyKind::Throttled {
            retry_after: match o.get("retry_after_ns") {
                None | Some(Value::Null) => None,
                Some(_) => Some(dur_of(o, "retry_after_ns")?),
            },
        },
        "server-error" => ReplyKind::ServerError {
            status: status_of(o)?,
            code: opt_str(o, "code")?,
        },
        "denied" => ReplyKind::Denied {
            code: opt_str(o, "code")?,
            message: opt_str(o, "message")?,
        },
        "no-such-bucket" => ReplyKind::NoSuchBucket,
        "unsupported" => ReplyKind::Unsupported {
            status: status_of(o)?,
            code: opt_str(o, "code")?,
        },
        "unexpected" => ReplyKind::Unexpected {
            status: status_of(o)?,
            code: opt_str(o, "code")?,
            message: opt_str(o, "message")?,
        },
        "invalid" => ReplyKind::Invalid {
            reason: str_of(o, "reason")?.to_string(),
        },
        "transport" => ReplyKind::Transport {
            kind: match str_of(o, "transport")? {
                "timeout" => TransportErrorKind::Timeout,
                "connect" => TransportErrorKind::Connect,
                "reset" => TransportErrorKind::Reset,
                "credentials" => TransportErrorKind::Credentials,
                _ => TransportErrorKind::Other,
            },
            message: str_of(o, "message")?.to_string(),
        },
        other => return Err(format!("unknown reply kind {other:?}")),
    };
    Ok(StoreReply {
        kind,
        date: o.get("date").map(parse_date).transpose()?,
        version_id: opt_str(o, "version_id")?,
    })
}

fn op(op: &StoreOp) -> Value {
    let mut o = Map::new();
    o.insert("verb".into(), op.verb().into());
    match op {
        StoreOp::Get { key } => {
            o.insert("key".into(), key.clone().into());
        }
        StoreOp::GetIfNoneMatch { key, etag } => {
            o.insert("key".into(), key.clone().into());
            o.insert("if_none_match".into(), etag.as_str().into());
        }
        StoreOp::Put {
            key,
            body,
            condition,
        } => {
            o.insert("key".into(), key.clone().into());
            let condition = match condition {
                PutCondition::IfAbsent => "absent".to_string(),
                PutCondition::IfMatch(e) => format!("match {e}"),
                PutCondition::None => "none".to_string(),
            };
            o.insert("if".into(), condition.into());
            put_body(&mut o, body);
        }
        StoreOp::Delete { key, if_match } => {
            o.insert("key".into(), key.clone().into());
            o.insert(
                "if_match".into(),
                if_match.as_ref().map(Etag::as_str).into(),
            );
        }
        StoreOp::List {
            prefix,
            continuation,
            max_keys,
        } => {
            o.insert("prefix".into(), prefix.clone().into());
            o.insert("continuation".into(), continuation.clone().into());
            o.insert("max_keys".into(), (*max_keys).into());
        }
    }
    Value::Object(o)
}

/// An output as a trace shows it (its text scrubbed, see [`scrub`]): a
/// call (`call`, `op`), an event (`event`, its `Debug` text, and `held` for a term it confirms), a wait
/// (`wait`, local ms) or the outcome (`done`, its `Debug` text, and
/// `held` when it holds a lease).
pub(crate) fn output<T: Traced>(out: &Output<T>) -> Value {
    match out {
        Output::Call(id, o) => json!({"call": id.0, "op": op(o)}),
        Output::Event(e) => {
            let mut v = json!({"event": scrub(&format!("{e:?}"))});
            if let Event::Acquired { token, valid_until } | Event::Renewed { token, valid_until } =
                e
            {
                v["held"] = json!([token, valid_until.0]);
                v["acquired"] = matches!(e, Event::Acquired { .. }).into();
            }
            v
        }
        Output::Wait(at) => json!({"wait": at.0}),
        Output::Done(outcome) => {
            let mut v = json!({"done": scrub(&format!("{outcome:?}"))});
            if let Some((token, until)) = outcome.held() {
                v["held"] = json!([token, until.0]);
            }
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An etag reads back as it was recorded, whatever the server sent
    /// (an opaque value may itself begin with `W/`).
    #[test]
    fn an_etag_reads_back_as_it_was() {
        for raw in [
            "\"abc\"",
            "\"W/abc\"",
            "W/\"abc\"",
            "\"\"abc\"\"",
            "\"abc",
            "W/W/x",
        ] {
            let etag = Etag::new(raw);
            let written = StoreReply::new(ReplyKind::Written {
                etag: Some(etag.clone()),
            });
            let text = reply(&written).to_string();
            let back = parse_reply(&serde_json::from_str(&text).unwrap()).unwrap();
            assert!(
                matches!(&back.kind, ReplyKind::Written { etag: Some(e) } if *e == etag),
                "{raw}: {text} read back as {back:?}"
            );
        }
    }
}
