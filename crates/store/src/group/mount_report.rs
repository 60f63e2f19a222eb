//! What a mount found and did, and what a person must hear about it.

use serde::Serialize;

use super::resync;

/// What a mount found and did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct MountReport {
    /// Journal records replayed (applied in memory only, on a read-only mount).
    pub journal_records_replayed: u64,
    /// Members not found, recorded offline in the superblocks (a writer).
    pub disks_marked_offline: Vec<String>,
    /// Members not found, left as they are on disk (a read-only mount): the
    /// group is degraded while they are missing, and whole again when they
    /// are found.
    pub disks_missing: Vec<String>,
    pub operations_recovered: Vec<String>,
    pub repaired_copies: u64,
    pub warnings: Vec<String>,
    /// Metadata damage found at mount, each with where it is and what it
    /// affects (an AU two files claim, a block with no valid copy).
    pub damage: Vec<String>,
    /// Members recorded offline and found again: resynced (a writer).
    pub disks_returned: Vec<String>,
    /// Members recorded offline and found again that stay offline, each
    /// with why (taken offline on request, not the image the group left).
    pub disks_refused: Vec<String>,
    /// Members found, but OFFLINE on request: left so until `online`.
    pub disks_held: Vec<String>,
    /// What the mount's resync did, if it ran.
    pub resync: Option<resync::ResyncReport>,
    /// OFFLINE disks whose repair timer had run out, dropped by force (a
    /// rebalance rebuilds their copies).
    pub disks_dropped_expired: Vec<String>,
    /// What the recovery of the checksum log a crash left found and did
    /// (a writer; nothing after a clean dismount).
    #[serde(default)]
    pub checksum_log: super::data::RecoveredLog,
}

/// One thing a mount found that a person must hear about: the CLI prints
/// it on stderr (`cairn: warning: group G: ...`, or `cairn: group G: ...`
/// for news), the service logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountNotice {
    /// A warning (something is wrong or was repaired), or news.
    pub warning: bool,
    /// A member's state changed (marked OFFLINE, resynced back): a live
    /// group says these itself, one log line per change (`disk_states.rs`).
    pub disk_state: bool,
    pub text: String,
}

impl MountReport {
    /// What to say about this mount, in order: one sentence each, for
    /// whichever host mounted the group.
    pub fn notices(&self, group: &str) -> Vec<MountNotice> {
        let warn = |text: String| MountNotice {
            warning: true,
            disk_state: false,
            text,
        };
        let state = |text: String| MountNotice {
            warning: true,
            disk_state: true,
            text,
        };
        let mut out: Vec<MountNotice> = self.warnings.iter().cloned().map(warn).collect();
        out.extend(self.damage.iter().map(|d| warn(format!("DAMAGE: {d}"))));
        if self.repaired_copies > 0 {
            out.push(warn(format!(
                "{} metadata copies were damaged, blank or out of date beside a good one, and were rewritten from it (if this comes back, a disk may be losing or misplacing writes)",
                self.repaired_copies
            )));
        }
        out.extend(self.disks_marked_offline.iter().map(|d| state(format!(
            "disk {d} is not available (not found, or it could not be opened) and is now marked OFFLINE; the group runs DEGRADED on the other copies (check the discovery string and that the disk is attached)"
        ))));
        out.extend(self.disks_missing.iter().map(|d| warn(format!(
            "disk {d} is not available (not found, or it could not be opened); reading from the other copies, nothing was changed (check the discovery string and that the disk is attached)"
        ))));
        out.extend(self.disks_refused.iter().cloned().map(warn));
        out.extend(self.disks_dropped_expired.iter().map(|d| state(format!(
            "disk {d} was OFFLINE past its repair time (disk_repair_time) and is dropped by force; `cairn group rebalance {group}` rebuilds its copies from the mirrors"
        ))));
        if let Some(r) = &self.resync {
            // The counts are news beside the disks' state lines.
            out.push(MountNotice {
                warning: false,
                disk_state: false,
                text: format!(
                    "resynced {} stale AU(s) ({} MiB) and {} metadata block(s){}",
                    r.aus_copied,
                    r.bytes_copied >> 20,
                    r.metadata_blocks_rewritten,
                    if r.disks_online.is_empty() {
                        String::new()
                    } else {
                        format!("; disk(s) {} ONLINE again", r.disks_online.join(", "))
                    }
                ),
            });
            out.extend(r.aus_without_source.iter().map(|a| {
                warn(format!(
                    "no good copy to resync {a}: it stays stale and is never read"
                ))
            }));
        }
        out
    }
}
