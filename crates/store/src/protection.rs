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
//! a second opinion for the long tail of formats, by `wipefs --no-act` (libblkid)
//! where it is installed: a signature either one finds stops the label. Where the
//! second opinion cannot be had, the command says so.
//!
//! `--force` overrides content, and then the overridden signatures are erased
//! at their own offsets (what `wipefs` does), not just where the header copies
//! land: a btrfs superblock at 64 KiB or a GPT backup at the last LBA left
//! behind would let udev, or a partitioner, claim the disk again.

use std::path::Path;
use std::process::Command;

use cairn_format::foreign::{self, DeviceSample, Found, HEAD_SAMPLE_BYTES, TAIL_SAMPLE_BYTES};
use cairn_io::host::Host;
use cairn_io::probe::holder_name;
use cairn_io::{DeviceId, DeviceProbe, IoEngine, IoError};
use serde::Deserialize;

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
pub fn recognise(head: &[u8], tail: &[u8], device_size_bytes: u64) -> Vec<Found> {
    foreign::recognise(&DeviceSample {
        head,
        tail,
        device_size_bytes,
    })
}

/// A signature found by `wipefs` (libblkid), with where its magic lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalSignature {
    /// `a minix signature (found by wipefs)`.
    pub what: String,
    pub offset_bytes: u64,
    pub len_bytes: u64,
}

/// What the second opinion said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalScan {
    pub found: Vec<ExternalSignature>,
    /// Why there is no second opinion (wipefs missing or failing), if there is none.
    pub unavailable: Option<String>,
}

#[derive(Deserialize)]
struct WipefsReport {
    signatures: Vec<WipefsSignature>,
}

#[derive(Deserialize)]
struct WipefsSignature {
    offset: String,
    #[serde(rename = "type")]
    kind: String,
    label: Option<String>,
    length: u64,
}

/// Ask `wipefs --no-act` (libblkid's probe of every signature it knows, without
/// caching) what it finds. Read-only.
pub fn external_signatures(path: &Path) -> ExternalScan {
    let output = match Command::new("wipefs")
        .args(["--no-act", "--json", "--output", "OFFSET,TYPE,LABEL,LENGTH"])
        .arg(path)
        .output()
    {
        Ok(output) => output,
        Err(e) => {
            return ExternalScan {
                found: Vec::new(),
                unavailable: Some(format!(
                    "wipefs could not run ({e}); only Cairn's own recognisers were used"
                )),
            }
        }
    };
    let parsed: Option<WipefsReport> = if output.stdout.iter().all(u8::is_ascii_whitespace) {
        Some(WipefsReport {
            signatures: Vec::new(),
        })
    } else {
        serde_json::from_slice(&output.stdout).ok()
    };
    let unavailable = |why: String| ExternalScan {
        found: Vec::new(),
        unavailable: Some(format!(
            "wipefs {why}; only Cairn's own recognisers were used"
        )),
    };
    let report = match parsed {
        Some(report) if output.status.success() => report,
        _ => {
            return unavailable(format!(
                "failed ({})",
                String::from_utf8_lossy(&output.stderr)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        }
    };
    let mut found = Vec::new();
    for s in report.signatures {
        let Ok(offset_bytes) = u64::from_str_radix(s.offset.trim_start_matches("0x"), 16) else {
            return unavailable(format!(
                "reported an offset that is not a number ({})",
                s.offset
            ));
        };
        found.push(ExternalSignature {
            what: match s.label.filter(|l| !l.is_empty()) {
                Some(label) => format!(
                    "a {} signature labelled '{label}' (found by wipefs)",
                    s.kind
                ),
                None => format!("a {} signature (found by wipefs)", s.kind),
            },
            offset_bytes,
            len_bytes: s.length.max(1),
        });
    }
    ExternalScan {
        found,
        unavailable: None,
    }
}

/// What is on the device that someone may own.
pub fn content_obstacles(
    scan: &HeaderScan,
    found: &[Found],
    external: &[ExternalSignature],
) -> Vec<Obstacle> {
    let mut obstacles = Vec::new();
    match scan.health() {
        HeaderHealth::None => {}
        HeaderHealth::Corrupt => obstacles.push(Obstacle::CairnLabel {
            description: "a damaged Cairn header with no good copy".to_string(),
        }),
        _ => {
            if let Some(newest) = scan.newest() {
                let h = &newest.header;
                let group = h
                    .group_uuid
                    .map(|g| format!(", member of disk group {g}"))
                    .unwrap_or_default();
                obstacles.push(Obstacle::CairnLabel {
                    description: format!("Cairn disk {} (uuid {}{group})", h.label, h.disk_uuid),
                });
            }
        }
    }
    obstacles.extend(found.iter().map(|f| Obstacle::Foreign {
        what: f.signature.to_string(),
    }));
    // wipefs names what Cairn's recognisers already named in other words; add
    // only what they missed.
    let ours: Vec<(u64, u64)> = found
        .iter()
        .flat_map(|f| f.magic_ranges.iter().copied())
        .collect();
    obstacles.extend(
        external
            .iter()
            .filter(|e| {
                !ours
                    .iter()
                    .any(|(o, l)| e.offset_bytes >= *o && e.offset_bytes < o + l.max(&1))
            })
            .map(|e| Obstacle::Foreign {
                what: e.what.clone(),
            }),
    );
    obstacles
}

/// Byte ranges to zero so that the overridden signatures disappear, as `wipefs`
/// erases them: each magic widened to whole logical sectors (and kept inside the
/// device of `size_bytes`), with the new header blocks (`keep`, sector-aligned)
/// cut out — they were just written and already cover whatever magic lay in them.
pub fn erase_ranges(
    found: &[Found],
    external: &[ExternalSignature],
    sector_bytes: u64,
    size_bytes: u64,
    keep: &[(u64, u64)],
) -> Vec<(u64, u64)> {
    let device_end = size_bytes / sector_bytes * sector_bytes;
    let mut ranges: Vec<(u64, u64)> = found
        .iter()
        .flat_map(|f| f.magic_ranges.iter().copied())
        .chain(external.iter().map(|e| (e.offset_bytes, e.len_bytes)))
        .filter(|(offset, _)| *offset < device_end)
        .map(|(offset, len)| {
            let start = offset / sector_bytes * sector_bytes;
            let end = offset.saturating_add(len).div_ceil(sector_bytes) * sector_bytes;
            (start, end.min(device_end))
        })
        .flat_map(|range| subtract(range, keep))
        .map(|(start, end)| (start, end - start))
        .collect();
    ranges.sort_unstable();
    ranges.dedup();
    ranges
}

/// `[start, end)` minus every `(offset, length)` in `holes`, as `[start, end)` pieces.
fn subtract(range: (u64, u64), holes: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut pieces = vec![range];
    for (offset, len) in holes {
        let (h_start, h_end) = (*offset, offset + len);
        pieces = pieces
            .into_iter()
            .flat_map(|(start, end)| {
                let mut left = Vec::with_capacity(2);
                if start < h_start.min(end) {
                    left.push((start, h_start.min(end)));
                }
                if end > h_end.max(start) {
                    left.push((h_end.max(start), end));
                }
                left
            })
            .collect();
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_format::foreign::Signature;

    fn found(ranges: Vec<(u64, u64)>) -> Found {
        Found {
            signature: Signature::Luks,
            magic_ranges: ranges,
        }
    }

    #[test]
    fn erase_ranges_cover_the_magic_in_whole_sectors_and_spare_the_new_header() {
        let keep = [(0, 4096), (1 << 20, 4096)];
        // Inside copy 0: nothing to do. At 64 KiB: one sector.
        let f = [found(vec![(1080, 2), (0x10040, 8)])];
        assert_eq!(
            erase_ranges(&f, &[], 512, 64 << 20, &keep),
            vec![(0x10000, 512)]
        );
        // Straddling copy 0's end: only the part beyond it.
        let f = [found(vec![(4090, 10)])];
        assert_eq!(
            erase_ranges(&f, &[], 512, 64 << 20, &keep),
            vec![(4096, 512)]
        );
        assert_eq!(
            erase_ranges(&f, &[], 4096, 64 << 20, &keep),
            vec![(4096, 4096)]
        );
        // Near the end: never past it.
        let f = [found(vec![((64 << 20) - 8, 16)])];
        assert_eq!(
            erase_ranges(&f, &[], 4096, 64 << 20, &[]),
            vec![((64 << 20) - 4096, 4096)]
        );
        // A range around a whole header block keeps both sides.
        assert_eq!(
            subtract((0, 3 << 20), &[(1 << 20, 4096)]),
            vec![(0, 1 << 20), ((1 << 20) + 4096, 3 << 20)]
        );
        // wipefs offsets are widened to a sector.
        let e = [ExternalSignature {
            what: "x".into(),
            offset_bytes: 0x410,
            len_bytes: 2,
        }];
        assert_eq!(erase_ranges(&[], &e, 4096, 64 << 20, &[]), vec![(0, 4096)]);
    }
}
