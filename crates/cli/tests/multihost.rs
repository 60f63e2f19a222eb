//! Two hosts on one SAN, with the real binary: each "host" is the `cairn`
//! binary with its own host id (`CAIRN_TEST_HOST`, a test-only switch), its
//! own run directory (so its own group lock) and its own loop devices over
//! the same backing files, as two hosts see one array's LUNs through their
//! own device nodes. Nothing local is shared between them: no lock file, no
//! exclusive open of one block device. The heartbeat on the disks is all
//! that keeps them apart, as it would be on a SAN.
//!
//! Host A serves the group; host B is refused (`group mount`, `serve`, and
//! `--force` while A beats), naming host A; a listing on B works and says
//! who writes. A is killed with -9: B is still refused without `--force`,
//! and with it waits out the watch and takes the group over, A's data
//! intact. Then B serves and stops cleanly: A mounts at once, without
//! `--force`. The heartbeat beats every 500 ms here
//! (`CAIRN_TEST_HEARTBEAT_MS`, test-only), so the watch is 10 s; the test
//! waits for conditions (READY=1, exits), never sleeps.
//!
//! Needs root, loop devices and FUSE; elsewhere it says `skipped: <reason>`
//! (and fails under CAIRN_REQUIRE_TOOLS).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use cairn_io::test_support::{loop_device, prerequisite, LoopDevice};
use common::*;

const MIB: u64 = 1 << 20;
const DISKS: usize = 4;
/// The test's heartbeat interval: the owner stops after 10 of them without
/// a heartbeat landing (5 s, which a loaded machine does not reach), a host
/// taking over watches for 20 (10 s).
const HEARTBEAT_MS: &str = "500";

/// One "host": its name, run directory and loop devices.
struct Host {
    name: &'static str,
    run_dir: PathBuf,
    devices: Vec<LoopDevice>,
}

impl Host {
    fn new(dir: &Path, name: &'static str, files: &[PathBuf]) -> Option<Self> {
        let mut devices = Vec::new();
        for file in files {
            match LoopDevice::attach(file, 512, &[]) {
                Ok(d) => devices.push(d),
                Err(reason) => {
                    prerequisite::missing(&reason);
                    return None;
                }
            }
        }
        let run_dir = dir.join(format!("run-{name}"));
        std::fs::create_dir_all(&run_dir).unwrap();
        Some(Self {
            name,
            run_dir,
            devices,
        })
    }

    fn discover(&self) -> String {
        self.devices
            .iter()
            .map(|d| d.path.display().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn envs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("CAIRN_TEST_HOST", self.name.to_string()),
            ("CAIRN_TEST_HEARTBEAT_MS", HEARTBEAT_MS.into()),
            ("CAIRN_RUN_DIR", self.run_dir.display().to_string()),
        ]
    }

    fn command(&self) -> std::process::Command {
        let envs = self.envs();
        let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        cairn_command(&self.discover(), &envs)
    }

    fn cairn(&self, args: &[&str]) -> Run {
        Run::from(self.command().args(args).output().unwrap())
    }

    /// `cairn serve` on a mountpoint of its own, once it said READY=1.
    fn serve(&self, mountpoint: &Path) -> Service {
        Service::spawn(self.command(), mountpoint, &self.run_dir, &[])
    }

    /// `cairn serve` that must fail: its stderr.
    fn serve_refused(&self, mountpoint: &Path) -> String {
        std::fs::create_dir_all(mountpoint).unwrap();
        let out = self
            .command()
            .args(["serve", "--mountpoint", mountpoint.to_str().unwrap()])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "host {} served", self.name);
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

#[test]
fn a_second_host_is_kept_out_while_the_first_beats_and_takes_over_after() {
    if let Some(reason) = loop_device::unavailable_reason() {
        prerequisite::missing(&reason);
        return;
    }
    if !fuse_here() {
        return;
    }
    let dir = scratch();
    let files: Vec<PathBuf> = (0..DISKS)
        .map(|i| sparse(&dir.path().join(format!("lun{i}.img")), 128 * MIB))
        .collect();
    let Some(a) = Host::new(dir.path(), "hostA", &files) else {
        return;
    };
    let Some(b) = Host::new(dir.path(), "hostB", &files) else {
        return;
    };

    // Host A makes the group and a file in it.
    let mut create = vec!["group", "create", "DATA", "--redundancy", "normal"];
    let specs: Vec<String> = a
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| format!("{}=FG{}", d.path.display(), 1 + i / 2))
        .collect();
    for s in &specs {
        create.extend(["--disk", s]);
    }
    a.cairn(&create).ok();
    let data = random_file(&dir.path().join("data.bin"), 3 * MIB, 5);
    a.cairn(&["cp", data.to_str().unwrap(), "+DATA/data.bin"])
        .ok();
    // A let go cleanly: B could mount now, and sees the group on its own
    // devices.
    let listed = b.cairn(&["group", "list", "--json"]).ok().json();
    assert_eq!(listed[0]["name"], "DATA", "{listed:#}");

    // A serves: B is refused, naming A, however it asks.
    let mnt_a = dir.path().join("mnt-a");
    let served_a = a.serve(&mnt_a);
    let refused = b.cairn(&["group", "mount", "DATA"]).refused("host hostA");
    assert!(refused.stderr.contains("--force"), "{}", refused.stderr);
    let err = b.serve_refused(&dir.path().join("mnt-b"));
    assert!(
        err.contains("cannot serve group DATA") && err.contains("host hostA"),
        "{err}"
    );
    b.cairn(&["group", "mount", "DATA", "--force"])
        .refused("its heartbeat moved while this host watched");
    // A listing does not refuse, and says who writes.
    let ls = b.cairn(&["ls", "+DATA"]).ok();
    assert!(ls.stdout.contains("data.bin"), "{}", ls.stdout);
    assert!(
        ls.stderr.contains("mounted for writing by host hostA"),
        "{}",
        ls.stderr
    );
    // A served on, untouched: its file reads back through its mount.
    let through_a = std::fs::read(mnt_a.join("DATA/data.bin"))
        .unwrap_or_else(|e| panic!("{e}; host A's log: {}", served_a.log()));
    assert_eq!(through_a, std::fs::read(&data).unwrap());

    // A dies. B is still refused without --force (nothing says A is
    // dead until its heartbeat is watched), and with it takes over once
    // the watch saw nothing move.
    served_a.kill_9();
    umount(&mnt_a, libc::MNT_DETACH);
    b.cairn(&["group", "mount", "DATA"]).refused("--force");
    let took = b.cairn(&["group", "mount", "DATA", "--force"]).ok();
    assert!(
        took.stdout.contains("taken over from host hostA"),
        "{}",
        took.stdout
    );
    let back = dir.path().join("back.bin");
    b.cairn(&["cp", "+DATA/data.bin", back.to_str().unwrap()])
        .ok();
    assert_eq!(digest(&back), digest(&data), "A's file, read by B");

    // Now B serves, and A is the one kept out; B stops cleanly, and A
    // mounts at once, without --force.
    let mnt_b = dir.path().join("mnt-b");
    let served_b = b.serve(&mnt_b);
    a.cairn(&["group", "mount", "DATA"]).refused("host hostB");
    let (code, log) = served_b.stop();
    assert_eq!(code, 0, "{log}");
    a.cairn(&["group", "mount", "DATA"]).ok();
    let check = a.cairn(&["group", "check", "DATA"]).ok();
    assert_eq!(
        check.stdout.lines().last(),
        Some("clean"),
        "{}",
        check.stdout
    );
}
