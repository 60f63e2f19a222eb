//! The report's header: the database, instance, host and snapshot tables,
//! the `Elapsed:` and `DB Time:` lines, and the block size of Cache Sizes.

use crate::model::{AwrReport, Header};
use crate::number::{collapse, parse_number, parse_size_bytes, whole_u32};

use super::lines::{cut_cells, rule_ranges, sections_titled, warn, Line, Section};
use super::locate::header_kind;

fn to_u64(v: f64) -> Option<u64> {
    ((0.0..1.8e19).contains(&v) && v.fract() == 0.0).then_some(v as u64)
}

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

pub(super) fn read_header(
    lines: &[Line],
    sections: &[Section],
    has_title: bool,
    report: &mut AwrReport,
) {
    // The header is what comes before the first summary section other than
    // Cache Sizes (which 11g prints right under it).
    let limit = sections
        .iter()
        .find(|s| !s.title.eq_ignore_ascii_case("Cache Sizes"))
        .map_or(lines.len(), |s| s.at);
    let h = &mut report.header;
    let db_line_at = read_header_lines(lines, limit, h);
    if h.container.as_deref() == Some("") {
        h.container = None;
        report.warnings.push(warn(
            "header",
            0,
            "a PDB report without a readable container table: the container name is unknown",
        ));
    }
    read_std_block_size(lines, sections, &mut report.header);
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

/// The header tables and the snapshot lines among the lines before `limit`,
/// into `h`; the line of the database table (`DB Name …`), if there is one.
fn read_header_lines(lines: &[Line], limit: usize, h: &mut Header) -> Option<usize> {
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
            set_header_field(h, &label, value);
        }
        read_snapshot_line(lines[i].text.trim_start(), h);
    }
    db_line_at
}

/// One cell of a header table, by its column name.
fn set_header_field(h: &mut Header, label: &str, value: String) {
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

/// `Begin Snap:`, `End Snap:`, `Elapsed:` and `DB Time:` lines (`t`
/// trimmed at its start), into `h`.
fn read_snapshot_line(t: &str, h: &mut Header) {
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

/// Cache Sizes' `Std Block Size:`, into `h`.
fn read_std_block_size(lines: &[Line], sections: &[Section], h: &mut Header) {
    for s in sections_titled(sections, &["Cache Sizes"]) {
        for l in &lines[s.body.clone()] {
            if let Some(pos) = l.text.find("Std Block Size:") {
                let v = l.text[pos + "Std Block Size:".len()..]
                    .split_whitespace()
                    .next()
                    .and_then(parse_size_bytes);
                h.block_size = v.and_then(whole_u32);
            }
        }
    }
}

fn yes_no(v: &str) -> Option<bool> {
    match v.to_ascii_uppercase().as_str() {
        "YES" => Some(true),
        "NO" => Some(false),
        _ => None,
    }
}
