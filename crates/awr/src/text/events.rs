//! Event tables: Top events, Foreground/Background Wait Events, Wait Classes.

use crate::model::{AwrReport, EventLine, ParseWarning, WaitClassLine};
use crate::number::{collapse, parse_latency_us, parse_number, parse_percent};

use super::lines::{
    cut_cells, has_no_data, is_note_or_empty_marker, is_numeric_token, is_snip, rule_ranges,
    sections_titled, shorten, starts_with_ci, warn, Line, Section,
};

pub(super) const TOP_TITLES: &[&str] = &[
    "Top 10 Foreground Events by Total Wait Time",
    "Top 5 Timed Foreground Events",
    "Top 5 Timed Events",
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

pub(super) fn read_top_events(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
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

pub(super) fn read_event_tables(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
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

pub(super) fn read_wait_classes(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
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
