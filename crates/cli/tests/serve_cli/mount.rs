//! The file system on the mount: every byte back at any offset, names changed
//! as databases rely on, unlinked files kept while open, synchronous writes
//! flushed, stops that wait for open files, other users by each file's mode.

use super::*;

#[test]
fn serve_gives_every_file_back_through_fuse_and_stops_cleanly_on_sigterm() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let big = random_file(&rig.path("big.bin"), 6 * MIB + 4096, 11);
    let small = random_file(&rig.path("small.bin"), 64 * 1024, 12);
    rig.cairn(&["mkdir", "+DATA/orcl"]).ok();
    rig.cairn(&["cp", big.to_str().unwrap(), "+DATA/orcl/users01.dbf"])
        .ok();
    rig.cairn(&["cp", small.to_str().unwrap(), "+DATA/control.ctl"])
        .ok();
    rig.cairn(&["mkalias", "+DATA/orcl/users01.dbf", "+DATA/orcl/users.dbf"])
        .ok();
    let big_bytes = std::fs::read(&big).unwrap();

    // No wait at a busy stop: it says so at once (the wait has its own
    // test, a_stop_waits_for_open_files_to_be_closed_and_says_so_when_they_are_not).
    let serving = Service::start(&rig, &["--stop-wait", "0s"]);
    assert!(mounted(&serving.mountpoint));
    // The name space: groups at the top, then directories and files.
    let names = |p: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&serving.mountpoint), ["DATA"]);
    assert_eq!(names(&serving.path("DATA")), ["control.ctl", "orcl"]);
    assert_eq!(
        names(&serving.path("DATA/orcl")),
        ["users.dbf", "users01.dbf"]
    );
    // Every byte, whole and at offsets that are not sector-aligned.
    assert!(std::fs::read(serving.path("DATA/orcl/users01.dbf")).unwrap() == big_bytes);
    assert!(
        std::fs::read(serving.path("DATA/control.ctl")).unwrap() == std::fs::read(&small).unwrap()
    );
    let mut f = std::fs::File::open(serving.path("DATA/orcl/users.dbf")).unwrap();
    for (offset, len) in [(12_345u64, 1000usize), (4095, 2), (6 * MIB + 4000, 96)] {
        let mut got = vec![0u8; len];
        f.seek(SeekFrom::Start(offset)).unwrap();
        f.read_exact(&mut got).unwrap();
        assert!(
            got[..] == big_bytes[offset as usize..offset as usize + len],
            "{len} bytes at {offset}"
        );
    }
    // O_DIRECT opens bypass the page cache: the offsets asked reach the
    // file system as they are, not in whole pages.
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(serving.path("DATA/orcl/users01.dbf"))
        .unwrap();
    for (offset, len) in [(12_345u64, 1000usize), (511, 3), (6 * MIB + 4000, 96)] {
        let mut got = vec![0u8; len];
        direct.read_exact_at(&mut got, offset).unwrap();
        assert!(
            got[..] == big_bytes[offset as usize..offset as usize + len],
            "O_DIRECT: {len} bytes at {offset}"
        );
    }
    // SIGTERM while a file is open: the file system is busy, so the
    // service says so and goes on serving (it does not unmount lazily).
    let mut serving = serving;
    serving.signal(libc::SIGTERM);
    serving.wait_for_log("still serving: close them, then send SIGTERM again");
    let mut got = vec![0u8; 100];
    direct.read_exact_at(&mut got, 777).unwrap();
    assert!(got[..] == big_bytes[777..877], "still served");
    drop(direct);
    // Past the end: nothing.
    f.seek(SeekFrom::Start(big_bytes.len() as u64)).unwrap();
    assert_eq!(f.read(&mut [0u8; 16]).unwrap(), 0);
    // An alias is the same file: one inode.
    use std::os::unix::fs::MetadataExt;
    let a = std::fs::metadata(serving.path("DATA/orcl/users01.dbf")).unwrap();
    let b = std::fs::metadata(serving.path("DATA/orcl/users.dbf")).unwrap();
    assert_eq!((a.ino(), a.len()), (b.ino(), big_bytes.len() as u64));
    // Names are the group's: case does not matter, a missing one is ENOENT.
    assert!(serving.path("data/ORCL/Users01.DBF").exists());
    assert_eq!(
        std::fs::File::open(serving.path("DATA/none.dbf"))
            .unwrap_err()
            .kind(),
        std::io::ErrorKind::NotFound
    );
    // fsync on a served file succeeds (never ENOSYS).
    f.sync_all().unwrap();
    drop(f);
    // The service holds the group: another mount is refused, saying so.
    let second = rig.cairn(&["group", "mount", "DATA"]);
    assert_ne!(second.code, 0, "{second:?}");
    assert!(
        second.stderr.contains("DATA") && second.stderr.contains("service"),
        "{second:?}"
    );

    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("dismounted"), "{log}");
    assert!(!mounted(&rig.path("mnt")), "unmounted after SIGTERM");
    rig.check_clean("DATA");
    assert!(rig
        .cairn(&["ls", "+DATA/orcl"])
        .ok()
        .stdout
        .contains("users01.dbf"));
}

#[test]
fn serve_refuses_a_bad_mountpoint_or_group_with_one_line_and_holds_nothing() {
    let rig = Rig::new();
    group(&rig);
    let missing = rig.arg("nowhere");
    rig.cairn(&["serve", "--mountpoint", &missing])
        .refused("create the directory first");
    let full = rig.path("full");
    std::fs::create_dir_all(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    rig.cairn(&["serve", "--mountpoint", full.to_str().unwrap()])
        .refused("is not empty");
    let empty = rig.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    rig.cairn(&[
        "serve",
        "--mountpoint",
        empty.to_str().unwrap(),
        "--group",
        "NOPE",
    ])
    .refused("NOPE");
    // Nothing was left held or mounted.
    assert!(!mounted(&empty));
    rig.check_clean("DATA");
}

#[test]
fn serve_stops_and_dismounts_when_its_file_system_is_unmounted_from_outside() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let data = random_file(&rig.path("f.bin"), MIB, 5);
    rig.cairn(&["cp", data.to_str().unwrap(), "+DATA/f.dbf"])
        .ok();
    let serving = Service::start(&rig, &["--group", "DATA"]);
    assert!(std::fs::read(serving.path("DATA/f.dbf")).unwrap() == std::fs::read(&data).unwrap());
    // An administrator's umount: the service notices, and stops cleanly.
    assert_eq!(umount(&serving.mountpoint, 0), 0);
    let (code, log) = serving.exited();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("unmounted from outside"), "{log}");
    assert!(log.contains("dismounted"), "{log}");
    rig.check_clean("DATA");
}

/// SIGTERM with a file open under the mount: the service waits for it to
/// be closed (`--stop-wait`), serving meanwhile, then stops cleanly; with
/// no wait (or once the wait runs out) it says the file system is in use
/// and goes on serving until the next SIGTERM. A stop right after a
/// database's last close once found the mount busy for a moment (a child
/// forked then held a copy of the descriptor) and went on serving.
#[test]
fn a_stop_waits_for_open_files_to_be_closed_and_says_so_when_they_are_not() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    // A usage error, as clap gives every flag's: exit 2, said first.
    let long = rig.cairn(&["serve", "--stop-wait", "2h"]);
    assert_eq!(long.code, 2, "{long:?}");
    assert!(
        long.stderr
            .lines()
            .next()
            .unwrap_or("")
            .contains("at most 1h"),
        "{long:?}"
    );
    let data = random_file(&rig.path("f.bin"), MIB, 9);
    rig.cairn(&["cp", data.to_str().unwrap(), "+DATA/f.dbf"])
        .ok();

    // No wait: in use at once, still serving; the next SIGTERM stops it.
    let mut serving = Service::start(&rig, &["--stop-wait", "0s"]);
    let file = serving.path("DATA/f.dbf");
    let holder = Holder::open(&file);
    serving.signal(libc::SIGTERM);
    serving.wait_for_log("still serving: close them, then send SIGTERM again");
    assert!(std::fs::read(&file).unwrap() == std::fs::read(&data).unwrap());
    holder.close();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("waiting up to"), "{log}");

    // A wait that runs out: it says so, and goes on serving.
    let mut serving = Service::start(&rig, &["--stop-wait", "300ms"]);
    let holder = Holder::open(&file);
    serving.signal(libc::SIGTERM);
    serving
        .wait_for_log("the file system is in use; waiting up to 300ms for its files to be closed");
    serving.wait_for_log("still serving: close them, then send SIGTERM again");
    assert!(std::fs::read(&file).unwrap() == std::fs::read(&data).unwrap());
    holder.close();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");

    // A wait: the stop waits, serving and answering signals, and ends once
    // the file is closed.
    let mut serving = Service::start(&rig, &["--stop-wait", "2m"]);
    let holder = Holder::open(&file);
    serving.signal(libc::SIGTERM);
    serving.wait_for_log("the file system is in use; waiting up to 2m for its files to be closed");
    serving.signal(libc::SIGHUP);
    serving.wait_for_log("SIGHUP: reading the discovery string again");
    assert!(std::fs::read(&file).unwrap() == std::fs::read(&data).unwrap());
    holder.close();
    let (code, log) = serving.exited();
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("still serving"), "{log}");
    assert!(log.contains("dismounted"), "{log}");
    rig.check_clean("DATA");
}

/// Writes at any offset and length (sectors written in part, appends,
/// holes, cuts inside a sector then grows), page-cached and O_DIRECT,
/// checked against a model of the file at every step's read and whole at
/// the end; then the same bytes and attributes after a restart.
#[test]
fn serve_writes_at_any_offset_and_the_file_reads_as_its_model() {
    if !fuse_here() {
        return;
    }
    use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    let rig = Rig::new();
    group(&rig);
    let serving = Service::start(&rig, &[]);
    std::fs::create_dir(serving.path("DATA/db")).unwrap();
    let path = serving.path("DATA/db/model.dat");
    let cached = std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .unwrap();
    let mut model: Vec<u8> = Vec::new();
    let mut rng = Rng(0x5eed_cafe);
    for step in 0..400 {
        let f = if rng.below(2) == 0 { &cached } else { &direct };
        match rng.below(10) {
            // A cut, or a grow (to a size that is rarely whole sectors).
            0 => {
                let size = rng.below(3 * MIB) as usize;
                f.set_len(size as u64).unwrap();
                model.resize(size, 0);
            }
            // A read anywhere, past the end too.
            1 | 2 => {
                let offset = rng.below(3 * MIB + 8192) as usize;
                let len = 1 + rng.below(70_000) as usize;
                let mut got = vec![0u8; len];
                let n = f.read_at(&mut got, offset as u64).unwrap();
                let want = &model[offset.min(model.len())..(offset + len).min(model.len())];
                assert_eq!(n, want.len(), "step {step}: read of {len} at {offset}");
                assert!(got[..n] == *want, "step {step}: {len} bytes at {offset}");
            }
            // A write: often small and unaligned, sometimes past the end.
            _ => {
                let offset = rng.below(3 * MIB) as usize;
                let len = match rng.below(3) {
                    0 => 1 + rng.below(600),
                    1 => 1 + rng.below(70_000),
                    _ => 4096 * (1 + rng.below(16)),
                } as usize;
                let data = rng.bytes(len);
                f.write_all_at(&data, offset as u64).unwrap();
                if model.len() < offset + len {
                    model.resize(offset + len, 0);
                }
                model[offset..offset + len].copy_from_slice(&data);
            }
        }
        if step % 100 == 99 {
            assert_eq!(std::fs::metadata(&path).unwrap().len(), model.len() as u64);
        }
    }
    cached.sync_all().unwrap();
    drop((cached, direct));
    assert!(std::fs::read(&path).unwrap() == model, "the whole file");
    // Mode, owner and times are the file's own, kept with it.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&path, Some(26), Some(27)).unwrap();
    let when = std::time::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(when)
        .unwrap();
    std::fs::set_permissions(
        serving.path("DATA/db"),
        std::fs::Permissions::from_mode(0o1770),
    )
    .unwrap();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
    // `cairn cp` gives back the file's bytes, not its sectors.
    assert_ne!(model.len() % 4096, 0, "the model ends inside a sector");
    let out = rig.path("model.out");
    rig.cairn(&["cp", "+DATA/db/model.dat", out.to_str().unwrap()])
        .ok();
    assert!(std::fs::read(&out).unwrap() == model, "copied out");
    assert!(rig
        .cairn(&["ls", "+DATA/db"])
        .ok()
        .stdout
        .contains(&format!(" {} ", model.len())));

    let serving = Service::start(&rig, &[]);
    let path = serving.path("DATA/db/model.dat");
    assert!(std::fs::read(&path).unwrap() == model, "after a restart");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (meta.mode() & 0o7777, meta.uid(), meta.gid(), meta.len()),
        (0o640, 26, 27, model.len() as u64)
    );
    assert_eq!(meta.modified().unwrap(), when);
    assert_eq!(
        std::fs::metadata(serving.path("DATA/db")).unwrap().mode() & 0o7777,
        0o1770
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
}

/// An unlinked file stays readable for whoever has it open (and for a
/// path walk that just found it); its space comes back when the kernel lets
/// go of it.
#[test]
fn serve_keeps_an_unlinked_file_while_it_is_open() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let serving = Service::start(&rig, &["--threads", "1"]);
    let dir = serving.path("DATA/pg");
    std::fs::create_dir(&dir).unwrap();
    let doomed = dir.join("doomed");
    let blob = random_file(&rig.path("blob"), 8 * MIB, 3);
    std::fs::copy(&blob, &doomed).unwrap();
    // Written back now: pages still under writeback would hold the inode
    // past the last close, and its FORGET with it.
    std::fs::File::open(&doomed).unwrap().sync_all().unwrap();
    // In a process of its own: a descriptor this (multi-threaded) test
    // process held could be copied into a child another test forks, and
    // outlive our close.
    let script = r#"
        # Free bytes: free blocks times the block size they are counted in.
        free() { echo $(( $(stat -f -c '%f * %S' "$1") )); }
        exec 3< "$1"
        before=$(free "$2")
        rm "$1" && ! test -e "$1" || exit 10
        dd bs=4096 skip=1280 count=1 status=none <&3 > "$3" || exit 11
        held=$(free "$2")
        exec 3<&-
        # The kernel sends the file's RELEASE in the background, and lets go
        # of the inode (FORGET) only once it is answered: a statfs may
        # overtake both. Wait for the space (a bound on a failure: 30 s).
        for i in $(seq 300); do
            after=$(free "$2")
            [ "$after" -ge $((before + $4)) ] && break
            sleep 0.1
        done
        echo "$before $held $after"
    "#;
    let read_back = rig.path("read-back");
    let out = std::process::Command::new("sh")
        .args(["-c", script, "sh"])
        .args([&doomed, &dir, &read_back])
        .arg((8 * MIB).to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let blocks: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let [before, held, after] = blocks[..] else {
        panic!("{out:?}")
    };
    // Read through the descriptor after the unlink.
    assert!(std::fs::read(&read_back).unwrap() == read_at(&blob, 5 * MIB, 4096));
    assert_eq!(held, before, "kept while open");
    // The last close makes the kernel let go of the inode (FORGET, once
    // the RELEASE it sends in the background is answered): then the file's
    // space comes back.
    assert!(
        after >= before + 8 * MIB,
        "freed when the kernel let go: {before} bytes free before, {after} after"
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

/// What databases rely on, checked directly through the kernel: rename
/// replaces its target atomically (a reader never finds the name missing
/// or a file half-written); truncate then reads beyond the end; O_DIRECT
/// writers to distinct ranges of one file that share sectors lose nothing;
/// name changes refused with the errno POSIX gives; and a file fsynced, renamed and its directory
/// fsynced survives a kill -9 of the service.
#[test]
fn serve_changes_names_and_data_as_databases_rely_on() {
    if !fuse_here() {
        return;
    }
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let rig = Rig::new();
    group(&rig);
    let serving = Service::start(&rig, &[]);
    let dir = serving.path("DATA/pg");
    std::fs::create_dir(&dir).unwrap();

    // Rename over a name a reader keeps opening.
    let current = dir.join("current");
    let version = |n: u32| format!("version {n:06} ").repeat(700).into_bytes();
    std::fs::write(&current, version(0)).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (current, stop) = (current.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let got = std::fs::read(&current).expect("the name is never missing");
                let head = got.get(..15).expect("never a short file").to_vec();
                assert!(
                    got.len() == 15 * 700 && got.chunks(15).all(|c| c == head),
                    "a whole version, never a mix: {:?}",
                    String::from_utf8_lossy(&got[..40])
                );
                reads += 1;
            }
            reads
        })
    };
    for n in 1..=60 {
        let tmp = dir.join(format!("tmp.{n}"));
        let mut f = std::fs::File::create(&tmp).unwrap();
        std::io::Write::write_all(&mut f, &version(n)).unwrap();
        f.sync_all().unwrap();
        std::fs::rename(&tmp, &current).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0);
    assert!(std::fs::read(&current).unwrap() == version(60));
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(names.len(), 1, "the replaced files are gone");

    // Truncate, then reads beyond the end find nothing; a grow reads zeros.
    let cut = dir.join("cut");
    std::fs::write(&cut, vec![7u8; 10_000]).unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&cut)
        .unwrap();
    f.set_len(4097).unwrap();
    assert_eq!(f.read_at(&mut [0u8; 100], 4097).unwrap(), 0);
    assert_eq!(f.read_at(&mut [0u8; 100], 9000).unwrap(), 0);
    f.set_len(9000).unwrap();
    let mut back = vec![1u8; 9000];
    f.read_exact_at(&mut back, 0).unwrap();
    assert!(back[..4097].iter().all(|b| *b == 7) && back[4097..].iter().all(|b| *b == 0));
    drop(f);

    // Writers to distinct ranges of one file, at once, O_DIRECT, ranges
    // that share sectors (a read-modify-write each): nothing lost.
    let shared = dir.join("shared");
    std::fs::write(&shared, vec![0u8; 256 * 1024]).unwrap();
    let writers: Vec<_> = (0..4u8)
        .map(|w| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(&shared)
                    .unwrap();
                for round in 0..50u64 {
                    for block in 0..16u64 {
                        // 1000-byte slices, writer w's at 4000 * k + 1000 * w.
                        let at = (block * 4 + round % 4) * 4000 + u64::from(w) * 1000;
                        f.write_all_at(&[w + 1; 1000], at).unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let got = std::fs::read(&shared).unwrap();
    for k in 0..64usize {
        for w in 0..4usize {
            let at = k * 4000 + w * 1000;
            assert!(
                got[at..at + 1000].iter().all(|b| *b == w as u8 + 1),
                "writer {w}'s slice at {at}"
            );
        }
    }

    // Refusals, with POSIX's errno.
    let errno = |r: std::io::Result<()>| r.unwrap_err().raw_os_error();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/f"), b"x").unwrap();
    assert_eq!(
        errno(std::fs::create_dir(dir.join("sub"))),
        Some(libc::EEXIST)
    );
    assert_eq!(
        errno(std::fs::remove_dir(dir.join("sub"))),
        Some(libc::ENOTEMPTY)
    );
    assert_eq!(
        errno(std::fs::remove_file(dir.join("sub"))),
        Some(libc::EISDIR)
    );
    assert_eq!(
        errno(std::fs::remove_dir(dir.join("cut"))),
        Some(libc::ENOTDIR)
    );
    assert_eq!(
        errno(std::fs::rename(dir.join("sub"), dir.join("sub/inner"))),
        Some(libc::EINVAL)
    );
    assert_eq!(
        errno(std::fs::rename(dir.join("cut"), dir.join("sub"))),
        Some(libc::EISDIR)
    );
    assert_eq!(
        errno(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dir.join("cut"))
                .map(drop)
        ),
        Some(libc::EEXIST)
    );
    // A name the group's rules refuse.
    assert_eq!(
        errno(std::fs::write(dir.join("a*b"), b"x")),
        Some(libc::EINVAL)
    );
    let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: a valid path; mkfifo reads only it.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EPERM)
    );
    // A directory moves with what is in it.
    std::fs::rename(dir.join("sub"), dir.join("moved")).unwrap();
    assert_eq!(std::fs::read(dir.join("moved/f")).unwrap(), b"x");
    // A directory removed while in use (a shell's cwd, here an open
    // descriptor) keeps its inode: a new directory gets another, and works.
    std::fs::create_dir(dir.join("gone")).unwrap();
    let held = std::fs::File::open(dir.join("gone")).unwrap();
    let gone_ino = std::os::unix::fs::MetadataExt::ino(&held.metadata().unwrap());
    std::fs::remove_dir(dir.join("gone")).unwrap();
    std::fs::create_dir(dir.join("new")).unwrap();
    let new_ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(dir.join("new")).unwrap());
    assert_ne!(
        new_ino, gone_ino,
        "a removed directory's inode is not reused while known"
    );
    std::fs::write(dir.join("new/f"), b"y").unwrap();
    assert_eq!(std::fs::read(dir.join("new/f")).unwrap(), b"y");
    drop(held);

    // Created, fsynced, renamed into place, directory fsynced: then the
    // service dies. The next one cleans up the dead mount and has it all.
    let tmp = dir.join("wal.tmp");
    let mut f = std::fs::File::create(&tmp).unwrap();
    std::io::Write::write_all(&mut f, &version(99)).unwrap();
    f.sync_all().unwrap();
    drop(f);
    std::fs::rename(&tmp, dir.join("wal")).unwrap();
    std::fs::File::open(&dir).unwrap().sync_all().unwrap();
    serving.kill_9();
    let mut serving = Service::start(&rig, &[]);
    serving.wait_for_log("cleaned up the dead mount");
    let dir = serving.path("DATA/pg");
    assert!(std::fs::read(dir.join("wal")).unwrap() == version(99));
    assert!(std::fs::read(dir.join("current")).unwrap() == version(60));
    assert!(!dir.join("wal.tmp").exists());
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

/// An `O_DIRECT|O_DSYNC` write (a database's log opened that way) is on
/// every copy's disk before it is acknowledged: for a direct-I/O open the
/// kernel does not follow it with an fsync, it passes the flag, and the
/// service flushes each disk. A plain write is not flushed. Counted by the
/// disks themselves (loop devices' flush counters).
#[test]
fn a_synchronous_write_is_flushed_on_every_disk_before_it_is_acknowledged() {
    if !fuse_here() {
        return;
    }
    use cairn_io::test_support::loop_device::{self, LoopDevice};
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    if let Some(why) = loop_device::unavailable_reason() {
        prerequisite::missing(&why);
        return;
    }
    let mut devices = Vec::new();
    let rig = Rig::discovering(|dir| {
        for i in 0..2 {
            devices
                .push(LoopDevice::create(&dir.join(format!("l{i}.img")), 256 * MIB, 4096).unwrap());
        }
        devices
            .iter()
            .map(|d| d.path.display().to_string())
            .collect::<Vec<_>>()
            .join(",")
    });
    for (i, d) in devices.iter().enumerate() {
        rig.cairn(&["disk", "label", &format!("L{i}"), d.path.to_str().unwrap()])
            .ok();
    }
    rig.cairn(&[
        "group",
        "create",
        "DATA",
        "--redundancy",
        "normal",
        "--disk",
        &format!("{}=A", devices[0].path.display()),
        "--disk",
        &format!("{}=B", devices[1].path.display()),
    ])
    .ok();
    let serving = Service::start(&rig, &[]);
    let path = serving.path("DATA/redo.log");
    // Written whole first: the writes measured change no metadata.
    std::fs::write(&path, vec![1u8; 4 * MIB as usize]).unwrap();
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    let open = |flags: i32| {
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT | flags)
            .open(&path)
            .unwrap()
    };
    let plain = open(0);
    let before = flushes(&devices);
    plain.write_all_at(&[2u8; 8192], 8192).unwrap();
    assert_eq!(flushes(&devices), before, "a plain write is not flushed");
    let dsync = open(libc::O_DSYNC);
    dsync.write_all_at(&[3u8; 8192], 16384).unwrap();
    let after = flushes(&devices);
    assert!(
        after.iter().zip(&before).all(|(a, b)| a > b),
        "each disk flushed before the O_DSYNC write returned: {before:?} -> {after:?}"
    );
    drop((plain, dsync));
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    drop(rig);
}

/// Two writes of one block in flight at once leave every copy alike: fio
/// at random offsets without its random map (`--norandommap`: a block may
/// be drawn again while its last write is in flight), two jobs at queue
/// depth 8 on one file, through the mount; then scrub reads every copy and
/// finds none that disagrees. The extent latch keeps writes of the same
/// bytes one at a time, so every copy ends with the later one; before, two
/// such writes could reach the copies' disks in different orders (3 of 10
/// two-second runs of one job left copies apart; `lifecycle_cli`'s
/// benchmark file did too, in CI).
#[test]
fn two_writes_of_one_block_in_flight_leave_every_copy_alike() {
    if !fuse_here() || !fio_here() {
        return;
    }
    let rig = Rig::new();
    let here = rig.path("");
    group_on(&rig, [&here, &here, &here, &here], &["--au-size", "1M"]);
    let serving = Service::start(&rig, &[]);
    let file = serving.path("DATA/overlap.dat");
    for round in 1..=3 {
        let fio = std::process::Command::new("fio")
            .args([
                "--name=overlap",
                &format!("--filename={}", file.display()),
                "--rw=randwrite",
                "--bs=8k",
                "--size=16M",
                "--io_size=64M",
                "--numjobs=2",
                "--norandommap",
                "--randrepeat=0",
                "--refill_buffers",
                "--ioengine=io_uring",
                "--iodepth=8",
                "--direct=1",
            ])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&fio.stdout);
        assert!(
            fio.status.success() && said.contains("err= 0"),
            "fio: {}\n{said}",
            String::from_utf8_lossy(&fio.stderr)
        );
        let scrub = rig.cairn(&["group", "scrub", "DATA", "--wait", "--json"]);
        assert_eq!(
            scrub.json()["scrub"]["problems"],
            serde_json::json!([]),
            "round {round}: every copy holds the same writes: {}\n{}",
            scrub.stdout,
            scrub.stderr
        );
        assert_eq!(scrub.code, 0, "{}", scrub.stderr);
    }
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

#[test]
fn the_benchmark_runs_on_a_file_through_the_mount() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let serving = Service::start(&rig, &[]);
    let target = serving.path("DATA/bench.dat");
    let out = rig.path("bench-out");
    let run = rig
        .cairn(&[
            "bench",
            "quick",
            "--target",
            target.to_str().unwrap(),
            "--size",
            "16M",
            "--rw",
            "randrw",
            "--qd",
            "4",
            "--time",
            "1s",
            "--interval",
            "500ms",
            "--out",
            out.to_str().unwrap(),
        ])
        .ok();
    assert!(run.stdout.contains("reports:"), "{run:?}");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    let totals = &result["runs"][0]["totals"]["all"];
    for rw in ["read", "write"] {
        assert!(
            totals[rw]["ios"].as_u64().unwrap() > 0,
            "{rw}s went through the mount: {totals}"
        );
    }
    // The file is the group's, as big as asked.
    let listed = rig.cairn(&["ls", "+DATA/bench.dat", "--json"]).ok().json();
    assert_eq!(listed[0]["file"]["attrs"]["byte_size"], 16 * MIB);
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

#[test]
fn the_unit_file_starts_the_service_with_arguments_it_takes() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../dist/cairn.service"
    ))
    .unwrap();
    assert!(unit.lines().any(|l| l == "Type=notify"), "{unit}");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    let mut words = exec.split_whitespace();
    assert!(words.next().unwrap().ends_with("/cairn"), "{exec}");
    // The same arguments, with a mountpoint that is not there: refused by
    // the service itself (exit 1, one line), not by the argument parser.
    let rig = Rig::new();
    let missing = rig.path("nowhere");
    let args: Vec<String> = words
        .map(|w| match w {
            "/mnt/cairn" => missing.to_str().unwrap().to_string(),
            w => w.to_string(),
        })
        .collect();
    assert!(
        args.iter().any(|a| a == missing.to_str().unwrap()),
        "{exec}"
    );
    rig.cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .refused("create the directory first");
}

#[test]
fn other_users_reach_the_mount_only_with_allow_other_and_by_each_file_s_mode() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(rig.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let as_nobody = |args: &[&str]| {
        use std::os::unix::process::CommandExt;
        let out = std::process::Command::new(args[0])
            .args(&args[1..])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        Run::from(out)
    };
    let serving = Service::start(&rig, &[]);
    std::fs::write(serving.path("DATA/open.txt"), b"for all").unwrap();
    let mnt = serving.mountpoint.to_str().unwrap().to_string();
    let refused = as_nobody(&["ls", &mnt]);
    assert_ne!(refused.code, 0, "without --allow-other: {refused:?}");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");

    let serving = Service::start(&rig, &["--allow-other"]);
    let listed = as_nobody(&["ls", &format!("{mnt}/DATA")]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.stdout.contains("open.txt"), "{listed:?}");
    let read = as_nobody(&["cat", &format!("{mnt}/DATA/open.txt")]);
    assert_eq!(read.stdout, "for all", "{read:?}");
    // The kernel checks each file's mode and owner (default_permissions).
    let secret = serving.path("DATA/secret.txt");
    std::fs::write(&secret, b"root only").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let denied = as_nobody(&["cat", secret.to_str().unwrap()]);
    assert_ne!(denied.code, 0, "{denied:?}");
    assert!(denied.stderr.contains("Permission denied"), "{denied:?}");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn cp_between_groups_reads_a_served_source_through_the_mount() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    // FRA: a second group, over a disk of its own.
    let f0 = sparse(&rig.path("f0.img"), 256 * MIB);
    rig.cairn(&["disk", "label", "F0", f0.to_str().unwrap()])
        .ok();
    rig.cairn(&[
        "group",
        "create",
        "FRA",
        "--redundancy",
        "external",
        "--disk",
        f0.to_str().unwrap(),
    ])
    .ok();
    // Not a whole number of sectors: the byte length must come across.
    let source = random_file(&rig.path("redo.bin"), 3 * MIB + 5, 21);
    rig.cairn(&[
        "cp",
        source.to_str().unwrap(),
        "+DATA/redo01.log",
        "--template",
        "ONLINELOG",
    ])
    .ok();
    let want = std::fs::read(&source).unwrap();
    // Only DATA served: the copy into FRA is the CLI's, from the mount.
    let serving = Service::start(&rig, &["--group", "DATA"]);
    rig.cairn(&["cp", "+DATA/redo01.log", "+FRA/redo01.log"])
        .ok();
    let listed = rig.cairn(&["ls", "+FRA/"]).ok();
    assert!(
        listed.stdout.contains("ONLINELOG") && listed.stdout.contains(&format!("{}", want.len())),
        "the copy keeps the source's template and byte length: {listed:?}"
    );
    rig.cairn(&[
        "cp",
        "+FRA/redo01.log",
        rig.path("back.bin").to_str().unwrap(),
    ])
    .ok();
    assert_eq!(std::fs::read(rig.path("back.bin")).unwrap(), want);
    // Within the served group: the service copies from its own mount.
    rig.cairn(&[
        "cp",
        "+DATA/redo01.log",
        "+DATA/redo02.log",
        "--template",
        "DATAFILE",
    ])
    .ok();
    assert_eq!(
        std::fs::read(serving.path("DATA/redo02.log")).unwrap(),
        want
    );
    let listed = rig.cairn(&["ls", "+DATA/"]).ok();
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.contains("redo02.log") && l.starts_with("DATAFILE")),
        "a template given wins: {listed:?}"
    );
    // A source that is not there: one line, nothing made.
    rig.cairn(&["cp", "+DATA/nothing.log", "+FRA/nothing.log"])
        .refused("nothing.log");
    // Into the served group from one it does not hold: refused, saying who
    // holds it and that its files are reached through its file system —
    // where a copy out lands as it should.
    rig.cairn(&["cp", "+FRA/redo01.log", "+DATA/redo03.log"])
        .refused("the Cairn service holds it");
    let through = serving.path("DATA/redo03.log");
    rig.cairn(&["cp", "+FRA/redo01.log", through.to_str().unwrap()])
        .ok();
    assert_eq!(std::fs::read(&through).unwrap(), want);
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
    rig.check_clean("FRA");
}
