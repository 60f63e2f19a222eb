//! Mounting: finding the newest superblock, bootstrapping the metadata
//! files, replaying the journal, loading tables, extent maps and names, and
//! reporting the damage found on the way (read-only mounts write nothing).

use std::collections::HashMap;

use cairn_format::group as fmt;
use cairn_format::group::{
    entry_place, is_map_number, is_user_number, map_number, AtLayout, DiskEntry, DiskState, Extent,
    FileEntry, FileState, GroupSuper, ALIASES_PER_BLOCK, DIRECT_EXTENTS,
    EXTENTS_PER_INDIRECT_BLOCK, FILE_ALIAS_DIRECTORY, FILE_ATTRIBUTES, FILE_CHECKSUM_DIRECTORY,
    FILE_DIRECTORY, FILE_JOURNAL, FILE_NUMBER_USER_MIN, FILE_TEMPLATES, STRIPING_FINE,
    SUPER_SLOT_OFFSETS_BYTES,
};
use cairn_format::meta::{Block, BlockId, BlockType, MetaError, BLOCK_BYTES};
use cairn_io::{DeviceId, IoEngine};
use uuid::Uuid;

use super::alloc::DiskAlloc;
use super::block_ids::entry_id;
use super::create::default_templates;
use super::error::{corrupt, GroupError};
use super::limits::JOURNAL_BYTES;
use super::mount_report::MountReport;
use super::mounted::{EngineRef, Group};
use super::parts::damage::LostBlock;
use super::parts::files::{placeholder_entry, FileRec};
use super::parts::members::{Member, Members};
use super::parts::txn::Dirty;
use super::returning::{returning_refusal, DeviceProbe};
use super::slots::{identify, read_slot, slot_damaged, FoundDisk, SlotRead};
use crate::placement;
use crate::placement::Striping;

/// Which group to mount.
#[derive(Debug, Clone)]
pub enum GroupSelector {
    Name(String),
    Uuid(Uuid),
}

/// Mount a group from the devices attached to `engine` (any order, any names).
/// A member that is online in the group's metadata but not among `devices`
/// is marked offline, for good (there is no resync), as a lost disk must be.
pub fn mount<'e>(
    engine: &'e mut dyn IoEngine,
    devices: &[DeviceId],
    selector: &GroupSelector,
) -> Result<(Group<'e>, MountReport), GroupError> {
    mount_with(engine, devices, selector, MissingDisks::MarkOffline)
}

/// What a mount does with a member that is online in the group's metadata
/// but not among the devices it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingDisks {
    /// Mark it offline (for good) and mount degraded: the disk is lost.
    MarkOffline,
    /// Refuse to mount, writing nothing: for a caller that only borrows the
    /// group (a benchmark) and must not turn a typo in a discovery string
    /// into a lost disk.
    Refuse,
}

/// [`mount`], choosing what a missing member means.
pub fn mount_with<'e>(
    engine: &'e mut dyn IoEngine,
    devices: &[DeviceId],
    selector: &GroupSelector,
    missing_disks: MissingDisks,
) -> Result<(Group<'e>, MountReport), GroupError> {
    mount_inner(
        EngineRef::Borrowed(engine),
        devices,
        selector,
        missing_disks,
        false,
    )
}

/// Mount for listing and inspecting: nothing is written, ever. A member not
/// among `devices` is missing (the group is degraded in memory) but not
/// marked offline; journal records a crash left are applied in memory, not
/// replayed onto the disks; damaged metadata copies are reported, not
/// rewritten; unfinished operations are left for the next writer. Every
/// change is refused ([`GroupError::ReadOnly`]).
pub fn mount_read_only<'e>(
    engine: &'e mut dyn IoEngine,
    devices: &[DeviceId],
    selector: &GroupSelector,
) -> Result<(Group<'e>, MountReport), GroupError> {
    mount_inner(
        EngineRef::Borrowed(engine),
        devices,
        selector,
        MissingDisks::MarkOffline,
        true,
    )
}

/// [`mount_with`] on an engine the group keeps: the group outlives the call
/// (a live group, `live/`), and the engine goes with it.
pub fn mount_owned(
    engine: Box<dyn IoEngine>,
    devices: &[DeviceId],
    selector: &GroupSelector,
    missing_disks: MissingDisks,
) -> Result<(Group<'static>, MountReport), GroupError> {
    mount_inner(
        EngineRef::Owned(engine),
        devices,
        selector,
        missing_disks,
        false,
    )
}

/// [`mount_read_only`] on an engine the group keeps: a live group that only
/// looks (a listing command's own mount), the engine going with it.
pub fn mount_owned_read_only(
    engine: Box<dyn IoEngine>,
    devices: &[DeviceId],
    selector: &GroupSelector,
) -> Result<(Group<'static>, MountReport), GroupError> {
    mount_inner(
        EngineRef::Owned(engine),
        devices,
        selector,
        MissingDisks::MarkOffline,
        true,
    )
}

/// Mount a group: find its disks and newest superblock, take its members,
/// bootstrap and replay the journal, start a new generation, load the
/// metadata and, for a writer, recover what a crash left and bring back the
/// disks that returned.
pub(super) fn mount_inner<'e>(
    mut engine: EngineRef<'e>,
    devices: &[DeviceId],
    selector: &GroupSelector,
    missing_disks: MissingDisks,
    read_only: bool,
) -> Result<(Group<'e>, MountReport), GroupError> {
    // Until the group's own timeout is read, a disk that hangs is given
    // the default: a mount is not held for ever by one dead path.
    engine.set_io_timeout(Some(super::limits::DISK_IO_TIMEOUT_DEFAULT));
    let (uuid, disks) = find_group(&mut *engine, devices, selector)?;
    let best = newest_superblock(&mut *engine, &disks, uuid, selector)?;
    let mut report = MountReport::default();
    let sup = best.sup.clone();
    // A feature this code does not know may keep fields in bytes it would
    // zero when it rewrote a structure: it may read the group, not write it.
    let unknown = sup.features.ro_compat & !fmt::GROUP_RO_COMPAT_KNOWN;
    if unknown != 0 && !read_only {
        return Err(GroupError::Mount(format!(
            "group {} uses features this Cairn does not know (ro_compat {unknown:#x}), so it may only be read (`cairn ls`, `cairn cp` out); upgrade Cairn to change it",
            sup.name
        )));
    }
    let roster = Roster::take(&mut *engine, &best, &disks, uuid, read_only, &mut report)?;
    if !roster.missing.is_empty() && missing_disks == MissingDisks::Refuse {
        let names: Vec<String> = roster
            .missing
            .iter()
            .filter_map(|d| roster.members.get(*d))
            .map(|m| format!("{} (failure group {})", m.entry.label, m.entry.failgroup))
            .collect();
        return Err(GroupError::Mount(format!(
            "group {} is missing disk(s) {} among the discovered devices; nothing was changed — check the discovery string (--discover) and that the disks are attached",
            sup.name,
            names.join(", ")
        )));
    }
    let mut group = Group::assemble(engine, sup.clone(), uuid, best.generation, roster.members);
    group.read_only = read_only;
    // What this mount changes is said against the directory it found.
    group.states.set_recorded(&best.entries);
    for d in roster.found_again {
        group.say_why(
            d,
            "found again at mount, the image the group took offline: what it missed is resynced",
        );
    }
    report
        .damage
        .extend(roster.short.iter().map(|(_, what)| what.clone()));
    group.damage.set_short(roster.short);
    if !roster.missing.is_empty() {
        mark_missing(&mut group, &roster.missing, best.generation, &mut report)?;
    }

    bootstrap_journal(&mut group, &sup)?;
    report.journal_records_replayed = group.replay()?;
    settle_journal_entry(&mut group, &sup)?;
    start_generation(&mut group, &disks, uuid)?;
    load_metadata(&mut group, &sup, &roster.returned, &mut report)?;
    if read_only {
        finish_read_only(&mut group, &mut report);
        return Ok((group, report));
    }
    recover(&mut group, &mut report)?;
    group.publish_all();
    settle_disks(&mut group, &mut report)?;
    let recovered = group.start_checksum_log()?;
    report.damage.extend(recovered.damaged.iter().cloned());
    report.damage.extend(recovered.lost.iter().cloned());
    report.checksum_log = recovered;
    Ok((group, report))
}

/// The one group among the discovered disks that `selector` names: its uuid
/// and the disks that carry its label.
fn find_group(
    engine: &mut dyn IoEngine,
    devices: &[DeviceId],
    selector: &GroupSelector,
) -> Result<(Uuid, Vec<FoundDisk>), GroupError> {
    let found = identify(engine, devices);
    let mut matching: Vec<(Uuid, Vec<FoundDisk>)> = found
        .into_iter()
        .filter(|(uuid, disks)| match selector {
            GroupSelector::Uuid(u) => u == uuid,
            GroupSelector::Name(n) => disks.iter().any(|(_, _, s)| {
                s.as_ref()
                    .is_some_and(|(_, sup)| sup.name.eq_ignore_ascii_case(n))
            }),
        })
        .collect();
    let wanted = wanted(selector);
    match matching.len() {
        0 => Err(GroupError::NotFound(format!(
            "no disk group {wanted} on the discovered disks; `cairn group list` shows the groups found"
        ))),
        1 => Ok(matching.remove(0)),
        _ => Err(GroupError::Mount(format!(
            "two groups are named {wanted} ({} and {}); mount one by UUID",
            matching[0].0, matching[1].0
        ))),
    }
}

/// The group a selector asks for, as its errors name it.
fn wanted(selector: &GroupSelector) -> String {
    match selector {
        GroupSelector::Name(n) => n.to_ascii_uppercase(),
        GroupSelector::Uuid(u) => u.to_string(),
    }
}

/// The newest superblock slot on any of the group's disks: the group's truth.
fn newest_superblock(
    engine: &mut dyn IoEngine,
    disks: &[FoundDisk],
    uuid: Uuid,
    selector: &GroupSelector,
) -> Result<SlotRead, GroupError> {
    let mut best: Option<SlotRead> = None;
    for (device, _, _) in disks {
        for base in SUPER_SLOT_OFFSETS_BYTES {
            if let Some(slot) = read_slot(engine, *device, uuid, base) {
                if best.as_ref().is_none_or(|b| slot.generation > b.generation) {
                    best = Some(slot);
                }
            }
        }
    }
    best.ok_or_else(|| {
        GroupError::Mount(format!("group {}: no disk has a readable superblock; the group was never completely created, or its disks are damaged", wanted(selector)))
    })
}

/// The members a mount found, from the newest disk directory and the
/// devices discovered, before the group is assembled.
struct Roster {
    /// Indexed by disk number.
    members: Members,
    /// Members in service (ONLINE or SYNCING) without a device, or on one
    /// smaller than the group recorded.
    missing: Vec<u16>,
    /// Why each member found smaller than recorded is treated as missing:
    /// (label, what).
    short: Vec<(String, String)>,
    /// Members whose allocation tables are rebuilt from the extent maps
    /// (returning disks and resyncs a crash cut; a member may be listed twice).
    returned: Vec<u16>,
    /// OFFLINE members found again, which this mount resyncs.
    found_again: Vec<u16>,
}

impl Roster {
    /// Take every entry of `best`'s disk directory: its device (if found and
    /// whole), its newest generation, and, for a writer, whether a member
    /// recorded OFFLINE comes back (the report says which way).
    fn take(
        engine: &mut dyn IoEngine,
        best: &SlotRead,
        disks: &[FoundDisk],
        uuid: Uuid,
        read_only: bool,
        report: &mut MountReport,
    ) -> Result<Roster, GroupError> {
        let sup = &best.sup;
        let by_uuid = devices_by_disk(sup, disks)?;
        let mut roster = Roster {
            members: Members::with_slots(sup.disk_count),
            missing: Vec::new(),
            short: Vec::new(),
            returned: Vec::new(),
            found_again: Vec::new(),
        };
        // Each device's newest superblock generation.
        let slot_of: HashMap<DeviceId, u64> = disks
            .iter()
            .filter_map(|(d, _, s)| s.as_ref().map(|(g, _)| (*d, *g)))
            .collect();
        for entry in &best.entries {
            let device = by_uuid.get(&entry.disk_uuid).copied();
            let device = roster.whole(engine, device, entry);
            let layout =
                AtLayout::for_disk(entry.size_bytes, u64::from(sup.au_bytes)).ok_or_else(|| {
                    corrupt(format!(
                        "disk {} is too small for the group's AU size",
                        entry.label
                    ))
                })?;
            let generation = device.and_then(|d| slot_of.get(&d).copied()).unwrap_or(0);
            let mut entry = entry.clone();
            let in_service = matches!(entry.state, DiskState::Online | DiskState::Syncing);
            if in_service && device.is_none() {
                roster.missing.push(entry.number);
            }
            // An offline member found again: a writer resyncs it, unless it was
            // taken offline on request or is not the image the group left.
            if entry.state == DiskState::Offline
                && device.is_some()
                && !read_only
                && comes_back(&mut entry, (&sup.name, uuid), generation, report)
            {
                roster.returned.push(entry.number);
                roster.found_again.push(entry.number);
            }
            // A resync a crash interrupted: its table is rebuilt too (it is not
            // read from a disk that is not ONLINE).
            if entry.state == DiskState::Syncing && device.is_some() && !read_only {
                roster.returned.push(entry.number);
            }
            let online =
                matches!(entry.state, DiskState::Online | DiskState::Syncing) && device.is_some();
            let limit = entry.au_count;
            let alloc = online.then(|| DiskAlloc::with_limit(layout, limit));
            let member = Member::new(entry, device, alloc, generation);
            roster.members.set(member).map_err(|number| {
                corrupt(format!(
                    "disk directory names disk {number} of {}",
                    sup.disk_count
                ))
            })?;
        }
        Ok(roster)
    }

    /// `device`, unless it is smaller than the group recorded for `entry`
    /// (a truncated file, a smaller device in its place): it has lost what
    /// lay past its end and must not be read or written as if whole, so it
    /// is treated as missing, and `short` says why.
    fn whole(
        &mut self,
        engine: &mut dyn IoEngine,
        device: Option<DeviceId>,
        entry: &DiskEntry,
    ) -> Option<DeviceId> {
        if let Some(size) = device
            .and_then(|d| engine.geometry(d))
            .map(|g| g.size_bytes)
        {
            if size < entry.size_bytes {
                self.short.push((entry.label.clone(), format!(
                    "disk {} is {size} bytes, smaller than the {} bytes the group recorded for it (a truncated file, or a smaller device in its place): what lay past its end is gone, so it is treated as missing",
                    entry.label, entry.size_bytes
                )));
                return None;
            }
        }
        device
    }
}

/// Each discovered disk's device, by disk uuid; a disk found on two devices
/// (a copy of a member beside the member) is refused: either could be taken
/// for it, and writes through the wrong one are lost.
fn devices_by_disk(
    sup: &GroupSuper,
    disks: &[FoundDisk],
) -> Result<HashMap<Uuid, DeviceId>, GroupError> {
    let mut by_uuid: HashMap<Uuid, DeviceId> = HashMap::new();
    for (device, header, _) in disks {
        if let Some(other) = by_uuid.insert(header.disk_uuid, *device) {
            return Err(GroupError::Mount(format!(
                "group {}: disk {} (uuid {}) is on two devices (#{} and #{}); one is a copy — hide it from discovery and try again",
                sup.name, header.label, header.disk_uuid, other.0, device.0
            )));
        }
    }
    Ok(by_uuid)
}

/// A member recorded OFFLINE and found again (by its label, so only the
/// image is in doubt) at `generation`: whether a writer resyncs it, made
/// SYNCING. One taken offline on request stays so quietly; one refused
/// is reported with why.
fn comes_back(
    entry: &mut DiskEntry,
    group: (&str, Uuid),
    generation: u64,
    report: &mut MountReport,
) -> bool {
    let probe = DeviceProbe {
        label: Some((Some(group.1), entry.disk_uuid, entry.label.clone())),
        why: None,
        generation,
        size_bytes: None,
    };
    match returning_refusal(entry, group, &probe) {
        // Asked for: not news at every mount.
        Some(_) if entry.held() => {
            report.disks_held.push(entry.label.clone());
            false
        }
        Some(why) => {
            report.disks_refused.push(why);
            false
        }
        None => {
            entry.state = DiskState::Syncing;
            report.disks_returned.push(entry.label.clone());
            true
        }
    }
}

/// Members in service but not found: each says why; a writer records them
/// OFFLINE at the generation `newest` they hold. Refused when the group's
/// redundancy cannot run without them; the report names them.
fn mark_missing(
    group: &mut Group<'_>,
    missing: &[u16],
    newest: u64,
    report: &mut MountReport,
) -> Result<(), GroupError> {
    let read_only = group.read_only;
    for d in missing {
        let smaller = group
            .member(*d)
            .is_some_and(|m| group.damage.is_short(&m.entry.label));
        group.say_why(
            *d,
            if smaller {
                "found smaller than the group recorded at mount (a truncated file, or a smaller device in its place): treated as missing"
            } else {
                "missing at mount: not among the devices discovery found"
            },
        );
        if let Some(m) = group.member_mut(*d) {
            // A reader leaves the record alone: the disk is only missing.
            if !read_only {
                m.entry.state = DiskState::Offline;
                // It was in service, so it holds the newest generation
                // (unless the group stopped before it could mark what
                // it missed: then the record says which it holds).
                if !m.entry.resync_all() {
                    m.entry.synced_generation = newest as u32;
                }
            }
        }
    }
    let names: Vec<String> = missing
        .iter()
        .map(|d| {
            let m = group.member(*d).expect("invariant: listed");
            format!(
                "{} (failure group {}, uuid {})",
                m.entry.label, m.entry.failgroup, m.entry.disk_uuid
            )
        })
        .collect();
    if !group.redundancy_holds() {
        let short: Vec<&str> = group.damage.short().map(String::as_str).collect();
        return Err(GroupError::Mount(format!(
            "group {} is missing disk(s) {}; {} redundancy cannot run without them: attach them (check the discovery string) and mount again{}",
            group.name,
            names.join(", "),
            group.redundancy().as_str(),
            if short.is_empty() {
                String::new()
            } else {
                format!(" ({})", short.join("; "))
            }
        )));
    }
    if read_only {
        report.disks_missing = names;
    } else {
        report.disks_marked_offline = names;
    }
    Ok(())
}

/// Bootstrap: the file directory's first extent and the journal's entry,
/// from the superblock, so that replay can read the journal.
fn bootstrap_journal(group: &mut Group<'_>, sup: &GroupSuper) -> Result<(), GroupError> {
    group.files.insert(FileRec {
        entry: placeholder_entry(FILE_DIRECTORY, sup.copies),
        extents: vec![sup.file_directory],
    });
    // The superblocks name the journal too (groups whose superblocks
    // predate that: its entry alone): its entry may be torn by a crash
    // while a rebalance moved the journal, and the journal's own record is
    // what repairs it. Replay reads the entry again.
    let journal_entry = if sup.journal.is_empty() {
        group
            .read_entry(FILE_JOURNAL)?
            .ok_or_else(|| corrupt("the journal's file entry is missing"))?
    } else {
        let mut entry = group
            .read_entry(FILE_JOURNAL)
            .ok()
            .flatten()
            .unwrap_or_else(|| placeholder_entry(FILE_JOURNAL, sup.copies));
        entry.direct = sup.journal.clone();
        entry
    };
    let journal_extents = journal_entry.direct.clone();
    let journal_expected = JOURNAL_BYTES.div_ceil(u64::from(sup.au_bytes));
    if journal_extents.len() as u64 != journal_expected {
        return Err(corrupt(format!(
            "the journal has {} extents; a group with {}-byte AUs has {journal_expected}",
            journal_extents.len(),
            sup.au_bytes
        )));
    }
    group
        .journal
        .set_capacity(journal_extents.len() as u64 * group.blocks_per_au());
    group.files.insert(FileRec {
        entry: journal_entry,
        extents: journal_extents,
    });
    Ok(())
}

/// After replay, the journal's entry as replay left it with the map the
/// superblocks name (noting where it moved from), or, in a group whose
/// superblocks do not name it, the journal where a move a crash cut left it.
fn settle_journal_entry(group: &mut Group<'_>, sup: &GroupSuper) -> Result<(), GroupError> {
    if sup.journal.is_empty() {
        if !group.read_only {
            group.adopt_moved_journal()?;
        }
        return Ok(());
    }
    // The entry as replay left it; the map is the superblocks'.
    let mut entry = group
        .read_entry(FILE_JOURNAL)?
        .ok_or_else(|| corrupt("the journal's file entry is missing after replay"))?;
    if entry.direct != sup.journal {
        group
            .journal
            .set_moved_from(std::mem::replace(&mut entry.direct, sup.journal.clone()));
    }
    if let Some(now) = group.files.entry_mut(FILE_JOURNAL) {
        *now = entry;
    }
    Ok(())
}

/// A writer's new superblock generation, written to every member (twice
/// when a slot was found torn, so that each again holds two good ones).
fn start_generation(
    group: &mut Group<'_>,
    disks: &[FoundDisk],
    uuid: Uuid,
) -> Result<(), GroupError> {
    // Offline disks noticed at mount are recorded only after replay, so replay
    // writes reach every disk the journal names. Every mount that writes
    // writes a new generation (below), so a member whose own slots lack the
    // newest (a crash among the superblock writes of a create or a change)
    // gets it too.
    // A slot torn by a crash (or damaged) beside a good one: both slots are
    // written afresh, so every member again holds two.
    let torn = disks.iter().any(|(device, _, _)| {
        SUPER_SLOT_OFFSETS_BYTES
            .iter()
            .any(|base| slot_damaged(&mut *group.engine, *device, uuid, *base))
    });
    if !group.read_only {
        // Every mount that writes starts a new generation, whether or not a
        // disk changed: a disk that goes offline records the generation it
        // holds, and an image of it from an earlier mount (a snapshot, a
        // stale clone) is then told apart from it. The cost is one
        // superblock write per disk.
        //
        // From now on the disks keep a discard map: an older Cairn that
        // would not keep it up to date may only read the group.
        group.features.ro_compat |= fmt::GROUP_RO_COMPAT_CLEAN_MAP;
        // And a heartbeat (`heartbeat.rs`): an older Cairn would neither
        // beat nor look, and could write the group beside another host.
        group.features.ro_compat |= fmt::GROUP_RO_COMPAT_MULTIHOST;
        group.write_superblocks()?;
        if torn {
            group.write_superblocks()?;
        }
    }
    Ok(())
}

/// Load the metadata: allocation tables (rebuilt for the `returned`
/// members), files, aliases, templates and attributes, with the damage
/// found on the way in the report.
fn load_metadata(
    group: &mut Group<'_>,
    sup: &GroupSuper,
    returned: &[u16],
    report: &mut MountReport,
) -> Result<(), GroupError> {
    // A returning disk's table missed the frees made while it was away: the
    // extent maps say what it holds.
    group.tables_to_rebuild.extend(returned);
    group.load_tables(report)?;
    group.load_files()?;
    group.adopt_directory_bootstrap(sup.file_directory);
    group.adopt_journal_bootstrap();
    group.verify_tables(report)?;
    group.rebuild_tables()?;
    group.build_away_tables();
    group.load_aliases()?;
    group.find_orphan_parents();
    report.damage.extend(group.describe_shared_aus());
    let templates = group
        .read_small_file(
            FILE_TEMPLATES,
            BlockType::Template,
            LostBlock::Templates,
            fmt::decode_templates,
        )?
        .unwrap_or_else(default_templates);
    let attributes = match group.read_small_file(
        FILE_ATTRIBUTES,
        BlockType::Attribute,
        LostBlock::Attributes,
        fmt::decode_attributes,
    )? {
        Some(a) => a,
        None => group.default_attributes(),
    };
    group.settings.load(templates, attributes);
    group.apply_io_timeout();
    report.damage.extend(group.describe_lost());
    Ok(())
}

/// A read-only mount's end: what a writer would finish or rewrite is
/// reported instead, nothing is left dirty, and the maps are published.
fn finish_read_only(group: &mut Group<'_>, report: &mut MountReport) {
    report.warnings.extend(group.pending_operations());
    if group.damage.copies_left_damaged() > 0 {
        report.warnings.push(format!(
            "{} metadata copies are damaged, blank or out of date beside a good one; a command that writes rewrites them as it reads them, or run `cairn group check {} --repair`",
            group.damage.copies_left_damaged(), group.name
        ));
    }
    group.forget_dirty();
    group.publish_all();
}

/// A writer's recovery of what a crash left: AUs a cut rebalance leaked,
/// operations to finish, copies repaired on the way, failed disks taken
/// offline; a pending rebalance is reported.
fn recover(group: &mut Group<'_>, report: &mut MountReport) -> Result<(), GroupError> {
    // A rebalance a crash cut: a metadata move may have left a claimed AU
    // no map names (see `free_leaked`).
    if group.rebalance_pending().is_some() && group.damage.nothing_lost() {
        let freed = group.free_leaked();
        if freed > 0 {
            report.warnings.push(format!(
                "freed {freed} AU(s) a rebalance cut short had taken for a copy it never switched to"
            ));
        }
    }
    report.operations_recovered = group.recover_operations()?;
    report.repaired_copies = group.damage.repaired_copies();
    group.commit()?;
    group.offline_failed()?;
    if let Some(power) = group.rebalance_pending() {
        let dropping = group.dropping_disks();
        report.warnings.push(format!(
            "a rebalance is pending{} (power {power}): `cairn group rebalance {}` resumes it{}",
            if dropping.is_empty() {
                String::new()
            } else {
                format!(" to drop {}", dropping.join(", "))
            },
            group.name,
            if power == 0 { " (it was paused)" } else { "" }
        ));
    }
    Ok(())
}

/// A writer's members after recovery: the disks that came back (or whose
/// resync a crash interrupted) get what they missed and go ONLINE, and the
/// OFFLINE disks whose repair timer ran out are dropped by force.
fn settle_disks(group: &mut Group<'_>, report: &mut MountReport) -> Result<(), GroupError> {
    for m in group.members.iter() {
        if m.entry.state == DiskState::Online && m.entry.resync_all() && m.device.is_some() {
            report.warnings.push(format!(
                "disk {} missed writes the group could not mark before it stopped: every copy on it is resynced from the others",
                m.entry.label
            ));
        }
    }
    let resync = group.resync(super::resync::RESYNC_POWER_DEFAULT, &mut |_| {})?;
    if resync != super::resync::ResyncReport::default() {
        report.resync = Some(resync);
    }
    let (dropped, refused) = group.drop_expired();
    report.disks_dropped_expired = dropped;
    report.warnings.extend(refused);
    Ok(())
}

impl Group<'_> {
    /// A rebalance moved the journal's extent and a crash came before the
    /// checkpoint that follows: replay put the new map in place, so the
    /// journal is where that map says (its copy holds everything up to the
    /// move). Start the ring there afresh.
    pub(super) fn adopt_moved_journal(&mut self) -> Result<(), GroupError> {
        let Some(entry) = self.read_entry(FILE_JOURNAL)? else {
            return Ok(());
        };
        let now = &self.files[&FILE_JOURNAL].extents;
        if entry.direct == *now || entry.direct.len() != now.len() {
            return Ok(());
        }
        let extents = entry.direct.clone();
        self.files.insert(FileRec { entry, extents });
        self.checkpoint()
    }

    /// A rebalance moved the file directory's first extent: the
    /// superblocks named the new place, and a crash came before the commit
    /// that puts it in the directory's own entry (and claims it in the
    /// table). The superblocks are what this mount read the directory
    /// through, and the new place holds it whole: adopt it, claim its AUs
    /// and free the old ones; the mount's commit writes the entry there.
    pub(super) fn adopt_directory_bootstrap(&mut self, bootstrap: Extent) {
        let Some(first) = self.files.extent_mut(FILE_DIRECTORY, None, 0) else {
            return;
        };
        if first.copies() == bootstrap.copies() {
            return;
        }
        let old = std::mem::replace(first, bootstrap);
        self.txn.mark(Dirty::Entry(FILE_DIRECTORY));
        let aus = placement::extent_aus(0);
        for c in bootstrap.copies() {
            if let Some(a) = self.member_mut(c.disk).and_then(|m| m.alloc.as_mut()) {
                if !a.is_used(u64::from(c.au)) {
                    a.mark(u64::from(c.au), aus, true);
                }
            }
        }
        for c in old
            .copies()
            .iter()
            .filter(|c| !bootstrap.copies().contains(c))
        {
            if let Some(a) = self.member_mut(c.disk).and_then(|m| m.alloc.as_mut()) {
                if a.is_used(u64::from(c.au)) {
                    a.free(c.au, aus as u32);
                }
            }
        }
    }

    /// A rebalance moved the journal: the superblocks named its new place,
    /// and a crash came before the commit that puts it in the journal's
    /// own entry (and claims it in the table). This mount runs the journal
    /// where the superblocks say (the copy holds it whole, as of the
    /// checkpoint before the move): claim those AUs, free the old ones, and
    /// the mount's commit writes the entry.
    pub(super) fn adopt_journal_bootstrap(&mut self) {
        let Some(old) = self.journal.take_moved_from() else {
            return;
        };
        let Some(now) = self.files.get(FILE_JOURNAL).map(|r| r.extents.clone()) else {
            return;
        };
        self.txn.mark(Dirty::Entry(FILE_JOURNAL));
        for (index, (new, was)) in now.iter().zip(&old).enumerate() {
            let aus = placement::extent_aus(index as u64);
            for c in new.copies() {
                if let Some(a) = self.member_mut(c.disk).and_then(|m| m.alloc.as_mut()) {
                    for au in u64::from(c.au)..u64::from(c.au) + aus {
                        if !a.is_used(au) {
                            a.mark(au, 1, true);
                        }
                    }
                }
            }
            for c in was.copies().iter().filter(|c| !new.copies().contains(c)) {
                if let Some(a) = self.member_mut(c.disk).and_then(|m| m.alloc.as_mut()) {
                    for au in u64::from(c.au)..u64::from(c.au) + aus {
                        if a.is_used(au) {
                            a.free(au as u32, 1);
                        }
                    }
                }
            }
        }
    }

    /// One line per lost metadata block: what it held, what is affected,
    /// and the step that helps.
    pub(super) fn describe_lost(&self) -> Vec<String> {
        let repair = format!("`cairn group check {} --repair`", self.name);
        self.damage
            .lost()
            .map(|(block, why)| match block {
                LostBlock::Entry(n) if is_map_number(*n) => format!(
                    "{} is lost: {why}. The file's data is all there; its checksums are not, so its reads cannot be verified; {repair} writes the entry free, and the file is read without checksums",
                    self.path_of(*n)
                ),
                LostBlock::Entry(n) => {
                    let names = self.names_of(*n);
                    format!(
                        "file {n} is lost: {why}. Its extent map went with it, so its data cannot be reached; {}. {repair} removes {} and frees its space",
                        if names.is_empty() {
                            "it had no name".to_string()
                        } else {
                            format!("its names: {}", names.join(", "))
                        },
                        if names.len() == 1 { "that name" } else { "its names" }
                    )
                }
                LostBlock::Map(n) => format!(
                    "{} has a damaged extent map: {why}. It is not written until {repair} cuts it there (what lay past that point cannot be placed in the file any more)",
                    self.path_of(*n)
                ),
                LostBlock::Alias(k) => format!(
                    "alias block {k} is lost: {why}. The names it held (ids {} to {}) are gone; the files are not: {repair} names each file left without one in +{}/lost+found",
                    k * ALIASES_PER_BLOCK as u64 + 1,
                    (k + 1) * ALIASES_PER_BLOCK as u64,
                    self.name
                ),
                LostBlock::Templates => format!(
                    "the templates block is lost: {why}. The default templates are used; {repair} writes them"
                ),
                LostBlock::Attributes => format!(
                    "the attributes block is lost: {why}. The defaults are used; {repair} writes them"
                ),
            })
            .collect()
    }

    pub(super) fn read_entry(&mut self, file: u32) -> Result<Option<FileEntry>, GroupError> {
        let (dir, block) = entry_place(file);
        let places = self.file_block_places(dir, block);
        match self.read_meta(&places, entry_id(file))? {
            Some(block) => FileEntry::decode(&block[..], file)
                .map_err(|e| corrupt(format!("file entry {file}: {e}"))),
            None => Ok(None),
        }
    }

    pub(super) fn read_meta_file_block(
        &mut self,
        file: u32,
        block_type: BlockType,
        index: u64,
    ) -> Result<Option<Box<Block>>, GroupError> {
        let places = self.file_block_places(file, index);
        self.read_meta(
            &places,
            BlockId {
                block_type,
                owner: file,
                owner_tag: 0,
                index,
            },
        )
    }

    /// A one-block metadata file (templates, attributes), decoded; blank
    /// reads as empty. `None` when the block has no valid copy, or does not
    /// decode: the loss is recorded as `lost`, for the caller's defaults and
    /// for `check --repair` to write.
    pub(super) fn read_small_file<T: Default>(
        &mut self,
        file: u32,
        block_type: BlockType,
        lost: LostBlock,
        decode: fn(&[u8]) -> Result<T, MetaError>,
    ) -> Result<Option<T>, GroupError> {
        let decoded = self
            .read_meta_file_block(file, block_type, 0)
            .and_then(|block| {
                block
                    .map(|b| {
                        decode(&b[..]).map_err(|e| {
                            GroupError::Lost(format!("the {} block: {e}", block_type.name()))
                        })
                    })
                    .transpose()
            });
        match decoded {
            Ok(t) => Ok(Some(t.unwrap_or_default())),
            Err(GroupError::Lost(why)) => {
                self.damage.lose(lost, why);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    pub(super) fn load_files(&mut self) -> Result<(), GroupError> {
        let dir = self
            .read_entry(FILE_DIRECTORY)?
            .ok_or_else(|| corrupt("the file directory's own entry is missing"))?;
        let dir_extents = self.read_extent_map(&dir)?;
        self.validate_map(&dir, &dir_extents)?;
        self.files.insert(FileRec {
            entry: dir,
            extents: dir_extents,
        });
        let entries = self.files[&FILE_DIRECTORY].extents.len() as u64 * self.blocks_per_au();
        for n in 1..entries as u32 {
            if n == FILE_DIRECTORY || n == FILE_JOURNAL {
                continue;
            }
            let loaded = self.read_entry(n).and_then(|entry| match entry {
                Some(entry) if n >= FILE_NUMBER_USER_MIN => self.load_user_file(entry).map(Some),
                Some(entry) => {
                    let extents = self.read_extent_map(&entry)?;
                    self.validate_map(&entry, &extents)?;
                    Ok(Some((FileRec { entry, extents }, None)))
                }
                None => Ok(None),
            });
            match loaded {
                Ok(Some((rec, damage))) => {
                    self.files.insert(rec);
                    if let Some(why) = damage {
                        self.damage.lose(LostBlock::Map(n), why);
                    }
                }
                Ok(None) => {}
                // A user file whose entry is gone or self-contradicting is
                // lost; the rest of the group is not.
                Err(GroupError::Lost(why) | GroupError::Corrupt(why))
                    if n >= FILE_NUMBER_USER_MIN =>
                {
                    self.damage.lose(LostBlock::Entry(n), why);
                }
                Err(e) => return Err(e),
            }
        }
        for f in [FILE_ALIAS_DIRECTORY, FILE_TEMPLATES, FILE_ATTRIBUTES] {
            if !self.files.contains(f) {
                return Err(corrupt(format!("metadata file {f} has no entry")));
            }
        }
        self.load_checksum_maps()
    }

    /// The checksum maps of the files loaded (and of those whose entries are
    /// lost), from the checksum directory (file 7), loaded like user files
    /// (a cut map is damage of the map, an unreadable entry the map's).
    /// Before the tables are verified or rebuilt: the maps' AUs are in use.
    /// An entry that does not agree with its file (another incarnation: a
    /// map no delete took; other copies, state or size: disk bytes no
    /// version wrote) is not loaded: a mount that writes writes it free, the
    /// file is read without checksums, and the map's AUs are reported as
    /// leaked for `check --repair` to free. Only the files' own blocks are read: one
    /// read per file with checksums, and per file without.
    fn load_checksum_maps(&mut self) -> Result<(), GroupError> {
        let Some(dir) = self.files.get(FILE_CHECKSUM_DIRECTORY) else {
            return Ok(());
        };
        let room = dir.extents.len() as u64 * self.blocks_per_au();
        let lost: Vec<u32> = self
            .damage
            .lost()
            .filter_map(|(b, _)| match b {
                LostBlock::Entry(n) if is_user_number(*n) => Some(*n),
                _ => None,
            })
            .collect();
        // Per file: what its map must agree with (incarnation, copies,
        // state, size), or nothing for a lost entry.
        type Agree = (u32, u8, FileState, u64);
        let mut files: Vec<(u32, Option<Agree>)> = self
            .files
            .user_files()
            .map(|(n, r)| {
                let e = &r.entry;
                let size = self.map_bytes(e.size_bytes);
                (*n, Some((e.incarnation, e.copies, e.state, size)))
            })
            .chain(lost.into_iter().map(|n| (n, None)))
            .filter(|(n, _)| u64::from(*n) < room)
            .collect();
        files.sort_unstable_by_key(|(n, _)| *n);
        for (file, data) in files {
            let number = map_number(file);
            let loaded = self
                .read_entry(number)
                .and_then(|entry| entry.map(|e| self.load_user_file(e)).transpose());
            // A map settled beside a settled file holds its size (a file
            // cut by damage is not settled: its repair cuts the map).
            let cut = self.damage.is_lost(LostBlock::Map(file));
            let agrees = |m: &FileEntry, map_cut: bool| {
                data.is_none_or(|(incarnation, copies, state, size)| {
                    (m.incarnation, m.copies, m.state) == (incarnation, copies, state)
                        && (cut || map_cut || state != FileState::Active || m.size_bytes == size)
                })
            };
            match loaded {
                Ok(Some((rec, damage))) if agrees(&rec.entry, damage.is_some()) => {
                    self.files.insert(rec);
                    if let Some(why) = damage {
                        self.damage.lose(LostBlock::Map(number), why);
                    }
                }
                Ok(Some(_)) => self.txn.mark(Dirty::Entry(number)),
                Ok(None) => {}
                Err(GroupError::Lost(why) | GroupError::Corrupt(why)) => {
                    self.damage.lose(LostBlock::Entry(number), why);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// What the data path relies on: the extents hold the file's size, fine
    /// striping has whole sets of 8, metadata files have their first extent.
    pub(super) fn validate_map(
        &self,
        entry: &FileEntry,
        extents: &[Extent],
    ) -> Result<(), GroupError> {
        let layout = self.file_layout(entry);
        let n = extents.len() as u64;
        let problem = if layout.striping == Striping::Fine
            && !n.is_multiple_of(placement::FINE_STRIPE_WIDTH)
        {
            Some(format!("{n} extents is not whole fine-stripe sets of 8"))
        } else if layout.capacity_bytes(n) < entry.size_bytes {
            Some(format!(
                "{} bytes do not fit its {n} extents",
                entry.size_bytes
            ))
        } else if entry.number < FILE_NUMBER_USER_MIN && n == 0 {
            Some("a metadata file with no extent".to_string())
        } else {
            None
        };
        match problem {
            Some(p) => Err(corrupt(format!("file {}: {p}", entry.number))),
            None => Ok(()),
        }
    }

    /// A user file's entry and as much of its extent map as is whole: a map
    /// block with no valid copy, or a map that contradicts the entry, cuts it
    /// (returned with why, and where it now ends). An I/O error is not cut
    /// around: the disk may answer again.
    pub(super) fn load_user_file(
        &mut self,
        mut entry: FileEntry,
    ) -> Result<(FileRec, Option<String>), GroupError> {
        let (mut extents, whole) = self.read_map_upto(&entry);
        let mut why = match whole {
            Ok(()) => None,
            Err(GroupError::Lost(m) | GroupError::Corrupt(m)) => Some(m),
            Err(e) => return Err(e),
        };
        let layout = self.file_layout(&entry);
        if entry.striping == STRIPING_FINE {
            let whole_sets =
                extents.len() as u64 / placement::FINE_STRIPE_WIDTH * placement::FINE_STRIPE_WIDTH;
            if (extents.len() as u64) != whole_sets {
                extents.truncate(whole_sets as usize);
                why.get_or_insert_with(|| "its extents are not whole fine-stripe sets of 8".into());
            }
        }
        let recorded = entry.size_bytes;
        let capacity = layout.capacity_bytes(extents.len() as u64);
        if capacity < recorded {
            let sector = u64::from(self.sector_bytes);
            entry.size_bytes = capacity / sector * sector;
            // The byte size follows (an entry saying more bytes than
            // sectors is refused at decode: a repair that wrote it back
            // would lose the whole file at the next mount).
            if let Some(a) = &mut entry.attrs {
                a.byte_size = a.byte_size.min(entry.size_bytes);
            }
            why.get_or_insert_with(|| format!("{recorded} bytes do not fit its extents"));
        }
        let damage = why.map(|w| {
            format!(
                "{w}; it reads up to byte {} of its {recorded}",
                entry.size_bytes
            )
        });
        Ok((FileRec { entry, extents }, damage))
    }

    pub(super) fn read_extent_map(&mut self, entry: &FileEntry) -> Result<Vec<Extent>, GroupError> {
        let (extents, whole) = self.read_map_upto(entry);
        whole.map(|()| extents)
    }

    /// The extents of `entry`'s map, read block by block up to the first
    /// that cannot be used; with it, why not (`Ok` when the map is whole).
    pub(super) fn read_map_upto(
        &mut self,
        entry: &FileEntry,
    ) -> (Vec<Extent>, Result<(), GroupError>) {
        let mut extents = entry.direct.clone();
        let mut remaining = entry.extent_count.saturating_sub(DIRECT_EXTENTS as u64);
        let per_au = self.blocks_per_au();
        let needed = self.files.indirect_aus_needed(entry.extent_count);
        if needed > entry.indirect.len() as u64 {
            let why = corrupt(format!(
                "file {}: {} extents need {needed} indirect AUs, the entry has {}",
                entry.number,
                entry.extent_count,
                entry.indirect.len()
            ));
            return (extents, Err(why));
        }
        let mut block = 0u64;
        while remaining > 0 {
            let pointer = &entry.indirect[(block / per_au) as usize];
            let within = (block % per_au) * BLOCK_BYTES as u64;
            let places: Vec<(u16, u64)> = pointer
                .copies()
                .iter()
                .map(|c| (c.disk, u64::from(c.au) * self.au_bytes + within))
                .collect();
            let id = BlockId {
                block_type: BlockType::Indirect,
                owner: entry.number,
                owner_tag: entry.incarnation,
                index: block,
            };
            let count = remaining.min(EXTENTS_PER_INDIRECT_BLOCK as u64) as usize;
            let more = self.read_meta(&places, id).and_then(|data| {
                let data = data.ok_or_else(|| {
                    GroupError::Lost(format!(
                        "file {}: indirect block {block} is blank on every copy",
                        entry.number
                    ))
                })?;
                fmt::decode_indirect(&data[..], count)
                    .map_err(|e| corrupt(format!("file {}: {e}", entry.number)))
            });
            match more {
                Ok(more) => extents.extend(more),
                Err(e) => return (extents, Err(e)),
            }
            remaining -= count as u64;
            block += 1;
        }
        (extents, Ok(()))
    }

    /// Recompute the orphan parents ([`NameTable`](super::parts::names::NameTable)) from the names.
    pub(super) fn find_orphan_parents(&mut self) {
        self.names.find_orphan_parents();
    }

    /// One line per AU two files claim: where it is and who claims it.
    pub(super) fn describe_shared_aus(&self) -> Vec<String> {
        self.damage
            .shared()
            .map(|((disk, au), owners)| {
                let who: Vec<String> = owners.iter().map(|o| self.path_of(*o)).collect();
                format!(
                    "AU {au} of disk {} is claimed by {} extent maps ({}): reads of either file may return the other's data, and neither will be written until one is removed",
                    self.disk_name(*disk),
                    owners.len(),
                    who.join(" and ")
                )
            })
            .collect()
    }

    pub(super) fn load_aliases(&mut self) -> Result<(), GroupError> {
        let blocks = self.files[&FILE_ALIAS_DIRECTORY].extents.len() as u64 * self.blocks_per_au();
        for index in 0..blocks {
            let records =
                match self.read_meta_file_block(FILE_ALIAS_DIRECTORY, BlockType::Alias, index) {
                    Ok(None) => continue,
                    Ok(Some(block)) => fmt::decode_alias_block(&block[..], index)
                        .map_err(|e| GroupError::Lost(format!("alias block {index}: {e}"))),
                    Err(e) => Err(e),
                };
            let records = match records {
                Ok(r) => r,
                Err(GroupError::Lost(why)) => {
                    self.damage.lose(LostBlock::Alias(index), why);
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.names.load(records);
        }
        Ok(())
    }
}
