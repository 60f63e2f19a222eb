//! Cairn's on-disk formats: raw `#[repr(C)]` little-endian layouts, the validating
//! conversions to domain types, checksums and versions — and the recognisers for
//! other owners' signatures, which are decoders of someone else's format.
//!
//! This crate does no I/O. Every decoder takes bytes and returns a `Result`; none
//! panics on any input (property-tested and fuzzed). Values this crate computes
//! itself are asserted.

pub mod disk_header;
pub mod disk_label;
pub mod extent_map;
pub mod foreign;
pub mod group;
pub mod heartbeat;
pub mod layout;
pub mod meta;

pub use disk_header::{DecodedHeader, DiskHeader, FeatureSet, HeaderError};
pub use disk_label::{DiskLabel, LabelNameError};
pub use layout::{HeaderPlacement, DEVICE_SIZE_MIN_BYTES, HEADER_BLOCK_BYTES};
