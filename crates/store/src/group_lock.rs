//! Who owns a mounted group: one writer at a time, or any number of readers.
//!
//! A lock file per group UUID in a run directory, held with `flock`: exclusive
//! for a process that writes to the group, shared for listing and inspecting
//! (which never write). The kernel drops the lock when its holder dies however
//! it dies, so a crashed owner never blocks the next mount (which then
//! recovers the group from its journal); the file's contents say who holds
//! it, for the error a second mount gets.
//!
//! The file goes when its last holder lets go: on release a holder takes the
//! lock exclusively without waiting — it gets it only if nobody else holds
//! it — and then unlinks the file. An acquirer that opened the file just
//! before that unlink ends up holding a lock on a file no longer in the
//! directory; it notices (the path names another inode, or none) and starts
//! again. So no lock file outlives its use, and two holders never hold locks
//! on two different files of one group.
//!
//! The lock guards against two Cairn processes; the exclusive opens of the disks
//! themselves (O_EXCL, or flock on files) guard against everything else.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use uuid::Uuid;

/// A held group lock; dropping it releases the group (and removes the lock
/// file when nobody else holds it).
#[derive(Debug)]
pub struct GroupLock {
    file: File,
    pub path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "group {name} is mounted by another process ({holder}); {}",
        held_advice(holder)
    )]
    Held { name: String, holder: String },
    #[error("cannot use the lock directory {}: {error}; set CAIRN_RUN_DIR to a directory of your own that only you may write to", dir.display())]
    Dir { dir: PathBuf, error: std::io::Error },
}

/// What to do about a group another process holds: a Cairn service
/// carries commands out through its socket (this one could not reach it)
/// and serves the files through its file system.
fn held_advice(holder: &str) -> &'static str {
    if holder.contains(" serve") {
        "the Cairn service holds it: commands reach it through its control socket (for root and members of its --socket-group; $CAIRN_SOCKET says where), and its files are read and written through its file system (its --mountpoint)"
    } else {
        "wait for it to finish or stop it"
    }
}

/// The run directory: `$CAIRN_RUN_DIR`, else `/run/cairn` when it can be
/// made (root), else the user's own runtime directory
/// (`$XDG_RUNTIME_DIR/cairn`), else a per-user directory under the
/// temporary directory. The last has a name anyone can predict, so another
/// user may have made it first: [`secure_run_dir`] refuses it then.
pub fn run_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CAIRN_RUN_DIR") {
        return PathBuf::from(dir);
    }
    let system = PathBuf::from("/run/cairn");
    if std::fs::create_dir_all(&system).is_ok() && writable(&system) {
        return system;
    }
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(runtime).join("cairn");
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("cairn-run-{uid}"))
}

/// Make the run directory `dir` if it is missing (mode 0700, its parents
/// as `create_dir_all` makes them), and check that it is safe to keep
/// locks and status files in: a real directory (not a symbolic link),
/// owned by this user or by root, that nobody else may write to. Another
/// user who made it first — in a shared temporary directory, where its name
/// is predictable — could otherwise swap our lock files or read and forge
/// our status files.
pub fn secure_run_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let unsafe_because = if meta.file_type().is_symlink() {
        Some("it is a symbolic link".to_string())
    } else if !meta.is_dir() {
        Some("it is not a directory".to_string())
    } else if meta.uid() != me && meta.uid() != 0 {
        Some(format!("it belongs to another user (uid {})", meta.uid()))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!(
            "others may write to it (mode {:o})",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    match unsafe_because {
        Some(why) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("not a safe run directory: {why}"),
        )),
        None => Ok(()),
    }
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(".cairn-write-test");
    let ok = File::create(&probe).is_ok();
    let _ = std::fs::remove_file(probe);
    ok
}

/// Attempts at taking a lock whose file keeps being removed under us by
/// holders letting go: each retry means another process released the lock
/// in between, so this bounds a pathological churn, not a normal wait.
const ACQUIRE_ATTEMPTS_MAX: usize = 64;
/// A lock found held is looked at again, a pause apart, for up to this long
/// before the holder is reported: a holder letting go holds it exclusively
/// for the moment its unlink takes (longer if it is descheduled meanwhile),
/// and a reader must not take that for a writer.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);
const RELEASE_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

impl GroupLock {
    /// Take the lock of group `uuid` (named `name` in messages) for writing,
    /// or say who has it.
    pub fn acquire(dir: &Path, uuid: Uuid, name: &str) -> Result<Self, LockError> {
        Self::take(dir, uuid, name, true)
    }

    /// Take the lock of group `uuid` for reading: any number of readers,
    /// never beside a writer.
    pub fn acquire_shared(dir: &Path, uuid: Uuid, name: &str) -> Result<Self, LockError> {
        Self::take(dir, uuid, name, false)
    }

    fn take(dir: &Path, uuid: Uuid, name: &str, exclusive: bool) -> Result<Self, LockError> {
        let dir_err = |error| LockError::Dir {
            dir: dir.to_path_buf(),
            error,
        };
        secure_run_dir(dir).map_err(dir_err)?;
        let path = dir.join(format!("{uuid}.lock"));
        let started = std::time::Instant::now();
        let mut removed_under_us = 0;
        while removed_under_us < ACQUIRE_ATTEMPTS_MAX {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(dir_err)?;
            let locked = if exclusive {
                file.try_lock()
            } else {
                file.try_lock_shared()
            };
            match locked {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) if !same_file(&file, &path) => {
                    // A holder letting go removed it: take the new one.
                    removed_under_us += 1;
                    continue;
                }
                Err(TryLockError::WouldBlock) if started.elapsed() < RELEASE_WAIT => {
                    // A holder letting go holds it exclusively for as long as
                    // its unlink takes: look again in a moment.
                    std::thread::sleep(RELEASE_PAUSE);
                    continue;
                }
                Err(TryLockError::WouldBlock) => {
                    // Readers do not write their names: if a shared lock can
                    // be had, only readers hold it.
                    let holder = if exclusive && file.try_lock_shared().is_ok() {
                        let _ = file.unlock();
                        "listing or inspecting commands, which hold it only while they read"
                            .to_string()
                    } else {
                        read_holder(&mut file)
                    };
                    return Err(LockError::Held {
                        name: name.to_string(),
                        holder,
                    });
                }
                Err(TryLockError::Error(e)) => return Err(dir_err(e)),
            }
            if !same_file(&file, &path) {
                // Removed by a holder letting go after we opened it.
                removed_under_us += 1;
                continue;
            }
            if exclusive {
                write_holder(&mut file);
            }
            return Ok(Self { file, path });
        }
        Err(dir_err(std::io::Error::other(format!(
            "{} kept being removed while being locked",
            path.display()
        ))))
    }
}

impl Drop for GroupLock {
    fn drop(&mut self) {
        // The last holder removes the file: exclusive without waiting means
        // nobody else holds it. (Converting a shared lock may drop it first;
        // we are letting go anyway.)
        if self.file.try_lock().is_ok() && same_file(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Whether `path` still names the file `file` is open on.
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Say who holds the lock, for the error a second mount gets.
fn write_holder(file: &mut File) {
    let command: Vec<String> = std::env::args().collect();
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let text = format!(
        "pid {} `{}` since {}",
        std::process::id(),
        command.join(" "),
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(since)
        )
    );
    let _ = file.set_len(0);
    let _ = file.seek(SeekFrom::Start(0));
    let _ = file.write_all(text.as_bytes());
}

/// Reads between the holder taking the lock and writing its name see an empty
/// file or the previous holder's name: look again briefly until the text names
/// a live process.
const HOLDER_READS_MAX: usize = 25;
const HOLDER_READ_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

fn read_holder(file: &mut File) -> String {
    let mut text = String::new();
    for _ in 0..HOLDER_READS_MAX {
        text.clear();
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.read_to_string(&mut text);
        let live = text
            .strip_prefix("pid ")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if live {
            return text.trim().to_string();
        }
        std::thread::sleep(HOLDER_READ_PAUSE);
    }
    "holder unknown".to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_run_dir_others_may_write_or_that_is_a_link_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let uuid = Uuid::from_u128(9);
        // Made here: 0700, and a lock taken in it.
        let fresh = tmp.path().join("a/cairn-run");
        drop(GroupLock::acquire(&fresh, uuid, "DATA").unwrap());
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // Someone else's trap: world-writable (as a directory another user
        // made in /tmp under the predictable name would be to them), and a
        // link to somewhere else.
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let err = GroupLock::acquire(&open, uuid, "DATA")
            .unwrap_err()
            .to_string();
        assert!(err.contains("others may write to it (mode 1777)"), "{err}");
        assert!(err.contains("CAIRN_RUN_DIR"), "{err}");
        assert!(
            std::fs::read_dir(&open).unwrap().next().is_none(),
            "nothing made in it"
        );
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&fresh, &link).unwrap();
        let err = GroupLock::acquire(&link, uuid, "DATA")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        // Another user's directory (only root can make one here).
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = tmp.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
            std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
            let err = GroupLock::acquire(&theirs, uuid, "DATA")
                .unwrap_err()
                .to_string();
            assert!(err.contains("belongs to another user (uid 4242)"), "{err}");
        }
    }

    #[test]
    fn second_holder_is_told_who_has_it_and_the_lock_frees_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let uuid = Uuid::from_u128(5);
        let first = GroupLock::acquire(dir.path(), uuid, "DATA").unwrap();
        let err = GroupLock::acquire(dir.path(), uuid, "DATA")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("group DATA is mounted by another process"),
            "{err}"
        );
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(first);
        GroupLock::acquire(dir.path(), uuid, "DATA").unwrap();
    }

    /// Readers taking and letting go of the lock at once never refuse each
    /// other, although each release holds it exclusively for a moment.
    #[test]
    fn concurrent_readers_never_refuse_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let uuid = Uuid::from_u128(7);
        let refused = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..500 {
                        match GroupLock::acquire_shared(dir.path(), uuid, "DATA") {
                            Ok(lock) => drop(lock),
                            Err(_) => {
                                refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                });
            }
        });
        assert_eq!(refused.into_inner(), 0, "a reader refused another");
        assert!(!dir.path().join(format!("{uuid}.lock")).exists());
    }

    #[test]
    fn the_lock_file_goes_with_its_last_holder() {
        let dir = tempfile::tempdir().unwrap();
        let uuid = Uuid::from_u128(6);
        let file = dir.path().join(format!("{uuid}.lock"));
        let writer = GroupLock::acquire(dir.path(), uuid, "DATA").unwrap();
        assert!(file.exists());
        drop(writer);
        assert!(!file.exists(), "a released lock left its file");

        let a = GroupLock::acquire_shared(dir.path(), uuid, "DATA").unwrap();
        let b = GroupLock::acquire_shared(dir.path(), uuid, "DATA").unwrap();
        let err = GroupLock::acquire(dir.path(), uuid, "DATA").unwrap_err();
        assert!(matches!(err, LockError::Held { .. }), "{err}");
        drop(a);
        assert!(file.exists(), "a reader still holds it");
        let err = GroupLock::acquire(dir.path(), uuid, "DATA").unwrap_err();
        assert!(matches!(err, LockError::Held { .. }), "{err}");
        drop(b);
        assert!(!file.exists());
        let w = GroupLock::acquire(dir.path(), uuid, "DATA").unwrap();
        assert!(GroupLock::acquire_shared(dir.path(), uuid, "DATA").is_err());
        drop(w);
    }
}
