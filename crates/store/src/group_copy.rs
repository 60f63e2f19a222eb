//! `cairn cp`'s rules for the group side of a copy: what a new file is
//! made with (its template and redundancy), and what name it gets (a
//! destination that is a directory — a trailing `/`, the group's root, an
//! existing directory — takes the source's name). Which way a copy goes and
//! what is opened before a group is, is the CLI's and the executor's
//! (`cairn_command`); the bytes are moved by [`crate::file_copy`].

use crate::file_copy::CopyError;
use crate::group::{CreateOptions, Group, Redundancy};
use crate::names::{Component, GroupPath};

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
        ..CreateOptions::default()
    })
}

/// The file a copy into `group` makes, for the destination `dest` as typed:
/// a trailing `/`, the group's root, or an existing directory takes the
/// source's name (`None`: standard input, which has none).
pub fn destination(
    group: &Group<'_>,
    dest: &str,
    source_name: Option<&str>,
) -> Result<GroupPath, CopyError> {
    let path = group_dest(dest, source_name)?;
    into_directory(group, path, dest, source_name)
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

/// `path`, or — when it names an existing directory — the source's name in
/// it, as `cp` does.
fn into_directory(
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
