//! The file commands: `ls`, `du`, `mkdir`, `rm`, `mkalias` and `cp`, each
//! checked against the asker's credentials as the mount checks them
//! (`access.rs`), in the metadata step that acts.

use std::sync::Arc;

use cairn_store::file_copy::{self, Prepared, Source};
use cairn_store::group::{AttrChange, GroupError};
use cairn_store::group_copy::{self, CopyRequest};
use cairn_store::names::GroupPath;

use super::executor::Exec;
use crate::access;
use crate::error::CommandError;
use crate::event::{Event, Events, Progress, Unit};
use crate::host::{Access, Opened};
use crate::reply::Reply;

/// What comes with a request besides its fields.
#[derive(Default)]
pub struct Input {
    /// `cp` into a group: the source, opened by the asker with its own
    /// rights (over the socket, a descriptor it passed).
    pub source: Option<CopySource>,
    /// `cp` out of a group the asker's own process mounts: the
    /// destination, made ready by the asker with its own rights before
    /// the group is mounted.
    pub destination: Option<Prepared>,
}

/// The source of a copy into a group.
pub type CopySource = Source;

impl Exec<'_> {
    pub(super) fn ls(&self, path: &str, events: &mut dyn Events) -> Result<Reply, CommandError> {
        let path = GroupPath::parse(path)?;
        let caller = self.caller;
        self.with_group(path.group.as_str(), Access::Look, events, |g, _| {
            let entries = g.live.meta(|m| {
                access::list(m, caller, &path, false)?;
                Ok::<_, CommandError>(m.list(&path)?)
            })??;
            Ok(Reply::Listing {
                path: path.to_string(),
                entries,
            })
        })
    }

    pub(super) fn du(&self, path: &str, events: &mut dyn Events) -> Result<Reply, CommandError> {
        let path = GroupPath::parse(path)?;
        let caller = self.caller;
        self.with_group(path.group.as_str(), Access::Look, events, |g, _| {
            let (used, allocated) = g.live.meta(|m| {
                access::list(m, caller, &path, true)?;
                Ok::<_, CommandError>(m.du(&path)?)
            })??;
            Ok(Reply::Du {
                path: path.to_string(),
                used_bytes: used,
                allocated_with_mirrors_bytes: allocated,
            })
        })
    }

    pub(super) fn mkdir(
        &self,
        path: &str,
        parents: bool,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let path = GroupPath::parse(path)?;
        let caller = self.caller;
        self.with_group(path.group.as_str(), Access::Change, events, |g, _| {
            g.live.meta(|m| {
                access::create(m, caller, &path, parents)?;
                // The directories that will be made, for their owner.
                let made: Vec<GroupPath> = (1..=path.components.len())
                    .map(|n| GroupPath {
                        group: path.group.clone(),
                        components: path.components[..n].to_vec(),
                    })
                    .filter(|p| m.directory_of(p).is_err())
                    .collect();
                m.mkdir(&path, parents)?;
                // Owned by who made them, as through the mount.
                if !caller.is_root() {
                    for p in &made {
                        let id = m.directory_of(p)?;
                        m.set_dir_attrs(id, owner(caller))?;
                    }
                }
                Ok::<_, CommandError>(())
            })??;
            Ok(Reply::Done)
        })
    }

    /// `rm`: every path is tried; the failures are reported, with what was
    /// removed, in one line.
    pub(super) fn rm(
        &self,
        paths: &[String],
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let first = GroupPath::parse(&paths[0])?;
        let caller = self.caller;
        self.with_group(first.group.as_str(), Access::Change, events, |g, _| {
            let mut removed = Vec::new();
            let mut failed = Vec::new();
            for text in paths {
                match self.rm_one(g, text) {
                    Ok(()) => removed.push(text.as_str()),
                    Err(e) => failed.push(e.to_string()),
                }
            }
            let _ = caller;
            if failed.is_empty() {
                return Ok(Reply::Done);
            }
            let n = failed.len();
            Err(CommandError::failed(format!(
                "{}{}{}",
                failed.join("; "),
                if n < paths.len() {
                    format!(" ({n} of {} not removed)", paths.len())
                } else {
                    String::new()
                },
                if removed.is_empty() {
                    String::new()
                } else {
                    format!("; removed: {}", removed.join(", "))
                }
            )))
        })
    }

    fn rm_one(&self, g: &Opened, text: &str) -> Result<(), CommandError> {
        let path = GroupPath::parse(text)?;
        let caller = self.caller;
        // An attached volume's file stays until its device lets go, then
        // goes, and the file system on it with it: refused.
        if let (Some(mount), Some(service)) = (&g.mount, self.host.service()) {
            if let Ok(Ok(info)) = g.live.meta(|m| m.open(&path)) {
                if info.template == super::volume::VOLUME_TEMPLATE {
                    if let Some(d) = service.volumes().attached_to(&mount.served_path(&path)) {
                        return Err(CommandError::failed(format!(
                            "{text} is a volume attached as {}: `cairn volume detach {text}` first",
                            d.display()
                        )));
                    }
                }
            }
        }
        let check = |m: &cairn_store::group::Group<'static>| -> Result<(), GroupError> {
            access::remove(m, caller, &path).map_err(|e| GroupError::Invalid(e.to_string()))
        };
        match &g.mount {
            Some(mount) => mount.remove(&path, &check)?,
            None => g.live.meta(|m| {
                check(m)?;
                m.remove(&path)
            })??,
        }
        Ok(())
    }

    pub(super) fn mkalias(
        &self,
        target: &str,
        alias: &str,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let target = GroupPath::parse(target)?;
        let alias = GroupPath::parse_file(alias)?;
        if !target
            .group
            .as_str()
            .eq_ignore_ascii_case(alias.group.as_str())
        {
            return Err(CommandError::failed(format!(
                "an alias must be in the same group as its file ({} vs {})",
                target.group, alias.group
            )));
        }
        let caller = self.caller;
        self.with_group(target.group.as_str(), Access::Change, events, |g, _| {
            g.live.meta(|m| {
                access::link(m, caller, &target, &alias)?;
                Ok::<_, CommandError>(m.mkalias(&target, &alias)?)
            })??;
            Ok(Reply::Done)
        })
    }

    /// `cp` into a group from a source the asker opened.
    pub(super) fn cp_in(
        &self,
        input: Input,
        (shown, source_name): (&str, Option<String>),
        dest: &str,
        (template, redundancy, max_bytes): (Option<String>, Option<String>, Option<u64>),
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let mut src = input.source.ok_or_else(|| {
            CommandError::failed(format!(
                "no descriptor of {shown} came with the copy (are the CLI and the service the same version?)"
            ))
        })?;
        if src.name.is_none() {
            src.name = source_name;
        }
        let request = CopyRequest {
            source: shown,
            dest,
            template: template.as_deref(),
            redundancy: redundancy.as_deref(),
            max_bytes,
            force: false,
        };
        let options = group_copy::new_file_options(&request, None)?;
        let group = GroupPath::parse(dest)?.group.as_str().to_string();
        let caller = self.caller;
        self.with_group(&group, Access::Change, events, |g, events| {
            let path = g.live.meta(|m| {
                let p = group_copy::destination(m, dest, src.name.as_deref())?;
                access::create(m, caller, &p, false)?;
                Ok::<_, CommandError>(p)
            })??;
            let report = file_copy::copy_in_live(
                &g.live,
                &mut src,
                &path,
                &options,
                max_bytes,
                &mut |done, total| {
                    events.send(Event::Progress(Progress {
                        what: "cp".into(),
                        unit: Unit::Byte,
                        done,
                        total: total.unwrap_or(0),
                    }))
                },
            )?;
            if !caller.is_root() {
                g.live
                    .meta(|m| m.set_file_attrs(report.file.number, owner(caller), now_ns()))??;
            }
            Ok(Reply::CopiedIn {
                dest: path.to_string(),
                bytes_copied: report.bytes_copied,
                stopped_at_max: report.stopped_at_max,
            })
        })
    }

    /// `cp` out of a group: into the destination the asker made ready, or
    /// — from a service — read by the asker through its file system.
    pub(super) fn cp_out(
        &self,
        input: Input,
        source: &str,
        dest: &str,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let path = GroupPath::parse(source)?;
        let caller = self.caller;
        self.with_group(path.group.as_str(), Access::Look, events, |g, events| {
            let info = g.live.meta(|m| {
                access::read(m, caller, &path)?;
                Ok::<_, CommandError>(m.open(&path)?)
            })??;
            if let Some(mount) = &g.mount {
                return Ok(Reply::ReadThrough {
                    path: mount.served_path(&path),
                    template: info.template,
                });
            }
            let prepared = input.destination.ok_or_else(|| {
                CommandError::failed(format!(
                    "no destination came with the copy to {dest} (it is made ready by the asker)"
                ))
            })?;
            let mut file = file_copy::LiveFile::open(&g.live, info.number)?;
            file_copy::copy_out(
                &mut file,
                info.number,
                info.attrs.byte_size,
                prepared,
                &mut |done, total| {
                    events.send(Event::Progress(Progress {
                        what: "cp".into(),
                        unit: Unit::Byte,
                        done,
                        total: total.unwrap_or(0),
                    }))
                },
            )?;
            Ok(Reply::Done)
        })
    }

    /// `cp` from a group file to a group, both reached by this host (or,
    /// from a service that holds only the source, read by the asker
    /// through its file system and copied in from there).
    pub(super) fn cp_between(
        &self,
        source: &str,
        dest: &str,
        (template, redundancy): (Option<String>, Option<String>),
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let from = GroupPath::parse(source)?;
        let to = GroupPath::parse(dest)?;
        let same = from.group.as_str().eq_ignore_ascii_case(to.group.as_str());
        let caller = self.caller;
        let access = if same { Access::Change } else { Access::Look };
        self.with_group(from.group.as_str(), access, events, |src_g, events| {
            let info = src_g.live.meta(|m| {
                access::read(m, caller, &from)?;
                Ok::<_, CommandError>(m.open(&from)?)
            })??;
            if let (Some(mount), Some(service)) = (&src_g.mount, self.host.service()) {
                if !same
                    && !service
                        .groups()
                        .iter()
                        .any(|g| g.eq_ignore_ascii_case(to.group.as_str()))
                {
                    return Ok(Reply::ReadThrough {
                        path: mount.served_path(&from),
                        template: info.template,
                    });
                }
            }
            let request = CopyRequest {
                source,
                dest,
                template: template.as_deref(),
                redundancy: redundancy.as_deref(),
                max_bytes: None,
                force: false,
            };
            let options = group_copy::new_file_options(&request, Some(info.template.clone()))?;
            let name = from.file_name().map(|c| c.as_str().to_string());
            let copy = |dst_g: &Arc<Opened>, events: &mut dyn Events| {
                let mut src = Source::group_file(
                    &src_g.live,
                    info.number,
                    info.attrs.byte_size,
                    source,
                    name.clone(),
                )?;
                let path = dst_g.live.meta(|m| {
                    let p = group_copy::destination(m, dest, name.as_deref())?;
                    access::create(m, caller, &p, false)?;
                    Ok::<_, CommandError>(p)
                })??;
                let report = file_copy::copy_in_live(
                    &dst_g.live,
                    &mut src,
                    &path,
                    &options,
                    None,
                    &mut |done, total| {
                        events.send(Event::Progress(Progress {
                            what: "cp".into(),
                            unit: Unit::Byte,
                            done,
                            total: total.unwrap_or(0),
                        }))
                    },
                )?;
                if !caller.is_root() {
                    dst_g.live.meta(|m| {
                        m.set_file_attrs(report.file.number, owner(caller), now_ns())
                    })??;
                }
                Ok::<_, CommandError>(Reply::CopiedIn {
                    dest: path.to_string(),
                    bytes_copied: report.bytes_copied,
                    stopped_at_max: false,
                })
            };
            if same {
                copy(src_g, events)
            } else {
                self.with_group(
                    to.group.as_str(),
                    Access::Change,
                    events,
                    |dst_g, events| copy(dst_g, events),
                )
            }
        })
    }
}

/// Now, in nanoseconds since the epoch (a file's change time).
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// A name made by `caller`: owned by it (uid and primary group), as the
/// mount makes it.
fn owner(caller: &crate::caller::Caller) -> AttrChange {
    AttrChange {
        uid: Some(caller.uid),
        gid: Some(caller.gid),
        ..AttrChange::default()
    }
}
