//! The errors a file system answers with: POSIX's numbers, and which of
//! them each store error is.

use std::fmt;

use cairn_store::group::GroupError;

/// An errno (positive, as `libc` spells them).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(i32);

impl Errno {
    pub const EPERM: Self = Self(libc::EPERM);
    pub const ENOENT: Self = Self(libc::ENOENT);
    pub const EIO: Self = Self(libc::EIO);
    pub const EEXIST: Self = Self(libc::EEXIST);
    pub const EXDEV: Self = Self(libc::EXDEV);
    pub const ENOTDIR: Self = Self(libc::ENOTDIR);
    pub const EISDIR: Self = Self(libc::EISDIR);
    pub const EINVAL: Self = Self(libc::EINVAL);
    pub const EFBIG: Self = Self(libc::EFBIG);
    pub const ENOSPC: Self = Self(libc::ENOSPC);
    pub const EROFS: Self = Self(libc::EROFS);
    pub const ENOTEMPTY: Self = Self(libc::ENOTEMPTY);
    pub const EOPNOTSUPP: Self = Self(libc::EOPNOTSUPP);

    /// The number, for the kernel.
    pub fn code(self) -> i32 {
        self.0
    }

    /// Its symbol, for messages (`E?` and the number for one not listed).
    pub fn name(self) -> String {
        let known = [
            (Self::EPERM, "EPERM"),
            (Self::ENOENT, "ENOENT"),
            (Self::EIO, "EIO"),
            (Self::EEXIST, "EEXIST"),
            (Self::EXDEV, "EXDEV"),
            (Self::ENOTDIR, "ENOTDIR"),
            (Self::EISDIR, "EISDIR"),
            (Self::EINVAL, "EINVAL"),
            (Self::EFBIG, "EFBIG"),
            (Self::ENOSPC, "ENOSPC"),
            (Self::EROFS, "EROFS"),
            (Self::ENOTEMPTY, "ENOTEMPTY"),
            (Self::EOPNOTSUPP, "EOPNOTSUPP"),
        ];
        known
            .iter()
            .find(|(e, _)| *e == self)
            .map_or_else(|| format!("E?{}", self.0), |(_, n)| (*n).to_string())
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The errno for a store error: the refusals POSIX names, and `EIO` for
/// everything else (a disk's failure, damage found, the group stopped).
impl From<&GroupError> for Errno {
    fn from(e: &GroupError) -> Self {
        match e {
            GroupError::NotFound(_) => Self::ENOENT,
            GroupError::Invalid(_) => Self::EINVAL,
            GroupError::Exists(_) => Self::EEXIST,
            GroupError::NoSpace(_) => Self::ENOSPC,
            GroupError::NotEmpty(_) => Self::ENOTEMPTY,
            GroupError::IsDirectory(_) => Self::EISDIR,
            GroupError::NotDirectory(_) => Self::ENOTDIR,
            GroupError::ReadOnly(_) => Self::EROFS,
            _ => Self::EIO,
        }
    }
}
