//! `cairn serve` with the real binary and a real FUSE mount: the groups'
//! files read back byte for byte through the file system, at any offset;
//! written at any offset, against a model; names changed as databases
//! rely on (rename replacing atomically, unlink while open, fsync of file
//! and directory surviving a kill -9); SQLite on the mount; the group stays
//! held (a second mount is refused); SIGTERM unmounts, dismounts and leaves the
//! group clean. The service says it is ready with systemd's `READY=1` on
//! `$NOTIFY_SOCKET`, which is how the test waits for it: no sleeps.
//! Bad requests are refused with one line before anything is mounted.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use cairn_io::test_support::prerequisite;
use common::*;

const MIB: u64 = 1 << 20;

/// A group DATA (normal redundancy, failure groups A and B) over four
/// sparse disks of the rig.
fn group(rig: &Rig) {
    let dir = rig.path("");
    group_on(rig, [&dir, &dir, &dir, &dir], &[]);
}

/// Group DATA over four sparse disks `D0`..`D3`, each in its directory
/// (disks 0, 1 in failure group A; 2, 3 in B); `extra`: more `group
/// create` flags.
fn group_on(rig: &Rig, dirs: [&Path; 4], extra: &[&str]) {
    let mut args: Vec<String> = ["group", "create", "DATA", "--redundancy", "normal"]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect();
    for (i, dir) in dirs.iter().enumerate() {
        let path = sparse(&dir.join(format!("d{i}.img")), 256 * MIB);
        rig.cairn(&["disk", "label", &format!("D{i}"), path.to_str().unwrap()])
            .ok();
        args.push("--disk".into());
        args.push(format!(
            "{}={}",
            path.display(),
            if i < 2 { "A" } else { "B" }
        ));
    }
    rig.cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
}

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

/// A process of its own that holds `path` open until [`Holder::close`]
/// (not this test process: a descriptor it held could be copied into a
/// child another test forks).
struct Holder(std::process::Child);

impl Holder {
    fn open(path: &Path) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "exec 3< \"$1\" && echo open && { read line || true; }",
                "sh",
            ])
            .arg(path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut said)
            .unwrap();
        assert_eq!(said, "open\n", "the holder could not open {path:?}");
        Self(child)
    }

    /// Its stdin closed: it reads the end, exits, and its descriptors go.
    fn close(mut self) {
        drop(self.0.stdin.take());
        assert!(self.0.wait().unwrap().success());
    }
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

/// A small deterministic generator (xorshift64*): the same ops every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
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

/// Run `sqlite3 db` on `script` (stdin); its output, or why it failed.
fn sqlite(db: &Path, script: &str) -> Result<String, String> {
    use std::io::Write;
    let mut child = std::process::Command::new("sqlite3")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("sqlite3: {e}"))?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        return Err(format!(
            "sqlite3 {}: {}{}",
            db.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// SQLite on the mount, as a database runs there: one database in WAL mode
/// (its index shared through `MAP_SHARED` of the -shm file) and one with a
/// rollback journal (created, written, fsynced and deleted per
/// transaction), each taking thousands of transactions from several
/// connections at once; `PRAGMA integrity_check` is ok and every row is
/// there. Then the service is killed (`kill -9`) under a writer: the next
/// service cleans up the dead mount and replays the journal, and every
/// transaction SQLite reported committed is there.
#[test]
fn sqlite_runs_on_the_mount_and_keeps_every_commit_through_a_kill_9() {
    if !fuse_here() {
        return;
    }
    if std::process::Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_err()
    {
        prerequisite::missing("sqlite3 (scripts/install-deps installs it)");
        return;
    }
    const CONNECTIONS: usize = 4;
    const TRANSACTIONS: usize = 400;
    let rig = Rig::new();
    group(&rig);
    let serving = Service::start(&rig, &[]);
    std::fs::create_dir(serving.path("DATA/sq")).unwrap();
    for mode in ["wal", "delete"] {
        let db = serving.path(&format!("DATA/sq/{mode}.db"));
        assert_eq!(
            sqlite(
                &db,
                &format!(
                    "PRAGMA journal_mode={mode};\n\
                     CREATE TABLE t(id INTEGER PRIMARY KEY, conn INT, n INT, pad BLOB);\n\
                     CREATE INDEX t_conn ON t(conn, n);\n"
                )
            )
            .unwrap(),
            mode
        );
        let writers: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut script =
                        String::from(".bail on\n.timeout 60000\nPRAGMA synchronous=FULL;\n");
                    for n in 0..TRANSACTIONS {
                        script.push_str(&format!(
                            "BEGIN IMMEDIATE;\n\
                             INSERT INTO t(conn, n, pad) VALUES ({c}, {n}, randomblob({}));\n\
                             UPDATE t SET pad = randomblob(64) WHERE conn = {c} AND n = {};\n\
                             COMMIT;\n",
                            100 + (n * 37) % 900,
                            n / 2
                        ));
                    }
                    sqlite(&db, &script)
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap().unwrap();
        }
        let report = sqlite(
            &db,
            "PRAGMA integrity_check;\nSELECT count(*), count(DISTINCT conn), sum(n) FROM t;\n",
        )
        .unwrap();
        let per_conn: usize = (0..TRANSACTIONS).sum();
        assert_eq!(
            report,
            format!(
                "ok\n{}|{CONNECTIONS}|{}",
                CONNECTIONS * TRANSACTIONS,
                CONNECTIONS * per_conn
            ),
            "{mode}"
        );
    }

    // kill -9 under a writer that says each commit as it returns.
    let db = serving.path("DATA/sq/wal.db");
    sqlite(&db, "CREATE TABLE c(id INTEGER PRIMARY KEY);\n").unwrap();
    let mut script = String::from(".bail on\nPRAGMA synchronous=FULL;\n");
    for i in 1..=20_000 {
        script.push_str(&format!(
            "INSERT INTO c(id) VALUES ({i});\nSELECT 'committed {i}';\n"
        ));
    }
    let mut writer = std::process::Command::new("stdbuf")
        .args(["-oL", "sqlite3"])
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = writer.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        // Fails once the writer stops reading (it bails after the crash).
        let _ = std::io::Write::write_all(&mut input, script.as_bytes());
    });
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(writer.stdout.take().unwrap()));
    let mut committed: Vec<u64> = Vec::new();
    for line in lines.by_ref() {
        committed.push(
            line.unwrap()
                .trim_start_matches("committed ")
                .parse()
                .unwrap(),
        );
        if committed.len() == 500 {
            break;
        }
    }
    serving.kill_9();
    for line in lines {
        committed.push(
            line.unwrap()
                .trim_start_matches("committed ")
                .parse()
                .unwrap(),
        );
    }
    let status = writer.wait().unwrap();
    feeder.join().unwrap();
    assert!(
        !status.success() && committed.len() < 20_000,
        "the writer saw the service go ({} commits)",
        committed.len()
    );
    let mut serving = Service::start(&rig, &[]);
    serving.wait_for_log("cleaned up the dead mount");
    let db = serving.path("DATA/sq/wal.db");
    let present: std::collections::BTreeSet<u64> =
        sqlite(&db, "PRAGMA integrity_check;\nSELECT id FROM c;\n")
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.parse().unwrap())
            .collect();
    assert_eq!(
        sqlite(&db, "PRAGMA integrity_check;\n").unwrap(),
        "ok",
        "after the crash"
    );
    let lost: Vec<&u64> = committed.iter().filter(|i| !present.contains(i)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} commits lost after kill -9, first {:?}",
        lost.len(),
        committed.len(),
        &lost[..lost.len().min(5)]
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

/// fio with `verify=crc32c` and `verify_backlog` on a file on the mount, at
/// queue depth 16 through io_uring and O_DIRECT, while a disk of the
/// normal-redundancy group fails for real under it (its ext4 shut down:
/// every I/O on its open descriptor fails with EIO): no verify error and no
/// I/O error reaches fio. Then the disk comes back (after the service:
/// bringing a disk online through the running service is the control
/// socket's) and its copies are resynced: the group checks clean.
#[test]
fn fio_verify_through_the_mount_sees_no_error_while_a_disk_fails() {
    if !fuse_here() || !fio_here() {
        return;
    }
    let rig = Rig::discovering(|dir| format!("{0}/d*.img,{0}/dying/*.img", dir.display()));
    let fs = match SmallFs::mount(rig.dir.path(), "dying", 512 * MIB) {
        Ok(fs) => fs,
        Err(why) => {
            prerequisite::missing(&why);
            return;
        }
    };
    let here = rig.path("");
    group_on(&rig, [&here, &here, &fs.mnt, &here], &["--au-size", "1M"]);
    let serving = Service::start(&rig, &[]);
    let file = serving.path("DATA/fio.dat");
    // A fixed run time (the workload's length, not a synchronisation): the
    // disk dies while fio writes and verifies.
    let mut fio = FioVerify::start(&file, &["--size=48M", "--time_based", "--runtime=8s"]);
    // fio's own progress says its I/O is under way: then the disk dies.
    fio.progress(1);
    fs.shut_down();
    fio.finish();
    let disks_json = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    assert!(
        disks_json.to_string().contains("OFFLINE"),
        "the failed disk is out: {disks_json}"
    );
    // The disk comes back while the service runs: the service let go of
    // its descriptors as it went OFFLINE, so `online` finds the disk again
    // as SIGHUP does, opens it anew, and resyncs it.
    fs.revive();
    let back = rig
        .cairn(&["group", "online", "DATA", "D2", "--wait", "--json"])
        .ok()
        .json();
    assert!(back["resync"]["aus_copied"].as_u64().unwrap() > 0, "{back}");
    assert!(
        back["disks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "ONLINE"),
        "{back}"
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("disk D2: OFFLINE -> SYNCING: brought back")),
        "{log}"
    );
    rig.check_clean("DATA");
}

/// fio writing 8 KiB random blocks with `verify=crc32c` and
/// `verify_backlog` through the mount (io_uring, O_DIRECT, QD16), its
/// progress read as it goes.
/// fio, which scripts/install-deps installs.
fn fio_here() -> bool {
    if std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_err()
    {
        prerequisite::missing("fio (scripts/install-deps installs it)");
        return false;
    }
    true
}

struct FioVerify {
    child: Child,
    out: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    seen: String,
}

impl FioVerify {
    fn start(file: &Path, extra: &[&str]) -> Self {
        let mut child = std::process::Command::new("fio")
            .args([
                "--name=through-cairn",
                &format!("--filename={}", file.display()),
                "--rw=randwrite",
                "--bs=8k",
                "--ioengine=io_uring",
                "--iodepth=16",
                "--direct=1",
                "--verify=crc32c",
                "--verify_backlog=256",
                "--verify_state_save=0",
                "--verify_fatal=1",
                "--do_verify=1",
                "--eta=always",
                "--eta-newline=1",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
        Self {
            child,
            out,
            seen: String::new(),
        }
    }

    /// Wait for `n` more progress reports (its I/O under way: writing, or
    /// verifying what it wrote; several may share a line).
    fn progress(&mut self, n: usize) {
        let mut left = n;
        for line in self.out.by_ref() {
            let line = line.unwrap();
            self.seen.push_str(&line);
            self.seen.push('\n');
            left = left.saturating_sub(line.matches(" IOPS][eta").count());
            if left == 0 {
                return;
            }
        }
        panic!("fio ended early: {}", self.seen);
    }

    /// Its end: exit 0, no verify error, no I/O error.
    fn finish(mut self) {
        for line in self.out.by_ref() {
            self.seen.push_str(&line.unwrap());
            self.seen.push('\n');
        }
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
        let seen = &self.seen;
        assert!(
            status.success() && !err.contains("verify") && !err.contains("error"),
            "fio: {status}\n{err}\n{seen}"
        );
        assert!(seen.contains("err= 0"), "{seen}");
    }
}

/// Flushes each loop device completed (`/sys/block/loopN/stat`, field 15).
fn flushes(devices: &[cairn_io::test_support::loop_device::LoopDevice]) -> Vec<u64> {
    devices
        .iter()
        .map(|d| {
            let stat = std::fs::read_to_string(format!("/sys/block/{}/stat", d.name())).unwrap();
            stat.split_whitespace().nth(15).unwrap().parse().unwrap()
        })
        .collect()
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

/// CLI commands that give the same output (text or JSON) and exit status
/// whether `cairn serve` holds the group or not.
const SAME_THROUGH_THE_SOCKET: &[&[&str]] = &[
    &["ls", "+DATA/"],
    &["ls", "+DATA/orcl", "--json"],
    &["du", "+DATA/"],
    &["du", "+DATA/orcl", "--json"],
    &["group", "list"],
    &["group", "list", "--json"],
    &["group", "disks", "DATA"],
    &["group", "disks", "DATA", "--json"],
    &["group", "check", "DATA"],
    &["group", "check", "DATA", "--json"],
    &["group", "get", "DATA"],
    &["group", "get", "DATA", "disk_repair_time", "--json"],
    &["group", "ops", "DATA"],
];

/// One request line sent raw to the control socket: the replies.
fn raw_request(socket: &Path, line: &[u8]) -> String {
    use std::io::Write;
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.write_all(line).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_cli_reaches_a_served_group_through_the_socket_with_the_same_output() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let data = random_file(&rig.path("data.bin"), 3 * MIB + 100, 21);
    rig.cairn(&["mkdir", "+DATA/orcl"]).ok();
    rig.cairn(&["cp", data.to_str().unwrap(), "+DATA/orcl/users01.dbf"])
        .ok();
    let before: Vec<Run> = SAME_THROUGH_THE_SOCKET
        .iter()
        .map(|args| rig.cairn(args))
        .collect();
    let missing = rig.cairn(&["rm", "+DATA/orcl/nothing.dbf"]);
    assert_eq!(missing.code, 1, "{missing:?}");

    let mut serving = Service::start(&rig, &[]);
    let socket = PathBuf::from(&rig.run_dir).join("cairn.sock");
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let meta = std::fs::metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    // The same output, text and JSON, and the same exit status: the
    // service carried each out (its log names every one).
    for (args, local) in SAME_THROUGH_THE_SOCKET.iter().zip(&before) {
        let served = rig.cairn(args);
        assert_eq!(
            (served.code, &served.stdout),
            (local.code, &local.stdout),
            "cairn {}: {served:?}",
            args.join(" ")
        );
        // The service logs each request by its command's name.
        let name = match args {
            ["group", sub, ..] => format!("group {sub}"),
            [first, ..] => first.to_string(),
            [] => String::new(),
        };
        serving.wait_for_log(&format!("cairn {name}: "));
    }
    // Another discovery string: carried out by the service only when it
    // reaches the very group the service holds.
    let elsewhere = rig.cairn(&["group", "disks", "DATA", "--discover", "/nonexistent/*.img"]);
    assert_eq!(elsewhere.code, 1, "{elsewhere:?}");
    assert!(
        elsewhere.stderr.contains("no disk group DATA"),
        "{elsewhere:?}"
    );
    let same = format!("{}/d*.img", rig.dir.path().display());
    let reached = rig
        .cairn(&["group", "disks", "DATA", "--discover", &same])
        .ok();
    assert_eq!(reached.stdout, before[6].stdout);
    let gone = rig.cairn(&["rm", "+DATA/orcl/nothing.dbf"]);
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.contains("does not exist"), "{gone:?}");
    // Changes through the socket are the file system's at once.
    rig.cairn(&["mkdir", "-p", "+DATA/arch/1"]).ok();
    assert!(serving.path("DATA/arch/1").is_dir());
    rig.cairn(&["mkalias", "+DATA/orcl/users01.dbf", "+DATA/users.dbf"])
        .ok();
    let through_alias = std::fs::read(serving.path("DATA/users.dbf")).unwrap();
    let want = std::fs::read(&data).unwrap();
    assert!(
        through_alias == want,
        "the alias reads {} bytes, the file has {}",
        through_alias.len(),
        want.len()
    );
    // A file removed by `cairn rm` while it is open stays readable through
    // its descriptor, as with an unlink through the mount.
    let mut open = std::fs::File::open(serving.path("DATA/orcl/users01.dbf")).unwrap();
    rig.cairn(&["rm", "+DATA/orcl/users01.dbf"]).ok();
    assert!(!rig
        .cairn(&["ls", "+DATA/"])
        .ok()
        .stdout
        .contains("users.dbf"));
    // The kernel was told: its cache of the name does not outlive it (an
    // open of the name now would otherwise find the removed file).
    assert!(!serving.path("DATA/orcl/users01.dbf").exists());
    let mut held = Vec::new();
    open.read_to_end(&mut held).unwrap();
    assert!(held == std::fs::read(&data).unwrap(), "read after rm");
    drop(open);

    // Bad requests get an error reply, and the service lives on.
    let replies = raw_request(&socket, b"{\"protocol\":2,\"discovery\":x}\n");
    assert!(
        replies.contains("\"status\":2") && replies.contains("at byte 27"),
        "{replies}"
    );
    let replies = raw_request(&socket, &vec![b'{'; 70_000]);
    assert!(replies.contains("longer than 65536 bytes"), "{replies}");
    let replies = raw_request(
        &socket,
        b"{\"protocol\":9,\"discovery\":\"\",\"request\":{\"command\":\"status\"}}\n",
    );
    assert!(replies.contains("protocol 9"), "{replies}");
    // The command line of protocol 1 is not taken, however it is put.
    let replies = raw_request(
        &socket,
        b"{\"protocol\":1,\"argv\":[\"group\",\"disks\",\"DATA\"],\"discovery\":\"\"}\n",
    );
    assert!(replies.contains("protocol 1"), "{replies}");
    let replies = raw_request(
        &socket,
        b"{\"protocol\":2,\"discovery\":\"\",\"request\":{\"command\":\"group_disks\",\"group\":\"DATA\"},\"argv\":[\"group\",\"disks\",\"DATA\"]}\n",
    );
    assert!(replies.contains("unknown field `argv`"), "{replies}");
    let replies = raw_request(
        &socket,
        b"{\"protocol\":2,\"discovery\":\"\",\"request\":{\"command\":\"group_disks\",\"group\":\"NOSUCH\"}}\n",
    );
    assert_eq!(replies.trim(), "\"not_held\"");
    assert_eq!(rig.cairn(&["group", "disks", "DATA"]).ok().code, 0);

    // Only root, the service's user and its --socket-group: another user
    // who reaches the socket is refused by its credentials.
    for dir in [rig.dir.path(), Path::new(&rig.run_dir)] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    use std::os::unix::process::CommandExt;
    let nobody = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", rig.run_dir.as_str())])
        .args(["group", "disks", "DATA"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let nobody = Run::from(nobody);
    assert_eq!(nobody.code, 1, "{nobody:?}");
    assert!(
        nobody.stderr.contains("user 65534 may not use"),
        "{nobody:?}"
    );

    // A second service on the same socket is refused, naming the first.
    let pid = serving.pid();
    let other = rig.path("other");
    std::fs::create_dir_all(&other).unwrap();
    let second = rig.cairn(&["serve", "--mountpoint", other.to_str().unwrap()]);
    assert_eq!(second.code, 1, "{second:?}");
    assert!(
        second.stderr.contains(&format!("process {pid}")),
        "{second:?}"
    );
    // `cp` in through the socket: the CLI hands over the file it opened
    // (or its standard input); the name appears with every byte, and the
    // file's length in bytes, readable through the mount at once.
    let odd = random_file(&rig.path("odd.bin"), MIB + 777, 22);
    rig.cairn(&["cp", odd.to_str().unwrap(), "+DATA/arch/"])
        .ok();
    serving.wait_for_log("cairn cp");
    assert!(
        std::fs::read(serving.path("DATA/arch/odd.bin")).unwrap() == std::fs::read(&odd).unwrap()
    );
    let piped = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", rig.run_dir.as_str())])
        .args(["cp", "-", "+DATA/arch/piped.dat", "--max-size", "100000"])
        .stdin(std::fs::File::open(&odd).unwrap())
        .output()
        .unwrap();
    let piped = Run::from(piped).ok();
    assert!(piped.stderr.contains("stopped at --max-size"), "{piped:?}");
    assert!(
        std::fs::read(serving.path("DATA/arch/piped.dat")).unwrap()[..]
            == std::fs::read(&odd).unwrap()[..100_000]
    );
    let taken = rig.cairn(&["cp", odd.to_str().unwrap(), "+DATA/arch/odd.bin"]);
    assert_eq!(taken.code, 1, "{taken:?}");
    assert!(taken.stderr.contains("exists"), "{taken:?}");
    // `cp` out: the service says where its file system serves the file;
    // the CLI reads it there and writes the destination as it always does.
    let out = rig.path("out.bin");
    rig.cairn(&["cp", "+DATA/arch/odd.bin", out.to_str().unwrap()])
        .ok();
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&odd).unwrap());
    let absent = rig.cairn(&[
        "cp",
        "+DATA/arch/none.bin",
        rig.path("none").to_str().unwrap(),
    ]);
    assert_eq!(absent.code, 1, "{absent:?}");
    assert!(!rig.path("none").exists());
    // Between groups: read through the mount, copied in by the service.
    rig.cairn(&["cp", "+DATA/arch/odd.bin", "+DATA/arch/copy.bin"])
        .ok();
    assert!(
        std::fs::read(serving.path("DATA/arch/copy.bin")).unwrap() == std::fs::read(&odd).unwrap()
    );

    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!socket.exists(), "the socket goes with the service");
    rig.check_clean("DATA");
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
fn fio_verify_sees_no_error_while_a_disk_goes_offline_and_comes_back_through_the_socket() {
    if !fuse_here() || !fio_here() {
        return;
    }
    let rig = Rig::new();
    let here = rig.path("");
    group_on(&rig, [&here, &here, &here, &here], &["--au-size", "1M"]);
    let serving = Service::start(&rig, &[]);
    let file = serving.path("DATA/fio.dat");
    // A fixed run time (the workload's length, not a synchronisation):
    // the disk leaves and comes back while fio writes and verifies.
    let mut fio = FioVerify::start(&file, &["--size=32M", "--time_based", "--runtime=10s"]);
    fio.progress(1);
    rig.cairn(&["group", "offline", "DATA", "D2"]).ok();
    fio.progress(2);
    let back = rig
        .cairn(&["group", "online", "DATA", "D2", "--wait", "--json"])
        .ok()
        .json();
    assert!(
        back["resync"]["aus_copied"].as_u64().unwrap() > 0,
        "what D2 missed is copied back: {back}"
    );
    assert!(
        back["disks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "ONLINE"),
        "{back}"
    );
    fio.finish();
    // The service checks its group clean while serving, and after.
    let check = rig.cairn(&["group", "check", "DATA"]).ok();
    assert!(check.stdout.contains("clean"), "{check:?}");
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

/// Issue 34 items 6 and 7: through the socket a member of its group is
/// checked by its own credentials, as the mount checks it — a root-owned
/// 0755 directory and 0644 file it may only read, a 0600 file it may not
/// alias — and it gives no administrative command; a user the socket's
/// mode keeps out is told "permission denied", not that no service
/// answers.
#[test]
fn a_socket_group_member_is_checked_as_the_mount_checks_it() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    // Other users may pass through to the socket and the sources, no more.
    for dir in [rig.dir.path(), Path::new(&rig.run_dir)] {
        mode(dir, 0o711);
    }
    let serving = Service::start(&rig, &["--socket-group", "nogroup"]);
    let socket = PathBuf::from(&rig.run_dir).join("cairn.sock");
    std::fs::create_dir(serving.path("DATA/root")).unwrap();
    mode(&serving.path("DATA/root"), 0o755);
    std::fs::write(serving.path("DATA/root/kept.dbf"), b"root's").unwrap();
    mode(&serving.path("DATA/root/kept.dbf"), 0o644);
    std::fs::write(serving.path("DATA/root/secret.dbf"), b"root only").unwrap();
    mode(&serving.path("DATA/root/secret.dbf"), 0o600);
    std::fs::create_dir(serving.path("DATA/shared")).unwrap();
    mode(&serving.path("DATA/shared"), 0o777);
    let source = rig.path("src.bin");
    std::fs::write(&source, b"nobody's bytes").unwrap();
    mode(&source, 0o644);
    let as_user = |uid: u32, gid: u32, args: &[&str]| {
        use std::os::unix::process::CommandExt;
        let out = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", rig.run_dir.as_str())])
            .args(args)
            .uid(uid)
            .gid(gid)
            .output()
            .unwrap();
        Run::from(out)
    };
    let member = |args: &[&str]| as_user(65534, 65534, args);
    let refused = |run: Run, what: &str| {
        assert_eq!(run.code, 1, "{what}: {run:?}");
        assert!(run.stderr.contains("permission denied"), "{what}: {run:?}");
        assert_eq!(run.stderr.lines().count(), 1, "{what}: {run:?}");
    };
    // What the member may do: list, read, and change a directory it may
    // write.
    let listed = member(&["ls", "+DATA/root"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.stdout.contains("kept.dbf"), "{listed:?}");
    assert_eq!(member(&["mkdir", "+DATA/shared/mine"]).code, 0);
    let copied = member(&["cp", source.to_str().unwrap(), "+DATA/shared/mine/"]);
    assert_eq!(copied.code, 0, "{copied:?}");
    assert_eq!(
        std::fs::read(serving.path("DATA/shared/mine/src.bin")).unwrap(),
        b"nobody's bytes"
    );
    assert_eq!(member(&["rm", "+DATA/shared/mine/src.bin"]).code, 0);
    // What the mount would refuse it, the socket refuses.
    refused(
        member(&["rm", "+DATA/root/kept.dbf"]),
        "rm in a 0755 root directory",
    );
    refused(
        member(&["cp", source.to_str().unwrap(), "+DATA/root/"]),
        "cp into a 0755 root directory",
    );
    refused(
        member(&["mkdir", "+DATA/root/sub"]),
        "mkdir in a 0755 root directory",
    );
    refused(
        member(&["mkalias", "+DATA/root/secret.dbf", "+DATA/shared/alias"]),
        "mkalias of a 0600 file it does not own",
    );
    refused(
        member(&[
            "cp",
            "+DATA/root/secret.dbf",
            rig.path("out.bin").to_str().unwrap(),
        ]),
        "cp out of a 0600 file",
    );
    // Administrative commands need root, the service's user or
    // --admin-group.
    refused(member(&["group", "offline", "DATA", "D3"]), "group offline");
    refused(
        member(&["group", "set", "DATA", "disk_repair_time=1h"]),
        "group set",
    );
    refused(member(&["group", "scrub", "DATA"]), "group scrub");
    assert_eq!(
        std::fs::read(serving.path("DATA/root/kept.dbf")).unwrap(),
        b"root's"
    );
    assert!(!serving.path("DATA/root/sub").exists());
    assert!(!serving.path("DATA/root/src.bin").exists());
    assert!(!serving.path("DATA/shared/alias").exists());
    assert!(!rig.path("out.bin").exists());
    assert_eq!(disk_state(&rig, "D3"), "ONLINE");
    // A user outside the socket's group cannot open it (mode 0660).
    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    let outsider = as_user(4242, 4242, &["ls", "+DATA"]);
    refused(outsider, "a user the socket's mode keeps out");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
}

/// Issue 34 item 17: `disk_repair_time` runs while the group is served.
/// D3 taken offline under a 3 s timer is dropped by force by the service
/// itself when it runs out (the log says so), its copies are rebuilt from
/// the mirrors in the background, and the file then reads back from D3's
/// failure group partner alone. A sub-second timer is refused, not
/// rounded to 0.
#[test]
fn a_served_groups_offline_disk_is_dropped_and_rebuilt_when_its_repair_time_runs_out() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let f = random_file(&rig.path("f.bin"), 3 * MIB + 512, 17);
    rig.cairn(&["cp", f.to_str().unwrap(), "+DATA/f.dbf"]).ok();
    rig.cairn(&["group", "set", "DATA", "disk_repair_time=0.3s"])
        .refused("under a second");
    rig.cairn(&["group", "set", "DATA", "disk_repair_time=3s"])
        .ok();
    let mut serving = Service::start(&rig, &[]);
    rig.cairn(&["group", "offline", "DATA", "D3"]).ok();
    serving
        .wait_for_log("disk D3: OFFLINE -> DROPPING: its repair time (disk_repair_time) ran out");
    serving.wait_for_log("disk D3: DROPPING -> DROPPED: dropped by force");
    serving.wait_for_log("rebalance done");
    assert_eq!(disk_state(&rig, "D3"), "GONE");
    rig.cairn(&["group", "offline", "DATA", "D0", "D1"]).ok();
    let out = rig.path("back.bin");
    rig.cairn(&["cp", "+DATA/f.dbf", out.to_str().unwrap()])
        .ok();
    assert_eq!(digest(&out), digest(&f), "read from D2 alone");
    rig.cairn(&["group", "online", "DATA", "D0", "D1", "--wait"])
        .ok();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    let check = rig.cairn(&["group", "check", "DATA"]);
    assert_eq!(check.code, 0, "{check:?}");
}

#[test]
fn serve_leaves_a_paused_rebalance_paused_and_resumes_it_when_told() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let data = random_file(&rig.path("data.bin"), 24 * MIB, 31);
    rig.cairn(&["cp", data.to_str().unwrap(), "+DATA/big.dbf"])
        .ok();
    // A disk joins with the rebalance left paused: the group has moves
    // pending.
    let new = sparse(&rig.path("d4.img"), 256 * MIB);
    rig.cairn(&["disk", "label", "D4", new.to_str().unwrap()])
        .ok();
    rig.cairn(&[
        "group",
        "alter",
        "DATA",
        "--add",
        &format!("{}=B", new.display()),
        "--power",
        "0",
    ])
    .ok();
    let used = |rig: &Rig| -> u64 {
        let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
        disks
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["label"] == "D4")
            .map(|d| d["total_aus"].as_u64().unwrap() - d["free_aus"].as_u64().unwrap())
            .unwrap()
    };
    assert_eq!(used(&rig), 0, "nothing moved yet");
    // Paused (power 0) is a decision: the service says so, and leaves it.
    let mut serving = Service::start(&rig, &[]);
    serving.wait_for_log("a rebalance is pending, paused");
    assert_eq!(used(&rig), 0, "still paused");
    // Resumed through the socket at a power, it fills the new disk.
    rig.cairn(&["group", "rebalance", "DATA", "--power", "4", "--wait"])
        .ok();
    assert!(used(&rig) > 0, "the rebalance moved data onto D4");
    assert!(std::fs::read(serving.path("DATA/big.dbf")).unwrap() == std::fs::read(&data).unwrap());
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

#[test]
fn a_served_group_scrubs_clean_under_writes_and_repairs_a_rotten_copy() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let src = random_file(&rig.path("src.bin"), 8 * MIB, 41);
    rig.cairn(&["cp", src.to_str().unwrap(), "+DATA/still.dbf"])
        .ok();
    let serving = Service::start(&rig, &[]);
    // A writer through the mount (O_DIRECT, 64 KiB blocks, each pass a new
    // pattern) while the scrubs run: none of its writes may look like a
    // disagreement, nor be undone by a repair.
    let busy = serving.path("DATA/busy.dbf");
    std::fs::write(&busy, vec![0u8; 4 * MIB as usize]).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (busy, stop) = (busy.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::os::unix::fs::{FileExt, OpenOptionsExt};
            let f = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(&busy)
                .unwrap();
            let mut block = cairn_io::AlignedBuf::zeroed(64 << 10);
            let mut model = vec![0u8; 64];
            let mut pass = 0u8;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                pass = pass.wrapping_add(1).max(1);
                for (i, m) in model.iter_mut().enumerate() {
                    block.fill(pass);
                    f.write_all_at(&block, i as u64 * (64 << 10)).unwrap();
                    *m = pass;
                }
            }
            model
        })
    };
    for args in [
        &["group", "scrub", "DATA", "--wait", "--json"][..],
        &["group", "scrub", "DATA", "--wait", "--repair", "--json"][..],
    ] {
        let run = rig.cairn(args).ok().json();
        assert_eq!(run["scrub"]["problems"], serde_json::json!([]), "{run:#}");
        assert_eq!(run["scrub"]["bytes_rewritten"], 0, "{run:#}");
        assert!(
            run["scrub"]["bytes_read"].as_u64().unwrap() >= 2 * 8 * MIB,
            "{run:#}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let model = writer.join().unwrap();
    let now = std::fs::read(&busy).unwrap();
    for (i, m) in model.iter().enumerate() {
        let at = i * (64 << 10);
        assert!(
            now[at..at + (64 << 10)].iter().all(|b| b == m),
            "block {i} holds what was last written"
        );
    }

    // One copy of a block of still.dbf rots on its disk.
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let at = 2 * MIB as usize + 4096;
    let source = std::fs::read(&src).unwrap();
    let block = &source[at..at + 4096];
    let mut hits: Vec<(usize, u64)> = Vec::new();
    for i in 0..4 {
        let bytes = std::fs::read(rig.path(&format!("d{i}.img"))).unwrap();
        for (k, b) in bytes.chunks(4096).enumerate() {
            if b == block {
                hits.push((i, k as u64 * 4096));
            }
        }
    }
    assert_eq!(hits.len(), 2, "two copies of the block: {hits:?}");
    assert_ne!(
        hits[0].0 / 2,
        hits[1].0 / 2,
        "copies in failure groups A and B"
    );
    let (hit, good_copy) = (hits[1], hits[0]);
    let device = std::fs::OpenOptions::new()
        .write(true)
        .open(rig.path(&format!("d{}.img", hit.0)))
        .unwrap();
    device.write_all_at(&[0x5A; 4096], hit.1).unwrap();
    device.sync_all().unwrap();
    // A copy as it lies on its device, around the page cache.
    let raw = |(i, offset): (usize, u64)| {
        let device = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(rig.path(&format!("d{i}.img")))
            .unwrap();
        let mut buf = cairn_io::AlignedBuf::zeroed(4096);
        device.read_exact_at(&mut buf, offset).unwrap();
        buf.to_vec()
    };
    // Which disks hold the two copies: the one the test rotted, and the
    // good one (known from the source file, not from what scrub says).
    let rows = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let label_of = |i: usize| {
        let path = rig.path(&format!("d{i}.img"));
        rows.as_array()
            .unwrap()
            .iter()
            .find(|d| d["path"].as_str() == Some(path.to_str().unwrap()))
            .unwrap_or_else(|| panic!("{} in {rows:#}", path.display()))["label"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (rotten, good) = (label_of(hit.0), label_of(good_copy.0));
    let found = rig.cairn(&["group", "scrub", "DATA", "--wait", "--json"]);
    assert_eq!(found.code, 1, "{found:?}");
    let range = format!("bytes {at}..{}", at + 4096);
    // Two copies that differ: both are named (nothing says which is
    // damaged).
    let named = [
        format!("{range} (4 KiB) copies on {rotten}, {good}"),
        format!("{range} (4 KiB) copies on {good}, {rotten}"),
    ];
    assert!(
        named.iter().any(|n| found.stdout.contains(n)) && found.stdout.contains("still.dbf"),
        "both copies are named ({named:?}): {found:?}"
    );
    // Two copies that differ: a repair does not guess between them.
    let unsure = rig.cairn(&["group", "scrub", "DATA", "--wait", "--repair", "--json"]);
    assert_eq!(unsure.code, 1, "{unsure:?}");
    assert_eq!(unsure.json()["scrub"]["bytes_rewritten"], 0, "{unsure:?}");
    assert_eq!(
        raw(hit),
        vec![0x5A; 4096],
        "nothing rewritten without a choice"
    );
    assert_eq!(raw(good_copy), block, "nothing rewritten without a choice");
    let repaired = rig
        .cairn(&[
            "group", "scrub", "DATA", "--wait", "--repair", "--prefer", &good, "--json",
        ])
        .ok()
        .json();
    assert_eq!(repaired["scrub"]["bytes_rewritten"], 4096, "{repaired:#}");
    let again = rig
        .cairn(&["group", "scrub", "DATA", "--wait", "--json"])
        .ok()
        .json();
    assert_eq!(
        again["scrub"]["problems"],
        serde_json::json!([]),
        "{again:#}"
    );
    // The repair wrote the preferred copy's bytes over the damaged one and
    // left the preferred one alone: on the devices, both are the block.
    assert_eq!(raw(hit), block, "the repaired copy holds the block");
    assert_eq!(raw(good_copy), block, "the preferred copy is untouched");
    // The repaired copy alone serves the file: the good copy's disk goes
    // offline, and the file reads through the mount as the source.
    rig.cairn(&["group", "offline", "DATA", &good]).ok();
    let read = std::fs::read(serving.path("DATA/still.dbf")).unwrap();
    assert!(read == source, "the repaired copy reads as the source");
    rig.cairn(&["group", "online", "DATA", &good, "--wait"])
        .ok();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

#[test]
fn metrics_and_status_count_what_the_file_system_served() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let none = rig.cairn(&["status"]);
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.contains("no Cairn service answers"), "{none:?}");
    let mut serving = Service::start(&rig, &["--metrics", "127.0.0.1:0"]);
    let addr = serving.metrics_addr();
    // I/O through the mount: 3 writes of 64 KiB, an fsync, a read.
    {
        use std::io::Write;
        let mut f = std::fs::File::create(serving.path("DATA/m.dbf")).unwrap();
        for _ in 0..3 {
            f.write_all(&[7u8; 64 << 10]).unwrap();
        }
        f.sync_all().unwrap();
    }
    assert_eq!(
        std::fs::read(serving.path("DATA/m.dbf")).unwrap().len(),
        3 << 16
    );
    let (status, body) = http_get(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(status.contains("200"), "{status}");
    let value = |name: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("{name} in {body}"))
    };
    assert!(value("cairn_fs_requests_total{group=\"DATA\",op=\"write\"}") >= 1.0);
    assert!(value("cairn_fs_bytes_total{group=\"DATA\",op=\"write\"}") >= f64::from(3 << 16));
    assert!(value("cairn_fs_requests_total{group=\"DATA\",op=\"fsync\"}") >= 1.0);
    assert!(value("cairn_fs_bytes_total{group=\"DATA\",op=\"read\"}") >= f64::from(3 << 16));
    assert_eq!(
        value("cairn_fs_errors_total{group=\"DATA\",op=\"write\"}"),
        0.0
    );
    let writes = value("cairn_fs_requests_total{group=\"DATA\",op=\"write\"}");
    assert_eq!(
        value("cairn_fs_latency_seconds_bucket{group=\"DATA\",op=\"write\",le=\"+Inf\"}"),
        writes
    );
    for d in 0..4 {
        assert!(
            body.contains(&format!("cairn_disk_state{{group=\"DATA\",disk=\"D{d}\"")),
            "{body}"
        );
    }
    // Per disk, the data plane's I/O: normal redundancy writes each byte on
    // two disks (one per failure group), so the disks' writes hold at least
    // twice the file's bytes; every disk was flushed by the fsync that had
    // something on it; the reads the file system served (above) came
    // from the disks.
    let disk_total = |what: &str, op: &str| -> f64 {
        (0..4)
            .map(|d| {
                value(&format!(
                    "cairn_disk_io_{what}_total{{group=\"DATA\",disk=\"D{d}\",op=\"{op}\"}}"
                ))
            })
            .sum()
    };
    assert!(
        disk_total("bytes", "write") >= f64::from(2 * (3 << 16)),
        "{body}"
    );
    assert!(disk_total("requests", "flush") >= 2.0, "{body}");
    assert!(disk_total("bytes", "read") >= f64::from(3 << 16), "{body}");
    assert_eq!(disk_total("errors", "write"), 0.0, "{body}");
    // Anything else: an answer, and the endpoint lives on.
    assert!(http_get(&addr, "GET /x HTTP/1.1\r\n\r\n").0.contains("404"));
    assert!(http_get(&addr, "\u{1}\u{2}garbage\r\n\r\n")
        .0
        .contains("400"));
    // `cairn status`: the same figures through the socket.
    let s = rig.cairn(&["status", "--json"]).ok().json();
    let g = &s["groups"][0];
    assert_eq!(g["name"], "DATA");
    assert!(g["writes"]["bytes"].as_u64().unwrap() >= 3 << 16, "{s:#}");
    assert_eq!(g["disks"].as_array().unwrap().len(), 4, "{s:#}");
    let written: u64 = g["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["io"]["writes"]["bytes"].as_u64().unwrap())
        .sum();
    assert!(written >= 2 * (3 << 16), "{s:#}");
    let text = rig.cairn(&["status"]).ok();
    assert!(text.stdout.contains("group DATA (NORMAL)"), "{text:?}");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn a_served_group_adds_and_drops_disks_under_fio_verify_and_lets_go_of_the_dropped() {
    if !fuse_here() || !fio_here() {
        return;
    }
    let rig = Rig::new();
    let here = rig.path("");
    group_on(&rig, [&here, &here, &here, &here], &["--au-size", "1M"]);
    let serving = Service::start(&rig, &[]);
    let pid = serving.pid();
    let file = serving.path("DATA/fio.dat");
    let mut fio = FioVerify::start(&file, &["--size=32M", "--time_based", "--runtime=8s"]);
    fio.progress(1);
    for i in [4, 5] {
        sparse(&here.join(format!("d{i}.img")), 256 * MIB);
    }
    // Paths relative to the client's working directory: the service
    // resolves them there, not in its own.
    let explained: Run = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", &rig.run_dir)])
        .current_dir(&here)
        .args([
            "group",
            "alter",
            "DATA",
            "--add",
            "d4.img=A",
            "--drop",
            "D0",
            "--explain",
        ])
        .output()
        .unwrap()
        .into();
    let explained = explained.ok();
    assert!(
        explained.stdout.contains("the change would move"),
        "{explained:?}"
    );
    // Explained only: nothing changed, and the new disk is not held.
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    assert_eq!(disks.as_array().map(Vec::len), Some(4), "{disks}");
    assert!(
        !open_files_under(pid, &here).contains(&here.join("d4.img")),
        "an explained disk is let go of"
    );
    let altered: Run = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", &rig.run_dir)])
        .current_dir(&here)
        .args([
            "group", "alter", "DATA", "--add", "d4.img=A", "--add", "d5.img=B", "--drop", "D0",
            "--drop", "D2", "--wait", "--json",
        ])
        .output()
        .unwrap()
        .into();
    let altered = altered.ok().json();
    let dropped: Vec<&str> = altered["rebalance"]["disks_dropped"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d.as_str())
        .collect();
    assert_eq!(dropped, ["D0", "D2"], "{altered}");
    assert!(
        altered["rebalance"]["aus_moved"].as_u64().unwrap_or(0) > 0
            || altered["rebalance"]["moves_done"].as_u64().unwrap_or(0) > 0,
        "data moved while fio ran: {altered}"
    );
    fio.progress(1);
    fio.finish();
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let mut labels: Vec<(String, String)> = disks
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["label"].as_str().unwrap().to_string(),
                d["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    labels.sort();
    assert_eq!(labels.len(), 4, "{disks}");
    assert!(labels.iter().all(|(_, s)| s == "ONLINE"), "{disks}");
    assert!(
        !labels.iter().any(|(l, _)| l == "D0" || l == "D2"),
        "{disks}"
    );
    for added in ["d4.img", "d5.img"] {
        let path = here.join(added).display().to_string();
        assert!(
            disks
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["path"].as_str() == Some(&path)),
            "an added disk is listed with its path: {disks}"
        );
    }
    let open = open_files_under(pid, &here);
    for gone in ["d0.img", "d2.img"] {
        assert!(
            !open.contains(&here.join(gone)),
            "the service still holds the dropped {gone}: {open:?}"
        );
    }
    assert!(open.contains(&here.join("d4.img")), "{open:?}");
    // The dropped disks are free while the service runs (no descriptor,
    // no registered file, no lock of theirs left in it): another group
    // takes one.
    rig.cairn(&[
        "group",
        "create",
        "SPARE",
        "--redundancy",
        "external",
        "--disk",
        &rig.arg("d0.img"),
    ])
    .ok();
    let check = rig.cairn(&["group", "check", "DATA"]).ok();
    assert!(check.stdout.contains("clean"), "{check:?}");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

#[test]
fn a_served_group_replaces_an_offline_disk_and_refuses_what_it_must() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    let here = rig.path("");
    group_on(&rig, [&here, &here, &here, &here], &["--au-size", "1M"]);
    let serving = Service::start(&rig, &[]);
    let source = random_file(&rig.path("source.bin"), 24 * MIB, 7);
    rig.cairn(&["cp", source.to_str().unwrap(), "+DATA/a.bin"])
        .ok();
    let new = sparse(&here.join("d4.img"), 256 * MIB);
    let new = new.to_str().unwrap();
    // Refused, one line each, and nothing changed.
    rig.cairn(&["group", "alter", "DATA"])
        .refused("name disks to --add");
    rig.cairn(&["group", "replace", "DATA", "D3", "--with", new])
        .refused("only an OFFLINE disk is replaced");
    rig.cairn(&["group", "offline", "DATA", "D3"]).ok();
    rig.cairn(&["group", "offline", "DATA", "D2"]).ok();
    rig.cairn(&["group", "replace", "DATA", "D3", "--with", new])
        .refused("disk D2 is OFFLINE too");
    assert!(
        !open_files_under(serving.pid(), &here).contains(&here.join("d4.img")),
        "a refused disk is let go of"
    );
    rig.cairn(&["group", "online", "DATA", "D2", "--wait"]).ok();
    let replaced = rig
        .cairn(&[
            "group", "replace", "DATA", "D3", "--with", new, "--wait", "--json",
        ])
        .ok()
        .json();
    assert_eq!(
        replaced["rebalance"]["disks_dropped"][0], "D3",
        "{replaced}"
    );
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let joined = disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"].as_str() == Some(new))
        .unwrap_or_else(|| panic!("{disks}"));
    assert_eq!(joined["failgroup"], "B", "{disks}");
    assert_eq!(joined["state"], "ONLINE", "{disks}");
    // Every byte back, through the mount, with D3 gone for good.
    assert!(
        std::fs::read(serving.path("DATA/a.bin")).unwrap() == std::fs::read(&source).unwrap(),
        "a.bin reads back whole through the mount"
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    // And from failure group B alone (D2 and the new disk): with A's disks
    // there, a read takes A's copy wherever it is the primary, so a bad
    // rebuild would hide behind it.
    let out = rig.path("a.out");
    cairn_with(
        &format!("{},{new}", rig.arg("d2.img")),
        &[("CAIRN_RUN_DIR", &rig.run_dir)],
        &["cp", "+DATA/a.bin", out.to_str().unwrap()],
    )
    .ok();
    assert!(
        std::fs::read(&out).unwrap() == std::fs::read(&source).unwrap(),
        "a.bin reads whole from failure group B alone, the rebuilt disk in it"
    );
    rig.check_clean("DATA");
}

#[test]
fn sighup_finds_a_disk_that_was_missing_at_start_and_online_brings_it_back() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    // A file with copies on every disk, then D3 out of discovery's reach
    // when the service starts.
    let before = random_file(&rig.path("before.bin"), 8 * MIB, 10);
    rig.cairn(&["cp", before.to_str().unwrap(), "+DATA/while-away.bin"])
        .ok();
    let away = rig.path("d3.away");
    std::fs::rename(rig.path("d3.img"), &away).unwrap();
    let mut serving = Service::start(&rig, &[]);
    serving.wait_for_log("disk D3: ONLINE -> OFFLINE: missing at mount");
    // Rewritten while D3 is away: its copies there go stale.
    let source = random_file(&rig.path("source.bin"), 8 * MIB, 11);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(serving.path("DATA/while-away.bin"))
            .unwrap();
        f.write_all(&std::fs::read(&source).unwrap()).unwrap();
        f.sync_all().unwrap();
    }
    // Looked for, not found: said so, naming discovery.
    rig.cairn(&["group", "online", "DATA", "D3"])
        .refused("disk D3 of group DATA cannot be brought back: discovery");
    // Back where discovery looks, then SIGHUP: the service attaches it.
    std::fs::rename(&away, rig.path("d3.img")).unwrap();
    serving.signal(libc::SIGHUP);
    serving.wait_for_log("disk found again and attached");
    let back = rig
        .cairn(&["group", "online", "DATA", "D3", "--wait", "--json"])
        .ok()
        .json();
    assert!(
        back["resync"]["aus_copied"].as_u64().unwrap() > 0,
        "what D3 missed is copied back: {back}"
    );
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let d3 = disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == "D3")
        .unwrap();
    assert_eq!(d3["state"], "ONLINE", "{disks}");
    assert_eq!(d3["path"], rig.arg("d3.img"), "{disks}");
    // A second SIGHUP finds nothing new, and the service goes on.
    serving.signal(libc::SIGHUP);
    serving.wait_for_log("SIGHUP: reading the discovery string again");
    assert_eq!(
        std::fs::read(serving.path("DATA/while-away.bin")).unwrap(),
        std::fs::read(&source).unwrap()
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(log.matches("disk found again").count(), 1, "{log}");
    rig.check_clean("DATA");
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

/// Volumes need loop devices (and mkfs.ext4 for a file system on one).
fn loop_here() -> bool {
    if let Some(why) = cairn_io::test_support::loop_device::unavailable_reason() {
        prerequisite::missing(&format!("loop devices: {why}"));
        return false;
    }
    if std::process::Command::new("mkfs.ext4")
        .arg("-V")
        .output()
        .is_err()
    {
        prerequisite::missing("mkfs.ext4 (e2fsprogs)");
        return false;
    }
    true
}

/// A volume's block device and its mount, let go of however the test ends
/// — the device only while it is still this test's (its backing file under
/// `owner`): once let go of, its number may be another test's.
struct VolumeGuard {
    device: String,
    mount: PathBuf,
    owner: PathBuf,
}

impl Drop for VolumeGuard {
    fn drop(&mut self) {
        if mounted(&self.mount) {
            let _ = umount(&self.mount, libc::MNT_DETACH);
        }
        // (Only if empty: a mount point the test made, never data.)
        let _ = std::fs::remove_dir(&self.mount);
        let backing = std::fs::read_to_string(format!(
            "/sys/block/{}/loop/backing_file",
            self.device.trim_start_matches("/dev/")
        ))
        .unwrap_or_default();
        let owner = std::fs::canonicalize(&self.owner).unwrap_or_else(|_| self.owner.clone());
        if Path::new(backing.trim_end()).starts_with(&owner) {
            let _ = std::process::Command::new("losetup")
                .args(["-d", &self.device])
                .status();
        }
    }
}

/// Issue 34 item 19: two volumes attached (not mounted), then a double
/// failure — every disk's file system shut down — stops the group while
/// one is written. `volume list` still lists both, and `volume detach`
/// lets go of one, by what the kernel says of their devices (the stopped
/// group answers nothing about its files); SIGTERM still stops the
/// service, detaching the other, and the mount goes.
#[test]
fn volumes_of_a_group_a_double_failure_stopped_are_listed_detached_and_let_go_at_sigterm() {
    if !fuse_here() || !loop_here() {
        return;
    }
    let rig = Rig::discovering(|dir| format!("{}/dying/*.img", dir.display()));
    let fs = match SmallFs::mount(rig.dir.path(), "dying", 1024 * MIB) {
        Ok(fs) => fs,
        Err(why) => {
            prerequisite::missing(&why);
            return;
        }
    };
    group_on(
        &rig,
        [&fs.mnt, &fs.mnt, &fs.mnt, &fs.mnt],
        &["--au-size", "1M"],
    );
    let serving = Service::start(&rig, &[]);
    let mut devices = Vec::new();
    let mut guards = Vec::new();
    for v in ["v1", "v2"] {
        let name = format!("+DATA/vol/{v}");
        rig.cairn(&["volume", "create", &name, "--size", "64M"])
            .ok();
        let device = rig
            .cairn(&["volume", "attach", &name])
            .ok()
            .stdout
            .trim()
            .to_string();
        guards.push(VolumeGuard {
            device: device.clone(),
            mount: rig.path(&format!("unused-{v}")),
            owner: rig.path(""),
        });
        devices.push(device);
    }
    fs.shut_down();
    // Written through the device: every copy's disk fails, the group stops.
    let dd = std::process::Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", devices[0]),
            "bs=1M",
            "count=16",
            "oflag=direct",
        ])
        .output()
        .unwrap();
    assert!(!dd.status.success(), "the write must fail: {dd:?}");
    let bound = |device: &str| {
        std::fs::read_to_string(format!(
            "/sys/block/{}/loop/backing_file",
            device.trim_start_matches("/dev/")
        ))
        .unwrap_or_default()
        .contains(rig.dir.path().file_name().unwrap().to_str().unwrap())
    };

    // Listed as the kernel knows them, with a line saying why.
    let listed = rig.cairn(&["volume", "list", "--json"]).ok();
    assert!(
        listed.stderr.contains("stopped"),
        "says the group stopped: {}",
        listed.stderr
    );
    let rows = listed.json();
    let rows = rows.as_array().expect("a list");
    for (v, device) in ["v1", "v2"].iter().zip(&devices) {
        let row = rows
            .iter()
            .find(|r| r["name"] == format!("+DATA/vol/{v}"))
            .unwrap_or_else(|| panic!("{v} listed: {rows:?}"));
        assert_eq!(row["device"], device.as_str(), "{row}");
        assert_eq!(row["state"], "ATTACHED", "{row}");
        assert_eq!(row["size_bytes"], 64 * MIB, "{row}");
    }
    // Detached on the stopped group.
    let out = rig.cairn(&["volume", "detach", "+DATA/vol/v1"]).ok();
    assert!(!bound(&devices[0]), "{} still bound: {out:?}", devices[0]);
    let rows = rig.cairn(&["volume", "list", "--json"]).ok().json();
    assert!(
        rows.as_array()
            .is_some_and(|r| r.len() == 1 && r[0]["name"] == "+DATA/vol/v2"),
        "{rows}"
    );

    // Bounded: a deaf service fails the test.
    let mountpoint = serving.mountpoint.clone();
    let (status, log) = serving.stop();
    eprintln!("serve exited {status} after SIGTERM:\n{log}");
    assert!(log.contains("volume detached for the stop"), "{log}");
    assert!(!bound(&devices[1]), "{} still bound", devices[1]);
    assert!(!mounted(&mountpoint), "the mount is gone");
    drop(guards);
}

#[test]
fn a_volume_carries_a_file_system_through_the_service() {
    if !fuse_here() || !loop_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    // No service: one line saying how to start one (a wrong name first).
    rig.cairn(&["volume", "list"]).refused("cairn serve");
    rig.cairn(&["volume", "create", "+DATA/vol/bad*name", "--size", "64M"])
        .refused("volume name +DATA/vol/bad*name");
    let serving = Service::start(&rig, &[]);
    let created = rig
        .cairn(&[
            "volume",
            "create",
            "+DATA/vol/v1",
            "--size",
            "64M",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(created["size_bytes"], 64 * MIB, "{created}");
    assert_eq!(created["redundancy"], "NORMAL", "{created}");
    rig.cairn(&["volume", "create", "+DATA/vol/v2", "--size", "1000"])
        .refused("whole number");
    rig.cairn(&["volume", "create", "+DATA/vol/bad*name", "--size", "64M"])
        .refused("'*'");
    rig.cairn(&["volume", "create", "+DATA/vol/v1", "--size", "64M"])
        .refused("exists");
    let plain = random_file(&rig.path("plain.bin"), MIB, 3);
    rig.cairn(&["cp", plain.to_str().unwrap(), "+DATA/plain.dbf"])
        .ok();
    rig.cairn(&["volume", "attach", "+DATA/plain.dbf"])
        .refused("not a volume");
    let device = rig
        .cairn(&["volume", "attach", "+DATA/vol/v1"])
        .ok()
        .stdout
        .trim()
        .to_string();
    assert!(device.starts_with("/dev/loop"), "{device}");
    let fs_dir = rig.path("fs");
    std::fs::create_dir_all(&fs_dir).unwrap();
    let guard = VolumeGuard {
        device: device.clone(),
        mount: fs_dir.clone(),
        owner: rig.path(""),
    };
    rig.cairn(&["volume", "attach", "+DATA/vol/v1"])
        .refused("attached already");
    // The same file by another spelling of its name, or another name: the
    // same volume.
    rig.cairn(&["volume", "attach", "+DATA/VOL/V1"])
        .refused("attached already");
    rig.cairn(&["mkalias", "+DATA/vol/v1", "+DATA/v1-alias"])
        .ok();
    rig.cairn(&["volume", "attach", "+DATA/v1-alias"])
        .refused("attached already");
    // Its file is not removed under its device.
    rig.cairn(&["rm", "+DATA/vol/v1"]).refused("volume detach");
    // A discard: the AUs it covers whole are unwritten again and punched
    // out of the member disks (sparse files: thin provisioning holds end
    // to end), the rest zeroed in place; the device reads zeros there.
    let au = rig.cairn(&["group", "list", "--json"]).ok().json()[0]["au_mb"]
        .as_u64()
        .unwrap()
        * MIB;
    let granularity: u64 = std::fs::read_to_string(format!(
        "/sys/block/{}/queue/discard_granularity",
        device.trim_start_matches("/dev/")
    ))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    assert_eq!(granularity, au, "the loop device discards whole AUs");
    let held = || -> u64 {
        use std::os::unix::fs::MetadataExt;
        (0..4)
            .map(|i| {
                std::fs::metadata(rig.path(&format!("d{i}.img")))
                    .unwrap()
                    .blocks()
                    * 512
            })
            .sum()
    };
    let before = held();
    let data = random_file(&rig.path("raw.bin"), 32 * MIB, 4);
    tool(
        "dd",
        &[
            &format!("if={}", data.display()),
            &format!("of={device}"),
            "bs=1M",
            "oflag=direct",
            "conv=fsync",
            "status=none",
        ],
    )
    .unwrap();
    let written = held();
    assert!(
        written >= before + 2 * 32 * MIB,
        "both copies: {before} -> {written}"
    );
    // 1 MiB past an AU boundary to 1 MiB short of one: whole AUs, and parts.
    tool("blkdiscard", &["-o", "1M", "-l", "30M", &device]).unwrap();
    let after = held();
    assert!(
        // The 2 MiB kept, on both copies; the journal and map blocks the
        // punch wrote.
        after <= before + 2 * 2 * MIB + MIB,
        "the 30 MiB discarded are given back on both copies: {before} -> {written} -> {after}"
    );
    let mut back = vec![0u8; 32 * MIB as usize];
    std::fs::File::open(&device)
        .unwrap()
        .read_exact(&mut back)
        .unwrap();
    let raw = std::fs::read(&data).unwrap();
    assert!(
        back[..MIB as usize] == raw[..MIB as usize],
        "the first MiB stays"
    );
    assert!(back[MIB as usize..31 * MIB as usize]
        .iter()
        .all(|b| *b == 0));
    assert!(
        back[31 * MIB as usize..] == raw[31 * MIB as usize..],
        "the last MiB stays"
    );
    let status = rig.cairn(&["status", "--json"]).ok().json();
    // (The block layer may split the range at the granularity.)
    assert!(
        status["groups"][0]["discards"]["count"].as_u64().unwrap() >= 1,
        "{status}"
    );
    assert!(
        status["groups"][0]["disks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["io"]["discards"]["count"].as_u64().unwrap() > 0),
        "{status}"
    );
    assert_eq!(status["volumes"][0]["discard_bytes"], 30 * MIB, "{status}");
    // A file system on it, a file written, read back after a remount.
    tool("mkfs.ext4", &["-q", "-F", &device]).unwrap();
    tool("mount", &[&device, fs_dir.to_str().unwrap()]).unwrap();
    let data = random_file(&rig.path("data.bin"), 16 * MIB, 5);
    std::fs::copy(&data, fs_dir.join("data.bin")).unwrap();
    tool("sync", &[]).unwrap();
    rig.cairn(&["volume", "detach", "+DATA/vol/v1"])
        .refused(&format!("mounted at {}", fs_dir.display()));
    let listed = rig.cairn(&["volume", "list", "--json"]).ok().json();
    assert_eq!(listed[0]["name"], "+DATA/vol/v1", "{listed}");
    assert_eq!(listed[0]["state"], "ATTACHED", "{listed}");
    assert_eq!(listed[0]["device"], device.as_str(), "{listed}");
    assert_eq!(umount(&fs_dir, 0), 0);
    tool("mount", &[&device, fs_dir.to_str().unwrap()]).unwrap();
    assert_eq!(
        std::fs::read(fs_dir.join("data.bin")).unwrap(),
        std::fs::read(&data).unwrap()
    );
    assert_eq!(umount(&fs_dir, 0), 0);
    // Grown online: the device follows.
    rig.cairn(&["volume", "resize", "+DATA/vol/v1", "--size", "32M"])
        .refused("only grows");
    rig.cairn(&["volume", "resize", "+DATA/vol/v1", "--size", "96M"])
        .ok();
    let sectors: u64 = std::fs::read_to_string(format!(
        "/sys/block/{}/size",
        device.trim_start_matches("/dev/")
    ))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    assert_eq!(sectors * 512, 96 * MIB);
    let detached = rig.cairn(&["volume", "detach", "+DATA/vol/v1"]).ok();
    assert!(!detached.stdout.contains("still open"), "{detached:?}");
    let listed = rig.cairn(&["volume", "list"]).ok();
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with("+DATA/vol/v1") && l.ends_with("DETACHED")),
        "{listed:?}"
    );
    drop(guard);
    // Attached when the service stops: it lets go of the device (nobody
    // uses it) and unmounts, rather than stay busy.
    let again = rig
        .cairn(&["volume", "attach", "+DATA/vol/v1"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let _again = VolumeGuard {
        device: again.clone(),
        mount: rig.path("no-mount"),
        owner: rig.path(""),
    };
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("volume detached for the stop"), "{log}");
    assert!(
        !Path::new(&format!(
            "/sys/block/{}/loop/backing_file",
            again.trim_start_matches("/dev/")
        ))
        .exists(),
        "{again} is let go of"
    );
    rig.check_clean("DATA");
}

#[test]
fn volumes_are_attached_again_after_a_kill_9() {
    if !fuse_here() || !loop_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let serving = Service::start(&rig, &[]);
    rig.cairn(&["volume", "create", "+DATA/vol/v1", "--size", "32M"])
        .ok();
    let first = rig
        .cairn(&["volume", "attach", "+DATA/vol/v1"])
        .ok()
        .stdout
        .trim()
        .to_string();
    let _first = VolumeGuard {
        device: first.clone(),
        mount: rig.path("no-mount"),
        owner: rig.path(""),
    };
    // Written to the block device, synced: on the group's disks.
    let data = random_file(&rig.path("data.bin"), MIB, 9);
    tool(
        "dd",
        &[
            &format!("if={}", data.display()),
            &format!("of={first}"),
            "bs=64k",
            "oflag=direct",
            "conv=fsync",
            "status=none",
        ],
    )
    .unwrap();
    serving.kill_9();
    // The next service lets go of the dead loop device and attaches the
    // volume again.
    let mut serving = Service::start(&rig, &["--attach-volumes"]);
    serving.wait_for_log("volume attached again");
    assert!(
        serving
            .log()
            .contains("detached a volume's loop device the killed service left"),
        "{}",
        serving.log()
    );
    let listed = rig.cairn(&["volume", "list", "--json"]).ok().json();
    assert_eq!(listed[0]["state"], "ATTACHED", "{listed}");
    let again = listed[0]["device"].as_str().unwrap().to_string();
    let _again = VolumeGuard {
        device: again.clone(),
        mount: rig.path("no-mount"),
        owner: rig.path(""),
    };
    let mut back = vec![0u8; MIB as usize];
    std::io::Read::read_exact(&mut std::fs::File::open(&again).unwrap(), &mut back).unwrap();
    assert_eq!(back, std::fs::read(&data).unwrap());
    rig.cairn(&["volume", "detach", "+DATA/vol/v1"]).ok();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

/// PostgreSQL 15's programs (Debian's postgresql-15; scripts/install-deps).
const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A PostgreSQL program run as the `postgres` user: its output, or why it
/// failed.
fn as_postgres(program: &str, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new("runuser")
        .args(["-u", "postgres", "--", &format!("{PG_BIN}/{program}")])
        .args(args)
        .output()
        .map_err(|e| format!("runuser {program}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{program} {args:?}: {}\n{text}", out.status))
    }
}

/// A PostgreSQL server on a directory, stopped (immediately) however the
/// test ends.
struct Postgres {
    data: String,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = as_postgres(
            "pg_ctl",
            &["-D", &self.data, "-m", "immediate", "-w", "stop"],
        );
    }
}

/// pgbench run as `postgres` against the server at `sockets`, started and
/// left running, its progress (`-P 1`, on stderr) read line by line by a
/// thread of its own.
struct Pgbench {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: String,
}

impl Pgbench {
    /// `clients` clients (one thread each) for `seconds` (an hour: the
    /// scenario stops it when its events are done).
    fn start(sockets: &str, clients: u32, seconds: u32) -> Self {
        let mut child = std::process::Command::new("runuser")
            .args(["-u", "postgres", "--", &format!("{PG_BIN}/pgbench")])
            // -n: no vacuum first, which would empty pgbench_history.
            .args(["-h", sockets, "-n", "-P", "1"])
            .args(["-c", &clients.to_string(), "-j", &clients.to_string()])
            .args(["-T", &seconds.to_string(), "postgres"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in std::io::BufRead::lines(std::io::BufReader::new(stream)) {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Self {
            child,
            lines: rx,
            seen: String::new(),
        }
    }

    /// Wait for `n` more progress reports in which transactions completed
    /// (its work goes on): pgbench's own clock, one a second.
    fn progress(&mut self, n: usize) {
        let mut left = n;
        while left > 0 {
            let Ok(line) = self.lines.recv() else {
                panic!("pgbench ended early:\n{}", self.seen);
            };
            self.seen.push_str(&line);
            self.seen.push('\n');
            if line.starts_with("progress:") && !line.contains(" 0.0 tps") {
                left -= 1;
            }
        }
    }

    /// Its end: what it printed, and the transactions it reported done.
    fn finish(mut self) -> (String, u64) {
        let _ = self.child.wait().unwrap();
        for line in self.lines.iter() {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        let processed = pgbench_processed(&self.seen);
        (std::mem::take(&mut self.seen), processed)
    }
}

impl Drop for Pgbench {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The transactions pgbench reported done ("actually processed").
fn pgbench_processed(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|n| n.split('/').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no transaction count in pgbench's output:\n{text}"))
}

/// One SQL statement through psql as `postgres`: its output.
fn psql(sockets: &str, sql: &str) -> String {
    as_postgres("psql", &["-h", sockets, "-qAtc", sql, "postgres"])
        .unwrap()
        .trim()
        .to_string()
}

fn history_rows(sockets: &str) -> u64 {
    psql(sockets, "select count(*) from pgbench_history")
        .parse()
        .unwrap()
}

/// A disk's state in `group disks --json`.
fn disk_state(rig: &Rig, label: &str) -> String {
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == label)
        .map_or_else(
            || "GONE".to_string(),
            |d| d["state"].as_str().unwrap().to_string(),
        )
}

/// A number from the environment (the full-size run under bench/ sets
/// them), else the CI size.
fn env_or(name: &str, ci: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ci)
}

/// PostgreSQL 15 on XFS on a volume of a normal-redundancy group over four
/// loop devices (sparse files) in two failure groups, with `initdb -k`
/// (data checksums), kept running through, in turn, under pgbench:
///
/// 1. a member disk's path lost (its loop device shrunk under the open
///    descriptor: reads come back empty, writes fail) — the service takes
///    it offline, no error reaches PostgreSQL, pgbench goes on;
/// 2. the path restored, `group online --wait` resyncing what it missed;
/// 3. `group alter` adding two disks and dropping two, its rebalance run
///    to the end;
/// 4. a `kill -9` of the service: the service restarted (`--attach-volumes`),
///    XFS mounted again and PostgreSQL's crash recovery run.
///
/// Then `pg_amcheck --heapallindexed` and, after a clean shutdown,
/// `pg_checksums -c` are clean, and `pgbench_history` holds every
/// transaction pgbench reported. pgbench runs are stopped by the
/// scenario (terminating their sessions, or the crash) once its events are
/// done, so no timing decides whether an event fell inside a run; a
/// transaction in flight at the stop may have committed unheard, so the
/// rows may exceed the reported count by at most one per client.
///
/// CI size: `pgbench -i -s 5` (the full run, `bench/pg-scenario.sh`, uses
/// 20: `CAIRN_PG_SCALE`), 8 clients (`CAIRN_PG_CLIENTS`), a clean run of
/// 5 s (`CAIRN_PG_SECONDS`).
#[test]
fn postgres_on_a_volume_keeps_every_transaction_through_a_disk_failure_a_rebalance_and_a_kill_9() {
    if !fuse_here() || !loop_here() {
        return;
    }
    if !Path::new(PG_BIN).join("pgbench").exists() {
        prerequisite::missing("PostgreSQL 15 (postgresql-15; scripts/install-deps installs it)");
        return;
    }
    let scale = env_or("CAIRN_PG_SCALE", 5);
    let clients = env_or("CAIRN_PG_CLIENTS", 8);
    let seconds = env_or("CAIRN_PG_SECONDS", 5);
    let started = std::time::Instant::now();
    let mut rig = Rig::new();
    // Six 2 GiB sparse files behind loop devices: D0, D1 (failure group
    // A), D2, D3 (B) make the group; the last two are added later.
    let mut loops = Vec::new();
    for i in 0..6 {
        match cairn_io::test_support::loop_device::LoopDevice::create(
            &rig.path(&format!("l{i}.img")),
            2 << 30,
            512,
        ) {
            Ok(l) => loops.push(l),
            Err(why) => {
                prerequisite::missing(&format!("loop devices: {why}"));
                return;
            }
        }
    }
    let path = |i: usize| loops[i].path.display().to_string();
    rig.discover = (0..6).map(path).collect::<Vec<_>>().join(",");
    let mut args: Vec<String> = ["group", "create", "DATA", "--redundancy", "normal"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for i in 0..4 {
        rig.cairn(&["disk", "label", &format!("D{i}"), &path(i)])
            .ok();
        args.push("--disk".into());
        args.push(format!("{}={}", path(i), if i < 2 { "A" } else { "B" }));
    }
    rig.cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
    let mut serving = Service::start(&rig, &[]);
    // Room for scale 20 and the WAL pgbench makes (max_wal_size is 1 GB).
    rig.cairn(&["volume", "create", "+DATA/vol/pg01", "--size", "2G"])
        .ok();
    let device = rig
        .cairn(&["volume", "attach", "+DATA/vol/pg01"])
        .ok()
        .stdout
        .trim()
        .to_string();
    // Outside the test's private directory, which `postgres` cannot enter.
    let mnt = std::env::temp_dir().join(format!("cairn-pg-{}", std::process::id()));
    std::fs::create_dir_all(&mnt).unwrap();
    let _volume = VolumeGuard {
        device: device.clone(),
        mount: mnt.clone(),
        owner: rig.path(""),
    };
    tool("mkfs.xfs", &["-q", "-f", &device]).unwrap();
    tool("mount", &[&device, mnt.to_str().unwrap()]).unwrap();
    tool("chown", &["postgres:postgres", mnt.to_str().unwrap()]).unwrap();
    let data = mnt.join("data").display().to_string();
    let sockets = mnt.display().to_string();
    let log = format!("{sockets}/server.log");
    as_postgres("initdb", &["-k", "-A", "trust", "-D", &data]).unwrap();
    let _server = Postgres { data: data.clone() };
    let pg_start = || {
        as_postgres(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-o",
                &format!("-k {sockets} -c listen_addresses=''"),
                "-l",
                &log,
                "-w",
                "-t",
                "300",
                "start",
            ],
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", std::fs::read_to_string(&log).unwrap_or_default()))
    };
    pg_start();
    let postmaster: u32 = std::fs::read_to_string(format!("{data}/postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap();
    psql(&sockets, "create extension amcheck");
    as_postgres(
        "pgbench",
        &[
            "-h",
            &sockets,
            "-i",
            "-s",
            &scale.to_string(),
            "-q",
            "postgres",
        ],
    )
    .unwrap();

    // 1. D1's path is lost under pgbench: the next I/O to it fails and the
    // service takes it offline, checked once a pgbench report (a bound on
    // a failure, not a synchronisation: every commit writes both copies).
    let mut bench = Pgbench::start(&sockets, clients, 3600);
    bench.progress(2);
    loops[1].set_size_limit(512).unwrap();
    let mut reports = 0;
    while disk_state(&rig, "D1") != "OFFLINE" {
        assert!(reports < 120, "D1 never went offline:\n{}", bench.seen);
        bench.progress(1);
        reports += 1;
    }
    bench.progress(3);
    // What an operator sees meanwhile: the volume's I/O, the disk out.
    let status = rig.cairn(&["status", "--json"]).ok().json();
    let volume = &status["volumes"][0];
    assert_eq!(volume["name"], "+DATA/vol/pg01", "{status}");
    assert_eq!(volume["device"], device.as_str(), "{status}");
    assert!(volume["writes"].as_u64().unwrap() > 0, "{status}");
    assert!(volume["flushes"].as_u64().unwrap() > 0, "{status}");
    let text = rig.cairn(&["status"]).ok().stdout;
    assert!(
        text.contains("+DATA/vol/pg01") && text.contains("OFFLINE"),
        "{text}"
    );

    // 2. The path comes back; online resyncs what D1 missed.
    loops[1].set_size_limit(0).unwrap();
    let back = rig
        .cairn(&["group", "online", "DATA", "D1", "--wait", "--json"])
        .ok()
        .json();
    assert!(back["resync"]["aus_copied"].as_u64().unwrap() > 0, "{back}");
    assert_eq!(disk_state(&rig, "D1"), "ONLINE");
    bench.progress(2);

    // 3. Two disks added, two dropped, in one operation. The change first
    // (the rebalance paused: what the status shows is then certain), then
    // the rebalance to its end, under pgbench.
    rig.cairn(&[
        "group",
        "alter",
        "DATA",
        "--add",
        &format!("{}=A", path(4)),
        "--add",
        &format!("{}=B", path(5)),
        "--drop",
        "D0",
        "--drop",
        "D2",
        "--power",
        "0",
    ])
    .ok();
    let status = rig.cairn(&["status", "--json"]).ok().json();
    assert!(
        status["groups"][0]["disks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["state"] == "DROPPING"),
        "{status}"
    );
    bench.progress(1);
    rig.cairn(&["group", "rebalance", "DATA", "--power", "8", "--wait"])
        .ok();
    assert_eq!(disk_state(&rig, "D0"), "GONE");
    assert_eq!(disk_state(&rig, "D2"), "GONE");
    bench.progress(2);
    // Stopped by terminating its sessions: every event is done.
    psql(
        &sockets,
        "select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name = 'pgbench'",
    );
    let (run1, processed1) = bench.finish();
    assert!(processed1 > 0, "{run1}");
    assert!(run1.contains("number of failed transactions: 0"), "{run1}");
    let rows1 = history_rows(&sockets);
    assert!(
        (processed1..=processed1 + u64::from(clients)).contains(&rows1),
        "{rows1} rows for {processed1} transactions reported:\n{run1}"
    );
    // No error reached PostgreSQL: its log names none but the sessions
    // the scenario terminated.
    let server_log = std::fs::read_to_string(&log).unwrap();
    let errors: Vec<&str> = server_log
        .lines()
        .filter(|l| {
            (l.contains("ERROR") || l.contains("PANIC") || l.contains("FATAL"))
                && !l.contains("terminating connection due to administrator command")
        })
        .collect();
    assert!(errors.is_empty(), "PostgreSQL saw errors: {errors:#?}");

    // A clean run: every transaction reported, exactly.
    let run2 = as_postgres(
        "pgbench",
        &[
            "-h",
            &sockets,
            "-n",
            "-c",
            &clients.to_string(),
            "-j",
            &clients.to_string(),
            "-T",
            &seconds.to_string(),
            "postgres",
        ],
    )
    .unwrap();
    let processed2 = pgbench_processed(&run2);
    assert!(run2.contains("number of failed transactions: 0"), "{run2}");
    assert_eq!(history_rows(&sockets), rows1 + processed2, "{run2}");
    let rows2 = rows1 + processed2;

    // 4. The service killed under pgbench: XFS, then PostgreSQL, see their
    // device fail; the service restarts and attaches the volume again,
    // XFS replays its log, PostgreSQL recovers. Every transaction
    // pgbench heard committed is there.
    let mut bench = Pgbench::start(&sockets, clients, 3600);
    bench.progress(2);
    serving.kill_9();
    let (run3, processed3) = bench.finish();
    let _ = as_postgres("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    // pg_ctl reads the PID file from the dead XFS, and may say it stopped
    // before the postmaster is gone; and a postmaster that is gone stays a
    // zombie (which PostgreSQL takes for a running one) until init reaps
    // it. Its PID is the condition waited on (a bound on a failure, not a
    // synchronisation).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while Path::new(&format!("/proc/{postmaster}")).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "postmaster {postmaster} still there"
        );
        let _ = as_postgres("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(umount(&mnt, 0), 0, "{}", std::io::Error::last_os_error());
    serving = Service::start(&rig, &["--attach-volumes"]);
    serving.wait_for_log("volume attached again");
    // The dead device was let go of (its file's attributes no longer
    // cached: the kernel cannot say which file it is bound to).
    assert!(
        serving
            .log()
            .contains("detached a volume's loop device the killed service left"),
        "{}",
        serving.log()
    );
    let listed = rig.cairn(&["volume", "list", "--json"]).ok().json();
    let device = listed[0]["device"].as_str().unwrap().to_string();
    let _again = VolumeGuard {
        device: device.clone(),
        mount: mnt.clone(),
        owner: rig.path(""),
    };
    tool("mount", &[&device, mnt.to_str().unwrap()]).unwrap();
    pg_start();
    let server_log = std::fs::read_to_string(&log).unwrap();
    assert!(
        server_log.contains("automatic recovery in progress")
            && server_log.contains("database system is ready to accept connections"),
        "{server_log}"
    );
    let rows3 = history_rows(&sockets);
    assert!(
        rows3 >= rows2 + processed3 && rows3 <= rows2 + processed3 + u64::from(clients),
        "{rows3} rows after the crash; {rows2} before the run, which reported {processed3}:\n{run3}"
    );

    // The whole database: heap and indexes agree, every page's checksum.
    let checked = as_postgres(
        "pg_amcheck",
        &[
            "-h",
            &sockets,
            "--heapallindexed",
            "--install-missing",
            "postgres",
        ],
    );
    assert!(checked.is_ok(), "{checked:?}");
    as_postgres("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"]).unwrap();
    let sums = as_postgres("pg_checksums", &["-c", "-D", &data]).unwrap();
    assert!(sums.contains("Bad checksums:  0"), "{sums}");
    assert_eq!(umount(&mnt, 0), 0);
    rig.cairn(&["volume", "detach", "+DATA/vol/pg01"]).ok();
    let _ = std::fs::remove_dir(&mnt);
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
    eprintln!(
        "postgres scenario: scale {scale}, {clients} clients: {processed1} transactions through a disk failure, its resync and alter --add 2 --drop 2 ({rows1} rows); {processed2} in a clean run ({seconds} s); {processed3} before the kill -9, {rows3} rows after recovery; errors seen by PostgreSQL: none; rows lost: none; {} s",
        started.elapsed().as_secs()
    );
}

/// `group space --json` through whoever holds the group: returnable bytes
/// on all disks.
fn returnable_total(rig: &Rig) -> u64 {
    let space = rig.cairn(&["group", "space", "DATA", "--json"]).ok().json();
    space
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["returnable_bytes"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_served_reclaim_runs_beside_readers_refuses_a_second_operation_and_resumes_after_a_stop() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    rig.cairn(&["group", "set", "DATA", "thin_provisioned=false"])
        .ok();
    let keep = random_file(&rig.path("keep.bin"), 8 * MIB, 5);
    rig.cairn(&["cp", keep.to_str().unwrap(), "+DATA/keep.dbf"])
        .ok();
    let big = random_file(&rig.path("big.bin"), 64 * MIB, 6);
    rig.cairn(&["cp", big.to_str().unwrap(), "+DATA/big.dbf"])
        .ok();
    rig.cairn(&["rm", "+DATA/big.dbf"]).ok();
    let disks: Vec<PathBuf> = (0..4).map(|i| rig.path(&format!("d{i}.img"))).collect();
    let held = || disks.iter().map(|d| allocated(d)).sum::<u64>();
    let held_before = held();

    let serving = Service::start(&rig, &[]);
    let returnable = returnable_total(&rig);
    assert!(returnable >= 2 * 64 * MIB, "{returnable}");
    // At 1 MB/s a disk, each batch (one AU a request, paced) is paid for
    // over seconds: the reclaim runs until it is stopped.
    let started = rig.cairn(&["group", "reclaim", "DATA", "--rate", "1"]).ok();
    assert!(
        started.stdout.contains("reclaim started in the background"),
        "{}",
        started.stdout
    );
    rig.cairn(&["group", "reclaim", "DATA"])
        .refused("a reclaim is running on group DATA already");
    rig.cairn(&["group", "scrub", "DATA"])
        .refused("a reclaim is running on group DATA already");
    // Its first batch lands (a bound on a failure, not a synchronisation:
    // the space report is).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while returnable_total(&rig) == returnable {
        assert!(
            std::time::Instant::now() < deadline,
            "no batch in 2 minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The data in use reads back whole beside it.
    assert!(std::fs::read(serving.path("DATA/keep.dbf")).unwrap() == std::fs::read(&keep).unwrap());
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("the reclaim stopped because the service is stopping"),
        "{log}"
    );
    let left = returnable_total(&rig);
    assert!(left > 0 && left < returnable, "{left} of {returnable} left");

    // Served again, the reclaim goes on from where it stopped, and ends.
    let serving = Service::start(&rig, &[]);
    let done = rig
        .cairn(&[
            "group", "reclaim", "DATA", "--rate", "0", "--wait", "--json",
        ])
        .ok()
        .json();
    assert_eq!(done["reclaim"]["returnable_bytes"].as_u64().unwrap(), left);
    assert_eq!(done["reclaim"]["returned_bytes"].as_u64().unwrap(), left);
    assert_eq!(returnable_total(&rig), 0);
    let again = rig.cairn(&["group", "reclaim", "DATA", "--wait"]).ok();
    assert!(
        again.stdout.starts_with("nothing to reclaim in DATA"),
        "{}",
        again.stdout
    );
    assert!(
        held() + 2 * 64 * MIB <= held_before + MIB,
        "the dropped file's copies are given back: {} -> {} MiB",
        held_before >> 20,
        held() >> 20
    );
    assert!(std::fs::read(serving.path("DATA/keep.dbf")).unwrap() == std::fs::read(&keep).unwrap());
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

/// `cairn_disk_state_changes_total` of a disk of DATA, to a state.
fn state_changes(addr: &str, disk: &str, to: &str) -> f64 {
    metric(
        addr,
        &format!("cairn_disk_state_changes_total{{group=\"DATA\",disk=\"{disk}\",to=\"{to}\"}}"),
    )
}

/// A member that fails under the service (its file system shut down: every
/// I/O on the descriptors the service holds fails with EIO) while a file
/// is rewritten through the mount: the write and its fsync succeed on the
/// other copies; the log says, in one line, that D2 went ONLINE -> OFFLINE
/// and why (the I/O error); the metrics count it; the service lets go of
/// every descriptor of D2's file, so its file system can be unmounted
/// (not lazily) for repair. While it is away, `group online` says what is
/// the matter (discovery does not find the disk), not that it "is not
/// attached"; mounted again, `group online` opens it anew and resyncs it,
/// and the log and the metrics say SYNCING, then ONLINE.
#[test]
fn a_failed_disk_is_logged_counted_let_go_of_and_brought_back_through_the_service() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::discovering(|dir| format!("{0}/d*.img,{0}/dying/*.img", dir.display()));
    let fs = match SmallFs::mount(rig.dir.path(), "dying", 512 * MIB) {
        Ok(fs) => fs,
        Err(why) => {
            prerequisite::missing(&why);
            return;
        }
    };
    let here = rig.path("");
    group_on(&rig, [&here, &here, &fs.mnt, &here], &["--au-size", "1M"]);
    let mut serving = Service::start(&rig, &["--metrics", "127.0.0.1:0"]);
    let addr = serving.metrics_addr();
    let pid = serving.pid();
    assert!(
        !open_files_under(pid, &fs.mnt).is_empty(),
        "the service holds D2 while it is ONLINE"
    );
    let first = random_file(&rig.path("first.bin"), 8 * MIB, 21);
    let second = random_file(&rig.path("second.bin"), 8 * MIB, 22);
    let write = |from: &Path| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(serving.path("DATA/f.bin"))
            .unwrap();
        f.write_all(&std::fs::read(from).unwrap()).unwrap();
        f.sync_all().unwrap();
    };
    write(&first);
    assert_eq!(state_changes(&addr, "D2", "OFFLINE"), 0.0);
    fs.shut_down();
    // Every extent has a copy in failure group B (D2, D3): the rewrite
    // reaches D2, fails there, and lands on the other copies.
    write(&second);
    serving.wait_for_log("disk D2: ONLINE -> OFFLINE");
    let line = serving.line_with("disk D2: ONLINE -> OFFLINE");
    assert!(line.contains("DATA"), "the group is named: {line}");
    assert!(
        line.contains("failed") && line.contains("Input/output error"),
        "why, with the error: {line}"
    );
    assert_eq!(state_changes(&addr, "D2", "OFFLINE"), 1.0);
    // Every descriptor of the failed disk is let go of, so its file system
    // can be unmounted for repair.
    wait_until("the service lets go of D2", || {
        open_files_under(pid, &fs.mnt).is_empty()
    });
    fs.unmount().unwrap();
    // Away: `online` says what is the matter.
    let away = rig.cairn(&["group", "online", "DATA", "D2"]);
    assert!(!away.stderr.contains("is not attached"), "{away:?}");
    away.refused("discovery");
    fs.mount_again();
    let back = rig
        .cairn(&["group", "online", "DATA", "D2", "--wait", "--json"])
        .ok()
        .json();
    assert!(back["resync"]["aus_copied"].as_u64().unwrap() > 0, "{back}");
    assert!(
        back["disks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "ONLINE"),
        "{back}"
    );
    serving.wait_for_log("disk D2: OFFLINE -> SYNCING");
    serving.wait_for_log("disk D2: SYNCING -> ONLINE");
    assert_eq!(state_changes(&addr, "D2", "SYNCING"), 1.0);
    assert_eq!(state_changes(&addr, "D2", "ONLINE"), 1.0);
    assert_eq!(state_changes(&addr, "D2", "OFFLINE"), 1.0);
    assert_eq!(state_changes(&addr, "D0", "OFFLINE"), 0.0);
    assert!(std::fs::read(serving.path("DATA/f.bin")).unwrap() == std::fs::read(&second).unwrap());
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let d2 = disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == "D2")
        .unwrap();
    assert_eq!(
        d2["path"],
        fs.mnt.join("d2.img").display().to_string(),
        "{disks}"
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        log.matches("disk D2: ONLINE -> OFFLINE").count(),
        1,
        "{log}"
    );
    rig.check_clean("DATA");
}

/// What a mount does to disks is said and counted as well: a member
/// missing when the service starts is ONLINE -> OFFLINE (missing), and
/// found by the next start it is OFFLINE -> SYNCING, resynced by the
/// mount, then SYNCING -> ONLINE.
#[test]
fn the_service_logs_and_counts_a_mount_that_marks_a_disk_offline_and_one_that_resyncs_it() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let away = rig.path("d3.away");
    std::fs::rename(rig.path("d3.img"), &away).unwrap();
    let mut serving = Service::start(&rig, &["--metrics", "127.0.0.1:0"]);
    serving.wait_for_log("disk D3: ONLINE -> OFFLINE");
    let line = serving.line_with("disk D3: ONLINE -> OFFLINE");
    assert!(line.contains("missing"), "{line}");
    let addr = serving.metrics_addr();
    assert_eq!(state_changes(&addr, "D3", "OFFLINE"), 1.0);
    // Written while D3 is away: its copies go stale.
    let source = random_file(&rig.path("source.bin"), 8 * MIB, 31);
    std::fs::copy(&source, serving.path("DATA/while-away.bin")).unwrap();
    std::fs::File::open(serving.path("DATA/while-away.bin"))
        .unwrap()
        .sync_all()
        .unwrap();
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    std::fs::rename(&away, rig.path("d3.img")).unwrap();
    let mut serving = Service::start(&rig, &["--metrics", "127.0.0.1:0"]);
    serving.wait_for_log("disk D3: OFFLINE -> SYNCING");
    serving.wait_for_log("disk D3: SYNCING -> ONLINE");
    let addr = serving.metrics_addr();
    assert_eq!(state_changes(&addr, "D3", "SYNCING"), 1.0);
    assert_eq!(state_changes(&addr, "D3", "ONLINE"), 1.0);
    assert_eq!(state_changes(&addr, "D3", "OFFLINE"), 0.0);
    assert!(
        std::fs::read(serving.path("DATA/while-away.bin")).unwrap()
            == std::fs::read(&source).unwrap()
    );
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("DATA");
}

/// SIGHUP after member files moved: D1 renamed where discovery still finds
/// it is the same disk (its label's uuid, and the very file the service
/// holds open): its path is updated and said, never opened a second time
/// (which the service's own lock would refuse); D3 moved out of
/// discovery's reach while ONLINE is said too, and stays in use through
/// the descriptor the service holds.
#[test]
fn sighup_follows_a_renamed_member_by_identity_and_says_one_that_left_discovery() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig);
    let mut serving = Service::start(&rig, &[]);
    let moved = rig.path("d1-moved.img");
    std::fs::rename(rig.path("d1.img"), &moved).unwrap();
    let away = rig.path("d3.away");
    std::fs::rename(rig.path("d3.img"), &away).unwrap();
    serving.signal(libc::SIGHUP);
    serving.wait_for_log("disk D1 is now at");
    let line = serving.line_with("disk D1 is now at");
    assert!(line.contains(&moved.display().to_string()), "{line}");
    serving.wait_for_log("is no longer found by discovery");
    let line = serving.line_with("is no longer found by discovery");
    assert!(line.contains("disk D3"), "{line}");
    assert!(
        line.contains("no longer found by discovery") && line.contains("ONLINE"),
        "{line}"
    );
    assert!(
        !serving.log().contains("locked by another Cairn process"),
        "{}",
        serving.log()
    );
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    let row = |label: &str| {
        disks
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["label"] == label)
            .unwrap()
            .clone()
    };
    assert_eq!(row("D1")["path"], moved.display().to_string(), "{disks}");
    assert_eq!(row("D3")["state"], "ONLINE", "{disks}");
    // Every disk still serves the files.
    let source = random_file(&rig.path("source.bin"), 8 * MIB, 41);
    std::fs::copy(&source, serving.path("DATA/after.bin")).unwrap();
    assert!(
        std::fs::read(serving.path("DATA/after.bin")).unwrap() == std::fs::read(&source).unwrap()
    );
    // A second SIGHUP has nothing new to say of D1.
    serving.signal(libc::SIGHUP);
    serving.wait_for_log("SIGHUP: reading the discovery string again");
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(log.matches("disk D1 is now at").count(), 1, "{log}");
    assert!(!log.contains("cannot be opened"), "{log}");
    std::fs::rename(&away, rig.path("d3.img")).unwrap();
    rig.check_clean("DATA");
}
