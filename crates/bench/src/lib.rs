//! Cairn's workload engine: the measuring instrument every later number depends on.
//!
//! - [`model`]: what runs — storage, workload and run definitions, resolved.
//! - [`vdbench`]: vdbench parameter files into a [`model::Plan`] (file:line:column errors).
//! - [`quick`]: the same from plain command-line flags.
//! - [`target`]: opening sds, creating missing files; the [`target::TargetOpener`] the
//!   caller gives decides what may be overwritten and opens the luns it maps.
//! - [`group_target`]: Cairn's opener: its overwrite rules, and a file in a Cairn disk
//!   group as an sd, through the group's data plane (the kit's one use of `cairn_store`).
//! - [`pattern`]: write data with a requested compression and dedupe ratio; validation stamps.
//! - [`engine`]: worker threads driving io_uring rings (or synchronous threads),
//!   closed loop and open loop without coordinated omission.
//! - [`histogram`]: HDR latency histograms, 1 µs to an hour at 0.1%.
//! - [`sysinfo`]: the environment, the tool's CPU, and `/proc/diskstats` in iostat -x terms.
//! - [`result`]: `result.json`, versioned.
//! - [`report`]: live interval lines, `summary.txt`, `report.html`, and run comparison,
//!   rendered without I/O; [`report_file`] reads results and writes the files.
//! - [`oltp`]: the database emulation (the SLOB method) and its AWR-style report.
//! - [`awr`]: AWR and Statspack reports read, their I/O mix derived and replayed.

pub mod awr;
pub mod engine;
pub mod group_target;
pub mod histogram;
pub mod model;
pub mod oltp;
pub mod pattern;
pub mod quick;
pub mod report;
pub mod report_file;
pub mod result;
pub mod sysinfo;
pub mod target;
pub mod vdbench;
