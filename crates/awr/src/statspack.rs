//! Statspack text reports (`spreport.sql` output, 9i/10g through 12c+).
//!
//! Statspack is AWR's ancestor and prints the same figures in nearly the
//! same layout (docs/awr-formats.md §3): a header whose `Database` cell is
//! blank in 12c, `Top 5 Timed Events` without a Wait Class column (and with
//! idle events in it), `Foreground` / `Background Wait Events` with a
//! `%Total Call Time` column, one millisecond `Wait Event Histogram`, and
//! `Instance Activity Stats` with 33-character names and `############` where
//! a per-transaction value did not fit. Sections end with a 61-hyphen rule,
//! often followed at once by the next title; long tables repeat their title
//! and headings on every page. Columns are taken from the dash rule under the
//! headings (histogram cells are blank when zero, so position is the only
//! way to tell which bucket a figure is in), each word going to the column it
//! overlaps most, so a figure that spills a character past its column still
//! lands right.

use std::ops::Range;

use super::html::{event_line, EventColumns, PARAMETERS_KEPT};
use super::model::{
    AwrReport, EventLine, Format, Header, HistogramLine, ParseWarning, ProfileLine, Statistic,
};
use super::number::{parse_number, parse_size_bytes, whole_u32};
use super::profile::read_load_profile;
use super::stats::read_stat_tables;

/// The section titles read, longest first so that `Wait Events` does not
/// claim `Wait Events (fg and bg)`.
const TITLES: [&str; 9] = [
    "Top 5 Timed Foreground Events",
    "Wait Events (fg and bg)",
    "Background Wait Events",
    "Foreground Wait Events",
    "Instance Activity Stats",
    "Wait Event Histogram",
    "init.ora Parameters",
    "Top 5 Timed Events",
    "Wait Events",
];
/// Whether a line is a Statspack report's banner, `STATSPACK report for`
/// (any case), at its start.
fn is_banner(line: &str) -> bool {
    const BANNER: &str = "statspack report for";
    line.trim_start()
        .get(..BANNER.len())
        .is_some_and(|b| b.eq_ignore_ascii_case(BANNER))
}

/// The line (1-based) of a Statspack report's banner, wherever it is in
/// `text`: a report pasted into a mail comes after the mail's text.
pub(crate) fn banner_line(text: &str) -> Option<usize> {
    text.lines().position(is_banner).map(|i| i + 1)
}

/// The header is in the first lines under the banner; SQL text further down
/// must not be taken for it.
const HEADER_LINES_MAX: usize = 120;
/// Row warnings of one section beyond this are summed up in one.
const ROW_WARNINGS_MAX: usize = 20;

/// Read a Statspack text report. Never fails: what could not be read is in
/// `warnings`, and a text that is not a Statspack report says so there.
pub fn parse_statspack_text(text: &str, source: &str) -> AwrReport {
    let mut lines: Vec<String> = text.lines().map(normalize).collect();
    let mut report = AwrReport::empty(source, Format::StatspackText);
    let mut warnings: Vec<ParseWarning> = Vec::new();

    let banner = keep_report_only(&mut lines, &mut warnings);

    read_header(&lines[banner.unwrap_or(0)..], &mut report.header);
    read_profile(&lines, &mut report, &mut warnings);

    let blocks = blocks(&lines);
    let has = |t: &str| blocks.iter().any(|b| b.title == t);
    let top_found = read_blocks(&lines, &blocks, &mut report, &mut warnings);
    let activity_found = read_activity(&lines, &blocks, &mut report, &mut warnings);

    if report.header.block_size.is_none() {
        report.header.block_size = report
            .parameters
            .iter()
            .find(|(k, _)| k == "db_block_size")
            .and_then(|(_, v)| parse_number(v))
            .and_then(whole_u32);
    }
    if report.header.release.is_none() && report.header.db_id.is_none() {
        warn(
            &mut warnings,
            "report header",
            0,
            "no database line (DB Id, Release) found: the header is not read".into(),
        );
    }
    let missing = [
        (top_found, "Top 5 Timed Events"),
        (
            has("Foreground Wait Events") || has("Wait Events"),
            "Foreground Wait Events",
        ),
        (has("Background Wait Events"), "Background Wait Events"),
        (activity_found, "Instance Activity Stats"),
    ];
    for (found, name) in missing {
        if !found {
            warn(
                &mut warnings,
                name,
                0,
                format!("section `{name}` is missing from the report: its figures are unknown"),
            );
        }
    }
    report.warnings = warnings;
    report
}

fn warn(warnings: &mut Vec<ParseWarning>, section: &str, line: usize, message: String) {
    warnings.push(ParseWarning {
        section: section.to_string(),
        line,
        message,
    });
}

/// A section reader's warnings (line, message), each under `section`.
fn warn_all(warnings: &mut Vec<ParseWarning>, section: &str, ws: Vec<Warn>) {
    ws.into_iter()
        .for_each(|(l, m)| warn(warnings, section, l, m));
}

/// The index of the report's banner line, if there is one. Only the report
/// is read, from its banner to its `End of Report`: the rest is blanked (so
/// line numbers stay the file's), as the text of a mail around a pasted
/// report could otherwise pass for a Load Profile row.
fn keep_report_only(lines: &mut [String], warnings: &mut Vec<ParseWarning>) -> Option<usize> {
    let banner = lines.iter().position(|l| is_banner(l));
    match banner {
        None => warn(
            warnings,
            "report",
            0,
            "not a Statspack report: no `STATSPACK report for` banner; sections are read as \
             far as they match"
                .into(),
        ),
        Some(from) => {
            let end = lines[from..]
                .iter()
                .position(|l| l.trim_start().starts_with("End of Report"))
                .map_or(lines.len(), |k| from + k + 1);
            let text_in = |r: &[String]| r.iter().any(|l| !l.trim().is_empty());
            let (before, after) = (text_in(&lines[..from]), text_in(&lines[end..]));
            if let Some(w) = super::text::surroundings_warning(from + 1, end, before, after) {
                warn(warnings, &w.section, w.line, w.message);
            }
            for (i, l) in lines.iter_mut().enumerate() {
                if i < from || i >= end {
                    l.clear();
                }
            }
        }
    }
    banner
}

/// The Load Profile, read by the shared profile reader.
fn read_profile(lines: &[String], report: &mut AwrReport, warnings: &mut Vec<ParseWarning>) {
    let joined = lines.join("\n");
    match read_load_profile(&joined) {
        Some((rows, ws)) => {
            report.load_profile = rows.iter().map(ProfileLine::from).collect();
            for w in ws {
                warn(warnings, "Load Profile", w.line, w.message);
            }
            if report.load_profile.is_empty() {
                warn(
                    warnings,
                    "Load Profile",
                    0,
                    "section `Load Profile` is present but no row of it could be read".into(),
                );
            }
        }
        None => warn(
            warnings,
            "Load Profile",
            0,
            "section `Load Profile` is missing from the report: its figures are unknown".into(),
        ),
    }
}

/// The event, histogram and parameter sections; whether a Top 5 section
/// was among them.
fn read_blocks(
    lines: &[String],
    blocks: &[Block],
    report: &mut AwrReport,
    warnings: &mut Vec<ParseWarning>,
) -> bool {
    let has = |t: &str| blocks.iter().any(|b| b.title == t);
    let mut top_found = false;
    for b in blocks {
        match b.title {
            "Top 5 Timed Events" | "Top 5 Timed Foreground Events" => {
                top_found = true;
                warn_all(
                    warnings,
                    b.title,
                    read_events(lines, b, true, &mut report.top_events),
                );
            }
            "Foreground Wait Events" => {
                warn_all(
                    warnings,
                    b.title,
                    read_events(lines, b, false, &mut report.foreground_events),
                );
            }
            "Wait Events" if !has("Foreground Wait Events") => {
                warn_all(
                    warnings,
                    b.title,
                    read_events(lines, b, false, &mut report.foreground_events),
                );
                warn(
                    warnings,
                    b.title,
                    b.start + 1,
                    "this Statspack's `Wait Events` table holds foreground and background \
                     waits together: read as the foreground events"
                        .into(),
                );
            }
            "Background Wait Events" => {
                warn_all(
                    warnings,
                    b.title,
                    read_events(lines, b, false, &mut report.background_events),
                );
            }
            "Wait Event Histogram" => {
                warn_all(
                    warnings,
                    b.title,
                    read_histogram(lines, b, &mut report.histograms),
                );
            }
            "init.ora Parameters" => read_parameters(lines, b, &mut report.parameters),
            _ => {}
        }
    }
    top_found
}

/// The Instance Activity Stats sections, read by the shared statistics
/// reader; whether there was one.
fn read_activity(
    lines: &[String],
    blocks: &[Block],
    report: &mut AwrReport,
    warnings: &mut Vec<ParseWarning>,
) -> bool {
    let activity: Vec<&Block> = blocks
        .iter()
        .filter(|b| b.title == "Instance Activity Stats")
        .collect();
    if !activity.is_empty() {
        // Hand the stats reader the activity sections only, other lines
        // blanked so its line numbers are the report's.
        let mut masked: Vec<&str> = vec![""; lines.len()];
        for b in &activity {
            for (i, slot) in masked.iter_mut().enumerate().take(b.end).skip(b.start) {
                let l = lines[i].as_str();
                if title_of(l).is_none() && !l.trim_start().starts_with("->") {
                    *slot = l;
                }
            }
        }
        let (rows, ws) = read_stat_tables(&masked.join("\n"));
        report.instance_activity = rows.iter().map(Statistic::from).collect();
        for w in ws {
            warn(warnings, "Instance Activity Stats", w.line, w.message);
        }
        if report.instance_activity.is_empty() {
            warn(
                warnings,
                "Instance Activity Stats",
                activity[0].start + 1,
                "section `Instance Activity Stats` is present but no row of it could be read"
                    .into(),
            );
        }
    }
    !activity.is_empty()
}

/// Strip what spooling and pasting add (`\r`, form feeds, non-breaking
/// spaces, tabs) and turn typographic dashes back into the hyphens of a rule
/// (em = 3, en = 2, as WordPress made them).
fn normalize(line: &str) -> String {
    let mut s = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '\r' | '\u{c}' => {}
            '\u{a0}' | '\t' => s.push(' '),
            '\u{2014}' => s.push_str("---"),
            '\u{2013}' => s.push_str("--"),
            '\u{2212}' => s.push('-'),
            _ => s.push(c),
        }
    }
    s
}

// ---------------------------------------------------------------------------
// Sections.

#[derive(Debug)]
struct Block {
    title: &'static str,
    /// Index of the title line.
    start: usize,
    /// Index past the last line (the end rule, or the next section's title).
    end: usize,
}

/// The known section a title line opens: the text before `DB/Inst:` (or the
/// old ` for DB:`) is the title, optionally followed by column headings
/// after two spaces (`Top 5 Timed Events      Avg %Total`).
fn title_of(line: &str) -> Option<&'static str> {
    let t = line.trim();
    let cut = [t.find("DB/Inst:"), t.find(" for DB:")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(t.len());
    let head = t.get(..cut)?.trim_end();
    TITLES.into_iter().find(|title| {
        head.get(..title.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(title))
            && head
                .get(title.len()..)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("  "))
    })
}

/// A line opening any section, known or not (ends the one before it).
fn opens_section(line: &str) -> bool {
    line.contains("DB/Inst:") || line.contains(" for DB:") || title_of(line).is_some()
}

/// `          ------…` — one run of 40+ hyphens.
fn is_end_rule(line: &str) -> bool {
    let t = line.trim();
    t.len() >= 40 && t.chars().all(|c| c == '-')
}

/// The character ranges of the columns of a rule under headings: two or more
/// runs of `-` (or `~`, which Statspack puts over its header's label column).
fn column_rule(line: &str) -> Option<Vec<Range<usize>>> {
    let t = line.trim();
    if t.is_empty() || !t.contains('-') || !t.chars().all(|c| matches!(c, '-' | '~' | ' ')) {
        return None;
    }
    let runs = runs(line, |c| c == '-' || c == '~');
    (runs.len() >= 2).then_some(runs)
}

fn runs(line: &str, keep: impl Fn(char) -> bool) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.chars().enumerate() {
        match (keep(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push(s..line.chars().count());
    }
    out
}

fn blocks(lines: &[String]) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    let mut open: Option<(&'static str, usize)> = None;
    for (i, l) in lines.iter().enumerate() {
        if let Some((title, start)) = open {
            if is_end_rule(l) {
                out.push(Block {
                    title,
                    start,
                    end: i,
                });
                open = None;
                continue;
            }
            // A page break repeats the same title: the section goes on.
            if title_of(l) == Some(title) || !opens_section(l) {
                continue;
            }
            out.push(Block {
                title,
                start,
                end: i,
            });
            open = None;
        }
        if let Some(title) = title_of(l) {
            open = Some((title, i));
        }
    }
    if let Some((title, start)) = open {
        out.push(Block {
            title,
            start,
            end: lines.len(),
        });
    }
    out
}

/// Split `line` into the columns `cols`: each word goes to the column it
/// overlaps most (the nearest when it overlaps none).
fn split_cells(line: &str, cols: &[Range<usize>]) -> Vec<String> {
    let mut cells = vec![String::new(); cols.len()];
    if cols.is_empty() {
        return cells;
    }
    let chars: Vec<char> = line.chars().collect();
    for word in runs(line, |c| !c.is_whitespace()) {
        let overlap =
            |c: &Range<usize>| word.end.min(c.end).saturating_sub(word.start.max(c.start));
        let distance = |c: &Range<usize>| {
            if word.end <= c.start {
                c.start - word.end
            } else {
                word.start.saturating_sub(c.end)
            }
        };
        let best = (0..cols.len())
            .max_by_key(|&k| {
                (
                    overlap(&cols[k]),
                    std::cmp::Reverse(distance(&cols[k])),
                    std::cmp::Reverse(k),
                )
            })
            .unwrap_or(0);
        let text: String = chars.get(word.clone()).unwrap_or_default().iter().collect();
        let c = &mut cells[best];
        if !c.is_empty() {
            c.push(' ');
        }
        c.push_str(&text);
    }
    cells
}

/// A section's table: the headings over each column (stacked lines joined),
/// the last heading line alone (histogram bucket labels), and the rows.
#[derive(Debug, Default)]
struct Table {
    headings: Vec<String>,
    last_headings: Vec<String>,
    /// (1-based line, cells).
    rows: Vec<(usize, Vec<String>)>,
    /// The section says it has no rows.
    no_data: bool,
}

fn read_table(lines: &[String], b: &Block, stop_at_blank: bool) -> Table {
    let mut t = Table::default();
    let mut cols: Option<Vec<Range<usize>>> = None;
    for i in b.start + 1..b.end.min(lines.len()) {
        let l = &lines[i];
        let s = l.trim();
        if title_of(l) == Some(b.title) {
            cols = None;
            continue;
        }
        if s.is_empty() {
            if stop_at_blank && !t.rows.is_empty() {
                break;
            }
            continue;
        }
        if s.starts_with("->") {
            continue;
        }
        if s.starts_with("No data exists") {
            t.no_data = true;
            continue;
        }
        if let Some(c) = column_rule(l) {
            if t.headings.is_empty() {
                let mut first = i;
                while first > b.start && {
                    let p = lines[first - 1].trim();
                    !p.is_empty() && !p.starts_with("->")
                } {
                    first -= 1;
                }
                let mut headings = vec![String::new(); c.len()];
                for h in &lines[first..i] {
                    for (k, cell) in split_cells(h, &c).into_iter().enumerate() {
                        let cell: String = cell
                            .split(' ')
                            .filter(|w| !w.chars().all(|c| c == '~'))
                            .collect::<Vec<_>>()
                            .join(" ");
                        if cell.is_empty() {
                            continue;
                        }
                        if !headings[k].is_empty() {
                            headings[k].push(' ');
                        }
                        headings[k].push_str(&cell);
                    }
                }
                t.headings = headings;
                t.last_headings = if i > first {
                    split_cells(&lines[i - 1], &c)
                } else {
                    vec![String::new(); c.len()]
                };
            }
            cols = Some(c);
            continue;
        }
        let Some(c) = &cols else { continue };
        t.rows.push((i + 1, split_cells(l, c)));
    }
    t
}

type Warn = (usize, String);

fn row_warnings(section: &str, skipped: Vec<(usize, String)>, out: &mut Vec<Warn>) {
    let n = skipped.len();
    for (line, what) in skipped.into_iter().take(ROW_WARNINGS_MAX) {
        out.push((
            line,
            format!("`{section}` row `{what}` could not be read: skipped"),
        ));
    }
    if n > ROW_WARNINGS_MAX {
        out.push((
            0,
            format!(
                "{} more `{section}` rows could not be read: skipped",
                n - ROW_WARNINGS_MAX
            ),
        ));
    }
}

fn read_events(
    lines: &[String],
    b: &Block,
    stop_at_blank: bool,
    out: &mut Vec<EventLine>,
) -> Vec<Warn> {
    let t = read_table(lines, b, stop_at_blank);
    let mut w = Vec::new();
    let cols = EventColumns::from_headings(&t.headings);
    if !cols.has_figures() {
        w.push((
            b.start + 1,
            format!("section `{}` has no column rule with Waits and Time headings under its title: not read", b.title),
        ));
        return w;
    }
    let before = out.len();
    let mut skipped = Vec::new();
    for (line, cells) in &t.rows {
        let refs: Vec<&str> = cells.iter().map(String::as_str).collect();
        match event_line(&refs, &cols) {
            Some(e) => out.push(e),
            None => skipped.push((*line, lines[line - 1].trim().to_string())),
        }
    }
    row_warnings(b.title, skipped, &mut w);
    if out.len() == before && !t.no_data {
        w.push((
            b.start + 1,
            format!(
                "section `{}` is present but no row of it could be read",
                b.title
            ),
        ));
    }
    w
}

fn read_histogram(lines: &[String], b: &Block, out: &mut Vec<HistogramLine>) -> Vec<Warn> {
    let t = read_table(lines, b, false);
    let mut w = Vec::new();
    if t.headings.len() < 3 {
        if !t.no_data {
            w.push((
                b.start + 1,
                format!(
                    "section `{}` has no column rule under its headings: not read",
                    b.title
                ),
            ));
        }
        return w;
    }
    let labels: Vec<String> = t.last_headings.iter().skip(2).cloned().collect();
    let before = out.len();
    let mut skipped = Vec::new();
    for (line, cells) in &t.rows {
        let event = cells[0].trim();
        let values: Vec<Option<f64>> = cells.iter().skip(2).map(|c| parse_number(c)).collect();
        let bad = cells
            .iter()
            .skip(1)
            .any(|c| !c.is_empty() && parse_number(c).is_none());
        if event.is_empty() || bad {
            skipped.push((*line, lines[line - 1].trim().to_string()));
            continue;
        }
        out.push(HistogramLine {
            table: b.title.to_string(),
            event: event.to_string(),
            total_waits: parse_number(&cells[1]),
            buckets: labels.iter().cloned().zip(values).collect(),
        });
    }
    row_warnings(b.title, skipped, &mut w);
    if out.len() == before && !t.no_data {
        w.push((
            b.start + 1,
            format!(
                "section `{}` is present but no row of it could be read",
                b.title
            ),
        ));
    }
    w
}

fn read_parameters(lines: &[String], b: &Block, out: &mut Vec<(String, String)>) {
    for l in lines.iter().take(b.end).skip(b.start + 1) {
        let mut words = l.split_whitespace();
        let (Some(name), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        let name = name.to_ascii_lowercase();
        if PARAMETERS_KEPT.contains(&name.as_str()) && !out.iter().any(|(k, _)| *k == name) {
            out.push((name, value.to_string()));
        }
    }
}

// ---------------------------------------------------------------------------
// Header.

fn read_header(lines: &[String], h: &mut Header) {
    let n = lines.len().min(HEADER_LINES_MAX);
    for i in 0..n {
        let l = &lines[i];
        let t = l.trim();
        let lower = t.to_ascii_lowercase();
        if lower.starts_with("load profile") || lower.starts_with("top 5 timed") {
            break;
        }
        // `Database    DB Id    Instance …` or `DB Name  DB Id …`, a rule, then the values.
        if lower.contains("db id") && lower.contains("release") {
            read_database_table(lines, i, h);
            continue;
        }
        // 12c: `Host   Name   Platform   CPUs` wrapped over two lines, over a
        // rule whose first run (`~~~~`) is the label column.
        if lower.starts_with("host") && lower.contains("platform") {
            read_host_table(lines, i, h);
            continue;
        }
        // 10g: `Host  Name:   dbsrv01    Num CPUs:    4    Phys Memory (MB):   16,384`
        if lower.starts_with("host") && lower.contains("num cpus:") {
            read_host_line(t, &lower, h);
            continue;
        }
        read_snapshot_line(t, &lower, h);
    }
}

/// The database table whose headings are line `i`: its values by heading.
fn read_database_table(lines: &[String], i: usize, h: &mut Header) {
    if let Some((cols, _, data)) = rule_and_data(lines, i + 1) {
        let names = split_cells(&lines[i], &cols);
        let values = split_cells(&lines[data], &cols);
        for (name, v) in names.iter().zip(&values) {
            set_field(h, &name.to_ascii_lowercase(), v);
        }
    }
}

/// 12c's host table whose headings start at line `i`: its values by the
/// known order of its columns.
fn read_host_table(lines: &[String], i: usize, h: &mut Header) {
    if let Some((cols, rule, data)) = rule_and_data(lines, i + 1) {
        let values = split_cells(&lines[data], &cols);
        let tilde_first = lines[rule].trim_start().starts_with('~');
        let names: Vec<&str> = if tilde_first {
            vec![
                "",
                "host",
                "platform",
                "cpus",
                "cores",
                "sockets",
                "memory (g)",
            ]
        } else {
            vec![
                "host name",
                "platform",
                "cpus",
                "cores",
                "sockets",
                "memory (gb)",
            ]
        };
        for (name, v) in names.iter().zip(&values) {
            set_field(h, name, v);
        }
    }
}

/// 10g's host line `t` (`lower`, lower-cased): the value after each label.
fn read_host_line(t: &str, lower: &str, h: &mut Header) {
    let after = |key: &str| {
        lower.find(key).map(|p| {
            t[p + key.len()..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string()
        })
    };
    if let Some(host) = after("name:") {
        h.host = h.host.clone().or(Some(host).filter(|s| !s.is_empty()));
    }
    h.cpus = h.cpus.or_else(|| {
        after("num cpus:")
            .and_then(|v| parse_number(&v))
            .and_then(whole_u32)
    });
    if let Some(mb) = after("phys memory (mb):").and_then(|v| parse_number(&v)) {
        h.memory_gb = h.memory_gb.or(Some(mb / 1024.0));
    }
}

/// The snapshot lines (`Begin Snap:`, `End Snap:`, `Elapsed:`, `DB Time:`)
/// and `Std Block Size:`, from line `t` (`lower`, lower-cased).
fn read_snapshot_line(t: &str, lower: &str, h: &mut Header) {
    let words: Vec<&str> = t.split_whitespace().collect();
    match (
        lower.split(':').next().unwrap_or("").trim(),
        words.as_slice(),
    ) {
        ("begin snap", [_, _, id, date, time, ..]) => {
            h.begin_snap_id = h.begin_snap_id.or_else(|| id.parse().ok());
            h.begin_snap_time = h.begin_snap_time.clone().or(Some(format!("{date} {time}")));
        }
        ("end snap", [_, _, id, date, time, ..]) => {
            h.end_snap_id = h.end_snap_id.or_else(|| id.parse().ok());
            h.end_snap_time = h.end_snap_time.clone().or(Some(format!("{date} {time}")));
        }
        ("elapsed", [_, v, ..]) => h.elapsed_min = h.elapsed_min.or_else(|| parse_number(v)),
        ("db time", [_, _, v, ..]) => h.db_time_min = h.db_time_min.or_else(|| parse_number(v)),
        _ => {}
    }
    if let Some(p) = lower.find("std block size:") {
        let v = t[p + "std block size:".len()..]
            .split_whitespace()
            .next()
            .unwrap_or("");
        h.block_size = h
            .block_size
            .or_else(|| parse_size_bytes(v).and_then(whole_u32));
    }
}

/// The column rule within two lines after `from` (headers wrap) and the
/// first non-blank line after it: (columns, rule index, data index).
fn rule_and_data(lines: &[String], from: usize) -> Option<(Vec<Range<usize>>, usize, usize)> {
    let rule = (from..(from + 2).min(lines.len())).find(|&k| column_rule(&lines[k]).is_some())?;
    let cols = column_rule(&lines[rule])?;
    let data = (rule + 1..(rule + 3).min(lines.len())).find(|&k| !lines[k].trim().is_empty())?;
    Some((cols, rule, data))
}

fn set_field(h: &mut Header, name: &str, v: &str) {
    let v = v.trim();
    if v.is_empty() {
        return;
    }
    let text = || Some(v.to_string());
    let num = || parse_number(v).and_then(whole_u32);
    match name {
        "db name" | "database" => h.db_name = h.db_name.clone().or_else(text),
        "db id" => h.db_id = h.db_id.or_else(|| v.parse().ok()),
        "instance" => h.instance = h.instance.clone().or_else(text),
        "inst num" => h.instance_number = h.instance_number.or_else(num),
        "release" => h.release = h.release.clone().or_else(text),
        "rac" | "cluster" => h.rac = h.rac.or(Some(v.eq_ignore_ascii_case("yes"))),
        "host" | "host name" => h.host = h.host.clone().or_else(text),
        "platform" => h.platform = h.platform.clone().or_else(text),
        "cpus" => h.cpus = h.cpus.or_else(num),
        "cores" => h.cores = h.cores.or_else(num),
        "sockets" => h.sockets = h.sockets.or_else(num),
        "memory (g)" | "memory (gb)" => h.memory_gb = h.memory_gb.or_else(|| parse_number(v)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_told_apart_and_cut_at_the_context_tag() {
        assert_eq!(
            title_of("Wait Events (fg and bg) DB/Inst: A/a  Snaps: 1-2"),
            Some("Wait Events (fg and bg)")
        );
        assert_eq!(
            title_of("Wait Events for DB: PROD  Instance: prod  Snaps: 1 -2"),
            Some("Wait Events")
        );
        assert_eq!(
            title_of("Top 5 Timed Events                          Avg %Total"),
            Some("Top 5 Timed Events")
        );
        assert_eq!(
            title_of("Instance Activity Stats - Absolute Values  DB/Inst: A/a"),
            None
        );
        assert_eq!(title_of("db file sequential read   12  0"), None);
    }

    #[test]
    fn a_word_spilling_past_its_column_goes_to_the_column_it_overlaps_most() {
        let cols = column_rule("---------- ----- -----").unwrap_or_default();
        assert_eq!(
            split_cells("log file    120K 100.0", &cols),
            ["log file", "120K", "100.0"]
        );
        assert_eq!(
            split_cells("x                 9.5", &cols),
            ["x", "", "9.5"]
        );
    }
}
