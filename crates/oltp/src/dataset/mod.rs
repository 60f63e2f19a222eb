//! Data targets and the redo file: setup (load), open for a run, verify.
//!
//! Every data target starts with a header region ([`HEADER_BYTES`](crate::layout::HEADER_BYTES)) whose first
//! 4 KiB hold the dataset header: which dataset this is (a random id), its
//! [`Shape`](crate::layout::Shape), how many data targets it spans and which one this is, and its
//! state. The redo file's first 4 KiB name the same dataset, its redo block
//! (the device's logical sector, at least 512 bytes) and the log's byte range.
//!
//! ```text
//! data target header (4096 bytes, little-endian; CRC-32C of bytes 0..4092 at 4092)
//!   0 magic "CAIRNOLTP1" | 10 format u16 | 12 state u32 (1 loading, 2 clean, 3 running)
//!  16 dataset id u64 | 24 block size u32 | 28 schemas u32 | 32 SCALE u64 | 40 SCAN_TABLE_SZ u64
//!  48 flags u32 (bit 0 obfuscated) | 52 data targets u32 | 56 this target's index u32
//!  64 load time (unix s) u64
//! redo header (4096 bytes; CRC-32C at 4092)
//!   0 magic "CAIRNREDO1" | 10 format u16 | 12 redo block bytes u32 | 16 dataset id u64
//!  24 file size u64 | 32 log start u64 | 40 log end u64
//! ```
//!
//! Safety rules, as for `cairn bench` targets (`cairn_kit::target`): setup
//! opens every target exclusively through the caller's
//! [`TargetOpener::open_for_overwrite`](cairn_kit::target::TargetOpener::open_for_overwrite) (Cairn's refuses a device in use and,
//! without `--force`, one carrying someone else's data); a missing regular
//! file is created sparse (never under `/dev`) and removed again if setup
//! fails or is interrupted. A run opens only targets
//! whose first block is a dataset header and never writes to anything else.
//!
//! Write order at setup: `loading` headers (flushed) → every block → flush →
//! redo header → `clean` headers (flushed). A crash anywhere before the last
//! step leaves a dataset that `open` refuses as unfinished.

mod checks;
mod header;
mod open;
mod progress;
mod setup;
mod verify;

pub use header::DatasetState;
pub use open::{open, Dataset, OpenOptions};
pub use progress::Progress;
pub use setup::{key_map, setup, LoadReport, SetupOptions, REDO_BYTES_MIN};
pub use verify::{verify, BlockProblem, RedoCheck, VerifyReport};
