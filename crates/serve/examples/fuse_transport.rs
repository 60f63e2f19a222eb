//! What the FUSE transport itself costs here: the smallest file system that
//! serves one file (`file`, read and written with pread/pwrite on a backing
//! file, in /dev/shm for the benchmark), over either transport the kernel
//! offers —
//!
//! - `dev`: requests read from `/dev/fuse` and answered with `writev`, by
//!   `--threads` threads (what fuser, and so `cairn serve`, does);
//! - `uring`: FUSE over io_uring (Linux 6.14+, `fuse.enable_uring=Y`): per
//!   CPU queue, one thread with a ring of `--depth` registered entries; a
//!   request arrives as the completion of the entry's command, and its
//!   answer goes back with the command that fetches the next
//!   (`FUSE_IO_URING_CMD_COMMIT_AND_FETCH`). `/dev/fuse` is still read for
//!   what does not come through the ring (INIT, interrupts).
//!
//! `bench/fuse-transport.sh` runs fio against both, in one run, and prints
//! ratios. Not Cairn's file system: a peer that isolates the transport, so
//! that whether `cairn serve` should move to FUSE over io_uring is decided
//! on a measurement (docs/serve.md). Needs root.
//!
//! ```text
//! fuse_transport --mountpoint DIR --backing FILE --transport dev|uring [--threads N] [--depth D]
//! ```

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

const ROOT: u64 = 1;
const FILE: u64 = 2;
const MAX_WRITE: usize = 1 << 20;
/// Room for a write's header and data.
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
const RELEASEDIR: u32 = 29;
const ACCESS: u32 = 34;
const INTERRUPT: u32 = 36;
const DESTROY: u32 = 38;
const BATCH_FORGET: u32 = 42;

// INIT flags.
const ASYNC_READ: u64 = 1 << 0;
const BIG_WRITES: u64 = 1 << 5;
const ASYNC_DIO: u64 = 1 << 15;
const PARALLEL_DIROPS: u64 = 1 << 18;
const MAX_PAGES: u64 = 1 << 22;
const INIT_EXT: u64 = 1 << 30;
const OVER_IO_URING: u64 = 1 << 41;

const FOPEN_DIRECT_IO: u32 = 1 << 0;
const FOPEN_PARALLEL_DIRECT_WRITES: u32 = 1 << 6;

// FUSE over io_uring.
const URING_CMD_REGISTER: u32 = 1;
const URING_CMD_COMMIT_AND_FETCH: u32 = 2;
/// `struct fuse_uring_req_header`: in_out[128], op_in[128], then
/// `fuse_uring_ent_in_out` (flags, commit_id, payload_sz, padding, reserved).
const RING_HEADER: usize = 288;
const RING_OP_IN: usize = 128;
const RING_COMMIT_ID: usize = 264;
const RING_PAYLOAD_SZ: usize = 272;

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

/// The size of an opcode's own header (the first in-argument), which FUSE
/// over io_uring puts in `op_in`; the rest is the payload.
fn op_header_size(opcode: u32) -> usize {
    match opcode {
        GETATTR => 16,
        SETATTR => 88,
        OPEN | OPENDIR => 8,
        READ | WRITE => 40,
        RELEASE | RELEASEDIR | FLUSH => 24,
        FSYNC => 16,
        ACCESS | FORGET | INTERRUPT => 8,
        BATCH_FORGET => 8,
        INIT => 64,
        _ => 0,
    }
}

struct Fs {
    backing: File,
    size: u64,
    /// Requests answered through /dev/fuse and through the ring.
    via_dev: AtomicU64,
    via_ring: AtomicU64,
}

/// What a request is answered with.
enum Answer {
    /// The reply's payload (after the out header).
    Ok,
    Err(i32),
    /// No reply (forget).
    None,
}

impl Fs {
    fn attr(&self, node: u64, out: &mut Vec<u8>) {
        let (mode, nlink, size) = if node == ROOT {
            (libc::S_IFDIR | 0o755, 2, 0)
        } else {
            (libc::S_IFREG | 0o644, 1, self.size)
        };
        put64(out, node);
        put64(out, size);
        put64(out, size.div_ceil(512));
        for _ in 0..3 {
            put64(out, 0); // atime, mtime, ctime
        }
        for _ in 0..3 {
            put32(out, 0); // nsecs
        }
        put32(out, mode);
        put32(out, nlink);
        put32(out, 0); // uid
        put32(out, 0); // gid
        put32(out, 0); // rdev
        put32(out, 4096); // blksize
        put32(out, 0); // flags
    }

    /// Answer one request; the reply payload goes to `out`.
    fn handle(
        &self,
        opcode: u32,
        node: u64,
        op_in: &[u8],
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Answer {
        out.clear();
        match opcode {
            LOOKUP => {
                if node != ROOT || payload.split(|b| *b == 0).next() != Some(b"file") {
                    return Answer::Err(libc::ENOENT);
                }
                put64(out, FILE);
                put64(out, 1); // generation
                put64(out, 3600); // entry_valid
                put64(out, 3600); // attr_valid
                put32(out, 0);
                put32(out, 0);
                self.attr(FILE, out);
                Answer::Ok
            }
            GETATTR | SETATTR => {
                put64(out, 3600);
                put32(out, 0);
                put32(out, 0);
                self.attr(node, out);
                Answer::Ok
            }
            OPEN | OPENDIR => {
                put64(out, 1); // fh
                put32(
                    out,
                    if opcode == OPEN {
                        FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES
                    } else {
                        0
                    },
                );
                put32(out, 0);
                Answer::Ok
            }
            READ => {
                let (offset, size) = (u64_at(op_in, 8), u32_at(op_in, 16) as usize);
                out.resize(size.min(MAX_WRITE), 0);
                match self.backing.read_at(out, offset) {
                    Ok(n) => {
                        out.truncate(n);
                        Answer::Ok
                    }
                    Err(e) => Answer::Err(e.raw_os_error().unwrap_or(libc::EIO)),
                }
            }
            WRITE => {
                let (offset, size) = (u64_at(op_in, 8), u32_at(op_in, 16) as usize);
                let data = &payload[..size.min(payload.len())];
                match self.backing.write_at(data, offset) {
                    Ok(n) => {
                        put32(out, n as u32);
                        put32(out, 0);
                        Answer::Ok
                    }
                    Err(e) => Answer::Err(e.raw_os_error().unwrap_or(libc::EIO)),
                }
            }
            STATFS => {
                for v in [self.size / 4096, 0, 0, 2, 0] {
                    put64(out, v);
                }
                for v in [4096, 255, 4096, 0, 0, 0, 0, 0, 0, 0] {
                    put32(out, v);
                }
                Answer::Ok
            }
            RELEASE | RELEASEDIR | FLUSH | FSYNC | ACCESS | DESTROY => Answer::Ok,
            FORGET | BATCH_FORGET | INTERRUPT => Answer::None,
            _ => Answer::Err(libc::ENOSYS),
        }
    }
}

/// The INIT answer: the kernel's offer, what we take from it.
fn init_reply(body: &[u8], uring: bool, out: &mut Vec<u8>) -> Result<(), String> {
    let (major, minor) = (u32_at(body, 0), u32_at(body, 4));
    let offered = u64::from(u32_at(body, 12)) | (u64::from(u32_at(body, 16)) << 32);
    let mut wanted = ASYNC_READ | BIG_WRITES | ASYNC_DIO | PARALLEL_DIROPS | MAX_PAGES | INIT_EXT;
    if uring {
        if offered & OVER_IO_URING == 0 {
            return Err(
                "the kernel does not offer FUSE over io_uring (is fuse.enable_uring Y?)".into(),
            );
        }
        wanted |= OVER_IO_URING;
    }
    let flags = offered & wanted;
    out.clear();
    put32(out, major);
    put32(out, minor);
    put32(out, u32_at(body, 8)); // max_readahead
    put32(out, flags as u32);
    out.extend_from_slice(&128u16.to_le_bytes()); // max_background
    out.extend_from_slice(&96u16.to_le_bytes()); // congestion_threshold
    put32(out, MAX_WRITE as u32);
    put32(out, 1); // time_gran
    out.extend_from_slice(&((MAX_WRITE / 4096) as u16).to_le_bytes()); // max_pages
    out.extend_from_slice(&0u16.to_le_bytes()); // map_alignment
    put32(out, (flags >> 32) as u32);
    out.resize(64, 0);
    Ok(())
}

fn out_header(len: usize, error: i32, unique: u64) -> [u8; OUT_HEADER] {
    let mut h = [0u8; OUT_HEADER];
    h[..4].copy_from_slice(&(len as u32).to_le_bytes());
    h[4..8].copy_from_slice(&error.to_le_bytes());
    h[8..].copy_from_slice(&unique.to_le_bytes());
    h
}

fn reply_dev(fd: RawFd, unique: u64, answer: &Answer, payload: &[u8]) {
    let (error, payload) = match answer {
        Answer::Ok => (0, payload),
        Answer::Err(e) => (-e, &[][..]),
        Answer::None => return,
    };
    let header = out_header(OUT_HEADER + payload.len(), error, unique);
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
    // no longer wants (an interrupted request) fails with ENOENT: ignored.
    unsafe { libc::writev(fd, iov.as_ptr(), 2) };
}

/// Read and answer requests from `/dev/fuse` until it ends (unmounted).
fn serve_dev(fs: Arc<Fs>, fd: RawFd, uring: bool, on_init: Option<Box<dyn FnOnce() + Send>>) {
    let mut on_init = on_init;
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
            match init_reply(body, uring, &mut out) {
                Ok(()) => reply_dev(fd, unique, &Answer::Ok, &out),
                Err(e) => {
                    eprintln!("fuse_transport: {e}");
                    reply_dev(fd, unique, &Answer::Err(libc::EPROTO), &[]);
                    std::process::exit(1);
                }
            }
            if let Some(f) = on_init.take() {
                f();
            }
            continue;
        }
        let k = op_header_size(opcode).min(body.len());
        fs.via_dev.fetch_add(1, Ordering::Relaxed);
        let answer = fs.handle(opcode, node, &body[..k], &body[k..], &mut out);
        reply_dev(fd, unique, &answer, &out);
    }
}

/// One registered ring entry: its header and payload buffers, and the
/// iovecs that name them (boxed: the kernel keeps their addresses).
struct Entry {
    header: Vec<u8>,
    payload: Vec<u8>,
    iov: Box<[libc::iovec; 2]>,
}

fn ring_cmd(
    fd: RawFd,
    cmd_op: u32,
    entry: &Entry,
    qid: u16,
    commit_id: u64,
    tag: u64,
) -> squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_le_bytes());
    cmd[16..18].copy_from_slice(&qid.to_le_bytes());
    let sqe = opcode::UringCmd80::new(types::Fd(fd), cmd_op)
        .cmd(cmd)
        .addr(Some(entry.iov.as_ptr() as u64))
        .build()
        .user_data(tag);
    // The crate has no setter for `len`, which FUSE reads as the number of
    // iovecs (2). SAFETY: Entry128 is repr(C) over the 128-byte SQE, whose
    // `len` is the u32 at byte 24.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(sqe) };
    raw[24..28].copy_from_slice(&2u32.to_le_bytes());
    // SAFETY: the same 128 bytes back; any bytes are a valid SQE value.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

/// Serve one queue of FUSE over io_uring: register `depth` entries, then
/// answer each request as it completes and fetch the next.
fn serve_queue(fs: Arc<Fs>, fd: RawFd, qid: u16, depth: usize) -> io::Result<()> {
    // On the queue's own CPU: a request is queued on the CPU its submitter
    // runs on, and its completion is the ring owner's task work — a thread
    // elsewhere would be woken across CPUs for every request (libfuse pins
    // its queue threads the same way).
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(usize::from(qid), &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    // The buffers first, so that they are dropped after the ring: the
    // kernel may write into them while a command is registered.
    let mut entries: Vec<Entry> = (0..depth)
        .map(|_| {
            let mut header = vec![0u8; RING_HEADER];
            let mut payload = vec![0u8; DEV_BUFFER];
            let iov = Box::new([
                libc::iovec {
                    iov_base: header.as_mut_ptr().cast(),
                    iov_len: header.len(),
                },
                libc::iovec {
                    iov_base: payload.as_mut_ptr().cast(),
                    iov_len: payload.len(),
                },
            ]);
            Entry {
                header,
                payload,
                iov,
            }
        })
        .collect();
    let mut ring: IoUring<squeue::Entry128, cqueue::Entry32> =
        IoUring::builder().build((depth as u32 * 2).next_power_of_two())?;
    for (i, e) in entries.iter().enumerate() {
        let sqe = ring_cmd(fd, URING_CMD_REGISTER, e, qid, 0, i as u64);
        // SAFETY: the entry's buffers live as long as the ring's commands.
        unsafe { ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("the submission queue is full"))?;
    }
    ring.submit()?;
    let mut out = Vec::with_capacity(MAX_WRITE);
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (tag, res) in done {
            if res < 0 {
                return match -res {
                    // Unmounted.
                    libc::ENOTCONN | libc::ENODEV | libc::ECONNABORTED => Ok(()),
                    errno => Err(io::Error::from_raw_os_error(errno)),
                };
            }
            let e = &mut entries[tag as usize];
            let h = &e.header;
            let (opcode, unique, node) = (u32_at(h, 4), u64_at(h, 8), u64_at(h, 16));
            let commit_id = u64_at(h, RING_COMMIT_ID);
            let payload_sz = (u32_at(h, RING_PAYLOAD_SZ) as usize).min(e.payload.len());
            let k = op_header_size(opcode).min(RING_OP_IN);
            fs.via_ring.fetch_add(1, Ordering::Relaxed);
            let answer = fs.handle(
                opcode,
                node,
                &h[128..128 + k],
                &e.payload[..payload_sz],
                &mut out,
            );
            let (error, len) = match answer {
                Answer::Ok => (0, out.len()),
                Answer::Err(err) => (-err, 0),
                Answer::None => (0, 0),
            };
            e.header[..OUT_HEADER].copy_from_slice(&out_header(OUT_HEADER + len, error, unique));
            e.payload[..len].copy_from_slice(&out[..len]);
            e.header[RING_PAYLOAD_SZ..RING_PAYLOAD_SZ + 4]
                .copy_from_slice(&(len as u32).to_le_bytes());
            let sqe = ring_cmd(fd, URING_CMD_COMMIT_AND_FETCH, e, qid, commit_id, tag);
            // SAFETY: as above.
            unsafe { ring.submission().push(&sqe) }
                .map_err(|_| io::Error::other("the submission queue is full"))?;
        }
    }
}

/// The possible CPUs (FUSE over io_uring has one queue for each).
fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| {
            s.trim()
                .rsplit(['-', ','])
                .next()
                .and_then(|n| n.parse::<usize>().ok())
        })
        .map_or(1, |last| last + 1)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut mountpoint, mut backing, mut transport) = (None, None, String::from("dev"));
    let (mut threads, mut depth) = (2usize, 32usize);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{a} takes a value")))
        };
        match a.as_str() {
            "--mountpoint" => mountpoint = Some(value()),
            "--backing" => backing = Some(value()),
            "--transport" => transport = value(),
            "--threads" => threads = value().parse().unwrap_or_else(|_| usage("--threads N")),
            "--depth" => depth = value().parse().unwrap_or_else(|_| usage("--depth D")),
            _ => usage(&format!("unknown argument {a}")),
        }
    }
    let (Some(mountpoint), Some(backing)) = (mountpoint, backing) else {
        usage("--mountpoint and --backing are required")
    };
    let uring = match transport.as_str() {
        "dev" => false,
        "uring" => true,
        _ => usage("--transport dev|uring"),
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&backing)
        .unwrap_or_else(|e| fail(&format!("{backing}: {e}")));
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let fs = Arc::new(Fs {
        backing: file,
        size,
        via_dev: AtomicU64::new(0),
        via_ring: AtomicU64::new(0),
    });
    // SAFETY: opening a device node by a NUL-terminated path.
    let raw = unsafe { libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if raw < 0 {
        fail(&format!("/dev/fuse: {}", io::Error::last_os_error()));
    }
    // SAFETY: a descriptor we just opened and own.
    let fuse = unsafe { OwnedFd::from_raw_fd(raw) };
    let fd = fuse.as_raw_fd();
    let options = format!("fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other");
    let c = |s: &str| std::ffi::CString::new(s).unwrap_or_else(|_| fail("a NUL in an argument"));
    let (source, target, fstype, data) = (
        c("fuse_transport"),
        c(&mountpoint),
        c("fuse.fuse_transport"),
        c(&options),
    );
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
        fail(&format!(
            "mount {mountpoint}: {}",
            io::Error::last_os_error()
        ));
    }
    let queues = possible_cpus();
    let on_init: Option<Box<dyn FnOnce() + Send>> = uring.then(|| {
        let fs = fs.clone();
        Box::new(move || {
            for qid in 0..queues {
                let fs = fs.clone();
                std::thread::spawn(move || {
                    if let Err(e) = serve_queue(fs, fd, qid as u16, depth) {
                        eprintln!("fuse_transport: queue {qid}: {e}");
                        std::process::exit(1);
                    }
                });
            }
        }) as Box<dyn FnOnce() + Send>
    });
    // The first thread answers INIT (and, with io_uring, starts the
    // queues); with io_uring one thread is left on /dev/fuse.
    let dev_threads = if uring { 1 } else { threads.max(1) };
    let mut handles = Vec::new();
    let mut on_init = on_init;
    for _ in 0..dev_threads {
        let fs = fs.clone();
        let init = on_init.take();
        handles.push(std::thread::spawn(move || serve_dev(fs, fd, uring, init)));
    }
    println!(
        "serving {mountpoint}/file over {transport} ({})",
        if uring {
            format!("{queues} queue(s) of {depth}")
        } else {
            format!("{dev_threads} thread(s)")
        }
    );
    for h in handles {
        let _ = h.join();
    }
    println!(
        "requests answered: {} through /dev/fuse, {} through the ring",
        fs.via_dev.load(Ordering::Relaxed),
        fs.via_ring.load(Ordering::Relaxed)
    );
    drop(fuse);
}

fn usage(why: &str) -> ! {
    eprintln!("fuse_transport: {why}\nusage: fuse_transport --mountpoint DIR --backing FILE --transport dev|uring [--threads N] [--depth D]");
    std::process::exit(2)
}

fn fail(why: &str) -> ! {
    eprintln!("fuse_transport: {why}");
    std::process::exit(1)
}
