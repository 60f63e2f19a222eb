//! The queue of discards a live group runs off the commit path, its
//! bounds, and running a batch of them on an engine: what `discard.rs`
//! (the group's side) hands its freed runs to.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use cairn_io::poison::{recover, Recover};
use cairn_io::{DeviceId, IoEngine, Op, Request};

use crate::lock_order::{Rank, Ranked};

/// Runs waiting for their discard at most. A delete of a 1 TiB file with
/// 4 MiB AUs frees about 256K runs at worst (one per extent copy, when no
/// two are adjacent), so a big delete overflows it: the rest is left
/// returnable rather than held out of the free pool for minutes.
pub const DISCARD_QUEUE_RUNS_MAX: usize = 4096;

/// Runs one drain discards at once (requests in flight on its engine at
/// most): each is at most an extent copy's AUs (16 of them: 64 MiB with
/// 4 MiB AUs), so a batch that must end before a stop returns is bounded.
pub const DISCARD_BATCH_RUNS_MAX: usize = 64;

/// One freed run whose discard is asked for: `len` AUs from `start` on
/// disk `disk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscardRun {
    pub disk: u16,
    pub start: u32,
    pub len: u32,
}

/// The runs of a live group waiting for their discard.
///
/// Who changes it: the metadata plane pushes runs under `meta` (it has
/// reserved them first), takes back those still waiting (an allocation
/// short of space, a dismount) and lends pieces of batches in flight (an
/// allocation still short); a drain takes batches without `meta`, says when
/// their discards are over, and finishes them under `meta` as it hands
/// their results to the metadata plane (so no piece is lent from a batch
/// whose runs went back). Its mutex is a leaf lock: held only to move runs
/// in or out, never while taking `meta` or a latch, never across I/O.
#[derive(Debug, Default)]
pub struct DiscardQueue {
    state: Mutex<QueueState>,
    /// Signalled when runs arrive or the queue stops (the drain thread
    /// waits on it).
    changed: Condvar,
}

#[derive(Debug, Default)]
struct QueueState {
    runs: VecDeque<DiscardRun>,
    /// Batches drains have taken whose results the metadata plane does not
    /// have yet.
    taken: Vec<Taken>,
    /// The next batch's number.
    next_batch: u64,
    /// Nothing more is queued or taken: a dismount.
    stopped: bool,
}

/// A batch a drain has taken.
#[derive(Debug)]
struct Taken {
    id: u64,
    runs: Vec<DiscardRun>,
    /// Set once its discards are over (done or failed): a first write into
    /// a piece lent from it waits for that (`plane.rs`, `Lent`).
    over: Arc<AtomicBool>,
    /// Pieces of its runs lent to new extents meanwhile (at most one per
    /// run, at its start): used now, so neither given back nor marked.
    lent: Vec<DiscardRun>,
}

/// A batch of runs a drain discards ([`DiscardQueue::take`]); reported
/// with [`DiscardQueue::discarded`] once its discards are over, and with
/// [`DiscardQueue::finish`] once its runs are back.
#[derive(Debug)]
pub(super) struct Batch {
    id: u64,
    pub(super) runs: Vec<DiscardRun>,
    over: Arc<AtomicBool>,
}

impl DiscardQueue {
    fn state(&self) -> Ranked<MutexGuard<'_, QueueState>> {
        // One push or pop per critical section: a panic leaves nothing half
        // changed.
        Ranked::take(Rank::Leaf, "the discard queue", || {
            self.state.lock_or_recover()
        })
    }

    /// Queue `runs` (reserved by the caller). Returns those that do not
    /// fit, or all of them once stopped: the caller gives them back
    /// unmarked.
    pub(super) fn push(&self, runs: Vec<DiscardRun>) -> Vec<DiscardRun> {
        let mut st = self.state();
        if st.stopped {
            return runs;
        }
        let room = DISCARD_QUEUE_RUNS_MAX.saturating_sub(st.runs.len());
        let mut runs = runs.into_iter();
        st.runs.extend(runs.by_ref().take(room));
        let left: Vec<DiscardRun> = runs.collect();
        drop(st);
        self.changed.notify_all();
        left
    }

    /// Take a batch to discard: at most [`DISCARD_BATCH_RUNS_MAX`] runs;
    /// none while none wait, or once stopped. The caller reports it with
    /// [`Self::discarded`], then [`Self::finish`].
    pub(super) fn take(&self) -> Option<Batch> {
        let mut st = self.state();
        if st.stopped || st.runs.is_empty() {
            return None;
        }
        let n = st.runs.len().min(DISCARD_BATCH_RUNS_MAX);
        let runs: Vec<DiscardRun> = st.runs.drain(..n).collect();
        let id = st.next_batch;
        st.next_batch += 1;
        let over = Arc::new(AtomicBool::new(false));
        st.taken.push(Taken {
            id,
            runs: runs.clone(),
            over: over.clone(),
            lent: Vec::new(),
        });
        Some(Batch { id, runs, over })
    }

    /// The discards of `batch` are over (done or failed): first writes
    /// into pieces lent from it may go on.
    pub(super) fn discarded(&self, batch: &Batch) {
        batch.over.store(true, Ordering::SeqCst);
        super::plane::wake_drains();
    }

    /// `batch`'s results are with the metadata plane (under `meta`, as
    /// lending is): it is no longer taken. Returns the pieces of it lent
    /// meanwhile, which its results must leave alone.
    pub(super) fn finish(&self, batch: &Batch) -> Vec<DiscardRun> {
        let mut st = self.state();
        let lent = match st.taken.iter().position(|t| t.id == batch.id) {
            Some(at) => st.taken.swap_remove(at).lent,
            None => Vec::new(),
        };
        drop(st);
        self.changed.notify_all();
        lent
    }

    /// A run of a batch in flight on `disk` with `len` AUs or more, none of
    /// them lent yet, that `reserved` says is still reserved whole: what an
    /// allocation that found no space may lend. Under `meta` (batches are
    /// finished under it too, so the run stays taken until [`Self::lend`]).
    pub(super) fn lendable(
        &self,
        disk: u16,
        len: u64,
        reserved: impl Fn(&DiscardRun) -> bool,
    ) -> Option<DiscardRun> {
        let st = self.state();
        st.taken.iter().find_map(|t| {
            t.runs
                .iter()
                .find(|r| {
                    r.disk == disk
                        && u64::from(r.len) >= len
                        && !t
                            .lent
                            .iter()
                            .any(|l| l.disk == r.disk && l.start == r.start)
                        && reserved(r)
                })
                .copied()
        })
    }

    /// Lend the first `len` AUs of `run` ([`Self::lendable`]); returns
    /// what says when its batch's discards are over.
    pub(super) fn lend(&self, run: DiscardRun, len: u64) -> Arc<AtomicBool> {
        let mut st = self.state();
        let taken = st
            .taken
            .iter_mut()
            .find(|t| t.runs.contains(&run))
            .expect("invariant: lendable named a run in flight");
        taken.lent.push(DiscardRun {
            len: u32::try_from(len).expect("invariant: extent AUs fit u32"),
            ..run
        });
        taken.over.clone()
    }

    /// Take back every run not yet taken by a drain.
    pub(super) fn take_waiting(&self) -> Vec<DiscardRun> {
        self.state().runs.drain(..).collect()
    }

    /// Take no more runs: a drain ends after its batch, and a push is
    /// refused from now on.
    pub(super) fn stop(&self) {
        self.state().stopped = true;
        self.changed.notify_all();
    }

    /// Wait until runs wait or the queue stops; false once stopped. For
    /// the drain thread, which holds nothing while it waits.
    pub(super) fn wait_for_runs(&self) -> bool {
        let mut st = self.state();
        while st.runs.is_empty() && !st.stopped {
            st = st.map(|g| recover(self.changed.wait(g)));
        }
        !st.stopped
    }

    /// Whether runs wait (not counting a batch in flight).
    pub(super) fn has_waiting(&self) -> bool {
        !self.state().runs.is_empty()
    }

    /// Runs waiting or in flight: reserved for a discard, handed to nobody
    /// (but for pieces lent meanwhile).
    pub fn pending(&self) -> usize {
        let st = self.state();
        st.runs.len() + st.taken.iter().map(|t| t.runs.len()).sum::<usize>()
    }

    /// Runs waiting for a drain to take them.
    pub fn waiting(&self) -> usize {
        self.state().runs.len()
    }
}

/// What is left of `run` once the pieces of it in `lent` are taken out:
/// the runs still reserved for its discard.
pub(super) fn left_of(run: DiscardRun, lent: &[DiscardRun]) -> Vec<DiscardRun> {
    let mut left = vec![run];
    for l in lent.iter().filter(|l| l.disk == run.disk) {
        let (ls, le) = (l.start, l.start + l.len);
        left = left
            .into_iter()
            .flat_map(|p| {
                let (ps, pe) = (p.start, p.start + p.len);
                if le <= ps || pe <= ls {
                    return vec![p];
                }
                [(ps, ls.max(ps)), (le.min(pe), pe)]
                    .into_iter()
                    .filter(|(s, e)| e > s)
                    .map(|(s, e)| DiscardRun {
                        disk: p.disk,
                        start: s,
                        len: e - s,
                    })
                    .collect()
            })
            .collect();
    }
    left
}

/// Discard `runs` (AUs of `au_bytes`) on `engine`, whose device for a
/// member disk `device` gives (none: not discarded). Per run, whether its
/// discard completed; and, if the engine failed whole, why.
pub(super) fn discard_runs(
    engine: &mut dyn IoEngine,
    device: impl Fn(u16) -> Option<DeviceId>,
    au_bytes: u64,
    runs: &[DiscardRun],
) -> (Vec<bool>, Option<String>) {
    let mut ok = vec![false; runs.len()];
    let mut requests = Vec::with_capacity(runs.len());
    for (i, r) in runs.iter().enumerate() {
        if let Some(device) = device(r.disk) {
            requests.push(Request {
                device,
                tag: i as u64,
                op: Op::Discard {
                    offset_bytes: u64::from(r.start) * au_bytes,
                    len_bytes: u64::from(r.len) * au_bytes,
                },
            });
        }
    }
    match engine.execute_all(requests) {
        Ok(done) => {
            for c in done {
                if let Some(slot) = usize::try_from(c.tag).ok().and_then(|t| ok.get_mut(t)) {
                    *slot = c.result.is_ok();
                }
            }
            (ok, None)
        }
        Err(e) => (ok, Some(e.to_string())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(disk: u16, start: u32, len: u32) -> DiscardRun {
        DiscardRun { disk, start, len }
    }

    /// What is left of a run once pieces of it were lent: every AU not
    /// lent, as the runs `DiskAlloc::lend_reserved` leaves reserved.
    #[test]
    fn what_is_left_of_a_run_once_pieces_are_lent() {
        assert_eq!(left_of(run(1, 10, 4), &[]), vec![run(1, 10, 4)]);
        assert_eq!(
            left_of(run(1, 10, 4), &[run(1, 10, 1)]),
            vec![run(1, 11, 3)]
        );
        assert_eq!(
            left_of(run(1, 10, 4), &[run(1, 11, 2)]),
            vec![run(1, 10, 1), run(1, 13, 1)]
        );
        assert_eq!(left_of(run(1, 10, 4), &[run(1, 10, 4)]), vec![]);
        assert_eq!(
            left_of(run(1, 10, 4), &[run(2, 10, 4), run(1, 20, 4)]),
            vec![run(1, 10, 4)],
            "another disk's piece, or another run's"
        );
    }

    /// A piece is lent only from a batch in flight, once per run, and only
    /// while the run is reserved whole; the batch's flag goes with it, and
    /// the pieces come back with the batch.
    #[test]
    fn a_batch_in_flight_lends_each_run_once() {
        let q = DiscardQueue::default();
        assert!(q.push(vec![run(0, 10, 4), run(1, 20, 1)]).is_empty());
        assert_eq!(
            q.lendable(0, 1, |_| true),
            None,
            "waiting: taken back, not lent"
        );
        let batch = q.take().unwrap();
        assert_eq!(q.waiting(), 0);
        assert_eq!(q.pending(), 2);
        assert_eq!(q.lendable(0, 5, |_| true), None, "too short");
        assert_eq!(
            q.lendable(0, 1, |_| false),
            None,
            "no longer reserved whole"
        );
        let r = q.lendable(0, 2, |_| true).unwrap();
        assert_eq!(r, run(0, 10, 4));
        let over = q.lend(r, 2);
        assert!(!over.load(Ordering::SeqCst));
        assert_eq!(q.lendable(0, 1, |_| true), None, "lent once");
        q.discarded(&batch);
        assert!(over.load(Ordering::SeqCst));
        assert_eq!(q.finish(&batch), vec![run(0, 10, 2)]);
        assert_eq!(q.pending(), 0);
    }
}
