//! Resizing a member disk (`cairn group alter --resize DISK=SIZE`).
//!
//! A disk's size in the group is its directory entry's `size_bytes`: where
//! its allocation table lies, how many AUs it has and where its tail header
//! copy goes all follow from it ([`AtLayout::for_disk`]). The entry's
//! `au_count` is where allocations stop: the layout's end, or, while a
//! shrink is pending, the cut.
//!
//! - A **grow** (the device grew first: a bigger file, `losetup -c`, a
//!   resized LUN) is one step: the header moves its tail copy to the new
//!   end, then the superblocks record the new size (the commit point), then
//!   the table's new blocks are written through the journal. The rebalance
//!   then gives the disk its share.
//! - A **shrink** first records the cut (`au_count` below the layout's end):
//!   nothing new lands past it, and the rebalance moves every copy past it
//!   to a disk with room (the same disk included) in its evacuation pass.
//!   When none is left, and no reader of an old map can still use an AU
//!   past it, the header moves its tail copy to the new end (an AU past the
//!   cut, empty now) and the superblocks record the new size. A crash at
//!   any point leaves either the old size with the cut (the next rebalance
//!   finishes), or the new size.
//!
//! A resize keeps the allocation table's shape (its summary blocks, and
//! the AU where data starts): the table was laid out for the size the disk
//! joined with, and moving it would move every bitmap block under the
//! maps. Within that (up to about 8 TiB with 1 MiB AUs, 64 TiB with 4 MiB)
//! any size the device holds is allowed; beyond it, drop the disk and add
//! it again.

use std::collections::BTreeSet;

use cairn_format::group::{AtLayout, DiskState};
use cairn_format::layout::{HeaderPlacement, DEVICE_SIZE_MIN_BYTES};
use cairn_format::meta::BLOCK_BYTES;
use cairn_io::AlignedBuf;

use super::error::{corrupt, GroupError};
use super::limits::member_layout;
use super::mounted::Group;
use super::move_plan::{Cuts, RebalanceReport};
use super::parts::members::Member;
use super::slots::newest_header;
use crate::labeling;

/// The tail header copy's MiB: a disk of `au_count` AUs needs its AUs and
/// one more MiB.
const TAIL_RESERVE_BYTES: u64 = 1 << 20;

/// A checked resize.
#[derive(Debug, Clone, Copy)]
pub(super) struct Resize {
    pub disk: u16,
    pub size_bytes: u64,
    pub layout: AtLayout,
}

impl Group<'_> {
    /// Where allocations on disk `n` stop: the new end `cuts` gives it, else
    /// a pending shrink's cut, else its layout's end.
    pub(super) fn disk_end(&self, n: u16, cuts: &Cuts) -> u64 {
        if let Some(end) = cuts.get(&n) {
            return *end;
        }
        let Some(m) = self.member(n) else { return 0 };
        match &m.alloc {
            Some(a) => a.limit(),
            None => AtLayout::for_disk(m.entry.size_bytes, self.au_bytes)
                .map_or(0, |l| l.au_count.min(m.entry.au_count)),
        }
    }

    /// The size disk `n` is being shrunk to, while its shrink is pending.
    pub fn pending_shrink_bytes(&self, n: u16) -> Option<u64> {
        let m = self.member(n)?;
        let layout = AtLayout::for_disk(m.entry.size_bytes, self.au_bytes)?;
        (m.entry.au_count < layout.au_count)
            .then(|| m.entry.au_count * self.au_bytes + TAIL_RESERVE_BYTES)
    }

    /// Check resizes (label, bytes): each a member in service, not leaving,
    /// named once, within its device, big enough, and keeping its table's
    /// shape. Writes nothing.
    pub(super) fn check_resizes(
        &self,
        resizes: &[(String, u64)],
        leaving: &BTreeSet<u16>,
    ) -> Result<Vec<Resize>, GroupError> {
        let mut out: Vec<Resize> = Vec::new();
        for (name, size) in resizes {
            let n = self.disks_named(std::slice::from_ref(name))?[0];
            let m = self.member(n).expect("invariant: named");
            let label = &m.entry.label;
            if out.iter().any(|r| r.disk == n) {
                return Err(GroupError::Invalid(format!(
                    "disk {label} is named twice in --resize; name each disk once"
                )));
            }
            if m.entry.dropping() || leaving.contains(&n) {
                return Err(GroupError::Invalid(format!(
                    "disk {label} is being dropped: it cannot be resized too; `cairn group undrop {}` cancels the drop",
                    self.name
                )));
            }
            let (Some(device), Some(alloc)) = (m.online(), m.alloc.as_ref()) else {
                return Err(GroupError::Invalid(format!(
                    "disk {label} is {}: only an ONLINE disk is resized (its data may have to move); {}",
                    m.entry.shown_state(),
                    if m.entry.state == DiskState::Syncing {
                        "let its resync finish first".to_string()
                    } else {
                        format!("bring it back first (`cairn group online {} {label}`)", self.name)
                    }
                )));
            };
            let device_bytes = self
                .engine
                .geometry(device)
                .map_or(m.entry.size_bytes, |g| g.size_bytes);
            if *size > device_bytes {
                return Err(GroupError::Invalid(format!(
                    "disk {label} is a {device_bytes}-byte device: it cannot be resized to {size} bytes, beyond its end; grow the device first (a bigger file, `losetup -c`, the array's LUN) or name a size up to {device_bytes}"
                )));
            }
            let now = alloc.layout;
            let layout = member_layout(*size, self.au_bytes)
                .map_err(|why| GroupError::Invalid(format!("disk {label}: {why}")))
                .and_then(|l| {
                    (l.au_count > now.first_data_au
                        && l.au_count * self.au_bytes + TAIL_RESERVE_BYTES
                            >= DEVICE_SIZE_MIN_BYTES)
                        .then_some(l)
                        .ok_or_else(|| {
                            GroupError::Invalid(format!(
                                "{size} bytes is too small for disk {label}: it must hold its header copies, its allocation table and at least one {}-MiB AU",
                                self.au_bytes >> 20
                            ))
                        })
                })?;
            if layout.first_data_au != now.first_data_au
                || layout.summary_blocks != now.summary_blocks
            {
                let (low, high) = self.table_keeping_range(now);
                let high = high.min(device_bytes);
                return Err(GroupError::Invalid(format!(
                    "resizing disk {label} to {size} bytes would change its allocation table's shape, laid out for the size it joined with: resize it within {low}..={high} bytes, or drop it and add it again at the new size"
                )));
            }
            out.push(Resize {
                disk: n,
                size_bytes: *size,
                layout,
            });
        }
        Ok(out)
    }

    /// The sizes (bytes) a disk laid out as `now` can take without changing
    /// its table's shape: the shape only grows with the AU count, so the
    /// counts that keep it are one interval around the current one.
    fn table_keeping_range(&self, now: AtLayout) -> (u64, u64) {
        let au = self.au_bytes;
        // The size whose layout has exactly `aus` AUs, at its smallest.
        let size_of = |aus: u64| aus * au + TAIL_RESERVE_BYTES;
        let same = |aus: u64| {
            AtLayout::for_disk(size_of(aus), au).is_some_and(|l| {
                l.first_data_au == now.first_data_au && l.summary_blocks == now.summary_blocks
            })
        };
        // Lowest: bisect between the first data AU (never the same shape)
        // and now (the same).
        let (mut bad, mut good) = (now.first_data_au, now.au_count);
        while good - bad > 1 {
            let mid = bad + (good - bad) / 2;
            if same(mid) {
                good = mid;
            } else {
                bad = mid;
            }
        }
        let low = good;
        // Highest: double up until the shape changes, then bisect.
        let (mut good, mut step) = (now.au_count, 1u64);
        while step < (1 << 40) && same(good + step) {
            good += step;
            step *= 2;
        }
        let mut bad = good + step;
        while bad - good > 1 {
            let mid = good + (bad - good) / 2;
            if same(mid) {
                good = mid;
            } else {
                bad = mid;
            }
        }
        (size_of(low), size_of(good + 1) - 1)
    }

    /// `alter --resize` (label, bytes): a grow takes effect now; a shrink
    /// records its cut, and the rebalance moves the copies past it and
    /// completes it; a size equal to the disk's cancels a pending shrink.
    /// Refused, changing nothing, when the data would not fit. Returns what
    /// was done, one line per disk.
    pub fn request_resizes(
        &mut self,
        resizes: &[(String, u64)],
    ) -> Result<Vec<String>, GroupError> {
        self.check_writable()?;
        let checked = self.check_resizes(resizes, &BTreeSet::new())?;
        let cuts: Cuts = checked
            .iter()
            .map(|r| (r.disk, r.layout.au_count))
            .collect();
        self.plan_for(&[], &BTreeSet::new(), &cuts)?;
        // Pending before the cut is on record: a crash between leaves a
        // rebalance with nothing to do, never a cut nobody finishes.
        self.note_rebalance_pending()?;
        let mut said = Vec::new();
        let mut recorded = false;
        for r in checked {
            // An earlier resize of this change may have taken a failing
            // disk out of service: said, not assumed.
            let Some((label, now)) = self.member(r.disk).and_then(|m| {
                m.alloc
                    .as_ref()
                    .filter(|_| m.online().is_some())
                    .map(|a| (m.entry.label.clone(), a.layout))
            }) else {
                return Err(GroupError::Invalid(format!(
                    "disk {} left service during the change; {} of it was done",
                    self.disk_name(r.disk),
                    if said.is_empty() {
                        "none".to_string()
                    } else {
                        said.join("; ")
                    }
                )));
            };
            if r.layout.au_count > now.au_count {
                self.grow_disk(r)?;
                said.push(format!("disk {label} grew to {} bytes", r.size_bytes));
                continue;
            }
            let was_shrinking = self.pending_shrink_bytes(r.disk).is_some();
            let m = self.member_mut(r.disk).expect("invariant: checked");
            m.entry.au_count = r.layout.au_count;
            if let Some(a) = m.alloc.as_mut() {
                a.set_limit(r.layout.au_count);
            }
            recorded = true;
            said.push(if r.layout.au_count == now.au_count {
                format!(
                    "disk {label} keeps its {} bytes{}",
                    m.entry.size_bytes,
                    if was_shrinking {
                        " (its pending shrink is cancelled)"
                    } else {
                        ""
                    }
                )
            } else {
                let to = r.layout.au_count * self.au_bytes + TAIL_RESERVE_BYTES;
                format!(
                    "disk {label} is shrinking to {to} bytes{}: its copies past the new end move first",
                    if to < r.size_bytes {
                        format!(
                            " (whole {}-MiB AUs and the tail header's MiB, within the {} asked for)",
                            self.au_bytes >> 20,
                            r.size_bytes
                        )
                    } else {
                        String::new()
                    }
                )
            });
        }
        if recorded {
            self.superblocks_or_stop()?;
        }
        Ok(said)
    }

    /// Grow a disk now: its header's tail copy moves to the new end, the
    /// superblocks record the size (the commit point), the table's new
    /// blocks follow through the journal.
    fn grow_disk(&mut self, r: Resize) -> Result<(), GroupError> {
        // The table goes through the journal in chunks after the commit
        // point: the running transaction must be durable first, or a chunk
        // would carry part of it.
        let open = self.txn_open();
        self.commit_through(open)?;
        self.move_tail_header(r.disk, r.size_bytes)?;
        let Some(m) = self.member_mut(r.disk).filter(|m| m.alloc.is_some()) else {
            return Err(GroupError::Invalid(format!(
                "disk {} left service during its grow; its size is unchanged",
                self.disk_name(r.disk)
            )));
        };
        m.entry.size_bytes = r.size_bytes;
        m.entry.au_count = r.layout.au_count;
        if let Some(alloc) = m.alloc.as_mut() {
            *alloc = alloc.resized(r.layout);
        }
        self.superblocks_or_stop()?;
        self.publish_disks();
        self.commit_in_chunks()
    }

    /// Rewrite disk `n`'s header for a device of `size_bytes` (its tail copy
    /// at the new end), then clear the old tail copy: a grow puts it among
    /// the data AUs, a shrink past the group's end.
    pub(super) fn move_tail_header(&mut self, n: u16, size_bytes: u64) -> Result<(), GroupError> {
        let label = self.disk_name(n);
        let device = self
            .member(n)
            .and_then(Member::online)
            .ok_or_else(|| GroupError::Invalid(format!("disk {label} left service")))?;
        let (mut header, generation) = newest_header(&mut *self.engine, device, &label)?;
        let placement = HeaderPlacement::for_device(size_bytes)
            .map_err(|e| GroupError::Invalid(format!("disk {label}: {e}")))?;
        let old = header.copy_offsets_bytes.clone();
        header.device_size_bytes = size_bytes;
        header.copy_offsets_bytes = placement.offsets_bytes.to_vec();
        header.generation = generation + 1;
        header.written_unix_seconds = (self.clock)();
        let all: Vec<usize> = (0..header.copy_offsets_bytes.len()).collect();
        let written = labeling::write_copies(&mut *self.engine, device, &header, &all);
        // Old copies are cleared only outside the data AUs the directory
        // gives the disk now: a place that is data now is not ours to zero.
        let data_end = AtLayout::for_disk(
            self.member(n).map_or(0, |m| m.entry.size_bytes),
            self.au_bytes,
        )
        .map_or(u64::MAX, |l| l.au_count * self.au_bytes);
        let mut result = written.map_err(|e| match e {
            labeling::WriteError::Io(error) => GroupError::Io {
                disk: label.clone(),
                error,
            },
            other => GroupError::Invalid(format!("disk {label}: writing its header: {other}")),
        });
        if result.is_ok() {
            for offset in old {
                if !header.copy_offsets_bytes.contains(&offset) && offset >= data_end {
                    if let Err(error) =
                        self.engine
                            .write_at(device, offset, AlignedBuf::zeroed(BLOCK_BYTES), true)
                    {
                        result = Err(GroupError::Io {
                            disk: label.clone(),
                            error,
                        });
                        break;
                    }
                }
            }
        }
        if result.is_err() {
            // A disk whose header write failed is failing: out of service.
            self.failed_disks.insert(n);
            self.offline_failed()?;
        }
        result
    }

    /// Disks in service whose header's placement is not the one their size
    /// in the group gives (a crash between a resize's header write and its
    /// superblocks): the header is written again for that size.
    pub(super) fn fix_header_placements(&mut self) -> Result<(), GroupError> {
        for n in self.members.numbers() {
            let Some((device, size)) = self
                .member(n)
                .and_then(|m| m.online().map(|d| (d, m.entry.size_bytes)))
            else {
                continue;
            };
            let label = self.disk_name(n);
            let Ok((header, _)) = newest_header(&mut *self.engine, device, &label) else {
                continue;
            };
            let want = HeaderPlacement::for_device(size).map(|p| p.offsets_bytes.to_vec());
            if header.device_size_bytes != size || want.as_ref() != Ok(&header.copy_offsets_bytes) {
                self.move_tail_header(n, size)?;
            }
        }
        Ok(())
    }

    /// Complete the shrinks whose cut nothing lies past any more (no copy,
    /// no AU a reader of an old map may still use, none reserved): the
    /// header's tail copy moves to the new end and the superblocks record
    /// the new size. The caller has waited for readers of old maps.
    pub(super) fn finish_shrinks(
        &mut self,
        report: &mut RebalanceReport,
    ) -> Result<(), GroupError> {
        let pending: Vec<u16> = self
            .members
            .numbers()
            .filter(|n| self.pending_shrink_bytes(*n).is_some())
            .filter(|n| self.member(*n).and_then(Member::online).is_some())
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let mut holding: BTreeSet<u16> = BTreeSet::new();
        for e in self.plan_extents(&Cuts::new()) {
            for (slot, d) in e.copies.iter().enumerate() {
                if e.cut & (1 << slot) != 0 {
                    holding.insert(*d);
                }
            }
        }
        let candidates: Vec<u16> = pending
            .into_iter()
            .filter(|n| !holding.contains(n))
            .collect();
        if candidates.is_empty() {
            return Ok(());
        }
        // The moves' old AUs past the cut: released once free of readers
        // and, for journaled metadata, past a checkpoint.
        self.checkpoint()?;
        self.release_free_of_readers()?;
        let open = self.txn_open();
        self.commit_through(open)?;
        for n in candidates {
            let Some(alloc) = self.member(n).and_then(|m| m.alloc.as_ref()) else {
                continue;
            };
            if alloc.used_past_limit() > 0 || alloc.busy_past_limit() {
                continue;
            }
            let size = alloc.limit() * self.au_bytes + TAIL_RESERVE_BYTES;
            let layout = AtLayout::for_disk(size, self.au_bytes)
                .filter(|l| l.au_count == alloc.limit())
                .ok_or_else(|| corrupt(format!("disk {n}: no layout for its cut")))?;
            let m = self.member_mut(n).expect("invariant: listed");
            m.entry.size_bytes = size;
            m.entry.au_count = layout.au_count;
            let alloc = m.alloc.as_mut().expect("invariant: online");
            *alloc = alloc.resized(layout);
            report
                .disks_resized
                .push(format!("{} to {size} bytes", m.entry.label));
            // The size first (the commit point), then the header: a crash
            // between leaves the old tail copy past the group's end, where
            // nothing is allocated (the next rebalance moves it in), never
            // a tail copy among AUs a cancelled cut would hand out.
            self.superblocks_or_stop()?;
            self.commit_in_chunks()?;
            self.move_tail_header(n, size)?;
        }
        Ok(())
    }
}
