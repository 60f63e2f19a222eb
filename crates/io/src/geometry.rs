//! The facts about a device that decide whether a request is legal.

use serde::Serialize;

/// What an engine needs to know of a device. Built by [`crate::DeviceFile::open`]
/// from the probe, or by a simulator from its configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Geometry {
    pub size_bytes: u64,
    /// Every offset and length must be a multiple of this.
    pub logical_sector_bytes: u32,
    pub physical_sector_bytes: u32,
    /// Largest single device request; bigger requests are split (`max_sectors_kb`).
    pub max_transfer_bytes: u32,
    pub discard: DiscardSupport,
    /// Whether the device says it spins (`queue/rotational`); `None` when
    /// not known (a file, a simulated disk).
    pub rotational: Option<bool>,
}

/// Whether the device accepts discard, and what a discarded range reads back as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "supported")]
pub enum DiscardSupport {
    #[serde(rename = "no")]
    Unsupported,
    #[serde(rename = "yes")]
    Supported {
        granularity_bytes: u32,
        /// True only where the device guarantees zeros (a hole punched in a
        /// file, a loop device over one); otherwise use write-zeroes.
        reads_zeroes: bool,
    },
}

impl Geometry {
    /// The largest transfer that is a whole number of logical sectors and at
    /// most `max_transfer_bytes`.
    pub fn max_transfer_aligned_bytes(&self) -> u64 {
        let sector = u64::from(self.logical_sector_bytes);
        (u64::from(self.max_transfer_bytes) / sector).max(1) * sector
    }

    /// `512n`, `512e`, `4Kn` or `L/P` for anything else.
    pub fn sector_format(&self) -> String {
        sector_format(self.logical_sector_bytes, self.physical_sector_bytes)
    }
}

/// Name a logical/physical sector-size pair as storage people do.
pub fn sector_format(logical: u32, physical: u32) -> String {
    match (logical, physical) {
        (512, 512) => "512n".into(),
        (512, p) if p > 512 => "512e".into(),
        (4096, 4096) => "4Kn".into(),
        (l, p) => format!("{l}/{p}"),
    }
}
