//! Punching holes and zeroing ranges: extents made unwritten again, and
//! parts of written extents zeroed on every copy.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use cairn_format::group::{au_mask, Extent, REGION_BYTES};
use cairn_io::{IoError, Op};

use super::common::{
    changing_error, file_snapshot, lost_write_error, missed_copies, note_failed, piece_aus, run,
    unwritable_error, writable_copies, writable_copies_of, zero_op, DataPort, DiskIo, FailedDisks,
    StaleMark, WRITE_ATTEMPTS_MAX,
};
use super::map_blocks::SumsWrite;
use super::write::settle_write;
use crate::group::error::GroupError;
use crate::group::plane::{FileSnapshot, Hold, LatchGuard, OperationGuard};
use crate::group::sums_log::ENTER_REGIONS_MAX;

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
pub(in crate::group) const RMW_LATCH: u64 = 1 << 63;

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
            .map(|e| ((number, incarnation, tag | *e), Hold::Exclusive))
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
        // Their units read as zeros once marked: the checksums say so
        // from before the mark (a reader beside it may find either).
        let mut sums = SumsWrite::new(port, &now)?;
        let mut runs: Vec<(u64, Vec<(u64, u64)>)> = Vec::new();
        if let Some(s) = sums.as_mut() {
            runs = still
                .iter()
                .map(|(e, _)| (*e, extent_runs(&now, *e)))
                .collect();
            for run in runs.iter().flat_map(|(_, r)| r) {
                s.begin_unwritten(port, *run)?;
            }
        }
        let marked = port.mark_unwritten(number, incarnation, &still)?;
        if let Some(s) = sums.as_mut() {
            for (e, r) in &runs {
                for run in r {
                    s.end(*run, marked.contains(e));
                }
            }
        }
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
///
/// A file with checksums is zeroed as it is written: its zeros land only
/// where a durable record of the checksum log names the region, at most
/// [`ENTER_REGIONS_MAX`] regions at once, so the parts are cut at windows
/// of that many regions and zeroed a window at a time.
pub(crate) fn zero_parts(
    port: &mut dyn DataPort,
    slot: Option<&AtomicU64>,
    number: u32,
    incarnation: u32,
    parts: &[(u64, u64, u64)],
    unmap: bool,
) -> Result<u64, GroupError> {
    let snap = file_snapshot(port, number)?;
    if !snap.has_map || snap.incarnation != incarnation {
        return zero_window(port, slot, number, incarnation, parts, unmap);
    }
    let window = ENTER_REGIONS_MAX * REGION_BYTES;
    let mut windows: BTreeMap<u64, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for (e, within, len) in parts {
        let start = u64::try_from(snap.layout.logical_offset(*e, *within)).unwrap_or(u64::MAX);
        let mut done = 0;
        while done < *len {
            let at = start.saturating_add(done);
            let cut = ((at / window + 1) * window - at).min(len - done);
            windows
                .entry(at / window)
                .or_default()
                .push((*e, within + done, cut));
            done += cut;
        }
    }
    let mut zeroed = 0;
    for parts in windows.values() {
        zeroed += zero_window(port, slot, number, incarnation, parts, unmap)?;
    }
    Ok(zeroed)
}

/// [`zero_parts`], for parts of one window.
fn zero_window(
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
        // Where a part starts in the file: each is one run of it (the
        // caller's pieces).
        let at_of = |e: u64, within: u64| {
            u64::try_from(now.layout.logical_offset(e, within)).unwrap_or(u64::MAX)
        };
        // The parts still in written extents (an unwritten one reads as
        // zeros already), with their extents.
        let live = live_parts(&now, parts);
        if let Some((_, _, _, extent)) = live
            .iter()
            .find(|(_, _, _, x)| writable_copies_of(&view, x).next().is_none())
        {
            drop(guard);
            let (e, within, len, _) = live
                .iter()
                .find(|(_, _, _, x)| x == extent)
                .expect("invariant: found in the parts");
            return Err(unwritable_error(
                number,
                at_of(*e, *within),
                *len,
                &view,
                extent,
            ));
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
        // The parts' checksums take the zeros before any I/O is sent.
        let mut sums = SumsWrite::new(port, &now)?;
        if let Some(s) = sums.as_mut() {
            for (e, within, len, _) in &live {
                s.begin(port, (at_of(*e, *within), *len), None)?;
            }
        }
        let (ios, of) = zero_ios(port, &now, &view, &live, unmap);
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
        if let Some(s) = sums.as_mut() {
            for ((e, within, len, _), n) in live.iter().zip(&landed) {
                s.end((at_of(*e, *within), *len), *n > 0);
            }
        }
        let lost = landed.iter().position(|n| *n == 0).map(|i| {
            let (e, within, len, _) = live[i];
            let at = at_of(e, within);
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

/// The runs of the file (offset, length) extent `e` holds, inside the
/// file's size: one for coarse striping, a stripe unit each for fine.
fn extent_runs(snap: &FileSnapshot, e: u64) -> Vec<(u64, u64)> {
    let bytes = snap.layout.extent_bytes(e);
    let mut runs = Vec::new();
    let mut within = 0;
    while within < bytes {
        let Ok(at) = u64::try_from(snap.layout.logical_offset(e, within)) else {
            break;
        };
        let run = snap.layout.locate(at).run_bytes.min(bytes - within).max(1);
        let end = (at + run).min(snap.size_bytes);
        if at < end {
            runs.push((at, end - at));
        }
        within += run;
    }
    runs
}

/// The parts still in written extents (an unwritten one reads as zeros
/// already), with their extents.
fn live_parts(now: &FileSnapshot, parts: &[(u64, u64, u64)]) -> Vec<(u64, u64, u64, Extent)> {
    parts
        .iter()
        .filter_map(|(e, within, len)| {
            now.extent(*e)
                .filter(|x| x.initialized)
                .map(|x| (*e, *within, *len, *x))
        })
        .collect()
}

/// The I/Os that zero each live part on every writable copy (by discard
/// with `unmap`, where it zeroes), each with its part and the mark that
/// says the copy missed it.
fn zero_ios(
    port: &mut dyn DataPort,
    now: &FileSnapshot,
    view: &crate::group::plane::DiskView,
    live: &[(u64, u64, u64, Extent)],
    unmap: bool,
) -> (Vec<DiskIo>, Vec<(usize, StaleMark)>) {
    let mut ios = Vec::new();
    let mut of = Vec::new();
    for (i, (e, within, len, extent)) in live.iter().enumerate() {
        let mask = au_mask(piece_aus(now, *within, *len));
        for c in writable_copies(view, extent) {
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
    (ios, of)
}
