//! Progress: bytes done of a total, told to the caller as threads do them.

use cairn_io::poison::Recover;

/// A progress callback: bytes done so far, and the total.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// Bytes done of a total, shared by the threads doing them, each addition
/// told to the caller's [`Progress`] in order (a report never goes back).
pub(super) struct Meter<'a> {
    done: std::sync::Mutex<u64>,
    total: u64,
    report: Option<Progress<'a>>,
}

impl<'a> Meter<'a> {
    pub(super) fn new(report: Option<Progress<'a>>, total: u64) -> Self {
        Self {
            done: std::sync::Mutex::new(0),
            total,
            report,
        }
    }

    pub(super) fn add(&self, bytes: u64) {
        // Reported under the lock: loader threads' reports arrive in order.
        let mut done = self.done.lock_or_recover();
        *done += bytes;
        if let Some(report) = self.report {
            report(*done, self.total);
        }
    }
}
