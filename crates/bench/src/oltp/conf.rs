//! slob.conf: read as SLOB's users write it. (Stub: owned by the conf helper.)

use std::path::Path;

/// REDO_STRESS: how much of a row an update changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RedoStress {
    /// 2 columns of 128 bytes per block changed.
    Lite,
    /// 19 columns of 128 bytes per block changed.
    Heavy,
}

impl RedoStress {
    /// Columns of 128 bytes an update changes in each row.
    pub fn columns(self) -> usize {
        match self {
            RedoStress::Lite => 2,
            RedoStress::Heavy => 19,
        }
    }
}

/// A size in slob.conf: a number of blocks, or bytes with a K/M/G/T suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Amount {
    Blocks(u64),
    Bytes(u64),
}

impl Amount {
    /// Blocks of `block_size` bytes (bytes rounded up to whole blocks).
    pub fn blocks(self, block_size: u32) -> u64 {
        match self {
            Amount::Blocks(n) => n,
            Amount::Bytes(b) => b.div_ceil(u64::from(block_size)),
        }
    }
}

/// Every setting slob.conf can make, with SLOB's defaults.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SlobConf {
    pub update_pct: u32,
    pub scan_pct: u32,
    pub run_time_s: u64,
    pub work_loop: u64,
    pub scale: Amount,
    pub scan_table_sz: Amount,
    pub work_unit: u32,
    pub redo_stress: RedoStress,
    pub load_parallel_degree: u32,
    pub threads_per_schema: u32,
    pub do_hotspot: bool,
    pub hotspot_mb: u64,
    pub hotspot_offset_mb: u64,
    pub hotspot_frequency: u32,
    pub hot_schema_frequency: u32,
    pub think_tm_frequency: u32,
    pub think_tm_min_s: f64,
    pub think_tm_max_s: f64,
    pub obfuscate_columns: bool,
}

impl Default for SlobConf {
    fn default() -> Self {
        unimplemented!("conf helper")
    }
}

/// A parsed file: the settings, the Oracle-only keys ignored, and the text.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedConf {
    pub conf: SlobConf,
    /// `(key, line)` of every key accepted and ignored.
    pub ignored: Vec<(String, usize)>,
    pub text: String,
}

/// A slob.conf that cannot be used: `file:line: what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct ConfError {
    pub file: String,
    /// 1-based; 0 when the problem is not on one line (a file that cannot be read).
    pub line: usize,
    pub message: String,
}

pub fn parse_conf_str(_text: &str, _file: &str) -> Result<ParsedConf, ConfError> {
    unimplemented!("conf helper")
}

pub fn parse_conf_file(_path: &Path) -> Result<ParsedConf, ConfError> {
    unimplemented!("conf helper")
}

impl SlobConf {
    /// Every setting as `KEY=value`, in slob.conf order.
    pub fn effective(&self) -> Vec<(String, String)> {
        unimplemented!("conf helper")
    }
}
