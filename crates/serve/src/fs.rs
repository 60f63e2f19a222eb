//! The groups' name space as a FUSE file system (`docs/serve.md`, "The file
//! system"): lookup, getattr, setattr (size, mode, owner, times), readdir,
//! open, read and write at any byte offset, create, mknod (regular files),
//! mkdir, unlink, rmdir, rename, fallocate (growing, punching holes,
//! zeroing ranges), statfs, and the fsync
//! family — durable on every copy's disk before the reply, never `ENOSYS`.
//!
//! Locks: a request takes a data handle from its group's pool, then the
//! data path's latches, then `meta` (the live core's order). `known`,
//! `written` and `mtime_stored` are leaves: taken inside `meta` (unlink asks whether the
//! kernel still knows a file), never held while taking anything else.
//!
//! A file's data outlive its last name while the kernel knows its inode
//! (it counts lookups; `forget` gives them back): an open file, or one a
//! path walk has just found, is never pulled away underneath its reader —
//! a rename over a name a reader is opening gives the reader the old file
//! whole. The file loses its names at once and goes on the last `forget`
//! (or when the file system stops; after a crash, at the next mount).
//!
//! Inodes: 1 is the root, which lists the served groups. Below group slot
//! `s` (0-based), a directory with alias id `d` (0: the group's root) is
//! `(s + 1) << 40 | d`, and a file with number `n` is `(s + 1) << 40 |
//! FILE_BIT | n` — every name of a file (its aliases too) is one inode. The
//! FUSE generation of a file is its incarnation.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_format::group::{AliasKind, DirAttrs, FileAttrs};
use cairn_io::poison::Recover;
use cairn_store::group::{
    AttrChange, CreateOptions, DataHandle, FileInfo, GroupError, LiveGroup, Node, Retired,
};
use fuser::{
    BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    TimeOrNow, WriteFlags,
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
/// readdir cookies: "." is 1, ".." 2, and a name with alias id `d` (or, in
/// the root, the group in slot `d - 1`) is `d + 2`, so a listing resumed
/// after names came and went neither skips nor repeats one.
const COOKIE_BASE: u64 = 2;

/// A group the file system serves.
pub struct Served {
    pub name: String,
    pub group: Arc<LiveGroup>,
}

struct Slot {
    name: String,
    group: Arc<LiveGroup>,
    /// What the file system served on this group (atomics).
    stats: Arc<crate::metrics::IoStats>,
    /// Data handles not in use: a request takes one (or makes one) and
    /// gives it back. A handle is one thread's engine, never shared.
    /// (Shared with the group's devices-left hook, which empties it.)
    handles: Arc<Mutex<Vec<DataHandle>>>,
    sector_bytes: u64,
    copies: u64,
    au_bytes: u64,
}

impl Slot {
    /// Run `f` with a data handle from the pool (made if the pool is empty;
    /// not under the pool's lock, as making one takes `meta`).
    fn with_handle<R>(
        &self,
        f: impl FnOnce(&mut DataHandle) -> Result<R, GroupError>,
    ) -> Result<R, GroupError> {
        let spare = self.handles.lock_or_recover().pop();
        let mut handle = match spare {
            Some(h) => h,
            None => self.group.handle(HANDLE_DEPTH)?,
        };
        let result = f(&mut handle);
        // Idle handles made before the disks changed (one joined, or left:
        // its device is still open in their engines) are let go of here —
        // this one too, if it is — dropped outside the pool's lock. (A
        // completed drop empties the pool at once: `Slot`'s hook.)
        // The view's epoch read once, outside the pool's lock.
        let epoch = self.group.plane().disks().epoch;
        let stale: Vec<DataHandle> = {
            let mut pool = self.handles.lock_or_recover();
            let mut stale: Vec<DataHandle> = pool
                .extract_if(.., |h| h.devices_epoch() != epoch)
                .collect();
            if handle.devices_epoch() != epoch {
                stale.push(handle);
            } else {
                pool.push(handle);
            }
            stale
        };
        drop(stale);
        result
    }
}

/// An inode the kernel knows (a file's or a directory's).
#[derive(Debug, Clone, Copy, Default)]
struct Known {
    /// Lookups the kernel has not given back (`forget`).
    lookups: u64,
    /// Its last name went while the kernel knew it: what its last
    /// `forget` settles.
    gone: Option<Gone>,
}

#[derive(Debug, Clone, Copy)]
enum Gone {
    /// A file unlinked (or replaced): this incarnation is dropped.
    File { incarnation: u32 },
    /// A directory removed: its id, held from reuse, is let go.
    Dir,
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
        GroupError::NotEmpty(_) => Errno::ENOTEMPTY,
        GroupError::IsDirectory(_) => Errno::EISDIR,
        GroupError::NotDirectory(_) => Errno::ENOTDIR,
        GroupError::ReadOnly(_) => Errno::EROFS,
        _ => Errno::EIO,
    }
}

/// A time on disk as the kernel is told it (one it cannot hold: the epoch;
/// disk bytes never panic).
fn time(unix_seconds: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::from_secs(unix_seconds))
        .unwrap_or(UNIX_EPOCH)
}

fn time_ns(ns: i64) -> SystemTime {
    let d = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 {
        UNIX_EPOCH.checked_add(d)
    } else {
        UNIX_EPOCH.checked_sub(d)
    }
    .unwrap_or(UNIX_EPOCH)
}

fn ns_of(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

/// An empty reply: done, or the errno.
fn answer(reply: ReplyEmpty, done: Result<(), Errno>) {
    match done {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn now_ns() -> i64 {
    ns_of(SystemTime::now())
}

/// How an open is served. O_DIRECT: no page cache, and writes in parallel
/// (the kernel otherwise takes the inode's lock for each one): a
/// database's writers to distinct blocks of one file go at once, and a
/// sector two of them share is kept whole by the extent's
/// read-modify-write latch (`DataHandle::write_bytes`).
fn open_flags(direct: bool) -> FopenFlags {
    if direct {
        FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
    } else {
        FopenFlags::empty()
    }
}

/// The served groups as one file system.
pub struct GroupFs {
    slots: Vec<Slot>,
    started: SystemTime,
    /// Inodes the kernel knows (files and directories), by inode number.
    /// A leaf. Shared with [`Names`] (the control socket's removals).
    known: Arc<Mutex<HashMap<u64, Known>>>,
    /// When files were last written and their entries not yet told (ns):
    /// a write does not commit metadata; `flush`, `fsync` and `release`
    /// store the time. A leaf. Shared with [`Names`].
    written: Arc<Mutex<HashMap<(usize, u32), i64>>>,
    /// When an `fsync` last stored a file's modification time: the next
    /// within [`MTIME_EVERY`] leaves it pending (for a later `fsync`, the
    /// close, or `getattr`, which shows it). A leaf.
    mtime_stored: Mutex<HashMap<(usize, u32), std::time::Instant>>,
    notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
}

/// How often an `fsync` makes a file's modification time durable: a
/// metadata commit (a journal write and the barrier's flushes) that a loop
/// device's every FLUSH would otherwise pay (the loop driver asks for a
/// full `fsync`, not `fdatasync`). The data are durable on every `fsync`;
/// after a crash the time may be up to this much older than the last
/// write, as with `lazytime`.
const MTIME_EVERY: Duration = Duration::from_secs(1);

/// A served group's name space as the control socket changes it: a name
/// removed by `cairn rm` while the kernel knows its file keeps the file's
/// data for its readers, as an unlink through the mount does.
#[derive(Clone)]
pub struct Names {
    slot: usize,
    group: Arc<LiveGroup>,
    known: Arc<Mutex<HashMap<u64, Known>>>,
    written: Arc<Mutex<HashMap<(usize, u32), i64>>>,
    /// How the kernel is told a name went (its dentry cache would find the
    /// old file for up to [`TTL`]): set once the session exists.
    notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
}

impl Names {
    /// Remove a name, as `cairn rm` does (a file's own name takes the file
    /// and its aliases; a directory must be empty), keeping a file the
    /// kernel still knows until its last `forget`. `check` runs first, in
    /// the same metadata step (the asker's permission to remove it).
    pub fn remove(
        &self,
        path: &cairn_store::names::GroupPath,
        check: &dyn Fn(&cairn_store::group::Group<'static>) -> Result<(), GroupError>,
    ) -> Result<(), GroupError> {
        let slot = self.slot;
        let (parent, retired) = self.group.meta(|g| {
            check(g)?;
            let parent = path.parent().map(|p| g.directory_of(&p)).transpose()?;
            g.remove_path(
                path,
                &|n, i| {
                    gone_if_known(
                        &self.known,
                        Ino::File { slot, number: n },
                        Gone::File { incarnation: i },
                    )
                },
                &|id| gone_if_known(&self.known, Ino::Dir { slot, id }, Gone::Dir),
            )
            .map(|r| (parent, r))
        })??;
        if let Retired::Deleted(number) = retired {
            self.written.lock_or_recover().remove(&(slot, number));
        }
        // Outside `meta`: the kernel may wait for a request in that
        // directory, which may need `meta`.
        if let (Some(n), Some(id), Some(name)) = (self.notifier.get(), parent, path.file_name()) {
            let dir = encode(Ino::Dir { slot, id });
            if let Err(e) = n.inval_entry(INodeNo(dir), OsStr::new(name.as_str())) {
                if e.raw_os_error() != Some(libc::ENOENT) {
                    tracing::warn!(error = %e, "could not tell the kernel a name went");
                }
            }
        }
        Ok(())
    }
}

/// For unlink, rmdir and rename, inside `meta`: whether the kernel knows
/// the inode whose last name goes, and if so, note what its last `forget`
/// settles.
fn gone_if_known(known: &Mutex<HashMap<u64, Known>>, ino: Ino, gone: Gone) -> bool {
    match known.lock_or_recover().get_mut(&encode(ino)) {
        Some(k) if k.lookups > 0 => {
            k.gone = Some(gone);
            true
        }
        _ => false,
    }
}

/// A lookup counted for an entry reply not yet made. The count is taken
/// under `meta`, in the step that found or made the inode (so no unlink
/// comes between), but the reply may still end in an error — the commit
/// that step waits for can fail — and the kernel returns only what it was
/// told of. So the count is given back, as a `forget` would, unless
/// [`Counted::replied`] says the entry reply carries it.
///
/// Whether a reply reaches the kernel is not ours to see (fuser 0.18
/// reports a failed send only in its log). On Linux it does whenever the
/// connection lives: the kernel waits out a request it has handed to us,
/// interrupted or not (`request_wait_answer`: after an interrupt, and for
/// a fatal signal, it waits uninterruptibly for the reply of a request
/// already read), so the reply finds it; a reply is refused only once the
/// connection is aborted, and then the file system stops and every count
/// goes with it (files that lost their names are dropped then, or at the
/// next mount after a crash).
struct Counted<'a> {
    fs: &'a GroupFs,
    ino: Option<u64>,
}

impl<'a> Counted<'a> {
    fn none(fs: &'a GroupFs) -> Self {
        Self { fs, ino: None }
    }

    /// Count a lookup of `ino` (under `meta`): one the kernel will give
    /// back once the entry reply is made.
    fn count(&mut self, ino: Ino) {
        self.fs.looked_up(ino);
        self.ino = Some(encode(ino));
    }

    /// The entry reply carries the count: the kernel's `forget` returns it.
    fn replied(mut self) {
        self.ino = None;
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if let Some(ino) = self.ino.take() {
            // Never under `meta`: the guard lives outside the step.
            self.fs.forgot(ino, 1);
        }
    }
}

impl GroupFs {
    pub fn new(groups: Vec<Served>) -> Result<Self, GroupError> {
        let mut slots = Vec::new();
        for g in groups {
            let (sector_bytes, copies, au_bytes) = g.group.meta(|m| {
                (
                    u64::from(m.sector_bytes()),
                    u64::from(m.redundancy().copies()),
                    m.au_bytes(),
                )
            })?;
            // When a dropped disk's device is let go of, the idle handles
            // (which hold it in their engines) go too.
            let handles: Arc<Mutex<Vec<DataHandle>>> = Arc::default();
            let pool = Arc::downgrade(&handles);
            g.group.on_devices_left(Box::new(move || {
                if let Some(pool) = pool.upgrade() {
                    let idle = std::mem::take(&mut *pool.lock_or_recover());
                    drop(idle);
                }
            }));
            slots.push(Slot {
                name: g.name,
                group: g.group,
                stats: Arc::default(),
                handles,
                sector_bytes,
                copies,
                au_bytes,
            });
        }
        Ok(Self {
            slots,
            started: SystemTime::now(),
            known: Arc::new(Mutex::new(HashMap::new())),
            written: Arc::new(Mutex::new(HashMap::new())),
            mtime_stored: Mutex::new(HashMap::new()),
            notifier: Arc::new(std::sync::OnceLock::new()),
        })
    }

    /// How [`Names`] tell the kernel a name went: the session's notifier.
    pub fn notifier_slot(&self) -> Arc<std::sync::OnceLock<fuser::Notifier>> {
        self.notifier.clone()
    }

    /// The counters of the group in `slot`.
    pub fn stats(&self, slot: usize) -> Option<Arc<crate::metrics::IoStats>> {
        self.slots.get(slot).map(|s| s.stats.clone())
    }

    /// The name space of the group in `slot` (in the order given to
    /// [`GroupFs::new`]), for the control socket.
    pub fn names(&self, slot: usize) -> Option<Names> {
        let s = self.slots.get(slot)?;
        Some(Names {
            slot,
            group: s.group.clone(),
            known: self.known.clone(),
            written: self.written.clone(),
            notifier: self.notifier.clone(),
        })
    }

    fn slot(&self, slot: usize) -> Result<&Slot, Errno> {
        self.slots.get(slot).ok_or(Errno::ENOENT)
    }

    /// A metadata operation on a group, its error as an errno.
    fn meta<R>(
        &self,
        slot: usize,
        f: impl FnOnce(&mut cairn_store::group::Group<'static>) -> Result<R, GroupError>,
    ) -> Result<R, Errno> {
        let s = self.slot(slot)?;
        match s.group.meta(f) {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) | Err(e) => {
                if !matches!(
                    e,
                    GroupError::NotFound(_)
                        | GroupError::Exists(_)
                        | GroupError::NotEmpty(_)
                        | GroupError::IsDirectory(_)
                        | GroupError::NotDirectory(_)
                        | GroupError::Invalid(_)
                ) {
                    tracing::warn!(group = %s.name, error = %e, "metadata operation failed");
                }
                Err(errno(&e))
            }
        }
    }

    fn dir_attr(&self, ino: u64, created: SystemTime, attrs: DirAttrs) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size: 0,
            blocks: 0,
            atime: created,
            mtime: created,
            ctime: created,
            crtime: created,
            kind: FileType::Directory,
            perm: attrs.mode,
            nlink: 2,
            uid: attrs.uid,
            gid: attrs.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn file_attr(&self, slot: usize, info: &FileInfo) -> FileAttr {
        let sector = self.slots.get(slot).map_or(4096, |s| s.sector_bytes) as u32;
        let a = info.attrs;
        let mtime = self
            .written
            .lock_or_recover()
            .get(&(slot, info.number))
            .map_or(a.mtime_ns, |w| (*w).max(a.mtime_ns));
        FileAttr {
            ino: INodeNo(encode(Ino::File {
                slot,
                number: info.number,
            })),
            size: a.byte_size,
            blocks: info.allocated_bytes / 512,
            atime: time_ns(mtime),
            mtime: time_ns(mtime),
            ctime: time_ns(a.ctime_ns.max(mtime)),
            crtime: time(info.created_unix_seconds),
            kind: FileType::RegularFile,
            perm: (a.mode & 0o7777) as u16,
            nlink: 1,
            uid: a.uid,
            gid: a.gid,
            rdev: 0,
            blksize: sector.max(4096),
            flags: 0,
        }
    }

    /// The root's and each group root's attributes: the service's, 0755
    /// (a group's root has no record to keep others in).
    fn top_attr(&self, ino: u64) -> FileAttr {
        self.dir_attr(ino, self.started, cairn_store::group::group_root_attrs())
    }

    /// The attributes of an inode, and its generation.
    fn attr(&self, ino: Ino) -> Result<(FileAttr, u64), Errno> {
        match ino {
            Ino::Root | Ino::Dir { id: 0, .. } => {
                if let Ino::Dir { slot, .. } = ino {
                    self.slot(slot)?;
                }
                Ok((self.top_attr(encode(ino)), 0))
            }
            Ino::Dir { slot, id } => {
                let node = self
                    .meta(slot, |g| Ok(g.node(id)))?
                    .filter(|n| n.kind == AliasKind::Directory)
                    .ok_or(Errno::ENOENT)?;
                Ok((self.node_attr(slot, &node), 0))
            }
            Ino::File { slot, number } => {
                let info = self.meta(slot, |g| g.file_info(number))?;
                Ok((self.file_attr(slot, &info), u64::from(info.incarnation)))
            }
        }
    }

    fn node_attr(&self, slot: usize, node: &Node) -> FileAttr {
        self.dir_attr(
            encode(Ino::Dir { slot, id: node.id }),
            time(node.created_unix_seconds),
            node.dir_attrs,
        )
    }

    /// The directory an inode names, for a change in it: a group's
    /// directory (the root lists groups, which the file system does not
    /// make or remove).
    fn dir_of(&self, parent: INodeNo) -> Result<(usize, u32), Errno> {
        match decode(parent.0) {
            Some(Ino::Dir { slot, id }) => {
                self.slot(slot)?;
                Ok((slot, id))
            }
            Some(Ino::Root) => Err(Errno::EPERM),
            Some(Ino::File { .. }) => Err(Errno::ENOTDIR),
            None => Err(Errno::ENOENT),
        }
    }

    fn file_of(&self, ino: INodeNo) -> Result<(usize, u32), Errno> {
        match decode(ino.0) {
            Some(Ino::File { slot, number }) => {
                self.slot(slot)?;
                Ok((slot, number))
            }
            Some(_) => Err(Errno::EISDIR),
            None => Err(Errno::ENOENT),
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
            .min(snap.byte_size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let start = offset - offset % s.sector_bytes;
        let stop = end.div_ceil(s.sector_bytes) * s.sector_bytes;
        let mut buf = vec![0u8; (stop - start) as usize];
        if let Err(e) = s.with_handle(|h| h.read(number, start, &mut buf)) {
            tracing::warn!(group = %s.name, file = number, offset, size, error = %e, "read failed");
            return Err(errno(&e));
        }
        let from = (offset - start) as usize;
        buf.truncate((end - start) as usize);
        buf.drain(..from);
        Ok(buf)
    }

    /// Write `data` at `offset`, growing the file first if it ends past
    /// the end (a metadata operation: the new size is durable before the
    /// reply; what lies between the old end and `offset` reads as zeros).
    fn write_file(
        &self,
        slot: usize,
        number: u32,
        offset: u64,
        data: &[u8],
        sync: bool,
    ) -> Result<(), Errno> {
        let s = self.slot(slot)?;
        let snap = s.group.plane().file(number).ok_or(Errno::ENOENT)?;
        let end = offset.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        if end > snap.byte_size {
            self.meta(slot, |g| g.set_byte_size(number, end, now_ns(), true))?;
        }
        // O_DSYNC / O_SYNC: durable before the reply (for a direct-I/O open
        // the kernel does not follow the write with an fsync; it tells us).
        let written = s.with_handle(|h| {
            h.write_bytes(number, offset, data)?;
            if sync {
                h.sync()?;
            }
            Ok(())
        });
        if let Err(e) = written {
            tracing::warn!(group = %s.name, file = number, offset, len = data.len(), error = %e, "write failed");
            return Err(errno(&e));
        }
        self.written
            .lock_or_recover()
            .insert((slot, number), now_ns());
        Ok(())
    }

    /// Cut or grow a file to `size` bytes. Cutting inside a sector zeroes
    /// the rest of that sector first, so that a later grow reads zeros
    /// there.
    fn truncate(&self, slot: usize, number: u32, size: u64) -> Result<(), Errno> {
        let s = self.slot(slot)?;
        let snap = s.group.plane().file(number).ok_or(Errno::ENOENT)?;
        if size < snap.byte_size && !size.is_multiple_of(s.sector_bytes) {
            let tail_end = size.next_multiple_of(s.sector_bytes).min(snap.byte_size);
            let zeros = vec![0u8; (tail_end - size) as usize];
            // Durable before the smaller size is: a crash between must not
            // leave old bytes past the end for a later grow to show.
            s.with_handle(|h| {
                h.write_bytes(number, size, &zeros)?;
                h.sync()
            })
            .map_err(|e| errno(&e))?;
        }
        self.meta(slot, |g| g.set_byte_size(number, size, now_ns(), false))?;
        self.written.lock_or_recover().remove(&(slot, number));
        Ok(())
    }

    /// Store the time of the last write, if one is not stored yet.
    fn store_mtime(&self, slot: usize, number: u32) -> Result<(), Errno> {
        let Some(when) = self.written.lock_or_recover().remove(&(slot, number)) else {
            return Ok(());
        };
        let change = AttrChange {
            mtime_ns: Some(when),
            ..AttrChange::default()
        };
        match self.meta(slot, |g| g.set_file_attrs(number, change, when)) {
            // Deleted since: nothing to keep.
            Ok(_) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The kernel was told of an inode (an entry reply): one more lookup
    /// it will give back.
    fn looked_up(&self, ino: Ino) {
        self.known
            .lock_or_recover()
            .entry(encode(ino))
            .or_default()
            .lookups += 1;
    }

    fn unname_if_known(&self, slot: usize, number: u32, incarnation: u32) -> bool {
        gone_if_known(
            &self.known,
            Ino::File { slot, number },
            Gone::File { incarnation },
        )
    }

    fn hold_if_known_dir(&self, slot: usize, id: u32) -> bool {
        gone_if_known(&self.known, Ino::Dir { slot, id }, Gone::Dir)
    }

    /// The kernel gave back `n` lookups of an inode: on the last, a file
    /// that lost its names is dropped, a removed directory's id let go.
    fn forgot(&self, ino: u64, n: u64) {
        let gone = {
            let mut known = self.known.lock_or_recover();
            match known.get_mut(&ino) {
                Some(k) if k.lookups > n => {
                    k.lookups -= n;
                    None
                }
                Some(_) => known.remove(&ino).and_then(|k| k.gone),
                None => None,
            }
        };
        if let (Some(gone), Some(i)) = (gone, decode(ino)) {
            self.settle(i, gone);
        }
    }

    /// What a removed name's inode leaves once the kernel lets go of it.
    fn settle(&self, ino: Ino, gone: Gone) {
        match (ino, gone) {
            (Ino::File { slot, number }, Gone::File { incarnation }) => {
                self.drop_unnamed(slot, number, incarnation)
            }
            (Ino::Dir { slot, id }, Gone::Dir) => {
                let _ = self.meta(slot, |g| {
                    g.release_alias_id(id);
                    Ok(())
                });
            }
            _ => {}
        }
    }

    fn drop_unnamed(&self, slot: usize, number: u32, incarnation: u32) {
        self.written.lock_or_recover().remove(&(slot, number));
        match self.meta(slot, |g| g.drop_unnamed(number, incarnation)) {
            Ok(()) => tracing::debug!(
                file = number,
                ino = encode(Ino::File { slot, number }),
                "dropped a file unlinked while in use"
            ),
            // The next mount that writes drops it.
            Err(e) => tracing::warn!(file = number, error = ?e, "dropping an unlinked file failed"),
        }
    }

    fn retired(&self, slot: usize, retired: Retired) {
        if let Retired::Deleted(number) = retired {
            self.written.lock_or_recover().remove(&(slot, number));
        }
    }

    /// What `name` in directory `parent` is, for an entry reply: its
    /// attributes, generation, and the lookup counted for the reply (given
    /// back if the reply is not made). An error leaves no count.
    fn entry_of(&self, parent: u64, name: &str) -> Result<(FileAttr, u64, Counted<'_>), Errno> {
        let mut counted = Counted::none(self);
        let (attr, generation) = match decode(parent) {
            Some(Ino::Root) => self
                .slots
                .iter()
                .position(|s| s.name.eq_ignore_ascii_case(name))
                .ok_or(Errno::ENOENT)
                .and_then(|slot| self.attr(Ino::Dir { slot, id: 0 }))?,
            Some(Ino::Dir { slot, id }) => {
                // The name, its file and the lookup counted in one step
                // under `meta`: no unlink, and no reuse of the number, can
                // come between. The step's commit may still fail (the
                // group stopped): then `counted` gives the count back.
                let node = self
                    .meta(slot, |g| {
                        // A name the group refuses names nothing here.
                        let node = g.child_node(id, name).ok().flatten();
                        match node.as_ref().map(|n| (n.kind, n.file.as_ref())) {
                            Some((AliasKind::Directory, _)) => counted.count(Ino::Dir {
                                slot,
                                id: node.as_ref().map_or(0, |n| n.id),
                            }),
                            Some((_, Some(f))) => counted.count(Ino::File {
                                slot,
                                number: f.number,
                            }),
                            _ => {}
                        }
                        Ok(node)
                    })?
                    .ok_or(Errno::ENOENT)?;
                match (node.kind, &node.file) {
                    (AliasKind::Directory, _) => (self.node_attr(slot, &node), 0),
                    (_, Some(f)) => (self.file_attr(slot, f), u64::from(f.incarnation)),
                    // A lost file, or one being deleted.
                    (_, None) => return Err(Errno::ENOENT),
                }
            }
            _ => return Err(Errno::ENOTDIR),
        };
        Ok((attr, generation, counted))
    }

    /// An entry reply for a file already counted as looked up.
    fn entry(&self, slot: usize, info: &FileInfo, reply: ReplyEntry) {
        reply.entry(
            &TTL,
            &self.file_attr(slot, info),
            Generation(u64::from(info.incarnation)),
        );
    }

    fn new_file(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        counted: &mut Counted<'_>,
    ) -> Result<(usize, FileInfo), Errno> {
        let (slot, dir) = self.dir_of(parent)?;
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let now = now_ns();
        let attrs = FileAttrs {
            mode: mode & !umask & 0o7777,
            uid: req.uid(),
            gid: req.gid(),
            mtime_ns: now,
            ctime_ns: now,
            byte_size: 0,
        };
        // Counted as looked up under `meta`, with the create: the reply
        // hands the kernel the inode.
        let info = self.meta(slot, |g| {
            let info = g.create_in(dir, name, attrs, &CreateOptions::default())?;
            counted.count(Ino::File {
                slot,
                number: info.number,
            });
            Ok(info)
        })?;
        Ok((slot, info))
    }
}

impl Filesystem for GroupFs {
    /// What the connection may do beyond fuser's defaults (asynchronous
    /// reads, big writes).
    ///
    /// - `FUSE_ASYNC_DIO`: an `O_DIRECT` read or write submitted
    ///   asynchronously (io_uring, libaio) is sent to the service without the
    ///   submitter waiting for it, so a queue of them is in flight at once.
    ///   Without it the kernel serves each one synchronously in the caller
    ///   (for io_uring: in an io-wq worker, writes to one file serialised on
    ///   its inode), and QD32 runs as QD1.
    /// - `FUSE_PARALLEL_DIROPS`: lookups and readdirs in one directory are not
    ///   serialised on its inode lock; the name table is under `meta` anyway.
    /// - Background requests (asynchronous I/O, readahead): up to
    ///   `MAX_BACKGROUND` in flight before the kernel queues, beyond the
    ///   kernel's default of 12, which would cap a QD32 submitter.
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        const MAX_BACKGROUND: u16 = 128;
        for flag in [InitFlags::FUSE_ASYNC_DIO, InitFlags::FUSE_PARALLEL_DIROPS] {
            // A kernel without one works as before, only slower.
            if config.add_capabilities(flag).is_err() {
                tracing::info!(?flag, "the kernel does not offer this FUSE capability");
            }
        }
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(MAX_BACKGROUND * 3 / 4);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(name) = name.to_str() else {
            return reply.error(Errno::ENOENT);
        };
        match self.entry_of(parent.0, name) {
            Ok((attr, generation, counted)) => {
                counted.replied();
                reply.entry(&TTL, &attr, Generation(generation))
            }
            Err(e) => reply.error(e),
        }
    }

    /// (fuser's `batch_forget` calls this for each.)
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.forgot(ino.0, nlookup);
    }

    /// The file system stops: files that lost their names while the
    /// kernel knew them go now (the kernel need not forget everything at
    /// unmount).
    fn destroy(&mut self) {
        let gone: Vec<(u64, Gone)> = self
            .known
            .lock_or_recover()
            .drain()
            .filter_map(|(ino, k)| Some((ino, k.gone?)))
            .collect();
        for (ino, gone) in gone {
            if let Some(i) = decode(ino) {
                self.settle(i, gone);
            }
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

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let change = AttrChange {
            mode,
            uid,
            gid,
            mtime_ns: mtime.map(|t| match t {
                TimeOrNow::SpecificTime(t) => ns_of(t),
                TimeOrNow::Now => now_ns(),
            }),
        };
        let changes = mode.is_some() || uid.is_some() || gid.is_some() || mtime.is_some();
        let result = match decode(ino.0) {
            Some(Ino::File { slot, number }) => (|| {
                if let Some(size) = size {
                    self.truncate(slot, number, size)?;
                }
                if changes {
                    if mtime.is_some() {
                        // An explicit time wins over the last write's.
                        self.written.lock_or_recover().remove(&(slot, number));
                    }
                    self.meta(slot, |g| g.set_file_attrs(number, change, now_ns()))?;
                }
                self.attr(Ino::File { slot, number }).map(|(a, _)| a)
            })(),
            Some(Ino::Dir { slot, id }) if id != 0 => (|| {
                if size.is_some() {
                    return Err(Errno::EISDIR);
                }
                if mode.is_some() || uid.is_some() || gid.is_some() {
                    let node = self.meta(slot, |g| g.set_dir_attrs(id, change))?;
                    return Ok(self.node_attr(slot, &node));
                }
                self.attr(Ino::Dir { slot, id }).map(|(a, _)| a)
            })(),
            // The root and a group's root keep the service's attributes.
            Some(i) => {
                if size.is_some() {
                    Err(Errno::EISDIR)
                } else if mode.is_some() || uid.is_some() || gid.is_some() {
                    Err(Errno::EPERM)
                } else {
                    self.attr(i).map(|(a, _)| a)
                }
            }
            None => Err(Errno::ENOENT),
        };
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // Regular files only: a group holds no devices, pipes or sockets.
        if mode & libc::S_IFMT != libc::S_IFREG && mode & libc::S_IFMT != 0 {
            return reply.error(Errno::EPERM);
        }
        let mut counted = Counted::none(self);
        match self.new_file(req, parent, name, mode, umask, &mut counted) {
            Ok((slot, info)) => {
                counted.replied();
                self.entry(slot, &info, reply)
            }
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut counted = Counted::none(self);
        let made = self.dir_of(parent).and_then(|(slot, dir)| {
            let name = name.to_str().ok_or(Errno::EINVAL)?;
            let attrs = DirAttrs {
                mode: (mode & !umask & 0o7777) as u16,
                uid: req.uid(),
                gid: req.gid(),
            };
            let node = self.meta(slot, |g| {
                let node = g.mkdir_in(dir, name, attrs)?;
                counted.count(Ino::Dir { slot, id: node.id });
                Ok(node)
            })?;
            Ok(self.node_attr(slot, &node))
        });
        match made {
            Ok(attr) => {
                counted.replied();
                reply.entry(&TTL, &attr, Generation(0))
            }
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let done = self.dir_of(parent).and_then(|(slot, dir)| {
            let name = name.to_str().ok_or(Errno::EINVAL)?;
            let retired = self.meta(slot, |g| {
                g.unlink_in(dir, name, &|n, i| self.unname_if_known(slot, n, i))
            })?;
            self.retired(slot, retired);
            Ok(())
        });
        answer(reply, done);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let done = self.dir_of(parent).and_then(|(slot, dir)| {
            let name = name.to_str().ok_or(Errno::EINVAL)?;
            self.meta(slot, |g| {
                g.rmdir_in(dir, name, &|id| self.hold_if_known_dir(slot, id))
            })
        });
        answer(reply, done);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let done = (|| {
            if flags.intersects(!RenameFlags::RENAME_NOREPLACE) {
                // Exchange and whiteout are not offered.
                return Err(Errno::EINVAL);
            }
            let (slot, dir) = self.dir_of(parent)?;
            let (new_slot, new_dir) = self.dir_of(newparent)?;
            if slot != new_slot {
                return Err(Errno::EXDEV);
            }
            let name = name.to_str().ok_or(Errno::EINVAL)?;
            let newname = newname.to_str().ok_or(Errno::EINVAL)?;
            let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
            let retired = self.meta(slot, |g| {
                g.rename_in(
                    (dir, name),
                    (new_dir, newname),
                    no_replace,
                    &|n, i| self.unname_if_known(slot, n, i),
                    &|id| self.hold_if_known_dir(slot, id),
                )
            })?;
            self.retired(slot, retired);
            Ok(())
        })();
        answer(reply, done);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let opened = self.file_of(ino).and_then(|(slot, number)| {
            self.slot(slot)?
                .group
                .plane()
                .file(number)
                .ok_or(Errno::ENOENT)
                .map(drop)
        });
        match opened {
            Ok(()) => {
                // O_DIRECT: no page cache for this open.
                let direct = flags.0 & libc::O_DIRECT != 0;
                reply.opened(FileHandle(0), open_flags(direct));
            }
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut counted = Counted::none(self);
        match self.new_file(req, parent, name, mode, umask, &mut counted) {
            Ok((slot, info)) => {
                counted.replied();
                let direct = flags & libc::O_DIRECT != 0;
                reply.created(
                    &TTL,
                    &self.file_attr(slot, &info),
                    Generation(u64::from(info.incarnation)),
                    FileHandle(0),
                    open_flags(direct),
                );
            }
            Err(e) => reply.error(e),
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
        let started = std::time::Instant::now();
        let found = self.file_of(ino);
        let read =
            found.and_then(|(slot, number)| self.read_file(slot, number, offset, u64::from(size)));
        if let Some(s) = found.ok().and_then(|(slot, _)| self.slots.get(slot)) {
            let bytes = read.as_ref().map_or(0, |d| d.len() as u64);
            s.stats
                .reads
                .record(bytes, read.is_err(), started.elapsed());
        }
        match read {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // O_SYNC includes O_DSYNC's bit.
        let sync = flags.0 & libc::O_DSYNC != 0;
        let started = std::time::Instant::now();
        let found = self.file_of(ino);
        let written =
            found.and_then(|(slot, number)| self.write_file(slot, number, offset, data, sync));
        if let Some(s) = found.ok().and_then(|(slot, _)| self.slots.get(slot)) {
            s.stats
                .writes
                .record(data.len() as u64, written.is_err(), started.elapsed());
        }
        match written {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        // A group file's AUs are allocated as it grows, so the range up to
        // its end already has its space: growing (mode 0) sets the size;
        // KEEP_SIZE alone asks for nothing more inside the file. PUNCH_HOLE
        // (a volume's discard, `fstrim`) and ZERO_RANGE (its write-zeroes)
        // make the range read as zeros, the whole extents in it unwritten
        // again, and a punch discards their AUs on the member disks; the
        // file keeps its AUs (a volume is thick). Allocating past the end
        // while keeping the size is not offered.
        const KEEP_SIZE: i32 = libc::FALLOC_FL_KEEP_SIZE;
        const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
        const ZERO_KEEP: i32 = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;
        let started = std::time::Instant::now();
        let found = self.file_of(ino);
        let done = found.and_then(|(slot, number)| {
            let end = offset.checked_add(length).ok_or(Errno::EFBIG)?;
            let s = self.slot(slot)?;
            let size = s.group.plane().file(number).ok_or(Errno::ENOENT)?.byte_size;
            match mode {
                0 => self
                    .meta(slot, |g| g.set_byte_size(number, end, now_ns(), true))
                    .map(|_| ()),
                KEEP_SIZE if end <= size => Ok(()),
                PUNCH | ZERO | ZERO_KEEP => {
                    if mode & KEEP_SIZE == 0 && end > size {
                        self.meta(slot, |g| g.set_byte_size(number, end, now_ns(), true))?;
                    }
                    let end = if mode & KEEP_SIZE == 0 { end } else { end.min(size) };
                    if offset >= end {
                        return Ok(());
                    }
                    let punched =
                        s.with_handle(|h| h.punch(number, offset, end - offset, mode == PUNCH));
                    match punched {
                        Ok(p) => {
                            tracing::debug!(group = %s.name, file = number, offset, len = end - offset, extents = p.extents, discarded = p.discarded_bytes, zeroed = p.zeroed_bytes, "punched");
                            self.written.lock_or_recover().insert((slot, number), now_ns());
                            Ok(())
                        }
                        Err(e) => {
                            tracing::warn!(group = %s.name, file = number, offset, len = end - offset, error = %e, "punch failed");
                            Err(errno(&e))
                        }
                    }
                }
                _ => Err(Errno::EOPNOTSUPP),
            }
        });
        if matches!(mode, PUNCH | ZERO | ZERO_KEEP) {
            if let Some(s) = found.ok().and_then(|(slot, _)| self.slots.get(slot)) {
                s.stats
                    .discards
                    .record(length, done.is_err(), started.elapsed());
            }
        }
        answer(reply, done);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        // (cookie, inode, kind, name), "." and ".." first.
        let entries: Result<Vec<(u64, u64, FileType, String)>, Errno> = match decode(ino.0) {
            Some(Ino::Root) => Ok([
                (1, ROOT, FileType::Directory, ".".to_string()),
                (2, ROOT, FileType::Directory, "..".to_string()),
            ]
            .into_iter()
            .chain(self.slots.iter().enumerate().map(|(slot, s)| {
                (
                    slot as u64 + 1 + COOKIE_BASE,
                    encode(Ino::Dir { slot, id: 0 }),
                    FileType::Directory,
                    s.name.clone(),
                )
            }))
            .collect()),
            Some(Ino::Dir { slot, id }) => self
                .meta(slot, |g| Ok((g.children(id), g.node(id))))
                .and_then(|(mut children, node)| {
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
                    children.sort_by_key(|n| n.id);
                    Ok([
                        (
                            1,
                            encode(Ino::Dir { slot, id }),
                            FileType::Directory,
                            ".".into(),
                        ),
                        (2, up, FileType::Directory, "..".into()),
                    ]
                    .into_iter()
                    .chain(children.into_iter().filter_map(|n| {
                        let cookie = u64::from(n.id) + COOKIE_BASE;
                        match (n.kind, n.file) {
                            (AliasKind::Directory, _) => Some((
                                cookie,
                                encode(Ino::Dir { slot, id: n.id }),
                                FileType::Directory,
                                n.name,
                            )),
                            (_, Some(f)) => Some((
                                cookie,
                                encode(Ino::File {
                                    slot,
                                    number: f.number,
                                }),
                                FileType::RegularFile,
                                n.name,
                            )),
                            (_, None) => None,
                        }
                    }))
                    .collect())
                }),
            _ => Err(Errno::ENOTDIR),
        };
        match entries {
            Ok(entries) => {
                for (cookie, ino, kind, name) in entries.iter().filter(|e| e.0 > offset) {
                    if reply.add(INodeNo(*ino), *cookie, *kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        // The group's size and free space after mirroring (what files can
        // still take), as `group space` says; for the root, every served
        // group's.
        let slots: Vec<&Slot> = match decode(ino.0) {
            Some(Ino::Dir { slot, .. }) | Some(Ino::File { slot, .. }) => {
                self.slots.get(slot).into_iter().collect()
            }
            _ => self.slots.iter().collect(),
        };
        // The block size: for a group's file, its largest extent (one AU
        // up to 20,000 AUs, then 4, then 16: `extent_map`); for a group's
        // directory, one AU; for the root, 4 KiB. A loop device over a file
        // (a volume) takes it as its discard granularity, so `fstrim` asks
        // for ranges that unwrite whole extents. Counts are in the same unit
        // (f_frsize = f_bsize), so a tool that multiplies by either is
        // right.
        let unit = match decode(ino.0) {
            Some(Ino::File { slot, number }) => self.slots.get(slot).and_then(|s| {
                let snap = s.group.plane().file(number)?;
                let last = snap.extents().count().checked_sub(1)? as u64;
                Some(snap.layout.extent_bytes(last))
            }),
            Some(Ino::Dir { slot, .. }) => self.slots.get(slot).map(|s| s.au_bytes),
            _ => None,
        }
        .and_then(|u| u32::try_from(u).ok())
        .unwrap_or(4096);
        let (mut bytes, mut free_bytes) = (0u64, 0u64);
        for s in slots {
            match s.group.meta(|g| g.space()) {
                Ok(space) => {
                    bytes += (space.total_mb << 20) / s.copies.max(1);
                    free_bytes += (space.usable_file_mb.max(0) as u64) << 20;
                }
                Err(e) => return reply.error(errno(&e)),
            }
        }
        let (blocks, free) = (bytes / u64::from(unit), free_bytes / u64::from(unit));
        reply.statfs(blocks, free, free, 0, 0, unit, 48, unit);
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Sizes and names are durable when their operations return; the
        // data needs every disk flushed (any handle may have written it).
        // Never ENOSYS: the kernel would stop asking, and take every later
        // fsync as done.
        let started = std::time::Instant::now();
        let found = self.file_of(ino);
        let done = found.and_then(|(slot, number)| {
            let s = self.slot(slot)?;
            if let Err(e) = s.with_handle(|h| h.sync_all()) {
                tracing::warn!(group = %s.name, file = number, error = %e, "fsync failed");
                return Err(errno(&e));
            }
            if !datasync {
                let now = std::time::Instant::now();
                let due = self
                    .mtime_stored
                    .lock_or_recover()
                    .get(&(slot, number))
                    .is_none_or(|at| now.duration_since(*at) >= MTIME_EVERY);
                if due {
                    self.store_mtime(slot, number)?;
                    self.mtime_stored
                        .lock_or_recover()
                        .insert((slot, number), now);
                }
            }
            Ok(())
        });
        if let Some(s) = found.ok().and_then(|(slot, _)| self.slots.get(slot)) {
            s.stats.syncs.record(0, done.is_err(), started.elapsed());
        }
        answer(reply, done);
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // A change of names is durable when it returns: nothing is left.
        reply.ok();
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        answer(
            reply,
            self.file_of(ino)
                .and_then(|(slot, number)| self.store_mtime(slot, number)),
        );
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Ok((slot, number)) = self.file_of(ino) {
            let _ = self.store_mtime(slot, number);
            self.mtime_stored.lock_or_recover().remove(&(slot, number));
        }
        reply.ok();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A normal-redundancy group `LIVE` on two simulated disks in two
    /// failure groups, mounted live: the simulator (to lose disks) and the
    /// group.
    fn live_group() -> (
        cairn_io_sim::SharedSim,
        Vec<cairn_io::DeviceId>,
        Arc<LiveGroup>,
    ) {
        use cairn_store::group::{
            GroupSelector, GroupSpec, MissingDisks, NewDisk, Redundancy, SameDevices,
        };
        use cairn_store::labeling::{write_label, LabelSpec};
        let mut sim = cairn_io_sim::SimEngine::new(7, 64);
        let mut disks = Vec::new();
        for i in 0..2u128 {
            let device = sim.add_disk(cairn_io_sim::geometry(64 * MIB, 4096, 4096, 512 << 10));
            write_label(
                &mut sim,
                device,
                &LabelSpec {
                    label: cairn_format::DiskLabel::parse(&format!("D{i}")).unwrap(),
                    disk_uuid: uuid::Uuid::from_u128(0x1000 + i),
                    now_unix_seconds: 1_763_700_000,
                    generation: 1,
                },
            )
            .unwrap();
            disks.push(NewDisk {
                device,
                failgroup: Some(format!("FG{i}")),
            });
        }
        let ids: Vec<_> = disks.iter().map(|d| d.device).collect();
        cairn_store::group::create(
            &mut sim,
            &disks,
            &GroupSpec {
                name: "LIVE".into(),
                redundancy: Redundancy::Normal,
                au_bytes: MIB,
                sector_bytes: None,
                force: false,
                now_unix_seconds: 1_763_700_000,
                group_uuid: uuid::Uuid::from_u128(0x2000),
            },
        )
        .unwrap()
        .dismount()
        .unwrap();
        let shared = cairn_io_sim::SharedSim::new(sim);
        let (g, _) = cairn_store::group::mount_owned(
            Box::new(shared.handle()),
            &ids,
            &GroupSelector::Name("LIVE".into()),
            MissingDisks::MarkOffline,
        )
        .unwrap();
        let source = shared.clone();
        let live = LiveGroup::new(
            g,
            Box::new(SameDevices(move |_depth| {
                Box::new(source.handle()) as Box<dyn cairn_io::IoEngine>
            })),
        );
        (shared, ids, Arc::new(live))
    }

    fn lookups(fs: &GroupFs, ino: Ino) -> u64 {
        fs.known
            .lock_or_recover()
            .get(&encode(ino))
            .map_or(0, |k| k.lookups)
    }

    /// Issue 34 item 13: the kernel gives back only the lookups it was
    /// told of. A lookup whose step found the file (and counted it) but
    /// whose commit then failed — the group stopped — is answered with an
    /// error, so its count must not stay: before, it did, and a file
    /// unlinked while known was never dropped.
    #[test]
    fn a_lookup_answered_with_an_error_leaves_no_count_behind() {
        let (shared, ids, live) = live_group();
        let info = live
            .meta(|g| {
                g.create_file(
                    &cairn_store::names::GroupPath::parse("+LIVE/f").unwrap(),
                    MIB,
                    &CreateOptions::default(),
                )
            })
            .unwrap()
            .unwrap();
        let fs = GroupFs::new(vec![Served {
            name: "LIVE".into(),
            group: live.clone(),
        }])
        .unwrap();
        let dir = encode(Ino::Dir { slot: 0, id: 0 });
        let file = Ino::File {
            slot: 0,
            number: info.number,
        };

        let (_, generation, counted) = fs.entry_of(dir, "f").unwrap();
        assert_eq!(generation, u64::from(info.incarnation));
        counted.replied();
        assert_eq!(lookups(&fs, file), 1, "one entry reply, one lookup");
        // Not replied (the reply was never made): given back.
        drop(fs.entry_of(dir, "f").unwrap());
        assert_eq!(
            lookups(&fs, file),
            1,
            "an entry never replied is not counted"
        );

        // Every disk lost: the next change's commit fails and the group
        // stops; a lookup's step still runs, its commit fails.
        shared.with(|sim| {
            for d in &ids {
                sim.lose_disk(*d);
            }
        });
        let change = live.meta(|g| {
            g.create_file(
                &cairn_store::names::GroupPath::parse("+LIVE/g").unwrap(),
                MIB,
                &CreateOptions::default(),
            )
        });
        assert!(
            !matches!(change, Ok(Ok(_))),
            "a create with every disk lost must fail"
        );
        assert!(live.plane().stopped().is_some(), "the group stopped");
        let refused = fs.entry_of(dir, "f").map(|(a, g, _)| (a.ino, g));
        assert!(refused.is_err(), "the lookup fails: {refused:?}");
        assert_eq!(
            lookups(&fs, file),
            1,
            "a lookup answered with an error leaves no count the kernel would never give back"
        );
        // The kernel gives back the one it was told of: nothing is left.
        fs.forgot(encode(file), 1);
        assert_eq!(lookups(&fs, file), 0);
        assert!(fs.known.lock_or_recover().is_empty());
    }

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
