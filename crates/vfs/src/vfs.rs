//! The served groups as one file system: every operation the kernel asks
//! of it, in plain types (inode numbers, names as bytes, [`Errno`]).
//!
//! Locks: a request takes a data handle from its group's pool, then the
//! data path's latches, then `meta` (the live core's order). The lookup
//! table ([`Lookups`]) and the pending times ([`Mtimes`]) are leaves.
//!
//! A lookup is counted under `meta`, in the same step that resolves the
//! name (or makes the inode), so no unlink and no reuse of the number can
//! come between; the count is given back if the reply is not made
//! ([`Entry`]).

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::SystemTime;

use cairn_format::group::{AliasKind, DirAttrs, FileAttrs};
use cairn_store::group::{
    AttrChange, CreateOptions, FileInfo, Group, GroupError, LiveGroup, Node, Retired,
};

use crate::attr::{ns_of, time, Attr, Kind};
use crate::clock::{Clock, SystemClock};
use crate::errno::Errno;
use crate::handles::Pool;
use crate::ino::{Ino, ROOT};
use crate::known::{Gone, Lookups};
use crate::mtimes::Mtimes;
use crate::names::Names;

/// The largest read the file system serves at once (the kernel asks for at
/// most its `max_read`, 128 KiB to 1 MiB).
const READ_BYTES_MAX: u64 = 4 << 20;
/// readdir cookies: "." is 1, ".." 2, and a name with alias id `d` (or, in
/// the root, the group in slot `d - 1`) is `d + 2`, so a listing resumed
/// after names came and went neither skips nor repeats one.
const COOKIE_BASE: u64 = 2;
/// The longest name a group takes, bytes (`statfs`'s `namelen`).
const NAME_BYTES_MAX: u32 = 48;

// fallocate's modes served (`Vfs::fallocate`).
const KEEP_SIZE: i32 = libc::FALLOC_FL_KEEP_SIZE;
const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
const ZERO_KEEP: i32 = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;

/// A group the file system serves.
pub struct Served {
    pub name: String,
    pub group: Arc<LiveGroup>,
}

struct Slot {
    name: String,
    group: Arc<LiveGroup>,
    pool: Pool,
    sector_bytes: u64,
    copies: u64,
    au_bytes: u64,
}

/// Who asks (a new inode's owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
}

/// A modification time to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    Now,
    At(SystemTime),
}

/// A change of attributes (`None`: left as it is).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Bytes: cut or grow the file.
    pub size: Option<u64>,
    pub mtime: Option<SetTime>,
}

/// How an open is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// `O_DIRECT`: without the page cache.
    pub direct: bool,
}

/// A name in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Where a listing resumed after this name starts.
    pub cookie: u64,
    pub ino: u64,
    pub kind: Kind,
    pub name: String,
}

/// What `statfs` says; counts are in `bsize` units (`frsize` is the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statfs {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
    pub frsize: u32,
}

/// An inode for an entry reply, with the lookup counted for it. The count
/// is taken under `meta`, in the step that found or made the inode (so no
/// unlink comes between), but the reply may still end in an error — the
/// commit that step waits for can fail — and the kernel returns only what
/// it was told of. So the count is given back, as a `forget` would, unless
/// [`Entry::replied`] says the reply carries it.
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
#[must_use = "an entry not replied gives its lookup back"]
pub struct Entry<'a> {
    pub attr: Attr,
    /// The inode's generation (a file's incarnation; 0 for a directory).
    pub generation: u64,
    counted: Counted<'a>,
}

impl Entry<'_> {
    /// The entry reply carries the count: the kernel's `forget` returns it.
    pub fn replied(mut self) -> (Attr, u64) {
        self.counted.ino = None;
        (self.attr, self.generation)
    }
}

/// A lookup counted, given back when dropped unless cleared.
struct Counted<'a> {
    vfs: &'a Vfs,
    ino: Option<u64>,
}

impl<'a> Counted<'a> {
    fn none(vfs: &'a Vfs) -> Self {
        Self { vfs, ino: None }
    }

    /// Count a lookup of `ino` (under `meta`): one the kernel will give
    /// back once the entry reply is made.
    fn count(&mut self, ino: Ino) {
        self.vfs.lookups.looked_up(ino);
        self.ino = Some(ino.encode());
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if let Some(ino) = self.ino.take() {
            // Never under `meta`: the guard lives outside the step.
            self.vfs.forget(ino, 1);
        }
    }
}

/// The served groups as one file system.
pub struct Vfs {
    slots: Vec<Slot>,
    /// The root's and each group root's times.
    started: SystemTime,
    /// Inodes the kernel knows. Shared with [`Names`].
    lookups: Arc<Lookups>,
    /// Modification times of writes not yet stored. Shared with [`Names`].
    mtimes: Arc<Mtimes>,
    clock: Arc<dyn Clock>,
}

impl Vfs {
    /// The file system of `groups`, on the system's clocks.
    pub fn new(groups: Vec<Served>) -> Result<Self, GroupError> {
        Self::with_clock(groups, Arc::new(SystemClock))
    }

    /// The file system of `groups`, reading the time from `clock`.
    pub fn with_clock(groups: Vec<Served>, clock: Arc<dyn Clock>) -> Result<Self, GroupError> {
        let mut slots = Vec::new();
        for g in groups {
            let (sector_bytes, copies, au_bytes) = g.group.meta(|m| {
                (
                    u64::from(m.sector_bytes()),
                    u64::from(m.redundancy().copies()),
                    m.au_bytes(),
                )
            })?;
            slots.push(Slot {
                name: g.name,
                pool: Pool::new(g.group.clone()),
                group: g.group,
                sector_bytes,
                copies,
                au_bytes,
            });
        }
        Ok(Self {
            slots,
            started: SystemTime::now(),
            lookups: Arc::default(),
            mtimes: Arc::default(),
            clock,
        })
    }

    /// The name space of the group in `slot` (in the order given to
    /// [`Vfs::new`]), for the control socket.
    pub fn names(&self, slot: usize) -> Option<Names> {
        let s = self.slots.get(slot)?;
        Some(Names::new(
            slot,
            s.group.clone(),
            self.lookups.clone(),
            self.mtimes.clone(),
        ))
    }

    /// The group slot of a file's inode (for the service's counters).
    pub fn file_slot(&self, ino: u64) -> Option<usize> {
        self.file_of(ino).ok().map(|(slot, _)| slot)
    }

    /// Lookups of `ino` the kernel holds, as counted here.
    pub fn lookups(&self, ino: u64) -> u64 {
        self.lookups.count(ino)
    }

    /// How many inodes the kernel knows, as counted here.
    pub fn known_inodes(&self) -> usize {
        self.lookups.len()
    }

    fn slot(&self, slot: usize) -> Result<&Slot, Errno> {
        self.slots.get(slot).ok_or(Errno::ENOENT)
    }

    /// A metadata operation on a group, its error as an errno.
    fn meta<R>(
        &self,
        slot: usize,
        f: impl FnOnce(&mut Group<'static>) -> Result<R, GroupError>,
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
                Err(Errno::from(&e))
            }
        }
    }

    fn file_attr(&self, slot: usize, info: &FileInfo) -> Attr {
        let sector = self.slots.get(slot).map_or(4096, |s| s.sector_bytes);
        let mtime = self.mtimes.shown((slot, info.number), info.attrs.mtime_ns);
        let ino = Ino::File {
            slot,
            number: info.number,
        };
        Attr::file(ino.encode(), info, sector, mtime)
    }

    /// The root's and each group root's attributes: the service's, 0755
    /// (a group's root has no record to keep others in).
    fn top_attr(&self, ino: u64) -> Attr {
        Attr::dir(ino, self.started, cairn_store::group::group_root_attrs())
    }

    fn node_attr(&self, slot: usize, node: &Node) -> Attr {
        Attr::dir(
            Ino::Dir { slot, id: node.id }.encode(),
            time(node.created_unix_seconds),
            node.dir_attrs,
        )
    }

    /// The attributes of an inode, and its generation.
    fn attr(&self, ino: Ino) -> Result<(Attr, u64), Errno> {
        match ino {
            Ino::Root | Ino::Dir { id: 0, .. } => {
                if let Ino::Dir { slot, .. } = ino {
                    self.slot(slot)?;
                }
                Ok((self.top_attr(ino.encode()), 0))
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

    /// The directory an inode names, for a change in it: a group's
    /// directory (the root lists groups, which the file system does not
    /// make or remove).
    fn dir_of(&self, parent: u64) -> Result<(usize, u32), Errno> {
        match Ino::decode(parent) {
            Some(Ino::Dir { slot, id }) => {
                self.slot(slot)?;
                Ok((slot, id))
            }
            Some(Ino::Root) => Err(Errno::EPERM),
            Some(Ino::File { .. }) => Err(Errno::ENOTDIR),
            None => Err(Errno::ENOENT),
        }
    }

    fn file_of(&self, ino: u64) -> Result<(usize, u32), Errno> {
        match Ino::decode(ino) {
            Some(Ino::File { slot, number }) => {
                self.slot(slot)?;
                Ok((slot, number))
            }
            Some(_) => Err(Errno::EISDIR),
            None => Err(Errno::ENOENT),
        }
    }

    // -----------------------------------------------------------------
    // Names: lookup, forget, create, mkdir, unlink, rmdir, rename

    /// `name` in directory `parent`, for an entry reply: its attributes,
    /// generation, and the lookup counted for the reply (given back if the
    /// reply is not made). An error leaves no count. A name the group
    /// refuses names nothing (`ENOENT`), never a different file.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Entry<'_>, Errno> {
        let name = name.to_str().ok_or(Errno::ENOENT)?;
        let mut counted = Counted::none(self);
        let (attr, generation) = match Ino::decode(parent) {
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
        Ok(Entry {
            attr,
            generation,
            counted,
        })
    }

    /// The kernel gave back `n` lookups of an inode: on the last, a file
    /// that lost its names is dropped, a removed directory's id let go.
    pub fn forget(&self, ino: u64, n: u64) {
        if let Some((ino, gone)) = self.lookups.forgot(ino, n) {
            self.settle(ino, gone);
        }
    }

    /// The file system stops: files that lost their names while the
    /// kernel knew them go now (the kernel need not forget everything at
    /// unmount).
    pub fn destroy(&self) {
        for (ino, gone) in self.lookups.drain() {
            self.settle(ino, gone);
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
        self.mtimes.take((slot, number));
        match self.meta(slot, |g| g.drop_unnamed(number, incarnation)) {
            Ok(()) => tracing::debug!(
                file = number,
                ino = Ino::File { slot, number }.encode(),
                "dropped a file unlinked while in use"
            ),
            // The next mount that writes drops it. (The errno as the
            // service's log has always shown it: `Errno(5)`.)
            Err(e) => tracing::warn!(
                file = number,
                error = %format_args!("Errno({})", e.code()),
                "dropping an unlinked file failed"
            ),
        }
    }

    fn unname_if_known(&self, slot: usize, number: u32, incarnation: u32) -> bool {
        self.lookups
            .gone_if_known(Ino::File { slot, number }, Gone::File { incarnation })
    }

    fn hold_if_known_dir(&self, slot: usize, id: u32) -> bool {
        self.lookups.gone_if_known(Ino::Dir { slot, id }, Gone::Dir)
    }

    fn retired(&self, slot: usize, retired: Retired) {
        if let Retired::Deleted(number) = retired {
            self.mtimes.take((slot, number));
        }
    }

    /// A new empty file `name` in `parent`, counted as looked up under
    /// `meta`, with the create: the reply hands the kernel the inode.
    fn new_file(
        &self,
        caller: Caller,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> Result<Entry<'_>, Errno> {
        let mut counted = Counted::none(self);
        let (slot, dir) = self.dir_of(parent)?;
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let now = self.clock.wall_ns();
        let attrs = FileAttrs {
            mode: mode & !umask & 0o7777,
            uid: caller.uid,
            gid: caller.gid,
            mtime_ns: now,
            ctime_ns: now,
            byte_size: 0,
        };
        let info = self.meta(slot, |g| {
            let info = g.create_in(dir, name, attrs, &CreateOptions::default())?;
            counted.count(Ino::File {
                slot,
                number: info.number,
            });
            Ok(info)
        })?;
        Ok(Entry {
            attr: self.file_attr(slot, &info),
            generation: u64::from(info.incarnation),
            counted,
        })
    }

    /// mknod: regular files only (a group holds no devices, pipes or
    /// sockets: `EPERM`).
    pub fn mknod(
        &self,
        caller: Caller,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> Result<Entry<'_>, Errno> {
        if mode & libc::S_IFMT != libc::S_IFREG && mode & libc::S_IFMT != 0 {
            return Err(Errno::EPERM);
        }
        self.new_file(caller, parent, name, mode, umask)
    }

    /// create: a new file, opened (`flags` are the open's).
    pub fn create(
        &self,
        caller: Caller,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> Result<(Entry<'_>, Opened), Errno> {
        let entry = self.new_file(caller, parent, name, mode, umask)?;
        Ok((
            entry,
            Opened {
                direct: flags & libc::O_DIRECT != 0,
            },
        ))
    }

    pub fn mkdir(
        &self,
        caller: Caller,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> Result<Entry<'_>, Errno> {
        let mut counted = Counted::none(self);
        let (slot, dir) = self.dir_of(parent)?;
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let attrs = DirAttrs {
            mode: (mode & !umask & 0o7777) as u16,
            uid: caller.uid,
            gid: caller.gid,
        };
        let node = self.meta(slot, |g| {
            let node = g.mkdir_in(dir, name, attrs)?;
            counted.count(Ino::Dir { slot, id: node.id });
            Ok(node)
        })?;
        Ok(Entry {
            attr: self.node_attr(slot, &node),
            generation: 0,
            counted,
        })
    }

    /// Remove a name that is not a directory's. A file's own name takes the
    /// file; one the kernel knows keeps its data until its last `forget`.
    pub fn unlink(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        let (slot, dir) = self.dir_of(parent)?;
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let retired = self.meta(slot, |g| {
            g.unlink_in(dir, name, &|n, i| self.unname_if_known(slot, n, i))
        })?;
        self.retired(slot, retired);
        Ok(())
    }

    /// Remove an empty directory; one the kernel knows keeps its id from
    /// reuse until its last `forget`.
    pub fn rmdir(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        let (slot, dir) = self.dir_of(parent)?;
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        self.meta(slot, |g| {
            g.rmdir_in(dir, name, &|id| self.hold_if_known_dir(slot, id))
        })
    }

    /// Rename, replacing the name's target in one step (a reader finds the
    /// old file or the new one, never neither). `flags`: renameat2's;
    /// `RENAME_NOREPLACE` is honoured, exchange and whiteout are `EINVAL`.
    pub fn rename(
        &self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> Result<(), Errno> {
        if flags & (libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT) != 0 {
            return Err(Errno::EINVAL);
        }
        let (slot, dir) = self.dir_of(parent)?;
        let (new_slot, new_dir) = self.dir_of(newparent)?;
        if slot != new_slot {
            return Err(Errno::EXDEV);
        }
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        let newname = newname.to_str().ok_or(Errno::EINVAL)?;
        let no_replace = flags & libc::RENAME_NOREPLACE != 0;
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
    }

    // -----------------------------------------------------------------
    // Attributes

    pub fn getattr(&self, ino: u64) -> Result<Attr, Errno> {
        let ino = Ino::decode(ino).ok_or(Errno::ENOENT)?;
        self.attr(ino).map(|(a, _)| a)
    }

    /// Change a file's size, mode, owner or modification time, or a
    /// directory's mode or owner; the root and a group's root keep the
    /// service's.
    pub fn setattr(&self, ino: u64, set: SetAttr) -> Result<Attr, Errno> {
        let change = AttrChange {
            mode: set.mode,
            uid: set.uid,
            gid: set.gid,
            mtime_ns: set.mtime.map(|t| match t {
                SetTime::At(t) => ns_of(t),
                SetTime::Now => self.clock.wall_ns(),
            }),
        };
        let owner = set.mode.is_some() || set.uid.is_some() || set.gid.is_some();
        match Ino::decode(ino) {
            Some(Ino::File { slot, number }) => {
                if let Some(size) = set.size {
                    self.truncate(slot, number, size)?;
                }
                if owner || set.mtime.is_some() {
                    if set.mtime.is_some() {
                        // An explicit time wins over the last write's.
                        self.mtimes.take((slot, number));
                    }
                    self.meta(slot, |g| {
                        g.set_file_attrs(number, change, self.clock.wall_ns())
                    })?;
                }
                self.attr(Ino::File { slot, number }).map(|(a, _)| a)
            }
            Some(Ino::Dir { slot, id }) if id != 0 => {
                if set.size.is_some() {
                    return Err(Errno::EISDIR);
                }
                if owner {
                    let node = self.meta(slot, |g| g.set_dir_attrs(id, change))?;
                    return Ok(self.node_attr(slot, &node));
                }
                self.attr(Ino::Dir { slot, id }).map(|(a, _)| a)
            }
            Some(i) => {
                if set.size.is_some() {
                    Err(Errno::EISDIR)
                } else if owner {
                    Err(Errno::EPERM)
                } else {
                    self.attr(i).map(|(a, _)| a)
                }
            }
            None => Err(Errno::ENOENT),
        }
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
            s.pool
                .with(|h| {
                    h.write_bytes(number, size, &zeros)?;
                    h.sync()
                })
                .map_err(|e| Errno::from(&e))?;
        }
        self.meta(slot, |g| {
            g.set_byte_size(number, size, self.clock.wall_ns(), false)
        })?;
        self.mtimes.take((slot, number));
        Ok(())
    }

    /// Store the time of the last write, if one is not stored yet.
    fn store_mtime(&self, slot: usize, number: u32) -> Result<(), Errno> {
        let Some(when) = self.mtimes.take((slot, number)) else {
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

    // -----------------------------------------------------------------
    // Data

    /// Open a file (`flags`: the open's).
    pub fn open(&self, ino: u64, flags: i32) -> Result<Opened, Errno> {
        let (slot, number) = self.file_of(ino)?;
        self.slot(slot)?
            .group
            .plane()
            .file(number)
            .ok_or(Errno::ENOENT)?;
        Ok(Opened {
            direct: flags & libc::O_DIRECT != 0,
        })
    }

    /// Read `size` bytes at `offset` of a file: whole sectors through a
    /// data handle, the bytes asked for in the reply; short at the end.
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let (slot, number) = self.file_of(ino)?;
        let size = u64::from(size);
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
        if let Err(e) = s.pool.with(|h| h.read(number, start, &mut buf)) {
            tracing::warn!(group = %s.name, file = number, offset, size, error = %e, "read failed");
            return Err(Errno::from(&e));
        }
        let from = (offset - start) as usize;
        buf.truncate((end - start) as usize);
        buf.drain(..from);
        Ok(buf)
    }

    /// Write `data` at `offset`, growing the file first if it ends past
    /// the end (a metadata operation: the new size is durable before the
    /// reply; what lies between the old end and `offset` reads as zeros).
    /// `flags` are the open's: with `O_DSYNC` (or `O_SYNC`, which includes
    /// its bit) the data are durable before the reply. Returns the bytes
    /// written (all of them).
    pub fn write(&self, ino: u64, offset: u64, data: &[u8], flags: i32) -> Result<u32, Errno> {
        let (slot, number) = self.file_of(ino)?;
        let sync = flags & libc::O_DSYNC != 0;
        let s = self.slot(slot)?;
        let snap = s.group.plane().file(number).ok_or(Errno::ENOENT)?;
        let end = offset.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        if end > snap.byte_size {
            self.meta(slot, |g| {
                g.set_byte_size(number, end, self.clock.wall_ns(), true)
            })?;
        }
        // For a direct-I/O open the kernel does not follow an O_DSYNC write
        // with an fsync; it tells us.
        let written = s.pool.with(|h| {
            h.write_bytes(number, offset, data)?;
            if sync {
                h.sync()?;
            }
            Ok(())
        });
        if let Err(e) = written {
            tracing::warn!(group = %s.name, file = number, offset, len = data.len(), error = %e, "write failed");
            return Err(Errno::from(&e));
        }
        self.mtimes.wrote((slot, number), self.clock.wall_ns());
        Ok(data.len() as u32)
    }

    /// Whether an fallocate `mode` makes a range read as zeros (a punched
    /// hole or a zeroed range: a volume's discard or write-zeroes).
    pub fn fallocate_zeroes(mode: i32) -> bool {
        matches!(mode, PUNCH | ZERO | ZERO_KEEP)
    }

    /// fallocate. A group file's AUs are allocated as it grows, so the
    /// range up to its end already has its space: growing (mode 0) sets
    /// the size; `KEEP_SIZE` alone asks for nothing more inside the file.
    /// `PUNCH_HOLE | KEEP_SIZE` (a volume's discard, `fstrim`) and
    /// `ZERO_RANGE` (its write-zeroes) make the range read as zeros, the
    /// whole extents in it unwritten again, and a punch discards their AUs
    /// on the member disks; the file keeps its AUs (a volume is thick).
    /// Allocating past the end while keeping the size is not offered
    /// (`EOPNOTSUPP`).
    pub fn fallocate(&self, ino: u64, offset: u64, length: u64, mode: i32) -> Result<(), Errno> {
        let (slot, number) = self.file_of(ino)?;
        let end = offset.checked_add(length).ok_or(Errno::EFBIG)?;
        let s = self.slot(slot)?;
        let size = s.group.plane().file(number).ok_or(Errno::ENOENT)?.byte_size;
        match mode {
            0 => self
                .meta(slot, |g| {
                    g.set_byte_size(number, end, self.clock.wall_ns(), true)
                })
                .map(|_| ()),
            KEEP_SIZE if end <= size => Ok(()),
            PUNCH | ZERO | ZERO_KEEP => {
                if mode & KEEP_SIZE == 0 && end > size {
                    self.meta(slot, |g| {
                        g.set_byte_size(number, end, self.clock.wall_ns(), true)
                    })?;
                }
                let end = if mode & KEEP_SIZE == 0 {
                    end
                } else {
                    end.min(size)
                };
                if offset >= end {
                    return Ok(());
                }
                let punched = s
                    .pool
                    .with(|h| h.punch(number, offset, end - offset, mode == PUNCH));
                match punched {
                    Ok(p) => {
                        tracing::debug!(group = %s.name, file = number, offset, len = end - offset, extents = p.extents, discarded = p.discarded_bytes, zeroed = p.zeroed_bytes, "punched");
                        self.mtimes.wrote((slot, number), self.clock.wall_ns());
                        Ok(())
                    }
                    Err(e) => {
                        tracing::warn!(group = %s.name, file = number, offset, len = end - offset, error = %e, "punch failed");
                        Err(Errno::from(&e))
                    }
                }
            }
            _ => Err(Errno::EOPNOTSUPP),
        }
    }

    /// Durable on every copy's disk: every disk the group has is flushed (a
    /// flush covers what any writer completed on the device; the handle
    /// that serves the fsync is not the one that wrote). Sizes and names
    /// are durable already. A full `fsync` also stores the modification
    /// time (at most once a second: `crate::mtimes`).
    pub fn fsync(&self, ino: u64, datasync: bool) -> Result<(), Errno> {
        let (slot, number) = self.file_of(ino)?;
        let s = self.slot(slot)?;
        if let Err(e) = s.pool.with(|h| h.sync_all()) {
            tracing::warn!(group = %s.name, file = number, error = %e, "fsync failed");
            return Err(Errno::from(&e));
        }
        if !datasync {
            let now = self.clock.now();
            if self.mtimes.fsync_due((slot, number), now) {
                self.store_mtime(slot, number)?;
                self.mtimes.fsync_stored((slot, number), now);
            }
        }
        Ok(())
    }

    /// A change of names is durable when it returns: nothing is left.
    pub fn fsyncdir(&self, _ino: u64) -> Result<(), Errno> {
        Ok(())
    }

    /// A close of a file: the time of its last write is stored.
    pub fn flush(&self, ino: u64) -> Result<(), Errno> {
        let (slot, number) = self.file_of(ino)?;
        self.store_mtime(slot, number)
    }

    /// The last close of an open: as `flush`, and its next `fsync` stores
    /// the time again. Never fails (the kernel does not look).
    pub fn release(&self, ino: u64) {
        if let Ok((slot, number)) = self.file_of(ino) {
            let _ = self.store_mtime(slot, number);
            self.mtimes.closed((slot, number));
        }
    }

    // -----------------------------------------------------------------
    // Listings and space

    /// A directory's names after cookie `offset` (0: from the start), "."
    /// and ".." first; the root lists the served groups. A directory that
    /// is gone lists nothing (`ENOENT`), not "." and "..".
    pub fn readdir(&self, ino: u64, offset: u64) -> Result<Vec<DirEntry>, Errno> {
        let entry = |cookie, ino, kind, name: String| DirEntry {
            cookie,
            ino,
            kind,
            name,
        };
        let entries: Vec<DirEntry> = match Ino::decode(ino) {
            Some(Ino::Root) => [
                entry(1, ROOT, Kind::Directory, ".".into()),
                entry(2, ROOT, Kind::Directory, "..".into()),
            ]
            .into_iter()
            .chain(self.slots.iter().enumerate().map(|(slot, s)| {
                entry(
                    slot as u64 + 1 + COOKIE_BASE,
                    Ino::Dir { slot, id: 0 }.encode(),
                    Kind::Directory,
                    s.name.clone(),
                )
            }))
            .collect(),
            Some(Ino::Dir { slot, id }) => {
                let (mut children, node) = self.meta(slot, |g| Ok((g.children(id), g.node(id))))?;
                let parent = match (id, node) {
                    (0, _) => 0,
                    (_, Some(n)) if n.kind == AliasKind::Directory => n.parent,
                    _ => return Err(Errno::ENOENT),
                };
                let up = if id == 0 {
                    ROOT
                } else {
                    Ino::Dir { slot, id: parent }.encode()
                };
                children.sort_by_key(|n| n.id);
                [
                    entry(
                        1,
                        Ino::Dir { slot, id }.encode(),
                        Kind::Directory,
                        ".".into(),
                    ),
                    entry(2, up, Kind::Directory, "..".into()),
                ]
                .into_iter()
                .chain(children.into_iter().filter_map(|n| {
                    let cookie = u64::from(n.id) + COOKIE_BASE;
                    match (n.kind, n.file) {
                        (AliasKind::Directory, _) => Some(entry(
                            cookie,
                            Ino::Dir { slot, id: n.id }.encode(),
                            Kind::Directory,
                            n.name,
                        )),
                        (_, Some(f)) => Some(entry(
                            cookie,
                            Ino::File {
                                slot,
                                number: f.number,
                            }
                            .encode(),
                            Kind::File,
                            n.name,
                        )),
                        // A lost file, or one being deleted.
                        (_, None) => None,
                    }
                }))
                .collect()
            }
            _ => return Err(Errno::ENOTDIR),
        };
        Ok(entries.into_iter().filter(|e| e.cookie > offset).collect())
    }

    /// The group's size and free space after mirroring (what files can
    /// still take), as `group space` says; for the root, every served
    /// group's.
    pub fn statfs(&self, ino: u64) -> Result<Statfs, Errno> {
        let slots: Vec<&Slot> = match Ino::decode(ino) {
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
        let unit = match Ino::decode(ino) {
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
                Err(e) => return Err(Errno::from(&e)),
            }
        }
        let (blocks, free) = (bytes / u64::from(unit), free_bytes / u64::from(unit));
        Ok(Statfs {
            blocks,
            bfree: free,
            bavail: free,
            files: 0,
            ffree: 0,
            bsize: unit,
            namelen: NAME_BYTES_MAX,
            frsize: unit,
        })
    }
}
