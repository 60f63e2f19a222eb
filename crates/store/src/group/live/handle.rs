//! [`DataHandle`]: one thread's way to a live group's file bytes, its own
//! engine on the member disks (the data path is `data/`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cairn_io::{AlignedBuf, DeviceId, IoEngine, Op, Request};

use super::shared::{Inner, LiveGroup};
use crate::group::data::{self, DataPort, RMW_LATCH};
use crate::group::error::GroupError;
use crate::group::plane::{DataPlane, DiskView, FileSnapshot, GuardSlot, Hold, SnapshotCache};

impl LiveGroup {
    /// A data handle with an engine of `depth` requests.
    pub fn handle(&self, depth: usize) -> Result<DataHandle, GroupError> {
        // The members and the view's epoch as one: the view is published
        // under `meta`, so a disk that joins after this is seen as a change.
        let (disks, read_only, epoch) = {
            let group = self.inner.meta()?;
            (
                group.member_devices(),
                group.is_read_only(),
                self.inner.plane.disks().epoch,
            )
        };
        let (mut engine, devices) = self.inner.engines.engine(&disks, depth)?;
        let io_timeout = self.inner.plane.io_timeout();
        engine.set_io_timeout(io_timeout);
        Ok(DataHandle {
            slot: self.inner.plane.guard_slot(),
            inner: self.inner.clone(),
            engine,
            io_timeout,
            devices,
            made_from: disks,
            unflushed: BTreeSet::new(),
            spare: Vec::new(),
            snapshots: SnapshotCache::default(),
            read_only,
            depth,
            devices_epoch: epoch,
        })
    }
}

/// One thread's way to a live group's file bytes: its own engine on the
/// member disks. Not shared; make one per thread.
pub struct DataHandle {
    inner: Arc<Inner>,
    engine: Box<dyn IoEngine>,
    /// Member disk number → device in `engine`.
    devices: BTreeMap<u16, DeviceId>,
    /// Member disk number → its device in the metadata plane's engine, as
    /// `engine` was made from: a disk whose device changed since (let go of
    /// when it failed, attached again when found) gets a new engine too.
    made_from: BTreeMap<u16, DeviceId>,
    /// The epoch the running operation started in (see `plane.rs`).
    pub(super) slot: Arc<GuardSlot>,
    /// Disks this handle wrote to since its last sync.
    unflushed: BTreeSet<u16>,
    read_only: bool,
    /// I/O buffers done with, handed out again (at most [`SPARE_MAX`], none
    /// bigger than [`SPARE_BYTES_MAX`]): a small read or write then neither
    /// allocates nor faults in fresh pages.
    spare: Vec<AlignedBuf>,
    /// This handle's copies of the published snapshots.
    snapshots: SnapshotCache,
    /// Requests its engine holds (for a new engine, when disks join).
    depth: usize,
    /// The I/O timeout its engine has: the group's `disk_io_timeout`, as
    /// the plane said when last looked at (each operation's start).
    io_timeout: Option<std::time::Duration>,
    /// The disk view epoch its engine's devices were checked against: a
    /// disk added to the group, or gone from it, since gets the handle a new
    /// engine (between operations: nothing is in flight then).
    devices_epoch: u64,
}

/// Buffers a handle keeps for reuse.
const SPARE_MAX: usize = 16;
/// The biggest buffer a handle keeps for reuse, in bytes.
const SPARE_BYTES_MAX: usize = 1 << 20;

impl DataHandle {
    pub fn read(&mut self, number: u32, offset: u64, buf: &mut [u8]) -> Result<(), GroupError> {
        self.read_checked(number, offset, buf, &|_| true)
    }

    /// A disk joined the group since this handle's engine was made (or,
    /// with `leaves`, one left it): make a new engine with every member
    /// attached (and none that left: the handle lets go of a dropped disk's
    /// device). Called with nothing in flight: as an operation starts
    /// (`leaves`), and between an operation's I/O batches, where only a
    /// join matters (a snapshot may name a disk that joined; a disk that
    /// left is named by none, so its device waits for the next operation).
    /// The members' devices come from the disk view, never from `meta`:
    /// between batches the operation holds its guard, and `meta`'s holder
    /// may be waiting for that guard (`offline_disks`). An engine source
    /// that cannot attach the new disk leaves it out, and an I/O to it then
    /// fails like one to a failed disk.
    fn refresh_devices_on(&mut self, leaves: bool) -> Result<(), GroupError> {
        let io_timeout = self.inner.plane.io_timeout();
        if io_timeout != self.io_timeout {
            self.engine.set_io_timeout(io_timeout);
            self.io_timeout = io_timeout;
        }
        let view = self.inner.plane.disks();
        if view.epoch == self.devices_epoch {
            return Ok(());
        }
        let now = view.member_devices();
        // A member whose device is not the one this engine was made with:
        // let go of (it failed), perhaps attached again under a new one.
        let changed = |d: &u16| now.get(d) != self.made_from.get(d);
        let joined = (0..view.writable.len() as u16)
            .any(|d| view.is_writable(d) && (!self.devices.contains_key(&d) || changed(&d)));
        let gone = |d: &u16| !view.is_member(*d) || changed(d);
        let left = leaves && self.devices.keys().any(gone);
        if !joined && !left {
            // A leave seen between batches waits for the operation's end.
            if leaves || !self.devices.keys().any(gone) {
                self.devices_epoch = view.epoch;
            }
            return Ok(());
        }
        self.devices_epoch = view.epoch;
        let (mut engine, devices) = self.inner.engines.engine(&now, self.depth)?;
        engine.set_io_timeout(self.io_timeout);
        self.engine = engine;
        self.devices = devices;
        self.made_from = now;
        Ok(())
    }

    fn refresh_devices(&mut self) -> Result<(), GroupError> {
        self.refresh_devices_on(true)
    }

    /// Whether member `disk`'s device answers: its first block reads.
    pub(super) fn answers(&mut self, disk: u16) -> bool {
        let Some(device) = self.devices.get(&disk).copied() else {
            return false;
        };
        self.engine
            .read_at(device, 0, cairn_format::meta::BLOCK_BYTES)
            .is_ok()
    }

    /// The disk view epoch this handle last checked its devices against.
    /// Behind the plane's (`plane().disks().epoch`), the group's disks
    /// changed since (one joined or left, or changed state): its next I/O
    /// looks again, and may make a new engine. A pool of idle handles drops
    /// such ones, so that none keeps a dropped disk's device open.
    pub fn devices_epoch(&self) -> u64 {
        self.devices_epoch
    }

    /// Read, accepting a copy only if `accept` passes on the whole buffer.
    pub fn read_checked(
        &mut self,
        number: u32,
        offset: u64,
        buf: &mut [u8],
        accept: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(), GroupError> {
        self.refresh_devices()?;
        let slot = self.slot.clone();
        data::read(self, Some(&slot), number, offset, buf, accept, None)
    }

    /// Write to every online copy; acknowledged when all have it (or the
    /// disks that failed are offline).
    pub fn write(&mut self, number: u32, offset: u64, bytes: &[u8]) -> Result<(), GroupError> {
        if self.read_only {
            return Err(GroupError::ReadOnly(self.inner.meta()?.name().to_string()));
        }
        self.refresh_devices()?;
        let slot = self.slot.clone();
        data::write(self, Some(&slot), number, offset, bytes)
    }

    /// Write `bytes` at any byte `offset` inside the file's sectors (a
    /// file system's write). Whole sectors go as they are; a sector the
    /// write covers only in part is read, patched and written back, with
    /// its extent's read-modify-write latch held exclusively from the read
    /// to the end of the write — every `write_bytes` to the extent takes
    /// that latch (shared when it has no partial sector), so no other
    /// write lands between the read and the write back and is lost.
    pub fn write_bytes(
        &mut self,
        number: u32,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), GroupError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let snap = self
            .file(number)
            .ok_or_else(|| GroupError::NotFound(format!("file {number} does not exist")))?;
        let sector = u64::from(snap.sector_bytes);
        let len = bytes.len() as u64;
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= snap.size_bytes)
            .ok_or_else(|| {
                GroupError::Invalid(format!(
                    "write at offset {offset} length {len} goes past the end of the file ({} bytes); resize it first",
                    snap.size_bytes
                ))
            })?;
        let start = offset - offset % sector;
        let stop = end.next_multiple_of(sector);
        // The sectors covered in part: the first, the last (one, when the
        // write lies inside a sector).
        let mut partial: Vec<u64> = [
            (!offset.is_multiple_of(sector)).then_some(start),
            (!end.is_multiple_of(sector)).then_some(stop - sector),
        ]
        .into_iter()
        .flatten()
        .collect();
        partial.dedup();
        let pieces = snap.pieces(start, stop - start).ok_or_else(|| {
            GroupError::Corrupt(format!(
                "file {number}: its extent map does not cover {start}..{stop}"
            ))
        })?;
        let partial_extents: BTreeSet<u64> = partial
            .iter()
            .map(|at| snap.layout.locate(*at).extent)
            .collect();
        let keys = pieces
            .iter()
            .map(|p| {
                let hold = if partial_extents.contains(&p.extent) {
                    Hold::Exclusive
                } else {
                    Hold::Shared
                };
                ((number, snap.incarnation, RMW_LATCH | p.extent), hold)
            })
            .collect();
        let _rmw = self.inner.plane.latch(keys);
        if partial.is_empty() {
            return self.write(number, offset, bytes);
        }
        let mut buf = vec![0u8; (stop - start) as usize];
        for at in &partial {
            let i = (at - start) as usize;
            self.read(number, *at, &mut buf[i..i + sector as usize])?;
        }
        let from = (offset - start) as usize;
        buf[from..from + bytes.len()].copy_from_slice(bytes);
        self.write(number, start, &buf)
    }

    /// Make `len` bytes at `offset` of the file read as zeros, keeping its
    /// size and its AUs: `fallocate(PUNCH_HOLE | KEEP_SIZE)` with
    /// `discard`, `ZERO_RANGE` without. Extents the range covers whole
    /// become unwritten again, their AUs discarded on the member disks with
    /// `discard` ([`data::punch_extents`]). The rest of the range, in
    /// written extents, is zeroed in place on every copy
    /// ([`data::zero_parts`]), and sectors it covers in part are written.
    /// A range past the end stops there.
    pub fn punch(
        &mut self,
        number: u32,
        offset: u64,
        len: u64,
        discard: bool,
    ) -> Result<data::Punched, GroupError> {
        if self.read_only {
            return Err(GroupError::ReadOnly(self.inner.meta()?.name().to_string()));
        }
        self.refresh_devices()?;
        let snap = self
            .file(number)
            .ok_or_else(|| GroupError::NotFound(format!("file {number} does not exist")))?;
        let end = offset.saturating_add(len).min(snap.size_bytes);
        let mut done = data::Punched::default();
        if offset >= end {
            return Ok(done);
        }
        // Sectors covered in part: written with zeros (read, patched, written).
        let sector = u64::from(snap.sector_bytes);
        let (first, last) = (offset.next_multiple_of(sector), end - end % sector);
        let edges = if first >= last {
            vec![(offset, end)]
        } else {
            vec![(offset, first), (last, end)]
        };
        // (Not in an unwritten extent: it reads as zeros already, and a
        // write there would be its first, zeroing it whole.)
        let written = |at: u64| {
            snap.extent(snap.layout.locate(at).extent)
                .is_some_and(|e| e.initialized)
        };
        for (a, b) in edges.into_iter().filter(|(a, b)| a < b && written(*a)) {
            self.write_bytes(number, a, &vec![0u8; (b - a) as usize])?;
            done.zeroed_bytes += b - a;
        }
        if first >= last {
            return Ok(done);
        }
        let pieces = snap.pieces(first, last - first).ok_or_else(|| {
            GroupError::Corrupt(format!(
                "file {number}: its extent map does not cover {first}..{last}"
            ))
        })?;
        // Bytes of each extent the range covers: all of them (fine striping
        // deals an extent out in stripe units), or only some.
        let mut covered: BTreeMap<u64, u64> = BTreeMap::new();
        for p in &pieces {
            *covered.entry(p.extent).or_default() += p.len;
        }
        let whole: Vec<u64> = covered
            .iter()
            .filter(|(e, n)| **n == snap.layout.extent_bytes(**e))
            .map(|(e, _)| *e)
            .collect();
        let parts: Vec<(u64, u64, u64)> = pieces
            .iter()
            .filter(|p| whole.binary_search(&p.extent).is_err())
            .map(|p| (p.extent, p.within, p.len))
            .collect();
        let slot = self.slot.clone();
        if !parts.is_empty() {
            done.zeroed_bytes +=
                data::zero_parts(self, Some(&slot), number, snap.incarnation, &parts, discard)?;
        }
        let punched =
            data::punch_extents(self, Some(&slot), number, snap.incarnation, &whole, discard)?;
        done.extents = punched.extents;
        done.discarded_bytes = punched.discarded_bytes;
        Ok(done)
    }

    /// Make every write any handle of the group had acknowledged durable:
    /// a flush of every member disk this handle reaches (a flush covers
    /// what any writer completed on the device). For a caller that cannot
    /// tell which handle wrote (a file system's `fsync`).
    pub fn sync_all(&mut self) -> Result<(), GroupError> {
        self.refresh_devices()?;
        let view = self.inner.plane.disks();
        let writable: Vec<u16> = self
            .devices
            .keys()
            .copied()
            .filter(|d| view.is_writable(*d))
            .collect();
        self.unflushed.extend(writable);
        self.sync()
    }

    /// The checksum log's records naming every write of the group that
    /// ended (of any handle), with a flush of every member disk; nothing
    /// when the group keeps no checksums or nothing is new.
    pub(crate) fn sync_log(&mut self) -> Result<(), GroupError> {
        let log = self.inner.plane.sums_log().clone();
        if !log.has_log() {
            return Ok(());
        }
        // Every disk the runs' data may be on is flushed: a disk that
        // joined since this handle was made is attached first.
        self.refresh_devices()?;
        log.sync(self)
    }

    /// Make this handle's acknowledged writes durable (`fsync`): first the
    /// checksum log's records naming every write that ended (of any
    /// handle), with a flush of every member disk, when the group keeps
    /// checksums; then the disks this handle wrote.
    pub fn sync(&mut self) -> Result<(), GroupError> {
        self.sync_log()?;
        let disks: Vec<u16> = self.unflushed.iter().copied().collect();
        let mut requests = Vec::new();
        let mut of = Vec::new();
        let mut failed = data::FailedDisks::new();
        for disk in &disks {
            match self.devices.get(disk) {
                Some(device) => {
                    of.push(*disk);
                    requests.push(Request {
                        device: *device,
                        tag: requests.len() as u64,
                        op: Op::Flush,
                    });
                }
                // Written through this handle, yet not flushable by it: it
                // cannot say the writes are durable.
                None => {
                    failed.insert(
                        *disk,
                        "written through a data handle that no longer holds its device, so not flushed".into(),
                    );
                }
            }
        }
        let view = self.inner.plane.disks();
        // On an engine error the disks stay unflushed: a later sync tries again.
        let completions = self
            .engine
            .execute_all(requests)
            .map_err(crate::group::error::io_err("(engine)"))?;
        for (d, c) in of.into_iter().zip(completions) {
            if let Err(e) = &c.result {
                failed
                    .entry(d)
                    .or_insert_with(|| crate::group::disk_states::failure_reason(e));
            }
        }
        self.unflushed.clear();
        if failed.is_empty() {
            return Ok(());
        }
        self.disks_failed(&failed, view.epoch)
    }

    /// Make every extent of the file initialised (zeroing the ones never
    /// written), as a caller about to read all of it wants: reads of a
    /// never-written extent return zeros without touching a disk.
    pub fn initialize_file(&mut self, number: u32) -> Result<u64, GroupError> {
        if self.read_only {
            return Err(GroupError::ReadOnly(self.inner.meta()?.name().to_string()));
        }
        self.refresh_devices()?;
        let slot = self.slot.clone();
        data::initialize(self, Some(&slot), number)
    }

    /// The file's current snapshot, if it exists.
    pub fn file(&self, number: u32) -> Option<Arc<FileSnapshot>> {
        self.inner.plane.file(number)
    }
}

impl DataHandle {
    /// Its engine, and each member disk's device in it: for I/O made
    /// outside the data path (the group's discard drain).
    pub(super) fn engine_and_devices(&mut self) -> (&mut dyn IoEngine, &BTreeMap<u16, DeviceId>) {
        (&mut *self.engine, &self.devices)
    }
}

impl Drop for DataHandle {
    fn drop(&mut self) {
        self.inner.plane.drop_guard_slot(&self.slot);
    }
}

impl DataPort for DataHandle {
    fn plane(&self) -> &Arc<DataPlane> {
        &self.inner.plane
    }
    fn engine(&mut self) -> &mut dyn IoEngine {
        &mut *self.engine
    }
    fn device(&self, disk: u16) -> Option<DeviceId> {
        self.devices.get(&disk).copied()
    }
    fn may_write(&self) -> bool {
        !self.read_only
    }
    fn wrote(&mut self, disk: u16) {
        self.unflushed.insert(disk);
    }
    fn mark_initialized(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, cairn_format::group::Extent)],
        written: &BTreeSet<u16>,
    ) -> Result<(), GroupError> {
        self.inner.operation(|group| {
            DataPort::mark_initialized(group, file, incarnation, extents, written)
        })?
    }
    fn mark_unwritten(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, cairn_format::group::Extent)],
    ) -> Result<Vec<u64>, GroupError> {
        self.inner
            .operation(|group| DataPort::mark_unwritten(group, file, incarnation, extents))?
    }
    fn mark_stale(
        &mut self,
        file: u32,
        incarnation: u32,
        marks: &[crate::group::data::StaleMark],
    ) -> Result<(), GroupError> {
        self.inner.operation(|group| {
            group.check_writable()?;
            group.set_stale_in_steps(file, incarnation, marks)
        })?
    }
    fn missed_writes(&mut self, disks: &BTreeSet<u16>) {
        // Not an operation: the group has stopped, and only records this.
        if let Ok(mut group) = self.inner.meta() {
            group.missed_writes(disks);
        }
    }
    fn checkpoint_maps(&mut self) -> Result<(), GroupError> {
        self.inner.operation(|group| group.checkpoint_maps())?
    }
    fn disks_failed(&mut self, disks: &data::FailedDisks, epoch: u64) -> Result<(), GroupError> {
        // Another thread may have taken them offline since: once is enough.
        self.inner
            .operation(|group| group.disks_failed(disks, epoch))?
    }
    fn snapshot(&mut self, number: u32) -> Option<Arc<FileSnapshot>> {
        let snap = self.snapshots.file(&self.inner.plane, number);
        // A snapshot may name a disk that joined after this operation
        // began (a rebalance moved a copy there): its join bumped the view
        // before that snapshot was published, so looking after the fetch
        // finds it. Snapshots are taken between I/O batches, with nothing
        // in flight. A failure here (the group stopped) shows in the I/O.
        let _ = self.refresh_devices_on(false);
        snap
    }
    fn disk_view(&mut self) -> Arc<DiskView> {
        self.snapshots.disks(&self.inner.plane)
    }
    fn buffer(&mut self, len: usize) -> AlignedBuf {
        // The smallest spare that holds it: a big one stays for a big I/O.
        let fits = self
            .spare
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match fits {
            Some(i) => {
                let mut buf = self.spare.swap_remove(i);
                buf.set_len(len);
                buf
            }
            None => AlignedBuf::zeroed(len),
        }
    }
    fn recycle(&mut self, buf: AlignedBuf) {
        if self.spare.len() < SPARE_MAX && buf.capacity() <= SPARE_BYTES_MAX {
            self.spare.push(buf);
        }
    }
}
