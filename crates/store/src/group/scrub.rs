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
//! process mounted; scrubbing a group served to others needs the extents'
//! latches (a write between the reads of two copies is not a disagreement),
//! which the service will take.

use super::relocate::REBALANCE_POWER_MAX;
use super::resync::{Progress, RESYNC_IO_BYTES_MAX};
use super::*;
use crate::header_copies::{CopyState, HeaderScan};
use crate::labeling;
use cairn_format::extent_map::{FileLayout, Striping};
use check::{CheckReport, Problem};

/// Scrub power unless told otherwise (chunks read at once).
pub const SCRUB_POWER_DEFAULT: usize = 4;
/// The unit a data disagreement is reported in.
const COMPARE_BYTES: usize = 4096;

/// What a scrub read, found and did.
#[derive(Debug, Clone, Default, Serialize)]
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

/// One chunk of one extent: every readable, current copy is read.
struct Chunk {
    file: u32,
    extent: u64,
    /// Offset in the extent's AU run.
    offset: u64,
    len: u64,
    /// (slot, disk, byte offset on the disk) of each copy read.
    copies: Vec<(usize, u16, u64)>,
}

impl Group<'_> {
    /// Scrub the group: metadata copies, disk header copies, then every
    /// copy of every written data extent, `power` chunks at a time.
    pub fn scrub(
        &mut self,
        power: usize,
        repair: bool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport, GroupError> {
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
        let started = std::time::Instant::now();
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
        // Data.
        let chunks = self.scrub_chunks();
        let total: u64 = chunks.iter().map(|c| c.len * c.copies.len() as u64).sum();
        let mut done = 0u64;
        progress(Progress {
            done,
            total,
            bytes_done: 0,
        });
        let mut last_extent = None;
        for batch in chunks.chunks(power) {
            self.scrub_batch(batch, repair, &mut report)?;
            for c in batch {
                if last_extent != Some((c.file, c.extent)) {
                    report.extents_read += 1;
                    last_extent = Some((c.file, c.extent));
                }
                done += c.len * c.copies.len() as u64;
            }
            progress(Progress {
                done,
                total,
                bytes_done: report.bytes_read,
            });
        }
        if repair && report.bytes_rewritten > 0 {
            self.flush_all_checked()?;
            self.offline_failed()?;
        }
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Each in-service member's three header copies against its newest:
    /// a damaged, unreadable or older copy is a problem; repair writes the
    /// newest over it.
    fn scrub_headers(&mut self, repair: bool, report: &mut ScrubReport) -> Result<(), GroupError> {
        for n in 0..self.members.len() as u16 {
            let Some(device) = self.member(n).and_then(Member::online) else {
                continue;
            };
            let label = self.disk_name(n);
            let scan = HeaderScan::read(&mut *self.engine, device).map_err(io_err(&label))?;
            let Some(newest) = scan
                .good()
                .map(|(_, d)| d.header.clone())
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
            let mut bad = Vec::new();
            for slot in &scan.slots {
                report.header_copies_checked += 1;
                let what = match &slot.state {
                    CopyState::Good(d) if d.header == newest => continue,
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
            if repair && !bad.is_empty() {
                labeling::write_copies(&mut *self.engine, device, &newest, &bad).map_err(|e| {
                    GroupError::Invalid(format!("disk {label}: rewriting its header: {e}"))
                })?;
            }
        }
        Ok(())
    }

    /// Every chunk of every written user-file extent, with the copies to
    /// read: on a disk in service, not stale there.
    fn scrub_chunks(&self) -> Vec<Chunk> {
        let mut out = Vec::new();
        for (number, rec) in self.files.range(FILE_NUMBER_USER_MIN..) {
            for (index, e) in rec.extents.iter().enumerate() {
                if !e.initialized {
                    continue;
                }
                let aus = placement::extent_aus(index as u64);
                let bytes = aus * self.au_bytes;
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
                        file: *number,
                        extent: index as u64,
                        offset,
                        len,
                        copies,
                    });
                    offset += len;
                }
            }
        }
        out
    }

    /// Read a batch of chunks (every copy at once), compare each copy with
    /// the reference, report, and with `repair` rewrite what differs.
    fn scrub_batch(
        &mut self,
        batch: &[Chunk],
        repair: bool,
        report: &mut ScrubReport,
    ) -> Result<(), GroupError> {
        let mut requests = Vec::new();
        for (k, c) in batch.iter().enumerate() {
            for (i, (_, disk, offset)) in c.copies.iter().enumerate() {
                let Some(device) = self.member(*disk).and_then(Member::online) else {
                    continue;
                };
                requests.push(Request {
                    device,
                    tag: ((k as u64) << 8) | i as u64,
                    op: Op::Read {
                        offset_bytes: *offset,
                        buf: AlignedBuf::zeroed(c.len as usize),
                    },
                });
            }
        }
        let done = self
            .engine
            .execute_all(requests)
            .map_err(io_err("(engine)"))?;
        let mut read: BTreeMap<(usize, usize), Result<AlignedBuf, String>> = BTreeMap::new();
        for c in done {
            let key = ((c.tag >> 8) as usize, (c.tag & 0xFF) as usize);
            let data = match (c.result, c.buf) {
                (Ok(_), Some(buf)) => Ok(buf),
                (Err(e), _) => Err(e.to_string()),
                (Ok(_), None) => Err("no data returned".into()),
            };
            read.insert(key, data);
        }
        let mut rewrites: Vec<(u16, u64, AlignedBuf)> = Vec::new();
        for (k, c) in batch.iter().enumerate() {
            let rec = &self.files[&c.file];
            let layout = FileLayout::new(
                self.au_bytes,
                Striping::from_code(rec.entry.striping).unwrap_or(Striping::Coarse),
            );
            let path = self.path_of(c.file);
            let at = |offset: u64| layout.logical_offset(c.extent, offset);
            // The reference: the primary if it was read, else the first
            // current copy that was.
            let reference = c
                .copies
                .iter()
                .enumerate()
                .find(|(i, _)| read.get(&(k, *i)).is_some_and(Result::is_ok));
            for i in 0..c.copies.len() {
                if read.get(&(k, i)).is_some_and(Result::is_ok) {
                    report.copies_read += 1;
                    report.bytes_read += c.len;
                }
            }
            let Some((ref_i, (ref_slot, ref_disk, _))) = reference else {
                report.problems.push(Problem {
                    location: format!(
                        "{path} bytes {}..{}",
                        at(c.offset),
                        at(c.offset) + u128::from(c.len)
                    ),
                    what: "no copy could be read".into(),
                    repaired: false,
                    repairable: false,
                });
                continue;
            };
            let from = format!(
                "the {} on {}",
                if *ref_slot == 0 {
                    "primary"
                } else {
                    "first readable current copy"
                },
                self.disk_name(*ref_disk)
            );
            let Some(Ok(good)) = read.get(&(k, ref_i)) else {
                continue;
            };
            for (i, (_, disk, offset)) in c.copies.iter().enumerate() {
                if i == ref_i {
                    continue;
                }
                let disk_name = self.disk_name(*disk);
                let differ: Vec<(u64, u64)> = match read.get(&(k, i)) {
                    Some(Ok(data)) => differing_runs(&good[..], &data[..]),
                    Some(Err(e)) => {
                        report.problems.push(Problem {
                            location: format!(
                                "{path} bytes {}..{} copy on {disk_name}",
                                at(c.offset),
                                at(c.offset) + u128::from(c.len)
                            ),
                            what: format!(
                                "unreadable ({e}){}",
                                if repair {
                                    format!("; rewritten from {from}")
                                } else {
                                    String::new()
                                }
                            ),
                            repaired: repair,
                            repairable: true,
                        });
                        vec![(0, c.len)]
                    }
                    None => continue,
                };
                let unreadable = matches!(read.get(&(k, i)), Some(Err(_)));
                for (start, len) in &differ {
                    if !unreadable {
                        report.problems.push(Problem {
                            location: format!(
                                "{path} bytes {}..{} ({} KiB) copy on {disk_name}",
                                at(c.offset + start),
                                at(c.offset + start) + u128::from(*len),
                                len >> 10
                            ),
                            what: format!(
                                "differs from {from}{}",
                                if repair { "; rewritten from it" } else { "" }
                            ),
                            repaired: repair,
                            repairable: true,
                        });
                    }
                    if repair {
                        let s = *start as usize;
                        rewrites.push((
                            *disk,
                            offset + start,
                            AlignedBuf::from_slice(&good[s..s + *len as usize]),
                        ));
                        report.bytes_rewritten += len;
                    }
                }
            }
        }
        if !rewrites.is_empty() {
            let failed = self.write_many(rewrites)?;
            self.failed_disks.extend(failed);
        }
        Ok(())
    }
}

/// The runs of [`COMPARE_BYTES`] blocks where `a` and `b` differ, as
/// (offset, length) in bytes.
fn differing_runs(a: &[u8], b: &[u8]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (k, (x, y)) in a
        .chunks(COMPARE_BYTES)
        .zip(b.chunks(COMPARE_BYTES))
        .enumerate()
    {
        if x == y {
            continue;
        }
        let start = (k * COMPARE_BYTES) as u64;
        let len = x.len() as u64;
        match out.last_mut() {
            Some(last) if last.0 + last.1 == start => last.1 += len,
            _ => out.push((start, len)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_runs_coalesce_neighbours() {
        let a = vec![0u8; 5 * COMPARE_BYTES];
        let mut b = a.clone();
        b[COMPARE_BYTES + 7] = 1;
        b[2 * COMPARE_BYTES] = 1;
        b[4 * COMPARE_BYTES + 1] = 1;
        assert_eq!(
            differing_runs(&a, &b),
            vec![
                (COMPARE_BYTES as u64, 2 * COMPARE_BYTES as u64),
                (4 * COMPARE_BYTES as u64, COMPARE_BYTES as u64)
            ]
        );
        assert!(differing_runs(&a, &a).is_empty());
    }
}
