//! `cairn serve`: the groups held mounted and served to any program through a
//! FUSE file system. Why it is built this way, what is built and what is
//! not yet: `docs/serve.md`.
//!
//! The caller (the CLI) mounts the groups live and hands them over; this
//! crate mounts the file system, tells systemd it is ready, waits for a
//! signal, then unmounts and hands the groups back to be dismounted.

mod fs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use fs::{GroupFs, Served};

use cairn_store::group::{GroupError, LiveGroup};

/// Why serving stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot mount the file system at {path}: {error}")]
    Mount {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Group(#[from] GroupError),
}

/// How to serve.
pub struct ServeOptions {
    pub mountpoint: PathBuf,
    /// FUSE worker threads (each on a clone of the `/dev/fuse` descriptor).
    pub threads: usize,
}

/// The signal that ended serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    Terminate,
    Interrupt,
}

/// Serve `groups` at the mountpoint until SIGTERM or SIGINT: mount the file
/// system, send `READY=1` to `$NOTIFY_SOCKET` (systemd's `Type=notify`, and
/// how tests know the mount is there), wait for the signal, unmount (the
/// kernel lets requests in flight finish), and return the groups, no
/// request holding them any more, for the caller to dismount. A file system
/// still in use is not unmounted: the service says so and goes on serving
/// until the next signal (what `umount` does; a lazy unmount would leave
/// the groups held by files nobody can name).
///
/// The signals are blocked in the calling thread before any worker starts,
/// so every thread inherits the mask and only the wait below takes them.
pub fn serve(
    groups: Vec<(String, LiveGroup)>,
    options: &ServeOptions,
) -> Result<(Vec<(String, LiveGroup)>, Stopped), ServeError> {
    check_mountpoint(&options.mountpoint)?;
    let signals = Signals::block()?;
    let shared: Vec<(String, Arc<LiveGroup>)> = groups
        .into_iter()
        .map(|(name, g)| (name, Arc::new(g)))
        .collect();
    let fs = GroupFs::new(
        shared
            .iter()
            .map(|(name, g)| Served {
                name: name.clone(),
                group: g.clone(),
            })
            .collect(),
    )?;
    let config = {
        let mut c = fuser::Config::default();
        c.mount_options = vec![
            fuser::MountOption::FSName("cairn".into()),
            fuser::MountOption::Subtype("cairn".into()),
            fuser::MountOption::RO,
            fuser::MountOption::NoDev,
            fuser::MountOption::NoSuid,
            fuser::MountOption::DefaultPermissions,
        ];
        c.n_threads = Some(options.threads.max(1));
        c.clone_fd = true;
        c
    };
    let session = fuser::Session::new(fs, &options.mountpoint, &config).map_err(|error| {
        ServeError::Mount {
            path: options.mountpoint.clone(),
            error,
        }
    })?;
    let background = session.spawn().map_err(|error| ServeError::Mount {
        path: options.mountpoint.clone(),
        error,
    })?;
    tracing::info!(mountpoint = %options.mountpoint.display(), groups = shared.len(), "serving");
    notify_ready();
    let stopped = loop {
        let stopped = signals.wait();
        tracing::info!(signal = ?stopped, "stopping: unmounting the file system");
        match unmount(&options.mountpoint) {
            Ok(()) => break stopped,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => tracing::warn!(
                mountpoint = %options.mountpoint.display(),
                "the file system is in use (files open or a working directory under it); still serving: close them, then send SIGTERM again"
            ),
            Err(e) => {
                // Not mounted any more (unmounted by hand): the session
                // has ended or is ending.
                tracing::warn!(error = %e, "unmount failed; ending the session");
                break stopped;
            }
        }
    };
    // Unmounted: the kernel ends the session once the requests in flight
    // are answered.
    if let Err(e) = background.join() {
        tracing::warn!(error = %e, "the file system's session ended with an error");
    }
    let mut out = Vec::new();
    for (name, g) in shared {
        let g = Arc::try_unwrap(g).map_err(|_| {
            ServeError::Invalid(format!(
                "group {name} is still in use after the file system ended; this is a bug"
            ))
        })?;
        out.push((name, g));
    }
    Ok((out, stopped))
}

/// Unmount the file system (not lazily: a busy one stays, and says so).
fn unmount(mountpoint: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = mountpoint.canonicalize()?;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a valid NUL-terminated path; umount2 reads only it.
    if unsafe { libc::umount2(path.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Refuse a mountpoint that is not an empty directory, saying what to do.
fn check_mountpoint(path: &Path) -> Result<(), ServeError> {
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

/// SIGTERM and SIGINT, blocked so that only [`Signals::wait`] takes them.
struct Signals(libc::sigset_t);

impl Signals {
    fn block() -> Result<Self, ServeError> {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it before
        // any other use, and every pointer is to this local.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(ServeError::Invalid(format!(
                    "cannot block SIGTERM and SIGINT: {}",
                    std::io::Error::from_raw_os_error(rc)
                )));
            }
            Ok(Self(set))
        }
    }

    fn wait(&self) -> Stopped {
        loop {
            let mut signal = 0;
            // SAFETY: the set is initialised (block) and `signal` is a local.
            let rc = unsafe { libc::sigwait(&self.0, &mut signal) };
            if rc == 0 {
                return if signal == libc::SIGINT {
                    Stopped::Interrupt
                } else {
                    Stopped::Terminate
                };
            }
        }
    }
}
