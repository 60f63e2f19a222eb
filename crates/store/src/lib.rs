//! Cairn's storage manager.
//!
//! - Disk labels and their protection (what `asmcmd afd_label`, `afd_lsdsk`
//!   and `kfed` do): [`admin`], [`labeling`], [`header_copies`], [`repair`],
//!   [`protection`]; discovery by a discovery string ([`discovery`],
//!   [`catalog`]).
//! - Disk groups and their files ([`group`]): metadata, the journal, mount and
//!   recovery, check, the live core (a metadata plane and a data plane), the
//!   disk life cycle (offline, resync, add, drop, resize, relocation), scrub,
//!   discard and reclaim, and the heartbeat that keeps a second host out; the
//!   pure rules beside it, [`placement`], [`rebalance`] (what a change of
//!   members moves) and [`names`]; which host this is, for the heartbeat
//!   ([`host_identity`]).
//! - Groups on real devices ([`group_admin`], [`group_lock`]), the long
//!   operations' status files `group ops` reads ([`ops`]), and copies into,
//!   out of and between them ([`file_copy`], [`group_copy`]).
//!
//! Layering: the pure decisions — which header copy is good ([`header_copies`]),
//! what repair would do ([`repair::plan`]), what stands in a label's way
//! ([`protection`]), which paths are one disk ([`catalog::build`]), which disks
//! get each copy ([`placement`]), which copy of a unit its checksum vouches
//! for ([`checksums`]) — are functions of data. The I/O runs through
//! the `IoEngine` trait on the engine the caller chose, so the simulated disk
//! drives the same code in tests; only short reads of headers and superblocks
//! while scanning devices, and a copy out to a block device, use a
//! synchronous engine of their own. [`admin`] and [`group_admin`] string the
//! steps together for the CLI and the command executor (`cairn-command`).

pub mod admin;
pub mod catalog;
pub mod checksums;
pub mod discovery;
pub mod file_copy;
pub mod group;
pub mod group_admin;
pub mod group_copy;
pub mod group_lock;
pub mod header_copies;
pub mod host_identity;
pub mod labeling;
mod lock_order;
pub mod names;
pub mod ops;
pub mod placement;
pub mod protection;
pub mod rebalance;
pub mod repair;
