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
//! the count has reached it ([`make_room`], with
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
//! The count costs no read-modify-write on the common path: a thread adds
//! and takes away its own pieces with plain loads and stores, and only a
//! piece reaped by another thread goes to a second, shared counter.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

use io_uring::IoUring;

use crate::poison::Recover;

/// The fewest entries a ring of ours has: the smallest default worker
/// bound a thread that entered one of our rings first can have is this or
/// 4 × CPUs, whichever is smaller.
pub(crate) const SQ_ENTRIES_MIN: usize = 8;

/// One thread's pieces in the kernel, over every ring it entered them into.
#[derive(Debug, Default)]
pub(crate) struct Submitter {
    /// Pieces the thread entered, less those it reaped itself. Written by
    /// that thread only (a plain load and store: no other writer).
    own: AtomicUsize,
    /// Pieces of the thread's that other threads reaped (a ring handed on
    /// with pieces in the kernel, or a dropped ring's reaper). Added to by
    /// any thread.
    reaped_elsewhere: AtomicUsize,
}

impl Submitter {
    /// Read by the owning thread: another thread's reaps may not be seen
    /// yet, which can only overstate the count (a bound raised early).
    fn in_kernel(&self) -> usize {
        self.own
            .load(Relaxed)
            .saturating_sub(self.reaped_elsewhere.load(Relaxed))
    }
}

thread_local! {
    static THIS_THREAD: Arc<Submitter> = Arc::new(Submitter::default());
    /// The worker bound this thread's pool is known to have at least (0:
    /// only the default).
    static BOUND: Cell<usize> = const { Cell::new(0) };
}

/// The threads whose pieces a ring holds; a piece names its thread by an
/// index here. Owned by the engine, used by one thread at a time.
#[derive(Debug, Default)]
pub(crate) struct Submitters {
    /// A thread, and how many of its pieces this ring holds. A slot whose
    /// count is 0 is given to the next new thread, so the slots are at most
    /// the threads with pieces here at once.
    slots: Vec<(Arc<Submitter>, usize)>,
}

impl Submitters {
    /// The calling thread's slot (made if it has none).
    pub(crate) fn mine(&mut self) -> u16 {
        THIS_THREAD.with(|me| {
            let i = match self.slots.iter().position(|(s, _)| Arc::ptr_eq(s, me)) {
                Some(i) => i,
                None => match self.slots.iter().position(|(_, held)| *held == 0) {
                    Some(i) => {
                        self.slots[i].0 = me.clone();
                        i
                    }
                    None => {
                        self.slots.push((me.clone(), 0));
                        self.slots.len() - 1
                    }
                },
            };
            u16::try_from(i).expect("invariant: fewer than 2^16 threads hold pieces in one ring")
        })
    }

    /// The calling thread's slot, if it has one (none is made).
    pub(crate) fn find_mine(&self) -> Option<u16> {
        THIS_THREAD.with(|me| {
            self.slots
                .iter()
                .position(|(s, _)| Arc::ptr_eq(s, me))
                .map(|i| i as u16)
        })
    }

    /// A piece entered by the thread of `slot`, which is the calling thread.
    pub(crate) fn entered(&mut self, slot: u16) {
        let (thread, held) = &mut self.slots[usize::from(slot)];
        *held += 1;
        thread.own.store(thread.own.load(Relaxed) + 1, Relaxed);
    }

    /// A piece of `slot`'s thread reaped by the calling thread, whose own
    /// slot is `reaper` (`None`: a thread that entered nothing here).
    pub(crate) fn reaped(&mut self, slot: u16, reaper: Option<u16>) {
        let (thread, held) = &mut self.slots[usize::from(slot)];
        *held -= 1;
        if reaper == Some(slot) {
            thread.own.store(thread.own.load(Relaxed) - 1, Relaxed);
        } else {
            thread.reaped_elsewhere.fetch_add(1, Relaxed);
        }
    }
}

/// Before the calling thread enters pieces into `ring` (counted already by
/// [`Submitters::entered`]): raise its worker bound if its pieces in the
/// kernel have reached it (see the module's notes).
pub(crate) fn make_room(ring: &IoUring) {
    let needed = THIS_THREAD.with(|me| me.in_kernel()) + 1;
    BOUND.with(|bound| {
        if needed <= bound.get().max(default_bound_min()) || REFUSED.load(Relaxed) {
            return;
        }
        raise(ring, needed, bound);
    });
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

fn default_bound_min() -> usize {
    SQ_ENTRIES_MIN.min(four_per_cpu())
}

/// The bound last registered: the process's high-water mark. Held only
/// across one registration (a leaf lock), so that registrations, each of
/// which sets every thread of its ring, never go down.
static HIGH_WATER: Mutex<usize> = Mutex::new(0);
/// The kernel refused a registration: it will again, so it is not asked.
static REFUSED: AtomicBool = AtomicBool::new(false);

fn raise(ring: &IoUring, needed: usize, bound: &Cell<usize>) {
    let mut high = HIGH_WATER.lock_or_recover();
    let want = needed.next_power_of_two().max(four_per_cpu()).max(*high);
    let mut limits = [u32::try_from(want).unwrap_or(u32::MAX), 0];
    match ring.submitter().register_iowq_max_workers(&mut limits) {
        Ok(()) => {
            *high = want;
            bound.set(want);
        }
        Err(_) => REFUSED.store(true, Relaxed),
    }
}
