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
//! time from `result.json` alone ([`load_result`]), so nothing a report shows may
//! come from anywhere else. The only I/O here is [`write_reports`], which replaces
//! the three files atomically so that a crash mid-write never leaves a torn
//! report next to a good one. The text and HTML reports share one document model
//! (`document`), so the two can never disagree on a number.

pub mod chart;
pub mod compare;
pub(crate) mod document;
pub mod html;
pub mod live;
pub mod summary;
pub(crate) mod units;

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use crate::oltp::result::{OltpResult, OLTP_SCHEMA, OLTP_SCHEMA_VERSION};
use crate::result::{BenchResult, SCHEMA, SCHEMA_VERSION};

pub use compare::{compare_html, compare_results, compare_text, Comparison};
pub use html::report_html;
pub use summary::summary_text;

/// Read a `result.json`, refusing anything that is not a Cairn bench result of a
/// schema version this build understands.
///
/// The schema is checked before the whole document is decoded, so that a file
/// from a newer Cairn says so instead of failing on whichever field changed.
/// Errors are one line, naming the file and what to do.
pub fn load_result(path: &Path) -> Result<BenchResult, String> {
    let shown = path.display();
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!("{shown} is not a Cairn bench result (not JSON: {e}); give the result.json a bench run wrote")
    })?;
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

/// Read a `result.json` of either kind, telling them apart by its `schema`
/// field, so that a command given a result (`cairn report compare`) need not
/// be told which kind it is. Errors are one line, naming the file, what was
/// found and what to do.
pub fn load_any(path: &Path) -> Result<AnyResult, String> {
    let shown = path.display();
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{shown} is not a Cairn result (not JSON: {e}); give the result.json a bench run wrote"
        )
    })?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => load_result(path).map(AnyResult::Bench),
        Some(OLTP_SCHEMA) => oltp_from_value(path, value).map(|r| AnyResult::Oltp(Box::new(r))),
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

/// Read the `result.json` of an OLTP run, refusing anything else (a workload
/// result, a newer schema version) with one clear line.
pub fn load_oltp(path: &Path) -> Result<OltpResult, String> {
    let shown = path.display();
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!("{shown} is not a Cairn OLTP result (not JSON: {e}); give the result.json `cairn bench oltp run` wrote")
    })?;
    oltp_from_value(path, value)
}

fn oltp_from_value(path: &Path, value: serde_json::Value) -> Result<OltpResult, String> {
    let shown = path.display();
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

/// Compare two `result.json` files of the same kind: two workload results
/// ([`compare_results`]) or two OLTP runs
/// ([`crate::oltp::report::compare_oltp`]). Results of different kinds measure
/// different things and are refused rather than half-compared.
pub fn compare_files(a: &Path, b: &Path) -> Result<Comparison, String> {
    // Two AWR or Statspack reports (anything but a result.json) compare on
    // the figures the reports hold.
    if !is_json(a) && !is_json(b) {
        let ra = crate::awr::read::parse_file(a).map_err(|e| e.to_string())?;
        let rb = crate::awr::read::parse_file(b).map_err(|e| e.to_string())?;
        return Ok(crate::awr::compare::compare_awr(&ra, &rb));
    }
    match (load_any(a)?, load_any(b)?) {
        (AnyResult::Bench(ra), AnyResult::Bench(rb)) => Ok(compare_results(&ra, &rb)),
        (AnyResult::Oltp(ra), AnyResult::Oltp(rb)) => {
            Ok(crate::oltp::report::compare_oltp(&ra, &rb))
        }
        (ra, _) => {
            let (oltp, bench) = if matches!(ra, AnyResult::Oltp(_)) {
                (a, b)
            } else {
                (b, a)
            };
            Err(format!(
                "cannot compare an OLTP run with a workload run: {} is an OLTP result and {} a workload result; give two results of the same kind",
                oltp.display(),
                bench.display()
            ))
        }
    }
}

/// Whether `path` holds JSON (a result), by its first non-blank byte.
fn is_json(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    head[..n]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{')
}

/// Write `result.json` (pretty), `summary.txt` and `report.html` into `dir`
/// (created if missing).
///
/// Each file is written under a temporary name in the same directory, synced,
/// then renamed over the final name, and the directory is synced last: a reader
/// sees either the old file or the new one whole, never a prefix.
pub fn write_reports(dir: &Path, result: &BenchResult) -> io::Result<()> {
    fs::create_dir_all(dir).map_err(|e| with_path(e, dir))?;
    let json = serde_json::to_string_pretty(result).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot encode the result as JSON: {e}"),
        )
    })?;
    write_atomically(dir, "result.json", format!("{json}\n").as_bytes())?;
    write_atomically(dir, "summary.txt", summary_text(result).as_bytes())?;
    write_atomically(dir, "report.html", report_html(result).as_bytes())?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| with_path(e, dir))
}

/// Replace `dir/name` with `bytes`: temp file, fsync, rename.
pub(crate) fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let final_path = dir.join(name);
    let temp_path = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let written = (|| {
        let mut f = File::create(&temp_path)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp_path);
        return Err(with_path(e, &temp_path));
    }
    fs::rename(&temp_path, &final_path).map_err(|e| {
        let _ = fs::remove_file(&temp_path);
        with_path(e, &final_path)
    })
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}
