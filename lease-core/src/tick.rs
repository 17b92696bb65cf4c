//! Once per tick: which scheduled run a delivery belongs to ([`Tick`]), and
//! the completed ticks a lease record keeps ([`TickRun`]).
//!
//! Schedulers deliver at least once: EventBridge, Lambda's asynchronous
//! retries and Workers cron can deliver the same tick again after its run
//! finished and released the lease. The lease alone stops two runs at
//! once, not a second run later. So a run that completes a tick writes it
//! into the lease record with its release (the write it makes anyway),
//! and a later delivery of the same tick finds it in the record the
//! acquire reads first: [`RunOutcome::AlreadyRan`](crate::client::run::RunOutcome::AlreadyRan),
//! for that one GET. The record keeps the last [`MAX_RUNS`] ticks within
//! the retention window (`docs/guide.md`, "AWS Lambda: one run per tick").

use crate::time::UnixMillis;
use core::fmt;
use serde_json::Value;

/// Most completed ticks a record keeps (the oldest go first).
pub const MAX_RUNS: usize = 16;

/// Longest tick id, in bytes.
pub const MAX_TICK_BYTES: usize = 128;

/// Longest result kept as it is, in bytes; a longer one is kept as its
/// digest (`fnv1a64:<hex>`).
pub const MAX_RESULT_BYTES: usize = 128;

/// Which scheduled run a delivery is: deliveries with the same id are the
/// same tick, and only one of them runs the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tick {
    id: String,
    /// A digest of the payload, when the id was chosen from it: the same
    /// id with another payload is refused ([`TickError::PayloadMismatch`]).
    payload: Option<String>,
    /// When the tick was due, when the event says.
    scheduled: Option<UnixMillis>,
}

/// Why a tick could not be taken from an event.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TickError {
    /// The event has no such field (or it is not a string or number).
    Missing(String),
    /// The id is longer than [`MAX_TICK_BYTES`] or empty.
    BadId(String),
    /// The tick already ran with another payload: the key chosen does not
    /// identify the payload, or a different request reuses it.
    PayloadMismatch {
        /// The tick.
        tick: String,
    },
    /// The protocol keeps no record of completed ticks (the mutex: its
    /// lock, and the record with it, is deleted on release).
    NoRecord,
}

impl fmt::Display for TickError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TickError::Missing(what) => write!(f, "the event has no {what} to identify its tick"),
            TickError::BadId(why) => write!(f, "tick id {why}"),
            TickError::NoRecord => f.write_str(
                "once per tick needs the cas or epochs protocol: the mutex deletes its lock, \
                 and the completed ticks with it, on release",
            ),
            TickError::PayloadMismatch { tick } => write!(
                f,
                "tick {tick:?} already ran with a different payload: the tick key does not \
                 identify the request (choose a key that does, or send a new one)"
            ),
        }
    }
}

impl std::error::Error for TickError {}

impl Tick {
    /// A tick the caller names (a schedule slot, a batch id).
    pub fn new(id: impl Into<String>) -> Result<Tick, TickError> {
        let id = id.into();
        if id.is_empty() {
            return Err(TickError::BadId("is empty".into()));
        }
        if id.len() > MAX_TICK_BYTES {
            return Err(TickError::BadId(format!(
                "is {} bytes, more than {MAX_TICK_BYTES}",
                id.len()
            )));
        }
        Ok(Tick {
            id,
            payload: None,
            scheduled: None,
        })
    }

    /// An EventBridge scheduled event (`"detail-type": "Scheduled Event"`):
    /// the tick is the scheduled `time`, so two deliveries of one schedule
    /// slot are one tick even when EventBridge gave them two `id`s.
    pub fn eventbridge(event: &Value) -> Result<Tick, TickError> {
        let time = field(event, "/time")?;
        let tick = Tick::new(format!("eventbridge:{time}"))?;
        Ok(match crate::schedule::parse_utc(&time) {
            Some(at) => tick.scheduled_at(at),
            None => tick,
        })
    }

    /// A Workers cron trigger: its `cron` expression and `scheduledTime`
    /// (ms since the UNIX epoch).
    pub fn cron(cron: &str, scheduled_time_ms: u64) -> Result<Tick, TickError> {
        Ok(Tick::new(format!("cron:{cron}@{scheduled_time_ms}"))?
            .scheduled_at(UnixMillis(scheduled_time_ms)))
    }

    /// The tick was due at `at` (Unix ms): a run can then report the ticks
    /// of its schedule that never ran ([`crate::schedule`]).
    pub fn scheduled_at(mut self, at: UnixMillis) -> Tick {
        // Past year 300,000 (a time in ns or µs by mistake) it is not a
        // time the record can keep: the tick goes without one.
        self.scheduled = (at.0 < crate::time::MAX_TIME_MS).then_some(at);
        self
    }

    /// When the tick was due, if known.
    pub fn scheduled(&self) -> Option<UnixMillis> {
        self.scheduled
    }

    /// Any other event: the tick is the value at `pointer` (a JSON pointer
    /// such as `/scheduled_time`; for EventBridge Scheduler, put
    /// `<aws.scheduler.scheduled-time>` in the target's input and point at
    /// it), and the payload's digest is kept with it, so that the same
    /// tick with another payload is refused instead of answered from the
    /// other's run.
    pub fn from_payload(event: &Value, pointer: &str) -> Result<Tick, TickError> {
        let id = field(event, pointer)?;
        let mut tick = Tick::new(id)?;
        tick.payload = Some(digest(event.to_string().as_bytes()));
        Ok(tick)
    }

    /// The tick's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The payload's digest, when the tick was taken from a payload.
    pub fn payload(&self) -> Option<&str> {
        self.payload.as_deref()
    }

    /// The newest scheduled time among completed `runs` before this
    /// tick's, if both are known: where a gap of missed ticks starts.
    pub fn previous(&self, runs: &[TickRun]) -> Option<UnixMillis> {
        let due = self.scheduled?;
        runs.iter()
            .filter_map(|r| r.scheduled.filter(|s| *s < due && !r.failed))
            .max()
    }

    /// The completed run of this tick among `runs`, if any; an error when
    /// it ran with another payload.
    pub fn find<'a>(&self, runs: &'a [TickRun]) -> Result<Option<&'a TickRun>, TickError> {
        let Some(run) = runs.iter().rev().find(|r| r.tick == self.id) else {
            return Ok(None);
        };
        match (&self.payload, &run.payload) {
            (Some(ours), Some(theirs)) if ours != theirs => Err(TickError::PayloadMismatch {
                tick: self.id.clone(),
            }),
            _ => Ok(Some(run)),
        }
    }
}

impl fmt::Display for Tick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

/// A tick's value at `pointer`: a string, or a number as written.
fn field(event: &Value, pointer: &str) -> Result<String, TickError> {
    match event.pointer(pointer) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        _ => Err(TickError::Missing(format!("`{pointer}`"))),
    }
}

/// A stable 64-bit digest (FNV-1a) as `fnv1a64:<hex>`: it tells payloads
/// and results apart, it is not a cryptographic hash.
pub fn digest(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// A completed tick, as the lease record keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TickRun {
    /// The tick's id.
    pub tick: String,
    /// The fencing token of the run that completed it.
    pub token: u64,
    /// When it finished (Unix ms, the store's clock as the holder knew it).
    pub finished_at: UnixMillis,
    /// Its result as text (at most [`MAX_RESULT_BYTES`], or a digest).
    pub result: Option<String>,
    /// The payload's digest, for a tick taken from a payload.
    pub payload: Option<String>,
    /// The run failed (kept only when failures are recorded too).
    pub failed: bool,
    /// When the tick was due, when known.
    pub scheduled: Option<UnixMillis>,
}

impl TickRun {
    /// The run of `tick` with `token`, finished at `finished_at`; a result
    /// longer than [`MAX_RESULT_BYTES`] is kept as its digest.
    pub fn new(tick: &Tick, token: u64, finished_at: UnixMillis, result: Option<&str>) -> Self {
        let result = result.map(|r| {
            if r.len() > MAX_RESULT_BYTES {
                digest(r.as_bytes())
            } else {
                r.to_string()
            }
        });
        TickRun {
            tick: tick.id.clone(),
            token,
            finished_at,
            result,
            payload: tick.payload.clone(),
            failed: false,
            scheduled: tick.scheduled,
        }
    }
}

/// `runs` with `run` added: one entry per tick (a tick run again replaces
/// its entry), none older than `oldest`, at most [`MAX_RUNS`].
pub fn record_run(runs: &mut Vec<TickRun>, run: TickRun, oldest: UnixMillis) {
    runs.retain(|r| r.tick != run.tick && r.finished_at >= oldest);
    runs.push(run);
    let extra = runs.len().saturating_sub(MAX_RUNS);
    runs.drain(..extra);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_id_is_refused_empty_or_longer_than_128_bytes() {
        assert!(matches!(Tick::new(""), Err(TickError::BadId(_))));
        assert!(matches!(
            Tick::new("x".repeat(129)),
            Err(TickError::BadId(_))
        ));
        assert!(Tick::new("x".repeat(128)).is_ok());
    }

    #[test]
    fn eventbridge_ticks_are_the_scheduled_time() {
        let a = serde_json::json!({"id": "a", "time": "2026-11-24T10:00:00Z", "detail-type": "Scheduled Event"});
        let b = serde_json::json!({"id": "b", "time": "2026-11-24T10:00:00Z"});
        assert_eq!(
            Tick::eventbridge(&a).unwrap(),
            Tick::eventbridge(&b).unwrap()
        );
        assert!(matches!(
            Tick::eventbridge(&serde_json::json!({})),
            Err(TickError::Missing(_))
        ));
    }

    #[test]
    fn a_tick_from_a_payload_refuses_another_payload() {
        let first = serde_json::json!({"slot": "s1", "n": 1});
        let other = serde_json::json!({"slot": "s1", "n": 2});
        let t1 = Tick::from_payload(&first, "/slot").unwrap();
        let t2 = Tick::from_payload(&other, "/slot").unwrap();
        let runs = vec![TickRun::new(&t1, 3, UnixMillis(5), Some("ok"))];
        assert_eq!(t1.find(&runs).unwrap().map(|r| r.token), Some(3));
        assert!(matches!(
            t2.find(&runs),
            Err(TickError::PayloadMismatch { .. })
        ));
    }

    #[test]
    fn the_record_keeps_recent_ticks_once_each_and_digests_long_results() {
        let mut runs = Vec::new();
        for i in 0..40u64 {
            let tick = Tick::new(format!("t{}", i % 20)).unwrap();
            record_run(
                &mut runs,
                TickRun::new(&tick, i, UnixMillis(i), None),
                UnixMillis(0),
            );
        }
        assert_eq!(runs.len(), MAX_RUNS);
        assert_eq!(runs.last().unwrap().token, 39);
        let mut once = runs.iter().map(|r| r.tick.clone()).collect::<Vec<_>>();
        once.dedup();
        assert_eq!(once.len(), MAX_RUNS);
        record_run(
            &mut runs,
            TickRun::new(&Tick::new("new").unwrap(), 1, UnixMillis(100), None),
            UnixMillis(50),
        );
        assert_eq!(runs.len(), 1, "older than the window: dropped");
        let long = "x".repeat(MAX_RESULT_BYTES + 1);
        let run = TickRun::new(&Tick::new("t").unwrap(), 1, UnixMillis(1), Some(&long));
        assert!(run.result.unwrap().starts_with("fnv1a64:"));
    }
}
