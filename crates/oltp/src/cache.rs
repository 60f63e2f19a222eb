//! The shared buffer cache: Oracle's SGA buffer cache, reimplemented honestly.
//!
//! What it owns: `buffers` frames of `block_size` bytes, each an [`AlignedBuf`]
//! (so a session reads straight into it with O_DIRECT), a hash table from
//! block id to frame, and the replacement policy. Every get pays what Oracle's
//! does — the cache-buffers-chains latch, the pin, a touch — because that CPU
//! is part of what the benchmark measures ("everything is a CPU problem"). It
//! is kept lean all the same: a get allocates nothing, takes no global lock and
//! makes no system call unless it has to wait.
//!
//! # Structure
//!
//! - **Frames.** Each frame's data sits behind a `RwLock` (a shared pin holds
//!   the read guard, an exclusive pin or a read in progress the write guard);
//!   its header is atomics: block id, state (free, claimed, reading, valid), pin
//!   count, touch count, dirty and writing flags, and the redo position (LSN) of
//!   its last change.
//! - **Hash chains.** `2 × buffers` buckets (a power of two) of intrusive chains
//!   (`Frame::next`), eight buckets per latch (a `Mutex`): the "cache buffers
//!   chains" latch. A latch that is busy when tried is waited for, timed, and
//!   counted as `latch: cache buffers chains`; the uncontended path reads no clock.
//! - **Working sets.** The frames are cut into one working set per CPU (fewer
//!   for small caches), each with its own LRU latch guarding a clock hand. A
//!   session searches its own set first (chosen once per thread, round robin),
//!   then the others.
//!
//! # Replacement: how the clock maps to Oracle's touch-count LRU
//!
//! Oracle keeps each working set's buffers on an LRU list with a hot and a cold
//! half; a get increments the buffer's touch count, and a session looking for a
//! free buffer scans from the cold end: a buffer with a touch count of at least 2
//! is moved to the hot end with its count reset instead of being reused, a dirty
//! one is passed over for the writer (and counted as "dirty buffers inspected"),
//! a pinned one is skipped, and the first cold, clean, unpinned buffer is taken.
//! Here the list is a ring and the clock hand is the cold end: frames the hand
//! has just passed are the hot end, and "moving a buffer to the hot end" is
//! resetting its touch count and letting the hand go by. Touches are a relaxed
//! load and store, capped at [`TOUCH_MAX`], so a hot block stops writing its
//! header once capped (Oracle limits touches by time for the same reason).
//! The search inspects at most [`SCAN_SHARE_PERCENT`] of a set before trying the
//! next set; when only hot clean frames were seen, the first one it cooled is
//! taken (the clock has, in effect, come round to it). When every set is full
//! of dirty or pinned frames, the session posts the writer and waits ("free
//! buffer waits"), or returns [`Get::NoFreeBuffer`] if it asked not to wait.
//!
//! # Pins and states
//!
//! A frame is found only through its hash chain, and its pin count is raised
//! only under that chain's latch; a victim is unhooked only under the same latch
//! after re-checking it is unpinned, clean and not being written. So a frame
//! with a pin can never change block. A frame is in a chain exactly when its
//! state is `reading` or `valid`. The writer reaches frames by index, not
//! through chains: it only ever *tries* their locks, and claims a dirty frame
//! (dirty frames are never victims) by setting `writing` while holding the read
//! guard, so an exclusive pin taken afterwards sees the flag and waits ("write
//! complete waits").
//!
//! # Lock order (nothing can deadlock)
//!
//! 1. An LRU latch, then at most one chain latch (unhooking a victim). Never a
//!    chain latch then an LRU latch, never two chain latches at once.
//! 2. No frame lock is ever *waited for* while holding a latch (only tried).
//! 3. The wait queues' mutexes are leaves.
//! 4. Frame locks between sessions: a session that may block in [`BufferCache::get`]
//!    (`wait_for_free = true`) holds no [`Loading`] claim and at most one shared
//!    [`Pinned`]; a session holding claims passes `wait_for_free = false`, and
//!    then `get` never blocks on another session (it returns
//!    [`Get::NoFreeBuffer`]: read your claims, then ask again). A session never
//!    asks for a block while holding an exclusive pin. [`Loading::complete`] in
//!    shared mode may wait for an exclusive pin taken on the new block meanwhile;
//!    by the rules above that holder waits for nobody but the writer. The writer
//!    needs no frame lock to finish a write, so write-complete waits always end.
//!
//! Deliberately not done: Oracle's consistent-read clones, multiple buffer pools,
//! and incremental checkpoint queues (the writer scans frames instead).

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{
    Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError,
};
use std::time::{Duration, Instant};

use cairn_io::poison::{recover, Recover};
use cairn_io::AlignedBuf;

use super::layout::BlockId;
use super::stats::{Event, OpStats, Stat};

#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    pub buffers: usize,
    pub block_size: usize,
}

/// How a buffer is pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// For reading (a consistent get): many sessions at once.
    Shared,
    /// For changing (a db block get): one session, and never while the writer writes it.
    Exclusive,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The cache was shut down while waiting (the run is stopping).
    #[error("the buffer cache is shutting down")]
    Shutdown,
}

/// Touch counts stop growing here: the clock only asks "at least [`HOT_TOUCHES`]?",
/// and a capped count is no longer written, so a hot block's header stops
/// bouncing between CPUs.
pub const TOUCH_MAX: u32 = 3;
/// Touches since the clock hand last passed that earn a frame a second chance.
pub const HOT_TOUCHES: u32 = 2;
/// Share of a working set one free-buffer search inspects before trying the
/// next set (Oracle bounds its scan of the cold end the same way).
pub const SCAN_SHARE_PERCENT: usize = 40;
/// Buckets guarded by one chains latch.
const BUCKETS_PER_LATCH: usize = 8;
/// The smallest working set: below it the bounded scan would see too few frames.
const WORKING_SET_FRAMES_MIN: usize = 16;
/// A free-buffer wait re-scans at least this often even if nothing was signalled
/// (a frame can also come free by being unpinned, which posts nobody).
const FREE_WAIT_SLICE: Duration = Duration::from_millis(20);
/// A write-complete wait re-checks the shutdown flag at least this often.
const WRITE_WAIT_SLICE: Duration = Duration::from_millis(100);
/// The end of a hash chain.
const NONE: u32 = u32::MAX;

const FREE: u8 = 0;
/// Taken by a session as a victim, unhooked, not yet hooked for its new block.
const CLAIMED: u8 = 1;
const READING: u8 = 2;
const VALID: u8 = 3;

/// One buffer and its header. Aligned so two frames' headers, which different
/// CPUs update, never share a cache line.
#[repr(align(64))]
struct Frame {
    /// `None` only while a [`Loading`]'s caller holds the memory (`take_buf`).
    data: RwLock<Option<AlignedBuf>>,
    id: AtomicU64,
    lsn: AtomicU64,
    /// The next frame in the hash chain; changed only under the chain's latch.
    next: AtomicU32,
    pins: AtomicU32,
    touch: AtomicU32,
    state: AtomicU8,
    dirty: AtomicBool,
    writing: AtomicBool,
}

/// A chains latch and the heads of the buckets it guards.
struct Latch {
    heads: Mutex<[u32; BUCKETS_PER_LATCH]>,
}

/// A working set: frames `lo..hi` and the LRU latch over their clock hand.
struct WorkingSet {
    lo: usize,
    hi: usize,
    /// The LRU latch; holds the hand as an offset from `lo`.
    hand: Mutex<usize>,
    /// The hand as last stored, for the writer (which takes no LRU latch).
    hand_hint: AtomicUsize,
}

impl WorkingSet {
    fn len(&self) -> usize {
        self.hi - self.lo
    }
}

/// A condition variable with a waiter count, so that notifying nobody costs no
/// system call (std's `notify_all` always makes one).
///
/// Protocol: the notifier changes the state the waiters test (with `SeqCst`),
/// then calls `notify`; the waiter tests the state (with `SeqCst`) inside
/// `wait_while`. One of the two always sees the other.
#[derive(Default)]
struct WaitQueue {
    lock: Mutex<()>,
    cv: Condvar,
    waiters: AtomicUsize,
}

impl WaitQueue {
    fn notify(&self) {
        if self.waiters.load(SeqCst) > 0 {
            self.notify_always();
        }
    }

    // The queue's mutex guards no data (the state waited on is atomics), so
    // a thread that panicked holding it left nothing half made: waits and
    // wake-ups go on, and must, for the others to see the run stop.
    fn notify_always(&self) {
        let _g = self.lock.lock_or_recover();
        self.cv.notify_all();
    }

    /// Wait while `blocked()` holds, at most `timeout`.
    fn wait_while(&self, timeout: Duration, mut blocked: impl FnMut() -> bool) {
        let deadline = Instant::now() + timeout;
        let mut g = self.lock.lock_or_recover();
        self.waiters.fetch_add(1, SeqCst);
        while blocked() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            g = recover(self.cv.wait_timeout(g, deadline - now)).0;
        }
        self.waiters.fetch_sub(1, SeqCst);
    }
}

/// The shared buffer cache. See the module header for its structure and rules.
pub struct BufferCache {
    block_size: usize,
    frames: Box<[Frame]>,
    latches: Box<[Latch]>,
    /// log2 of the bucket count.
    bucket_bits: u32,
    sets: Box<[WorkingSet]>,
    /// Frames dirty and not being written.
    dirty: AtomicUsize,
    /// Bumped whenever a frame may have become reusable (a write ended, a read failed).
    free_epoch: AtomicU64,
    shutdown: AtomicBool,
    writer_asked: AtomicBool,
    free_waits: WaitQueue,
    write_waits: WaitQueue,
    writer_work: WaitQueue,
    /// Sessions in a buffer wait right now (see [`BufferCache::sessions_waiting`]).
    waiting: AtomicUsize,
    /// Spare job buffers, so the writer allocates only while warming up.
    writer_pool: Mutex<Vec<AlignedBuf>>,
    /// Where the next checkpoint batch resumes its scan.
    writer_cursor: AtomicUsize,
}

/// The outcome of [`BufferCache::get`].
pub enum Get<'a> {
    /// The block is cached; it stays pinned while this lives.
    Hit(Pinned<'a>),
    /// The block is not cached: a buffer has been claimed for it, and the caller reads it in.
    Miss(Loading<'a>),
    /// The caller asked not to wait (`wait_for_free` false: it holds claimed
    /// buffers to read first), and the get would have had to: for a free buffer,
    /// or for another session's read or pin of the block. Nothing was counted:
    /// read the claims, then ask again.
    NoFreeBuffer,
}

enum PinGuard<'a> {
    Shared(RwLockReadGuard<'a, Option<AlignedBuf>>),
    Exclusive(RwLockWriteGuard<'a, Option<AlignedBuf>>),
}

/// A pinned, valid buffer. Unpinned when dropped.
pub struct Pinned<'a> {
    cache: &'a BufferCache,
    frame: usize,
    id: BlockId,
    guard: PinGuard<'a>,
}

/// A buffer claimed for a block being read in. It holds the frame exclusively:
/// sessions asking for the block wait ("read by other session") until
/// [`Loading::complete`] or [`Loading::fail`]; dropping it without either fails it.
pub struct Loading<'a> {
    cache: &'a BufferCache,
    frame: usize,
    id: BlockId,
    mode: Mode,
    /// `None` once completed or failed.
    guard: Option<RwLockWriteGuard<'a, Option<AlignedBuf>>>,
}

/// A dirty buffer's content, copied for the writer.
#[derive(Debug)]
pub struct WriteJob {
    pub frame: usize,
    pub id: BlockId,
    /// The redo position of the buffer's last change (the write-ahead rule: redo first).
    pub lsn: u64,
    pub buf: AlignedBuf,
}

enum PinOutcome<'a> {
    Pinned(Pinned<'a>),
    /// The frame no longer holds the block (its read failed): look again.
    Retry,
    /// Pinning would block and the caller asked not to wait.
    WouldBlock,
}

static NEXT_SESSION: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's ordinal, which picks its home working set.
    static SESSION: usize = NEXT_SESSION.fetch_add(1, Relaxed);
}

/// A latch that a thread panicked holding (a bug) may guard a half-linked
/// hash chain: the panic spreads to whoever takes it next, and the run fails
/// rather than serve or write blocks through a broken cache.
const LATCH_POISONED: &str = "invariant: no thread panics while holding a chains latch";
/// A frame whose holder panicked may hold a half-made change: never read,
/// changed or written again (the writer would put it on disk).
const FRAME_POISONED: &str = "invariant: no session panics while holding a buffer";

fn lock_timed<'m, T>(m: &'m Mutex<T>, event: Event, op: &mut OpStats) -> MutexGuard<'m, T> {
    match m.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(_)) => panic!("{LATCH_POISONED}"),
        Err(TryLockError::WouldBlock) => {
            let t = Instant::now();
            let g = m.lock().expect(LATCH_POISONED);
            op.wait(event, t.elapsed());
            g
        }
    }
}

impl BufferCache {
    /// A cache of `cfg.buffers` frames with one working set per CPU (fewer for
    /// small caches, so each set has at least 16 frames).
    pub fn new(cfg: CacheConfig) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let sets = cpus.min(cfg.buffers / WORKING_SET_FRAMES_MIN).max(1);
        Self::with_working_sets(cfg, sets)
    }

    /// A cache with exactly `sets` working sets (at most one per frame): for
    /// tests that need one clock to reason about.
    pub fn with_working_sets(cfg: CacheConfig, sets: usize) -> Self {
        assert!(cfg.buffers > 0, "invariant: a cache of at least one buffer");
        assert!(
            cfg.buffers < NONE as usize,
            "invariant: frame numbers fit in u32"
        );
        assert!(cfg.block_size > 0, "invariant: a positive block size");
        let sets = sets.clamp(1, cfg.buffers);
        let frames: Box<[Frame]> = (0..cfg.buffers)
            .map(|_| Frame {
                data: RwLock::new(Some(AlignedBuf::zeroed(cfg.block_size))),
                id: AtomicU64::new(0),
                lsn: AtomicU64::new(0),
                next: AtomicU32::new(NONE),
                pins: AtomicU32::new(0),
                touch: AtomicU32::new(0),
                state: AtomicU8::new(FREE),
                dirty: AtomicBool::new(false),
                writing: AtomicBool::new(false),
            })
            .collect();
        let buckets = (2 * cfg.buffers).next_power_of_two().max(BUCKETS_PER_LATCH);
        let latches: Box<[Latch]> = (0..buckets / BUCKETS_PER_LATCH)
            .map(|_| Latch {
                heads: Mutex::new([NONE; BUCKETS_PER_LATCH]),
            })
            .collect();
        let sets: Box<[WorkingSet]> = (0..sets)
            .map(|s| WorkingSet {
                lo: cfg.buffers * s / sets,
                hi: cfg.buffers * (s + 1) / sets,
                hand: Mutex::new(0),
                hand_hint: AtomicUsize::new(0),
            })
            .collect();
        Self {
            block_size: cfg.block_size,
            frames,
            latches,
            bucket_bits: buckets.trailing_zeros(),
            sets,
            dirty: AtomicUsize::new(0),
            free_epoch: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            writer_asked: AtomicBool::new(false),
            free_waits: WaitQueue::default(),
            write_waits: WaitQueue::default(),
            writer_work: WaitQueue::default(),
            waiting: AtomicUsize::new(0),
            writer_pool: Mutex::new(Vec::new()),
            writer_cursor: AtomicUsize::new(0),
        }
    }

    pub fn buffers(&self) -> usize {
        self.frames.len()
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Working sets (each with its own LRU latch and clock hand).
    pub fn working_sets(&self) -> usize {
        self.sets.len()
    }

    /// The latch and the bucket slot under it for block `id` (Fibonacci hashing:
    /// consecutive ids spread over buckets).
    fn bucket(&self, id: BlockId) -> (usize, usize) {
        let b = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bucket_bits)) as usize;
        (b / BUCKETS_PER_LATCH, b % BUCKETS_PER_LATCH)
    }

    /// Get block `id` pinned in `mode`, counting the logical read and any waits in `op`.
    /// With `wait_for_free` false, returns [`Get::NoFreeBuffer`] instead of waiting
    /// for the writer or for another session (see the module's lock rules).
    ///
    /// Counts, for a hit or a miss: session logical reads, consistent gets
    /// (shared) or db block gets (exclusive), and cache hits or cache misses
    /// plus free buffer requested. Errors only with [`CacheError::Shutdown`],
    /// when a wait was cut short by [`BufferCache::shutdown`].
    pub fn get(
        &self,
        id: BlockId,
        mode: Mode,
        wait_for_free: bool,
        op: &mut OpStats,
    ) -> Result<Get<'_>, CacheError> {
        loop {
            if let Some(f) = self.lookup_and_pin(id, op) {
                match self.pin_found(f, id, mode, wait_for_free, op)? {
                    PinOutcome::Pinned(p) => {
                        count_get(mode, op);
                        op.add(Stat::CacheHits, 1);
                        return Ok(Get::Hit(p));
                    }
                    PinOutcome::Retry => continue,
                    PinOutcome::WouldBlock => return Ok(Get::NoFreeBuffer),
                }
            }
            let Some(f) = self.claim_free(wait_for_free, op)? else {
                return Ok(Get::NoFreeBuffer);
            };
            let frame = &self.frames[f];
            // The frame is unhooked: only the writer may hold its lock, briefly.
            let guard = frame.data.write().expect(FRAME_POISONED);
            let (l, s) = self.bucket(id);
            let mut heads = lock_timed(&self.latches[l].heads, Event::LatchCacheBuffersChains, op);
            if self.find_in_chain(heads[s], id).is_some() {
                // Another session hooked the block first: theirs wins.
                drop(heads);
                frame.state.store(FREE, Release);
                drop(guard);
                self.frame_freed();
                continue;
            }
            frame.id.store(id, Relaxed);
            frame.lsn.store(0, Relaxed);
            frame.touch.store(1, Relaxed);
            frame.pins.store(1, Relaxed);
            frame.state.store(READING, Release);
            frame.next.store(heads[s], Relaxed);
            heads[s] = f as u32;
            drop(heads);
            count_get(mode, op);
            op.add(Stat::CacheMisses, 1);
            op.add(Stat::FreeBufferRequested, 1);
            return Ok(Get::Miss(Loading {
                cache: self,
                frame: f,
                id,
                mode,
                guard: Some(guard),
            }));
        }
    }

    fn find_in_chain(&self, head: u32, id: BlockId) -> Option<usize> {
        let mut f = head;
        while f != NONE {
            let frame = &self.frames[f as usize];
            if frame.id.load(Relaxed) == id {
                return Some(f as usize);
            }
            f = frame.next.load(Relaxed);
        }
        None
    }

    /// Find `id`'s frame and pin it (under the chain latch, so it cannot be evicted).
    fn lookup_and_pin(&self, id: BlockId, op: &mut OpStats) -> Option<usize> {
        let (l, s) = self.bucket(id);
        let heads = lock_timed(&self.latches[l].heads, Event::LatchCacheBuffersChains, op);
        let f = self.find_in_chain(heads[s], id)?;
        self.frames[f].pins.fetch_add(1, Relaxed);
        Some(f)
    }

    fn unpin(&self, f: usize) {
        self.frames[f].pins.fetch_sub(1, Release);
    }

    /// Lock a pinned frame found in its chain in `mode`, waiting as allowed.
    fn pin_found(
        &self,
        f: usize,
        id: BlockId,
        mode: Mode,
        may_block: bool,
        op: &mut OpStats,
    ) -> Result<PinOutcome<'_>, CacheError> {
        let frame = &self.frames[f];
        let t = frame.touch.load(Relaxed);
        if t < TOUCH_MAX {
            frame.touch.store(t + 1, Relaxed);
        }
        // A busy frame is either being read in by another session or pinned
        // incompatibly; the state tells which wait it is.
        let busy_event = || {
            if frame.state.load(Acquire) == READING {
                Event::ReadByOtherSession
            } else {
                Event::BufferBusyWaits
            }
        };
        let guard = match mode {
            Mode::Shared => match frame.data.try_read() {
                Ok(g) => PinGuard::Shared(g),
                Err(TryLockError::Poisoned(_)) => panic!("{FRAME_POISONED}"),
                Err(TryLockError::WouldBlock) => {
                    if !may_block {
                        self.unpin(f);
                        return Ok(PinOutcome::WouldBlock);
                    }
                    let event = busy_event();
                    let t = Instant::now();
                    let waiting = Waiting::new(&self.waiting);
                    let g = frame.data.read().expect(FRAME_POISONED);
                    drop(waiting);
                    op.wait(event, t.elapsed());
                    PinGuard::Shared(g)
                }
            },
            Mode::Exclusive => match frame.data.try_write() {
                Ok(g) => PinGuard::Exclusive(g),
                Err(TryLockError::Poisoned(_)) => panic!("{FRAME_POISONED}"),
                Err(TryLockError::WouldBlock) => {
                    if !may_block {
                        self.unpin(f);
                        return Ok(PinOutcome::WouldBlock);
                    }
                    let event = busy_event();
                    let t = Instant::now();
                    let waiting = Waiting::new(&self.waiting);
                    let g = frame.data.write().expect(FRAME_POISONED);
                    drop(waiting);
                    op.wait(event, t.elapsed());
                    PinGuard::Exclusive(g)
                }
            },
        };
        // Our pin keeps the frame on this block unless its read failed.
        if frame.state.load(Acquire) != VALID || frame.id.load(Relaxed) != id {
            drop(guard);
            self.unpin(f);
            return Ok(PinOutcome::Retry);
        }
        if mode == Mode::Exclusive && frame.writing.load(SeqCst) {
            let t = Instant::now();
            let waiting = Waiting::new(&self.waiting);
            while frame.writing.load(SeqCst) && !self.shutdown.load(SeqCst) {
                self.write_waits.wait_while(WRITE_WAIT_SLICE, || {
                    frame.writing.load(SeqCst) && !self.shutdown.load(SeqCst)
                });
            }
            drop(waiting);
            op.wait(Event::WriteCompleteWaits, t.elapsed());
            if frame.writing.load(SeqCst) {
                drop(guard);
                self.unpin(f);
                return Err(CacheError::Shutdown);
            }
        }
        Ok(PinOutcome::Pinned(Pinned {
            cache: self,
            frame: f,
            id,
            guard,
        }))
    }

    /// A frame for a new block, claimed and unhooked; waits for the writer if
    /// allowed and needed.
    fn claim_free(&self, may_wait: bool, op: &mut OpStats) -> Result<Option<usize>, CacheError> {
        let n = self.sets.len();
        let home = if n == 1 { 0 } else { SESSION.with(|s| *s % n) };
        loop {
            let seen = self.free_epoch.load(SeqCst);
            for k in 0..n {
                if let Some(f) = self.find_victim(&self.sets[(home + k) % n], op) {
                    return Ok(Some(f));
                }
            }
            if !may_wait {
                return Ok(None);
            }
            if self.shutdown.load(SeqCst) {
                return Err(CacheError::Shutdown);
            }
            self.post_writer();
            let t = Instant::now();
            let waiting = Waiting::new(&self.waiting);
            self.free_waits.wait_while(FREE_WAIT_SLICE, || {
                self.free_epoch.load(SeqCst) == seen && !self.shutdown.load(SeqCst)
            });
            drop(waiting);
            op.wait(Event::FreeBufferWaits, t.elapsed());
            if self.shutdown.load(SeqCst) {
                return Err(CacheError::Shutdown);
            }
        }
    }

    /// Run the clock hand of `set` over at most [`SCAN_SHARE_PERCENT`] of its
    /// frames for a victim (see the module header).
    fn find_victim(&self, set: &WorkingSet, op: &mut OpStats) -> Option<usize> {
        let mut hand = lock_timed(&set.hand, Event::LatchCacheBuffersLruChain, op);
        let len = set.len();
        let limit = (len * SCAN_SHARE_PERCENT / 100).max(1);
        let mut cooled = None;
        let mut inspected = 0;
        let mut dirty = 0;
        let mut victim = None;
        for _ in 0..limit {
            let f = set.lo + *hand;
            *hand = (*hand + 1) % len;
            inspected += 1;
            let frame = &self.frames[f];
            if frame.pins.load(Acquire) > 0 || frame.writing.load(SeqCst) {
                continue;
            }
            if frame.dirty.load(SeqCst) {
                dirty += 1;
                continue;
            }
            match frame.state.load(Acquire) {
                FREE if frame
                    .state
                    .compare_exchange(FREE, CLAIMED, AcqRel, Relaxed)
                    .is_ok() =>
                {
                    victim = Some(f);
                    break;
                }
                VALID => {
                    if frame.touch.load(Relaxed) >= HOT_TOUCHES {
                        frame.touch.store(0, Relaxed);
                        cooled.get_or_insert(f);
                    } else if self.try_unhook(f) {
                        victim = Some(f);
                        break;
                    }
                }
                _ => {}
            }
        }
        if victim.is_none() {
            victim = cooled.filter(|&f| self.try_unhook(f));
        }
        set.hand_hint.store(*hand, Relaxed);
        drop(hand);
        op.add(Stat::FreeBufferInspected, inspected);
        op.add(Stat::DirtyBuffersInspected, dirty);
        victim
    }

    /// Unhook valid frame `f` from its chain if it is still unpinned, clean and
    /// not being written; it is then `claimed`.
    fn try_unhook(&self, f: usize) -> bool {
        let frame = &self.frames[f];
        let id = frame.id.load(Relaxed);
        let (l, s) = self.bucket(id);
        let mut heads = self.latches[l].heads.lock().expect(LATCH_POISONED);
        if frame.state.load(Acquire) != VALID
            || frame.id.load(Relaxed) != id
            || frame.pins.load(Acquire) > 0
            || frame.dirty.load(SeqCst)
            || frame.writing.load(SeqCst)
        {
            return false;
        }
        unlink(&self.frames, &mut heads[s], f);
        frame.state.store(CLAIMED, Release);
        true
    }

    /// A frame may have become reusable: wake free-buffer waiters.
    fn frame_freed(&self) {
        self.free_epoch.fetch_add(1, SeqCst);
        self.free_waits.notify();
    }

    /// Whether block `id` is cached and valid. Counts and touches nothing: for
    /// tests and diagnostics, not for sessions.
    pub fn contains(&self, id: BlockId) -> bool {
        let (l, s) = self.bucket(id);
        let heads = self.latches[l].heads.lock().expect(LATCH_POISONED);
        self.find_in_chain(heads[s], id)
            .is_some_and(|f| self.frames[f].state.load(Acquire) == VALID)
    }

    /// Sessions in a buffer wait right now — read by other session, buffer
    /// busy, write complete, free buffer; not latch waits — as Oracle's
    /// `V$SESSION_WAIT` would list them. A session is counted from the moment
    /// it has chosen to wait (its wait event is then certain) until the wait
    /// ends. Tests wait for this count, not for a sleep, before they let the
    /// awaited thing happen.
    pub fn sessions_waiting(&self) -> usize {
        self.waiting.load(SeqCst)
    }

    /// Buffers dirty and not being written (a buffer claimed by
    /// [`BufferCache::begin_writes`] is counted again only if its write fails).
    pub fn dirty_buffers(&self) -> usize {
        self.dirty.load(Relaxed)
    }

    /// Ask the writer for free buffers (wakes [`BufferCache::wait_for_writer_work`]).
    /// Cheap when it has already been asked.
    pub fn post_writer(&self) {
        if !self.writer_asked.load(Relaxed) && !self.writer_asked.swap(true, SeqCst) {
            self.writer_work.notify();
        }
    }

    /// Block until a session asks the writer for free buffers, or `timeout` passes; true if asked.
    /// Returns at once after [`BufferCache::shutdown`].
    pub fn wait_for_writer_work(&self, timeout: Duration) -> bool {
        self.writer_work.wait_while(timeout, || {
            !self.writer_asked.load(SeqCst) && !self.shutdown.load(SeqCst)
        });
        self.writer_asked.swap(false, SeqCst)
    }

    /// Claim up to `max` dirty buffers for writing (the coldest first; with
    /// `checkpoint`, any dirty one), copying each into a job. A claimed buffer
    /// cannot be changed until [`BufferCache::end_write`].
    ///
    /// `jobs` is cleared first and the buffers of the jobs it held are reused,
    /// so a writer that hands the same vector back allocates nothing once warm
    /// (every job in it must have been ended with [`BufferCache::end_write`]).
    /// A buffer pinned exclusively (being changed or read in) is passed over.
    /// `op` is the writer's: nothing is counted here today (the writer counts
    /// what it writes).
    pub fn begin_writes(
        &self,
        max: usize,
        checkpoint: bool,
        jobs: &mut Vec<WriteJob>,
        op: &mut OpStats,
    ) {
        let _ = op;
        let mut pool = self
            .writer_pool
            .lock()
            .expect("invariant: the writer does not panic while holding its buffer pool");
        pool.extend(jobs.drain(..).map(|job| job.buf));
        let dirty = self.dirty.load(SeqCst);
        if max == 0 || dirty == 0 {
            return;
        }
        let want = max.min(dirty);
        if checkpoint {
            let n = self.frames.len();
            let start = self.writer_cursor.load(Relaxed) % n;
            let mut end = start;
            for k in 0..n {
                let f = (start + k) % n;
                end = f + 1;
                self.try_claim_write(f, jobs, &mut pool);
                if jobs.len() >= want {
                    break;
                }
            }
            self.writer_cursor.store(end % n, Relaxed);
            return;
        }
        // Cold first: the frames each clock hand is about to reach. A first pass
        // gives every set its share of the batch, a second fills what is left.
        let share = want.div_ceil(self.sets.len());
        for pass in 0..2 {
            for set in self.sets.iter() {
                let len = set.len();
                let hand = set.hand_hint.load(Relaxed) % len;
                let quota = if pass == 0 { share } else { want };
                let before = jobs.len();
                for k in 0..len {
                    if jobs.len() >= want || jobs.len() - before >= quota {
                        break;
                    }
                    self.try_claim_write(set.lo + (hand + k) % len, jobs, &mut pool);
                }
                if jobs.len() >= want {
                    return;
                }
            }
        }
    }

    fn try_claim_write(&self, f: usize, jobs: &mut Vec<WriteJob>, pool: &mut Vec<AlignedBuf>) {
        let frame = &self.frames[f];
        if !frame.dirty.load(Relaxed) || frame.writing.load(Relaxed) {
            return;
        }
        let guard = match frame.data.try_read() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(_)) => panic!("{FRAME_POISONED}"),
            Err(TryLockError::WouldBlock) => return,
        };
        if frame.state.load(Acquire) != VALID || !frame.dirty.load(SeqCst) {
            return;
        }
        let Some(data) = guard.as_deref() else {
            return;
        };
        let mut buf = pool
            .pop()
            .unwrap_or_else(|| AlignedBuf::zeroed(self.block_size));
        buf.copy_from_slice(data);
        // Set while holding the read guard: an exclusive pin taken after we let
        // go sees it and waits for the write.
        frame.writing.store(true, SeqCst);
        frame.dirty.store(false, SeqCst);
        self.dirty.fetch_sub(1, SeqCst);
        jobs.push(WriteJob {
            frame: f,
            id: frame.id.load(Relaxed),
            lsn: frame.lsn.load(Relaxed),
            buf,
        });
    }

    /// The write of `job` finished: the buffer is clean (or, if `ok` is false, dirty again).
    pub fn end_write(&self, job: &WriteJob, ok: bool) {
        let frame = &self.frames[job.frame];
        assert!(
            frame.writing.load(SeqCst),
            "invariant: end_write for a buffer claimed by begin_writes"
        );
        if !ok && !frame.dirty.swap(true, SeqCst) {
            self.dirty.fetch_add(1, SeqCst);
        }
        frame.writing.store(false, SeqCst);
        self.write_waits.notify();
        self.frame_freed();
    }

    /// Wake every waiter with [`CacheError::Shutdown`]; from now on no wait
    /// blocks (gets that need no wait still work).
    pub fn shutdown(&self) {
        self.shutdown.store(true, SeqCst);
        self.free_waits.notify_always();
        self.write_waits.notify_always();
        self.writer_work.notify_always();
    }

    pub fn is_shutdown(&self) -> bool {
        self.shutdown.load(SeqCst)
    }
}

/// One session counted in [`BufferCache::sessions_waiting`] while this lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, SeqCst);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// Remove frame `f` from the chain starting at `head` (the caller holds its latch).
fn unlink(frames: &[Frame], head: &mut u32, f: usize) {
    let next = frames[f].next.load(Relaxed);
    if *head as usize == f {
        *head = next;
    } else {
        let mut p = *head;
        while p != NONE {
            let pf = &frames[p as usize];
            if pf.next.load(Relaxed) as usize == f {
                pf.next.store(next, Relaxed);
                break;
            }
            p = pf.next.load(Relaxed);
        }
    }
    frames[f].next.store(NONE, Relaxed);
}

fn count_get(mode: Mode, op: &mut OpStats) {
    op.add(Stat::SessionLogicalReads, 1);
    op.add(
        match mode {
            Mode::Shared => Stat::ConsistentGets,
            Mode::Exclusive => Stat::DbBlockGets,
        },
        1,
    );
}

impl Pinned<'_> {
    pub fn id(&self) -> BlockId {
        self.id
    }

    pub fn mode(&self) -> Mode {
        match self.guard {
            PinGuard::Shared(_) => Mode::Shared,
            PinGuard::Exclusive(_) => Mode::Exclusive,
        }
    }

    pub fn data(&self) -> &[u8] {
        let data = match &self.guard {
            PinGuard::Shared(g) => g.as_deref(),
            PinGuard::Exclusive(g) => g.as_deref(),
        };
        data.expect("invariant: a valid buffer holds its memory")
    }

    /// The content, to change (exclusive pins only).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let data = match &mut self.guard {
            PinGuard::Exclusive(g) => g.as_deref_mut(),
            PinGuard::Shared(_) => None,
        };
        data.expect("invariant: data_mut on an exclusive pin of a valid buffer")
    }

    /// Mark the buffer changed by redo ending at `lsn` (exclusive pins only).
    /// Posts the writer when more than a quarter of the cache is dirty.
    pub fn mark_dirty(&mut self, lsn: u64) {
        assert!(
            matches!(self.guard, PinGuard::Exclusive(_)),
            "invariant: mark_dirty on an exclusive pin"
        );
        let cache = self.cache;
        let frame = &cache.frames[self.frame];
        frame.lsn.fetch_max(lsn, Relaxed);
        if !frame.dirty.swap(true, SeqCst) {
            let dirty = cache.dirty.fetch_add(1, SeqCst) + 1;
            if dirty > cache.frames.len() / 4 {
                cache.post_writer();
            }
        }
    }
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        // The guard is released right after (field drop); an evictor that sees
        // the pin gone waits for that on the frame lock, holding no latch.
        self.cache.unpin(self.frame);
    }
}

impl<'a> Loading<'a> {
    pub fn id(&self) -> BlockId {
        self.id
    }

    /// The buffer's memory, to read into (hand it back with `complete` or `fail`).
    /// Called at most once.
    pub fn take_buf(&mut self) -> AlignedBuf {
        self.guard
            .as_mut()
            .and_then(|g| g.take())
            .expect("invariant: take_buf is called once per Loading")
    }

    /// The read succeeded: the block is valid and pinned in the mode asked for.
    pub fn complete(mut self, buf: AlignedBuf) -> Pinned<'a> {
        assert_eq!(
            buf.len(),
            self.cache.block_size,
            "invariant: a loaded buffer is one block"
        );
        let mut guard = self
            .guard
            .take()
            .expect("invariant: a Loading is completed once");
        *guard = Some(buf);
        let cache = self.cache;
        let frame = &cache.frames[self.frame];
        frame.state.store(VALID, Release);
        // The pin taken when the frame was hooked passes to the Pinned.
        let guard = match self.mode {
            Mode::Exclusive => PinGuard::Exclusive(guard),
            Mode::Shared => {
                drop(guard);
                PinGuard::Shared(frame.data.read().expect(FRAME_POISONED))
            }
        };
        Pinned {
            cache,
            frame: self.frame,
            id: self.id,
            guard,
        }
    }

    /// The read failed: the buffer goes back to the free list, and sessions
    /// waiting for the block look for it again (as a miss).
    pub fn fail(mut self, buf: AlignedBuf) {
        self.release(Some(buf));
    }

    fn release(&mut self, buf: Option<AlignedBuf>) {
        let Some(mut guard) = self.guard.take() else {
            return;
        };
        let cache = self.cache;
        match buf {
            Some(b) => *guard = Some(b),
            None if guard.is_none() => *guard = Some(AlignedBuf::zeroed(cache.block_size)),
            None => {}
        }
        let frame = &cache.frames[self.frame];
        let (l, s) = cache.bucket(self.id);
        {
            let mut heads = cache.latches[l].heads.lock().expect(LATCH_POISONED);
            unlink(&cache.frames, &mut heads[s], self.frame);
            frame.state.store(FREE, Release);
        }
        drop(guard);
        cache.unpin(self.frame);
        cache.frame_freed();
    }
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.release(None);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cache(buffers: usize) -> BufferCache {
        BufferCache::with_working_sets(
            CacheConfig {
                buffers,
                block_size: 512,
            },
            1,
        )
    }

    fn load<'a>(c: &'a BufferCache, id: BlockId, mode: Mode, op: &mut OpStats) -> Pinned<'a> {
        match c.get(id, mode, true, op).unwrap() {
            Get::Miss(mut l) => {
                let mut buf = l.take_buf();
                buf.fill(id as u8);
                l.complete(buf)
            }
            Get::Hit(p) => p,
            Get::NoFreeBuffer => panic!("no free buffer"),
        }
    }

    fn cached(c: &BufferCache, id: BlockId) -> bool {
        let (l, s) = c.bucket(id);
        let heads = c.latches[l].heads.lock().unwrap();
        c.find_in_chain(heads[s], id).is_some()
    }

    #[test]
    fn chains_hold_many_blocks_per_bucket_and_unlink_from_the_middle() {
        // 16 frames, 32 buckets: collisions are certain over 16 ids in 4 latches.
        let c = cache(16);
        let mut op = OpStats::new();
        for id in 0..16 {
            drop(load(&c, id * 32, Mode::Shared, &mut op));
        }
        for id in 0..16 {
            assert!(cached(&c, id * 32));
        }
        // Evict everything by loading 16 others: every chain entry gets unlinked.
        for id in 100..116 {
            drop(load(&c, id, Mode::Shared, &mut op));
        }
        for id in 0..16 {
            assert!(!cached(&c, id * 32), "block {} still chained", id * 32);
        }
        for id in 100..116 {
            assert!(cached(&c, id));
        }
    }

    #[test]
    fn a_dropped_loading_frees_its_frame_even_after_take_buf() {
        let c = cache(16);
        let mut op = OpStats::new();
        match c.get(7, Mode::Shared, true, &mut op).unwrap() {
            Get::Miss(mut l) => {
                let buf = l.take_buf();
                drop(buf);
                drop(l);
            }
            _ => panic!("expected a miss"),
        }
        assert!(!cached(&c, 7));
        let p = load(&c, 7, Mode::Shared, &mut op);
        assert_eq!(p.data().len(), 512);
        assert!(p.data().iter().all(|&b| b == 7));
        assert!(c.frames.iter().all(|f| f.data.read().unwrap().is_some()));
    }

    #[test]
    fn mark_dirty_keeps_the_highest_lsn_and_counts_each_buffer_once() {
        let c = cache(16);
        let mut op = OpStats::new();
        let mut p = load(&c, 3, Mode::Exclusive, &mut op);
        p.data_mut()[0] = 42;
        p.mark_dirty(10);
        p.mark_dirty(5);
        drop(p);
        assert_eq!(c.dirty_buffers(), 1);
        let mut jobs = Vec::new();
        c.begin_writes(8, false, &mut jobs, &mut op);
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].id, jobs[0].lsn, jobs[0].buf[0]), (3, 10, 42));
        assert_eq!(c.dirty_buffers(), 0);
        c.end_write(&jobs[0], false);
        assert_eq!(c.dirty_buffers(), 1);
        c.begin_writes(8, true, &mut jobs, &mut op);
        assert_eq!(jobs.len(), 1);
        c.end_write(&jobs[0], true);
        assert_eq!(c.dirty_buffers(), 0);
    }
}
