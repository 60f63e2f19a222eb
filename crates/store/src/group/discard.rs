//! Discards of freed space, off the commit path (`docs/thin-reclaim.md`,
//! "discard on free"; the threads in `docs/live-core.md`).
//!
//! A run a commit freed comes free of readers in a later commit
//! (`journal.rs`, [`Group::release_free_of_readers`]). Where the group
//! discards on free, the run is then *reserved* (handed to nobody, as a
//! reclaim's runs are) and its discard requested; once the discard is
//! over, under `meta`, the run goes back to the free pool
//! ([`Group::discards_done`]) and, if the discard completed, is marked in
//! the discard map: the disk joins the running transaction's barrier, so
//! the discard is flushed before the record that carries the mark. So an AU
//! is never handed out while its discard may be in flight, and a mark is
//! never durable before its discard.
//!
//! Who runs the discards:
//! - a group one command holds (not live): the commit that released the
//!   runs, at once, on the metadata plane's engine (nobody else waits);
//! - a live group: never under `meta`. The runs wait in the group's
//!   [`DiscardQueue`], which one thread of the group's own drains through a
//!   data handle of its own (`live/mod.rs`); under the interleaving simulator,
//!   whose actors are its only threads, the actor whose operation queued
//!   them drains them after its commit, outside `meta`.
//!
//! Bounds: at most [`DISCARD_QUEUE_RUNS_MAX`](super::DISCARD_QUEUE_RUNS_MAX) runs wait; a run released
//! while the queue is full (or stopped) goes straight back to the free pool
//! unmarked: *returnable*, which a `cairn group reclaim` discards later. A
//! drain takes at most [`DISCARD_BATCH_RUNS_MAX`](super::DISCARD_BATCH_RUNS_MAX) runs at a time. An
//! allocation that finds no space takes back the runs still waiting (space
//! needed now comes before giving it back to the array); a batch in flight
//! comes back when its discards end, but a data extent that still finds no
//! space is lent a run of it ([`DiscardQueue::lend`]): the extent's first
//! write waits for the batch's discards (`plane.rs`, `Lent`), and the run
//! is neither given back nor marked when the batch comes back. A dismount lets the batch in flight
//! finish, then discards the rest itself, once the group is its alone
//! ([`Group::discard_waiting_now`]).
//!
//! A discard that fails (a device that refuses it, an engine that fails
//! whole) is the disk's or the array's matter, never the operation's: the
//! free is durable before any discard is asked for. Its runs stay
//! returnable and the failure is logged.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cairn_format::group as fmt;
use cairn_format::group::AuAddr;
use cairn_io::DeviceId;

use super::discard_queue::{discard_runs, left_of, DiscardQueue, DiscardRun};
use super::limits::CLEAN_BLOCKS_PER_TXN;
use super::mounted::Group;

impl Group<'_> {
    /// Ask for the discard of `runs`, free of readers and no longer in
    /// any map: reserved until it is over. Behind a live group they are
    /// queued for its drain (those that do not fit go back unmarked);
    /// otherwise they are discarded now, on this group's engine.
    pub(super) fn discard_released(&mut self, runs: Vec<DiscardRun>) {
        if runs.is_empty() {
            return;
        }
        for r in &runs {
            if let Some(alloc) = self.member_mut(r.disk).and_then(|m| m.alloc.as_mut()) {
                alloc.keep_reservations(vec![(r.start, r.len)]);
            }
        }
        match self.discards.clone() {
            Some(queue) => {
                let left = queue.push(runs);
                let none = vec![false; left.len()];
                self.discards_done(&left, &none, &[]);
            }
            None => self.discard_now(&runs),
        }
    }

    /// Discard `runs` (reserved) now, on the metadata plane's engine, and
    /// give them back: for a group nobody else waits on.
    fn discard_now(&mut self, runs: &[DiscardRun]) {
        if runs.is_empty() {
            return;
        }
        let members: BTreeMap<u16, DeviceId> = self
            .members
            .numbers()
            .filter_map(|d| Some((d, self.member(d)?.writable()?)))
            .collect();
        let (ok, failed) = discard_runs(
            &mut *self.engine,
            |d| members.get(&d).copied(),
            self.au_bytes,
            runs,
        );
        if let Some(why) = failed {
            self.discard_failed(runs, &why);
        }
        self.discards_done(runs, &ok, &[]);
    }

    /// A live group let go of (its dismount, every data handle and its
    /// drain gone): the runs still waiting are discarded now, as a group
    /// one command holds discards them, and the group discards at once
    /// from here on. Without this, a command that frees space and
    /// dismounts at once (`cairn rm` on a group it holds) would leave
    /// every run it freed returnable.
    pub(super) fn discard_waiting_now(&mut self) {
        let Some(queue) = self.discards.take() else {
            return;
        };
        let runs = queue.take_waiting();
        self.discard_now(&runs);
    }

    /// The discards of `runs` are over (`ok`: per run, whether it
    /// completed): they go back to the free pool, and those that completed
    /// are marked in the running transaction, whose barrier flushes their
    /// disks first. At most [`CLEAN_BLOCKS_PER_TXN`] map blocks a
    /// transaction are marked, so that marks never crowd an operation's
    /// own blocks out of a record (a release can run twice in one step:
    /// `allocate_extent`'s retry); runs past that stay unmarked, and a
    /// reclaim discards them again, once.
    ///
    /// `lent`: pieces of these runs lent to new extents while their
    /// discards were in flight ([`DiscardQueue::lend`]): used now, they are
    /// neither given back nor marked.
    pub(super) fn discards_done(&mut self, runs: &[DiscardRun], ok: &[bool], lent: &[DiscardRun]) {
        let budget = CLEAN_BLOCKS_PER_TXN.saturating_sub(self.clean_dirty_blocks());
        let mut blocks = BTreeSet::new();
        let left: Vec<(DiscardRun, bool)> = runs
            .iter()
            .zip(ok)
            .flat_map(|(r, ok)| left_of(*r, lent).into_iter().map(move |p| (p, *ok)))
            .collect();
        for (r, ok) in &left {
            // (Parked with the disk's table if it went offline meanwhile.)
            self.unreserve_run(
                AuAddr {
                    disk: r.disk,
                    au: r.start,
                },
                u64::from(r.len),
            );
            if !ok {
                continue;
            }
            let first = u64::from(r.start) / fmt::AT_BITS_PER_BLOCK;
            let last = (u64::from(r.start) + u64::from(r.len) - 1) / fmt::AT_BITS_PER_BLOCK;
            let new = (first..=last)
                .filter(|b| !blocks.contains(&(r.disk, *b)))
                .count();
            if blocks.len() + new > budget {
                continue;
            }
            if let Some(alloc) = self.member_mut(r.disk).and_then(|m| m.alloc.as_mut()) {
                blocks.extend((first..=last).map(|b| (r.disk, b)));
                alloc.set_clean(r.start, r.len);
                // The discard must be durable before the mark is.
                self.txn.flush_before_record(r.disk);
            }
        }
    }

    /// The discards of `runs` failed whole (`why`): said once, in the log.
    /// The runs stay returnable; nothing else depends on them.
    pub(super) fn discard_failed(&self, runs: &[DiscardRun], why: &str) {
        let aus: u64 = runs.iter().map(|r| u64::from(r.len)).sum();
        tracing::warn!(
            group = %self.name,
            aus,
            "the discard of freed space failed ({why}); it stays returnable: `cairn group reclaim {}` gives it back to the array later",
            self.name
        );
    }

    /// Runs still waiting for their discard go back to the free pool
    /// unmarked (returnable): an allocation that found no space needs them
    /// now, or the queue is being let go of.
    pub(super) fn take_back_discards(&mut self) -> usize {
        let Some(queue) = self.discards.clone() else {
            return 0;
        };
        let runs = queue.take_waiting();
        let none = vec![false; runs.len()];
        self.discards_done(&runs, &none, &[]);
        runs.len()
    }

    /// Behind a live group: freed runs are queued on `queue` for its drain
    /// (`None`: discarded at once, by the commit that released them).
    pub(super) fn set_discard_queue(&mut self, queue: Option<Arc<DiscardQueue>>) {
        self.discards = queue;
    }
}
