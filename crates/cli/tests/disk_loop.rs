//! End to end on loop devices with 512- and 4096-byte logical sectors: the real
//! binary against real block devices. Needs root and loop support; elsewhere
//! each test prints `skipped: <reason>`, and under CAIRN_REQUIRE_TOOLS (CI)
//! fails. Only device-mapper and md may be missing there, by name.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;

use cairn_io::test_support::prerequisite::{self, KernelFeature};
use cairn_io::test_support::LoopDevice;
use common::*;

const MIB: u64 = 1 << 20;

fn loop_device(dir: &Path, name: &str, size: u64, sector: u32) -> Option<LoopDevice> {
    prerequisite::or_skip(LoopDevice::create(&dir.join(name), size, sector))
}

/// Why loop devices cannot be made here, as an `Err`.
fn loop_unavailable() -> Result<(), String> {
    cairn_io::test_support::loop_device::unavailable_reason().map_or(Ok(()), Err)
}

fn dd_zero_first_4_mib(device: &Path) {
    // Exactly the ASMFD post: dd if=/dev/zero of=/dev/dm-14 bs=4k count=1024.
    let status = Command::new("dd")
        .args([
            "if=/dev/zero",
            "bs=4k",
            "count=1024",
            "oflag=direct",
            "status=none",
        ])
        .arg(format!("of={}", device.display()))
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn label_wipe_and_repair_on_512_and_4096_byte_loop_devices() {
    let dir = scratch();
    for sector in [512u32, 4096] {
        let Some(lo) = loop_device(dir.path(), &format!("lun{sector}.img"), 256 * MIB, sector)
        else {
            return;
        };
        let dev = lo.path.to_str().unwrap();
        let probe = cairn(dev, &["device", "probe", dev, "--json"]).ok().json();
        assert_eq!(probe[0]["logical_sector_bytes"], sector);
        assert_eq!(probe[0]["block"]["max_sectors_kb"], 1280);
        assert_eq!(
            probe[0]["block"]["loop_backing_file"],
            lo.backing_file.display().to_string()
        );
        assert_eq!(probe[0]["block"]["discard"]["reads_zeroes"], "yes");

        // 4Kn is the case the ASM filter driver failed on.
        let label = cairn(
            dev,
            &["disk", "label", &format!("v{sector}data1"), dev, "--json"],
        )
        .ok()
        .json();
        assert_eq!(label["logical_sector_bytes"], sector);
        assert!(
            allocated(&lo.backing_file) <= 64 * 1024,
            "labelling a thin LUN allocates almost nothing"
        );
        let inspect = cairn(dev, &["disk", "inspect", dev, "--json"]).ok().json();
        let logical = inspect["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == "logical_sector_bytes")
            .unwrap();
        assert_eq!(logical["value"], sector.to_string());

        dd_zero_first_4_mib(&lo.path);
        let list = cairn(dev, &["disk", "list", "--json"]).ok().json();
        let e = entry(&list, &lo.path);
        assert_eq!(
            (e["status"].as_str(), e["header"].as_str()),
            (Some("PROVISIONED"), Some("damaged")),
            "{e:#}"
        );
        cairn(dev, &["disk", "repair", dev]).ok();
        let list = cairn(dev, &["disk", "list", "--json"]).ok().json();
        assert_eq!(entry(&list, &lo.path)["header"], "ok");
        assert_eq!(entry(&list, &lo.path)["disk_uuid"], label["disk_uuid"]);
    }
}

/// An md RAID 1 member with a version 1.2 superblock, its array stopped again
/// (a running array would hold the device, and refuse it for that reason).
fn make_md_member(device: &str) -> Result<(), String> {
    let array = format!("/dev/md/cairn-test-{}", std::process::id());
    tool(
        "mdadm",
        &[
            "--create",
            &array,
            "--run",
            "--level=1",
            "--raid-devices=2",
            "--metadata=1.2",
            device,
            "missing",
        ],
    )?;
    tool("mdadm", &["--stop", &array])
}

#[test]
fn foreign_signatures_on_loop_devices_are_refused() {
    let dir = scratch();
    type Maker = fn(&str) -> Result<(), String>;
    let cases: &[(&str, u32, Maker, &str)] = &[
        (
            "ext4-4k",
            4096,
            |d| tool("mkfs.ext4", &["-q", "-F", d]),
            "an ext4 filesystem",
        ),
        (
            "ext4-512",
            512,
            |d| tool("mkfs.ext4", &["-q", "-F", d]),
            "an ext4 filesystem",
        ),
        ("swap", 4096, |d| tool("mkswap", &[d]), "a swap area"),
        (
            "gpt-4k",
            4096,
            |d| tool("sgdisk", &["-n", "1:256:+16M", d]),
            "a GPT partition table (4096-byte sectors)",
        ),
        (
            "gpt-512",
            512,
            |d| tool("sgdisk", &["-n", "1:2048:+16M", d]),
            "a GPT partition table (512-byte sectors)",
        ),
        (
            "lvm",
            512,
            |d| tool("pvcreate", &["-q", "-ff", "-y", d]),
            "an LVM2 physical volume",
        ),
        ("md", 512, make_md_member, "an md RAID superblock"),
    ];
    for (name, sector, make, expected) in cases {
        let Some(lo) = loop_device(dir.path(), &format!("{name}.img"), 128 * MIB, *sector) else {
            return;
        };
        let dev = lo.path.to_str().unwrap();
        if let Err(reason) = make(dev) {
            if *name == "md" {
                prerequisite::kernel_feature_missing(KernelFeature::Md, &reason);
            } else {
                prerequisite::missing(&format!("{name}: {reason}"));
            }
            continue;
        }
        let before = digest(&lo.path);
        cairn(dev, &["disk", "label", "x", dev]).refused(expected);
        assert_eq!(digest(&lo.path), before, "{name}: not one byte written");
        let list = cairn(dev, &["disk", "list", "--json"]).ok().json();
        assert_eq!(entry(&list, &lo.path)["status"], "FOREIGN", "{name}");
    }
}

/// Mounted ext4 and btrfs (whose mountinfo device number is anonymous) are
/// refused even with --force.
#[test]
fn a_mounted_device_is_refused_even_with_force() {
    let dir = scratch();
    for (fs, mkfs) in [
        ("ext4", ["mkfs.ext4", "-q"]),
        ("btrfs", ["mkfs.btrfs", "-q"]),
    ] {
        let Some(lo) = loop_device(dir.path(), &format!("{fs}.img"), 256 * MIB, 4096) else {
            return;
        };
        let dev = lo.path.to_str().unwrap();
        if let Err(reason) =
            tool(mkfs[0], &[mkfs[1], "-f", dev]).or_else(|_| tool(mkfs[0], &[mkfs[1], "-F", dev]))
        {
            prerequisite::missing(&format!("{fs}: {reason}"));
            continue;
        }
        let mnt = dir.path().join(format!("mnt-{fs}"));
        std::fs::create_dir(&mnt).unwrap();
        if let Err(reason) = tool("mount", &[dev, mnt.to_str().unwrap()]) {
            prerequisite::missing(&format!("{fs}: {reason}"));
            continue;
        }
        let probe = cairn(dev, &["device", "probe", dev, "--json"]).ok().json();
        let run = cairn(dev, &["disk", "label", "x", dev, "--force"]);
        tool("umount", &[mnt.to_str().unwrap()]).unwrap();
        assert_eq!(
            probe[0]["in_use"]["mounted_at"][0],
            mnt.display().to_string(),
            "{fs}"
        );
        run.refused(&format!("is in use (mounted at {}", mnt.display()));
        // The filesystem itself wrote while mounted, so compare what Cairn would
        // have written: no header at any copy place.
        for offset in [0, MIB, 255 * MIB] {
            assert_ne!(
                read_at(&lo.path, offset, 8),
                b"CAIRNDSK",
                "{fs}: a header copy at {offset}"
            );
        }
    }
}

#[test]
fn a_device_held_open_exclusively_is_refused() {
    let dir = scratch();
    let Some(lo) = loop_device(dir.path(), "held.img", 64 * MIB, 512) else {
        return;
    };
    let dev = lo.path.to_str().unwrap();
    // What md, device-mapper or a mounted filesystem do: claim the device with O_EXCL.
    let holder = File::options()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&lo.path)
        .unwrap();
    cairn(dev, &["disk", "label", "x", dev]).refused("held open exclusively by another process");
    drop(holder);
    cairn(dev, &["disk", "label", "x", dev]).ok();
}

#[test]
fn a_read_only_device_is_refused() {
    let dir = scratch();
    let backing = sparse(&dir.path().join("ro.img"), 64 * MIB);
    let Some(lo) = prerequisite::or_skip(
        loop_unavailable().and_then(|()| LoopDevice::attach(&backing, 4096, &["--read-only"])),
    ) else {
        return;
    };
    let dev = lo.path.to_str().unwrap();
    cairn(dev, &["disk", "label", "x", dev]).refused("is read-only");
}

#[test]
fn the_backing_file_of_a_loop_device_is_refused_and_listed_as_the_same_disk() {
    let dir = scratch();
    let Some(lo) = loop_device(dir.path(), "lun.img", 64 * MIB, 4096) else {
        return;
    };
    let dev = lo.path.to_str().unwrap();
    let file = lo.backing_file.to_str().unwrap();
    let discover = format!("{dev},{file}");
    cairn(&discover, &["disk", "label", "x", file, "--force"])
        .refused(&format!("the backing file of {dev}"));
    cairn(&discover, &["disk", "label", "lun1", dev]).ok();
    let list = cairn(&discover, &["disk", "list", "--json"]).ok().json();
    assert_eq!(list["disks"].as_array().unwrap().len(), 1, "{list:#}");
    let e = entry(&list, &lo.path);
    assert_eq!(e["also_seen_at"][0], file);
    assert_eq!(e["label"], "LUN1");
}

/// A real dm-multipath-style device (a dm table with an `mpath-` uuid, as
/// multipathd creates) over a loop device: the path is refused and the
/// multipath device named. Needs device-mapper in the kernel.
#[test]
fn a_path_of_a_device_mapper_multipath_device_is_refused() {
    let dir = scratch();
    let Some(lo) = loop_device(dir.path(), "path.img", 64 * MIB, 512) else {
        return;
    };
    let name = format!("cairn-mp-{}", std::process::id());
    let table = format!("0 {} linear {} 0", 64 * MIB / 512, lo.path.display());
    if let Err(reason) = tool(
        "dmsetup",
        &[
            "create",
            &name,
            "-u",
            &format!("mpath-cairn{}", std::process::id()),
            "--table",
            &table,
        ],
    ) {
        prerequisite::kernel_feature_missing(KernelFeature::DeviceMapper, &reason);
        return;
    }
    let dev = lo.path.to_str().unwrap();
    let run = cairn(dev, &["disk", "label", "x", dev, "--force"]);
    tool("dmsetup", &["remove", &name]).unwrap();
    run.refused(&format!("is a path of multipath device /dev/mapper/{name}"));
}
