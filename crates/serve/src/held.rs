//! A group as the service holds it: what the control socket's commands
//! and the metrics see of it.

use std::sync::Arc;

use cairn_store::group::LiveGroup;

use crate::fs::Names;
use crate::io_stats::IoStats;

/// A group as the control socket's commands see it.
#[derive(Clone)]
pub struct Held {
    /// Upper case, as the group is named.
    pub name: String,
    pub group: Arc<LiveGroup>,
    /// Its name space as the file system knows it (what `cairn rm` goes
    /// through).
    pub names: Names,
    /// What the file system served on it.
    pub stats: Arc<IoStats>,
}
