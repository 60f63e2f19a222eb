//! The record of one OLTP run: `result.json`, schema `cairn-oltp-result` v1.
//!
//! Everything the AWR-style report, the HTML page and `cairn report compare`
//! show is computed from this record alone, so a result can be re-rendered or
//! compared long after the run. Figures cover the measured window (warm-up
//! excluded) unless a field says otherwise.

use serde::{Deserialize, Serialize};

use super::layout::Shape;
use super::stats::Event;
use cairn_kit::result::{
    CpuInterval, CpuSummary, DeviceStats, Environment, ErrorSummary, HistogramData, LatencySummary,
    TargetInfo, ToolInfo,
};

pub const OLTP_SCHEMA: &str = "cairn-oltp-result";
pub const OLTP_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OltpResult {
    pub schema: String,
    pub schema_version: u32,
    pub tool: ToolInfo,
    /// RFC 3339, UTC: the start of the measured window (AWR's begin snap).
    pub started_at: String,
    /// The end of the measured window (end snap).
    pub ended_at: String,
    pub seed: u64,
    pub environment: Environment,
    pub conf: ConfRecord,
    pub settings: Settings,
    pub shape: Shape,
    pub data_targets: Vec<TargetInfo>,
    pub redo_target: TargetInfo,
    /// Seconds of warm-up before the measured window.
    pub warmup_s: f64,
    /// Length of the measured window.
    pub elapsed_s: f64,
    pub totals: Totals,
    pub intervals: Vec<OltpInterval>,
    /// The process's CPU (getrusage), whole-machine busy %, and physical I/Os per CPU-second.
    pub cpu: CpuSummary,
    /// `/proc/diskstats` over the measured window, per block device under the targets.
    pub devices: Vec<DeviceStats>,
    /// Cairn's own I/O counts set against the kernel's, per device.
    pub crosscheck: Vec<CrossCheck>,
    /// Why the run ended before RUN_TIME / WORK_LOOP, if it did (an interrupt, an I/O error).
    pub ended_early: Option<String>,
    pub errors: ErrorSummary,
}

/// The slob.conf as read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ConfRecord {
    pub path: String,
    /// The file's text, verbatim.
    pub text: String,
    /// Every setting in effect (`KEY=value`, after defaults and command-line overrides).
    pub effective: Vec<(String, String)>,
    /// Oracle-only keys that were accepted and ignored.
    pub ignored: Vec<String>,
}

/// How the run was configured (beyond slob.conf).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub sessions: u32,
    pub schemas: u32,
    pub threads_per_schema: u32,
    pub cache_bytes: u64,
    pub cache_buffers: u64,
    /// "cache" (through the buffer cache) or "direct" (session reads around it).
    pub read_path: String,
    /// Most single-block misses of one statement submitted together (1 = never batched).
    pub batch_reads: u32,
    /// Scans of tables above this many blocks read around the cache (direct path read).
    pub direct_read_threshold_blocks: u64,
    /// Blocks per multiblock read.
    pub multiblock_read_count: u32,
    pub log_buffer_bytes: u64,
    /// Seconds between checkpoints (the writer flushing every dirty buffer).
    pub checkpoint_interval_s: f64,
    pub interval_s: f64,
    pub run_time_s: f64,
    pub work_loop: u64,
    pub redo_block_bytes: u32,
    /// The engine of the writers and of the sessions' batched reads, as it
    /// ran ("io_uring", "sync"); single-block reads are always pread.
    #[serde(default)]
    pub engine: String,
}

/// Totals over the measured window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Totals {
    /// Time sessions spent in calls, s (AWR's DB time).
    pub db_time_s: f64,
    /// Session threads' CPU, s (AWR's DB CPU).
    pub db_cpu_s: f64,
    /// Log writer and database writer CPU, s.
    pub background_cpu_s: f64,
    /// Every instance statistic, by its AWR name, in `Stat::ALL` order.
    pub stats: Vec<StatValue>,
    /// Every event waited on at least once, in `Event::ALL` order.
    pub events: Vec<EventRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatValue {
    pub name: String,
    pub value: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub event: Event,
    pub name: String,
    pub class: String,
    pub background: bool,
    pub waits: u64,
    pub time_s: f64,
    pub avg_us: f64,
    /// Percentiles, min/max, and the AWR ms and µs bucket tables.
    pub latency: LatencySummary,
    pub histogram: HistogramData,
}

/// One reporting interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OltpInterval {
    /// 1-based.
    pub index: u32,
    /// Seconds from the sessions' release to the interval's end.
    pub end_s: f64,
    pub seconds: f64,
    pub warmup: bool,
    pub db_time_s: f64,
    pub db_cpu_s: f64,
    /// Per-second rates of the headline figures.
    pub physical_read_iops: f64,
    pub physical_write_iops: f64,
    pub redo_write_iops: f64,
    pub logical_reads_per_s: f64,
    pub redo_bytes_per_s: f64,
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
    pub transactions_per_s: f64,
    pub executes_per_s: f64,
    pub events: Vec<IntervalEvent>,
    pub cpu: CpuInterval,
    pub devices: Vec<DeviceStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalEvent {
    pub event: Event,
    pub waits: u64,
    pub avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Waits per bucket of [`INTERVAL_BUCKETS_US`] (the last counts everything above it).
    pub buckets: Vec<u64>,
}

/// Upper bounds (µs, exclusive) of the per-interval histogram buckets; one more
/// bucket counts the waits above the last bound.
pub const INTERVAL_BUCKETS_US: [u64; 14] = [
    8, 16, 32, 64, 128, 256, 512, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 1_000_000,
];

/// One device's requests and bytes as Cairn counted them and as the kernel did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    pub device: String,
    /// The targets on it (a device may hold several).
    pub targets: Vec<String>,
    pub cairn_reads: u64,
    pub kernel_reads: u64,
    pub cairn_writes: u64,
    pub kernel_writes: u64,
    pub cairn_read_bytes: u64,
    pub kernel_read_bytes: u64,
    pub cairn_write_bytes: u64,
    pub kernel_write_bytes: u64,
}

impl OltpResult {
    /// The value of the statistic named `name` (its AWR name) over the measured window.
    pub fn stat(&self, name: &str) -> u64 {
        self.totals
            .stats
            .iter()
            .find(|s| s.name == name)
            .map_or(0, |s| s.value)
    }

    pub fn event(&self, event: Event) -> Option<&EventRecord> {
        self.totals.events.iter().find(|e| e.event == event)
    }
}

/// Why a `result.json` is not an OLTP result this build reads: one line,
/// naming the file (`shown`) and what to do.
#[derive(Debug, thiserror::Error)]
pub enum OltpResultError {
    #[error(transparent)]
    Read(#[from] cairn_kit_report::ReadError),
    #[error("{shown} is not a Cairn OLTP result (not JSON: {error}); give the result.json `cairn bench oltp run` wrote")]
    NotJson {
        shown: String,
        error: serde_json::Error,
    },
    #[error("{shown} is not a Cairn OLTP result (schema {found}, expected \"{OLTP_SCHEMA}\"); give the result.json `cairn bench oltp run` wrote")]
    Schema { shown: String, found: String },
    #[error("{shown} was written by a newer Cairn ({OLTP_SCHEMA} schema_version {version}); this Cairn reads {OLTP_SCHEMA_VERSION}: upgrade Cairn to read it")]
    Newer { shown: String, version: u64 },
    #[error("{shown} has {OLTP_SCHEMA} schema_version {version}, which no Cairn writes; this Cairn reads {OLTP_SCHEMA_VERSION}")]
    NoSuchVersion { shown: String, version: u64 },
    #[error("{shown} is not a Cairn OLTP result (schema_version missing or not a number)")]
    NoVersion { shown: String },
    #[error(
        "{shown} is a damaged Cairn OLTP result ({error}); rerun the OLTP run or restore the file"
    )]
    Damaged {
        shown: String,
        error: serde_json::Error,
    },
}

/// Decode the text of an OLTP run's `result.json`, refusing anything else (a
/// workload result, a newer schema version) with one clear line.
pub fn oltp_from_json(text: &str, shown: &str) -> Result<OltpResult, OltpResultError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|error| OltpResultError::NotJson {
            shown: shown.to_string(),
            error,
        })?;
    oltp_from_value(value, shown)
}

/// [`oltp_from_json`] of a document already parsed (a command that tells
/// result kinds apart by their `schema` reads the JSON once).
pub fn oltp_from_value(
    value: serde_json::Value,
    shown: &str,
) -> Result<OltpResult, OltpResultError> {
    let shown = shown.to_string();
    if value.get("schema").and_then(|s| s.as_str()) != Some(OLTP_SCHEMA) {
        let found = match value.get("schema") {
            Some(s) => s.to_string(),
            None => "missing".to_string(),
        };
        return Err(OltpResultError::Schema { shown, found });
    }
    match value.get("schema_version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(OLTP_SCHEMA_VERSION) => {}
        Some(version) if version > u64::from(OLTP_SCHEMA_VERSION) => {
            return Err(OltpResultError::Newer { shown, version });
        }
        Some(version) => return Err(OltpResultError::NoSuchVersion { shown, version }),
        None => return Err(OltpResultError::NoVersion { shown }),
    }
    serde_json::from_value(value).map_err(|error| OltpResultError::Damaged { shown, error })
}
