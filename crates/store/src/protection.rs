//! What stands between `cairn disk label` and a device: the filter driver's
//! promise, kept in user space.
//!
//! Two kinds of obstacle:
//! - *usage* (never overridable): the device is mounted, an active swap area, the
//!   backing file of a loop device, a path of a multipath device, or held by
//!   device-mapper, md or LVM. Writing under a live user corrupts it whatever the
//!   operator intends; the kernel's exclusive open refuses most of these too.
//! - *content* (overridable with `--force`): another owner's signature — a
//!   filesystem, swap, LVM, md, a partition table, LUKS, Oracle ASM — or a Cairn
//!   label already there. The operator may know that data is unwanted.
//!
//! Content is judged by Cairn's own recognisers (`cairn_format::foreign`) and, as
//! a second opinion for the long tail of formats, by `blkid -p` where it is
//! installed: a signature either one finds stops the label.

use std::path::Path;
use std::process::Command;

use cairn_format::foreign::{self, DeviceSample, Signature, HEAD_SAMPLE_BYTES, TAIL_SAMPLE_BYTES};
use cairn_io::host::Host;
use cairn_io::probe::holder_name;
use cairn_io::{DeviceId, DeviceProbe, IoEngine, IoError};

use crate::header_copies::{HeaderHealth, HeaderScan};

/// Something that stops a device from being labelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Obstacle {
    InUse {
        by: String,
    },
    /// `device` is what to use instead (`/dev/mapper/mpatha`), `kernel_name` its `dm-N`.
    MultipathPath {
        device: String,
        kernel_name: String,
    },
    Held {
        by: Vec<String>,
    },
    Foreign {
        what: String,
    },
    CairnLabel {
        description: String,
    },
}

impl Obstacle {
    /// Whether `--force` may override it.
    pub fn overridable(&self) -> bool {
        matches!(self, Obstacle::Foreign { .. } | Obstacle::CairnLabel { .. })
    }
}

/// Who is using the device now.
pub fn usage_obstacles(probe: &DeviceProbe, host: &Host) -> Vec<Obstacle> {
    let mut found = Vec::new();
    if let Some(by) = probe.in_use.describe() {
        found.push(Obstacle::InUse { by });
    }
    if let Some(block) = &probe.block {
        if let Some(parent) = &block.multipath_parent {
            let device = match &parent.mapper_path {
                Some(mapper) => mapper.display().to_string(),
                None => format!("/dev/{}", parent.kernel_name),
            };
            found.push(Obstacle::MultipathPath {
                device,
                kernel_name: parent.kernel_name.clone(),
            });
        } else if !block.holders.is_empty() {
            found.push(Obstacle::Held {
                by: block.holders.iter().map(|h| holder_name(host, h)).collect(),
            });
        }
    }
    found
}

/// The first and last bytes of a device, as the recognisers want them.
pub fn read_sample(
    engine: &mut dyn IoEngine,
    device: DeviceId,
) -> Result<(Vec<u8>, Vec<u8>), IoError> {
    let geometry = engine
        .geometry(device)
        .ok_or(IoError::UnknownDevice(device))?
        .clone();
    let sector = u64::from(geometry.logical_sector_bytes);
    let size = geometry.size_bytes / sector * sector;
    let head_len = (HEAD_SAMPLE_BYTES as u64).min(size);
    let tail_len = (TAIL_SAMPLE_BYTES as u64).min(size);
    let mut read = |offset_bytes: u64, len: u64| -> Result<Vec<u8>, IoError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        Ok(engine.read_at(device, offset_bytes, len as usize)?.to_vec())
    };
    let head = read(0, head_len)?;
    let tail = read(size - tail_len, tail_len)?;
    Ok((head, tail))
}

/// Signatures of other owners in a sample.
pub fn recognise(head: &[u8], tail: &[u8], device_size_bytes: u64) -> Vec<Signature> {
    foreign::recognise(&DeviceSample {
        head,
        tail,
        device_size_bytes,
    })
}

/// What `blkid -p` (libblkid's low-level probe, no cache) finds, described; empty
/// when it finds nothing or is not installed.
pub fn blkid_signatures(path: &Path) -> Vec<String> {
    let Ok(output) = Command::new("blkid")
        .args(["-p", "-o", "export"])
        .arg(path)
        .output()
    else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .map(str::to_string)
    };
    match output.status.code() {
        Some(0) => {
            let mut found = Vec::new();
            if let Some(kind) = field("TYPE") {
                let label = field("LABEL")
                    .map(|l| format!(" labelled '{l}'"))
                    .unwrap_or_default();
                found.push(format!("a {kind} signature{label} (found by blkid)"));
            }
            if let Some(table) = field("PTTYPE") {
                found.push(format!("a {table} partition table (found by blkid)"));
            }
            found
        }
        Some(8) => vec!["several conflicting signatures (blkid: ambivalent result)".to_string()],
        _ => Vec::new(),
    }
}

/// What is on the device that someone may own.
pub fn content_obstacles(
    scan: &HeaderScan,
    signatures: &[Signature],
    external: &[String],
) -> Vec<Obstacle> {
    let mut found = Vec::new();
    match scan.health() {
        HeaderHealth::None => {}
        HeaderHealth::Corrupt => found.push(Obstacle::CairnLabel {
            description: "a damaged Cairn header with no good copy".to_string(),
        }),
        _ => {
            if let Some(newest) = scan.newest() {
                let h = &newest.header;
                let group = h
                    .group_uuid
                    .map(|g| format!(", member of disk group {g}"))
                    .unwrap_or_default();
                found.push(Obstacle::CairnLabel {
                    description: format!("Cairn disk {} (uuid {}{group})", h.label, h.disk_uuid),
                });
            }
        }
    }
    found.extend(signatures.iter().map(|s| Obstacle::Foreign {
        what: s.to_string(),
    }));
    found.extend(
        external
            .iter()
            .map(|what| Obstacle::Foreign { what: what.clone() }),
    );
    found
}
