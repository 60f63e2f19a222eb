//! The commands `cairn serve` carries out for the CLI, through its control
//! socket, on the groups it holds (`docs/serve.md`, "The control socket").
//!
//! The CLI sends the command line as typed; the service parses it with the
//! same parser, does the work on its live groups (a metadata operation
//! under the metadata plane's lock, or a long operation beside the file
//! system's I/O) and renders the result with the same code the CLI uses
//! (`group_cmd`'s `show_*`), into the client's console. So a command gives
//! the same text and the same JSON with or without the service.
//!
//! A long operation (resync, rebalance) runs on a thread of its own; the
//! command returns once it has started, or with `--wait` follows it to its
//! end. One long operation runs on a group at a time.
//!
//! Shared state: `busy` (the group each long operation runs on) and
//! `background` (their threads) are leaves, held only to look or change.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use std::os::fd::OwnedFd;

use anyhow::{anyhow, bail, Context, Result};
use cairn_serve::control::{self, Peer, Replier, Reply, Request};
use cairn_serve::Held;
use cairn_store::discovery::DiscoveryString;
use cairn_store::group::{self, LiveGroup};
use cairn_store::group_admin::DiskArg;
use cairn_store::group_lock;
use cairn_store::names::GroupPath;
use cairn_store::{file_copy, group_admin, group_copy};
use clap::Parser;

use crate::console::Console;
use crate::group_cmd::{self, GroupCommand};
use crate::volume_cmd::{self, VolumeCommand};
use crate::{Cli, EngineArg, Noun, Outcome};
use cairn_serve::volume::Detached;

/// The power a pending rebalance resumes at when its recorded power does
/// not fit a command's (it always does, unless the record is damaged).
const REBALANCE_RESUME_POWER: u16 = 4;

/// What a command is about, for deciding who carries it out.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Concern {
    /// One group, by name (upper case).
    Group(String),
    /// Every group discovery finds (`group list`): the service answers when
    /// its discovery string is the client's.
    Discovery,
    /// The long operations (`group ops` without a group).
    Operations,
}

/// The `--discover` a command was given, if any.
pub(crate) fn discover_flag(noun: &Noun) -> Option<&str> {
    let d = match noun {
        Noun::Ls { discover, .. }
        | Noun::Du { discover, .. }
        | Noun::Mkdir { discover, .. }
        | Noun::Rm { discover, .. }
        | Noun::Cp { discover, .. }
        | Noun::Mkalias { discover, .. } => discover,
        Noun::Group(command) => match command {
            GroupCommand::Create { discover, .. }
            | GroupCommand::List { discover, .. }
            | GroupCommand::Disks { discover, .. }
            | GroupCommand::Mount { discover, .. }
            | GroupCommand::Check { discover, .. }
            | GroupCommand::Scrub { discover, .. }
            | GroupCommand::Reclaim { discover, .. }
            | GroupCommand::Space { discover, .. }
            | GroupCommand::Online { discover, .. }
            | GroupCommand::Offline { discover, .. }
            | GroupCommand::Alter { discover, .. }
            | GroupCommand::Rebalance { discover, .. }
            | GroupCommand::Undrop { discover, .. }
            | GroupCommand::DropDisk { discover, .. }
            | GroupCommand::Replace { discover, .. }
            | GroupCommand::Set { discover, .. }
            | GroupCommand::Get { discover, .. } => discover,
            GroupCommand::Ops { .. } => return None,
        },
        _ => return None,
    };
    d.discover.as_deref()
}

/// What a command the service may carry out is about; `None`: the CLI
/// always does it itself (creating groups, disks, benchmarks, copies).
pub(crate) fn concern(noun: &Noun) -> Option<Concern> {
    let path_group = |p: &str| {
        GroupPath::parse(p)
            .ok()
            .map(|p| Concern::Group(p.group.as_str().to_ascii_uppercase()))
    };
    let named = |n: &str| Some(Concern::Group(n.to_ascii_uppercase()));
    match noun {
        Noun::Ls { path, .. } | Noun::Du { path, .. } | Noun::Mkdir { path, .. } => {
            path_group(path)
        }
        Noun::Mkalias { target, .. } => path_group(target),
        // Out of a group (or between groups): the source's group; in: the
        // destination's.
        Noun::Cp { source, dest, .. } if source.starts_with('+') => path_group(source),
        Noun::Cp { dest, .. } => path_group(dest),
        Noun::Rm { paths, .. } => {
            // Carried out by one party: all in one group.
            let groups: BTreeSet<Option<Concern>> = paths.iter().map(|p| path_group(p)).collect();
            match groups.into_iter().collect::<Vec<_>>().as_slice() {
                [Some(g)] => Some(g.clone()),
                _ => None,
            }
        }
        Noun::Status { .. } => Some(Concern::Operations),
        Noun::Volume(command) => Some(match command.group() {
            Some(g) => Concern::Group(g.to_ascii_uppercase()),
            None => Concern::Operations,
        }),
        Noun::Group(command) => match command {
            GroupCommand::Create { .. } => None,
            GroupCommand::List { .. } => Some(Concern::Discovery),
            GroupCommand::Ops { name, .. } => match name {
                Some(n) => named(n),
                None => Some(Concern::Operations),
            },
            GroupCommand::Disks { name, .. }
            | GroupCommand::Mount { name, .. }
            | GroupCommand::Check { name, .. }
            | GroupCommand::Scrub { name, .. }
            | GroupCommand::Reclaim { name, .. }
            | GroupCommand::Space { name, .. }
            | GroupCommand::Online { name, .. }
            | GroupCommand::Offline { name, .. }
            | GroupCommand::Alter { name, .. }
            | GroupCommand::Rebalance { name, .. }
            | GroupCommand::Undrop { name, .. }
            | GroupCommand::DropDisk { name, .. }
            | GroupCommand::Replace { name, .. }
            | GroupCommand::Set { name, .. }
            | GroupCommand::Get { name, .. } => named(name),
        },
        _ => None,
    }
}

/// A group the service holds, as its commands see it.
pub(crate) struct HeldGroup {
    pub(crate) held: Held,
    /// Its disks' paths, by device id in the metadata plane's engine:
    /// those found at mount, and disks added since. A leaf.
    pub(crate) paths: Mutex<BTreeMap<u32, PathBuf>>,
}

impl HeldGroup {
    fn live(&self) -> &Arc<LiveGroup> {
        &self.held.group
    }

    /// New disks joined as `ids` (in the metadata plane's engine): their
    /// paths are known from now on.
    fn joined(&self, ids: &[cairn_io::DeviceId], new: &NewDisks) {
        let mut paths = lock(&self.paths);
        for (id, added) in ids.iter().zip(&new.added) {
            paths.insert(id.0, added.path.clone());
        }
    }

    fn name(&self) -> &str {
        &self.held.name
    }
}

pub(crate) struct ServedCommands {
    groups: Vec<Arc<HeldGroup>>,
    /// Where the file system is mounted.
    mountpoint: PathBuf,
    /// When the groups were served.
    started: std::time::Instant,
    /// The service's discovery string: as resolved at start, and again at
    /// each SIGHUP. A leaf.
    discovery: Mutex<DiscoveryString>,
    /// The service's `--discover`, if it was given one (it wins over the
    /// environment and the configuration, at start and at SIGHUP).
    discover_flag: Option<String>,
    engine: EngineArg,
    /// The groups a long operation runs on, and which. A leaf.
    busy: Arc<Mutex<BTreeMap<String, &'static str>>>,
    /// Held across each volume command (and the stop's detaching), so that
    /// one looks at the loop devices and acts on them, and changes the
    /// record of attachments, at a time. Taken before any group's locks,
    /// never by the file system's requests.
    volumes: Mutex<()>,
    /// The threads of long operations whose clients did not wait, and
    /// whether the service is stopping (no new one then). A leaf.
    background: Mutex<Background>,
}

/// What a path names, whatever it is called: a block device by its device
/// number, a file by its file system and inode.
fn device_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    Some(if m.file_type().is_block_device() {
        (0, m.rdev())
    } else {
        (m.dev(), m.ino())
    })
}

/// Make the device paths of a command absolute against the client's
/// working directory `cwd` (the service's own is not the client's).
fn resolve_paths(noun: &mut Noun, cwd: &str) -> Result<()> {
    let resolve = |path: &std::path::Path| -> Result<PathBuf> {
        if path.is_absolute() {
            return Ok(path.to_path_buf());
        }
        if !cwd.starts_with('/') {
            bail!(
                "the device path {} is relative and the service was not told the client's working directory; give the full path",
                path.display()
            );
        }
        Ok(std::path::Path::new(cwd).join(path))
    };
    match noun {
        Noun::Group(GroupCommand::Alter { add, .. }) => {
            for a in add.iter_mut() {
                let joined = resolve(std::path::Path::new(a.as_str()))?;
                *a = joined.to_string_lossy().into_owned();
            }
        }
        Noun::Group(GroupCommand::Replace { with, .. }) => *with = resolve(with)?,
        _ => {}
    }
    Ok(())
}

/// What `alter` on a live group did before its rebalance.
enum Altered {
    Explained(group::relocate::Explain),
    Changed {
        added: Vec<String>,
        resized: Vec<String>,
    },
}

/// New disks opened and labelled for a change to a live group.
struct NewDisks {
    /// The engine that opened and labelled them (and erases a label it
    /// made, if the change is refused).
    engine: Box<dyn cairn_io::FileEngine>,
    new: Vec<group::NewDisk>,
    added: Vec<group_admin::AddedDisk>,
    /// Their handles, shared, for the group's engines.
    files: Vec<cairn_io::DeviceFile>,
}

impl NewDisks {
    /// The disks as the group's engine knows them (`ids`, in order).
    fn with_ids(&self, ids: &[cairn_io::DeviceId]) -> Vec<group::NewDisk> {
        self.new
            .iter()
            .zip(ids)
            .map(|(n, id)| group::NewDisk {
                device: *id,
                failgroup: n.failgroup.clone(),
            })
            .collect()
    }

    /// The change was refused before the disks joined: the labels this
    /// call wrote are erased again.
    fn refused(mut self) {
        group_admin::erase_new_labels(self.engine.as_mut(), &self.added);
    }
}

#[derive(Default)]
struct Background {
    threads: Vec<JoinHandle<()>>,
    stopping: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A group's long operation, marked busy until this drops.
struct Busy {
    busy: Arc<Mutex<BTreeMap<String, &'static str>>>,
    group: String,
}

impl Drop for Busy {
    fn drop(&mut self) {
        lock(&self.busy).remove(&self.group);
    }
}

/// A long operation's work: given where its output (and progress) goes, it
/// runs to its end.
type Work = Box<dyn FnOnce(&mut Console<'_, '_>) -> Result<Outcome> + Send>;

impl ServedCommands {
    pub(crate) fn new(
        groups: Vec<HeldGroup>,
        mountpoint: PathBuf,
        (discovery, discover_flag): (DiscoveryString, Option<String>),
        engine: EngineArg,
    ) -> Self {
        Self {
            groups: groups.into_iter().map(Arc::new).collect(),
            mountpoint,
            started: std::time::Instant::now(),
            discovery: Mutex::new(discovery),
            discover_flag,
            engine,
            busy: Arc::new(Mutex::new(BTreeMap::new())),
            volumes: Mutex::new(()),
            background: Mutex::new(Background::default()),
        }
    }

    /// The discovery string in force.
    fn discovery(&self) -> DiscoveryString {
        lock(&self.discovery).clone()
    }

    /// SIGHUP: the discovery string resolved again (flag, environment,
    /// configuration file), then for each group held, its members that are
    /// not attached (missing when it mounted, so OFFLINE) and that discovery
    /// now reaches are attached — `group online` then brings them back —
    /// and groups found that are not served are named. Everything is said
    /// in the log; a failure leaves what was in force.
    fn rediscover(&self) {
        let d = match crate::discovery(self.discover_flag.as_deref()) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "SIGHUP: the discovery string cannot be read; the one in force stays");
                return;
            }
        };
        let host = cairn_io::host::Host::real();
        let found = match group_admin::find_groups(&host, &d) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, discovery = %d.text, "SIGHUP: discovery failed; the one in force stays");
                return;
            }
        };
        if lock(&self.discovery).text != d.text {
            tracing::info!(discovery = %d.text, "SIGHUP: the discovery string changed");
        }
        *lock(&self.discovery) = d;
        for g in &self.groups {
            let Ok(uuid) = g.live().meta(|m| m.uuid()) else {
                continue;
            };
            if let Some(group) = found.iter().find(|f| f.uuid == uuid) {
                self.attach_found(g, group, &host, "SIGHUP");
            }
        }
        for f in found.iter().filter(|f| f.complete) {
            if !self
                .groups
                .iter()
                .any(|g| g.name().eq_ignore_ascii_case(&f.name))
            {
                tracing::info!(
                    group = %f.name,
                    "SIGHUP: group found and not served; restart the service to serve it (every group found, or --group {})",
                    f.name
                );
            }
        }
    }

    /// `group online` of a disk whose dead device was let go of: `g`'s
    /// members found by the discovery string in force are attached (it
    /// stays as it is; SIGHUP re-reads it).
    fn find_again(&self, g: &HeldGroup) {
        let d = self.discovery();
        let host = cairn_io::host::Host::real();
        let found = match group_admin::find_groups(&host, &d) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, discovery = %d.text, "online: discovery failed");
                return;
            }
        };
        let Ok(uuid) = g.live().meta(|m| m.uuid()) else {
            return;
        };
        if let Some(group) = found.iter().find(|f| f.uuid == uuid) {
            self.attach_found(g, group, &host, "online");
        }
    }

    /// `g`'s members that are not attached and that discovery found
    /// (`group`): each attached, as OFFLINE (`group online` brings it
    /// back). Said in the log, each line starting with `why`.
    fn attach_found(
        &self,
        g: &HeldGroup,
        group: &group_admin::FoundGroup,
        host: &cairn_io::host::Host,
        why: &str,
    ) {
        // The paths of disks that left go; a device attached already
        // (under this path or another: a by-id link, a changed discovery
        // string) is known by what it is, not by its name.
        if let Ok(members) = g.live().meta(|m| m.member_devices()) {
            let ids: BTreeSet<u32> = members.values().map(|d| d.0).collect();
            lock(&g.paths).retain(|id, _| ids.contains(id));
        }
        let known: BTreeSet<(u64, u64)> = lock(&g.paths)
            .values()
            .filter_map(|p| device_identity(p))
            .collect();
        let mut paths = Vec::new();
        let mut files = Vec::new();
        for path in group
            .paths
            .iter()
            .filter(|p| device_identity(p).is_some_and(|i| !known.contains(&i)))
        {
            match group_admin::open_member(host, path) {
                Ok(f) => {
                    paths.push(path.clone());
                    files.push(f);
                }
                Err(e) => {
                    tracing::warn!(group = %g.name(), path = %path.display(), error = %e, "{why}: a disk of the group cannot be opened")
                }
            }
        }
        if files.is_empty() {
            return;
        }
        let outcome = match g.live().reattach_devices(files) {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(group = %g.name(), error = %e, "{why}: cannot attach the disks found");
                return;
            }
        };
        for (path, o) in paths.into_iter().zip(outcome) {
            match o {
                Ok(Some((label, id))) => {
                    tracing::info!(
                        group = %g.name(),
                        disk = %label,
                        path = %path.display(),
                        "{why}: disk found again and attached; `cairn group online {} {label}` brings it back",
                        g.name()
                    );
                    lock(&g.paths).insert(id.0, path);
                }
                // A member attached already (under another path), or
                // one that left: nothing to do.
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(group = %g.name(), path = %path.display(), error = %e, "{why}: a disk found again cannot come back")
                }
            }
        }
    }

    /// `--attach-volumes`: the volumes attached when the service last
    /// stopped, attached again (each one's outcome in the log).
    pub(crate) fn attach_recorded_volumes(&self) {
        let _one_at_a_time = lock(&self.volumes);
        for name in cairn_serve::volume::recorded(&group_lock::run_dir()) {
            let attached = self.volume_of(&name).and_then(|(g, _, _, at)| {
                if let Some(d) = cairn_serve::volume::attached_to(&at) {
                    return Ok(d);
                }
                let sector = g.live().meta(|m| m.sector_bytes())?;
                Ok(cairn_serve::volume::attach(&at, sector)?)
            });
            match attached {
                Ok(d) => {
                    tracing::info!(volume = %name, device = %d.display(), "volume attached again")
                }
                Err(e) => {
                    tracing::warn!(volume = %name, error = %format!("{e:#}"), "cannot attach the volume again")
                }
            }
        }
    }

    /// Resume in the background, at its recorded power, the rebalance a
    /// group has pending (a stop or a crash interrupted it): what `cairn
    /// group rebalance` would resume. One paused (power 0) stays paused. A
    /// resync left by a stop was finished by the mount.
    pub(crate) fn resume_pending(&self) {
        for g in &self.groups {
            let pending = g.live().meta(|m| m.rebalance_pending()).ok().flatten();
            let Some(recorded) = pending else {
                continue;
            };
            if recorded == 0 {
                tracing::info!(group = %g.name(), "a rebalance is pending, paused (power 0); `cairn group rebalance {} --power N` resumes it", g.name());
                continue;
            }
            // At the power it was given (within what a command may ask).
            let power = u16::try_from(recorded)
                .unwrap_or(REBALANCE_RESUME_POWER)
                .min(1024);
            tracing::info!(group = %g.name(), power, "resuming the rebalance pending");
            let started = self.claim(g, "rebalance").and_then(|busy| {
                let work = self.rebalance_work(g, power, false);
                self.long(
                    &mut Console::Log,
                    g,
                    busy,
                    ("rebalance", usize::from(power)),
                    false,
                    work,
                )
            });
            if let Err(e) = started {
                tracing::warn!(group = %g.name(), "the pending rebalance did not resume: {e:#}");
            }
        }
    }

    fn held(&self, name: &str) -> Option<&Arc<HeldGroup>> {
        self.groups
            .iter()
            .find(|g| g.name().eq_ignore_ascii_case(name))
    }

    /// The group a command names, which the service holds (checked before).
    fn group(&self, name: &str) -> Result<Arc<HeldGroup>> {
        self.held(name).cloned().ok_or_else(|| {
            anyhow!(
                "group {} is not held by this service",
                name.to_ascii_uppercase()
            )
        })
    }

    /// Whether this service carries the command out: a group it holds
    /// (and no other of that name: the client's discovery string is the
    /// service's, or reaches the very group the service holds), the
    /// listing when both discover alike, the operations always.
    fn carries_out(&self, concern: &Concern, request: &Request) -> bool {
        match concern {
            Concern::Group(name) => {
                let Some(g) = self.held(name) else {
                    return false;
                };
                if request.discovery == self.discovery().text {
                    return true;
                }
                let Ok(uuid) = g.live().meta(|m| m.uuid()) else {
                    return false;
                };
                let Ok(theirs) = DiscoveryString::parse(
                    &request.discovery,
                    cairn_store::discovery::DiscoverySource::Flag,
                ) else {
                    return false;
                };
                group_admin::find_groups(&cairn_io::host::Host::real(), &theirs).is_ok_and(
                    |found| {
                        found
                            .iter()
                            .any(|f| f.uuid == uuid && f.name.eq_ignore_ascii_case(name))
                    },
                )
            }
            Concern::Discovery => request.discovery == self.discovery().text,
            Concern::Operations => true,
        }
    }

    /// Carry out a parsed command on the groups held.
    fn carry_out(&self, noun: Noun, fds: Vec<OwnedFd>, c: &mut Console<'_, '_>) -> Result<Outcome> {
        match noun {
            Noun::Ls { path, output, .. } => {
                let path = GroupPath::parse(&path)?;
                let g = self.group(path.group.as_str())?;
                let entries = g.live().meta(|m| m.list(&path))??;
                group_cmd::show_ls(c, &path, entries, output.json)?;
            }
            Noun::Du { path, output, .. } => {
                let path = GroupPath::parse(&path)?;
                let g = self.group(path.group.as_str())?;
                let (logical, allocated) = g.live().meta(|m| m.du(&path))??;
                group_cmd::show_du(c, &path, logical, allocated, output.json)?;
            }
            Noun::Mkdir { path, parents, .. } => {
                let path = GroupPath::parse(&path)?;
                let g = self.group(path.group.as_str())?;
                g.live().meta(|m| m.mkdir(&path, parents))??;
            }
            Noun::Rm { paths, .. } => group_cmd::rm_each(&paths, |text| {
                let path = GroupPath::parse(text)?;
                let g = self.group(path.group.as_str())?;
                // An attached volume's file stays until its device lets go,
                // then goes, and the file system on it with it: refused.
                if let Ok(info) = g.live().meta(|m| m.open(&path))? {
                    if info.template == volume_cmd::VOLUME_TEMPLATE {
                        if let Some(d) =
                            cairn_serve::volume::attached_to(&self.served_path(&g, &path))
                        {
                            bail!(
                                "{text} is a volume attached as {}: `cairn volume detach {text}` first",
                                d.display()
                            );
                        }
                    }
                }
                Ok(g.held.names.remove(&path)?)
            })?,
            Noun::Mkalias { target, alias, .. } => {
                let (target, alias) = group_cmd::alias_paths(&target, &alias)?;
                let g = self.group(target.group.as_str())?;
                g.live().meta(|m| m.mkalias(&target, &alias))??;
            }
            Noun::Cp {
                source,
                dest,
                template,
                redundancy,
                max_size,
                ..
            } => {
                if source.starts_with('+') {
                    let path = GroupPath::parse(&source)?;
                    let g = self.group(path.group.as_str())?;
                    // The file must be there (and a file); the client reads
                    // it through the mount, by its canonical name — and, for
                    // a copy to a group, copies it in from there (a new file
                    // takes the source's template unless told another).
                    let info = g.live().meta(|m| m.open(&path))??;
                    if dest.starts_with('+') {
                        c.source_template(&info.template);
                    }
                    c.read_through(&self.served_path(&g, &path));
                    return Ok(Outcome::Done);
                }
                let fd = fds.into_iter().next().ok_or_else(|| {
                    anyhow!("the CLI sent no descriptor of {source} to copy from (are the CLI and the service the same version?)")
                })?;
                let (shown, name) = match source.as_str() {
                    "-" => ("standard input".to_string(), None),
                    s => (
                        s.to_string(),
                        std::path::Path::new(s)
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned()),
                    ),
                };
                let mut src = file_copy::Source::opened(std::fs::File::from(fd), &shown, name)?;
                let max_bytes = max_size
                    .as_deref()
                    .map(crate::parse_size)
                    .transpose()
                    .context("--max-size")?;
                let request = group_copy::CopyRequest {
                    source: &source,
                    dest: &dest,
                    template: template.as_deref(),
                    redundancy: redundancy.as_deref(),
                    max_bytes,
                    force: false,
                };
                let options = group_copy::new_file_options(&request, None)?;
                let path = GroupPath::parse(&dest)?;
                let g = self.group(path.group.as_str())?;
                let path = g
                    .live()
                    .meta(|m| group_copy::into_directory(m, path, &dest, src.name.as_deref()))??;
                let report = file_copy::copy_in_live(
                    g.live(),
                    &mut src,
                    &path,
                    &options,
                    max_bytes,
                    &mut |done, total| c.progress("cp", "byte", done, total.unwrap_or(0)),
                )?;
                if report.stopped_at_max {
                    crate::console::errln!(
                        c,
                        "cairn: note: stopped at --max-size ({} bytes); {} had more",
                        report.bytes_copied,
                        source
                    );
                }
            }
            Noun::Group(command) => return self.group_command(command, c),
            Noun::Volume(command) => return self.volume(command, c),
            Noun::Status { output } => {
                let held: Vec<cairn_serve::Held> =
                    self.groups.iter().map(|g| g.held.clone()).collect();
                let status =
                    cairn_serve::metrics::Status::take(&held, self.started, &self.mountpoint);
                if output.json {
                    c.json(&status)?;
                } else {
                    show_status(c, &status);
                }
            }
            _ => bail!("this command is not carried out by the service"),
        }
        Ok(Outcome::Done)
    }

    fn group_command(&self, command: GroupCommand, c: &mut Console<'_, '_>) -> Result<Outcome> {
        match command {
            GroupCommand::List { output, .. } => {
                let held = |name: &str| {
                    let g = self.held(name)?;
                    g.live().meta(|m| group_cmd::summary_of(m)).ok()
                };
                let rows = group_cmd::list_rows(c, self.engine, &self.discovery(), &held)?;
                if output.json {
                    c.json(&rows)?;
                } else {
                    crate::console::out!(c, "{}", group_cmd::render_list(&rows));
                }
            }
            GroupCommand::Disks { name, output, .. } => {
                let g = self.group(&name)?;
                let (disks, au) = g.live().meta(|m| (m.disks(), m.au_bytes()))?;
                let paths = lock(&g.paths).clone();
                group_cmd::show_disks(c, disks, au, &paths, output.json)?;
            }
            GroupCommand::Space { name, output, .. } => {
                let g = self.group(&name)?;
                let paths = lock(&g.paths).clone();
                let rows = g.live().meta(|m| group_admin::space(m, &paths))?;
                group_cmd::show_space(c, rows, output.json)?;
            }
            GroupCommand::Check {
                name,
                repair,
                output,
                ..
            } => {
                let g = self.group(&name)?;
                // A repair changes what a long operation works on.
                let _busy = repair
                    .then(|| self.claim(&g, "check --repair"))
                    .transpose()?;
                let report = g.live().meta(|m| m.check(repair))??;
                return group_cmd::show_check(c, g.name(), &report, output.json);
            }
            GroupCommand::Get {
                name, keys, output, ..
            } => {
                let g = self.group(&name)?;
                let got = g.live().meta(|m| m.get_attributes(&keys))??;
                group_cmd::show_attributes(c, got, output.json)?;
            }
            GroupCommand::Set {
                name,
                pairs,
                output,
                ..
            } => {
                let parsed = group_cmd::attribute_pairs(&name, &pairs)?;
                let g = self.group(&name)?;
                let keys: Vec<String> = parsed.iter().map(|(k, _)| k.clone()).collect();
                let now = g.live().meta(|m| {
                    m.set_attributes(&parsed)?;
                    m.get_attributes(&keys)
                })??;
                group_cmd::show_attributes(c, now, output.json)?;
            }
            GroupCommand::Offline {
                name,
                disks,
                drop_after,
                output,
                ..
            } => {
                let minutes = group_cmd::drop_after_minutes(drop_after.as_deref())?;
                let g = self.group(&name)?;
                let _busy = self.claim(&g, "offline")?;
                let done = g.live().offline_disks(&disks, minutes)?;
                let rows = g.live().meta(|m| m.disks())?;
                group_cmd::show_offline(c, g.name().to_string(), done, rows, output.json)?;
            }
            GroupCommand::Undrop { name, output, .. } => {
                let g = self.group(&name)?;
                let _busy = self.claim(&g, "undrop")?;
                let done = g.live().meta(|m| m.undrop())??;
                group_cmd::show_undrop(c, g.name(), &done, output.json)?;
            }
            GroupCommand::Ops { name, output } => {
                let ops = cairn_store::ops::list(&group_lock::run_dir(), name.as_deref());
                group_cmd::show_ops(c, ops, name, output.json)?;
            }
            GroupCommand::Online {
                name,
                disks,
                all,
                power,
                wait,
                output,
                ..
            } => {
                let g = self.group(&name)?;
                let names = (!all).then(|| disks.clone());
                let busy = self.claim(&g, "resync")?;
                // A disk that failed keeps failing on the descriptor the
                // service holds, even once it is back (a cable put back, a
                // file system mounted again): let go of it, and look for it
                // again as SIGHUP does.
                let released = g.live().release_dead_devices(names.as_deref())?;
                if !released.is_empty() {
                    tracing::info!(group = %g.name(), disks = ?released, "online: a failed disk's device no longer answers; let go of it, looking for the disk again");
                    self.find_again(&g);
                }
                // Refused here (a disk not attached, not OFFLINE), before
                // anything runs in the background.
                g.live().bring_back(names.as_deref())?;
                let json = output.json;
                let work: Work = {
                    let g = g.clone();
                    Box::new(move |c| {
                        let mut tracker =
                            tracker(&g, "RESYNC", power, cairn_store::ops::REBUILD_ALL)?;
                        let report = g.live().resync(usize::from(power), &mut |p| {
                            c.progress("resync", "AU", p.done, p.total);
                            tracker.update(p.done, p.total, p.bytes_done);
                        });
                        tracker.finish();
                        let report = report?;
                        let rows = g.live().meta(|m| m.disks())?;
                        group_cmd::show_online(
                            c,
                            g.name().to_string(),
                            (group::resync::ResyncReport::default(), report),
                            rows,
                            (all, &disks),
                            json,
                        )
                    })
                };
                return self.long(c, &g, busy, ("resync", usize::from(power)), wait, work);
            }
            GroupCommand::Rebalance {
                name,
                power,
                wait,
                output,
                ..
            } => {
                let g = self.group(&name)?;
                let busy = self.claim(&g, "rebalance")?;
                if power > 0 {
                    g.live().meta(|m| m.rebalance_blocker())??;
                }
                let work = self.rebalance_work(&g, power, output.json);
                // Power 0 only records the pause: nothing to wait for.
                let wait = wait || power == 0;
                return self.long(c, &g, busy, ("rebalance", usize::from(power)), wait, work);
            }
            GroupCommand::DropDisk {
                name,
                disk,
                power,
                wait,
                output,
                ..
            } => {
                let g = self.group(&name)?;
                let busy = self.claim(&g, "rebalance")?;
                g.live()
                    .meta(|m| m.drop_disks_forced(std::slice::from_ref(&disk)))??;
                let work = self.rebalance_work(&g, power, output.json);
                return self.long(c, &g, busy, ("rebalance", usize::from(power)), wait, work);
            }
            GroupCommand::Mount { name, .. } => {
                let g = self.group(&name)?;
                bail!(
                    "group {} is mounted already: this Cairn service (pid {}) holds it",
                    g.name(),
                    std::process::id()
                );
            }
            GroupCommand::Scrub {
                name,
                power,
                repair,
                wait,
                output,
                ..
            } => {
                let g = self.group(&name)?;
                let busy = self.claim(&g, "scrub")?;
                let json = output.json;
                let work: Work = {
                    let g = g.clone();
                    Box::new(move |c| {
                        let au = g.live().meta(|m| m.au_bytes())?;
                        let mut tracker = tracker(&g, "SCRUB", power, 0)?;
                        let report = g.live().scrub(usize::from(power), repair, &mut |p| {
                            c.progress("scrub", "byte", p.done, p.total);
                            tracker.update(p.done / au, p.total.div_ceil(au), p.bytes_done);
                        });
                        tracker.finish();
                        group_cmd::show_scrub(c, g.name(), &report?, json)
                    })
                };
                return self.long(c, &g, busy, ("scrub", usize::from(power)), wait, work);
            }
            GroupCommand::Reclaim {
                name,
                explain,
                rate,
                power,
                zero_fill,
                force,
                compact,
                wait,
                output,
                ..
            } => {
                let options =
                    group_cmd::reclaim_options(explain, &rate, power, (zero_fill, force), compact)?;
                let g = self.group(&name)?;
                let json = output.json;
                if explain {
                    let report = g.live().reclaim(options, &mut |_| {})?;
                    return group_cmd::show_reclaim(c, g.name(), &report, json);
                }
                let busy = self.claim(&g, "reclaim")?;
                // Refusals (a zero-fill of a disk that takes discard) come
                // back now, not from the background.
                g.live().meta(|m| {
                    m.reclaim_plan(options.method, options.force)?;
                    if options.compact {
                        m.compact_refusal()?;
                    }
                    Ok::<_, cairn_store::group::GroupError>(())
                })??;
                let work: Work = {
                    let g = g.clone();
                    Box::new(move |c| {
                        let au = g.live().meta(|m| m.au_bytes())?;
                        let mut tracker = tracker(&g, "RECLAIM", power, 0)?;
                        let report = g.live().reclaim(options, &mut |p| {
                            c.progress("reclaim", "byte", p.done, p.total);
                            tracker.update(p.done / au, p.total.div_ceil(au), p.bytes_done);
                        });
                        tracker.finish();
                        group_cmd::show_reclaim(c, g.name(), &report?, json)
                    })
                };
                return self.long(c, &g, busy, ("reclaim", usize::from(power)), wait, work);
            }
            GroupCommand::Alter {
                name,
                add,
                drop,
                resize,
                power,
                explain,
                force,
                wait,
                output,
                ..
            } => {
                group_cmd::alter_named_something(&add, &drop, &resize)?;
                let g = self.group(&name)?;
                let busy = self.claim(&g, "rebalance")?;
                let args: Vec<DiskArg> = add.iter().map(|a| DiskArg::parse(a)).collect();
                let json = output.json;
                let changed = self.with_new_disks(c, &g, &args, force, |m, prepared, joined| {
                    let work = m.explain_change(&prepared, &drop, &resize)?;
                    if explain {
                        // No time estimate: it reads 64 MiB from each disk
                        // that gives data, which here would hold `meta`
                        // (and so the file system's metadata) meanwhile.
                        return Ok(Altered::Explained(work));
                    }
                    // A rebalance that could not run would leave the change
                    // half done: refused before anything changes.
                    if power > 0 {
                        m.rebalance_blocker()?;
                    }
                    *joined = true;
                    let added = m.add_disks(prepared)?;
                    if !drop.is_empty() {
                        m.request_drops(&drop)?;
                    }
                    let resized = if resize.is_empty() {
                        Vec::new()
                    } else {
                        m.request_resizes(&resize)?
                    };
                    Ok(Altered::Changed { added, resized })
                })?;
                match changed {
                    Altered::Explained(work) => {
                        group_cmd::show_explain(c, g.name(), &work, json)?;
                    }
                    Altered::Changed { added, resized } => {
                        group_cmd::show_altered(c, g.name(), &added, &drop, &resized, json)?;
                        let work = self.rebalance_work(&g, power, json);
                        // Power 0 only records the pause: nothing to wait for.
                        let wait = wait || power == 0;
                        return self.long(
                            c,
                            &g,
                            busy,
                            ("rebalance", usize::from(power)),
                            wait,
                            work,
                        );
                    }
                }
            }
            GroupCommand::Replace {
                name,
                disk,
                with,
                power,
                force,
                wait,
                output,
                ..
            } => {
                let g = self.group(&name)?;
                let busy = self.claim(&g, "rebalance")?;
                let rows = g.live().meta(|m| m.disks())?;
                let failgroup = group_cmd::replaced_failgroup(&rows, &name, &disk)?;
                let args = [DiskArg {
                    path: with,
                    failgroup: Some(failgroup),
                }];
                self.with_new_disks(c, &g, &args, force, |m, prepared, joined| {
                    group_cmd::replace_blocker(&m.disks(), &name, &disk)
                        .map_err(|e| group::GroupError::Invalid(e.to_string()))?;
                    *joined = true;
                    m.add_disks(prepared)?;
                    m.drop_disks_forced(std::slice::from_ref(&disk))
                })?;
                let work = self.rebalance_work(&g, power, output.json);
                return self.long(c, &g, busy, ("rebalance", usize::from(power)), wait, work);
            }
            GroupCommand::Create { .. } => {
                bail!("`group create` is not carried out by the service")
            }
        }
        Ok(Outcome::Done)
    }

    /// Where a group file is served: its path in the mount.
    fn served_path(&self, g: &HeldGroup, path: &GroupPath) -> PathBuf {
        let mut at = self.mountpoint.join(g.name());
        for c in &path.components {
            at.push(c.as_str());
        }
        at
    }

    /// A volume of a held group: the group, its path, its file, and where
    /// the mount serves it. A file that is not a volume is refused.
    fn volume_of(
        &self,
        name: &str,
    ) -> Result<(Arc<HeldGroup>, GroupPath, group::FileInfo, PathBuf)> {
        let path = GroupPath::parse(name)?;
        let g = self.group(path.group.as_str())?;
        let info = g.live().meta(|m| m.open(&path))??;
        if info.template != volume_cmd::VOLUME_TEMPLATE {
            bail!(
                "{name} is not a volume (its template is {}); `cairn volume create` makes one",
                info.template
            );
        }
        let at = self.served_path(&g, &path);
        Ok((g, path, info, at))
    }

    /// `cairn volume ...` (`docs/volumes.md`).
    fn volume(&self, command: VolumeCommand, c: &mut Console<'_, '_>) -> Result<Outcome> {
        use crate::console::outln;
        let _one_at_a_time = lock(&self.volumes);
        match command {
            VolumeCommand::Create {
                name,
                size,
                redundancy,
                output,
            } => {
                let path = GroupPath::parse(&name)?;
                let g = self.group(path.group.as_str())?;
                let size_bytes = crate::parse_size(&size).context("--size")?;
                let copies = redundancy
                    .as_deref()
                    .map(|r| {
                        group::Redundancy::parse(r)
                            .map(|r| r.copies())
                            .ok_or_else(|| {
                                anyhow!("redundancy {r:?}: use external, normal or high")
                            })
                    })
                    .transpose()?;
                let info = g.live().meta(|m| {
                    // Refused before anything changes (the template, the
                    // directories).
                    if m.open(&path).is_ok() {
                        return Err(group::GroupError::Invalid(format!(
                            "{path} exists already"
                        )));
                    }
                    let sector = u64::from(m.sector_bytes());
                    if size_bytes == 0 || size_bytes % sector != 0 {
                        return Err(group::GroupError::Invalid(format!(
                            "a volume's size is a whole number of the group's {sector}-byte sectors, and not 0: {size} is not"
                        )));
                    }
                    m.ensure_template(volume_cmd::VOLUME_TEMPLATE)?;
                    m.create_file(
                        &path,
                        size_bytes,
                        &group::CreateOptions {
                            template: Some(volume_cmd::VOLUME_TEMPLATE.to_string()),
                            copies,
                            parents: true,
                        },
                    )
                })??;
                let row = volume_cmd::VolumeRow {
                    name: path.to_string(),
                    size_bytes: info.size_bytes,
                    redundancy: volume_cmd::redundancy_of(info.copies),
                    device: None,
                    state: "DETACHED",
                };
                if output.json {
                    c.json(&row)?;
                } else {
                    outln!(
                        c,
                        "volume {} created: {} MiB, {}; `cairn volume attach {}` gives its block device",
                        row.name,
                        row.size_bytes >> 20,
                        row.redundancy,
                        row.name
                    );
                }
            }
            VolumeCommand::Attach { name, output } => {
                let (g, _, _, at) = self.volume_of(&name)?;
                if let Some(device) = cairn_serve::volume::attached_to(&at) {
                    bail!("volume {name} is attached already, as {}", device.display());
                }
                let sector = g.live().meta(|m| m.sector_bytes())?;
                let device = cairn_serve::volume::attach(&at, sector)
                    .with_context(|| format!("cannot attach volume {name} to a loop device"))?;
                tracing::info!(volume = %name, device = %device.display(), "volume attached");
                if let Err(e) = cairn_serve::volume::record(&group_lock::run_dir(), &name, true) {
                    tracing::warn!(volume = %name, error = %e, "cannot record the attachment: --attach-volumes will not attach it again");
                }
                if output.json {
                    c.json(&serde_json::json!({ "name": name, "device": device }))?;
                } else {
                    outln!(c, "{}", device.display());
                }
            }
            VolumeCommand::Detach { name } => {
                let (_, _, _, at) = self.volume_of(&name)?;
                let Some(device) = cairn_serve::volume::attached_to(&at) else {
                    bail!("volume {name} is not attached");
                };
                let identity = cairn_serve::volume::identity(&at)?;
                match cairn_serve::volume::detach(&device, identity)
                    .with_context(|| format!("cannot detach {}", device.display()))?
                {
                    Detached::Done => {}
                    Detached::Deferred => outln!(
                        c,
                        "cairn: note: {} is still open somewhere; the kernel detaches it at its last close",
                        device.display()
                    ),
                    Detached::InUse(why) => bail!(
                        "volume {name} ({}) is in use: {why}; unmount it first",
                        device.display()
                    ),
                }
                tracing::info!(volume = %name, device = %device.display(), "volume detached");
                if let Err(e) = cairn_serve::volume::record(&group_lock::run_dir(), &name, false) {
                    tracing::warn!(volume = %name, error = %e, "cannot record the detachment");
                }
                outln!(c, "volume {name} detached from {}", device.display());
            }
            VolumeCommand::Resize { name, size } => {
                let (g, path, info, at) = self.volume_of(&name)?;
                let size_bytes = crate::parse_size(&size).context("--size")?;
                if size_bytes <= info.size_bytes {
                    bail!(
                        "volume {name} is {} bytes: a volume only grows (the file system on it would lose its end)",
                        info.size_bytes
                    );
                }
                let sector = g.live().meta(|m| m.sector_bytes())?;
                if size_bytes % u64::from(sector) != 0 {
                    bail!("a volume's size is a whole number of the group's {sector}-byte sectors: {size} is not");
                }
                // Through the mount, so that the kernel's idea of the file's
                // size (which the loop device's capacity is read from)
                // changes with it.
                let _ = path;
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&at)
                    .and_then(|f| f.set_len(size_bytes))
                    .with_context(|| format!("cannot grow volume {name}"))?;
                let device = cairn_serve::volume::attached_to(&at);
                if let Some(d) = &device {
                    cairn_serve::volume::refresh_capacity(d, cairn_serve::volume::identity(&at)?)
                        .with_context(|| {
                        format!("the volume grew, but {} did not follow", d.display())
                    })?;
                }
                outln!(
                    c,
                    "volume {name} is {} MiB{}",
                    size_bytes >> 20,
                    device.map_or_else(String::new, |d| format!(
                        "; {} follows (grow the file system on it with its own tool)",
                        d.display()
                    ))
                );
            }
            VolumeCommand::List { group, output } => {
                let mut rows = Vec::new();
                for g in &self.groups {
                    if group.as_deref().is_some_and(|want| {
                        !want.trim_start_matches('+').eq_ignore_ascii_case(g.name())
                    }) {
                        continue;
                    }
                    let files = g.live().meta(|m| {
                        m.file_numbers()
                            .into_iter()
                            .filter_map(|n| {
                                let info = m.file_info(n).ok()?;
                                (info.template == volume_cmd::VOLUME_TEMPLATE)
                                    .then(|| (m.path_of(n), info))
                            })
                            .collect::<Vec<_>>()
                    })?;
                    for (name, info) in files {
                        let device = GroupPath::parse(&name).ok().and_then(|p| {
                            cairn_serve::volume::attached_to(&self.served_path(g, &p))
                        });
                        rows.push(volume_cmd::VolumeRow {
                            name,
                            size_bytes: info.size_bytes,
                            redundancy: volume_cmd::redundancy_of(info.copies),
                            state: if device.is_some() {
                                "ATTACHED"
                            } else {
                                "DETACHED"
                            },
                            device: device.map(|d| d.display().to_string()),
                        });
                    }
                }
                if let Some(want) = &group {
                    if !self
                        .groups
                        .iter()
                        .any(|g| g.name().eq_ignore_ascii_case(want.trim_start_matches('+')))
                    {
                        bail!("the service holds no group {want}");
                    }
                }
                rows.sort_by(|a, b| a.name.cmp(&b.name));
                volume_cmd::show_list(c, &rows, output.json)?;
            }
        }
        Ok(Outcome::Done)
    }

    /// A change that adds disks to a live group (`alter --add`,
    /// `replace`): the new disks opened and labelled
    /// ([`Self::open_new_disks`]), then, in one metadata operation
    /// ([`LiveGroup::add_devices`]), prepared and handed to `change`, which
    /// sets `joined` as it begins to add them. From then on the labels stay,
    /// whatever follows: a disk may have joined even if the call fails
    /// part-way (one left labelled but not listed is taken again by the
    /// next `alter --add`); before it, the labels this call wrote are
    /// erased. The joined disks' paths are known from then on.
    fn with_new_disks<R>(
        &self,
        c: &mut Console<'_, '_>,
        g: &HeldGroup,
        args: &[DiskArg],
        force: bool,
        change: impl FnOnce(
            &mut group::Group<'static>,
            Vec<group::relocate::PreparedDisk>,
            &mut bool,
        ) -> Result<R, group::GroupError>,
    ) -> Result<R> {
        let mut new = self.open_new_disks(g.name(), args, force)?;
        let files = std::mem::take(&mut new.files);
        let mut joined = false;
        let mut attached = Vec::new();
        let changed = g.live().add_devices(files, |m, ids| {
            attached = ids.to_vec();
            let prepared = m.prepare_adds(&new.with_ids(ids), force)?;
            change(m, prepared, &mut joined)
        });
        if joined {
            g.joined(&attached, &new);
        } else {
            new.refused();
        }
        self.said(c, g, changed)
    }

    /// New disks for a change to a live group (`alter --add`, `replace`):
    /// checked, opened for writing and labelled through an engine of their
    /// own, as the CLI does ([`group_admin::open_new_disks`]), each one's
    /// handle shared for the group's engines.
    fn open_new_disks(&self, name: &str, args: &[DiskArg], force: bool) -> Result<NewDisks> {
        let mut engine = crate::engine_depth(self.engine, 8)?;
        let (new, added) = group_admin::open_new_disks(
            engine.as_mut(),
            &cairn_io::host::Host::real(),
            &self.discovery(),
            name,
            args,
            force,
            crate::now_unix_seconds(),
        )?;
        let mut files = Vec::new();
        for n in &new {
            let shared = engine
                .device(n.device)
                .map(cairn_io::DeviceFile::try_clone)
                .transpose()
                .context("cannot share a new disk's handle");
            match shared {
                Ok(Some(f)) => files.push(f),
                Ok(None) | Err(_) => {
                    group_admin::erase_new_labels(engine.as_mut(), &added);
                    return Err(shared.err().unwrap_or_else(|| {
                        anyhow!("a new disk is not attached to the engine that opened it")
                    }));
                }
            }
        }
        Ok(NewDisks {
            engine,
            new,
            added,
            files,
        })
    }

    /// A change's result, after warning of any disk it found failing (as
    /// the CLI's `said`).
    fn said<T>(
        &self,
        c: &mut Console<'_, '_>,
        g: &HeldGroup,
        result: Result<T, group::GroupError>,
    ) -> Result<T> {
        if result.is_err() {
            if let Ok(offlined) = g.live().meta(|m| m.disks_taken_offline().to_vec()) {
                group_cmd::warn_offlined(c, g.name(), &offlined);
            }
        }
        Ok(result?)
    }

    /// A rebalance's work on a live group (after a change that asks for
    /// one), rendered as the CLI renders it.
    fn rebalance_work(&self, g: &Arc<HeldGroup>, power: u16, json: bool) -> Work {
        let g = g.clone();
        Box::new(move |c| {
            let mut tracker = g
                .live()
                .meta(|m| group_cmd::rebalance_tracker(m, usize::from(power)))?;
            let report = g.live().rebalance(usize::from(power), &mut |p| {
                c.progress("rebalance", "AU", p.done, p.total);
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
            let rows = g.live().meta(|m| m.disks())?;
            group_cmd::print_rebalance(c, g.name(), &report, &rows, json)?;
            Ok(Outcome::Done)
        })
    }

    /// Mark a group busy with a long operation, or say which one runs.
    fn claim(&self, g: &HeldGroup, what: &'static str) -> Result<Busy> {
        let mut busy = lock(&self.busy);
        if let Some(running) = busy.get(g.name()) {
            bail!(
                "a {running} is running on group {} already; `cairn group ops {}` follows it",
                g.name(),
                g.name()
            );
        }
        busy.insert(g.name().to_string(), what);
        Ok(Busy {
            busy: self.busy.clone(),
            group: g.name().to_string(),
        })
    }

    /// Run a long operation: here, its progress to the client, when it
    /// waits; else on a thread of its own, its output to the log, the
    /// client told it has started.
    fn long(
        &self,
        c: &mut Console<'_, '_>,
        g: &HeldGroup,
        busy: Busy,
        (what, power): (&'static str, usize),
        wait: bool,
        work: Work,
    ) -> Result<Outcome> {
        if wait {
            let outcome = work(c);
            drop(busy);
            return outcome;
        }
        let name = g.name().to_string();
        // Under the lock `stop` takes the threads in: none starts after.
        let mut background = lock(&self.background);
        if background.stopping {
            bail!("the Cairn service is stopping; the {what} was not started");
        }
        let thread = std::thread::Builder::new()
            .name(format!("cairn-{what}"))
            .spawn(move || {
                let _busy = busy;
                let mut log = Console::Log;
                match work(&mut log) {
                    Ok(Outcome::Done) => tracing::info!(group = %name, "{what} done"),
                    Ok(Outcome::Failed(m)) | Ok(Outcome::Degraded(m)) => {
                        tracing::warn!(group = %name, "{what}: {m}")
                    }
                    Err(e) => tracing::warn!(group = %name, "{what} failed: {e:#}"),
                }
            })
            .map_err(|e| anyhow!("cannot start a thread for the {what}: {e}"))?;
        background.threads.retain(|t| !t.is_finished());
        background.threads.push(thread);
        drop(background);
        crate::console::outln!(
            c,
            "group {}: {what} started in the background (power {power}); `cairn group ops {}` follows it, --wait waits for it",
            g.name(),
            g.name()
        );
        Ok(Outcome::Done)
    }
}

impl control::Commands for ServedCommands {
    fn run(&self, request: Request, fds: Vec<OwnedFd>, peer: Peer, reply: &mut Replier<'_>) {
        let argv = std::iter::once("cairn".to_string()).chain(request.argv.iter().cloned());
        let cli = match Cli::try_parse_from(argv) {
            Ok(cli) => cli,
            Err(e) => {
                reply.send(&Reply::Exit {
                    status: 2,
                    message: Some(e.to_string().lines().next().unwrap_or_default().to_string()),
                });
                return;
            }
        };
        let Some(concern) = concern(&cli.noun) else {
            reply.send(&Reply::NotHeld);
            return;
        };

        if !self.carries_out(&concern, &request) {
            reply.send(&Reply::NotHeld);
            return;
        }
        let mut cli = cli;
        if let Err(e) = resolve_paths(&mut cli.noun, &request.cwd) {
            reply.send(&Reply::Exit {
                status: 1,
                message: Some(e.to_string()),
            });
            return;
        }
        // Escaped: an argument may hold any character, a newline too.
        let argv: Vec<String> = request
            .argv
            .iter()
            .map(|a| a.escape_debug().to_string())
            .collect();
        tracing::info!(pid = peer.pid, uid = peer.uid, "cairn {}", argv.join(" "));
        let outcome = {
            let mut c = Console::Remote(reply);
            self.carry_out(cli.noun, fds, &mut c)
        };
        reply.send(&exit_reply(outcome));
    }

    fn reload(&self) {
        self.rediscover();
    }

    /// Before the file system is unmounted: each recorded volume's device
    /// that nobody uses is detached (its record kept, so that the next
    /// `cairn serve --attach-volumes` attaches it again); one in use keeps
    /// the file system busy, and the service says which.
    fn before_unmount(&self) {
        let _one_at_a_time = lock(&self.volumes);
        for name in cairn_serve::volume::recorded(&group_lock::run_dir()) {
            let Ok((_, _, _, at)) = self.volume_of(&name) else {
                continue;
            };
            let Some(device) = cairn_serve::volume::attached_to(&at) else {
                continue;
            };
            let detached = cairn_serve::volume::identity(&at)
                .and_then(|id| cairn_serve::volume::detach(&device, id));
            match detached {
                Ok(Detached::Done | Detached::Deferred) => {
                    tracing::info!(volume = %name, device = %device.display(), "volume detached for the stop (attached again by --attach-volumes)")
                }
                Ok(Detached::InUse(why)) => {
                    tracing::warn!(volume = %name, device = %device.display(), "volume still in use ({why}): the file system stays busy; unmount what is on it")
                }
                Err(e) => {
                    tracing::warn!(volume = %name, device = %device.display(), error = %e, "cannot detach the volume: the file system stays busy")
                }
            }
        }
    }

    fn stop(&self) {
        for g in &self.groups {
            g.live().interrupt_operations();
        }
        let threads: Vec<JoinHandle<()>> = {
            let mut background = lock(&self.background);
            background.stopping = true;
            std::mem::take(&mut background.threads)
        };
        for t in threads {
            let _ = t.join();
        }
    }
}

/// `cairn status` as text: the service, each group with its file
/// system's I/O and its disks, then the long operations.
fn show_status(c: &mut Console<'_, '_>, s: &cairn_serve::metrics::Status) {
    use crate::console::outln;
    outln!(
        c,
        "cairn serve: pid {}, serving for {}",
        s.pid,
        group_cmd::render_duration(s.uptime_seconds)
    );
    for g in &s.groups {
        outln!(
            c,
            "group {} ({}): {} MiB, {} free, {} usable for files; {} disk(s) not in use",
            g.name,
            g.redundancy,
            g.total_mb,
            g.free_mb,
            g.usable_file_mb,
            g.offline_disks
        );
        outln!(
            c,
            "  {:<6} {:>12} {:>12} {:>8} {:>12}",
            "I/O",
            "REQUESTS",
            "MIB",
            "ERRORS",
            "AVG_US"
        );
        for (op, o) in [
            ("read", &g.reads),
            ("write", &g.writes),
            ("fsync", &g.syncs),
            ("discard", &g.discards),
        ] {
            outln!(
                c,
                "  {:<6} {:>12} {:>12} {:>8} {:>12}",
                op,
                o.count,
                o.bytes >> 20,
                o.errors,
                o.latency_micros_sum.checked_div(o.count).unwrap_or(0)
            );
        }
        outln!(
            c,
            "  {:>4}  {:<16} {:<14} {:<9} {:>9} {:>10} {:>8} {:>10} {:>8} {:>7} {:>7}",
            "DISK",
            "LABEL",
            "FAILGROUP",
            "STATE",
            "STALE_AU",
            "READS",
            "READ_MIB",
            "WRITES",
            "WRIT_MIB",
            "AVG_US",
            "ERRORS"
        );
        for d in &g.disks {
            let io = &d.io;
            let requests = io.reads.count + io.writes.count;
            let micros = io.reads.latency_micros_sum + io.writes.latency_micros_sum;
            outln!(
                c,
                "  {:>4}  {:<16} {:<14} {:<9} {:>9} {:>10} {:>8} {:>10} {:>8} {:>7} {:>7}",
                d.number,
                d.label,
                d.failgroup,
                d.state,
                d.stale_aus,
                io.reads.count,
                io.reads.bytes >> 20,
                io.writes.count,
                io.writes.bytes >> 20,
                micros.checked_div(requests).unwrap_or(0),
                io.reads.errors + io.writes.errors + io.flushes.errors + io.discards.errors
            );
        }
    }
    if !s.volumes.is_empty() {
        outln!(
            c,
            "{:<32} {:<12} {:>8} {:>10} {:>9} {:>10} {:>9} {:>9} {:>8} {:>6}",
            "VOLUME",
            "DEVICE",
            "SIZE_MB",
            "READS",
            "READ_MIB",
            "WRITES",
            "WRIT_MIB",
            "DISCARDS",
            "FLUSHES",
            "QUEUE"
        );
    }
    for v in &s.volumes {
        outln!(
            c,
            "{:<32} {:<12} {:>8} {:>10} {:>9} {:>10} {:>9} {:>9} {:>8} {:>6}",
            v.name,
            v.device,
            v.size_bytes >> 20,
            v.reads,
            v.read_bytes >> 20,
            v.writes,
            v.write_bytes >> 20,
            v.discards,
            v.flushes,
            v.in_flight
        );
    }
    if s.operations.is_empty() {
        outln!(c, "no operation is running");
    }
    for o in &s.operations {
        outln!(
            c,
            "operation {} on {}: {} {}/{} AUs (power {})",
            o.pass,
            o.group,
            o.state,
            o.aus_done,
            o.aus_total,
            o.power
        );
    }
}

/// The status file `group ops` lists while a long operation runs.
fn tracker(
    g: &HeldGroup,
    pass: &str,
    power: u16,
    rebuild_aus: u64,
) -> Result<cairn_store::ops::OpTracker> {
    let (uuid, au) = g.live().meta(|m| (m.uuid(), m.au_bytes()))?;
    Ok(cairn_store::ops::OpTracker::start(
        &group_lock::run_dir(),
        g.name(),
        uuid,
        pass,
        usize::from(power),
        au,
        rebuild_aus,
        false,
    ))
}

/// A command's outcome as the last reply: the status and line the CLI
/// ends with, as `main` would.
fn exit_reply(outcome: Result<Outcome>) -> Reply {
    let (status, message) = match outcome {
        Ok(Outcome::Done) => (0, None),
        Ok(Outcome::Failed(m)) => (1, Some(m)),
        Ok(Outcome::Degraded(m)) => (crate::EXIT_DEGRADED, Some(m)),
        Err(e) => (1, Some(format!("{e:#}"))),
    };
    Reply::Exit {
        status,
        message: message.map(|m| crate::one_line(&m)),
    }
}
