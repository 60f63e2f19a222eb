//! Files in a mounted group: create / resize / delete as continuing
//! operations (the name space is `namespace.rs`, the data path `data.rs`).
//!
//! Continuing operations: each commits in steps of at most [`STEP_DIRTY_MAX`]
//! dirty blocks. The file's entry says where it is heading (`Creating`,
//! `Resizing` with the old size still in `size_bytes`, `Deleting`), so a mount
//! after a crash finishes a delete and undoes a create or an unfinished grow
//! ([`Group::recover_operations`]). A file gets its name only in the create's
//! last step, so an undone create leaves no name behind.

use std::collections::BTreeSet;

use cairn_format::group::{
    is_user_number, map_number, AliasKind, FileEntry, FileState, Template, DIRECT_EXTENTS,
    EXTENTS_PER_INDIRECT_BLOCK, FILE_DIRECTORY, FILE_NUMBER_USER_MIN, STRIPING_COARSE,
    TEMPLATE_NAME_LEN_MAX,
};

use super::error::GroupError;
use super::file_types::{CreateOptions, FileInfo};
use super::limits::STEP_DIRTY_MAX;
use super::mounted::Group;
use super::namespace::split;
use super::parts::damage::LostBlock;
use super::parts::files::FileRec;
use super::parts::settings::Refused;
use super::parts::txn::Dirty;
use crate::names::{Component, GroupPath};
use crate::placement::FileLayout;

impl Group<'_> {
    // -----------------------------------------------------------------------
    // Create, resize, delete

    pub(super) fn layout_for(&self, rec: &FileRec) -> FileLayout {
        self.file_layout(&rec.entry)
    }

    /// How a file's bytes lie across its extents, by its entry's striping.
    pub(super) fn file_layout(&self, entry: &FileEntry) -> FileLayout {
        self.files.layout(entry)
    }

    /// Give the group template `name` (coarse striping, the group's
    /// redundancy) if it has none of that name: a group made before a
    /// template was shipped takes it when first needed (a volume). Whether
    /// it was added; written with the running transaction.
    pub fn ensure_template(&mut self, name: &str) -> Result<bool, GroupError> {
        self.check_writable()?;
        let name = name.to_ascii_uppercase();
        if self.settings.template(&name).is_some() {
            return Ok(false);
        }
        self.settings
            .add_template(Template {
                name,
                copies: 0,
                striping: STRIPING_COARSE,
            })
            .map_err(|why| match why {
                Refused::Full(why) | Refused::TooLong(why) => GroupError::Invalid(why),
            })?;
        self.txn.mark(Dirty::Templates);
        Ok(true)
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
    pub(super) fn name_free(
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

    pub(super) fn free_name(&self, path: &GroupPath) -> Result<(u32, Component), GroupError> {
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
            .settings
            .template(&template_name)
            .cloned()
            .ok_or_else(|| {
                GroupError::Invalid(format!(
                    "no template {template_name}; the group has {}",
                    self.settings
                        .templates()
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
        // The checksum directory first, before the create changes anything
        // (it may declare a feature).
        let with_map = options.checksums == Some(true);
        if with_map {
            self.ensure_checksum_directory()?;
        }
        // File number: the lowest free one; grow the file directory if needed.
        // A lost entry's number stays taken until repair: its names still
        // point at it. A number is free when neither it nor its map is taken.
        let mut number = FILE_NUMBER_USER_MIN;
        while [number, map_number(number)]
            .iter()
            .any(|n| self.files.contains(*n) || self.damage.is_lost(LostBlock::Entry(*n)))
        {
            number += 1;
            if !is_user_number(number) {
                return Err(GroupError::NoSpace(
                    "no space: the group has as many files as it can number".into(),
                ));
            }
        }
        while u64::from(number)
            >= self.files[&FILE_DIRECTORY].extents.len() as u64 * self.blocks_per_au()
        {
            self.grow_metadata_file(FILE_DIRECTORY)?;
        }
        let now = (self.clock)();
        // The journal sequence never repeats (it survives remounts in the
        // journal header), so neither does an incarnation taken from it.
        let seq = self.journal.next_seq();
        let incarnation = ((seq ^ (seq >> 32)) as u32).max(1);
        self.files.insert(FileRec {
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
                attrs: None,
                direct: Vec::new(),
                indirect: Vec::new(),
            },
            extents: Vec::new(),
        });
        self.txn.mark(Dirty::Entry(number));
        let map = if with_map {
            self.add_map(number)
        } else {
            Ok(())
        };
        let made = map
            .and_then(|()| self.commit())
            .and_then(|()| self.grow_extents(number, size_bytes))
            .and_then(|()| self.grow_map(number, size_bytes));
        if let Err(e) = made {
            // Undo what was allocated: the create never happened.
            if self.poisoned.is_none() {
                self.discard_unnamed(number)?;
            }
            return Err(e);
        }
        let entry = self
            .files
            .entry_mut(number)
            .expect("invariant: just created");
        entry.size_bytes = size_bytes;
        self.size_map(number, size_bytes, size_bytes);
        // Committed (and so published) now: the caller writes into it next.
        self.txn.mark(Dirty::Entry(number));
        self.commit()?;
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
        self.grow_map(number, size_bytes)?;
        let entry = self.files.entry_mut(number).expect("invariant: checked");
        entry.size_bytes = size_bytes;
        entry.target_bytes = size_bytes;
        self.size_map(number, size_bytes, size_bytes);
        self.txn.mark(Dirty::Entry(number));
        self.commit()
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

    pub(super) fn publish_as(
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
        self.trim_map(number, size_bytes)?;
        // The name acknowledges the bytes: their checksums are named first
        // (a record, and a flush of every disk), so that after a crash the
        // copies are judged against them, and one rotten copy is healed
        // rather than, disagreeing with the other and named by nothing,
        // taken for damage on every copy (the crash simulator's seed
        // 104419).
        let log = self.plane.sums_log().clone();
        if log.has_log() {
            log.sync(self)?;
        }
        // The name must not be durable before the data: the commit's barrier
        // flushes the file's disks that this group's own calls wrote and did
        // not flush yet (a writer through data handles syncs them first).
        let map = self.files.get(map_number(number));
        let unflushed: BTreeSet<u16> = self.files[&number]
            .extents
            .iter()
            .chain(map.iter().flat_map(|m| &m.extents))
            .flat_map(|e| e.copies())
            .map(|c| c.disk)
            .filter(|d| self.member(*d).is_some_and(|m| m.needs_flush))
            .collect();
        for disk in unflushed {
            self.txn.flush_before_record(disk);
        }
        // The name first (it may fail: no room to grow the alias directory,
        // and the file is then still one being created, for discard_unnamed),
        // and in the same commit the file becomes active.
        let rec = self.files[&number].clone();
        self.add_alias(parent, name, AliasKind::File, Some(&rec))?;
        let entry = self
            .files
            .entry_mut(number)
            .expect("invariant: checked unnamed");
        entry.size_bytes = size_bytes;
        entry.target_bytes = 0;
        self.size_map(number, size_bytes, 0);
        self.set_file_state(number, FileState::Active);
        self.commit()?;
        Ok(self.info(&self.files[&number]))
    }

    /// Drop a file [`Self::create_unnamed`] made (a copy that failed).
    pub fn discard_unnamed(&mut self, number: u32) -> Result<(), GroupError> {
        self.check_writable()?;
        self.check_unnamed(number)?;
        self.finish_delete(number)
    }

    pub(super) fn check_unnamed(&self, number: u32) -> Result<(), GroupError> {
        match self.files.get(number) {
            Some(f) if is_user_number(number) && f.entry.state == FileState::Creating => Ok(()),
            _ => Err(GroupError::Invalid(format!(
                "file {number} is not a file being created"
            ))),
        }
    }

    pub(super) fn check_size(&self, size_bytes: u64) -> Result<(), GroupError> {
        if !size_bytes.is_multiple_of(u64::from(self.sector_bytes)) {
            return Err(GroupError::Invalid(format!(
                "size {size_bytes} is not a multiple of the group's {}-byte sectors",
                self.sector_bytes
            )));
        }
        Ok(())
    }

    /// Allocate extents until the file can hold `size_bytes`, committing in steps.
    pub(super) fn grow_extents(&mut self, number: u32, size_bytes: u64) -> Result<(), GroupError> {
        let rec = &self.files[&number];
        let layout = self.layout_for(rec);
        let need = layout.extent_count_for(size_bytes);
        let copies = usize::from(rec.entry.copies);
        while (self.files[&number].extents.len() as u64) < need {
            let index = self.files[&number].extents.len() as u64;
            self.ensure_indirect_capacity(number, index + 1)?;
            let mut extent = self.allocate_data_extent(copies, index)?;
            self.record_missing_copies(&mut extent, index);
            self.files.push_extent(number, extent);
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
            let (index, extent) = self.files.pop_extent(number).expect("invariant: non-empty");
            self.free_extent(number, &extent, index, false);
            self.dirty_extent(number, index);
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        let needed = self
            .files
            .indirect_aus_needed(self.files[&number].extents.len() as u64);
        while self.files[&number].entry.indirect.len() as u64 > needed {
            let pointer = self
                .files
                .pop_indirect(number)
                .expect("invariant: non-empty");
            self.free_extent(number, &pointer, 0, true);
            self.txn.mark(Dirty::Entry(number));
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        Ok(())
    }

    pub(super) fn ensure_indirect_capacity(
        &mut self,
        number: u32,
        extents: u64,
    ) -> Result<(), GroupError> {
        let needed = self.files.indirect_aus_needed(extents);
        while (self.files[&number].entry.indirect.len() as u64) < needed {
            if self.files[&number].entry.indirect.len() >= cairn_format::group::INDIRECT_POINTERS {
                return Err(GroupError::NoSpace(format!(
                    "no space: file {number} reached the largest extent map a file can have"
                )));
            }
            let copies = usize::from(self.files[&number].entry.copies);
            let pointer = self.allocate_extent(copies, 0)?;
            self.files.push_indirect(number, pointer);
            self.txn.mark(Dirty::Entry(number));
        }
        Ok(())
    }

    pub(super) fn dirty_extent(&mut self, number: u32, index: u64) {
        self.txn.mark(Dirty::Entry(number));
        self.unpublished.extent_changed(number, index);
        if index >= DIRECT_EXTENTS as u64 {
            let block = (index - DIRECT_EXTENTS as u64) / EXTENTS_PER_INDIRECT_BLOCK as u64;
            self.txn.mark(Dirty::Indirect {
                file: number,
                block,
            });
        }
    }

    pub(super) fn file_number(&self, path: &GroupPath) -> Result<u32, GroupError> {
        Ok(self.open(path)?.number)
    }

    /// Grow or shrink a file.
    pub fn resize(&mut self, path: &GroupPath, size_bytes: u64) -> Result<FileInfo, GroupError> {
        self.check_writable()?;
        self.check_size(size_bytes)?;
        let number = self.file_number(path)?;
        self.resize_number(number, size_bytes, size_bytes)
    }

    /// Grow or shrink file `number` to `size_bytes` (whole sectors), its
    /// byte size, if it keeps one, becoming `byte_size` in the same steps
    /// (so no committed entry has a byte size past its sectors). A file
    /// without a name (being filled, or unlinked while open) stays one.
    pub(super) fn resize_number(
        &mut self,
        number: u32,
        size_bytes: u64,
        byte_size: u64,
    ) -> Result<FileInfo, GroupError> {
        self.refuse_if_sharing(number)?;
        if self.has_map(number) {
            self.refuse_if_sharing(map_number(number))?;
        }
        let old = self.files[&number].entry.size_bytes;
        // The checksums' block at the end that moves, read before anything
        // changes (`cut_sums` below must not fail half-way).
        self.prepare_cut(number, old.min(size_bytes))?;
        let entry = self.files.entry_mut(number).expect("invariant: open");
        let was = entry.state;
        entry.target_bytes = size_bytes;
        if size_bytes < old {
            // Shrink: the new size holds from the first step, so nothing reads
            // past it while the tail is freed.
            entry.size_bytes = size_bytes;
            if let Some(a) = &mut entry.attrs {
                a.byte_size = byte_size;
            }
        }
        self.size_map(number, old.min(size_bytes), size_bytes);
        self.set_file_state(number, FileState::Resizing);
        self.commit()?;
        let layout = self.layout_for(&self.files[&number]);
        let keep = layout.extent_count_for(size_bytes);
        if size_bytes < old {
            self.cut_sums(number, size_bytes)?;
            self.trim_extents(number, keep)?;
            self.trim_map(number, size_bytes)?;
            return self.finish_resize(number, size_bytes, byte_size, was);
        }
        // The checksums hold zero units past the old end, and no more
        // (a shrink before may have left others on disk).
        self.cut_sums(number, old)?;
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
        // So may the blocks of its map past the old map's end: blanked, they
        // read as zero units (the last block's tail was zeroed by the cut).
        self.blank_map_tail(number, old, size_bytes)?;
        let grown = self
            .grow_extents(number, size_bytes)
            .and_then(|()| self.grow_map(number, size_bytes));
        if let Err(e) = grown {
            if self.poisoned.is_none() {
                let keep_old = layout.extent_count_for(old);
                self.trim_extents(number, keep_old)?;
                self.trim_map(number, old)?;
                let entry = self.files.entry_mut(number).expect("invariant: open");
                entry.target_bytes = 0;
                self.size_map(number, old, 0);
                self.set_file_state(number, was);
                self.commit()?;
            }
            return Err(e);
        }
        self.finish_resize(number, size_bytes, byte_size, was)
    }

    pub(super) fn finish_resize(
        &mut self,
        number: u32,
        size_bytes: u64,
        byte_size: u64,
        state: FileState,
    ) -> Result<FileInfo, GroupError> {
        let now = (self.clock)();
        let entry = self.files.entry_mut(number).expect("invariant: open");
        entry.size_bytes = size_bytes;
        if let Some(a) = &mut entry.attrs {
            a.byte_size = byte_size;
        }
        entry.target_bytes = 0;
        entry.modified_unix_seconds = now;
        self.size_map(number, size_bytes, 0);
        self.set_file_state(number, state);
        self.commit()?;
        self.sums_resized(number, size_bytes);
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
                if self.names.has_children(record.id) {
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
                    self.free_lost_entry(number)?;
                    return self.commit();
                }
                self.remove_alias(record.id);
                self.set_file_state(number, FileState::Deleting);
                self.commit()?;
                self.drop_names_of(number, None)?;
                self.finish_delete(number)
            }
        }
    }

    pub(super) fn finish_delete(&mut self, number: u32) -> Result<(), GroupError> {
        // The map first: a crash then leaves a file being deleted without
        // its map, never a map without its file.
        self.remove_map(number)?;
        self.trim_extents(number, 0)?;
        self.files.remove(number);
        // A cut map's damage goes with its file: the number's next file
        // has a map of its own.
        self.damage.file_removed(number);
        self.txn.mark(Dirty::Entry(number));
        self.commit()
    }

    /// What a crash left unfinished, for a read-only mount to report: the
    /// next mount that writes settles it.
    pub(super) fn pending_operations(&self) -> Vec<String> {
        self.files
            .user_files()
            .filter(|(_, f)| f.entry.state != FileState::Active)
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
            .user_files()
            .filter(|(_, f)| f.entry.state != FileState::Active)
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
                FileState::Resizing if !self.is_named(number) => {
                    // A file unlinked while open, resized, then the crash:
                    // nothing names it any more.
                    self.finish_delete(number)?;
                    done.push(format!(
                        "file {number}: unfinished resize of a file no name has; removed"
                    ));
                }
                FileState::Resizing => {
                    let rec = &self.files[&number];
                    let keep = self.layout_for(rec).extent_count_for(rec.entry.size_bytes);
                    self.trim_extents(number, keep)?;
                    let size = self.files[&number].entry.size_bytes;
                    self.trim_map(number, size)?;
                    let entry = self.files.entry_mut(number).expect("invariant: exists");
                    entry.target_bytes = 0;
                    self.size_map(number, size, 0);
                    self.set_file_state(number, FileState::Active);
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
    pub(super) fn drop_names_of(
        &mut self,
        number: u32,
        incarnation: Option<u32>,
    ) -> Result<(), GroupError> {
        let names: Vec<u32> = self
            .names
            .records()
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
}
