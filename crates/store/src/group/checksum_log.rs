//! The metadata plane's side of the checksum log (`sums_log.rs` writes
//! it): a mount reads where it stands, a commit of file 8's entry tells
//! the data plane where its blocks are, and a checkpoint of the maps starts
//! it afresh (`maps.rs` `checkpoint_maps`).

use cairn_format::group::{IntentRecord, LogHeader, FILE_CHECKSUM_LOG, LOG_HEADER_BLOCKS};
use cairn_format::meta::{self, BLOCK_BYTES};

use super::error::GroupError;
use super::limits::JOURNAL_READ_TRIES;
use super::mounted::Group;
use super::parts::members::Member;
use std::collections::BTreeMap;

use super::data::{self, DataPort, FileIntents, LogFacts, RecoveredLog};
use super::sums_log::{header_id, record_id, Places, Ring};

/// A log's records as read, each with its sequence.
type Records = Vec<(u64, IntentRecord)>;

impl Group<'_> {
    /// Where file 8's blocks are, for the data plane's log (`None`: no log).
    fn log_places(&self) -> Option<Places> {
        self.files.get(FILE_CHECKSUM_LOG).map(|rec| Places {
            uuid: self.uuid,
            extents: rec.extents.clone(),
            au_bytes: self.au_bytes,
        })
    }

    /// File 8's entry was committed (made, or its extent moved): the data
    /// plane's log writes where it now is.
    pub(super) fn publish_log(&mut self) {
        self.plane.sums_log().set_places(self.log_places());
    }

    /// Block `block` of file 8 from every online copy that can be read
    /// (a failed read tried again, [`JOURNAL_READ_TRIES`] times in all). A
    /// copy that cannot be read is left out as long as another could be:
    /// a record or header is acknowledged only once every copy it missed
    /// is on a disk taken offline, so an online copy that was read holds
    /// whatever the log acknowledged. No copy read at all is an error.
    fn read_log_block(
        &mut self,
        block: u64,
        ring: &Ring,
    ) -> Result<Vec<cairn_io::AlignedBuf>, GroupError> {
        let mut left: Vec<(u16, u64)> = ring
            .places(block)
            .into_iter()
            .filter(|(d, _)| self.member(*d).and_then(Member::online).is_some())
            .collect();
        let any = !left.is_empty();
        let mut out = Vec::new();
        let mut failed = Vec::new();
        for _ in 0..JOURNAL_READ_TRIES {
            failed.clear();
            let mut still = Vec::new();
            for (disk, offset) in left {
                match self.read_one(disk, offset, BLOCK_BYTES) {
                    Ok(buf) => out.push(buf),
                    Err(e) => {
                        failed.push(format!("{}: {e}", self.disk_name(disk)));
                        still.push((disk, offset));
                    }
                }
            }
            left = still;
            if left.is_empty() || !out.is_empty() {
                break;
            }
        }
        if any && out.is_empty() {
            return Err(GroupError::Unreadable(format!(
                "block {block} of the checksum log (file {FILE_CHECKSUM_LOG}) could not be read from any copy ({}); it may hold the log's newest records, so the group is not mounted: mount it again once the disk answers",
                failed.join("; ")
            )));
        }
        Ok(out)
    }

    /// The log as the disks hold it (mount): its newest header, then its
    /// records from the header's start, each the next sequence at the next
    /// block chained to the one before, on any copy, up to the first that
    /// is not (returned with their sequences); the ring's next record goes
    /// after them. `None` for a group without a log. Both headers blank on every copy is a log never
    /// checkpointed; a header copy that is neither blank nor valid, with
    /// no valid one, is an error (the log's start is unknown).
    pub(super) fn open_log(&mut self) -> Result<Option<(Ring, Records)>, GroupError> {
        let Some(places) = self.log_places() else {
            return Ok(None);
        };
        self.plane.sums_log().set_places(Some(places.clone()));
        let mut ring = Ring::new(std::sync::Arc::new(places), LogHeader::EMPTY);
        let mut header: Option<LogHeader> = None;
        let mut damaged = [0; LOG_HEADER_BLOCKS as usize];
        for slot in 0..LOG_HEADER_BLOCKS {
            for buf in self.read_log_block(slot, &ring)? {
                match meta::open(&buf[..], header_id(slot), self.uuid)
                    .ok()
                    .and_then(|_| LogHeader::decode(&buf[..]).ok())
                {
                    Some(h) => {
                        if header.is_none_or(|b| h.header_generation > b.header_generation) {
                            header = Some(h);
                        }
                    }
                    None if buf.iter().all(|b| *b == 0) => {}
                    None => damaged[slot as usize] += 1,
                }
            }
        }
        // Slot 0 blank everywhere: at most one header was ever written
        // (generation 1, slot 1), and a crash may have torn it: the log
        // starts where a log never checkpointed does.
        let header = match header {
            Some(h) => h,
            None if damaged[0] == 0 => LogHeader::EMPTY,
            None => {
                return Err(GroupError::Corrupt(format!(
                    "the checksum log (file {FILE_CHECKSUM_LOG}) has no valid header on any copy ({} damaged); where its records start is unknown",
                    damaged.iter().sum::<usize>()
                )))
            }
        };
        ring = Ring::new(ring.places.clone(), header);
        let room = ring.blocks().saturating_sub(LOG_HEADER_BLOCKS);
        let mut records = Vec::new();
        for _ in 0..room {
            let (position, seq, prev) = (ring.position, ring.next_seq, ring.prev_checksum);
            let found = self
                .read_log_block(position, &ring)?
                .into_iter()
                .find_map(|buf| {
                    if meta::open(&buf[..], record_id(position), self.uuid) != Ok(seq) {
                        return None;
                    }
                    let record = IntentRecord::decode(&buf[..])
                        .ok()
                        .filter(|r| r.prev_checksum == prev)?;
                    Some((meta::checksum_of(&buf[..]), record))
                });
            let Some((checksum, record)) = found else {
                break;
            };
            records.push((seq, record));
            ring.prev_checksum = checksum;
            ring.next_seq = seq + 1;
            ring.position = ring.after(position);
        }
        Ok(Some((ring, records)))
    }

    /// A writing mount's start of the log: read where it stands, judge
    /// what its records and regions say against every copy
    /// ([`Self::recover_checksum_log`]), and checkpoint the maps, which
    /// starts it afresh at a record of its own naming the regions the last
    /// record announced (so a crash before the maps are durable leaves
    /// them to scan again); a record after the checkpoint names none.
    pub(super) fn start_checksum_log(&mut self) -> Result<RecoveredLog, GroupError> {
        let Some((ring, records)) = self.open_log()? else {
            return Ok(RecoveredLog::default());
        };
        self.plane.sums_log().lock().set_ring(Some(ring));
        let recovered = self.recover_checksum_log(&records)?;
        if let Some((_, last)) = records.last() {
            self.plane.sums_log().announce(&last.regions);
        }
        self.close_checksum_log()?;
        Ok(recovered)
    }

    /// The recovery of the log a crash left (`docs/checksums.md`,
    /// "Recovery"; `data/recover.rs`): every unit its records name, and
    /// every unit of the regions its last record announces, judged against
    /// every copy; the judgements go into the files' checksums in memory,
    /// for the mount's checkpoint to write. Runs of a file deleted or made
    /// again since are of no file now, and are passed over.
    pub(super) fn recover_checksum_log(
        &mut self,
        records: &[(u64, IntentRecord)],
    ) -> Result<RecoveredLog, GroupError> {
        let mut out = RecoveredLog::default();
        let Some((_, last)) = records.last() else {
            return Ok(out);
        };
        let facts = LogFacts {
            checkpoints: records
                .iter()
                .filter_map(|(seq, r)| r.checkpoint.map(|from| (*seq, from)))
                .collect(),
            flushed_through: records
                .iter()
                .map(|(_, r)| r.flushed_through)
                .max()
                .unwrap_or(0),
        };
        let mut files: BTreeMap<u32, FileIntents> = BTreeMap::new();
        for (seq, record) in records {
            for run in &record.runs {
                let now = self.files.get(run.file).map(|f| f.entry.incarnation);
                if now != Some(run.incarnation) {
                    continue;
                }
                let named = &mut files.entry(run.file).or_default().named;
                for (i, sum) in run.checksums.iter().enumerate() {
                    named
                        .entry(run.first_unit + i as u64)
                        .or_default()
                        .push((*seq, *sum));
                }
            }
        }
        for region in &last.regions {
            files
                .entry(region.file)
                .or_default()
                .regions
                .insert(region.index);
        }
        let uuid = self.uuid;
        for (file, intents) in files {
            let Some(incarnation) = self.files.get(file).map(|f| f.entry.incarnation) else {
                continue;
            };
            let Some(sums) = self.plane.file_sums(file, incarnation) else {
                continue;
            };
            out.add(data::recover_file(
                self, uuid, file, &sums, &intents, &facts,
            )?);
        }
        if out != RecoveredLog::default() {
            tracing::info!(
                "checksum log recovered: {} units judged, {} copies rewritten, {} units adopted, {} ranges damaged, {} lost, {} units unread",
                out.units_judged,
                out.copies_rewritten,
                out.units_adopted,
                out.damaged.len(),
                out.lost.len(),
                out.units_unread
            );
        }
        Ok(out)
    }

    /// Disks a log write failed on go offline (with no lock of the log held).
    pub(super) fn report_log_failures(
        &mut self,
        failed: &super::data::FailedDisks,
    ) -> Result<(), GroupError> {
        if failed.is_empty() {
            return Ok(());
        }
        let epoch = self.plane.disks().epoch;
        self.disks_failed(failed, epoch)
    }
}
