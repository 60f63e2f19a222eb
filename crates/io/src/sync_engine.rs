//! The reference backend: synchronous pread/pwrite.
//!
//! Each request runs to the end inside `submit` and its completion waits in a
//! queue, so the semantics are the simplest possible — the yardstick the
//! io_uring backend is held to, and the fallback where io_uring is refused.

use std::collections::VecDeque;
use std::io;

use crate::buf::AlignedBuf;
use crate::device::DeviceFile;
use crate::engine::{
    pieces, validate, Completion, DeviceId, EngineStats, FileEngine, IoEngine, IoError, Op, OpKind,
    Request, SubmitError,
};
use crate::geometry::Geometry;
use crate::uring_engine::RETRY_MAX;

/// pread/pwrite engine over attached devices.
pub struct SyncEngine {
    /// By id; `None` once detached (ids are not reused).
    devices: Vec<Option<DeviceFile>>,
    ready: VecDeque<Completion>,
    depth_max: usize,
    stats: EngineStats,
}

impl SyncEngine {
    pub fn new(depth_max: usize) -> Self {
        assert!(depth_max > 0, "invariant: depth of at least one");
        Self {
            devices: Vec::new(),
            ready: VecDeque::with_capacity(depth_max),
            depth_max,
            stats: EngineStats::default(),
        }
    }

    fn run(&mut self, device: DeviceId, op: &mut Op) -> Result<u64, IoError> {
        let dev = self
            .devices
            .get(device.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(IoError::UnknownDevice(device))?;
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
                    self.stats.device_requests += 1;
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
                self.stats.bytes_read += len_bytes;
            }
            Op::Write { buf, fua, .. } => {
                let flags = if *fua { libc::RWF_DSYNC } else { 0 };
                for (start, len) in pieces(len_bytes, dev.geometry().max_transfer_aligned_bytes()) {
                    self.stats.device_requests += 1;
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
                self.stats.bytes_written += len_bytes;
            }
            Op::Flush => {
                self.stats.device_requests += 1;
                // SAFETY: fdatasync on an open fd has no memory-safety preconditions.
                if unsafe { libc::fdatasync(fd) } != 0 {
                    return Err(os(io::Error::last_os_error(), 0, 0));
                }
            }
            Op::Discard { .. } => {
                self.stats.device_requests += 1;
                dev.discard_now(offset_bytes, len_bytes)
                    .map_err(|e| os(e, offset_bytes, len_bytes))?;
            }
            Op::WriteZeroes { .. } => {
                self.stats.device_requests += 1;
                dev.write_zeroes_now(offset_bytes, len_bytes)
                    .map_err(|e| os(e, offset_bytes, len_bytes))?;
            }
        }
        Ok(len_bytes)
    }
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
        self.devices.get_mut(device.0 as usize)?.take()
    }

    fn submit(&mut self, mut request: Request) -> Result<(), SubmitError> {
        if self.ready.len() >= self.depth_max {
            return Err(SubmitError::QueueFull(request));
        }
        self.stats.requests += 1;
        let result = self.run(request.device, &mut request.op);
        let kind = request.op.kind();
        let buf: Option<AlignedBuf> = match request.op {
            Op::Read { buf, .. } | Op::Write { buf, .. } => Some(buf),
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
        self.devices.push(Some(device));
        DeviceId(u32::try_from(self.devices.len() - 1).expect("invariant: fewer than 2^32 devices"))
    }

    fn device(&self, device: DeviceId) -> Option<&DeviceFile> {
        self.devices.get(device.0 as usize)?.as_ref()
    }
}
