//! The groups' name space as a FUSE file system (`docs/serve.md`, "The file
//! system"): glue between fuser and the file system's core
//! (`cairn_vfs::Vfs`), which holds every rule — inode numbers, lookup
//! counts, a name removed while in use, errnos, attributes, each
//! operation. Here: decode a request, call the core, encode its reply; and
//! what is the service's own — how long the kernel may cache an answer,
//! how an open is served, the capabilities asked for at `init`, telling
//! the kernel a name went, and the per-group counters.
//!
//! Locks: none of its own; the counters are atomics, and the notifier is
//! set once.

use std::ffi::OsStr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use cairn_store::group::GroupError;
use cairn_vfs::{Attr, Caller, Kind, SetAttr, SetTime, Vfs};
use fuser::{
    BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    TimeOrNow, WriteFlags,
};

pub use cairn_vfs::Served;

/// How long the kernel may keep an answer (attributes, names) without
/// asking again. Short: the name space also changes through the CLI.
const TTL: Duration = Duration::from_secs(1);

/// The served groups as one file system.
pub struct GroupFs {
    vfs: Vfs,
    /// What the file system served, per group slot (atomics).
    stats: Vec<Arc<crate::io_stats::IoStats>>,
    notifier: Arc<OnceLock<fuser::Notifier>>,
}

/// A served group's name space as the control socket changes it: a name
/// removed by `cairn rm` while the kernel knows its file keeps the file's
/// data for its readers, as an unlink through the mount does.
#[derive(Clone)]
pub struct Names {
    names: cairn_vfs::Names,
    /// How the kernel is told a name went (its dentry cache would find the
    /// old file for up to [`TTL`]): set once the session exists.
    notifier: Arc<OnceLock<fuser::Notifier>>,
}

impl Names {
    /// Remove a name, as `cairn rm` does (`cairn_vfs::Names::remove`), and
    /// tell the kernel it went.
    pub fn remove(
        &self,
        path: &cairn_store::names::GroupPath,
        check: &dyn Fn(&cairn_store::group::Group<'static>) -> Result<(), GroupError>,
    ) -> Result<(), GroupError> {
        let gone = self.names.remove(path, check)?;
        // Outside `meta`: the kernel may wait for a request in that
        // directory, which may need `meta`.
        if let (Some(n), Some((dir, name))) = (self.notifier.get(), gone) {
            if let Err(e) = n.inval_entry(INodeNo(dir), OsStr::new(&name)) {
                if e.raw_os_error() != Some(libc::ENOENT) {
                    tracing::warn!(error = %e, "could not tell the kernel a name went");
                }
            }
        }
        Ok(())
    }
}

fn errno(e: cairn_vfs::Errno) -> Errno {
    Errno::from_i32(e.code())
}

/// An empty reply: done, or the errno.
fn answer(reply: ReplyEmpty, done: Result<(), cairn_vfs::Errno>) {
    match done {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::Directory => FileType::Directory,
        Kind::File => FileType::RegularFile,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: a.crtime,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: a.blksize,
        flags: 0,
    }
}

/// How an open is served. O_DIRECT: no page cache, and writes in parallel
/// (the kernel otherwise takes the inode's lock for each one): a
/// database's writers to distinct blocks of one file go at once, a
/// sector two of them share is kept whole by the extent's
/// read-modify-write latch (`DataHandle::write_bytes`), and two writes of
/// the same bytes go one after the other (the extent latch's
/// `Hold::Write`), so every copy ends with the later.
fn open_flags(opened: cairn_vfs::Opened) -> FopenFlags {
    if opened.direct {
        FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
    } else {
        FopenFlags::empty()
    }
}

fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
    }
}

/// An entry reply (the lookup it carries is the kernel's to give back).
fn entry(reply: ReplyEntry, made: Result<cairn_vfs::Entry<'_>, cairn_vfs::Errno>) {
    match made {
        Ok(entry) => {
            let (attr, generation) = entry.replied();
            reply.entry(&TTL, &file_attr(&attr), Generation(generation))
        }
        Err(e) => reply.error(errno(e)),
    }
}

impl GroupFs {
    pub fn new(groups: Vec<Served>) -> Result<Self, GroupError> {
        let stats = groups.iter().map(|_| Arc::default()).collect();
        Ok(Self {
            vfs: Vfs::new(groups)?,
            stats,
            notifier: Arc::new(OnceLock::new()),
        })
    }

    /// How [`Names`] tell the kernel a name went: the session's notifier.
    pub fn notifier_slot(&self) -> Arc<OnceLock<fuser::Notifier>> {
        self.notifier.clone()
    }

    /// The counters of the group in `slot`.
    pub fn stats(&self, slot: usize) -> Option<Arc<crate::io_stats::IoStats>> {
        self.stats.get(slot).cloned()
    }

    /// The name space of the group in `slot` (in the order given to
    /// [`GroupFs::new`]), for the control socket.
    pub fn names(&self, slot: usize) -> Option<Names> {
        Some(Names {
            names: self.vfs.names(slot)?,
            notifier: self.notifier.clone(),
        })
    }

    /// The counters of the group a file's inode is in.
    fn file_stats(&self, ino: INodeNo) -> Option<&crate::io_stats::IoStats> {
        self.vfs
            .file_slot(ino.0)
            .and_then(|slot| self.stats.get(slot))
            .map(|s| &**s)
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
        entry(reply, self.vfs.lookup(parent.0, name));
    }

    /// (fuser's `batch_forget` calls this for each.)
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.vfs.forget(ino.0, nlookup);
    }

    /// The file system stops: files that lost their names while the
    /// kernel knew them go now (the kernel need not forget everything at
    /// unmount).
    fn destroy(&mut self) {
        self.vfs.destroy();
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.vfs.getattr(ino.0) {
            Ok(attr) => reply.attr(&TTL, &file_attr(&attr)),
            Err(e) => reply.error(errno(e)),
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
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            mtime: mtime.map(|t| match t {
                TimeOrNow::SpecificTime(t) => SetTime::At(t),
                TimeOrNow::Now => SetTime::Now,
            }),
        };
        match self.vfs.setattr(ino.0, set) {
            Ok(attr) => reply.attr(&TTL, &file_attr(&attr)),
            Err(e) => reply.error(errno(e)),
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
        entry(
            reply,
            self.vfs.mknod(caller(req), parent.0, name, mode, umask),
        );
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
        entry(
            reply,
            self.vfs.mkdir(caller(req), parent.0, name, mode, umask),
        );
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(reply, self.vfs.unlink(parent.0, name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(reply, self.vfs.rmdir(parent.0, name));
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
        answer(
            reply,
            self.vfs
                .rename(parent.0, name, newparent.0, newname, flags.bits()),
        );
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.vfs.open(ino.0, flags.0) {
            Ok(opened) => reply.opened(FileHandle(0), open_flags(opened)),
            Err(e) => reply.error(errno(e)),
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
        match self
            .vfs
            .create(caller(req), parent.0, name, mode, umask, flags)
        {
            Ok((entry, opened)) => {
                let (attr, generation) = entry.replied();
                reply.created(
                    &TTL,
                    &file_attr(&attr),
                    Generation(generation),
                    FileHandle(0),
                    open_flags(opened),
                );
            }
            Err(e) => reply.error(errno(e)),
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
        let started = Instant::now();
        let read = self.vfs.read(ino.0, offset, size);
        if let Some(s) = self.file_stats(ino) {
            let bytes = read.as_ref().map_or(0, |d| d.len() as u64);
            s.reads.record(bytes, read.is_err(), started.elapsed());
        }
        match read {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(errno(e)),
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
        let started = Instant::now();
        let written = self.vfs.write(ino.0, offset, data, flags.0);
        if let Some(s) = self.file_stats(ino) {
            s.writes
                .record(data.len() as u64, written.is_err(), started.elapsed());
        }
        match written {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
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
        let started = Instant::now();
        let done = self.vfs.fallocate(ino.0, offset, length, mode);
        if Vfs::fallocate_zeroes(mode) {
            if let Some(s) = self.file_stats(ino) {
                s.discards.record(length, done.is_err(), started.elapsed());
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
        match self.vfs.readdir(ino.0, offset) {
            Ok(entries) => {
                for e in &entries {
                    if reply.add(INodeNo(e.ino), e.cookie, file_type(e.kind), &e.name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        match self.vfs.statfs(ino.0) {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// Never `ENOSYS`: the kernel would stop asking, and take every later
    /// fsync as done.
    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let started = Instant::now();
        let done = self.vfs.fsync(ino.0, datasync);
        if let Some(s) = self.file_stats(ino) {
            s.syncs.record(0, done.is_err(), started.elapsed());
        }
        answer(reply, done);
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        answer(reply, self.vfs.fsyncdir(ino.0));
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        answer(reply, self.vfs.flush(ino.0));
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
        self.vfs.release(ino.0);
        reply.ok();
    }
}
