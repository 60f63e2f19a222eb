//! Changing a group's disks with the real binary, on sparse files and on
//! 512- and 4096-byte-sector loop devices: `alter --explain` says the exact
//! work and changes nothing; `alter --add --add --drop --drop` moves exactly
//! the dropped disks' data, once, and the dropped disks leave as FORMER;
//! every file reads back and `check` is clean; bad requests are refused with
//! one line and change nothing.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cairn_io::test_support::{loop_device, prerequisite, LoopDevice};
use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;

/// Loop-device tests run one at a time (see `group_loop.rs`).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn used_aus(disks: &Value, label: &str) -> u64 {
    let d = disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == label)
        .unwrap_or_else(|| panic!("no disk {label} in {disks:#}"));
    d["total_aus"].as_u64().unwrap() - d["free_aus"].as_u64().unwrap()
}

fn labels(disks: &Value) -> Vec<String> {
    disks
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["label"].as_str().unwrap().to_string())
        .collect()
}

fn status_of(list: &Value, path: &str) -> String {
    let canon = std::fs::canonicalize(path).unwrap();
    list["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| std::fs::canonicalize(d["path"].as_str().unwrap()).ok() == Some(canon.clone()))
        .unwrap_or_else(|| panic!("{path} not listed in {list:#}"))["status"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Six devices (`paths`), the first four a group `name` in failure groups
/// FG1 (0, 1) and FG2 (2, 3); 4 and 5 come in, 1 and 3 go. Every command
/// after `group create` goes through `door` (served from then on, on the
/// served host).
fn add_two_drop_two(door: &mut Door, paths: &[String], name: &str) {
    let mut args = vec!["group".to_string(), "create".into(), name.into()];
    for (i, p) in paths[..4].iter().enumerate() {
        args.extend(["--disk".into(), format!("{p}=FG{}", 1 + i / 2)]);
    }
    door.rig
        .cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
    door.start();
    let dir = &door.path("");
    let cairn = |args: &[&str]| door.cairn(args);
    let src1 = random_file(&dir.join("src1.bin"), 24 * MIB, 1);
    let src2 = random_file(&dir.join("src2.bin"), 9 * MIB, 2);
    let a = format!("+{name}/a.dbf");
    let b = format!("+{name}/sub/b.dbf");
    cairn(&["cp", src1.to_str().unwrap(), &a]).ok();
    cairn(&["mkdir", &format!("+{name}/sub")]).ok();
    cairn(&["cp", src2.to_str().unwrap(), &b]).ok();
    let d1 = format!("{name}_0001");
    let d3 = format!("{name}_0003");
    let before = cairn(&["group", "disks", name, "--json"]).ok().json();
    let held = used_aus(&before, &d1) + used_aus(&before, &d3);
    let add4 = format!("{}=FG1", paths[4]);
    let add5 = format!("{}=FG2", paths[5]);
    let change = [
        "group", "alter", name, "--add", &add4, "--add", &add5, "--drop", &d1, "--drop", &d3,
        "--json",
    ];

    // --explain: the exact work, and nothing changed (the new devices are
    // still blank).
    let mut explain_args = change.to_vec();
    explain_args.push("--explain");
    let explained = cairn(&explain_args).ok().json();
    let work = &explained["explain"];
    assert_eq!(
        work["aus_to_move"].as_u64().unwrap(),
        held,
        "the plan moves exactly what the dropped disks hold: {work:#}"
    );
    assert_eq!(work["balance_moves"], 0, "{work:#}");
    assert!(
        work["estimated_seconds"].as_f64().unwrap() > 0.0,
        "{work:#}"
    );
    let list = cairn(&["disk", "list", "--json"]).ok().json();
    assert_eq!(status_of(&list, &paths[4]), "CANDIDATE");
    assert_eq!(status_of(&list, &paths[5]), "CANDIDATE");
    assert_eq!(
        cairn(&["group", "disks", name, "--json"]).ok().json(),
        before
    );

    // Refusals: one line, nothing changed.
    let d2 = format!("{name}_0002");
    cairn(&["group", "alter", name, "--drop", &d2, "--drop", &d3]).refused("failure group");
    cairn(&["group", "alter", name, "--drop", "NOPE"]).refused("has no disk NOPE");
    cairn(&["group", "alter", name, "--add", &paths[0]]).refused("already a disk");
    cairn(&["group", "alter", name]).refused("--add");
    cairn(&["group", "drop-disk", name, &d2, "--force"]).refused("only an OFFLINE disk");
    cairn(&["group", "replace", name, &d2, "--with", &paths[4]]).refused("only an OFFLINE disk");
    cairn(&["group", "undrop", name]).refused("no drop pending");
    let bad = cairn(&["group", "rebalance", name, "--power", "2000"]);
    assert_eq!(
        bad.code, 2,
        "clap refuses a power out of range: {}",
        bad.stderr
    );
    assert_eq!(
        cairn(&["group", "disks", name, "--json"]).ok().json(),
        before
    );

    // The change itself (a served change returns once its rebalance has
    // started, unless told to wait; a held one always waits).
    let mut wait = change.to_vec();
    wait.push("--wait");
    let done = cairn(&wait).ok().json();
    let r = &done["rebalance"];
    assert_eq!(
        r["aus_moved"], work["aus_to_move"],
        "--explain said it: {r:#}"
    );
    assert_eq!(r["disks_dropped"], serde_json::json!([d1, d3]));
    assert!(r["moves_left"].as_array().unwrap().is_empty(), "{r:#}");
    let after = cairn(&["group", "disks", name, "--json"]).ok().json();
    assert_eq!(
        labels(&after),
        [
            format!("{name}_0000"),
            d2.clone(),
            format!("{name}_0004"),
            format!("{name}_0005")
        ]
    );
    let list = cairn(&["disk", "list", "--json"]).ok().json();
    assert_eq!(status_of(&list, &paths[1]), "FORMER");
    assert_eq!(status_of(&list, &paths[3]), "FORMER");
    assert_eq!(status_of(&list, &paths[4]), "MEMBER");
    cairn(&["group", "check", name]).ok();
    for (src, f) in [(&src1, &a), (&src2, &b)] {
        let out = dir.join("out.bin");
        let _ = std::fs::remove_file(&out);
        cairn(&["cp", f, out.to_str().unwrap()]).ok();
        assert_eq!(digest(&out), digest(src), "{f} reads back as written");
    }
    // Nothing running now.
    assert_eq!(
        cairn(&["group", "ops", name, "--json"]).ok().json(),
        serde_json::json!([])
    );
    // A FORMER disk may join again without --force; power 0 leaves the
    // rebalance pending, and `rebalance` finishes it.
    let paused = cairn(&[
        "group", "alter", name, "--add", &paths[1], "--drop", &d2, "--power", "0", "--wait",
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(paused["rebalance"]["paused"], true, "{paused:#}");
    let rows = cairn(&["group", "disks", name, "--json"]).ok().json();
    let dropping = rows.as_array().unwrap().iter().find(|r| r["label"] == d2);
    assert_eq!(dropping.unwrap()["dropping"], true, "{rows:#}");
    if door.host == Host::Held {
        let mounted = cairn(&["group", "mount", name]).ok();
        assert!(
            mounted.stderr.contains("rebalance is pending"),
            "{}",
            mounted.stderr
        );
    } else {
        // The service holds the group: a mount is refused, naming it.
        cairn(&["group", "mount", name]).refused("this Cairn service");
    }
    let resumed = cairn(&[
        "group",
        "rebalance",
        name,
        "--power",
        "16",
        "--wait",
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(
        resumed["rebalance"]["disks_dropped"],
        serde_json::json!([d2])
    );
    cairn(&["group", "check", name]).ok();
    // A service stops cleanly (exit 0).
    door.stop();
}

two_hosts!(add_and_drop_on_sparse_files, add_and_drop);
fn add_and_drop(host: Host) {
    let Some(mut door) = Door::new(host) else {
        return;
    };
    let paths: Vec<String> = (0..6)
        .map(|i| {
            sparse(&door.path(&format!("d{i}.img")), 160 * MIB)
                .display()
                .to_string()
        })
        .collect();
    add_two_drop_two(&mut door, &paths, "MOVE");
}

/// 512-byte sectors held, 4096-byte sectors served.
#[test]
fn add_and_drop_on_512_and_4096_byte_loop_devices() {
    if let Some(reason) = loop_device::unavailable_reason() {
        prerequisite::missing(&reason);
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (sector, host) in [(512u32, Host::Held), (4096, Host::Served)] {
        let dir = scratch();
        let mut devices: Vec<LoopDevice> = Vec::new();
        for i in 0..6 {
            match LoopDevice::create(&dir.path().join(format!("l{i}.img")), 160 * MIB, sector) {
                Ok(lo) => devices.push(lo),
                Err(reason) => {
                    prerequisite::missing(&reason);
                    return;
                }
            }
        }
        let paths: Vec<String> = devices
            .iter()
            .map(|d| d.path.display().to_string())
            .collect();
        let Some(mut door) = Door::on(Rig::discovering(|_| paths.join(",")), host) else {
            return;
        };
        add_two_drop_two(&mut door, &paths, &format!("MOVE{sector}"));
        drop(door);
        drop(devices);
    }
}

/// A change whose rebalance could not run (a disk is OFFLINE) is refused
/// before anything changes: the new disk stays blank; `replace` puts a new
/// disk in place of the OFFLINE one, rebuilt from the mirrors; `drop-disk
/// --force` is refused in external redundancy.
#[test]
fn changes_with_a_disk_offline() {
    let dir = scratch();
    let root = dir.path().to_path_buf();
    let paths: Vec<String> = (0..6)
        .map(|i| {
            sparse(&root.join(format!("d{i}.img")), 160 * MIB)
                .display()
                .to_string()
        })
        .collect();
    let glob = format!("{}/*.img", root.display());
    let run = root.join("run").display().to_string();
    let cairn = |args: &[&str]| cairn_with(&glob, &[("CAIRN_RUN_DIR", &run)], args);
    let mut args = vec!["group", "create", "OFF"];
    let disks: Vec<String> = paths[..4]
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{p}=FG{}", 1 + i / 2))
        .collect();
    for d in &disks {
        args.extend(["--disk", d]);
    }
    cairn(&args).ok();
    let src = random_file(&root.join("src.bin"), 12 * MIB, 5);
    cairn(&["cp", src.to_str().unwrap(), "+OFF/a.dbf"]).ok();
    // OFF_0003 goes away; a mount records it OFFLINE.
    std::fs::rename(&paths[3], root.join("d3.away")).unwrap();
    cairn(&["group", "mount", "OFF"]).ok();
    cairn(&["group", "alter", "OFF", "--add", &paths[4]]).refused("OFF_0003 is OFFLINE");
    let list = cairn(&["disk", "list", "--json"]).ok().json();
    assert_eq!(status_of(&list, &paths[4]), "CANDIDATE", "nothing changed");
    // Replace it: the new disk joins FG2 and OFF_0003's copies are rebuilt
    // from their mirrors onto it.
    let done = cairn(&[
        "group", "replace", "OFF", "OFF_0003", "--with", &paths[4], "--json",
    ])
    .ok()
    .json();
    let r = &done["rebalance"];
    assert!(r["copies_rebuilt"].as_u64().unwrap() > 0, "{r:#}");
    assert_eq!(r["disks_dropped"], serde_json::json!(["OFF_0003"]));
    let rows = cairn(&["group", "disks", "OFF", "--json"]).ok().json();
    assert_eq!(
        labels(&rows),
        ["OFF_0000", "OFF_0001", "OFF_0002", "OFF_0004"]
    );
    let fg2: Vec<&Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["failgroup"] == "FG2")
        .collect();
    assert_eq!(
        fg2.len(),
        2,
        "the new disk took the failure group: {rows:#}"
    );
    cairn(&["group", "check", "OFF"]).ok();
    // FG1 gone: FG2 alone (OFF_0002 and the new disk) reads the file whole.
    for p in &paths[..2] {
        std::fs::rename(p, format!("{p}.away")).unwrap();
    }
    let out = root.join("out.bin");
    cairn(&["cp", "+OFF/a.dbf", out.to_str().unwrap()]).ok();
    assert_eq!(digest(&out), digest(&src));
}

/// `alter --resize` with the real binary on four devices of 160 MiB (the
/// first four of `paths`) that `grow` can make 224 MiB: a shrink of one
/// disk to 24 MiB explains and then moves what lies past the cut, after
/// which the disk's size is the new one; growing past the device is
/// refused; the device grows and `--resize` takes the room at once; every
/// file reads back and `check` is clean.
fn shrink_and_grow(
    dir: &Path,
    discover: &str,
    run_dir: &str,
    paths: &[String],
    name: &str,
    grow: &dyn Fn(&str, u64),
) {
    let cairn = |args: &[&str]| cairn_with(discover, &[("CAIRN_RUN_DIR", run_dir)], args);
    let mut args = vec!["group".to_string(), "create".into(), name.into()];
    for (i, p) in paths[..4].iter().enumerate() {
        args.extend(["--disk".into(), format!("{p}=FG{}", 1 + i / 2)]);
    }
    cairn(&args.iter().map(String::as_str).collect::<Vec<_>>()).ok();
    let src = random_file(&dir.join("src.bin"), 40 * MIB, 7);
    let file = format!("+{name}/a.dbf");
    cairn(&["cp", src.to_str().unwrap(), &file]).ok();
    let reads_back = || {
        let out = dir.join("out.bin");
        let _ = std::fs::remove_file(&out);
        cairn(&["cp", &file, out.to_str().unwrap()]).ok();
        assert_eq!(digest(&out), digest(&src), "{file} reads back as written");
    };
    let d0 = format!("{name}_0000");
    let before = cairn(&["group", "disks", name, "--json"]).ok().json();
    let shrink = format!("{d0}=24M");
    let explained = cairn(&[
        "group",
        "alter",
        name,
        "--resize",
        &shrink,
        "--explain",
        "--json",
    ])
    .ok()
    .json();
    let work = &explained["explain"];
    assert!(work["aus_to_move"].as_u64().unwrap() > 0, "{work:#}");
    assert_eq!(
        cairn(&["group", "disks", name, "--json"]).ok().json(),
        before,
        "--explain changed nothing"
    );
    // Refusals: one line, nothing changed.
    cairn(&["group", "alter", name, "--resize", &format!("{d0}=300M")]).refused("beyond its end");
    cairn(&["group", "alter", name, "--resize", &format!("{d0}=2M")]).refused("too small");
    cairn(&["group", "alter", name, "--resize", "NOPE=20M"]).refused("has no disk NOPE");
    // Malformed arguments: clap's usage error (exit 2), saying what to write.
    for (arg, says) in [(d0.clone(), "DISK=SIZE"), (format!("{d0}=lots"), "size")] {
        let bad = cairn(&["group", "alter", name, "--resize", &arg]);
        assert_eq!(bad.code, 2, "{}", bad.stderr);
        assert!(bad.stderr.contains(says), "{}", bad.stderr);
    }
    assert_eq!(
        cairn(&["group", "disks", name, "--json"]).ok().json(),
        before
    );
    // The shrink: what lay past the cut moved, what --explain said.
    let done = cairn(&["group", "alter", name, "--resize", &shrink, "--json"])
        .ok()
        .json();
    let r = &done["rebalance"];
    assert_eq!(r["aus_moved"], work["aus_to_move"], "{r:#}");
    // 4-MiB AUs: 24 MiB holds five below the tail header's MiB, so the
    // disk ends at 21 MiB, within what was asked.
    assert_eq!(
        r["disks_resized"],
        serde_json::json!([format!("{d0} to {} bytes", 21 * MIB)])
    );
    let rows = cairn(&["group", "disks", name, "--json"]).ok().json();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == d0.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["size_bytes"], 21 * MIB, "{row:#}");
    assert!(row["shrinking_to_bytes"].is_null(), "{row:#}");
    cairn(&["group", "check", name]).ok();
    reads_back();
    // The device grows; --resize takes the room, and the rebalance gives
    // the disk its share.
    grow(&paths[0], 224 * MIB);
    let grown = cairn(&[
        "group",
        "alter",
        name,
        "--resize",
        &format!("{d0}=224M"),
        "--json",
    ])
    .ok()
    .json();
    assert!(
        grown["rebalance"]["aus_moved"].as_u64().unwrap() > 0,
        "{grown:#}"
    );
    let rows = cairn(&["group", "disks", name, "--json"]).ok().json();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == d0.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["size_bytes"], 224 * MIB, "{row:#}");
    cairn(&["group", "check", name]).ok();
    reads_back();
    scrub(dir, discover, run_dir, paths, name, &src, &file);
}

/// `group scrub` on the group `shrink_and_grow` left: clean at first; then
/// one copy of a 4 KiB block of `file` (at 8 MiB + 64 KiB) is overwritten
/// on its device, and the scrub names that byte range and both copies. Two
/// copies that differ: `--repair` alone rewrites nothing (nothing says
/// which is right); with `--prefer` the untouched copy's disk it rewrites
/// the other from it and scrubs clean after. Then both copies as they lie
/// on their devices hold the block's bytes, and the file read with the
/// untouched copy's disk offline (the repaired copy alone) is whole.
fn scrub(
    dir: &Path,
    discover: &str,
    run_dir: &str,
    paths: &[String],
    name: &str,
    src: &Path,
    file: &str,
) {
    use std::os::unix::fs::FileExt;
    let cairn = |args: &[&str]| cairn_with(discover, &[("CAIRN_RUN_DIR", run_dir)], args);
    let clean = cairn(&["group", "scrub", name, "--json"]).ok().json();
    let s = &clean["scrub"];
    assert_eq!(s["problems"], serde_json::json!([]), "{s:#}");
    assert!(s["bytes_read"].as_u64().unwrap() >= 2 * 40 * MIB, "{s:#}");
    // Where the two copies of the block lie: search the devices. Disks 0
    // and 1 are failure group FG1, 2 and 3 FG2.
    let at = 8 * MIB + (64 << 10);
    let source = std::fs::read(src).unwrap();
    let block = &source[at as usize..at as usize + 4096];
    let mut hits: Vec<(usize, u64)> = Vec::new();
    for (i, p) in paths[..4].iter().enumerate() {
        let bytes = std::fs::read(p).unwrap();
        for (k, b) in bytes.chunks(4096).enumerate() {
            if b == block {
                hits.push((i, k as u64 * 4096));
            }
        }
    }
    assert_eq!(hits.len(), 2, "two copies of the block: {hits:?}");
    assert_ne!(hits[0].0 / 2, hits[1].0 / 2, "copies in two failure groups");
    let (hit, good) = (hits[1], hits[0]);
    let device = std::fs::OpenOptions::new()
        .write(true)
        .open(&paths[hit.0])
        .unwrap();
    device.write_all_at(&[0x5A; 4096], hit.1).unwrap();
    device.sync_all().unwrap();
    drop(device);
    // A copy as it lies on its device, around the page cache.
    let raw = |(i, offset): (usize, u64)| {
        use std::os::unix::fs::OpenOptionsExt;
        let device = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&paths[i])
            .unwrap();
        let mut buf = cairn_io::AlignedBuf::zeroed(4096);
        device.read_exact_at(&mut buf, offset).unwrap();
        buf.to_vec()
    };
    let rows = cairn(&["group", "disks", name, "--json"]).ok().json();
    let label_of = |path: &str| {
        let canon = std::fs::canonicalize(path).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .find(|d| {
                d["path"]
                    .as_str()
                    .is_some_and(|p| std::fs::canonicalize(p).ok() == Some(canon.clone()))
            })
            .unwrap_or_else(|| panic!("{path} in {rows:#}"))["label"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let hit_label = label_of(&paths[hit.0]);
    // The copy the test did not touch: the one that is right, known from
    // the source file, not from what scrub says.
    let good_label = label_of(&paths[good.0]);
    let found = cairn(&["group", "scrub", name, "--json"]);
    assert_eq!(
        found.code, 1,
        "a disagreement fails the scrub: {}",
        found.stderr
    );
    assert!(found.stderr.contains("--repair"), "{}", found.stderr);
    let problems = found.json()["scrub"]["problems"].clone();
    let range = format!("bytes {at}..{}", at + 4096);
    let p = problems
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["location"].as_str().unwrap().contains(&range))
        .unwrap_or_else(|| panic!("{range} named in {problems:#}"));
    let location = p["location"].as_str().unwrap();
    assert!(location.contains(file), "{p:#}");
    // Two copies that differ: both are named (nothing says which is
    // damaged), each once.
    let named = location
        .rsplit_once("copies on ")
        .map(|(_, disks)| {
            let mut d: Vec<&str> = disks.split(", ").collect();
            d.sort_unstable();
            d
        })
        .unwrap_or_default();
    let mut both = vec![hit_label.as_str(), good_label.as_str()];
    both.sort_unstable();
    assert_eq!(named, both, "both copies are named: {p:#}");
    // Two copies that differ: nothing says which is right, and a repair
    // does not guess (it would rewrite the good copy from the bad one half
    // the time).
    assert!(p["what"].as_str().unwrap().contains("--prefer"), "{p:#}");
    let unsure = cairn(&["group", "scrub", name, "--repair", "--json"]);
    assert_eq!(unsure.code, 1, "{}", unsure.stderr);
    assert_eq!(unsure.json()["scrub"]["bytes_rewritten"], 0);
    assert_eq!(
        raw(hit),
        vec![0x5A; 4096],
        "nothing rewritten without a choice"
    );
    assert_eq!(raw(good), block, "nothing rewritten without a choice");
    // Told which copy to keep, it rewrites the other from it.
    let repaired = cairn(&[
        "group",
        "scrub",
        name,
        "--repair",
        "--prefer",
        &good_label,
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(repaired["scrub"]["bytes_rewritten"], 4096, "{repaired:#}");
    let again = cairn(&["group", "scrub", name, "--json"]).ok().json();
    assert_eq!(again["scrub"]["problems"], serde_json::json!([]));
    // On the devices, both copies are the block: the damaged one
    // rewritten, the preferred one left alone.
    assert_eq!(raw(hit), block, "the repaired copy holds the block");
    assert_eq!(raw(good), block, "the preferred copy is untouched");
    // The repaired copy alone serves the file: the good copy's disk is
    // taken offline, and the file reads whole, as the source.
    cairn(&["group", "offline", name, &good_label]).ok();
    let out = dir.join("scrubbed.bin");
    cairn(&["cp", file, out.to_str().unwrap()]).ok();
    let got = std::fs::read(&out).unwrap();
    assert!(
        got == source,
        "the copy on {hit_label}, repaired, reads as the source"
    );
    cairn(&["group", "online", name, &good_label]).ok();
    cairn(&["group", "check", name]).ok();
}

#[test]
fn resize_on_sparse_files() {
    let dir = scratch();
    let root = dir.path().to_path_buf();
    let paths: Vec<String> = (0..4)
        .map(|i| {
            sparse(&root.join(format!("d{i}.img")), 160 * MIB)
                .display()
                .to_string()
        })
        .collect();
    let glob = format!("{}/*.img", root.display());
    let run = root.join("run").display().to_string();
    let grow = |path: &str, size: u64| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(size)
            .unwrap();
    };
    shrink_and_grow(&root, &glob, &run, &paths, "SIZE", &grow);
}

#[test]
fn resize_on_512_and_4096_byte_loop_devices() {
    if let Some(reason) = loop_device::unavailable_reason() {
        prerequisite::missing(&reason);
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for sector in [512u32, 4096] {
        let dir = scratch();
        let mut devices: Vec<LoopDevice> = Vec::new();
        for i in 0..4 {
            match LoopDevice::create(&dir.path().join(format!("l{i}.img")), 160 * MIB, sector) {
                Ok(lo) => devices.push(lo),
                Err(reason) => {
                    prerequisite::missing(&reason);
                    return;
                }
            }
        }
        let paths: Vec<String> = devices
            .iter()
            .map(|d| d.path.display().to_string())
            .collect();
        let backing: Vec<(String, PathBuf)> = devices
            .iter()
            .map(|d| (d.path.display().to_string(), d.backing_file.clone()))
            .collect();
        // The backing file grows, then the loop device learns its size.
        let grow = |path: &str, size: u64| {
            let (_, file) = backing.iter().find(|(p, _)| p == path).unwrap();
            std::fs::OpenOptions::new()
                .write(true)
                .open(file)
                .unwrap()
                .set_len(size)
                .unwrap();
            let status = std::process::Command::new("losetup")
                .args(["-c", path])
                .status()
                .unwrap();
            assert!(status.success(), "losetup -c {path}");
        };
        let discover = paths.join(",");
        let run: PathBuf = dir.path().join("run");
        shrink_and_grow(
            dir.path(),
            &discover,
            &run.display().to_string(),
            &paths,
            &format!("SIZE{sector}"),
            &grow,
        );
        drop(devices);
    }
}

/// A disk labelled at one size and grown before it is added: the group
/// uses the device's size, so the header's tail copy must move to that end
/// (it lay among the AUs the group hands out, where data overwrote it).
/// Filled to the brim, the group scrubs clean and the header is whole.
#[test]
fn a_disk_grown_after_its_label_keeps_its_header_when_added() {
    let dir = scratch();
    let root = dir.path().to_path_buf();
    let d0 = sparse(&root.join("d0.img"), 96 * MIB);
    let d1 = sparse(&root.join("d1.img"), 24 * MIB);
    let glob = format!("{}/*.img", root.display());
    let run = root.join("run").display().to_string();
    let cairn = |args: &[&str]| cairn_with(&glob, &[("CAIRN_RUN_DIR", &run)], args);
    cairn(&[
        "group",
        "create",
        "GROWN",
        "--redundancy",
        "external",
        "--au-size",
        "1M",
        "--disk",
        d0.to_str().unwrap(),
    ])
    .ok();
    cairn(&["disk", "label", "LATE", d1.to_str().unwrap()]).ok();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&d1)
        .unwrap()
        .set_len(96 * MIB)
        .unwrap();
    // Power 0: no rebalance completes (which would rewrite a header out of
    // place): the add itself must put it right.
    cairn(&[
        "group",
        "alter",
        "GROWN",
        "--add",
        d1.to_str().unwrap(),
        "--power",
        "0",
    ])
    .ok();
    // Fill both disks: the old tail copy's place (23 MiB) gets data.
    let src = random_file(&root.join("src.bin"), 150 * MIB, 3);
    cairn(&["cp", src.to_str().unwrap(), "+GROWN/full.dbf"]).ok();
    let s = cairn(&["group", "scrub", "GROWN", "--json"]).ok().json();
    assert_eq!(s["scrub"]["problems"], serde_json::json!([]), "{s:#}");
    let list = cairn(&["disk", "list", "--json"]).ok().json();
    let d1_row = list["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == "LATE")
        .unwrap()
        .clone();
    assert_eq!(d1_row["header"], "ok", "{d1_row:#}");
    let out = root.join("out.bin");
    cairn(&["cp", "+GROWN/full.dbf", out.to_str().unwrap()]).ok();
    assert_eq!(digest(&out), digest(&src));
}
