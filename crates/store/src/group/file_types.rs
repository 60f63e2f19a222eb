//! What a caller gives and sees of files and directories: the options of
//! a create, a file's figures, a directory entry.

use cairn_format::group::{AliasKind, DirAttrs, FileAttrs, STRIPING_FINE};
use serde::Serialize;

/// How to create a file.
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    /// Template name (file type); `DEFAULT` when not given.
    pub template: Option<String>,
    /// Redundancy override, as a copy count.
    pub copies: Option<u8>,
    /// Create missing parent directories.
    pub parents: bool,
    /// Whether the file gets a checksum map (`docs/checksums.md`).
    /// `None`, for now: no map. Until writes keep checksums, no command
    /// asks for one; the group attribute and the template field decide it
    /// once they do.
    pub checksums: Option<bool>,
}

/// A file as `open` and `ls` see it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct FileInfo {
    pub number: u32,
    pub incarnation: u32,
    pub size_bytes: u64,
    /// Bytes of AUs allocated, all copies included.
    pub allocated_bytes: u64,
    pub copies: u8,
    pub striping: String,
    pub template: String,
    pub created_unix_seconds: u64,
    pub modified_unix_seconds: u64,
    /// Mode, owner, times and the size in bytes (a file that has none
    /// stored shows [`FileAttrs::default_for`]).
    pub attrs: FileAttrs,
    /// Some extent has fewer copies that serve reads than `copies` (ASM's
    /// REDUNDANCY_LOWERED): a copy on a disk not ONLINE, or stale. Cleared
    /// when a resync (`group online`) or a rebuild restores them.
    pub redundancy_lowered: bool,
    /// How many extents.
    pub redundancy_lowered_extents: u64,
}

/// One name of the name space, by id ([`Group::node`](super::Group::node)).
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub id: u32,
    /// The directory it is in (0: the root).
    pub parent: u32,
    pub name: String,
    pub kind: AliasKind,
    /// For a file's name, the file (`None`: lost, or being deleted).
    pub file: Option<FileInfo>,
    pub created_unix_seconds: u64,
    /// A directory's mode and owner ([`DirAttrs::default`] when none are
    /// stored, and for other names).
    pub dir_attrs: DirAttrs,
}

/// One name in a directory listing.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub kind: AliasKind,
    /// For files and aliases.
    pub file: Option<FileInfo>,
    /// A file's name whose file is lost (its directory entry has no valid
    /// copy): the name is all that is left.
    pub lost: bool,
}

impl From<Node> for DirEntry {
    fn from(n: Node) -> Self {
        DirEntry {
            lost: n.kind != AliasKind::Directory && n.file.is_none(),
            name: n.name,
            kind: n.kind,
            file: n.file,
        }
    }
}

pub(super) fn striping_name(s: u8) -> &'static str {
    if s == STRIPING_FINE {
        "FINE"
    } else {
        "COARSE"
    }
}
