//! `cairn serve` with the real binary and a real FUSE mount: the groups'
//! files read back byte for byte through the file system, at any offset;
//! written at any offset, against a model; names changed as databases
//! rely on (rename replacing atomically, unlink while open, fsync of file
//! and directory surviving a kill -9); SQLite on the mount; the group stays
//! held (a second mount is refused); SIGTERM unmounts, dismounts and leaves the
//! group clean. The service says it is ready with systemd's `READY=1` on
//! `$NOTIFY_SOCKET`, which is how the test waits for it: no sleeps.
//! Bad requests are refused with one line before anything is mounted.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
mod databases;
mod disks;
mod mount;
mod socket;
mod volumes;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use cairn_io::test_support::prerequisite;
use common::*;

const MIB: u64 = 1 << 20;

/// A group DATA (normal redundancy, failure groups A and B) over four
/// sparse disks of the rig.
fn group(rig: &Rig) {
    let dir = rig.path("");
    group_on(rig, [&dir, &dir, &dir, &dir], &[]);
}

/// Group DATA over four sparse disks `D0`..`D3`, each in its directory
/// (disks 0, 1 in failure group A; 2, 3 in B); `extra`: more `group
/// create` flags.
fn group_on(rig: &Rig, dirs: [&Path; 4], extra: &[&str]) {
    let mut args: Vec<String> = ["group", "create", "DATA", "--redundancy", "normal"]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect();
    for (i, dir) in dirs.iter().enumerate() {
        let path = sparse(&dir.join(format!("d{i}.img")), 256 * MIB);
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
}

/// A process of its own that holds `path` open until [`Holder::close`]
/// (not this test process: a descriptor it held could be copied into a
/// child another test forks).
struct Holder(std::process::Child);

impl Holder {
    fn open(path: &Path) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "exec 3< \"$1\" && echo open && { read line || true; }",
                "sh",
            ])
            .arg(path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut said)
            .unwrap();
        assert_eq!(said, "open\n", "the holder could not open {path:?}");
        Self(child)
    }

    /// Its stdin closed: it reads the end, exits, and its descriptors go.
    fn close(mut self) {
        drop(self.0.stdin.take());
        assert!(self.0.wait().unwrap().success());
    }
}

/// A small deterministic generator (xorshift64*): the same ops every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Run `sqlite3 db` on `script` (stdin); its output, or why it failed.
fn sqlite(db: &Path, script: &str) -> Result<String, String> {
    use std::io::Write;
    let mut child = std::process::Command::new("sqlite3")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("sqlite3: {e}"))?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        return Err(format!(
            "sqlite3 {}: {}{}",
            db.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// fio writing 8 KiB random blocks with `verify=crc32c` and
/// `verify_backlog` through the mount (io_uring, O_DIRECT, QD16), its
/// progress read as it goes.
/// fio, which scripts/install-deps installs.
fn fio_here() -> bool {
    if std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_err()
    {
        prerequisite::missing("fio (scripts/install-deps installs it)");
        return false;
    }
    true
}

struct FioVerify {
    child: Child,
    out: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    seen: String,
}

impl FioVerify {
    fn start(file: &Path, extra: &[&str]) -> Self {
        let mut child = std::process::Command::new("fio")
            .args([
                "--name=through-cairn",
                &format!("--filename={}", file.display()),
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
                "--eta=always",
                "--eta-newline=1",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
        Self {
            child,
            out,
            seen: String::new(),
        }
    }

    /// Wait for `n` more progress reports (its I/O under way: writing, or
    /// verifying what it wrote; several may share a line).
    fn progress(&mut self, n: usize) {
        let mut left = n;
        for line in self.out.by_ref() {
            let line = line.unwrap();
            self.seen.push_str(&line);
            self.seen.push('\n');
            left = left.saturating_sub(line.matches(" IOPS][eta").count());
            if left == 0 {
                return;
            }
        }
        panic!("fio ended early: {}", self.seen);
    }

    /// Its end: exit 0, no verify error, no I/O error.
    fn finish(mut self) {
        for line in self.out.by_ref() {
            self.seen.push_str(&line.unwrap());
            self.seen.push('\n');
        }
        let status = self.child.wait().unwrap();
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

/// Flushes each loop device completed (`/sys/block/loopN/stat`, field 15).
fn flushes(devices: &[cairn_io::test_support::loop_device::LoopDevice]) -> Vec<u64> {
    devices
        .iter()
        .map(|d| {
            let stat = std::fs::read_to_string(format!("/sys/block/{}/stat", d.name())).unwrap();
            stat.split_whitespace().nth(15).unwrap().parse().unwrap()
        })
        .collect()
}

/// CLI commands that give the same output (text or JSON) and exit status
/// whether `cairn serve` holds the group or not.
const SAME_THROUGH_THE_SOCKET: &[&[&str]] = &[
    &["ls", "+DATA/"],
    &["ls", "+DATA/orcl", "--json"],
    &["du", "+DATA/"],
    &["du", "+DATA/orcl", "--json"],
    &["group", "list"],
    &["group", "list", "--json"],
    &["group", "disks", "DATA"],
    &["group", "disks", "DATA", "--json"],
    &["group", "check", "DATA"],
    &["group", "check", "DATA", "--json"],
    &["group", "get", "DATA"],
    &["group", "get", "DATA", "disk_repair_time", "--json"],
    &["group", "ops", "DATA"],
];

/// One request line sent raw to the control socket: the replies.
fn raw_request(socket: &Path, line: &[u8]) -> String {
    use std::io::Write;
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.write_all(line).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Volumes need loop devices (and mkfs.ext4 for a file system on one).
fn loop_here() -> bool {
    if let Some(why) = cairn_io::test_support::loop_device::unavailable_reason() {
        prerequisite::missing(&format!("loop devices: {why}"));
        return false;
    }
    if std::process::Command::new("mkfs.ext4")
        .arg("-V")
        .output()
        .is_err()
    {
        prerequisite::missing("mkfs.ext4 (e2fsprogs)");
        return false;
    }
    true
}

/// A volume's block device and its mount, let go of however the test ends
/// — the device only while it is still this test's (its backing file under
/// `owner`): once let go of, its number may be another test's.
struct VolumeGuard {
    device: String,
    mount: PathBuf,
    owner: PathBuf,
}

impl Drop for VolumeGuard {
    fn drop(&mut self) {
        if mounted(&self.mount) {
            let _ = umount(&self.mount, libc::MNT_DETACH);
        }
        // (Only if empty: a mount point the test made, never data.)
        let _ = std::fs::remove_dir(&self.mount);
        let backing = std::fs::read_to_string(format!(
            "/sys/block/{}/loop/backing_file",
            self.device.trim_start_matches("/dev/")
        ))
        .unwrap_or_default();
        let owner = std::fs::canonicalize(&self.owner).unwrap_or_else(|_| self.owner.clone());
        if Path::new(backing.trim_end()).starts_with(&owner) {
            let _ = std::process::Command::new("losetup")
                .args(["-d", &self.device])
                .status();
        }
    }
}

/// PostgreSQL 15's programs (Debian's postgresql-15; scripts/install-deps).
const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A PostgreSQL program run as the `postgres` user: its output, or why it
/// failed.
fn as_postgres(program: &str, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new("runuser")
        .args(["-u", "postgres", "--", &format!("{PG_BIN}/{program}")])
        .args(args)
        .output()
        .map_err(|e| format!("runuser {program}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{program} {args:?}: {}\n{text}", out.status))
    }
}

/// A PostgreSQL server on a directory, stopped (immediately) however the
/// test ends.
struct Postgres {
    data: String,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = as_postgres(
            "pg_ctl",
            &["-D", &self.data, "-m", "immediate", "-w", "stop"],
        );
    }
}

/// pgbench run as `postgres` against the server at `sockets`, started and
/// left running, its progress (`-P 1`, on stderr) read line by line by a
/// thread of its own.
struct Pgbench {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: String,
}

impl Pgbench {
    /// `clients` clients (one thread each) for `seconds` (an hour: the
    /// scenario stops it when its events are done).
    fn start(sockets: &str, clients: u32, seconds: u32) -> Self {
        let mut child = std::process::Command::new("runuser")
            .args(["-u", "postgres", "--", &format!("{PG_BIN}/pgbench")])
            // -n: no vacuum first, which would empty pgbench_history.
            .args(["-h", sockets, "-n", "-P", "1"])
            .args(["-c", &clients.to_string(), "-j", &clients.to_string()])
            .args(["-T", &seconds.to_string(), "postgres"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in std::io::BufRead::lines(std::io::BufReader::new(stream)) {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Self {
            child,
            lines: rx,
            seen: String::new(),
        }
    }

    /// Wait for `n` more progress reports in which transactions completed
    /// (its work goes on): pgbench's own clock, one a second.
    fn progress(&mut self, n: usize) {
        let mut left = n;
        while left > 0 {
            let Ok(line) = self.lines.recv() else {
                panic!("pgbench ended early:\n{}", self.seen);
            };
            self.seen.push_str(&line);
            self.seen.push('\n');
            if line.starts_with("progress:") && !line.contains(" 0.0 tps") {
                left -= 1;
            }
        }
    }

    /// Its end: what it printed, and the transactions it reported done.
    fn finish(mut self) -> (String, u64) {
        let _ = self.child.wait().unwrap();
        for line in self.lines.iter() {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        let processed = pgbench_processed(&self.seen);
        (std::mem::take(&mut self.seen), processed)
    }
}

impl Drop for Pgbench {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The transactions pgbench reported done ("actually processed").
fn pgbench_processed(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|n| n.split('/').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no transaction count in pgbench's output:\n{text}"))
}

/// One SQL statement through psql as `postgres`: its output.
fn psql(sockets: &str, sql: &str) -> String {
    as_postgres("psql", &["-h", sockets, "-qAtc", sql, "postgres"])
        .unwrap()
        .trim()
        .to_string()
}

fn history_rows(sockets: &str) -> u64 {
    psql(sockets, "select count(*) from pgbench_history")
        .parse()
        .unwrap()
}

/// A disk's state in `group disks --json`.
fn disk_state(rig: &Rig, label: &str) -> String {
    let disks = rig.cairn(&["group", "disks", "DATA", "--json"]).ok().json();
    disks
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == label)
        .map_or_else(
            || "GONE".to_string(),
            |d| d["state"].as_str().unwrap().to_string(),
        )
}

/// A number from the environment (the full-size run under bench/ sets
/// them), else the CI size.
fn env_or(name: &str, ci: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ci)
}

/// `group space --json` through whoever holds the group: returnable bytes
/// on all disks.
fn returnable_total(rig: &Rig) -> u64 {
    let space = rig.cairn(&["group", "space", "DATA", "--json"]).ok().json();
    space
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["returnable_bytes"].as_u64().unwrap())
        .sum()
}

/// `cairn_disk_state_changes_total` of a disk of DATA, to a state.
fn state_changes(addr: &str, disk: &str, to: &str) -> f64 {
    metric(
        addr,
        &format!("cairn_disk_state_changes_total{{group=\"DATA\",disk=\"{disk}\",to=\"{to}\"}}"),
    )
}
