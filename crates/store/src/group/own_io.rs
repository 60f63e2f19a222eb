//! The group's own single-threaded data calls ([`Group::read`],
//! [`Group::write`]) and the data port they run through: the metadata
//! plane's engine, and the group itself for what only it may change.

use std::collections::BTreeSet;
use std::sync::Arc;

use cairn_format::group::Extent;
use cairn_io::{DeviceId, IoEngine};

use super::data::{self, DataPort, FailedDisks, StaleMark};
use super::error::GroupError;
use super::mounted::Group;
use super::parts::members::Member;
use super::plane::DataPlane;

impl DataPort for Group<'_> {
    fn plane(&self) -> &Arc<DataPlane> {
        &self.plane
    }
    fn engine(&mut self) -> &mut dyn IoEngine {
        &mut *self.engine
    }
    fn device(&self, disk: u16) -> Option<DeviceId> {
        self.member(disk).and_then(Member::writable)
    }
    fn may_write(&self) -> bool {
        !self.read_only
    }
    fn checkpoint_maps(&mut self) -> Result<(), GroupError> {
        Group::checkpoint_maps(self)
    }
    fn wrote(&mut self, disk: u16) {
        if let Some(m) = self.member_mut(disk) {
            m.needs_flush = true;
        }
    }
    fn mark_initialized(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, Extent)],
        written: &BTreeSet<u16>,
    ) -> Result<(), GroupError> {
        self.check_writable()?;
        for disk in written {
            self.depend_on(*disk);
        }
        let extents = self.extents_still(file, incarnation, extents, |_| true)?;
        Group::set_initialized(self, file, &extents, true)
    }
    fn mark_unwritten(
        &mut self,
        file: u32,
        incarnation: u32,
        extents: &[(u64, Extent)],
    ) -> Result<Vec<u64>, GroupError> {
        self.check_writable()?;
        let extents = self.extents_still(file, incarnation, extents, |now| now.initialized)?;
        if !extents.is_empty() {
            Group::set_initialized(self, file, &extents, false)?;
        }
        Ok(extents)
    }
    fn mark_stale(
        &mut self,
        file: u32,
        incarnation: u32,
        marks: &[StaleMark],
    ) -> Result<(), GroupError> {
        self.check_writable()?;
        self.set_stale_in_steps(file, incarnation, marks)?;
        self.commit()
    }
    fn missed_writes(&mut self, disks: &BTreeSet<u16>) {
        if self.poisoned.is_some() && !self.read_only {
            self.record_missed_writes(disks);
        }
    }
    fn disks_failed(&mut self, disks: &FailedDisks, _epoch: u64) -> Result<(), GroupError> {
        self.check_usable()?;
        // A disk another thread's report took offline already is done: the
        // write that saw it fail skipped no copy anyone will read.
        let still: Vec<(u16, &String)> = disks
            .iter()
            .filter(|(d, _)| self.member(**d).and_then(Member::writable).is_some())
            .map(|(d, why)| (*d, why))
            .collect();
        if still.is_empty() {
            return Ok(());
        }
        for (d, why) in still {
            self.note_failure_why(d, why);
            self.failed_disks.insert(d);
        }
        self.offline_failed()
    }
}

impl Group<'_> {
    // -----------------------------------------------------------------------
    // Data path

    /// Write `data` at `offset` of file `number` to every online copy.
    pub fn write(&mut self, number: u32, offset: u64, data: &[u8]) -> Result<(), GroupError> {
        self.check_writable()?;
        self.refuse_if_live()?;
        data::write(self, None, number, offset, data)
    }

    /// A live group's data goes through data handles: the group's own data
    /// calls run under the metadata lock, and a data path there would take
    /// latches after that lock (the order is latch, then lock).
    pub(super) fn refuse_if_live(&self) -> Result<(), GroupError> {
        if self.live {
            return Err(GroupError::Invalid(
                "this group is live: read and write its files through a data handle".into(),
            ));
        }
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
        self.refuse_if_live()?;
        data::read(self, None, number, offset, buf, accept, None)?;
        if self.read_only {
            return Ok(());
        }
        self.offline_failed()
    }

    // -----------------------------------------------------------------------
    // What the data plane sees

    /// The data plane this group publishes to: data handles read and write
    /// through it (`live/handle.rs`).
    pub fn data_plane(&self) -> &Arc<DataPlane> {
        &self.plane
    }

    /// The AUs holding a file's indirect extent blocks (one extent per AU,
    /// each with its copies), for the checker and tests.
    pub fn indirect_aus(&self, number: u32) -> Option<&[Extent]> {
        self.files.get(number).map(|f| &f.entry.indirect[..])
    }

    /// Extents of a file (copies and initialised flag), for the checker and tests.
    pub fn extents(&self, number: u32) -> Option<&[Extent]> {
        self.files.get(number).map(|f| &f.extents[..])
    }
}
