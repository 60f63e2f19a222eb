//! What the service reports about itself: per group its disks' states and
//! its space, the I/O its file system served (operations, bytes, errors,
//! latency histograms), and the long operations' progress — as Prometheus
//! text (`--metrics ADDR`) and as `cairn status` (`docs/serve.md`,
//! "Metrics and status").
//!
//! The counters are the file system's: what a database asked of a group
//! and how long the service took to answer (from the request reaching the
//! service to its reply). Per-disk I/O counters are not kept yet (they
//! belong in the data plane).
//!
//! Shared state: [`IoStats`] is atomics only, written by the FUSE workers
//! and read by whoever reports; nothing here takes a lock but the groups'
//! own `meta`, briefly, to read their disks and space.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::{Held, ServeError};

/// Upper bounds of the latency buckets, in microseconds (the last bucket,
/// `+Inf`, is implicit).
pub const LATENCY_BUCKETS_US: [u64; 12] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 1_000_000,
];

/// One kind of request's counters.
#[derive(Default)]
pub struct OpStats {
    bytes: AtomicU64,
    errors: AtomicU64,
    /// Per bucket of [`LATENCY_BUCKETS_US`], then `+Inf`: not cumulative.
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    micros: AtomicU64,
}

impl OpStats {
    /// A request served: its bytes, whether it failed, how long it took.
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

    fn snapshot(&self) -> OpSnapshot {
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

/// The file system's I/O on one group.
#[derive(Default)]
pub struct IoStats {
    pub reads: OpStats,
    pub writes: OpStats,
    pub syncs: OpStats,
}

/// Counters of one kind of request, as read at one moment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpSnapshot {
    pub count: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Requests that took at most each bound of [`LATENCY_BUCKETS_US`],
    /// then all of them.
    pub latency_buckets_cumulative: Vec<u64>,
    pub latency_micros_sum: u64,
}

/// A disk as the status shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskStatus {
    pub number: u16,
    pub label: String,
    pub failgroup: String,
    pub state: String,
    pub total_aus: u64,
    pub free_aus: Option<u64>,
    pub stale_aus: u64,
}

/// A group as the status shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupStatus {
    pub name: String,
    pub redundancy: String,
    pub total_mb: u64,
    pub free_mb: u64,
    pub usable_file_mb: i64,
    pub offline_disks: usize,
    pub disks: Vec<DiskStatus>,
    pub reads: OpSnapshot,
    pub writes: OpSnapshot,
    pub syncs: OpSnapshot,
}

/// What the service holds and has done, at one moment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub pid: u32,
    pub uptime_seconds: u64,
    pub groups: Vec<GroupStatus>,
    pub operations: Vec<cairn_store::ops::OpStatus>,
}

impl Status {
    /// Read the groups (their disks and space, briefly under `meta`), the
    /// file system's counters and the long operations' status files.
    pub fn take(held: &[Held], started: Instant) -> Self {
        let groups = held
            .iter()
            .map(|h| {
                let (disks, space, redundancy) = h
                    .group
                    .meta(|g| (g.disks(), g.space(), g.redundancy().as_str().to_string()))
                    .unwrap_or_else(|_| (Vec::new(), Default::default(), "?".into()));
                GroupStatus {
                    name: h.name.clone(),
                    redundancy,
                    total_mb: space.total_mb,
                    free_mb: space.free_mb,
                    usable_file_mb: space.usable_file_mb,
                    offline_disks: space.offline_disks,
                    disks: disks
                        .into_iter()
                        .map(|d| DiskStatus {
                            number: d.number,
                            label: d.label,
                            failgroup: d.failgroup,
                            state: if d.dropping {
                                "DROPPING".into()
                            } else {
                                d.state.as_str().to_string()
                            },
                            total_aus: d.total_aus,
                            free_aus: d.free_aus,
                            stale_aus: d.stale_aus,
                        })
                        .collect(),
                    reads: h.stats.reads.snapshot(),
                    writes: h.stats.writes.snapshot(),
                    syncs: h.stats.syncs.snapshot(),
                }
            })
            .collect();
        let run_dir = cairn_store::group_lock::run_dir();
        let operations = held
            .iter()
            .flat_map(|h| cairn_store::ops::list(&run_dir, Some(&h.name)))
            .collect();
        Self {
            pid: std::process::id(),
            uptime_seconds: started.elapsed().as_secs(),
            groups,
            operations,
        }
    }

    /// Prometheus text exposition (format 0.0.4).
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line("# HELP cairn_up The service is up.".into());
        line("# TYPE cairn_up gauge".into());
        line("cairn_up 1".into());
        line("# HELP cairn_uptime_seconds Seconds since the service started.".into());
        line("# TYPE cairn_uptime_seconds counter".into());
        line(format!("cairn_uptime_seconds {}", self.uptime_seconds));
        line("# HELP cairn_group_space_mb A group's space: total, free, usable for files after mirroring.".into());
        line("# TYPE cairn_group_space_mb gauge".into());
        for g in &self.groups {
            let n = label(&g.name);
            line(format!(
                "cairn_group_space_mb{{group=\"{n}\",kind=\"total\"}} {}",
                g.total_mb
            ));
            line(format!(
                "cairn_group_space_mb{{group=\"{n}\",kind=\"free\"}} {}",
                g.free_mb
            ));
            line(format!(
                "cairn_group_space_mb{{group=\"{n}\",kind=\"usable\"}} {}",
                g.usable_file_mb
            ));
        }
        line("# HELP cairn_group_offline_disks Disks of a group not in use.".into());
        line("# TYPE cairn_group_offline_disks gauge".into());
        for g in &self.groups {
            line(format!(
                "cairn_group_offline_disks{{group=\"{}\"}} {}",
                label(&g.name),
                g.offline_disks
            ));
        }
        line("# HELP cairn_disk_state A disk's state: 1 for the state it is in.".into());
        line("# TYPE cairn_disk_state gauge".into());
        for g in &self.groups {
            for d in &g.disks {
                line(format!(
                    "cairn_disk_state{{group=\"{}\",disk=\"{}\",failgroup=\"{}\",state=\"{}\"}} 1",
                    label(&g.name),
                    label(&d.label),
                    label(&d.failgroup),
                    label(&d.state)
                ));
            }
        }
        line(
            "# HELP cairn_disk_stale_aus AUs a disk's copies missed (resynced when it comes back)."
                .into(),
        );
        line("# TYPE cairn_disk_stale_aus gauge".into());
        for g in &self.groups {
            for d in &g.disks {
                line(format!(
                    "cairn_disk_stale_aus{{group=\"{}\",disk=\"{}\"}} {}",
                    label(&g.name),
                    label(&d.label),
                    d.stale_aus
                ));
            }
        }
        for (what, help) in [
            ("requests", "Requests the file system served."),
            ("bytes", "Bytes the file system read or wrote."),
            ("errors", "Requests that failed."),
        ] {
            line(format!("# HELP cairn_fs_{what}_total {help}"));
            line(format!("# TYPE cairn_fs_{what}_total counter"));
            for g in &self.groups {
                for (op, s) in [
                    ("read", &g.reads),
                    ("write", &g.writes),
                    ("fsync", &g.syncs),
                ] {
                    let v = match what {
                        "requests" => s.count,
                        "bytes" => s.bytes,
                        _ => s.errors,
                    };
                    line(format!(
                        "cairn_fs_{what}_total{{group=\"{}\",op=\"{op}\"}} {v}",
                        label(&g.name)
                    ));
                }
            }
        }
        line("# HELP cairn_fs_latency_seconds Time from a request reaching the service to its answer.".into());
        line("# TYPE cairn_fs_latency_seconds histogram".into());
        for g in &self.groups {
            for (op, s) in [
                ("read", &g.reads),
                ("write", &g.writes),
                ("fsync", &g.syncs),
            ] {
                let n = label(&g.name);
                for (k, c) in s.latency_buckets_cumulative.iter().enumerate() {
                    let le = LATENCY_BUCKETS_US
                        .get(k)
                        .map_or_else(|| "+Inf".to_string(), |us| format!("{}", *us as f64 / 1e6));
                    line(format!("cairn_fs_latency_seconds_bucket{{group=\"{n}\",op=\"{op}\",le=\"{le}\"}} {c}"));
                }
                line(format!(
                    "cairn_fs_latency_seconds_sum{{group=\"{n}\",op=\"{op}\"}} {}",
                    s.latency_micros_sum as f64 / 1e6
                ));
                line(format!(
                    "cairn_fs_latency_seconds_count{{group=\"{n}\",op=\"{op}\"}} {}",
                    s.count
                ));
            }
        }
        line("# HELP cairn_operation_aus Progress of a long operation (resync, rebalance, scrub): AUs done and in all.".into());
        line("# TYPE cairn_operation_aus gauge".into());
        for o in &self.operations {
            let (g, p) = (label(&o.group), label(&o.pass));
            line(format!(
                "cairn_operation_aus{{group=\"{g}\",pass=\"{p}\",kind=\"done\"}} {}",
                o.aus_done
            ));
            line(format!(
                "cairn_operation_aus{{group=\"{g}\",pass=\"{p}\",kind=\"total\"}} {}",
                o.aus_total
            ));
        }
        out
    }
}

/// A label value as the exposition format wants it.
fn label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The longest request head the metrics endpoint reads.
const REQUEST_HEAD_MAX: usize = 8 << 10;

/// The longest a request may take to arrive, and its answer to go.
const REQUEST_TIME_MAX: Duration = Duration::from_secs(5);

/// The metrics endpoint: plain HTTP on `addr` (`GET /metrics`), one
/// connection at a time on a thread of its own; anything else gets a 404
/// or 400, and the service goes on.
pub(crate) struct Endpoint {
    stopping: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    pub(crate) fn start(addr: &str, held: Vec<Held>, started: Instant) -> Result<Self, ServeError> {
        let listener = TcpListener::bind(addr).map_err(|e| {
            ServeError::Invalid(format!(
                "--metrics {addr}: {e}; give a free address, such as 127.0.0.1:9464"
            ))
        })?;
        let bound = listener
            .local_addr()
            .map_err(|e| ServeError::Invalid(format!("--metrics {addr}: {e}")))?;
        let stopping = Arc::new(AtomicBool::new(false));
        let thread = {
            let stopping = stopping.clone();
            std::thread::Builder::new()
                .name("cairn-metrics".into())
                .spawn(move || {
                    for stream in listener.incoming() {
                        if stopping.load(Ordering::SeqCst) {
                            return;
                        }
                        if let Ok(s) = stream {
                            answer(s, &held, started);
                        }
                    }
                })
                .map_err(|e| ServeError::Invalid(format!("cannot start a thread: {e}")))?
        };
        tracing::info!(address = %bound, "metrics at http://{bound}/metrics");
        Ok(Self {
            stopping,
            addr: bound,
            thread: Some(thread),
        })
    }

    pub(crate) fn stop(self) {
        drop(self);
    }
}

impl Drop for Endpoint {
    /// Stopped on every way out (a service that could not start too): its
    /// thread holds the groups.
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the accepting thread.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One HTTP exchange: `GET /metrics` gets the exposition.
fn answer(mut stream: TcpStream, held: &[Held], started: Instant) {
    // One deadline for the whole request: a client that trickles bytes
    // does not hold the endpoint (nor a stopping service) for longer.
    let deadline = Instant::now() + REQUEST_TIME_MAX;
    let _ = stream.set_write_timeout(Some(REQUEST_TIME_MAX));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < REQUEST_HEAD_MAX {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let first = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let first = String::from_utf8_lossy(first);
    let mut parts = first.split_whitespace();
    let (status, body) = match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics")) => ("200 OK", Status::take(held, started).prometheus()),
        (Some("GET"), Some(_)) => (
            "404 Not Found",
            "not found: the metrics are at /metrics\n".into(),
        ),
        _ => ("400 Bad Request", "bad request\n".into()),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
