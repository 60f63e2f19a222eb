//! The journal: a transaction's blocks as one record (commit), their
//! in-place writes, checkpoints, and replay of whole records at mount (or,
//! read-only, an overlay of their images in memory).

use std::collections::BTreeSet;

use cairn_format::group::{
    images_crc, map_number, JournalHeader, JournalRecord, JournalTarget, FILE_JOURNAL,
    JOURNAL_HEADER_BLOCKS, JOURNAL_TARGETS_MAX,
};
use cairn_format::meta;
use cairn_format::meta::{Block, BlockType, BLOCK_BYTES};
use cairn_io::AlignedBuf;

use super::alloc::DiskAlloc;
use super::block_ids::journal_id;
use super::discard_queue::DiscardRun;
use super::error::{corrupt, GroupError};
use super::limits::{
    CLEAN_BLOCKS_PER_TXN, JOIN_DIRTY_MAX, JOURNAL_READ_TRIES, STEP_DIRTY_MAX, TXN_IMAGES_MAX,
};
use super::mounted::Group;
use super::parts::files::indirect_blocks;
use super::parts::members::Member;
use super::parts::txn::Dirty;

impl Group<'_> {
    /// Make every change since the last commit durable and atomic: the end
    /// of a step. Behind a [`LiveGroup`](super::LiveGroup) the step's changes join the running
    /// transaction instead, unless it has grown to [`STEP_DIRTY_MAX`]
    /// blocks: the group commit that covers the operation writes it
    /// (`live/mod.rs`), together with the other operations' that joined it.
    pub fn commit(&mut self) -> Result<(), GroupError> {
        self.check_writable()?;
        if self.live && self.dirty_count() < STEP_DIRTY_MAX {
            return Ok(());
        }
        self.commit_now()
    }

    /// Write the running transaction as one journal record, now.
    pub(super) fn commit_now(&mut self) -> Result<(), GroupError> {
        self.check_writable()?;
        self.take_heartbeat_failures();
        let started = std::time::Instant::now();
        let records = self.txn.records_written();
        let result = self.commit_inner();
        if let Err(e) = &result {
            self.stop(e.to_string());
        }
        result?;
        if self.txn.records_written() > records {
            self.txn.note_commit_time(started.elapsed());
        }
        self.txn.advance();
        // Disks that failed during the commit are recorded offline before
        // anything can drop the record from the ring, and before the data
        // plane sees what the commit published (a disk whose barrier flush
        // failed must not serve the extents it marks initialised).
        self.offline_failed()?;
        self.publish_changed();
        self.discard_freed()?;
        self.offline_failed()
    }

    /// Commit a dirty set that may exceed one transaction (rebuilds and
    /// repairs of derived state, where each block stands on its own), in
    /// transactions of at most [`TXN_IMAGES_MAX`] blocks.
    pub(super) fn commit_in_chunks(&mut self) -> Result<(), GroupError> {
        self.mark_table_dirty();
        let all: Vec<Dirty> = self.txn.take_dirty().into_iter().collect();
        // Each commit's release of freed runs may add map blocks to the
        // next chunk: room is left for them.
        for chunk in all.chunks(TXN_IMAGES_MAX - CLEAN_BLOCKS_PER_TXN) {
            self.txn.mark_all(chunk.iter().copied());
            self.commit_now()?;
        }
        self.commit_now()
    }

    /// Before an operation's first step behind a [`LiveGroup`](super::LiveGroup): the running
    /// transaction takes one more operation only while it holds fewer than
    /// [`JOIN_DIRTY_MAX`] blocks, so that with the operation's largest step
    /// it still fits one record.
    pub(super) fn begin_operation(&mut self) -> Result<(), GroupError> {
        if self.live && self.dirty_count() >= JOIN_DIRTY_MAX {
            self.commit_now()?;
        }
        Ok(())
    }

    /// Make transaction `ticket` durable, if it is not yet: commit the
    /// running transaction (which holds it, and everything since).
    pub(super) fn commit_through(&mut self, ticket: u64) -> Result<(), GroupError> {
        self.check_usable()?;
        self.take_heartbeat_failures();
        if self.txn.done() >= ticket {
            return Ok(());
        }
        if self.dirty_count() == 0 && self.failed_disks.is_empty() {
            // Nothing to write (an operation that only looked, or one that
            // failed cleanly): durable as it stands.
            self.txn.advance();
            return Ok(());
        }
        self.commit_now()
    }

    /// The running transaction: changes made now belong to it.
    pub(super) fn txn_open(&self) -> u64 {
        self.txn.open()
    }

    /// The last transaction made durable.
    pub(super) fn txn_done(&self) -> u64 {
        self.txn.done()
    }

    /// Journal records written since this mount.
    pub fn journal_records(&self) -> u64 {
        self.txn.records_written()
    }

    /// How long each commit that wrote a record took (barrier, record,
    /// in-place writes) since the last call; at most the first
    /// [`COMMIT_TIMES_MAX`](super::COMMIT_TIMES_MAX) are kept between calls.
    pub fn take_commit_times(&mut self) -> Vec<std::time::Duration> {
        self.txn.take_commit_times()
    }

    /// Whether a dirty block is still part of the metadata: indirect blocks of
    /// a file that shrank or went away are not written.
    pub(super) fn dirty_in_use(&self, d: &Dirty) -> bool {
        match d {
            Dirty::Indirect { file, block } => self.files.get(*file).is_some_and(|f| {
                *block < indirect_blocks(f.extents.len() as u64)
                    && ((*block / self.blocks_per_au()) as usize) < f.entry.indirect.len()
            }),
            Dirty::Summary { disk, .. }
            | Dirty::Bitmap { disk, .. }
            | Dirty::Clean { disk, .. } => {
                self.member(*disk).and_then(|m| m.alloc.as_ref()).is_some()
            }
            // A map block of a map still there, inside it, with its image.
            Dirty::MapBlock { file, block } => {
                self.txn.map_image(*file, *block).is_some()
                    && self
                        .files
                        .get(map_number(*file))
                        .is_some_and(|m| (*block + 1) * BLOCK_BYTES as u64 <= m.entry.size_bytes)
            }
            _ => true,
        }
    }

    pub(super) fn commit_inner(&mut self) -> Result<(), GroupError> {
        self.mark_table_dirty();
        if self.txn.dirty_count() == 0 {
            return Ok(());
        }
        let taken = self.txn.take_dirty();
        let dirty: Vec<Dirty> = taken
            .iter()
            .copied()
            .filter(|d| self.dirty_in_use(d))
            .collect();
        // A map block not written (its map cut or gone) drops its image.
        for d in taken.iter().filter(|d| !dirty.contains(d)) {
            if let Dirty::MapBlock { file, block } = d {
                self.txn.drop_map_image(*file, *block);
            }
        }
        if dirty.is_empty() {
            return Ok(());
        }
        for d in &dirty {
            if let Dirty::Entry(n) = d {
                self.unpublished.file_committed(*n);
            }
        }
        assert!(
            dirty.len() <= TXN_IMAGES_MAX,
            "invariant: a transaction carries at most {TXN_IMAGES_MAX} blocks, got {}",
            dirty.len()
        );
        let seq = self.journal.next_seq();
        let mut images = Vec::with_capacity(dirty.len());
        let mut targets = Vec::new();
        for (i, d) in dirty.iter().enumerate() {
            let (_, places) = self.dirty_id_and_places(*d);
            for (disk, offset_bytes) in places {
                targets.push(JournalTarget {
                    image: i as u16,
                    disk,
                    offset_bytes,
                });
            }
            images.push(self.encode_dirty(*d, seq));
            if let Dirty::MapBlock { file, block } = d {
                self.txn.drop_map_image(*file, *block);
            }
        }
        assert!(
            targets.len() <= JOURNAL_TARGETS_MAX,
            "invariant: targets fit a record"
        );
        let record_blocks = 1 + images.len() as u64;
        if !self.journal.fits(record_blocks) {
            self.checkpoint()?;
        }
        // Barrier: data and zeroing written before this metadata change must be
        // durable before the change is (an extent marked initialised must never
        // expose an AU's old contents). Only the disks holding them: the
        // ring covers earlier in-place writes until a checkpoint.
        let barrier = self.txn.take_barrier();
        let failed = self.flush_disks(Some(&barrier))?;
        self.failed_disks.extend(failed);

        let (position, prev_checksum) = self.journal.next_place();
        let record = JournalRecord {
            seq,
            prev_checksum,
            image_count: images.len() as u16,
            images_crc: images_crc(&images.iter().map(|b| &**b).collect::<Vec<_>>()),
            targets: targets.clone(),
        };
        let mut header = meta::empty_block();
        record.encode_into(&mut header);
        meta::seal(
            &mut header,
            journal_id(BlockType::JournalRecord, position),
            self.uuid,
            seq,
        );
        let mut items = Vec::new();
        for (k, block) in std::iter::once(&header).chain(images.iter()).enumerate() {
            let index = position + k as u64;
            let copies = self
                .file_block_places(FILE_JOURNAL, index)
                .into_iter()
                .map(|(disk, offset)| (disk, offset, AlignedBuf::from_slice(&block[..])))
                .collect();
            items.push(DurableItem::block(format!("journal block {index}"), copies));
        }
        self.write_durably(items, &format!("journal record {seq}"))?;

        self.journal
            .appended(record_blocks, meta::checksum_of(&header[..]));
        self.txn.note_record();

        self.write_in_place(&targets, |i| &images[i][..])
    }

    /// Write a journal record's images to their places (commit, and replay).
    /// Disks that fail are noted for offlining.
    pub(super) fn write_in_place<'b>(
        &mut self,
        targets: &[JournalTarget],
        image: impl Fn(usize) -> &'b [u8],
    ) -> Result<(), GroupError> {
        let writes = targets
            .iter()
            .map(|t| {
                (
                    t.disk,
                    t.offset_bytes,
                    AlignedBuf::from_slice(image(usize::from(t.image))),
                )
            })
            .collect();
        let failed = self.write_many(writes)?;
        self.failed_disks.extend(failed);
        Ok(())
    }

    /// Write `items` and flush their disks: every item must land, whole, on
    /// at least one of its copies (a copy on a disk that failed, or was
    /// offline, does not count), else the write did not happen and the group
    /// cannot go on. `what` names the set in the error.
    pub(super) fn write_durably(
        &mut self,
        items: Vec<DurableItem>,
        what: &str,
    ) -> Result<(), GroupError> {
        let mut writes = Vec::new();
        let mut copy_disks: Vec<(String, Vec<u16>)> = Vec::with_capacity(items.len());
        for item in items {
            let mut disks = Vec::with_capacity(item.copies.len());
            for (disk, blocks) in item.copies {
                disks.push(disk);
                writes.extend(blocks.into_iter().map(|(o, b)| (disk, o, b)));
            }
            copy_disks.push((item.what, disks));
        }
        let written: BTreeSet<u16> = writes
            .iter()
            .map(|w| w.0)
            .filter(|d| self.member(*d).and_then(Member::online).is_some())
            .collect();
        let mut failed: BTreeSet<u16> = self.write_many(writes)?.into_iter().collect();
        let flushed: BTreeSet<u16> = written.difference(&failed).copied().collect();
        failed.extend(self.flush_disks(Some(&flushed))?);
        self.failed_disks.extend(failed.iter().copied());
        let lost: Vec<String> = copy_disks
            .iter()
            .filter(|(_, disks)| {
                !disks
                    .iter()
                    .any(|d| written.contains(d) && !failed.contains(d))
            })
            .map(|(item, disks)| {
                let names: Vec<String> = disks.iter().map(|d| self.disk_name(*d)).collect();
                format!("{item} (copies on {})", names.join(", "))
            })
            .collect();
        if lost.is_empty() {
            return Ok(());
        }
        Err(GroupError::WriteFailed(format!(
            "could not write the {what} to any copy of {}{}; the group stopped — check those disks and the kernel log (dmesg), then mount the group again",
            lost[0],
            match lost.len() {
                1 => String::new(),
                n => format!(" and {} more block(s)", n - 1),
            }
        )))
    }

    pub(super) fn flush_all_checked(&mut self) -> Result<(), GroupError> {
        let failed = self.flush_disks(None)?;
        self.failed_disks.extend(failed);
        Ok(())
    }

    /// Make everything in place durable and start the journal ring afresh.
    pub(super) fn checkpoint(&mut self) -> Result<(), GroupError> {
        self.flush_all_checked()?;
        // A disk whose in-place writes or flush failed holds stale blocks the
        // ring could still repair: it must be on record as offline before the
        // ring is reset.
        self.offline_failed()?;
        let header = self.journal.next_header();
        let slot = header.header_generation % JOURNAL_HEADER_BLOCKS;
        let mut block = meta::empty_block();
        header.encode_into(&mut block);
        meta::seal(
            &mut block,
            journal_id(BlockType::JournalHeader, slot),
            self.uuid,
            header.header_generation,
        );
        let copies = self
            .file_block_places(FILE_JOURNAL, slot)
            .into_iter()
            .map(|(d, o)| (d, o, AlignedBuf::from_slice(&block[..])))
            .collect();
        self.write_durably(
            vec![DurableItem::block(
                format!("journal header slot {slot}"),
                copies,
            )],
            "journal header",
        )?;
        self.journal.restarted(&header);
        Ok(())
    }

    /// Tell the devices about AUs whose free state is now durable.
    pub(super) fn discard_freed(&mut self) -> Result<(), GroupError> {
        // Runs this commit freed wait for the readers that started before
        // the files were published without them: their epoch is the next.
        // An OFFLINE disk's table (the maps') holds its freed runs back
        // too: a data operation that took a view before it went offline
        // may still write them.
        let freed = self
            .members
            .iter()
            .filter_map(Member::table)
            .any(DiskAlloc::has_unsealed);
        if freed {
            let epoch = self.plane.advance_epoch();
            for alloc in self.members.iter_mut().filter_map(Member::table_mut) {
                alloc.seal_quarantine(epoch);
            }
        }
        self.release_free_of_readers()
    }

    /// Make reusable the freed runs no running data operation can still
    /// use (their transaction has committed), and ask for their discard
    /// where the group discards on free (`discard.rs`: they are reusable
    /// once it is over).
    pub(super) fn release_free_of_readers(&mut self) -> Result<(), GroupError> {
        let free_of_readers = self.plane.oldest_running();
        let ring = self.journal.generation();
        let discard = self.discards_on_free();
        let mut runs = Vec::new();
        for m in self.members.iter_mut() {
            let n = m.entry.number;
            // Not written (OFFLINE): its runs come free without a discard.
            let writable = m.writable().is_some();
            let Some(alloc) = m.table_mut() else {
                continue;
            };
            let released = alloc.release_quarantine(free_of_readers, ring);
            if !(discard && writable) {
                // Kept quiet (`thin_provisioned=false`): the runs stay
                // returnable, for `cairn group reclaim`.
                continue;
            }
            // Not past a pending shrink's cut: reserved there, they would
            // hold the shrink back until their discard is over.
            let limit = alloc.limit();
            runs.extend(
                released
                    .into_iter()
                    .filter(|(start, len)| u64::from(*start) + u64::from(*len) <= limit)
                    .map(|(start, len)| DiscardRun {
                        disk: n,
                        start,
                        len,
                    }),
            );
        }
        // Nothing can have been handed a run between its release and here
        // (`meta` is held throughout): each is free, and reserved from here
        // until its discard is over.
        self.discard_released(runs);
        self.plane.prune_lent();
        Ok(())
    }

    /// Whether freed runs, free of readers, wait only for a checkpoint.
    pub(super) fn waits_for_checkpoint(&self) -> bool {
        let epoch = self.plane.oldest_running();
        let ring = self.journal.generation();
        self.members
            .iter()
            .filter_map(Member::table)
            .any(|a| a.waits_for_checkpoint(epoch, ring))
    }

    /// Read the journal copy by copy: a record counts if it is whole on any copy.
    pub(super) fn read_journal_block(&mut self, index: u64) -> Vec<AlignedBuf> {
        let places = self.file_block_places(FILE_JOURNAL, index);
        places
            .into_iter()
            .filter_map(|(d, o)| self.read_one(d, o, BLOCK_BYTES).ok())
            .collect()
    }

    /// Replay every whole record after the last checkpoint; return how many.
    pub(super) fn replay(&mut self) -> Result<u64, GroupError> {
        let mut header: Option<JournalHeader> = None;
        for slot in 0..JOURNAL_HEADER_BLOCKS {
            for buf in self.read_journal_block(slot) {
                if meta::open(
                    &buf[..],
                    journal_id(BlockType::JournalHeader, slot),
                    self.uuid,
                )
                .is_ok()
                {
                    if let Ok(h) = JournalHeader::decode(&buf[..]) {
                        if header.is_none_or(|b| h.header_generation > b.header_generation) {
                            header = Some(h);
                        }
                    }
                }
            }
        }
        let header = header.ok_or_else(|| corrupt("no journal header copy is readable"))?;
        self.journal.resume(&header);
        let mut replayed = 0;
        loop {
            let (position, prev) = self.journal.next_place();
            if !self.journal.fits(1) {
                break;
            }
            let Some((record, images, checksum)) = self.read_record(position, prev)? else {
                break;
            };
            if self.read_only {
                self.overlay_record(&record.targets, &images);
            } else {
                self.write_in_place(&record.targets, |i| &images[i][..])?;
            }
            self.journal
                .appended(1 + u64::from(record.image_count), checksum);
            replayed += 1;
        }
        if self.read_only {
            return Ok(replayed);
        }
        // Make the replayed state the new starting point — only once every
        // disk a replay write failed on is on record as offline (checkpoint
        // sees to it, and stops the mount if redundancy cannot cover them).
        self.checkpoint()?;
        Ok(replayed)
    }

    /// A read-only mount's replay: remember the record's images by place, so
    /// reads see what a writer's replay would have put there.
    pub(super) fn overlay_record(&mut self, targets: &[JournalTarget], images: &[AlignedBuf]) {
        for t in targets {
            let mut block = meta::empty_block();
            block.copy_from_slice(&images[usize::from(t.image)][..]);
            self.overlay.insert((t.disk, t.offset_bytes), block);
        }
    }

    /// Drop every change a read-only mount computed (rebuilt tables, summary
    /// counts to rewrite): nothing of it is written.
    pub(super) fn forget_dirty(&mut self) {
        self.txn.forget_dirty();
        for alloc in self.members.iter_mut().filter_map(|m| m.alloc.as_mut()) {
            alloc.take_dirty();
        }
    }

    /// The whole record at `position`, if there is one that follows `prev`:
    /// its header from any copy that is valid, and each image from any copy
    /// sealed with the record's sequence — block by block, so a record whose
    /// blocks are whole only on different disks (copies lost in a crossed
    /// pattern) is still read. The images' checksum confirms the set.
    ///
    /// `None` is the end of the journal: no copy holds the record that
    /// follows, or the record is torn. A block that could not be *read* is
    /// not that: after [`JOURNAL_READ_TRIES`] rounds, a record head no
    /// online copy of which could be read, or an image of a record whose
    /// head was read, is an error, since the journal may go on past it with
    /// acknowledged transactions.
    pub(super) fn read_record(
        &mut self,
        position: u64,
        prev: u32,
    ) -> Result<Option<(JournalRecord, Vec<AlignedBuf>, u32)>, GroupError> {
        let uuid = self.uuid;
        let next_seq = self.journal.next_seq();
        let head = self.read_journal_copy(position, false, |head| {
            let Ok(seq) = meta::open(
                &head[..],
                journal_id(BlockType::JournalRecord, position),
                uuid,
            ) else {
                return false;
            };
            JournalRecord::decode(&head[..]).is_ok_and(|record| {
                seq == next_seq && record.seq == seq && record.prev_checksum == prev
            })
        })?;
        let Some(head) = head else {
            return Ok(None);
        };
        let record = JournalRecord::decode(&head[..])
            .map_err(|e| corrupt(format!("journal record at block {position}: {e}")))?;
        if !self.journal.fits(1 + u64::from(record.image_count)) {
            return Ok(None);
        }
        let mut images = Vec::with_capacity(usize::from(record.image_count));
        for k in 0..u64::from(record.image_count) {
            let image = self.read_journal_copy(position + 1 + k, true, |buf| {
                meta::sealed_generation(&buf[..], uuid) == Some(record.seq)
            })?;
            let Some(image) = image else {
                return Ok(None);
            };
            images.push(image);
        }
        let blocks: Vec<Box<Block>> = images
            .iter()
            .map(|b| {
                let mut block = meta::empty_block();
                block.copy_from_slice(&b[..]);
                block
            })
            .collect();
        if images_crc(&blocks.iter().map(|b| &**b).collect::<Vec<_>>()) != record.images_crc {
            return Ok(None);
        }
        Ok(Some((record, images, meta::checksum_of(&head[..]))))
    }

    /// Journal block `index` from the first online copy `wanted` accepts.
    /// `None` when every online copy was read and none is it. A copy that
    /// could not be read is tried again, up to [`JOURNAL_READ_TRIES`]
    /// rounds (a path failing over); after them it is an error when
    /// `must_exist` (the block belongs to a record whose head was read) or
    /// when no online copy could be read at all, and otherwise the end of
    /// the journal (a copy that was read holds something else: the record
    /// was never whole there, and the disk that failed the read is taken
    /// offline by a mount that writes).
    fn read_journal_copy(
        &mut self,
        index: u64,
        must_exist: bool,
        wanted: impl Fn(&AlignedBuf) -> bool,
    ) -> Result<Option<AlignedBuf>, GroupError> {
        let places: Vec<(u16, u64)> = self
            .file_block_places(FILE_JOURNAL, index)
            .into_iter()
            .filter(|(d, _)| self.member(*d).and_then(Member::online).is_some())
            .collect();
        let mut failed = Vec::new();
        for _ in 0..JOURNAL_READ_TRIES {
            failed.clear();
            let mut read_any = false;
            for (disk, offset) in &places {
                match self.read_one(*disk, *offset, BLOCK_BYTES) {
                    Ok(buf) if wanted(&buf) => return Ok(Some(buf)),
                    Ok(_) => read_any = true,
                    Err(e) => failed.push(format!("{}: {e}", self.disk_name(*disk))),
                }
            }
            if failed.is_empty() || (read_any && !must_exist) {
                return Ok(None);
            }
        }
        Err(GroupError::Unreadable(format!(
            "journal block {index} could not be read from any copy ({}); the journal may hold acknowledged changes past it, so the group is not mounted: mount it again once the disk answers",
            failed.join("; ")
        )))
    }
}

/// Something a durable write must leave whole on at least one copy: a
/// metadata block (one write per copy), or a superblock generation (every
/// block of the slot, per disk).
pub(super) struct DurableItem {
    pub(super) what: String,
    /// Per copy: its disk and the writes (offset, bytes) that make it up.
    pub(super) copies: Vec<(u16, Vec<(u64, AlignedBuf)>)>,
}

impl DurableItem {
    /// A block with one write per copy: (disk, offset, bytes).
    pub(super) fn block(what: impl Into<String>, copies: Vec<(u16, u64, AlignedBuf)>) -> Self {
        Self {
            what: what.into(),
            copies: copies
                .into_iter()
                .map(|(d, o, b)| (d, vec![(o, b)]))
                .collect(),
        }
    }
}
