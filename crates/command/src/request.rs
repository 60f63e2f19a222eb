//! What a command asks: one typed value per command, with typed fields.
//!
//! The CLI builds a [`Request`] from its command line (parsing sizes,
//! durations and paths, so that a malformed command line is the CLI's to
//! refuse); the service receives the same value over its socket
//! (`wire.rs`), never a command line. [`Request::validate`] is the one place
//! the bounds of every field are checked, for both: the executor calls it
//! before anything is opened.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::CommandError;

/// The most I/Os in flight a long operation may be given (`--power`).
pub const POWER_MAX: u16 = 1024;
/// The most requests in flight per disk a reclaim may be given.
pub const RECLAIM_POWER_MAX: u16 = 16;
/// The fastest pace a reclaim may be given, in bytes a second per disk: 100
/// GB/s, beyond any device a discard or zero-fill could reach (a larger
/// number is a typo, or `1e99`, and would overflow the pacing arithmetic).
pub const RECLAIM_RATE_BYTES_MAX: u64 = 100_000_000_000;
/// The most names one request may carry (disks, paths, keys): far above
/// any real command, low enough that a request cannot ask for unbounded
/// work or memory.
pub const NAMES_MAX: usize = 1024;
/// The longest text field (a path, a name, a value).
pub const TEXT_BYTES_MAX: usize = 4096;
/// The longest `--drop-after`: 45 days (a disk's own timer is kept in
/// minutes, in 16 bits).
pub const DROP_AFTER_SECONDS_MAX: u64 = 45 * 86_400;

/// A disk to add: its path (absolute: the CLI resolves it against its own
/// working directory) and, optionally, its failure group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewDiskSpec {
    pub path: PathBuf,
    pub failgroup: Option<String>,
}

/// A new size for a disk (`alter --resize DISK=SIZE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resize {
    pub disk: String,
    pub size_bytes: u64,
}

/// `group set KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setting {
    pub key: String,
    pub value: String,
}

/// How a reclaim gives space back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReclaimWay {
    Discard,
    ZeroFill,
}

/// Every command the executor carries out. A request says what, never how
/// it was typed: fields are typed and bounded ([`Request::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// `group create`: only ever carried out by the process that asks (no
    /// group is held yet).
    GroupCreate {
        group: String,
        redundancy: String,
        disks: Vec<NewDiskSpec>,
        au_bytes: u64,
        sector_bytes: Option<u32>,
        force: bool,
        take_from: Vec<String>,
    },
    GroupList,
    GroupDisks {
        group: String,
    },
    /// Mount, report, dismount: only by a process that can mount it.
    GroupMount {
        group: String,
        /// Take the group over from another host that stopped without
        /// letting go (`docs/multihost.md`).
        force: bool,
    },
    GroupCheck {
        group: String,
        repair: bool,
    },
    GroupScrub {
        group: String,
        power: u16,
        repair: bool,
        /// Where copies disagree and none outvotes the others: the disk whose
        /// copy wins (by label).
        prefer: Option<String>,
        wait: bool,
    },
    GroupReclaim {
        group: String,
        explain: bool,
        /// Bytes a second per disk; `None`: unpaced.
        rate_bytes: Option<u64>,
        power: u16,
        way: ReclaimWay,
        force: bool,
        compact: bool,
        wait: bool,
    },
    GroupSpace {
        group: String,
    },
    GroupOnline {
        group: String,
        /// `None`: every OFFLINE disk that is attached.
        disks: Option<Vec<String>>,
        power: u16,
        wait: bool,
    },
    GroupOffline {
        group: String,
        disks: Vec<String>,
        /// The disks' own repair timer instead of the group's.
        drop_after_seconds: Option<u64>,
    },
    GroupAlter {
        group: String,
        add: Vec<NewDiskSpec>,
        drop: Vec<String>,
        resize: Vec<Resize>,
        power: u16,
        explain: bool,
        force: bool,
        wait: bool,
    },
    GroupRebalance {
        group: String,
        power: u16,
        wait: bool,
    },
    GroupUndrop {
        group: String,
    },
    GroupDropDisk {
        group: String,
        disk: String,
        power: u16,
        wait: bool,
    },
    GroupReplace {
        group: String,
        disk: String,
        with: PathBuf,
        power: u16,
        force: bool,
        wait: bool,
    },
    GroupOps {
        group: Option<String>,
    },
    GroupSet {
        group: String,
        settings: Vec<Setting>,
    },
    GroupGet {
        group: String,
        keys: Vec<String>,
    },
    Ls {
        path: String,
    },
    Du {
        path: String,
    },
    Mkdir {
        path: String,
        parents: bool,
    },
    Rm {
        paths: Vec<String>,
    },
    Mkalias {
        target: String,
        alias: String,
    },
    /// A file into a group: its bytes come with the request (a descriptor
    /// over the socket, an open file in process).
    CpIn {
        /// What the source is called, for messages.
        source: String,
        /// Its own name, for a destination that is a directory.
        source_name: Option<String>,
        dest: String,
        template: Option<String>,
        redundancy: Option<String>,
        max_bytes: Option<u64>,
    },
    /// A group file out: into the destination that comes with the request
    /// (opened by the asker, with its own rights), or — from a service —
    /// read by the asker through the service's file system.
    CpOut {
        source: String,
        dest: String,
    },
    /// A group file into a group, both reached by the one executor.
    CpBetween {
        source: String,
        dest: String,
        template: Option<String>,
        redundancy: Option<String>,
    },
    Status,
    VolumeCreate {
        name: String,
        size_bytes: u64,
        redundancy: Option<String>,
    },
    VolumeAttach {
        name: String,
    },
    VolumeDetach {
        name: String,
    },
    VolumeResize {
        name: String,
        size_bytes: u64,
    },
    VolumeList {
        group: Option<String>,
    },
}

/// Who may ask for a command through the service's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// Anyone who may use the socket: listings, and namespace commands,
    /// which are checked against the asker's own credentials as the mount
    /// checks them.
    User,
    /// Root, the service's own user, or a member of the admin group: what
    /// changes the group itself or its disks, or reads all of it.
    Admin,
}

/// What a command is about, for deciding who carries it out.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Concern {
    /// One group, by name (upper case).
    Group(String),
    /// Every group discovery finds (`group list`).
    Discovery,
    /// What a service holds and does (`group ops` without a group,
    /// `status`, `volume list` without a group).
    Service,
    /// Only the asker can carry it out (creating a group).
    Asker,
}

fn group_of_path(text: &str) -> String {
    let t = text.trim_start_matches('+');
    t.split('/').next().unwrap_or(t).to_ascii_uppercase()
}

fn group_name(text: &str) -> String {
    text.trim_start_matches('+').to_ascii_uppercase()
}

impl Request {
    /// The command's name as the CLI spells it, for messages and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::GroupCreate { .. } => "group create",
            Self::GroupList => "group list",
            Self::GroupDisks { .. } => "group disks",
            Self::GroupMount { .. } => "group mount",
            Self::GroupCheck { .. } => "group check",
            Self::GroupScrub { .. } => "group scrub",
            Self::GroupReclaim { .. } => "group reclaim",
            Self::GroupSpace { .. } => "group space",
            Self::GroupOnline { .. } => "group online",
            Self::GroupOffline { .. } => "group offline",
            Self::GroupAlter { .. } => "group alter",
            Self::GroupRebalance { .. } => "group rebalance",
            Self::GroupUndrop { .. } => "group undrop",
            Self::GroupDropDisk { .. } => "group drop-disk",
            Self::GroupReplace { .. } => "group replace",
            Self::GroupOps { .. } => "group ops",
            Self::GroupSet { .. } => "group set",
            Self::GroupGet { .. } => "group get",
            Self::Ls { .. } => "ls",
            Self::Du { .. } => "du",
            Self::Mkdir { .. } => "mkdir",
            Self::Rm { .. } => "rm",
            Self::Mkalias { .. } => "mkalias",
            Self::CpIn { .. } | Self::CpOut { .. } | Self::CpBetween { .. } => "cp",
            Self::Status => "status",
            Self::VolumeCreate { .. } => "volume create",
            Self::VolumeAttach { .. } => "volume attach",
            Self::VolumeDetach { .. } => "volume detach",
            Self::VolumeResize { .. } => "volume resize",
            Self::VolumeList { .. } => "volume list",
        }
    }

    /// What the command is about.
    pub fn concern(&self) -> Concern {
        match self {
            Self::GroupCreate { .. } => Concern::Asker,
            Self::GroupList => Concern::Discovery,
            Self::GroupOps { group: None } | Self::Status | Self::VolumeList { group: None } => {
                Concern::Service
            }
            Self::GroupOps { group: Some(g) } | Self::VolumeList { group: Some(g) } => {
                Concern::Group(group_name(g))
            }
            Self::GroupDisks { group }
            | Self::GroupMount { group, .. }
            | Self::GroupCheck { group, .. }
            | Self::GroupScrub { group, .. }
            | Self::GroupReclaim { group, .. }
            | Self::GroupSpace { group }
            | Self::GroupOnline { group, .. }
            | Self::GroupOffline { group, .. }
            | Self::GroupAlter { group, .. }
            | Self::GroupRebalance { group, .. }
            | Self::GroupUndrop { group }
            | Self::GroupDropDisk { group, .. }
            | Self::GroupReplace { group, .. }
            | Self::GroupSet { group, .. }
            | Self::GroupGet { group, .. } => Concern::Group(group_name(group)),
            Self::Ls { path } | Self::Du { path } | Self::Mkdir { path, .. } => {
                Concern::Group(group_of_path(path))
            }
            // Carried out by one party: all in one group (validate refuses
            // paths in several).
            Self::Rm { paths } => {
                Concern::Group(paths.first().map(|p| group_of_path(p)).unwrap_or_default())
            }
            Self::Mkalias { target, .. } => Concern::Group(group_of_path(target)),
            Self::CpIn { dest, .. } => Concern::Group(group_of_path(dest)),
            Self::CpOut { source, .. } | Self::CpBetween { source, .. } => {
                Concern::Group(group_of_path(source))
            }
            Self::VolumeCreate { name, .. }
            | Self::VolumeAttach { name }
            | Self::VolumeDetach { name }
            | Self::VolumeResize { name, .. } => Concern::Group(group_of_path(name)),
        }
    }

    /// Who may ask for it through the socket.
    pub fn authority(&self) -> Authority {
        match self {
            Self::GroupList
            | Self::GroupDisks { .. }
            | Self::GroupSpace { .. }
            | Self::GroupOps { .. }
            | Self::GroupGet { .. }
            | Self::Ls { .. }
            | Self::Du { .. }
            | Self::Mkdir { .. }
            | Self::Rm { .. }
            | Self::Mkalias { .. }
            | Self::CpIn { .. }
            | Self::CpOut { .. }
            | Self::CpBetween { .. }
            | Self::Status
            | Self::VolumeList { .. } => Authority::User,
            Self::GroupCreate { .. }
            | Self::GroupMount { .. }
            | Self::GroupCheck { .. }
            | Self::GroupScrub { .. }
            | Self::GroupReclaim { .. }
            | Self::GroupOnline { .. }
            | Self::GroupOffline { .. }
            | Self::GroupAlter { .. }
            | Self::GroupRebalance { .. }
            | Self::GroupUndrop { .. }
            | Self::GroupDropDisk { .. }
            | Self::GroupReplace { .. }
            | Self::GroupSet { .. }
            | Self::VolumeCreate { .. }
            | Self::VolumeAttach { .. }
            | Self::VolumeDetach { .. }
            | Self::VolumeResize { .. } => Authority::Admin,
        }
    }

    /// Every field within its bounds: one refusal line saying which field
    /// and what it may be. The executor checks this before anything else,
    /// whichever door the request came in by.
    pub fn validate(&self) -> Result<(), CommandError> {
        self.check_fields()?;
        for t in self.texts() {
            if t.len() > TEXT_BYTES_MAX {
                return refused(format!(
                    "a name or value of {} bytes; at most {TEXT_BYTES_MAX}",
                    t.len()
                ));
            }
            if t.contains('\0') {
                return refused("a name or value holds a NUL byte".into());
            }
        }
        Ok(())
    }

    /// The rules of each kind's fields, but for the bounds of its texts
    /// ([`Self::texts`]): the first one broken, refused.
    fn check_fields(&self) -> Result<(), CommandError> {
        match self {
            // The AU size is the store's to judge (`group::create`).
            Self::GroupCreate {
                disks,
                sector_bytes,
                ..
            } => check_create(disks, *sector_bytes),
            Self::GroupScrub {
                power: p,
                prefer,
                repair,
                ..
            } => {
                power_within(*p, false, "a scrub")?;
                if prefer.is_some() && !repair {
                    return refused(
                        "--prefer DISK says which copy a repair keeps: give it with --repair"
                            .into(),
                    );
                }
                Ok(())
            }
            Self::GroupReclaim {
                rate_bytes,
                power: p,
                way,
                force,
                ..
            } => check_reclaim(*rate_bytes, *p, *way, *force),
            Self::GroupOnline {
                disks, power: p, ..
            } => {
                if let Some(d) = disks {
                    if d.is_empty() {
                        return refused("name the disks to bring back, or --all".into());
                    }
                    named_once(d, "disk")?;
                }
                power_within(*p, false, "a resync")
            }
            Self::GroupOffline {
                disks,
                drop_after_seconds,
                ..
            } => check_offline(disks, *drop_after_seconds),
            Self::GroupAlter {
                add,
                drop,
                resize,
                power: p,
                ..
            } => check_alter(add, drop, resize, *p),
            Self::GroupRebalance { power: p, .. } => power_within(*p, true, "a rebalance"),
            Self::GroupDropDisk { power: p, .. } => power_within(*p, true, "a rebuild"),
            Self::GroupReplace { with, power: p, .. } => {
                new_disk_path(with)?;
                power_within(*p, false, "a rebuild")
            }
            Self::GroupSet { settings, .. } => {
                if settings.is_empty() {
                    return refused("give KEY=VALUE pairs to set".into());
                }
                let keys: Vec<String> = settings.iter().map(|s| s.key.clone()).collect();
                named_once(&keys, "key")
            }
            Self::GroupGet { keys, .. } => named_once(keys, "key"),
            Self::Rm { paths } => check_rm(paths),
            Self::GroupList
            | Self::GroupDisks { .. }
            | Self::GroupMount { .. }
            | Self::GroupCheck { .. }
            | Self::GroupSpace { .. }
            | Self::GroupUndrop { .. }
            | Self::GroupOps { .. }
            | Self::Ls { .. }
            | Self::Du { .. }
            | Self::Mkdir { .. }
            | Self::Mkalias { .. }
            | Self::CpIn { .. }
            | Self::CpOut { .. }
            | Self::CpBetween { .. }
            | Self::Status
            | Self::VolumeCreate { .. }
            | Self::VolumeAttach { .. }
            | Self::VolumeDetach { .. }
            | Self::VolumeResize { .. }
            | Self::VolumeList { .. } => Ok(()),
        }
    }

    /// The names and values the request carries, in order: each must be at
    /// most [`TEXT_BYTES_MAX`] bytes and hold no NUL.
    fn texts(&self) -> Vec<&str> {
        let mut texts: Vec<&str> = Vec::new();
        match self {
            Self::GroupCreate {
                group,
                redundancy,
                disks,
                take_from,
                ..
            } => {
                texts.extend([group.as_str(), redundancy.as_str()]);
                texts.extend(take_from.iter().map(String::as_str));
                texts.extend(disks.iter().filter_map(|d| d.failgroup.as_deref()));
            }
            Self::GroupScrub { group, prefer, .. } => {
                texts.push(group);
                texts.extend(prefer.as_deref());
            }
            Self::GroupOnline { group, disks, .. } => {
                texts.push(group);
                texts.extend(disks.iter().flatten().map(String::as_str));
            }
            Self::GroupOffline { group, disks, .. } => {
                texts.push(group);
                texts.extend(disks.iter().map(String::as_str));
            }
            Self::GroupAlter {
                group,
                add,
                drop,
                resize,
                ..
            } => {
                texts.push(group);
                texts.extend(add.iter().filter_map(|d| d.failgroup.as_deref()));
                texts.extend(drop.iter().map(String::as_str));
                texts.extend(resize.iter().map(|r| r.disk.as_str()));
            }
            Self::GroupDropDisk { group, disk, .. } | Self::GroupReplace { group, disk, .. } => {
                texts.extend([group.as_str(), disk.as_str()]);
            }
            Self::GroupSet { group, settings } => {
                texts.push(group);
                for s in settings {
                    texts.extend([s.key.as_str(), s.value.as_str()]);
                }
            }
            Self::GroupGet { group, keys } => {
                texts.push(group);
                texts.extend(keys.iter().map(String::as_str));
            }
            Self::GroupDisks { group }
            | Self::GroupMount { group, .. }
            | Self::GroupCheck { group, .. }
            | Self::GroupSpace { group }
            | Self::GroupUndrop { group }
            | Self::GroupReclaim { group, .. }
            | Self::GroupRebalance { group, .. } => texts.push(group),
            Self::GroupOps { group } | Self::VolumeList { group } => texts.extend(group.as_deref()),
            Self::GroupList | Self::Status => {}
            Self::Ls { path } | Self::Du { path } | Self::Mkdir { path, .. } => texts.push(path),
            Self::Rm { paths } => texts.extend(paths.iter().map(String::as_str)),
            Self::Mkalias { target, alias } => texts.extend([target.as_str(), alias.as_str()]),
            Self::CpIn {
                source,
                source_name,
                dest,
                template,
                redundancy,
                ..
            } => {
                texts.extend([source.as_str(), dest.as_str()]);
                texts.extend(source_name.as_deref());
                texts.extend(template.as_deref());
                texts.extend(redundancy.as_deref());
            }
            Self::CpOut { source, dest } => texts.extend([source.as_str(), dest.as_str()]),
            Self::CpBetween {
                source,
                dest,
                template,
                redundancy,
            } => {
                texts.extend([source.as_str(), dest.as_str()]);
                texts.extend(template.as_deref());
                texts.extend(redundancy.as_deref());
            }
            Self::VolumeCreate {
                name, redundancy, ..
            } => {
                texts.push(name);
                texts.extend(redundancy.as_deref());
            }
            Self::VolumeAttach { name }
            | Self::VolumeDetach { name }
            | Self::VolumeResize { name, .. } => texts.push(name),
        }
        texts
    }
}

/// A refusal of a request's fields, saying which and what they may be.
fn refused(what: String) -> Result<(), CommandError> {
    Err(CommandError::Usage(what))
}

/// `--power` within its bounds: 1 (or 0, where `zero` says it may be) to
/// [`POWER_MAX`]; `what` names the operation it paces.
fn power_within(p: u16, zero: bool, what: &str) -> Result<(), CommandError> {
    let low = u16::from(!zero);
    if p < low || p > POWER_MAX {
        return Err(CommandError::Usage(format!(
            "--power {p}: {what} takes {low} to {POWER_MAX}"
        )));
    }
    Ok(())
}

/// A list of names (`what`s: disks, paths, keys) within [`NAMES_MAX`],
/// each named once (case and surrounding spaces aside).
fn named_once(list: &[String], what: &str) -> Result<(), CommandError> {
    if list.len() > NAMES_MAX {
        return Err(CommandError::Usage(format!(
            "{} {what}s named; at most {NAMES_MAX} at once",
            list.len()
        )));
    }
    let mut seen = BTreeSet::new();
    for n in list {
        if !seen.insert(n.trim().to_ascii_uppercase()) {
            return Err(CommandError::Usage(format!(
                "{what} {n} is named twice; name each once"
            )));
        }
    }
    Ok(())
}

/// `group create`'s disks (each an absolute path, named once, at least
/// one) and sector size.
fn check_create(disks: &[NewDiskSpec], sector_bytes: Option<u32>) -> Result<(), CommandError> {
    for d in disks {
        new_disk_path(&d.path)?;
    }
    let paths: Vec<String> = disks.iter().map(|d| d.path.display().to_string()).collect();
    named_once(&paths, "disk")?;
    if disks.is_empty() {
        return refused("name the group's disks with --disk PATH[=FAILGROUP]".into());
    }
    if let Some(s) = sector_bytes {
        if s != 512 && s != 4096 {
            return refused(format!("sector size {s}: use 512 or 4096"));
        }
    }
    Ok(())
}

/// `group reclaim`'s power, pace and way.
fn check_reclaim(
    rate_bytes: Option<u64>,
    p: u16,
    way: ReclaimWay,
    force: bool,
) -> Result<(), CommandError> {
    if p == 0 || p > RECLAIM_POWER_MAX {
        return refused(format!(
            "--power {p}: a reclaim takes 1 to {RECLAIM_POWER_MAX} requests in flight per disk"
        ));
    }
    if rate_bytes.is_some_and(|r| r == 0 || r > RECLAIM_RATE_BYTES_MAX) {
        return refused(format!(
            "--rate: give MB/s per disk, above 0 and at most {} (0 or no --rate: the default; to run unpaced, --rate 0)",
            RECLAIM_RATE_BYTES_MAX / 1_000_000
        ));
    }
    if force && way != ReclaimWay::ZeroFill {
        return refused("--force goes with --zero-fill".into());
    }
    Ok(())
}

/// `group offline`'s disks (at least one, each once) and `--drop-after`.
fn check_offline(disks: &[String], drop_after_seconds: Option<u64>) -> Result<(), CommandError> {
    if disks.is_empty() {
        return refused("name the disks to take offline".into());
    }
    named_once(disks, "disk")?;
    if let Some(s) = drop_after_seconds {
        if !(60..=DROP_AFTER_SECONDS_MAX).contains(&s) {
            return refused(format!(
                "--drop-after {s}s: give 1m to 45d (a disk's own timer is kept in minutes)"
            ));
        }
    }
    Ok(())
}

/// `group alter`'s disks to add, drop and resize (something to do, each
/// disk once in each list, none both dropped and resized) and its power.
fn check_alter(
    add: &[NewDiskSpec],
    drop: &[String],
    resize: &[Resize],
    p: u16,
) -> Result<(), CommandError> {
    if add.is_empty() && drop.is_empty() && resize.is_empty() {
        return refused(
            "name disks to --add PATH[=FAILGROUP], --drop DISK or --resize DISK=SIZE".into(),
        );
    }
    for d in add {
        new_disk_path(&d.path)?;
    }
    let paths: Vec<String> = add.iter().map(|d| d.path.display().to_string()).collect();
    named_once(&paths, "disk")?;
    named_once(drop, "disk")?;
    let resized: Vec<String> = resize.iter().map(|r| r.disk.clone()).collect();
    named_once(&resized, "disk")?;
    if let Some(both) = drop.iter().find(|d| {
        resize
            .iter()
            .any(|r| r.disk.trim().eq_ignore_ascii_case(d.trim()))
    }) {
        return refused(format!(
            "disk {both} is both dropped and resized; do one or the other"
        ));
    }
    power_within(p, true, "a rebalance")
}

/// `rm`'s paths: at least one, each once, all in one group.
fn check_rm(paths: &[String]) -> Result<(), CommandError> {
    if paths.is_empty() {
        return refused("name what to remove".into());
    }
    named_once(paths, "path")?;
    let groups: BTreeSet<String> = paths.iter().map(|p| group_of_path(p)).collect();
    if groups.len() > 1 {
        return refused(format!(
            "rm's paths are in {} groups ({}); remove each group's in a command of its own",
            groups.len(),
            groups.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(())
}

/// A device path a request names: absolute (the asker resolves it against
/// its own working directory: the service's is not the asker's), no NUL.
fn new_disk_path(path: &std::path::Path) -> Result<(), CommandError> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    if bytes.contains(&0) || bytes.len() > TEXT_BYTES_MAX {
        return Err(CommandError::Usage(format!(
            "device path {}: not a path",
            path.display()
        )));
    }
    if !path.is_absolute() {
        return Err(CommandError::Usage(format!(
            "the device path {} is relative; give the full path",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_named_twice_are_refused() {
        let r = Request::GroupOffline {
            group: "DATA".into(),
            disks: vec!["DATA_0001".into(), "data_0001".into()],
            drop_after_seconds: None,
        };
        let e = r.validate().expect_err("refused");
        assert!(e.to_string().contains("named twice"), "{e}");
        let r = Request::GroupAlter {
            group: "DATA".into(),
            add: vec![],
            drop: vec!["X".into(), "X".into()],
            resize: vec![],
            power: 4,
            explain: false,
            force: false,
            wait: false,
        };
        assert!(r.validate().is_err());
        let r = Request::GroupSet {
            group: "DATA".into(),
            settings: vec![
                Setting {
                    key: "k".into(),
                    value: "1h".into(),
                },
                Setting {
                    key: "k".into(),
                    value: "2h".into(),
                },
            ],
        };
        assert!(r.validate().is_err());
    }

    #[test]
    fn bounds_hold() {
        let reclaim = |rate: Option<u64>, power: u16| Request::GroupReclaim {
            group: "DATA".into(),
            explain: false,
            rate_bytes: rate,
            power,
            way: ReclaimWay::Discard,
            force: false,
            compact: false,
            wait: false,
        };
        assert!(reclaim(Some(256_000_000), 1).validate().is_ok());
        assert!(reclaim(None, 1).validate().is_ok());
        assert!(reclaim(Some(u64::MAX), 1).validate().is_err());
        assert!(reclaim(Some(256_000_000), 17).validate().is_err());
        let online = |power| Request::GroupOnline {
            group: "DATA".into(),
            disks: None,
            power,
            wait: false,
        };
        assert!(online(0).validate().is_err());
        assert!(online(POWER_MAX + 1).validate().is_err());
        assert!(online(8).validate().is_ok());
        let alter = Request::GroupAlter {
            group: "DATA".into(),
            add: vec![NewDiskSpec {
                path: "relative.img".into(),
                failgroup: None,
            }],
            drop: vec![],
            resize: vec![],
            power: 4,
            explain: false,
            force: false,
            wait: false,
        };
        assert!(alter
            .validate()
            .unwrap_err()
            .to_string()
            .contains("relative"));
    }
}
