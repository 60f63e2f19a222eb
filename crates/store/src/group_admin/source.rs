//! Engines over duplicates of the members' handles: the data handles' (each
//! device's I/O counted) and the heartbeat's (io_uring where the kernel has
//! it, not counted).

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_io::poison::Recover;
use cairn_io::{DeviceFile, DeviceId, FileEngine};

use crate::group::{self, GroupError};

/// Engines for data handles of a live group on real disks: each a new engine
/// of one kind, with duplicates of the members' handles attached.
pub(super) struct FileSource {
    pub(super) kind: cairn_io::EngineKind,
    /// By the metadata plane's device id. Changed only under the group's
    /// `meta` (a disk added or let go of); read by each new data handle's
    /// engine. A leaf lock.
    pub(super) files: std::sync::Mutex<BTreeMap<cairn_io::DeviceId, DeviceFile>>,
    /// Each device's I/O counters, by the same id, which every data
    /// handle's engine records into. A leaf lock, taken as an engine is
    /// made and when they are read (never per I/O: the counters are
    /// atomics).
    pub(super) io:
        std::sync::Mutex<BTreeMap<cairn_io::DeviceId, std::sync::Arc<cairn_io::counted::DeviceIo>>>,
}

impl FileSource {
    fn io(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        BTreeMap<cairn_io::DeviceId, std::sync::Arc<cairn_io::counted::DeviceIo>>,
    > {
        self.io.lock_or_recover()
    }

    pub(super) fn files(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<cairn_io::DeviceId, DeviceFile>> {
        self.files.lock_or_recover()
    }
}

/// An engine [`FileSource::make`] made: the engine, each disk's device in
/// it, and (metadata plane's device id, its device in the engine) pairs.
type MadeEngine = (
    Box<dyn FileEngine>,
    BTreeMap<u16, DeviceId>,
    Vec<(DeviceId, DeviceId)>,
);

impl FileSource {
    /// A source over duplicates of the handles of `devices`, attached to
    /// `engine` (a mount's own engine, borrowed).
    pub(super) fn over(engine: &dyn FileEngine, devices: &[DeviceId]) -> Result<Self, GroupError> {
        let mut files = BTreeMap::new();
        for id in devices {
            let Some(device) = engine.device(*id) else {
                continue;
            };
            let dup = device
                .try_clone()
                .map_err(|e| GroupError::Invalid(format!("cannot share a member's handle: {e}")))?;
            files.insert(*id, dup);
        }
        Ok(Self {
            kind: cairn_io::EngineKind::Auto,
            files: std::sync::Mutex::new(files),
            io: std::sync::Mutex::new(BTreeMap::new()),
        })
    }

    /// An engine of `kind` over duplicates of the handles of `disks`
    /// (disk number → the metadata plane's device id).
    fn make(
        &self,
        kind: cairn_io::EngineKind,
        disks: &BTreeMap<u16, cairn_io::DeviceId>,
        depth: usize,
    ) -> Result<MadeEngine, GroupError> {
        let mut engine = cairn_io::new_file_engine(kind, depth)
            .map_err(|e| GroupError::Invalid(format!("cannot start an I/O engine: {e}")))?;
        let mut ids = BTreeMap::new();
        let mut pairs = Vec::new();
        let files = self.files();
        for (disk, meta_id) in disks {
            let Some(file) = files.get(meta_id) else {
                continue;
            };
            let dup = file
                .try_clone()
                .map_err(|e| GroupError::Invalid(format!("cannot share a member's handle: {e}")))?;
            let id = engine.attach(dup);
            ids.insert(*disk, id);
            pairs.push((*meta_id, id));
        }
        Ok((engine, ids, pairs))
    }
}

/// The heartbeat's engines (`group::heartbeat`): over the same handles as
/// the data handles', but io_uring wherever the kernel has it, whatever
/// the mount's engine, so that a hung disk never holds the heartbeat
/// thread past its beat (a waiting read or write gives up at its
/// deadline); and not counted in the data plane's I/O figures.
pub(super) struct HeartbeatSource(pub(super) Arc<FileSource>);

impl group::EngineSource for HeartbeatSource {
    fn engine(
        &self,
        disks: &BTreeMap<u16, cairn_io::DeviceId>,
        depth: usize,
    ) -> Result<group::HandleEngine, GroupError> {
        let (engine, ids, _) = self.0.make(cairn_io::EngineKind::Auto, disks, depth)?;
        let engine: Box<dyn cairn_io::IoEngine> = engine;
        Ok((engine, ids))
    }
}

impl group::EngineSource for FileSource {
    fn engine(
        &self,
        disks: &BTreeMap<u16, cairn_io::DeviceId>,
        depth: usize,
    ) -> Result<group::HandleEngine, GroupError> {
        let (engine, ids, pairs) = self.make(self.kind, disks, depth)?;
        let mut io = self.io();
        let counters = pairs
            .into_iter()
            .map(|(meta_id, id)| (id, io.entry(meta_id).or_default().clone()))
            .collect();
        let engine: Box<dyn cairn_io::IoEngine> = engine;
        Ok((
            Box::new(cairn_io::counted::Counted::new(engine, counters)),
            ids,
        ))
    }

    fn device_io(
        &self,
    ) -> BTreeMap<cairn_io::DeviceId, std::sync::Arc<cairn_io::counted::DeviceIo>> {
        self.io().clone()
    }

    fn add_device(&self, id: cairn_io::DeviceId, file: DeviceFile) -> Result<(), GroupError> {
        self.files().insert(id, file);
        Ok(())
    }

    fn remove_device(&self, id: cairn_io::DeviceId) {
        self.files().remove(&id);
        self.io().remove(&id);
    }

    /// Real devices: opened again by their paths.
    fn reopens(&self) -> bool {
        true
    }

    fn identity(&self, id: cairn_io::DeviceId) -> Option<(u64, u64)> {
        self.files().get(&id).and_then(|f| f.identity().ok())
    }
}
