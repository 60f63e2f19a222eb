//! What a file system asks of the name space: the same changes as the
//! path-based calls (`files.rs`, `namespace.rs`), by directory id and file
//! number, with POSIX's rules where the group's allow — create, mkdir,
//! unlink (a file still open keeps its data until it is let go), rmdir,
//! rename (replacing its target in one transaction), mode, owner, times and
//! byte sizes (`docs/serve.md`, "The file system").

use cairn_format::group::{
    is_user_number, AliasKind, AliasRecord, DirAttrs, FileAttrs, FileState,
    GROUP_RO_COMPAT_FILE_ATTRS, MODE_BITS,
};

use super::error::GroupError;
use super::file_types::{CreateOptions, FileInfo, Node};
use super::mounted::Group;
use super::namespace::{alias_block_of, attrs_of};
use super::parts::names::ROOT;
use super::parts::txn::Dirty;
use crate::names::Component;

/// A group's root directory's mode and owner: it has no record to keep
/// them in, so it shows 0755, owned by the process that holds the group
/// (the service, or a command's own mount). The file system shows it so,
/// and a command through the service is checked against it so.
pub fn group_root_attrs() -> DirAttrs {
    // SAFETY: getuid and getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    DirAttrs {
        mode: 0o755,
        uid,
        gid,
    }
}

/// A change of a file's or directory's attributes (`None`: left as it is).
/// The change time is set whatever changes.
#[derive(Debug, Clone, Copy, Default)]
pub struct AttrChange {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub mtime_ns: Option<i64>,
}

/// What is left to do once the transaction that took a name commits:
/// (file number, incarnation).
#[derive(Debug, Clone, Copy)]
enum Retiring {
    Nothing,
    /// A lost file's other names.
    Names(u32, u32),
    KeptOpen(u32, u32),
    Deleted(u32, u32),
}

/// What became of the file a name named, once the name is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retired {
    /// No file went: the name was an alias, a directory, or nothing.
    Nothing,
    /// The file was deleted, its space freed.
    Deleted(u32),
    /// The file is open: it lost its names but keeps its data until
    /// [`Group::drop_unnamed`] (on its last close), or the next mount that
    /// writes, drops it.
    KeptOpen(u32),
}

impl Group<'_> {
    /// From now on attributes may be written: the superblocks say so first,
    /// so that a Cairn that does not know them mounts the group read-only
    /// and never zeroes them.
    fn use_file_attrs(&mut self) -> Result<(), GroupError> {
        self.declare_ro_compat(GROUP_RO_COMPAT_FILE_ATTRS)
    }

    /// Directory `id` (0: the root) is there, and is a directory.
    fn check_directory(&self, id: u32) -> Result<(), GroupError> {
        if id == ROOT {
            return Ok(());
        }
        match self.names.get(id) {
            Some(r) if r.kind == AliasKind::Directory => Ok(()),
            Some(r) => Err(GroupError::NotDirectory(format!(
                "{} is a file, not a directory",
                self.alias_path(r)
            ))),
            None => Err(GroupError::NotFound(format!(
                "directory {id} does not exist"
            ))),
        }
    }

    /// `name` in directory `parent`: the name, checked against the group's
    /// rules, and what it names now.
    fn entry_in(
        &self,
        parent: u32,
        name: &str,
    ) -> Result<(Component, Option<AliasRecord>), GroupError> {
        let name = Component::parse(name)?;
        self.check_directory(parent)?;
        let found = self.child(parent, &name).cloned();
        Ok((name, found))
    }

    /// A name free for something new in `parent`, on a group that may be
    /// written and says it keeps attributes.
    fn new_entry_in(&mut self, parent: u32, name: &str) -> Result<Component, GroupError> {
        self.check_writable()?;
        let (name, found) = self.entry_in(parent, name)?;
        if found.is_some() {
            return Err(GroupError::Exists(format!(
                "{} already exists",
                self.path_in(parent, &name)
            )));
        }
        self.use_file_attrs()?;
        Ok(name)
    }

    /// For messages: the path `name` has (or would have) in `parent`.
    fn path_in(&self, parent: u32, name: &Component) -> String {
        match self.names.get(parent) {
            Some(r) => format!("{}/{}", self.alias_path(r), name),
            None => format!("+{}/{}", self.name, name),
        }
    }

    /// Whether some name still names file `number` — or might: a lost alias
    /// block may hold one.
    pub(super) fn is_named(&self, number: u32) -> bool {
        let Some(f) = self.files.get(number) else {
            return false;
        };
        self.names.records().any(|r| {
            r.kind != AliasKind::Directory
                && r.file_number == number
                && r.file_incarnation == f.entry.incarnation
        }) || self.damage.alias_lost()
    }

    /// Create an empty file named `name` in directory `parent`, with
    /// `attrs` (its byte size is 0).
    pub fn create_in(
        &mut self,
        parent: u32,
        name: &str,
        attrs: FileAttrs,
        options: &CreateOptions,
    ) -> Result<FileInfo, GroupError> {
        let name = self.new_entry_in(parent, name)?;
        let number = self.create_unnamed(0, options)?.number;
        let entry = self.files.entry_mut(number).expect("invariant: just made");
        entry.attrs = Some(FileAttrs {
            mode: attrs.mode & MODE_BITS,
            byte_size: 0,
            ..attrs
        });
        self.publish_as(number, parent, &name, 0)
    }

    /// Make directory `name` in `parent`.
    pub fn mkdir_in(
        &mut self,
        parent: u32,
        name: &str,
        attrs: DirAttrs,
    ) -> Result<Node, GroupError> {
        let name = self.new_entry_in(parent, name)?;
        let id = self.add_alias(parent, &name, AliasKind::Directory, None)?;
        let set = self.names.set_dir_attrs(
            id,
            DirAttrs {
                mode: attrs.mode & MODE_BITS as u16,
                ..attrs
            },
        );
        assert!(set, "invariant: just added");
        self.commit()?;
        self.node(id)
            .ok_or_else(|| GroupError::Corrupt(format!("directory {id} vanished")))
    }

    /// Remove the name `name` in `parent`, which must not be a directory.
    /// A file's own name takes the file (and its aliases) with it, as
    /// `cairn rm` does; `is_open(number, incarnation)` says whether the file
    /// system still has the file in use, and then its data stay until
    /// [`Self::drop_unnamed`].
    pub fn unlink_in(
        &mut self,
        parent: u32,
        name: &str,
        is_open: &dyn Fn(u32, u32) -> bool,
    ) -> Result<Retired, GroupError> {
        self.check_writable()?;
        let (name, found) = self.entry_in(parent, name)?;
        let record = found.ok_or_else(|| {
            GroupError::NotFound(format!("{} does not exist", self.path_in(parent, &name)))
        })?;
        if record.kind == AliasKind::Directory {
            return Err(GroupError::IsDirectory(format!(
                "{} is a directory; remove it with rmdir",
                self.alias_path(&record)
            )));
        }
        let retired = self.retire_name(&record, is_open);
        self.commit()?;
        self.finish_retired(retired)
    }

    /// Remove directory `name` in `parent`, which must be empty.
    /// `dir_known(id)` says whether the file system's kernel still knows
    /// the directory: its id is then held until [`Self::release_alias_id`].
    pub fn rmdir_in(
        &mut self,
        parent: u32,
        name: &str,
        dir_known: &dyn Fn(u32) -> bool,
    ) -> Result<(), GroupError> {
        self.check_writable()?;
        let (name, found) = self.entry_in(parent, name)?;
        let record = found.ok_or_else(|| {
            GroupError::NotFound(format!("{} does not exist", self.path_in(parent, &name)))
        })?;
        if record.kind != AliasKind::Directory {
            return Err(GroupError::NotDirectory(format!(
                "{} is a file, not a directory",
                self.alias_path(&record)
            )));
        }
        self.check_empty(&record)?;
        self.remove_directory(record.id, dir_known);
        self.commit()
    }

    /// The alias id of the directory `path` names (0: the group's root).
    pub fn directory_of(&self, path: &crate::names::GroupPath) -> Result<u32, GroupError> {
        self.check_group(path)?;
        self.directory_id(path)
    }

    /// `cairn rm` of a group a file system serves: [`Self::remove`]'s rules
    /// (a file's own name takes the file and its aliases, an alias goes
    /// alone, a directory must be empty), with the file system's view of
    /// what is in use — a file it still has open keeps its data, a
    /// directory it knows keeps its id ([`Self::unlink_in`],
    /// [`Self::rmdir_in`]).
    pub fn remove_path(
        &mut self,
        path: &crate::names::GroupPath,
        is_open: &dyn Fn(u32, u32) -> bool,
        dir_known: &dyn Fn(u32) -> bool,
    ) -> Result<Retired, GroupError> {
        self.check_group(path)?;
        let (parent, name) = super::namespace::split(path)?;
        let dir = self.directory_id(&parent)?;
        let is_dir = self
            .child(dir, &name)
            .is_some_and(|r| r.kind == AliasKind::Directory);
        if is_dir {
            self.rmdir_in(dir, name.as_str(), dir_known)?;
            Ok(Retired::Nothing)
        } else {
            self.unlink_in(dir, name.as_str(), is_open)
        }
    }

    fn remove_directory(&mut self, id: u32, dir_known: &dyn Fn(u32) -> bool) {
        self.remove_alias(id);
        if dir_known(id) {
            self.names.hold(id);
        }
    }

    /// The file system's kernel let go of directory `id`, removed while it
    /// knew it: the id may name something new.
    pub fn release_alias_id(&mut self, id: u32) {
        self.names.release(id);
    }

    fn check_empty(&self, dir: &AliasRecord) -> Result<(), GroupError> {
        if self.names.has_children(dir.id) {
            return Err(GroupError::NotEmpty(format!(
                "directory {} is not empty; remove what is in it first",
                self.alias_path(dir)
            )));
        }
        Ok(())
    }

    /// Rename `name` in `parent` to `new_name` in `new_parent`, in one
    /// transaction: a name already there (a file, an alias, or an empty
    /// directory when a directory moves) is replaced — nobody ever finds
    /// neither — and a file it was the own name of goes as
    /// [`Self::unlink_in`] would take it. `no_replace`: refuse instead.
    pub fn rename_in(
        &mut self,
        (parent, name): (u32, &str),
        (new_parent, new_name): (u32, &str),
        no_replace: bool,
        is_open: &dyn Fn(u32, u32) -> bool,
        dir_known: &dyn Fn(u32) -> bool,
    ) -> Result<Retired, GroupError> {
        self.check_writable()?;
        let (name, found) = self.entry_in(parent, name)?;
        let (new_name, target) = self.entry_in(new_parent, new_name)?;
        let source = found.ok_or_else(|| {
            GroupError::NotFound(format!("{} does not exist", self.path_in(parent, &name)))
        })?;
        if source.kind == AliasKind::Directory {
            // Not into itself, nor anywhere below it.
            if self.names.is_within(new_parent, source.id) {
                return Err(GroupError::Invalid(format!(
                    "{} cannot move into itself",
                    self.alias_path(&source)
                )));
            }
        }
        let mut retired = None;
        if let Some(target) = target.filter(|t| t.id != source.id) {
            let same_file = source.kind != AliasKind::Directory
                && target.kind != AliasKind::Directory
                && source.file_number == target.file_number
                && source.file_incarnation == target.file_incarnation;
            if no_replace {
                return Err(GroupError::Exists(format!(
                    "{} already exists",
                    self.alias_path(&target)
                )));
            }
            if same_file {
                // Two names of one file: POSIX leaves both as they are.
                return Ok(Retired::Nothing);
            }
            match (source.kind, target.kind) {
                (AliasKind::Directory, AliasKind::Directory) => self.check_empty(&target)?,
                (AliasKind::Directory, _) => {
                    return Err(GroupError::NotDirectory(format!(
                        "{} is a file; a directory cannot replace it",
                        self.alias_path(&target)
                    )))
                }
                (_, AliasKind::Directory) => {
                    return Err(GroupError::IsDirectory(format!(
                        "{} is a directory; a file cannot replace it",
                        self.alias_path(&target)
                    )))
                }
                _ => {}
            }
            retired = Some(if target.kind == AliasKind::Directory {
                self.remove_directory(target.id, dir_known);
                Retiring::Nothing
            } else {
                self.retire_name(&target, is_open)
            });
        }
        // The move: the same record (its id, a directory's children, a
        // listing's place) under its new name.
        let moved = self.names.rename(source.id, new_parent, new_name.as_str());
        assert!(moved, "invariant: resolved above");
        self.txn.mark(Dirty::Alias(alias_block_of(source.id)));
        self.commit()?;
        match retired {
            Some(r) => self.finish_retired(r),
            None => Ok(Retired::Nothing),
        }
    }

    /// Take away name `record` (not a directory), in the running
    /// transaction: only that name, so that the transaction stays one step
    /// (a rename's move goes in it too). A file's own name marks its file
    /// for deletion, or, if the file system still uses it, leaves it with
    /// no name; the file's other names, and its space, go after the commit
    /// ([`Self::finish_retired`]).
    fn retire_name(
        &mut self,
        record: &AliasRecord,
        is_open: &dyn Fn(u32, u32) -> bool,
    ) -> Retiring {
        let number = record.file_number;
        let incarnation = record.file_incarnation;
        self.remove_alias(record.id);
        if record.kind == AliasKind::Alias {
            return Retiring::Nothing;
        }
        if self.live_file(record).is_none() {
            // Its file is gone (lost, or never there): only its names are
            // left (those of this incarnation), and a lost entry is written
            // free after them (`finish_retired`), as `remove` does.
            return Retiring::Names(number, incarnation);
        }
        if is_open(number, incarnation) {
            // A file with no name, as one being filled is: the next mount
            // that writes drops it if nobody does first.
            self.set_file_state(number, FileState::Creating);
            return Retiring::KeptOpen(number, incarnation);
        }
        self.set_file_state(number, FileState::Deleting);
        Retiring::Deleted(number, incarnation)
    }

    /// After the commit that took a file's name: its other names go (only
    /// this incarnation's: a stale alias of an older file that reused the
    /// number is not its), then, if it is not in use, its space.
    fn finish_retired(&mut self, retiring: Retiring) -> Result<Retired, GroupError> {
        Ok(match retiring {
            Retiring::Nothing => Retired::Nothing,
            Retiring::Names(number, incarnation) => {
                self.drop_names_of(number, Some(incarnation))?;
                self.free_lost_entry(number)?;
                self.commit()?;
                Retired::Nothing
            }
            Retiring::KeptOpen(number, incarnation) => {
                self.drop_names_of(number, Some(incarnation))?;
                self.commit()?;
                Retired::KeptOpen(number)
            }
            Retiring::Deleted(number, incarnation) => {
                self.drop_names_of(number, Some(incarnation))?;
                self.finish_delete(number)?;
                Retired::Deleted(number)
            }
        })
    }

    /// Drop file `number`, unlinked while open, now that nobody has it open.
    /// Nothing if it is gone already, or has a name again.
    pub fn drop_unnamed(&mut self, number: u32, incarnation: u32) -> Result<(), GroupError> {
        self.check_writable()?;
        match self.files.get(number).filter(|_| is_user_number(number)) {
            Some(f)
                if f.entry.incarnation == incarnation
                    && f.entry.state == FileState::Creating
                    && !self.is_named(number) =>
            {
                self.finish_delete(number)
            }
            _ => Ok(()),
        }
    }

    /// Change a file's mode, owner or times (its byte size goes through
    /// [`Self::set_byte_size`]); `now_ns` becomes its change time.
    pub fn set_file_attrs(
        &mut self,
        number: u32,
        change: AttrChange,
        now_ns: i64,
    ) -> Result<FileInfo, GroupError> {
        self.check_writable()?;
        self.check_changeable(number)?;
        self.use_file_attrs()?;
        let entry = self.files.entry_mut(number).expect("invariant: checked");
        let mut attrs = attrs_of(entry);
        if let Some(mode) = change.mode {
            attrs.mode = mode & MODE_BITS;
        }
        attrs.uid = change.uid.unwrap_or(attrs.uid);
        attrs.gid = change.gid.unwrap_or(attrs.gid);
        attrs.mtime_ns = change.mtime_ns.unwrap_or(attrs.mtime_ns);
        attrs.ctime_ns = now_ns;
        entry.attrs = Some(attrs);
        self.txn.mark(Dirty::Entry(number));
        self.commit()?;
        Ok(self.info(&self.files[&number]))
    }

    /// Change a directory's mode or owner.
    pub fn set_dir_attrs(&mut self, id: u32, change: AttrChange) -> Result<Node, GroupError> {
        self.check_writable()?;
        let Some(record) = self
            .names
            .get(id)
            .filter(|r| r.kind == AliasKind::Directory)
        else {
            return Err(GroupError::NotFound(format!(
                "directory {id} does not exist"
            )));
        };
        let mut attrs = record.dir_attrs.unwrap_or_default();
        self.use_file_attrs()?;
        if let Some(mode) = change.mode {
            attrs.mode = (mode & MODE_BITS) as u16;
        }
        attrs.uid = change.uid.unwrap_or(attrs.uid);
        attrs.gid = change.gid.unwrap_or(attrs.gid);
        let set = self.names.set_dir_attrs(id, attrs);
        assert!(set, "invariant: found above");
        self.txn.mark(Dirty::Alias(alias_block_of(id)));
        self.commit()?;
        self.node(id)
            .ok_or_else(|| GroupError::Corrupt(format!("directory {id} vanished")))
    }

    /// A file the file system may change: there, named or open, and not
    /// claiming another file's AUs.
    fn check_changeable(&self, number: u32) -> Result<(), GroupError> {
        match self.files.get(number) {
            Some(f)
                if is_user_number(number)
                    && matches!(f.entry.state, FileState::Active | FileState::Creating) =>
            {
                self.refuse_if_sharing(number)
            }
            _ => Err(GroupError::NotFound(format!(
                "file {number} does not exist"
            ))),
        }
    }

    /// Make file `number` `byte_size` bytes long (its sectors follow),
    /// setting its modification and change times to `now_ns`. What lies
    /// past the new end in its last sector must already read as zeros: a
    /// caller cutting a file to a size that is not whole sectors zeroes
    /// that tail through the data path first. With `grow_only`, a file
    /// already that long or longer is left as it is (a write past the end,
    /// racing another).
    pub fn set_byte_size(
        &mut self,
        number: u32,
        byte_size: u64,
        now_ns: i64,
        grow_only: bool,
    ) -> Result<FileInfo, GroupError> {
        self.check_writable()?;
        self.check_changeable(number)?;
        let sector = u64::from(self.sector_bytes);
        let sectors = byte_size
            .checked_next_multiple_of(sector)
            .ok_or_else(|| GroupError::Invalid(format!("size {byte_size} is too large")))?;
        let rec = &self.files[&number];
        let mut attrs = attrs_of(&rec.entry);
        if grow_only && attrs.byte_size >= byte_size {
            return Ok(self.info(rec));
        }
        self.use_file_attrs()?;
        let entry = self.files.entry_mut(number).expect("invariant: checked");
        if entry.attrs.is_none() {
            entry.attrs = Some(attrs);
        }
        if sectors != entry.size_bytes {
            self.resize_number(number, sectors, byte_size)?;
        }
        attrs = attrs_of(&self.files[&number].entry);
        attrs.byte_size = byte_size;
        attrs.mtime_ns = now_ns;
        attrs.ctime_ns = now_ns;
        let entry = self.files.entry_mut(number).expect("invariant: checked");
        entry.attrs = Some(attrs);
        self.txn.mark(Dirty::Entry(number));
        self.commit()?;
        Ok(self.info(&self.files[&number]))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use cairn_io::DeviceId;
    use cairn_io_sim::SimEngine;

    use super::*;
    use crate::group::error::GroupError;
    use crate::group::file_types::CreateOptions;
    use crate::group::mount::GroupSelector;
    use crate::group::mounted::Group;
    use crate::group::tests::group_on_sim;

    const MIB: u64 = 1 << 20;

    fn mount_rw<'e>(sim: &'e mut SimEngine, ids: &[DeviceId]) -> Result<Group<'e>, GroupError> {
        super::super::mount(sim, ids, &GroupSelector::Name("T".into())).map(|(g, _)| g)
    }

    fn attrs() -> FileAttrs {
        FileAttrs {
            mode: 0o600,
            uid: 26,
            gid: 26,
            mtime_ns: 5,
            ctime_ns: 5,
            byte_size: 0,
        }
    }

    /// A feature this code does not know: the group may be read, never
    /// written (an entry rewritten here would lose its fields). A group made
    /// before attributes existed mounts, and says it has them from the first
    /// one written.
    #[test]
    fn attributes_are_a_ro_compat_feature_old_groups_gain_and_unknown_ones_keep_a_group_read_only()
    {
        let (mut sim, ids) = group_on_sim();
        {
            let mut g = mount_rw(&mut sim, &ids).unwrap();
            assert_eq!(
                g.features.ro_compat & GROUP_RO_COMPAT_FILE_ATTRS,
                GROUP_RO_COMPAT_FILE_ATTRS,
                "new groups have it"
            );
            // As a group made before the feature.
            g.features.ro_compat = 0;
            g.write_superblocks().unwrap();
            g.dismount().unwrap();
        }
        {
            let mut g = mount_rw(&mut sim, &ids).unwrap();
            assert_eq!(g.features.ro_compat & GROUP_RO_COMPAT_FILE_ATTRS, 0);
            g.create_in(ROOT, "x.dbf", attrs(), &CreateOptions::default())
                .unwrap();
            assert_eq!(
                g.features.ro_compat & GROUP_RO_COMPAT_FILE_ATTRS,
                GROUP_RO_COMPAT_FILE_ATTRS
            );
            g.features.ro_compat |= 1 << 9;
            g.write_superblocks().unwrap();
            g.dismount().unwrap();
        }
        let Err(e) = mount_rw(&mut sim, &ids) else {
            panic!("a writing mount of a group with an unknown ro_compat feature");
        };
        assert!(
            matches!(&e, GroupError::Mount(m) if m.contains("ro_compat 0x200") && m.contains("read")),
            "{e}"
        );
        let (g, _) =
            super::super::mount_read_only(&mut sim, &ids, &GroupSelector::Name("T".into()))
                .unwrap();
        let info = g
            .open(&crate::names::GroupPath::parse("+T/x.dbf").unwrap())
            .unwrap();
        assert_eq!((info.attrs.mode, info.attrs.uid), (0o600, 26));
    }

    /// Byte sizes: the sectors follow, the byte size is kept in the same
    /// steps (no committed entry says more bytes than sectors), and a file
    /// unlinked while in use keeps its data, loses its names, and is
    /// dropped by the next mount that writes if nobody dropped it.
    #[test]
    fn byte_sizes_follow_and_an_unlinked_file_in_use_outlives_its_names_not_a_remount() {
        let (mut sim, ids) = group_on_sim();
        let number;
        let free_before;
        {
            let mut g = mount_rw(&mut sim, &ids).unwrap();
            let dir = g.mkdir_in(ROOT, "pg", DirAttrs::default()).unwrap();
            let f = g
                .create_in(dir.id, "base.1", attrs(), &CreateOptions::default())
                .unwrap();
            number = f.number;
            // (Metadata files grew for the names: that stays.)
            free_before = g.space().usable_file_mb;
            assert_eq!((f.size_bytes, f.attrs.byte_size), (0, 0));
            let f = g.set_byte_size(number, 3 * MIB + 5, 9, false).unwrap();
            assert_eq!(
                (f.size_bytes, f.attrs.byte_size),
                (3 * MIB + 4096, 3 * MIB + 5)
            );
            assert_eq!(f.attrs.mtime_ns, 9);
            let snap = g.data_plane().file(number).unwrap();
            assert_eq!(
                (snap.size_bytes, snap.byte_size),
                (3 * MIB + 4096, 3 * MIB + 5)
            );
            // Growing only: a smaller size leaves it.
            let f = g.set_byte_size(number, 100, 10, true).unwrap();
            assert_eq!(f.attrs.byte_size, 3 * MIB + 5);
            let f = g.set_byte_size(number, 4097, 11, false).unwrap();
            assert_eq!((f.size_bytes, f.attrs.byte_size), (8192, 4097));
            // Unlinked while in use.
            let retired = g.unlink_in(dir.id, "base.1", &|n, _| n == number).unwrap();
            assert_eq!(retired, Retired::KeptOpen(number));
            assert!(g.child_node(dir.id, "base.1").unwrap().is_none());
            assert!(g.data_plane().file(number).is_some(), "its data stay");
            g.rmdir_in(ROOT, "pg", &|_| false).unwrap();
            g.dismount().unwrap();
        }
        let g = mount_rw(&mut sim, &ids).unwrap();
        assert!(
            g.data_plane().file(number).is_none(),
            "dropped by the remount"
        );
        assert_eq!(g.space().usable_file_mb, free_before);
        g.check_writable().unwrap();
    }
}
