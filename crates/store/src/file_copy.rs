//! Copying files into, out of, and between groups (`cairn cp`).
//!
//! Into a group: the file is created without a name ([`Group::create_unnamed`]),
//! filled, and named last ([`Group::publish`]), so a name never shows a file
//! whose data is not all there; a copy killed midway leaves an unnamed
//! `creating` file that the next mount that writes removes. A source that is
//! not a regular file (a pipe, a FIFO, a character device, standard input) is
//! streamed to its end, the file growing as the data comes, and `max_bytes`
//! stops an endless one. The source is opened before the group is mounted
//! ([`crate::group_copy`] keeps that order), so a FIFO waiting for its writer
//! holds no lock.
//!
//! Out of a group: the destination is settled before the group is mounted.
//! A new or regular file is written to an anonymous file (`O_TMPFILE`, which a
//! crash leaves nowhere) — or a private name beside it, created exclusively
//! and never through a link — and renamed over the destination once complete
//! and flushed; a symbolic link is followed to its target. A disk of a Cairn
//! group is never written over; a file or block device with a filesystem, a
//! label or another owner's data only with `force` ([`admin::refuse_overwrite`]);
//! a block device in use never, and only if the file fits. A character device
//! or a FIFO is written through as a stream. A device node, link or socket is
//! never replaced by a regular file.
//!
//! Between groups: both are mounted at once — the source read-only, the
//! destination for writing — and data moves chunk by chunk, with no staging
//! file anywhere.
//!
//! These are the steps on groups already mounted; [`crate::group_copy`] is
//! the whole `cairn cp` (which way, what is settled before a mount, the
//! mounts themselves).

use crate::group::{DataHandle, LiveGroup};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use cairn_io::host::Host;
use cairn_io::{AlignedBuf, FileEngine, IoEngine};

use crate::admin::{self, AdminError};
use crate::group::{CreateOptions, FileInfo, Group, GroupError};
use crate::group_admin::GroupAdminError;
use crate::names::{GroupPath, NameError};

/// Bytes per read and write of a copy.
pub const COPY_CHUNK_BYTES: usize = 1 << 20;
/// A streamed file grows by at most this much at a time, so a stream's
/// allocation commits stay few without reserving far past what came.
const STREAM_GROW_BYTES_MAX: u64 = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// Finding, locking or mounting a group by discovery.
    #[error(transparent)]
    GroupAdmin(#[from] GroupAdminError),
    /// A group path that is not one.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The request itself cannot be done as given (a flag's value, a
    /// destination that needs a name the source lacks): the message says
    /// what to give instead.
    #[error("{0}")]
    Request(String),
    /// The source cannot be read: the message says what and what to do.
    #[error("{0}")]
    Source(String),
    /// The destination cannot be written: the message says what and what to do.
    #[error("{0}")]
    Destination(String),
}

/// What a copy reports as it goes: bytes done, and the total when known.
pub type Progress<'p> = &'p mut dyn FnMut(u64, Option<u64>);

/// An OS-side source, opened.
pub struct Source {
    reader: Box<dyn Read>,
    /// Its length when it has one (a regular file, a block device).
    pub len_bytes: Option<u64>,
    /// Its file name, for a copy into a directory (`None` for standard input).
    pub name: Option<String>,
    /// How to name it in messages.
    pub shown_as: String,
}

/// Open `text` ("-" is standard input) to copy from. A directory or a socket
/// is refused. `waiting` is called before opening a FIFO, whose open waits
/// for a writer.
pub fn open_source(text: &str, waiting: &mut dyn FnMut(&str)) -> Result<Source, CopyError> {
    if text == "-" {
        return Ok(Source {
            reader: Box::new(std::io::stdin()),
            len_bytes: None,
            name: None,
            shown_as: "standard input".into(),
        });
    }
    let path = Path::new(text);
    let meta = std::fs::metadata(path).map_err(|e| {
        CopyError::Source(format!(
            "cannot open {text}: {}",
            describe_io(&e, "check the path")
        ))
    })?;
    let kind = meta.file_type();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    // Before the open: a socket cannot be opened, a FIFO's open waits.
    refuse_kind(text, kind)?;
    if kind.is_fifo() {
        waiting(text);
    }
    let file = File::open(path).map_err(|e| {
        CopyError::Source(format!(
            "cannot open {text}: {}",
            describe_io(&e, "check its permissions")
        ))
    })?;
    Source::opened(file, text, name)
}

/// A source cp does not read: a directory, a socket.
fn refuse_kind(text: &str, kind: std::fs::FileType) -> Result<(), CopyError> {
    if kind.is_dir() {
        return Err(CopyError::Source(format!(
            "{text} is a directory; cp copies one file at a time"
        )));
    }
    if kind.is_socket() {
        return Err(CopyError::Source(format!(
            "{text} is a socket; cp reads files, devices, pipes and FIFOs"
        )));
    }
    Ok(())
}

impl Source {
    /// A source already open (standard input, or a descriptor a client of
    /// the service passed): `shown_as` names it in messages, `name` is its
    /// file name for a copy into a directory. A directory or a socket is
    /// refused.
    pub fn opened(mut file: File, shown_as: &str, name: Option<String>) -> Result<Self, CopyError> {
        let text = shown_as;
        let meta = file
            .metadata()
            .map_err(|e| CopyError::Source(format!("cannot look at {text}: {e}")))?;
        let kind = meta.file_type();
        refuse_kind(text, kind)?;
        let len_bytes = if kind.is_file() {
            Some(meta.len())
        } else if kind.is_block_device() {
            use std::io::Seek;
            Some(
                file.seek(std::io::SeekFrom::End(0))
                    .and_then(|end| {
                        file.seek(std::io::SeekFrom::Start(0))?;
                        Ok(end)
                    })
                    .map_err(|e| CopyError::Source(format!("cannot size {text}: {e}")))?,
            )
        } else {
            None
        };
        Ok(Source {
            reader: Box::new(file),
            len_bytes,
            name,
            shown_as: text.to_string(),
        })
    }
}

impl Source {
    /// A group file of a live group as a source (a copy between groups, or
    /// within one): read through a data handle of its own, `len_bytes`
    /// long (its length in bytes).
    pub fn group_file(
        live: &LiveGroup,
        number: u32,
        len_bytes: u64,
        shown_as: &str,
        name: Option<String>,
    ) -> Result<Self, CopyError> {
        let file = LiveFile::open(live, number)?;
        Ok(Source {
            reader: Box::new(GroupFileReader {
                file,
                number,
                len_bytes,
                at: 0,
                buf: Vec::new(),
                start: 0,
            }),
            len_bytes: Some(len_bytes),
            name,
            shown_as: shown_as.to_string(),
        })
    }
}

/// A live group's files read through a data handle of their own, in whole
/// sectors (past a file's bytes, zeros): what a copy out reads.
pub struct LiveFile {
    handle: DataHandle,
    sector_bytes: u64,
}

impl LiveFile {
    pub fn open(live: &LiveGroup, number: u32) -> Result<Self, CopyError> {
        let _ = number;
        let sector_bytes = live.meta(|g| u64::from(g.sector_bytes()))?;
        Ok(Self {
            handle: live.handle(LIVE_COPY_DEPTH)?,
            sector_bytes,
        })
    }
}

impl ChunkSource for LiveFile {
    fn sector_bytes(&self) -> u64 {
        self.sector_bytes
    }

    fn read_chunk(&mut self, number: u32, offset: u64, buf: &mut [u8]) -> Result<(), CopyError> {
        Ok(self.handle.read(number, offset, buf)?)
    }
}

/// [`Source::group_file`]'s reader: whole chunks of sectors read ahead,
/// handed out as asked, to the file's length in bytes.
struct GroupFileReader {
    file: LiveFile,
    number: u32,
    len_bytes: u64,
    /// The file offset `buf` starts at.
    at: u64,
    buf: Vec<u8>,
    /// What of `buf` has been handed out.
    start: usize,
}

impl Read for GroupFileReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.start == self.buf.len() {
            let at = self.at + self.buf.len() as u64;
            if at >= self.len_bytes {
                return Ok(0);
            }
            let sector = self.file.sector_bytes.max(1);
            let want = (self.len_bytes - at).min(COPY_CHUNK_BYTES as u64);
            let whole = want.div_ceil(sector) * sector;
            self.buf.resize(whole as usize, 0);
            self.file
                .read_chunk(self.number, at, &mut self.buf)
                .map_err(std::io::Error::other)?;
            self.buf.truncate(want as usize);
            self.at = at;
            self.start = 0;
        }
        let n = out.len().min(self.buf.len() - self.start);
        out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        Ok(n)
    }
}

/// What a copy into a group did.
#[derive(Debug, Clone)]
pub struct CopyInReport {
    pub file: FileInfo,
    /// Bytes read from the source.
    pub bytes_copied: u64,
    /// The sectors the file holds: the bytes copied, padded with zeros to
    /// whole sectors (its length in bytes is `bytes_copied`).
    pub size_bytes: u64,
    /// The copy stopped at `max_bytes` with more data left in the source.
    pub stopped_at_max: bool,
}

/// Read the source to its end (or its known length, or `max_bytes`) into
/// file `number`, growing it as needed. Returns (bytes copied, stopped at
/// `max_bytes` with more to come).
fn fill(
    group: &mut LiveFill<'_>,
    number: u32,
    source: &mut Source,
    expected: Option<u64>,
    max_bytes: Option<u64>,
    progress: Progress<'_>,
) -> Result<(u64, bool), CopyError> {
    let sector = group.sector_bytes();
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    let mut capacity = group.capacity(number)?;
    let mut at = 0u64;
    let limit = expected.or(max_bytes).unwrap_or(u64::MAX);
    loop {
        let want = (limit - at).min(COPY_CHUNK_BYTES as u64) as usize;
        if want == 0 {
            break;
        }
        let got = read_full(&mut source.reader, &mut buf[..want]).map_err(|e| {
            CopyError::Source(format!(
                "reading {}: {}",
                source.shown_as,
                describe_io(&e, "check the source")
            ))
        })?;
        if got == 0 {
            if let Some(len) = expected {
                return Err(CopyError::Source(format!(
                    "{} ended at byte {at}, before its length of {len}: it shrank while being copied; copy it again",
                    source.shown_as
                )));
            }
            break;
        }
        let padded = (got as u64).div_ceil(sector) * sector;
        if at + padded > capacity {
            // Ahead of the data (doubling, up to a step), so a stream costs
            // few allocation commits; near a full group, only what is needed.
            let grow = capacity.clamp(COPY_CHUNK_BYTES as u64, STREAM_GROW_BYTES_MAX);
            let ahead = (at + padded).max(capacity + grow).div_ceil(sector) * sector;
            capacity = match group.grow_unnamed(number, ahead) {
                Ok(()) => ahead,
                Err(GroupError::NoSpace(_)) => {
                    group.grow_unnamed(number, at + padded)?;
                    at + padded
                }
                Err(e) => return Err(e.into()),
            };
        }
        buf[got..padded as usize].fill(0);
        group.write(number, at, &buf[..padded as usize])?;
        at += got as u64;
        progress(at, expected);
        if got < want {
            // A short read that is not the end of a stream: only at EOF.
            if expected.is_none() {
                break;
            }
        }
    }
    let stopped_at_max = match (source.len_bytes, max_bytes) {
        (Some(len), Some(max)) => len > max,
        (None, Some(max)) => {
            max == at && read_full(&mut source.reader, &mut buf[..1]).is_ok_and(|n| n > 0)
        }
        _ => false,
    };
    Ok((at, stopped_at_max))
}

/// Where [`fill`] puts a copy: a live group (its metadata plane for the
/// file's growth) and a data handle of its own (for the bytes).
struct LiveFill<'l> {
    live: &'l LiveGroup,
    handle: DataHandle,
    sector_bytes: u64,
}

impl LiveFill<'_> {
    fn sector_bytes(&self) -> u64 {
        self.sector_bytes
    }

    fn capacity(&mut self, number: u32) -> Result<u64, GroupError> {
        self.live
            .meta(|g| g.file_info(number))?
            .map(|f| f.size_bytes)
    }

    fn grow_unnamed(&mut self, number: u32, size_bytes: u64) -> Result<(), GroupError> {
        self.live.meta(|g| g.grow_unnamed(number, size_bytes))?
    }

    fn write(&mut self, number: u32, offset: u64, bytes: &[u8]) -> Result<(), GroupError> {
        self.handle.write(number, offset, bytes)
    }
}

/// Data handle depth of a copy into a live group.
const LIVE_COPY_DEPTH: usize = 16;

/// Copy `source` into a live group as the new file `dest`: the file is made
/// and grown by metadata operations, its bytes go through a data handle
/// beside any other I/O, and its name appears (with its length in bytes)
/// only once every byte is on every copy's disk. On any failure the
/// unnamed file is dropped again.
pub fn copy_in_live(
    live: &LiveGroup,
    source: &mut Source,
    dest: &GroupPath,
    options: &CreateOptions,
    max_bytes: Option<u64>,
    progress: Progress<'_>,
) -> Result<CopyInReport, CopyError> {
    let sector = live.meta(|g| u64::from(g.sector_bytes()))?;
    let expected = source.len_bytes.map(|l| max_bytes.map_or(l, |m| l.min(m)));
    let initial = expected.map_or(0, |l| l.div_ceil(sector) * sector);
    let file = live.meta(|g| {
        g.check_name_free(dest)?;
        g.create_unnamed(initial, options)
    })??;
    let number = file.number;
    let filled = live
        .handle(LIVE_COPY_DEPTH)
        .map_err(CopyError::from)
        .and_then(|handle| {
            let mut site = LiveFill {
                live,
                handle,
                sector_bytes: sector,
            };
            let filled = fill(&mut site, number, source, expected, max_bytes, progress)?;
            // The name must not be durable before the data.
            site.handle.sync()?;
            Ok(filled)
        });
    let published = filled.and_then(|(copied, stopped_at_max)| {
        let size = copied.div_ceil(sector) * sector;
        let file = live.meta(|g| publish_copied(g, number, dest, copied, size))??;
        Ok(CopyInReport {
            file,
            bytes_copied: copied,
            size_bytes: size,
            stopped_at_max,
        })
    });
    if published.is_err() {
        // Best effort: if this fails too, the next mount that writes
        // removes the unnamed file.
        let _ = live.meta(|g| g.discard_unnamed(number));
    }
    published
}

/// Read until `buf` is full or the source ends; retries interrupted reads.
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match reader.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Where a copy out of a group writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A regular file, new or replaced: written under a temporary name in
    /// `path`'s directory and renamed over `path`.
    File { path: PathBuf },
    /// A block device, written in place.
    BlockDevice { path: PathBuf },
    /// A character device or FIFO, written as a stream.
    Stream { path: PathBuf },
    /// Standard output (`-`, `/dev/stdout`).
    Stdout,
}

/// Resolve the OS destination `text` of a copy of a file named `name`: `-`
/// or `/dev/stdout` is standard output; into a directory (an existing one,
/// or any text ending in `/`); through symbolic links to what they name; and
/// by what is there.
pub fn resolve_destination(text: &str, name: &str) -> Result<Destination, CopyError> {
    if text == "-" || text == "/dev/stdout" {
        return Ok(Destination::Stdout);
    }
    let mut path = PathBuf::from(text);
    let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
    if is_dir || text.ends_with('/') {
        if !is_dir {
            return Err(CopyError::Destination(format!(
                "{text} ends with '/' but is not a directory; create it first or drop the '/'"
            )));
        }
        path = path.join(name);
    }
    let link = std::fs::symlink_metadata(&path);
    let target = match &link {
        Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(&path) {
            Ok(target) => target,
            Err(_) => {
                let to = std::fs::read_link(&path)
                    .map_or_else(|_| "?".into(), |t| t.display().to_string());
                return Err(CopyError::Destination(format!(
                    "{} is a symbolic link to {to}, which does not exist; cp does not write through a dangling link — remove the link or create what it names",
                    path.display()
                )));
            }
        },
        _ => path.clone(),
    };
    let meta = match std::fs::metadata(&target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = directory_of(&target);
            if !parent.is_dir() {
                return Err(CopyError::Destination(format!(
                    "{}: directory {} does not exist; create it first",
                    target.display(),
                    parent.display()
                )));
            }
            return Ok(Destination::File { path: target });
        }
        Err(e) => {
            return Err(CopyError::Destination(format!(
                "cannot use {}: {}",
                target.display(),
                describe_io(&e, "check the path")
            )))
        }
    };
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err(CopyError::Destination(format!(
            "{} is a directory; name a file in it",
            target.display()
        )));
    }
    if kind.is_file() {
        return Ok(Destination::File { path: target });
    }
    if kind.is_block_device() {
        return Ok(Destination::BlockDevice { path: target });
    }
    if kind.is_char_device() || kind.is_fifo() {
        return Ok(Destination::Stream { path: target });
    }
    Err(CopyError::Destination(format!(
        "{} is a socket; cp writes files, devices and FIFOs",
        target.display()
    )))
}

/// A destination made ready before the group is mounted: checked against
/// the protections, opened (a FIFO waiting for its reader holds no lock),
/// and for a file, its temporary created.
pub struct Prepared {
    kind: PreparedKind,
}

enum PreparedKind {
    File {
        path: PathBuf,
        tmp: Temporary,
    },
    Device {
        path: PathBuf,
        engine: cairn_io::sync_engine::SyncEngine,
        id: cairn_io::DeviceId,
        sector_bytes: u64,
        device_bytes: u64,
    },
    Stream {
        shown: String,
        file: File,
    },
    Stdout,
}

/// Make `dest` ready for a copy, before the group is mounted. A file or
/// device that carries a Cairn disk of a group is never written over (with
/// or without `force`: `cp` is not how a disk leaves its group); one that
/// carries any other label, filesystem or owner's signature only with
/// `force`. A block device must not be in use (and [`copy_out`] checks that
/// it holds the file before writing a byte).
pub fn prepare_destination(
    dest: &Destination,
    host: &Host,
    force: bool,
) -> Result<Prepared, CopyError> {
    let kind = match dest {
        Destination::Stdout => PreparedKind::Stdout,
        Destination::Stream { path } => PreparedKind::Stream {
            shown: path.display().to_string(),
            file: OpenOptions::new().write(true).open(path).map_err(|e| {
                CopyError::Destination(format!(
                    "cannot open {}: {}",
                    path.display(),
                    describe_io(&e, "check its permissions")
                ))
            })?,
        },
        Destination::File { path } => {
            if path.exists() {
                admin::refuse_overwrite(host, path, force)?;
            }
            PreparedKind::File {
                path: path.clone(),
                tmp: Temporary::create(path)?,
            }
        }
        Destination::BlockDevice { path } => {
            admin::refuse_overwrite(host, path, force)?;
            // Content judged above; this opens it exclusively and refuses a
            // device in use, which no flag overrides.
            let device = admin::open_for_overwrite(host, path, true)?;
            let device_bytes = device.probe().size_bytes;
            let sector_bytes = u64::from(device.geometry().logical_sector_bytes);
            let mut engine = cairn_io::sync_engine::SyncEngine::new(1);
            let id = engine.attach(device);
            PreparedKind::Device {
                path: path.clone(),
                engine,
                id,
                sector_bytes,
                device_bytes,
            }
        }
    };
    Ok(Prepared { kind })
}

/// Copy file `number` (of `size_bytes`) out of the group to a destination
/// [`prepare_destination`] made ready. On failure a new file's temporary
/// is removed; a device or stream holds what was written.
pub fn copy_out(
    group: &mut dyn ChunkSource,
    number: u32,
    size_bytes: u64,
    prepared: Prepared,
    progress: Progress<'_>,
) -> Result<(), CopyError> {
    match prepared.kind {
        PreparedKind::Stdout => {
            let mut out = std::io::stdout().lock();
            stream_out(
                group,
                number,
                size_bytes,
                &mut out,
                "standard output",
                progress,
            )
        }
        PreparedKind::Stream { shown, mut file } => {
            stream_out(group, number, size_bytes, &mut file, &shown, progress)
        }
        PreparedKind::File { path, mut tmp } => {
            let shown = path.display().to_string();
            let written = stream_out(group, number, size_bytes, tmp.file(), &shown, progress)
                .and_then(|()| {
                    tmp.file().sync_all().map_err(|e| {
                        CopyError::Destination(format!(
                            "flushing {shown}: {}",
                            describe_io(&e, "check the destination")
                        ))
                    })
                });
            written.and_then(|()| tmp.install(&path))
        }
        PreparedKind::Device {
            path,
            mut engine,
            id,
            sector_bytes,
            device_bytes,
        } => {
            if size_bytes.div_ceil(sector_bytes) * sector_bytes > device_bytes {
                return Err(CopyError::Destination(format!(
                    "{} is {device_bytes} bytes, smaller than the {size_bytes}-byte file; nothing was written",
                    path.display()
                )));
            }
            let io = |e: cairn_io::IoError| {
                CopyError::Destination(format!(
                    "writing {}: {e}; check the device and the kernel log (dmesg)",
                    path.display()
                ))
            };
            for_each_chunk(group, number, size_bytes, progress, &mut |at, buf, n| {
                // The last piece, in whole device sectors (a 512-byte-sector
                // group file onto a 4Kn device): zeros after the file's end.
                let padded = (n as u64).div_ceil(sector_bytes) as usize * sector_bytes as usize;
                buf[n..padded].fill(0);
                engine
                    .write_at(id, at, AlignedBuf::from_slice(&buf[..padded]), false)
                    .map_err(io)
            })?;
            engine.flush(id).map_err(io)
        }
    }
}

fn stream_out(
    group: &mut dyn ChunkSource,
    number: u32,
    size_bytes: u64,
    out: &mut dyn Write,
    shown: &str,
    progress: Progress<'_>,
) -> Result<(), CopyError> {
    let failed = |e: std::io::Error| {
        CopyError::Destination(format!(
            "writing {shown}: {}",
            describe_io(&e, "check the destination")
        ))
    };
    for_each_chunk(group, number, size_bytes, progress, &mut |_, buf, n| {
        out.write_all(&buf[..n]).map_err(failed)
    })?;
    out.flush().map_err(failed)
}

/// Where [`copy_out`] reads a file: a group one command holds, or — for a
/// file a service holds — the file as its file system serves it.
pub trait ChunkSource {
    /// The unit reads are made in.
    fn sector_bytes(&self) -> u64;
    /// Read `buf` from file `number` at `offset` (whole sectors; past the
    /// file's bytes, zeros).
    fn read_chunk(&mut self, number: u32, offset: u64, buf: &mut [u8]) -> Result<(), CopyError>;
}

/// A group file read through the service's file system (the file number
/// is the open file's).
pub struct ServedFile {
    pub file: File,
    pub shown_as: String,
}

impl ChunkSource for ServedFile {
    fn sector_bytes(&self) -> u64 {
        4096
    }

    fn read_chunk(&mut self, _number: u32, offset: u64, buf: &mut [u8]) -> Result<(), CopyError> {
        use std::os::unix::fs::FileExt;
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(CopyError::Source(format!(
                        "reading {}: {}",
                        self.shown_as,
                        describe_io(&e, "check the service's log")
                    )))
                }
            }
        }
        buf[done..].fill(0);
        Ok(())
    }
}

/// Takes a chunk of a file copied out: its offset, the chunk buffer (whole,
/// for padding past the data) and how many bytes of it are data.
type Sink<'s> = &'s mut dyn FnMut(u64, &mut [u8], usize) -> Result<(), CopyError>;

/// Read file `number` (of `size_bytes`) chunk by chunk and hand each to
/// `sink`: its offset, the chunk buffer (whole, for padding past the data)
/// and how many bytes of it are data.
fn for_each_chunk(
    group: &mut dyn ChunkSource,
    number: u32,
    size_bytes: u64,
    progress: Progress<'_>,
    sink: Sink<'_>,
) -> Result<(), CopyError> {
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    let mut at = 0u64;
    // A file's byte size may end inside a sector: the whole sector is read
    // (the rest of it is zeros), the bytes of the file handed on.
    let sector = group.sector_bytes();
    while at < size_bytes {
        let n = (size_bytes - at).min(COPY_CHUNK_BYTES as u64) as usize;
        let whole = (n as u64).next_multiple_of(sector) as usize;
        group.read_chunk(number, at, &mut buf[..whole])?;
        sink(at, &mut buf, n)?;
        at += n as u64;
        progress(at, Some(size_bytes));
    }
    Ok(())
}

/// A new file's contents before they get its name: an anonymous file
/// (`O_TMPFILE`, which a crash leaves nowhere) where the file system can,
/// else a private name beside it (`O_CREAT|O_EXCL`, which never follows a
/// link), removed when dropped uninstalled. Either way it is readable as a
/// new file would be (the umask applies), and a replaced file's permissions
/// are kept.
struct Temporary {
    file: File,
    dir: PathBuf,
    /// Its name, once it has one (from the start, without `O_TMPFILE`).
    named: Option<PathBuf>,
    installed: bool,
}

/// Attempts at a private name before giving up (each collides only with a
/// file created since the previous attempt).
const TEMPORARY_NAME_ATTEMPTS_MAX: u32 = 16;

impl Temporary {
    fn create(path: &Path) -> Result<Self, CopyError> {
        let dir = directory_of(path).to_path_buf();
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .mode(0o666)
            .open(&dir)
        {
            Ok(file) => {
                return Ok(Self {
                    file,
                    dir,
                    named: None,
                    installed: false,
                })
            }
            // Not supported by this file system (or kernel): a name then.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL)
                ) => {}
            Err(e) => return Err(cannot_create(&dir, &e)),
        }
        let (named, file) = create_named(path)?;
        Ok(Self {
            file,
            dir,
            named: Some(named),
            installed: false,
        })
    }

    fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Put the contents at `path`, replacing what is there, and make the
    /// directory entry durable.
    fn install(mut self, path: &Path) -> Result<(), CopyError> {
        let named = match &self.named {
            Some(named) => named.clone(),
            None => {
                let named = link_anonymous(&self.file, path)?;
                self.named = Some(named.clone());
                named
            }
        };
        // A file replaced keeps its permissions.
        if let Ok(m) = std::fs::metadata(path) {
            let _ = std::fs::set_permissions(&named, m.permissions());
        }
        // What resolve_destination saw must still be there: never replace a
        // device node or a link that appeared meanwhile.
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if !m.file_type().is_file() {
                return Err(CopyError::Destination(format!(
                    "{} is no longer a regular file (something replaced it during the copy); nothing was changed",
                    path.display()
                )));
            }
        }
        std::fs::rename(&named, path).map_err(|e| {
            CopyError::Destination(format!(
                "cannot rename {} to {}: {}",
                named.display(),
                path.display(),
                describe_io(&e, "check the directory")
            ))
        })?;
        self.installed = true;
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.installed {
            if let Some(named) = &self.named {
                let _ = std::fs::remove_file(named);
            }
        }
    }
}

/// Give an anonymous file a private name beside `path` (linkat through
/// /proc/self/fd, which needs no privilege); returns that name.
fn link_anonymous(file: &File, path: &Path) -> Result<PathBuf, CopyError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .expect("invariant: no NUL in a /proc path");
    let mut last = None;
    for n in 0..TEMPORARY_NAME_ATTEMPTS_MAX {
        let named = temporary_name(path, n);
        let to = std::ffi::CString::new(named.as_os_str().as_bytes()).map_err(|_| {
            CopyError::Destination(format!("{} has a NUL byte in its name", path.display()))
        })?;
        // SAFETY: both paths are NUL-terminated C strings that outlive the
        // call; AT_FDCWD makes them relative to the working directory.
        let rc = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if rc == 0 {
            return Ok(named);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(cannot_create(directory_of(&named), &e));
        }
        last = Some(e);
    }
    Err(CopyError::Destination(format!(
        "cannot name the copy beside {}: {}",
        path.display(),
        last.map_or_else(String::new, |e| e.to_string())
    )))
}

/// The directory `path` is in (`.` for a bare name).
fn directory_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `.NAME.cairn-partial-PID-N` beside `path`.
fn temporary_name(path: &Path, n: u32) -> PathBuf {
    let dir = directory_of(path);
    let name = path
        .file_name()
        .map_or_else(|| "copy".into(), |n| n.to_string_lossy().into_owned());
    dir.join(format!(".{name}.cairn-partial-{}-{n}", std::process::id()))
}

/// Create a private name beside `path` exclusively.
fn create_named(path: &Path) -> Result<(PathBuf, File), CopyError> {
    let mut last = None;
    for n in 0..TEMPORARY_NAME_ATTEMPTS_MAX {
        let tmp = temporary_name(path, n);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(cannot_create(directory_of(&tmp), &e));
            }
        }
    }
    Err(CopyError::Destination(format!(
        "cannot create a temporary file beside {}: {}",
        path.display(),
        last.map_or_else(String::new, |e| e.to_string())
    )))
}

fn cannot_create(dir: &Path, e: &std::io::Error) -> CopyError {
    CopyError::Destination(format!(
        "cannot create a file in {}: {}",
        dir.display(),
        describe_io(e, "check the directory's permissions and free space")
    ))
}

/// An OS error as the end of a one-line message: what it is, and `hint`.
fn describe_io(e: &std::io::Error, hint: &str) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("no such file or directory; {hint}"),
        std::io::ErrorKind::PermissionDenied => {
            "permission denied; run as a user who may use it".into()
        }
        _ => format!("{e}; {hint}"),
    }
}

/// Name a copied file `dest`, `size` bytes of whole sectors long. Its
/// length in bytes (a source that ends inside a sector reads back as long
/// as it was) is set first, while the file is nameless: it has it when its
/// name appears.
fn publish_copied(
    group: &mut Group<'_>,
    number: u32,
    dest: &GroupPath,
    copied: u64,
    size: u64,
) -> Result<FileInfo, GroupError> {
    if copied != size {
        group.set_byte_size(number, copied, now_ns(), false)?;
    }
    group.publish(number, dest, size)
}

/// Now, in nanoseconds since the epoch (a file's times).
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}
