//! Inode numbers: what each names, and its encoding (`docs/serve.md`, "The
//! file system").
//!
//! 1 is the root, which lists the served groups. Below group slot `s`
//! (0-based), a directory with alias id `d` (0: the group's root) is
//! `(s + 1) << 40 | d`, and a file with number `n` is `(s + 1) << 40 |
//! FILE_BIT | n` — every name of a file (its aliases too) is one inode. A
//! file's generation is its incarnation, so a number reused after a delete
//! is a different inode to the kernel; a directory's is 0, so a removed
//! directory's id must not name a new one while the kernel still knows it
//! (`crate::known`).

/// The root inode.
pub const ROOT: u64 = 1;
/// Set in a file's inode (below it: the file number).
pub const FILE_BIT: u64 = 1 << 39;
/// The bits below a group slot's.
const SLOT_SHIFT: u32 = 40;

/// What an inode names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ino {
    /// The served groups.
    Root,
    /// A directory of the group in `slot` (`id` 0: the group's root).
    Dir { slot: usize, id: u32 },
    /// File `number` of the group in `slot`.
    File { slot: usize, number: u32 },
}

impl Ino {
    /// What inode number `ino` names; `None` for a number no inode has
    /// (0, or an id wider than the group's).
    pub fn decode(ino: u64) -> Option<Self> {
        if ino == ROOT {
            return Some(Self::Root);
        }
        let slot = (ino >> SLOT_SHIFT).checked_sub(1)? as usize;
        let low = ino & ((1 << SLOT_SHIFT) - 1);
        let id = u32::try_from(low & !FILE_BIT).ok()?;
        Some(if low & FILE_BIT != 0 {
            // A checksum map is no inode's: a forged number must not reach it.
            if cairn_format::group::is_map_number(id) {
                return None;
            }
            Self::File { slot, number: id }
        } else {
            Self::Dir { slot, id }
        })
    }

    /// The inode number.
    pub fn encode(self) -> u64 {
        let base = |slot: usize| (slot as u64 + 1) << SLOT_SHIFT;
        match self {
            Self::Root => ROOT,
            Self::Dir { slot, id } => base(slot) | u64::from(id),
            Self::File { slot, number } => base(slot) | FILE_BIT | u64::from(number),
        }
    }
}
