//! Per-device I/O counters (requests, bytes, errors, a latency histogram),
//! and [`Counted`], an engine that records the requests of the devices it
//! is told to count into them.
//!
//! The counters are atomics only: written by the thread that owns an
//! engine, read by whoever reports, with no lock. A completion's latency
//! is from its `submit` to its `pop_completion`, as the engine's user sees
//! it (queueing in the engine included).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::device::DeviceFile;
use crate::engine::{Completion, DeviceId, EngineStats, IoEngine, OpKind, Request, SubmitError};
use crate::geometry::Geometry;
use crate::IoError;

/// Upper bounds of the latency buckets, in microseconds (the last bucket,
/// `+Inf`, is implicit).
pub const LATENCY_BUCKETS_US: [u64; 12] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 1_000_000,
];

/// One kind of request's counters.
///
/// A histogram of its own, beside the test kit's HDR one and the metrics
/// crate's, because neither records as cheaply from every data handle at
/// once: `record` is a few relaxed atomic adds on counters the handles of
/// a device share. `prometheus_client`'s `Histogram::observe` takes a
/// mutex per observation, shared by those handles. `hdrhistogram` records
/// through `&mut`: shared, it needs the same lock; per handle (its `sync`
/// recorders), a scrape waits for every recorder to record again, and an
/// idle one holds it up, as a disk without I/O would. HDR's buckets would
/// also round a latency near a bound to its significant digits, and hold
/// kilobytes against these 13 counters. The exposition reads a snapshot,
/// so it needs no histogram type of its own (`cairn_serve::metrics`).
#[derive(Default)]
pub struct OpStats {
    bytes: AtomicU64,
    errors: AtomicU64,
    /// Per bucket of [`LATENCY_BUCKETS_US`], then `+Inf`: not cumulative.
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    micros: AtomicU64,
}

impl OpStats {
    /// A request done: its bytes, whether it failed, how long it took.
    pub fn record(&self, bytes: u64, failed: bool, took: Duration) {
        let us = took.as_micros().min(u128::from(u64::MAX)) as u64;
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if failed {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        let bucket = LATENCY_BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(LATENCY_BUCKETS_US.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(us, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> OpSnapshot {
        let mut cumulative = Vec::with_capacity(self.buckets.len());
        let mut sum = 0;
        for b in &self.buckets {
            sum += b.load(Ordering::Relaxed);
            cumulative.push(sum);
        }
        OpSnapshot {
            // The buckets' total, so that `_count` equals the `+Inf`
            // bucket even while requests are being recorded.
            count: sum,
            bytes: self.bytes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            latency_buckets_cumulative: cumulative,
            latency_micros_sum: self.micros.load(Ordering::Relaxed),
        }
    }
}

/// Counters of one kind of request, as read at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpSnapshot {
    pub count: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Requests that took at most each bound of [`LATENCY_BUCKETS_US`],
    /// then all of them.
    pub latency_buckets_cumulative: Vec<u64>,
    pub latency_micros_sum: u64,
}

impl Default for OpSnapshot {
    /// Nothing counted: every bucket there, at zero (a histogram without
    /// buckets is not one).
    fn default() -> Self {
        OpStats::default().snapshot()
    }
}

/// One device's I/O.
#[derive(Default)]
pub struct DeviceIo {
    pub reads: OpStats,
    pub writes: OpStats,
    /// Cache flushes.
    pub flushes: OpStats,
    /// Discards and write-zeroes, with their ranges' bytes.
    pub discards: OpStats,
}

impl DeviceIo {
    pub fn snapshot(&self) -> DeviceIoSnapshot {
        DeviceIoSnapshot {
            reads: self.reads.snapshot(),
            writes: self.writes.snapshot(),
            flushes: self.flushes.snapshot(),
            discards: self.discards.snapshot(),
        }
    }
}

/// A device's I/O, as read at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeviceIoSnapshot {
    pub reads: OpSnapshot,
    pub writes: OpSnapshot,
    pub flushes: OpSnapshot,
    pub discards: OpSnapshot,
}

/// An engine that counts the requests to some of its devices (each into
/// the [`DeviceIo`] it was given for it) and passes everything to the
/// engine inside. A completion is matched to its submission by device and
/// tag, first in first out: callers that reuse a tag for requests in
/// flight at once to one device (none in Cairn's data plane) get their
/// latencies paired in order, not exactly.
pub struct Counted {
    inner: Box<dyn IoEngine>,
    counters: HashMap<DeviceId, Arc<DeviceIo>>,
    /// When each counted request in flight was submitted, by device and
    /// tag (in submission order, should two share a tag).
    started: HashMap<(DeviceId, u64), VecDeque<Instant>>,
}

impl Counted {
    pub fn new(inner: Box<dyn IoEngine>, counters: HashMap<DeviceId, Arc<DeviceIo>>) -> Self {
        Self {
            inner,
            counters,
            started: HashMap::new(),
        }
    }
}

impl IoEngine for Counted {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        self.inner.geometry(device)
    }

    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        let key = (request.device, request.tag);
        let counted = self.counters.contains_key(&request.device);
        let now = Instant::now();
        self.inner.submit(request)?;
        if counted {
            self.started.entry(key).or_default().push_back(now);
        }
        Ok(())
    }

    fn wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        self.inner.wait(min_completions)
    }

    fn wait_timeout(&mut self, min_completions: usize, timeout: Duration) -> Result<(), IoError> {
        self.inner.wait_timeout(min_completions, timeout)
    }

    fn set_io_timeout(&mut self, timeout: Option<Duration>) {
        self.inner.set_io_timeout(timeout);
    }

    fn pop_completion(&mut self) -> Option<Completion> {
        let c = self.inner.pop_completion()?;
        if let Some(io) = self.counters.get(&c.device) {
            let key = (c.device, c.tag);
            let since = match self.started.get_mut(&key) {
                Some(q) => {
                    let t = q.pop_front();
                    if q.is_empty() {
                        self.started.remove(&key);
                    }
                    t
                }
                None => None,
            };
            // Every counted request has its start; one without (it cannot
            // happen) is left out rather than counted as instant.
            if let Some(since) = since {
                let stats = match c.kind {
                    OpKind::Read => &io.reads,
                    OpKind::Write => &io.writes,
                    OpKind::Flush => &io.flushes,
                    OpKind::Discard | OpKind::WriteZeroes => &io.discards,
                };
                let bytes = c.result.as_ref().map_or(0, |n| *n);
                stats.record(bytes, c.result.is_err(), since.elapsed());
            }
        }
        Some(c)
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

    fn attach_file(&mut self, device: DeviceFile) -> Option<DeviceId> {
        self.inner.attach_file(device)
    }

    fn detach_file(&mut self, device: DeviceId) -> Option<DeviceFile> {
        let file = self.inner.detach_file(device)?;
        self.counters.remove(&device);
        self.started.retain(|(d, _), _| *d != device);
        Some(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync_engine::SyncEngine;
    use crate::{AlignedBuf, FileEngine, Op};

    #[test]
    fn counts_reads_writes_and_flushes_of_the_counted_device_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut engine = SyncEngine::new(8);
        let mut ids = Vec::new();
        for name in ["a", "b"] {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![0u8; 1 << 20]).expect("file");
            let file = DeviceFile::open(
                &path,
                crate::OpenMode::WRITE_EXCLUSIVE,
                &crate::host::Host::real(),
            )
            .expect("opens");
            ids.push(engine.attach(file));
        }
        let io = Arc::new(DeviceIo::default());
        let mut counted = Counted::new(Box::new(engine), HashMap::from([(ids[0], io.clone())]));
        for (device, tag) in [(ids[0], 1), (ids[1], 2)] {
            let buf = AlignedBuf::from_slice(&[7u8; 8192]);
            counted
                .execute(Request {
                    device,
                    tag,
                    op: Op::Write {
                        offset_bytes: 4096,
                        buf,
                        fua: false,
                    },
                })
                .expect("writes");
            counted
                .execute(Request {
                    device,
                    tag,
                    op: Op::Read {
                        offset_bytes: 0,
                        buf: AlignedBuf::zeroed(4096),
                    },
                })
                .expect("reads");
            counted
                .execute(Request {
                    device,
                    tag,
                    op: Op::Flush,
                })
                .expect("flushes");
        }
        // Past the end of the device: an error, counted as one.
        let failed = counted
            .execute(Request {
                device: ids[0],
                tag: 3,
                op: Op::Read {
                    offset_bytes: 1 << 30,
                    buf: AlignedBuf::zeroed(4096),
                },
            })
            .expect("completes");
        assert!(failed.result.is_err());
        let s = io.snapshot();
        assert_eq!(
            (s.writes.count, s.writes.bytes, s.writes.errors),
            (1, 8192, 0)
        );
        assert_eq!((s.reads.count, s.reads.bytes, s.reads.errors), (2, 4096, 1));
        assert_eq!(s.flushes.count, 1);
        assert_eq!(s.discards.count, 0);
        assert_eq!(s.reads.latency_buckets_cumulative.last(), Some(&2));
    }
}
