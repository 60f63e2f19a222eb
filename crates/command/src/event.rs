//! What a command tells its asker while it runs, before its reply: progress
//! and notes. The CLI draws them (a progress bar on a terminal, a line on
//! standard error); through the service they travel as lines of the answer
//! (`wire.rs`); a long operation in the background sends them to the
//! service's log.

use serde::{Deserialize, Serialize};

use cairn_store::group::MountReport;

/// What a long operation counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Au,
    Byte,
}

/// How far a long operation is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    /// What runs: "resync", "rebalance", "scrub", "reclaim", "cp".
    pub what: String,
    pub unit: Unit,
    pub done: u64,
    /// 0 while unknown (a copy of a stream).
    pub total: u64,
}

/// One thing a command says as it goes (a handful a command: boxing the
/// mount's report would save nothing).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// The command mounted the group for itself, and what the mount found
    /// (warnings, damage, disks found missing or resynced).
    Mounted {
        group: String,
        report: MountReport,
    },
    /// Disks the command took offline after an I/O error: out of use for
    /// good, whether the command then succeeded or not.
    TakenOffline {
        group: String,
        disks: Vec<String>,
    },
    Progress(Progress),
    /// A line for the asker's standard error that is not an error: what the
    /// command noticed (a copy cut at `--max-size`, a FIFO waiting for its
    /// writer).
    Note(String),
}

/// Where a command's events go.
pub trait Events {
    fn send(&mut self, event: Event);
}

/// Events nobody hears (a listing that has nothing to say as it goes).
pub struct Quiet;

impl Events for Quiet {
    fn send(&mut self, _event: Event) {}
}

impl<F: FnMut(Event)> Events for F {
    fn send(&mut self, event: Event) {
        self(event)
    }
}
