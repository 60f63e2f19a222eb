//! Opening a device for direct I/O.
//!
//! Every open is O_DIRECT: Cairn's data must reach the device, not sit in the page
//! cache, and alignment errors must show up in tests rather than in production.
//! Writers open exclusively — O_EXCL on a block device, which the kernel refuses
//! while the device is mounted or claimed by md, device-mapper or another
//! exclusive opener; an advisory `flock` on a regular file, which keeps two Cairn
//! processes apart.
//!
//! A regular file with no write permission bits is treated as read-only even for
//! root, who could write it anyway: someone marked it so on purpose.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::block_ioctl;
use crate::geometry::Geometry;
use crate::host::Host;
pub use crate::open_error::OpenError;
use crate::probe::{self, DeviceKind, DeviceProbe};

/// How to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenMode {
    pub write: bool,
    pub exclusive: bool,
}

impl OpenMode {
    /// Read-only, shared: listing and inspecting.
    pub const READ: Self = Self {
        write: false,
        exclusive: false,
    };
    /// Read-write and exclusive: anything that changes the device.
    pub const WRITE_EXCLUSIVE: Self = Self {
        write: true,
        exclusive: true,
    };
}

/// What a device is, whatever it is called: a block device by its device
/// number (`(0, rdev)`), a regular file by its file system and inode. Two
/// paths (a rename, a by-id link) name one device exactly when their
/// identities are equal; the one rule for every caller that tells devices
/// apart by what they are.
pub fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    if meta.file_type().is_block_device() {
        (0, meta.rdev())
    } else {
        (meta.dev(), meta.ino())
    }
}

/// An open device (block device or regular file) with its probe and geometry.
#[derive(Debug)]
pub struct DeviceFile {
    file: File,
    probe: DeviceProbe,
    geometry: Geometry,
    mode: OpenMode,
}

impl DeviceFile {
    /// Open `path` for direct I/O.
    pub fn open(path: &Path, mode: OpenMode, host: &Host) -> Result<Self, OpenError> {
        let meta = probe::device_metadata(path)?;
        let is_block = meta.file_type().is_block_device();
        if mode.write && !is_block {
            let bits = meta.permissions().mode();
            if bits & 0o222 == 0 {
                return Err(OpenError::ReadOnly {
                    path: path.into(),
                    reason: format!(
                        "its mode is {:04o}, with no write permission",
                        bits & 0o7777
                    ),
                });
            }
        }
        let mut flags = libc::O_DIRECT | libc::O_CLOEXEC;
        if mode.exclusive && is_block {
            flags |= libc::O_EXCL;
        }
        let file = File::options()
            .read(true)
            .write(mode.write)
            .custom_flags(flags)
            .open(path)
            .map_err(|e| open_error(path, e, mode, is_block))?;
        if mode.exclusive && !is_block {
            if let Err(err) = lock_exclusive(&file) {
                return Err(if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    OpenError::InUse {
                        path: path.into(),
                        by: "locked by another Cairn process".into(),
                    }
                } else {
                    OpenError::Os {
                        path: path.into(),
                        action: "flock",
                        error: err,
                    }
                });
            }
        }
        let probe = probe::probe_open(path, &file, host)?;
        if mode.write && probe.read_only {
            return Err(OpenError::ReadOnly {
                path: path.into(),
                reason: probe
                    .read_only_reason
                    .clone()
                    .unwrap_or_else(|| "read-only".into()),
            });
        }
        if !(512..=4096).contains(&probe.logical_sector_bytes)
            || !probe.logical_sector_bytes.is_power_of_two()
        {
            return Err(OpenError::UnsupportedSectorSize {
                path: path.into(),
                logical_sector_bytes: probe.logical_sector_bytes,
            });
        }
        let geometry = probe.geometry();
        Ok(Self {
            file,
            probe,
            geometry,
            mode,
        })
    }

    pub fn path(&self) -> &Path {
        &self.probe.path
    }

    pub fn probe(&self) -> &DeviceProbe {
        &self.probe
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub fn mode(&self) -> OpenMode {
        self.mode
    }

    pub fn is_block(&self) -> bool {
        self.probe.kind == DeviceKind::Block
    }

    /// A second handle on the same open device (a dup of the descriptor): for
    /// engines on other threads. It shares the exclusive claim, so a block
    /// device opened O_EXCL can still be driven from several rings.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            file: self.file.try_clone()?,
            probe: self.probe.clone(),
            geometry: self.geometry.clone(),
            mode: self.mode,
        })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// What the open device is, whatever path it was opened by or is named
    /// by now ([`identity`] of its own descriptor's status).
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        Ok(identity(&self.file.metadata()?))
    }

    /// Lower the largest request the engines send to this device (never raise it:
    /// the device's own limit stands). Used to honour a target's limit in tests
    /// and benchmarks on files, whose filesystem accepts anything.
    pub fn limit_max_transfer(&mut self, bytes: u32) {
        assert!(
            bytes >= self.geometry.logical_sector_bytes
                && bytes.is_multiple_of(self.geometry.logical_sector_bytes),
            "invariant: a max transfer of whole sectors"
        );
        self.geometry.max_transfer_bytes = self.geometry.max_transfer_bytes.min(bytes);
    }

    /// Discard now, synchronously: BLKDISCARD on a block device, a punched hole in a file.
    pub fn discard_now(&self, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
        if self.is_block() {
            block_ioctl::discard(&self.file, offset_bytes, len_bytes)
        } else {
            self.fallocate(
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset_bytes,
                len_bytes,
            )
        }
    }

    /// Write zeroes now, synchronously: BLKZEROOUT, or fallocate zero-range on a file.
    pub fn write_zeroes_now(&self, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
        if self.is_block() {
            block_ioctl::zero_out(&self.file, offset_bytes, len_bytes)
        } else {
            self.fallocate(
                libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
                offset_bytes,
                len_bytes,
            )
        }
    }

    fn fallocate(&self, mode: libc::c_int, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
        // SAFETY: fallocate on an open fd has no memory-safety preconditions.
        let rc = unsafe {
            libc::fallocate(
                self.raw_fd(),
                mode,
                offset_bytes as libc::off_t,
                len_bytes as libc::off_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

fn open_error(path: &Path, err: io::Error, mode: OpenMode, is_block: bool) -> OpenError {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::ENOMEDIUM) => OpenError::NotFound { path: path.into() },
        Some(libc::EPERM) if mode.write => match attribute_forbids_writes(path) {
            Some((attribute, flag)) => OpenError::Immutable {
                path: path.into(),
                attribute,
                flag,
            },
            None => OpenError::PermissionDenied {
                path: path.into(),
                write: true,
            },
        },
        Some(libc::EACCES) | Some(libc::EPERM) => OpenError::PermissionDenied {
            path: path.into(),
            write: mode.write,
        },
        Some(libc::EROFS) => OpenError::ReadOnly {
            path: path.into(),
            reason: if is_block {
                "the device is read-only".into()
            } else {
                "its filesystem is mounted read-only".into()
            },
        },
        Some(libc::EBUSY) => OpenError::InUse {
            path: path.into(),
            by: "held open exclusively by another process: mounted, or claimed by md, device-mapper, LVM or another Cairn".into(),
        },
        Some(libc::EINVAL) if !is_block => OpenError::DirectIoUnsupported {
            path: path.into(),
            filesystem: probe::probe(path, &Host::real())
                .ok()
                .and_then(|p| p.file.map(|f| f.filesystem))
                .unwrap_or_else(|| "unknown".into()),
        },
        _ => OpenError::Os {
            path: path.into(),
            action: "open",
            error: err,
        },
    }
}

/// An inode attribute that makes a file refuse writes even to root: the
/// immutable flag (`chattr +i`) or append-only (`chattr +a`): its name, and
/// the `chattr` letter that clears it.
fn attribute_forbids_writes(path: &Path) -> Option<(&'static str, char)> {
    /// From linux/fs.h.
    const FS_IMMUTABLE_FL: libc::c_long = 0x10;
    const FS_APPEND_FL: libc::c_long = 0x20;
    let file = File::open(path).ok()?;
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one long through the pointer, which
    // points at a live local of that type.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) };
    if rc != 0 {
        return None;
    }
    if flags & FS_IMMUTABLE_FL != 0 {
        Some(("immutable (chattr +i)", 'i'))
    } else if flags & FS_APPEND_FL != 0 {
        Some(("append-only (chattr +a)", 'a'))
    } else {
        None
    }
}

/// How long an exclusive lock is retried. A lock can be held for a moment by
/// a process that is not really using the file: a child of ours between fork
/// and exec shares every open file of its parent (locks included), and a Cairn
/// process that is exiting still holds its files until the kernel closes them.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// `flock(LOCK_EX | LOCK_NB)`, retried for up to [`LOCK_RETRY`] while it says
/// the file is locked. Between tries the thread waits as [`crate::sched`]
/// says: a few milliseconds in production; under a test's scheduler, until
/// the test has let the holder go (`tests/exclusive_open.rs`), so the retry
/// is exercised by a handshake rather than by racing a sleep.
fn lock_exclusive(file: &File) -> io::Result<()> {
    let deadline = std::time::Instant::now() + LOCK_RETRY;
    let mut waited = false;
    let outcome = loop {
        // SAFETY: flock on an open fd has no memory-safety preconditions.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            break Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) || std::time::Instant::now() >= deadline {
            break Err(err);
        }
        if crate::sched::blocked() {
            waited = true;
        } else {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    if waited {
        crate::sched::resumed();
    }
    outcome
}
