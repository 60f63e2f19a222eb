//! Verify: every block read back and checked, and the redo log read back
//! and set against the data files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use cairn_io::host::Host;
use cairn_io::{
    new_file_engine, AlignedBuf, Completion, DeviceFile, DeviceId, EngineKind, Op, OpenMode,
    Request, SubmitError,
};
use serde::{Deserialize, Serialize};

use crate::block::{self, KeyMap};
use crate::layout::{Layout, Segment, Shape, EXTENT_BYTES};
use crate::OltpError;

use super::checks::check_distinct;
use super::header::{DatasetState, RedoHeader};
use super::open::{open_loaded, open_redo};
use super::progress::{Meter, Progress};
use super::setup::{key_map, IO_DEPTH};

/// Problems verify lists (it counts them all).
const PROBLEMS_LISTED_MAX: usize = 1000;

/// What verify finds wrong with one block: the block itself, or where the
/// index and the key map disagree with it. One line, after the block's place.
#[derive(Debug, thiserror::Error)]
enum BlockFault {
    #[error(transparent)]
    Block(#[from] block::BlockError),
    #[error("holds key {found}, but the index maps key {want} to this block")]
    KeyNotMapped { found: u64, want: u64 },
    #[error("maps key {key} to table block {found}; the key map says {want}")]
    IndexEntry { key: u64, found: u64, want: u64 },
    #[error("ends before key {key} (holds {slot} keys, should hold {keys})")]
    IndexShort { key: u64, slot: usize, keys: u64 },
    #[error("holds more than its {keys} keys")]
    IndexLong { keys: u64 },
}

/// One block that is not as it should be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockProblem {
    pub target: String,
    pub offset_bytes: u64,
    /// 1-based, as SLOB names its users.
    pub schema: u32,
    pub segment: String,
    pub number: u64,
    pub problem: String,
}

/// What verify found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub dataset_id: u64,
    pub shape: Shape,
    pub state: DatasetState,
    pub blocks_checked: u64,
    /// Sum over table blocks of their version: the block changes that reached the data files.
    pub table_versions: u64,
    pub problems_total: u64,
    /// The first problems, in block order (at most 1000).
    pub problems: Vec<BlockProblem>,
    /// The redo log read back and set against the data files.
    #[serde(default)]
    pub redo: RedoCheck,
    /// The engine the data files were read with (`io_uring`, `sync`).
    #[serde(default)]
    pub engine: String,
}

/// What the redo log holds, set against the data files: after a crash, the
/// changes an instance recovery would re-apply.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RedoCheck {
    /// Records read back from the log (changes and commits).
    pub records: u64,
    pub commits: u64,
    /// Table blocks whose newest change in the log is newer than the block on
    /// disk: none after a clean shutdown; after a crash, changes that were
    /// committed (or at least logged) but not yet written by the writer.
    pub blocks_behind: u64,
    /// The first of them, in block order (at most 20).
    pub behind: Vec<BlockProblem>,
    /// Why the log could not be read back, if it could not.
    pub unreadable: Option<String>,
}

/// Blocks behind the redo listed in a verify report.
const BEHIND_LISTED_MAX: usize = 20;

/// Read every block of the dataset and check it: the content of every table
/// and scan block ([`block::check_content`]), and every index leaf against
/// the key map. Opens read-only; whatever state the headers record (a run
/// that crashed leaves `running`), every block is checked.
pub fn verify(
    targets: &[PathBuf],
    redo: &Path,
    host: &Host,
    engine_kind: EngineKind,
    progress: Option<Progress<'_>>,
    interrupted: &AtomicBool,
) -> Result<VerifyReport, OltpError> {
    check_distinct(targets, redo)?;
    let (data, header) = open_loaded(targets, OpenMode::READ, host)?;
    let (redo_dev, redo_header) = open_redo(redo, header.dataset, OpenMode::READ, host)?;
    let (redo_max, redo_check) = read_back_log(&redo_dev, &redo_header);
    drop(redo_dev);
    let layout = Layout::new(header.shape, targets.len());
    let keymaps: Vec<KeyMap> = (0..header.shape.schemas)
        .map(|schema| key_map(header.dataset, schema, &header.shape))
        .collect();
    let mut engine = new_file_engine(engine_kind, IO_DEPTH)
        .map_err(|e| OltpError::os("starting an I/O engine for verify", e))?;
    let ids: Vec<DeviceId> = data.into_iter().map(|d| engine.attach(d)).collect();
    let bar = Meter::new(progress, layout.total_blocks() * layout.block_bytes());
    let mut checker = Checker {
        layout,
        dataset: header.dataset,
        keymaps,
        paths: targets,
        redo_max,
        report: VerifyReport {
            dataset_id: header.dataset,
            shape: header.shape,
            state: header.state,
            blocks_checked: 0,
            table_versions: 0,
            problems_total: 0,
            problems: Vec::new(),
            redo: redo_check,
            engine: engine.name().to_string(),
        },
    };
    let extents = layout.total_blocks().div_ceil(layout.extent_blocks());
    let mut next_submit = 0u64;
    let mut next_check = 0u64;
    let mut ready: BTreeMap<u64, Completion> = BTreeMap::new();
    let mut free: Vec<AlignedBuf> = Vec::new();
    while next_check < extents {
        if interrupted.load(Ordering::SeqCst) {
            return Err(OltpError::Interrupted);
        }
        while next_submit < extents && engine.in_flight() + ready.len() < IO_DEPTH {
            let first = next_submit * layout.extent_blocks();
            let count = layout.extent_blocks().min(layout.total_blocks() - first);
            let mut buf = free
                .pop()
                .unwrap_or_else(|| AlignedBuf::zeroed(EXTENT_BYTES as usize));
            buf.set_len((count * layout.block_bytes()) as usize);
            let at = layout.locate(first);
            let request = Request {
                device: ids[at.target],
                tag: next_submit,
                op: Op::Read {
                    offset_bytes: at.offset_bytes,
                    buf,
                },
            };
            if let Err(SubmitError::QueueFull(_)) = engine.submit(request) {
                return Err(OltpError::Usage(
                    "verify's I/O queue refused a read below its depth".into(),
                ));
            }
            next_submit += 1;
        }
        // Check extents in order, so problems come out in block order.
        while let Some(c) = ready.remove(&next_check) {
            let first = next_check * layout.extent_blocks();
            let count = layout.extent_blocks().min(layout.total_blocks() - first);
            match (&c.result, &c.buf) {
                (Ok(_), Some(buf)) => checker.check_extent(first, buf),
                (Err(e), _) => checker.unreadable(first, count, &e.to_string()),
                (Ok(_), None) => checker.unreadable(first, count, "the read returned no buffer"),
            }
            bar.add(count * layout.block_bytes());
            if let Some(b) = c.buf {
                free.push(b);
            }
            next_check += 1;
        }
        if next_check >= extents {
            break;
        }
        if !ready.contains_key(&next_check) {
            engine
                .wait(1)
                .map_err(|e| OltpError::io("verifying the dataset", e))?;
            while let Some(c) = engine.pop_completion() {
                ready.insert(c.tag, c);
            }
        }
    }
    Ok(checker.report)
}

struct Checker<'a> {
    layout: Layout,
    dataset: u64,
    keymaps: Vec<KeyMap>,
    paths: &'a [PathBuf],
    /// Per data block, the newest version a change record in the log carries.
    redo_max: std::collections::HashMap<u64, u64>,
    report: VerifyReport,
}

/// Read the redo log back (`scan_log`). A log that cannot be read does not
/// stop verify: the data files are checked anyway and the reason is reported.
fn read_back_log(
    dev: &DeviceFile,
    header: &RedoHeader,
) -> (std::collections::HashMap<u64, u64>, RedoCheck) {
    let cfg = crate::redo::RedoConfig {
        log_buffer_bytes: 1 << 20,
        start: header.log_start,
        end: header.log_end,
        block_bytes: header.block_bytes,
        max_write_bytes: dev
            .geometry()
            .max_transfer_aligned_bytes()
            .max(u64::from(header.block_bytes)),
        dataset: header.dataset,
    };
    match crate::redo::scan_log(dev, &cfg) {
        Ok(scan) => (
            scan.max_version,
            RedoCheck {
                records: scan.records,
                commits: scan.commit_records,
                ..RedoCheck::default()
            },
        ),
        Err(e) => (
            std::collections::HashMap::new(),
            RedoCheck {
                unreadable: Some(e.to_string()),
                ..RedoCheck::default()
            },
        ),
    }
}

impl Checker<'_> {
    fn check_extent(&mut self, first: u64, buf: &[u8]) {
        let bs = self.layout.block_bytes() as usize;
        for (i, b) in buf.chunks_exact(bs).enumerate() {
            let id = first + i as u64;
            if let Err(problem) = self.check_block(id, b) {
                self.problem(id, problem.to_string());
            }
            self.report.blocks_checked += 1;
        }
    }

    fn check_block(&mut self, id: u64, buf: &[u8]) -> Result<(), BlockFault> {
        let at = self
            .layout
            .block_ref(id)
            .expect("invariant: verify reads blocks of the dataset");
        match at.segment {
            Segment::Table => {
                let row = block::check_content(buf, at, self.dataset)?;
                let want = self.keymaps[at.schema as usize].key_of(at.number);
                if row.key != want {
                    return Err(BlockFault::KeyNotMapped {
                        found: row.key,
                        want,
                    });
                }
                self.report.table_versions += row.version;
                if let Some(&logged) = self.redo_max.get(&id) {
                    if logged > row.version {
                        self.behind(id, row.version, logged);
                    }
                }
                Ok(())
            }
            Segment::Scan => block::check_content(buf, at, self.dataset)
                .map(|_| ())
                .map_err(BlockFault::from),
            Segment::Index => {
                block::check(buf, at, self.dataset)?;
                let kpl = self.layout.keys_per_leaf();
                let lo = at.number * kpl;
                let hi = (lo + kpl).min(self.layout.shape.table_blocks);
                for (slot, key) in (lo..hi).enumerate() {
                    let want = self.keymaps[at.schema as usize].block_of(key);
                    match block::index_entry(buf, slot) {
                        Some(found) if found == want => {}
                        Some(found) => return Err(BlockFault::IndexEntry { key, found, want }),
                        None => {
                            return Err(BlockFault::IndexShort {
                                key,
                                slot,
                                keys: hi - lo,
                            })
                        }
                    }
                }
                if block::index_entry(buf, (hi - lo) as usize).is_some() {
                    return Err(BlockFault::IndexLong { keys: hi - lo });
                }
                Ok(())
            }
        }
    }

    fn behind(&mut self, id: u64, on_disk: u64, logged: u64) {
        let check = &mut self.report.redo;
        check.blocks_behind += 1;
        if check.behind.len() >= BEHIND_LISTED_MAX {
            return;
        }
        let at = self
            .layout
            .block_ref(id)
            .expect("invariant: blocks of the dataset");
        let loc = self.layout.locate(id);
        check.behind.push(BlockProblem {
            target: self.paths[loc.target].display().to_string(),
            offset_bytes: loc.offset_bytes,
            schema: at.schema + 1,
            segment: at.segment.name().to_string(),
            number: at.number,
            problem: format!(
                "version {on_disk} on disk; the redo holds version {logged} (a change instance recovery would re-apply)"
            ),
        });
    }

    fn unreadable(&mut self, first: u64, count: u64, why: &str) {
        for id in first..first + count {
            self.problem(id, format!("unreadable: {why}"));
            self.report.blocks_checked += 1;
        }
    }

    fn problem(&mut self, id: u64, problem: String) {
        self.report.problems_total += 1;
        if self.report.problems.len() >= PROBLEMS_LISTED_MAX {
            return;
        }
        let at = self
            .layout
            .block_ref(id)
            .expect("invariant: problems are of blocks of the dataset");
        let loc = self.layout.locate(id);
        self.report.problems.push(BlockProblem {
            target: self.paths[loc.target].display().to_string(),
            offset_bytes: loc.offset_bytes,
            schema: at.schema + 1,
            segment: at.segment.name().to_string(),
            number: at.number,
            problem,
        });
    }
}
