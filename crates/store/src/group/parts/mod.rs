//! The metadata plane's parts that own their state: each holds fields no
//! other code of the group touches, changes them only through its own
//! functions, and says in `check_invariants` what holds between any two
//! operations. [`Group::check_invariants`](super::Group::check_invariants)
//! (`invariants.rs`) runs every part's check and the checks that span
//! parts; the crash and interleaving simulators call it after every step.
//! A part names nothing of `group/mod.rs` (the group above it): the arrows
//! run down (`unpublished.rs` takes the data plane's chunk size,
//! `members.rs` a disk's allocation table).
//! `violations.rs` is what a check reports.
//!
//! - `damage.rs`: the damage a mount found (blocks lost, AUs claimed
//!   twice, disks smaller than recorded) and what became of it;
//! - `files.rs`: the file table (every file's entry and extent map);
//! - `journal_ring.rs`: where the journal ring stands (its generation, the
//!   next record's number and place, the checksum it chains to);
//! - `members.rs`: the member disks (which slot holds which disk, the
//!   numbers a new disk may take);
//! - `names.rs`: the name table (records and their index, ids held back);
//! - `settings.rs`: the templates and attributes, as their blocks hold
//!   them;
//! - `state_log.rs`: the disks' state log (the directory last recorded,
//!   the reasons said for changes, the counts);
//! - `txn.rs`: the running transaction (what it dirtied, the disks its
//!   barrier flushes, its number and the last one made durable);
//! - `unpublished.rs`: what the data plane has not been shown yet;
//! - `zeroings.rs`: the metadata plane's own zeroings of file data, which
//!   a copy begun before one does not trust.

pub(super) mod damage;
pub(super) mod files;
pub(super) mod journal_ring;
pub(super) mod members;
pub(super) mod names;
pub(super) mod settings;
pub(super) mod state_log;
pub(super) mod txn;
pub(super) mod unpublished;
pub(super) mod violations;
pub(super) mod zeroings;

pub use violations::Violations;
