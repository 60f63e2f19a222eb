//! The adversarial scenarios of the hardening pass, end to end on the real
//! binary over sparse files: a cloned member, read-only commands that must
//! never write, copies to device nodes and links, copies killed midway,
//! non-regular sources, cross-group copies, and the smaller answers that
//! were wrong or unclear. Each test has its own directory, discovery glob
//! and lock directory.
//!
//! Where the scenario is the group's (a cloned member, damage a mount
//! finds, `check`, copies out — to files, links, devices, and never over a
//! group's disk — streams, copies between groups), it runs
//! through both doors from one body (`two_hosts!`): held, and served by
//! `cairn serve` with every command through its socket; disks are changed
//! while nothing serves the group, and the service, started again, finds
//! them as a mount does. The rest stay held, each for its reason: `group
//! create` (the CLI's own whichever the host), read-only commands and a
//! typo in the discovery string (a served group's commands do not use the
//! CLI's discovery), a member this user cannot write (the service runs as
//! root), a copy fed from a FIFO (never handed to a service), and a disk
//! failing under a held copy (lifecycle_cli and serve_cli fail one under the
//! service).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
mod copies;
mod damage;
mod groups;
mod review;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use cairn_io::test_support::prerequisite;
use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

impl Door {
    /// `cairn` with another discovery string (a typo, say), the group held.
    fn cairn_discovering(&self, discover: &str, args: &[&str]) -> Run {
        cairn_with(discover, &[("CAIRN_RUN_DIR", &self.rig.run_dir)], args)
    }

    /// A normal-redundancy group over `n` (2 or 4) 1 GiB disks
    /// `<prefix>0.img`..., in failure groups FG1 and FG2.
    fn create(&self, name: &str, prefix: &str, n: usize) {
        let mut args = vec![
            "group".to_string(),
            "create".into(),
            name.into(),
            "--au-size".into(),
            "1M".into(),
        ];
        for i in 0..n {
            let disk = format!("{prefix}{i}.img");
            sparse(&self.path(&disk), GIB);
            args.push("--disk".into());
            args.push(format!("{}=FG{}", self.arg(&disk), 1 + i * 2 / n));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // The CLI's own whichever the host: a group no service serves yet.
        self.rig.cairn(&args).ok();
    }

    fn disks_json(&self, group: &str) -> Value {
        self.cairn(&["group", "disks", group, "--json"]).ok().json()
    }

    fn assert_all_online_of(&self, group: &str) {
        self.assert_all_online(group)
    }

    /// Every member ONLINE, as the superblocks record it.
    fn assert_all_online(&self, group: &str) {
        let disks = self.disks_json(group);
        for d in disks.as_array().unwrap() {
            assert_eq!(d["state"], "ONLINE", "{disks:#}");
        }
    }

    fn ls_names(&self, path: &str) -> Vec<String> {
        self.cairn(&["ls", path, "--json"])
            .ok()
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Files in the test directory other than the disks, sources and the run
    /// directory: what a command left behind.
    fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(self.rig.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("cairn-partial"))
            .collect()
    }
}

/// The group `DATA` of `rig`, mounted read-only in this process, handed to
/// `f` with the path of each attached device (by device id): for a test that
/// must find where a block lives on the disks.
fn with_group<T>(
    rig: &Door,
    f: impl FnOnce(&cairn_store::group::Group<'_>, &std::collections::BTreeMap<u32, PathBuf>) -> T,
) -> T {
    let mut engine = cairn_io::new_file_engine(cairn_io::EngineKind::Sync, 8).unwrap();
    let host = cairn_io::host::Host::real();
    let discovery = cairn_store::discovery::DiscoveryString::resolve(
        Some(&rig.rig.discover),
        None,
        Path::new("/nonexistent"),
    )
    .unwrap();
    let m = cairn_store::group_admin::mount_read_only(
        engine.as_mut(),
        &host,
        &discovery,
        "DATA",
        Path::new(&rig.rig.run_dir),
    )
    .unwrap();
    f(&m.group, &m.paths)
}

/// Zero both superblock slots of a disk: what a `group create` killed after
/// the disk headers and before any superblock leaves.
fn wipe_superblocks(disk: &Path) {
    for base in cairn_format::group::SUPER_SLOT_OFFSETS_BYTES {
        write_at(disk, base, &vec![0u8; 16 * 4096]);
    }
}
