//! Where a deterministic scheduler may switch threads.
//!
//! In production nothing is installed and every function here is a no-op
//! (one thread-local read), or the plain blocking call. The interleaving
//! simulator (`cairn_io_sim::turnstile`) runs its actors as threads of which
//! exactly one runs at a time, and installs a [`Scheduler`] on each: the
//! simulated disks call [`yield_now`] at every submit and wait, and the few
//! places in the product that block while another thread may hold the baton
//! — taking a lock that is held across I/O, waiting for a latch — call
//! [`lock`] and [`blocked`], which yield instead of blocking. Every switch is
//! then the scheduler's choice, drawn from its seed, so a run replays exactly.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

/// A scheduler that decides which thread runs next.
pub trait Scheduler: Send + Sync {
    /// The calling thread may be switched out here.
    fn yield_now(&self);
    /// The calling thread cannot go on until another thread acts (it waits
    /// for a lock or a latch another holds): switch to another.
    fn blocked(&self);
    /// As [`Scheduler::blocked`], with a way to tell, without running the
    /// caller, whether it may go on: `may_go_on` is true once what it waits
    /// for may have come (a lock free again). A scheduler may skip handing
    /// the caller the baton while it says no — each hand-over is a context
    /// switch, and most of a waiter's turns found the lock still held. It
    /// is called from another thread, while the caller is switched out
    /// here, and must not block.
    fn blocked_until(&self, may_go_on: &(dyn Fn() -> bool + Sync)) {
        let _ = may_go_on;
        self.blocked();
    }
    /// The calling thread, which called [`Scheduler::blocked`], got what it
    /// waited for and goes on (from here it may let go of what others wait
    /// for).
    fn resumed(&self) {}
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<dyn Scheduler>>> = const { RefCell::new(None) };
}

/// Install `scheduler` for the calling thread (`None` removes it).
pub fn install(scheduler: Option<Arc<dyn Scheduler>>) {
    CURRENT.with(|c| *c.borrow_mut() = scheduler);
}

fn current() -> Option<Arc<dyn Scheduler>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// A point where the scheduler may switch threads; nothing in production.
pub fn yield_now() {
    if let Some(s) = current() {
        s.yield_now();
    }
}

/// Whether a scheduler runs this thread.
pub fn scheduled() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// The caller waits for another thread: under a scheduler, switch to
/// another; otherwise the caller blocks by its own means (returns `false`).
pub fn blocked() -> bool {
    match current() {
        Some(s) => {
            s.blocked();
            true
        }
        None => false,
    }
}

/// [`blocked`], with `may_go_on` to tell the scheduler, without running
/// the caller, whether what it waits for may have come
/// ([`Scheduler::blocked_until`]).
pub fn blocked_until(may_go_on: &(dyn Fn() -> bool + Sync)) -> bool {
    match current() {
        Some(s) => {
            s.blocked_until(may_go_on);
            true
        }
        None => false,
    }
}

/// The caller, which waited through [`blocked`], goes on: under a
/// scheduler, say so (nothing otherwise). Every wait loop that calls
/// [`blocked`] calls this once it leaves.
pub fn resumed() {
    if let Some(s) = current() {
        s.resumed();
    }
}

/// Lock `mutex`; under a scheduler, yield while another thread holds it
/// instead of blocking (the holder cannot run while we block). A poisoned
/// lock is returned as the `Err` of [`Mutex::lock`] would: the caller
/// applies [`crate::poison`]'s policy, or its lock's stated exception.
pub fn lock<T: Send>(
    mutex: &Mutex<T>,
) -> Result<MutexGuard<'_, T>, PoisonError<MutexGuard<'_, T>>> {
    let Some(s) = current() else {
        return mutex.lock();
    };
    let mut waited = false;
    loop {
        let got = match mutex.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::Poisoned(p)) => Err(p),
            Err(TryLockError::WouldBlock) => {
                // Free again (or poisoned, which the caller must hear).
                s.blocked_until(&|| !matches!(mutex.try_lock(), Err(TryLockError::WouldBlock)));
                waited = true;
                continue;
            }
        };
        if waited {
            s.resumed();
        }
        return got;
    }
}
