//! Read a report file of any supported kind: `cairn awr parse`.
//!
//! The kind is told from the text, not the file name: HTML by its markup,
//! Statspack by its banner, otherwise AWR text (which also covers a report
//! pasted into a mail or a blog, whatever it lost on the way).

use std::path::Path;

use super::model::{AwrReport, Format, ParseWarning};

/// Why a report could not be used at all.
#[derive(Debug, thiserror::Error)]
pub enum AwrError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Nothing usable was extracted; the message names what was found and what is missing.
    #[error("{path}: {message}")]
    Unusable { path: String, message: String },
}

/// The biggest report read (AWR reports of a busy RAC run to tens of MB).
pub const REPORT_BYTES_MAX: u64 = 512 << 20;

/// The kind of report `text` is.
pub fn detect(text: &str) -> Format {
    let head: String = text
        .chars()
        .take(64 * 1024)
        .collect::<String>()
        .to_ascii_lowercase();
    if head.contains("<html") || head.contains("<table") || head.contains("<!doctype html") {
        Format::AwrHtml
    } else if head.contains("statspack report for") || head.contains("statspack report") {
        Format::StatspackText
    } else {
        Format::AwrText
    }
}

/// Oracle's other reports, told by their banners: read as an AWR report they
/// would give wrong figures (a compare-period report's Load Profile has two
/// periods side by side), so they are named and refused.
const OTHER_REPORTS: &[(&str, &str)] = &[
    (
        "workload repository compare period report",
        "an AWR Compare Periods report (awrddrpt.sql): give the awrrpt.sql report of each period, and `cairn report compare` sets them side by side",
    ),
    (
        "workload repository report (rac)",
        "a RAC global AWR report (awrgrpt.sql): give one instance's awrrpt.sql report",
    ),
    (
        "workload repository sql report",
        "an AWR SQL report (awrsqrpt.sql), which holds one statement's figures: give the awrrpt.sql report",
    ),
    (
        "ash report for",
        "an ASH report (ashrpt.sql), which samples sessions rather than counting I/O: give the awrrpt.sql report of the same snapshots",
    ),
    (
        "addm report for task",
        "an ADDM report (addmrpt.sql), which holds findings rather than figures: give the awrrpt.sql report of the same snapshots",
    ),
];

/// Lines at the top of a report searched for another report's banner.
const BANNER_LINES: usize = 60;

/// The warning for one of Oracle's other reports, if `text` is one.
fn other_report(text: &str) -> Option<ParseWarning> {
    text.lines()
        .take(BANNER_LINES)
        .enumerate()
        .find_map(|(i, line)| {
            let lower = line.to_ascii_lowercase();
            OTHER_REPORTS
                .iter()
                .find(|(banner, _)| lower.contains(banner))
                .map(|(_, what)| ParseWarning {
                    section: "report".into(),
                    line: i + 1,
                    message: format!("this is {what}"),
                })
        })
}

/// Parse `text` (read from `source`) as the kind it is.
pub fn parse_str(text: &str, source: &str) -> AwrReport {
    if let Some(w) = other_report(text) {
        let mut r = AwrReport::empty(source, detect(text));
        r.warnings.push(w);
        return r;
    }
    match detect(text) {
        Format::AwrHtml => super::html::parse_awr_html(text, source),
        Format::StatspackText => super::statspack::parse_statspack_text(text, source),
        Format::AwrText => super::text::parse_awr_text(text, source),
    }
}

/// Read and parse the report at `path`. The report's warnings name every
/// section that could not be read; the error is for a report from which
/// nothing usable came out (no Load Profile, no statistics, no events).
pub fn parse_file(path: &Path) -> Result<AwrReport, AwrError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| AwrError::Read {
        path: shown.clone(),
        source,
    })?;
    if meta.len() > REPORT_BYTES_MAX {
        return Err(AwrError::Unusable {
            path: shown,
            message: format!(
                "{} bytes is more than any AWR report ({} MiB at most): is this the right file?",
                meta.len(),
                REPORT_BYTES_MAX >> 20
            ),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| AwrError::Read {
        path: shown.clone(),
        source,
    })?;
    // Reports saved on Windows or by a browser may not be UTF-8: read what is.
    let text = String::from_utf8_lossy(&bytes);
    let report = parse_str(&text, &shown);
    if usable(&report) {
        Ok(report)
    } else {
        let found: Vec<&str> = report
            .warnings
            .iter()
            .map(|w| w.message.as_str())
            .take(3)
            .collect();
        Err(AwrError::Unusable {
            path: shown,
            message: format!(
                "no Load Profile, Instance Activity Stats or wait events could be read ({})",
                if found.is_empty() {
                    "nothing recognisable in it".to_string()
                } else {
                    found.join("; ")
                }
            ),
        })
    }
}

/// Whether anything a derivation or a comparison could use came out.
pub fn usable(r: &AwrReport) -> bool {
    !r.load_profile.is_empty()
        || !r.instance_activity.is_empty()
        || !r.top_events.is_empty()
        || !r.foreground_events.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oracles_other_reports_are_named_and_nothing_is_read_from_them() {
        let compare = "\nWORKLOAD REPOSITORY COMPARE PERIOD REPORT\n\nLoad Profile\n";
        let r = parse_str(compare, "dd.txt");
        assert!(!usable(&r));
        assert_eq!(r.warnings.len(), 1);
        assert_eq!(r.warnings[0].line, 2);
        assert!(r.warnings[0].message.contains("awrddrpt.sql"));
        for (text, script) in [
            ("ASH Report For ORCL/orcl\n", "ashrpt.sql"),
            ("   ADDM Report for Task 'TASK_42'\n", "addmrpt.sql"),
            ("WORKLOAD REPOSITORY SQL Report\n", "awrsqrpt.sql"),
            ("WORKLOAD REPOSITORY REPORT (RAC)\n", "awrgrpt.sql"),
        ] {
            let r = parse_str(text, "x.txt");
            assert!(
                r.warnings[0].message.contains(script),
                "{text}: {:?}",
                r.warnings
            );
        }
        // An AWR report is not one of them.
        let awr = "WORKLOAD REPOSITORY report for\n\nLoad Profile\n";
        assert!(other_report(awr).is_none());
    }
}
