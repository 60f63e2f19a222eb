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

use crate::model::{AwrReport, Format, ParseWarning};
use crate::number::{parse_number, whole_u32};

mod events;
mod header;
mod histograms;
mod iostat;
mod lines;
mod locate;
mod parameters;
mod profiles;
mod statistics;

use events::{read_event_tables, read_top_events, read_wait_classes, TOP_TITLES};
use header::read_header;
use histograms::read_histograms;
use iostat::read_iostat;
use lines::{find_sections, normalize, sections_titled, starts_with_ci, warn, Line, Section};
use locate::{is_stat_header, locate, Located, AWR_BANNER};
use parameters::read_parameters;
use profiles::{read_io_profile, read_profile};
use statistics::{read_statistics, STAT_TITLES};

pub(crate) use locate::report_start;

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
