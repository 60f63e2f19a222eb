//! What the data paths share: the [`DataPort`], one I/O on a member disk
//! and a batch of them, which copies of an extent may be read or written,
//! the common read, and the errors the paths share.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cairn_format::group::{au_mask, AuAddr, Extent};
use cairn_io::{AlignedBuf, DeviceId, IoEngine, IoError, Op, Request};

use crate::group::disk_states;
use crate::group::error::{io_err, GroupError};
use crate::group::plane::{DataPlane, DiskView, FileSnapshot, Piece};

/// Bytes of a write's data turned into requests at once: a bigger write goes
/// to the disks in batches, so memory stays bounded whatever the caller
/// hands in (each copy holds its own buffer).
pub(super) const WRITE_BATCH_BYTES_MAX: u64 = 32 << 20;

/// Looks a write takes at its file before it gives up on a file that keeps
/// changing under the latches it took (a cut and a grow, a delete and a
/// create, a stale mark that did not take). Each look costs a snapshot and
/// a latch, no I/O; a writer needs more than two only beside a client that
/// changes the file as fast as it can (a loop of ftruncate).
pub(super) const WRITE_ATTEMPTS_MAX: u32 = 64;

/// Disks an I/O failed on, each with why (its first failure's reason):
/// what going OFFLINE is said with.
pub(in crate::group) type FailedDisks = BTreeMap<u16, String>;

/// Note that an I/O to `disk` failed with `error` (its first failure is kept).
pub(crate) fn note_failed(failed: &mut FailedDisks, disk: u16, error: &IoError) {
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
    /// it ([`Group::record_missed_writes`](crate::group::Group::record_missed_writes)); nothing otherwise.
    fn missed_writes(&mut self, disks: &BTreeSet<u16>);
    /// Write every changed block of the checksum maps through the journal
    /// and start the checksum log afresh (`maps.rs` `checkpoint_maps`):
    /// the log had no room for what a write or a sync must name. Called
    /// with no lock of the log held.
    fn checkpoint_maps(&mut self) -> Result<(), GroupError> {
        Err(GroupError::Unreadable(
            "the checksum log is full and this caller cannot checkpoint the maps".into(),
        ))
    }
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
pub(super) fn buffer_with(port: &mut dyn DataPort, bytes: &[u8]) -> AlignedBuf {
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
pub(super) fn piece_aus(snap: &FileSnapshot, within: u64, len: u64) -> std::ops::Range<u64> {
    aus_touched(snap.au_bytes, within, len)
}

/// The AUs (indices inside an extent of `au_bytes` AUs) that `len` bytes at
/// `within` touch.
pub(in crate::group) fn aus_touched(au_bytes: u64, within: u64, len: u64) -> std::ops::Range<u64> {
    within / au_bytes..(within + len.max(1) - 1) / au_bytes + 1
}

/// Every AU of extent `index`.
pub(super) fn whole_extent_mask(index: u64) -> u16 {
    au_mask(0..crate::placement::extent_aus(index))
}

/// The AUs of the copies of `extents` (unwritten, their first write about
/// to land) that are lent and still touched by an older data operation or a
/// discard in flight (`plane.rs`, `Lent`): each copy as (disk, first AU,
/// AUs), for [`wait_for_lent`]. `None` when none is, and at once (without
/// a look at the extents) while nothing is lent at all.
pub(super) fn lent_and_busy(
    plane: &DataPlane,
    snap: &FileSnapshot,
    extents: impl IntoIterator<Item = u64>,
) -> Option<Vec<(u16, u32, u32)>> {
    if !plane.lends() {
        return None;
    }
    let runs: Vec<(u16, u32, u32)> = extents
        .into_iter()
        .filter_map(|e| Some((e, snap.extent(e)?)))
        .flat_map(|(e, x)| {
            let aus = crate::placement::extent_aus(e) as u32;
            x.copies().iter().map(move |c| (c.disk, c.au, aus))
        })
        .collect();
    plane.lent_and_busy(&runs).then_some(runs)
}

/// Wait until `runs` ([`lent_and_busy`]) are no longer touched, holding
/// nothing (no latch, no guard): before a first write into them. Past the
/// bound, the write of file `number` fails, having written nothing.
pub(super) fn wait_for_lent(
    port: &mut dyn DataPort,
    number: u32,
    runs: &[(u16, u32, u32)],
) -> Result<(), GroupError> {
    if port.plane().wait_for_lent(runs) {
        return Ok(());
    }
    Err(GroupError::WriteFailed(format!(
        "file {number}: the space of its first write was freed by another file, and a data operation or a discard that may still touch it did not end within {} s; nothing was written — write again",
        port.plane().drain_bound().as_secs()
    )))
}

/// Copies of `extent` not written in the view (their disk is offline) whose
/// AUs in `mask` are not all marked stale yet: they must be before the
/// write is acknowledged.
pub(super) fn missed_copies(
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
pub(in crate::group) struct DiskIo {
    pub(in crate::group) disk: u16,
    pub(in crate::group) op: Op,
}

/// What became of one [`DiskIo`]: its result, and its buffer back.
pub(in crate::group) type IoOutcome = (Result<u64, IoError>, Option<AlignedBuf>);

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
pub(super) fn outcome(c: cairn_io::Completion, read: Option<(u64, u64)>) -> IoOutcome {
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
pub(super) fn run_one(port: &mut dyn DataPort, io: DiskIo) -> Result<IoOutcome, GroupError> {
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
pub(in crate::group) fn run(
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

/// Where byte `within` of an extent's copy `c` is on its disk.
pub(in crate::group) fn at(snap: &FileSnapshot, c: AuAddr, within: u64) -> u64 {
    u64::from(c.au) * snap.au_bytes + within
}

/// The copies of an extent that may be read for its AUs `aus`: online in
/// the view and not stale there, primary first.
pub(in crate::group) fn readable_copies_of<'a>(
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
pub(in crate::group) fn common_read<'a>(
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
pub(super) fn readable_copies(
    view: &DiskView,
    extent: &Extent,
    aus: std::ops::Range<u64>,
) -> Vec<AuAddr> {
    readable_copies_of(view, extent, aus).collect()
}

/// The copies of an extent a write goes to: on disks written in the view
/// (ONLINE or SYNCING), primary first.
pub(super) fn writable_copies_of<'a>(
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
pub(super) fn writable_copies(view: &DiskView, extent: &Extent) -> Vec<AuAddr> {
    writable_copies_of(view, extent).collect()
}

pub(super) fn file_snapshot(
    port: &mut dyn DataPort,
    number: u32,
) -> Result<Arc<FileSnapshot>, GroupError> {
    if let Some(why) = port.plane().stopped() {
        return Err(GroupError::Poisoned(why));
    }
    port.snapshot(number)
        .ok_or_else(|| GroupError::NotFound(format!("file {number} does not exist")))
}

/// The range must be sector-aligned and inside the file.
pub(super) fn check_range(snap: &FileSnapshot, offset: u64, len: u64) -> Result<(), GroupError> {
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

pub(super) fn pieces_of(
    snap: &FileSnapshot,
    offset: u64,
    len: u64,
) -> Result<Vec<Piece>, GroupError> {
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
pub(super) fn unwritable_error(
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
pub(super) fn lost_write_error(
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

/// A write (or zeroing: `what`) of file `number` that found the file, or
/// the disks, changed under it [`WRITE_ATTEMPTS_MAX`] times in a row, and
/// gave up having written nothing.
pub(super) fn changing_error(what: &str, number: u32) -> GroupError {
    GroupError::WriteFailed(format!(
        "file {number}: the {what} found the file changed under it {WRITE_ATTEMPTS_MAX} times in a row (cut and grown, replaced, or a disk went offline meanwhile); nothing was written — try again once the file stops changing"
    ))
}

/// Make a whole extent copy read as zeros: by discard where the device
/// promises discarded blocks read back as zeros (a thin LUN stays thin),
/// else by write-zeroes.
pub(in crate::group) fn zero_op(
    port: &mut dyn DataPort,
    disk: u16,
    offset_bytes: u64,
    len_bytes: u64,
) -> Op {
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
