//! The dataset and redo headers: their bytes (see the table in the module
//! above), their checks, and the header I/O on the targets.

use std::path::PathBuf;

use cairn_io::{new_file_engine, AlignedBuf, DeviceFile, DeviceId, EngineKind, FileEngine};
use serde::{Deserialize, Serialize};

use crate::layout::Shape;
use crate::OltpError;

use super::checks::validate_shape;

/// Where a dataset is in its life, as its headers record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetState {
    /// Setup began and did not finish: not usable.
    Loading,
    /// Loaded, or the last run shut down cleanly (every change on disk).
    Clean,
    /// A run is open, or one ended without shutting down (a crash).
    Running,
}

impl DatasetState {
    fn code(self) -> u32 {
        match self {
            DatasetState::Loading => 1,
            DatasetState::Clean => 2,
            DatasetState::Running => 3,
        }
    }

    fn from_code(code: u32) -> Option<Self> {
        match code {
            1 => Some(DatasetState::Loading),
            2 => Some(DatasetState::Clean),
            3 => Some(DatasetState::Running),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DatasetState::Loading => "loading",
            DatasetState::Clean => "clean",
            DatasetState::Running => "running",
        }
    }
}

/// Bytes of a dataset or redo header (one I/O; a multiple of any logical sector).
pub(super) const HEADER_IO_BYTES: usize = 4096;
const HEADER_CRC_AT: usize = HEADER_IO_BYTES - 4;
const TARGET_MAGIC: &[u8; 10] = b"CAIRNOLTP1";
const REDO_MAGIC: &[u8; 10] = b"CAIRNREDO1";
const HEADER_FORMAT_VERSION: u16 = 1;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct TargetHeader {
    pub(super) dataset: u64,
    pub(super) shape: Shape,
    pub(super) targets: u32,
    pub(super) index: u32,
    pub(super) state: DatasetState,
    pub(super) loaded_unix_s: u64,
}

/// Why a first block is not a usable header.
pub(super) enum HeaderProblem {
    /// Not ours at all: no magic.
    Absent,
    /// Ours, but damaged or of a format this Cairn does not read.
    Damaged(String),
}

impl TargetHeader {
    pub(super) fn encode(&self) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(HEADER_IO_BYTES);
        b[0..10].copy_from_slice(TARGET_MAGIC);
        b[10..12].copy_from_slice(&HEADER_FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.state.code().to_le_bytes());
        b[16..24].copy_from_slice(&self.dataset.to_le_bytes());
        b[24..28].copy_from_slice(&self.shape.block_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.shape.schemas.to_le_bytes());
        b[32..40].copy_from_slice(&self.shape.table_blocks.to_le_bytes());
        b[40..48].copy_from_slice(&self.shape.scan_blocks.to_le_bytes());
        b[48..52].copy_from_slice(&u32::from(self.shape.obfuscate).to_le_bytes());
        b[52..56].copy_from_slice(&self.targets.to_le_bytes());
        b[56..60].copy_from_slice(&self.index.to_le_bytes());
        b[64..72].copy_from_slice(&self.loaded_unix_s.to_le_bytes());
        seal_header(&mut b);
        b
    }

    pub(super) fn decode(b: &[u8]) -> Result<Self, HeaderProblem> {
        check_header(b, TARGET_MAGIC)?;
        let state = DatasetState::from_code(le_u32(b, 12))
            .ok_or_else(|| HeaderProblem::Damaged(format!("unknown state {}", le_u32(b, 12))))?;
        let flags = le_u32(b, 48);
        let header = Self {
            dataset: le_u64(b, 16),
            shape: Shape {
                block_size: le_u32(b, 24),
                schemas: le_u32(b, 28),
                table_blocks: le_u64(b, 32),
                scan_blocks: le_u64(b, 40),
                obfuscate: flags & 1 != 0,
            },
            targets: le_u32(b, 52),
            index: le_u32(b, 56),
            state,
            loaded_unix_s: le_u64(b, 64),
        };
        validate_shape(&header.shape).map_err(|e| HeaderProblem::Damaged(e.to_string()))?;
        if header.targets == 0 || header.index >= header.targets {
            return Err(HeaderProblem::Damaged(format!(
                "target {} of {}",
                header.index, header.targets
            )));
        }
        Ok(header)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct RedoHeader {
    pub(super) dataset: u64,
    pub(super) block_bytes: u32,
    pub(super) size_bytes: u64,
    pub(super) log_start: u64,
    pub(super) log_end: u64,
}

impl RedoHeader {
    pub(super) fn encode(&self) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(HEADER_IO_BYTES);
        b[0..10].copy_from_slice(REDO_MAGIC);
        b[10..12].copy_from_slice(&HEADER_FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.block_bytes.to_le_bytes());
        b[16..24].copy_from_slice(&self.dataset.to_le_bytes());
        b[24..32].copy_from_slice(&self.size_bytes.to_le_bytes());
        b[32..40].copy_from_slice(&self.log_start.to_le_bytes());
        b[40..48].copy_from_slice(&self.log_end.to_le_bytes());
        seal_header(&mut b);
        b
    }

    pub(super) fn decode(b: &[u8]) -> Result<Self, HeaderProblem> {
        check_header(b, REDO_MAGIC)?;
        let h = Self {
            block_bytes: le_u32(b, 12),
            dataset: le_u64(b, 16),
            size_bytes: le_u64(b, 24),
            log_start: le_u64(b, 32),
            log_end: le_u64(b, 40),
        };
        if !(512..=65536).contains(&h.block_bytes)
            || !h.block_bytes.is_power_of_two()
            || h.log_start >= h.log_end
            || h.log_end > h.size_bytes
        {
            return Err(HeaderProblem::Damaged("an impossible log range".into()));
        }
        Ok(h)
    }
}

fn seal_header(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[..HEADER_CRC_AT]);
    b[HEADER_CRC_AT..HEADER_IO_BYTES].copy_from_slice(&crc.to_le_bytes());
}

fn check_header(b: &[u8], magic: &[u8; 10]) -> Result<(), HeaderProblem> {
    if b.len() < HEADER_IO_BYTES || &b[0..10] != magic {
        return Err(HeaderProblem::Absent);
    }
    if le_u32(b, HEADER_CRC_AT) != crc32c::crc32c(&b[..HEADER_CRC_AT]) {
        return Err(HeaderProblem::Damaged("bad checksum".into()));
    }
    let format = u16::from_le_bytes([b[10], b[11]]);
    if format != HEADER_FORMAT_VERSION {
        return Err(HeaderProblem::Damaged(format!(
            "header format {format}; this Cairn reads {HEADER_FORMAT_VERSION}"
        )));
    }
    Ok(())
}

/// Header reads and writes on a set of open devices, one at a time, through a
/// second handle of each (the caller keeps the exclusive one). Always the
/// sync engine, whatever `--engine` says: a few 4 KiB writes, each flushed
/// before the next, gain nothing from a ring, and `--engine sync` (the one
/// that matters when io_uring misbehaves) is honoured either way.
pub(super) struct HeaderIo {
    engine: Box<dyn FileEngine>,
    ids: Vec<DeviceId>,
    paths: Vec<PathBuf>,
}

impl HeaderIo {
    pub(super) fn new(devices: &[DeviceFile], paths: &[PathBuf]) -> Result<Self, OltpError> {
        let mut engine = new_file_engine(EngineKind::Sync, 1)
            .map_err(|e| OltpError::os("starting an I/O engine for the headers", e))?;
        let mut ids = Vec::with_capacity(devices.len());
        for (d, p) in devices.iter().zip(paths) {
            let clone = d.try_clone().map_err(|e| {
                OltpError::os(format!("duplicating the handle of {}", p.display()), e)
            })?;
            ids.push(engine.attach(clone));
        }
        Ok(Self {
            engine,
            ids,
            paths: paths.to_vec(),
        })
    }

    pub(super) fn read(&mut self, i: usize) -> Result<AlignedBuf, OltpError> {
        self.engine
            .read_at(self.ids[i], 0, HEADER_IO_BYTES)
            .map_err(|e| {
                OltpError::io(
                    format!("reading the header of {}", self.paths[i].display()),
                    e,
                )
            })
    }

    pub(super) fn write(&mut self, i: usize, buf: AlignedBuf) -> Result<(), OltpError> {
        self.engine
            .write_at(self.ids[i], 0, buf, false)
            .map_err(|e| {
                OltpError::io(
                    format!("writing the header of {}", self.paths[i].display()),
                    e,
                )
            })
    }

    pub(super) fn flush_all(&mut self) -> Result<(), OltpError> {
        for i in 0..self.ids.len() {
            self.engine
                .flush(self.ids[i])
                .map_err(|e| OltpError::io(format!("flushing {}", self.paths[i].display()), e))?;
        }
        Ok(())
    }
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::layout::HEADER_BYTES;

    #[test]
    fn headers_round_trip_and_refuse_damage() {
        let h = TargetHeader {
            dataset: 0xABCD,
            shape: Shape {
                block_size: 8192,
                schemas: 2,
                table_blocks: 1000,
                scan_blocks: 10,
                obfuscate: true,
            },
            targets: 3,
            index: 1,
            state: DatasetState::Running,
            loaded_unix_s: 1_700_000_000,
        };
        let mut b = h.encode();
        assert_eq!(TargetHeader::decode(&b).ok(), Some(h));
        b[30] ^= 1;
        assert!(matches!(
            TargetHeader::decode(&b),
            Err(HeaderProblem::Damaged(_))
        ));
        assert!(matches!(
            TargetHeader::decode(&[0u8; 4096]),
            Err(HeaderProblem::Absent)
        ));
        let r = RedoHeader {
            dataset: 7,
            block_bytes: 512,
            size_bytes: 9 << 20,
            log_start: HEADER_BYTES,
            log_end: 9 << 20,
        };
        assert_eq!(RedoHeader::decode(&r.encode()).ok(), Some(r));
        assert!(matches!(
            RedoHeader::decode(&h.encode()),
            Err(HeaderProblem::Absent)
        ));
    }
}
