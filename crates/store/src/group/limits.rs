//! The bounds every part of a group shares: the journal ring, how many
//! blocks a transaction carries, AU sizes, and the least size of a member.

use cairn_format::group::{AtLayout, JOURNAL_TARGETS_MAX};

/// The journal ring's size. Bounded so replay is bounded: at most this much is
/// read and rewritten at mount.
pub const JOURNAL_BYTES: u64 = 4 << 20;
/// A continuing operation commits a step once it has dirtied this many blocks.
pub const STEP_DIRTY_MAX: usize = 24;
/// Behind a [`LiveGroup`](super::LiveGroup), an operation joins the running transaction only
/// while it holds fewer blocks than this; else that is committed first. The
/// largest step of any operation then still fits [`TXN_IMAGES_MAX`]: 26
/// blocks measured under the crash and interleaving simulators; by reading,
/// a `mkdir -p` of a deep path with scattered alias ids can reach about 39.
pub const JOIN_DIRTY_MAX: usize = TXN_IMAGES_MAX / 4;
/// Most blocks one transaction may carry (a step can overshoot STEP_DIRTY_MAX by
/// what one extent touches: its entry, an indirect block, and three table
/// blocks per copy: bitmap, summary and discard map). Budget: a joined
/// transaction under JOIN_DIRTY_MAX, the largest step (about 39), and the
/// discard marks of releases (CLEAN_BLOCKS_PER_TXN).
pub const TXN_IMAGES_MAX: usize = 64;

/// Discard-map blocks that releases of freed runs may mark in one
/// transaction (they join it, beside an operation's own blocks).
pub(super) const CLEAN_BLOCKS_PER_TXN: usize = 8;

/// A relocation batch commits the marks its reservations cleared once
/// they reach this many map blocks (each reservation adds at most two), so
/// that a batch over many disks never makes a record too large.
pub(super) const CLEAN_CLEARS_PER_COMMIT: usize = 16;
/// Blocks of an allocation table read per request at mount (1 MiB).
pub(super) const TABLE_READ_BLOCKS_MAX: u64 = 256;
/// Rounds of reads of a journal block's copies at replay before a copy
/// that fails is taken as unreadable (`journal.rs` `read_journal_copy`): a
/// read error that passes (a path failing over) does not end the journal.
pub(super) const JOURNAL_READ_TRIES: usize = 3;
/// Reads of a checksum map block's copy that fails before it is taken as
/// unreadable (`data/map_blocks.rs`), for the same reason.
pub(super) const MAP_READ_TRIES: usize = 3;
/// Default AU size.
pub const AU_BYTES_DEFAULT: u64 = 4 << 20;
/// AUs of data a member disk holds at least, beyond its header copies and
/// allocation table: a disk of one AU (a 10 MiB file with 4 MiB AUs) adds
/// nothing a database can use and only makes placement fail on it.
pub const MEMBER_DATA_AUS_MIN: u64 = 4;

/// The layout of a disk of `size_bytes` as a member of a group of
/// `au_bytes` AUs — created with it, added to it, or resized to that size:
/// the one rule for how small a member may be. Refused, it says the
/// smallest size that would do.
pub fn member_layout(size_bytes: u64, au_bytes: u64) -> Result<AtLayout, String> {
    let fits = |size: u64| {
        AtLayout::for_disk(size, au_bytes).filter(|l| l.data_aus() >= MEMBER_DATA_AUS_MIN)
    };
    if let Some(layout) = fits(size_bytes) {
        return Ok(layout);
    }
    // The smallest size that fits, by whole AUs (the table grows by a
    // block per 32K AUs, so a few steps past the data AUs themselves).
    let least = (MEMBER_DATA_AUS_MIN + 1..MEMBER_DATA_AUS_MIN + 64)
        .map(|aus| aus * au_bytes + fmt_layout_reserve())
        .find(|size| fits(*size).is_some());
    Err(match least {
        Some(least) => format!(
            "{size_bytes} bytes is too small for a member disk: it must hold its header copies, its allocation table and at least {MEMBER_DATA_AUS_MIN} AUs of {} MiB — {} MiB or more",
            au_bytes >> 20,
            least.div_ceil(1 << 20)
        ),
        None => format!(
            "{size_bytes} bytes is too small for a member disk with {}-MiB AUs",
            au_bytes >> 20
        ),
    })
}

/// Room a device keeps besides its AUs (header copies at its start and
/// end), for [`member_layout`]'s estimate of the least size.
fn fmt_layout_reserve() -> u64 {
    cairn_format::DEVICE_SIZE_MIN_BYTES
}

const _: () = assert!(TXN_IMAGES_MAX * 3 <= JOURNAL_TARGETS_MAX);

/// `disk_io_timeout` when the group sets none: in the tens of seconds, as
/// ASM's disk I/O timeout, so a SAN path failing over (which may take tens
/// of seconds) is waited for, and a dead one is not for ever.
pub const DISK_IO_TIMEOUT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(30);
