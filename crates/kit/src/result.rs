//! `result.json`: everything a bench measured, in a versioned schema.
//!
//! The histograms are kept whole ([`HistogramData`]), so any percentile can be
//! recomputed later; the summaries next to them are conveniences. Readers check
//! [`BenchResult::schema`] and [`BenchResult::schema_version`]; a change that
//! renames or removes a field bumps the version, adding one does not.
//!
//! Units are in the field names: `_us` microseconds, `_ms` milliseconds, `_s`
//! seconds, `_bytes`, `_kb` (1024 bytes, as iostat's `rareq-sz`), `mb_per_s`
//! (2^20 bytes per second, as vdbench and `iostat -m` print `MB/s`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use cairn_host::{CpuInterval, CpuSummary, DeviceStats, Environment, ToolInfo};

use crate::model::{Plan, Rate};

/// The value of [`BenchResult::schema`].
pub const SCHEMA: &str = "cairn-bench-result";
/// The value of [`BenchResult::schema_version`].
pub const SCHEMA_VERSION: u32 = 1;

/// The percentiles every latency summary carries.
pub const PERCENTILES: [f64; 7] = [50.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    pub schema: String,
    pub schema_version: u32,
    pub tool: ToolInfo,
    /// Wall-clock start, RFC 3339 in UTC.
    pub started_at: String,
    /// Seeds every random choice (addresses, sizes, arrivals, data); the same
    /// seed and plan give the same I/O sequence.
    pub seed: u64,
    pub engine: EngineInfo,
    pub environment: Environment,
    pub plan: Plan,
    pub targets: Vec<TargetInfo>,
    pub runs: Vec<RunRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// `uring` or `sync`.
    pub kind: String,
    /// Ring setup flags and features in use (e.g. `single_issuer`, `registered_files`).
    pub flags: Vec<String>,
    /// Submitting threads (uring), or I/O threads (sync: one per outstanding I/O).
    pub workers: u32,
}

/// One sd as opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub sd: String,
    pub path: String,
    /// `block` or `file`.
    pub kind: String,
    pub size_bytes: u64,
    /// The byte range the workloads use (after `size=`, `range=` and `offset=`).
    pub start_bytes: u64,
    pub end_bytes: u64,
    pub logical_sector_bytes: u32,
    pub physical_sector_bytes: u32,
    /// 512n / 512e / 4Kn.
    pub sector_format: String,
    pub max_transfer_bytes: u32,
    pub optimal_io_bytes: u32,
    pub rotational: Option<bool>,
    pub discard: bool,
    /// The block devices whose /proc/diskstats the run reports (for a file, the
    /// device of its filesystem; for a stacked device, itself and what it sits on).
    pub devices: Vec<String>,
    /// Whether the file was created for this bench.
    pub created: bool,
    /// For a Cairn group file: the engine the group was mounted with (to
    /// find, create and fill the file), `io_uring` or `sync`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_engine: Option<String>,
}

/// One executed run (one expansion of one rd).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub rd: String,
    pub label: String,
    pub wds: Vec<String>,
    /// The rate as asked (`max`, a number, or a curve percentage).
    pub rate: Rate,
    /// The open-loop target in I/Os per second (a curve percentage resolved
    /// against its max run); `None` for closed loop.
    pub target_iops: Option<f64>,
    pub arrival: String,
    /// Outstanding I/Os allowed per sd.
    pub threads: BTreeMap<String, u32>,
    pub interval_s: f64,
    pub warmup_s: f64,
    pub elapsed_s: f64,
    /// Seconds measured (after warm-up) — the denominator of every rate in `totals`.
    pub measured_s: f64,
    pub curve: Option<CurvePoint>,
    pub intervals: Vec<IntervalRecord>,
    /// Totals over the measured window (warm-up excluded).
    pub totals: Totals,
    pub cpu: CpuSummary,
    /// iostat -x figures per block device over the measured window.
    pub devices: Vec<DeviceStats>,
    pub rate_outcome: RateOutcome,
    pub validation: ValidationOutcome,
    pub errors: ErrorSummary,
    /// Why the run ended before `elapsed` (all `eof` workloads done, error limit,
    /// interrupted), or `None`.
    pub ended_early: Option<String>,
}

/// Why a run of `seekpct=eof` workloads ended: the way such a run ends, not
/// a run cut short.
pub const ENDED_AT_EOF: &str = "every workload reached the end of its range (seekpct=eof)";

impl RunRecord {
    /// Why the run ended before its `elapsed=`, unless it ended as it should
    /// (every eof workload at the end of its range).
    pub fn cut_short(&self) -> Option<&str> {
        self.ended_early
            .as_deref()
            .filter(|why| *why != ENDED_AT_EOF)
    }

    /// `rd` and `label` as one name, e.g. `rd1 threads=8`.
    pub fn title(&self) -> String {
        if self.label.is_empty() {
            self.rd.clone()
        } else {
            format!("{} {}", self.rd, self.label)
        }
    }
}

/// A run's place on a latency-versus-load curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    pub id: usize,
    /// `None` for the max run that calibrates the curve.
    pub pct: Option<f64>,
}

/// Totals for the whole run and for each workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub all: Mixed,
    pub workloads: Vec<WorkloadTotals>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadTotals {
    pub wd: String,
    pub sds: Vec<String>,
    /// This workload's share of the open-loop target, if any.
    pub target_iops: Option<f64>,
    pub priority: Option<u32>,
    pub stats: Mixed,
}

/// Reads, writes, and both together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mixed {
    pub all: DirectionStats,
    pub read: DirectionStats,
    pub write: DirectionStats,
}

impl Mixed {
    pub fn read_pct(&self) -> f64 {
        if self.all.ios == 0 {
            0.0
        } else {
            100.0 * self.read.ios as f64 / self.all.ios as f64
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mb_per_s: f64,
    pub bytes_per_io: f64,
    pub latency: LatencySummary,
    pub histogram: HistogramData,
}

/// Latency from the intended start (open loop) or the submission (closed loop)
/// to the completion.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub stddev_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// One entry per [`PERCENTILES`] value.
    pub percentiles: Vec<Percentile>,
    /// AWR-style wait buckets `<1ms <2ms <4ms <8ms <16ms <32ms <=1s >1s`, as
    /// percentages of the I/Os.
    pub awr_ms_buckets: Vec<Bucket>,
    /// The same in microseconds: `<8us <16us <32us <64us <128us <256us <512us >=512us`.
    pub awr_us_buckets: Vec<Bucket>,
    /// Buckets from the parameter file's `histogram=`, if it had one.
    pub custom_buckets: Vec<Bucket>,
}

impl LatencySummary {
    /// The value at percentile `p`, if it is one of [`PERCENTILES`].
    pub fn percentile_us(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|q| (q.p - p).abs() < 1e-9)
            .map(|q| q.us)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    pub p: f64,
    pub us: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// As an AWR report heads the column, e.g. `<1ms`, `<=1s`, `>1s`.
    pub label: String,
    pub count: u64,
    pub pct: f64,
}

/// An HDR histogram, whole: `counts` holds `[value_ns, count]` for every
/// non-empty bucket, where `value_ns` is the highest value the bucket holds
/// (within the histogram's precision).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HistogramData {
    pub unit: String,
    pub significant_digits: u8,
    pub lowest_ns: u64,
    pub highest_ns: u64,
    pub counts: Vec<[u64; 2]>,
}

/// One reporting interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// 1-based, as vdbench numbers them.
    pub index: u32,
    /// Seconds from the run's start to the interval's end.
    pub end_s: f64,
    pub seconds: f64,
    pub warmup: bool,
    pub all: IntervalStats,
    pub workloads: Vec<(String, IntervalStats)>,
    pub cpu: CpuInterval,
    pub devices: Vec<DeviceStats>,
}

/// The figures of one vdbench interval line, plus percentiles.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IntervalStats {
    pub ios: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub iops: f64,
    pub mb_per_s: f64,
    pub bytes_per_io: f64,
    pub read_pct: f64,
    pub resp_ms: f64,
    pub read_resp_ms: f64,
    pub write_resp_ms: f64,
    pub resp_max_ms: f64,
    pub resp_stddev_ms: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// Mean I/Os outstanding (Little's law: rate × mean response).
    pub queue_depth: f64,
    /// I/Os the open-loop schedule called for that had not been issued at the interval's end.
    pub backlog: u64,
}

/// Whether an open-loop target was held.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RateOutcome {
    pub target_iops: Option<f64>,
    pub achieved_iops: f64,
    /// False when the backlog hit its bound, or fewer than 98% of the I/Os due were done.
    pub held: bool,
    /// I/Os the schedule called for that were never issued (backlog full).
    pub not_issued: u64,
    pub backlog_max: u64,
    pub backlog_limit: u64,
    /// A sentence for the report when the rate was not held.
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ValidationOutcome {
    pub enabled: bool,
    /// Units whose content was checked on read.
    pub units_checked: u64,
    pub units_written: u64,
    pub errors: Vec<ValidationError>,
}

/// A block that did not read back as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationError {
    pub sd: String,
    pub lun: String,
    /// Byte offset on the lun of the bad unit, and its number in units.
    pub offset_bytes: u64,
    pub lba: u64,
    pub unit_bytes: u64,
    /// e.g. `bad checksum`, `wrong address (holds lba 17)`, `stale (key 3, expected 4)`.
    pub problem: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ErrorSummary {
    pub count: u64,
    /// The first few, each one line.
    pub first: Vec<String>,
}

impl BenchResult {
    /// The runs of curve `id`, the max run first.
    pub fn curve(&self, id: usize) -> Vec<&RunRecord> {
        let mut runs: Vec<&RunRecord> = self
            .runs
            .iter()
            .filter(|r| r.curve.is_some_and(|c| c.id == id))
            .collect();
        let key = |r: &RunRecord| r.curve.and_then(|c| c.pct).unwrap_or(-1.0);
        runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
        runs
    }
}
