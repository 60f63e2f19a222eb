//! Instance Activity Stats (the Key, full and Other tables).

use std::collections::HashMap;

use crate::model::{AwrReport, Statistic};
use crate::stats::{read_stat_tables, StatRow};

use super::lines::{
    has_no_data, is_numeric_token, rule_ranges, sections_titled, warn, Line, Section,
};
use super::locate::is_stat_header;

pub(super) const STAT_TITLES: &[&str] = &[
    "Key Instance Activity Stats",
    "Instance Activity Stats",
    "Other Instance Activity Stats",
];

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

pub(super) fn read_statistics(
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
