//! Cairn's I/O seam and its real backends.
//!
//! - [`engine`]: the completion-based [`IoEngine`] trait every backend implements —
//!   submit requests with owned, aligned buffers and a tag; drain completions.
//! - [`buf`]: [`AlignedBuf`], the owned buffer that travels with a request.
//! - [`clock`]: where a timed loop reads its time (real, or a simulator's).
//! - [`geometry`]: what the engine needs to know of a device to keep every request legal.
//! - [`host`], [`probe`]: what the kernel says about a block device or file (sysfs,
//!   procfs, statx), read-only.
//! - [`device`]: opening a device for direct I/O, exclusively when writing
//!   ([`OpenError`], which probing gives too, in a module both use);
//!   [`block_ioctl`]: the block-device ioctls, as safe functions.
//! - [`poison`]: what a poisoned lock means, for every crate's locks.
//! - [`uring_engine`] (default) and [`sync_engine`] (reference and fallback);
//!   [`backend`]: which of them runs;
//!   `uring_workers`: the kernel's workers io_uring runs blocking requests
//!   on, per thread, kept so that a device that hangs cannot starve another.
//! - [`counted`]: per-device I/O counters, and an engine that keeps them.
//! - [`sched`]: the points where a deterministic scheduler (the interleaving
//!   simulator's) may switch threads; no-ops in production.
//!
//! The simulated disk lives in `cairn-io-sim`; the conformance suite that every
//! backend must pass, loop-device and sysfs fixtures, and a disk that really
//! hangs (a FUSE file system told to block) are in `test_support` (feature
//! `test-support`).

pub mod backend;
pub mod block_ioctl;
pub mod buf;
pub mod clock;
pub mod counted;
pub mod device;
pub mod engine;
pub mod geometry;
pub mod host;
mod open_error;
pub mod poison;
pub mod probe;
pub mod sched;
pub mod sync_engine;
pub mod uring_engine;
mod uring_workers;

#[cfg(feature = "test-support")]
pub mod test_support;

pub use backend::{new_file_engine, EngineKind};
pub use buf::AlignedBuf;
pub use device::{DeviceFile, OpenError, OpenMode};
pub use engine::{
    Completion, DeviceId, EngineStats, FileEngine, IoEngine, IoError, Op, OpKind, Request,
    SubmitError,
};
pub use geometry::Geometry;
pub use probe::DeviceProbe;
