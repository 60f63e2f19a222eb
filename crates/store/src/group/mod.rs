//! Disk groups: create, mount, the metadata transaction, and the state a mounted
//! group keeps in memory.
//!
//! What lives where (byte tables in `docs/on_disk_format.md`, reasons in
//! `docs/groups.md`):
//! - per disk, at fixed places: the disk header copies, two superblock slots
//!   (group identity, bootstrap extent of the file directory, and the whole disk
//!   directory), and the disk's allocation table (summary + bitmap);
//! - in metadata files, mirrored like user files at the group's redundancy and
//!   placed by the same [`crate::placement`] rules: the file directory (file 1,
//!   one entry block per file number, holding the extent map), the journal
//!   (file 3), the alias directory (4), templates (5) and attributes (6).
//!
//! The transaction: operations change the in-memory state and name the metadata
//! blocks they dirtied; [`Group::commit`] encodes those blocks, writes them as one
//! journal record to every journal copy, flushes, then writes them in place.
//! Replay at mount rewrites every whole record after the last checkpoint, so a
//! crash at any point leaves either all of a transaction or none of it. Long
//! operations (create, resize, delete of big files) commit in bounded steps and
//! record what they are heading for in the file's entry; mount finishes or undoes
//! them ([`Group::recover_operations`]).
//!
//! Fault assumptions: a write may be lost, torn at sector boundaries or
//! misdirected until a flush completes; a flush makes completed writes durable.
//! A failed commit leaves memory ahead of the disks, so the group refuses further
//! work until it is mounted again (it is "poisoned"); the disks themselves stay
//! consistent.
//!
//! Where each job lives (no file holds several; `mod.rs` only names them and
//! what the crate sees):
//! - `mounted.rs`: the state a mounted group keeps in memory (`struct
//!   Group`), its accessors, and how it stops; `limits.rs`: the bounds
//!   every part shares; `spec.rs`, `error.rs`, `mount_report.rs`,
//!   `listing.rs`, `file_types.rs`: the types a caller sees;
//! - `create.rs`, `mount.rs`: making a group, and bringing one up (bootstrap,
//!   replay, loading, damage found on the way); `returning.rs`: a disk back;
//! - `superblock.rs`: superblock slots, the disk directory, disk states;
//!   `slots.rs`: reading them off disks without a group (`identify`);
//! - `journal.rs`: the transaction (commit, checkpoint, replay, overlay);
//! - `places.rs`: where each metadata block's copies live and how a dirty
//!   block is encoded (`block_ids.rs`: the ids blocks are sealed with);
//!   `disk_io.rs`: metadata I/O across the disks;
//! - `alloc.rs` (one disk's table), `tables.rs` (tables at group level,
//!   allocating and freeing extents, AUs claimed twice);
//! - `namespace.rs` (names, directories, aliases), `files.rs` (create,
//!   resize, delete as continuing operations), `data/` (file bytes, one
//!   path for every caller), `plane.rs` (what the data plane sees);
//! - `live/`: a group shared by threads (`mod.rs`: the metadata lock and
//!   group commit; `handle.rs`: each thread's data handle; `disks.rs`:
//!   disks leaving, coming back and joining; `operations.rs`: resync,
//!   rebalance, reclaim and scrub beside the data handles; `engines.rs`:
//!   where its handles get engines); `discard.rs`, `discard_queue.rs`: discards off the
//!   commit path;
//! - `check.rs`: `cairn group check`.
//! - `parts/`: the parts that own their state behind their own functions
//!   (the member disks, the journal ring, the name table, the file table
//!   (every file's entry and extent map), the damage a mount found, the
//!   settings (templates and attributes), the metadata plane's zeroings,
//!   the running transaction, the disks' state log, what the data plane
//!   has not been shown yet); `invariants.rs`: [`Group::check_invariants`], what holds after every operation that
//!   succeeded, which the crash and interleaving simulators check after
//!   every step;
//! - `offline_online.rs`: disks taken offline and brought back;
//!   `resync.rs`: stale copies, and the resync that copies what a disk
//!   back missed;
//!   `add_drop.rs`: adding and dropping disks; `relocate.rs`: the
//!   rebalance that moves copies, and a drop's end (`move_plan.rs`: what
//!   it will move, `--explain`; `move_run.rs`: running the moves, the data
//!   copies; `move_metadata.rs`: moving metadata).
//!
//! Every file names what it uses (no glob import of its parent), so the
//! files form layers with no circle (`scripts/house` counts them): the
//! types and the parts below, `struct Group` above them, the operations
//! (`impl Group` blocks, one file per job) above that.
//!
//! Not here: the real-device plumbing (discovery, protection, locks) is in
//! [`crate::group_admin`].

mod add_drop;
mod alloc;
pub mod attributes;
mod block_ids;
pub mod check;
mod checksum_log;
mod create;
mod data;
mod devices;
mod discard;
mod discard_queue;
mod disk_io;
pub mod disk_states;
mod engines;
mod error;
mod file_io;
mod file_types;
mod files;
pub mod heartbeat;
mod invariants;
mod journal;
mod limits;
mod listing;
pub mod live;
mod maps;
mod mount;
mod mount_report;
mod mounted;
mod move_metadata;
mod move_plan;
mod move_run;
mod namespace;
mod offline_online;
mod own_io;
mod parts;
mod places;
pub mod plane;
mod posix;
mod publish;
pub mod reclaim;
pub mod relocate;
mod resize;
pub mod resync;
mod returning;
pub mod scrub;
mod slots;
mod spec;
mod sums;
mod sums_log;
mod superblock;
mod tables;
mod zeroing;

pub use alloc::DiskAlloc;

pub use cairn_format::group::AliasKind;
pub use create::{create, default_templates};
pub use data::Punched;
pub use discard_queue::{DiscardQueue, DISCARD_BATCH_RUNS_MAX, DISCARD_QUEUE_RUNS_MAX};
pub use disk_states::StateChangeCount;
pub use engines::{EngineSource, HandleEngine, SameDevices};
pub use error::GroupError;
pub use file_io::{FileIo, Mapping};
pub use file_types::{CreateOptions, DirEntry, FileInfo, Node};
pub use limits::{
    member_layout, AU_BYTES_DEFAULT, JOIN_DIRTY_MAX, JOURNAL_BYTES, MEMBER_DATA_AUS_MIN,
    STEP_DIRTY_MAX, TXN_IMAGES_MAX,
};
pub use listing::{DiskInfo, GroupSpace, RedundancyLowered};
pub use live::{DataHandle, LiveGroup};
pub use mount::{
    mount, mount_owned, mount_owned_read_only, mount_read_only, mount_with, GroupSelector,
    MissingDisks,
};
pub use mount_report::{MountNotice, MountReport};
pub use mounted::{EngineRef, Group};
pub use parts::txn::COMMIT_TIMES_MAX;
pub use parts::Violations;
pub use posix::{group_root_attrs, AttrChange, Retired};
pub use slots::{identify, membership, FoundDisk, GroupOnDisk, Membership};
pub use spec::{GroupSpec, NewDisk, Redundancy};

#[cfg(test)]
mod tests;
