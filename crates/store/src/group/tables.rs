//! The allocation tables at group level: loading, verifying and rebuilding
//! them at mount, allocating and freeing extents (placement, then AU runs),
//! and the AUs that more than one extent map claims.

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group::{
    au_mask, is_map_number, AtLayout, AuAddr, Extent, AT_COUNTS_PER_SUMMARY,
};
use cairn_format::meta::{BlockType, MetaError, BLOCK_BYTES};
use cairn_format::{group as fmt, meta};

use super::alloc::DiskAlloc;
use super::block_ids::per_disk_id;
use super::discard_queue::DiscardRun;
use super::error::{corrupt, GroupError};
use super::limits::TABLE_READ_BLOCKS_MAX;
use super::mount_report::MountReport;
use super::mounted::Group;
use super::parts::damage::LostBlock;
use super::parts::members::Member;
use super::plane;
use crate::placement;
use crate::placement::{DiskNumber, DiskSpace, FailGroupId};

/// Where one copy's AUs come from ([`Group::place_extent`]).
enum Source {
    Free(u32),
    Quarantined { start: u32, readers: u64 },
    Discarding(DiscardRun),
}

impl Group<'_> {
    /// The disks new copies go to first: ONLINE (read and written), not
    /// leaving.
    pub(super) fn disk_spaces(&self) -> Vec<DiskSpace> {
        self.spaces_where(|m| m.online().is_some())
    }

    /// The disks that take a copy the others cannot (a failure group
    /// missing): not read now (SYNCING, OFFLINE), not leaving. A copy
    /// there is restored when the disk is read again: by the resync at
    /// `online` (an OFFLINE disk's copy is recorded stale at once,
    /// [`Group::record_missing_copies`]; a SYNCING disk's is written by
    /// every write), or by the rebuild when the disk is dropped
    /// (`docs/lifecycle.md`, "Allocating with a failure group missing").
    fn away_spaces(&self) -> Vec<DiskSpace> {
        self.spaces_where(|m| m.online().is_none())
    }

    fn spaces_where(&self, pick: impl Fn(&Member) -> bool) -> Vec<DiskSpace> {
        self.members
            .iter()
            .filter_map(|m| {
                // Nothing new lands on a disk that is leaving.
                if !m.receives_copies() || !pick(m) {
                    return None;
                }
                let table = m.table()?;
                Some(DiskSpace {
                    disk: DiskNumber(m.entry.number),
                    failgroup: FailGroupId(m.entry.failgroup_id),
                    // A pending shrink's cut is the end placement sees.
                    au_total: table.capacity_aus(),
                    au_used: table.capacity_aus() - table.free_aus(),
                })
            })
            .collect()
    }

    /// Allocate extent `index` of a file with `copies` copies: choose disks
    /// (placement) and AU runs (allocator).
    pub(super) fn allocate_extent(
        &mut self,
        copies: usize,
        index: u64,
    ) -> Result<Extent, GroupError> {
        match self.place_extent(copies, index, false) {
            // Freed runs may have come free of readers since the last
            // commit: give them back, and try once more.
            Err(GroupError::NoSpace(_)) if !self.read_only => {
                self.release_free_of_readers()?;
                // Space needed now comes before giving it back to the
                // array: runs still waiting for their discard are taken
                // back, unmarked (returnable).
                self.take_back_discards();
                if self.waits_for_checkpoint() {
                    // Freed indirect AUs wait for the ring to move past
                    // the records that target them: move it now.
                    self.checkpoint()?;
                    self.release_free_of_readers()?;
                    self.take_back_discards();
                }
                self.place_extent(copies, index, false)
            }
            other => other,
        }
    }

    /// Allocate data extent `index` of a file with `copies` copies, as
    /// [`Self::allocate_extent`]; when no space is free now, behind a live
    /// group, lend freed space that is held only for a while: a run a data
    /// operation older than its free may still use, or one whose discard
    /// is in flight (`docs/live-core.md`, "Freed space is lent"). Only a
    /// data extent may be lent space: it is unwritten, so nothing touches
    /// its AUs before its first write, which goes through the data path
    /// and waits there, never under `meta`, for what still holds them. (The
    /// metadata plane writes its own files' AUs under `meta`: those take
    /// space free now.)
    pub(super) fn allocate_data_extent(
        &mut self,
        copies: usize,
        index: u64,
    ) -> Result<Extent, GroupError> {
        match self.allocate_extent(copies, index) {
            // The first refusal says why: the one a group without lending
            // gives.
            Err(GroupError::NoSpace(why)) if self.live && !self.read_only => self
                .place_extent(copies, index, true)
                .map_err(|_| GroupError::NoSpace(why)),
            other => other,
        }
    }

    /// Choose disks for extent `index` with `copies` copies (placement) and
    /// a run of AUs on each. Each copy takes a run free now; with `lend`
    /// ([`Self::allocate_data_extent`]), on a disk with none, a run lent
    /// instead, and only disks in service are placed on. A copy's source
    /// is settled on every disk before any lent run is taken (a run free
    /// now is taken at once, and given back if another disk is short); the
    /// lent runs are registered with the data plane before the commit that
    /// publishes the extent.
    fn place_extent(
        &mut self,
        copies: usize,
        index: u64,
        lend: bool,
    ) -> Result<Extent, GroupError> {
        let mut in_service = self.disk_spaces();
        let mut away = if lend { Vec::new() } else { self.away_spaces() };
        let aus = placement::extent_aus(index);
        let ring = self.journal.generation();
        let queue = self.discards.clone().filter(|_| lend);
        for _attempt in 0..(in_service.len() + away.len()).max(1) {
            let disks = placement::place_with_away(&in_service, &away, copies, index)
                .map_err(|e| GroupError::NoSpace(e.to_string()))?;
            let (plan, short) = self.copy_sources(&disks, aus, (lend, ring), queue.as_deref());
            if let Some(full) = short {
                // Fragmented: no run of `aus` there. Undo, and let placement
                // see that disk as full.
                for (disk, source) in plan {
                    if let Source::Free(au) = source {
                        self.member_mut(disk)
                            .and_then(Member::table_mut)
                            .expect("invariant: allocated from it")
                            .mark(u64::from(au), aus, false);
                    }
                }
                for s in in_service.iter_mut().chain(away.iter_mut()) {
                    if s.disk.0 == full {
                        s.au_used = s.au_total;
                    }
                }
                continue;
            }
            let got = self.take_sources(plan, aus, queue.as_deref());
            return Ok(Extent::new(&got, false));
        }
        Err(GroupError::NoSpace(format!(
            "no space: no run of {aus} free AUs on enough failure groups"
        )))
    }

    /// Where each copy of an extent of `aus` AUs on `disks` comes from: a
    /// run free now (taken at once); with `lend`, on a disk with none, a
    /// run lent (quarantined since journal ring `ring`, or being discarded
    /// from `queue`). With the first disk that has none, if one is short.
    fn copy_sources(
        &mut self,
        disks: &[crate::placement::DiskNumber],
        aus: u64,
        (lend, ring): (bool, u64),
        queue: Option<&super::discard_queue::DiscardQueue>,
    ) -> (Vec<(u16, Source)>, Option<u16>) {
        let mut plan = Vec::with_capacity(disks.len());
        for d in disks {
            let table = self
                .member_mut(d.0)
                .and_then(Member::table_mut)
                .expect("invariant: placement picks disks with a table");
            let source = match table.allocate(aus) {
                Some(au) => Some(Source::Free(au)),
                None if !lend => None,
                None => match table.lendable(aus, ring) {
                    Some((start, readers)) => Some(Source::Quarantined { start, readers }),
                    None => queue
                        .and_then(|q| q.lendable(d.0, aus, |r| table.reserves((r.start, r.len))))
                        .map(Source::Discarding),
                },
            };
            match source {
                Some(s) => plan.push((d.0, s)),
                None => return (plan, Some(d.0)),
            }
        }
        (plan, None)
    }

    /// Take the runs `plan` chose: a lent one from its table (and from
    /// `queue`, a run being discarded), registered with the data plane.
    fn take_sources(
        &mut self,
        plan: Vec<(u16, Source)>,
        aus: u64,
        queue: Option<&super::discard_queue::DiscardQueue>,
    ) -> Vec<AuAddr> {
        let mut got = Vec::with_capacity(plan.len());
        for (disk, source) in plan {
            let table = self
                .member_mut(disk)
                .and_then(Member::table_mut)
                .expect("invariant: placed there");
            let au = match source {
                Source::Free(au) => au,
                Source::Quarantined { start, readers } => {
                    table.lend_quarantined(start, aus);
                    self.plane.lend(plane::LentRun {
                        disk,
                        start,
                        len: aus as u32,
                        readers,
                        discard: None,
                    });
                    start
                }
                Source::Discarding(run) => {
                    table.lend_reserved((run.start, run.len), run.start, aus);
                    let over = queue
                        .expect("invariant: lendable came from the queue")
                        .lend(run, aus);
                    self.plane.lend(plane::LentRun {
                        disk,
                        start: run.start,
                        len: aus as u32,
                        readers: 0,
                        discard: Some(over),
                    });
                    run.start
                }
            };
            got.push(AuAddr { disk, au });
        }
        got
    }

    /// A new extent of a file's data: its copies on OFFLINE disks are
    /// recorded stale whole, in the map that first names them. A copy that
    /// was never written is then never read (the extent reads as zeros
    /// until written; after that its other copies serve it), no first
    /// write needs a commit of its own to mark it, and the resync at
    /// `online` clears it (without I/O while the extent is unwritten) or
    /// copies it. Metadata files' copies are not marked: the resync
    /// refreshes them block by block. A SYNCING disk's copy is written by
    /// every write, and needs no mark.
    pub(super) fn record_missing_copies(&self, extent: &mut Extent, index: u64) {
        let aus = placement::extent_aus(index);
        for slot in 0..extent.copies().len() {
            let disk = extent.copies()[slot].disk;
            if self.member(disk).and_then(Member::writable).is_none() {
                extent.stale[slot] |= au_mask(0..aus);
            }
        }
    }

    /// Free the AUs of extent `index` (or an indirect AU, `journaled`: the
    /// journal ring may still hold records that target it, as it may for
    /// any extent of a checksum map) of file `file`. An
    /// AU another extent map also claims (damage found at mount) stays used,
    /// for the other owner, instead of being freed under it.
    pub(super) fn free_extent(&mut self, file: u32, extent: &Extent, index: u64, journaled: bool) {
        // A checksum map's blocks are written through the journal too.
        let journaled = journaled || is_map_number(file);
        let ring = journaled.then_some(self.journal.generation());
        let aus = placement::extent_aus(index) as u32;
        for c in extent.copies() {
            let run = u64::from(c.au)..u64::from(c.au) + u64::from(aus);
            let shared = self.damage.release(c.disk, run.clone(), file);
            // An OFFLINE disk's run goes back to the maps' table it keeps
            // while away, held back from reuse as any freed run.
            let Some(alloc) = self.member_mut(c.disk).and_then(Member::table_mut) else {
                continue;
            };
            let mut free = |start: u32, len: u32| match ring {
                Some(g) => alloc.free_journaled(start, len, g),
                None => alloc.free(start, len),
            };
            if shared.is_empty() {
                free(c.au, aus);
                continue;
            }
            for au in run.filter(|a| !shared.contains(a)) {
                free(au as u32, 1);
            }
        }
    }

    /// Refuse to change file `number` while it claims an AU another file
    /// also claims: a write to one would land in the other.
    pub(super) fn refuse_if_sharing(&self, number: u32) -> Result<(), GroupError> {
        if self.damage.is_lost(LostBlock::Map(number)) {
            return Err(GroupError::Lost(format!(
                "{} has a damaged extent map, so it is not written; `cairn group check {} --repair` cuts it where its map ends, then it can be",
                self.path_of(number),
                self.name
            )));
        }
        let Some(((disk, au), owners)) = self.damage.sharing(number) else {
            return Ok(());
        };
        let others: Vec<String> = owners
            .iter()
            .filter(|o| **o != number)
            .map(|o| self.path_of(*o))
            .collect();
        Err(GroupError::Corrupt(format!(
            "{} shares AU {au} of disk {} with {}: an extent map is damaged, so a write to one would land in the other; copy out what you need (`cairn cp`), then remove the damaged file with `cairn rm`",
            self.path_of(number),
            self.disk_name(*disk),
            if others.is_empty() {
                "itself".to_string()
            } else {
                others.join(", ")
            }
        )))
    }

    pub(super) fn load_tables(&mut self, report: &mut MountReport) -> Result<(), GroupError> {
        for n in self.members.numbers() {
            let Some(m) = self.member(n) else { continue };
            if m.writable().is_none() || self.tables_to_rebuild.contains(&n) {
                continue;
            }
            let (layout, limit) = m
                .alloc
                .as_ref()
                .map(|a| (a.layout, a.limit()))
                .expect("invariant: online");
            let mut alloc = DiskAlloc::with_limit(layout, limit);
            // The whole table in a few large reads: it is one contiguous
            // region, and most of it is never written (blank = all free).
            let blocks = layout.summary_blocks + layout.bitmap_blocks;
            let mut stored_summary: Vec<Vec<u32>> = Vec::new();
            let mut unreadable: Option<String> = None;
            let mut index = 0u64;
            while index < blocks {
                let count = (blocks - index).min(TABLE_READ_BLOCKS_MAX);
                let offset = fmt::AT_START_BYTES + index * BLOCK_BYTES as u64;
                let data = match self.read_one(n, offset, (count as usize) * BLOCK_BYTES) {
                    Ok(d) => d,
                    Err(e) => {
                        unreadable = Some(e.to_string());
                        break;
                    }
                };
                for (k, block) in data.chunks_exact(BLOCK_BYTES).enumerate() {
                    let at = index + k as u64;
                    let block_offset = fmt::AT_START_BYTES + at * BLOCK_BYTES as u64;
                    if at < layout.summary_blocks {
                        let id = per_disk_id(BlockType::AtSummary, n, block_offset);
                        // A bad summary is only a bad count: recomputed below.
                        stored_summary.push(match meta::open(block, id, self.uuid) {
                            Ok(_) => fmt::decode_summary(block),
                            Err(MetaError::Blank) => vec![0; AT_COUNTS_PER_SUMMARY as usize],
                            Err(_) => vec![u32::MAX; AT_COUNTS_PER_SUMMARY as usize],
                        });
                        continue;
                    }
                    let bitmap = at - layout.summary_blocks;
                    match meta::open(
                        block,
                        per_disk_id(BlockType::AtBitmap, n, block_offset),
                        self.uuid,
                    ) {
                        Ok(_) => {
                            for p in alloc.load_bitmap(bitmap, &fmt::decode_bitmap(block)) {
                                report.warnings.push(format!("{}: {p}", self.disk_name(n)));
                            }
                        }
                        Err(MetaError::Blank) => {}
                        Err(e) => {
                            unreadable.get_or_insert(format!("bitmap block {bitmap}: {e}"));
                        }
                    }
                }
                index += count;
            }
            if layout.has_clean_map() {
                self.load_clean_map(n, &mut alloc);
            }
            if let Some(e) = unreadable {
                // The table is derived data: rebuild it from the extent maps.
                report.warnings.push(format!(
                    "{}: allocation table unreadable ({e}); rebuilt from the extent maps",
                    self.disk_name(n)
                ));
                self.tables_to_rebuild.push(n);
            } else {
                for (i, stored) in stored_summary.iter().enumerate() {
                    if let Some(p) = alloc.check_summary(i as u64, stored) {
                        report.warnings.push(format!(
                            "{}: {p}; {}",
                            self.disk_name(n),
                            if self.read_only {
                                "the next command that writes rewrites it"
                            } else {
                                "rewritten"
                            }
                        ));
                    }
                }
            }
            if let Some(m) = self.member_mut(n) {
                m.alloc = Some(alloc);
            }
        }
        Ok(())
    }

    /// Read disk `n`'s discard map into `alloc` (its bitmap loaded). The
    /// map is a hint that only ever makes a reclaim skip an AU: a block
    /// that cannot be read, or fails its checks, counts as empty (every
    /// free AU it covers is returnable), and the mount goes on.
    fn load_clean_map(&mut self, n: u16, alloc: &mut DiskAlloc) {
        let layout = alloc.layout;
        let blocks = layout.bitmap_blocks;
        // One region: block i lies i+1 blocks below the first data AU.
        let low = layout.clean_offset_bytes(blocks - 1);
        let Ok(data) = self.read_one(n, low, blocks as usize * BLOCK_BYTES) else {
            return;
        };
        for index in 0..blocks {
            let offset = layout.clean_offset_bytes(index);
            let at = ((offset - low) as usize) / BLOCK_BYTES;
            let block = &data[at * BLOCK_BYTES..(at + 1) * BLOCK_BYTES];
            if meta::open(block, per_disk_id(BlockType::AtClean, n, offset), self.uuid).is_ok() {
                alloc.load_clean(index, &fmt::decode_bitmap(block));
            }
        }
    }

    /// Every AU run the extent maps name, with its owner.
    pub(super) fn owned_runs(&self) -> Vec<OwnedRun> {
        let mut out = Vec::new();
        for (number, rec) in &self.files {
            let extents = rec
                .extents
                .iter()
                .enumerate()
                .map(|(i, e)| (e, i as u64, false));
            let pointers = rec
                .entry
                .indirect
                .iter()
                .enumerate()
                .map(|(i, e)| (e, i as u64, true));
            for (extent, index, indirect) in extents.chain(pointers) {
                let len = if indirect {
                    1
                } else {
                    placement::extent_aus(index)
                };
                for (copy, c) in extent.copies().iter().enumerate() {
                    out.push(OwnedRun {
                        disk: c.disk,
                        au: u64::from(c.au),
                        len,
                        file: *number,
                        index,
                        indirect,
                        copy,
                    });
                }
            }
        }
        out
    }

    /// Every AU a file owns must be a data AU marked used on its disk. A table
    /// that calls an owned AU free (a zeroed bitmap block reads as "all free")
    /// would hand it out twice: rebuild it. An AU outside the disk's data area
    /// is damage no rebuild can explain.
    pub(super) fn verify_tables(&mut self, report: &mut MountReport) -> Result<(), GroupError> {
        let mut stale = BTreeSet::new();
        let runs = self.owned_runs();
        self.damage.set_shared(shared_aus(&runs));
        for run in runs {
            let Some(m) = self.member(run.disk) else {
                return Err(corrupt(format!(
                    "{}: on disk {}, which is not in the group",
                    run.describe(),
                    run.disk
                )));
            };
            let Some(alloc) = m.alloc.as_ref() else {
                continue;
            };
            let layout = alloc.layout;
            if run.au < layout.first_data_au || run.au + run.len > layout.au_count {
                return Err(corrupt(format!(
                    "{}: AUs {}..{} lie outside disk {}'s data AUs {}..{}",
                    run.describe(),
                    run.au,
                    run.au + run.len,
                    m.entry.label,
                    layout.first_data_au,
                    layout.au_count
                )));
            }
            if (run.au..run.au + run.len).any(|a| !alloc.is_used(a))
                && !self.tables_to_rebuild.contains(&run.disk)
            {
                stale.insert(run.disk);
            }
        }
        for disk in stale {
            report.warnings.push(format!(
                "{}: allocation table marks AUs free that files own; rebuilt from the extent maps",
                self.disk_name(disk)
            ));
            self.tables_to_rebuild.push(disk);
        }
        Ok(())
    }

    /// Give every member that is not written (OFFLINE, or missing) the
    /// table the extent maps give it ([`Member::away`]), with the
    /// relocation targets parked on it still held. At mount, after the maps
    /// are loaded and before anything frees or allocates.
    ///
    /// A disk this mount took offline already has an away table, and it is
    /// not the maps': one taken offline during replay carries the blank
    /// table made before `load_tables` (every AU free), one taken offline
    /// later its stored table, never checked against the maps
    /// (`verify_tables` checks written disks only). Either would free an
    /// AU twice or hand one out that a copy holds: it is built again from
    /// the maps, keeping what it held back.
    pub(super) fn build_away_tables(&mut self) {
        let owned = self.owned_runs();
        for n in self.members.numbers() {
            let Some(m) = self.member(n) else { continue };
            if m.alloc.is_some() {
                continue;
            }
            let Some(layout) = AtLayout::for_disk(m.entry.size_bytes, self.au_bytes) else {
                continue;
            };
            let mut table = table_from_maps(&owned, n, layout, m.entry.au_count);
            table.keep_reservations(m.parked.clone());
            if let Some(before) = m.away.as_ref() {
                table.keep_quarantine(before);
            }
            table.take_dirty();
            if let Some(m) = self.member_mut(n) {
                m.away = Some(table);
            }
        }
    }

    /// Rebuild the allocation tables `load_tables` could not read: every AU an
    /// extent map names is used, every other data AU free.
    pub(super) fn rebuild_tables(&mut self) -> Result<(), GroupError> {
        let disks = std::mem::take(&mut self.tables_to_rebuild);
        if disks.is_empty() {
            return Ok(());
        }
        let owned = self.owned_runs();
        for n in disks {
            let Some(alloc) = self.member_mut(n).and_then(|m| m.alloc.as_mut()) else {
                continue;
            };
            let mut fresh = table_from_maps(&owned, n, alloc.layout, alloc.limit());
            fresh.keep_reservations(alloc.reservations());
            fresh.keep_quarantine(alloc);
            fresh.keep_clean(alloc);
            fresh.mark_all_dirty();
            *alloc = fresh;
        }
        if self.read_only {
            // Rebuilt in memory for this look; a writer rewrites it.
            return Ok(());
        }
        self.commit_in_chunks()
    }
}

/// Disk `disk`'s table as the extent maps say: every AU a map names used
/// (once, even if named twice: damage the checker reports), every other
/// data AU free; nothing at or past `limit` handed out.
fn table_from_maps(owned: &[OwnedRun], disk: u16, layout: AtLayout, limit: u64) -> DiskAlloc {
    let mut table = DiskAlloc::with_limit(layout, limit);
    let range = layout.first_data_au..layout.au_count;
    for run in owned.iter().filter(|o| o.disk == disk) {
        for a in (run.au..run.au + run.len).filter(|a| range.contains(a)) {
            if !table.is_used(a) {
                table.mark(a, 1, true);
            }
        }
    }
    table
}

/// An AU run an extent map names: whose it is, for messages.
#[derive(Debug, Clone, Copy)]
pub(super) struct OwnedRun {
    pub disk: u16,
    pub au: u64,
    pub len: u64,
    pub file: u32,
    /// Extent index, or indirect pointer index when `indirect`.
    pub index: u64,
    pub indirect: bool,
    pub copy: usize,
}

impl OwnedRun {
    pub fn describe(&self) -> String {
        let file = if cairn_format::group::is_map_number(self.file) {
            format!(
                "the checksum map of file {}",
                cairn_format::group::mapped_file(self.file)
            )
        } else {
            format!("file {}", self.file)
        };
        if self.indirect {
            format!("{file} indirect AU {} copy {}", self.index, self.copy)
        } else {
            format!("{file} extent {} copy {}", self.index, self.copy)
        }
    }
}

/// The AUs more than one run claims, each with the file of every claim (a
/// file that claims an AU twice is listed twice). A sweep over the runs
/// sorted by start finds the overlaps; only their AUs are then counted.
pub(super) fn shared_aus(runs: &[OwnedRun]) -> BTreeMap<(u16, u64), Vec<u32>> {
    let mut sorted: Vec<&OwnedRun> = runs.iter().collect();
    sorted.sort_by_key(|r| (r.disk, r.au, r.au + r.len));
    let mut overlapping: BTreeSet<(u16, u64)> = BTreeSet::new();
    // Runs on the current disk that may still overlap what comes next.
    let mut open: Vec<&OwnedRun> = Vec::new();
    for run in sorted {
        open.retain(|o| o.disk == run.disk && o.au + o.len > run.au);
        for o in &open {
            let end = (o.au + o.len).min(run.au + run.len);
            overlapping.extend((run.au..end).map(|au| (run.disk, au)));
        }
        open.push(run);
    }
    let mut shared: BTreeMap<(u16, u64), Vec<u32>> = BTreeMap::new();
    if overlapping.is_empty() {
        return shared;
    }
    for run in runs {
        for au in overlapping
            .range((run.disk, run.au)..(run.disk, run.au + run.len))
            .map(|(_, au)| *au)
        {
            shared.entry((run.disk, au)).or_default().push(run.file);
        }
    }
    shared
}
