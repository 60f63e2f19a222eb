//! `result.json` as text: decoded, refusing anything that is not a Cairn
//! bench result of a schema version this build reads, and a run's files
//! rendered. No I/O: [`crate::report_file`] reads and writes the files.

use std::io;
use std::path::PathBuf;

use cairn_kit::result::{BenchResult, SCHEMA, SCHEMA_VERSION};

use crate::html::report_html;
use crate::summary::summary_text;

/// A file that could not be read, named.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {error}", path.display())]
pub struct ReadError {
    pub path: PathBuf,
    pub error: io::Error,
}

/// Why a `result.json` is not a workload result this build reads: one line,
/// naming the file (`shown`) and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{shown} is not a Cairn bench result (not JSON: {error}); give the result.json a bench run wrote")]
    NotJson {
        shown: String,
        error: serde_json::Error,
    },
    #[error("{shown} is not a Cairn bench result (schema {found}, expected \"{SCHEMA}\"); give the result.json a bench run wrote")]
    Schema { shown: String, found: String },
    #[error("{shown} was written by a newer Cairn (schema_version {version}); this Cairn reads {SCHEMA_VERSION}: upgrade Cairn to read it")]
    Newer { shown: String, version: u64 },
    #[error("{shown} has schema_version {version}, which no Cairn writes; this Cairn reads {SCHEMA_VERSION}")]
    NoSuchVersion { shown: String, version: u64 },
    #[error("{shown} is not a Cairn bench result (schema_version missing or not a number)")]
    NoVersion { shown: String },
    #[error(
        "{shown} is a damaged Cairn bench result ({error}); rerun the bench or restore the file"
    )]
    Damaged {
        shown: String,
        error: serde_json::Error,
    },
}

/// Decode the text of a `result.json`, refusing anything that is not a Cairn
/// bench result of a schema version this build understands. `shown` names the
/// file in messages.
///
/// The schema is checked before the whole document is decoded, so that a file
/// from a newer Cairn says so instead of failing on whichever field changed.
pub fn result_from_json(text: &str, shown: &str) -> Result<BenchResult, ResultError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|error| ResultError::NotJson {
            shown: shown.to_string(),
            error,
        })?;
    result_from_value(value, shown)
}

/// [`result_from_json`] of a document already parsed (a command that tells
/// result kinds apart by their `schema` reads the JSON once).
pub fn result_from_value(
    value: serde_json::Value,
    shown: &str,
) -> Result<BenchResult, ResultError> {
    let shown = shown.to_string();
    let schema = value.get("schema").and_then(|s| s.as_str());
    if schema != Some(SCHEMA) {
        let found = match value.get("schema") {
            Some(s) => s.to_string(),
            None => "missing".to_string(),
        };
        return Err(ResultError::Schema { shown, found });
    }
    let version = value.get("schema_version").and_then(|v| v.as_u64());
    match version {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(version) if version > u64::from(SCHEMA_VERSION) => {
            return Err(ResultError::Newer { shown, version });
        }
        Some(version) => return Err(ResultError::NoSuchVersion { shown, version }),
        None => return Err(ResultError::NoVersion { shown }),
    }
    serde_json::from_value(value).map_err(|error| ResultError::Damaged { shown, error })
}

/// Whether a file whose first bytes are `head` holds JSON (a result), by its
/// first non-blank byte.
pub fn looks_like_json(head: &[u8]) -> bool {
    head.iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{')
}

/// A result that could not be encoded as JSON (a bug: every field encodes).
#[derive(Debug, thiserror::Error)]
#[error("cannot encode the result as JSON: {0}")]
pub struct EncodeError(serde_json::Error);

/// The files of a workload run's directory, rendered: `result.json`
/// (pretty), `summary.txt` and `report.html`, by name.
pub fn report_files(result: &BenchResult) -> Result<Vec<(&'static str, String)>, EncodeError> {
    let json = serde_json::to_string_pretty(result).map_err(EncodeError)?;
    Ok(vec![
        ("result.json", format!("{json}\n")),
        ("summary.txt", summary_text(result)),
        ("report.html", report_html(result)),
    ])
}
