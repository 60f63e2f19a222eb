//! The read path: the primary copy first, piece by piece to the next copy
//! on an error or a rejection, and the repair of the copies that failed.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use cairn_format::group::{AuAddr, Extent};
use cairn_io::{AlignedBuf, IoError, Op};

use super::common::{
    at, buffer_with, check_range, common_read, file_snapshot, note_failed, piece_aus, pieces_of,
    readable_copies, run, run_one, DataPort, DiskIo, FailedDisks,
};
use super::map_blocks::read_map_block;
use super::verify::{self, UnitSums};
use crate::group::disk_io::read_fails_the_disk;
use crate::group::error::GroupError;
use crate::group::plane::{DiskView, FileSnapshot, Hold, LatchKey, OperationGuard, Piece};
use crate::group::sums::FileSums;
use cairn_format::group::map_place;

/// Read `buf.len()` bytes at `offset` of file `number`, accepting the bytes
/// only if `accept` passes on the whole buffer and each unit matches its
/// checksums (`verify.rs`: a unit that does not is read from the other
/// copies, and the bad copies healed): `sums`, or, given none, the file's
/// own when it has a map and the group's log was judged at mount (a
/// read-only mount's was not: it reads as before). `accept` judges the
/// bytes as read, before the checksums mend them.
pub(crate) fn read(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    number: u32,
    offset: u64,
    buf: &mut [u8],
    accept: &dyn Fn(&[u8]) -> bool,
    sums: Option<&dyn UnitSums>,
) -> Result<(), GroupError> {
    // The guard covers the I/O only, never a wait for a latch or for the
    // metadata plane: freed AUs wait for it.
    let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
    let snap = file_snapshot(port, number)?;
    check_range(&snap, offset, buf.len() as u64)?;
    // A file with checksums is checked against its own unless the caller
    // gives others: the map blocks the range needs, loaded first (their
    // AUs, as the data's, kept from reuse by the guard).
    let own = match sums {
        Some(_) => None,
        None => sums_for(port, &snap, offset, buf.len() as u64)?,
    };
    let sums = sums.or(own.as_deref().map(|s| s as &dyn UnitSums));
    let view = port.disk_view();
    let first = read_from_primary(port, &snap, &view, offset, buf, accept)?;
    if matches!(first, First::Accepted) {
        let checked = sums
            .map(|s| verify::check(port, &snap, &view, offset, buf, s))
            .transpose()?;
        drop(guard);
        return verify::answer(port, slot, &snap, &view, checked, sums);
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
    let checked = match (&result, sums) {
        (Ok(()), Some(s)) => Some(verify::check(port, &snap, &view, offset, buf, s)),
        _ => None,
    };
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
    let checked = checked.transpose()?;
    if !tries.bad.is_empty() && port.may_write() {
        let good: BTreeMap<usize, AuAddr> = tries
            .bad
            .iter()
            .map(|(i, _)| (*i, tries.copies[*i][tries.choice[*i]]))
            .collect();
        let at = (offset, sums);
        repair(port, slot, &snap, &view, &pieces, &tries.bad, &good, at)?;
    }
    verify::answer(port, slot, &snap, &view, checked, sums)
}

/// The checksums of the file of `snap` (its incarnation), with the map
/// blocks that bytes `offset .. offset + len` (in the file: checked) need
/// loaded; `None` for a file without a map, or on a read-only mount (its
/// log was not judged: units named only there would read as damage). A
/// map block no copy of which is valid fails the read: its units cannot
/// be vouched for.
fn sums_for(
    port: &mut dyn DataPort,
    snap: &FileSnapshot,
    offset: u64,
    len: u64,
) -> Result<Option<std::sync::Arc<FileSums>>, GroupError> {
    if !snap.has_map || len == 0 || !port.may_write() {
        return Ok(None);
    }
    let Some(sums) = port.plane().file_sums(snap.number, snap.incarnation) else {
        return Ok(None);
    };
    let unit = u64::from(snap.sector_bytes);
    let (first, _) = map_place(offset / unit);
    let (last, _) = map_place((offset + len - 1) / unit);
    let group = port.plane().group_uuid();
    for block in first..=last {
        let loaded = sums.load_with(block, LOAD_TRIES, || {
            read_map_block(port, group, snap.number, block)
        })?;
        if !loaded {
            return Err(GroupError::Unreadable(format!(
                "file {}: resized {LOAD_TRIES} times while its checksums for bytes {offset}..{} were read; read again",
                snap.number,
                offset + len
            )));
        }
    }
    Ok(Some(sums))
}

/// How many times a read loads a map block a resize keeps cutting.
const LOAD_TRIES: usize = 3;

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
/// With the file's checksums (`read_at`: the read's offset and its sums),
/// only the units of the good copy that match them are copied: a copy
/// chosen because its read did not fail may still hold a rotten unit, and
/// the bad copy may hold the one good copy of it (`verify.rs` heals that
/// unit the other way).
#[allow(clippy::too_many_arguments)]
fn repair(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    snap: &FileSnapshot,
    view: &DiskView,
    pieces: &[Piece],
    bad: &[(usize, AuAddr)],
    good: &BTreeMap<usize, AuAddr>,
    read_at: (u64, Option<&dyn UnitSums>),
) -> Result<(), GroupError> {
    let keys: Vec<LatchKey> = good
        .keys()
        .map(|i| (snap.number, snap.incarnation, pieces[*i].extent))
        .collect();
    let reads: Vec<(usize, AuAddr)> = good.iter().map(|(i, c)| (*i, *c)).collect();
    let latch = port
        .plane()
        .latch(keys.into_iter().map(|k| (k, Hold::Exclusive)).collect());
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
    let (offset, sums) = read_at;
    for (i, c) in bad {
        let Some(data) = fresh.get(i) else { continue };
        if good.get(i) == Some(c) || !view.is_online(c.disk) {
            continue;
        }
        let p = &pieces[*i];
        let runs: Vec<std::ops::Range<usize>> = match sums {
            Some(sums) => verify::vouched_runs(sums, offset + p.at as u64, data),
            None => std::iter::once(0..data.len()).collect(),
        };
        for run in runs {
            targets.push(c.disk);
            writes.push(DiskIo {
                disk: c.disk,
                op: Op::Write {
                    offset_bytes: at(snap, *c, p.within + run.start as u64),
                    buf: buffer_with(port, &data[run]),
                    fua: false,
                },
            });
        }
    }
    for buf in fresh.into_values() {
        port.recycle(buf);
    }
    let results = run(port, writes)?;
    drop(guard);
    drop(latch);
    let mut failed_disks = FailedDisks::new();
    for (disk, (result, buf)) in targets.into_iter().zip(results) {
        if let Some(buf) = buf {
            port.recycle(buf);
        }
        match result {
            Ok(_) => port.wrote(disk),
            Err(e) => note_failed(&mut failed_disks, disk, &e),
        }
    }
    if failed_disks.is_empty() {
        return Ok(());
    }
    port.disks_failed(&failed_disks, view.epoch)
}
