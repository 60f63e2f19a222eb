//! `cairn cp` from start to end, on real devices: which way a copy goes,
//! what is opened or settled before a group is mounted, mounting by discovery
//! under the group lock, the copy itself ([`file_copy`]), and dismounting.
//!
//! The order is the protection, so it lives here and not in the binary:
//!
//! - **Into a group**: the source is opened first (a FIFO waiting for its
//!   writer holds no lock), the new file's options are checked, then the
//!   group is mounted for writing, a destination that is a directory gets the
//!   source's name, the file is filled and named last, and the group is
//!   dismounted.
//! - **Out of a group**: the destination is resolved and made ready first
//!   (the overwrite protections, a temporary, a FIFO's open waiting for its
//!   reader: none of it holds a lock), then the group is mounted read-only.
//! - **Between groups**: both are mounted at once in this process — the source
//!   read-only, the destination for writing — and no staging file is made.
//!
//! Whatever fails, the disks a command took offline after an I/O error are
//! reported: the disk is out of use for good, whether the copy then succeeded
//! or not.
//!
//! The caller chooses the engines and where disks are looked for, and renders
//! what happens ([`CopyShell`]); this module decides nothing about how it is
//! shown.

use std::path::PathBuf;

use cairn_io::host::Host;
use cairn_io::FileEngine;

use crate::discovery::DiscoveryString;
use crate::file_copy::{self, CopyError, CopyInReport};
use crate::group::{CreateOptions, FileInfo, Group, MountReport, Redundancy};
use crate::group_admin::{self, Mounted};
use crate::names::{is_group_path, Component, GroupPath};

/// What `cairn cp` was asked to do.
#[derive(Debug, Clone, Copy)]
pub struct CopyRequest<'r> {
    /// An OS path (a file, pipe, FIFO, device, `-` for standard input) or a
    /// group path (`+DATA/...`).
    pub source: &'r str,
    /// An OS path (a file, device, directory, `-` for standard output) or a
    /// group path; a trailing `/` or an existing directory takes the source's
    /// name.
    pub dest: &'r str,
    /// Template of a new group file; copying from a group, the source file's
    /// template when not given.
    pub template: Option<&'r str>,
    /// Redundancy of a new group file (`external`, `normal`, `high`),
    /// overriding the template's.
    pub redundancy: Option<&'r str>,
    /// Copy at most this many bytes (an endless source).
    pub max_bytes: Option<u64>,
    /// Copying out: overwrite a file or block device that carries a
    /// filesystem, a label or another owner's data (never a disk of a group).
    pub force: bool,
}

/// What a copy did.
#[derive(Debug, Clone)]
pub enum Copied {
    /// From an OS source into a group, as the new file `dest`.
    In {
        dest: GroupPath,
        report: CopyInReport,
    },
    /// Out of a group to an OS destination.
    Out,
    /// Within a group or between groups, as the new file `dest`.
    Group { dest: GroupPath, file: FileInfo },
}

/// What a copy needs from its caller, and what it tells it as it goes.
pub trait CopyShell {
    /// The caller's error type; every error of the copy becomes one.
    type Error: From<CopyError>;

    /// A new engine, for one group (a copy between groups asks for two).
    fn engine(&mut self) -> Result<Box<dyn FileEngine>, Self::Error>;

    /// Where disks are looked for; asked as each group is mounted.
    fn discovery(&mut self) -> Result<DiscoveryString, Self::Error>;

    /// The directory of the group locks; asked as each group is mounted.
    fn run_dir(&mut self) -> PathBuf;

    /// The source `fifo` is a FIFO about to be opened: the open waits for a
    /// writer.
    fn waiting_for_writer(&mut self, fifo: &str);

    /// Group `group` was mounted, and this is what the mount found (disks
    /// marked offline or missing, damage, warnings).
    fn mounted(&mut self, group: &str, report: &MountReport);

    /// The data starts to move: `total` bytes, or a stream of unknown length.
    fn progress_started(&mut self, total: Option<u64>);

    /// `done` bytes have been copied.
    fn progress(&mut self, done: u64);

    /// The data stopped moving, whether the copy succeeded or not.
    fn progress_finished(&mut self);

    /// Disks of group `group` this command took offline after an I/O error
    /// (called with an empty list when there were none).
    fn taken_offline(&mut self, group: &str, disks: &[String]);
}

/// Run `cairn cp` as `request` says, on the real devices `host` reaches.
pub fn copy<S: CopyShell>(
    request: &CopyRequest<'_>,
    host: &Host,
    shell: &mut S,
) -> Result<Copied, S::Error> {
    let (source, dest) = (request.source, request.dest);
    match (is_group_path(source), is_group_path(dest)) {
        (false, true) => copy_in(request, host, shell),
        (true, false) => copy_out(request, host, shell),
        (true, true) => copy_between(request, host, shell),
        (false, false) => Err(CopyError::Request(format!(
            "one of {source} and {dest} must be a group path (+GROUP/...); use cp for OS files"
        ))
        .into()),
    }
}

fn copy_in<S: CopyShell>(
    request: &CopyRequest<'_>,
    host: &Host,
    shell: &mut S,
) -> Result<Copied, S::Error> {
    let mut src =
        file_copy::open_source(request.source, &mut |fifo| shell.waiting_for_writer(fifo))?;
    let options = new_file_options(request, None)?;
    let mut engine = shell.engine()?;
    let dest = group_dest(request.dest, src.name.as_deref())?;
    let m = mount(shell, engine.as_mut(), host, &dest, Mode::Write)?;
    // The lock stays held in `m` until the end of this function, after the
    // dismount.
    let mut group = m.group;
    let dest = into_directory(&group, dest, request.dest, src.name.as_deref())?;
    shell.progress_started(src.len_bytes);
    let report = file_copy::copy_in(
        &mut group,
        &mut src,
        &dest,
        &options,
        request.max_bytes,
        &mut |done, _| shell.progress(done),
    );
    shell.progress_finished();
    let report = said(shell, &group, report)?;
    finish(shell, group)?;
    Ok(Copied::In { dest, report })
}

fn copy_out<S: CopyShell>(
    request: &CopyRequest<'_>,
    host: &Host,
    shell: &mut S,
) -> Result<Copied, S::Error> {
    let src = GroupPath::parse(request.source).map_err(CopyError::from)?;
    let name = src
        .file_name()
        .map(|c| c.as_str().to_string())
        .ok_or_else(|| {
            CopyError::Request(format!("{src} is the group's root; name a file in it"))
        })?;
    // Settled before the group is mounted: the protections, and a FIFO's
    // open (which waits for its reader) hold no lock.
    let target = file_copy::resolve_destination(request.dest, &name)?;
    let prepared = file_copy::prepare_destination(&target, host, request.force)?;
    let mut engine = shell.engine()?;
    let m = mount(shell, engine.as_mut(), host, &src, Mode::ReadOnly)?;
    let mut group = m.group;
    let info = group.open(&src).map_err(CopyError::from)?;
    // Its length in bytes (a file written through `cairn serve` may end
    // inside a sector).
    let bytes = info.attrs.byte_size;
    shell.progress_started(Some(bytes));
    let result = file_copy::copy_out(&mut group, info.number, bytes, prepared, &mut |done, _| {
        shell.progress(done)
    });
    shell.progress_finished();
    group.dismount().map_err(CopyError::from)?;
    result?;
    Ok(Copied::Out)
}

fn copy_between<S: CopyShell>(
    request: &CopyRequest<'_>,
    host: &Host,
    shell: &mut S,
) -> Result<Copied, S::Error> {
    let src = GroupPath::parse(request.source).map_err(CopyError::from)?;
    // The flags are checked before anything is mounted.
    new_file_options(request, None)?;
    let name = src.file_name().map(|c| c.as_str().to_string());
    let dest = group_dest(request.dest, name.as_deref())?;
    if src.group == dest.group {
        let mut engine = shell.engine()?;
        let m = mount(shell, engine.as_mut(), host, &src, Mode::Write)?;
        let mut group = m.group;
        let dest = into_directory(&group, dest, request.dest, name.as_deref())?;
        let info = group.open(&src).map_err(CopyError::from)?;
        let options = new_file_options(request, Some(info.template.clone()))?;
        shell.progress_started(Some(info.size_bytes));
        let result = file_copy::copy_within(
            &mut group,
            info.number,
            info.size_bytes,
            &dest,
            &options,
            &mut |done, _| shell.progress(done),
        );
        shell.progress_finished();
        let file = said(shell, &group, result)?;
        finish(shell, group)?;
        return Ok(Copied::Group { dest, file });
    }
    // Both mounted at once, in one process: the source read-only, the
    // destination for writing. No staging file.
    let mut from_engine = shell.engine()?;
    let from = mount(shell, from_engine.as_mut(), host, &src, Mode::ReadOnly)?;
    let mut from = from.group;
    let mut to_engine = shell.engine()?;
    let to = mount(shell, to_engine.as_mut(), host, &dest, Mode::Write)?;
    let mut to = to.group;
    let dest = into_directory(&to, dest, request.dest, name.as_deref())?;
    let info = from.open(&src).map_err(CopyError::from)?;
    let options = new_file_options(request, Some(info.template.clone()))?;
    shell.progress_started(Some(info.size_bytes));
    let result = file_copy::copy_between(
        &mut from,
        info.number,
        info.size_bytes,
        &mut to,
        &dest,
        &options,
        &mut |done, _| shell.progress(done),
    );
    shell.progress_finished();
    from.dismount().map_err(CopyError::from)?;
    let file = said(shell, &to, result)?;
    finish(shell, to)?;
    Ok(Copied::Group { dest, file })
}

/// How a group is mounted for a copy.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// For writing: the destination of a copy in.
    Write,
    /// Read-only, under a shared lock: the source of a copy out.
    ReadOnly,
}

/// Mount the group of `path` by discovery, under its lock, and tell the
/// shell what the mount found.
fn mount<'e, S: CopyShell>(
    shell: &mut S,
    engine: &'e mut dyn FileEngine,
    host: &Host,
    path: &GroupPath,
    mode: Mode,
) -> Result<Mounted<'e>, S::Error> {
    let discovery = shell.discovery()?;
    let run_dir = shell.run_dir();
    let name = path.group.as_str();
    let mounted = match mode {
        Mode::Write => group_admin::mount(engine, host, &discovery, name, &run_dir),
        Mode::ReadOnly => group_admin::mount_read_only(engine, host, &discovery, name, &run_dir),
    }
    .map_err(CopyError::from)?;
    shell.mounted(mounted.group.name(), &mounted.report);
    Ok(mounted)
}

/// Dismount a group the copy wrote to, and report the disks it took
/// offline whether the dismount succeeds or not.
fn finish<S: CopyShell>(shell: &mut S, group: Group<'_>) -> Result<(), S::Error> {
    let name = group.name().to_string();
    let offlined = group.disks_taken_offline().to_vec();
    let result = group.dismount();
    shell.taken_offline(&name, &offlined);
    Ok(result.map_err(CopyError::from)?)
}

/// A writing step's result, with the disks taken offline reported when it
/// failed (the group is then dropped, not dismounted: the next mount
/// recovers).
fn said<S: CopyShell, T>(
    shell: &mut S,
    group: &Group<'_>,
    result: Result<T, CopyError>,
) -> Result<T, S::Error> {
    if result.is_err() {
        shell.taken_offline(group.name(), group.disks_taken_offline());
    }
    Ok(result?)
}

/// The options of a new group file: the request's template (else
/// `fallback_template`) and redundancy.
pub fn new_file_options(
    request: &CopyRequest<'_>,
    fallback_template: Option<String>,
) -> Result<CreateOptions, CopyError> {
    let copies = match request.redundancy {
        Some(r) => Some(
            Redundancy::parse(r)
                .ok_or_else(|| {
                    CopyError::Request(format!("redundancy {r:?}: use external, normal or high"))
                })?
                .copies(),
        ),
        None => None,
    };
    Ok(CreateOptions {
        template: request.template.map(str::to_string).or(fallback_template),
        copies,
        parents: false,
    })
}

/// The group path a copy writes to, as typed: a trailing `/` (a directory)
/// or the group's root takes the source's name.
fn group_dest(dest: &str, source_name: Option<&str>) -> Result<GroupPath, CopyError> {
    let path = GroupPath::parse(dest)?;
    if GroupPath::names_directory(dest) || path.is_root() {
        return named_in(&path, dest, source_name);
    }
    Ok(path)
}

/// A destination that is an existing directory gets the source's name
/// inside it, as `cp` does.
/// `path`, or — when it names a directory — the source's name in it.
pub fn into_directory(
    group: &Group<'_>,
    path: GroupPath,
    dest: &str,
    source_name: Option<&str>,
) -> Result<GroupPath, CopyError> {
    match group.list(&path) {
        Ok(_) if group.open(&path).is_err() => named_in(&path, dest, source_name),
        _ => Ok(path),
    }
}

/// `directory/source_name`, refused when the source has no name (standard
/// input).
fn named_in(
    directory: &GroupPath,
    dest: &str,
    source_name: Option<&str>,
) -> Result<GroupPath, CopyError> {
    let name = source_name.ok_or_else(|| {
        CopyError::Request(format!(
            "{dest} is a directory and the source has no name; name the new file"
        ))
    })?;
    Ok(directory.join(Component::parse(name)?)?)
}
