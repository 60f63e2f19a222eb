//! The on-disk format of table, index and scan blocks.
//!
//! One row per block, as SLOB's tables hold with a high PCTFREE, so every
//! logical read of a row is a read of one block. Every block names itself, so a
//! misdirected or lost write is caught on the next read, and carries a CRC-32C
//! of the whole block, so a torn or rotted one is too.
//!
//! ```text
//! offset  bytes  field
//!      0      4  magic "CRNB"
//!      4      2  format version (1)
//!      6      1  segment code (Segment::code)
//!      7      1  flags (bit 0: obfuscated filler)
//!      8      8  dataset id
//!     16      4  schema (0-based)
//!     20      4  CRC-32C of the whole block, computed with these 4 bytes zeroed
//!     24      8  number within the segment
//!     32      8  version: changes since load
//!     40      4  block size in bytes
//!     44      4  entries: 1 for a row block, the keys an index leaf holds
//!     48     16  reserved, zero
//! table and scan blocks:
//!     64      8  key
//!     72      8  value: the numeric column, a function of (key, version)
//!     80  19×128 columns: [version written at: 8][120 bytes, a function of (key, that version, column)]
//!   2512    ...  filler, to the end of the block (fixed at load)
//!  every 4 KiB chunk after the first (or the block's end, below 8 KiB) ends in a
//!  16-byte stamp: [number: 8][version low 32 bits: 4][schema low 16 bits: 2][segment: 1][chunk: 1]
//! index leaves:
//!     64    8×n  entries: the table block number of each key the leaf holds
//!                (unused slots past the last key: filler words)
//! ```
//!
//! Why the stamps: an array that dedupes at 4 KiB or 8 KiB must find nothing to
//! dedupe (Oracle blocks defeat dedupe the same way: a unique header and a tail
//! carrying the block's address and SCN), while the filler — constant text by
//! default — still compresses. The last stamp is the tail Oracle's blocks have,
//! and like it, it also exposes a torn write before the checksum is computed.
//! With OBFUSCATE_COLUMNS, columns and filler are pseudo-random, so compression
//! finds nothing either.
//!
//! Index leaves have no tail: their entry count per leaf is fixed by the layout
//! (`Layout::keys_per_leaf` fills the block), their entries are distinct block
//! numbers, so their 4 KiB halves are unique anyway, and they never change
//! after load, so they cannot be torn by a run.
//!
//! Block sizes below 4 KiB hold fewer than [`COLUMNS`] columns (a 2 KiB block
//! holds 15; see [`row_columns`]); an update then changes at most those.
//!
//! The key → table block mapping is a pseudo-random permutation ([`KeyMap`]),
//! so an index range of consecutive keys lands on blocks scattered over the
//! table, as SLOB's index range scans do.

use super::layout::{BlockRef, Segment, BLOCK_HEADER_BYTES, INDEX_ENTRY_BYTES};

/// Bytes of one column; a row has [`COLUMNS`] of them.
pub const COLUMN_BYTES: usize = 128;
/// Columns per row (SLOB's table has 19 character columns of 128 bytes).
pub const COLUMNS: usize = 19;

/// The first bytes of every block.
pub const BLOCK_MAGIC: [u8; 4] = *b"CRNB";
/// The block format this code writes and reads.
pub const BLOCK_FORMAT_VERSION: u16 = 1;
/// Bytes of a stamp (and of the tail, the last stamp).
pub const STAMP_BYTES: usize = 16;
/// The dedupe granularity the stamps defeat.
const CHUNK_BYTES: usize = 4096;
const FLAG_OBFUSCATED: u8 = 1;

const OFF_MAGIC: usize = 0;
const OFF_FORMAT: usize = 4;
const OFF_SEGMENT: usize = 6;
const OFF_FLAGS: usize = 7;
const OFF_DATASET: usize = 8;
const OFF_SCHEMA: usize = 16;
const OFF_CHECKSUM: usize = 20;
const OFF_NUMBER: usize = 24;
const OFF_VERSION: usize = 32;
const OFF_BLOCK_BYTES: usize = 40;
const OFF_ENTRIES: usize = 44;
const OFF_KEY: usize = BLOCK_HEADER_BYTES;
const OFF_VALUE: usize = OFF_KEY + 8;
const OFF_COLUMNS: usize = OFF_VALUE + 8;
/// Each column begins with the version it was written at.
const COLUMN_VERSION_BYTES: usize = 8;
const COLUMN_TEXT_BYTES: usize = COLUMN_BYTES - COLUMN_VERSION_BYTES;
/// Columns an update always rewrites (REDO_STRESS=LITE's), which therefore
/// always carry the block's version.
const COLUMNS_ALWAYS_WRITTEN: usize = 2;
/// The smallest block a row fits in.
pub const BLOCK_BYTES_MIN: usize = 2048;

const _: () = assert!(OFF_ENTRIES + 4 <= BLOCK_HEADER_BYTES);
// A full row and the tail fit a 4 KiB block, so only 2 KiB blocks lose columns.
const _: () = assert!(OFF_COLUMNS + COLUMNS * COLUMN_BYTES + STAMP_BYTES <= 4096);
const _: () = assert!(COLUMN_TEXT_BYTES.is_multiple_of(8) && OFF_COLUMNS.is_multiple_of(8));

/// What a good table or scan block says about its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The row's key (for a table block: the key the index maps to this block).
    pub key: u64,
    /// Changes made to the block since it was loaded (0 after setup).
    pub version: u64,
    /// The numeric column, summed by selects and scans.
    pub value: u64,
}

/// Columns a row holds in a block of `block_bytes` ([`COLUMNS`] from 4 KiB up).
pub fn row_columns(block_bytes: usize) -> usize {
    (block_bytes.saturating_sub(OFF_COLUMNS + STAMP_BYTES) / COLUMN_BYTES).min(COLUMNS)
}

fn filler_start(block_bytes: usize) -> usize {
    OFF_COLUMNS + row_columns(block_bytes) * COLUMN_BYTES
}

/// The first problem found in a block, in one line (verify prints it after
/// the block's place).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("a block of {bytes} bytes is too small to check (at least {BLOCK_BYTES_MIN})")]
    TooSmall { bytes: usize },
    #[error("not a Cairn OLTP block (all zeros)")]
    Zeros,
    #[error("not a Cairn OLTP block (no block magic)")]
    NoMagic,
    #[error("torn or overwritten block: its tail says block {tail_number} version {tail_version} (low 32 bits), its header block {number} version {version}")]
    Torn {
        tail_number: u64,
        tail_version: u32,
        number: u64,
        version: u64,
    },
    #[error("bad checksum (stored {stored:08x}, computed {computed:08x})")]
    Checksum { stored: u32, computed: u32 },
    #[error("block format version {format} is not one this Cairn reads ({BLOCK_FORMAT_VERSION})")]
    Format { format: u16 },
    #[error("holds a block of {found} bytes, expected {expected}")]
    Size { found: usize, expected: usize },
    #[error("belongs to dataset {found:016x}, expected {expected:016x}")]
    Dataset { found: u64, expected: u64 },
    #[error("unknown segment code {code}")]
    Segment { code: u8 },
    #[error(
        "holds schema {} {} block {}, expected schema {} {} block {}",
        u64::from(.found.schema) + 1,
        .found.segment.name(),
        .found.number,
        u64::from(.expected.schema) + 1,
        .expected.segment.name(),
        .expected.number
    )]
    Elsewhere { found: BlockRef, expected: BlockRef },
    #[error("an index leaf holds no row")]
    IndexRow,
    #[error("scan block holds key {key}, expected its number {number}")]
    ScanKey { key: u64, number: u64 },
    #[error("value column does not match key {key} at version {version} (a change half applied)")]
    Value { key: u64, version: u64 },
    #[error("column {column} is at version {written_at}, newer than the block's {version}")]
    ColumnNewer {
        column: usize,
        written_at: u64,
        version: u64,
    },
    #[error("column {column} is at version {written_at}, the block at {version} (a change half applied)")]
    ColumnBehind {
        column: usize,
        written_at: u64,
        version: u64,
    },
    #[error("column {column} does not match key {key} at version {written_at}")]
    ColumnText {
        column: usize,
        key: u64,
        written_at: u64,
    },
    #[error("filler damaged at byte {at}")]
    Filler { at: usize },
    #[error("the stamp at byte {at} does not name this block")]
    Stamp { at: usize },
}

/// Check a block's checksum and identity (dataset, schema, segment, number).
/// Returns the block's version, or the first problem found.
pub fn check(buf: &[u8], expect: BlockRef, dataset: u64) -> Result<u64, BlockError> {
    let bs = buf.len();
    if bs < BLOCK_BYTES_MIN {
        return Err(BlockError::TooSmall { bytes: bs });
    }
    if buf[OFF_MAGIC..OFF_MAGIC + 4] != BLOCK_MAGIC {
        return Err(if buf.iter().all(|b| *b == 0) {
            BlockError::Zeros
        } else {
            BlockError::NoMagic
        });
    }
    let format = u16::from_le_bytes([buf[OFF_FORMAT], buf[OFF_FORMAT + 1]]);
    let segment_code = buf[OFF_SEGMENT];
    let number = le_u64(buf, OFF_NUMBER);
    let version = le_u64(buf, OFF_VERSION);
    let schema = le_u32(buf, OFF_SCHEMA);
    // The tail before the checksum: a write torn between header and tail names
    // itself as torn rather than as an anonymous bad checksum.
    if let Some(segment) = Segment::from_code(segment_code) {
        if segment != Segment::Index {
            let at = bs - STAMP_BYTES;
            let want = stamp(number, version, schema, segment, tail_chunk(bs));
            if buf[at..] != want {
                let tail_number = le_u64(buf, at);
                let tail_version = le_u32(buf, at + 8);
                return Err(BlockError::Torn {
                    tail_number,
                    tail_version,
                    number,
                    version,
                });
            }
        }
    }
    let stored = le_u32(buf, OFF_CHECKSUM);
    let computed = checksum(buf);
    if stored != computed {
        return Err(BlockError::Checksum { stored, computed });
    }
    if format != BLOCK_FORMAT_VERSION {
        return Err(BlockError::Format { format });
    }
    let block_bytes = le_u32(buf, OFF_BLOCK_BYTES) as usize;
    if block_bytes != bs {
        return Err(BlockError::Size {
            found: block_bytes,
            expected: bs,
        });
    }
    let found_dataset = le_u64(buf, OFF_DATASET);
    if found_dataset != dataset {
        return Err(BlockError::Dataset {
            found: found_dataset,
            expected: dataset,
        });
    }
    let Some(segment) = Segment::from_code(segment_code) else {
        return Err(BlockError::Segment { code: segment_code });
    };
    if segment != expect.segment || schema != expect.schema || number != expect.number {
        return Err(BlockError::Elsewhere {
            found: BlockRef {
                schema,
                segment,
                number,
            },
            expected: expect,
        });
    }
    Ok(version)
}

/// Check a table or scan block (as [`check`]) and read its row: the CPU a
/// database spends on a row it fetches.
pub fn read_row(buf: &[u8], expect: BlockRef, dataset: u64) -> Result<Row, BlockError> {
    let version = check(buf, expect, dataset)?;
    if expect.segment == Segment::Index {
        return Err(BlockError::IndexRow);
    }
    Ok(Row {
        key: le_u64(buf, OFF_KEY),
        version,
        value: le_u64(buf, OFF_VALUE),
    })
}

/// [`read_row`], and prove the row is self-consistent: every column matches its
/// function of (key, the version it was written at), columns 0 and 1 carry the
/// block's version, no column is newer than the block, the value matches (key,
/// version), a scan block's key is its number, and filler and stamps are as
/// loaded. Catches a change half applied under a good checksum.
pub fn check_content(buf: &[u8], expect: BlockRef, dataset: u64) -> Result<Row, BlockError> {
    let row = read_row(buf, expect, dataset)?;
    let bs = buf.len();
    if expect.segment == Segment::Scan && row.key != expect.number {
        return Err(BlockError::ScanKey {
            key: row.key,
            number: expect.number,
        });
    }
    if row.value != value_of(row.key, row.version) {
        return Err(BlockError::Value {
            key: row.key,
            version: row.version,
        });
    }
    let obfuscated = buf[OFF_FLAGS] & FLAG_OBFUSCATED != 0;
    let mut text = [0u8; COLUMN_TEXT_BYTES];
    for c in 0..row_columns(bs) {
        let at = OFF_COLUMNS + c * COLUMN_BYTES;
        let written_at = le_u64(buf, at);
        if written_at > row.version {
            return Err(BlockError::ColumnNewer {
                column: c,
                written_at,
                version: row.version,
            });
        }
        if c < COLUMNS_ALWAYS_WRITTEN && written_at != row.version {
            return Err(BlockError::ColumnBehind {
                column: c,
                written_at,
                version: row.version,
            });
        }
        column_text(&mut text, row.key, written_at, c, obfuscated);
        if buf[at + COLUMN_VERSION_BYTES..at + COLUMN_BYTES] != text {
            return Err(BlockError::ColumnText {
                column: c,
                key: row.key,
                written_at,
            });
        }
    }
    let seed = filler_seed(dataset, expect);
    let mut from = filler_start(bs);
    for (at, chunk) in stamp_offsets(bs) {
        if let Some(bad) = filler_mismatch(buf, from, at, obfuscated, seed) {
            return Err(BlockError::Filler { at: bad });
        }
        if buf[at..at + STAMP_BYTES]
            != stamp(
                expect.number,
                row.version,
                expect.schema,
                expect.segment,
                chunk,
            )
        {
            return Err(BlockError::Stamp { at });
        }
        from = at + STAMP_BYTES;
    }
    Ok(row)
}

/// The table block number that index leaf `buf` maps its `slot`-th key to.
/// The caller has checked the leaf with [`check`]; `None` past the leaf's last key.
pub fn index_entry(buf: &[u8], slot: usize) -> Option<u64> {
    if buf.len() < BLOCK_HEADER_BYTES {
        return None;
    }
    let entries = le_u32(buf, OFF_ENTRIES) as usize;
    let at = BLOCK_HEADER_BYTES + slot.checked_mul(INDEX_ENTRY_BYTES)?;
    if slot >= entries || at + INDEX_ENTRY_BYTES > buf.len() {
        return None;
    }
    Some(le_u64(buf, at))
}

/// Change the row of a checked table block as an update does: version + 1,
/// the first `columns` of its 128-byte columns and the numeric column
/// rewritten, stamps and checksum renewed. `columns` is held to at least 2
/// (REDO_STRESS=LITE's, so columns 0 and 1 always carry the block's version)
/// and at most [`row_columns`]. The changed bytes (the change vector: the new
/// contents of those columns, `columns` × 128 bytes) are appended to `change`.
/// Returns the row as it now is.
pub fn update_row(buf: &mut [u8], columns: usize, change: &mut Vec<u8>) -> Row {
    let bs = buf.len();
    let columns = columns.clamp(COLUMNS_ALWAYS_WRITTEN, row_columns(bs));
    let key = le_u64(buf, OFF_KEY);
    let version = le_u64(buf, OFF_VERSION).wrapping_add(1);
    let obfuscated = buf[OFF_FLAGS] & FLAG_OBFUSCATED != 0;
    for c in 0..columns {
        write_column(buf, c, key, version, obfuscated);
        let at = OFF_COLUMNS + c * COLUMN_BYTES;
        change.extend_from_slice(&buf[at..at + COLUMN_BYTES]);
    }
    let value = value_of(key, version);
    put_u64(buf, OFF_VALUE, value);
    put_u64(buf, OFF_VERSION, version);
    let number = le_u64(buf, OFF_NUMBER);
    let schema = le_u32(buf, OFF_SCHEMA);
    let segment = Segment::from_code(buf[OFF_SEGMENT]).unwrap_or(Segment::Table);
    write_stamps(buf, number, version, schema, segment);
    seal(buf);
    Row {
        key,
        version,
        value,
    }
}

/// Format a table block at load: version 0, the row of `key`.
pub fn format_table_block(buf: &mut [u8], at: BlockRef, dataset: u64, key: u64, obfuscate: bool) {
    assert_eq!(at.segment, Segment::Table, "invariant: a table block");
    format_row_block(buf, at, dataset, key, obfuscate);
}

/// Format a scan-table block at load: version 0, its row keyed by its number.
pub fn format_scan_block(buf: &mut [u8], at: BlockRef, dataset: u64, obfuscate: bool) {
    assert_eq!(at.segment, Segment::Scan, "invariant: a scan block");
    format_row_block(buf, at, dataset, at.number, obfuscate);
}

/// Format an index leaf: `entries[i]` is the table block of the leaf's i-th key.
pub fn format_index_leaf(buf: &mut [u8], at: BlockRef, dataset: u64, entries: &[u64]) {
    assert_eq!(at.segment, Segment::Index, "invariant: an index leaf");
    let bs = buf.len();
    let slots = (bs - BLOCK_HEADER_BYTES) / INDEX_ENTRY_BYTES;
    assert!(entries.len() <= slots, "invariant: entries fit the leaf");
    write_header(buf, at, dataset, false, entries.len() as u32);
    for (i, e) in entries.iter().enumerate() {
        put_u64(buf, BLOCK_HEADER_BYTES + i * INDEX_ENTRY_BYTES, *e);
    }
    // Unused slots of the last leaf: words unique to the leaf, so its halves
    // stay unique too.
    let seed = filler_seed(dataset, at);
    for i in entries.len()..slots {
        let off = BLOCK_HEADER_BYTES + i * INDEX_ENTRY_BYTES;
        put_u64(buf, off, random_word(seed, off));
    }
    seal(buf);
}

fn format_row_block(buf: &mut [u8], at: BlockRef, dataset: u64, key: u64, obfuscate: bool) {
    let bs = buf.len();
    assert!(
        bs >= BLOCK_BYTES_MIN && bs.is_power_of_two(),
        "invariant: a block of 2 KiB or more, a power of two"
    );
    write_header(buf, at, dataset, obfuscate, 1);
    put_u64(buf, OFF_KEY, key);
    put_u64(buf, OFF_VALUE, value_of(key, 0));
    for c in 0..row_columns(bs) {
        write_column(buf, c, key, 0, obfuscate);
    }
    let seed = filler_seed(dataset, at);
    fill_filler(buf, filler_start(bs), bs, obfuscate, seed);
    write_stamps(buf, at.number, 0, at.schema, at.segment);
    seal(buf);
}

fn write_header(buf: &mut [u8], at: BlockRef, dataset: u64, obfuscate: bool, entries: u32) {
    buf[..BLOCK_HEADER_BYTES].fill(0);
    buf[OFF_MAGIC..OFF_MAGIC + 4].copy_from_slice(&BLOCK_MAGIC);
    buf[OFF_FORMAT..OFF_FORMAT + 2].copy_from_slice(&BLOCK_FORMAT_VERSION.to_le_bytes());
    buf[OFF_SEGMENT] = at.segment.code();
    buf[OFF_FLAGS] = if obfuscate { FLAG_OBFUSCATED } else { 0 };
    put_u64(buf, OFF_DATASET, dataset);
    put_u32(buf, OFF_SCHEMA, at.schema);
    put_u64(buf, OFF_NUMBER, at.number);
    put_u64(buf, OFF_VERSION, 0);
    put_u32(
        buf,
        OFF_BLOCK_BYTES,
        u32::try_from(buf.len()).expect("invariant: blocks of at most 32 KiB"),
    );
    put_u32(buf, OFF_ENTRIES, entries);
}

/// Renew the checksum after any change.
fn seal(buf: &mut [u8]) {
    let crc = checksum(buf);
    put_u32(buf, OFF_CHECKSUM, crc);
}

/// CRC-32C of the block with the checksum field taken as zero.
fn checksum(buf: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&buf[..OFF_CHECKSUM]);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, &buf[OFF_CHECKSUM + 4..])
}

/// Where the stamps lie: the end of every 4 KiB chunk after the first, or
/// just the block's end for blocks of 4 KiB and less. The last is the tail.
fn stamp_offsets(bs: usize) -> impl Iterator<Item = (usize, u8)> {
    let chunks = bs / CHUNK_BYTES;
    let (first, last) = if chunks <= 1 { (0, 0) } else { (1, chunks - 1) };
    (first..=last).map(move |k| {
        let end = if chunks <= 1 {
            bs
        } else {
            (k + 1) * CHUNK_BYTES
        };
        (end - STAMP_BYTES, k as u8)
    })
}

fn tail_chunk(bs: usize) -> u8 {
    (bs / CHUNK_BYTES).saturating_sub(1) as u8
}

fn stamp(number: u64, version: u64, schema: u32, segment: Segment, chunk: u8) -> [u8; STAMP_BYTES] {
    let mut s = [0u8; STAMP_BYTES];
    s[..8].copy_from_slice(&number.to_le_bytes());
    s[8..12].copy_from_slice(&(version as u32).to_le_bytes());
    s[12..14].copy_from_slice(&(schema as u16).to_le_bytes());
    s[14] = segment.code();
    s[15] = chunk;
    s
}

fn write_stamps(buf: &mut [u8], number: u64, version: u64, schema: u32, segment: Segment) {
    for (at, chunk) in stamp_offsets(buf.len()) {
        buf[at..at + STAMP_BYTES].copy_from_slice(&stamp(number, version, schema, segment, chunk));
    }
}

fn write_column(buf: &mut [u8], c: usize, key: u64, version: u64, obfuscated: bool) {
    let at = OFF_COLUMNS + c * COLUMN_BYTES;
    put_u64(buf, at, version);
    let mut text = [0u8; COLUMN_TEXT_BYTES];
    column_text(&mut text, key, version, c, obfuscated);
    buf[at + COLUMN_VERSION_BYTES..at + COLUMN_BYTES].copy_from_slice(&text);
}

/// A column's 120 bytes after its version: readable, repetitive text (which
/// compresses) or, obfuscated, a pseudo-random stream (which does not).
fn column_text(
    out: &mut [u8; COLUMN_TEXT_BYTES],
    key: u64,
    version: u64,
    c: usize,
    obfuscated: bool,
) {
    if obfuscated {
        let mut state = mix64(key ^ mix64(version ^ ((c as u64) << 56) ^ 0xC0FF_EE00));
        for word in out.chunks_exact_mut(8) {
            word.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
        }
        return;
    }
    // "K<key hex>V<version hex>C<column>;  " repeated: 40 bytes, 3 times.
    const UNIT: usize = 40;
    let mut unit = [b' '; UNIT];
    unit[0] = b'K';
    put_hex(&mut unit[1..17], key);
    unit[17] = b'V';
    put_hex(&mut unit[18..34], version);
    unit[34] = b'C';
    unit[35] = b'0' + (c / 10) as u8;
    unit[36] = b'0' + (c % 10) as u8;
    unit[37] = b';';
    for piece in out.chunks_exact_mut(UNIT) {
        piece.copy_from_slice(&unit);
    }
}

fn put_hex(out: &mut [u8], v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in out.iter_mut().enumerate() {
        *b = HEX[((v >> (60 - 4 * i)) & 0xf) as usize];
    }
}

/// The numeric column of key `key` at `version`.
pub fn value_of(key: u64, version: u64) -> u64 {
    mix64(key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version.rotate_left(29) ^ 0x5EED_5EED)
}

/// What the filler is drawn from by default: text a compressor shrinks well.
const FILLER_TEXT: &[u8] = b"Cairn OLTP block filler: constant text, compressible on purpose. ";

fn filler_seed(dataset: u64, at: BlockRef) -> u64 {
    mix64(
        dataset
            ^ mix64(u64::from(at.schema) << 8 | u64::from(at.segment.code()))
            ^ mix64(at.number ^ 0xF111_E500),
    )
}

/// The pseudo-random word at byte offset `off` of a block's filler: counter
/// based, so any range can be checked without generating what precedes it.
fn random_word(seed: u64, off: usize) -> u64 {
    mix64(seed.wrapping_add((off as u64 / 8 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
}

fn fill_filler(buf: &mut [u8], from: usize, to: usize, obfuscated: bool, seed: u64) {
    if obfuscated {
        debug_assert!(from.is_multiple_of(8) && to.is_multiple_of(8));
        for off in (from..to).step_by(8) {
            put_u64(buf, off, random_word(seed, off));
        }
    } else {
        for (off, b) in buf[from..to].iter_mut().enumerate() {
            *b = FILLER_TEXT[(from + off) % FILLER_TEXT.len()];
        }
    }
}

/// The first byte of `[from, to)` that is not the filler, if any.
fn filler_mismatch(
    buf: &[u8],
    from: usize,
    to: usize,
    obfuscated: bool,
    seed: u64,
) -> Option<usize> {
    if obfuscated {
        (from..to)
            .step_by(8)
            .find(|&off| le_u64(buf, off) != random_word(seed, off))
    } else {
        (from..to).find(|&off| buf[off] != FILLER_TEXT[off % FILLER_TEXT.len()])
    }
}

/// splitmix64's finaliser: a fast, well-mixed 64-bit hash.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// splitmix64: the next word of a pseudo-random stream whose state is `state`.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    mix64(*state)
}

const FEISTEL_ROUNDS: usize = 6;

/// The key → table block mapping of a schema: a pseudo-random permutation of
/// `[0, n)` and its inverse, computed rather than stored (a Feistel network over
/// the smallest even-bit power of two ≥ n, with cycle walking back into
/// `[0, n)`), so setup, verify and tests agree on it with no memory.
#[derive(Debug, Clone)]
pub struct KeyMap {
    n: u64,
    half_bits: u32,
    half_mask: u64,
    round_keys: [u64; FEISTEL_ROUNDS],
}

impl KeyMap {
    pub fn new(seed: u64, n: u64) -> Self {
        assert!(n > 0, "invariant: a table of at least one block");
        let bits = 64 - (n - 1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut state = seed ^ 0x4B45_594D_4150;
        let round_keys = std::array::from_fn(|_| splitmix64(&mut state));
        Self {
            n,
            half_bits,
            half_mask: (1u64 << half_bits) - 1,
            round_keys,
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The table block that holds `key`'s row.
    pub fn block_of(&self, key: u64) -> u64 {
        assert!(key < self.n, "invariant: a key of the table");
        let mut x = key;
        loop {
            x = self.encrypt(x);
            if x < self.n {
                return x;
            }
        }
    }

    /// The key whose row table block `block` holds.
    pub fn key_of(&self, block: u64) -> u64 {
        assert!(block < self.n, "invariant: a block of the table");
        let mut x = block;
        loop {
            x = self.decrypt(x);
            if x < self.n {
                return x;
            }
        }
    }

    fn round(&self, half: u64, i: usize) -> u64 {
        mix64(half ^ self.round_keys[i]) & self.half_mask
    }

    fn encrypt(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half_bits, x & self.half_mask);
        for i in 0..FEISTEL_ROUNDS {
            (l, r) = (r, l ^ self.round(r, i));
        }
        (l << self.half_bits) | r
    }

    fn decrypt(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half_bits, x & self.half_mask);
        for i in (0..FEISTEL_ROUNDS).rev() {
            (l, r) = (r ^ self.round(l, i), l);
        }
        (l << self.half_bits) | r
    }
}

fn le_u64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

fn le_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}

fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashSet;

    const DS: u64 = 0x0DA7_A5E7;
    const BS: usize = 8192;

    fn table(schema: u32, number: u64) -> BlockRef {
        BlockRef {
            schema,
            segment: Segment::Table,
            number,
        }
    }

    fn block(at: BlockRef, key: u64, obfuscate: bool) -> Vec<u8> {
        let mut b = vec![0u8; BS];
        format_table_block(&mut b, at, DS, key, obfuscate);
        b
    }

    #[test]
    fn a_formatted_block_reads_back_its_row_at_version_zero() {
        for obfuscate in [false, true] {
            let b = block(table(0, 5), 42, obfuscate);
            let row = read_row(&b, table(0, 5), DS).unwrap();
            assert_eq!(row.key, 42);
            assert_eq!(row.version, 0);
            assert_eq!(row.value, value_of(42, 0));
            assert_eq!(check_content(&b, table(0, 5), DS).unwrap(), row);
        }
        let mut s = vec![0u8; BS];
        let at = BlockRef {
            schema: 1,
            segment: Segment::Scan,
            number: 9,
        };
        format_scan_block(&mut s, at, DS, false);
        assert_eq!(check_content(&s, at, DS).unwrap().key, 9);
    }

    #[test]
    fn every_block_size_round_trips() {
        for bs in [2048, 4096, 8192, 16384, 32768] {
            let mut b = vec![0u8; bs];
            format_table_block(&mut b, table(0, 3), DS, 7, false);
            check_content(&b, table(0, 3), DS).unwrap();
            let mut change = Vec::new();
            let row = update_row(&mut b, COLUMNS, &mut change);
            assert_eq!(change.len(), row_columns(bs) * COLUMN_BYTES);
            assert_eq!(check_content(&b, table(0, 3), DS).unwrap(), row);
        }
        assert_eq!(row_columns(2048), 15);
        assert_eq!(row_columns(4096), COLUMNS);
    }

    #[test]
    fn each_corruption_is_named() {
        let good = block(table(0, 5), 42, false);
        let mut b = good.clone();
        b[OFF_COLUMNS + 3 * COLUMN_BYTES + 20] ^= 1;
        assert!(check(&b, table(0, 5), DS)
            .unwrap_err()
            .to_string()
            .starts_with("bad checksum"));

        let mut b = good.clone();
        b[BS - 12] ^= 1; // the tail's version
        let e = check(&b, table(0, 5), DS).unwrap_err().to_string();
        assert!(e.starts_with("torn or overwritten block"), "{e}");

        let e = check(&good, table(1, 5), DS).unwrap_err().to_string();
        assert_eq!(
            e,
            "holds schema 1 table block 5, expected schema 2 table block 5"
        );
        let e = check(&good, table(0, 17), DS).unwrap_err().to_string();
        assert_eq!(
            e,
            "holds schema 1 table block 5, expected schema 1 table block 17"
        );
        let idx = BlockRef {
            segment: Segment::Index,
            ..table(0, 5)
        };
        assert!(check(&good, idx, DS)
            .unwrap_err()
            .to_string()
            .contains("expected schema 1 index block 5"));
        assert!(check(&good, table(0, 5), DS + 1)
            .unwrap_err()
            .to_string()
            .starts_with("belongs to dataset"));

        let zeros = vec![0u8; BS];
        assert_eq!(
            check(&zeros, table(0, 5), DS).unwrap_err().to_string(),
            "not a Cairn OLTP block (all zeros)"
        );
        let mut junk = vec![0u8; BS];
        junk[100] = 1;
        assert_eq!(
            check(&junk, table(0, 5), DS).unwrap_err().to_string(),
            "not a Cairn OLTP block (no block magic)"
        );
    }

    #[test]
    fn a_half_applied_change_under_a_good_checksum_is_caught_by_check_content() {
        let mut b = block(table(0, 5), 42, false);
        update_row(&mut b, 2, &mut Vec::new());
        // Roll column 1 back to version 0 and reseal: the checksum is good.
        write_column(&mut b, 1, 42, 0, false);
        seal(&mut b);
        assert_eq!(check(&b, table(0, 5), DS).unwrap(), 1);
        let e = check_content(&b, table(0, 5), DS).unwrap_err().to_string();
        assert!(
            e.contains("column 1 is at version 0, the block at 1"),
            "{e}"
        );

        let mut b = block(table(0, 5), 42, true);
        update_row(&mut b, 2, &mut Vec::new());
        put_u64(&mut b, OFF_VALUE, value_of(42, 0));
        seal(&mut b);
        let e = check_content(&b, table(0, 5), DS).unwrap_err().to_string();
        assert!(e.starts_with("value column does not match"), "{e}");

        let mut b = block(table(0, 5), 42, false);
        b[OFF_COLUMNS + 4 * COLUMN_BYTES + 30] = b'!';
        seal(&mut b);
        let e = check_content(&b, table(0, 5), DS).unwrap_err().to_string();
        assert_eq!(e, "column 4 does not match key 42 at version 0");

        let mut b = block(table(0, 5), 42, false);
        b[6000] ^= 0x20;
        seal(&mut b);
        assert_eq!(
            check_content(&b, table(0, 5), DS).unwrap_err().to_string(),
            "filler damaged at byte 6000"
        );
    }

    #[test]
    fn an_update_bumps_the_version_and_changes_exactly_the_first_columns() {
        for (columns, obfuscate) in [(2, false), (19, false), (2, true), (19, true)] {
            let mut b = block(table(0, 5), 42, obfuscate);
            let before = b.clone();
            let mut change = vec![0xAA];
            let row = update_row(&mut b, columns, &mut change);
            assert_eq!(row.version, 1);
            assert_eq!(row.key, 42);
            assert_eq!(row.value, value_of(42, 1));
            assert_eq!(change.len(), 1 + columns * COLUMN_BYTES);
            for c in 0..COLUMNS {
                let r = OFF_COLUMNS + c * COLUMN_BYTES..OFF_COLUMNS + (c + 1) * COLUMN_BYTES;
                if c < columns {
                    assert_ne!(b[r.clone()], before[r.clone()], "column {c}");
                    let cv = &change[1 + c * COLUMN_BYTES..1 + (c + 1) * COLUMN_BYTES];
                    assert_eq!(&b[r], cv);
                } else {
                    assert_eq!(b[r.clone()], before[r], "column {c}");
                }
            }
            // Filler untouched; the tail renewed.
            let fs = filler_start(BS);
            assert_eq!(b[fs..BS - STAMP_BYTES], before[fs..BS - STAMP_BYTES]);
            assert_ne!(b[BS - STAMP_BYTES..], before[BS - STAMP_BYTES..]);
            assert_eq!(check_content(&b, table(0, 5), DS).unwrap(), row);
            let row2 = update_row(&mut b, 2, &mut Vec::new());
            assert_eq!(row2.version, 2);
            check_content(&b, table(0, 5), DS).unwrap();
        }
    }

    #[test]
    fn no_two_blocks_share_a_4k_half() {
        let mut halves = HashSet::new();
        for obfuscate in [false, true] {
            for schema in 0..3 {
                for number in 0..50 {
                    let b = block(table(schema, number), number, obfuscate);
                    assert!(halves.insert(b[..4096].to_vec()));
                    assert!(halves.insert(b[4096..].to_vec()));
                    let mut s = vec![0u8; BS];
                    let at = BlockRef {
                        schema,
                        segment: Segment::Scan,
                        number,
                    };
                    format_scan_block(&mut s, at, DS, obfuscate);
                    assert!(halves.insert(s[..4096].to_vec()));
                    assert!(halves.insert(s[4096..].to_vec()));
                }
            }
        }
        // 16 KiB blocks: every 4 KiB chunk is unique too.
        let mut chunks = HashSet::new();
        for number in 0..10 {
            let mut b = vec![0u8; 16384];
            format_table_block(&mut b, table(0, number), DS, number, false);
            for c in b.chunks(4096) {
                assert!(chunks.insert(c.to_vec()));
            }
        }
    }

    /// Distinct 8-byte words over a set of blocks: a stand-in for what a
    /// compressor (or dedupe at a small grain) could fold.
    fn distinct_words(blocks: &[Vec<u8>]) -> usize {
        blocks
            .iter()
            .flat_map(|b| b.chunks_exact(8).map(|w| w.to_vec()))
            .collect::<HashSet<_>>()
            .len()
    }

    #[test]
    fn the_default_filler_compresses_and_the_obfuscated_does_not() {
        let plain: Vec<Vec<u8>> = (0..20).map(|n| block(table(0, n), n * 7, false)).collect();
        let obf: Vec<Vec<u8>> = (0..20).map(|n| block(table(0, n), n * 7, true)).collect();
        let words = 20 * BS / 8;
        let plain_distinct = distinct_words(&plain);
        let obf_distinct = distinct_words(&obf);
        assert!(plain_distinct * 10 < words, "{plain_distinct} of {words}");
        assert!(obf_distinct * 10 > words * 9, "{obf_distinct} of {words}");
        // Byte alphabet: text against noise.
        let alphabet = |b: &[u8]| b.iter().collect::<HashSet<_>>().len();
        assert!(alphabet(&plain[3][filler_start(BS)..BS - 16]) < 40);
        assert!(alphabet(&obf[3][filler_start(BS)..BS - 16]) > 200);
    }

    #[test]
    fn index_leaves_round_trip_and_end_at_their_last_key() {
        let mut b = vec![0u8; BS];
        let at = BlockRef {
            schema: 0,
            segment: Segment::Index,
            number: 2,
        };
        format_index_leaf(&mut b, at, DS, &[10, 20, 30]);
        assert_eq!(check(&b, at, DS).unwrap(), 0);
        assert_eq!(index_entry(&b, 0), Some(10));
        assert_eq!(index_entry(&b, 2), Some(30));
        assert_eq!(index_entry(&b, 3), None);
        assert_eq!(index_entry(&b, usize::MAX), None);
        assert_eq!(
            read_row(&b, at, DS).unwrap_err().to_string(),
            "an index leaf holds no row"
        );
        b[BLOCK_HEADER_BYTES + 8] ^= 4;
        assert!(check(&b, at, DS)
            .unwrap_err()
            .to_string()
            .starts_with("bad checksum"));
    }

    #[test]
    fn the_key_map_is_a_bijection_and_scatters_neighbours() {
        for n in [1u64, 2, 3, 5, 1000, 4096, 4097, 10_007] {
            let m = KeyMap::new(99, n);
            let mut seen = vec![false; n as usize];
            for key in 0..n {
                let b = m.block_of(key);
                assert!(b < n);
                assert!(!seen[b as usize], "n={n}: block {b} twice");
                seen[b as usize] = true;
                assert_eq!(m.key_of(b), key);
            }
        }
        let m = KeyMap::new(99, 10_000);
        let adjacent = (0..999)
            .filter(|&k| m.block_of(k).abs_diff(m.block_of(k + 1)) == 1)
            .count();
        assert!(adjacent < 20, "{adjacent} neighbours stayed adjacent");
        assert_ne!(
            (0..100).map(|k| m.block_of(k)).collect::<Vec<_>>(),
            (0..100)
                .map(|k| KeyMap::new(100, 10_000).block_of(k))
                .collect::<Vec<_>>()
        );
    }
}
