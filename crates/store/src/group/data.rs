//! The data path: a write goes to every online copy and is acknowledged when all
//! have completed; durability is [`Group::sync`]'s job, as `fsync` is a file's. A
//! read goes to the primary and falls back copy by copy on an I/O error or when
//! the caller's check rejects the bytes; a copy that failed is rewritten from the
//! one that passed. An extent never written reads as zeros without I/O; the first
//! write zeroes the rest of its AUs and only then marks it initialised.

use super::*;
use crate::placement::{FileLayout, Striping};
use cairn_format::group::{AuAddr, Extent, FileState};
use cairn_io::{AlignedBuf, Op, Request};

impl Group<'_> {
    // -----------------------------------------------------------------------
    // Data path

    pub(super) fn check_io(&self, number: u32, offset: u64, len: u64) -> Result<(), GroupError> {
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
    pub(super) fn pieces(&self, number: u32, offset: u64, len: u64) -> Vec<(u64, u64, usize, u64)> {
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
    pub(super) fn mark_initialized(
        &mut self,
        number: u32,
        extents: &[u64],
    ) -> Result<(), GroupError> {
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
    pub(super) fn fail_if_no_copy(
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
    pub(super) fn zero_range(
        &mut self,
        number: u32,
        offset: u64,
        len: u64,
    ) -> Result<(), GroupError> {
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

    pub(super) fn zero_extent(&mut self, number: u32, extent: u64) -> Result<(), GroupError> {
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
    pub(super) fn online_copies(&self, ext: &Extent) -> Vec<AuAddr> {
        ext.copies()
            .iter()
            .copied()
            .filter(|c| self.member(c.disk).and_then(Member::online).is_some())
            .collect()
    }

    /// Read every piece for `attempt`. `Ok(false)`: nothing new to try (a
    /// piece has no online copy, or every piece has fewer online copies).
    pub(super) fn read_attempt(
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
    pub(super) fn rewrite_attempts(
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
