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

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group::{
    AtLayout, AuAddr, DiskEntry, DiskState, Extent, FILE_DIRECTORY, FILE_JOURNAL,
    FILE_NUMBER_USER_MIN,
};
use cairn_format::DiskHeader;
use cairn_io::{AlignedBuf, DeviceId, IoEngine, Op, Request};
use serde::Serialize;

use super::data::{self, DataPort};
use super::error::{io_err, GroupError};
use super::limits::{CLEAN_CLEARS_PER_COMMIT, STEP_DIRTY_MAX};
use super::mounted::Group;
use super::parts::members::Member;
use super::parts::txn::Dirty;
use super::plane::{Hold, LatchGuard, LatchKey, OperationGuard};
use super::resync::{Progress, RESYNC_IO_BYTES_MAX};
use crate::header_copies::HeaderScan;
use crate::placement;
use crate::rebalance::{self, Pass, Plan, PlanDisk, PlanExtent};

/// Each resized disk's new end (its AU count), as the plan should see it.
pub(super) type Cuts = BTreeMap<u16, u64>;

/// A plan extent index with this bit names indirect AU `index & !bit` of
/// the file, not an extent.
pub const INDIRECT_INDEX: u64 = 1 << 62;
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

/// What a rebalance did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RebalanceReport {
    /// Extent copies the plan moves (when it started).
    pub moves_planned: u64,
    pub moves_done: u64,
    /// Moves whose copy changed before it was made (the file deleted or
    /// shrunk): nothing to do; the next plan has what is left.
    pub moves_skipped: u64,
    pub aus_moved: u64,
    pub bytes_copied: u64,
    /// Copies rebuilt from a mirror (of a disk dropped by force).
    pub copies_rebuilt: u64,
    /// Moves of metadata (metadata files' extents, indirect AUs).
    pub metadata_moves: u64,
    /// Moves left undone, and why (a disk failed, no room): the next
    /// `rebalance` plans them again.
    pub moves_left: Vec<String>,
    /// AUs that had no readable copy to copy from: the new copy is marked
    /// stale there, never read.
    pub aus_without_source: Vec<String>,
    /// Disks whose drop completed (they are FORMER now), by label.
    pub disks_dropped: Vec<String>,
    /// Shrinks that completed ("LABEL to N bytes").
    pub disks_resized: Vec<String>,
    /// Moves the compact pass planned (within a disk, towards its start),
    /// and the AUs it moved (not in `aus_moved`, which is what `--explain`
    /// predicts).
    pub compact_moves: u64,
    pub compact_aus_moved: u64,
    /// Stopped at power 0 before anything moved.
    pub paused: bool,
    /// Wall time of the moves and the drops' completion (not the mount).
    pub elapsed_ms: u64,
    /// Of that: moving metadata (under the metadata lock), copying data
    /// extents, and switching the maps (each batch's commit: the barrier
    /// flush, the journal record, and the discard of the AUs freed).
    pub metadata_ms: u64,
    pub copy_ms: u64,
    pub switch_ms: u64,
}

/// One disk in an explanation of a plan (`alter --explain`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DiskWork {
    pub number: u16,
    pub label: String,
    pub failgroup: String,
    /// ONLINE, DROPPING, NEW (added by this change) ...
    pub state: String,
    pub aus_used_before: u64,
    pub aus_used_after: u64,
    pub aus_in: u64,
    pub aus_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub capacity_aus: u64,
}

/// The exact work of a change: the plan, per disk.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Explain {
    pub moves: u64,
    pub aus_to_move: u64,
    pub bytes_to_move: u64,
    pub rebuild_moves: u64,
    pub evacuate_moves: u64,
    pub balance_moves: u64,
    pub disks: Vec<DiskWork>,
    /// Seconds the moves should take at the disks' sequential read rates
    /// measured now ([`Group::measure_read_rates`]; writes assumed to run
    /// at the same rate), the busiest disk setting the pace; `None` until
    /// measured, or when no disk could be measured.
    pub estimated_seconds: Option<f64>,
}

impl Explain {
    /// Fill in [`Explain::estimated_seconds`] from measured rates (bytes/s
    /// per disk number): each disk reads what leaves it and writes what
    /// comes in; disks work in parallel. A disk not measured (a new, empty
    /// one) is taken at the slowest rate measured.
    pub fn estimate(&mut self, rates: &BTreeMap<u16, f64>) {
        let Some(slowest) = rates
            .values()
            .copied()
            .filter(|r| *r > 0.0)
            .reduce(f64::min)
        else {
            return;
        };
        let busiest = self
            .disks
            .iter()
            .map(|d| {
                let rate = rates
                    .get(&d.number)
                    .copied()
                    .filter(|r| *r > 0.0)
                    .unwrap_or(slowest);
                (d.bytes_in + d.bytes_out) as f64 / rate
            })
            .fold(0.0, f64::max);
        self.estimated_seconds = Some(busiest);
    }
}

/// A disk a change adds, checked, before anything is written.
#[derive(Debug, Clone)]
pub struct PreparedDisk {
    pub(super) device: DeviceId,
    pub(super) entry: DiskEntry,
    pub(super) layout: AtLayout,
}

impl PreparedDisk {
    pub fn label(&self) -> &str {
        &self.entry.label
    }
    pub fn failgroup(&self) -> &str {
        &self.entry.failgroup
    }
}

/// One extent copy in flight.
#[derive(Debug, Clone, Copy)]
pub(super) struct Relocation {
    file: u32,
    incarnation: u32,
    extent: u64,
    aus: u64,
    from: AuAddr,
    /// Reserved, claimed by the switch.
    to: AuAddr,
    pass: Pass,
    /// AUs of the new copy with no readable source: stale in it.
    stale: u16,
    /// [`Group::zero_mark`] when the move was reserved: a file zeroed since
    /// (a grow) may have had zeros land on the old copy after it was read.
    zero_mark: u64,
    /// Times the target disk had gone offline when the run was reserved:
    /// a copy to a disk that went offline since (even if it is back) may
    /// not be durable, and is not switched to.
    to_offline_count: u64,
}

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
    // -- the plan -----------------------------------------------------------

    /// The plan's view of the disks: `extra` are disks a change would add,
    /// `leaving` disks it would drop, `cuts` the ends resizes would give.
    pub(super) fn plan_disks(
        &self,
        extra: &[PreparedDisk],
        leaving: &BTreeSet<u16>,
        cuts: &Cuts,
    ) -> Vec<PlanDisk> {
        let mut out: Vec<PlanDisk> = self
            .members
            .iter()
            .map(|m| PlanDisk {
                number: m.entry.number,
                failgroup: m.entry.failgroup_id,
                capacity_aus: self.disk_end(m.entry.number, cuts).saturating_sub(
                    AtLayout::for_disk(m.entry.size_bytes, self.au_bytes)
                        .map_or(0, |l| l.first_data_au),
                ),
                leaving: m.entry.dropping() || leaving.contains(&m.entry.number),
                readable: m.online().is_some() && !m.entry.forced(),
            })
            .collect();
        out.extend(extra.iter().map(|p| PlanDisk {
            number: p.entry.number,
            failgroup: p.entry.failgroup_id,
            capacity_aus: p.layout.data_aus(),
            leaving: false,
            readable: true,
        }));
        out
    }

    /// Every extent copy the group holds, metadata included, as the plan
    /// sees them; copies past their disk's end (a shrink's cut, pending or
    /// in `cuts`) are marked to move.
    pub(super) fn plan_extents(&self, cuts: &Cuts) -> Vec<PlanExtent> {
        let ends: BTreeMap<u16, u64> = self
            .members
            .iter()
            .map(|m| (m.entry.number, self.disk_end(m.entry.number, cuts)))
            .collect();
        let extent = |file: u32, index: u64, aus: u64, e: &Extent| PlanExtent {
            file,
            index,
            aus,
            copies: e.copies().iter().map(|c| c.disk).collect(),
            cut: e
                .copies()
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    ends.get(&c.disk)
                        .is_some_and(|end| u64::from(c.au) + aus > *end)
                })
                .fold(0u8, |mask, (slot, _)| mask | (1 << slot)),
        };
        let mut out = Vec::new();
        for (number, rec) in &self.files {
            for (index, e) in rec.extents.iter().enumerate() {
                let index = index as u64;
                out.push(extent(*number, index, placement::extent_aus(index), e));
            }
            for (k, e) in rec.entry.indirect.iter().enumerate() {
                out.push(extent(*number, INDIRECT_INDEX | k as u64, 1, e));
            }
        }
        out
    }

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

    pub(super) fn plan_for(
        &self,
        extra: &[PreparedDisk],
        leaving: &BTreeSet<u16>,
        cuts: &Cuts,
    ) -> Result<Plan, GroupError> {
        let disks = self.plan_disks(extra, leaving, cuts);
        rebalance::plan(&disks, &self.plan_extents(cuts)).map_err(|e| {
            let what = |file: u32, index: u64| {
                if index & INDIRECT_INDEX != 0 {
                    format!("{}'s extent map", self.path_of(file))
                } else if file < FILE_NUMBER_USER_MIN {
                    format!("metadata file {file}")
                } else {
                    format!("{} extent {index}", self.path_of(file))
                }
            };
            match e {
                rebalance::PlanError::NoRoom { file, index } => GroupError::NoSpace(format!(
                    "the disks that stay, at their new sizes, cannot hold {} (each copy in its own failure group): add disks, or drop or shrink less",
                    what(file, index)
                )),
                rebalance::PlanError::NoSource { file, index } => GroupError::Lost(format!(
                    "{} has no copy left that can be read, so it cannot be rebuilt",
                    what(file, index)
                )),
            }
        })
    }

    /// The plan a rebalance would run now.
    pub fn rebalance_plan(&self) -> Result<Plan, GroupError> {
        self.plan_for(&[], &BTreeSet::new(), &Cuts::new())
    }

    /// The exact work of a change (`alter --explain`): adding `extra`,
    /// dropping `drops` (labels), resizing (label, bytes), then
    /// rebalancing. Changes nothing.
    pub fn explain_change(
        &self,
        extra: &[PreparedDisk],
        drops: &[String],
        resizes: &[(String, u64)],
    ) -> Result<Explain, GroupError> {
        let leaving = self.check_drops(drops, extra)?;
        let cuts = self.check_resizes(resizes, &leaving)?;
        let cuts: Cuts = cuts.iter().map(|r| (r.disk, r.layout.au_count)).collect();
        let plan = self.plan_for(extra, &leaving, &cuts)?;
        let mut used: BTreeMap<u16, u64> = BTreeMap::new();
        for e in self.plan_extents(&cuts) {
            for d in e.copies {
                *used.entry(d).or_default() += e.aus;
            }
        }
        let mut disks = Vec::new();
        for pd in self.plan_disks(extra, &leaving, &cuts) {
            let (label, failgroup, state) = match self.member(pd.number) {
                Some(m) => (
                    m.entry.label.clone(),
                    m.entry.failgroup.clone(),
                    if pd.leaving {
                        "DROPPING".to_string()
                    } else if let Some(end) = cuts.get(&pd.number) {
                        let now = self.disk_end(pd.number, &Cuts::new());
                        match end.cmp(&now) {
                            std::cmp::Ordering::Less => "SHRINKING".to_string(),
                            std::cmp::Ordering::Greater => "GROWING".to_string(),
                            std::cmp::Ordering::Equal => m.entry.shown_state().to_string(),
                        }
                    } else {
                        m.entry.shown_state().to_string()
                    },
                ),
                None => {
                    let p = extra
                        .iter()
                        .find(|p| p.entry.number == pd.number)
                        .expect("invariant: a plan disk is a member or added");
                    (
                        p.entry.label.clone(),
                        p.entry.failgroup.clone(),
                        "NEW".to_string(),
                    )
                }
            };
            let aus_in = plan.aus_in.get(&pd.number).copied().unwrap_or(0);
            let aus_out = plan.aus_out.get(&pd.number).copied().unwrap_or(0);
            disks.push(DiskWork {
                number: pd.number,
                label,
                failgroup,
                state,
                aus_used_before: used.get(&pd.number).copied().unwrap_or(0),
                aus_used_after: plan.usage_after.get(&pd.number).copied().unwrap_or(0),
                aus_in,
                aus_out,
                bytes_in: aus_in * self.au_bytes,
                bytes_out: aus_out * self.au_bytes,
                capacity_aus: pd.capacity_aus,
            });
        }
        let count = |p: Pass| plan.moves.iter().filter(|m| m.pass == p).count() as u64;
        let aus: u64 = plan.moves.iter().map(|m| m.aus).sum();
        Ok(Explain {
            moves: plan.moves.len() as u64,
            aus_to_move: aus,
            bytes_to_move: aus * self.au_bytes,
            rebuild_moves: count(Pass::Rebuild),
            evacuate_moves: count(Pass::Evacuate),
            balance_moves: count(Pass::Balance),
            disks,
            estimated_seconds: None,
        })
    }

    /// Where to read to measure each of `disks`' sequential read rate (for
    /// [`Explain::estimate`]): up to `bytes` of its AUs in use, in
    /// [`RATE_IO_BYTES`] pieces, with its device. A disk not in use, or
    /// holding nothing, is left out. Reads nothing: the reads
    /// ([`time_reads`]) are made by whoever holds an engine on the disks —
    /// a live group outside its metadata lock.
    pub fn read_rate_plan(&self, disks: &[u16], bytes: u64) -> BTreeMap<u16, (DeviceId, Vec<u64>)> {
        let io = RATE_IO_BYTES.min(self.au_bytes);
        let mut out = BTreeMap::new();
        for d in disks {
            let Some(m) = self.member(*d) else { continue };
            let (Some(device), Some(alloc)) = (m.online(), m.alloc.as_ref()) else {
                continue;
            };
            let per_au = (self.au_bytes / io).max(1);
            let mut offsets = Vec::new();
            'aus: for au in alloc.used_list() {
                for k in 0..per_au {
                    if offsets.len() as u64 * io >= bytes {
                        break 'aus;
                    }
                    offsets.push(au * self.au_bytes + k * io);
                }
            }
            if !offsets.is_empty() {
                out.insert(*d, (device, offsets));
            }
        }
        out
    }

    /// Each of `disks`' sequential read rate in bytes a second, measured
    /// now on this group's own engine by reading up to `bytes` of its data
    /// ([`Group::read_rate_plan`], [`time_reads`]).
    pub fn measure_read_rates(&mut self, disks: &[u16], bytes: u64) -> BTreeMap<u16, f64> {
        let io = RATE_IO_BYTES.min(self.au_bytes);
        let mut out = BTreeMap::new();
        for (d, (device, offsets)) in self.read_rate_plan(disks, bytes) {
            if let Some(rate) = time_reads(&mut *self.engine, device, &offsets, io) {
                out.insert(d, rate);
            }
        }
        out
    }

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
        self.attributes
            .iter()
            .find(|(k, _)| k == REBALANCE_PENDING_KEY)
            .and_then(|(_, v)| v.parse().ok())
    }

    /// Record (or clear) a pending rebalance and its power, durably.
    pub(super) fn set_rebalance_pending(&mut self, power: Option<usize>) -> Result<(), GroupError> {
        if self.rebalance_pending() == power {
            return Ok(());
        }
        self.attributes.retain(|(k, _)| k != REBALANCE_PENDING_KEY);
        if let Some(p) = power {
            self.attributes
                .push((REBALANCE_PENDING_KEY.to_string(), p.to_string()));
        }
        self.txn.mark(Dirty::Attributes);
        self.commit()
    }

    // -- running it ---------------------------------------------------------

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
            let Some(rec) = self.files.get(&m.file) else {
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
                zero_mark: self.zero_seq,
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
        if self.zeroed_since(r.file, r.zero_mark) {
            return Switch::Gone;
        }
        let to_fg = target.entry.failgroup_id;
        let fgs: Vec<Option<u16>> = {
            let Some(rec) = self
                .files
                .get(&r.file)
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
        let rec = self
            .files
            .get_mut(&r.file)
            .expect("invariant: checked above");
        let ext = &mut rec.extents[r.extent as usize];
        let slot = ext
            .copies()
            .iter()
            .position(|c| *c == r.from)
            .expect("invariant: checked above");
        let old = *ext;
        ext.copies[slot] = r.to;
        ext.stale[slot] = r.stale;
        self.dirty_extent(r.file, r.extent);
        if !self.is_forced(r.from.disk) {
            let gone = Extent::new(&[r.from], old.initialized);
            self.free_extent(r.file, &gone, r.extent, false);
        }
        Switch::Done
    }

    /// Move one metadata extent copy (a metadata file's extent, or a file's
    /// indirect AU) under the metadata lock: checkpoint, copy, switch in a
    /// commit whose barrier flushes the copy, checkpoint. The file
    /// directory's first extent is also named by the superblocks, written
    /// last; mount finishes a move a crash cut between the two.
    pub(super) fn move_metadata(
        &mut self,
        m: &rebalance::Move,
        report: &mut RebalanceReport,
    ) -> Result<(), GroupError> {
        let indirect = m.index & INDIRECT_INDEX != 0;
        let index = m.index & !INDIRECT_INDEX;
        let Some(rec) = self.files.get(&m.file) else {
            return Ok(());
        };
        let ext = if indirect {
            rec.entry.indirect.get(index as usize).copied()
        } else {
            rec.extents.get(index as usize).copied()
        };
        let Some(ext) = ext else {
            return Ok(());
        };
        let Some(from) = ext.copies().iter().find(|c| c.disk == m.from).copied() else {
            return Ok(());
        };
        let what = format!("metadata of file {} ({:#x})", m.file, m.index);
        // The copies stay in distinct failure groups, whatever became of
        // the moves before this one.
        let to_fg = self.member(m.to).map(|t| t.entry.failgroup_id);
        let clash = ext
            .copies()
            .iter()
            .filter(|c| **c != from)
            .any(|c| self.member(c.disk).map(|x| x.entry.failgroup_id) == to_fg);
        if clash || self.member(m.to).and_then(Member::writable).is_none() {
            report.moves_left.push(format!(
                "{what}: disk {} {}",
                self.disk_name(m.to),
                if clash {
                    "is in the failure group of another copy now"
                } else {
                    "is not in service"
                }
            ));
            return Ok(());
        }
        // Sources: the leaving copy while it can be read, else the others.
        let mut sources: Vec<AuAddr> = Vec::new();
        if self.member(from.disk).and_then(Member::online).is_some() && !self.is_forced(from.disk) {
            sources.push(from);
        }
        sources.extend(
            ext.copies()
                .iter()
                .filter(|c| **c != from && self.member(c.disk).and_then(Member::online).is_some()),
        );
        let Some(to_au) = self
            .member_mut(m.to)
            .and_then(|t| t.alloc.as_mut())
            .and_then(|a| a.reserve(m.aus))
        else {
            report.moves_left.push(format!(
                "{what}: no run of {} free AUs on disk {}",
                m.aus,
                self.disk_name(m.to)
            ));
            return Ok(());
        };
        let to = AuAddr {
            disk: m.to,
            au: to_au,
        };
        let unreserve = |g: &mut Self| g.unreserve_run(to, m.aus);
        if let Err(e) = self.save_mark_clears() {
            unreserve(self);
            return Err(e);
        }
        // Everything journaled is in place first: the copy takes what the
        // AU holds, and no record before this point needs replaying there.
        if let Err(e) = self.checkpoint() {
            unreserve(self);
            return Err(e);
        }
        if !self.copy_metadata(&sources, to, m.aus, &what, report)? {
            return Ok(());
        }
        if !self.switch_metadata(m, (indirect, index), from, to)? {
            return Ok(());
        }
        report.metadata_moves += 1;
        report.moves_done += 1;
        report.aus_moved += m.aus;
        if m.pass == Pass::Rebuild {
            report.copies_rebuilt += 1;
        }
        Ok(())
    }

    /// Copy a metadata extent's `aus` AUs from the first of `sources` that
    /// can be read to `to` (reserved), and make the copy durable. `false`:
    /// the move is left (`what`, and why, in the report), `to` let go.
    fn copy_metadata(
        &mut self,
        sources: &[AuAddr],
        to: AuAddr,
        aus: u64,
        what: &str,
        report: &mut RebalanceReport,
    ) -> Result<bool, GroupError> {
        let unreserve = |g: &mut Self| g.unreserve_run(to, aus);
        let bytes = aus * self.au_bytes;
        let mut copied = false;
        for src in sources {
            let (Some(sd), Some(td)) = (
                self.member(src.disk).and_then(|x| x.device),
                self.member(to.disk).and_then(Member::writable),
            ) else {
                continue;
            };
            let mut ok = true;
            let mut off = 0;
            while off < bytes && ok {
                let len = RESYNC_IO_BYTES_MAX.min(bytes - off);
                let buf = match self.engine.read_at(
                    sd,
                    u64::from(src.au) * self.au_bytes + off,
                    len as usize,
                ) {
                    Ok(b) => b,
                    Err(_) => {
                        ok = false;
                        break;
                    }
                };
                if self
                    .engine
                    .write_at(td, u64::from(to.au) * self.au_bytes + off, buf, false)
                    .is_err()
                {
                    unreserve(self);
                    self.failed_disks.insert(to.disk);
                    self.offline_failed()?;
                    report.moves_left.push(format!(
                        "{what}: the write to disk {} failed",
                        self.disk_name(to.disk)
                    ));
                    return Ok(false);
                }
                report.bytes_copied += len;
                off += len;
            }
            // Durable before anything names it (the superblocks may, for
            // the file directory's first extent, before the commit does).
            if ok && self.engine.flush(td).is_err() {
                unreserve(self);
                self.failed_disks.insert(to.disk);
                self.offline_failed()?;
                report.moves_left.push(format!(
                    "{what}: the flush of disk {} failed",
                    self.disk_name(to.disk)
                ));
                return Ok(false);
            }
            if ok {
                copied = true;
                break;
            }
        }
        if !copied {
            unreserve(self);
            report
                .moves_left
                .push(format!("{what}: no copy of it could be read"));
        }
        Ok(copied)
    }

    /// Switch the copy of metadata extent `index` (`indirect`: an indirect
    /// AU) of `m`'s file from `from` to `to`, copied, in a commit; the
    /// superblocks first where they name it. `false`: the copy is no longer
    /// there, `to` let go.
    fn switch_metadata(
        &mut self,
        m: &rebalance::Move,
        (indirect, index): (bool, u64),
        from: AuAddr,
        to: AuAddr,
    ) -> Result<bool, GroupError> {
        let unreserve = |g: &mut Self| g.unreserve_run(to, m.aus);
        let rec = self.files.get_mut(&m.file).expect("invariant: found above");
        let e = if indirect {
            &mut rec.entry.indirect[index as usize]
        } else {
            &mut rec.extents[index as usize]
        };
        let Some(slot) = e.copies().iter().position(|c| *c == from) else {
            unreserve(self);
            return Ok(false);
        };
        e.copies[slot] = to;
        e.stale[slot] = 0;
        let initialized = e.initialized;
        let claimed = self
            .member_mut(to.disk)
            .and_then(|t| t.alloc.as_mut())
            .is_some_and(|a| a.claim(to.au, m.aus as u32));
        assert!(claimed, "invariant: reserved under this metadata lock");
        if indirect {
            self.txn.mark(Dirty::Entry(m.file));
        } else {
            self.dirty_extent(m.file, index);
        }
        if !self.is_forced(from.disk) {
            let gone = Extent::new(&[from], initialized);
            // Journaled metadata: the ring may hold records that target it.
            self.free_extent(m.file, &gone, if indirect { 0 } else { index }, true);
        }
        self.depend_on(to.disk);
        // The file directory's first extent is named by the superblocks
        // too, and they are what mount reads it through: they name the new
        // place first (the copy is durable, and holds everything up to the
        // checkpoint above). A crash before the commit below leaves the
        // directory's own entry naming the old place: mount adopts the
        // superblocks' (`adopt_directory_bootstrap`).
        // The journal's map is named by the superblocks as well, for the
        // same reason: its entry's in-place write may be torn by a crash,
        // and only the journal can repair it.
        if (m.file == FILE_DIRECTORY && !indirect && index == 0)
            || (m.file == FILE_JOURNAL && !indirect)
        {
            self.superblocks_or_stop()?;
        }
        self.commit()?;
        self.checkpoint()?;
        Ok(true)
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

    /// Where the count of the meta plane's zeroings stands now.
    pub(super) fn zero_mark(&self) -> u64 {
        self.zero_seq
    }

    /// Whether file `file` was zeroed by the meta plane after `mark`.
    pub(super) fn zeroed_since(&self, file: u32, mark: u64) -> bool {
        self.zeroed_files.get(&file).is_some_and(|z| *z > mark)
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
        for (number, rec) in self.files.range(FILE_NUMBER_USER_MIN..) {
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

/// Wait for the data operations older than now ([`DataPlane::wait_for_older_operations`]),
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

/// A device's newest good header and the highest generation any copy
/// holds; refused, saying so, when it carries no Cairn label.
pub(super) fn newest_header(
    engine: &mut dyn IoEngine,
    device: DeviceId,
    what: &str,
) -> Result<(DiskHeader, u64), GroupError> {
    let scan = HeaderScan::read(engine, device).map_err(io_err(what.to_string()))?;
    let header = scan
        .good()
        .map(|(_, h)| h.header.clone())
        .max_by_key(|h| h.generation)
        .ok_or_else(|| {
            GroupError::Invalid(format!("{what} carries no Cairn label; label it first"))
        })?;
    Ok((header, scan.generation_max()))
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

/// The size of each read [`time_reads`] makes.
pub const RATE_IO_BYTES: u64 = 1 << 20;

/// Read `io`-byte pieces at `offsets` of `device`, eight at a time, and
/// say the rate in bytes a second (`None`: nothing could be read).
pub fn time_reads(
    engine: &mut dyn cairn_io::IoEngine,
    device: DeviceId,
    offsets: &[u64],
    io: u64,
) -> Option<f64> {
    let started = std::time::Instant::now();
    let mut read = 0u64;
    for chunk in offsets.chunks(8) {
        let requests = chunk
            .iter()
            .map(|o| Request {
                device,
                tag: *o,
                op: Op::Read {
                    offset_bytes: *o,
                    buf: AlignedBuf::zeroed(io as usize),
                },
            })
            .collect();
        match engine.execute_all(requests) {
            Ok(done) => read += done.iter().filter(|c| c.result.is_ok()).count() as u64 * io,
            Err(_) => break,
        }
    }
    let secs = started.elapsed().as_secs_f64();
    (read > 0 && secs > 0.0).then(|| read as f64 / secs)
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
