//! Files in a mounted group: the name space (directories, file names, aliases),
//! create / resize / delete as continuing operations, and the data path.
//!
//! Continuing operations: each commits in steps of at most [`STEP_DIRTY_MAX`]
//! dirty blocks. The file's entry says where it is heading (`Creating`,
//! `Resizing` with the old size still in `size_bytes`, `Deleting`), so a mount
//! after a crash finishes a delete and undoes a create or an unfinished grow
//! ([`Group::recover_operations`]). A file gets its name only in the create's
//! last step, so an undone create leaves no name behind.
//!
//! The data path: a write goes to every online copy and is acknowledged when all
//! have completed; durability is [`Group::sync`]'s job, as `fsync` is a file's. A
//! read goes to the primary and falls back copy by copy on an I/O error or when
//! the caller's check rejects the bytes; a copy that failed is rewritten from the
//! one that passed. An extent never written reads as zeros without I/O; the first
//! write zeroes the rest of its AUs and only then marks it initialised.

use cairn_format::group::{
    AliasKind, AliasRecord, AuAddr, Extent, FileEntry, FileState, ALIASES_PER_BLOCK,
    ALIAS_NAME_LEN_MAX, DIRECT_EXTENTS, EXTENTS_PER_INDIRECT_BLOCK, FILE_ALIAS_DIRECTORY,
    FILE_DIRECTORY, FILE_NUMBER_USER_MIN, STRIPING_FINE, TEMPLATE_NAME_LEN_MAX,
};
use cairn_io::{AlignedBuf, Op, Request};
use serde::Serialize;

use super::{alias_block_of, Dirty, FileRec, Group, GroupError, LostBlock, Member, STEP_DIRTY_MAX};
use crate::names::{Component, GroupPath};
use crate::placement::{FileLayout, Striping};

/// How to create a file.
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    /// Template name (file type); `DEFAULT` when not given.
    pub template: Option<String>,
    /// Redundancy override, as a copy count.
    pub copies: Option<u8>,
    /// Create missing parent directories.
    pub parents: bool,
}

/// A file as `open` and `ls` see it.
#[derive(Debug, Clone, Serialize)]
pub struct FileInfo {
    pub number: u32,
    pub incarnation: u32,
    pub size_bytes: u64,
    /// Bytes of AUs allocated, all copies included.
    pub allocated_bytes: u64,
    pub copies: u8,
    pub striping: &'static str,
    pub template: String,
    pub created_unix_seconds: u64,
    pub modified_unix_seconds: u64,
}

/// One name in a directory listing.
#[derive(Debug, Clone, Serialize)]
pub struct DirEntry {
    pub name: String,
    pub kind: AliasKind,
    /// For files and aliases.
    pub file: Option<FileInfo>,
    /// A file's name whose file is lost (its directory entry has no valid
    /// copy): the name is all that is left.
    pub lost: bool,
}

const ROOT: u32 = 0;

fn striping_name(s: u8) -> &'static str {
    if s == STRIPING_FINE {
        "FINE"
    } else {
        "COARSE"
    }
}

impl Group<'_> {
    // -----------------------------------------------------------------------
    // Name space

    fn check_group(&self, path: &GroupPath) -> Result<(), GroupError> {
        if !path.group.as_str().eq_ignore_ascii_case(&self.name) {
            return Err(GroupError::Invalid(format!(
                "{path} names group {}, but group {} is mounted",
                path.group, self.name
            )));
        }
        Ok(())
    }

    pub(super) fn child(&self, parent: u32, name: &Component) -> Option<&AliasRecord> {
        self.alias_index
            .get(&(parent, name.key()))
            .and_then(|id| self.aliases.get(id))
    }

    /// The alias record a path names (`None` for the root).
    fn resolve(&self, path: &GroupPath) -> Result<Option<&AliasRecord>, GroupError> {
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

    fn directory_id(&self, path: &GroupPath) -> Result<u32, GroupError> {
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
        let mut id = 1u32;
        for used in self.aliases.keys() {
            if *used != id {
                break;
            }
            id += 1;
        }
        while self.aliases.contains_key(&id)
            || self.orphan_parents.contains(&id)
            || self
                .lost
                .contains_key(&LostBlock::Alias(alias_block_of(id)))
        {
            id += 1;
        }
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
        };
        self.alias_index.insert((parent, name.key()), id);
        self.aliases.insert(id, record);
        self.dirty.insert(Dirty::Alias(alias_block_of(id)));
        Ok(id)
    }

    pub(super) fn remove_alias(&mut self, id: u32) {
        if let Some(r) = self.aliases.remove(&id) {
            self.alias_index
                .remove(&(r.parent, r.name.to_ascii_lowercase()));
            self.dirty.insert(Dirty::Alias(alias_block_of(id)));
        }
    }

    /// Add one extent to a metadata file (file directory or alias directory),
    /// zeroed so its blocks read as empty.
    fn grow_metadata_file(&mut self, file: u32) -> Result<(), GroupError> {
        let index = self.files[&file].extents.len() as u64;
        // Past the direct extents, a metadata file's map continues in indirect
        // AUs like any file's.
        self.ensure_indirect_capacity(file, index + 1)?;
        let mut extent = self.allocate_extent(usize::from(self.copies), index)?;
        extent.initialized = true;
        let rec = self.files.get_mut(&file).expect("invariant: metadata file");
        rec.extents.push(extent);
        rec.entry.size_bytes += self.au_bytes;
        self.dirty_extent(file, index);
        self.zero_metadata_extent(file, index as usize)
    }

    fn zero_metadata_extent(&mut self, file: u32, index: usize) -> Result<(), GroupError> {
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
        let rec = self.files.get(&number).cloned().ok_or_else(|| {
            GroupError::Corrupt(format!("{target} names file {number}, which has no entry"))
        })?;
        self.add_alias(parent, &name, AliasKind::Alias, Some(&rec))?;
        self.commit()
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
        let mut out: Vec<DirEntry> = self
            .aliases
            .values()
            .filter(|r| r.parent == dir)
            .map(|r| self.dir_entry(r))
            .collect();
        out.sort_by_key(|e| e.name.to_ascii_lowercase());
        Ok(out)
    }

    fn dir_entry(&self, r: &AliasRecord) -> DirEntry {
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
        self.files.get(&r.file_number).filter(|f| {
            f.entry.incarnation == r.file_incarnation && f.entry.state != FileState::Deleting
        })
    }

    fn info(&self, rec: &FileRec) -> FileInfo {
        let layout = self.layout_for(rec);
        let aus: u64 = (0..rec.extents.len() as u64)
            .map(|i| layout.extent_bytes(i))
            .sum::<u64>()
            * u64::from(rec.entry.copies);
        FileInfo {
            number: rec.entry.number,
            incarnation: rec.entry.incarnation,
            size_bytes: rec.entry.size_bytes,
            allocated_bytes: aus,
            copies: rec.entry.copies,
            striping: striping_name(rec.entry.striping),
            template: rec.entry.template.clone(),
            created_unix_seconds: rec.entry.created_unix_seconds,
            modified_unix_seconds: rec.entry.modified_unix_seconds,
        }
    }

    /// Bytes used under a path: (logical bytes, allocated bytes with mirrors).
    pub fn du(&self, path: &GroupPath) -> Result<(u64, u64), GroupError> {
        let start = match self.resolve(path)? {
            Some(r) if r.kind != AliasKind::Directory => {
                let f = self.files.get(&r.file_number).ok_or_else(|| {
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
            for r in self.aliases.values().filter(|r| r.parent == dir) {
                match r.kind {
                    AliasKind::Directory => stack.push(r.id),
                    AliasKind::File => {
                        if let Some(f) = self.files.get(&r.file_number) {
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
            if self.lost.contains_key(&LostBlock::Entry(r.file_number)) {
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
            .get(&number)
            .filter(|f| number >= FILE_NUMBER_USER_MIN && f.entry.state != FileState::Deleting)
            .map(|f| self.info(f))
            .ok_or_else(|| GroupError::NotFound(format!("file {number} does not exist")))
    }

    /// The path of file `number` by its own (primary) name, for messages;
    /// `file N` when it has none.
    pub fn path_of(&self, number: u32) -> String {
        self.aliases
            .values()
            .find(|r| r.kind == AliasKind::File && r.file_number == number)
            .map_or_else(|| format!("file {number}"), |r| self.alias_path(r))
    }

    /// Every name of file `number` (its own and its aliases), as paths.
    pub(super) fn names_of(&self, number: u32) -> Vec<String> {
        self.aliases
            .values()
            .filter(|r| r.kind != AliasKind::Directory && r.file_number == number)
            .map(|r| self.alias_path(r))
            .collect()
    }

    /// The full path of a name record.
    fn alias_path(&self, record: &AliasRecord) -> String {
        let mut parts = vec![record.name.as_str()];
        let mut parent = record.parent;
        // A damaged alias directory could loop; `check` reports it.
        while parent != ROOT && parts.len() <= self.aliases.len() {
            match self.aliases.get(&parent) {
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
        parts.reverse();
        format!("+{}/{}", self.name, parts.join("/"))
    }

    /// Every user file, for the checker and tests.
    pub fn file_numbers(&self) -> Vec<u32> {
        self.files
            .keys()
            .copied()
            .filter(|n| *n >= FILE_NUMBER_USER_MIN)
            .collect()
    }

    // -----------------------------------------------------------------------
    // Create, resize, delete

    fn layout_for(&self, rec: &FileRec) -> FileLayout {
        self.file_layout(&rec.entry)
    }

    /// How a file's bytes lie across its extents, by its entry's striping.
    pub(super) fn file_layout(&self, entry: &FileEntry) -> FileLayout {
        FileLayout::new(
            self.au_bytes,
            if entry.striping == STRIPING_FINE {
                Striping::Fine
            } else {
                Striping::Coarse
            },
        )
    }

    /// Create a file of `size_bytes` (a multiple of the sector size).
    pub fn create_file(
        &mut self,
        path: &GroupPath,
        size_bytes: u64,
        options: &CreateOptions,
    ) -> Result<FileInfo, GroupError> {
        self.check_writable()?;
        let (parent, name) = self.name_free(path, options.parents)?;
        let number = self.create_unnamed(size_bytes, options)?.number;
        self.publish_as(number, parent, &name, size_bytes)
    }

    /// Whether a new file could be named `path`: its directory exists, the
    /// name is free. For a caller about to fill a file before naming it (a
    /// copy), so that a bad name is refused before the copy, not after.
    pub fn check_name_free(&self, path: &GroupPath) -> Result<(), GroupError> {
        self.free_name(path).map(|_| ())
    }

    /// Where a new file named `path` goes: its directory's id and its name.
    /// Refused if the directory does not exist (unless `parents`, which
    /// creates it) or the name is taken.
    fn name_free(
        &mut self,
        path: &GroupPath,
        parents: bool,
    ) -> Result<(u32, Component), GroupError> {
        if parents {
            let (parent_path, _) = split(path)?;
            if !parent_path.is_root() && self.resolve(&parent_path).is_err() {
                self.mkdir(&parent_path, true)?;
            }
        }
        self.free_name(path)
    }

    fn free_name(&self, path: &GroupPath) -> Result<(u32, Component), GroupError> {
        let (parent_path, name) = split(path)?;
        let parent = self.directory_id(&parent_path).map_err(|e| match e {
            GroupError::NotFound(m) => {
                GroupError::NotFound(format!("{m}; create it with `cairn mkdir`"))
            }
            other => other,
        })?;
        if self.child(parent, &name).is_some() {
            return Err(GroupError::Exists(format!(
                "{path} already exists; remove it first or choose another name"
            )));
        }
        Ok((parent, name))
    }

    /// Create a file of `size_bytes` that has no name yet: a file being
    /// filled (a copy in). It stays `Creating` — invisible to every listing,
    /// and removed by the next mount that writes if the filler dies — until
    /// [`Self::publish`] names it, so no name ever shows a file whose data is
    /// not all there. It can be written and grown ([`Self::grow_unnamed`])
    /// meanwhile; [`Self::discard_unnamed`] drops it.
    pub fn create_unnamed(
        &mut self,
        size_bytes: u64,
        options: &CreateOptions,
    ) -> Result<FileInfo, GroupError> {
        self.check_writable()?;
        self.check_size(size_bytes)?;
        let template_name = options
            .template
            .clone()
            .unwrap_or_else(|| "DEFAULT".into())
            .to_ascii_uppercase();
        let template = self
            .templates
            .iter()
            .find(|t| t.name == template_name)
            .cloned()
            .ok_or_else(|| {
                GroupError::Invalid(format!(
                    "no template {template_name}; the group has {}",
                    self.templates
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        assert!(
            template.name.len() <= TEMPLATE_NAME_LEN_MAX,
            "invariant: template names fit"
        );
        let copies = options
            .copies
            .or((template.copies != 0).then_some(template.copies))
            .unwrap_or(self.copies);
        if !(1..=3).contains(&copies) {
            return Err(GroupError::Invalid(format!(
                "redundancy of {copies} copies; use external, normal or high"
            )));
        }
        // File number: the lowest free one; grow the file directory if needed.
        // A lost entry's number stays taken until repair: its names still
        // point at it.
        let mut number = FILE_NUMBER_USER_MIN;
        while self.files.contains_key(&number) || self.lost.contains_key(&LostBlock::Entry(number))
        {
            number += 1;
        }
        while u64::from(number)
            >= self.files[&FILE_DIRECTORY].extents.len() as u64 * self.blocks_per_au()
        {
            self.grow_metadata_file(FILE_DIRECTORY)?;
        }
        let now = (self.clock)();
        // The journal sequence never repeats (it survives remounts in the
        // journal header), so neither does an incarnation taken from it.
        let seq = self.journal.next_seq;
        let incarnation = ((seq ^ (seq >> 32)) as u32).max(1);
        self.files.insert(
            number,
            FileRec {
                entry: FileEntry {
                    number,
                    incarnation,
                    state: FileState::Creating,
                    copies,
                    striping: template.striping,
                    size_bytes: 0,
                    extent_count: 0,
                    target_bytes: size_bytes,
                    created_unix_seconds: now,
                    modified_unix_seconds: now,
                    template: template.name.clone(),
                    direct: Vec::new(),
                    indirect: Vec::new(),
                },
                extents: Vec::new(),
            },
        );
        self.dirty.insert(Dirty::Entry(number));
        self.commit()?;
        if let Err(e) = self.grow_extents(number, size_bytes) {
            // Undo what was allocated: the create never happened.
            if self.poisoned.is_none() {
                self.discard_unnamed(number)?;
            }
            return Err(e);
        }
        let rec = self
            .files
            .get_mut(&number)
            .expect("invariant: just created");
        rec.entry.size_bytes = size_bytes;
        Ok(self.info(&self.files[&number]))
    }

    /// Grow a file [`Self::create_unnamed`] made to `size_bytes` (a stream
    /// whose length is known only at its end).
    pub fn grow_unnamed(&mut self, number: u32, size_bytes: u64) -> Result<(), GroupError> {
        self.check_writable()?;
        self.check_size(size_bytes)?;
        self.check_unnamed(number)?;
        if size_bytes <= self.files[&number].entry.size_bytes {
            return Ok(());
        }
        self.grow_extents(number, size_bytes)?;
        let rec = self.files.get_mut(&number).expect("invariant: checked");
        rec.entry.size_bytes = size_bytes;
        rec.entry.target_bytes = size_bytes;
        self.dirty.insert(Dirty::Entry(number));
        Ok(())
    }

    /// Give a file [`Self::create_unnamed`] made its size and its name, in
    /// one step: from then on it is an ordinary file. Extents past
    /// `size_bytes` are freed first.
    pub fn publish(
        &mut self,
        number: u32,
        path: &GroupPath,
        size_bytes: u64,
    ) -> Result<FileInfo, GroupError> {
        self.check_writable()?;
        self.check_unnamed(number)?;
        let (parent, name) = self.name_free(path, false)?;
        self.publish_as(number, parent, &name, size_bytes)
    }

    fn publish_as(
        &mut self,
        number: u32,
        parent: u32,
        name: &Component,
        size_bytes: u64,
    ) -> Result<FileInfo, GroupError> {
        self.check_size(size_bytes)?;
        let layout = self.layout_for(&self.files[&number]);
        let keep = layout.extent_count_for(size_bytes);
        if keep > self.files[&number].extents.len() as u64 {
            return Err(GroupError::Invalid(format!(
                "file {number} holds {} bytes, fewer than {size_bytes}",
                self.files[&number].entry.size_bytes
            )));
        }
        self.trim_extents(number, keep)?;
        // The name first (it may fail: no room to grow the alias directory,
        // and the file is then still one being created, for discard_unnamed),
        // and in the same commit the file becomes active.
        let rec = self.files[&number].clone();
        self.add_alias(parent, name, AliasKind::File, Some(&rec))?;
        let rec = self
            .files
            .get_mut(&number)
            .expect("invariant: checked unnamed");
        rec.entry.state = FileState::Active;
        rec.entry.size_bytes = size_bytes;
        rec.entry.target_bytes = 0;
        self.dirty.insert(Dirty::Entry(number));
        self.commit()?;
        Ok(self.info(&self.files[&number]))
    }

    /// Drop a file [`Self::create_unnamed`] made (a copy that failed).
    pub fn discard_unnamed(&mut self, number: u32) -> Result<(), GroupError> {
        self.check_writable()?;
        self.check_unnamed(number)?;
        self.finish_delete(number)
    }

    fn check_unnamed(&self, number: u32) -> Result<(), GroupError> {
        match self.files.get(&number) {
            Some(f) if number >= FILE_NUMBER_USER_MIN && f.entry.state == FileState::Creating => {
                Ok(())
            }
            _ => Err(GroupError::Invalid(format!(
                "file {number} is not a file being created"
            ))),
        }
    }

    fn check_size(&self, size_bytes: u64) -> Result<(), GroupError> {
        if !size_bytes.is_multiple_of(u64::from(self.sector_bytes)) {
            return Err(GroupError::Invalid(format!(
                "size {size_bytes} is not a multiple of the group's {}-byte sectors",
                self.sector_bytes
            )));
        }
        Ok(())
    }

    /// Allocate extents until the file can hold `size_bytes`, committing in steps.
    fn grow_extents(&mut self, number: u32, size_bytes: u64) -> Result<(), GroupError> {
        let rec = &self.files[&number];
        let layout = self.layout_for(rec);
        let need = layout.extent_count_for(size_bytes);
        let copies = usize::from(rec.entry.copies);
        while (self.files[&number].extents.len() as u64) < need {
            let index = self.files[&number].extents.len() as u64;
            self.ensure_indirect_capacity(number, index + 1)?;
            let extent = self.allocate_extent(copies, index)?;
            let rec = self.files.get_mut(&number).expect("invariant: file exists");
            rec.extents.push(extent);
            self.dirty_extent(number, index);
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        Ok(())
    }

    /// Free extents past `keep`, last first, committing in steps; then the
    /// indirect AUs no longer needed.
    pub(super) fn trim_extents(&mut self, number: u32, keep: u64) -> Result<(), GroupError> {
        while self.files[&number].extents.len() as u64 > keep {
            let rec = self.files.get_mut(&number).expect("invariant: file exists");
            let index = rec.extents.len() as u64 - 1;
            let extent = rec.extents.pop().expect("invariant: non-empty");
            self.free_extent(number, &extent, index);
            self.dirty_extent(number, index);
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        let needed = self.indirect_aus_needed(self.files[&number].extents.len() as u64);
        while self.files[&number].entry.indirect.len() as u64 > needed {
            let rec = self.files.get_mut(&number).expect("invariant: file exists");
            let pointer = rec.entry.indirect.pop().expect("invariant: non-empty");
            self.free_extent(number, &pointer, 0);
            self.checkpoint_before_reuse = true;
            self.dirty.insert(Dirty::Entry(number));
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        Ok(())
    }

    fn indirect_aus_needed(&self, extents: u64) -> u64 {
        extents
            .saturating_sub(DIRECT_EXTENTS as u64)
            .div_ceil(EXTENTS_PER_INDIRECT_BLOCK as u64)
            .div_ceil(self.blocks_per_au())
    }

    fn ensure_indirect_capacity(&mut self, number: u32, extents: u64) -> Result<(), GroupError> {
        let needed = self.indirect_aus_needed(extents);
        while (self.files[&number].entry.indirect.len() as u64) < needed {
            if self.files[&number].entry.indirect.len() >= cairn_format::group::INDIRECT_POINTERS {
                return Err(GroupError::NoSpace(format!(
                    "no space: file {number} reached the largest extent map a file can have"
                )));
            }
            let copies = usize::from(self.files[&number].entry.copies);
            let pointer = self.allocate_extent(copies, 0)?;
            let rec = self.files.get_mut(&number).expect("invariant: file exists");
            rec.entry.indirect.push(pointer);
            self.dirty.insert(Dirty::Entry(number));
        }
        Ok(())
    }

    fn dirty_extent(&mut self, number: u32, index: u64) {
        self.dirty.insert(Dirty::Entry(number));
        if index >= DIRECT_EXTENTS as u64 {
            let block = (index - DIRECT_EXTENTS as u64) / EXTENTS_PER_INDIRECT_BLOCK as u64;
            self.dirty.insert(Dirty::Indirect {
                file: number,
                block,
            });
        }
    }

    fn file_number(&self, path: &GroupPath) -> Result<u32, GroupError> {
        Ok(self.open(path)?.number)
    }

    /// Grow or shrink a file.
    pub fn resize(&mut self, path: &GroupPath, size_bytes: u64) -> Result<FileInfo, GroupError> {
        self.check_writable()?;
        self.check_size(size_bytes)?;
        let number = self.file_number(path)?;
        self.refuse_if_sharing(number)?;
        let old = self.files[&number].entry.size_bytes;
        let rec = self.files.get_mut(&number).expect("invariant: open");
        rec.entry.state = FileState::Resizing;
        rec.entry.target_bytes = size_bytes;
        if size_bytes < old {
            // Shrink: the new size holds from the first step, so nothing reads
            // past it while the tail is freed.
            rec.entry.size_bytes = size_bytes;
        }
        self.dirty.insert(Dirty::Entry(number));
        self.commit()?;
        let layout = self.layout_for(&self.files[&number]);
        let keep = layout.extent_count_for(size_bytes);
        if size_bytes < old {
            self.trim_extents(number, keep)?;
            return self.finish_resize(number, size_bytes);
        }
        // What lies between the old end and the end of the extents the file
        // already has may hold data from before a shrink: zero it, so the
        // grown region reads as zeros. The final commit's barrier makes the
        // zeros durable before the new size is.
        let kept_end = layout
            .capacity_bytes(self.files[&number].extents.len() as u64)
            .min(size_bytes);
        if kept_end > old {
            self.zero_range(number, old, kept_end - old)?;
        }
        if let Err(e) = self.grow_extents(number, size_bytes) {
            if self.poisoned.is_none() {
                let keep_old = layout.extent_count_for(old);
                self.trim_extents(number, keep_old)?;
                let rec = self.files.get_mut(&number).expect("invariant: open");
                rec.entry.state = FileState::Active;
                rec.entry.target_bytes = 0;
                self.dirty.insert(Dirty::Entry(number));
                self.commit()?;
            }
            return Err(e);
        }
        self.finish_resize(number, size_bytes)
    }

    fn finish_resize(&mut self, number: u32, size_bytes: u64) -> Result<FileInfo, GroupError> {
        let now = (self.clock)();
        let rec = self.files.get_mut(&number).expect("invariant: open");
        rec.entry.state = FileState::Active;
        rec.entry.size_bytes = size_bytes;
        rec.entry.target_bytes = 0;
        rec.entry.modified_unix_seconds = now;
        self.dirty.insert(Dirty::Entry(number));
        self.commit()?;
        Ok(self.info(&self.files[&number]))
    }

    /// Remove a name: an alias goes alone; a file's own name deletes the file
    /// and every alias of it; a directory must be empty.
    pub fn remove(&mut self, path: &GroupPath) -> Result<(), GroupError> {
        self.check_writable()?;
        let record = self
            .resolve(path)?
            .ok_or_else(|| {
                GroupError::Invalid(format!("{path} is the group's root; it cannot be removed"))
            })?
            .clone();
        match record.kind {
            AliasKind::Alias => {
                self.remove_alias(record.id);
                self.commit()
            }
            AliasKind::Directory => {
                if self.aliases.values().any(|r| r.parent == record.id) {
                    return Err(GroupError::Invalid(format!(
                        "directory {path} is not empty; remove what is in it first"
                    )));
                }
                self.remove_alias(record.id);
                self.commit()
            }
            AliasKind::File => {
                // First step: the file is Deleting and loses the name it was
                // asked by; its other names go in bounded steps after (a mount
                // that finds it Deleting drops whatever names remain).
                let number = record.file_number;
                if self.live_file(&record).is_none() {
                    // Its file is gone (lost, or never there): only its names
                    // are left to remove — those of this incarnation, never a
                    // live file's — and a lost entry is written free.
                    self.remove_alias(record.id);
                    self.drop_names_of(number, Some(record.file_incarnation))?;
                    if self.lost.remove(&LostBlock::Entry(number)).is_some() {
                        self.dirty.insert(Dirty::Entry(number));
                    }
                    return self.commit();
                }
                self.remove_alias(record.id);
                let rec = self.files.get_mut(&number).expect("invariant: a live file");
                rec.entry.state = FileState::Deleting;
                self.dirty.insert(Dirty::Entry(number));
                self.commit()?;
                self.drop_names_of(number, None)?;
                self.finish_delete(number)
            }
        }
    }

    fn finish_delete(&mut self, number: u32) -> Result<(), GroupError> {
        self.trim_extents(number, 0)?;
        self.files.remove(&number);
        self.dirty.insert(Dirty::Entry(number));
        self.commit()
    }

    /// What a crash left unfinished, for a read-only mount to report: the
    /// next mount that writes settles it.
    pub(super) fn pending_operations(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(n, f)| **n >= FILE_NUMBER_USER_MIN && f.entry.state != FileState::Active)
            .map(|(n, f)| {
                let what = match f.entry.state {
                    FileState::Creating => "a create",
                    FileState::Deleting => "a delete",
                    _ => "a resize",
                };
                format!("file {n}: {what} was interrupted; the next command that writes to the group settles it")
            })
            .collect()
    }

    /// Finish or undo what a crash interrupted. Returns what was done.
    pub(super) fn recover_operations(&mut self) -> Result<Vec<String>, GroupError> {
        let mut done = Vec::new();
        let pending: Vec<(u32, FileState)> = self
            .files
            .iter()
            .filter(|(n, f)| **n >= FILE_NUMBER_USER_MIN && f.entry.state != FileState::Active)
            .map(|(n, f)| (*n, f.entry.state))
            .collect();
        for (number, state) in pending {
            match state {
                FileState::Creating => {
                    // Names that point at it cannot exist (named last), but a
                    // damaged alias directory might: drop them too.
                    self.drop_names_of(number, None)?;
                    self.finish_delete(number)?;
                    done.push(format!("file {number}: unfinished create undone"));
                }
                FileState::Deleting => {
                    self.drop_names_of(number, None)?;
                    self.finish_delete(number)?;
                    done.push(format!("file {number}: unfinished delete completed"));
                }
                FileState::Resizing => {
                    let rec = &self.files[&number];
                    let keep = self.layout_for(rec).extent_count_for(rec.entry.size_bytes);
                    self.trim_extents(number, keep)?;
                    let rec = self.files.get_mut(&number).expect("invariant: exists");
                    rec.entry.state = FileState::Active;
                    rec.entry.target_bytes = 0;
                    let size = rec.entry.size_bytes;
                    self.dirty.insert(Dirty::Entry(number));
                    self.commit()?;
                    done.push(format!(
                        "file {number}: unfinished resize settled at {size} bytes"
                    ));
                }
                FileState::Active => {}
            }
        }
        Ok(done)
    }

    /// Remove every name of file `number` (only those of `incarnation`, when
    /// given), committing in bounded steps.
    fn drop_names_of(&mut self, number: u32, incarnation: Option<u32>) -> Result<(), GroupError> {
        let names: Vec<u32> = self
            .aliases
            .values()
            .filter(|r| r.kind != AliasKind::Directory && r.file_number == number)
            .filter(|r| incarnation.is_none_or(|i| r.file_incarnation == i))
            .map(|r| r.id)
            .collect();
        for id in names {
            self.remove_alias(id);
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        Ok(())
    }

    // -----------------------------------------------------------------------
    // Data path

    fn check_io(&self, number: u32, offset: u64, len: u64) -> Result<(), GroupError> {
        let sector = u64::from(self.sector_bytes);
        if !offset.is_multiple_of(sector) || !len.is_multiple_of(sector) {
            return Err(GroupError::Invalid(format!(
                "I/O at offset {offset} length {len} is not aligned to the group's {sector}-byte sectors"
            )));
        }
        let size = self
            .files
            .get(&number)
            .filter(|f| f.entry.state != FileState::Deleting)
            .ok_or_else(|| GroupError::NotFound(format!("file {number} does not exist")))?
            .entry
            .size_bytes;
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(GroupError::Invalid(format!(
                "I/O at offset {offset} length {len} goes past the end of the file ({size} bytes); resize it first"
            )));
        }
        Ok(())
    }

    /// The pieces of a logical range: (extent, offset in extent, offset in
    /// the caller's buffer, length).
    fn pieces(&self, number: u32, offset: u64, len: u64) -> Vec<(u64, u64, usize, u64)> {
        let layout = self.layout_for(&self.files[&number]);
        let mut out = Vec::new();
        let mut done = 0u64;
        while done < len {
            let loc = layout.locate(offset + done);
            let run = loc.run_bytes.min(len - done);
            out.push((loc.extent, loc.offset_in_extent, done as usize, run));
            done += run;
        }
        out
    }

    /// Write `data` at `offset` of file `number` to every online copy.
    pub fn write(&mut self, number: u32, offset: u64, data: &[u8]) -> Result<(), GroupError> {
        self.check_writable()?;
        self.check_io(number, offset, data.len() as u64)?;
        self.refuse_if_sharing(number)?;
        let pieces = self.pieces(number, offset, data.len() as u64);
        let layout = self.layout_for(&self.files[&number]);
        // First writes to an extent: zero what this write does not cover.
        let mut covered: std::collections::BTreeMap<u64, u64> = Default::default();
        for (extent, _, _, len) in &pieces {
            if !self.files[&number].extents[*extent as usize].initialized {
                *covered.entry(*extent).or_default() += len;
            }
        }
        for (extent, bytes) in &covered {
            if *bytes < layout.extent_bytes(*extent) {
                self.zero_extent(number, *extent)?;
            }
        }
        // The data in bounded batches: one call may be bigger than memory
        // should hold twice (once per copy).
        let mut start = 0;
        while start < pieces.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < pieces.len()
                && (end == start || bytes + pieces[end].3 <= WRITE_BATCH_BYTES_MAX)
            {
                bytes += pieces[end].3;
                end += 1;
            }
            let batch = &pieces[start..end];
            let mut writes = Vec::new();
            for (extent, within, at, len) in batch {
                let ext = self.files[&number].extents[*extent as usize];
                for c in ext.copies() {
                    writes.push((
                        c.disk,
                        u64::from(c.au) * self.au_bytes + within,
                        AlignedBuf::from_slice(&data[*at..*at + *len as usize]),
                    ));
                }
            }
            let failed = self.write_many(writes)?;
            self.fail_if_no_copy(number, batch, &failed)?;
            self.failed_disks.extend(failed);
            start = end;
        }
        if covered.is_empty() {
            return self.offline_failed();
        }
        let fresh: Vec<u64> = covered.into_keys().collect();
        self.mark_initialized(number, &fresh)
    }

    /// Mark extents of a file initialised, committing in steps of at most
    /// [`STEP_DIRTY_MAX`] dirty blocks (a big write first-writes more extents
    /// than one transaction can name). Each step's barrier flush makes the
    /// data and zeros written before it durable before its flags are; a crash
    /// between steps leaves some extents still reading as zeros, which a
    /// write that was never acknowledged may do.
    fn mark_initialized(&mut self, number: u32, extents: &[u64]) -> Result<(), GroupError> {
        for e in extents {
            let rec = self.files.get_mut(&number).expect("invariant: checked");
            rec.extents[*e as usize].initialized = true;
            self.dirty_extent(number, *e);
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        let now = (self.clock)();
        let rec = self.files.get_mut(&number).expect("invariant: checked");
        rec.entry.modified_unix_seconds = now;
        self.dirty.insert(Dirty::Entry(number));
        self.commit()
    }

    /// Every piece must have landed on at least one copy.
    fn fail_if_no_copy(
        &self,
        number: u32,
        pieces: &[(u64, u64, usize, u64)],
        failed: &[u16],
    ) -> Result<(), GroupError> {
        for (extent, _, _, _) in pieces {
            let ext = &self.files[&number].extents[*extent as usize];
            let alive = ext.copies().iter().any(|c| {
                self.member(c.disk).and_then(Member::online).is_some() && !failed.contains(&c.disk)
            });
            if !alive {
                return Err(GroupError::Io {
                    disk: ext
                        .copies()
                        .iter()
                        .map(|c| self.disk_name(c.disk))
                        .collect::<Vec<_>>()
                        .join(","),
                    error: cairn_io::IoError::Os {
                        kind: cairn_io::OpKind::Write,
                        offset_bytes: 0,
                        len_bytes: 0,
                        errno: EIO,
                    },
                });
            }
        }
        Ok(())
    }

    /// Make a logical range read as zeros on every copy of the initialised
    /// extents it touches (uninitialised ones read as zeros already).
    fn zero_range(&mut self, number: u32, offset: u64, len: u64) -> Result<(), GroupError> {
        let mut requests = Vec::new();
        let mut disks = Vec::new();
        for (extent, within, _, run) in self.pieces(number, offset, len) {
            let ext = self.files[&number].extents[extent as usize];
            if !ext.initialized {
                continue;
            }
            for c in ext.copies() {
                let Some(device) = self.member(c.disk).and_then(Member::online) else {
                    continue;
                };
                disks.push(c.disk);
                requests.push(Request {
                    device,
                    tag: requests.len() as u64,
                    op: Op::WriteZeroes {
                        offset_bytes: u64::from(c.au) * self.au_bytes + within,
                        len_bytes: run,
                    },
                });
            }
        }
        self.run_zeroing(requests, disks);
        Ok(())
    }

    fn zero_extent(&mut self, number: u32, extent: u64) -> Result<(), GroupError> {
        let len = self.layout_for(&self.files[&number]).extent_bytes(extent);
        let ext = self.files[&number].extents[extent as usize];
        self.zero_whole_extents(&[(ext, len)]);
        Ok(())
    }

    /// Read into `buf` from `offset` of file `number`.
    pub fn read(&mut self, number: u32, offset: u64, buf: &mut [u8]) -> Result<(), GroupError> {
        self.read_checked(number, offset, buf, &|_| true)
    }

    /// Read, accepting a copy only if `accept` passes on the whole buffer (the
    /// caller's own checksum). A copy that fails is rewritten from one that passes.
    pub fn read_checked(
        &mut self,
        number: u32,
        offset: u64,
        buf: &mut [u8],
        accept: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(), GroupError> {
        self.check_usable()?;
        self.check_io(number, offset, buf.len() as u64)?;
        let pieces = self.pieces(number, offset, buf.len() as u64);
        let copies = usize::from(self.files[&number].entry.copies);
        let mut problems = Vec::new();
        let mut bad_attempts: Vec<usize> = Vec::new();
        // Attempt k reads each piece from its k-th online copy (the last one
        // when it has fewer), so one offline disk never hides the others.
        for attempt in 0..copies {
            match self.read_attempt(number, &pieces, attempt, buf) {
                Ok(true) if accept(buf) => {
                    if !bad_attempts.is_empty() && !self.read_only {
                        self.rewrite_attempts(number, &pieces, &bad_attempts, attempt, buf)?;
                    }
                    return self.offline_failed();
                }
                Ok(true) => {
                    problems.push(format!("copy {attempt} failed the caller's check"));
                    bad_attempts.push(attempt);
                }
                Ok(false) => break,
                Err(e) => {
                    problems.push(format!("copy {attempt}: {e}"));
                    bad_attempts.push(attempt);
                }
            }
        }
        Err(GroupError::Corrupt(format!(
            "file {number} offset {offset}: no copy could be read ({})",
            if problems.is_empty() {
                "every copy is offline".to_string()
            } else {
                problems.join("; ")
            }
        )))
    }

    /// The copies of an extent on online disks, primary first.
    fn online_copies(&self, ext: &Extent) -> Vec<AuAddr> {
        ext.copies()
            .iter()
            .copied()
            .filter(|c| self.member(c.disk).and_then(Member::online).is_some())
            .collect()
    }

    /// Read every piece for `attempt`. `Ok(false)`: nothing new to try (a
    /// piece has no online copy, or every piece has fewer online copies).
    fn read_attempt(
        &mut self,
        number: u32,
        pieces: &[(u64, u64, usize, u64)],
        attempt: usize,
        buf: &mut [u8],
    ) -> Result<bool, GroupError> {
        let mut requests = Vec::new();
        let mut places = Vec::new();
        let mut fresh = attempt == 0;
        for (extent, within, at, len) in pieces {
            let ext = self.files[&number].extents[*extent as usize];
            if !ext.initialized {
                buf[*at..*at + *len as usize].fill(0);
                continue;
            }
            let online = self.online_copies(&ext);
            let Some(c) = online
                .get(attempt.min(online.len().saturating_sub(1)))
                .copied()
            else {
                return Ok(false);
            };
            fresh |= attempt < online.len();
            let device = self
                .member(c.disk)
                .and_then(Member::online)
                .expect("invariant: online copy");
            places.push((*at, *len as usize, c.disk));
            requests.push(Request {
                device,
                tag: requests.len() as u64,
                op: Op::Read {
                    offset_bytes: u64::from(c.au) * self.au_bytes + within,
                    buf: AlignedBuf::zeroed(*len as usize),
                },
            });
        }
        if !fresh {
            return Ok(false);
        }
        let completions = self
            .engine
            .execute_all(requests)
            .map_err(super::io_err("(engine)"))?;
        for (c, (at, len, disk)) in completions.into_iter().zip(places) {
            match (c.result, c.buf) {
                (Ok(_), Some(data)) => buf[at..at + len].copy_from_slice(&data[..][..len]),
                (Err(e), _) => {
                    return Err(GroupError::Io {
                        disk: self.disk_name(disk),
                        error: e,
                    });
                }
                (Ok(_), None) => unreachable!("invariant: a read hands its buffer back"),
            }
        }
        Ok(true)
    }

    /// Rewrite, from `good`, the copies the failed attempts read (never the
    /// copy the good attempt read).
    fn rewrite_attempts(
        &mut self,
        number: u32,
        pieces: &[(u64, u64, usize, u64)],
        bad: &[usize],
        good_attempt: usize,
        good: &[u8],
    ) -> Result<(), GroupError> {
        let mut writes = Vec::new();
        for (extent, within, at, len) in pieces {
            let ext = self.files[&number].extents[*extent as usize];
            if !ext.initialized {
                continue;
            }
            let online = self.online_copies(&ext);
            let last = online.len().saturating_sub(1);
            let good_copy = online.get(good_attempt.min(last));
            for attempt in bad {
                let Some(c) = online.get((*attempt).min(last)) else {
                    continue;
                };
                if Some(c) != good_copy {
                    writes.push((
                        c.disk,
                        u64::from(c.au) * self.au_bytes + within,
                        AlignedBuf::from_slice(&good[*at..*at + *len as usize]),
                    ));
                }
            }
        }
        let failed = self.write_many(writes)?;
        self.failed_disks.extend(failed);
        Ok(())
    }

    /// Where each piece of a range lives, for a caller that does its own I/O
    /// (the benchmark's direct path): (disk, byte offset, length, buffer offset)
    /// of the primary copy. `None` if any extent is not yet initialised.
    pub fn map_primary(
        &self,
        number: u32,
        offset: u64,
        len: u64,
    ) -> Result<Option<Vec<PrimaryPiece>>, GroupError> {
        self.check_io(number, offset, len)?;
        let mut out = Vec::new();
        for (extent, within, at, run) in self.pieces(number, offset, len) {
            let ext = &self.files[&number].extents[extent as usize];
            if !ext.initialized {
                return Ok(None);
            }
            let Some(c) = self.online_copies(ext).first().copied() else {
                return Err(GroupError::Corrupt(format!(
                    "file {number} extent {extent}: every copy is offline"
                )));
            };
            out.push((c.disk, u64::from(c.au) * self.au_bytes + within, run, at));
        }
        Ok(Some(out))
    }

    /// Make every extent of file `number` initialised, zeroing on every copy
    /// the ones never written, so that direct reads of them return what the
    /// group would (zeros) and not an earlier file's bytes. Returns how many
    /// extents it zeroed. For a caller about to do its own I/O ([`Self::map_file`]).
    pub fn initialize_file(&mut self, number: u32) -> Result<u64, GroupError> {
        /// Extents zeroed by one batch of requests.
        const BATCH: usize = 64;
        self.check_writable()?;
        self.check_io(number, 0, 0)?;
        self.refuse_if_sharing(number)?;
        let layout = self.layout_for(&self.files[&number]);
        let fresh: Vec<u64> = self.files[&number]
            .extents
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.initialized)
            .map(|(i, _)| i as u64)
            .collect();
        for batch in fresh.chunks(BATCH) {
            let whole: Vec<(Extent, u64)> = batch
                .iter()
                .map(|i| {
                    (
                        self.files[&number].extents[*i as usize],
                        layout.extent_bytes(*i),
                    )
                })
                .collect();
            // Zeroed before the map says so: a crash in between leaves
            // extents that are zero and still read as zeros.
            self.zero_whole_extents(&whole);
            self.offline_failed()?;
            if let Some(i) = batch.iter().find(|i| {
                let ext = self.files[&number].extents[**i as usize];
                self.online_copies(&ext).is_empty()
            }) {
                return Err(GroupError::Corrupt(format!(
                    "file {number} extent {i}: no copy could be zeroed (every copy is offline)"
                )));
            }
            self.mark_initialized(number, batch)?;
        }
        Ok(fresh.len() as u64)
    }

    /// The whole extent map of file `number`, for a caller that does its own
    /// I/O to the member disks (the benchmark's direct path). It stays true
    /// only while no extent moves: the caller must hold the group's lock and
    /// keep it unmounted (no rebalance, no resize) for as long as it uses it.
    /// Every extent must be initialised ([`Self::initialize_file`]) and have
    /// an online copy.
    pub fn map_file(&self, number: u32) -> Result<FileMap, GroupError> {
        self.check_io(number, 0, 0)?;
        let rec = &self.files[&number];
        let mut extents = Vec::with_capacity(rec.extents.len());
        for (i, ext) in rec.extents.iter().enumerate() {
            if !ext.initialized {
                return Err(GroupError::Invalid(format!(
                    "file {number} extent {i} was never written; initialise the file before mapping it"
                )));
            }
            let copies: Vec<(u16, u64)> = self
                .online_copies(ext)
                .iter()
                .map(|c| (c.disk, u64::from(c.au) * self.au_bytes))
                .collect();
            if copies.is_empty() {
                return Err(GroupError::Corrupt(format!(
                    "file {number} extent {i}: every copy is offline"
                )));
            }
            extents.push(copies);
        }
        Ok(FileMap {
            size_bytes: rec.entry.size_bytes,
            layout: self.layout_for(rec),
            extents,
        })
    }

    /// The device of a member disk, if online.
    pub fn disk_device(&self, disk: u16) -> Option<cairn_io::DeviceId> {
        self.member(disk).and_then(Member::online)
    }

    /// The AUs holding a file's indirect extent blocks (one extent per AU,
    /// each with its copies), for the checker and tests.
    pub fn indirect_aus(&self, number: u32) -> Option<&[Extent]> {
        self.files.get(&number).map(|f| &f.entry.indirect[..])
    }

    /// Extents of a file (copies and initialised flag), for the checker and tests.
    pub fn extents(&self, number: u32) -> Option<&[Extent]> {
        self.files.get(&number).map(|f| &f.extents[..])
    }
}

/// Bytes of a write's data turned into requests at once: a bigger write goes
/// to the disks in batches, so memory stays bounded whatever the caller
/// hands in (each copy holds its own buffer).
const WRITE_BATCH_BYTES_MAX: u64 = 32 << 20;

/// The errno a write reports when no copy of it could be written.
const EIO: i32 = 5;

/// A file's extent map, taken whole ([`Group::map_file`]).
#[derive(Debug, Clone)]
pub struct FileMap {
    pub size_bytes: u64,
    pub layout: FileLayout,
    /// Per extent, its copies on online disks, primary first: (disk number,
    /// byte offset on that disk where the extent's AU run starts).
    pub extents: Vec<Vec<(u16, u64)>>,
}

/// One piece of a range that is contiguous in the file and on every copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapPiece<'m> {
    /// Offset of the piece from the start of the range (in the caller's buffer).
    pub at: u64,
    pub len: u64,
    /// Offset of the piece inside its extent's AU run.
    pub within: u64,
    /// The extent's copies, primary first: (disk number, start of its AU run).
    pub copies: &'m [(u16, u64)],
}

impl MapPiece<'_> {
    /// Where copy `k` of this piece is on its disk: (disk number, byte offset).
    pub fn on_copy(&self, k: usize) -> Option<(u16, u64)> {
        self.copies
            .get(k)
            .map(|(d, start)| (*d, start + self.within))
    }
}

impl FileMap {
    /// The pieces of `len` bytes at `offset`, in order. The range must lie
    /// inside the file (`offset + len <= size_bytes`); `None` if it does not.
    pub fn pieces(&self, offset: u64, len: u64) -> Option<Vec<MapPiece<'_>>> {
        let end = offset.checked_add(len)?;
        if end > self.size_bytes {
            return None;
        }
        let mut out = Vec::new();
        let mut done = 0u64;
        while done < len {
            let loc = self.layout.locate(offset + done);
            let run = loc.run_bytes.min(len - done);
            out.push(MapPiece {
                at: done,
                len: run,
                within: loc.offset_in_extent,
                copies: self.extents.get(loc.extent as usize)?,
            });
            done += run;
        }
        Some(out)
    }

    /// The most copies any extent has.
    pub fn copies_max(&self) -> usize {
        self.extents.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// The most pieces a transfer of `len` bytes can be split into.
    pub fn pieces_max(&self, len: u64) -> usize {
        let unit = match self.layout.striping {
            Striping::Coarse => self.layout.au_bytes,
            Striping::Fine => crate::placement::FINE_STRIPE_BYTES.min(self.layout.au_bytes),
        };
        (len.div_ceil(unit.max(1)) + 1) as usize
    }

    /// The member disks the map uses.
    pub fn disks(&self) -> Vec<u16> {
        let mut disks: Vec<u16> = self.extents.iter().flatten().map(|(d, _)| *d).collect();
        disks.sort_unstable();
        disks.dedup();
        disks
    }
}

/// One piece of a range on its primary copy: (disk, byte offset on the disk,
/// length, offset in the caller's buffer).
pub type PrimaryPiece = (u16, u64, u64, usize);

/// Split a path into its parent and last component.
fn split(path: &GroupPath) -> Result<(GroupPath, Component), GroupError> {
    let name = path.file_name().cloned().ok_or_else(|| {
        GroupError::Invalid(format!("{path} is the group's root; name a file in it"))
    })?;
    let parent = path
        .parent()
        .expect("invariant: a path with a name has a parent");
    Ok((parent, name))
}
