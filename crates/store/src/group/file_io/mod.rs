//! The data plane as a completion-based engine: each device of a [`FileIo`]
//! is a file of a live group (or a plain device passed through), so a caller
//! with many requests in flight — a benchmark worker, later the service's
//! FUSE threads — drives group files exactly as it drives disks.
//!
//! It follows the data path's rules (`data.rs`, `docs/live-core.md`) with the
//! same snapshots, disk view, latches and guards:
//! - a request takes its file's current snapshot and the disk view when it is
//!   submitted, and its guard epoch holds freed AUs back until it completes;
//! - a read goes to the primary online copy of each piece; a piece that fails
//!   is sent to its next copy, and once the request is done the range is read
//!   again through the synchronous path, which rewrites the bad copy;
//! - a write holds its extents' latches (shared, but one at a time over the
//!   same bytes: `Hold::Write`) until it completes and goes
//!   to every online copy; copies that failed have their disks taken offline
//!   (by the metadata plane) before the request completes, and a piece that
//!   reached no copy fails it;
//! - a flush goes to every member disk the file uses;
//! - the slow paths — a write into an extent never written (the first write
//!   zeroes, then the metadata plane marks it), a write of a file with a
//!   checksum map (its checksums change with its bytes), a repair — wait until this
//!   engine has nothing in flight (so it holds no latch) and then run through
//!   a synchronous [`DataHandle`] of the same group.
//!
//! Its own engine does the I/O (`inner`); completions are the caller's
//! requests, in the order they finish.
//!
//! Per I/O it touches no line another thread writes: it takes the snapshots
//! from its own copies ([`SnapshotCache`]), borrows its mappings (a clone
//! would count on the plane's shared `Arc`), and stores its guard slot only
//! when the oldest epoch in flight changes (at QD32, about never). The
//! common read — one piece of a written extent, from its first readable
//! copy — is planned and sent without the general path's lists; its plan is
//! made again from the same snapshot only if it fails ([`next_copy`]).
//! bench/data-plane.sh measures this path against the raw devices at QD32.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_format::group::AuAddr;
use cairn_io::engine::validate;
use cairn_io::{
    AlignedBuf, Completion, DeviceId, EngineStats, Geometry, IoEngine, IoError, Op, OpKind,
    Request, SubmitError,
};
use slab::Slab;

use super::data::{at, aus_touched, common_read, readable_copies_of, DataPort, StaleMark};
use super::live::{DataHandle, LiveGroup};
use super::plane::{DiskView, FileSnapshot, GuardSlot, LatchGuard, SnapshotCache};

mod plan;

const EIO: i32 = 5;
const E2BIG: i32 = 7;
const EAGAIN: i32 = 11;
const ENXIO: i32 = 6;
const EROFS: i32 = 30;
const EOPNOTSUPP: i32 = 95;

/// What one device of a [`FileIo`] is.
pub enum Mapping {
    /// A device of the inner engine, passed through as it is.
    Direct(DeviceId),
    /// A file of a live group: the inner engine's device for each member
    /// disk, and the geometry the caller sees (the file's size at open, the
    /// group's sector).
    GroupFile {
        group: LiveGroup,
        number: u32,
        disks: BTreeMap<u16, DeviceId>,
        geometry: Geometry,
    },
}

/// One caller request in flight.
struct Pending {
    device: DeviceId,
    tag: u64,
    kind: OpKind,
    offset: u64,
    len: u64,
    outstanding: usize,
    buf: Option<AlignedBuf>,
    error: Option<IoError>,
    /// The publication epoch it started in (for the guard), if a group file.
    epoch: Option<u64>,
    /// For reads: the plan (in [`FileIo::plans`]) it was made from, from
    /// which a failed piece's next copy is found again ([`next_copy`]).
    read_from: Option<usize>,
    /// For writes and flushes: what they keep until they complete.
    writing: Option<Box<Writing>>,
    /// A read piece was served by a later copy: repair once done.
    needs_repair: bool,
    /// The disk view's epoch the request used.
    view_epoch: u64,
    /// The group file, by its index among the devices.
    file_device: Option<usize>,
}

/// What a write or a flush keeps until it completes; apart from
/// [`Pending`], so that a read, the common request, moves and drops less.
#[derive(Default)]
struct Writing {
    /// Held until it completes (a write's holds on its extents' latches).
    latch: Option<LatchGuard>,
    /// Disks a write or flush failed on, to be taken offline before
    /// completion.
    failed_disks: super::data::FailedDisks,
    /// Copies a write failed on: marked stale before their disks go
    /// offline. With the file's incarnation the write used.
    missed: Vec<StaleMark>,
    incarnation: u32,
    /// For writes: per piece, the copies that landed.
    landed: Vec<u8>,
}

impl Writing {
    /// A write of piece `piece` to one copy, on `disk`, finished: it
    /// landed, or the copy is to be marked stale and its disk taken offline.
    #[inline]
    fn copy_done(
        &mut self,
        piece: usize,
        disk: u16,
        mark: StaleMark,
        result: Result<u64, IoError>,
    ) {
        match result {
            Ok(_) => self.landed[piece] += 1,
            Err(e) => {
                self.disk_failed(disk, &e);
                self.missed.push(mark);
            }
        }
    }

    /// A write or flush failed on `disk`: it goes offline before the
    /// request completes (the first failure says why).
    #[inline]
    fn disk_failed(&mut self, disk: u16, e: &IoError) {
        self.failed_disks
            .entry(disk)
            .or_insert_with(|| super::disk_states::failure_reason(e));
    }
}

/// A snapshot and disk view that reads in flight were planned from: what a
/// failed piece's next copy is chosen from ([`next_copy`]). Counted by its
/// engine alone, so that a read takes and lets go of one without touching
/// the snapshots' shared counts.
struct Plan {
    snap: Arc<FileSnapshot>,
    view: Arc<DiskView>,
    /// Reads in flight planned from it.
    reads: usize,
}

/// One inner request.
struct Inner {
    parent: usize,
    role: Role,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The caller's own buffer: hand it back.
    Caller,
    /// A read of piece `piece` from its copy `copy`: into the caller's own
    /// buffer (`caller`, a request that is one piece), or into its own,
    /// copied into the caller's at `at`.
    ReadPiece {
        piece: usize,
        copy: usize,
        at: usize,
        caller: bool,
    },
    /// A write of piece `piece` to one copy, on `disk`, from the caller's
    /// own buffer (`caller`) or a copy of it.
    WriteCopy {
        piece: usize,
        disk: u16,
        caller: bool,
        /// What to mark stale if this write fails.
        mark: StaleMark,
    },
    /// A flush of `disk`.
    Flush { disk: u16 },
}

/// See the module documentation.
pub struct FileIo {
    inner: Box<dyn IoEngine>,
    /// Shared only with this engine's own planning (an `Arc` so that a
    /// plan can hold a mapping while it calls `&mut self` methods without
    /// cloning what it maps to: the group's plane and its counts are
    /// shared with every other thread's handles).
    devices: Arc<[Mapping]>,
    /// Per device index: the device index of its group's first file (its
    /// own index for a direct device).
    group_keys: Vec<usize>,
    /// Per device index of a group's first file: this engine's copies of
    /// what the group's plane publishes, so that planning a request
    /// touches no line another thread writes.
    snapshots: Vec<SnapshotCache>,
    /// The plans of the reads in flight (see [`Plan`]).
    plans: Slab<Plan>,
    /// Per device index: the plan its newest read was made from, kept for
    /// the next while the file's snapshot and the disk view stay the same.
    newest_plan: Vec<Option<usize>>,
    depth_max: usize,
    pending: Slab<Pending>,
    pieces: Slab<Inner>,
    ready: VecDeque<Completion>,
    /// Per group (by device index of its first file): the slot, and the
    /// epochs of the requests in flight.
    guards: BTreeMap<usize, (Arc<GuardSlot>, BTreeMap<u64, usize>)>,
    /// Synchronous handles for the slow paths, made on first need, per
    /// device index of the group's first file.
    slow: BTreeMap<usize, DataHandle>,
    /// Ranges read from a later copy after an error: (device index,
    /// offset, length), read again through the synchronous path (which
    /// rewrites the bad copy) once nothing is in flight.
    repairs: Vec<(usize, u64, u64)>,
    /// Per device index: a file of a group mounted read-only (as a
    /// [`DataHandle`] of it, taken when made: its writes are refused).
    read_only: Vec<bool>,
    requests: u64,
    bytes_read: u64,
    bytes_written: u64,
}

impl FileIo {
    /// Wrap `inner`, whose depth must allow for the fan-out (copies × the
    /// most pieces one request can span, per request). Device `i` of the
    /// result is `devices[i]`.
    pub fn new(inner: Box<dyn IoEngine>, devices: Vec<Mapping>, depth_max: usize) -> Self {
        let mut guards = BTreeMap::new();
        let mut group_keys = Vec::with_capacity(devices.len());
        for (i, m) in devices.iter().enumerate() {
            let key = match m {
                Mapping::GroupFile { group, .. } => {
                    let first = Self::group_key_of(&devices, group).unwrap_or(i);
                    guards
                        .entry(first)
                        .or_insert_with(|| (group.plane().guard_slot(), BTreeMap::new()));
                    first
                }
                Mapping::Direct(_) => i,
            };
            group_keys.push(key);
        }
        // A read-only mount publishes snapshots like any other; only the
        // handles know not to write. Ask once, as `LiveGroup::handle` does.
        let read_only = devices
            .iter()
            .map(|m| match m {
                Mapping::GroupFile { group, .. } => {
                    group.meta(|g| g.is_read_only()).unwrap_or(true)
                }
                Mapping::Direct(_) => false,
            })
            .collect();
        let snapshots = devices.iter().map(|_| SnapshotCache::default()).collect();
        let newest_plan = vec![None; devices.len()];
        Self {
            inner,
            devices: devices.into(),
            group_keys,
            snapshots,
            plans: Slab::new(),
            newest_plan,
            depth_max: depth_max.max(1),
            pending: Slab::new(),
            pieces: Slab::new(),
            ready: VecDeque::new(),
            guards,
            slow: BTreeMap::new(),
            repairs: Vec::new(),
            read_only,
            requests: 0,
            bytes_read: 0,
            bytes_written: 0,
        }
    }

    /// What must hold between calls, checked (the tests call it after every
    /// step; its cost is a walk over what is in flight):
    /// - every piece in flight belongs to a request in flight, and every
    ///   request in flight has as many pieces in flight as it waits for;
    /// - per group, the epochs counted as in flight are exactly those of its
    ///   requests in flight, and its guard slot holds the oldest of them
    ///   (idle when there are none);
    /// - every plan is used by as many reads in flight as it counts, and one
    ///   used by none is some file's newest;
    /// - nothing is in flight beyond the engine's depth.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut pieces_of: BTreeMap<usize, usize> = BTreeMap::new();
        for (key, piece) in &self.pieces {
            if !self.pending.contains(piece.parent) {
                return Err(format!("piece {key} belongs to no request in flight"));
            }
            *pieces_of.entry(piece.parent).or_default() += 1;
        }
        let mut epochs: BTreeMap<usize, BTreeMap<u64, usize>> = BTreeMap::new();
        let mut reads_of: BTreeMap<usize, usize> = BTreeMap::new();
        for (key, p) in &self.pending {
            let pieces = pieces_of.get(&key).copied().unwrap_or(0);
            if pieces != p.outstanding {
                return Err(format!(
                    "request {key} waits for {} pieces, {pieces} are in flight",
                    p.outstanding
                ));
            }
            if let (Some(file), Some(epoch)) = (p.file_device, p.epoch) {
                *epochs
                    .entry(self.group_keys[file])
                    .or_default()
                    .entry(epoch)
                    .or_default() += 1;
            }
            if let Some(plan) = p.read_from {
                *reads_of.entry(plan).or_default() += 1;
            }
        }
        for (key, (slot, counted)) in &self.guards {
            let actual = epochs.remove(key).unwrap_or_default();
            if *counted != actual {
                return Err(format!(
                    "group {key}: epochs counted in flight {counted:?}, requests hold {actual:?}"
                ));
            }
            let oldest = counted.keys().next().copied().unwrap_or(u64::MAX);
            let stored = slot.load(std::sync::atomic::Ordering::SeqCst);
            if stored != oldest {
                return Err(format!(
                    "group {key}: guard slot holds {stored}, the oldest epoch in flight is {oldest}"
                ));
            }
        }
        if let Some(key) = epochs.keys().next() {
            return Err(format!("group {key} has requests in flight but no guard"));
        }
        for (key, plan) in &self.plans {
            let reads = reads_of.remove(&key).unwrap_or(0);
            if plan.reads != reads {
                return Err(format!(
                    "plan {key} counts {} reads, {reads} use it",
                    plan.reads
                ));
            }
            if reads == 0 && !self.newest_plan.contains(&Some(key)) {
                return Err(format!("plan {key} is used by nothing and kept"));
            }
        }
        if let Some(key) = reads_of.keys().next() {
            return Err(format!("a read uses plan {key}, which is gone"));
        }
        if self.in_flight() > self.depth_max {
            return Err(format!(
                "{} in flight past the depth {}",
                self.in_flight(),
                self.depth_max
            ));
        }
        Ok(())
    }

    /// Inner requests one request of at most `max_len` bytes on a file of
    /// `copies` copies, over `disks` member disks, can become.
    pub fn fan_out(copies: usize, disks: usize, unit_bytes: u64, max_len: u64) -> usize {
        (copies * (max_len.div_ceil(unit_bytes.max(1)) as usize + 1))
            .max(disks)
            .max(1)
    }

    /// The device index of the first file of `group` (groups are told apart
    /// by their data plane).
    fn group_key_of(devices: &[Mapping], group: &LiveGroup) -> Option<usize> {
        devices.iter().position(|m| match m {
            Mapping::GroupFile { group: g, .. } => Arc::ptr_eq(g.plane(), group.plane()),
            Mapping::Direct(_) => false,
        })
    }

    fn group_key(&self, device: usize) -> usize {
        self.group_keys[device]
    }

    /// Note a request starting in the current epoch of its group's plane.
    fn guard_start(&mut self, device: usize) -> u64 {
        let key = self.group_key(device);
        let Mapping::GroupFile { group, .. } = &self.devices[device] else {
            return 0;
        };
        guard_start_in(&mut self.guards, key, group.plane())
    }

    fn guard_end(&mut self, device: usize, epoch: u64) {
        let key = self.group_key(device);
        guard_end_in(&mut self.guards, key, epoch);
    }

    /// A request is over: its guard epoch ends, and the plan a read was
    /// made from goes once no read uses it and it is no longer its file's
    /// newest. Every completion comes here, the common read's included.
    fn let_go(&mut self, done: &Pending) {
        let Some(file) = done.file_device else {
            return;
        };
        if let Some(epoch) = done.epoch {
            self.guard_end(file, epoch);
        }
        let Some(plan) = done.read_from else {
            return;
        };
        let Some(p) = self.plans.get_mut(plan) else {
            return;
        };
        p.reads -= 1;
        if p.reads == 0 && self.newest_plan[file] != Some(plan) {
            self.plans.remove(plan);
        }
    }

    /// Hand one inner request of caller request `parent` to the inner
    /// engine.
    fn submit_piece(&mut self, parent: usize, mut inner: Request, role: Role) {
        let key = self.pieces.insert(Inner { parent, role });
        inner.tag = key as u64;
        if let Err(SubmitError::QueueFull(inner)) = self.inner.submit(inner) {
            // Counted before, so this is the inner engine's own doing:
            // fail the piece rather than lose it.
            self.pieces.remove(key);
            let p = &mut self.pending[parent];
            p.error.get_or_insert(IoError::Engine { errno: EAGAIN });
            if matches!(
                role,
                Role::Caller
                    | Role::ReadPiece { caller: true, .. }
                    | Role::WriteCopy { caller: true, .. }
            ) {
                p.buf = inner_buf(inner.op);
            }
            p.outstanding -= 1;
            if p.outstanding == 0 {
                let done = self.pending.remove(parent);
                self.finish(done);
            }
        }
    }

    /// The common read, planned without the general path's lists and
    /// without a clone of its mapping (whose counts every other thread's
    /// handles of the group share): one piece, in a written extent, from
    /// its first readable copy ([`readable_copies_of`], the general path's
    /// choice too). Anything else — a refusal included — is handed back,
    /// for the general path to decide from the start.
    fn submit_common_read(&mut self, index: usize, request: Request) -> Result<(), Request> {
        let Self {
            devices,
            group_keys,
            snapshots,
            guards,
            inner,
            plans,
            newest_plan,
            ..
        } = self;
        let Some(Mapping::GroupFile {
            group,
            number,
            disks,
            geometry,
        }) = devices.get(index)
        else {
            return Err(request);
        };
        let plane = group.plane();
        if !matches!(request.op, Op::Read { .. })
            || validate(geometry, &request.op).is_err()
            || plane.is_stopped()
            || inner.in_flight() + 1 > inner.depth_max()
        {
            return Err(request);
        }
        let (offset, len) = request.op.range();
        let key = group_keys[index];
        let epoch = guard_start_in(guards, key, plane);
        let planned = snapshots[key]
            .current(plane, *number)
            .and_then(|(snap, view)| {
                let (piece, mut copies) = common_read(snap, view, offset, len)?;
                // Every copy's disk attached, as the general path demands (a
                // fall-back must find the next copy's disk too).
                if !copies.clone().all(|c| disks.contains_key(&c.disk)) {
                    return None;
                }
                let c = copies.next()?;
                let disk_device = *disks.get(&c.disk)?;
                let plan = take_plan(plans, &mut newest_plan[index], snap, view);
                Some((at(snap, c, piece.within), disk_device, plan, view.epoch))
            });
        let Some((offset_bytes, disk_device, plan, view_epoch)) = planned else {
            guard_end_in(guards, key, epoch);
            return Err(request);
        };
        let Request { device, tag, op } = request;
        let Op::Read { buf, .. } = op else {
            unreachable!("invariant: checked to be a read")
        };
        let parent = self.pending.insert(Pending {
            outstanding: 1,
            file_device: Some(index),
            epoch: Some(epoch),
            view_epoch,
            read_from: Some(plan),
            ..Pending::new(device, tag, OpKind::Read, offset, len)
        });
        let read = Request {
            device: disk_device,
            tag: 0,
            op: Op::Read { offset_bytes, buf },
        };
        let role = Role::ReadPiece {
            piece: 0,
            copy: 0,
            at: 0,
            caller: true,
        };
        self.requests += 1;
        self.submit_piece(parent, read, role);
        self.reap();
        Ok(())
    }

    /// The synchronous handle of the group of device `device`.
    fn slow_handle(&mut self, device: usize) -> Result<&mut DataHandle, IoError> {
        let key = self.group_key(device);
        if !self.slow.contains_key(&key) {
            let Mapping::GroupFile { group, .. } = &self.devices[device] else {
                return Err(IoError::Engine { errno: ENXIO });
            };
            let handle = group
                .handle(64)
                .map_err(|_| IoError::Engine { errno: EIO })?;
            self.slow.insert(key, handle);
        }
        Ok(self.slow.get_mut(&key).expect("invariant: inserted"))
    }

    /// Wait until nothing of ours is in flight at the inner engine (so we
    /// hold no latch): completions go to the ready queue.
    fn drain(&mut self) -> Result<(), IoError> {
        while !self.pending.is_empty() {
            self.reap();
            if self.pending.is_empty() {
                break;
            }
            self.inner.wait(1)?;
        }
        Ok(())
    }

    /// Complete a request at once.
    fn complete_now(
        &mut self,
        device: DeviceId,
        tag: u64,
        kind: OpKind,
        result: Result<u64, IoError>,
        buf: Option<AlignedBuf>,
    ) {
        if let Ok(n) = result {
            match kind {
                OpKind::Read => self.bytes_read += n,
                OpKind::Write => self.bytes_written += n,
                _ => {}
            }
        }
        self.ready.push_back(Completion {
            device,
            tag,
            kind,
            result,
            buf,
        });
    }

    /// A write into an extent never written, run synchronously.
    fn slow_write(&mut self, index: usize, request: Request) -> Result<(), SubmitError> {
        let Request { device, tag, op } = request;
        let (offset, len) = op.range();
        let number = match &self.devices[index] {
            Mapping::GroupFile { number, .. } => *number,
            Mapping::Direct(_) => unreachable!("invariant: a group file"),
        };
        let result = self.drain().and_then(|()| {
            let Op::Write { buf, fua, .. } = &op else {
                unreachable!("invariant: a write")
            };
            let handle = self.slow_handle(index)?;
            handle
                .write(number, offset, &buf[..])
                .map_err(|e| io_error(&e))?;
            // A write asked to be durable is, before it completes: its
            // disks flushed, and its checksums' record with them.
            if *fua {
                handle.sync().map_err(|e| io_error(&e))?;
            }
            Ok(len)
        });
        let buf = inner_buf(op);
        self.complete_now(device, tag, OpKind::Write, result, buf);
        Ok(())
    }

    /// Move what the inner engine finished into the caller's completions.
    fn reap(&mut self) {
        while let Some(c) = self.inner.pop_completion() {
            let Ok(key) = usize::try_from(c.tag) else {
                continue;
            };
            if !self.pieces.contains(key) {
                continue;
            }
            let piece = self.pieces.remove(key);
            let parent = piece.parent;
            let Some(p) = self.pending.get_mut(parent) else {
                continue;
            };
            if common_read_done(piece.role, &c, p) {
                let done = self.pending.remove(parent);
                self.let_go(&done);
                self.complete_now(done.device, done.tag, done.kind, Ok(done.len), c.buf);
                continue;
            }
            match (piece.role, c.result, c.buf) {
                (Role::Caller, result, buf) => {
                    if let Err(e) = result {
                        p.error.get_or_insert(e);
                    }
                    p.buf = buf;
                }
                (Role::ReadPiece { caller: true, .. }, Ok(_), buf) => p.buf = buf,
                (Role::ReadPiece { at, .. }, Ok(_), Some(data)) => {
                    if let Some(dst) = p.buf.as_mut() {
                        dst[at..at + data.len()].copy_from_slice(&data[..]);
                    }
                }
                (
                    Role::ReadPiece {
                        piece: i,
                        copy,
                        at,
                        caller,
                    },
                    result,
                    buf,
                ) => {
                    if caller {
                        // A read that failed with its buffer still in the
                        // kernel (timed out) hands back none: the next copy
                        // is read into a new one, not thrown away.
                        let len = p.len as usize;
                        p.buf = Some(buf.unwrap_or_else(|| AlignedBuf::zeroed(len)));
                    }
                    // Fall back to the next readable copy of that piece.
                    if self.read_next_copy(parent, i, copy + 1, at) {
                        continue; // outstanding unchanged
                    }
                    let p = &mut self.pending[parent];
                    p.error
                        .get_or_insert(result.err().unwrap_or(IoError::Engine { errno: EIO }));
                }
                (
                    Role::WriteCopy {
                        piece: i,
                        disk,
                        caller,
                        mark,
                    },
                    result,
                    buf,
                ) => {
                    if caller {
                        p.buf = buf;
                    }
                    p.writing
                        .as_mut()
                        .expect("invariant: a write has its state")
                        .copy_done(i, disk, mark, result);
                }
                (Role::Flush { disk }, result, _) => {
                    if let Err(e) = result {
                        let w = p
                            .writing
                            .as_mut()
                            .expect("invariant: a flush has its state");
                        w.disk_failed(disk, &e);
                    }
                }
            }
            let p = &mut self.pending[parent];
            p.outstanding -= 1;
            if p.outstanding == 0 {
                let done = self.pending.remove(parent);
                self.finish(done);
            }
        }
    }

    /// Send piece `i` of read `parent`, which failed on its copy before,
    /// to its copy `next` (into a buffer of its own, copied into the
    /// caller's at `at`), and mark the read for repair; `false` if there is
    /// no such copy on this engine or no room for it.
    #[inline]
    fn read_next_copy(&mut self, parent: usize, i: usize, next: usize, at: usize) -> bool {
        let p = &mut self.pending[parent];
        let Some((c, offset_bytes, piece_len)) = next_copy(&self.plans, p, i, next) else {
            return false;
        };
        p.needs_repair = true;
        let file = p.file_device.expect("invariant: group file");
        let disk_device = match &self.devices[file] {
            Mapping::GroupFile { disks, .. } => disks.get(&c.disk).copied(),
            Mapping::Direct(_) => None,
        };
        let Some(device) = disk_device else {
            return false;
        };
        let k = self.pieces.insert(Inner {
            parent,
            role: Role::ReadPiece {
                piece: i,
                copy: next,
                at,
                caller: false,
            },
        });
        let request = Request {
            device,
            tag: k as u64,
            op: Op::Read {
                offset_bytes,
                buf: AlignedBuf::zeroed(piece_len),
            },
        };
        match self.inner.submit(request) {
            Ok(()) => true,
            Err(SubmitError::QueueFull(_)) => {
                self.pieces.remove(k);
                false
            }
        }
    }

    fn finish(&mut self, mut done: Pending) {
        self.let_go(&done);
        // The latches are held until the disks that missed the write are
        // offline: a repair must not copy from them meanwhile.
        let mut writing = done.writing.take();
        let latch = writing.as_mut().and_then(|w| w.latch.take());
        // A write or flush that missed copies: their disks go offline
        // before it completes, and a write must have landed every piece on
        // some copy.
        if let Some(writing) = writing.as_mut().filter(|w| !w.failed_disks.is_empty()) {
            let file = done.file_device.expect("invariant: group file");
            let failed = std::mem::take(&mut writing.failed_disks);
            let missed = std::mem::take(&mut writing.missed);
            let number = match &self.devices[file] {
                Mapping::GroupFile { number, .. } => *number,
                Mapping::Direct(_) => unreachable!("invariant: a group file"),
            };
            let (view_epoch, incarnation) = (done.view_epoch, writing.incarnation);
            // The copies that missed the write are marked stale first, then
            // their disks go offline (as the synchronous path does).
            let result = self.slow_handle(file).and_then(|h| {
                if !missed.is_empty() {
                    DataPort::mark_stale(h, number, incarnation, &missed)
                        .map_err(|e| io_error(&e))?;
                }
                DataPort::disks_failed(h, &failed, view_epoch).map_err(|e| io_error(&e))
            });
            if let Err(e) = result {
                done.error.get_or_insert(e);
            }
        }
        if writing.is_some_and(|w| w.landed.contains(&0)) {
            done.error.get_or_insert(IoError::Engine { errno: EIO });
        }
        if done.needs_repair && done.error.is_none() {
            if let Some(file) = done.file_device {
                self.repairs.push((file, done.offset, done.len));
            }
        }
        let result = match done.error.take() {
            Some(e) => Err(at_request(e, done.kind, done.offset, done.len)),
            None => Ok(done.len),
        };
        drop(latch);
        self.complete_now(done.device, done.tag, done.kind, result, done.buf.take());
    }

    /// Read again, through the synchronous path, the ranges a later copy
    /// served: it reads the primary, finds it bad, and rewrites it.
    fn run_repairs(&mut self) {
        for (device, offset, len) in std::mem::take(&mut self.repairs) {
            let Mapping::GroupFile { number, .. } = &self.devices[device] else {
                continue;
            };
            let number = *number;
            let mut scratch = vec![0u8; len as usize];
            if let Ok(handle) = self.slow_handle(device) {
                // An error here is the caller's next read's to see.
                let _ = handle.read(number, offset, &mut scratch);
            }
        }
    }

    /// Fail a request at once.
    fn fail(&mut self, request: Request, error: IoError) {
        let (offset, len) = request.op.range();
        let error = at_request(error, request.op.kind(), offset, len);
        self.ready.push_back(Completion::failed(request, error));
    }
}

/// The common read done: its one piece read into the caller's buffer,
/// nothing else to do.
#[inline]
fn common_read_done(role: Role, c: &Completion, p: &Pending) -> bool {
    matches!(role, Role::ReadPiece { caller: true, .. })
        && c.result.is_ok()
        && c.buf.is_some()
        && p.outstanding == 1
        && p.error.is_none()
        && !p.needs_repair
}

/// The plan of a read from `snap` and `view`, counted: `newest`, the file's
/// newest plan, if it was made from them; else a new one, which becomes the
/// newest (the one it replaces goes once no read uses it).
fn take_plan(
    plans: &mut Slab<Plan>,
    newest: &mut Option<usize>,
    snap: &Arc<FileSnapshot>,
    view: &Arc<DiskView>,
) -> usize {
    let key = match *newest {
        Some(k) if Arc::ptr_eq(&plans[k].snap, snap) && Arc::ptr_eq(&plans[k].view, view) => k,
        was => {
            let k = plans.insert(Plan {
                snap: snap.clone(),
                view: view.clone(),
                reads: 0,
            });
            *newest = Some(k);
            if let Some(old) = was.filter(|old| plans[*old].reads == 0) {
                plans.remove(old);
            }
            k
        }
    };
    plans[key].reads += 1;
    key
}

/// Note a request starting in the current epoch of `plane`, in the guard
/// slot of group `key`; returns that epoch. The slot holds the oldest epoch
/// of the group's requests in flight. When some are, it is at or below the
/// current epoch (epochs only grow) and so covers this request too: nothing
/// is stored. When none are, the epoch is stored and checked not to have
/// moved meanwhile, as [`super::plane::OperationGuard`] does: a scan between
/// our reading it and storing it saw the slot idle.
fn guard_start_in(
    guards: &mut BTreeMap<usize, (Arc<GuardSlot>, BTreeMap<u64, usize>)>,
    key: usize,
    plane: &super::plane::DataPlane,
) -> u64 {
    let (slot, epochs) = guards.get_mut(&key).expect("invariant: made in new");
    let epoch = if epochs.is_empty() {
        slot.start(plane)
    } else {
        plane.epoch()
    };
    *epochs.entry(epoch).or_default() += 1;
    epoch
}

/// Note a request of group `key` that started in `epoch` ending: the slot
/// moves on to the oldest epoch still in flight (or idle) when that
/// changed.
fn guard_end_in(
    guards: &mut BTreeMap<usize, (Arc<GuardSlot>, BTreeMap<u64, usize>)>,
    key: usize,
    epoch: u64,
) {
    let Some((slot, epochs)) = guards.get_mut(&key) else {
        return;
    };
    let oldest = epochs.keys().next().copied();
    if let Some(n) = epochs.get_mut(&epoch) {
        *n -= 1;
        if *n == 0 {
            epochs.remove(&epoch);
        }
    }
    let now = epochs.keys().next().copied();
    if now != oldest {
        slot.move_on(now);
    }
}

/// Copy `copy` of piece `piece` of a read, in the order its plan tries them
/// ([`readable_copies_of`]), from the snapshot and disk view it was planned
/// from: the copy, its byte offset on its disk, and the piece's length.
/// The plan is made again here rather than kept with every read, as only a
/// failed read needs it.
fn next_copy(
    plans: &Slab<Plan>,
    p: &Pending,
    piece: usize,
    copy: usize,
) -> Option<(AuAddr, u64, usize)> {
    let Plan { snap, view, .. } = plans.get(p.read_from?)?;
    let pieces = snap.pieces(p.offset, p.len)?;
    let piece = pieces.get(piece)?;
    let extent = snap.extent(piece.extent)?;
    let aus = aus_touched(snap.au_bytes, piece.within, piece.len);
    let c = readable_copies_of(view, extent, aus).nth(copy)?;
    Some((c, at(snap, c, piece.within), piece.len as usize))
}

fn io_error(e: &crate::group::error::GroupError) -> IoError {
    match e {
        crate::group::error::GroupError::Io { error, .. } => error.clone(),
        _ => IoError::Engine { errno: EIO },
    }
}

/// A piece's OS error names an offset on a member disk; the caller knows the
/// request by its own range.
fn at_request(error: IoError, kind: OpKind, offset_bytes: u64, len_bytes: u64) -> IoError {
    match error {
        IoError::Os { errno, .. } => IoError::Os {
            kind,
            offset_bytes,
            len_bytes,
            errno,
        },
        other => other,
    }
}

fn inner_buf(op: Op) -> Option<AlignedBuf> {
    match op {
        Op::Read { buf, .. } | Op::Write { buf, .. } => Some(buf),
        _ => None,
    }
}

impl IoEngine for FileIo {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        match self.devices.get(device.0 as usize)? {
            Mapping::Direct(id) => self.inner.geometry(*id),
            Mapping::GroupFile { geometry, .. } => Some(geometry),
        }
    }

    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        if self.in_flight() >= self.depth_max {
            return Err(SubmitError::QueueFull(request));
        }
        if !self.repairs.is_empty() && self.pending.is_empty() {
            self.run_repairs();
        }
        let index = request.device.0 as usize;
        let Some(mapping) = self.devices.get(index) else {
            let device = request.device;
            self.requests += 1;
            self.fail(request, IoError::UnknownDevice(device));
            return Ok(());
        };
        let planned = match mapping {
            Mapping::Direct(id) => {
                if self.inner.in_flight() + 1 > self.inner.depth_max() {
                    return Err(SubmitError::QueueFull(request));
                }
                let id = *id;
                let Request { device, tag, op } = request;
                let (offset, len) = op.range();
                Planned {
                    pending: Pending::new(device, tag, op.kind(), offset, len),
                    requests: vec![(
                        Request {
                            device: id,
                            tag: 0,
                            op,
                        },
                        Role::Caller,
                    )],
                }
            }
            Mapping::GroupFile { .. } => match self.submit_common_read(index, request) {
                Ok(()) => return Ok(()),
                Err(request) => match self.plan_file(index, request)? {
                    Some(planned) => planned,
                    None => return Ok(()),
                },
            },
        };
        self.requests += 1;
        let Planned {
            mut pending,
            requests,
        } = planned;
        pending.outstanding = requests.len();
        if requests.is_empty() {
            self.finish(pending);
            return Ok(());
        }
        let parent = self.pending.insert(pending);
        for (inner, role) in requests {
            self.submit_piece(parent, inner, role);
        }
        // Engines that complete during submit (pread/pwrite) have results now.
        self.reap();
        Ok(())
    }

    fn wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        loop {
            self.reap();
            if self.ready.len() >= min_completions.min(self.in_flight()) {
                return Ok(());
            }
            self.inner.wait(1)?;
        }
    }

    fn wait_timeout(&mut self, min_completions: usize, timeout: Duration) -> Result<(), IoError> {
        // The clock is read only when a wait is needed: a call answered by
        // what is already done reads it not at all.
        let mut deadline: Option<Instant> = None;
        loop {
            self.reap();
            if self.ready.len() >= min_completions.min(self.in_flight()) {
                return Ok(());
            }
            let left = match deadline {
                None => {
                    deadline = Some(Instant::now() + timeout);
                    timeout
                }
                Some(d) => d.saturating_duration_since(Instant::now()),
            };
            if left.is_zero() {
                return Ok(());
            }
            self.inner.wait_timeout(1, left)?;
        }
    }

    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.inner.set_io_timeout(timeout);
    }

    fn pop_completion(&mut self) -> Option<Completion> {
        if self.ready.is_empty() {
            self.reap();
        }
        self.ready.pop_front()
    }

    fn in_flight(&self) -> usize {
        self.pending.len() + self.ready.len()
    }

    fn depth_max(&self) -> usize {
        self.depth_max
    }

    fn stats(&self) -> EngineStats {
        EngineStats {
            requests: self.requests,
            device_requests: self.inner.stats().device_requests,
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
        }
    }
}

impl Drop for FileIo {
    /// Let the guard slots go, as a dropped [`DataHandle`] does: a slot left
    /// registered at the epoch of requests still in flight would hold every
    /// AU freed after it back from reuse for the rest of the mount. Those
    /// requests' I/O finishes first (their completions are dropped), so no
    /// write of theirs can land in an AU given to another file meanwhile; if
    /// the inner engine cannot tell, the slots stay (holding AUs back is
    /// safe, reusing them under a write is not).
    fn drop(&mut self) {
        if self.drain().is_err() {
            return;
        }
        for (key, (slot, _)) in &self.guards {
            if let Mapping::GroupFile { group, .. } = &self.devices[*key] {
                group.plane().drop_guard_slot(slot);
            }
        }
    }
}

/// A caller request made ready for the inner engine.
struct Planned {
    pending: Pending,
    requests: Vec<(Request, Role)>,
}

impl Pending {
    fn new(device: DeviceId, tag: u64, kind: OpKind, offset: u64, len: u64) -> Self {
        Self {
            device,
            tag,
            kind,
            offset,
            len,
            outstanding: 0,
            buf: None,
            error: None,
            epoch: None,
            read_from: None,
            writing: None,
            needs_repair: false,
            view_epoch: 0,
            file_device: None,
        }
    }
}
