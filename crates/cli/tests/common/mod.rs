//! Helpers for end-to-end tests of the real `cairn` binary.

#![allow(dead_code, clippy::unwrap_used)]

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

mod serve;
#[allow(unused_imports)]
pub use serve::*;

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }

    /// Succeeded.
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "expected success:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    /// Refused: exit 1 and exactly one line on stderr, `cairn: error: ...`
    /// containing `needle`.
    pub fn refused(self, needle: &str) -> Self {
        assert_eq!(
            self.code, 1,
            "expected a refusal:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "exactly one line on stderr: {:?}",
            self.stderr
        );
        assert!(lines[0].starts_with("cairn: error: "), "{:?}", lines[0]);
        assert!(
            lines[0].contains(needle),
            "stderr {:?} lacks {needle:?}",
            lines[0]
        );
        self
    }
}

/// Run `cairn` with `args`, looking for disks only where `discover` says (so
/// parallel tests never see each other's devices) and with no config file.
pub fn cairn(discover: &str, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("CAIRN_DISCOVER", discover)
        .env("CAIRN_CONFIG", "/nonexistent/cairn.toml")
        .env("CAIRN_SOCKET", "/nonexistent/cairn.sock")
        .output()
        .expect("run cairn");
    Run::from(output)
}

/// A scratch directory on the build's real filesystem (O_DIRECT honoured).
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

pub fn sparse(path: &Path, size_bytes: u64) -> PathBuf {
    File::create(path).unwrap().set_len(size_bytes).unwrap();
    path.to_path_buf()
}

/// crc32c of a whole file or device, read in 1 MiB pieces.
pub fn digest(path: &Path) -> u32 {
    digest_but(path, 0..0)
}

/// [`digest`] with the bytes of `skip` read as zeros: a member disk's
/// contents but for a block a running service rewrites (its heartbeat).
pub fn digest_but(path: &Path, skip: std::ops::Range<u64>) -> u32 {
    let mut f = File::open(path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut crc = 0u32;
    let mut at = 0u64;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return crc;
        }
        let (start, end) = (skip.start.max(at), skip.end.min(at + n as u64));
        if start < end {
            buf[(start - at) as usize..(end - at) as usize].fill(0);
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        at += n as u64;
    }
}

/// Run a helper program (mkfs, sgdisk...); `Err` with the reason if it is not
/// installed or fails (a kernel without md, say).
pub fn tool(program: &str, args: &[&str]) -> Result<(), String> {
    let found = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(program))
        .find(|p| p.exists());
    let Some(exe) = found else {
        // scripts/test installs every tool first and sets CAIRN_REQUIRE_TOOLS:
        // there, a missing tool is a failure, not a skip.
        assert!(
            std::env::var_os("CAIRN_REQUIRE_TOOLS").is_none(),
            "{program} is required (CAIRN_REQUIRE_TOOLS is set) but not installed"
        );
        return Err(format!(
            "{program} is not installed (scripts/install-deps installs it)"
        ));
    };
    let out = Command::new(exe).args(args).output().unwrap();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{program} failed: {}",
            stderr.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    Ok(())
}

/// The signature types `wipefs --no-act` finds, or `None` (with a note) where
/// wipefs is not installed. A failing wipefs fails the test.
pub fn wipefs_types(path: &Path) -> Option<Vec<String>> {
    let exe = ["/usr/sbin/wipefs", "/sbin/wipefs"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists());
    let Some(exe) = exe else {
        assert!(
            std::env::var_os("CAIRN_REQUIRE_TOOLS").is_none(),
            "wipefs is required but not installed"
        );
        println!("skipped: the wipefs cross-check: wipefs is not installed");
        return None;
    };
    let out = Command::new(exe)
        .args(["--no-act", "--json"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wipefs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if out.stdout.iter().all(u8::is_ascii_whitespace) {
        return Some(Vec::new());
    }
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    Some(
        report["signatures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["type"].as_str().unwrap_or("?").to_string())
            .collect(),
    )
}

/// The disk entry for `path` in `cairn disk list --json` output.
pub fn entry<'a>(list: &'a Value, path: &Path) -> &'a Value {
    list["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"] == path.display().to_string())
        .unwrap_or_else(|| panic!("{} not listed: {list:#}", path.display()))
}

/// Bytes physically allocated to a file (what a thin array would hold).
pub fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// An Oracle ASM disk header of a disk group member, as kfed shows one: kfbh
/// (endian 1, hard 0x82, type 1 = KFBTYP_DISKHEAD), then kfdhdb with the
/// "ORCLDISK" provisioning string, status MEMBER, disk and group names.
pub fn asm_disk_header() -> Vec<u8> {
    let mut block = vec![0u8; 4096];
    block[..4].copy_from_slice(&[1, 0x82, 1, 1]);
    block[0x20..0x28].copy_from_slice(b"ORCLDISK");
    block[0x47] = 3;
    block[0x48..0x48 + 9].copy_from_slice(b"DATA_0000");
    block[0x68..0x68 + 4].copy_from_slice(b"DATA");
    block
}

pub fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
    f.sync_all().unwrap();
}

pub fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = File::open(path).unwrap();
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, offset).unwrap();
    buf
}

/// The `cairn` command as [`cairn`] sets it up — its own discovery string, no
/// config file — plus `envs` (a per-test `CAIRN_RUN_DIR`, say); not yet run,
/// so a test can also spawn it and watch it.
pub fn cairn_command(discover: &str, envs: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .env("CAIRN_DISCOVER", discover)
        .env("CAIRN_CONFIG", "/nonexistent/cairn.toml")
        .env("RUST_BACKTRACE", "0")
        // A test's commands reach only its own service (in its run
        // directory), never one running on the host.
        .env("CAIRN_SOCKET", "/nonexistent/cairn.sock");
    for (key, value) in envs {
        command.env(key, value);
        if *key == "CAIRN_RUN_DIR" && !envs.iter().any(|(k, _)| *k == "CAIRN_SOCKET") {
            command.env("CAIRN_SOCKET", format!("{value}/cairn.sock"));
        }
    }
    command
}

impl From<std::process::Output> for Run {
    fn from(output: std::process::Output) -> Self {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// [`cairn`] with extra environment variables.
/// Run `cairn ARGS` (discovery `discover`, and `envs`) until it exits by
/// itself. `safety_net` only bounds a run that never ends: that one is
/// killed and `Err` says so, for the caller to clean up after it and fail;
/// nothing here depends on how long the run took.
pub fn cairn_until_exit(
    discover: &str,
    envs: &[(&str, &str)],
    args: &[&str],
    safety_net: std::time::Duration,
) -> Result<Run, String> {
    let child = cairn_command(discover, envs)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || tx.send(child.wait_with_output()).ok());
    match rx.recv_timeout(safety_net) {
        Ok(output) => {
            waiter.join().unwrap();
            Ok(Run::from(output.unwrap()))
        }
        Err(_) => {
            // SAFETY: kill with a pid we spawned and a valid signal.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            waiter.join().unwrap();
            Err(format!(
                "`cairn {}` did not end on its own within {} s",
                args.join(" "),
                safety_net.as_secs()
            ))
        }
    }
}

pub fn cairn_with(discover: &str, envs: &[(&str, &str)], args: &[&str]) -> Run {
    let output = cairn_command(discover, envs)
        .args(args)
        .output()
        .expect("run cairn");
    Run::from(output)
}

/// Write `size_bytes` of pseudo-random bytes (xorshift64 from `seed`) to
/// `path`: incompressible, different per seed, and much faster than
/// /dev/urandom in a debug build.
pub fn random_file(path: &Path, size_bytes: u64, seed: u64) -> PathBuf {
    use std::io::Write;
    let mut state = seed | 1;
    let mut out = std::io::BufWriter::new(File::create(path).unwrap());
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = size_bytes;
    while left > 0 {
        for word in chunk.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        let n = left.min(chunk.len() as u64) as usize;
        out.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    out.into_inner().unwrap().sync_all().unwrap();
    path.to_path_buf()
}

/// A scratch directory of disks, the discovery string that finds them and a
/// lock directory (`CAIRN_RUN_DIR`) of its own: tests run in parallel without
/// seeing each other's disks or locks. Test files add what they need in
/// `impl Rig` blocks of their own.
pub struct Rig {
    pub dir: tempfile::TempDir,
    pub discover: String,
    pub run_dir: String,
}

impl Rig {
    /// Disks discovered as `*.img` in the directory.
    pub fn new() -> Self {
        Self::discovering(|dir| format!("{}/*.img", dir.display()))
    }

    /// The discovery string made from the directory.
    pub fn discovering(discover: impl FnOnce(&Path) -> String) -> Self {
        let dir = scratch();
        let discover = discover(dir.path());
        let run_dir = dir.path().join("run").display().to_string();
        Self {
            dir,
            discover,
            run_dir,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A path as the text `cairn` takes.
    pub fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    pub fn cairn(&self, args: &[&str]) -> Run {
        cairn_with(&self.discover, &[("CAIRN_RUN_DIR", &self.run_dir)], args)
    }

    /// `cairn` started and left running, its stderr piped.
    pub fn spawn(&self, args: &[&str]) -> Child {
        cairn_command(&self.discover, &[("CAIRN_RUN_DIR", &self.run_dir)])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `group check` passes and says so, in text and in JSON.
    pub fn check_clean(&self, group: &str) {
        check_clean(|args| self.cairn(args), group);
    }
}

/// `group check` run by `cairn` passes and says so, in text and in JSON.
pub fn check_clean(cairn: impl Fn(&[&str]) -> Run, group: &str) {
    let run = cairn(&["group", "check", group]).ok();
    assert_eq!(run.stdout.lines().last(), Some("clean"), "{}", run.stdout);
    let report = cairn(&["group", "check", group, "--json"]).ok().json();
    assert_eq!(report["problems"], serde_json::json!([]), "{report:#}");
}

/// `cairn cp FIFO DEST` that the test feeds through the FIFO, so that the
/// test, not the scheduler, decides how far the copy is when it looks at it
/// or kills it: the copy cannot end before the test closes its end.
///
/// A write into a FIFO returns only once the reader has taken all but the
/// pipe's buffer of it, and the copy reads its source only from inside the
/// copy proper — after opening it, mounting the group, taking its lock and
/// creating the unnamed file. So once [`FedCopy::feed`] has fed more than the
/// pipe holds, the copy is known to be mid-way, holding the group.
pub struct FedCopy {
    child: Child,
    feed: Option<File>,
    fed_bytes: u64,
}

impl Rig {
    /// Start `cairn [before...] cp <fifo> <dest>`, with a new FIFO named
    /// `fifo` in the scratch directory, and open the FIFO's writing end
    /// (the copy opens its end before it mounts anything).
    pub fn fed_copy(&self, fifo: &str, before: &[&str], dest: &str) -> FedCopy {
        use std::os::unix::ffi::OsStrExt;
        let path = self.path(fifo);
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
        let path_arg = path.display().to_string();
        let mut args = before.to_vec();
        args.extend(["cp", path_arg.as_str(), dest]);
        let mut child = self.spawn(&args);
        // The open blocks until the copy opens its end; watch the copy
        // meanwhile, so that one that ends first fails the test instead of
        // hanging it.
        let (sent, opened) = std::sync::mpsc::channel();
        let writer_path = path.clone();
        std::thread::spawn(move || {
            let _ = sent.send(std::fs::OpenOptions::new().write(true).open(writer_path));
        });
        let feed = loop {
            match opened.recv_timeout(std::time::Duration::from_millis(100)) {
                Ok(file) => break file.unwrap(),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if child.try_wait().unwrap().is_some() {
                        // Let the opener go (a reader now exists), then say why.
                        let _reader = std::fs::OpenOptions::new()
                            .read(true)
                            .custom_flags(libc::O_NONBLOCK)
                            .open(&path)
                            .unwrap();
                        panic!(
                            "the copy ended before opening its source: {}",
                            stderr_of(&mut child)
                        );
                    }
                }
                Err(e) => panic!("{e}"),
            }
        };
        FedCopy {
            child,
            feed: Some(feed),
            fed_bytes: 0,
        }
    }
}

impl FedCopy {
    /// The copy's process id, as lock holders are named.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Write `bytes` into the copy. Returns once the copy has read all but
    /// the pipe's buffer of everything fed so far; panics, with the copy's
    /// stderr, if it has ended.
    pub fn feed(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let written = self
            .feed
            .as_mut()
            .expect("the feed is open")
            .write_all(bytes);
        if let Err(e) = written {
            panic!(
                "feeding the copy: {e}; it ended: {}",
                stderr_of(&mut self.child)
            );
        }
        self.fed_bytes += bytes.len() as u64;
    }

    /// Assert that the copy has taken more than the pipe can hold, so it is
    /// inside the copy proper (mounted, locked, filling its file).
    pub fn assert_mid_copy(&self) {
        use std::os::fd::AsRawFd;
        let feed = self.feed.as_ref().expect("the feed is open");
        // SAFETY: F_GETPIPE_SZ on a descriptor this process holds open.
        let pipe_bytes = unsafe { libc::fcntl(feed.as_raw_fd(), libc::F_GETPIPE_SZ) };
        assert!(pipe_bytes > 0, "F_GETPIPE_SZ");
        assert!(
            self.fed_bytes > pipe_bytes as u64,
            "fed {} bytes, not more than the pipe's {pipe_bytes}: the copy may not have read any",
            self.fed_bytes
        );
    }

    /// Close the feed: the copy reads its source's end and finishes. Returns
    /// its exit status and stderr.
    pub fn finish(mut self) -> (std::process::ExitStatus, String) {
        drop(self.feed.take());
        let stderr = stderr_of(&mut self.child);
        (self.child.wait().unwrap(), stderr)
    }

    /// `kill -9` the copy while its feed is still open (so it cannot have
    /// finished), reap it, and check that the signal is what ended it.
    pub fn kill_9(mut self) {
        use std::os::unix::process::ExitStatusExt;
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "the copy ended by itself ({status}), not by the kill: {}",
            stderr_of(&mut self.child)
        );
        drop(self.feed.take());
    }
}

impl Drop for FedCopy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a child wrote to its piped stderr (to its end: call once it has
/// ended, or is about to).
fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut text);
    }
    text
}

/// A file system (in a file) mounted over a loop device, unmounted on drop.
pub struct SmallFs {
    pub mnt: PathBuf,
    image: PathBuf,
    /// The loop device [`SmallFs::revive`] mounted it from, if it did.
    revived: std::cell::RefCell<Option<String>>,
}

impl SmallFs {
    /// Make and mount an ext4 of `size_bytes` at `dir/name`; `Err` says why not.
    pub fn mount(dir: &Path, name: &str, size_bytes: u64) -> Result<Self, String> {
        if let Some(reason) = cairn_io::test_support::loop_device::unavailable_reason() {
            return Err(reason);
        }
        let image = sparse(&dir.join(format!("{name}.ext4")), size_bytes);
        tool("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()])?;
        let mnt = dir.join(name);
        std::fs::create_dir(&mnt).unwrap();
        tool(
            "mount",
            &["-o", "loop", image.to_str().unwrap(), mnt.to_str().unwrap()],
        )?;
        Ok(Self {
            mnt,
            image,
            revived: std::cell::RefCell::new(None),
        })
    }

    /// From now on every read and write on its open files fails with EIO,
    /// as a dead disk's do (EXT4_IOC_SHUTDOWN, no log flush).
    pub fn shut_down(&self) {
        use std::os::fd::AsRawFd;
        const EXT4_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587d;
        const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;
        let dir = std::fs::File::open(&self.mnt).unwrap();
        let flag = EXT4_GOING_FLAGS_NOLOGFLUSH;
        // SAFETY: the ioctl reads one u32 through the pointer, which points
        // at a live local.
        let rc = unsafe { libc::ioctl(dir.as_raw_fd(), EXT4_IOC_SHUTDOWN, &flag) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    }
}

impl SmallFs {
    /// Unmount it, not lazily, as an administrator would to repair it:
    /// `Err` (umount's own words) while a process holds a file on it.
    pub fn unmount(&self) -> Result<(), String> {
        tool("umount", &[self.mnt.to_str().unwrap()])
    }

    /// Mount it again from its image, after [`SmallFs::unmount`].
    pub fn mount_again(&self) {
        tool(
            "mount",
            &[
                "-o",
                "loop",
                self.image.to_str().unwrap(),
                self.mnt.to_str().unwrap(),
            ],
        )
        .unwrap();
    }

    /// Bring it back while its dead files are still open (by a service
    /// that holds a failed disk): the dead instance is let go of lazily,
    /// and the image mounted again from a loop device of its own (the old
    /// one stays with the dead instance until its last file is closed).
    /// The dead instance never writes again (shut down), so the two never
    /// both write the image. Files opened from now on answer; the old
    /// descriptors keep failing, as a failed disk's do.
    pub fn revive(&self) {
        tool("umount", &["-l", self.mnt.to_str().unwrap()]).unwrap();
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show", self.image.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
        *self.revived.borrow_mut() = Some(device.clone());
        tool("mount", &[&device, self.mnt.to_str().unwrap()]).unwrap();
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // Lazily where a process (a service a failing test left running)
        // still holds a file on it: its scratch directory is removed next,
        // and must not reach into the mount.
        if tool("umount", &[self.mnt.to_str().unwrap()]).is_err() {
            let _ = tool("umount", &["-l", self.mnt.to_str().unwrap()]);
        }
        if let Some(device) = self.revived.borrow_mut().take() {
            let _ = tool("losetup", &["-d", &device]);
        }
    }
}
