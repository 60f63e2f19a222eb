//! What a rebalance will do, before it does anything: the plan's view of
//! the group's disks and extent copies, the plan of [`crate::rebalance`]
//! (its errors said in the group's words), the exact work of a change
//! (`alter --explain`) and the read rates its estimate is made from; and
//! what a rebalance reports. The rebalance itself is in `relocate.rs`.
//! Why it is built this way: `docs/rebalance.md`.

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group::{AtLayout, DiskEntry, Extent, FILE_NUMBER_USER_MIN};
use cairn_io::{AlignedBuf, DeviceId, Op, Request};
use serde::Serialize;

use super::error::GroupError;
use super::mounted::Group;
use crate::placement;
use crate::rebalance::{self, Pass, Plan, PlanDisk, PlanExtent};

/// Each resized disk's new end (its AU count), as the plan should see it.
pub(super) type Cuts = BTreeMap<u16, u64>;

/// A plan extent index with this bit names indirect AU `index & !bit` of
/// the file, not an extent.
pub const INDIRECT_INDEX: u64 = 1 << 62;

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
