//! Data targets and the redo file: setup (load), open for a run, verify.
//! (Stub: owned by the data helper.)

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use cairn_io::host::Host;
use cairn_io::DeviceFile;
use serde::{Deserialize, Serialize};

use super::layout::{Layout, Shape};
use super::OltpError;
use crate::result::TargetInfo;

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

pub struct SetupOptions<'a> {
    pub host: &'a Host,
    pub shape: Shape,
    /// LOAD_PARALLEL_DEGREE: loader threads.
    pub parallel: u32,
    /// Overwrite targets that carry someone else's data (a filesystem, LVM, …).
    pub force: bool,
    /// A progress bar on the terminal.
    pub progress: bool,
    pub seed: u64,
    /// Size of a redo file that setup creates (an existing one keeps its size).
    pub redo_bytes: u64,
}

/// What setup did, for its throughput report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub dataset_id: u64,
    pub shape: Shape,
    pub parallel: u32,
    pub blocks: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub mb_per_s: f64,
    pub blocks_per_s: f64,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub targets: Vec<TargetInfo>,
    pub redo: TargetInfo,
    /// Paths that setup created (missing files).
    pub created: Vec<String>,
}

/// Load `shape` onto `targets` and format `redo`.
pub fn setup(
    _targets: &[PathBuf],
    _redo: &Path,
    _opts: &SetupOptions,
    _interrupted: &AtomicBool,
) -> Result<LoadReport, OltpError> {
    unimplemented!("data helper")
}

/// A loaded dataset, open read-write for a run.
#[derive(Debug)]
pub struct Dataset {
    pub id: u64,
    pub layout: Layout,
    /// In the order of the loaded targets.
    pub data: Vec<DeviceFile>,
    pub data_paths: Vec<PathBuf>,
    pub redo: DeviceFile,
    pub redo_path: PathBuf,
    /// The byte range of the redo file that holds the log (after its header).
    pub redo_start: u64,
    pub redo_end: u64,
    /// The state the headers recorded when the dataset was opened.
    pub state_at_open: DatasetState,
}

/// What a run expects of the dataset.
pub struct OpenOptions<'a> {
    pub host: &'a Host,
    pub block_size: u32,
    pub table_blocks: u64,
    pub scan_blocks: u64,
    /// Schemas the run uses: at most the number loaded.
    pub schemas: u32,
}

/// Open a loaded dataset and check it is the one the run expects.
pub fn open(_targets: &[PathBuf], _redo: &Path, _opts: &OpenOptions) -> Result<Dataset, OltpError> {
    unimplemented!("data helper")
}

impl Dataset {
    /// Record `state` in every data target's header (and flush).
    pub fn mark(&mut self, _state: DatasetState) -> Result<(), OltpError> {
        unimplemented!("data helper")
    }
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
}

/// Read every block of the dataset and check it.
pub fn verify(
    _targets: &[PathBuf],
    _redo: &Path,
    _host: &Host,
    _progress: bool,
    _interrupted: &AtomicBool,
) -> Result<VerifyReport, OltpError> {
    unimplemented!("data helper")
}
