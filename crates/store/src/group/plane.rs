//! The data plane's shared state: what the metadata plane publishes for data
//! threads (per-file extent-map snapshots, the disk view), the extents'
//! latches (a first write or a repair alone; plain writes side by side,
//! but one at a time over the same bytes), and the guards that keep freed AUs from reuse while an older
//! operation may still use them. The rules are in `docs/live-core.md`.
//!
//! Who changes what:
//! - `files` and `disks` are replaced whole (a new `Arc`) by the metadata
//!   plane only, while it holds the group's metadata lock, and `generation`
//!   is bumped after each swap under the same write lock; a data handle
//!   keeps its own copies ([`SnapshotCache`]) and takes a new one, under the
//!   read lock, only when the generation has moved.
//! - `latches` are taken and let go by data threads (and by the metadata
//!   plane's own data path); the lock order is latch → metadata lock, never
//!   the other way.
//! - each guard slot is written by its own handle's thread only; the metadata
//!   plane reads them all to decide which freed AUs may be reused.
//! - [`DRAIN`] (a leaf mutex, process-wide, with its condition variable) is
//!   taken by a thread that waits for older operations to end
//!   ([`DataPlane::wait_for_older_operations`]) and, only while such a
//!   waiter is counted in [`DRAINERS`], by an operation ending, to wake it.
//!   Never held while taking another lock.
//! - `io_timeout_ms` is written by the metadata plane (at mount, and when
//!   `disk_io_timeout` is set) and read by each data handle as an operation
//!   starts, for its own engine.
//! - `lent` ([`Lent`]): runs are added by the metadata plane under the
//!   metadata lock, and dropped, once nothing touches them, by first writes
//!   and by the metadata plane; a leaf mutex.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use cairn_format::extent_map::FileLayout;
use cairn_format::group::Extent;

use super::sums::FileSums;
use super::sums_log::SumsLog;
use cairn_io::poison::{recover, Recover, RecoverRw};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::lock_order::{self, Rank};

/// Extents per snapshot chunk: a change to one extent copies its chunk, not
/// the whole map (a 1 TiB file has tens of thousands of extents).
pub const SNAPSHOT_CHUNK_EXTENTS: usize = 1024;

/// A guard slot's value while its handle runs no operation.
const IDLE: u64 = u64::MAX;

/// A drain ([`DataPlane::wait_for_older_operations`]) waits at most this
/// many I/O timeouts. An operation older than the drain is at worst in an
/// I/O to a disk that hangs (it ends within one timeout), then waiting for
/// the metadata lock while another thread takes a disk offline (whose step
/// writes superblocks: one timeout more), then taking its own failed disk
/// offline (one more); the fourth is margin. Past it, something other than
/// a hung disk holds the operation, and the drain's caller takes the safe
/// way out instead of waiting on.
pub const DRAIN_TIMEOUTS_MAX: u32 = 4;

/// Threads in [`DataPlane::wait_for_older_operations`], in any group: an
/// operation ending takes [`DRAIN`] and wakes them only when there are.
/// Process-wide because an operation's guard holds only its slot (the data
/// path passes slots, and a reference to the plane would be one more shared
/// count to touch per I/O); a drain is rare, and one woken by another
/// group's operation looks again and goes back to sleep.
static DRAINERS: AtomicU64 = AtomicU64::new(0);
static DRAIN: Mutex<()> = Mutex::new(());
static DRAINED: Condvar = Condvar::new();

/// A file's extent map as published: immutable, versioned. A new version
/// shares the chunks that did not change with the one before.
#[derive(Debug, Clone)]
pub struct FileSnapshot {
    pub number: u32,
    pub incarnation: u32,
    /// Bumped by every publication of this file.
    pub version: u64,
    /// Whole sectors: what the data path reads and writes.
    pub size_bytes: u64,
    /// The file's length in bytes (at most `size_bytes`, less than a
    /// sector short of it): what a file system shows.
    pub byte_size: u64,
    pub layout: FileLayout,
    pub au_bytes: u64,
    /// The group's logical sector: I/O is aligned to it.
    pub sector_bytes: u32,
    /// Copies per extent the file asks for.
    pub copies: u8,
    /// Why the file may not be written (damage found at mount: an AU another
    /// file claims, a cut map), or `None`.
    pub read_only: Option<NotWritable>,
    /// The file has a checksum map (set at publication, exactly: a map is
    /// made with its file, and a file is published again whenever its map
    /// is). A write of a file without one takes no checksums and looks up
    /// nothing more.
    pub has_map: bool,
    chunks: Vec<Arc<Vec<Extent>>>,
    extent_count: usize,
}

impl FileSnapshot {
    /// A snapshot of `extents`, reusing `previous`'s chunks where `changed`
    /// (chunk indices) says nothing changed. `previous: None` builds all.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn build(
        number: u32,
        incarnation: u32,
        size_bytes: u64,
        layout: FileLayout,
        sector_bytes: u32,
        copies: u8,
        read_only: Option<NotWritable>,
        extents: &[Extent],
        previous: Option<(&FileSnapshot, &HashSet<usize>)>,
    ) -> Self {
        let chunk_count = extents.len().div_ceil(SNAPSHOT_CHUNK_EXTENTS);
        let mut chunks = Vec::with_capacity(chunk_count);
        for c in 0..chunk_count {
            let range =
                c * SNAPSHOT_CHUNK_EXTENTS..((c + 1) * SNAPSHOT_CHUNK_EXTENTS).min(extents.len());
            let reuse = previous.and_then(|(p, changed)| {
                let old = p.chunks.get(c)?;
                (p.incarnation == incarnation && !changed.contains(&c) && old.len() == range.len())
                    .then(|| old.clone())
            });
            chunks.push(reuse.unwrap_or_else(|| Arc::new(extents[range].to_vec())));
        }
        Self {
            number,
            incarnation,
            version: previous.map_or(1, |(p, _)| p.version + 1),
            size_bytes,
            byte_size: size_bytes,
            layout,
            au_bytes: layout.au_bytes,
            sector_bytes,
            copies,
            read_only,
            has_map: false,
            chunks,
            extent_count: extents.len(),
        }
    }

    pub fn extent(&self, index: u64) -> Option<&Extent> {
        let i = usize::try_from(index).ok()?;
        self.chunks
            .get(i / SNAPSHOT_CHUNK_EXTENTS)?
            .get(i % SNAPSHOT_CHUNK_EXTENTS)
    }

    pub fn extent_count(&self) -> usize {
        self.extent_count
    }

    pub fn extents(&self) -> impl Iterator<Item = &Extent> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The pieces of `len` bytes at `offset`: (extent, offset in the
    /// extent's AU run, offset in the caller's buffer, length). `None` if the
    /// range is not inside the file or its map.
    pub fn pieces(&self, offset: u64, len: u64) -> Option<Vec<Piece>> {
        let end = offset.checked_add(len)?;
        if end > self.size_bytes {
            return None;
        }
        let mut out = Vec::new();
        let mut done = 0u64;
        while done < len {
            let loc = self.layout.locate(offset + done);
            let run = loc.run_bytes.min(len - done);
            self.extent(loc.extent)?;
            out.push(Piece {
                extent: loc.extent,
                within: loc.offset_in_extent,
                at: done as usize,
                len: run,
            });
            done += run;
        }
        Some(out)
    }

    /// The one piece `len` bytes at `offset` are, if they lie inside one
    /// extent ([`Self::pieces`] would give just this one); `None` for an
    /// empty range, a range past the file's end or its map, or one that
    /// crosses into another extent.
    pub fn one_piece(&self, offset: u64, len: u64) -> Option<Piece> {
        let end = offset.checked_add(len)?;
        if len == 0 || end > self.size_bytes {
            return None;
        }
        let loc = self.layout.locate(offset);
        if loc.run_bytes < len {
            return None;
        }
        self.extent(loc.extent)?;
        Some(Piece {
            extent: loc.extent,
            within: loc.offset_in_extent,
            at: 0,
            len,
        })
    }
}

/// Why a file is not written.
#[derive(Debug, Clone)]
pub enum NotWritable {
    /// Part of its extent map is lost.
    Lost(String),
    /// It claims an AU another file claims too.
    Shared(String),
}

impl NotWritable {
    pub fn error(&self) -> super::error::GroupError {
        match self {
            Self::Lost(m) => super::error::GroupError::Lost(m.clone()),
            Self::Shared(m) => super::error::GroupError::Corrupt(m.clone()),
        }
    }
}

/// A piece of a range: contiguous in the file and in each copy's AU run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub extent: u64,
    /// Offset inside the extent's AU run (the same on every copy).
    pub within: u64,
    /// Offset in the caller's buffer.
    pub at: usize,
    pub len: u64,
}

/// Which member disks the data plane may use, as of one epoch.
#[derive(Debug, Clone, Default)]
pub struct DiskView {
    /// Bumped each time a disk leaves (or joins) the set.
    pub epoch: u64,
    /// By disk number: read and written (ONLINE).
    pub online: Vec<bool>,
    /// By disk number: written (ONLINE, or SYNCING: it must miss nothing
    /// more, but is not read until its resync is done). A copy on a disk
    /// that is neither missed the write and is marked stale first.
    pub writable: Vec<bool>,
    /// By disk number: a member of the group, in any state (a disk whose
    /// drop completed is not: a data handle then lets go of its device).
    pub member: Vec<bool>,
    /// By disk number: the member's device in the metadata plane's engine,
    /// if it has one: what a data handle's engine attaches, read without
    /// `meta` (a handle mid-operation must not wait for it).
    pub devices: Vec<Option<cairn_io::DeviceId>>,
    /// By disk number: the disk's label, for messages.
    pub names: Vec<String>,
}

impl DiskView {
    pub fn is_online(&self, disk: u16) -> bool {
        self.online.get(usize::from(disk)).copied().unwrap_or(false)
    }

    /// The members' devices in the metadata plane's engine, by disk number.
    pub fn member_devices(&self) -> std::collections::BTreeMap<u16, cairn_io::DeviceId> {
        self.devices
            .iter()
            .enumerate()
            .filter_map(|(d, id)| Some((u16::try_from(d).ok()?, (*id)?)))
            .collect()
    }

    pub fn is_member(&self, disk: u16) -> bool {
        self.member.get(usize::from(disk)).copied().unwrap_or(false)
    }

    pub fn is_writable(&self, disk: u16) -> bool {
        self.writable
            .get(usize::from(disk))
            .copied()
            .unwrap_or(false)
    }

    pub fn name(&self, disk: u16) -> String {
        self.names
            .get(usize::from(disk))
            .cloned()
            .unwrap_or_else(|| format!("#{disk}"))
    }
}

/// An extent's latch: (file, incarnation, extent).
pub type LatchKey = (u32, u32, u64);

/// Shards of the latch table: writers to different extents rarely meet on
/// one mutex.
const LATCH_SHARDS: usize = 64;

/// How a taker holds an extent's latch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Alone: a first write (which zeroes the rest of the extent), a copy
    /// repaired, resynced or moved.
    Exclusive,
    /// Beside every other shared holder: an extent's read-modify-write
    /// latch, taken by a write that covers the extent's sectors whole.
    Shared,
    /// Beside other shared holders, but not beside another write of any of
    /// the same file bytes `start..end`. Two writes of one block in flight
    /// at once (two FUSE requests, two handles) reach each copy on their
    /// own, and each disk may apply them in either order: run together,
    /// the copies could keep different writes, and which one a later read
    /// returns would depend on the copy it reads. One after the other,
    /// every copy ends with the later write.
    Write { start: u64, end: u64 },
}

impl Hold {
    /// A write of `len` file bytes from `offset`.
    pub fn write(offset: u64, len: u64) -> Self {
        Hold::Write {
            start: offset,
            end: offset.saturating_add(len),
        }
    }

    /// One hold that grants both: exclusive if either is; else a write
    /// of the bytes both cover (and what lies between), if either writes.
    fn merge(self, other: Hold) -> Hold {
        match (self, other) {
            (Hold::Exclusive, _) | (_, Hold::Exclusive) => Hold::Exclusive,
            (Hold::Write { start: a, end: b }, Hold::Write { start: c, end: d }) => Hold::Write {
                start: a.min(c),
                end: b.max(d),
            },
            (w @ Hold::Write { .. }, Hold::Shared) | (Hold::Shared, w @ Hold::Write { .. }) => w,
            (Hold::Shared, Hold::Shared) => Hold::Shared,
        }
    }
}

/// `keys` sorted, each key once with the hold that grants all it was named
/// with: the order every taker takes them in, so two never deadlock.
fn merged(mut keys: Vec<(LatchKey, Hold)>) -> Vec<(LatchKey, Hold)> {
    keys.sort_unstable_by_key(|k| k.0);
    let mut out: Vec<(LatchKey, Hold)> = Vec::with_capacity(keys.len());
    for (key, hold) in keys {
        match out.last_mut() {
            Some(last) if last.0 == key => last.1 = last.1.merge(hold),
            _ => out.push((key, hold)),
        }
    }
    out
}

/// Holders of one extent's latch.
#[derive(Debug, Default, Clone)]
struct LatchState {
    /// Shared holders, writes among them.
    shared: u32,
    exclusive: bool,
    /// The file bytes of each write holding it, one entry per write: a
    /// write of any of them waits until that one lets go.
    writing: SmallVec<[(u64, u64); 2]>,
    /// Exclusive takers waiting: new shared takers wait behind them, so a
    /// repair or a first write is not starved by a stream of plain writes.
    exclusive_waiting: u32,
    /// Takers of either kind waiting for it: a holder letting go wakes the
    /// shard only when there are (a wake-up is a system call, and a plain
    /// write lets go of a latch every time).
    waiting: u32,
}

impl LatchState {
    /// Nobody holds it or waits for it: its entry may go.
    fn unused(&self) -> bool {
        !self.exclusive && self.shared == 0 && self.exclusive_waiting == 0 && self.waiting == 0
    }

    fn admits(&self, hold: Hold) -> bool {
        match hold {
            Hold::Exclusive => !self.exclusive && self.shared == 0,
            Hold::Shared => !self.exclusive && self.exclusive_waiting == 0,
            Hold::Write { start, end } => {
                !self.exclusive
                    && self.exclusive_waiting == 0
                    && self.writing.iter().all(|&(s, e)| end <= s || e <= start)
            }
        }
    }

    /// Hold it as `hold` (which [`LatchState::admits`]).
    fn take(&mut self, hold: Hold) {
        match hold {
            Hold::Exclusive => self.exclusive = true,
            Hold::Shared => self.shared += 1,
            Hold::Write { start, end } => {
                self.shared += 1;
                self.writing.push((start, end));
            }
        }
    }

    /// Let go of a hold taken as `hold`.
    fn let_go(&mut self, hold: Hold) {
        match hold {
            Hold::Exclusive => self.exclusive = false,
            Hold::Shared => self.shared = self.shared.saturating_sub(1),
            Hold::Write { start, end } => {
                self.shared = self.shared.saturating_sub(1);
                if let Some(at) = self.writing.iter().position(|&w| w == (start, end)) {
                    self.writing.swap_remove(at);
                }
            }
        }
    }
}

/// Aligned to 128 bytes (two cache lines, as the adjacent-line prefetcher
/// pairs them): writers on different CPUs lock different shards, and
/// shards sharing a line would bounce it between them on every write.
#[derive(Debug, Default)]
#[repr(align(128))]
struct LatchShard {
    held: Mutex<FxHashMap<LatchKey, LatchState>>,
    freed: Condvar,
}

/// The shared state of the data plane. One per mounted group.
#[derive(Debug)]
pub struct DataPlane {
    files: RwLock<HashMap<u32, Arc<FileSnapshot>>>,
    disks: RwLock<Arc<DiskView>>,
    latches: Vec<LatchShard>,
    /// Bumped by every publication that may drop AUs from a snapshot.
    epoch: AtomicU64,
    /// Bumped by every publication of a file or of the disk view, after it,
    /// under its write lock: a [`SnapshotCache`] whose entry was checked at
    /// the current value holds what is published.
    generation: AtomicU64,
    guards: Mutex<Vec<Arc<GuardSlot>>>,
    /// Set when the metadata plane stops (a failed commit, too many disks
    /// lost): every data operation then fails with the reason.
    stopped: AtomicBool,
    stop_reason: Mutex<Option<String>>,
    /// The group's `disk_io_timeout`, in milliseconds (0: not set yet).
    io_timeout_ms: AtomicU64,
    /// Freed runs lent to new extents before what may still touch them is
    /// over ([`Lent`]).
    lent: Lent,
    /// Units found failing their checksums, per disk ([`ChecksumCounts`]).
    checksums: ChecksumCounts,
    /// The group's UUID: what its map blocks are sealed with.
    group: uuid::Uuid,
    /// Each file with a checksum map: its checksums as this mount knows
    /// them ([`FileSums`]), by data file number, made on first use. A leaf
    /// mutex held for a lookup or an insert; the tables lock their own.
    sums: Mutex<HashMap<u32, Arc<FileSums>>>,
    /// The checksum log's writer (`sums_log.rs`).
    sums_log: Arc<SumsLog>,
}

/// Whether a publication of `number` withdrew a checksum map (`gone`: no
/// snapshot of it is published now): its file's table goes with it.
fn snapshot_gone_for_map(number: u32, gone: bool) -> bool {
    gone && cairn_format::group::is_map_number(number)
}

/// Per member disk, the units reads found failing their checksums on it,
/// and those rewritten from a good copy (`docs/checksums.md`): what the
/// metrics and `cairn status` show. Counted by data threads as a read judges
/// a unit or heals it; a leaf mutex, held for one count or one copy of the
/// table (rare: only a unit that fails its checksum is counted).
#[derive(Debug, Default)]
pub struct ChecksumCounts {
    by_disk: Mutex<BTreeMap<u16, DiskChecksumCounts>>,
}

/// One disk's [`ChecksumCounts`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DiskChecksumCounts {
    /// Units read from this disk whose bytes matched no checksum.
    pub mismatches: u64,
    /// Of those, rewritten here from a copy that matched.
    pub healed: u64,
}

impl ChecksumCounts {
    /// A unit read from `disk` matched no checksum.
    pub fn mismatched(&self, disk: u16) {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's checksum counts");
        recover(self.by_disk.lock())
            .entry(disk)
            .or_default()
            .mismatches += 1;
    }

    /// A bad unit on `disk` was rewritten from a good copy.
    pub fn healed(&self, disk: u16) {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's checksum counts");
        recover(self.by_disk.lock()).entry(disk).or_default().healed += 1;
    }

    /// The counts now, by disk.
    pub fn by_disk(&self) -> BTreeMap<u16, DiskChecksumCounts> {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's checksum counts");
        recover(self.by_disk.lock()).clone()
    }
}

/// Freed runs lent to new data extents before everything that may still
/// touch them is over (`docs/live-core.md`, "Freed space is lent"): a data
/// operation older than the run's `readers` epoch, or the discard of a
/// batch in flight (`discard`, set once it is over). Until then nothing
/// writes such an extent: it is unwritten (it reads as zeros without I/O),
/// and its first write waits ([`DataPlane::wait_for_lent`]).
///
/// Who changes it: the metadata plane adds a run under `meta`, before the
/// commit that publishes its extent (so a first write that sees the extent
/// sees the run); a first write, and the metadata plane as it releases
/// freed runs, drop the runs they find over. Its mutex is a leaf lock.
#[derive(Debug, Default)]
struct Lent {
    runs: Mutex<Vec<LentRun>>,
    /// `runs.len()`, read without the lock: a first write looks at the
    /// runs only while some are lent.
    count: AtomicU64,
    /// First writes waiting now for lent runs.
    waits: AtomicU64,
    /// Runs lent, and first writes that waited for lent runs, since the
    /// mount.
    lent_total: AtomicU64,
    waited_total: AtomicU64,
}

/// `len` AUs from `start` on disk `disk`, lent to a new extent.
#[derive(Debug, Clone)]
pub(super) struct LentRun {
    pub(super) disk: u16,
    pub(super) start: u32,
    pub(super) len: u32,
    /// Data operations that started in an epoch before this one may still
    /// use the run (its quarantine tag); 0: none.
    pub(super) readers: u64,
    /// The discard of the run, in flight when it was lent: set once over.
    pub(super) discard: Option<Arc<AtomicBool>>,
}

impl LentRun {
    /// Nothing still touches it, no data operation older than `oldest` (the
    /// oldest running, [`DataPlane::oldest_running`]) running.
    fn over(&self, oldest: u64) -> bool {
        self.readers <= oldest
            && self
                .discard
                .as_ref()
                .is_none_or(|d| d.load(Ordering::SeqCst))
    }

    fn overlaps(&self, (disk, start, len): (u16, u32, u32)) -> bool {
        self.disk == disk
            && u64::from(self.start) < u64::from(start) + u64::from(len)
            && u64::from(start) < u64::from(self.start) + u64::from(self.len)
    }
}

// Poisoned locks are recovered (`cairn_io::poison`): a panic while one of
// these short critical sections held the lock left nothing half-changed
// (each is one assignment or one set operation).

impl Default for DataPlane {
    fn default() -> Self {
        Self {
            files: RwLock::default(),
            disks: RwLock::default(),
            latches: (0..LATCH_SHARDS).map(|_| LatchShard::default()).collect(),
            epoch: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            guards: Mutex::default(),
            stopped: AtomicBool::new(false),
            stop_reason: Mutex::default(),
            io_timeout_ms: AtomicU64::new(0),
            lent: Lent::default(),
            checksums: ChecksumCounts::default(),
            group: uuid::Uuid::nil(),
            sums: Mutex::default(),
            sums_log: Arc::default(),
        }
    }
}

impl DataPlane {
    pub fn new() -> Self {
        Self::default()
    }

    /// The plane of group `group` (its UUID seals the maps' blocks).
    pub fn for_group(group: uuid::Uuid) -> Self {
        Self {
            group,
            ..Self::default()
        }
    }

    /// The group's UUID.
    pub fn group_uuid(&self) -> uuid::Uuid {
        self.group
    }

    /// Incarnation `incarnation` of file `number`'s checksums, if it has a
    /// map published and is that incarnation: made empty on first use.
    pub(super) fn file_sums(&self, number: u32, incarnation: u32) -> Option<Arc<FileSums>> {
        // A map has no map of its own: only the users' files have one.
        if !cairn_format::group::is_user_number(number) {
            return None;
        }
        let snap = self.file(number)?;
        let map = self.file(cairn_format::group::map_number(number))?;
        // A map that may not be written (its AUs another file's too, found
        // at mount) is not kept: the file goes without checksums.
        if snap.incarnation != incarnation
            || map.incarnation != incarnation
            || map.read_only.is_some()
        {
            return None;
        }
        let _leaf = lock_order::take(Rank::Leaf, "the plane's checksum tables");
        let mut sums = self.sums.lock_or_recover();
        let entry = sums.entry(number);
        // A new table keeps to the file's size: a map block read past it
        // (left by a shrink a crash kept from its checkpoint) holds zero
        // units there.
        let new = || {
            let units = snap.size_bytes / u64::from(snap.sector_bytes);
            FileSums::sized(incarnation, snap.sector_bytes, units).map(Arc::new)
        };
        let table = match entry {
            Entry::Occupied(mut o) => {
                if o.get().incarnation() != incarnation {
                    o.insert(new()?);
                }
                o.get().clone()
            }
            Entry::Vacant(v) => v.insert(new()?).clone(),
        };
        Some(table)
    }

    /// The checksum log's writer.
    pub(super) fn sums_log(&self) -> &Arc<SumsLog> {
        &self.sums_log
    }

    /// Every file's checksums this mount holds, by data file number.
    pub(super) fn all_sums(&self) -> Vec<(u32, Arc<FileSums>)> {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's checksum tables");
        self.sums
            .lock_or_recover()
            .iter()
            .map(|(n, t)| (*n, t.clone()))
            .collect()
    }

    /// Units found failing their checksums, per disk.
    pub fn checksum_counts(&self) -> &ChecksumCounts {
        &self.checksums
    }

    /// The file's current snapshot.
    pub fn file(&self, number: u32) -> Option<Arc<FileSnapshot>> {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's files");
        self.files.read_or_recover().get(&number).cloned()
    }

    /// The numbers of every published file.
    pub(super) fn file_numbers(&self) -> Vec<u32> {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's files");
        self.files.read_or_recover().keys().copied().collect()
    }

    pub fn disks(&self) -> Arc<DiskView> {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's disk view");
        self.disks.read_or_recover().clone()
    }

    /// Publish (or, with `None`, withdraw) a file's snapshot. Metadata plane only.
    pub(super) fn publish_file(&self, number: u32, snapshot: Option<FileSnapshot>) {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's files");
        let mut files = self.files.write_or_recover();
        match snapshot {
            Some(s) => {
                files.insert(number, Arc::new(s));
            }
            None => {
                files.remove(&number);
            }
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
        drop(files);
        drop(_leaf);
        if snapshot_gone_for_map(number, self.file(number).is_none()) {
            let _leaf = lock_order::take(Rank::Leaf, "the plane's checksum tables");
            self.sums
                .lock_or_recover()
                .remove(&cairn_format::group::mapped_file(number));
        }
    }

    /// Withdraw every file (a remount of the metadata after a failed commit).
    pub(super) fn clear_files(&self) {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's files");
        let mut files = self.files.write_or_recover();
        files.clear();
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Publish a new disk view. Metadata plane only.
    pub(super) fn publish_disks(
        &self,
        online: Vec<bool>,
        writable: Vec<bool>,
        member: Vec<bool>,
        devices: Vec<Option<cairn_io::DeviceId>>,
        names: Vec<String>,
    ) {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's disk view");
        let mut disks = self.disks.write_or_recover();
        if disks.online == online
            && disks.writable == writable
            && disks.member == member
            && disks.devices == devices
            && disks.names == names
        {
            return;
        }
        let epoch = disks.epoch + 1;
        *disks = Arc::new(DiskView {
            epoch,
            online,
            writable,
            member,
            devices,
            names,
        });
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Stop the data plane: every operation from now on fails with `why`.
    pub(super) fn stop(&self, why: &str) {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's stop reason");
        self.stop_reason
            .lock_or_recover()
            .get_or_insert_with(|| why.to_string());
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Whether the group stopped ([`Self::stopped`] says why).
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Why the group stopped, if it did.
    pub fn stopped(&self) -> Option<String> {
        if !self.stopped.load(Ordering::SeqCst) {
            return None;
        }
        let _leaf = lock_order::take(Rank::Leaf, "the plane's stop reason");
        self.stop_reason.lock_or_recover().clone()
    }

    // -- the reuse epoch ------------------------------------------------------

    /// The current publication epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Move the epoch on after a publication that dropped AUs from a
    /// snapshot; returns the new epoch. AUs freed before it may be reused
    /// once no guard is older.
    pub(super) fn advance_epoch(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// A new guard slot for a data handle.
    pub fn guard_slot(&self) -> Arc<GuardSlot> {
        let slot = Arc::new(GuardSlot(AtomicU64::new(IDLE)));
        let _leaf = lock_order::take(Rank::Leaf, "the plane's guard slots");
        self.guards.lock_or_recover().push(slot.clone());
        slot
    }

    /// Forget a handle's slot (the handle is dropped).
    pub fn drop_guard_slot(&self, slot: &Arc<GuardSlot>) {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's guard slots");
        self.guards
            .lock_or_recover()
            .retain(|s| !Arc::ptr_eq(s, slot));
    }

    /// The oldest epoch any running data operation started in, or `u64::MAX`
    /// when none runs: AUs tagged with an epoch at or below it are free of
    /// readers.
    pub fn oldest_running(&self) -> u64 {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's guard slots");
        self.guards
            .lock_or_recover()
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .min()
            .unwrap_or(IDLE)
    }

    /// The I/O timeout data handles give their engines (the group's
    /// `disk_io_timeout`), once the metadata plane has set one.
    pub fn io_timeout(&self) -> Option<Duration> {
        match self.io_timeout_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    pub(super) fn set_io_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.io_timeout_ms.store(ms, Ordering::Relaxed);
    }

    /// How long a drain waits: [`DRAIN_TIMEOUTS_MAX`] I/O timeouts.
    pub fn drain_bound(&self) -> Duration {
        self.io_timeout()
            .unwrap_or(super::limits::DISK_IO_TIMEOUT_DEFAULT)
            .saturating_mul(DRAIN_TIMEOUTS_MAX)
    }

    /// Start a new epoch and wait until every data operation that began in
    /// an earlier one is over (they took the views and snapshots before
    /// now), at most [`DataPlane::drain_bound`]: `false` if some were still
    /// running then. The caller must not hold what such an operation may
    /// need to end (a live group's metadata lock) unless no data thread
    /// runs.
    ///
    /// It blocks on a condition variable that every operation ending
    /// signals while a drain waits (under the interleaving simulator, it
    /// yields instead: the operations are other actors, and run only when
    /// it does; the simulator's own deadlock count bounds it there).
    #[must_use]
    pub(super) fn wait_for_older_operations(&self) -> bool {
        let epoch = self.advance_epoch();
        if self.oldest_running() >= epoch {
            return true;
        }
        self.wait_until_drained(|| self.oldest_running() >= epoch)
    }

    /// Wait, at most the drain bound, until `ready` holds; `false` if it
    /// still does not. Woken by every operation's end and discard batch's
    /// (`wake_drains`) while it waits; under the interleaving simulator it
    /// yields instead (the others are actors that run only when it does).
    fn wait_until_drained(&self, ready: impl Fn() -> bool) -> bool {
        if cairn_io::sched::scheduled() {
            while !ready() {
                cairn_io::sched::blocked();
            }
            cairn_io::sched::resumed();
            return true;
        }
        let deadline = Instant::now() + self.drain_bound();
        // Counted before `ready` is looked at again: what ends after our
        // look sees the count and wakes us (both sides SeqCst).
        DRAINERS.fetch_add(1, Ordering::SeqCst);
        let _drain = lock_order::take(Rank::Drain, "DRAIN");
        let mut lock = DRAIN.lock_or_recover();
        let over = loop {
            if ready() {
                break true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            lock = recover(DRAINED.wait_timeout(lock, left)).0;
        };
        drop(lock);
        DRAINERS.fetch_sub(1, Ordering::SeqCst);
        over
    }

    // -- lent runs ---------------------------------------------------------------

    /// Lend `run` to a new extent ([`Lent`]). Metadata plane only, under
    /// `meta`, before the commit that publishes the extent.
    pub(super) fn lend(&self, run: LentRun) {
        let _leaf = lock_order::take(Rank::Leaf, "the plane's lent runs");
        let mut runs = self.lent.runs.lock_or_recover();
        runs.push(run);
        self.lent.count.store(runs.len() as u64, Ordering::SeqCst);
        self.lent.lent_total.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether any run is lent: a first write looks closer only then.
    pub(crate) fn lends(&self) -> bool {
        self.lent.count.load(Ordering::SeqCst) > 0
    }

    /// Drop the lent runs that nothing touches any more; whether some of
    /// `runs` (disk, first AU, AUs) are still lent and not over.
    pub(crate) fn lent_and_busy(&self, runs: &[(u16, u32, u32)]) -> bool {
        // Read before the runs are: the oldest running operation only
        // grows past a run's epoch (operations start in the current one).
        let oldest = self.oldest_running();
        let _leaf = lock_order::take(Rank::Leaf, "the plane's lent runs");
        let mut lent = self.lent.runs.lock_or_recover();
        lent.retain(|l| !l.over(oldest));
        self.lent.count.store(lent.len() as u64, Ordering::SeqCst);
        lent.iter().any(|l| runs.iter().any(|r| l.overlaps(*r)))
    }

    /// Wait until none of `runs` is lent and still touched by an older data
    /// operation or a discard in flight: before the first write into an
    /// extent that holds them. The caller holds nothing (no latch, no
    /// guard, not `meta`): what it waits for may need none of those, and
    /// ends within [`DataPlane::drain_bound`]; `false` if some were still
    /// touched then. Blocks on [`DRAIN`]'s condition variable, as a drain
    /// does: an operation ending, and a discard batch ending, wake it
    /// ([`wake_drains`]); under the interleaving simulator it yields.
    #[must_use]
    pub(crate) fn wait_for_lent(&self, runs: &[(u16, u32, u32)]) -> bool {
        if !self.lent_and_busy(runs) {
            return true;
        }
        self.lent.waits.fetch_add(1, Ordering::SeqCst);
        self.lent.waited_total.fetch_add(1, Ordering::Relaxed);
        let over = self.wait_until_drained(|| !self.lent_and_busy(runs));
        self.lent.waits.fetch_sub(1, Ordering::SeqCst);
        over
    }

    /// Drop the lent runs that nothing touches any more (the metadata plane,
    /// as it releases freed runs).
    pub(super) fn prune_lent(&self) {
        if self.lends() {
            let _ = self.lent_and_busy(&[]);
        }
    }

    /// First writes waiting now for runs lent to their extents.
    pub fn lent_waits(&self) -> u64 {
        self.lent.waits.load(Ordering::SeqCst)
    }

    /// Runs lent whose older readers or discards may still run (some may be
    /// over, not yet looked at).
    pub fn lent_runs(&self) -> u64 {
        self.lent.count.load(Ordering::SeqCst)
    }

    /// Runs lent since the mount, and first writes that waited for lent
    /// runs.
    pub fn lent_totals(&self) -> (u64, u64) {
        (
            self.lent.lent_total.load(Ordering::Relaxed),
            self.lent.waited_total.load(Ordering::Relaxed),
        )
    }

    // -- latches ----------------------------------------------------------------

    /// Takers waiting for `key`'s latch.
    #[cfg(test)]
    fn waiting(&self, key: &LatchKey) -> u32 {
        self.shard(key)
            .held
            .lock_or_recover()
            .get(key)
            .map_or(0, |s| s.waiting)
    }

    fn shard(&self, key: &LatchKey) -> &LatchShard {
        let h = (u64::from(key.0) << 32 ^ u64::from(key.1)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ key.2.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        &self.latches[(h >> 58) as usize % LATCH_SHARDS]
    }

    /// Take the latches of `keys`, each as its [`Hold`] says, waiting while
    /// a holder excludes us. Keys are taken in sorted order, so two takers
    /// never deadlock; a key named twice is taken once, with a hold that
    /// grants both ([`Hold::merge`]). Held until the guard drops.
    pub fn latch(self: &Arc<Self>, keys: Vec<(LatchKey, Hold)>) -> LatchGuard {
        let rank = lock_order::take(Rank::Latch, "an extent latch");
        let keys = merged(keys);
        for (key, hold) in &keys {
            let shard = self.shard(key);
            let _leaf = lock_order::take(Rank::Leaf, "a latch shard");
            let mut held = shard.held.lock_or_recover();
            let mut queued = false;
            let mut waited = false;
            loop {
                let state = held.entry(*key).or_default();
                if state.admits(*hold) {
                    if queued {
                        state.exclusive_waiting -= 1;
                    }
                    state.take(*hold);
                    break;
                }
                if *hold == Hold::Exclusive && !queued {
                    state.exclusive_waiting += 1;
                    queued = true;
                }
                state.waiting += 1;
                held = if cairn_io::sched::scheduled() {
                    // Under the interleaving simulator the holder cannot run
                    // while we block: yield until it lets go.
                    drop(held);
                    cairn_io::sched::blocked();
                    waited = true;
                    shard.held.lock_or_recover()
                } else {
                    recover(shard.freed.wait(held))
                };
                // Still there: an entry with a waiter is never removed.
                if let Some(state) = held.get_mut(key) {
                    state.waiting -= 1;
                }
            }
            if waited {
                cairn_io::sched::resumed();
            }
        }
        LatchGuard {
            plane: self.clone(),
            keys,
            _rank: rank,
        }
    }

    /// [`Self::latch`], but only if every key can be taken now; `None`
    /// (holding nothing) otherwise. For a caller that must not wait while it
    /// holds latches of its own.
    pub fn try_latch(self: &Arc<Self>, keys: Vec<(LatchKey, Hold)>) -> Option<LatchGuard> {
        let keys = merged(keys);
        let mut taken = LatchGuard {
            plane: self.clone(),
            keys: Vec::with_capacity(keys.len()),
            _rank: lock_order::note(Rank::Latch, "an extent latch"),
        };
        for (key, hold) in keys {
            let shard = self.shard(&key);
            let _leaf = lock_order::take(Rank::Leaf, "a latch shard");
            let mut held = shard.held.lock_or_recover();
            let state = held.entry(key).or_default();
            if !state.admits(hold) {
                if state.unused() {
                    held.remove(&key);
                }
                return None; // `taken` lets go of what it holds
            }
            state.take(hold);
            taken.keys.push((key, hold));
        }
        Some(taken)
    }
}

/// Latches held; let go on drop.
#[derive(Debug)]
pub struct LatchGuard {
    plane: Arc<DataPlane>,
    /// Each key, and how it is held.
    keys: Vec<(LatchKey, Hold)>,
    /// The latch rank this thread holds while the guard lives (dropped
    /// after `drop` let go of the keys, as fields are).
    _rank: lock_order::Held,
}

impl LatchGuard {
    /// Whether `key` is held exclusively by this guard.
    pub fn holds_exclusive(&self, key: &LatchKey) -> bool {
        self.keys
            .iter()
            .any(|(k, h)| k == key && *h == Hold::Exclusive)
    }
}

impl Drop for LatchGuard {
    fn drop(&mut self) {
        for (key, hold) in &self.keys {
            let shard = self.plane.shard(key);
            let _leaf = lock_order::take(Rank::Leaf, "a latch shard");
            let mut held = shard.held.lock_or_recover();
            let (mut gone, mut wake) = (false, false);
            if let Some(state) = held.get_mut(key) {
                state.let_go(*hold);
                gone = state.unused();
                wake = state.waiting > 0;
            }
            if gone {
                held.remove(key);
            }
            drop(held);
            if wake {
                shard.freed.notify_all();
            }
        }
    }
}

/// One data handle's copies of what the plane publishes, so that a thread's
/// operation takes its snapshots without touching a line other threads write
/// (the plane's locks and the shared `Arc`s' counts): each entry is checked
/// against the plane's generation, and taken again from the plane only when
/// something was published since. Owned by one handle; no lock.
#[derive(Default)]
pub struct SnapshotCache {
    /// By file number: the generation it was checked at, the plane's
    /// snapshot, and this handle's copy of it.
    files: FxHashMap<u32, (u64, Arc<FileSnapshot>, Arc<FileSnapshot>)>,
    disks: Option<(u64, Arc<DiskView>, Arc<DiskView>)>,
}

/// Files a [`SnapshotCache`] remembers before it starts again.
const CACHED_FILES_MAX: usize = 256;

impl SnapshotCache {
    /// The file's current snapshot, as [`DataPlane::file`] gives it. The
    /// same `Arc` comes back for as long as the plane's snapshot of the file
    /// is the same one.
    pub fn file(&mut self, plane: &DataPlane, number: u32) -> Option<Arc<FileSnapshot>> {
        self.refresh_file(plane, number).cloned()
    }

    /// The current disk view, as [`DataPlane::disks`] gives it.
    pub fn disks(&mut self, plane: &DataPlane) -> Arc<DiskView> {
        self.refresh_disks(plane).clone()
    }

    /// The current disk view, then the file's current snapshot, borrowed:
    /// [`Self::disks`] and [`Self::file`] without a count taken on either
    /// (for a caller that keeps its own).
    pub fn current(
        &mut self,
        plane: &DataPlane,
        number: u32,
    ) -> Option<(&Arc<FileSnapshot>, &Arc<DiskView>)> {
        self.refresh_disks(plane);
        self.refresh_file(plane, number)?;
        let file = &self.files.get(&number)?.2;
        let disks = &self.disks.as_ref()?.2;
        Some((file, disks))
    }

    fn refresh_file(&mut self, plane: &DataPlane, number: u32) -> Option<&Arc<FileSnapshot>> {
        // The generation first: the snapshot taken after it is at least as
        // new as what it says.
        let now = plane.generation.load(Ordering::SeqCst);
        if self.files.len() >= CACHED_FILES_MAX && !self.files.contains_key(&number) {
            self.files.clear();
        }
        match self.files.entry(number) {
            Entry::Occupied(e) if e.get().0 == now => Some(&e.into_mut().2),
            Entry::Occupied(e) => {
                let Some(shared) = plane.file(number) else {
                    e.remove();
                    return None;
                };
                let entry = e.into_mut();
                if !Arc::ptr_eq(&entry.1, &shared) {
                    entry.2 = Arc::new(FileSnapshot::clone(&shared));
                }
                (entry.0, entry.1) = (now, shared);
                Some(&entry.2)
            }
            Entry::Vacant(v) => {
                let shared = plane.file(number)?;
                let local = Arc::new(FileSnapshot::clone(&shared));
                Some(&v.insert((now, shared, local)).2)
            }
        }
    }

    fn refresh_disks(&mut self, plane: &DataPlane) -> &Arc<DiskView> {
        let now = plane.generation.load(Ordering::SeqCst);
        let entry = match self.disks.take() {
            Some(entry) if entry.0 == now => entry,
            was => {
                let shared = plane.disks();
                let local = match was {
                    Some((_, was, local)) if Arc::ptr_eq(&was, &shared) => local,
                    _ => Arc::new(DiskView::clone(&shared)),
                };
                (now, shared, local)
            }
        };
        &self.disks.insert(entry).2
    }
}

/// A data handle's reuse guard: the epoch its running operation started in,
/// or idle. Its owner writes it at the start and end of every operation, so
/// it has its cache lines to itself (two handles' slots were 24-byte
/// neighbours on the heap, and every I/O of one took the line from the
/// other's CPU).
#[derive(Debug)]
#[repr(align(128))]
pub struct GuardSlot(AtomicU64);

impl std::ops::Deref for GuardSlot {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

impl GuardSlot {
    /// An idle slot's first operation starts: see [`slot_start`].
    pub fn start(&self, plane: &DataPlane) -> u64 {
        slot_start(&self.0, plane)
    }

    /// The oldest operation of this slot's owner is now one of epoch
    /// `oldest`, or none runs (`None`): see [`slot_move_on`].
    pub fn move_on(&self, oldest: Option<u64>) {
        slot_move_on(&self.0, oldest.unwrap_or(IDLE));
    }
}

/// Store in an idle `slot` the epoch an operation starts in, and return it:
/// call before taking the snapshots it will use. The epoch is stored, then
/// checked not to have moved meanwhile: a scan that ran between our reading
/// the epoch and storing it saw the slot idle and may have freed AUs that
/// publications up to the new epoch dropped, so then the new one is stored
/// (the snapshots taken after it no longer name those AUs). One full fence
/// where two stores cost two.
fn slot_start(slot: &AtomicU64, plane: &DataPlane) -> u64 {
    let mut epoch = plane.epoch();
    loop {
        slot.store(epoch, Ordering::SeqCst);
        let now = plane.epoch();
        if now == epoch {
            return epoch;
        }
        epoch = now;
    }
}

/// Move `slot` on to a newer epoch, or idle, as operations end; wake the
/// drains waiting ([`DataPlane::wait_for_older_operations`]). Everything the
/// operations read of their snapshots happens before a scan that sees the
/// new value (release); and SeqCst against a drain's count of itself, so
/// that either the drain sees the new value or this sees the drain and
/// wakes it. Every end of a guard comes here: one that did not wake the
/// drains would leave them to sleep out their bound.
fn slot_move_on(slot: &AtomicU64, value: u64) {
    slot.store(value, Ordering::SeqCst);
    wake_drains();
}

/// Something a drain or a first write into lent runs may wait for ended
/// (an operation, a discard batch): wake them, if any waits. The change is
/// stored (SeqCst) before the call, against the waiter's count of itself.
pub(super) fn wake_drains() {
    if DRAINERS.load(Ordering::SeqCst) > 0 {
        let _drain = lock_order::take(Rank::Drain, "DRAIN");
        let _lock = DRAIN.lock_or_recover();
        DRAINED.notify_all();
    }
}

/// A data operation in progress: its slot says the epoch it started in, so
/// AUs freed after that are not reused under it.
pub struct OperationGuard<'s> {
    slot: &'s AtomicU64,
}

impl<'s> OperationGuard<'s> {
    /// Start an operation: call before taking the snapshots it will use.
    pub fn start(plane: &DataPlane, slot: &'s AtomicU64) -> Self {
        slot_start(slot, plane);
        Self { slot }
    }
}

impl Drop for OperationGuard<'_> {
    fn drop(&mut self) {
        slot_move_on(self.slot, IDLE);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "plane_tests.rs"]
mod tests;
