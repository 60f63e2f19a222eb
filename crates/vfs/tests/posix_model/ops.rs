//! The operations, each as the kernel would send it: the kernel's locks
//! taken, the model's answer worked out, the file system asked, the two
//! compared, and the model changed as the answer says.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use cairn_io::poison::Recover;
use cairn_io::sched;
use cairn_vfs::{Entry, Errno, Kind, SetAttr, SetTime};

use super::model::{key, Body, Model, Node, Obj};
use super::*;

fn lookup(w: &World, a: &mut ActorState) {
    let d = a.dir(w);
    let name = if d == ROOT && a.rng.chance(50) {
        "vFs".to_string()
    } else {
        a.name()
    };
    // The directory, and what the name names (its attributes are checked).
    let want_locks = |m: &Model| {
        let mut set = vec![(d, false)];
        if let Node::Dir(o) = m.node(d) {
            if let Some(c) = m.child(o, &name) {
                set.push((m.objs[c].ino, false));
            }
        }
        set
    };
    w.with_locks(want_locks, || {
        let (want, removed) = {
            let m = w.model.lock_or_recover();
            match m.node(d) {
                Node::Root if name.eq_ignore_ascii_case(GROUP) => (Ok(0), false),
                Node::Root => (Err(Errno::ENOENT), false),
                Node::File(_) => (Err(Errno::ENOTDIR), false),
                Node::Dir(o) if m.objs[o].removed() => (Err(Errno::ENOENT), true),
                Node::Dir(o) => (m.child(o, &name).ok_or(Errno::ENOENT), false),
            }
        };
        let got = w.vfs.lookup(d, os(&name)).map(Entry::replied);
        w.say(
            a,
            &format!(
                "lookup {d:#x} {name:?} -> {:?}",
                got.as_ref().map(|g| g.0.ino)
            ),
        );
        w.check(if want.is_ok() {
            "lookup: found, as the model's"
        } else {
            "lookup: refused as the model says"
        });
        if removed {
            w.check("a removed directory the kernel knows answers ENOENT");
        }
        w.entry(
            a,
            &format!("lookup {name:?} in {d:#x}"),
            want,
            got,
            d != ROOT,
        );
    });
}

fn create(w: &World, a: &mut ActorState, dir: bool) {
    let d = a.dir(w);
    let name = a.name();
    let umask = [0, 0o022, 0o077][a.rng.below(3) as usize];
    let perm = [0o644, 0o600, 0o755, 0o4755, 0o1777][a.rng.below(5) as usize];
    let direct = a.rng.chance(30);
    w.with_locks(
        |_| vec![(d, true)],
        || {
            let (want, held_removed) = {
                let m = w.model.lock_or_recover();
                let want = m.dir_for_change(d).and_then(|o| match m.entry_for_change(o, &name)? {
                    Some(_) => Err(Errno::EEXIST),
                    None => Ok(o),
                });
                let held_removed = m.objs.iter().any(|o| o.removed() && o.lookups > 0);
                (want, held_removed)
            };
            let what = format!("{} {name:?} in {d:#x}", if dir { "mkdir" } else { "create" });
            let got = if dir {
                w.vfs
                    .mkdir(a.caller, d, os(&name), 0o040000 | perm, umask)
                    .map(Entry::replied)
            } else {
                let flags = if direct { libc::O_DIRECT } else { 0 };
                w.vfs
                    .create(a.caller, d, os(&name), 0o100000 | perm, umask, flags)
                    .map(|(e, opened)| {
                        assert_eq!(opened.direct, direct, "{what}: served direct");
                        e.replied()
                    })
            };
            w.say(a, &format!("{what} -> {:?}", got.as_ref().map(|g| g.0.ino)));
            match (want, got) {
                (Ok(parent), Ok((attr, generation))) => {
                    assert_eq!(
                        attr.perm,
                        (perm & !umask & 0o7777) as u16,
                        "seed {}: {what}: mode and umask",
                        w.seed
                    );
                    let body = if dir {
                        Body::Dir {
                            children: BTreeMap::new(),
                            parent,
                            removed: false,
                        }
                    } else {
                        Body::File {
                            data: Vec::new(),
                            clean: false,
                        }
                    };
                    w.born(a, &what, (parent, &name), (&attr, generation), body);
                    if dir {
                        if held_removed {
                            w.check("mkdir: a new inode while a removed directory the kernel knows holds its own");
                        }
                    } else {
                        w.check("create: a new inode");
                        *a.open.entry(attr.ino).or_default() += 1;
                    }
                }
                (Ok(parent), Err(y)) if w.dying(y) => w.unsure(&[(parent, &name)], &[]),
                (_, Err(y)) if w.dying(y) => {}
                (Err(x), Err(y)) => assert_eq!(y, x, "seed {}: {what}", w.seed),
                (x, y) => panic!("seed {}: {what}: the model says {x:?}, the file system {:?}", w.seed, y.map(|g| g.0.ino)),
            }
        },
    );
}

fn unlink(w: &World, a: &mut ActorState) {
    let d = a.dir(w);
    let name = a.name();
    w.with_locks(
        |_| vec![(d, true)],
        || {
            let want = {
                let m = w.model.lock_or_recover();
                m.dir_for_change(d)
                    .and_then(|o| match m.entry_for_change(o, &name)? {
                        None => Err(Errno::ENOENT),
                        Some(c) if m.objs[c].kind() == Kind::Directory => Err(Errno::EISDIR),
                        Some(c) => Ok((o, c)),
                    })
            };
            let got = w.vfs.unlink(d, os(&name));
            w.say(a, &format!("unlink {name:?} in {d:#x} -> {got:?}"));
            let what = format!("unlink {name:?} in {d:#x}");
            if !w.agrees(&what, want.map(|_| ()), got) {
                if let Ok((o, c)) = want {
                    w.unsure(&[(o, &name)], &[c]);
                }
                return;
            }
            if let Ok((o, c)) = want {
                let mut m = w.model.lock_or_recover();
                if m.objs[c].lookups > 0 {
                    w.check("unlink of a file the kernel knows");
                }
                m.unname(o, &name);
            }
        },
    );
}

fn rmdir(w: &World, a: &mut ActorState) {
    let d = a.dir(w);
    let name = a.name();
    let want_locks = |m: &Model| {
        let mut set = vec![(d, true)];
        if let Node::Dir(o) = m.node(d) {
            if let Some(c) = m.child(o, &name) {
                set.push((m.objs[c].ino, true));
            }
        }
        set
    };
    w.with_locks(want_locks, || {
        let want = {
            let m = w.model.lock_or_recover();
            m.dir_for_change(d)
                .and_then(|o| match m.entry_for_change(o, &name)? {
                    None => Err(Errno::ENOENT),
                    Some(c) if m.objs[c].kind() == Kind::File => Err(Errno::ENOTDIR),
                    Some(c) if !m.children(c).is_empty() => Err(Errno::ENOTEMPTY),
                    Some(c) => Ok((o, c)),
                })
        };
        let got = w.vfs.rmdir(d, os(&name));
        w.say(a, &format!("rmdir {name:?} in {d:#x} -> {got:?}"));
        if !w.agrees(&format!("rmdir {name:?} in {d:#x}"), want.map(|_| ()), got) {
            if let Ok((o, c)) = want {
                w.unsure(&[(o, &name)], &[c]);
            }
            return;
        }
        if let Ok((o, c)) = want {
            let mut m = w.model.lock_or_recover();
            if m.objs[c].lookups > 0 {
                w.check("rmdir of a directory the kernel knows");
            }
            m.unname(o, &name);
        }
    });
}

/// What a rename must answer, from the model (the file system's order of
/// checks: flags, directories, names, source, moving into itself, target).
fn rename_want(
    m: &Model,
    (d1, n1): (u64, &str),
    (d2, n2): (u64, &str),
    flags: u32,
) -> Result<(Obj, Obj, Obj, Option<Obj>), Errno> {
    if flags & (libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT) != 0 {
        return Err(Errno::EINVAL);
    }
    let o1 = m.dir_for_change(d1)?;
    let o2 = m.dir_for_change(d2)?;
    let source = m.entry_for_change(o1, n1)?;
    let target = m.entry_for_change(o2, n2)?;
    let s = source.ok_or(Errno::ENOENT)?;
    if m.objs[s].kind() == Kind::Directory {
        let mut at = o2;
        loop {
            if at == s {
                return Err(Errno::EINVAL);
            }
            match m.objs[at].body {
                Body::Dir { parent, .. } if at != 0 => at = parent,
                _ => break,
            }
        }
    }
    let target = target.filter(|t| *t != s);
    if let Some(t) = target {
        if flags & libc::RENAME_NOREPLACE != 0 {
            return Err(Errno::EEXIST);
        }
        match (m.objs[s].kind(), m.objs[t].kind()) {
            (Kind::Directory, Kind::Directory) if !m.children(t).is_empty() => {
                return Err(Errno::ENOTEMPTY)
            }
            (Kind::Directory, Kind::File) => return Err(Errno::ENOTDIR),
            (Kind::File, Kind::Directory) => return Err(Errno::EISDIR),
            _ => {}
        }
    }
    Ok((o1, o2, s, target))
}

fn rename(w: &World, a: &mut ActorState) {
    let d1 = a.dir(w);
    let d2 = if a.rng.chance(50) { d1 } else { a.dir(w) };
    let (n1, n2) = (a.name(), a.name());
    let flags = match a.rng.below(20) {
        0..=2 => libc::RENAME_NOREPLACE,
        3 => libc::RENAME_EXCHANGE,
        _ => 0,
    };
    let want_locks = |m: &Model| {
        let mut set = vec![(d1, true), (d2, true)];
        if d1 != d2 {
            set.push((RENAME_LOCK, true));
        }
        for (d, n) in [(d1, &n1), (d2, &n2)] {
            if let Node::Dir(o) = m.node(d) {
                if let Some(c) = m
                    .child(o, n)
                    .filter(|c| m.objs[*c].kind() == Kind::Directory)
                {
                    set.push((m.objs[c].ino, true));
                }
            }
        }
        set
    };
    w.with_locks(want_locks, || {
        let want = rename_want(&w.model.lock_or_recover(), (d1, &n1), (d2, &n2), flags);
        let got = w.vfs.rename(d1, os(&n1), d2, os(&n2), flags);
        let what = format!("rename {n1:?} in {d1:#x} to {n2:?} in {d2:#x} ({flags})");
        w.say(a, &format!("{what} -> {got:?}"));
        if !w.agrees(&what, want.map(|_| ()), got) {
            if let Ok((o1, o2, s, t)) = want {
                let objs: Vec<Obj> = [Some(s), t].into_iter().flatten().collect();
                w.unsure(&[(o1, &n1), (o2, &n2)], &objs);
            }
            return;
        }
        match want {
            Err(_) => w.check("rename: refused as the model says"),
            Ok((o1, o2, s, target)) => {
                let mut m = w.model.lock_or_recover();
                if let Some(t) = target {
                    if m.objs[t].lookups > 0 && m.objs[t].kind() == Kind::File {
                        w.check("rename over a file the kernel knows");
                    }
                    m.unname(o2, &n2);
                }
                m.children_mut(o1).remove(&key(&n1));
                m.children_mut(o2).insert(key(&n2), (n2.clone(), s));
                if let Body::Dir { parent, .. } = &mut m.objs[s].body {
                    *parent = o2;
                }
            }
        }
    });
}

fn forget(w: &World, a: &mut ActorState) {
    let free: Vec<(u64, u64)> = a
        .held
        .iter()
        .map(|(ino, n)| (*ino, n - a.open.get(ino).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    let Some(&(ino, n)) = free.get(a.rng.below(free.len() as u64) as usize) else {
        return;
    };
    let n = 1 + a.rng.below(n);
    // Given back before the call: from here the file system may let go.
    {
        let mut m = w.model.lock_or_recover();
        let o = m.by_ino[&ino];
        m.objs[o].lookups -= n;
        if m.objs[o].lookups == 0 && !m.objs[o].named && m.objs[o].kind() == Kind::File {
            w.check("forget: the last lookup of a file whose name went");
        }
        m.settle(o);
    }
    let held = a.held.get_mut(&ino).expect("invariant: held");
    *held -= n;
    if *held == 0 {
        a.held.remove(&ino);
    }
    w.say(a, &format!("forget {ino:#x} {n}"));
    w.vfs.forget(ino, n);
}

/// A file the actor holds, opened (as the kernel opens before it reads or
/// writes); `None` if it holds none.
fn opened_file(w: &World, a: &mut ActorState) -> Option<u64> {
    let f = a.pick(&a.held_of(w, Kind::File))?;
    if !a.open.contains_key(&f) {
        let direct = a.rng.chance(30);
        let flags = if direct { libc::O_DIRECT } else { 0 };
        let opened = w.with_locks(|_| vec![(f, false)], || w.vfs.open(f, flags));
        if matches!(opened, Err(e) if w.dying(e)) {
            return None;
        }
        assert_eq!(
            opened.map(|o| o.direct),
            Ok(direct),
            "seed {}: open {f:#x}",
            w.seed
        );
        a.open.insert(f, 1);
    }
    Some(f)
}

fn unnamed(w: &World, f: u64) -> bool {
    let m = w.model.lock_or_recover();
    !m.objs[m.by_ino[&f]].named
}

fn read(w: &World, a: &mut ActorState) {
    let Some(f) = opened_file(w, a) else { return };
    let offset = a.rng.below(FILE_BYTES_MAX);
    let cap = if a.rng.chance(80) { 64 << 10 } else { 1 << 20 };
    let len = 1 + a.rng.below(cap) as u32;
    w.with_locks(
        |_| vec![(f, false)],
        || {
            let got = w.vfs.read(f, offset, len);
            if matches!(got, Err(e) if w.dying(e)) {
                return;
            }
            let m = w.model.lock_or_recover();
            let data = m.data(m.by_ino[&f]);
            let from = (offset as usize).min(data.len());
            let to = (offset as usize + len as usize).min(data.len());
            w.say(a, &format!("read {f:#x} at {offset} {len} -> {:?}", got.as_ref().map(Vec::len)));
            let got = got.unwrap_or_else(|e| panic!("seed {}: read {f:#x}: {e}", w.seed));
            assert!(
                got == data[from..to],
                "seed {}: read {f:#x} at {offset}, {len} bytes: {} bytes back, not the model's {} (first difference at {:?})",
                w.seed,
                got.len(),
                to - from,
                got.iter().zip(&data[from..to]).position(|(x, y)| x != y)
            );
            w.check("read: bytes as the model's");
            if !m.objs[m.by_ino[&f]].named {
                w.check("read through an inode whose last name went");
            }
        },
    );
}

fn write(w: &World, a: &mut ActorState) {
    let Some(f) = opened_file(w, a) else { return };
    let len = match a.rng.below(100) {
        0..=69 => 1 + a.rng.below(64 << 10),
        70..=94 => 1 + a.rng.below(300 << 10),
        _ => 1 + a.rng.below(1100 << 10),
    };
    let offset = match a.rng.below(10) {
        0..=4 => {
            let size = {
                let m = w.model.lock_or_recover();
                m.data(m.by_ino[&f]).len() as u64
            };
            a.rng.below(size + 1)
        }
        5..=7 => a.rng.below(FILE_BYTES_MAX) / 4096 * 4096,
        _ => a.rng.below(FILE_BYTES_MAX),
    }
    .min(FILE_BYTES_MAX - len);
    let data = a.rng.bytes(len as usize);
    let flags = if a.rng.chance(10) { libc::O_DSYNC } else { 0 };
    w.with_locks(
        |_| vec![(f, true)],
        || {
            let got = w.vfs.write(f, offset, &data, flags);
            w.say(a, &format!("write {f:#x} at {offset} {len} -> {got:?}"));
            let what = format!("write {f:#x} at {offset}");
            if !w.agrees(
                &what,
                Ok(()),
                got.map(|n| assert_eq!(n, len as u32, "{what}")),
            ) {
                let o = w.model.lock_or_recover().by_ino[&f];
                w.unsure(&[], &[o]);
                return;
            }
            if unnamed(w, f) {
                w.check("write through an inode whose last name went");
            }
            let mut m = w.model.lock_or_recover();
            let o = m.by_ino[&f];
            let d = m.data_mut(o);
            let end = (offset + len) as usize;
            if d.len() < end {
                d.resize(end, 0);
            }
            d[offset as usize..end].copy_from_slice(&data);
        },
    );
}

fn setattr(w: &World, a: &mut ActorState) {
    let files = a.held_of(w, Kind::File);
    let ino = match a.rng.below(10) {
        0 => top(),
        1 => ROOT,
        2 => a.pick(&a.held_of(w, Kind::Directory)).unwrap_or(top()),
        _ => match a.pick(&files) {
            Some(f) => f,
            None => return,
        },
    };
    let mut set = SetAttr::default();
    if a.rng.chance(40) {
        set.size = Some(match a.rng.below(3) {
            0 => 0,
            1 => a.rng.below(FILE_BYTES_MAX),
            _ => {
                let m = w.model.lock_or_recover();
                match m.node(ino) {
                    Node::File(o) => (m.data(o).len() as u64).saturating_sub(a.rng.below(5000)),
                    _ => 0,
                }
            }
        });
    }
    if a.rng.chance(30) {
        set.mode = Some([0o600, 0o644, 0o2755, 0o1777][a.rng.below(4) as usize]);
    }
    if a.rng.chance(20) {
        set.uid = Some(2000 + a.rng.below(3) as u32);
        set.gid = Some(3000 + a.rng.below(3) as u32);
    }
    if a.rng.chance(30) {
        set.mtime = Some(if a.rng.chance(50) {
            SetTime::Now
        } else {
            SetTime::At(UNIX_EPOCH + Duration::from_secs(1_000_000_000 + a.rng.below(1 << 20)))
        });
    }
    let owner = set.mode.is_some() || set.uid.is_some() || set.gid.is_some();
    w.with_locks(
        |_| vec![(ino, true)],
        || {
            let want: Result<Option<Obj>, Errno> = {
                let m = w.model.lock_or_recover();
                match m.node(ino) {
                    Node::Root => {
                        if set.size.is_some() {
                            Err(Errno::EISDIR)
                        } else if owner {
                            Err(Errno::EPERM)
                        } else {
                            Ok(None)
                        }
                    }
                    Node::Dir(0) if set.size.is_some() => Err(Errno::EISDIR),
                    Node::Dir(0) if owner => Err(Errno::EPERM),
                    Node::Dir(o) if set.size.is_some() && o != 0 => Err(Errno::EISDIR),
                    Node::Dir(o) if m.objs[o].removed() => Err(Errno::ENOENT),
                    Node::Dir(o) | Node::File(o) => Ok(Some(o)),
                }
            };
            let got = w.vfs.setattr(ino, set);
            let what = format!("seed {}: setattr {ino:#x} {set:?}", w.seed);
            w.say(a, &format!("{what} -> {:?}", got.as_ref().map(|a| a.size)));
            match (want, got) {
                (Ok(Some(o)), Err(y)) if w.dying(y) => w.unsure(&[], &[o]),
                (_, Err(y)) if w.dying(y) => {}
                (Err(x), Err(y)) => assert_eq!(y, x, "{what}"),
                (Ok(None), Ok(attr)) => {
                    assert_eq!((attr.ino, attr.kind), (ROOT, Kind::Directory), "{what}")
                }
                (Ok(Some(o)), Ok(attr)) => {
                    let mut m = w.model.lock_or_recover();
                    if let Some(size) = set.size {
                        if size < m.data(o).len() as u64 && size % m.sector != 0 {
                            w.check("setattr: cut inside a sector");
                        }
                        m.data_mut(o).resize(size as usize, 0);
                    }
                    let is_dir = m.objs[o].kind() == Kind::Directory;
                    let obj = &mut m.objs[o];
                    if let Some(mode) = set.mode {
                        obj.perm = (mode & 0o7777) as u16;
                    }
                    obj.uid = set.uid.unwrap_or(obj.uid);
                    obj.gid = set.gid.unwrap_or(obj.gid);
                    if !is_dir {
                        match set.mtime {
                            Some(SetTime::At(t)) => obj.mtime = Some(t),
                            Some(SetTime::Now) => obj.mtime = None,
                            None => {}
                        }
                    }
                    m.check_attr(o, &attr, &what);
                }
                (x, y) => panic!("{what}: the model says {x:?}, the file system {y:?}"),
            }
        },
    );
}

fn getattr(w: &World, a: &mut ActorState) {
    let mut all: Vec<u64> = a.held.keys().copied().collect();
    all.extend([top(), ROOT]);
    let ino = a.pick(&all).expect("invariant: not empty");
    w.with_locks(
        |_| vec![(ino, false)],
        || {
            let got = w.vfs.getattr(ino);
            if matches!(got, Err(e) if w.dying(e)) {
                return;
            }
            let m = w.model.lock_or_recover();
            let what = format!("seed {}: getattr {ino:#x}", w.seed);
            match m.node(ino) {
                Node::Root => assert_eq!(got.map(|a| a.ino), Ok(ROOT), "{what}"),
                Node::Dir(o) if m.objs[o].removed() => {
                    assert_eq!(got.map(|a| a.ino), Err(Errno::ENOENT), "{what}");
                    w.check("a removed directory the kernel knows answers ENOENT");
                }
                Node::Dir(o) | Node::File(o) => {
                    m.check_attr(o, &got.unwrap_or_else(|e| panic!("{what}: {e}")), &what)
                }
            }
        },
    );
}

fn fallocate(w: &World, a: &mut ActorState) {
    let Some(f) = opened_file(w, a) else { return };
    const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
    const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
    const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
    let mode = [0, KEEP, PUNCH | KEEP, ZERO, ZERO | KEEP][a.rng.below(5) as usize];
    let offset = a.rng.below(FILE_BYTES_MAX - 600 * 1024);
    let len = 1 + a.rng.below(600 * 1024);
    let end = offset + len;
    w.with_locks(
        |_| vec![(f, true)],
        || {
            let got = w.vfs.fallocate(f, offset, len, mode);
            let what = format!("fallocate {f:#x} at {offset} {len} mode {mode:#x}");
            w.say(a, &format!("{what} -> {got:?}"));
            let mut m = w.model.lock_or_recover();
            let o = m.by_ino[&f];
            let size = m.data(o).len() as u64;
            // (what it answers, what it grows the file to, the range zeroed)
            let (want, grow, zero) = match mode {
                0 => (Ok(()), end, None),
                KEEP if end <= size => (Ok(()), 0, None),
                KEEP => (Err(Errno::EOPNOTSUPP), 0, None),
                _ => {
                    let keep = mode & KEEP != 0;
                    let stop = if keep { end.min(size) } else { end };
                    let grow = if keep { 0 } else { end };
                    (Ok(()), grow, (offset < stop).then_some(offset..stop))
                }
            };
            if !w.agrees(&what, want, got) {
                if want.is_ok() {
                    w.unsure(&[], &[o]);
                }
                return;
            }
            if grow > size {
                m.data_mut(o).resize(grow as usize, 0);
            }
            if let Some(range) = zero {
                m.data_mut(o)[range.start as usize..range.end as usize].fill(0);
                w.check("fallocate: a punched or zeroed range");
            }
        },
    );
}

fn sync(w: &World, a: &mut ActorState) {
    let Some(f) = opened_file(w, a) else { return };
    let datasync = a.rng.chance(30);
    w.with_locks(
        |_| vec![(f, false)],
        || {
            let got = w.vfs.fsync(f, datasync);
            w.say(a, &format!("fsync {f:#x} -> {got:?}"));
            if !w.agrees(&format!("fsync {f:#x}"), Ok(()), got) {
                return;
            }
            let mut m = w.model.lock_or_recover();
            let o = m.by_ino[&f];
            if let Body::File { clean, .. } = &mut m.objs[o].body {
                *clean = true;
            }
        },
    );
    assert_eq!(w.vfs.fsyncdir(top()), Ok(()));
}

fn close(w: &World, a: &mut ActorState, f: u64) {
    w.with_locks(
        |_| vec![(f, false)],
        || {
            w.agrees(&format!("flush {f:#x}"), Ok(()), w.vfs.flush(f));
            w.vfs.release(f);
        },
    );
    w.say(a, &format!("close {f:#x}"));
    let n = a.open.get_mut(&f).expect("invariant: open");
    *n -= 1;
    if *n == 0 {
        a.open.remove(&f);
    }
}

fn readdir(w: &World, a: &mut ActorState) {
    let d = a.dir(w);
    w.with_locks(
        |_| vec![(d, false)],
        || {
            let got = w.vfs.readdir(d, 0);
            let what = format!("seed {}: readdir {d:#x}", w.seed);
            let m = w.model.lock_or_recover();
            let want: Result<Vec<(String, u64, Kind)>, Errno> = match m.node(d) {
                Node::Root => Ok(vec![
                    (".".into(), ROOT, Kind::Directory),
                    ("..".into(), ROOT, Kind::Directory),
                    (GROUP.into(), top(), Kind::Directory),
                ]),
                Node::File(_) => Err(Errno::ENOTDIR),
                Node::Dir(o) if m.objs[o].removed() => Err(Errno::ENOENT),
                Node::Dir(o) => {
                    let up = match m.objs[o].body {
                        Body::Dir { parent, .. } if o != 0 => m.objs[parent].ino,
                        _ => ROOT,
                    };
                    let mut v = vec![
                        (".".into(), d, Kind::Directory),
                        ("..".into(), up, Kind::Directory),
                    ];
                    v.extend(
                        m.children(o)
                            .values()
                            .map(|(n, c)| (n.clone(), m.objs[*c].ino, m.objs[*c].kind())),
                    );
                    Ok(v)
                }
            };
            match (want, got) {
                (_, Err(y)) if w.dying(y) => {}
                (Err(x), Err(y)) => assert_eq!(y, x, "{what}"),
                (Ok(mut want), Ok(got)) => {
                    assert!(
                        got.windows(2).all(|e| e[0].cookie < e[1].cookie),
                        "{what}: cookies rise"
                    );
                    let mut names: Vec<(String, u64, Kind)> = got
                        .iter()
                        .map(|e| (e.name.clone(), e.ino, e.kind))
                        .collect();
                    assert_eq!(
                        names[..2.min(names.len())],
                        want[..2],
                        "{what}: \".\" and \"..\" first"
                    );
                    names[2..].sort();
                    want[2..].sort();
                    assert_eq!(names, want, "{what}");
                    drop(m);
                    if got.len() > 3 {
                        let at = 2 + a.rng.below(got.len() as u64 - 3) as usize;
                        let rest = match w.vfs.readdir(d, got[at].cookie) {
                            Err(e) if w.dying(e) => return,
                            r => r.unwrap(),
                        };
                        assert_eq!(
                            rest,
                            got[at + 1..],
                            "{what}: resumed after {}",
                            got[at].cookie
                        );
                        w.check("readdir: resumed after a cookie");
                    }
                }
                (x, y) => panic!("{what}: the model says {x:?}, the file system {y:?}"),
            }
        },
    );
}

fn statfs(w: &World, a: &mut ActorState) {
    let mut all: Vec<u64> = a.held.keys().copied().collect();
    all.extend([top(), ROOT]);
    let ino = a.pick(&all).expect("invariant: not empty");
    let s = match w.vfs.statfs(ino) {
        Err(e) if w.dying(e) => return,
        r => r.unwrap(),
    };
    let what = format!("seed {}: statfs {ino:#x}", w.seed);
    assert!(
        [4096, w.au_bytes as u32].contains(&s.bsize),
        "{what}: {s:?}"
    );
    assert_eq!(s.blocks, w.bytes / u64::from(s.bsize), "{what}: {s:?}");
    assert_eq!(
        (s.frsize, s.namelen, s.files, s.ffree),
        (s.bsize, 48, 0, 0),
        "{what}"
    );
    assert!(s.bfree == s.bavail && s.bfree <= s.blocks, "{what}: {s:?}");
}

pub fn actor(w: &World, id: usize, close_all: bool) {
    let mut a = ActorState {
        id,
        rng: Rand::new(w.seed ^ (0xAC70 + id as u64) << 32),
        caller: Caller {
            uid: 1000 + id as u32,
            gid: 100 + id as u32,
        },
        held: BTreeMap::new(),
        open: BTreeMap::new(),
    };
    for _ in 0..OPS_PER_ACTOR {
        sched::yield_now();
        // The process died: nothing more is asked (the kernel's end, its
        // forgets, comes below).
        if w.shared.crashed() {
            break;
        }
        w.ops.fetch_add(1, Ordering::SeqCst);
        match a.rng.below(100) {
            0..=15 => lookup(w, &mut a),
            16..=25 => create(w, &mut a, false),
            26..=30 => create(w, &mut a, true),
            31..=37 => unlink(w, &mut a),
            38..=41 => rmdir(w, &mut a),
            42..=49 => rename(w, &mut a),
            50..=58 => forget(w, &mut a),
            59..=62 => getattr(w, &mut a),
            63..=67 => setattr(w, &mut a),
            68..=75 => read(w, &mut a),
            76..=85 => write(w, &mut a),
            86..=88 => fallocate(w, &mut a),
            89..=90 => sync(w, &mut a),
            91..=93 => {
                if let Some(f) = a.pick(&a.open.keys().copied().collect::<Vec<_>>()) {
                    close(w, &mut a, f);
                }
            }
            94..=97 => readdir(w, &mut a),
            _ => statfs(w, &mut a),
        }
    }
    if close_all {
        for f in a.open.clone().into_keys() {
            while a.open.contains_key(&f) {
                close(w, &mut a, f);
            }
        }
        while !a.held.is_empty() {
            forget(w, &mut a);
        }
    }
}
