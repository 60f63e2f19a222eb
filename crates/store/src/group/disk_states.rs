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
//! (`parts::state_log::implied_why`). A change memory made that no generation recorded (the
//! group stopped first) is not said: it did not happen on the disks.
//!
//! The log goes through `tracing`: the service writes it to its log; a
//! command run without a service installs no subscriber, and says what
//! happened in its own output.

use cairn_format::group::DiskEntry;
use cairn_io::IoError;

use super::mounted::Group;
use super::parts::members::Member;
pub use super::parts::state_log::{StateChangeCount, DROPPED};

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
    use cairn_io::IoError;

    use super::*;

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
