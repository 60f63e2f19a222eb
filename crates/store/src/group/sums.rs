//! A file's checksums as the data plane knows them (`docs/checksums.md`,
//! "Writes", step 1): the blocks of its checksum map it has loaded or
//! changed, and, for every unit a write has in flight, the checksum the unit
//! had before — a read beside the write may find either on a copy.
//!
//! Who changes what: a writer, holding the extent latch that keeps other
//! writes of its units out (`Hold::Write` or exclusive), calls
//! [`FileSums::begin_write`] before it sends its data and
//! [`FileSums::end_write`] once every copy has answered; the loader calls
//! [`FileSums::load`] with a block read from disk; the metadata plane cuts
//! the table when the file shrinks ([`FileSums::cut`], under `meta`, the
//! file `Resizing`); the checkpoint takes the changed blocks
//! ([`FileSums::take_dirty`]) and says what it wrote
//! ([`FileSums::written`]); a mount's recovery of the log sets what it
//! judged ([`FileSums::recovered`]). Readers ask [`FileSums::candidates`]. All under
//! the table's one mutex, a leaf lock held for a lookup or a copy of a few
//! checksums, never across I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use cairn_format::group::{map_place, zero_unit_checksum, CHECKSUMS_PER_BLOCK};
use cairn_io::poison::recover;

use super::data::{MapBlock, UnitSums};
use crate::lock_order::{self, Rank};

/// A map block the table does not hold: load it first ([`FileSums::load`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotLoaded(pub u64);

#[derive(Debug, Default)]
struct Inner {
    /// Map blocks by index: as read from disk, with every change since.
    blocks: HashMap<u64, MapBlock>,
    /// Units with a write in flight: the checksum each had before it.
    before: HashMap<u64, u32>,
    /// Blocks changed since the last checkpoint took them.
    dirty: BTreeSet<u64>,
    /// Units whose write ended (landed or given back) since the checksum
    /// log last named them, or a checkpoint took them: what the next log
    /// record carries, each with the number of the end that put it here
    /// (from `ends`). Each lies in a block of `dirty`.
    unlogged: BTreeMap<u64, u64>,
    /// Writes ended so far (numbers the entries of `unlogged`).
    ends: u64,
    /// The units the file has, once a resize said so: a unit past them has
    /// no checksum here (a writer on a snapshot from before a shrink may
    /// still write there, into extents the shrink cut), and a block read
    /// from disk holds zero units past them.
    units: Option<u64>,
    /// Resizes so far ([`FileSums::cut`], [`FileSums::grown`]): a block
    /// read from disk before one may be stale ([`FileSums::load_with`]).
    resizes: u64,
}

/// One file's checksums in memory, for one incarnation of the file.
#[derive(Debug)]
pub(crate) struct FileSums {
    incarnation: u32,
    unit_bytes: u32,
    zero: u32,
    inner: Mutex<Inner>,
}

impl FileSums {
    /// An empty table for incarnation `incarnation` of a file of
    /// `unit_bytes` units; `None` for a size that is not a unit.
    pub(crate) fn new(incarnation: u32, unit_bytes: u32) -> Option<Self> {
        Some(Self {
            incarnation,
            unit_bytes,
            zero: zero_unit_checksum(unit_bytes)?,
            inner: Mutex::default(),
        })
    }

    /// [`Self::new`], for a file of `units` units (see [`Self::grown`]).
    pub(crate) fn sized(incarnation: u32, unit_bytes: u32, units: u64) -> Option<Self> {
        let table = Self::new(incarnation, unit_bytes)?;
        recover(table.inner.lock()).units = Some(units);
        Some(table)
    }

    pub(crate) fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// Whether the table holds map block `block`.
    pub(crate) fn holds(&self, block: u64) -> bool {
        self.lock().1.blocks.contains_key(&block)
    }

    /// The checksum of a unit of zeros.
    pub(crate) fn zero(&self) -> u32 {
        self.zero
    }

    fn lock(&self) -> (lock_order::Held, std::sync::MutexGuard<'_, Inner>) {
        let held = lock_order::take(Rank::Leaf, "a file's checksums");
        (held, recover(self.inner.lock()))
    }

    /// Block `block` of the map, as read from disk. A block the table
    /// already holds is kept: it is the disk's plus the changes since.
    pub(crate) fn load(&self, block: u64, read: MapBlock) {
        let (_held, mut inner) = self.lock();
        self.load_locked(&mut inner, block, read);
    }

    /// Block `block`, loaded unless the table holds it: read by `read`
    /// (its I/O with no lock held), and taken only if no resize came
    /// between (a shrink forgets the blocks past the end, and a grow then
    /// blanks them on disk: a block read before both would bring back
    /// checksums from before the shrink). Tried `tries` times; `Ok(false)`
    /// when a resize came during every one. For a caller that holds no
    /// latch a resize waits for (a read).
    pub(crate) fn load_with<E>(
        &self,
        block: u64,
        tries: usize,
        mut read: impl FnMut() -> Result<MapBlock, E>,
    ) -> Result<bool, E> {
        for _ in 0..tries {
            let resizes = {
                let (_held, inner) = self.lock();
                if inner.blocks.contains_key(&block) {
                    return Ok(true);
                }
                inner.resizes
            };
            let from_disk = read()?;
            let (_held, mut inner) = self.lock();
            if inner.resizes == resizes {
                self.load_locked(&mut inner, block, from_disk);
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn load_locked(&self, inner: &mut Inner, block: u64, mut read: MapBlock) {
        if inner.blocks.contains_key(&block) {
            return;
        }
        let per = CHECKSUMS_PER_BLOCK as u64;
        if let Some(units) = inner.units {
            if block * per >= units {
                return;
            }
            let from = (units - block * per).min(per) as usize;
            if read.sums[from..].iter().any(|s| *s != self.zero) {
                read.sums[from..].fill(self.zero);
                inner.dirty.insert(block);
            }
        }
        inner.blocks.insert(block, read);
    }

    /// A write of units `first_unit ..` with checksums `sums` is about to
    /// be sent: the table takes the new checksums, and keeps each unit's
    /// previous one until [`Self::end_write`]. Fails, changing nothing,
    /// naming a block it does not hold.
    pub(crate) fn begin_write(&self, first_unit: u64, sums: &[u32]) -> Result<(), NotLoaded> {
        let (_held, mut inner) = self.lock();
        // Units past the file's end (a writer beside a shrink) have none.
        let within = inner.units.map_or(sums.len() as u64, |n| {
            n.saturating_sub(first_unit).min(sums.len() as u64)
        });
        let sums = &sums[..within as usize];
        let units = first_unit..first_unit + sums.len() as u64;
        if let Some(b) = blocks_of(units.clone()).find(|b| !inner.blocks.contains_key(b)) {
            return Err(NotLoaded(b));
        }
        let inner = &mut *inner;
        for (unit, sum) in units.zip(sums) {
            let (block, slot) = map_place(unit);
            let table = inner
                .blocks
                .get_mut(&block)
                .expect("invariant: every block was checked above");
            let was = std::mem::replace(&mut table.sums[slot], *sum);
            let previous = inner.before.insert(unit, was);
            debug_assert!(
                previous.is_none(),
                "the writer's latch keeps a second write of a unit out"
            );
            inner.dirty.insert(block);
        }
        Ok(())
    }

    /// The write [`Self::begin_write`] began is over: `landed`, it reached
    /// a copy (the others' disks are offline or their copies stale), and the
    /// new checksums stand; otherwise no copy has it, and each unit's
    /// checksum goes back to what it was.
    pub(crate) fn end_write(&self, first_unit: u64, count: u64, landed: bool) {
        let (_held, mut inner) = self.lock();
        let inner = &mut *inner;
        for unit in first_unit..first_unit + count {
            let Some(was) = inner.before.remove(&unit) else {
                continue;
            };
            // Logged either way: a unit given back goes out with its old
            // checksum, which a checkpoint during the write may have
            // replaced in the map.
            if inner.units.is_none_or(|n| unit < n) {
                inner.ends += 1;
                let end = inner.ends;
                inner.unlogged.insert(unit, end);
                inner.dirty.insert(map_place(unit).0);
            }
            // Given back only inside the file (a shrink since zeroed the
            // units past its end), and written again by the next checkpoint.
            if !landed && inner.units.is_none_or(|n| unit < n) {
                let (block, slot) = map_place(unit);
                if let Some(table) = inner.blocks.get_mut(&block) {
                    table.sums[slot] = was;
                    inner.dirty.insert(block);
                }
            }
        }
    }

    /// The file now has `units` units (and until [`Self::grown`] has no
    /// more: later loads and writes keep to them): a block wholly past them is
    /// forgotten (its place in the map is gone; if the file grows again
    /// the grow blanks it on disk), and the units past the end in the last
    /// block hold zeros (a grow exposes them as zeros). Returns whether
    /// that block changed (a checkpoint must write it). Fails, changing
    /// nothing, naming the last block when the table does not hold it.
    pub(crate) fn cut(&self, units: u64) -> Result<bool, NotLoaded> {
        let (_held, mut inner) = self.lock();
        let inner = &mut *inner;
        let (last, slot) = map_place(units);
        if slot > 0 && !inner.blocks.contains_key(&last) {
            return Err(NotLoaded(last));
        }
        inner.units = Some(units);
        inner.resizes += 1;
        let gone = |b: &u64| *b > last || (*b == last && slot == 0);
        inner.blocks.retain(|b, _| !gone(b));
        inner.dirty.retain(|b| !gone(b));
        inner.unlogged.retain(|u, _| *u < units);
        if slot > 0 {
            let table = inner.blocks.get_mut(&last).expect("invariant: checked");
            if table.sums[slot..].iter().any(|s| *s != self.zero) {
                table.sums[slot..].fill(self.zero);
                inner.dirty.insert(last);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The file grew to `units` units (a cut already zeroed those past the
    /// old end).
    pub(crate) fn grown(&self, units: u64) {
        let (_held, mut inner) = self.lock();
        inner.units = Some(units);
        inner.resizes += 1;
    }

    /// The blocks changed since the last call, each with its checksums as
    /// the writes that have *ended* left them (a unit whose write is in
    /// flight goes out with the checksum it had before: its write's end
    /// changes the block again and the log names it), and the generation
    /// the block was last written with: what a checkpoint writes. Taken at
    /// one instant with every unit the log has not named, which the
    /// checkpoint's flush (after this call) makes durable and its map
    /// blocks hold from then on: the log forgets them. So a map block a
    /// checkpoint writes holds, for every unit, what the records before
    /// its checkpoint record named or newer, and never a checksum a record
    /// after it names as newer (`docs/checksums.md`, "Recovery").
    pub(crate) fn take_dirty(&self) -> Vec<(u64, MapBlock)> {
        let (_held, mut inner) = self.lock();
        let inner = &mut *inner;
        let dirty = std::mem::take(&mut inner.dirty);
        inner.unlogged.clear();
        let mut out: Vec<(u64, MapBlock)> = dirty
            .into_iter()
            .filter_map(|b| inner.blocks.get(&b).map(|t| (b, t.clone())))
            .collect();
        for (unit, was) in &inner.before {
            let (block, slot) = map_place(*unit);
            if let Ok(i) = out.binary_search_by_key(&block, |(b, _)| *b) {
                out[i].1.sums[slot] = *was;
            }
        }
        out
    }

    /// The units whose writes ended since the log last named them, in
    /// runs of consecutive units with their checksums now, the oldest unit
    /// first; taken only within `units` (all of them with `None`). A unit
    /// is named once: the next call leaves it out unless it is written
    /// again.
    pub(crate) fn take_unlogged(
        &self,
        units: Option<std::ops::Range<u64>>,
    ) -> Vec<(u64, Vec<u32>)> {
        let (_held, mut inner) = self.lock();
        let inner = &mut *inner;
        let taken: Vec<u64> = match units {
            None => std::mem::take(&mut inner.unlogged).into_keys().collect(),
            Some(r) => {
                let within: Vec<u64> = inner.unlogged.range(r).map(|(u, _)| *u).collect();
                for u in &within {
                    inner.unlogged.remove(u);
                }
                within
            }
        };
        let mut runs: Vec<(u64, Vec<u32>)> = Vec::new();
        for unit in taken {
            let (block, slot) = map_place(unit);
            let Some(table) = inner.blocks.get(&block) else {
                continue;
            };
            // A unit written again since its write ended has the new
            // checksum in the table, for bytes that may not have landed:
            // the one before it is what the ended write left. (The new
            // one's end names the unit again.)
            let sum = inner.before.get(&unit).copied().unwrap_or(table.sums[slot]);
            match runs.last_mut() {
                Some((first, sums)) if *first + sums.len() as u64 == unit => sums.push(sum),
                _ => runs.push((unit, vec![sum])),
            }
        }
        runs
    }

    /// Whether some unit of `units` has a write that ended and that the
    /// log has not named: a second write of it must have it named first
    /// ([`super::sums_log::SumsLog::name_now`]).
    pub(crate) fn unlogged_in(&self, units: std::ops::Range<u64>) -> bool {
        self.lock().1.unlogged.range(units).next().is_some()
    }

    /// Units `first ..` were named by a log record that could not be made
    /// durable: the next one names them again.
    pub(crate) fn unlog_failed(&self, first: u64, count: u64) {
        let (_held, mut inner) = self.lock();
        let inner = &mut *inner;
        for unit in (first..first + count).filter(|u| inner.units.is_none_or(|n| *u < n)) {
            inner.ends += 1;
            inner.unlogged.insert(unit, inner.ends);
        }
    }

    /// Block `block` was written with `generation`; a block that failed to
    /// be written is marked changed again (`generation` `None`).
    pub(crate) fn written(&self, block: u64, generation: Option<u64>) {
        let (_held, mut inner) = self.lock();
        match generation {
            Some(g) => {
                if let Some(t) = inner.blocks.get_mut(&block) {
                    t.generation = t.generation.max(g);
                }
            }
            None => {
                // The checkpoint that took it forgot its units: the log
                // names them again (what the ended writes left).
                let inner = &mut *inner;
                inner.dirty.insert(block);
                let per = CHECKSUMS_PER_BLOCK as u64;
                let end = inner
                    .units
                    .map_or(per, |n| n.saturating_sub(block * per).min(per));
                for unit in block * per..block * per + end {
                    inner.ends += 1;
                    inner.unlogged.insert(unit, inner.ends);
                }
            }
        }
    }

    /// The generation block `block` was read or last written with (0: a
    /// blank block), if the table holds it.
    pub(crate) fn generation(&self, block: u64) -> Option<u64> {
        self.lock().1.blocks.get(&block).map(|t| t.generation)
    }

    /// Recovery judged unit `unit` to hold `sum` (`docs/checksums.md`,
    /// "Recovery"): the table takes it, and the next checkpoint writes it.
    /// Nothing for a block the table does not hold (the caller loaded it).
    pub(crate) fn recovered(&self, unit: u64, sum: u32) {
        let (_held, mut inner) = self.lock();
        let (block, slot) = map_place(unit);
        let Some(table) = inner.blocks.get_mut(&block) else {
            return;
        };
        if table.sums[slot] != sum {
            table.sums[slot] = sum;
            inner.dirty.insert(block);
        }
    }
}

/// The map blocks units `units` lie in.
fn blocks_of(units: std::ops::Range<u64>) -> std::ops::Range<u64> {
    let per = CHECKSUMS_PER_BLOCK as u64;
    if units.is_empty() {
        0..0
    } else {
        units.start / per..(units.end - 1) / per + 1
    }
}

impl UnitSums for FileSums {
    fn unit_bytes(&self) -> u32 {
        self.unit_bytes
    }

    /// The unit's checksum now and, while a write of it is in flight, the
    /// one before. Nothing for a block not loaded: the caller loads the
    /// blocks a read needs first ([`FileSums::begin_write`] says which it lacks).
    fn candidates(&self, unit: u64, out: &mut Vec<u32>) {
        out.clear();
        let (block, slot) = map_place(unit);
        let (_held, inner) = self.lock();
        if let Some(table) = inner.blocks.get(&block) {
            out.push(table.sums[slot]);
            if let Some(was) = inner.before.get(&unit) {
                out.push(*was);
            }
        }
    }
}

/// A block of zero units, as a blank map block reads.
#[cfg(test)]
pub(crate) fn blank(zero: u32) -> MapBlock {
    MapBlock {
        sums: Box::new([zero; CHECKSUMS_PER_BLOCK]),
        generation: 0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn candidates(sums: &FileSums, unit: u64) -> Vec<u32> {
        let mut out = Vec::new();
        sums.candidates(unit, &mut out);
        out
    }

    #[test]
    fn a_write_in_flight_has_both_checksums_and_one_once_it_lands() {
        let sums = FileSums::new(1, 4096).unwrap();
        let zero = zero_unit_checksum(4096).unwrap();
        assert_eq!(sums.begin_write(1000, &[1; 10]), Err(NotLoaded(0)));
        sums.load(0, blank(zero));
        assert_eq!(sums.begin_write(1000, &[1; 10]), Err(NotLoaded(1)));
        assert_eq!(candidates(&sums, 1000), vec![zero], "nothing changed");
        sums.load(1, blank(zero));
        sums.begin_write(1000, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
            .unwrap();
        assert_eq!(candidates(&sums, 1007), vec![8, zero]);
        assert_eq!(candidates(&sums, 1008), vec![9, zero], "across blocks");
        assert_eq!(candidates(&sums, 999), vec![zero]);
        sums.end_write(1000, 10, true);
        assert_eq!(candidates(&sums, 1007), vec![8]);
        // A block read from disk later does not undo what the table holds.
        sums.load(0, blank(zero));
        assert_eq!(candidates(&sums, 1007), vec![8]);
        let dirty: Vec<u64> = sums.take_dirty().into_iter().map(|(b, _)| b).collect();
        assert_eq!(dirty, vec![0, 1]);
        assert!(sums.take_dirty().is_empty());
        sums.written(0, None);
        assert_eq!(sums.take_dirty().len(), 1, "a failed write is taken again");
        sums.written(0, Some(9));
        assert!(sums.take_dirty().is_empty());
        assert_eq!(
            candidates(&sums, 5_000_000),
            Vec::<u32>::new(),
            "not loaded"
        );
    }

    #[test]
    fn a_write_that_reached_no_copy_gives_back_the_checksums_it_took() {
        let sums = FileSums::new(1, 512).unwrap();
        let zero = zero_unit_checksum(512).unwrap();
        sums.load(0, blank(zero));
        sums.begin_write(10, &[7, 7]).unwrap();
        sums.end_write(10, 2, true);
        sums.begin_write(10, &[8, 8]).unwrap();
        assert_eq!(candidates(&sums, 10), vec![8, 7]);
        sums.end_write(10, 2, false);
        assert_eq!(candidates(&sums, 10), vec![7]);
        assert_eq!(candidates(&sums, 11), vec![7]);
        assert!(FileSums::new(1, 1024).is_none());
    }

    /// A block read while the file was resized is not taken (it may hold
    /// checksums from before a shrink the grow after it blanked on disk);
    /// read again with no resize between, it is.
    #[test]
    fn a_block_read_across_a_resize_is_not_taken() {
        let per = CHECKSUMS_PER_BLOCK as u64;
        let sums = FileSums::sized(1, 4096, 4 * per).unwrap();
        let mut stale = blank(sums.zero());
        stale.sums[7] = 42;
        let mut reads = 0;
        let taken = sums.load_with(2, 3, || {
            reads += 1;
            // A shrink to block 2's start and a grow back, during every
            // read.
            sums.cut(2 * per).map_err(|_| ())?;
            sums.grown(4 * per);
            Ok::<_, ()>(stale.clone())
        });
        assert_eq!(taken, Ok(false), "a read across a resize was taken");
        assert_eq!((reads, sums.holds(2)), (3, false));
        let taken = sums.load_with(2, 3, || Ok::<_, ()>(blank(sums.zero())));
        assert_eq!(taken, Ok(true));
        assert_eq!(candidates(&sums, 2 * per + 7), vec![sums.zero()]);
        // Held: no read at all.
        let taken = sums.load_with(2, 3, || Err(()));
        assert_eq!(taken, Ok(true));
    }

    #[test]
    fn a_cut_forgets_the_blocks_past_the_end_and_zeroes_the_tail() {
        let per = CHECKSUMS_PER_BLOCK as u64;
        let sums = FileSums::new(1, 4096).unwrap();
        let zero = zero_unit_checksum(4096).unwrap();
        for b in 0..3 {
            sums.load(b, blank(zero));
        }
        sums.begin_write(per - 2, &[5; 6]).unwrap();
        sums.end_write(per - 2, 6, true);
        sums.take_dirty();
        // Into block 1, mid-block: block 2 is forgotten, block 1's tail is
        // zero units, and it is changed.
        assert_eq!(sums.cut(per + 2), Ok(true));
        assert_eq!(candidates(&sums, per + 1), vec![5]);
        assert_eq!(candidates(&sums, per + 2), vec![zero]);
        assert_eq!(candidates(&sums, 2 * per), Vec::<u32>::new());
        let dirty: Vec<u64> = sums.take_dirty().into_iter().map(|(b, _)| b).collect();
        assert_eq!(dirty, vec![1]);
        // On a block boundary: nothing to load, the block after is gone.
        assert_eq!(sums.cut(per), Ok(false));
        assert_eq!(candidates(&sums, per), Vec::<u32>::new());
        assert_eq!(candidates(&sums, per - 1), vec![5]);
        // Mid-block in a block not held: it must be loaded first.
        let fresh = FileSums::new(1, 4096).unwrap();
        assert_eq!(fresh.cut(3), Err(NotLoaded(0)));
    }

    #[test]
    fn the_log_names_what_an_ended_write_left_and_a_checkpoint_takes_only_ended_writes() {
        let sums = FileSums::new(1, 4096).unwrap();
        let zero = zero_unit_checksum(4096).unwrap();
        sums.load(0, blank(zero));
        sums.begin_write(3, &[7]).unwrap();
        sums.end_write(3, 1, true);
        // Written again, in flight: the run names what the ended write left.
        sums.begin_write(3, &[8]).unwrap();
        assert_eq!(sums.take_unlogged(None), vec![(3, vec![7])]);
        sums.end_write(3, 1, true);
        assert_eq!(sums.take_unlogged(None), vec![(3, vec![8])]);
        // A checkpoint takes what ended writes left (a write in flight
        // goes out with the checksum before it) and forgets every unit
        // the log had not named: its map block holds them.
        sums.begin_write(4, &[9, 9]).unwrap();
        sums.end_write(4, 2, true);
        sums.begin_write(10, &[5]).unwrap();
        let taken = sums.take_dirty();
        assert_eq!(taken.len(), 1);
        assert_eq!(&taken[0].1.sums[3..6], &[8, 9, 9]);
        assert_eq!(taken[0].1.sums[10], zero, "in flight: the checksum before");
        assert_eq!(sums.take_unlogged(None), vec![]);
        // The write's end changes the block again, and the log names it.
        sums.end_write(10, 1, true);
        assert_eq!(sums.take_unlogged(None), vec![(10, vec![5])]);
        assert_eq!(sums.take_dirty()[0].1.sums[10], 5);
        // A block the checkpoint failed to write: its units go back to
        // the log, named with what they hold.
        sums.written(0, None);
        assert_eq!(
            sums.take_unlogged(Some(2..6)),
            vec![(2, vec![zero, 8, 9, 9])]
        );
        assert_eq!(sums.take_dirty().len(), 1);
        // Recovery's judgement is taken and written by the next checkpoint.
        sums.recovered(7, 77);
        assert_eq!(candidates(&sums, 7), vec![77]);
        assert_eq!(sums.take_dirty()[0].1.sums[7], 77);
        assert_eq!(sums.generation(0), Some(0));
        assert_eq!(sums.generation(1), None);
    }
}
