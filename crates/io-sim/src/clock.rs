//! Simulated time, shared by the simulated disks and the loop that drives
//! them.
//!
//! A [`SimClock`] is a count of nanoseconds that only moves forward: a sleep
//! moves it to the time asked for at once, a [`crate::SimEngine`] given the
//! clock ([`crate::SimEngine::with_clock`]) moves it to each completion's due
//! time as the caller waits, and a [`crate::Stall`] moves it by the length of
//! its hang. A timed loop that reads its time from this clock (the workload
//! engine's, through [`cairn_io::clock::Clock`]) then sees latencies, arrival
//! times and stalls exactly as the seed made them, in no real time, on any
//! machine. One thread drives it (see [`cairn_io::clock`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cairn_io::clock::Clock;

/// Simulated nanoseconds, shared by clones.
#[derive(Debug, Clone, Default)]
pub struct SimClock(Arc<AtomicU64>);

impl SimClock {
    /// A clock at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Move to `ns`, unless the clock is already past it.
    pub fn advance_to(&self, ns: u64) {
        self.0.fetch_max(ns, Ordering::SeqCst);
    }

    /// Move forward by `by`.
    pub fn advance(&self, by: Duration) {
        let ns = u64::try_from(by.as_nanos()).expect("invariant: a step under 584 years");
        self.0.fetch_add(ns, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    fn sleep_until_ns(&self, until_ns: u64) {
        self.advance_to(until_ns);
    }
}
