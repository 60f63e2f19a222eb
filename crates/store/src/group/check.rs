//! The consistency check (`cairn group check`): what `fsck` is to a filesystem.
//!
//! Cross-checks every extent map against the allocation tables (no AU leaked,
//! none owned twice, none used but marked free), the placement rule (no two
//! copies of an extent in one failure group), the alias tree (parents exist and
//! are directories, names point at live files, every file has exactly one
//! primary name), and the metadata mirrors (every copy of every metadata block
//! valid and identical). With `repair`, it fixes what is safely fixable: leaked
//! AUs are freed, unmarked ones marked, dangling names removed, bad mirror copies
//! rewritten from a good one. An AU owned twice is reported, never "fixed": which
//! owner is right is a question for a person.

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group::{is_map_number, mapped_file, AliasKind, SUPER_SLOT_OFFSETS_BYTES};
use cairn_format::meta::{self, BLOCK_BYTES};
use cairn_io::AlignedBuf;
use serde::Serialize;

use super::data;
use super::error::GroupError;
use super::mounted::Group;
use super::parts::damage::LostBlock;
use super::parts::members::Member;
use super::parts::txn::Dirty;
use super::tables::OwnedRun;
use crate::names::Component;

/// Where `check --repair` puts names it had to move, and files it had to name.
pub const LOST_AND_FOUND: &str = "lost+found";
use cairn_format::group::AtLayout;

/// A valid copy of a metadata block: its generation and its bytes.
type Generation = (u64, Vec<u8>);

/// One problem the check found.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Problem {
    /// Where: `disk DATA_0001 AU 57`, `file 260 extent 3`, `alias +DATA/x`...
    pub location: String,
    pub what: String,
    /// Whether `--repair` fixed it.
    pub repaired: bool,
    /// Whether `--repair` can fix it (an AU owned twice, a short disk, two
    /// copies in one failure group cannot be: a person must decide).
    pub repairable: bool,
}

#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct CheckReport {
    pub files: usize,
    pub extents: u64,
    pub aus_in_use: u64,
    pub metadata_blocks_compared: u64,
    pub problems: Vec<Problem>,
    /// Members not serving reads (OFFLINE, SYNCING, or missing): the group runs on
    /// the other copies, and one more failure may lose data.
    pub disks_not_in_use: Vec<String>,
    /// Always false: the check reads metadata only. Data blocks carry no
    /// checksums, so a rotted data block is not found here.
    pub data_read: bool,
}

impl CheckReport {
    /// No problem is left unrepaired (the group may still be degraded).
    pub fn clean(&self) -> bool {
        self.problems.iter().all(|p| p.repaired)
    }

    /// Some member is not in use.
    pub fn degraded(&self) -> bool {
        !self.disks_not_in_use.is_empty()
    }
}

impl Group<'_> {
    /// Check the mounted group; with `repair`, fix what is safely fixable.
    pub fn check(&mut self, repair: bool) -> Result<CheckReport, GroupError> {
        if repair {
            self.check_writable()?;
            // Repairs commit in chunks that stand alone: the running
            // transaction (other operations' changes, behind a LiveGroup)
            // goes first, whole, so no chunk carries a part of it.
            self.commit_now()?;
        } else {
            self.check_usable()?;
        }
        let mut report = CheckReport::default();
        self.check_extents(repair, &mut report)?;
        self.check_aliases(repair, &mut report)?;
        self.check_lost(repair, &mut report)?;
        self.check_mirrors(repair, &mut report)?;
        self.check_map_blocks(repair, &mut report)?;
        self.check_superblocks(repair, &mut report)?;
        for what in self.damage.short() {
            report.problems.push(Problem {
                location: "member disk".into(),
                what: what.clone(),
                repaired: false,
                repairable: false,
            });
        }
        report.disks_not_in_use = self
            .disks()
            .into_iter()
            .filter(|d| d.state != cairn_format::group::DiskState::Online)
            .map(|d| {
                format!(
                    "{} (failure group {}): {}",
                    d.label,
                    d.failgroup,
                    // As `group disks` says it: OFFLINE, or SYNCING (written,
                    // not yet read).
                    if d.missing {
                        "missing"
                    } else {
                        d.state.as_str()
                    }
                )
            })
            .collect();
        if repair {
            self.commit_in_chunks()?;
        }
        Ok(report)
    }

    /// Who owns each AU, per the extent maps (a description of the copy),
    /// and what is wrong with where the copies are: on a disk not in the
    /// group, two in one failure group, outside the disk's data AUs, an
    /// AU owned twice. Memory only: `check` and
    /// [`Group::check_invariants`] both start here.
    pub(super) fn audit_ownership(
        &self,
        report: &mut CheckReport,
    ) -> (BTreeMap<(u16, u64), OwnedRun>, Vec<Problem>) {
        let mut owner: BTreeMap<(u16, u64), OwnedRun> = BTreeMap::new();
        let mut problems = Vec::new();
        report.files = self.files.len();
        // Failure groups seen so far per (file, extent or pointer).
        let mut extent_fgs: BTreeMap<(u32, u64, bool), BTreeSet<u16>> = BTreeMap::new();
        for run in self.owned_runs() {
            // Described only for a problem: the simulators audit after
            // every step.
            let what = || run.describe();
            if run.copy == 0 {
                report.extents += 1;
            }
            let Some(m) = self.member(run.disk) else {
                problems.push(Problem {
                    location: what(),
                    what: format!("copy on disk {}, which is not in the group", run.disk),
                    repaired: false,
                    repairable: false,
                });
                continue;
            };
            let fgs = extent_fgs
                .entry((run.file, run.index, run.indirect))
                .or_default();
            if !fgs.insert(m.entry.failgroup_id) {
                problems.push(Problem {
                    location: what(),
                    what: format!("two copies in failure group {}", m.entry.failgroup),
                    repaired: false,
                    repairable: false,
                });
            }
            // A pending shrink's cut is not the end: copies past it wait
            // to be moved, inside the layout.
            let (first_data, end) = AtLayout::for_disk(m.entry.size_bytes, self.au_bytes)
                .map_or((0, 0), |l| (l.first_data_au, l.au_count));
            for au in run.au..run.au + run.len {
                if au >= end || au < first_data {
                    problems.push(Problem {
                        location: what(),
                        what: format!(
                            "AU {au} is outside disk {}'s data AUs {first_data}..{end}",
                            m.entry.label
                        ),
                        repaired: false,
                        repairable: false,
                    });
                    continue;
                }
                if let Some(first) = owner.insert((run.disk, au), run) {
                    problems.push(Problem {
                        location: format!("disk {} AU {au}", m.entry.label),
                        what: format!("owned twice: by {} and by {}", first.describe(), what()),
                        repaired: false,
                        repairable: false,
                    });
                }
            }
        }
        (owner, problems)
    }

    pub(super) fn check_extents(
        &mut self,
        repair: bool,
        report: &mut CheckReport,
    ) -> Result<(), GroupError> {
        let (owner, mut problems) = self.audit_ownership(report);
        report.aus_in_use = owner.len() as u64;
        // Against each online disk's table.
        for n in self.members.numbers() {
            let Some(m) = self.member(n) else { continue };
            if m.online().is_none() {
                continue;
            }
            let label = m.entry.label.clone();
            let alloc = m.alloc.as_ref().expect("invariant: online");
            let marked: BTreeSet<u64> = alloc.used_list().into_iter().collect();
            let owned: BTreeSet<u64> = owner
                .range((n, 0)..(n + 1, 0))
                .map(|((_, au), _)| *au)
                .collect();
            let leaked: Vec<u64> = marked.difference(&owned).copied().collect();
            let unmarked: Vec<u64> = owned.difference(&marked).copied().collect();
            let alloc = self
                .member_mut(n)
                .and_then(|m| m.alloc.as_mut())
                .expect("invariant: online");
            for au in leaked {
                if repair {
                    alloc.free(au as u32, 1);
                }
                problems.push(Problem {
                    location: format!("disk {label} AU {au}"),
                    what: "leaked: marked used, owned by no file".into(),
                    repaired: repair,
                    repairable: true,
                });
            }
            for au in unmarked {
                if repair && !alloc.is_used(au) {
                    alloc.mark(au, 1, true);
                }
                problems.push(Problem {
                    location: format!("disk {label} AU {au}"),
                    what: "in use by a file but marked free".into(),
                    repaired: repair,
                    repairable: true,
                });
            }
        }
        report.problems.extend(problems);
        Ok(())
    }

    /// The name tree: every name's directory exists and the chain reaches the
    /// root, every file name points at a live file, every file has exactly one
    /// name of its own. Repair removes names of files that are gone, and
    /// keeps everything else reachable: a name whose directory is gone, or
    /// whose directories loop, moves into `lost+found`; a file with no name of
    /// its own gets one there (`file_N`).
    pub(super) fn check_aliases(
        &mut self,
        repair: bool,
        report: &mut CheckReport,
    ) -> Result<(), GroupError> {
        let NameScan {
            dangling,
            homeless,
            primary,
        } = self.scan_names();
        let nameless: Vec<u32> = self
            .file_numbers()
            .into_iter()
            .filter(|n| {
                primary.get(n).copied().unwrap_or(0) == 0
                    && self.files[n].entry.state == cairn_format::group::FileState::Active
            })
            .collect();
        for number in self.file_numbers() {
            let count = primary.get(&number).copied().unwrap_or(0);
            if count > 1 {
                report.problems.push(Problem {
                    location: format!("file {number}"),
                    what: format!("has {count} names of its own (expected 1)"),
                    repaired: false,
                    repairable: false,
                });
            }
        }
        let lost_found = if repair && (!homeless.is_empty() || !nameless.is_empty()) {
            Some(self.lost_and_found()?)
        } else {
            None
        };
        for (id, what) in dangling {
            if repair {
                self.remove_alias(id);
            }
            report.problems.push(Problem {
                location: format!("alias {id}"),
                what: format!("{what}{}", if repair { "; name removed" } else { "" }),
                repaired: repair,
                repairable: true,
            });
        }
        for (id, what) in homeless {
            let moved = match lost_found {
                Some(dir) => Some(self.move_to_lost_and_found(id, dir)?),
                None => None,
            };
            report.problems.push(Problem {
                location: format!("alias {id}"),
                what: match &moved {
                    Some(path) => format!("{what}; moved to {path}"),
                    None => what,
                },
                repaired: moved.is_some(),
                repairable: true,
            });
        }
        if repair {
            self.find_orphan_parents();
        }
        for number in nameless {
            let named = match lost_found {
                Some(dir) => Some(self.name_in_lost_and_found(number, dir)?),
                None => None,
            };
            report.problems.push(Problem {
                location: format!("file {number}"),
                what: match &named {
                    Some(path) => format!("had no name of its own; now {path}"),
                    None => "has no name of its own (its name was lost)".to_string(),
                },
                repaired: named.is_some(),
                repairable: true,
            });
        }
        Ok(())
    }

    /// Every name, judged ([`NameScan`]).
    fn scan_names(&self) -> NameScan {
        let mut dangling = Vec::new();
        let mut homeless = Vec::new();
        let mut primary: BTreeMap<u32, u32> = BTreeMap::new();
        for r in self.names.records() {
            let parent_ok = r.parent == 0
                || self
                    .names
                    .get(r.parent)
                    .is_some_and(|p| p.kind == AliasKind::Directory);
            let target_ok = r.kind == AliasKind::Directory || self.live_file(r).is_some();
            if !target_ok {
                dangling.push((
                    r.id,
                    format!(
                        "name {:?} (id {}) points at file {}, which {}",
                        r.name,
                        r.id,
                        r.file_number,
                        if self.damage.is_lost(LostBlock::Entry(r.file_number)) {
                            "is lost"
                        } else {
                            "does not exist"
                        }
                    ),
                ));
                continue;
            }
            if r.kind == AliasKind::File {
                *primary.entry(r.file_number).or_default() += 1;
            }
            if !parent_ok {
                homeless.push((
                    r.id,
                    format!(
                        "name {:?} (id {}): its directory does not exist",
                        r.name, r.id
                    ),
                ));
            } else if !self.names.reaches_root(r) {
                homeless.push((
                    r.id,
                    format!(
                        "name {:?} (id {}): its directories form a cycle",
                        r.name, r.id
                    ),
                ));
            }
        }
        NameScan {
            dangling,
            homeless,
            primary,
        }
    }

    /// The `lost+found` directory at the root, made if need be.
    pub(super) fn lost_and_found(&mut self) -> Result<u32, GroupError> {
        let name = Component::parse(LOST_AND_FOUND).map_err(GroupError::from)?;
        if let Some(r) = self.child(0, &name) {
            if r.kind == AliasKind::Directory {
                return Ok(r.id);
            }
            return Err(GroupError::Invalid(format!(
                "+{}/{LOST_AND_FOUND} is a file; rename or remove it so that check can put names there",
                self.name
            )));
        }
        self.add_alias(0, &name, AliasKind::Directory, None)
    }

    /// A free name in `lost+found` starting with `base`.
    pub(super) fn free_name_in(&self, dir: u32, base: &str) -> Result<Component, GroupError> {
        let mut n = 0u32;
        loop {
            let suffix = if n == 0 {
                String::new()
            } else {
                format!(".{n}")
            };
            // Cut the base so the suffix fits the limit (at a character
            // boundary: a name read from disk is not trusted to be ASCII).
            let mut keep = base
                .len()
                .min(cairn_format::group::ALIAS_NAME_LEN_MAX - suffix.len());
            while !base.is_char_boundary(keep) {
                keep -= 1;
            }
            let text = format!("{}{suffix}", &base[..keep]);
            let c = Component::parse(&text).map_err(GroupError::from)?;
            if self.child(dir, &c).is_none() {
                return Ok(c);
            }
            n += 1;
        }
    }

    pub(super) fn move_to_lost_and_found(
        &mut self,
        id: u32,
        dir: u32,
    ) -> Result<String, GroupError> {
        let old_name = self
            .names
            .get(id)
            .map(|r| r.name.clone())
            .ok_or_else(|| GroupError::Corrupt(format!("name {id} vanished")))?;
        // A name read from disk that is not a valid name today gets its id.
        let base = if Component::parse(&old_name).is_ok() {
            old_name
        } else {
            format!("name_{id}")
        };
        let name = self.free_name_in(dir, &base)?;
        self.names.rename(id, dir, name.as_str());
        self.txn
            .mark(Dirty::Alias(super::namespace::alias_block_of(id)));
        Ok(format!("+{}/{LOST_AND_FOUND}/{}", self.name, name.as_str()))
    }

    pub(super) fn name_in_lost_and_found(
        &mut self,
        number: u32,
        dir: u32,
    ) -> Result<String, GroupError> {
        let name = self.free_name_in(dir, &format!("file_{number}"))?;
        let rec = self.files[&number].clone();
        self.add_alias(dir, &name, AliasKind::File, Some(&rec))?;
        Ok(format!("+{}/{LOST_AND_FOUND}/{}", self.name, name.as_str()))
    }

    /// Metadata blocks lost at mount: each is a problem, and repair writes
    /// it afresh from what the group holds now (an entry as free, an alias
    /// block with the names that are left, the default templates or
    /// attributes).
    pub(super) fn check_lost(
        &mut self,
        repair: bool,
        report: &mut CheckReport,
    ) -> Result<(), GroupError> {
        let described = self.describe_lost();
        let lost: Vec<LostBlock> = self.damage.lost().map(|(b, _)| *b).collect();
        for (block, what) in lost.into_iter().zip(described) {
            let location = match block {
                LostBlock::Entry(n) if is_map_number(n) => {
                    format!("checksum directory entry {}", mapped_file(n))
                }
                LostBlock::Entry(n) => format!("file directory entry {n}"),
                LostBlock::Map(n) if is_map_number(n) => {
                    format!("extent map of file {}'s checksum map", mapped_file(n))
                }
                LostBlock::Map(n) => format!("extent map of file {n}"),
                LostBlock::Alias(k) => format!("alias block {k}"),
                LostBlock::Templates => "templates block".to_string(),
                LostBlock::Attributes => "attributes block".to_string(),
            };
            if repair {
                self.repair_lost(block)?;
            }
            report.problems.push(Problem {
                location,
                what,
                repaired: repair,
                repairable: true,
            });
        }
        Ok(())
    }

    /// Write a lost block afresh from what memory has.
    fn repair_lost(&mut self, block: LostBlock) -> Result<(), GroupError> {
        match block {
            // A cut checksum map goes: its file is read without checksums.
            LostBlock::Map(m) if is_map_number(m) => return self.remove_map(mapped_file(m)),
            // The map of a file whose entry is lost goes first.
            LostBlock::Entry(n) if !is_map_number(n) => return self.free_lost_entry(n),
            LostBlock::Map(n) => {
                // Cut where the map ends: the entry says so, and the
                // indirect AUs past it go; the checksum map follows the
                // size. (A file removed since took its damage with it: a
                // defence, never met.)
                if let Some(rec) = self.files.get(n) {
                    let (keep, size) = (rec.extents.len() as u64, rec.entry.size_bytes);
                    self.trim_extents(n, keep)?;
                    self.trim_map(n, size)?;
                    self.size_map(n, size, 0);
                }
            }
            _ => {}
        }
        self.txn.mark(match block {
            LostBlock::Entry(n) | LostBlock::Map(n) => Dirty::Entry(n),
            LostBlock::Alias(k) => Dirty::Alias(k),
            LostBlock::Templates => Dirty::Templates,
            LostBlock::Attributes => Dirty::Attributes,
        });
        self.damage.rewritten(block);
        Ok(())
    }

    /// Every member in use holds the group's newest superblock generation in
    /// one of its two slots, and no slot holds damaged bytes (a blank slot is
    /// one never written yet). Repair writes two fresh generations, so both
    /// slots of every member are whole.
    pub(super) fn check_superblocks(
        &mut self,
        repair: bool,
        report: &mut CheckReport,
    ) -> Result<(), GroupError> {
        let mut found = Vec::new();
        for n in self.members.numbers() {
            let Some(device) = self.member(n).and_then(Member::online) else {
                continue;
            };
            let label = self.disk_name(n);
            let mut newest = None;
            for (slot, base) in SUPER_SLOT_OFFSETS_BYTES.iter().enumerate() {
                let name = ["A", "B"][slot];
                match super::slots::read_slot(&mut *self.engine, device, self.uuid, *base) {
                    Some(read) => newest = newest.max(Some(read.generation)),
                    None if super::slots::slot_damaged(
                        &mut *self.engine,
                        device,
                        self.uuid,
                        *base,
                    ) =>
                    {
                        found.push((
                            format!("disk {label} superblock slot {name} (offset {base})"),
                            "damaged (a torn write, or overwritten): not a valid superblock of this group".to_string(),
                        ));
                    }
                    None => {}
                }
            }
            match newest {
                None => found.push((
                    format!("disk {label}"),
                    "holds no valid superblock: only the other disks say it is a member"
                        .to_string(),
                )),
                Some(g) if g < self.slot_generation => found.push((
                    format!("disk {label}"),
                    format!(
                        "its newest superblock is generation {g}; the group's is {}",
                        self.slot_generation
                    ),
                )),
                Some(_) => {}
            }
        }
        if repair && !found.is_empty() {
            self.write_superblocks()?;
            self.write_superblocks()?;
        }
        report
            .problems
            .extend(found.into_iter().map(|(location, what)| Problem {
                location,
                what,
                repaired: repair,
                repairable: true,
            }));
        Ok(())
    }

    /// Every metadata block's copies must be valid and identical.
    pub(super) fn check_mirrors(
        &mut self,
        repair: bool,
        report: &mut CheckReport,
    ) -> Result<(), GroupError> {
        let mut blocks = self.metadata_blocks();
        // Blocks this repair is about to write whole are not compared.
        blocks.retain(|d| !self.txn.is_dirty(d));
        for d in blocks {
            let (id, places) = self.dirty_id_and_places(d);
            let mut images: Vec<(u16, u64, Option<Generation>)> = Vec::new();
            for (disk, offset) in places {
                if self.member(disk).and_then(Member::online).is_none() {
                    continue;
                }
                let data = self
                    .read_one(disk, offset, BLOCK_BYTES)
                    .ok()
                    .map(|b| b[..].to_vec());
                let valid = data.and_then(|b| {
                    meta::open(&b, id, self.uuid)
                        .ok()
                        .map(|generation| (generation, b))
                });
                images.push((disk, offset, valid));
            }
            report.metadata_blocks_compared += 1;
            // The newest valid generation is the reference: an older valid
            // copy is what a lost in-place write leaves behind.
            let good = images.iter().filter_map(|(_, _, v)| v.clone()).fold(
                None,
                |best: Option<(u64, Vec<u8>)>, v| match best {
                    Some(b) if b.0 >= v.0 => Some(b),
                    _ => Some(v),
                },
            );
            let Some((newest, good)) = good else {
                report.problems.push(Problem {
                    location: format!("{id}"),
                    what: "no valid copy".into(),
                    repaired: false,
                    repairable: false,
                });
                continue;
            };
            let mut rewrite = Vec::new();
            for (disk, offset, data) in &images {
                let what = match data {
                    Some((_, bytes)) if bytes[..] == good[..] => continue,
                    Some((generation, _)) if *generation < newest => {
                        format!("stale: generation {generation}, the newest copy has {newest}")
                    }
                    Some(_) => "differs from its mirror".into(),
                    None => "damaged or unreadable".into(),
                };
                report.problems.push(Problem {
                    location: format!("{id} copy on {} at {offset}", self.disk_name(*disk)),
                    what,
                    repaired: repair,
                    repairable: true,
                });
                rewrite.push((*disk, *offset, AlignedBuf::from_slice(&good)));
            }
            if repair && !rewrite.is_empty() {
                let failed = self.write_many(rewrite)?;
                self.failed_disks.extend(failed);
            }
        }
        if repair {
            self.flush_all_checked()?;
        }
        Ok(())
    }
}

impl Group<'_> {
    /// Every written block of every checksum map: some copy must be valid,
    /// and every copy as new as the newest (`docs/checksums.md`: a torn or
    /// lost write of a map block leaves an older copy, the newest valid one
    /// is the block). With `repair`, a copy that is not the newest is
    /// rewritten from it, except in a map whose AUs another file claims
    /// (a write there would land in the other file). A block with no valid
    /// copy is reported: its units are unverifiable. Not on a served group:
    /// its reads would run under `meta` (and a map's writer latches the
    /// block, which this does not); the scrub is to judge them there.
    pub(super) fn check_map_blocks(
        &mut self,
        repair: bool,
        report: &mut CheckReport,
    ) -> Result<(), GroupError> {
        if self.live {
            return Ok(());
        }
        let maps: Vec<(u32, u64)> = self
            .files
            .maps()
            .map(|(n, rec)| (*n, rec.entry.size_bytes / BLOCK_BYTES as u64))
            .collect();
        for (map, blocks) in maps {
            let Some(snap) = self.plane.file(map) else {
                continue;
            };
            let fixable = snap.read_only.is_none();
            let file = mapped_file(map);
            let mut rewrite = Vec::new();
            for block in 0..blocks {
                let location = format!("block {block} of the checksum map of file {file}");
                let uuid = self.uuid;
                let read = match data::read_map_copies(self, uuid, file, block) {
                    Ok(read) => read,
                    Err(e) => {
                        report.problems.push(Problem {
                            location,
                            what: format!("not read: {e}"),
                            repaired: false,
                            repairable: false,
                        });
                        continue;
                    }
                };
                let Some((newest, image)) = &read.newest else {
                    let bad = read.faults(|disk| self.disk_name(disk));
                    if !bad.is_empty() {
                        report.problems.push(Problem {
                            location,
                            what: format!(
                                "no valid copy ({}): the checksums of its units are lost",
                                bad.join("; ")
                            ),
                            repaired: false,
                            repairable: false,
                        });
                    }
                    continue;
                };
                for (c, offset, copy) in &read.copies {
                    let what = match copy {
                        data::MapCopy::Valid(g) if *g == newest.generation => continue,
                        data::MapCopy::Valid(g) => format!(
                            "stale: generation {g}, the newest copy has {}",
                            newest.generation
                        ),
                        data::MapCopy::Blank => {
                            "blank: a write of it did not reach this copy".into()
                        }
                        data::MapCopy::Bad(why) => format!("damaged or unreadable: {why}"),
                    };
                    report.problems.push(Problem {
                        location: format!(
                            "{location} copy on {} at {offset}",
                            self.disk_name(c.disk)
                        ),
                        what,
                        repaired: repair && fixable,
                        repairable: fixable,
                    });
                    if fixable {
                        rewrite.push((c.disk, *offset, AlignedBuf::from_slice(image)));
                    }
                }
            }
            if repair && !rewrite.is_empty() {
                let failed = self.write_many(rewrite)?;
                self.failed_disks.extend(failed);
                self.flush_all_checked()?;
            }
        }
        Ok(())
    }
}

/// What [`Group::scan_names`] finds: the names that point at a file that is
/// gone (dangling), and those whose directory is gone or whose directories
/// loop (homeless), each by alias id with what is wrong; and each file's
/// count of names of its own.
struct NameScan {
    dangling: Vec<(u32, String)>,
    homeless: Vec<(u32, String)>,
    primary: BTreeMap<u32, u32>,
}
