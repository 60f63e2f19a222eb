//! The data path, one for every caller: the group's own single-threaded
//! calls ([`Group::read`](super::Group::read), [`Group::write`](super::Group::write)), and each live data handle
//! (`live/handle.rs`). Both run the functions here against what the metadata plane
//! published (a file's snapshot, the disk view; see `plane.rs` and
//! `docs/live-core.md`) through a [`DataPort`]: the engine to use, and the
//! way back to the metadata plane for what only it may change.
//!
//! - A **read** goes to the primary copy of each piece and falls back piece by
//!   piece to the next copy on an I/O error; when the caller's check rejects
//!   the whole buffer, every piece moves to its next copy. Bad copies are then
//!   rewritten from the good one, under the extents' latches (so no writer's
//!   newer bytes are overwritten), read again there from the good copy. A
//!   rewrite that fails is a failed disk. Given the file's checksums, each
//!   unit read is then checked (`verify.rs`): one that fails is read from
//!   the other copies and judged, a copy that matches is returned and
//!   written over the bad ones, and a unit no copy vouches for fails the
//!   read.
//! - A **write** goes to every copy online in the disk view, under shared
//!   latches, and is acknowledged when all have completed — or, for copies
//!   that failed, once the metadata plane has taken their disks offline (a
//!   copy that missed a write must never be read again). A piece that
//!   reached no copy fails the write.
//! - The **first write** into an extent never written takes its latch
//!   exclusively, looks at the current snapshot again, zeroes the rest of
//!   the extent, writes, and has the metadata plane mark it initialised (the
//!   commit's barrier flushes the disks written first). An extent never
//!   written reads as zeros without I/O.
//!
//! Durability of plain writes is `sync`'s job, as `fsync` is a file's.
//!
//! `common.rs`: the [`DataPort`], one I/O on a member disk and a batch of
//! them, which copies of an extent may be read or written, the common read,
//! and the errors the paths share. The paths: `read` (with the repair of bad
//! copies), `write` (with the first write into an extent), `punch` (holes
//! and zeroed parts of written extents), `copy` (between member disks, for
//! resync, relocation and rebalance). What the metadata plane itself does
//! with them — its own calls, publication, zeroing, the devices — is in
//! `own_io.rs`, `publish.rs`, `zeroing.rs` and `devices.rs` beside this.

mod common;
mod copy;
mod map_blocks;
mod punch;
mod read;
mod recover;
#[cfg(test)]
mod tests;
mod verify;
mod write;

pub(in crate::group) use common::{
    at, aus_touched, common_read, note_failed, readable_copies_of, run, zero_op, DataPort, DiskIo,
    FailedDisks, IoOutcome, StaleMark,
};
pub(in crate::group) use copy::{copy, Copied, CopyIo};
#[cfg(test)]
pub(crate) use map_blocks::SumsWrite;
pub(crate) use map_blocks::{read_map_block, read_map_copies, MapBlock, MapCopy};
pub use punch::Punched;
pub(in crate::group) use punch::RMW_LATCH;
pub(crate) use punch::{punch_extents, zero_parts};
pub(crate) use read::read;
pub use recover::RecoveredLog;
pub(crate) use recover::{recover_file, FileIntents, LogFacts};
pub(crate) use verify::UnitSums;
pub(crate) use write::{initialize, write};
