//! Creating a group: everything that can refuse is checked before the
//! first write; then labels, metadata files, the journal, the headers, and
//! the superblocks last (the commit point). See `docs/groups.md`.

use std::collections::BTreeMap;

use cairn_format::group::{
    AuAddr, DiskEntry, DiskState, Extent, FileEntry, FileState, GroupSuper, Template, DISKS_MAX,
    FILE_ALIAS_DIRECTORY, FILE_ATTRIBUTES, FILE_DIRECTORY, FILE_JOURNAL, FILE_TEMPLATES,
    STRIPING_COARSE, STRIPING_FINE,
};
use cairn_format::{group as fmt, DiskHeader, FeatureSet};
use cairn_io::{IoEngine, Request};

use super::alloc::DiskAlloc;
use super::error::{io_err, GroupError};
use super::limits::{member_layout, JOURNAL_BYTES};
use super::mounted::{EngineRef, Group};
use super::parts::files::FileRec;
use super::parts::members::{Clash, Member, Members};
use super::parts::txn::Dirty;
use super::spec::{GroupSpec, NewDisk};
use crate::header_copies::HeaderScan;
use crate::labeling;

/// Create a group on labelled disks attached to `engine`, and return it mounted.
pub fn create<'e>(
    engine: &'e mut dyn IoEngine,
    disks: &[NewDisk],
    spec: &GroupSpec,
) -> Result<Group<'e>, GroupError> {
    let name = crate::names::GroupName::parse(&spec.name)?;
    let copies = spec.redundancy.copies();
    check_spec(disks, spec)?;
    let headers = read_labels(engine, disks, spec)?;
    // Sector sizes: 512e and 512n mix (both have 512-byte logical sectors); 4Kn does not mix with 512.
    let sector = spec.sector_bytes.unwrap_or(headers[0].logical_sector_bytes);
    if let Some(h) = headers.iter().find(|h| h.logical_sector_bytes != sector) {
        return Err(GroupError::Invalid(format!(
            "disk {} has {}-byte logical sectors but the group uses {sector}; 512-byte (512n/512e) and 4096-byte (4Kn) disks cannot mix",
            h.label, h.logical_sector_bytes
        )));
    }
    let (members, failgroups) = new_members(disks, &headers, spec)?;
    if failgroups < usize::from(copies) {
        return Err(GroupError::Invalid(format!(
            "{} redundancy keeps {copies} copies in different failure groups, but the disks form only {} failure group(s); name more disks or give them failure groups with PATH=FAILGROUP",
            spec.redundancy.as_str().to_lowercase(),
            failgroups
        )));
    }

    let mut group = Group::assemble(
        EngineRef::Borrowed(engine),
        GroupSuper {
            name: name.as_str().to_string(),
            copies,
            au_bytes: spec.au_bytes as u32,
            logical_sector_bytes: sector,
            disk_number: 0,
            disk_count: members.count(),
            created_unix_seconds: spec.now_unix_seconds,
            features: FeatureSet {
                incompat: fmt::GROUP_INCOMPAT_STALE_COPIES,
                ro_compat: fmt::GROUP_RO_COMPAT_FILE_ATTRS
                    | fmt::GROUP_RO_COMPAT_CLEAN_MAP
                    | fmt::GROUP_RO_COMPAT_MULTIHOST,
                ..FeatureSet::default()
            },
            file_directory: Extent::new(&[AuAddr { disk: 0, au: 1 }], false),
            journal: Vec::new(),
        },
        spec.group_uuid,
        0,
        members,
    );
    let attributes = group.default_attributes();
    group.settings.load(default_templates(), attributes);
    group.apply_io_timeout();

    group.place_metadata_files(spec)?;

    // The AUs just taken may hold anything: metadata files read "all zeros =
    // empty", so zero them before anything points at them.
    group.zero_metadata_extents(&[
        FILE_DIRECTORY,
        FILE_ALIAS_DIRECTORY,
        FILE_TEMPLATES,
        FILE_ATTRIBUTES,
    ])?;

    // Everything but the superblocks goes straight to its place: nothing refers
    // to it until the superblocks do.
    group.write_initial_metadata()?;

    // The disk headers name the group, then the superblocks make it exist.
    // A crash before any superblock leaves a group that never finished —
    // headers naming a group no disk holds a superblock of — which mount
    // refuses to guess at and `group create --force` takes again; a crash
    // among the superblock writes leaves a whole group (every disk's header
    // names it, and one superblock lists them all), whose next mount writes
    // the superblocks that are missing.
    group.name_group_in_headers(spec.now_unix_seconds)?;
    group.write_superblocks()?;
    group.publish_all();
    Ok(group)
}

/// What [`create`] checks of the request before it reads a disk: the AU
/// size, the group's UUID, the number of disks.
fn check_spec(disks: &[NewDisk], spec: &GroupSpec) -> Result<(), GroupError> {
    if !spec.au_bytes.is_power_of_two()
        || !(fmt::AU_BYTES_MIN..=fmt::AU_BYTES_MAX).contains(&spec.au_bytes)
    {
        return Err(GroupError::Invalid(format!(
            "AU size {} is not a power of two from 1M to 64M; use --au-size 1M, 2M, 4M ... 64M",
            spec.au_bytes
        )));
    }
    if spec.group_uuid.is_nil() {
        return Err(GroupError::Invalid(
            "the group UUID is nil, which a disk header reads as \"in no group\"; give the group another UUID".into(),
        ));
    }
    if disks.is_empty() {
        return Err(GroupError::Invalid(
            "a group needs at least one disk; name them with --disk".into(),
        ));
    }
    if disks.len() > DISKS_MAX {
        return Err(GroupError::Invalid(format!(
            "{} disks; a group holds at most {DISKS_MAX}",
            disks.len()
        )));
    }
    Ok(())
}

/// Each disk's newest good header: a disk without a Cairn label, or (unless
/// `spec.force`) in another group, is refused.
fn read_labels(
    engine: &mut dyn IoEngine,
    disks: &[NewDisk],
    spec: &GroupSpec,
) -> Result<Vec<DiskHeader>, GroupError> {
    let mut headers: Vec<DiskHeader> = Vec::new();
    for d in disks {
        let scan =
            HeaderScan::read(engine, d.device).map_err(io_err(format!("device {}", d.device.0)))?;
        let header = scan
            .good()
            .map(|(_, h)| h.header.clone())
            .max_by_key(|h| h.generation)
            .ok_or_else(|| {
                GroupError::Invalid(format!(
                    "device {} carries no Cairn label; label it first",
                    d.device.0
                ))
            })?;
        if let Some(other) = header.group_uuid {
            if !spec.force {
                return Err(GroupError::Exists(format!(
                    "disk {} already belongs to group {other}; drop it from that group, or use --force to take it",
                    header.label
                )));
            }
        }
        headers.push(header);
    }
    Ok(headers)
}

/// The group's members, numbered in the order named, each in its failure
/// group (its label's name unless named); and how many failure groups they
/// form.
fn new_members(
    disks: &[NewDisk],
    headers: &[DiskHeader],
    spec: &GroupSpec,
) -> Result<(Members, usize), GroupError> {
    // Failure groups.
    let mut fg_ids: BTreeMap<String, u16> = BTreeMap::new();
    let mut members = Members::default();
    for (n, (d, h)) in disks.iter().zip(headers).enumerate() {
        let fg = d
            .failgroup
            .clone()
            .unwrap_or_else(|| h.label.as_str().to_string())
            .to_ascii_uppercase();
        crate::names::GroupName::parse(&fg)
            .map_err(|e| GroupError::Invalid(format!("failure group name: {e}")))?;
        let next = fg_ids.len() as u16;
        let fg_id = *fg_ids.entry(fg.clone()).or_insert(next);
        let layout = member_layout(h.device_size_bytes, spec.au_bytes)
            .map_err(|why| GroupError::Invalid(format!("disk {}: {why}", h.label)))?;
        let label = h.label.as_str();
        match members.clash_with(&h.disk_uuid, label) {
            Some((Clash::Uuid, other)) => {
                return Err(GroupError::Invalid(format!(
                    "disks {} and {label} carry one disk UUID ({}): the same disk named twice, or a copy of it (dd, a cloned LUN, an array snapshot); name each disk once, and give a copy its own identity with `cairn disk label --force` first",
                    other.entry.label, h.disk_uuid
                )))
            }
            Some((Clash::Label, other)) => {
                return Err(GroupError::Invalid(format!(
                    "disks {} and {label} have one label (labels match whatever their case); relabel one with `cairn disk label --force`",
                    other.entry.label
                )))
            }
            None => {}
        }
        let entry = DiskEntry {
            number: n as u16,
            disk_uuid: h.disk_uuid,
            label: h.label.as_str().to_string(),
            failgroup: fg,
            failgroup_id: fg_id,
            state: DiskState::Online,
            au_count: layout.au_count,
            size_bytes: h.device_size_bytes,
            logical_sector_bytes: h.logical_sector_bytes,
            physical_sector_bytes: h.physical_sector_bytes,
            created_unix_seconds: spec.now_unix_seconds,
            flags: 0,
            drop_after_minutes: 0,
            offline_seconds: 0,
            synced_generation: 0,
        };
        members.add(Member::new(
            entry,
            Some(d.device),
            Some(DiskAlloc::empty(layout)),
            0,
        ));
    }
    Ok((members, fg_ids.len()))
}

impl Group<'_> {
    /// The metadata files of a new group, their extents placed like any
    /// file's and taken as written (they are zeroed before anything points
    /// at them), and the journal's capacity.
    fn place_metadata_files(&mut self, spec: &GroupSpec) -> Result<(), GroupError> {
        let copies = spec.redundancy.copies();
        // Metadata files: extents placed like any file's.
        let journal_extents = JOURNAL_BYTES.div_ceil(spec.au_bytes);
        for (file, extents) in [
            (FILE_DIRECTORY, 1),
            (FILE_JOURNAL, journal_extents),
            (FILE_ALIAS_DIRECTORY, 1),
            (FILE_TEMPLATES, 1),
            (FILE_ATTRIBUTES, 1),
        ] {
            let mut list = Vec::new();
            for i in 0..extents {
                let mut e = self.allocate_extent(usize::from(copies), i)?;
                e.initialized = true;
                list.push(e);
            }
            self.files.insert(FileRec {
                entry: FileEntry {
                    number: file,
                    incarnation: 0,
                    state: FileState::Active,
                    copies,
                    striping: STRIPING_COARSE,
                    size_bytes: extents * spec.au_bytes,
                    extent_count: extents,
                    target_bytes: 0,
                    created_unix_seconds: spec.now_unix_seconds,
                    modified_unix_seconds: spec.now_unix_seconds,
                    template: String::new(),
                    attrs: None,
                    direct: Vec::new(),
                    indirect: Vec::new(),
                },
                extents: list,
            });
        }
        self.journal
            .set_capacity(journal_extents * self.blocks_per_au());
        Ok(())
    }

    /// Write everything of a new group but its superblocks: its tables,
    /// its metadata files' entries, templates and attributes; then a
    /// checkpoint.
    fn write_initial_metadata(&mut self) -> Result<(), GroupError> {
        self.mark_table_dirty();
        for f in [
            FILE_DIRECTORY,
            FILE_JOURNAL,
            FILE_ALIAS_DIRECTORY,
            FILE_TEMPLATES,
            FILE_ATTRIBUTES,
        ] {
            self.txn.mark(Dirty::Entry(f));
        }
        self.txn.mark(Dirty::Templates);
        self.txn.mark(Dirty::Attributes);
        let dirty: Vec<Dirty> = self.txn.take_dirty().into_iter().collect();
        let mut items = Vec::new();
        for d in dirty {
            items.push(self.durable_block(d));
        }
        self.write_durably(items, "initial metadata")?;
        self.checkpoint()?;
        Ok(())
    }

    /// Name the group in every member's disk header: a new generation of
    /// it, written to every copy.
    fn name_group_in_headers(&mut self, now_unix_seconds: u64) -> Result<(), GroupError> {
        for m in self.members.iter() {
            let device = m.device.expect("invariant: new disks are attached");
            let scan = HeaderScan::read(&mut *self.engine, device)
                .map_err(io_err(m.entry.label.clone()))?;
            let mut header = scan
                .good()
                .map(|(_, h)| h.header.clone())
                .max_by_key(|h| h.generation)
                .ok_or_else(|| {
                    GroupError::Invalid(format!(
                        "disk {} lost its label during create",
                        m.entry.label
                    ))
                })?;
            header.group_uuid = Some(self.uuid);
            header.set_former_group(None);
            header.generation = scan.generation_max() + 1;
            header.written_unix_seconds = now_unix_seconds;
            let all: Vec<usize> = (0..header.copy_offsets_bytes.len()).collect();
            labeling::write_copies(&mut *self.engine, device, &header, &all).map_err(|e| {
                GroupError::Invalid(format!(
                    "disk {}: writing the group into its header: {e}",
                    m.entry.label
                ))
            })?;
        }
        Ok(())
    }
}

/// Default templates, by file type (as ASM ships them): online logs and control
/// files are fine-striped, everything else coarse; 0 copies = the group's.
pub fn default_templates() -> Vec<Template> {
    let fine = ["CONTROLFILE", "ONLINELOG"];
    [
        "DEFAULT",
        "DATAFILE",
        "TEMPFILE",
        "ONLINELOG",
        "CONTROLFILE",
        "ARCHIVELOG",
        "BACKUPSET",
        "PARAMETERFILE",
        "FLASHBACK",
        "DATAGUARDCONFIG",
        "CHANGETRACKING",
        "DUMPSET",
        "XTRANSPORT",
        "AUTOBACKUP",
    ]
    .iter()
    .map(|name| Template {
        name: (*name).to_string(),
        copies: 0,
        striping: if fine.contains(name) {
            STRIPING_FINE
        } else {
            STRIPING_COARSE
        },
    })
    .collect()
}

impl Group<'_> {
    /// The attributes a new group starts with.
    pub(super) fn default_attributes(&self) -> Vec<(String, String)> {
        vec![
            ("au_size".into(), self.au_bytes.to_string()),
            ("sector_size".into(), self.sector_bytes.to_string()),
            ("compatible.cairn".into(), "0.1".into()),
            ("content.type".into(), "data".into()),
        ]
    }

    /// Zero every AU of the given metadata files on every copy.
    pub(super) fn zero_metadata_extents(&mut self, files: &[u32]) -> Result<(), GroupError> {
        let extents: Vec<(Extent, u64)> = files
            .iter()
            .flat_map(|f| self.files[f].extents.iter().map(|e| (*e, self.au_bytes)))
            .collect();
        self.zero_whole_extents(&extents);
        match self.failed_disks.first() {
            Some(d) => Err(GroupError::Invalid(format!(
                "disk {} failed while the group was being created; check it",
                self.disk_name(*d)
            ))),
            None => Ok(()),
        }
    }

    /// Make every online copy of whole extents (extent, length) read as zeros:
    /// by discard where the device guarantees zeros after it (a hole in a thin
    /// file or LUN, which also hands the space back), else by write-zeroes. A
    /// disk that fails is noted for offlining.
    pub(super) fn zero_whole_extents(&mut self, extents: &[(Extent, u64)]) {
        let mut requests = Vec::new();
        let mut disks = Vec::new();
        for (extent, len_bytes) in extents {
            for c in extent.copies() {
                let Some(device) = self.member(c.disk).and_then(Member::online) else {
                    continue;
                };
                let offset_bytes = u64::from(c.au) * self.au_bytes;
                disks.push(c.disk);
                requests.push(Request {
                    device,
                    tag: requests.len() as u64,
                    op: super::data::zero_op(self, c.disk, offset_bytes, *len_bytes),
                });
            }
        }
        self.run_zeroing(requests, disks);
    }

    /// Run zeroing requests; the disks written are flushed by the next
    /// commit's barrier, the ones that failed go offline after the step.
    pub(super) fn run_zeroing(&mut self, requests: Vec<Request>, disks: Vec<u16>) {
        let completions = match self.engine.execute_all(requests) {
            Ok(c) => c,
            Err(_) => {
                self.failed_disks.extend(disks);
                return;
            }
        };
        for (c, disk) in completions.into_iter().zip(disks) {
            match c.result {
                Ok(_) => self.depend_on(disk),
                Err(_) => {
                    self.failed_disks.insert(disk);
                }
            }
        }
    }
}
