//! The buffer cache and the database writer, driven the way sessions and the
//! writer drive them: counting, replacement, the waits, concurrency, and writes
//! that land where the layout says, after their redo.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use cairn_io::host::Host;
use cairn_io::{DeviceFile, EngineKind, OpenMode};
use cairn_oltp::cache::{BufferCache, CacheConfig, CacheError, Get, Mode, Pinned};
use cairn_oltp::dbwr::{Dbwr, DbwrConfig, RedoFlush};
use cairn_oltp::layout::{BlockId, Layout, Shape};
use cairn_oltp::stats::{Counts, Event, OpStats, Stat, StatsSlot};
use cairn_oltp::{Health, OltpError};

const BLOCK: usize = 512;

fn one_set(buffers: usize) -> BufferCache {
    BufferCache::with_working_sets(
        CacheConfig {
            buffers,
            block_size: BLOCK,
        },
        1,
    )
}

/// A block's content: its id in the first 8 bytes, an update counter in the
/// next 8, then a filler derived from the id.
fn fill(buf: &mut [u8], id: BlockId, counter: u64) {
    buf[..8].copy_from_slice(&id.to_le_bytes());
    buf[8..16].copy_from_slice(&counter.to_le_bytes());
    for (i, b) in buf[16..].iter_mut().enumerate() {
        *b = (id as usize).wrapping_mul(31).wrapping_add(i) as u8;
    }
}

fn check(buf: &[u8], id: BlockId) -> u64 {
    assert_eq!(
        u64::from_le_bytes(buf[..8].try_into().unwrap()),
        id,
        "wrong block returned"
    );
    for (i, b) in buf[16..].iter().enumerate() {
        assert_eq!(
            *b,
            (id as usize).wrapping_mul(31).wrapping_add(i) as u8,
            "block {id} corrupt at byte {}",
            i + 16
        );
    }
    u64::from_le_bytes(buf[8..16].try_into().unwrap())
}

/// Get `id`, reading it (as `fill(id, 0)`) on a miss.
fn get<'a>(c: &'a BufferCache, id: BlockId, mode: Mode, op: &mut OpStats) -> Pinned<'a> {
    match c.get(id, mode, true, op).unwrap() {
        Get::Hit(p) => p,
        Get::Miss(mut l) => {
            let mut buf = l.take_buf();
            fill(&mut buf, id, 0);
            l.complete(buf)
        }
        Get::NoFreeBuffer => panic!("NoFreeBuffer from a get that may wait"),
    }
}

/// Until `n` sessions are in a buffer wait: the handshake that stands where
/// a sleep would. A session that ends first never waited, and fails the test.
fn until_waiting<T>(c: &BufferCache, n: usize, sessions: &[&std::thread::JoinHandle<T>]) {
    while c.sessions_waiting() < n {
        assert!(
            sessions.iter().all(|s| !s.is_finished()),
            "a session finished without waiting ({} waiting)",
            c.sessions_waiting()
        );
        std::thread::yield_now();
    }
}

fn counts(op: &mut OpStats) -> Counts {
    let slot = StatsSlot::default();
    slot.publish(op);
    slot.take()
}

fn dirty(c: &BufferCache, id: BlockId, lsn: u64, op: &mut OpStats) {
    let mut p = get(c, id, Mode::Exclusive, op);
    let n = check(p.data(), id);
    fill(p.data_mut(), id, n + 1);
    p.mark_dirty(lsn);
}

#[test]
fn hits_misses_and_logical_reads_are_counted() {
    let c = one_set(16);
    let mut op = OpStats::new();
    drop(get(&c, 1, Mode::Shared, &mut op));
    drop(get(&c, 1, Mode::Shared, &mut op));
    drop(get(&c, 1, Mode::Exclusive, &mut op));
    drop(get(&c, 2, Mode::Exclusive, &mut op));
    assert_eq!(op.get(Stat::SessionLogicalReads), 4);
    assert_eq!(op.get(Stat::ConsistentGets), 2);
    assert_eq!(op.get(Stat::DbBlockGets), 2);
    assert_eq!(op.get(Stat::CacheHits), 2);
    assert_eq!(op.get(Stat::CacheMisses), 2);
    assert_eq!(op.get(Stat::FreeBufferRequested), 2);
    assert!(c.contains(1) && c.contains(2) && !c.contains(3));
    let p = get(&c, 2, Mode::Shared, &mut op);
    assert_eq!((p.id(), p.mode()), (2, Mode::Shared));
    check(p.data(), 2);
}

#[test]
fn eviction_takes_a_clean_unpinned_cold_frame_never_a_pinned_or_dirty_one() {
    let c = one_set(16);
    let mut op = OpStats::new();
    for id in 0..16 {
        drop(get(&c, id, Mode::Shared, &mut op));
    }
    let pinned = get(&c, 0, Mode::Shared, &mut op);
    dirty(&c, 1, 10, &mut op);
    let before = counts(&mut op);
    assert_eq!(before.get(Stat::CacheMisses), 16);
    // One more block: exactly one of the cold clean blocks 2..16 makes room.
    drop(get(&c, 100, Mode::Shared, &mut op));
    let gone: Vec<BlockId> = (0..16).filter(|id| !c.contains(*id)).collect();
    assert_eq!(gone.len(), 1, "evicted {gone:?}");
    assert!(gone[0] >= 2, "evicted {gone:?}, pinned or dirty");
    // Cycle many more blocks through: 0 (pinned) and 1 (dirty) stay.
    for id in 200..400 {
        drop(get(&c, id, Mode::Shared, &mut op));
    }
    assert!(c.contains(0) && c.contains(1));
    let s = counts(&mut op);
    assert_eq!(s.get(Stat::CacheMisses), 201);
    assert!(s.get(Stat::FreeBufferInspected) >= 201);
    assert!(s.get(Stat::DirtyBuffersInspected) > 0);
    drop(pinned);
    let p = get(&c, 1, Mode::Shared, &mut op);
    assert_eq!(check(p.data(), 1), 1, "the dirty block kept its change");
    assert_eq!(op.get(Stat::CacheHits), 1);
}

#[test]
fn touches_keep_a_hot_block_cached_while_a_scan_cycles_through() {
    let c = one_set(16);
    let mut op = OpStats::new();
    let hot = 7;
    for i in 0..300 {
        drop(get(&c, hot, Mode::Shared, &mut op));
        drop(get(&c, hot, Mode::Shared, &mut op));
        drop(get(&c, 1000 + i, Mode::Shared, &mut op));
    }
    assert!(c.contains(hot));
    assert_eq!(
        op.get(Stat::CacheMisses),
        1 + 300,
        "the hot block was read once"
    );
    // The control: touched once, the same block is aged out by the same scan.
    let c = one_set(16);
    drop(get(&c, hot, Mode::Shared, &mut op));
    for i in 0..300 {
        drop(get(&c, 1000 + i, Mode::Shared, &mut op));
    }
    assert!(!c.contains(hot));
}

#[test]
fn concurrent_sessions_and_a_writer_never_see_a_wrong_block_or_lose_an_update() {
    const THREADS: usize = 6;
    const GETS: usize = 4000;
    const KEYS: u64 = 256;
    let c = Arc::new(BufferCache::new(CacheConfig {
        buffers: 64,
        block_size: BLOCK,
    }));
    // The "disk": what the writer wrote, which a miss reads back.
    let disk: Arc<Mutex<HashMap<BlockId, u64>>> = Arc::default();
    let updates: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let lsn = Arc::new(AtomicU64::new(1));
    let writer = {
        let (c, disk, stop) = (Arc::clone(&c), Arc::clone(&disk), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut jobs = Vec::new();
            let mut op = OpStats::new();
            let mut written = 0u64;
            loop {
                let stopping = stop.load(Ordering::SeqCst);
                c.wait_for_writer_work(Duration::from_millis(2));
                c.begin_writes(8, stopping, &mut jobs, &mut op);
                for job in &jobs {
                    let n = check(&job.buf, job.id);
                    disk.lock().unwrap().insert(job.id, n);
                    c.end_write(job, true);
                    written += 1;
                }
                if stopping && jobs.is_empty() && c.dirty_buffers() == 0 {
                    return written;
                }
            }
        })
    };
    let barrier = Arc::new(Barrier::new(THREADS));
    let sessions: Vec<_> = (0..THREADS)
        .map(|t| {
            let (c, disk, updates, lsn, barrier) = (
                Arc::clone(&c),
                Arc::clone(&disk),
                Arc::clone(&updates),
                Arc::clone(&lsn),
                Arc::clone(&barrier),
            );
            std::thread::spawn(move || {
                let mut op = OpStats::new();
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
                barrier.wait();
                for _ in 0..GETS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let id = x % KEYS;
                    let mode = if x.is_multiple_of(10) {
                        Mode::Exclusive
                    } else {
                        Mode::Shared
                    };
                    let mut p = match c.get(id, mode, true, &mut op).unwrap() {
                        Get::Hit(p) => p,
                        Get::Miss(mut l) => {
                            let mut buf = l.take_buf();
                            let n = disk.lock().unwrap().get(&id).copied().unwrap_or(0);
                            fill(&mut buf, id, n);
                            l.complete(buf)
                        }
                        Get::NoFreeBuffer => panic!("NoFreeBuffer from a get that may wait"),
                    };
                    assert_eq!(p.id(), id);
                    let n = check(p.data(), id);
                    if mode == Mode::Exclusive {
                        fill(p.data_mut(), id, n + 1);
                        p.mark_dirty(lsn.fetch_add(1, Ordering::Relaxed));
                        updates[id as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
                counts(&mut op)
            })
        })
        .collect();
    let mut total = Counts::default();
    for s in sessions {
        total.add(&s.join().unwrap());
    }
    stop.store(true, Ordering::SeqCst);
    let written = writer.join().unwrap();
    let gets = (THREADS * GETS) as u64;
    assert_eq!(total.get(Stat::SessionLogicalReads), gets);
    assert_eq!(
        total.get(Stat::ConsistentGets) + total.get(Stat::DbBlockGets),
        gets
    );
    assert_eq!(
        total.get(Stat::CacheHits) + total.get(Stat::CacheMisses),
        gets
    );
    assert!(total.get(Stat::CacheMisses) >= KEYS - 64, "{total:?}");
    assert_eq!(c.dirty_buffers(), 0);
    // Every update survived eviction: on disk, or still in the cache.
    let mut op = OpStats::new();
    for id in 0..KEYS {
        let expected = updates[id as usize].load(Ordering::Relaxed);
        let on_disk = disk.lock().unwrap().get(&id).copied().unwrap_or(0);
        assert_eq!(on_disk, expected, "block {id}: writes lost");
        if c.contains(id) {
            let p = get(&c, id, Mode::Shared, &mut op);
            assert_eq!(check(p.data(), id), expected, "block {id}: cached copy");
        }
    }
    let total_updates: u64 = updates.iter().map(|u| u.load(Ordering::Relaxed)).sum();
    assert!(written >= total_updates.min(1));
    println!(
        "{} gets: {} hits, {} misses, {} updates, {} writes; waits: busy {}, read by other {}, write complete {}, free {}",
        gets,
        total.get(Stat::CacheHits),
        total.get(Stat::CacheMisses),
        total_updates,
        written,
        total.event(Event::BufferBusyWaits).waits,
        total.event(Event::ReadByOtherSession).waits,
        total.event(Event::WriteCompleteWaits).waits,
        total.event(Event::FreeBufferWaits).waits,
    );
}

#[test]
fn a_session_wanting_a_block_another_is_reading_waits_for_that_read() {
    let c = Arc::new(one_set(16));
    let mut op = OpStats::new();
    let Get::Miss(mut loading) = c.get(5, Mode::Shared, true, &mut op).unwrap() else {
        panic!("expected a miss");
    };
    let started = Arc::new(Barrier::new(2));
    let waiter = {
        let (c, started) = (Arc::clone(&c), Arc::clone(&started));
        std::thread::spawn(move || {
            let mut op = OpStats::new();
            started.wait();
            let Get::Hit(p) = c.get(5, Mode::Shared, true, &mut op).unwrap() else {
                panic!("expected a hit on the block read by the other session");
            };
            check(p.data(), 5);
            drop(p);
            counts(&mut op)
        })
    };
    started.wait();
    until_waiting(&c, 1, &[&waiter]);
    let mut buf = loading.take_buf();
    fill(&mut buf, 5, 0);
    let p = loading.complete(buf);
    drop(p);
    let s = waiter.join().unwrap();
    assert_eq!(s.get(Stat::CacheHits), 1);
    assert_eq!(s.get(Stat::CacheMisses), 0);
    assert_eq!(s.event(Event::ReadByOtherSession).waits, 1);
    assert!(s.event(Event::ReadByOtherSession).time_ns > 0);
    assert_eq!(op.get(Stat::CacheMisses), 1);
}

#[test]
fn a_failed_read_sends_the_waiting_session_to_read_the_block_itself() {
    let c = Arc::new(one_set(16));
    let mut op = OpStats::new();
    let Get::Miss(mut loading) = c.get(5, Mode::Shared, true, &mut op).unwrap() else {
        panic!("expected a miss");
    };
    let started = Arc::new(Barrier::new(2));
    let waiter = {
        let (c, started) = (Arc::clone(&c), Arc::clone(&started));
        std::thread::spawn(move || {
            let mut op = OpStats::new();
            started.wait();
            let p = get(&c, 5, Mode::Shared, &mut op);
            check(p.data(), 5);
            drop(p);
            counts(&mut op)
        })
    };
    started.wait();
    until_waiting(&c, 1, &[&waiter]);
    let buf = loading.take_buf();
    loading.fail(buf);
    let s = waiter.join().unwrap();
    assert_eq!(s.event(Event::ReadByOtherSession).waits, 1);
    assert_eq!(s.get(Stat::CacheMisses), 1, "the waiter read it itself");
    assert!(c.contains(5));
}

#[test]
fn a_get_with_claims_does_not_wait_for_another_sessions_read() {
    let c = one_set(16);
    let mut op = OpStats::new();
    let Get::Miss(loading) = c.get(5, Mode::Shared, false, &mut op).unwrap() else {
        panic!("expected a miss");
    };
    // The same session asks again (a duplicate key in one batch): no self-deadlock.
    assert!(matches!(
        c.get(5, Mode::Shared, false, &mut op).unwrap(),
        Get::NoFreeBuffer
    ));
    assert_eq!(op.get(Stat::SessionLogicalReads), 1);
    drop(loading);
    assert!(!c.contains(5));
}

#[test]
fn a_change_waits_for_the_write_of_its_buffer() {
    let c = Arc::new(one_set(16));
    let mut op = OpStats::new();
    dirty(&c, 7, 42, &mut op);
    let mut jobs = Vec::new();
    c.begin_writes(4, false, &mut jobs, &mut op);
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].id, jobs[0].lsn), (7, 42));
    assert_eq!(check(&jobs[0].buf, 7), 1);
    // Reading a buffer being written does not wait.
    drop(get(&c, 7, Mode::Shared, &mut op));
    let started = Arc::new(Barrier::new(2));
    let changer = {
        let (c, started) = (Arc::clone(&c), Arc::clone(&started));
        std::thread::spawn(move || {
            let mut op = OpStats::new();
            started.wait();
            dirty(&c, 7, 43, &mut op);
            counts(&mut op)
        })
    };
    started.wait();
    until_waiting(&c, 1, &[&changer]);
    assert_eq!(c.dirty_buffers(), 0, "changed while being written");
    c.end_write(&jobs[0], true);
    let s = changer.join().unwrap();
    assert_eq!(s.event(Event::WriteCompleteWaits).waits, 1);
    assert!(s.event(Event::WriteCompleteWaits).time_ns > 0);
    assert_eq!(c.dirty_buffers(), 1);
    c.begin_writes(4, true, &mut jobs, &mut op);
    assert_eq!((jobs.len(), jobs[0].lsn), (1, 43));
    assert_eq!(check(&jobs[0].buf, 7), 2);
}

/// 16 frames, all dirty.
fn all_dirty() -> Arc<BufferCache> {
    let c = Arc::new(one_set(16));
    let mut op = OpStats::new();
    for id in 0..16 {
        dirty(&c, id, id + 1, &mut op);
    }
    assert_eq!(c.dirty_buffers(), 16);
    c
}

#[test]
fn with_only_dirty_buffers_a_get_waits_for_the_writer_or_says_so() {
    let c = all_dirty();
    // Dirtying a quarter of the cache posted the writer already: take that post.
    assert!(c.wait_for_writer_work(Duration::ZERO));
    let mut op = OpStats::new();
    assert!(matches!(
        c.get(100, Mode::Shared, false, &mut op).unwrap(),
        Get::NoFreeBuffer
    ));
    assert_eq!(op.get(Stat::SessionLogicalReads), 0);
    assert!(op.get(Stat::DirtyBuffersInspected) > 0);
    let waiter = {
        let c = Arc::clone(&c);
        std::thread::spawn(move || {
            let mut op = OpStats::new();
            let p = get(&c, 100, Mode::Shared, &mut op);
            check(p.data(), 100);
            drop(p);
            counts(&mut op)
        })
    };
    // The waiting session posted the writer before it waited.
    until_waiting(&c, 1, &[&waiter]);
    assert!(
        c.wait_for_writer_work(Duration::ZERO),
        "the writer was never posted"
    );
    let mut jobs = Vec::new();
    c.begin_writes(1, false, &mut jobs, &mut op);
    assert_eq!(jobs.len(), 1);
    c.end_write(&jobs[0], true);
    let s = waiter.join().unwrap();
    assert!(s.event(Event::FreeBufferWaits).waits >= 1);
    assert_eq!(s.get(Stat::CacheMisses), 1);
    assert!(c.contains(100));
    assert!(!c.contains(jobs[0].id), "the cleaned buffer was reused");
}

#[test]
fn shutdown_wakes_every_waiter_and_no_one_waits_again() {
    let c = all_dirty();
    let mut op = OpStats::new();
    let mut jobs = Vec::new();
    c.begin_writes(1, true, &mut jobs, &mut op);
    let being_written = jobs[0].id;
    let free_waiter = {
        let c = Arc::clone(&c);
        std::thread::spawn(move || {
            let mut op = OpStats::new();
            c.get(100, Mode::Shared, true, &mut op).map(|_| ()).err()
        })
    };
    let write_waiter = {
        let c = Arc::clone(&c);
        std::thread::spawn(move || {
            let mut op = OpStats::new();
            c.get(being_written, Mode::Exclusive, true, &mut op)
                .map(|_| ())
                .err()
        })
    };
    until_waiting(&c, 2, &[&free_waiter, &write_waiter]);
    c.shutdown();
    assert_eq!(free_waiter.join().unwrap(), Some(CacheError::Shutdown));
    assert_eq!(write_waiter.join().unwrap(), Some(CacheError::Shutdown));
    assert_eq!(
        c.get(101, Mode::Shared, true, &mut op).err(),
        Some(CacheError::Shutdown)
    );
    let t = Instant::now();
    c.wait_for_writer_work(Duration::from_secs(30));
    assert!(t.elapsed() < Duration::from_secs(30));
    // A get that needs no wait still works.
    assert!(matches!(
        c.get(3, Mode::Shared, true, &mut op).unwrap(),
        Get::Hit(_)
    ));
}

// ---- the database writer on real files ----

/// The write-ahead hook: records each flush_to and which dirty blocks were
/// already on disk at that moment (read back through the page cache).
struct FakeRedo {
    files: Vec<PathBuf>,
    layout: Layout,
    /// (id, lsn) of every block the test dirtied.
    blocks: Vec<(BlockId, u64)>,
    calls: Mutex<Vec<(u64, Vec<BlockId>)>>,
}

impl FakeRedo {
    fn on_disk(&self) -> Vec<BlockId> {
        self.blocks
            .iter()
            .filter(|(id, lsn)| read_block(&self.files, &self.layout, *id) == content(*id, *lsn))
            .map(|(id, _)| *id)
            .collect()
    }
}

impl RedoFlush for FakeRedo {
    fn flush_to(&self, lsn: u64) -> Result<(), OltpError> {
        let on_disk = self.on_disk();
        self.calls.lock().unwrap().push((lsn, on_disk));
        Ok(())
    }
}

const DISK_BLOCK: usize = 4096;

fn layout(targets: usize) -> Layout {
    Layout::new(
        Shape {
            block_size: DISK_BLOCK as u32,
            schemas: 2,
            table_blocks: 300,
            scan_blocks: 10,
            obfuscate: false,
        },
        targets,
    )
}

/// A block's content as the test writes it: its id and lsn, then a filler.
fn content(id: BlockId, lsn: u64) -> Vec<u8> {
    let mut v = vec![(id as u8) ^ 0x5A; DISK_BLOCK];
    v[..8].copy_from_slice(&id.to_le_bytes());
    v[8..16].copy_from_slice(&lsn.to_le_bytes());
    v
}

fn read_block(files: &[PathBuf], layout: &Layout, id: BlockId) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let at = layout.locate(id);
    let f = std::fs::File::open(&files[at.target]).unwrap();
    let mut v = vec![0; DISK_BLOCK];
    f.read_exact_at(&mut v, at.offset_bytes).unwrap();
    v
}

/// Data files for `layout` of `size` bytes each (the layout's need if None),
/// opened for direct I/O, on the build's filesystem (not /tmp, which may be a
/// tmpfs); None (and a note) where it refuses O_DIRECT, which fails the test
/// under CAIRN_REQUIRE_TOOLS.
fn data_files(
    dir: &Path,
    layout: &Layout,
    size: Option<u64>,
) -> Option<(Vec<PathBuf>, Vec<DeviceFile>)> {
    let host = Host::real();
    let mut paths = Vec::new();
    let mut files = Vec::new();
    for i in 0..layout.targets {
        let path = dir.join(format!("data{i}.dbf"));
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(size.unwrap_or(layout.target_bytes_needed()))
            .unwrap();
        match DeviceFile::open(&path, OpenMode::WRITE_EXCLUSIVE, &host) {
            Ok(d) => files.push(d),
            Err(e) => {
                cairn_io::test_support::prerequisite::missing(&format!(
                    "direct I/O on the build's filesystem: {e}"
                ));
                return None;
            }
        }
        paths.push(path);
    }
    Some((paths, files))
}

/// Load `ids` into `cache` and change each to `content(id, lsn)`, lsn = 100 + index.
fn dirty_blocks(cache: &BufferCache, ids: &[BlockId]) -> Vec<(BlockId, u64)> {
    let mut op = OpStats::new();
    let mut out = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        let lsn = 100 + i as u64;
        let mut p = match cache.get(id, Mode::Exclusive, true, &mut op).unwrap() {
            Get::Miss(mut l) => {
                let buf = l.take_buf();
                l.complete(buf)
            }
            Get::Hit(p) => p,
            Get::NoFreeBuffer => panic!("NoFreeBuffer"),
        };
        p.data_mut().copy_from_slice(&content(id, lsn));
        p.mark_dirty(lsn);
        out.push((id, lsn));
    }
    out
}

fn disk_cache(buffers: usize) -> Arc<BufferCache> {
    Arc::new(BufferCache::with_working_sets(
        CacheConfig {
            buffers,
            block_size: DISK_BLOCK,
        },
        2,
    ))
}

#[test]
fn the_writer_writes_every_dirty_buffer_at_its_place_after_its_redo() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let layout = layout(2);
    let Some((paths, files)) = data_files(dir.path(), &layout, None) else {
        return;
    };
    // 20 dirty of 128 is below the writer's quarter: only the stop writes them.
    let cache = disk_cache(128);
    // Blocks on both targets (extents of 256 blocks alternate between them).
    let ids: Vec<BlockId> = (0..20).map(|i| i * 31).collect();
    assert!(ids.iter().any(|id| layout.locate(*id).target == 1));
    let blocks = dirty_blocks(&cache, &ids);
    let redo = Arc::new(FakeRedo {
        files: paths.clone(),
        layout,
        blocks: blocks.clone(),
        calls: Mutex::new(Vec::new()),
    });
    let slot = Arc::new(StatsSlot::default());
    let health = Arc::new(Health::new());
    let dbwr = Dbwr::start_with(
        Arc::clone(&cache),
        Arc::clone(&redo),
        files,
        DbwrConfig {
            layout,
            batch: 8,
            checkpoint_interval: Duration::ZERO,
            engine: EngineKind::Auto,
        },
        Arc::clone(&slot),
        Arc::clone(&health),
    )
    .unwrap();
    dbwr.stop().unwrap();
    assert!(!health.failed());
    assert_eq!(cache.dirty_buffers(), 0);
    for &(id, lsn) in &blocks {
        assert!(
            read_block(&paths, &layout, id) == content(id, lsn),
            "block {id} not at {:?}",
            layout.locate(id)
        );
    }
    // The write-ahead rule: when each flush_to was called, every block already
    // on disk was covered by an earlier call.
    let calls = redo.calls.lock().unwrap();
    assert_eq!(calls.len(), 3, "20 buffers in batches of 8");
    let lsn_of: HashMap<BlockId, u64> = blocks.iter().copied().collect();
    let mut covered = 0;
    for (lsn, on_disk) in calls.iter() {
        for id in on_disk {
            assert!(lsn_of[id] <= covered, "block {id} written before its redo");
        }
        covered = covered.max(*lsn);
    }
    assert_eq!(covered, 119, "the highest lsn was flushed");
    let s = slot.take();
    assert_eq!(s.get(Stat::PhysicalWrites), 20);
    assert_eq!(s.get(Stat::PhysicalWriteIoRequests), 20);
    assert_eq!(s.get(Stat::PhysicalWriteBytes), 20 * DISK_BLOCK as u64);
    assert_eq!(s.get(Stat::DbwrCheckpoints), 1);
    assert_eq!(s.get(Stat::DbwrCheckpointBuffersWritten), 20);
    assert_eq!(s.event(Event::DbFileParallelWrite).waits, 3);
    assert!(s.background_cpu_ns > 0);
}

#[test]
fn the_writer_checkpoints_on_its_interval_and_frees_buffers_when_posted() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let layout = layout(1);
    let Some((paths, files)) = data_files(dir.path(), &layout, None) else {
        return;
    };
    let cache = disk_cache(16);
    let blocks = dirty_blocks(&cache, &[3, 4, 5]);
    let redo = Arc::new(FakeRedo {
        files: paths.clone(),
        layout,
        blocks: blocks.clone(),
        calls: Mutex::new(Vec::new()),
    });
    let slot = Arc::new(StatsSlot::default());
    let health = Arc::new(Health::new());
    let dbwr = Dbwr::start_with(
        Arc::clone(&cache),
        redo,
        files,
        DbwrConfig {
            layout,
            batch: 4,
            checkpoint_interval: Duration::from_millis(100),
            engine: EngineKind::Auto,
        },
        Arc::clone(&slot),
        Arc::clone(&health),
    )
    .unwrap();
    // 3 dirty of 16 is below the writer's quarter: only a checkpoint writes them.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut total = Counts::default();
    while total.get(Stat::DbwrCheckpoints) == 0 {
        assert!(Instant::now() < deadline, "no checkpoint came");
        std::thread::sleep(Duration::from_millis(10));
        total.add(&slot.take());
    }
    assert_eq!(cache.dirty_buffers(), 0);
    assert_eq!(total.get(Stat::DbwrCheckpointBuffersWritten), 3);
    for &(id, lsn) in &blocks {
        assert!(read_block(&paths, &layout, id) == content(id, lsn));
    }
    // Fill the cache with dirty buffers: a session that needs one more gets it
    // from the writer, which it posts.
    let ids: Vec<BlockId> = (10..26).collect();
    dirty_blocks(&cache, &ids);
    let mut op = OpStats::new();
    let p = get(&cache, 500, Mode::Shared, &mut op);
    drop(p);
    dbwr.stop().unwrap();
    total.add(&slot.take());
    assert!(total.get(Stat::DbwrCheckpoints) >= 2, "periodic and final");
    assert!(total.get(Stat::PhysicalWrites) >= 3 + 16);
    assert_eq!(cache.dirty_buffers(), 0);
    for id in ids {
        assert_eq!(read_block(&paths, &layout, id)[..8], id.to_le_bytes());
    }
}

#[test]
fn a_failed_write_fails_the_run_naming_target_and_offset() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let layout = layout(1);
    // Only the header region: every block lies beyond the end.
    let Some((_paths, files)) = data_files(dir.path(), &layout, Some(1 << 20)) else {
        return;
    };
    let cache = disk_cache(16);
    dirty_blocks(&cache, &[9]);
    let redo = Arc::new(FakeRedo {
        files: Vec::new(),
        layout,
        blocks: Vec::new(),
        calls: Mutex::new(Vec::new()),
    });
    let health = Arc::new(Health::new());
    let dbwr = Dbwr::start_with(
        Arc::clone(&cache),
        redo,
        files,
        DbwrConfig {
            layout,
            batch: 4,
            checkpoint_interval: Duration::ZERO,
            engine: EngineKind::Auto,
        },
        Arc::new(StatsSlot::default()),
        Arc::clone(&health),
    )
    .unwrap();
    let err = dbwr.stop().unwrap_err().to_string();
    let at = layout.locate(9);
    let message = health.error().unwrap();
    assert!(message.contains("data0.dbf"), "{message}");
    assert!(
        message.contains(&format!("offset {}", at.offset_bytes)),
        "{message}"
    );
    assert!(!message.contains('\n'));
    assert_eq!(err, message);
    assert!(cache.is_shutdown());
    assert_eq!(cache.dirty_buffers(), 1, "the failed buffer is dirty again");
}

#[test]
fn a_block_whose_changer_panicked_is_never_written() {
    let c = one_set(16);
    let mut op = OpStats::new();
    dirty(&c, 1, 10, &mut op);
    // A session's bug strikes half way through changing block 1: its
    // exclusive pin is held, the change half made.
    let panicked = std::thread::scope(|s| {
        s.spawn(|| {
            let mut op = OpStats::new();
            let mut p = get(&c, 1, Mode::Exclusive, &mut op);
            p.data_mut()[BLOCK - 1] ^= 0xff;
            panic!("a bug half way through changing block 1");
        })
        .join()
        .is_err()
    });
    assert!(panicked, "the session was meant to panic");
    // The writer must not put that half-made change on disk: it fails
    // loudly instead (or at least leaves the block alone).
    let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut jobs = Vec::new();
        c.begin_writes(4, true, &mut jobs, &mut OpStats::new());
        jobs.iter().map(|j| j.id).collect::<Vec<_>>()
    }));
    match taken {
        Ok(ids) => assert!(
            !ids.contains(&1),
            "the writer took block 1, half changed by a session that panicked: {ids:?}"
        ),
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            assert!(message.contains("invariant"), "{message}");
        }
    }
}
