//! The metadata plane's own writes of file data: extents marked written
//! or unwritten again, and the range a grow exposes zeroed on every copy.
//! That zeroing is I/O made under `meta`, without the extents' latches
//! (docs/live-core.md, the table of what is shared): `parts/zeroings.rs`
//! counts such zeroings, so that a copy begun before one (a resync, a
//! relocation) is not trusted for that file.

use cairn_format::group::au_mask;
use cairn_io::{Op, Request};

use super::data::{self, StaleMark};
use super::error::GroupError;
use super::limits::STEP_DIRTY_MAX;
use super::mounted::Group;
use super::parts::members::Member;
use super::parts::txn::Dirty;

impl Group<'_> {
    /// Mark extents of a file initialised (or, `initialized` false,
    /// unwritten again: a punched hole), committing in steps of at most
    /// [`STEP_DIRTY_MAX`] dirty blocks (a big write first-writes more extents
    /// than one transaction can name). Each step's barrier flush makes the
    /// data and zeros written before it durable before its flags are; a crash
    /// between steps leaves some extents still reading as zeros, which a
    /// write that was never acknowledged may do.
    pub(super) fn set_initialized(
        &mut self,
        number: u32,
        extents: &[u64],
        initialized: bool,
    ) -> Result<(), GroupError> {
        for e in extents {
            let extent = self.files.extent_mut(number, None, *e);
            extent.expect("invariant: checked").initialized = initialized;
            self.dirty_extent(number, *e);
            if self.dirty_count() >= STEP_DIRTY_MAX {
                self.commit()?;
            }
        }
        let now = (self.clock)();
        let entry = self.files.entry_mut(number).expect("invariant: checked");
        entry.modified_unix_seconds = now;
        self.txn.mark(Dirty::Entry(number));
        self.commit()
    }

    /// Make a logical range read as zeros on every copy of the initialised
    /// extents it touches (uninitialised ones read as zeros already).
    pub(super) fn zero_range(
        &mut self,
        number: u32,
        offset: u64,
        len: u64,
    ) -> Result<(), GroupError> {
        // Copies made of this file's extents before now (a resync, a
        // relocation, which copy under latches this does not take) may
        // miss these zeros: they are not trusted (`Zeroings::since`).
        self.zeroings.zeroing(number);
        let mut requests = Vec::new();
        let mut disks = Vec::new();
        let layout = self.layout_for(&self.files[&number]);
        let mut done = 0u64;
        while done < len {
            let loc = layout.locate(offset + done);
            let (extent, within, run) = (
                loc.extent,
                loc.offset_in_extent,
                loc.run_bytes.min(len - done),
            );
            done += run;
            let ext = self.files[&number].extents[extent as usize];
            if !ext.initialized {
                continue;
            }
            let incarnation = self.files[&number].entry.incarnation;
            for c in ext.copies() {
                let Some(device) = self.member(c.disk).and_then(Member::writable) else {
                    // It misses the zeros: stale there, in this transaction.
                    let aus = data::aus_touched(self.au_bytes, within, run);
                    self.set_stale(
                        number,
                        incarnation,
                        &[StaleMark {
                            extent,
                            copy: *c,
                            mask: au_mask(aus),
                        }],
                    );
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

    /// Make every extent of file `number` initialised, zeroing on every copy
    /// the ones never written, so that direct reads of them return what the
    /// group would (zeros) and not an earlier file's bytes. Returns how many
    /// extents it zeroed. For a caller about to read all of it.
    pub fn initialize_file(&mut self, number: u32) -> Result<u64, GroupError> {
        self.check_writable()?;
        self.refuse_if_live()?;
        data::initialize(self, None, number)
    }
}
