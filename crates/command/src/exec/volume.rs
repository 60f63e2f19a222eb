//! `cairn volume ...` (`docs/volumes.md`): group files the host sees as
//! block devices. Only a service has a file system to attach them over;
//! what a volume may be is decided here, the loop devices are its
//! ([`crate::host::Volumes`]).

use cairn_store::group::{self, CreateOptions, Redundancy};
use cairn_store::names::GroupPath;

use super::executor::{no_service, Exec};
use crate::access;
use crate::error::CommandError;
use crate::event::Events;
use crate::host::{Access, Opened, Service};
use crate::reply::{Reply, VolumeRow};

/// The template a volume's file has: how a volume is told from a data file.
pub const VOLUME_TEMPLATE: &str = "VOLUME";

/// A volume's redundancy as `volume list` shows it.
fn redundancy_of(copies: u8) -> &'static str {
    match copies {
        1 => "EXTERNAL",
        2 => "NORMAL",
        _ => "HIGH",
    }
}

/// The volume `name` names, checked as the group checks a file's name: a
/// wrong one is the first thing to say.
fn volume_path(name: &str) -> Result<GroupPath, CommandError> {
    GroupPath::parse(name).map_err(|e| CommandError::failed(format!("volume name {name}: {e}")))
}

impl Exec<'_> {
    fn service(&self, name: &str, what: &str) -> Result<&dyn Service, CommandError> {
        self.host.service().ok_or_else(|| {
            let group = GroupPath::parse(name)
                .map(|p| p.group.as_str().to_string())
                .unwrap_or_else(|_| name.trim_start_matches('+').to_ascii_uppercase());
            CommandError::failed(format!(
                "volumes are attached and managed by the Cairn service, and none holds group {group}: start one with `cairn serve --mountpoint DIR` ({})",
                no_service(what)
            ))
        })
    }

    /// A volume of the group: its file, and where the mount serves it. A
    /// file that is not a volume is refused.
    fn volume_of(
        &self,
        g: &Opened,
        path: &GroupPath,
    ) -> Result<(group::FileInfo, std::path::PathBuf), CommandError> {
        let name = path.to_string();
        let info = g.live.meta(|m| {
            access::read(m, self.caller, path)?;
            Ok::<_, CommandError>(m.open(path)?)
        })??;
        if info.template != VOLUME_TEMPLATE {
            return Err(CommandError::failed(format!(
                "{name} is not a volume (its template is {}); `cairn volume create` makes one",
                info.template
            )));
        }
        Ok((info, Self::served_at(g, path)?))
    }

    /// Where the mount serves `path`.
    fn served_at(g: &Opened, path: &GroupPath) -> Result<std::path::PathBuf, CommandError> {
        g.mount
            .as_ref()
            .map(|m| m.served_path(path))
            .ok_or_else(|| CommandError::failed(format!("group {} is not served", g.name)))
    }

    pub(super) fn volume_create(
        &self,
        name: &str,
        size_bytes: u64,
        redundancy: Option<&str>,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let path = volume_path(name)?;
        let service = self.service(name, "volume create")?;
        let _one = service.volumes().one_at_a_time();
        let copies = redundancy
            .map(|r| {
                Redundancy::parse(r).map(Redundancy::copies).ok_or_else(|| {
                    CommandError::Usage(format!("redundancy {r:?}: use external, normal or high"))
                })
            })
            .transpose()?;
        let caller = self.caller;
        self.with_group(path.group.as_str(), Access::Change, events, |g, _| {
            let info = g.live.meta(|m| {
                // Refused before anything changes (the template, the
                // directories).
                if m.open(&path).is_ok() {
                    return Err(CommandError::failed(format!("{path} exists already")));
                }
                let sector = u64::from(m.sector_bytes());
                if size_bytes == 0 || !size_bytes.is_multiple_of(sector) {
                    return Err(CommandError::failed(format!(
                        "a volume's size must be a whole number of group {}'s {sector}-byte sectors, and not 0; {size_bytes} bytes is not (give --size as 20G, 512M ...)",
                        m.name()
                    )));
                }
                access::create(m, caller, &path, true)?;
                m.ensure_template(VOLUME_TEMPLATE)?;
                Ok(m.create_file(
                    &path,
                    size_bytes,
                    &CreateOptions {
                        template: Some(VOLUME_TEMPLATE.to_string()),
                        copies,
                        parents: true,
                        ..CreateOptions::default()
                    },
                )?)
            })??;
            Ok(Reply::VolumeCreated(VolumeRow {
                name: path.to_string(),
                size_bytes: info.size_bytes,
                redundancy: redundancy_of(info.copies).into(),
                device: None,
                state: "DETACHED".into(),
            }))
        })
    }

    pub(super) fn volume_attach(
        &self,
        name: &str,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let path = volume_path(name)?;
        let service = self.service(name, "volume attach")?;
        let volumes = service.volumes();
        let _one = volumes.one_at_a_time();
        self.with_group(path.group.as_str(), Access::Change, events, |g, _| {
            let (_, at) = self.volume_of(g, &path)?;
            if let Some(device) = volumes.attached_to(&at) {
                return Err(CommandError::failed(format!(
                    "volume {name} is attached already, as {}",
                    device.display()
                )));
            }
            let sector = g.live.meta(|m| m.sector_bytes())?;
            let device = volumes.attach(&at, sector)?;
            volumes.record(name, true);
            Ok(Reply::VolumeAttached {
                name: name.to_string(),
                device,
            })
        })
    }

    pub(super) fn volume_detach(
        &self,
        name: &str,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let path = volume_path(name)?;
        let service = self.service(name, "volume detach")?;
        let volumes = service.volumes();
        let _one = volumes.one_at_a_time();
        self.with_group(path.group.as_str(), Access::Change, events, |g, _| {
            // A group an I/O failure stopped answers nothing about its
            // files, but the kernel still says which device is bound to
            // the path (and only volumes are attached): detached by that,
            // so that its disks can be let go of and the group mounted again.
            let at = match g.live.plane().stopped() {
                Some(_) => Self::served_at(g, &path)?,
                None => self.volume_of(g, &path)?.1,
            };
            let Some(device) = volumes.attached_to(&at) else {
                return Err(CommandError::failed(format!(
                    "volume {name} is not attached"
                )));
            };
            let deferred = match volumes.detach(&device, &at)? {
                crate::host::Detached::Done => false,
                crate::host::Detached::Deferred => true,
                crate::host::Detached::InUse(why) => {
                    return Err(CommandError::failed(format!(
                        "volume {name} ({}) is in use: {why}; unmount it first",
                        device.display()
                    )))
                }
            };
            volumes.record(name, false);
            Ok(Reply::VolumeDetached {
                name: name.to_string(),
                device,
                deferred,
            })
        })
    }

    pub(super) fn volume_resize(
        &self,
        name: &str,
        size_bytes: u64,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let path = volume_path(name)?;
        let service = self.service(name, "volume resize")?;
        let volumes = service.volumes();
        let _one = volumes.one_at_a_time();
        self.with_group(path.group.as_str(), Access::Change, events, |g, _| {
            let (info, at) = self.volume_of(g, &path)?;
            if size_bytes <= info.size_bytes {
                return Err(CommandError::failed(format!(
                    "volume {name} is {} bytes: a volume only grows (the file system on it would lose its end)",
                    info.size_bytes
                )));
            }
            let sector = g.live.meta(|m| m.sector_bytes())?;
            if !size_bytes.is_multiple_of(u64::from(sector)) {
                return Err(CommandError::failed(format!(
                    "a volume's size must be a whole number of the group's {sector}-byte sectors; {size_bytes} bytes is not"
                )));
            }
            // Through the mount, so that the kernel's idea of the file's
            // size (which the loop device's capacity is read from) changes
            // with it.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&at)
                .and_then(|f| f.set_len(size_bytes))
                .map_err(|e| CommandError::failed(format!("cannot grow volume {name}: {e}")))?;
            let device = volumes.attached_to(&at);
            if let Some(d) = &device {
                volumes.refresh(d, &at).map_err(|e| {
                    CommandError::failed(format!(
                        "the volume grew, but {} did not follow: {e}",
                        d.display()
                    ))
                })?;
            }
            Ok(Reply::VolumeResized {
                name: name.to_string(),
                size_bytes,
                device,
            })
        })
    }

    pub(super) fn volume_list(
        &self,
        group: Option<&str>,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let service = self.service(group.unwrap_or("any"), "volume list")?;
        let volumes = service.volumes();
        let held = service.groups();
        if let Some(want) = group {
            if !held
                .iter()
                .any(|g| g.eq_ignore_ascii_case(want.trim_start_matches('+')))
            {
                return Err(CommandError::failed(format!(
                    "the service holds no group {want}"
                )));
            }
        }
        let mut rows = Vec::new();
        for name in held.iter().filter(|g| {
            group.is_none_or(|want| want.trim_start_matches('+').eq_ignore_ascii_case(g))
        }) {
            self.with_group(name, Access::Look, events, |g, events| {
                if let Some(why) = g.live.plane().stopped() {
                    rows.extend(self.stopped_volumes(g, volumes, &why, events)?);
                    return Ok(());
                }
                let files = g.live.meta(|m| {
                    m.file_numbers()
                        .into_iter()
                        .filter_map(|n| {
                            let info = m.file_info(n).ok()?;
                            (info.template == VOLUME_TEMPLATE).then(|| (m.path_of(n), info))
                        })
                        .collect::<Vec<_>>()
                })?;
                for (name, info) in files {
                    let device = GroupPath::parse(&name).ok().and_then(|p| {
                        g.mount
                            .as_ref()
                            .and_then(|m| volumes.attached_to(&m.served_path(&p)))
                    });
                    rows.push(VolumeRow {
                        name,
                        size_bytes: info.size_bytes,
                        redundancy: redundancy_of(info.copies).into(),
                        state: if device.is_some() {
                            "ATTACHED"
                        } else {
                            "DETACHED"
                        }
                        .into(),
                        device: device.map(|d| d.display().to_string()),
                    });
                }
                Ok(())
            })?;
        }
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Reply::Volumes(rows))
    }

    /// The volumes of a group an I/O failure stopped, as the kernel knows
    /// them: the devices bound to its files (their redundancy cannot be
    /// asked; a volume not attached is not seen), and a warning saying so.
    fn stopped_volumes(
        &self,
        g: &Opened,
        volumes: &dyn crate::host::Volumes,
        why: &str,
        events: &mut dyn Events,
    ) -> Result<Vec<VolumeRow>, CommandError> {
        let root = Self::served_at(
            g,
            &GroupPath {
                group: cairn_store::names::GroupName::parse(&g.name)
                    .map_err(|e| CommandError::failed(format!("group {}: {e}", g.name)))?,
                components: Vec::new(),
            },
        )?;
        events.send(crate::event::Event::Note(format!(
            "cairn: warning: group {} is stopped ({why}): only its attached volumes are listed, as the kernel knows them; `cairn volume detach` lets go of them",
            g.name
        )));
        Ok(volumes
            .attached_under(&root)
            .into_iter()
            .map(|(device, backing, size_bytes)| {
                let within = backing.strip_prefix(&root).unwrap_or(&backing);
                VolumeRow {
                    name: format!("+{}/{}", g.name, within.display()),
                    size_bytes,
                    redundancy: "UNKNOWN".into(),
                    device: Some(device.display().to_string()),
                    state: "ATTACHED".into(),
                }
            })
            .collect())
    }
}
