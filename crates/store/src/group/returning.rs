//! Whether a disk recorded OFFLINE may come back: what its device holds
//! now, read from the device, and the one rule that judges it, for a mount
//! that finds the disk and for `group online` alike.

use cairn_format::group::{DiskEntry, SUPER_SLOT_OFFSETS_BYTES};
use cairn_io::{DeviceId, IoEngine};
use uuid::Uuid;

use super::slots::read_slot;
use crate::header_copies::HeaderScan;

/// What a member's device holds now, read before the disk may come back
/// (at a mount, or at `group online` long after it went OFFLINE: the image
/// may have been swapped meanwhile — an older copy put back, the file
/// emptied, another group's disk in its place). Bytes read, never trusted
/// from memory.
#[derive(Debug, Clone)]
pub struct DeviceProbe {
    /// The newest good header copy: its group, disk uuid and label; `None`
    /// when no copy of a Cairn label can be read (what `why` says).
    pub label: Option<(Option<Uuid>, Uuid, String)>,
    /// Why no label was read, when none was.
    pub why: Option<String>,
    /// The newest superblock generation on it for the group it should be
    /// in (0: none readable).
    pub generation: u64,
    /// The device's size now, when known.
    pub size_bytes: Option<u64>,
}

/// Read what `device` holds now ([`DeviceProbe`]), for group `group`.
pub fn probe_device(engine: &mut dyn IoEngine, device: DeviceId, group: Uuid) -> DeviceProbe {
    let size_bytes = engine.geometry(device).map(|g| g.size_bytes);
    let scan = match HeaderScan::read(engine, device) {
        Ok(scan) => scan,
        Err(e) => {
            return DeviceProbe {
                label: None,
                why: Some(format!("its header cannot be read: {e}")),
                generation: 0,
                size_bytes,
            }
        }
    };
    let Some(header) = scan
        .good()
        .map(|(_, h)| h.header.clone())
        .max_by_key(|h| h.generation)
    else {
        return DeviceProbe {
            label: None,
            why: Some("no copy of a Cairn label is on it: a blank or overwritten device".into()),
            generation: 0,
            size_bytes,
        };
    };
    let generation = SUPER_SLOT_OFFSETS_BYTES
        .iter()
        .filter_map(|base| read_slot(engine, device, group, *base))
        .map(|s| s.generation)
        .max()
        .unwrap_or(0);
    DeviceProbe {
        label: Some((
            header.group_uuid,
            header.disk_uuid,
            header.label.as_str().to_string(),
        )),
        why: None,
        generation,
        size_bytes,
    }
}

/// Why a member recorded OFFLINE, found on a device, may not come back and
/// be resynced; `None` when it may. The one rule for a mount that finds it
/// and for `group online` (through the service or not): the device must
/// hold this very disk of this very group (its label), be as large as the
/// group recorded, and be the image the group last wrote (its newest
/// superblock generation) — an older copy, a blank device, another group's
/// disk or a copy written elsewhere would be resynced as if it held what
/// the group left there, and serve wrong data.
pub(super) fn returning_refusal(
    entry: &DiskEntry,
    group: (&str, Uuid),
    probe: &DeviceProbe,
) -> Option<String> {
    let (name, uuid) = group;
    if entry.forced() {
        return Some(format!(
            "disk {} was dropped by force: its copies are rebuilt on the other disks, and it leaves the group once `cairn group rebalance` has run",
            entry.label
        ));
    }
    if entry.held() {
        return Some(format!(
            "disk {} was taken offline on request and stays OFFLINE; `cairn group online` brings it back",
            entry.label
        ));
    }
    let advice = format!(
        "attach the disk the group took offline, or drop this one (`cairn group drop-disk {name} {} --force` rebuilds its copies from the mirrors)",
        entry.label
    );
    let Some((their_group, their_disk, their_label)) = &probe.label else {
        return Some(format!(
            "disk {} is not the disk the group took offline: {}; {advice}",
            entry.label,
            probe.why.as_deref().unwrap_or("no Cairn label is on it")
        ));
    };
    if *their_group != Some(uuid) {
        return Some(format!(
            "disk {} is not the disk the group took offline: its device holds {} ({}); {advice}",
            entry.label,
            their_label,
            their_group.map_or_else(
                || "a Cairn disk in no group".to_string(),
                |g| format!("a disk of another group, {g}")
            )
        ));
    }
    if *their_disk != entry.disk_uuid {
        return Some(format!(
            "disk {} is not the disk the group took offline: its device holds disk {their_label} of this group (uuid {their_disk}, not {}), a copy of another member; {advice}",
            entry.label, entry.disk_uuid
        ));
    }
    if let Some(size) = probe.size_bytes.filter(|s| *s < entry.size_bytes) {
        return Some(format!(
            "disk {} is {size} bytes, smaller than the {} bytes the group recorded for it (a truncated file, or a smaller device in its place): it cannot come back; {advice}",
            entry.label, entry.size_bytes
        ));
    }
    let generation = probe.generation;
    if generation as u32 != entry.synced_generation {
        return Some(format!(
            "disk {} is not the image the group took offline (its newest superblock is generation {generation}; the group last wrote generation {} (low 32 bits) to it): an older copy of the disk, or one written elsewhere, cannot be resynced — its data cannot be trusted; {advice}",
            entry.label, entry.synced_generation
        ));
    }
    None
}
