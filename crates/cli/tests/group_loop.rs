//! End to end for disk groups on loop devices with 512- and 4096-byte logical
//! sectors: the real binary against real block devices. Needs root and loop
//! support; elsewhere each test prints `skipped: <reason>`, and under
//! CAIRN_REQUIRE_TOOLS (CI) fails.
//!
//! The tests here run one at a time: one of them detaches a loop device while
//! its node stays named in a discovery string, and a parallel test attaching a
//! new device could be given that very node.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Mutex;

use cairn_io::test_support::{loop_device, prerequisite, LoopDevice};
use common::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Whether loop devices can be made here; if not, says why, out loud.
fn loop_devices_available() -> bool {
    match loop_device::unavailable_reason() {
        None => true,
        Some(reason) => {
            prerequisite::missing(&reason);
            false
        }
    }
}

/// Loop devices `<prefix>0.img` ... of `size_bytes` with `sector_bytes`
/// sectors, or `None` after saying why they cannot be made here.
fn loop_devices(
    dir: &Path,
    prefix: &str,
    sectors: &[u32],
    size_bytes: u64,
) -> Option<Vec<LoopDevice>> {
    let mut devices = Vec::new();
    for (i, sector) in sectors.iter().enumerate() {
        match LoopDevice::create(&dir.join(format!("{prefix}{i}.img")), size_bytes, *sector) {
            Ok(lo) => devices.push(lo),
            Err(reason) => {
                prerequisite::missing(&reason);
                return None;
            }
        }
    }
    Some(devices)
}

/// The discovery string naming exactly `devices`.
fn discovery(devices: &[LoopDevice]) -> String {
    devices
        .iter()
        .map(|d| d.path.display().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

struct Rig<'a> {
    dir: &'a Path,
    discover: String,
    run_dir: String,
}

impl Rig<'_> {
    fn cairn(&self, args: &[&str]) -> Run {
        cairn_with(&self.discover, &[("CAIRN_RUN_DIR", &self.run_dir)], args)
    }

    fn assert_reads_back(&self, group_path: &str, expected: &Path) {
        let out = self.dir.join("out.bin");
        let _ = std::fs::remove_file(&out);
        self.cairn(&["cp", group_path, out.to_str().unwrap()]).ok();
        assert_eq!(
            std::fs::metadata(&out).unwrap().len(),
            std::fs::metadata(expected).unwrap().len(),
            "{group_path}: size"
        );
        assert_eq!(digest(&out), digest(expected), "{group_path}: contents");
    }

    fn check_clean(&self, group: &str) {
        let run = self.cairn(&["group", "check", group]).ok();
        assert_eq!(run.stdout.lines().last(), Some("clean"), "{}", run.stdout);
    }

    fn list_row(&self, name: &str) -> Value {
        let list = self.cairn(&["group", "list", "--json"]).ok().json();
        list.as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {list:#}"))
            .clone()
    }
}

/// Normal redundancy over four devices, two failure groups.
fn create_normal(rig: &Rig<'_>, name: &str, devices: &[LoopDevice], extra: &[&str]) -> Run {
    let specs: Vec<String> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| format!("{}=FG{}", d.path.display(), 1 + i / 2))
        .collect();
    let mut args = vec!["group", "create", name, "--json"];
    for s in &specs {
        args.extend(["--disk", s]);
    }
    args.extend(extra);
    rig.cairn(&args)
}

#[test]
fn normal_groups_on_512_and_4096_byte_loop_devices() {
    if !loop_devices_available() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch();
    for sector in [512u32, 4096] {
        let Some(devices) =
            loop_devices(dir.path(), &format!("s{sector}-"), &[sector; 4], 256 * MIB)
        else {
            return;
        };
        let rig = Rig {
            dir: dir.path(),
            discover: discovery(&devices),
            run_dir: dir.path().join("run").display().to_string(),
        };
        let name = format!("LOOP{sector}");
        let sector_text = sector.to_string();
        let created = create_normal(&rig, &name, &devices, &["--sector-size", &sector_text])
            .ok()
            .json();
        assert_eq!(created["group"]["sector_bytes"], sector);
        let row = rig.list_row(&name);
        assert_eq!(
            (&row["sector_bytes"], &row["redundancy"], &row["state"]),
            (
                &Value::from(sector),
                &Value::from("NORMAL"),
                &Value::from("MOUNTABLE")
            ),
            "{row:#}"
        );
        let disks = rig.cairn(&["group", "disks", &name, "--json"]).ok().json();
        for (i, d) in disks.as_array().unwrap().iter().enumerate() {
            assert_eq!(d["path"], devices[i].path.display().to_string());
            assert_eq!(d["state"], "ONLINE");
        }

        let src = random_file(
            &dir.path().join(format!("src{sector}.bin")),
            20 * MIB,
            u64::from(sector),
        );
        let group_file = format!("+{name}/f.dbf");
        rig.cairn(&["cp", src.to_str().unwrap(), &group_file]).ok();
        rig.assert_reads_back(&group_file, &src);

        // A size that is no whole number of sectors: the file holds whole
        // sectors and knows its length in bytes, which is what comes back.
        let odd = random_file(&dir.path().join(format!("odd{sector}.bin")), 10_000, 7);
        let odd_group = format!("+{name}/odd.dbf");
        rig.cairn(&["cp", odd.to_str().unwrap(), &odd_group]).ok();
        let padded = 10_000u64.div_ceil(u64::from(sector)) * u64::from(sector);
        let listed = rig.cairn(&["ls", &odd_group, "--json"]).ok().json();
        assert_eq!(listed[0]["file"]["size_bytes"], padded);
        assert_eq!(listed[0]["file"]["attrs"]["byte_size"], 10_000);
        let out = dir.path().join("odd-out.bin");
        rig.cairn(&["cp", &odd_group, out.to_str().unwrap()]).ok();
        assert!(std::fs::read(&out).unwrap() == std::fs::read(&odd).unwrap());

        rig.check_clean(&name);
    }
}

#[test]
fn disks_of_512_and_4096_byte_sectors_do_not_mix() {
    if !loop_devices_available() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch();
    let Some(devices) = loop_devices(dir.path(), "mix", &[4096, 512, 4096, 4096], 128 * MIB) else {
        return;
    };
    let rig = Rig {
        dir: dir.path(),
        discover: discovery(&devices),
        run_dir: dir.path().join("run").display().to_string(),
    };
    // The group takes the first disk's sector size; the second differs. The
    // message names that disk: by its path or by the label it now carries.
    let differing = devices[1].path.display().to_string();
    let run = create_normal(&rig, "MIX", &devices, &[]);
    let run = run.refused("cannot mix");
    assert!(
        run.stderr.contains(&differing) || run.stderr.contains("MIX_0001"),
        "names the 512-byte disk {differing}: {}",
        run.stderr
    );
    assert!(run.stderr.contains("512-byte"), "{}", run.stderr);

    // Asked for 512-byte sectors, every 4096-byte disk is the odd one out.
    let second = [&devices[1], &devices[0]];
    let specs: Vec<String> = second
        .iter()
        .enumerate()
        .map(|(i, d)| format!("{}=FG{i}", d.path.display()))
        .collect();
    rig.cairn(&[
        "group",
        "create",
        "MIXB",
        "--sector-size",
        "512",
        "--disk",
        &specs[0],
        "--disk",
        &specs[1],
    ])
    .refused("4096-byte logical sectors but the group uses 512");

    let list = rig.cairn(&["group", "list", "--json"]).ok().json();
    assert_eq!(list, serde_json::json!([]), "no group was made");
}

#[test]
fn a_detached_loop_device_is_offlined_and_its_mirror_serves_the_data() {
    if !loop_devices_available() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch();
    let Some(mut devices) = loop_devices(dir.path(), "det", &[512; 4], 256 * MIB) else {
        return;
    };
    let rig = Rig {
        dir: dir.path(),
        discover: discovery(&devices),
        run_dir: dir.path().join("run").display().to_string(),
    };
    create_normal(&rig, "LOSS", &devices, &[]).ok();
    let src = random_file(&dir.path().join("src.bin"), 20 * MIB, 21);
    rig.cairn(&["cp", src.to_str().unwrap(), "+LOSS/f.dbf"])
        .ok();

    let lost = devices.pop().unwrap();
    drop(lost);
    let mounted = rig.cairn(&["group", "mount", "LOSS", "--json"]).ok().json();
    let offlined = mounted["recovery"]["disks_marked_offline"]
        .as_array()
        .unwrap();
    assert_eq!(offlined.len(), 1, "{mounted:#}");
    assert!(
        offlined[0].as_str().unwrap().contains("LOSS_0003"),
        "{mounted:#}"
    );
    let row = rig.list_row("LOSS");
    assert_eq!(
        (&row["state"], &row["offline_disks"]),
        (&Value::from("DEGRADED"), &Value::from(1)),
        "{row:#}"
    );
    let disks = rig.cairn(&["group", "disks", "LOSS", "--json"]).ok().json();
    assert_eq!(disks[3]["state"], "OFFLINE");

    rig.assert_reads_back("+LOSS/f.dbf", &src);
    // Consistent, but not clean: degraded has its own exit status.
    let run = rig.cairn(&["group", "check", "LOSS", "--json"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.json()["problems"], serde_json::json!([]));
}
