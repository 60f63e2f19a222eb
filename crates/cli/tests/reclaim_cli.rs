//! Thin reclaim end to end (issue 18, docs/thin-reclaim.md): the reference
//! post's story on loop devices over sparse files. A group that does not
//! discard as it frees (`thin_provisioned=false`) fills a file and drops
//! it; the backing files still hold the space; `group reclaim` gives it
//! back without writing data, and a second reclaim has nothing to do. A
//! zero-fill does the same for an array that only detects zeros, emulated
//! by `fallocate --dig-holes` on the backing files.
//!
//! Each scenario runs twice from one body (`two_hosts!`): with the CLI
//! mounting the group for each command, and with `cairn serve` holding it
//! and every command after `group create` going through its socket.
//!
//! Needs root and loop devices (and FUSE to serve); elsewhere each test says
//! `skipped: <why>`, and under CAIRN_REQUIRE_TOOLS (CI) fails.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use cairn_io::test_support::{loop_device, prerequisite, LoopDevice};
use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;

/// What the file the group drops takes, per copy.
const BIG: u64 = 160 * MIB;

/// Whether loop devices can be made here; if not, says why, out loud.
fn loop_here() -> bool {
    match loop_device::unavailable_reason() {
        None => true,
        Some(why) => {
            prerequisite::missing(&format!("loop devices: {why}"));
            false
        }
    }
}

/// A device's counters from /proc/diskstats: sectors written, and sectors
/// discarded (kept apart by the kernel; write-zeroes count as writes).
fn diskstats(device: &LoopDevice) -> (u64, u64) {
    let name = device.name();
    let all = std::fs::read_to_string("/proc/diskstats").unwrap();
    let fields: Vec<u64> = all
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&name.as_str()))
        .unwrap_or_else(|| panic!("{name} not in /proc/diskstats"))
        .iter()
        .skip(3)
        .map(|v| v.parse().unwrap())
        .collect();
    (fields[6], fields[13])
}

/// Sectors written and discarded on every device since `before`, in bytes.
fn io_since(devices: &[LoopDevice], before: &[(u64, u64)]) -> (u64, u64) {
    devices
        .iter()
        .zip(before)
        .map(|(d, b)| {
            let now = diskstats(d);
            ((now.0 - b.0) * 512, (now.1 - b.1) * 512)
        })
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// What the heartbeat of a service (`CAIRN_TEST_HEARTBEAT_MS` unset: a
/// beat a second, one 4 KiB block a disk) may have written in `elapsed`,
/// a beat either side included; nothing without a service.
fn heartbeats(host: Host, elapsed: std::time::Duration, disks: usize) -> u64 {
    match host {
        Host::Held => 0,
        Host::Served => (elapsed.as_secs() + 2) * disks as u64 * 4096,
    }
}

fn held(devices: &[LoopDevice]) -> u64 {
    devices.iter().map(|d| allocated(&d.backing_file)).sum()
}

/// Two loop devices over sparse files, group DATA over them (normal
/// redundancy, one disk per failure group) that keeps quiet as it frees; a
/// file `keep.dbf` that stays, and `big.dbf` of [`BIG`] bytes of random
/// data, deleted. Returns the devices, the door to the group on `host`
/// (served from just after `group create`), the file's digest, and what
/// the backing files held before `big.dbf` was written.
fn dropped_tablespace(scratch: &Rig, host: Host) -> Option<(Vec<LoopDevice>, Door, u32, u64)> {
    let mut devices = Vec::new();
    for i in 0..2 {
        match LoopDevice::create(&scratch.path(&format!("d{i}.raw")), 512 * MIB, 4096) {
            Ok(d) => devices.push(d),
            Err(why) => {
                prerequisite::missing(&why);
                return None;
            }
        }
    }
    let mut rig = Door::on(rig_on(&devices, scratch), host)?;
    let mut args = vec!["group", "create", "DATA", "--redundancy", "normal"];
    let specs: Vec<String> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| format!("{}=FG{i}", d.path.display()))
        .collect();
    for s in &specs {
        args.extend(["--disk", s.as_str()]);
    }
    rig.rig.cairn(&args).ok();
    rig.start();
    rig.cairn(&["group", "set", "DATA", "thin_provisioned=false"])
        .ok();
    let keep = random_file(&rig.path("keep.bin"), 8 * MIB, 7);
    rig.cairn(&["cp", keep.to_str().unwrap(), "+DATA/keep.dbf"])
        .ok();
    let digest_keep = digest(&keep);
    let empty = held(&devices);
    let big = random_file(&rig.path("big.bin"), BIG, 18);
    rig.cairn(&["cp", big.to_str().unwrap(), "+DATA/big.dbf"])
        .ok();
    std::fs::remove_file(&big).unwrap();
    let full = held(&devices);
    assert!(
        full >= empty + 2 * BIG,
        "both copies of the file are on the backing files: {full} vs {empty}"
    );
    rig.cairn(&["rm", "+DATA/big.dbf"]).ok();
    let after_rm = held(&devices);
    assert!(
        after_rm + MIB >= full,
        "with thin_provisioned=false a delete gives nothing back: {after_rm} of {full}"
    );
    Some((devices, rig, digest_keep, empty))
}

fn rig_on(devices: &[LoopDevice], rig: &Rig) -> Rig {
    let discover = devices
        .iter()
        .map(|d| d.path.display().to_string())
        .collect::<Vec<_>>()
        .join(",");
    Rig {
        dir: tempfile::tempdir_in(rig.dir.path()).unwrap(),
        discover,
        run_dir: rig.run_dir.clone(),
    }
}

/// `group space --json`: per disk, returnable bytes.
fn returnable(rig: &Door) -> Vec<u64> {
    let space = rig.cairn(&["group", "space", "DATA", "--json"]).ok().json();
    space
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["returnable_bytes"].as_u64().unwrap())
        .collect()
}

/// The file in use reads back whole and the group checks clean; then a
/// service stops cleanly (exit 0).
fn keep_is_intact(rig: &mut Door, digest_keep: u32) {
    let out = rig.path("keep.out");
    let _ = std::fs::remove_file(&out);
    rig.cairn(&["cp", "+DATA/keep.dbf", out.to_str().unwrap()])
        .ok();
    assert_eq!(
        digest(&out),
        digest_keep,
        "the file in use reads back whole"
    );
    rig.check_clean("DATA");
    rig.stop();
}

two_hosts!(
    reclaim_gives_back_what_a_dropped_tablespace_held_without_writing_data,
    reclaim
);
fn reclaim(host: Host) {
    if !loop_here() {
        return;
    }
    let scratch = Rig::new();
    // The devices outlive the door (bindings drop last to first): the
    // service lets go of them before they are detached.
    let Some((devices, mut rig, digest_keep, empty)) = dropped_tablespace(&scratch, host) else {
        return;
    };
    let held_before = held(&devices);
    let dropped = held_before - empty;

    // What can be given back is known, and said, without touching a disk.
    for r in returnable(&rig) {
        assert!(r >= BIG, "the dropped file's AUs are returnable: {r}");
    }
    let before = devices.iter().map(diskstats).collect::<Vec<_>>();
    let started = std::time::Instant::now();
    let explain = rig
        .cairn(&["group", "reclaim", "DATA", "--explain", "--json"])
        .ok()
        .json();
    assert_eq!(explain["reclaim"]["explain"], true);
    assert!(explain["reclaim"]["returnable_bytes"].as_u64().unwrap() >= 2 * BIG);
    assert_eq!(explain["reclaim"]["returned_bytes"], 0);
    let (written, discarded) = io_since(&devices, &before);
    assert_eq!(discarded, 0, "--explain discards nothing");
    assert!(
        written <= heartbeats(host, started.elapsed(), devices.len()),
        "--explain writes nothing but the service's heartbeat: {written} bytes"
    );
    assert_eq!(held(&devices), held_before);

    // Bad input: one line, non-zero, nothing changed.
    rig.cairn(&["group", "reclaim", "DATA", "--rate", "abc"])
        .refused("--rate \"abc\" is not a rate");
    rig.cairn(&["group", "reclaim", "DATA", "--zero-fill"])
        .refused("accepts discard");
    assert_eq!(io_since(&devices, &before).1, 0, "nothing discarded");
    assert_eq!(held(&devices), held_before);

    // The reclaim: every returnable AU discarded, no data written.
    let before = devices.iter().map(diskstats).collect::<Vec<_>>();
    let run = rig
        .cairn(&[
            "group", "reclaim", "DATA", "--rate", "0", "--wait", "--json",
        ])
        .ok()
        .json();
    let report: &Value = &run["reclaim"];
    let (written, discarded) = io_since(&devices, &before);
    let returned = report["returned_bytes"].as_u64().unwrap();
    assert_eq!(returned, report["returnable_bytes"].as_u64().unwrap());
    assert_eq!(discarded, returned, "every returnable byte, discarded once");
    let after = held(&devices);
    assert!(
        (held_before - after) as f64 >= 0.99 * dropped as f64,
        "reclaim gave back {} of the {} MiB the dropped file held",
        (held_before - after) >> 20,
        dropped >> 20
    );
    // Metadata only: the mount's superblocks, the journal, the map's blocks.
    assert!(
        written <= 4 * MIB,
        "a reclaim writes no data: {written} bytes written"
    );
    assert_eq!(returnable(&rig), vec![0, 0]);

    // A second reclaim finds nothing to do.
    let before = devices.iter().map(diskstats).collect::<Vec<_>>();
    let again = rig.cairn(&["group", "reclaim", "DATA", "--wait"]).ok();
    assert!(
        again.stdout.starts_with("nothing to reclaim in DATA"),
        "{}",
        again.stdout
    );
    assert_eq!(io_since(&devices, &before).1, 0, "nothing discarded");
    keep_is_intact(&mut rig, digest_keep);
}

two_hosts!(
    zero_fill_lets_a_zero_detecting_array_take_back_the_free_space_and_writes_no_au_in_use,
    zero_fill
);
fn zero_fill(host: Host) {
    if !loop_here() {
        return;
    }
    if let Err(why) = tool("fallocate", &["--version"]) {
        prerequisite::missing(&format!("fallocate (util-linux): {why}"));
        return;
    }
    let scratch = Rig::new();
    // The devices outlive the door (bindings drop last to first): the
    // service lets go of them before they are detached.
    let Some((devices, mut rig, digest_keep, empty)) = dropped_tablespace(&scratch, host) else {
        return;
    };
    let held_before = held(&devices);
    let dropped = held_before - empty;
    let returnable_before: u64 = returnable(&rig).iter().sum();

    let before = devices.iter().map(diskstats).collect::<Vec<_>>();
    let run = rig
        .cairn(&[
            "group",
            "reclaim",
            "DATA",
            "--zero-fill",
            "--force",
            "--rate",
            "0",
            "--wait",
            "--json",
        ])
        .ok()
        .json();
    let (written, discarded) = io_since(&devices, &before);
    assert_eq!(run["reclaim"]["method"], "zero-fill");
    let returned = run["reclaim"]["returned_bytes"].as_u64().unwrap();
    assert_eq!(returned, returnable_before);
    assert_eq!(discarded, 0, "a zero-fill discards nothing");
    // Zeros over the free AUs, and metadata: nothing else.
    assert!(
        written >= returned && written <= returned + 4 * MIB,
        "zeros written: {written}, free AUs zero-filled: {returned}"
    );
    // The array's zero detection, emulated: the zeros become holes.
    for d in &devices {
        tool(
            "fallocate",
            &["--dig-holes", d.backing_file.to_str().unwrap()],
        )
        .unwrap();
    }
    let after = held(&devices);
    assert!(
        held_before.saturating_sub(after) as f64 >= 0.99 * dropped as f64,
        "zero-fill let the array take back {} of {} MiB",
        held_before.saturating_sub(after) >> 20,
        dropped >> 20
    );
    assert_eq!(returnable(&rig), vec![0, 0]);
    keep_is_intact(&mut rig, digest_keep);
}
