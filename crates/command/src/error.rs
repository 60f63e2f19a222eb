//! Why a command did not do what it was asked.

use cairn_store::group::GroupError;
use cairn_store::group_admin::GroupAdminError;

/// A command's failure: one line a person can act on (`cairn: error: ...`).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The request itself is wrong (a field out of bounds, a name given
    /// twice): the asker's to mend. Refused (exit status 1) whichever door
    /// it came in by; a command line the CLI cannot parse at all is its
    /// parser's to refuse (exit status 2).
    #[error("{0}")]
    Usage(String),
    /// Refused, or failed: exit status 1.
    #[error("{0}")]
    Failed(String),
    /// The asker may not do this (its credentials, as the mount would
    /// check them, or a command only an administrator may give).
    #[error("{0}")]
    Denied(String),
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error(transparent)]
    Admin(#[from] GroupAdminError),
}

impl CommandError {
    pub fn failed(what: impl Into<String>) -> Self {
        Self::Failed(what.into())
    }
}

impl From<cairn_store::names::NameError> for CommandError {
    fn from(e: cairn_store::names::NameError) -> Self {
        Self::Failed(e.to_string())
    }
}

impl From<cairn_store::file_copy::CopyError> for CommandError {
    fn from(e: cairn_store::file_copy::CopyError) -> Self {
        Self::Failed(e.to_string())
    }
}

impl From<cairn_store::discovery::DiscoveryError> for CommandError {
    fn from(e: cairn_store::discovery::DiscoveryError) -> Self {
        Self::Failed(e.to_string())
    }
}

/// `Result` with a [`CommandError`].
pub type Result<T, E = CommandError> = std::result::Result<T, E>;
