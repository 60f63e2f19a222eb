//! `cairn disk list`: every device the discovery string finds, known by its
//! label and UUID rather than its path.
//!
//! Identity. The same disk can appear at several paths: a symlink, a `/dev/mapper`
//! name and its `dm-N`, each path of a multipath LUN, a loop device and its
//! backing file, two SCSI paths with one WWID. Such paths are grouped (a
//! union-find over identity keys) and listed once, under the preferred path —
//! the multipath device, else a block device, else a file — with the others in
//! `also_seen_at`. Distinct devices carrying the same disk UUID (a cloned LUN, a
//! copied image) are kept apart and flagged as a conflict: mounting either could
//! take the other's place.
//!
//! [`gather`] reads devices; [`build`] is a pure function of what was read.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cairn_io::host::Host;
use cairn_io::probe::DeviceKind;
use cairn_io::{DeviceFile, DeviceProbe, FileEngine, OpenMode};
use serde::Serialize;
use uuid::Uuid;

use crate::header_copies::{HeaderHealth, HeaderScan};
use crate::protection;

/// What a device is to Cairn (the `asmcmd lsdsk` header status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DiskStatus {
    /// No signature at all: free to label.
    Candidate,
    /// Carries a Cairn label, in no group.
    Provisioned,
    /// Carries a Cairn label and belongs to a disk group.
    Member,
    /// Carries a Cairn label and was dropped from a group (the drop
    /// completed): free to add to a group, like a provisioned disk.
    Former,
    /// Carries another owner's signature.
    Foreign,
    /// Could not be read.
    Unknown,
}

impl std::fmt::Display for DiskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DiskStatus::Candidate => "CANDIDATE",
            DiskStatus::Provisioned => "PROVISIONED",
            DiskStatus::Member => "MEMBER",
            DiskStatus::Former => "FORMER",
            DiskStatus::Foreign => "FOREIGN",
            DiskStatus::Unknown => "UNKNOWN",
        })
    }
}

/// One device as read by [`gather`].
#[derive(Debug, Clone)]
pub struct Candidate {
    pub path: PathBuf,
    pub probe: Option<DeviceProbe>,
    pub scan: Option<HeaderScan>,
    /// Other owners' signatures, described.
    pub foreign: Vec<String>,
    pub error: Option<String>,
    /// Keys naming the physical object behind the path; shared keys mean one disk.
    pub identity: Vec<String>,
}

/// One disk in the listing.
#[derive(Debug, Clone, Serialize)]
pub struct DiskEntry {
    pub path: PathBuf,
    pub kind: Option<DeviceKind>,
    pub status: DiskStatus,
    pub label: Option<String>,
    pub disk_uuid: Option<Uuid>,
    pub group_uuid: Option<Uuid>,
    /// For a FORMER disk, the group it was dropped from.
    pub former_group_uuid: Option<Uuid>,
    pub header: HeaderHealth,
    /// The state of each header copy.
    pub copies: Vec<String>,
    pub foreign: Vec<String>,
    pub size_bytes: Option<u64>,
    pub logical_sector_bytes: Option<u32>,
    pub physical_sector_bytes: Option<u32>,
    pub sector_format: Option<String>,
    pub max_transfer_bytes: Option<u32>,
    /// `None` when the device does not take discard.
    pub discard_granularity_bytes: Option<u32>,
    pub multipath_parent: Option<PathBuf>,
    /// Other paths to the same disk.
    pub also_seen_at: Vec<PathBuf>,
    /// Other disks carrying the same disk UUID.
    pub uuid_conflict_with: Vec<PathBuf>,
    pub notes: Vec<String>,
    pub error: Option<String>,
}

fn inode_key(path: &Path) -> Option<String> {
    fs::metadata(path)
        .ok()
        .map(|m| format!("ino:{}:{}", m.dev(), m.ino()))
}

pub(crate) fn identity(probe: &DeviceProbe) -> Vec<String> {
    let mut keys = Vec::new();
    match &probe.block {
        Some(block) => {
            keys.push(format!("blk:{}", block.name));
            if let Some(parent) = &block.multipath_parent {
                keys.push(format!("blk:{}", parent.kernel_name));
            }
            if let Some(wwid) = &block.wwid {
                keys.push(format!("wwid:{wwid}"));
            }
            if let Some(backing) = &block.loop_backing_file {
                keys.extend(inode_key(backing));
            }
        }
        None => keys.extend(inode_key(&probe.canonical_path)),
    }
    keys
}

/// How much [`gather`] reads of each device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Header copies only: enough to know labels and identities.
    Labels,
    /// Also other owners' signatures (a sample of each device, and wipefs).
    Signatures,
}

/// Open, probe and read every path (read-only). A device that cannot be read is
/// kept with its error; an empty one (a loop device with nothing attached) is left out.
pub fn gather(
    engine: &mut dyn FileEngine,
    host: &Host,
    paths: &[PathBuf],
    depth: Depth,
) -> Vec<Candidate> {
    let mut out = Vec::new();
    for path in paths {
        let unreadable = |error: String| Candidate {
            path: path.clone(),
            probe: None,
            scan: None,
            foreign: Vec::new(),
            error: Some(error),
            identity: inode_key(path).into_iter().collect(),
        };
        let device = match DeviceFile::open(path, OpenMode::READ, host) {
            Ok(d) => d,
            Err(e) => {
                out.push(unreadable(e.to_string()));
                continue;
            }
        };
        if device.probe().size_bytes == 0 {
            continue;
        }
        let probe = device.probe().clone();
        let id = engine.attach(device);
        let scan = match HeaderScan::read(engine, id) {
            Ok(scan) => scan,
            Err(e) => {
                out.push(unreadable(format!("{}: {e}", path.display())));
                continue;
            }
        };
        let foreign = match depth {
            Depth::Labels => Vec::new(),
            Depth::Signatures => match signatures(engine, id, path, &probe, &scan) {
                Ok(foreign) => foreign,
                Err(e) => {
                    out.push(unreadable(format!("{}: {e}", path.display())));
                    continue;
                }
            },
        };
        out.push(Candidate {
            path: path.clone(),
            identity: identity(&probe),
            probe: Some(probe),
            scan: Some(scan),
            foreign,
            error: None,
        });
    }
    out
}

/// Other owners' signatures on a device, described: Cairn's recognisers, and
/// wipefs where they find nothing and there is no Cairn header either.
fn signatures(
    engine: &mut dyn FileEngine,
    id: cairn_io::DeviceId,
    path: &Path,
    probe: &DeviceProbe,
    scan: &HeaderScan,
) -> Result<Vec<String>, cairn_io::IoError> {
    let (head, tail) = protection::read_sample(engine, id)?;
    let found: Vec<String> = protection::recognise(&head, &tail, probe.size_bytes)
        .iter()
        .map(|f| f.signature.to_string())
        .collect();
    if !found.is_empty() || scan.health() != HeaderHealth::None {
        return Ok(found);
    }
    Ok(protection::external_signatures(path)
        .found
        .into_iter()
        .map(|e| e.what)
        .collect())
}

fn preference(c: &Candidate) -> (u8, usize, PathBuf) {
    let rank = match c.probe.as_ref().and_then(|p| p.block.as_ref()) {
        Some(b) if b.device_mapper.as_ref().is_some_and(|dm| dm.multipath) => 0,
        Some(_) if c.path.starts_with("/dev/mapper") => 1,
        Some(_) => 2,
        None if c.probe.is_some() => 3,
        None => 4,
    };
    (rank, c.path.as_os_str().len(), c.path.clone())
}

/// Group candidates into disks and describe each. Pure.
pub fn build(candidates: Vec<Candidate>) -> Vec<DiskEntry> {
    // Union-find over candidates sharing an identity key.
    let n = candidates.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for i in 0..n {
        for j in (i + 1)..n {
            if candidates[i]
                .identity
                .iter()
                .any(|k| candidates[j].identity.contains(k))
            {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                parent[b] = a;
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of_root: Vec<Option<usize>> = vec![None; n];
    for i in 0..n {
        let r = root(&mut parent, i);
        match group_of_root[r] {
            Some(g) => groups[g].push(i),
            None => {
                group_of_root[r] = Some(groups.len());
                groups.push(vec![i]);
            }
        }
    }

    let mut entries: Vec<DiskEntry> = groups
        .iter()
        .map(|members| {
            let best = *members
                .iter()
                .min_by_key(|i| preference(&candidates[**i]))
                .expect("invariant: a group has a member");
            let mut entry = describe(&candidates[best]);
            entry.also_seen_at = members
                .iter()
                .filter(|i| **i != best)
                .map(|i| candidates[*i].path.clone())
                .collect();
            if !entry.also_seen_at.is_empty() {
                let others: Vec<String> = entry
                    .also_seen_at
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                entry
                    .notes
                    .push(format!("same disk also seen at {}", others.join(", ")));
            }
            entry
        })
        .collect();

    // Distinct disks with one UUID: a clone.
    for i in 0..entries.len() {
        let Some(uuid) = entries[i].disk_uuid else {
            continue;
        };
        let others: Vec<PathBuf> = entries
            .iter()
            .enumerate()
            .filter(|(j, e)| *j != i && e.disk_uuid == Some(uuid))
            .map(|(_, e)| e.path.clone())
            .collect();
        if !others.is_empty() {
            let names: Vec<String> = others.iter().map(|p| p.display().to_string()).collect();
            entries[i].notes.push(format!(
                "UUID CONFLICT: disk uuid {uuid} is also on {} (a cloned LUN?)",
                names.join(", ")
            ));
            entries[i].uuid_conflict_with = others;
        }
    }
    entries
}

fn describe(c: &Candidate) -> DiskEntry {
    let mut entry = DiskEntry {
        path: c.path.clone(),
        kind: c.probe.as_ref().map(|p| p.kind),
        status: DiskStatus::Unknown,
        label: None,
        disk_uuid: None,
        group_uuid: None,
        former_group_uuid: None,
        header: HeaderHealth::None,
        copies: Vec::new(),
        foreign: c.foreign.clone(),
        size_bytes: None,
        logical_sector_bytes: None,
        physical_sector_bytes: None,
        sector_format: None,
        max_transfer_bytes: None,
        discard_granularity_bytes: None,
        multipath_parent: None,
        also_seen_at: Vec::new(),
        uuid_conflict_with: Vec::new(),
        notes: Vec::new(),
        error: c.error.clone(),
    };
    if let Some(p) = &c.probe {
        let geometry = p.geometry();
        entry.size_bytes = Some(p.size_bytes);
        entry.logical_sector_bytes = Some(p.logical_sector_bytes);
        entry.physical_sector_bytes = Some(p.physical_sector_bytes);
        entry.sector_format = Some(p.sector_format.clone());
        entry.max_transfer_bytes = Some(p.max_transfer_bytes);
        entry.discard_granularity_bytes = match geometry.discard {
            cairn_io::geometry::DiscardSupport::Supported {
                granularity_bytes, ..
            } => Some(granularity_bytes),
            cairn_io::geometry::DiscardSupport::Unsupported => None,
        };
        if let Some(parent) = p.block.as_ref().and_then(|b| b.multipath_parent.as_ref()) {
            let to_use = parent
                .mapper_path
                .clone()
                .unwrap_or_else(|| PathBuf::from("/dev").join(&parent.kernel_name));
            entry.notes.push(format!(
                "a path of multipath device {}; use that instead",
                to_use.display()
            ));
            entry.multipath_parent = Some(to_use);
        }
    }
    let Some(scan) = &c.scan else {
        return entry;
    };
    entry.header = scan.health();
    entry.copies = scan.describe_copies();
    if let Some(newest) = scan.newest() {
        let h = &newest.header;
        entry.label = Some(h.label.to_string());
        entry.disk_uuid = Some(h.disk_uuid);
        entry.group_uuid = h.group_uuid;
        entry.former_group_uuid = h.former_group.filter(|_| h.group_uuid.is_none());
    }
    entry.status = match entry.header {
        HeaderHealth::None if c.foreign.is_empty() => DiskStatus::Candidate,
        HeaderHealth::None => DiskStatus::Foreign,
        _ if entry.group_uuid.is_some() => DiskStatus::Member,
        _ if entry.former_group_uuid.is_some() => DiskStatus::Former,
        _ => DiskStatus::Provisioned,
    };
    match entry.header {
        HeaderHealth::Damaged => entry.notes.push(format!(
            "header damaged; run: cairn disk repair {}",
            c.path.display()
        )),
        HeaderHealth::Conflict => entry.notes.push(
            "header copies disagree on the disk UUID; inspect each copy before any repair"
                .to_string(),
        ),
        HeaderHealth::Corrupt => entry
            .notes
            .push("Cairn header with no good copy; it cannot be repaired".to_string()),
        HeaderHealth::Ok | HeaderHealth::None => {}
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header_copies::{CopySlot, CopyState};
    use cairn_format::{DiskHeader, DiskLabel, FeatureSet, HeaderPlacement};

    fn scan_of(label: &str, uuid: u128) -> HeaderScan {
        let size = 64 << 20;
        let header = DiskHeader {
            label: DiskLabel::parse(label).unwrap(),
            disk_uuid: Uuid::from_u128(uuid),
            group_uuid: None,
            former_group: None,
            logical_sector_bytes: 512,
            physical_sector_bytes: 4096,
            device_size_bytes: size,
            created_unix_seconds: 1,
            written_unix_seconds: 1,
            generation: 1,
            features: FeatureSet::default(),
            copy_offsets_bytes: HeaderPlacement::for_device(size)
                .unwrap()
                .offsets_bytes
                .to_vec(),
        };
        let slots = (0..3)
            .map(|i| CopySlot {
                index: i,
                offset_bytes: header.copy_offsets_bytes[i],
                state: CopyState::Good(DiskHeader::decode(&header.encode(i)).unwrap()),
                block: None,
            })
            .collect();
        HeaderScan {
            device_size_bytes: size,
            slots,
            strays: Vec::new(),
        }
    }

    fn candidate(path: &str, keys: &[&str], scan: Option<HeaderScan>) -> Candidate {
        Candidate {
            path: PathBuf::from(path),
            probe: None,
            scan,
            foreign: Vec::new(),
            error: None,
            identity: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn paths_sharing_an_identity_are_one_disk_and_clones_conflict() {
        let entries = build(vec![
            candidate("/disks/a.img", &["ino:1:10"], Some(scan_of("DATA1", 1))),
            candidate("/disks/link-to-a", &["ino:1:10"], Some(scan_of("DATA1", 1))),
            candidate(
                "/disks/copy-of-a.img",
                &["ino:1:11"],
                Some(scan_of("DATA1", 1)),
            ),
            candidate("/disks/b.img", &["ino:1:12"], Some(scan_of("DATA2", 2))),
            // Transitive: c shares a key with d, d with e.
            candidate("/disks/c", &["k1"], None),
            candidate("/disks/d", &["k1", "k2"], None),
            candidate("/disks/e", &["k2"], None),
        ]);
        assert_eq!(entries.len(), 4, "{entries:#?}");
        let a = &entries[0];
        assert_eq!(
            a.path,
            PathBuf::from("/disks/a.img"),
            "the shorter path is preferred"
        );
        assert_eq!(a.also_seen_at, vec![PathBuf::from("/disks/link-to-a")]);
        assert_eq!(
            a.uuid_conflict_with,
            vec![PathBuf::from("/disks/copy-of-a.img")]
        );
        assert_eq!(
            entries[1].uuid_conflict_with,
            vec![PathBuf::from("/disks/a.img")]
        );
        assert!(entries[2].uuid_conflict_with.is_empty());
        assert_eq!(entries[2].status, DiskStatus::Provisioned);
        assert_eq!(entries[3].also_seen_at.len(), 2);
        assert_eq!(
            entries[3].status,
            DiskStatus::Unknown,
            "no scan: could not be read"
        );
    }
}
