//! AWR text reports (`awrrpt` output), 10g to 19c: the sections the I/O mix
//! is derived from, read into an [`AwrReport`].
//!
//! Built against `docs/awr-formats.md`. The text is normalised first (§5:
//! `\r`, `\f`, tabs, no-break spaces, em/en dashes back to hyphens, SQL*Plus
//! `OUTPUT` page headings and prompts dropped), then cut into sections by
//! their titles (summary titles underlined with `~~~~`, main titles tagged
//! `DB/Inst:`), never by position, so a missing or reordered section costs only
//! itself. A table is split by the character ranges of the `----- ------`
//! rule under its header when its rows line up with it; when they do not (a
//! pasted copy with its spaces collapsed) the row is read from the right, by
//! the known order of its numeric columns. Every section found but not read,
//! every row skipped, and every key section missing becomes a
//! [`ParseWarning`] with its line: a figure is never dropped silently.
//!
//! Units, as stored: event times in seconds, averages in µs whatever the
//! report printed (`ms`, `109.72us`, `52.86 s`), percentages as printed;
//! IOStat `Data` columns in MiB (and MiB/s), its `Avg Time` in µs.

use std::collections::HashMap;

use super::model::{
    AwrReport, EventLine, Format, HistogramLine, IoFunctionLine, IoProfileLine, ParseWarning,
    ProfileLine, Statistic, WaitClassLine,
};
use super::number::{
    collapse, parse_latency_us, parse_number, parse_percent, parse_size_bytes, whole_u32,
};
use super::profile::read_load_profile;
use super::stats::{read_stat_tables, StatRow};

/// A line of the normalised text and its 1-based line in the original.
#[derive(Debug, Clone)]
struct Line {
    no: usize,
    text: String,
}

/// A titled part of the report: the title line and the lines after it up to
/// the next title (or the end rule of a main section).
#[derive(Debug, Clone)]
struct Section {
    title: String,
    /// Index (into the normalised lines) of the title line.
    at: usize,
    body: std::ops::Range<usize>,
}

/// Summary-section titles (underlined with `~~~~`), longest first so that a
/// title that begins with another is matched whole.
const SUMMARY_TITLES: &[&str] = &[
    "Top ADDM Findings by Average Active Sessions",
    "Top 10 Foreground Events by Total Wait Time",
    "Top 5 Timed Foreground Events",
    "Top 5 Timed Events",
    "Wait Classes by Total Wait Time",
    "Instance Efficiency Percentages",
    "Shared Pool Statistics",
    "Memory Statistics",
    "Load Profile",
    "IO Profile",
    "Cache Sizes",
    "Host CPU",
    "Instance CPU",
];

/// Main-report titles recognised even without their `DB/Inst:` tag (a pasted
/// copy may have lost it).
const MAIN_TITLES: &[&str] = &[
    "Time Model Statistics",
    "Foreground Wait Class",
    "Foreground Wait Events",
    "Wait Events",
    "Background Wait Events",
    "Key Instance Activity Stats",
    "Instance Activity Stats",
    "Other Instance Activity Stats",
    "IOStat by Function summary",
    "IOStat by Filetype summary",
    "init.ora Parameters",
    "Parameters modified by this container",
];

const TOP_TITLES: &[&str] = &[
    "Top 10 Foreground Events by Total Wait Time",
    "Top 5 Timed Foreground Events",
    "Top 5 Timed Events",
];

const STAT_TITLES: &[&str] = &[
    "Key Instance Activity Stats",
    "Instance Activity Stats",
    "Other Instance Activity Stats",
];

const PARAMETER_TITLES: &[&str] = &[
    "init.ora Parameters",
    "Parameters modified by this container",
];

/// The init.ora parameters the derivation and the replay can use.
const WANTED_PARAMETERS: &[&str] = &[
    "db_block_size",
    "db_file_multiblock_read_count",
    "db_cache_size",
    "db_writer_processes",
    "disk_asynch_io",
    "filesystemio_options",
    "sga_target",
    "memory_target",
    "pga_aggregate_target",
    "cpu_count",
    "log_buffer",
];

/// Oracle's wait classes, to recognise the one text column at the end of the
/// Top events rows, whole or cut to 8 (12.2+) or 10 (10g/11g) characters.
const WAIT_CLASSES: &[&str] = &[
    "User I/O",
    "System I/O",
    "Commit",
    "Concurrency",
    "Cluster",
    "Application",
    "Configuration",
    "Network",
    "Other",
    "Scheduler",
    "Administrative",
    "Queueing",
    "Idle",
];

/// How many lines ahead a title may look for its `~~~~` underline.
const UNDERLINE_LOOKAHEAD_MAX: usize = 2;

/// The report read from the text of an `awrrpt` text report (or a pasted or
/// spooled copy of one); `source` names the file in the report and warnings.
pub fn parse_awr_text(text: &str, source: &str) -> AwrReport {
    let mut report = AwrReport::empty(source, Format::AwrText);
    let all = normalize(text);
    if all
        .iter()
        .any(|l| l.text.trim_start().starts_with("STATSPACK report for"))
    {
        report.warnings.push(warn(
            "report",
            0,
            "this is a Statspack report, not an AWR report: read it with the Statspack reader",
        ));
        return report;
    }
    let Some(found) = locate(&all) else {
        report.warnings.push(warn(
            "report",
            0,
            "no AWR section found: this does not look like an AWR report (no 'WORKLOAD \
             REPOSITORY report' banner, and no section of one over its table)",
        ));
        return report;
    };
    // Only the report is read: the text of the mail or post around it could
    // otherwise pass for a header line or a Load Profile row.
    let lines = &all[found.lines.clone()];
    warn_surroundings(&all, &found, &mut report);
    let sections = find_sections(lines);
    let has_title = lines
        .iter()
        .any(|l| l.text.trim_start().starts_with(AWR_BANNER));
    let has_stat_header = lines.iter().any(|l| is_stat_header(&l.text));
    if lines
        .iter()
        .any(|l| l.text.contains("COMPARE PERIOD REPORT"))
    {
        report.warnings.push(warn(
            "report",
            0,
            "this is an AWR compare-periods report (awrddrpt): produce a single-period report \
             with awrrpt and parse that",
        ));
        return report;
    }
    read_header(lines, &sections, has_title, &mut report);
    read_profile(lines, &mut report);
    read_top_events(lines, &sections, &mut report);
    read_wait_classes(lines, &sections, &mut report);
    read_event_tables(lines, &sections, &mut report);
    read_histograms(lines, &sections, &mut report);
    read_io_profile(lines, &sections, &mut report);
    read_statistics(lines, &sections, has_stat_header, &mut report);
    read_iostat(lines, &sections, &mut report);
    read_parameters(lines, &sections, &mut report);
    if report.header.block_size.is_none() {
        if let Some(v) = report
            .parameters
            .iter()
            .find(|(k, _)| k == "db_block_size")
            .and_then(|(_, v)| parse_number(v))
        {
            report.header.block_size = whole_u32(v);
        }
    }
    warn_missing(lines, &sections, has_title, &mut report);
    report
}

/// Say where the report is when other text is around it, and that another
/// report follows when one does: neither is read.
fn warn_surroundings(all: &[Line], found: &Located, report: &mut AwrReport) {
    let (first, last) = (
        all[found.lines.start].no,
        all[found.lines.end.saturating_sub(1).max(found.lines.start)].no,
    );
    if let Some(next) = found.next {
        report.warnings.push(warn(
            "report",
            all[next].no,
            &format!(
                "another report starts at line {}: only the first, lines {first}-{last}, is \
                 read; give each report in its own file",
                all[next].no
            ),
        ));
    }
    let text_in = |r: &[Line]| r.iter().any(|l| !l.text.trim().is_empty());
    let before = text_in(&all[..found.lines.start]);
    let after = found.next.is_none() && text_in(&all[found.lines.end..]);
    report
        .warnings
        .extend(surroundings_warning(first, last, before, after));
}

/// The warning for a report (lines `first` to `last` of its file) with
/// other text before or after it, which is not read.
pub(crate) fn surroundings_warning(
    first: usize,
    last: usize,
    before: bool,
    after: bool,
) -> Option<ParseWarning> {
    let around = match (before, after) {
        (true, true) => "before and after it",
        (true, false) => "before it",
        (false, true) => "after it",
        (false, false) => return None,
    };
    Some(warn(
        "report",
        first,
        &format!(
            "the report is lines {first}-{last} of the file: the text {around} is not part of \
             it and is not read"
        ),
    ))
}

fn warn(section: &str, line: usize, message: &str) -> ParseWarning {
    ParseWarning {
        section: section.to_string(),
        line,
        message: message.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Normalising and cutting into sections

// ---------------------------------------------------------------------------
// Where the report is

/// The first line of an AWR text report: `WORKLOAD REPOSITORY report for`,
/// or `WORKLOAD REPOSITORY PDB report` for a PDB's (Oracle prints it so; its
/// other reports' banners start the same way and are told apart by
/// `read::other_report`).
pub(crate) const AWR_BANNER: &str = "WORKLOAD REPOSITORY";

/// Lines between a main section's title and the start of its table (its
/// `->` notes, a blank line, up to four header lines): a title with no table
/// within them is a title only, not a mark of a report.
const TABLE_START_LINES_MAX: usize = 16;
/// Lines of one table of the header block (the snapshot table, the longest,
/// has six): a pasted header's table is not allowed to run on into prose.
const HEADER_TABLE_LINES_MAX: usize = 8;

/// Where the AWR report lies among the normalised lines of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Located {
    /// Indices of its lines: from its first mark to the end of its last.
    lines: std::ops::Range<usize>,
    /// Index of the first mark of another report after it, if there is one.
    next: Option<usize>,
}

/// One of a report's own marks: a line of its structure that prose does not
/// have, each backed by its table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mark {
    /// `WORKLOAD REPOSITORY report for` and the header tables under it.
    Banner,
    /// A header table (`DB Name  DB Id …`, `Host Name  Platform …`) over
    /// its column rule: an excerpt that starts below the banner.
    Header,
    /// A summary title underlined with `~~~~`, with its table.
    Summary(String),
    /// A main title (tagged `DB/Inst:`, or one Cairn reads) over its table,
    /// or a statistics table's own column header over its rule.
    Main,
}

/// The header table a line is the column names of, if it is one.
fn header_kind(line: &str) -> Option<&'static str> {
    let c = collapse(line);
    let has = |s: &str| c.to_ascii_lowercase().contains(&s.to_ascii_lowercase());
    if c.starts_with("DB Name") && has("DB Id") {
        Some("DB Name")
    } else if c.starts_with("Instance") && has("Inst Num") {
        Some("Instance")
    } else if c.starts_with("Container DB Id") {
        Some("Container")
    } else if c.starts_with("Host Name") && has("Platform") {
        Some("Host Name")
    } else if c.starts_with("Snap Id") && has("Snap Time") {
        Some("Snap Id")
    } else {
        None
    }
}

/// The header tables from line `j` on (blank lines between them): each its
/// column names and, under its rule, its lines up to a blank one, or without
/// a rule its one line of values. The index of the last line of the last
/// table (`j - 1` when there is none), and which tables they were.
fn header_block(lines: &[Line], mut j: usize) -> (usize, Vec<&'static str>) {
    let mut end = j.saturating_sub(1);
    let mut kinds = Vec::new();
    loop {
        let mut k = j;
        while lines.get(k).is_some_and(|l| l.text.trim().is_empty()) {
            k += 1;
        }
        let Some(kind) = lines.get(k).and_then(|l| header_kind(&l.text)) else {
            break;
        };
        kinds.push(kind);
        end = k;
        let belongs = |m: usize| {
            lines.get(m).is_some_and(|l| {
                !l.text.trim().is_empty()
                    && header_kind(&l.text).is_none()
                    && title_of(lines, m).is_none()
            })
        };
        let mut m = k + 1;
        if lines.get(m).is_some_and(|l| rule_ranges(&l.text).is_some()) {
            // Under its rule, the table's lines up to a blank one.
            while m <= k + HEADER_TABLE_LINES_MAX && belongs(m) {
                end = m;
                m += 1;
            }
        } else if belongs(m) && lines[m].text.chars().any(|c| c.is_ascii_digit()) {
            // No rule (lost on the way): its one line of values, which
            // always has a figure (an id, a number, a date).
            end = m;
            m += 1;
        }
        j = m;
    }
    (end, kinds)
}

/// The index of the last line of a section's table, its body starting at
/// `from`: the table starts at its column rule, at `No data exists`, or —
/// in a summary section, whose figures may stand under the `~~~~` alone —
/// at a `Label:  figure` line (the `->` notes and the column names, which
/// may hold figures of their own, come before); it ends at a blank line, the
/// section's end rule or the next title. `None` when no table starts within
/// a few lines: a title alone.
fn table_end(lines: &[Line], from: usize, summary: bool) -> Option<usize> {
    let mut started = false;
    for j in from..lines.len() {
        let t = lines[j].text.trim();
        if is_end_rule(t) {
            return Some(j);
        }
        if title_of(lines, j).is_some() || header_kind(t).is_some() {
            return started.then(|| j - 1);
        }
        if started {
            if t.is_empty() {
                return Some(j - 1);
            }
        } else if rule_ranges(t).is_some()
            || t.starts_with("No data exists")
            || (summary && is_label_and_figure(t))
        {
            started = true;
        } else if j >= from + TABLE_START_LINES_MAX {
            return None;
        }
    }
    started.then(|| lines.len() - 1)
}

/// `Buffer Nowait %:  100.00`, `Host Mem (MB):  514,048.0`: a summary
/// section's row without a column rule over it.
fn is_label_and_figure(t: &str) -> bool {
    t.split_once(':').is_some_and(|(label, rest)| {
        !label.trim().is_empty()
            && rest
                .split_whitespace()
                .next()
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
    })
}

/// The mark line `i` is, if any, and the index of its last line.
fn mark_at(lines: &[Line], i: usize) -> Option<(Mark, usize)> {
    let t = lines[i].text.trim_start();
    if t.starts_with(AWR_BANNER) {
        let (end, _) = header_block(lines, i + 1);
        return Some((Mark::Banner, end.max(i)));
    }
    if header_kind(t).is_some()
        && lines
            .get(i + 1)
            .is_some_and(|l| rule_ranges(&l.text).is_some())
    {
        return Some((Mark::Header, header_block(lines, i).0));
    }
    if is_stat_header(t) {
        let ruled = lines
            .get(i + 1)
            .is_some_and(|l| rule_ranges(&l.text).is_some());
        return ruled
            .then(|| table_end(lines, i + 1, false))
            .flatten()
            .map(|end| (Mark::Main, end));
    }
    let title = title_of(lines, i)?;
    if SUMMARY_TITLES
        .iter()
        .any(|s| s.eq_ignore_ascii_case(&title))
    {
        // The body starts under the `~~~~` underline (which may carry the
        // column rule itself, as the Load Profile's does).
        let underline = (i + 1..lines.len())
            .take(UNDERLINE_LOOKAHEAD_MAX)
            .find(|&k| !lines[k].text.trim().is_empty())?;
        let end = if rule_ranges(&lines[underline].text).is_some() {
            table_end(lines, underline + 1, true).unwrap_or(underline)
        } else {
            table_end(lines, underline + 1, true)?
        };
        return Some((Mark::Summary(title), end));
    }
    table_end(lines, i + 1, false).map(|end| (Mark::Main, end))
}

/// Where the AWR report is among `lines`, by its own structure: it starts
/// at its first mark (its banner, a header table over its rule, a summary
/// title underlined with `~~~~`, a main title or a statistics header over
/// its table) and ends at `End of Report` or at the end of its last mark's
/// table, so that the text around a report pasted into a mail or a blog is
/// not read as part of it. A second banner, or a header table or summary
/// section the report already has, starts another report: a post that sets
/// two reports side by side must not have them read as one. Cairn's own
/// OLTP `awr.txt` (its title on the first line) is read whole. `None`: no
/// mark at all, so no report.
fn locate(lines: &[Line]) -> Option<Located> {
    let first = lines.iter().position(|l| !l.text.trim().is_empty())?;
    if lines[first].text.trim() == cairn_kit_report::OLTP_AWR_TITLE {
        return Some(Located {
            lines: first..lines.len(),
            next: None,
        });
    }
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut seen: Vec<String> = Vec::new();
    let mut i = first;
    while i < lines.len() {
        if start.is_some() && lines[i].text.trim() == "End of Report" {
            end = i;
            i += 1;
            break;
        }
        let Some((mark, last)) = mark_at(lines, i) else {
            i += 1;
            continue;
        };
        // What a report has once: a second one is the next report's.
        let once: Vec<String> = match &mark {
            Mark::Banner => vec!["banner".into()],
            Mark::Summary(title) => vec![title.to_ascii_lowercase()],
            Mark::Header => header_block(lines, i)
                .1
                .into_iter()
                .map(str::to_string)
                .collect(),
            Mark::Main => Vec::new(),
        };
        let again = once.iter().any(|k| seen.contains(k));
        if start.is_some() && (mark == Mark::Banner || again) {
            return Some(Located {
                lines: start.unwrap_or(i)..end + 1,
                next: Some(i),
            });
        }
        if mark == Mark::Banner {
            seen.extend(header_block(lines, i + 1).1.into_iter().map(str::to_string));
        }
        seen.extend(once);
        start.get_or_insert(i);
        end = end.max(last);
        i = last.max(i) + 1;
    }
    let start = start?;
    let next = (i..lines.len()).find(|&k| mark_at(lines, k).is_some());
    Some(Located {
        lines: start..end + 1,
        next,
    })
}

/// The line (1-based, in `text`) where an AWR text report starts, found by
/// its own structure wherever it is in the text (see [`locate`]); `None`
/// when `text` has none of it.
pub(crate) fn report_start(text: &str) -> Option<usize> {
    let lines = normalize(text);
    locate(&lines).map(|found| lines[found.lines.start].no)
}

/// Lines with the damage of §5 undone and the SQL*Plus artefacts dropped,
/// each with its line number in the original text.
fn normalize(text: &str) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let mut skip_underline = false;
    for (i, raw) in text.split('\n').enumerate() {
        let mut s = String::with_capacity(raw.len());
        let mut col = 0usize;
        for c in raw.chars() {
            match c {
                '\r' | '\u{0c}' => {}
                '\t' => {
                    let n = 8 - col % 8;
                    s.extend(std::iter::repeat_n(' ', n));
                    col += n;
                }
                '\u{2014}' | '\u{2015}' => {
                    s.push_str("---");
                    col += 3;
                }
                '\u{2013}' => {
                    s.push_str("--");
                    col += 2;
                }
                '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2212}' => {
                    s.push('-');
                    col += 1;
                }
                '\u{00a0}' | '\u{202f}' | '\u{2009}' => {
                    s.push(' ');
                    col += 1;
                }
                _ => {
                    s.push(c);
                    col += 1;
                }
            }
        }
        let s = s.replace("&#160;", " ");
        let s = s.trim_end().to_string();
        let t = s.trim();
        if skip_underline {
            skip_underline = false;
            if !t.is_empty() && t.chars().all(|c| c == '-' || c == ' ') {
                continue;
            }
        }
        if t == "OUTPUT" {
            // The SQL*Plus column heading repeated every page, with the blank
            // line of the page break before it and its underline after.
            while out.last().is_some_and(|l| l.text.trim().is_empty()) {
                out.pop();
            }
            skip_underline = true;
            continue;
        }
        if t.starts_with("SQL>") || is_rows_selected(t) {
            continue;
        }
        out.push(Line { no: i + 1, text: s });
    }
    out
}

/// `1869 rows selected.`: the end of a SQL*Plus capture.
fn is_rows_selected(t: &str) -> bool {
    t.strip_suffix("rows selected.")
        .map(str::trim)
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == ','))
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len()
        && s.is_char_boundary(prefix.len())
        && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// The title a line opens, if it is a section title.
fn title_of(lines: &[Line], i: usize) -> Option<String> {
    let text = &lines[i].text;
    let c = collapse(text);
    if c.is_empty() || c.starts_with("->") {
        return None;
    }
    if let Some(pos) = text.find("DB/Inst:") {
        let t = collapse(&text[..pos]);
        return (!t.is_empty()).then_some(t);
    }
    for t in SUMMARY_TITLES {
        if starts_with_ci(&c, t) {
            let rest = &c[t.len()..];
            let underlined = lines
                .iter()
                .skip(i + 1)
                .take(UNDERLINE_LOOKAHEAD_MAX)
                .find(|l| !l.text.trim().is_empty())
                .is_some_and(|l| l.text.trim_start().starts_with('~'));
            if underlined && (rest.is_empty() || rest.starts_with(' ') || rest.starts_with('(')) {
                return Some((*t).to_string());
            }
        }
    }
    if MAIN_TITLES.iter().any(|t| c.eq_ignore_ascii_case(t))
        || starts_with_ci(&c, "Wait Event Histogram")
            && lines
                .get(i + 1)
                .is_some_and(|l| l.text.trim_start().starts_with("->") || l.text.trim().is_empty())
    {
        return Some(c);
    }
    None
}

/// The report's sections in order. A main section ends at its end rule; a
/// continuation page (the title repeated) is a section of the same title.
fn find_sections(lines: &[Line]) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let mut open: Option<(String, usize, bool)> = None; // title, at, ended by rule
    let close = |sections: &mut Vec<Section>, open: &Option<(String, usize, bool)>, end: usize| {
        if let Some((title, at, _)) = open {
            sections.push(Section {
                title: title.clone(),
                at: *at,
                body: (*at + 1)..end,
            });
        }
    };
    for i in 0..lines.len() {
        if let Some(title) = title_of(lines, i) {
            if open.as_ref().is_some_and(|o| !o.2) {
                close(&mut sections, &open, i);
            }
            open = Some((title, i, false));
            continue;
        }
        if is_end_rule(&lines[i].text) {
            if let Some(o) = open.as_mut() {
                if !o.2 {
                    let (title, at) = (o.0.clone(), o.1);
                    sections.push(Section {
                        title,
                        at,
                        body: (at + 1)..i,
                    });
                    o.2 = true;
                }
            }
        }
    }
    if open.as_ref().is_some_and(|o| !o.2) {
        close(&mut sections, &open, lines.len());
    }
    sections
}

fn sections_titled<'a>(sections: &'a [Section], titles: &[&str]) -> Vec<&'a Section> {
    sections
        .iter()
        .filter(|s| titles.iter().any(|t| s.title.eq_ignore_ascii_case(t)))
        .collect()
}

/// The section end rule: one run of 50 or more hyphens (10g/11g: 61, 12c+: 54).
fn is_end_rule(line: &str) -> bool {
    let t = line.trim();
    t.len() >= 50 && t.chars().all(|c| c == '-')
}

/// The column rule under a table header: two or more runs of `-` (the first
/// may be `~`, the underline of a summary title), as character ranges.
fn rule_ranges(line: &str) -> Option<Vec<(usize, usize)>> {
    let t = line.trim();
    if t.is_empty() || !t.chars().all(|c| matches!(c, '-' | '~' | ' ')) || !t.contains('-') {
        return None;
    }
    let mut runs = Vec::new();
    let mut start: Option<usize> = None;
    for (k, c) in line.chars().enumerate() {
        match (c == ' ', start) {
            (false, None) => start = Some(k),
            (true, Some(s)) => {
                runs.push((s, k));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        runs.push((s, line.chars().count()));
    }
    (runs.len() >= 2).then_some(runs)
}

/// The cells of `line` cut by the rule's ranges: each cell runs from the end
/// of the previous column (so a number one wider than its column is kept) to
/// the end of its own; text past the last column (a reader's annotation) is
/// ignored. `None` when the line does not line up with the rule (a gap
/// character is not blank), as in a pasted copy with its spaces collapsed.
fn cut_cells(line: &str, ranges: &[(usize, usize)]) -> Option<Vec<String>> {
    let chars: Vec<char> = line.chars().collect();
    for w in ranges.windows(2) {
        let gap = w[1].0.saturating_sub(1);
        if gap >= w[0].1 && chars.get(gap).is_some_and(|c| *c != ' ') {
            return None;
        }
    }
    let mut cells = Vec::with_capacity(ranges.len());
    for (k, r) in ranges.iter().enumerate() {
        let start = if k == 0 { 0 } else { ranges[k - 1].1 };
        let end = r.1.min(chars.len());
        let cell: String = if start < end {
            chars[start..end].iter().collect()
        } else {
            String::new()
        };
        cells.push(cell.trim().to_string());
    }
    Some(cells)
}

fn is_note_or_empty_marker(t: &str) -> bool {
    t.starts_with("->")
        || t.starts_with("No data exists")
        || t.starts_with('~')
        || t.eq_ignore_ascii_case("End of Report")
}

fn is_snip(t: &str) -> bool {
    t.to_ascii_uppercase().contains("SNIP")
}

fn shorten(t: &str) -> String {
    const SHOWN_MAX: usize = 60;
    if t.chars().count() <= SHOWN_MAX {
        t.to_string()
    } else {
        format!("{}…", t.chars().take(SHOWN_MAX).collect::<String>())
    }
}

fn to_u64(v: f64) -> Option<u64> {
    ((0.0..1.8e19).contains(&v) && v.fract() == 0.0).then_some(v as u64)
}

// ---------------------------------------------------------------------------
// Header

/// Header tables: the line of column names, its rule, and the data line.
fn header_table(lines: &[Line], i: usize) -> Option<Vec<(String, String)>> {
    const KNOWN: &[&str] = &[
        "Container DB Id",
        "Container Name",
        "DB Name",
        "DB Id",
        "Unique Name",
        "DB Role",
        "Edition",
        "Release",
        "RAC",
        "CDB",
        "Instance",
        "Inst Num",
        "Inst num",
        "Startup Time",
        "Open Time",
        "Host Name",
        "Platform",
        "CPUs",
        "Cores",
        "Sockets",
        "Memory(GB)",
        "Memory (GB)",
        // 10.2: the host is a column of the database line.
        "Host",
    ];
    let header = &lines[i].text;
    let mut j = i + 1;
    let ranges = lines.get(j).and_then(|l| rule_ranges(&l.text));
    if ranges.is_some() {
        j += 1;
    }
    while lines.get(j).is_some_and(|l| l.text.trim().is_empty()) && j < i + 3 {
        j += 1;
    }
    let data = &lines.get(j)?.text;
    if data.trim().is_empty() {
        return None;
    }
    if let Some(r) = &ranges {
        if let (Some(labels), Some(values)) = (cut_cells(header, r), cut_cells(data, r)) {
            let joined = collapse(&labels.join(" "));
            if joined == collapse(header) && labels.iter().all(|l| !l.is_empty()) {
                return Some(
                    labels
                        .into_iter()
                        .map(|l| collapse(&l))
                        .zip(values)
                        .collect(),
                );
            }
        }
    }
    // Spacing lost: the labels by the known names, the values by how many
    // words each holds (dates two, the platform whatever is left).
    let words: Vec<&str> = header.split_whitespace().collect();
    let mut labels: Vec<String> = Vec::new();
    let mut k = 0;
    while k < words.len() {
        let hit = KNOWN.iter().find(|name| {
            let n = name.split(' ').count();
            k + n <= words.len() && words[k..k + n].join(" ").eq_ignore_ascii_case(name)
        });
        let n = hit.map_or(1, |name| name.split(' ').count());
        labels.push(words[k..k + n].join(" "));
        k += n;
    }
    let values: Vec<&str> = data.split_whitespace().collect();
    let width = |l: &str| match l {
        "Startup Time" | "Open Time" => 2,
        _ => 1,
    };
    let fixed: usize = labels
        .iter()
        .filter(|l| *l != "Platform")
        .map(|l| width(l))
        .sum();
    // The platform takes whatever is left: that works for one of them only.
    let rests = labels.iter().filter(|l| *l == "Platform").count();
    if rests > 1 || values.len() < fixed || (rests == 0 && values.len() != fixed) {
        return None;
    }
    let mut out = Vec::new();
    let mut v = 0;
    for l in labels {
        let n = if l == "Platform" {
            values.len() - fixed
        } else {
            width(&l)
        };
        out.push((l, values[v..v + n].join(" ")));
        v += n;
    }
    Some(out)
}

fn read_header(lines: &[Line], sections: &[Section], has_title: bool, report: &mut AwrReport) {
    // The header is what comes before the first summary section other than
    // Cache Sizes (which 11g prints right under it).
    let limit = sections
        .iter()
        .find(|s| !s.title.eq_ignore_ascii_case("Cache Sizes"))
        .map_or(lines.len(), |s| s.at);
    let h = &mut report.header;
    let mut db_line_at = None;
    for i in 0..limit {
        let c = collapse(&lines[i].text);
        if c.starts_with("WORKLOAD REPOSITORY") && c.contains("PDB") {
            h.container.get_or_insert_with(String::new);
        }
        // The snapshot table's figures are read by their labels below.
        let table = match header_kind(&c) {
            Some("DB Name") => {
                db_line_at = Some(lines[i].no);
                header_table(lines, i)
            }
            Some("Snap Id") | None => None,
            Some(_) => header_table(lines, i),
        };
        for (label, value) in table.unwrap_or_default() {
            if value.is_empty() {
                continue;
            }
            match label.to_ascii_lowercase().as_str() {
                "db name" => h.db_name = Some(value),
                "db id" => h.db_id = parse_number(&value).and_then(to_u64),
                "instance" => h.instance = Some(value),
                "inst num" => h.instance_number = parse_number(&value).and_then(whole_u32),
                "release" => h.release = Some(value),
                "rac" => h.rac = yes_no(&value),
                "cdb" => h.cdb = yes_no(&value),
                "container name" => h.container = Some(value),
                "host name" | "host" => h.host = Some(value),
                "platform" => h.platform = Some(value),
                "cpus" => h.cpus = parse_number(&value).and_then(whole_u32),
                "cores" => h.cores = parse_number(&value).and_then(whole_u32),
                "sockets" => h.sockets = parse_number(&value).and_then(whole_u32),
                "memory(gb)" | "memory (gb)" => h.memory_gb = parse_number(&value),
                _ => {}
            }
        }
        let t = lines[i].text.trim_start();
        for (label, begin) in [("Begin Snap:", true), ("End Snap:", false)] {
            if let Some(rest) = t.strip_prefix(label) {
                let w: Vec<&str> = rest.split_whitespace().collect();
                let id = w.first().and_then(|s| parse_number(s)).and_then(to_u64);
                let time = (w.len() >= 3).then(|| format!("{} {}", w[1], w[2]));
                if begin {
                    (h.begin_snap_id, h.begin_snap_time) = (id, time);
                } else {
                    (h.end_snap_id, h.end_snap_time) = (id, time);
                }
            }
        }
        for (label, elapsed) in [("Elapsed:", true), ("DB Time:", false)] {
            if let Some(rest) = t.strip_prefix(label) {
                let v = rest.split_whitespace().next().and_then(parse_number);
                if elapsed {
                    h.elapsed_min = v;
                } else {
                    h.db_time_min = v;
                }
            }
        }
    }
    if h.container.as_deref() == Some("") {
        h.container = None;
        report.warnings.push(warn(
            "header",
            0,
            "a PDB report without a readable container table: the container name is unknown",
        ));
    }
    for s in sections_titled(sections, &["Cache Sizes"]) {
        for l in &lines[s.body.clone()] {
            if let Some(pos) = l.text.find("Std Block Size:") {
                let v = l.text[pos + "Std Block Size:".len()..]
                    .split_whitespace()
                    .next()
                    .and_then(parse_size_bytes);
                report.header.block_size = v.and_then(whole_u32);
            }
        }
    }
    let h = &report.header;
    if has_title && h.db_name.is_none() && h.release.is_none() {
        report.warnings.push(warn(
            "header",
            db_line_at.unwrap_or(0),
            "the database line of the header (DB Name, DB Id, Release …) could not be read",
        ));
    }
    if has_title && h.elapsed_min.is_none() {
        report.warnings.push(warn(
            "header",
            0,
            "no `Elapsed:` line in the header: per-second figures cannot be checked against totals",
        ));
    }
}

fn yes_no(v: &str) -> Option<bool> {
    match v.to_ascii_uppercase().as_str() {
        "YES" => Some(true),
        "NO" => Some(false),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Load Profile, IO Profile

fn read_profile(lines: &[Line], report: &mut AwrReport) {
    let text: String = lines.iter().map(|l| format!("{}\n", l.text)).collect();
    let orig = |k: usize| lines.get(k.wrapping_sub(1)).map_or(0, |l| l.no);
    match read_load_profile(&text) {
        None => {}
        Some((rows, warnings)) => {
            report.load_profile = rows.iter().map(ProfileLine::from).collect();
            for w in warnings {
                report
                    .warnings
                    .push(warn("Load Profile", orig(w.line), &w.message));
            }
            if rows.is_empty() {
                let at = lines
                    .iter()
                    .find(|l| starts_with_ci(l.text.trim_start(), "Load Profile"))
                    .map_or(0, |l| l.no);
                report.warnings.push(warn(
                    "Load Profile",
                    at,
                    "the Load Profile is present but none of its rows could be read",
                ));
            }
        }
    }
}

fn read_io_profile(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
    for s in sections_titled(sections, &["IO Profile"]) {
        let mut ranges: Option<Vec<(usize, usize)>> = None;
        let mut seen = false;
        for l in &lines[s.body.clone()] {
            let t = l.text.trim();
            if t.is_empty() {
                if seen {
                    break;
                }
                continue;
            }
            if let Some(r) = rule_ranges(&l.text) {
                ranges = Some(r);
                continue;
            }
            let Some((label, cells)) = t.split_once(':') else {
                if seen {
                    break;
                }
                continue;
            };
            let label = collapse(label);
            let by_rule = ranges
                .as_ref()
                .filter(|r| r.len() == 4)
                .and_then(|r| cut_cells(&l.text, r))
                .filter(|c| {
                    c[1..]
                        .iter()
                        .all(|v| v.is_empty() || parse_number(v).is_some())
                })
                .map(|c| c[1..].to_vec());
            let cells: Vec<String> = match by_rule {
                Some(c) => c,
                None => cells.split_whitespace().map(str::to_string).collect(),
            };
            let v: Vec<Option<f64>> = cells.iter().map(|c| parse_number(c)).collect();
            let bad = cells.len() > 3
                || cells
                    .iter()
                    .zip(&v)
                    .any(|(c, v)| v.is_none() && !c.is_empty());
            if bad {
                report.warnings.push(warn(
                    "IO Profile",
                    l.no,
                    &format!("`{}` is not a label and three numbers: skipped", shorten(t)),
                ));
                continue;
            }
            seen = true;
            let get = |k: usize| v.get(k).copied().flatten();
            report.io_profile.push(IoProfileLine {
                label,
                read_write_per_s: get(0),
                read_per_s: get(1),
                write_per_s: get(2),
            });
        }
        if !seen {
            report.warnings.push(warn(
                "IO Profile",
                lines[s.at].no,
                "the IO Profile is present but none of its rows could be read",
            ));
        }
    }
}

// ---------------------------------------------------------------------------
// Event tables: Top events, Foreground/Background Wait Events, Wait Classes

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Waits,
    Timeouts,
    Time,
    Avg,
    PerTxn,
    Pct,
    Class,
    ActiveSessions,
}

const TOP_ROLES: &[Role] = &[Role::Waits, Role::Time, Role::Avg, Role::Pct, Role::Class];
/// Which cells a Top row may lack, most likely first: `DB CPU` has no waits
/// and no average.
const TOP_OPTIONAL: &[Role] = &[Role::Avg, Role::Waits];
const EVENT_ROLES: &[Role] = &[
    Role::Waits,
    Role::Timeouts,
    Role::Time,
    Role::Avg,
    Role::PerTxn,
    Role::Pct,
];
/// Idle events have no `% DB time`; 12.2 leaves `%Time -outs` blank.
const EVENT_OPTIONAL: &[Role] = &[Role::Pct, Role::Timeouts, Role::Avg, Role::PerTxn];
const CLASS_ROLES: &[Role] = &[
    Role::Waits,
    Role::Time,
    Role::Avg,
    Role::Pct,
    Role::ActiveSessions,
];
const CLASS_OPTIONAL: &[Role] = &[Role::Avg, Role::Waits];

/// A table row: its name and a cell per role (`None` when blank).
#[derive(Debug)]
struct Row {
    name: String,
    cells: Vec<(Role, Option<String>)>,
}

impl Row {
    fn get(&self, role: Role) -> Option<&str> {
        self.cells
            .iter()
            .find(|(r, _)| *r == role)
            .and_then(|(_, c)| c.as_deref())
    }
}

fn cell_ok(role: Role, c: &str) -> bool {
    match role {
        Role::Class => class_name(c).is_some(),
        Role::Avg => parse_latency_us(c, 1000.0).is_some() || c.eq_ignore_ascii_case("n/a"),
        _ => parse_number(c).is_some() || c.eq_ignore_ascii_case("n/a"),
    }
}

/// A wait class as printed (whole, or cut to 8 or 10 characters), spelled out.
fn class_name(c: &str) -> Option<&'static str> {
    let c = collapse(c);
    WAIT_CLASSES.iter().copied().find(|k| {
        k.eq_ignore_ascii_case(&c)
            || ((c.len() == 8 || c.len() == 10) && starts_with_ci(k, &c) && k.len() > c.len())
    })
}

fn is_numeric_token(t: &str) -> bool {
    parse_number(t).is_some() || parse_latency_us(t, 1.0).is_some() || t.eq_ignore_ascii_case("n/a")
}

fn has_unit(t: &str) -> bool {
    parse_number(t).is_none() && parse_latency_us(t, 1.0).is_some()
}

/// Whitespace tokens with a detached unit (`52.86 s`) joined to its number.
fn tokens(line: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in line.split_whitespace() {
        let unit = matches!(w, "ns" | "us" | "µs" | "ms" | "s");
        if unit && out.last().is_some_and(|p| parse_number(p).is_some()) {
            if let Some(p) = out.last_mut() {
                p.push_str(w);
            }
        } else {
            out.push(w.to_string());
        }
    }
    out
}

/// A row read by the rule's ranges, if it lines up and its cells read.
fn row_by_rule(line: &str, ranges: &[(usize, usize)], roles: &[Role]) -> Option<Row> {
    if ranges.len() != roles.len() + 1 {
        return None;
    }
    let cells = cut_cells(line, ranges)?;
    let name = cells[0].clone();
    if name.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    let mut numbers = 0;
    for (role, c) in roles.iter().zip(&cells[1..]) {
        if c.is_empty() {
            out.push((*role, None));
            continue;
        }
        if !cell_ok(*role, c) {
            return None;
        }
        if *role != Role::Class {
            numbers += 1;
        }
        out.push((*role, Some(c.clone())));
    }
    (numbers > 0).then_some(Row { name, cells: out })
}

/// A row read from the right: the wait class (if the table has one), then the
/// trailing numbers, the rest being the name; blank cells are placed by the
/// table's list of optional cells and by the unit-suffixed average.
fn row_by_tokens(line: &str, roles: &[Role], optional: &[Role]) -> Option<Row> {
    let mut toks = tokens(line);
    let mut class = None;
    if roles.contains(&Role::Class) {
        for n in [2usize, 1] {
            if toks.len() > n {
                let tail = toks[toks.len() - n..].join(" ");
                if class_name(&tail).is_some() {
                    class = Some(tail);
                    toks.truncate(toks.len() - n);
                    break;
                }
            }
        }
    }
    let numeric: Vec<Role> = roles
        .iter()
        .copied()
        .filter(|r| *r != Role::Class)
        .collect();
    let mut k = 0;
    while k < numeric.len() && k < toks.len() && is_numeric_token(&toks[toks.len() - 1 - k]) {
        k += 1;
    }
    if k == 0 || k == toks.len() {
        return None;
    }
    let nums = toks.split_off(toks.len() - k);
    let name = toks.join(" ");
    let kept = place(&nums, &numeric, optional)?;
    let mut cells: Vec<(Role, Option<String>)> = numeric
        .iter()
        .map(|r| {
            let v = kept.iter().position(|k| k == r).map(|p| nums[p].clone());
            (*r, v)
        })
        .collect();
    if roles.contains(&Role::Class) {
        cells.push((Role::Class, class));
    }
    Some(Row { name, cells })
}

/// The roles `nums` fill once as many optional roles as are missing are
/// dropped, trying the likeliest first; a unit-suffixed value must land on
/// the average.
fn place(nums: &[String], roles: &[Role], optional: &[Role]) -> Option<Vec<Role>> {
    let missing = roles.len().checked_sub(nums.len())?;
    let n = optional.len();
    let mut masks: Vec<u32> = (0u32..(1 << n))
        .filter(|m| m.count_ones() as usize == missing)
        .collect();
    masks.sort_by_key(|m| (0..n).filter(|b| m & (1 << b) != 0).collect::<Vec<_>>());
    for m in masks {
        let dropped: Vec<Role> = (0..n)
            .filter(|b| m & (1 << b) != 0)
            .map(|b| optional[b])
            .collect();
        let kept: Vec<Role> = roles
            .iter()
            .copied()
            .filter(|r| !dropped.contains(r))
            .collect();
        if kept
            .iter()
            .zip(nums)
            .all(|(r, v)| !has_unit(v) || *r == Role::Avg)
        {
            return Some(kept);
        }
    }
    None
}

/// The rows of each block of a table, with the warnings for its lines that
/// are not rows. Rows start under the column rule (or under the line that
/// names the first column when the rule was lost) and end at a blank line.
fn table_rows(
    lines: &[Line],
    s: &Section,
    first_column: &str,
    roles: &[Role],
    optional: &[Role],
    warnings: &mut Vec<ParseWarning>,
) -> Vec<(usize, Row)> {
    let body = &lines[s.body.clone()];
    let mut out = Vec::new();
    let mut ranges: Option<Vec<(usize, usize)>> = None;
    let mut in_rows = false;
    let mut k = 0;
    while k < body.len() {
        let l = &body[k];
        k += 1;
        let t = l.text.trim();
        if let Some(r) = rule_ranges(&l.text) {
            if r.len() > 2 || !t.starts_with('~') {
                ranges = Some(r);
                in_rows = true;
            }
            continue;
        }
        if !in_rows {
            if starts_with_ci(t, first_column) {
                in_rows = true;
            }
            continue;
        }
        if t.is_empty() {
            if !out.is_empty() {
                in_rows = false;
            }
            continue;
        }
        if is_note_or_empty_marker(t) {
            continue;
        }
        if is_snip(t) {
            warnings.push(warn(
                &s.title,
                l.no,
                &format!("rows were cut from the report here ({t})"),
            ));
            continue;
        }
        let mut row = ranges
            .as_ref()
            .and_then(|r| row_by_rule(&l.text, r, roles))
            .or_else(|| row_by_tokens(t, roles, optional));
        // A row wrapped by a mail client: its name on one line, its numbers
        // on the next.
        if row.is_none() {
            if let Some(next) = body.get(k) {
                let nt = next.text.trim();
                if !nt.is_empty() && nt.split_whitespace().all(is_numeric_token) {
                    row = row_by_tokens(&format!("{t} {nt}"), roles, optional);
                    if row.is_some() {
                        k += 1;
                    }
                }
            }
        }
        match row {
            Some(r) => out.push((l.no, r)),
            None => warnings.push(warn(
                &s.title,
                l.no,
                &format!("`{}` is not a row of this table: skipped", shorten(t)),
            )),
        }
    }
    out
}

fn has_no_data(lines: &[Line], s: &Section) -> bool {
    lines[s.body.clone()]
        .iter()
        .any(|l| l.text.trim().starts_with("No data exists"))
}

fn event_line(r: &Row) -> EventLine {
    EventLine {
        event: r.name.clone(),
        waits: r.get(Role::Waits).and_then(parse_number),
        total_wait_s: r.get(Role::Time).and_then(parse_number),
        avg_wait_us: r.get(Role::Avg).and_then(|c| parse_latency_us(c, 1000.0)),
        pct_db_time: r.get(Role::Pct).and_then(parse_percent),
        wait_class: r
            .get(Role::Class)
            .map(|c| class_name(c).map_or_else(|| collapse(c), str::to_string)),
    }
}

fn read_top_events(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
    for s in sections_titled(sections, TOP_TITLES) {
        let rows = table_rows(
            lines,
            s,
            "Event",
            TOP_ROLES,
            TOP_OPTIONAL,
            &mut report.warnings,
        );
        if rows.is_empty() && !has_no_data(lines, s) {
            report.warnings.push(warn(
                &s.title,
                lines[s.at].no,
                "the Top events table is present but none of its rows could be read",
            ));
        }
        report
            .top_events
            .extend(rows.iter().map(|(_, r)| event_line(r)));
    }
}

fn read_event_tables(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
    // 10g has no foreground table: its `Wait Events` holds every session's
    // waits, foreground and background together.
    let all_sessions = sections_titled(sections, &["Foreground Wait Events"]).is_empty()
        && !sections_titled(sections, &["Wait Events"]).is_empty();
    let foreground = if all_sessions {
        "Wait Events"
    } else {
        "Foreground Wait Events"
    };
    for (title, background) in [(foreground, false), ("Background Wait Events", true)] {
        for s in sections_titled(sections, &[title]) {
            let rows = table_rows(
                lines,
                s,
                "Event",
                EVENT_ROLES,
                EVENT_OPTIONAL,
                &mut report.warnings,
            );
            if rows.is_empty() && !has_no_data(lines, s) {
                report.warnings.push(warn(
                    title,
                    lines[s.at].no,
                    "the table is present but none of its rows could be read",
                ));
            }
            let target = if background {
                &mut report.background_events
            } else {
                &mut report.foreground_events
            };
            target.extend(rows.iter().map(|(_, r)| event_line(r)));
        }
    }
    if all_sessions {
        foreground_from_all_sessions(lines, sections, report);
    }
}

/// 10g's `Wait Events` less its `Background Wait Events`: what sessions
/// waited on, which is what DB time is made of and what the replay compares
/// (all sessions = foreground + background, over the same snapshots). An
/// event left with no waits was a background one and is dropped; the average
/// is recomputed from what is left, the printed one being the mix's. Without
/// a background table the figures stay as printed, and that is said.
fn foreground_from_all_sessions(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
    if report.background_events.is_empty() {
        let at = sections_titled(sections, &["Wait Events"])
            .first()
            .map_or(0, |s| lines[s.at].no);
        report.warnings.push(warn(
            "Wait Events",
            at,
            "this 10g `Wait Events` table holds foreground and background waits together and \
             no readable `Background Wait Events` table to take out of it: read as the \
             foreground events",
        ));
        return;
    }
    let background = &report.background_events;
    let minus = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some((a - b).max(0.0)),
        (a, None) => a,
        (None, Some(_)) => None,
    };
    let mut foreground = Vec::with_capacity(report.foreground_events.len());
    for e in &report.foreground_events {
        let Some(bg) = background.iter().find(|b| b.event == e.event) else {
            foreground.push(e.clone());
            continue;
        };
        let waits = minus(e.waits, bg.waits);
        if waits.is_some_and(|w| w <= 0.0) {
            continue;
        }
        let total_wait_s = minus(e.total_wait_s, bg.total_wait_s);
        let avg_wait_us = match (waits, total_wait_s) {
            (Some(w), Some(t)) if w > 0.0 => Some(t * 1e6 / w),
            _ => None,
        };
        foreground.push(EventLine {
            waits,
            total_wait_s,
            avg_wait_us,
            ..e.clone()
        });
    }
    report.foreground_events = foreground;
}

fn read_wait_classes(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
    for s in sections_titled(sections, &["Wait Classes by Total Wait Time"]) {
        let rows = table_rows(
            lines,
            s,
            "Wait Class",
            CLASS_ROLES,
            CLASS_OPTIONAL,
            &mut report.warnings,
        );
        if rows.is_empty() {
            report.warnings.push(warn(
                &s.title,
                lines[s.at].no,
                "the Wait Classes table is present but none of its rows could be read",
            ));
        }
        report
            .wait_classes
            .extend(rows.iter().map(|(_, r)| WaitClassLine {
                wait_class: r.name.clone(),
                waits: r.get(Role::Waits).and_then(parse_number),
                total_wait_s: r.get(Role::Time).and_then(parse_number),
                avg_wait_us: r.get(Role::Avg).and_then(|c| parse_latency_us(c, 1000.0)),
                pct_db_time: r.get(Role::Pct).and_then(parse_percent),
            }));
    }
}

// ---------------------------------------------------------------------------
// Histograms

fn read_histograms(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
    for s in sections
        .iter()
        .filter(|s| starts_with_ci(&s.title, "Wait Event Histogram"))
    {
        let body = &lines[s.body.clone()];
        let mut labels: Vec<String> = Vec::new();
        let mut ranges: Option<Vec<(usize, usize)>> = None;
        let mut header_line: Option<&str> = None;
        let mut prev: Option<&str> = None;
        let mut count = 0;
        for l in body {
            let t = l.text.trim();
            if let Some(r) = rule_ranges(&l.text).filter(|r| r.len() >= 3) {
                header_line = prev;
                labels = header_line
                    .and_then(|h| cut_cells(h, &r))
                    .filter(|c| {
                        let words: Vec<&str> =
                            header_line.unwrap_or("").split_whitespace().collect();
                        c[2..]
                            .iter()
                            .all(|x| !x.is_empty() && words.contains(&x.as_str()))
                    })
                    .map(|c| c[2..].to_vec())
                    .or_else(|| {
                        // A header out of line with its rule (pasted): its
                        // last words are the bucket labels.
                        let words: Vec<&str> = header_line?.split_whitespace().collect();
                        let n = r.len() - 2;
                        (words.len() > n).then(|| {
                            words[words.len() - n..]
                                .iter()
                                .map(|w| w.to_string())
                                .collect()
                        })
                    })
                    .unwrap_or_default();
                ranges = Some(r);
                continue;
            }
            if !t.is_empty() {
                prev = Some(&l.text);
            }
            if ranges.is_none() || t.is_empty() || is_note_or_empty_marker(t) {
                continue;
            }
            if is_snip(t) {
                report.warnings.push(warn(
                    &s.title,
                    l.no,
                    &format!("rows were cut from the report here ({t})"),
                ));
                continue;
            }
            let r = ranges.as_deref().unwrap_or(&[]);
            let by_rule = (!labels.is_empty())
                .then(|| cut_cells(&l.text, r))
                .flatten()
                .filter(|c| {
                    !c[0].is_empty()
                        && parse_number(&c[1]).is_some()
                        && c[2..]
                            .iter()
                            .all(|x| x.is_empty() || parse_number(x).is_some())
                });
            let line = if let Some(c) = by_rule {
                HistogramLine {
                    table: s.title.clone(),
                    event: c[0].clone(),
                    total_waits: parse_number(&c[1]),
                    buckets: labels
                        .iter()
                        .cloned()
                        .zip(c[2..].iter().map(|x| parse_number(x)))
                        .collect(),
                }
            } else {
                let toks: Vec<&str> = t.split_whitespace().collect();
                let first =
                    (0..toks.len()).find(|&k| toks[k..].iter().all(|x| parse_number(x).is_some()));
                let Some(first) = first.filter(|&f| f > 0 && f < toks.len()) else {
                    report.warnings.push(warn(
                        &s.title,
                        l.no,
                        &format!("`{}` is not a histogram row: skipped", shorten(t)),
                    ));
                    continue;
                };
                let nums: Vec<Option<f64>> =
                    toks[first..].iter().map(|x| parse_number(x)).collect();
                let n_buckets = r.len().saturating_sub(2);
                let header_words: Vec<&str> =
                    header_line.unwrap_or("").split_whitespace().collect();
                let buckets = if nums.len() == n_buckets + 1 && header_words.len() >= n_buckets {
                    header_words[header_words.len() - n_buckets..]
                        .iter()
                        .map(|w| w.to_string())
                        .zip(nums[1..].iter().copied())
                        .collect()
                } else {
                    report.warnings.push(warn(
                        &s.title,
                        l.no,
                        &format!(
                            "`{}`: the spacing is lost and some buckets are blank, so the \
                             buckets cannot be told apart: only the total is kept",
                            shorten(t)
                        ),
                    ));
                    Vec::new()
                };
                HistogramLine {
                    table: s.title.clone(),
                    event: toks[..first].join(" "),
                    total_waits: nums[0],
                    buckets,
                }
            };
            report.histograms.push(line);
            count += 1;
        }
        if count == 0 && !has_no_data(lines, s) {
            report.warnings.push(warn(
                &s.title,
                lines[s.at].no,
                "the histogram is present but none of its rows could be read",
            ));
        }
    }
}

// ---------------------------------------------------------------------------
// Instance Activity Stats

fn is_stat_header(line: &str) -> bool {
    collapse(line).eq_ignore_ascii_case("Statistic Total per Second per Trans")
}

/// A statistics row as `read_stat_tables` takes it: a name and three cells.
fn is_stat_row(t: &str) -> bool {
    let w: Vec<&str> = t.split_whitespace().collect();
    w.len() >= 4
        && w[w.len() - 3..]
            .iter()
            .all(|c| is_numeric_token(c) || c.chars().all(|x| x == '#'))
}

/// The lines of a block for `read_stat_tables`, wrapped rows joined, with the
/// original line of each.
fn stat_text(lines: &[Line]) -> (String, Vec<usize>) {
    let mut text = String::new();
    let mut map = Vec::new();
    let mut k = 0;
    while k < lines.len() {
        let t = lines[k].text.trim();
        let mut s = lines[k].text.clone();
        if !t.is_empty() && !is_stat_row(t) && !is_stat_header(t) && rule_ranges(t).is_none() {
            if let Some(next) = lines.get(k + 1) {
                let nt = next.text.trim();
                let joined = format!("{t} {nt}");
                if !nt.is_empty()
                    && nt.split_whitespace().count() <= 3
                    && nt.split_whitespace().all(is_numeric_token)
                    && is_stat_row(&joined)
                {
                    s = joined;
                    map.push(lines[k].no);
                    text.push_str(&s);
                    text.push('\n');
                    k += 2;
                    continue;
                }
            }
        }
        map.push(lines[k].no);
        text.push_str(&s);
        text.push('\n');
        k += 1;
    }
    (text, map)
}

fn read_statistics(
    lines: &[Line],
    sections: &[Section],
    has_stat_header: bool,
    report: &mut AwrReport,
) {
    let blocks = sections_titled(sections, STAT_TITLES);
    let mut groups: Vec<(String, Vec<usize>, Vec<StatRow>)> = Vec::new();
    let mut read = |title: &str, part: &[Line], report: &mut AwrReport| {
        let (text, map) = stat_text(part);
        let (rows, warnings) = read_stat_tables(&text);
        let orig = |k: usize| map.get(k.wrapping_sub(1)).copied().unwrap_or(0);
        for w in warnings {
            report.warnings.push(warn(title, orig(w.line), &w.message));
        }
        let rows: Vec<StatRow> = rows
            .into_iter()
            .map(|mut r| {
                r.line = orig(r.line);
                r
            })
            .collect();
        match groups.iter_mut().find(|g| g.0.eq_ignore_ascii_case(title)) {
            Some(g) => g.2.extend(rows),
            None => groups.push((title.to_string(), Vec::new(), rows)),
        }
    };
    if blocks.is_empty() {
        if has_stat_header {
            // A fragment (the statistics table pasted alone, as in a post).
            read("Instance Activity Stats", lines, report);
        }
    } else {
        for s in &blocks {
            read(&s.title, &lines[s.body.clone()], report);
        }
    }
    for s in &blocks {
        let body = &lines[s.body.clone()];
        if !body.iter().any(|l| is_stat_header(&l.text)) && !has_no_data(lines, s) {
            report.warnings.push(warn(
                &s.title,
                lines[s.at].no,
                "the table has no `Statistic Total per Second per Trans` header: its rows \
                 could not be read",
            ));
        }
    }
    // Keep the first of each name; the Key table repeats rows of the full one.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (title, _, rows) in &groups {
        let mut dup: Vec<(String, usize, usize)> = Vec::new(); // name, count, first line
        let mut in_this: HashMap<&str, usize> = HashMap::new();
        for r in rows {
            let n = in_this.entry(r.name.as_str()).or_insert(0);
            *n += 1;
            if *n == 2 {
                let first = rows.iter().find(|x| x.name == r.name).map_or(0, |x| x.line);
                dup.push((r.name.clone(), 0, first));
            }
            match seen.get(&r.name) {
                None => {
                    seen.insert(r.name.clone(), report.instance_activity.len());
                    report.instance_activity.push(Statistic::from(r));
                }
                Some(&k) => {
                    let kept = &report.instance_activity[k];
                    if *n == 1 && (kept.total, kept.per_second) != (r.total, r.per_second) {
                        report.warnings.push(warn(
                            title,
                            r.line,
                            &format!(
                                "`{}` has other values here than in an earlier table: kept the \
                                 first",
                                r.name
                            ),
                        ));
                    }
                }
            }
        }
        for (name, _, first) in dup {
            let count = in_this.get(name.as_str()).copied().unwrap_or(0);
            report.warnings.push(warn(
                title,
                first,
                &format!(
                    "{count} rows are named `{name}` (names are cut to their column): kept the \
                     first; match this statistic by a longer name"
                ),
            ));
        }
    }
}

// ---------------------------------------------------------------------------
// IOStat by Function summary

/// IOStat `Data` cells in MiB: `2.8G` (×1024), `555M`, `.801M`, a bare
/// number (11.2 per-second column) already in MiB.
fn mib(c: &str) -> Option<f64> {
    if c.ends_with(|x: char| x.is_ascii_digit()) {
        parse_number(c)
    } else {
        parse_size_bytes(c).map(|b| b / 1_048_576.0)
    }
}

fn read_iostat(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
    const CELLS: usize = 8;
    for s in sections_titled(sections, &["IOStat by Function summary"]) {
        let body = &lines[s.body.clone()];
        let mut ranges: Option<Vec<(usize, usize)>> = None;
        let mut count = 0;
        for l in body {
            let t = l.text.trim();
            if let Some(r) = rule_ranges(&l.text) {
                ranges = Some(r);
                continue;
            }
            if ranges.is_none() || t.is_empty() || is_note_or_empty_marker(t) {
                continue;
            }
            let ok = |c: &[String]| {
                c.len() == CELLS + 1
                    && !c[0].is_empty()
                    && c[1..]
                        .iter()
                        .all(|x| x.is_empty() || is_numeric_token(x) || mib(x).is_some())
            };
            let cells = ranges
                .as_ref()
                .and_then(|r| cut_cells(&l.text, r))
                .filter(|c| ok(c))
                .or_else(|| {
                    // Spacing lost: the last eight words, or seven when the
                    // average (blank when there were no waits) is missing.
                    let w: Vec<String> = t.split_whitespace().map(str::to_string).collect();
                    let n = w.len();
                    [CELLS, CELLS - 1].into_iter().find_map(|k| {
                        let mut c = vec![w[..n.checked_sub(k).filter(|&f| f > 0)?].join(" ")];
                        c.extend(w[n - k..].iter().cloned());
                        c.resize(CELLS + 1, String::new());
                        ok(&c).then_some(c)
                    })
                })
                .filter(|c| ok(c));
            let Some(c) = cells else {
                report.warnings.push(warn(
                    &s.title,
                    l.no,
                    &format!("`{}` is not a row of this table: skipped", shorten(t)),
                ));
                continue;
            };
            report.iostat_by_function.push(IoFunctionLine {
                function: c[0].clone(),
                reads_data: mib(&c[1]),
                reqs_per_sec_read: parse_number(&c[2]),
                data_per_sec_read: mib(&c[3]),
                writes_data: mib(&c[4]),
                reqs_per_sec_write: parse_number(&c[5]),
                data_per_sec_write: mib(&c[6]),
                waits_count: parse_number(&c[7]),
                avg_time: parse_latency_us(&c[8], 1000.0),
            });
            count += 1;
        }
        if count == 0 && !has_no_data(lines, s) {
            report.warnings.push(warn(
                &s.title,
                lines[s.at].no,
                "the table is present but none of its rows could be read",
            ));
        }
    }
}

// ---------------------------------------------------------------------------
// init.ora Parameters

fn read_parameters(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
    for s in sections_titled(sections, PARAMETER_TITLES) {
        let mut ranges: Option<Vec<(usize, usize)>> = None;
        for l in &lines[s.body.clone()] {
            let t = l.text.trim();
            if let Some(r) = rule_ranges(&l.text) {
                ranges = Some(r);
                continue;
            }
            if ranges.is_none() || t.is_empty() || is_note_or_empty_marker(t) {
                continue;
            }
            let name = t.split_whitespace().next().unwrap_or("");
            if !WANTED_PARAMETERS.contains(&name)
                || report.parameters.iter().any(|(k, _)| k == name)
            {
                continue;
            }
            let value = ranges
                .as_ref()
                .and_then(|r| cut_cells(&l.text, r))
                .and_then(|c| c.get(1).cloned())
                .filter(|v| !v.is_empty())
                .or_else(|| t.split_whitespace().nth(1).map(str::to_string));
            if let Some(v) = value {
                report.parameters.push((name.to_string(), v));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// What is missing

fn release_at_least(release: &str, min: &[u32]) -> bool {
    let parts: Vec<u32> = release
        .split('.')
        .map_while(|p| p.trim().parse::<u32>().ok())
        .collect();
    !parts.is_empty() && parts.as_slice() >= min
}

fn warn_missing(lines: &[Line], sections: &[Section], has_title: bool, report: &mut AwrReport) {
    let missing = |name: &str| {
        warn(
            name,
            0,
            &format!("section `{name}` not found in the report: its figures are missing"),
        )
    };
    if !lines
        .iter()
        .any(|l| starts_with_ci(l.text.trim_start(), "Load Profile"))
    {
        report.warnings.push(missing("Load Profile"));
    }
    if sections_titled(sections, STAT_TITLES).is_empty() && report.instance_activity.is_empty() {
        report.warnings.push(missing("Instance Activity Stats"));
    }
    if sections_titled(sections, TOP_TITLES).is_empty() {
        report.warnings.push(missing(
            "Top 10 Foreground Events by Total Wait Time / Top 5 Timed Foreground Events",
        ));
    }
    if !sections
        .iter()
        .any(|s| starts_with_ci(&s.title, "Wait Event Histogram"))
    {
        report.warnings.push(missing("Wait Event Histogram"));
    }
    let new_format = report
        .header
        .release
        .as_deref()
        .is_some_and(|r| release_at_least(r, &[11, 2, 0, 4]));
    if new_format && sections_titled(sections, &["IO Profile"]).is_empty() {
        report.warnings.push(missing("IO Profile"));
    }
    if report.header.container.is_some() {
        let writes = report
            .instance_activity
            .iter()
            .any(|s| s.name.starts_with("physical write"));
        report.warnings.push(warn(
            "Instance Activity Stats",
            0,
            &format!(
                "PDB-level report (container {}): Oracle reports no write statistics per PDB{}, \
                 so writes cannot be derived; take an instance-level report from CDB$ROOT",
                report.header.container.as_deref().unwrap_or("?"),
                if writes {
                    " and the ones printed are not the instance's"
                } else {
                    " and none are printed"
                }
            ),
        ));
    }
    if has_title && !lines.iter().any(|l| l.text.trim() == "End of Report") {
        let last = lines.last().map_or(0, |l| l.no);
        report.warnings.push(warn(
            "report",
            last,
            "the report ends without `End of Report`: it looks cut, and the sections after the \
             cut are missing",
        ));
    }
}
