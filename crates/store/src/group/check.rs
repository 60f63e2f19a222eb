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

use cairn_format::group::{AliasKind, DIRECT_EXTENTS, EXTENTS_PER_INDIRECT_BLOCK, FILE_DIRECTORY};
use cairn_format::meta::{self, BLOCK_BYTES};
use cairn_io::AlignedBuf;
use serde::Serialize;

use super::{Dirty, Group, GroupError, Member};
use cairn_format::group::AtLayout;

/// A valid copy of a metadata block: its generation and its bytes.
type Generation = (u64, Vec<u8>);

/// One problem the check found.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// Where: `disk DATA_0001 AU 57`, `file 260 extent 3`, `alias +DATA/x`...
    pub location: String,
    pub what: String,
    /// Whether `--repair` fixed it.
    pub repaired: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckReport {
    pub files: usize,
    pub extents: u64,
    pub aus_in_use: u64,
    pub metadata_blocks_compared: u64,
    pub problems: Vec<Problem>,
}

impl CheckReport {
    pub fn clean(&self) -> bool {
        self.problems.iter().all(|p| p.repaired)
    }
}

impl Group<'_> {
    /// Check the mounted group; with `repair`, fix what is safely fixable.
    pub fn check(&mut self, repair: bool) -> Result<CheckReport, GroupError> {
        if repair {
            self.check_writable()?;
        } else {
            self.check_usable()?;
        }
        let mut report = CheckReport::default();
        self.check_extents(repair, &mut report)?;
        self.check_aliases(repair, &mut report);
        self.check_mirrors(repair, &mut report)?;
        if repair {
            self.commit_in_chunks()?;
        }
        Ok(report)
    }

    fn check_extents(&mut self, repair: bool, report: &mut CheckReport) -> Result<(), GroupError> {
        // Who owns each AU, per the extent maps.
        let mut owner: BTreeMap<(u16, u64), String> = BTreeMap::new();
        let mut problems = Vec::new();
        report.files = self.files.len();
        // Failure groups seen so far per (file, extent or pointer).
        let mut extent_fgs: BTreeMap<(u32, u64, bool), BTreeSet<u16>> = BTreeMap::new();
        for run in self.owned_runs() {
            let what = run.describe();
            if run.copy == 0 {
                report.extents += 1;
            }
            let Some(m) = self.member(run.disk) else {
                problems.push(Problem {
                    location: what,
                    what: format!("copy on disk {}, which is not in the group", run.disk),
                    repaired: false,
                });
                continue;
            };
            let fgs = extent_fgs
                .entry((run.file, run.index, run.indirect))
                .or_default();
            if !fgs.insert(m.entry.failgroup_id) {
                problems.push(Problem {
                    location: what.clone(),
                    what: format!("two copies in failure group {}", m.entry.failgroup),
                    repaired: false,
                });
            }
            let first_data = AtLayout::for_disk(m.entry.size_bytes, self.au_bytes)
                .map_or(0, |l| l.first_data_au);
            for au in run.au..run.au + run.len {
                if au >= m.entry.au_count || au < first_data {
                    problems.push(Problem {
                        location: what.clone(),
                        what: format!(
                            "AU {au} is outside disk {}'s data AUs {first_data}..{}",
                            m.entry.label, m.entry.au_count
                        ),
                        repaired: false,
                    });
                    continue;
                }
                if let Some(first) = owner.insert((run.disk, au), what.clone()) {
                    problems.push(Problem {
                        location: format!("disk {} AU {au}", m.entry.label),
                        what: format!("owned twice: by {first} and by {what}"),
                        repaired: false,
                    });
                }
            }
        }
        report.aus_in_use = owner.len() as u64;
        // Against each online disk's table.
        for n in 0..self.members.len() as u16 {
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
                });
            }
        }
        report.problems.extend(problems);
        Ok(())
    }

    fn check_aliases(&mut self, repair: bool, report: &mut CheckReport) {
        let mut drop = Vec::new();
        let mut primary: BTreeMap<u32, u32> = BTreeMap::new();
        for r in self.aliases.values() {
            let parent_ok = r.parent == 0
                || self
                    .aliases
                    .get(&r.parent)
                    .is_some_and(|p| p.kind == AliasKind::Directory);
            let target_ok = match r.kind {
                AliasKind::Directory => true,
                _ => self
                    .files
                    .get(&r.file_number)
                    .is_some_and(|f| f.entry.incarnation == r.file_incarnation),
            };
            if !parent_ok || !target_ok {
                drop.push((
                    r.id,
                    format!(
                        "name {:?} (id {}): {}",
                        r.name,
                        r.id,
                        if parent_ok {
                            "points at a file that does not exist"
                        } else {
                            "its directory does not exist"
                        }
                    ),
                ));
            }
            if r.kind == AliasKind::File {
                *primary.entry(r.file_number).or_default() += 1;
            }
            // Cycles: the parent chain must reach the root.
            let mut at = r.parent;
            let mut steps = 0;
            while at != 0 && steps <= self.aliases.len() {
                at = self.aliases.get(&at).map_or(0, |p| p.parent);
                steps += 1;
            }
            if steps > self.aliases.len() {
                drop.push((
                    r.id,
                    format!(
                        "name {:?} (id {}): its directories form a cycle",
                        r.name, r.id
                    ),
                ));
            }
        }
        for (id, what) in drop {
            if repair {
                self.remove_alias(id);
            }
            report.problems.push(Problem {
                location: format!("alias {id}"),
                what,
                repaired: repair,
            });
        }
        for number in self.file_numbers() {
            let count = primary.get(&number).copied().unwrap_or(0);
            if count != 1
                && self.files[&number].entry.state == cairn_format::group::FileState::Active
            {
                report.problems.push(Problem {
                    location: format!("file {number}"),
                    what: format!("has {count} primary names (expected 1)"),
                    repaired: false,
                });
            }
        }
    }

    /// Every metadata block's copies must be valid and identical.
    fn check_mirrors(&mut self, repair: bool, report: &mut CheckReport) -> Result<(), GroupError> {
        let mut blocks: Vec<Dirty> = Vec::new();
        for (number, rec) in &self.files {
            blocks.push(Dirty::Entry(*number));
            let indirect = (rec.extents.len().saturating_sub(DIRECT_EXTENTS))
                .div_ceil(EXTENTS_PER_INDIRECT_BLOCK);
            blocks.extend((0..indirect as u64).map(|block| Dirty::Indirect {
                file: *number,
                block,
            }));
        }
        let alias_blocks: BTreeSet<u64> = self
            .aliases
            .keys()
            .map(|id| super::alias_block_of(*id))
            .collect();
        blocks.extend(alias_blocks.into_iter().map(Dirty::Alias));
        blocks.push(Dirty::Templates);
        blocks.push(Dirty::Attributes);
        let _ = FILE_DIRECTORY;
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
