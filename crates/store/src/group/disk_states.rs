//! Disk state changes, said once each and counted.
//!
//! Every change of a disk's state — ONLINE, SYNCING, OFFLINE, DROPPING, a
//! disk added or gone — becomes durable in one place: a new superblock
//! generation, whose disk directory lists every member with its state
//! ([`Group::write_superblocks`], and the last generation a stopped group
//! writes). So that is where changes are found: the directory just written
//! is compared with the one recorded before it (read at mount, then each
//! one written), and each disk whose state differs is one log line — the
//! group, the disk's label, old -> new state, and why — and one count
//! ([`Group::disk_state_changes`]; the service's
//! `cairn_disk_state_changes_total`). Code that changes a state never logs
//! it: it says why beforehand ([`Group::say_why`]; an I/O failure is
//! noted where the I/O failed, [`Group::note_failure`]), and a change
//! nobody explained gets the reason its transition implies
//! ([`implied_why`]). A change memory made that no generation recorded (the
//! group stopped first) is not said: it did not happen on the disks.
//!
//! The log goes through `tracing`: the service writes it to its log; a
//! command run without a service installs no subscriber, and says what
//! happened in its own output.

use super::*;

/// What a disk that left the group (its drop completed) is shown as.
pub const DROPPED: &str = "DROPPED";

/// A disk's state as `group disks` shows it: DROPPING while it is being
/// dropped (whatever its state beside that), else its state.
pub(super) fn shown(entry: &DiskEntry) -> &'static str {
    if entry.dropping() {
        "DROPPING"
    } else {
        entry.state.as_str()
    }
}

/// How many times a disk's state changed to `to` since the group was
/// mounted (a disk dropped since is still counted, by its label).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct StateChangeCount {
    pub disk: String,
    pub to: String,
    pub count: u64,
}

/// A disk as the last recorded directory lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Recorded {
    pub(super) number: u16,
    pub(super) label: String,
    pub(super) state: &'static str,
    pub(super) forced: bool,
}

/// The disks of a directory, by disk uuid.
pub(super) fn recorded(entries: &[DiskEntry]) -> BTreeMap<Uuid, Recorded> {
    entries
        .iter()
        .map(|e| {
            (
                e.disk_uuid,
                Recorded {
                    number: e.number,
                    label: e.label.clone(),
                    state: shown(e),
                    forced: e.forced(),
                },
            )
        })
        .collect()
}

/// Why an I/O error took a disk out, in a few words and the error.
pub(super) fn failure_reason(error: &IoError) -> String {
    match error {
        IoError::TimedOut { .. } => format!("I/O timeout (disk_io_timeout): {error}"),
        IoError::ShortTransfer { .. } | IoError::OutOfRange { .. } => {
            format!("short read (its file truncated, or its LUN shrunk, under the group): {error}")
        }
        _ => format!("I/O error: {error}"),
    }
}

/// The reason a transition implies, for a change nobody explained.
/// `from`: `None` for a disk that was not in the group.
pub(super) fn implied_why(from: Option<&str>, to: &str, forced: bool) -> &'static str {
    match (from, to) {
        (None, _) => "added to the group",
        (_, DROPPED) if forced => "dropped by force: its copies were rebuilt on the other disks",
        (_, DROPPED) => "dropped: its copies moved to the other disks",
        (_, "DROPPING") if forced => {
            "dropped by force: its copies are rebuilt from their mirrors by the rebalance"
        }
        (_, "DROPPING") => "drop requested: the rebalance moves its copies off",
        (Some("DROPPING"), _) => "drop cancelled (undrop)",
        (_, "SYNCING") => "back: what it missed is being resynced",
        (Some("SYNCING"), "ONLINE") => "resync done",
        (_, "OFFLINE") => "taken offline",
        _ => "changed",
    }
}

impl Group<'_> {
    /// Why disk `disk`'s next recorded state change happens (said in its
    /// log line). Called by the code that changes the state, before the
    /// superblocks record it; forgotten after the next generation.
    pub(super) fn say_why(&mut self, disk: u16, why: impl Into<String>) {
        self.states.say_why(disk, why.into());
    }

    /// An I/O to `disk` failed with `error`: the first such failure is
    /// what its going OFFLINE is said with ([`Group::set_offline`]).
    pub(super) fn note_failure(&mut self, disk: u16, error: &IoError) {
        self.note_failure_why(disk, &failure_reason(error));
    }

    /// [`Group::note_failure`], with the reason in words (a data thread's,
    /// or a heartbeat's).
    pub(super) fn note_failure_why(&mut self, disk: u16, why: &str) {
        // A disk out of service already (a last flush of one just taken
        // offline) goes nowhere: a note kept for it would be told when it
        // fails again, long after.
        if self.member(disk).and_then(Member::writable).is_none() {
            return;
        }
        self.states.note_failure(disk, why);
    }

    /// The disk directory `entries` is durable now (a superblock generation
    /// landed): each disk whose state differs from the last recorded
    /// directory is said and counted, and `entries` is the record.
    pub(super) fn record_states(&mut self, entries: &[DiskEntry]) {
        self.states.record(&self.name, entries);
    }

    /// How many times each disk's state changed, to which state, since the
    /// group was mounted.
    pub fn disk_state_changes(&self) -> Vec<StateChangeCount> {
        self.states.counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_nobody_explained_is_said_by_its_transition() {
        assert_eq!(implied_why(None, "ONLINE", false), "added to the group");
        assert_eq!(implied_why(Some("SYNCING"), "ONLINE", false), "resync done");
        assert_eq!(
            implied_why(Some("OFFLINE"), "SYNCING", false),
            "back: what it missed is being resynced"
        );
        assert!(implied_why(Some("OFFLINE"), "DROPPING", true).contains("by force"));
        assert!(implied_why(Some("DROPPING"), DROPPED, false).contains("moved"));
        assert_eq!(
            implied_why(Some("DROPPING"), "ONLINE", false),
            "drop cancelled (undrop)"
        );
    }

    #[test]
    fn an_io_failure_says_whether_the_disk_failed_or_hung() {
        let failed = IoError::Os {
            kind: cairn_io::OpKind::Write,
            offset_bytes: 4096,
            len_bytes: 8192,
            errno: libc::EIO,
        };
        let why = failure_reason(&failed);
        assert!(
            why.starts_with("I/O error: ") && why.contains("Input/output error"),
            "{why}"
        );
        let hung = IoError::TimedOut {
            kind: cairn_io::OpKind::Read,
            offset_bytes: 0,
            len_bytes: 4096,
            timeout_ms: 2000,
        };
        assert!(failure_reason(&hung).starts_with("I/O timeout"));
    }
}
