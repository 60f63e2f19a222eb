//! The control socket: how the CLI asks the service to carry out a command on
//! a group it holds (`docs/serve.md`, "The control socket").
//!
//! One request per connection: a line of JSON carrying a typed request
//! (`cairn_command::wire`, at most [`REQUEST_BYTES_MAX`] bytes); the answer
//! is lines of JSON: events, and last the command's reply or error — or
//! `not_held`, which sends the CLI to carry it out itself. The service
//! never sees a command line.
//!
//! Who may connect: root, the service's own user, and members of the group
//! named by `--socket-group` (the socket is mode 0660, owned by that group;
//! every connection's peer credentials are checked as well, so a socket
//! reached another way is refused the same).
//!
//! Threads: one accepts; one per connection runs its command (the command
//! takes what it needs from the live groups, whose own locks order it). The
//! list of connections is a leaf lock.

use std::io::{IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use cairn_io::poison::Recover;
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

use crate::error::ServeError;

/// Where the socket is unless `--socket` or `$CAIRN_SOCKET` says otherwise.
pub const SOCKET_PATH_DEFAULT: &str = "/run/cairn/cairn.sock";

pub use cairn_command::wire::{
    decode_request, ReplyLine, RequestError, RequestLine, PROTOCOL, REQUEST_BYTES_MAX,
};

/// Descriptors a request may carry (SCM_RIGHTS).
pub const FDS_MAX: usize = 2;

/// Commands carried out at once; one more connection is told the service
/// is busy.
const CONNECTIONS_MAX: usize = 64;

/// How long a connection may take to send its request line: a client that
/// connects and says nothing does not hold a thread for ever.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one reply may wait for a client that does not read (stopped
/// with Ctrl-Z, or piped into a pager): then the client counts as gone,
/// and the command goes on, its output to the log.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The socket path the CLI and the service use: `$CAIRN_SOCKET`, else the
/// default.
pub fn socket_path() -> PathBuf {
    std::env::var_os("CAIRN_SOCKET")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from(SOCKET_PATH_DEFAULT), PathBuf::from)
}

/// Where a command's answer goes: the connection, one JSON line a reply. A
/// client gone is noted, not an error: the command is not undone by it.
pub struct Replier<'s> {
    stream: &'s mut UnixStream,
    gone: bool,
}

impl Replier<'_> {
    pub fn send(&mut self, reply: &ReplyLine) {
        if self.gone {
            return;
        }
        let line = cairn_command::wire::encode_reply(reply);
        if self.stream.write_all(&line).is_err() {
            self.gone = true;
        }
    }

    /// Whether the client has gone away (a write to it failed).
    pub fn gone(&self) -> bool {
        self.gone
    }
}

/// Who is on the other end of a connection (`SO_PEERCRED`, and
/// `SO_PEERGROUPS` for its supplementary groups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// What the service carries out: the CLI's commands, on the groups it
/// holds. Called on a connection's own thread, any number at once.
pub trait Commands: Send + Sync {
    /// `fds`: the descriptors the client passed with the request (for
    /// `cp`, the file it copies from), at most [`FDS_MAX`].
    fn run(&self, request: RequestLine, fds: Vec<OwnedFd>, peer: Peer, reply: &mut Replier<'_>);

    /// The service is stopping: end the background operations (they are
    /// resumable) and return once none runs.
    fn stop(&self);

    /// SIGHUP: read the discovery string again (the configuration may have
    /// changed) and look for what it now finds; the outcome goes to the log.
    fn reload(&self);

    /// SIGTERM, before the file system is unmounted: let go of what would
    /// keep it busy that the service itself holds (volumes' devices).
    fn before_unmount(&self) {}
}

/// The peer credentials of a connected Unix socket: the client's seen by
/// the service, or the service's (as of its `listen`) seen by a client.
pub fn peer_of(stream: &UnixStream) -> std::io::Result<Peer> {
    // nix's, not rustix's: rustix's `UCred` holds the pid as a non-zero
    // `Pid`, and the kernel says 0 for a peer in a pid namespace that
    // cannot see it (a client in a container, through a bind-mounted
    // socket).
    let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)?;
    Ok(Peer {
        pid: cred.pid(),
        uid: cred.uid(),
        gid: cred.gid(),
        groups: peer_groups(stream),
    })
}

/// The supplementary groups of a connection's peer (`SO_PEERGROUPS`).
fn peer_groups(stream: &UnixStream) -> Vec<u32> {
    let mut groups = vec![0u32; 256];
    // Once more with the room the kernel says it needs, when 256 is short.
    for _ in 0..2 {
        let mut len = (groups.len() * 4) as libc::socklen_t;
        // SAFETY: `groups` holds `len` bytes the kernel fills in (and says
        // how many it wrote, or needs).
        let rc = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc == 0 {
            groups.truncate(len as usize / 4);
            return groups;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::ERANGE) {
            break;
        }
        groups = vec![0u32; (len as usize).div_ceil(4).max(groups.len() + 1)];
    }
    Vec::new()
}

/// The group id of a group name (`--socket-group`, `--admin-group`).
pub fn group_id(name: &str) -> Result<u32, ServeError> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| ServeError::Invalid(format!("--socket-group {name:?}: not a group name")))?;
    // SAFETY: `group` is plain data (integers and pointers) for which all
    // zeros is a valid value; getgrnam_r fills it in.
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 1 << 16];
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is to a local of the size given; getgrnam_r
    // writes only there.
    let rc = unsafe {
        libc::getgrnam_r(
            c.as_ptr(),
            &mut group,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Err(ServeError::Invalid(format!(
            "--socket-group {name}: no such group (see /etc/group; create it with groupadd {name})"
        )));
    }
    Ok(group.gr_gid)
}

/// Where the socket is bound, and who may use it.
struct Endpoint {
    path: PathBuf,
    identity: (u64, u64),
    listener: UnixListener,
    socket_gid: Option<u32>,
}

impl Endpoint {
    /// Bind the socket at `path`, mode 0660, group `socket_group` if named.
    /// A socket left by a service that died is replaced; one a live
    /// service answers on is refused, naming its process; anything else at
    /// the path is left alone and refused.
    fn bind(path: &Path, socket_group: Option<&str>) -> Result<Self, ServeError> {
        let socket_gid = socket_group.map(group_id).transpose()?;
        let bad = |what: String| ServeError::Invalid(format!("socket {}: {what}", path.display()));
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.file_type().is_socket() => {
                return Err(bad(
                    "exists and is not a socket; remove it, or give another --socket".into(),
                ))
            }
            Ok(_) => match UnixStream::connect(path) {
                Ok(stream) => {
                    let who = peer_of(&stream).map_or_else(
                        |_| "another process".to_string(),
                        |p| format!("process {}", p.pid),
                    );
                    return Err(bad(format!(
                        "a live Cairn service ({who}) answers on it; stop it first, or give another --socket"
                    )));
                }
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                    std::fs::remove_file(path).map_err(|e| {
                        bad(format!(
                            "left by a service that died, and cannot be removed: {e}"
                        ))
                    })?;
                    tracing::warn!(socket = %path.display(), "removed the socket a service that died left");
                }
                Err(e) => {
                    return Err(bad(format!(
                        "exists and cannot be reached ({e}); remove it, or give another --socket"
                    )))
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(bad(e.to_string())),
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| bad(format!("cannot create its directory: {e}")))?;
                let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
            }
        }
        // Bound in a directory of its own that only this user may enter,
        // given its mode and group there, and only then renamed into place:
        // nobody can reach it while it has the umask's mode, and the
        // process-wide umask is never changed (other threads may be making
        // files meanwhile).
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let private = tempfile::Builder::new()
            .prefix(".cairn-socket-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(dir.unwrap_or(Path::new(".")))
            .map_err(|e| bad(format!("cannot make a private directory beside it: {e}")))?;
        let staged = private.path().join("sock");
        let listener = UnixListener::bind(&staged).map_err(|e| bad(e.to_string()))?;
        if let Some(gid) = socket_gid {
            std::os::unix::fs::lchown(&staged, None, Some(gid)).map_err(|e| bad(e.to_string()))?;
        }
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o660))
            .map_err(|e| bad(e.to_string()))?;
        let identity = std::fs::symlink_metadata(&staged)
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino())
            })
            .map_err(|e| bad(e.to_string()))?;
        std::fs::rename(&staged, path).map_err(|e| bad(format!("cannot put it in place: {e}")))?;
        Ok(Self {
            path: path.to_path_buf(),
            identity,
            listener,
            socket_gid,
        })
    }

    /// Whether a peer may use the socket.
    fn allows(&self, peer: &Peer) -> bool {
        let own = rustix::process::geteuid().as_raw();
        if peer.uid == 0 || peer.uid == own {
            return true;
        }
        match self.socket_gid {
            Some(gid) => peer.gid == gid || peer.groups.contains(&gid),
            None => false,
        }
    }

    /// Start answering: a thread accepts, a thread per connection runs its
    /// command through the commands once they are set (until then, the
    /// service is starting, and says so).
    fn answer(self, commands: Slot) -> Result<Answering, ServeError> {
        let listener_fd = self
            .listener
            .try_clone()
            .map_err(|e| ServeError::Invalid(format!("socket {}: {e}", self.path.display())))?;
        let stopping = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<Connection>>> = Arc::new(Mutex::new(Vec::new()));
        let path = self.path.clone();
        let identity = self.identity;
        let accept = {
            let stopping = stopping.clone();
            let connections = connections.clone();
            let commands = commands.clone();
            std::thread::Builder::new()
                .name("cairn-control".into())
                .spawn(move || self.accept_loop(&stopping, &connections, &commands))
                .map_err(|e| ServeError::Invalid(format!("cannot start a thread: {e}")))?
        };
        Ok(Answering {
            path,
            identity,
            listener: listener_fd,
            stopping,
            accept: Some(accept),
            connections,
            commands,
        })
    }

    fn accept_loop(
        self,
        stopping: &AtomicBool,
        connections: &Arc<Mutex<Vec<Connection>>>,
        commands: &Slot,
    ) {
        let this = Arc::new(self);
        loop {
            let accepted = this.listener.accept();
            if stopping.load(Ordering::SeqCst) {
                return;
            }
            let mut stream = match accepted {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "control socket: accept failed");
                    // Out of descriptors, say: let the others finish.
                    std::thread::yield_now();
                    continue;
                }
            };
            let mut list = connections.lock_or_recover();
            list.retain(|c| !c.thread.is_finished());
            if list.len() >= CONNECTIONS_MAX {
                drop(list);
                let mut reply = Replier {
                    stream: &mut stream,
                    gone: false,
                };
                reply.send(&ReplyLine::Error {
                    status: 1,
                    message: format!(
                        "the Cairn service is busy ({CONNECTIONS_MAX} commands at once); try again"
                    ),
                });
                continue;
            }
            let Ok(reader) = stream.try_clone() else {
                continue;
            };
            let (this2, commands) = (this.clone(), commands.clone());
            let spawned = std::thread::Builder::new()
                .name("cairn-command".into())
                .spawn(move || this2.connection(stream, &commands));
            if let Ok(thread) = spawned {
                list.push(Connection { reader, thread });
            }
        }
    }

    /// One connection: check the peer, read and decode the request, run it;
    /// then end it (the list of connections holds a clone of the socket,
    /// so dropping this one would not tell the client the answer is over).
    fn connection(&self, mut stream: UnixStream, commands: &Slot) {
        self.answer_one(&mut stream, commands);
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }

    fn answer_one(&self, stream: &mut UnixStream, commands: &Slot) {
        let peer = match peer_of(stream) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "control socket: no peer credentials; connection refused");
                return;
            }
        };
        if !self.allows(&peer) {
            tracing::warn!(
                pid = peer.pid,
                uid = peer.uid,
                "control socket: peer not allowed"
            );
            Replier {
                stream,
                gone: false,
            }
            .send(&ReplyLine::Error {
                status: 1,
                message: format!(
                    "permission denied: user {} may not use the Cairn service's socket {}: only root, the service's own user{}",
                    peer.uid,
                    self.path.display(),
                    self.socket_gid
                        .map_or_else(String::new, |g| format!(" and members of group {g}"))
                ),
            });
            return;
        }
        let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
        let _ = stream.set_write_timeout(Some(REPLY_TIMEOUT));
        let read = read_request(stream);
        let _ = stream.set_read_timeout(None);
        let request = read.and_then(|(l, fds)| decode_request(&l).map(|r| (r, fds)));
        let mut reply = Replier {
            stream,
            gone: false,
        };
        match request {
            Ok((request, fds)) => match commands.get() {
                Some(commands) => commands.run(request, fds, peer, &mut reply),
                None => reply.send(&ReplyLine::Error {
                    status: 1,
                    message: format!(
                        "the Cairn service (pid {}) is starting: it is mounting its groups (replaying their journals, resyncing); try again once it serves",
                        std::process::id()
                    ),
                }),
            },
            Err(e) => {
                tracing::warn!(pid = peer.pid, error = %e, "control socket: request refused");
                reply.send(&ReplyLine::Error {
                    status: 2,
                    message: e.to_string(),
                });
            }
        }
    }
}

/// Read one request line of at most [`REQUEST_BYTES_MAX`] bytes (newline
/// excluded), and the descriptors sent with it. More than [`FDS_MAX`]
/// descriptors are refused (and closed: they are owned here).
fn read_request(stream: &mut UnixStream) -> Result<(Vec<u8>, Vec<OwnedFd>), RequestError> {
    let mut line = Vec::new();
    let mut fds = Vec::new();
    let mut chunk = vec![0u8; 16 << 10];
    // Room for FDS_MAX descriptors (cmsg_space!'s alignment may let a few
    // more arrive whole): more than FDS_MAX, or any the kernel cut
    // (MSG_CTRUNC), are refused below.
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(FDS_MAX))];
    loop {
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = match recvmsg(
            &*stream,
            &mut [IoSliceMut::new(&mut chunk)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(got) => got,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return Err(RequestError::Unterminated),
        };
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = message {
                fds.extend(received);
            }
        }
        if got.flags.contains(ReturnFlags::CTRUNC) || fds.len() > FDS_MAX {
            return Err(RequestError::TooManyFds(FDS_MAX));
        }
        let n = got.bytes;
        if n == 0 {
            return Err(RequestError::Unterminated);
        }
        if let Some(end) = chunk[..n].iter().position(|b| *b == b'\n') {
            line.extend_from_slice(&chunk[..end]);
            return match line.len() > REQUEST_BYTES_MAX {
                true => Err(RequestError::TooLong),
                false => Ok((line, fds)),
            };
        }
        line.extend_from_slice(&chunk[..n]);
        if line.len() > REQUEST_BYTES_MAX {
            return Err(RequestError::TooLong);
        }
    }
}

/// Send a request line (with its newline) and descriptors with it, as the
/// CLI does (the descriptors ride with the first byte).
pub fn send_request(
    stream: &UnixStream,
    line: &[u8],
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    if fds.len() > FDS_MAX {
        return Err(std::io::Error::other(
            "too many descriptors for one request",
        ));
    }
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(FDS_MAX))];
    let mut sent = 0;
    while sent < line.len() {
        let mut control = SendAncillaryBuffer::new(&mut space);
        if sent == 0 && !fds.is_empty() {
            let pushed = control.push(SendAncillaryMessage::ScmRights(fds));
            assert!(
                pushed,
                "invariant: the control buffer holds FDS_MAX descriptors"
            );
        }
        match sendmsg(
            stream,
            &[IoSlice::new(&line[sent..])],
            &mut control,
            SendFlags::NOSIGNAL,
        ) {
            Ok(n) => sent += n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

struct Connection {
    /// The connection, to stop reading a request that is not coming.
    reader: UnixStream,
    thread: JoinHandle<()>,
}

/// A control socket answering commands, until [`Answering::stop`].
pub(crate) struct Answering {
    path: PathBuf,
    /// The socket file's device and inode.
    identity: (u64, u64),
    listener: UnixListener,
    stopping: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    connections: Arc<Mutex<Vec<Connection>>>,
    commands: Slot,
}

/// The commands a control socket carries out, once the service serves.
type Slot = Arc<OnceLock<Arc<dyn Commands>>>;

/// A control socket, bound and answering — at first only that the service
/// is starting. Bound before the groups are mounted, so that a second
/// service is refused at once (naming the process that has the socket);
/// given its commands once they are served. Dropped without them (the
/// service could not start), it stops answering and goes.
pub struct ControlSocket {
    answering: Option<Answering>,
    commands: Slot,
}

impl ControlSocket {
    /// Bind the socket at `path`, mode 0660, group `socket_group` if named,
    /// and answer on it. A socket left by a service that died is replaced;
    /// one a live service answers on is refused, naming its process;
    /// anything else at the path is left alone and refused.
    pub fn bind(path: &Path, socket_group: Option<&str>) -> Result<Self, ServeError> {
        let commands: Slot = Arc::new(OnceLock::new());
        let answering = Endpoint::bind(path, socket_group)?.answer(commands.clone())?;
        tracing::debug!(socket = %path.display(), "control socket bound");
        Ok(Self {
            answering: Some(answering),
            commands,
        })
    }

    /// From now on, commands are carried out by `commands`.
    pub(crate) fn serve(mut self, commands: Arc<dyn Commands>) -> Option<Answering> {
        let _ = self.commands.set(commands);
        let answering = self.answering.take();
        if let Some(a) = &answering {
            tracing::info!(socket = %a.path.display(), "answering commands");
        }
        answering
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        if let Some(a) = self.answering.take() {
            a.stop();
        }
    }
}

impl Answering {
    /// Stop answering: no new connection; a request still being read is
    /// cut; background operations end (resumable); every command running
    /// finishes; the socket goes.
    pub(crate) fn stop(mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Shutting down our own listening descriptor wakes the thread
        // blocked in accept (it then finds `stopping`).
        let _ = rustix::net::shutdown(&self.listener, rustix::net::Shutdown::Both);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let list: Vec<Connection> = std::mem::take(&mut *self.connections.lock_or_recover());
        for c in &list {
            let _ = c.reader.shutdown(std::net::Shutdown::Read);
        }
        if let Some(commands) = self.commands.get() {
            commands.stop();
        }
        // What they still say goes nowhere: they finish at once.
        for c in &list {
            let _ = c.reader.shutdown(std::net::Shutdown::Both);
        }
        for c in list {
            let _ = c.thread.join();
        }
        // Only the socket this service made: another may have taken the
        // path since (after this one stopped listening).
        let ours = std::fs::symlink_metadata(&self.path).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino()) == self.identity
        });
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    /// What a descriptor is: its device and inode.
    fn what(fd: impl AsFd) -> (u64, u64) {
        let file = std::fs::File::from(fd.as_fd().try_clone_to_owned().expect("dup"));
        let meta = file.metadata().expect("fstat");
        (meta.dev(), meta.ino())
    }

    #[test]
    fn a_request_arrives_whole_with_its_descriptors_close_on_exec() {
        let (client, mut service) = UnixStream::pair().expect("socketpair");
        let dir = tempfile::tempdir().expect("tempdir");
        let files: Vec<std::fs::File> = (0..FDS_MAX)
            .map(|i| std::fs::File::create(dir.path().join(i.to_string())).expect("create"))
            .collect();
        let fds: Vec<BorrowedFd<'_>> = files.iter().map(|f| f.as_fd()).collect();
        // Longer than one read of the service, so the descriptors come with
        // the first piece only.
        let mut line = vec![b'x'; 40 << 10];
        line.push(b'\n');
        let sender = std::thread::scope(|s| {
            let sending = s.spawn(|| send_request(&client, &line, &fds));
            let got = read_request(&mut service);
            (sending.join().expect("sender"), got)
        });
        sender.0.expect("sent");
        let (got, received) = sender.1.expect("a request");
        assert_eq!(got, line[..line.len() - 1]);
        assert_eq!(received.len(), FDS_MAX);
        for (file, fd) in files.iter().zip(&received) {
            assert_eq!(what(fd), what(file), "the descriptors in the order sent");
            let flags = rustix::io::fcntl_getfd(fd).expect("F_GETFD");
            assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
        }
    }

    #[test]
    fn more_descriptors_than_a_request_may_carry_are_refused() {
        let (client, mut service) = UnixStream::pair().expect("socketpair");
        let three = [client.as_fd(), client.as_fd(), client.as_fd()];
        let refused = send_request(&client, b"{}\n", &three).expect_err("refused");
        assert_eq!(refused.to_string(), "too many descriptors for one request");
        // A client that sends them anyway is refused by the service.
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(3))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        assert!(control.push(SendAncillaryMessage::ScmRights(&three)));
        let sent = sendmsg(
            &client,
            &[IoSlice::new(b"{}\n")],
            &mut control,
            SendFlags::empty(),
        );
        assert_eq!(sent.expect("sent"), 3);
        assert!(matches!(
            read_request(&mut service),
            Err(RequestError::TooManyFds(FDS_MAX))
        ));
    }

    #[test]
    fn a_request_cut_short_is_unterminated() {
        let (client, mut service) = UnixStream::pair().expect("socketpair");
        send_request(&client, b"{\"no\": \"newline\"}", &[]).expect("sent");
        drop(client);
        assert!(matches!(
            read_request(&mut service),
            Err(RequestError::Unterminated)
        ));
    }

    #[test]
    fn the_peer_of_a_socket_is_this_process() {
        let (client, _service) = UnixStream::pair().expect("socketpair");
        let peer = peer_of(&client).expect("SO_PEERCRED");
        assert_eq!(peer.pid, std::process::id() as i32);
        assert_eq!(peer.uid, rustix::process::geteuid().as_raw());
        assert_eq!(peer.gid, rustix::process::getegid().as_raw());
    }
}
