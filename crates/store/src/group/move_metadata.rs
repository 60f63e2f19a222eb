//! Moving metadata in a rebalance (a metadata file's extent, or a file's
//! indirect AU): under the metadata lock, where all metadata I/O happens —
//! checkpoint, copy, switch, commit, checkpoint. Called by the run of
//! the moves (`move_run.rs`) before any data moves.

use cairn_format::group::{AuAddr, Extent, FILE_CHECKSUM_LOG, FILE_DIRECTORY, FILE_JOURNAL};

use super::error::GroupError;
use super::mounted::Group;
use super::move_plan::{RebalanceReport, INDIRECT_INDEX};
use super::parts::members::Member;
use super::parts::txn::Dirty;
use super::resync::RESYNC_IO_BYTES_MAX;
use crate::rebalance::{self, Pass};

impl Group<'_> {
    /// Move one metadata extent copy (a metadata file's extent, or a file's
    /// indirect AU) under the metadata lock: checkpoint, copy, switch in a
    /// commit whose barrier flushes the copy, checkpoint. The file
    /// directory's first extent is also named by the superblocks, written
    /// last; mount finishes a move a crash cut between the two.
    pub(super) fn move_metadata(
        &mut self,
        m: &rebalance::Move,
        report: &mut RebalanceReport,
    ) -> Result<(), GroupError> {
        let indirect = m.index & INDIRECT_INDEX != 0;
        let index = m.index & !INDIRECT_INDEX;
        let Some(rec) = self.files.get(m.file) else {
            return Ok(());
        };
        let ext = if indirect {
            rec.entry.indirect.get(index as usize).copied()
        } else {
            rec.extents.get(index as usize).copied()
        };
        let Some(ext) = ext else {
            return Ok(());
        };
        let Some(from) = ext.copies().iter().find(|c| c.disk == m.from).copied() else {
            return Ok(());
        };
        let what = format!("metadata of file {} ({:#x})", m.file, m.index);
        // The copies stay in distinct failure groups, whatever became of
        // the moves before this one.
        let to_fg = self.member(m.to).map(|t| t.entry.failgroup_id);
        let clash = ext
            .copies()
            .iter()
            .filter(|c| **c != from)
            .any(|c| self.member(c.disk).map(|x| x.entry.failgroup_id) == to_fg);
        if clash || self.member(m.to).and_then(Member::writable).is_none() {
            report.moves_left.push(format!(
                "{what}: disk {} {}",
                self.disk_name(m.to),
                if clash {
                    "is in the failure group of another copy now"
                } else {
                    "is not in service"
                }
            ));
            return Ok(());
        }
        // Sources: the leaving copy while it can be read, else the others.
        let mut sources: Vec<AuAddr> = Vec::new();
        if self.member(from.disk).and_then(Member::online).is_some() && !self.is_forced(from.disk) {
            sources.push(from);
        }
        sources.extend(
            ext.copies()
                .iter()
                .filter(|c| **c != from && self.member(c.disk).and_then(Member::online).is_some()),
        );
        let Some(to_au) = self
            .member_mut(m.to)
            .and_then(|t| t.alloc.as_mut())
            .and_then(|a| a.reserve(m.aus))
        else {
            report.moves_left.push(format!(
                "{what}: no run of {} free AUs on disk {}",
                m.aus,
                self.disk_name(m.to)
            ));
            return Ok(());
        };
        let to = AuAddr {
            disk: m.to,
            au: to_au,
        };
        let unreserve = |g: &mut Self| g.unreserve_run(to, m.aus);
        if let Err(e) = self.save_mark_clears() {
            unreserve(self);
            return Err(e);
        }
        // Everything journaled is in place first: the copy takes what the
        // AU holds, and no record before this point needs replaying there.
        if let Err(e) = self.checkpoint() {
            unreserve(self);
            return Err(e);
        }
        // The checksum log's ring is written by the data path, not under
        // `meta`: its writer is held from the copy to the switch's commit
        // (which tells the log the new place), so no record lands on the
        // old place after the copy took it.
        let log = self.plane.sums_log().clone();
        let fence = (m.file == FILE_CHECKSUM_LOG && !indirect).then(|| log.lock());
        if !self.copy_metadata(&sources, to, m.aus, &what, report)? {
            return Ok(());
        }
        if !self.switch_metadata(m, (indirect, index), from, to)? {
            return Ok(());
        }
        if fence.is_some() {
            // Committed (and the log told the new place) before the writer
            // may write again: behind a live group a step's commit waits.
            self.commit_now()?;
        }
        drop(fence);
        report.metadata_moves += 1;
        report.moves_done += 1;
        report.aus_moved += m.aus;
        if m.pass == Pass::Rebuild {
            report.copies_rebuilt += 1;
        }
        Ok(())
    }

    /// Copy a metadata extent's `aus` AUs from the first of `sources` that
    /// can be read to `to` (reserved), and make the copy durable. `false`:
    /// the move is left (`what`, and why, in the report), `to` let go.
    fn copy_metadata(
        &mut self,
        sources: &[AuAddr],
        to: AuAddr,
        aus: u64,
        what: &str,
        report: &mut RebalanceReport,
    ) -> Result<bool, GroupError> {
        let unreserve = |g: &mut Self| g.unreserve_run(to, aus);
        let bytes = aus * self.au_bytes;
        let mut copied = false;
        for src in sources {
            let (Some(sd), Some(td)) = (
                self.member(src.disk).and_then(|x| x.device),
                self.member(to.disk).and_then(Member::writable),
            ) else {
                continue;
            };
            let mut ok = true;
            let mut off = 0;
            while off < bytes && ok {
                let len = RESYNC_IO_BYTES_MAX.min(bytes - off);
                let buf = match self.engine.read_at(
                    sd,
                    u64::from(src.au) * self.au_bytes + off,
                    len as usize,
                ) {
                    Ok(b) => b,
                    Err(_) => {
                        ok = false;
                        break;
                    }
                };
                if self
                    .engine
                    .write_at(td, u64::from(to.au) * self.au_bytes + off, buf, false)
                    .is_err()
                {
                    unreserve(self);
                    self.failed_disks.insert(to.disk);
                    self.offline_failed()?;
                    report.moves_left.push(format!(
                        "{what}: the write to disk {} failed",
                        self.disk_name(to.disk)
                    ));
                    return Ok(false);
                }
                report.bytes_copied += len;
                off += len;
            }
            // Durable before anything names it (the superblocks may, for
            // the file directory's first extent, before the commit does).
            if ok && self.engine.flush(td).is_err() {
                unreserve(self);
                self.failed_disks.insert(to.disk);
                self.offline_failed()?;
                report.moves_left.push(format!(
                    "{what}: the flush of disk {} failed",
                    self.disk_name(to.disk)
                ));
                return Ok(false);
            }
            if ok {
                copied = true;
                break;
            }
        }
        if !copied {
            unreserve(self);
            report
                .moves_left
                .push(format!("{what}: no copy of it could be read"));
        }
        Ok(copied)
    }

    /// Switch the copy of metadata extent `index` (`indirect`: an indirect
    /// AU) of `m`'s file from `from` to `to`, copied, in a commit; the
    /// superblocks first where they name it. `false`: the copy is no longer
    /// there, `to` let go.
    fn switch_metadata(
        &mut self,
        m: &rebalance::Move,
        (indirect, index): (bool, u64),
        from: AuAddr,
        to: AuAddr,
    ) -> Result<bool, GroupError> {
        let unreserve = |g: &mut Self| g.unreserve_run(to, m.aus);
        let e = if indirect {
            self.files.indirect_mut(m.file, index)
        } else {
            self.files.extent_mut(m.file, None, index)
        };
        let e = e.expect("invariant: found above");
        let Some(slot) = e.copies().iter().position(|c| *c == from) else {
            unreserve(self);
            return Ok(false);
        };
        e.copies[slot] = to;
        e.stale[slot] = 0;
        let initialized = e.initialized;
        let claimed = self
            .member_mut(to.disk)
            .and_then(|t| t.alloc.as_mut())
            .is_some_and(|a| a.claim(to.au, m.aus as u32));
        assert!(claimed, "invariant: reserved under this metadata lock");
        if indirect {
            self.txn.mark(Dirty::Entry(m.file));
        } else {
            self.dirty_extent(m.file, index);
        }
        if self.is_forced(from.disk) {
            // Nothing is freed on a disk dropped by force, but the file
            // no longer claims the run there.
            let au = u64::from(from.au);
            self.damage.release(from.disk, au..au + m.aus, m.file);
        } else {
            let gone = Extent::new(&[from], initialized);
            // Journaled metadata: the ring may hold records that target it.
            self.free_extent(m.file, &gone, if indirect { 0 } else { index }, true);
        }
        self.depend_on(to.disk);
        // The file directory's first extent is named by the superblocks
        // too, and they are what mount reads it through: they name the new
        // place first (the copy is durable, and holds everything up to the
        // checkpoint above). A crash before the commit below leaves the
        // directory's own entry naming the old place: mount adopts the
        // superblocks' (`adopt_directory_bootstrap`).
        // The journal's map is named by the superblocks as well, for the
        // same reason: its entry's in-place write may be torn by a crash,
        // and only the journal can repair it.
        if (m.file == FILE_DIRECTORY && !indirect && index == 0)
            || (m.file == FILE_JOURNAL && !indirect)
        {
            self.superblocks_or_stop()?;
        }
        self.commit()?;
        self.checkpoint()?;
        Ok(true)
    }
}
