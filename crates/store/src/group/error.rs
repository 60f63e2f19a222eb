//! Why a group operation failed, and the two ways most errors are made.

use cairn_io::IoError;

/// Why a group operation failed. Messages are one line a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("{0}")]
    Invalid(String),
    #[error("disk {disk}: {error}")]
    Io { disk: String, error: IoError },
    /// Metadata the group cannot work with (a map that names an AU twice, a
    /// structure that contradicts itself); the message says what and where.
    #[error("metadata is damaged: {0}")]
    Corrupt(String),
    /// A metadata block with no valid copy on any disk: what it held is lost.
    #[error("{0}")]
    Lost(String),
    /// A metadata block no copy of which could be read (I/O errors): not a
    /// loss, as the disks may answer again.
    #[error("{0}")]
    Unreadable(String),
    #[error("{0}")]
    NoSpace(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Exists(String),
    /// A directory that must be empty is not.
    #[error("{0}")]
    NotEmpty(String),
    /// A directory where a file was wanted.
    #[error("{0}")]
    IsDirectory(String),
    /// A file where a directory was wanted.
    #[error("{0}")]
    NotDirectory(String),
    #[error("{0}")]
    Mount(String),
    /// A write that must be durable reached no copy of some block.
    #[error("{0}")]
    WriteFailed(String),
    #[error("the group stopped after a failed metadata write ({0}); mount it again to recover")]
    Poisoned(String),
    /// The group's heartbeat stopped it: another host took it over, or no
    /// heartbeat could be written for the timeout (`heartbeat.rs`).
    #[error("{0}")]
    Fenced(String),
    /// A change asked of a group mounted read-only.
    #[error("group {0} is mounted read-only (by a listing or inspecting command); this change needs a command that writes")]
    ReadOnly(String),
    /// A long operation stopped before its end because the service is
    /// stopping; what it did stays done, and it resumes where it stopped.
    #[error("{0}")]
    Interrupted(String),
}

impl From<crate::names::NameError> for GroupError {
    fn from(e: crate::names::NameError) -> Self {
        Self::Invalid(e.to_string())
    }
}

/// Turns an engine error into a group error naming `disk`; the name becomes
/// a `String` only when there is an error (the data path calls this for
/// every I/O).
pub(super) fn io_err(disk: impl Into<String>) -> impl FnOnce(IoError) -> GroupError {
    move |error| GroupError::Io {
        disk: disk.into(),
        error,
    }
}

pub(super) fn corrupt(e: impl std::fmt::Display) -> GroupError {
    GroupError::Corrupt(e.to_string())
}
