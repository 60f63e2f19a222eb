//! Disks leaving and coming back, on request or after a failure: taken
//! OFFLINE (`cairn group offline`, the data operations that took the old
//! view drained), brought back SYNCING (`online`, each returning device
//! checked to be the image that left), their time away counted against the
//! repair timer. What a returning disk missed is copied by the resync
//! (`resync.rs`). `docs/lifecycle.md` says why.

use std::collections::{BTreeMap, BTreeSet};

use cairn_format::group as fmt;
use cairn_format::group::{AtLayout, DiskState, FILE_NUMBER_USER_MIN};
use cairn_io::DeviceId;

use super::alloc::DiskAlloc;
use super::error::{corrupt, GroupError};
use super::mounted::Group;
use super::parts::members::Member;
use super::resync::{Progress, ResyncReport};
use super::returning;
use crate::placement;

impl Group<'_> {
    /// A member disk's number by its label (as `group disks` shows it).
    pub fn disk_number(&self, label: &str) -> Result<u16, GroupError> {
        self.disks_named(&[label.to_string()])?
            .first()
            .copied()
            .ok_or_else(|| GroupError::NotFound(format!("no disk {label}")))
    }

    /// Member disk numbers by label (as `group disks` shows them), refusing
    /// a name that is not a member.
    pub(super) fn disks_named(&self, names: &[String]) -> Result<Vec<u16>, GroupError> {
        names
            .iter()
            .map(|name| {
                self.members
                    .iter()
                    .find(|m| m.entry.label.eq_ignore_ascii_case(name.trim()))
                    .map(|m| m.entry.number)
                    .ok_or_else(|| {
                        GroupError::NotFound(format!(
                            "group {} has no disk {name}; `cairn group disks {}` lists its disks",
                            self.name, self.name
                        ))
                    })
            })
            .collect()
    }

    /// Take disks offline on request (`cairn group offline`): they are
    /// neither read nor written, every write that would reach them marks
    /// their copies stale, and they stay OFFLINE until `online` (a mount
    /// does not bring them back). `drop_after_minutes`: this disk's repair
    /// timer instead of the group's `disk_repair_time`. Refused, changing
    /// nothing, when the group could not run without them, or when one is
    /// held OFFLINE already; one that went OFFLINE by itself is held.
    ///
    /// Three parts: [`Group::offline_disks_begin`] (the disks durably
    /// OFFLINE, the new view published), a drain of the data operations
    /// that took the old view, and [`Group::offline_disks_end`]. A live
    /// group runs the first and last as metadata operations and drains
    /// between them, without `meta` (`LiveGroup::offline_disks`): such an
    /// operation may need `meta` to end (to have a failed disk taken
    /// offline), and one in an I/O to a hung disk ends only at its timeout.
    pub fn offline_disks(
        &mut self,
        names: &[String],
        drop_after_minutes: Option<u16>,
    ) -> Result<Vec<String>, GroupError> {
        let (done, disks) = self.offline_disks_begin(names, drop_after_minutes)?;
        // No data thread runs beside a group one command holds: at once.
        let drained = self.plane.wait_for_older_operations();
        self.offline_disks_end(&disks, drained)?;
        Ok(done)
    }

    /// The first part of [`Group::offline_disks`]: checked, flushed, made
    /// OFFLINE (and HELD) in the superblocks, and the new view published.
    /// The labels done, and the disks' numbers for the last part.
    pub(super) fn offline_disks_begin(
        &mut self,
        names: &[String],
        drop_after_minutes: Option<u16>,
    ) -> Result<(Vec<String>, Vec<u16>), GroupError> {
        self.check_writable()?;
        let named = self.disks_named(names)?;
        // One that went OFFLINE by itself (failed, timed out, missing at
        // mount) is only held: a mount would otherwise bring it back, and
        // the request may have met its failure on the way (a hung disk
        // times out while the command waits for `meta`).
        let mut disks = Vec::new();
        let mut holding = Vec::new();
        for d in &named {
            let m = self.member(*d).expect("invariant: named");
            if m.writable().is_some() {
                disks.push(*d);
            } else if m.entry.state == DiskState::Offline
                && !m.entry.held()
                && !m.entry.forced()
                && !m.entry.dropping()
            {
                holding.push(*d);
            } else {
                return Err(GroupError::Invalid(format!(
                    "disk {} is already OFFLINE{}",
                    m.entry.label,
                    if m.entry.held() {
                        " (on request); `cairn group online` brings it back"
                    } else {
                        ""
                    }
                )));
            }
        }
        let mut down: BTreeSet<u16> = self
            .members
            .iter()
            .filter(|m| m.online().is_none())
            .map(|m| m.entry.failgroup_id)
            .collect();
        for d in &disks {
            down.insert(
                self.member(*d)
                    .expect("invariant: named")
                    .entry
                    .failgroup_id,
            );
        }
        if down.len() >= usize::from(self.copies) {
            return Err(GroupError::Invalid(format!(
                "taking {} offline would leave some data with no copy to read: {} redundancy keeps {} cop{} in different failure groups, and {} failure group(s) would be down; bring the other disks ONLINE first{}",
                names.join(", "),
                self.redundancy().as_str(),
                self.copies,
                if self.copies == 1 { "y" } else { "ies" },
                down.len(),
                if self.copies == 1 {
                    " (an external-redundancy group has no second copy: no disk of it can go offline)"
                } else {
                    ""
                }
            )));
        }
        // A file whose copies are fewer than the group's (a template or
        // `cp --redundancy`) could be left with none to read.
        let leaving: BTreeSet<u16> = disks.iter().copied().collect();
        let orphaned: Vec<String> = self
            .files
            .iter()
            .filter(|(n, _)| **n >= FILE_NUMBER_USER_MIN)
            .filter(|(_, rec)| {
                rec.extents.iter().enumerate().any(|(index, e)| {
                    let aus = placement::extent_aus(index as u64);
                    e.initialized
                        && !e.copies().iter().enumerate().any(|(slot, c)| {
                            !leaving.contains(&c.disk) && self.copy_serves(e, slot, aus)
                        })
                })
            })
            .map(|(n, _)| self.path_of(*n))
            .take(3)
            .collect();
        if !orphaned.is_empty() {
            return Err(GroupError::Invalid(format!(
                "taking {} offline would leave {} with no copy to read (its redundancy is below the group's, or its other copy is stale); copy it elsewhere or bring the other disks ONLINE first",
                names.join(", "),
                orphaned.join(", ")
            )));
        }
        self.commit()?;
        // What the disks acknowledged is made durable on them first: fast
        // resync trusts every AU it does not find marked. A disk whose flush
        // fails goes offline as failed (and is resynced whole).
        let failed = self.flush_disks(Some(&leaving))?;
        if !failed.is_empty() {
            self.failed_disks.extend(failed);
            self.offline_failed()?;
        }
        let mut done = Vec::new();
        let group = self.name.clone();
        for d in &holding {
            if let Some(m) = self.member_mut(*d) {
                // Its repair timer starts at the request, as any disk's
                // taken offline on request (`--drop-after` counts from now).
                m.entry.flags |= fmt::DISK_FLAG_HELD;
                m.entry.drop_after_minutes = drop_after_minutes.unwrap_or(0);
                m.entry.offline_seconds = 0;
                m.offline_since = Some(std::time::Instant::now());
                tracing::info!(
                    group = %group,
                    disk = %m.entry.label,
                    "group {group}: disk {}: OFFLINE, held so on request (`cairn group offline`)",
                    m.entry.label
                );
                done.push(m.entry.label.clone());
            }
        }
        for d in &disks {
            self.take_offline(*d);
            self.say_why(*d, "taken offline on request (`cairn group offline`)");
            if let Some(m) = self.member_mut(*d) {
                m.entry.flags |= fmt::DISK_FLAG_HELD;
                m.entry.drop_after_minutes = drop_after_minutes.unwrap_or(0);
                m.entry.offline_seconds = 0;
                done.push(m.entry.label.clone());
            }
        }
        self.superblocks_or_stop()?;
        self.publish_disks();
        Ok((done, disks))
    }

    /// The last part of [`Group::offline_disks`], once the data operations
    /// that took the view before its first part are over (`drained`): the
    /// disks are flushed again, so what those operations wrote is on the
    /// media (nothing marks it). A disk whose flush fails, or whose writers
    /// may still run (`drained` false: they outlived the drain's bound), is
    /// marked RESYNC_ALL: it may lack an acknowledged write nothing marks,
    /// so it is resynced whole when it comes back. Only disks still OFFLINE
    /// (an `online` may have come between the parts); one already marked
    /// is not flushed (a hung disk would only time out again).
    pub(super) fn offline_disks_end(
        &mut self,
        disks: &[u16],
        drained: bool,
    ) -> Result<(), GroupError> {
        self.check_writable()?;
        let still: Vec<u16> = disks
            .iter()
            .copied()
            .filter(|d| {
                self.member(*d).is_some_and(|m| {
                    m.entry.state == DiskState::Offline
                        && m.entry.flags & fmt::DISK_FLAG_RESYNC_ALL == 0
                })
            })
            .collect();
        let devices: Vec<(u16, DeviceId)> = still
            .iter()
            .filter_map(|d| Some((*d, self.member(*d)?.device?)))
            .collect();
        let lost: Vec<u16> = if drained {
            self.flush_devices(devices.clone())?
        } else {
            still.clone()
        };
        for d in &lost {
            // It may have lost what it took: resynced whole.
            if let Some(m) = self.member_mut(*d) {
                m.entry.flags |= fmt::DISK_FLAG_RESYNC_ALL;
            }
        }
        // What it holds now is all it will hold: stamped, so that a copy of
        // it made before is never taken back ([`Group::stamp_offline`]).
        let stamped: Vec<(u16, DeviceId)> = devices
            .into_iter()
            .filter(|(d, _)| !lost.contains(d))
            .collect();
        self.stamp_offline(&stamped)?;
        if !lost.is_empty() || !stamped.is_empty() {
            self.superblocks_or_stop()?;
        }
        // Nothing more is written to them: a live group lets go of their
        // devices, as of any OFFLINE disk's.
        self.to_release.extend(&still);
        Ok(())
    }

    /// Bring OFFLINE disks back (`cairn group online`): each must be
    /// attached and be the image the group took offline; it goes SYNCING,
    /// its stale AUs are copied, and it is ONLINE. `names: None`: every
    /// OFFLINE disk that is attached.
    pub fn online_disks(
        &mut self,
        names: Option<&[String]>,
        power: usize,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ResyncReport, GroupError> {
        self.bring_back(names, None)?;
        self.resync(power, progress)
    }

    /// The OFFLINE disks `online` would bring back (those named, or every
    /// one attached), with their devices: what must be read
    /// ([`returning::probe_device`]) before they may. A name that is no member,
    /// or an OFFLINE disk that is not attached, is refused here.
    pub(super) fn returning_devices(
        &self,
        names: Option<&[String]>,
    ) -> Result<BTreeMap<u16, DeviceId>, GroupError> {
        self.check_writable()?;
        let disks: Vec<u16> = match names {
            Some(n) => self.disks_named(n)?,
            None => self
                .members
                .iter()
                .filter(|m| m.entry.state == DiskState::Offline && m.device.is_some())
                .map(|m| m.entry.number)
                .collect(),
        };
        let mut out = BTreeMap::new();
        for d in disks {
            let m = self.member(d).expect("invariant: named");
            if m.entry.state != DiskState::Offline {
                continue;
            }
            let Some(device) = m.device else {
                return Err(GroupError::Invalid(format!(
                    "disk {} is not attached (not found by discovery, or it could not be opened); attach it, check the discovery string, and try again",
                    m.entry.label
                )));
            };
            out.insert(d, device);
        }
        Ok(out)
    }

    /// The first part of `online`: the disks named (or every OFFLINE disk
    /// attached) checked and made SYNCING — written from now on, their
    /// tables rebuilt from the extent maps. `probes`: what each one's
    /// device holds, read (outside the metadata lock, by a live group)
    /// with the device it was read from; `None`: read here.
    pub(super) fn bring_back(
        &mut self,
        names: Option<&[String]>,
        probes: Option<&BTreeMap<u16, (DeviceId, returning::DeviceProbe)>>,
    ) -> Result<(), GroupError> {
        let devices = self.returning_devices(names)?;
        let mut back = Vec::new();
        for (d, device) in devices {
            let probe = match probes.and_then(|p| p.get(&d)) {
                Some((read_from, probe)) if *read_from == device => probe.clone(),
                Some(_) => {
                    return Err(GroupError::Invalid(format!(
                        "disk {}'s device changed while it was being read; try again",
                        self.member(d).map_or("?", |m| m.entry.label.as_str())
                    )))
                }
                None => returning::probe_device(&mut *self.engine, device, self.uuid),
            };
            let m = self.member(d).expect("invariant: named");
            let mut entry = m.entry.clone();
            entry.flags &= !fmt::DISK_FLAG_HELD;
            if let Some(why) = returning::returning_refusal(&entry, (&self.name, self.uuid), &probe)
            {
                return Err(GroupError::Invalid(why));
            }
            if self.damage.is_short(&entry.label) {
                return Err(GroupError::Invalid(format!(
                    "disk {} is smaller than the group recorded: it cannot come back",
                    entry.label
                )));
            }
            back.push(d);
        }
        // The rebuild below commits the table in chunks: the running
        // transaction (other operations' changes, behind a live group) must
        // be durable first, or a chunk would carry part of it.
        let open = self.txn_open();
        self.commit_through(open)?;
        for d in &back {
            let (size, limit) = self
                .member(*d)
                .map(|m| (m.entry.size_bytes, m.entry.au_count))
                .expect("invariant: named");
            let layout = AtLayout::for_disk(size, self.au_bytes)
                .ok_or_else(|| corrupt(format!("disk {d} is too small for the group's AUs")))?;
            self.say_why(
                *d,
                "brought back (`cairn group online`), the image the group took offline: what it missed is resynced",
            );
            if let Some(m) = self.member_mut(*d) {
                m.entry.flags &= !fmt::DISK_FLAG_HELD;
                m.entry.state = DiskState::Syncing;
                let mut alloc = DiskAlloc::with_limit(layout, limit);
                alloc.keep_reservations(std::mem::take(&mut m.parked));
                // What it held back from reuse while away stays held: the
                // rebuild below keeps it.
                if let Some(away) = m.away.take() {
                    alloc.keep_quarantine(&away);
                }
                m.alloc = Some(alloc);
            }
            self.tables_to_rebuild.push(*d);
        }
        if !back.is_empty() {
            // Its table as the extent maps say, then written from now on.
            self.rebuild_tables()?;
            self.superblocks_or_stop()?;
            self.publish_disks();
        }
        Ok(())
    }

    /// Write a superblock generation for a disk state memory already has:
    /// if the disks cannot say so, memory is ahead of them, and the group
    /// stops (a later mount trusts what the superblocks say).
    pub(super) fn superblocks_or_stop(&mut self) -> Result<(), GroupError> {
        if let Err(e) = self.write_superblocks() {
            self.stop(e.to_string());
            return Err(e);
        }
        // A disk that could not take them goes offline now, not at the
        // next commit: the operation may be the last before a dismount.
        self.offline_failed()
    }

    /// Add the time each OFFLINE disk spent offline during this mount to its
    /// repair timer (`disk_repair_time` counts only while the group is
    /// mounted).
    pub(super) fn count_offline_time(&mut self) -> Result<(), GroupError> {
        let mounted = self.mounted_at.elapsed();
        let mut any = false;
        for m in self.members.iter_mut() {
            if m.entry.state == DiskState::Offline {
                let seconds = away_this_mount(m, mounted);
                if seconds > 0 {
                    m.entry.offline_seconds = m.entry.offline_seconds.saturating_add(seconds);
                    any = true;
                }
            }
        }
        if any {
            self.write_superblocks()?;
        }
        Ok(())
    }

    /// Seconds left on a disk's repair timer, if it is OFFLINE: the time
    /// it was away while the group was mounted before, and during this
    /// mount so far (a served group's timer runs out while it is served).
    pub fn repair_seconds_left(&self, disk: u16) -> Option<u64> {
        let m = self.member(disk)?;
        if m.entry.state != DiskState::Offline {
            return None;
        }
        let limit = match m.entry.drop_after_minutes {
            0 => self.disk_repair_seconds(),
            n => u64::from(n) * 60,
        };
        let away = u64::from(m.entry.offline_seconds)
            + u64::from(away_this_mount(m, self.mounted_at.elapsed()));
        Some(limit.saturating_sub(away))
    }
}

/// Whole seconds an OFFLINE member has been away during this mount
/// (`mounted`: how long the group has been mounted): since it went
/// OFFLINE, or since the mount if it was OFFLINE already.
fn away_this_mount(m: &Member, mounted: std::time::Duration) -> u32 {
    let away = m
        .offline_since
        .map_or(mounted, |t| t.elapsed().min(mounted));
    u32::try_from(away.as_secs()).unwrap_or(u32::MAX)
}
