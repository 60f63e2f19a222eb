//! Stale copies and fast mirror resync: the first part of the disk life
//! cycle (`docs/lifecycle.md`).
//!
//! - A write that cannot reach a copy (its disk is offline, or the write to
//!   it failed) marks that copy's AUs stale in the extent map first
//!   ([`Group::set_stale`], through the journal like every map change); a
//!   stale AU is never read.
//! - A disk that comes back is SYNCING: written by every write from then on,
//!   never read. Its resync refreshes its metadata copies, then copies only
//!   its stale AUs from good copies, each under the extent's exclusive latch
//!   (no writer can land between the copy and the clearing of the bit), and
//!   clears the bits in a commit whose barrier flushes the copies first.
//!   When no stale AU is left it goes ONLINE.

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group::{
    au_mask, map_number, AuAddr, DiskState, Extent, CHECKSUM_MAP_BIT, FILE_ALIAS_DIRECTORY,
    FILE_CHECKSUM_DIRECTORY, FILE_DIRECTORY, FILE_NUMBER_USER_MIN,
};
use cairn_format::meta::BLOCK_BYTES;
use cairn_format::{group as fmt, meta};
use cairn_io::AlignedBuf;
use serde::Serialize;

use super::data::{self, DataPort, StaleMark};
use super::error::GroupError;
use super::limits::STEP_DIRTY_MAX;
use super::mounted::Group;
use super::namespace::alias_block_of;
use super::parts::files::{indirect_blocks, FileRec};
use super::parts::members::Member;
use super::parts::txn::Dirty;
use super::plane::{Hold, LatchGuard, LatchKey, OperationGuard};
use crate::placement;

/// Bytes one resync I/O moves at most: an AU bigger than this is copied in
/// pieces, so power × this bounds the memory a resync holds.
pub const RESYNC_IO_BYTES_MAX: u64 = 1 << 20;
/// Power a resync runs at unless told otherwise (I/Os in flight).
pub const RESYNC_POWER_DEFAULT: usize = 8;

/// What a resync did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ResyncReport {
    /// Disks brought back ONLINE, by label.
    pub disks_online: Vec<String>,
    /// Stale AUs copied from a good copy.
    pub aus_copied: u64,
    pub bytes_copied: u64,
    /// Stale AUs of extents never written: cleared without I/O (they read as
    /// zeros, and their first write reaches every copy).
    pub aus_cleared_unwritten: u64,
    /// Metadata blocks on the returning disks that differed from the newest
    /// copy, rewritten.
    pub metadata_blocks_rewritten: u64,
    /// Stale AUs with no good copy to copy from (more failures than the
    /// redundancy covers): left stale, never read.
    pub aus_without_source: Vec<String>,
    /// Disks this resync was to bring ONLINE that it could not, each as
    /// `LABEL (STATE): why`: what `online` reports as stopped.
    #[serde(default)]
    pub disks_left: Vec<String>,
    /// The disks being resynced (SYNCING, or resynced whole), by number:
    /// those `disks_left` speaks of.
    #[serde(skip)]
    resyncing: BTreeSet<u16>,
    /// Per target disk, stale AUs left because no good copy could be read.
    #[serde(skip)]
    unread: BTreeMap<u16, u64>,
}

/// How far a long operation has come.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
    pub bytes_done: u64,
    /// A rebalance has reached its compact pass.
    pub compacting: bool,
}

/// Where the copy I/Os of one AU of `au_bytes` begin, and their lengths:
/// at most [`RESYNC_IO_BYTES_MAX`] each.
pub(super) fn au_pieces(au_bytes: u64) -> impl Iterator<Item = (u64, u64)> {
    let step = RESYNC_IO_BYTES_MAX.min(au_bytes).max(1);
    (0..au_bytes)
        .step_by(step as usize)
        .map(move |off| (off, step.min(au_bytes - off)))
}

/// How many copy I/Os one AU of `au_bytes` takes ([`au_pieces`]).
pub(super) fn pieces_per_au(au_bytes: u64) -> u64 {
    au_bytes.div_ceil(RESYNC_IO_BYTES_MAX.min(au_bytes)).max(1)
}

/// Stale AUs one resync batch copies at `power` (I/Os in flight).
pub(super) fn batch_len(power: usize, au_bytes: u64) -> usize {
    (power.max(1) / pieces_per_au(au_bytes) as usize).max(1)
}

/// One stale AU of one copy.
#[derive(Debug, Clone, Copy)]
pub(super) struct StaleAu {
    file: u32,
    incarnation: u32,
    extent: u64,
    /// The stale copy.
    target: AuAddr,
    /// AU index inside the extent.
    au: u64,
}

impl Group<'_> {
    /// Mark AUs of copies stale in memory (dirtying their map blocks); the
    /// caller commits. A mark for a copy the file no longer has is dropped.
    pub(super) fn set_stale(&mut self, file: u32, incarnation: u32, marks: &[StaleMark]) {
        let mut touched = Vec::new();
        for m in marks {
            let Some(ext) = self.files.extent_mut(file, Some(incarnation), m.extent) else {
                continue;
            };
            let Some(slot) = ext.copies().iter().position(|c| *c == m.copy) else {
                continue;
            };
            if ext.stale[slot] & m.mask != m.mask {
                ext.stale[slot] |= m.mask;
                touched.push(m.extent);
            }
        }
        for e in touched {
            self.dirty_extent(file, e);
        }
    }

    /// [`Group::set_stale`], committing whenever a step's worth of blocks
    /// is dirty (a big write marks more extents than one transaction
    /// holds); the caller commits the rest.
    pub(super) fn set_stale_in_steps(
        &mut self,
        file: u32,
        incarnation: u32,
        marks: &[StaleMark],
    ) -> Result<(), GroupError> {
        for m in marks {
            self.set_stale(file, incarnation, std::slice::from_ref(m));
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        Ok(())
    }

    /// Mark every copy on `disk` stale, whole: the disk went offline after
    /// a failed I/O, and may have lost any write it had not flushed.
    fn mark_all_stale_on(&mut self, disk: u16) -> Result<(), GroupError> {
        let mut marks: Vec<(u32, u32, StaleMark)> = Vec::new();
        for (number, rec) in &self.files {
            if *number < FILE_NUMBER_USER_MIN {
                continue; // metadata: refreshed block by block
            }
            for (index, ext) in rec.extents.iter().enumerate() {
                let aus = placement::extent_aus(index as u64);
                // Never the last copy that can be read: with no other, what
                // the disk holds is the best there is.
                let other = ext
                    .copies()
                    .iter()
                    .enumerate()
                    .any(|(slot, c)| c.disk != disk && self.copy_serves(ext, slot, aus));
                if !other {
                    continue;
                }
                for c in ext.copies().iter().filter(|c| c.disk == disk) {
                    marks.push((
                        *number,
                        rec.entry.incarnation,
                        StaleMark {
                            extent: index as u64,
                            copy: *c,
                            mask: au_mask(0..placement::extent_aus(index as u64)),
                        },
                    ));
                }
            }
        }
        for (file, incarnation, mark) in marks {
            self.set_stale_in_steps(file, incarnation, &[mark])?;
        }
        self.commit()
    }

    /// How many times each member has gone offline since mount: a resync
    /// batch clears nothing on a disk that went offline during it.
    pub(super) fn offline_counts(&self) -> BTreeMap<u16, u64> {
        self.members
            .iter()
            .map(|m| (m.entry.number, m.offline_count))
            .collect()
    }

    /// Members being resynced.
    pub(super) fn syncing_disks(&self) -> BTreeSet<u16> {
        self.members
            .iter()
            .filter(|m| m.entry.state == DiskState::Syncing && m.writable().is_some())
            .map(|m| m.entry.number)
            .collect()
    }

    /// Every stale AU of a copy on a disk that is written (SYNCING, or
    /// ONLINE after a write to it failed): what a resync copies.
    fn stale_aus(&self) -> Vec<StaleAu> {
        let mut out = Vec::new();
        for (number, rec) in &self.files {
            for (index, ext) in rec.extents.iter().enumerate() {
                if !ext.any_stale() {
                    continue;
                }
                for (slot, c) in ext.copies().iter().enumerate() {
                    if self.member(c.disk).and_then(Member::writable).is_none() {
                        continue;
                    }
                    // Bits past the extent's AUs mean nothing (and must not
                    // send a copy outside the extent).
                    let mask = ext.stale_mask(slot, placement::extent_aus(index as u64));
                    for au in (0..16u64).filter(|b| mask & (1 << b) != 0) {
                        out.push(StaleAu {
                            file: *number,
                            incarnation: rec.entry.incarnation,
                            extent: index as u64,
                            target: *c,
                            au,
                        });
                    }
                }
            }
        }
        out
    }

    /// Whether copy `slot` of an extent of `aus` AUs serves reads now: its
    /// disk is ONLINE and none of its AUs is stale. The one rule by which
    /// an extent's redundancy is counted (what may go offline, what a
    /// resync may copy from, what is reported as lowered).
    pub(super) fn copy_serves(&self, extent: &Extent, slot: usize, aus: u64) -> bool {
        extent
            .copies()
            .get(slot)
            .is_some_and(|c| self.member(c.disk).and_then(Member::online).is_some())
            && extent.stale_mask(slot, aus) == 0
    }

    /// The extents of `rec` whose redundancy is lowered: fewer of their
    /// copies serve reads than the file's redundancy asks (a copy on a
    /// disk not ONLINE, a copy with a stale AU). How many, and their AUs
    /// (one copy each).
    pub(super) fn lowered_extents(&self, rec: &FileRec) -> (u64, u64) {
        let wanted = usize::from(rec.entry.copies);
        let mut out = (0, 0);
        for (index, e) in rec.extents.iter().enumerate() {
            let aus = placement::extent_aus(index as u64);
            let serving = (0..e.copies().len())
                .filter(|slot| self.copy_serves(e, *slot, aus))
                .count();
            if serving < wanted {
                out.0 += 1;
                out.1 += aus;
            }
        }
        out
    }

    /// AUs of the copies on `disk` that serve no read now: all it holds
    /// while it is not ONLINE, its stale AUs when it is. What the group is
    /// short of its redundancy there, until a resync (or, for a disk
    /// dropped by force, the rebuild) restores them.
    pub fn missing_copy_aus(&self, disk: u16) -> u64 {
        if self.member(disk).and_then(Member::online).is_some() {
            return self.stale_aus_on(disk);
        }
        let on = |e: &Extent| e.copies().iter().filter(|c| c.disk == disk).count() as u64;
        self.files
            .values()
            .map(|r| {
                let data: u64 = r
                    .extents
                    .iter()
                    .enumerate()
                    .map(|(index, e)| on(e) * placement::extent_aus(index as u64))
                    .sum();
                data + r.entry.indirect.iter().map(on).sum::<u64>()
            })
            .sum()
    }

    /// Stale AUs left on copies of `disk`.
    pub fn stale_aus_on(&self, disk: u16) -> u64 {
        self.files
            .values()
            .flat_map(|r| r.extents.iter().enumerate())
            .map(|(index, e)| {
                let aus = placement::extent_aus(index as u64);
                e.copies()
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.disk == disk)
                    .map(|(slot, _)| u64::from(e.stale_mask(slot, aus).count_ones()))
                    .sum::<u64>()
            })
            .sum()
    }

    /// Bring SYNCING disks (and stale copies on ONLINE ones) up to date:
    /// refresh their metadata copies, copy every stale AU from a good copy,
    /// and put each SYNCING disk with nothing stale left ONLINE. `power`:
    /// I/Os of at most [`RESYNC_IO_BYTES_MAX`] in flight.
    pub fn resync(
        &mut self,
        power: usize,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ResyncReport, GroupError> {
        self.refuse_if_live_resync()?;
        let mut report = ResyncReport::default();
        let Some(work) = self.resync_start(&mut report)? else {
            return Ok(report);
        };
        let total = work.len() as u64;
        let mut done = 0u64;
        progress(Progress {
            done,
            total,
            bytes_done: 0,
            ..Default::default()
        });
        for chunk in work.chunks(batch_len(power, self.au_bytes)) {
            let before = (self.offline_counts(), self.zeroings.mark());
            let (copied, latch) = copy_stale(self, None, chunk, power, &mut report)?;
            let committed = self
                .resync_copied(&copied, &before)
                .and_then(|()| self.commit());
            drop(latch);
            committed?;
            done += chunk.len() as u64;
            progress(Progress {
                done,
                total,
                bytes_done: report.bytes_copied,
                ..Default::default()
            });
        }
        self.resync_finish(&mut report)?;
        Ok(report)
    }

    /// The start of a resync: the stale AUs to copy (`None`: nothing to
    /// do), with the returning disks' metadata copies made current first.
    pub(super) fn resync_start(
        &mut self,
        report: &mut ResyncReport,
    ) -> Result<Option<Vec<StaleAu>>, GroupError> {
        self.check_writable()?;
        let syncing = self.syncing_disks();
        // Every copy on a disk that may have lost writes nothing marked: one
        // coming back after a failure, or one the group stopped before it
        // could mark or take offline (ONLINE, `record_missed_writes`).
        let whole: Vec<u16> = self
            .members
            .iter()
            .filter(|m| m.writable().is_some() && m.entry.resync_all())
            .map(|m| m.entry.number)
            .collect();
        if !whole.is_empty() {
            for d in &whole {
                self.mark_all_stale_on(*d)?;
            }
            // The marks durable, the flag goes: an interrupted resync goes on
            // from the bits, it does not start over.
            let open = self.txn_open();
            self.commit_through(open)?;
            for d in &whole {
                if let Some(m) = self.member_mut(*d) {
                    m.entry.flags &= !fmt::DISK_FLAG_RESYNC_ALL;
                    // An ONLINE one records no image (it names one only
                    // while it is OFFLINE).
                    if m.entry.state == DiskState::Online {
                        m.entry.synced_generation = 0;
                    }
                }
            }
            self.superblocks_or_stop()?;
        }
        let work = self.stale_aus();
        if syncing.is_empty() && work.is_empty() {
            return Ok(None);
        }
        self.commit()?;
        let refresh: BTreeSet<u16> = syncing.iter().chain(&whole).copied().collect();
        report.resyncing.extend(&refresh);
        report.metadata_blocks_rewritten += self.refresh_metadata(&refresh)?;
        Ok(Some(work))
    }

    /// A batch copied (`before`: the offline counts and the zero mark taken
    /// before it began): its bits are cleared by the caller's commit, whose
    /// barrier flushes the copies first. The caller holds the batch's
    /// latches until that commit is durable, so a write that failed on a
    /// copy after ours cannot have its mark cleared by it.
    pub(super) fn resync_copied(
        &mut self,
        copied: &[StaleAu],
        before: &(BTreeMap<u16, u64>, u64),
    ) -> Result<(), GroupError> {
        // A target that went offline since the batch began keeps its bits,
        // even if it is back by now: its copy may not be durable.
        let now = self.offline_counts();
        let copied: Vec<StaleAu> = copied
            .iter()
            .filter(|c| {
                self.member(c.target.disk)
                    .and_then(Member::writable)
                    .is_some()
            })
            .filter(|c| before.0.get(&c.target.disk) == now.get(&c.target.disk))
            // Zeros the meta plane wrote to the file since the batch began
            // (a grow's, without the latches) may have landed on the good
            // copy after it was read: copied again by a later resync.
            .filter(|c| !self.zeroings.since(c.file, before.1))
            .copied()
            .collect();
        for chunk in copied.chunks(STEP_DIRTY_MAX / 2) {
            for c in chunk {
                self.depend_on(c.target.disk);
            }
            self.clear_stale(chunk);
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        Ok(())
    }

    /// The end of a resync: every SYNCING disk with nothing stale left is
    /// ONLINE again.
    pub(super) fn resync_finish(&mut self, report: &mut ResyncReport) -> Result<(), GroupError> {
        self.check_writable()?;
        let whole: Vec<u16> = self
            .syncing_disks()
            .into_iter()
            .filter(|d| self.stale_aus_on(*d) == 0)
            .collect();
        if !whole.is_empty() {
            for d in &whole {
                if let Some(m) = self.member_mut(*d) {
                    m.entry.state = DiskState::Online;
                    m.entry.flags &= !fmt::DISK_FLAG_RESYNC_ALL;
                    m.entry.offline_seconds = 0;
                    m.entry.synced_generation = 0;
                    report.disks_online.push(m.entry.label.clone());
                }
            }
            // Its journal copy starts afresh with every other (the ring
            // before this point missed records).
            self.checkpoint()?;
            self.superblocks_or_stop()?;
            self.publish_disks();
        }
        report.disks_left = self.disks_left(report);
        Ok(())
    }

    /// The disks `report`'s resync was to bring ONLINE that are not, each
    /// with why: gone OFFLINE under it, or stale AUs left (with no good
    /// copy that could be read, or written to again while copied).
    fn disks_left(&self, report: &ResyncReport) -> Vec<String> {
        let mut out = Vec::new();
        for d in &report.resyncing {
            let Some(m) = self.member(*d) else {
                continue;
            };
            let label = &m.entry.label;
            if m.online().is_some() {
                continue;
            }
            if m.writable().is_none() {
                out.push(format!(
                    "{label} (OFFLINE): it failed during the resync (an I/O to it failed or did not answer)"
                ));
                continue;
            }
            let stale = self.stale_aus_on(*d);
            let unread = report.unread.get(d).copied().unwrap_or(0).min(stale);
            let why = if unread > 0 {
                format!(
                    "{stale} stale AU(s) left, {unread} with no good copy that could be read (the other copies are not ONLINE, are stale too, or failed a read)"
                )
            } else {
                format!(
                    "{stale} stale AU(s) left uncleared (changed while they were copied); the next resync copies them"
                )
            };
            out.push(format!("{label} (SYNCING): {why}"));
        }
        out
    }

    /// A live group resyncs through its own operation (with data handles
    /// running beside it), not through the group's own data path.
    fn refuse_if_live_resync(&self) -> Result<(), GroupError> {
        if self.live {
            return Err(GroupError::Invalid(
                "this group is live: resync runs as a live operation".into(),
            ));
        }
        Ok(())
    }

    /// Clear the stale bits of AUs copied (only where the copy is still the
    /// extent's: a copy that moved meanwhile keeps nothing of this).
    fn clear_stale(&mut self, copied: &[StaleAu]) {
        let mut touched = Vec::new();
        for s in copied {
            let Some(ext) = self.files.extent_mut(s.file, Some(s.incarnation), s.extent) else {
                continue;
            };
            let Some(slot) = ext.copies().iter().position(|c| *c == s.target) else {
                continue;
            };
            ext.stale[slot] &= !(1u16 << s.au);
            touched.push((s.file, s.extent));
        }
        touched.dedup();
        for (file, extent) in touched {
            self.dirty_extent(file, extent);
        }
    }

    /// Every mirrored metadata block with a copy on `disks`: rewrite that
    /// copy where it differs from the newest valid copy on an ONLINE disk.
    /// The journal's copies start afresh at the next checkpoint.
    fn refresh_metadata(&mut self, disks: &BTreeSet<u16>) -> Result<u64, GroupError> {
        if disks.is_empty() {
            return Ok(0);
        }
        let mut writes = Vec::new();
        for d in self.refresh_blocks() {
            let (id, places) = self.dirty_id_and_places(d);
            if !places.iter().any(|(disk, _)| disks.contains(disk)) {
                continue;
            }
            let mut newest: Option<(u64, AlignedBuf)> = None;
            for (disk, offset) in &places {
                if self.member(*disk).and_then(Member::online).is_none() {
                    continue;
                }
                let Ok(buf) = self.read_one(*disk, *offset, BLOCK_BYTES) else {
                    continue;
                };
                if let Ok(g) = meta::open(&buf[..], id, self.uuid) {
                    if newest.as_ref().is_none_or(|(n, _)| g > *n) {
                        newest = Some((g, buf));
                    }
                }
            }
            // No valid copy on an ONLINE disk (a block never written, or
            // freed): the returning disk's copy must say the same, or an
            // old, valid image of it (a deleted file's entry) could win later.
            let good = match newest {
                Some((_, good)) => good,
                None => {
                    let online = places
                        .iter()
                        .find(|(d, _)| self.member(*d).and_then(Member::online).is_some());
                    match online.map(|(d, o)| self.read_one(*d, *o, BLOCK_BYTES)) {
                        Some(Ok(buf)) => buf,
                        _ => continue,
                    }
                }
            };
            for (disk, offset) in places.iter().filter(|(d, _)| disks.contains(d)) {
                let Some(device) = self.member(*disk).and_then(Member::writable) else {
                    continue;
                };
                let same = self
                    .engine
                    .read_at(device, *offset, BLOCK_BYTES)
                    .is_ok_and(|b| b[..] == good[..]);
                if !same {
                    writes.push((*disk, *offset, AlignedBuf::from_slice(&good[..])));
                }
            }
        }
        let rewritten = writes.len() as u64;
        let failed = self.write_many(writes)?;
        self.failed_disks.extend(failed);
        self.flush_all_checked()?;
        self.offline_failed()?;
        Ok(rewritten)
    }

    /// Every block of the mirrored metadata files, used or not (every entry
    /// the file directory has room for, every alias block), and the indirect
    /// blocks in use: what a returning disk's copies must match.
    fn refresh_blocks(&self) -> Vec<Dirty> {
        let per_au = self.blocks_per_au();
        let room = |file: u32| {
            self.files
                .get(file)
                .map_or(0, |r| r.extents.len() as u64 * per_au)
        };
        let mut blocks: Vec<Dirty> = (0..room(FILE_DIRECTORY))
            .filter_map(|n| u32::try_from(n).ok())
            .map(Dirty::Entry)
            .collect();
        // The checksum directory's entries likewise (block n holds the
        // entry of file n's map).
        blocks.extend(
            (FILE_NUMBER_USER_MIN
                ..room(FILE_CHECKSUM_DIRECTORY).min(u64::from(CHECKSUM_MAP_BIT)) as u32)
                .map(|n| Dirty::Entry(map_number(n))),
        );
        blocks.extend((0..room(FILE_ALIAS_DIRECTORY)).map(Dirty::Alias));
        blocks.extend(
            self.metadata_blocks()
                .into_iter()
                .filter(|d| !matches!(d, Dirty::Entry(_) | Dirty::Alias(_))),
        );
        blocks
    }

    /// Every mirrored metadata block in use (entries, indirect blocks, alias
    /// blocks, templates, attributes).
    pub(super) fn metadata_blocks(&self) -> Vec<Dirty> {
        let mut blocks: Vec<Dirty> = Vec::new();
        for (number, rec) in &self.files {
            blocks.push(Dirty::Entry(*number));
            let indirect = indirect_blocks(rec.extents.len() as u64);
            blocks.extend((0..indirect).map(|block| Dirty::Indirect {
                file: *number,
                block,
            }));
        }
        let alias_blocks: BTreeSet<u64> =
            self.names.records().map(|r| alias_block_of(r.id)).collect();
        blocks.extend(alias_blocks.into_iter().map(Dirty::Alias));
        blocks.push(Dirty::Templates);
        blocks.push(Dirty::Attributes);
        blocks
    }
}

/// Copy a batch of stale AUs from good copies to the stale ones, under the
/// extents' exclusive latches (so no write lands between the read of the
/// good copy and the clearing of the bit), which it returns held. Returns
/// the AUs now good on their stale copy (copied, or of an extent never
/// written); a copy whose write failed is left stale (its disk goes
/// offline).
pub(super) fn copy_stale(
    port: &mut dyn DataPort,
    slot: Option<&std::sync::atomic::AtomicU64>,
    batch: &[StaleAu],
    inflight: usize,
    report: &mut ResyncReport,
) -> Result<(Vec<StaleAu>, LatchGuard), GroupError> {
    let keys: Vec<(LatchKey, Hold)> = batch
        .iter()
        .map(|s| ((s.file, s.incarnation, s.extent), Hold::Exclusive))
        .collect();
    let latch = port.plane().latch(keys);
    // As every data operation: AUs freed after the snapshots below are not
    // handed to another file while this copy may still write them.
    let guard = slot.map(|s| OperationGuard::start(port.plane(), s));
    let view = port.disk_view();
    let mut done = Vec::new();
    let (pieces, au_bytes) = stale_pieces(port, &view, batch, report, &mut done);
    let place = |c: AuAddr, s: &StaleAu, off: u64| (u64::from(c.au) + s.au) * au_bytes + off;
    let ios: Vec<data::CopyIo> = pieces
        .iter()
        .map(|(s, src, off, len)| data::CopyIo {
            from: (src.disk, place(*src, s, *off)),
            to: (s.target.disk, place(s.target, s, *off)),
            len: *len,
        })
        .collect();
    let mut pool = Vec::new();
    let outcomes = data::copy(port, &ios, inflight, &mut pool)?;
    for buf in pool {
        port.recycle(buf);
    }
    // An AU is known by its stale copy, not only by (file, extent, AU):
    // with three copies two may be stale at once, each copied and cleared
    // on its own (one whose piece failed keeps its bit, the other not).
    let key = |s: &StaleAu| (s.file, s.extent, s.au, s.target);
    let mut failed_read = BTreeSet::new();
    let mut failed_write = BTreeSet::new();
    let mut failed_disks = data::FailedDisks::new();
    let mut bytes = 0;
    for ((s, _, _, len), outcome) in pieces.iter().zip(outcomes) {
        match outcome {
            data::Copied::Done => bytes += len,
            data::Copied::ReadFailed => {
                if failed_read.insert(key(s)) {
                    *report.unread.entry(s.target.disk).or_default() += 1;
                    report.aus_without_source.push(format!(
                        "file {} extent {} AU {} on disk {}: its good copy could not be read",
                        s.file,
                        s.extent,
                        s.au,
                        view.name(s.target.disk)
                    ));
                }
            }
            data::Copied::WriteFailed => {
                failed_disks
                    .entry(s.target.disk)
                    .or_insert_with(|| "a resync's write to it failed".to_string());
                failed_write.insert(key(s));
            }
        }
    }
    drop(guard);
    report.bytes_copied += bytes;
    let mut seen = BTreeSet::new();
    for (s, _, _, _) in &pieces {
        let k = key(s);
        if failed_read.contains(&k) || failed_write.contains(&k) || !seen.insert(k) {
            continue;
        }
        report.aus_copied += 1;
        done.push(*s);
    }
    if !failed_disks.is_empty() {
        port.disks_failed(&failed_disks, view.epoch)?;
    }
    Ok((done, latch))
}

/// The pieces that copy each AU of `batch` from a good copy, as (stale
/// AU, source, offset in the AU, length), and the AU size; an AU of an
/// extent never written goes to `done` at once. An AU that is no longer
/// stale, or whose disk cannot be written now, is left; one without a good
/// copy to read is reported.
fn stale_pieces(
    port: &mut dyn DataPort,
    view: &crate::group::plane::DiskView,
    batch: &[StaleAu],
    report: &mut ResyncReport,
    done: &mut Vec<StaleAu>,
) -> (Vec<(StaleAu, AuAddr, u64, u64)>, u64) {
    // (stale AU, source, offset in the AU, length)
    let mut pieces: Vec<(StaleAu, AuAddr, u64, u64)> = Vec::new();
    let mut au_bytes = 0;
    for s in batch {
        let Some(snap) = port
            .snapshot(s.file)
            .filter(|f| f.incarnation == s.incarnation)
        else {
            continue;
        };
        let Some(ext) = snap.extent(s.extent) else {
            continue;
        };
        let Some(slot) = ext.copies().iter().position(|c| *c == s.target) else {
            continue;
        };
        if ext.stale[slot] & (1 << s.au) == 0 || !view.is_writable(s.target.disk) {
            continue;
        }
        if !ext.initialized {
            report.aus_cleared_unwritten += 1;
            done.push(*s);
            continue;
        }
        let source = ext
            .copies()
            .iter()
            .enumerate()
            .find(|(k, c)| {
                *k != slot && view.is_online(c.disk) && !ext.stale_in(*k, s.au..s.au + 1)
            })
            .map(|(_, c)| *c);
        let Some(source) = source else {
            *report.unread.entry(s.target.disk).or_default() += 1;
            report.aus_without_source.push(format!(
                "file {} extent {} AU {} on disk {}",
                s.file,
                s.extent,
                s.au,
                view.name(s.target.disk)
            ));
            continue;
        };
        au_bytes = snap.au_bytes;
        pieces.extend(au_pieces(snap.au_bytes).map(|(off, len)| (*s, source, off, len)));
    }
    (pieces, au_bytes)
}
