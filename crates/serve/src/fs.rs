//! The groups' name space as a FUSE file system (`docs/serve.md`, "The file
//! system"). Served read-only so far: lookup, getattr, readdir, open, read,
//! statfs, and the fsync family (nothing to make durable on a read-only
//! mount, and never `ENOSYS`).
//!
//! Inodes: 1 is the root, which lists the served groups. Below group slot
//! `s` (0-based), a directory with alias id `d` (0: the group's root) is
//! `(s + 1) << 40 | d`, and a file with number `n` is `(s + 1) << 40 |
//! FILE_BIT | n` — every name of a file (its aliases too) is one inode. The
//! FUSE generation of a file is its incarnation.

use std::ffi::OsStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_format::group::AliasKind;
use cairn_store::group::{DataHandle, FileInfo, GroupError, LiveGroup};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, Request,
};

/// How long the kernel may keep an answer (attributes, names) without
/// asking again. Short: the name space also changes through the CLI.
const TTL: Duration = Duration::from_secs(1);
/// The root inode.
const ROOT: u64 = 1;
/// Set in a file's inode (below it: the file number).
const FILE_BIT: u64 = 1 << 39;
/// Requests a data handle's engine holds.
const HANDLE_DEPTH: usize = 32;
/// The largest read the file system serves at once (the kernel asks for at
/// most its `max_read`, 128 KiB to 1 MiB).
const READ_BYTES_MAX: u64 = 4 << 20;

/// A group the file system serves.
pub struct Served {
    pub name: String,
    pub group: Arc<LiveGroup>,
}

struct Slot {
    name: String,
    group: Arc<LiveGroup>,
    /// Data handles not in use: a request takes one (or makes one) and
    /// gives it back. A handle is one thread's engine, never shared.
    handles: Mutex<Vec<DataHandle>>,
    sector_bytes: u64,
    copies: u64,
}

/// What an inode names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ino {
    Root,
    Dir { slot: usize, id: u32 },
    File { slot: usize, number: u32 },
}

fn decode(ino: u64) -> Option<Ino> {
    if ino == ROOT {
        return Some(Ino::Root);
    }
    let slot = (ino >> 40).checked_sub(1)? as usize;
    let low = ino & ((1 << 40) - 1);
    let id = u32::try_from(low & !FILE_BIT).ok()?;
    Some(if low & FILE_BIT != 0 {
        Ino::File { slot, number: id }
    } else {
        Ino::Dir { slot, id }
    })
}

fn encode(ino: Ino) -> u64 {
    match ino {
        Ino::Root => ROOT,
        Ino::Dir { slot, id } => ((slot as u64 + 1) << 40) | u64::from(id),
        Ino::File { slot, number } => ((slot as u64 + 1) << 40) | FILE_BIT | u64::from(number),
    }
}

/// The errno for a store error.
fn errno(e: &GroupError) -> Errno {
    match e {
        GroupError::NotFound(_) => Errno::ENOENT,
        GroupError::Invalid(_) => Errno::EINVAL,
        GroupError::Exists(_) => Errno::EEXIST,
        GroupError::NoSpace(_) => Errno::ENOSPC,
        _ => Errno::EIO,
    }
}

/// A time on disk as the kernel is told it (one past what it can hold:
/// the epoch; disk bytes never panic).
fn time(unix_seconds: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::from_secs(unix_seconds))
        .unwrap_or(UNIX_EPOCH)
}

/// The served groups as one file system.
pub struct GroupFs {
    slots: Vec<Slot>,
    /// uid and gid the files are shown with (the service's).
    owner: (u32, u32),
    started: SystemTime,
}

impl GroupFs {
    pub fn new(groups: Vec<Served>) -> Result<Self, GroupError> {
        let mut slots = Vec::new();
        for g in groups {
            let (sector_bytes, copies) = g.group.meta(|m| {
                (
                    u64::from(m.sector_bytes()),
                    u64::from(m.redundancy().copies()),
                )
            })?;
            slots.push(Slot {
                name: g.name,
                group: g.group,
                handles: Mutex::new(Vec::new()),
                sector_bytes,
                copies,
            });
        }
        // SAFETY: getuid and getgid cannot fail and touch no memory.
        let owner = unsafe { (libc::getuid(), libc::getgid()) };
        Ok(Self {
            slots,
            owner,
            started: SystemTime::now(),
        })
    }

    fn slot(&self, slot: usize) -> Result<&Slot, Errno> {
        self.slots.get(slot).ok_or(Errno::ENOENT)
    }

    fn dir_attr(&self, ino: u64, created: SystemTime) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size: 0,
            blocks: 0,
            atime: created,
            mtime: created,
            ctime: created,
            crtime: created,
            kind: FileType::Directory,
            perm: 0o755,
            nlink: 2,
            uid: self.owner.0,
            gid: self.owner.1,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn file_attr(&self, slot: usize, info: &FileInfo) -> FileAttr {
        let sector = self.slots.get(slot).map_or(4096, |s| s.sector_bytes) as u32;
        FileAttr {
            ino: INodeNo(encode(Ino::File {
                slot,
                number: info.number,
            })),
            size: info.size_bytes,
            blocks: info.allocated_bytes / 512,
            atime: time(info.modified_unix_seconds),
            mtime: time(info.modified_unix_seconds),
            ctime: time(info.modified_unix_seconds),
            crtime: time(info.created_unix_seconds),
            kind: FileType::RegularFile,
            perm: 0o644,
            nlink: 1,
            uid: self.owner.0,
            gid: self.owner.1,
            rdev: 0,
            blksize: sector.max(4096),
            flags: 0,
        }
    }

    /// The attributes of an inode, and its generation.
    fn attr(&self, ino: Ino) -> Result<(FileAttr, u64), Errno> {
        match ino {
            Ino::Root => Ok((self.dir_attr(ROOT, self.started), 0)),
            Ino::Dir { slot, id } => {
                let s = self.slot(slot)?;
                let created = if id == 0 {
                    self.started
                } else {
                    let node = s
                        .group
                        .meta(|g| g.node(id))
                        .map_err(|e| errno(&e))?
                        .filter(|n| n.kind == AliasKind::Directory)
                        .ok_or(Errno::ENOENT)?;
                    time(node.created_unix_seconds)
                };
                Ok((self.dir_attr(encode(ino), created), 0))
            }
            Ino::File { slot, number } => {
                let info = self
                    .slot(slot)?
                    .group
                    .meta(|g| g.file_info(number))
                    .map_err(|e| errno(&e))?
                    .map_err(|e| errno(&e))?;
                Ok((self.file_attr(slot, &info), u64::from(info.incarnation)))
            }
        }
    }

    /// Read `size` bytes at `offset` of a file: whole sectors through a
    /// data handle, the bytes asked for in the reply; short at the end.
    fn read_file(
        &self,
        slot: usize,
        number: u32,
        offset: u64,
        size: u64,
    ) -> Result<Vec<u8>, Errno> {
        let s = self.slot(slot)?;
        let snap = s.group.plane().file(number).ok_or(Errno::ENOENT)?;
        let end = offset
            .saturating_add(size.min(READ_BYTES_MAX))
            .min(snap.size_bytes);
        if offset >= end {
            return Ok(Vec::new());
        }
        let start = offset - offset % s.sector_bytes;
        let stop = end.div_ceil(s.sector_bytes) * s.sector_bytes;
        let mut buf = vec![0u8; (stop - start) as usize];
        // Not under the pool's lock: making a handle takes `meta`.
        let spare = s
            .handles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut handle = match spare {
            Some(h) => h,
            None => s.group.handle(HANDLE_DEPTH).map_err(|e| errno(&e))?,
        };
        let result = handle.read(number, start, &mut buf);
        s.handles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle);
        if let Err(e) = result {
            tracing::warn!(group = %s.name, file = number, offset, size, error = %e, "read failed");
            return Err(errno(&e));
        }
        let from = (offset - start) as usize;
        buf.truncate((end - start) as usize);
        buf.drain(..from);
        Ok(buf)
    }
}

impl Filesystem for GroupFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(name) = name.to_str() else {
            return reply.error(Errno::ENOENT);
        };
        let found = match decode(parent.0) {
            Some(Ino::Root) => self
                .slots
                .iter()
                .position(|s| s.name.eq_ignore_ascii_case(name))
                .map(|slot| Ino::Dir { slot, id: 0 })
                .ok_or(Errno::ENOENT),
            Some(Ino::Dir { slot, id }) => self.slot(slot).and_then(|s| {
                let node = s
                    .group
                    .meta(|g| g.child_node(id, name))
                    .map_err(|e| errno(&e))?
                    // A name the group refuses names nothing here.
                    .map_err(|_| Errno::ENOENT)?
                    .ok_or(Errno::ENOENT)?;
                match (node.kind, node.file) {
                    (AliasKind::Directory, _) => Ok(Ino::Dir { slot, id: node.id }),
                    (_, Some(f)) => Ok(Ino::File {
                        slot,
                        number: f.number,
                    }),
                    // A lost file, or one being deleted.
                    (_, None) => Err(Errno::ENOENT),
                }
            }),
            _ => Err(Errno::ENOTDIR),
        };
        match found.and_then(|ino| self.attr(ino)) {
            Ok((attr, generation)) => reply.entry(&TTL, &attr, Generation(generation)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match decode(ino.0)
            .ok_or(Errno::ENOENT)
            .and_then(|i| self.attr(i))
        {
            Ok((attr, _)) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match decode(ino.0) {
            Some(Ino::File { slot, number }) => {
                if flags.acc_mode() != OpenAccMode::O_RDONLY {
                    return reply.error(Errno::EROFS);
                }
                if self
                    .slot(slot)
                    .map(|s| s.group.plane().file(number).is_none())
                    .unwrap_or(true)
                {
                    return reply.error(Errno::ENOENT);
                }
                // O_DIRECT: no page cache for this open.
                let direct = flags.0 & libc::O_DIRECT != 0;
                reply.opened(
                    FileHandle(0),
                    if direct {
                        FopenFlags::FOPEN_DIRECT_IO
                    } else {
                        FopenFlags::empty()
                    },
                );
            }
            Some(_) => reply.error(Errno::EISDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match decode(ino.0) {
            Some(Ino::File { slot, number }) => {
                match self.read_file(slot, number, offset, u64::from(size)) {
                    Ok(data) => reply.data(&data),
                    Err(e) => reply.error(e),
                }
            }
            Some(_) => reply.error(Errno::EISDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        // (inode, kind, name), "." and ".." first.
        let entries: Result<Vec<(u64, FileType, String)>, Errno> = match decode(ino.0) {
            Some(Ino::Root) => Ok([
                (ROOT, FileType::Directory, ".".to_string()),
                (ROOT, FileType::Directory, "..".to_string()),
            ]
            .into_iter()
            .chain(self.slots.iter().enumerate().map(|(slot, s)| {
                (
                    encode(Ino::Dir { slot, id: 0 }),
                    FileType::Directory,
                    s.name.clone(),
                )
            }))
            .collect()),
            Some(Ino::Dir { slot, id }) => self.slot(slot).and_then(|s| {
                let (children, node) = s
                    .group
                    .meta(|g| (g.children(id), g.node(id)))
                    .map_err(|e| errno(&e))?;
                // A directory that is gone lists nothing, not "." and "..".
                let parent = match (id, node) {
                    (0, _) => 0,
                    (_, Some(n)) if n.kind == AliasKind::Directory => n.parent,
                    _ => return Err(Errno::ENOENT),
                };
                let up = if id == 0 {
                    ROOT
                } else {
                    encode(Ino::Dir { slot, id: parent })
                };
                Ok([
                    (
                        encode(Ino::Dir { slot, id }),
                        FileType::Directory,
                        ".".into(),
                    ),
                    (up, FileType::Directory, "..".into()),
                ]
                .into_iter()
                .chain(children.into_iter().filter_map(|n| match (n.kind, n.file) {
                    (AliasKind::Directory, _) => Some((
                        encode(Ino::Dir { slot, id: n.id }),
                        FileType::Directory,
                        n.name,
                    )),
                    (_, Some(f)) => Some((
                        encode(Ino::File {
                            slot,
                            number: f.number,
                        }),
                        FileType::RegularFile,
                        n.name,
                    )),
                    (_, None) => None,
                }))
                .collect())
            }),
            _ => Err(Errno::ENOTDIR),
        };
        match entries {
            Ok(entries) => {
                for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
                    if reply.add(INodeNo(*ino), i as u64 + 1, *kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        // In 4 KiB blocks: the group's size and free space after mirroring
        // (what files can still take), as `group space` says; for the root,
        // every served group's.
        let slots: Vec<&Slot> = match decode(ino.0) {
            Some(Ino::Dir { slot, .. }) | Some(Ino::File { slot, .. }) => {
                self.slots.get(slot).into_iter().collect()
            }
            _ => self.slots.iter().collect(),
        };
        let (mut blocks, mut free) = (0u64, 0u64);
        for s in slots {
            match s.group.meta(|g| g.space()) {
                Ok(space) => {
                    blocks += (space.total_mb << 8) / s.copies.max(1);
                    free += (space.usable_file_mb.max(0) as u64) << 8;
                }
                Err(e) => return reply.error(errno(&e)),
            }
        }
        reply.statfs(blocks, free, free, 0, 0, 4096, 48, 4096);
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Read-only: nothing written to make durable. Never ENOSYS (the
        // kernel would stop asking, and take every later fsync as done).
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inodes_round_trip_and_do_not_collide() {
        for ino in [
            Ino::Root,
            Ino::Dir { slot: 0, id: 0 },
            Ino::Dir {
                slot: 3,
                id: u32::MAX,
            },
            Ino::File {
                slot: 0,
                number: 256,
            },
            Ino::File {
                slot: 7,
                number: u32::MAX,
            },
        ] {
            assert_eq!(decode(encode(ino)), Some(ino));
        }
        assert_ne!(
            encode(Ino::Dir { slot: 0, id: 256 }),
            encode(Ino::File {
                slot: 0,
                number: 256
            })
        );
        assert_eq!(decode(0), None, "inode 0 is nobody's");
    }
}
