//! The "To POC" method: from a parsed AWR or Statspack report, the I/O classes
//! the database drove — single-block random reads, multiblock sequential
//! reads, single-block random writes, multiblock writes and redo writes — each
//! with its size and rate, and the vdbench parameter file that replays them.
//!
//! The post this automates ("flashdba" in docs/sources.md, "Taking Charge")
//! did the arithmetic by hand and showed it, so the reader could check it; each
//! [`IoClass`] keeps the same arithmetic as text lines for the same reason, and
//! the parameter file carries them as comments. The facts behind each step are
//! in `docs/awr-formats.md` §6; the bank fragment's split is explained in
//! `docs/awr-replay.md`.
//!
//! The derivation never guesses silently: every assumption (a block size not in
//! the report, a redo write size not in it, a multiblock read cap not in it) and
//! every class left out for want of a statistic is a line in
//! [`Derivation::notes`].

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::model::{AwrReport, Statistic};
use super::number::{parse_number, parse_size_bytes};
use super::profile::Figure;
use cairn_kit_report::units::grouped;

/// Oracle's default `db_block_size`, used when neither the options nor the
/// report give one.
pub const DEFAULT_BLOCK_SIZE_BYTES: u64 = 8 * 1024;
/// The largest multiblock read when the report lists no
/// `db_file_multiblock_read_count`: the auto-tuned value is 1 MiB worth of blocks.
pub const DEFAULT_MULTIBLOCK_READ_MAX_BYTES: u64 = 1024 * 1024;
/// Transfer sizes are rounded to this: Cairn's vdbench requires multiples of 512.
pub const XFER_ALIGN_BYTES: u64 = 512;
/// The largest transfer Cairn's vdbench accepts.
pub const XFER_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Below this a class would not issue one I/O in a whole run: it is left out.
pub const RATE_MIN_PER_S: f64 = 0.001;
/// No storage serves more; a report stating more is damaged, not real.
pub const RATE_MAX_PER_S: f64 = 1e9;
/// IOPS and bandwidth closer than this (in %) agree: the rounding of a
/// transfer size to 512 bytes is not a disagreement worth a note.
pub const AGREE_PCT: f64 = 0.5;

/// A printed statistic name at least this long may have been cut to its
/// column (32 characters in AWR, 33 in Statspack, then right-trimmed).
const STAT_NAME_CUT_CHARS_MIN: usize = 30;
const MIB: f64 = 1024.0 * 1024.0;

const READ_REQUESTS: &str = "physical read total IO requests";
const READ_MULTI: &str = "physical read total multi block requests";
const READ_BYTES: &str = "physical read total bytes";
const WRITE_REQUESTS: &str = "physical write total IO requests";
const WRITE_MULTI: &str = "physical write total multi block requests";
const WRITE_BYTES: &str = "physical write total bytes";
const REDO_WRITES: &str = "redo writes";
const REDO_SIZE: &str = "redo size";

/// How to derive: what the command line of `cairn awr workload` / `replay` says.
#[derive(Debug, Clone, PartialEq)]
pub struct DeriveOptions {
    /// `--block-size 8k`: overrides the report's block size.
    pub block_size_bytes: Option<u64>,
    /// The redo write size, for a report whose `redo size` was cut (the bank
    /// fragment) or when the engineer knows better.
    pub redo_write_bytes: Option<u64>,
    /// `--scale`: every class's rate is multiplied by this, so a replay can run
    /// a scaled-down copy of the load on small storage (a RAM disk in CI).
    pub scale: f64,
    /// The replay run's `elapsed=`, `interval=` and `warmup=`, in seconds.
    pub elapsed_s: u64,
    pub interval_s: u64,
    pub warmup_s: u64,
}

impl Default for DeriveOptions {
    /// The post's run: 120 s, reported every second, after a 5 s warm-up.
    fn default() -> Self {
        Self {
            block_size_bytes: None,
            redo_write_bytes: None,
            scale: 1.0,
            elapsed_s: 120,
            interval_s: 1,
            warmup_s: 5,
        }
    }
}

/// Why no workload could be derived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeriveError {
    #[error("{report}: no I/O class can be derived: {missing}; give a whole-instance AWR or Statspack report with its Instance Activity Stats")]
    NothingUsable { report: String, missing: String },
    #[error("{0}")]
    BadOption(String),
}

/// The five classes of the post, in its priority order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassKind {
    RandomRead,
    SequentialRead,
    RandomWrite,
    MultiblockWrite,
    RedoWrite,
}

impl ClassKind {
    pub const ALL: [ClassKind; 5] = [
        ClassKind::RandomRead,
        ClassKind::SequentialRead,
        ClassKind::RandomWrite,
        ClassKind::MultiblockWrite,
        ClassKind::RedoWrite,
    ];

    /// The wd name, as in the post's parameter file.
    pub fn wd_name(self) -> &'static str {
        match self {
            ClassKind::RandomRead => "wd_oracle_rand_read",
            ClassKind::SequentialRead => "wd_oracle_seq_read",
            ClassKind::RandomWrite => "wd_oracle_rand_write",
            ClassKind::MultiblockWrite => "wd_oracle_seq_write",
            ClassKind::RedoWrite => "wd_oracle_redo_write",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            ClassKind::RandomRead => "single-block random reads",
            ClassKind::SequentialRead => "multiblock sequential reads",
            ClassKind::RandomWrite => "single-block random writes",
            ClassKind::MultiblockWrite => "multiblock writes",
            ClassKind::RedoWrite => "redo writes",
        }
    }

    pub fn is_read(self) -> bool {
        matches!(self, ClassKind::RandomRead | ClassKind::SequentialRead)
    }

    /// vdbench `seekpct=`: 100 for random, 0 for sequential (redo is appended).
    pub fn seekpct(self) -> u32 {
        match self {
            ClassKind::RandomRead | ClassKind::RandomWrite => 100,
            _ => 0,
        }
    }

    /// vdbench `priority=`: the post's order, so the single-block reads that
    /// users wait on are served first when the threads cannot keep up.
    pub fn priority(self) -> u32 {
        match self {
            ClassKind::RandomRead => 1,
            ClassKind::SequentialRead => 2,
            ClassKind::RandomWrite => 3,
            ClassKind::MultiblockWrite => 4,
            ClassKind::RedoWrite => 5,
        }
    }

    /// The wait events the report times this class's I/O with: the ones its
    /// latency is judged against ([`Self::judged_events`]), then any that
    /// time batches of it.
    pub fn wait_events(self) -> &'static [&'static str] {
        match self {
            // db file parallel read is one wait for a batch of single-block
            // reads issued together.
            ClassKind::RandomRead => &["db file sequential read", "db file parallel read"],
            _ => self.judged_events(),
        }
    }

    /// The wait events whose average (and histogram) is this class's latency
    /// in the report, for putting the measured latency next to the AWR's.
    /// The writers' events time batches too — there is no per-write event —
    /// which the verdict says.
    pub fn judged_events(self) -> &'static [&'static str] {
        match self {
            ClassKind::RandomRead => &["db file sequential read"],
            ClassKind::SequentialRead => &["db file scattered read", "direct path read"],
            ClassKind::RandomWrite | ClassKind::MultiblockWrite => &["db file parallel write"],
            ClassKind::RedoWrite => &["log file parallel write"],
        }
    }
}

/// Which figure of the report a class's rate honours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The requests per second the statistics state.
    Iops,
    /// The bytes per second they state, in transfers of the class's size (more
    /// requests than stated: the post's "use the higher of IOPS and bandwidth").
    Bandwidth,
}

/// One class of I/O the report's database drove.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoClass {
    pub kind: ClassKind,
    /// The transfer size replayed: a multiple of 512, capped and clamped.
    pub size_bytes: u64,
    /// The average size the statistics give, before any cap or rounding.
    pub measured_size_bytes: f64,
    /// Requests per second as the statistics state them.
    pub stated_iops: f64,
    /// Bytes per second as the statistics state them.
    pub stated_bytes_per_s: f64,
    pub basis: Basis,
    /// The rate that honours `basis`, unscaled: what the database did.
    pub awr_rate_per_s: f64,
    /// `awr_rate_per_s` × the scale: what the replay drives.
    pub rate_per_s: f64,
    /// The arithmetic, one step a line, with statistic names and values.
    pub arithmetic: Vec<String>,
}

impl IoClass {
    /// The bytes per second the class drives at `awr_rate_per_s`.
    pub fn awr_bytes_per_s(&self) -> f64 {
        self.awr_rate_per_s * self.size_bytes as f64
    }
}

/// What the report states in total, for checking the classes against.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Stated {
    pub read_iops: Option<f64>,
    pub write_iops: Option<f64>,
    pub read_bytes_per_s: Option<f64>,
    pub write_bytes_per_s: Option<f64>,
    pub redo_writes_per_s: Option<f64>,
}

/// The classes of one report, and how they were found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derivation {
    /// The report's source (its file).
    pub source: String,
    pub block_size_bytes: u64,
    /// Where the block size came from (option, header, parameter, statistics, default).
    pub block_size_from: String,
    pub scale: f64,
    /// The report's elapsed time, when known (header, or Total ÷ per Second).
    pub elapsed_s: Option<f64>,
    /// In the post's priority order; classes that could not be derived are
    /// absent and named in `notes`.
    pub classes: Vec<IoClass>,
    pub stated: Stated,
    pub notes: Vec<String>,
    /// The replay run's `elapsed=`, `interval=`, `warmup=` (seconds).
    pub run_elapsed_s: u64,
    pub run_interval_s: u64,
    pub run_warmup_s: u64,
}

impl Derivation {
    pub fn class(&self, kind: ClassKind) -> Option<&IoClass> {
        self.classes.iter().find(|c| c.kind == kind)
    }

    fn sum(&self, reads: bool, f: fn(&IoClass) -> f64) -> f64 {
        self.classes
            .iter()
            .filter(|c| c.kind.is_read() == reads)
            .map(f)
            .sum()
    }

    /// Read requests per second the classes drive, unscaled.
    pub fn read_iops(&self) -> f64 {
        self.sum(true, |c| c.awr_rate_per_s)
    }

    /// Write requests per second (redo included), unscaled.
    pub fn write_iops(&self) -> f64 {
        self.sum(false, |c| c.awr_rate_per_s)
    }

    pub fn read_bytes_per_s(&self) -> f64 {
        self.sum(true, IoClass::awr_bytes_per_s)
    }

    pub fn write_bytes_per_s(&self) -> f64 {
        self.sum(false, IoClass::awr_bytes_per_s)
    }

    /// Every class's scaled rate together: the `rd=`'s `iorate=`.
    pub fn rate_per_s(&self) -> f64 {
        self.classes.iter().map(|c| c.rate_per_s).sum()
    }
}

/// `--block-size 8k` (or `16384`, `16K`): a block size Oracle can have.
pub fn parse_block_size(arg: &str) -> Result<u64, DeriveError> {
    parse_size_bytes(arg)
        .filter(|b| b.fract() == 0.0)
        .map(|b| b as u64)
        .filter(|b| valid_block_size(*b))
        .ok_or_else(|| {
            DeriveError::BadOption(format!(
                "--block-size `{arg}` is not a block size; expected a multiple of 512 from 512 to 64k, such as 8k"
            ))
        })
}

/// Oracle's block sizes: 2, 4, 8, 16 or 32 KiB.
fn valid_block_size(b: u64) -> bool {
    (BLOCK_SIZE_MIN_BYTES..=BLOCK_SIZE_MAX_BYTES).contains(&b) && b.is_power_of_two()
}

const BLOCK_SIZE_MIN_BYTES: u64 = 2048;
const BLOCK_SIZE_MAX_BYTES: u64 = 32 * 1024;

/// Derive the I/O classes of `report` (see the module documentation).
pub fn derive(report: &AwrReport, opts: &DeriveOptions) -> Result<Derivation, DeriveError> {
    check_options(opts)?;
    let mut lk = Lookup {
        report,
        elapsed_s: elapsed_s(report),
        notes: Vec::new(),
    };
    let (block, block_from) = block_size(&mut lk, opts);
    if block_from.starts_with("assumed") {
        lk.notes.push(format!(
            "block size {} {block_from}; give --block-size if the database uses another",
            size_text(block as f64)
        ));
    }
    let mut classes = Vec::new();
    let stated = read_classes(&mut lk, block, &mut classes);
    let stated = write_classes(&mut lk, block, opts, &mut classes, stated);
    if report.header.container.is_some() && stated.write_iops.is_none() {
        lk.notes.push(
            "a PDB-level report has no write statistics: take CDB-level snapshots to derive the writes"
                .to_string(),
        );
    }
    let mut kept = Vec::new();
    for mut c in classes {
        let awr = c.awr_rate_per_s;
        c.rate_per_s = awr * opts.scale;
        if !(awr.is_finite() && awr <= RATE_MAX_PER_S) {
            lk.notes.push(format!(
                "{}: {} is not a plausible rate: class left out",
                c.kind.describe(),
                rate_text(awr)
            ));
        } else if !(RATE_MIN_PER_S..=RATE_MAX_PER_S).contains(&c.rate_per_s) {
            lk.notes.push(format!(
                "{}: {} scaled by {} is {}, under {RATE_MIN_PER_S}/s or over {RATE_MAX_PER_S}/s: class left out",
                c.kind.describe(),
                rate_text(awr),
                opts.scale,
                rate_text(c.rate_per_s)
            ));
        } else {
            kept.push(c);
        }
    }
    // Together the classes run as one rd, whose rate is their sum: the
    // fastest are left out until it is one a schedule can time.
    kept.sort_by(|a, b| b.rate_per_s.total_cmp(&a.rate_per_s));
    while kept.iter().map(|c| c.rate_per_s).sum::<f64>() > RATE_MAX_PER_S {
        let c = kept.remove(0);
        lk.notes.push(format!(
            "{}: {} with the other classes is over {RATE_MAX_PER_S}/s in all: class left out",
            c.kind.describe(),
            rate_text(c.rate_per_s)
        ));
    }
    kept.sort_by_key(|c| c.kind);
    if kept.is_empty() {
        let missing: Vec<&str> = [
            READ_REQUESTS,
            READ_MULTI,
            WRITE_REQUESTS,
            WRITE_MULTI,
            REDO_WRITES,
        ]
        .into_iter()
        .filter(|n| matches!(find_statistic(report, n), Ok(None)))
        .collect();
        let missing = if missing.is_empty() {
            format!(
                "the I/O statistics are there but none gives a usable rate ({})",
                lk.notes.join("; ")
            )
        } else {
            format!("the report has no {}", missing.join(", no "))
        };
        return Err(DeriveError::NothingUsable {
            report: if report.source.is_empty() {
                "the report".to_string()
            } else {
                report.source.clone()
            },
            missing: one_line(&missing),
        });
    }
    Ok(Derivation {
        source: report.source.clone(),
        block_size_bytes: block,
        block_size_from: block_from,
        scale: opts.scale,
        elapsed_s: lk.elapsed_s,
        classes: kept,
        stated,
        notes: lk.notes,
        run_elapsed_s: opts.elapsed_s,
        run_interval_s: opts.interval_s,
        run_warmup_s: opts.warmup_s,
    })
}

fn check_options(opts: &DeriveOptions) -> Result<(), DeriveError> {
    let bad = |m: String| Err(DeriveError::BadOption(m));
    if !(opts.scale.is_finite() && opts.scale > 0.0) {
        return bad(format!(
            "--scale {} is not a factor; expected a number above 0, such as 0.01",
            opts.scale
        ));
    }
    if let Some(b) = opts.block_size_bytes {
        if !valid_block_size(b) {
            return bad(format!(
                "block size {b} B is not one Oracle has; expected a multiple of 512 from 512 to 65536"
            ));
        }
    }
    if let Some(b) = opts.redo_write_bytes {
        if b == 0 || b > XFER_MAX_BYTES {
            return bad(format!(
                "redo write size {b} B; expected from 1 byte to {XFER_MAX_BYTES}"
            ));
        }
    }
    if opts.elapsed_s == 0 || opts.interval_s == 0 || opts.interval_s > opts.elapsed_s {
        return bad(format!(
            "run of {} s reported every {} s; expected a duration of at least 1 s and an interval from 1 s up to it",
            opts.elapsed_s, opts.interval_s
        ));
    }
    if opts.warmup_s >= opts.elapsed_s {
        return bad(format!(
            "warm-up of {} s in a run of {} s; expected a warm-up shorter than the run",
            opts.warmup_s, opts.elapsed_s
        ));
    }
    Ok(())
}

/// A statistic the derivation uses: its rate and, when printed, its total.
#[derive(Debug, Clone)]
struct Fig {
    /// As printed.
    name: String,
    per_s: f64,
    total: Option<f64>,
}

struct Lookup<'a> {
    report: &'a AwrReport,
    elapsed_s: Option<f64>,
    notes: Vec<String>,
}

fn usable(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite() && *v >= 0.0)
}

impl Lookup<'_> {
    /// The statistic `full` (matched as [`find_statistic`] does), with a
    /// per-second value from the report or Total ÷ elapsed; a note when it is
    /// there but unusable.
    fn stat(&mut self, full: &str) -> Option<Fig> {
        let s = match find_statistic(self.report, full) {
            Ok(Some(s)) => s,
            Ok(None) => return None,
            Err(m) => {
                self.notes.push(m.to_string());
                return None;
            }
        };
        let total = usable(s.total);
        let per_s = usable(s.per_second).or_else(|| Some(total? / self.elapsed_s?));
        match per_s {
            Some(per_s) if per_s.is_finite() => Some(Fig {
                name: s.name.clone(),
                per_s,
                total,
            }),
            _ => {
                self.notes.push(format!(
                    "`{}` has no usable per-second value (per Second {:?}, Total {:?}, elapsed {:?} s): not used",
                    s.name, s.per_second, s.total, self.elapsed_s
                ));
                None
            }
        }
    }

    fn parameter(&self, name: &str) -> Option<f64> {
        self.report
            .parameters
            .iter()
            .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .and_then(|(_, v)| parse_number(v.trim().trim_matches('\'')))
            .filter(|v| v.is_finite() && *v > 0.0)
    }
}

/// A name compared as AWR prints it in any case and spacing.
pub(super) fn norm(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
}

/// Rows a cut statistic name could be, with different values: none is taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rows} rows could be `{full}` (`{first}`) with different values: not used")]
pub(crate) struct AmbiguousStatistic {
    rows: usize,
    full: String,
    first: String,
}

/// The statistic whose full name is `full`: printed whole, or cut to its
/// column (`physical read total multi block` for `… requests`). A cut name
/// that several different rows share is an ambiguity, returned as `Err` with a
/// message, rather than one of them taken silently.
pub(crate) fn find_statistic<'r>(
    report: &'r AwrReport,
    full: &str,
) -> Result<Option<&'r Statistic>, AmbiguousStatistic> {
    let want = norm(full);
    let exact: Vec<&Statistic> = report
        .instance_activity
        .iter()
        .filter(|s| norm(&s.name) == want)
        .collect();
    let candidates = if exact.is_empty() {
        report
            .instance_activity
            .iter()
            .filter(|s| {
                let p = norm(&s.name);
                p.chars().count() >= STAT_NAME_CUT_CHARS_MIN && want.starts_with(&p)
            })
            .collect()
    } else {
        exact
    };
    let Some(first) = candidates.first() else {
        return Ok(None);
    };
    let same = |s: &&Statistic| {
        s.total.map(f64::to_bits) == first.total.map(f64::to_bits)
            && s.per_second.map(f64::to_bits) == first.per_second.map(f64::to_bits)
    };
    if candidates.iter().all(same) {
        Ok(Some(first))
    } else {
        Err(AmbiguousStatistic {
            rows: candidates.len(),
            full: full.to_string(),
            first: first.name.clone(),
        })
    }
}

/// The report's elapsed seconds: the header's, else Total ÷ per Second of the
/// largest statistic (a fragment has no header).
fn elapsed_s(report: &AwrReport) -> Option<f64> {
    if let Some(m) = report
        .header
        .elapsed_min
        .filter(|m| m.is_finite() && *m > 0.0)
    {
        return Some(m * 60.0);
    }
    report
        .instance_activity
        .iter()
        .filter_map(|s| {
            let (t, p) = (usable(s.total)?, usable(s.per_second)?);
            (t > 0.0 && p > 0.0).then_some((t, t / p))
        })
        .filter(|(_, e)| e.is_finite() && *e > 0.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, e)| e)
}

/// The block size and where it came from: the option, the header, the
/// `db_block_size` parameter, the statistics (bytes ÷ blocks read), else 8 KiB.
fn block_size(lk: &mut Lookup<'_>, opts: &DeriveOptions) -> (u64, String) {
    if let Some(b) = opts.block_size_bytes {
        return (b, "given with --block-size".to_string());
    }
    if let Some(b) = lk.report.header.block_size.map(u64::from) {
        if valid_block_size(b) {
            return (b, "from the report's header".to_string());
        }
        lk.notes.push(format!(
            "the header's block size {b} B is not one Oracle has: not used"
        ));
    }
    if let Some(b) = lk.parameter("db_block_size") {
        if b.fract() == 0.0 && valid_block_size(b as u64) {
            return (b as u64, "from the db_block_size parameter".to_string());
        }
    }
    if let Some((b, line)) = block_size_from_stats(lk) {
        return (b, line);
    }
    (
        DEFAULT_BLOCK_SIZE_BYTES,
        "assumed (Oracle's default): the report gives none".to_string(),
    )
}

/// `physical read bytes` ÷ (`physical reads cache` + `physical reads direct`):
/// database-file bytes over blocks, which is the block size when it comes out
/// within 1% of a power of two Oracle allows (the bank fragment: 16,384.0).
fn block_size_from_stats(lk: &mut Lookup<'_>) -> Option<(u64, String)> {
    let bytes = lk.stat("physical read bytes")?;
    let cache = lk.stat("physical reads cache")?;
    let direct = lk.stat("physical reads direct")?;
    let (v, from) = pick(&[&bytes, &cache, &direct]);
    let blocks = v[1] + v[2];
    if blocks <= 0.0 {
        return None;
    }
    let ratio = v[0] / blocks;
    let b = (11..=15)
        .map(|k| 1u64 << k)
        .find(|b| (ratio / *b as f64 - 1.0).abs() < 0.01)?;
    Some((
        b,
        format!(
            "from the statistics ({from}): {} {} ÷ ({} {} + {} {}) = {} B per block",
            bytes.name,
            num_text(v[0]),
            cache.name,
            num_text(v[1]),
            direct.name,
            num_text(v[2]),
            grouped(ratio, 1)
        ),
    ))
}

/// The figures' totals when every one has a total (more digits), else their
/// per-second values; ratios of either are the same.
fn pick(figs: &[&Fig]) -> (Vec<f64>, &'static str) {
    match figs.iter().map(|f| f.total).collect::<Option<Vec<f64>>>() {
        Some(t) => (t, "from the totals"),
        None => (
            figs.iter().map(|f| f.per_s).collect(),
            "from the per-second figures",
        ),
    }
}

/// A figure as printed in the arithmetic: whole numbers without decimals.
fn num_text(v: f64) -> String {
    grouped(v, if v.fract() == 0.0 { 0 } else { 1 })
}

fn rate_text(v: f64) -> String {
    format!("{}/s", grouped(v, 1))
}

fn mib_text(bytes_per_s: f64) -> String {
    format!("{} MiB/s", grouped(bytes_per_s / MIB, 1))
}

fn size_text(bytes: f64) -> String {
    let kib = bytes / 1024.0;
    if bytes >= MIB && bytes % MIB == 0.0 {
        format!("{} B ({} MiB)", grouped(bytes, 0), grouped(bytes / MIB, 0))
    } else if (kib - kib.round()).abs() < 0.05 {
        format!("{} B ({} KiB)", grouped(bytes, 0), grouped(kib, 0))
    } else {
        format!("{} B ({} KiB)", grouped(bytes, 0), grouped(kib, 1))
    }
}

fn fig_text(f: &Fig) -> String {
    match f.total {
        Some(t) => format!(
            "{}: {} ({} in total)",
            f.name,
            rate_text(f.per_s),
            grouped(t, 0)
        ),
        None => format!("{}: {}", f.name, rate_text(f.per_s)),
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// A transfer size Cairn's vdbench accepts: the nearest multiple of 512, at
/// least 512 and at most [`XFER_MAX_BYTES`].
fn xfer_bytes(measured: f64) -> u64 {
    let units = (measured / XFER_ALIGN_BYTES as f64).round().max(1.0);
    // `as` saturates, and the cap below bounds it.
    ((units as u64).saturating_mul(XFER_ALIGN_BYTES)).min(XFER_MAX_BYTES)
}

/// Build a class: its rate is the stated IOPS, unless the stated bandwidth in
/// transfers of `size_bytes` needs more (the post's "use the higher of [IOPS
/// listed, Bandwidth listed]"), which is then said in a note.
fn class(
    kind: ClassKind,
    stated_iops: f64,
    stated_bytes_per_s: f64,
    measured_size_bytes: f64,
    size_bytes: u64,
    mut arithmetic: Vec<String>,
    notes: &mut Vec<String>,
) -> IoClass {
    let by_bandwidth = stated_bytes_per_s / size_bytes as f64;
    let (basis, rate) = if by_bandwidth > stated_iops * (1.0 + AGREE_PCT / 100.0) {
        (Basis::Bandwidth, by_bandwidth)
    } else {
        (Basis::Iops, stated_iops)
    };
    if size_bytes as f64 != measured_size_bytes {
        arithmetic.push(format!("transfer size {}", size_text(size_bytes as f64)));
    }
    let by_iops_bw = stated_iops * size_bytes as f64;
    // by_bandwidth / stated_iops is also stated bandwidth / (IOPS × size).
    if (by_bandwidth - stated_iops).abs() > stated_iops * AGREE_PCT / 100.0 {
        let line = format!(
            "{}: IOPS and bandwidth disagree at {}: {} × {} = {} against the stated {}, or {} ÷ {} = {}; using the higher of the two, {} (the post's rule)",
            kind.describe(),
            size_text(size_bytes as f64),
            rate_text(stated_iops),
            grouped(size_bytes as f64, 0),
            mib_text(by_iops_bw),
            mib_text(stated_bytes_per_s),
            mib_text(stated_bytes_per_s),
            size_text(size_bytes as f64),
            rate_text(by_bandwidth),
            match basis {
                Basis::Iops => format!("{} (IOPS)", rate_text(rate)),
                Basis::Bandwidth => format!("{} (bandwidth)", rate_text(rate)),
            }
        );
        arithmetic.push(line.clone());
        notes.push(line);
    }
    arithmetic.push(format!(
        "rate {} × {} B = {}",
        rate_text(rate),
        grouped(size_bytes as f64, 0),
        mib_text(rate * size_bytes as f64)
    ));
    IoClass {
        kind,
        size_bytes,
        measured_size_bytes,
        stated_iops,
        stated_bytes_per_s,
        basis,
        awr_rate_per_s: rate,
        rate_per_s: rate,
        arithmetic,
    }
}

/// Multiblock size bounds: a multiblock request is at least two blocks, and
/// at most `cap`. Returns the size to use and a line when a bound applied.
fn bound_multiblock(measured: f64, block: u64, cap: u64, cap_text: &str) -> (f64, Option<String>) {
    let lo = (2 * block).min(cap) as f64;
    if measured.is_nan() || measured < lo {
        (
            lo,
            Some(format!(
                "{} is under two blocks, the least a multiblock request moves: using {}",
                size_text(measured.max(0.0)),
                size_text(lo)
            )),
        )
    } else if measured > cap as f64 {
        (
            cap as f64,
            Some(format!(
                "{} is over the largest multiblock request ({cap_text}): capped at {}",
                size_text(measured),
                size_text(cap as f64)
            )),
        )
    } else {
        (measured, None)
    }
}

fn missing_note(notes: &mut Vec<String>, kind: ClassKind, need: &[(&str, bool)]) {
    let absent: Vec<&str> = need.iter().filter(|(_, ok)| !ok).map(|(n, _)| *n).collect();
    notes.push(format!(
        "{}: left out, the report has no usable {}",
        kind.describe(),
        absent.join(", no ")
    ));
}

fn read_classes(lk: &mut Lookup<'_>, block: u64, classes: &mut Vec<IoClass>) -> Stated {
    let r = lk.stat(READ_REQUESTS);
    let rm = lk.stat(READ_MULTI);
    let rb = lk.stat(READ_BYTES);
    let stated = Stated {
        read_iops: r.as_ref().map(|f| f.per_s),
        read_bytes_per_s: rb.as_ref().map(|f| f.per_s),
        ..Stated::default()
    };
    let (Some(r), Some(rm)) = (r, rm.clone()) else {
        let need = [
            (READ_REQUESTS, stated.read_iops.is_some()),
            (READ_MULTI, rm.is_some()),
        ];
        missing_note(&mut lk.notes, ClassKind::RandomRead, &need);
        missing_note(&mut lk.notes, ClassKind::SequentialRead, &need);
        return stated;
    };
    let b = block as f64;
    let single = r.per_s - rm.per_s;
    if single > 0.0 {
        let arithmetic = vec![
            fig_text(&r),
            fig_text(&rm),
            format!(
                "single-block reads = {} − {} = {}",
                grouped(r.per_s, 1),
                grouped(rm.per_s, 1),
                rate_text(single)
            ),
            format!("size = one block = {}", size_text(b)),
        ];
        classes.push(class(
            ClassKind::RandomRead,
            single,
            single * b,
            b,
            block,
            arithmetic,
            &mut lk.notes,
        ));
    } else {
        lk.notes.push(format!(
            "{}: {} − {} leaves none: left out",
            ClassKind::RandomRead.describe(),
            rate_text(r.per_s),
            rate_text(rm.per_s)
        ));
    }
    if rm.per_s <= 0.0 {
        lk.notes.push(format!(
            "{}: the report states none: left out",
            ClassKind::SequentialRead.describe()
        ));
        return stated;
    }
    let Some(rb) = rb else {
        missing_note(
            &mut lk.notes,
            ClassKind::SequentialRead,
            &[(READ_BYTES, false)],
        );
        return stated;
    };
    let (v, from) = pick(&[&r, &rm, &rb]);
    let (rt, rmt, rbt) = (v[0], v[1], v[2]);
    let single_t = rt - rmt;
    let measured = (rbt - single_t * b) / rmt;
    let mbrc = lk.parameter("db_file_multiblock_read_count");
    let (cap, cap_text) = match mbrc {
        Some(n) if n >= 1.0 && n * b <= XFER_MAX_BYTES as f64 => (
            (n as u64) * block,
            format!("db_file_multiblock_read_count {} × {} B", n as u64, block),
        ),
        _ => {
            lk.notes.push(format!(
                "{}: the report lists no db_file_multiblock_read_count: the largest multiblock read is assumed to be {}",
                ClassKind::SequentialRead.describe(),
                size_text(DEFAULT_MULTIBLOCK_READ_MAX_BYTES as f64)
            ));
            (
                DEFAULT_MULTIBLOCK_READ_MAX_BYTES,
                "assumed 1 MiB: no db_file_multiblock_read_count in the report".to_string(),
            )
        }
    };
    let mut arithmetic = vec![
        fig_text(&rm),
        fig_text(&rb),
        format!(
            "size ({from}) = ({} {} − {} single-block × {} B) ÷ {} multiblock = {}",
            rb.name,
            num_text(rbt),
            num_text(single_t),
            grouped(b, 0),
            num_text(rmt),
            size_text(measured)
        ),
    ];
    let (size, bound) = bound_multiblock(measured, block, cap, &cap_text);
    arithmetic.extend(bound);
    let bytes_per_s = measured.max(0.0) * rm.per_s;
    arithmetic.push(format!(
        "bandwidth = {} × {} = {}",
        rate_text(rm.per_s),
        size_text(measured.max(0.0)),
        mib_text(bytes_per_s)
    ));
    classes.push(class(
        ClassKind::SequentialRead,
        rm.per_s,
        bytes_per_s,
        measured,
        xfer_bytes(size),
        arithmetic,
        &mut lk.notes,
    ));
    stated
}

/// The redo write size in bytes and how it was found.
fn redo_size(
    lk: &mut Lookup<'_>,
    rw: &Fig,
    block: u64,
    opts: &DeriveOptions,
) -> (f64, Vec<String>) {
    if let Some(b) = opts.redo_write_bytes {
        return (
            b as f64,
            vec![format!("size = {} (given)", size_text(b as f64))],
        );
    }
    if let Some(rs) = lk.stat(REDO_SIZE) {
        let (v, from) = pick(&[&rs, rw]);
        if v[1] > 0.0 {
            let s = v[0] / v[1];
            return (
                s,
                vec![
                    fig_text(&rs),
                    format!(
                        "size ({from}) = {} {} ÷ {} {} = {}",
                        rs.name,
                        num_text(v[0]),
                        rw.name,
                        num_text(v[1]),
                        size_text(s)
                    ),
                ],
            );
        }
    }
    // The Load Profile's redo per second, when the statistic is cut out.
    let profile_redo = lk
        .report
        .load_profile
        .iter()
        .find(|l| {
            Figure::from_label(l.label.trim().trim_end_matches(':')) == Some(Figure::RedoSize)
        })
        .and_then(|l| usable(l.per_second));
    if let Some(redo_per_s) = profile_redo.filter(|_| rw.per_s > 0.0) {
        let s = redo_per_s / rw.per_s;
        return (
            s,
            vec![format!(
                "size = Load Profile Redo size {} B/s ÷ {} {} = {}",
                grouped(redo_per_s, 1),
                rw.name,
                rate_text(rw.per_s),
                size_text(s)
            )],
        );
    }
    // 11.2.0.4+: the IO Profile's `Redo (MB)` and `Redo Requests` rows, in
    // their write column (the read column is the archiver and recovery
    // reading the logs back, in larger pieces).
    let io = |label: &str| {
        lk.report
            .io_profile
            .iter()
            .find(|l| norm(l.label.trim_end_matches(':')) == label)
            .and_then(|l| usable(l.write_per_s))
    };
    if let (Some(mb), Some(req)) = (io("redo (mb)"), io("redo requests")) {
        if req > 0.0 {
            let s = mb * MIB / req;
            return (
                s,
                vec![format!(
                    "size = IO Profile Redo (MB) written {} MB/s × 1,048,576 ÷ Redo Requests written {} = {}",
                    grouped(mb, 1),
                    rate_text(req),
                    size_text(s)
                )],
            );
        }
    }
    let b = block as f64;
    lk.notes.push(format!(
        "{}: the report has no redo size: each redo write is assumed to be one block, {}, which leaves the other write classes as the statistics give them; give --redo-write-size if it is known",
        ClassKind::RedoWrite.describe(),
        size_text(b)
    ));
    (
        b,
        vec![format!(
            "size = one block, {} (assumed: no redo size in the report)",
            size_text(b)
        )],
    )
}

fn write_classes(
    lk: &mut Lookup<'_>,
    block: u64,
    opts: &DeriveOptions,
    classes: &mut Vec<IoClass>,
    mut stated: Stated,
) -> Stated {
    let b = block as f64;
    let w = lk.stat(WRITE_REQUESTS);
    let wm = lk.stat(WRITE_MULTI);
    let wb = lk.stat(WRITE_BYTES);
    let rw = lk.stat(REDO_WRITES).filter(|f| f.per_s > 0.0);
    stated.write_iops = w.as_ref().map(|f| f.per_s);
    stated.write_bytes_per_s = wb.as_ref().map(|f| f.per_s);
    stated.redo_writes_per_s = rw.as_ref().map(|f| f.per_s);

    // Redo first: its writes are part of the write totals and are carved out
    // of the other two classes, not added on top.
    let redo = rw.map(|rw| {
        let (s, lines) = redo_size(lk, &rw, block, opts);
        (rw, s, lines)
    });
    if redo.is_none() {
        missing_note(&mut lk.notes, ClassKind::RedoWrite, &[(REDO_WRITES, false)]);
    }
    let redo_rate = redo.as_ref().map_or(0.0, |(rw, _, _)| rw.per_s);

    let (Some(w), Some(wm)) = (w, wm.clone()) else {
        let need = [
            (WRITE_REQUESTS, stated.write_iops.is_some()),
            (WRITE_MULTI, wm.is_some()),
        ];
        missing_note(&mut lk.notes, ClassKind::RandomWrite, &need);
        missing_note(&mut lk.notes, ClassKind::MultiblockWrite, &need);
        if let Some((rw, s, mut lines)) = redo {
            lk.notes.push(
                "redo writes: the report has no write totals to take them out of: derived alone"
                    .to_string(),
            );
            lines.insert(0, fig_text(&rw));
            let size = xfer_bytes(s);
            classes.push(class(
                ClassKind::RedoWrite,
                rw.per_s,
                rw.per_s * s,
                s,
                size,
                lines,
                &mut lk.notes,
            ));
        }
        return stated;
    };
    let single = w.per_s - wm.per_s;
    if single < 0.0 {
        lk.notes.push(format!(
            "writes: {} multiblock exceed {} in all: the write statistics disagree, write classes left out",
            rate_text(wm.per_s),
            rate_text(w.per_s)
        ));
        return stated;
    }
    // Redo writes come out of the single-block writes first (LGWR's writes
    // are mostly a few KiB), the rest out of the multiblock ones.
    let from_single = redo_rate.min(single);
    let from_multi = (redo_rate - from_single).min(wm.per_s);
    if redo_rate > from_single + from_multi {
        lk.notes.push(format!(
            "redo writes: {} exceed all {} write requests: only {} taken out",
            rate_text(redo_rate),
            rate_text(w.per_s),
            rate_text(from_single + from_multi)
        ));
    }
    let random = single - from_single;
    if random > 0.0 {
        let mut arithmetic = vec![
            fig_text(&w),
            fig_text(&wm),
            format!(
                "single-block writes = {} − {} = {}",
                grouped(w.per_s, 1),
                grouped(wm.per_s, 1),
                rate_text(single)
            ),
        ];
        if from_single > 0.0 {
            arithmetic.push(format!(
                "minus {} redo writes (part of the write totals: taken out, not added) = {}",
                rate_text(from_single),
                rate_text(random)
            ));
        }
        arithmetic.push(format!("size = one block = {}", size_text(b)));
        classes.push(class(
            ClassKind::RandomWrite,
            random,
            random * b,
            b,
            block,
            arithmetic,
            &mut lk.notes,
        ));
    } else {
        lk.notes.push(format!(
            "{}: none left once redo is taken out: left out",
            ClassKind::RandomWrite.describe()
        ));
    }

    let multi = wm.per_s - from_multi;
    let redo_size_bytes = redo.as_ref().map_or(0.0, |(_, s, _)| *s);
    if multi <= 0.0 {
        lk.notes.push(format!(
            "{}: the report states none{}: left out",
            ClassKind::MultiblockWrite.describe(),
            if from_multi > 0.0 {
                " once redo is taken out"
            } else {
                ""
            }
        ));
    } else if let Some(wb) = wb {
        // Sizes in totals or per second alike: redo is carved in proportion.
        let (v, from) = match &redo {
            Some((rw, _, _)) => pick(&[&w, &wm, &wb, rw]),
            None => {
                let (mut v, from) = pick(&[&w, &wm, &wb]);
                v.push(0.0);
                (v, from)
            }
        };
        let (wt, wmt, wbt, rwt) = (v[0], v[1], v[2], v[3]);
        let share = |x: f64| if redo_rate > 0.0 { x / redo_rate } else { 0.0 };
        let single_t = wt - wmt - share(from_single) * rwt;
        let multi_t = wmt - share(from_multi) * rwt;
        let redo_bytes_t = rwt * redo_size_bytes;
        let measured = (wbt - single_t * b - redo_bytes_t) / multi_t;
        let mut arithmetic = vec![
            fig_text(&wm),
            fig_text(&wb),
            format!(
                "size ({from}) = ({} {} − {} single-block × {} B{}) ÷ {} multiblock = {}",
                wb.name,
                num_text(wbt),
                num_text(single_t),
                grouped(b, 0),
                if rwt > 0.0 {
                    format!(
                        " − {} redo writes × {} B",
                        num_text(rwt),
                        grouped(redo_size_bytes, 0)
                    )
                } else {
                    String::new()
                },
                num_text(multi_t),
                size_text(measured)
            ),
        ];
        if from_multi > 0.0 {
            arithmetic.insert(
                1,
                format!(
                    "multiblock writes = {} − {} redo writes (not all fit in the single-block writes) = {}",
                    grouped(wm.per_s, 1),
                    rate_text(from_multi),
                    rate_text(multi)
                ),
            );
        }
        let cap_text = "the largest transfer Cairn runs".to_string();
        let (size, bound) = bound_multiblock(measured, block, XFER_MAX_BYTES, &cap_text);
        arithmetic.extend(bound);
        let bytes_per_s = measured.max(0.0) * multi;
        arithmetic.push(format!(
            "bandwidth = {} × {} = {}",
            rate_text(multi),
            size_text(measured.max(0.0)),
            mib_text(bytes_per_s)
        ));
        classes.push(class(
            ClassKind::MultiblockWrite,
            multi,
            bytes_per_s,
            measured,
            xfer_bytes(size),
            arithmetic,
            &mut lk.notes,
        ));
    } else {
        missing_note(
            &mut lk.notes,
            ClassKind::MultiblockWrite,
            &[(WRITE_BYTES, false)],
        );
    }

    if let Some((rw, s, mut lines)) = redo {
        lines.insert(0, fig_text(&rw));
        lines.insert(
            1,
            "redo writes are counted in physical write total IO requests: taken out of the other write classes above, not added".to_string(),
        );
        classes.push(class(
            ClassKind::RedoWrite,
            rw.per_s,
            rw.per_s * s,
            s,
            xfer_bytes(s),
            lines,
            &mut lk.notes,
        ));
    }
    stated
}

/// A rate for a vdbench `iorate=`: up to three decimals, no trailing zeros.
fn iorate_text(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A size for a vdbench `xfersize=`: `16k` when whole KiB, else bytes.
fn xfersize_text(bytes: u64) -> String {
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{}m", bytes / (1024 * 1024))
    } else if bytes.is_multiple_of(1024) {
        format!("{}k", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

/// The totals check line: the classes' sum against what the report states.
fn check_line(
    what: &str,
    parts: &[(String, f64)],
    stated: Option<(f64, &str)>,
    fmt: fn(f64) -> String,
) -> String {
    let sum: f64 = parts.iter().map(|(_, v)| v).sum();
    let terms: Vec<String> = parts
        .iter()
        .map(|(name, v)| format!("{} {name}", fmt(*v)))
        .collect();
    let mut line = format!("{what}: {} = {}", terms.join(" + "), fmt(sum));
    match stated {
        Some((s, stat)) if s > 0.0 => {
            let _ = write!(
                line,
                " ≈ the {} the report states ({stat}): {}%",
                fmt(s),
                cairn_kit_report::units::signed(100.0 * (sum / s - 1.0), 1)
            );
        }
        _ => line.push_str(" (the report states no total to check against)"),
    }
    line
}

/// A vdbench parameter file replaying `d`: the caller's sd lines `sds` (which
/// must define sds named `sd…`: the wds use `sd=sd*`; they may use
/// `$variables` the caller then passes to the parser), then one wd per class
/// at its own scaled `iorate=` and priority, and one rd running them together
/// at their sum. Comments carry the arithmetic and the totals check, so the
/// engineer can check it as the post does.
pub fn vdbench_text(d: &Derivation, sds: &str) -> String {
    let mut out = String::new();
    let mut c = |line: &str| {
        for l in line.lines() {
            out.push_str("* ");
            out.push_str(l);
            out.push('\n');
        }
        if line.is_empty() {
            out.push_str("*\n");
        }
    };
    c(&format!(
        "Cairn AWR workload: the I/O classes of {}, derived by the \"To POC\" method",
        if d.source.is_empty() {
            "the report"
        } else {
            &d.source
        }
    ));
    c("(docs/awr-replay.md); each class's arithmetic is under its wd.");
    c(&format!(
        "Block size {}: {}.",
        size_text(d.block_size_bytes as f64),
        d.block_size_from
    ));
    if let Some(e) = d.elapsed_s {
        c(&format!("Report elapsed: {} s.", grouped(e, 1)));
    }
    if d.scale != 1.0 {
        c(&format!(
            "Rates are scaled by {} (--scale): the AWR's rates are in the comments.",
            d.scale
        ));
    }
    if !d.notes.is_empty() {
        c("");
        c("Notes:");
        for n in &d.notes {
            c(&format!("  {}", one_line(n)));
        }
    }
    c("");
    let mut text = out;
    text.push_str(sds);
    if !sds.is_empty() && !sds.ends_with('\n') {
        text.push('\n');
    }
    let mut rates = Vec::new();
    for cl in &d.classes {
        let rate = iorate_text(cl.rate_per_s);
        rates.push(rate.parse::<f64>().unwrap_or(cl.rate_per_s));
        text.push_str("*\n");
        let _ = writeln!(
            text,
            "* {}: {} at {} ({}, {})",
            cl.kind.describe(),
            rate_text(cl.awr_rate_per_s),
            size_text(cl.size_bytes as f64),
            mib_text(cl.awr_bytes_per_s()),
            match cl.basis {
                Basis::Iops => "rate from the stated IOPS",
                Basis::Bandwidth => "rate from the stated bandwidth, the higher",
            }
        );
        for a in &cl.arithmetic {
            let _ = writeln!(text, "*   {}", one_line(a));
        }
        if d.scale != 1.0 {
            let _ = writeln!(
                text,
                "*   scaled: {} × {} = {}",
                rate_text(cl.awr_rate_per_s),
                d.scale,
                rate_text(cl.rate_per_s)
            );
        }
        let _ = writeln!(
            text,
            "wd={},sd=sd*,rdpct={},xfersize={},seekpct={},iorate={rate},priority={}",
            cl.kind.wd_name(),
            if cl.kind.is_read() { 100 } else { 0 },
            xfersize_text(cl.size_bytes),
            cl.kind.seekpct(),
            cl.kind.priority()
        );
    }
    text.push_str("*\n* Totals check (unscaled):\n");
    let part = |reads: bool, f: fn(&IoClass) -> f64| -> Vec<(String, f64)> {
        d.classes
            .iter()
            .filter(|c| c.kind.is_read() == reads)
            .map(|c| (c.kind.describe().to_string(), f(c)))
            .collect()
    };
    let checks = [
        check_line(
            "read IOPS",
            &part(true, |c| c.awr_rate_per_s),
            d.stated.read_iops.map(|v| (v, READ_REQUESTS)),
            rate_text,
        ),
        check_line(
            "read bandwidth",
            &part(true, IoClass::awr_bytes_per_s),
            d.stated.read_bytes_per_s.map(|v| (v, READ_BYTES)),
            mib_text,
        ),
        check_line(
            "write IOPS",
            &part(false, |c| c.awr_rate_per_s),
            d.stated.write_iops.map(|v| (v, WRITE_REQUESTS)),
            rate_text,
        ),
        check_line(
            "write bandwidth",
            &part(false, IoClass::awr_bytes_per_s),
            d.stated.write_bytes_per_s.map(|v| (v, WRITE_BYTES)),
            mib_text,
        ),
    ];
    for line in checks {
        let _ = writeln!(text, "*   {line}");
    }
    let total: f64 = rates.iter().sum();
    let wds: Vec<&str> = d.classes.iter().map(|c| c.kind.wd_name()).collect();
    let _ = writeln!(
        text,
        "* The rd's iorate is the sum of the wds' ({}).",
        rates
            .iter()
            .map(|r| iorate_text(*r))
            .collect::<Vec<_>>()
            .join(" + ")
    );
    let _ = writeln!(
        text,
        "rd=rd_awr_replay,wd=({}),iorate={},elapsed={},interval={},warmup={}",
        wds.join(","),
        iorate_text(total),
        d.run_elapsed_s,
        d.run_interval_s,
        d.run_warmup_s
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_sizes_are_multiples_of_512_within_bounds() {
        assert_eq!(xfer_bytes(961_431.0), 961_536);
        assert_eq!(xfer_bytes(795_581.0), 795_648);
        assert_eq!(xfer_bytes(10.0), 512);
        assert_eq!(xfer_bytes(f64::NAN), 512);
        assert_eq!(xfer_bytes(1e30), XFER_MAX_BYTES);
        assert_eq!(xfersize_text(961_536), "939k");
        assert_eq!(xfersize_text(1024 * 1024), "1m");
        assert_eq!(xfersize_text(1536), "1536");
    }

    #[test]
    fn rates_print_without_trailing_zeros() {
        assert_eq!(iorate_text(4390.9), "4390.9");
        assert_eq!(iorate_text(50.0), "50");
        assert_eq!(iorate_text(0.474), "0.474");
    }

    #[test]
    fn block_sizes_parse_like_the_command_line_gives_them() {
        assert_eq!(parse_block_size("8k"), Ok(8192));
        assert_eq!(parse_block_size("16384"), Ok(16384));
        assert!(parse_block_size("3000").is_err());
        assert!(parse_block_size("1m").is_err());
        assert!(parse_block_size("eight").is_err());
    }
}
