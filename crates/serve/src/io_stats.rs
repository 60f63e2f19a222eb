//! The file system's I/O on one group: atomics only, written by the FUSE
//! workers and read by whoever reports (`metrics.rs`).

use cairn_io::counted::OpStats;

/// The file system's I/O on one group.
#[derive(Default)]
pub struct IoStats {
    pub reads: OpStats,
    pub writes: OpStats,
    pub syncs: OpStats,
    /// `fallocate` with a mode: hole punches (a volume's discards) and
    /// zeroed ranges; bytes are the ranges' lengths.
    pub discards: OpStats,
}
