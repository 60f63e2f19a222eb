//! The namespace checks a command makes for its asker, as the mount's
//! kernel makes them (`default_permissions`): search on every directory
//! on the way, read to list or copy out, write and search on the directory
//! a name is made in or removed from, the sticky bit, and the hard-link
//! protection (`fs.protected_hardlinks`) for an alias.
//!
//! Each check runs under the metadata lock in the same step as the change
//! it guards, so nothing changes between the check and the act.

use cairn_store::group::{group_root_attrs, AliasKind, Group, Node};
use cairn_store::names::GroupPath;

use crate::caller::{perm_name, Caller, READ, SEARCH, WRITE};
use crate::error::CommandError;

/// The sticky bit on a directory: only a name's owner, the directory's
/// owner or root may remove or rename a name in it.
const STICKY: u32 = 0o1000;

/// A name's mode and owner, as the file system shows them.
#[derive(Debug, Clone)]
struct Object {
    shown: String,
    mode: u32,
    owner: (u32, u32),
    directory: bool,
}

fn root_object(path: &GroupPath) -> Object {
    let a = group_root_attrs();
    Object {
        shown: format!("+{}", path.group),
        mode: u32::from(a.mode),
        owner: (a.uid, a.gid),
        directory: true,
    }
}

fn object_of(node: &Node, shown: String) -> Object {
    match (&node.kind, &node.file) {
        (AliasKind::Directory, _) => Object {
            shown,
            mode: u32::from(node.dir_attrs.mode),
            owner: (node.dir_attrs.uid, node.dir_attrs.gid),
            directory: true,
        },
        (_, Some(f)) => Object {
            shown,
            mode: f.attrs.mode & 0o7777,
            owner: (f.attrs.uid, f.attrs.gid),
            directory: false,
        },
        // A name whose file is lost: nobody but root may touch it.
        (_, None) => Object {
            shown,
            mode: 0,
            owner: (0, 0),
            directory: false,
        },
    }
}

fn denied(caller: &Caller, what: &str, want: u32, on: &Object) -> CommandError {
    CommandError::Denied(format!(
        "permission denied: {what} needs {} on {}, which is mode {:04o} owned by {}:{} (user {} is refused, as the mount would refuse it)",
        perm_name(want),
        on.shown,
        on.mode & 0o7777,
        on.owner.0,
        on.owner.1,
        caller.uid
    ))
}

fn need(caller: &Caller, what: &str, want: u32, on: &Object) -> Result<(), CommandError> {
    if caller.may(on.mode, on.owner, want, on.directory) {
        Ok(())
    } else {
        Err(denied(caller, what, want, on))
    }
}

/// The path's components walked from the group's root, each directory
/// searched on the way: the last directory reached (the parent of the
/// last component, when every one before it exists) and the node the
/// last component names, if any. A component missing on the way ends the
/// walk: the command itself then says what is not there.
struct Walked {
    parent: Object,
    parent_id: Option<u32>,
    /// The parent exists (every component before the last did).
    complete: bool,
    last: Option<(Node, Object)>,
}

fn walk(
    g: &Group<'_>,
    caller: &Caller,
    path: &GroupPath,
    what: &str,
) -> Result<Walked, CommandError> {
    let mut dir = root_object(path);
    let mut dir_id = 0u32;
    let n = path.components.len();
    let mut shown = format!("+{}", path.group);
    for (i, c) in path.components.iter().enumerate() {
        need(caller, what, SEARCH, &dir)?;
        let Ok(Some(node)) = g.child_node(dir_id, c.as_str()) else {
            return Ok(Walked {
                parent: dir,
                parent_id: Some(dir_id),
                complete: i + 1 == n,
                last: None,
            });
        };
        shown = format!("{shown}/{}", node.name);
        let object = object_of(&node, shown.clone());
        if i + 1 == n {
            return Ok(Walked {
                parent: dir,
                parent_id: Some(dir_id),
                complete: true,
                last: Some((node, object)),
            });
        }
        if node.kind != AliasKind::Directory {
            // A file on the way: the command says so.
            return Ok(Walked {
                parent: dir,
                parent_id: None,
                complete: false,
                last: None,
            });
        }
        dir_id = node.id;
        dir = object;
    }
    // The group's root itself.
    Ok(Walked {
        parent: dir.clone(),
        parent_id: None,
        complete: true,
        last: None,
    })
}

/// `ls` and `du` of `path`: every directory on the way searched; a
/// directory listed must be readable and searchable (its entries are
/// shown with their sizes), and with `subtree` every directory under it
/// too (`du`).
pub fn list(
    g: &Group<'_>,
    caller: &Caller,
    path: &GroupPath,
    subtree: bool,
) -> Result<(), CommandError> {
    let what = format!("listing {path}");
    let w = walk(g, caller, path, &what)?;
    let (id, object) = match (w.last, path.components.is_empty()) {
        (Some((node, object)), _) if node.kind == AliasKind::Directory => (node.id, object),
        (_, true) => (0, w.parent),
        _ => return Ok(()),
    };
    need(caller, &what, READ | SEARCH, &object)?;
    if subtree {
        let mut stack = vec![(id, object.shown)];
        while let Some((dir, shown)) = stack.pop() {
            for child in g.children(dir) {
                if child.kind == AliasKind::Directory {
                    let inner = format!("{shown}/{}", child.name);
                    let o = object_of(&child, inner.clone());
                    need(caller, &what, READ | SEARCH, &o)?;
                    stack.push((child.id, inner));
                }
            }
        }
    }
    Ok(())
}

/// Making the name `path` (a file, a directory, an alias): write and
/// search on the directory it goes in. With `parents`, directories made on
/// the way: the deepest one that exists must allow it.
pub fn create(
    g: &Group<'_>,
    caller: &Caller,
    path: &GroupPath,
    parents: bool,
) -> Result<(), CommandError> {
    let what = format!("making {path}");
    let w = walk(g, caller, path, &what)?;
    if !w.complete && !parents {
        return Ok(());
    }
    need(caller, &what, WRITE | SEARCH, &w.parent)
}

/// Removing the name `path`: write and search on its directory, and in a
/// sticky directory, ownership of the name or of the directory.
pub fn remove(g: &Group<'_>, caller: &Caller, path: &GroupPath) -> Result<(), CommandError> {
    let what = format!("removing {path}");
    let w = walk(g, caller, path, &what)?;
    let Some((_, object)) = w.last else {
        return Ok(());
    };
    need(caller, &what, WRITE | SEARCH, &w.parent)?;
    if w.parent.mode & STICKY != 0
        && !caller.is_root()
        && caller.uid != object.owner.0
        && caller.uid != w.parent.owner.0
    {
        return Err(CommandError::Denied(format!(
            "permission denied: removing {path}: {} is sticky (mode {:04o}) and {} is owned by uid {}, the directory by uid {}; only they or root may remove it (user {} is refused, as the mount would refuse it)",
            w.parent.shown,
            w.parent.mode & 0o7777,
            object.shown,
            object.owner.0,
            w.parent.owner.0,
            caller.uid
        )));
    }
    Ok(())
}

/// Reading the file `path` (a copy out): search on the way, read on it.
pub fn read(g: &Group<'_>, caller: &Caller, path: &GroupPath) -> Result<(), CommandError> {
    let what = format!("reading {path}");
    let w = walk(g, caller, path, &what)?;
    match w.last {
        Some((_, object)) => need(caller, &what, READ, &object),
        None => Ok(()),
    }
}

/// A second name `alias` for the file `target` (`mkalias`, as `link`):
/// the target reached, the alias's directory writable, and — the kernel's
/// `protected_hardlinks` — the asker owns the file, or may read and write
/// it.
pub fn link(
    g: &Group<'_>,
    caller: &Caller,
    target: &GroupPath,
    alias: &GroupPath,
) -> Result<(), CommandError> {
    let what = format!("an alias {alias} of {target}");
    let w = walk(g, caller, target, &what)?;
    if let Some((_, object)) = w.last {
        if !caller.is_root()
            && caller.uid != object.owner.0
            && !caller.may(object.mode, object.owner, READ | WRITE, object.directory)
        {
            return Err(CommandError::Denied(format!(
                "permission denied: {what}: {} is owned by uid {} with mode {:04o}, and a user may alias only a file they own or may read and write (fs.protected_hardlinks; user {} is refused, as the kernel would refuse it)",
                object.shown,
                object.owner.0,
                object.mode & 0o7777,
                caller.uid
            )));
        }
    }
    create(g, caller, alias, false)
}

/// The directory a new name goes in, by id, once [`create`] allowed it
/// (`None`: it does not exist yet).
pub fn parent_id(g: &Group<'_>, caller: &Caller, path: &GroupPath) -> Option<u32> {
    walk(g, caller, path, "").ok().and_then(|w| w.parent_id)
}
