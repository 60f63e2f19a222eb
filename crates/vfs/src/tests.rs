//! The file system's rules, each asserted without the kernel: a live group
//! on simulated disks, and the calls the kernel would make.

#![allow(clippy::unwrap_used)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use cairn_io::DeviceId;
use cairn_io_sim::SharedSim;
use cairn_store::group::{CreateOptions, GroupError, LiveGroup};
use cairn_store::names::GroupPath;

use super::*;

#[path = "../../store/tests/common/mod.rs"]
mod common;

const MIB: u64 = 1 << 20;
const ME: Caller = Caller {
    uid: 1000,
    gid: 100,
};

/// A normal-redundancy group `LIVE` on four simulated 128 MiB disks in two
/// failure groups, mounted live, and the file system over it.
struct Rig {
    shared: SharedSim,
    ids: Vec<DeviceId>,
    live: Arc<LiveGroup>,
    vfs: Vfs,
}

fn rig() -> Rig {
    rig_named(7, "LIVE")
}

fn rig_named(seed: u64, name: &str) -> Rig {
    let (shared, ids, live) = common::four_disk_live_group(seed, name, 0x5F5, 64);
    let live = Arc::new(live);
    let vfs = Vfs::new(vec![Served {
        name: name.into(),
        group: live.clone(),
    }])
    .unwrap();
    Rig {
        shared,
        ids,
        live,
        vfs,
    }
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// The group's root directory (slot 0).
fn top() -> u64 {
    Ino::Dir { slot: 0, id: 0 }.encode()
}

impl Rig {
    /// A new file `name` in `dir`, as the kernel is told of it (one lookup).
    fn create(&self, dir: u64, name: &str) -> u64 {
        let (entry, _) = self
            .vfs
            .create(ME, dir, os(name), 0o100644, 0o022, 0)
            .unwrap();
        entry.replied().0.ino
    }

    fn mkdir(&self, dir: u64, name: &str) -> u64 {
        self.vfs
            .mkdir(ME, dir, os(name), 0o755, 0)
            .unwrap()
            .replied()
            .0
            .ino
    }

    fn lookup(&self, dir: u64, name: &str) -> Result<(Attr, u64), Errno> {
        self.vfs.lookup(dir, os(name)).map(Entry::replied)
    }

    /// Whether file `ino` is still in the group (named or not).
    fn file_exists(&self, ino: u64) -> bool {
        let Some(Ino::File { number, .. }) = Ino::decode(ino) else {
            panic!("{ino} is not a file's inode");
        };
        match self.live.meta(|g| g.file_info(number)).unwrap() {
            Ok(_) => true,
            Err(GroupError::NotFound(_)) => false,
            Err(e) => panic!("file_info: {e}"),
        }
    }

    fn names_in(&self, dir: u64) -> Vec<String> {
        self.vfs
            .readdir(dir, 2)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect()
    }
}

#[test]
fn inodes_round_trip_and_do_not_collide() {
    for ino in [
        Ino::Root,
        Ino::Dir { slot: 0, id: 0 },
        Ino::Dir {
            slot: 3,
            id: u32::MAX,
        },
        Ino::File {
            slot: 0,
            number: 256,
        },
        Ino::File {
            slot: 7,
            number: (1 << 31) - 1,
        },
    ] {
        assert_eq!(Ino::decode(ino.encode()), Some(ino));
    }
    // A checksum map's number names no inode: a forged one reads nothing.
    for number in [1 << 31, u32::MAX] {
        let forged = Ino::File { slot: 0, number }.encode();
        assert_eq!(Ino::decode(forged), None, "map number {number}");
    }
    assert_ne!(
        Ino::Dir { slot: 0, id: 256 }.encode(),
        Ino::File {
            slot: 0,
            number: 256
        }
        .encode()
    );
    assert_eq!(Ino::decode(0), None, "inode 0 is nobody's");
    assert_eq!(Ino::Root.encode(), 1);
    assert_eq!(Ino::Dir { slot: 0, id: 5 }.encode(), 1 << 40 | 5);
    assert_eq!(
        Ino::File {
            slot: 1,
            number: 300
        }
        .encode(),
        2 << 40 | 1 << 39 | 300
    );
}

/// Issue 34 item 13: the kernel gives back only the lookups it was told
/// of. A lookup whose step found the file (and counted it) but whose
/// commit then failed — the group stopped — is answered with an error, so
/// its count must not stay: before, it did, and a file unlinked while
/// known was never dropped.
#[test]
fn a_lookup_answered_with_an_error_leaves_no_count_behind() {
    let Rig {
        shared,
        ids,
        live,
        vfs,
    } = rig();
    let info = live
        .meta(|g| {
            g.create_file(
                &GroupPath::parse("+LIVE/f").unwrap(),
                MIB,
                &CreateOptions::default(),
            )
        })
        .unwrap()
        .unwrap();
    let file = Ino::File {
        slot: 0,
        number: info.number,
    }
    .encode();

    let entry = vfs.lookup(top(), os("f")).unwrap();
    assert_eq!(entry.generation, u64::from(info.incarnation));
    entry.replied();
    assert_eq!(vfs.lookups(file), 1, "one entry reply, one lookup");
    // Not replied (the reply was never made): given back.
    drop(vfs.lookup(top(), os("f")).unwrap());
    assert_eq!(
        vfs.lookups(file),
        1,
        "an entry never replied is not counted"
    );

    // Every disk lost: the next change's commit fails and the group
    // stops; a lookup's step still runs, its commit fails.
    shared.with(|sim| {
        for d in &ids {
            sim.lose_disk(*d);
        }
    });
    let change = live.meta(|g| {
        g.create_file(
            &GroupPath::parse("+LIVE/g").unwrap(),
            MIB,
            &CreateOptions::default(),
        )
    });
    assert!(
        !matches!(change, Ok(Ok(_))),
        "a create with every disk lost must fail"
    );
    assert!(live.plane().stopped().is_some(), "the group stopped");
    let refused = vfs
        .lookup(top(), os("f"))
        .map(|e| (e.attr.ino, e.generation));
    assert_eq!(refused, Err(Errno::EIO), "the lookup fails");
    assert_eq!(
        vfs.lookups(file),
        1,
        "a lookup answered with an error leaves no count the kernel would never give back"
    );
    // The kernel gives back the one it was told of: nothing is left.
    vfs.forget(file, 1);
    assert_eq!(vfs.lookups(file), 0);
    assert_eq!(vfs.known_inodes(), 0);
}

#[test]
fn lookups_are_counted_per_reply_and_given_back_by_forget() {
    let r = rig();
    let file = r.create(top(), "f");
    let dir = r.mkdir(top(), "d");
    assert_eq!(r.vfs.lookups(file), 1, "create's reply is a lookup");
    assert_eq!(r.vfs.lookups(dir), 1, "mkdir's reply is a lookup");
    for _ in 0..3 {
        r.lookup(top(), "f").unwrap();
    }
    assert_eq!(r.vfs.lookups(file), 4);
    assert_eq!(r.vfs.known_inodes(), 2);
    // A group's root is not counted (it is never removed).
    let (root, _) = r.lookup(Ino::Root.encode(), "live").unwrap();
    assert_eq!(root.ino, top(), "group names are case-insensitive");
    assert_eq!(r.vfs.lookups(top()), 0);
    assert_eq!(r.vfs.known_inodes(), 2);
    // A failed lookup counts nothing.
    assert_eq!(r.lookup(top(), "nothing").unwrap_err(), Errno::ENOENT);
    assert_eq!(r.vfs.known_inodes(), 2);

    r.vfs.forget(file, 3);
    assert_eq!(r.vfs.lookups(file), 1);
    r.vfs.forget(file, 1);
    assert_eq!(r.vfs.lookups(file), 0);
    // More than was counted, or an inode never known: nothing breaks.
    r.vfs.forget(dir, 5);
    r.vfs.forget(dir, 1);
    r.vfs.forget(0, 1);
    assert_eq!(r.vfs.known_inodes(), 0);
    // Forgetting does not remove: the names are there.
    assert!(r.file_exists(file));
    assert_eq!(r.names_in(top()), ["f", "d"]);
}

/// A file unlinked while the kernel knows it (open, or just found) keeps
/// its data for every read and write through its inode until the last
/// `forget`, then goes, its space with it.
#[test]
fn an_unlinked_open_file_is_read_written_and_dropped_at_its_last_forget() {
    let r = rig();
    let file = r.create(top(), "open");
    assert_eq!(r.vfs.open(file, 0).unwrap(), Opened { direct: false });
    let data: Vec<u8> = (0..3 * MIB as usize / 2).map(|i| (i % 251) as u8).collect();
    assert_eq!(r.vfs.write(file, 0, &data, 0).unwrap(), data.len() as u32);
    let before = r.vfs.statfs(top()).unwrap();
    r.lookup(top(), "open").unwrap();
    assert_eq!(r.vfs.lookups(file), 2);

    r.vfs.unlink(top(), os("open")).unwrap();
    assert_eq!(r.lookup(top(), "open").unwrap_err(), Errno::ENOENT);
    assert!(r.names_in(top()).is_empty(), "the name went at once");
    assert!(
        r.file_exists(file),
        "the data stay while the kernel knows it"
    );
    assert_eq!(r.vfs.read(file, 0, 4096).unwrap(), data[..4096]);
    let mid = MIB + 100;
    assert_eq!(
        r.vfs.read(file, mid, 1000).unwrap(),
        data[mid as usize..mid as usize + 1000]
    );
    // Written and grown after the unlink, as an open file is.
    r.vfs.write(file, data.len() as u64, b"tail", 0).unwrap();
    assert_eq!(r.vfs.getattr(file).unwrap().size, data.len() as u64 + 4);
    assert_eq!(
        r.vfs.read(file, data.len() as u64, 100).unwrap(),
        b"tail",
        "short at the end"
    );
    r.vfs.fsync(file, false).unwrap();
    r.vfs.flush(file).unwrap();
    r.vfs.release(file);

    r.vfs.forget(file, 1);
    assert!(r.file_exists(file), "one lookup is still held");
    r.vfs.forget(file, 1);
    assert!(!r.file_exists(file), "dropped at the last forget");
    let after = r.vfs.statfs(top()).unwrap();
    assert!(
        after.bfree > before.bfree,
        "its space is free again: {} then {} MiB",
        before.bfree,
        after.bfree
    );
    assert_eq!(r.vfs.read(file, 0, 10).unwrap_err(), Errno::ENOENT);
    assert_eq!(r.vfs.known_inodes(), 0);
    assert!(r.live.meta(|g| g.check(false)).unwrap().unwrap().clean());
}

#[test]
fn a_file_unlinked_unknown_goes_at_once_and_its_number_comes_back_as_another_inode() {
    let r = rig();
    let file = r.create(top(), "a");
    let (_, generation) = r.lookup(top(), "a").unwrap();
    r.vfs.forget(file, 2);
    r.vfs.unlink(top(), os("a")).unwrap();
    assert!(!r.file_exists(file), "nobody knew it: deleted");
    // The number is reused; its generation tells the kernel it is another.
    let again = r.create(top(), "b");
    let (_, generation_again) = r.lookup(top(), "b").unwrap();
    assert_eq!(again, file, "the lowest free number is taken again");
    assert_ne!(generation_again, generation);
}

/// The file system stops: what the kernel still knew goes with it.
#[test]
fn destroy_drops_the_files_unlinked_while_known_and_lets_go_of_directory_ids() {
    let r = rig();
    let dir = r.mkdir(top(), "d");
    let file = r.create(top(), "f");
    let kept = r.create(top(), "kept");
    r.vfs.unlink(top(), os("f")).unwrap();
    r.vfs.rmdir(top(), os("d")).unwrap();
    r.vfs.destroy();
    assert_eq!(r.vfs.known_inodes(), 0);
    assert!(!r.file_exists(file));
    assert!(r.file_exists(kept), "a named file stays");
    assert_eq!(r.mkdir(top(), "e"), dir, "the directory's id is free again");
}

/// Rename replaces its target in one step; the file replaced is unlinked
/// as `unlink` would (kept while known), and each refusal has its errno.
#[test]
fn rename_over_an_existing_name_keeps_the_replaced_file_while_known() {
    let r = rig();
    let a = r.create(top(), "a");
    let b = r.create(top(), "b");
    r.vfs.write(a, 0, b"from a", 0).unwrap();
    r.vfs.write(b, 0, b"from b", 0).unwrap();
    r.vfs.rename(top(), os("a"), top(), os("B"), 0).unwrap();
    let (found, _) = r.lookup(top(), "b").unwrap();
    assert_eq!(found.ino, a, "b names a's file now");
    assert_eq!(r.names_in(top()), ["B"], "spelt as the rename said");
    assert_eq!(
        r.vfs.read(b, 0, 100).unwrap(),
        b"from b",
        "b's file is kept"
    );
    r.vfs.forget(b, 1);
    assert!(!r.file_exists(b), "and dropped at its last forget");

    // A target the kernel does not know goes at once.
    let c = r.create(top(), "c");
    r.vfs.forget(c, 1);
    r.vfs.rename(top(), os("b"), top(), os("c"), 0).unwrap();
    assert!(!r.file_exists(c));
    assert!(r.file_exists(a));

    // Across directories, and a directory with its contents.
    let d = r.mkdir(top(), "d");
    r.vfs.rename(top(), os("c"), d, os("x"), 0).unwrap();
    assert_eq!(r.lookup(d, "x").unwrap().0.ino, a);
    let e = r.mkdir(top(), "e");
    r.vfs.rename(top(), os("d"), e, os("d2"), 0).unwrap();
    assert_eq!(
        r.lookup(e, "d2").unwrap().0.ino,
        d,
        "the directory keeps its inode"
    );
    assert_eq!(r.lookup(d, "x").unwrap().0.ino, a);
    let listing = r.vfs.readdir(d, 0).unwrap();
    assert_eq!(listing[1].ino, e, "its \"..\" is the new parent");
}

#[test]
fn rename_refusals() {
    let r = rig();
    let long = "n".repeat(97);
    let d = r.mkdir(top(), "d");
    let full = r.mkdir(top(), "full");
    r.create(full, "inside");
    let sub = r.mkdir(d, "sub");
    r.create(top(), "f");
    r.create(top(), "g");
    let refused = |from: (u64, &str), to: (u64, &str), flags: u32| {
        r.vfs
            .rename(from.0, os(from.1), to.0, os(to.1), flags)
            .unwrap_err()
    };
    let cases = [
        (
            (top(), "f"),
            (top(), "g"),
            libc::RENAME_NOREPLACE,
            Errno::EEXIST,
        ),
        (
            (top(), "f"),
            (top(), "g"),
            libc::RENAME_EXCHANGE,
            Errno::EINVAL,
        ),
        (
            (top(), "f"),
            (top(), "g"),
            libc::RENAME_WHITEOUT,
            Errno::EINVAL,
        ),
        ((top(), "none"), (top(), "x"), 0, Errno::ENOENT),
        ((top(), "d"), (top(), "full"), 0, Errno::ENOTEMPTY),
        ((top(), "f"), (top(), "d"), 0, Errno::EISDIR),
        ((top(), "d"), (top(), "f"), 0, Errno::ENOTDIR),
        ((top(), "d"), (sub, "d"), 0, Errno::EINVAL),
        ((top(), "d"), (d, "self"), 0, Errno::EINVAL),
        ((top(), "f"), (top(), long.as_str()), 0, Errno::EINVAL),
        ((Ino::Root.encode(), "LIVE"), (top(), "x"), 0, Errno::EPERM),
        ((top(), "f"), (0, "x"), 0, Errno::ENOENT),
    ];
    for (from, to, flags, errno) in cases {
        assert_eq!(
            refused(from, to, flags),
            errno,
            "{from:?} -> {to:?} ({flags})"
        );
    }
    // Across groups.
    let two = Vfs::new(vec![
        Served {
            name: "LIVE".into(),
            group: r.live.clone(),
        },
        Served {
            name: "OTHER".into(),
            group: Arc::new(common::four_disk_live_group(8, "OTHER", 0x5F6, 64).2),
        },
    ])
    .unwrap();
    let other = Ino::Dir { slot: 1, id: 0 }.encode();
    assert_eq!(
        two.rename(top(), os("f"), other, os("f"), 0).unwrap_err(),
        Errno::EXDEV
    );
    // Nothing moved, and an empty directory may be replaced by one.
    assert_eq!(r.names_in(top()), ["d", "full", "f", "g"]);
    let empty = r.mkdir(top(), "empty");
    r.vfs.rename(top(), os("d"), top(), os("empty"), 0).unwrap();
    assert_eq!(r.lookup(top(), "empty").unwrap().0.ino, d);
    assert_eq!(r.vfs.getattr(empty).unwrap_err(), Errno::ENOENT);
}

/// A directory removed while the kernel knows it (a shell's working
/// directory) keeps its id: a new directory is not its inode until the
/// last `forget`.
#[test]
fn a_removed_directory_the_kernel_knows_keeps_its_inode_from_a_new_one() {
    let r = rig();
    let d = r.mkdir(top(), "d");
    r.vfs.rmdir(top(), os("d")).unwrap();
    assert_eq!(r.lookup(top(), "d").unwrap_err(), Errno::ENOENT);
    // Through the inode the kernel holds: gone, each way.
    assert_eq!(r.lookup(d, "x").unwrap_err(), Errno::ENOENT);
    assert_eq!(r.vfs.readdir(d, 0).unwrap_err(), Errno::ENOENT);
    assert_eq!(r.vfs.getattr(d).unwrap_err(), Errno::ENOENT);
    assert_eq!(
        r.vfs
            .create(ME, d, os("x"), 0o644, 0, 0)
            .map(|(e, _)| e.replied())
            .unwrap_err(),
        Errno::ENOENT
    );
    let e = r.mkdir(top(), "e");
    assert_ne!(e, d, "a new directory while the kernel knows the old one");
    r.vfs.forget(d, 1);
    let f = r.mkdir(top(), "f");
    assert_eq!(f, d, "after the last forget the id is free (lowest first)");
    // A directory replaced by a rename is held the same.
    let g = r.mkdir(top(), "g");
    r.vfs.rename(top(), os("e"), top(), os("g"), 0).unwrap();
    assert_ne!(r.mkdir(top(), "h"), g);
}

#[test]
fn each_refusal_has_its_errno() {
    let r = rig();
    let file = r.create(top(), "f");
    let dir = r.mkdir(top(), "d");
    r.create(dir, "inside");
    let root = Ino::Root.encode();
    let long = "n".repeat(97);
    let bad = OsStr::from_bytes(b"\xff");
    let mk = |parent: u64, name: &OsStr| {
        r.vfs
            .create(ME, parent, name, 0o644, 0, 0)
            .map(|(e, _)| e.replied())
            .unwrap_err()
    };
    let lookup = |parent: u64, name: &OsStr| r.vfs.lookup(parent, name).map(Entry::replied);

    // Names.
    assert_eq!(lookup(root, os("NOGROUP")).unwrap_err(), Errno::ENOENT);
    assert_eq!(
        lookup(top(), os(&long)).unwrap_err(),
        Errno::ENOENT,
        "a name refused names nothing"
    );
    assert_eq!(lookup(top(), bad).unwrap_err(), Errno::ENOENT);
    assert_eq!(lookup(file, os("x")).unwrap_err(), Errno::ENOTDIR);
    assert_eq!(lookup(0, os("x")).unwrap_err(), Errno::ENOTDIR);
    assert_eq!(
        mk(root, os("x")),
        Errno::EPERM,
        "the root lists groups only"
    );
    assert_eq!(mk(top(), os("f")), Errno::EEXIST);
    assert_eq!(
        mk(top(), os("F")),
        Errno::EEXIST,
        "names are case-insensitive"
    );
    assert_eq!(mk(top(), os(&long)), Errno::EINVAL);
    // 96 bytes is the longest name the group takes (statfs says 48: its
    // namelen was never raised).
    let longest = r.create(top(), &"n".repeat(96));
    assert_eq!(r.lookup(top(), &"N".repeat(96)).unwrap().0.ino, longest);
    assert_eq!(r.vfs.statfs(top()).unwrap().namelen, 48);
    assert_eq!(mk(top(), bad), Errno::EINVAL);
    assert_eq!(mk(file, os("x")), Errno::ENOTDIR);
    assert_eq!(mk(0, os("x")), Errno::ENOENT);
    assert_eq!(
        r.vfs
            .mknod(ME, top(), os("fifo"), libc::S_IFIFO | 0o644, 0)
            .map(Entry::replied)
            .unwrap_err(),
        Errno::EPERM
    );
    assert_eq!(
        r.vfs
            .mkdir(ME, top(), os("d"), 0o755, 0)
            .map(Entry::replied)
            .unwrap_err(),
        Errno::EEXIST
    );
    assert_eq!(r.vfs.unlink(top(), os("none")).unwrap_err(), Errno::ENOENT);
    assert_eq!(r.vfs.unlink(top(), os("d")).unwrap_err(), Errno::EISDIR);
    assert_eq!(r.vfs.unlink(root, os("LIVE")).unwrap_err(), Errno::EPERM);
    assert_eq!(r.vfs.rmdir(top(), os("d")).unwrap_err(), Errno::ENOTEMPTY);
    assert_eq!(r.vfs.rmdir(top(), os("f")).unwrap_err(), Errno::ENOTDIR);
    assert_eq!(r.vfs.rmdir(top(), os("none")).unwrap_err(), Errno::ENOENT);

    // Attributes.
    let size = |n| SetAttr {
        size: Some(n),
        ..SetAttr::default()
    };
    let mode = SetAttr {
        mode: Some(0o700),
        ..SetAttr::default()
    };
    assert_eq!(r.vfs.getattr(0).unwrap_err(), Errno::ENOENT);
    assert_eq!(r.vfs.setattr(dir, size(0)).unwrap_err(), Errno::EISDIR);
    assert_eq!(r.vfs.setattr(top(), size(0)).unwrap_err(), Errno::EISDIR);
    assert_eq!(r.vfs.setattr(top(), mode).unwrap_err(), Errno::EPERM);
    assert_eq!(r.vfs.setattr(root, mode).unwrap_err(), Errno::EPERM);
    assert_eq!(r.vfs.setattr(0, mode).unwrap_err(), Errno::ENOENT);
    assert_eq!(
        r.vfs.setattr(file, size(1 << 40)).unwrap_err(),
        Errno::ENOSPC,
        "more than the group holds"
    );

    // Data.
    assert_eq!(r.vfs.open(dir, 0).unwrap_err(), Errno::EISDIR);
    assert_eq!(r.vfs.read(dir, 0, 1).unwrap_err(), Errno::EISDIR);
    assert_eq!(r.vfs.write(0, 0, b"x", 0).unwrap_err(), Errno::ENOENT);
    assert_eq!(
        r.vfs.write(file, u64::MAX, b"x", 0).unwrap_err(),
        Errno::EFBIG
    );
    assert_eq!(r.vfs.fsync(dir, false).unwrap_err(), Errno::EISDIR);
    let keep = libc::FALLOC_FL_KEEP_SIZE;
    assert_eq!(
        r.vfs.fallocate(file, 0, 4096, keep).unwrap_err(),
        Errno::EOPNOTSUPP
    );
    assert_eq!(
        r.vfs
            .fallocate(file, 0, 4096, libc::FALLOC_FL_COLLAPSE_RANGE)
            .unwrap_err(),
        Errno::EOPNOTSUPP
    );
    assert_eq!(
        r.vfs.fallocate(file, u64::MAX, 2, 0).unwrap_err(),
        Errno::EFBIG
    );
    assert_eq!(r.vfs.readdir(file, 0).unwrap_err(), Errno::ENOTDIR);
    // A file removed (nobody knows it) is not there to read.
    r.vfs.forget(file, 1);
    r.vfs.unlink(top(), os("f")).unwrap();
    assert_eq!(r.vfs.open(file, 0).unwrap_err(), Errno::ENOENT);
    assert_eq!(r.vfs.getattr(file).unwrap_err(), Errno::ENOENT);
}

#[test]
fn attributes_follow_the_caller_the_umask_and_the_writes() {
    let r = rig();
    let (entry, opened) = r
        .vfs
        .create(ME, top(), os("f"), 0o100666, 0o027, libc::O_DIRECT)
        .unwrap();
    assert_eq!(opened, Opened { direct: true });
    let (a, _) = entry.replied();
    assert_eq!(
        (a.kind, a.perm, a.uid, a.gid),
        (Kind::File, 0o640, ME.uid, ME.gid)
    );
    assert_eq!((a.size, a.nlink, a.blksize), (0, 1, 4096));
    let created = a.mtime;

    r.vfs.write(a.ino, 5000, b"hello", 0).unwrap();
    let w = r.vfs.getattr(a.ino).unwrap();
    assert_eq!(w.size, 5005);
    assert_eq!(w.blocks, 2 * MIB / 512, "one AU, two copies");
    assert!(
        w.mtime >= created,
        "a write's time shows before it is stored"
    );
    assert_eq!(w.atime, w.mtime, "atime is not kept");
    assert_eq!(
        r.vfs.read(a.ino, 0, 5000).unwrap(),
        vec![0u8; 5000],
        "a hole reads zeros"
    );

    let at = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let set = r
        .vfs
        .setattr(
            a.ino,
            SetAttr {
                mode: Some(0o600),
                uid: Some(7),
                gid: Some(8),
                mtime: Some(SetTime::At(at)),
                ..SetAttr::default()
            },
        )
        .unwrap();
    assert_eq!(
        (set.perm, set.uid, set.gid, set.mtime),
        (0o600, 7, 8, at),
        "an explicit time wins"
    );
    r.vfs.flush(a.ino).unwrap();
    assert_eq!(
        r.vfs.getattr(a.ino).unwrap().mtime,
        at,
        "nothing was left to store"
    );

    let d = r
        .vfs
        .mkdir(ME, top(), os("d"), 0o777, 0o022)
        .unwrap()
        .replied()
        .0;
    assert_eq!(
        (d.kind, d.perm, d.nlink, d.size),
        (Kind::Directory, 0o755, 2, 0)
    );
    let d2 = r
        .vfs
        .setattr(
            d.ino,
            SetAttr {
                mode: Some(0o1770),
                ..SetAttr::default()
            },
        )
        .unwrap();
    assert_eq!(d2.perm, 0o1770);
    let top_attr = r.vfs.getattr(top()).unwrap();
    assert_eq!((top_attr.kind, top_attr.perm), (Kind::Directory, 0o755));
}

/// A cut inside a sector zeroes the rest of it, so a grow reads zeros
/// there; fallocate grows, punches and zeroes.
#[test]
fn truncate_and_fallocate_leave_zeros_where_the_file_was_cut_or_punched() {
    let r = rig();
    let f = r.create(top(), "f");
    let ones = vec![1u8; 3 * MIB as usize];
    r.vfs.write(f, 0, &ones, 0).unwrap();
    let cut = SetAttr {
        size: Some(1000),
        ..SetAttr::default()
    };
    assert_eq!(r.vfs.setattr(f, cut).unwrap().size, 1000);
    let grow = SetAttr {
        size: Some(10_000),
        ..SetAttr::default()
    };
    assert_eq!(r.vfs.setattr(f, grow).unwrap().size, 10_000);
    let back = r.vfs.read(f, 0, 10_000).unwrap();
    assert_eq!(back[..1000], ones[..1000]);
    assert!(
        back[1000..].iter().all(|b| *b == 0),
        "the cut's tail reads zeros"
    );

    r.vfs.fallocate(f, 0, 2 * MIB, 0).unwrap();
    assert_eq!(r.vfs.getattr(f).unwrap().size, 2 * MIB, "mode 0 grows");
    r.vfs
        .fallocate(f, 0, MIB, libc::FALLOC_FL_KEEP_SIZE)
        .unwrap();
    r.vfs.write(f, 0, &ones[..2 * MIB as usize], 0).unwrap();
    let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    assert!(Vfs::fallocate_zeroes(punch));
    assert!(!Vfs::fallocate_zeroes(0));
    r.vfs.fallocate(f, 4096, MIB, punch).unwrap();
    let back = r.vfs.read(f, 0, 2 * MIB as u32).unwrap();
    assert!(back[..4096].iter().all(|b| *b == 1));
    assert!(
        back[4096..4096 + MIB as usize].iter().all(|b| *b == 0),
        "punched"
    );
    assert!(back[4096 + MIB as usize..].iter().all(|b| *b == 1));
    r.vfs
        .fallocate(f, 2 * MIB - 10, 20, libc::FALLOC_FL_ZERO_RANGE)
        .unwrap();
    assert_eq!(
        r.vfs.getattr(f).unwrap().size,
        2 * MIB + 10,
        "zeroing past the end grows"
    );
    assert_eq!(r.vfs.read(f, 2 * MIB - 10, 100).unwrap(), vec![0u8; 20]);
}

#[test]
fn readdir_lists_in_id_order_and_resumes_after_a_cookie() {
    let r = rig();
    let root = r.vfs.readdir(Ino::Root.encode(), 0).unwrap();
    let names: Vec<_> = root
        .iter()
        .map(|e| (e.cookie, e.name.as_str(), e.ino))
        .collect();
    assert_eq!(names, [(1, ".", 1), (2, "..", 1), (3, "LIVE", top())]);
    let d = r.mkdir(top(), "d");
    let files: Vec<u64> = ["c", "a", "b"].iter().map(|n| r.create(d, n)).collect();
    let all = r.vfs.readdir(d, 0).unwrap();
    let seen: Vec<_> = all
        .iter()
        .map(|e| (e.name.as_str(), e.ino, e.kind))
        .collect();
    assert_eq!(
        seen,
        [
            (".", d, Kind::Directory),
            ("..", top(), Kind::Directory),
            ("c", files[0], Kind::File),
            ("a", files[1], Kind::File),
            ("b", files[2], Kind::File),
        ]
    );
    assert!(all.windows(2).all(|w| w[0].cookie < w[1].cookie));
    // Resumed after "c", with "a" gone and "e" come meanwhile.
    r.vfs.unlink(d, os("a")).unwrap();
    r.create(d, "e");
    // (The new name takes the lowest free id, "a"'s: its cookie is past
    // "c"'s, so the resumed listing has it.)
    let rest = r.vfs.readdir(d, all[2].cookie).unwrap();
    assert!(rest.windows(2).all(|w| w[0].cookie < w[1].cookie));
    let mut rest: Vec<_> = rest.into_iter().map(|e| e.name).collect();
    rest.sort();
    assert_eq!(rest, ["b", "e"], "neither skips nor repeats a name");
}

#[test]
fn statfs_says_the_group_after_mirroring_in_its_block_size() {
    let r = rig();
    let space = r.live.meta(|g| g.space()).unwrap();
    let bytes = (space.total_mb << 20) / 2;
    let free = (space.usable_file_mb.max(0) as u64) << 20;
    let root = r.vfs.statfs(Ino::Root.encode()).unwrap();
    assert_eq!(
        root,
        Statfs {
            blocks: bytes / 4096,
            bfree: free / 4096,
            bavail: free / 4096,
            files: 0,
            ffree: 0,
            bsize: 4096,
            namelen: 48,
            frsize: 4096,
        }
    );
    let dir = r.vfs.statfs(top()).unwrap();
    assert_eq!((dir.bsize, dir.blocks), (MIB as u32, bytes / MIB));
    let f = r.create(top(), "f");
    r.vfs.write(f, 0, &vec![7u8; 8 * MIB as usize], 0).unwrap();
    let file = r.vfs.statfs(f).unwrap();
    assert_eq!(file.bsize, MIB as u32, "a file's largest extent: one AU");
    let after = r.live.meta(|g| g.space()).unwrap();
    assert_eq!(
        file.bfree, after.usable_file_mb as u64,
        "free as the group says, in MiB"
    );
    // Its 8 AUs on each of two copies, and any metadata the file took.
    assert!(
        (dir.bfree - 9..=dir.bfree - 8).contains(&file.bfree),
        "8 MiB written: {} MiB free, then {}",
        dir.bfree,
        file.bfree
    );
}

/// `cairn rm` through the control socket shares the counts: a file the
/// kernel knows keeps its data, and the name the kernel may have cached is
/// given back to be invalidated.
#[test]
fn a_removal_through_the_control_socket_keeps_a_known_file() {
    let r = rig();
    let d = r.mkdir(top(), "d");
    let f = r.create(d, "f");
    r.vfs.write(f, 0, b"kept", 0).unwrap();
    let names = r.vfs.names(0).unwrap();
    assert!(r.vfs.names(1).is_none());
    let gone = names
        .remove(&GroupPath::parse("+LIVE/d/F").unwrap(), &|_| Ok(()))
        .unwrap();
    assert_eq!(gone, Some((d, "F".to_string())));
    assert_eq!(r.lookup(d, "f").unwrap_err(), Errno::ENOENT);
    assert_eq!(r.vfs.read(f, 0, 10).unwrap(), b"kept");
    r.vfs.forget(f, 1);
    assert!(!r.file_exists(f));
    // The check runs first, and its refusal removes nothing.
    let refused = names.remove(&GroupPath::parse("+LIVE/d").unwrap(), &|_| {
        Err(GroupError::Invalid("no".into()))
    });
    assert!(refused.is_err());
    assert_eq!(r.names_in(top()), ["d"]);
}

/// The service's log says a failed drop's errno as it always has
/// (`Errno(5)`, as fuser's errno printed itself), though the core's errno
/// is its own type now.
#[test]
fn a_drop_that_fails_is_logged_as_before() {
    #[derive(Clone, Default)]
    struct Buf(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_target(false)
        .with_ansi(false)
        .without_time()
        .finish();
    let number = tracing::subscriber::with_default(subscriber, || {
        let r = rig();
        let f = r.create(top(), "f");
        r.vfs.unlink(top(), os("f")).unwrap();
        r.shared.with(|sim| {
            for d in &r.ids {
                sim.lose_disk(*d);
            }
        });
        // The group stops at its next commit; the drop's fails.
        let _ = r
            .vfs
            .mkdir(ME, top(), os("d"), 0o755, 0)
            .map(Entry::replied);
        r.vfs.forget(f, 1);
        match Ino::decode(f) {
            Some(Ino::File { number, .. }) => number,
            other => panic!("{other:?}"),
        }
    });
    let log = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let line = format!("dropping an unlinked file failed file={number} error=Errno(5)");
    assert!(log.contains(&line), "no {line:?} in:\n{log}");
}
