//! `cairn serve` for the end-to-end tests: one way to start it, wait for
//! what it logs, stop it and clean its mount up, whatever the test.
//!
//! Its stderr is drained by a thread of its own (a service blocked on a
//! full pipe would hang the test) into a shared text, and into
//! `serve.log` beside its disks for the failure report. Waits are on a
//! condition variable with a bound (a failure, never a synchronisation,
//! hits the bound): the event is the line's arrival.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cairn_io::test_support::prerequisite;

use super::{cairn_command, Rig};

/// How long a service may take to say READY, to log an event waited for,
/// or to stop after SIGTERM before the test fails.
pub const SERVE_BOUND: Duration = Duration::from_secs(120);

/// Whether this machine can serve (FUSE needs root and /dev/fuse); where
/// not, says so (a failure in CI, where every prerequisite is required).
pub fn fuse_here() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || !Path::new("/dev/fuse").exists() {
        prerequisite::missing("FUSE: needs root and /dev/fuse");
        return false;
    }
    true
}

/// umount2 of a test's own FUSE mount (canonical path): its return code.
pub fn umount(path: &Path, flags: i32) -> i32 {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; umount2 reads only it.
    unsafe { libc::umount2(path.as_ptr(), flags) }
}

/// Whether `path` is a mount point, as /proc/self/mounts lists them.
pub fn mounted(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    // As the kernel lists it: canonical (the scratch paths have no spaces,
    // which it would escape).
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = path.to_str().unwrap();
    assert!(!path.contains(' '), "{path}");
    mounts
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(path))
}

/// The service's log as it arrives, and whether its stderr has ended.
#[derive(Default)]
struct Log {
    text: String,
    ended: bool,
}

/// A running `cairn serve`. Dropped by a test that failed half-way, it
/// leaves no service and no mount behind.
pub struct Service {
    child: Option<Child>,
    pub mountpoint: PathBuf,
    log: Arc<(Mutex<Log>, Condvar)>,
    /// Where [`Service::wait_for_log`] goes on from.
    cursor: usize,
    /// Killed on purpose: its dead mount stays for the next service.
    leave_mount: bool,
    /// Run before the service is killed (a test holding a FUSE request
    /// must let it go, or the process cannot die).
    before_kill: Option<Box<dyn Fn() + Send>>,
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(f) = &self.before_kill {
                f();
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if !self.leave_mount && mounted(&self.mountpoint) {
            let _ = umount(&self.mountpoint, libc::MNT_DETACH);
        }
    }
}

impl Service {
    /// `cairn serve --mountpoint RIG/mnt ARGS` on the rig's disks, once it
    /// said READY=1.
    pub fn start(rig: &Rig, args: &[&str]) -> Self {
        let command = cairn_command(&rig.discover, &[("CAIRN_RUN_DIR", rig.run_dir.as_str())]);
        Self::spawn(command, &rig.path("mnt"), &rig.path(""), args)
    }

    /// `command serve --mountpoint MOUNTPOINT ARGS`, its notify socket and
    /// log in `dir`; returned once it said READY=1.
    pub fn spawn(mut command: Command, mountpoint: &Path, dir: &Path, args: &[&str]) -> Self {
        // (After a kill -9 the dead mount is there, and unreadable.)
        let _ = std::fs::create_dir_all(mountpoint);
        let mountpoint = std::fs::canonicalize(mountpoint).unwrap_or_else(|_| mountpoint.into());
        let notify = dir.join("notify.sock");
        let _ = std::fs::remove_file(&notify);
        let ready = UnixDatagram::bind(&notify).unwrap();
        ready.set_read_timeout(Some(SERVE_BOUND)).unwrap();
        let mut child = command
            .env("NOTIFY_SOCKET", &notify)
            .args(["serve", "--mountpoint", mountpoint.to_str().unwrap()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log: Arc<(Mutex<Log>, Condvar)> = Arc::default();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("serve.log"))
            .unwrap();
        let shared = log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
                let Ok(line) = line else { break };
                let _ = writeln!(file, "{line}");
                let mut log = shared.0.lock().unwrap_or_else(|e| e.into_inner());
                log.text.push_str(&line);
                log.text.push('\n');
                shared.1.notify_all();
            }
            shared.0.lock().unwrap_or_else(|e| e.into_inner()).ended = true;
            shared.1.notify_all();
        });
        let mut service = Self {
            child: Some(child),
            mountpoint,
            log,
            cursor: 0,
            leave_mount: false,
            before_kill: None,
        };
        let mut buf = [0u8; 64];
        // A signal that reaches this thread meanwhile interrupts the wait
        // (EINTR): wait again, for what is left of the bound.
        let deadline = std::time::Instant::now() + SERVE_BOUND;
        let got = loop {
            match ready.recv(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break Err(e);
                    }
                    ready.set_read_timeout(Some(left)).unwrap();
                }
                other => break other,
            }
        };
        match got {
            Ok(n) => assert_eq!(&buf[..n], b"READY=1\n"),
            Err(e) => {
                let mut child = service.child.take().unwrap();
                let _ = child.kill();
                let _ = child.wait();
                panic!("serve never said READY ({e}): {}", service.log());
            }
        }
        service
    }

    /// Run `f` before the service is killed by a failing test.
    pub fn before_kill(mut self, f: impl Fn() + Send + 'static) -> Self {
        self.before_kill = Some(Box::new(f));
        self
    }

    /// A path under the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mountpoint.join(rel)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill with a pid we spawned and a valid signal.
        assert_eq!(unsafe { libc::kill(self.pid() as i32, signal) }, 0);
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        self.log
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .text
            .clone()
    }

    /// A mark in the log, for [`Service::wait_since`].
    pub fn mark(&self) -> usize {
        self.log
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .text
            .len()
    }

    /// Wait until the log after `mark` holds `needle`; the text after the
    /// mark. (Bounded: a service that never logs it fails the test.)
    pub fn wait_since(&self, mark: usize, needle: &str) -> String {
        let deadline = Instant::now() + SERVE_BOUND;
        let mut log = self.log.0.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let after = &log.text[mark.min(log.text.len())..];
            if after.contains(needle) {
                return after.to_string();
            }
            if log.ended {
                panic!("the log ended without {needle:?}: {}", log.text);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!(
                    "no {needle:?} in the log within {SERVE_BOUND:?}: {}",
                    log.text
                );
            }
            log = self
                .log
                .1
                .wait_timeout(log, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Wait for the next line (after the last one waited for) that holds
    /// `needle`.
    pub fn wait_for_log(&mut self, needle: &str) {
        let after = self.wait_since(self.cursor, needle);
        let at = after.find(needle).unwrap();
        let end = after[at..].find('\n').map_or(after.len(), |n| at + n + 1);
        self.cursor += end;
    }

    /// The last line logged that holds `needle` (after a wait for it).
    pub fn line_with(&self, needle: &str) -> String {
        let log = self.log();
        log.lines()
            .rfind(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in the log: {log}"))
            .to_string()
    }

    /// The metrics endpoint's address, from its log line (waited for).
    pub fn metrics_addr(&mut self) -> String {
        self.wait_for_log("metrics at http://");
        self.line_with("metrics at http://")
            .split("metrics at http://")
            .nth(1)
            .and_then(|t| t.split('/').next())
            .unwrap()
            .to_string()
    }

    /// Wait (bounded) for it to exit by itself: its exit code and all it
    /// logged.
    pub fn exited(mut self) -> (i32, String) {
        let child = self.child.take().unwrap();
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut child = child;
            let _ = tx.send(child.wait().map(|s| s.code().unwrap_or(-1)));
        });
        let code = match rx.recv_timeout(SERVE_BOUND) {
            Ok(status) => status.unwrap(),
            Err(_) => {
                if let Some(f) = &self.before_kill {
                    f();
                }
                // SAFETY: kill with a pid we spawned and a valid signal.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                panic!(
                    "the service did not exit within {SERVE_BOUND:?}: {}",
                    self.log()
                )
            }
        };
        // Its stderr ends with it (unless a child it left holds it: then
        // what arrived within the bound).
        let deadline = Instant::now() + SERVE_BOUND;
        let mut log = self.log.0.lock().unwrap_or_else(|e| e.into_inner());
        while !log.ended {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            log = self
                .log
                .1
                .wait_timeout(log, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        (code, log.text.clone())
    }

    /// SIGTERM, then (bounded) its exit code and all it logged.
    pub fn stop(self) -> (i32, String) {
        self.signal(libc::SIGTERM);
        self.exited()
    }

    /// SIGKILL: the service dies where it stands, its mount left dead
    /// (for the next service to clean up).
    pub fn kill_9(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        self.leave_mount = true;
    }
}

/// One HTTP request to `addr`: the status line and the body.
pub fn http_get(addr: &str, request: &str) -> (String, String) {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

/// A metric's value at the endpoint `addr`, `None` when the series is not
/// exposed.
fn metric_of(addr: &str, series: &str) -> Option<f64> {
    let (status, body) = http_get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(status.contains("200"), "{status}");
    body.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
}

/// A metric's value at the endpoint `addr` (0 when the series is not
/// there: a counter that never counted).
pub fn metric(addr: &str, series: &str) -> f64 {
    metric_of(addr, series).unwrap_or(0.0)
}

/// A metric's value at the endpoint `addr`; the series must be exposed
/// (a gauge always is).
pub fn metric_listed(addr: &str, series: &str) -> f64 {
    metric_of(addr, series).unwrap_or_else(|| panic!("{series} is not exposed at {addr}"))
}

/// Where a group command is carried out: the one test body of a scenario
/// runs once on each (issue 34: a check one door makes and the other
/// forgets fails one of the pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// No service: each command mounts the group for itself.
    Held,
    /// `cairn serve` holds the group; commands go through its socket.
    Served,
}

/// Each scenario as two tests, `held` and `served`, in a module named
/// for it: `two_hosts!(name, body)` with `fn body(host: Host)`.
#[macro_export]
macro_rules! two_hosts {
    ($name:ident, $body:ident) => {
        mod $name {
            #[test]
            fn held() {
                super::$body(super::Host::Held)
            }
            #[test]
            fn served() {
                super::$body(super::Host::Served)
            }
        }
    };
}

/// A rig and its host: the service while one runs. (The service is
/// declared first, so it is dropped — killed and its mount cleaned up —
/// before the rig's directory, which holds the mount point, is removed.)
pub struct Door {
    service: Option<Service>,
    pub rig: Rig,
    pub host: Host,
}

impl Door {
    /// A rig for `host`, or `None` where this machine cannot serve (a
    /// missing prerequisite fails in CI).
    pub fn new(host: Host) -> Option<Self> {
        Self::on(Rig::new(), host)
    }

    /// A rig with no service: the CLI holds the group for each command.
    pub fn held() -> Self {
        Self::new(Host::Held).expect("a held door needs nothing")
    }

    /// `cairn serve` on this rig's disks must refuse to start, in one line
    /// naming `needle`, and leave nothing mounted. (Bounded: one that
    /// starts after all is killed and fails the test.)
    pub fn serve_refused(&self, needle: &str) -> super::Run {
        let mnt = self.rig.path("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let run = super::cairn_until_exit(
            &self.rig.discover,
            &[("CAIRN_RUN_DIR", &self.rig.run_dir)],
            &["serve", "--mountpoint", mnt.to_str().unwrap()],
            SERVE_BOUND,
        )
        .unwrap_or_else(|why| {
            // It started after all, and was killed: its mount is dead.
            let _ = umount(&mnt, libc::MNT_DETACH);
            panic!("{why}")
        })
        .refused(needle);
        assert!(!mounted(&mnt), "nothing left mounted");
        run
    }

    /// `rig` for `host`, as [`Door::new`].
    pub fn on(rig: Rig, host: Host) -> Option<Self> {
        if host == Host::Served && !fuse_here() {
            return None;
        }
        Some(Self {
            service: None,
            rig,
            host,
        })
    }

    /// Start the service (held: nothing to start).
    pub fn start(&mut self) {
        self.start_env(&[]);
    }

    /// As [`Door::start`], the service given `env` too.
    pub fn start_env(&mut self, env: &[(&str, &str)]) {
        if self.host == Host::Served && self.service.is_none() {
            let mut envs = vec![("CAIRN_RUN_DIR", self.rig.run_dir.as_str())];
            envs.extend_from_slice(env);
            let command = cairn_command(&self.rig.discover, &envs);
            self.service = Some(Service::spawn(
                command,
                &self.rig.path("mnt"),
                &self.rig.path(""),
                &[],
            ));
        }
    }

    /// Stop the service cleanly (SIGTERM, exit 0); held: nothing to stop.
    pub fn stop(&mut self) {
        if let Some(service) = self.service.take() {
            let (code, log) = service.stop();
            assert_eq!(code, 0, "serve: {log}");
        }
    }

    /// The service, while one runs.
    pub fn service(&self) -> Option<&Service> {
        self.service.as_ref()
    }

    /// `cairn ARGS`: through the socket while the service runs; a command
    /// that succeeds there must have been carried out by the service (its
    /// log names it), so one the CLI quietly ran itself fails. (A refusal
    /// may come from the CLI, which parses and checks the command line
    /// before anything is sent: see [`Door::sent`].)
    pub fn cairn(&self, args: &[&str]) -> super::Run {
        self.run(args, false)
    }

    /// As [`Door::cairn`], and the service must have been asked whatever
    /// the outcome (a refusal it made, not the CLI).
    pub fn sent(&self, args: &[&str]) -> super::Run {
        self.run(args, true)
    }

    fn run(&self, args: &[&str], always: bool) -> super::Run {
        let Some(service) = &self.service else {
            return self.rig.cairn(args);
        };
        let mark = service.mark();
        let run = self.rig.cairn(args);
        if args[0] != "disk" && (always || run.code == 0) {
            let name = if matches!(args[0], "group" | "volume") {
                args[..2].join(" ")
            } else {
                args[0].to_string()
            };
            // The service logs a command as it takes it, before it
            // answers: the line is on its way when the CLI has exited.
            service.wait_since(mark, &format!("cairn {name}: "));
        }
        run
    }

    /// Copy `group_path` out to a new OS file (through this door) and
    /// compare it with `expected`: length and contents.
    pub fn assert_reads_back(&self, group_path: &str, expected: &Path) {
        let out = self.path(&format!("out-{}.bin", super::digest(expected)));
        let _ = std::fs::remove_file(&out);
        self.cairn(&["cp", group_path, out.to_str().unwrap()]).ok();
        assert_eq!(
            std::fs::metadata(&out).unwrap().len(),
            std::fs::metadata(expected).unwrap().len(),
            "{group_path}: size"
        );
        assert_eq!(
            super::digest(&out),
            super::digest(expected),
            "{group_path}: contents"
        );
        std::fs::remove_file(&out).unwrap();
    }

    /// `group check` through this door passes and says so.
    pub fn check_clean(&self, group: &str) {
        super::check_clean(|args| self.cairn(args), group);
    }

    /// A path of the rig.
    pub fn path(&self, name: &str) -> PathBuf {
        self.rig.path(name)
    }

    /// The file `+GROUP/...` as a program outside the CLI's commands (a
    /// benchmark) names it: held, the group path (the program mounts the
    /// group for itself); served, the path under the mount, its
    /// directories made.
    pub fn target(&self, group_path: &str) -> String {
        let Some(service) = &self.service else {
            return group_path.to_string();
        };
        let path = service.path(group_path.trim_start_matches('+'));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        path.display().to_string()
    }

    /// A path of the rig as the text `cairn` takes.
    pub fn arg(&self, name: &str) -> String {
        self.rig.arg(name)
    }
}

/// Wait until `done` holds, checking every 50 ms (a bound on a failure,
/// not a synchronisation: the condition is).
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "not within a minute: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The files under `dir` a process has open (its /proc/PID/fd links).
pub fn open_files_under(pid: u32, dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| p.starts_with(dir))
        .collect()
}
