//! The live core's lock order, asserted where the locks are taken
//! (`docs/live-core.md`, "Lock order"): an extent latch, then `meta`, then
//! the checksum log's writer, or `DRAIN`, then a leaf lock; a leaf lock is held only to read or swap a pointer and
//! never while another lock is taken; `meta` is never taken twice. Latches
//! may be taken while latches are held: one call takes its keys in key
//! order, and the latch code itself keeps to it.
//!
//! In debug builds (the tests, the crash and interleaving simulators) each
//! thread keeps the ranks it holds, and taking a lock out of order panics
//! naming both locks, before the thread could block: a deadlock the order
//! would allow shows up as an assertion on the first run that takes the
//! two locks in the wrong order, whatever the interleaving. In release
//! builds a [`Held`] is empty and taking one costs nothing.
//!
//! Asserted: extent latches (`DataPlane::latch`), `meta` (`LiveGroup`'s
//! metadata lock), `DRAIN`, and the leaf locks: the data plane's (its
//! files, its disk view, its guard registry, its latch shards), the commit
//! gate's and the discard queue's.

/// Where a lock stands in the order: a lock may be taken only while every
/// lock the thread holds ranks below it (latches: at or below).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    Latch,
    Meta,
    /// The checksum log's writer (`sums_log.rs`): held across a record's
    /// write and flush, by a data operation (which may hold latches) or by
    /// the metadata plane's checkpoint of the maps (under `meta`).
    Log,
    /// `DRAIN`, the drains' mutex: a drain checks the guard slots (a leaf)
    /// while it holds it, so that an operation ending between its check
    /// and its wait cannot be missed.
    Drain,
    Leaf,
}

/// A rank held by this thread, from [`take`] until dropped.
#[derive(Debug)]
#[must_use = "the rank is held only while the token lives"]
pub(crate) struct Held {
    #[cfg(debug_assertions)]
    rank: Rank,
    #[cfg(debug_assertions)]
    name: &'static str,
}

#[cfg(debug_assertions)]
thread_local! {
    static HELD: std::cell::RefCell<Vec<(Rank, &'static str)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Note that this thread is about to take lock `name` of rank `rank`,
/// asserting (debug builds) that the order allows it.
#[inline]
pub(crate) fn take(rank: Rank, name: &'static str) -> Held {
    #[cfg(debug_assertions)]
    HELD.with(|held| {
        let held = held.borrow();
        if let Some(&(r, n)) = held.iter().find(|(r, _)| !allowed(*r, rank)) {
            // Leave the thread's record as it was: the panic may be
            // caught (a test's), and its guards drop as it unwinds.
            drop(held);
            panic!("lock order: {name} ({rank:?}) taken while this thread holds {n} ({r:?}); the order is extent latch, then meta, then one leaf lock (docs/live-core.md)");
        }
    });
    note(rank, name)
}

/// Note that this thread took lock `name` of rank `rank` without waiting
/// for it (a `try_latch`): that cannot deadlock, so the order is not
/// asserted, but what is taken while it is held is.
#[inline]
pub(crate) fn note(rank: Rank, name: &'static str) -> Held {
    #[cfg(debug_assertions)]
    {
        HELD.with(|held| held.borrow_mut().push((rank, name)));
        Held { rank, name }
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = (rank, name);
        Held {}
    }
}

/// A lock's guard with this thread's rank for it; the lock is let go
/// first (fields drop in order).
pub(crate) struct Ranked<G> {
    guard: G,
    _rank: Held,
}

impl<G> Ranked<G> {
    /// Take lock `name` of rank `rank` with `lock`, the order asserted
    /// before it could block.
    #[inline]
    pub(crate) fn take(rank: Rank, name: &'static str, lock: impl FnOnce() -> G) -> Self {
        let rank = take(rank, name);
        Ranked {
            guard: lock(),
            _rank: rank,
        }
    }

    /// [`Self::take`] with a lock that may fail (a poisoned one): the
    /// rank is let go with the failure.
    #[inline]
    pub(crate) fn try_take<E>(
        rank: Rank,
        name: &'static str,
        lock: impl FnOnce() -> Result<G, E>,
    ) -> Result<Self, E> {
        let rank = take(rank, name);
        Ok(Ranked {
            guard: lock()?,
            _rank: rank,
        })
    }

    /// Hand the guard to `f` and keep what it gives back (a condition
    /// variable's wait), the rank held throughout.
    #[inline]
    pub(crate) fn map(self, f: impl FnOnce(G) -> G) -> Self {
        Ranked {
            guard: f(self.guard),
            _rank: self._rank,
        }
    }
}

impl<G: std::ops::Deref> std::ops::Deref for Ranked<G> {
    type Target = G::Target;
    fn deref(&self) -> &G::Target {
        &self.guard
    }
}

impl<G: std::ops::DerefMut> std::ops::DerefMut for Ranked<G> {
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.guard
    }
}

/// Whether a thread holding `held` may take a lock of rank `taking`.
#[cfg(debug_assertions)]
fn allowed(held: Rank, taking: Rank) -> bool {
    match (held, taking) {
        (Rank::Latch, _) => true,
        (Rank::Meta, Rank::Log | Rank::Drain | Rank::Leaf) => true,
        (Rank::Log | Rank::Drain, Rank::Leaf) => true,
        (Rank::Meta | Rank::Log | Rank::Drain | Rank::Leaf, _) => false,
    }
}

#[cfg(debug_assertions)]
impl Drop for Held {
    fn drop(&mut self) {
        // Guards may be dropped in any order: remove the latest entry of
        // this lock, not necessarily the top. `try_with`: a thread's
        // record may already be gone while its statics are destroyed.
        let _ = HELD.try_with(|held| {
            let mut held = held.borrow_mut();
            if let Some(i) = held
                .iter()
                .rposition(|&(r, n)| r == self.rank && n == self.name)
            {
                held.remove(i);
            }
        });
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    fn panics(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let e = std::panic::catch_unwind(f).expect_err("the order is broken: it must panic");
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn the_order_latch_meta_leaf_is_allowed() {
        let latch = take(Rank::Latch, "latch");
        let second = take(Rank::Latch, "another latch");
        let meta = take(Rank::Meta, "meta");
        let leaf = take(Rank::Leaf, "files");
        drop(leaf);
        let leaf = take(Rank::Leaf, "disks");
        drop((leaf, meta, second, latch));
        // And all let go: any lock may be taken again.
        drop(take(Rank::Latch, "latch"));
    }

    #[test]
    fn a_latch_under_meta_a_lock_under_a_leaf_and_meta_twice_are_refused() {
        let m = panics(|| {
            let _meta = take(Rank::Meta, "meta");
            let _latch = take(Rank::Latch, "extent latch");
        });
        assert!(
            m.contains("extent latch (Latch) taken while this thread holds meta (Meta)"),
            "{m}"
        );
        let m = panics(|| {
            let _leaf = take(Rank::Leaf, "files");
            let _meta = take(Rank::Meta, "meta");
        });
        assert!(
            m.contains("meta (Meta) taken while this thread holds files (Leaf)"),
            "{m}"
        );
        let m = panics(|| {
            let _leaf = take(Rank::Leaf, "files");
            let _leaf = take(Rank::Leaf, "disks");
        });
        assert!(
            m.contains("disks (Leaf) taken while this thread holds files (Leaf)"),
            "{m}"
        );
        let m = panics(|| {
            let _meta = take(Rank::Meta, "meta");
            let _meta = take(Rank::Meta, "meta");
        });
        assert!(
            m.contains("meta (Meta) taken while this thread holds meta (Meta)"),
            "{m}"
        );
    }

    #[test]
    fn guards_let_go_in_any_order() {
        let latch = take(Rank::Latch, "latch");
        let meta = take(Rank::Meta, "meta");
        drop(latch);
        let leaf = take(Rank::Leaf, "files");
        drop((meta, leaf));
        HELD.with(|h| assert!(h.borrow().is_empty(), "{:?}", h.borrow()));
    }
}
