//! A live group's disks while data handles run: taken offline and brought
//! back, added, found again, let go of. Each change is a metadata operation;
//! what a device holds is read outside `meta`, on an engine of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cairn_io::poison::Recover;
use cairn_io::DeviceId;

use super::shared::{LiveGroup, Reattached, PROBE_DEPTH};
use crate::group::error::GroupError;
use crate::group::mounted::Group;

impl LiveGroup {
    /// Take disks offline on request ([`Group::offline_disks`]) while data
    /// handles run: writes from the next disk view on mark their copies
    /// stale. The data operations that took the old view are waited for
    /// between two metadata operations, without `meta` (one may need it to
    /// end), and at most the plane's drain bound.
    pub fn offline_disks(
        &self,
        names: &[String],
        drop_after_minutes: Option<u16>,
    ) -> Result<Vec<String>, GroupError> {
        let (done, disks) = self
            .inner
            .operation(|g| g.offline_disks_begin(names, drop_after_minutes))??;
        let drained = self.inner.plane.wait_for_older_operations();
        self.inner
            .operation(|g| g.offline_disks_end(&disks, drained))??;
        Ok(done)
    }

    /// Bring disks back and resync them ([`Group::online_disks`]) while data
    /// handles run: the disks are SYNCING (written by every write from the
    /// next view on) before the first stale AU is copied, and each batch is
    /// copied under its extents' exclusive latches, held until the commit
    /// that clears the bits is durable.
    pub fn online_disks(
        &self,
        names: Option<&[String]>,
        power: usize,
        progress: &mut dyn FnMut(crate::group::resync::Progress),
    ) -> Result<crate::group::resync::ResyncReport, GroupError> {
        self.bring_back(names)?;
        self.resync(power, progress)
    }

    /// OFFLINE disks whose repair timer ran out are dropped by force
    /// ([`Group::drop_expired`]): the labels dropped, and why any could
    /// not be. For a holder that keeps the group mounted (the service),
    /// which calls it from time to time; a mount does it itself.
    pub fn drop_expired(&self) -> Result<(Vec<String>, Vec<String>), GroupError> {
        self.inner.operation(|g| g.drop_expired())
    }

    /// The first step of [`LiveGroup::online_disks`]: the disks named (or
    /// every OFFLINE one that is attached) are SYNCING, written by every
    /// write from the next view on; [`LiveGroup::resync`] copies what they
    /// missed. A disk that is not attached, or not OFFLINE, is refused here.
    pub fn bring_back(&self, names: Option<&[String]>) -> Result<(), GroupError> {
        // What each device holds now is read outside `meta`, on an engine
        // of its own: an OFFLINE disk is the one most likely to hang, and
        // nothing waits on a disk while holding the metadata lock. The
        // metadata step then checks the device it was read from is still
        // the disk's.
        let (devices, group) = self
            .inner
            .operation(|g| g.returning_devices(names).map(|d| (d, g.uuid())))??;
        let mut probes = BTreeMap::new();
        if !devices.is_empty() {
            let (mut engine, ids) = self.side_engine(&devices, PROBE_DEPTH)?;
            for (disk, meta_id) in &devices {
                let Some(id) = ids.get(disk) else {
                    continue;
                };
                let probe = crate::group::returning::probe_device(engine.as_mut(), *id, group);
                probes.insert(*disk, (*meta_id, probe));
            }
        }
        self.inner
            .operation(|g| g.bring_back(names, Some(&probes)))?
    }

    /// Add disks while data handles run. `files` are the new devices, opened
    /// for writing and labelled; each is attached to the metadata plane's
    /// engine, and given to the engine source for the data handles to come,
    /// and `change` runs with their ids in that engine, as one metadata
    /// operation (it prepares and adds them, and may drop or resize others
    /// in the same step: `group alter`). A data handle takes a joined disk
    /// into a new engine at its next I/O (the disk view's epoch changed). A
    /// device that is no member once `change` is over (it failed before the
    /// disk joined, or only explained) is let go of again.
    pub fn add_devices<R>(
        &self,
        files: Vec<cairn_io::DeviceFile>,
        change: impl FnOnce(&mut Group<'static>, &[DeviceId]) -> Result<R, GroupError>,
    ) -> Result<R, GroupError> {
        self.inner.operation(|g| {
            let mut ids = Vec::new();
            let mut attached = Ok(());
            for file in files {
                let dup = match file.try_clone() {
                    Ok(d) => d,
                    Err(e) => {
                        attached = Err(GroupError::Invalid(format!(
                            "cannot share a new disk's handle: {e}"
                        )));
                        break;
                    }
                };
                let id = match g.attach_device(file) {
                    Ok(id) => id,
                    Err(e) => {
                        attached = Err(e);
                        break;
                    }
                };
                ids.push(id);
                if let Err(e) = self.inner.engines.add_device(id, dup) {
                    attached = Err(e);
                    break;
                }
            }
            let result = attached.and_then(|()| change(g, &ids));
            let members: BTreeSet<DeviceId> = g.member_devices().into_values().collect();
            for id in ids.into_iter().filter(|id| !members.contains(id)) {
                self.let_go(g, id);
            }
            result
        })?
    }

    /// The data plane's I/O per member disk (by disk number), as the
    /// engine source counts it: every read, write and flush a data handle
    /// sent to the disk since the group went live.
    pub fn disk_io(&self) -> Result<BTreeMap<u16, Arc<cairn_io::counted::DeviceIo>>, GroupError> {
        let members = self.inner.meta()?.member_devices();
        let io = self.inner.engines.device_io();
        Ok(members
            .into_iter()
            .filter_map(|(disk, id)| Some((disk, io.get(&id)?.clone())))
            .collect())
    }

    /// Members that were not attached, found again (re-discovery): each of
    /// `files` that is a missing member of this group becomes its device —
    /// in the metadata plane's engine and the engine source, in one
    /// metadata operation — and stays OFFLINE until `online` brings it
    /// back; one that is not is let go of. Per file, in order: the label
    /// of the member it is and its id in the metadata plane's engine, or
    /// nothing; a file that is a member but cannot come back (too small)
    /// is an error for that file.
    pub fn reattach_devices(
        &self,
        files: Vec<cairn_io::DeviceFile>,
    ) -> Result<Vec<Reattached>, GroupError> {
        self.inner.operation(|g| {
            let attached: Vec<Result<(cairn_io::DeviceFile, DeviceId), GroupError>> = files
                .into_iter()
                .map(|file| {
                    let dup = file.try_clone().map_err(|e| {
                        GroupError::Invalid(format!("cannot share a disk's handle: {e}"))
                    })?;
                    Ok((dup, g.attach_device(file)?))
                })
                .collect();
            // Which disk each is, by its label's uuid: a disk found on two
            // devices at once (a copy beside it, a second path) is taken on
            // neither, as a mount refuses it.
            let disks: Vec<Option<(uuid::Uuid, String)>> = attached
                .iter()
                .map(|a| a.as_ref().ok().and_then(|(_, id)| g.disk_on(*id)))
                .collect();
            let mut out = Vec::new();
            for (a, disk) in attached.into_iter().zip(&disks) {
                let (dup, id) = match a {
                    Ok(a) => a,
                    Err(e) => {
                        out.push(Err(e));
                        continue;
                    }
                };
                let twice = disk.as_ref().filter(|(u, _)| {
                    disks.iter().flatten().filter(|(v, _)| v == u).count() > 1
                });
                let joined = match twice {
                    Some((_, label)) => Err(GroupError::Invalid(format!(
                        "disk {label} is on two of the devices found; one is a copy (or a second path to it): hide it from discovery, then send SIGHUP again"
                    ))),
                    // The source first: once the member has it, any engine
                    // made must be able to attach it.
                    None => self
                        .inner
                        .engines
                        .add_device(id, dup)
                        .and_then(|()| g.reattach(id))
                        .map(|label| label.map(|l| (l, id))),
                };
                if !matches!(joined, Ok(Some(_))) {
                    self.let_go(g, id);
                }
                out.push(joined);
            }
            out
        })
    }

    /// OFFLINE members (those named, or all) whose device no longer
    /// answers — a disk that failed keeps failing on the descriptor the
    /// group holds, even once the disk is back — are let go of, so that
    /// discovery may attach them anew ([`Self::reattach_devices`]) and
    /// `online` bring them back. Idle handles drop them too (the
    /// `on_devices_left` hooks); a running operation's handle, at its next
    /// batch (the disk view changed). Their labels.
    pub fn release_dead_devices(
        &self,
        names: Option<&[String]>,
    ) -> Result<Vec<String>, GroupError> {
        let candidates = self.inner.meta()?.offline_devices(names);
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        // Probed outside `meta`: a path that hangs rather than fails holds
        // up this command, not every metadata operation.
        let mut probe = self.handle(1)?;
        let dead: Vec<(u16, DeviceId)> = candidates
            .into_iter()
            .filter(|(disk, _)| !probe.answers(*disk))
            .collect();
        drop(probe);
        if dead.is_empty() {
            return Ok(Vec::new());
        }
        let released = self.inner.operation(|g| {
            dead.iter()
                .filter_map(|(disk, id)| {
                    let label = g.release_device(*disk, *id)?;
                    self.let_go(g, *id);
                    Some(label)
                })
                .collect::<Vec<_>>()
        })?;
        if !released.is_empty() {
            self.inner.devices_left();
        }
        Ok(released)
    }

    /// What member `disk`'s device is ([`cairn_io::device::identity`]), as
    /// the engine source holds it: `None` when it is not attached, or the
    /// source cannot say.
    pub fn device_identity(&self, disk: u16) -> Result<Option<(u64, u64)>, GroupError> {
        let id = self.inner.meta()?.member_devices().get(&disk).copied();
        Ok(id.and_then(|id| self.inner.engines.identity(id)))
    }

    /// Let go of the devices of disks that left the group (a drop that
    /// completed): the metadata plane's engine closes them, the engine
    /// source forgets them, and each data handle drops its own at its next
    /// I/O (the disk view changed).
    pub(super) fn release_left_devices(&self) -> Result<(), GroupError> {
        let left = {
            let mut g = self.inner.meta()?;
            let left = g.take_left_devices();
            for id in &left {
                self.let_go(&mut g, *id);
            }
            left
        };
        if !left.is_empty() {
            self.inner.devices_left();
        }
        Ok(())
    }

    /// Let go of device `id` (no member's): the engine source forgets it and
    /// the metadata plane's engine closes it. Under `meta`.
    fn let_go(&self, g: &mut Group<'static>, id: DeviceId) {
        self.inner.let_go(g, id);
    }

    /// Call `hook` (without `meta`) each time devices of disks that left
    /// the group have been let go of: whoever keeps idle data handles drops
    /// them, as they hold those devices in their engines.
    pub fn on_devices_left(&self, hook: Box<dyn Fn() + Send + Sync>) {
        self.inner.devices_left.lock_or_recover().push(hook);
    }
}
