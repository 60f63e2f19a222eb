//! The default backend: io_uring.
//!
//! A request becomes one or more *pieces* — a read or write longer than the
//! device's maximum transfer is split — and each piece is one SQE whose
//! `user_data` is its key in `pieces`. The request's buffer stays inside
//! `requests` until its last piece completes; only then is it handed back.
//!
//! Buffer lifetime: the kernel writes into (or reads from) a request's buffer
//! until that piece's CQE arrives. The buffer is a heap allocation owned by the
//! request entry, which is removed only after its last CQE is reaped, and `Drop`
//! waits for every piece still in the kernel before anything is freed — or,
//! for pieces that timed out, hands the ring and those buffers to a reaper
//! thread that waits for them (below).
//!
//! Timeouts ([`IoEngine::set_io_timeout`]): each request carries a deadline,
//! checked in `wait` (which sleeps in the kernel no longer than the earliest
//! one). At its deadline a request completes with [`IoError::TimedOut`] at
//! once; its pieces never handed to the kernel are dropped, and those in the
//! kernel are *parked*: the request entry, and so its buffer, stays until
//! their CQEs arrive, and is then dropped without a completion (the caller
//! has had its answer). The completion hands back no buffer.
//!
//! A device that hangs must not make another look failed, so nothing a
//! parked request holds is taken from another device's requests: it no
//! longer counts as in flight (the caller may submit others in its place),
//! and its pieces take no room in the ring (`sq_entries` bounds the pieces
//! *not* parked), so a healthy device's piece never waits in the backlog
//! behind a hung one's. The kernel's workers are kept the same way, per
//! thread (`uring_workers.rs`). And a device with a request parked
//! gets no more pieces: a request to it completes with
//! [`IoError::TimedOut`] at once, without reaching it (it does not answer;
//! the one before it has waited the timeout), until the kernel gives the
//! parked ones back. So a device that hangs for good holds at most the
//! pieces it had when its first request timed out, and the CQ (twice the
//! ring) overflows only when more than a ring's worth are parked, several
//! devices hanging at once; the kernel then keeps the completions that do
//! not fit (IORING_FEAT_NODROP, Linux 5.5) until they are reaped.
//!
//! All of this assumes that entering a piece into the kernel does not
//! block the thread that enters it: io_uring first tries a read or write
//! in that thread without blocking, and a device that cannot do it so
//! gives it to a kernel worker. A FUSE file takes the attempt and then
//! blocks in it, on the file's inode lock or for room among its background
//! requests, as long as the daemon takes — the thread never gets back to
//! its deadlines, and a piece entered after the blocked one (another
//! device's) is issued only when it does, long past its own deadline. So
//! every piece to such a device is sent straight to a worker
//! (IOSQE_ASYNC, [`crate::probe::DeviceProbe::submission_may_block`]): the
//! worker waits, and the thread goes on.
//!
//! The engine also asks the kernel to cancel each parked piece
//! (IORING_OP_ASYNC_CANCEL, best effort: no room in the submission queue,
//! no cancel). What that achieves depends on where the piece waits. A read
//! or write of a file on a FUSE file system runs in an io-wq worker (FUSE
//! files take no non-blocking attempt), blocked in the FUSE request: the
//! cancel signals the worker, the kernel sends the daemon an INTERRUPT, and
//! then waits on (killably, or not at all once the daemon has the request)
//! until the daemon answers — a daemon that honours interrupts ends it with
//! EINTR, one that does not (or a hung SAN behind a loop device, whose bio is
//! already in the block layer, where cancel does nothing: -EALREADY) keeps
//! the piece until the device answers or the FUSE connection is aborted.
//! Hence parking rather than freeing: nothing the engine does can make the
//! kernel let go of the buffer sooner.
//!
//! `Drop` with parked pieces (or pieces past their deadline) left does not
//! wait for them: the ring, the parked requests and their buffers go to a
//! thread of their own that reaps them and then frees everything, so the
//! dropper (a data handle let go of, a service stopping) is never held by a
//! hung device. That thread lives as long as the device hangs; a process
//! that exits meanwhile ends it (its exit waits for the kernel's pieces as
//! any process with I/O in flight does).
//!
//! Bounds: at most `depth_max` requests outstanding; at most `sq_entries` pieces
//! not parked in the kernel (see above for the parked ones); a piece that fails
//! with EAGAIN or EINTR is retried at most [`RETRY_MAX`] times.
//!
//! Discard and write-zeroes on block devices run synchronously (BLKDISCARD,
//! BLKZEROOUT ioctls): io_uring's block discard command is kernel 6.12+ only.
//! On files they are io_uring fallocate operations.

use std::collections::VecDeque;
use std::io;
use std::mem::ManuallyDrop;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};
use slab::Slab;

use crate::buf::AlignedBuf;
use crate::device::DeviceFile;
use crate::engine::{
    pieces, validate, Completion, DeviceId, EngineStats, FileEngine, IoEngine, IoError, Op, OpKind,
    Request, SubmitError, RETRY_MAX,
};
use crate::geometry::Geometry;
use crate::uring_workers::{Submitters, SQ_ENTRIES_MIN};

/// The `user_data` of an ASYNC_CANCEL's own CQE (never a piece's key: the
/// pieces slab holds at most `sq_entries`).
const CANCEL_KEY: u64 = u64::MAX;
/// Largest submission queue the engine asks for.
const SQ_ENTRIES_MAX: usize = 4096;
/// Slots in the registered-file table of an engine built with `register_files`.
const FIXED_FILES_MAX: u32 = 64;
/// Most SQEs `submit` leaves queued before it hands them to the kernel. A
/// caller refilling many slots at once (a benchmark worker after a burst of
/// completions) would otherwise hold every I/O of the batch back until the
/// next wait, and the device runs short of work. Measured with 8 KiB random
/// I/O at QD32 against fio (which submits each I/O at once): whole batches
/// at the next wait reached 0.78-0.90x fio's IOPS on a file on virtio-blk and
/// 0.85-0.90x on a RAM loop device; batches of 2 reached 0.99-1.03x on both,
/// for 10% less CPU than a system call per request; batches of 8 kept the
/// loop device at 1.03x but the file fell to 0.88x.
pub const SUBMIT_BATCH_MAX: usize = 2;

/// Ring setup for callers that want the last few percent (the workload engine).
/// The defaults are what every other caller gets: a plain ring any thread may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UringOptions {
    /// IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN: completions are processed
    /// only when this thread waits, saving interrupts of the submitter. The
    /// engine must then be created, used and dropped on one thread.
    pub single_issuer: bool,
    /// Register each attached device's descriptor, saving a file-table lookup
    /// and reference count per request.
    pub register_files: bool,
}

struct InFlight {
    device: DeviceId,
    tag: u64,
    kind: OpKind,
    offset_bytes: u64,
    len_bytes: u64,
    buf: Option<AlignedBuf>,
    fua: bool,
    pieces_left: u64,
    error: Option<IoError>,
    /// When it times out (`None`: no timeout was set when it was submitted).
    deadline: Option<Instant>,
    /// It timed out and its completion was handed out: its pieces still in
    /// the kernel are waited for, and then it is dropped with its buffer.
    parked: bool,
}

#[derive(Clone, Copy, Debug)]
struct Piece {
    request: usize,
    /// Offset within the request.
    start_bytes: u64,
    len_bytes: u64,
    retries: u8,
    /// The thread that entered it into the kernel (its slot in
    /// `UringEngine::submitters`); set as it goes into the submission queue.
    submitter: u16,
}

/// io_uring engine over attached devices.
pub struct UringEngine {
    /// Taken by `Drop` only (handed to a reaper thread, or dropped).
    ring: ManuallyDrop<IoUring>,
    sq_entries: usize,
    /// By id; `None` once detached (ids are not reused).
    devices: Vec<Option<DeviceFile>>,
    requests: Slab<InFlight>,
    /// Pieces in the kernel, keyed by SQE user_data.
    pieces: Slab<Piece>,
    /// Pieces waiting for room in the submission queue.
    backlog: VecDeque<Piece>,
    ready: VecDeque<Completion>,
    reaped: Vec<(u64, i32)>,
    depth_max: usize,
    stats: EngineStats,
    /// See [`IoEngine::set_io_timeout`].
    io_timeout: Option<Duration>,
    /// The earliest deadline of a request in `requests` not parked, or
    /// later (a cached lower bound, so `wait` scans only when it passed).
    next_deadline: Option<Instant>,
    /// Requests in `requests` that are parked.
    parked: usize,
    /// Pieces in `pieces` whose request is parked: they take no room from
    /// the others (see the module's notes).
    parked_pieces: usize,
    /// Per device (by id), its requests that are parked: while there is
    /// one, a request to the device completes with `TimedOut` at once.
    hung: Vec<usize>,
    /// Per device (by id), whether its requests go straight to the
    /// kernel's workers (IOSQE_ASYNC): it may block the submitting thread
    /// otherwise ([`DeviceProbe::submission_may_block`]).
    ///
    /// [`DeviceProbe::submission_may_block`]: crate::probe::DeviceProbe::submission_may_block
    to_workers: Vec<bool>,
    /// The threads whose pieces are in the kernel, for their worker bounds
    /// (`uring_workers.rs`).
    submitters: Submitters,
    /// Devices are addressed by their index in the registered-file table.
    fixed_files: bool,
    /// The registered-file table exists (it may hold earlier devices even
    /// after `fixed_files` fell back to plain descriptors): a detached
    /// device's slot is cleared, and the table is unregistered at drop.
    files_table: bool,
    flags: Vec<&'static str>,
}

impl UringEngine {
    /// A ring for up to `depth_max` outstanding requests.
    pub fn new(depth_max: usize) -> io::Result<Self> {
        Self::with_options(depth_max, UringOptions::default())
    }

    /// A ring with `options`; any the kernel refuses are dropped (see
    /// [`UringEngine::flags`] for what is in force).
    pub fn with_options(depth_max: usize, options: UringOptions) -> io::Result<Self> {
        assert!(depth_max > 0, "invariant: depth of at least one");
        let sq_entries = depth_max
            .next_power_of_two()
            .clamp(SQ_ENTRIES_MIN, SQ_ENTRIES_MAX);
        let mut flags = Vec::new();
        let plain = || {
            IoUring::builder()
                .setup_cqsize(2 * sq_entries as u32)
                .build(sq_entries as u32)
        };
        let ring = if options.single_issuer {
            match IoUring::builder()
                .setup_cqsize(2 * sq_entries as u32)
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(sq_entries as u32)
            {
                Ok(ring) => {
                    flags.extend(["single_issuer", "defer_taskrun"]);
                    ring
                }
                Err(_) => plain()?,
            }
        } else {
            plain()?
        };
        let fixed_files = options.register_files
            && ring
                .submitter()
                .register_files_sparse(FIXED_FILES_MAX)
                .is_ok();
        if fixed_files {
            flags.push("registered_files");
        }
        Ok(Self {
            ring: ManuallyDrop::new(ring),
            sq_entries,
            devices: Vec::new(),
            requests: Slab::with_capacity(depth_max),
            pieces: Slab::with_capacity(sq_entries),
            backlog: VecDeque::new(),
            ready: VecDeque::with_capacity(depth_max),
            reaped: Vec::with_capacity(2 * sq_entries),
            depth_max,
            stats: EngineStats::default(),
            io_timeout: None,
            next_deadline: None,
            parked: 0,
            parked_pieces: 0,
            hung: Vec::new(),
            to_workers: Vec::new(),
            submitters: Submitters::default(),
            fixed_files,
            files_table: fixed_files,
            flags,
        })
    }

    /// The setup flags and features in force, for reports.
    pub fn flags(&self) -> &[&'static str] {
        &self.flags
    }

    fn sqe_for(&mut self, key: usize, piece: Piece) -> squeue::Entry {
        let request = &mut self.requests[piece.request];
        // Submitted only for an attached device, which cannot be detached
        // while a request to it is in flight.
        let fd = types::Fd(
            self.devices[request.device.0 as usize]
                .as_ref()
                .map_or(-1, DeviceFile::raw_fd),
        );
        let fixed = types::Fixed(request.device.0);
        let at = request.offset_bytes + piece.start_bytes;
        let len = piece.len_bytes;
        // Reads and writes address a registered file where there is one; the
        // opcode builders take either kind of handle, but not a choice of them.
        macro_rules! by_handle {
            ($build:expr) => {
                if self.fixed_files {
                    $build(fixed)
                } else {
                    $build(fd)
                }
            };
        }
        let entry = match request.kind {
            OpKind::Read | OpKind::Write => {
                let buf = request
                    .buf
                    .as_mut()
                    .expect("invariant: reads and writes own a buffer");
                // SAFETY: start + len lies inside the buffer (pieces() never exceeds
                // the request length), so the pointer stays in bounds.
                let ptr = unsafe { buf.as_mut_ptr().add(piece.start_bytes as usize) };
                let len = u32::try_from(len)
                    .expect("invariant: a piece is at most max_transfer_bytes (u32)");
                if request.kind == OpKind::Read {
                    by_handle!(|h| opcode::Read::new(h, ptr, len).offset(at).build())
                } else {
                    let flags = if request.fua { libc::RWF_DSYNC } else { 0 };
                    by_handle!(|h| opcode::Write::new(h, ptr, len)
                        .offset(at)
                        .rw_flags(flags)
                        .build())
                }
            }
            OpKind::Flush => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
            OpKind::Discard => opcode::Fallocate::new(fd, len)
                .offset(at)
                .mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)
                .build(),
            OpKind::WriteZeroes => opcode::Fallocate::new(fd, len)
                .offset(at)
                .mode(libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE)
                .build(),
        };
        // A device that may block the submitting thread never sees it: the
        // kernel's worker waits instead, and this thread's timeouts still
        // run (see the module's notes).
        let entry = if self.to_workers[request.device.0 as usize] {
            entry.flags(squeue::Flags::ASYNC)
        } else {
            entry
        };
        entry.user_data(key as u64)
    }

    /// Move backlog pieces into the submission queue while the kernel has
    /// room for pieces not parked.
    fn push_backlog(&mut self) -> Result<(), IoError> {
        if self.backlog.is_empty() {
            return Ok(());
        }
        let me = self.submitters.mine();
        // Pieces pushed and not yet counted: counted, and the thread's
        // workers made room for, before any enter hands them over.
        let mut pushed = 0;
        while let Some(piece) = self.backlog.front().copied() {
            if self.pieces.len() - self.parked_pieces >= self.sq_entries {
                break;
            }
            let piece = Piece {
                submitter: me,
                ..piece
            };
            let key = self.pieces.vacant_key();
            let entry = self.sqe_for(key, piece);
            // SAFETY: the SQE points into a buffer owned by self.requests[piece.request],
            // which is not removed or freed until this piece's CQE is reaped (and Drop
            // waits for every piece in the kernel); its fd belongs to a DeviceFile in
            // self.devices, which keeps it while a request to it is in flight
            // (detach_file refuses a busy engine).
            if unsafe { self.ring.submission().push(&entry) }.is_err() {
                self.submitters
                    .entered(me, std::mem::take(&mut pushed), &self.ring);
                self.enter(0)?;
                continue;
            }
            self.pieces.insert(piece);
            pushed += 1;
            self.backlog.pop_front();
            self.stats.device_requests += 1;
        }
        if pushed > 0 {
            self.submitters.entered(me, pushed, &self.ring);
        }
        Ok(())
    }

    fn enter(&mut self, want: usize) -> Result<(), IoError> {
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => return Ok(()),
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN)
                    ) =>
                {
                    if want == 0 {
                        return Ok(());
                    }
                    // EBUSY: completions must be reaped first; the caller reaps and retries.
                    if e.raw_os_error() == Some(libc::EBUSY) {
                        return Ok(());
                    }
                }
                Err(e) => {
                    return Err(IoError::Engine {
                        errno: e.raw_os_error().unwrap_or(libc::EIO),
                    })
                }
            }
        }
    }

    fn reap(&mut self) {
        self.reaped.clear();
        self.reaped.extend(
            self.ring
                .completion()
                .map(|cqe| (cqe.user_data(), cqe.result())),
        );
        if self.reaped.is_empty() {
            return;
        }
        // The calling thread's own pieces are counted off once, at the end.
        let reaper = self.submitters.find_mine();
        let mut own = 0;
        for i in 0..self.reaped.len() {
            let (key, result) = self.reaped[i];
            if key == CANCEL_KEY {
                continue;
            }
            let piece = self.pieces.remove(key as usize);
            if Some(piece.submitter) == reaper {
                own += 1;
            } else {
                self.submitters.reaped_elsewhere(piece.submitter);
            }
            self.finish_piece(piece, result);
        }
        if let Some(reaper) = reaper {
            self.submitters.reaped_own(reaper, own);
        }
    }

    fn finish_piece(&mut self, piece: Piece, result: i32) {
        let request = &mut self.requests[piece.request];
        if request.parked {
            // Its caller has had its completion: the kernel is done with
            // this piece's part of the buffer, and with the last piece the
            // buffer goes, and its device may be sent requests again.
            request.pieces_left -= 1;
            self.parked_pieces -= 1;
            if request.pieces_left == 0 {
                let device = request.device;
                self.requests.remove(piece.request);
                self.parked -= 1;
                self.hung[device.0 as usize] -= 1;
            }
            return;
        }
        let at = request.offset_bytes + piece.start_bytes;
        if result < 0 {
            let errno = -result;
            if matches!(errno, libc::EAGAIN | libc::EINTR) && piece.retries < RETRY_MAX {
                self.backlog.push_back(Piece {
                    retries: piece.retries + 1,
                    ..piece
                });
                return;
            }
            request.error.get_or_insert(IoError::Os {
                kind: request.kind,
                offset_bytes: at,
                len_bytes: piece.len_bytes,
                errno,
            });
        } else if matches!(request.kind, OpKind::Read | OpKind::Write)
            && (result as u64) < piece.len_bytes
        {
            // A short direct transfer: resume after what was done, if it is still sector-aligned.
            let done = result as u64;
            let sector = self.devices[request.device.0 as usize]
                .as_ref()
                .map_or(1, |d| u64::from(d.geometry().logical_sector_bytes));
            if done > 0 && done.is_multiple_of(sector) {
                self.backlog.push_back(Piece {
                    start_bytes: piece.start_bytes + done,
                    len_bytes: piece.len_bytes - done,
                    ..piece
                });
                return;
            }
            request.error.get_or_insert(IoError::ShortTransfer {
                kind: request.kind,
                offset_bytes: at,
                len_bytes: piece.len_bytes,
                done_bytes: done,
            });
        }
        request.pieces_left -= 1;
        if request.pieces_left > 0 {
            return;
        }
        let request = self.requests.remove(piece.request);
        let result = match request.error {
            Some(error) => Err(error),
            None => {
                match request.kind {
                    OpKind::Read => self.stats.bytes_read += request.len_bytes,
                    OpKind::Write => self.stats.bytes_written += request.len_bytes,
                    _ => {}
                }
                Ok(request.len_bytes)
            }
        };
        self.ready.push_back(Completion {
            device: request.device,
            tag: request.tag,
            kind: request.kind,
            result,
            buf: request.buf,
        });
    }
}

impl UringEngine {
    /// Time out every request past its deadline (see the module's notes):
    /// its completion is ready now, its pieces not yet in the kernel are
    /// dropped, and it is parked if the kernel holds any.
    fn expire(&mut self) {
        let Some(next) = self.next_deadline else {
            return;
        };
        let now = Instant::now();
        if next > now {
            return;
        }
        let timeout_ms = self.io_timeout.map_or(0, |t| t.as_millis() as u64);
        let expired: Vec<usize> = self
            .requests
            .iter()
            .filter(|(_, r)| !r.parked && r.deadline.is_some_and(|d| d <= now))
            .map(|(key, _)| key)
            .collect();
        for key in expired {
            let before = self.backlog.len();
            self.backlog.retain(|p| p.request != key);
            let dropped = (before - self.backlog.len()) as u64;
            let request = &mut self.requests[key];
            request.pieces_left -= dropped;
            let error = IoError::TimedOut {
                kind: request.kind,
                offset_bytes: request.offset_bytes,
                len_bytes: request.len_bytes,
                timeout_ms,
            };
            let (device, tag, kind) = (request.device, request.tag, request.kind);
            let buf = if request.pieces_left == 0 {
                // The kernel holds none of it: the buffer goes back.
                self.requests.remove(key).buf
            } else {
                request.parked = true;
                self.parked += 1;
                self.parked_pieces += request.pieces_left as usize;
                self.hung[device.0 as usize] += 1;
                let in_kernel: Vec<u64> = self
                    .pieces
                    .iter()
                    .filter(|(_, p)| p.request == key)
                    .map(|(k, _)| k as u64)
                    .collect();
                for k in in_kernel {
                    let cancel = opcode::AsyncCancel::new(k).build().user_data(CANCEL_KEY);
                    // SAFETY: a cancel names a piece by its user_data and
                    // points at no memory.
                    if unsafe { self.ring.submission().push(&cancel) }.is_err() {
                        break;
                    }
                }
                None
            };
            self.ready.push_back(Completion {
                device,
                tag,
                kind,
                result: Err(error),
                buf,
            });
        }
        self.next_deadline = self
            .requests
            .iter()
            .filter(|(_, r)| !r.parked)
            .filter_map(|(_, r)| r.deadline)
            .min();
    }

    /// Submit what is queued and wait for a CQE, at most `timeout`.
    fn enter_timeout(&mut self, timeout: Duration) -> Result<(), IoError> {
        let timespec = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&timespec);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(IoError::Engine {
                errno: e.raw_os_error().unwrap_or(libc::EIO),
            }),
        }
    }

    /// Wait in the kernel for a CQE, no later than the next deadline.
    fn enter_wait(&mut self) -> Result<(), IoError> {
        match self.next_deadline {
            Some(deadline) => {
                self.enter_timeout(deadline.saturating_duration_since(Instant::now()))
            }
            None => self.enter(1),
        }
    }

    /// Pieces in the kernel that belong to a request not parked.
    fn live_pieces(&self) -> bool {
        self.pieces
            .iter()
            .any(|(_, p)| !self.requests[p.request].parked)
    }
}

// The phases of `IoEngine::submit`, which runs per I/O: private, inlined,
// and adding no allocation, lock, dynamic call or system call to it.
impl UringEngine {
    /// The error a request to a device that holds one past its timeout
    /// fails with at once, if it does.
    #[inline]
    fn hung_refusal(
        &mut self,
        request: &Request,
        kind: OpKind,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Option<IoError> {
        if self.hung[request.device.0 as usize] > 0 {
            // Whether the kernel has given the parked ones back meanwhile
            // (a caller that only submits requests to this device would
            // otherwise never reap them).
            self.reap();
        }
        if self.hung[request.device.0 as usize] > 0 {
            // A request to it is still unanswered past its timeout: this
            // one would only wait as long and hold more of the kernel's
            // workers (see the module's notes).
            return Some(IoError::TimedOut {
                kind,
                offset_bytes,
                len_bytes,
                timeout_ms: self.io_timeout.map_or(0, |t| t.as_millis() as u64),
            });
        }
        None
    }

    /// A discard or write-zeroes (`kind`) on a block device, carried out
    /// now by the device (not through the ring), its completion ready.
    #[inline]
    fn zero_block_now(
        &mut self,
        request: Request,
        kind: OpKind,
        offset_bytes: u64,
        len_bytes: u64,
    ) {
        let device = FileEngine::device(self, request.device)
            .expect("invariant: the device was found above");
        let outcome = if kind == OpKind::Discard {
            device.discard_now(offset_bytes, len_bytes)
        } else {
            device.write_zeroes_now(offset_bytes, len_bytes)
        };
        self.stats.device_requests += 1;
        self.ready.push_back(Completion {
            device: request.device,
            tag: request.tag,
            kind,
            result: outcome.map(|()| len_bytes).map_err(|e| IoError::Os {
                kind,
                offset_bytes,
                len_bytes,
                errno: e.raw_os_error().unwrap_or(libc::EIO),
            }),
            buf: None,
        });
    }

    /// The request (`kind`, `len_bytes` at `offset_bytes`) in flight,
    /// its deadline counted, and its pieces in the backlog: a read or a
    /// write in pieces of at most `max_piece` bytes, anything else whole.
    #[inline]
    fn queue_pieces(
        &mut self,
        request: Request,
        kind: OpKind,
        offset_bytes: u64,
        len_bytes: u64,
        max_piece: u64,
    ) {
        let (buf, fua) = match request.op {
            Op::Read { buf, .. } => (Some(buf), false),
            Op::Write { buf, fua, .. } => (Some(buf), fua),
            _ => (None, false),
        };
        let split = matches!(kind, OpKind::Read | OpKind::Write);
        let piece_count = if split {
            len_bytes.div_ceil(max_piece)
        } else {
            1
        };
        let key = self.requests.insert(InFlight {
            device: request.device,
            tag: request.tag,
            kind,
            offset_bytes,
            len_bytes,
            buf,
            fua,
            pieces_left: piece_count,
            error: None,
            deadline: self.io_timeout.map(|t| Instant::now() + t),
            parked: false,
        });
        if let Some(deadline) = self.requests[key].deadline {
            self.next_deadline = Some(self.next_deadline.map_or(deadline, |d| d.min(deadline)));
        }
        if split {
            self.backlog.extend(
                pieces(len_bytes, max_piece).map(|(start_bytes, len)| Piece {
                    request: key,
                    start_bytes,
                    len_bytes: len,
                    retries: 0,
                    submitter: 0,
                }),
            );
        } else {
            self.backlog.push_back(Piece {
                request: key,
                start_bytes: 0,
                len_bytes,
                retries: 0,
                submitter: 0,
            });
        }
    }
}

/// What a dropped engine leaves the kernel: its ring and the parked
/// requests whose pieces it still holds, buffers and all.
struct Parked {
    ring: IoUring,
    requests: Slab<InFlight>,
    pieces: Slab<Piece>,
    submitters: Submitters,
    files_table: bool,
}

impl Parked {
    /// Reap until the kernel holds nothing of ours, then free it all. If
    /// the ring fails, leak the buffers rather than free memory the kernel
    /// may still write.
    fn reap(mut self) {
        while !self.pieces.is_empty() {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {}
                Err(_) => {
                    std::mem::forget(self);
                    return;
                }
            }
            for cqe in self.ring.completion() {
                let key = cqe.user_data();
                if key == CANCEL_KEY || !self.pieces.contains(key as usize) {
                    continue;
                }
                let piece = self.pieces.remove(key as usize);
                // This thread entered none of them.
                self.submitters.reaped_elsewhere(piece.submitter);
                let request = &mut self.requests[piece.request];
                request.pieces_left -= 1;
                if request.pieces_left == 0 {
                    self.requests.remove(piece.request);
                }
            }
        }
        if self.files_table {
            self.ring.submitter().unregister_files().ok();
        }
    }
}

impl IoEngine for UringEngine {
    fn name(&self) -> &'static str {
        "io_uring"
    }

    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        FileEngine::device(self, device).map(DeviceFile::geometry)
    }

    fn attach_file(&mut self, device: DeviceFile) -> Option<DeviceId> {
        Some(FileEngine::attach(self, device))
    }

    fn detach_file(&mut self, device: DeviceId) -> Option<DeviceFile> {
        if self.in_flight() > 0 {
            return None;
        }
        let file = self.devices.get_mut(device.0 as usize)?.take()?;
        if self.files_table && device.0 < FIXED_FILES_MAX {
            // The registered table's slot lets go of the file too (-1:
            // empty), whether or not the engine still addresses devices
            // through it.
            let _ = self.ring.submitter().register_files_update(device.0, &[-1]);
        }
        Some(file)
    }

    /// Queues the request's pieces in the submission queue; the kernel sees them
    /// at the next `wait`, or as soon as [`SUBMIT_BATCH_MAX`] are queued (or the
    /// queue fills), so a caller that submits a batch pays one system call per
    /// [`SUBMIT_BATCH_MAX`] requests.
    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        if self.in_flight() >= self.depth_max {
            return Err(SubmitError::QueueFull(request));
        }
        self.stats.requests += 1;
        let Some(device) = FileEngine::device(self, request.device) else {
            let device = request.device;
            self.ready
                .push_back(Completion::failed(request, IoError::UnknownDevice(device)));
            return Ok(());
        };
        if let Err(error) = validate(device.geometry(), &request.op) {
            self.ready.push_back(Completion::failed(request, error));
            return Ok(());
        }
        let is_block = device.is_block();
        let max_piece = device.geometry().max_transfer_aligned_bytes();
        let kind = request.op.kind();
        let (offset_bytes, len_bytes) = request.op.range();
        if let Some(error) = self.hung_refusal(&request, kind, offset_bytes, len_bytes) {
            self.ready.push_back(Completion::failed(request, error));
            return Ok(());
        }
        if is_block && matches!(kind, OpKind::Discard | OpKind::WriteZeroes) {
            self.zero_block_now(request, kind, offset_bytes, len_bytes);
            return Ok(());
        }
        self.queue_pieces(request, kind, offset_bytes, len_bytes, max_piece);
        // If the ring itself fails here, the pieces stay in the backlog (or the
        // submission queue) and the same error surfaces at the next wait(),
        // where the caller looks for it.
        self.push_backlog().ok();
        if self.ring.submission().len() >= SUBMIT_BATCH_MAX {
            self.enter(0).ok();
        }
        Ok(())
    }

    fn wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        let target = min_completions.min(self.in_flight());
        loop {
            self.push_backlog()?;
            self.reap();
            self.expire();
            if self.ready.len() >= target {
                // Hand queued submissions to the kernel without waiting.
                return self.enter(0);
            }
            assert!(
                !self.pieces.is_empty() || !self.backlog.is_empty(),
                "invariant: an outstanding request has a piece in the kernel or the backlog"
            );
            if self.pieces.is_empty() {
                continue;
            }
            self.enter_wait()?;
        }
    }

    fn wait_timeout(
        &mut self,
        min_completions: usize,
        timeout: std::time::Duration,
    ) -> Result<(), IoError> {
        let target = min_completions.min(self.in_flight());
        self.push_backlog()?;
        self.reap();
        self.expire();
        if self.ready.len() >= target {
            return self.enter(0);
        }
        if self.pieces.is_empty() {
            // Only backlog (a full submission queue): nothing to time out on.
            return self.wait(min_completions);
        }
        let timeout = match self.next_deadline {
            Some(d) => timeout.min(d.saturating_duration_since(Instant::now())),
            None => timeout,
        };
        self.enter_timeout(timeout)?;
        self.push_backlog()?;
        self.reap();
        self.expire();
        Ok(())
    }

    fn pop_completion(&mut self) -> Option<Completion> {
        self.ready.pop_front()
    }

    fn set_io_timeout(&mut self, timeout: Option<Duration>) {
        self.io_timeout = timeout;
    }

    fn in_flight(&self) -> usize {
        self.requests.len() - self.parked + self.ready.len()
    }

    fn depth_max(&self) -> usize {
        self.depth_max
    }

    fn stats(&self) -> EngineStats {
        self.stats
    }
}

impl FileEngine for UringEngine {
    fn flags(&self) -> &[&'static str] {
        &self.flags
    }

    fn attach(&mut self, device: DeviceFile) -> DeviceId {
        if self.fixed_files {
            let slot = self.devices.len() as u32;
            let registered = slot < FIXED_FILES_MAX
                && self
                    .ring
                    .submitter()
                    .register_files_update(slot, &[device.raw_fd()])
                    .is_ok();
            if !registered {
                // Every device must be addressable the same way: fall back to
                // plain descriptors for all, which stays correct.
                self.fixed_files = false;
                self.flags.retain(|f| *f != "registered_files");
            }
        }
        self.to_workers.push(device.probe().submission_may_block());
        self.devices.push(Some(device));
        self.hung.push(0);
        DeviceId(u32::try_from(self.devices.len() - 1).expect("invariant: fewer than 2^32 devices"))
    }

    fn device(&self, device: DeviceId) -> Option<&DeviceFile> {
        self.devices.get(device.0 as usize)?.as_ref()
    }
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        // The kernel may still be reading or writing request buffers: wait for
        // every piece it holds of a request still running (at most until its
        // deadline) before those buffers are freed. If the ring fails, leak the
        // buffers rather than free memory the kernel may still write.
        loop {
            self.reap();
            self.expire();
            if !self.live_pieces() {
                break;
            }
            let waited = match self.next_deadline {
                Some(_) => self.enter_wait().map_err(|_| ()),
                None => match self.ring.submit_and_wait(1) {
                    Err(e)
                        if !matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) =>
                    {
                        Err(())
                    }
                    _ => Ok(()),
                },
            };
            if waited.is_err() {
                std::mem::forget(std::mem::take(&mut self.requests));
                // SAFETY: the ring is taken once, here, and never used again.
                std::mem::forget(unsafe { ManuallyDrop::take(&mut self.ring) });
                return;
            }
        }
        // SAFETY: the ring is taken once, here (Drop runs once), and `self`
        // does not use it again.
        let ring = unsafe { ManuallyDrop::take(&mut self.ring) };
        let parked = Parked {
            ring,
            requests: std::mem::take(&mut self.requests),
            pieces: std::mem::take(&mut self.pieces),
            submitters: std::mem::take(&mut self.submitters),
            files_table: self.files_table,
        };
        if parked.pieces.is_empty() {
            // The kernel tears a ring down asynchronously after its fd closes, and
            // until then its registered files stay open — with their flock, so
            // the next process to claim the device would find it "in use".
            // Unregistering is synchronous: the files are released here.
            parked.reap();
            return;
        }
        // Parked pieces: a device that does not answer. Their buffers go with
        // the ring to a thread that waits for them; if it cannot be started,
        // they are leaked (ManuallyDrop), never freed under the kernel.
        let payload = ManuallyDrop::new(parked);
        let _ = std::thread::Builder::new()
            .name("cairn-uring-reaper".into())
            .spawn(move || ManuallyDrop::into_inner(payload).reap());
    }
}
