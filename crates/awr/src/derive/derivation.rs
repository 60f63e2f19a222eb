//! What a derivation is asked (its options) and what it gives: the I/O
//! classes, the totals the report states, the notes; and the bounds they
//! are held to.

use serde::{Deserialize, Serialize};

use crate::number::parse_size_bytes;

/// Oracle's default `db_block_size`, used when neither the options nor the
/// report give one.
pub const DEFAULT_BLOCK_SIZE_BYTES: u64 = 8 * 1024;
/// The largest multiblock read when the report lists no
/// `db_file_multiblock_read_count`: the auto-tuned value is 1 MiB worth of blocks.
pub const DEFAULT_MULTIBLOCK_READ_MAX_BYTES: u64 = 1024 * 1024;
/// Transfer sizes are rounded to this: Cairn's vdbench requires multiples of 512.
pub const XFER_ALIGN_BYTES: u64 = 512;
/// The largest transfer Cairn's vdbench accepts.
pub const XFER_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Below this a class would not issue one I/O in a whole run: it is left out.
pub const RATE_MIN_PER_S: f64 = 0.001;
/// No storage serves more; a report stating more is damaged, not real.
pub const RATE_MAX_PER_S: f64 = 1e9;
/// IOPS and bandwidth closer than this (in %) agree: the rounding of a
/// transfer size to 512 bytes is not a disagreement worth a note.
pub const AGREE_PCT: f64 = 0.5;

/// How to derive: what the command line of `cairn awr workload` / `replay` says.
#[derive(Debug, Clone, PartialEq)]
pub struct DeriveOptions {
    /// `--block-size 8k`: overrides the report's block size.
    pub block_size_bytes: Option<u64>,
    /// The redo write size, for a report whose `redo size` was cut (the bank
    /// fragment) or when the engineer knows better.
    pub redo_write_bytes: Option<u64>,
    /// `--scale`: every class's rate is multiplied by this, so a replay can run
    /// a scaled-down copy of the load on small storage (a RAM disk in CI).
    pub scale: f64,
    /// The replay run's `elapsed=`, `interval=` and `warmup=`, in seconds.
    pub elapsed_s: u64,
    pub interval_s: u64,
    pub warmup_s: u64,
}

impl Default for DeriveOptions {
    /// The post's run: 120 s, reported every second, after a 5 s warm-up.
    fn default() -> Self {
        Self {
            block_size_bytes: None,
            redo_write_bytes: None,
            scale: 1.0,
            elapsed_s: 120,
            interval_s: 1,
            warmup_s: 5,
        }
    }
}

/// Why no workload could be derived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeriveError {
    #[error("{report}: no I/O class can be derived: {missing}; give a whole-instance AWR or Statspack report with its Instance Activity Stats")]
    NothingUsable { report: String, missing: String },
    #[error("{0}")]
    BadOption(String),
}

/// The five classes of the post, in its priority order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassKind {
    RandomRead,
    SequentialRead,
    RandomWrite,
    MultiblockWrite,
    RedoWrite,
}

impl ClassKind {
    pub const ALL: [ClassKind; 5] = [
        ClassKind::RandomRead,
        ClassKind::SequentialRead,
        ClassKind::RandomWrite,
        ClassKind::MultiblockWrite,
        ClassKind::RedoWrite,
    ];

    /// The wd name, as in the post's parameter file.
    pub fn wd_name(self) -> &'static str {
        match self {
            ClassKind::RandomRead => "wd_oracle_rand_read",
            ClassKind::SequentialRead => "wd_oracle_seq_read",
            ClassKind::RandomWrite => "wd_oracle_rand_write",
            ClassKind::MultiblockWrite => "wd_oracle_seq_write",
            ClassKind::RedoWrite => "wd_oracle_redo_write",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            ClassKind::RandomRead => "single-block random reads",
            ClassKind::SequentialRead => "multiblock sequential reads",
            ClassKind::RandomWrite => "single-block random writes",
            ClassKind::MultiblockWrite => "multiblock writes",
            ClassKind::RedoWrite => "redo writes",
        }
    }

    pub fn is_read(self) -> bool {
        matches!(self, ClassKind::RandomRead | ClassKind::SequentialRead)
    }

    /// vdbench `seekpct=`: 100 for random, 0 for sequential (redo is appended).
    pub fn seekpct(self) -> u32 {
        match self {
            ClassKind::RandomRead | ClassKind::RandomWrite => 100,
            _ => 0,
        }
    }

    /// vdbench `priority=`: the post's order, so the single-block reads that
    /// users wait on are served first when the threads cannot keep up.
    pub fn priority(self) -> u32 {
        match self {
            ClassKind::RandomRead => 1,
            ClassKind::SequentialRead => 2,
            ClassKind::RandomWrite => 3,
            ClassKind::MultiblockWrite => 4,
            ClassKind::RedoWrite => 5,
        }
    }

    /// The wait events the report times this class's I/O with: the ones its
    /// latency is judged against ([`Self::judged_events`]), then any that
    /// time batches of it.
    pub fn wait_events(self) -> &'static [&'static str] {
        match self {
            // db file parallel read is one wait for a batch of single-block
            // reads issued together.
            ClassKind::RandomRead => &["db file sequential read", "db file parallel read"],
            _ => self.judged_events(),
        }
    }

    /// The wait events whose average (and histogram) is this class's latency
    /// in the report, for putting the measured latency next to the AWR's.
    /// The writers' events time batches too — there is no per-write event —
    /// which the verdict says.
    pub fn judged_events(self) -> &'static [&'static str] {
        match self {
            ClassKind::RandomRead => &["db file sequential read"],
            ClassKind::SequentialRead => &["db file scattered read", "direct path read"],
            ClassKind::RandomWrite | ClassKind::MultiblockWrite => &["db file parallel write"],
            ClassKind::RedoWrite => &["log file parallel write"],
        }
    }
}

/// Which figure of the report a class's rate honours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The requests per second the statistics state.
    Iops,
    /// The bytes per second they state, in transfers of the class's size (more
    /// requests than stated: the post's "use the higher of IOPS and bandwidth").
    Bandwidth,
}

/// One class of I/O the report's database drove.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoClass {
    pub kind: ClassKind,
    /// The transfer size replayed: a multiple of 512, capped and clamped.
    pub size_bytes: u64,
    /// The average size the statistics give, before any cap or rounding.
    pub measured_size_bytes: f64,
    /// Requests per second as the statistics state them.
    pub stated_iops: f64,
    /// Bytes per second as the statistics state them.
    pub stated_bytes_per_s: f64,
    pub basis: Basis,
    /// The rate that honours `basis`, unscaled: what the database did.
    pub awr_rate_per_s: f64,
    /// `awr_rate_per_s` × the scale: what the replay drives.
    pub rate_per_s: f64,
    /// The arithmetic, one step a line, with statistic names and values.
    pub arithmetic: Vec<String>,
}

impl IoClass {
    /// The bytes per second the class drives at `awr_rate_per_s`.
    pub fn awr_bytes_per_s(&self) -> f64 {
        self.awr_rate_per_s * self.size_bytes as f64
    }
}

/// What the report states in total, for checking the classes against.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Stated {
    pub read_iops: Option<f64>,
    pub write_iops: Option<f64>,
    pub read_bytes_per_s: Option<f64>,
    pub write_bytes_per_s: Option<f64>,
    pub redo_writes_per_s: Option<f64>,
}

/// The classes of one report, and how they were found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derivation {
    /// The report's source (its file).
    pub source: String,
    pub block_size_bytes: u64,
    /// Where the block size came from (option, header, parameter, statistics, default).
    pub block_size_from: String,
    pub scale: f64,
    /// The report's elapsed time, when known (header, or Total ÷ per Second).
    pub elapsed_s: Option<f64>,
    /// In the post's priority order; classes that could not be derived are
    /// absent and named in `notes`.
    pub classes: Vec<IoClass>,
    pub stated: Stated,
    pub notes: Vec<String>,
    /// The replay run's `elapsed=`, `interval=`, `warmup=` (seconds).
    pub run_elapsed_s: u64,
    pub run_interval_s: u64,
    pub run_warmup_s: u64,
}

impl Derivation {
    pub fn class(&self, kind: ClassKind) -> Option<&IoClass> {
        self.classes.iter().find(|c| c.kind == kind)
    }

    fn sum(&self, reads: bool, f: fn(&IoClass) -> f64) -> f64 {
        self.classes
            .iter()
            .filter(|c| c.kind.is_read() == reads)
            .map(f)
            .sum()
    }

    /// Read requests per second the classes drive, unscaled.
    pub fn read_iops(&self) -> f64 {
        self.sum(true, |c| c.awr_rate_per_s)
    }

    /// Write requests per second (redo included), unscaled.
    pub fn write_iops(&self) -> f64 {
        self.sum(false, |c| c.awr_rate_per_s)
    }

    pub fn read_bytes_per_s(&self) -> f64 {
        self.sum(true, IoClass::awr_bytes_per_s)
    }

    pub fn write_bytes_per_s(&self) -> f64 {
        self.sum(false, IoClass::awr_bytes_per_s)
    }

    /// Every class's scaled rate together: the `rd=`'s `iorate=`.
    pub fn rate_per_s(&self) -> f64 {
        self.classes.iter().map(|c| c.rate_per_s).sum()
    }
}

/// `--block-size 8k` (or `16384`, `16K`): a block size Oracle can have.
pub fn parse_block_size(arg: &str) -> Result<u64, DeriveError> {
    parse_size_bytes(arg)
        .filter(|b| b.fract() == 0.0)
        .map(|b| b as u64)
        .filter(|b| valid_block_size(*b))
        .ok_or_else(|| {
            DeriveError::BadOption(format!(
                "--block-size `{arg}` is not a block size; expected a multiple of 512 from 512 to 64k, such as 8k"
            ))
        })
}

/// Oracle's block sizes: 2, 4, 8, 16 or 32 KiB.
pub(super) fn valid_block_size(b: u64) -> bool {
    (BLOCK_SIZE_MIN_BYTES..=BLOCK_SIZE_MAX_BYTES).contains(&b) && b.is_power_of_two()
}

const BLOCK_SIZE_MIN_BYTES: u64 = 2048;
const BLOCK_SIZE_MAX_BYTES: u64 = 32 * 1024;
