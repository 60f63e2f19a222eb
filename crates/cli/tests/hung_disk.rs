//! A member disk that stops answering under `cairn serve`, for real: its
//! file is on a small FUSE file system of the test's own
//! (`cairn_io::test_support::hang_fs`) that passes I/O through until told to
//! block, and then holds every read, write and flush unanswered, as a SAN
//! path that stopped answering does. fio writes and verifies (`crc32c`)
//! through the service's mount the whole time.
//!
//! - With a short `disk_io_timeout`, the service takes the hung disk OFFLINE
//!   once its I/O times out, and fio sees no error: writes complete on the
//!   other copies.
//! - `group offline` of the disk while its I/O hangs returns (the drain of
//!   the data operations on the old view is bounded and runs outside the
//!   metadata lock).
//!
//! Then the disk answers again, comes back with `group online` (resynced
//! whole: what it held when it hung is not trusted), the service stops
//! cleanly and the group checks clean. Every wait is for a condition (READY=1
//! on `$NOTIFY_SOCKET`, fio's progress, a held request, a disk state, a
//! process's exit) under a bound far beyond the timeout set: a service that
//! hangs fails the test at the bound instead of hanging it.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use cairn_io::test_support::hang_fs::HangFs;
use cairn_io::test_support::prerequisite;
use common::*;

const MIB: u64 = 1 << 20;
/// The bound on any one wait: a failure, never a synchronisation.
const BOUND: Duration = Duration::from_secs(120);

/// Disks `d0`, `d1` (failure group A) and `d3` (B) as sparse files in the
/// rig, and D2 (B) on the hanging file system; group DATA (normal
/// redundancy) over them, with `disk_io_timeout` set to `timeout`.
fn group_with_a_disk_that_can_hang(timeout: &str) -> Option<(Rig, Arc<HangFs>)> {
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/fuse").exists() {
        prerequisite::missing("FUSE: needs root and /dev/fuse");
        return None;
    }
    if std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_err()
    {
        prerequisite::missing("fio (scripts/install-deps installs it)");
        return None;
    }
    let rig = Rig::discovering(|dir| format!("{0}/d*.img,{0}/hang/*.img", dir.display()));
    let backing = sparse(&rig.path("hang-backing.img"), 256 * MIB);
    let mnt = rig.path("hang");
    std::fs::create_dir(&mnt).unwrap();
    let fs = Arc::new(prerequisite::or_skip(HangFs::mount(&mnt, &backing))?);
    let mut args: Vec<String> = ["group", "create", "DATA", "--redundancy", "normal"]
        .iter()
        .chain(&["--au-size", "1M"])
        .map(|s| s.to_string())
        .collect();
    for i in 0..4 {
        let path = if i == 2 {
            fs.file()
        } else {
            sparse(&rig.path(&format!("d{i}.img")), 256 * MIB)
        };
        rig.cairn(&["disk", "label", &format!("D{i}"), path.to_str().unwrap()])
            .ok();
        args.push("--disk".into());
        args.push(format!(
            "{}={}",
            path.display(),
            if i < 2 { "A" } else { "B" }
        ));
    }
    rig.cairn(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();
    rig.cairn(&[
        "group",
        "set",
        "DATA",
        &format!("disk_io_timeout={timeout}"),
    ])
    .ok();
    Some((rig, fs))
}

/// Run `f` on a thread of its own: its result, or a failure naming `what`
/// if it has not returned within [`BOUND`].
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(BOUND)
        .unwrap_or_else(|_| panic!("{what} did not return within {BOUND:?}: it hangs"))
}

/// `cairn` on the rig, bounded.
fn cairn(rig: &Rig, args: &[&str]) -> Run {
    let (discover, run_dir) = (rig.discover.clone(), rig.run_dir.clone());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let what = format!("cairn {}", args.join(" "));
    bounded(&what, move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cairn_with(&discover, &[("CAIRN_RUN_DIR", &run_dir)], &args)
    })
}

fn disk_state(rig: &Rig, label: &str) -> String {
    let disks = cairn(rig, &["group", "disks", "DATA", "--json"])
        .ok()
        .json();
    disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == label)
        .map(|d| d["state"].as_str().unwrap().to_string())
        .unwrap()
}

/// `cairn serve` on the rig; a test that fails half-way lets the held
/// requests go before it kills the service (a process waiting in a FUSE
/// request the daemon holds cannot die until it is answered).
fn serve(rig: &Rig, fs: &Arc<HangFs>) -> Service {
    let fs = fs.clone();
    Service::start(rig, &[]).before_kill(move || fs.unblock())
}

/// fio writing 8 KiB random blocks with `verify=crc32c` through the mount
/// for a fixed time (the workload's length, not a synchronisation).
struct Fio {
    child: Child,
    progress: mpsc::Receiver<String>,
    seen: String,
}

impl Fio {
    fn start(file: &Path, runtime: &str) -> Self {
        let mut child = std::process::Command::new("fio")
            .args([
                "--name=hung-disk",
                &format!("--filename={}", file.display()),
                "--size=32M",
                "--rw=randwrite",
                "--bs=8k",
                "--ioengine=io_uring",
                "--iodepth=16",
                "--direct=1",
                "--verify=crc32c",
                "--verify_backlog=256",
                "--verify_state_save=0",
                "--verify_fatal=1",
                "--do_verify=1",
                "--time_based",
                &format!("--runtime={runtime}"),
                "--eta=always",
                "--eta-newline=1",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, progress) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(out)) {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            progress,
            seen: String::new(),
        }
    }

    /// Wait for a progress report (its I/O is under way).
    fn progress(&mut self) {
        loop {
            let line = self
                .progress
                .recv_timeout(BOUND)
                .unwrap_or_else(|e| panic!("no fio progress ({e}): {}", self.seen));
            self.seen.push_str(&line);
            self.seen.push('\n');
            if line.contains(" IOPS][eta") {
                return;
            }
        }
    }

    /// Its end, within the bound: exit 0, no verify error, no I/O error.
    fn finish(mut self) {
        let deadline = Instant::now() + BOUND;
        while let Ok(line) = self
            .progress
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        // Its output ends just before it exits: wait for the exit (a poll
        // of the process, bounded).
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("fio did not end within {BOUND:?}: {}", self.seen);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
        let seen = &self.seen;
        assert!(
            status.success() && !err.contains("verify") && !err.contains("error"),
            "fio: {status}\n{err}\n{seen}"
        );
        assert!(seen.contains("err= 0"), "{seen}");
    }
}

impl Drop for Fio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until `label` is in `state`, within the bound.
fn wait_for_state(rig: &Rig, label: &str, state: &str) {
    let started = Instant::now();
    loop {
        let now = disk_state(rig, label);
        if now == state {
            return;
        }
        assert!(
            started.elapsed() < BOUND,
            "{label} still {now} after {BOUND:?}, not {state}"
        );
        // A poll of the service between looks, not a synchronisation:
        // the condition is the disk's state.
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// fio's end ([`Fio::finish`]), with the service's log if it failed.
fn finish_or_show_log(rig: &Rig, fio: Fio) {
    let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fio.finish()));
    if let Err(why) = ended {
        let log = std::fs::read_to_string(rig.path("serve.log")).unwrap_or_default();
        eprintln!("the service's log:\n{log}");
        std::panic::resume_unwind(why);
    }
}

/// The disk answers again; it comes back (resynced whole), the service
/// stops cleanly and the group checks clean.
fn recover(rig: &Rig, fs: &HangFs, service: Service) {
    fs.unblock();
    let back = cairn(rig, &["group", "online", "DATA", "D2", "--wait", "--json"])
        .ok()
        .json();
    assert!(
        back["disks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "ONLINE"),
        "{back}"
    );
    assert_eq!(service.stop().0, 0);
    rig.check_clean("DATA");
}

#[test]
fn a_disk_that_stops_answering_goes_offline_at_its_timeout_and_fio_sees_no_error() {
    let Some((rig, fs)) = group_with_a_disk_that_can_hang("2s") else {
        return;
    };
    let service = serve(&rig, &fs);
    let mut fio = Fio::start(&rig.path("mnt/DATA/fio.dat"), "12s");
    fio.progress();
    assert_eq!(disk_state(&rig, "D2"), "ONLINE");
    fs.block();
    let blocked = Instant::now();
    assert!(
        fs.wait_held(1, BOUND),
        "no I/O reached the blocked disk within {BOUND:?}"
    );
    wait_for_state(&rig, "D2", "OFFLINE");
    eprintln!(
        "D2 seen OFFLINE {:.1} s after it stopped answering (disk_io_timeout 2 s); {} requests held",
        blocked.elapsed().as_secs_f64(),
        fs.held_total()
    );
    fio.progress();
    finish_or_show_log(&rig, fio);
    // Said once in the service's log, with why: the timeout (met by a data
    // or metadata I/O, or by the heartbeat's write, whichever came first).
    let log = std::fs::read_to_string(rig.path("serve.log")).unwrap();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("disk D2: ONLINE -> OFFLINE"))
        .collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains("I/O timeout") || said[0].contains("heartbeat"),
        "{}",
        said[0]
    );
    recover(&rig, &fs, service);
}

#[test]
fn group_offline_returns_while_the_disk_s_io_hangs() {
    // The disk stays blocked until the command has returned: it returns
    // because its waits are bounded (the drain, and its own flush of the
    // disk, end at the timeout), not because the disk came back. Meanwhile
    // the healthy disks must stay ONLINE: with D2's failure group down, one
    // more disk reported failed stops the group, and fio sees an error.
    // (The offline's flush holds the hung file's inode lock; a write to it
    // entered in a service thread must not hold that thread, nor charge
    // the healthy copy entered beside it: docs/live-core.md, "A hung disk
    // cannot charge another".) 10 s, so that the command mostly reaches
    // the service before the service times the disk out by itself; when it
    // does not (a loaded machine, or a metadata step holding `meta` on the
    // hung disk until its timeout), the disk is OFFLINE already and the
    // command holds it so: it succeeds either way, and says which.
    let Some((rig, fs)) = group_with_a_disk_that_can_hang("10s") else {
        return;
    };
    let service = serve(&rig, &fs);
    let mut fio = Fio::start(&rig.path("mnt/DATA/fio.dat"), "12s");
    fio.progress();
    fs.block();
    assert!(
        fs.wait_held(1, BOUND),
        "no I/O reached the blocked disk within {BOUND:?}"
    );
    let asked = Instant::now();
    cairn(&rig, &["group", "offline", "DATA", "D2"]).ok();
    eprintln!(
        "group offline returned {:.1} s after it was asked, the disk's I/O hanging (disk_io_timeout 10 s)",
        asked.elapsed().as_secs_f64()
    );
    assert_eq!(disk_state(&rig, "D2"), "OFFLINE");
    let log = std::fs::read_to_string(rig.path("serve.log")).unwrap();
    eprintln!(
        "D2 went OFFLINE {}",
        if log.contains("held so on request") {
            "at its timeout, before the command reached it (held offline by it)"
        } else {
            "by the command"
        }
    );
    // The held requests are answered now; fio's writes went on without D2.
    fs.unblock();
    finish_or_show_log(&rig, fio);
    recover(&rig, &fs, service);
}
