//! What the data plane has not been shown yet: the user files a committed
//! transaction changed, waiting for publication, and per file the snapshot
//! chunks its changes touched since it was last published (so that a new
//! snapshot shares the others with the one before: `plane.rs`).
//!
//! Owned by the [`Group`](super::super::Group) (changed only under its
//! `&mut`, i.e. under a live group's `meta`). Publication (`publish.rs`)
//! takes from here; nothing else reads it.

use std::collections::{BTreeSet, HashMap, HashSet};

use cairn_format::group::{is_map_number, mapped_file, FILE_CHECKSUM_LOG, FILE_NUMBER_USER_MIN};

use super::super::plane::SNAPSHOT_CHUNK_EXTENTS;
use super::violations::Violations;

#[derive(Debug, Default)]
pub(in crate::group) struct Unpublished {
    /// Per user file, the snapshot chunks its changes since the last
    /// publication touched.
    chunks: HashMap<u32, HashSet<usize>>,
    /// User files whose entries a committed transaction changed: published
    /// once its commit is done.
    files: BTreeSet<u32>,
    /// The checksum log's entry changed (made, or moved): the data plane's
    /// log is told where its blocks are.
    log: bool,
}

impl Unpublished {
    /// Extent `index` of file `number` changed. Only user files are
    /// published: a metadata file's changes are not kept.
    pub(in crate::group) fn extent_changed(&mut self, number: u32, index: u64) {
        if number < FILE_NUMBER_USER_MIN {
            return;
        }
        self.chunks
            .entry(number)
            .or_default()
            .insert(index as usize / SNAPSHOT_CHUNK_EXTENTS);
    }

    /// File `number`'s entry changed in the transaction being committed.
    /// A checksum map's change publishes its data file too, whose snapshot
    /// says whether it has one.
    pub(in crate::group) fn file_committed(&mut self, number: u32) {
        if number >= FILE_NUMBER_USER_MIN {
            self.files.insert(number);
        }
        if is_map_number(number) {
            self.files.insert(mapped_file(number));
        }
        if number == FILE_CHECKSUM_LOG {
            self.log = true;
        }
    }

    /// Whether the checksum log's entry changed since the last call.
    pub(in crate::group) fn take_log(&mut self) -> bool {
        std::mem::take(&mut self.log)
    }

    pub(in crate::group) fn waits(&self, number: u32) -> bool {
        self.files.contains(&number)
    }

    /// The files to publish now.
    pub(in crate::group) fn take_files(&mut self) -> BTreeSet<u32> {
        std::mem::take(&mut self.files)
    }

    /// The chunks of `number` to build anew (none: share every chunk).
    pub(in crate::group) fn take_chunks(&mut self, number: u32) -> HashSet<usize> {
        self.chunks.remove(&number).unwrap_or_default()
    }

    /// Everything is about to be published whole (mount, create).
    pub(in crate::group) fn clear(&mut self) {
        self.chunks.clear();
        self.files.clear();
        self.log = false;
    }

    /// What must hold between any two operations: at rest (`at_rest`:
    /// every operation committed and published before it returned),
    /// nothing waits — a file left here is served from its old snapshot.
    pub(in crate::group) fn check_invariants(&self, at_rest: bool, out: &mut Violations) {
        if at_rest {
            out.check(self.files.is_empty(), || {
                format!("files {:?} committed and never published", self.files)
            });
            out.check(self.chunks.is_empty(), || {
                format!(
                    "changed chunks of files {:?} never published",
                    self.chunks.keys().collect::<BTreeSet<_>>()
                )
            });
        }
    }
}
