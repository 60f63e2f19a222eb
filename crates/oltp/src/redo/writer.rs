//! The log writer thread (LGWR): it wakes when posted, copies what was
//! appended out of the log buffer, formats it into redo blocks and writes
//! them as one write, durable, then moves `written` and wakes the waiters.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cairn_io::{
    new_file_engine, AlignedBuf, DeviceFile, DeviceId, EngineKind, FileEngine, IoError, Op,
    Request, SubmitError,
};

use crate::stats::{thread_cpu_ns, Event, OpStats, Stat, StatsSlot};
use crate::{Health, OltpError};

use super::format::{
    block_crc, Lsn, MAX_RECORD_BYTES, NO_RECORD_START, RECORD_HEADER_BYTES, REDO_BLOCK_HEADER_BYTES,
};
use super::state::{ring_read, Down, Shared, STATE_POISONED};

/// How long the log writer sleeps when nobody posts it (Oracle: 3 s; SLOB runs are short).
const WRITER_TIMEOUT: Duration = Duration::from_secs(1);
/// The most bytes the log writer copies out of the log buffer per hold of the latch.
const COPY_CHUNK_BYTES: usize = 64 << 10;

/// What the log writer thread starts with.
pub(super) struct WriterStart {
    pub(super) shared: Arc<Shared>,
    pub(super) file: DeviceFile,
    pub(super) engine_kind: EngineKind,
    /// Requests in flight at most: the engine's depth.
    pub(super) depth: usize,
    pub(super) path: String,
    pub(super) slot: Arc<StatsSlot>,
    pub(super) health: Arc<Health>,
    /// Blocks per request: the largest write, aligned down to the block.
    pub(super) request_blocks: u64,
    pub(super) first_sequence: u64,
}

/// Start the log writer thread: its handle, and the name of its engine once
/// the thread has made it.
pub(super) fn spawn(start: WriterStart) -> Result<(JoinHandle<()>, &'static str), OltpError> {
    let log_buffer_bytes = start.shared.cfg.log_buffer_bytes;
    // The engine is made on the writer thread, which owns it (an io_uring is
    // not shared between threads); its setup error comes back through `ready`.
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<&'static str, OltpError>>(1);
    let handle = std::thread::Builder::new()
        .name("cairn-lgwr".into())
        .spawn(move || {
            let _on_panic = DownOnPanic {
                shared: Arc::clone(&start.shared),
                health: Arc::clone(&start.health),
            };
            let mut engine = match new_file_engine(start.engine_kind, start.depth) {
                Ok(engine) => engine,
                Err(e) => {
                    let _ = ready_tx.send(Err(OltpError::os(
                        format!("log writer: cannot set up an I/O engine for {}", start.path),
                        e,
                    )));
                    return;
                }
            };
            let device = engine.attach(start.file);
            let _ = ready_tx.send(Ok(engine.name()));
            Writer {
                shared: start.shared,
                engine,
                device,
                path: start.path,
                slot: start.slot,
                health: start.health,
                request_blocks: start.request_blocks,
                first_sequence: start.first_sequence,
                blocks_written: 0,
                staging: Vec::with_capacity(log_buffer_bytes),
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
    Ok((handle, engine_name))
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
