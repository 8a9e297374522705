//! How a blocking read waits for the writer.

use std::time::Duration;

/// How a blocking read waits for the next message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitStrategy {
    /// Spin briefly, then yield, then sleep with backoff up to 1 ms: low
    /// latency while messages flow, little CPU when they don't.
    #[default]
    Default,
    /// Spin on the mapping without ever sleeping: lowest latency, one core busy.
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
