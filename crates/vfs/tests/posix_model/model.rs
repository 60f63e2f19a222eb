//! The model of POSIX the file system is checked against, kept apart from
//! the group: the tree, each file's bytes, each inode's mode and owner, the
//! lookups the kernel holds, and which inode numbers it was given. It knows
//! nothing of AUs, alias ids or file numbers.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use cairn_vfs::{Attr, Errno, Kind};

use super::{top, ROOT};

/// What the group takes as a name (`docs/serve.md`): printable ASCII but
/// these, no leading `+`, no space at either end, 96 bytes at most.
pub const NAME_BYTES_MAX: usize = 96;
pub const NAME_FORBIDDEN: &[char] = &['/', '\\', '*', '?', '"', '<', '>', '|', ':'];

pub fn key(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// The group's naming rules, as the model states them.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n != "."
        && n != ".."
        && n.is_ascii()
        && n.len() <= NAME_BYTES_MAX
        && !n
            .chars()
            .any(|c| c.is_ascii_control() || NAME_FORBIDDEN.contains(&c))
        && !n.starts_with('+')
        && !n.starts_with(' ')
        && !n.ends_with(' ')
}

pub type Obj = usize;

#[derive(Debug, Clone)]
pub enum Body {
    Dir {
        /// Name key (lower case) → (spelling, object).
        children: BTreeMap<String, (String, Obj)>,
        parent: Obj,
        removed: bool,
    },
    File {
        data: Vec<u8>,
        /// Synced since its last change: its bytes survive a crash.
        clean: bool,
    },
}

#[derive(Debug, Clone)]
pub struct Object {
    pub ino: u64,
    pub generation: u64,
    pub body: Body,
    pub named: bool,
    /// Lookups the kernel holds (every actor's).
    pub lookups: u64,
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    /// A modification time set explicitly, not changed since.
    pub mtime: Option<SystemTime>,
}

impl Object {
    pub fn alive(&self) -> bool {
        self.named || self.lookups > 0
    }
    pub fn kind(&self) -> Kind {
        match self.body {
            Body::Dir { .. } => Kind::Directory,
            Body::File { .. } => Kind::File,
        }
    }
    pub fn removed(&self) -> bool {
        matches!(self.body, Body::Dir { removed: true, .. })
    }
}

/// What an inode an actor names is, to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Root,
    Dir(Obj),
    File(Obj),
}

pub struct Model {
    pub objs: Vec<Object>,
    /// Inode → the living object that has it.
    pub by_ino: BTreeMap<u64, Obj>,
    /// Every file's (inode, generation) handed out.
    pub issued: BTreeSet<(u64, u64)>,
    pub sector: u64,
}

impl Model {
    pub fn new(sector: u64) -> Self {
        let (uid, gid) = (current_uid(), current_gid());
        Self {
            objs: vec![Object {
                ino: top(),
                generation: 0,
                body: Body::Dir {
                    children: BTreeMap::new(),
                    parent: 0,
                    removed: false,
                },
                named: true,
                lookups: 0,
                perm: 0o755,
                uid,
                gid,
                mtime: None,
            }],
            by_ino: BTreeMap::from([(top(), 0)]),
            issued: BTreeSet::new(),
            sector,
        }
    }

    pub fn node(&self, ino: u64) -> Node {
        if ino == ROOT {
            return Node::Root;
        }
        let o = *self
            .by_ino
            .get(&ino)
            .unwrap_or_else(|| panic!("the model has no inode {ino:#x}"));
        match self.objs[o].body {
            Body::Dir { .. } => Node::Dir(o),
            Body::File { .. } => Node::File(o),
        }
    }

    pub fn children(&self, d: Obj) -> &BTreeMap<String, (String, Obj)> {
        match &self.objs[d].body {
            Body::Dir { children, .. } => children,
            Body::File { .. } => unreachable!("a file has no children"),
        }
    }

    pub fn children_mut(&mut self, d: Obj) -> &mut BTreeMap<String, (String, Obj)> {
        match &mut self.objs[d].body {
            Body::Dir { children, .. } => children,
            Body::File { .. } => unreachable!("a file has no children"),
        }
    }

    pub fn child(&self, d: Obj, name: &str) -> Option<Obj> {
        self.children(d).get(&key(name)).map(|(_, o)| *o)
    }

    pub fn data(&self, o: Obj) -> &[u8] {
        match &self.objs[o].body {
            Body::File { data, .. } => data,
            Body::Dir { .. } => unreachable!("a directory has no bytes"),
        }
    }

    pub fn data_mut(&mut self, o: Obj) -> &mut Vec<u8> {
        let obj = &mut self.objs[o];
        obj.mtime = None;
        match &mut obj.body {
            Body::File { data, clean } => {
                *clean = false;
                data
            }
            Body::Dir { .. } => unreachable!("a directory has no bytes"),
        }
    }

    /// An object that lost its name or a lookup: dead when it has neither.
    pub fn settle(&mut self, o: Obj) {
        if !self.objs[o].alive() && self.by_ino.get(&self.objs[o].ino) == Some(&o) {
            self.by_ino.remove(&self.objs[o].ino);
        }
    }

    /// Take away the name `name` in `d` (its object loses its only name).
    pub fn unname(&mut self, d: Obj, name: &str) -> Obj {
        let (_, o) = self
            .children_mut(d)
            .remove(&key(name))
            .expect("invariant: the name is there");
        self.objs[o].named = false;
        if let Body::Dir { removed, .. } = &mut self.objs[o].body {
            *removed = true;
        }
        self.settle(o);
        o
    }

    /// A directory to look in or change: the errno the file system gives
    /// for an inode that is not one it may change names in.
    pub fn dir_for_change(&self, d: u64) -> Result<Obj, Errno> {
        match self.node(d) {
            Node::Root => Err(Errno::EPERM),
            Node::File(_) => Err(Errno::ENOTDIR),
            Node::Dir(o) => Ok(o),
        }
    }

    /// `name` in `d`, for a change: the name checked, then the directory.
    pub fn entry_for_change(&self, d: Obj, name: &str) -> Result<Option<Obj>, Errno> {
        if !valid_name(name) {
            return Err(Errno::EINVAL);
        }
        if self.objs[d].removed() {
            return Err(Errno::ENOENT);
        }
        Ok(self.child(d, name))
    }

    /// The attributes `stat` must show for `o` (times but an explicit
    /// modification time aside).
    pub fn check_attr(&self, o: Obj, a: &Attr, what: &str) {
        let obj = &self.objs[o];
        let blksize = match obj.body {
            Body::Dir { .. } => 4096,
            Body::File { .. } => self.sector.max(4096) as u32,
        };
        let size = match &obj.body {
            Body::Dir { .. } => 0,
            Body::File { data, .. } => data.len() as u64,
        };
        let nlink = if obj.kind() == Kind::Directory { 2 } else { 1 };
        let got = (
            a.ino, a.kind, a.size, a.perm, a.uid, a.gid, a.nlink, a.blksize,
        );
        let want = (
            obj.ino,
            obj.kind(),
            size,
            obj.perm,
            obj.uid,
            obj.gid,
            nlink,
            blksize,
        );
        assert_eq!(
            got, want,
            "{what}: attributes (ino, kind, size, perm, uid, gid, nlink, blksize)"
        );
        assert!(
            a.blocks * 512 >= size,
            "{what}: {} blocks hold {size} bytes",
            a.blocks
        );
        if let Some(t) = obj.mtime {
            assert_eq!(a.mtime, t, "{what}: the modification time set");
        }
    }
}

pub fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

pub fn current_gid() -> u32 {
    // SAFETY: as getuid.
    unsafe { libc::getgid() }
}
