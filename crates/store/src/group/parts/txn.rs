//! The running transaction: the metadata blocks it changed, the disks its
//! barrier flushes before its record is written, its number and the last
//! one made durable.
//!
//! Owned by the [`Group`](super::super::Group) (changed only under its
//! `&mut`, i.e. under a live group's `meta`). Operations mark what they
//! change; the commit (`journal.rs`) takes the marks, writes them as one
//! record, and moves the numbers on, here and nowhere else.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cairn_format::group::MapSums;

use super::super::alloc::AtBlock;
use super::violations::Violations;

/// Commit times kept between two takes ([`Group::take_commit_times`](crate::group::Group::take_commit_times)).
pub const COMMIT_TIMES_MAX: usize = 1 << 20;

/// A metadata block the current transaction changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::group) enum Dirty {
    Summary {
        disk: u16,
        index: u64,
    },
    Bitmap {
        disk: u16,
        index: u64,
    },
    /// A block of a disk's discard map.
    Clean {
        disk: u16,
        index: u64,
    },
    Entry(u32),
    Indirect {
        file: u32,
        block: u64,
    },
    Alias(u64),
    Templates,
    Attributes,
    /// Block `block` of data file `file`'s checksum map: its image is the
    /// one staged in the transaction ([`Txn::stage_map_block`]).
    MapBlock {
        file: u32,
        block: u64,
    },
}

impl Dirty {
    /// The block of disk `disk`'s allocation table that `b` names.
    pub(in crate::group) fn of_table_block(disk: u16, b: AtBlock) -> Self {
        match b {
            AtBlock::Summary(index) => Dirty::Summary { disk, index },
            AtBlock::Bitmap(index) => Dirty::Bitmap { disk, index },
            AtBlock::Clean(index) => Dirty::Clean { disk, index },
        }
    }
}

#[derive(Debug)]
pub(in crate::group) struct Txn {
    /// Blocks the running transaction changed, to write in its record.
    dirty: BTreeSet<Dirty>,
    /// Disks holding data or zeros written for the running transaction:
    /// its barrier flushes them before its record is written, so what its
    /// metadata points at is durable first. Only these: in-place metadata
    /// writes are covered by the journal until a checkpoint flushes them.
    barrier: BTreeSet<u16>,
    /// The running transaction's number: every change since the last
    /// commit belongs to it.
    open: u64,
    /// The last transaction made durable (0: none since mount).
    done: u64,
    /// Journal records written since mount.
    records_written: u64,
    /// How long each commit that wrote a record took, for a benchmark to
    /// take; at most [`COMMIT_TIMES_MAX`] between two takes.
    commit_times: Vec<Duration>,
    /// The checksums each [`Dirty::MapBlock`] is written with, by (data
    /// file, block): what no table in memory holds (the data plane's
    /// checksums move on while the commit runs).
    map_images: BTreeMap<(u32, u64), Box<MapSums>>,
}

impl Default for Txn {
    fn default() -> Self {
        Self {
            dirty: BTreeSet::new(),
            barrier: BTreeSet::new(),
            open: 1,
            done: 0,
            records_written: 0,
            commit_times: Vec::new(),
            map_images: BTreeMap::new(),
        }
    }
}

impl Txn {
    /// The running transaction changed block `d`.
    pub(in crate::group) fn mark(&mut self, d: Dirty) {
        self.dirty.insert(d);
    }

    pub(in crate::group) fn mark_all(&mut self, ds: impl IntoIterator<Item = Dirty>) {
        self.dirty.extend(ds);
    }

    /// Block `block` of file `file`'s map is written with `sums` by this
    /// transaction.
    pub(in crate::group) fn stage_map_block(&mut self, file: u32, block: u64, sums: Box<MapSums>) {
        self.map_images.insert((file, block), sums);
        self.dirty.insert(Dirty::MapBlock { file, block });
    }

    /// The checksums staged for a map block.
    pub(in crate::group) fn map_image(&self, file: u32, block: u64) -> Option<&MapSums> {
        self.map_images.get(&(file, block)).map(|b| &**b)
    }

    /// The staged image of a map block is encoded in a record, or its
    /// mark was dropped: it goes.
    pub(in crate::group) fn drop_map_image(&mut self, file: u32, block: u64) {
        self.map_images.remove(&(file, block));
    }

    pub(in crate::group) fn is_dirty(&self, d: &Dirty) -> bool {
        self.dirty.contains(d)
    }

    /// Blocks marked (the group's own; the disks' tables count theirs).
    pub(in crate::group) fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    /// Every mark, for the commit to write.
    pub(in crate::group) fn take_dirty(&mut self) -> BTreeSet<Dirty> {
        std::mem::take(&mut self.dirty)
    }

    /// Drop every mark: a read-only mount writes nothing it computed.
    pub(in crate::group) fn forget_dirty(&mut self) {
        self.dirty.clear();
    }

    /// Disk `disk` holds data written for the running transaction.
    pub(in crate::group) fn flush_before_record(&mut self, disk: u16) {
        self.barrier.insert(disk);
    }

    /// The disks to flush before the record, for the commit.
    pub(in crate::group) fn take_barrier(&mut self) -> BTreeSet<u16> {
        std::mem::take(&mut self.barrier)
    }

    pub(in crate::group) fn open(&self) -> u64 {
        self.open
    }

    pub(in crate::group) fn done(&self) -> u64 {
        self.done
    }

    /// The running transaction is durable: the next one opens.
    pub(in crate::group) fn advance(&mut self) {
        self.done = self.open;
        self.open += 1;
    }

    pub(in crate::group) fn records_written(&self) -> u64 {
        self.records_written
    }

    /// A journal record was written.
    pub(in crate::group) fn note_record(&mut self) {
        self.records_written += 1;
    }

    /// A commit that wrote a record took `took`.
    pub(in crate::group) fn note_commit_time(&mut self, took: Duration) {
        if self.commit_times.len() < COMMIT_TIMES_MAX {
            self.commit_times.push(took);
        }
    }

    pub(in crate::group) fn take_commit_times(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.commit_times)
    }

    /// The disks waiting for the barrier.
    pub(in crate::group) fn barrier(&self) -> &BTreeSet<u16> {
        &self.barrier
    }

    /// What must hold between any two operations:
    /// - the last durable transaction is the one before the running one;
    /// - at rest (`at_rest`: a group not behind a live group's commit
    ///   gate, whose every operation commits before it returns), no block
    ///   is marked: an operation that changed something and returned
    ///   without committing leaves marks. (The barrier may hold disks at
    ///   rest: discards done after a commit mark their disks' discard maps
    ///   for the next one — a check across parts, in
    ///   [`Group::check_invariants`](super::super::Group::check_invariants).)
    pub(in crate::group) fn check_invariants(&self, at_rest: bool, out: &mut Violations) {
        out.check(self.done + 1 == self.open, || {
            format!(
                "transaction {} is running, but the last durable one is {}",
                self.open, self.done
            )
        });
        if at_rest {
            out.check(self.dirty.is_empty(), || {
                format!(
                    "{} block(s) changed and not committed between operations: {:?}",
                    self.dirty.len(),
                    self.dirty.iter().take(4).collect::<Vec<_>>()
                )
            });
        }
    }
}
