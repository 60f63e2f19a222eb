//! The I/O shell of the OLTP reports: an OLTP run's `result.json` read back,
//! and its files written atomically by the workload reports' writer
//! ([`cairn_kit_report::report_file::write_files`]). What is read or written is decoded
//! or rendered by the pure functions of [`super::result`] and
//! [`super::report`]; this module only moves bytes.

use std::io;
use std::path::Path;

use super::report::oltp_report_files;
use super::result::{oltp_from_json, OltpResult, OltpResultError};
use cairn_kit_report::report_file::{read_text, write_files};

/// Read the `result.json` of an OLTP run ([`oltp_from_json`]). Errors are one
/// line, naming the file and what to do.
pub fn load_oltp(path: &Path) -> Result<OltpResult, OltpResultError> {
    oltp_from_json(&read_text(path)?, &path.display().to_string())
}

/// Write an OLTP run's `result.json` (pretty), `awr.txt` and `report.html`
/// into `dir` (created if missing), each atomically, as the workload reports
/// are written.
pub fn write_oltp_reports(dir: &Path, r: &OltpResult) -> io::Result<()> {
    let files = oltp_report_files(r).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    write_files(dir, &files)
}
