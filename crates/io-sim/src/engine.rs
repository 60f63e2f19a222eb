//! The simulated engine: the disks' images and pending writes, the seeded
//! faults and latencies, crashes; and the wrappers tests put around an
//! engine ([`CrashAfter`], [`Stall`]). The crate's header says what it
//! models.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::ops::Range;

use cairn_io::clock::Clock;
use cairn_io::engine::{pieces, validate};
use cairn_io::geometry::DiscardSupport;
use cairn_io::{
    AlignedBuf, Completion, DeviceId, EngineStats, Geometry, IoEngine, IoError, Op, OpKind,
    Request, SubmitError,
};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::disk::{all_zeros, copy_overlap, Payload, PendingWrite, CHUNK};

use crate::clock::SimClock;
use crate::disk::{DiskFaults, DiskImage, SimDisk};

const EIO: i32 = 5;
const ENXIO: i32 = 6;
const PER_MILLION: u64 = 1_000_000;

/// What happens to each unflushed write at a crash. The rest are lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashPolicy {
    pub keep_per_million: u32,
    pub tear_per_million: u32,
}

impl CrashPolicy {
    pub const LOSE_ALL: Self = Self {
        keep_per_million: 0,
        tear_per_million: 0,
    };
    pub const KEEP_ALL: Self = Self {
        keep_per_million: 1_000_000,
        tear_per_million: 0,
    };
    pub const TEAR_ALL: Self = Self {
        keep_per_million: 0,
        tear_per_million: 1_000_000,
    };
    /// A third each.
    pub const MIXED: Self = Self {
        keep_per_million: 333_333,
        tear_per_million: 333_333,
    };
}

/// What a crash did, for the test to check against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    pub kept: usize,
    pub lost: usize,
    pub torn: usize,
    pub completions_lost: usize,
}

/// A fault the simulator injected, for the test to check against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultEvent {
    ReadError {
        device: DeviceId,
        offset_bytes: u64,
    },
    WriteError {
        device: DeviceId,
        offset_bytes: u64,
    },
    Misdirected {
        device: DeviceId,
        intended_bytes: u64,
        landed_bytes: u64,
        len_bytes: u64,
    },
    BitRot {
        device: DeviceId,
        offset_bytes: u64,
        bit: u8,
    },
}

/// Where an operation lands (its device and byte range), and its kind:
/// what a failure of it says.
#[derive(Debug, Clone, Copy)]
struct Span {
    device: DeviceId,
    kind: OpKind,
    offset_bytes: u64,
    len_bytes: u64,
}

impl Span {
    /// The operation failed as the OS would fail it, with `errno`.
    fn os(&self, errno: i32) -> IoError {
        IoError::Os {
            kind: self.kind,
            offset_bytes: self.offset_bytes,
            len_bytes: self.len_bytes,
            errno,
        }
    }
}

fn overlaps(ranges: &[Range<u64>], offset_bytes: u64, len_bytes: u64) -> bool {
    ranges
        .iter()
        .any(|r| r.start < offset_bytes + len_bytes && offset_bytes < r.end)
}

/// The simulated engine: any number of disks, one seed.
pub struct SimEngine {
    seed: u64,
    rng: ChaCha8Rng,
    now_ns: u64,
    sequence: u64,
    latency_ns: Range<u64>,
    disks: Vec<SimDisk>,
    in_flight: BinaryHeap<Reverse<(u64, u64)>>,
    waiting: BTreeMap<u64, Completion>,
    /// Flushes in flight by sequence: the disk and when each was issued.
    flushes: BTreeMap<u64, (usize, u64)>,
    ready: VecDeque<Completion>,
    depth_max: usize,
    stats: EngineStats,
    events: Vec<FaultEvent>,
    /// The time shared with the caller, if any (see [`SimEngine::with_clock`]).
    clock: Option<SimClock>,
    /// See [`IoEngine::set_io_timeout`]: for requests submitted from now on.
    io_timeout_ns: Option<u64>,
    /// Requests to a hung disk that timed out so far.
    timed_out: u64,
}

/// The due time of a request to a hung disk with no timeout: never.
const NEVER: u64 = u64::MAX;

impl SimEngine {
    /// An engine whose every random choice follows `seed`.
    pub fn new(seed: u64, depth_max: usize) -> Self {
        assert!(depth_max > 0, "invariant: depth of at least one");
        Self {
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed),
            now_ns: 0,
            sequence: 0,
            latency_ns: 20_000..200_000,
            disks: Vec::new(),
            in_flight: BinaryHeap::new(),
            waiting: BTreeMap::new(),
            flushes: BTreeMap::new(),
            ready: VecDeque::new(),
            depth_max,
            stats: EngineStats::default(),
            events: Vec::new(),
            clock: None,
            io_timeout_ns: None,
            timed_out: 0,
        }
    }

    /// Keep time on `clock`, shared with the caller: a request is issued at
    /// the clock's time, waiting moves the clock to each completion's due
    /// time, and [`IoEngine::wait_timeout`] gives up at its timeout in
    /// simulated time (moving the clock there) when nothing is due sooner.
    pub fn with_clock(mut self, clock: SimClock) -> Self {
        self.now_ns = self.now_ns.max(clock.now_ns());
        self.clock = Some(clock);
        self
    }

    /// Completion latency drawn uniformly from `range` (nanoseconds of simulated time).
    pub fn with_latency(mut self, range: Range<u64>) -> Self {
        assert!(
            range.start < range.end,
            "invariant: a non-empty latency range"
        );
        self.latency_ns = range;
        self
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Simulated time, in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Add a blank disk with this geometry.
    pub fn add_disk(&mut self, geometry: Geometry) -> DeviceId {
        self.disks.push(SimDisk {
            geometry,
            durable: BTreeMap::new(),
            pending: Vec::new(),
            faults: DiskFaults::default(),
            lost: false,
            hung: false,
        });
        DeviceId(u32::try_from(self.disks.len() - 1).expect("invariant: fewer than 2^32 disks"))
    }

    pub fn disk_mut(&mut self, device: DeviceId) -> &mut SimDisk {
        &mut self.disks[device.0 as usize]
    }

    /// The disk disappears: every request to it fails with ENXIO from now on.
    pub fn lose_disk(&mut self, device: DeviceId) {
        self.disk_mut(device).lost = true;
    }

    /// The disk stops answering (`true`) or answers again (`false`): see
    /// the module's notes. Requests that hung stay timed out (they never
    /// took effect).
    pub fn hang_disk(&mut self, device: DeviceId, hung: bool) {
        self.disk_mut(device).hung = hung;
    }

    /// Requests to a hung disk that timed out so far.
    pub fn timed_out(&self) -> u64 {
        self.timed_out
    }

    /// Whether the disk is hung.
    pub fn is_hung(&self, device: DeviceId) -> bool {
        self.disks.get(device.0 as usize).is_some_and(|d| d.hung)
    }

    /// A lost disk comes back after a power cycle: what it had not made
    /// durable (its volatile cache, writes in flight) is gone, the rest is
    /// as it was.
    pub fn restore_disk(&mut self, device: DeviceId) {
        let disk = self.disk_mut(device);
        disk.pending.clear();
        disk.lost = false;
    }

    /// The disk's whole image as it is now, its unflushed writes too.
    pub fn image(&self, device: DeviceId) -> DiskImage {
        let disk = &self.disks[device.0 as usize];
        DiskImage {
            durable: disk.durable.clone(),
            pending: disk.pending.clone(),
        }
    }

    /// Put `image` in the disk's place, bypassing the engine: from now on
    /// the disk holds exactly what it holds (what lay past the disk's end
    /// is cut). As an operator restoring a snapshot, blanking the device or
    /// swapping the LUN would, while nothing reads or writes the disk;
    /// requests in flight still complete, as they would have.
    pub fn put_image(&mut self, device: DeviceId, image: &DiskImage) {
        let disk = self.disk_mut(device);
        let end = disk.geometry.size_bytes;
        disk.durable = image
            .durable
            .range(..end.div_ceil(CHUNK))
            .map(|(k, c)| (*k, c.clone()))
            .collect();
        disk.pending = image
            .pending
            .iter()
            .filter(|w| w.offset_bytes + w.data.len() <= end)
            .cloned()
            .collect();
        if let Some((k, chunk)) = disk.durable.last_key_value().map(|(k, c)| (*k, c.clone())) {
            if (k + 1) * CHUNK > end {
                let mut cut = chunk.to_vec();
                cut[(end - k * CHUNK) as usize..].fill(0);
                disk.durable.insert(k, cut.into());
            }
        }
    }

    /// What a read of the range would return now.
    pub fn contents(&self, device: DeviceId, offset_bytes: u64, len: usize) -> Vec<u8> {
        self.disks[device.0 as usize].current_bytes(offset_bytes, len)
    }

    /// Whether a read of the range would return only zeros now (without
    /// building it where nothing was written).
    pub fn reads_zeros(&self, device: DeviceId, offset_bytes: u64, len: usize) -> bool {
        let disk = &self.disks[device.0 as usize];
        let end = offset_bytes + len as u64;
        let pending = disk
            .pending
            .iter()
            .any(|w| w.offset_bytes < end && w.offset_bytes + w.data.len() > offset_bytes);
        if pending {
            return disk
                .current_bytes(offset_bytes, len)
                .iter()
                .all(|b| *b == 0);
        }
        disk.durable
            .range(offset_bytes / CHUNK..end.div_ceil(CHUNK))
            .all(|(k, chunk)| {
                let from = offset_bytes.max(k * CHUNK) - k * CHUNK;
                let to = end.min((k + 1) * CHUNK) - k * CHUNK;
                chunk[from as usize..to as usize].iter().all(|b| *b == 0)
            })
    }

    /// What would survive a crash that lost every unflushed write.
    pub fn durable_contents(&self, device: DeviceId, offset_bytes: u64, len: usize) -> Vec<u8> {
        self.disks[device.0 as usize].durable_bytes(offset_bytes, len)
    }

    /// Write straight to the durable image, bypassing the engine (a test's setup,
    /// or another program scribbling on the disk: `dd` over a header).
    /// Unflushed writes of the engine's own stay pending, and still read on top.
    pub fn scribble(&mut self, device: DeviceId, offset_bytes: u64, data: &[u8]) {
        let disk = self.disk_mut(device);
        let s = disk.sector();
        let start = offset_bytes / s * s;
        let end = (offset_bytes + data.len() as u64).div_ceil(s) * s;
        let mut region = disk.durable_bytes(start, (end - start) as usize);
        copy_overlap(&mut region, start, data, offset_bytes);
        disk.make_durable(start, &region);
    }

    /// Flip one bit of stored data (bit rot). The reader is not told.
    pub fn rot(&mut self, device: DeviceId, offset_bytes: u64, bit: u8) {
        assert!(bit < 8, "invariant: a bit of a byte");
        let mut byte = self.durable_contents(device, offset_bytes, 1);
        byte[0] ^= 1 << bit;
        self.scribble(device, offset_bytes, &byte);
        self.events.push(FaultEvent::BitRot {
            device,
            offset_bytes,
            bit,
        });
    }

    /// Faults injected so far.
    pub fn events(&self) -> &[FaultEvent] {
        &self.events
    }

    /// Crash: each pending write is kept, lost or torn per `policy`; completions
    /// not yet popped are lost. The engine carries on as after a reboot.
    pub fn crash(&mut self, policy: CrashPolicy) -> CrashReport {
        let mut report = CrashReport {
            completions_lost: self.in_flight.len() + self.ready.len(),
            ..CrashReport::default()
        };
        self.in_flight.clear();
        self.waiting.clear();
        self.flushes.clear();
        self.ready.clear();
        let now_ns = self.now_ns;
        for d in 0..self.disks.len() {
            let pending = std::mem::take(&mut self.disks[d].pending);
            let unit = u64::from(
                self.disks[d]
                    .geometry
                    .physical_sector_bytes
                    .max(self.disks[d].geometry.logical_sector_bytes),
            );
            for write in pending {
                let roll = self.rng.next_u64() % PER_MILLION;
                let durable = write.fua && write.completes_at_ns <= now_ns;
                if durable || roll < u64::from(policy.keep_per_million) {
                    report.kept += 1;
                    self.disks[d].land(write.offset_bytes, &write.data, 0, write.data.len());
                } else if roll
                    < u64::from(policy.keep_per_million) + u64::from(policy.tear_per_million)
                {
                    report.torn += 1;
                    // Each physical sector (the device's atomic unit, aligned
                    // on the device) independently survives or not.
                    let end = write.offset_bytes + write.data.len();
                    let mut at = write.offset_bytes;
                    while at < end {
                        let next = ((at / unit + 1) * unit).min(end);
                        if self.rng.next_u64().is_multiple_of(2) {
                            let from = at - write.offset_bytes;
                            self.disks[d].land(at, &write.data, from, next - at);
                        }
                        at = next;
                    }
                } else {
                    report.lost += 1;
                }
            }
        }
        report
    }

    /// Complete requests in due order until `min_completions` are ready (or
    /// none is left), but none due after `deadline_ns`; false if it stopped
    /// at the deadline. The shared clock, if any, follows.
    fn wait_until(&mut self, min_completions: usize, deadline_ns: u64) -> bool {
        let target = min_completions.min(self.in_flight());
        let mut reached = true;
        while self.ready.len() < target {
            let Some(&Reverse((due_ns, sequence))) = self.in_flight.peek() else {
                break;
            };
            if due_ns > deadline_ns {
                reached = false;
                break;
            }
            assert!(
                due_ns != NEVER,
                "invariant: a wait for a hung disk's request with no I/O timeout set would hang for ever (seed {})",
                self.seed
            );
            self.in_flight.pop();
            self.now_ns = self.now_ns.max(due_ns);
            if let Some((disk, issued_at_ns)) = self.flushes.remove(&sequence) {
                self.disks[disk].flush(issued_at_ns);
            }
            let completion = self
                .waiting
                .remove(&sequence)
                .expect("invariant: every in-flight entry has its completion");
            if matches!(completion.result, Err(IoError::TimedOut { .. })) {
                self.timed_out += 1;
            }
            self.ready.push_back(completion);
        }
        if let Some(clock) = &self.clock {
            clock.advance_to(self.now_ns);
        }
        reached
    }

    fn chance(&mut self, per_million: u32) -> bool {
        per_million > 0 && self.rng.next_u64() % PER_MILLION < u64::from(per_million)
    }

    /// Hold `completion` until the clock reaches `completes_at_ns`, after
    /// every completion queued before it for the same time (its sequence
    /// number is the next one).
    fn queue(&mut self, completes_at_ns: u64, completion: Completion) {
        self.sequence += 1;
        self.in_flight
            .push(Reverse((completes_at_ns, self.sequence)));
        self.waiting.insert(self.sequence, completion);
    }

    /// Carry out `op` now; it completes at `completes_at_ns`.
    fn perform(
        &mut self,
        device: DeviceId,
        op: &mut Op,
        completes_at_ns: u64,
    ) -> Result<u64, IoError> {
        let geometry = self
            .disks
            .get(device.0 as usize)
            .ok_or(IoError::UnknownDevice(device))?
            .geometry
            .clone();
        validate(&geometry, op)?;
        let kind = op.kind();
        let (offset_bytes, len_bytes) = op.range();
        let at = Span {
            device,
            kind,
            offset_bytes,
            len_bytes,
        };
        if self.disks[device.0 as usize].lost {
            return Err(at.os(ENXIO));
        }
        match op {
            Op::Read { buf, .. } => self.read_now(at, &geometry, buf)?,
            Op::Write { buf, fua, .. } => {
                self.write_now(at, &geometry, buf, *fua, completes_at_ns)?;
            }
            Op::Flush => {
                // Takes effect when it completes (see wait()).
                self.stats.device_requests += 1;
            }
            Op::Discard { .. } => {
                self.stats.device_requests += 1;
                let stale = self.disks[device.0 as usize].faults.discard_reads_stale
                    || matches!(
                        geometry.discard,
                        DiscardSupport::Supported {
                            reads_zeroes: false,
                            ..
                        }
                    );
                if !stale {
                    self.zero(device, offset_bytes, len_bytes, completes_at_ns);
                }
            }
            Op::WriteZeroes { .. } => {
                self.stats.device_requests += 1;
                self.zero(device, offset_bytes, len_bytes, completes_at_ns);
            }
        }
        Ok(len_bytes)
    }

    /// A read `at` into `buf`: failed by an injected read error, else
    /// copied from the disk as it is now, a piece per largest transfer.
    fn read_now(
        &mut self,
        at: Span,
        geometry: &Geometry,
        buf: &mut AlignedBuf,
    ) -> Result<(), IoError> {
        let (device, offset_bytes, len_bytes) = (at.device, at.offset_bytes, at.len_bytes);
        let faults = &self.disks[device.0 as usize].faults;
        let ranged = overlaps(&faults.read_error_ranges, offset_bytes, len_bytes);
        let rate = faults.read_error_per_million;
        if ranged || self.chance(rate) {
            self.events.push(FaultEvent::ReadError {
                device,
                offset_bytes,
            });
            return Err(at.os(EIO));
        }
        let max_piece = geometry.max_transfer_aligned_bytes();
        for (start, len) in pieces(len_bytes, max_piece) {
            assert!(
                len <= u64::from(geometry.max_transfer_bytes),
                "invariant: piece within max transfer"
            );
            self.stats.device_requests += 1;
            self.disks[device.0 as usize].current_into(
                offset_bytes + start,
                &mut buf[start as usize..(start + len) as usize],
                false,
            );
        }
        self.stats.bytes_read += len_bytes;
        Ok(())
    }

    /// A write `at` of `buf`: failed by an injected write error, maybe
    /// misdirected, else pending on the disk (volatile until flushed,
    /// unless `fua`) a piece per largest transfer, done at `completes_at_ns`.
    fn write_now(
        &mut self,
        at: Span,
        geometry: &Geometry,
        buf: &AlignedBuf,
        fua: bool,
        completes_at_ns: u64,
    ) -> Result<(), IoError> {
        let (device, offset_bytes, len_bytes) = (at.device, at.offset_bytes, at.len_bytes);
        let faults = self.disks[device.0 as usize].faults.clone();
        if overlaps(&faults.write_error_ranges, offset_bytes, len_bytes)
            || self.chance(faults.write_error_per_million)
        {
            self.events.push(FaultEvent::WriteError {
                device,
                offset_bytes,
            });
            return Err(at.os(EIO));
        }
        let mut target = offset_bytes;
        if self.chance(faults.misdirect_per_million) {
            let sector = u64::from(geometry.logical_sector_bytes);
            let slots = (geometry.size_bytes - len_bytes) / sector + 1;
            let landed = (self.rng.next_u64() % slots) * sector;
            if landed != offset_bytes {
                target = landed;
                self.events.push(FaultEvent::Misdirected {
                    device,
                    intended_bytes: offset_bytes,
                    landed_bytes: landed,
                    len_bytes,
                });
            }
        }
        let max_piece = geometry.max_transfer_aligned_bytes();
        for (start, len) in pieces(len_bytes, max_piece) {
            assert!(
                len <= u64::from(geometry.max_transfer_bytes),
                "invariant: piece within max transfer"
            );
            self.stats.device_requests += 1;
            let piece = &buf[start as usize..(start + len) as usize];
            // A piece of zeros is kept as its length (a zero-fill
            // writes hundreds of MiB): it reads, lands and tears
            // the same.
            let data = if all_zeros(piece) {
                Payload::Zeros(len)
            } else {
                Payload::Bytes(piece.to_vec())
            };
            self.disks[device.0 as usize].pending.push(PendingWrite {
                offset_bytes: target + start,
                data,
                fua,
                completes_at_ns,
            });
        }
        self.stats.bytes_written += len_bytes;
        Ok(())
    }

    fn zero(&mut self, device: DeviceId, offset_bytes: u64, len_bytes: u64, completes_at_ns: u64) {
        // Zeroing is a write like any other: volatile until flushed. Large ranges
        // are recorded in 1 MiB pieces to bound each record.
        for (start, len) in pieces(len_bytes, 1 << 20) {
            self.disks[device.0 as usize].pending.push(PendingWrite {
                offset_bytes: offset_bytes + start,
                data: Payload::Zeros(len),
                fua: false,
                completes_at_ns,
            });
        }
    }
}

impl IoEngine for SimEngine {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        self.disks.get(device.0 as usize).map(|d| &d.geometry)
    }

    fn submit(&mut self, mut request: Request) -> Result<(), SubmitError> {
        if self.in_flight() >= self.depth_max {
            return Err(SubmitError::QueueFull(request));
        }
        self.stats.requests += 1;
        if let Some(clock) = &self.clock {
            self.now_ns = self.now_ns.max(clock.now_ns());
        }
        let latency = self.latency_ns.start
            + self.rng.next_u64() % (self.latency_ns.end - self.latency_ns.start);
        let mut completes_at_ns = self.now_ns + latency;
        let kind = request.op.kind();
        if self.is_hung(request.device) {
            // Nothing happens on the disk; the caller hears at its timeout.
            let (offset_bytes, len_bytes) = request.op.range();
            completes_at_ns = self
                .io_timeout_ns
                .map_or(NEVER, |t| self.now_ns.saturating_add(t));
            let timeout_ms = self.io_timeout_ns.unwrap_or(0) / 1_000_000;
            self.queue(
                completes_at_ns,
                Completion {
                    device: request.device,
                    tag: request.tag,
                    kind,
                    result: Err(IoError::TimedOut {
                        kind,
                        offset_bytes,
                        len_bytes,
                        timeout_ms,
                    }),
                    buf: None,
                },
            );
            return Ok(());
        }
        let result = self.perform(request.device, &mut request.op, completes_at_ns);
        if kind == OpKind::Flush && result.is_ok() {
            self.flushes
                .insert(self.sequence + 1, (request.device.0 as usize, self.now_ns));
        }
        let buf: Option<AlignedBuf> = match request.op {
            Op::Read { buf, .. } | Op::Write { buf, .. } => Some(buf),
            _ => None,
        };
        self.queue(
            completes_at_ns,
            Completion {
                device: request.device,
                tag: request.tag,
                kind,
                result,
                buf,
            },
        );
        Ok(())
    }

    fn wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        self.wait_until(min_completions, u64::MAX);
        Ok(())
    }

    fn wait_timeout(
        &mut self,
        min_completions: usize,
        timeout: std::time::Duration,
    ) -> Result<(), IoError> {
        let Some(clock) = &self.clock else {
            return self.wait(min_completions);
        };
        let now = self.now_ns.max(clock.now_ns());
        let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let deadline = now.saturating_add(timeout_ns);
        if !self.wait_until(min_completions, deadline) {
            self.now_ns = self.now_ns.max(deadline);
            if let Some(clock) = &self.clock {
                clock.advance_to(self.now_ns);
            }
        }
        Ok(())
    }

    fn pop_completion(&mut self) -> Option<Completion> {
        self.ready.pop_front()
    }

    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.io_timeout_ns = timeout.map(|t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX));
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len() + self.ready.len()
    }

    fn depth_max(&self) -> usize {
        self.depth_max
    }

    fn stats(&self) -> EngineStats {
        self.stats
    }
}

/// Geometry for a simulated disk: `size_bytes`, logical/physical sectors, a
/// maximum transfer, and discard that reads back zeros.
pub fn geometry(size_bytes: u64, logical: u32, physical: u32, max_transfer_bytes: u32) -> Geometry {
    Geometry {
        size_bytes,
        logical_sector_bytes: logical,
        physical_sector_bytes: physical,
        max_transfer_bytes,
        discard: DiscardSupport::Supported {
            granularity_bytes: physical,
            reads_zeroes: true,
        },
        rotational: None,
    }
}

/// Wraps the simulator and "kills the process" after a budget of write, flush,
/// discard or write-zeroes requests: every later request fails, as if nothing
/// after that point ran. The budget is shared ([`CrashAfter::budget`]) so a test
/// can re-arm it while the engine is lent out.
pub struct CrashAfter {
    pub inner: SimEngine,
    budget: Budget,
    /// Past the budget, report success and do nothing (see [`CrashAfter::vanishing`]).
    vanish: bool,
    vanished: VecDeque<Completion>,
}

impl CrashAfter {
    /// Past the budget, requests fail (ENXIO).
    pub fn new(inner: SimEngine, budget: usize) -> Self {
        Self {
            inner,
            budget: Budget(std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(
                budget,
            ))),
            vanish: false,
            vanished: VecDeque::new(),
        }
    }

    /// Past the budget, requests report success and change nothing: the process
    /// is dead from that point, so the code under test sees no error it would
    /// react to (a disk taken offline, say) — what it does afterwards simply
    /// never happens. Pair with [`SimEngine::crash`].
    pub fn vanishing(inner: SimEngine, budget: usize) -> Self {
        Self {
            vanish: true,
            ..Self::new(inner, budget)
        }
    }

    /// The shared budget: set it to `usize::MAX` for "never crash".
    pub fn budget(&self) -> Budget {
        self.budget.clone()
    }
}

/// The requests a [`CrashAfter`] has left before it "crashes", shared with the
/// test that arms it.
#[derive(Debug, Clone)]
pub struct Budget(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Budget {
    pub fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
    pub fn set(&self, left: usize) {
        self.0.store(left, std::sync::atomic::Ordering::SeqCst);
    }
}

impl IoEngine for CrashAfter {
    fn name(&self) -> &'static str {
        "sim-crash-after"
    }
    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        self.inner.geometry(device)
    }
    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        let mutates = !matches!(request.op, Op::Read { .. });
        if mutates {
            if self.budget.get() == 0 && self.vanish {
                let len = match &request.op {
                    Op::Write { buf, .. } => buf.len() as u64,
                    Op::Discard { len_bytes, .. } | Op::WriteZeroes { len_bytes, .. } => *len_bytes,
                    _ => 0,
                };
                let kind = request.op.kind();
                let buf = match request.op {
                    Op::Write { buf, .. } => Some(buf),
                    _ => None,
                };
                self.vanished.push_back(Completion {
                    device: request.device,
                    tag: request.tag,
                    kind,
                    result: Ok(len),
                    buf,
                });
                return Ok(());
            }
            if self.budget.get() == 0 {
                return self.inner.submit(Request {
                    device: DeviceId(9999),
                    ..request
                });
            }
            self.budget.set(self.budget.get() - 1);
        }
        self.inner.submit(request)
    }
    fn wait(&mut self, min: usize) -> Result<(), IoError> {
        self.inner.wait(min.saturating_sub(self.vanished.len()))
    }
    fn pop_completion(&mut self) -> Option<Completion> {
        self.vanished
            .pop_front()
            .or_else(|| self.inner.pop_completion())
    }
    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.inner.set_io_timeout(timeout);
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.vanished.len()
    }
    fn depth_max(&self) -> usize {
        self.inner.depth_max()
    }
    fn stats(&self) -> EngineStats {
        self.inner.stats()
    }
}

/// A disk that hangs for a while, in simulated time: the `at`-th request
/// submitted (counting from 0) holds its submitter for `stall` of `clock`'s
/// time before it goes through, as a device that stops answering for half a
/// second does. For testing tools that must *see* a stall rather than wait
/// politely through it (the workload engine's open-loop latency, which counts
/// from each I/O's intended start). The inner engine should keep time on the
/// same clock ([`SimEngine::with_clock`]).
pub struct Stall<E> {
    inner: E,
    at: u64,
    stall: std::time::Duration,
    clock: SimClock,
    submitted: u64,
}

impl<E: IoEngine> Stall<E> {
    pub fn new(inner: E, at: u64, stall: std::time::Duration, clock: SimClock) -> Self {
        Self {
            inner,
            at,
            stall,
            clock,
            submitted: 0,
        }
    }

    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: IoEngine> IoEngine for Stall<E> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        self.inner.geometry(device)
    }

    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        if self.submitted == self.at {
            self.clock.advance(self.stall);
        }
        self.submitted += 1;
        self.inner.submit(request)
    }

    fn wait(&mut self, min: usize) -> Result<(), IoError> {
        self.inner.wait(min)
    }

    fn wait_timeout(&mut self, min: usize, timeout: std::time::Duration) -> Result<(), IoError> {
        self.inner.wait_timeout(min, timeout)
    }

    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.inner.set_io_timeout(timeout);
    }

    fn pop_completion(&mut self) -> Option<Completion> {
        self.inner.pop_completion()
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    fn depth_max(&self) -> usize {
        self.inner.depth_max()
    }

    fn stats(&self) -> EngineStats {
        self.inner.stats()
    }
}
