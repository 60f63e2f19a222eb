//! AWR and Statspack reports: reading the figures a DBA already has.
//!
//! Work in progress towards issue 6 (parse, derive the I/O mix, replay): this
//! module holds the parts that are done, and `docs/awr-formats.md` the facts
//! about the report formats the parser is built against.

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
