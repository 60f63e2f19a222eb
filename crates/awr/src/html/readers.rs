//! The readers, one per kind of table, and the warnings they leave.

use crate::model::{
    EventLine, Header, HistogramLine, IoFunctionLine, IoProfileLine, ParseWarning, ProfileLine,
    Statistic, WaitClassLine,
};
use crate::number::{parse_latency_us, parse_number, parse_size_bytes, whole_u32};
use crate::profile::Figure;

use super::document::{Row, Table};

/// Warnings about single rows of one table beyond this are summed up in one.
const ROW_WARNINGS_MAX: usize = 20;

#[derive(Default)]
pub(super) struct Warnings {
    pub(super) list: Vec<ParseWarning>,
}

impl Warnings {
    pub(super) fn push(&mut self, section: &str, line: usize, message: String) {
        self.list.push(ParseWarning {
            section: section.to_string(),
            line,
            message,
        });
    }

    pub(super) fn report(&mut self, message: String) {
        self.push("report", 0, message);
    }

    /// One warning per skipped row, up to [`ROW_WARNINGS_MAX`], then a count.
    pub(super) fn rows(&mut self, section: &str, skipped: &[(usize, String)]) {
        for (line, what) in skipped.iter().take(ROW_WARNINGS_MAX) {
            self.push(
                section,
                *line,
                format!("row `{what}` could not be read: skipped"),
            );
        }
        if skipped.len() > ROW_WARNINGS_MAX {
            self.push(
                section,
                0,
                format!(
                    "{} more rows could not be read: skipped",
                    skipped.len() - ROW_WARNINGS_MAX
                ),
            );
        }
    }

    pub(super) fn empty(&mut self, section: &str, line: usize) {
        self.push(
            section,
            line,
            format!("section `{section}` is present but no row of it could be read"),
        );
    }
}

fn cell(r: &Row, i: usize) -> &str {
    r.cells.get(i).map_or("", String::as_str)
}

fn to_u64(s: &str) -> Option<u64> {
    s.trim().replace(',', "").parse::<u64>().ok()
}

fn label(s: &str) -> String {
    s.trim().trim_end_matches(':').trim().to_string()
}

pub(super) fn read_header_table(t: &Table, h: &mut Header) {
    let width = t.rows.iter().map(|r| r.cells.len()).max().unwrap_or(0);
    let headings = t.headings(width);
    for r in t.data_rows() {
        let first = label(cell(r, 0)).to_ascii_lowercase();
        let later: Vec<&str> = r
            .cells
            .iter()
            .skip(1)
            .map(String::as_str)
            .filter(|c| !c.is_empty())
            .collect();
        let first_number = || {
            later
                .iter()
                .find_map(|c| c.split_whitespace().next().and_then(parse_number))
        };
        match first.as_str() {
            "begin snap" => {
                h.begin_snap_id = h
                    .begin_snap_id
                    .or_else(|| later.first().and_then(|c| to_u64(c)));
                h.begin_snap_time = h
                    .begin_snap_time
                    .clone()
                    .or_else(|| later.get(1).map(|c| c.to_string()));
                continue;
            }
            "end snap" => {
                h.end_snap_id = h
                    .end_snap_id
                    .or_else(|| later.first().and_then(|c| to_u64(c)));
                h.end_snap_time = h
                    .end_snap_time
                    .clone()
                    .or_else(|| later.get(1).map(|c| c.to_string()));
                continue;
            }
            "elapsed" => {
                h.elapsed_min = h.elapsed_min.or_else(first_number);
                continue;
            }
            "db time" => {
                h.db_time_min = h.db_time_min.or_else(first_number);
                continue;
            }
            _ => {}
        }
        for (i, name) in headings.iter().enumerate() {
            let v = cell(r, i).trim();
            if v.is_empty() {
                continue;
            }
            let text = || Some(v.to_string());
            let yes = || Some(v.eq_ignore_ascii_case("yes"));
            let num = || parse_number(v).and_then(whole_u32);
            match name.as_str() {
                "db name" => h.db_name = h.db_name.clone().or_else(text),
                "db id" => h.db_id = h.db_id.or_else(|| to_u64(v)),
                "instance" => h.instance = h.instance.clone().or_else(text),
                "inst num" | "inst num." | "instance number" => {
                    h.instance_number = h.instance_number.or_else(num)
                }
                "release" => h.release = h.release.clone().or_else(text),
                "rac" => h.rac = h.rac.or_else(yes),
                "cdb" => h.cdb = h.cdb.or_else(yes),
                "container name" => h.container = h.container.clone().or_else(text),
                "host name" | "host" => h.host = h.host.clone().or_else(text),
                "platform" => h.platform = h.platform.clone().or_else(text),
                "cpus" => h.cpus = h.cpus.or_else(num),
                "cores" => h.cores = h.cores.or_else(num),
                "sockets" => h.sockets = h.sockets.or_else(num),
                "memory (gb)" | "memory(gb)" | "memory (g)" => {
                    h.memory_gb = h.memory_gb.or_else(|| parse_number(v))
                }
                _ => {}
            }
        }
    }
}

pub(super) fn read_cache_sizes(t: &Table, h: &mut Header) {
    for r in t.data_rows() {
        for (i, c) in r.cells.iter().enumerate() {
            if label(c).eq_ignore_ascii_case("std block size") {
                if let Some(v) = parse_size_bytes(cell(r, i + 1)).and_then(whole_u32) {
                    h.block_size = h.block_size.or(Some(v));
                }
            }
        }
    }
}

pub(super) fn read_load_profile(t: &Table, out: &mut Vec<ProfileLine>, w: &mut Warnings) {
    let section = "Load Profile";
    let mut skipped = Vec::new();
    let mut known = 0;
    let before = out.len();
    for r in t.data_rows() {
        let name = label(cell(r, 0));
        let cells: Vec<&str> = r.cells.iter().skip(1).map(String::as_str).collect();
        let values: Vec<Option<f64>> = cells.iter().map(|c| parse_number(c)).collect();
        let unreadable = cells
            .iter()
            .zip(&values)
            .any(|(c, v)| !c.is_empty() && v.is_none());
        if name.is_empty() || values.iter().all(Option::is_none) || unreadable {
            skipped.push((r.line, r.cells.join(" | ")));
            continue;
        }
        if Figure::from_label(&name).is_some() {
            known += 1;
        }
        let get = |k: usize| values.get(k).copied().flatten();
        out.push(ProfileLine {
            label: name,
            per_second: get(0),
            per_transaction: get(1),
            per_exec: get(2),
            per_call: get(3),
        });
    }
    w.rows(section, &skipped);
    if out.len() == before {
        w.empty(section, t.line);
    } else if known == 0 {
        w.push(
            section,
            t.line,
            "none of the Load Profile labels is one Cairn knows (DB Time(s), Redo size, \
             Physical reads …): its figures are kept by label only"
                .into(),
        );
    }
}

/// Where an event or wait-class table keeps each figure, by column heading.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventColumns {
    pub waits: Option<usize>,
    pub time_s: Option<usize>,
    pub avg: Option<usize>,
    pub pct_db_time: Option<usize>,
    pub class: Option<usize>,
}

impl EventColumns {
    /// From headings (any case, whitespace collapsed); the name is column 0.
    /// `% bg time` (Background Wait Events) is not a share of DB time and is
    /// left out; `%Time -outs`, `Waits /txn` are not figures the model keeps.
    pub(crate) fn from_headings(headings: &[String]) -> EventColumns {
        let mut c = EventColumns::default();
        for (i, h) in headings.iter().enumerate().skip(1) {
            let h = h
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_ascii_lowercase();
            let set = |slot: &mut Option<usize>| {
                if slot.is_none() {
                    *slot = Some(i);
                }
            };
            if h == "waits" || h == "total waits" {
                set(&mut c.waits);
            } else if h.contains("avg") && !h.contains("active") {
                set(&mut c.avg);
            } else if h.starts_with('%') && (h.contains("db time") || h.contains("call time")) {
                set(&mut c.pct_db_time);
            } else if h.contains("time")
                && (h.contains("(s)") || h.contains("(sec)"))
                && !h.starts_with('%')
            {
                set(&mut c.time_s);
            } else if h == "wait class" || h == "class" {
                set(&mut c.class);
            }
        }
        c
    }

    /// The 11.2.0.4 Top 10 layout, for a table printed without headings.
    fn top_default() -> EventColumns {
        EventColumns {
            waits: Some(1),
            time_s: Some(2),
            avg: Some(3),
            pct_db_time: Some(4),
            class: Some(5),
        }
    }

    pub(crate) fn has_figures(&self) -> bool {
        self.waits.is_some() || self.time_s.is_some()
    }
}

/// An event line from its cells, or `None` when the name is empty or a
/// figure cell holds text that is not a number.
pub(crate) fn event_line(cells: &[&str], c: &EventColumns) -> Option<EventLine> {
    let event = cells.first()?.trim();
    if event.is_empty() {
        return None;
    }
    let get = |i: Option<usize>| i.and_then(|i| cells.get(i)).map_or("", |s| s.trim());
    let number = |i: Option<usize>| -> Result<Option<f64>, ()> {
        let s = get(i);
        match parse_number(s) {
            Some(v) => Ok(Some(v)),
            None if s.is_empty()
                || s.eq_ignore_ascii_case("n/a")
                || s.chars().all(|c| c == '#') =>
            {
                Ok(None)
            }
            None => Err(()),
        }
    };
    let waits = number(c.waits).ok()?;
    let total_wait_s = number(c.time_s).ok()?;
    let pct_db_time = number(c.pct_db_time).ok()?;
    let avg_text = get(c.avg);
    let avg_wait_us = parse_latency_us(avg_text, 1000.0);
    if avg_wait_us.is_none()
        && !avg_text.is_empty()
        && parse_number(avg_text).is_none()
        && !avg_text.eq_ignore_ascii_case("n/a")
    {
        return None;
    }
    if waits.is_none() && total_wait_s.is_none() && pct_db_time.is_none() {
        return None;
    }
    let class = get(c.class);
    Some(EventLine {
        event: event.to_string(),
        waits,
        total_wait_s,
        avg_wait_us,
        pct_db_time,
        wait_class: (!class.is_empty()).then(|| class.to_string()),
    })
}

pub(super) fn read_events(t: &Table, section: &str, out: &mut Vec<EventLine>, w: &mut Warnings) {
    let width = t.data_rows().map(|r| r.cells.len()).max().unwrap_or(0);
    let mut cols = EventColumns::from_headings(&t.headings(width));
    if !cols.has_figures() {
        if width == 6 {
            cols = EventColumns::top_default();
        } else {
            w.push(
                section,
                t.line,
                format!("section `{section}` has no Waits or Time column heading: not read"),
            );
            return;
        }
    }
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let cells: Vec<&str> = r.cells.iter().map(String::as_str).collect();
        match event_line(&cells, &cols) {
            Some(e) => out.push(e),
            None => skipped.push((r.line, r.cells.join(" | "))),
        }
    }
    w.rows(section, &skipped);
    if out.len() == before {
        w.empty(section, t.line);
    }
}

pub(super) fn read_wait_classes(t: &Table, out: &mut Vec<WaitClassLine>, w: &mut Warnings) {
    let section = t.name("Wait Classes by Total Wait Time");
    let width = t.data_rows().map(|r| r.cells.len()).max().unwrap_or(0);
    let mut cols = EventColumns::from_headings(&t.headings(width));
    cols.class = None;
    if !cols.has_figures() {
        w.push(
            &section,
            t.line,
            format!("section `{section}` has no Waits or Time column heading: not read"),
        );
        return;
    }
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let cells: Vec<&str> = r.cells.iter().map(String::as_str).collect();
        match event_line(&cells, &cols) {
            Some(e) => out.push(WaitClassLine {
                wait_class: e.event,
                waits: e.waits,
                total_wait_s: e.total_wait_s,
                avg_wait_us: e.avg_wait_us,
                pct_db_time: e.pct_db_time,
            }),
            None => skipped.push((r.line, r.cells.join(" | "))),
        }
    }
    w.rows(&section, &skipped);
    if out.len() == before {
        w.empty(&section, t.line);
    }
}

pub(super) fn read_histogram(t: &Table, out: &mut Vec<HistogramLine>, w: &mut Warnings) {
    let title = t.name("Wait Event Histogram");
    let width = t.data_rows().map(|r| r.cells.len()).max().unwrap_or(0);
    if width < 3 {
        if !t.no_data() {
            w.empty(&title, t.line);
        }
        return;
    }
    let headings = t.heading_cells();
    let buckets = width - 2;
    // The bucket labels are the last `buckets` headings of the row nearest the data.
    let labels: Vec<String> = (0..buckets)
        .map(|i| {
            let k = (headings.len() + i).checked_sub(buckets);
            k.and_then(|k| headings.get(k))
                .cloned()
                .unwrap_or_else(|| format!("bucket {}", i + 1))
        })
        .collect();
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let event = cell(r, 0).trim();
        let total = cell(r, 1);
        let values: Vec<Option<f64>> = (0..buckets).map(|i| parse_number(cell(r, i + 2))).collect();
        let bad = (0..buckets).any(|i| !cell(r, i + 2).is_empty() && values[i].is_none())
            || (!total.is_empty() && parse_number(total).is_none());
        if event.is_empty() || bad {
            skipped.push((r.line, r.cells.join(" | ")));
            continue;
        }
        out.push(HistogramLine {
            table: title.clone(),
            event: event.to_string(),
            total_waits: parse_number(total),
            buckets: labels.iter().cloned().zip(values).collect(),
        });
    }
    w.rows(&title, &skipped);
    if out.len() == before && !t.no_data() {
        w.empty(&title, t.line);
    }
}

pub(super) fn read_io_profile(t: &Table, out: &mut Vec<IoProfileLine>, w: &mut Warnings) {
    let section = "IO Profile";
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let name = label(cell(r, 0));
        let v: Vec<Option<f64>> = (1..=3).map(|i| parse_number(cell(r, i))).collect();
        let bad = (1..=3).any(|i| !cell(r, i).is_empty() && v[i - 1].is_none());
        if name.is_empty() || bad {
            skipped.push((r.line, r.cells.join(" | ")));
            continue;
        }
        // A PDB report prints the Redo rows with blank cells: kept, all `None`.
        out.push(IoProfileLine {
            label: name,
            read_write_per_s: v[0],
            read_per_s: v[1],
            write_per_s: v[2],
        });
    }
    w.rows(section, &skipped);
    if out.len() == before {
        w.empty(section, t.line);
    }
}

pub(super) fn read_activity(t: &Table, out: &mut Vec<Statistic>, w: &mut Warnings) {
    let section = t.name("Instance Activity Stats");
    let mut read = 0;
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let name = cell(r, 0).trim();
        let v: Vec<Option<f64>> = (1..=3).map(|i| parse_number(cell(r, i))).collect();
        let is_blank =
            |s: &str| s.is_empty() || s.eq_ignore_ascii_case("n/a") || s.chars().all(|c| c == '#');
        let bad = (1..=3).any(|i| !is_blank(cell(r, i)) && v[i - 1].is_none());
        if name.is_empty() || bad || v.iter().all(Option::is_none) {
            skipped.push((r.line, r.cells.join(" | ")));
            continue;
        }
        read += 1;
        let s = Statistic {
            name: name.to_string(),
            total: v[0],
            per_second: v[1],
            per_trans: v[2],
        };
        // "Key Instance Activity Stats" repeats rows of the full table.
        if !out.contains(&s) {
            out.push(s);
        }
    }
    w.rows(&section, &skipped);
    if read == 0 {
        w.empty(&section, t.line);
    }
}

/// A MiB figure of IOStat: `M`/`G`/`T`/`P` in powers of 1024 of MiB, `K` a
/// KiB fraction; a bare number is MiB (11.2's `Data per sec`).
fn mib(cell: &str) -> Option<f64> {
    let t = cell.trim();
    let (body, scale) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1.0 / 1024.0),
        'M' | 'm' => (&t[..t.len() - 1], 1.0),
        'G' | 'g' => (&t[..t.len() - 1], 1024.0),
        'T' | 't' => (&t[..t.len() - 1], 1024.0 * 1024.0),
        'P' | 'p' => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    // The body must be a plain number (no second suffix).
    let v = parse_number(body)?;
    body.trim()
        .ends_with(|c: char| c.is_ascii_digit() || c == '.')
        .then_some(v * scale)
}

/// An IOStat by Function row from its nine cells: function, read data (MiB),
/// read requests/s, read MiB/s, write data (MiB), write requests/s, write
/// MiB/s, waits count, average wait (µs). Shared with the Statspack reader.
pub(super) fn iostat_line(cells: &[&str]) -> Option<IoFunctionLine> {
    let function = cells.first()?.trim();
    if function.is_empty() || cells.len() < 9 {
        return None;
    }
    let ok = |s: &str, v: Option<f64>| {
        v.is_some() || s.trim().is_empty() || s.trim().eq_ignore_ascii_case("n/a")
    };
    let m = |i: usize| mib(cells[i]);
    let n = |i: usize| parse_number(cells[i]);
    let avg = parse_latency_us(cells[8], 1000.0);
    let line = IoFunctionLine {
        function: function.to_string(),
        reads_data: m(1),
        reqs_per_sec_read: n(2),
        data_per_sec_read: m(3),
        writes_data: m(4),
        reqs_per_sec_write: n(5),
        data_per_sec_write: m(6),
        waits_count: n(7),
        avg_time: avg,
    };
    let all_ok = ok(cells[1], line.reads_data)
        && ok(cells[2], line.reqs_per_sec_read)
        && ok(cells[3], line.data_per_sec_read)
        && ok(cells[4], line.writes_data)
        && ok(cells[5], line.reqs_per_sec_write)
        && ok(cells[6], line.data_per_sec_write)
        && ok(cells[7], line.waits_count)
        && ok(cells[8], line.avg_time);
    all_ok.then_some(line)
}

pub(super) fn read_iostat(t: &Table, out: &mut Vec<IoFunctionLine>, w: &mut Warnings) {
    let section = "IOStat by Function summary";
    let before = out.len();
    let mut skipped = Vec::new();
    for r in t.data_rows() {
        let cells: Vec<&str> = r.cells.iter().map(String::as_str).collect();
        match iostat_line(&cells) {
            Some(l) => out.push(l),
            None => skipped.push((r.line, r.cells.join(" | "))),
        }
    }
    w.rows(section, &skipped);
    if out.len() == before {
        w.empty(section, t.line);
    }
}

/// The init.ora parameters the derivation needs, as printed.
pub(crate) const PARAMETERS_KEPT: [&str; 2] = ["db_block_size", "db_file_multiblock_read_count"];

pub(super) fn read_init_ora(t: &Table, out: &mut Vec<(String, String)>, w: &mut Warnings) {
    let mut rows = 0;
    for r in t.data_rows() {
        rows += 1;
        let name = cell(r, 0).trim().to_ascii_lowercase();
        let value = cell(r, 1).trim();
        if PARAMETERS_KEPT.contains(&name.as_str())
            && !value.is_empty()
            && !out.iter().any(|(k, _)| *k == name)
        {
            out.push((name, value.to_string()));
        }
    }
    if rows == 0 {
        w.empty(&t.name("init.ora Parameters"), t.line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iostat_data_cells_are_mib() {
        assert_eq!(mib("2.8G"), Some(2.8 * 1024.0));
        assert_eq!(mib(".801M"), Some(0.801));
        assert_eq!(mib("1.02309"), Some(1.02309));
        assert_eq!(mib("12KM"), None);
        assert_eq!(mib(""), None);
    }

    #[test]
    fn event_headings_of_both_generations_map_to_the_same_figures() {
        let h11: Vec<String> = [
            "Event",
            "Waits",
            "Total Wait Time (sec)",
            "Wait Avg(ms)",
            "% DB time",
            "Wait Class",
        ]
        .map(String::from)
        .to_vec();
        let h12: Vec<String> = [
            "Event",
            "Waits",
            "%Time -outs",
            "Total Wait Time (s)",
            "Avg wait",
            "Waits /txn",
            "% DB time",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            EventColumns::from_headings(&h11),
            EventColumns::top_default()
        );
        let c = EventColumns::from_headings(&h12);
        assert_eq!(
            (c.waits, c.time_s, c.avg, c.pct_db_time, c.class),
            (Some(1), Some(3), Some(4), Some(6), None)
        );
    }
}
