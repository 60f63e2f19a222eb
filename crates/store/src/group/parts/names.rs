//! The name table: every name record of the group (directories, files'
//! own names, aliases), by id, and the index that finds one by its
//! directory and name.
//!
//! Owned by the [`Group`](super::super::Group) (changed only under the
//! group's `&mut`, i.e. under a live group's `meta`). The records and the
//! index change together here and nowhere else, so the index cannot drift
//! from the records: a name is found by its key ([`name_key`]: names are
//! case-insensitive, ASCII, as ASM's are) exactly when a record holds it.
//!
//! Ids are handed out lowest-free first, skipping ids that must not name
//! anything new yet: an id some name still gives as its directory although
//! no record has it (its alias block was lost: the lost directory's
//! children would appear in the new one), and ids of directories removed
//! while a file system's kernel still knows them (the new directory would
//! take the old one's inode).
//!
//! Which metadata blocks a change dirties is the caller's business (the
//! transaction's): this table holds no disk state.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cairn_format::group::{AliasKind, AliasRecord, DirAttrs, ALIAS_NAME_LEN_MAX};

use super::violations::Violations;

/// The root directory's id: no record has it.
pub(in crate::group) const ROOT: u32 = 0;

/// The index key of a name: names match whatever their ASCII case.
pub(in crate::group) fn name_key(name: &str) -> String {
    name.to_ascii_lowercase()
}

#[derive(Debug, Default)]
pub(in crate::group) struct NameTable {
    /// Every name record, by id.
    records: BTreeMap<u32, AliasRecord>,
    /// (directory id, [`name_key`]) → id, one entry per record.
    index: HashMap<(u32, String), u32>,
    /// Directory ids that names give as their parent but that no record
    /// has (found at mount and after a repair): never handed out.
    orphan_parents: BTreeSet<u32>,
    /// Ids of directories removed while a file system's kernel still knew
    /// them: not handed out until it lets go ([`Self::release`]). In
    /// memory only: a remount starts a new kernel view.
    held: BTreeSet<u32>,
    /// The disks held two records of one directory and name (damage): a
    /// removal of the one the index finds gives the name to the other.
    duplicates: bool,
}

impl NameTable {
    /// The table of the records read at mount, in the order read: a later
    /// record of the same directory and name replaces an earlier one in
    /// the index only (both are kept).
    pub(in crate::group) fn load(&mut self, records: impl IntoIterator<Item = AliasRecord>) {
        for r in records {
            let before = self.index.insert((r.parent, name_key(&r.name)), r.id);
            self.duplicates |= before.is_some_and(|id| id != r.id);
            self.records.insert(r.id, r);
        }
    }

    /// Recompute the orphan parents from the records.
    pub(in crate::group) fn find_orphan_parents(&mut self) {
        self.orphan_parents = self
            .records
            .values()
            .map(|r| r.parent)
            .filter(|p| *p != ROOT && !self.records.contains_key(p))
            .collect();
    }

    pub(in crate::group) fn get(&self, id: u32) -> Option<&AliasRecord> {
        self.records.get(&id)
    }

    /// Every record, by id.
    pub(in crate::group) fn records(&self) -> impl Iterator<Item = &AliasRecord> + '_ {
        self.records.values()
    }

    /// The records whose ids fall in `ids` (one alias block's).
    pub(in crate::group) fn range(
        &self,
        ids: std::ops::Range<u32>,
    ) -> impl Iterator<Item = &AliasRecord> + '_ {
        self.records.range(ids).map(|(_, r)| r)
    }

    /// Name `key` ([`name_key`]) in directory `parent`.
    pub(in crate::group) fn child(&self, parent: u32, key: &str) -> Option<&AliasRecord> {
        self.index
            .get(&(parent, key.to_string()))
            .and_then(|id| self.records.get(id))
    }

    /// The records in directory `dir`, by id.
    pub(in crate::group) fn children(&self, dir: u32) -> impl Iterator<Item = &AliasRecord> + '_ {
        self.records.values().filter(move |r| r.parent == dir)
    }

    /// Whether directory `dir` holds anything, or may: names whose
    /// directory record was lost give it as their parent.
    pub(in crate::group) fn has_children(&self, dir: u32) -> bool {
        self.orphan_parents.contains(&dir) || self.children(dir).next().is_some()
    }

    /// Whether `dir` is `id` or lies below it. A damaged table whose
    /// directories loop ends the walk after as many steps as there are
    /// records (`check` reports the loop).
    pub(in crate::group) fn is_within(&self, dir: u32, id: u32) -> bool {
        let mut at = dir;
        let mut steps = 0;
        while at != ROOT && steps <= self.records.len() {
            if at == id {
                return true;
            }
            at = self.records.get(&at).map_or(ROOT, |r| r.parent);
            steps += 1;
        }
        false
    }

    /// The names from `record` up to the root's child, nearest first; `?`
    /// where a directory is missing; bounded as [`Self::is_within`].
    pub(in crate::group) fn path_parts<'a>(&'a self, record: &'a AliasRecord) -> Vec<&'a str> {
        let mut parts = vec![record.name.as_str()];
        let mut parent = record.parent;
        while parent != ROOT && parts.len() <= self.records.len() {
            match self.records.get(&parent) {
                Some(p) => {
                    parts.push(p.name.as_str());
                    parent = p.parent;
                }
                None => {
                    parts.push("?");
                    break;
                }
            }
        }
        parts
    }

    /// Whether the chain of directories above `record` reaches the root
    /// (or a lost directory) within as many steps as there are records.
    pub(in crate::group) fn reaches_root(&self, record: &AliasRecord) -> bool {
        let mut at = record.parent;
        let mut steps = 0;
        while at != ROOT && steps <= self.records.len() {
            at = self.records.get(&at).map_or(ROOT, |p| p.parent);
            steps += 1;
        }
        steps <= self.records.len()
    }

    /// The lowest id free to name something new; `unusable` says which
    /// other ids must be skipped (a lost alias block's).
    pub(in crate::group) fn free_id(&self, unusable: impl Fn(u32) -> bool) -> u32 {
        let mut id = 1u32;
        for used in self.records.keys() {
            if *used != id {
                break;
            }
            id += 1;
        }
        while self.records.contains_key(&id)
            || self.orphan_parents.contains(&id)
            || self.held.contains(&id)
            || unusable(id)
        {
            id += 1;
        }
        id
    }

    /// Add `record` (its id from [`Self::free_id`], its name not yet in
    /// its directory).
    pub(in crate::group) fn insert(&mut self, record: AliasRecord) {
        debug_assert!(!self.records.contains_key(&record.id), "id in use");
        debug_assert!(record.name.len() <= ALIAS_NAME_LEN_MAX, "names validated");
        self.index
            .insert((record.parent, name_key(&record.name)), record.id);
        self.records.insert(record.id, record);
    }

    /// Remove record `id`, if there is one.
    pub(in crate::group) fn remove(&mut self, id: u32) -> Option<AliasRecord> {
        let record = self.records.remove(&id)?;
        let key = (record.parent, name_key(&record.name));
        if self.index.get(&key) == Some(&id) {
            self.index.remove(&key);
            // A duplicate read at mount takes the name over: the last
            // read, as at mount.
            let other = self.duplicates.then(|| {
                self.records
                    .values()
                    .rev()
                    .find(|r| r.parent == key.0 && name_key(&r.name) == key.1)
                    .map(|r| r.id)
            });
            if let Some(other) = other.flatten() {
                self.index.insert(key, other);
            }
        }
        Some(record)
    }

    /// Record `id` under `name` in `parent`: the same record (its id, a
    /// directory's children) under its new name. `false`: no such record.
    pub(in crate::group) fn rename(&mut self, id: u32, parent: u32, name: &str) -> bool {
        let Some(mut record) = self.remove(id) else {
            return false;
        };
        record.parent = parent;
        record.name = name.to_string();
        self.insert(record);
        true
    }

    /// Set directory `id`'s attributes. `false`: no such directory.
    pub(in crate::group) fn set_dir_attrs(&mut self, id: u32, attrs: DirAttrs) -> bool {
        match self.records.get_mut(&id) {
            Some(r) if r.kind == AliasKind::Directory => {
                r.dir_attrs = Some(attrs);
                true
            }
            _ => false,
        }
    }

    /// Keep `id` from being handed out while a kernel knows it.
    pub(in crate::group) fn hold(&mut self, id: u32) {
        self.held.insert(id);
    }

    /// The kernel let go of `id`: it may name something new.
    pub(in crate::group) fn release(&mut self, id: u32) {
        self.held.remove(&id);
    }

    /// What must hold after every operation that succeeded, on a group
    /// whose metadata was as Cairn wrote it at mount (damage that decodes
    /// — a directory record naming a file — is `check`'s to report):
    /// - every record is kept under its own id, and no record has the
    ///   root's id;
    /// - every index entry finds a record with that directory and name,
    ///   and every record's directory and name find a record (itself, or
    ///   a duplicate read at mount);
    /// - no id is both a record's and held for a kernel, nor both a
    ///   record's and an orphan parent;
    /// - names are non-empty and fit the on-disk record; a directory names
    ///   no file.
    pub(in crate::group) fn check_invariants(&self, out: &mut Violations) {
        for (id, r) in &self.records {
            out.check(*id == r.id, || {
                format!("name record {} kept under id {id}", r.id)
            });
            out.check(*id != ROOT, || {
                format!("name {:?} has the root's id", r.name)
            });
            out.check(
                !r.name.is_empty() && r.name.len() <= ALIAS_NAME_LEN_MAX,
                || format!("name record {id}: name {:?} is empty or too long", r.name),
            );
            out.check(
                r.kind != AliasKind::Directory || (r.file_number == 0 && r.file_incarnation == 0),
                || format!("directory {id} ({:?}) names file {}", r.name, r.file_number),
            );
            let key = (r.parent, name_key(&r.name));
            out.check(self.index.contains_key(&key), || {
                format!(
                    "name {:?} (id {id}) in directory {} is not in the index: lookups miss it",
                    r.name, r.parent
                )
            });
            out.check(!self.held.contains(id), || {
                format!(
                    "id {id} names {:?} while held for a kernel that knew the directory removed",
                    r.name
                )
            });
            out.check(!self.orphan_parents.contains(id), || {
                format!("id {id} names {:?} and is a lost directory's", r.name)
            });
        }
        for ((parent, key), id) in &self.index {
            let found = self
                .records
                .get(id)
                .is_some_and(|r| r.parent == *parent && name_key(&r.name) == *key);
            out.check(found, || {
                format!("the index finds {key:?} in directory {parent} at id {id}, which does not hold it")
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u32, parent: u32, name: &str, kind: AliasKind) -> AliasRecord {
        AliasRecord {
            id,
            parent,
            kind,
            name: name.to_string(),
            file_number: if kind == AliasKind::Directory {
                0
            } else {
                300 + id
            },
            file_incarnation: u32::from(kind != AliasKind::Directory),
            created_unix_seconds: 0,
            dir_attrs: None,
        }
    }

    fn clean(t: &NameTable) {
        let mut v = Violations::default();
        t.check_invariants(&mut v);
        assert!(v.is_empty(), "{v}");
    }

    #[test]
    fn a_name_is_found_by_its_key_and_moves_and_goes_with_its_record() {
        let mut t = NameTable::default();
        t.insert(record(1, ROOT, "Data", AliasKind::Directory));
        t.insert(record(2, 1, "users.dbf", AliasKind::File));
        clean(&t);
        assert_eq!(t.child(ROOT, &name_key("DATA")).map(|r| r.id), Some(1));
        assert!(t.rename(2, ROOT, "Users.DBF"));
        assert!(t.child(1, &name_key("users.dbf")).is_none());
        assert_eq!(t.child(ROOT, &name_key("users.dbf")).map(|r| r.id), Some(2));
        assert!(!t.has_children(1));
        clean(&t);
        assert!(t.remove(2).is_some());
        assert!(t.child(ROOT, &name_key("users.dbf")).is_none());
        clean(&t);
    }

    #[test]
    fn held_and_lost_directories_ids_are_not_handed_out() {
        let mut t = NameTable::default();
        // Record 3 names directory 2, which the disks did not give back.
        t.load([
            record(1, ROOT, "a", AliasKind::File),
            record(3, 2, "b", AliasKind::File),
        ]);
        t.find_orphan_parents();
        assert!(t.has_children(2), "a lost directory may still hold names");
        t.insert(record(4, ROOT, "d", AliasKind::Directory));
        t.remove(4);
        t.hold(4);
        assert_eq!(t.free_id(|_| false), 5);
        assert_eq!(t.free_id(|id| id == 5), 6);
        t.release(4);
        assert_eq!(t.free_id(|_| false), 4);
        clean(&t);
    }

    #[test]
    fn with_two_records_of_one_name_the_survivor_of_a_removal_is_found() {
        // Damage: the disks hold two records of one name in one directory.
        // The last read is found; once it is removed, the other is.
        let mut t = NameTable::default();
        t.load([
            record(3, ROOT, "x", AliasKind::File),
            record(5, ROOT, "x", AliasKind::File),
            record(7, ROOT, "X", AliasKind::File),
        ]);
        assert_eq!(t.child(ROOT, "x").map(|r| r.id), Some(7));
        t.remove(3);
        assert_eq!(t.child(ROOT, "x").map(|r| r.id), Some(7));
        t.remove(7);
        assert_eq!(t.child(ROOT, "x").map(|r| r.id), Some(5));
        clean(&t);
    }

    #[test]
    fn a_stale_index_entry_is_a_violation() {
        let mut t = NameTable::default();
        t.insert(record(1, ROOT, "a", AliasKind::File));
        t.records.remove(&1);
        let mut v = Violations::default();
        t.check_invariants(&mut v);
        assert!(v.to_string().contains("the index finds"), "{v}");
    }
}
