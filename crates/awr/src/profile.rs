//! The Load Profile of an AWR or Statspack text report.
//!
//! Rows are `Label:  per second  per transaction  [per exec  per call]`, the
//! label right-aligned before its colon. 11g and 12c+ label the same figures
//! differently (`Redo size:` / `Redo size (bytes):`, `Logical reads:` /
//! `Logical read (blocks):`, `Physical reads:` / `Physical read (blocks):`,
//! `Executes:` / `Executes (SQL):`), and 12c adds the IO rows (`Read IO
//! requests:`, `Read IO (MB):` …): [`Figure`] names each figure once,
//! whichever label carried it. Cells are taken left to right, because a row
//! only ever lacks its last columns (`Transactions:` has no per-transaction
//! value), which also keeps a pasted report with its spacing lost readable.

use super::number::parse_number;
use super::stats::Warning;

/// A Load Profile figure, named once for both label sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Figure {
    DbTime,
    DbCpu,
    BackgroundCpu,
    RedoSize,
    LogicalReads,
    BlockChanges,
    PhysicalReads,
    PhysicalWrites,
    ReadIoRequests,
    WriteIoRequests,
    ReadIoMb,
    WriteIoMb,
    UserCalls,
    Parses,
    HardParses,
    Logons,
    Executes,
    Rollbacks,
    Transactions,
}

impl Figure {
    /// The figure a label names, in either label set (case and spacing ignored).
    pub fn from_label(label: &str) -> Option<Figure> {
        let l: String = label
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_ascii_lowercase();
        Some(match l.as_str() {
            "db time(s)" | "db time (s)" => Figure::DbTime,
            "db cpu(s)" | "db cpu (s)" => Figure::DbCpu,
            "background cpu(s)" | "background cpu (s)" => Figure::BackgroundCpu,
            "redo size" | "redo size (bytes)" => Figure::RedoSize,
            "logical reads" | "logical read (blocks)" | "logical reads (blocks)" => {
                Figure::LogicalReads
            }
            "block changes" => Figure::BlockChanges,
            "physical reads" | "physical read (blocks)" | "physical reads (blocks)" => {
                Figure::PhysicalReads
            }
            "physical writes" | "physical write (blocks)" | "physical writes (blocks)" => {
                Figure::PhysicalWrites
            }
            "read io requests" => Figure::ReadIoRequests,
            "write io requests" => Figure::WriteIoRequests,
            "read io (mb)" => Figure::ReadIoMb,
            "write io (mb)" => Figure::WriteIoMb,
            "user calls" => Figure::UserCalls,
            "parses" | "parses (sql)" => Figure::Parses,
            "hard parses" | "hard parses (sql)" => Figure::HardParses,
            "logons" => Figure::Logons,
            "executes" | "executes (sql)" => Figure::Executes,
            "rollbacks" => Figure::Rollbacks,
            "transactions" => Figure::Transactions,
            _ => return None,
        })
    }
}

/// One row of the Load Profile, as printed.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRow {
    /// The label as printed, without its colon.
    pub label: String,
    /// The figure it names, if it is one Cairn knows (others are kept, unnamed).
    pub figure: Option<Figure>,
    pub per_second: Option<f64>,
    pub per_transaction: Option<f64>,
    pub per_exec: Option<f64>,
    pub per_call: Option<f64>,
    pub line: usize,
}

/// The Load Profile's rows, or `None` when the text has no Load Profile;
/// lines in it that are not rows are named in warnings.
pub fn read_load_profile(text: &str) -> Option<(Vec<ProfileRow>, Vec<Warning>)> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| {
        l.trim_start()
            .to_ascii_lowercase()
            .starts_with("load profile")
    })?;
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    let mut seen_row = false;
    for (i, raw) in lines.iter().enumerate().skip(start + 1) {
        let line = i + 1;
        let t = raw.trim();
        if t.is_empty() {
            if seen_row {
                break;
            }
            continue;
        }
        // The `~~~~` underline and the `----` rules under the column names.
        if t.chars()
            .all(|c| matches!(c, '~' | '-' | ' ' | '\u{2010}'..='\u{2015}'))
        {
            continue;
        }
        let Some((label, cells)) = t.split_once(':') else {
            if seen_row {
                // A new section started without a blank line (a pasted report).
                break;
            }
            continue;
        };
        let values: Vec<Option<f64>> = cells.split_whitespace().map(parse_number).collect();
        if values.is_empty() || values.len() > 4 || values.iter().any(Option::is_none) {
            warnings.push(Warning {
                line,
                message: format!(
                    "Load Profile line `{t}` is not a label and up to four numbers: skipped"
                ),
            });
            continue;
        }
        seen_row = true;
        let get = |k: usize| values.get(k).copied().flatten();
        rows.push(ProfileRow {
            label: label.trim().to_string(),
            figure: Figure::from_label(label),
            per_second: get(0),
            per_transaction: get(1),
            per_exec: get(2),
            per_call: get(3),
            line,
        });
    }
    Some((rows, warnings))
}

/// The row of `figure`, if the profile has it.
pub fn figure(rows: &[ProfileRow], figure: Figure) -> Option<&ProfileRow> {
    rows.iter().find(|r| r.figure == Some(figure))
}
