//! The completion-based I/O seam.
//!
//! Shaped like io_uring: a caller submits [`Request`]s, each owning its
//! [`AlignedBuf`] and carrying a caller-chosen tag, then drains [`Completion`]s,
//! which hand the buffer back. Every backend — io_uring, pread/pwrite, and the
//! simulated disk in `cairn-io-sim` — implements [`IoEngine`] and passes the same
//! conformance suite.
//!
//! Rules every backend enforces (so a caller bug cannot reach the device):
//! - offsets and lengths are multiples of the logical sector size, and inside the device;
//! - a read or write longer than the device's maximum transfer is split into
//!   pieces of at most that size, each a separate device request, and completes
//!   once, when every piece has (the first error wins);
//! - at most `depth_max` requests are in flight; one more is handed back as
//!   [`SubmitError::QueueFull`], never queued without bound.
//!
//! Errors in completions are operational (the device said no); a request the
//! engine could not even attempt also completes with an error, so the caller has
//! one place to look.
//!
//! A device may hang as well as fail (a SAN path that stops answering). With
//! an I/O timeout set ([`IoEngine::set_io_timeout`]), a request not complete
//! that long after its submission completes with [`IoError::TimedOut`], as if
//! the device had failed it. Whatever the kernel still holds of it (the
//! buffer it may write into) stays with the engine until the kernel lets go:
//! see each backend for how.

use std::fmt;

use serde::Serialize;

use crate::buf::AlignedBuf;
use crate::device::DeviceFile;
use crate::geometry::Geometry;

/// A device attached to an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DeviceId(pub u32);

/// One operation on one device.
#[derive(Debug)]
pub enum Op {
    /// Read `buf.len()` bytes at `offset_bytes` into `buf`.
    Read { offset_bytes: u64, buf: AlignedBuf },
    /// Write `buf` at `offset_bytes`; with `fua`, durable when it completes.
    Write {
        offset_bytes: u64,
        buf: AlignedBuf,
        fua: bool,
    },
    /// Make every completed write durable.
    Flush,
    /// Tell the device a range is unused (BLKDISCARD, or a punched hole in a file).
    Discard { offset_bytes: u64, len_bytes: u64 },
    /// Make a range read as zeros (BLKZEROOUT, or fallocate zero-range on a file).
    WriteZeroes { offset_bytes: u64, len_bytes: u64 },
}

/// The kind of an [`Op`], without its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Read,
    Write,
    Flush,
    Discard,
    WriteZeroes,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Flush => "flush",
            OpKind::Discard => "discard",
            OpKind::WriteZeroes => "write-zeroes",
        })
    }
}

impl Op {
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Read { .. } => OpKind::Read,
            Op::Write { .. } => OpKind::Write,
            Op::Flush => OpKind::Flush,
            Op::Discard { .. } => OpKind::Discard,
            Op::WriteZeroes { .. } => OpKind::WriteZeroes,
        }
    }

    /// The byte range the operation covers (`(0, 0)` for a flush).
    pub fn range(&self) -> (u64, u64) {
        match self {
            Op::Read { offset_bytes, buf }
            | Op::Write {
                offset_bytes, buf, ..
            } => (*offset_bytes, buf.len() as u64),
            Op::Flush => (0, 0),
            Op::Discard {
                offset_bytes,
                len_bytes,
            }
            | Op::WriteZeroes {
                offset_bytes,
                len_bytes,
            } => (*offset_bytes, *len_bytes),
        }
    }

    fn into_buf(self) -> Option<AlignedBuf> {
        match self {
            Op::Read { buf, .. } | Op::Write { buf, .. } => Some(buf),
            _ => None,
        }
    }
}

/// An operation addressed to a device, with the caller's tag.
#[derive(Debug)]
pub struct Request {
    pub device: DeviceId,
    pub tag: u64,
    pub op: Op,
}

/// The outcome of one request.
#[derive(Debug)]
pub struct Completion {
    pub device: DeviceId,
    pub tag: u64,
    pub kind: OpKind,
    /// Bytes transferred (the range length for discard and write-zeroes, 0 for flush).
    pub result: Result<u64, IoError>,
    /// The request's buffer, handed back (reads and writes).
    pub buf: Option<AlignedBuf>,
}

impl Completion {
    /// A completion for a request that failed before reaching the device.
    pub fn failed(request: Request, error: IoError) -> Self {
        let kind = request.op.kind();
        Self {
            device: request.device,
            tag: request.tag,
            kind,
            result: Err(error),
            buf: request.op.into_buf(),
        }
    }
}

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IoError {
    #[error("{kind} of {len_bytes} bytes at offset {offset_bytes} failed: {}", std::io::Error::from_raw_os_error(*errno))]
    Os {
        kind: OpKind,
        offset_bytes: u64,
        len_bytes: u64,
        errno: i32,
    },
    #[error("{kind} of {len_bytes} bytes at offset {offset_bytes} transferred only {done_bytes}")]
    ShortTransfer {
        kind: OpKind,
        offset_bytes: u64,
        len_bytes: u64,
        done_bytes: u64,
    },
    #[error("{kind} of {len_bytes} bytes at offset {offset_bytes} is not aligned to the {sector_bytes}-byte logical sector")]
    Misaligned {
        kind: OpKind,
        offset_bytes: u64,
        len_bytes: u64,
        sector_bytes: u32,
    },
    #[error("{kind} of {len_bytes} bytes at offset {offset_bytes} ends beyond the device's {size_bytes} bytes")]
    OutOfRange {
        kind: OpKind,
        offset_bytes: u64,
        len_bytes: u64,
        size_bytes: u64,
    },
    #[error("{kind} is not supported by this device")]
    Unsupported { kind: OpKind },
    #[error("no device {0:?} is attached to this engine")]
    UnknownDevice(DeviceId),
    #[error("the I/O engine failed: {}", std::io::Error::from_raw_os_error(*errno))]
    Engine { errno: i32 },
    /// The device did not answer within the engine's I/O timeout.
    #[error("{kind} of {len_bytes} bytes at offset {offset_bytes} did not complete within {timeout_ms} ms (the device does not answer)")]
    TimedOut {
        kind: OpKind,
        offset_bytes: u64,
        len_bytes: u64,
        timeout_ms: u64,
    },
}

impl IoError {
    /// The OS error number, where the failure came from the OS (or a simulated one).
    pub fn errno(&self) -> Option<i32> {
        match self {
            IoError::Os { errno, .. } | IoError::Engine { errno } => Some(*errno),
            IoError::TimedOut { .. } => Some(libc::ETIMEDOUT),
            _ => None,
        }
    }
}

/// A request the engine could not take; it is handed back untouched.
#[derive(Debug)]
pub enum SubmitError {
    /// `depth_max` requests are already in flight: reap some, then resubmit.
    QueueFull(Request),
}

/// Counters every backend keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EngineStats {
    /// Requests accepted by `submit`.
    pub requests: u64,
    /// Device requests issued: a split read or write counts each piece.
    pub device_requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// A completion-based I/O engine over one or more devices. `Send`, so an
/// engine can be made on one thread and handed to the thread that uses it
/// (each data-plane thread has its own; see `docs/live-core.md`).
pub trait IoEngine: Send {
    /// Backend name, as shown in reports (`io_uring`, `sync`, `sim`).
    fn name(&self) -> &'static str;

    /// Geometry of an attached device.
    fn geometry(&self, device: DeviceId) -> Option<&Geometry>;

    /// Start a request. Invalid requests are accepted and complete with an error;
    /// only a full queue refuses, handing the request back.
    fn submit(&mut self, request: Request) -> Result<(), SubmitError>;

    /// Block until at least `min_completions` completions are ready to pop (fewer
    /// if fewer requests are outstanding).
    fn wait(&mut self, min_completions: usize) -> Result<(), IoError>;

    /// Like [`IoEngine::wait`], but give up after `timeout` (returning `Ok`
    /// with fewer completions ready): for callers with a schedule to keep, such
    /// as an open-loop workload. Engines whose requests complete during
    /// `submit` (sync, the simulator) never block here, so the default is `wait`.
    fn wait_timeout(
        &mut self,
        min_completions: usize,
        timeout: std::time::Duration,
    ) -> Result<(), IoError> {
        let _ = timeout;
        self.wait(min_completions)
    }

    /// The next ready completion, if any.
    fn pop_completion(&mut self) -> Option<Completion>;

    /// Complete every request not done `timeout` after its submission with
    /// [`IoError::TimedOut`] (`None`: wait for the device however long it
    /// takes). Applies to requests submitted from now on. A timed-out
    /// request's completion hands no buffer back: the device may still
    /// hold it, and the engine keeps it until the device lets go (each
    /// backend says how). No default: a wrapper passes it on, and an engine
    /// whose requests cannot hang (in memory) says so where it ignores it —
    /// a wrapper that forgot would leave a group with no timeout at all.
    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>);

    /// Hand an opened device to an engine that works on files (a disk that
    /// joins a live group); an engine that does not (a simulator) drops it
    /// and says `None`.
    fn attach_file(&mut self, device: DeviceFile) -> Option<DeviceId> {
        drop(device);
        None
    }

    /// Give up a device (a disk that left a live group): the engine closes
    /// its handle, and a request to it fails as to an unknown device. Only
    /// with nothing in flight; `None` when the engine is busy, does not work
    /// on files, or has no such device. Its id is not reused.
    fn detach_file(&mut self, device: DeviceId) -> Option<DeviceFile> {
        let _ = device;
        None
    }

    /// Requests submitted whose completions have not been popped yet.
    fn in_flight(&self) -> usize;

    /// The most requests that may be in flight at once.
    fn depth_max(&self) -> usize;

    fn stats(&self) -> EngineStats;

    /// Run one request to completion. The engine must be idle: this is for callers
    /// that do one thing at a time (labelling, repair), not for the data path.
    /// An `Err` means the engine itself failed; drop it rather than reuse it.
    fn execute(&mut self, request: Request) -> Result<Completion, IoError> {
        assert_eq!(
            self.in_flight(),
            0,
            "invariant: execute() on an idle engine"
        );
        if let Err(SubmitError::QueueFull(_)) = self.submit(request) {
            unreachable!("invariant: an idle engine accepts a request");
        }
        loop {
            if let Some(completion) = self.pop_completion() {
                return Ok(completion);
            }
            self.wait(1)?;
        }
    }

    /// Read `len` bytes at `offset_bytes` as one request on an idle engine.
    fn read_at(
        &mut self,
        device: DeviceId,
        offset_bytes: u64,
        len: usize,
    ) -> Result<AlignedBuf, IoError> {
        let completion = self.execute(Request {
            device,
            tag: offset_bytes,
            op: Op::Read {
                offset_bytes,
                buf: AlignedBuf::zeroed(len),
            },
        })?;
        completion.result?;
        Ok(completion
            .buf
            .expect("invariant: a read hands its buffer back"))
    }

    /// Write `data` at `offset_bytes` as one request on an idle engine.
    fn write_at(
        &mut self,
        device: DeviceId,
        offset_bytes: u64,
        data: AlignedBuf,
        fua: bool,
    ) -> Result<(), IoError> {
        self.execute(Request {
            device,
            tag: offset_bytes,
            op: Op::Write {
                offset_bytes,
                buf: data,
                fua,
            },
        })?
        .result
        .map(|_| ())
    }

    /// Flush the device as one request on an idle engine.
    fn flush(&mut self, device: DeviceId) -> Result<(), IoError> {
        self.execute(Request {
            device,
            tag: 0,
            op: Op::Flush,
        })?
        .result
        .map(|_| ())
    }

    /// Run several requests concurrently (up to `depth_max` at once) and return
    /// their completions in the order the requests were given. Tags must be unique.
    fn execute_all(&mut self, requests: Vec<Request>) -> Result<Vec<Completion>, IoError> {
        assert_eq!(
            self.in_flight(),
            0,
            "invariant: execute_all() on an idle engine"
        );
        let tags: Vec<u64> = requests.iter().map(|r| r.tag).collect();
        let mut slots: Vec<Option<Completion>> = (0..requests.len()).map(|_| None).collect();
        let mut pending = requests.into_iter();
        let mut next = pending.next();
        let mut received = 0;
        while received < slots.len() {
            while let Some(request) = next.take() {
                match self.submit(request) {
                    Ok(()) => next = pending.next(),
                    Err(SubmitError::QueueFull(request)) => {
                        next = Some(request);
                        break;
                    }
                }
            }
            self.wait(1)?;
            while let Some(completion) = self.pop_completion() {
                let index = tags
                    .iter()
                    .position(|t| *t == completion.tag)
                    .expect("invariant: completion for a submitted tag");
                assert!(
                    slots[index].is_none(),
                    "invariant: tags are unique and complete once"
                );
                slots[index] = Some(completion);
                received += 1;
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }
}

/// An engine over real files and block devices.
pub trait FileEngine: IoEngine {
    /// Hand an opened device to the engine.
    fn attach(&mut self, device: DeviceFile) -> DeviceId;
    /// Setup flags and features in force, for reports (io_uring's; none for sync).
    fn flags(&self) -> &[&'static str] {
        &[]
    }
    /// The opened device behind an id.
    fn device(&self, device: DeviceId) -> Option<&DeviceFile>;
}

/// Retries of one piece after EAGAIN or EINTR before the request fails,
/// in either real backend.
pub const RETRY_MAX: u8 = 8;

/// Check a request against a device's geometry: alignment and bounds.
pub fn validate(geometry: &Geometry, op: &Op) -> Result<(), IoError> {
    let kind = op.kind();
    if kind == OpKind::Flush {
        return Ok(());
    }
    let (offset_bytes, len_bytes) = op.range();
    let sector = u64::from(geometry.logical_sector_bytes);
    if offset_bytes % sector != 0 || len_bytes % sector != 0 || len_bytes == 0 {
        return Err(IoError::Misaligned {
            kind,
            offset_bytes,
            len_bytes,
            sector_bytes: geometry.logical_sector_bytes,
        });
    }
    let inside = offset_bytes
        .checked_add(len_bytes)
        .is_some_and(|end| end <= geometry.size_bytes);
    if !inside {
        return Err(IoError::OutOfRange {
            kind,
            offset_bytes,
            len_bytes,
            size_bytes: geometry.size_bytes,
        });
    }
    if matches!(kind, OpKind::Discard)
        && geometry.discard == crate::geometry::DiscardSupport::Unsupported
    {
        return Err(IoError::Unsupported { kind });
    }
    Ok(())
}

/// The pieces a transfer of `len_bytes` is split into: `(offset within the
/// request, length)`, each at most `max_piece_bytes` (a multiple of the sector).
pub fn pieces(len_bytes: u64, max_piece_bytes: u64) -> impl Iterator<Item = (u64, u64)> {
    assert!(
        max_piece_bytes > 0,
        "invariant: a positive maximum transfer"
    );
    (0..len_bytes.div_ceil(max_piece_bytes)).map(move |i| {
        let start = i * max_piece_bytes;
        (start, max_piece_bytes.min(len_bytes - start))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_mib_on_a_1280k_device_is_four_pieces() {
        let p: Vec<_> = pieces(4 << 20, 1280 << 10).collect();
        assert_eq!(
            p,
            vec![
                (0, 1280 << 10),
                (1280 << 10, 1280 << 10),
                (2560 << 10, 1280 << 10),
                (3840 << 10, 256 << 10)
            ]
        );
        assert_eq!(pieces(4096, 1 << 20).count(), 1);
        assert_eq!(pieces(0, 4096).count(), 0);
    }
}
