//! The test kit's reports: what a person reads of a bench, all rendered from a
//! [`BenchResult`], and the parts the kit's other products render theirs with.
//!
//! - [`live`]: one fixed-width line per interval while a run goes, as vdbench prints them.
//! - [`summary`]: `summary.txt`, per run totals, percentiles and AWR-style wait histograms.
//! - [`html`]: `report.html`, one self-contained file with inline SVG charts.
//! - [`compare`]: two results side by side with deltas and % change.
//! - [`chart`]: the SVG charts and their colours (public so that a rendering test can
//!   look for each series' colour in a screenshot).
//! - [`document`]: the document model (titles, tables, notes) the text and HTML
//!   share; [`units`]: how numbers are written in it.
//! - [`report_file`]: the I/O shell, reading results and writing a run's files
//!   atomically.
//!
//! Every renderer is a pure function of the result: a report can be rebuilt at any
//! time from `result.json` alone ([`result_from_json`]), so nothing a report shows may
//! come from anywhere else. Nothing here does I/O: [`report_files`] renders the files
//! of a run's directory, and [`crate::report_file`] (the I/O shell) reads results and
//! writes the files. The text and HTML reports share one document model ([`document`]),
//! so the two can never disagree on a number.
//!
//! Nothing here knows which product made a result: the OLTP emulation
//! (`cairn-oltp`) and AWR replay (`cairn-awr`) render their own reports through
//! [`document`], [`chart`] and [`compare`], and `cairn report compare` tells the
//! kinds of result apart.

pub mod chart;
pub mod compare;
pub mod document;
pub mod html;
pub mod live;
pub mod report_file;
pub mod summary;
pub mod units;

use cairn_kit::result::{BenchResult, SCHEMA, SCHEMA_VERSION};

pub use compare::{compare_html, compare_results, compare_text, Comparison};
pub use html::report_html;
pub use summary::summary_text;

/// The first line of the OLTP emulation's AWR-style `awr.txt`: the OLTP
/// report writes it, and the AWR reader (`cairn awr parse`) knows Cairn's own
/// report by it and reads it whole. Here because both render and read
/// through this module, and neither may depend on the other.
pub const OLTP_AWR_TITLE: &str = "Cairn OLTP Report (AWR style)";

/// Decode the text of a `result.json`, refusing anything that is not a Cairn
/// bench result of a schema version this build understands. `shown` names the
/// file in messages.
///
/// The schema is checked before the whole document is decoded, so that a file
/// from a newer Cairn says so instead of failing on whichever field changed.
/// Errors are one line, naming the file and what to do.
pub fn result_from_json(text: &str, shown: &str) -> Result<BenchResult, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        format!("{shown} is not a Cairn bench result (not JSON: {e}); give the result.json a bench run wrote")
    })?;
    result_from_value(value, shown)
}

/// [`result_from_json`] of a document already parsed (a command that tells
/// result kinds apart by their `schema` reads the JSON once).
pub fn result_from_value(value: serde_json::Value, shown: &str) -> Result<BenchResult, String> {
    let schema = value.get("schema").and_then(|s| s.as_str());
    if schema != Some(SCHEMA) {
        let found = match value.get("schema") {
            Some(s) => s.to_string(),
            None => "missing".to_string(),
        };
        return Err(format!(
            "{shown} is not a Cairn bench result (schema {found}, expected \"{SCHEMA}\"); give the result.json a bench run wrote"
        ));
    }
    let version = value.get("schema_version").and_then(|v| v.as_u64());
    match version {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(v) if v > u64::from(SCHEMA_VERSION) => {
            return Err(format!(
                "{shown} was written by a newer Cairn (schema_version {v}); this Cairn reads {SCHEMA_VERSION}: upgrade Cairn to read it"
            ));
        }
        Some(v) => {
            return Err(format!(
                "{shown} has schema_version {v}, which no Cairn writes; this Cairn reads {SCHEMA_VERSION}"
            ));
        }
        None => {
            return Err(format!(
                "{shown} is not a Cairn bench result (schema_version missing or not a number)"
            ));
        }
    }
    serde_json::from_value(value).map_err(|e| {
        format!(
            "{shown} is a damaged Cairn bench result ({e}); rerun the bench or restore the file"
        )
    })
}

/// Whether a file whose first bytes are `head` holds JSON (a result), by its
/// first non-blank byte.
pub fn looks_like_json(head: &[u8]) -> bool {
    head.iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{')
}

/// The files of a workload run's directory, rendered: `result.json`
/// (pretty), `summary.txt` and `report.html`, by name.
pub fn report_files(result: &BenchResult) -> Result<Vec<(&'static str, String)>, String> {
    let json = serde_json::to_string_pretty(result)
        .map_err(|e| format!("cannot encode the result as JSON: {e}"))?;
    Ok(vec![
        ("result.json", format!("{json}\n")),
        ("summary.txt", summary_text(result)),
        ("report.html", report_html(result)),
    ])
}
