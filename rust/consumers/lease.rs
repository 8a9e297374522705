//! When a work-queue lease ends, and whether its holder still runs.
//!
//! A version-2 state file (see `format::work_queue`) counts a deadline on
//! the monotonic clock (`CLOCK_BOOTTIME`) of the boot that wrote it, and
//! records that boot in the slot's clock word, so a step of the wall clock
//! (either way) neither ends a lease early nor stretches it:
//!
//! - a deadline of this process's own boot is compared with its monotonic
//!   clock;
//! - a deadline of another boot (a process in another time namespace, or
//!   on a host sharing the file, or before a reboot) is turned into a
//!   wall-clock deadline through the boot table (each boot records the wall
//!   time of its monotonic zero), and is *bounded*: one further ahead than
//!   the lease could be long is taken for a wall clock stepped back, and
//!   passed. A boot missing from the table is long gone: passed;
//! - a deadline whose boot is unknown (a claim not complete yet) is read on
//!   this process's clock, bounded the same way.
//!
//! Version 1 counts wall-clock milliseconds from the group's epoch, as it
//! always did.
//!
//! A holder's liveness (pid and start time, `storage::process`) means
//! something only in its own pid namespace: an owner recorded in another
//! namespace is taken to live until its deadline.

use crate::clock::Clock;
use crate::format::work_queue::{ClockWord, SlotWord, BOOT_ENTRIES, W_BOOTS};
use crate::storage::process;

/// Now, as one state file counts deadlines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    /// The time this process's deadlines count: version 2, ms on this
    /// boot's monotonic clock; version 1, wall-clock ms since the epoch.
    pub ms: u64,
    /// This process's boot key (version 2; 0 for version 1).
    pub boot: u32,
    /// The wall clock, ms since the Unix epoch.
    pub wall_ms: u64,
}

impl Now {
    /// Reads `clock` for a state file of `version` created at `epoch_us`.
    pub fn read(clock: &dyn Clock, version: u64, epoch_us: u64) -> Now {
        let wall_us = clock.now_micros();
        if version < 2 {
            return Now {
                ms: wall_us.saturating_sub(epoch_us) / 1000,
                boot: 0,
                wall_ms: wall_us / 1000,
            };
        }
        let m = clock.monotonic();
        Now {
            ms: m.micros / 1000,
            boot: m.boot,
            wall_ms: wall_us / 1000,
        }
    }

    /// The wall-clock time (ms since the Unix epoch, wrapping) of this
    /// boot's monotonic zero: what the boot table records for it.
    pub fn boot_base(&self) -> u64 {
        self.wall_ms.wrapping_sub(self.ms)
    }
}

/// The words of a state file, read by index.
pub(crate) type Load<'a> = &'a dyn Fn(usize) -> u64;

/// The clock word of the slot whose state word is word `i` and holds
/// `raw`: trusted only while the claim tag equals the state word (it is
/// written before the tag); unknown (0) otherwise.
pub(crate) fn clock_word(load: Load<'_>, i: usize, raw: u64) -> ClockWord {
    if load(i + 2) == raw {
        ClockWord::decode(load(i + 3))
    } else {
        ClockWord::default()
    }
}

/// Which clock the deadline in the slot at word `i` (state word `raw`)
/// counts on, as seen from `now`: the one question both readings of a
/// deadline ([`deadline_passed`], [`deadline_wall_ms`]) start from.
enum DeadlineClock {
    /// Version 1: wall-clock ms from the group's epoch.
    Epoch,
    /// This process's boot: its monotonic clock.
    Own,
    /// A claim not complete yet: its boot is unknown.
    Unknown,
    /// Another boot, with the wall time of its monotonic zero when the
    /// boot table still has it.
    Other(Option<u64>),
}

fn deadline_clock(load: Load<'_>, version: u64, i: usize, raw: u64, now: &Now) -> DeadlineClock {
    if version < 2 {
        return DeadlineClock::Epoch;
    }
    match clock_word(load, i, raw).boot {
        boot if boot == now.boot => DeadlineClock::Own,
        0 => DeadlineClock::Unknown,
        boot => DeadlineClock::Other(boot_base(load, boot)),
    }
}

/// Whether the deadline of `word` (state word `raw` of the slot at word
/// `i`) has passed by `now`. `bound_ms`: the longest a deadline this
/// process cannot read on its own clock may lie ahead (beyond it, the wall
/// clock must have stepped back: passed).
pub(crate) fn deadline_passed(
    load: Load<'_>,
    version: u64,
    i: usize,
    raw: u64,
    word: &SlotWord,
    now: &Now,
    bound_ms: u64,
) -> bool {
    let d = word.deadline_ms;
    match deadline_clock(load, version, i, raw, now) {
        DeadlineClock::Epoch | DeadlineClock::Own => d <= now.ms,
        DeadlineClock::Unknown => d <= now.ms || d - now.ms > bound_ms,
        // A boot missing from the table is long gone.
        DeadlineClock::Other(None) => true,
        DeadlineClock::Other(Some(base)) => {
            let left = base.wrapping_add(d).wrapping_sub(now.wall_ms) as i64;
            left <= 0 || left as u64 > bound_ms
        }
    }
}

/// The wall-clock time (ms since the Unix epoch) of the deadline of `word`
/// (state word `raw` of the slot at word `i`), for people to read: on the
/// clock of the boot that wrote it when the boot table knows that boot,
/// else read on this process's clock. `epoch_ms`: the group's epoch
/// (version 1 deadlines count from it).
pub(crate) fn deadline_wall_ms(
    load: Load<'_>,
    version: u64,
    i: usize,
    raw: u64,
    word: &SlotWord,
    now: &Now,
    epoch_ms: u64,
) -> u64 {
    let d = word.deadline_ms;
    match deadline_clock(load, version, i, raw, now) {
        DeadlineClock::Epoch => epoch_ms.saturating_add(d),
        DeadlineClock::Other(Some(base)) => base.wrapping_add(d),
        DeadlineClock::Own | DeadlineClock::Unknown | DeadlineClock::Other(None) => {
            now.boot_base().wrapping_add(d)
        }
    }
}

/// The wall-clock time of boot `boot`'s monotonic zero, from the boot table.
pub(crate) fn boot_base(load: Load<'_>, boot: u32) -> Option<u64> {
    (0..BOOT_ENTRIES).find_map(|e| {
        let at = W_BOOTS + 2 * e;
        let key = load(at);
        if key != u64::from(boot) {
            return None;
        }
        let base = load(at + 1);
        // An entry taken over by another boot meanwhile is not this one's.
        (load(at) == key).then_some(base)
    })
}

/// Whether the owner with identity `owner`, recorded in pid namespace
/// `pid_ns` (0: unknown, a version-1 claim: taken as ours), is gone. Only a
/// process of our own namespace can be judged by its pid; any other is
/// taken to live (its lease ends at its deadline).
pub(crate) fn owner_gone(owner: u64, pid_ns: u32) -> bool {
    let mine = process::pid_namespace();
    if pid_ns != 0 && (pid_ns != mine || mine == u32::MAX) {
        return false;
    }
    !process::is_alive(owner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::work_queue::{slot_word, JobState};
    use std::collections::HashMap;

    fn leased(deadline_ms: u64) -> SlotWord {
        SlotWord {
            lap: 0,
            state: JobState::Leased,
            deliveries: 1,
            deadline_ms,
        }
    }

    #[test]
    fn deadlines_are_read_on_the_clock_of_their_boot() {
        let i = slot_word(0);
        let w = leased(10_000);
        let raw = w.encode();
        let mut words: HashMap<usize, u64> = HashMap::new();
        words.insert(i, raw);
        words.insert(i + 2, raw);
        words.insert(i + 3, ClockWord { boot: 7, pid_ns: 1 }.encode());
        // Boot 7's monotonic zero was at wall 1_000_000 ms.
        words.insert(W_BOOTS + 2 * 3, 7);
        words.insert(W_BOOTS + 2 * 3 + 1, 1_000_000);
        let load = |k: usize| words.get(&k).copied().unwrap_or(0);
        let on = |boot, ms, wall_ms| Now { ms, boot, wall_ms };
        let bound = 10_000;
        // Our own boot: the monotonic clock alone, whatever the wall says.
        assert!(!deadline_passed(
            &load,
            2,
            i,
            raw,
            &w,
            &on(7, 9_999, 0),
            bound
        ));
        assert!(deadline_passed(
            &load,
            2,
            i,
            raw,
            &w,
            &on(7, 10_000, u64::MAX),
            bound
        ));
        // Another boot: the wall-clock deadline 1_010_000, bounded.
        assert!(!deadline_passed(
            &load,
            2,
            i,
            raw,
            &w,
            &on(8, 0, 1_009_999),
            bound
        ));
        assert!(deadline_passed(
            &load,
            2,
            i,
            raw,
            &w,
            &on(8, 0, 1_010_000),
            bound
        ));
        assert!(
            deadline_passed(&load, 2, i, raw, &w, &on(8, 0, 990_000), bound),
            "20 s ahead of a 10 s lease: the wall clock stepped back"
        );
        // A boot the table has lost: passed.
        words.insert(W_BOOTS + 2 * 3, 9);
        let load = |k: usize| words.get(&k).copied().unwrap_or(0);
        assert!(deadline_passed(&load, 2, i, raw, &w, &on(8, 0, 0), bound));
        // Untrusted clock word (tag differs): our own clock, bounded.
        let load = |k: usize| if k == i + 2 { 0 } else { load(k) };
        assert!(!deadline_passed(&load, 2, i, raw, &w, &on(8, 0, 0), bound));
        assert!(deadline_passed(
            &load,
            2,
            i,
            raw,
            &w,
            &on(8, 0, 0),
            bound - 1
        ));
        // Version 1: ms since the epoch, nothing else.
        assert!(!deadline_passed(&load, 1, i, raw, &w, &on(0, 9_999, 0), 0));
    }

    #[test]
    fn an_owner_of_another_pid_namespace_is_never_judged_gone() {
        let dead = (12_345u64 << process::PID_BITS) | ((1 << process::PID_BITS) - 1);
        let mine = process::pid_namespace();
        assert!(owner_gone(dead, mine));
        assert!(owner_gone(dead, 0), "unknown: ours, as in version 1");
        assert!(!owner_gone(dead, mine.wrapping_add(1)));
    }
}
