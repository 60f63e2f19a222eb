//! The report's figures as the derivation takes them: statistics by their
//! full or cut names, per second (or Total ÷ elapsed), the parameters, the
//! elapsed time and the block size.

use cairn_kit_report::units::grouped;

use crate::model::{AwrReport, Statistic};
use crate::number::parse_number;

use super::derivation::{valid_block_size, DeriveOptions, DEFAULT_BLOCK_SIZE_BYTES};
use super::figures::{num_text, rate_text};

/// A printed statistic name at least this long may have been cut to its
/// column (32 characters in AWR, 33 in Statspack, then right-trimmed).
const STAT_NAME_CUT_CHARS_MIN: usize = 30;

pub(super) const READ_REQUESTS: &str = "physical read total IO requests";
pub(super) const READ_MULTI: &str = "physical read total multi block requests";
pub(super) const READ_BYTES: &str = "physical read total bytes";
pub(super) const WRITE_REQUESTS: &str = "physical write total IO requests";
pub(super) const WRITE_MULTI: &str = "physical write total multi block requests";
pub(super) const WRITE_BYTES: &str = "physical write total bytes";
pub(super) const REDO_WRITES: &str = "redo writes";
pub(super) const REDO_SIZE: &str = "redo size";

/// A statistic the derivation uses: its rate and, when printed, its total.
#[derive(Debug, Clone)]
pub(super) struct Fig {
    /// As printed.
    pub(super) name: String,
    pub(super) per_s: f64,
    pub(super) total: Option<f64>,
}

pub(super) struct Lookup<'a> {
    pub(super) report: &'a AwrReport,
    pub(super) elapsed_s: Option<f64>,
    pub(super) notes: Vec<String>,
}

pub(super) fn usable(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite() && *v >= 0.0)
}

impl Lookup<'_> {
    /// The statistic `full` (matched as [`find_statistic`] does), with a
    /// per-second value from the report or Total ÷ elapsed; a note when it is
    /// there but unusable.
    pub(super) fn stat(&mut self, full: &str) -> Option<Fig> {
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

    pub(super) fn parameter(&self, name: &str) -> Option<f64> {
        self.report
            .parameters
            .iter()
            .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .and_then(|(_, v)| parse_number(v.trim().trim_matches('\'')))
            .filter(|v| v.is_finite() && *v > 0.0)
    }
}

/// A name compared as AWR prints it in any case and spacing.
pub(crate) fn norm(s: &str) -> String {
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
pub(super) fn elapsed_s(report: &AwrReport) -> Option<f64> {
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
pub(super) fn block_size(lk: &mut Lookup<'_>, opts: &DeriveOptions) -> (u64, String) {
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
pub(super) fn pick(figs: &[&Fig]) -> (Vec<f64>, &'static str) {
    match figs.iter().map(|f| f.total).collect::<Option<Vec<f64>>>() {
        Some(t) => (t, "from the totals"),
        None => (
            figs.iter().map(|f| f.per_s).collect(),
            "from the per-second figures",
        ),
    }
}

pub(super) fn fig_text(f: &Fig) -> String {
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
