//! What holds after every operation that succeeded: each part's own
//! invariants (`parts/`) and those across parts.

use cairn_format::group::{mapped_file, FileState};

use super::check::CheckReport;
use super::mounted::Group;
use super::parts::damage::LostBlock;
use super::parts::txn::Dirty;
use super::parts::Violations;

impl Group<'_> {
    /// What must hold after every operation that succeeded (one that
    /// failed may leave marks and barrier disks for the next commit), part
    /// by part and across them; the crash and interleaving simulators call
    /// it after every step (behind a live group: under `meta`, between two
    /// steps). Memory only, no I/O; linear in the names, files and AUs in
    /// use. A stopped group's memory may be ahead of what it published, and
    /// a read-only mount's reasons for the changes it found are never
    /// written: those checks are left out there.
    ///
    /// Each part's own: [`NameTable::check_invariants`](super::parts::names::NameTable::check_invariants),
    /// [`FileTable::check_invariants`](super::parts::files::FileTable::check_invariants),
    /// [`Damage::check_invariants`](super::parts::damage::Damage::check_invariants),
    /// [`Zeroings::check_invariants`](super::parts::zeroings::Zeroings::check_invariants),
    /// [`Settings::check_invariants`](super::parts::settings::Settings::check_invariants),
    /// [`Members::check_invariants`](super::parts::members::Members::check_invariants),
    /// [`JournalRing::check_invariants`](super::parts::journal_ring::JournalRing::check_invariants),
    /// [`Txn::check_invariants`](super::parts::txn::Txn::check_invariants),
    /// [`StateLog::check_invariants`](super::parts::state_log::StateLog::check_invariants),
    /// [`Unpublished::check_invariants`](super::parts::unpublished::Unpublished::check_invariants). Across parts:
    /// - checksum maps: a map's data file is there (or its entry is lost),
    ///   and a settled map holds its file's checksums, no more;
    /// - damage: a cut map is a file's, a lost entry's number has no file,
    ///   an AU claimed twice is claimed by files;
    /// - the state log: the directory it finds changes against is the one
    ///   the superblocks last recorded;
    /// - the barrier: at rest, a writable disk waits for it only with
    ///   discard-map marks for the next transaction to record (one taken
    ///   offline since keeps its place, and the flush skips it);
    /// - allocation: every AU a file's copy occupies lies in its disk's
    ///   data AUs, on a disk of the group, no two copies of an extent in
    ///   one failure group, no AU owned twice (unless the mount found
    ///   damage that did it, which it reports), and on an online disk the
    ///   table marks it used — what `check` verifies, from the same audit;
    /// - publication: every user file the running transaction has not
    ///   changed is published as memory has it (incarnation, size, copies
    ///   and every extent); a file being deleted or gone is not published.
    pub fn check_invariants(&self) -> Result<(), Violations> {
        let mut out = Violations::default();
        self.names.check_invariants(&mut out);
        self.damage.check_invariants(&mut out);
        self.zeroings.check_invariants(&mut out);
        self.settings.check_invariants(&mut out);
        self.check_damage(&mut out);
        self.check_checksum_maps(&mut out);
        self.files
            .check_invariants(self.poisoned.is_none(), &mut out);
        self.members.check_invariants(&mut out);
        self.journal.check_invariants(&mut out);
        let at_rest = !self.live && self.poisoned.is_none();
        self.txn.check_invariants(at_rest, &mut out);
        self.unpublished.check_invariants(at_rest, &mut out);
        if at_rest {
            self.check_barrier(&mut out);
        }
        self.states
            .check_invariants(self.poisoned.is_none() && !self.read_only, &mut out);
        if let Some((_, entries)) = &self.written_super {
            out.check(self.states.records(entries), || {
                "the disk directory last written is not the one state changes are found against"
                    .to_string()
            });
        }
        self.check_allocation(&mut out);
        if self.poisoned.is_none() {
            self.check_publication(&mut out);
        }
        if out.is_empty() {
            Ok(())
        } else {
            Err(out)
        }
    }

    /// At rest, a disk waits for the barrier only for what the next
    /// transaction will record of it: discard-map marks of discards done
    /// after the last commit.
    fn check_barrier(&self, out: &mut Violations) {
        for disk in self.txn.barrier() {
            let Some(member) = self.member(*disk).filter(|m| m.writable().is_some()) else {
                continue;
            };
            let marks = member.alloc.as_ref().map_or(0, |a| a.clean_dirty());
            out.check(marks > 0, || {
                format!("disk {disk} waits for a barrier, with nothing of it to record")
            });
        }
    }

    fn check_checksum_maps(&self, out: &mut Violations) {
        for (number, map) in self.files.maps() {
            let file = mapped_file(*number);
            let Some(data) = self.files.get(file) else {
                out.check(self.damage.is_lost(LostBlock::Entry(file)), || {
                    format!("checksum map {number} has no file {file}")
                });
                continue;
            };
            // A cut map (the file's or the checksum map's) is settled by
            // `check --repair`.
            let cut = [file, *number]
                .iter()
                .any(|n| self.damage.is_lost(LostBlock::Map(*n)));
            let settled = self.poisoned.is_none()
                && !cut
                && map.entry.state == FileState::Active
                && data.entry.state == FileState::Active;
            let bytes = self.map_bytes(data.entry.size_bytes);
            out.check(!settled || map.entry.size_bytes == bytes, || {
                format!(
                    "the checksum map of file {file} has {} bytes; its {} bytes need {bytes}",
                    map.entry.size_bytes, data.entry.size_bytes
                )
            });
        }
    }

    fn check_damage(&self, out: &mut Violations) {
        for (block, _) in self.damage.lost() {
            match *block {
                LostBlock::Map(n) => out.check(self.files.contains(n), || {
                    format!("file {n}'s map is listed as cut, and there is no file {n}")
                }),
                LostBlock::Entry(n) => out.check(!self.files.contains(n), || {
                    format!("file {n}'s entry is listed as lost, and file {n} is there")
                }),
                _ => {}
            }
        }
        for ((disk, au), owners) in self.damage.shared() {
            for o in owners {
                out.check(self.files.contains(*o), || {
                    format!(
                        "AU {au} of disk {disk} is listed as claimed by file {o}, which is gone"
                    )
                });
            }
        }
    }

    fn check_allocation(&self, out: &mut Violations) {
        let (owner, problems) = self.audit_ownership(&mut CheckReport::default());
        for p in problems {
            let twice = p.what.starts_with("owned twice");
            out.check(twice && self.damage.has_shared(), || {
                format!("{}: {}", p.location, p.what)
            });
        }
        for ((disk, au), run) in &owner {
            let Some(alloc) = self
                .member(*disk)
                .filter(|m| m.online().is_some())
                .and_then(|m| m.alloc.as_ref())
            else {
                continue;
            };
            out.check(alloc.is_used(*au), || {
                format!(
                    "{} occupies AU {au} of disk {disk}, which its table marks free",
                    run.describe()
                )
            });
        }
    }

    fn check_publication(&self, out: &mut Violations) {
        let pending = |n: u32| self.unpublished.waits(n) || self.txn.is_dirty(&Dirty::Entry(n));
        for (number, rec) in self.files.data_and_maps() {
            if pending(*number) {
                continue;
            }
            let published = self.plane.file(*number);
            if rec.entry.state == FileState::Deleting {
                out.check(published.is_none(), || {
                    format!("file {number} is being deleted and still published")
                });
                continue;
            }
            let Some(snap) = published else {
                out.check(false, || format!("file {number} is not published"));
                continue;
            };
            out.check(
                snap.incarnation == rec.entry.incarnation
                    && snap.size_bytes == rec.entry.size_bytes
                    && snap.copies == rec.entry.copies,
                || {
                    format!(
                        "file {number} is published as incarnation {} of {} bytes, {} copies; memory has {} of {} bytes, {} copies",
                        snap.incarnation, snap.size_bytes, snap.copies,
                        rec.entry.incarnation, rec.entry.size_bytes, rec.entry.copies
                    )
                },
            );
            let map = cairn_format::group::map_number(*number);
            let has_map =
                cairn_format::group::is_user_number(*number) && self.files.get(map).is_some();
            out.check(snap.has_map == has_map || pending(map), || {
                format!(
                    "file {number} is published as having a checksum map: {}; memory: {has_map}",
                    snap.has_map
                )
            });
            let same = snap.extent_count() == rec.extents.len()
                && snap.extents().zip(&rec.extents).all(|(a, b)| a == b);
            out.check(same, || {
                let first = snap
                    .extents()
                    .zip(&rec.extents)
                    .position(|(a, b)| a != b)
                    .unwrap_or(snap.extent_count().min(rec.extents.len()));
                format!(
                    "file {number} is published with {} extents and memory has {}; they differ from extent {first}",
                    snap.extent_count(),
                    rec.extents.len()
                )
            });
        }
        for number in self.plane.file_numbers() {
            out.check(self.files.contains(number) || pending(number), || {
                format!("file {number} is published but does not exist")
            });
        }
    }
}
