//! What a command answers: one typed value per kind of answer. The CLI
//! renders it (text for people, JSON for programs) and ends with the exit
//! status [`Reply::outcome`] gives, whether the command ran in the CLI's own
//! process or in the service: one reply, one rendering, one status.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use cairn_format::group::DiskState;
use cairn_store::group::check::CheckReport;
use cairn_store::group::reclaim::ReclaimReport;
use cairn_store::group::relocate::{Explain, RebalanceReport};
use cairn_store::group::resync::ResyncReport;
use cairn_store::group::scrub::ScrubReport;
use cairn_store::group::{DirEntry, DiskInfo, MountReport};
use cairn_store::group_admin::{CreatedDisk, DiskSpaceReport};
use cairn_store::ops::OpStatus;

pub use crate::status::{DiskStatus, GroupStatus, Status, VolumeStatus};

/// One row of `group list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupSummary {
    pub name: String,
    pub uuid: uuid::Uuid,
    pub state: String,
    pub redundancy: String,
    pub sector_bytes: u32,
    pub au_mb: u64,
    pub total_mb: u64,
    pub free_mb: u64,
    pub required_mirror_free_mb: u64,
    pub usable_file_mb: i64,
    pub offline_disks: usize,
    pub disks: usize,
    pub warnings: Vec<String>,
}

/// `group create`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Created {
    pub group: GroupSummary,
    pub disks: Vec<CreatedDisk>,
    pub bytes_written: u64,
}

/// One row of `group disks`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskRow {
    #[serde(flatten)]
    pub disk: DiskInfo,
    pub path: Option<PathBuf>,
    pub au_bytes: u64,
}

/// `group mount`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Mounted {
    pub group: GroupSummary,
    pub recovery: MountReport,
}

/// `group online`: what the resyncs did (the mount's own, when the command
/// mounted the group, and the one it ran), the disks after it, and which
/// disks it was asked for (`None`: every OFFLINE one).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Onlined {
    pub group: String,
    pub mount_resync: ResyncReport,
    pub resync: ResyncReport,
    pub disks: Vec<DiskInfo>,
    #[serde(default)]
    pub asked: Option<Vec<String>>,
    /// Disks named that were ONLINE already: nothing to do for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub already_online: Vec<String>,
}

/// `group offline`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Offlined {
    pub group: String,
    pub offline: Vec<String>,
    pub disks: Vec<DiskInfo>,
}

/// `group rebalance`, and the rebalance an `alter`, `drop-disk` or
/// `replace` runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rebalanced {
    pub group: String,
    pub rebalance: RebalanceReport,
    pub disks: Vec<DiskInfo>,
}

/// What `alter` changed before its rebalance.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Altered {
    pub group: String,
    pub added: Vec<String>,
    pub dropping: Vec<String>,
    pub resized: Vec<String>,
}

/// A long operation handed to the service's background (the asker did not
/// `--wait`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Started {
    pub group: String,
    pub what: String,
    pub power: u16,
}

/// A volume as `volume list` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VolumeRow {
    pub name: String,
    pub size_bytes: u64,
    pub redundancy: String,
    /// Its block device, when attached.
    pub device: Option<String>,
    /// ATTACHED or DETACHED.
    pub state: String,
}

/// What a command answers. One per command, made once and shown once:
/// boxing its larger variants would save nothing worth the noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    Created(Created),
    List(Vec<GroupSummary>),
    Disks(Vec<DiskRow>),
    Mounted(Mounted),
    Check {
        group: String,
        report: CheckReport,
    },
    Scrub {
        group: String,
        report: ScrubReport,
    },
    Reclaim {
        group: String,
        report: ReclaimReport,
    },
    Space(Vec<DiskSpaceReport>),
    Online(Onlined),
    Offline(Offlined),
    Explained {
        group: String,
        explain: Explain,
    },
    /// A change (`alter`, `drop-disk`, `replace`), then what its rebalance
    /// answered (done, or started in the background).
    Changed {
        altered: Option<Altered>,
        then: Box<Reply>,
    },
    Rebalanced(Rebalanced),
    Undropped {
        group: String,
        undropped: Vec<String>,
    },
    Ops {
        group: Option<String>,
        ops: Vec<OpStatus>,
    },
    /// `group get`, `group set`: key, value, in the order asked.
    Attributes(Vec<(String, String)>),
    Listing {
        path: String,
        entries: Vec<DirEntry>,
    },
    Du {
        path: String,
        used_bytes: u64,
        allocated_with_mirrors_bytes: u64,
    },
    /// Done, with nothing to say (`mkdir`, `rm`, `mkalias`, `cp` out).
    Done,
    /// `cp` into a group.
    CopiedIn {
        dest: String,
        bytes_copied: u64,
        /// Cut at `max_bytes` while the source had more.
        stopped_at_max: bool,
    },
    /// `cp` out of (or between groups, from) a served group: the file is
    /// there, and the asker reads it through the service's file system at
    /// `path` with its own rights; `template`, for a copy into a group.
    ReadThrough {
        path: PathBuf,
        template: String,
    },
    Started(Started),
    Status(Box<Status>),
    VolumeCreated(VolumeRow),
    VolumeAttached {
        name: String,
        device: PathBuf,
    },
    VolumeDetached {
        name: String,
        device: PathBuf,
        /// Still open somewhere: the kernel detaches it at its last close.
        deferred: bool,
    },
    VolumeResized {
        name: String,
        size_bytes: u64,
        device: Option<PathBuf>,
    },
    Volumes(Vec<VolumeRow>),
}

/// How a command ended, for its exit status: done (0), failed (1, with
/// the line to say), or DEGRADED (3: consistent, but a disk is not in use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Failed(String),
    Degraded(String),
}

impl Reply {
    /// What the reply means for the exit status. The rules live here, so
    /// that a reply gives the same status wherever the command ran.
    pub fn outcome(&self) -> Outcome {
        match self {
            Reply::Check { group, report } => check_outcome(group, report),
            Reply::Scrub { group, report } => scrub_outcome(group, report),
            Reply::Reclaim { group, report } => reclaim_outcome(group, report),
            Reply::Online(o) => online_outcome(o),
            Reply::Rebalanced(r) => rebalance_outcome(&r.group, &r.rebalance),
            Reply::Changed { then, .. } => then.outcome(),
            _ => Outcome::Done,
        }
    }
}

fn check_outcome(group: &str, report: &CheckReport) -> Outcome {
    let left: Vec<_> = report.problems.iter().filter(|p| !p.repaired).collect();
    if !left.is_empty() {
        let fixable = left.iter().filter(|p| p.repairable).count();
        let stuck: Vec<String> = left
            .iter()
            .filter(|p| !p.repairable)
            .map(|p| format!("{}: {}", p.location, p.what))
            .collect();
        let mut message = format!("group {group} has {} problem(s)", left.len());
        if fixable > 0 {
            message.push_str(&format!(
                "; `cairn group check {group} --repair` fixes {fixable} of them"
            ));
        }
        if let Some(first) = stuck.first() {
            message.push_str(&format!(
                "; {} cannot be fixed by check and need a decision (the first: {first})",
                stuck.len()
            ));
        }
        return Outcome::Failed(message);
    }
    if report.degraded() {
        return Outcome::Degraded(format!(
            "group {group} is DEGRADED: {} — its files are served from the other copies, and one more failure in another failure group could lose data",
            report.disks_not_in_use.join(", ")
        ));
    }
    Outcome::Done
}

fn scrub_outcome(group: &str, report: &ScrubReport) -> Outcome {
    if report.clean() {
        return Outcome::Done;
    }
    let left = report.problems.iter().filter(|p| !p.repaired).count();
    Outcome::Failed(format!(
        "group {group}: {left} disagreement(s) between copies (listed above); `cairn group scrub {group} --repair` rewrites what a majority of copies, or --prefer DISK, decides"
    ))
}

fn reclaim_outcome(group: &str, report: &ReclaimReport) -> Outcome {
    let failed: u64 = report.disks.iter().map(|d| d.failed_requests).sum();
    if failed > 0 {
        return Outcome::Degraded(format!(
            "group {group}: {failed} reclaim request(s) failed (refused by the device, or not flushed); those AUs stay returnable (`cairn group space {group}`), and the next reclaim tries them again"
        ));
    }
    let skipped: u64 = report
        .disks
        .iter()
        .filter(|d| d.skipped.is_some())
        .map(|d| d.returnable_bytes)
        .sum();
    // Failed only when no disk could be worked on at all (every one
    // skipped) while some hold returnable space.
    let none_worked = report.disks.iter().all(|d| d.skipped.is_some());
    if !report.explain && none_worked && skipped > 0 {
        return Outcome::Failed(format!(
            "group {group}: nothing given back: {} MiB are returnable on disks this reclaim skips (see NOTE); for an array that only detects zeros, reclaim with --zero-fill",
            skipped >> 20
        ));
    }
    Outcome::Done
}

fn online_outcome(o: &Onlined) -> Outcome {
    let left: Vec<String> = o
        .disks
        .iter()
        .filter(|d| d.state != DiskState::Online)
        .filter(|d| {
            o.asked
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n.eq_ignore_ascii_case(&d.label)))
        })
        .map(|d| format!("{} ({})", d.label, d.state.as_str()))
        .collect();
    if left.is_empty() {
        return Outcome::Done;
    }
    Outcome::Degraded(format!(
        "group {} still has disks that are not ONLINE: {} (a disk that is not attached stays OFFLINE; see `cairn group disks {}`)",
        o.group,
        left.join(", "),
        o.group
    ))
}

fn rebalance_outcome(group: &str, report: &RebalanceReport) -> Outcome {
    if report.moves_left.is_empty() {
        return Outcome::Done;
    }
    Outcome::Failed(format!(
        "group {group}: {} move(s) could not be made (above); `cairn group rebalance {group}` tries again",
        report.moves_left.len()
    ))
}
