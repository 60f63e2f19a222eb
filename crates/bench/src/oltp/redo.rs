//! The log buffer and the log writer. (Stub: owned by the redo helper.)

use std::sync::Arc;

use cairn_io::DeviceFile;
use serde::{Deserialize, Serialize};

use super::layout::BlockId;
use super::stats::{OpStats, StatsSlot};
use super::{Health, OltpError};

/// A position in the redo stream: bytes of redo records generated before it.
pub type Lsn = u64;

#[derive(Debug, Clone, Copy)]
pub struct RedoConfig {
    pub log_buffer_bytes: usize,
    /// The byte range of the redo file the log cycles through.
    pub start: u64,
    pub end: u64,
    /// The redo block (the device's logical sector, at least 512).
    pub block_bytes: u32,
    /// The largest single write (the device's maximum transfer).
    pub max_write_bytes: u64,
    pub dataset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RedoSummary {
    /// Bytes of redo records generated (the sum of the records' sizes).
    pub bytes_generated: u64,
    /// Bytes of records written (equal to the above after a clean stop).
    pub bytes_written: u64,
    pub writes: u64,
    /// Times the log wrapped to its start.
    pub wraps: u64,
}

pub struct RedoLog {}

impl RedoLog {
    /// Start the log writer on `file`.
    pub fn start(
        _file: DeviceFile,
        _cfg: RedoConfig,
        _slot: Arc<StatsSlot>,
        _health: Arc<Health>,
    ) -> Result<Arc<RedoLog>, OltpError> {
        unimplemented!("redo helper")
    }

    /// Add a change record for `block`, now at `version`, whose change vector is
    /// `change`; counts redo size and entries. Returns the LSN at the record's end.
    pub fn append_change(
        &self,
        _block: BlockId,
        _version: u64,
        _change: &[u8],
        _op: &mut OpStats,
    ) -> Result<Lsn, OltpError> {
        unimplemented!("redo helper")
    }

    /// Add a commit record and wait (log file sync) until a log write covers it.
    pub fn commit(&self, _op: &mut OpStats) -> Result<Lsn, OltpError> {
        unimplemented!("redo helper")
    }

    /// Wait until the log is written up to `lsn` (the writer's write-ahead rule).
    pub fn flush_to(&self, _lsn: Lsn) -> Result<(), OltpError> {
        unimplemented!("redo helper")
    }

    /// The LSN up to which the log is on disk.
    pub fn written(&self) -> Lsn {
        unimplemented!("redo helper")
    }

    /// Write what is left, stop the log writer and wait for it.
    pub fn stop(&self) -> Result<RedoSummary, OltpError> {
        unimplemented!("redo helper")
    }
}
