//! The group's feature bits beyond the format version: what a Cairn that
//! does not know one may do with the group (refuse it, or mount it only
//! read-only). They live in the superblock's feature set.

/// Incompatible group feature: extents may carry stale-copy bits
/// ([`Extent::stale`](super::Extent::stale)), which a reader that ignores them
/// would serve stale data through, and disks may be SYNCING.
pub const GROUP_INCOMPAT_STALE_COPIES: u64 = 1;
/// The incompatible group features this code knows.
pub const GROUP_INCOMPAT_KNOWN: u64 = GROUP_INCOMPAT_STALE_COPIES;

/// Ro-compatible group feature: file entries may carry
/// [`FileAttrs`](super::FileAttrs) and directory names
/// [`DirAttrs`](super::DirAttrs) in bytes that were reserved. A Cairn that does not
/// know it must not rewrite an entry (it would zero them), so it may mount the
/// group only read-only.
pub const GROUP_RO_COMPAT_FILE_ATTRS: u64 = 1;
/// Ro-compatible group feature: disks may carry a discard map
/// ([`AtLayout::clean_offset_bytes`](super::AtLayout::clean_offset_bytes)) that
/// marks free AUs known to hold nothing on the array. A Cairn that does not know it
/// would hand such an AU out and write it without clearing its mark, and the map
/// would then call an AU that holds data returned: it may mount the group only
/// read-only.
pub const GROUP_RO_COMPAT_CLEAN_MAP: u64 = 2;
/// Ro-compatible group feature: whoever writes the group keeps a heartbeat
/// on its disks ([`crate::heartbeat`]) and checks the others' before it
/// mounts. A Cairn that does not know it would mount a group another host
/// is writing, and both would write: it may mount the group only
/// read-only.
pub const GROUP_RO_COMPAT_MULTIHOST: u64 = 4;
/// Ro-compatible group feature: files may have checksum maps
/// (`docs/checksums.md`): files of their own, entered in the checksum
/// directory (file 7), which every write, resize, delete and move must keep
/// in step with their data files. A Cairn that does not know it would
/// write data and leave its checksums old (the next read would call the new
/// bytes bad), and would free or move a file without its map: it may mount
/// the group only read-only (reading without verifying is what it did
/// before). Set when the checksum directory is made.
///
/// What this bit promises is that maps exist and move with their files;
/// the version whose writes keep the checksums in the maps declares a bit
/// of its own for that, so that this one (which writes data without them)
/// mounts such a group read-only.
pub const GROUP_RO_COMPAT_DATA_CHECKSUMS: u64 = 8;
/// Ro-compatible group feature: the writes of files with checksum maps
/// keep their checksums through the checksum log (file 8;
/// `docs/checksums.md`, "Writes"), and a writing mount recovers the log a
/// crash left before anything is served. A Cairn that does not know it
/// would write data without naming the checksums in the log, or start the
/// log again over records it did not judge, and a crash would then leave
/// the maps behind the data: it may mount the group only read-only. Set
/// with [`GROUP_RO_COMPAT_DATA_CHECKSUMS`], when the checksum directory and
/// the log are made.
pub const GROUP_RO_COMPAT_CHECKSUM_LOG: u64 = 16;
/// The ro-compatible group features this code knows.
pub const GROUP_RO_COMPAT_KNOWN: u64 = GROUP_RO_COMPAT_FILE_ATTRS
    | GROUP_RO_COMPAT_CLEAN_MAP
    | GROUP_RO_COMPAT_MULTIHOST
    | GROUP_RO_COMPAT_DATA_CHECKSUMS
    | GROUP_RO_COMPAT_CHECKSUM_LOG;
