//! What the service reports about itself: per group its disks' states and
//! its space, the I/O its file system served (operations, bytes, errors,
//! latency histograms), and the long operations' progress — as Prometheus
//! text (`--metrics ADDR`) and as `cairn status` (`docs/serve.md`,
//! "Metrics and status").
//!
//! Two sets of counters: the file system's (what a database asked of a
//! group and how long the service took to answer, from the request
//! reaching the service to its reply), and per disk the data plane's
//! (each read, write, flush and discard a data handle sent to the disk and how long
//! it took, from submission to completion: `cairn_io::counted`).
//!
//! Shared state: [`IoStats`] is atomics only, written by the FUSE workers
//! and read by whoever reports; nothing here takes a lock but the groups'
//! own `meta`, briefly, to read their disks and space.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Held, ServeError};

pub use cairn_io::counted::{DeviceIoSnapshot, OpSnapshot, OpStats, LATENCY_BUCKETS_US};

/// The file system's I/O on one group.
#[derive(Default)]
pub struct IoStats {
    pub reads: OpStats,
    pub writes: OpStats,
    pub syncs: OpStats,
    /// `fallocate` with a mode: hole punches (a volume's discards) and
    /// zeroed ranges; bytes are the ranges' lengths.
    pub discards: OpStats,
}

pub use cairn_command::status::{DiskStatus, GroupStatus, Status, VolumeStatus};

/// The volumes exported from `mountpoint` (the service's mount).
pub fn volumes_exported(mountpoint: &Path) -> Vec<VolumeStatus> {
    crate::volume::exported(mountpoint)
        .into_iter()
        .map(|(device, file)| {
            let size = std::fs::read_to_string(Path::new("/sys/block").join(&device).join("size"))
                .unwrap_or_default();
            // Fields: reads, merges, sectors, ticks; writes …; in flight,
            // io_ticks, time in queue; discards …; flushes, ticks.
            let stat = crate::volume::counters(&device);
            let at = |i: usize| stat.get(i).copied().unwrap_or(0);
            let name = file
                .strip_prefix(mountpoint)
                .map(|p| format!("+{}", p.display()))
                .unwrap_or_else(|_| file.display().to_string());
            VolumeStatus {
                name,
                device: format!("/dev/{device}"),
                size_bytes: size.trim().parse::<u64>().unwrap_or(0) * 512,
                reads: at(0),
                read_bytes: at(2) * 512,
                writes: at(4),
                write_bytes: at(6) * 512,
                in_flight: at(8),
                busy_ms: at(9),
                discards: at(11),
                discard_bytes: at(13) * 512,
                flushes: at(15),
            }
        })
        .collect()
}

/// Read the groups (their disks and space, briefly under `meta`), the file
/// system's counters and the long operations' status files.
pub fn status_of(held: &[Held], started: Instant, mountpoint: &Path) -> Status {
    let groups = held
        .iter()
        .map(|h| {
            let (disks, space, redundancy, lowered, state_changes) = h
                .group
                .meta(|g| {
                    (
                        g.disks(),
                        g.space(),
                        g.redundancy().as_str().to_string(),
                        g.redundancy_lowered(),
                        g.disk_state_changes(),
                    )
                })
                .unwrap_or_else(|_| {
                    (
                        Vec::new(),
                        Default::default(),
                        "?".into(),
                        Default::default(),
                        Vec::new(),
                    )
                });
            let io = h.group.disk_io().unwrap_or_default();
            GroupStatus {
                name: h.name.clone(),
                redundancy,
                total_mb: space.total_mb,
                free_mb: space.free_mb,
                usable_file_mb: space.usable_file_mb,
                offline_disks: space.offline_disks,
                redundancy_lowered_extents: lowered.extents,
                redundancy_lowered_bytes: lowered.bytes,
                state_changes,
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
                        missing_copy_aus: d.missing_copy_aus,
                        io: io.get(&d.number).map_or_else(
                            || cairn_io::counted::DeviceIo::default().snapshot(),
                            |x| x.snapshot(),
                        ),
                    })
                    .collect(),
                reads: h.stats.reads.snapshot(),
                writes: h.stats.writes.snapshot(),
                syncs: h.stats.syncs.snapshot(),
                discards: h.stats.discards.snapshot(),
            }
        })
        .collect();
    let run_dir = cairn_store::group_lock::run_dir();
    let operations = held
        .iter()
        .flat_map(|h| cairn_store::ops::list(&run_dir, Some(&h.name)))
        .collect();
    Status {
        pid: std::process::id(),
        uptime_seconds: started.elapsed().as_secs(),
        groups,
        operations,
        volumes: volumes_exported(mountpoint),
    }
}

/// Prometheus text exposition (format 0.0.4) of a status.
pub fn prometheus(status: &Status) -> String {
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
    line(format!("cairn_uptime_seconds {}", status.uptime_seconds));
    line("# HELP cairn_group_space_mb A group's space: total, free, usable for files after mirroring.".into());
    line("# TYPE cairn_group_space_mb gauge".into());
    for g in &status.groups {
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
    for g in &status.groups {
        line(format!(
            "cairn_group_offline_disks{{group=\"{}\"}} {}",
            label(&g.name),
            g.offline_disks
        ));
    }
    line("# HELP cairn_group_redundancy_lowered_extents Extents held by fewer copies that can be read than their file asks (a disk not ONLINE, or a stale copy); 0 once resync or a rebuild restores them.".into());
    line("# TYPE cairn_group_redundancy_lowered_extents gauge".into());
    for g in &status.groups {
        line(format!(
            "cairn_group_redundancy_lowered_extents{{group=\"{}\"}} {}",
            label(&g.name),
            g.redundancy_lowered_extents
        ));
    }
    line(
        "# HELP cairn_group_redundancy_lowered_bytes Bytes of those extents, one copy each.".into(),
    );
    line("# TYPE cairn_group_redundancy_lowered_bytes gauge".into());
    for g in &status.groups {
        line(format!(
            "cairn_group_redundancy_lowered_bytes{{group=\"{}\"}} {}",
            label(&g.name),
            g.redundancy_lowered_bytes
        ));
    }
    line("# HELP cairn_disk_state A disk's state: 1 for the state it is in.".into());
    line("# TYPE cairn_disk_state gauge".into());
    for g in &status.groups {
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
    for g in &status.groups {
        for d in &g.disks {
            line(format!(
                "cairn_disk_stale_aus{{group=\"{}\",disk=\"{}\"}} {}",
                label(&g.name),
                label(&d.label),
                d.stale_aus
            ));
        }
    }
    line("# HELP cairn_disk_missing_copy_aus AUs of a disk's copies that serve no read now (all it holds while not ONLINE, its stale AUs when it is).".into());
    line("# TYPE cairn_disk_missing_copy_aus gauge".into());
    for g in &status.groups {
        for d in &g.disks {
            line(format!(
                "cairn_disk_missing_copy_aus{{group=\"{}\",disk=\"{}\"}} {}",
                label(&g.name),
                label(&d.label),
                d.missing_copy_aus
            ));
        }
    }
    line("# HELP cairn_disk_state_changes_total Changes of a disk's state since the service mounted its group, by the state it went to (ONLINE, SYNCING, OFFLINE, DROPPING, DROPPED); each is also one line of the log, saying why.".into());
    line("# TYPE cairn_disk_state_changes_total counter".into());
    for g in &status.groups {
        for c in &g.state_changes {
            line(format!(
                "cairn_disk_state_changes_total{{group=\"{}\",disk=\"{}\",to=\"{}\"}} {}",
                label(&g.name),
                label(&c.disk),
                label(&c.to),
                c.count
            ));
        }
    }
    let fs: Vec<(String, &OpSnapshot)> = status
        .groups
        .iter()
        .flat_map(|g| {
            let n = label(&g.name);
            [
                ("read", &g.reads),
                ("write", &g.writes),
                ("fsync", &g.syncs),
                ("discard", &g.discards),
            ]
            .map(|(op, s)| (format!("group=\"{n}\",op=\"{op}\""), s))
        })
        .collect();
    family(
        &mut line,
        "cairn_fs",
        (
            "Requests the file system served.",
            "Bytes the file system read or wrote.",
            "Requests that failed.",
            "Time from a request reaching the service to its answer.",
        ),
        &fs,
    );
    let disks: Vec<(String, &OpSnapshot)> = status
        .groups
        .iter()
        .flat_map(|g| {
            g.disks.iter().flat_map(move |d| {
                let (n, l) = (label(&g.name), label(&d.label));
                [
                    ("read", &d.io.reads),
                    ("write", &d.io.writes),
                    ("flush", &d.io.flushes),
                    ("discard", &d.io.discards),
                ]
                .map(|(op, s)| (format!("group=\"{n}\",disk=\"{l}\",op=\"{op}\""), s))
            })
        })
        .collect();
    family(
        &mut line,
        "cairn_disk_io",
        (
            "Requests the data plane sent to a disk (file data, resync, rebalance, scrub).",
            "Bytes the data plane read from or wrote to a disk.",
            "Disk requests that failed.",
            "Time from a disk request's submission to its completion.",
        ),
        &disks,
    );
    line("# HELP cairn_volume_io_requests_total Requests a volume's block device completed (the kernel's count since the attach).".into());
    line("# TYPE cairn_volume_io_requests_total counter".into());
    let vol = |v: &VolumeStatus, op: &str| {
        format!(
            "volume=\"{}\",device=\"{}\",op=\"{op}\"",
            label(&v.name),
            label(&v.device)
        )
    };
    for v in &status.volumes {
        for (op, n) in [
            ("read", v.reads),
            ("write", v.writes),
            ("discard", v.discards),
            ("flush", v.flushes),
        ] {
            line(format!(
                "cairn_volume_io_requests_total{{{}}} {n}",
                vol(v, op)
            ));
        }
    }
    line("# HELP cairn_volume_io_bytes_total Bytes a volume's block device read, wrote or discarded.".into());
    line("# TYPE cairn_volume_io_bytes_total counter".into());
    for v in &status.volumes {
        for (op, n) in [
            ("read", v.read_bytes),
            ("write", v.write_bytes),
            ("discard", v.discard_bytes),
        ] {
            line(format!("cairn_volume_io_bytes_total{{{}}} {n}", vol(v, op)));
        }
    }
    line("# HELP cairn_volume_in_flight Requests in flight on a volume's block device.".into());
    line("# TYPE cairn_volume_in_flight gauge".into());
    for v in &status.volumes {
        line(format!(
            "cairn_volume_in_flight{{volume=\"{}\",device=\"{}\"}} {}",
            label(&v.name),
            label(&v.device),
            v.in_flight
        ));
    }
    line("# HELP cairn_operation_aus Progress of a long operation (resync, rebalance, scrub): AUs done and in all.".into());
    line("# TYPE cairn_operation_aus gauge".into());
    for o in &status.operations {
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

/// One family of request counters: `PREFIX_requests_total`,
/// `PREFIX_bytes_total`, `PREFIX_errors_total` and the histogram
/// `PREFIX_latency_seconds`, a sample per (labels, snapshot).
fn family(
    line: &mut impl FnMut(String),
    prefix: &str,
    (requests, bytes, errors, latency): (&str, &str, &str, &str),
    series: &[(String, &OpSnapshot)],
) {
    for (what, help) in [("requests", requests), ("bytes", bytes), ("errors", errors)] {
        line(format!("# HELP {prefix}_{what}_total {help}"));
        line(format!("# TYPE {prefix}_{what}_total counter"));
        for (labels, s) in series {
            let v = match what {
                "requests" => s.count,
                "bytes" => s.bytes,
                _ => s.errors,
            };
            line(format!("{prefix}_{what}_total{{{labels}}} {v}"));
        }
    }
    line(format!("# HELP {prefix}_latency_seconds {latency}"));
    line(format!("# TYPE {prefix}_latency_seconds histogram"));
    for (labels, s) in series {
        for (k, c) in s.latency_buckets_cumulative.iter().enumerate() {
            let le = LATENCY_BUCKETS_US
                .get(k)
                .map_or_else(|| "+Inf".to_string(), |us| format!("{}", *us as f64 / 1e6));
            line(format!(
                "{prefix}_latency_seconds_bucket{{{labels},le=\"{le}\"}} {c}"
            ));
        }
        line(format!(
            "{prefix}_latency_seconds_sum{{{labels}}} {}",
            s.latency_micros_sum as f64 / 1e6
        ));
        line(format!(
            "{prefix}_latency_seconds_count{{{labels}}} {}",
            s.count
        ));
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
    pub(crate) fn start(
        addr: &str,
        held: Vec<Held>,
        started: Instant,
        mountpoint: PathBuf,
    ) -> Result<Self, ServeError> {
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
                            answer(s, &held, started, &mountpoint);
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
fn answer(mut stream: TcpStream, held: &[Held], started: Instant, mountpoint: &Path) {
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
        (Some("GET"), Some("/metrics")) => {
            ("200 OK", prometheus(&status_of(held, started, mountpoint)))
        }
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

#[cfg(test)]
mod tests;
