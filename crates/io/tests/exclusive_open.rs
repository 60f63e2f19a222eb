//! An exclusive open must not fail because a child process of ours is between
//! fork and exec: for that moment the child shares every open file of the
//! parent, locks included, and a file the parent closed and reopens looks
//! "in use". Test harnesses and multi-threaded tools hit this whenever another
//! thread spawns a program (losetup, mkfs) at the wrong moment.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use cairn_io::host::Host;
use cairn_io::{DeviceFile, OpenMode};

#[test]
fn reopening_a_file_while_a_forked_child_still_shares_its_lock_waits_briefly() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("f");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let host = Host::real();
    let first = DeviceFile::open(&path, OpenMode::WRITE_EXCLUSIVE, &host).unwrap();
    let mut command = Command::new("true");
    // SAFETY: the closure only sleeps, which is async-signal-safe enough for a
    // test child that execs right after.
    unsafe {
        command.pre_exec(|| {
            std::thread::sleep(Duration::from_millis(60));
            Ok(())
        });
    }
    // Another thread spawns: its child forks at once, then sleeps before exec.
    let spawner = std::thread::spawn(move || command.spawn().unwrap().wait().unwrap());
    std::thread::sleep(Duration::from_millis(20));
    drop(first);
    // The child still holds the locked file description until it execs.
    let again = DeviceFile::open(&path, OpenMode::WRITE_EXCLUSIVE, &host);
    spawner.join().unwrap();
    assert!(again.is_ok(), "{:?}", again.err());
}
