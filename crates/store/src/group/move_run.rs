//! Running a rebalance's moves: where they run ([`MoveSite`]: a group one
//! command holds, or a live group), the loop that takes them in batches
//! ([`run_moves`]: metadata first, then data, then the compact pass), and
//! the copy of a batch of data moves under their extents' exclusive
//! latches. Reserving and switching a batch are in `relocate.rs`, moving
//! metadata in `move_metadata.rs`.

use std::collections::BTreeSet;

use cairn_format::group::{AuAddr, FILE_NUMBER_USER_MIN};
use cairn_io::AlignedBuf;

use super::data::{self, DataPort};
use super::error::GroupError;
use super::mounted::Group;
use super::move_plan::{RebalanceReport, INDIRECT_INDEX};
use super::plane::{Hold, LatchGuard, LatchKey, OperationGuard};
use super::resync::Progress;
use crate::rebalance::{self, Pass};

/// One extent copy in flight.
#[derive(Debug, Clone, Copy)]
pub(super) struct Relocation {
    pub(super) file: u32,
    pub(super) incarnation: u32,
    pub(super) extent: u64,
    pub(super) aus: u64,
    pub(super) from: AuAddr,
    /// Reserved, claimed by the switch.
    pub(super) to: AuAddr,
    pub(super) pass: Pass,
    /// AUs of the new copy with no readable source: stale in it.
    pub(super) stale: u16,
    /// [`Zeroings::mark`](super::parts::zeroings::Zeroings::mark) when the move was reserved: a file zeroed since
    /// (a grow) may have had zeros land on the old copy after it was read.
    pub(super) zero_mark: u64,
    /// Times the target disk had gone offline when the run was reserved:
    /// a copy to a disk that went offline since (even if it is back) may
    /// not be durable, and is not switched to.
    pub(super) to_offline_count: u64,
}
/// Wait for the data operations older than now ([`DataPlane::wait_for_older_operations`](super::plane::DataPlane::wait_for_older_operations)),
/// or say why the caller cannot go on.
pub(super) fn readers_done(plane: &super::plane::DataPlane) -> Result<(), GroupError> {
    if plane.wait_for_older_operations() {
        return Ok(());
    }
    Err(GroupError::Interrupted(format!(
        "data operations begun before this one still ran after {:?} (4 times disk_io_timeout): a disk may hang in a way its timeout does not end; nothing was changed by this step, so run the command again",
        plane.drain_bound()
    )))
}
/// Where a rebalance's moves run: a group one command holds (it is its own
/// data port, and each step commits as it needs), or a live group (each
/// step a metadata operation, the data through a handle of the
/// rebalance's own).
pub(super) trait MoveSite<'g> {
    /// Run `f` on the group's metadata as one step: for a live group a
    /// metadata operation (what it changed is durable when this returns);
    /// for a group one command holds, `f` itself, which commits as it
    /// needs (the switch step commits; reserving changes only memory).
    fn step<R>(&mut self, f: impl FnOnce(&mut Group<'g>) -> R) -> Result<R, GroupError>;
    /// The port the data copies go through, and the guard slot of its
    /// operations (`None`: the port is the group itself).
    fn data(&mut self) -> (&mut dyn DataPort, Option<&std::sync::atomic::AtomicU64>);
    /// Whether to stop before the next batch (a live group whose service
    /// is stopping): the moves made stay made, the rest stay pending.
    fn interrupted(&self) -> bool {
        false
    }
}

impl<'g> MoveSite<'g> for Group<'g> {
    fn step<R>(&mut self, f: impl FnOnce(&mut Group<'g>) -> R) -> Result<R, GroupError> {
        Ok(f(self))
    }

    fn data(&mut self) -> (&mut dyn DataPort, Option<&std::sync::atomic::AtomicU64>) {
        (self, None)
    }
}

/// Run a rebalance's moves: metadata first (each under the metadata lock),
/// then the data moves in batches — reserved, copied under the extents'
/// exclusive latches with `inflight` I/Os in flight, switched in a step
/// whose commit makes the copies durable before the latches go — and then,
/// where it is wanted, the compact pass. Data moves are taken from the
/// source disks in turn ([`rebalance::spread`]), so each batch reads from
/// and writes to every disk involved, not one at a time.
pub(super) fn run_moves<'g>(
    site: &mut impl MoveSite<'g>,
    moves: Vec<rebalance::Move>,
    inflight: usize,
    report: &mut RebalanceReport,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), GroupError> {
    let mut total: u64 = moves.iter().map(|m| m.aus).sum();
    let mut done = 0;
    progress(Progress {
        done,
        total,
        ..Default::default()
    });
    let (meta, data): (Vec<_>, Vec<_>) = moves
        .into_iter()
        .partition(|m| m.file < FILE_NUMBER_USER_MIN || m.index & INDIRECT_INDEX != 0);
    let started = std::time::Instant::now();
    for m in meta {
        site.step(|g| g.move_metadata(&m, report))??;
        done += m.aus;
        progress(Progress {
            done,
            total,
            bytes_done: report.bytes_copied,
            ..Default::default()
        });
    }
    report.metadata_ms += started.elapsed().as_millis() as u64;
    let au_bytes = site.step(|g| g.au_bytes)?;
    let mut pool = Vec::new();
    let mut phase = rebalance::spread(data);
    // Summed per batch, reported in whole milliseconds at the end.
    let mut copying_for = std::time::Duration::ZERO;
    let mut switching_for = std::time::Duration::ZERO;
    let result: Result<(), GroupError> = 'run: loop {
        let window = relocation_window(inflight, &phase);
        for chunk in relocation_batches(&phase, window, au_bytes) {
            if site.interrupted() {
                break 'run Err(GroupError::Interrupted(
                    "the rebalance stopped because the service is stopping; `cairn group rebalance` resumes it".into(),
                ));
            }
            let (batch, saved) = site.step(|g| g.reserve_moves(chunk, report))?;
            if let Err(e) = saved {
                let _ = site.step(|g| g.unreserve_batch(&batch));
                break 'run Err(e);
            }
            let copying = std::time::Instant::now();
            let (port, slot) = site.data();
            let (copied, latch) =
                match copy_relocations(port, slot, &batch, window, &mut pool, report) {
                    Ok(done) => done,
                    Err(e) => {
                        // The copy's error is the one to report.
                        let _ = site.step(|g| g.unreserve_batch(&batch));
                        break 'run Err(e);
                    }
                };
            let switching = std::time::Instant::now();
            copying_for += switching - copying;
            let switched = site.step(|g| {
                g.switch_relocations(&batch, &copied, report)
                    .and_then(|()| g.commit())
            });
            drop(latch);
            switching_for += switching.elapsed();
            if let Err(e) = switched.and_then(|r| r) {
                break 'run Err(e);
            }
            done += chunk.iter().map(|m| m.aus).sum::<u64>();
            progress(Progress {
                done,
                total,
                bytes_done: report.bytes_copied,
                compacting: chunk[0].pass == Pass::Compact,
            });
        }
        // Then, where it helps, the compact pass (once).
        if phase.first().is_some_and(|m| m.pass == Pass::Compact) {
            break 'run Ok(());
        }
        match site.step(|g| g.compact_now(report)) {
            Ok(more) if more.is_empty() => break 'run Ok(()),
            Ok(more) => phase = rebalance::spread(more),
            Err(e) => break 'run Err(e),
        }
        total += phase.iter().map(|m| m.aus).sum::<u64>();
    };
    report.copy_ms += copying_for.as_millis() as u64;
    report.switch_ms += switching_for.as_millis() as u64;
    result
}

/// Relocation I/Os a disk is given at once, at most: with 1 MiB I/Os a
/// disk is kept busy by a few; more only queue at the disk, each holding
/// a buffer of fresh memory (on these machines, first-touched memory costs
/// more than the copy: power 64 ran slower than 16 before this cap).
pub const RELOCATION_DISK_INFLIGHT: usize = 4;

/// The I/O window of a phase (the data moves, or the compact pass): the
/// power (bounded by what the engine holds), but at most
/// [`RELOCATION_DISK_INFLIGHT`] per disk its moves read from or write to.
pub(super) fn relocation_window(inflight: usize, moves: &[rebalance::Move]) -> usize {
    let disks: BTreeSet<u16> = moves
        .iter()
        .flat_map(|m| [rebalance::read_disk(m), m.to])
        .collect();
    inflight
        .min(RELOCATION_DISK_INFLIGHT * disks.len().max(1))
        .max(1)
}

/// How many times its window one batch of relocations holds: the window
/// stays full while a batch runs (it only drains at the batch's end, for
/// the switch), and a batch's commit — barrier flush, journal record,
/// discards — is shared by more moves.
const RELOCATION_BATCH_WINDOWS: usize = 4;

/// The batches a phase runs in: consecutive moves, taken until their
/// pieces (relocation I/Os of at most 1 MiB) make
/// [`RELOCATION_BATCH_WINDOWS`] windows — at least one move, so at power 1
/// a batch is one extent (1, 4 or 16 AUs).
pub(super) fn relocation_batches(
    moves: &[rebalance::Move],
    window: usize,
    au_bytes: u64,
) -> Vec<&[rebalance::Move]> {
    let per_au = super::resync::pieces_per_au(au_bytes);
    let want = (window * RELOCATION_BATCH_WINDOWS) as u64;
    let mut out = Vec::new();
    let (mut start, mut pieces) = (0, 0);
    for (k, m) in moves.iter().enumerate() {
        pieces += m.aus * per_au;
        if pieces >= want {
            out.push(&moves[start..=k]);
            start = k + 1;
            pieces = 0;
        }
    }
    if start < moves.len() {
        out.push(&moves[start..]);
    }
    out
}

/// Copy a batch of relocations under their extents' exclusive latches
/// (returned held: the switch must commit before a writer may land):
/// every AU from the leaving copy if it can be read there, else from
/// another readable, non-stale copy, `inflight` I/Os at a time (reads and
/// writes overlapping: [`data::copy`]). Returns the relocations whose new
/// copy is whole (with the AUs no copy could give marked stale in it).
pub(super) fn copy_relocations(
    port: &mut dyn DataPort,
    slot: Option<&std::sync::atomic::AtomicU64>,
    batch: &[Relocation],
    inflight: usize,
    pool: &mut Vec<AlignedBuf>,
    report: &mut RebalanceReport,
) -> Result<(Vec<Relocation>, LatchGuard), GroupError> {
    let keys: Vec<(LatchKey, Hold)> = batch
        .iter()
        .map(|r| ((r.file, r.incarnation, r.extent), Hold::Exclusive))
        .collect();
    let latch = port.plane().latch(keys);
    let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
    let view = port.disk_view();
    let mut done: Vec<Relocation> = Vec::new();
    let (pieces, ready, au_bytes) = relocation_pieces(port, &view, batch, report, &mut done);
    let place = |c: AuAddr, au: u64, off: u64| (u64::from(c.au) + au) * au_bytes + off;
    let ios: Vec<data::CopyIo> = pieces
        .iter()
        .map(|(k, src, au, off, len)| data::CopyIo {
            from: (src.disk, place(*src, *au, *off)),
            to: (ready[*k].to.disk, place(ready[*k].to, *au, *off)),
            len: *len,
        })
        .collect();
    let mut failed: BTreeSet<usize> = BTreeSet::new();
    let mut failed_disks = data::FailedDisks::new();
    let outcomes = data::copy(port, &ios, inflight, pool)?;
    for ((k, _, _, _, len), outcome) in pieces.iter().zip(outcomes) {
        let why = match outcome {
            data::Copied::Done => {
                report.bytes_copied += len;
                continue;
            }
            data::Copied::ReadFailed => "a read of its copy failed".to_string(),
            data::Copied::WriteFailed => {
                failed_disks
                    .entry(ready[*k].to.disk)
                    .or_insert_with(|| "a rebalance's write to it failed".to_string());
                format!("the write to disk {} failed", view.name(ready[*k].to.disk))
            }
        };
        if failed.insert(*k) {
            report.moves_left.push(format!(
                "file {} extent {}: {why}",
                ready[*k].file, ready[*k].extent
            ));
        }
    }
    drop(guard);
    done.extend(
        ready
            .iter()
            .enumerate()
            .filter(|(k, _)| !failed.contains(k))
            .map(|(_, r)| *r),
    );
    if !failed_disks.is_empty() {
        port.disks_failed(&failed_disks, view.epoch)?;
    }
    Ok((done, latch))
}

/// One piece of a relocation's copy: (relocation index, source, AU in the
/// extent, offset in the AU, length).
type RelocationPiece = (usize, AuAddr, u64, u64, u64);

/// The pieces that copy each relocation of `batch` still to be made, each
/// AU from the leaving copy if it can be read there, else from another
/// readable, non-stale copy (an AU no copy can give is marked stale in the
/// new copy, and reported); the relocations they are of (indexed by the
/// pieces), and the AU size. A relocation of an extent never written goes
/// to `done` at once.
fn relocation_pieces(
    port: &mut dyn DataPort,
    view: &crate::group::plane::DiskView,
    batch: &[Relocation],
    report: &mut RebalanceReport,
    done: &mut Vec<Relocation>,
) -> (Vec<RelocationPiece>, Vec<Relocation>, u64) {
    let mut pieces: Vec<RelocationPiece> = Vec::new();
    let mut ready: Vec<Relocation> = Vec::new();
    let mut au_bytes = 0;
    for r in batch {
        let Some(snap) = port
            .snapshot(r.file)
            .filter(|f| f.incarnation == r.incarnation)
        else {
            continue;
        };
        let Some(ext) = snap.extent(r.extent) else {
            continue;
        };
        let Some(from_slot) = ext.copies().iter().position(|c| *c == r.from) else {
            continue;
        };
        if !view.is_writable(r.to.disk) {
            continue;
        }
        let mut r = *r;
        if !ext.initialized {
            // Never written: nothing to copy (its first write zeroes every
            // copy, the new one included).
            done.push(r);
            continue;
        }
        au_bytes = snap.au_bytes;
        let k = ready.len();
        for au in 0..r.aus {
            let readable =
                |slot: usize, c: &AuAddr| view.is_online(c.disk) && !ext.stale_in(slot, au..au + 1);
            let source = if readable(from_slot, &r.from) {
                Some(r.from)
            } else {
                ext.copies()
                    .iter()
                    .enumerate()
                    .find(|(s, c)| *s != from_slot && readable(*s, c))
                    .map(|(_, c)| *c)
            };
            let Some(source) = source else {
                r.stale |= 1 << au;
                report.aus_without_source.push(format!(
                    "file {} extent {} AU {}: no readable copy; the new copy on disk {} is marked stale there",
                    r.file,
                    r.extent,
                    au,
                    view.name(r.to.disk)
                ));
                continue;
            };
            pieces.extend(
                super::resync::au_pieces(snap.au_bytes).map(|(off, len)| (k, source, au, off, len)),
            );
        }
        ready.push(r);
    }
    (pieces, ready, au_bytes)
}
#[cfg(test)]
mod tests {
    use super::*;

    fn mv(aus: u64, from: u16, to: u16) -> rebalance::Move {
        rebalance::Move {
            file: 256,
            index: 0,
            aus,
            from,
            to,
            source: from,
            pass: Pass::Balance,
            to_au: None,
        }
    }

    #[test]
    fn a_batch_holds_its_windows_of_pieces_and_at_least_one_move() {
        // 4 MiB AUs: 4 pieces an AU; a window of 2 makes batches of 8.
        let moves = [
            mv(1, 0, 2),
            mv(1, 1, 3),
            mv(4, 0, 2),
            mv(16, 1, 3),
            mv(1, 0, 2),
        ];
        let lens: Vec<usize> = relocation_batches(&moves, 2, 4 << 20)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(lens, [2, 1, 1, 1]);
        // 1 MiB AUs at power 1: one move a batch until four pieces.
        let lens: Vec<usize> = relocation_batches(&moves, 1, 1 << 20)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(lens, [3, 1, 1]);
    }

    #[test]
    fn the_window_counts_the_disks_read_and_written_only() {
        // A rebuild reads its source, not the dead disk it replaces.
        let mut rebuild = mv(1, 9, 2);
        rebuild.pass = Pass::Rebuild;
        rebuild.source = 0;
        assert_eq!(
            relocation_window(1024, &[rebuild]),
            2 * RELOCATION_DISK_INFLIGHT
        );
        assert_eq!(relocation_window(3, &[rebuild]), 3);
        assert_eq!(
            relocation_window(1024, &[mv(1, 0, 2), mv(1, 1, 3)]),
            4 * RELOCATION_DISK_INFLIGHT
        );
    }
}
