//! What `cairn status` shows, and what the service's metrics export: the
//! groups a service holds, their disks and I/O, the volumes it attached and
//! the long operations, at one moment. Data only: the service fills it
//! (`cairn_serve::metrics`), the CLI renders it.

use serde::{Deserialize, Serialize};

use cairn_io::counted::{DeviceIoSnapshot, OpSnapshot};

/// A disk as the status shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskStatus {
    pub number: u16,
    pub label: String,
    pub failgroup: String,
    pub state: String,
    pub total_aus: u64,
    pub free_aus: Option<u64>,
    pub stale_aus: u64,
    /// AUs of its copies that serve no read now (`DiskInfo::missing_copy_aus`).
    #[serde(default)]
    pub missing_copy_aus: u64,
    /// The data plane's I/O to the disk (file data, resync, rebalance,
    /// scrub; not the metadata plane's own) since the service started.
    #[serde(default)]
    pub io: DeviceIoSnapshot,
}

/// A group as the status shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupStatus {
    pub name: String,
    pub redundancy: String,
    pub total_mb: u64,
    pub free_mb: u64,
    pub usable_file_mb: i64,
    pub offline_disks: usize,
    /// Extents whose redundancy is lowered, and their bytes (one copy
    /// each): `Group::redundancy_lowered`.
    #[serde(default)]
    pub redundancy_lowered_extents: u64,
    #[serde(default)]
    pub redundancy_lowered_bytes: u64,
    pub disks: Vec<DiskStatus>,
    pub reads: OpSnapshot,
    pub writes: OpSnapshot,
    pub syncs: OpSnapshot,
    #[serde(default)]
    pub discards: OpSnapshot,
}

/// A volume attached as a block device, and the I/O its device took as
/// the kernel counts it (`/sys/block/NAME/stat`, since the service
/// attached it): what the file system on it asked, before FUSE and the
/// group.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VolumeStatus {
    /// `+GROUP/path`, from the file the device is bound to.
    pub name: String,
    pub device: String,
    pub size_bytes: u64,
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub discards: u64,
    pub discard_bytes: u64,
    pub flushes: u64,
    /// Requests in flight now.
    pub in_flight: u64,
    /// Milliseconds the device had a request in flight (`io_ticks`).
    pub busy_ms: u64,
}

/// What the service holds and has done, at one moment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub pid: u32,
    pub uptime_seconds: u64,
    pub groups: Vec<GroupStatus>,
    pub operations: Vec<cairn_store::ops::OpStatus>,
    /// Volumes attached from the service's mount.
    #[serde(default)]
    pub volumes: Vec<VolumeStatus>,
}
