//! `cairn serve`: the groups held mounted and served to any program through a
//! FUSE file system. Why it is built this way, what is built and what is
//! not yet: `docs/serve.md`.
//!
//! The caller (the CLI) mounts the groups live and hands them over; this
//! crate mounts the file system, tells systemd it is ready, waits for a
//! signal, then unmounts and hands the groups back to be dismounted.
//!
//! - `fs`: the groups' name space as a FUSE file system: glue between fuser
//!   and the file system's rules (`cairn_vfs`).
//! - [`control`]: the control socket that carries every command a client
//!   sends to the one executor (`cairn_command`).
//! - [`host`]: the service as that executor's host — the groups held, the
//!   long operations' threads, the repair timer, SIGHUP's discovery again.
//! - [`volume`]: volumes, group files exported as loop devices over the mount.
//! - [`metrics`]: Prometheus text and `cairn status`.

pub mod control;
mod error;
mod fs;
mod held;
pub mod host;
mod io_stats;
pub mod metrics;
pub mod volume;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use control::{Commands, ControlSocket};
pub use error::ServeError;
pub use fs::{GroupFs, Names, Served};
pub use held::Held;

use cairn_store::group::LiveGroup;

/// How to serve.
pub struct ServeOptions {
    pub mountpoint: PathBuf,
    /// Let every user reach the file system (`allow_other`; the kernel
    /// still checks each file's mode and owner: `default_permissions`).
    /// Off: only the service's own user (root) may.
    pub allow_other: bool,
    /// FUSE worker threads (each on a clone of the `/dev/fuse` descriptor).
    pub threads: usize,
    /// Where to answer `GET /metrics` (Prometheus text), if anywhere.
    pub metrics: Option<String>,
    /// How long a stop waits for the file system to stop being in use
    /// before it says so and goes on serving. The last close of a file
    /// can let go of the mount a moment after `close` returns (a process
    /// forked at that moment holds a copy of the descriptors until it
    /// execs or exits; a loop device over a file lets go of it in the
    /// kernel's own time), so an unmount tried once, right after a database
    /// closed its last file, can find it busy.
    pub stop_wait: std::time::Duration,
}

/// Makes the commands the control socket carries out, once the groups are
/// shared.
pub type MakeCommands = Box<dyn FnOnce(Vec<Held>) -> Arc<dyn Commands> + Send>;

/// The control socket, bound, and what it will answer with.
pub struct Control {
    pub socket: ControlSocket,
    pub commands: MakeCommands,
}

/// What ended serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    Terminate,
    Interrupt,
    /// The file system went away without the service (an administrator's
    /// `umount`, or the session failed): the groups are dismounted all the
    /// same.
    SessionEnded,
}

/// Serve `groups` at the mountpoint until SIGTERM or SIGINT: mount the file
/// system, send `READY=1` to `$NOTIFY_SOCKET` (systemd's `Type=notify`, and
/// how tests know the mount is there), wait for the signal, unmount, and
/// give the groups back — every request done, no handle left — for the
/// caller to dismount. They are given back whatever happens, the error
/// beside them: a group dropped undismounted is a crash to the next mount.
///
/// A file system still in use is not unmounted: the service says so and
/// goes on serving until the next signal (what `umount` does; a lazy
/// unmount would leave the groups held by files nobody can name). A file
/// system unmounted from outside ends the service as SIGTERM would.
///
/// `signals` must have been blocked before any thread was started (see
/// [`Signals::block`]), so that only this thread takes them.
///
/// With a [`Control`], its socket answers commands while the file system is
/// served; it stops answering (background operations ended, the commands
/// running finished) before the groups are given back.
pub fn serve(
    groups: Vec<(String, LiveGroup)>,
    options: &ServeOptions,
    signals: &Signals,
    control: Option<Control>,
) -> (Vec<(String, LiveGroup)>, Result<Stopped, ServeError>) {
    let shared: Vec<(String, Arc<LiveGroup>)> = groups
        .into_iter()
        .map(|(name, g)| (name, Arc::new(g)))
        .collect();
    let result = run(&shared, options, signals, control);
    let mut out = Vec::new();
    let mut stuck = Vec::new();
    for (name, g) in shared {
        match Arc::try_unwrap(g) {
            Ok(g) => out.push((name, g)),
            Err(_) => stuck.push(name),
        }
    }
    let result = match (result, stuck.is_empty()) {
        (Ok(_), false) => Err(ServeError::Invalid(format!(
            "group(s) {} still in use after the file system ended (a request that never finished); not dismounted: the next mount replays the journal",
            stuck.join(", ")
        ))),
        (r, _) => r,
    };
    (out, result)
}

fn run(
    shared: &[(String, Arc<LiveGroup>)],
    options: &ServeOptions,
    signals: &Signals,
    control: Option<Control>,
) -> Result<Stopped, ServeError> {
    check_mountpoint(&options.mountpoint)?;
    let mountpoint = options.mountpoint.canonicalize().map_err(|e| {
        ServeError::Invalid(format!("mountpoint {}: {e}", options.mountpoint.display()))
    })?;
    let fs = GroupFs::new(
        shared
            .iter()
            .map(|(name, g)| Served {
                name: name.clone(),
                group: g.clone(),
            })
            .collect(),
    )?;
    let held = held_groups(shared, &fs);
    // Bound before the file system is mounted: a bad address is refused
    // with nothing to undo.
    let metrics = match &options.metrics {
        Some(addr) => Some(metrics::Endpoint::start(
            addr,
            held.clone(),
            std::time::Instant::now(),
            mountpoint.clone(),
        )?),
        None => None,
    };
    let config = mount_config(options);
    let mount_error = |error| ServeError::Mount {
        path: options.mountpoint.clone(),
        error,
    };
    let notifier = fs.notifier_slot();
    let session = fuser::Session::new(fs, &mountpoint, &config).map_err(mount_error)?;
    let _ = notifier.set(session.notifier());
    let background = session.spawn().map_err(mount_error)?;
    let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_session(background, ended.clone())?;
    let (answering, commands) = match control {
        Some(c) => {
            let commands = (c.commands)(held);
            (c.socket.serve(commands.clone()), Some(commands))
        }
        None => {
            drop(held);
            (None, None)
        }
    };
    tracing::info!(mountpoint = %mountpoint.display(), groups = shared.len(), "serving");
    notify_ready();
    let stopping = serve_until_stopped(signals, &mountpoint, &ended, commands.as_deref(), options);
    if let Some(a) = answering {
        a.stop();
    }
    if let Some(m) = metrics {
        m.stop();
    }
    match watcher.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "the file system's session ended with an error"),
        Err(_) => tracing::warn!("the session watcher panicked"),
    }
    Ok(stopping.unwrap_or(Stopped::SessionEnded))
}

/// The groups served, as the control socket's commands see them.
fn held_groups(shared: &[(String, Arc<LiveGroup>)], fs: &GroupFs) -> Vec<Held> {
    shared
        .iter()
        .enumerate()
        .filter_map(|(slot, (name, g))| {
            Some(Held {
                name: name.clone(),
                group: g.clone(),
                names: fs.names(slot)?,
                stats: fs.stats(slot)?,
            })
        })
        .collect()
}

/// How the file system is mounted: its names, no devices or setuid, the
/// kernel checking permissions, and who may reach it.
fn mount_config(options: &ServeOptions) -> fuser::Config {
    let mut c = fuser::Config::default();
    c.mount_options = vec![
        fuser::MountOption::FSName("cairn".into()),
        fuser::MountOption::Subtype("cairn".into()),
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
        fuser::MountOption::DefaultPermissions,
    ];
    if options.allow_other {
        c.acl = fuser::SessionACL::All;
    }
    c.n_threads = Some(options.threads.max(1));
    c.clone_fd = true;
    c
}

/// A watcher joins the session and, when it ends (after our unmount, or
/// anyone else's), sets `ended` and says so with SIGUSR1 — blocked too, so
/// it waits for the main thread's `sigwait`.
fn watch_session(
    background: fuser::BackgroundSession,
    ended: Arc<std::sync::atomic::AtomicBool>,
) -> Result<std::thread::JoinHandle<std::io::Result<()>>, ServeError> {
    std::thread::Builder::new()
        .name("cairn-fuse-watch".into())
        .spawn(move || {
            let result = background.join();
            ended.store(true, std::sync::atomic::Ordering::SeqCst);
            // SAFETY: signalling our own process with a valid signal.
            unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
            result
        })
        .map_err(|e| ServeError::Invalid(format!("cannot start a thread: {e}")))
}

/// Take signals until a stop has unmounted the file system or the file
/// system has gone (`ended`): what stopped it, if a stop did. SIGHUP has
/// the `commands` read the discovery string again.
fn serve_until_stopped(
    signals: &Signals,
    mountpoint: &Path,
    ended: &std::sync::atomic::AtomicBool,
    commands: Option<&dyn Commands>,
    options: &ServeOptions,
) -> Option<Stopped> {
    let mut stopping: Option<Stopped> = None;
    // A stop that found the file system in use: tried again until the
    // deadline (options.stop_wait), then said and given up.
    let mut waiting: Option<Waiting> = None;
    loop {
        let signal = match &waiting {
            None => Some(signals.wait()),
            Some(w) => signals.wait_until(w.next_try),
        };
        let why = match signal {
            Some(Signal::SessionEnded) if ended.load(std::sync::atomic::Ordering::SeqCst) => {
                if stopping.is_none() {
                    tracing::warn!(
                        mountpoint = %mountpoint.display(),
                        "the file system was unmounted from outside (or its session failed); stopping"
                    );
                }
                break;
            }
            Some(Signal::SessionEnded) => continue,
            Some(Signal::Reload) => {
                match commands {
                    Some(c) => {
                        tracing::info!("SIGHUP: reading the discovery string again");
                        c.reload();
                    }
                    None => tracing::info!("SIGHUP: no control socket, nothing to re-read"),
                }
                continue;
            }
            Some(Signal::Stop(why)) => {
                if waiting.is_none() {
                    tracing::info!(signal = ?why, "stopping: unmounting the file system");
                }
                why
            }
            // The pause before the next try ran out: try again.
            None => match &waiting {
                Some(w) => w.why,
                None => continue,
            },
        };
        // Before every try: a volume device let go of during the wait is
        // detached too.
        if let Some(c) = commands {
            c.before_unmount();
        }
        if try_unmount(mountpoint, options, why, &mut waiting) {
            stopping = Some(why);
        }
    }
    stopping
}

/// One try at unmounting for a stop (`why`): whether it unmounted. A file
/// system in use is tried again (`waiting`) until `options.stop_wait` has
/// passed, then said and given up, as any other failure is at once.
fn try_unmount(
    mountpoint: &Path,
    options: &ServeOptions,
    why: Stopped,
    waiting: &mut Option<Waiting>,
) -> bool {
    match unmount(mountpoint) {
        Ok(()) => {
            *waiting = None;
            true
        }
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            let now = std::time::Instant::now();
            match waiting.as_mut() {
                None if !options.stop_wait.is_zero() => {
                    tracing::info!(
                        mountpoint = %mountpoint.display(),
                        "the file system is in use; waiting up to {} for its files to be closed",
                        humantime::format_duration(options.stop_wait)
                    );
                    *waiting = Some(Waiting::new(why, now, options.stop_wait));
                }
                Some(w) if now < w.deadline => w.again(now),
                _ => {
                    *waiting = None;
                    tracing::warn!(
                        mountpoint = %mountpoint.display(),
                        "the file system is in use (files open or a working directory under it); still serving: close them, then send SIGTERM again"
                    );
                }
            }
            false
        }
        Err(e) => {
            *waiting = None;
            tracing::warn!(
                error = %e,
                "cannot unmount the file system; still serving (unmount it by hand: umount {}, or fusermount3 -u)",
                mountpoint.display()
            );
            false
        }
    }
}

/// Refuse a mountpoint that is not an empty directory, saying what to do.
/// Checked before the groups are mounted, and again when serving starts.
pub fn check_mountpoint(path: &Path) -> Result<(), ServeError> {
    clean_dead_mount(path)?;
    let meta = std::fs::metadata(path).map_err(|e| {
        ServeError::Invalid(format!(
            "mountpoint {}: {e}; create the directory first (mkdir -p {})",
            path.display(),
            path.display()
        ))
    })?;
    if !meta.is_dir() {
        return Err(ServeError::Invalid(format!(
            "mountpoint {} is not a directory",
            path.display()
        )));
    }
    let mut entries = std::fs::read_dir(path)
        .map_err(|e| ServeError::Invalid(format!("mountpoint {}: {e}", path.display())))?;
    if entries.next().is_some() {
        return Err(ServeError::Invalid(format!(
            "mountpoint {} is not empty; serve on an empty directory (what is in it would be hidden)",
            path.display()
        )));
    }
    Ok(())
}

/// A service killed with SIGKILL leaves its FUSE mount behind, dead: every
/// access fails with ENOTCONN ("Transport endpoint is not connected"), once
/// the kernel has let go of the dead process's descriptors. If `path` is
/// such a mount of Cairn's, detach it (nothing can be served through it
/// any more) and say so. A live Cairn mount there is refused (another
/// service serves it); any other mount is left to the checks that follow.
fn clean_dead_mount(path: &Path) -> Result<(), ServeError> {
    use std::os::unix::ffi::OsStrExt;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    // The kernel escapes a space in a path as \040, and so on.
    let listed = absolute
        .to_string_lossy()
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012");
    let ours = mounts.lines().any(|l| {
        let mut f = l.split_whitespace();
        let (source, target, fstype) = (f.next(), f.next(), f.next());
        // As root the type is "fuse" (the subtype is not shown),
        // through fusermount3 "fuse.cairn".
        target == Some(listed.as_str())
            && source == Some("cairn")
            && fstype.is_some_and(|t| t == "fuse" || t == "fuse.cairn")
    });
    let dead = |e: &std::io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::ENOTCONN) | Some(libc::ECONNABORTED)
        )
    };
    // A listing asks the service itself (attributes may be cached).
    match std::fs::read_dir(path) {
        Err(e) if dead(&e) && ours => {}
        Err(e) if dead(&e) => {
            return Err(ServeError::Invalid(format!(
                "mountpoint {} is a dead mount that is not Cairn's; unmount it (umount -l {})",
                path.display(),
                path.display()
            )))
        }
        Ok(_) if ours => {
            return Err(ServeError::Invalid(format!(
            "a Cairn service already serves at {}; stop it first, or choose another --mountpoint",
            path.display()
        )))
        }
        _ => return Ok(()),
    }
    // Its volumes' loop devices point at the dead mount: let go of them
    // while their backing files still show the mount's path
    // (`--attach-volumes` attaches the volumes again once serving).
    let (detached, left) = volume::detach_dead(&absolute);
    for d in detached {
        tracing::warn!(device = %d.display(), "detached a volume's loop device the killed service left");
    }
    for l in left {
        tracing::warn!("{l}");
    }
    let c = std::ffi::CString::new(absolute.as_os_str().as_bytes())
        .map_err(|_| ServeError::Invalid(format!("mountpoint {}: bad path", path.display())))?;
    // SAFETY: a valid NUL-terminated path; umount2 reads only it.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(ServeError::Invalid(format!(
            "mountpoint {} is the dead mount of a Cairn service that was killed, and it could not be detached ({e}); unmount it (umount -l {}) and start again",
            path.display(),
            path.display()
        )));
    }
    tracing::warn!(
        mountpoint = %path.display(),
        "cleaned up the dead mount a killed Cairn service left here"
    );

    Ok(())
}

/// Unmount the file system (not lazily: a busy one stays, and says so).
/// Not root: through `fusermount3 -u`, which is not lazy either.
fn unmount(mountpoint: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(mountpoint.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a valid NUL-terminated path; umount2 reads only it.
    if unsafe { libc::umount2(path.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EPERM) {
        return Err(e);
    }
    let out = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg(mountpoint)
        .output()?;
    if out.status.success() {
        Ok(())
    } else if String::from_utf8_lossy(&out.stderr).contains("busy") {
        Err(std::io::Error::from_raw_os_error(libc::EBUSY))
    } else {
        Err(std::io::Error::other(format!(
            "fusermount3 -u: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Mark the process as one the kernel's writeback depends on
/// (`PR_SET_IO_FLUSHER`): its memory allocations do not wait for I/O, so
/// a system short of memory, writing dirty pages back through this very
/// file system, does not deadlock on the service. Call it before any thread
/// is made (threads inherit it). Needs CAP_SYS_RESOURCE; without it the
/// service runs, and should say so ([`warn_not_io_flusher`]).
pub fn mark_io_flusher() -> std::io::Result<()> {
    const PR_SET_IO_FLUSHER: libc::c_int = 57;
    // SAFETY: prctl with integer arguments only.
    match unsafe { libc::prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Log why [`mark_io_flusher`] failed (once serving: a command line that is
/// refused says one line only).
pub fn warn_not_io_flusher(error: &std::io::Error) {
    tracing::warn!(
        error = %error,
        "cannot mark the service PR_SET_IO_FLUSHER (needs CAP_SYS_RESOURCE): under memory pressure, writeback through its file system could stall"
    );
}

/// Tell the service manager the service is ready (`sd_notify(READY=1)`), if
/// one asked (`$NOTIFY_SOCKET`). Failing to tell it is logged, not fatal.
fn notify_ready() {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let sent = (|| -> std::io::Result<()> {
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixDatagram};
        let socket = UnixDatagram::unbound()?;
        let bytes = path.as_encoded_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => SocketAddr::from_abstract_name(name)?,
            None => SocketAddr::from_pathname(Path::new(&path))?,
        };
        socket.send_to_addr(b"READY=1\n", &addr)?;
        Ok(())
    })();
    if let Err(e) = sent {
        tracing::warn!(socket = ?path, error = %e, "could not tell the service manager we are ready");
    }
}

/// A stop that found the file system in use, tried again now and then
/// until its deadline: at first soon (a process that forked as a database
/// closed its files execs in a moment), then less often.
struct Waiting {
    why: Stopped,
    deadline: std::time::Instant,
    pause: std::time::Duration,
    next_try: std::time::Instant,
}

impl Waiting {
    const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);
    const LONGEST_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

    fn new(why: Stopped, now: std::time::Instant, wait: std::time::Duration) -> Self {
        // (The command line bounds the wait; a clock near its end stops
        // waiting rather than overflow.)
        let deadline = now.checked_add(wait).unwrap_or(now);
        Self {
            why,
            deadline,
            pause: Self::FIRST_PAUSE,
            next_try: now
                .checked_add(Self::FIRST_PAUSE)
                .map_or(deadline, |t| t.min(deadline)),
        }
    }

    /// Busy again at `now`: the next try after a longer pause, the last one
    /// at the deadline.
    fn again(&mut self, now: std::time::Instant) {
        self.pause = (self.pause * 2).min(Self::LONGEST_PAUSE);
        self.next_try = now
            .checked_add(self.pause)
            .map_or(self.deadline, |t| t.min(self.deadline));
    }
}

/// A signal the service acts on.
enum Signal {
    Stop(Stopped),
    Reload,
    /// SIGUSR1: the session watcher says the session ended (or someone
    /// sent it: the caller checks).
    SessionEnded,
}

/// SIGTERM, SIGINT, SIGHUP and SIGUSR1, blocked so that only
/// [`Signals::wait`] takes them. Block them first thing, before any thread
/// is made (mounting the groups may make some): every thread inherits the
/// mask, and a SIGTERM while the groups mount waits until serving starts,
/// then stops it cleanly.
pub struct Signals(libc::sigset_t);

impl Signals {
    pub fn block() -> Result<Self, ServeError> {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it before
        // any other use, and every pointer is to this local.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR1] {
                libc::sigaddset(&mut set, signal);
            }
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(ServeError::Invalid(format!(
                    "cannot block SIGTERM, SIGINT, SIGHUP and SIGUSR1: {}",
                    std::io::Error::from_raw_os_error(rc)
                )));
            }
            Ok(Self(set))
        }
    }

    /// The next signal that arrives before `deadline`, or `None` once it
    /// has passed.
    fn wait_until(&self, deadline: std::time::Instant) -> Option<Signal> {
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let timeout = libc::timespec {
                tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(libc::time_t::MAX),
                // Below 10^9: fits a c_long of any width.
                tv_nsec: left.subsec_nanos() as libc::c_long,
            };
            // SAFETY: the set is initialised (block); no siginfo is asked
            // for; the timeout is a local.
            let signal = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &timeout) };
            if signal > 0 {
                return Some(Self::meaning(signal));
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                _ => return None,
            }
        }
    }

    fn meaning(signal: libc::c_int) -> Signal {
        match signal {
            libc::SIGINT => Signal::Stop(Stopped::Interrupt),
            libc::SIGHUP => Signal::Reload,
            libc::SIGUSR1 => Signal::SessionEnded,
            _ => Signal::Stop(Stopped::Terminate),
        }
    }

    fn wait(&self) -> Signal {
        loop {
            let mut signal = 0;
            // SAFETY: the set is initialised (block) and `signal` is a local.
            let rc = unsafe { libc::sigwait(&self.0, &mut signal) };
            if rc != 0 {
                continue;
            }
            return Self::meaning(signal);
        }
    }
}
