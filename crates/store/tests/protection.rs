//! Usage refusals that this kernel cannot stage for real (no device-mapper):
//! a multipath path and an LVM-held disk, read from a fixture sysfs tree through
//! the same probe code that reads the real one.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use cairn_io::probe::{block_facts, DeviceKind, DeviceProbe, InUse};
use cairn_io::test_support::sysfs_fixture;
use cairn_store::admin::refuse_usage;
use cairn_store::protection::{usage_obstacles, Obstacle};

fn probe_of(path: &str, block: cairn_io::probe::BlockProbe) -> DeviceProbe {
    DeviceProbe {
        path: PathBuf::from(path),
        canonical_path: PathBuf::from(path),
        kind: DeviceKind::Block,
        size_bytes: 1 << 30,
        logical_sector_bytes: 512,
        physical_sector_bytes: 4096,
        sector_format: "512e".into(),
        max_transfer_bytes: 512 << 10,
        read_only: false,
        read_only_reason: None,
        block: Some(block),
        file: None,
        in_use: InUse::default(),
    }
}

#[test]
fn a_multipath_path_is_refused_and_the_multipath_device_named() {
    let (_root, host) = sysfs_fixture::multipath();
    let probe = probe_of("/dev/sdb", block_facts(&host, 8, 16));
    let obstacles = usage_obstacles(&probe, &host);
    assert_eq!(
        obstacles,
        vec![Obstacle::MultipathPath {
            device: "/dev/mapper/mpatha".into(),
            kernel_name: "dm-0".into()
        }]
    );
    assert!(
        !obstacles[0].overridable(),
        "--force does not override a live user"
    );
    let message = refuse_usage(Path::new("/dev/sdb"), obstacles)
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "/dev/sdb is a path of multipath device /dev/mapper/mpatha (dm-0); use /dev/mapper/mpatha instead"
    );
}

#[test]
fn a_disk_held_by_lvm_is_refused_with_the_holder_named() {
    let (_root, host) = sysfs_fixture::multipath();
    let probe = probe_of("/dev/sdd", block_facts(&host, 8, 48));
    let obstacles = usage_obstacles(&probe, &host);
    assert_eq!(
        obstacles,
        vec![Obstacle::Held {
            by: vec!["dm-1 (vg-lv)".into()]
        }]
    );
    let message = refuse_usage(Path::new("/dev/sdd"), obstacles)
        .unwrap_err()
        .to_string();
    assert!(message.contains("held by dm-1 (vg-lv)"), "{message}");
}

#[test]
fn the_multipath_device_itself_is_not_refused() {
    let (_root, host) = sysfs_fixture::multipath();
    let probe = probe_of("/dev/mapper/mpatha", block_facts(&host, 253, 0));
    assert!(usage_obstacles(&probe, &host).is_empty());
}
