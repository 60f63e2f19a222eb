//! The groups' name space as a file system, without the kernel: what the
//! FUSE service (`cairn_serve`'s `fs`) answers to each request, as plain
//! Rust — inode numbers as `u64`, names as `&OsStr`, [`Errno`] for a
//! refusal, attributes as [`Attr`] — so that it is tested directly, and by
//! the interleaving simulator against a model of POSIX
//! (`tests/posix_model/`). The service only decodes a request, calls
//! [`Vfs`], and encodes the reply (`docs/serve.md`, "The file system").
//!
//! Operations: lookup and forget, getattr, setattr (size, mode, owner,
//! times), readdir, open, read and write at any byte offset, create, mknod
//! (regular files), mkdir, unlink, rmdir, rename, fallocate (growing,
//! punching holes, zeroing ranges), statfs, flush and release, and the
//! fsync family — durable on every copy's disk before the reply.
//!
//! What it owns:
//! - [`ino`]: inode numbers, and what each names.
//! - `known`: the kernel's lookup counts, and what a name removed while
//!   the kernel still knows its inode leaves for the last `forget` — a
//!   file's data outlive its last name while the kernel knows its inode,
//!   so an open file, or one a path walk has just found, is never pulled
//!   away underneath its reader (a rename over a name a reader is opening
//!   gives the reader the old file whole); a removed directory's id is not
//!   reused while the kernel knows it.
//! - `mtimes`: the modification times of writes not yet stored.
//! - `handles`: each group's pool of data handles.
//! - [`Names`]: the control socket's removals, which share the counts.
//!
//! What it does not do: talk to the kernel (the service's `fs` does:
//! reply plumbing, the cache lifetimes it gives, the capabilities it asks
//! for at `init`, telling the kernel a name went) or count what it serves
//! (the service's metrics). An open is not a handle of its own here: the
//! kernel holds a lookup on every inode it has open, so the lookup count
//! is what keeps an unlinked file's data (as the kernel's own file systems
//! keep an inode while it is referenced).
//!
//! Locks: a request takes a data handle from its group's pool, then the
//! data path's latches, then `meta` (the live core's order); the lookup
//! table, the pending times and each pool are leaves.

mod attr;
mod clock;
mod errno;
mod handles;
pub mod ino;
mod known;
mod mtimes;
mod names;
mod vfs;

pub use attr::{Attr, Kind};
pub use clock::{Clock, SystemClock};
pub use errno::Errno;
pub use ino::Ino;
pub use names::Names;
pub use vfs::{Caller, DirEntry, Entry, Opened, Served, SetAttr, SetTime, Statfs, Vfs};

#[cfg(test)]
mod tests;
