//! Files' modification times between a write and its being stored.
//!
//! A write does not commit metadata (a journal commit per write would
//! double its cost): the time of a file's last write is kept here, shown by
//! `getattr` when it is newer than the entry's, and stored on `flush` (every
//! close), `release`, and `fsync` — by `fsync` at most once every
//! [`MTIME_EVERY`] per file. After a crash the stored time may be older
//! than the last write by that much, as ext4's may be with `lazytime`.
//!
//! Locking: two leaf mutexes, each taken alone, never across anything
//! else.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cairn_io::poison::Recover;

/// How often an `fsync` makes a file's modification time durable: a
/// metadata commit (a journal write and the barrier's flushes) that a loop
/// device's every FLUSH would otherwise pay (the loop driver asks for a
/// full `fsync`, not `fdatasync`). The data are durable on every `fsync`;
/// after a crash the time may be up to this much older than the last
/// write, as with `lazytime`.
const MTIME_EVERY: Duration = Duration::from_secs(1);

/// A file: (group slot, file number).
pub(crate) type FileKey = (usize, u32);

#[derive(Debug, Default)]
pub(crate) struct Mtimes {
    /// When files were last written and their entries not yet told (ns).
    /// Changed by writes, punches (set), and by what stores or forgets the
    /// time (taken).
    written: Mutex<HashMap<FileKey, i64>>,
    /// When an `fsync` last stored a file's modification time: the next
    /// within [`MTIME_EVERY`] leaves it pending (for a later `fsync`, the
    /// close, or `getattr`, which shows it). Changed by `fsync` and
    /// `release`.
    stored: Mutex<HashMap<FileKey, Instant>>,
}

impl Mtimes {
    /// File `key` was written at `ns`.
    pub(crate) fn wrote(&self, key: FileKey, ns: i64) {
        self.written.lock_or_recover().insert(key, ns);
    }

    /// The modification time to show: the last write's, if newer than the
    /// one stored.
    pub(crate) fn shown(&self, key: FileKey, stored_ns: i64) -> i64 {
        self.written
            .lock_or_recover()
            .get(&key)
            .map_or(stored_ns, |w| (*w).max(stored_ns))
    }

    /// The last write's time, to be stored (or forgotten: the file was
    /// deleted, cut, or given a time explicitly).
    pub(crate) fn take(&self, key: FileKey) -> Option<i64> {
        self.written.lock_or_recover().remove(&key)
    }

    /// Whether an `fsync` at `now` stores the time.
    pub(crate) fn fsync_due(&self, key: FileKey, now: Instant) -> bool {
        self.stored
            .lock_or_recover()
            .get(&key)
            .is_none_or(|at| now.duration_since(*at) >= MTIME_EVERY)
    }

    /// An `fsync` at `now` stored the time.
    pub(crate) fn fsync_stored(&self, key: FileKey, now: Instant) {
        self.stored.lock_or_recover().insert(key, now);
    }

    /// The file was closed: its next `fsync` stores the time.
    pub(crate) fn closed(&self, key: FileKey) {
        self.stored.lock_or_recover().remove(&key);
    }
}
