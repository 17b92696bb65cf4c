//! The browser demo's engine: the deterministic elector simulation
//! ([`lease_sim::elector::World`]) running the real protocol machines against
//! the in-memory store on a virtual clock, exported to JavaScript with
//! wasm-bindgen, plus the exact S3 request the core renders (and optionally
//! signs) for every store call.
//!
//! Everything crosses the boundary as numbers, strings and JSON text, so the
//! page needs no generated types and the same code runs in native tests.
//! Errors are plain messages (thrown as strings in JavaScript); a bad input
//! changes nothing.

use lease_core::store::PutCondition;
use lease_core::variants::Variant;
use lease_core::wire::SigV4Signer;
use lease_core::wire::{Dialect, Signer};
use lease_core::wire::{S3Config, S3Dialect};
use lease_core::{LeaseRecord, Protocol, StoreOp};
use lease_sim::elector::{ElectorFault, Entry, Happening, SimConfig, World, PROTECTED_KEY};
use lease_sim::world::faults::FaultKind;
use serde_json::{json, Value};
use std::time::Duration;
use wasm_bindgen::prelude::wasm_bindgen;

/// talc for Rust's allocations, in place of std's dlmalloc: about 2 KB
/// smaller gzipped, and as fast or faster in talc's own benchmarks.
// SAFETY: a page runs this module on its one thread, which is what
// `new_global` asks for; talc then grows the wasm memory as it needs.
#[cfg(target_family = "wasm")]
#[global_allocator]
static ALLOCATOR: talc::TalckWasm = unsafe { talc::TalckWasm::new_global() };

/// The most nodes a demo world may have.
pub const MAX_NODES: u32 = 8;
/// Demo credentials: the example key pair from AWS's SigV4 documentation.
const DEMO_ACCESS_KEY_ID: &str = "AKIDEXAMPLE";
const DEMO_SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const DEMO_REGION: &str = "us-east-1";
const DEMO_BUCKET: &str = "demo-locks";

/// One simulated world and the settings it was made with.
#[wasm_bindgen]
pub struct Demo {
    world: World,
    protocol: Protocol,
    variant: Variant,
    dialect: S3Dialect,
    signer: SigV4Signer,
}

#[wasm_bindgen]
impl Demo {
    /// A world of `nodes` nodes (1 to 8) contending for one lease of
    /// `ttl_ms` (1 s to 120 s) under `protocol` (`cas`, `epochs` or
    /// `mutex`), safe or naive, all random choices drawn from `seed`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        nodes: u32,
        ttl_ms: u32,
        protocol: &str,
        naive: bool,
        seed: u32,
    ) -> Result<Demo, String> {
        if !(1..=MAX_NODES).contains(&nodes) {
            return Err(format!("nodes must be 1 to {MAX_NODES}, not {nodes}"));
        }
        if !(1_000..=120_000).contains(&ttl_ms) {
            return Err(format!("ttl must be 1000 to 120000 ms, not {ttl_ms}"));
        }
        let protocol = Protocol::parse(protocol).ok_or_else(|| {
            let names: Vec<_> = Protocol::ALL.iter().map(|p| p.name()).collect();
            format!(
                "unknown protocol {protocol:?}; expected one of {}",
                names.join(", ")
            )
        })?;
        let variant = if naive { Variant::Naive } else { Variant::Safe };
        let world = World::new(SimConfig {
            ttl: Duration::from_millis(ttl_ms.into()),
            // Runs as long as the page is open.
            duration: Duration::from_secs(u32::MAX.into()),
            protocol,
            // Slow enough to see calls and replies apart on the timeline.
            latency: (Duration::from_millis(20), Duration::from_millis(120)),
            record_timeline: true,
            ..SimConfig::quiet(seed.into(), nodes as usize, variant)
        });
        let dialect =
            S3Dialect::new(S3Config::aws(DEMO_REGION, DEMO_BUCKET)).map_err(|e| e.to_string())?;
        let signer = SigV4Signer::new(DEMO_ACCESS_KEY_ID, DEMO_SECRET, None, DEMO_REGION);
        Ok(Demo {
            world,
            protocol,
            variant,
            dialect,
            signer,
        })
    }

    /// Simulated time now, in ms from the start.
    pub fn now_ms(&self) -> f64 {
        self.world.now_ms() as f64
    }

    /// Runs the world `ms` of simulated time further.
    pub fn advance(&mut self, ms: f64) -> Result<(), String> {
        let ms = whole_ms("advance", ms)?;
        self.world.run_until(self.world.now_ms() + ms);
        Ok(())
    }

    /// Processes the next pending event alone; returns its time (ms), or
    /// -1 when nothing is pending.
    pub fn step(&mut self) -> f64 {
        self.world.step_next().map_or(-1.0, |at| at as f64)
    }

    /// Starts a new node now; returns its index.
    pub fn add_node(&mut self) -> Result<u32, String> {
        if self.world.nodes().len() >= MAX_NODES as usize {
            return Err(format!("a demo world has at most {MAX_NODES} nodes"));
        }
        Ok(self.world.add_node() as u32)
    }

    /// Injects a fault now. Node faults: `kill` (crash, no restart),
    /// `restart` (a killed node comes back), `remove` (resign and leave),
    /// `release` (give the lease back and campaign again), `pause` (stop
    /// the world for `ms`), `pause_before_write` (pause `ms` on the way to
    /// the next fenced write), `offset` (step the node's wall clock to `ms`
    /// off real time). Store faults, for the next matching call:
    /// `drop_reply` (write applied, reply lost), `5xx` (write applied,
    /// answered 500), `409` (write refused with a conflict), `429` (next
    /// call throttled); `node` is ignored for them.
    pub fn fault(&mut self, kind: &str, node: u32, ms: f64) -> Result<(), String> {
        let store = match kind {
            "drop_reply" => Some(FaultKind::DropReply),
            "5xx" => Some(FaultKind::Apply5xx),
            "409" => Some(FaultKind::Conflict),
            "429" => Some(FaultKind::Throttle { retry_after: None }),
            _ => None,
        };
        if let Some(fault) = store {
            self.world.arm(fault);
            return Ok(());
        }
        let node = node as usize;
        let length = || whole_ms(kind, ms).map(Duration::from_millis);
        let fault = match kind {
            "kill" => ElectorFault::Crash {
                node,
                at_ms: 0,
                restart_after: None,
            },
            "restart" => return self.world.restart(node).map_err(|e| e.to_string()),
            "remove" => ElectorFault::Resign { node, at_ms: 0 },
            "release" => ElectorFault::Release { node, at_ms: 0 },
            "pause" => ElectorFault::Pause {
                node,
                at_ms: 0,
                length: length()?,
            },
            "pause_before_write" => ElectorFault::PauseBeforeWrite {
                node,
                at_ms: 0,
                length: length()?,
            },
            "offset" => {
                if !ms.is_finite() || ms.abs() > 86_400_000.0 {
                    return Err(format!(
                        "offset must be within a day, not {} ms",
                        lease_core::number::decimal(ms, 3)
                    ));
                }
                return self
                    .world
                    .set_clock_offset(node, ms as i64)
                    .map_err(|e| e.to_string());
            }
            other => {
                return Err(format!(
                    "unknown fault {other:?}; expected kill, restart, remove, release, pause, \
                     pause_before_write, offset, drop_reply, 5xx, 409 or 429"
                ))
            }
        };
        self.world.inject(fault).map_err(|e| e.to_string())
    }

    /// The world now, as JSON: time, nodes, the lease object as stored,
    /// the protected object, safety violations, counters, armed faults.
    pub fn state(&self) -> String {
        text(&self.state_value())
    }

    /// Belief intervals (who believed it held which token, when) that end
    /// at or after `since_ms`, as a JSON array.
    pub fn beliefs(&self, since_ms: f64) -> String {
        let since = since_ms.max(0.0) as u64;
        let beliefs: Vec<Value> = self
            .world
            .beliefs()
            .iter()
            .filter(|b| b.end >= since)
            .map(|b| json!({"node": b.node, "token": b.token, "start": b.start, "end": b.end}))
            .collect();
        text(&Value::Array(beliefs))
    }

    /// Timeline entries from index `from` on, as a JSON array (the page
    /// fetches only what is new).
    pub fn timeline(&self, from: u32) -> String {
        let entries = self.world.timeline();
        let from = (from as usize).min(entries.len());
        let out: Vec<Value> = entries[from..]
            .iter()
            .enumerate()
            .map(|(k, e)| entry_json(from + k, e))
            .collect();
        text(&Value::Array(out))
    }

    /// The HTTP request the core renders for S3 for the store call at
    /// timeline index `index`, signed with demo credentials at the calling
    /// node's wall-clock time when `signed`; JSON with method, url,
    /// headers and body.
    pub fn request(&self, index: u32, signed: bool) -> Result<String, String> {
        let entry = self
            .world
            .timeline()
            .get(index as usize)
            .ok_or_else(|| format!("no timeline entry {index}"))?;
        let Happening::Call { op, .. } = &entry.what else {
            return Err(format!("timeline entry {index} is not a store call"));
        };
        let mut request = self.dialect.render(op).map_err(|e| e.to_string())?;
        if signed {
            let node = entry.node.unwrap_or(0);
            let at = self
                .world
                .wall_at(node, entry.at_ms)
                .ok_or_else(|| format!("there is no node {node}"))?;
            self.signer
                .sign(&mut request, at)
                .map_err(|e| e.to_string())?;
        }
        let headers: Vec<Value> = request
            .headers()
            .iter()
            .map(|(name, value)| json!([name.as_str(), value.to_str().unwrap_or("(binary)")]))
            .collect();
        Ok(text(&json!({
            "method": request.method().as_str(),
            "url": request.uri().to_string(),
            "headers": headers,
            "body": String::from_utf8_lossy(request.body()),
        })))
    }
}

/// A JSON value as text for the page. Not `Value`'s `to_string`: its
/// `Display` links a second, pretty-printing serializer into the module.
fn text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

impl Demo {
    fn state_value(&self) -> Value {
        let w = &self.world;
        let now = w.now_ms();
        let nodes: Vec<Value> = w
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, n)| {
                json!({
                    "name": format!("node-{i}"),
                    "alive": n.alive,
                    "resigned": n.resigned,
                    "paused_for_ms": n.paused_until.map(|u| u.saturating_sub(now)),
                    "offset_ms": n.offset_ms,
                    "holding": n.holding.map(|b| json!({"token": b.token, "until_ms": b.end})),
                })
            })
            .collect();
        let lease = w.lease_object().map(|(etag, body)| {
            let record = LeaseRecord::decode(&body).ok().map(|r| {
                json!({
                    "holder": r.holder,
                    "token": r.token,
                    "expires_at": r.expires_at.0,
                    "released": r.released,
                })
            });
            json!({"etag": etag.quoted(), "body": String::from_utf8_lossy(&body), "record": record})
        });
        let protected = w.object(PROTECTED_KEY).map(|(etag, body)| {
            let fenced = lease_core::Fenced::decode(&body);
            json!({
                "key": PROTECTED_KEY,
                "etag": etag.quoted(),
                "token": fenced.as_ref().map(|f| f.token),
                "payload": fenced.map(|f| String::from_utf8_lossy(&f.payload).into_owned()),
            })
        });
        let report = w.report();
        let armed: Vec<&str> = w.armed().map(FaultKind::name).collect();
        json!({
            "now_ms": now,
            "protocol": self.protocol.name(),
            "fences": self.protocol.fences(),
            "naive": self.variant == Variant::Naive,
            "ttl_ms": w.config().ttl.as_millis() as u64,
            "lease_key": SimConfig::LEASE_KEY,
            "nodes": nodes,
            "lease": lease,
            "protected": protected,
            "violations": w.violations().iter().map(|v| v.to_string()).collect::<Vec<_>>(),
            "counters": {
                "store_calls": report.store_calls,
                "fenced_accepted": report.fenced_accepted,
                "fenced_rejected": report.fenced_rejected,
                "faults": report.faults,
            },
            "armed": armed,
            "timeline_len": w.timeline().len(),
        })
    }
}

/// A non-negative whole number of milliseconds, at most a day.
fn whole_ms(what: &str, ms: f64) -> Result<u64, String> {
    if ms.is_finite() && (0.0..=86_400_000.0).contains(&ms) {
        Ok(ms as u64)
    } else {
        Err(format!(
            "{what}: {} ms is not 0 to 86400000 ms",
            lease_core::number::decimal(ms, 3)
        ))
    }
}

/// One timeline entry for the page: kind, short text, and for calls the
/// call id and verb.
fn entry_json(index: usize, e: &Entry) -> Value {
    let (kind, text, call) = match &e.what {
        Happening::Call { id, op } => ("call", describe_op(op), Some(id.0)),
        Happening::Reply { id, kind } => ("reply", kind.clone(), Some(id.0)),
        Happening::Event(ev) => ("event", ev.to_string(), None),
        Happening::Fault(what) => ("fault", what.clone(), None),
    };
    json!({"i": index, "at": e.at_ms, "node": e.node, "kind": kind, "text": text, "call": call})
}

fn describe_op(op: &StoreOp) -> String {
    match op {
        StoreOp::Get { key } => format!("GET {key}"),
        StoreOp::GetIfNoneMatch { key, etag } => {
            format!("GET {key} If-None-Match: {}", etag.quoted())
        }
        StoreOp::Put { key, condition, .. } => match condition {
            PutCondition::IfAbsent => format!("PUT {key} If-None-Match: *"),
            PutCondition::IfMatch(etag) => format!("PUT {key} If-Match: {}", etag.quoted()),
            PutCondition::None => format!("PUT {key} (unconditional)"),
        },
        StoreOp::Delete { key, if_match } => match if_match {
            Some(etag) => format!("DELETE {key} If-Match: {}", etag.quoted()),
            None => format!("DELETE {key}"),
        },
        StoreOp::List { prefix, .. } => format!("LIST {prefix}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).expect("valid JSON")
    }

    fn leader(demo: &Demo) -> Option<(usize, u64)> {
        let state = parse(&demo.state());
        let holding: Vec<_> = state["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n["holding"]["token"].as_u64().map(|t| (i, t)))
            .collect();
        (holding.len() == 1).then(|| holding[0])
    }

    fn run_until(demo: &mut Demo, limit_ms: u64, done: impl Fn(&Demo) -> bool) -> bool {
        for _ in 0..limit_ms / 100 {
            if done(demo) {
                return true;
            }
            demo.advance(100.0).unwrap();
        }
        done(demo)
    }

    #[test]
    fn bad_settings_are_refused_with_the_reason() {
        let err = |r: Result<Demo, String>| r.err().expect("refused");
        assert_eq!(
            err(Demo::new(0, 10_000, "cas", false, 1)),
            "nodes must be 1 to 8, not 0"
        );
        assert_eq!(
            err(Demo::new(3, 10, "cas", false, 1)),
            "ttl must be 1000 to 120000 ms, not 10"
        );
        assert_eq!(
            err(Demo::new(3, 10_000, "raft", false, 1)),
            "unknown protocol \"raft\"; expected one of cas, epochs, mutex"
        );
    }

    #[test]
    fn a_leader_is_elected_and_the_store_holds_its_record() {
        for protocol in ["cas", "epochs", "mutex"] {
            let mut demo = Demo::new(3, 10_000, protocol, false, 1).unwrap();
            assert!(run_until(&mut demo, 10_000, |d| leader(d).is_some()));
            let (node, token) = leader(&demo).unwrap();
            let state = parse(&demo.state());
            assert_eq!(state["protocol"], protocol);
            let record = &state["lease"]["record"];
            assert_eq!(record["holder"], format!("node-{node}"), "{protocol}");
            assert_eq!(record["token"], token);
            assert!(state["lease"]["etag"].as_str().unwrap().starts_with('"'));
            assert_eq!(state["violations"], json!([]));
        }
    }

    #[test]
    fn killing_the_leader_elects_another_with_the_next_token() {
        let mut demo = Demo::new(3, 10_000, "cas", false, 4).unwrap();
        assert!(run_until(&mut demo, 10_000, |d| leader(d).is_some()));
        let (old, token) = leader(&demo).unwrap();
        demo.fault("kill", old as u32, 0.0).unwrap();
        assert!(run_until(&mut demo, 30_000, |d| leader(d)
            .is_some_and(|(n, _)| n != old)));
        assert_eq!(leader(&demo).unwrap().1, token + 1);
        let beliefs = parse(&demo.beliefs(0.0));
        let tokens: Vec<u64> = beliefs
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["token"].as_u64().unwrap())
            .collect();
        assert_eq!(tokens, [token, token + 1]);
        // A killed node can come back; a running one cannot be restarted.
        demo.fault("restart", old as u32, 0.0).unwrap();
        demo.advance(10.0).unwrap();
        assert_eq!(parse(&demo.state())["nodes"][old]["alive"], true);
        assert_eq!(
            demo.fault("restart", old as u32, 0.0).unwrap_err(),
            format!("node {old} is running")
        );
    }

    #[test]
    fn naive_with_a_clock_step_breaks_safety_and_safe_does_not() {
        for naive in [false, true] {
            let mut demo = Demo::new(3, 10_000, "cas", naive, 2).unwrap();
            assert!(run_until(&mut demo, 10_000, |d| leader(d).is_some()));
            let (holder, _) = leader(&demo).unwrap();
            let other = (holder + 1) % 3;
            demo.fault("offset", other as u32, 25_000.0).unwrap();
            demo.advance(20_000.0).unwrap();
            let state = parse(&demo.state());
            let violations = state["violations"].as_array().unwrap();
            assert_eq!(state["naive"], naive);
            assert_eq!(violations.is_empty(), !naive, "{violations:?}");
            if naive {
                let text = violations
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect::<Vec<_>>()
                    .join("; ");
                assert!(text.contains("two holders"), "{text}");
            }
        }
    }

    #[test]
    fn faults_are_checked_before_anything_changes() {
        let mut demo = Demo::new(2, 10_000, "cas", false, 1).unwrap();
        let before = demo.state();
        assert_eq!(
            demo.fault("explode", 0, 0.0).unwrap_err(),
            "unknown fault \"explode\"; expected kill, restart, remove, release, pause, \
             pause_before_write, offset, drop_reply, 5xx, 409 or 429"
        );
        assert_eq!(
            demo.fault("kill", 7, 0.0).unwrap_err(),
            "there is no node 7"
        );
        assert_eq!(
            demo.fault("pause", 0, -5.0).unwrap_err(),
            "pause: -5 ms is not 0 to 86400000 ms"
        );
        assert_eq!(
            demo.fault("pause", 0, f64::NAN).unwrap_err(),
            "pause: NaN ms is not 0 to 86400000 ms"
        );
        assert_eq!(
            demo.fault("offset", 0, 1e12).unwrap_err(),
            "offset must be within a day, not 1000000000000 ms"
        );
        assert_eq!(
            demo.advance(-1.0).unwrap_err(),
            "advance: -1 ms is not 0 to 86400000 ms"
        );
        assert_eq!(demo.state(), before);
        for _ in 0..6 {
            demo.add_node().unwrap();
        }
        assert_eq!(
            demo.add_node().unwrap_err(),
            "a demo world has at most 8 nodes"
        );
    }

    #[test]
    fn armed_store_faults_show_in_the_state_until_used() {
        let mut demo = Demo::new(2, 10_000, "cas", false, 1).unwrap();
        demo.fault("drop_reply", 0, 0.0).unwrap();
        demo.fault("429", 0, 0.0).unwrap();
        assert_eq!(
            parse(&demo.state())["armed"],
            json!(["write applied, reply lost", "throttled"])
        );
        demo.advance(15_000.0).unwrap();
        assert_eq!(parse(&demo.state())["armed"], json!([]));
        let timeline = parse(&demo.timeline(0));
        let faults: Vec<&str> = timeline
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "fault")
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(faults, ["throttled", "write applied, reply lost"]);
    }

    #[test]
    fn the_timeline_comes_in_increments_and_calls_render_as_s3_requests() {
        let mut demo = Demo::new(2, 10_000, "cas", false, 1).unwrap();
        demo.advance(3_000.0).unwrap();
        let all = parse(&demo.timeline(0));
        let all = all.as_array().unwrap();
        let len = parse(&demo.state())["timeline_len"].as_u64().unwrap() as usize;
        assert_eq!(all.len(), len);
        let tail = parse(&demo.timeline(3));
        assert_eq!(tail.as_array().unwrap()[0], all[3]);
        assert_eq!(parse(&demo.timeline(100_000)), json!([]));

        // The first write is a create: If-None-Match on the lease key.
        let put = all
            .iter()
            .find(|e| e["kind"] == "call" && e["text"].as_str().unwrap().starts_with("PUT"))
            .expect("a PUT");
        assert_eq!(put["text"], "PUT leases/sim If-None-Match: *");
        let index = put["i"].as_u64().unwrap() as u32;
        let plain = parse(&demo.request(index, false).unwrap());
        assert_eq!(plain["method"], "PUT");
        assert_eq!(
            plain["url"],
            "https://demo-locks.s3.us-east-1.amazonaws.com/leases/sim"
        );
        let headers = plain["headers"].as_array().unwrap();
        assert!(
            headers.contains(&json!(["if-none-match", "*"])),
            "{headers:?}"
        );
        assert!(plain["body"].as_str().unwrap().contains("\"token\":1"));
        assert!(!headers.iter().any(|h| h[0] == "authorization"));

        let signed = parse(&demo.request(index, true).unwrap());
        let auth = signed["headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h[0] == "authorization")
            .expect("signed")[1]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260921/us-east-1/s3/aws4_request"
            ),
            "{auth}"
        );
        assert!(!signed.to_string().contains(DEMO_SECRET));

        let reply = all.iter().find(|e| e["kind"] == "reply").unwrap();
        assert_eq!(
            demo.request(reply["i"].as_u64().unwrap() as u32, false)
                .unwrap_err(),
            format!("timeline entry {} is not a store call", reply["i"])
        );
        assert_eq!(
            demo.request(999_999, false).unwrap_err(),
            "no timeline entry 999999"
        );
    }

    #[test]
    fn single_steps_move_the_clock_one_event_at_a_time() {
        let mut demo = Demo::new(2, 10_000, "cas", false, 1).unwrap();
        let mut last = 0.0;
        for _ in 0..20 {
            let at = demo.step();
            assert!(at >= last);
            assert_eq!(demo.now_ms(), at);
            last = at;
        }
    }
}
