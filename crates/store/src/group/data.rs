//! The data path, one for every caller: the group's own single-threaded
//! calls ([`Group::read`], [`Group::write`]), and each live data handle
//! (`live.rs`). Both run the functions here against what the metadata plane
//! published (a file's snapshot, the disk view; see `plane.rs` and
//! `docs/live-core.md`) through a [`DataPort`]: the engine to use, and the
//! way back to the metadata plane for what only it may change.
//!
//! - A **read** goes to the primary copy of each piece and falls back piece by
//!   piece to the next copy on an I/O error; when the caller's check rejects
//!   the whole buffer, every piece moves to its next copy. Bad copies are then
//!   rewritten from the good one, under the extents' latches (so no writer's
//!   newer bytes are overwritten), read again there from the good copy. A
//!   rewrite that fails is a failed disk.
//! - A **write** goes to every copy online in the disk view, under shared
//!   latches, and is acknowledged when all have completed — or, for copies
//!   that failed, once the metadata plane has taken their disks offline (a
//!   copy that missed a write must never be read again). A piece that
//!   reached no copy fails the write.
//! - The **first write** into an extent never written takes its latch
//!   exclusively, looks at the current snapshot again, zeroes the rest of
//!   the extent, writes, and has the metadata plane mark it initialised (the
//!   commit's barrier flushes the disks written first). An extent never
//!   written reads as zeros without I/O.
//!
//! Durability of plain writes is `sync`'s job, as `fsync` is a file's.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;

use std::sync::Arc;

use super::disk_io::read_fails_the_disk;
use super::plane::{
    DataPlane, DiskView, FileSnapshot, LatchGuard, LatchKey, NotWritable, OperationGuard, Piece,
};
use super::*;
use cairn_format::group::{au_mask, AuAddr, Extent, FileState, FILE_NUMBER_USER_MIN};
use cairn_io::{AlignedBuf, Op, Request};

/// Bytes of a write's data turned into requests at once: a bigger write goes
/// to the disks in batches, so memory stays bounded whatever the caller
/// hands in (each copy holds its own buffer).
const WRITE_BATCH_BYTES_MAX: u64 = 32 << 20;

/// Looks a write takes at its file before it gives up on a file that keeps
/// changing under the latches it took (a cut and a grow, a delete and a
/// create, a stale mark that did not take). Each look costs a snapshot and
/// a latch, no I/O; a writer needs more than two only beside a client that
/// changes the file as fast as it can (a loop of ftruncate).
pub(super) const WRITE_ATTEMPTS_MAX: u32 = 64;

/// Disks an I/O failed on, each with why (its first failure's reason):
/// what going OFFLINE is said with.
pub(super) type FailedDisks = BTreeMap<u16, String>;

/// Note that an I/O to `disk` failed with `error` (its first failure is kept).
fn note_failed(failed: &mut FailedDisks, disk: u16, error: &IoError) {
    failed
        .entry(disk)
        .or_insert_with(|| disk_states::failure_reason(error));
}

/// What a data operation needs from whoever runs it.
pub(crate) trait DataPort {
    fn plane(&self) -> &Arc<DataPlane>;
    /// The engine this caller does its I/O with.
    fn engine(&mut self) -> &mut dyn IoEngine;
    /// This engine's device for member disk `disk`, if attached.
    fn device(&self, disk: u16) -> Option<DeviceId>;
    /// Whether bad copies may be rewritten (not on a read-only mount).
    fn may_write(&self) -> bool;
    /// A write completed on `disk` that no flush has covered yet: a sync, a
    /// barrier or a dismount must flush it.
    fn wrote(&mut self, disk: u16);
    /// Mark `extents` of the file initialised, durably (the commit's barrier
    /// flushes `written`, the disks the zeros and data went to, first), and
    /// publish the new snapshot. Called with the extents' latches held. Each
    /// extent comes with the copies that were written: one the file no
    /// longer has there (shrunk and grown again meanwhile) is left alone.
    fn mark_initialized(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, Extent)],
        written: &BTreeSet<u16>,
    ) -> Result<(), GroupError>;
    /// Mark `extents` of the file unwritten again (they read as zeros and
    /// their next write zeroes them first), durably, and publish the new
    /// snapshot. Called with the extents' latches held. An extent whose
    /// copies are no longer the ones given (moved or cut meanwhile) is left
    /// alone. Returns the extents marked.
    fn mark_unwritten(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, Extent)],
    ) -> Result<Vec<u64>, GroupError>;
    /// Disks an I/O of this operation failed on, with why (the first
    /// failure on each: [`disk_states::failure_reason`]), as seen in the
    /// disk view of `epoch`: returns once they are offline (durably), or
    /// fails when the group cannot go on without them.
    fn disks_failed(&mut self, disks: &FailedDisks, epoch: u64) -> Result<(), GroupError>;
    /// Mark AUs of copies of the file stale, durably, and publish the new
    /// snapshot: the copies missed (or are about to miss) a write. A mark
    /// for a copy the file no longer has is dropped.
    fn mark_stale(
        &mut self,
        file: u32,
        incarnation: u32,
        marks: &[StaleMark],
    ) -> Result<(), GroupError>;
    /// Copies on `disks` missed a write, and their stale marks could not
    /// be made durable: if the group stopped, have the superblocks record
    /// it ([`Group::record_missed_writes`]); nothing otherwise.
    fn missed_writes(&mut self, disks: &BTreeSet<u16>);
    /// The file's current snapshot (see [`DataPlane::file`]).
    fn snapshot(&mut self, number: u32) -> Option<Arc<FileSnapshot>> {
        self.plane().file(number)
    }
    /// The current disk view (see [`DataPlane::disks`]).
    fn disk_view(&mut self) -> Arc<DiskView> {
        self.plane().disks()
    }
    /// A buffer of `len` bytes for one I/O. Its bytes are unspecified: a
    /// read counts only if it filled the buffer whole, a write copies its
    /// data in first.
    fn buffer(&mut self, len: usize) -> AlignedBuf {
        AlignedBuf::zeroed(len)
    }
    /// A buffer an I/O is done with, for [`DataPort::buffer`] to hand out
    /// again.
    fn recycle(&mut self, buf: AlignedBuf) {
        drop(buf);
    }
}

/// A buffer holding a copy of `bytes`, from the port's spares.
fn buffer_with(port: &mut dyn DataPort, bytes: &[u8]) -> AlignedBuf {
    let mut buf = port.buffer(bytes.len());
    buf.copy_from_slice(bytes);
    buf
}

/// AUs of one copy of an extent that missed a write: set in the copy's
/// stale mask (`Extent::stale`), so they are never read until resynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StaleMark {
    pub extent: u64,
    /// The copy, by where it is (a copy the file no longer has is skipped).
    pub copy: AuAddr,
    pub mask: u16,
}

/// The AUs (indices inside the extent) a piece touches.
fn piece_aus(snap: &FileSnapshot, within: u64, len: u64) -> std::ops::Range<u64> {
    aus_touched(snap.au_bytes, within, len)
}

/// The AUs (indices inside an extent of `au_bytes` AUs) that `len` bytes at
/// `within` touch.
pub(super) fn aus_touched(au_bytes: u64, within: u64, len: u64) -> std::ops::Range<u64> {
    within / au_bytes..(within + len.max(1) - 1) / au_bytes + 1
}

/// Every AU of extent `index`.
fn whole_extent_mask(index: u64) -> u16 {
    au_mask(0..crate::placement::extent_aus(index))
}

/// Copies of `extent` not written in the view (their disk is offline) whose
/// AUs in `mask` are not all marked stale yet: they must be before the
/// write is acknowledged.
fn missed_copies(
    view: &DiskView,
    index: u64,
    extent: &Extent,
    mask: u16,
    out: &mut Vec<StaleMark>,
) {
    for (slot, c) in extent.copies().iter().enumerate() {
        if !view.is_writable(c.disk) && extent.stale[slot] & mask != mask {
            match out.iter_mut().find(|m| m.extent == index && m.copy == *c) {
                Some(m) => m.mask |= mask,
                None => out.push(StaleMark {
                    extent: index,
                    copy: *c,
                    mask,
                }),
            }
        }
    }
}

/// One I/O of a data operation, on a member disk.
pub(super) struct DiskIo {
    pub(super) disk: u16,
    pub(super) op: Op,
}

/// What became of one [`DiskIo`]: its result, and its buffer back.
pub(super) type IoOutcome = (Result<u64, IoError>, Option<AlignedBuf>);

/// Where a read goes and how many bytes it must bring (`None` for other
/// operations).
fn read_range(op: &Op) -> Option<(u64, u64)> {
    match op {
        Op::Read { offset_bytes, buf } => Some((*offset_bytes, buf.len() as u64)),
        _ => None,
    }
}

/// A completion as an outcome. A read that did not fill its buffer whole is
/// an error: a buffer from [`DataPort::buffer`] holds old bytes.
fn outcome(c: cairn_io::Completion, read: Option<(u64, u64)>) -> IoOutcome {
    let result = match (c.result, read) {
        (Ok(done), Some((offset_bytes, len_bytes))) if done < len_bytes => {
            Err(IoError::ShortTransfer {
                kind: c.kind,
                offset_bytes,
                len_bytes,
                done_bytes: done,
            })
        }
        (result, _) => result,
    };
    (result, c.buf)
}

/// The outcome of an I/O on a disk the port's engine does not have.
fn unknown_device(disk: u16) -> IoOutcome {
    (Err(IoError::UnknownDevice(DeviceId(u32::from(disk)))), None)
}

/// Run one I/O on the port's engine.
fn run_one(port: &mut dyn DataPort, io: DiskIo) -> Result<IoOutcome, GroupError> {
    let Some(device) = port.device(io.disk) else {
        return Ok(unknown_device(io.disk));
    };
    let read = read_range(&io.op);
    let c = port
        .engine()
        .execute(Request {
            device,
            tag: 0,
            op: io.op,
        })
        .map_err(io_err("(engine)"))?;
    Ok(outcome(c, read))
}

/// Run `ios` at once on the port's engine; per I/O, its outcome.
pub(super) fn run(
    port: &mut dyn DataPort,
    mut ios: Vec<DiskIo>,
) -> Result<Vec<IoOutcome>, GroupError> {
    if ios.len() == 1 {
        let io = ios.pop().expect("invariant: one I/O");
        return Ok(vec![run_one(port, io)?]);
    }
    let mut out: Vec<Option<IoOutcome>> = (0..ios.len()).map(|_| None).collect();
    let mut reads = Vec::with_capacity(ios.len());
    let mut requests = Vec::with_capacity(ios.len());
    for (i, io) in ios.into_iter().enumerate() {
        reads.push(read_range(&io.op));
        match port.device(io.disk) {
            Some(device) => requests.push(Request {
                device,
                tag: i as u64,
                op: io.op,
            }),
            None => out[i] = Some(unknown_device(io.disk)),
        }
    }
    let completions = port
        .engine()
        .execute_all(requests)
        .map_err(io_err("(engine)"))?;
    for c in completions {
        let i = c.tag as usize;
        out[i] = Some(outcome(c, reads[i]));
    }
    Ok(out
        .into_iter()
        .map(|r| r.expect("invariant: every I/O has an outcome"))
        .collect())
}

/// One piece of a copy between member disks: `len` bytes read from disk
/// `from.0` at byte `from.1` and written to disk `to.0` at byte `to.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CopyIo {
    pub(super) from: (u16, u64),
    pub(super) to: (u16, u64),
    pub(super) len: u64,
}

/// What became of one [`CopyIo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Copied {
    /// Read and written (the write recorded with [`DataPort::wrote`]).
    Done,
    /// The read failed or came back short: nothing was written.
    ReadFailed,
    /// The write failed.
    WriteFailed,
}

/// Copy `pieces`, with at most `inflight` I/Os (and no more than the
/// engine holds) in flight at once. A piece's write is submitted as soon as
/// its read completes, so reads and writes overlap; the next read is taken
/// from the source disk with the fewest I/Os in flight, so that every disk
/// stays busy whatever order the pieces come in. Buffers come from `pool`
/// (else from the port) and go back to it: a copy of any size holds at most
/// `inflight` of them. The engine must be idle; it is again on return.
pub(super) fn copy(
    port: &mut dyn DataPort,
    pieces: &[CopyIo],
    inflight: usize,
    pool: &mut Vec<AlignedBuf>,
) -> Result<Vec<Copied>, GroupError> {
    use cairn_io::SubmitError;
    use std::collections::VecDeque;
    let mut out: Vec<Option<Copied>> = vec![None; pieces.len()];
    // Pieces not read yet, per source disk, in the order given.
    let mut waiting: BTreeMap<u16, VecDeque<usize>> = BTreeMap::new();
    for (i, p) in pieces.iter().enumerate() {
        waiting.entry(p.from.0).or_default().push_back(i);
    }
    // Requests made and not yet accepted by the engine (writes whose read
    // is done, or a request it refused as full): submitted before any new
    // read.
    let mut ready: VecDeque<Request> = VecDeque::new();
    // I/Os made and not completed, per disk and in all (ready ones count).
    let mut busy: BTreeMap<u16, usize> = BTreeMap::new();
    let mut running = 0usize;
    let limit = inflight.max(1).min(port.engine().depth_max().max(1));
    let mut left = pieces.len();
    let buffer = |port: &mut dyn DataPort, pool: &mut Vec<AlignedBuf>, len: usize| match pool.pop()
    {
        Some(mut b) if b.capacity() >= len => {
            b.set_len(len);
            b
        }
        _ => port.buffer(len),
    };
    while left > 0 {
        let mut full = false;
        while let Some(r) = ready.pop_front() {
            if let Err(SubmitError::QueueFull(r)) = port.engine().submit(r) {
                ready.push_front(r);
                full = true;
                break;
            }
        }
        while !full && running < limit {
            let Some(disk) = waiting
                .iter()
                .filter(|(_, q)| !q.is_empty())
                .min_by_key(|(d, _)| busy.get(*d).copied().unwrap_or(0))
                .map(|(d, _)| *d)
            else {
                break;
            };
            let Some(i) = waiting.get_mut(&disk).and_then(VecDeque::pop_front) else {
                break;
            };
            let p = pieces[i];
            let Some(device) = port.device(p.from.0) else {
                out[i] = Some(Copied::ReadFailed);
                left -= 1;
                continue;
            };
            let request = Request {
                device,
                tag: (i as u64) << 1,
                op: Op::Read {
                    offset_bytes: p.from.1,
                    buf: buffer(port, pool, p.len as usize),
                },
            };
            *busy.entry(p.from.0).or_default() += 1;
            running += 1;
            if let Err(SubmitError::QueueFull(r)) = port.engine().submit(request) {
                ready.push_back(r);
                full = true;
            }
        }
        if left == 0 {
            break;
        }
        if port.engine().in_flight() == 0 {
            return Err(GroupError::Invalid(
                "the I/O engine refused a request while idle; this is a bug".into(),
            ));
        }
        port.engine().wait(1).map_err(io_err("(engine)"))?;
        while let Some(c) = port.engine().pop_completion() {
            let i = (c.tag >> 1) as usize;
            let p = pieces[i];
            let write = c.tag & 1 == 1;
            if let Some(n) = busy.get_mut(if write { &p.to.0 } else { &p.from.0 }) {
                *n = n.saturating_sub(1);
            }
            if write {
                running -= 1;
                left -= 1;
                out[i] = Some(if c.result.is_ok() {
                    port.wrote(p.to.0);
                    Copied::Done
                } else {
                    Copied::WriteFailed
                });
                pool.extend(c.buf);
                continue;
            }
            match (outcome(c, Some((p.from.1, p.len))), port.device(p.to.0)) {
                ((Ok(_), Some(buf)), Some(device)) => {
                    // The read's place in the window passes to its write.
                    *busy.entry(p.to.0).or_default() += 1;
                    ready.push_back(Request {
                        device,
                        tag: ((i as u64) << 1) | 1,
                        op: Op::Write {
                            offset_bytes: p.to.1,
                            buf,
                            fua: false,
                        },
                    });
                }
                ((result, buf), _) => {
                    running -= 1;
                    left -= 1;
                    out[i] = Some(match (result, &buf) {
                        (Ok(_), Some(_)) => Copied::WriteFailed,
                        _ => Copied::ReadFailed,
                    });
                    pool.extend(buf);
                }
            }
        }
    }
    Ok(out
        .into_iter()
        .map(|o| o.expect("invariant: every piece has an outcome"))
        .collect())
}

/// Where byte `within` of an extent's copy `c` is on its disk.
pub(super) fn at(snap: &FileSnapshot, c: AuAddr, within: u64) -> u64 {
    u64::from(c.au) * snap.au_bytes + within
}

/// The copies of an extent that may be read for its AUs `aus`: online in
/// the view and not stale there, primary first.
pub(super) fn readable_copies_of<'a>(
    view: &'a DiskView,
    extent: &'a Extent,
    aus: std::ops::Range<u64>,
) -> impl Iterator<Item = AuAddr> + Clone + 'a {
    extent
        .copies()
        .iter()
        .enumerate()
        .filter(move |(slot, c)| view.is_online(c.disk) && !extent.stale_in(*slot, aus.clone()))
        .map(|(_, c)| *c)
}

/// The common read: `len` bytes at `offset` that lie in one written
/// extent ([`FileSnapshot::one_piece`]), and the copies that may be read
/// for them, primary first ([`readable_copies_of`]). `None` where the
/// general path must decide: several pieces, an extent never written, a
/// range outside the file.
pub(super) fn common_read<'a>(
    snap: &'a FileSnapshot,
    view: &'a DiskView,
    offset: u64,
    len: u64,
) -> Option<(Piece, impl Iterator<Item = AuAddr> + Clone + 'a)> {
    let piece = snap.one_piece(offset, len)?;
    let extent = snap.extent(piece.extent).filter(|e| e.initialized)?;
    let copies = readable_copies_of(view, extent, piece_aus(snap, piece.within, piece.len));
    Some((piece, copies))
}

/// [`readable_copies_of`], collected.
fn readable_copies(view: &DiskView, extent: &Extent, aus: std::ops::Range<u64>) -> Vec<AuAddr> {
    readable_copies_of(view, extent, aus).collect()
}

/// The copies of an extent a write goes to: on disks written in the view
/// (ONLINE or SYNCING), primary first.
fn writable_copies_of<'a>(
    view: &'a DiskView,
    extent: &'a Extent,
) -> impl Iterator<Item = AuAddr> + Clone + 'a {
    extent
        .copies()
        .iter()
        .copied()
        .filter(|c| view.is_writable(c.disk))
}

/// [`writable_copies_of`], collected.
fn writable_copies(view: &DiskView, extent: &Extent) -> Vec<AuAddr> {
    writable_copies_of(view, extent).collect()
}

fn file_snapshot(port: &mut dyn DataPort, number: u32) -> Result<Arc<FileSnapshot>, GroupError> {
    if let Some(why) = port.plane().stopped() {
        return Err(GroupError::Poisoned(why));
    }
    port.snapshot(number)
        .ok_or_else(|| GroupError::NotFound(format!("file {number} does not exist")))
}

/// The range must be sector-aligned and inside the file.
fn check_range(snap: &FileSnapshot, offset: u64, len: u64) -> Result<(), GroupError> {
    let sector = u64::from(snap.sector_bytes);
    if !offset.is_multiple_of(sector) || !len.is_multiple_of(sector) {
        return Err(GroupError::Invalid(format!(
            "I/O at offset {offset} length {len} is not aligned to the group's {sector}-byte sectors"
        )));
    }
    if offset
        .checked_add(len)
        .is_none_or(|end| end > snap.size_bytes)
    {
        return Err(GroupError::Invalid(format!(
            "I/O at offset {offset} length {len} goes past the end of the file ({} bytes); resize it first",
            snap.size_bytes
        )));
    }
    Ok(())
}

fn pieces_of(snap: &FileSnapshot, offset: u64, len: u64) -> Result<Vec<Piece>, GroupError> {
    snap.pieces(offset, len).ok_or_else(|| {
        GroupError::Corrupt(format!(
            "file {}: its extent map does not cover {offset}..{}",
            snap.number,
            offset + len
        ))
    })
}

/// A write to `len` bytes at `offset` of file `number` none of whose
/// copies (`extent`'s) can be written: each is on a disk not written now.
fn unwritable_error(
    number: u32,
    offset: u64,
    len: u64,
    view: &DiskView,
    extent: &Extent,
) -> GroupError {
    let disks: Vec<String> = extent.copies().iter().map(|c| view.name(c.disk)).collect();
    GroupError::WriteFailed(format!(
        "file {number} offset {offset} length {len}: no copy can be written, every one is on a disk that is offline ({}); nothing was written — bring one of them back (`cairn group online`)",
        disks.join(", ")
    ))
}

/// `len` bytes at `offset` of file `number` (one piece of a write, or of
/// a zeroing: `what`) reached none of their copies: `failures` says what
/// each copy's I/O answered, by disk.
fn lost_write_error(
    what: &str,
    (number, offset, len): (u32, u64, u64),
    view: &DiskView,
    failures: &[(u16, IoError)],
) -> GroupError {
    let copies: Vec<String> = failures
        .iter()
        .map(|(d, e)| format!("disk {}: {e}", view.name(*d)))
        .collect();
    GroupError::WriteFailed(format!(
        "file {number} offset {offset} length {len}: the {what} reached no copy ({}); check those disks and the kernel log (dmesg)",
        copies.join("; ")
    ))
}

/// Read `buf.len()` bytes at `offset` of file `number`, accepting the bytes
/// only if `accept` passes on the whole buffer.
pub(crate) fn read(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    number: u32,
    offset: u64,
    buf: &mut [u8],
    accept: &dyn Fn(&[u8]) -> bool,
) -> Result<(), GroupError> {
    // The guard covers the I/O only, never a wait for a latch or for the
    // metadata plane: freed AUs wait for it.
    let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
    let snap = file_snapshot(port, number)?;
    let view = port.disk_view();
    check_range(&snap, offset, buf.len() as u64)?;
    let first = read_from_primary(port, &snap, &view, offset, buf, accept)?;
    if matches!(first, First::Accepted) {
        return Ok(());
    }
    let pieces = pieces_of(&snap, offset, buf.len() as u64)?;
    let mut tries = Tries {
        number,
        offset,
        len: buf.len() as u64,
        choice: vec![0usize; pieces.len()],
        copies: Vec::with_capacity(pieces.len()),
        bad: Vec::new(),
        failed_disks: FailedDisks::new(),
        problems: Vec::new(),
    };
    let result = read_copies(port, &snap, &view, &pieces, buf, accept, first, &mut tries);
    drop(guard);
    // A disk whose read failed as a disk fails is taken offline before the
    // read answers, served or not: no later read goes to it.
    let offlined = if !tries.failed_disks.is_empty() && port.may_write() {
        port.disks_failed(&tries.failed_disks, view.epoch)
    } else {
        Ok(())
    };
    // The read's own error first: it names what failed where.
    result?;
    offlined?;
    if tries.bad.is_empty() || !port.may_write() {
        return Ok(());
    }
    let good: BTreeMap<usize, AuAddr> = tries
        .bad
        .iter()
        .map(|(i, _)| (*i, tries.copies[*i][tries.choice[*i]]))
        .collect();
    repair(port, slot, &snap, &view, &pieces, &tries.bad, &good)
}

/// The general read: every piece from its copies in turn, until the
/// caller's check passes on the whole buffer. `first`: what the short path
/// did (its one piece's first copy).
#[allow(clippy::too_many_arguments)]
fn read_copies(
    port: &mut dyn DataPort,
    snap: &FileSnapshot,
    view: &DiskView,
    pieces: &[Piece],
    buf: &mut [u8],
    accept: &dyn Fn(&[u8]) -> bool,
    first: First,
    tries: &mut Tries,
) -> Result<(), GroupError> {
    // Per piece: its readable copies (none for an extent never written,
    // which reads as zeros).
    for p in pieces {
        let extent = snap
            .extent(p.extent)
            .expect("invariant: pieces are in the map");
        if extent.initialized {
            let aus = piece_aus(snap, p.within, p.len);
            let online = readable_copies(view, extent, aus.clone());
            if online.is_empty() {
                return Err(tries.none_readable(view, extent, aus));
            }
            tries.copies.push(online);
        } else {
            buf[p.at..p.at + p.len as usize].fill(0);
            tries.copies.push(Vec::new());
        }
    }
    let mut pending: Vec<usize> = (0..pieces.len())
        .filter(|i| !tries.copies[*i].is_empty())
        .collect();
    // Where the short path left off: its one piece, from the first copy
    // online (the one the general path would read first), failed to read
    // or was rejected.
    match first {
        First::Accepted | First::NotTaken => {}
        First::Failed(result) => {
            debug_assert_eq!(pieces.len(), 1, "the short path reads one piece");
            tries.failed(
                0,
                view,
                at(snap, tries.copies[0][0], pieces[0].within),
                result,
            )?;
        }
        First::Rejected => pending = tries.rejected()?,
    }
    loop {
        while !pending.is_empty() {
            let ios = pending
                .iter()
                .map(|&i| {
                    let c = tries.copies[i][tries.choice[i]];
                    DiskIo {
                        disk: c.disk,
                        op: Op::Read {
                            offset_bytes: at(snap, c, pieces[i].within),
                            buf: port.buffer(pieces[i].len as usize),
                        },
                    }
                })
                .collect();
            let results = run(port, ios)?;
            let mut again = Vec::new();
            for (&i, (result, data)) in pending.iter().zip(results) {
                let p = &pieces[i];
                match (result, data) {
                    (Ok(_), Some(data)) => {
                        buf[p.at..p.at + p.len as usize].copy_from_slice(&data[..p.len as usize]);
                        port.recycle(data);
                    }
                    (result, data) => {
                        if let Some(data) = data {
                            port.recycle(data);
                        }
                        let c = tries.copies[i][tries.choice[i]];
                        tries.failed(i, view, at(snap, c, p.within), result)?;
                        again.push(i);
                    }
                }
            }
            pending = again;
        }
        if accept(buf) {
            return Ok(());
        }
        pending = tries.rejected()?;
    }
}

/// A read's progress through the copies of its pieces.
struct Tries {
    /// The range read, for messages.
    number: u32,
    offset: u64,
    len: u64,
    /// Per piece: its online copies, primary first (none: reads as zeros).
    copies: Vec<Vec<AuAddr>>,
    /// Per piece: the copy read now.
    choice: Vec<usize>,
    /// Copies found bad (piece, copy), to be rewritten from a good one.
    bad: Vec<(usize, AuAddr)>,
    /// Disks a read failed on as a disk fails ([`read_fails_the_disk`]):
    /// taken offline, their copies not rewritten.
    failed_disks: FailedDisks,
    /// What went wrong with each, for the error when no copy serves.
    problems: Vec<String>,
}

impl Tries {
    /// Piece `i`'s current copy failed to read, at byte `at` of its disk,
    /// with `result` (an error, or a success that brought no data): it
    /// moves to the next copy, or the read fails when there is none.
    fn failed(
        &mut self,
        i: usize,
        view: &DiskView,
        at: u64,
        result: Result<u64, IoError>,
    ) -> Result<(), GroupError> {
        let c = self.copies[i][self.choice[i]];
        let error = result.err();
        self.problems.push(format!(
            "disk {} at byte {at}: {}",
            view.name(c.disk),
            error
                .as_ref()
                .map_or_else(|| "no data".to_string(), ToString::to_string)
        ));
        if let Some(e) = error.as_ref().filter(|e| read_fails_the_disk(e)) {
            note_failed(&mut self.failed_disks, c.disk, e);
        } else {
            self.bad.push((i, c));
        }
        self.choice[i] += 1;
        if self.choice[i] >= self.copies[i].len() {
            return Err(self.no_copy());
        }
        Ok(())
    }

    /// The caller's check failed on the whole buffer: every piece with
    /// another copy moves to it. The pieces to read again, or an error when
    /// none has another copy.
    fn rejected(&mut self) -> Result<Vec<usize>, GroupError> {
        self.problems.push(format!(
            "copies {:?} failed the caller's check",
            self.choice
        ));
        let mut again = Vec::new();
        for i in 0..self.copies.len() {
            if self.choice[i] + 1 < self.copies[i].len() {
                self.bad.push((i, self.copies[i][self.choice[i]]));
                self.choice[i] += 1;
                again.push(i);
            }
        }
        if again.is_empty() {
            return Err(self.no_copy());
        }
        Ok(again)
    }

    fn no_copy(&self) -> GroupError {
        GroupError::Unreadable(format!(
            "file {} offset {} length {}: no copy could be read ({}); check those disks and the kernel log (dmesg)",
            self.number,
            self.offset,
            self.len,
            self.problems.join("; ")
        ))
    }

    /// No copy of `extent` may be read for its AUs `aus`: each is on a disk
    /// that is not online, or stale there.
    fn none_readable(
        &self,
        view: &DiskView,
        extent: &Extent,
        aus: std::ops::Range<u64>,
    ) -> GroupError {
        let copies: Vec<String> = extent
            .copies()
            .iter()
            .enumerate()
            .map(|(slot, c)| {
                let why = if !view.is_online(c.disk) {
                    "offline"
                } else if extent.stale_in(slot, aus.clone()) {
                    "stale: it missed a write"
                } else {
                    "readable"
                };
                format!("disk {} {why}", view.name(c.disk))
            })
            .collect();
        GroupError::Unreadable(format!(
            "file {} offset {} length {}: no copy can be read ({}); bring the disk back (`cairn group online`)",
            self.number,
            self.offset,
            self.len,
            copies.join(", ")
        ))
    }
}

/// How the short path's read went.
enum First {
    /// Not taken (more than one piece, an extent never written, no copy
    /// online): nothing was read.
    NotTaken,
    /// Read from the first online copy and accepted: done.
    Accepted,
    /// The read of the first online copy failed: its result (an error, or
    /// a success that brought no data).
    Failed(Result<u64, IoError>),
    /// Read whole, into the caller's buffer, and rejected by its check.
    Rejected,
}

/// The common read, without the general path's bookkeeping: a range inside
/// one written extent, read whole from its first online copy. When that
/// copy fails or is rejected, the general path goes on from there (to the
/// next copy, and the repair of this one).
fn read_from_primary(
    port: &mut dyn DataPort,
    snap: &FileSnapshot,
    view: &DiskView,
    offset: u64,
    buf: &mut [u8],
    accept: &dyn Fn(&[u8]) -> bool,
) -> Result<First, GroupError> {
    let primary = common_read(snap, view, offset, buf.len() as u64)
        .and_then(|(piece, mut copies)| Some((piece, copies.next()?)));
    let Some((piece, c)) = primary else {
        return Ok(First::NotTaken);
    };
    let io = DiskIo {
        disk: c.disk,
        op: Op::Read {
            offset_bytes: at(snap, c, piece.within),
            buf: port.buffer(buf.len()),
        },
    };
    let (result, data) = run_one(port, io)?;
    if let Some(data) = &data {
        if result.is_ok() {
            buf.copy_from_slice(data);
        }
    }
    let read = result.is_ok() && data.is_some();
    if let Some(data) = data {
        port.recycle(data);
    }
    if !read {
        return Ok(First::Failed(result));
    }
    Ok(if accept(buf) {
        First::Accepted
    } else {
        First::Rejected
    })
}

/// Rewrite bad copies of pieces from their good copies, under the extents'
/// latches: the good copy is read again there, so a write that landed after
/// our read is what the bad copy gets. Rewrites that fail are failed disks.
fn repair(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    snap: &FileSnapshot,
    view: &DiskView,
    pieces: &[Piece],
    bad: &[(usize, AuAddr)],
    good: &BTreeMap<usize, AuAddr>,
) -> Result<(), GroupError> {
    let keys: Vec<LatchKey> = good
        .keys()
        .map(|i| (snap.number, snap.incarnation, pieces[*i].extent))
        .collect();
    let reads: Vec<(usize, AuAddr)> = good.iter().map(|(i, c)| (*i, *c)).collect();
    let latch = port
        .plane()
        .latch(keys.into_iter().map(|k| (k, true)).collect());
    let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
    // The extents must still be where we read them (not freed, not moved),
    // and the good copies still online: a copy whose disk went offline since
    // may have missed writes, and must not be copied over another.
    let view_now = port.disk_view();
    if good.values().any(|c| !view_now.is_online(c.disk)) {
        return Ok(());
    }
    let current = port.snapshot(snap.number);
    let unchanged = current.as_ref().is_some_and(|c| {
        c.incarnation == snap.incarnation
            && good.keys().all(|i| {
                let e = pieces[*i].extent;
                c.extent(e).map(Extent::copies) == snap.extent(e).map(Extent::copies)
            })
    });
    if !unchanged {
        return Ok(());
    }
    let ios = reads
        .iter()
        .map(|(i, c)| DiskIo {
            disk: c.disk,
            op: Op::Read {
                offset_bytes: at(snap, *c, pieces[*i].within),
                buf: port.buffer(pieces[*i].len as usize),
            },
        })
        .collect();
    let results = run(port, ios)?;
    let mut fresh: BTreeMap<usize, AlignedBuf> = BTreeMap::new();
    for ((i, _), (result, data)) in reads.iter().zip(results) {
        if let (Ok(_), Some(data)) = (result, data) {
            fresh.insert(*i, data);
        }
    }
    let mut writes = Vec::new();
    let mut targets = Vec::new();
    for (i, c) in bad {
        let Some(data) = fresh.get(i) else { continue };
        if good.get(i) == Some(c) || !view.is_online(c.disk) {
            continue;
        }
        targets.push(c.disk);
        writes.push(DiskIo {
            disk: c.disk,
            op: Op::Write {
                offset_bytes: at(snap, *c, pieces[*i].within),
                buf: buffer_with(port, data),
                fua: false,
            },
        });
    }
    let results = run(port, writes)?;
    drop(guard);
    drop(latch);
    let (ok, failed): (Vec<_>, Vec<_>) = targets
        .into_iter()
        .zip(results)
        .partition(|(_, (r, _))| r.is_ok());
    for (disk, _) in ok {
        port.wrote(disk);
    }
    let mut failed_disks = FailedDisks::new();
    for (disk, (result, _)) in failed {
        if let Err(e) = result {
            note_failed(&mut failed_disks, disk, &e);
        }
    }
    if failed_disks.is_empty() {
        return Ok(());
    }
    port.disks_failed(&failed_disks, view.epoch)
}
/// After a write's I/O (the disks written reported to the port), before it
/// is acknowledged: a copy that missed the write is never read again, so its
/// disk goes offline first (or the write fails). `lost`: why a piece of
/// the write reached no copy, which fails it.
///
/// The copies that failed are marked stale first (`missed`), then their
/// disks taken offline: a crash between the two leaves the marks, and the
/// next mount resyncs those AUs whatever became of the disk.
fn settle_write(
    port: &mut dyn DataPort,
    guard: Option<OperationGuard<'_>>,
    (number, incarnation): (u32, u32),
    missed: &[StaleMark],
    failed: &FailedDisks,
    view: &DiskView,
    lost: Option<GroupError>,
) -> Result<(), GroupError> {
    drop(guard);
    mark_missed(port, (number, incarnation), missed)?;
    if !failed.is_empty() {
        port.disks_failed(failed, view.epoch)?;
    }
    match lost {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Mark stale, durably, copies that missed a write (or zeros) some other
/// copy took. If the marks cannot be made durable (the group stopped), the
/// disks of those copies are recorded as having missed writes, so that the
/// next mount resyncs them: a write that did not land everywhere never
/// leaves copies that differ with nothing to say so.
fn mark_missed(
    port: &mut dyn DataPort,
    (number, incarnation): (u32, u32),
    missed: &[StaleMark],
) -> Result<(), GroupError> {
    if missed.is_empty() {
        return Ok(());
    }
    port.mark_stale(number, incarnation, missed)
        .inspect_err(|_| {
            port.missed_writes(&missed.iter().map(|m| m.copy.disk).collect());
        })
}

/// The common write, without the general path's bookkeeping: a range inside
/// one extent already written, to every online copy of it, under the
/// extent's shared latch. `Ok(false)`, having written nothing, when the
/// write is not that (more than one piece, a first write, a file that
/// changed before the latch was taken, no copy online): the general path
/// does it instead.
fn write_in_place(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    snap: &Arc<FileSnapshot>,
    number: u32,
    offset: u64,
    data: &[u8],
) -> Result<bool, GroupError> {
    let len = data.len() as u64;
    if len == 0 || snap.read_only.is_some() || check_range(snap, offset, len).is_err() {
        return Ok(false);
    }
    let loc = snap.layout.locate(offset);
    if loc.run_bytes < len || !snap.extent(loc.extent).is_some_and(|e| e.initialized) {
        return Ok(false);
    }
    let latch = port
        .plane()
        .latch(vec![((number, snap.incarnation, loc.extent), false)]);
    let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
    // Latched, look again (as the general path does): still this snapshot,
    // so the copies are still the extent's and it is still written.
    if !Arc::ptr_eq(&file_snapshot(port, number)?, snap) {
        return Ok(false);
    }
    let view = port.disk_view();
    let extent = *snap
        .extent(loc.extent)
        .expect("invariant: located in the map");
    let aus = piece_aus(snap, loc.offset_in_extent, len);
    // A copy on an offline disk not yet marked stale here: the general path
    // marks it first.
    let mut unmarked = Vec::new();
    missed_copies(
        &view,
        loc.extent,
        &extent,
        au_mask(aus.clone()),
        &mut unmarked,
    );
    if !unmarked.is_empty() {
        return Ok(false);
    }
    let online = || writable_copies_of(&view, &extent);
    let io = |port: &mut dyn DataPort, c: AuAddr| DiskIo {
        disk: c.disk,
        op: Op::Write {
            offset_bytes: at(snap, c, loc.offset_in_extent),
            buf: buffer_with(port, data),
            fua: false,
        },
    };
    let mut landed = false;
    let mut failed = FailedDisks::new();
    let mut missed = Vec::new();
    let mut errors = Vec::new();
    let mask = au_mask(aus);
    let mut settle = |port: &mut dyn DataPort, c: AuAddr, (result, buf): IoOutcome| {
        if let Some(buf) = buf {
            port.recycle(buf);
        }
        match result {
            Ok(_) => {
                landed = true;
                port.wrote(c.disk);
            }
            Err(e) => {
                note_failed(&mut failed, c.disk, &e);
                errors.push((c.disk, e));
                missed.push(StaleMark {
                    extent: loc.extent,
                    copy: c,
                    mask,
                });
            }
        }
    };
    // One copy (external redundancy) goes without collecting anything.
    match online().count() {
        0 => return Ok(false),
        1 => {
            let c = online().next().expect("invariant: one copy online");
            let io = io(port, c);
            let outcome = run_one(port, io)?;
            settle(port, c, outcome);
        }
        _ => {
            let copies: Vec<AuAddr> = online().collect();
            let ios = copies.iter().map(|c| io(port, *c)).collect();
            for (c, outcome) in copies.iter().zip(run(port, ios)?) {
                settle(port, *c, outcome);
            }
        }
    }
    let lost = (!landed).then(|| lost_write_error("write", (number, offset, len), &view, &errors));
    if !landed {
        // No copy has it: the write fails and every copy keeps what it had.
        missed.clear();
    }
    settle_write(
        port,
        guard,
        (number, snap.incarnation),
        &missed,
        &failed,
        &view,
        lost,
    )?;
    drop(latch);
    Ok(true)
}

/// Write `data` at `offset` of file `number` to every online copy.
pub(crate) fn write(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    number: u32,
    offset: u64,
    data: &[u8],
) -> Result<(), GroupError> {
    let len = data.len() as u64;
    let mut snap = file_snapshot(port, number)?;
    if write_in_place(port, slot, &snap, number, offset, data)? {
        return Ok(());
    }
    // Latch, then look again: the extents a first write latches
    // exclusively must still be the ones never written. The guard starts
    // after the latch (a wait for it must not hold freed AUs back) and before
    // the snapshot the I/O uses. A pass that finds the file changed in a
    // way the latches do not cover, or that must mark copies stale first,
    // starts again from the file as it is: at most WRITE_ATTEMPTS_MAX
    // passes, none of which writes a byte.
    let mut attempts = 0;
    let (snap, pieces, fresh, latch, guard, view) = loop {
        if attempts == WRITE_ATTEMPTS_MAX {
            return Err(GroupError::WriteFailed(format!(
                "file {number} offset {offset} length {len}: the file changed under the write {WRITE_ATTEMPTS_MAX} times in a row (cut and grown, replaced, or a disk went offline meanwhile); nothing was written — write again once the file stops changing"
            )));
        }
        attempts += 1;
        if let Some(why) = &snap.read_only {
            return Err(why.error());
        }
        check_range(&snap, offset, len)?;
        let pieces = pieces_of(&snap, offset, len)?;
        let fresh: BTreeSet<u64> = pieces
            .iter()
            .filter(|p| !snap.extent(p.extent).is_some_and(|e| e.initialized))
            .map(|p| p.extent)
            .collect();
        let keys = pieces
            .iter()
            .map(|p| {
                (
                    (number, snap.incarnation, p.extent),
                    fresh.contains(&p.extent),
                )
            })
            .collect();
        let latch = port.plane().latch(keys);
        let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
        let now = file_snapshot(port, number)?;
        // The same published snapshot (not just the same version number: a
        // file number reused by a new file starts its versions again).
        let (now, pieces, fresh) = if Arc::ptr_eq(&now, &snap) {
            (now, pieces, fresh)
        } else {
            let now_fresh: BTreeSet<u64> = pieces_of(&now, offset, len)
                .unwrap_or_default()
                .iter()
                .filter(|p| !now.extent(p.extent).is_some_and(|e| e.initialized))
                .map(|p| p.extent)
                .collect();
            if !(now.incarnation == snap.incarnation
                && now.read_only.is_none()
                && check_range(&now, offset, len).is_ok()
                && now_fresh
                    .iter()
                    .all(|e| latch.holds_exclusive(&(number, snap.incarnation, *e))))
            {
                // The file changed under us in a way the latches do not
                // cover (a shrink and a grow, a delete and a create): start
                // again from it.
                drop(guard);
                drop(latch);
                snap = now;
                continue;
            }
            let pieces = pieces_of(&now, offset, len)?;
            (now, pieces, now_fresh)
        };
        let view = port.disk_view();
        // Copies on offline disks miss this write: marked stale before any
        // byte of it lands (a first write changes the whole extent).
        let mut unmarked = Vec::new();
        for p in &pieces {
            let ext = now
                .extent(p.extent)
                .expect("invariant: pieces are in the map");
            let mask = if fresh.contains(&p.extent) {
                whole_extent_mask(p.extent)
            } else {
                au_mask(piece_aus(&now, p.within, p.len))
            };
            missed_copies(&view, p.extent, ext, mask, &mut unmarked);
        }
        if unmarked.is_empty() {
            break (now, pieces, fresh, latch, guard, view);
        }
        // Never mark the last copy: a piece no copy of which can be written
        // fails the write, its copies left as they are.
        let unwritable = pieces.iter().find(|p| {
            now.extent(p.extent)
                .is_some_and(|e| writable_copies_of(&view, e).next().is_none())
        });
        if let Some(p) = unwritable {
            drop(guard);
            let ext = now
                .extent(p.extent)
                .expect("invariant: pieces are in the map");
            return Err(unwritable_error(number, offset, len, &view, ext));
        }
        // The guard never spans a wait for the metadata plane (which may be
        // waiting for running operations to drain), nor the latches: mark,
        // then start again from the new snapshot.
        drop(guard);
        drop(latch);
        port.mark_stale(number, now.incarnation, &unmarked)?;
        snap = file_snapshot(port, number)?;
    };
    let mut failed = FailedDisks::new();
    let mut missed: Vec<StaleMark> = Vec::new();
    // Failed data writes, by piece: marked only where the piece landed on
    // some copy (else the write fails and every copy keeps what it had).
    let mut missed_pieces: Vec<(usize, StaleMark, IoError)> = Vec::new();
    let mut written: BTreeSet<u16> = BTreeSet::new();
    // First writes: zero what this write does not cover of each fresh extent.
    let mut covered: BTreeMap<u64, u64> = BTreeMap::new();
    for p in pieces.iter().filter(|p| fresh.contains(&p.extent)) {
        *covered.entry(p.extent).or_default() += p.len;
    }
    let mut zeroing = Vec::new();
    for (extent, bytes) in &covered {
        let whole = snap.layout.extent_bytes(*extent);
        if *bytes >= whole {
            continue;
        }
        let ext = snap
            .extent(*extent)
            .expect("invariant: pieces are in the map");
        for c in writable_copies(&view, ext) {
            zeroing.push((*extent, c, whole));
        }
    }
    if !zeroing.is_empty() {
        let ios = zeroing
            .iter()
            .map(|(_, c, len_bytes)| DiskIo {
                disk: c.disk,
                op: zero_op(port, c.disk, u64::from(c.au) * snap.au_bytes, *len_bytes),
            })
            .collect();
        for ((extent, c, _), (result, _)) in zeroing.iter().zip(run(port, ios)?) {
            match result {
                Ok(_) => {
                    written.insert(c.disk);
                }
                Err(e) => {
                    note_failed(&mut failed, c.disk, &e);
                    missed.push(StaleMark {
                        extent: *extent,
                        copy: *c,
                        mask: whole_extent_mask(*extent),
                    });
                }
            };
        }
    }
    // The data, in bounded batches, to every online copy.
    let mut landed = vec![0usize; pieces.len()];
    let mut start = 0;
    while start < pieces.len() {
        let mut end = start;
        let mut bytes = 0;
        while end < pieces.len()
            && (end == start || bytes + pieces[end].len <= WRITE_BATCH_BYTES_MAX)
        {
            bytes += pieces[end].len;
            end += 1;
        }
        let mut ios = Vec::new();
        let mut of = Vec::new();
        for (i, p) in pieces.iter().enumerate().take(end).skip(start) {
            let ext = snap
                .extent(p.extent)
                .expect("invariant: pieces are in the map");
            for c in writable_copies(&view, ext) {
                of.push((i, c));
                ios.push(DiskIo {
                    disk: c.disk,
                    op: Op::Write {
                        offset_bytes: at(&snap, c, p.within),
                        buf: buffer_with(port, &data[p.at..p.at + p.len as usize]),
                        fua: false,
                    },
                });
            }
        }
        for ((i, c), (result, buf)) in of.into_iter().zip(run(port, ios)?) {
            if let Some(buf) = buf {
                port.recycle(buf);
            }
            match result {
                Ok(_) => {
                    landed[i] += 1;
                    written.insert(c.disk);
                }
                Err(e) => {
                    note_failed(&mut failed, c.disk, &e);
                    let p = &pieces[i];
                    missed_pieces.push((
                        i,
                        StaleMark {
                            extent: p.extent,
                            copy: c,
                            mask: au_mask(piece_aus(&snap, p.within, p.len)),
                        },
                        e,
                    ));
                }
            }
        }
        start = end;
    }
    let lost = landed.iter().position(|n| *n == 0).map(|i| {
        let p = &pieces[i];
        let errors: Vec<(u16, IoError)> = missed_pieces
            .iter()
            .filter(|(j, _, _)| *j == i)
            .map(|(_, m, e)| (m.copy.disk, e.clone()))
            .collect();
        lost_write_error(
            "write",
            (number, offset + p.at as u64, p.len),
            &view,
            &errors,
        )
    });
    for disk in &written {
        port.wrote(*disk);
    }
    missed.extend(
        missed_pieces
            .into_iter()
            .filter(|(i, _, _)| landed[*i] > 0)
            .map(|(_, m, _)| m),
    );
    settle_write(
        port,
        guard,
        (number, snap.incarnation),
        &missed,
        &failed,
        &view,
        lost,
    )?;
    if fresh.is_empty() {
        return Ok(());
    }
    let fresh: Vec<(u64, Extent)> = fresh
        .into_iter()
        .map(|e| {
            (
                e,
                *snap.extent(e).expect("invariant: pieces are in the map"),
            )
        })
        .collect();
    let marked = port.mark_initialized(number, snap.incarnation, &fresh, &written);
    drop(latch);
    marked
}

/// Make every extent of file `number` initialised: the ones never written
/// are zeroed on every online copy, then marked — as a first write does, under
/// their latches (exclusive), so no first writer's data is zeroed. Returns how
/// many extents it zeroed.
pub(crate) fn initialize(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    number: u32,
) -> Result<u64, GroupError> {
    /// Extents zeroed by one batch of requests.
    const BATCH: usize = 64;
    let mut done = 0u64;
    // Passes since the last batch zeroed: one that must mark copies stale
    // first starts again, at most WRITE_ATTEMPTS_MAX times in a row.
    let mut attempts = 0;
    loop {
        if attempts == WRITE_ATTEMPTS_MAX {
            return Err(changing_error("zeroing", number));
        }
        attempts += 1;
        let snap = file_snapshot(port, number)?;
        if let Some(why) = &snap.read_only {
            return Err(why.error());
        }
        let fresh: Vec<u64> = snap
            .extents()
            .enumerate()
            .filter(|(_, e)| !e.initialized)
            .map(|(i, _)| i as u64)
            .take(BATCH)
            .collect();
        if fresh.is_empty() {
            return Ok(done);
        }
        let latch = port.plane().latch(
            fresh
                .iter()
                .map(|e| ((number, snap.incarnation, *e), true))
                .collect(),
        );
        let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
        let now = file_snapshot(port, number)?;
        if now.incarnation != snap.incarnation {
            return Err(GroupError::NotFound(format!(
                "file {number} does not exist"
            )));
        }
        // Another first writer may have finished some meanwhile.
        let still: Vec<(u64, Extent)> = fresh
            .iter()
            .filter_map(|e| now.extent(*e).filter(|x| !x.initialized).map(|x| (*e, *x)))
            .collect();
        let view = port.disk_view();
        let mut zeroing = Vec::new();
        let mut unmarked = Vec::new();
        for (e, extent) in &still {
            let copies = writable_copies(&view, extent);
            if copies.is_empty() {
                let at = u64::try_from(now.layout.logical_offset(*e, 0)).unwrap_or(u64::MAX);
                let len = now.layout.extent_bytes(*e);
                return Err(unwritable_error(number, at, len, &view, extent));
            }
            missed_copies(&view, *e, extent, whole_extent_mask(*e), &mut unmarked);
            for c in copies {
                zeroing.push((*e, c, now.layout.extent_bytes(*e)));
            }
        }
        if !unmarked.is_empty() {
            drop(guard);
            port.mark_stale(number, now.incarnation, &unmarked)?;
            continue;
        }
        let ios = zeroing
            .iter()
            .map(|(_, c, len_bytes)| DiskIo {
                disk: c.disk,
                op: zero_op(port, c.disk, u64::from(c.au) * now.au_bytes, *len_bytes),
            })
            .collect();
        let mut written = BTreeSet::new();
        let mut failed = FailedDisks::new();
        let mut missed = Vec::new();
        for ((e, c, _), (result, _)) in zeroing.iter().zip(run(port, ios)?) {
            match result {
                Ok(_) => {
                    written.insert(c.disk);
                }
                Err(error) => {
                    note_failed(&mut failed, c.disk, &error);
                    missed.push(StaleMark {
                        extent: *e,
                        copy: *c,
                        mask: whole_extent_mask(*e),
                    });
                }
            };
        }
        drop(guard);
        for disk in &written {
            port.wrote(*disk);
        }
        mark_missed(port, (number, now.incarnation), &missed)?;
        if !failed.is_empty() {
            port.disks_failed(&failed, view.epoch)?;
        }
        // Zeroed before the map says so: a crash in between leaves extents
        // that are zero and still read as zeros.
        port.mark_initialized(number, now.incarnation, &still, &written)?;
        drop(latch);
        done += still.len() as u64;
        attempts = 0;
    }
}

/// What a punch did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Punched {
    /// Written extents made unwritten again (they read as zeros).
    pub extents: u64,
    /// Bytes discarded on member disks, every copy counted.
    pub discarded_bytes: u64,
    /// Bytes of the range zeroed in place (parts of written extents it
    /// does not cover whole), counted once.
    pub zeroed_bytes: u64,
}

/// Set in the extent of a read-modify-write latch key
/// (`DataHandle::write_bytes`): a key of its own beside the extent's data
/// latch. Taken before the data latch, in a call of its own (a single call
/// sorts keys, and would take the data latch first).
pub(super) const RMW_LATCH: u64 = 1 << 63;

/// The read-modify-write latches of `extents` of file `number`, then their
/// data latches, all exclusive: in two calls, as `write_bytes` takes them (a
/// single call sorts the keys, and would take the data latches first).
fn latch_whole(
    port: &mut dyn DataPort,
    number: u32,
    incarnation: u32,
    extents: &[u64],
) -> (LatchGuard, LatchGuard) {
    let keys = |tag: u64| {
        extents
            .iter()
            .map(|e| ((number, incarnation, tag | *e), true))
            .collect()
    };
    let rmw = port.plane().latch(keys(RMW_LATCH));
    let data = port.plane().latch(keys(0));
    (rmw, data)
}

/// File `number`'s snapshot, if it is still `incarnation` and may be
/// written.
fn writable_snapshot(
    port: &mut dyn DataPort,
    number: u32,
    incarnation: u32,
) -> Result<Arc<FileSnapshot>, GroupError> {
    let now = file_snapshot(port, number)?;
    if now.incarnation != incarnation {
        return Err(GroupError::NotFound(format!(
            "file {number} does not exist"
        )));
    }
    if let Some(why) = &now.read_only {
        return Err(why.error());
    }
    Ok(now)
}

/// Make whole extents of file `number` read as zeros again, as if never
/// written (a hole punched in a volume: `fstrim`, `blkdiscard`):
///
/// 1. under each extent's read-modify-write latch and data latch, both
///    exclusive (no write is in flight on it, and none starts, so none is
///    lost or resurrected), the extents still written are marked unwritten
///    in one durable commit, and the new map published;
/// 2. every operation that took the old map (a reader, which takes no
///    latch) is waited for;
/// 3. with `discard`, each copy's AUs are discarded on its disk where the
///    disk takes discard (an error is ignored: the bytes stay, and the map
///    already says zeros).
///
/// The AUs stay the file's: a volume is thick (its file system never meets
/// ENOSPC from the group), and the array gets the blocks back. A crash
/// after the commit leaves the extents unwritten with their old bytes on
/// disk, which read as zeros all the same.
pub(crate) fn punch_extents(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    number: u32,
    incarnation: u32,
    extents: &[u64],
    discard: bool,
) -> Result<Punched, GroupError> {
    /// Extents per latch and commit.
    const BATCH: usize = 256;
    let mut done = Punched::default();
    for batch in extents.chunks(BATCH) {
        let (rmw, latch) = latch_whole(port, number, incarnation, batch);
        let now = writable_snapshot(port, number, incarnation)?;
        let still: Vec<(u64, Extent)> = batch
            .iter()
            .filter_map(|e| now.extent(*e).filter(|x| x.initialized).map(|x| (*e, *x)))
            .collect();
        if still.is_empty() {
            continue;
        }
        let marked = port.mark_unwritten(number, incarnation, &still)?;
        done.extents += marked.len() as u64;
        // Readers take no latch: one that took the old map may still be
        // reading these AUs. If they do not end in time, the extents stay
        // unwritten without their discard (a reclaim returns the space).
        let drained = port.plane().wait_for_older_operations();
        if discard && drained {
            // The guard before the snapshot the discards are taken from:
            // AUs a cut (which takes no latch) freed before it are not in
            // that snapshot, and those it frees after wait for the guard.
            // Only what is still this extent, unwritten, where it was.
            let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
            let after = file_snapshot(port, number)?;
            let view = port.disk_view();
            let mut ios = Vec::new();
            let mut lens = Vec::new();
            let unchanged = still.iter().filter(|(e, extent)| {
                marked.contains(e)
                    && after.incarnation == incarnation
                    && after
                        .extent(*e)
                        .is_some_and(|x| !x.initialized && x.copies() == extent.copies())
            });
            for (e, extent) in unchanged {
                let len_bytes = after.layout.extent_bytes(*e);
                for c in writable_copies(&view, extent) {
                    let takes = port.device(c.disk).is_some_and(|device| {
                        matches!(
                            port.engine().geometry(device).map(|g| g.discard),
                            Some(cairn_io::geometry::DiscardSupport::Supported { .. })
                        )
                    });
                    if takes {
                        lens.push(len_bytes);
                        ios.push(DiskIo {
                            disk: c.disk,
                            op: Op::Discard {
                                offset_bytes: u64::from(c.au) * after.au_bytes,
                                len_bytes,
                            },
                        });
                    }
                }
            }
            for (len_bytes, (result, _)) in lens.into_iter().zip(run(port, ios)?) {
                if result.is_ok() {
                    done.discarded_bytes += len_bytes;
                }
            }
            drop(guard);
        }
        drop(latch);
        drop(rmw);
    }
    Ok(done)
}

/// Make `parts` of written extents of file `number` read as zeros in
/// place, on every copy: with `unmap`, by discard where the disk promises
/// zeros after it (so a thin array gets those blocks back too), else by
/// write-zeroes ([`zero_op`]). Each part is (extent, offset in its AU run,
/// length), sector-aligned. Under the extents' read-modify-write and data
/// latches, exclusive, as [`punch_extents`]. As a write: a copy on a disk
/// not written now is marked stale first, never the last copy (a part no
/// copy of which can be written fails, its copies left as they are); a
/// copy whose I/O fails is marked stale if another copy of the part took
/// the zeros, and its disk reported; a part no copy took fails. Returns the
/// bytes zeroed, counted once.
pub(crate) fn zero_parts(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    number: u32,
    incarnation: u32,
    parts: &[(u64, u64, u64)],
    unmap: bool,
) -> Result<u64, GroupError> {
    let extents: Vec<u64> = parts
        .iter()
        .map(|p| p.0)
        .collect::<BTreeSet<u64>>()
        .into_iter()
        .collect();
    let (rmw, latch) = latch_whole(port, number, incarnation, &extents);
    // A pass that must mark copies stale first starts again: at most
    // WRITE_ATTEMPTS_MAX of them.
    for _ in 0..WRITE_ATTEMPTS_MAX {
        // The guard before the snapshot the I/O uses (a cut may free AUs).
        let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
        let now = writable_snapshot(port, number, incarnation)?;
        let view = port.disk_view();
        // The parts still in written extents (an unwritten one reads as
        // zeros already), with their extents.
        let live: Vec<(u64, u64, u64, Extent)> = parts
            .iter()
            .filter_map(|(e, within, len)| {
                now.extent(*e)
                    .filter(|x| x.initialized)
                    .map(|x| (*e, *within, *len, *x))
            })
            .collect();
        if let Some((_, _, _, extent)) = live
            .iter()
            .find(|(_, _, _, x)| writable_copies_of(&view, x).next().is_none())
        {
            drop(guard);
            let (e, within, len, _) = live
                .iter()
                .find(|(_, _, _, x)| x == extent)
                .expect("invariant: found in the parts");
            let at = u64::try_from(now.layout.logical_offset(*e, *within)).unwrap_or(u64::MAX);
            return Err(unwritable_error(number, at, *len, &view, extent));
        }
        let mut unmarked = Vec::new();
        for (e, within, len, extent) in &live {
            let mask = au_mask(piece_aus(&now, *within, *len));
            missed_copies(&view, *e, extent, mask, &mut unmarked);
        }
        if !unmarked.is_empty() {
            // Never over the metadata plane: mark, then look again.
            drop(guard);
            port.mark_stale(number, incarnation, &unmarked)?;
            continue;
        }
        let mut ios = Vec::new();
        let mut of = Vec::new();
        for (i, (e, within, len, extent)) in live.iter().enumerate() {
            let mask = au_mask(piece_aus(&now, *within, *len));
            for c in writable_copies(&view, extent) {
                let at = u64::from(c.au) * now.au_bytes + within;
                let op = if unmap {
                    zero_op(port, c.disk, at, *len)
                } else {
                    Op::WriteZeroes {
                        offset_bytes: at,
                        len_bytes: *len,
                    }
                };
                of.push((
                    i,
                    StaleMark {
                        extent: *e,
                        copy: c,
                        mask,
                    },
                ));
                ios.push(DiskIo { disk: c.disk, op });
            }
        }
        let mut landed = vec![0usize; live.len()];
        let mut failed = FailedDisks::new();
        let mut missed = Vec::new();
        let mut written = BTreeSet::new();
        for ((i, mark), (result, _)) in of.into_iter().zip(run(port, ios)?) {
            match result {
                Ok(_) => {
                    landed[i] += 1;
                    written.insert(mark.copy.disk);
                }
                Err(e) => {
                    note_failed(&mut failed, mark.copy.disk, &e);
                    missed.push((i, mark, e));
                }
            }
        }
        for disk in &written {
            port.wrote(*disk);
        }
        let lost = landed.iter().position(|n| *n == 0).map(|i| {
            let (e, within, len, _) = live[i];
            let at = u64::try_from(now.layout.logical_offset(e, within)).unwrap_or(u64::MAX);
            let errors: Vec<(u16, IoError)> = missed
                .iter()
                .filter(|(j, _, _)| *j == i)
                .map(|(_, m, e)| (m.copy.disk, e.clone()))
                .collect();
            lost_write_error("zeroing", (number, at, len), &view, &errors)
        });
        let missed: Vec<StaleMark> = missed
            .into_iter()
            .filter(|(i, _, _)| landed[*i] > 0)
            .map(|(_, m, _)| m)
            .collect();
        settle_write(
            port,
            guard,
            (number, incarnation),
            &missed,
            &failed,
            &view,
            lost,
        )?;
        drop(latch);
        drop(rmw);
        return Ok(live.iter().map(|(_, _, len, _)| len).sum());
    }
    Err(changing_error("zeroing", number))
}

/// A write (or zeroing: `what`) of file `number` that found the file, or
/// the disks, changed under it [`WRITE_ATTEMPTS_MAX`] times in a row, and
/// gave up having written nothing.
fn changing_error(what: &str, number: u32) -> GroupError {
    GroupError::WriteFailed(format!(
        "file {number}: the {what} found the file changed under it {WRITE_ATTEMPTS_MAX} times in a row (cut and grown, replaced, or a disk went offline meanwhile); nothing was written — try again once the file stops changing"
    ))
}

/// Make a whole extent copy read as zeros: by discard where the device
/// promises discarded blocks read back as zeros (a thin LUN stays thin),
/// else by write-zeroes.
pub(super) fn zero_op(port: &mut dyn DataPort, disk: u16, offset_bytes: u64, len_bytes: u64) -> Op {
    let discard_zeroes = port.device(disk).is_some_and(|device| {
        matches!(
            port.engine().geometry(device).map(|g| g.discard),
            Some(cairn_io::geometry::DiscardSupport::Supported {
                reads_zeroes: true,
                ..
            })
        )
    });
    if discard_zeroes {
        Op::Discard {
            offset_bytes,
            len_bytes,
        }
    } else {
        Op::WriteZeroes {
            offset_bytes,
            len_bytes,
        }
    }
}

impl DataPort for Group<'_> {
    fn plane(&self) -> &Arc<DataPlane> {
        &self.plane
    }
    fn engine(&mut self) -> &mut dyn IoEngine {
        &mut *self.engine
    }
    fn device(&self, disk: u16) -> Option<DeviceId> {
        self.member(disk).and_then(Member::writable)
    }
    fn may_write(&self) -> bool {
        !self.read_only
    }
    fn wrote(&mut self, disk: u16) {
        if let Some(m) = self.member_mut(disk) {
            m.needs_flush = true;
        }
    }
    fn mark_initialized(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, Extent)],
        written: &BTreeSet<u16>,
    ) -> Result<(), GroupError> {
        self.check_writable()?;
        for disk in written {
            self.depend_on(*disk);
        }
        let extents = self.extents_still(file, incarnation, extents, |_| true)?;
        Group::set_initialized(self, file, &extents, true)
    }
    fn mark_unwritten(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, Extent)],
    ) -> Result<Vec<u64>, GroupError> {
        self.check_writable()?;
        let extents = self.extents_still(file, incarnation, extents, |now| now.initialized)?;
        if !extents.is_empty() {
            Group::set_initialized(self, file, &extents, false)?;
        }
        Ok(extents)
    }
    fn mark_stale(
        &mut self,
        file: u32,
        incarnation: u32,
        marks: &[StaleMark],
    ) -> Result<(), GroupError> {
        self.check_writable()?;
        self.set_stale_in_steps(file, incarnation, marks)?;
        self.commit()
    }
    fn missed_writes(&mut self, disks: &BTreeSet<u16>) {
        if self.poisoned.is_some() && !self.read_only {
            self.record_missed_writes(disks);
        }
    }
    fn disks_failed(&mut self, disks: &FailedDisks, _epoch: u64) -> Result<(), GroupError> {
        self.check_usable()?;
        // A disk another thread's report took offline already is done: the
        // write that saw it fail skipped no copy anyone will read.
        let still: Vec<(u16, &String)> = disks
            .iter()
            .filter(|(d, _)| self.member(**d).and_then(Member::writable).is_some())
            .map(|(d, why)| (*d, why))
            .collect();
        if still.is_empty() {
            return Ok(());
        }
        for (d, why) in still {
            self.note_failure_why(d, why);
            self.failed_disks.insert(d);
        }
        self.offline_failed()
    }
}

impl Group<'_> {
    /// Every member disk attached to the metadata plane's engine, by number.
    pub fn member_devices(&self) -> BTreeMap<u16, DeviceId> {
        (0..self.members.len() as u16)
            .filter_map(|d| Some((d, self.member(d)?.device?)))
            .collect()
    }

    /// Attach a device to the metadata plane's engine (a disk about to be
    /// added to a live group: [`super::LiveGroup::add_devices`]).
    pub(super) fn attach_device(
        &mut self,
        file: cairn_io::DeviceFile,
    ) -> Result<DeviceId, GroupError> {
        self.engine.attach_file(file).ok_or_else(|| {
            GroupError::Invalid(format!(
                "group {}'s engine cannot take a new device while it is mounted",
                self.name
            ))
        })
    }

    /// A member that was not attached (missing when the group mounted, so
    /// OFFLINE) found again on `device`, attached to the engine: from now
    /// on it is that member's device, still OFFLINE until `online` brings
    /// it back (which checks then that it is the image the group left).
    /// The label of the member it is, or `None` when the device is not a
    /// missing member of this group.
    pub(super) fn reattach(&mut self, device: DeviceId) -> Result<Option<String>, GroupError> {
        let found = super::superblock::identify(&mut *self.engine, &[device]);
        let Some((_, header, slot)) = found
            .get(&self.uuid)
            .and_then(|disks| disks.first())
            .cloned()
        else {
            return Ok(None);
        };
        let size = self.engine.geometry(device).map(|g| g.size_bytes);
        let Some(m) = self
            .members
            .iter_mut()
            .flatten()
            .find(|m| m.entry.disk_uuid == header.disk_uuid && m.device.is_none())
            // A disk dropped by force, or leaving, does not come back.
            .filter(|m| !m.entry.forced() && !m.entry.dropping())
        else {
            return Ok(None);
        };
        if size.is_none_or(|s| s < m.entry.size_bytes) {
            return Err(GroupError::Invalid(format!(
                "disk {} is smaller than the {} bytes the group recorded for it (a truncated file, or a smaller device in its place): it cannot come back",
                m.entry.label, m.entry.size_bytes
            )));
        }
        m.device = Some(device);
        m.generation = slot.map_or(0, |(generation, _)| generation);
        let label = m.entry.label.clone();
        self.publish_disks();
        Ok(Some(label))
    }

    /// The disk a device attached to the engine is, by its label: its uuid
    /// and label, if it carries this group's label.
    pub(super) fn disk_on(&mut self, device: DeviceId) -> Option<(Uuid, String)> {
        let found = super::superblock::identify(&mut *self.engine, &[device]);
        let (_, header, _) = found.get(&self.uuid)?.first()?;
        Some((header.disk_uuid, header.label.as_str().to_string()))
    }

    /// Which of `extents` (index, as seen) file `file` (this incarnation)
    /// still has with the same copies, and `also` holds for.
    fn extents_still(
        &self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, Extent)],
        also: impl Fn(&Extent) -> bool,
    ) -> Result<Vec<u64>, GroupError> {
        let Some(rec) = self
            .files
            .get(&file)
            .filter(|r| r.entry.incarnation == incarnation)
        else {
            return Err(GroupError::NotFound(format!("file {file} does not exist")));
        };
        Ok(extents
            .iter()
            .filter(|(i, seen)| {
                rec.extents
                    .get(*i as usize)
                    .is_some_and(|now| also(now) && now.copies() == seen.copies())
            })
            .map(|(i, _)| *i)
            .collect())
    }

    /// OFFLINE members (those named, by label, or all; not one leaving)
    /// that still hold a device: (disk, device).
    pub(super) fn offline_devices(&self, names: Option<&[String]>) -> Vec<(u16, DeviceId)> {
        self.members
            .iter()
            .flatten()
            .filter(|m| {
                m.entry.state == DiskState::Offline
                    && !m.entry.dropping()
                    && names.is_none_or(|n| {
                        n.iter()
                            .any(|l| l.trim().eq_ignore_ascii_case(m.entry.label.as_str()))
                    })
            })
            .filter_map(|m| Some((m.entry.number, m.device?)))
            .collect()
    }

    /// Detach OFFLINE member `disk` from `device`, as a disk missing at
    /// mount is, if that is still its device: its label.
    pub(super) fn release_device(&mut self, disk: u16, device: DeviceId) -> Option<String> {
        let m = self.member_mut(disk)?;
        if m.entry.state != DiskState::Offline || m.device != Some(device) {
            return None;
        }
        m.device = None;
        let label = m.entry.label.as_str().to_string();
        self.publish_disks();
        Some(label)
    }

    /// The disks gone OFFLINE since the last call (after an I/O error, or
    /// on request once stamped) that still hold a device: with `release`,
    /// each gives it up (detached from its member, as a disk missing at
    /// mount is, and a new disk view published) and the devices are
    /// returned for the caller to let go of; without, nothing changes (a
    /// source that cannot open them again keeps them).
    pub(super) fn release_offline(&mut self, release: bool) -> Vec<DeviceId> {
        let disks = std::mem::take(&mut self.to_release);
        if !release {
            return Vec::new();
        }
        let mut ids = Vec::new();
        for d in disks {
            let Some(m) = self.member_mut(d) else {
                continue;
            };
            if m.entry.state != DiskState::Offline {
                continue;
            }
            if let Some(id) = m.device.take() {
                ids.push(id);
            }
        }
        if !ids.is_empty() {
            self.publish_disks();
        }
        ids
    }

    /// Let go of a device no member uses (the engine closes it).
    pub(super) fn detach_device(&mut self, id: DeviceId) {
        if self.member_devices().values().any(|d| *d == id) {
            return;
        }
        drop(self.engine.detach_file(id));
    }

    /// The devices of disks whose drop completed since the last call.
    pub(super) fn take_left_devices(&mut self) -> Vec<DeviceId> {
        std::mem::take(&mut self.left_devices)
    }

    /// Mounted read-only (a listing or inspecting command).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
}

impl Group<'_> {
    // -----------------------------------------------------------------------
    // Data path

    /// Write `data` at `offset` of file `number` to every online copy.
    pub fn write(&mut self, number: u32, offset: u64, data: &[u8]) -> Result<(), GroupError> {
        self.check_writable()?;
        self.refuse_if_live()?;
        write(self, None, number, offset, data)
    }

    /// A live group's data goes through data handles: the group's own data
    /// calls run under the metadata lock, and a data path there would take
    /// latches after that lock (the order is latch, then lock).
    fn refuse_if_live(&self) -> Result<(), GroupError> {
        if self.live {
            return Err(GroupError::Invalid(
                "this group is live: read and write its files through a data handle".into(),
            ));
        }
        Ok(())
    }

    /// Read into `buf` from `offset` of file `number`.
    pub fn read(&mut self, number: u32, offset: u64, buf: &mut [u8]) -> Result<(), GroupError> {
        self.read_checked(number, offset, buf, &|_| true)
    }

    /// Read, accepting a copy only if `accept` passes on the whole buffer (the
    /// caller's own checksum). A copy that fails is rewritten from one that passes.
    pub fn read_checked(
        &mut self,
        number: u32,
        offset: u64,
        buf: &mut [u8],
        accept: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(), GroupError> {
        self.check_usable()?;
        self.refuse_if_live()?;
        read(self, None, number, offset, buf, accept)?;
        if self.read_only {
            return Ok(());
        }
        self.offline_failed()
    }

    // -----------------------------------------------------------------------
    // What the data plane sees

    /// The data plane this group publishes to: data handles read and write
    /// through it (`live.rs`).
    pub fn data_plane(&self) -> &Arc<DataPlane> {
        &self.plane
    }

    /// Publish the files the last commit changed.
    pub(super) fn publish_changed(&mut self) {
        for number in std::mem::take(&mut self.to_publish) {
            self.publish_file(number);
        }
    }

    /// Publish a file's snapshot as memory has it (or withdraw it: gone, or
    /// being deleted), sharing the chunks that did not change.
    pub(super) fn publish_file(&mut self, number: u32) {
        let changed = self.changed_chunks.remove(&number).unwrap_or_default();
        let snapshot = self
            .files
            .get(&number)
            .filter(|r| r.entry.state != FileState::Deleting)
            .map(|rec| {
                let previous = self.plane.file(number);
                let mut snap = FileSnapshot::build(
                    number,
                    rec.entry.incarnation,
                    rec.entry.size_bytes,
                    self.layout_for(rec),
                    self.sector_bytes,
                    rec.entry.copies,
                    self.not_writable(number),
                    &rec.extents,
                    previous.as_deref().map(|p| (p, &changed)),
                );
                snap.byte_size = super::namespace::attrs_of(&rec.entry).byte_size;
                snap
            });
        self.plane.publish_file(number, snapshot);
    }

    /// Publish every user file and the disk view (mount, create).
    pub(super) fn publish_all(&mut self) {
        self.plane.clear_files();
        let numbers: Vec<u32> = self
            .files
            .keys()
            .copied()
            .filter(|n| *n >= FILE_NUMBER_USER_MIN)
            .collect();
        self.changed_chunks.clear();
        self.to_publish.clear();
        for n in numbers {
            self.publish_file(n);
        }
        self.publish_disks();
    }

    /// Publish which disks data I/O may use.
    pub(super) fn publish_disks(&self) {
        let online = (0..self.members.len() as u16)
            .map(|d| self.member(d).and_then(Member::online).is_some())
            .collect();
        let writable = (0..self.members.len() as u16)
            .map(|d| self.member(d).and_then(Member::writable).is_some())
            .collect();
        let member = (0..self.members.len() as u16)
            .map(|d| self.member(d).is_some())
            .collect();
        let devices = (0..self.members.len() as u16)
            .map(|d| self.member(d).and_then(|m| m.device))
            .collect();
        let names = (0..self.members.len() as u16)
            .map(|d| self.disk_name(d))
            .collect();
        self.plane
            .publish_disks(online, writable, member, devices, names);
    }

    /// Why a file may not be written, if it may not.
    fn not_writable(&self, number: u32) -> Option<NotWritable> {
        match self.refuse_if_sharing(number) {
            Ok(()) => None,
            Err(GroupError::Lost(m)) => Some(NotWritable::Lost(m)),
            Err(e) => Some(NotWritable::Shared(e.to_string())),
        }
    }

    /// Mark extents of a file initialised (or, `initialized` false,
    /// unwritten again: a punched hole), committing in steps of at most
    /// [`STEP_DIRTY_MAX`] dirty blocks (a big write first-writes more extents
    /// than one transaction can name). Each step's barrier flush makes the
    /// data and zeros written before it durable before its flags are; a crash
    /// between steps leaves some extents still reading as zeros, which a
    /// write that was never acknowledged may do.
    pub(super) fn set_initialized(
        &mut self,
        number: u32,
        extents: &[u64],
        initialized: bool,
    ) -> Result<(), GroupError> {
        for e in extents {
            let rec = self.files.get_mut(&number).expect("invariant: checked");
            rec.extents[*e as usize].initialized = initialized;
            self.dirty_extent(number, *e);
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        let now = (self.clock)();
        let rec = self.files.get_mut(&number).expect("invariant: checked");
        rec.entry.modified_unix_seconds = now;
        self.dirty.insert(Dirty::Entry(number));
        self.commit()
    }

    /// Make a logical range read as zeros on every copy of the initialised
    /// extents it touches (uninitialised ones read as zeros already).
    pub(super) fn zero_range(
        &mut self,
        number: u32,
        offset: u64,
        len: u64,
    ) -> Result<(), GroupError> {
        // Copies made of this file's extents before now (a resync, a
        // relocation, which copy under latches this does not take) may
        // miss these zeros: they are not trusted (`zeroed_since`).
        self.zero_seq += 1;
        self.zeroed_files.insert(number, self.zero_seq);
        let mut requests = Vec::new();
        let mut disks = Vec::new();
        let layout = self.layout_for(&self.files[&number]);
        let mut done = 0u64;
        while done < len {
            let loc = layout.locate(offset + done);
            let (extent, within, run) = (
                loc.extent,
                loc.offset_in_extent,
                loc.run_bytes.min(len - done),
            );
            done += run;
            let ext = self.files[&number].extents[extent as usize];
            if !ext.initialized {
                continue;
            }
            let incarnation = self.files[&number].entry.incarnation;
            for c in ext.copies() {
                let Some(device) = self.member(c.disk).and_then(Member::writable) else {
                    // It misses the zeros: stale there, in this transaction.
                    let aus = aus_touched(self.au_bytes, within, run);
                    self.set_stale(
                        number,
                        incarnation,
                        &[StaleMark {
                            extent,
                            copy: *c,
                            mask: au_mask(aus),
                        }],
                    );
                    continue;
                };
                disks.push(c.disk);
                requests.push(Request {
                    device,
                    tag: requests.len() as u64,
                    op: Op::WriteZeroes {
                        offset_bytes: u64::from(c.au) * self.au_bytes + within,
                        len_bytes: run,
                    },
                });
            }
        }
        self.run_zeroing(requests, disks);
        Ok(())
    }

    /// Make every extent of file `number` initialised, zeroing on every copy
    /// the ones never written, so that direct reads of them return what the
    /// group would (zeros) and not an earlier file's bytes. Returns how many
    /// extents it zeroed. For a caller about to read all of it.
    pub fn initialize_file(&mut self, number: u32) -> Result<u64, GroupError> {
        self.check_writable()?;
        self.refuse_if_live()?;
        initialize(self, None, number)
    }

    /// The device of a member disk, if online.
    pub fn disk_device(&self, disk: u16) -> Option<cairn_io::DeviceId> {
        self.member(disk).and_then(Member::online)
    }

    /// The AUs holding a file's indirect extent blocks (one extent per AU,
    /// each with its copies), for the checker and tests.
    pub fn indirect_aus(&self, number: u32) -> Option<&[Extent]> {
        self.files.get(&number).map(|f| &f.entry.indirect[..])
    }

    /// Extents of a file (copies and initialised flag), for the checker and tests.
    pub fn extents(&self, number: u32) -> Option<&[Extent]> {
        self.files.get(&number).map(|f| &f.extents[..])
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use cairn_io::{Completion, EngineStats, Geometry, IoError, SubmitError};
    use cairn_io_sim::{geometry, SimEngine};

    const KIB: u64 = 1 << 10;

    /// An engine that records, over a simulated one, the most requests it
    /// held at once and the order requests reached it.
    struct Watched {
        sim: SimEngine,
        most: usize,
        /// (a write, its device) of every request, in order.
        kinds: Vec<(bool, u32)>,
    }

    impl IoEngine for Watched {
        fn name(&self) -> &'static str {
            "watched"
        }
        fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
            self.sim.geometry(device)
        }
        fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
            let kind = (matches!(request.op, Op::Write { .. }), request.device.0);
            self.sim.submit(request)?;
            self.kinds.push(kind);
            self.most = self.most.max(self.sim.in_flight());
            Ok(())
        }
        fn wait(&mut self, min_completions: usize) -> Result<(), IoError> {
            self.sim.wait(min_completions)
        }
        fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
            self.sim.set_io_timeout(timeout);
        }
        fn pop_completion(&mut self) -> Option<Completion> {
            self.sim.pop_completion()
        }
        fn in_flight(&self) -> usize {
            self.sim.in_flight()
        }
        fn depth_max(&self) -> usize {
            self.sim.depth_max()
        }
        fn stats(&self) -> EngineStats {
            self.sim.stats()
        }
    }

    /// Disks 0..4 are the engine's devices 0..4.
    struct Port {
        plane: Arc<DataPlane>,
        engine: Watched,
        wrote: BTreeSet<u16>,
    }

    impl DataPort for Port {
        fn plane(&self) -> &Arc<DataPlane> {
            &self.plane
        }
        fn engine(&mut self) -> &mut dyn IoEngine {
            &mut self.engine
        }
        fn device(&self, disk: u16) -> Option<DeviceId> {
            (disk < 4).then_some(DeviceId(u32::from(disk)))
        }
        fn may_write(&self) -> bool {
            true
        }
        fn wrote(&mut self, disk: u16) {
            self.wrote.insert(disk);
        }
        fn mark_initialized(
            &mut self,
            _: u32,
            _: u32,
            _: &[(u64, Extent)],
            _: &BTreeSet<u16>,
        ) -> Result<(), GroupError> {
            unreachable!("a copy marks nothing")
        }
        fn mark_unwritten(
            &mut self,
            _: u32,
            _: u32,
            _: &[(u64, Extent)],
        ) -> Result<Vec<u64>, GroupError> {
            unreachable!("a copy marks nothing")
        }
        fn disks_failed(&mut self, _: &FailedDisks, _: u64) -> Result<(), GroupError> {
            unreachable!("a copy reports, its caller fails disks")
        }
        fn mark_stale(&mut self, _: u32, _: u32, _: &[StaleMark]) -> Result<(), GroupError> {
            unreachable!("a copy marks nothing")
        }
        fn missed_writes(&mut self, _: &BTreeSet<u16>) {
            unreachable!("a copy marks nothing")
        }
    }

    fn port() -> Port {
        let mut sim = SimEngine::new(7, 64).with_latency(1_000..50_000);
        for _ in 0..4 {
            sim.add_disk(geometry(4 << 20, 4096, 4096, 64 << 10));
        }
        Port {
            plane: Arc::new(DataPlane::new()),
            engine: Watched {
                sim,
                most: 0,
                kinds: Vec::new(),
            },
            wrote: BTreeSet::new(),
        }
    }

    fn fill(port: &mut Port, disk: u16, offset: u64, len: u64, seed: u8) -> Vec<u8> {
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(seed)).collect();
        let dev = port.device(disk).unwrap();
        port.engine
            .sim
            .write_at(dev, offset, AlignedBuf::from_slice(&data), false)
            .expect("the fill is written");
        data
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn a_copy_keeps_its_window_overlaps_writes_with_reads_and_says_what_failed() {
        let mut port = port();
        // 24 pieces of 64 KiB: disk 0 → disk 2 and disk 1 → disk 3.
        let mut pieces = Vec::new();
        let mut want = Vec::new();
        for i in 0..24u64 {
            let (from, to) = if i % 2 == 0 { (0, 2) } else { (1, 3) };
            let at = i * 64 * KIB;
            want.push(fill(&mut port, from, at, 64 * KIB, i as u8 + 3));
            pieces.push(CopyIo {
                from: (from, at),
                to: (to, at + (1 << 20)),
                len: 64 * KIB,
            });
        }
        // Piece 4's source cannot be read, piece 7's target not written;
        // piece 9 goes to a disk the port does not have.
        port.engine
            .sim
            .disk_mut(DeviceId(0))
            .faults
            .read_error_ranges = vec![4 * 64 * KIB..5 * 64 * KIB];
        port.engine
            .sim
            .disk_mut(DeviceId(3))
            .faults
            .write_error_ranges = vec![(1 << 20) + 7 * 64 * KIB..(1 << 20) + 8 * 64 * KIB];
        pieces[9].to.0 = 9;
        let mut pool = Vec::new();
        let out = copy(&mut port, &pieces, 6, &mut pool).unwrap();
        for (i, o) in out.iter().enumerate() {
            let expected = match i {
                4 => Copied::ReadFailed,
                7 | 9 => Copied::WriteFailed,
                _ => Copied::Done,
            };
            assert_eq!(*o, expected, "piece {i}");
            if i == 4 || i == 7 {
                // Nothing reached the target of a piece that failed.
                let dev = port.device(pieces[i].to.0).unwrap();
                let got = port
                    .engine
                    .sim
                    .contents(dev, pieces[i].to.1, 64 * KIB as usize);
                assert!(got.iter().all(|b| *b == 0), "piece {i}'s target untouched");
            }
            if expected == Copied::Done {
                let dev = port.device(pieces[i].to.0).unwrap();
                let got = port
                    .engine
                    .sim
                    .contents(dev, pieces[i].to.1, 64 * KIB as usize);
                assert!(got == want[i], "piece {i} copied whole");
            }
        }
        assert_eq!(port.wrote, BTreeSet::from([2, 3]));
        assert_eq!(port.engine.sim.in_flight(), 0, "the engine is idle again");
        assert!(port.engine.most <= 6, "window kept: {}", port.engine.most);
        // Writes began before the last read: they overlap.
        let first_write = port.engine.kinds.iter().position(|k| k.0).unwrap();
        let last_read = port.engine.kinds.iter().rposition(|k| !k.0).unwrap();
        assert!(first_write < last_read, "{:?}", port.engine.kinds);
        // Buffers were reused: no more were made than the window.
        assert!(pool.len() <= 6, "{} buffers", pool.len());
    }

    #[test]
    fn reads_go_first_to_the_least_busy_source_disk() {
        let mut port = port();
        // Pieces listed disk by disk: all of disk 0's, then disk 1's.
        let pieces: Vec<CopyIo> = (0..16u64)
            .map(|i| CopyIo {
                from: (u16::from(i >= 8), (i % 8) * 64 * KIB),
                to: (2, i * 64 * KIB),
                len: 64 * KIB,
            })
            .collect();
        let out = copy(&mut port, &pieces, 4, &mut Vec::new()).unwrap();
        assert!(out.iter().all(|o| *o == Copied::Done));
        // Every read is of the disk with fewer I/Os in flight: the two
        // source disks alternate, though the pieces came disk by disk.
        let reads: Vec<u32> = port
            .engine
            .kinds
            .iter()
            .filter(|k| !k.0)
            .map(|k| k.1)
            .collect();
        assert_eq!(reads.len(), 16);
        assert_eq!(&reads[..4], &[0, 1, 0, 1], "{reads:?}");
        assert_eq!(port.engine.sim.in_flight(), 0);
    }

    /// A port onto file 9 (two extents, 1 MiB AUs, copies on disks 0 and
    /// 1), whose metadata plane never lets a writer settle: with `flip`,
    /// every look at the file (`snapshot`) finds a new publication in which
    /// extents 0 and 1 have swapped which one is written (a client looping
    /// ftruncate cuts and grows them again, and another writer first-writes
    /// one meanwhile); with `offline`, disk 1 is offline in the view and a
    /// stale mark never takes (each is for a copy the file no longer has by
    /// the time it is made). It counts the looks and the marks asked for.
    struct Churn {
        plane: Arc<DataPlane>,
        engine: SimEngine,
        flip: bool,
        view: Arc<DiskView>,
        looks: u32,
        marks: u32,
    }

    impl Churn {
        fn new(flip: bool, offline: bool) -> Self {
            let mut engine = SimEngine::new(11, 64);
            for _ in 0..2 {
                engine.add_disk(geometry(64 << 20, 4096, 4096, 64 << 10));
            }
            Self {
                plane: Arc::new(DataPlane::new()),
                engine,
                flip,
                view: Arc::new(DiskView {
                    epoch: 1,
                    online: vec![true, !offline],
                    writable: vec![true, !offline],
                    member: vec![true, true],
                    devices: vec![Some(DeviceId(0)), Some(DeviceId(1))],
                    names: vec!["D0".into(), "D1".into()],
                }),
                looks: 0,
                marks: 0,
            }
        }

        fn layout() -> cairn_format::extent_map::FileLayout {
            cairn_format::extent_map::FileLayout::new(
                1 << 20,
                cairn_format::extent_map::Striping::Coarse,
            )
        }
    }

    impl DataPort for Churn {
        fn plane(&self) -> &Arc<DataPlane> {
            &self.plane
        }
        fn engine(&mut self) -> &mut dyn IoEngine {
            &mut self.engine
        }
        fn device(&self, disk: u16) -> Option<DeviceId> {
            (disk < 2).then_some(DeviceId(u32::from(disk)))
        }
        fn may_write(&self) -> bool {
            true
        }
        fn wrote(&mut self, _: u16) {}
        fn mark_initialized(
            &mut self,
            _: u32,
            _: u32,
            _: &[(u64, Extent)],
            _: &BTreeSet<u16>,
        ) -> Result<(), GroupError> {
            Ok(())
        }
        fn mark_unwritten(
            &mut self,
            _: u32,
            _: u32,
            _: &[(u64, Extent)],
        ) -> Result<Vec<u64>, GroupError> {
            Ok(Vec::new())
        }
        fn disks_failed(&mut self, _: &FailedDisks, _: u64) -> Result<(), GroupError> {
            Ok(())
        }
        fn mark_stale(&mut self, _: u32, _: u32, _: &[StaleMark]) -> Result<(), GroupError> {
            self.marks += 1;
            Ok(())
        }
        fn missed_writes(&mut self, _: &BTreeSet<u16>) {}
        fn snapshot(&mut self, number: u32) -> Option<Arc<FileSnapshot>> {
            self.looks += 1;
            let first_written = !self.flip || self.looks % 2 == 1;
            let extents: Vec<Extent> = [first_written, !self.flip || !first_written]
                .iter()
                .enumerate()
                .map(|(i, written)| {
                    let au = 100 + 10 * i as u32;
                    Extent::new(&[AuAddr { disk: 0, au }, AuAddr { disk: 1, au }], *written)
                })
                .collect();
            let layout = Self::layout();
            Some(Arc::new(FileSnapshot::build(
                number,
                1,
                layout.capacity_bytes(2),
                layout,
                4096,
                2,
                None,
                &extents,
                None,
            )))
        }
        fn disk_view(&mut self) -> Arc<DiskView> {
            self.view.clone()
        }
    }

    /// A write across two extents beside a client that changes the file at
    /// every look (the latches the writer took no longer cover what it must
    /// write): it gives up after `WRITE_ATTEMPTS_MAX` looks with an error
    /// that says what happened, having written nothing, instead of
    /// panicking the thread that serves it.
    #[test]
    fn a_write_beside_a_file_that_keeps_changing_gives_up_with_an_error() {
        let mut port = Churn::new(true, false);
        // The last 4 KiB of extent 0 and the first of extent 1.
        let at = Churn::layout().extent_bytes(0) - 4096;
        let err = write(&mut port, None, 9, at, &[7u8; 8192]).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, GroupError::WriteFailed(_)),
            "not an I/O error nor a panic: {err:?}"
        );
        assert!(
            text.contains("file 9") && text.contains(&format!("offset {at}")),
            "names the write: {text}"
        );
        assert!(text.contains("changed"), "says why: {text}");
        assert!(
            port.looks <= WRITE_ATTEMPTS_MAX * 2 + 2,
            "bounded: {} looks",
            port.looks
        );
        assert_eq!(port.engine.stats().bytes_written, 0, "nothing written");
    }

    /// A write whose copy on an offline disk must be marked stale first,
    /// where the mark never takes: it asks at most `WRITE_ATTEMPTS_MAX`
    /// times and fails, instead of calling itself again without end.
    #[test]
    fn a_write_whose_stale_marks_never_take_gives_up_with_an_error() {
        let mut port = Churn::new(false, true);
        let err = write(&mut port, None, 9, 0, &[7u8; 4096]).unwrap_err();
        assert!(matches!(err, GroupError::WriteFailed(_)), "{err:?}");
        assert!(
            (1..=WRITE_ATTEMPTS_MAX).contains(&port.marks),
            "{} marks asked for",
            port.marks
        );
        assert_eq!(port.engine.stats().bytes_written, 0, "nothing written");
    }
}
