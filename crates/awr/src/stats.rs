//! The statistics tables of a text report: AWR's "Instance Activity Stats"
//! (and its 12c "Key Instance Activity Stats"), Statspack's too —
//! `Statistic / Total / per Second / per Trans`.
//!
//! A row is a name followed by three cells. Names are printed in a
//! 32-character column and cut to it (`physical read total bytes optimi`), and
//! kept as printed. Rows are read by their last three whitespace-separated
//! cells rather than by column positions, so a report pasted into a blog or a
//! mail with its alignment lost (runs of spaces collapsed, unicode dashes for
//! the rule) reads the same. A line inside a table that is not a row is
//! named in a warning with its line number, never dropped silently.

use super::number::parse_number;

/// One statistic as printed; a cell with no value (blank, `N/A`, `#####`) is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatRow {
    pub name: String,
    pub total: Option<f64>,
    pub per_second: Option<f64>,
    pub per_trans: Option<f64>,
    /// 1-based line of the report.
    pub line: usize,
}

/// Something the reader could not use, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub line: usize,
    pub message: String,
}

/// Every row of every statistics table in `text`, in order, and a warning for
/// each line inside a table that is not a row.
pub fn read_stat_tables(text: &str) -> (Vec<StatRow>, Vec<Warning>) {
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    let mut in_table = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if is_header(trimmed) {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        if trimmed.is_empty() {
            in_table = false;
            continue;
        }
        if is_rule(trimmed) {
            continue;
        }
        if trimmed.to_ascii_uppercase().contains("SNIP") {
            warnings.push(Warning {
                line,
                message: format!("rows were cut from the report here ({trimmed})"),
            });
            continue;
        }
        match row(trimmed, line) {
            Some(r) => rows.push(r),
            None => warnings.push(Warning {
                line,
                message: format!(
                    "`{}` is not a statistic row (a name and three numbers): skipped",
                    shorten(trimmed)
                ),
            }),
        }
    }
    (rows, warnings)
}

/// `Statistic  Total  per Second  per Trans`, however spaced or cased.
fn is_header(line: &str) -> bool {
    let words: Vec<String> = line
        .split_whitespace()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    words == ["statistic", "total", "per", "second", "per", "trans"]
}

/// A rule under a header: dashes (ASCII or unicode), `=` and spaces.
fn is_rule(line: &str) -> bool {
    !line.is_empty()
        && line
            .chars()
            .all(|c| matches!(c, '-' | '=' | ' ' | '\u{2010}'..='\u{2015}' | '\u{2212}'))
}

fn row(line: &str, number: usize) -> Option<StatRow> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    if tokens.len() < 4 {
        return None;
    }
    let (name, cells) = tokens.split_at(tokens.len() - 3);
    let values: Vec<Option<f64>> = cells.iter().map(|c| parse_number(c)).collect();
    // Each cell is a number or a no-value marker; at least one is a number.
    let is_cell = |c: &str, v: Option<f64>| v.is_some() || no_value(c);
    if !cells.iter().zip(&values).all(|(c, v)| is_cell(c, *v)) || values.iter().all(Option::is_none)
    {
        return None;
    }
    Some(StatRow {
        name: name.join(" "),
        total: values[0],
        per_second: values[1],
        per_trans: values[2],
        line: number,
    })
}

/// How Oracle prints a cell with no value: `N/A`, or a run of `#` when the
/// value did not fit its column.
fn no_value(cell: &str) -> bool {
    cell.eq_ignore_ascii_case("n/a") || (!cell.is_empty() && cell.chars().all(|c| c == '#'))
}

fn shorten(line: &str) -> String {
    const MAX: usize = 80;
    if line.chars().count() <= MAX {
        line.to_string()
    } else {
        let cut: String = line.chars().take(MAX).collect();
        format!("{cut}…")
    }
}
