//! IOStat by Function summary.

use crate::model::{AwrReport, IoFunctionLine};
use crate::number::{parse_latency_us, parse_number, parse_size_bytes};

use super::lines::{
    cut_cells, has_no_data, is_note_or_empty_marker, is_numeric_token, rule_ranges,
    sections_titled, shorten, warn, Line, Section,
};

/// IOStat `Data` cells in MiB: `2.8G` (×1024), `555M`, `.801M`, a bare
/// number (11.2 per-second column) already in MiB.
fn mib(c: &str) -> Option<f64> {
    if c.ends_with(|x: char| x.is_ascii_digit()) {
        parse_number(c)
    } else {
        parse_size_bytes(c).map(|b| b / 1_048_576.0)
    }
}

pub(super) fn read_iostat(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
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
