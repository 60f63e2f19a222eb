//! Cairn's storage manager.
//!
//! This release: disk labels and their protection (what `asmcmd afd_label`,
//! `afd_lsdsk` and `kfed` do), discovery by a discovery string, and header repair.
//! Disk groups, files, rebalance and reclaim build on this in later releases.
//!
//! Layering: the pure decisions — which header copy is good ([`header_copies`]),
//! what repair would do ([`repair::plan`]), what stands in a label's way
//! ([`protection`]), which paths are one disk ([`catalog::build`]) — are
//! functions of data. The I/O runs through the `IoEngine` trait the caller
//! chose, so the simulated disk drives the same code in tests. [`admin`] strings
//! the steps together for the CLI.

pub mod admin;
pub mod catalog;
pub mod discovery;
pub mod file_copy;
pub mod group;
pub mod group_admin;
pub mod group_lock;
pub mod header_copies;
pub mod labeling;
pub mod names;
pub mod placement;
pub mod protection;
pub mod repair;
