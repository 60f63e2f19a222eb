//! Where the AWR report is in a text: found by its own marks (its banner,
//! its header tables, its titles over their tables), so that the text of a
//! mail or a post around it is not read as part of it.

use crate::number::collapse;

use super::lines::{
    is_end_rule, normalize, rule_ranges, title_of, Line, SUMMARY_TITLES, UNDERLINE_LOOKAHEAD_MAX,
};

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
pub(super) struct Located {
    /// Indices of its lines: from its first mark to the end of its last.
    pub(super) lines: std::ops::Range<usize>,
    /// Index of the first mark of another report after it, if there is one.
    pub(super) next: Option<usize>,
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
pub(super) fn header_kind(line: &str) -> Option<&'static str> {
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
pub(super) fn locate(lines: &[Line]) -> Option<Located> {
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

pub(super) fn is_stat_header(line: &str) -> bool {
    collapse(line).eq_ignore_ascii_case("Statistic Total per Second per Trans")
}
