//! Reports: what a person reads of a bench, all rendered from a [`BenchResult`].
//!
//! - [`live`]: one fixed-width line per interval while a run goes, as vdbench prints them.
//! - [`summary`]: `summary.txt`, per run totals, percentiles and AWR-style wait histograms.
//! - [`html`]: `report.html`, one self-contained file with inline SVG charts.
//! - [`compare`]: two results side by side with deltas and % change.
//! - [`chart`]: the SVG charts and their colours (public so that a rendering test can
//!   look for each series' colour in a screenshot).
//!
//! Every renderer is a pure function of the result: a report can be rebuilt at any
//! time from `result.json` alone ([`result_from_json`]), so nothing a report shows may
//! come from anywhere else. Nothing here does I/O: [`report_files`] renders the files
//! of a run's directory, and [`crate::report_file`] (the I/O shell) reads results and
//! writes the files. The text and HTML reports share one document model (`document`),
//! so the two can never disagree on a number.

pub mod chart;
pub mod compare;
pub(crate) mod document;
pub mod html;
pub mod live;
pub mod summary;
pub(crate) mod units;

use crate::oltp::result::{OltpResult, OLTP_SCHEMA, OLTP_SCHEMA_VERSION};
use crate::result::{BenchResult, SCHEMA, SCHEMA_VERSION};

pub use compare::{compare_html, compare_results, compare_text, Comparison};
pub use html::report_html;
pub use summary::summary_text;

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

fn result_from_value(value: serde_json::Value, shown: &str) -> Result<BenchResult, String> {
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

/// A `result.json` of either kind: a workload bench (`cairn bench run|quick`)
/// or an OLTP run (`cairn bench oltp run`).
///
/// A result is loaded once per command and matched at once, so the size of
/// the enum (a bench result inline) costs nothing that matters.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum AnyResult {
    Bench(BenchResult),
    Oltp(Box<OltpResult>),
}

/// Decode the text of a `result.json` of either kind, telling them apart by
/// its `schema` field, so that a command given a result (`cairn report
/// compare`) need not be told which kind it is. `shown` names the file in
/// messages. Errors are one line, naming the file, what was found and what to
/// do.
pub fn any_from_json(text: &str, shown: &str) -> Result<AnyResult, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "{shown} is not a Cairn result (not JSON: {e}); give the result.json a bench run wrote"
        )
    })?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => result_from_value(value, shown).map(AnyResult::Bench),
        Some(OLTP_SCHEMA) => oltp_from_value(value, shown).map(|r| AnyResult::Oltp(Box::new(r))),
        _ => {
            let found = match value.get("schema") {
                Some(s) => s.to_string(),
                None => "missing".to_string(),
            };
            Err(format!(
                "{shown} is not a Cairn result (schema {found}, expected \"{SCHEMA}\" or \"{OLTP_SCHEMA}\"); give the result.json a bench run wrote"
            ))
        }
    }
}

/// Decode the text of an OLTP run's `result.json`, refusing anything else (a
/// workload result, a newer schema version) with one clear line.
pub fn oltp_from_json(text: &str, shown: &str) -> Result<OltpResult, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        format!("{shown} is not a Cairn OLTP result (not JSON: {e}); give the result.json `cairn bench oltp run` wrote")
    })?;
    oltp_from_value(value, shown)
}

fn oltp_from_value(value: serde_json::Value, shown: &str) -> Result<OltpResult, String> {
    if value.get("schema").and_then(|s| s.as_str()) != Some(OLTP_SCHEMA) {
        let found = match value.get("schema") {
            Some(s) => s.to_string(),
            None => "missing".to_string(),
        };
        return Err(format!(
            "{shown} is not a Cairn OLTP result (schema {found}, expected \"{OLTP_SCHEMA}\"); give the result.json `cairn bench oltp run` wrote"
        ));
    }
    match value.get("schema_version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(OLTP_SCHEMA_VERSION) => {}
        Some(v) if v > u64::from(OLTP_SCHEMA_VERSION) => {
            return Err(format!(
                "{shown} was written by a newer Cairn ({OLTP_SCHEMA} schema_version {v}); this Cairn reads {OLTP_SCHEMA_VERSION}: upgrade Cairn to read it"
            ));
        }
        Some(v) => {
            return Err(format!(
                "{shown} has {OLTP_SCHEMA} schema_version {v}, which no Cairn writes; this Cairn reads {OLTP_SCHEMA_VERSION}"
            ));
        }
        None => {
            return Err(format!(
                "{shown} is not a Cairn OLTP result (schema_version missing or not a number)"
            ));
        }
    }
    serde_json::from_value(value).map_err(|e| {
        format!(
            "{shown} is a damaged Cairn OLTP result ({e}); rerun the OLTP run or restore the file"
        )
    })
}

/// Compare two results of the same kind: two workload results
/// ([`compare_results`]) or two OLTP runs
/// ([`crate::oltp::report::compare_oltp`]). Results of different kinds measure
/// different things and are refused rather than half-compared; `shown` names
/// the two in that message.
pub fn compare_any(
    a: &AnyResult,
    b: &AnyResult,
    shown: (&str, &str),
) -> Result<Comparison, String> {
    match (a, b) {
        (AnyResult::Bench(ra), AnyResult::Bench(rb)) => Ok(compare_results(ra, rb)),
        (AnyResult::Oltp(ra), AnyResult::Oltp(rb)) => Ok(crate::oltp::report::compare_oltp(ra, rb)),
        (ra, _) => {
            let (oltp, bench) = if matches!(ra, AnyResult::Oltp(_)) {
                shown
            } else {
                (shown.1, shown.0)
            };
            Err(format!(
                "cannot compare an OLTP run with a workload run: {oltp} is an OLTP result and {bench} a workload result; give two results of the same kind"
            ))
        }
    }
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
