//! Real loop devices for end-to-end tests: a sparse file behind `losetup`, with a
//! chosen logical sector size (512 or 4096) and direct I/O, removed on drop.
//!
//! Loop devices need root and `losetup`; where either is missing, [`LoopDevice::create`]
//! returns the reason, and the test prints `skipped: <reason>` instead of passing
//! quietly.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An attached loop device; detached when dropped.
#[derive(Debug)]
pub struct LoopDevice {
    pub path: PathBuf,
    pub backing_file: PathBuf,
}

/// Why loop devices cannot be used here, or `None` if they can.
pub fn unavailable_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("loop devices need root".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no /dev/loop-control (loop driver not available)".into());
    }
    if Command::new("losetup").arg("--version").output().is_err() {
        return Some("losetup is not installed".into());
    }
    None
}

impl LoopDevice {
    /// Create a sparse backing file of `size_bytes` at `backing_file` and attach it
    /// with `sector_bytes` logical sectors and direct I/O.
    pub fn create(backing_file: &Path, size_bytes: u64, sector_bytes: u32) -> Result<Self, String> {
        if let Some(reason) = unavailable_reason() {
            return Err(reason);
        }
        File::create(backing_file)
            .and_then(|f| f.set_len(size_bytes))
            .map_err(|e| format!("cannot create {}: {e}", backing_file.display()))?;
        Self::attach(backing_file, sector_bytes, &[])
    }

    /// Attach an existing file; `extra` are further losetup flags (e.g. `-r`).
    pub fn attach(backing_file: &Path, sector_bytes: u32, extra: &[&str]) -> Result<Self, String> {
        let output = Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on", "--sector-size"])
            .arg(sector_bytes.to_string())
            .args(extra)
            .arg(backing_file)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "losetup failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        Ok(Self {
            path,
            backing_file: backing_file.to_path_buf(),
        })
    }

    /// Show only the first `bytes` of the backing file (0: all of it),
    /// at once, under whoever has the device open: with a limit below the
    /// disk's first block, every read of an open descriptor comes back
    /// empty and every write fails (ENOSPC), as a disk whose path was lost
    /// does; with 0 again the same descriptor works again, data intact
    /// (the path restored). Retried while the kernel is busy with the
    /// device's page cache (EAGAIN).
    pub fn set_size_limit(&self, bytes: u64) -> Result<(), String> {
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .open(&self.path)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        let mut info = crate::block_ioctl::loop_status(&dev)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        info.sizelimit = bytes;
        let mut last = None;
        for _ in 0..100 {
            match crate::block_ioctl::set_loop_status(&dev, &info) {
                Ok(()) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    last = Some(e);
                    std::thread::yield_now();
                }
                Err(e) => return Err(format!("{}: {e}", self.path.display())),
            }
        }
        Err(format!("{}: {:?}", self.path.display(), last))
    }

    /// Kernel name (`loop3`).
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
    }
}
