//! What a person reads of an OLTP run: `awr.txt` (an AWR-style report a DBA
//! reads without a legend), `report.html` (the same tables with charts over
//! time), `result.json`, the awr_info line, and comparisons of two runs; also
//! the reports of setup and verify.
//!
//! Every renderer is a pure function of the [`OltpResult`]: a report can be
//! rebuilt from `result.json` alone, long after the run. Nothing here does
//! I/O: [`super::report_file`] writes the files [`oltp_report_files`]
//! renders. The text and HTML share one document model
//! (`cairn_kit_report::document`) and one set of derived figures (the `figures`
//! module), so they can never disagree on a number.
//!
//! Definitions the report relies on (all over the measured window):
//! - per second = total / `elapsed_s`; per transaction = total / user commits,
//!   blank when nothing committed;
//! - DB Time(s) per second is the average number of active sessions;
//! - Write IO requests and Write IO (MB) count data-file writes and redo
//!   writes together, as AWR's physical write total IO requests do; redo bytes
//!   are whole redo blocks (padding included), as written to the device;
//! - MB = 2^20 bytes, KB = 1024 bytes;
//! - physical IOPS = data-file read requests + data-file write requests + redo
//!   write requests.

mod awr;
mod compare;
mod dataset;
mod figures;
mod html;

use super::dataset::{LoadReport, VerifyReport};
use super::result::OltpResult;
use cairn_kit_report::compare::Comparison;
use cairn_kit_report::document;

pub use awr::awr_latency;

/// `awr.txt`: header, Load Profile, Top Foreground Events, Background Wait
/// Events, Wait Classes, Wait Event Histograms (ms and µs) with percentiles,
/// IO Profile, Instance Activity Stats, devices and the cross-check against
/// the kernel's counts, errors, and last the [`awr_info_line`].
pub fn awr_text(r: &OltpResult) -> String {
    document::text(&awr::all_blocks(r))
}

/// The one-line summary in the spirit of SLOB's awr_info: the headline figures
/// of a run on one line, to grep out of many reports and line up.
///
/// Format: `awr_info` then space-separated `key=value` fields, always all of
/// them, in this order:
///
/// | key | meaning |
/// |---|---|
/// | `sessions` | session threads |
/// | `read_iops` | data-file read requests per second |
/// | `write_iops` | data-file write requests per second (redo not included) |
/// | `redo_iops` | redo write requests per second |
/// | `liops` | logical reads (buffer gets) per second |
/// | `read_mbps`, `write_mbps`, `redo_mbps` | the same in MB (2^20 bytes) per second |
/// | `seq_read_us`, `par_read_us`, `lfpw_us`, `lfs_us` | average wait in µs of db file sequential read, db file parallel read, log file parallel write, log file sync; `-` if never waited on |
/// | `iops_per_db_cpu_s` | physical I/O requests (reads, writes, redo) per second of session CPU |
/// | `iops_per_core` | the same per CPU-second of the whole process (per busy core) |
/// | `cores_busy` | the process's CPU (user + system) over the window |
/// | `errors` | I/O errors |
/// | `top_wait` | the top row of Top Foreground Events (may be `DB CPU`), double-quoted, always last |
///
/// Numbers have no thousands separators; `-` stands for a figure that does
/// not exist (no waits, an empty window). Only `top_wait` holds spaces, and
/// it is last and quoted, so `grep -o 'read_iops=[^ ]*'` works on every field.
pub fn awr_info_line(r: &OltpResult) -> String {
    awr::info_line(r)
}

/// `report.html`: one self-contained page (no script, no network).
pub fn oltp_html(r: &OltpResult) -> String {
    html::oltp_page(r)
}

/// The metric table of two OLTP runs (like the ASMLib-versus-ASMFD one):
/// "Load Profile (per second)" with the post's rows, then "Wait event
/// average" (average waits in µs, and physical IOPS per DB CPU second).
pub fn compare_oltp(a: &OltpResult, b: &OltpResult) -> Comparison {
    compare::compare(a, b)
}

/// An OLTP result that could not be encoded as JSON (a bug: every field encodes).
#[derive(Debug, thiserror::Error)]
#[error("cannot encode the OLTP result as JSON: {0}")]
pub struct EncodeError(serde_json::Error);

/// The files of an OLTP run's directory, rendered: `result.json` (pretty),
/// `awr.txt` and `report.html`, by name
/// ([`super::report_file::write_oltp_reports`] writes them).
pub fn oltp_report_files(r: &OltpResult) -> Result<Vec<(&'static str, String)>, EncodeError> {
    let json = serde_json::to_string_pretty(r).map_err(EncodeError)?;
    Ok(vec![
        ("result.json", format!("{json}\n")),
        ("awr.txt", awr_text(r)),
        ("report.html", oltp_html(r)),
    ])
}

/// Setup's throughput report: what was written, how fast, at what CPU cost, where.
pub fn load_text(r: &LoadReport) -> String {
    dataset::load(r)
}

/// Verify's report: the dataset's state (said plainly when the last run did not
/// shut down cleanly), blocks checked, table versions, and every problem found
/// (target, offset, schema, segment, block, problem) with the total.
pub fn verify_text(r: &VerifyReport) -> String {
    dataset::verify(r)
}
