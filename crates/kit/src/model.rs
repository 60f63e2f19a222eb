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

/// The shortest reporting interval. Each interval's end samples the CPU and
/// `/proc/diskstats` and gathers every I/O thread's latency histograms into
/// the collector; at 1 ms that bookkeeping is a measurable share of a core of
/// these two-core machines, and the live lines and charts are read by people.
pub const INTERVAL_MIN: Duration = Duration::from_millis(100);
/// The most intervals one run may have: each is kept in memory for the run
/// and written to `result.json` and the report's charts (a day at one
/// second is 86,400). A longer run takes a longer interval.
pub const INTERVALS_MAX: u64 = 100_000;
/// The longest run (a year of 366 days): longer is a typo, not a plan, and
/// the schedule's nanosecond clock must never come near wrapping.
pub const RUN_TIME_MAX: Duration = Duration::from_secs(366 * 86_400);

/// A duration as a person types it (and as `--time` reads it): its largest
/// whole unit (`30s`, `5m`, `400days`, `1000years` of 365.25 days, `100ms`),
/// never a debug form like `0ns` for nothing — zero is `0`.
pub fn show_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0".into();
    }
    let units: [(u128, &str, &str); 8] = [
        (31_557_600_000_000_000, "year", "years"),
        (86_400_000_000_000, "day", "days"),
        (3_600_000_000_000, "h", "h"),
        (60_000_000_000, "m", "m"),
        (1_000_000_000, "s", "s"),
        (1_000_000, "ms", "ms"),
        (1_000, "us", "us"),
        (1, "ns", "ns"),
    ];
    for (unit_ns, one, many) in units {
        if ns.is_multiple_of(unit_ns) {
            let n = ns / unit_ns;
            return format!("{n}{}", if n == 1 { one } else { many });
        }
    }
    format!("{ns}ns")
}

/// Why a run of `elapsed` reporting every `interval` (with `warmup` of it
/// not measured) cannot be run, if it cannot; `names` are the words for
/// elapsed, interval and warmup in the caller's input (`--time`, `elapsed=`).
/// One line, saying what would do.
pub fn timing_problem(
    elapsed: Duration,
    interval: Duration,
    warmup: Duration,
    names: [&str; 3],
) -> Option<String> {
    let [elapsed_name, interval_name, warmup_name] = names;
    let (e, i, w) = (
        show_duration(elapsed),
        show_duration(interval),
        show_duration(warmup),
    );
    let min = show_duration(INTERVAL_MIN);
    if elapsed.is_zero() {
        return Some(format!(
            "{elapsed_name} 0 is not a run time; expected one such as 30s"
        ));
    }
    if elapsed > RUN_TIME_MAX {
        return Some(format!(
            "{elapsed_name} {e} is longer than {}, the longest run; expected a shorter time",
            show_duration(RUN_TIME_MAX)
        ));
    }
    if elapsed < INTERVAL_MIN {
        return Some(format!(
            "{elapsed_name} {e} is shorter than {min}, the shortest interval; expected a run time such as 30s"
        ));
    }
    if interval.is_zero() {
        return Some(format!(
            "{interval_name} 0 is not an interval; expected at least {min}, such as 1s"
        ));
    }
    if interval < INTERVAL_MIN {
        return Some(format!(
            "{interval_name} {i} is shorter than {min}, the shortest interval (each one samples the CPU and the disks and gathers every thread's histograms); expected at least {min}, such as 1s"
        ));
    }
    if interval > elapsed {
        return Some(format!(
            "{interval_name} {i} is longer than {elapsed_name} {e}; expected an interval no longer than the run"
        ));
    }
    let intervals = elapsed.as_nanos().div_ceil(interval.as_nanos());
    if intervals > u128::from(INTERVALS_MAX) {
        // The shortest interval that fits, in whole seconds (or ms below one).
        let fit_ns = elapsed.as_nanos().div_ceil(u128::from(INTERVALS_MAX));
        let step = if fit_ns >= 1_000_000_000 {
            1_000_000_000
        } else {
            1_000_000
        };
        let fit = Duration::from_nanos(
            u64::try_from(fit_ns.div_ceil(step) * step)
                .expect("invariant: at most RUN_TIME_MAX / INTERVALS_MAX"),
        );
        return Some(format!(
            "{elapsed_name} {e} at {interval_name} {i} is {intervals} intervals, more than {INTERVALS_MAX} kept for one run; give an {interval_name} of at least {}",
            show_duration(fit)
        ));
    }
    if warmup >= elapsed {
        return Some(format!(
            "{warmup_name} {w} is not shorter than {elapsed_name} {e}; expected a warm-up shorter than the run (it is part of it)"
        ));
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_show_as_typed() {
        let s = Duration::from_secs;
        assert_eq!(show_duration(Duration::ZERO), "0");
        assert_eq!(show_duration(Duration::from_nanos(1)), "1ns");
        assert_eq!(show_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(show_duration(s(30)), "30s");
        assert_eq!(show_duration(s(90)), "90s");
        assert_eq!(show_duration(s(300)), "5m");
        assert_eq!(show_duration(s(86_400)), "1day");
        assert_eq!(show_duration(s(400 * 86_400)), "400days");
        assert_eq!(show_duration(s(31_557_600_000)), "1000years");
    }

    #[test]
    fn a_runs_timing_must_fit_the_limits() {
        let s = Duration::from_secs;
        let names = ["--time", "--interval", "--warmup"];
        let problem =
            |e, i, w| timing_problem(e, i, w, names).unwrap_or_else(|| "fine".to_string());
        assert_eq!(problem(s(30), s(1), s(5)), "fine");
        assert_eq!(problem(s(1), INTERVAL_MIN, Duration::ZERO), "fine");
        // A day at 1 s, and a year at the interval that fits.
        assert_eq!(problem(s(86_400), s(1), s(0)), "fine");
        assert_eq!(problem(RUN_TIME_MAX, s(317), s(0)), "fine");
        for (e, i, w, says) in [
            (s(0), s(1), s(0), "--time 0 is not a run time"),
            (RUN_TIME_MAX + s(1), s(1), s(0), "is longer than 366days"),
            (
                Duration::from_millis(50),
                s(1),
                s(0),
                "--time 50ms is shorter than 100ms",
            ),
            (
                s(30),
                s(0),
                s(0),
                "--interval 0 is not an interval; expected at least 100ms",
            ),
            (
                s(30),
                Duration::from_nanos(1),
                s(0),
                "--interval 1ns is shorter than 100ms",
            ),
            (
                s(30),
                s(31),
                s(0),
                "--interval 31s is longer than --time 30s",
            ),
            (RUN_TIME_MAX, s(316), s(0), "an --interval of at least 317s"),
            (
                s(30),
                s(1),
                s(30),
                "--warmup 30s is not shorter than --time 30s",
            ),
        ] {
            let p = problem(e, i, w);
            assert!(p.contains(says), "{p}");
            assert!(!p.contains('\n') && !p.contains("0ns"), "{p}");
        }
    }
}
