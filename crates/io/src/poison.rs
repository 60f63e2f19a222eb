//! What a poisoned lock means in Cairn, decided here once.
//!
//! A `Mutex` or `RwLock` is poisoned when a thread panicked while holding
//! it. The policy: **take the guard anyway** ([`Recover`], and [`recover`]
//! for a `LockResult` a condition variable's wait or `sched::lock` hands
//! back). Every shared structure says who changes it under which lock, and
//! its critical sections leave it consistent wherever a panic can happen —
//! one assignment, one insert or removal, a counter, a value replaced
//! whole. The data behind a poisoned lock is then as good as behind any
//! other, and refusing it would only spread one thread's panic to every
//! thread that touches the lock after it: a service that stops answering,
//! a stop or a drain that never finishes, a `Drop` that panics while
//! unwinding.
//!
//! The exception is a lock held across a change of several steps that a
//! panic can leave half made. There poisoning is a failure, and the lock's
//! own accessor says so where it is defined:
//! - a live group's metadata (`store::group::live`, `meta`): the caller
//!   gets `GroupError::Poisoned`, the data plane stops, the group must be
//!   mounted again;
//! - the test kit's run state (`cairn_kit::engine::worker::lock`, an sd's
//!   schedule; `cairn_oltp::stats`, the counts; `cairn_oltp::cache`, the
//!   latches and frames; `cairn_oltp::redo`, the log's state): the panic
//!   spreads and the run fails, never reported from half-made figures. Their
//!   shutdown paths (waking waiters, a `Drop` while unwinding) recover, as
//!   they only set flags whole.

use std::sync::{LockResult, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The guard of a lock result, poisoned or not (the module's policy).
pub fn recover<G>(result: LockResult<G>) -> G {
    result.unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Taking a mutex under the module's policy: a poisoned one's guard is
/// taken as any other's.
pub trait Recover<T: ?Sized> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Recover<T> for Mutex<T> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T> {
        recover(self.lock())
    }
}

/// [`Recover`] for a reader-writer lock's two ways in.
pub trait RecoverRw<T: ?Sized> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T>;
    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RecoverRw<T> for RwLock<T> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T> {
        recover(self.read())
    }

    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T> {
        recover(self.write())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::catch_unwind;
    use std::sync::Condvar;
    use std::time::Duration;

    #[test]
    fn a_poisoned_lock_s_guard_is_taken_with_the_value_last_set() {
        let m = Mutex::new(1);
        let _ = catch_unwind(|| {
            *m.lock_or_recover() = 2;
            let _held = m.lock_or_recover();
            panic!("while holding the mutex");
        });
        assert!(m.is_poisoned());
        assert_eq!(*m.lock_or_recover(), 2);
        let (g, waited) = recover(Condvar::new().wait_timeout(m.lock_or_recover(), Duration::ZERO));
        assert!(waited.timed_out());
        assert_eq!(*g, 2);

        let rw = RwLock::new(vec![1]);
        let _ = catch_unwind(|| {
            rw.write_or_recover().push(2);
            let _held = rw.write_or_recover();
            panic!("while holding the rwlock");
        });
        assert!(rw.is_poisoned());
        assert_eq!(*rw.read_or_recover(), [1, 2]);
        rw.write_or_recover().push(3);
        assert_eq!(rw.read_or_recover().len(), 3);
    }
}
