//! The redo stream's format (records, redo blocks: see the tables in the
//! module above) and the part of the redo file the log cycles through.

use cairn_io::DeviceFile;

use crate::layout::BlockId;
use crate::OltpError;

/// A position in the redo stream: bytes of redo records generated before it.
pub type Lsn = u64;

/// Bytes of a redo record's header.
pub const RECORD_HEADER_BYTES: usize = 24;
/// Bytes of a commit record (a header and nothing else).
pub const COMMIT_RECORD_BYTES: usize = RECORD_HEADER_BYTES;
/// The largest redo record, header included. A change vector is at most
/// [`MAX_CHANGE_BYTES`]; SLOB's REDO_STRESS needs at most 19 × 128 bytes.
pub const MAX_RECORD_BYTES: usize = 16 << 10;
/// The largest change vector one record carries.
pub const MAX_CHANGE_BYTES: usize = MAX_RECORD_BYTES - RECORD_HEADER_BYTES;
/// The smallest log buffer: room for several of the largest records.
pub const LOG_BUFFER_MIN_BYTES: usize = 64 << 10;
/// Record kind: a change to one data block.
pub const RECORD_KIND_CHANGE: u8 = 1;
/// Record kind: a commit.
pub const RECORD_KIND_COMMIT: u8 = 2;
/// Bytes of a redo block's header.
pub const REDO_BLOCK_HEADER_BYTES: usize = 16;
/// A redo block's first-record field when no record starts in the block.
pub const NO_RECORD_START: u16 = 0xFFFF;
/// The largest redo block (its offsets must fit below [`NO_RECORD_START`]).
pub const REDO_BLOCK_MAX_BYTES: u32 = 32 << 10;
/// The fewest redo blocks a redo area may have.
pub const REDO_AREA_MIN_BLOCKS: u64 = 8;

/// The size of a change record carrying `change_len` bytes of change vector.
pub fn change_record_bytes(change_len: usize) -> u64 {
    (RECORD_HEADER_BYTES + change_len) as u64
}

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

impl RedoConfig {
    pub(super) fn area_blocks(&self) -> u64 {
        (self.end - self.start) / u64::from(self.block_bytes)
    }

    pub(super) fn payload_bytes(&self) -> usize {
        self.block_bytes as usize - REDO_BLOCK_HEADER_BYTES
    }

    /// Check the configuration against itself and against `file`.
    pub(super) fn validate(&self, file: &DeviceFile) -> Result<(), OltpError> {
        let path = file.path().display();
        let bb = self.block_bytes;
        let sector = file.geometry().logical_sector_bytes;
        if !(512..=REDO_BLOCK_MAX_BYTES).contains(&bb) || !bb.is_power_of_two() {
            return Err(OltpError::Usage(format!(
                "redo block of {bb} bytes: give a power of two from 512 to {REDO_BLOCK_MAX_BYTES}"
            )));
        }
        if !bb.is_multiple_of(sector) {
            return Err(OltpError::Usage(format!(
                "redo block of {bb} bytes is not a multiple of {path}'s {sector}-byte logical sector; use the sector size"
            )));
        }
        let bbu = u64::from(bb);
        if !self.start.is_multiple_of(bbu)
            || !self.end.is_multiple_of(bbu)
            || self.end <= self.start
        {
            return Err(OltpError::Usage(format!(
                "redo area {}..{} of {path} is empty or not aligned to the {bb}-byte redo block",
                self.start, self.end
            )));
        }
        let size = file.geometry().size_bytes;
        if self.end > size {
            return Err(OltpError::Usage(format!(
                "redo area ends at byte {} but {path} holds only {size} bytes; give a larger redo file",
                self.end
            )));
        }
        let area_payload = (self.area_blocks().saturating_sub(1)) * self.payload_bytes() as u64;
        if self.area_blocks() < REDO_AREA_MIN_BLOCKS || area_payload < 2 * MAX_RECORD_BYTES as u64 {
            return Err(OltpError::Usage(format!(
                "redo area of {} bytes on {path} is too small: give at least {} bytes",
                self.end - self.start,
                (REDO_AREA_MIN_BLOCKS * bbu).max(
                    (2 * MAX_RECORD_BYTES as u64).div_ceil(self.payload_bytes() as u64 + 1) * bbu
                        + 2 * bbu
                )
            )));
        }
        let min_buffer = LOG_BUFFER_MIN_BYTES.max(4 * MAX_RECORD_BYTES);
        if self.log_buffer_bytes < min_buffer {
            return Err(OltpError::Usage(format!(
                "log buffer of {} bytes is too small: give at least {min_buffer} bytes",
                self.log_buffer_bytes
            )));
        }
        if self.max_write_bytes < bbu {
            return Err(OltpError::Usage(format!(
                "largest redo write of {} bytes is smaller than the {bb}-byte redo block",
                self.max_write_bytes
            )));
        }
        Ok(())
    }
}

pub(super) fn record_header(
    kind: u8,
    change_len: usize,
    block: BlockId,
    version: u64,
) -> [u8; RECORD_HEADER_BYTES] {
    let mut h = [0u8; RECORD_HEADER_BYTES];
    h[0] = kind;
    let len = u32::try_from(RECORD_HEADER_BYTES + change_len)
        .expect("invariant: a record is at most MAX_RECORD_BYTES");
    h[4..8].copy_from_slice(&len.to_le_bytes());
    h[8..16].copy_from_slice(&block.to_le_bytes());
    h[16..24].copy_from_slice(&version.to_le_bytes());
    h
}

/// The CRC-32C of a redo block: the full dataset id, then the block without its CRC field.
pub(super) fn block_crc(dataset: u64, block: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&dataset.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &block[..12]);
    crc32c::crc32c_append(crc, &block[REDO_BLOCK_HEADER_BYTES..])
}
