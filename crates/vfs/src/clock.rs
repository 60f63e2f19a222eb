//! Where the file system reads the time: the system's clocks in the
//! service, a simulator's in its tests (so that a seed replays exactly:
//! how often an `fsync` stores a modification time depends on the time).

use std::time::{Instant, SystemTime};

use crate::attr::ns_of;

/// The two clocks the file system reads.
pub trait Clock: Send + Sync {
    /// Wall time, nanoseconds since the epoch: what a file's times say.
    fn wall_ns(&self) -> i64;
    /// A monotonic instant: how long since an `fsync` stored a time.
    fn now(&self) -> Instant;
}

/// The system's clocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn wall_ns(&self) -> i64 {
        ns_of(SystemTime::now())
    }
    fn now(&self) -> Instant {
        Instant::now()
    }
}
