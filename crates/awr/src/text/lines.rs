//! The normalised text of an AWR text report: its lines with the damage of
//! pasting undone, its titled sections, the column rules under their
//! headers and the cells they cut; what every section reader reads with.

use crate::model::ParseWarning;
use crate::number::{collapse, parse_latency_us, parse_number};

/// A line of the normalised text and its 1-based line in the original.
#[derive(Debug, Clone)]
pub(super) struct Line {
    pub(super) no: usize,
    pub(super) text: String,
}

/// A titled part of the report: the title line and the lines after it up to
/// the next title (or the end rule of a main section).
#[derive(Debug, Clone)]
pub(super) struct Section {
    pub(super) title: String,
    /// Index (into the normalised lines) of the title line.
    pub(super) at: usize,
    pub(super) body: std::ops::Range<usize>,
}

/// Summary-section titles (underlined with `~~~~`), longest first so that a
/// title that begins with another is matched whole.
pub(super) const SUMMARY_TITLES: &[&str] = &[
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

/// How many lines ahead a title may look for its `~~~~` underline.
pub(super) const UNDERLINE_LOOKAHEAD_MAX: usize = 2;

pub(super) fn warn(section: &str, line: usize, message: &str) -> ParseWarning {
    ParseWarning {
        section: section.to_string(),
        line,
        message: message.to_string(),
    }
}

/// Lines with the damage of §5 undone and the SQL*Plus artefacts dropped,
/// each with its line number in the original text.
pub(super) fn normalize(text: &str) -> Vec<Line> {
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

pub(super) fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len()
        && s.is_char_boundary(prefix.len())
        && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// The title a line opens, if it is a section title.
pub(super) fn title_of(lines: &[Line], i: usize) -> Option<String> {
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
pub(super) fn find_sections(lines: &[Line]) -> Vec<Section> {
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

pub(super) fn sections_titled<'a>(sections: &'a [Section], titles: &[&str]) -> Vec<&'a Section> {
    sections
        .iter()
        .filter(|s| titles.iter().any(|t| s.title.eq_ignore_ascii_case(t)))
        .collect()
}

/// The section end rule: one run of 50 or more hyphens (10g/11g: 61, 12c+: 54).
pub(super) fn is_end_rule(line: &str) -> bool {
    let t = line.trim();
    t.len() >= 50 && t.chars().all(|c| c == '-')
}

/// The column rule under a table header: two or more runs of `-` (the first
/// may be `~`, the underline of a summary title), as character ranges.
pub(super) fn rule_ranges(line: &str) -> Option<Vec<(usize, usize)>> {
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
pub(super) fn cut_cells(line: &str, ranges: &[(usize, usize)]) -> Option<Vec<String>> {
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

pub(super) fn is_note_or_empty_marker(t: &str) -> bool {
    t.starts_with("->")
        || t.starts_with("No data exists")
        || t.starts_with('~')
        || t.eq_ignore_ascii_case("End of Report")
}

pub(super) fn is_snip(t: &str) -> bool {
    t.to_ascii_uppercase().contains("SNIP")
}

pub(super) fn shorten(t: &str) -> String {
    const SHOWN_MAX: usize = 60;
    if t.chars().count() <= SHOWN_MAX {
        t.to_string()
    } else {
        format!("{}…", t.chars().take(SHOWN_MAX).collect::<String>())
    }
}

pub(super) fn is_numeric_token(t: &str) -> bool {
    parse_number(t).is_some() || parse_latency_us(t, 1.0).is_some() || t.eq_ignore_ascii_case("n/a")
}

pub(super) fn has_no_data(lines: &[Line], s: &Section) -> bool {
    lines[s.body.clone()]
        .iter()
        .any(|l| l.text.trim().starts_with("No data exists"))
}
