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
//! - a write holds shared latches on its extents until it completes and goes
//!   to every online copy; copies that failed have their disks taken offline
//!   (by the metadata plane) before the request completes, and a piece that
//!   reached no copy fails it;
//! - a flush goes to every member disk the file uses;
//! - the slow paths — a write into an extent never written (the first write
//!   zeroes, then the metadata plane marks it), a repair — wait until this
//!   engine has nothing in flight (so it holds no latch) and then run through
//!   a synchronous [`DataHandle`] of the same group.
//!
//! Its own engine does the I/O (`inner`); completions are the caller's
//! requests, in the order they finish.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_format::group::{au_mask, AuAddr};
use cairn_io::engine::validate;
use cairn_io::{
    AlignedBuf, Completion, DeviceId, EngineStats, Geometry, IoEngine, IoError, Op, OpKind,
    Request, SubmitError,
};
use slab::Slab;

use super::data::{aus_touched, DataPort, StaleMark};
use super::live::{DataHandle, LiveGroup};
use super::plane::{FileSnapshot, GuardSlot, LatchGuard, Piece};

const EIO: i32 = 5;
const E2BIG: i32 = 7;
const EAGAIN: i32 = 11;
const ENXIO: i32 = 6;
const EROFS: i32 = 30;

/// A guard slot's value while nothing is in flight.
const IDLE: u64 = u64::MAX;

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
    /// Held until it completes (a write's shared latches).
    latch: Option<LatchGuard>,
    /// For reads: the pieces, and per piece its online copies, for fallback.
    plan: Option<Arc<ReadPlan>>,
    /// Disks a write or flush failed on, to be taken offline before
    /// completion.
    failed_disks: BTreeSet<u16>,
    /// Copies a write failed on: marked stale before their disks go
    /// offline. With the file's incarnation the write used.
    missed: Vec<StaleMark>,
    incarnation: u32,
    /// For writes: per piece, the copies that landed.
    landed: Vec<u8>,
    /// A read piece was served by a later copy: repair once done.
    needs_repair: bool,
    /// The disk view's epoch the request used.
    view_epoch: u64,
    /// The group file, by its index among the devices.
    file_device: Option<usize>,
}

struct ReadPlan {
    snap: Arc<FileSnapshot>,
    pieces: Vec<Piece>,
    copies: Vec<Vec<AuAddr>>,
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
    devices: Vec<Mapping>,
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
        for (i, m) in devices.iter().enumerate() {
            if let Mapping::GroupFile { group, .. } = m {
                let first = Self::group_key_of(&devices, group).unwrap_or(i);
                guards
                    .entry(first)
                    .or_insert_with(|| (group.plane().guard_slot(), BTreeMap::new()));
            }
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
        Self {
            inner,
            devices,
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
        match &self.devices[device] {
            Mapping::GroupFile { group, .. } => {
                Self::group_key_of(&self.devices, group).unwrap_or(device)
            }
            Mapping::Direct(_) => device,
        }
    }

    /// Note a request starting in the current epoch of its group's plane.
    fn guard_start(&mut self, device: usize) -> u64 {
        let key = self.group_key(device);
        let Mapping::GroupFile { group, .. } = &self.devices[device] else {
            return 0;
        };
        let plane = group.plane().clone();
        let (slot, epochs) = self.guards.get_mut(&key).expect("invariant: made in new");
        // The slot holds the oldest epoch in flight, so it cannot use
        // OperationGuard's store-and-check: first a value that holds every AU
        // back, then the epoch read after it (a scan in between would
        // otherwise see only older requests, or idle).
        slot.store(0, Ordering::SeqCst);
        let epoch = plane.epoch();
        *epochs.entry(epoch).or_default() += 1;
        let oldest = *epochs.keys().next().expect("invariant: just added");
        slot.store(oldest, Ordering::SeqCst);
        epoch
    }

    fn guard_end(&mut self, device: usize, epoch: u64) {
        let key = self.group_key(device);
        let Some((slot, epochs)) = self.guards.get_mut(&key) else {
            return;
        };
        if let Some(n) = epochs.get_mut(&epoch) {
            *n -= 1;
            if *n == 0 {
                epochs.remove(&epoch);
            }
        }
        slot.store(
            epochs.keys().next().copied().unwrap_or(IDLE),
            Ordering::SeqCst,
        );
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
            let Op::Write { buf, .. } = &op else {
                unreachable!("invariant: a write")
            };
            let handle = self.slow_handle(index)?;
            handle
                .write(number, offset, &buf[..])
                .map(|()| len)
                .map_err(|e| io_error(&e))
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
                        p.buf = buf;
                    }
                    // Fall back to the next online copy of that piece.
                    let plan = p.plan.clone().expect("invariant: reads have a plan");
                    let next = copy + 1;
                    if let Some(c) = plan.copies[i].get(next) {
                        p.needs_repair = true;
                        let file = p.file_device.expect("invariant: group file");
                        let disk_device = match &self.devices[file] {
                            Mapping::GroupFile { disks, .. } => disks.get(&c.disk).copied(),
                            Mapping::Direct(_) => None,
                        };
                        let piece_len = plan.pieces[i].len as usize;
                        let offset_bytes =
                            u64::from(c.au) * plan.snap.au_bytes + plan.pieces[i].within;
                        if let Some(device) = disk_device {
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
                                Ok(()) => continue, // outstanding unchanged
                                Err(SubmitError::QueueFull(_)) => {
                                    self.pieces.remove(k);
                                }
                            }
                        }
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
                    match result {
                        Ok(_) => p.landed[i] += 1,
                        Err(_) => {
                            p.failed_disks.insert(disk);
                            p.missed.push(mark);
                        }
                    }
                }
                (Role::Flush { disk }, result, _) => {
                    if result.is_err() {
                        p.failed_disks.insert(disk);
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

    fn finish(&mut self, mut done: Pending) {
        if let (Some(file), Some(epoch)) = (done.file_device, done.epoch) {
            self.guard_end(file, epoch);
        }
        // The latches are held until the disks that missed the write are
        // offline: a repair must not copy from them meanwhile.
        let latch = done.latch.take();
        // A write or flush that missed copies: their disks go offline
        // before it completes, and a write must have landed every piece on
        // some copy.
        if !done.failed_disks.is_empty() {
            let file = done.file_device.expect("invariant: group file");
            let failed = std::mem::take(&mut done.failed_disks);
            let missed = std::mem::take(&mut done.missed);
            let number = match &self.devices[file] {
                Mapping::GroupFile { number, .. } => *number,
                Mapping::Direct(_) => unreachable!("invariant: a group file"),
            };
            let (view_epoch, incarnation) = (done.view_epoch, done.incarnation);
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
        if done.landed.contains(&0) {
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

fn io_error(e: &super::GroupError) -> IoError {
    match e {
        super::GroupError::Io { error, .. } => error.clone(),
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
            Mapping::GroupFile { .. } => match self.plan_file(index, request)? {
                Some(planned) => planned,
                None => return Ok(()),
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
        for (mut inner, role) in requests {
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
        let deadline = Instant::now() + timeout;
        loop {
            self.reap();
            if self.ready.len() >= min_completions.min(self.in_flight()) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
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
            latch: None,
            plan: None,
            failed_disks: BTreeSet::new(),
            missed: Vec::new(),
            incarnation: 0,
            landed: Vec::new(),
            needs_repair: false,
            view_epoch: 0,
            file_device: None,
        }
    }
}

impl FileIo {
    /// Plan a request on a group file. `Ok(None)`: it completed at once
    /// (refused, zeros, or a slow path).
    fn plan_file(
        &mut self,
        index: usize,
        request: Request,
    ) -> Result<Option<Planned>, SubmitError> {
        let Mapping::GroupFile {
            group,
            number,
            disks,
            geometry,
        } = &self.devices[index]
        else {
            unreachable!("invariant: a group file")
        };
        let (number, plane, disks) = (*number, group.plane().clone(), disks.clone());
        if let Err(e) = validate(geometry, &request.op) {
            self.requests += 1;
            self.fail(request, e);
            return Ok(None);
        }
        let Request { device, tag, op } = request;
        let kind = op.kind();
        let (offset, len) = op.range();
        let mut pending = Pending::new(device, tag, kind, offset, len);
        pending.file_device = Some(index);
        if let Op::Flush = op {
            // One inner flush per member disk: more disks than the inner
            // engine can ever hold would be handed back as QueueFull for
            // ever, even on an idle engine. Fail it, as a read or write that
            // can never fit does.
            if disks.len() > self.inner.depth_max() {
                self.requests += 1;
                self.fail(
                    Request { device, tag, op },
                    IoError::Engine { errno: E2BIG },
                );
                return Ok(None);
            }
            if self.inner.in_flight() + disks.len() > self.inner.depth_max() {
                return Err(SubmitError::QueueFull(Request { device, tag, op }));
            }
            let requests = disks
                .iter()
                .map(|(disk, id)| {
                    (
                        Request {
                            device: *id,
                            tag: 0,
                            op: Op::Flush,
                        },
                        Role::Flush { disk: *disk },
                    )
                })
                .collect();
            pending.view_epoch = plane.disks().epoch;
            return Ok(Some(Planned { pending, requests }));
        }
        if matches!(op, Op::Discard { .. } | Op::WriteZeroes { .. }) {
            self.requests += 1;
            self.fail(
                Request { device, tag, op },
                IoError::Engine { errno: EOPNOTSUPP },
            );
            return Ok(None);
        }
        if let Some(_why) = plane.stopped() {
            self.requests += 1;
            self.fail(Request { device, tag, op }, IoError::Engine { errno: EIO });
            return Ok(None);
        }
        // A write takes its extents' shared latches first — never waiting
        // for one while it holds others (its writes in flight): it drains
        // them first — then its guard, then the snapshot it uses, which
        // must be the one it latched.
        let latch = if matches!(op, Op::Write { .. }) {
            let Some(pre) = plane.file(number) else {
                self.requests += 1;
                self.fail(
                    Request { device, tag, op },
                    IoError::Engine { errno: ENXIO },
                );
                return Ok(None);
            };
            let Some(pieces) = pre.pieces(offset, len) else {
                self.requests += 1;
                self.fail(Request { device, tag, op }, IoError::Engine { errno: EIO });
                return Ok(None);
            };
            let keys: Vec<_> = pieces
                .iter()
                .map(|p| ((number, pre.incarnation, p.extent), false))
                .collect();
            let latch = match plane.try_latch(keys.clone()) {
                Some(latch) => latch,
                None => {
                    if let Err(e) = self.drain() {
                        self.requests += 1;
                        self.fail(Request { device, tag, op }, e);
                        return Ok(None);
                    }
                    plane.latch(keys)
                }
            };
            Some((latch, pre))
        } else {
            None
        };
        let epoch = self.guard_start(index);
        let view = plane.disks();
        let refuse = |me: &mut Self, op: Op, error: IoError| {
            me.guard_end(index, epoch);
            me.requests += 1;
            me.fail(Request { device, tag, op }, error);
            Ok(None)
        };
        let Some(snap) = plane.file(number) else {
            return refuse(self, op, IoError::Engine { errno: ENXIO });
        };
        let latch = match latch {
            Some((latch, pre)) if Arc::ptr_eq(&pre, &snap) => Some(latch),
            Some((latch, _)) => {
                // The file changed between the latch and the guard: plan
                // again from what it is now.
                drop(latch);
                self.guard_end(index, epoch);
                return self.plan_file(index, Request { device, tag, op });
            }
            None => None,
        };
        let Some(pieces) = snap.pieces(offset, len) else {
            return refuse(self, op, IoError::Engine { errno: EIO });
        };
        let is_write = matches!(op, Op::Write { .. });
        if is_write && snap.read_only.is_some() {
            return refuse(self, op, IoError::Engine { errno: EIO });
        }
        // A group mounted read-only: its fast path must not write either.
        if is_write && self.read_only[index] {
            return refuse(self, op, IoError::Engine { errno: EROFS });
        }
        let mut copies: Vec<Vec<AuAddr>> = Vec::with_capacity(pieces.len());
        let mut fresh = false;
        for p in &pieces {
            let extent = snap
                .extent(p.extent)
                .expect("invariant: pieces are in the map");
            fresh |= !extent.initialized;
            // A write with a copy on a disk that is not ONLINE (it is
            // SYNCING, or offline and its copy must be marked stale first)
            // takes the synchronous path, as a first write does.
            fresh |= is_write && extent.copies().iter().any(|c| !view.is_online(c.disk));
            let aus = aus_touched(snap.au_bytes, p.within, p.len);
            let online: Vec<AuAddr> = extent
                .copies()
                .iter()
                .enumerate()
                .filter(|(slot, c)| {
                    view.is_online(c.disk) && (is_write || !extent.stale_in(*slot, aus.clone()))
                })
                .map(|(_, c)| *c)
                .collect();
            // (A write whose copies are not all ONLINE takes the
            // synchronous path below, which marks or fails as it must.)
            if extent.initialized && online.is_empty() && !is_write {
                return refuse(self, op, IoError::Engine { errno: EIO });
            }
            copies.push(if extent.initialized {
                online
            } else {
                Vec::new()
            });
        }
        if is_write && fresh {
            // The first write into an extent (or one with a copy not
            // ONLINE): the synchronous path, which may take the extent's
            // latch exclusively — so let ours go first.
            drop(latch);
            self.guard_end(index, epoch);
            self.requests += 1;
            self.slow_write(index, Request { device, tag, op })?;
            return Ok(None);
        }
        // Every copy's disk must be attached to this engine: a file grown
        // onto a disk this engine was not given fails, it does not panic.
        if copies
            .iter()
            .flatten()
            .any(|c| !disks.contains_key(&c.disk))
        {
            return refuse(self, op, IoError::Engine { errno: ENXIO });
        }
        let needed: usize = if is_write {
            copies.iter().map(Vec::len).sum()
        } else {
            copies.iter().filter(|c| !c.is_empty()).count()
        };
        if needed > self.inner.depth_max() {
            return refuse(self, op, IoError::Engine { errno: E2BIG });
        }
        if self.inner.in_flight() + needed > self.inner.depth_max() {
            self.guard_end(index, epoch);
            return Err(SubmitError::QueueFull(Request { device, tag, op }));
        }
        pending.epoch = Some(epoch);
        pending.view_epoch = view.epoch;
        let at = |c: &AuAddr, p: &Piece| u64::from(c.au) * snap.au_bytes + p.within;
        let mut requests = Vec::with_capacity(needed);
        match op {
            Op::Read { mut buf, .. } => {
                let single = pieces.len() == 1 && !copies[0].is_empty();
                for (i, p) in pieces.iter().enumerate() {
                    if copies[i].is_empty() {
                        buf[p.at..p.at + p.len as usize].fill(0);
                    }
                }
                if single {
                    let c = copies[0][0];
                    requests.push((
                        Request {
                            device: disks[&c.disk],
                            tag: 0,
                            op: Op::Read {
                                offset_bytes: at(&c, &pieces[0]),
                                buf,
                            },
                        },
                        Role::ReadPiece {
                            piece: 0,
                            copy: 0,
                            at: 0,
                            caller: true,
                        },
                    ));
                } else {
                    for (i, p) in pieces.iter().enumerate() {
                        let Some(c) = copies[i].first() else { continue };
                        requests.push((
                            Request {
                                device: disks[&c.disk],
                                tag: 0,
                                op: Op::Read {
                                    offset_bytes: at(c, p),
                                    buf: AlignedBuf::zeroed(p.len as usize),
                                },
                            },
                            Role::ReadPiece {
                                piece: i,
                                copy: 0,
                                at: p.at,
                                caller: false,
                            },
                        ));
                    }
                    pending.buf = Some(buf);
                }
                pending.plan = Some(Arc::new(ReadPlan {
                    snap: snap.clone(),
                    pieces,
                    copies,
                }));
            }
            Op::Write { buf, fua, .. } => {
                pending.latch = latch;
                pending.incarnation = snap.incarnation;
                pending.landed = vec![0; pieces.len()];
                let whole = pieces.len() == 1;
                let mut caller_buf = Some(buf);
                let mut data_requests = Vec::new();
                for (i, p) in pieces.iter().enumerate() {
                    for c in &copies[i] {
                        data_requests.push((i, *c, at(c, p), p.at, p.len));
                    }
                }
                let last = data_requests.len().saturating_sub(1);
                for (k, (i, c, offset_bytes, from, plen)) in data_requests.into_iter().enumerate() {
                    let (buf, caller) = if whole && k == last {
                        (caller_buf.take().expect("invariant: used once"), true)
                    } else {
                        let src = caller_buf.as_ref().expect("invariant: kept until last");
                        (
                            AlignedBuf::from_slice(&src[from..from + plen as usize]),
                            false,
                        )
                    };
                    requests.push((
                        Request {
                            device: disks[&c.disk],
                            tag: 0,
                            op: Op::Write {
                                offset_bytes,
                                buf,
                                fua,
                            },
                        },
                        Role::WriteCopy {
                            piece: i,
                            disk: c.disk,
                            caller,
                            mark: StaleMark {
                                extent: pieces[i].extent,
                                copy: c,
                                mask: au_mask(aus_touched(
                                    snap.au_bytes,
                                    pieces[i].within,
                                    pieces[i].len,
                                )),
                            },
                        },
                    ));
                }
                pending.buf = caller_buf;
            }
            Op::Flush | Op::Discard { .. } | Op::WriteZeroes { .. } => {
                unreachable!("invariant: handled above")
            }
        }
        Ok(Some(Planned { pending, requests }))
    }
}

const EOPNOTSUPP: i32 = 95;
