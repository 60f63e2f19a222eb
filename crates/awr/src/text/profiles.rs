//! Load Profile and IO Profile.

use crate::model::{AwrReport, IoProfileLine, ProfileLine};
use crate::number::{collapse, parse_number};
use crate::profile::read_load_profile;

use super::lines::{
    cut_cells, rule_ranges, sections_titled, shorten, starts_with_ci, warn, Line, Section,
};

pub(super) fn read_profile(lines: &[Line], report: &mut AwrReport) {
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

pub(super) fn read_io_profile(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
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
