//! Cairn's workload engine: the measuring instrument every later number depends on.
//!
//! - [`model`]: what runs — storage, workload and run definitions, resolved.
//! - [`vdbench`]: vdbench parameter files into a [`model::Plan`] (file:line:column errors).
//! - [`quick`]: the same from plain command-line flags.
//! - [`target`]: opening sds, creating missing files; the [`target::TargetOpener`] the
//!   caller gives decides what may be overwritten and opens the luns it maps (Cairn's,
//!   over its overwrite rules and disk groups, is `cairn-kit-group`'s).
//! - [`pattern`]: write data with a requested compression and dedupe ratio; validation stamps.
//! - [`engine`]: worker threads driving io_uring rings (or synchronous threads),
//!   closed loop and open loop without coordinated omission.
//! - [`histogram`]: HDR latency histograms, 1 µs to an hour at 0.1%.
//! - [`result`]: `result.json`, versioned.
//!
//! What the machine is and did (environment, CPU, `/proc/diskstats`) is
//! `cairn-host`'s; the reports of a result are `cairn-kit-report`'s. The kit
//! does not name the store: what it needs of it comes through
//! [`target::TargetOpener`].

pub mod engine;
pub mod histogram;
pub mod model;
pub mod pattern;
pub mod quick;
pub mod result;
pub mod target;
pub mod vdbench;
