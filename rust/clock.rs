//! Where timestamps come from: the system clock, or a clock tests drive by hand.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in microseconds since the Unix epoch (UTC).
pub trait Clock: Send + Sync + Debug {
    /// Microseconds since the Unix epoch (UTC).
    fn now_micros(&self) -> u64;
}

/// The operating system's real-time clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to, so tests can roll files by time
/// without sleeping.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `start_micros`.
    pub fn new(start_micros: u64) -> Self {
        ManualClock(AtomicU64::new(start_micros))
    }
    /// Sets the time.
    pub fn set(&self, micros: u64) {
        self.0.store(micros, Ordering::SeqCst);
    }
    /// Moves the time forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_micros() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Civil (proleptic Gregorian, UTC) date of a timestamp: `(year, month, day)`.
pub(crate) fn utc_date(micros: u64) -> (u32, u32, u32) {
    // Howard Hinnant's days-to-civil algorithm.
    let days = (micros / 86_400_000_000) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (y as u32, m as u32, d as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc_date(0), (1970, 1, 1));
        // 2026-11-21T23:59:59Z and one second later.
        assert_eq!(utc_date(1_795_305_599_000_000), (2026, 11, 21));
        assert_eq!(utc_date(1_795_305_600_000_000), (2026, 11, 22));
        // 2024-02-29 (leap day).
        assert_eq!(utc_date(1_709_164_800_000_000), (2024, 2, 29));
    }
}
