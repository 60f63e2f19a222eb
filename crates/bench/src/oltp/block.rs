//! The on-disk format of table, index and scan blocks. (Stub: owned by the data helper.)

use super::layout::BlockRef;

/// Bytes of one column; a row has [`COLUMNS`] of them.
pub const COLUMN_BYTES: usize = 128;
/// Columns per row (SLOB's table has 19 character columns of 128 bytes).
pub const COLUMNS: usize = 19;

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

/// Check a block's checksum and identity (dataset, schema, segment, number).
/// Returns a one-line description of the first problem found.
pub fn check(_buf: &[u8], _expect: BlockRef, _dataset: u64) -> Result<u64, String> {
    unimplemented!("data helper")
}

/// Check a table or scan block (as [`check`]) and read its row: the CPU a
/// database spends on a row it fetches.
pub fn read_row(_buf: &[u8], _expect: BlockRef, _dataset: u64) -> Result<Row, String> {
    unimplemented!("data helper")
}

/// The table block number that index leaf `buf` maps its `slot`-th key to.
/// The caller has checked the leaf with [`check`]; `None` past the leaf's last key.
pub fn index_entry(_buf: &[u8], _slot: usize) -> Option<u64> {
    unimplemented!("data helper")
}

/// Change the row of a checked table block as an update does: version + 1,
/// `columns` of its 128-byte columns and the numeric column rewritten, checksum
/// renewed. The changed bytes (the change vector: `columns` × 128 bytes) are
/// appended to `change`. Returns the row as it now is.
pub fn update_row(_buf: &mut [u8], _columns: usize, _change: &mut Vec<u8>) -> Row {
    unimplemented!("data helper")
}
