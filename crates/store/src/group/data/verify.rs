//! A read checked against the file's checksums, unit by unit
//! (`docs/checksums.md`, "Every read path").
//!
//! The read itself runs as before (the primary copy of each piece, the next
//! one on an error); then every unit of what it brought is compared with the
//! unit's checksums. A unit that matches none is read again from every
//! readable copy of its piece and judged by [`crate::checksums::judge`]:
//! - a copy that matches is what the caller gets, and each copy that
//!   matches none is rewritten from it (self-healing), under the extent's
//!   latch, after the good copy is read and checked once more there (a write
//!   that landed since is what the bad copy then gets). Each is counted
//!   against its disk ([`DataPlane::checksum_counts`]) and logged in one line
//!   naming the file, the offset and both disks;
//! - no copy matches: the read fails, naming the file and the byte range,
//!   and returns no byte of it as good.
//!
//! A copy that matches an *older* candidate — the checksum before a write
//! of the unit still in flight — is right to read and is left to that
//! write.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use cairn_format::group::{unit_checksum, AuAddr, Extent};
use cairn_io::{AlignedBuf, Op};

use super::common::{
    at, buffer_with, note_failed, piece_aus, pieces_of, readable_copies, run, DataPort, DiskIo,
    FailedDisks,
};
use crate::checksums::{judge, Judgement};
use crate::group::error::GroupError;
use crate::group::plane::{DiskView, FileSnapshot, Hold, OperationGuard};

/// What a read checks each unit of a file against: the file's checksums
/// (its map, and the writes of it in flight).
pub(crate) trait UnitSums {
    /// The unit: the group's sector.
    fn unit_bytes(&self) -> u32;
    /// Unit `unit`'s candidates, newest first, into `out` (cleared first).
    /// Left empty: the unit has no checksum yet, and is served as read.
    ///
    /// The table as it is at the call, not as it was when the read began:
    /// the heal asks again under the extent's latch, where no write of the
    /// unit is in flight, and writes only bytes that match the answer then
    /// (a frozen `[new, old]` would let old bytes over a completed write).
    fn candidates(&self, unit: u64, out: &mut Vec<u32>);
}

/// A unit that failed its checksum on the copy read first.
struct Failing {
    /// Unit index in the file.
    unit: u64,
    /// Where its bytes are in the caller's buffer.
    at_buf: usize,
    /// Its extent, and its offset inside the extent's AU run (the same on
    /// every copy).
    extent: u64,
    within: u64,
    /// Its candidates, newest first.
    candidates: Vec<u32>,
}

/// One copy of a failing unit, read again.
struct CopyRead {
    copy: AuAddr,
    /// Its bytes' checksum; `None`: the read failed.
    sum: Option<u32>,
    data: Option<AlignedBuf>,
}

/// A unit judged: where its good bytes are, and the copies to rewrite.
struct Judged {
    unit: u64,
    /// Its extent, and its offset inside the extent's AU run (the same on
    /// every copy).
    extent: u64,
    within: u64,
    good: AuAddr,
    bad: Vec<AuAddr>,
}

/// What [`check`] found: the units mended from another copy (and the
/// copies to heal), the units no copy vouches for, and the disks whose
/// reads failed as a disk fails.
#[derive(Default)]
pub(super) struct Checked {
    judged: Vec<Judged>,
    unvouched: Vec<u64>,
    /// Failing units in extents never written: no copy to judge, and the
    /// checksums disagree with the map (zeros).
    unwritten: Vec<u64>,
    failed_disks: FailedDisks,
}

/// Check `buf` (the bytes a read of file `snap` at `offset` brought) unit by
/// unit against `sums`, and put a good copy's bytes in place of each unit
/// that fails. I/O to the copies only, no latch: the caller holds its
/// operation's guard across it, and hands what it found to [`answer`] once
/// the guard is dropped.
pub(super) fn check(
    port: &mut dyn DataPort,
    snap: &FileSnapshot,
    view: &DiskView,
    offset: u64,
    buf: &mut [u8],
    sums: &dyn UnitSums,
) -> Result<Checked, GroupError> {
    let unit_bytes = u64::from(sums.unit_bytes());
    if unit_bytes != u64::from(snap.sector_bytes) {
        return Err(GroupError::Corrupt(format!(
            "file {}: checksums of {unit_bytes}-byte units on a group of {}-byte sectors",
            snap.number, snap.sector_bytes
        )));
    }
    let failing = failing_units(sums, offset, buf);
    if failing.is_empty() {
        return Ok(Checked::default());
    }
    let pieces = pieces_of(snap, offset, buf.len() as u64)?;
    let mut to_judge = Vec::with_capacity(failing.len());
    let mut unwritten = Vec::new();
    for (unit, candidates) in failing {
        let at_buf = (unit * unit_bytes - offset) as usize;
        let p = pieces
            .iter()
            .find(|p| (p.at..p.at + p.len as usize).contains(&at_buf))
            .expect("invariant: every unit of the read is in one of its pieces");
        let extent = snap
            .extent(p.extent)
            .expect("invariant: pieces are in the map");
        // An extent never written reads as zeros without I/O: a checksum
        // that is not the zero unit's has no copy to be found on.
        if !extent.initialized {
            unwritten.push(unit);
            continue;
        }
        to_judge.push(Failing {
            unit,
            at_buf,
            extent: p.extent,
            within: p.within + (at_buf - p.at) as u64,
            candidates,
        });
    }
    let mut checked = judge_units(port, snap, view, buf, &to_judge)?;
    checked.unwritten = unwritten;
    Ok(checked)
}

/// After [`check`]: take the disks whose reads failed offline, heal the bad
/// copies (under the extents' latches), and fail the read if some unit has
/// no copy that vouches for it. Nothing to do for a read without checksums
/// (`checked` and `sums` are both given or both not).
pub(super) fn answer(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    snap: &FileSnapshot,
    view: &DiskView,
    checked: Option<Checked>,
    sums: Option<&dyn UnitSums>,
) -> Result<(), GroupError> {
    let (Some(checked), Some(sums)) = (checked, sums) else {
        return Ok(());
    };
    if !checked.failed_disks.is_empty() && port.may_write() {
        port.disks_failed(&checked.failed_disks, view.epoch)?;
    }
    if port.may_write() && !checked.judged.is_empty() {
        heal(port, slot, snap, view, &checked.judged, sums)?;
    }
    let unit_bytes = u64::from(snap.sector_bytes);
    if !checked.unwritten.is_empty() {
        return Err(GroupError::Corrupt(format!(
            "file {}: {}: its checksums say it holds data, but its extent was never written (it reads as zeros); the checksum map does not belong to these bytes: run `cairn group check`",
            snap.number,
            ranges_named(unit_bytes, &checked.unwritten)
        )));
    }
    if checked.unvouched.is_empty() {
        return Ok(());
    }
    Err(unvouched_error(snap, unit_bytes, &checked.unvouched))
}

/// The byte ranges of `bytes` (file offset `offset`) whose units `sums`
/// vouches for (or has no checksum for), consecutive units merged: what a
/// repair may copy from a copy read as good for its other reasons (its read
/// did not fail), without carrying a rotten unit over a good one.
pub(super) fn vouched_runs(
    sums: &dyn UnitSums,
    offset: u64,
    bytes: &[u8],
) -> Vec<std::ops::Range<usize>> {
    let unit_bytes = sums.unit_bytes() as usize;
    let first = offset / unit_bytes as u64;
    let mut candidates = Vec::with_capacity(2);
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, unit) in bytes.chunks(unit_bytes).enumerate() {
        if matches(sums, first + i as u64, unit, &mut candidates) == Some(false) {
            continue;
        }
        let at = i * unit_bytes;
        match runs.last_mut() {
            Some(r) if r.end == at => r.end = at + unit.len(),
            _ => runs.push(at..at + unit.len()),
        }
    }
    runs
}

/// Whether `bytes`, unit `unit` of the file, match one of its candidates
/// (left in `candidates`); `None` when it has none yet (served as read).
/// The one test of a unit's bytes every path here makes.
fn matches(
    sums: &dyn UnitSums,
    unit: u64,
    bytes: &[u8],
    candidates: &mut Vec<u32>,
) -> Option<bool> {
    sums.candidates(unit, candidates);
    (!candidates.is_empty()).then(|| candidates.contains(&unit_checksum(bytes)))
}

/// The units of `buf` (at file offset `offset`) whose bytes match none of
/// their candidates, each with its candidates.
fn failing_units(sums: &dyn UnitSums, offset: u64, buf: &[u8]) -> Vec<(u64, Vec<u32>)> {
    let unit_bytes = sums.unit_bytes() as usize;
    let first = offset / unit_bytes as u64;
    let mut candidates = Vec::with_capacity(2);
    let mut failing = Vec::new();
    for (i, bytes) in buf.chunks(unit_bytes).enumerate() {
        let unit = first + i as u64;
        if matches(sums, unit, bytes, &mut candidates) == Some(false) {
            failing.push((unit, candidates.clone()));
        }
    }
    failing
}

/// Read each failing unit (of a written extent) from every readable copy,
/// judge them, and put a good copy's bytes in `buf`.
fn judge_units(
    port: &mut dyn DataPort,
    snap: &FileSnapshot,
    view: &DiskView,
    buf: &mut [u8],
    failing: &[Failing],
) -> Result<Checked, GroupError> {
    let unit_bytes = u64::from(snap.sector_bytes);
    let mut reads: Vec<(usize, AuAddr)> = Vec::new();
    let mut ios = Vec::new();
    for (f, unit) in failing.iter().enumerate() {
        let extent = snap
            .extent(unit.extent)
            .expect("invariant: pieces are in the map");
        let aus = piece_aus(snap, unit.within, unit_bytes);
        for c in readable_copies(view, extent, aus) {
            reads.push((f, c));
            ios.push(DiskIo {
                disk: c.disk,
                op: Op::Read {
                    offset_bytes: at(snap, c, unit.within),
                    buf: port.buffer(unit_bytes as usize),
                },
            });
        }
    }
    let results = run(port, ios)?;
    // Per failing unit: each copy read.
    let mut seen: BTreeMap<usize, Vec<CopyRead>> = BTreeMap::new();
    let mut failed_disks = FailedDisks::new();
    for ((f, c), (result, data)) in reads.into_iter().zip(results) {
        let entry = seen.entry(f).or_default();
        match (result, data) {
            (Ok(_), Some(data)) => entry.push(CopyRead {
                copy: c,
                sum: Some(unit_checksum(&data)),
                data: Some(data),
            }),
            (result, data) => {
                if let Some(data) = data {
                    port.recycle(data);
                }
                if let Err(e) = result.as_ref() {
                    if crate::group::disk_io::read_fails_the_disk(e) {
                        note_failed(&mut failed_disks, c.disk, e);
                    }
                }
                entry.push(CopyRead {
                    copy: c,
                    sum: None,
                    data: None,
                });
            }
        }
    }
    let mut judged = Vec::new();
    let mut unvouched = Vec::new();
    let plane = port.plane().clone();
    let counts = plane.checksum_counts();
    for (f, unit) in failing.iter().enumerate() {
        let copies = seen.remove(&f).unwrap_or_default();
        let sums: Vec<Option<u32>> = copies.iter().map(|r| r.sum).collect();
        // A live read's newest candidate is the table's: no write of it is
        // "acknowledged and lost" here (that is recovery's question).
        match judge(&unit.candidates, false, &sums) {
            Judgement::Holds { good, bad, .. } => {
                for i in &bad {
                    counts.mismatched(copies[*i].copy.disk);
                }
                let CopyRead {
                    copy: good_copy,
                    data,
                    ..
                } = &copies[good[0]];
                if let Some(data) = data {
                    buf[unit.at_buf..unit.at_buf + unit_bytes as usize].copy_from_slice(data);
                }
                judged.push(Judged {
                    unit: unit.unit,
                    extent: unit.extent,
                    within: unit.within,
                    good: *good_copy,
                    bad: bad.iter().map(|i| copies[*i].copy).collect(),
                });
            }
            Judgement::Damaged { .. } | Judgement::Unread | Judgement::Lost { .. } => {
                for r in copies.iter().filter(|r| r.sum.is_some()) {
                    counts.mismatched(r.copy.disk);
                }
                unvouched.push(unit.unit);
            }
        }
        for data in copies.into_iter().filter_map(|r| r.data) {
            port.recycle(data);
        }
    }
    Ok(Checked {
        judged,
        unvouched,
        unwritten: Vec::new(),
        failed_disks,
    })
}

/// Rewrite each judged unit's bad copies from its good one, under its
/// extent's latch: the good copy is read again there and checked against
/// the unit's checksums as they are now (no write of the extent is in
/// flight under the latch), so what a bad copy gets is vouched for.
fn heal(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    snap: &FileSnapshot,
    view: &DiskView,
    judged: &[Judged],
    sums: &dyn UnitSums,
) -> Result<(), GroupError> {
    let unit_bytes = u64::from(snap.sector_bytes);
    let mut keys: Vec<_> = judged
        .iter()
        .map(|j| (snap.number, snap.incarnation, j.extent))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let latch = port
        .plane()
        .latch(keys.into_iter().map(|k| (k, Hold::Exclusive)).collect());
    let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
    // The extents must still be where they were read (not freed, not
    // moved), and the good copies still online.
    let view_now = port.disk_view();
    let current = port.snapshot(snap.number);
    let unchanged = |e: u64| {
        current.as_ref().is_some_and(|c| {
            c.incarnation == snap.incarnation
                && c.extent(e).map(Extent::copies) == snap.extent(e).map(Extent::copies)
        })
    };
    let live: Vec<&Judged> = judged
        .iter()
        .filter(|j| view_now.is_online(j.good.disk) && unchanged(j.extent))
        .collect();
    let ios = live
        .iter()
        .map(|j| DiskIo {
            disk: j.good.disk,
            op: Op::Read {
                offset_bytes: at(snap, j.good, j.within),
                buf: port.buffer(unit_bytes as usize),
            },
        })
        .collect();
    let results = run(port, ios)?;
    let mut candidates = Vec::with_capacity(2);
    let mut writes = Vec::new();
    let mut targets = Vec::new();
    let mut failed_disks = FailedDisks::new();
    for (j, (result, data)) in live.iter().zip(results) {
        if let Err(e) = result.as_ref() {
            if crate::group::disk_io::read_fails_the_disk(e) {
                note_failed(&mut failed_disks, j.good.disk, e);
            }
        }
        let Some(data) = data else { continue };
        let vouched = result.is_ok() && matches(sums, j.unit, &data, &mut candidates) == Some(true);
        if !vouched {
            // Changed (or failed) since it was judged: left for the next
            // read or scrub to judge again.
            tracing::info!(
                file = snap.number,
                "file {} offset {}: not healed: the good copy on disk {} no longer matches (written since, or unreadable)",
                snap.number,
                j.unit * unit_bytes,
                view.name(j.good.disk),
            );
        } else {
            for bad in j.bad.iter().filter(|b| view_now.is_online(b.disk)) {
                targets.push((*j, *bad));
                writes.push(DiskIo {
                    disk: bad.disk,
                    op: Op::Write {
                        offset_bytes: at(snap, *bad, j.within),
                        buf: buffer_with(port, &data),
                        fua: false,
                    },
                });
            }
        }
        port.recycle(data);
    }
    let results = run(port, writes)?;
    drop(guard);
    drop(latch);
    for ((j, bad), (result, buf)) in targets.into_iter().zip(results) {
        if let Some(buf) = buf {
            port.recycle(buf);
        }
        let byte = j.unit * unit_bytes;
        match result {
            Ok(_) => {
                port.wrote(bad.disk);
                port.plane().checksum_counts().healed(bad.disk);
                tracing::warn!(
                    file = snap.number,
                    offset = byte,
                    disk = %view.name(bad.disk),
                    "file {} offset {byte} ({unit_bytes} bytes): the copy on disk {} failed its checksum; rewritten from disk {}",
                    snap.number,
                    view.name(bad.disk),
                    view.name(j.good.disk),
                );
            }
            Err(e) => note_failed(&mut failed_disks, bad.disk, &e),
        }
    }
    if failed_disks.is_empty() {
        return Ok(());
    }
    port.disks_failed(&failed_disks, view.epoch)
}

/// The read's error for units no copy vouches for: the file and each byte
/// range (consecutive units merged).
fn unvouched_error(snap: &FileSnapshot, unit_bytes: u64, units: &[u64]) -> GroupError {
    GroupError::Unreadable(format!(
        "file {}: {}: no copy matches its checksum; the data there is damaged on every copy (`cairn group scrub` lists such ranges; restore them from a backup)",
        snap.number,
        ranges_named(unit_bytes, units)
    ))
}

/// Units (in order) as byte ranges, consecutive units merged: "bytes a..b,
/// bytes c..d".
pub(super) fn ranges_named(unit_bytes: u64, units: &[u64]) -> String {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for u in units {
        match ranges.last_mut() {
            Some((_, end)) if *end == *u => *end = u + 1,
            _ => ranges.push((*u, u + 1)),
        }
    }
    ranges
        .iter()
        .map(|(a, b)| format!("bytes {}..{}", a * unit_bytes, b * unit_bytes))
        .collect::<Vec<_>>()
        .join(", ")
}
