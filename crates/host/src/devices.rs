//! Which block devices' `/proc/diskstats` lines matter for a target.
//!
//! A request to a device-mapper volume is counted once on the dm device and
//! again on each device under it; a file's requests are counted on its
//! filesystem's device; a loop device's requests reach its backing file, and so
//! that file's device. Reporting the whole chain shows where requests were
//! merged or split on the way down.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use cairn_io::host::Host;

/// Stacks deeper than this (dm over dm over loop over …) are not followed further;
/// real ones are a few levels deep, and the bound keeps a sysfs loop finite.
const STACK_DEPTH_MAX: usize = 16;

/// Kernel names of the devices whose counters matter for `path`, the target's
/// own first, each once: a block device, then what it sits on (`slaves`,
/// recursively; a loop device's backing file's device); a regular file, the
/// device of its filesystem and what that sits on. Empty when there is none —
/// a file on tmpfs, or a path that cannot be read.
///
/// A partition has its own diskstats line, so it is reported rather than its
/// whole disk; what the whole disk sits on still follows.
pub fn devices_for(host: &Host, path: &Path) -> Vec<String> {
    let Ok(meta) = fs::metadata(path) else {
        return Vec::new();
    };
    if meta.file_type().is_block_device() {
        let rdev = meta.rdev();
        return devices_for_block(host, libc::major(rdev), libc::minor(rdev));
    }
    filesystem_device_dir(host, meta.dev())
        .map(|dir| walk(host, dir))
        .unwrap_or_default()
}

/// [`devices_for`] for the block device `major:minor`, found through
/// `host.sys/dev/block`.
pub fn devices_for_block(host: &Host, major: u32, minor: u32) -> Vec<String> {
    host.block_dir(major, minor)
        .map(|dir| walk(host, dir))
        .unwrap_or_default()
}

fn walk(host: &Host, dir: PathBuf) -> Vec<String> {
    let mut names = Vec::new();
    visit(host, &dir, 0, &mut names);
    names
}

fn visit(host: &Host, dir: &Path, depth: usize, names: &mut Vec<String>) {
    let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    if names.contains(&name) || depth > STACK_DEPTH_MAX {
        return;
    }
    names.push(name);
    // A partition's slaves and loop attributes are its whole disk's.
    let whole = if dir.join("partition").exists() {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    for slave in Host::list(&whole.join("slaves")) {
        let slave_dir = host
            .block_dir_by_name(&slave)
            .or_else(|| fs::canonicalize(whole.join("slaves").join(&slave)).ok());
        if let Some(slave_dir) = slave_dir {
            visit(host, &slave_dir, depth + 1, names);
        }
    }
    let backing_dir = Host::attr(&whole.join("loop/backing_file"))
        .and_then(|file| fs::metadata(file).ok())
        .and_then(|meta| filesystem_device_dir(host, meta.dev()));
    if let Some(backing_dir) = backing_dir {
        visit(host, &backing_dir, depth + 1, names);
    }
}

/// The sysfs directory of the block device a filesystem with device number
/// `dev` is on. Device number 0:N is anonymous (tmpfs, overlayfs, btrfs); for
/// btrfs the mount's source still names the real device, so that is tried.
fn filesystem_device_dir(host: &Host, dev: u64) -> Option<PathBuf> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major != 0 {
        if let Some(dir) = host.block_dir(major, minor) {
            return Some(dir);
        }
    }
    host.mounts()
        .into_iter()
        .filter(|m| (m.major, m.minor) == (major, minor))
        .filter_map(|m| fs::metadata(&m.source).ok())
        .find(|meta| meta.file_type().is_block_device())
        .and_then(|meta| host.block_dir(libc::major(meta.rdev()), libc::minor(meta.rdev())))
}
