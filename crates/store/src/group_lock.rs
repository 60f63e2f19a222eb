//! Who owns a mounted group: one process at a time.
//!
//! A lock file per group UUID in a run directory, held with `flock`. The kernel
//! drops the lock when its holder dies however it dies, so a crashed owner never
//! blocks the next mount (which then recovers the group from its journal); the
//! file's contents say who holds it, for the error a second mount gets.
//!
//! The lock guards against two Cairn processes; the exclusive opens of the disks
//! themselves (O_EXCL, or flock on files) guard against everything else.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use uuid::Uuid;

/// A held group lock; dropping it releases the group.
#[derive(Debug)]
pub struct GroupLock {
    _file: File,
    pub path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "group {name} is mounted by another process ({holder}); wait for it to finish or stop it"
    )]
    Held { name: String, holder: String },
    #[error("cannot use the lock directory {}: {error}; set CAIRN_RUN_DIR to a writable directory", dir.display())]
    Dir { dir: PathBuf, error: std::io::Error },
}

/// The run directory: `$CAIRN_RUN_DIR`, else `/run/cairn` when it can be made,
/// else a per-user directory under the temporary directory.
pub fn run_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CAIRN_RUN_DIR") {
        return PathBuf::from(dir);
    }
    let system = PathBuf::from("/run/cairn");
    if std::fs::create_dir_all(&system).is_ok() && writable(&system) {
        return system;
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("cairn-run-{uid}"))
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(".cairn-write-test");
    let ok = File::create(&probe).is_ok();
    let _ = std::fs::remove_file(probe);
    ok
}

impl GroupLock {
    /// Take the lock of group `uuid` (named `name` in messages), or say who has it.
    pub fn acquire(dir: &Path, uuid: Uuid, name: &str) -> Result<Self, LockError> {
        let dir_err = |error| LockError::Dir {
            dir: dir.to_path_buf(),
            error,
        };
        std::fs::create_dir_all(dir).map_err(dir_err)?;
        let path = dir.join(format!("{uuid}.lock"));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(dir_err)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::Held {
                    name: name.to_string(),
                    holder: read_holder(&mut file),
                });
            }
            Err(TryLockError::Error(e)) => return Err(dir_err(e)),
        }
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
        Ok(Self { _file: file, path })
    }
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
}
