//! What the engine runs: storage, workload and run definitions after parsing,
//! defaults, variable substitution and expansion of `for…` loops.
//!
//! The vdbench parser ([`crate::vdbench`]) and the quick command line
//! ([`crate::quick`]) both produce a [`Plan`]; the engine never sees syntax.
//! Names follow vdbench: an `sd` is a storage definition (a target), a `wd` a
//! workload definition (what I/O to do to which sds), an `rd` a run definition
//! (how hard and how long).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Everything one `cairn bench run` or `cairn bench quick` will do, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub general: General,
    pub sds: Vec<SdDef>,
    pub wds: Vec<WdDef>,
    /// Runs in execution order, every `for…` combination already expanded.
    pub runs: Vec<RunDef>,
    pub source: Source,
}

/// Where a plan came from, kept whole in the result so a run can be repeated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// A vdbench parameter file (and the files it included).
    Vdbench {
        path: PathBuf,
        /// The text of the file as read, then of each `include=`d file.
        files: Vec<SourceFile>,
        /// `name=value` pairs from the command line, substituted for `$name`.
        variables: BTreeMap<String, String>,
    },
    /// `cairn bench quick` and its arguments.
    Quick { args: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
}

/// General parameters (before the first `sd`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct General {
    /// Stop the whole bench after this many I/O or data-validation errors
    /// (vdbench's `data_errors=`; default 50).
    pub data_errors: u64,
    /// Ratio a compressor should achieve on written data (`compratio=`; 1 = incompressible).
    pub compratio: f64,
    /// Ratio a deduplicating array should achieve (`dedupratio=`; 1 = every unit unique).
    pub dedupratio: f64,
    /// Unit deduplication works in (`dedupunit=`; default 8 KiB).
    pub dedupunit_bytes: u64,
    /// Data validation on (`validate=yes`): every written block carries its own
    /// address and a checksum, and every read of a written block is verified.
    pub validate: bool,
    /// Bucket bounds for the extra histogram of `histogram=(default,…)`, in µs;
    /// empty for the standard AWR-style buckets only.
    pub histogram_bounds_us: Vec<u64>,
}

impl Default for General {
    fn default() -> Self {
        Self {
            data_errors: 50,
            compratio: 1.0,
            dedupratio: 1.0,
            dedupunit_bytes: 8192,
            validate: false,
            histogram_bounds_us: Vec::new(),
        }
    }
}

/// A storage definition: one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SdDef {
    pub name: String,
    /// `lun=`: a block device or a regular file.
    pub lun: PathBuf,
    /// `size=`: bytes to use (a file that does not exist is created this big);
    /// `None` = the whole device or existing file.
    pub size_bytes: Option<u64>,
    /// `threads=`: most I/Os outstanding on this sd at once (default 8).
    pub threads: u32,
    pub openflags: OpenFlags,
    /// `offset=`: bytes added to every address (to test misalignment, or skip a header).
    pub offset_bytes: u64,
    /// `align=`: random addresses are multiples of this (default: the transfer size).
    pub align_bytes: Option<u64>,
    /// `range=`: the part of the sd this sd's workloads use (default all of it).
    pub range: Option<Band>,
}

/// `openflags=`: every target is opened O_DIRECT (Cairn measures storage, not the
/// page cache); these add synchronous-write semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OpenFlags {
    /// `o_sync` or `o_dsync`: each write is durable when it completes (RWF_DSYNC).
    pub sync_writes: bool,
}

/// A part of an sd: vdbench's `range=(a,b)` / `hotband=(a,b)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Band {
    pub start: Bound,
    pub end: Bound,
}

/// One end of a [`Band`]: values up to 200 are percentages of the sd (100 to 200
/// wraps past the end back to the start), larger ones are bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Percent(f64),
    Bytes(u64),
}

/// A workload definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WdDef {
    pub name: String,
    /// The sds it runs against (lists, ranges and wildcards already resolved).
    pub sds: Vec<String>,
    /// `rdpct=`: percentage of reads (default 100).
    pub rdpct: f64,
    pub xfersize: XferSize,
    pub seek: Seek,
    /// `skew=`: share (percent) of the run's I/O rate this workload gets; `None`
    /// shares what is left equally with the other workloads without one.
    pub skew_pct: Option<f64>,
    /// `iorate=` on the wd: a fixed rate for this workload alone.
    pub iorate: Option<f64>,
    /// `priority=`: when the sd's threads cannot keep up, lower numbers go first.
    pub priority: Option<u32>,
    /// `range=`: inside the sd (after the sd's own range).
    pub range: Option<Band>,
    /// `hotband=`: like range, with accesses skewed toward the band's start.
    pub hotband: Option<Band>,
}

/// `xfersize=`: one size, or a distribution `(size,pct,size,pct,…)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XferSize {
    Fixed(u64),
    /// (bytes, percent) pairs; the percentages sum to 100.
    Distribution(Vec<(u64, f64)>),
}

impl XferSize {
    /// The largest transfer it can produce, which sizes the buffers.
    pub fn max_bytes(&self) -> u64 {
        match self {
            XferSize::Fixed(b) => *b,
            XferSize::Distribution(d) => d.iter().map(|(b, _)| *b).max().unwrap_or(0),
        }
    }
}

/// `seekpct=`: how addresses are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Seek {
    /// `seekpct=0` / `sequential` / `seq`: each I/O follows the last, wrapping at the end.
    Sequential,
    /// `seekpct=eof`: sequential, one pass; the workload ends at the end of its range.
    Eof,
    /// `seekpct=n` (1–100) / `random`: n% of I/Os go to a random address, the
    /// rest follow the previous one.
    Random(f64),
}

/// How arrivals are spaced in an open-loop run (`distribution=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    #[default]
    Exponential,
    Uniform,
    Deterministic,
}

/// The fastest open-loop rate, in I/Os per second. The schedule keeps time
/// in whole nanoseconds, so a faster rate would put arrivals 0 ns apart; no
/// storage comes near it, so anything above is a typo, not a target.
pub const RATE_IOPS_MAX: f64 = 1e9;

/// Why `iops` is not an open-loop rate the schedule can keep, if it is not:
/// it must be a finite number above 0 and at most [`RATE_IOPS_MAX`].
pub fn rate_problem(iops: f64) -> Option<String> {
    if !(iops.is_finite() && iops > 0.0) {
        return Some("is not a rate above 0".into());
    }
    if iops > RATE_IOPS_MAX {
        return Some(format!(
            "is above {} I/Os per second, the most the schedule can time (one arrival per nanosecond)",
            RATE_IOPS_MAX as u64
        ));
    }
    None
}

/// A run's rate (`iorate=`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rate {
    /// `max`: closed loop, as fast as the threads allow.
    Max,
    /// A number: open loop at this many I/Os per second, summed over the run's workloads.
    Fixed(f64),
    /// One point of a curve: this percentage of the rate the curve's max run reached.
    CurvePct(f64),
}

/// One run, as executed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDef {
    /// The `rd=` name.
    pub rd: String,
    /// What distinguishes this run from the others of the same rd, e.g.
    /// `threads=8 xfersize=4k iorate=50%`; empty when the rd expands to one run.
    pub label: String,
    /// The workloads it runs (wildcards resolved).
    pub wds: Vec<String>,
    pub rate: Rate,
    pub elapsed: Duration,
    pub interval: Duration,
    /// Excluded from the totals (`warmup=`); part of `elapsed`, as in vdbench.
    pub warmup: Duration,
    pub arrival: Arrival,
    /// Sleep after the run (`pause=`).
    pub pause: Duration,
    /// `forthreads=` value for this run, replacing every sd's `threads=`.
    pub threads: Option<u32>,
    /// `forxfersize=` / `forrdpct=` / `forseekpct=` values replacing the wds' own.
    pub xfersize: Option<XferSize>,
    pub rdpct: Option<f64>,
    pub seek: Option<Seek>,
    /// Set on the runs an `iorate=curve` rd expands into: the max run first, then
    /// one [`Rate::CurvePct`] run per point.
    pub curve: Option<CurveMember>,
}

/// Membership of a run in a latency-versus-load curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurveMember {
    /// Runs with the same id form one curve (numbered 0, 1, … through the plan;
    /// an rd with `for…` loops makes one curve per combination).
    pub id: usize,
    /// `stopcurve=`: stop the curve once the mean response time exceeds this many ms.
    pub stop_ms: Option<f64>,
}

impl Plan {
    pub fn sd(&self, name: &str) -> Option<&SdDef> {
        self.sds.iter().find(|s| s.name == name)
    }

    pub fn wd(&self, name: &str) -> Option<&WdDef> {
        self.wds.iter().find(|w| w.name == name)
    }

    /// Whether any run writes (so targets must pass the safety checks and a
    /// missing file must be created full size).
    pub fn writes(&self) -> bool {
        self.runs.iter().any(|run| {
            run.wds.iter().filter_map(|w| self.wd(w)).any(|wd| {
                let rdpct = run.rdpct.unwrap_or(wd.rdpct);
                rdpct < 100.0
            })
        })
    }
}
