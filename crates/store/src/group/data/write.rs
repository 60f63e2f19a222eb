//! The write path: every writable copy under its extents' write holds
//! (shared, but one at a time over the same bytes: [`Hold::Write`]), the
//! first write into an extent under its exclusive latch, and what a write that
//! missed a copy must settle before it is acknowledged.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use cairn_format::group::{au_mask, AuAddr, Extent, REGION_BYTES};
use cairn_io::{IoError, Op};

use super::common::{
    at, buffer_with, changing_error, check_range, file_snapshot, lent_and_busy, lost_write_error,
    missed_copies, note_failed, piece_aus, pieces_of, run, run_one, unwritable_error,
    wait_for_lent, whole_extent_mask, writable_copies, writable_copies_of, zero_op, DataPort,
    DiskIo, FailedDisks, IoOutcome, StaleMark, WRITE_ATTEMPTS_MAX, WRITE_BATCH_BYTES_MAX,
};
use super::map_blocks::SumsWrite;
use crate::group::error::GroupError;
use crate::group::plane::{DiskView, FileSnapshot, Hold, OperationGuard};
use crate::group::sums_log::ENTER_REGIONS_MAX;

/// After a write's I/O (the disks written reported to the port), before it
/// is acknowledged: a copy that missed the write is never read again, so its
/// disk goes offline first (or the write fails). `lost`: why a piece of
/// the write reached no copy, which fails it.
///
/// The copies that failed are marked stale first (`missed`), then their
/// disks taken offline: a crash between the two leaves the marks, and the
/// next mount resyncs those AUs whatever became of the disk.
pub(super) fn settle_write(
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
/// extent's write hold ([`Hold::Write`]). `Ok(false)`, having written nothing, when the
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
    let Some(loc) = in_place_location(snap, offset, len) else {
        return Ok(false);
    };
    let latch = port.plane().latch(vec![(
        (number, snap.incarnation, loc.extent),
        Hold::write(offset, len),
    )]);
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
    // The file's checksums take the new bytes' before a byte is sent.
    let mut sums = SumsWrite::new(port, snap)?;
    if let Some(s) = sums.as_mut() {
        s.begin(port, (offset, len), Some(data))?;
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
    let mut done = InPlaceDone::default();
    let mark = (loc.extent, au_mask(aus));
    // One copy (external redundancy) goes without collecting anything.
    match online().count() {
        0 => return Ok(false),
        1 => {
            let c = online().next().expect("invariant: one copy online");
            let io = io(port, c);
            let outcome = run_one(port, io)?;
            done.settle(port, c, outcome, mark);
        }
        _ => {
            let copies: Vec<AuAddr> = online().collect();
            let ios = copies.iter().map(|c| io(port, *c)).collect();
            for (c, outcome) in copies.iter().zip(run(port, ios)?) {
                done.settle(port, *c, outcome, mark);
            }
        }
    }
    let InPlaceDone {
        landed,
        failed,
        mut missed,
        errors,
    } = done;
    if let Some(s) = sums.as_mut() {
        s.end((offset, len), landed);
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

/// Where a write of `len` bytes at `offset` lands, if it is the common
/// write [`write_in_place`] does: inside one run of an extent already
/// written, in a file that may be written.
#[inline]
fn in_place_location(
    snap: &FileSnapshot,
    offset: u64,
    len: u64,
) -> Option<cairn_format::extent_map::Location> {
    if len == 0 || snap.read_only.is_some() || check_range(snap, offset, len).is_err() {
        return None;
    }
    let loc = snap.layout.locate(offset);
    if loc.run_bytes < len || !snap.extent(loc.extent).is_some_and(|e| e.initialized) {
        return None;
    }
    Some(loc)
}

/// What [`write_in_place`]'s I/O did: whether any copy took it, the disks
/// and copies that missed it, and why each failed.
#[derive(Default)]
struct InPlaceDone {
    landed: bool,
    failed: FailedDisks,
    missed: Vec<StaleMark>,
    errors: Vec<(u16, IoError)>,
}

impl InPlaceDone {
    /// One copy's write done: its buffer back to the port, and the copy
    /// written, or missed (`mark`: the extent and the AUs written).
    #[inline]
    fn settle(
        &mut self,
        port: &mut dyn DataPort,
        c: AuAddr,
        (result, buf): IoOutcome,
        (extent, mask): (u64, u16),
    ) {
        if let Some(buf) = buf {
            port.recycle(buf);
        }
        match result {
            Ok(_) => {
                self.landed = true;
                port.wrote(c.disk);
            }
            Err(e) => {
                note_failed(&mut self.failed, c.disk, &e);
                self.errors.push((c.disk, e));
                self.missed.push(StaleMark {
                    extent,
                    copy: c,
                    mask,
                });
            }
        }
    }
}

/// Write `data` at `offset` of file `number` to every online copy. A file
/// with checksums is written in pieces of at most
/// [`ENTER_REGIONS_MAX`] log regions, cut at region boundaries: each piece
/// holds its regions of the checksum log while it is written
/// (`sums_log.rs`).
pub(crate) fn write(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    number: u32,
    offset: u64,
    data: &[u8],
) -> Result<(), GroupError> {
    let snap = file_snapshot(port, number)?;
    if !snap.has_map {
        return write_piece(port, slot, number, offset, data, snap);
    }
    let piece = ENTER_REGIONS_MAX * REGION_BYTES;
    let mut at = 0usize;
    while at < data.len() {
        let start = offset + at as u64;
        let end = ((start / piece + 1) * piece).min(offset + data.len() as u64);
        let len = (end - start) as usize;
        let snap = file_snapshot(port, number)?;
        write_piece(port, slot, number, start, &data[at..at + len], snap)?;
        at += len;
    }
    Ok(())
}

/// [`write`] of one piece, from the file's snapshot `snap`.
fn write_piece(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    number: u32,
    offset: u64,
    data: &[u8],
    snap: Arc<FileSnapshot>,
) -> Result<(), GroupError> {
    let len = data.len() as u64;
    if write_in_place(port, slot, &snap, number, offset, data)? {
        return Ok(());
    }
    let Latched {
        snap,
        pieces,
        fresh,
        latch,
        guard,
        view,
    } = latch_for_write(port, slot, (number, offset, len), snap)?;
    let mut done = WriteDone::default();
    let mut sums = SumsWrite::new(port, &snap)?;
    if let Some(s) = sums.as_mut() {
        s.begin(port, (offset, len), Some(data))?;
    }
    zero_uncovered(port, &snap, &view, &pieces, &fresh, &mut done)?;
    let landed = write_pieces(port, &snap, &view, &pieces, data, &mut done)?;
    if let Some(s) = sums.as_mut() {
        for (p, n) in pieces.iter().zip(&landed) {
            s.end((offset + p.at as u64, p.len), *n > 0);
        }
    }
    let WriteDone {
        failed,
        mut missed,
        missed_pieces,
        written,
    } = done;
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

/// A write latched ([`latch_for_write`]): the snapshot its I/O uses, its
/// pieces, the extents it writes first (latched exclusively), its latches
/// and guard, and the disk view.
struct Latched<'s> {
    snap: Arc<FileSnapshot>,
    pieces: Vec<crate::group::plane::Piece>,
    fresh: BTreeSet<u64>,
    latch: crate::group::plane::LatchGuard,
    guard: Option<OperationGuard<'s>>,
    view: Arc<DiskView>,
}

/// Latch, then look again: the extents a first write latches
/// exclusively must still be the ones never written. The guard starts
/// after the latch (a wait for it must not hold freed AUs back) and before
/// the snapshot the I/O uses. A pass that finds the file changed in a
/// way the latches do not cover, or that must mark copies stale first,
/// starts again from the file as it is: at most WRITE_ATTEMPTS_MAX
/// passes, none of which writes a byte.
#[inline]
fn latch_for_write<'s>(
    port: &mut dyn DataPort,
    slot: Option<&'s AtomicU64>,
    (number, offset, len): (u32, u64, u64),
    mut snap: Arc<FileSnapshot>,
) -> Result<Latched<'s>, GroupError> {
    let mut attempts = 0;
    loop {
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
                let hold = if fresh.contains(&p.extent) {
                    Hold::Exclusive
                } else {
                    Hold::write(offset, len)
                };
                ((number, snap.incarnation, p.extent), hold)
            })
            .collect();
        let latch = port.plane().latch(keys);
        let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
        let now = file_snapshot(port, number)?;
        // The same published snapshot (not just the same version number: a
        // file number reused by a new file starts its versions again).
        let Some((pieces, fresh)) =
            still_latched(&now, &snap, (pieces, fresh), &latch, (number, offset, len))?
        else {
            // The file changed under us in a way the latches do not
            // cover (a shrink and a grow, a delete and a create): start
            // again from it.
            drop(guard);
            drop(latch);
            snap = now;
            continue;
        };
        // A first write into space lent while something may still touch
        // it waits until that is over, holding nothing, and looks again.
        if let Some(lent) = lent_and_busy(port.plane(), &now, fresh.iter().copied()) {
            drop(guard);
            drop(latch);
            wait_for_lent(port, number, &lent)?;
            snap = now;
            continue;
        }
        let view = port.disk_view();
        // Copies on offline disks miss this write: marked stale before any
        // byte of it lands (a first write changes the whole extent).
        let unmarked = unmarked_copies(&now, &view, &pieces, &fresh);
        if unmarked.is_empty() {
            return Ok(Latched {
                snap: now,
                pieces,
                fresh,
                latch,
                guard,
                view,
            });
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
    }
}

/// A write's pieces, and the extents among them it writes first.
type WritePieces = (Vec<crate::group::plane::Piece>, BTreeSet<u64>);

/// The pieces and the extents written first of `now`, the file as it is
/// once latched, when the latches taken from `snap` cover it; `None` when
/// the file changed in a way they do not cover.
#[inline]
fn still_latched(
    now: &Arc<FileSnapshot>,
    snap: &Arc<FileSnapshot>,
    (pieces, fresh): WritePieces,
    latch: &crate::group::plane::LatchGuard,
    (number, offset, len): (u32, u64, u64),
) -> Result<Option<WritePieces>, GroupError> {
    if Arc::ptr_eq(now, snap) {
        return Ok(Some((pieces, fresh)));
    }
    let now_fresh: BTreeSet<u64> = pieces_of(now, offset, len)
        .unwrap_or_default()
        .iter()
        .filter(|p| !now.extent(p.extent).is_some_and(|e| e.initialized))
        .map(|p| p.extent)
        .collect();
    if !(now.incarnation == snap.incarnation
        && now.read_only.is_none()
        && check_range(now, offset, len).is_ok()
        && now_fresh
            .iter()
            .all(|e| latch.holds_exclusive(&(number, snap.incarnation, *e))))
    {
        return Ok(None);
    }
    let pieces = pieces_of(now, offset, len)?;
    Ok(Some((pieces, now_fresh)))
}

/// Copies on offline disks that the write would miss and that are not
/// marked stale yet: the whole extent of one written first, the AUs the
/// piece touches of the others.
#[inline]
fn unmarked_copies(
    now: &FileSnapshot,
    view: &DiskView,
    pieces: &[crate::group::plane::Piece],
    fresh: &BTreeSet<u64>,
) -> Vec<StaleMark> {
    let mut unmarked = Vec::new();
    for p in pieces {
        let ext = now
            .extent(p.extent)
            .expect("invariant: pieces are in the map");
        let mask = if fresh.contains(&p.extent) {
            whole_extent_mask(p.extent)
        } else {
            au_mask(piece_aus(now, p.within, p.len))
        };
        missed_copies(view, p.extent, ext, mask, &mut unmarked);
    }
    unmarked
}

/// What a write's I/O did, until it is settled.
#[derive(Default)]
struct WriteDone {
    failed: FailedDisks,
    /// Copies that missed a first write's zeros.
    missed: Vec<StaleMark>,
    /// Failed data writes, by piece: marked only where the piece landed on
    /// some copy (else the write fails and every copy keeps what it had).
    missed_pieces: Vec<(usize, StaleMark, IoError)>,
    written: BTreeSet<u16>,
}

/// First writes: zero what this write does not cover of each fresh extent.
#[inline]
fn zero_uncovered(
    port: &mut dyn DataPort,
    snap: &FileSnapshot,
    view: &DiskView,
    pieces: &[crate::group::plane::Piece],
    fresh: &BTreeSet<u64>,
    done: &mut WriteDone,
) -> Result<(), GroupError> {
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
        for c in writable_copies(view, ext) {
            zeroing.push((*extent, c, whole));
        }
    }
    if !zeroing.is_empty() {
        run_zeroing(port, snap.au_bytes, &zeroing, done)?;
    }
    Ok(())
}

/// Zero each (extent, copy, bytes) of `zeroing` (extents written first,
/// from the start of their AU runs): the disks written noted in `done`, and
/// each copy that failed, with its disk, to be marked stale (the whole
/// extent).
#[inline]
fn run_zeroing(
    port: &mut dyn DataPort,
    au_bytes: u64,
    zeroing: &[(u64, AuAddr, u64)],
    done: &mut WriteDone,
) -> Result<(), GroupError> {
    let ios = zeroing
        .iter()
        .map(|(_, c, len_bytes)| DiskIo {
            disk: c.disk,
            op: zero_op(port, c.disk, u64::from(c.au) * au_bytes, *len_bytes),
        })
        .collect();
    for ((extent, c, _), (result, _)) in zeroing.iter().zip(run(port, ios)?) {
        match result {
            Ok(_) => {
                done.written.insert(c.disk);
            }
            Err(e) => {
                note_failed(&mut done.failed, c.disk, &e);
                done.missed.push(StaleMark {
                    extent: *extent,
                    copy: *c,
                    mask: whole_extent_mask(*extent),
                });
            }
        };
    }
    Ok(())
}

/// The data, in bounded batches, to every online copy; per piece, the
/// copies it landed on.
#[inline]
fn write_pieces(
    port: &mut dyn DataPort,
    snap: &FileSnapshot,
    view: &DiskView,
    pieces: &[crate::group::plane::Piece],
    data: &[u8],
    done: &mut WriteDone,
) -> Result<Vec<usize>, GroupError> {
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
            for c in writable_copies(view, ext) {
                of.push((i, c));
                ios.push(DiskIo {
                    disk: c.disk,
                    op: Op::Write {
                        offset_bytes: at(snap, c, p.within),
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
                    done.written.insert(c.disk);
                }
                Err(e) => {
                    note_failed(&mut done.failed, c.disk, &e);
                    let p = &pieces[i];
                    done.missed_pieces.push((
                        i,
                        StaleMark {
                            extent: p.extent,
                            copy: c,
                            mask: au_mask(piece_aus(snap, p.within, p.len)),
                        },
                        e,
                    ));
                }
            }
        }
        start = end;
    }
    Ok(landed)
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
                .map(|e| ((number, snap.incarnation, *e), Hold::Exclusive))
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
        // Space lent while something may still touch it: as a first write.
        if let Some(lent) = lent_and_busy(port.plane(), &now, still.iter().map(|(e, _)| *e)) {
            drop(guard);
            drop(latch);
            wait_for_lent(port, number, &lent)?;
            continue;
        }
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
        let mut zeroed = WriteDone::default();
        run_zeroing(port, now.au_bytes, &zeroing, &mut zeroed)?;
        let WriteDone {
            written,
            failed,
            missed,
            ..
        } = zeroed;
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
