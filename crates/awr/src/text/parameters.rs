//! init.ora Parameters: the ones the derivation and the replay can use.

use crate::model::AwrReport;

use super::lines::{
    cut_cells, is_note_or_empty_marker, rule_ranges, sections_titled, Line, Section,
};

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

pub(super) fn read_parameters(lines: &[Line], sections: &[Section], report: &mut AwrReport) {
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
