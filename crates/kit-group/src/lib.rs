//! The test kit's targets as Cairn opens them ([`CairnTargets`], the kit's
//! [`TargetOpener`]): Cairn's overwrite rules for devices and files
//! (`cairn_store::admin`, the judgement `cairn disk label` makes), and a file
//! in a Cairn disk group as a benchmark target: `lun=+DATA/bench/f1`. This is
//! the one place the kit meets the store.
//!
//! The point of having the storage manager and the test kit in one tool:
//! measure a database's files where Cairn keeps them, mirroring and striping
//! included, through the same data path a database would use. Opening one:
//!
//! 1. the group is found by discovery, locked and mounted live
//!    ([`group_admin::mount_live`]), and stays mounted for the whole run; a
//!    file that does not exist is created at its `size=`;
//! 2. every extent is initialised through the group: a new file the plan
//!    reads is filled with data (reading never-written extents would measure
//!    nothing: they read as zeros without I/O), any other extent never
//!    written is zeroed, so every read reaches the disks;
//! 3. each worker gets duplicates of the member disks' exclusive handles for
//!    its own engine ([`MappedShare`]), and drives the file through the data
//!    plane's engine ([`cairn_store::group::FileIo`], which wraps the
//!    worker's engine once, when it is made): reads to the primary copy with
//!    fallback, writes to every copy, a failed disk taken offline by the
//!    metadata plane — the rules every other caller of the group follows.
//!
//! When the last target of a group goes, the group is dismounted (every
//! write made durable, the journal checkpointed) and its lock let go.

use std::any::Any;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cairn_io::host::Host;
use cairn_io::poison::{recover, Recover};
use cairn_io::{DeviceFile, EngineKind, FileEngine, Geometry, IoEngine};
use cairn_store::discovery::DiscoveryString;
use cairn_store::group::{
    CreateOptions, DataHandle, FileIo, Group, GroupError, LiveGroup, Mapping, MissingDisks,
};
use cairn_store::group_admin::{self, LiveMounted};
use cairn_store::group_lock::{self, GroupLock};
use cairn_store::names::{self, GroupPath};
use cairn_store::placement::{Striping, FINE_STRIPE_BYTES};

use cairn_kit::model::SdDef;
use cairn_kit::pattern::DataPattern;
use cairn_kit::result::TargetInfo;
use cairn_kit::target::{
    MappedOpen, MappedShare, MappedTarget, OpenerError, TargetOpener, WorkerDevice, WrapEngine,
};

/// Requests the metadata plane's engine may have in flight.
const MOUNT_DEPTH: usize = 64;
/// Bytes written through the group per request while filling a new file.
const FILL_CHUNK_BYTES: u64 = 4 << 20;

/// Cairn's [`TargetOpener`]: devices and files under Cairn's overwrite rules,
/// and `+GROUP/...` luns as files of the groups `discovery` finds.
pub struct CairnTargets {
    /// Where the disks of `+GROUP/...` luns are looked for (`--discover`).
    discovery: Option<DiscoveryString>,
}

impl CairnTargets {
    pub const fn new(discovery: Option<DiscoveryString>) -> Self {
        Self { discovery }
    }
}

impl TargetOpener for CairnTargets {
    fn open_for_overwrite(
        &self,
        host: &Host,
        path: &Path,
        force: bool,
    ) -> Result<DeviceFile, OpenerError> {
        cairn_store::admin::open_for_overwrite(host, path, force).map_err(OpenerError::from)
    }

    fn maps(&self, lun: &Path) -> bool {
        lun.to_str().is_some_and(names::is_group_path)
    }

    /// A group at a time, in the order of their names; every lun's path is
    /// checked before any group is mounted.
    fn open_mapped(
        &self,
        sds: &[&SdDef],
        open: &mut MappedOpen<'_>,
    ) -> Result<Vec<Arc<dyn MappedTarget>>, OpenerError> {
        let mut by_group: BTreeMap<String, Vec<(usize, &SdDef, GroupPath)>> = BTreeMap::new();
        for (i, sd) in sds.iter().enumerate() {
            let path = group_path(sd)?;
            by_group
                .entry(path.group.as_str().to_string())
                .or_default()
                .push((i, sd, path));
        }
        let mut out: Vec<Option<Arc<dyn MappedTarget>>> = vec![None; sds.len()];
        let mut created: Vec<GroupPath> = Vec::new();
        for group_sds in by_group.values() {
            let opened = match &self.discovery {
                None => {
                    let (_, sd, _) = &group_sds[0];
                    Err(GroupTargetError::NoDiscovery {
                        sd: sd.name.clone(),
                        path: sd.lun.clone(),
                    })
                }
                Some(discovery) => {
                    let named: Vec<(&SdDef, GroupPath)> = group_sds
                        .iter()
                        .map(|(_, sd, p)| (*sd, p.clone()))
                        .collect();
                    open_group_files(&named, discovery, open)
                }
            };
            let files = match opened {
                Ok(files) => files,
                Err(error) => {
                    // Leave nothing behind that this call made: the groups
                    // opened so far go first, then their new files.
                    drop(out);
                    let names: Vec<String> = created.iter().map(|p| p.to_string()).collect();
                    return match self.remove_created(open.host, open.engine, &names) {
                        Ok(()) => Err(error.into()),
                        Err(left) => Err(format!("{error}; {left}").into()),
                    };
                }
            };
            for ((i, _, _), file) in group_sds.iter().zip(files) {
                if file.created && !created.contains(&file.path) {
                    created.push(file.path.clone());
                }
                out[*i] = Some(file);
            }
        }
        Ok(out
            .into_iter()
            .map(|t| t.expect("invariant: every sd is in one group, and every group was opened"))
            .collect())
    }

    fn remove_created(
        &self,
        host: &Host,
        engine: EngineKind,
        names: &[String],
    ) -> Result<(), OpenerError> {
        let Some(discovery) = &self.discovery else {
            // Nothing was opened without one.
            return Ok(());
        };
        let paths: Vec<GroupPath> = names
            .iter()
            .filter_map(|name| GroupPath::parse_file(name).ok())
            .collect();
        Ok(remove_created(host, discovery, engine, &paths)?)
    }
}

/// A group mounted live for a run: dismounted, and its lock let go, when the
/// last of its files' targets is dropped.
pub struct RunGroup {
    /// Set at the mount and taken whole at the drop; only cloned under the
    /// lock in between, so never half made (poisoning: `cairn_io::poison`).
    live: Mutex<Option<LiveGroup>>,
    _lock: GroupLock,
}

impl RunGroup {
    /// The live group (until the run ends).
    pub fn live(&self) -> Option<LiveGroup> {
        self.live.lock_or_recover().clone()
    }
}

impl std::fmt::Debug for RunGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunGroup")
    }
}

impl Drop for RunGroup {
    fn drop(&mut self) {
        let live = recover(self.live.get_mut()).take();
        if let Some(live) = live {
            // Every worker's engine is gone by now; if one is not, the
            // journal covers what a checkpoint would have.
            let _ = live.dismount();
        }
    }
}

/// One group file, open for a run.
#[derive(Debug)]
pub struct GroupFileTarget {
    /// As the plan names it: `+DATA/bench/f1`.
    pub path: GroupPath,
    pub redundancy: &'static str,
    /// The group, mounted live for the run.
    pub group: Arc<RunGroup>,
    /// The file's number in the group.
    pub number: u32,
    /// Copies per extent, and the stripe unit (for the engine's fan-out).
    pub copies: usize,
    pub stripe_unit_bytes: u64,
    /// The member disks the file has extents on: disk number, the path it
    /// was found at, and a handle (exclusive, direct I/O) to duplicate for
    /// each worker's engine.
    pub members: Vec<(u16, PathBuf, DeviceFile)>,
    /// The file as one device: its size, the group's sector, the members'
    /// smallest maximum transfer.
    pub geometry: Geometry,
    pub created: bool,
    /// The engine the group was mounted with, as asked, and as it turned out
    /// (`io_uring`, `sync`).
    pub engine: EngineKind,
    pub mount_engine: &'static str,
}

impl MappedTarget for GroupFileTarget {
    fn name(&self) -> String {
        self.path.to_string()
    }

    fn created(&self) -> bool {
        self.created
    }

    fn engine(&self) -> EngineKind {
        self.engine
    }

    fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    fn info(&self, sd: &str, start_bytes: u64, end_bytes: u64, created: bool) -> TargetInfo {
        let geometry = &self.geometry;
        TargetInfo {
            sd: sd.to_string(),
            path: String::new(),
            kind: format!(
                "cairn group file ({} redundancy, {} disk{})",
                self.redundancy.to_ascii_lowercase(),
                self.members.len(),
                if self.members.len() == 1 { "" } else { "s" }
            ),
            size_bytes: geometry.size_bytes,
            start_bytes,
            end_bytes,
            logical_sector_bytes: geometry.logical_sector_bytes,
            physical_sector_bytes: geometry.physical_sector_bytes,
            sector_format: geometry.sector_format(),
            max_transfer_bytes: geometry.max_transfer_bytes,
            optimal_io_bytes: 0,
            rotational: None,
            discard: false,
            devices: Vec::new(),
            created,
            mount_engine: Some(self.mount_engine.to_string()),
        }
    }

    fn device_paths(&self) -> Vec<PathBuf> {
        self.members.iter().map(|(_, p, _)| p.clone()).collect()
    }

    fn share(&self) -> std::io::Result<Box<dyn MappedShare>> {
        Ok(Box::new(GroupFileShare {
            copies: self.copies,
            stripe_unit_bytes: self.stripe_unit_bytes,
            group: self.group.clone(),
            number: self.number,
            geometry: self.geometry.clone(),
            members: self
                .members
                .iter()
                .map(|(disk, _, d)| Ok((*disk, d.try_clone()?)))
                .collect::<std::io::Result<_>>()?,
        }))
    }
}

/// A worker's own handles on a group file: the member disks, each a device
/// of the worker's engine, under one [`FileIo`] that is the worker's engine.
struct GroupFileShare {
    copies: usize,
    stripe_unit_bytes: u64,
    /// The group (mounted live for the run).
    group: Arc<RunGroup>,
    number: u32,
    geometry: Geometry,
    /// Member disk number and the worker's own handle on it.
    members: Vec<(u16, DeviceFile)>,
}

impl MappedShare for GroupFileShare {
    fn fan_out(&self, max_len: u64) -> usize {
        FileIo::fan_out(
            self.copies,
            self.members.len(),
            self.stripe_unit_bytes,
            max_len,
        )
    }

    fn attach(
        self: Box<Self>,
        engine: &mut dyn FileEngine,
    ) -> Result<(Box<dyn Any>, WrapEngine), OpenerError> {
        let group = self.group.live().ok_or(Dismounted)?;
        let mapping = Mapping::GroupFile {
            group,
            number: self.number,
            disks: self
                .members
                .into_iter()
                .map(|(disk, device)| (disk, engine.attach(device)))
                .collect(),
            geometry: self.geometry,
        };
        Ok((Box::new(mapping), file_io))
    }
}

/// A group file's group, dismounted before the run's workers started.
#[derive(Debug, thiserror::Error)]
#[error("the group was dismounted before the run")]
struct Dismounted;

/// A worker's sd that another opener mapped, beside a group file.
#[derive(Debug, thiserror::Error)]
#[error("an sd mapped by another opener shares this worker's engine; run it in a bench of its own")]
struct ForeignMapping;

/// A worker's engine over its sds when a group file is among them: the
/// data plane's [`FileIo`] over the worker's engine, once per worker (no
/// cost per I/O beyond FileIo's own).
fn file_io(
    engine: Box<dyn IoEngine>,
    devices: Vec<WorkerDevice>,
    depth: usize,
) -> Result<Box<dyn IoEngine>, OpenerError> {
    let mappings = devices
        .into_iter()
        .map(|d| match d {
            WorkerDevice::Direct(id) => Ok(Mapping::Direct(id)),
            WorkerDevice::Mapped(attached) => attached
                .downcast::<Mapping>()
                .map(|m| *m)
                .map_err(|_| ForeignMapping),
        })
        .collect::<Result<Vec<_>, ForeignMapping>>()?;
    Ok(Box::new(FileIo::new(engine, mappings, depth)))
}

/// Why a group file could not be opened: one line, with what to do.
#[derive(Debug, thiserror::Error)]
pub enum GroupTargetError {
    #[error("sd={sd}: {path}: {message}")]
    Failed {
        sd: String,
        path: String,
        message: String,
    },
    #[error("sd={sd}: {} is a Cairn group file, and no discovery string was given to find its group; give --discover", path.display())]
    NoDiscovery { sd: String, path: PathBuf },
}

/// The lun as a group path (`+GROUP/...`, the opener [maps](TargetOpener::maps) it).
fn group_path(sd: &SdDef) -> Result<GroupPath, GroupTargetError> {
    let text = sd.lun.to_string_lossy();
    GroupPath::parse_file(&text).map_err(|e| GroupTargetError::Failed {
        sd: sd.name.clone(),
        path: text.to_string(),
        message: format!("{e}"),
    })
}

impl GroupTargetError {
    /// The error, and what a failed clean-up left behind.
    fn add_leftover(&mut self, left: &LeftBehind) {
        match self {
            GroupTargetError::Failed { message, .. } => *message = format!("{message}; {left}"),
            GroupTargetError::NoDiscovery { .. } => {}
        }
    }
}

fn fail(sd: &SdDef, path: &GroupPath, message: String) -> GroupTargetError {
    GroupTargetError::Failed {
        sd: sd.name.clone(),
        path: path.to_string(),
        message,
    }
}

/// Open the files `sds` name in one group (all `+GROUP/...` of the same
/// group), in order; sds naming the same file share it.
fn open_group_files(
    sds: &[(&SdDef, GroupPath)],
    discovery: &DiscoveryString,
    open: &mut MappedOpen<'_>,
) -> Result<Vec<Arc<GroupFileTarget>>, GroupTargetError> {
    let Some((first_sd, first_path)) = sds.first() else {
        return Ok(Vec::new());
    };
    let LiveMounted {
        group: live,
        lock,
        paths,
        members,
        ..
    } = group_admin::mount_live(
        open.host,
        discovery,
        first_path.group.as_str(),
        &group_lock::run_dir(),
        // A member discovery misses is not lost: refuse, changing nothing.
        MissingDisks::Refuse,
        cairn_store::group::heartbeat::Takeover::Refuse,
        open.engine,
        MOUNT_DEPTH,
    )
    .map_err(|e| fail(first_sd, first_path, format!("{e}")))?;
    let mount_engine = live
        .meta(|g| g.engine().name())
        .map_err(|e| fail(first_sd, first_path, format!("{e}")))?;
    let mut created: Vec<GroupPath> = Vec::new();
    let prepared = match prepare_all(&live, sds, open, &mut created) {
        Ok(prepared) => prepared,
        Err(mut e) => {
            // Leave nothing this call made: the files it created go again.
            let kept = live
                .meta(|g| {
                    created
                        .iter()
                        .filter(|path| g.remove(path).is_err())
                        .count()
                })
                .unwrap_or(created.len());
            let dismounted = live.dismount();
            if kept > 0 || dismounted.is_err() {
                // Try once more from a fresh mount (our lock and handles let
                // go first); say what is left if that fails.
                drop(lock);
                drop(members);
                if let Err(left) = remove_created(open.host, discovery, open.engine, &created) {
                    e.add_leftover(&left);
                }
            }
            return Err(e);
        }
    };
    let redundancy = live
        .meta(|g| g.redundancy().as_str())
        .map_err(|e| fail(first_sd, first_path, format!("{e}")))?;
    let run = Arc::new(RunGroup {
        live: Mutex::new(Some(live)),
        _lock: lock,
    });
    let handed_out = hand_out(
        sds,
        &prepared,
        redundancy,
        open.engine,
        mount_engine,
        &members,
        &paths_by_disk(&run, &paths),
        &run,
    );
    match handed_out {
        Ok(out) => Ok(out),
        Err(mut e) => {
            // The group goes with the failed hand-out; then the files this
            // call made are removed.
            drop(run);
            drop(members);
            if let Err(left) = remove_created(open.host, discovery, open.engine, &created) {
                e.add_leftover(&left);
            }
            Err(e)
        }
    }
}

/// Each sd's file made ready, in order ([`prepare`]); sds naming one file
/// (names are case-blind) share it. `created` gains each file this made,
/// for the caller to remove if anything fails.
fn prepare_all(
    live: &LiveGroup,
    sds: &[(&SdDef, GroupPath)],
    open: &mut MappedOpen<'_>,
    created: &mut Vec<GroupPath>,
) -> Result<Vec<Prepared>, GroupTargetError> {
    let mut prepared: Vec<Prepared> = Vec::new();
    let Some((first_sd, first_path)) = sds.first() else {
        return Ok(prepared);
    };
    let mut handle = live
        .handle(MOUNT_DEPTH)
        .map_err(|e| fail(first_sd, first_path, format!("{e}")))?;
    live.meta(|g| check_before_any_write(g, sds, open))
        .map_err(|e| fail(first_sd, first_path, format!("{e}")))??;
    for (sd, path) in sds {
        // Names are case-blind: two spellings of one file share it.
        let number = live
            .meta(|g| g.open(path).ok().map(|info| info.number))
            .map_err(|e| fail(sd, path, format!("{e}")))?;
        if let Some(i) = number.and_then(|n| prepared.iter().position(|p| p.number == n)) {
            prepared.push(prepared[i].clone());
            continue;
        }
        let p = prepare(live, &mut handle, sd, path, open, created)
            .map_err(|e| fail(sd, path, e.to_string()))?;
        prepared.push(p);
    }
    Ok(prepared)
}

/// The path each member disk was found at, by disk number.
fn paths_by_disk(run: &RunGroup, paths: &BTreeMap<u32, PathBuf>) -> BTreeMap<u16, PathBuf> {
    run.live()
        .and_then(|live| live.meta(|g| g.member_devices()).ok())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(disk, id)| Some((disk, paths.get(&id.0)?.clone())))
        .collect()
}

/// The prepared files as targets, each with duplicates of its member disks'
/// handles and the group.
#[allow(clippy::too_many_arguments)]
fn hand_out(
    sds: &[(&SdDef, GroupPath)],
    prepared: &[Prepared],
    redundancy: &'static str,
    engine_kind: EngineKind,
    mount_engine: &'static str,
    members: &BTreeMap<u16, DeviceFile>,
    paths: &BTreeMap<u16, PathBuf>,
    run: &Arc<RunGroup>,
) -> Result<Vec<Arc<GroupFileTarget>>, GroupTargetError> {
    let mut out: Vec<Arc<GroupFileTarget>> = Vec::new();
    for (k, p) in prepared.iter().enumerate() {
        if let Some(i) = prepared[..k].iter().position(|q| q.number == p.number) {
            out.push(out[i].clone());
            continue;
        }
        let (sd, path) = &sds[k];
        let mut handles = Vec::new();
        for disk in &p.disks {
            // A disk OFFLINE in the group is not open: its copies are not
            // read, and writes that miss them go through the group's data
            // path, which marks them stale.
            let Some(device) = members.get(disk) else {
                continue;
            };
            let device = device
                .try_clone()
                .map_err(|e| fail(sd, path, format!("cannot share member disk {disk}: {e}")))?;
            let found_at = paths
                .get(disk)
                .cloned()
                .unwrap_or_else(|| device.path().to_path_buf());
            handles.push((*disk, found_at, device));
        }
        let geometry = Geometry {
            size_bytes: p.size_bytes,
            logical_sector_bytes: p.sector_bytes,
            physical_sector_bytes: handles
                .iter()
                .map(|(_, _, d)| d.geometry().physical_sector_bytes)
                .max()
                .unwrap_or(p.sector_bytes)
                .max(p.sector_bytes),
            max_transfer_bytes: handles
                .iter()
                .map(|(_, _, d)| d.geometry().max_transfer_bytes)
                .min()
                .unwrap_or(p.sector_bytes),
            discard: cairn_io::geometry::DiscardSupport::Unsupported,
            rotational: None,
        };
        out.push(Arc::new(GroupFileTarget {
            path: p.path.clone(),
            redundancy,
            group: run.clone(),
            number: p.number,
            copies: p.copies,
            stripe_unit_bytes: p.stripe_unit_bytes,
            members: handles,
            geometry,
            created: p.created,
            engine: engine_kind,
            mount_engine,
        }));
    }
    Ok(out)
}

/// Every refusal that needs no I/O, before any file is created or filled: a
/// plan that writes to a file that exists (it may be a database's datafile)
/// without `--force`, and a missing file without a size.
fn check_before_any_write(
    group: &Group<'_>,
    sds: &[(&SdDef, GroupPath)],
    open: &MappedOpen<'_>,
) -> Result<(), GroupTargetError> {
    // Names are case-blind: one key per file, however it is spelled.
    let key = |p: &GroupPath| p.to_string().to_ascii_lowercase();
    for (sd, path) in sds {
        match group.open(path) {
            Ok(_) if open.writes && !open.force => {
                return Err(fail(
                    sd,
                    path,
                    "the file exists and this plan writes to it, which would destroy its contents; give --force, or name a new file".into(),
                ));
            }
            Ok(_) => {}
            Err(GroupError::NotFound(_)) => {
                let sized = sds
                    .iter()
                    .any(|(other, p)| key(p) == key(path) && other.size_bytes.is_some());
                if !sized {
                    return Err(fail(
                        sd,
                        path,
                        "no such file in the group; give size= (--size) so Cairn can create it"
                            .into(),
                    ));
                }
            }
            Err(e) => return Err(fail(sd, path, format!("{e}"))),
        }
    }
    Ok(())
}

/// A file made ready while the group is mounted.
#[derive(Clone)]
struct Prepared {
    path: GroupPath,
    number: u32,
    /// Made by this run.
    created: bool,
    size_bytes: u64,
    sector_bytes: u32,
    copies: usize,
    stripe_unit_bytes: u64,
    /// The member disks the file has extents on.
    disks: Vec<u16>,
}

/// Why a group file could not be made ready: follows the sd and the path.
#[derive(Debug, thiserror::Error)]
enum PrepareError {
    #[error("{0}")]
    Group(GroupError),
    #[error("no such file in the group; give size= (--size) so Cairn can create it")]
    NoSize,
    #[error("cannot create it: {0}")]
    Create(GroupError),
    #[error("filling it failed: {0}")]
    Fill(GroupError),
    #[error("filling it was interrupted")]
    Interrupted,
    #[error("cannot initialise its extents: {0}")]
    Initialise(GroupError),
    #[error("it went away while it was prepared")]
    Gone,
}

impl From<GroupError> for PrepareError {
    fn from(e: GroupError) -> Self {
        PrepareError::Group(e)
    }
}

fn prepare(
    live: &LiveGroup,
    handle: &mut DataHandle,
    sd: &SdDef,
    path: &GroupPath,
    open: &mut MappedOpen<'_>,
    created: &mut Vec<GroupPath>,
) -> Result<Prepared, PrepareError> {
    let sector = u64::from(live.meta(|g| g.sector_bytes())?);
    let info = match live.meta(|g| g.open(path))? {
        Ok(info) => info,
        Err(GroupError::NotFound(_)) => {
            let Some(size) = sd.size_bytes else {
                return Err(PrepareError::NoSize);
            };
            let size = size.div_ceil(sector) * sector;
            let options = CreateOptions {
                parents: true,
                ..CreateOptions::default()
            };
            let info = live
                .meta(|g| g.create_file(path, size, &options))?
                .map_err(PrepareError::Create)?;
            created.push(path.clone());
            if open.reads {
                fill(handle, info.number, size, open.fill_progress)?;
            }
            info
        }
        Err(e) => return Err(PrepareError::Group(e)),
    };
    handle
        .initialize_file(info.number)
        .map_err(PrepareError::Initialise)?;
    let snap = handle.file(info.number).ok_or(PrepareError::Gone)?;
    let mut disks: Vec<u16> = snap
        .extents()
        .flat_map(|e| e.copies().iter().map(|c| c.disk).collect::<Vec<_>>())
        .collect();
    disks.sort_unstable();
    disks.dedup();
    Ok(Prepared {
        path: path.clone(),
        number: info.number,
        created: created.contains(path),
        size_bytes: info.size_bytes,
        sector_bytes: snap.sector_bytes,
        copies: usize::from(snap.copies),
        stripe_unit_bytes: match snap.layout.striping {
            Striping::Coarse => snap.au_bytes,
            Striping::Fine => FINE_STRIPE_BYTES.min(snap.au_bytes),
        },
        disks,
    })
}

/// Write data over a new file through the group, so reads reach the disks.
fn fill(
    handle: &mut DataHandle,
    number: u32,
    size: u64,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<(), PrepareError> {
    let pattern = DataPattern::new(1.0, 1.0, 8192, 0x5eed);
    let mut buf = vec![0u8; FILL_CHUNK_BYTES.min(size) as usize];
    let mut offset = 0u64;
    let mut counter = 0u64;
    while offset < size {
        let len = FILL_CHUNK_BYTES.min(size - offset) as usize;
        counter += 1;
        pattern.fill(&mut buf[..len], offset, counter);
        handle
            .write(number, offset, &buf[..len])
            .map_err(PrepareError::Fill)?;
        offset += len as u64;
        if !progress(offset, size) {
            return Err(PrepareError::Interrupted);
        }
    }
    handle.sync().map_err(PrepareError::Fill)
}

/// Remove group files a refused run created: mount the group again (after
/// every handle and the lock of the run are dropped) and remove them. Goes on
/// past a failure; the error names what is left and how to remove it.
fn remove_created(
    host: &Host,
    discovery: &DiscoveryString,
    engine_kind: EngineKind,
    files: &[GroupPath],
) -> Result<(), LeftBehind> {
    let mut by_group: BTreeMap<String, Vec<&GroupPath>> = BTreeMap::new();
    for path in files {
        by_group
            .entry(path.group.as_str().to_string())
            .or_default()
            .push(path);
    }
    let mut left: Vec<String> = Vec::new();
    for (name, paths) in by_group {
        let removed = (|| -> Result<Vec<String>, NotRemoved> {
            let mut engine = cairn_io::new_file_engine(engine_kind, MOUNT_DEPTH)
                .map_err(NotRemoved::NoEngine)?;
            let mut mounted = group_admin::mount_with(
                engine.as_mut(),
                host,
                discovery,
                &name,
                &group_lock::run_dir(),
                MissingDisks::Refuse,
                cairn_store::group::heartbeat::Takeover::Refuse,
            )
            .map_err(NotRemoved::Mount)?;
            let mut kept = Vec::new();
            for path in &paths {
                if mounted.group.remove(path).is_err() {
                    kept.push(path.to_string());
                }
            }
            mounted.group.dismount().map_err(NotRemoved::Dismount)?;
            Ok(kept)
        })();
        match removed {
            Ok(kept) => left.extend(kept),
            Err(why) => {
                let names: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
                left.push(format!("{} ({why})", names.join(" ")));
            }
        }
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(LeftBehind {
            left,
            discovery: discovery.text.clone(),
        })
    }
}

/// Group files a refused run made and could not remove (each with why, when
/// its group could not be mounted again), and how to remove them.
#[derive(Debug, thiserror::Error)]
#[error("the new file(s) {} could not be removed; remove them with `cairn rm --discover '{discovery}' PATH`", left.join(" "))]
pub struct LeftBehind {
    left: Vec<String>,
    discovery: String,
}

/// Why a group's new files could not be removed at all.
#[derive(Debug, thiserror::Error)]
enum NotRemoved {
    #[error("cannot start an I/O engine: {0}")]
    NoEngine(std::io::Error),
    #[error("{0}")]
    Mount(group_admin::GroupAdminError),
    #[error("{0}")]
    Dismount(GroupError),
}
