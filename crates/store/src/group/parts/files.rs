//! The file table: every file's entry and whole extent map in memory, by
//! file number (the metadata files below [`FILE_NUMBER_USER_MIN`], then
//! the users').
//!
//! Owned by the [`Group`](super::super::Group) (changed only under the
//! group's `&mut`, i.e. under a live group's `meta`). Which records exist
//! changes here only ([`FileTable::insert`], [`FileTable::remove`]), and a
//! record's map only through its named changes: an extent added or taken
//! from the end, one extent's copies or flags, an indirect pointer added
//! or taken. In memory the map ([`FileRec::extents`]) is the truth; the
//! entry's own `extent_count` and `direct` are what the disks last held,
//! and are made from the map when the entry is encoded.
//!
//! What a change dirties (the entry, an indirect block) and when it is
//! published to the data plane are the caller's business (the
//! transaction's, `unpublished.rs`): this table holds no disk state.

use std::collections::BTreeMap;

use cairn_format::group::{
    entry_place, is_map_number, mapped_file, Extent, FileEntry, FileState, CHECKSUM_MAP_BIT,
    COPIES_MAX, DIRECT_EXTENTS, EXTENTS_PER_INDIRECT_BLOCK, FILE_ALIAS_DIRECTORY, FILE_ATTRIBUTES,
    FILE_CHECKSUM_DIRECTORY, FILE_DIRECTORY, FILE_JOURNAL, FILE_NUMBER_USER_MIN, FILE_TEMPLATES,
    INDIRECT_POINTERS, STRIPING_COARSE, STRIPING_FINE,
};
use cairn_format::meta::BLOCK_BYTES;

use super::violations::Violations;
use crate::placement::{self, FileLayout, Striping};

/// A file's metadata in memory: its entry and its whole extent map.
#[derive(Debug, Clone)]
pub(in crate::group) struct FileRec {
    pub(in crate::group) entry: FileEntry,
    pub(in crate::group) extents: Vec<Extent>,
}

/// An entry for metadata file `number` of `copies` copies that the mount
/// bootstraps from the superblocks before it can read the entry itself
/// (the file directory's, the journal's): active, empty, no map.
pub(in crate::group) fn placeholder_entry(number: u32, copies: u8) -> FileEntry {
    FileEntry {
        number,
        incarnation: 0,
        state: FileState::Active,
        copies,
        striping: STRIPING_COARSE,
        size_bytes: 0,
        extent_count: 0,
        target_bytes: 0,
        created_unix_seconds: 0,
        modified_unix_seconds: 0,
        template: String::new(),
        attrs: None,
        direct: Vec::new(),
        indirect: Vec::new(),
    }
}

/// Indirect blocks a map of `extents` extents uses (those past the
/// entry's direct extents).
pub(in crate::group) fn indirect_blocks(extents: u64) -> u64 {
    extents
        .saturating_sub(DIRECT_EXTENTS as u64)
        .div_ceil(EXTENTS_PER_INDIRECT_BLOCK as u64)
}

/// The metadata files every mounted group has.
const METADATA_FILES: [u32; 5] = [
    FILE_DIRECTORY,
    FILE_JOURNAL,
    FILE_ALIAS_DIRECTORY,
    FILE_TEMPLATES,
    FILE_ATTRIBUTES,
];

#[derive(Debug)]
pub(in crate::group) struct FileTable {
    records: BTreeMap<u32, FileRec>,
    au_bytes: u64,
}

impl FileTable {
    /// An empty table of a group of `au_bytes` AUs.
    pub(in crate::group) fn new(au_bytes: u64) -> Self {
        FileTable {
            records: BTreeMap::new(),
            au_bytes,
        }
    }

    // -----------------------------------------------------------------------
    // Reading

    pub(in crate::group) fn get(&self, number: u32) -> Option<&FileRec> {
        self.records.get(&number)
    }

    pub(in crate::group) fn contains(&self, number: u32) -> bool {
        self.records.contains_key(&number)
    }

    pub(in crate::group) fn len(&self) -> usize {
        self.records.len()
    }

    /// Every file, by number.
    pub(in crate::group) fn iter(&self) -> std::collections::btree_map::Iter<'_, u32, FileRec> {
        self.records.iter()
    }

    /// Every file's record, by number.
    pub(in crate::group) fn values(&self) -> impl Iterator<Item = &FileRec> + '_ {
        self.records.values()
    }

    /// The users' files (not the group's own metadata files, not the
    /// checksum maps), by number.
    pub(in crate::group) fn user_files(&self) -> impl Iterator<Item = (&u32, &FileRec)> + '_ {
        self.records.range(FILE_NUMBER_USER_MIN..CHECKSUM_MAP_BIT)
    }

    /// The numbers of the users' files, in order.
    pub(in crate::group) fn user_numbers(&self) -> Vec<u32> {
        self.user_files().map(|(n, _)| *n).collect()
    }

    /// The checksum maps, by number (`map_number` of their data files').
    pub(in crate::group) fn maps(&self) -> impl Iterator<Item = (&u32, &FileRec)> + '_ {
        self.records.range(CHECKSUM_MAP_BIT..)
    }

    /// The users' files and the checksum maps: every file whose extents
    /// hold data (what is published to the data plane, compacted, moved
    /// as data).
    pub(in crate::group) fn data_and_maps(&self) -> impl Iterator<Item = (&u32, &FileRec)> + '_ {
        self.records.range(FILE_NUMBER_USER_MIN..)
    }

    /// The numbers of [`Self::data_and_maps`], in order.
    pub(in crate::group) fn data_and_map_numbers(&self) -> Vec<u32> {
        self.data_and_maps().map(|(n, _)| *n).collect()
    }

    /// How a file's bytes lie across its extents, by its entry's striping.
    pub(in crate::group) fn layout(&self, entry: &FileEntry) -> FileLayout {
        FileLayout::new(
            self.au_bytes,
            if entry.striping == STRIPING_FINE {
                Striping::Fine
            } else {
                Striping::Coarse
            },
        )
    }

    /// Indirect AUs a map of `extents` extents needs.
    pub(in crate::group) fn indirect_aus_needed(&self, extents: u64) -> u64 {
        indirect_blocks(extents).div_ceil(self.au_bytes / BLOCK_BYTES as u64)
    }

    // -----------------------------------------------------------------------
    // Changing

    /// Put `rec` in under its entry's number (a new file, a file loaded, a
    /// metadata file's record replaced).
    pub(in crate::group) fn insert(&mut self, rec: FileRec) {
        self.records.insert(rec.entry.number, rec);
    }

    /// Take file `number` out (a delete's last step).
    pub(in crate::group) fn remove(&mut self, number: u32) -> Option<FileRec> {
        self.records.remove(&number)
    }

    /// File `number`'s entry, to change its state, size, times or
    /// attributes. Not its number, its map or its indirect pointers: those
    /// change through the calls below.
    pub(in crate::group) fn entry_mut(&mut self, number: u32) -> Option<&mut FileEntry> {
        self.records.get_mut(&number).map(|r| &mut r.entry)
    }

    /// Extent `index` of file `number`, to change its copies, its stale
    /// marks or whether it was written; `incarnation`, when given, must
    /// still be the file's (a change decided before the file was deleted
    /// and its number reused is dropped).
    pub(in crate::group) fn extent_mut(
        &mut self,
        number: u32,
        incarnation: Option<u32>,
        index: u64,
    ) -> Option<&mut Extent> {
        self.records
            .get_mut(&number)
            .filter(|r| incarnation.is_none_or(|i| r.entry.incarnation == i))
            .and_then(|r| r.extents.get_mut(usize::try_from(index).ok()?))
    }

    /// Indirect AU `index` of file `number`, to change its copies.
    pub(in crate::group) fn indirect_mut(
        &mut self,
        number: u32,
        index: u64,
    ) -> Option<&mut Extent> {
        self.records
            .get_mut(&number)
            .and_then(|r| r.entry.indirect.get_mut(usize::try_from(index).ok()?))
    }

    /// Add `extent` at the end of file `number`'s map; returns its index.
    /// The indirect AUs that hold it must be there first
    /// ([`Self::push_indirect`]).
    pub(in crate::group) fn push_extent(&mut self, number: u32, extent: Extent) -> Option<u64> {
        let rec = self.records.get_mut(&number)?;
        rec.extents.push(extent);
        Some(rec.extents.len() as u64 - 1)
    }

    /// Take the last extent of file `number`'s map, with its index.
    pub(in crate::group) fn pop_extent(&mut self, number: u32) -> Option<(u64, Extent)> {
        let rec = self.records.get_mut(&number)?;
        let extent = rec.extents.pop()?;
        Some((rec.extents.len() as u64, extent))
    }

    /// Add an indirect AU to file `number`'s entry.
    pub(in crate::group) fn push_indirect(&mut self, number: u32, pointer: Extent) {
        if let Some(rec) = self.records.get_mut(&number) {
            rec.entry.indirect.push(pointer);
        }
    }

    /// Take the last indirect AU of file `number`'s entry.
    pub(in crate::group) fn pop_indirect(&mut self, number: u32) -> Option<Extent> {
        self.records.get_mut(&number)?.entry.indirect.pop()
    }

    // -----------------------------------------------------------------------
    // Invariants

    /// What holds between any two operations that succeeded:
    /// - each record is kept under its own number, and every number has
    ///   an entry in the file directory's extents;
    /// - the group's metadata files are there, each with an extent;
    /// - a file's extents hold its size, and a fine-striped file's are
    ///   whole sets of 8 (what a mount refuses or cuts otherwise) once no
    ///   operation is under way on it (`Active`);
    /// - an `Active` user file has no extent past its size;
    /// - the indirect AUs hold the map, and no more than an entry can name
    ///   (spare ones are not an error: a map a mount cut keeps its indirect
    ///   AUs until `check --repair` frees them, and a metadata file's grow
    ///   that ran out of space keeps the one it took first);
    /// - an extent has 1 to 3 copies.
    ///
    /// A file being deleted is left out of the size rules (its map is freed
    /// from the end while its entry still says its size), and so is every
    /// file of a group that stopped (`settled` false: an operation may have
    /// stopped half way).
    pub(in crate::group) fn check_invariants(&self, settled: bool, out: &mut Violations) {
        if self.records.is_empty() {
            return;
        }
        let room = |dir: u32| {
            self.records.get(&dir).map_or(0, |d| {
                d.extents.len() as u64 * (self.au_bytes / BLOCK_BYTES as u64)
            })
        };
        for f in METADATA_FILES {
            out.check(
                self.records.get(&f).is_some_and(|r| !r.extents.is_empty()),
                || format!("metadata file {f} has no record or no extent"),
            );
        }
        for (number, rec) in &self.records {
            let number = *number;
            out.check(rec.entry.number == number, || {
                format!("file {} kept under number {number}", rec.entry.number)
            });
            let (dir, block) = entry_place(number);
            let entries = room(dir);
            out.check(block < entries, || {
                format!("file {number} has no entry in the {entries} of metadata file {dir}")
            });
            if is_map_number(number) {
                self.check_map_pair(number, rec, out);
            }
            self.check_map(number, rec, settled, out);
        }
    }

    /// A checksum map is its data file's companion: made, resized, moved
    /// and deleted with it, so it has the same incarnation, copies and
    /// state, and none of a user file's own (striping, template,
    /// attributes). Whether a data file is there at all is the group's rule
    /// (its entry may be lost: `invariants.rs`).
    fn check_map_pair(&self, number: u32, rec: &FileRec, out: &mut Violations) {
        let map = &rec.entry;
        out.check(self.records.contains_key(&FILE_CHECKSUM_DIRECTORY), || {
            format!("checksum map {number} without the checksum directory")
        });
        out.check(
            map.striping == STRIPING_COARSE && map.template.is_empty() && map.attrs.is_none(),
            || format!("checksum map {number} has a user file's striping, template or attributes"),
        );
        let file = mapped_file(number);
        out.check(file >= FILE_NUMBER_USER_MIN, || {
            format!("checksum map {number} is of metadata file {file}")
        });
        if let Some(data) = self.records.get(&file).map(|r| &r.entry) {
            out.check(
                (map.incarnation, map.copies, map.state)
                    == (data.incarnation, data.copies, data.state),
                || {
                    format!(
                        "checksum map of file {file}: incarnation, copies, state {:?}, the file's {:?}",
                        (map.incarnation, map.copies, map.state),
                        (data.incarnation, data.copies, data.state)
                    )
                },
            );
        }
    }

    fn check_map(&self, number: u32, rec: &FileRec, settled: bool, out: &mut Violations) {
        let entry = &rec.entry;
        let n = rec.extents.len() as u64;
        if settled && entry.state != FileState::Deleting {
            let layout = self.layout(entry);
            out.check(layout.capacity_bytes(n) >= entry.size_bytes, || {
                format!(
                    "file {number}: {} bytes do not fit its {n} extents",
                    entry.size_bytes
                )
            });
            // A create's grow that ran out of space stops where it
            // stopped (the file is dropped next); a resize a crash cut is
            // settled by the next mount that writes.
            let under_way = entry.state != FileState::Active;
            out.check(
                under_way
                    || entry.striping != STRIPING_FINE
                    || n.is_multiple_of(placement::FINE_STRIPE_WIDTH),
                || format!("file {number}: {n} extents are not whole fine-stripe sets of 8"),
            );
            let sized = number >= FILE_NUMBER_USER_MIN && entry.state == FileState::Active;
            out.check(
                !sized || n == layout.extent_count_for(entry.size_bytes),
                || {
                    format!(
                        "file {number}: {n} extents where its {} bytes need {}",
                        entry.size_bytes,
                        layout.extent_count_for(entry.size_bytes)
                    )
                },
            );
        }
        let needed = self.indirect_aus_needed(n);
        let has = entry.indirect.len() as u64;
        out.check(has >= needed && has <= INDIRECT_POINTERS as u64, || {
            format!("file {number}: {n} extents need {needed} indirect AUs, the entry has {has}")
        });
        for (index, e) in rec.extents.iter().enumerate() {
            let count = usize::from(e.count);
            out.check((1..=COPIES_MAX).contains(&count), || {
                format!("file {number}: extent {index} has {count} copies")
            });
        }
    }
}

impl std::ops::Index<&u32> for FileTable {
    type Output = FileRec;

    /// File `number`, which the caller knows exists (a metadata file, a
    /// number just checked).
    fn index(&self, number: &u32) -> &FileRec {
        self.records
            .get(number)
            .expect("invariant: the caller checked the file exists")
    }
}

impl<'a> IntoIterator for &'a FileTable {
    type Item = (&'a u32, &'a FileRec);
    type IntoIter = std::collections::btree_map::Iter<'a, u32, FileRec>;

    fn into_iter(self) -> Self::IntoIter {
        self.records.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_format::group::AuAddr;

    const AU: u64 = 1 << 20;
    const USER: u32 = FILE_NUMBER_USER_MIN;

    fn entry(number: u32, state: FileState, size_bytes: u64) -> FileEntry {
        FileEntry {
            incarnation: 1,
            state,
            size_bytes,
            ..placeholder_entry(number, 2)
        }
    }

    fn extent(au: u32) -> Extent {
        Extent::new(&[AuAddr { disk: 0, au }, AuAddr { disk: 1, au }], true)
    }

    /// The metadata files (a directory of two extents: room for the
    /// first user numbers) and user file `USER` of `extents` whole AUs.
    fn table(extents: u32) -> FileTable {
        let mut t = FileTable::new(AU);
        for f in METADATA_FILES {
            let n = if f == FILE_DIRECTORY { 2 } else { 1 };
            t.insert(FileRec {
                entry: entry(f, FileState::Active, u64::from(n) * AU),
                extents: (0..n).map(|i| extent(f * 10 + i)).collect(),
            });
        }
        t.insert(FileRec {
            entry: entry(USER, FileState::Active, u64::from(extents) * AU),
            extents: (0..extents).map(|i| extent(1000 + i)).collect(),
        });
        t
    }

    fn broken(t: &FileTable, settled: bool) -> Vec<String> {
        let mut v = Violations::default();
        t.check_invariants(settled, &mut v);
        v.lines().to_vec()
    }

    #[test]
    fn extents_hold_the_size_and_no_more_once_an_operation_ends() {
        let mut t = table(3);
        assert_eq!(broken(&t, true), Vec::<String>::new());
        // An extent past the size of a file at rest is space lost.
        assert_eq!(t.push_extent(USER, extent(2000)), Some(3));
        assert!(broken(&t, true)[0].contains("4 extents where its 3145728 bytes need 3"));
        // In the middle of a resize it is where the grow has come to.
        if let Some(e) = t.entry_mut(USER) {
            e.state = FileState::Resizing;
        }
        assert_eq!(broken(&t, true), Vec::<String>::new());
        // Fewer extents than the size needs: reads past them have nowhere to go.
        t.pop_extent(USER);
        t.pop_extent(USER);
        assert!(broken(&t, true)[0].contains("3145728 bytes do not fit its 2 extents"));
        // A group that stopped may have stopped half way: not checked.
        assert_eq!(broken(&t, false), Vec::<String>::new());
        // ...except while a delete frees the map from its end.
        if let Some(e) = t.entry_mut(USER) {
            e.state = FileState::Deleting;
        }
        assert_eq!(broken(&t, true), Vec::<String>::new());
        assert!(t.remove(USER).is_some());
        assert_eq!(broken(&t, true), Vec::<String>::new());
    }

    #[test]
    fn the_indirect_aus_hold_the_map() {
        // 200 extents: 106 in the entry, 94 in one indirect block.
        let mut t = table(200);
        assert!(broken(&t, true)[0].contains("200 extents need 1 indirect AUs, the entry has 0"));
        t.push_indirect(USER, extent(3000));
        assert_eq!(broken(&t, true), Vec::<String>::new());
        // Shrunk into the entry with the indirect AU kept (what a map a
        // mount cut has until its repair): spare, not an error.
        while t.get(USER).is_some_and(|r| r.extents.len() > 100) {
            t.pop_extent(USER);
        }
        if let Some(e) = t.entry_mut(USER) {
            e.size_bytes = 100 * AU;
        }
        assert_eq!(broken(&t, true), Vec::<String>::new());
        assert!(t.pop_indirect(USER).is_some());
        assert_eq!(broken(&t, true), Vec::<String>::new());
    }

    #[test]
    fn records_sit_under_their_numbers_with_the_metadata_files() {
        let mut t = table(1);
        if let Some(e) = t.extent_mut(USER, Some(1), 0) {
            e.count = 0;
        }
        assert!(broken(&t, true)[0].contains("extent 0 has 0 copies"));
        // A change decided for an earlier incarnation of the number is dropped.
        assert!(t.extent_mut(USER, Some(2), 0).is_none());
        if let Some(e) = t.extent_mut(USER, None, 0) {
            e.count = 2;
        }
        assert_eq!(broken(&t, true), Vec::<String>::new());
        // A number the file directory has no entry for.
        let far = entry(5000, FileState::Active, 0);
        t.insert(FileRec {
            entry: far,
            extents: Vec::new(),
        });
        assert!(
            broken(&t, true)[0].contains("file 5000 has no entry in the 512 of metadata file 1")
        );
        t.remove(5000);
        t.remove(FILE_TEMPLATES);
        assert!(broken(&t, true)[0].contains("metadata file 5 has no record"));
    }

    /// A checksum map has its entry in the checksum directory, and goes
    /// with its data file: the same incarnation, copies and state.
    #[test]
    fn a_map_is_entered_in_the_checksum_directory_and_matches_its_file() {
        let mut t = table(4);
        let map = cairn_format::group::map_number(USER);
        t.insert(FileRec {
            entry: entry(map, FileState::Active, BLOCK_BYTES as u64),
            extents: vec![extent(4000)],
        });
        let v = broken(&t, true);
        assert!(
            v[0].contains("has no entry in the 0 of metadata file 7"),
            "{v:?}"
        );
        assert!(v[1].contains("without the checksum directory"), "{v:?}");
        // Block 256 is in its second AU.
        t.insert(FileRec {
            entry: entry(FILE_CHECKSUM_DIRECTORY, FileState::Active, 2 * AU),
            extents: vec![extent(70), extent(71)],
        });
        assert_eq!(broken(&t, true), Vec::<String>::new());
        // A state of its own: a crash could part them.
        if let Some(e) = t.entry_mut(map) {
            e.state = FileState::Resizing;
        }
        let v = broken(&t, true);
        assert!(
            v[0].contains("checksum map of file 256: incarnation, copies, state"),
            "{v:?}"
        );
        if let Some(e) = t.entry_mut(map) {
            e.state = FileState::Active;
            e.striping = STRIPING_FINE;
        }
        assert!(broken(&t, true)[0].contains("a user file's striping"));
        // The maps are not the users' files.
        assert_eq!(t.user_numbers(), vec![USER]);
        assert_eq!(t.data_and_map_numbers(), vec![USER, map]);
    }
}
