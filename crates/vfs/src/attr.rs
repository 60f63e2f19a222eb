//! What `stat` says of an inode, and the times it says it in.
//!
//! A file's attributes are its entry's (mode, owner, times, byte size),
//! with the modification time of a write not yet stored shown in its place
//! (`crate::mtimes`); a directory's are its name record's mode and owner,
//! and its creation time for every time. nlink is 1 for a file (its
//! aliases are not counted) and 2 for a directory. atime is not kept: it
//! shows the modification time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_format::group::DirAttrs;
use cairn_store::group::FileInfo;

/// What an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Directory,
    File,
}

/// An inode's attributes, as `stat` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    /// Bytes.
    pub size: u64,
    /// Allocated, in 512-byte units (every copy counted).
    pub blocks: u64,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    pub crtime: SystemTime,
    pub kind: Kind,
    /// The permission bits (and setuid, setgid, sticky).
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// The I/O size `stat` advises, bytes.
    pub blksize: u32,
}

impl Attr {
    /// A directory's: `created` for every time.
    pub(crate) fn dir(ino: u64, created: SystemTime, attrs: DirAttrs) -> Self {
        Self {
            ino,
            size: 0,
            blocks: 0,
            atime: created,
            mtime: created,
            ctime: created,
            crtime: created,
            kind: Kind::Directory,
            perm: attrs.mode,
            nlink: 2,
            uid: attrs.uid,
            gid: attrs.gid,
            blksize: 4096,
        }
    }

    /// A file's, `mtime_ns` its modification time as shown (a write's not
    /// yet stored, if later than the entry's).
    pub(crate) fn file(ino: u64, info: &FileInfo, sector_bytes: u64, mtime_ns: i64) -> Self {
        let a = info.attrs;
        Self {
            ino,
            size: a.byte_size,
            blocks: info.allocated_bytes / 512,
            atime: time_ns(mtime_ns),
            mtime: time_ns(mtime_ns),
            ctime: time_ns(a.ctime_ns.max(mtime_ns)),
            crtime: time(info.created_unix_seconds),
            kind: Kind::File,
            perm: (a.mode & 0o7777) as u16,
            nlink: 1,
            uid: a.uid,
            gid: a.gid,
            blksize: (sector_bytes as u32).max(4096),
        }
    }
}

/// A time on disk as the kernel is told it (one it cannot hold: the epoch;
/// disk bytes never panic).
pub(crate) fn time(unix_seconds: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::from_secs(unix_seconds))
        .unwrap_or(UNIX_EPOCH)
}

pub(crate) fn time_ns(ns: i64) -> SystemTime {
    let d = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 {
        UNIX_EPOCH.checked_add(d)
    } else {
        UNIX_EPOCH.checked_sub(d)
    }
    .unwrap_or(UNIX_EPOCH)
}

/// Nanoseconds since the epoch (negative before it), saturated.
pub(crate) fn ns_of(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}
