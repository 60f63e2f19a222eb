//! Publication: the metadata plane hands the data plane new snapshots of
//! the files a commit changed, and of the disks (`plane.rs`).

use cairn_format::group::FileState;

use super::error::GroupError;
use super::mounted::Group;
use super::parts::members::Member;
use super::plane::{FileSnapshot, NotWritable};

impl Group<'_> {
    /// Publish the files the last commit changed.
    pub(super) fn publish_changed(&mut self) {
        for number in self.unpublished.take_files() {
            self.publish_file(number);
        }
        if self.unpublished.take_log() {
            self.publish_log();
        }
    }

    /// Publish a file's snapshot as memory has it (or withdraw it: gone, or
    /// being deleted), sharing the chunks that did not change.
    pub(super) fn publish_file(&mut self, number: u32) {
        let changed = self.unpublished.take_chunks(number);
        let snapshot = self
            .files
            .get(number)
            .filter(|r| r.entry.state != FileState::Deleting)
            .map(|rec| {
                let previous = self.plane.file(number);
                let mut snap = FileSnapshot::build(
                    number,
                    rec.entry.incarnation,
                    rec.entry.size_bytes,
                    self.layout_for(rec),
                    self.sector_bytes,
                    rec.entry.copies,
                    self.not_writable(number),
                    &rec.extents,
                    previous.as_deref().map(|p| (p, &changed)),
                );
                snap.byte_size = super::namespace::attrs_of(&rec.entry).byte_size;
                snap.has_map = cairn_format::group::is_user_number(number)
                    && self
                        .files
                        .get(cairn_format::group::map_number(number))
                        .is_some();
                snap
            });
        self.plane.publish_file(number, snapshot);
    }

    /// Publish every user file, every checksum map and the disk view
    /// (mount, create).
    pub(super) fn publish_all(&mut self) {
        self.plane.clear_files();
        let numbers = self.files.data_and_map_numbers();
        self.unpublished.clear();
        for n in numbers {
            self.publish_file(n);
        }
        self.publish_log();
        self.publish_disks();
    }

    /// Publish which disks data I/O may use.
    pub(super) fn publish_disks(&self) {
        let online = self
            .members
            .numbers()
            .map(|d| self.member(d).and_then(Member::online).is_some())
            .collect();
        let writable = self
            .members
            .numbers()
            .map(|d| self.member(d).and_then(Member::writable).is_some())
            .collect();
        let member = self
            .members
            .numbers()
            .map(|d| self.member(d).is_some())
            .collect();
        let devices = self
            .members
            .numbers()
            .map(|d| self.member(d).and_then(|m| m.device))
            .collect();
        let names = self.members.numbers().map(|d| self.disk_name(d)).collect();
        self.plane
            .publish_disks(online, writable, member, devices, names);
    }

    /// Why a file may not be written, if it may not.
    fn not_writable(&self, number: u32) -> Option<NotWritable> {
        match self.refuse_if_sharing(number) {
            Ok(()) => None,
            Err(GroupError::Lost(m)) => Some(NotWritable::Lost(m)),
            Err(e) => Some(NotWritable::Shared(e.to_string())),
        }
    }
}
