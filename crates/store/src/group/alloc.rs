//! Per-disk AU allocation: the in-memory image of one disk's allocation table.
//!
//! Owns the bitmap (bit set = AU used) and the per-bitmap-block used counts (the
//! free-space summary), and remembers which table blocks changed so the group
//! can journal exactly those. AUs below `first_data_au` (header copies,
//! superblock slots, the table itself) are never in the bitmap and never handed
//! out. AUs freed in the current transaction are held back ([`DiskAlloc::quarantined`])
//! until the caller has discarded them after the free is durable, so a discard
//! can never hit an AU that was already handed to someone else.
//!
//! Beside the bitmap it keeps the discard map (`clean`, bit set = the AU is
//! free and known to hold nothing on the device: discarded, or zero-filled,
//! since it was last written). An AU loses its mark the moment it is handed
//! out ([`DiskAlloc::mark`], [`DiskAlloc::reserve`]), in the transaction
//! that hands it out, before anything can write it; it gains one only
//! after a discard of it completed ([`DiskAlloc::set_clean`]). So a crash
//! can leave an AU that holds nothing unmarked (returned again, once),
//! never a marked AU that holds data. A free AU without the mark is
//! *returnable*: `cairn group reclaim` discards it (docs/thin-reclaim.md).
//!
//! Does no I/O: the group reads the table at mount and writes what
//! [`DiskAlloc::take_dirty`] names.

use std::collections::BTreeSet;

use cairn_format::group::{AtLayout, AT_BITS_PER_BLOCK, AT_COUNTS_PER_SUMMARY};
use cairn_format::meta::PAYLOAD_BYTES;

/// One dirty allocation-table block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AtBlock {
    Summary(u64),
    Bitmap(u64),
    /// A block of the discard map ([`AtLayout::clean_offset_bytes`]).
    Clean(u64),
}

/// A quarantined run's tag before its transaction commits.
const UNSEALED: u64 = u64::MAX;

/// A freed run, held back until nothing can still use it.
#[derive(Debug, Clone, Copy)]
struct Quarantined {
    start: u32,
    len: u32,
    /// [`UNSEALED`] until the transaction that freed the run has committed,
    /// then the data plane's epoch after which no reader can use it.
    tag: u64,
    /// For a run that held journaled metadata (an indirect AU): the journal
    /// ring generation whose records may still target it. Replaying one of
    /// them would write over whatever the run holds next, so the run waits
    /// until a checkpoint has started a later generation.
    ring: Option<u64>,
}

impl Quarantined {
    fn contains(&self, au: u64) -> bool {
        (u64::from(self.start)..u64::from(self.start) + u64::from(self.len)).contains(&au)
    }

    /// Free of readers as of `epoch`.
    fn readers_gone(&self, epoch: u64) -> bool {
        self.tag != UNSEALED && self.tag <= epoch
    }
}

#[derive(Debug, Clone)]
pub struct DiskAlloc {
    pub layout: AtLayout,
    bits: Vec<u8>,
    /// The discard map: one bit per AU, as `bits`. Kept in memory for every
    /// disk; written only where the layout has room for it
    /// ([`AtLayout::has_clean_map`]).
    clean: Vec<u8>,
    used_per_block: Vec<u32>,
    used: u64,
    dirty: BTreeSet<AtBlock>,
    /// Freed runs not yet reusable.
    quarantine: Vec<Quarantined>,
    /// Runs taken for a relocation in flight ([`DiskAlloc::reserve`]):
    /// handed to nobody else, but not in the bitmap, so a crash before the
    /// move commits leaves them free on disk (nothing leaks).
    reserved: Vec<(u32, u32)>,
    cursor: u64,
    /// Nothing is handed out at or past this AU: the layout's end, or a
    /// pending shrink's cut (`alter --resize`), past which copies wait to
    /// be moved.
    limit: u64,
}

impl DiskAlloc {
    /// An empty table (every data AU free).
    pub fn empty(layout: AtLayout) -> Self {
        let blocks = layout.bitmap_blocks as usize;
        Self {
            layout,
            bits: vec![0; blocks * PAYLOAD_BYTES],
            clean: vec![0; blocks * PAYLOAD_BYTES],
            used_per_block: vec![0; blocks],
            used: 0,
            dirty: BTreeSet::new(),
            quarantine: Vec::new(),
            reserved: Vec::new(),
            cursor: layout.first_data_au,
            limit: layout.au_count,
        }
    }

    /// An empty table whose allocations stop at `limit` (a pending shrink's
    /// cut; at least one data AU, at most the layout's end).
    pub fn with_limit(layout: AtLayout, limit: u64) -> Self {
        let mut a = Self::empty(layout);
        a.set_limit(limit);
        a
    }

    /// Hand out nothing at or past `limit` from now on (kept within the
    /// layout, and at least one data AU).
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit.clamp(self.layout.first_data_au + 1, self.layout.au_count);
    }

    /// Where allocations stop.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Data AUs below the limit: what the disk holds once a pending shrink
    /// is done.
    pub fn capacity_aus(&self) -> u64 {
        self.limit - self.layout.first_data_au
    }

    /// AUs in use at or past the limit: what a shrink still has to move.
    pub fn used_past_limit(&self) -> u64 {
        (self.limit..self.layout.au_count)
            .filter(|au| self.is_used(*au))
            .count() as u64
    }

    /// Whether any AU at or past the limit is quarantined or reserved
    /// (freed by a move whose readers may still run, or taken by one).
    pub fn busy_past_limit(&self) -> bool {
        let limit = self.limit;
        self.quarantine
            .iter()
            .any(|q| u64::from(q.start) + u64::from(q.len) > limit)
            || self
                .reserved
                .iter()
                .any(|(s, l)| u64::from(*s) + u64::from(*l) > limit)
    }

    /// This table for the same disk at another size (`layout`, with the
    /// same first data AU): what is used below the new end is kept, and
    /// every block is to be written again. The caller makes sure nothing
    /// is used, reserved or quarantined past the new end.
    pub fn resized(&self, layout: AtLayout) -> Self {
        assert_eq!(
            layout.first_data_au, self.layout.first_data_au,
            "invariant: a resize keeps the table's place"
        );
        let mut fresh = Self::empty(layout);
        for au in self.used_list() {
            if au < layout.au_count {
                fresh.mark(au, 1, true);
            }
        }
        if layout.has_clean_map() {
            for au in layout.first_data_au..layout.au_count {
                if self.is_clean(au) {
                    fresh.set_bit_clean(au, true);
                }
            }
        }
        fresh.quarantine = self
            .quarantine
            .iter()
            .filter(|q| u64::from(q.start) + u64::from(q.len) <= layout.au_count)
            .copied()
            .collect();
        fresh.reserved = self
            .reserved
            .iter()
            .filter(|(s, l)| u64::from(*s) + u64::from(*l) <= layout.au_count)
            .copied()
            .collect();
        fresh.mark_all_dirty();
        // Map blocks the old layout wrote and the new one does not name are
        // written empty: left as they were, a later resize could read their
        // marks back for AUs that have held data since.
        let room = layout.slack_blocks();
        for index in 0..self.layout.bitmap_blocks.min(room) {
            fresh.dirty.insert(AtBlock::Clean(index));
        }
        fresh
    }

    /// Load bitmap block `index` as read from disk. Returns a description of any
    /// inconsistency (a bit set for a reserved or nonexistent AU), which is
    /// cleared: the checker reports it.
    pub fn load_bitmap(&mut self, index: u64, bits: &[u8]) -> Vec<String> {
        let mut problems = Vec::new();
        let start = index as usize * PAYLOAD_BYTES;
        self.bits[start..start + PAYLOAD_BYTES].copy_from_slice(&bits[..PAYLOAD_BYTES]);
        let first = index * AT_BITS_PER_BLOCK;
        let mut count = 0u32;
        for bit in 0..AT_BITS_PER_BLOCK {
            let au = first + bit;
            if self.is_used(au) {
                if au < self.layout.first_data_au || au >= self.layout.au_count {
                    problems.push(format!("AU {au} is marked used but is not a data AU"));
                    self.set(au, false);
                } else {
                    count += 1;
                }
            }
        }
        self.used -= u64::from(self.used_per_block[index as usize]);
        self.used_per_block[index as usize] = count;
        self.used += u64::from(count);
        problems
    }

    /// The summary counts stored on disk disagree with the bitmap: note the
    /// summary block for rewriting.
    pub fn check_summary(&mut self, index: u64, stored: &[u32]) -> Option<String> {
        let first = (index * AT_COUNTS_PER_SUMMARY) as usize;
        let last = (first + AT_COUNTS_PER_SUMMARY as usize).min(self.used_per_block.len());
        let ours = &self.used_per_block[first..last];
        if stored.len() >= ours.len() && &stored[..ours.len()] == ours {
            return None;
        }
        self.dirty.insert(AtBlock::Summary(index));
        Some(format!(
            "allocation summary block {index} disagrees with the bitmap"
        ))
    }

    /// Load discard-map block `index` as read from disk. A mark on an AU
    /// in use, or outside the data AUs, is dropped (and the block noted for
    /// rewriting): only a free AU can be known to hold nothing.
    pub fn load_clean(&mut self, index: u64, bits: &[u8]) {
        let first = index * AT_BITS_PER_BLOCK;
        let start = index as usize * PAYLOAD_BYTES;
        let Some(slot) = self.clean.get_mut(start..start + PAYLOAD_BYTES) else {
            return;
        };
        slot.copy_from_slice(&bits[..PAYLOAD_BYTES]);
        let mut wrong = false;
        for au in first..first + AT_BITS_PER_BLOCK {
            if self.is_clean(au)
                && (self.is_used(au)
                    || au < self.layout.first_data_au
                    || au >= self.layout.au_count)
            {
                self.set_bit_clean(au, false);
                wrong = true;
            }
        }
        if wrong {
            self.dirty_clean(au_block(first));
        }
    }

    /// Note discard-map block `index` for writing, where the layout keeps
    /// a map (elsewhere the marks live in memory only).
    fn dirty_clean(&mut self, index: u64) {
        if self.layout.has_clean_map() {
            self.dirty.insert(AtBlock::Clean(index));
        }
    }

    /// Free and known to hold nothing on the device.
    pub fn is_clean(&self, au: u64) -> bool {
        let byte = (au / 8) as usize;
        self.clean
            .get(byte)
            .is_some_and(|b| b & (1 << (au % 8)) != 0)
    }

    fn set_bit_clean(&mut self, au: u64, clean: bool) {
        let byte = (au / 8) as usize;
        if clean {
            self.clean[byte] |= 1 << (au % 8);
        } else {
            self.clean[byte] &= !(1 << (au % 8));
        }
    }

    /// The AUs of a run hold data from now on (or may): drop their marks.
    fn unmark_clean(&mut self, start: u64, len: u64) {
        for au in start..start + len {
            if self.is_clean(au) {
                self.set_bit_clean(au, false);
                self.dirty_clean(au_block(au));
            }
        }
    }

    /// A discard (or zero-fill) of a run completed: its AUs that are still
    /// free hold nothing on the device. Returns how many gained the mark.
    pub fn set_clean(&mut self, start: u32, len: u32) -> u64 {
        let mut n = 0;
        for au in u64::from(start)..u64::from(start) + u64::from(len) {
            if au < self.layout.first_data_au
                || au >= self.layout.au_count
                || self.is_used(au)
                || self.is_clean(au)
            {
                continue;
            }
            self.set_bit_clean(au, true);
            self.dirty_clean(au_block(au));
            n += 1;
        }
        n
    }

    /// Discard-map blocks changed since the last [`Self::take_dirty`].
    pub fn clean_dirty(&self) -> usize {
        self.dirty
            .iter()
            .filter(|b| matches!(b, AtBlock::Clean(_)))
            .count()
    }

    /// Free data AUs below the limit that may still hold data on the
    /// device (including runs quarantined or reserved now, which are free
    /// on disk): what `group space` calls returnable.
    pub fn returnable_aus(&self) -> u64 {
        (self.layout.first_data_au..self.limit)
            .filter(|au| !self.is_used(*au) && !self.is_clean(*au))
            .count() as u64
    }

    /// What a reclaim could take now: returnable AUs that are neither
    /// quarantined nor reserved.
    pub fn reclaimable_aus(&self) -> u64 {
        let first = self.layout.first_data_au;
        self.free_now_map()
            .iter()
            .enumerate()
            .filter(|(i, free)| **free && !self.is_clean(first + *i as u64))
            .count() as u64
    }

    /// The quarantined and reserved runs, as sorted AU ranges.
    fn held_ranges(&self) -> Vec<std::ops::Range<u64>> {
        let mut held: Vec<std::ops::Range<u64>> = self
            .quarantine
            .iter()
            .map(|q| (q.start, q.len))
            .chain(self.reserved.iter().copied())
            .map(|(s, l)| u64::from(s)..u64::from(s) + u64::from(l))
            .collect();
        held.sort_by_key(|r| r.start);
        held
    }

    /// Reserve, for a reclaim, returnable AUs that may be handed out now
    /// (below the limit, not quarantined or reserved), from `from` on: at
    /// most `runs_max` runs of at most `run_max` AUs. Nobody is handed them
    /// until [`DiskAlloc::unreserve`]. Returns the runs, in order; the next
    /// call goes on from past the last.
    pub fn reserve_returnable(
        &mut self,
        from: u64,
        run_max: u64,
        runs_max: usize,
    ) -> Vec<(u32, u32)> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        let mut au = from.max(self.layout.first_data_au);
        // Quarantined and reserved runs, passed in order as the scan goes:
        // each AU is looked up once, not against every run.
        let held = self.held_ranges();
        let mut next_held = 0;
        while au < self.limit {
            // Eight AUs used or marked at once: skipped in one step (a
            // batch looks only as far as it takes, not over the disk).
            let byte = (au / 8) as usize;
            if au.is_multiple_of(8)
                && au + 8 <= self.limit
                && self.bits[byte] | self.clean[byte] == 0xff
            {
                au += 8;
                continue;
            }
            while held.get(next_held).is_some_and(|r| r.end <= au) {
                next_held += 1;
            }
            let in_held = held[next_held..]
                .iter()
                .take_while(|r| r.start <= au)
                .any(|r| r.contains(&au));
            let take = !self.is_used(au) && !self.is_clean(au) && !in_held;
            if take {
                let full = runs.len() >= runs_max;
                let grows = runs.last_mut().filter(|(s, l)| {
                    u64::from(*s) + u64::from(*l) == au && u64::from(*l) < run_max
                });
                match grows {
                    Some((_, l)) => *l += 1,
                    None if full => break,
                    None => {
                        runs.push((u32::try_from(au).expect("invariant: AU index fits u32"), 1))
                    }
                }
            }
            au += 1;
        }
        self.reserved.extend(runs.iter().copied());
        runs
    }

    pub fn is_used(&self, au: u64) -> bool {
        let byte = (au / 8) as usize;
        self.bits
            .get(byte)
            .is_some_and(|b| b & (1 << (au % 8)) != 0)
    }

    fn set(&mut self, au: u64, used: bool) {
        let byte = (au / 8) as usize;
        if used {
            self.bits[byte] |= 1 << (au % 8);
        } else {
            self.bits[byte] &= !(1 << (au % 8));
        }
    }

    /// AUs in use (data AUs only).
    pub fn used_aus(&self) -> u64 {
        self.used
    }

    /// Free data AUs below the limit (for a pending shrink, what is free
    /// once the copies past the cut have moved in).
    pub fn free_aus(&self) -> u64 {
        self.capacity_aus().saturating_sub(self.used)
    }

    fn quarantined(&self, au: u64) -> bool {
        self.quarantine.iter().any(|q| q.contains(au))
            || self
                .reserved
                .iter()
                .any(|(s, l)| (u64::from(*s)..u64::from(*s) + u64::from(*l)).contains(&au))
    }

    /// Find and take `len` contiguous free AUs, first fit from a rotating cursor.
    pub fn allocate(&mut self, len: u64) -> Option<u32> {
        let start = self.find(len)?;
        self.mark(u64::from(start), len, true);
        Some(start)
    }

    /// Set `len` free AUs aside for a relocation: nobody else gets them, but
    /// the bitmap does not say so until [`DiskAlloc::claim`] (in the
    /// transaction that points a map at them).
    pub fn reserve(&mut self, len: u64) -> Option<u32> {
        let start = self.find(len)?;
        self.reserved.push((
            start,
            u32::try_from(len).expect("invariant: extent AUs fit u32"),
        ));
        self.unmark_clean(u64::from(start), len);
        Some(start)
    }

    /// Reserve exactly `len` AUs from `start` (a compact move's target),
    /// if every one is free now, below the limit; false (nothing done)
    /// otherwise.
    pub fn reserve_at(&mut self, start: u32, len: u64) -> bool {
        let from = u64::from(start);
        if from < self.layout.first_data_au
            || from + len > self.limit
            || !(from..from + len).all(|au| self.is_free_now(au))
        {
            return false;
        }
        self.reserved.push((
            start,
            u32::try_from(len).expect("invariant: extent AUs fit u32"),
        ));
        self.unmark_clean(from, len);
        true
    }

    /// [`DiskAlloc::is_free_now`] for every data AU below the limit, from
    /// the first data AU: the bitmap once, then each held run once.
    pub fn free_now_map(&self) -> Vec<bool> {
        let first = self.layout.first_data_au;
        let mut map: Vec<bool> = (first..self.limit).map(|au| !self.is_used(au)).collect();
        for held in self.held_ranges() {
            for au in held {
                if let Some(f) = au.checked_sub(first).and_then(|i| map.get_mut(i as usize)) {
                    *f = false;
                }
            }
        }
        map
    }

    /// Not used, quarantined or reserved: may be handed out now.
    pub fn is_free_now(&self, au: u64) -> bool {
        !self.is_used(au) && !self.quarantined(au)
    }

    /// A reserved run is now in a map: mark it used. False (nothing done)
    /// when the run is not reserved here.
    pub fn claim(&mut self, start: u32, len: u32) -> bool {
        let before = self.reserved.len();
        self.reserved.retain(|r| *r != (start, len));
        if before == self.reserved.len() {
            return false;
        }
        self.mark(u64::from(start), u64::from(len), true);
        true
    }

    /// The runs reserved, to carry over to a rebuilt table.
    pub fn reservations(&self) -> Vec<(u32, u32)> {
        self.reserved.clone()
    }

    /// Runs reserved before this table was rebuilt (or its disk went away
    /// and came back): still handed to nobody else.
    pub fn keep_reservations(&mut self, runs: Vec<(u32, u32)>) {
        self.reserved.extend(runs);
    }

    /// A reserved run is not needed after all.
    pub fn unreserve(&mut self, start: u32, len: u32) {
        self.reserved.retain(|r| *r != (start, len));
    }

    /// Hold back from reuse here the runs `from` holds back (this table
    /// is rebuilt for the same disk: a data operation may still write
    /// them). Only runs free here are taken.
    pub fn keep_quarantine(&mut self, from: &DiskAlloc) {
        for q in &from.quarantine {
            let run = u64::from(q.start)..u64::from(q.start) + u64::from(q.len);
            if run.end <= self.layout.au_count && !run.clone().any(|au| self.is_used(au)) {
                self.quarantine.push(*q);
            }
        }
    }

    /// Runs reserved and not yet claimed.
    pub fn reserved_aus(&self) -> u64 {
        self.reserved.iter().map(|(_, l)| u64::from(*l)).sum()
    }

    /// The first free run of `len` AUs from the rotating cursor (not used,
    /// quarantined or reserved); the cursor moves past it.
    fn find(&mut self, len: u64) -> Option<u32> {
        assert!(len >= 1, "invariant: allocate at least one AU");
        let lo = self.layout.first_data_au;
        let hi = self.limit;
        if hi - lo < len {
            return None;
        }
        let span = hi - lo;
        let mut scanned = 0u64;
        let mut start = self.cursor.clamp(lo, hi - 1);
        while scanned < span {
            if start + len > hi {
                scanned += hi - start;
                start = lo;
                continue;
            }
            let blocked = (start..start + len)
                .rev()
                .find(|au| self.is_used(*au) || self.quarantined(*au));
            match blocked {
                None => {
                    self.cursor = start + len;
                    return Some(u32::try_from(start).expect("invariant: AU index fits u32"));
                }
                Some(au) => {
                    scanned += au + 1 - start;
                    start = au + 1;
                    if start >= hi {
                        start = lo;
                    }
                }
            }
        }
        None
    }

    /// Mark a run used or free, tracking dirty blocks and counts.
    pub fn mark(&mut self, start: u64, len: u64, used: bool) {
        for au in start..start + len {
            assert!(
                (self.layout.first_data_au..self.layout.au_count).contains(&au),
                "invariant: only data AUs are allocated"
            );
            assert_ne!(self.is_used(au), used, "invariant: AU {au} changes state");
            self.set(au, used);
            if used && self.is_clean(au) {
                self.set_bit_clean(au, false);
                self.dirty_clean(au_block(au));
            }
            let block = au / AT_BITS_PER_BLOCK;
            let count = &mut self.used_per_block[block as usize];
            if used {
                *count += 1;
                self.used += 1;
            } else {
                *count -= 1;
                self.used -= 1;
            }
            self.dirty.insert(AtBlock::Bitmap(block));
            self.dirty
                .insert(AtBlock::Summary(block / AT_COUNTS_PER_SUMMARY));
        }
    }

    /// Free a run; it stays unavailable until its transaction has committed
    /// ([`DiskAlloc::seal_quarantine`]) and no reader can still use it
    /// ([`DiskAlloc::release_quarantine`]).
    pub fn free(&mut self, start: u32, len: u32) {
        self.free_run(start, len, None);
    }

    /// Free a run that held journaled metadata while the journal ring was
    /// at generation `ring`: it also waits for a checkpoint past it
    /// ([`DiskAlloc::release_quarantine`]).
    pub fn free_journaled(&mut self, start: u32, len: u32, ring: u64) {
        self.free_run(start, len, Some(ring));
    }

    fn free_run(&mut self, start: u32, len: u32, ring: Option<u64>) {
        self.mark(u64::from(start), u64::from(len), false);
        self.quarantine.push(Quarantined {
            start,
            len,
            tag: UNSEALED,
            ring,
        });
    }

    /// The transaction that freed the unsealed runs has committed: tag them
    /// with the data plane's `epoch`. Returns whether there were any.
    pub fn seal_quarantine(&mut self, epoch: u64) -> bool {
        let mut any = false;
        for q in self.quarantine.iter_mut().filter(|q| q.tag == UNSEALED) {
            q.tag = epoch;
            any = true;
        }
        any
    }

    /// Whether runs freed by the current transaction are waiting.
    pub fn has_unsealed(&self) -> bool {
        self.quarantine.iter().any(|q| q.tag == UNSEALED)
    }

    /// Make reusable the sealed runs tagged at or below `epoch` (no reader
    /// older than that runs) that no journal record of a generation before
    /// `ring` can target, and return them, for discarding.
    pub fn release_quarantine(&mut self, epoch: u64, ring: u64) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        self.quarantine.retain(|q| {
            let free = q.readers_gone(epoch) && q.ring.is_none_or(|g| g < ring);
            if free {
                out.push((q.start, q.len));
            }
            !free
        });
        out
    }

    /// A quarantined run that may be lent to a new data extent of `len`
    /// AUs (`docs/live-core.md`, "Freed space is lent"): its transaction
    /// durable (sealed), no journal record of a generation before `ring`
    /// targeting it, below the limit, at least `len` AUs. It waits only for
    /// readers. Of those, the one sealed first (its readers end first).
    /// Returns its first AU and its tag (the epoch its readers are older
    /// than).
    pub fn lendable(&self, len: u64, ring: u64) -> Option<(u32, u64)> {
        self.quarantine
            .iter()
            .filter(|q| {
                q.tag != UNSEALED
                    && q.ring.is_none_or(|g| g < ring)
                    && u64::from(q.len) >= len
                    && u64::from(q.start) + len <= self.limit
            })
            .min_by_key(|q| q.tag)
            .map(|q| (q.start, q.tag))
    }

    /// Lend the first `len` AUs of the quarantined run starting at
    /// `start` ([`DiskAlloc::lendable`]): they are used from now on, the
    /// rest of the run stays quarantined as it was.
    pub fn lend_quarantined(&mut self, start: u32, len: u64) {
        let at = self
            .quarantine
            .iter()
            .position(|q| q.start == start && u64::from(q.len) >= len)
            .expect("invariant: lendable named a quarantined run");
        let q = self.quarantine.swap_remove(at);
        let len32 = u32::try_from(len).expect("invariant: extent AUs fit u32");
        if q.len > len32 {
            self.quarantine.push(Quarantined {
                start: q.start + len32,
                len: q.len - len32,
                ..q
            });
        }
        self.mark(u64::from(start), len, true);
    }

    /// Whether run `run` (first AU, AUs) is reserved here, as it was.
    pub fn reserves(&self, run: (u32, u32)) -> bool {
        self.reserved.contains(&run)
    }

    /// Lend `len` AUs from `at` out of the reserved run `run` (a run whose
    /// discard is in flight): they are used from now on, the rest of the
    /// run stays reserved, as runs of its own.
    pub fn lend_reserved(&mut self, run: (u32, u32), at: u32, len: u64) {
        let len32 = u32::try_from(len).expect("invariant: extent AUs fit u32");
        assert!(
            at >= run.0 && at + len32 <= run.0 + run.1,
            "invariant: the lent AUs are in the run"
        );
        let held = self
            .reserved
            .iter()
            .position(|r| *r == run)
            .expect("invariant: the run is reserved");
        self.reserved.swap_remove(held);
        if at > run.0 {
            self.reserved.push((run.0, at - run.0));
        }
        if at + len32 < run.0 + run.1 {
            self.reserved.push((at + len32, run.0 + run.1 - at - len32));
        }
        self.mark(u64::from(at), len, true);
    }

    /// Whether a checkpoint would free runs: free of readers as of `epoch`,
    /// they wait only for the journal ring to pass generation `ring`.
    pub fn waits_for_checkpoint(&self, epoch: u64, ring: u64) -> bool {
        self.quarantine
            .iter()
            .any(|q| q.readers_gone(epoch) && q.ring.is_some_and(|g| g >= ring))
    }

    /// Every table block, to be written again (after a rebuild).
    pub fn mark_all_dirty(&mut self) {
        for index in 0..self.layout.bitmap_blocks {
            self.dirty.insert(AtBlock::Bitmap(index));
        }
        for index in 0..self.layout.summary_blocks {
            self.dirty.insert(AtBlock::Summary(index));
        }
        if self.layout.has_clean_map() {
            for index in 0..self.layout.bitmap_blocks {
                self.dirty.insert(AtBlock::Clean(index));
            }
        }
    }

    /// A rebuilt table keeps the marks of the AUs still free.
    pub fn keep_clean(&mut self, from: &DiskAlloc) {
        for au in self.layout.first_data_au..self.layout.au_count {
            if from.is_clean(au) && !self.is_used(au) {
                self.set_bit_clean(au, true);
            }
        }
    }

    pub fn take_dirty(&mut self) -> Vec<AtBlock> {
        std::mem::take(&mut self.dirty).into_iter().collect()
    }

    pub fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    pub fn bitmap_bytes(&self, index: u64) -> &[u8] {
        let start = index as usize * PAYLOAD_BYTES;
        &self.bits[start..start + PAYLOAD_BYTES]
    }

    /// Discard-map block `index` as it is to be written: empty past the
    /// map, or where the layout keeps none.
    pub fn clean_bytes(&self, index: u64) -> Vec<u8> {
        let start = index as usize * PAYLOAD_BYTES;
        match self.clean.get(start..start + PAYLOAD_BYTES) {
            Some(b) if self.layout.has_clean_map() => b.to_vec(),
            _ => vec![0; PAYLOAD_BYTES],
        }
    }

    pub fn summary_counts(&self, index: u64) -> &[u32] {
        let first = (index * AT_COUNTS_PER_SUMMARY) as usize;
        let last = (first + AT_COUNTS_PER_SUMMARY as usize).min(self.used_per_block.len());
        &self.used_per_block[first..last]
    }

    /// Used data AUs, as runs, for the checker.
    pub fn used_list(&self) -> Vec<u64> {
        (self.layout.first_data_au..self.layout.au_count)
            .filter(|au| self.is_used(*au))
            .collect()
    }
}

/// The discard-map (or bitmap) block that holds AU `au`'s bit.
fn au_block(au: u64) -> u64 {
    au / AT_BITS_PER_BLOCK
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn alloc() -> DiskAlloc {
        DiskAlloc::empty(AtLayout::for_disk(64 << 20, 1 << 20).unwrap())
    }

    #[test]
    fn allocates_runs_and_counts() {
        let mut a = alloc();
        let data = a.free_aus();
        let x = a.allocate(4).unwrap();
        assert_eq!(u64::from(x), a.layout.first_data_au);
        assert_eq!(a.used_aus(), 4);
        assert_eq!(a.free_aus(), data - 4);
        assert_eq!(
            a.take_dirty(),
            vec![AtBlock::Summary(0), AtBlock::Bitmap(0)]
        );
        a.free(x, 4);
        assert_eq!(a.used_aus(), 0);
        let y = a.allocate(1).unwrap();
        assert_ne!(y, x, "a quarantined AU is not handed out again");
        assert!(
            a.release_quarantine(u64::MAX - 1, 0).is_empty(),
            "not before its transaction commits"
        );
        assert!(a.seal_quarantine(7));
        assert!(
            a.release_quarantine(6, 0).is_empty(),
            "not while a reader older than its epoch runs"
        );
        assert_eq!(a.release_quarantine(7, 0), vec![(x, 4)]);
        assert!(
            a.release_quarantine(u64::MAX, 0).is_empty(),
            "released once"
        );
    }

    /// Only a run whose transaction committed, and that no journal record
    /// may still target, is lent: the first AUs of it, the rest staying
    /// quarantined as it was; the run sealed first goes first.
    #[test]
    fn a_quarantined_run_is_lent_in_part_and_only_once_sealed() {
        let mut a = alloc();
        let x = a.allocate(4).unwrap();
        let y = a.allocate(1).unwrap();
        let z = a.allocate(1).unwrap();
        a.free(x, 4);
        assert_eq!(a.lendable(1, 0), None, "not before its transaction commits");
        a.seal_quarantine(9);
        a.free(y, 1);
        a.free_journaled(z, 1, 2);
        a.seal_quarantine(10);
        assert_eq!(a.lendable(1, 2), Some((x, 9)), "the one sealed first");
        assert_eq!(a.lendable(5, 2), None, "no run of five");
        let used = a.used_aus();
        a.lend_quarantined(x, 1);
        assert_eq!(a.used_aus(), used + 1);
        assert_eq!(a.lendable(3, 2), Some((x + 1, 9)), "the rest stays held");
        assert_eq!(
            a.release_quarantine(9, 2),
            vec![(x + 1, 3)],
            "the lent AU is no longer quarantined"
        );
        // z waits for a checkpoint past ring 2: never lent before.
        a.lend_quarantined(y, 1);
        assert_eq!(a.lendable(1, 2), None);
        assert_eq!(a.lendable(1, 3), Some((z, 10)));
    }

    /// A reserved run (its discard in flight) lends AUs from within it: the
    /// rest stays reserved, as runs of its own.
    #[test]
    fn a_reserved_run_is_lent_in_part() {
        let mut a = alloc();
        let x = a.reserve(4).unwrap();
        assert!(a.reserves((x, 4)));
        a.lend_reserved((x, 4), x + 1, 2);
        assert!(!a.reserves((x, 4)));
        assert!(a.reserves((x, 1)) && a.reserves((x + 3, 1)));
        assert!(a.is_used(u64::from(x) + 1) && a.is_used(u64::from(x) + 2));
        assert!(!a.is_free_now(u64::from(x)) && !a.is_free_now(u64::from(x) + 3));
    }

    #[test]
    fn a_journaled_run_waits_for_a_checkpoint_past_its_ring() {
        let mut a = alloc();
        let x = a.allocate(1).unwrap();
        let y = a.allocate(1).unwrap();
        a.free_journaled(x, 1, 3);
        a.free(y, 1);
        a.seal_quarantine(5);
        assert!(!a.waits_for_checkpoint(4, 3), "readers still run");
        assert!(a.waits_for_checkpoint(5, 3));
        assert_eq!(
            a.release_quarantine(5, 3),
            vec![(y, 1)],
            "the ring of generation 3 may still replay into x"
        );
        assert!(!a.waits_for_checkpoint(5, 4), "a checkpoint started ring 4");
        assert_eq!(a.release_quarantine(5, 4), vec![(x, 1)]);
    }

    #[test]
    fn fills_completely_then_refuses() {
        let mut a = alloc();
        let n = a.free_aus();
        for _ in 0..n {
            assert!(a.allocate(1).is_some());
        }
        assert_eq!(a.allocate(1), None);
        assert_eq!(a.free_aus(), 0);
    }

    #[test]
    fn finds_a_run_past_fragmentation() {
        let mut a = alloc();
        let first: Vec<u32> = (0..10).map(|_| a.allocate(1).unwrap()).collect();
        for x in first.iter().step_by(2) {
            a.free(*x, 1);
        }
        a.seal_quarantine(1);
        a.release_quarantine(1, 0);
        let run = a.allocate(3).unwrap();
        assert!(run > first[9], "no 3-run among the holes");
    }

    #[test]
    fn load_recounts_and_drops_reserved_bits() {
        let mut a = alloc();
        let mut bits = vec![0u8; PAYLOAD_BYTES];
        bits[0] = 0b0000_0001; // AU 0: reserved
        bits[1] = 0b0000_0011; // AUs 8, 9
        let problems = a.load_bitmap(0, &bits);
        assert_eq!(problems.len(), 1);
        assert_eq!(a.used_aus(), 2);
        assert!(a.is_used(8) && !a.is_used(0));
        assert!(a.check_summary(0, &[2]).is_none());
        assert!(a.check_summary(0, &[3]).is_some());
    }

    #[test]
    fn a_limit_keeps_allocations_below_the_cut_and_a_resize_keeps_what_is_used() {
        let mut a = alloc();
        let first = a.layout.first_data_au;
        let end = a.layout.au_count;
        // Fill the disk, then free all but the last AU.
        let all: Vec<u32> = (first..end).map(|_| a.allocate(1).unwrap()).collect();
        for x in &all[..all.len() - 1] {
            a.free(*x, 1);
        }
        a.seal_quarantine(1);
        a.release_quarantine(1, 0);
        let cut = first + 10;
        a.set_limit(cut);
        assert_eq!(a.capacity_aus(), 10);
        assert_eq!(a.used_past_limit(), 1, "the last AU waits to move");
        assert!(!a.busy_past_limit());
        for _ in 0..9 {
            assert!(u64::from(a.allocate(1).unwrap()) < cut);
        }
        assert_eq!(a.free_aus(), 0, "the copy past the cut still needs a place");
        let last = a.reserve(1).unwrap();
        assert!(u64::from(last) < cut);
        assert_eq!(a.allocate(1), None, "nothing at or past the cut");
        a.unreserve(last, 1);
        a.free(all[all.len() - 1], 1);
        assert!(a.busy_past_limit(), "freed, but readers may still use it");
        a.seal_quarantine(2);
        a.release_quarantine(2, 0);
        assert!(!a.busy_past_limit());
        let small = AtLayout::for_disk(cut * (1 << 20) + (1 << 20), 1 << 20).unwrap();
        assert_eq!(small.au_count, cut);
        let b = a.resized(small);
        assert_eq!(b.used_aus(), 9);
        assert_eq!(b.limit(), cut);
        assert_eq!(
            b.dirty_count() as u64,
            small.bitmap_blocks * 2 + small.summary_blocks,
            "the bitmap, its summary and the discard map"
        );
        // And back: the grown table has the same used AUs, the rest free.
        let grown = b.resized(a.layout);
        assert_eq!(grown.used_aus(), 9);
        assert_eq!(grown.free_aus(), a.layout.data_aus() - 9);
    }

    #[test]
    fn an_au_is_returnable_from_its_hand_out_until_a_discard_of_it_as_free() {
        let mut a = alloc();
        let data = a.layout.data_aus();
        assert_eq!(a.returnable_aus(), data, "nothing is known of a new disk");
        let first = a.layout.first_data_au;
        assert_eq!(a.set_clean(first as u32, data as u32), data);
        assert_eq!(a.returnable_aus(), 0);
        // Handed out: no longer known to hold nothing, at once.
        let x = a.allocate(2).unwrap();
        assert!(!a.is_clean(u64::from(x)) && !a.is_clean(u64::from(x) + 1));
        assert!(a.take_dirty().contains(&AtBlock::Clean(0)));
        assert_eq!(a.returnable_aus(), 0, "used AUs are not returnable");
        let r = a.reserve(1).unwrap();
        assert!(
            !a.is_clean(u64::from(r)),
            "a relocation writes it before its claim"
        );
        a.unreserve(r, 1);
        a.free(x, 2);
        assert_eq!(
            a.returnable_aus(),
            3,
            "freed, and written since its discard"
        );
        // A reclaim reserves the returnable runs, so nobody is handed them.
        let runs = a.reserve_returnable(0, 2, usize::MAX);
        assert_eq!(
            runs,
            vec![(r, 1)],
            "quarantined runs wait for their readers"
        );
        a.unreserve(r, 1);
        a.seal_quarantine(1);
        a.release_quarantine(1, 0);
        let runs = a.reserve_returnable(0, 2, usize::MAX);
        assert_eq!(runs.iter().map(|r| u64::from(r.1)).sum::<u64>(), 3);
        assert!(runs.iter().all(|r| r.1 <= 2));
        for (s, l) in &runs {
            assert!(!a.is_free_now(u64::from(*s)), "reserved");
            a.unreserve(*s, *l);
            a.set_clean(*s, *l);
        }
        assert_eq!(a.returnable_aus(), 0);
        // Marks are read back only for free AUs.
        let mut b = alloc();
        let y = b.allocate(1).unwrap();
        let mut bits = vec![0xffu8; PAYLOAD_BYTES];
        bits[0] = 0xff;
        b.load_clean(0, &bits);
        assert!(!b.is_clean(u64::from(y)), "a used AU is never clean");
        assert!(!b.is_clean(0), "nor an AU of the table");
        assert!(b.is_clean(u64::from(y) + 1));
    }

    /// A disk whose table leaves no room for a map keeps its marks in
    /// memory: nothing names a map block to write (its place would be
    /// outside the slack).
    #[test]
    fn a_disk_without_room_for_a_map_keeps_its_marks_in_memory_only() {
        let crowded = AtLayout::for_disk(16 << 40, 1 << 20).unwrap();
        assert!(!crowded.has_clean_map());
        let mut a = DiskAlloc::empty(crowded);
        a.take_dirty();
        let last = crowded.au_count - 1;
        assert_eq!(a.set_clean(last as u32, 1), 1);
        assert!(a.is_clean(last));
        assert_eq!(a.clean_dirty(), 0, "no map block to write");
        assert!(a.reserve_at(last as u32, 1), "a relocation's target");
        assert!(!a.is_clean(last));
        assert_eq!(a.clean_dirty(), 0, "a mark cleared: still nothing to write");
        a.unreserve(last as u32, 1);
        a.set_clean(last as u32, 1);
        let mut bits = vec![0u8; PAYLOAD_BYTES];
        bits[0] = 1;
        a.load_clean(0, &bits);
        assert_eq!(
            a.clean_dirty(),
            0,
            "a wrong mark dropped at load: nothing to write"
        );
        let x = a.allocate(1).unwrap();
        a.free(x, 1);
        assert!(a
            .take_dirty()
            .iter()
            .all(|b| !matches!(b, AtBlock::Clean(_))));
        a.mark_all_dirty();
        assert!(a
            .take_dirty()
            .iter()
            .all(|b| !matches!(b, AtBlock::Clean(_))));
    }
}
