//! The disks' state log: the disk directory the superblocks last recorded,
//! why each disk's next change happens, the first failure noted on each
//! disk, and how many changes were said (`disk_states.rs` says how a
//! change is found and told).
//!
//! Owned by the [`Group`](super::super::Group) (changed only under its
//! `&mut`, i.e. under a live group's `meta`).

use std::collections::BTreeMap;

use cairn_format::group::DiskEntry;
use serde::Serialize;
use uuid::Uuid;

use super::violations::Violations;

/// What a disk that left the group (its drop completed) is shown as.
pub const DROPPED: &str = "DROPPED";

/// A disk's state as `group disks` shows it: DROPPING while it is being
/// dropped (whatever its state beside that), else its state.
pub(in crate::group) fn shown(entry: &DiskEntry) -> &'static str {
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
pub(in crate::group) struct Recorded {
    number: u16,
    label: String,
    state: &'static str,
    forced: bool,
}

/// The disks of a directory, by disk uuid.
pub(in crate::group) fn recorded(entries: &[DiskEntry]) -> BTreeMap<Uuid, Recorded> {
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

/// The reason a transition implies, for a change nobody explained.
/// `from`: `None` for a disk that was not in the group.
pub(in crate::group) fn implied_why(from: Option<&str>, to: &str, forced: bool) -> &'static str {
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

#[derive(Debug, Default)]
pub(in crate::group) struct StateLog {
    /// The disk directory the superblocks last recorded (read at mount,
    /// then each generation written), by disk uuid: what a new
    /// generation's states are compared with.
    recorded: BTreeMap<Uuid, Recorded>,
    /// Why each disk's next recorded state change happens, said by the
    /// code that changes it; forgotten once a generation is written.
    change_why: BTreeMap<u16, String>,
    /// The first I/O failure noted on each disk since it was last taken
    /// offline: what its going OFFLINE is said with.
    failure_why: BTreeMap<u16, String>,
    /// State changes recorded since mount, by (disk label, state to).
    changes: BTreeMap<(String, &'static str), u64>,
}

impl StateLog {
    /// The directory the superblocks hold at mount.
    pub(in crate::group) fn set_recorded(&mut self, entries: &[DiskEntry]) {
        self.recorded = recorded(entries);
    }

    /// Why disk `disk`'s next recorded change happens.
    pub(in crate::group) fn say_why(&mut self, disk: u16, why: String) {
        self.change_why.insert(disk, why);
    }

    /// The change said for `disk` will not happen.
    pub(in crate::group) fn unsay_why(&mut self, disk: u16) {
        self.change_why.remove(&disk);
    }

    /// An I/O to `disk` failed: kept if it is the first since the disk was
    /// last taken offline.
    pub(in crate::group) fn note_failure(&mut self, disk: u16, why: &str) {
        self.failure_why
            .entry(disk)
            .or_insert_with(|| why.to_string());
    }

    /// The first failure noted on `disk`, forgotten.
    pub(in crate::group) fn take_failure(&mut self, disk: u16) -> Option<String> {
        self.failure_why.remove(&disk)
    }

    /// The directory `entries` is durable now: each disk whose state
    /// differs from the last recorded directory is said (in `group`'s
    /// log) and counted, and `entries` is the record.
    pub(in crate::group) fn record(&mut self, group: &str, entries: &[DiskEntry]) {
        let now = recorded(entries);
        let mut changes = Vec::new();
        for (uuid, r) in &now {
            let before = self.recorded.get(uuid);
            if before.is_some_and(|b| b.state == r.state) {
                continue;
            }
            changes.push((
                r.number,
                r.label.clone(),
                before.map(|b| b.state),
                r.state,
                r.forced,
            ));
        }
        for (uuid, b) in &self.recorded {
            if !now.contains_key(uuid) {
                changes.push((b.number, b.label.clone(), Some(b.state), DROPPED, b.forced));
            }
        }
        for (number, label, from, to, forced) in changes {
            let why = self
                .change_why
                .get(&number)
                .cloned()
                .unwrap_or_else(|| implied_why(from, to, forced).to_string());
            let from = from.unwrap_or("(not in the group)");
            if matches!(to, "OFFLINE" | "DROPPING" | DROPPED) {
                tracing::warn!(group = %group, disk = %label, "group {group}: disk {label}: {from} -> {to}: {why}");
            } else {
                tracing::info!(group = %group, disk = %label, "group {group}: disk {label}: {from} -> {to}: {why}");
            }
            *self.changes.entry((label, to)).or_default() += 1;
        }
        self.change_why.clear();
        self.recorded = now;
    }

    /// How many times each disk's state changed, to which state.
    pub(in crate::group) fn counts(&self) -> Vec<StateChangeCount> {
        self.changes
            .iter()
            .map(|((disk, to), count)| StateChangeCount {
                disk: disk.clone(),
                to: (*to).to_string(),
                count: *count,
            })
            .collect()
    }

    /// Whether the record is `entries` (the last generation written).
    pub(in crate::group) fn records(&self, entries: &[DiskEntry]) -> bool {
        self.recorded == recorded(entries)
    }

    /// What must hold between any two operations:
    /// - every count counts at least one change;
    /// - at rest (`at_rest`: no operation under way, none waiting for a
    ///   commit), no reason waits for a change: a reason said for a change
    ///   that did not happen would be told for the next, unrelated one.
    pub(in crate::group) fn check_invariants(&self, at_rest: bool, out: &mut Violations) {
        for ((disk, to), n) in &self.changes {
            out.check(*n > 0, || {
                format!("disk {disk}: a count of 0 changes to {to}")
            });
        }
        if at_rest {
            out.check(self.change_why.is_empty(), || {
                format!(
                    "reasons said for changes no generation recorded: {:?}",
                    self.change_why
                )
            });
        }
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
}
