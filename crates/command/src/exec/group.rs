//! The `group` commands.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use cairn_format::group::{DiskState, FILE_NUMBER_USER_MIN};
use cairn_store::group::reclaim::{ReclaimMethod, ReclaimOptions};
use cairn_store::group::resync::ResyncReport;
use cairn_store::group::{self, Group, GroupSpec, Redundancy};
use cairn_store::group_admin::{self, DiskArg};

use super::disks::NewDisks;
use super::executor::{Exec, ENGINE_DEPTH};
use crate::error::CommandError;
use crate::event::{Event, Events, Progress, Unit};
use crate::host::{Access, LongOp, Opened, Work};
use crate::reply::{
    Altered, Created, DiskRow, GroupSummary, Mounted, Offlined, Onlined, Rebalanced, Reply,
};
use crate::request::{NewDiskSpec, ReclaimWay, Resize, Setting};

/// A group's `group list` row, from its metadata.
pub fn summary_of(group: &Group<'_>) -> GroupSummary {
    let space = group.space();
    GroupSummary {
        name: group.name().to_string(),
        uuid: group.uuid(),
        state: if space.offline_disks > 0 {
            "DEGRADED".into()
        } else {
            "MOUNTABLE".into()
        },
        redundancy: group.redundancy().as_str().into(),
        sector_bytes: group.sector_bytes(),
        au_mb: group.au_bytes() >> 20,
        total_mb: space.total_mb,
        free_mb: space.free_mb,
        required_mirror_free_mb: space.required_mirror_free_mb,
        usable_file_mb: space.usable_file_mb,
        offline_disks: space.offline_disks,
        disks: group.disks().len(),
        warnings: Vec::new(),
    }
}

/// A group this process could not look at: `state` says why in a word
/// (MOUNTED elsewhere, UNMOUNTABLE, INCOMPLETE), `why` in a sentence.
fn unmountable(g: &group_admin::FoundGroup, state: &str, why: &str) -> GroupSummary {
    GroupSummary {
        name: g.name.clone(),
        uuid: g.uuid,
        state: format!("{state}: {why}"),
        redundancy: "?".into(),
        sector_bytes: 0,
        au_mb: 0,
        total_mb: 0,
        free_mb: 0,
        required_mirror_free_mb: 0,
        usable_file_mb: 0,
        offline_disks: 0,
        disks: g.paths.len(),
        warnings: Vec::new(),
    }
}

/// The store's options of a reclaim, from the request's.
pub(super) fn reclaim_options(
    explain: bool,
    rate_bytes: Option<u64>,
    power: u16,
    (way, force): (ReclaimWay, bool),
    compact: bool,
) -> ReclaimOptions {
    ReclaimOptions {
        method: match way {
            ReclaimWay::Discard => ReclaimMethod::Discard,
            ReclaimWay::ZeroFill => ReclaimMethod::ZeroFill,
        },
        force,
        rate_bytes,
        power: usize::from(power),
        explain,
        compact,
    }
}

fn now_unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Exec<'_> {
    pub(super) fn create(
        &self,
        name: String,
        redundancy: &str,
        disks: &[NewDiskSpec],
        (au_bytes, sector_bytes): (u64, Option<u32>),
        (force, take_from): (bool, &[String]),
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        if let Some(s) = self.host.service() {
            return Err(CommandError::failed(format!(
                "`group create` is not carried out by the Cairn service (pid {}): run it where the disks are, without the service",
                s.pid()
            )));
        }
        let redundancy = Redundancy::parse(redundancy).ok_or_else(|| {
            CommandError::Usage(format!(
                "redundancy {redundancy:?}: use external, normal or high"
            ))
        })?;
        let d = self.host.discovery()?;
        let spec = GroupSpec {
            name,
            redundancy,
            au_bytes,
            sector_bytes,
            force,
            now_unix_seconds: now_unix_seconds(),
            group_uuid: uuid::Uuid::new_v4(),
        };
        let args: Vec<DiskArg> = disks
            .iter()
            .map(|d| DiskArg {
                path: d.path.clone(),
                failgroup: d.failgroup.as_ref().map(|f| f.to_ascii_uppercase()),
            })
            .collect();
        let mut engine = cairn_io::new_file_engine(self.host.engine_kind(), ENGINE_DEPTH)
            .map_err(|e| CommandError::failed(format!("cannot start an I/O engine: {e}")))?;
        let (mut group, _lock, created) = group_admin::create(
            engine.as_mut(),
            &cairn_io::host::Host::real(),
            &args,
            &spec,
            take_from,
            Some(&d),
            &self.host.run_dir(),
        )?;
        let summary = summary_of(&group);
        let bytes_written = group.engine().stats().bytes_written;
        let offlined = group.disks_taken_offline().to_vec();
        let name = group.name().to_string();
        let dismounted = group.dismount();
        if !offlined.is_empty() {
            events.send(Event::TakenOffline {
                group: name,
                disks: offlined,
            });
        }
        dismounted?;
        Ok(Reply::Created(Created {
            group: summary,
            disks: created,
            bytes_written,
        }))
    }

    /// `group list`: every group discovery finds — a group the host holds
    /// as it is now, any other mounted read-only to look.
    pub(super) fn list(&self, events: &mut dyn Events) -> Result<Reply, CommandError> {
        let host = cairn_io::host::Host::real();
        let d = self.host.discovery()?;
        let found = group_admin::find_groups(&host, &d)?;
        let mut rows = Vec::new();
        for g in found {
            if !g.complete {
                rows.push(unmountable(
                    &g,
                    "INCOMPLETE",
                    &format!(
                        "its disks' labels name group {}, but none holds its superblock: a `group create` was interrupted; `cairn group create NAME --force` with these disks takes them again",
                        g.uuid
                    ),
                ));
                continue;
            }
            if let Some(row) = self.host.held_summary(&g.name) {
                rows.push(row);
                continue;
            }
            let mut engine = cairn_io::new_file_engine(self.host.engine_kind(), ENGINE_DEPTH)
                .map_err(|e| CommandError::failed(format!("cannot start an I/O engine: {e}")))?;
            let row = match group_admin::mount_read_only(
                engine.as_mut(),
                &host,
                &d,
                &g.name,
                &self.host.run_dir(),
            ) {
                Ok(m) => {
                    events.send(Event::Mounted {
                        group: g.name.clone(),
                        report: m.report.clone(),
                    });
                    let mut s = summary_of(&m.group);
                    s.warnings = m.report.warnings;
                    s.warnings.extend(m.report.damage);
                    m.group.dismount()?;
                    s
                }
                // Another process holds it: mounted, not broken.
                Err(group_admin::GroupAdminError::Lock(
                    cairn_store::group_lock::LockError::Held { holder, .. },
                )) => unmountable(&g, "MOUNTED", &format!("by {holder}")),
                Err(e) => unmountable(&g, "UNMOUNTABLE", &e.to_string()),
            };
            rows.push(row);
        }
        Ok(Reply::List(rows))
    }

    pub(super) fn disks(&self, name: &str, events: &mut dyn Events) -> Result<Reply, CommandError> {
        self.with_group(name, Access::Look, events, |g, _| {
            let (disks, au) = g.live.meta(|m| (m.disks(), m.au_bytes()))?;
            let paths = g.paths().clone();
            Ok(Reply::Disks(disk_rows(disks, au, &paths)))
        })
    }

    pub(super) fn mount(
        &self,
        name: &str,
        force: bool,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        if let Some(s) = self.host.service() {
            return Err(CommandError::failed(format!(
                "group {} is mounted already: this Cairn service (pid {}) holds it",
                name.trim_start_matches('+').to_ascii_uppercase(),
                s.pid()
            )));
        }
        let access = if force {
            Access::TakeOver
        } else {
            Access::Change
        };
        self.with_group(name, access, events, |g, _| {
            let summary = g.live.meta(|m| summary_of(m))?;
            Ok(Reply::Mounted(Mounted {
                group: summary,
                recovery: g.report.clone().unwrap_or_default(),
            }))
        })
    }

    pub(super) fn check(
        &self,
        name: &str,
        repair: bool,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let access = if repair { Access::Change } else { Access::Look };
        self.with_group(name, access, events, |g, _| {
            // A repair changes what a long operation works on.
            let _busy = repair
                .then(|| self.host.claim(g, "check --repair"))
                .transpose()?;
            let report = g.live.meta(|m| m.check(repair))??;
            Ok(Reply::Check {
                group: g.name.clone(),
                report,
            })
        })
    }

    pub(super) fn scrub(
        &self,
        name: &str,
        power: u16,
        (repair, prefer): (bool, Option<String>),
        wait: bool,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let access = if repair { Access::Change } else { Access::Look };
        let run_dir = self.host.run_dir();
        self.with_group(name, access, events, |g, events| {
            let busy = self.host.claim(g, "scrub")?;
            let prefer = prefer
                .map(|p| {
                    g.live
                        .meta(|m| m.disk_number(&p))
                        .map_err(CommandError::from)
                        .and_then(|r| r.map_err(CommandError::from))
                })
                .transpose()?;
            let work: Work = {
                let g = g.clone();
                Box::new(move |events| {
                    let au = g.live.meta(|m| m.au_bytes())?;
                    let mut tracker = Exec::tracker(&run_dir, &g, "SCRUB", power, 0)?;
                    let report = g.live.scrub(
                        usize::from(power),
                        group::scrub::ScrubRepair::new(repair, prefer),
                        &mut |p| {
                            events.send(Event::Progress(Progress {
                                what: if repair { "scrub --repair" } else { "scrub" }.into(),
                                unit: Unit::Byte,
                                done: p.done,
                                total: p.total,
                            }));
                            tracker.update(p.done / au, p.total.div_ceil(au), p.bytes_done);
                        },
                    );
                    tracker.finish();
                    Ok(Reply::Scrub {
                        group: g.name.clone(),
                        report: report?,
                    })
                })
            };
            let op = LongOp {
                what: "scrub",
                power,
                wait,
            };
            self.host.long(g, busy, op, work, events)
        })
    }

    pub(super) fn reclaim(
        &self,
        name: &str,
        options: group::reclaim::ReclaimOptions,
        wait: bool,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let access = if options.explain {
            Access::Look
        } else {
            Access::Change
        };
        let run_dir = self.host.run_dir();
        self.with_group(name, access, events, |g, events| {
            if options.explain {
                let report = g.live.reclaim(options, &mut |_| {})?;
                return Ok(Reply::Reclaim {
                    group: g.name.clone(),
                    report,
                });
            }
            let busy = self.host.claim(g, "reclaim")?;
            // Refusals (a zero-fill of a disk that takes discard, a compact
            // that cannot run) come back now, not from the background.
            g.live.meta(|m| {
                m.reclaim_plan(options.method, options.force)?;
                if options.compact {
                    m.compact_refusal()?;
                }
                Ok::<_, group::GroupError>(())
            })??;
            let message = match options.method {
                ReclaimMethod::Discard => "reclaim",
                ReclaimMethod::ZeroFill => "reclaim --zero-fill",
            };
            let power = u16::try_from(options.power).unwrap_or(u16::MAX);
            let work: Work = {
                let g = g.clone();
                Box::new(move |events| {
                    let au = g.live.meta(|m| m.au_bytes())?;
                    let mut tracker = Exec::tracker(&run_dir, &g, "RECLAIM", power, 0)?;
                    let report = g.live.reclaim(options, &mut |p| {
                        events.send(Event::Progress(Progress {
                            what: message.into(),
                            unit: Unit::Byte,
                            done: p.done,
                            total: p.total,
                        }));
                        tracker.update(p.done / au, p.total.div_ceil(au), p.bytes_done);
                    });
                    tracker.finish();
                    Ok(Reply::Reclaim {
                        group: g.name.clone(),
                        report: report?,
                    })
                })
            };
            let op = LongOp {
                what: "reclaim",
                power,
                wait,
            };
            self.host.long(g, busy, op, work, events)
        })
    }

    pub(super) fn space(&self, name: &str, events: &mut dyn Events) -> Result<Reply, CommandError> {
        self.with_group(name, Access::Look, events, |g, _| {
            let paths = g.paths().clone();
            let rows = g.live.meta(|m| group_admin::space(m, &paths))?;
            Ok(Reply::Space(rows))
        })
    }

    pub(super) fn online(
        &self,
        name: &str,
        asked: Option<Vec<String>>,
        power: u16,
        wait: bool,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let run_dir = self.host.run_dir();
        self.with_group(name, Access::Change, events, |g, events| {
            let busy = self.host.claim(g, "resync")?;
            // What a mount for this command resynced on its own (a disk
            // that came back by itself).
            let mount_resync = g
                .report
                .as_ref()
                .and_then(|r| r.resync.clone())
                .unwrap_or_default();
            let names = asked.as_deref();
            let rows = g.live.meta(|m| m.disks())?;
            let already = already_online(g, names, &rows)?;
            self.find_returning(g, names, &rows, events)?;
            // Refused here (not the image the group took offline), before
            // anything runs in the background.
            g.live.bring_back(names)?;
            let work = resync_work(run_dir, g, power, mount_resync, asked, already);
            let op = LongOp {
                what: "resync",
                power,
                wait,
            };
            self.host.long(g, busy, op, work, events)
        })
    }

    /// Make the disks `group online` brings back (those `names`d, or every
    /// OFFLINE one; `rows`: the group's disks) reachable: a failed disk's
    /// dead device let go of, and the disks no device holds looked for by
    /// discovery and opened anew; one named that cannot be is refused with
    /// what is the matter.
    fn find_returning(
        &self,
        g: &Opened,
        names: Option<&[String]>,
        rows: &[group::DiskInfo],
        events: &mut dyn Events,
    ) -> Result<(), CommandError> {
        // A disk that failed keeps failing on the descriptor the group
        // holds, even once it is back (a cable put back, a file system
        // mounted again): let go of it, and look for it again. (A group
        // on real devices lets go of a disk's devices as it goes
        // OFFLINE: this is for one found OFFLINE at mount.)
        let released = g.live.release_dead_devices(names)?;
        if !released.is_empty() {
            events.send(Event::Note(format!(
                "cairn: group {}: a failed disk's device no longer answers ({}); let go of it, looking for the disk again",
                g.name,
                released.join(", ")
            )));
        }
        // The disks asked for (or every OFFLINE one) that no device
        // holds are looked for by discovery and opened anew; one that
        // cannot be is refused with what is the matter.
        let unattached = rows
            .iter()
            .filter(|r| r.state == DiskState::Offline && r.device.is_none() && !r.dropping)
            .any(|r| {
                names.is_none_or(|n| n.iter().any(|x| x.trim().eq_ignore_ascii_case(&r.label)))
            });
        if unattached || !released.is_empty() {
            let missing = self.find_again(g, events);
            let asked: Vec<&(String, String)> = missing
                .iter()
                .filter(|(label, _)| {
                    names.is_some_and(|n| n.iter().any(|x| x.trim().eq_ignore_ascii_case(label)))
                })
                .collect();
            if let Some((label, why)) = asked.first() {
                return Err(CommandError::failed(format!(
                    "disk {label} of group {} cannot be brought back: {why}; attach it (or mount the file system it is on) and try again",
                    g.name
                )));
            }
        }
        Ok(())
    }

    pub(super) fn offline(
        &self,
        name: &str,
        disks: &[String],
        drop_after_seconds: Option<u64>,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let minutes = drop_after_seconds.map(|s| u16::try_from(s.div_ceil(60)).unwrap_or(u16::MAX));
        self.with_group(name, Access::Change, events, |g, _| {
            let _busy = self.host.claim(g, "offline")?;
            let done = g.live.offline_disks(disks, minutes)?;
            let rows = g.live.meta(|m| m.disks())?;
            Ok(Reply::Offline(Offlined {
                group: g.name.clone(),
                offline: done,
                disks: rows,
            }))
        })
    }

    pub(super) fn alter(
        &self,
        name: &str,
        (add, drop, resize): (&[NewDiskSpec], &[String], &[Resize]),
        (power, explain, force, wait): (u16, bool, bool, bool),
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let resizes: Vec<(String, u64)> = resize
            .iter()
            .map(|r| (r.disk.clone(), r.size_bytes))
            .collect();
        self.with_group(name, Access::Change, events, |g, events| {
            let busy = self.host.claim(g, "rebalance")?;
            let args: Vec<DiskArg> = add
                .iter()
                .map(|d| DiskArg {
                    path: d.path.clone(),
                    failgroup: d.failgroup.as_ref().map(|f| f.to_ascii_uppercase()),
                })
                .collect();
            let changed = self.with_new_disks(g, &args, force, |m, prepared, joined| {
                let work = m.explain_change(&prepared, drop, &resizes)?;
                if explain {
                    return Ok(Err(work));
                }
                // A rebalance that could not run would leave the change
                // half done: refused before anything changes (power 0
                // asks for no rebalance).
                if power > 0 {
                    m.rebalance_blocker()?;
                }
                // From here the labels stay, whatever follows: a disk may
                // have joined even if the call fails part-way (one left
                // labelled but not listed is taken again by the next
                // `alter --add`).
                *joined = true;
                let added = m.add_disks(prepared)?;
                let dropping = if drop.is_empty() {
                    Vec::new()
                } else {
                    m.request_drops(drop)?
                };
                let resized = if resizes.is_empty() {
                    Vec::new()
                } else {
                    m.request_resizes(&resizes)?
                };
                Ok(Ok(Altered {
                    group: m.name().to_string(),
                    added,
                    dropping,
                    resized,
                }))
            })?;
            match changed {
                Err(mut work) => {
                    // The time estimate reads up to 64 MiB of each disk
                    // that gives data, outside the metadata lock.
                    let sources: Vec<u16> = work
                        .disks
                        .iter()
                        .filter(|d| d.bytes_out > 0 || d.bytes_in > 0)
                        .map(|d| d.number)
                        .collect();
                    let rates = g.live.measure_read_rates(&sources, 64 << 20)?;
                    work.estimate(&rates);
                    Ok(Reply::Explained {
                        group: g.name.clone(),
                        explain: work,
                    })
                }
                Ok(altered) => {
                    let then = self.run_rebalance(g, busy, power, wait, events)?;
                    Ok(Reply::Changed {
                        altered: Some(altered),
                        then: Box::new(then),
                    })
                }
            }
        })
    }

    pub(super) fn rebalance(
        &self,
        name: &str,
        power: u16,
        wait: bool,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        self.with_group(name, Access::Change, events, |g, events| {
            let busy = self.host.claim(g, "rebalance")?;
            if power > 0 {
                g.live.meta(|m| m.rebalance_blocker())??;
            }
            self.run_rebalance(g, busy, power, wait, events)
        })
    }

    pub(super) fn undrop(
        &self,
        name: &str,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        self.with_group(name, Access::Change, events, |g, _| {
            let _busy = self.host.claim(g, "undrop")?;
            let undropped = g.live.meta(|m| m.undrop())??;
            Ok(Reply::Undropped {
                group: g.name.clone(),
                undropped,
            })
        })
    }

    pub(super) fn drop_disk(
        &self,
        name: &str,
        disk: &str,
        power: u16,
        wait: bool,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        self.with_group(name, Access::Change, events, |g, events| {
            let busy = self.host.claim(g, "rebalance")?;
            g.live
                .meta(|m| m.drop_disks_forced(&[disk.to_string()]))??;
            let then = self.run_rebalance(g, busy, power, wait, events)?;
            Ok(Reply::Changed {
                altered: None,
                then: Box::new(then),
            })
        })
    }

    pub(super) fn replace(
        &self,
        name: &str,
        disk: &str,
        with: PathBuf,
        (power, force, wait): (u16, bool, bool),
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        self.with_group(name, Access::Change, events, |g, events| {
            let busy = self.host.claim(g, "rebalance")?;
            let rows = g.live.meta(|m| m.disks())?;
            let failgroup = replaced_failgroup(&rows, &g.name, disk)?;
            let args = [DiskArg {
                path: with,
                failgroup: Some(failgroup),
            }];
            self.with_new_disks(g, &args, force, |m, prepared, joined| {
                replace_blocker(&m.disks(), m.name(), disk)?;
                *joined = true;
                m.add_disks(prepared)?;
                m.drop_disks_forced(&[disk.to_string()])
            })?;
            let then = self.run_rebalance(g, busy, power, wait, events)?;
            Ok(Reply::Changed {
                altered: None,
                then: Box::new(then),
            })
        })
    }

    pub(super) fn set(
        &self,
        name: &str,
        settings: &[Setting],
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let pairs: Vec<(String, String)> = settings
            .iter()
            .map(|s| (s.key.clone(), s.value.clone()))
            .collect();
        let keys: Vec<String> = settings.iter().map(|s| s.key.clone()).collect();
        self.with_group(name, Access::Change, events, |g, _| {
            let now = g.live.meta(|m| {
                m.set_attributes(&pairs)?;
                m.get_attributes(&keys)
            })??;
            Ok(Reply::Attributes(now))
        })
    }

    pub(super) fn get(
        &self,
        name: &str,
        keys: &[String],
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        self.with_group(name, Access::Look, events, |g, _| {
            Ok(Reply::Attributes(g.live.meta(|m| m.get_attributes(keys))??))
        })
    }

    /// Run (or resume) the rebalance: here or in the background, as the
    /// host runs long operations. Power 0 only records the pause: nothing to
    /// wait for.
    fn run_rebalance(
        &self,
        g: &Arc<Opened>,
        busy: crate::host::Busy,
        power: u16,
        wait: bool,
        events: &mut dyn Events,
    ) -> Result<Reply, CommandError> {
        let run_dir = self.host.run_dir();
        let work: Work = {
            let g = g.clone();
            Box::new(move |events| {
                let mut tracker = g
                    .live
                    .meta(|m| rebalance_tracker(&run_dir, m, usize::from(power)))?;
                let report = g.live.rebalance(usize::from(power), &mut |p| {
                    events.send(Event::Progress(Progress {
                        what: if p.compacting { "compact" } else { "rebalance" }.into(),
                        unit: Unit::Au,
                        done: p.done,
                        total: p.total,
                    }));
                    if let Some(t) = tracker.as_mut() {
                        if p.compacting {
                            t.set_pass("COMPACT");
                        }
                        t.update(p.done, p.total, p.bytes_done);
                    }
                });
                if let Some(t) = tracker {
                    t.finish();
                }
                let report = report?;
                let disks = g.live.meta(|m| m.disks())?;
                Ok(Reply::Rebalanced(Rebalanced {
                    group: g.name.clone(),
                    rebalance: report,
                    disks,
                }))
            })
        };
        let op = LongOp {
            what: "rebalance",
            power,
            wait: wait || power == 0,
        };
        self.host.long(g, busy, op, work, events)
    }

    /// A change that adds disks to the group (`alter --add`, `replace`): the
    /// new disks checked, opened and labelled ([`NewDisks::open`]), then, in
    /// one metadata operation ([`cairn_store::group::LiveGroup::add_devices`]),
    /// prepared and handed to `change`, which sets `joined` as it begins to
    /// add them. From then on the labels stay, whatever follows: a disk may
    /// have joined even if the call fails part-way; before it, the labels
    /// this call wrote are erased. The joined disks' paths are known from
    /// then on.
    fn with_new_disks<R>(
        &self,
        g: &Opened,
        args: &[DiskArg],
        force: bool,
        change: impl FnOnce(
            &mut Group<'static>,
            Vec<group::relocate::PreparedDisk>,
            &mut bool,
        ) -> Result<R, group::GroupError>,
    ) -> Result<R, CommandError> {
        let mut new = NewDisks::open(self.host, &g.name, args, force)?;
        let files = std::mem::take(&mut new.files);
        let mut joined = false;
        let mut attached = Vec::new();
        let changed = g.live.add_devices(files, |m, ids| {
            attached = ids.to_vec();
            let prepared = m.prepare_adds(&new.with_ids(ids), force)?;
            change(m, prepared, &mut joined)
        });
        if joined {
            let mut paths = g.paths();
            for (id, added) in attached.iter().zip(&new.added) {
                paths.insert(id.0, added.path.clone());
            }
        } else {
            new.refused();
        }
        Ok(changed?)
    }
}

/// `group disks`' rows: each disk with the path its device was opened by.
fn disk_rows(disks: Vec<group::DiskInfo>, au: u64, paths: &BTreeMap<u32, PathBuf>) -> Vec<DiskRow> {
    disks
        .into_iter()
        .map(|d| DiskRow {
            path: d.device.and_then(|id| paths.get(&id.0).cloned()),
            disk: d,
            au_bytes: au,
        })
        .collect()
}

/// `replace`: the failure group the new disk joins (the replaced one's),
/// which must be OFFLINE.
fn replaced_failgroup(
    rows: &[group::DiskInfo],
    name: &str,
    disk: &str,
) -> Result<String, CommandError> {
    match rows.iter().find(|r| r.label.eq_ignore_ascii_case(disk)) {
        None => Err(CommandError::failed(format!(
            "group {name} has no disk {disk}; `cairn group disks {name}` lists its disks"
        ))),
        Some(r) if r.state != DiskState::Offline => Err(CommandError::failed(format!(
            "disk {disk} is {}: only an OFFLINE disk is replaced; `cairn group alter {name} --add PATH --drop {disk}` swaps a working disk, moving its data once",
            r.state.as_str()
        ))),
        Some(r) => Ok(r.failgroup.clone()),
    }
}

/// `replace`: the rebuild must be able to run once the new disk is in, so
/// no other disk may be out of service.
fn replace_blocker(
    rows: &[group::DiskInfo],
    name: &str,
    disk: &str,
) -> Result<(), group::GroupError> {
    if let Some(other) = rows.iter().find(|d| {
        !d.label.eq_ignore_ascii_case(disk) && !d.dropped_by_force && d.state != DiskState::Online
    }) {
        return Err(group::GroupError::Invalid(format!(
            "disk {} is {} too: bring it back (`cairn group online {name} {}`) or drop it (`cairn group drop-disk {name} {} --force`) before replacing {disk}",
            other.label,
            other.state.as_str(),
            other.label,
            other.label
        )));
    }
    Ok(())
}

/// The status file `group ops` lists while a rebalance runs (none at power
/// 0, which only plans): REBUILD while copies are rebuilt, then REBALANCE.
fn rebalance_tracker(
    run_dir: &std::path::Path,
    group: &Group<'_>,
    power: usize,
) -> Option<cairn_store::ops::OpTracker> {
    let plan = group.rebalance_plan();
    // Redundancy is whole once the last rebuild move is done, in the order
    // the moves run (metadata first, then data).
    let rebuild: u64 = plan
        .as_ref()
        .map(|p| {
            let meta = |m: &&cairn_store::rebalance::Move| {
                m.file < FILE_NUMBER_USER_MIN || m.index & group::relocate::INDIRECT_INDEX != 0
            };
            let order: Vec<&cairn_store::rebalance::Move> = p
                .moves
                .iter()
                .filter(meta)
                .chain(p.moves.iter().filter(|m| !meta(m)))
                .collect();
            let mut done = 0;
            let mut until = 0;
            for m in order {
                done += m.aus;
                if m.pass == cairn_store::rebalance::Pass::Rebuild {
                    until = done;
                }
            }
            until
        })
        .unwrap_or(0);
    let resumed = group.rebalance_pending().is_some();
    (power > 0).then(|| {
        cairn_store::ops::OpTracker::start(
            run_dir,
            group.name(),
            group.uuid(),
            if rebuild > 0 { "REBUILD" } else { "REBALANCE" },
            power,
            group.au_bytes(),
            rebuild,
            resumed,
        )
    })
}

/// Disks named (`names`; `rows`: the group's disks) that are ONLINE
/// already, as `LABEL (ONLINE)`: nothing to do for them, and said so; all
/// of them: refused, nothing started. A SYNCING one is not: its resync
/// (stopped, or never run) goes on.
fn already_online(
    g: &Opened,
    names: Option<&[String]>,
    rows: &[group::DiskInfo],
) -> Result<Vec<String>, CommandError> {
    let already: Vec<String> = names
        .unwrap_or_default()
        .iter()
        .filter_map(|n| {
            rows.iter()
                .find(|r| r.label.eq_ignore_ascii_case(n.trim()))
                .filter(|r| r.state == DiskState::Online)
                .map(|r| format!("{} ({})", r.label, r.state.as_str()))
        })
        .collect();
    if let Some(n) = names {
        if !n.is_empty() && already.len() == n.len() {
            return Err(CommandError::failed(format!(
                "nothing to bring back in group {}: {} {} not OFFLINE",
                g.name,
                already.join(", "),
                if already.len() == 1 { "is" } else { "are" }
            )));
        }
    }
    Ok(already)
}

/// `group online`'s resync, to run in the background: its progress told
/// and tracked for `group ops`, then the reply with what the mount for
/// the command resynced (`mount_resync`), the disks `asked` for and those
/// `already` ONLINE.
fn resync_work(
    run_dir: PathBuf,
    g: &Arc<Opened>,
    power: u16,
    mount_resync: ResyncReport,
    asked: Option<Vec<String>>,
    already: Vec<String>,
) -> Work {
    let g = g.clone();
    Box::new(move |events| {
        let mut tracker =
            Exec::tracker(&run_dir, &g, "RESYNC", power, cairn_store::ops::REBUILD_ALL)?;
        let report = g.live.resync(usize::from(power), &mut |p| {
            events.send(Event::Progress(Progress {
                what: "resync".into(),
                unit: Unit::Au,
                done: p.done,
                total: p.total,
            }));
            tracker.update(p.done, p.total, p.bytes_done);
        });
        // A resync that leaves a disk short of ONLINE stays
        // listed by `group ops`, saying why, until the next.
        match &report {
            Ok(r) if !r.disks_left.is_empty() => {
                tracker.stop(&r.disks_left.join("; "));
            }
            Ok(_) => tracker.finish(),
            Err(e) => tracker.stop(&e.to_string()),
        }
        let report = report?;
        let disks = g.live.meta(|m| m.disks())?;
        Ok(Reply::Online(Onlined {
            group: g.name.clone(),
            mount_resync,
            resync: report,
            disks,
            asked,
            already_online: already,
        }))
    })
}
