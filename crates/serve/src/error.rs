//! Why serving stopped or could not start.

use std::path::PathBuf;

use cairn_store::group::GroupError;

/// Why serving stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot mount the file system at {path}: {error}")]
    Mount {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Group(#[from] GroupError),
}
