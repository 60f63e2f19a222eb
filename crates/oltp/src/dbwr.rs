//! The database writer: writes dirty buffers back to the data files.
//!
//! One thread, owning one I/O engine (io_uring, or pread/pwrite where the
//! kernel refuses io_uring) with the data targets attached in layout order.
//! It writes in batches of asynchronous writes — submitted together, waited for
//! together, timed as one `db file parallel write` — when a session posts it
//! for free buffers, when more than a quarter of the cache is dirty, and at
//! every checkpoint interval (a checkpoint writes every buffer dirty when it
//! starts). [`Dbwr::stop`] ends with a checkpoint of everything, then flushes
//! the targets, so a clean stop leaves every change in the data files.
//!
//! Invariants: the write-ahead rule — before a batch is submitted, the redo
//! covering every change in it is on disk ([`RedoFlush::flush_to`] with the
//! batch's highest LSN); a buffer is never written twice at once and never
//! changed while being written (the cache's `writing` flag).
//!
//! Faults: a failed write or flush is fatal to the run — the writer records
//! one line naming the target and offset in [`Health`], shuts the cache down
//! (so no session waits forever for a buffer it will never clean) and ends.
//! It does not retry: a device that refused a write is a result to report.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cairn_io::engine::{FileEngine, SubmitError};
use cairn_io::{
    new_file_engine, AlignedBuf, Completion, DeviceFile, DeviceId, EngineKind, IoError, Op, Request,
};

use super::cache::{BufferCache, WriteJob};
use super::layout::{BlockId, Layout};
use super::redo::{Lsn, RedoLog};
use super::stats::{thread_cpu_ns, Event, OpStats, Stat, StatsSlot};
use super::{Health, OltpError};

#[derive(Debug, Clone, Copy)]
pub struct DbwrConfig {
    pub layout: Layout,
    /// Most buffers in one batch of asynchronous writes.
    pub batch: usize,
    /// Time between checkpoints; zero: only the final one, at stop.
    pub checkpoint_interval: Duration,
    /// io_uring, pread/pwrite, or io_uring where the kernel allows it.
    pub engine: EngineKind,
}

/// The longest the writer sleeps with nothing to do: it re-checks the dirty
/// share and the stop flag at least this often.
const IDLE_WAIT_MAX: Duration = Duration::from_secs(1);
/// How long the final checkpoint waits for buffers still pinned exclusively
/// (sessions are meant to be stopped first) before reporting them.
const FINAL_CHECKPOINT_PIN_WAIT_MAX: Duration = Duration::from_secs(10);

/// The write-ahead step: make the redo durable up to an LSN before writing
/// blocks changed by it. [`RedoLog`] is the real one; tests supply fakes.
pub trait RedoFlush: Send + Sync + 'static {
    fn flush_to(&self, lsn: Lsn) -> Result<(), OltpError>;
}

impl RedoFlush for RedoLog {
    fn flush_to(&self, lsn: Lsn) -> Result<(), OltpError> {
        RedoLog::flush_to(self, lsn)
    }
}

/// The running database writer. Dropping it without [`Dbwr::stop`] stops it
/// too (and discards its error).
pub struct Dbwr {
    cache: Arc<BufferCache>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), OltpError>>>,
}

impl Dbwr {
    /// Start the writer over the data targets `files` (in layout order).
    pub fn start(
        cache: Arc<BufferCache>,
        redo: Arc<RedoLog>,
        files: Vec<DeviceFile>,
        cfg: DbwrConfig,
        slot: Arc<StatsSlot>,
        health: Arc<Health>,
    ) -> Result<Dbwr, OltpError> {
        Self::start_with(cache, redo, files, cfg, slot, health)
    }

    /// [`Dbwr::start`] with any write-ahead hook (tests use fakes).
    ///
    /// Errors: `files` not matching the layout's targets, a block size other
    /// than the cache's, a batch of zero, or a thread that cannot be started.
    pub fn start_with<R: RedoFlush>(
        cache: Arc<BufferCache>,
        redo: Arc<R>,
        files: Vec<DeviceFile>,
        cfg: DbwrConfig,
        slot: Arc<StatsSlot>,
        health: Arc<Health>,
    ) -> Result<Dbwr, OltpError> {
        if files.len() != cfg.layout.targets {
            return Err(OltpError::Usage(format!(
                "the database writer was given {} data targets for a layout of {}; pass every data target, in order",
                files.len(),
                cfg.layout.targets
            )));
        }
        if cfg.layout.block_bytes() != cache.block_size() as u64 {
            return Err(OltpError::Usage(format!(
                "the dataset's blocks are {} bytes but the buffer cache's are {}; build the cache with the dataset's block size",
                cfg.layout.block_bytes(),
                cache.block_size()
            )));
        }
        if cfg.batch == 0 {
            return Err(OltpError::Usage(
                "the database writer's batch is 0 buffers; give at least 1".into(),
            ));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writer_cache = Arc::clone(&cache);
        let writer_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("cairn-dbwr".into())
            .spawn(move || {
                let _on_panic = ShutOnPanic {
                    cache: Arc::clone(&writer_cache),
                    health: Arc::clone(&health),
                };
                let cpu_mark = thread_cpu_ns();
                let engine = match new_file_engine(cfg.engine, cfg.batch) {
                    Ok(e) => e,
                    Err(e) => {
                        let err = OltpError::os("database writer: setting up its I/O engine", e);
                        health.fail(err.to_string());
                        writer_cache.shutdown();
                        return Err(err);
                    }
                };
                let mut writer = Writer {
                    cache: writer_cache,
                    redo,
                    paths: files.iter().map(|f| f.path().to_path_buf()).collect(),
                    engine,
                    cfg,
                    slot,
                    health,
                    stop: writer_stop,
                    op: OpStats::new(),
                    jobs: Vec::with_capacity(cfg.batch),
                    meta: Vec::with_capacity(cfg.batch),
                    done: Vec::with_capacity(cfg.batch),
                    cpu_mark,
                };
                for (i, file) in files.into_iter().enumerate() {
                    let id = writer.engine.attach(file);
                    assert_eq!(
                        id,
                        DeviceId(i as u32),
                        "invariant: devices are numbered in attach order"
                    );
                }
                writer.run()
            })
            .map_err(|e| OltpError::os("starting the database writer thread", e))?;
        Ok(Dbwr {
            cache,
            stop,
            thread: Some(thread),
        })
    }

    /// Write every dirty buffer (a final checkpoint), stop, and wait for the thread.
    /// Returns the writer's error if it failed (it has also been given to `health`).
    /// If the run has already failed (`health`), nothing more is written: the
    /// data files are left as a crash would leave them.
    pub fn stop(mut self) -> Result<(), OltpError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), OltpError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        self.stop.store(true, Ordering::SeqCst);
        self.cache.post_writer();
        match thread.join() {
            Ok(result) => result,
            Err(_) => Err(OltpError::Usage(
                "the database writer thread panicked; this is a bug in Cairn, please report it"
                    .into(),
            )),
        }
    }
}

impl Drop for Dbwr {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Where each write of a batch goes, kept while its buffer is with the engine.
struct WriteMeta {
    frame: usize,
    id: BlockId,
    lsn: Lsn,
    target: usize,
    offset_bytes: u64,
}

/// Held by the writer thread: if it panics (a bug, or a buffer a session
/// panicked holding), the run fails and the cache shuts, so no session waits
/// for free buffers this writer will never clean — the run ends, failed,
/// instead of hanging.
struct ShutOnPanic {
    cache: Arc<BufferCache>,
    health: Arc<Health>,
}

impl Drop for ShutOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.health
                .fail("the database writer panicked; this is a bug in Cairn, please report it");
            self.cache.shutdown();
        }
    }
}

struct Writer<R: RedoFlush> {
    cache: Arc<BufferCache>,
    redo: Arc<R>,
    paths: Vec<PathBuf>,
    engine: Box<dyn FileEngine>,
    cfg: DbwrConfig,
    slot: Arc<StatsSlot>,
    health: Arc<Health>,
    stop: Arc<AtomicBool>,
    op: OpStats,
    /// Reused every batch: the cache recycles the buffers of the jobs left in it.
    jobs: Vec<WriteJob>,
    meta: Vec<WriteMeta>,
    done: Vec<Option<Completion>>,
    cpu_mark: u64,
}

impl<R: RedoFlush> Writer<R> {
    fn run(mut self) -> Result<(), OltpError> {
        let result = self.main_loop();
        self.publish();
        if let Err(e) = &result {
            self.health.fail(e.to_string());
            self.cache.shutdown();
        }
        result
    }

    fn main_loop(&mut self) -> Result<(), OltpError> {
        let interval = self.cfg.checkpoint_interval;
        let mut next_checkpoint = (!interval.is_zero()).then(|| Instant::now() + interval);
        let dirty_max = self.cache.buffers() / 4;
        let mut last_batch_empty = false;
        loop {
            if self.stop.load(Ordering::SeqCst) {
                if self.health.failed() || self.cache.is_shutdown() {
                    return Ok(());
                }
                return self.final_checkpoint();
            }
            if self.health.failed() || self.cache.is_shutdown() {
                // Another thread failed: the run is over. Shut the cache so no
                // session waits for buffers this writer will no longer clean.
                self.cache.shutdown();
                return Ok(());
            }
            let busy = self.cache.dirty_buffers() > dirty_max && !last_batch_empty;
            let asked = busy || {
                let timeout = next_checkpoint.map_or(IDLE_WAIT_MAX, |at| {
                    at.saturating_duration_since(Instant::now())
                        .min(IDLE_WAIT_MAX)
                });
                self.cache.wait_for_writer_work(timeout)
            };
            if self.stop.load(Ordering::SeqCst) || self.cache.is_shutdown() {
                continue;
            }
            if next_checkpoint.is_some_and(|at| Instant::now() >= at) {
                self.checkpoint()?;
                next_checkpoint = Some(Instant::now() + interval);
                last_batch_empty = false;
            } else if asked || self.cache.dirty_buffers() > dirty_max {
                last_batch_empty = self.batch(false)? == 0;
            }
        }
    }

    /// Write the buffers dirty now (not those dirtied meanwhile), then flush the targets.
    fn checkpoint(&mut self) -> Result<(), OltpError> {
        let target = self.cache.dirty_buffers();
        let mut written = 0;
        while written < target {
            let n = self.batch(true)?;
            if n == 0 {
                break;
            }
            written += n;
        }
        self.flush_targets()?;
        self.op.add(Stat::DbwrCheckpoints, 1);
        self.publish();
        Ok(())
    }

    /// Write every dirty buffer, waiting a bounded time for any still pinned.
    fn final_checkpoint(&mut self) -> Result<(), OltpError> {
        let deadline = Instant::now() + FINAL_CHECKPOINT_PIN_WAIT_MAX;
        while self.cache.dirty_buffers() > 0 {
            if self.batch(true)? == 0 {
                if Instant::now() >= deadline {
                    return Err(OltpError::Usage(format!(
                        "database writer: {} dirty buffers stayed pinned for {} s at stop; stop the sessions before the writer",
                        self.cache.dirty_buffers(),
                        FINAL_CHECKPOINT_PIN_WAIT_MAX.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        self.flush_targets()?;
        self.op.add(Stat::DbwrCheckpoints, 1);
        Ok(())
    }

    fn flush_targets(&mut self) -> Result<(), OltpError> {
        for (i, path) in self.paths.iter().enumerate() {
            self.engine.flush(DeviceId(i as u32)).map_err(|e| {
                OltpError::io(
                    format!(
                        "database writer: flushing {} after a checkpoint",
                        path.display()
                    ),
                    e,
                )
            })?;
        }
        Ok(())
    }

    /// One batch: claim, make the redo durable, write, wait, release. Returns
    /// the buffers written.
    fn batch(&mut self, checkpoint: bool) -> Result<usize, OltpError> {
        self.cache
            .begin_writes(self.cfg.batch, checkpoint, &mut self.jobs, &mut self.op);
        let n = self.jobs.len();
        if n == 0 {
            return Ok(0);
        }
        let lsn_max = self.jobs.iter().map(|j| j.lsn).max().unwrap_or(0);
        if let Err(e) = self.redo.flush_to(lsn_max) {
            for job in &self.jobs {
                self.cache.end_write(job, false);
            }
            return Err(e);
        }
        self.meta.clear();
        self.done.clear();
        self.done.resize_with(n, || None);
        let started = Instant::now();
        let mut received = self.submit_batch()?;
        while received < n {
            self.engine
                .wait(1)
                .map_err(|e| OltpError::io("database writer: waiting for writes", e))?;
            received += self.reap();
        }
        self.op.wait(Event::DbFileParallelWrite, started.elapsed());
        let (ok_count, first_error) = self.end_batch();
        let block = self.cache.block_size() as u64;
        self.op.add(Stat::PhysicalWrites, ok_count);
        self.op.add(Stat::PhysicalWriteIoRequests, ok_count);
        self.op.add(Stat::PhysicalWriteBytes, ok_count * block);
        if checkpoint {
            self.op.add(Stat::DbwrCheckpointBuffersWritten, ok_count);
        }
        self.publish();
        if let Some((i, e)) = first_error {
            let meta = &self.meta[i];
            return Err(OltpError::io(
                format!(
                    "database writer: writing block {} to {} at offset {}",
                    meta.id,
                    self.paths[meta.target].display(),
                    meta.offset_bytes
                ),
                e,
            ));
        }
        Ok(n)
    }

    /// Submit a write for every job of the batch, waiting for room when the
    /// queue is full; returns the completions reaped while waiting.
    fn submit_batch(&mut self) -> Result<usize, OltpError> {
        let layout = self.cfg.layout;
        let mut received = 0;
        // Taken out so `reap` may borrow `self` while the jobs drain (its capacity comes back below).
        let mut jobs = std::mem::take(&mut self.jobs);
        for (i, job) in jobs.drain(..).enumerate() {
            let at = layout.locate(job.id);
            self.meta.push(WriteMeta {
                frame: job.frame,
                id: job.id,
                lsn: job.lsn,
                target: at.target,
                offset_bytes: at.offset_bytes,
            });
            let mut request = Request {
                device: DeviceId(at.target as u32),
                tag: i as u64,
                op: Op::Write {
                    offset_bytes: at.offset_bytes,
                    buf: job.buf,
                    fua: false,
                },
            };
            loop {
                match self.engine.submit(request) {
                    Ok(()) => break,
                    Err(SubmitError::QueueFull(r)) => {
                        request = r;
                        self.engine
                            .wait(1)
                            .map_err(|e| OltpError::io("database writer: waiting for writes", e))?;
                        received += self.reap();
                    }
                }
            }
        }
        self.jobs = jobs;
        Ok(received)
    }

    /// Give every buffer of the completed batch back to the cache, clean
    /// where its write succeeded; the writes that did, and the first that
    /// failed (its index in the batch).
    fn end_batch(&mut self) -> (u64, Option<(usize, IoError)>) {
        let mut first_error: Option<(usize, IoError)> = None;
        let mut ok_count = 0u64;
        for (i, slot) in self.done.iter_mut().enumerate() {
            let completion = slot
                .take()
                .expect("invariant: every write of the batch completed");
            let meta = &self.meta[i];
            let job = WriteJob {
                frame: meta.frame,
                id: meta.id,
                lsn: meta.lsn,
                buf: completion
                    .buf
                    .unwrap_or_else(|| AlignedBuf::zeroed(self.cache.block_size())),
            };
            let ok = completion.result.is_ok();
            if let Err(e) = completion.result {
                first_error.get_or_insert((i, e));
            } else {
                ok_count += 1;
            }
            self.cache.end_write(&job, ok);
            self.jobs.push(job);
        }
        (ok_count, first_error)
    }

    /// Move ready completions into their slots; returns how many.
    fn reap(&mut self) -> usize {
        let mut count = 0;
        while let Some(c) = self.engine.pop_completion() {
            let i = c.tag as usize;
            assert!(
                i < self.done.len() && self.done[i].is_none(),
                "invariant: one completion per write of the batch"
            );
            self.done[i] = Some(c);
            count += 1;
        }
        count
    }

    fn publish(&mut self) {
        let now = thread_cpu_ns();
        self.op.background_cpu_ns(now.saturating_sub(self.cpu_mark));
        self.cpu_mark = now;
        self.slot.publish(&mut self.op);
    }
}
