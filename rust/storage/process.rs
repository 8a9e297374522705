//! Who a process is, as other processes see it: its identity (pid and start
//! time, so a reused pid is not mistaken for it), whether it still runs, and
//! its pid namespace (outside which its pid means nothing). The append lock
//! and work-queue leases both name their holders this way.

use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

/// Bits of the pid in an identity (Linux's `PID_MAX_LIMIT` is 2^22).
pub const PID_BITS: u32 = 22;

/// A process's identity: `start_time << 22 | pid`, where the start time is
/// field 22 of `/proc/<pid>/stat` (clock ticks since boot, low 42 bits).
/// Never 0. `None` for a process that is gone (or a zombie).
pub fn identity(pid: u32) -> Option<u64> {
    let (start, state) = proc_stat(pid)?;
    if state == 'Z' || state == 'X' {
        return None;
    }
    Some((start << PID_BITS) | u64::from(pid))
}

/// The pid an identity names.
pub fn pid_of(identity: u64) -> u32 {
    (identity & ((1 << PID_BITS) - 1)) as u32
}

/// Whether the process an identity names still runs (a zombie does not).
/// Only meaningful in the pid namespace the identity was taken in (see
/// [`pid_namespace`]).
pub fn is_alive(identity: u64) -> bool {
    self::identity(pid_of(identity)).is_some_and(|now| now == identity)
}

/// This process's pid namespace: the inode of `/proc/self/ns/pid` (procfs
/// inode numbers are 32-bit), or `u32::MAX` when it cannot be read (then
/// no other process is taken to share it). Two processes with different
/// namespaces cannot judge each other's liveness by pid.
pub fn pid_namespace() -> u32 {
    static NS: OnceLock<u32> = OnceLock::new();
    *NS.get_or_init(|| {
        std::fs::metadata("/proc/self/ns/pid")
            .ok()
            .and_then(|m| u32::try_from(m.ino()).ok())
            .filter(|&ino| ino != 0)
            .unwrap_or(u32::MAX)
    })
}

/// `(start time, state)` of a process, from `/proc/<pid>/stat`.
pub fn proc_stat(pid: u32) -> Option<(u64, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: the
    // fields after it follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 is the state; the start time is field 22.
    let start = fields.nth(18)?.parse::<u64>().ok()?;
    Some((start & ((1 << (64 - PID_BITS)) - 1), state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_names_this_process_and_a_dead_one_is_not_alive() {
        let me = identity(std::process::id()).unwrap();
        assert!(is_alive(me));
        assert_eq!(pid_of(me), std::process::id());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Running or a zombie, the child's /proc entry lasts until it is reaped.
        let (start, _) = proc_stat(pid).unwrap();
        let word = (start << PID_BITS) | u64::from(pid);
        child.wait().unwrap();
        assert!(!is_alive(word));
        // Same pid, different start time: not the holder.
        assert!(!is_alive(me + (1 << PID_BITS)));
        assert_ne!(pid_namespace(), 0);
    }
}
