//! slob.conf: read as SLOB's users write it.
//!
//! A slob.conf is a shell fragment that SLOB's scripts `source`. Cairn does not
//! run a shell: it reads the subset that real files use — `KEY=value` lines with
//! the value bare, "double" or 'single' quoted, `#` comments (whole-line and
//! after a value), blank lines, `export KEY …` lines, surrounding whitespace and
//! CRLF line ends — and refuses everything else (control flow, `$VAR` and
//! `$(cmd)` expansion, several commands on a line) at its line, because a
//! benchmark that quietly ran something other than what its file says is worse
//! than none.
//!
//! Keys are of four kinds:
//! - settings ([`SETTING_KEYS`]): parsed into [`SlobConf`] and range-checked;
//! - Oracle-only keys ([`IGNORED_KEYS`]: connection, statistics, harness): any
//!   value is accepted and the key is listed in [`ParsedConf::ignored`];
//! - SLOB 2.2 workload keys Cairn does not implement ([`RETIRED_KEYS`]):
//!   accepted and listed as ignored only at the value that leaves the workload
//!   unchanged (FALSE or 0), an error otherwise — nothing that would change the
//!   workload is dropped silently;
//! - anything else: an error naming the key and its line.
//!
//! As in a shell, a key given twice takes its last value; the earlier lines are
//! listed in [`ParsedConf::overridden`]. Values are checked as they end up, at
//! the line that set them. Checks that need the block size (SCALE against
//! WORK_UNIT, the hot spot inside SCALE) are [`SlobConf::check_scale`], called
//! by setup and run once the block size is known.
//!
//! Every key, its default, its range and what Cairn does with it:
//! docs/slob-conf.md.

use std::collections::BTreeMap;
use std::fmt;
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

/// As written in slob.conf: `LITE` or `HEAVY`.
impl fmt::Display for RedoStress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RedoStress::Lite => "LITE",
            RedoStress::Heavy => "HEAVY",
        })
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

/// As written in slob.conf: blocks bare (`10000`), bytes with the largest
/// binary suffix that divides them exactly (`512M`, `1G`). Bytes that are not a
/// whole number of KiB (which slob.conf cannot express) are shown rounded up
/// to the next KiB.
impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Amount::Blocks(n) => write!(f, "{n}"),
            Amount::Bytes(b) => {
                for (suffix, unit) in [('T', TIB), ('G', GIB), ('M', MIB)] {
                    if b != 0 && b % unit == 0 {
                        return write!(f, "{}{suffix}", b / unit);
                    }
                }
                write!(f, "{}K", b.div_ceil(KIB))
            }
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

/// The values SLOB 2.5 uses when slob.conf does not set a key (its scripts'
/// fallbacks; for the hot-spot sizes, the values its shipped slob.conf sets,
/// since the scripts' fallbacks only matter when the hot spot is off).
impl Default for SlobConf {
    fn default() -> Self {
        SlobConf {
            update_pct: 25,
            scan_pct: 0,
            run_time_s: 300,
            work_loop: 0,
            scale: Amount::Blocks(10_000),
            scan_table_sz: Amount::Bytes(MIB),
            work_unit: 256,
            redo_stress: RedoStress::Lite,
            load_parallel_degree: 1,
            threads_per_schema: 1,
            do_hotspot: false,
            hotspot_mb: 8,
            hotspot_offset_mb: 16,
            hotspot_frequency: 3,
            hot_schema_frequency: 0,
            think_tm_frequency: 0,
            think_tm_min_s: 0.1,
            think_tm_max_s: 0.5,
            obfuscate_columns: false,
        }
    }
}

/// A parsed file: the settings, the Oracle-only keys ignored, and the text.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedConf {
    pub conf: SlobConf,
    /// `(key, line)` of every key accepted and ignored (the line of its last
    /// assignment), in file order.
    pub ignored: Vec<(String, usize)>,
    pub text: String,
    /// `(key, line)` of every assignment a later line of the same key replaced
    /// (allowed, as in a shell: the last one wins), in file order.
    pub overridden: Vec<(String, usize)>,
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

/// The settings, in the order SLOB's shipped slob.conf lists them; also the
/// order of [`SlobConf::effective`].
pub const SETTING_KEYS: [&str; 19] = [
    "UPDATE_PCT",
    "SCAN_PCT",
    "RUN_TIME",
    "WORK_LOOP",
    "SCALE",
    "SCAN_TABLE_SZ",
    "WORK_UNIT",
    "REDO_STRESS",
    "LOAD_PARALLEL_DEGREE",
    "THREADS_PER_SCHEMA",
    "DO_HOTSPOT",
    "HOTSPOT_MB",
    "HOTSPOT_OFFSET_MB",
    "HOTSPOT_FREQUENCY",
    "HOT_SCHEMA_FREQUENCY",
    "THINK_TM_FREQUENCY",
    "THINK_TM_MIN",
    "THINK_TM_MAX",
    "OBFUSCATE_COLUMNS",
];

/// Keys that only mean something to an Oracle database or to SLOB's scripts,
/// with why Cairn has no use for them: accepted with any value and listed as
/// ignored.
pub const IGNORED_KEYS: [(&str, &str); 14] = [
    (
        "DATABASE_STATISTICS_TYPE",
        "Cairn always writes its own AWR-style report",
    ),
    ("AWR_SRC", "Cairn takes no AWR snapshots (CDB or PDB)"),
    ("DBA_PRIV_USER", "Oracle connection: there is no database"),
    ("SYSDBA_PASSWD", "Oracle connection: there is no database"),
    (
        "ADMIN_SQLNET_SERVICE",
        "Oracle connection: there is no database",
    ),
    (
        "SQLNET_SERVICE_BASE",
        "Oracle connection: there is no database",
    ),
    (
        "SQLNET_SERVICE_MAX",
        "Oracle connection: there is no database",
    ),
    (
        "ADMIN_CONNECT_STRING",
        "Oracle connection: there is no database",
    ),
    (
        "NON_ADMIN_CONNECT_STRING",
        "Oracle connection: there is no database",
    ),
    (
        "EXTERNAL_SCRIPT",
        "Cairn runs no external scripts around a run",
    ),
    (
        "BLOCK_SZ",
        "the block size is chosen by Cairn's setup, not by slob.conf",
    ),
    ("UNIQUE_INDEX", "Cairn's index is its own and always unique"),
    (
        "NO_OS_PERF_DATA",
        "Cairn collects no iostat/vmstat/mpstat files",
    ),
    ("SLOB_DEBUG", "SLOB script tracing"),
];

/// SLOB 2.2 workload keys Cairn does not implement, with the one value at
/// which they leave the workload unchanged (`None`: any value, because the key
/// only acts through another retired key) and what to do instead.
pub const RETIRED_KEYS: [(&str, Option<&str>, &str); 4] = [
    (
        "DO_UPDATE_HOTSPOT",
        Some("FALSE"),
        "use DO_HOTSPOT, HOTSPOT_MB and HOTSPOT_OFFSET_MB, or set it to FALSE",
    ),
    (
        "HOTSPOT_PCT",
        None,
        "it only acts with DO_UPDATE_HOTSPOT=TRUE",
    ),
    (
        "THINK_TM_MODULUS",
        Some("0"),
        "it is the SLOB 2.2 name of THINK_TM_FREQUENCY: rename it",
    ),
    (
        "SHARED_DATA_MODULUS",
        Some("0"),
        "Cairn's sessions never share data across schemas: set it to 0 or remove it",
    ),
];

/// Why Cairn ignores `key`, if it is a key it accepts and ignores.
pub fn ignored_reason(key: &str) -> Option<&'static str> {
    IGNORED_KEYS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, why)| *why)
        .or_else(|| {
            RETIRED_KEYS.iter().find(|(k, _, _)| *k == key).map(|_| {
                "a SLOB 2.2 setting Cairn does not implement, at a value that changes nothing"
            })
        })
}

/// Parse the text of a slob.conf; `file` names it in errors.
///
/// Errors: the first line that is not one of the accepted forms, or names an
/// unknown key; then the first (in file order) value that is not of its key's
/// type or range; then cross-key checks, at the line of the later key involved.
pub fn parse_conf_str(text: &str, file: &str) -> Result<ParsedConf, ConfError> {
    let at = |line: usize, message: String| ConfError {
        file: file.to_string(),
        line,
        message,
    };
    let text_body = text.strip_prefix('\u{feff}').unwrap_or(text);

    // key -> (value, line) of its last assignment; lines replaced by a later one.
    let mut last: BTreeMap<&'static str, (String, usize)> = BTreeMap::new();
    let mut overridden: Vec<(String, usize)> = Vec::new();

    for (index, raw) in text_body.split('\n').enumerate() {
        let line_no = index + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let words = lex_line(line).map_err(|m| at(line_no, m))?;
        for (name, value) in words {
            let key = known_key(&name).ok_or_else(|| at(line_no, unknown_key_message(&name)))?;
            if let Some(value) = value {
                if let Some((_, earlier)) = last.insert(key, (value, line_no)) {
                    overridden.push((key.to_string(), earlier));
                }
            }
        }
    }
    overridden.sort_by_key(|(_, line)| *line);

    let mut in_file_order: Vec<(&'static str, String, usize)> =
        last.iter().map(|(k, (v, l))| (*k, v.clone(), *l)).collect();
    in_file_order.sort_by_key(|(_, _, line)| *line);

    let mut conf = SlobConf::default();
    let mut ignored = Vec::new();
    for (key, value, line) in &in_file_order {
        if SETTING_KEYS.contains(key) {
            conf.set(key, value).map_err(|m| at(*line, m))?;
        } else if let Some((_, inert, instead)) = RETIRED_KEYS.iter().find(|(k, _, _)| k == key) {
            match inert {
                Some(inert) if !value.trim().eq_ignore_ascii_case(inert) => {
                    return Err(at(
                        *line,
                        format!(
                            "{key}={}: a SLOB 2.2 setting Cairn does not implement; {instead}",
                            show(value)
                        ),
                    ));
                }
                _ => ignored.push((key.to_string(), *line)),
            }
        } else {
            ignored.push((key.to_string(), *line));
        }
    }

    let line_of = |key: &str| last.get(key).map_or(0, |(_, line)| *line);
    if let Some((line, message)) = conf
        .problems()
        .into_iter()
        .map(|p| {
            (
                p.keys.iter().map(|k| line_of(k)).max().unwrap_or(0),
                p.message,
            )
        })
        .min_by_key(|(line, _)| *line)
    {
        return Err(at(line, message));
    }

    Ok(ParsedConf {
        conf,
        ignored,
        text: text.to_string(),
        overridden,
    })
}

/// Read and parse the slob.conf at `path`.
///
/// Errors: a file that cannot be read, is larger than [`CONF_BYTES_MAX`] or is
/// not UTF-8 text, and everything [`parse_conf_str`] refuses.
pub fn parse_conf_file(path: &Path) -> Result<ParsedConf, ConfError> {
    let file = path.display().to_string();
    let at = |line: usize, message: String| ConfError {
        file: file.clone(),
        line,
        message,
    };
    let size = std::fs::metadata(path)
        .map_err(|e| at(0, format!("cannot read {file}: {e}")))?
        .len();
    if size > CONF_BYTES_MAX {
        return Err(at(
            0,
            format!(
                "{file} is {size} bytes; a slob.conf is a short list of KEY=value lines \
                 (at most {CONF_BYTES_MAX} bytes): check the path"
            ),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| at(0, format!("cannot read {file}: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = 1 + good.iter().filter(|b| **b == b'\n').count();
        at(
            line,
            "not UTF-8 text: slob.conf must be a text file of KEY=value lines".to_string(),
        )
    })?;
    parse_conf_str(&text, &file)
}

/// Largest slob.conf read: SLOB's own is a few KiB, so anything near this is
/// the wrong file, and refusing it bounds what the parser holds.
pub const CONF_BYTES_MAX: u64 = 1 << 20;

/// Why settings that parsed do not fit the block size
/// ([`SlobConf::check_scale`]): one line saying which setting to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScaleError {
    #[error("block size 0: a block must hold at least one byte")]
    NoBlock,
    #[error("SCALE={scale} is {blocks} blocks of {block_bytes} bytes, more bytes than a 64-bit count holds: lower SCALE")]
    ScaleBytes {
        scale: Amount,
        blocks: u64,
        block_bytes: u64,
    },
    #[error("SCAN_TABLE_SZ={scan} is {blocks} blocks of {block_bytes} bytes, more bytes than a 64-bit count holds: lower SCAN_TABLE_SZ")]
    ScanBytes {
        scan: Amount,
        blocks: u64,
        block_bytes: u64,
    },
    #[error(
        "SCALE={scale} is {blocks} blocks of {block_bytes} bytes, fewer than WORK_UNIT={work_unit}: a statement touches WORK_UNIT blocks of one schema, so raise SCALE to at least {work_unit} blocks ({} bytes) or lower WORK_UNIT",
        .work_unit * .block_bytes
    )]
    BelowWorkUnit {
        scale: Amount,
        blocks: u64,
        block_bytes: u64,
        work_unit: u64,
    },
    #[error("HOTSPOT_OFFSET_MB={offset_mb} + HOTSPOT_MB={mb} = {end_mb} MiB reaches beyond SCALE={scale} ({scale_mib} MiB per schema): lower them or raise SCALE")]
    HotSpot {
        offset_mb: u64,
        mb: u64,
        end_mb: u64,
        scale: Amount,
        scale_mib: u64,
    },
}

impl SlobConf {
    /// Every setting as `KEY=value`, in slob.conf order.
    ///
    /// Writing these back as `KEY=value` lines parses to an equal `SlobConf`
    /// (for every `SlobConf` the parser can produce; see [`Amount`]'s display).
    pub fn effective(&self) -> Vec<(String, String)> {
        let bool_text = |b: bool| if b { "TRUE" } else { "FALSE" }.to_string();
        let values = [
            self.update_pct.to_string(),
            self.scan_pct.to_string(),
            self.run_time_s.to_string(),
            self.work_loop.to_string(),
            self.scale.to_string(),
            self.scan_table_sz.to_string(),
            self.work_unit.to_string(),
            self.redo_stress.to_string(),
            self.load_parallel_degree.to_string(),
            self.threads_per_schema.to_string(),
            bool_text(self.do_hotspot),
            self.hotspot_mb.to_string(),
            self.hotspot_offset_mb.to_string(),
            self.hotspot_frequency.to_string(),
            self.hot_schema_frequency.to_string(),
            self.think_tm_frequency.to_string(),
            // Rust prints the shortest text that reads back as the same f64,
            // and never in exponent form, which the parser does not accept.
            self.think_tm_min_s.to_string(),
            self.think_tm_max_s.to_string(),
            bool_text(self.obfuscate_columns),
        ];
        SETTING_KEYS
            .iter()
            .zip(values)
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    /// The checks the parser makes on values, for settings changed after
    /// parsing (a command-line override such as `--threads`).
    ///
    /// Errors: the first problem, as `KEY=value: what is wrong`.
    pub fn validate(&self) -> Result<(), String> {
        match self.problems().into_iter().next() {
            Some(p) => Err(p.message),
            None => Ok(()),
        }
    }

    /// The checks that need the block size: SCALE holds at least one
    /// WORK_UNIT, SCALE and SCAN_TABLE_SZ fit in a 64-bit byte count, and an
    /// enabled hot spot lies inside SCALE (as SLOB checks it).
    ///
    /// Errors: one line saying which setting to change.
    pub fn check_scale(&self, block_size: u32) -> Result<(), ScaleError> {
        if block_size == 0 {
            return Err(ScaleError::NoBlock);
        }
        let bs = u64::from(block_size);
        let scale_blocks = self.scale.blocks(block_size);
        let scale_bytes = scale_blocks.checked_mul(bs).ok_or(ScaleError::ScaleBytes {
            scale: self.scale,
            blocks: scale_blocks,
            block_bytes: bs,
        })?;
        let scan_blocks = self.scan_table_sz.blocks(block_size);
        if scan_blocks.checked_mul(bs).is_none() {
            return Err(ScaleError::ScanBytes {
                scan: self.scan_table_sz,
                blocks: scan_blocks,
                block_bytes: bs,
            });
        }
        let work_unit = u64::from(self.work_unit);
        if scale_blocks < work_unit {
            return Err(ScaleError::BelowWorkUnit {
                scale: self.scale,
                blocks: scale_blocks,
                block_bytes: bs,
                work_unit,
            });
        }
        if self.do_hotspot {
            // Both are at most HOTSPOT_MB_MAX, so neither the sum nor the bytes overflow.
            let end_mb = self.hotspot_offset_mb + self.hotspot_mb;
            if end_mb * MIB > scale_bytes {
                return Err(ScaleError::HotSpot {
                    offset_mb: self.hotspot_offset_mb,
                    mb: self.hotspot_mb,
                    end_mb,
                    scale: self.scale,
                    scale_mib: scale_bytes / MIB,
                });
            }
        }
        Ok(())
    }

    /// Set one setting from its slob.conf value (already unquoted). Checks the
    /// value's form (a number, a boolean, a size); ranges are [`Self::problems`].
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let v = value;
        match key {
            "UPDATE_PCT" => self.update_pct = whole(key, v)?,
            "SCAN_PCT" => self.scan_pct = whole(key, v)?,
            "RUN_TIME" => self.run_time_s = whole(key, v)?,
            "WORK_LOOP" => self.work_loop = whole(key, v)?,
            "SCALE" => self.scale = amount(key, v)?,
            "SCAN_TABLE_SZ" => self.scan_table_sz = amount(key, v)?,
            "WORK_UNIT" => self.work_unit = whole(key, v)?,
            "REDO_STRESS" => {
                self.redo_stress = if v.eq_ignore_ascii_case("LITE") {
                    RedoStress::Lite
                } else if v.eq_ignore_ascii_case("HEAVY") {
                    RedoStress::Heavy
                } else {
                    return Err(bad_value(key, v));
                }
            }
            "LOAD_PARALLEL_DEGREE" => self.load_parallel_degree = whole(key, v)?,
            "THREADS_PER_SCHEMA" => self.threads_per_schema = whole(key, v)?,
            "DO_HOTSPOT" => self.do_hotspot = boolean(key, v)?,
            "HOTSPOT_MB" => self.hotspot_mb = whole(key, v)?,
            "HOTSPOT_OFFSET_MB" => self.hotspot_offset_mb = whole(key, v)?,
            "HOTSPOT_FREQUENCY" => self.hotspot_frequency = whole(key, v)?,
            "HOT_SCHEMA_FREQUENCY" => self.hot_schema_frequency = whole(key, v)?,
            "THINK_TM_FREQUENCY" => self.think_tm_frequency = whole(key, v)?,
            "THINK_TM_MIN" => self.think_tm_min_s = seconds(key, v)?,
            "THINK_TM_MAX" => self.think_tm_max_s = seconds(key, v)?,
            "OBFUSCATE_COLUMNS" => self.obfuscate_columns = boolean(key, v)?,
            _ => unreachable!("invariant: set() is only called with a key of SETTING_KEYS"),
        }
        Ok(())
    }

    /// Every range and cross-key problem, each with the keys whose lines it
    /// concerns (the error is reported at the last of them in the file).
    fn problems(&self) -> Vec<Problem> {
        let mut out = self.range_problems();
        self.cross_key_problems(&mut out);
        out
    }

    /// Each key whose value is out of its range, on its own.
    fn range_problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut one = |key: &'static str, value: String, ok: bool| {
            if !ok {
                out.push(Problem {
                    keys: vec![key],
                    message: bad_value(key, &value),
                });
            }
        };
        one(
            "UPDATE_PCT",
            self.update_pct.to_string(),
            self.update_pct <= 100,
        );
        one("SCAN_PCT", self.scan_pct.to_string(), self.scan_pct <= 100);
        one(
            "RUN_TIME",
            self.run_time_s.to_string(),
            self.run_time_s <= RUN_TIME_MAX_S,
        );
        one(
            "SCALE",
            self.scale.to_string(),
            !matches!(self.scale, Amount::Blocks(0) | Amount::Bytes(0)),
        );
        one(
            "SCAN_TABLE_SZ",
            self.scan_table_sz.to_string(),
            !matches!(self.scan_table_sz, Amount::Blocks(0) | Amount::Bytes(0)),
        );
        one(
            "WORK_UNIT",
            self.work_unit.to_string(),
            (WORK_UNIT_MIN..=WORK_UNIT_MAX).contains(&self.work_unit),
        );
        one(
            "LOAD_PARALLEL_DEGREE",
            self.load_parallel_degree.to_string(),
            (1..=PARALLEL_MAX).contains(&self.load_parallel_degree),
        );
        one(
            "THREADS_PER_SCHEMA",
            self.threads_per_schema.to_string(),
            (1..=PARALLEL_MAX).contains(&self.threads_per_schema),
        );
        one(
            "HOTSPOT_MB",
            self.hotspot_mb.to_string(),
            self.hotspot_mb <= HOTSPOT_MB_MAX,
        );
        one(
            "HOTSPOT_OFFSET_MB",
            self.hotspot_offset_mb.to_string(),
            self.hotspot_offset_mb <= HOTSPOT_MB_MAX,
        );
        one(
            "THINK_TM_MIN",
            self.think_tm_min_s.to_string(),
            think_ok(self.think_tm_min_s),
        );
        one(
            "THINK_TM_MAX",
            self.think_tm_max_s.to_string(),
            think_ok(self.think_tm_max_s),
        );
        out
    }

    /// Keys each in range that contradict each other, added to `out`.
    fn cross_key_problems(&self, out: &mut Vec<Problem>) {
        if self.update_pct <= 100 && self.scan_pct <= 100 && self.update_pct + self.scan_pct > 100 {
            out.push(Problem {
                keys: vec!["UPDATE_PCT", "SCAN_PCT"],
                message: format!(
                    "UPDATE_PCT={} and SCAN_PCT={} add up to {}: the two together must be at \
                     most 100 (the rest of the loop iterations are selects)",
                    self.update_pct,
                    self.scan_pct,
                    self.update_pct + self.scan_pct
                ),
            });
        }
        if self.run_time_s == 0 && self.work_loop == 0 {
            out.push(Problem {
                keys: vec!["RUN_TIME", "WORK_LOOP"],
                message: "RUN_TIME=0 with WORK_LOOP=0 would run nothing: set RUN_TIME to at \
                          least 1 second, or WORK_LOOP to a number of loop iterations"
                    .to_string(),
            });
        }
        if self.do_hotspot && self.hotspot_mb == 0 {
            out.push(Problem {
                keys: vec!["HOTSPOT_MB", "DO_HOTSPOT"],
                message: "HOTSPOT_MB=0 with DO_HOTSPOT=TRUE: the hot spot needs at least 1 MB, \
                          or set DO_HOTSPOT=FALSE"
                    .to_string(),
            });
        }
        if self.do_hotspot && self.hotspot_frequency == 0 {
            out.push(Problem {
                keys: vec!["HOTSPOT_FREQUENCY", "DO_HOTSPOT"],
                message: "HOTSPOT_FREQUENCY=0 with DO_HOTSPOT=TRUE: set it to N >= 1 (every \
                          N-th iteration goes to the hot spot), or set DO_HOTSPOT=FALSE"
                    .to_string(),
            });
        }
        if think_ok(self.think_tm_min_s)
            && think_ok(self.think_tm_max_s)
            && self.think_tm_min_s > self.think_tm_max_s
        {
            out.push(Problem {
                keys: vec!["THINK_TM_MIN", "THINK_TM_MAX"],
                message: format!(
                    "THINK_TM_MIN={} is more than THINK_TM_MAX={}: think time is drawn between \
                     them, so MIN must not exceed MAX",
                    self.think_tm_min_s, self.think_tm_max_s
                ),
            });
        }
    }
}

/// A think time slob.conf may give: finite, from 0 to THINK_TM_MAX_S seconds.
fn think_ok(s: f64) -> bool {
    s.is_finite() && (0.0..=THINK_TM_MAX_S).contains(&s)
}

/// A setting out of range, or settings that contradict each other.
struct Problem {
    keys: Vec<&'static str>,
    message: String,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// SLOB's own WORK_UNIT limits.
const WORK_UNIT_MIN: u32 = 3;
const WORK_UNIT_MAX: u32 = 1024;
/// Threads per schema and loader threads: SLOB tests at most 4096 sessions in
/// all; 1024 of one kind is already far beyond what one host schedules well.
const PARALLEL_MAX: u32 = 1024;
/// A year: longer is a typo, and keeps nanosecond arithmetic far from overflow.
const RUN_TIME_MAX_S: u64 = 365 * 24 * 3600;
/// Hot-spot sizes in MiB: 1 EiB keeps every byte computation inside u64.
const HOTSPOT_MB_MAX: u64 = 1 << 40;
/// An hour of think time per statement is already no load at all.
const THINK_TM_MAX_S: f64 = 3600.0;

/// What a setting's value must be, for error messages.
fn expected(key: &str) -> String {
    match key {
        "UPDATE_PCT" | "SCAN_PCT" => "a whole number from 0 to 100".to_string(),
        "RUN_TIME" => format!("a whole number of seconds from 0 to {RUN_TIME_MAX_S}"),
        "WORK_LOOP" => "a whole number of loop iterations (0 = run for RUN_TIME)".to_string(),
        "SCALE" | "SCAN_TABLE_SZ" => {
            "a number of blocks (10000) or of bytes with a K, M, G or T suffix (512M), at least 1"
                .to_string()
        }
        "WORK_UNIT" => format!("a whole number from {WORK_UNIT_MIN} to {WORK_UNIT_MAX}"),
        "REDO_STRESS" => "LITE or HEAVY".to_string(),
        "LOAD_PARALLEL_DEGREE" | "THREADS_PER_SCHEMA" => {
            format!("a whole number from 1 to {PARALLEL_MAX}")
        }
        "DO_HOTSPOT" | "OBFUSCATE_COLUMNS" => "TRUE or FALSE".to_string(),
        "HOTSPOT_MB" | "HOTSPOT_OFFSET_MB" => {
            format!("a whole number of MiB from 0 to {HOTSPOT_MB_MAX}")
        }
        "HOTSPOT_FREQUENCY" | "HOT_SCHEMA_FREQUENCY" | "THINK_TM_FREQUENCY" => {
            "a whole number (0 = off)".to_string()
        }
        "THINK_TM_MIN" | "THINK_TM_MAX" => {
            format!("seconds from 0 to {THINK_TM_MAX_S}, fractions allowed (.1)")
        }
        _ => "a value".to_string(),
    }
}

fn bad_value(key: &str, value: &str) -> String {
    if value.is_empty() {
        format!("{key} is empty: expected {}", expected(key))
    } else {
        format!("{key}={}: expected {}", show(value), expected(key))
    }
}

/// A value as shown in a message: control characters escaped, long ones cut.
fn show(value: &str) -> String {
    const SHOWN_CHARS_MAX: usize = 40;
    let mut out: String = value
        .chars()
        .take(SHOWN_CHARS_MAX)
        .flat_map(char::escape_debug)
        .collect();
    if value.chars().count() > SHOWN_CHARS_MAX {
        out.push('…');
    }
    out
}

/// A whole number in decimal digits, converted to the field's type; too large
/// for it is its own message so that `99999999999999999999` is not "not a number".
fn whole<T: TryFrom<u64>>(key: &str, value: &str) -> Result<T, String> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad_value(key, value));
    }
    value
        .parse::<u64>()
        .ok()
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| {
            format!(
                "{key}={}: too large: expected {}",
                show(value),
                expected(key)
            )
        })
}

fn boolean(key: &str, value: &str) -> Result<bool, String> {
    if value.eq_ignore_ascii_case("TRUE") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("FALSE") {
        Ok(false)
    } else {
        Err(bad_value(key, value))
    }
}

/// Seconds as SLOB writes them: digits with at most one decimal point (`.1`,
/// `0.5`, `2`); no sign, no exponent.
fn seconds(key: &str, value: &str) -> Result<f64, String> {
    let digits = value.bytes().filter(u8::is_ascii_digit).count();
    let points = value.bytes().filter(|b| *b == b'.').count();
    if digits == 0 || points > 1 || digits + points != value.len() {
        return Err(bad_value(key, value));
    }
    value.parse::<f64>().map_err(|_| bad_value(key, value))
}

/// Blocks (`10000`) or bytes with a binary suffix (`512M`, `1g`).
fn amount(key: &str, value: &str) -> Result<Amount, String> {
    let (number, unit) = match value.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&value[..value.len() - 1], Some(KIB)),
        Some(b'M') => (&value[..value.len() - 1], Some(MIB)),
        Some(b'G') => (&value[..value.len() - 1], Some(GIB)),
        Some(b'T') => (&value[..value.len() - 1], Some(TIB)),
        _ => (value, None),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad_value(key, value));
    }
    let too_large = || {
        format!(
            "{key}={}: too large: expected {}",
            show(value),
            expected(key)
        )
    };
    let n = number.parse::<u64>().map_err(|_| too_large())?;
    match unit {
        None => Ok(Amount::Blocks(n)),
        Some(unit) => n.checked_mul(unit).map(Amount::Bytes).ok_or_else(too_large),
    }
}

/// The canonical spelling of a key Cairn knows (setting, ignored or retired).
fn known_key(name: &str) -> Option<&'static str> {
    SETTING_KEYS
        .iter()
        .copied()
        .chain(IGNORED_KEYS.iter().map(|(k, _)| *k))
        .chain(RETIRED_KEYS.iter().map(|(k, _, _)| *k))
        .find(|k| *k == name)
}

fn unknown_key_message(name: &str) -> String {
    let close = SETTING_KEYS
        .iter()
        .chain(IGNORED_KEYS.iter().map(|(k, _)| k))
        .find(|k| k.eq_ignore_ascii_case(name))
        .map(|k| format!(" (keys are upper case: did you mean {k}?)"))
        .unwrap_or_default();
    format!(
        "unknown key {}{close} (slob.conf keys are {}; Oracle-only keys such as \
         SYSDBA_PASSWD are accepted and ignored; see docs/slob-conf.md)",
        show(name),
        SETTING_KEYS.join(", ")
    )
}

// ------------------------------------------------------------------- lexing

/// One line into the names it assigns or exports: `(name, Some(value))` for
/// an assignment, `(name, None)` for a bare `export NAME`. Blank and comment
/// lines give nothing.
fn lex_line(line: &str) -> Result<Vec<(String, Option<String>)>, String> {
    let s = line.trim_start_matches([' ', '\t']);
    if s.trim_end_matches([' ', '\t']).is_empty() || s.starts_with('#') {
        return Ok(Vec::new());
    }
    if let Some(rest) = s.strip_prefix("export") {
        if rest.is_empty() || rest.starts_with([' ', '\t']) {
            return lex_export(rest);
        }
    }
    let (name, rest) = split_name(s);
    if !name.is_empty() {
        if let Some(after) = rest.strip_prefix('=') {
            let (value, rest) = lex_value(name, after)?;
            end_of_line(name, rest)?;
            return Ok(vec![(name.to_string(), Some(value))]);
        }
        if rest.trim_start_matches([' ', '\t']).starts_with('=') {
            return Err(format!(
                "no spaces are allowed before '=' (a shell would run {name} as a command): \
                 write {name}=value"
            ));
        }
    }
    Err(format!(
        "expected KEY=value, export KEY, a # comment or a blank line; found \"{}\" \
         (slob.conf is read, not run: no shell commands)",
        show(s.trim_end_matches([' ', '\t']))
    ))
}

/// The words after `export`: names, or `NAME=value` assignments.
fn lex_export(mut rest: &str) -> Result<Vec<(String, Option<String>)>, String> {
    let mut out = Vec::new();
    loop {
        rest = rest.trim_start_matches([' ', '\t']);
        if rest.is_empty() || rest.starts_with('#') {
            break;
        }
        let (name, after) = split_name(rest);
        if name.is_empty() {
            return Err(format!(
                "export: expected a key name, found \"{}\"",
                show(rest.trim_end_matches([' ', '\t']))
            ));
        }
        if let Some(value_text) = after.strip_prefix('=') {
            let (value, after) = lex_value(name, value_text)?;
            out.push((name.to_string(), Some(value)));
            rest = after;
        } else {
            out.push((name.to_string(), None));
            rest = after;
        }
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            return Err(format!(
                "export: unexpected \"{}\" after {name}: export takes key names separated \
                 by spaces",
                show(rest)
            ));
        }
    }
    if out.is_empty() {
        return Err("export names no key: write export KEY".to_string());
    }
    Ok(out)
}

/// A shell name: a letter or `_`, then letters, digits and `_`.
fn split_name(s: &str) -> (&str, &str) {
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())))
        .map_or(s.len(), |(i, _)| i);
    s.split_at(end)
}

/// After a value: only blanks and an optional `# comment`.
fn end_of_line(key: &str, rest: &str) -> Result<(), String> {
    let rest = rest.trim_start_matches([' ', '\t']);
    if rest.is_empty() || rest.starts_with('#') {
        Ok(())
    } else if let Some(op) = rest.chars().next().filter(|c| SHELL_OPERATORS.contains(c)) {
        Err(operator_message(key, op))
    } else {
        Err(format!(
            "unexpected \"{}\" after the value of {key}: quote a value that holds spaces, \
             start a comment with #, one KEY=value per line",
            show(rest.trim_end_matches([' ', '\t']))
        ))
    }
}

/// One shell word as a value: bare text, '…' and "…" parts joined, with the
/// shell's quoting rules; expansion and shell operators are refused. Returns
/// the value and the text after it.
fn lex_value<'a>(key: &str, s: &'a str) -> Result<(String, &'a str), String> {
    let expansion = |what: &str| {
        format!(
            "{key}: {what} is shell expansion, which Cairn does not perform (slob.conf is \
             read, not run): write the value itself, or single-quote it"
        )
    };
    let mut value = String::new();
    let mut chars = s.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        match c {
            ' ' | '\t' => return Ok((value, &s[i..])),
            '\'' => {
                chars.next();
                loop {
                    match chars.next() {
                        Some((_, '\'')) => break,
                        Some((_, c)) => value.push(c),
                        None => {
                            return Err(format!(
                                "{key}: unterminated ' quote (a quoted value must close on \
                                 the same line)"
                            ))
                        }
                    }
                }
            }
            '"' => {
                chars.next();
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.peek() {
                            Some(&(_, e @ ('$' | '`' | '"' | '\\'))) => {
                                value.push(e);
                                chars.next();
                            }
                            _ => value.push('\\'),
                        },
                        Some((_, '$')) if starts_expansion(chars.peek().map(|&(_, c)| c)) => {
                            return Err(expansion("\"$…\""));
                        }
                        Some((_, '`')) => return Err(expansion("`…`")),
                        Some((_, c)) => value.push(c),
                        None => {
                            return Err(format!(
                                "{key}: unterminated \" quote (a quoted value must close on \
                                 the same line)"
                            ))
                        }
                    }
                }
            }
            '\\' => {
                chars.next();
                match chars.next() {
                    Some((_, e)) => value.push(e),
                    None => {
                        return Err(format!(
                            "{key}: a \\ at the end of the line continues it in a shell, \
                             which slob.conf does not support: one KEY=value per line"
                        ))
                    }
                }
            }
            '$' => {
                chars.next();
                let next = chars.peek().map(|&(_, c)| c);
                if next == Some('(') {
                    return Err(expansion("$(…)"));
                }
                if starts_expansion(next) {
                    return Err(expansion("$…"));
                }
                value.push('$');
            }
            '`' => return Err(expansion("`…`")),
            c if SHELL_OPERATORS.contains(&c) => return Err(operator_message(key, c)),
            _ => {
                value.push(c);
                chars.next();
            }
        }
    }
    Ok((value, ""))
}

/// Characters that end a shell command or redirect it.
const SHELL_OPERATORS: [char; 7] = [';', '&', '|', '<', '>', '(', ')'];

fn operator_message(key: &str, op: char) -> String {
    format!(
        "{key}: shell operator '{op}' is not supported: one KEY=value per line, and quote a \
         value that holds '{op}'"
    )
}

/// Whether a `$` followed by `next` expands in a shell (rather than standing
/// for itself, as a `$` at the end of a word does).
fn starts_expansion(next: Option<char>) -> bool {
    matches!(next, Some(c) if c.is_ascii_alphanumeric()
        || matches!(c, '_' | '{' | '(' | '@' | '*' | '#' | '?' | '$' | '!' | '-'))
}
