//! Per-disk space as the devices hold it: what the group uses, what is
//! free and returnable, and what a thin device physically holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::group::Group;

/// Per-disk space as the devices hold it (for thin provisioning: what a sparse
/// file really occupies).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct DiskSpaceReport {
    pub number: u16,
    pub label: String,
    pub path: Option<PathBuf>,
    pub size_bytes: u64,
    pub group_used_bytes: u64,
    /// Free data AUs (`None`: the disk's table is not loaded, it is not in
    /// service).
    pub free_bytes: Option<u64>,
    /// Free, and not known to hold nothing on the device: what `cairn
    /// group reclaim` would give back (docs/thin-reclaim.md).
    pub returnable_bytes: Option<u64>,
    /// Bytes the device physically holds, where it can tell: a file's
    /// allocated blocks, or a loop device's backing file's.
    pub device_allocated_bytes: Option<u64>,
    /// Bytes of its extent copies that serve no read now (all it holds
    /// while it is not ONLINE, its stale AUs when it is): by this much the
    /// group is short of its redundancy here, until `group online` (or the
    /// rebuild after a drop) restores them. 0 on every disk: every extent
    /// has all its copies.
    pub missing_copy_bytes: u64,
}

pub fn space(group: &Group<'_>, engine_paths: &BTreeMap<u32, PathBuf>) -> Vec<DiskSpaceReport> {
    group
        .disks()
        .into_iter()
        .map(|d| {
            let path = d.device.and_then(|id| engine_paths.get(&id.0).cloned());
            let allocated = path.as_deref().and_then(physically_held);
            DiskSpaceReport {
                number: d.number,
                label: d.label,
                path,
                size_bytes: d.size_bytes,
                group_used_bytes: d
                    .free_aus
                    .map_or(0, |free| (d.total_aus - free) * group.au_bytes()),
                free_bytes: d.free_aus.map(|f| f * group.au_bytes()),
                returnable_bytes: group.returnable_bytes(d.number),
                device_allocated_bytes: allocated,
                missing_copy_bytes: d.missing_copy_aus * group.au_bytes(),
            }
        })
        .collect()
}

/// What the storage under `path` physically holds, where it can be known:
/// a file's allocated blocks; a loop device's backing file's. `None` for
/// other devices (an array's LUN says nothing of it to the host).
pub fn physically_held(path: &Path) -> Option<u64> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    if m.file_type().is_file() {
        return Some(m.blocks() * 512);
    }
    if !m.file_type().is_block_device() {
        return None;
    }
    let real = std::fs::canonicalize(path).ok()?;
    let name = real.file_name()?.to_str()?;
    let backing = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    let backing = backing.trim_end_matches('\n');
    let b = std::fs::metadata(backing.trim_end_matches(" (deleted)")).ok()?;
    b.file_type().is_file().then_some(b.blocks() * 512)
}
