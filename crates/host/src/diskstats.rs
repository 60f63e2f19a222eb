//! `/proc/diskstats` snapshots, and their deltas in `iostat -x` terms.
//!
//! The device's own view is the check on the tool's: if the bench says 8 KiB
//! reads and the device shows 128 KiB requests (merged) or 4 KiB ones (split),
//! the workload the device saw is not the one asked for. Figures follow iostat's
//! definitions so they can be compared with an `iostat -x` taken alongside.
//!
//! A line has 14 fields up to kernel 4.18, 18 from 4.18 (discards) and 20 from
//! 5.5 (flushes); kernels before 2.6.25 gave partitions only 7. Sectors are
//! always 512 bytes here, whatever the device's logical sector size.

use std::fs;
use std::time::Instant;

use cairn_io::host::Host;
use serde::{Deserialize, Serialize};

/// `/proc/diskstats` deltas over an interval, in `iostat -x` terms.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DeviceStats {
    pub device: String,
    pub r_s: f64,
    pub w_s: f64,
    pub rmb_s: f64,
    pub wmb_s: f64,
    pub rareq_sz_kb: f64,
    pub wareq_sz_kb: f64,
    pub aqu_sz: f64,
    pub r_await_ms: f64,
    pub w_await_ms: f64,
    pub util_pct: f64,
    pub d_s: f64,
    pub f_s: f64,
}

/// `/proc/diskstats` counts sectors of this size, whatever the device's.
const DISKSTATS_SECTOR_BYTES: f64 = 512.0;

/// One device's cumulative counters. Fields an older kernel does not give are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskCounters {
    pub reads: u64,
    pub reads_merged: u64,
    pub sectors_read: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub writes_merged: u64,
    pub sectors_written: u64,
    pub write_ms: u64,
    /// A gauge, not a counter: requests in flight at the moment of reading.
    pub in_flight: u64,
    /// Milliseconds with at least one request in flight (iostat's `%util` numerator).
    pub io_ms: u64,
    /// Sum over requests of their milliseconds in flight (iostat's `aqu-sz` numerator).
    pub weighted_ms: u64,
    pub discards: u64,
    pub discards_merged: u64,
    pub sectors_discarded: u64,
    pub discard_ms: u64,
    pub flushes: u64,
    pub flush_ms: u64,
}

impl DiskCounters {
    /// Parse one `/proc/diskstats` line into the kernel name and its counters;
    /// `None` for a line of any other shape.
    pub fn parse_line(line: &str) -> Option<(String, Self)> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let name = (*fields.get(2)?).to_string();
        let values: Vec<u64> = fields
            .get(3..)?
            .iter()
            .map(|v| v.parse::<u64>())
            .collect::<Result<_, _>>()
            .ok()?;
        let v = |i: usize| values.get(i).copied().unwrap_or(0);
        let counters = match fields.len() {
            // Old kernels' partition lines: reads, sectors read, writes, sectors written.
            7 => Self {
                reads: v(0),
                sectors_read: v(1),
                writes: v(2),
                sectors_written: v(3),
                ..Self::default()
            },
            // 14, 18 or 20; a kernel newer than this code may append more, after the known ones.
            n if n >= 14 => Self {
                reads: v(0),
                reads_merged: v(1),
                sectors_read: v(2),
                read_ms: v(3),
                writes: v(4),
                writes_merged: v(5),
                sectors_written: v(6),
                write_ms: v(7),
                in_flight: v(8),
                io_ms: v(9),
                weighted_ms: v(10),
                discards: v(11),
                discards_merged: v(12),
                sectors_discarded: v(13),
                discard_ms: v(14),
                flushes: v(15),
                flush_ms: v(16),
            },
            _ => return None,
        };
        Some((name, counters))
    }
}

/// The counters of the devices of interest at one moment. A device absent
/// from `/proc/diskstats` (or the file itself absent) has `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskStatsSnapshot {
    pub at: Instant,
    /// In the order asked for.
    pub devices: Vec<(String, Option<DiskCounters>)>,
}

impl DiskStatsSnapshot {
    /// Pick `devices` (kernel names) out of a `/proc/diskstats` text read at `at`.
    pub fn parse(text: &str, devices: &[String], at: Instant) -> Self {
        let all: Vec<(String, DiskCounters)> =
            text.lines().filter_map(DiskCounters::parse_line).collect();
        let devices = devices
            .iter()
            .map(|want| {
                let found = all.iter().find(|(name, _)| name == want).map(|(_, c)| *c);
                (want.clone(), found)
            })
            .collect();
        Self { at, devices }
    }

    /// The counters of `device`, if it was found.
    pub fn get(&self, device: &str) -> Option<&DiskCounters> {
        self.devices
            .iter()
            .find(|(name, _)| name == device)
            .and_then(|(_, c)| c.as_ref())
    }
}

/// Read `host.proc/diskstats` now, for `devices` (kernel names).
pub fn diskstats(host: &Host, devices: &[String]) -> DiskStatsSnapshot {
    let text = fs::read_to_string(host.proc.join("diskstats")).unwrap_or_default();
    DiskStatsSnapshot::parse(&text, devices, Instant::now())
}

/// `iostat -x` figures for every device found in both snapshots (`a` the
/// earlier), in `b`'s order; a device missing from either is left out rather
/// than reported as idle.
///
/// A counter lower in `b` than in `a` — a 32-bit counter that wrapped on an old
/// kernel, or a device removed and re-added — counts as no change: a figure
/// that is zero for one interval misleads less than one that is negative or
/// absurd. Every figure is finite.
pub fn device_stats(a: &DiskStatsSnapshot, b: &DiskStatsSnapshot) -> Vec<DeviceStats> {
    let dt_s =
        b.at.checked_duration_since(a.at)
            .map_or(0.0, |d| d.as_secs_f64());
    b.devices
        .iter()
        .filter_map(|(name, newer)| {
            let newer = newer.as_ref()?;
            let older = a.get(name)?;
            Some(iostat(name, older, newer, dt_s))
        })
        .collect()
}

fn iostat(name: &str, a: &DiskCounters, b: &DiskCounters, dt_s: f64) -> DeviceStats {
    let d = |f: fn(&DiskCounters) -> u64| f(b).saturating_sub(f(a)) as f64;
    let per_s = |x: f64| if dt_s > 0.0 { x / dt_s } else { 0.0 };
    let per = |x: f64, n: f64| if n > 0.0 { x / n } else { 0.0 };
    let dt_ms = dt_s * 1000.0;

    let (reads, writes) = (d(|c| c.reads), d(|c| c.writes));
    let (sectors_read, sectors_written) = (d(|c| c.sectors_read), d(|c| c.sectors_written));
    DeviceStats {
        device: name.to_string(),
        r_s: per_s(reads),
        w_s: per_s(writes),
        rmb_s: per_s(sectors_read * DISKSTATS_SECTOR_BYTES / 1_048_576.0),
        wmb_s: per_s(sectors_written * DISKSTATS_SECTOR_BYTES / 1_048_576.0),
        rareq_sz_kb: per(sectors_read * DISKSTATS_SECTOR_BYTES / 1024.0, reads),
        wareq_sz_kb: per(sectors_written * DISKSTATS_SECTOR_BYTES / 1024.0, writes),
        aqu_sz: per(d(|c| c.weighted_ms), dt_ms),
        r_await_ms: per(d(|c| c.read_ms), reads),
        w_await_ms: per(d(|c| c.write_ms), writes),
        // io_ms can run a tick ahead of the wall clock; busy cannot exceed all the time there was.
        util_pct: (100.0 * per(d(|c| c.io_ms), dt_ms)).min(100.0),
        d_s: per_s(d(|c| c.discards)),
        f_s: per_s(d(|c| c.flushes)),
    }
}
