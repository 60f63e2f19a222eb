//! One simulated disk: its durable image, kept in shared chunks, and the
//! writes pending on it (what a read sees and a crash may keep, lose or
//! tear); how a flush lands them; the faults armed on it; images of it
//! taken and put back ([`DiskImage`]). The engine ([`crate::SimEngine`])
//! decides when each request takes effect and completes.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use cairn_io::Geometry;

/// Faults armed on one disk.
#[derive(Debug, Clone, Default)]
pub struct DiskFaults {
    /// Reads overlapping these byte ranges fail with EIO.
    pub read_error_ranges: Vec<Range<u64>>,
    /// Writes overlapping these byte ranges fail with EIO and write nothing.
    pub write_error_ranges: Vec<Range<u64>>,
    pub read_error_per_million: u32,
    pub write_error_per_million: u32,
    /// Writes that land somewhere else and report success.
    pub misdirect_per_million: u32,
    /// Discarded ranges keep their old data instead of reading as zeros.
    pub discard_reads_stale: bool,
}

/// What a pending write puts down: bytes, or zeros (write-zeroes, a
/// discard that reads back zeros), kept as a length so that zeroing a big
/// extent costs no buffer and no per-sector work.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    Bytes(Vec<u8>),
    Zeros(u64),
}

impl Payload {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Payload::Bytes(b) => b.len() as u64,
            Payload::Zeros(n) => *n,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct PendingWrite {
    pub(crate) offset_bytes: u64,
    pub(crate) data: Payload,
    /// FUA: durable once the write has completed.
    pub(crate) fua: bool,
    /// Simulated time at which the write completes.
    pub(crate) completes_at_ns: u64,
}

/// The durable image is kept in chunks of this many bytes (a multiple of
/// every sector size): one map entry and one allocation per 64 KiB, not per
/// sector, which at 512-byte sectors was much of a simulation's time.
pub(crate) const CHUNK: u64 = 64 << 10;

/// One simulated disk.
#[derive(Debug, Clone)]
pub struct SimDisk {
    pub(crate) geometry: Geometry,
    /// Durable contents by chunk (`CHUNK` bytes each); absent chunks are
    /// zero. Shared with the images taken of the disk ([`DiskImage`]) until
    /// one side writes the chunk (copy on write), so an image costs a map
    /// of pointers, not the disk's bytes.
    pub(crate) durable: BTreeMap<u64, Arc<[u8]>>,
    pub(crate) pending: Vec<PendingWrite>,
    pub faults: DiskFaults,
    pub(crate) lost: bool,
    pub(crate) hung: bool,
}

impl SimDisk {
    pub(crate) fn sector(&self) -> u64 {
        u64::from(self.geometry.logical_sector_bytes)
    }

    pub(crate) fn durable_bytes(&self, offset_bytes: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.durable_into(offset_bytes, &mut out, true);
        out
    }

    /// The durable contents at `offset_bytes` into `out`; where no chunk
    /// was ever written, zeros (written only if `out` is not `zeroed`
    /// already: a read fills its own buffer, and each pass over a large
    /// buffer showed in the simulations' time).
    pub(crate) fn durable_into(&self, offset_bytes: u64, out: &mut [u8], zeroed: bool) {
        let end = offset_bytes + out.len() as u64;
        let mut at = offset_bytes;
        for (index, data) in self
            .durable
            .range(offset_bytes / CHUNK..end.div_ceil(CHUNK))
        {
            let from = index * CHUNK;
            if !zeroed && from > at {
                out[(at - offset_bytes) as usize..(from - offset_bytes) as usize].fill(0);
            }
            copy_overlap(out, offset_bytes, data, from);
            at = at.max((from + CHUNK).min(end));
        }
        if !zeroed && at < end {
            out[(at - offset_bytes) as usize..].fill(0);
        }
    }

    pub(crate) fn current_bytes(&self, offset_bytes: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.current_into(offset_bytes, &mut out, true);
        out
    }

    /// What a read of `out.len()` bytes at `offset_bytes` returns now.
    pub(crate) fn current_into(&self, offset_bytes: u64, out: &mut [u8], zeroed: bool) {
        self.durable_into(offset_bytes, out, zeroed);
        let len = out.len();
        for write in &self.pending {
            match &write.data {
                Payload::Bytes(b) => copy_overlap(out, offset_bytes, b, write.offset_bytes),
                Payload::Zeros(n) => {
                    let start = offset_bytes.max(write.offset_bytes);
                    let end = (offset_bytes + len as u64).min(write.offset_bytes + n);
                    if start < end {
                        out[(start - offset_bytes) as usize..(end - offset_bytes) as usize].fill(0);
                    }
                }
            }
        }
    }

    /// Make `len` bytes of `payload`, from `from` bytes into it, durable at
    /// `offset_bytes` (sector-aligned, as every write is).
    pub(crate) fn land(&mut self, offset_bytes: u64, payload: &Payload, from: u64, len: u64) {
        match payload {
            Payload::Bytes(b) => {
                self.make_durable(offset_bytes, &b[from as usize..(from + len) as usize]);
            }
            Payload::Zeros(_) => {
                // Absent chunks read as zeros; a chunk covered in part is
                // zeroed in that part.
                let covered: Vec<u64> = self
                    .durable
                    .range(offset_bytes / CHUNK..(offset_bytes + len).div_ceil(CHUNK))
                    .map(|(k, _)| *k)
                    .collect();
                for k in covered {
                    let start = offset_bytes.max(k * CHUNK);
                    let end = (offset_bytes + len).min((k + 1) * CHUNK);
                    if end - start == CHUNK {
                        self.durable.remove(&k);
                    } else if let Some(chunk) = self.durable.get_mut(&k) {
                        Arc::make_mut(chunk)
                            [(start - k * CHUNK) as usize..(end - k * CHUNK) as usize]
                            .fill(0);
                    }
                }
            }
        }
    }

    pub(crate) fn make_durable(&mut self, offset_bytes: u64, data: &[u8]) {
        let end = offset_bytes + data.len() as u64;
        let mut at = offset_bytes;
        while at < end {
            let index = at / CHUNK;
            let within = (at % CHUNK) as usize;
            let n = (CHUNK - at % CHUNK).min(end - at) as usize;
            let from = &data[(at - offset_bytes) as usize..][..n];
            match self.durable.get_mut(&index) {
                Some(chunk) => Arc::make_mut(chunk)[within..within + n].copy_from_slice(from),
                // Zeros where nothing was stays sparse.
                None if all_zeros(from) => {}
                // A whole chunk: made from the bytes, never zeroed first.
                None if n == CHUNK as usize => {
                    self.durable.insert(index, Arc::from(from));
                }
                None => {
                    // Collected straight into its shared allocation (a
                    // Vec turned into an Arc would be copied once more).
                    let mut chunk: Arc<[u8]> = std::iter::repeat_n(0u8, CHUNK as usize).collect();
                    Arc::get_mut(&mut chunk).expect("invariant: just made")[within..within + n]
                        .copy_from_slice(from);
                    self.durable.insert(index, chunk);
                }
            }
            at += n as u64;
        }
    }

    /// A flush issued at `issued_at_ns`, taking effect as it completes, makes
    /// durable the writes completed before it was issued; a write still in flight
    /// then is not covered (order by waiting for the write, then flushing). A
    /// covered write overlapping an earlier write that stays pending stays
    /// pending too, so what readers see never goes back to older data.
    pub(crate) fn flush(&mut self, issued_at_ns: u64) {
        let mut still_pending: Vec<PendingWrite> = Vec::new();
        for write in std::mem::take(&mut self.pending) {
            let end = write.offset_bytes + write.data.len();
            let behind_older = still_pending.iter().any(|p| {
                p.offset_bytes < end && write.offset_bytes < p.offset_bytes + p.data.len()
            });
            if write.completes_at_ns <= issued_at_ns && !behind_older {
                self.land(write.offset_bytes, &write.data, 0, write.data.len());
            } else {
                still_pending.push(write);
            }
        }
        self.pending = still_pending;
    }
}

/// Everything a simulated disk holds, flushed or not ([`SimEngine::image`](crate::SimEngine::image)):
/// to be put back in its place, or another's, later
/// ([`SimEngine::put_image`](crate::SimEngine::put_image)). Cheap to take and keep: its chunks are
/// shared with the disk until either is written.
#[derive(Debug, Clone, Default)]
pub struct DiskImage {
    pub(crate) durable: BTreeMap<u64, Arc<[u8]>>,
    pub(crate) pending: Vec<PendingWrite>,
}

impl DiskImage {
    /// A device that holds nothing: every byte reads as zero.
    pub fn blank() -> Self {
        Self::default()
    }
}

/// Copy the overlap of `src` (at `src_offset`) into `dst` (at `dst_offset`).
pub(crate) fn copy_overlap(dst: &mut [u8], dst_offset: u64, src: &[u8], src_offset: u64) {
    let start = dst_offset.max(src_offset);
    let end = (dst_offset + dst.len() as u64).min(src_offset + src.len() as u64);
    if start >= end {
        return;
    }
    let d = (start - dst_offset) as usize;
    let s = (start - src_offset) as usize;
    let n = (end - start) as usize;
    dst[d..d + n].copy_from_slice(&src[s..s + n]);
}

/// Whether `bytes` are all zero (compared 4 KiB at a time: a zero-fill
/// writes hundreds of MiB through here).
pub(crate) fn all_zeros(bytes: &[u8]) -> bool {
    const ZERO: [u8; 4096] = [0; 4096];
    let mut chunks = bytes.chunks_exact(ZERO.len());
    chunks.all(|c| c == ZERO) && chunks.remainder().iter().all(|b| *b == 0)
}
