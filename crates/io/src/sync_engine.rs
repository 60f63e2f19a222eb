//! The reference backend: synchronous pread/pwrite.
//!
//! Each request runs to the end inside `submit` and its completion waits in a
//! queue, so the semantics are the simplest possible — the yardstick the
//! io_uring backend is held to, and the fallback where io_uring is refused.
//!
//! Timeouts ([`IoEngine::set_io_timeout`]): a blocking pread cannot be timed
//! out in the thread that makes it, so with a timeout set each request runs
//! on a worker thread of the engine's while `submit` waits for it, at most
//! the timeout. A request that does not come back in time completes with
//! [`IoError::TimedOut`], and its worker is abandoned with the request's
//! buffer (and a reference to its device): the worker frees both and ends
//! when the system call returns. The next request gets a new worker. While
//! a worker is stuck in a device, a request *to that device* times out at
//! once without reaching it (the device is not answering, and the request
//! before it has waited the timeout): so a hung device costs one thread per
//! engine, and it costs the other devices nothing — their requests run on
//! new workers as ever. (A bound on the engine's stuck workers as a whole
//! would, once reached, time out a healthy device's requests too, and a
//! disk that hangs must never make another look failed.) The price of a
//! timeout is a hand-over between threads per request; without one,
//! requests run in the caller's thread as before.

use std::collections::VecDeque;
use std::io;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use crate::buf::AlignedBuf;
use crate::device::DeviceFile;
use crate::engine::{
    pieces, validate, Completion, DeviceId, EngineStats, FileEngine, IoEngine, IoError, Op, OpKind,
    Request, SubmitError, RETRY_MAX,
};
use crate::geometry::Geometry;

/// What a worker is handed, and hands back.
type Job = (Arc<DeviceFile>, Op);
type Done = (Op, Result<u64, IoError>, EngineStats);

/// The thread a timed request runs on.
struct Worker {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<Done>,
}

/// pread/pwrite engine over attached devices.
pub struct SyncEngine {
    /// By id; `None` once detached (ids are not reused). Shared with a
    /// worker running a request on it: between requests, a second holder
    /// is a worker abandoned in the device, still waiting on it.
    devices: Vec<Option<Arc<DeviceFile>>>,
    ready: VecDeque<Completion>,
    depth_max: usize,
    stats: EngineStats,
    io_timeout: Option<Duration>,
    worker: Option<Worker>,
}

impl SyncEngine {
    pub fn new(depth_max: usize) -> Self {
        assert!(depth_max > 0, "invariant: depth of at least one");
        Self {
            devices: Vec::new(),
            ready: VecDeque::with_capacity(depth_max),
            depth_max,
            stats: EngineStats::default(),
            io_timeout: None,
            worker: None,
        }
    }

    /// Run `op` on `device`, in this thread or, with a timeout, on the
    /// worker; the op (and so its buffer) comes back with the result unless
    /// it timed out.
    fn run(&mut self, device: DeviceId, mut op: Op) -> (Option<Op>, Result<u64, IoError>) {
        let Some(dev) = self.devices.get(device.0 as usize).and_then(Option::clone) else {
            return (Some(op), Err(IoError::UnknownDevice(device)));
        };
        let Some(timeout) = self.io_timeout else {
            let result = run_op(&dev, &mut op, &mut self.stats);
            return (Some(op), result);
        };
        let timed_out = |op: &Op| {
            let (offset_bytes, len_bytes) = op.range();
            IoError::TimedOut {
                kind: op.kind(),
                offset_bytes,
                len_bytes,
                timeout_ms: timeout.as_millis() as u64,
            }
        };
        // This engine's slot and `dev` hold it; a worker that finished a
        // request let go of it before handing the request back.
        if Arc::strong_count(&dev) > 2 {
            let error = timed_out(&op);
            return (Some(op), Err(error));
        }
        if self.worker.is_none() {
            match spawn_worker() {
                Ok(w) => self.worker = Some(w),
                Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(libc::EAGAIN);
                    return (Some(op), Err(IoError::Engine { errno }));
                }
            }
        }
        let worker = self
            .worker
            .as_ref()
            .expect("invariant: a worker was just made");
        let error = timed_out(&op);
        if let Err(mpsc::SendError((_, op))) = worker.jobs.send((dev, op)) {
            self.worker = None;
            return (Some(op), Err(IoError::Engine { errno: libc::EPIPE }));
        }
        match worker.done.recv_timeout(timeout) {
            Ok((op, result, stats)) => {
                self.stats.device_requests += stats.device_requests;
                self.stats.bytes_read += stats.bytes_read;
                self.stats.bytes_written += stats.bytes_written;
                (Some(op), result)
            }
            Err(_) => {
                // Abandoned with the request: see the module's notes.
                self.worker = None;
                (None, Err(error))
            }
        }
    }
}

/// A worker for timed requests: runs each job it is sent and sends it back,
/// until its engine lets go of it.
fn spawn_worker() -> io::Result<Worker> {
    let (jobs, inbox) = mpsc::channel::<Job>();
    let (outbox, done) = mpsc::channel::<Done>();
    std::thread::Builder::new()
        .name("cairn-sync-io".into())
        .spawn(move || {
            while let Ok((dev, mut op)) = inbox.recv() {
                let mut stats = EngineStats::default();
                let result = run_op(&dev, &mut op, &mut stats);
                drop(dev);
                if outbox.send((op, result, stats)).is_err() {
                    break;
                }
            }
        })?;
    Ok(Worker { jobs, done })
}

/// Carry out `op` on `dev` with pread/pwrite and friends, counting it in `stats`.
fn run_op(dev: &DeviceFile, op: &mut Op, stats: &mut EngineStats) -> Result<u64, IoError> {
    validate(dev.geometry(), op)?;
    let kind = op.kind();
    let (offset_bytes, len_bytes) = op.range();
    let os = |err: io::Error, at: u64, len: u64| IoError::Os {
        kind,
        offset_bytes: at,
        len_bytes: len,
        errno: err.raw_os_error().unwrap_or(libc::EIO),
    };
    let fd = dev.raw_fd();
    let sector = u64::from(dev.geometry().logical_sector_bytes);
    match op {
        Op::Read { buf, .. } => {
            for (start, len) in pieces(len_bytes, dev.geometry().max_transfer_aligned_bytes()) {
                stats.device_requests += 1;
                transfer(
                    kind,
                    offset_bytes + start,
                    sector,
                    &mut buf[start as usize..(start + len) as usize],
                    |chunk, at| {
                        // SAFETY: chunk is a valid, writable slice of the owned buffer.
                        unsafe {
                            libc::pread(
                                fd,
                                chunk.as_mut_ptr().cast(),
                                chunk.len(),
                                at as libc::off_t,
                            )
                        }
                    },
                )?;
            }
            stats.bytes_read += len_bytes;
        }
        Op::Write { buf, fua, .. } => {
            let flags = if *fua { libc::RWF_DSYNC } else { 0 };
            for (start, len) in pieces(len_bytes, dev.geometry().max_transfer_aligned_bytes()) {
                stats.device_requests += 1;
                transfer(
                    kind,
                    offset_bytes + start,
                    sector,
                    &mut buf[start as usize..(start + len) as usize],
                    |chunk, at| {
                        let iov = libc::iovec {
                            iov_base: chunk.as_mut_ptr().cast(),
                            iov_len: chunk.len(),
                        };
                        // SAFETY: iov points into the owned buffer for its length;
                        // pwritev2 only reads it.
                        unsafe { libc::pwritev2(fd, &iov, 1, at as libc::off_t, flags) }
                    },
                )?;
            }
            stats.bytes_written += len_bytes;
        }
        Op::Flush => {
            stats.device_requests += 1;
            // SAFETY: fdatasync on an open fd has no memory-safety preconditions.
            if unsafe { libc::fdatasync(fd) } != 0 {
                return Err(os(io::Error::last_os_error(), 0, 0));
            }
        }
        Op::Discard { .. } => {
            stats.device_requests += 1;
            dev.discard_now(offset_bytes, len_bytes)
                .map_err(|e| os(e, offset_bytes, len_bytes))?;
        }
        Op::WriteZeroes { .. } => {
            stats.device_requests += 1;
            dev.write_zeroes_now(offset_bytes, len_bytes)
                .map_err(|e| os(e, offset_bytes, len_bytes))?;
        }
    }
    Ok(len_bytes)
}

/// Move all of `chunk` with `call` (pread or pwrite), as the io_uring engine
/// does: resume after a short transfer only while it stays sector-aligned (as
/// O_DIRECT requires), and retry EINTR and EAGAIN at most [`RETRY_MAX`] times.
fn transfer(
    kind: OpKind,
    offset_bytes: u64,
    sector_bytes: u64,
    chunk: &mut [u8],
    mut call: impl FnMut(&mut [u8], u64) -> isize,
) -> Result<(), IoError> {
    let mut done = 0usize;
    let mut retries = 0u8;
    while done < chunk.len() {
        let n = call(&mut chunk[done..], offset_bytes + done as u64);
        if n < 0 {
            let err = io::Error::last_os_error();
            if matches!(err.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN))
                && retries < RETRY_MAX
            {
                retries += 1;
                continue;
            }
            return Err(IoError::Os {
                kind,
                offset_bytes: offset_bytes + done as u64,
                len_bytes: (chunk.len() - done) as u64,
                errno: err.raw_os_error().unwrap_or(libc::EIO),
            });
        }
        if n == 0 || !(n as u64).is_multiple_of(sector_bytes) {
            return Err(IoError::ShortTransfer {
                kind,
                offset_bytes,
                len_bytes: chunk.len() as u64,
                done_bytes: done as u64 + n.max(0) as u64,
            });
        }
        done += n as usize;
    }
    Ok(())
}

impl IoEngine for SyncEngine {
    fn name(&self) -> &'static str {
        "sync"
    }

    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        FileEngine::device(self, device).map(DeviceFile::geometry)
    }

    fn attach_file(&mut self, device: DeviceFile) -> Option<DeviceId> {
        Some(FileEngine::attach(self, device))
    }

    fn detach_file(&mut self, device: DeviceId) -> Option<DeviceFile> {
        if !self.ready.is_empty() {
            return None;
        }
        let slot = self.devices.get_mut(device.0 as usize)?;
        // A worker abandoned in a hung request may still hold it: busy.
        let file = Arc::try_unwrap(slot.take()?);
        match file {
            Ok(file) => Some(file),
            Err(shared) => {
                *slot = Some(shared);
                None
            }
        }
    }

    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        if self.ready.len() >= self.depth_max {
            return Err(SubmitError::QueueFull(request));
        }
        self.stats.requests += 1;
        let kind = request.op.kind();
        let (op, result) = self.run(request.device, request.op);
        let buf: Option<AlignedBuf> = match op {
            Some(Op::Read { buf, .. } | Op::Write { buf, .. }) => Some(buf),
            _ => None,
        };
        self.ready.push_back(Completion {
            device: request.device,
            tag: request.tag,
            kind,
            result,
            buf,
        });
        Ok(())
    }

    fn wait(&mut self, _min_completions: usize) -> Result<(), IoError> {
        // Every submitted request has already completed.
        Ok(())
    }

    fn pop_completion(&mut self) -> Option<Completion> {
        self.ready.pop_front()
    }

    fn set_io_timeout(&mut self, timeout: Option<Duration>) {
        self.io_timeout = timeout;
    }

    fn in_flight(&self) -> usize {
        self.ready.len()
    }

    fn depth_max(&self) -> usize {
        self.depth_max
    }

    fn stats(&self) -> EngineStats {
        self.stats
    }
}

impl FileEngine for SyncEngine {
    fn attach(&mut self, device: DeviceFile) -> DeviceId {
        self.devices.push(Some(Arc::new(device)));
        DeviceId(u32::try_from(self.devices.len() - 1).expect("invariant: fewer than 2^32 devices"))
    }

    fn device(&self, device: DeviceId) -> Option<&DeviceFile> {
        self.devices.get(device.0 as usize)?.as_deref()
    }
}
