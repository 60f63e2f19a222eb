//! `cairn group scrub`: read every copy of every extent and of the
//! metadata, and report each disagreement by file and offset; with
//! `--repair`, restore metadata from its newest valid generation and data
//! from the primary copy, naming each rewrite.
//!
//! Metadata blocks carry checksums and generations, so a scrub knows which
//! copy is right: the newest valid one ([`Group::check_mirrors`], shared
//! with `check`). Data blocks carry neither, so when two readable copies of
//! a data block differ nothing says which the database wrote last; as ASM
//! does, the primary copy (the first in the map, the one reads prefer) is
//! the reference, unless it cannot be read or is stale (it missed writes
//! while its disk was offline), when the first current copy is. AUs a copy
//! is stale in are not compared (they differ by design until a resync).
//!
//! The data is read `power` chunks of up to 1 MiB at a time, every copy of
//! a chunk together. A scrub runs under the metadata lock of a group this
//! process mounted; a live group's ([`LiveGroup::scrub`](super::LiveGroup::scrub))
//! also holds each batch's extents' exclusive latches, so a write never
//! lands between the reads of two copies (which would look like a
//! disagreement, and `--repair` would undo the write).

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::extent_map::{FileLayout, Striping};
use cairn_io::{AlignedBuf, DeviceId, IoEngine, Op, Request};
use serde::Serialize;

use super::check::{CheckReport, Problem};
use super::error::{io_err, GroupError};
use super::mounted::Group;
use super::parts::members::Member;
use super::relocate::REBALANCE_POWER_MAX;
use super::resync::{Progress, RESYNC_IO_BYTES_MAX};
use crate::header_copies::{CopyState, HeaderScan};
use crate::{labeling, placement};

/// Scrub power unless told otherwise (chunks read at once).
pub const SCRUB_POWER_DEFAULT: usize = 4;
/// Most chunks read at once whatever the power: each holds a buffer of up
/// to 1 MiB per copy.
pub const SCRUB_INFLIGHT_MAX: usize = 64;
/// The unit a data disagreement is reported in.
const COMPARE_BYTES: usize = 4096;

/// What a scrub read, found and did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct ScrubReport {
    /// Data extents read, and the bytes read from all their copies.
    pub extents_read: u64,
    pub copies_read: u64,
    pub bytes_read: u64,
    /// Metadata blocks whose copies were compared, and disk header copies
    /// checked.
    pub metadata_blocks_compared: u64,
    pub header_copies_checked: u64,
    /// Each disagreement, and for each whether `--repair` rewrote it (and
    /// from where).
    pub problems: Vec<Problem>,
    /// Data bytes rewritten from a reference copy.
    pub bytes_rewritten: u64,
    pub elapsed_ms: u64,
}

impl ScrubReport {
    /// Nothing found that is not repaired.
    pub fn clean(&self) -> bool {
        self.problems.iter().all(|p| p.repaired)
    }
}

/// What `--repair` may do: rewrite copies where the copies themselves say
/// which is right (all readable ones agree; or, with three copies or more,
/// a strict majority does), and — where they do not — the copy on the disk
/// `prefer` names, if one was chosen. Two copies that differ are never
/// settled by guessing: the primary is no more likely right than the
/// mirror (the bit rot, the lost write or the misdirected write may be on
/// either), and rewriting the good copy from the bad one would make the
/// damage permanent and invisible.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrubRepair {
    pub repair: bool,
    /// A member disk, by number.
    pub prefer: Option<u16>,
}

impl ScrubRepair {
    pub fn new(repair: bool, prefer: Option<u16>) -> Self {
        Self { repair, prefer }
    }

    /// Only look.
    pub fn report() -> Self {
        Self::default()
    }
}

/// Why a copy is taken as right for a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reference {
    /// Every copy read holds it (the others could not be read).
    Agreed,
    /// More than half of the copies read (of three or more) hold it.
    Majority,
    /// The disk `--prefer` named holds it, where nothing else decides.
    Preferred,
}

/// What a scrub finds in a run of blocks of one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finding {
    NoneReadable,
    /// The copies read differ and nothing says which is right.
    Undecided,
    /// Copy `copy` (unreadable, or different) should hold what copy
    /// `reference` holds.
    Differs {
        copy: usize,
        reference: usize,
        why: Reference,
    },
}

/// A run of blocks (offset and length in the chunk) with one finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    start: u64,
    len: u64,
    finding: Finding,
}

/// The copy that is right for one block, and why: `blocks[i]` is copy i's
/// bytes (`None`: not read); `prefer`, the copy the asker chose.
fn judge_block(blocks: &[Option<&[u8]>], prefer: Option<usize>) -> Option<(usize, Reference)> {
    let read: Vec<usize> = (0..blocks.len()).filter(|i| blocks[*i].is_some()).collect();
    let first = *read.first()?;
    // Each distinct content, with the copies that hold it.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for &i in &read {
        match groups.iter_mut().find(|(r, _)| blocks[*r] == blocks[i]) {
            Some(g) => g.1 += 1,
            None => groups.push((i, 1)),
        }
    }
    if groups.len() == 1 {
        return Some((first, Reference::Agreed));
    }
    if read.len() >= 3 {
        if let Some((r, _)) = groups.iter().find(|(_, n)| n * 2 > read.len()) {
            return Some((*r, Reference::Majority));
        }
    }
    prefer
        .filter(|p| blocks.get(*p).is_some_and(Option::is_some))
        .map(|p| (p, Reference::Preferred))
}

/// Judge a chunk of `len` bytes block by block ([`COMPARE_BYTES`]):
/// the runs where something is wrong, neighbours with one finding joined.
fn judge_chunk(copies: &[Option<&[u8]>], len: u64, prefer: Option<usize>) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let mut push = |start: u64, len: u64, finding: Finding| match runs
        .iter_mut()
        .rev()
        .find(|r| r.finding == finding)
    {
        Some(last) if last.start + last.len == start => last.len += len,
        _ => runs.push(Run {
            start,
            len,
            finding,
        }),
    };
    let mut start = 0u64;
    while start < len {
        let n = (COMPARE_BYTES as u64).min(len - start);
        let (a, b) = (start as usize, (start + n) as usize);
        let blocks: Vec<Option<&[u8]>> = copies.iter().map(|c| c.map(|d| &d[a..b])).collect();
        if blocks.iter().all(Option::is_none) {
            push(start, n, Finding::NoneReadable);
        } else {
            match judge_block(&blocks, prefer) {
                Some((reference, why)) => {
                    for (copy, block) in blocks.iter().enumerate() {
                        if copy != reference && *block != blocks[reference] {
                            push(
                                start,
                                n,
                                Finding::Differs {
                                    copy,
                                    reference,
                                    why,
                                },
                            );
                        }
                    }
                }
                None => push(start, n, Finding::Undecided),
            }
        }
        start += n;
    }
    runs
}

/// A repair's write: disk, byte offset, the reference's bytes.
type Rewrite = (u16, u64, AlignedBuf);

/// A written data extent a scrub reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScrubExtent {
    pub(super) file: u32,
    pub(super) incarnation: u32,
    pub(super) index: u64,
    /// Bytes its copies hold (listed copies × its length).
    pub(super) bytes: u64,
}

/// One chunk of one extent: every readable, current copy is read.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Chunk {
    file: u32,
    extent: u64,
    /// Offset in the extent's AU run.
    offset: u64,
    len: u64,
    /// (slot, disk, byte offset on the disk) of each copy read.
    copies: Vec<(usize, u16, u64)>,
    /// Copies the map lists (for progress: those not read count as done).
    listed: u64,
}

impl Group<'_> {
    /// Scrub the group: metadata copies, disk header copies, then every
    /// copy of every written data extent, `power` chunks at a time.
    pub fn scrub(
        &mut self,
        power: usize,
        how: ScrubRepair,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport, GroupError> {
        let started = std::time::Instant::now();
        let repair = how.repair;
        let (mut report, extents, total) = self.scrub_start(power, how)?;
        let power = power.min(SCRUB_INFLIGHT_MAX);
        let mut done = 0u64;
        progress(Progress {
            done,
            total,
            ..Default::default()
        });
        let mut batch: Vec<Chunk> = Vec::with_capacity(power);
        for (k, e) in extents.iter().enumerate() {
            batch.extend(self.extent_chunks(e.file, e.index));
            report.extents_read += 1;
            let last = k + 1 == extents.len();
            while batch.len() >= power || (last && !batch.is_empty()) {
                let take: Vec<Chunk> = batch.drain(..batch.len().min(power)).collect();
                self.scrub_batch(&take, how, &mut report)?;
                done += take.iter().map(|c| c.len * c.listed).sum::<u64>();
                progress(Progress {
                    done,
                    total,
                    bytes_done: report.bytes_read,
                    ..Default::default()
                });
            }
        }
        self.scrub_finish(repair, &mut report)?;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// A scrub's first step: the power checked, the metadata copies and
    /// disk headers scrubbed, and the written data extents listed, with the
    /// bytes their copies hold (the progress total).
    pub(super) fn scrub_start(
        &mut self,
        power: usize,
        how: ScrubRepair,
    ) -> Result<(ScrubReport, Vec<ScrubExtent>, u64), GroupError> {
        let repair = how.repair;
        if let Some(d) = how.prefer {
            if self.member(d).and_then(Member::online).is_none() {
                return Err(GroupError::Invalid(format!(
                    "--prefer {}: the disk is not in service, so it holds no copy a scrub reads",
                    self.disk_name(d)
                )));
            }
        }
        if !(1..=REBALANCE_POWER_MAX).contains(&power) {
            return Err(GroupError::Invalid(format!(
                "power {power} is out of range: 1 to {REBALANCE_POWER_MAX}"
            )));
        }
        if repair {
            self.check_writable()?;
            self.commit_now()?;
        } else {
            self.check_usable()?;
        }
        let mut report = ScrubReport::default();
        // Metadata: each block's copies against its newest valid generation,
        // and the superblock slots (what `check` compares too).
        let mut meta = CheckReport::default();
        self.check_mirrors(repair, &mut meta)?;
        self.check_superblocks(repair, &mut meta)?;
        report.metadata_blocks_compared = meta.metadata_blocks_compared;
        report.problems.extend(meta.problems);
        self.scrub_headers(repair, &mut report)?;
        if repair {
            self.commit_in_chunks()?;
        }
        // Data: the chunks are made per extent as the scan goes (a big
        // group has millions). Not the checksum maps: their blocks are
        // judged by their envelopes, not against a primary copy (the copies
        // of a block being checkpointed differ in generation for a while).
        let extents: Vec<ScrubExtent> = self
            .files
            .user_files()
            .flat_map(|(n, rec)| {
                rec.extents
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.initialized)
                    .map(|(i, e)| ScrubExtent {
                        file: *n,
                        incarnation: rec.entry.incarnation,
                        index: i as u64,
                        bytes: placement::extent_aus(i as u64)
                            * self.au_bytes
                            * e.copies().len() as u64,
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let total = extents.iter().map(|e| e.bytes).sum();
        Ok((report, extents, total))
    }

    /// A live group's scrub step, under extent `e`'s exclusive latch and
    /// `meta`: if it is still the same file's and written, at most
    /// `max_chunks` of its chunks from chunk `from` on, with the chunk to
    /// go on from (`None`: the part is the extent's last). `None` when the
    /// extent is done, or gone. The copies are read without `meta`
    /// ([`Group::scrub_part_reads`]), then judged with it
    /// ([`Group::scrub_part_judge`]).
    pub(super) fn scrub_part(
        &self,
        e: &ScrubExtent,
        from: usize,
        max_chunks: usize,
    ) -> Option<(Vec<Chunk>, Option<usize>)> {
        let same = self.files.get(e.file).is_some_and(|r| {
            r.entry.incarnation == e.incarnation
                && r.extents
                    .get(e.index as usize)
                    .is_some_and(|x| x.initialized)
        });
        if !same {
            return None;
        }
        let mut chunks = self.extent_chunks(e.file, e.index);
        let to = chunks.len().min(from + max_chunks.max(1));
        if from >= to {
            return None;
        }
        let next = (to < chunks.len()).then_some(to);
        chunks.truncate(to);
        chunks.drain(..from);
        Some((chunks, next))
    }

    /// The reads of a part: (chunk, copy) → (disk, byte offset, length),
    /// for whoever reads them — the metadata plane's engine for a group
    /// one command holds, an engine of the live group's own outside
    /// `meta`.
    pub(super) fn scrub_part_reads(batch: &[Chunk]) -> Vec<((usize, usize), u16, u64, usize)> {
        let mut reads = Vec::new();
        for (k, c) in batch.iter().enumerate() {
            for (i, (_, disk, offset)) in c.copies.iter().enumerate() {
                reads.push(((k, i), *disk, *offset, c.len as usize));
            }
        }
        reads
    }

    /// A live group's scrub step after the reads, under `meta` again (and
    /// the extent's latch, held throughout: no data write or move of the
    /// extent came between): judge what was read and (`repair`) rewrite.
    /// `false` if the part is no longer what was read — a disk left or
    /// came back, or the metadata plane zeroed part of the file (a grow
    /// over a shrunk tail: under `meta`, not the latch) since `zero_mark`
    /// was taken with the plan: nothing is judged (copies read on either
    /// side of the zeroing differ, and a repair would undo it), and the
    /// part is read again.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scrub_part_judge(
        &mut self,
        e: &ScrubExtent,
        from: usize,
        batch: &[Chunk],
        zero_mark: u64,
        read: CopiesRead,
        how: ScrubRepair,
        report: &mut ScrubReport,
    ) -> Result<bool, GroupError> {
        if self.zeroings.since(e.file, zero_mark) {
            return Ok(false);
        }
        match self.scrub_part(e, from, batch.len()) {
            Some((now, _)) if now == batch => {}
            _ => return Ok(false),
        }
        if from == 0 {
            report.extents_read += 1;
        }
        self.scrub_judge(batch, read, how, report)?;
        Ok(true)
    }

    /// A scrub's last step: what it rewrote made durable.
    pub(super) fn scrub_finish(
        &mut self,
        repair: bool,
        report: &mut ScrubReport,
    ) -> Result<(), GroupError> {
        if repair && report.bytes_rewritten > 0 {
            self.flush_all_checked()?;
            self.offline_failed()?;
        }
        Ok(())
    }

    /// Each in-service member's three header copies against its newest:
    /// a damaged, unreadable or older copy is a problem; repair writes the
    /// newest over it.
    fn scrub_headers(&mut self, repair: bool, report: &mut ScrubReport) -> Result<(), GroupError> {
        for n in self.members.numbers() {
            let Some(device) = self.member(n).and_then(Member::online) else {
                continue;
            };
            let label = self.disk_name(n);
            let (uuid, size) = self
                .member(n)
                .map(|m| (m.entry.disk_uuid, m.entry.size_bytes))
                .expect("invariant: a member");
            let scan = HeaderScan::read(&mut *self.engine, device).map_err(io_err(&label))?;
            // Only this disk's own header counts (a block of data that
            // looks like another disk's header is data).
            let Some(newest) = scan
                .good()
                .map(|(_, d)| d.header.clone())
                .filter(|h| h.disk_uuid == uuid)
                .max_by_key(|h| h.generation)
            else {
                report.problems.push(Problem {
                    location: format!("disk {label} header"),
                    what: "no valid header copy".into(),
                    repaired: false,
                    repairable: false,
                });
                continue;
            };
            // A header laid out for another size than the group uses (a
            // disk grown between its label and its add, by an older
            // version; a resize a crash cut): its tail copy may lie among
            // the data AUs, so it is never written in place — the header
            // is written again for the size on record.
            let want = cairn_format::layout::HeaderPlacement::for_device(size)
                .map(|p| p.offsets_bytes.to_vec())
                .ok();
            if want.as_ref() != Some(&newest.copy_offsets_bytes) {
                let fixed = repair && self.move_tail_header(n, size).is_ok();
                report.problems.push(Problem {
                    location: format!("disk {label} header"),
                    what: format!(
                        "laid out for a {}-byte device; the group uses {size} bytes of it{}",
                        newest.device_size_bytes,
                        if fixed {
                            "; written again for that size"
                        } else {
                            ""
                        }
                    ),
                    repaired: fixed,
                    repairable: true,
                });
                continue;
            }
            let bad = judge_header_copies(&scan, &newest, &label, repair, report);
            if repair && !bad.is_empty() {
                if let Err(e) = labeling::write_copies(&mut *self.engine, device, &newest, &bad) {
                    // Not repaired after all, and a disk that fails a write
                    // leaves service.
                    let prefix = format!("disk {label} header copy");
                    for p in report
                        .problems
                        .iter_mut()
                        .filter(|p| p.location.starts_with(&prefix) && p.repaired)
                    {
                        p.repaired = false;
                        p.what = format!("{}; the rewrite failed: {e}", p.what);
                    }
                    self.failed_disks.insert(n);
                    self.offline_failed()?;
                }
            }
        }
        Ok(())
    }

    /// The chunks of one written extent, with the copies to read: on a
    /// disk in service, not stale there.
    fn extent_chunks(&self, file: u32, index: u64) -> Vec<Chunk> {
        let mut out = Vec::new();
        let Some(e) = self
            .files
            .get(file)
            .and_then(|r| r.extents.get(index as usize))
        else {
            return out;
        };
        let bytes = placement::extent_aus(index) * self.au_bytes;
        let mut offset = 0;
        while offset < bytes {
            let len = RESYNC_IO_BYTES_MAX.min(bytes - offset);
            let au = offset / self.au_bytes;
            let copies = e
                .copies()
                .iter()
                .enumerate()
                .filter(|(slot, c)| {
                    self.member(c.disk).and_then(Member::online).is_some()
                        && !e.stale_in(*slot, au..au + 1)
                })
                .map(|(slot, c)| (slot, c.disk, u64::from(c.au) * self.au_bytes + offset))
                .collect();
            out.push(Chunk {
                file,
                extent: index,
                offset,
                len,
                copies,
                listed: e.copies().len() as u64,
            });
            offset += len;
        }
        out
    }

    /// Read a batch of chunks (every copy at once) on the metadata plane's
    /// engine, then judge it: for a group one command holds.
    fn scrub_batch(
        &mut self,
        batch: &[Chunk],
        how: ScrubRepair,
        report: &mut ScrubReport,
    ) -> Result<(), GroupError> {
        let devices = self.member_devices();
        let read = read_copies(&mut *self.engine, Self::scrub_part_reads(batch), |disk| {
            devices.get(&disk).copied()
        })?;
        self.scrub_judge(batch, read, how, report)
    }

    /// Compare each copy of a batch that was read with the reference,
    /// report, and with `repair` rewrite what differs.
    fn scrub_judge(
        &mut self,
        batch: &[Chunk],
        read: CopiesRead,
        how: ScrubRepair,
        report: &mut ScrubReport,
    ) -> Result<(), GroupError> {
        // Findings, each with the rewrite that repairs it (disk, offset,
        // bytes), made once all are known: a rewrite whose disk fails is
        // reported as not repaired.
        let mut found: Vec<(Problem, Option<Rewrite>)> = Vec::new();
        for (k, c) in batch.iter().enumerate() {
            self.judge_copies((k, c), &read, how, report, &mut found);
        }
        self.scrub_rewrite(found, read.dead, report)
    }

    /// Judge the copies of chunk `c` (the batch's `k`th) as read: count
    /// what was read, report what none can settle, and add each copy that
    /// differs to `found`.
    fn judge_copies(
        &self,
        (k, c): (usize, &Chunk),
        read: &CopiesRead,
        how: ScrubRepair,
        report: &mut ScrubReport,
        found: &mut Vec<(Problem, Option<Rewrite>)>,
    ) {
        let rec = &self.files[&c.file];
        let layout = FileLayout::new(
            self.au_bytes,
            Striping::from_code(rec.entry.striping).unwrap_or(Striping::Coarse),
        );
        let path = self.path_of(c.file);
        // The file's byte ranges a stretch of the extent holds (more
        // than one when fine striping splits it).
        let ranges = |start: u64, len: u64| -> String {
            file_ranges(&layout, c.extent, c.offset + start, len)
                .iter()
                .map(|(a, b)| format!("{a}..{b}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let copies: Vec<Option<&[u8]>> = (0..c.copies.len())
            .map(|i| match read.data.get(&(k, i)) {
                Some(Ok(data)) => Some(&data[..]),
                _ => None,
            })
            .collect();
        for data in copies.iter().flatten() {
            // A copy counts once, at its first chunk.
            report.copies_read += u64::from(c.offset == 0);
            report.bytes_read += data.len() as u64;
        }
        let prefer = how
            .prefer
            .and_then(|d| c.copies.iter().position(|(_, disk, _)| *disk == d));
        let names: Vec<String> = c
            .copies
            .iter()
            .map(|(_, d, _)| self.disk_name(*d))
            .collect();
        let chunk = ChunkCopies {
            k,
            c,
            read,
            copies,
            names,
        };
        for run in judge_chunk(&chunk.copies, c.len, prefer) {
            let at = format!(
                "{path} bytes {} ({} KiB)",
                ranges(run.start, run.len),
                run.len >> 10
            );
            match run.finding {
                Finding::NoneReadable => {
                    report.problems.push(Problem {
                        location: format!("{path} bytes {}", ranges(run.start, run.len)),
                        what: "no copy could be read".into(),
                        repaired: false,
                        repairable: false,
                    });
                }
                Finding::Undecided => {
                    let held: Vec<&str> = chunk
                        .copies
                        .iter()
                        .zip(&chunk.names)
                        .filter(|(d, _)| d.is_some())
                        .map(|(_, n)| n.as_str())
                        .collect();
                    report.problems.push(Problem {
                        location: format!("{at} copies on {}", held.join(", ")),
                        what: format!(
                            "the copies disagree and no majority says which is right (data blocks carry no checksums), so repair does not guess: not rewritten; `cairn group scrub {} --repair --prefer DISK` keeps that disk's copy",
                            self.name
                        ),
                        repaired: false,
                        repairable: false,
                    });
                }
                Finding::Differs {
                    copy,
                    reference,
                    why,
                } => found.push(chunk.differs((copy, reference, why), &run, at, how.repair)),
            }
        }
    }

    /// Rewrite what the findings of a batch say (each rewrite whose disk
    /// fails reported as not repaired), report them, and take the disks
    /// that failed, or whose reads did (`dead`), out of service.
    fn scrub_rewrite(
        &mut self,
        found: Vec<(Problem, Option<Rewrite>)>,
        dead: BTreeSet<u16>,
        report: &mut ScrubReport,
    ) -> Result<(), GroupError> {
        let writes: Vec<(u16, u64, AlignedBuf)> = found
            .iter()
            .filter_map(|(_, w)| {
                w.as_ref()
                    .map(|(d, o, b)| (*d, *o, AlignedBuf::from_slice(b)))
            })
            .collect();
        let failed = if writes.is_empty() {
            Vec::new()
        } else {
            self.write_many(writes)?
        };
        let any_failed = !failed.is_empty();
        for (mut problem, rewrite) in found {
            if let Some((disk, _, bytes)) = rewrite {
                if failed.contains(&disk) {
                    problem
                        .what
                        .push_str("; the rewrite failed (the disk goes offline)");
                } else {
                    problem.what.push_str("; rewritten from it");
                    problem.repaired = true;
                    report.bytes_rewritten += bytes.len() as u64;
                }
            }
            report.problems.push(problem);
        }
        self.failed_disks.extend(failed);
        self.failed_disks.extend(dead.iter().copied());
        if any_failed || !dead.is_empty() {
            // Out of service before the next batch reads from it.
            self.offline_failed()?;
        }
        Ok(())
    }
}

/// One chunk's copies as a scrub read them, for judging: the chunk (the
/// batch's `k`th), what its part's reads returned, each copy's bytes
/// (`None`: not read) and each copy's disk by name.
struct ChunkCopies<'a> {
    k: usize,
    c: &'a Chunk,
    read: &'a CopiesRead,
    copies: Vec<Option<&'a [u8]>>,
    names: Vec<String>,
}

impl ChunkCopies<'_> {
    /// The problem copy `copy` is over `run` (`at`, said): unreadable, or
    /// different from copy `reference` (and `why` that one is right); with
    /// `repair`, the rewrite from the reference that repairs it (none on a
    /// disk whose read failed as a failing disk's does).
    fn differs(
        &self,
        (copy, reference, why): (usize, usize, Reference),
        run: &Run,
        at: String,
        repair: bool,
    ) -> (Problem, Option<Rewrite>) {
        let (copies, names) = (&self.copies, &self.names);
        let (_, disk, offset) = self.c.copies[copy];
        let what = match (&copies[copy], why) {
            (None, _) => format!(
                "unreadable ({})",
                match self.read.data.get(&(self.k, copy)) {
                    Some(Err(e)) => e.as_str(),
                    _ => "not read",
                }
            ),
            (Some(_), Reference::Agreed) => {
                format!("differs from the copy on {}", names[reference])
            }
            (Some(_), Reference::Majority) => format!(
                "differs from the majority of the copies (the one on {} and those that agree with it)",
                names[reference]
            ),
            (Some(_), Reference::Preferred) => format!(
                "differs from the copy on {}, which --prefer chose",
                names[reference]
            ),
        };
        let problem = Problem {
            location: format!("{at} copy on {}", names[copy]),
            what,
            repaired: false,
            repairable: true,
        };
        let rewrite = (repair && !self.read.dead.contains(&disk)).then(|| {
            let s = run.start as usize;
            let good = copies[reference].expect("invariant: the reference was read");
            (
                disk,
                offset + run.start,
                AlignedBuf::from_slice(&good[s..s + run.len as usize]),
            )
        });
        (problem, rewrite)
    }
}

/// Judge each header copy of disk `label` against its newest: a copy that
/// is not the newest is a problem (with `repair`, rewritten from it, unless
/// it lies beyond the end of the device). Returns the copies to rewrite.
fn judge_header_copies(
    scan: &HeaderScan,
    newest: &cairn_format::DiskHeader,
    label: &str,
    repair: bool,
    report: &mut ScrubReport,
) -> Vec<usize> {
    let mut bad = Vec::new();
    for slot in &scan.slots {
        report.header_copies_checked += 1;
        let what = match &slot.state {
            CopyState::Good(d) if d.header == *newest => continue,
            CopyState::Good(d) => format!(
                "generation {}, the newest copy has {}",
                d.header.generation, newest.generation
            ),
            CopyState::Bad(e) => format!("damaged: {e}"),
            CopyState::Misplaced(_) => "a header recording another place".into(),
            CopyState::Unreadable(e) => format!("unreadable: {e}"),
            CopyState::Outside => "beyond the end of the device".into(),
        };
        let fixable = !matches!(slot.state, CopyState::Outside);
        report.problems.push(Problem {
            location: format!(
                "disk {label} header copy {} (offset {})",
                slot.index, slot.offset_bytes
            ),
            what: if repair && fixable {
                format!("{what}; rewritten from the newest copy")
            } else {
                what
            },
            repaired: repair && fixable,
            repairable: fixable,
        });
        if fixable {
            bad.push(slot.index);
        }
    }
    bad
}

/// What a scrub part's reads returned: by (chunk, copy), the bytes or
/// what went wrong (a copy not read — its disk has no device — is
/// absent); and the disks whose read failed as a failing disk's does
/// (it came back short): out of service, never rewritten.
pub(super) struct CopiesRead {
    data: BTreeMap<(usize, usize), Result<AlignedBuf, String>>,
    dead: BTreeSet<u16>,
}

/// Read `reads` ((chunk, copy), disk, offset, length) on `engine`, each
/// disk on the device `device_of` gives it (one it has none for is not
/// read), all at once.
pub(super) fn read_copies(
    engine: &mut dyn IoEngine,
    reads: Vec<((usize, usize), u16, u64, usize)>,
    device_of: impl Fn(u16) -> Option<DeviceId>,
) -> Result<CopiesRead, GroupError> {
    let mut requests = Vec::new();
    let mut disk_of = BTreeMap::new();
    for ((k, i), disk, offset, len) in reads {
        let Some(device) = device_of(disk) else {
            continue;
        };
        let tag = ((k as u64) << 8) | i as u64;
        disk_of.insert(tag, disk);
        requests.push(Request {
            device,
            tag,
            op: Op::Read {
                offset_bytes: offset,
                buf: AlignedBuf::zeroed(len),
            },
        });
    }
    let done = engine.execute_all(requests).map_err(io_err("(engine)"))?;
    let mut read = CopiesRead {
        data: BTreeMap::new(),
        dead: BTreeSet::new(),
    };
    for c in done {
        let key = ((c.tag >> 8) as usize, (c.tag & 0xFF) as usize);
        let data = match (c.result, c.buf) {
            (Ok(_), Some(buf)) => Ok(buf),
            (Err(e), _) => {
                if super::disk_io::read_fails_the_disk(&e) {
                    read.dead.extend(disk_of.get(&c.tag).copied());
                }
                Err(e.to_string())
            }
            (Ok(_), None) => Err("no data returned".into()),
        };
        read.data.insert(key, data);
    }
    Ok(read)
}

/// The file's byte ranges (start..end) that `len` bytes at `offset` of
/// extent `extent` hold: one for coarse striping, one per stripe unit
/// touched for fine.
fn file_ranges(layout: &FileLayout, extent: u64, offset: u64, len: u64) -> Vec<(u128, u128)> {
    let unit = match layout.striping {
        Striping::Coarse => len.max(1),
        Striping::Fine => cairn_format::extent_map::FINE_STRIPE_BYTES,
    };
    let mut out: Vec<(u128, u128)> = Vec::new();
    let mut at = offset;
    while at < offset + len {
        let next = ((at / unit + 1) * unit).min(offset + len);
        let a = layout.logical_offset(extent, at);
        let b = a + u128::from(next - at);
        match out.last_mut() {
            Some(last) if last.1 == a => last.1 = b,
            _ => out.push((a, b)),
        }
        at = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Striping;

    #[test]
    fn file_ranges_split_where_fine_striping_does() {
        use cairn_format::extent_map::FINE_STRIPE_BYTES as UNIT;
        let coarse = FileLayout::new(1 << 20, Striping::Coarse);
        // Extent 2 of a coarse file starts at 2 MiB.
        assert_eq!(
            file_ranges(&coarse, 2, 4096, 3 * UNIT),
            vec![(
                2 * (1 << 20) + 4096,
                2 * (1 << 20) + 4096 + 3 * u128::from(UNIT)
            )]
        );
        // Fine: 8 extents take stripe units in turn; bytes that cross a
        // unit in extent 1 are two ranges, 8 units apart in the file.
        let fine = FileLayout::new(1 << 20, Striping::Fine);
        let r = file_ranges(&fine, 1, UNIT - 4096, 8192);
        let u = u128::from(UNIT);
        assert_eq!(
            r,
            vec![(2 * u - 4096, 2 * u), (9 * u, 9 * u + 4096)],
            "unit 0 of extent 1 is file unit 1; its unit 1 is file unit 9"
        );
        for (a, _) in &r {
            let at = fine.locate(*a as u64);
            assert_eq!(at.extent, 1);
        }
    }

    #[test]
    fn a_scrub_keeps_what_the_copies_agree_on_and_never_guesses_between_two() {
        let a = vec![1u8; 2 * COMPARE_BYTES];
        let mut b = a.clone();
        b[COMPARE_BYTES + 7] = 9;
        let len = a.len() as u64;
        let block = COMPARE_BYTES as u64;
        // Two copies that differ: undecided, whichever is first.
        let runs = judge_chunk(&[Some(&a), Some(&b)], len, None);
        assert_eq!(
            runs,
            vec![Run {
                start: block,
                len: block,
                finding: Finding::Undecided
            }]
        );
        // The asker's choice settles it, either way.
        let runs = judge_chunk(&[Some(&a), Some(&b)], len, Some(1));
        assert_eq!(
            runs[0].finding,
            Finding::Differs {
                copy: 0,
                reference: 1,
                why: Reference::Preferred
            }
        );
        // Three copies: the two that agree win, even over the primary, and
        // even against --prefer.
        let runs = judge_chunk(&[Some(&b), Some(&a), Some(&a)], len, Some(0));
        assert_eq!(
            runs,
            vec![Run {
                start: block,
                len: block,
                finding: Finding::Differs {
                    copy: 0,
                    reference: 1,
                    why: Reference::Majority
                }
            }]
        );
        // Three copies all different: undecided.
        let mut c = a.clone();
        c[COMPARE_BYTES] = 3;
        let runs = judge_chunk(&[Some(&a), Some(&b), Some(&c)], len, None);
        assert_eq!(runs[0].finding, Finding::Undecided);
        // An unreadable copy is rewritten from the ones read when they
        // agree; none read is said so.
        let runs = judge_chunk(&[None, Some(&a)], len, None);
        assert_eq!(
            runs,
            vec![Run {
                start: 0,
                len,
                finding: Finding::Differs {
                    copy: 0,
                    reference: 1,
                    why: Reference::Agreed
                }
            }]
        );
        assert_eq!(
            judge_chunk(&[None, None], len, None)[0].finding,
            Finding::NoneReadable
        );
    }
}
