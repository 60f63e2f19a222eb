//! The SLOB loop, run by each session thread.
//!
//! A session does what a database foreground process does for SLOB's SQL:
//! it picks a key, walks the index to WORK_UNIT table blocks, and then selects
//! them (consistent gets), updates them (db block gets, redo, commit) or scans
//! the small scan table. Every block comes through the buffer cache, and a
//! miss is a real read into the cache buffer: one synchronous `pread` for a
//! single block (`db file sequential read`), one submission of several reads
//! for the misses of one statement (`db file parallel read`), one multiblock
//! read for a scan (`db file scattered read`), or a read into the session's own
//! memory around the cache (`direct path read`). Every row fetched is checked
//! and its value summed, so the CPU a database spends on the data is spent.
//!
//! Deadlock freedom: within a statement a session takes table blocks in
//! ascending block order, and while it holds buffers claimed for reading it
//! never waits for a free buffer (it reads what it holds first). A session that
//! waits for a block another is reading therefore waits only for a block above
//! every block it holds, so no cycle of waits can form.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cairn_io::poison::{recover, Recover};
use cairn_io::sync_engine::SyncEngine;
use cairn_io::{
    new_file_engine, AlignedBuf, DeviceFile, DeviceId, EngineKind, FileEngine, IoEngine, IoError,
    Op, Request,
};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use super::block;
use super::cache::{BufferCache, CacheError, Get, Loading, Mode, Pinned};
use super::layout::{BlockId, BlockRef, Layout, Segment};
use super::redo::RedoLog;
use super::stats::{thread_cpu_ns, Event, OpStats, Stat, StatsSlot};
use super::{Health, OltpError};

/// Where a select's table blocks are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPath {
    /// Through the shared buffer cache (SLOB's normal model).
    Cache,
    /// Into the session's own memory, around the cache (Closson's "PGA reads").
    Direct,
}

impl ReadPath {
    pub fn name(self) -> &'static str {
        match self {
            ReadPath::Cache => "cache",
            ReadPath::Direct => "direct",
        }
    }
}

/// SLOB's hot spot: every `frequency`-th operation picks its key in here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hotspot {
    /// First key of the hot region.
    pub start: u64,
    /// Keys in the hot region.
    pub keys: u64,
    pub frequency: u64,
}

/// THINK_TM_*: every `frequency`-th operation is preceded by a pause.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Think {
    pub frequency: u64,
    pub min_s: f64,
    pub max_s: f64,
}

/// What every session does, from slob.conf and the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    pub update_pct: u32,
    pub scan_pct: u32,
    pub work_unit: u32,
    /// 128-byte columns an update changes per block (REDO_STRESS).
    pub redo_columns: usize,
    pub hotspot: Option<Hotspot>,
    /// Every n-th operation goes to schema 1 (0: never).
    pub hot_schema_frequency: u64,
    pub think: Option<Think>,
    /// Operations per session (0: run until told to stop).
    pub work_loop: u64,
    pub read_path: ReadPath,
    /// Most cache misses of one statement read in one submission (1: each alone).
    pub batch_reads: u32,
    /// Scan tables above this many blocks are read around the cache.
    pub direct_read_threshold_blocks: u64,
    /// Blocks per multiblock read.
    pub multiblock_read_count: u32,
}

/// Holds the sessions until the run opens it, then lets them all go at once
/// (SLOB's sessions start together). Unlike a barrier, it can be opened
/// whether or not every session got ready, so a failed start never strands one.
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    pub fn new() -> Self {
        Self::default()
    }

    // The gate tolerates a thread that panicked holding it: its state is one
    // bool, set whole, never half made, and it must still open so that no
    // session is stranded while the run fails on that panic.
    pub fn open(&self) {
        *self.open.lock_or_recover() = true;
        self.cv.notify_all();
    }

    pub fn wait(&self) {
        let mut open = self.open.lock_or_recover();
        while !*open {
            open = recover(self.cv.wait(open));
        }
    }
}

/// What the sessions of a run share.
pub struct Shared {
    pub layout: Layout,
    pub dataset: u64,
    pub cache: Arc<BufferCache>,
    pub redo: Arc<RedoLog>,
    pub workload: Workload,
    /// The kind of engine of each session's batched reads (single-block
    /// reads are always pread, as a database's foreground does them).
    pub engine: EngineKind,
    pub health: Arc<Health>,
    /// Set by the run to end the sessions' loops.
    pub stop: AtomicBool,
    /// The first few blocks found bad (one line each).
    pub corruptions: Mutex<Vec<String>>,
}

/// How many corrupt blocks a run describes (it counts them all).
const CORRUPTIONS_KEPT: usize = 10;

/// One session: its schema, its I/O, its random stream.
pub struct Session {
    pub id: u32,
    /// 0-based schema this session works on (SLOB's user{schema+1}).
    pub schema: u32,
    shared: Arc<Shared>,
    slot: Arc<StatsSlot>,
    io: Io,
    op: OpStats,
    rng: ChaCha8Rng,
    /// Table blocks of the current statement.
    blocks: Vec<BlockId>,
    /// Redo change vector of the block being changed.
    change: Vec<u8>,
    /// Sum of the value column of every row fetched (kept so the work is not optimised away).
    pub value_sum: u64,
}

/// A session's devices and buffers.
struct Io {
    layout: Layout,
    /// Single-block reads: pread, as a database's foreground does.
    sync: SyncEngine,
    /// Batches of reads submitted together.
    ring: Box<dyn FileEngine>,
    /// Multiblock reads land here.
    scratch: AlignedBuf,
    /// Direct-path single-block reads land here (taken while one is in flight).
    private: Option<AlignedBuf>,
    /// The buffers of a batch of reads, reused.
    batch: Vec<(BlockId, AlignedBuf)>,
}

/// Open this many io_uring entries per session for batched reads.
const RING_DEPTH_MAX: usize = 64;

impl Session {
    /// A session over `files` (the data targets in layout order; duplicated
    /// here). Build it on the thread that runs it: its io_uring stays there.
    pub fn new(
        id: u32,
        schema: u32,
        shared: Arc<Shared>,
        slot: Arc<StatsSlot>,
        files: Vec<DeviceFile>,
        seed: u64,
    ) -> Result<Self, OltpError> {
        let w = shared.workload;
        let layout = shared.layout;
        let depth = (w.batch_reads as usize).clamp(1, RING_DEPTH_MAX);
        let mut sync = SyncEngine::new(1);
        let mut ring = new_file_engine(shared.engine, depth)
            .map_err(|e| OltpError::os("a session: setting up its I/O engine", e))?;
        for f in &files {
            ring.attach(dup(f)?);
        }
        for f in files {
            sync.attach(f);
        }
        let block = layout.block_bytes() as usize;
        Ok(Self {
            id,
            schema,
            shared,
            slot,
            io: Io {
                layout,
                sync,
                ring,
                scratch: AlignedBuf::zeroed(block * w.multiblock_read_count.max(1) as usize),
                private: Some(AlignedBuf::zeroed(block)),
                batch: Vec::with_capacity(depth),
            },
            op: OpStats::new(),
            rng: ChaCha8Rng::seed_from_u64(
                seed ^ u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ),
            blocks: Vec::with_capacity(w.work_unit as usize),
            change: Vec::with_capacity(block),
            value_sum: 0,
        })
    }

    /// Run the SLOB loop until the run says stop, WORK_LOOP is done, or something fails.
    /// Returns the operations done.
    pub fn run(mut self, release: &Gate) -> Result<u64, OltpError> {
        release.wait();
        let shared = Arc::clone(&self.shared);
        let w = shared.workload;
        let mut done = 0u64;
        while !shared.stop.load(Ordering::Relaxed) && !shared.health.failed() {
            if w.work_loop > 0 && done >= w.work_loop {
                break;
            }
            done += 1;
            if let Some(think) = w.think {
                if think.frequency > 0 && done.is_multiple_of(think.frequency) {
                    self.think(think, &shared.stop);
                }
            }
            let started = Instant::now();
            let cpu_before = thread_cpu_ns();
            let outcome = self.one_operation(done);
            self.op.db_time(started.elapsed());
            self.op
                .db_cpu_ns(thread_cpu_ns().saturating_sub(cpu_before));
            self.slot.publish(&mut self.op);
            match outcome {
                Ok(()) => {}
                Err(Stop::Shutdown) => break,
                Err(Stop::Failed(e)) => {
                    shared.health.fail(format!("session {}: {e}", self.id + 1));
                    shared.cache.shutdown();
                    return Err(e);
                }
            }
        }
        std::hint::black_box(self.value_sum);
        Ok(done)
    }

    fn think(&mut self, think: Think, stop: &AtomicBool) {
        let span = (think.max_s - think.min_s).max(0.0);
        let draw = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let until = Instant::now() + Duration::from_secs_f64(think.min_s + span * draw);
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(50)));
        }
    }

    /// One iteration of the SLOB loop: choose a schema, a key and a statement.
    fn one_operation(&mut self, n: u64) -> Result<(), Stop> {
        let w = self.shared.workload;
        let schema = if w.hot_schema_frequency > 0 && n.is_multiple_of(w.hot_schema_frequency) {
            0
        } else {
            self.schema
        };
        let table = self.shared.layout.shape.table_blocks;
        let wu = u64::from(w.work_unit).min(table);
        let key = match w.hotspot {
            Some(h) if h.frequency > 0 && n.is_multiple_of(h.frequency) => {
                let span = h.keys.saturating_sub(wu) + 1;
                (h.start + self.rng.next_u64() % span).min(table - wu)
            }
            _ => self.rng.next_u64() % (table - wu + 1),
        };
        let draw = (self.rng.next_u64() % 100) as u32;
        self.op.add(Stat::ExecuteCount, 1);
        if draw < w.update_pct {
            self.update(schema, key, wu)
        } else if draw < w.update_pct + w.scan_pct {
            self.scan(schema)
        } else {
            self.select(schema, key, wu)
        }
    }

    /// The index range scan: the table blocks of keys `key .. key + n`, in block order.
    fn index_range(&mut self, schema: u32, key: u64, n: u64) -> Result<(), Stop> {
        let shared = Arc::clone(&self.shared);
        let layout = shared.layout;
        let per_leaf = layout.keys_per_leaf();
        self.blocks.clear();
        for leaf in key / per_leaf..=(key + n - 1) / per_leaf {
            let expect = BlockRef {
                schema,
                segment: Segment::Index,
                number: leaf,
            };
            let id = layout.block_id(expect);
            let pin = get_one(&shared.cache, &mut self.io, &mut self.op, id, Mode::Shared)?;
            if let Err(problem) = block::check(pin.data(), expect, shared.dataset) {
                drop(pin);
                self.corrupt(expect, &problem);
                continue;
            }
            let first = key.max(leaf * per_leaf);
            let end = (key + n).min((leaf + 1) * per_leaf);
            for k in first..end {
                let slot = (k - leaf * per_leaf) as usize;
                if let Some(number) = block::index_entry(pin.data(), slot) {
                    self.blocks.push(layout.block_id(BlockRef {
                        schema,
                        segment: Segment::Table,
                        number,
                    }));
                }
            }
        }
        self.blocks.sort_unstable();
        Ok(())
    }

    fn select(&mut self, schema: u32, key: u64, n: u64) -> Result<(), Stop> {
        self.index_range(schema, key, n)?;
        match self.shared.workload.read_path {
            ReadPath::Cache => self.fetch_cached(),
            ReadPath::Direct => self.fetch_direct(),
        }
    }

    /// Consistent gets of the statement's table blocks; misses batched.
    fn fetch_cached(&mut self) -> Result<(), Stop> {
        let shared = Arc::clone(&self.shared);
        let cache = &shared.cache;
        let batch = shared.workload.batch_reads.max(1) as usize;
        let blocks = std::mem::take(&mut self.blocks);
        let mut pending: Vec<Loading<'_>> = Vec::new();
        let mut result = Ok(());
        'blocks: for &id in &blocks {
            loop {
                match cache.get(id, Mode::Shared, pending.is_empty(), &mut self.op) {
                    Err(CacheError::Shutdown) => {
                        result = Err(Stop::Shutdown);
                        break 'blocks;
                    }
                    Ok(Get::Hit(pin)) => {
                        self.touch(&pin);
                        break;
                    }
                    Ok(Get::Miss(loading)) => {
                        pending.push(loading);
                        if pending.len() >= batch {
                            if let Err(e) = self.read_pending(&mut pending) {
                                result = Err(e);
                                break 'blocks;
                            }
                        }
                        break;
                    }
                    Ok(Get::NoFreeBuffer) => {
                        if let Err(e) = self.read_pending(&mut pending) {
                            result = Err(e);
                            break 'blocks;
                        }
                    }
                }
            }
        }
        if result.is_ok() {
            result = self.read_pending(&mut pending);
        }
        for loading in pending.drain(..) {
            let mut loading = loading;
            let buf = loading.take_buf();
            loading.fail(buf);
        }
        drop(pending);
        self.blocks = blocks;
        result
    }

    /// Read the claimed buffers: alone (`db file sequential read`) or together
    /// (`db file parallel read`), then fetch their rows.
    fn read_pending<'c>(&mut self, pending: &mut Vec<Loading<'c>>) -> Result<(), Stop> {
        if pending.is_empty() {
            return Ok(());
        }
        let block = self.io.layout.block_bytes();
        let n = pending.len() as u64;
        if n == 1 {
            // The common case without batching: no lists, one pread.
            let mut loading = pending.pop().expect("invariant: one claim");
            let buf = loading.take_buf();
            let started = Instant::now();
            let (buf, r) = self.io.read_one(loading.id(), buf);
            self.op.wait(Event::DbFileSequentialRead, started.elapsed());
            if let Err(e) = r {
                loading.fail(buf);
                return Err(Stop::Failed(OltpError::io("reading a data block", e)));
            }
            self.count_reads(1, 1, block, false);
            let pin = loading.complete(buf);
            self.touch(&pin);
            return Ok(());
        }
        let mut bufs = std::mem::take(&mut self.io.batch);
        bufs.clear();
        bufs.extend(pending.iter_mut().map(|l| (l.id(), l.take_buf())));
        let started = Instant::now();
        let outcome = self.io.read_many(&mut bufs);
        self.op.wait(Event::DbFileParallelRead, started.elapsed());
        let result = match outcome {
            Err(e) => {
                for (loading, (_, buf)) in pending.drain(..).zip(bufs.drain(..)) {
                    loading.fail(buf);
                }
                Err(Stop::Failed(OltpError::io("reading a data block", e)))
            }
            Ok(()) => {
                self.count_reads(n, n, n * block, false);
                for (loading, (_, buf)) in pending.drain(..).zip(bufs.drain(..)) {
                    let pin = loading.complete(buf);
                    self.touch(&pin);
                }
                Ok(())
            }
        };
        self.io.batch = bufs;
        result
    }

    /// Direct-path single-block reads of the statement's table blocks.
    fn fetch_direct(&mut self) -> Result<(), Stop> {
        let dataset = self.shared.dataset;
        let layout = self.shared.layout;
        let block = layout.block_bytes();
        for i in 0..self.blocks.len() {
            let id = self.blocks[i];
            let buf = self
                .io
                .private
                .take()
                .unwrap_or_else(|| AlignedBuf::zeroed(block as usize));
            let started = Instant::now();
            let (mut buf, r) = self.io.read_one(id, buf);
            self.op.wait(Event::DirectPathRead, started.elapsed());
            r.map_err(|e| Stop::Failed(OltpError::io("reading a data block", e)))?;
            self.count_reads(1, 1, block, true);
            let expect = expect_of(&layout, id);
            let mut outcome = block::read_row(&buf, expect, dataset);
            if outcome.is_err() {
                // A read around the cache can overlap the writer's write of the
                // same block and see half of each (a fractured block): read it
                // again once, as Oracle does, before calling it corrupt.
                let started = Instant::now();
                let (again, r) = self.io.read_one(id, buf);
                self.op.wait(Event::DirectPathRead, started.elapsed());
                buf = again;
                r.map_err(|e| Stop::Failed(OltpError::io("reading a data block", e)))?;
                self.count_reads(1, 1, block, true);
                outcome = block::read_row(&buf, expect, dataset);
            }
            match outcome {
                Ok(row) => self.fetched(row.value),
                Err(problem) => self.corrupt(expect, &problem),
            }
            self.io.private = Some(buf);
        }
        Ok(())
    }

    /// UPDATE … WHERE key BETWEEN …, then COMMIT.
    fn update(&mut self, schema: u32, key: u64, n: u64) -> Result<(), Stop> {
        self.index_range(schema, key, n)?;
        let shared = Arc::clone(&self.shared);
        let columns = shared.workload.redo_columns;
        let blocks = std::mem::take(&mut self.blocks);
        let mut result = Ok(());
        for &id in &blocks {
            let expect = expect_of(&shared.layout, id);
            let mut pin = match get_one(
                &shared.cache,
                &mut self.io,
                &mut self.op,
                id,
                Mode::Exclusive,
            ) {
                Ok(pin) => pin,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            match block::read_row(pin.data(), expect, shared.dataset) {
                Ok(row) => self.fetched(row.value),
                Err(problem) => {
                    drop(pin);
                    self.corrupt(expect, &problem);
                    continue;
                }
            }
            self.change.clear();
            let row = block::update_row(pin.data_mut(), columns, &mut self.change);
            match shared
                .redo
                .append_change(id, row.version, &self.change, &mut self.op)
            {
                Ok(lsn) => pin.mark_dirty(lsn),
                Err(e) => {
                    result = Err(stop_for(e, &shared.health));
                    break;
                }
            }
            self.op.add(Stat::DbBlockChanges, 1);
        }
        self.blocks = blocks;
        result?;
        shared
            .redo
            .commit(&mut self.op)
            .map(|_| ())
            .map_err(|e| stop_for(e, &shared.health))
    }

    /// A full scan of the schema's scan table: through the cache below the
    /// direct-read threshold, around it above.
    fn scan(&mut self, schema: u32) -> Result<(), Stop> {
        let shared = Arc::clone(&self.shared);
        let layout = shared.layout;
        let total = layout.shape.scan_blocks;
        if total == 0 {
            return Ok(());
        }
        let first = layout.segment_start(schema, Segment::Scan);
        let mbrc = u64::from(shared.workload.multiblock_read_count.max(1));
        let direct = total > shared.workload.direct_read_threshold_blocks;
        self.op.add(
            if direct {
                Stat::TableScansLong
            } else {
                Stat::TableScansShort
            },
            1,
        );
        self.op.add(Stat::TableScanBlocksGotten, total);
        let mut id = first;
        let end = first + total;
        while id < end {
            let n = (end - id).min(mbrc).min(layout.contiguous_from(id));
            if direct {
                self.scan_direct(id, n)?;
            } else {
                self.scan_cached(id, n)?;
            }
            id += n;
        }
        Ok(())
    }

    /// One multiblock read around the cache (`direct path read`).
    fn scan_direct(&mut self, first: BlockId, n: u64) -> Result<(), Stop> {
        let layout = self.shared.layout;
        let dataset = self.shared.dataset;
        let block = layout.block_bytes();
        let started = Instant::now();
        let r = self.io.read_run(first, n);
        self.op.wait(Event::DirectPathRead, started.elapsed());
        r.map_err(|e| Stop::Failed(OltpError::io("reading the scan table", e)))?;
        self.count_reads(n, 1, n * block, true);
        for i in 0..n {
            let expect = expect_of(&layout, first + i);
            let at = (i * block) as usize;
            match block::read_row(&self.io.scratch[at..at + block as usize], expect, dataset) {
                Ok(row) => self.fetched(row.value),
                Err(problem) => self.corrupt(expect, &problem),
            }
        }
        Ok(())
    }

    /// Up to one multiblock read's worth of a small table through the cache:
    /// hits are fetched, each run of consecutive misses is one read
    /// (`db file scattered read`) copied into the claimed buffers.
    fn scan_cached(&mut self, first: BlockId, n: u64) -> Result<(), Stop> {
        let shared = Arc::clone(&self.shared);
        let cache = &shared.cache;
        let mut pending: Vec<Loading<'_>> = Vec::new();
        let mut result = Ok(());
        let mut id = first;
        while id < first + n {
            match cache.get(id, Mode::Shared, pending.is_empty(), &mut self.op) {
                Err(CacheError::Shutdown) => {
                    result = Err(Stop::Shutdown);
                    break;
                }
                Ok(Get::Hit(pin)) => {
                    self.touch(&pin);
                    id += 1;
                }
                Ok(Get::Miss(loading)) => {
                    pending.push(loading);
                    id += 1;
                }
                Ok(Get::NoFreeBuffer) => {
                    if let Err(e) = self.read_scattered(&mut pending) {
                        result = Err(e);
                        break;
                    }
                }
            }
        }
        if result.is_ok() {
            result = self.read_scattered(&mut pending);
        }
        for mut loading in pending.drain(..) {
            let buf = loading.take_buf();
            loading.fail(buf);
        }
        result
    }

    fn read_scattered<'c>(&mut self, pending: &mut Vec<Loading<'c>>) -> Result<(), Stop> {
        let block = self.io.layout.block_bytes() as usize;
        while !pending.is_empty() {
            // A run of consecutive blocks (the caller keeps each inside one extent).
            let mut end = 1;
            while end < pending.len() && pending[end].id() == pending[end - 1].id() + 1 {
                end += 1;
            }
            let first = pending[0].id();
            let n = end as u64;
            let started = Instant::now();
            let r = self.io.read_run(first, n);
            self.op.wait(Event::DbFileScatteredRead, started.elapsed());
            if let Err(e) = r {
                for mut loading in pending.drain(..) {
                    let buf = loading.take_buf();
                    loading.fail(buf);
                }
                return Err(Stop::Failed(OltpError::io("reading the scan table", e)));
            }
            self.count_reads(n, 1, n * block as u64, false);
            for (i, mut loading) in pending.drain(..end).enumerate() {
                let mut buf = loading.take_buf();
                buf.copy_from_slice(&self.io.scratch[i * block..(i + 1) * block]);
                let pin = loading.complete(buf);
                self.touch(&pin);
            }
        }
        Ok(())
    }

    /// Fetch the row of a cached block.
    fn touch(&mut self, pin: &Pinned<'_>) {
        let expect = expect_of(&self.shared.layout, pin.id());
        match block::read_row(pin.data(), expect, self.shared.dataset) {
            Ok(row) => self.fetched(row.value),
            Err(problem) => self.corrupt(expect, &problem),
        }
    }

    fn fetched(&mut self, value: u64) {
        self.op.add(Stat::RowsTouched, 1);
        self.value_sum = self.value_sum.wrapping_add(value);
    }

    fn corrupt(&mut self, at: BlockRef, problem: &block::BlockError) {
        self.op.add(Stat::BlockCorruptions, 1);
        // Messages kept for the report, each pushed whole: safe to keep
        // collecting after a thread panicked (that panic fails the run).
        let mut kept = self.shared.corruptions.lock_or_recover();
        if kept.len() < CORRUPTIONS_KEPT {
            kept.push(format!(
                "schema {} {} block {}: {problem}",
                at.schema + 1,
                at.segment.name(),
                at.number
            ));
        }
    }

    fn count_reads(&mut self, blocks: u64, requests: u64, bytes: u64, direct: bool) {
        self.op.add(Stat::PhysicalReads, blocks);
        self.op.add(
            if direct {
                Stat::PhysicalReadsDirect
            } else {
                Stat::PhysicalReadsCache
            },
            blocks,
        );
        self.op.add(Stat::PhysicalReadIoRequests, requests);
        self.op.add(Stat::PhysicalReadBytes, bytes);
        if blocks > requests {
            self.op.add(Stat::PhysicalReadMultiBlockRequests, requests);
        }
    }
}

/// Why an operation stopped early.
enum Stop {
    /// The run is stopping (the cache or log was shut down): not an error.
    Shutdown,
    Failed(OltpError),
}

/// A redo error after the run has failed elsewhere is part of the shutdown.
fn stop_for(e: OltpError, health: &Health) -> Stop {
    if health.failed() {
        Stop::Shutdown
    } else {
        Stop::Failed(e)
    }
}

fn expect_of(layout: &Layout, id: BlockId) -> BlockRef {
    layout
        .block_ref(id)
        .expect("invariant: sessions only address blocks of the dataset")
}

/// Get one block pinned, reading it alone on a miss (`db file sequential read`).
fn get_one<'c>(
    cache: &'c BufferCache,
    io: &mut Io,
    op: &mut OpStats,
    id: BlockId,
    mode: Mode,
) -> Result<Pinned<'c>, Stop> {
    loop {
        match cache.get(id, mode, true, op) {
            Err(CacheError::Shutdown) => return Err(Stop::Shutdown),
            Ok(Get::Hit(pin)) => return Ok(pin),
            Ok(Get::NoFreeBuffer) => continue,
            Ok(Get::Miss(mut loading)) => {
                let buf = loading.take_buf();
                let started = Instant::now();
                let (buf, r) = io.read_one(id, buf);
                op.wait(Event::DbFileSequentialRead, started.elapsed());
                return match r {
                    Ok(()) => {
                        let block = io.layout.block_bytes();
                        op.add(Stat::PhysicalReads, 1);
                        op.add(Stat::PhysicalReadsCache, 1);
                        op.add(Stat::PhysicalReadIoRequests, 1);
                        op.add(Stat::PhysicalReadBytes, block);
                        Ok(loading.complete(buf))
                    }
                    Err(e) => {
                        loading.fail(buf);
                        Err(Stop::Failed(OltpError::io("reading a data block", e)))
                    }
                };
            }
        }
    }
}

fn dup(f: &DeviceFile) -> Result<DeviceFile, OltpError> {
    f.try_clone()
        .map_err(|e| OltpError::os(format!("duplicating {}", f.path().display()), e))
}

impl Io {
    fn request(&self, id: BlockId, buf: AlignedBuf, tag: u64) -> Request {
        let at = self.layout.locate(id);
        Request {
            device: DeviceId(at.target as u32),
            tag,
            op: Op::Read {
                offset_bytes: at.offset_bytes,
                buf,
            },
        }
    }

    /// One synchronous single-block read into `buf`; the buffer always comes back.
    fn read_one(&mut self, id: BlockId, buf: AlignedBuf) -> (AlignedBuf, Result<(), IoError>) {
        let len = buf.len();
        let request = self.request(id, buf, 0);
        match self.sync.execute(request) {
            Ok(c) => {
                let buf = c.buf.unwrap_or_else(|| AlignedBuf::zeroed(len));
                (buf, c.result.map(|_| ()))
            }
            Err(e) => (AlignedBuf::zeroed(len), Err(e)),
        }
    }

    /// Several single-block reads submitted together (at most the ring's
    /// depth at a time); every buffer comes back in place, in order.
    fn read_many(&mut self, bufs: &mut Vec<(BlockId, AlignedBuf)>) -> Result<(), IoError> {
        let block = self.layout.block_bytes() as usize;
        let depth = self.ring.depth_max().max(1);
        let mut first_error = None;
        let mut done: Vec<(BlockId, AlignedBuf)> = Vec::with_capacity(bufs.len());
        let mut rest = bufs.drain(..);
        loop {
            let mut ids = Vec::with_capacity(depth);
            let mut requests = Vec::with_capacity(depth);
            for (id, buf) in rest.by_ref().take(depth) {
                requests.push(self.request(id, buf, ids.len() as u64));
                ids.push(id);
            }
            if requests.is_empty() {
                break;
            }
            match self.ring.execute_all(requests) {
                Ok(completions) => {
                    for (id, c) in ids.into_iter().zip(completions) {
                        if let Err(e) = c.result {
                            first_error.get_or_insert(e);
                        }
                        done.push((id, c.buf.unwrap_or_else(|| AlignedBuf::zeroed(block))));
                    }
                }
                Err(e) => {
                    // The engine lost the buffers: the claims get fresh ones.
                    first_error.get_or_insert(e);
                    done.extend(ids.into_iter().map(|id| (id, AlignedBuf::zeroed(block))));
                }
            }
        }
        drop(rest);
        *bufs = done;
        first_error.map_or(Ok(()), Err)
    }

    /// One read of `n` consecutive blocks (inside one extent) into the scratch buffer.
    fn read_run(&mut self, first: BlockId, n: u64) -> Result<(), IoError> {
        let len = (n * self.layout.block_bytes()) as usize;
        let mut scratch = std::mem::replace(&mut self.scratch, AlignedBuf::zeroed(0));
        let capacity = scratch.capacity();
        scratch.set_len(len.min(capacity));
        let request = self.request(first, scratch, 0);
        let (buf, r) = match self.sync.execute(request) {
            Ok(c) => (
                c.buf.unwrap_or_else(|| AlignedBuf::zeroed(capacity)),
                c.result.map(|_| ()),
            ),
            Err(e) => (AlignedBuf::zeroed(capacity), Err(e)),
        };
        self.scratch = buf;
        let full = self.scratch.capacity();
        self.scratch.set_len(full);
        r
    }
}
