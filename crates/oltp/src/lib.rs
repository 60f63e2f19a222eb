//! Database emulation, the SLOB method: `cairn bench oltp setup|run|verify`.
//!
//! SLOB measures storage through an Oracle database; this crate does, with no
//! database, what the database does on its I/O path, and pays the same CPU for
//! it: schemas of real blocks ([`block`], [`dataset`]), sessions running the
//! SLOB loop ([`session`]), a shared buffer cache with hash latches, an LRU
//! with touch counts and pins ([`cache`]), a log writer with group commit
//! ([`redo`]), a database writer with batched asynchronous writes ([`dbwr`]),
//! counted in Oracle's names ([`stats`]) and reported AWR-style ([`report`]).
//!
//! It runs on the test kit's parts: the targets' opener and results of
//! `cairn-kit`, the report model of `cairn-kit-report`, the host probing of
//! `cairn-host`; it knows nothing of AWR replay or the workload engine's
//! reports. Why it is built this way: docs/oltp.md.

pub mod block;
pub mod cache;
pub mod conf;
pub mod dataset;
pub mod dbwr;
pub mod layout;
pub mod redo;
pub mod report;
pub mod report_file;
pub mod result;
pub mod run;
pub mod session;
pub mod stats;

/// Why an OLTP command could not do what it was asked. Every message is one
/// line that says what is wrong and, where there is one, what to do.
#[derive(Debug, thiserror::Error)]
pub enum OltpError {
    /// A slob.conf that cannot be used (the message carries file:line).
    #[error(transparent)]
    Conf(#[from] conf::ConfError),
    /// Input that cannot be used: a target refused, too small, not loaded, of another shape.
    #[error("{0}")]
    Usage(String),
    /// Settings that do not fit the block size.
    #[error(transparent)]
    Scale(#[from] conf::ScaleError),
    /// An I/O that failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: cairn_io::IoError,
    },
    /// An operating-system call that failed.
    #[error("{context}: {source}")]
    Os {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// Stopped by Ctrl-C.
    #[error("interrupted")]
    Interrupted,
}

impl OltpError {
    pub fn io(context: impl Into<String>, source: cairn_io::IoError) -> Self {
        OltpError::Io {
            context: context.into(),
            source,
        }
    }

    pub fn os(context: impl Into<String>, source: std::io::Error) -> Self {
        OltpError::Os {
            context: context.into(),
            source,
        }
    }
}

/// Shared by every thread of a run: the first failure stops them all.
#[derive(Debug, Default)]
pub struct Health {
    failed: std::sync::atomic::AtomicBool,
    error: std::sync::Mutex<Option<String>>,
}

impl Health {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record a failure (the first one wins) and tell every thread to stop.
    pub fn fail(&self, message: impl Into<String>) {
        let mut e = self.message();
        if e.is_none() {
            *e = Some(message.into());
        }
        self.failed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn error(&self) -> Option<String> {
        self.message().clone()
    }

    /// The first failure's message, even if a thread panicked while holding
    /// it: it is one `Option<String>`, replaced whole, never half made; and
    /// this is how a panic is reported — a session that panics records it
    /// here while unwinding, where a second panic would abort the process.
    fn message(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        cairn_io::poison::Recover::lock_or_recover(&self.error)
    }
}
