//! The log buffer and the log writer (Oracle's LGWR), with group commit.
//!
//! Sessions copy redo records into one circular log buffer under one mutex (the
//! redo allocation latch), so the bytes of the redo stream are in the order the
//! changes were made and an LSN is simply a byte position in that stream. The
//! log writer thread owns one I/O engine (io_uring, or pread/pwrite where the
//! kernel refuses io_uring) and, each time it wakes, writes *everything*
//! appended so far as one write: every commit that arrived while the previous
//! write was in flight is covered by the next single write. That is group
//! commit, and it is why `log file sync` waits are shorter than a queue of
//! single commits would make them.
//!
//! # The redo stream
//!
//! A record is a [`RECORD_HEADER_BYTES`]-byte header followed by its payload:
//!
//! | bytes  | field                                                   |
//! |--------|---------------------------------------------------------|
//! | 0      | kind: [`RECORD_KIND_CHANGE`] or [`RECORD_KIND_COMMIT`] (never 0) |
//! | 1..4   | reserved, zero                                          |
//! | 4..8   | record length in bytes, header included (u32 LE)        |
//! | 8..16  | data block id (u64 LE; 0 for a commit)                  |
//! | 16..24 | the block's version after the change (u64 LE; 0 for a commit) |
//! | 24..   | the change vector (none for a commit)                   |
//!
//! # Redo blocks
//!
//! The stream is written in redo blocks of `block_bytes` (the device's logical
//! sector), each with a [`REDO_BLOCK_HEADER_BYTES`]-byte header:
//!
//! | bytes  | field                                                            |
//! |--------|------------------------------------------------------------------|
//! | 0..2   | low 16 bits of the dataset id (u16 LE)                           |
//! | 2..4   | offset in the block of the first record that starts in it, or [`NO_RECORD_START`] |
//! | 4..12  | block sequence number (u64 LE), one more for each block written  |
//! | 12..16 | CRC-32C of the dataset id (8 bytes LE), bytes 0..12, and 16..end |
//!
//! Records continue from block to block. The last block of a write is padded
//! with zeros (redo wastage) and the next write starts in the next block, as
//! Oracle does; a zero byte where a record should start therefore marks padding.
//! The n-th block a log writer writes goes to `start + (n mod blocks) ×
//! block_bytes`: the log cycles through its area and overwrites itself. The
//! first sequence number of a log writer is the wall clock in ns, so the blocks
//! of two runs on the same file never look like one continuous sequence.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cairn_io::poison::Recover;
use cairn_io::{
    new_file_engine, AlignedBuf, DeviceFile, DeviceId, EngineKind, FileEngine, IoEngine, IoError,
    Op, Request, SubmitError,
};
use serde::{Deserialize, Serialize};

use super::layout::BlockId;
use super::stats::{thread_cpu_ns, Event, OpStats, Stat, StatsSlot};
use super::{Health, OltpError};

/// A position in the redo stream: bytes of redo records generated before it.
pub type Lsn = u64;

/// Bytes of a redo record's header.
pub const RECORD_HEADER_BYTES: usize = 24;
/// Bytes of a commit record (a header and nothing else).
pub const COMMIT_RECORD_BYTES: usize = RECORD_HEADER_BYTES;
/// The largest redo record, header included. A change vector is at most
/// [`MAX_CHANGE_BYTES`]; SLOB's REDO_STRESS needs at most 19 × 128 bytes.
pub const MAX_RECORD_BYTES: usize = 16 << 10;
/// The largest change vector one record carries.
pub const MAX_CHANGE_BYTES: usize = MAX_RECORD_BYTES - RECORD_HEADER_BYTES;
/// The smallest log buffer: room for several of the largest records.
pub const LOG_BUFFER_MIN_BYTES: usize = 64 << 10;
/// Record kind: a change to one data block.
pub const RECORD_KIND_CHANGE: u8 = 1;
/// Record kind: a commit.
pub const RECORD_KIND_COMMIT: u8 = 2;
/// Bytes of a redo block's header.
pub const REDO_BLOCK_HEADER_BYTES: usize = 16;
/// A redo block's first-record field when no record starts in the block.
pub const NO_RECORD_START: u16 = 0xFFFF;
/// The largest redo block (its offsets must fit below [`NO_RECORD_START`]).
pub const REDO_BLOCK_MAX_BYTES: u32 = 32 << 10;
/// The fewest redo blocks a redo area may have.
pub const REDO_AREA_MIN_BLOCKS: u64 = 8;

/// How long the log writer sleeps when nobody posts it (Oracle: 3 s; SLOB runs are short).
const WRITER_TIMEOUT: Duration = Duration::from_secs(1);
/// The most bytes the log writer copies out of the log buffer per hold of the latch.
const COPY_CHUNK_BYTES: usize = 64 << 10;
/// The most log-writer requests in flight at once (the ring's depth).
const WRITER_DEPTH_MAX: usize = 256;

/// The size of a change record carrying `change_len` bytes of change vector.
pub fn change_record_bytes(change_len: usize) -> u64 {
    (RECORD_HEADER_BYTES + change_len) as u64
}

#[derive(Debug, Clone, Copy)]
pub struct RedoConfig {
    pub log_buffer_bytes: usize,
    /// The byte range of the redo file the log cycles through.
    pub start: u64,
    pub end: u64,
    /// The redo block (the device's logical sector, at least 512).
    pub block_bytes: u32,
    /// The largest single write (the device's maximum transfer).
    pub max_write_bytes: u64,
    pub dataset: u64,
}

impl RedoConfig {
    fn area_blocks(&self) -> u64 {
        (self.end - self.start) / u64::from(self.block_bytes)
    }

    fn payload_bytes(&self) -> usize {
        self.block_bytes as usize - REDO_BLOCK_HEADER_BYTES
    }

    /// Check the configuration against itself and against `file`.
    fn validate(&self, file: &DeviceFile) -> Result<(), OltpError> {
        let path = file.path().display();
        let bb = self.block_bytes;
        let sector = file.geometry().logical_sector_bytes;
        if !(512..=REDO_BLOCK_MAX_BYTES).contains(&bb) || !bb.is_power_of_two() {
            return Err(OltpError::Usage(format!(
                "redo block of {bb} bytes: give a power of two from 512 to {REDO_BLOCK_MAX_BYTES}"
            )));
        }
        if !bb.is_multiple_of(sector) {
            return Err(OltpError::Usage(format!(
                "redo block of {bb} bytes is not a multiple of {path}'s {sector}-byte logical sector; use the sector size"
            )));
        }
        let bbu = u64::from(bb);
        if !self.start.is_multiple_of(bbu)
            || !self.end.is_multiple_of(bbu)
            || self.end <= self.start
        {
            return Err(OltpError::Usage(format!(
                "redo area {}..{} of {path} is empty or not aligned to the {bb}-byte redo block",
                self.start, self.end
            )));
        }
        let size = file.geometry().size_bytes;
        if self.end > size {
            return Err(OltpError::Usage(format!(
                "redo area ends at byte {} but {path} holds only {size} bytes; give a larger redo file",
                self.end
            )));
        }
        let area_payload = (self.area_blocks().saturating_sub(1)) * self.payload_bytes() as u64;
        if self.area_blocks() < REDO_AREA_MIN_BLOCKS || area_payload < 2 * MAX_RECORD_BYTES as u64 {
            return Err(OltpError::Usage(format!(
                "redo area of {} bytes on {path} is too small: give at least {} bytes",
                self.end - self.start,
                (REDO_AREA_MIN_BLOCKS * bbu).max(
                    (2 * MAX_RECORD_BYTES as u64).div_ceil(self.payload_bytes() as u64 + 1) * bbu
                        + 2 * bbu
                )
            )));
        }
        let min_buffer = LOG_BUFFER_MIN_BYTES.max(4 * MAX_RECORD_BYTES);
        if self.log_buffer_bytes < min_buffer {
            return Err(OltpError::Usage(format!(
                "log buffer of {} bytes is too small: give at least {min_buffer} bytes",
                self.log_buffer_bytes
            )));
        }
        if self.max_write_bytes < bbu {
            return Err(OltpError::Usage(format!(
                "largest redo write of {} bytes is smaller than the {bb}-byte redo block",
                self.max_write_bytes
            )));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RedoSummary {
    /// Bytes of redo records generated (the sum of the records' sizes).
    pub bytes_generated: u64,
    /// Bytes of records written (equal to the above after a clean stop).
    pub bytes_written: u64,
    pub writes: u64,
    /// Times the log wrapped to its start.
    pub wraps: u64,
}

/// Why the log no longer takes records.
#[derive(Debug, Clone)]
enum Down {
    /// A log write failed: every later call reports it.
    Failed { context: String, error: IoError },
    /// `stop` was called.
    Stopped,
    /// The log writer thread panicked (a bug).
    Panicked,
}

impl Down {
    fn to_error(&self) -> OltpError {
        match self {
            Down::Failed { context, error } => OltpError::io(context.clone(), error.clone()),
            Down::Stopped => OltpError::Usage(
                "the log writer has been stopped; no more redo can be written in this run".into(),
            ),
            Down::Panicked => OltpError::Usage(
                "the log writer panicked; this is a bug in Cairn, please report it".into(),
            ),
        }
    }
}

/// Everything under the redo allocation latch.
struct State {
    /// The circular log buffer; byte `lsn % len` holds stream byte `lsn`.
    ring: Vec<u8>,
    /// End of the records copied into the buffer.
    appended: Lsn,
    /// End of the records on disk.
    written: Lsn,
    /// Someone asked the writer to write (a commit, a flush, a full buffer).
    posted: bool,
    /// The writer is asleep waiting for a post.
    writer_idle: bool,
    /// Sessions waiting for room in the buffer.
    space_waiters: usize,
    /// Set by `stop`: the writer writes what is left and ends; appends are refused.
    stopping: bool,
    /// Set when the writer has ended (cleanly or not).
    writer_done: bool,
    down: Option<Down>,
    writes: u64,
    wraps: u64,
    /// Test hook: the writer does not start a write while this is set.
    hold: bool,
}

struct Shared {
    cfg: RedoConfig,
    state: Mutex<State>,
    /// The writer waits here for posts.
    writer_cv: Condvar,
    /// Committers, flushers and space waiters wait here for `written` to move.
    written_cv: Condvar,
    /// Test hook: commits stop waiting without a covering write.
    release_commits_early: AtomicBool,
}

/// The log's state after a thread panicked holding it (a bug) may be half
/// changed — positions in the ring, what is written — so the panic spreads
/// to whoever takes it next and the run fails instead of logging on.
const STATE_POISONED: &str = "invariant: no thread panics while holding the log's state";

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect(STATE_POISONED)
    }

    /// The state for shutting down only: marking the writer gone and waking
    /// whoever waits for it, after a panic has already failed the run. Those
    /// flags are set whole, nothing is read back to report, and a `Drop` that
    /// runs while unwinding must not panic again.
    fn lock_for_shutdown(&self) -> MutexGuard<'_, State> {
        self.state.lock_or_recover()
    }

    /// Wake the writer (the caller holds the latch).
    fn post(&self, st: &mut State) {
        if !st.posted {
            st.posted = true;
            if st.writer_idle {
                self.writer_cv.notify_one();
            }
        }
    }
}

/// The log buffer and its log writer thread.
pub struct RedoLog {
    shared: Arc<Shared>,
    /// The log writer's engine as it runs ("io_uring", "sync").
    engine_name: &'static str,
    writer: Mutex<Option<JoinHandle<()>>>,
    summary: Mutex<Option<RedoSummary>>,
}

impl fmt::Debug for RedoLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("RedoLog")
            .field("appended", &st.appended)
            .field("written", &st.written)
            .field("writes", &st.writes)
            .finish()
    }
}

impl RedoLog {
    /// Start the log writer on `file`, on io_uring where the kernel allows it.
    pub fn start(
        file: DeviceFile,
        cfg: RedoConfig,
        slot: Arc<StatsSlot>,
        health: Arc<Health>,
    ) -> Result<Arc<RedoLog>, OltpError> {
        Self::start_on(file, cfg, EngineKind::Auto, slot, health)
    }

    /// [`RedoLog::start`] on the given kind of I/O engine.
    pub fn start_on(
        file: DeviceFile,
        cfg: RedoConfig,
        engine_kind: EngineKind,
        slot: Arc<StatsSlot>,
        health: Arc<Health>,
    ) -> Result<Arc<RedoLog>, OltpError> {
        cfg.validate(&file)?;
        let path = file.path().display().to_string();
        let bb = u64::from(cfg.block_bytes);
        let max_write = cfg
            .max_write_bytes
            .min(u64::from(file.geometry().max_transfer_bytes).max(bb));
        let request_blocks = (max_write / bb).max(1);
        // Blocks of the largest write: a full buffer, plus one for a partly used block.
        let write_blocks_max =
            (cfg.log_buffer_bytes as u64).div_ceil(cfg.payload_bytes() as u64) + 1;
        // One more request than blocks / request size, for the split at the wrap.
        let requests_max = write_blocks_max.div_ceil(request_blocks) as usize + 1;
        let depth = requests_max.clamp(1, WRITER_DEPTH_MAX);
        let shared = Arc::new(Shared {
            cfg,
            state: Mutex::new(State {
                ring: vec![0; cfg.log_buffer_bytes],
                appended: 0,
                written: 0,
                posted: false,
                writer_idle: false,
                space_waiters: 0,
                stopping: false,
                writer_done: false,
                down: None,
                writes: 0,
                wraps: 0,
                hold: false,
            }),
            writer_cv: Condvar::new(),
            written_cv: Condvar::new(),
            release_commits_early: AtomicBool::new(false),
        });
        let first_sequence = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 2))
            .unwrap_or(1)
            .min(u64::MAX / 2);
        // The engine is made on the writer thread, which owns it (an io_uring is
        // not shared between threads); its setup error comes back through `ready`.
        let (ready_tx, ready_rx) =
            std::sync::mpsc::sync_channel::<Result<&'static str, OltpError>>(1);
        let writer_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("cairn-lgwr".into())
            .spawn(move || {
                let _on_panic = DownOnPanic {
                    shared: Arc::clone(&writer_shared),
                    health: Arc::clone(&health),
                };
                let mut engine = match new_file_engine(engine_kind, depth) {
                    Ok(engine) => engine,
                    Err(e) => {
                        let _ = ready_tx.send(Err(OltpError::os(
                            format!("log writer: cannot set up an I/O engine for {path}"),
                            e,
                        )));
                        return;
                    }
                };
                let device = engine.attach(file);
                let _ = ready_tx.send(Ok(engine.name()));
                Writer {
                    shared: writer_shared,
                    engine,
                    device,
                    path,
                    slot,
                    health,
                    request_blocks,
                    first_sequence,
                    blocks_written: 0,
                    staging: Vec::with_capacity(cfg.log_buffer_bytes),
                    starts: Vec::new(),
                    pool: Vec::new(),
                }
                .run()
            })
            .map_err(|e| OltpError::os("cannot start the log writer thread", e))?;
        let engine_name = match ready_rx.recv() {
            Ok(Ok(name)) => name,
            Ok(Err(e)) => {
                let _ = handle.join();
                return Err(e);
            }
            Err(_) => {
                let _ = handle.join();
                return Err(OltpError::Usage(
                    "the log writer thread ended while starting; this is a bug, please report it"
                        .into(),
                ));
            }
        };
        Ok(Arc::new(RedoLog {
            shared,
            engine_name,
            writer: Mutex::new(Some(handle)),
            summary: Mutex::new(None),
        }))
    }

    /// The log writer's engine as it runs: the run reports it.
    pub fn engine_name(&self) -> &'static str {
        self.engine_name
    }

    /// Copy one record into the log buffer, waiting for room if needed.
    fn append(
        &self,
        header: [u8; RECORD_HEADER_BYTES],
        payload: &[u8],
        op: &mut OpStats,
    ) -> Result<Lsn, OltpError> {
        let len = RECORD_HEADER_BYTES + payload.len();
        let sh = &*self.shared;
        let cap = sh.cfg.log_buffer_bytes;
        let mut st = sh.lock();
        let mut waited_since: Option<Instant> = None;
        loop {
            if let Some(down) = &st.down {
                return Err(down.to_error());
            }
            if st.stopping {
                return Err(Down::Stopped.to_error());
            }
            let used = (st.appended - st.written) as usize;
            if cap - used >= len {
                break;
            }
            waited_since.get_or_insert_with(Instant::now);
            sh.post(&mut st);
            st.space_waiters += 1;
            st = sh.written_cv.wait(st).expect(STATE_POISONED);
            st.space_waiters -= 1;
        }
        if let Some(t) = waited_since {
            op.wait(Event::LogBufferSpace, t.elapsed());
        }
        let at = (st.appended % cap as u64) as usize;
        ring_write(&mut st.ring, at, &header);
        ring_write(&mut st.ring, (at + RECORD_HEADER_BYTES) % cap, payload);
        st.appended += len as u64;
        let lsn = st.appended;
        if (st.appended - st.written) as usize >= cap / 3 {
            sh.post(&mut st);
        }
        drop(st);
        op.add(Stat::RedoSize, len as u64);
        op.add(Stat::RedoEntries, 1);
        Ok(lsn)
    }

    /// Add a change record for `block`, now at `version`, whose change vector is
    /// `change`; counts redo size and entries. Returns the LSN at the record's end.
    pub fn append_change(
        &self,
        block: BlockId,
        version: u64,
        change: &[u8],
        op: &mut OpStats,
    ) -> Result<Lsn, OltpError> {
        if change.len() > MAX_CHANGE_BYTES {
            return Err(OltpError::Usage(format!(
                "a redo change vector of {} bytes exceeds the {MAX_CHANGE_BYTES}-byte maximum; this is a bug in the caller",
                change.len()
            )));
        }
        let header = record_header(RECORD_KIND_CHANGE, change.len(), block, version);
        self.append(header, change, op)
    }

    /// Add a commit record and wait (log file sync) until a log write covers it.
    pub fn commit(&self, op: &mut OpStats) -> Result<Lsn, OltpError> {
        let lsn = self.append(record_header(RECORD_KIND_COMMIT, 0, 0, 0), &[], op)?;
        let sh = &*self.shared;
        let t = Instant::now();
        let mut st = sh.lock();
        sh.post(&mut st);
        let result = loop {
            if st.written >= lsn {
                break Ok(());
            }
            if let Some(down) = &st.down {
                break Err(down.to_error());
            }
            if st.writer_done {
                break Err(Down::Stopped.to_error());
            }
            if sh.release_commits_early.load(Ordering::Relaxed) {
                break Ok(());
            }
            st = sh.written_cv.wait(st).expect(STATE_POISONED);
        };
        let covered = st.written >= lsn;
        drop(st);
        op.wait(Event::LogFileSync, t.elapsed());
        result?;
        op.add(Stat::UserCommits, 1);
        if !covered {
            op.add(Stat::CommitsUncovered, 1);
        }
        Ok(lsn)
    }

    /// Wait until the log is written up to `lsn` (the writer's write-ahead rule).
    pub fn flush_to(&self, lsn: Lsn) -> Result<(), OltpError> {
        let sh = &*self.shared;
        let mut st = sh.lock();
        if lsn > st.appended {
            return Err(OltpError::Usage(format!(
                "flush of the redo log to LSN {lsn}, beyond the {} bytes generated; this is a bug in the caller",
                st.appended
            )));
        }
        loop {
            if st.written >= lsn {
                return Ok(());
            }
            if let Some(down) = &st.down {
                return Err(down.to_error());
            }
            if st.writer_done {
                return Err(Down::Stopped.to_error());
            }
            sh.post(&mut st);
            st = sh.written_cv.wait(st).expect(STATE_POISONED);
        }
    }

    /// The LSN up to which the log is on disk.
    pub fn written(&self) -> Lsn {
        self.shared.lock().written
    }

    /// The LSN up to which redo has been generated (copied into the log buffer).
    pub fn appended(&self) -> Lsn {
        self.shared.lock().appended
    }

    /// Write what is left, stop the log writer and wait for it.
    pub fn stop(&self) -> Result<RedoSummary, OltpError> {
        {
            let mut st = self.shared.lock();
            st.stopping = true;
            st.hold = false;
            st.posted = true;
            self.shared.writer_cv.notify_one();
        }
        let handle = self
            .writer
            .lock()
            .expect("invariant: no thread panics while taking the log writer's handle")
            .take();
        if let Some(handle) = handle {
            if handle.join().is_err() {
                let mut st = self.shared.lock_for_shutdown();
                st.writer_done = true;
                self.shared.written_cv.notify_all();
                return Err(OltpError::Usage(
                    "the log writer thread panicked; this is a bug, please report it".into(),
                ));
            }
        }
        let st = self.shared.lock();
        if let Some(down @ Down::Failed { .. }) = &st.down {
            return Err(down.to_error());
        }
        let summary = RedoSummary {
            bytes_generated: st.appended,
            bytes_written: st.written,
            writes: st.writes,
            wraps: st.wraps,
        };
        *self
            .summary
            .lock()
            .expect("invariant: no thread panics while holding the log's summary") = Some(summary);
        Ok(summary)
    }

    /// Test hook: while `hold` is set the log writer starts no write, so a test
    /// can line up commits or fill the buffer deterministically. `stop` clears it.
    #[doc(hidden)]
    pub fn hold_writer(&self, hold: bool) {
        let mut st = self.shared.lock();
        st.hold = hold;
        if !hold {
            self.shared.writer_cv.notify_one();
        }
    }

    /// Test hook: sessions waiting for room in the log buffer.
    #[doc(hidden)]
    pub fn space_waiters(&self) -> usize {
        self.shared.lock().space_waiters
    }

    /// Test hook: make commits stop waiting without a covering write — the
    /// violation `Stat::CommitsUncovered` exists to catch.
    #[doc(hidden)]
    pub fn release_commits_early(&self, on: bool) {
        self.shared
            .release_commits_early
            .store(on, Ordering::Relaxed);
        if on {
            let _st = self.shared.lock();
            self.shared.written_cv.notify_all();
        }
    }
}

impl Drop for RedoLog {
    fn drop(&mut self) {
        // May run while unwinding: it only stops and joins the writer, so it
        // takes the locks even after a panic rather than panic again.
        let handle = self.writer.lock_or_recover().take();
        if let Some(handle) = handle {
            {
                let mut st = self.shared.lock_for_shutdown();
                st.stopping = true;
                st.hold = false;
                st.posted = true;
                self.shared.writer_cv.notify_one();
            }
            let _ = handle.join();
        }
    }
}

fn record_header(
    kind: u8,
    change_len: usize,
    block: BlockId,
    version: u64,
) -> [u8; RECORD_HEADER_BYTES] {
    let mut h = [0u8; RECORD_HEADER_BYTES];
    h[0] = kind;
    let len = u32::try_from(RECORD_HEADER_BYTES + change_len)
        .expect("invariant: a record is at most MAX_RECORD_BYTES");
    h[4..8].copy_from_slice(&len.to_le_bytes());
    h[8..16].copy_from_slice(&block.to_le_bytes());
    h[16..24].copy_from_slice(&version.to_le_bytes());
    h
}

/// Copy `bytes` into the circular `ring` starting at `at`, wrapping at its end.
fn ring_write(ring: &mut [u8], at: usize, bytes: &[u8]) {
    let first = bytes.len().min(ring.len() - at);
    ring[at..at + first].copy_from_slice(&bytes[..first]);
    let rest = bytes.len() - first;
    ring[..rest].copy_from_slice(&bytes[first..]);
}

/// Append `len` bytes of the circular `ring` from `at` to `out`.
fn ring_read(ring: &[u8], at: usize, len: usize, out: &mut Vec<u8>) {
    let first = len.min(ring.len() - at);
    out.extend_from_slice(&ring[at..at + first]);
    out.extend_from_slice(&ring[..len - first]);
}

/// The CRC-32C of a redo block: the full dataset id, then the block without its CRC field.
fn block_crc(dataset: u64, block: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&dataset.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &block[..12]);
    crc32c::crc32c_append(crc, &block[REDO_BLOCK_HEADER_BYTES..])
}

/// The log writer thread's own state.
struct Writer {
    shared: Arc<Shared>,
    engine: Box<dyn FileEngine>,
    device: DeviceId,
    path: String,
    slot: Arc<StatsSlot>,
    health: Arc<Health>,
    /// Blocks per request: the largest write, aligned down to the block.
    request_blocks: u64,
    first_sequence: u64,
    /// Blocks written so far; the next one has sequence `first_sequence + blocks_written`.
    blocks_written: u64,
    /// The records of the current write, copied out of the log buffer.
    staging: Vec<u8>,
    /// Offsets in `staging` where records start.
    starts: Vec<usize>,
    /// Request buffers, reused from write to write.
    pool: Vec<AlignedBuf>,
}

/// Held by the log writer thread: if it panics (a bug, or the log's state
/// poisoned by another thread's panic), the run fails and whoever waits for a
/// write — a commit, room in the buffer — is woken to find the writer gone,
/// instead of waiting for ever.
struct DownOnPanic {
    shared: Arc<Shared>,
    health: Arc<Health>,
}

impl Drop for DownOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.health
                .fail("the log writer panicked; this is a bug in Cairn, please report it");
            let mut st = self.shared.lock_for_shutdown();
            st.writer_done = true;
            st.down.get_or_insert(Down::Panicked);
            self.shared.written_cv.notify_all();
        }
    }
}

impl Writer {
    fn run(mut self) {
        let mut op = OpStats::new();
        let mut cpu = thread_cpu_ns();
        while let Some((from, to)) = self.next_write() {
            let t = Instant::now();
            let outcome = self.write(from, to);
            let elapsed = t.elapsed();
            let sh = Arc::clone(&self.shared);
            let mut st = sh.lock();
            match outcome {
                Ok(done) => {
                    st.written = to;
                    st.writes += 1;
                    st.wraps = self.blocks_written.saturating_sub(1) / sh.cfg.area_blocks();
                    sh.written_cv.notify_all();
                    drop(st);
                    op.wait(Event::LogFileParallelWrite, elapsed);
                    op.add(Stat::RedoWrites, 1);
                    op.add(Stat::RedoBlocksWritten, done.blocks);
                    op.add(Stat::RedoBytesWritten, to - from);
                    op.add(Stat::RedoWastage, done.padding_bytes);
                    op.add(Stat::RedoWriteIoRequests, done.requests);
                    let now = thread_cpu_ns();
                    op.background_cpu_ns(now.saturating_sub(cpu));
                    cpu = now;
                    self.slot.publish(&mut op);
                }
                Err((offset, error)) => {
                    let context = format!(
                        "log writer: redo write to {} at redo file offset {offset} failed",
                        self.path
                    );
                    self.health.fail(format!(
                        "{context}: {error}; check the device and the kernel log (dmesg)"
                    ));
                    st.down = Some(Down::Failed { context, error });
                    st.writer_done = true;
                    sh.written_cv.notify_all();
                    return;
                }
            }
        }
        let now = thread_cpu_ns();
        op.background_cpu_ns(now.saturating_sub(cpu));
        self.slot.publish(&mut op);
        let mut st = self.shared.lock();
        st.writer_done = true;
        self.shared.written_cv.notify_all();
    }

    /// Sleep until there is something to write, copy it into `staging`, and
    /// return its LSN range; `None` when stopped with nothing left.
    fn next_write(&mut self) -> Option<(Lsn, Lsn)> {
        let sh = Arc::clone(&self.shared);
        let cap = sh.cfg.log_buffer_bytes;
        let mut st = sh.lock();
        loop {
            let pending = st.appended - st.written;
            let wanted = st.posted || st.stopping || pending as usize >= cap / 3;
            if !st.hold && wanted {
                if pending > 0 {
                    break;
                }
                st.posted = false;
                if st.stopping {
                    return None;
                }
            }
            st.writer_idle = true;
            let (guard, timeout) = sh
                .writer_cv
                .wait_timeout(st, WRITER_TIMEOUT)
                .expect(STATE_POISONED);
            st = guard;
            st.writer_idle = false;
            if timeout.timed_out() && !st.hold && st.appended > st.written {
                break;
            }
        }
        st.posted = false;
        let from = st.written;
        // A write never exceeds the redo area less one block, so its requests never overlap.
        let area_payload = (sh.cfg.area_blocks() - 1) * sh.cfg.payload_bytes() as u64;
        let to_max = st.appended.min(from + area_payload);
        // Copy out in chunks, letting sessions append in between: the bytes in
        // [written, appended) stay put until `written` moves, which only this thread does.
        self.staging.clear();
        let mut at = from;
        while at < to_max {
            let n = ((to_max - at) as usize).min(COPY_CHUNK_BYTES);
            ring_read(&st.ring, (at % cap as u64) as usize, n, &mut self.staging);
            at += n as u64;
            if at < to_max {
                drop(st);
                st = sh.lock();
            }
        }
        drop(st);
        // Find the record starts; end the write at the last whole record.
        self.starts.clear();
        let mut i = 0usize;
        while i + RECORD_HEADER_BYTES <= self.staging.len() {
            let len = u32::from_le_bytes(
                self.staging[i + 4..i + 8]
                    .try_into()
                    .expect("invariant: a 4-byte slice"),
            ) as usize;
            assert!(
                (RECORD_HEADER_BYTES..=MAX_RECORD_BYTES).contains(&len),
                "invariant: the log buffer holds whole records"
            );
            if i + len > self.staging.len() {
                break;
            }
            self.starts.push(i);
            i += len;
        }
        assert!(i > 0, "invariant: a write holds at least one whole record");
        self.staging.truncate(i);
        Some((from, from + i as u64))
    }

    /// Format `staging` into redo blocks and write them; `Err` carries the redo
    /// file offset of the failed request.
    fn write(&mut self, from: Lsn, to: Lsn) -> Result<WriteDone, (u64, IoError)> {
        let cfg = self.shared.cfg;
        let bb = cfg.block_bytes as usize;
        let payload = cfg.payload_bytes();
        let bytes = (to - from) as usize;
        debug_assert_eq!(bytes, self.staging.len());
        let blocks = bytes.div_ceil(payload) as u64;
        let area = cfg.area_blocks();
        let mut requests: Vec<(u64, AlignedBuf)> = Vec::new();
        let mut k = 0u64; // block of this write
        let mut next_start = 0usize; // index into `starts`
        while k < blocks {
            let n = self.blocks_written + k;
            let position = n % area;
            let count = (blocks - k).min(self.request_blocks).min(area - position);
            let len = count as usize * bb;
            let mut buf = match self.pool.pop() {
                Some(b) if b.capacity() >= len => b,
                _ => AlignedBuf::zeroed(len.max(self.request_blocks as usize * bb)),
            };
            buf.set_len(len);
            for j in 0..count as usize {
                let b = k as usize + j;
                let lo = b * payload;
                let hi = ((b + 1) * payload).min(bytes);
                while next_start < self.starts.len() && self.starts[next_start] < lo {
                    next_start += 1;
                }
                let first = match self.starts.get(next_start) {
                    Some(&s) if s < hi => (REDO_BLOCK_HEADER_BYTES + s - lo) as u16,
                    _ => NO_RECORD_START,
                };
                let block = &mut buf[j * bb..(j + 1) * bb];
                block[0..2].copy_from_slice(&(cfg.dataset as u16).to_le_bytes());
                block[2..4].copy_from_slice(&first.to_le_bytes());
                block[4..12].copy_from_slice(&(self.first_sequence + n + j as u64).to_le_bytes());
                block[12..16].fill(0);
                let data = &mut block[REDO_BLOCK_HEADER_BYTES..];
                data[..hi - lo].copy_from_slice(&self.staging[lo..hi]);
                data[hi - lo..].fill(0);
                let crc = block_crc(cfg.dataset, block);
                block[12..16].copy_from_slice(&crc.to_le_bytes());
            }
            requests.push((cfg.start + position * bb as u64, buf));
            k += count;
        }
        let request_count = requests.len() as u64;
        let result = self.submit_all(requests);
        self.blocks_written += blocks;
        result.map(|()| WriteDone {
            blocks,
            requests: request_count,
            padding_bytes: blocks * payload as u64 - bytes as u64,
        })
    }

    /// Put every request in flight (as many as the ring takes) and wait for all.
    fn submit_all(&mut self, requests: Vec<(u64, AlignedBuf)>) -> Result<(), (u64, IoError)> {
        let offsets: Vec<u64> = requests.iter().map(|(o, _)| *o).collect();
        let total = requests.len();
        let mut pending = requests.into_iter().enumerate();
        let mut next: Option<Request> = None;
        let mut completed = 0usize;
        let mut first_error: Option<(u64, IoError)> = None;
        let mut submitted_all = false;
        while completed < total {
            while !submitted_all {
                let request = match next.take() {
                    Some(r) => r,
                    None => match pending.next() {
                        Some((tag, (offset_bytes, buf))) => Request {
                            device: self.device,
                            tag: tag as u64,
                            op: Op::Write {
                                offset_bytes,
                                buf,
                                // Durable when it completes, as Oracle's log
                                // writes are (O_DSYNC): a commit is acknowledged
                                // only once it would survive a power loss.
                                fua: true,
                            },
                        },
                        None => {
                            submitted_all = true;
                            break;
                        }
                    },
                };
                match self.engine.submit(request) {
                    Ok(()) => {}
                    Err(SubmitError::QueueFull(r)) => {
                        next = Some(r);
                        break;
                    }
                }
            }
            while let Some(c) = self.engine.pop_completion() {
                completed += 1;
                if let Err(e) = c.result {
                    let offset = offsets.get(c.tag as usize).copied().unwrap_or(0);
                    first_error.get_or_insert((offset, e));
                }
                if let Some(buf) = c.buf {
                    self.pool.push(buf);
                }
            }
            if completed < total {
                if let Err(e) = self.engine.wait(1) {
                    return Err((offsets.first().copied().unwrap_or(0), e));
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

struct WriteDone {
    blocks: u64,
    requests: u64,
    padding_bytes: u64,
}

/// What [`scan_log`] found in a redo area.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogScan {
    /// Redo blocks of this dataset with a good checksum.
    pub blocks: u64,
    /// Continuous runs of such blocks (consecutive positions and sequence numbers).
    pub runs: u64,
    /// Whole records found (change + commit).
    pub records: u64,
    pub commit_records: u64,
    pub change_records: u64,
    /// Per data block, the highest version a change record carries.
    pub max_version: HashMap<BlockId, u64>,
}

/// Read the redo area back and parse every valid redo block of this dataset
/// and the records in them.
///
/// A block counts when its checksum (seeded with the dataset id) is good and
/// its dataset bits match. Records are trusted only when all their bytes come
/// from one continuous run of blocks — each at the next position (wrapping at
/// the area's end) with the next sequence number. So a record is dropped when
/// its beginning or end was overwritten by a later cycle of the log, was never
/// written (a crash), or belongs to another run of the log writer; the newest
/// records, at the head of the log, are always whole. Versions only grow, so
/// the per-block maximum is right even where older cycles survive.
pub fn scan_log(file: &DeviceFile, cfg: &RedoConfig) -> Result<LogScan, OltpError> {
    cfg.validate(file)?;
    let path = file.path().display().to_string();
    let clone = file
        .try_clone()
        .map_err(|e| OltpError::os(format!("cannot reopen the redo file {path}"), e))?;
    let mut engine = cairn_io::sync_engine::SyncEngine::new(1);
    let device = engine.attach(clone);
    let bb = u64::from(cfg.block_bytes);
    let area = cfg.area_blocks();
    let max_transfer = u64::from(
        engine
            .geometry(device)
            .map_or(1 << 20, |g| g.max_transfer_bytes),
    );
    let chunk_blocks = ((1u64 << 20).min(max_transfer) / bb).max(1);
    let mut parser = Parser::new(cfg);
    let mut first_blocks: Vec<Vec<u8>> = Vec::new();
    let mut b = 0u64;
    while b < area {
        let n = chunk_blocks.min(area - b);
        let offset = cfg.start + b * bb;
        let buf = engine
            .read_at(device, offset, (n * bb) as usize)
            .map_err(|e| OltpError::io(format!("reading the redo file {path}"), e))?;
        for j in 0..n as usize {
            let block = &buf[j * bb as usize..(j + 1) * bb as usize];
            // Keep the head of the area, to finish a record that straddles the wrap.
            if b + (j as u64)
                < (MAX_RECORD_BYTES as u64).div_ceil(bb - REDO_BLOCK_HEADER_BYTES as u64) + 1
            {
                first_blocks.push(block.to_vec());
            }
            parser.block(block, false);
        }
        b += n;
    }
    // Carry a record pending at the area's end on into its first blocks, if the
    // run continues there; stop as soon as it completes (the rest was parsed).
    if parser.head_seq.is_some()
        && parser.head_seq == parser.prev_seq.and_then(|s| s.checked_add(1))
    {
        // The run at the area's end goes on at its start: one run, not two.
        parser.scan.runs = parser.scan.runs.saturating_sub(1).max(1);
    }
    for block in &first_blocks {
        if !parser.block(block, true) {
            break;
        }
    }
    Ok(parser.scan)
}

/// A streaming parser of redo blocks in position order.
struct Parser {
    dataset: u64,
    bb: usize,
    /// The previous block's sequence number, if it was valid.
    prev_seq: Option<u64>,
    /// The sequence number of the area's first block, if it was valid.
    head_seq: Option<u64>,
    /// Blocks looked at (valid or not) in the first pass.
    seen: u64,
    /// In step with the record stream (at a record start or inside one).
    synced: bool,
    /// Bytes of the record being assembled.
    partial: Vec<u8>,
    scan: LogScan,
}

impl Parser {
    fn new(cfg: &RedoConfig) -> Self {
        Self {
            dataset: cfg.dataset,
            bb: cfg.block_bytes as usize,
            prev_seq: None,
            head_seq: None,
            seen: 0,
            synced: false,
            partial: Vec::new(),
            scan: LogScan::default(),
        }
    }

    fn desync(&mut self) {
        self.synced = false;
        self.partial.clear();
    }

    /// Parse one block. In `finishing` mode (past the wrap), only the pending
    /// record is completed; returns whether to go on feeding blocks.
    fn block(&mut self, block: &[u8], finishing: bool) -> bool {
        let crc = u32::from_le_bytes([block[12], block[13], block[14], block[15]]);
        let dataset = u16::from_le_bytes([block[0], block[1]]);
        let valid = dataset == self.dataset as u16 && crc == block_crc(self.dataset, block);
        let head = !finishing && self.seen == 0;
        if !finishing {
            self.seen += 1;
        }
        if !valid {
            self.prev_seq = None;
            self.desync();
            return false;
        }
        let seq = u64::from_le_bytes(block[4..12].try_into().expect("invariant: 8 bytes"));
        let continues = self.prev_seq.is_some_and(|p| p.checked_add(1) == Some(seq));
        self.prev_seq = Some(seq);
        if head {
            self.head_seq = Some(seq);
        }
        if finishing {
            if !continues || !self.synced || self.partial.is_empty() {
                return false;
            }
        } else {
            self.scan.blocks += 1;
            if !continues {
                self.scan.runs += 1;
                self.desync();
            }
        }
        let first = u16::from_le_bytes([block[2], block[3]]);
        let mut at = REDO_BLOCK_HEADER_BYTES;
        if !self.synced {
            if first == NO_RECORD_START
                || usize::from(first) < REDO_BLOCK_HEADER_BYTES
                || usize::from(first) >= self.bb
            {
                return true;
            }
            at = usize::from(first);
            self.synced = true;
        }
        let mut seen_start = false;
        while at < self.bb {
            if self.partial.is_empty() {
                if block[at] == 0 {
                    // Padding: the rest of the block; the next write starts a record.
                    if !seen_start && first != NO_RECORD_START {
                        self.desync();
                    }
                    return true;
                }
                if !seen_start {
                    if usize::from(first) != at {
                        self.desync();
                        return true;
                    }
                    seen_start = true;
                }
                if finishing {
                    return false;
                }
            }
            // Take bytes up to the header, then up to the record's length.
            let want = if self.partial.len() < RECORD_HEADER_BYTES {
                RECORD_HEADER_BYTES
            } else {
                u32::from_le_bytes(self.partial[4..8].try_into().expect("invariant: 4 bytes"))
                    as usize
            };
            let take = (want - self.partial.len()).min(self.bb - at);
            self.partial.extend_from_slice(&block[at..at + take]);
            at += take;
            if self.partial.len() == RECORD_HEADER_BYTES && want == RECORD_HEADER_BYTES {
                let len =
                    u32::from_le_bytes(self.partial[4..8].try_into().expect("invariant: 4 bytes"))
                        as usize;
                let kind = self.partial[0];
                let ok = match kind {
                    RECORD_KIND_CHANGE => (RECORD_HEADER_BYTES..=MAX_RECORD_BYTES).contains(&len),
                    RECORD_KIND_COMMIT => len == COMMIT_RECORD_BYTES,
                    _ => false,
                };
                if !ok {
                    self.desync();
                    return true;
                }
            }
            let len = if self.partial.len() >= RECORD_HEADER_BYTES {
                u32::from_le_bytes(self.partial[4..8].try_into().expect("invariant: 4 bytes"))
                    as usize
            } else {
                usize::MAX
            };
            if self.partial.len() == len {
                self.record();
                if finishing {
                    return false;
                }
            }
        }
        if !seen_start && first != NO_RECORD_START && !finishing {
            // The header says a record starts here, but none did.
            self.desync();
        }
        true
    }

    /// Count the whole record in `partial` and start the next.
    fn record(&mut self) {
        let r = &self.partial;
        self.scan.records += 1;
        if r[0] == RECORD_KIND_COMMIT {
            self.scan.commit_records += 1;
        } else {
            self.scan.change_records += 1;
            let block = u64::from_le_bytes(r[8..16].try_into().expect("invariant: 8 bytes"));
            let version = u64::from_le_bytes(r[16..24].try_into().expect("invariant: 8 bytes"));
            let v = self.scan.max_version.entry(block).or_insert(version);
            *v = (*v).max(version);
        }
        self.partial.clear();
    }
}
