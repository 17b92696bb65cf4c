//! Time as the core sees it: passed in by the caller, never read.
//!
//! Two clocks matter. [`Mono`] is the caller's local monotonic clock
//! (milliseconds from an arbitrary origin); every deadline the core keeps is
//! on it. [`UnixMillis`] is a wall-clock reading (milliseconds since the UNIX
//! epoch), used only as a fallback for stores whose replies carry no date.
//! The store's own clock arrives inside replies as a [`StoreDate`].

use core::fmt;
use core::future::Future;
use core::ops::{Add, Sub};
use std::time::Duration;

/// A reading of the caller's local monotonic clock, in milliseconds from an
/// origin of the caller's choosing. Only differences between readings of the
/// same clock mean anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mono(pub u64);

/// Milliseconds since the UNIX epoch, on some clock (the store's or a node's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixMillis(pub u64);

/// Everything a machine is told about time on each call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Local monotonic time: all deadlines are measured on it.
    pub mono: Mono,
    /// Local wall-clock time: used only when a reply carries no store date.
    pub wall: UnixMillis,
}

impl Now {
    /// Both clocks at once.
    pub fn new(mono: Mono, wall: UnixMillis) -> Self {
        Now { mono, wall }
    }
}

/// A store's statement of its own time, taken from a reply, together with
/// how far that statement may be off in each direction.
///
/// `Date` headers have one-second resolution: the store's true time at the
/// reply lies in `[unix_ms, unix_ms + 1 s)`, so `behind_ms = 1000` and
/// `ahead_ms = 0`. A local wall-clock fallback with skew bound `k` has
/// `behind_ms = ahead_ms = k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreDate {
    /// The reading, in milliseconds since the UNIX epoch.
    pub unix_ms: UnixMillis,
    /// How much later than `unix_ms` the store's true time may have been.
    pub behind_ms: u64,
    /// How much earlier than `unix_ms` the store's true time may have been.
    pub ahead_ms: u64,
}

impl StoreDate {
    /// A date from an HTTP `Date` header (one-second resolution, truncated).
    pub fn from_http_date(unix_ms: UnixMillis) -> Self {
        StoreDate {
            unix_ms,
            behind_ms: 1000,
            ahead_ms: 0,
        }
    }

    /// A date from a millisecond-resolution store clock (in-memory store,
    /// object timestamps).
    pub fn exact(unix_ms: UnixMillis) -> Self {
        StoreDate {
            unix_ms,
            behind_ms: 1,
            ahead_ms: 0,
        }
    }

    /// A local wall-clock reading used in place of a store date, trusted to
    /// be within `max_skew` of the store's clock.
    pub fn local_wall(wall: UnixMillis, max_skew: Duration) -> Self {
        let k = max_skew.as_millis() as u64;
        StoreDate {
            unix_ms: wall,
            behind_ms: k,
            ahead_ms: k,
        }
    }

    /// The latest the store's true time may have been at this reading.
    pub fn latest(&self) -> UnixMillis {
        UnixMillis(self.unix_ms.0.saturating_add(self.behind_ms))
    }

    /// The earliest the store's true time may have been at this reading.
    pub fn earliest(&self) -> UnixMillis {
        UnixMillis(self.unix_ms.0.saturating_sub(self.ahead_ms))
    }
}

impl Add<Duration> for Mono {
    type Output = Mono;
    fn add(self, rhs: Duration) -> Mono {
        Mono(self.0.saturating_add(rhs.as_millis() as u64))
    }
}

impl Sub<Mono> for Mono {
    type Output = Duration;
    /// Elapsed time between two readings; zero if `rhs` is later.
    fn sub(self, rhs: Mono) -> Duration {
        Duration::from_millis(self.0.saturating_sub(rhs.0))
    }
}

impl Mono {
    /// `self - d`, saturating at the origin.
    pub fn saturating_sub(self, d: Duration) -> Mono {
        Mono(self.0.saturating_sub(d.as_millis() as u64))
    }
}

impl Add<Duration> for UnixMillis {
    type Output = UnixMillis;
    fn add(self, rhs: Duration) -> UnixMillis {
        UnixMillis(self.0.saturating_add(rhs.as_millis() as u64))
    }
}

/// A field of ASCII digits only (no sign), as a number.
fn digits(field: &str) -> Option<u64> {
    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    field.parse().ok()
}

const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// (year, month 1–12, day 1–31) of a day count from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
pub fn civil_from_days(z: i64) -> (u32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as u32;
    (y, m, d)
}

/// Days from 1970-01-01 to a civil date (the inverse of
/// [`civil_from_days`]).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The last millisecond an HTTP date can name: 9999-12-31 23:59:59.999 UTC.
const LAST_HTTP_DATE_MS: u64 = 253_402_300_799_999;

impl UnixMillis {
    /// As an HTTP date (`Sun, 22 Nov 2026 08:41:02 GMT`, whole seconds),
    /// for people reading an expiry. HTTP dates end with the year 9999; a
    /// later time (a record may say its lease expires in year 300,000)
    /// reads `253402300800 s after the UNIX epoch (past year 9999)`.
    pub fn to_http_date(self) -> String {
        if self.0 > LAST_HTTP_DATE_MS {
            return format!("{} s after the UNIX epoch (past year 9999)", self.0 / 1000);
        }
        let secs = self.0 / 1000;
        let days = secs / 86_400;
        let (y, m, d) = civil_from_days(days as i64);
        let s = secs % 86_400;
        format!(
            "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
            WEEKDAYS[((days + 4) % 7) as usize],
            MONTHS[m as usize - 1],
            s / 3600,
            s / 60 % 60,
            s % 60
        )
    }

    /// An HTTP-date (RFC 9110 §5.6.7: the IMF-fixdate
    /// `Sun, 06 Nov 1994 08:49:37 GMT`, and the obsolete RFC 850
    /// `Sunday, 06-Nov-94 08:49:37 GMT` and asctime
    /// `Sun Nov  6 08:49:37 1994` forms a recipient must accept); `None`
    /// for anything else. The weekday is not checked against the date.
    pub fn from_http_date(text: &str) -> Option<UnixMillis> {
        let text = text.trim();
        let (_, rest) = text.split_once(' ')?;
        let parts: Vec<&str> = rest.split_ascii_whitespace().collect();
        let (y, mo, d, time) = match parts[..] {
            // IMF-fixdate: `06 Nov 1994 08:49:37 GMT`.
            [d, mo, y, time, "GMT"] if text.as_bytes().get(3) == Some(&b',') && y.len() == 4 => {
                (digits(y)?, mo, d, time)
            }
            // RFC 850: `06-Nov-94 08:49:37 GMT`.
            [date, time, "GMT"] if text.contains(',') => {
                let mut f = date.split('-');
                let (d, mo, yy) = (f.next()?, f.next()?, f.next()?);
                let yy = digits(yy).filter(|_| yy.len() == 2 && f.next().is_none())?;
                (if yy < 70 { 2000 + yy } else { 1900 + yy }, mo, d, time)
            }
            // asctime: `Nov  6 08:49:37 1994`.
            [mo, d, time, y] if y.len() == 4 => (digits(y)?, mo, d, time),
            _ => return None,
        };
        let mo = MONTHS.iter().position(|m| *m == mo)? as u32 + 1;
        let d = digits(d).filter(|_| d.len() <= 2)? as u32;
        let mut hms = time.split(':').map(|v| digits(v).filter(|_| v.len() == 2));
        let (h, mi, s) = (hms.next()??, hms.next()??, hms.next()??);
        if hms.next().is_some() || h > 23 || mi > 59 || s > 59 || !(1..=9999).contains(&y) {
            return None;
        }
        // A day the month has (not 31 February).
        let days = days_from_civil(y as i64, mo, d);
        if civil_from_days(days) != (y as u32, mo, d) {
            return None;
        }
        let days = u64::try_from(days).ok()?;
        Some(UnixMillis(
            ((days * 86_400) + h * 3600 + mi * 60 + s) * 1000,
        ))
    }

    /// As an RFC 3339 timestamp in UTC, whole seconds
    /// (`2026-11-28T20:09:01Z`): a schedule slot's start in its tick id.
    pub fn to_rfc3339(self) -> String {
        let secs = self.0 / 1000;
        let (y, m, d) = civil_from_days((secs / 86_400) as i64);
        let s = secs % 86_400;
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            s / 3600,
            s / 60 % 60,
            s % 60
        )
    }

    /// An RFC 3339 timestamp (`2026-11-28T20:09:01.123456789Z`,
    /// `2026-11-28T21:09:01+01:00`: what Go's `time.Time` writes in JSON,
    /// as other tools' lock objects carry their times), to the millisecond
    /// below; `None` for anything else. A time before the UNIX epoch (Go's
    /// zero time, `0001-01-01T00:00:00Z`) reads as the epoch itself.
    pub fn from_rfc3339(text: &str) -> Option<UnixMillis> {
        let b = text.as_bytes();
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || !matches!(b[10], b'T' | b't' | b' ')
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        let field = |from: usize, to: usize| text.get(from..to).and_then(digits);
        let (y, mo, d) = (field(0, 4)?, field(5, 7)? as u32, field(8, 10)? as u32);
        let (h, mi, s) = (field(11, 13)?, field(14, 16)?, field(17, 19)?);
        if !(1..=12).contains(&mo) || h > 23 || mi > 59 || s > 59 || y == 0 {
            return None;
        }
        let days = days_from_civil(y as i64, mo, d);
        if civil_from_days(days) != (y as u32, mo, d) {
            return None;
        }
        // A fraction of a second (any number of digits), then the offset.
        let mut rest = &text[19..];
        let mut millis = 0i64;
        if let Some(frac) = rest.strip_prefix('.') {
            let len = frac.bytes().take_while(u8::is_ascii_digit).count();
            if len == 0 {
                return None;
            }
            let first3 = format!("{:0<3}", &frac[..len.min(3)]);
            millis = digits(&first3)? as i64;
            rest = &frac[len..];
        }
        let offset_s = match rest {
            "Z" | "z" => 0,
            _ => {
                let o = rest.as_bytes();
                if o.len() != 6 || !matches!(o[0], b'+' | b'-') || o[3] != b':' {
                    return None;
                }
                let field = |from: usize, to: usize| rest.get(from..to).and_then(digits);
                let (oh, om) = (field(1, 3)?, field(4, 6)?);
                if oh > 23 || om > 59 {
                    return None;
                }
                let off = (oh * 3600 + om * 60) as i64;
                if o[0] == b'-' {
                    -off
                } else {
                    off
                }
            }
        };
        let secs = days * 86_400 + (h * 3600 + mi * 60 + s) as i64 - offset_s;
        let ms = secs.saturating_mul(1000).saturating_add(millis);
        Some(UnixMillis(u64::try_from(ms).unwrap_or(0)))
    }

    /// Seconds since the epoch as a float, the unit of `expires_at`.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// From float seconds since the epoch (to the nearest millisecond;
    /// negative and non-finite values clamp to zero).
    pub fn from_secs_f64(secs: f64) -> UnixMillis {
        if secs.is_finite() && secs > 0.0 {
            UnixMillis((secs * 1000.0).round() as u64)
        } else {
            UnixMillis(0)
        }
    }
}

impl fmt::Display for Mono {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{}ms", self.0)
    }
}

impl fmt::Display for UnixMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// The adapter's clocks.
pub trait Clock {
    /// Current local monotonic and wall-clock time.
    fn now(&self) -> Now;
    /// Completes once local monotonic time reaches `at`.
    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()>;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Now {
        (**self).now()
    }
    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        (**self).sleep_until(at)
    }
}

/// Times a record keeps are before this (1e13 s, past year 300,000): a
/// later one is refused when read, so none is written.
pub const MAX_TIME_MS: u64 = 10_000_000_000_000_000;

/// A duration as `{:?}` writes it by default (`30s`, `1.5s`, `250ms`,
/// `10µs`; width and precision are not read), by
/// code of our own: messages name durations this way, and core's
/// `Debug` for `Duration` would add its general decimal formatter (about
/// 2 KB of wasm) to the Worker and the demo.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (secs, nanos) = (self.0.as_secs(), self.0.subsec_nanos());
        let (whole, frac, digits, unit) = match (secs, nanos) {
            (1.., _) => (secs, nanos, 9, "s"),
            (0, 1_000_000..) => (u64::from(nanos / 1_000_000), nanos % 1_000_000, 6, "ms"),
            (0, 1_000..) => (u64::from(nanos / 1_000), nanos % 1_000, 3, "\u{b5}s"),
            (0, _) => (u64::from(nanos), 0, 0, "ns"),
        };
        write!(f, "{whole}")?;
        if frac > 0 {
            let text = format!("{frac:0digits$}");
            write!(f, ".{}", text.trim_end_matches('0'))?;
        }
        f.write_str(unit)
    }
}

impl fmt::Debug for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The longest duration a configuration may hold (100 years), ttl or any
/// other: a longer one is a mistake, and time arithmetic on it would
/// overflow. A lease of 100 years still expires, in its record, well
/// inside what the record format can state.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// `30s`, `5m`, `1500ms`, `1h` or plain seconds, with a decimal
/// fraction if wanted (`1.5s`, `0.25h`), read exactly to the nanosecond
/// (digits past it are dropped). Integer arithmetic: no float parser in
/// the build (a few KB of a Worker's module).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let nanos_per_unit: u128 = match unit {
        "ms" => 1_000_000,
        "" | "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut nanos = whole.checked_mul(nanos_per_unit)?;
    let mut place = nanos_per_unit;
    for digit in fraction.bytes() {
        place /= 10;
        nanos = nanos.checked_add(u128::from(digit - b'0') * place)?;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_as_their_debug_form() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut cases = vec![
            0,
            1,
            999,
            1_000,
            1_500,
            999_999,
            1_000_000,
            1_000_001,
            250_000_000,
        ];
        cases.extend([
            1_000_000_000,
            1_500_000_000,
            10_000_000_001,
            3_600_000_000_000,
        ]);
        for _ in 0..2_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            cases.push(seed >> (seed % 64));
        }
        for nanos in cases {
            let d = Duration::from_nanos(nanos);
            assert_eq!(Dur(d).to_string(), format!("{d:?}"), "{nanos} ns");
        }
    }

    use super::*;

    #[test]
    fn to_http_date_is_total_past_year_9999() {
        // Found by the `record` fuzz target: a record whose `acquired_at`
        // lay past year 9999 made `lease inspect` (and the Worker) panic
        // in httpdate while printing it.
        assert_eq!(
            UnixMillis(1_795_317_005_000).to_http_date(),
            "Sun, 22 Nov 2026 03:10:05 GMT"
        );
        assert_eq!(
            UnixMillis(LAST_HTTP_DATE_MS).to_http_date(),
            "Fri, 31 Dec 9999 23:59:59 GMT"
        );
        assert_eq!(
            UnixMillis(LAST_HTTP_DATE_MS + 1).to_http_date(),
            "253402300800 s after the UNIX epoch (past year 9999)"
        );
        assert!(UnixMillis(u64::MAX)
            .to_http_date()
            .ends_with("(past year 9999)"));
    }

    #[test]
    fn rfc3339_as_go_writes_it() {
        let at = Some(UnixMillis(1_795_896_541_123));
        for form in [
            "2026-11-28T20:09:01.123456789Z",
            "2026-11-28T20:09:01.123Z",
            "2026-11-28t20:09:01.1234z",
            "2026-11-28T21:09:01.123+01:00",
            "2026-11-28T15:39:01.123-04:30",
        ] {
            assert_eq!(UnixMillis::from_rfc3339(form), at, "{form}");
        }
        assert_eq!(
            UnixMillis::from_rfc3339("2026-11-28T20:09:01Z"),
            Some(UnixMillis(1_795_896_541_000))
        );
        assert_eq!(
            UnixMillis::from_rfc3339("2026-11-28T20:09:01.5Z"),
            Some(UnixMillis(1_795_896_541_500))
        );
        // Go's zero time: before the epoch, so the epoch.
        assert_eq!(
            UnixMillis::from_rfc3339("0001-01-01T00:00:00Z"),
            Some(UnixMillis(0))
        );
        for bad in [
            "",
            "2026-11-28",
            "2026-11-28T20:09:01",
            "2026-11-28T20:09:01.Z",
            "2026-02-30T20:09:01Z",
            "2026-13-01T20:09:01Z",
            "2026-11-28T24:09:01Z",
            "2026-11-28T20:09:60Z",
            "2026-11-28T20:09:01+0100",
            "2026-11-28T20:09:01+01:00:00",
            "2026-11-28T20:09:01 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "+026-11-28T20:09:01Z",
            "2026-11-28T20:09:01.12€Z",
            "1790000000",
        ] {
            assert_eq!(UnixMillis::from_rfc3339(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn http_dates_agree_with_httpdate_both_ways() {
        // Our own formatter and parser (the crate no longer links
        // httpdate), against it, on dates drawn over its whole range.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ms = if i < 4 {
                [0, 951_782_400_000, 4_107_542_400_000, LAST_HTTP_DATE_MS][i as usize]
            } else {
                x % LAST_HTTP_DATE_MS
            };
            let at = std::time::UNIX_EPOCH + Duration::from_millis(ms / 1000 * 1000);
            let theirs = httpdate::fmt_http_date(at);
            assert_eq!(UnixMillis(ms).to_http_date(), theirs, "{ms}");
            assert_eq!(
                UnixMillis::from_http_date(&theirs),
                Some(UnixMillis(ms / 1000 * 1000))
            );
        }
        let same = Some(UnixMillis(784_111_777_000));
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            " Sun, 06 Nov 1994 08:49:37 GMT ",
        ] {
            assert_eq!(UnixMillis::from_http_date(form), same, "{form}");
            assert_eq!(
                httpdate::parse_http_date(form.trim()).ok(),
                Some(std::time::UNIX_EPOCH + Duration::from_secs(784_111_777)),
                "{form}"
            );
        }
        for bad in [
            "",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "1994-11-06T08:49:37Z",
            "Sun, 06 Nov 1994 08:49:37:00 GMT",
            "Sun, 31 Feb 2026 08:49:37 GMT",
            "Sun, +6 Nov 1994 +8:+9:37 GMT",
            "Sunday, 06-Nov-94-zz 08:49:37 GMT",
            "Fri, 31 Dec 9999 23:59:60 GMT",
        ] {
            assert_eq!(UnixMillis::from_http_date(bad), None, "{bad:?}");
            assert!(httpdate::parse_http_date(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("-1s"), None);
        // Fractions, exact to the nanosecond.
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0.1s"), Some(Duration::from_millis(100)));
        assert_eq!(parse_duration(".25h"), Some(Duration::from_secs(900)));
        assert_eq!(parse_duration("2.s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.0000000019s"), Some(Duration::new(1, 1)));
        assert_eq!(parse_duration("0.5ms"), Some(Duration::from_micros(500)));
        assert_eq!(parse_duration(" 30s "), Some(Duration::from_secs(30)));
        for bad in ["", ".", "s", "1.2.3s", "1e3s", "inf", "NaN", "1 s", "5d"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
        // Beyond what a Duration holds: refused, not wrapped.
        assert_eq!(parse_duration("99999999999999999999999h"), None);
        assert_eq!(
            parse_duration("999999999999999999999999999999999999999999s"),
            None
        );
        // The fraction's digits overflow what the whole part left.
        assert_eq!(
            parse_duration("340282366920938463463374607431.999999999s"),
            None
        );
    }
}
