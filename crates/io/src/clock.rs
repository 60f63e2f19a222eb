//! Where a timed loop reads its time: the real monotonic clock in production,
//! simulated time in tests.
//!
//! A loop that keeps a schedule (the workload engine's open-loop arrivals, its
//! intervals, the latency of each I/O from its intended start) reads the time
//! and sleeps only through a [`Clock`]. With [`Monotonic`] that is the
//! machine's clock. A simulator (`cairn_io_sim::SimClock`) keeps its own time
//! instead: a sleep moves it forward at once, and a simulated disk moves it to
//! each completion's due time, so a run of many seconds takes no real time
//! and gives the same figures on every machine, however busy.
//!
//! A simulated clock has one writer at a time: a loop driven by it runs on
//! one thread (two threads sleeping on it would each jump it forward).

use std::time::{Duration, Instant};

/// A source of monotonic time in nanoseconds from an arbitrary origin.
pub trait Clock: Send + Sync {
    /// Nanoseconds since the clock's origin; never goes back.
    fn now_ns(&self) -> u64;

    /// Return once [`Clock::now_ns`] has reached `until_ns` (at once if it has).
    fn sleep_until_ns(&self, until_ns: u64);
}

/// The machine's monotonic clock, counted from when this value was made.
#[derive(Debug, Clone, Copy)]
pub struct Monotonic {
    origin: Instant,
}

impl Monotonic {
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for Monotonic {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for Monotonic {
    fn now_ns(&self) -> u64 {
        // u64 nanoseconds last 584 years.
        self.origin.elapsed().as_nanos() as u64
    }

    fn sleep_until_ns(&self, until_ns: u64) {
        let now = self.now_ns();
        if until_ns > now {
            std::thread::sleep(Duration::from_nanos(until_ns - now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monotonic_clock_sleeps_until_the_time_asked_and_never_goes_back() {
        let clock = Monotonic::new();
        let a = clock.now_ns();
        clock.sleep_until_ns(a + 1_000_000);
        let b = clock.now_ns();
        assert!(b >= a + 1_000_000, "{a} then {b}");
        // A time already passed returns at once (and time still goes forward).
        clock.sleep_until_ns(a);
        assert!(clock.now_ns() >= b);
    }
}
