//! An exclusive open must not fail because a child process of ours is between
//! fork and exec: for that moment the child shares every open file of the
//! parent, locks included, and a file the parent closed and reopens looks
//! "in use". Test harnesses and multi-threaded tools hit this whenever another
//! thread spawns a program (losetup, mkfs) at the wrong moment.
//!
//! The race is staged by a handshake, never by sleeps: the child, between
//! fork and exec, tells the test it is there (holding the lock) and waits;
//! the reopen's first `flock` finds the file locked and, instead of sleeping,
//! calls the scheduler this test installs (`cairn_io::sched`), which lets the
//! child go and waits until it has exited. So every run exercises the retry,
//! whatever the machine's speed.
//!
//! Why exited and not exec'd: the kernel closes a close-on-exec file at exec
//! but releases it (and its lock) only as the task returns to user space, in
//! an order that can put the pipe's end-of-file before the lock's release. A
//! reaped child has released every file it held.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use cairn_io::host::Host;
use cairn_io::sched::{self, Scheduler};
use cairn_io::{DeviceFile, OpenMode};

/// A pipe whose ends close at exec: `[read, write]`.
fn pipe() -> [RawFd; 2] {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    fds
}

/// One byte from `fd`, or `None` at end of file.
fn read_byte(fd: RawFd) -> Option<u8> {
    let mut b = 0u8;
    loop {
        // SAFETY: reads at most one byte into `b`.
        let n = unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
        match n {
            1 => return Some(b),
            0 => return None,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => panic!("read: {}", std::io::Error::last_os_error()),
        }
    }
}

fn close(fd: RawFd) {
    // SAFETY: the test owns `fd` and closes it once.
    unsafe { libc::close(fd) };
}

/// Called where the reopen would sleep before trying the lock again: the
/// first time, it lets the child exec (the pipe's write end the child holds
/// closes at exec, so the read sees end of file) and waits until the thread
/// that spawned it has reaped it.
struct ReleaseTheChild {
    go_write: RawFd,
    there_read: RawFd,
    reaped: Mutex<mpsc::Receiver<()>>,
    waits: AtomicUsize,
}

impl Scheduler for ReleaseTheChild {
    fn yield_now(&self) {}

    fn blocked(&self) {
        if self.waits.fetch_add(1, Ordering::SeqCst) > 0 {
            return;
        }
        // SAFETY: writes one byte from a static.
        let written = unsafe { libc::write(self.go_write, b"g".as_ptr().cast(), 1) };
        assert_eq!(written, 1);
        assert_eq!(read_byte(self.there_read), None, "the child said more");
        let reaped = self.reaped.lock().unwrap().recv();
        assert!(reaped.is_ok(), "the spawning thread ended without reaping");
    }
}

#[test]
fn reopening_a_file_while_a_forked_child_still_shares_its_lock_waits_for_it() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("f");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let host = Host::real();
    let first = DeviceFile::open(&path, OpenMode::WRITE_EXCLUSIVE, &host).unwrap();

    let [there_read, there_write] = pipe();
    let [go_read, go_write] = pipe();
    let mut command = Command::new("true");
    // SAFETY: the closure makes only async-signal-safe calls (write, read).
    unsafe {
        command.pre_exec(move || {
            if libc::write(there_write, b"t".as_ptr().cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            let mut b = 0u8;
            if libc::read(go_read, (&mut b as *mut u8).cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Spawning blocks until the child execs, which waits for the test: so
    // another thread spawns.
    let (reaped_tx, reaped) = mpsc::channel();
    let spawner = std::thread::spawn(move || {
        let status = command.spawn().unwrap().wait().unwrap();
        // The test may have stopped listening (it fails below): no matter.
        let _ = reaped_tx.send(());
        status
    });
    assert_eq!(read_byte(there_read), Some(b't'), "the child never forked");
    // The child is between fork and exec, with its copy of `first`.
    close(there_write);
    close(go_read);
    drop(first);

    let release = Arc::new(ReleaseTheChild {
        go_write,
        there_read,
        reaped: Mutex::new(reaped),
        waits: AtomicUsize::new(0),
    });
    sched::install(Some(release.clone()));
    let again = DeviceFile::open(&path, OpenMode::WRITE_EXCLUSIVE, &host);
    sched::install(None);
    let waits = release.waits.load(Ordering::SeqCst);
    if waits == 0 {
        // The reopen never waited: let the child go before failing below.
        // SAFETY: writes one byte from a static.
        unsafe { libc::write(go_write, b"g".as_ptr().cast(), 1) };
    }
    assert!(spawner.join().unwrap().success());
    assert!(again.is_ok(), "{:?}", again.err());
    assert_eq!(
        waits, 1,
        "the first try finds the file locked by the child, the second does not"
    );
    close(go_write);
    close(there_read);
}
