//! `cairn serve` with the real binary and a real FUSE mount: the groups'
//! files read back byte for byte through the file system, at any offset;
//! the mount is read-only (so far) and says so; the group stays held (a
//! second mount is refused); SIGTERM unmounts, dismounts and leaves the
//! group clean. The service says it is ready with systemd's `READY=1` on
//! `$NOTIFY_SOCKET`, which is how the test waits for it: no sleeps.
//! Bad requests are refused with one line before anything is mounted.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use cairn_io::test_support::prerequisite;
use common::*;

const MIB: u64 = 1 << 20;

/// A group DATA (normal redundancy, failure groups A and B) over four
/// sparse disks of the rig.
fn group(rig: &Rig) {
    for i in 0..4 {
        let path = sparse(&rig.path(&format!("d{i}.img")), 256 * MIB);
        rig.cairn(&["disk", "label", &format!("D{i}"), path.to_str().unwrap()])
            .ok();
    }
    let disk = |i: usize, fg: &str| format!("{}={fg}", rig.arg(&format!("d{i}.img")));
    rig.cairn(&[
        "group",
        "create",
        "DATA",
        "--redundancy",
        "normal",
        "--disk",
        &disk(0, "A"),
        "--disk",
        &disk(1, "A"),
        "--disk",
        &disk(2, "B"),
        "--disk",
        &disk(3, "B"),
    ])
    .ok();
}

/// FUSE needs /dev/fuse and, to mount without a setuid helper, root.
fn fuse_here() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !Path::new("/dev/fuse").exists() {
        prerequisite::missing("FUSE: needs root and /dev/fuse");
        return false;
    }
    true
}

struct Serving {
    child: Option<Child>,
    mountpoint: PathBuf,
    /// Its log (stderr), read line by line as the test waits for events.
    log: Option<std::io::Lines<std::io::BufReader<std::process::ChildStderr>>>,
    seen: String,
}

impl Drop for Serving {
    /// A test that failed half-way leaves no service and no mount behind.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if mounted(&self.mountpoint) {
            let _ = umount(&self.mountpoint, libc::MNT_DETACH);
        }
    }
}

impl Serving {
    /// `cairn serve` started on the rig, returned once it said READY=1.
    fn start(rig: &Rig, args: &[&str]) -> Self {
        let mountpoint = rig.path("mnt");
        std::fs::create_dir_all(&mountpoint).unwrap();
        let notify = rig.path("notify.sock");
        let socket = UnixDatagram::bind(&notify).unwrap();
        // A bound on a failure, not a synchronisation: READY=1 is.
        socket
            .set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        let mut child = cairn_command(
            &rig.discover,
            &[
                ("CAIRN_RUN_DIR", rig.run_dir.as_str()),
                ("NOTIFY_SOCKET", notify.to_str().unwrap()),
            ],
        )
        .args(["serve", "--mountpoint", mountpoint.to_str().unwrap()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let mut buf = [0u8; 64];
        match socket.recv(&mut buf) {
            Ok(n) => assert_eq!(&buf[..n], b"READY=1\n"),
            Err(e) => {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "serve never said READY ({e}); stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        let log = child
            .stderr
            .take()
            .map(|e| std::io::BufRead::lines(std::io::BufReader::new(e)));
        Self {
            child: Some(child),
            mountpoint,
            log,
            seen: String::new(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.mountpoint.join(rel)
    }

    /// Wait for it to exit by itself: the exit status and what it logged.
    fn exited(mut self) -> (i32, String) {
        let status = self.child.take().unwrap().wait().unwrap();
        for line in self.log.take().unwrap() {
            self.seen.push_str(&line.unwrap());
            self.seen.push('\n');
        }
        (status.code().unwrap_or(-1), std::mem::take(&mut self.seen))
    }

    fn signal(&self, signal: i32) {
        let pid = self.child.as_ref().unwrap().id() as i32;
        // SAFETY: kill with a pid we spawned and a valid signal.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Read its log until a line contains `needle` (the event waited for).
    fn wait_for_log(&mut self, needle: &str) {
        for line in self.log.as_mut().unwrap().by_ref() {
            let line = line.unwrap();
            self.seen.push_str(&line);
            self.seen.push('\n');
            if line.contains(needle) {
                return;
            }
        }
        panic!("the log ended without {needle:?}: {}", self.seen);
    }

    /// SIGTERM, then the exit status and what it logged.
    fn stop(mut self) -> (i32, String) {
        self.signal(libc::SIGTERM);
        let status = self.child.take().unwrap().wait().unwrap();
        for line in self.log.take().unwrap() {
            self.seen.push_str(&line.unwrap());
            self.seen.push('\n');
        }
        (status.code().unwrap_or(-1), std::mem::take(&mut self.seen))
    }
}

/// umount2 of the test's own FUSE mount (canonical path): its return code.
fn umount(path: &Path, flags: i32) -> i32 {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; umount2 reads only it.
    unsafe { libc::umount2(path.as_ptr(), flags) }
}

fn mounted(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    // As the kernel lists it: canonical (the scratch paths have no spaces,
    // which it would escape).
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = path.to_str().unwrap();
    assert!(!path.contains(' '), "{path}");
    mounts
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(path))
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

    let serving = Serving::start(&rig, &[]);
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
    serving.wait_for_log("the file system is in use");
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
    // Read-only, so far: writes are refused by the mount, not lost.
    let refused = std::fs::OpenOptions::new()
        .write(true)
        .open(serving.path("DATA/control.ctl"))
        .unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EROFS), "{refused}");
    // fsync on a served file succeeds (never ENOSYS).
    f.sync_all().unwrap();
    drop(f);
    // The service holds the group: another mount is refused, saying so.
    let second = rig.cairn(&["ls", "+DATA"]);
    assert_ne!(second.code, 0, "{second:?}");
    assert!(second.stderr.contains("DATA"), "{second:?}");

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
    let serving = Serving::start(&rig, &["--group", "DATA"]);
    assert!(std::fs::read(serving.path("DATA/f.dbf")).unwrap() == std::fs::read(&data).unwrap());
    // An administrator's umount: the service notices, and stops cleanly.
    assert_eq!(umount(&serving.mountpoint, 0), 0);
    let (code, log) = serving.exited();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("unmounted from outside"), "{log}");
    assert!(log.contains("dismounted"), "{log}");
    rig.check_clean("DATA");
}
