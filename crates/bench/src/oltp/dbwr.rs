//! The database writer. (Stub: owned by the cache helper.)

use std::sync::Arc;
use std::time::Duration;

use cairn_io::DeviceFile;

use super::cache::BufferCache;
use super::layout::Layout;
use super::redo::RedoLog;
use super::stats::StatsSlot;
use super::{Health, OltpError};

#[derive(Debug, Clone, Copy)]
pub struct DbwrConfig {
    pub layout: Layout,
    /// Most buffers in one batch of asynchronous writes.
    pub batch: usize,
    pub checkpoint_interval: Duration,
}

pub struct Dbwr {}

impl Dbwr {
    /// Start the writer over the data targets `files` (in layout order).
    pub fn start(
        _cache: Arc<BufferCache>,
        _redo: Arc<RedoLog>,
        _files: Vec<DeviceFile>,
        _cfg: DbwrConfig,
        _slot: Arc<StatsSlot>,
        _health: Arc<Health>,
    ) -> Result<Dbwr, OltpError> {
        unimplemented!("cache helper")
    }

    /// Write every dirty buffer (a final checkpoint), stop, and wait for the thread.
    pub fn stop(self) -> Result<(), OltpError> {
        unimplemented!("cache helper")
    }
}
