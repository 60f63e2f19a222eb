//! The log buffer and everything under the redo allocation latch, shared
//! by the sessions that append and the log writer that writes.

use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex, MutexGuard};

use cairn_io::poison::Recover;
use cairn_io::IoError;

use crate::OltpError;

use super::format::{Lsn, RedoConfig};

/// Why the log no longer takes records.
#[derive(Debug, Clone)]
pub(super) enum Down {
    /// A log write failed: every later call reports it.
    Failed { context: String, error: IoError },
    /// `stop` was called.
    Stopped,
    /// The log writer thread panicked (a bug).
    Panicked,
}

impl Down {
    pub(super) fn to_error(&self) -> OltpError {
        match self {
            Down::Failed { context, error } => OltpError::io(context.clone(), error.clone()),
            Down::Stopped => OltpError::Usage(
                "the log writer has been stopped; no more redo can be written in this run".into(),
            ),
            Down::Panicked => OltpError::Usage(
                "the log writer panicked; this is a bug in Cairn, please report it".into(),
            ),
        }
    }
}

/// Everything under the redo allocation latch.
pub(super) struct State {
    /// The circular log buffer; byte `lsn % len` holds stream byte `lsn`.
    pub(super) ring: Vec<u8>,
    /// End of the records copied into the buffer.
    pub(super) appended: Lsn,
    /// End of the records on disk.
    pub(super) written: Lsn,
    /// Someone asked the writer to write (a commit, a flush, a full buffer).
    pub(super) posted: bool,
    /// The writer is asleep waiting for a post.
    pub(super) writer_idle: bool,
    /// Sessions waiting for room in the buffer.
    pub(super) space_waiters: usize,
    /// Set by `stop`: the writer writes what is left and ends; appends are refused.
    pub(super) stopping: bool,
    /// Set when the writer has ended (cleanly or not).
    pub(super) writer_done: bool,
    pub(super) down: Option<Down>,
    pub(super) writes: u64,
    pub(super) wraps: u64,
    /// Test hook: the writer does not start a write while this is set.
    pub(super) hold: bool,
}

pub(super) struct Shared {
    pub(super) cfg: RedoConfig,
    pub(super) state: Mutex<State>,
    /// The writer waits here for posts.
    pub(super) writer_cv: Condvar,
    /// Committers, flushers and space waiters wait here for `written` to move.
    pub(super) written_cv: Condvar,
    /// Test hook: commits stop waiting without a covering write.
    pub(super) release_commits_early: AtomicBool,
}

/// The log's state after a thread panicked holding it (a bug) may be half
/// changed — positions in the ring, what is written — so the panic spreads
/// to whoever takes it next and the run fails instead of logging on.
pub(super) const STATE_POISONED: &str = "invariant: no thread panics while holding the log's state";

impl Shared {
    /// The log of `cfg`, its buffer empty, nothing written, the writer not started.
    pub(super) fn new(cfg: RedoConfig) -> Self {
        Self {
            cfg,
            state: Mutex::new(State {
                ring: vec![0; cfg.log_buffer_bytes],
                appended: 0,
                written: 0,
                posted: false,
                writer_idle: false,
                space_waiters: 0,
                stopping: false,
                writer_done: false,
                down: None,
                writes: 0,
                wraps: 0,
                hold: false,
            }),
            writer_cv: Condvar::new(),
            written_cv: Condvar::new(),
            release_commits_early: AtomicBool::new(false),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect(STATE_POISONED)
    }

    /// The state for shutting down only: marking the writer gone and waking
    /// whoever waits for it, after a panic has already failed the run. Those
    /// flags are set whole, nothing is read back to report, and a `Drop` that
    /// runs while unwinding must not panic again.
    pub(super) fn lock_for_shutdown(&self) -> MutexGuard<'_, State> {
        self.state.lock_or_recover()
    }

    /// Wake the writer (the caller holds the latch).
    pub(super) fn post(&self, st: &mut State) {
        if !st.posted {
            st.posted = true;
            if st.writer_idle {
                self.writer_cv.notify_one();
            }
        }
    }
}

/// Copy `bytes` into the circular `ring` starting at `at`, wrapping at its end.
pub(super) fn ring_write(ring: &mut [u8], at: usize, bytes: &[u8]) {
    let first = bytes.len().min(ring.len() - at);
    ring[at..at + first].copy_from_slice(&bytes[..first]);
    let rest = bytes.len() - first;
    ring[..rest].copy_from_slice(&bytes[first..]);
}

/// Append `len` bytes of the circular `ring` from `at` to `out`.
pub(super) fn ring_read(ring: &[u8], at: usize, len: usize, out: &mut Vec<u8>) {
    let first = len.min(ring.len() - at);
    out.extend_from_slice(&ring[at..at + first]);
    out.extend_from_slice(&ring[..len - first]);
}
