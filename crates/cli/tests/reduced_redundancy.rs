//! Allocation with a failure group missing, end to end (issue 34, item 4):
//! with the real binary on sparse files, one of two failure groups taken
//! offline for maintenance — files are still created (they were refused
//! with ENOSPC, and `group list` said USABLE_MB −16), shown with lowered
//! redundancy in `ls --json`, `group space` and `group disks`, restored by
//! `group online`, and then read back from the other failure group alone;
//! and through the service: a file written and grown through the FUSE
//! mount while the failure group is away, the metrics, `online` through
//! the service, and the restored copies read alone.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;

/// Four sparse disks d0..d3 (FG1: d0, d1; FG2: d2, d3) of a normal
/// group `name` with 1 MiB AUs, discovered as `*.img`; a disk is hidden
/// from discovery by renaming it.
fn group(rig: &Rig, name: &str) {
    let mut args: Vec<String> = ["group", "create", name, "--au-size", "1M"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for i in 0..4 {
        let path = sparse(&rig.path(&format!("d{i}.img")), 160 * MIB);
        args.push("--disk".into());
        args.push(format!("{}=FG{}", path.display(), 1 + i / 2));
    }
    rig.cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
}

/// Show discovery only the disks marked visible.
fn show(rig: &Rig, visible: [bool; 4]) {
    for (i, v) in visible.iter().enumerate() {
        let here = rig.path(&format!("d{i}.img"));
        let away = rig.path(&format!("d{i}.away"));
        if *v && away.exists() {
            std::fs::rename(&away, &here).unwrap();
        } else if !*v && here.exists() {
            std::fs::rename(&here, &away).unwrap();
        }
    }
}

fn list_row(rig: &Rig, name: &str) -> Value {
    let list = rig.cairn(&["group", "list", "--json"]).ok().json();
    list.as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {list:#}"))
        .clone()
}

/// `ls --json`'s entry for `leaf` in `dir`.
fn ls_file(rig: &Rig, dir: &str, leaf: &str) -> Value {
    let entries = rig.cairn(&["ls", dir, "--json"]).ok().json();
    entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == leaf)
        .unwrap_or_else(|| panic!("{leaf} not in {entries:#}"))["file"]
        .clone()
}

/// `group space --json`'s missing bytes per disk, in disk order.
fn missing(rig: &Rig, name: &str) -> Vec<u64> {
    let rows = rig.cairn(&["group", "space", name, "--json"]).ok().json();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["missing_copy_bytes"].as_u64().unwrap())
        .collect()
}

/// Copy `group_path` out and compare it with `expected`.
fn reads_back(rig: &Rig, group_path: &str, expected: &Path) {
    let out = rig.path("out.bin");
    let _ = std::fs::remove_file(&out);
    rig.cairn(&["cp", group_path, out.to_str().unwrap()]).ok();
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(expected).unwrap(),
        "{group_path} reads back"
    );
}

#[test]
fn a_failure_group_offline_still_takes_new_files_and_online_restores_their_copies() {
    let rig = Rig::new();
    group(&rig, "RR");
    let a = random_file(&rig.path("a.bin"), 6 * MIB, 1);
    let b = random_file(&rig.path("b.bin"), 12 * MIB, 2);
    rig.cairn(&["cp", a.to_str().unwrap(), "+RR/a.dbf"]).ok();
    let before = list_row(&rig, "RR");
    assert!(before["usable_file_mb"].as_i64().unwrap() > 0, "{before:#}");

    rig.cairn(&["group", "offline", "RR", "RR_0002", "RR_0003"])
        .ok();
    let away = list_row(&rig, "RR");
    assert_eq!(away["offline_disks"], 2, "{away:#}");
    assert_eq!(
        (&away["usable_file_mb"], &away["free_mb"]),
        (&before["usable_file_mb"], &before["free_mb"]),
        "the offline failure group still takes new copies: {away:#}"
    );
    // Was: no space. Now the file is made, its copies in FG2 recorded.
    rig.cairn(&["cp", b.to_str().unwrap(), "+RR/b.dbf"]).ok();
    let info = ls_file(&rig, "+RR", "b.dbf");
    assert_eq!(info["redundancy_lowered"], true, "{info:#}");
    assert_eq!(info["redundancy_lowered_extents"], 12, "{info:#}");
    let info = ls_file(&rig, "+RR", "a.dbf");
    assert_eq!(info["redundancy_lowered_extents"], 6, "{info:#}");
    let gaps = missing(&rig, "RR");
    assert_eq!(&gaps[..2], &[0, 0], "{gaps:?}");
    assert!(
        gaps[2] + gaps[3] >= 18 * MIB,
        "FG2 misses a copy of each extent of a and b: {gaps:?}"
    );
    let text = rig.cairn(&["group", "space", "RR"]).ok().stdout;
    assert!(
        text.lines().next().unwrap().contains("MISSING_MB"),
        "{text}"
    );
    // FG1 holds the only copies: it may not go too.
    rig.cairn(&["group", "offline", "RR", "RR_0000"])
        .refused("no copy to read");

    let back = rig
        .cairn(&["group", "online", "RR", "--all", "--json"])
        .ok()
        .json();
    let copied = back["mount_resync"]["aus_copied"].as_u64().unwrap_or(0)
        + back["resync"]["aus_copied"].as_u64().unwrap();
    assert_eq!(copied, 12, "b's 12 AUs, and nothing of a: {back:#}");
    assert_eq!(missing(&rig, "RR"), [0, 0, 0, 0]);
    for leaf in ["a.dbf", "b.dbf"] {
        let info = ls_file(&rig, "+RR", leaf);
        assert_eq!(info["redundancy_lowered"], false, "{info:#}");
        assert_eq!(info["redundancy_lowered_extents"], 0, "{info:#}");
    }
    rig.check_clean("RR");

    // FG1 gone: FG2 alone holds both files, the restored copies among them.
    show(&rig, [false, false, true, true]);
    reads_back(&rig, "+RR/a.dbf", &a);
    reads_back(&rig, "+RR/b.dbf", &b);
    show(&rig, [true; 4]);
}

// ---------------------------------------------------------------------------
// Through the service

/// `cairn serve` on the rig with its metrics endpoint, and its address.
fn serve(rig: &Rig) -> (Service, String) {
    let mut serving = Service::start(rig, &["--metrics", "127.0.0.1:0"]);
    let addr = serving.metrics_addr();
    (serving, addr)
}

#[test]
fn a_served_group_grows_a_file_with_a_failure_group_offline_and_the_metrics_say_so() {
    if !fuse_here() {
        return;
    }
    let rig = Rig::new();
    group(&rig, "SRV");
    let (serving, addr) = serve(&rig);
    let lowered = "cairn_group_redundancy_lowered_extents{group=\"SRV\"}";
    assert_eq!(metric_listed(&addr, lowered), 0.0);
    rig.cairn(&["group", "offline", "SRV", "SRV_0002", "SRV_0003"])
        .ok();
    // Written, then grown (as a database extends a datafile), through the
    // mount: each was refused with no space.
    let want: Vec<u8> = (0..(10 * MIB) as usize)
        .map(|i| (i as u8).wrapping_mul(13) ^ (i >> 16) as u8)
        .collect();
    let file = serving.mountpoint.join("SRV/grown.dbf");
    {
        let mut f = std::fs::File::create(&file).unwrap();
        f.write_all(&want[..(4 * MIB) as usize]).unwrap();
        f.sync_all().unwrap();
        f.set_len(10 * MIB).unwrap();
        f.seek(SeekFrom::Start(4 * MIB)).unwrap();
        f.write_all(&want[(4 * MIB) as usize..]).unwrap();
        f.sync_all().unwrap();
    }
    assert!(
        metric_listed(&addr, lowered) >= 10.0,
        "every extent of the file, at least"
    );
    let d2 = "cairn_disk_missing_copy_aus{group=\"SRV\",disk=\"SRV_0002\"}";
    let d3 = "cairn_disk_missing_copy_aus{group=\"SRV\",disk=\"SRV_0003\"}";
    assert!(metric_listed(&addr, d2) + metric_listed(&addr, d3) >= 10.0);
    let status = rig.cairn(&["status", "--json"]).ok().json();
    assert!(
        status["groups"][0]["redundancy_lowered_bytes"]
            .as_u64()
            .unwrap()
            >= 10 * MIB,
        "{status:#}"
    );

    // Through the service the resync runs in the background unless waited for.
    rig.cairn(&["group", "online", "SRV", "--all", "--wait"])
        .ok();
    assert_eq!(metric_listed(&addr, lowered), 0.0);
    assert_eq!(metric_listed(&addr, d2) + metric_listed(&addr, d3), 0.0);
    assert_eq!(std::fs::read(&file).unwrap(), want);
    let (code, log) = serving.stop();
    assert_eq!(code, 0, "{log}");
    rig.check_clean("SRV");

    // FG1 gone: the copies the resync restored serve the file alone.
    let expected = rig.path("grown.bin");
    std::fs::write(&expected, &want).unwrap();
    show(&rig, [false, false, true, true]);
    reads_back(&rig, "+SRV/grown.dbf", &expected);
    show(&rig, [true; 4]);
}
