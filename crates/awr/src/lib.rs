//! AWR and Statspack reports: reading the figures a DBA already has.
//!
//! Read a report (`text`, `html`, `statspack`, through `read`) into one
//! [`model::AwrReport`]; derive the I/O classes the database drove
//! (`derive`); replay them on candidate storage and judge the run against the
//! report (`replay`, `distribution`); compare two reports (`compare`).
//! The replay is a run of the workload engine (`cairn-kit`), its verdict a
//! report of `cairn-kit-report`'s model. `docs/awr-formats.md` holds the facts
//! about the formats the readers are built against, `docs/awr-replay.md` the
//! method.

pub mod compare;
pub mod derive;
pub mod distribution;
pub mod html;
pub mod model;
pub mod number;
pub mod profile;
pub mod read;
pub mod replay;
pub mod stats;
pub mod statspack;
pub mod text;
