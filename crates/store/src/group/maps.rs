//! Checksum maps (`docs/checksums.md`, "Where the checksums live"): a file
//! with checksums has a companion, its map — a file of its own, numbered
//! `map_number(n)` in memory, whose entry is block *n* of the checksum
//! directory (metadata file 7). The map is made, resized and deleted with
//! its data file, in the same transactions, so that a crash never leaves
//! one without the other; moves (resync, relocation, rebalance, compaction)
//! need nothing here, since a map is a file like any other.
//!
//! The rules, kept here and nowhere else:
//! - a map has its data file's incarnation, copies and state (changed for
//!   both by [`Group::set_file_state`]), coarse striping, no template, no
//!   attributes;
//! - a settled map holds [`Group::map_bytes`] of its file's size;
//! - a delete takes the map first, so a crash leaves a file without its map
//!   (one being deleted) and never a map without its file; so does the
//!   repair of a lost entry ([`Group::free_lost_entry`]), and a mount does
//!   not load a map whose file is gone or of another incarnation (it writes
//!   the entry free: `mount.rs` `load_checksum_maps`).

use cairn_format::extent_map::extent_aus;
use cairn_format::group::{
    au_mask, is_user_number, map_blocks, map_number, map_place, AuAddr, FileEntry, FileState,
    MapSums, FILE_CHECKSUM_DIRECTORY, FILE_CHECKSUM_LOG, FILE_NUMBER_USER_MIN,
    GROUP_RO_COMPAT_CHECKSUM_LOG, GROUP_RO_COMPAT_DATA_CHECKSUMS, STRIPING_COARSE,
};
use cairn_format::meta::BLOCK_BYTES;

use super::data::MapBlock;
use super::data::{self, aus_touched, StaleMark};
use super::error::GroupError;
use super::limits::STEP_DIRTY_MAX;
use super::mounted::Group;
use super::parts::damage::LostBlock;
use super::parts::files::{placeholder_entry, FileRec};
use super::parts::members::Member;
use super::parts::txn::Dirty;
use super::sums::{FileSums, NotLoaded};
use std::sync::Arc;

impl Group<'_> {
    /// Whether data file `number` has a checksum map (a map has none).
    pub(super) fn has_map(&self, number: u32) -> bool {
        is_user_number(number) && self.files.contains(map_number(number))
    }

    /// Bytes of the checksum map of a file of `size_bytes`: whole map
    /// blocks, one checksum per sector.
    pub(super) fn map_bytes(&self, size_bytes: u64) -> u64 {
        map_blocks(size_bytes, self.sector_bytes) * BLOCK_BYTES as u64
    }

    /// Set file `number`'s state and its map's, both entries marked: one
    /// transaction records both or neither.
    pub(super) fn set_file_state(&mut self, number: u32, state: FileState) {
        for n in [number, map_number(number)] {
            if let Some(entry) = self.files.entry_mut(n) {
                entry.state = state;
                self.txn.mark(Dirty::Entry(n));
            }
        }
    }

    /// Give data file `number` (just inserted, `Creating`, empty) a map:
    /// the checksum directory ([`Self::ensure_checksum_directory`], called
    /// first, before the create changed anything) is grown to hold the
    /// map's entry. The map is empty; [`Self::grow_extents`] of
    /// `map_number(number)` to [`Self::map_bytes`] gives it its blocks.
    /// Marked, not committed: the caller commits it with the file.
    pub(super) fn add_map(&mut self, number: u32) -> Result<(), GroupError> {
        debug_assert!(number >= FILE_NUMBER_USER_MIN, "maps are of user files");
        while u64::from(number)
            >= self.files[&FILE_CHECKSUM_DIRECTORY].extents.len() as u64 * self.blocks_per_au()
        {
            self.grow_metadata_file(FILE_CHECKSUM_DIRECTORY)?;
        }
        let data = &self.files[&number].entry;
        let entry = FileEntry {
            number: map_number(number),
            incarnation: data.incarnation,
            state: data.state,
            copies: data.copies,
            striping: STRIPING_COARSE,
            size_bytes: 0,
            extent_count: 0,
            target_bytes: self.map_bytes(data.target_bytes.max(data.size_bytes)),
            created_unix_seconds: data.created_unix_seconds,
            modified_unix_seconds: data.modified_unix_seconds,
            template: String::new(),
            attrs: None,
            direct: Vec::new(),
            indirect: Vec::new(),
        };
        self.files.insert(FileRec {
            entry,
            extents: Vec::new(),
        });
        self.txn.mark(Dirty::Entry(map_number(number)));
        Ok(())
    }

    /// Grow file `number`'s map, if it has one, to hold the checksums of
    /// `size_bytes`, committing in steps (as the file's own grow does).
    pub(super) fn grow_map(&mut self, number: u32, size_bytes: u64) -> Result<(), GroupError> {
        if self.has_map(number) {
            self.grow_extents(map_number(number), self.map_bytes(size_bytes))?;
        }
        Ok(())
    }

    /// Free the extents of file `number`'s map past what `size_bytes`
    /// needs, committing in steps.
    pub(super) fn trim_map(&mut self, number: u32, size_bytes: u64) -> Result<(), GroupError> {
        let map = map_number(number);
        if let Some(rec) = self.files.get(map) {
            let keep = self
                .layout_for(rec)
                .extent_count_for(self.map_bytes(size_bytes));
            self.trim_extents(map, keep)?;
        }
        Ok(())
    }

    /// Set file `number`'s map's size (and target) to what `size_bytes`
    /// needs; marked with the caller's change of the file's.
    pub(super) fn size_map(&mut self, number: u32, size_bytes: u64, target_bytes: u64) {
        let (size, target) = (self.map_bytes(size_bytes), self.map_bytes(target_bytes));
        let map = map_number(number);
        if let Some(entry) = self.files.entry_mut(map) {
            entry.size_bytes = size;
            entry.target_bytes = if target_bytes == 0 { 0 } else { target };
            self.txn.mark(Dirty::Entry(map));
        }
    }

    /// Delete file `number`'s map, if it has one: its extents freed, its
    /// entry written free, committed. The first step of a delete.
    pub(super) fn remove_map(&mut self, number: u32) -> Result<(), GroupError> {
        let map = map_number(number);
        if !self.files.contains(map) {
            return Ok(());
        }
        self.trim_extents(map, 0)?;
        self.files.remove(map);
        self.damage.file_removed(map);
        self.txn.mark(Dirty::Entry(map));
        self.commit()
    }

    /// Write free the lost entry of data file `number` (`remove`, an
    /// unlink, `check --repair`), its map deleted first and committed: a
    /// crash between the two then leaves the lost entry without its map,
    /// never a map whose file's number is free for another file.
    pub(super) fn free_lost_entry(&mut self, number: u32) -> Result<(), GroupError> {
        if self.damage.is_lost(LostBlock::Entry(number)) {
            self.remove_map(number)?;
        }
        if self.damage.rewritten(LostBlock::Entry(number)) {
            self.txn.mark(Dirty::Entry(number));
        }
        Ok(())
    }

    /// Write every changed block of every file's checksums
    /// (`docs/checksums.md`, "Writes", step 4), through the journal, and
    /// start the checksum log again after them. The log's writer is held
    /// throughout, so no record is written between the blocks taken and
    /// the log's header naming the checkpoint's record:
    /// 1. the running transaction is committed: every map block this
    ///    checkpoint seals has a journal sequence at or above `maps_from`;
    /// 2. the blocks are taken at one instant with the units the log had
    ///    not named ([`FileSums::take_dirty`]: what ended writes left),
    ///    and every disk is flushed: those writes are durable, and the log
    ///    forgets them;
    /// 3. the checkpoint's record (naming the regions, and `maps_from`);
    /// 4. the blocks, committed in steps;
    /// 5. the header, naming the record as the ring's start;
    /// 6. `closing` only: a record naming no region.
    ///
    /// A crash anywhere leaves the maps and the log in an order recovery
    /// reads (a block sealed at or above `maps_from` is newer than the
    /// records before the checkpoint's record, older than those after).
    /// A block whose step fails is marked changed again, its units given
    /// back to the log, and the error returned. `closing`: no write runs
    /// (a mount before any, a dismount): once the header is written the
    /// regions leave the set and a record says so (step 6), so a mount
    /// after a clean dismount has none to scan; until then the
    /// checkpoint's record names them, as the units of writes no record
    /// named are vouched for only by their regions until their map blocks
    /// are durable.
    pub(super) fn checkpoint_maps(&mut self) -> Result<(), GroupError> {
        self.checkpoint_maps_as(false)
    }

    /// [`Self::checkpoint_maps`] when no write can run: the log names no
    /// region after it.
    pub(super) fn close_checksum_log(&mut self) -> Result<(), GroupError> {
        self.checkpoint_maps_as(true)
    }

    fn checkpoint_maps_as(&mut self, closing: bool) -> Result<(), GroupError> {
        if self.read_only || !self.plane.sums_log().has_log() {
            return Ok(());
        }
        let log = self.plane.sums_log().clone();
        let mut lock = log.lock();
        self.commit_now()?;
        let maps_from = self.journal.next_seq();
        let mut taken: Vec<Taken> = self
            .plane
            .all_sums()
            .into_iter()
            .map(|(file, sums)| {
                let blocks = sums.take_dirty();
                (file, sums, blocks)
            })
            .collect();
        let result = self
            .flush_for_checkpoint(closing || taken.iter().any(|(_, _, b)| !b.is_empty()))
            .and_then(|()| lock.begin_checkpoint(self, maps_from));
        let (start, mut failed) = match result {
            Ok(begun) => begun,
            Err(e) => {
                give_back_blocks(&taken);
                return Err(e);
            }
        };
        while let Some((file, sums, blocks)) = taken.first_mut() {
            let (file, sums) = (*file, sums.clone());
            if let Err(e) = self.stage_sums(file, &sums, blocks) {
                give_back_blocks(&taken);
                return Err(e);
            }
            taken.remove(0);
        }
        // Durable before the header names the record (behind a live group
        // a step's commit joins the running transaction).
        self.commit_now()?;
        failed.extend(lock.finish_checkpoint(self, start)?);
        let closed = if closing {
            lock.let_go_regions(self)
        } else {
            Ok(data::FailedDisks::new())
        };
        drop(lock);
        // The disks that failed are reported whatever became of the last
        // record (the checkpoint's record still names the regions: a mount
        // would scan them, and find them in step with the maps).
        let closed = closed.map(|more| failed.extend(more));
        self.report_log_failures(&failed)?;
        closed
    }

    /// Every disk flushed (when there are blocks to write, or the log
    /// closes: copies a mount's recovery rewrote are durable before the log
    /// that named them is forgotten): the writes their units name are
    /// durable before the log forgets them.
    fn flush_for_checkpoint(&mut self, blocks: bool) -> Result<(), GroupError> {
        if !blocks {
            return Ok(());
        }
        for m in self.members.iter_mut() {
            if m.writable().is_some() {
                m.needs_flush = true;
            }
        }
        self.flush_all_checked()?;
        self.offline_failed()
    }

    /// Stage `blocks` (taken from data file `file`'s checksums `sums`) in
    /// the running transaction, committing in steps; each block is removed
    /// from `blocks` once its step is committed. Nothing for a table that
    /// is no longer the map's (the file gone or made again), or a map that
    /// may not be written (its AUs another file's too, found at mount); a
    /// block past the map's end (cut meanwhile) is dropped. On an error the
    /// blocks left (staged or not) are the caller's to give back.
    fn stage_sums(
        &mut self,
        file: u32,
        sums: &FileSums,
        blocks: &mut Vec<(u64, MapBlock)>,
    ) -> Result<(), GroupError> {
        let map = map_number(file);
        let writable = self.files.get(map).is_some_and(|m| {
            m.entry.incarnation == sums.incarnation()
                && self.plane.file(map).is_some_and(|s| s.read_only.is_none())
        });
        if !writable {
            blocks.clear();
            return Ok(());
        }
        let size = self.files[&map].entry.size_bytes;
        let mut staged = 0;
        while staged < blocks.len() {
            let (block, read) = &blocks[staged];
            if (block + 1) * BLOCK_BYTES as u64 > size {
                blocks.remove(staged);
                continue;
            }
            self.stage_map_block(file, *block, read.sums.clone())?;
            staged += 1;
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
                blocks.drain(..staged);
                staged = 0;
            }
        }
        self.commit()?;
        blocks.clear();
        Ok(())
    }

    /// Stage block `block` of data file `file`'s map, to hold `sums`, in
    /// the running transaction. An extent of the map not yet written is
    /// zeroed whole and marked written in the same transaction (a reader
    /// reads an unwritten extent as zeros, without I/O). A copy on a disk
    /// not written now is marked stale there, in the same transaction (for
    /// the block's AUs; for the whole extent when it is the first write),
    /// as a data write's copy that missed it is; a block no copy of which
    /// can be written is refused.
    pub(super) fn stage_map_block(
        &mut self,
        file: u32,
        block: u64,
        sums: Box<MapSums>,
    ) -> Result<(), GroupError> {
        let map = map_number(file);
        let rec = self
            .files
            .get(map)
            .ok_or_else(|| GroupError::NotFound(format!("file {file} has no checksum map")))?;
        let incarnation = rec.entry.incarnation;
        let layout = self.layout_for(rec);
        let loc = layout.locate(block * BLOCK_BYTES as u64);
        let extent = *rec.extents.get(loc.extent as usize).ok_or_else(|| {
            GroupError::Corrupt(format!("file {file}'s checksum map has no block {block}"))
        })?;
        // Copies that miss this write: on disks not written now; and, for
        // the extent's first, those the zeroing does not reach (it zeroes
        // ONLINE disks' copies, not a SYNCING disk's).
        let misses = |m: Option<&Member>| {
            if extent.initialized {
                m.and_then(Member::writable).is_none()
            } else {
                m.and_then(Member::online).is_none()
            }
        };
        let away: Vec<AuAddr> = extent
            .copies()
            .iter()
            .copied()
            .filter(|c| misses(self.member(c.disk)))
            .collect();
        if away.len() == extent.copies().len() {
            return Err(GroupError::WriteFailed(format!(
                "block {block} of file {file}'s checksum map: no copy of it is on a disk written now"
            )));
        }
        let mask = if extent.initialized {
            au_mask(aus_touched(
                self.au_bytes,
                loc.offset_in_extent,
                BLOCK_BYTES as u64,
            ))
        } else {
            self.zero_whole_extents(&[(extent, layout.extent_bytes(loc.extent))]);
            if let Some(x) = self.files.extent_mut(map, None, loc.extent) {
                x.initialized = true;
            }
            self.dirty_extent(map, loc.extent);
            au_mask(0..extent_aus(loc.extent))
        };
        // A copy of the map's extents begun before this write (a resync, a
        // relocation: they copy under latches this does not take) may miss
        // it, so it is not trusted (`Zeroings::since`), as after a zeroing.
        self.zeroings.zeroing(map);
        let marks: Vec<StaleMark> = away
            .into_iter()
            .map(|copy| StaleMark {
                extent: loc.extent,
                copy,
                mask,
            })
            .collect();
        self.set_stale(map, incarnation, &marks);
        self.txn.stage_map_block(file, block, sums);
        Ok(())
    }

    /// File `number`'s checksums, if it has a map and this mount made them.
    fn sums_of(&self, number: u32) -> Option<std::sync::Arc<FileSums>> {
        let incarnation = self.files.get(number)?.entry.incarnation;
        self.plane.file_sums(number, incarnation)
    }

    /// Before a resize of file `number` to `size_bytes` changes anything:
    /// the map block its end falls in (the new end on a shrink, the old on
    /// a grow: `end`), loaded, so that [`Self::cut_sums`] cannot fail; a
    /// read that fails refuses the resize with nothing changed.
    pub(super) fn prepare_cut(&mut self, number: u32, end: u64) -> Result<(), GroupError> {
        let Some(sums) = self.sums_of(number) else {
            return Ok(());
        };
        let (block, slot) = map_place(end / u64::from(self.sector_bytes));
        if slot > 0 && !sums.holds(block) {
            let uuid = self.uuid;
            let read = data::read_map_block(self, uuid, number, block)?;
            sums.load(block, read);
        }
        Ok(())
    }

    /// File `number` ends at `end` bytes (a shrink's new end, or, before a
    /// grow, its old one): its checksums forget the map blocks past it and
    /// hold zero units past it in the last one ([`FileSums::cut`]; loaded
    /// by [`Self::prepare_cut`]). When that block changed, the maps are
    /// checkpointed (the log starts again after the cut), so a grow
    /// exposes no unit whose checksum on disk is from before a shrink, and
    /// no record from before the cut is read against the cut map. A
    /// mount's checksums keep to the file's size as it reads the map, so a
    /// crash before the checkpoint leaves nothing past the end to read.
    pub(super) fn cut_sums(&mut self, number: u32, end: u64) -> Result<(), GroupError> {
        let Some(sums) = self.sums_of(number) else {
            return Ok(());
        };
        let changed =
            sums.cut(end / u64::from(self.sector_bytes))
                .map_err(|NotLoaded(block)| {
                    GroupError::Corrupt(format!(
                "file {number}: block {block} of its checksum map was not loaded before the resize"
            ))
                })?;
        if changed {
            self.checkpoint_maps()?;
        }
        Ok(())
    }

    /// File `number` is `size_bytes` now: its checksums take units up to
    /// the new end again.
    pub(super) fn sums_resized(&mut self, number: u32, size_bytes: u64) {
        if let Some(sums) = self.sums_of(number) {
            sums.grown(size_bytes / u64::from(self.sector_bytes));
        }
    }

    /// File `number` grows from `old` to `size_bytes`: the blocks of its map
    /// between the old map's end and the end of the extents the map already
    /// has may hold checksums from before a shrink, and are zeroed (a blank
    /// block is zero units), as the file's own kept tail is. The zeros are
    /// written outside the journal, which may still hold records that
    /// wrote those blocks: when any was written, the journal is
    /// checkpointed, so no replay puts old checksums back over them.
    pub(super) fn blank_map_tail(
        &mut self,
        number: u32,
        old: u64,
        size_bytes: u64,
    ) -> Result<(), GroupError> {
        let map = map_number(number);
        let Some(rec) = self.files.get(map) else {
            return Ok(());
        };
        let layout = self.layout_for(rec);
        let from = self.map_bytes(old);
        let kept_end = layout
            .capacity_bytes(rec.extents.len() as u64)
            .min(self.map_bytes(size_bytes));
        if kept_end <= from {
            return Ok(());
        }
        let (first, last) = (
            layout.locate(from).extent,
            layout.locate(kept_end - 1).extent,
        );
        let written =
            (first..=last).any(|e| rec.extents.get(e as usize).is_some_and(|x| x.initialized));
        self.zero_range(map, from, kept_end - from)?;
        if written {
            self.commit()?;
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Make the checksum directory (metadata file 7, one zeroed extent) if
    /// the group has none. The superblocks say first that the group has
    /// maps, so a Cairn that does not know them mounts it read-only and
    /// never writes a file without its map. Marked, not committed.
    pub(super) fn ensure_checksum_directory(&mut self) -> Result<(), GroupError> {
        if self.files.contains(FILE_CHECKSUM_DIRECTORY) {
            return Ok(());
        }
        // Their AUs first: a group with no room for them is refused before
        // anything, in memory or in the superblocks, says it has maps.
        let directory = self.allocate_extent(usize::from(self.copies), 0)?;
        let log = match self.allocate_extent(usize::from(self.copies), 0) {
            Ok(log) => log,
            Err(e) => {
                self.free_extent(FILE_CHECKSUM_DIRECTORY, &directory, 0, false);
                return Err(e);
            }
        };
        self.declare_ro_compat(GROUP_RO_COMPAT_DATA_CHECKSUMS | GROUP_RO_COMPAT_CHECKSUM_LOG)?;
        let now = (self.clock)();
        // The checksum directory, and the checksum log's ring (one AU: its
        // headers read blank as a log never written).
        for (number, mut extent) in [
            (FILE_CHECKSUM_DIRECTORY, directory),
            (FILE_CHECKSUM_LOG, log),
        ] {
            extent.initialized = true;
            self.files.insert(FileRec {
                entry: FileEntry {
                    size_bytes: self.au_bytes,
                    extent_count: 1,
                    created_unix_seconds: now,
                    modified_unix_seconds: now,
                    ..placeholder_entry(number, self.copies)
                },
                extents: vec![extent],
            });
            self.dirty_extent(number, 0);
            self.zero_metadata_extent(number, 0)?;
        }
        Ok(())
    }
}

/// A file's blocks a checkpoint took: (data file, its checksums, blocks).
type Taken = (u32, Arc<FileSums>, Vec<(u64, MapBlock)>);

/// Blocks a checkpoint took and did not commit: marked changed again, their
/// units given back to the log ([`FileSums::written`]).
fn give_back_blocks(taken: &[Taken]) {
    for (_, sums, blocks) in taken {
        for (block, _) in blocks {
            sums.written(*block, None);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use cairn_format::group::{
        map_number, FileState, FILE_CHECKSUM_DIRECTORY, GROUP_RO_COMPAT_CHECKSUM_LOG,
        GROUP_RO_COMPAT_DATA_CHECKSUMS,
    };
    use cairn_io::DeviceId;
    use cairn_io_sim::SimEngine;

    use super::super::error::GroupError;
    use super::super::file_types::CreateOptions;
    use super::super::mounted::Group;
    use super::super::tests::group_on_sim;
    use crate::group::GroupSelector;
    use crate::names::GroupPath;

    const MIB: u64 = 1 << 20;

    fn mount<'e>(sim: &'e mut SimEngine, ids: &[DeviceId]) -> Group<'e> {
        super::super::mount(sim, ids, &GroupSelector::Name("T".into()))
            .unwrap()
            .0
    }

    fn path(name: &str) -> GroupPath {
        GroupPath::parse(&format!("+T/{name}")).unwrap()
    }

    fn with_checksums() -> CreateOptions {
        CreateOptions {
            checksums: Some(true),
            ..CreateOptions::default()
        }
    }

    /// The map's size, state and copies; `None` when the file has none.
    fn map_of(g: &Group<'_>, number: u32) -> Option<(u64, FileState, u8, usize)> {
        g.files.get(map_number(number)).map(|m| {
            (
                m.entry.size_bytes,
                m.entry.state,
                m.entry.copies,
                m.extents.len(),
            )
        })
    }

    fn holds(g: &Group<'_>) {
        if let Err(v) = g.check_invariants() {
            panic!("{v}");
        }
    }

    /// A file with checksums has a map of a checksum per 4 KiB sector,
    /// sized with the file through every grow and shrink, loaded by the
    /// next mount, published to the data plane, and freed with the file;
    /// the first map makes the checksum directory and says so in the
    /// superblocks. A file without checksums has none.
    #[test]
    fn a_map_is_made_resized_remounted_and_deleted_with_its_file() {
        let (mut sim, ids) = group_on_sim();
        let number;
        {
            let mut g = mount(&mut sim, &ids);
            assert!(!g.files.contains(FILE_CHECKSUM_DIRECTORY));
            assert_eq!(g.features.ro_compat & GROUP_RO_COMPAT_DATA_CHECKSUMS, 0);
            let plain = g
                .create_file(&path("plain"), 4 * MIB, &CreateOptions::default())
                .unwrap();
            assert_eq!(map_of(&g, plain.number), None);
            assert!(!g.files.contains(FILE_CHECKSUM_DIRECTORY));

            let f = g
                .create_file(&path("f"), 8 * MIB, &with_checksums())
                .unwrap();
            number = f.number;
            // 2048 sectors: three blocks of 1008 checksums.
            assert_eq!(
                map_of(&g, number),
                Some((3 * 4096, FileState::Active, 2, 1))
            );
            assert!(g.files.contains(FILE_CHECKSUM_DIRECTORY));
            assert_ne!(g.features.ro_compat & GROUP_RO_COMPAT_DATA_CHECKSUMS, 0);
            assert_ne!(g.features.ro_compat & GROUP_RO_COMPAT_CHECKSUM_LOG, 0);
            // Its space is counted with the file's: 8 AUs and one of map, twice.
            assert_eq!(f.allocated_bytes, 2 * 9 * MIB);
            assert!(g.plane.file(map_number(number)).is_some());
            holds(&g);

            g.resize(&path("f"), 2100 * 4096).unwrap();
            assert_eq!(
                map_of(&g, number),
                Some((3 * 4096, FileState::Active, 2, 1))
            );
            g.resize(&path("f"), 4096 * 1009).unwrap();
            assert_eq!(
                map_of(&g, number),
                Some((2 * 4096, FileState::Active, 2, 1))
            );
            g.resize(&path("f"), 4096).unwrap();
            assert_eq!(map_of(&g, number), Some((4096, FileState::Active, 2, 1)));
            // 64 MiB: 16,384 checksums in 17 blocks.
            g.resize(&path("f"), 64 * MIB).unwrap();
            assert_eq!(
                map_of(&g, number),
                Some((17 * 4096, FileState::Active, 2, 1))
            );
            holds(&g);
            g.dismount().unwrap();
        }
        {
            let mut g = mount(&mut sim, &ids);
            assert_eq!(
                map_of(&g, number),
                Some((17 * 4096, FileState::Active, 2, 1)),
                "the next mount loads the map"
            );
            assert!(g.plane.file(map_number(number)).is_some());
            holds(&g);
            let report = g.check(false).unwrap();
            assert!(report.problems.is_empty(), "{:?}", report.problems);
            let free_before = g.space().free_mb;
            g.remove(&path("f")).unwrap();
            assert_eq!(map_of(&g, number), None);
            assert!(g.plane.file(map_number(number)).is_none());
            // 64 MiB of file and 1 MiB of map, twice.
            assert_eq!(g.space().free_mb - free_before, 2 * (64 + 1));
            holds(&g);
            // The number is free again, with no map.
            let again = g
                .create_file(&path("again"), MIB, &CreateOptions::default())
                .unwrap();
            assert_eq!((again.number, map_of(&g, again.number)), (number, None));
            holds(&g);
            g.dismount().unwrap();
        }
        let g = mount(&mut sim, &ids);
        assert_eq!(map_of(&g, number), None);
        holds(&g);
    }

    /// In a full group the first map's checksum directory finds no space:
    /// the create is refused and leaves nothing behind, no directory in
    /// memory that no commit wrote (a scrub would find its entry block
    /// blank), and the group checks clean, now and at the next mount.
    #[test]
    fn a_checksum_directory_that_finds_no_space_leaves_nothing() {
        let (mut sim, ids) = group_on_sim();
        {
            let mut g = mount(&mut sim, &ids);
            let mut made = 0;
            let full = loop {
                match g.create_file(
                    &path(&format!("fill{made}")),
                    MIB,
                    &CreateOptions::default(),
                ) {
                    Ok(_) => made += 1,
                    Err(e) => break e,
                }
            };
            assert!(matches!(full, GroupError::NoSpace(_)), "{full}");
            let e = g
                .create_file(&path("f"), MIB, &with_checksums())
                .unwrap_err();
            assert!(matches!(e, GroupError::NoSpace(_)), "{e}");
            assert!(!g.files.contains(FILE_CHECKSUM_DIRECTORY));
            assert_eq!(g.features.ro_compat & GROUP_RO_COMPAT_DATA_CHECKSUMS, 0);
            holds(&g);
            let report = g.check(false).unwrap();
            assert!(report.problems.is_empty(), "{:?}", report.problems);
            g.dismount().unwrap();
        }
        let mut g = mount(&mut sim, &ids);
        assert!(!g.files.contains(FILE_CHECKSUM_DIRECTORY));
        let report = g.check(false).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }

    /// A map entry that disagrees with its file (bytes no version wrote:
    /// here a state of its own) is not trusted: the mount leaves it out and
    /// writes it free, the file is read without checksums, and the map's
    /// space is reported as leaked until `check --repair` frees it.
    #[test]
    fn a_map_that_disagrees_with_its_file_is_left_out_and_its_space_freed_by_repair() {
        let (mut sim, ids) = group_on_sim();
        let number;
        {
            let mut g = mount(&mut sim, &ids);
            number = g
                .create_file(&path("f"), 8 * MIB, &with_checksums())
                .unwrap()
                .number;
            let map = map_number(number);
            g.files.entry_mut(map).unwrap().state = FileState::Resizing;
            g.txn.mark(super::super::parts::txn::Dirty::Entry(map));
            g.commit().unwrap();
            g.dismount().unwrap();
        }
        {
            let mut g = mount(&mut sim, &ids);
            assert_eq!(map_of(&g, number), None, "the map is left out");
            assert!(g.file_info(number).is_ok(), "the file is not");
            holds(&g);
            let report = g.check(false).unwrap();
            assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
            assert!(report.problems.iter().all(|p| p.what.contains("leaked")));
            g.check(true).unwrap();
            assert!(g.check(false).unwrap().problems.is_empty());
            g.dismount().unwrap();
        }
        let mut g = mount(&mut sim, &ids);
        assert_eq!(map_of(&g, number), None, "written free");
        assert!(g.check(false).unwrap().problems.is_empty());
        holds(&g);
    }
}
