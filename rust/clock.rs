//! Where timestamps come from: the system clock, or a clock tests drive by hand.
//!
//! Two clocks: the wall clock (timestamps, retention, message expiry) and a
//! monotonic one (work-queue leases), which the wall clock's steps do not
//! move. The monotonic reading names its *boot* (a key derived from the
//! kernel's boot id and the time namespace), because readings of two boots
//! cannot be compared. Reading `CLOCK_BOOTTIME` is this module's one system
//! call, hence its one `unsafe` block.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in microseconds since the Unix epoch (UTC),
/// and of monotonic time.
pub trait Clock: Send + Sync + Debug {
    /// Microseconds since the Unix epoch (UTC).
    fn now_micros(&self) -> u64;

    /// The monotonic clock: time since boot (`CLOCK_BOOTTIME`, which counts
    /// suspend too), and which boot it counts from. A clock that fakes
    /// only the wall time keeps this default, the system's.
    fn monotonic(&self) -> Monotonic {
        system_monotonic()
    }
}

/// A reading of a monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Monotonic {
    /// Which boot the reading counts from: readings with the same key are
    /// comparable. Never 0 (0 stands for "unknown" where keys are stored).
    pub boot: u32,
    /// Microseconds since that boot.
    pub micros: u64,
}

/// The system's monotonic clock: `CLOCK_BOOTTIME` and this boot's key.
pub fn system_monotonic() -> Monotonic {
    Monotonic {
        boot: system_boot_key(),
        micros: boottime_micros(),
    }
}

/// `CLOCK_BOOTTIME` in microseconds (0 if the call fails, which it does not
/// on Linux; elsewhere `CLOCK_MONOTONIC`).
#[expect(unsafe_code, reason = "the clock_gettime system call")]
fn boottime_micros() -> u64 {
    #[cfg(target_os = "linux")]
    const CLOCK: libc::clockid_t = libc::CLOCK_BOOTTIME;
    #[cfg(not(target_os = "linux"))]
    const CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call, and CLOCK is a clock id every supported kernel knows.
    let rc = unsafe { libc::clock_gettime(CLOCK, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1000
}

/// This boot's key: FNV-1a of the kernel's boot id
/// (`/proc/sys/kernel/random/boot_id`) and the inode of this process's time
/// namespace (which may offset `CLOCK_BOOTTIME`), folded to 32 bits, never
/// 0. Processes of one boot and one time namespace share it; containers
/// share the host's boot id.
pub fn system_boot_key() -> u32 {
    static KEY: OnceLock<u32> = OnceLock::new();
    *KEY.get_or_init(|| {
        let id = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let time_ns = std::fs::metadata("/proc/self/ns/time")
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .unwrap_or(0);
        boot_key(&id, time_ns)
    })
}

/// The boot key of boot id `id` in time namespace `time_ns` (see
/// [`system_boot_key`]).
fn boot_key(id: &[u8], time_ns: u64) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in id.iter().chain(time_ns.to_le_bytes().iter()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let k = (h ^ (h >> 32)) as u32;
    if k == 0 {
        1
    } else {
        k
    }
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
/// without sleeping, and step the wall clock without time passing.
///
/// Its monotonic side counts from 0 (or a given uptime) on a boot of its own
/// ([`ManualClock::BOOT`] unless given), so its readings are never mixed up
/// with a real process's.
#[derive(Debug)]
pub struct ManualClock {
    wall: AtomicU64,
    mono: AtomicU64,
    boot: u32,
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new(0)
    }
}

impl ManualClock {
    /// The boot key of a manual clock made by [`ManualClock::new`].
    pub const BOOT: u32 = 0x4d41_4e55; // "MANU"

    /// A clock reading `start_micros`, 0 µs after its boot.
    pub fn new(start_micros: u64) -> Self {
        ManualClock::on_boot(start_micros, ManualClock::BOOT, Duration::ZERO)
    }
    /// A clock reading `start_micros`, `uptime` after the boot `boot` (not 0):
    /// two clocks with different boots stand for processes of two boots (or
    /// hosts), whose monotonic readings cannot be compared.
    pub fn on_boot(start_micros: u64, boot: u32, uptime: Duration) -> Self {
        ManualClock {
            wall: AtomicU64::new(start_micros),
            mono: AtomicU64::new(uptime.as_micros() as u64),
            boot: boot.max(1),
        }
    }
    /// Sets the wall time: a step of the clock (as NTP or an administrator
    /// makes), which the monotonic side does not see.
    pub fn set(&self, micros: u64) {
        self.wall.store(micros, Ordering::SeqCst);
    }
    /// Lets `by` pass: both sides move forward.
    pub fn advance(&self, by: Duration) {
        let us = by.as_micros() as u64;
        self.wall.fetch_add(us, Ordering::SeqCst);
        self.mono.fetch_add(us, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.wall.load(Ordering::SeqCst)
    }
    fn monotonic(&self) -> Monotonic {
        Monotonic {
            boot: self.boot,
            micros: self.mono.load(Ordering::SeqCst),
        }
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
    fn the_system_monotonic_clock_moves_forward_on_one_boot() {
        let a = system_monotonic();
        std::thread::sleep(Duration::from_millis(2));
        let b = system_monotonic();
        assert_eq!(a.boot, b.boot);
        assert_ne!(a.boot, 0);
        assert!(b.micros >= a.micros + 2_000, "{a:?} {b:?}");
        assert_ne!(boot_key(b"one boot", 1), boot_key(b"another boot", 1));
        assert_ne!(boot_key(b"one boot", 1), boot_key(b"one boot", 2));
    }

    #[test]
    fn a_manual_clock_steps_its_wall_side_only() {
        let c = ManualClock::new(1_000);
        c.set(5_000_000);
        assert_eq!(c.monotonic().micros, 0);
        c.advance(Duration::from_millis(3));
        assert_eq!((c.now_micros(), c.monotonic().micros), (5_003_000, 3_000));
        assert_eq!(c.monotonic().boot, ManualClock::BOOT);
    }

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
