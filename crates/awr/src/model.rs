//! What a parsed AWR or Statspack report holds: `cairn awr parse --json`.
//!
//! Every figure is `Option`: a report may not have it (a PDB report has no
//! write statistics, a Statspack report no IO Profile), and a value Oracle
//! could not fit (`#####`) is no value. Sections the parser found but could
//! not read are named in `warnings`, never dropped silently.

use serde::{Deserialize, Serialize};

use super::profile::ProfileRow;
use super::stats::StatRow;

pub const AWR_SCHEMA: &str = "cairn-awr-report";
pub const AWR_SCHEMA_VERSION: u32 = 1;

/// The kind of report the text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    AwrText,
    AwrHtml,
    StatspackText,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AwrReport {
    pub schema: String,
    pub schema_version: u32,
    /// The file it was read from.
    pub source: String,
    pub format: Format,
    pub header: Header,
    pub load_profile: Vec<ProfileLine>,
    pub io_profile: Vec<IoProfileLine>,
    pub instance_activity: Vec<Statistic>,
    /// "Top 5 Timed (Foreground) Events" / "Top 10 Foreground Events by Total Wait Time".
    pub top_events: Vec<EventLine>,
    pub foreground_events: Vec<EventLine>,
    pub background_events: Vec<EventLine>,
    pub wait_classes: Vec<WaitClassLine>,
    pub histograms: Vec<HistogramLine>,
    pub iostat_by_function: Vec<IoFunctionLine>,
    /// `init.ora` parameters that matter for the derivation (db_block_size,
    /// db_file_multiblock_read_count, …), as printed.
    pub parameters: Vec<(String, String)>,
    pub warnings: Vec<ParseWarning>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Header {
    pub db_name: Option<String>,
    pub db_id: Option<u64>,
    pub instance: Option<String>,
    pub instance_number: Option<u32>,
    pub release: Option<String>,
    pub rac: Option<bool>,
    pub cdb: Option<bool>,
    /// The container a PDB-level report covers (`None` for a whole instance).
    pub container: Option<String>,
    pub host: Option<String>,
    pub platform: Option<String>,
    pub cpus: Option<u32>,
    pub cores: Option<u32>,
    pub sockets: Option<u32>,
    pub memory_gb: Option<f64>,
    pub begin_snap_id: Option<u64>,
    pub begin_snap_time: Option<String>,
    pub end_snap_id: Option<u64>,
    pub end_snap_time: Option<String>,
    pub elapsed_min: Option<f64>,
    pub db_time_min: Option<f64>,
    pub block_size: Option<u32>,
}

/// A Load Profile row (see `profile.rs`), serializable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileLine {
    pub label: String,
    pub per_second: Option<f64>,
    pub per_transaction: Option<f64>,
    pub per_exec: Option<f64>,
    pub per_call: Option<f64>,
}

impl From<&ProfileRow> for ProfileLine {
    fn from(r: &ProfileRow) -> Self {
        Self {
            label: r.label.clone(),
            per_second: r.per_second,
            per_transaction: r.per_transaction,
            per_exec: r.per_exec,
            per_call: r.per_call,
        }
    }
}

/// An IO Profile row (11.2.0.4+): `Total Requests:`, `Database (MB):` …
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoProfileLine {
    pub label: String,
    pub read_write_per_s: Option<f64>,
    pub read_per_s: Option<f64>,
    pub write_per_s: Option<f64>,
}

/// An Instance Activity statistic (see `stats.rs`), serializable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statistic {
    /// As printed: cut to its column (`physical read total bytes optimi`).
    pub name: String,
    pub total: Option<f64>,
    pub per_second: Option<f64>,
    pub per_trans: Option<f64>,
}

impl From<&StatRow> for Statistic {
    fn from(r: &StatRow) -> Self {
        Self {
            name: r.name.clone(),
            total: r.total,
            per_second: r.per_second,
            per_trans: r.per_trans,
        }
    }
}

/// A wait event line of the Top, Foreground or Background tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    /// As printed (cut to its column in text reports).
    pub event: String,
    pub waits: Option<f64>,
    pub total_wait_s: Option<f64>,
    /// Average wait in µs, whatever unit the report printed it in.
    pub avg_wait_us: Option<f64>,
    pub pct_db_time: Option<f64>,
    pub wait_class: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitClassLine {
    pub wait_class: String,
    pub waits: Option<f64>,
    pub total_wait_s: Option<f64>,
    pub avg_wait_us: Option<f64>,
    pub pct_db_time: Option<f64>,
}

/// One event's row of a wait event histogram table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramLine {
    /// The table's title as printed (`Wait Event Histogram`, `Wait Event
    /// Histogram (up to 32 ms)`, `Wait Event Histogram Detail (64 msec to 2 sec)` …).
    pub table: String,
    pub event: String,
    pub total_waits: Option<f64>,
    /// (bucket label as printed, % of waits).
    pub buckets: Vec<(String, Option<f64>)>,
}

/// A row of "IOStat by Function summary".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoFunctionLine {
    pub function: String,
    pub reads_data: Option<f64>,
    pub reqs_per_sec_read: Option<f64>,
    pub data_per_sec_read: Option<f64>,
    pub writes_data: Option<f64>,
    pub reqs_per_sec_write: Option<f64>,
    pub data_per_sec_write: Option<f64>,
    pub waits_count: Option<f64>,
    pub avg_time: Option<f64>,
}

/// A section found but not (wholly) read, or expected and missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseWarning {
    pub section: String,
    /// 1-based line of the report (0 when the warning is about the whole report).
    pub line: usize,
    pub message: String,
}

impl AwrReport {
    /// An empty report of `format` read from `source`.
    pub fn empty(source: &str, format: Format) -> Self {
        Self {
            schema: AWR_SCHEMA.into(),
            schema_version: AWR_SCHEMA_VERSION,
            source: source.into(),
            format,
            header: Header::default(),
            load_profile: Vec::new(),
            io_profile: Vec::new(),
            instance_activity: Vec::new(),
            top_events: Vec::new(),
            foreground_events: Vec::new(),
            background_events: Vec::new(),
            wait_classes: Vec::new(),
            histograms: Vec::new(),
            iostat_by_function: Vec::new(),
            parameters: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// The statistic named `name` (exactly as printed).
    pub fn statistic(&self, name: &str) -> Option<&Statistic> {
        self.instance_activity.iter().find(|s| s.name == name)
    }

    /// An event sessions waited on (the foreground table, else the Top
    /// table; never the background one): what DB time is made of.
    pub fn foreground_event(&self, name: &str) -> Option<&EventLine> {
        self.foreground_events
            .iter()
            .find(|e| e.event == name)
            .or_else(|| self.top_events.iter().find(|e| e.event == name))
    }

    /// An event of the foreground table, else of the top table, by name.
    pub fn event(&self, name: &str) -> Option<&EventLine> {
        self.foreground_events
            .iter()
            .chain(&self.top_events)
            .chain(&self.background_events)
            .find(|e| e.event == name)
    }
}
