//! The inodes the kernel knows, and what their last `forget` settles.
//!
//! The kernel counts the lookups it holds on an inode (each entry reply is
//! one) and gives them back with `forget`; this table counts them too. A
//! file whose last name goes while the kernel knows it loses its names at
//! once and keeps its data until the last `forget` (an open file, or one a
//! path walk has just found, is never pulled from under its reader); a
//! directory removed while known keeps its id from reuse until then (its
//! generation is 0: a new directory with its id would be the dead one's
//! inode to the kernel, and fail every lookup in it).
//!
//! Locking: one leaf mutex, taken inside `meta` (an unlink asks whether the
//! kernel knows the file, a lookup is counted in the step that found it)
//! and outside it (`forget`), never held while taking anything else. A
//! `BTreeMap`, so that the file system's end settles in inode order: one
//! seed of the simulator replays the same I/O.

use std::collections::BTreeMap;
use std::sync::Mutex;

use cairn_io::poison::Recover;

use crate::ino::Ino;

/// An inode the kernel knows (a file's or a directory's).
#[derive(Debug, Clone, Copy, Default)]
struct Known {
    /// Lookups the kernel has not given back (`forget`).
    lookups: u64,
    /// Its last name went while the kernel knew it: what its last
    /// `forget` settles.
    gone: Option<Gone>,
}

/// What a removed name's inode leaves for its last `forget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gone {
    /// A file unlinked (or replaced): this incarnation is dropped.
    File { incarnation: u32 },
    /// A directory removed: its id, held from reuse, is let go.
    Dir,
}

/// The kernel's lookups, by inode number. Who changes it: entry replies
/// (counted), `forget`, unlink, rmdir and rename (marking what is gone),
/// and the file system's end (drained).
#[derive(Debug, Default)]
pub(crate) struct Lookups(Mutex<BTreeMap<u64, Known>>);

impl Lookups {
    /// The kernel is told of an inode (an entry reply): one more lookup it
    /// will give back.
    pub(crate) fn looked_up(&self, ino: Ino) {
        self.0
            .lock_or_recover()
            .entry(ino.encode())
            .or_default()
            .lookups += 1;
    }

    /// For unlink, rmdir and rename, inside `meta`: whether the kernel
    /// knows the inode whose last name goes, and if so, note what its last
    /// `forget` settles.
    pub(crate) fn gone_if_known(&self, ino: Ino, gone: Gone) -> bool {
        match self.0.lock_or_recover().get_mut(&ino.encode()) {
            Some(k) if k.lookups > 0 => {
                k.gone = Some(gone);
                true
            }
            _ => false,
        }
    }

    /// The kernel gave back `n` lookups of `ino`: on the last, what its
    /// removal left to settle, if anything.
    pub(crate) fn forgot(&self, ino: u64, n: u64) -> Option<(Ino, Gone)> {
        let gone = {
            let mut known = self.0.lock_or_recover();
            match known.get_mut(&ino) {
                Some(k) if k.lookups > n => {
                    k.lookups -= n;
                    None
                }
                Some(_) => known.remove(&ino).and_then(|k| k.gone),
                None => None,
            }
        };
        Some((Ino::decode(ino)?, gone?))
    }

    /// The file system stops: every count goes, and what the removed
    /// inodes among them left to settle.
    pub(crate) fn drain(&self) -> Vec<(Ino, Gone)> {
        std::mem::take(&mut *self.0.lock_or_recover())
            .into_iter()
            .filter_map(|(ino, k)| Some((Ino::decode(ino)?, k.gone?)))
            .collect()
    }

    /// Lookups of `ino` the kernel holds.
    pub(crate) fn count(&self, ino: u64) -> u64 {
        self.0.lock_or_recover().get(&ino).map_or(0, |k| k.lookups)
    }

    /// Inodes the kernel knows.
    pub(crate) fn len(&self) -> usize {
        self.0.lock_or_recover().len()
    }
}
