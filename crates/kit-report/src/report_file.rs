//! The I/O shell of the reports: reading `result.json` files and writing a
//! run's report files. Everything it reads or writes is decoded or rendered by
//! the pure functions of this crate (or of the product whose files
//! they are: the OLTP emulation writes its own through [`write_files`]); this
//! module only moves bytes.
//!
//! A run's files are replaced atomically: each is written under a temporary
//! name in the same directory, synced, then renamed over the final name, and
//! the directory is synced last, so a reader sees either the old file or the
//! new one whole, never a prefix, and a crash mid-write never leaves a torn
//! report next to a good one.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;

use cairn_kit::result::BenchResult;

pub use crate::result_json::ReadError;
use crate::result_json::{looks_like_json, report_files, result_from_json, ResultError};

/// Bytes read from the start of a file to tell JSON from a report.
const JSON_SNIFF_BYTES: usize = 256;

/// Read a `result.json`, refusing anything that is not a Cairn bench result
/// of a schema version this build understands ([`result_from_json`]).
/// Errors are one line, naming the file and what to do.
pub fn load_result(path: &Path) -> Result<BenchResult, ResultError> {
    result_from_json(&read_text(path)?, &path.display().to_string())
}

/// Write a workload run's `result.json` (pretty), `summary.txt` and
/// `report.html` into `dir` (created if missing), each atomically.
pub fn write_reports(dir: &Path, result: &BenchResult) -> io::Result<()> {
    let files = report_files(result).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    write_files(dir, &files)
}

/// The text of the file at `path`; the error is one line naming it.
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    fs::read_to_string(path).map_err(|error| ReadError {
        path: path.to_path_buf(),
        error,
    })
}

/// Whether `path` holds JSON (a result rather than, say, an AWR report), by
/// its first non-blank byte; a file that cannot be read holds none.
pub fn holds_json(path: &Path) -> bool {
    let mut head = [0u8; JSON_SNIFF_BYTES];
    let n = File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    looks_like_json(&head[..n])
}

/// Write each `(name, contents)` into `dir` (created if missing) atomically,
/// then sync the directory.
pub fn write_files(dir: &Path, files: &[(&str, String)]) -> io::Result<()> {
    fs::create_dir_all(dir).map_err(|e| with_path(e, dir))?;
    for (name, contents) in files {
        write_atomically(dir, name, contents.as_bytes())?;
    }
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| with_path(e, dir))
}

/// Replace `dir/name` with `bytes`: temp file, fsync, rename.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
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
