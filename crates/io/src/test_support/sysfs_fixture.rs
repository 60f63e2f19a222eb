//! Fixture sysfs trees for what this kernel cannot build: device-mapper
//! multipath, LVM holders. Probe code reads them through a [`Host`] whose
//! `sys` root points here.

use std::fs;

use tempfile::TempDir;

use crate::host::Host;

/// A sysfs tree as multipathd leaves it: sdb and sdc are paths of dm-0
/// (`mpatha`, uuid `mpath-<wwid>`); sdd is held by an LVM volume instead.
pub fn multipath() -> (TempDir, Host) {
    use std::os::unix::fs::symlink;
    let root = tempfile::tempdir().expect("temp dir");
    let sys = root.path().join("sys");
    let mk = |rel: &str, content: Option<&str>| {
        let p = sys.join(rel);
        match content {
            Some(text) => {
                fs::create_dir_all(p.parent().expect("fixture")).expect("fixture");
                fs::write(&p, text).expect("fixture");
            }
            None => fs::create_dir_all(&p).expect("fixture"),
        }
    };
    for (name, dev, holder) in [
        ("sdb", "8:16", "dm-0"),
        ("sdc", "8:32", "dm-0"),
        ("sdd", "8:48", "dm-1"),
    ] {
        let dir = format!("devices/pci0/host0/block/{name}");
        mk(&format!("{dir}/dev"), Some(dev));
        mk(&format!("{dir}/holders/{holder}"), None);
        mk(&format!("{dir}/queue/max_sectors_kb"), Some("512"));
        mk(&format!("{dir}/device/wwid"), Some("naa.600a0b80001"));
        mk("dev/block", None);
        symlink(sys.join(&dir), sys.join(format!("dev/block/{dev}"))).expect("fixture");
    }
    for (name, dev, mapper, uuid, slaves) in [
        (
            "dm-0",
            "253:0",
            "mpatha",
            "mpath-3600a0b80001",
            &["sdb", "sdc"][..],
        ),
        ("dm-1", "253:1", "vg-lv", "LVM-abcdef", &["sdd"][..]),
    ] {
        let dir = format!("devices/virtual/block/{name}");
        mk(&format!("{dir}/dev"), Some(dev));
        mk(&format!("{dir}/dm/name"), Some(mapper));
        mk(&format!("{dir}/dm/uuid"), Some(uuid));
        for slave in slaves {
            mk(&format!("{dir}/slaves/{slave}"), None);
        }
        mk("class/block", None);
        symlink(sys.join(&dir), sys.join(format!("class/block/{name}"))).expect("fixture");
        symlink(sys.join(&dir), sys.join(format!("dev/block/{dev}"))).expect("fixture");
    }
    let host = Host {
        sys,
        proc: root.path().join("proc"),
    };
    (root, host)
}
