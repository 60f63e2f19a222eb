//! Where a live group's data handles, its heartbeat and its drains get
//! their engines.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_io::{DeviceId, IoEngine};

use super::error::GroupError;

/// A data handle's engine and, per member disk number, its device in it.
pub type HandleEngine = (Box<dyn IoEngine>, BTreeMap<u16, DeviceId>);

/// Makes the engines of a live group's data handles.
pub trait EngineSource: Send + Sync {
    /// A new engine of at least `depth` requests with the group's member
    /// disks attached. `disks` gives, per member disk number, its device in
    /// the metadata plane's engine; the answer gives its device in the new
    /// engine.
    fn engine(
        &self,
        disks: &BTreeMap<u16, DeviceId>,
        depth: usize,
    ) -> Result<HandleEngine, GroupError>;

    /// A device was attached to the metadata plane's engine as `id` (a disk
    /// about to join): engines made from now on attach `file` for it. A
    /// source whose engines see the metadata plane's own devices (a
    /// simulator's) cannot take one.
    fn add_device(&self, id: DeviceId, file: cairn_io::DeviceFile) -> Result<(), GroupError> {
        let _ = (id, file);
        Err(GroupError::Invalid(
            "this group's engines cannot take a new device".into(),
        ))
    }

    /// The I/O counters of the data handles' engines, by the metadata
    /// plane's device id (none if the source does not count).
    fn device_io(&self) -> BTreeMap<DeviceId, Arc<cairn_io::counted::DeviceIo>> {
        BTreeMap::new()
    }

    /// The device `id` no longer belongs to the group (its disk left, or
    /// never joined): engines made from now on leave it out, and the source
    /// lets go of its handle.
    fn remove_device(&self, id: DeviceId) {
        let _ = id;
    }

    /// Whether the disks are devices that can be opened again by their
    /// paths (real devices, files): a live group then lets go of every
    /// descriptor of a disk once it is OFFLINE ([`LiveGroup`](super::LiveGroup)'s
    /// operations), and `group online` or a rescan opens it anew. A
    /// source whose disks cannot be (a simulator's) keeps them attached.
    fn reopens(&self) -> bool {
        false
    }

    /// What the device the source holds for `id` is
    /// ([`cairn_io::device::identity`]), if it can say: a device found
    /// under another path is known by it.
    fn identity(&self, id: DeviceId) -> Option<(u64, u64)> {
        let _ = id;
        None
    }
}

/// A source shared (with the heartbeat, which makes its own engine the
/// same way).
impl<T: EngineSource + ?Sized> EngineSource for Arc<T> {
    fn engine(
        &self,
        disks: &BTreeMap<u16, DeviceId>,
        depth: usize,
    ) -> Result<HandleEngine, GroupError> {
        (**self).engine(disks, depth)
    }

    fn add_device(&self, id: DeviceId, file: cairn_io::DeviceFile) -> Result<(), GroupError> {
        (**self).add_device(id, file)
    }

    fn device_io(&self) -> BTreeMap<DeviceId, Arc<cairn_io::counted::DeviceIo>> {
        (**self).device_io()
    }

    fn remove_device(&self, id: DeviceId) {
        (**self).remove_device(id)
    }

    fn reopens(&self) -> bool {
        (**self).reopens()
    }

    fn identity(&self, id: DeviceId) -> Option<(u64, u64)> {
        (**self).identity(id)
    }
}

/// An [`EngineSource`] whose engines see the disks under the same device ids
/// as the metadata plane's (handles onto one simulator, say): `F` makes an
/// engine of a given depth.
pub struct SameDevices<F>(pub F);

impl<F> EngineSource for SameDevices<F>
where
    F: Fn(usize) -> Box<dyn IoEngine> + Send + Sync,
{
    fn engine(
        &self,
        disks: &BTreeMap<u16, DeviceId>,
        depth: usize,
    ) -> Result<HandleEngine, GroupError> {
        Ok(((self.0)(depth), disks.clone()))
    }
}
