//! The test kit's reports: what a person reads of a bench, all rendered from a
//! [`BenchResult`](cairn_kit::result::BenchResult), and the parts the kit's other products render theirs with.
//!
//! - [`live`]: one fixed-width line per interval while a run goes, as vdbench prints them.
//! - [`summary`]: `summary.txt`, per run totals, percentiles and AWR-style wait histograms.
//! - [`html`]: `report.html`, one self-contained file with inline SVG charts.
//! - [`compare`]: two results side by side with deltas and % change.
//! - [`chart`]: the SVG charts and their colours (public so that a rendering test can
//!   look for each series' colour in a screenshot).
//! - [`document`]: the document model (titles, tables, notes) the text and HTML
//!   share; [`units`]: how numbers are written in it.
//! - [`result_json`]: `result.json` decoded (refusing what is not a result
//!   this build reads) and a run's files rendered;
//!   [`report_file`]: the I/O shell, reading results and writing a run's
//!   files atomically.
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
pub mod result_json;
pub mod summary;
pub mod units;

pub use result_json::{
    looks_like_json, report_files, result_from_json, result_from_value, EncodeError, ReadError,
    ResultError,
};

pub use compare::{compare_html, compare_results, compare_text, Comparison};
pub use html::report_html;
pub use summary::summary_text;

/// The first line of the OLTP emulation's AWR-style `awr.txt`: the OLTP
/// report writes it, and the AWR reader (`cairn awr parse`) knows Cairn's own
/// report by it and reads it whole. Here because both render and read
/// through this module, and neither may depend on the other.
pub const OLTP_AWR_TITLE: &str = "Cairn OLTP Report (AWR style)";
