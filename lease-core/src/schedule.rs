//! A job's schedule, for the ticks that never ran ([`MissedTicks`]).
//!
//! A run for a tick whose scheduled time is known ([`Tick::scheduled`](crate::tick::Tick::scheduled))
//! compares it with the newest completed tick in the lease record: the
//! times the schedule names strictly between the two are ticks that never
//! ran to completion (the platform did not deliver them, or every run of
//! them failed or was skipped), as Azure Functions' timer schedule monitor
//! reports. Catching up is the caller's choice.
//!
//! A [`Schedule`] is read from the forms the platforms use, all in UTC:
//! - EventBridge `rate(5 minutes)` (`minute`/`minutes`, `hour`/`hours`,
//!   `day`/`days`) or a plain duration (`5m`, `1h`);
//! - EventBridge `cron(Minutes Hours Day-of-month Month Day-of-week Year)`;
//! - a Workers cron trigger, five fields (`*/5 * * * *`).
//!
//! Fields take `*`, `?`, lists, ranges, steps and the names `JAN`–`DEC`,
//! `SUN`–`SAT`; days of the week are numbered 1 (Sunday) to 7, as both
//! platforms number them. When both days are restricted, a day matching
//! either runs. The Quartz extensions `L`, `W` and `#` are refused
//! ([`ScheduleError`]): such a schedule has no missed-tick report.

use crate::time::{civil_from_days, days_from_civil, UnixMillis};
use core::fmt;
use std::time::Duration;

/// Most missed times listed; [`MissedTicks::count`] counts them all.
pub const MAX_LISTED: usize = 16;

/// Most schedule times counted between two ticks (a week of a schedule
/// that fires each minute); more are reported as this many, which bounds
/// the work a run spends counting.
pub const MAX_COUNTED: u64 = 10_080;

/// When a job is due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Every interval (EventBridge's `rate(...)`), counted from the
    /// newest completed tick: a rate rule starts when it is created, not
    /// at a round time.
    Every(Duration),
    /// The minutes a cron expression names.
    Cron(Cron),
}

/// A parsed cron expression: the set of values each field allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    // Each field's values as bits from its lowest value: minutes from
    // 0, days from 1, weekdays from 1 (Sunday), years from 1970.
    minutes: Bits,
    hours: Bits,
    days: Bits,
    months: Bits,
    weekdays: Bits,
    /// `None`: any year.
    years: Option<Bits>,
    any_day: bool,
    any_weekday: bool,
}

/// Why a schedule could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleError {
    text: String,
    why: &'static str,
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "schedule {:?}: {}", self.text, self.why)
    }
}

impl std::error::Error for ScheduleError {}

/// The ticks that never ran between the newest completed one and this one.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MissedTicks {
    /// The newest completed tick's scheduled time (Unix ms).
    pub since_ms: u64,
    /// How many scheduled times lie strictly between it and this tick (at
    /// most [`MAX_COUNTED`]).
    pub count: u64,
    /// The first of them, at most [`MAX_LISTED`] (Unix ms).
    pub first_ms: Vec<u64>,
}

const MINUTE_MS: u64 = 60_000;

impl Schedule {
    /// Reads a schedule (see the module docs).
    pub fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        let text = text.trim();
        let err = |why| ScheduleError {
            text: text.into(),
            why,
        };
        if let Some(inner) = text.strip_prefix("rate(").and_then(|t| t.strip_suffix(')')) {
            let (n, unit) = inner
                .trim()
                .split_once(' ')
                .ok_or_else(|| err("not rate(N unit)"))?;
            let n: u64 = n
                .parse()
                .map_err(|_| err("the rate is not a whole number"))?;
            let unit = match unit.trim() {
                "minute" | "minutes" => 60,
                "hour" | "hours" => 3600,
                "day" | "days" => 86_400,
                _ => return Err(err("the unit is not minutes, hours or days")),
            };
            let secs = n.saturating_mul(unit);
            return Schedule::every(Duration::from_secs(secs))
                .ok_or_else(|| err("the rate is zero or longer than 100 years"));
        }
        if let Some(inner) = text.strip_prefix("cron(").and_then(|t| t.strip_suffix(')')) {
            return Cron::parse(inner, 6).map(Schedule::Cron).map_err(err);
        }
        if text.split_whitespace().count() == 5 {
            return Schedule::cron(text);
        }
        match crate::time::parse_duration(text).and_then(Schedule::every) {
            Some(every) => Ok(every),
            None => Err(err(
                "not rate(...), cron(...), a five-field cron or a duration",
            )),
        }
    }

    /// A five-field cron expression only, as a Workers Cron Trigger
    /// carries it (a Worker links nothing else of [`Schedule::parse`]).
    pub fn cron(text: &str) -> Result<Schedule, ScheduleError> {
        Cron::parse(text.trim(), 5)
            .map(Schedule::Cron)
            .map_err(|why| ScheduleError {
                text: text.into(),
                why,
            })
    }

    /// Every `d` (at least a second, at most [`MAX_DURATION`](crate::time::MAX_DURATION)):
    /// `None` otherwise.
    pub fn every(d: Duration) -> Option<Schedule> {
        let ok = d >= Duration::from_secs(1) && d <= crate::time::MAX_DURATION;
        ok.then_some(Schedule::Every(d))
    }

    /// The start of this schedule's slot that contains `at`: the latest
    /// time it names at or before `at`, in UTC. An interval's slots are
    /// counted from the UNIX epoch (`5m`: :00, :05, ... past each hour), so
    /// that hosts and platforms agree on them wherever they started;
    /// EventBridge counts a `rate(...)` rule from its creation instead, so
    /// a schedule shared across platforms is best a cron. `None` when a
    /// cron names no time in the hundred years before `at`.
    pub fn slot_at(&self, at: UnixMillis) -> Option<UnixMillis> {
        match self {
            Schedule::Every(d) => {
                // (A parsed interval is 1 s at least; one made by hand is
                // held to that, as slot ids name whole seconds.)
                let step = u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1_000);
                Some(UnixMillis(at.0 - at.0 % step))
            }
            Schedule::Cron(cron) => cron
                .at_or_before(at.0 / MINUTE_MS)
                .map(|m| UnixMillis(m * MINUTE_MS)),
        }
    }

    /// The scheduled times strictly between the completed tick due at
    /// `since` and this one, due at `until`; `None` when there are none.
    /// An interval counts from `since`, and a tick up to half an interval
    /// late is the one due (deliveries carry seconds); a cron compares
    /// whole minutes.
    pub fn missed(&self, since: UnixMillis, until: UnixMillis) -> Option<MissedTicks> {
        let mut first_ms = Vec::new();
        let count = match self {
            Schedule::Every(d) => {
                let step = d.as_millis() as u64;
                let span = until.0.saturating_sub(since.0);
                let count = ((span + step / 2) / step)
                    .saturating_sub(1)
                    .min(MAX_COUNTED);
                first_ms.extend((1..=count.min(MAX_LISTED as u64)).map(|k| since.0 + k * step));
                count
            }
            Schedule::Cron(cron) => {
                let (since, until) = (since.0 / MINUTE_MS, until.0 / MINUTE_MS);
                let mut count = 0;
                let mut at = cron.next_after(since);
                while let Some(m) = at.filter(|m| *m < until && count < MAX_COUNTED) {
                    if first_ms.len() < MAX_LISTED {
                        first_ms.push(m * MINUTE_MS);
                    }
                    count += 1;
                    at = cron.next_after(m);
                }
                count
            }
        };
        (count > 0).then_some(MissedTicks {
            since_ms: since.0,
            count,
            first_ms,
        })
    }
}

impl Cron {
    /// `fields` is 5 (Workers) or 6 (EventBridge, with a year).
    fn parse(text: &str, fields: usize) -> Result<Cron, &'static str> {
        let parts: Vec<&str> = text.split_whitespace().collect();
        if parts.len() != fields {
            return Err(if fields == 5 {
                "expected 5 fields"
            } else {
                "expected 6 fields"
            });
        }
        const MONTHS: &[&str] = &[
            "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
        ];
        const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
        let any = |f: &str| f == "*" || f == "?";
        let field = |n: usize, lo, hi, names| field(parts[n], lo, hi, names);
        Ok(Cron {
            minutes: field(0, 0, 59, &[])?,
            hours: field(1, 0, 23, &[])?,
            days: field(2, 1, 31, &[])?,
            months: field(3, 1, 12, MONTHS)?,
            weekdays: field(4, 1, 7, DAYS)?,
            years: match parts.get(5) {
                Some(f) if !any(f) => Some(field(5, 1970, 2199, &[])?),
                _ => None,
            },
            any_day: any(parts[2]),
            any_weekday: any(parts[4]),
        })
    }

    fn day_matches(&self, day: u32, weekday: u32) -> bool {
        let d = has(&self.days, day - 1);
        let w = has(&self.weekdays, weekday);
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (true, false) => w,
            (false, true) => d,
            (false, false) => d || w,
        }
    }

    fn year_matches(&self, year: u32) -> bool {
        self.years
            .as_ref()
            .is_none_or(|years| year >= 1970 && has(years, year - 1970))
    }

    /// The first matching minute (counted from the UNIX epoch) after
    /// minute `m`: a day that does not match is skipped whole, an hour
    /// too, and the minutes of a matching hour are read from its bits.
    fn next_after(&self, m: u64) -> Option<u64> {
        let mut m = m.checked_add(1)?;
        let limit = m.saturating_add(100 * 366 * 1440);
        while m < limit {
            let day = m / 1440;
            let (y, mo, d) = civil_from_days(i64::try_from(day).ok()?);
            let weekday = ((day + 4) % 7) as u32; // 1970-01-01 was a Thursday
            if !self.year_matches(y) || !has(&self.months, mo - 1) || !self.day_matches(d, weekday)
            {
                m = (day + 1) * 1440;
                continue;
            }
            if has(&self.hours, (m % 1440 / 60) as u32) {
                if let Some(minute) = (m % 60..60).find(|i| has(&self.minutes, *i as u32)) {
                    return Some(m - m % 60 + minute);
                }
            }
            m = (m / 60 + 1) * 60;
        }
        None
    }

    /// The latest minute at or before `m` (minutes since the epoch) the
    /// expression names, looking back a hundred years at most: the mirror
    /// of `next_after`.
    fn at_or_before(&self, mut m: u64) -> Option<u64> {
        let limit = m.saturating_sub(100 * 366 * 1440);
        while m >= limit {
            let day = m / 1440;
            let (y, mo, d) = civil_from_days(i64::try_from(day).ok()?);
            let weekday = ((day + 4) % 7) as u32; // 1970-01-01 was a Thursday
            if !self.year_matches(y) || !has(&self.months, mo - 1) || !self.day_matches(d, weekday)
            {
                // The last minute of the day before.
                m = (day * 1440).checked_sub(1)?;
                continue;
            }
            if has(&self.hours, (m % 1440 / 60) as u32) {
                if let Some(minute) = (0..=m % 60).rev().find(|i| has(&self.minutes, *i as u32)) {
                    return Some(m - m % 60 + minute);
                }
            }
            // The last minute of the hour before.
            m = (m - m % 60).checked_sub(1)?;
        }
        None
    }
}

/// A field's values, bit `v - lo` for value `v` (up to 256 values).
type Bits = [u64; 4];

fn has(bits: &Bits, i: u32) -> bool {
    bits.get(i as usize / 64)
        .is_some_and(|word| word >> (i % 64) & 1 == 1)
}

/// One field's values: `*`/`?`, `a`, `a-b`, `*/n`, `a/n`, `a-b/n`, lists
/// of these, names for values from `lo`.
fn field(text: &str, lo: u32, hi: u32, names: &[&str]) -> Result<Bits, &'static str> {
    let value = |s: &str| -> Result<u32, &'static str> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            return Ok(lo + i as u32);
        }
        match s.parse::<u32>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(v),
            _ if s.contains(['L', 'W', '#', 'l', 'w']) => {
                Err("the L, W and # extensions are not supported here")
            }
            _ => Err("a value is out of the field's range"),
        }
    };
    let mut out = [0u64; 4];
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (
                r,
                s.parse::<u32>().ok().filter(|s| *s > 0).ok_or("bad step")?,
            ),
            None => (part, 1),
        };
        let (a, b) = match range {
            "*" | "?" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `a/n`: from a to the field's last value.
                None if part.contains('/') => (value(r)?, hi),
                None => (value(r)?, value(r)?),
            },
        };
        if a > b {
            return Err("a range runs backwards");
        }
        for v in (a..=b).step_by(step as usize) {
            let i = (v - lo) as usize;
            out[i / 64] |= 1 << (i % 64);
        }
    }
    Ok(out)
}

/// Unix ms of an RFC 3339 UTC time as EventBridge writes it
/// (`2026-11-24T10:00:00Z`, fractions of a second allowed).
pub fn parse_utc(text: &str) -> Option<UnixMillis> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !text.ends_with('Z') {
        return None;
    }
    let num = |r: core::ops::Range<usize>| {
        let field = text.get(r)?;
        field
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| field.parse::<u32>().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || h > 23 || mi > 59 || s > 59 {
        return None;
    }
    // A day the month has (not 31 February).
    if d == 0 || civil_from_days(days_from_civil(i64::from(y), mo, d)) != (y, mo, d) {
        return None;
    }
    let frac = &text[19..text.len() - 1];
    let ms = match frac.strip_prefix('.') {
        None if frac.is_empty() => 0,
        Some(digits) if !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()) => {
            format!("{digits:0<3}")[..3].parse::<u64>().ok()?
        }
        _ => return None,
    };
    let days = days_from_civil(i64::from(y), mo, d);
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + s);
    u64::try_from(secs).ok().map(|s| UnixMillis(s * 1000 + ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> u64 {
        parse_utc(text).unwrap().0
    }

    #[test]
    fn dates_parse_and_round_trip() {
        assert_eq!(at("1970-01-01T00:00:00Z"), 0);
        assert_eq!(at("2026-11-24T10:00:00Z"), 1_795_514_400_000);
        assert_eq!(at("2026-11-24T10:00:00.5Z"), 1_795_514_400_500);
        for bad in [
            "2026-11-24 10:00:00Z",
            "2026-13-24T10:00:00Z",
            "2026-11-24T10:00:00",
            "",
            "2026-+1-01T10:00:00Z",
            "2026-02-31T10:00:00Z",
            "2026-11-24T10:00:00.Z",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
        for day in [-1, 0, 59, 60, 365, 20_000, 20_416] {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(i64::from(y), m, d), day);
        }
    }

    #[test]
    fn rates_and_crons_name_the_missed_times() {
        let five = Schedule::parse("rate(5 minutes)").unwrap();
        assert_eq!(five, Schedule::parse("5m").unwrap());
        let m = five
            .missed(
                parse_utc("2026-11-24T10:00:00Z").unwrap(),
                parse_utc("2026-11-24T10:20:00Z").unwrap(),
            )
            .unwrap();
        assert_eq!(m.count, 3);
        assert_eq!(
            m.first_ms,
            vec![
                at("2026-11-24T10:05:00Z"),
                at("2026-11-24T10:10:00Z"),
                at("2026-11-24T10:15:00Z")
            ]
        );
        assert_eq!(
            five.missed(
                parse_utc("2026-11-24T10:00:00Z").unwrap(),
                parse_utc("2026-11-24T10:05:00Z").unwrap()
            ),
            None,
            "the next tick: none missed"
        );
        // Workers: 7:10 on weekdays (2–6 = MON–FRI). 2026-11-27 is a Friday.
        let weekdays = Schedule::parse("10 7 * * mon-fri").unwrap();
        assert_eq!(weekdays, Schedule::parse("10 7 * * 2-6").unwrap());
        let m = weekdays
            .missed(
                parse_utc("2026-11-27T07:10:00Z").unwrap(),
                parse_utc("2026-12-02T07:10:00Z").unwrap(),
            )
            .unwrap();
        assert_eq!(
            m.first_ms,
            vec![at("2026-11-30T07:10:00Z"), at("2026-12-01T07:10:00Z")]
        );
        // EventBridge: noon on the 1st of each month in 2027.
        let monthly = Schedule::parse("cron(0 12 1 * ? 2027)").unwrap();
        let Schedule::Cron(monthly) = monthly else {
            panic!("a cron")
        };
        let next = |t: u64| monthly.next_after(t / MINUTE_MS).map(|m| m * MINUTE_MS);
        assert_eq!(
            next(at("2026-11-24T10:00:00Z")),
            Some(at("2027-01-01T12:00:00Z"))
        );
        assert_eq!(next(at("2027-12-01T12:00:00Z")), None);
        let every = Schedule::parse("* * * * *").unwrap();
        let m = every
            .missed(UnixMillis(0), UnixMillis(365 * 86_400_000 * 2))
            .unwrap();
        assert_eq!(m.count, MAX_COUNTED, "counted up to the cap");
        assert_eq!(m.first_ms.len(), MAX_LISTED);
    }

    #[test]
    fn a_rate_counts_from_the_last_tick_and_times_are_compared_as_the_platforms_send_them() {
        // A rate rule made at 10:02 ticks at 10:07, 10:12: nothing missed.
        let five = Schedule::parse("rate(5 minutes)").unwrap();
        let t = |s: &str| parse_utc(s).unwrap();
        assert_eq!(
            five.missed(t("2026-11-24T10:07:00Z"), t("2026-11-24T10:12:00Z")),
            None
        );
        // Delivered a few seconds late: still the next one.
        assert_eq!(
            five.missed(t("2026-11-24T10:07:00Z"), t("2026-11-24T10:12:09Z")),
            None
        );
        let m = five
            .missed(t("2026-11-24T10:07:00Z"), t("2026-11-24T10:22:00Z"))
            .unwrap();
        assert_eq!(
            m.first_ms,
            vec![at("2026-11-24T10:12:00Z"), at("2026-11-24T10:17:00Z")]
        );
        let daily = Schedule::parse("rate(1 day)").unwrap();
        assert_eq!(
            daily.missed(t("2026-11-24T15:30:00Z"), t("2026-11-25T15:30:00Z")),
            None
        );
        // A cron tick whose time carries seconds.
        let minutely = Schedule::parse("cron(* * * * ? *)").unwrap();
        assert_eq!(
            minutely.missed(t("2026-11-24T10:07:06Z"), t("2026-11-24T10:08:06Z")),
            None
        );
        // `a/1` runs from a to the end of the field, as Quartz reads it.
        let daily_noon = Schedule::parse("cron(0 12 1/1 * ? *)").unwrap();
        let m = daily_noon
            .missed(t("2026-11-24T12:00:00Z"), t("2026-11-27T12:00:00Z"))
            .unwrap();
        assert_eq!(m.count, 2);
        // A year of an hourly schedule counts quickly, up to the cap.
        let hourly = Schedule::parse("0 * * * *").unwrap();
        let m = hourly
            .missed(UnixMillis(0), t("2026-11-24T10:00:00Z"))
            .unwrap();
        assert_eq!(m.count, MAX_COUNTED);
    }

    #[test]
    fn a_schedule_that_cannot_be_read_says_why() {
        for (bad, why) in [
            ("rate(5 weeks)", "unit"),
            ("rate(0 minutes)", "zero"),
            ("rate(307445734561825861 minutes)", "100 years"),
            ("2305843009213693952s", "not rate"),
            ("0 18 * * 6L", "extensions"),
            ("61 * * * *", "out of the field's range"),
            ("cron(0 12 * *)", "expected 6"),
            ("5-1 * * * *", "backwards"),
            ("often", "not rate"),
        ] {
            let e = Schedule::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_slot_is_the_latest_time_named_at_or_before() {
        let slot = |s: &str, t: &str| {
            Schedule::parse(s)
                .unwrap()
                .slot_at(UnixMillis(at(t)))
                .map(UnixMillis::to_rfc3339)
        };
        let some = |t: &str| Some(t.to_string());
        // Intervals count from the epoch, whatever the host or platform.
        assert_eq!(
            slot("5m", "2026-11-29T10:07:31Z"),
            some("2026-11-29T10:05:00Z")
        );
        assert_eq!(
            slot("rate(1 hour)", "2026-11-29T10:07:31Z"),
            some("2026-11-29T10:00:00Z")
        );
        assert_eq!(
            slot("*/5 * * * *", "2026-11-29T10:05:00Z"),
            some("2026-11-29T10:05:00Z")
        );
        assert_eq!(
            slot("*/5 * * * *", "2026-11-29T10:04:59.999Z"),
            some("2026-11-29T10:00:00Z")
        );
        assert_eq!(
            slot("0 3 * * *", "2026-11-29T02:59:59Z"),
            some("2026-11-28T03:00:00Z")
        );
        // Sunday the 29th: the Friday before.
        assert_eq!(
            slot("cron(0 3 ? * MON-FRI *)", "2026-11-29T12:00:00Z"),
            some("2026-11-27T03:00:00Z")
        );
        assert_eq!(
            slot("0 0 1 1 *", "2026-11-29T12:00:00Z"),
            some("2026-01-01T00:00:00Z")
        );
        // Never, or not yet.
        assert_eq!(slot("0 0 30 2 *", "2026-11-29T12:00:00Z"), None);
        assert_eq!(slot("cron(0 0 * * ? 2030)", "2026-11-29T12:00:00Z"), None);
        assert_eq!(
            slot("* * * * *", "1970-01-01T00:00:00Z"),
            some("1970-01-01T00:00:00Z")
        );
    }

    /// Against `next_after` (the missed-tick report's walk forward), on
    /// crons and times drawn from a seed: the slot is named, is not after
    /// the time, and nothing the cron names lies between them.
    #[test]
    fn slots_agree_with_the_walk_forward() {
        let crons = [
            "*/7 * * * *",
            "15 */3 * * *",
            "0 9-17 * * MON-FRI",
            "30 2 1,15 * *",
            "0 0 * FEB SUN",
            "cron(10 4 ? * 2#1 *)",
            "cron(0/20 8 L * ? *)",
            "0 12 29 2 *",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for text in crons {
            let Ok(Schedule::Cron(cron)) = Schedule::parse(text) else {
                continue; // L, W and # are refused
            };
            for _ in 0..200 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let m = 30 * 366 * 1440 + seed % (20 * 366 * 1440);
                let Some(slot) = cron.at_or_before(m) else {
                    panic!("{text}: no slot before minute {m}");
                };
                assert!(slot <= m, "{text}: {slot} after {m}");
                assert_eq!(
                    cron.next_after(slot - 1),
                    Some(slot),
                    "{text}: {slot} not named"
                );
                assert!(
                    cron.next_after(slot).is_none_or(|n| n > m),
                    "{text}: {m} skipped one"
                );
            }
        }
    }
}
