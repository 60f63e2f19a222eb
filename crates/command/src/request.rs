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
        let bad = |what: String| Err(CommandError::Usage(what));
        let mut texts: Vec<&str> = Vec::new();
        let power = |p: u16, zero: bool, what: &str| -> Result<(), CommandError> {
            let low = u16::from(!zero);
            if p < low || p > POWER_MAX {
                return Err(CommandError::Usage(format!(
                    "--power {p}: {what} takes {low} to {POWER_MAX}"
                )));
            }
            Ok(())
        };
        let names = |list: &[String], what: &str| -> Result<(), CommandError> {
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
        };
        match self {
            // The AU size is the store's to judge (`group::create`).
            Self::GroupCreate {
                group,
                redundancy,
                disks,
                sector_bytes,
                take_from,
                ..
            } => {
                texts.extend([group.as_str(), redundancy.as_str()]);
                texts.extend(take_from.iter().map(String::as_str));
                for d in disks {
                    texts.extend(d.failgroup.as_deref());
                    new_disk_path(&d.path)?;
                }
                let paths: Vec<String> =
                    disks.iter().map(|d| d.path.display().to_string()).collect();
                names(&paths, "disk")?;
                if disks.is_empty() {
                    return bad("name the group's disks with --disk PATH[=FAILGROUP]".into());
                }
                if let Some(s) = sector_bytes {
                    if *s != 512 && *s != 4096 {
                        return bad(format!("sector size {s}: use 512 or 4096"));
                    }
                }
            }
            Self::GroupScrub {
                group,
                power: p,
                prefer,
                repair,
                ..
            } => {
                texts.push(group);
                texts.extend(prefer.as_deref());
                power(*p, false, "a scrub")?;
                if prefer.is_some() && !repair {
                    return bad(
                        "--prefer DISK says which copy a repair keeps: give it with --repair"
                            .into(),
                    );
                }
            }
            Self::GroupReclaim {
                group,
                rate_bytes,
                power: p,
                way,
                force,
                ..
            } => {
                texts.push(group);
                if *p == 0 || *p > RECLAIM_POWER_MAX {
                    return bad(format!(
                        "--power {p}: a reclaim takes 1 to {RECLAIM_POWER_MAX} requests in flight per disk"
                    ));
                }
                if rate_bytes.is_some_and(|r| r == 0 || r > RECLAIM_RATE_BYTES_MAX) {
                    return bad(format!(
                        "--rate: give MB/s per disk, above 0 and at most {} (0 or no --rate: the default; to run unpaced, --rate 0)",
                        RECLAIM_RATE_BYTES_MAX / 1_000_000
                    ));
                }
                if *force && *way != ReclaimWay::ZeroFill {
                    return bad("--force goes with --zero-fill".into());
                }
            }
            Self::GroupOnline {
                group,
                disks,
                power: p,
                ..
            } => {
                texts.push(group);
                if let Some(d) = disks {
                    if d.is_empty() {
                        return bad("name the disks to bring back, or --all".into());
                    }
                    names(d, "disk")?;
                    texts.extend(d.iter().map(String::as_str));
                }
                power(*p, false, "a resync")?;
            }
            Self::GroupOffline {
                group,
                disks,
                drop_after_seconds,
            } => {
                texts.push(group);
                if disks.is_empty() {
                    return bad("name the disks to take offline".into());
                }
                names(disks, "disk")?;
                texts.extend(disks.iter().map(String::as_str));
                if let Some(s) = drop_after_seconds {
                    if *s < 60 || *s > DROP_AFTER_SECONDS_MAX {
                        return bad(format!(
                            "--drop-after {s}s: give 1m to 45d (a disk's own timer is kept in minutes)"
                        ));
                    }
                }
            }
            Self::GroupAlter {
                group,
                add,
                drop,
                resize,
                power: p,
                ..
            } => {
                texts.push(group);
                if add.is_empty() && drop.is_empty() && resize.is_empty() {
                    return bad(
                        "name disks to --add PATH[=FAILGROUP], --drop DISK or --resize DISK=SIZE"
                            .into(),
                    );
                }
                for d in add {
                    texts.extend(d.failgroup.as_deref());
                    new_disk_path(&d.path)?;
                }
                let paths: Vec<String> = add.iter().map(|d| d.path.display().to_string()).collect();
                names(&paths, "disk")?;
                names(drop, "disk")?;
                texts.extend(drop.iter().map(String::as_str));
                let resized: Vec<String> = resize.iter().map(|r| r.disk.clone()).collect();
                names(&resized, "disk")?;
                texts.extend(resize.iter().map(|r| r.disk.as_str()));
                if let Some(both) = drop.iter().find(|d| {
                    resize
                        .iter()
                        .any(|r| r.disk.trim().eq_ignore_ascii_case(d.trim()))
                }) {
                    return bad(format!(
                        "disk {both} is both dropped and resized; do one or the other"
                    ));
                }
                power(*p, true, "a rebalance")?;
            }
            Self::GroupRebalance {
                group, power: p, ..
            } => {
                texts.push(group);
                power(*p, true, "a rebalance")?;
            }
            Self::GroupDropDisk {
                group,
                disk,
                power: p,
                ..
            } => {
                texts.extend([group.as_str(), disk.as_str()]);
                power(*p, true, "a rebuild")?;
            }
            Self::GroupReplace {
                group,
                disk,
                with,
                power: p,
                ..
            } => {
                texts.extend([group.as_str(), disk.as_str()]);
                new_disk_path(with)?;
                power(*p, false, "a rebuild")?;
            }
            Self::GroupSet { group, settings } => {
                texts.push(group);
                if settings.is_empty() {
                    return bad("give KEY=VALUE pairs to set".into());
                }
                let keys: Vec<String> = settings.iter().map(|s| s.key.clone()).collect();
                names(&keys, "key")?;
                for s in settings {
                    texts.extend([s.key.as_str(), s.value.as_str()]);
                }
            }
            Self::GroupGet { group, keys } => {
                texts.push(group);
                names(keys, "key")?;
                texts.extend(keys.iter().map(String::as_str));
            }
            Self::GroupDisks { group }
            | Self::GroupMount { group, .. }
            | Self::GroupCheck { group, .. }
            | Self::GroupSpace { group }
            | Self::GroupUndrop { group } => texts.push(group),
            Self::GroupOps { group } | Self::VolumeList { group } => texts.extend(group.as_deref()),
            Self::GroupList | Self::Status => {}
            Self::Ls { path } | Self::Du { path } | Self::Mkdir { path, .. } => texts.push(path),
            Self::Rm { paths } => {
                if paths.is_empty() {
                    return bad("name what to remove".into());
                }
                names(paths, "path")?;
                texts.extend(paths.iter().map(String::as_str));
                let groups: BTreeSet<String> = paths.iter().map(|p| group_of_path(p)).collect();
                if groups.len() > 1 {
                    return bad(format!(
                        "rm's paths are in {} groups ({}); remove each group's in a command of its own",
                        groups.len(),
                        groups.into_iter().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
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
        for t in texts {
            if t.len() > TEXT_BYTES_MAX {
                return bad(format!(
                    "a name or value of {} bytes; at most {TEXT_BYTES_MAX}",
                    t.len()
                ));
            }
            if t.contains('\0') {
                return bad("a name or value holds a NUL byte".into());
            }
        }
        Ok(())
    }
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
