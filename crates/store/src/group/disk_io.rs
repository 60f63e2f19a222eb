//! Raw I/O across the member disks for the metadata plane: writes and
//! flushes fanned out over disks, and reading a mirrored metadata block
//! (the newest valid copy wins; bad, blank and older copies are rewritten).

use std::collections::BTreeSet;

use cairn_format::meta;
use cairn_format::meta::{Block, BlockId, MetaError, BLOCK_BYTES};
use cairn_io::{AlignedBuf, DeviceId, IoError, Op, Request};

use super::error::{io_err, GroupError};
use super::mounted::Group;
use super::parts::members::Member;

/// Whether a read's error means its disk failed, not one place on it:
///
/// - it came back short, or ran past the device's end. The device is no
///   longer the size the group recorded (a file truncated under it, a LUN
///   shrunk), so what lay past its new end is gone, as if the disk had
///   failed; and rewriting a copy there from a good one (what a read error
///   at one place gets) would extend a file with a hole that reads back as
///   zeros;
/// - it did not answer within the group's `disk_io_timeout`: the disk
///   hangs, and a rewrite would only wait as long again.
///
/// The disk goes offline instead, as any disk that failed does.
pub(super) fn read_fails_the_disk(error: &IoError) -> bool {
    matches!(
        error,
        IoError::ShortTransfer {
            kind: cairn_io::OpKind::Read,
            ..
        } | IoError::OutOfRange {
            kind: cairn_io::OpKind::Read,
            ..
        } | IoError::TimedOut { .. }
    )
}

impl Group<'_> {
    /// Run writes (disk, offset, buffer) concurrently. Returns the disks whose
    /// writes failed; writes to offline disks are skipped.
    pub(super) fn write_many(
        &mut self,
        writes: Vec<(u16, u64, AlignedBuf)>,
    ) -> Result<Vec<u16>, GroupError> {
        assert!(
            !self.read_only || writes.is_empty(),
            "invariant: a read-only mount never writes"
        );
        let mut requests = Vec::with_capacity(writes.len());
        let mut disk_of = Vec::with_capacity(writes.len());
        for (disk, offset_bytes, buf) in writes {
            let Some(device) = self.member(disk).and_then(Member::writable) else {
                continue;
            };
            disk_of.push(disk);
            requests.push(Request {
                device,
                tag: requests.len() as u64,
                op: Op::Write {
                    offset_bytes,
                    buf,
                    fua: false,
                },
            });
        }
        let completions = self
            .engine
            .execute_all(requests)
            .map_err(io_err("(engine)"))?;
        let mut failed = BTreeSet::new();
        for (completion, disk) in completions.into_iter().zip(disk_of) {
            match completion.result {
                Ok(_) => {
                    if let Some(m) = self.member_mut(disk) {
                        m.needs_flush = true;
                    }
                }
                Err(e) => {
                    self.note_failure(disk, &e);
                    failed.insert(disk);
                }
            }
        }
        Ok(failed.into_iter().collect())
    }

    /// Data or zeros were written to `disk` for the running transaction:
    /// its barrier flushes the disk before its record is written.
    pub(super) fn depend_on(&mut self, disk: u16) {
        if let Some(m) = self.member_mut(disk) {
            m.needs_flush = true;
            self.txn.flush_before_record(disk);
        }
    }

    /// Flush the given disks (all online ones that need it when `None`).
    pub(super) fn flush_disks(
        &mut self,
        only: Option<&BTreeSet<u16>>,
    ) -> Result<Vec<u16>, GroupError> {
        let mut wanted = Vec::new();
        for m in self.members.iter() {
            let Some(device) = m.writable() else { continue };
            let n = m.entry.number;
            let flush = match only {
                Some(set) => set.contains(&n),
                None => m.needs_flush,
            };
            if flush {
                wanted.push((n, device));
            }
        }
        self.flush_devices(wanted)
    }

    /// Flush each (disk, device) given, whatever the disk's state (a disk
    /// just taken offline is flushed once more); returns the disks whose
    /// flush failed.
    pub(super) fn flush_devices(
        &mut self,
        disks: Vec<(u16, DeviceId)>,
    ) -> Result<Vec<u16>, GroupError> {
        let mut requests = Vec::new();
        let mut disk_of = Vec::new();
        for (n, device) in disks {
            disk_of.push(n);
            requests.push(Request {
                device,
                tag: requests.len() as u64,
                op: Op::Flush,
            });
        }
        let completions = self
            .engine
            .execute_all(requests)
            .map_err(io_err("(engine)"))?;
        let mut failed = Vec::new();
        for (completion, disk) in completions.into_iter().zip(disk_of) {
            match completion.result {
                Ok(_) => {
                    if let Some(m) = self.member_mut(disk) {
                        m.needs_flush = false;
                    }
                }
                Err(e) => {
                    self.note_failure(disk, &e);
                    failed.push(disk);
                }
            }
        }
        Ok(failed)
    }

    pub(super) fn read_one(
        &mut self,
        disk: u16,
        offset_bytes: u64,
        len: usize,
    ) -> Result<AlignedBuf, IoError> {
        let device = self
            .member(disk)
            .and_then(Member::online)
            .ok_or(IoError::UnknownDevice(DeviceId(u32::from(disk))))?;
        let mut buf = match self.engine.read_at(device, offset_bytes, len) {
            Ok(buf) => buf,
            Err(e) => {
                // Noted here, where every metadata read passes: the step's
                // end takes the disk offline (a reader writes nothing).
                if read_fails_the_disk(&e) && !self.read_only {
                    self.note_failure(disk, &e);
                    self.failed_disks.insert(disk);
                }
                return Err(e);
            }
        };
        // Blocks start at 4 KiB multiples: look back one block for an image
        // that begins before the range.
        let from = offset_bytes.saturating_sub(BLOCK_BYTES as u64 - 1);
        for ((_, at), image) in self
            .overlay
            .range((disk, from)..(disk, offset_bytes + len as u64))
        {
            let start = (*at).max(offset_bytes);
            let end = (*at + BLOCK_BYTES as u64).min(offset_bytes + len as u64);
            if start < end {
                buf[(start - offset_bytes) as usize..(end - offset_bytes) as usize]
                    .copy_from_slice(&image[(start - at) as usize..(end - at) as usize]);
            }
        }
        Ok(buf)
    }

    /// Rewrite the metadata copies at `places` with `block` (counted as
    /// repaired), or, on a read-only mount, count them as left damaged. A
    /// disk whose write fails is noted as failed.
    fn rewrite_copies(&mut self, places: Vec<(u16, u64)>, block: &[u8]) -> Result<(), GroupError> {
        if self.read_only {
            self.damage.copies_left(places.len() as u64);
        } else if !places.is_empty() {
            self.damage.copies_repaired(places.len() as u64);
            let writes = places
                .into_iter()
                .map(|(d, o)| (d, o, AlignedBuf::from_slice(block)))
                .collect();
            let failed = self.write_many(writes)?;
            self.failed_disks.extend(failed);
        }
        Ok(())
    }

    /// Read a metadata block that has copies at `places`: the valid copy with
    /// the newest generation wins (a lost or misdirected in-place write leaves
    /// an older, checksum-valid copy on a mirror, which must never be served
    /// or spread); a blank copy counts only if no copy is valid, and then it
    /// wins over invalid ones unless a copy could not be read or is on a
    /// disk that is not online. Bad, blank and older copies beside the
    /// winner are rewritten from it.
    pub(super) fn read_meta(
        &mut self,
        places: &[(u16, u64)],
        id: BlockId,
    ) -> Result<Option<Box<Block>>, GroupError> {
        // (generation, block, place) of the newest valid copy so far.
        let mut newest: Option<(u64, Box<Block>, (u16, u64))> = None;
        let mut outdated = Vec::new();
        let mut bad = Vec::new();
        // Copies that could not be read: never rewritten blank (a read
        // error may pass, and the copy may be the block).
        let mut unread = Vec::new();
        let mut blank = Vec::new();
        let mut problems = Vec::new();
        let mut unreadable = false;
        // A copy on a disk that is not online was not read.
        let mut skipped = false;
        for &(disk, offset) in places {
            if self.member(disk).and_then(Member::online).is_none() {
                skipped = true;
                continue;
            }
            match self.read_one(disk, offset, BLOCK_BYTES) {
                Ok(buf) => match meta::open(&buf[..], id, self.uuid) {
                    Ok(generation) => {
                        if newest.as_ref().is_none_or(|(g, _, _)| generation > *g) {
                            let mut block = meta::empty_block();
                            block.copy_from_slice(&buf[..]);
                            if let Some((_, _, place)) =
                                newest.replace((generation, block, (disk, offset)))
                            {
                                outdated.push(place);
                            }
                        } else if newest
                            .as_ref()
                            .is_some_and(|(g, b, _)| generation < *g || b[..] != buf[..])
                        {
                            outdated.push((disk, offset));
                        }
                    }
                    Err(MetaError::Blank) => blank.push((disk, offset)),
                    Err(e) => {
                        problems.push(format!("{} at {offset}: {e}", self.disk_name(disk)));
                        bad.push((disk, offset));
                    }
                },
                Err(e) => {
                    problems.push(format!("{} at {offset}: {e}", self.disk_name(disk)));
                    unread.push((disk, offset));
                    unreadable = true;
                }
            }
        }
        match newest {
            Some((_, block, _)) => {
                // A copy on a disk that failed is not rewritten: the disk
                // goes offline at the step's end.
                let failed = &self.failed_disks;
                let rewrite = bad
                    .into_iter()
                    .chain(unread)
                    .chain(blank)
                    .chain(outdated)
                    .filter(|(d, _)| !failed.contains(d))
                    .collect();
                self.rewrite_copies(rewrite, &block[..])?;
                Ok(Some(block))
            }
            None if problems.is_empty() => Ok(None),
            None if !blank.is_empty() && bad.is_empty() && unread.is_empty() => Ok(None),
            // Blank copies beside invalid or unreadable ones, every copy
            // on a disk in service: a block never written whose other
            // copies were hit (a misdirected write, rot, a read error). A
            // blank copy beside a real block would need a fault on its
            // disk as well as on each other copy's: more failure groups
            // than the redundancy covers. (A disk out of service may hold
            // the one copy written while the blank one's disk was away.)
            // The invalid copies are rewritten blank; an unreadable one is
            // left as it is.
            None if !blank.is_empty() && !skipped => {
                self.rewrite_copies(bad, &[0u8; BLOCK_BYTES])?;
                Ok(None)
            }
            // A copy that could not be read may be whole once its disk
            // answers again: that is an I/O problem, not a loss.
            None if unreadable => Err(GroupError::Unreadable(format!(
                "{id} could not be read from any copy ({}); check the disks and the kernel log (dmesg)",
                problems.join("; ")
            ))),
            None => Err(GroupError::Lost(format!(
                "{id} has no valid copy on any disk ({})",
                problems.join("; ")
            ))),
        }
    }
}
