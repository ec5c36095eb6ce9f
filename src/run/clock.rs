//! The clock runs read their timestamps from, injectable for tests, and the
//! RFC 3339 (UTC) formatting and parsing of those timestamps, with std only.

#[cfg(any(test, feature = "sim"))]
use std::sync::{
    Arc,
    atomic::{AtomicI64, Ordering},
};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of the current time, in milliseconds since the Unix epoch (UTC).
pub trait Clock: Send + Sync {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    fn now_millis(&self) -> i64;

    /// The current time as an RFC 3339 UTC timestamp (`2024-05-01T12:00:00.000Z`).
    fn now(&self) -> String {
        format_rfc3339(self.now_millis())
    }
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// Parses an RFC 3339 timestamp, as a run records every time (`Z` or
    /// `±HH:MM` offset, optional fraction), into milliseconds since the epoch.
    /// `None` when malformed.
    pub fn parse_rfc3339(ts: &str) -> Option<i64> {
        parse_rfc3339(ts)
    }
}

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_millis() as i64,
            Err(e) => -(e.duration().as_millis() as i64),
        }
    }
}

/// A clock that stands still until moved; for tests (the `sim` feature).
/// Clones share the time.
#[cfg(any(test, feature = "sim"))]
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

#[cfg(any(test, feature = "sim"))]
impl ManualClock {
    /// A clock showing `millis` since the epoch.
    pub fn at_millis(millis: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(millis)))
    }

    /// A clock showing the RFC 3339 timestamp `ts`; `None` when it does not parse.
    pub fn at(ts: &str) -> Option<ManualClock> {
        parse_rfc3339(ts).map(ManualClock::at_millis)
    }

    /// Moves the clock forward by `millis`.
    pub fn advance(&self, millis: i64) {
        self.0.fetch_add(millis, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set_millis(&self, millis: i64) {
        self.0.store(millis, Ordering::SeqCst);
    }
}

#[cfg(any(test, feature = "sim"))]
impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) → days since 1970-01-01 (`days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
/// Every replayed transition formats several (its time, and each unit it
/// reads), so the digits of years 0–9999 are written by hand;
/// `format!` spells the other years.
pub fn format_rfc3339(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let ms_of_day = millis.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    let secs = ms_of_day / 1000;
    let (h, mi, s, ms) = (secs / 3600, secs / 60 % 60, secs % 60, ms_of_day % 1000);
    if !(0..=9999).contains(&y) {
        return format_rfc3339_by_fmt(millis);
    }
    let mut b = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut v: u64| {
        for i in (at..at + width).rev() {
            b[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, y as u64);
    put(5, 2, u64::from(mo));
    put(8, 2, u64::from(d));
    put(11, 2, h as u64);
    put(14, 2, mi as u64);
    put(17, 2, s as u64);
    put(20, 3, ms as u64);
    // ASCII by construction; the fallback only keeps this free of a panic.
    std::str::from_utf8(&b).map_or_else(|_| format_rfc3339_by_fmt(millis), str::to_owned)
}

/// [`format_rfc3339`] through `format!`, for any year (a year past 9999 has
/// more digits, one before 0 a sign).
fn format_rfc3339_by_fmt(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let ms_of_day = millis.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    let secs = ms_of_day / 1000;
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ms_of_day % 1000
    )
}

/// Parses an RFC 3339 timestamp (`Z` or `±HH:MM` offset, optional fraction)
/// into milliseconds since the epoch. `None` when malformed.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b.len() > 40 || !s.is_ascii() {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' || !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    if h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0i64;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let digits = &s[start..i.min(start + 3)];
        frac_ms = digits.parse::<i64>().ok()? * 10i64.pow(3 - digits.len() as u32);
    }
    let offset_min = match &s[i..] {
        "Z" | "z" => 0,
        rest if rest.len() == 6 && matches!(rest.as_bytes()[0], b'+' | b'-') => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if rest.as_bytes()[3] != b':' {
                return None;
            }
            let sign = if rest.as_bytes()[0] == b'-' { -1 } else { 1 };
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Some(secs * 1000 + frac_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn the_hand_written_digits_spell_what_format_spells() {
        // Year 0, 9999 and 10000, around the epoch, and a pseudo-random walk.
        let mut ms = vec![
            -62_167_219_200_000,
            253_402_300_799_999,
            253_402_300_800_000,
        ];
        ms.extend([-86_400_001, -1, 0, 1, 999, 1000, 86_399_999, 86_400_000]);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ms.push((x % 300_000_000_000_000) as i64 - 80_000_000_000_000);
        }
        for m in ms {
            assert_eq!(format_rfc3339(m), format_rfc3339_by_fmt(m), "{m}");
        }
    }

    #[test]
    fn parse_inverts_format_across_eras() {
        for ms in [
            0,
            1,
            -1,
            951_782_400_123,
            4_102_444_800_000,
            1_700_000_000_999,
        ] {
            assert_eq!(parse_rfc3339(&format_rfc3339(ms)), Some(ms));
        }
        assert_eq!(parse_rfc3339("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("nope"), None);
        assert_eq!(parse_rfc3339("1970-13-01T00:00:00Z"), None);
    }
}
