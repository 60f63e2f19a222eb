//! Volumes' block devices: a group file exported as a loop device over the
//! service's own mount, with direct I/O and the group's sector size
//! (`docs/volumes.md`). The service attaches and detaches them; nothing
//! here does I/O to a volume's device (the service must never wait on one:
//! its I/O comes back to the service through FUSE).

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use cairn_io::block_ioctl::{self, LoopConfig, LoopInfo64};
use cairn_io::poison::Recover;

// <linux/loop.h>
const LO_FLAGS_DIRECT_IO: u32 = 16;

/// How many times a free loop device is asked for when another process
/// takes the one the kernel offered first.
const ATTACH_TRIES: usize = 8;

/// Attach `file` (a volume's file in the service's mount) to a free loop
/// device with direct I/O and logical blocks of `sector_bytes`: the
/// device's path.
pub fn attach(file: &Path, sector_bytes: u32) -> io::Result<PathBuf> {
    // O_DIRECT: the service's file system serves it without the page
    // cache, and the loop driver's direct I/O goes straight to it.
    let backing = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(file)?;
    let control = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/loop-control")?;
    let mut last = io::Error::from_raw_os_error(libc::EBUSY);
    for _ in 0..ATTACH_TRIES {
        let n = block_ioctl::loop_free_number(&control)?;
        let device = PathBuf::from(format!("/dev/loop{n}"));
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&device)?;
        let mut name = [0u8; 64];
        let shown = file.as_os_str().as_encoded_bytes();
        let len = shown.len().min(63);
        name[..len].copy_from_slice(&shown[..len]);
        let config = LoopConfig {
            fd: backing.as_raw_fd() as u32,
            block_size: sector_bytes,
            info: LoopInfo64 {
                flags: LO_FLAGS_DIRECT_IO,
                file_name: name,
                ..LoopInfo64::default()
            },
            reserved: [0; 8],
        };
        match block_ioctl::loop_configure(&dev, config) {
            Ok(()) => {
                let stat = device_stat(&format!("loop{n}"));
                lock_counts().insert(format!("loop{n}"), stat);
                return Ok(device);
            }
            Err(e) => last = e,
        }
        // Taken by someone else between GET_FREE and CONFIGURE: ask again.
        if last.raw_os_error() != Some(libc::EBUSY) {
            return Err(last);
        }
    }
    Err(last)
}

/// A block device's counters as the kernel keeps them
/// (`/sys/block/NAME/stat`, fields in the kernel's order); zeros for one
/// it does not know.
fn device_stat(name: &str) -> Vec<u64> {
    std::fs::read_to_string(Path::new("/sys/block").join(name).join("stat"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect()
}

/// Each loop device this process attached, with its counters at the
/// attach: a loop device is reused, and the kernel's counts run on
/// across attaches. Written by `attach`, read by `counters`; the lock is
/// held for the map's update or copy only.
static COUNTS_AT_ATTACH: std::sync::Mutex<BTreeMap<String, Vec<u64>>> =
    std::sync::Mutex::new(BTreeMap::new());

fn lock_counts() -> std::sync::MutexGuard<'static, BTreeMap<String, Vec<u64>>> {
    COUNTS_AT_ATTACH.lock_or_recover()
}

/// A loop device's counters (`/sys/block/NAME/stat`) since this process
/// attached it (since the device was made, for one it did not attach).
/// The in-flight count (field 8) is as it is now.
pub fn counters(name: &str) -> Vec<u64> {
    let now = device_stat(name);
    let at = lock_counts().get(name).cloned().unwrap_or_default();
    now.iter()
        .enumerate()
        .map(|(i, v)| {
            if i == 8 {
                *v
            } else {
                v.saturating_sub(at.get(i).copied().unwrap_or(0))
            }
        })
        .collect()
}

/// What a file is, whatever it is called: its device and inode.
pub fn identity(file: &Path) -> io::Result<(u64, u64)> {
    let m = std::fs::metadata(file)?;
    Ok((m.dev(), m.ino()))
}

/// The file a loop device is bound to (its device and inode, from the
/// driver), if it is bound.
fn bound_to(dev: &File) -> Option<(u64, u64)> {
    let info = block_ioctl::loop_status(dev).ok()?;
    Some((info.device, info.inode))
}

/// The loop device bound to `file`, if one is: matched by what the file
/// is (device and inode), not by its name — an alias, or another spelling
/// of the name, is the same file. A file that cannot be asked what it is
/// (its group stopped: the file system answers nothing for it) is matched
/// by the path the kernel says the device is bound to.
pub fn attached_to(file: &Path) -> Option<PathBuf> {
    let Ok(want) = identity(file) else {
        return bound_at(file).map(|name| PathBuf::from(format!("/dev/{name}")));
    };
    let entries = std::fs::read_dir("/sys/block").ok()?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") || !e.path().join("loop/backing_file").exists() {
            continue;
        }
        let device = PathBuf::from(format!("/dev/{name}"));
        let Ok(dev) = File::open(&device) else {
            continue;
        };
        if bound_to(&dev) == Some(want) {
            return Some(device);
        }
    }
    None
}

/// Who uses a block device: where it is mounted, or what holds it (a
/// device-mapper or md stack on it). `None`: nobody.
pub fn in_use(device: &Path) -> io::Result<Option<String>> {
    let meta = std::fs::metadata(device)?;
    if !meta.file_type().is_block_device() {
        return Err(io::Error::other(format!(
            "{} is not a block device",
            device.display()
        )));
    }
    let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    let wanted = format!("{major}:{minor}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mounts.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.get(2) == Some(&wanted.as_str()) {
            return Ok(Some(format!(
                "it is mounted at {}",
                f.get(4).copied().unwrap_or("?")
            )));
        }
    }
    let name = device
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Mounted in another namespace, swap, a partition in use, an exclusive
    // opener: the kernel refuses an exclusive open.
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(device)
    {
        if e.raw_os_error() == Some(libc::EBUSY) {
            return Ok(Some(
                "it is open exclusively (mounted, perhaps in another mount namespace, or used as swap)"
                    .into(),
            ));
        }
    }
    if let Ok(holders) = std::fs::read_dir(format!("/sys/block/{name}/holders")) {
        let held: Vec<String> = holders
            .flatten()
            .map(|h| h.file_name().to_string_lossy().into_owned())
            .collect();
        if !held.is_empty() {
            return Ok(Some(format!("{} holds it", held.join(", "))));
        }
    }
    Ok(None)
}

/// What [`detach`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Detached {
    Done,
    /// Another plain opener keeps it: the kernel detaches it at its last
    /// close.
    Deferred,
    /// Nothing: it is in use ([`in_use`] says how).
    InUse(String),
}

/// Detach a loop device if nobody uses it ([`in_use`]) and it is still
/// bound to `file` (between a look and now, it may have been let go of and
/// taken by someone else): to what the file is, or — a stopped group's
/// file, which cannot be asked — to the path the kernel reports.
pub fn detach(device: &Path, file: &Path) -> io::Result<Detached> {
    match identity(file) {
        Ok(identity) => detach_if(device, &|dev| bound_to(dev) == Some(identity)),
        Err(_) => {
            let name = device
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            detach_if(device, &|_| backing_file(&name).as_deref() == Some(file))
        }
    }
}

/// Detach a loop device if nobody uses it and `still_ours` holds on it,
/// opened.
fn detach_if(device: &Path, still_ours: &dyn Fn(&File) -> bool) -> io::Result<Detached> {
    let dev = File::open(device)?;
    if !still_ours(&dev) {
        return Err(io::Error::other(format!(
            "{} is no longer this volume's device",
            device.display()
        )));
    }
    if let Some(why) = in_use(device)? {
        return Ok(Detached::InUse(why));
    }
    block_ioctl::loop_clear(&dev)?;
    // The kernel lets go at the last close: ours first. Still bound after
    // it, another opener defers the detach to its own last close.
    drop(dev);
    let name = device.file_name().unwrap_or_default();
    Ok(
        if Path::new("/sys/block")
            .join(name)
            .join("loop/backing_file")
            .exists()
        {
            Detached::Deferred
        } else {
            Detached::Done
        },
    )
}

/// The loop device (still bound to the file `identity` names) follows its
/// file's new size.
pub fn refresh_capacity(device: &Path, identity: (u64, u64)) -> io::Result<()> {
    let dev = File::open(device)?;
    if bound_to(&dev) != Some(identity) {
        return Err(io::Error::other(format!(
            "{} is no longer this volume's device",
            device.display()
        )));
    }
    block_ioctl::loop_set_capacity(&dev)
}

/// The volumes attached, by name, as the run directory records them
/// (`volumes.json`): what `cairn serve --attach-volumes` attaches again.
/// Written whole through a temporary and a rename, so a crash leaves the
/// old list or the new one.
/// The caller serialises its changes (the service: one volume command at
/// a time).
pub fn recorded(run_dir: &Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(run_dir.join(RECORD)) else {
        return Vec::new();
    };
    serde_json::from_slice::<Vec<String>>(&bytes).unwrap_or_else(|e| {
        tracing::warn!(file = %run_dir.join(RECORD).display(), error = %e, "the record of attached volumes cannot be read; it starts again empty");
        Vec::new()
    })
}

/// Record that `name` is attached (`true`) or not.
pub fn record(run_dir: &Path, name: &str, attached: bool) -> io::Result<()> {
    let mut names = recorded(run_dir);
    names.retain(|n| !n.eq_ignore_ascii_case(name));
    if attached {
        names.push(name.to_string());
    }
    names.sort();
    std::fs::create_dir_all(run_dir)?;
    let tmp = run_dir.join(format!("{RECORD}.{}.tmp", std::process::id()));
    {
        let mut f = File::create(&tmp)?;
        std::io::Write::write_all(
            &mut f,
            &serde_json::to_vec_pretty(&names).map_err(io::Error::other)?,
        )?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, run_dir.join(RECORD))
}

const RECORD: &str = "volumes.json";

/// A block device's size in bytes, as /sys/block says (0 if it cannot).
pub fn capacity_bytes(name: &str) -> u64 {
    std::fs::read_to_string(Path::new("/sys/block").join(name).join("size"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(0, |sectors| sectors * 512)
}

/// The loop device (its name in /sys/block) the kernel says is bound to
/// the path `file`, without asking the file system anything.
fn bound_at(file: &Path) -> Option<String> {
    exported(file)
        .into_iter()
        .find(|(_, backing)| backing == file)
        .map(|(name, _)| name)
}

/// The file loop device `name` (in /sys/block) is bound to, as the kernel
/// reports it; `None` if it is bound to nothing.
fn backing_file(name: &str) -> Option<PathBuf> {
    let text =
        std::fs::read_to_string(Path::new("/sys/block").join(name).join("loop/backing_file"))
            .ok()?;
    Some(PathBuf::from(text.trim_end()))
}

/// Loop devices whose backing file is under `mountpoint` (a service's
/// mount), as the kernel lists them: (the device's name in /sys/block,
/// its backing file). The file's name is the one it was attached under.
pub fn exported(mountpoint: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("loop") {
                return None;
            }
            let backing = backing_file(&name)?;
            backing.starts_with(mountpoint).then_some((name, backing))
        })
        .collect();
    out.sort();
    out
}

/// Loop devices whose backing file is under `mountpoint` (a service's
/// mount): after a `kill -9` they point at a dead file system, and fail
/// every I/O. Each one that nobody mounts or holds is detached; the
/// devices detached, and a line for each that could not be.
pub fn detach_dead(mountpoint: &Path) -> (Vec<PathBuf>, Vec<String>) {
    detach_under(mountpoint, "a volume of the killed service")
}

/// Every loop device whose backing file is under `mountpoint`, detached
/// if nobody mounts or holds it — for a stop, whatever state the groups
/// are in: the devices are found and checked by what the kernel says of
/// them (`/sys/block`), never by asking the file system, which a stopped
/// group (a double failure) no longer answers. The devices detached, and
/// a line naming each that could not be and why (`what`: what they are).
pub fn detach_under(mountpoint: &Path, what: &str) -> (Vec<PathBuf>, Vec<String>) {
    let (mut detached, mut left) = (Vec::new(), Vec::new());
    for (name, backing) in exported(mountpoint) {
        let device = PathBuf::from(format!("/dev/{name}"));
        // Not by the file's identity: asking for it goes to the file
        // system, which fails once a dead or stopped one has no cached
        // attributes. Still bound under the mount, as the kernel says.
        let under_dead_mount =
            |_: &File| backing_file(&name).is_some_and(|b| b.starts_with(mountpoint));
        match detach_if(&device, &under_dead_mount) {
            Ok(Detached::Done | Detached::Deferred) => detached.push(device),
            Ok(Detached::InUse(why)) => left.push(format!(
                "{} ({what}, {}) is in use: {why}; unmount it, then detach it (losetup -d {})",
                device.display(),
                backing.display(),
                device.display()
            )),
            Err(e) => left.push(format!("{} ({}): {e}", device.display(), backing.display())),
        }
    }
    (detached, left)
}
