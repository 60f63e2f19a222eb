//! Where the journal ring stands: the header generation (a checkpoint's
//! number), the next record's sequence number, where it goes, the
//! checksum it chains to, and how large the ring is.
//!
//! Owned by the [`Group`](super::super::Group) (changed only under its
//! `&mut`, i.e. under a live group's `meta`). The commit and the
//! checkpoint (`journal.rs`) write the blocks; this part moves the ring on
//! only once they are durable, here and nowhere else, so a record is
//! never chained to one that was not written, and a checkpoint starts the
//! ring whole: position, chain and count together.

use cairn_format::group::{Extent, JournalHeader, JOURNAL_HEADER_BLOCKS};

use super::violations::Violations;

#[derive(Debug)]
pub(in crate::group) struct JournalRing {
    /// The newest journal header's generation: a checkpoint writes the
    /// next one. Freed runs wait for the ring that still holds records
    /// naming them (the allocation tables' `ring`).
    header_generation: u64,
    /// The next record's sequence number: it never repeats, across
    /// checkpoints and remounts (the header carries it).
    next_seq: u64,
    /// The block the next record starts at.
    position: u64,
    /// The ring's size in blocks, headers included (0 until the journal's
    /// extents are known).
    capacity_blocks: u64,
    /// The checksum of the last record's header block (0 at the ring's
    /// start): the next record names it, so replay stops at a record not
    /// written after it.
    prev_checksum: u32,
    /// Records in the ring since its start.
    records: u64,
    /// Set by mount when the superblocks name the journal elsewhere than
    /// its entry (a move a crash cut before its commit): the old map, for
    /// `adopt_journal_bootstrap`.
    moved_from: Option<Vec<Extent>>,
}

impl Default for JournalRing {
    fn default() -> Self {
        Self {
            header_generation: 0,
            next_seq: 1,
            position: JOURNAL_HEADER_BLOCKS,
            capacity_blocks: 0,
            prev_checksum: 0,
            records: 0,
            moved_from: None,
        }
    }
}

impl JournalRing {
    /// The journal's extents are known: the ring is `blocks` long.
    pub(in crate::group) fn set_capacity(&mut self, blocks: u64) {
        self.capacity_blocks = blocks;
    }

    /// The header generation of the ring in use.
    pub(in crate::group) fn generation(&self) -> u64 {
        self.header_generation
    }

    pub(in crate::group) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Where the next record starts, and the checksum it chains to.
    pub(in crate::group) fn next_place(&self) -> (u64, u32) {
        (self.position, self.prev_checksum)
    }

    /// Whether a record of `blocks` fits after the last one.
    pub(in crate::group) fn fits(&self, blocks: u64) -> bool {
        self.position + blocks <= self.capacity_blocks
    }

    /// A record of `blocks` is durable (or replayed) at the next place,
    /// its header block's checksum `checksum`: the next one follows it.
    pub(in crate::group) fn appended(&mut self, blocks: u64, checksum: u32) {
        self.position += blocks;
        self.next_seq += 1;
        self.prev_checksum = checksum;
        self.records += 1;
    }

    /// The header a checkpoint writes: the next generation, for a ring
    /// that starts empty.
    pub(in crate::group) fn next_header(&self) -> JournalHeader {
        JournalHeader {
            header_generation: self.header_generation + 1,
            next_seq: self.next_seq,
            ring_blocks: self.capacity_blocks - JOURNAL_HEADER_BLOCKS,
        }
    }

    /// `header` is durable: the ring starts afresh under it.
    pub(in crate::group) fn restarted(&mut self, header: &JournalHeader) {
        self.header_generation = header.header_generation;
        self.position = JOURNAL_HEADER_BLOCKS;
        self.prev_checksum = 0;
        self.records = 0;
    }

    /// Replay begins at the newest header found: its ring, from its
    /// start, with its next sequence number.
    pub(in crate::group) fn resume(&mut self, header: &JournalHeader) {
        self.restarted(header);
        self.next_seq = header.next_seq;
    }

    pub(in crate::group) fn set_moved_from(&mut self, old: Vec<Extent>) {
        self.moved_from = Some(old);
    }

    pub(in crate::group) fn take_moved_from(&mut self) -> Option<Vec<Extent>> {
        self.moved_from.take()
    }

    /// What must hold between any two operations (after the mount, which
    /// adopts a journal a crash left moved):
    /// - the ring holds no record exactly when the next one goes to its
    ///   start, and then chains to nothing;
    /// - every record takes two blocks at least (its header and an
    ///   image), and the ring holds what was written into it;
    /// - once its size is known, the next place lies within the ring;
    /// - sequence numbers start at 1.
    pub(in crate::group) fn check_invariants(&self, out: &mut Violations) {
        let used = self.position.saturating_sub(JOURNAL_HEADER_BLOCKS);
        out.check(self.position >= JOURNAL_HEADER_BLOCKS, || {
            format!(
                "the journal's next record goes to block {}, among its headers",
                self.position
            )
        });
        out.check((self.records == 0) == (used == 0), || {
            format!(
                "the journal ring holds {} record(s) in {used} block(s)",
                self.records
            )
        });
        out.check(used == 0 || self.records * 2 <= used, || {
            format!(
                "the journal ring holds {} record(s) in only {used} block(s)",
                self.records
            )
        });
        out.check(self.records > 0 || self.prev_checksum == 0, || {
            "the journal's empty ring chains its first record to a checksum".to_string()
        });
        out.check(
            self.capacity_blocks == 0 || self.position <= self.capacity_blocks,
            || {
                format!(
                    "the journal's next record goes to block {} of a ring of {}",
                    self.position, self.capacity_blocks
                )
            },
        );
        out.check(self.next_seq >= 1, || {
            "journal sequence number 0".to_string()
        });
        out.check(self.moved_from.is_none(), || {
            "the journal's old place, from a move a crash cut, was never adopted".to_string()
        });
    }
}
