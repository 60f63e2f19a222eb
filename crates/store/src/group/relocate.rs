//! Moving a group's data: the rebalance that executes the plan of
//! [`crate::rebalance`], and the end of a drop (DROPPING, then FORMER) once
//! its copies have moved (asking for a drop, a drop by force and undrop are
//! in `add_drop.rs`). Why it is built this way: `docs/rebalance.md`.
//!
//! A move of one extent copy, online:
//! 1. the target AUs are *reserved* in memory (handed to nobody else, not in
//!    the bitmap: a crash before step 3 leaves them free, nothing leaks);
//! 2. under the extent's exclusive latch (writers wait, readers go on with
//!    the old copy) every AU is copied from a readable, non-stale copy —
//!    the leaving copy itself where it can be read;
//! 3. still under the latch, one transaction points the map at the new
//!    copy, marks the AUs used and frees the old ones; its barrier flushes
//!    the new copy first. The old AUs are reused (and discarded) only once
//!    every reader that took the old map has finished (the quarantine).
//!
//! Metadata (the metadata files' extents and files' indirect AUs) moves
//! under the metadata lock, where all metadata I/O happens: checkpoint, copy,
//! switch, commit, checkpoint; the file directory's first extent is also
//! named by the superblocks, written last (mount finishes a move a crash
//! cut between the two).
//!
//! Where the parts live: what a rebalance will do (the plan's view of the
//! disks and copies, `--explain`, the report) in `move_plan.rs`; running
//! the moves (the batches, the data copies) in `move_run.rs`; moving
//! metadata in `move_metadata.rs`. Here: a rebalance's pending record,
//! its start and its finish (a drop's end), reserving and switching a
//! batch of data moves, and the compact pass.

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group::{AuAddr, DiskState, Extent};
use cairn_io::DeviceId;

use super::attributes::refused;
use super::error::GroupError;
use super::limits::{CLEAN_CLEARS_PER_COMMIT, STEP_DIRTY_MAX};
use super::mounted::Group;
use super::move_plan::Cuts;
use super::move_run::{readers_done, run_moves, Relocation};
use super::parts::members::Member;
use super::parts::txn::Dirty;
use super::resync::Progress;
use crate::placement;
use crate::rebalance::{self, Pass};

pub use super::move_plan::{DiskWork, Explain, PreparedDisk, RebalanceReport, INDIRECT_INDEX};

/// Power a rebalance runs at unless told otherwise (ASM's default is 1; a
/// Cairn relocation I/O is at most 1 MiB, so 4 keeps a disk busy without
/// crowding out the database).
pub const REBALANCE_POWER_DEFAULT: usize = 4;
/// Most relocation I/Os in flight (ASM's `ASM_POWER_LIMIT` maximum).
pub const REBALANCE_POWER_MAX: usize = 1024;
/// Relocation I/Os a live group's rebalance keeps in flight at most, whatever
/// the power (each holds a buffer of up to 1 MiB).
pub const REBALANCE_INFLIGHT_MAX: usize = 256;
/// The attribute that records a pending rebalance's power (internal: not
/// listed by `group get`).
pub(super) const REBALANCE_PENDING_KEY: &str = "_rebalance_power";

/// What became of one copied relocation at its switch.
enum Switch {
    Done,
    /// The copy is no longer the extent's (the file deleted or shrunk, the
    /// copy moved): nothing to do, replanned by the next rebalance.
    Gone,
    /// Not made, and why (said in `moves_left`).
    Left(String),
}

impl Group<'_> {
    // -- changing the disks -------------------------------------------------

    /// A drop is pending: say so durably (at the default power) unless a
    /// rebalance is already recorded.
    pub(super) fn note_rebalance_pending(&mut self) -> Result<(), GroupError> {
        if self.rebalance_pending().is_none() {
            self.set_rebalance_pending(Some(REBALANCE_POWER_DEFAULT))?;
        }
        Ok(())
    }

    /// Disks whose drop is pending.
    pub fn dropping_disks(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.entry.dropping())
            .map(|m| m.entry.label.clone())
            .collect()
    }

    /// The power a pending rebalance was left at (`None`: none pending).
    pub fn rebalance_pending(&self) -> Option<usize> {
        self.settings
            .attribute(REBALANCE_PENDING_KEY)
            .and_then(|v| v.parse().ok())
    }

    /// Record (or clear) a pending rebalance and its power, durably.
    pub(super) fn set_rebalance_pending(&mut self, power: Option<usize>) -> Result<(), GroupError> {
        if self.rebalance_pending() == power {
            return Ok(());
        }
        self.settings.clear_attribute(REBALANCE_PENDING_KEY);
        if let Some(p) = power {
            self.settings
                .set_attribute(REBALANCE_PENDING_KEY, p.to_string())
                .map_err(refused)?;
        }
        self.txn.mark(Dirty::Attributes);
        self.commit()
    }

    // -- running it ---------------------------------------------------------

    /// Refused (with what to do) when a rebalance could not run now: a
    /// disk OFFLINE and not dropped by force, or SYNCING.
    pub fn rebalance_blocker(&self) -> Result<(), GroupError> {
        self.refuse_rebalance_now()
    }

    /// What stops a rebalance from running now, said with what to do.
    fn refuse_rebalance_now(&self) -> Result<(), GroupError> {
        for m in self.members.iter() {
            if m.entry.dropping() && m.entry.forced() {
                continue;
            }
            match m.entry.state {
                DiskState::Offline => {
                    return Err(GroupError::Invalid(format!(
                        "disk {} is OFFLINE: a rebalance moves data only among disks it can read and write; bring it back (`cairn group online {} {}`) or drop it (`cairn group drop-disk {} {} --force`) first",
                        m.entry.label, self.name, m.entry.label, self.name, m.entry.label
                    )))
                }
                DiskState::Syncing => {
                    return Err(GroupError::Invalid(format!(
                        "disk {} is SYNCING: let its resync finish first (`cairn group online {} {}`)",
                        m.entry.label, self.name, m.entry.label
                    )))
                }
                DiskState::Online => {}
            }
        }
        Ok(())
    }

    /// Start or resume the rebalance: plan from the maps as they are, run
    /// every move (metadata first, then data, `power` relocation I/Os of at
    /// most 1 MiB in flight), and complete the drops whose disks are empty.
    /// Power 0 records the rebalance as pending and moves nothing.
    pub fn rebalance(
        &mut self,
        power: usize,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<RebalanceReport, GroupError> {
        if self.live {
            return Err(GroupError::Invalid(
                "this group is live: rebalance runs as a live operation".into(),
            ));
        }
        let mut report = RebalanceReport::default();
        let Some(moves) = self.rebalance_start(power, &mut report)? else {
            return Ok(report);
        };
        let started = std::time::Instant::now();
        // More I/Os than the engine holds only queue, and each holds a
        // buffer.
        let inflight = power.min(self.engine.depth_max());
        run_moves(self, moves, inflight, &mut report, progress)?;
        self.rebalance_finish(&mut report, true)?;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// The start of a rebalance: checked, recorded pending, planned.
    /// `None`: nothing to move now (paused, or finished at once).
    pub(super) fn rebalance_start(
        &mut self,
        power: usize,
        report: &mut RebalanceReport,
    ) -> Result<Option<Vec<rebalance::Move>>, GroupError> {
        self.check_writable()?;
        if power > REBALANCE_POWER_MAX {
            return Err(GroupError::Invalid(format!(
                "power {power} is out of range: 0 (pause) to {REBALANCE_POWER_MAX}"
            )));
        }
        self.refuse_rebalance_now()?;
        let plan = self.rebalance_plan()?;
        report.moves_planned = plan.moves.len() as u64;
        if power == 0 {
            self.set_rebalance_pending(Some(0))?;
            report.paused = true;
            return Ok(None);
        }
        // Even with nothing to move, the caller finishes (a drop whose disk
        // holds nothing completes), after waiting for readers its own way.
        self.set_rebalance_pending(Some(power))?;
        Ok(Some(plan.moves))
    }

    /// Reserve the target AUs of a batch of data moves; a move whose copy
    /// has changed since the plan, or whose target is full, is left for the
    /// next rebalance. The discard marks the reservations cleared are
    /// durable when it returns (`save_mark_clears`, a few blocks at a time):
    /// the copies land before the claim commits. Its error comes with the
    /// runs reserved, for the caller to give back.
    pub(super) fn reserve_moves(
        &mut self,
        moves: &[rebalance::Move],
        report: &mut RebalanceReport,
    ) -> (Vec<Relocation>, Result<(), GroupError>) {
        let mut out = Vec::new();
        for m in moves {
            if self.clean_dirty_blocks() >= CLEAN_CLEARS_PER_COMMIT {
                if let Err(e) = self.save_mark_clears() {
                    return (out, Err(e));
                }
            }
            let Some(rec) = self.files.get(m.file) else {
                continue;
            };
            let incarnation = rec.entry.incarnation;
            let Some(ext) = rec.extents.get(m.index as usize) else {
                continue;
            };
            let Some(from) = ext.copies().iter().find(|c| c.disk == m.from).copied() else {
                continue;
            };
            if let Some(at) = m.to_au {
                // A compact move whose copy is no longer wholly above its
                // target, whose extent has AUs no copy is current in (the
                // switch would refuse it, every time), or whose disk left
                // service: compaction is an improvement, not a duty.
                if u64::from(at) + m.aus > u64::from(from.au)
                    || ext.any_stale()
                    || self.member(m.to).and_then(Member::online).is_none()
                {
                    report.moves_skipped += 1;
                    continue;
                }
            }
            if self.member(m.to).and_then(Member::writable).is_none() {
                report.moves_left.push(format!(
                    "{} extent {}: disk {} is not in service",
                    self.path_of(m.file),
                    m.index,
                    self.disk_name(m.to)
                ));
                continue;
            }
            let to_offline_count = self.member(m.to).map_or(0, |t| t.offline_count);
            let Some(au) = self
                .member_mut(m.to)
                .and_then(|t| t.alloc.as_mut())
                .and_then(|a| match m.to_au {
                    // A compact move goes exactly where its plan said (a
                    // run taken since is no longer lower-and-free).
                    Some(at) => a.reserve_at(at, m.aus).then_some(at),
                    None => a.reserve(m.aus),
                })
            else {
                if m.to_au.is_some() {
                    // Compaction is an improvement, not a duty.
                    report.moves_skipped += 1;
                    continue;
                }
                report.moves_left.push(format!(
                    "{} extent {}: no run of {} free AUs on disk {}",
                    self.path_of(m.file),
                    m.index,
                    m.aus,
                    self.disk_name(m.to)
                ));
                continue;
            };
            out.push(Relocation {
                file: m.file,
                incarnation,
                extent: m.index,
                aus: m.aus,
                from,
                to: AuAddr { disk: m.to, au },
                pass: m.pass,
                stale: 0,
                to_offline_count,
                zero_mark: self.zeroings.mark(),
            });
        }
        let saved = self.save_mark_clears();
        (out, saved)
    }

    /// Point the maps at the copies made (`copied`, a subset of `batch`),
    /// under the batch's latches; give back the reservations of the rest.
    /// The caller commits (its barrier flushes the new copies first) and
    /// holds the latches until that commit is durable.
    pub(super) fn switch_relocations(
        &mut self,
        batch: &[Relocation],
        copied: &[Relocation],
        report: &mut RebalanceReport,
    ) -> Result<(), GroupError> {
        for r in batch {
            let made = copied
                .iter()
                .find(|c| c.file == r.file && c.extent == r.extent && c.to == r.to)
                .copied();
            let outcome = match made {
                Some(c) => self.switch_one(&c),
                None => Switch::Gone,
            };
            match outcome {
                Switch::Done => {
                    report.moves_done += 1;
                    if r.pass == Pass::Compact {
                        report.compact_aus_moved += r.aus;
                    } else {
                        report.aus_moved += r.aus;
                    }
                    if r.pass == Pass::Rebuild {
                        report.copies_rebuilt += 1;
                    }
                    self.depend_on(r.to.disk);
                    if self.dirty_count() >= STEP_DIRTY_MAX {
                        self.commit()?;
                    }
                }
                Switch::Gone => {
                    report.moves_skipped += 1;
                    self.unreserve_run(r.to, r.aus);
                }
                Switch::Left(why) => {
                    report.moves_left.push(why);
                    self.unreserve_run(r.to, r.aus);
                }
            }
        }
        Ok(())
    }

    /// Give back a reserved run (its disk may be away: then it is parked).
    pub(super) fn unreserve_run(&mut self, at: AuAddr, aus: u64) {
        let len = aus as u32;
        if let Some(m) = self.member_mut(at.disk) {
            match m.alloc.as_mut() {
                Some(a) => a.unreserve(at.au, len),
                None => {
                    m.parked.retain(|r| *r != (at.au, len));
                    if let Some(a) = m.away.as_mut() {
                        a.unreserve(at.au, len);
                    }
                }
            }
        }
    }

    /// Give back the reservations of a batch that failed before its switch.
    pub(super) fn unreserve_batch(&mut self, batch: &[Relocation]) {
        for r in batch {
            self.unreserve_run(r.to, r.aus);
        }
    }

    /// Switch one extent copy from `r.from` to `r.to` in the map, claiming
    /// the new run and freeing the old.
    fn switch_one(&mut self, r: &Relocation) -> Switch {
        let what = || format!("file {} extent {}", r.file, r.extent);
        let Some(target) = self.member(r.to.disk) else {
            return Switch::Left(format!("{}: its target disk left", what()));
        };
        if target.writable().is_none() || target.offline_count != r.to_offline_count {
            return Switch::Left(format!(
                "{}: disk {} went out of service during the copy",
                what(),
                target.entry.label
            ));
        }
        // A copy that could be brought back is never replaced by one with
        // AUs no copy could give: only a copy dropped by force (never read
        // again) is.
        if r.stale != 0 && !self.is_forced(r.from.disk) {
            return Switch::Left(format!(
                "{}: some AUs had no current copy to copy from; the copy on disk {} stays until they do",
                what(),
                self.disk_name(r.from.disk)
            ));
        }
        if self.zeroings.since(r.file, r.zero_mark) {
            return Switch::Gone;
        }
        let to_fg = target.entry.failgroup_id;
        let fgs: Vec<Option<u16>> = {
            let Some(rec) = self
                .files
                .get(r.file)
                .filter(|rec| rec.entry.incarnation == r.incarnation)
            else {
                return Switch::Gone;
            };
            let Some(ext) = rec.extents.get(r.extent as usize) else {
                return Switch::Gone;
            };
            if !ext.copies().contains(&r.from) {
                return Switch::Gone;
            }
            ext.copies()
                .iter()
                .filter(|c| **c != r.from)
                .map(|c| self.member(c.disk).map(|m| m.entry.failgroup_id))
                .collect()
        };
        if fgs.contains(&Some(to_fg)) {
            return Switch::Left(format!(
                "{}: another copy is in failure group {} now",
                what(),
                target.entry.failgroup
            ));
        }
        let claimed = self
            .member_mut(r.to.disk)
            .and_then(|m| m.alloc.as_mut())
            .is_some_and(|a| a.claim(r.to.au, r.aus as u32));
        if !claimed {
            return Switch::Left(format!("{}: its target run was not reserved", what()));
        }
        let ext = self
            .files
            .extent_mut(r.file, None, r.extent)
            .expect("invariant: checked above");
        let slot = ext
            .copies()
            .iter()
            .position(|c| *c == r.from)
            .expect("invariant: checked above");
        let old = *ext;
        ext.copies[slot] = r.to;
        ext.stale[slot] = r.stale;
        self.dirty_extent(r.file, r.extent);
        if self.is_forced(r.from.disk) {
            // Nothing is freed on a disk dropped by force, but the file
            // no longer claims the run there.
            let au = u64::from(r.from.au);
            self.damage.release(r.from.disk, au..au + r.aus, r.file);
        } else {
            let gone = Extent::new(&[r.from], old.initialized);
            self.free_extent(r.file, &gone, r.extent, false);
        }
        Switch::Done
    }
    /// After a crash in a rebalance: free the AUs marked used that no map
    /// names. A metadata move whose commit was cut can leave one (the
    /// journal's own move writes its record to the new place, which mount
    /// does not read if the journal's entry did not reach the disk, while
    /// the table's claim did). Nothing else is ever marked used without an
    /// owner: reservations are not in the bitmap, and freed runs are marked
    /// free at once. Returns the AUs freed.
    pub(super) fn free_leaked(&mut self) -> u64 {
        let mut owned: BTreeMap<u16, BTreeSet<u64>> = BTreeMap::new();
        for r in self.owned_runs() {
            owned.entry(r.disk).or_default().extend(r.au..r.au + r.len);
        }
        let mut freed = 0;
        for n in self.members.numbers() {
            let mine = owned.remove(&n).unwrap_or_default();
            let Some(alloc) = self.member_mut(n).and_then(|m| m.alloc.as_mut()) else {
                continue;
            };
            for au in alloc.used_list() {
                if !mine.contains(&au) {
                    alloc.free(au as u32, 1);
                    freed += 1;
                }
            }
        }
        freed
    }

    pub(super) fn is_forced(&self, disk: u16) -> bool {
        self.member(disk).is_some_and(|m| m.entry.forced())
    }

    /// The end of a rebalance: every DROPPING disk no copy is left on leaves
    /// the group (FORMER); when the plan is empty the rebalance is no longer
    /// pending.
    pub(super) fn rebalance_finish(
        &mut self,
        report: &mut RebalanceReport,
        wait: bool,
    ) -> Result<(), GroupError> {
        self.check_writable()?;
        let mut holding: BTreeSet<u16> = BTreeSet::new();
        for e in self.plan_extents(&Cuts::new()) {
            holding.extend(e.copies);
        }
        let empty: Vec<u16> = self
            .members
            .iter()
            .filter(|m| m.entry.dropping() && !holding.contains(&m.entry.number))
            .map(|m| m.entry.number)
            .collect();
        if !empty.is_empty() {
            // No reader of an old map may still be reading them.
            if wait {
                self.wait_for_readers()?;
            }
            self.checkpoint()?;
            let gone: Vec<(u16, Option<DeviceId>, String, bool)> = empty
                .iter()
                .filter_map(|d| {
                    self.member(*d)
                        .map(|m| (*d, m.device, m.entry.label.clone(), m.online().is_some()))
                })
                .collect();
            for (d, _, _, _) in &gone {
                self.members.remove_dropped(*d);
            }
            self.superblocks_or_stop()?;
            self.publish_disks();
            for (_, device, label, reachable) in gone {
                report.disks_dropped.push(label.clone());
                // Still attached, reachable or not: a live group lets go of it.
                self.members.left_device(device);
                let Some(device) = device.filter(|_| reachable) else {
                    continue;
                };
                // The group no longer lists it: its header says FORMER, so
                // it lists as free to reuse. A failure here leaves a header
                // naming a group that does not list the disk, which `alter
                // --add` and `create` take again.
                let _ = self.write_membership(device, &label, None, Some(self.uuid), None);
            }
        }
        // A shrink whose copies have all moved: its cut becomes its end.
        let shrinking = |g: &Self| {
            g.members
                .numbers()
                .any(|n| g.pending_shrink_bytes(n).is_some())
        };
        if shrinking(self) {
            if wait {
                self.wait_for_readers()?;
            }
            self.finish_shrinks(report)?;
        }
        if !shrinking(self) && self.rebalance_plan().is_ok_and(|p| p.moves.is_empty()) {
            // A resize cut by a crash between its header and its
            // superblocks: the header follows the size on record.
            self.fix_header_placements()?;
            self.set_rebalance_pending(None)?;
        }
        Ok(())
    }

    /// Whether a rebalance ends with the compact pass: `rebalance_compact`
    /// true, or auto (the default) and every disk in service says it spins
    /// (on flash, where the place of a block costs nothing, it only adds
    /// I/O: the reference post's third tip).
    pub fn compact_wanted(&self) -> bool {
        if self.compact_asked {
            return true;
        }
        match self.attribute("rebalance_compact").as_deref() {
            Some("true") => true,
            Some("false") => false,
            _ => self.every_disk_in_service(|g| g.rotational == Some(true)),
        }
    }

    /// The compact pass's moves, when it is wanted and the rebalance
    /// proper has nothing left to move: per disk in service (not being
    /// dropped), its data copies packed towards its start
    /// ([`rebalance::compact`]). Counted in `report.compact_moves`.
    pub(super) fn compact_now(&self, report: &mut RebalanceReport) -> Vec<rebalance::Move> {
        if !self.compact_wanted() || !self.rebalance_plan().is_ok_and(|p| p.moves.is_empty()) {
            return Vec::new();
        }
        let out = self.compact_moves();
        report.compact_moves += out.len() as u64;
        out
    }

    /// Per disk in service (not being dropped), the moves that pack its
    /// data copies towards its start ([`rebalance::compact`]).
    pub(super) fn compact_moves(&self) -> Vec<rebalance::Move> {
        let mut copies: BTreeMap<u16, Vec<rebalance::PlacedCopy>> = BTreeMap::new();
        for (number, rec) in self.files.data_and_maps() {
            for (index, e) in rec.extents.iter().enumerate() {
                for c in e.copies() {
                    copies
                        .entry(c.disk)
                        .or_default()
                        .push(rebalance::PlacedCopy {
                            file: *number,
                            index: index as u64,
                            au: c.au,
                            aus: placement::extent_aus(index as u64),
                        });
                }
            }
        }
        let mut out = Vec::new();
        for (disk, placed) in copies {
            let Some(m) = self.member(disk).filter(|m| m.online().is_some()) else {
                continue;
            };
            let Some(alloc) = m.alloc.as_ref().filter(|_| !m.entry.dropping()) else {
                continue;
            };
            let first = alloc.layout.first_data_au;
            let free = alloc.free_now_map();
            out.extend(rebalance::compact(disk, &placed, first, &free));
        }
        out
    }

    /// Wait until every data operation that took a view before now is
    /// over; refused when some still run after the drain's bound.
    pub(super) fn wait_for_readers(&self) -> Result<(), GroupError> {
        readers_done(&self.plane)
    }
}
