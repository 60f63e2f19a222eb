//! A disk that hangs, for real: a small FUSE file system, served by a thread
//! of the test's own process, holding one file (`disk.img`, passed through
//! to a backing file) that answers until told to block. Blocked, every read,
//! write, fsync and fallocate sent to it is held unanswered — the process
//! that sent it waits in the kernel, exactly as on a SAN path that stopped
//! answering — until [`HangFs::unblock`] answers them all, in order, and
//! lets the rest through again. An interrupt the kernel sends for a held
//! request (a cancelled io_uring request, a signal) is ignored, as a dead
//! path ignores it. Everything else (lookups, attributes, opens, releases)
//! is answered at once, so the file can be opened, listed and closed
//! whatever its state.
//!
//! The FUSE protocol is spoken directly on `/dev/fuse` (`docs/serve.md`
//! has the reasons `cairn serve` uses `fuser`; a fixture of one file needs
//! a fraction of it). Needs root (mount(2)) and `/dev/fuse`.
//!
//! The test must not touch the mount itself while it is blocked (its own
//! thread would hang); dropping the fixture unblocks it, unmounts it, and
//! ends the serving thread.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::poison::{recover, Recover};

/// The one file's name and inode.
pub const FILE_NAME: &str = "disk.img";
const ROOT: u64 = 1;
const FILE: u64 = 2;
const MAX_WRITE: usize = 1 << 20;
const DEV_BUFFER: usize = MAX_WRITE + 4096;
const IN_HEADER: usize = 40;
const OUT_HEADER: usize = 16;

// Opcodes (include/uapi/linux/fuse.h).
const LOOKUP: u32 = 1;
const FORGET: u32 = 2;
const GETATTR: u32 = 3;
const SETATTR: u32 = 4;
const OPEN: u32 = 14;
const READ: u32 = 15;
const WRITE: u32 = 16;
const STATFS: u32 = 17;
const RELEASE: u32 = 18;
const FSYNC: u32 = 20;
const FLUSH: u32 = 25;
const INIT: u32 = 26;
const OPENDIR: u32 = 27;
const READDIR: u32 = 28;
const RELEASEDIR: u32 = 29;
const ACCESS: u32 = 34;
const INTERRUPT: u32 = 36;
const DESTROY: u32 = 38;
const BATCH_FORGET: u32 = 42;
const FALLOCATE: u32 = 43;

// INIT flags.
const BIG_WRITES: u64 = 1 << 5;
const ASYNC_DIO: u64 = 1 << 15;
const MAX_PAGES: u64 = 1 << 22;
const FOPEN_DIRECT_IO: u32 = 1 << 0;

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        u64::from_le_bytes(a)
    })
}

fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// What the serving thread and the test share.
struct State {
    blocked: bool,
    /// Requests held while blocked: (unique, opcode, request body).
    held: Vec<(u64, u32, Vec<u8>)>,
    /// Held requests so far (answered or not), for a test to wait on.
    held_total: u64,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    backing: File,
    fd: OwnedFd,
}

/// The mounted file system; see the module documentation.
pub struct HangFs {
    shared: Arc<Shared>,
    mountpoint: PathBuf,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HangFs {
    /// Mount a file system at `mountpoint` (an empty directory) whose
    /// `disk.img` is `backing` (its size is the file's). Fails, saying why,
    /// without root or `/dev/fuse`.
    pub fn mount(mountpoint: &Path, backing: &Path) -> Result<Self, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(backing)
            .map_err(|e| format!("{}: {e}", backing.display()))?;
        // The FUSE control file system, where a connection can be aborted
        // (see Drop); already mounted is fine.
        // SAFETY: valid NUL-terminated strings for mount(2), no data.
        unsafe {
            libc::mount(
                c"fusectl".as_ptr(),
                c"/sys/fs/fuse/connections".as_ptr(),
                c"fusectl".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        // SAFETY: opening a device node by a NUL-terminated path.
        let raw = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(format!("FUSE: /dev/fuse: {}", io::Error::last_os_error()));
        }
        // SAFETY: a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let options = format!(
            "fd={},rootmode=40000,user_id=0,group_id=0,allow_other",
            fd.as_raw_fd()
        );
        let c = |s: &str| std::ffi::CString::new(s).map_err(|_| "a NUL in a path".to_string());
        let target = c(mountpoint
            .to_str()
            .ok_or_else(|| "a mountpoint that is not UTF-8".to_string())?)?;
        let (source, fstype, data) = (c("cairn-hang")?, c("fuse.cairn-hang")?, c(&options)?);
        // SAFETY: valid NUL-terminated strings for mount(2).
        let mounted = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        };
        if mounted != 0 {
            return Err(format!(
                "FUSE: mount {}: {} (needs root)",
                mountpoint.display(),
                io::Error::last_os_error()
            ));
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                blocked: false,
                held: Vec::new(),
                held_total: 0,
            }),
            changed: Condvar::new(),
            backing: file,
            fd,
        });
        let serving = shared.clone();
        let thread = std::thread::Builder::new()
            .name("hang-fs".into())
            .spawn(move || serve(&serving))
            .map_err(|e| format!("cannot start the FUSE thread: {e}"))?;
        Ok(Self {
            shared,
            mountpoint: mountpoint.to_path_buf(),
            thread: Some(thread),
        })
    }

    /// The file's path through the mount.
    pub fn file(&self) -> PathBuf {
        self.mountpoint.join(FILE_NAME)
    }

    /// From now on, hold every read, write, fsync and fallocate unanswered.
    pub fn block(&self) {
        self.lock().blocked = true;
    }

    /// Answer every held request (in the order they came) and pass the
    /// rest through again.
    pub fn unblock(&self) {
        let held = {
            let mut state = self.lock();
            state.blocked = false;
            std::mem::take(&mut state.held)
        };
        let mut out = Vec::with_capacity(MAX_WRITE);
        for (unique, opcode, body) in held {
            let answer = self.shared.handle(opcode, FILE, &body, &mut out);
            reply(self.shared.fd.as_raw_fd(), unique, answer, &out);
        }
    }

    /// Requests held so far (answered since or not).
    pub fn held_total(&self) -> u64 {
        self.lock().held_total
    }

    /// Wait until at least `n` requests have been held, at most `bound`
    /// (a bound on a failure: the test fails rather than hangs). Whether it
    /// got there.
    pub fn wait_held(&self, n: u64, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        let mut state = self.lock();
        while state.held_total < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = recover(self.shared.changed.wait_timeout(state, left)).0;
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock_or_recover()
    }
}

impl Drop for HangFs {
    fn drop(&mut self) {
        self.unblock();
        // The connection's number, to abort it once unmounted (a process
        // that still has the file open would otherwise keep it served).
        let connection = std::os::unix::fs::MetadataExt::dev(
            &std::fs::metadata(&self.mountpoint)
                .unwrap_or_else(|_| std::fs::metadata("/").expect("invariant: the root exists")),
        );
        let path = std::ffi::CString::new(self.mountpoint.to_str().unwrap_or_default())
            .unwrap_or_default();
        // SAFETY: a valid C string; umount2 reads only it.
        unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
        let minor = libc::minor(connection);
        let _ = std::fs::write(format!("/sys/fs/fuse/connections/{minor}/abort"), "1");
        // The serving thread's read of /dev/fuse ends with the connection.
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a request is answered with.
enum Answer {
    Ok,
    Err(i32),
    /// No answer (forget, interrupt).
    None,
}

impl Shared {
    fn attr(&self, node: u64, out: &mut Vec<u8>) {
        let size = self.backing.metadata().map_or(0, |m| m.len());
        let (mode, nlink, size) = if node == ROOT {
            (libc::S_IFDIR | 0o755, 2, 0)
        } else {
            (libc::S_IFREG | 0o644, 1, size)
        };
        put64(out, node);
        put64(out, size);
        put64(out, size.div_ceil(512));
        for _ in 0..3 {
            put64(out, 0);
        }
        for _ in 0..3 {
            put32(out, 0);
        }
        put32(out, mode);
        put32(out, nlink);
        put32(out, 0);
        put32(out, 0);
        put32(out, 0);
        put32(out, 4096);
        put32(out, 0);
    }

    /// Answer one request (the body after the common header); the reply
    /// payload goes to `out`.
    fn handle(&self, opcode: u32, node: u64, body: &[u8], out: &mut Vec<u8>) -> Answer {
        out.clear();
        match opcode {
            LOOKUP => self.lookup(node, body, out),
            GETATTR | SETATTR => {
                put64(out, 1);
                put32(out, 0);
                put32(out, 0);
                self.attr(node, out);
                Answer::Ok
            }
            OPEN | OPENDIR => {
                put64(out, 1);
                put32(out, if opcode == OPEN { FOPEN_DIRECT_IO } else { 0 });
                put32(out, 0);
                Answer::Ok
            }
            READDIR => readdir(body, out),
            READ => self.read(body, out),
            WRITE => self.write(body, out),
            // A real fsync: the data is on the backing file's disk when
            // the answer says so.
            FSYNC => match self.backing.sync_data() {
                Ok(()) => Answer::Ok,
                Err(e) => Answer::Err(e.raw_os_error().unwrap_or(libc::EIO)),
            },
            STATFS => {
                for v in [1 << 20, 0, 0, 2, 0] {
                    put64(out, v);
                }
                for v in [4096, 255, 4096, 0, 0, 0, 0, 0, 0, 0] {
                    put32(out, v);
                }
                Answer::Ok
            }
            // Zeroing and punching (Cairn's write-zeroes and discard on a
            // file), passed through.
            FALLOCATE => self.fallocate(body),
            RELEASE | RELEASEDIR | FLUSH | ACCESS | DESTROY => Answer::Ok,
            FORGET | BATCH_FORGET | INTERRUPT => Answer::None,
            _ => Answer::Err(libc::ENOSYS),
        }
    }

    /// LOOKUP of the one file's name in the root.
    fn lookup(&self, node: u64, body: &[u8], out: &mut Vec<u8>) -> Answer {
        if node != ROOT || body.split(|b| *b == 0).next() != Some(FILE_NAME.as_bytes()) {
            return Answer::Err(libc::ENOENT);
        }
        put64(out, FILE);
        put64(out, 1);
        put64(out, 1);
        put64(out, 1);
        put32(out, 0);
        put32(out, 0);
        self.attr(FILE, out);
        Answer::Ok
    }

    /// READ of the file, from the backing file.
    fn read(&self, body: &[u8], out: &mut Vec<u8>) -> Answer {
        let (offset, size) = (u64_at(body, 8), u32_at(body, 16) as usize);
        out.resize(size.min(MAX_WRITE), 0);
        match self.backing.read_at(out, offset) {
            Ok(n) => {
                out.truncate(n);
                Answer::Ok
            }
            Err(e) => Answer::Err(e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }

    /// WRITE to the file, through to the backing file.
    fn write(&self, body: &[u8], out: &mut Vec<u8>) -> Answer {
        let (offset, size) = (u64_at(body, 8), u32_at(body, 16) as usize);
        let data = body.get(40..).unwrap_or(&[]);
        let data = &data[..size.min(data.len())];
        match self.backing.write_all_at(data, offset) {
            Ok(()) => {
                put32(out, data.len() as u32);
                put32(out, 0);
                Answer::Ok
            }
            Err(e) => Answer::Err(e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }

    /// FALLOCATE on the file, on the backing file.
    fn fallocate(&self, body: &[u8]) -> Answer {
        let (offset, len, mode) = (u64_at(body, 8), u64_at(body, 16), u32_at(body, 24));
        // SAFETY: fallocate on a descriptor we own; no memory.
        let done = unsafe {
            libc::fallocate(
                self.backing.as_raw_fd(),
                mode as i32,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if done == 0 {
            Answer::Ok
        } else {
            Answer::Err(
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO),
            )
        }
    }
}

/// READDIR of the root: `.`, `..` and the file, from the offset asked,
/// as many as fit the size asked.
fn readdir(body: &[u8], out: &mut Vec<u8>) -> Answer {
    let offset = u64_at(body, 8);
    let size = u32_at(body, 16) as usize;
    let entries: [(u64, u32, &str); 3] = [
        (ROOT, libc::DT_DIR.into(), "."),
        (ROOT, libc::DT_DIR.into(), ".."),
        (FILE, libc::DT_REG.into(), FILE_NAME),
    ];
    for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
        let len = (24 + name.len()).next_multiple_of(8);
        if out.len() + len > size {
            break;
        }
        put64(out, *ino);
        put64(out, i as u64 + 1);
        put32(out, name.len() as u32);
        put32(out, *kind);
        out.extend_from_slice(name.as_bytes());
        out.resize(out.len().next_multiple_of(8), 0);
    }
    Answer::Ok
}

fn reply(fd: RawFd, unique: u64, answer: Answer, payload: &[u8]) {
    let (error, payload) = match answer {
        Answer::Ok => (0, payload),
        Answer::Err(e) => (-e, &[][..]),
        Answer::None => return,
    };
    let mut header = [0u8; OUT_HEADER];
    header[..4].copy_from_slice(&((OUT_HEADER + payload.len()) as u32).to_le_bytes());
    header[4..8].copy_from_slice(&error.to_le_bytes());
    header[8..].copy_from_slice(&unique.to_le_bytes());
    let iov = [
        libc::iovec {
            iov_base: header.as_ptr() as *mut libc::c_void,
            iov_len: header.len(),
        },
        libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        },
    ];
    // SAFETY: two valid buffers that outlive the call. A reply the kernel
    // no longer wants (an aborted request) fails with ENOENT: ignored.
    unsafe { libc::writev(fd, iov.as_ptr(), 2) };
}

/// The INIT answer.
fn init_reply(body: &[u8], out: &mut Vec<u8>) {
    let offered = u64::from(u32_at(body, 12)) | (u64::from(u32_at(body, 16)) << 32);
    let flags = offered & (BIG_WRITES | ASYNC_DIO | MAX_PAGES);
    out.clear();
    put32(out, u32_at(body, 0));
    put32(out, u32_at(body, 4));
    put32(out, u32_at(body, 8));
    put32(out, flags as u32);
    out.extend_from_slice(&64u16.to_le_bytes());
    out.extend_from_slice(&48u16.to_le_bytes());
    put32(out, MAX_WRITE as u32);
    put32(out, 1);
    out.extend_from_slice(&((MAX_WRITE / 4096) as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    put32(out, 0);
    out.resize(64, 0);
}

/// Read and answer requests until the mount goes.
fn serve(shared: &Shared) {
    let fd = shared.fd.as_raw_fd();
    let mut buf = vec![0u8; DEV_BUFFER];
    let mut out = Vec::with_capacity(MAX_WRITE);
    loop {
        // SAFETY: reading into our own buffer of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) | Some(libc::ENOENT) | Some(libc::EAGAIN) => continue,
                _ => return,
            }
        }
        let n = n as usize;
        if n < IN_HEADER {
            return;
        }
        let (opcode, unique, node) = (u32_at(&buf, 4), u64_at(&buf, 8), u64_at(&buf, 16));
        let body = &buf[IN_HEADER..n];
        if opcode == INIT {
            init_reply(body, &mut out);
            reply(fd, unique, Answer::Ok, &out);
            continue;
        }
        if matches!(opcode, READ | WRITE | FSYNC | FALLOCATE) {
            let mut state = shared.state.lock_or_recover();
            if state.blocked {
                state.held.push((unique, opcode, body.to_vec()));
                state.held_total += 1;
                shared.changed.notify_all();
                continue;
            }
        }
        let answer = shared.handle(opcode, node, body, &mut out);
        reply(fd, unique, answer, &out);
        if opcode == DESTROY {
            return;
        }
    }
}
