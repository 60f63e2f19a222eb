//! Reading a redo area back: the valid redo blocks of a dataset, in
//! continuous runs, and the whole records in them (verify uses it).

use std::collections::HashMap;

use cairn_io::{DeviceFile, FileEngine, IoEngine};

use crate::layout::BlockId;
use crate::OltpError;

use super::format::{
    block_crc, RedoConfig, COMMIT_RECORD_BYTES, MAX_RECORD_BYTES, NO_RECORD_START,
    RECORD_HEADER_BYTES, RECORD_KIND_CHANGE, RECORD_KIND_COMMIT, REDO_BLOCK_HEADER_BYTES,
};

/// What [`scan_log`] found in a redo area.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogScan {
    /// Redo blocks of this dataset with a good checksum.
    pub blocks: u64,
    /// Continuous runs of such blocks (consecutive positions and sequence numbers).
    pub runs: u64,
    /// Whole records found (change + commit).
    pub records: u64,
    pub commit_records: u64,
    pub change_records: u64,
    /// Per data block, the highest version a change record carries.
    pub max_version: HashMap<BlockId, u64>,
}

/// Read the redo area back and parse every valid redo block of this dataset
/// and the records in them.
///
/// A block counts when its checksum (seeded with the dataset id) is good and
/// its dataset bits match. Records are trusted only when all their bytes come
/// from one continuous run of blocks — each at the next position (wrapping at
/// the area's end) with the next sequence number. So a record is dropped when
/// its beginning or end was overwritten by a later cycle of the log, was never
/// written (a crash), or belongs to another run of the log writer; the newest
/// records, at the head of the log, are always whole. Versions only grow, so
/// the per-block maximum is right even where older cycles survive.
pub fn scan_log(file: &DeviceFile, cfg: &RedoConfig) -> Result<LogScan, OltpError> {
    cfg.validate(file)?;
    let path = file.path().display().to_string();
    let clone = file
        .try_clone()
        .map_err(|e| OltpError::os(format!("cannot reopen the redo file {path}"), e))?;
    let mut engine = cairn_io::sync_engine::SyncEngine::new(1);
    let device = engine.attach(clone);
    let bb = u64::from(cfg.block_bytes);
    let area = cfg.area_blocks();
    let max_transfer = u64::from(
        engine
            .geometry(device)
            .map_or(1 << 20, |g| g.max_transfer_bytes),
    );
    let chunk_blocks = ((1u64 << 20).min(max_transfer) / bb).max(1);
    let mut parser = Parser::new(cfg);
    let mut first_blocks: Vec<Vec<u8>> = Vec::new();
    let mut b = 0u64;
    while b < area {
        let n = chunk_blocks.min(area - b);
        let offset = cfg.start + b * bb;
        let buf = engine
            .read_at(device, offset, (n * bb) as usize)
            .map_err(|e| OltpError::io(format!("reading the redo file {path}"), e))?;
        for j in 0..n as usize {
            let block = &buf[j * bb as usize..(j + 1) * bb as usize];
            // Keep the head of the area, to finish a record that straddles the wrap.
            if b + (j as u64)
                < (MAX_RECORD_BYTES as u64).div_ceil(bb - REDO_BLOCK_HEADER_BYTES as u64) + 1
            {
                first_blocks.push(block.to_vec());
            }
            parser.block(block, false);
        }
        b += n;
    }
    // Carry a record pending at the area's end on into its first blocks, if the
    // run continues there; stop as soon as it completes (the rest was parsed).
    if parser.head_seq.is_some()
        && parser.head_seq == parser.prev_seq.and_then(|s| s.checked_add(1))
    {
        // The run at the area's end goes on at its start: one run, not two.
        parser.scan.runs = parser.scan.runs.saturating_sub(1).max(1);
    }
    for block in &first_blocks {
        if !parser.block(block, true) {
            break;
        }
    }
    Ok(parser.scan)
}

/// A streaming parser of redo blocks in position order.
struct Parser {
    dataset: u64,
    bb: usize,
    /// The previous block's sequence number, if it was valid.
    prev_seq: Option<u64>,
    /// The sequence number of the area's first block, if it was valid.
    head_seq: Option<u64>,
    /// Blocks looked at (valid or not) in the first pass.
    seen: u64,
    /// In step with the record stream (at a record start or inside one).
    synced: bool,
    /// Bytes of the record being assembled.
    partial: Vec<u8>,
    scan: LogScan,
}

impl Parser {
    fn new(cfg: &RedoConfig) -> Self {
        Self {
            dataset: cfg.dataset,
            bb: cfg.block_bytes as usize,
            prev_seq: None,
            head_seq: None,
            seen: 0,
            synced: false,
            partial: Vec::new(),
            scan: LogScan::default(),
        }
    }

    fn desync(&mut self) {
        self.synced = false;
        self.partial.clear();
    }

    /// Parse one block. In `finishing` mode (past the wrap), only the pending
    /// record is completed; returns whether to go on feeding blocks.
    fn block(&mut self, block: &[u8], finishing: bool) -> bool {
        if !self.follow(block, finishing) {
            return false;
        }
        let first = u16::from_le_bytes([block[2], block[3]]);
        let Some(at) = self.read_from(first) else {
            return true;
        };
        self.records(block, first, at, finishing)
    }

    /// Check the block (its checksum and dataset) and follow the run of
    /// blocks by their sequence numbers; whether its records are to be read.
    fn follow(&mut self, block: &[u8], finishing: bool) -> bool {
        let crc = u32::from_le_bytes([block[12], block[13], block[14], block[15]]);
        let dataset = u16::from_le_bytes([block[0], block[1]]);
        let valid = dataset == self.dataset as u16 && crc == block_crc(self.dataset, block);
        let head = !finishing && self.seen == 0;
        if !finishing {
            self.seen += 1;
        }
        if !valid {
            self.prev_seq = None;
            self.desync();
            return false;
        }
        let seq = u64::from_le_bytes(block[4..12].try_into().expect("invariant: 8 bytes"));
        let continues = self.prev_seq.is_some_and(|p| p.checked_add(1) == Some(seq));
        self.prev_seq = Some(seq);
        if head {
            self.head_seq = Some(seq);
        }
        if finishing {
            if !continues || !self.synced || self.partial.is_empty() {
                return false;
            }
        } else {
            self.scan.blocks += 1;
            if !continues {
                self.scan.runs += 1;
                self.desync();
            }
        }
        true
    }

    /// Where in the block the records are read from: past its header when in
    /// step with the stream, else at the first record start its header names
    /// (which puts the parser in step). `None`: out of step, and no record
    /// starts in the block.
    fn read_from(&mut self, first: u16) -> Option<usize> {
        if self.synced {
            return Some(REDO_BLOCK_HEADER_BYTES);
        }
        if first == NO_RECORD_START
            || usize::from(first) < REDO_BLOCK_HEADER_BYTES
            || usize::from(first) >= self.bb
        {
            return None;
        }
        self.synced = true;
        Some(usize::from(first))
    }

    /// The records of the block from `at` on (`first`: where its header
    /// says the first record starts); returns whether to go on feeding
    /// blocks.
    fn records(&mut self, block: &[u8], first: u16, mut at: usize, finishing: bool) -> bool {
        let mut seen_start = false;
        while at < self.bb {
            if self.partial.is_empty() {
                if block[at] == 0 {
                    // Padding: the rest of the block; the next write starts a record.
                    if !seen_start && first != NO_RECORD_START {
                        self.desync();
                    }
                    return true;
                }
                if !seen_start {
                    if usize::from(first) != at {
                        self.desync();
                        return true;
                    }
                    seen_start = true;
                }
                if finishing {
                    return false;
                }
            }
            // Take bytes up to the header, then up to the record's length.
            let want = if self.partial.len() < RECORD_HEADER_BYTES {
                RECORD_HEADER_BYTES
            } else {
                u32::from_le_bytes(self.partial[4..8].try_into().expect("invariant: 4 bytes"))
                    as usize
            };
            let take = (want - self.partial.len()).min(self.bb - at);
            self.partial.extend_from_slice(&block[at..at + take]);
            at += take;
            if self.partial.len() == RECORD_HEADER_BYTES
                && want == RECORD_HEADER_BYTES
                && !self.header_ok()
            {
                self.desync();
                return true;
            }
            let len = if self.partial.len() >= RECORD_HEADER_BYTES {
                u32::from_le_bytes(self.partial[4..8].try_into().expect("invariant: 4 bytes"))
                    as usize
            } else {
                usize::MAX
            };
            if self.partial.len() == len {
                self.record();
                if finishing {
                    return false;
                }
            }
        }
        if !seen_start && first != NO_RECORD_START && !finishing {
            // The header says a record starts here, but none did.
            self.desync();
        }
        true
    }

    /// Whether the record header in `partial` is one a log writer writes: a
    /// known kind, of a length that kind can have.
    fn header_ok(&self) -> bool {
        let len =
            u32::from_le_bytes(self.partial[4..8].try_into().expect("invariant: 4 bytes")) as usize;
        let kind = self.partial[0];
        match kind {
            RECORD_KIND_CHANGE => (RECORD_HEADER_BYTES..=MAX_RECORD_BYTES).contains(&len),
            RECORD_KIND_COMMIT => len == COMMIT_RECORD_BYTES,
            _ => false,
        }
    }

    /// Count the whole record in `partial` and start the next.
    fn record(&mut self) {
        let r = &self.partial;
        self.scan.records += 1;
        if r[0] == RECORD_KIND_COMMIT {
            self.scan.commit_records += 1;
        } else {
            self.scan.change_records += 1;
            let block = u64::from_le_bytes(r[8..16].try_into().expect("invariant: 8 bytes"));
            let version = u64::from_le_bytes(r[16..24].try_into().expect("invariant: 8 bytes"));
            let v = self.scan.max_version.entry(block).or_insert(version);
            *v = (*v).max(version);
        }
        self.partial.clear();
    }
}
