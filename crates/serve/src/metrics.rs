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
//!
//! The text is `prometheus-client`'s (its Prometheus text encoder, over a
//! [`Status`] taken at the scrape); the HTTP endpoint is this module's own
//! ([`Endpoint`] says why).

use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    prometheus_text, DescriptorEncoder, EncodeGaugeValue, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::error::ServeError;
use crate::held::Held;

pub use cairn_io::counted::{DeviceIoSnapshot, OpSnapshot, OpStats, LATENCY_BUCKETS_US};

pub use crate::io_stats::IoStats;
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

/// Prometheus text exposition (format 0.0.4) of a status, as
/// `prometheus-client` writes it: the snapshot is the one collector of a
/// registry made for this scrape.
pub fn prometheus(status: Status) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Exposition(status)));
    let mut out = String::new();
    prometheus_text::encode(&mut out, &registry)
        .expect("invariant: the encoder writes into a String, which takes any text");
    out
}

/// The families of the exposition, from one snapshot, in a fixed order.
/// The encoder adds `_total` to a counter's name, escapes label values and
/// spells the numbers.
#[derive(Debug)]
struct Exposition(Status);

impl Collector for Exposition {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let status = &self.0;
        encode_service(&mut e, status)?;
        encode_groups(&mut e, &status.groups)?;
        encode_disks(&mut e, &status.groups)?;
        encode_requests(&mut e, &status.groups)?;
        encode_volumes(&mut e, &status.volumes)?;
        encode_operations(&mut e, &status.operations)
    }
}

/// Each group's disks, with the group's name.
fn disks_of(groups: &[GroupStatus]) -> impl Iterator<Item = (&str, &DiskStatus)> {
    groups
        .iter()
        .flat_map(|g| g.disks.iter().map(move |d| (g.name.as_str(), d)))
}

/// The service itself: up, and since when.
fn encode_service(e: &mut DescriptorEncoder, status: &Status) -> fmt::Result {
    use MetricType::Gauge;
    let mut m = e.encode_descriptor("cairn_up", "The service is up.", None, Gauge)?;
    gauge(&mut m, &[], 1)?;
    // A gauge, though it counts: the encoder names every counter
    // `NAME_total`, and the name is what queries know.
    let help = "Seconds since the service started.";
    let mut m = e.encode_descriptor("cairn_uptime_seconds", help, None, Gauge)?;
    gauge(&mut m, &[], status.uptime_seconds)
}

/// Each group's space, its disks not in use and its lowered redundancy.
fn encode_groups(e: &mut DescriptorEncoder, groups: &[GroupStatus]) -> fmt::Result {
    use MetricType::Gauge;
    let help = "A group's space: total, free, usable for files after mirroring.";
    let mut m = e.encode_descriptor("cairn_group_space_mb", help, None, Gauge)?;
    for g in groups {
        let n = g.name.as_str();
        gauge(&mut m, &[("group", n), ("kind", "total")], g.total_mb)?;
        gauge(&mut m, &[("group", n), ("kind", "free")], g.free_mb)?;
        let usable = [("group", n), ("kind", "usable")];
        gauge(&mut m, &usable, g.usable_file_mb)?;
    }
    for (name, help, value) in [
        (
            "cairn_group_offline_disks",
            "Disks of a group not in use.",
            (|g| g.offline_disks as u64) as fn(&GroupStatus) -> u64,
        ),
        (
            "cairn_group_redundancy_lowered_extents",
            "Extents held by fewer copies that can be read than their file asks (a disk not ONLINE, or a stale copy); 0 once resync or a rebuild restores them.",
            |g| g.redundancy_lowered_extents,
        ),
        (
            "cairn_group_redundancy_lowered_bytes",
            "Bytes of those extents, one copy each.",
            |g| g.redundancy_lowered_bytes,
        ),
    ] {
        let mut m = e.encode_descriptor(name, help, None, Gauge)?;
        for g in groups {
            gauge(&mut m, &[("group", g.name.as_str())], value(g))?;
        }
    }
    Ok(())
}

/// Each disk's state, what its copies miss, and its changes of state.
fn encode_disks(e: &mut DescriptorEncoder, groups: &[GroupStatus]) -> fmt::Result {
    use MetricType::{Counter, Gauge};
    let help = "A disk's state: 1 for the state it is in.";
    let mut m = e.encode_descriptor("cairn_disk_state", help, None, Gauge)?;
    for (g, d) in disks_of(groups) {
        let (l, f, s) = (d.label.as_str(), d.failgroup.as_str(), d.state.as_str());
        let labels = [("group", g), ("disk", l), ("failgroup", f), ("state", s)];
        gauge(&mut m, &labels, 1)?;
    }
    for (name, help, value) in [
        (
            "cairn_disk_stale_aus",
            "AUs a disk's copies missed (resynced when it comes back).",
            (|d| d.stale_aus) as fn(&DiskStatus) -> u64,
        ),
        (
            "cairn_disk_missing_copy_aus",
            "AUs of a disk's copies that serve no read now (all it holds while not ONLINE, its stale AUs when it is).",
            |d| d.missing_copy_aus,
        ),
    ] {
        let mut m = e.encode_descriptor(name, help, None, Gauge)?;
        for (g, d) in disks_of(groups) {
            gauge(&mut m, &[("group", g), ("disk", &d.label)], value(d))?;
        }
    }
    let help = "Changes of a disk's state since the service mounted its group, by the state it went to (ONLINE, SYNCING, OFFLINE, DROPPING, DROPPED); each is also one line of the log, saying why.";
    let mut m = e.encode_descriptor("cairn_disk_state_changes", help, None, Counter)?;
    for g in groups {
        for c in &g.state_changes {
            let labels = [("group", g.name.as_str()), ("disk", &c.disk), ("to", &c.to)];
            counter(&mut m, &labels, c.count)?;
        }
    }
    Ok(())
}

/// The requests the file system served, and those the data plane sent
/// to each disk.
fn encode_requests(e: &mut DescriptorEncoder, groups: &[GroupStatus]) -> fmt::Result {
    let fs: Vec<_> = groups
        .iter()
        .flat_map(|g| {
            [
                ("read", &g.reads),
                ("write", &g.writes),
                ("fsync", &g.syncs),
                ("discard", &g.discards),
            ]
            .map(|(op, s)| (vec![("group", g.name.as_str()), ("op", op)], s))
        })
        .collect();
    requests(
        e,
        "cairn_fs",
        [
            "Requests the file system served.",
            "Bytes the file system read or wrote.",
            "Requests that failed.",
            "Time from a request reaching the service to its answer.",
        ],
        &fs,
    )?;
    let disk_io: Vec<_> = disks_of(groups)
        .flat_map(|(g, d)| {
            [
                ("read", &d.io.reads),
                ("write", &d.io.writes),
                ("flush", &d.io.flushes),
                ("discard", &d.io.discards),
            ]
            .map(|(op, s)| {
                let labels = vec![("group", g), ("disk", d.label.as_str()), ("op", op)];
                (labels, s)
            })
        })
        .collect();
    requests(
        e,
        "cairn_disk_io",
        [
            "Requests the data plane sent to a disk (file data, resync, rebalance, scrub).",
            "Bytes the data plane read from or wrote to a disk.",
            "Disk requests that failed.",
            "Time from a disk request's submission to its completion.",
        ],
        &disk_io,
    )
}

/// Each volume's block device: requests, bytes, requests in flight.
fn encode_volumes(e: &mut DescriptorEncoder, volumes: &[VolumeStatus]) -> fmt::Result {
    use MetricType::{Counter, Gauge};
    let help = "Requests a volume's block device completed (the kernel's count since the attach).";
    let mut m = e.encode_descriptor("cairn_volume_io_requests", help, None, Counter)?;
    for v in volumes {
        let (n, d) = (v.name.as_str(), v.device.as_str());
        for (op, count) in [
            ("read", v.reads),
            ("write", v.writes),
            ("discard", v.discards),
            ("flush", v.flushes),
        ] {
            counter(&mut m, &[("volume", n), ("device", d), ("op", op)], count)?;
        }
    }
    let help = "Bytes a volume's block device read, wrote or discarded.";
    let mut m = e.encode_descriptor("cairn_volume_io_bytes", help, None, Counter)?;
    for v in volumes {
        let (n, d) = (v.name.as_str(), v.device.as_str());
        for (op, bytes) in [
            ("read", v.read_bytes),
            ("write", v.write_bytes),
            ("discard", v.discard_bytes),
        ] {
            counter(&mut m, &[("volume", n), ("device", d), ("op", op)], bytes)?;
        }
    }
    let help = "Requests in flight on a volume's block device.";
    let mut m = e.encode_descriptor("cairn_volume_in_flight", help, None, Gauge)?;
    for v in volumes {
        let labels = [("volume", v.name.as_str()), ("device", &v.device)];
        gauge(&mut m, &labels, v.in_flight)?;
    }
    Ok(())
}

/// The long operations' progress.
fn encode_operations(
    e: &mut DescriptorEncoder,
    operations: &[cairn_store::ops::OpStatus],
) -> fmt::Result {
    use MetricType::Gauge;
    let help = "Progress of a long operation (resync, rebalance, scrub): AUs done and in all.";
    let mut m = e.encode_descriptor("cairn_operation_aus", help, None, Gauge)?;
    for o in operations {
        let (g, p) = (o.group.as_str(), o.pass.as_str());
        for (kind, aus) in [("done", o.aus_done), ("total", o.aus_total)] {
            gauge(&mut m, &[("group", g), ("pass", p), ("kind", kind)], aus)?;
        }
    }
    Ok(())
}

/// A label: its name, its value.
type Label<'a> = (&'static str, &'a str);

/// One series of a gauge family.
fn gauge(m: &mut MetricEncoder, labels: &[Label], value: impl EncodeGaugeValue) -> fmt::Result {
    m.encode_family(&labels)?.encode_gauge(&value)
}

/// One series of a counter family.
fn counter(m: &mut MetricEncoder, labels: &[Label], value: u64) -> fmt::Result {
    m.encode_family(&labels)?
        .encode_counter::<NoLabelSet, _, u64>(&value, None)
}

/// One family of request counters: `PREFIX_requests_total`,
/// `PREFIX_bytes_total`, `PREFIX_errors_total` and the histogram
/// `PREFIX_latency_seconds` (buckets [`LATENCY_BUCKETS_US`]), a series per
/// (labels, snapshot); `help` in that order.
fn requests(
    e: &mut DescriptorEncoder,
    prefix: &str,
    help: [&str; 4],
    series: &[(Vec<Label>, &OpSnapshot)],
) -> fmt::Result {
    let [requests, bytes, errors, latency] = help;
    for (what, help, value) in [
        (
            "requests",
            requests,
            (|s| s.count) as fn(&OpSnapshot) -> u64,
        ),
        ("bytes", bytes, |s| s.bytes),
        ("errors", errors, |s| s.errors),
    ] {
        let name = format!("{prefix}_{what}");
        let mut m = e.encode_descriptor(&name, help, None, MetricType::Counter)?;
        for (labels, s) in series {
            counter(&mut m, labels, value(s))?;
        }
    }
    let name = format!("{prefix}_latency_seconds");
    let mut m = e.encode_descriptor(&name, latency, None, MetricType::Histogram)?;
    for (labels, s) in series {
        // The encoder takes each bucket's own count, and adds them up.
        let bounds = LATENCY_BUCKETS_US.map(|us| us as f64 / 1e6);
        let mut below = 0;
        let buckets: Vec<(f64, u64)> = bounds
            .into_iter()
            .chain([f64::INFINITY])
            .zip(&s.latency_buckets_cumulative)
            .map(|(le, &upto)| {
                let own = upto.saturating_sub(below);
                below = upto;
                (le, own)
            })
            .collect();
        m.encode_family(labels)?.encode_histogram::<NoLabelSet>(
            s.latency_micros_sum as f64 / 1e6,
            s.count,
            &buckets,
            None,
        )?;
    }
    Ok(())
}

/// The longest request head the metrics endpoint reads.
const REQUEST_HEAD_MAX: usize = 8 << 10;

/// The longest a request may take to arrive, and its answer to go.
const REQUEST_TIME_MAX: Duration = Duration::from_secs(5);

/// The metrics endpoint: plain HTTP on `addr` (`GET /metrics`), one
/// connection at a time on a thread of its own; anything else gets a 404
/// or 400, and the service goes on.
///
/// Not `tiny_http` (0.12), the small server crate that would fit: it sets
/// no deadline on a request, so a client that sends nothing holds one of
/// its threads for as long as it keeps the connection (a thread per such
/// client, without bound); it keeps an HTTP/1.1 connection open after the
/// answer and drops a `Connection: close` given to it (a client that reads
/// to the end never gets there); it answers a malformed request with an
/// empty 400 of its own; and dropping it does not join its threads. Here
/// one deadline bounds each request, every answer closes its connection,
/// and a drop joins the one thread, which holds the groups.
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
            ("200 OK", prometheus(status_of(held, started, mountpoint)))
        }
        (Some("GET"), Some(_)) => (
            "404 Not Found",
            "not found: the metrics are at /metrics\n".into(),
        ),
        _ => ("400 Bad Request", "bad request\n".into()),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        prometheus_text::CONTENT_TYPE,
        body.len()
    );
}

#[cfg(test)]
mod tests;
