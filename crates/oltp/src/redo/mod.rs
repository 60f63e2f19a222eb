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

mod format;
mod scan;
mod state;
mod writer;

pub use format::{
    change_record_bytes, Lsn, RedoConfig, COMMIT_RECORD_BYTES, LOG_BUFFER_MIN_BYTES,
    MAX_CHANGE_BYTES, MAX_RECORD_BYTES, NO_RECORD_START, RECORD_HEADER_BYTES, RECORD_KIND_CHANGE,
    RECORD_KIND_COMMIT, REDO_AREA_MIN_BLOCKS, REDO_BLOCK_HEADER_BYTES, REDO_BLOCK_MAX_BYTES,
};
pub use scan::{scan_log, LogScan};

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cairn_io::poison::Recover;
use cairn_io::{DeviceFile, EngineKind};
use serde::{Deserialize, Serialize};

use crate::layout::BlockId;
use crate::stats::{Event, OpStats, Stat, StatsSlot};
use crate::{Health, OltpError};

use format::record_header;
use state::{ring_write, Down, Shared, STATE_POISONED};
use writer::WriterStart;

/// The most log-writer requests in flight at once (the ring's depth).
const WRITER_DEPTH_MAX: usize = 256;

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
        let shared = Arc::new(Shared::new(cfg));
        let first_sequence = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 2))
            .unwrap_or(1)
            .min(u64::MAX / 2);
        let (handle, engine_name) = writer::spawn(WriterStart {
            shared: Arc::clone(&shared),
            file,
            engine_kind,
            depth,
            path,
            slot,
            health,
            request_blocks,
            first_sequence,
        })?;
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
