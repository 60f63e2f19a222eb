//! The checksum log's recovery, one file at a time (`docs/checksums.md`,
//! "Recovery"): every unit the log's records name, and every unit of the
//! regions its last record announces, read from every copy that may be
//! read and judged by [`crate::checksums::judge`] against its candidates.
//!
//! A unit's candidates, newest first: the checksums the records after its
//! map block name (newest first), the map's own, then those the records
//! before it name. Which records are after the block is told by the
//! checkpoint records: a map block sealed with a journal sequence at or
//! above a checkpoint record's `maps_from` was written after that record,
//! and holds what the records before it named, or newer (`maps.rs`
//! `checkpoint_maps`); a block sealed below every one of them is older
//! than every record of the log.
//!
//! What is found goes into the file's checksums in memory
//! ([`FileSums::recovered`]), which the mount's checkpoint then writes:
//! - a unit some copy holds a candidate of: the newest such candidate, and
//!   every other copy read is rewritten from one that holds it;
//! - a unit of an announced region whose copies that could be read agree
//!   on bytes that match no candidate, or (every copy read) on bytes an
//!   older candidate names where the newest is of an acknowledged write:
//!   bytes a write sent that the crash kept from being named (or that a
//!   commit's flush made durable before a sync named them; zeros over a
//!   write, say), adopted;
//! - a unit of an extent the metadata says was never written (or was
//!   punched): zero units, what it reads as;
//! - otherwise (damaged on every copy, or an acknowledged write no copy
//!   holds): the newest candidate, so a read fails naming the range rather
//!   than return bytes nothing vouches for.
//!
//! Runs at mount, before anything is served: no latch is taken.

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group::{map_place, unit_checksum, AuAddr, REGION_BYTES};
use cairn_io::Op;
use uuid::Uuid;

use super::common::{
    at, buffer_with, file_snapshot, note_failed, piece_aus, pieces_of, readable_copies, run,
    DataPort, DiskIo, FailedDisks,
};
use super::map_blocks::read_map_block;
use super::verify::UnitSums;
use crate::checksums::{judge, Judgement};
use crate::group::error::GroupError;
use crate::group::sums::FileSums;

/// Bytes of a file judged at once: each copy's bytes of them are held.
const CHUNK_BYTES: u64 = 1 << 20;

/// What the whole log says that is not about one file.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogFacts {
    /// The checkpoint records: (sequence, `maps_from`), oldest first.
    pub(crate) checkpoints: Vec<(u64, u64)>,
    /// The newest record a completed flush covered: runs of records at or
    /// below it are of acknowledged writes.
    pub(crate) flushed_through: u64,
}

/// What the log says of one file (of its current incarnation).
#[derive(Debug, Clone, Default)]
pub(crate) struct FileIntents {
    /// Per unit, the checksums records name for it: (sequence, checksum),
    /// oldest first.
    pub(crate) named: BTreeMap<u64, Vec<(u64, u32)>>,
    /// The regions (1 MiB of the file each) the log's last record names.
    pub(crate) regions: BTreeSet<u32>,
}

/// What a mount's recovery of the checksum log found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecoveredLog {
    /// Units read from every copy and judged.
    pub units_judged: u64,
    /// Copies rewritten from a copy that holds the unit's checksum.
    pub copies_rewritten: u64,
    /// Units of announced regions no record named, whose copies agreed:
    /// their bytes adopted.
    pub units_adopted: u64,
    /// Ranges no copy vouches for, each naming its file and bytes: reads
    /// of them fail.
    pub damaged: Vec<String>,
    /// Ranges of acknowledged writes no copy holds (the disks lost them
    /// after saying they were durable): reads of them fail.
    pub lost: Vec<String>,
    /// Units no copy of which could be read: left as the map says.
    pub units_unread: u64,
}

impl RecoveredLog {
    pub(crate) fn add(&mut self, other: RecoveredLog) {
        self.units_judged += other.units_judged;
        self.copies_rewritten += other.copies_rewritten;
        self.units_adopted += other.units_adopted;
        self.damaged.extend(other.damaged);
        self.lost.extend(other.lost);
        self.units_unread += other.units_unread;
    }
}

/// One copy of a piece, read.
struct PieceCopy {
    copy: AuAddr,
    /// Per unit of the piece, its checksum (`None`: the read failed).
    sums: Vec<Option<u32>>,
    bytes: Option<cairn_io::AlignedBuf>,
}

/// Judge the units of file `file` (with checksums `sums`) that `intents`
/// names, against every copy, as the module's comment says. Map blocks
/// are read from `group`'s disks as needed; a block no copy of which is
/// valid leaves its units as they are (their reads fail until `check
/// --repair`), said in `damaged`.
pub(crate) fn recover_file(
    port: &mut dyn DataPort,
    group: Uuid,
    file: u32,
    sums: &FileSums,
    intents: &FileIntents,
    facts: &LogFacts,
) -> Result<RecoveredLog, GroupError> {
    let mut out = RecoveredLog::default();
    let snap = file_snapshot(port, file)?;
    let unit_bytes = u64::from(sums.unit_bytes());
    let units_total = snap.size_bytes / unit_bytes;
    let per_region = REGION_BYTES / unit_bytes;
    let mut units: BTreeSet<u64> = intents
        .named
        .keys()
        .copied()
        .filter(|u| *u < units_total)
        .collect();
    let scanned = |u: u64| intents.regions.contains(&((u / per_region) as u32));
    for r in &intents.regions {
        let first = u64::from(*r) * per_region;
        units.extend(first..(first + per_region).min(units_total));
    }
    // The map blocks they need.
    let blocks: BTreeSet<u64> = units.iter().map(|u| map_place(*u).0).collect();
    for block in blocks {
        if sums.holds(block) {
            continue;
        }
        match read_map_block(port, group, file, block) {
            Ok(read) => sums.load(block, read),
            Err(e) => {
                out.damaged.push(format!(
                    "file {file}: the checksums of bytes {}..{} are unknown ({e})",
                    block * cairn_format::group::CHECKSUMS_PER_BLOCK as u64 * unit_bytes,
                    (block + 1) * cairn_format::group::CHECKSUMS_PER_BLOCK as u64 * unit_bytes,
                ));
                units.retain(|u| map_place(*u).0 != block);
            }
        }
    }
    let view = port.disk_view();
    let mut failed = FailedDisks::new();
    let (mut damaged, mut lost_units, mut put_back) = (Vec::new(), Vec::new(), Vec::new());
    for chunk in chunks(&units, CHUNK_BYTES / unit_bytes) {
        let offset = chunk.start * unit_bytes;
        let len = (chunk.end - chunk.start) * unit_bytes;
        for piece in pieces_of(&snap, offset, len)? {
            let extent = *snap
                .extent(piece.extent)
                .expect("invariant: pieces are in the map");
            let first = (offset + piece.at as u64) / unit_bytes;
            let count = piece.len / unit_bytes;
            let wanted: Vec<u64> = (first..first + count)
                .filter(|u| units.contains(u))
                .collect();
            if wanted.is_empty() {
                continue;
            }
            if !extent.initialized {
                // The metadata says it reads as zeros (never written, or
                // punched): a write into it was not acknowledged before
                // the commit that marked it written, and a punch's units
                // are zeros from its commit on, whatever the log names.
                for unit in wanted {
                    out.units_judged += 1;
                    sums.recovered(unit, sums.zero());
                }
                continue;
            }
            let copies = read_piece(port, &snap, &view, &extent, &piece, &mut failed)?;
            let mut writes = Vec::new();
            let mut candidates = Vec::new();
            for unit in wanted {
                let i = (unit - first) as usize;
                out.units_judged += 1;
                unit_candidates(sums, intents, facts, unit, &mut candidates);
                let Some(newest) = candidates.first().map(|(sum, _)| *sum) else {
                    continue;
                };
                let acknowledged = candidates[0].1;
                let sums_now: Vec<u32> = candidates.iter().map(|(s, _)| *s).collect();
                let read: Vec<Option<u32>> = copies.iter().map(|c| c.sums[i]).collect();
                let judgement = judge(&sums_now, acknowledged, &read);
                match &judgement {
                    Judgement::Holds {
                        checksum,
                        good,
                        older,
                        bad,
                        ..
                    } => {
                        sums.recovered(unit, *checksum);
                        let Some(source) = copies[good[0]].bytes.as_ref() else {
                            continue;
                        };
                        if !port.may_write() {
                            continue;
                        }
                        let within = (i as u64) * unit_bytes;
                        let bytes = &source[within as usize..(within + unit_bytes) as usize];
                        for c in older.iter().chain(bad) {
                            let copy = copies[*c].copy;
                            writes.push((
                                unit,
                                copy,
                                DiskIo {
                                    disk: copy.disk,
                                    op: Op::Write {
                                        offset_bytes: at(&snap, copy, piece.within + within),
                                        buf: buffer_with(port, bytes),
                                        fua: false,
                                    },
                                },
                            ));
                        }
                    }
                    Judgement::Damaged { .. } | Judgement::Lost { .. } => {
                        // In an announced region, copies that could be read
                        // and agree hold a write the power cut kept from
                        // being named: bytes that match nothing (with one
                        // such copy — a file with one copy, or a mirror
                        // whose other copies are offline or fail their
                        // reads — all there is, as a read would return
                        // it), or older bytes put back (zeros over a
                        // write, say), which only every copy read may
                        // say: a copy whose read failed may hold the
                        // acknowledged write.
                        let lost = matches!(judgement, Judgement::Lost { .. });
                        let first = read.iter().flatten().next().copied();
                        let agree = read.iter().flatten().all(|s| Some(*s) == first)
                            && (!lost || read.iter().all(Option::is_some));
                        match first {
                            Some(sum) if scanned(unit) && agree => {
                                if lost {
                                    put_back.push(unit);
                                }
                                sums.recovered(unit, sum);
                                out.units_adopted += 1;
                            }
                            _ if lost => {
                                sums.recovered(unit, newest);
                                lost_units.push(unit);
                            }
                            _ => {
                                sums.recovered(unit, newest);
                                damaged.push(unit);
                            }
                        }
                    }
                    Judgement::Unread => out.units_unread += 1,
                }
            }
            for c in copies {
                if let Some(b) = c.bytes {
                    port.recycle(b);
                }
            }
            let (targets, ios): (Vec<(u64, AuAddr)>, Vec<DiskIo>) =
                writes.into_iter().map(|(u, c, io)| ((u, c), io)).unzip();
            for ((unit, copy), (result, buf)) in targets.into_iter().zip(run(port, ios)?) {
                if let Some(buf) = buf {
                    port.recycle(buf);
                }
                match result {
                    Ok(_) => {
                        port.wrote(copy.disk);
                        out.copies_rewritten += 1;
                        tracing::info!(
                            file,
                            offset = unit * unit_bytes,
                            disk = %view.name(copy.disk),
                            "file {file} offset {} ({unit_bytes} bytes): the copy on disk {} did not hold what the checksum log says; rewritten at mount",
                            unit * unit_bytes,
                            view.name(copy.disk),
                        );
                    }
                    Err(e) => note_failed(&mut failed, copy.disk, &e),
                }
            }
        }
    }
    if !put_back.is_empty() {
        // Said, not reported: the one case where a disk that lost a write
        // after a flush would go unseen.
        tracing::warn!(
            file,
            "file {file}: {}: every copy holds older bytes than the acknowledged write the checksum log names, in a region being written at the crash: taken as a later write the crash kept from being named",
            super::verify::ranges_named(unit_bytes, &put_back)
        );
    }
    for (units, why, to) in [
        (
            &damaged,
            "no copy holds bytes its checksums vouch for (damaged on every copy)",
            &mut out.damaged,
        ),
        (
            &lost_units,
            "an acknowledged write no copy holds (the disks lost it after saying it was durable)",
            &mut out.lost,
        ),
    ] {
        if units.is_empty() {
            continue;
        }
        let line = format!(
            "file {file}: {}: {why}; reads of it fail",
            super::verify::ranges_named(unit_bytes, units)
        );
        tracing::warn!(file, "{line}");
        to.push(line);
    }
    if !failed.is_empty() && port.may_write() {
        port.disks_failed(&failed, view.epoch)?;
    }
    Ok(out)
}

/// Unit `unit`'s candidates, newest first, each with whether it is of an
/// acknowledged write (only a record's can be): the records after its map
/// block, the map's checksum, the records before it.
fn unit_candidates(
    sums: &FileSums,
    intents: &FileIntents,
    facts: &LogFacts,
    unit: u64,
    out: &mut Vec<(u32, bool)>,
) {
    out.clear();
    let mut map = Vec::new();
    sums.candidates(unit, &mut map);
    let Some(map_sum) = map.first().copied() else {
        return;
    };
    let generation = sums.generation(map_place(unit).0).unwrap_or(0);
    // The newest checkpoint record the block was written after.
    let after = facts
        .checkpoints
        .iter()
        .rev()
        .find(|(_, from)| *from <= generation)
        .map(|(seq, _)| *seq);
    let named = intents.named.get(&unit).map_or(&[][..], Vec::as_slice);
    let newer = |seq: u64| after.is_none_or(|a| seq > a);
    let mut push = |sum: u32, acknowledged: bool| {
        if !out.iter().any(|(s, _)| *s == sum) {
            out.push((sum, acknowledged));
        }
    };
    for (seq, sum) in named.iter().rev().filter(|(seq, _)| newer(*seq)) {
        push(*sum, *seq <= facts.flushed_through);
    }
    push(map_sum, false);
    for (_, sum) in named.iter().rev().filter(|(seq, _)| !newer(*seq)) {
        push(*sum, false);
    }
}

/// `units` (sorted) as ranges of consecutive units, each at most `max`
/// long.
fn chunks(units: &BTreeSet<u64>, max: u64) -> Vec<std::ops::Range<u64>> {
    let mut out: Vec<std::ops::Range<u64>> = Vec::new();
    for u in units {
        match out.last_mut() {
            Some(r) if r.end == *u && r.end - r.start < max.max(1) => r.end += 1,
            _ => out.push(*u..*u + 1),
        }
    }
    out
}

/// Every copy of `piece` that may be read, read whole, with each unit's
/// checksum. A read that fails as a disk fails is noted in `failed`.
fn read_piece(
    port: &mut dyn DataPort,
    snap: &crate::group::plane::FileSnapshot,
    view: &crate::group::plane::DiskView,
    extent: &cairn_format::group::Extent,
    piece: &crate::group::plane::Piece,
    failed: &mut FailedDisks,
) -> Result<Vec<PieceCopy>, GroupError> {
    let unit_bytes = u64::from(snap.sector_bytes);
    let copies = readable_copies(view, extent, piece_aus(snap, piece.within, piece.len));
    let ios = copies
        .iter()
        .map(|c| DiskIo {
            disk: c.disk,
            op: Op::Read {
                offset_bytes: at(snap, *c, piece.within),
                buf: port.buffer(piece.len as usize),
            },
        })
        .collect();
    let mut out = Vec::new();
    for (copy, (result, data)) in copies.into_iter().zip(run(port, ios)?) {
        match (result, data) {
            (Ok(_), Some(data)) => out.push(PieceCopy {
                copy,
                sums: data
                    .chunks(unit_bytes as usize)
                    .map(|u| Some(unit_checksum(u)))
                    .collect(),
                bytes: Some(data),
            }),
            (result, data) => {
                if let Some(data) = data {
                    port.recycle(data);
                }
                if let Err(e) = result.as_ref() {
                    if crate::group::disk_io::read_fails_the_disk(e) {
                        note_failed(failed, copy.disk, e);
                    }
                }
                out.push(PieceCopy {
                    copy,
                    sums: vec![None; (piece.len / unit_bytes) as usize],
                    bytes: None,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
