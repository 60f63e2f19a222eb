//! io_uring's kernel workers, per submitting thread: what a device that
//! hangs can take from the others, and the headroom that stops it.
//!
//! What io_uring cannot issue without blocking runs on a kernel worker
//! (io-wq): every fsync; a read or write of a FUSE file (the engine sends
//! them there: `uring_engine.rs`); a direct write into a hole of a file
//! (it allocates); a block request that finds the device's queue full. The
//! workers belong to the *thread that entered the request*
//! into the kernel — one pool per thread, shared by every ring that thread
//! uses — and those for files and block devices are bounded: by default
//! min(the entries of the first ring the thread used, 4 × CPUs), 8 on two
//! CPUs. A request that a device does not answer keeps its worker until the
//! device answers, long after the engine timed it out, and the engine's
//! cancel cannot take it back: a FUSE request is waited for uninterruptibly
//! once the daemon has read it (a second fsync of the file waits,
//! uninterruptibly too, for the first one's inode lock), and a bio in the
//! block layer cannot be recalled. Once every worker of a thread is held so,
//! the thread's next request that needs one — a healthy disk's flush —
//! waits for a worker that never comes, times out, and its disk is reported
//! failed beside the hung one. The store's threads go from disk to disk (a
//! commit flushes every disk it wrote, a data handle writes every copy), so
//! in a group that is a second disk lost to one that hangs, and with the
//! hung disk's failure group down, the group stops (`tests/hang.rs`
//! `flushes_a_hung_device_holds_leave_the_thread_workers_for_a_healthy_one`).
//!
//! The rule kept here: **a thread's worker bound is never below the pieces
//! it has in the kernel, plus one.** Then each piece can have a worker of
//! its own, and none waits for one behind another device's, however many
//! a hung device holds. Each thread counts its pieces in the kernel
//! ([`Submitter`]: entered by it, not yet reaped by anyone — a ring used by
//! several threads in turn reaps pieces other threads entered), and an
//! engine about to enter pieces raises the calling thread's bound first if
//! the count has reached it ([`Submitters::entered`], with
//! IORING_REGISTER_IOWQ_MAX_WORKERS).
//!
//! A registration on a ring sets the bound of every thread that has used
//! that ring, not only the caller's. So registrations are made one at a
//! time, and the value registered is the process's high-water mark (never
//! lowered), at least 4 × CPUs (the largest default): no registration ever
//! lowers a thread's bound below what it needs. The kernel makes workers
//! only for work that waits for one and lets idle ones go: a higher bound
//! changes nothing until more of a thread's pieces wait for a worker at
//! once than the default allows, and those then run side by side (the
//! kernel's own rule is one worker per ring entry, capped at 4 per CPU).
//! The kernel caps the bound at the process's RLIMIT_NPROC. A kernel that
//! refuses the registration (older than 5.15) keeps its default, and there
//! the rule does not hold.
//!
//! The count costs no read-modify-write and no lazily made thread-local on
//! the common path: a ring remembers the slot of the thread that used it
//! last (a thread is known by a number in a constant thread-local), the
//! thread adds its own pieces once per batch and takes them away with
//! plain loads and stores, and only a piece reaped by another thread goes
//! to a second, shared counter. The check before entering is three loads
//! and a compare.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

use io_uring::IoUring;

use crate::poison::Recover;

/// The fewest entries a ring of ours has: the smallest default worker
/// bound a thread that entered one of our rings first can have is this or
/// 4 × CPUs, whichever is smaller.
pub(crate) const SQ_ENTRIES_MIN: usize = 8;

/// One thread's pieces in the kernel, over every ring it entered them into,
/// and its worker bound.
#[derive(Debug, Default)]
pub(crate) struct Submitter {
    /// Pieces the thread entered, less those it reaped itself. Written by
    /// that thread only (a plain load and store: no other writer).
    own: AtomicUsize,
    /// Pieces of the thread's that other threads reaped (a ring handed on
    /// with pieces in the kernel, or a dropped ring's reaper). Added to by
    /// any thread; read by the owner, for whom a reap not seen yet can only
    /// overstate its count (a bound raised early).
    reaped_elsewhere: AtomicUsize,
    /// The worker bound the thread's pool is known to have at least (0:
    /// not yet looked at). Written and read by the thread only.
    bound: AtomicUsize,
}

/// Numbers threads (from 1) as they first enter a piece: never reused.
static NEXT_THREAD_NUMBER: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's number, 0 until it has one. Constant-initialised, so
    /// reading it is a load.
    static THREAD_NUMBER: Cell<u64> = const { Cell::new(0) };
    /// This thread's count, shared by the slots every ring gives it.
    /// Reached only when a ring gives the thread a slot.
    static THIS_THREAD: Arc<Submitter> = Arc::new(Submitter::default());
}

#[inline]
fn thread_number() -> u64 {
    THREAD_NUMBER.with(|n| match n.get() {
        0 => first_thread_number(n),
        number => number,
    })
}

#[cold]
fn first_thread_number(n: &Cell<u64>) -> u64 {
    let number = NEXT_THREAD_NUMBER.fetch_add(1, Relaxed);
    n.set(number);
    number
}

/// One thread's slot in a ring: its number, its count, and how many of its
/// pieces this ring holds.
#[derive(Debug)]
struct Slot {
    thread: u64,
    submitter: Arc<Submitter>,
    held: usize,
}

/// The threads whose pieces a ring holds; a piece names its thread by an
/// index here. Owned by the engine, used by one thread at a time.
#[derive(Debug, Default)]
pub(crate) struct Submitters {
    /// A slot whose `held` is 0 is given to the next new thread, so the
    /// slots are at most the threads with pieces here at once.
    slots: Vec<Slot>,
    /// The slot of the ring's last user, and its thread's number (0: none):
    /// almost always the caller's.
    last: usize,
    last_thread: u64,
}

impl Submitters {
    /// The calling thread's slot (made if it has none).
    #[inline]
    pub(crate) fn mine(&mut self) -> u16 {
        let thread = thread_number();
        if thread == self.last_thread {
            return self.last as u16;
        }
        self.find_or_give(thread)
    }

    #[cold]
    fn find_or_give(&mut self, thread: u64) -> u16 {
        let i = match self.slots.iter().position(|s| s.thread == thread) {
            Some(i) => i,
            None => {
                let slot = Slot {
                    thread,
                    submitter: THIS_THREAD.with(Arc::clone),
                    held: 0,
                };
                match self.slots.iter().position(|s| s.held == 0) {
                    Some(i) => {
                        self.slots[i] = slot;
                        i
                    }
                    None => {
                        self.slots.push(slot);
                        self.slots.len() - 1
                    }
                }
            }
        };
        self.last = i;
        self.last_thread = thread;
        u16::try_from(i).expect("invariant: fewer than 2^16 threads hold pieces in one ring")
    }

    /// The calling thread's slot, if it has one (none is made).
    #[inline]
    pub(crate) fn find_mine(&self) -> Option<u16> {
        let thread = THREAD_NUMBER.with(Cell::get);
        if thread != 0 && thread == self.last_thread {
            return Some(self.last as u16);
        }
        self.slots
            .iter()
            .position(|s| s.thread == thread)
            .map(|i| i as u16)
    }

    /// `n` pieces entered by the thread of `slot`, which is the calling
    /// thread, about to be handed to `ring`: first, raise the thread's
    /// worker bound if its pieces in the kernel have reached it (see the
    /// module's notes).
    #[inline]
    pub(crate) fn entered(&mut self, slot: u16, n: usize, ring: &IoUring) {
        let slot = &mut self.slots[usize::from(slot)];
        slot.held += n;
        let thread = &*slot.submitter;
        let own = thread.own.load(Relaxed) + n;
        thread.own.store(own, Relaxed);
        let needed = own.saturating_sub(thread.reaped_elsewhere.load(Relaxed)) + 1;
        if needed > thread.bound.load(Relaxed) {
            grow(ring, needed, &thread.bound);
        }
    }

    /// `n` pieces of the calling thread's, whose slot is `slot`, reaped by
    /// it.
    #[inline]
    pub(crate) fn reaped_own(&mut self, slot: u16, n: usize) {
        let slot = &mut self.slots[usize::from(slot)];
        slot.held -= n;
        let own = &slot.submitter.own;
        own.store(own.load(Relaxed) - n, Relaxed);
    }

    /// A piece of `slot`'s thread reaped by another thread (the caller).
    pub(crate) fn reaped_elsewhere(&mut self, slot: u16) {
        let slot = &mut self.slots[usize::from(slot)];
        slot.held -= 1;
        slot.submitter.reaped_elsewhere.fetch_add(1, Relaxed);
    }
}

/// 4 × the CPUs online: the kernel's cap on a thread's default bound.
fn four_per_cpu() -> usize {
    static FOUR_PER_CPU: OnceLock<usize> = OnceLock::new();
    *FOUR_PER_CPU.get_or_init(|| {
        // SAFETY: sysconf reads a system value and touches no memory of ours.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        4 * usize::try_from(cpus).unwrap_or(1).max(1)
    })
}

/// The bound last registered: the process's high-water mark. Held only
/// across one registration (a leaf lock), so that registrations, each of
/// which sets every thread of its ring, never go down.
static HIGH_WATER: Mutex<usize> = Mutex::new(0);
/// The kernel refused a registration: it will again, so it is not asked.
static REFUSED: AtomicBool = AtomicBool::new(false);

/// The calling thread's `bound` is below `needed`, or not yet looked at:
/// at first it is the smallest default, then it is raised on `ring`.
#[cold]
fn grow(ring: &IoUring, needed: usize, bound: &AtomicUsize) {
    if bound.load(Relaxed) == 0 {
        bound.store(SQ_ENTRIES_MIN.min(four_per_cpu()), Relaxed);
        if needed <= bound.load(Relaxed) {
            return;
        }
    }
    if REFUSED.load(Relaxed) {
        return;
    }
    let mut high = HIGH_WATER.lock_or_recover();
    let want = needed.next_power_of_two().max(four_per_cpu()).max(*high);
    let mut limits = [u32::try_from(want).unwrap_or(u32::MAX), 0];
    match ring.submitter().register_iowq_max_workers(&mut limits) {
        Ok(()) => {
            *high = want;
            bound.store(want, Relaxed);
        }
        Err(_) => REFUSED.store(true, Relaxed),
    }
}
