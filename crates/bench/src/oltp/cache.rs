//! The shared buffer cache. (Stub: owned by the cache helper.)

use std::time::Duration;

use cairn_io::AlignedBuf;

use super::layout::BlockId;
use super::stats::OpStats;

#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    pub buffers: usize,
    pub block_size: usize,
}

/// How a buffer is pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// For reading (a consistent get): many sessions at once.
    Shared,
    /// For changing (a db block get): one session, and never while the writer writes it.
    Exclusive,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The cache was shut down while waiting (the run is stopping).
    #[error("the buffer cache is shutting down")]
    Shutdown,
}

pub struct BufferCache {}

/// The outcome of [`BufferCache::get`].
pub enum Get<'a> {
    /// The block is cached; it stays pinned while this lives.
    Hit(Pinned<'a>),
    /// The block is not cached: a buffer has been claimed for it, and the caller reads it in.
    Miss(Loading<'a>),
    /// No free buffer, and the caller asked not to wait (it holds claimed buffers to read first).
    NoFreeBuffer,
}

/// A pinned, valid buffer.
pub struct Pinned<'a> {
    _cache: &'a BufferCache,
}

/// A buffer claimed for a block being read in.
pub struct Loading<'a> {
    _cache: &'a BufferCache,
}

/// A dirty buffer's content, copied for the writer.
#[derive(Debug)]
pub struct WriteJob {
    pub frame: usize,
    pub id: BlockId,
    /// The redo position of the buffer's last change (the write-ahead rule: redo first).
    pub lsn: u64,
    pub buf: AlignedBuf,
}

impl BufferCache {
    pub fn new(_cfg: CacheConfig) -> Self {
        unimplemented!("cache helper")
    }

    pub fn buffers(&self) -> usize {
        unimplemented!("cache helper")
    }

    pub fn block_size(&self) -> usize {
        unimplemented!("cache helper")
    }

    /// Get block `id` pinned in `mode`, counting the logical read and any waits in `op`.
    /// With `wait_for_free` false, returns [`Get::NoFreeBuffer`] instead of waiting for the writer.
    pub fn get(
        &self,
        _id: BlockId,
        _mode: Mode,
        _wait_for_free: bool,
        _op: &mut OpStats,
    ) -> Result<Get<'_>, CacheError> {
        unimplemented!("cache helper")
    }

    pub fn dirty_buffers(&self) -> usize {
        unimplemented!("cache helper")
    }

    /// Block until a session asks the writer for free buffers, or `timeout` passes; true if asked.
    pub fn wait_for_writer_work(&self, _timeout: Duration) -> bool {
        unimplemented!("cache helper")
    }

    /// Claim up to `max` dirty buffers for writing (the coldest first; with
    /// `checkpoint`, any dirty one), copying each into a job. A claimed buffer
    /// cannot be changed until [`BufferCache::end_write`].
    pub fn begin_writes(&self, _max: usize, _checkpoint: bool, _jobs: &mut Vec<WriteJob>, _op: &mut OpStats) {
        unimplemented!("cache helper")
    }

    /// The write of `job` finished: the buffer is clean (or, if `ok` is false, dirty again).
    pub fn end_write(&self, _job: &WriteJob, _ok: bool) {
        unimplemented!("cache helper")
    }

    /// Wake every waiter with [`CacheError::Shutdown`].
    pub fn shutdown(&self) {
        unimplemented!("cache helper")
    }
}

impl Pinned<'_> {
    pub fn id(&self) -> BlockId {
        unimplemented!("cache helper")
    }

    pub fn data(&self) -> &[u8] {
        unimplemented!("cache helper")
    }

    /// The content, to change (exclusive pins only).
    pub fn data_mut(&mut self) -> &mut [u8] {
        unimplemented!("cache helper")
    }

    /// Mark the buffer changed by redo ending at `lsn` (exclusive pins only).
    pub fn mark_dirty(&mut self, _lsn: u64) {
        unimplemented!("cache helper")
    }
}

impl<'a> Loading<'a> {
    pub fn id(&self) -> BlockId {
        unimplemented!("cache helper")
    }

    /// The buffer's memory, to read into (hand it back with `complete` or `fail`).
    pub fn take_buf(&mut self) -> AlignedBuf {
        unimplemented!("cache helper")
    }

    /// The read succeeded: the block is valid and pinned in the mode asked for.
    pub fn complete(self, _buf: AlignedBuf) -> Pinned<'a> {
        unimplemented!("cache helper")
    }

    /// The read failed: the buffer goes back to the free list.
    pub fn fail(self, _buf: AlignedBuf) {
        unimplemented!("cache helper")
    }
}
