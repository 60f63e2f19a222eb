//! What a caller asks of a new group: its redundancy, its disks, its shape.

use cairn_io::DeviceId;
use serde::Serialize;
use uuid::Uuid;

/// Redundancy of a group (copies of every extent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Redundancy {
    External,
    Normal,
    High,
}

impl Redundancy {
    pub fn copies(self) -> u8 {
        match self {
            Self::External => 1,
            Self::Normal => 2,
            Self::High => 3,
        }
    }
    pub fn from_copies(copies: u8) -> Option<Self> {
        match copies {
            1 => Some(Self::External),
            2 => Some(Self::Normal),
            3 => Some(Self::High),
            _ => None,
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "external" => Some(Self::External),
            "normal" => Some(Self::Normal),
            "high" => Some(Self::High),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::External => "EXTERN",
            Self::Normal => "NORMAL",
            Self::High => "HIGH",
        }
    }
}

/// A disk to put into a new group: an attached device that carries a Cairn label.
#[derive(Debug, Clone)]
pub struct NewDisk {
    pub device: DeviceId,
    /// Failure group name; `None`: a group of its own, named after the label.
    pub failgroup: Option<String>,
}

/// What a new group looks like.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub name: String,
    pub redundancy: Redundancy,
    pub au_bytes: u64,
    /// Required logical sector size; `None`: whatever the disks have (they must agree).
    pub sector_bytes: Option<u32>,
    /// Take disks that belong to another group.
    pub force: bool,
    pub now_unix_seconds: u64,
    pub group_uuid: Uuid,
}
