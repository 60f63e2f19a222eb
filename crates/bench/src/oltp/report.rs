//! The AWR-style report, the HTML page and comparisons of OLTP runs. (Stub: owned by the report helper.)

use std::path::Path;

use super::dataset::{LoadReport, VerifyReport};
use super::result::OltpResult;
use crate::report::compare::Comparison;

/// awr.txt.
pub fn awr_text(_r: &OltpResult) -> String {
    unimplemented!("report helper")
}

/// The one-line summary in the spirit of SLOB's awr_info.
pub fn awr_info_line(_r: &OltpResult) -> String {
    unimplemented!("report helper")
}

/// report.html.
pub fn oltp_html(_r: &OltpResult) -> String {
    unimplemented!("report helper")
}

/// The metric table of two OLTP runs (like the ASMLib-versus-ASMFD one).
pub fn compare_oltp(_a: &OltpResult, _b: &OltpResult) -> Comparison {
    unimplemented!("report helper")
}

/// Write awr.txt, result.json and report.html into `dir`, each atomically.
pub fn write_oltp_reports(_dir: &Path, _r: &OltpResult) -> std::io::Result<()> {
    unimplemented!("report helper")
}

/// Setup's throughput report.
pub fn load_text(_r: &LoadReport) -> String {
    unimplemented!("report helper")
}

/// Verify's report.
pub fn verify_text(_r: &VerifyReport) -> String {
    unimplemented!("report helper")
}
