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

use crate::schedule::Schedule;
use crate::time::UnixMillis;
use core::fmt;
use serde_json::Value;
use std::time::Duration;

/// Most completed ticks a record keeps (the oldest go first).
pub const MAX_RUNS: usize = 16;

/// Longest tick id, in bytes.
pub const MAX_TICK_BYTES: usize = 128;

/// Longest schedule name of a slot's tick ([`Tick::slot`]), in bytes.
pub const MAX_SLOT_NAME_BYTES: usize = 64;

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
    /// A schedule's name that cannot name a slot ([`Tick::slot`]).
    BadName(String),
    /// A slot could not be found: the schedule names no time at or before
    /// the one given (a cron of 30 February, or of years to come), or
    /// cannot be read.
    NoSlot(String),
}

impl fmt::Display for TickError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TickError::Missing(what) => write!(f, "the event has no {what} to identify its tick"),
            TickError::BadId(why) => write!(f, "tick id {why}"),
            TickError::BadName(why) => write!(f, "schedule name {why}"),
            TickError::NoSlot(why) => write!(f, "no slot: {why}"),
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

    /// An EventBridge scheduled event as a slot of the rule's `schedule`
    /// called `name` ([`Tick::slot`]): the slot that contains its `time`.
    /// EventBridge's `time` is the minute the rule named, so with a cron
    /// schedule a `time` in another minute than its slot's start means
    /// the schedule is not the rule's, and is refused
    /// ([`TickError::NoSlot`]) rather than answered from another slot.
    pub fn eventbridge_slot(
        event: &Value,
        name: &str,
        schedule: &Schedule,
    ) -> Result<Tick, TickError> {
        let time = field(event, "/time")?;
        let at = crate::schedule::parse_utc(&time)
            .ok_or_else(|| TickError::Missing(format!("UTC `/time` (it is {time:?})")))?;
        let tick = Tick::slot(name, schedule, at)?;
        let minute = |t: UnixMillis| t.0 / 60_000;
        match (schedule, tick.scheduled) {
            (Schedule::Cron(_), Some(start)) if minute(start) != minute(at) => {
                Err(TickError::NoSlot(format!(
                    "the event's time {time} is not a time the schedule names: is it the rule's?"
                )))
            }
            _ => Ok(tick),
        }
    }

    /// A Workers cron trigger: its `cron` expression and `scheduledTime`
    /// (ms since the UNIX epoch).
    pub fn cron(cron: &str, scheduled_time_ms: u64) -> Result<Tick, TickError> {
        Ok(Tick::new(format!("cron:{cron}@{scheduled_time_ms}"))?
            .scheduled_at(UnixMillis(scheduled_time_ms)))
    }

    /// The slot of the schedule called `name` that contains `at` (UTC):
    /// `slot:<name>@<the slot's start>`, such as
    /// `slot:nightly@2026-11-29T03:00:00Z`, due at the slot's start. The
    /// identity shared by platforms: an EventBridge rule and a Workers
    /// Cron Trigger (and a run of [`Slots`], by the store's clock) on one
    /// schedule, given the same name
    /// and writing to one lease key, name each slot alike, so that its job
    /// runs once whichever delivers it (`LEASE_TICK=slot:<name>`;
    /// `docs/guide.md`, "One tick across platforms"). `name`: 1 to 64
    /// bytes of ASCII letters, digits and `-_./`.
    pub fn slot(name: &str, schedule: &Schedule, at: UnixMillis) -> Result<Tick, TickError> {
        check_slot_name(name)?;
        let start = schedule.slot_at(at).ok_or_else(|| {
            TickError::NoSlot(format!(
                "the schedule names no time at or before {}",
                at.to_rfc3339()
            ))
        })?;
        Ok(Tick::new(format!("slot:{name}@{}", start.to_rfc3339()))?.scheduled_at(start))
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

/// A named schedule whose slots are a run's ticks, chosen by the store's
/// clock ([`Run::slot`](crate::client::run::Run::slot)): the slot that
/// contains the run's start as the store's `Date` gives it, so that hosts
/// whose clocks disagree agree on it (the hosts of one crontab).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slots {
    name: String,
    schedule: Schedule,
    late_after: Option<Duration>,
}

impl Slots {
    /// The slots of `schedule` called `name` ([`Tick::slot`]), any start
    /// within a slot running it.
    pub fn new(name: &str, schedule: Schedule) -> Result<Slots, TickError> {
        check_slot_name(name)?;
        Ok(Slots {
            name: name.to_string(),
            schedule,
            late_after: None,
        })
    }

    /// A run that starts more than `late` after its slot began (by the
    /// store's clock) does not run it:
    /// [`RunOutcome::TooLate`](crate::client::run::RunOutcome::TooLate).
    /// `None`: any start within the slot runs it.
    pub fn late_after(mut self, late: Option<Duration>) -> Slots {
        self.late_after = late;
        self
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The slot that contains `at` (the store's time), and how late `at`
    /// is into it when that is later than [`late_after`](Self::late_after)
    /// allows.
    pub fn tick_at(&self, at: UnixMillis) -> Result<(Tick, Option<Duration>), TickError> {
        let tick = Tick::slot(&self.name, &self.schedule, at)?;
        let start = tick.scheduled.unwrap_or(at);
        let late = Duration::from_millis(at.0.saturating_sub(start.0));
        Ok((
            tick,
            self.late_after.filter(|limit| late > *limit).map(|_| late),
        ))
    }
}

/// Whether `name` can name a schedule's slots ([`Tick::slot`]): 1 to
/// [`MAX_SLOT_NAME_BYTES`] bytes of ASCII letters, digits and `-_./`.
pub fn check_slot_name(name: &str) -> Result<(), TickError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_./".contains(c);
    if name.is_empty() || name.len() > MAX_SLOT_NAME_BYTES || !name.chars().all(ok) {
        return Err(TickError::BadName(format!(
            "{name:?} is not 1 to {MAX_SLOT_NAME_BYTES} bytes of ASCII letters, digits and -_./"
        )));
    }
    Ok(())
}

/// The name in a `slot:NAME` setting (`LEASE_TICK` on the Lambda and the
/// Worker, `lease run --slot-name`'s id): `None` when `value` is not of
/// that form, the name checked otherwise ([`check_slot_name`]).
pub fn slot_setting(value: &str) -> Option<Result<&str, TickError>> {
    let name = value.trim().strip_prefix("slot:")?;
    Some(check_slot_name(name).map(|()| name))
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
    /// Its result as text (at most [`MAX_RESULT_BYTES`], or a digest; a
    /// digest too when its record would not fit otherwise).
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
    fn slot_settings_name_a_checked_slot() {
        assert_eq!(
            slot_setting("slot:nightly").map(Result::ok),
            Some(Some("nightly"))
        );
        assert_eq!(
            slot_setting(" slot:a/b.c-d_e ").map(Result::ok),
            Some(Some("a/b.c-d_e"))
        );
        assert!(matches!(
            slot_setting("slot:night ly"),
            Some(Err(TickError::BadName(_)))
        ));
        assert!(matches!(
            slot_setting("slot:"),
            Some(Err(TickError::BadName(_)))
        ));
        assert_eq!(slot_setting("cron").map(|r| r.is_ok()), None);
        assert_eq!(slot_setting("nightly").map(|r| r.is_ok()), None);
    }

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

    #[test]
    fn a_slot_is_named_alike_by_every_platform() {
        let at = |t: &str| crate::schedule::parse_utc(t).unwrap();
        let workers = Schedule::cron("0 3 * * *").unwrap();
        let eventbridge = Schedule::parse("cron(0 3 * * ? *)").unwrap();
        // A Cron Trigger's scheduledTime, EventBridge's `time`, a host that
        // starts 42 s late: one slot, due at its start.
        let ticks = [
            Tick::slot("nightly", &workers, at("2026-11-29T03:00:00Z")).unwrap(),
            Tick::slot("nightly", &eventbridge, at("2026-11-29T03:00:00Z")).unwrap(),
            Tick::slot("nightly", &workers, at("2026-11-29T03:00:42.5Z")).unwrap(),
        ];
        for tick in &ticks {
            assert_eq!(tick.id(), "slot:nightly@2026-11-29T03:00:00Z");
            assert_eq!(tick.scheduled(), Some(at("2026-11-29T03:00:00Z")));
        }
        // A time the schedule does not name: the schedule is not the rule's.
        let event = serde_json::json!({"time": "2026-11-29T04:00:00Z"});
        let err = Tick::eventbridge_slot(&event, "nightly", &eventbridge).unwrap_err();
        assert!(
            err.to_string().contains("is not a time the schedule names"),
            "{err}"
        );
        let late = serde_json::json!({"time": "2026-11-29T03:00:07Z"});
        assert_eq!(
            Tick::eventbridge_slot(&late, "nightly", &eventbridge).unwrap(),
            ticks[0]
        );
        // Another name or another day is another tick.
        let other = Tick::slot("backup", &workers, at("2026-11-29T03:00:00Z")).unwrap();
        assert_ne!(other, ticks[0]);
        let next = Tick::slot("nightly", &workers, at("2026-11-30T03:00:00Z")).unwrap();
        assert_ne!(next, ticks[0]);
    }

    #[test]
    fn a_slot_needs_a_plain_name_and_a_time_its_schedule_names() {
        let every = Schedule::parse("5m").unwrap();
        let now = UnixMillis(1_795_514_400_000);
        for bad in ["", "a@b", "with space", "é", &"x".repeat(65)] {
            let err = Tick::slot(bad, &every, now).unwrap_err();
            assert!(matches!(err, TickError::BadName(_)), "{bad:?}: {err}");
            assert!(err.to_string().starts_with("schedule name"), "{err}");
        }
        assert!(Tick::slot(&"x".repeat(64), &every, now).is_ok());
        let never = Schedule::cron("0 0 30 2 *").unwrap();
        let err = Tick::slot("feb30", &never, now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no slot: the schedule names no time at or before 2026-11-24T10:00:00Z"
        );
    }
}
