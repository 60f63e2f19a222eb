//! The name space: directories, file names and aliases (resolving,
//! adding, removing, listing, `du`).

use cairn_format::group::{
    is_map_number, is_user_number, map_number, mapped_file, AliasKind, AliasRecord, FileState,
    ALIASES_PER_BLOCK, ALIAS_NAME_LEN_MAX, FILE_ALIAS_DIRECTORY,
};

use super::error::GroupError;
use super::file_types::{striping_name, DirEntry, FileInfo, Node};
use super::mounted::Group;
use super::parts::damage::LostBlock;
use super::parts::files::FileRec;
use super::parts::names::ROOT;
use super::parts::txn::Dirty;
use crate::names::{Component, GroupPath};

impl Group<'_> {
    // -----------------------------------------------------------------------
    // Name space

    pub(super) fn check_group(&self, path: &GroupPath) -> Result<(), GroupError> {
        if !path.group.as_str().eq_ignore_ascii_case(&self.name) {
            return Err(GroupError::Invalid(format!(
                "{path} names group {}, but group {} is mounted",
                path.group, self.name
            )));
        }
        Ok(())
    }

    pub(super) fn child(&self, parent: u32, name: &Component) -> Option<&AliasRecord> {
        self.names.child(parent, &name.key())
    }

    /// The alias record a path names (`None` for the root).
    pub(super) fn resolve(&self, path: &GroupPath) -> Result<Option<&AliasRecord>, GroupError> {
        self.check_group(path)?;
        let mut parent = ROOT;
        let mut found = None;
        for (i, c) in path.components.iter().enumerate() {
            let record = self.child(parent, c).ok_or_else(|| {
                let upto = GroupPath {
                    group: path.group.clone(),
                    components: path.components[..=i].to_vec(),
                };
                GroupError::NotFound(format!("{upto} does not exist"))
            })?;
            if i + 1 < path.components.len() && record.kind != AliasKind::Directory {
                return Err(GroupError::Invalid(format!(
                    "{} is a file, not a directory",
                    GroupPath {
                        group: path.group.clone(),
                        components: path.components[..=i].to_vec(),
                    }
                )));
            }
            parent = record.id;
            found = Some(record);
        }
        Ok(found)
    }

    pub(super) fn directory_id(&self, path: &GroupPath) -> Result<u32, GroupError> {
        match self.resolve(path)? {
            None => Ok(ROOT),
            Some(r) if r.kind == AliasKind::Directory => Ok(r.id),
            Some(_) => Err(GroupError::Invalid(format!(
                "{path} is a file, not a directory"
            ))),
        }
    }

    /// Add a name record; grows the alias directory when it is full.
    pub(super) fn add_alias(
        &mut self,
        parent: u32,
        name: &Component,
        kind: AliasKind,
        file: Option<&FileRec>,
    ) -> Result<u32, GroupError> {
        assert!(
            name.as_str().len() <= ALIAS_NAME_LEN_MAX,
            "invariant: names validated"
        );
        let capacity = self.files[&FILE_ALIAS_DIRECTORY].extents.len() as u64
            * self.blocks_per_au()
            * ALIASES_PER_BLOCK as u64;
        // The lowest free id — not one of a lost alias block's (its names
        // may still be found there) nor one a name still gives as its
        // directory (a lost directory's children would move into the new
        // name).
        let id = self
            .names
            .free_id(|id| self.damage.is_lost(LostBlock::Alias(alias_block_of(id))));
        if u64::from(id) > capacity {
            self.grow_metadata_file(FILE_ALIAS_DIRECTORY)?;
        }
        let record = AliasRecord {
            id,
            parent,
            kind,
            name: name.as_str().to_string(),
            file_number: file.map_or(0, |f| f.entry.number),
            file_incarnation: file.map_or(0, |f| f.entry.incarnation),
            created_unix_seconds: (self.clock)(),
            dir_attrs: None,
        };
        self.names.insert(record);
        self.txn.mark(Dirty::Alias(alias_block_of(id)));
        Ok(id)
    }

    pub(super) fn remove_alias(&mut self, id: u32) {
        if self.names.remove(id).is_some() {
            self.txn.mark(Dirty::Alias(alias_block_of(id)));
        }
    }

    /// Add one extent to a metadata file (file directory or alias directory),
    /// zeroed so its blocks read as empty.
    pub(super) fn grow_metadata_file(&mut self, file: u32) -> Result<(), GroupError> {
        let index = self.files[&file].extents.len() as u64;
        // Past the direct extents, a metadata file's map continues in indirect
        // AUs like any file's.
        self.ensure_indirect_capacity(file, index + 1)?;
        let mut extent = self.allocate_extent(usize::from(self.copies), index)?;
        extent.initialized = true;
        self.files.push_extent(file, extent);
        let entry = self
            .files
            .entry_mut(file)
            .expect("invariant: metadata file");
        entry.size_bytes += self.au_bytes;
        self.dirty_extent(file, index);
        self.zero_metadata_extent(file, index as usize)
    }

    pub(super) fn zero_metadata_extent(
        &mut self,
        file: u32,
        index: usize,
    ) -> Result<(), GroupError> {
        let extent = self.files[&file].extents[index];
        self.zero_whole_extents(&[(extent, self.au_bytes)]);
        Ok(())
    }

    /// Create a directory (and, with `parents`, the missing ones above it).
    pub fn mkdir(&mut self, path: &GroupPath, parents: bool) -> Result<(), GroupError> {
        self.check_writable()?;
        self.check_group(path)?;
        if path.is_root() {
            return Err(GroupError::Exists(format!("{path} is the group's root")));
        }
        let mut parent = ROOT;
        for (i, c) in path.components.iter().enumerate() {
            let last = i + 1 == path.components.len();
            match self.child(parent, c) {
                Some(r) if r.kind == AliasKind::Directory => {
                    if last && !parents {
                        return Err(GroupError::Exists(format!("{path} already exists")));
                    }
                    parent = r.id;
                }
                Some(_) => {
                    return Err(GroupError::Exists(format!(
                        "{} is a file, not a directory",
                        GroupPath {
                            group: path.group.clone(),
                            components: path.components[..=i].to_vec()
                        }
                    )))
                }
                None if last || parents => {
                    parent = self.add_alias(parent, c, AliasKind::Directory, None)?
                }
                None => {
                    return Err(GroupError::NotFound(format!(
                        "{} does not exist; create it first, or use --parents",
                        GroupPath {
                            group: path.group.clone(),
                            components: path.components[..=i].to_vec()
                        }
                    )))
                }
            }
        }
        self.commit()
    }

    /// Another name for an existing file.
    pub fn mkalias(&mut self, target: &GroupPath, alias: &GroupPath) -> Result<(), GroupError> {
        self.check_writable()?;
        let record = self
            .resolve(target)?
            .ok_or_else(|| GroupError::Invalid(format!("{target} is the root, not a file")))?;
        if record.kind == AliasKind::Directory {
            return Err(GroupError::Invalid(format!(
                "{target} is a directory; aliases name files"
            )));
        }
        let number = record.file_number;
        let (parent_path, name) = split(alias)?;
        let parent = self.directory_id(&parent_path)?;
        if self.child(parent, &name).is_some() {
            return Err(GroupError::Exists(format!("{alias} already exists")));
        }
        let rec = self.files.get(number).cloned().ok_or_else(|| {
            GroupError::Corrupt(format!("{target} names file {number}, which has no entry"))
        })?;
        self.add_alias(parent, &name, AliasKind::Alias, Some(&rec))?;
        self.commit()
    }

    /// A name by its id, for callers that walk the name space by id (the
    /// file system: an id is its inode). `None` for an id no name has.
    pub fn node(&self, id: u32) -> Option<Node> {
        self.names.get(id).map(|r| self.node_of(r))
    }

    /// The name `name` in directory `parent` (id 0: the root). Refused if
    /// `name` breaks the naming rules (the file system answers EINVAL, never
    /// a different file); `None` if there is no such name.
    pub fn child_node(&self, parent: u32, name: &str) -> Result<Option<Node>, GroupError> {
        let name = Component::parse(name).map_err(|e| GroupError::Invalid(e.to_string()))?;
        Ok(self.child(parent, &name).map(|r| self.node_of(r)))
    }

    /// The names in directory `parent` (id 0: the root), by name.
    pub fn children(&self, parent: u32) -> Vec<Node> {
        let mut out: Vec<Node> = self
            .names
            .children(parent)
            .map(|r| self.node_of(r))
            .collect();
        out.sort_by_key(|n| n.name.to_ascii_lowercase());
        out
    }

    fn node_of(&self, r: &AliasRecord) -> Node {
        Node {
            id: r.id,
            parent: r.parent,
            name: r.name.clone(),
            kind: r.kind,
            file: (r.kind != AliasKind::Directory)
                .then(|| self.live_file(r).map(|f| self.info(f)))
                .flatten(),
            created_unix_seconds: r.created_unix_seconds,
            dir_attrs: r.dir_attrs.unwrap_or_default(),
        }
    }

    /// List a directory (or describe one file).
    pub fn list(&self, path: &GroupPath) -> Result<Vec<DirEntry>, GroupError> {
        let dir = match self.resolve(path)? {
            Some(r) if r.kind != AliasKind::Directory => {
                return Ok(vec![self.dir_entry(r)]);
            }
            Some(r) => r.id,
            None => ROOT,
        };
        Ok(self.children(dir).into_iter().map(DirEntry::from).collect())
    }

    pub(super) fn dir_entry(&self, r: &AliasRecord) -> DirEntry {
        let file = (r.kind != AliasKind::Directory)
            .then(|| self.live_file(r).map(|f| self.info(f)))
            .flatten();
        DirEntry {
            name: r.name.clone(),
            kind: r.kind,
            lost: r.kind != AliasKind::Directory && file.is_none(),
            file,
        }
    }

    /// The file a name names, if it is there: the same number and
    /// incarnation, and not being deleted.
    pub(super) fn live_file(&self, r: &AliasRecord) -> Option<&FileRec> {
        // A damaged alias record may carry any number: a map is no name's.
        self.files
            .get(r.file_number)
            .filter(|f| {
                f.entry.incarnation == r.file_incarnation && f.entry.state != FileState::Deleting
            })
            .filter(|_| is_user_number(r.file_number))
    }

    pub(super) fn info(&self, rec: &FileRec) -> FileInfo {
        // The space a file takes: its own AUs and its checksum map's.
        let map = self.files.get(map_number(rec.entry.number));
        let aus: u64 = [Some(rec), map]
            .into_iter()
            .flatten()
            .map(|r| {
                let layout = self.layout_for(r);
                (0..r.extents.len() as u64)
                    .map(|i| layout.extent_bytes(i))
                    .sum::<u64>()
                    * u64::from(r.entry.copies)
            })
            .sum();
        let (lowered, _) = self.lowered_extents(rec);
        FileInfo {
            number: rec.entry.number,
            incarnation: rec.entry.incarnation,
            size_bytes: rec.entry.size_bytes,
            allocated_bytes: aus,
            copies: rec.entry.copies,
            striping: striping_name(rec.entry.striping).to_string(),
            template: rec.entry.template.clone(),
            created_unix_seconds: rec.entry.created_unix_seconds,
            modified_unix_seconds: rec.entry.modified_unix_seconds,
            attrs: attrs_of(&rec.entry),
            redundancy_lowered: lowered > 0,
            redundancy_lowered_extents: lowered,
        }
    }

    /// Bytes used under a path: (logical bytes, allocated bytes with mirrors).
    pub fn du(&self, path: &GroupPath) -> Result<(u64, u64), GroupError> {
        let start = match self.resolve(path)? {
            Some(r) if r.kind != AliasKind::Directory => {
                let f = self.files.get(r.file_number).ok_or_else(|| {
                    GroupError::Corrupt(format!(
                        "{path} names file {}, which has no entry",
                        r.file_number
                    ))
                })?;
                let i = self.info(f);
                return Ok((i.size_bytes, i.allocated_bytes));
            }
            Some(r) => r.id,
            None => ROOT,
        };
        let mut stack = vec![start];
        let mut seen = std::collections::BTreeSet::new();
        let (mut logical, mut allocated) = (0, 0);
        while let Some(dir) = stack.pop() {
            // A damaged alias directory could loop; `check` reports it.
            if !seen.insert(dir) {
                continue;
            }
            for r in self.names.children(dir) {
                match r.kind {
                    AliasKind::Directory => stack.push(r.id),
                    AliasKind::File => {
                        if let Some(f) = self.files.get(r.file_number) {
                            let i = self.info(f);
                            logical += i.size_bytes;
                            allocated += i.allocated_bytes;
                        }
                    }
                    AliasKind::Alias => {}
                }
            }
        }
        Ok((logical, allocated))
    }

    /// Open a file by name.
    pub fn open(&self, path: &GroupPath) -> Result<FileInfo, GroupError> {
        let r = self.resolve(path)?.ok_or_else(|| {
            GroupError::Invalid(format!("{path} is the group's root, not a file"))
        })?;
        if r.kind == AliasKind::Directory {
            return Err(GroupError::Invalid(format!(
                "{path} is a directory, not a file"
            )));
        }
        let f = self.live_file(r).ok_or_else(|| {
            if self.damage.is_lost(LostBlock::Entry(r.file_number)) {
                GroupError::Lost(format!(
                    "{path} is lost: the directory entry of its file ({}) has no valid copy on any disk; `cairn group check {} --repair` removes the name",
                    r.file_number, self.name
                ))
            } else {
                GroupError::Corrupt(format!(
                    "{path} names file {}, which does not exist; `cairn group check {} --repair` removes the name",
                    r.file_number, self.name
                ))
            }
        })?;
        Ok(self.info(f))
    }

    /// A file by number (a named file, or one being created).
    pub fn file_info(&self, number: u32) -> Result<FileInfo, GroupError> {
        self.files
            .get(number)
            .filter(|f| is_user_number(number) && f.entry.state != FileState::Deleting)
            .map(|f| self.info(f))
            .ok_or_else(|| GroupError::NotFound(format!("file {number} does not exist")))
    }

    /// The path of file `number` by its own (primary) name, for messages;
    /// `file N` when it has none.
    pub fn path_of(&self, number: u32) -> String {
        if is_map_number(number) {
            return format!("the checksum map of {}", self.path_of(mapped_file(number)));
        }
        self.names
            .records()
            .find(|r| r.kind == AliasKind::File && r.file_number == number)
            .map_or_else(|| format!("file {number}"), |r| self.alias_path(r))
    }

    /// Every name of file `number` (its own and its aliases), as paths.
    pub(super) fn names_of(&self, number: u32) -> Vec<String> {
        self.names
            .records()
            .filter(|r| r.kind != AliasKind::Directory && r.file_number == number)
            .map(|r| self.alias_path(r))
            .collect()
    }

    /// The full path of a name record.
    pub(super) fn alias_path(&self, record: &AliasRecord) -> String {
        let mut parts = self.names.path_parts(record);
        parts.reverse();
        format!("+{}/{}", self.name, parts.join("/"))
    }

    /// Every user file, for the checker and tests.
    pub fn file_numbers(&self) -> Vec<u32> {
        self.files.user_numbers()
    }
}

/// A file's attributes, stored or the defaults.
pub(super) fn attrs_of(entry: &cairn_format::group::FileEntry) -> cairn_format::group::FileAttrs {
    entry.attrs.unwrap_or_else(|| {
        cairn_format::group::FileAttrs::default_for(entry.size_bytes, entry.modified_unix_seconds)
    })
}

/// Split a path into its parent and last component.
pub(super) fn split(path: &GroupPath) -> Result<(GroupPath, Component), GroupError> {
    let name = path.file_name().cloned().ok_or_else(|| {
        GroupError::Invalid(format!("{path} is the group's root; name a file in it"))
    })?;
    let parent = path
        .parent()
        .expect("invariant: a path with a name has a parent");
    Ok((parent, name))
}

/// Alias-kind helpers shared with files.rs.
pub(super) fn alias_block_of(id: u32) -> u64 {
    u64::from(id - 1) / ALIASES_PER_BLOCK as u64
}
