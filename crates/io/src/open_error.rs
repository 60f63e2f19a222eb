//! The one error of opening or probing a device, shared by [`crate::device`]
//! (which opens) and [`crate::probe`] (which looks, and which opening
//! uses), so that neither needs the other for it.

use std::io;
use std::path::PathBuf;

/// Why a device could not be opened or probed. Each message is one line that says
/// what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{}: no such file or device; check the path", path.display())]
    NotFound { path: PathBuf },
    #[error("{} is a directory; give a block device or a regular file", path.display())]
    IsDirectory { path: PathBuf },
    #[error("{} is a {what}; give a block device or a regular file", path.display())]
    NotADevice { path: PathBuf, what: &'static str },
    #[error("{}: permission denied; run as a user who may {} it (root, or a member of its group)", path.display(), if *write { "write" } else { "read" })]
    PermissionDenied { path: PathBuf, write: bool },
    #[error("{} is read-only ({reason}); make it writable first if it is meant to be a Cairn disk", path.display())]
    ReadOnly { path: PathBuf, reason: String },
    /// An inode attribute refuses writes even to root.
    #[error("{} is {attribute}: no one may write it, root included; `chattr -{flag} {}` removes the attribute", path.display(), path.display())]
    Immutable {
        path: PathBuf,
        /// `immutable (chattr +i)` or `append-only (chattr +a)`.
        attribute: &'static str,
        flag: char,
    },
    #[error("{} is in use ({by}); stop that use first", path.display())]
    InUse { path: PathBuf, by: String },
    #[error("{}: its filesystem ({filesystem}) does not support direct I/O (O_DIRECT); use a file on ext4, xfs or btrfs, or a block device", path.display())]
    DirectIoUnsupported { path: PathBuf, filesystem: String },
    #[error("{}: {logical_sector_bytes}-byte logical sectors are not supported (512 to 4096)", path.display())]
    UnsupportedSectorSize {
        path: PathBuf,
        logical_sector_bytes: u32,
    },
    #[error("{}: {action} failed: {error}; check the device and the kernel log (dmesg)", path.display())]
    Os {
        path: PathBuf,
        action: &'static str,
        error: io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    /// The CLI prints an error with its chain of causes; a message that already
    /// holds the OS error must not also carry it as a cause, or it prints twice.
    #[test]
    fn os_errors_are_said_once() {
        let e = OpenError::Os {
            path: "/dev/x".into(),
            action: "open",
            error: io::Error::from_raw_os_error(libc::EIO),
        };
        assert!(e.source().is_none());
        assert_eq!(e.to_string().matches("Input/output error").count(), 1);
    }
}
