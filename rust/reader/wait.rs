//! How a blocking read waits for the writer.

use std::time::Duration;

/// How a blocking read waits for the next message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitStrategy {
    /// Spin a few microseconds, then sleep on the queue's wake-up word
    /// (`wake.ctl`, a futex a writer in any process bumps after publishing):
    /// low latency while messages flow, no CPU while they don't. Where there
    /// is no usable wake-up word (a read-only handle that cannot write
    /// `wake.ctl`, not Linux), spin, yield, then sleep with back-off up to 1 ms.
    #[default]
    Default,
    /// Spin on the mapping without ever sleeping: lowest latency, one core
    /// busy per waiting follower. On a machine with few cores (2) it starves
    /// the writer's I/O thread and latency gets worse, not better.
    BusySpin,
}

/// Escalating back-off: spin, then yield, then sleep up to 1 ms.
#[derive(Debug)]
pub struct Waiter {
    strategy: WaitStrategy,
    rounds: u32,
}

const SPIN_ROUNDS: u32 = 200;
const YIELD_ROUNDS: u32 = 2_000;

impl Waiter {
    pub fn new(strategy: WaitStrategy) -> Waiter {
        Waiter {
            strategy,
            rounds: 0,
        }
    }

    /// Waits a little; each call may wait longer than the last.
    pub fn wait(&mut self) {
        self.rounds = self.rounds.saturating_add(1);
        match self.strategy {
            WaitStrategy::BusySpin => std::hint::spin_loop(),
            WaitStrategy::Default if self.rounds < SPIN_ROUNDS => std::hint::spin_loop(),
            WaitStrategy::Default if self.rounds < YIELD_ROUNDS => std::thread::yield_now(),
            WaitStrategy::Default => {
                let extra = (self.rounds - YIELD_ROUNDS).min(10);
                std::thread::sleep(
                    Duration::from_micros(50 << extra.min(4)).min(Duration::from_millis(1)),
                );
            }
        }
    }
}

// ---- Sleeping on the wake-up word (`WaitStrategy::Default` on Linux) ----

use std::time::Instant;

use crate::error::Result;
use crate::storage::wake::{WakeFile, Woke};

/// Spin budget bounds: the budget doubles when a message came while
/// spinning and halves when the follower had to sleep, so a follower spins
/// through bursts but not between messages a millisecond apart.
const MIN_SPIN: Duration = Duration::from_micros(2);
const MAX_SPIN: Duration = Duration::from_micros(50);
/// How long one sleep on the word lasts at most: the safety net that finds
/// a message a writer published without waking anyone (a writer that died
/// between publishing and waking, an older litemq), and the bound on how
/// long a wait goes without checking `interrupt`.
pub const SLEEP_AT_MOST: Duration = Duration::from_millis(50);

/// The spin-then-sleep wait of a tailer that has a wake-up word.
#[derive(Debug, Clone, Copy)]
pub struct Sleeper {
    spin: Duration,
}

impl Default for Sleeper {
    fn default() -> Sleeper {
        Sleeper {
            spin: Duration::from_micros(20),
        }
    }
}

/// How a sleeping wait ended.
#[derive(Debug)]
pub enum Slept<T> {
    /// `check` found something; `missed`: after sleeping to a timeout with
    /// the word unchanged (a writer published without waking).
    Found { value: T, slept: bool, missed: bool },
    /// The timeout passed, or `interrupt` said stop.
    Nothing,
}

impl Sleeper {
    /// Calls `check` until it finds something, `timeout` passes, or
    /// `interrupt` (called at least every [`SLEEP_AT_MOST`], and at once when
    /// a signal cuts a sleep short) returns true. Spins first; then registers
    /// as a waiter on `file` and sleeps on the word between checks.
    pub fn wait<T>(
        &mut self,
        file: &WakeFile,
        timeout: Duration,
        interrupt: &mut dyn FnMut() -> bool,
        check: &mut dyn FnMut() -> Result<Option<T>>,
    ) -> Result<Slept<T>> {
        let start = Instant::now();
        loop {
            if let Some(value) = check()? {
                self.spin = (self.spin * 2).min(MAX_SPIN);
                return Ok(Slept::Found {
                    value,
                    slept: false,
                    missed: false,
                });
            }
            let spent = start.elapsed();
            if spent >= timeout {
                return Ok(Slept::Nothing);
            }
            if spent >= self.spin {
                break;
            }
            std::hint::spin_loop();
        }
        self.spin = (self.spin / 2).max(MIN_SPIN);
        // Registered from here until return: a writer that publishes after
        // the fence in `register` sees the count and wakes us.
        let _registered = file.register();
        let mut last_interrupt_check = Instant::now();
        let mut timed_out = false;
        loop {
            // The word before the check: if a writer bumps after this load,
            // the sleep below returns at once.
            let seen = file.current();
            if let Some(value) = check()? {
                let missed = timed_out && file.current() == seen;
                return Ok(Slept::Found {
                    value,
                    slept: true,
                    missed,
                });
            }
            let now = Instant::now();
            let spent = now.duration_since(start);
            if spent >= timeout {
                return Ok(Slept::Nothing);
            }
            let since_check = now.duration_since(last_interrupt_check);
            if since_check >= SLEEP_AT_MOST {
                last_interrupt_check = now;
                if interrupt() {
                    return Ok(Slept::Nothing);
                }
            }
            let budget = (timeout - spent)
                .min(SLEEP_AT_MOST.saturating_sub(now.duration_since(last_interrupt_check)))
                .max(Duration::from_micros(1));
            match file.sleep(seen, budget) {
                Woke::Changed => timed_out = false,
                Woke::TimedOut => timed_out = true,
                Woke::Interrupted => {
                    last_interrupt_check = Instant::now();
                    if interrupt() {
                        return Ok(Slept::Nothing);
                    }
                }
            }
        }
    }
}
