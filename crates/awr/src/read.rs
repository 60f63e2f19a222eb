//! Read a report file of any supported kind: `cairn awr parse`.
//!
//! The kind is told from the report's own markers, not the file name: AWR
//! HTML by its markup and AWR's title or tables; Statspack by its `STATSPACK
//! report for` banner; AWR text by its own structure — its `WORKLOAD
//! REPOSITORY` banner, a header table over its rule, a section title over its
//! table (see `text::locate`). Both are found wherever they are in the text,
//! so a report pasted into a mail or a blog post, or an excerpt cut from one
//! at its Load Profile or its host table, is read, and only the report is
//! read, not the text around it. Anything else is refused, saying what was
//! expected: a README that names Statspack and quotes a Load Profile is not a
//! report.

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
    /// None of the report's own markers: not a report of any kind read here.
    #[error("{path} {why}")]
    NotAReport { path: String, why: NotAReport },
}

/// Why a text is not a report of any kind read here, and what was expected.
pub const NOT_A_REPORT: &str = "is not an AWR or Statspack report: no 'WORKLOAD REPOSITORY report for' or 'STATSPACK report for' header found, nor any AWR section over its table (a title underlined with ~~~~ such as Load Profile, a title tagged DB/Inst:, the DB Name or Host Name table); give the text or HTML output of awrrpt.sql, or the output of spreport.sql";

/// The biggest report read (AWR reports of a busy RAC run to tens of MB).
pub const REPORT_BYTES_MAX: u64 = 512 << 20;

/// The kind of report `text` is, by its own markers; `None` when it has none.
/// HTML is only told by its markup here: whether it is AWR's is for the HTML
/// reader to say (its title and tables), see [`parse_str`].
pub fn detect(text: &str) -> Option<Format> {
    find(text).map(|(format, _)| format)
}

/// The kind of report in `text` and the line (1-based) where it starts: the
/// first of an AWR text report's structure and a Statspack banner when the
/// text holds both (a Statspack report has AWR's section titles too, under
/// its banner).
fn find(text: &str) -> Option<(Format, usize)> {
    let head: String = text
        .chars()
        .take(64 * 1024)
        .collect::<String>()
        .to_ascii_lowercase();
    if head.contains("<html") || head.contains("<table") || head.contains("<!doctype html") {
        return Some((Format::AwrHtml, 1));
    }
    let statspack = super::statspack::banner_line(text);
    let awr = super::text::report_start(text);
    match (statspack, awr) {
        (Some(s), Some(a)) if a < s => Some((Format::AwrText, a)),
        (Some(s), _) => Some((Format::StatspackText, s)),
        (None, Some(a)) => Some((Format::AwrText, a)),
        (None, None) => None,
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

/// Lines around a report's start searched for another report's banner.
const BANNER_LINES: usize = 60;

/// The warning for one of Oracle's other reports, if the report of `format`
/// found at line `start` of `text` is one: in HTML its title or heading
/// anywhere in the first lines; in text a line starting with its banner,
/// near where the report starts (an ASH report's banner comes just above
/// the header table it shares with AWR).
fn other_report(text: &str, format: Format, start: usize) -> Option<ParseWarning> {
    let from = start.saturating_sub(BANNER_LINES + 1);
    text.lines()
        .enumerate()
        .skip(from)
        .take(2 * BANNER_LINES)
        .find_map(|(i, line)| {
            let lower = line.trim_start().to_ascii_lowercase();
            OTHER_REPORTS
                .iter()
                .find(|(banner, _)| match format {
                    Format::AwrHtml => lower.contains(banner),
                    _ => lower.starts_with(banner),
                })
                .map(|(_, what)| ParseWarning {
                    section: "report".into(),
                    line: i + 1,
                    message: format!("this is {what}"),
                })
        })
}

/// Why a text is no report read here, saying what was expected; it follows
/// the file's name ("notes.txt is not an AWR or Statspack report: …").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAReport {
    /// None of the markers of any kind of report.
    #[error("{NOT_A_REPORT}")]
    Unmarked,
    /// HTML, but not AWR's.
    #[error("is {0}")]
    Html(super::html::NotAwrHtml),
}

/// Parse `text` (read from `source`) as the kind it is, or say why it is no
/// report read here.
pub fn parse_str(text: &str, source: &str) -> Result<AwrReport, NotAReport> {
    let found = find(text);
    // Oracle's other reports share none of AWR's marks (ASH, ADDM) or only
    // some: their banners are looked for near the top when nothing is found.
    let (format, start) = found.unwrap_or((Format::AwrText, 1));
    if let Some(w) = other_report(text, format, start) {
        let mut r = AwrReport::empty(source, format);
        r.warnings.push(w);
        return Ok(r);
    }
    if found.is_none() {
        return Err(NotAReport::Unmarked);
    }
    match format {
        Format::AwrHtml => {
            super::html::parse_awr_html_checked(text, source).map_err(NotAReport::Html)
        }
        Format::StatspackText => Ok(super::statspack::parse_statspack_text(text, source)),
        Format::AwrText => Ok(super::text::parse_awr_text(text, source)),
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
    let report = parse_str(&text, &shown).map_err(|why| AwrError::NotAReport {
        path: shown.clone(),
        why,
    })?;
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
        let r = parse_str(compare, "dd.txt").expect("a banner is a marker");
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
            let r = parse_str(text, "x.txt").expect("a banner is a marker");
            assert!(
                r.warnings[0].message.contains(script),
                "{text}: {:?}",
                r.warnings
            );
        }
        // An AWR report is not one of them.
        let awr = "WORKLOAD REPOSITORY report for\n\nLoad Profile\n";
        assert!(other_report(awr, Format::AwrText, 1).is_none());
    }

    #[test]
    fn a_report_is_told_by_its_own_markers_and_nothing_else_is_one() {
        let sp = "\n  STATSPACK report for\n\nDatabase    DB Id\n";
        assert_eq!(detect(sp), Some(Format::StatspackText));
        let mail = format!(
            "From: dba\nSubject: AWR\n\nHi,\n\n{}WORKLOAD REPOSITORY report for\n",
            "\n".repeat(40)
        );
        assert_eq!(detect(&mail), Some(Format::AwrText));
        assert_eq!(
            detect("WORKLOAD REPOSITORY PDB report (root snapshots)\n"),
            Some(Format::AwrText)
        );
        // A Statspack report below an AWR excerpt is the second report: the
        // first one found is read.
        let sp_late = format!(
            "{}\n{sp}",
            "Load Profile   Per Second\n~~~~~~~~~~~~  -------\n  Redo size:  1.0\n"
        );
        assert_eq!(detect(&sp_late), Some(Format::AwrText));
        // A fragment is one of AWR's sections over its table, wherever it is.
        let fragment = "\nStatistic                                     Total     per Second     per Trans\n\
                        -------------------------------- ------------------ -------------- -------------\n\
                        redo writes                                 341,363           47.4           7.3\n";
        assert_eq!(detect(fragment), Some(Format::AwrText));
        let profile = "Load Profile              Per Second    Per Transaction\n~~~~~~~~~~~~  ---------------   ---------------\n";
        assert_eq!(detect(profile), Some(Format::AwrText));
        assert_eq!(
            find(&format!("Here it is:\n\n{profile}")),
            Some((Format::AwrText, 3))
        );
        // Cairn's own awr.txt.
        let cairn = "Cairn OLTP Report (AWR style)\n=============================\n";
        assert_eq!(detect(cairn), Some(Format::AwrText));
        // Prose that names reports, or quotes a title without its table or a
        // table without its rule, is none.
        for text in [
            "",
            "# Notes\n\nAWR and Statspack reports are read.\nA STATSPACK report for a week...\n",
            "# Cairn\n\n```\nLoad Profile\n                 Per Second\n```\n",
            "See the section below.\n\nStatistic    Total     per Second     per Trans\n",
            "the text says WORKLOAD REPOSITORY report for a day\n",
        ] {
            assert_eq!(detect(text), None, "{text:?}");
            let e = parse_str(text, "notes.txt")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.starts_with("is not an AWR or Statspack report"), "{e}");
        }
        let page = "<html><title>Sales</title><table><tr><td>1</td></tr></table></html>";
        let e = parse_str(page, "p.html")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with("is not an AWR HTML report"), "{e}");
    }
}
