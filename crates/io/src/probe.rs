//! What the kernel says about a block device or a regular file: `cairn device probe`.
//!
//! Probing opens read-only and never writes: every fact comes from ioctls that
//! read, sysfs, procfs, statfs and statx. Facts the kernel does not report are
//! said to be unknown rather than guessed — "do discarded blocks read back as
//! zeros?" has no kernel answer for most devices, and a storage engineer would
//! rather read "unknown" than a wrong "yes".

use std::fs::{self, File, Metadata};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::block_ioctl;
use crate::geometry::{sector_format, DiscardSupport, Geometry};
use crate::host::Host;
use crate::open_error::OpenError;

/// Largest request for a file whose filesystem sits on no block device Cairn can
/// see (tmpfs, btrfs's anonymous devices): 1 MiB, which every device takes whole.
const FILE_MAX_TRANSFER_DEFAULT_BYTES: u32 = 1 << 20;

/// Yes, no, or the kernel does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Knowledge {
    Yes,
    No,
    Unknown,
}

/// Everything probed about one device.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceProbe {
    /// The path as given.
    pub path: PathBuf,
    /// Symlinks resolved (`/dev/mapper/x` → `/dev/dm-3`).
    pub canonical_path: PathBuf,
    pub kind: DeviceKind,
    pub size_bytes: u64,
    pub logical_sector_bytes: u32,
    pub physical_sector_bytes: u32,
    /// `512n`, `512e`, `4Kn`.
    pub sector_format: String,
    /// Largest request the device receives whole, in bytes: `max_sectors_kb`,
    /// and no more than `max_segments` memory pages (see [`BlockProbe::max_transfer_bytes`]).
    pub max_transfer_bytes: u32,
    pub read_only: bool,
    /// Why it is read-only, when it is.
    pub read_only_reason: Option<String>,
    pub block: Option<BlockProbe>,
    pub file: Option<FileProbe>,
    pub in_use: InUse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    Block,
    File,
}

/// Block-device facts, mostly from `/sys/block/X/queue`.
#[derive(Debug, Clone, Serialize)]
pub struct BlockProbe {
    /// Kernel name (`sda`, `sda1`, `dm-3`, `loop0`).
    pub name: String,
    pub major: u32,
    pub minor: u32,
    /// Set when this is a partition.
    pub partition: Option<PartitionProbe>,
    /// Partitions of this device, by kernel name.
    pub partitions: Vec<String>,
    pub max_sectors_kb: Option<u32>,
    pub max_hw_sectors_kb: Option<u32>,
    /// Scatter-gather entries per request, and the largest entry.
    pub max_segments: Option<u32>,
    pub max_segment_size_bytes: Option<u32>,
    pub optimal_io_bytes: Option<u32>,
    pub minimum_io_bytes: Option<u32>,
    pub rotational: Option<bool>,
    pub write_cache: Option<String>,
    pub fua: Option<bool>,
    pub discard: DiscardProbe,
    pub write_zeroes_max_bytes: Option<u64>,
    /// Kernel 6.16+: non-zero when write-zeroes may unmap (thin-friendly zeroing).
    pub write_zeroes_unmap_max_bytes: Option<u64>,
    pub device_mapper: Option<DeviceMapperProbe>,
    /// Devices stacked on this one (`/sys/block/X/holders`).
    pub holders: Vec<String>,
    /// Devices this one is stacked on (`/sys/block/X/slaves`).
    pub slaves: Vec<String>,
    /// The multipath device this is a path of — the one to use instead.
    pub multipath_parent: Option<DeviceMapperProbe>,
    pub loop_backing_file: Option<PathBuf>,
    pub wwid: Option<String>,
    pub serial: Option<String>,
    pub model: Option<String>,
    pub vendor: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PartitionProbe {
    pub number: u32,
    /// Kernel name of the whole device.
    pub parent: String,
    pub start_sector: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DiscardProbe {
    pub supported: bool,
    pub granularity_bytes: Option<u32>,
    pub max_bytes: Option<u64>,
    /// Whether a discarded range reads back as zeros.
    pub reads_zeroes: Knowledge,
    pub reads_zeroes_reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceMapperProbe {
    /// Kernel name (`dm-3`).
    pub kernel_name: String,
    /// Mapper name (`mpatha`).
    pub name: Option<String>,
    pub uuid: Option<String>,
    /// `/dev/mapper/<name>`.
    pub mapper_path: Option<PathBuf>,
    /// dm-multipath (uuid `mpath-...`).
    pub multipath: bool,
}

/// Regular-file facts: the file as a thin LUN.
#[derive(Debug, Clone, Serialize)]
pub struct FileProbe {
    pub filesystem: String,
    pub filesystem_magic: String,
    pub fs_block_bytes: u64,
    /// Bytes the filesystem really holds for the file (what a thin array would).
    pub allocated_bytes: u64,
    pub direct_io: DirectIoProbe,
    pub punch_hole: Knowledge,
    pub punch_hole_reason: String,
    /// The block device under the filesystem, if it has one.
    pub backing_device: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DirectIoProbe {
    /// The filesystem accepts O_DIRECT opens.
    pub supported: bool,
    /// It really bypasses the page cache (tmpfs accepts O_DIRECT and copies anyway).
    pub honoured: bool,
    /// From statx STATX_DIOALIGN, where the filesystem reports it.
    pub offset_align_bytes: Option<u32>,
    pub memory_align_bytes: Option<u32>,
}

/// Who else is using the device.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InUse {
    /// Where it, or one of its partitions, is mounted.
    pub mounted_at: Vec<PathBuf>,
    /// It is an active swap area.
    pub swap: bool,
    /// Loop devices backed by this file.
    pub loop_devices: Vec<String>,
}

impl InUse {
    /// One line naming the users, or `None` if there are none.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.mounted_at.is_empty() {
            let points: Vec<String> = self
                .mounted_at
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            parts.push(format!("mounted at {}", points.join(", ")));
        }
        if self.swap {
            parts.push("an active swap area".to_string());
        }
        if !self.loop_devices.is_empty() {
            let loops: Vec<String> = self
                .loop_devices
                .iter()
                .map(|l| format!("/dev/{l}"))
                .collect();
            parts.push(format!("the backing file of {}", loops.join(", ")));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

impl DeviceProbe {
    /// Whether a read or write of it may block the thread that submits it
    /// to io_uring, however it is submitted: a FUSE file. FUSE files take
    /// non-blocking submissions (io_uring tries them in the submitting
    /// thread), and FUSE then waits there for the file's inode lock (held
    /// by any flush or extending write the daemon has not answered) or for
    /// room among its background requests — uninterruptibly, as long as
    /// the daemon takes. Block devices and local filesystems give up such
    /// a submission instead (EAGAIN), and io_uring hands it to a worker.
    pub fn submission_may_block(&self) -> bool {
        self.file.as_ref().is_some_and(|f| f.filesystem == FUSE)
    }

    /// The geometry the engines enforce for this device.
    pub fn geometry(&self) -> Geometry {
        let discard = match (&self.block, &self.file) {
            (Some(block), _) if block.discard.supported => DiscardSupport::Supported {
                granularity_bytes: block
                    .discard
                    .granularity_bytes
                    .unwrap_or(self.logical_sector_bytes),
                reads_zeroes: block.discard.reads_zeroes == Knowledge::Yes,
            },
            (_, Some(file)) if file.punch_hole == Knowledge::Yes => DiscardSupport::Supported {
                granularity_bytes: u32::try_from(file.fs_block_bytes).unwrap_or(4096),
                reads_zeroes: true,
            },
            _ => DiscardSupport::Unsupported,
        };
        Geometry {
            size_bytes: self.size_bytes,
            logical_sector_bytes: self.logical_sector_bytes,
            physical_sector_bytes: self.physical_sector_bytes,
            max_transfer_bytes: self.max_transfer_bytes,
            discard,
            rotational: self.block.as_ref().and_then(|b| b.rotational),
        }
    }

    /// Same device or file (device number, or inode), whatever the path.
    pub fn same_object(&self, meta: &Metadata) -> bool {
        match (&self.block, self.kind) {
            (Some(b), DeviceKind::Block) => {
                meta.file_type().is_block_device()
                    && libc::major(meta.rdev()) == b.major
                    && libc::minor(meta.rdev()) == b.minor
            }
            _ => meta.is_file() && self.identity_inode() == Some((meta.dev(), meta.ino())),
        }
    }

    fn identity_inode(&self) -> Option<(u64, u64)> {
        let meta = fs::metadata(&self.canonical_path).ok()?;
        Some((meta.dev(), meta.ino()))
    }
}

fn map_open_error(path: &Path, err: io::Error, write: bool) -> OpenError {
    match err.kind() {
        io::ErrorKind::NotFound => OpenError::NotFound { path: path.into() },
        io::ErrorKind::PermissionDenied => OpenError::PermissionDenied {
            path: path.into(),
            write,
        },
        _ => OpenError::Os {
            path: path.into(),
            action: "open",
            error: err,
        },
    }
}

/// Metadata for a path that must be a block device or a regular file.
pub(crate) fn device_metadata(path: &Path) -> Result<Metadata, OpenError> {
    let meta = fs::metadata(path).map_err(|e| map_open_error(path, e, false))?;
    let ft = meta.file_type();
    if ft.is_dir() {
        return Err(OpenError::IsDirectory { path: path.into() });
    }
    if !(ft.is_block_device() || ft.is_file()) {
        let what = if ft.is_char_device() {
            "character device"
        } else if ft.is_fifo() {
            "FIFO"
        } else if ft.is_socket() {
            "socket"
        } else {
            "special file"
        };
        return Err(OpenError::NotADevice {
            path: path.into(),
            what,
        });
    }
    Ok(meta)
}

/// Probe a block device or file. Opens it read-only; never writes.
pub fn probe(path: &Path, host: &Host) -> Result<DeviceProbe, OpenError> {
    device_metadata(path)?;
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| map_open_error(path, e, false))?;
    probe_open(path, &file, host)
}

/// Probe through an already open descriptor (so the facts are of the object
/// opened, not of whatever the path names a moment later).
pub fn probe_open(path: &Path, file: &File, host: &Host) -> Result<DeviceProbe, OpenError> {
    let meta = file.metadata().map_err(|e| OpenError::Os {
        path: path.into(),
        action: "stat",
        error: e,
    })?;
    let canonical_path = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if meta.file_type().is_block_device() {
        probe_block(path, canonical_path, file, &meta, host)
    } else {
        probe_file(path, canonical_path, file, &meta, host)
    }
}

fn os_error<'a>(path: &'a Path, action: &'static str) -> impl Fn(io::Error) -> OpenError + 'a {
    move |error| OpenError::Os {
        path: path.into(),
        action,
        error,
    }
}

fn probe_block(
    path: &Path,
    canonical_path: PathBuf,
    file: &File,
    meta: &Metadata,
    host: &Host,
) -> Result<DeviceProbe, OpenError> {
    let fd = file;
    let size_bytes = block_ioctl::size_bytes(fd).map_err(os_error(path, "BLKGETSIZE64"))?;
    let logical_sector_bytes =
        block_ioctl::logical_sector_bytes(fd).map_err(os_error(path, "BLKSSZGET"))?;
    let physical_sector_bytes =
        block_ioctl::physical_sector_bytes(fd).map_err(os_error(path, "BLKPBSZGET"))?;
    let read_only = block_ioctl::read_only(fd).map_err(os_error(path, "BLKROGET"))?;
    let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    let block = block_facts(host, major, minor);
    let max_transfer_bytes = block.max_transfer_bytes().max(logical_sector_bytes);

    let mut in_use = InUse::default();
    let mut ours = vec![(major, minor)];
    for part in &block.partitions {
        if let Some((ma, mi)) = host
            .block_dir_by_name(part)
            .and_then(|d| Host::attr(&d.join("dev")))
            .and_then(|dev| parse_dev_pair(&dev))
        {
            ours.push((ma, mi));
        }
    }
    // mountinfo's device number is anonymous for btrfs (0:NN), so also follow
    // the mount source back to its device.
    let source_is_ours = |source: &str| {
        fs::metadata(source).is_ok_and(|m| {
            m.file_type().is_block_device()
                && ours.contains(&(libc::major(m.rdev()), libc::minor(m.rdev())))
        })
    };
    in_use.mounted_at = host
        .mounts()
        .into_iter()
        .filter(|m| ours.contains(&(m.major, m.minor)) || source_is_ours(&m.source))
        .map(|m| m.mount_point)
        .collect();
    in_use.swap = host.swaps().iter().any(|swap| {
        fs::metadata(swap).is_ok_and(|m| m.file_type().is_block_device() && m.rdev() == meta.rdev())
    });

    Ok(DeviceProbe {
        path: path.into(),
        canonical_path,
        kind: DeviceKind::Block,
        size_bytes,
        logical_sector_bytes,
        physical_sector_bytes,
        sector_format: sector_format(logical_sector_bytes, physical_sector_bytes),
        max_transfer_bytes,
        read_only,
        read_only_reason: read_only
            .then(|| "the kernel marks the device read-only (BLKROGET)".to_string()),
        block: Some(block),
        file: None,
        in_use,
    })
}

fn parse_dev_pair(text: &str) -> Option<(u32, u32)> {
    let (a, b) = text.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A holder as a person knows it: `dm-1 (vg-lv)`, `md0`.
pub fn holder_name(host: &Host, kernel_name: &str) -> String {
    match dm_facts(host, kernel_name).and_then(|dm| dm.name) {
        Some(name) => format!("{kernel_name} ({name})"),
        None => kernel_name.to_string(),
    }
}

fn dm_facts(host: &Host, kernel_name: &str) -> Option<DeviceMapperProbe> {
    let dir = host.block_dir_by_name(kernel_name)?.join("dm");
    if !dir.is_dir() {
        return None;
    }
    let name = Host::attr(&dir.join("name"));
    let uuid = Host::attr(&dir.join("uuid"));
    Some(DeviceMapperProbe {
        kernel_name: kernel_name.to_string(),
        mapper_path: name.as_ref().map(|n| PathBuf::from("/dev/mapper").join(n)),
        multipath: uuid.as_deref().is_some_and(|u| u.starts_with("mpath-")),
        name,
        uuid,
    })
}

impl BlockProbe {
    /// The largest request this device receives whole: `max_sectors_kb`, and at
    /// most `max_segments` scatter-gather entries. Cairn's buffers are ordinary
    /// memory whose pages need not be physically adjacent, so each page may be
    /// its own entry: a loop device (128 segments) takes 512 KiB whole though its
    /// `max_sectors_kb` is 1280, and the kernel would split anything larger.
    /// Splitting to this size ourselves keeps the requests the device sees the
    /// ones Cairn chose.
    pub fn max_transfer_bytes(&self) -> u32 {
        let by_sectors = self
            .max_sectors_kb
            .map(|kb| kb.saturating_mul(1024))
            .unwrap_or(FILE_MAX_TRANSFER_DEFAULT_BYTES);
        let page = page_bytes();
        let by_segments = self.max_segments.map(|segments| {
            let per_segment = self
                .max_segment_size_bytes
                .unwrap_or(page)
                .min(page)
                .max(512);
            segments.saturating_mul(per_segment)
        });
        by_segments.map_or(by_sectors, |s| s.min(by_sectors))
    }
}

fn page_bytes() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(page)
        .ok()
        .filter(|p| *p >= 512)
        .unwrap_or(4096)
}

/// Facts from sysfs for the block device `major:minor`. Everything is optional:
/// a missing sysfs (some containers) yields a probe with only the ioctl facts.
pub fn block_facts(host: &Host, major: u32, minor: u32) -> BlockProbe {
    let dir = host.block_dir(major, minor);
    let name = dir
        .as_ref()
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| format!("{major}:{minor}"));
    let partition = dir
        .as_deref()
        .filter(|d| d.join("partition").exists())
        .map(partition_of);
    // Partitions share the whole device's queue and identity.
    let whole = match (&dir, &partition) {
        (Some(d), Some(_)) => d.parent().map(Path::to_path_buf),
        (Some(d), None) => Some(d.clone()),
        _ => None,
    };
    let attr = |rel: &str| whole.as_ref().and_then(|w| Host::attr(&w.join(rel)));
    let attr_u64 = |rel: &str| whole.as_ref().and_then(|w| Host::attr_u64(&w.join(rel)));
    let own_list = |rel: &str| {
        dir.as_ref()
            .map(|d| Host::list(&d.join(rel)))
            .unwrap_or_default()
    };

    let partitions = match (&dir, &partition) {
        (Some(d), None) => Host::list(d)
            .into_iter()
            .filter(|child| d.join(child).join("partition").exists())
            .collect(),
        _ => Vec::new(),
    };
    let holders = own_list("holders");
    let slaves = own_list("slaves");
    let device_mapper = dm_facts(host, &name);
    let multipath_parent = holders
        .iter()
        .filter_map(|h| dm_facts(host, h))
        .find(|dm| dm.multipath);
    let loop_backing_file = dir
        .as_ref()
        .and_then(|d| Host::attr(&d.join("loop/backing_file")))
        .map(PathBuf::from);

    let discard = discard_facts(
        attr_u64("queue/discard_granularity"),
        attr_u64("queue/discard_max_bytes"),
        loop_backing_file.is_some(),
        &name,
    );
    let wwid = attr("device/wwid").or_else(|| attr("wwid")).or_else(|| {
        device_mapper
            .as_ref()
            .filter(|dm| dm.multipath)
            .and_then(|dm| dm.uuid.as_deref())
            .map(|u| u.trim_start_matches("mpath-").to_string())
    });

    BlockProbe {
        partition,
        partitions,
        max_sectors_kb: attr_u64("queue/max_sectors_kb").map(|v| v as u32),
        max_hw_sectors_kb: attr_u64("queue/max_hw_sectors_kb").map(|v| v as u32),
        max_segments: attr_u64("queue/max_segments").map(|v| v as u32),
        max_segment_size_bytes: attr_u64("queue/max_segment_size")
            .map(|v| v.min(u64::from(u32::MAX)) as u32),
        optimal_io_bytes: attr_u64("queue/optimal_io_size").map(|v| v as u32),
        minimum_io_bytes: attr_u64("queue/minimum_io_size").map(|v| v as u32),
        rotational: attr_u64("queue/rotational").map(|v| v != 0),
        write_cache: attr("queue/write_cache"),
        fua: attr_u64("queue/fua").map(|v| v != 0),
        discard,
        write_zeroes_max_bytes: attr_u64("queue/write_zeroes_max_bytes"),
        write_zeroes_unmap_max_bytes: attr_u64("queue/write_zeroes_unmap_max_bytes"),
        device_mapper,
        holders,
        slaves,
        multipath_parent,
        loop_backing_file,
        wwid,
        serial: attr("device/serial").or_else(|| attr("serial")),
        model: attr("device/model"),
        vendor: attr("device/vendor"),
        name,
        major,
        minor,
    }
}

/// The partition whose sysfs directory is `dir`: its number, its whole
/// device, where it starts.
fn partition_of(dir: &Path) -> PartitionProbe {
    PartitionProbe {
        number: Host::attr_u64(&dir.join("partition")).unwrap_or(0) as u32,
        parent: dir
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        start_sector: Host::attr_u64(&dir.join("start")),
    }
}

/// Discard as the device's queue reports it (`granularity`, `max_bytes`),
/// and whether a discarded range reads back as zeros: known for a loop
/// device (`on_loop`) and zram (by `name`); of others the kernel does not
/// say.
fn discard_facts(
    granularity: Option<u64>,
    max_bytes: Option<u64>,
    on_loop: bool,
    name: &str,
) -> DiscardProbe {
    let granularity = granularity.map(|g| g as u32);
    let discard_supported = max_bytes.is_some_and(|m| m > 0);
    let (reads_zeroes, reads_zeroes_reason) = if !discard_supported {
        (
            Knowledge::No,
            "the device does not accept discard".to_string(),
        )
    } else if on_loop {
        (
            Knowledge::Yes,
            "a loop device punches a hole in its backing file".to_string(),
        )
    } else if name.starts_with("zram") {
        (Knowledge::Yes, "zram frees discarded pages".to_string())
    } else {
        (
            Knowledge::Unknown,
            "the kernel does not report it (discard_zeroes_data is retired); Cairn uses write-zeroes where it needs zeros"
                .to_string(),
        )
    };
    DiscardProbe {
        supported: discard_supported,
        granularity_bytes: granularity.filter(|_| discard_supported),
        max_bytes,
        reads_zeroes,
        reads_zeroes_reason,
    }
}

/// FUSE's name in [`FILESYSTEMS`].
const FUSE: &str = "fuse";

/// Filesystem names by statfs magic, and whether each punches holes.
const FILESYSTEMS: &[(i64, &str, Knowledge)] = &[
    (0xEF53, "ext4", Knowledge::Yes),
    (0x5846_5342, "xfs", Knowledge::Yes),
    (0x9123_683E, "btrfs", Knowledge::Yes),
    (0x0102_1994, "tmpfs", Knowledge::Yes),
    (0xF2F5_2010, "f2fs", Knowledge::Yes),
    (0x2FC1_2FC1, "zfs", Knowledge::Yes),
    (0x7461_636f, "ocfs2", Knowledge::Yes),
    (0x0116_1970, "gfs2", Knowledge::Yes),
    (0x794C_7630, "overlayfs", Knowledge::Unknown),
    (0x6969, "nfs", Knowledge::Unknown),
    (0x6573_5546, FUSE, Knowledge::Unknown),
    (0x8584_58f6, "ramfs", Knowledge::No),
    (0x4d44, "vfat", Knowledge::No),
];

fn statx_dio(file: &File) -> (Option<u32>, Option<u32>) {
    use rustix::fs::{statx, AtFlags, StatxFlags};
    match statx(file, c"", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN) {
        Ok(stx)
            if stx.stx_mask & StatxFlags::DIOALIGN.bits() != 0 && stx.stx_dio_offset_align != 0 =>
        {
            (Some(stx.stx_dio_offset_align), Some(stx.stx_dio_mem_align))
        }
        _ => (None, None),
    }
}

fn probe_file(
    path: &Path,
    canonical_path: PathBuf,
    file: &File,
    meta: &Metadata,
    host: &Host,
) -> Result<DeviceProbe, OpenError> {
    let sfs = rustix::fs::fstatfs(file).map_err(|e| OpenError::Os {
        path: path.into(),
        action: "statfs",
        error: e.into(),
    })?;
    let magic = sfs.f_type as i64;
    let (filesystem, punch_hole, punch_hole_reason) = filesystem_of(magic);
    let (direct_io, offset_align) = direct_io_of(path, file, filesystem == "tmpfs");
    let sectors = file_sectors(host, meta, offset_align);
    let read_only_reason = file_read_only_reason(file, meta);
    let in_use = file_in_use(host, meta);

    Ok(DeviceProbe {
        path: path.into(),
        canonical_path,
        kind: DeviceKind::File,
        size_bytes: meta.len(),
        logical_sector_bytes: sectors.logical_sector_bytes,
        physical_sector_bytes: sectors.physical_sector_bytes,
        sector_format: sector_format(sectors.logical_sector_bytes, sectors.physical_sector_bytes),
        max_transfer_bytes: sectors.max_transfer_bytes,
        read_only: read_only_reason.is_some(),
        read_only_reason,
        block: None,
        file: Some(FileProbe {
            filesystem,
            filesystem_magic: format!("{magic:#x}"),
            fs_block_bytes: meta.blksize(),
            allocated_bytes: meta.blocks() * 512,
            direct_io,
            punch_hole,
            punch_hole_reason,
            backing_device: sectors.backing.map(|b| b.name),
        }),
        in_use,
    })
}

/// The filesystem of statfs magic `magic` ([`FILESYSTEMS`]), whether it
/// punches holes, and why that is said.
fn filesystem_of(magic: i64) -> (String, Knowledge, String) {
    let (filesystem, punch_hole) = FILESYSTEMS
        .iter()
        .find(|(m, _, _)| *m == magic)
        .map(|(_, name, punch)| (name.to_string(), *punch))
        .unwrap_or_else(|| (format!("unknown ({magic:#x})"), Knowledge::Unknown));
    let punch_hole_reason = match punch_hole {
        Knowledge::Yes => format!("{filesystem} supports FALLOC_FL_PUNCH_HOLE"),
        Knowledge::No => format!("{filesystem} does not support FALLOC_FL_PUNCH_HOLE"),
        Knowledge::Unknown => format!("{filesystem}: depends on the server or lower filesystem; not tested, probing never writes"),
    };
    (filesystem, punch_hole, punch_hole_reason)
}

/// Whether the file at `path` opens with O_DIRECT (and, unless on
/// `tmpfs`, bypasses the page cache), with the alignment statx reports;
/// and that offset alignment.
fn direct_io_of(path: &Path, file: &File, tmpfs: bool) -> (DirectIoProbe, Option<u32>) {
    let direct_open = File::options()
        .read(true)
        .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
        .open(path);
    let (offset_align, memory_align) = statx_dio(file);
    let direct_io = DirectIoProbe {
        supported: direct_open.is_ok(),
        honoured: direct_open.is_ok() && !tmpfs,
        offset_align_bytes: offset_align,
        memory_align_bytes: memory_align,
    };
    (direct_io, offset_align)
}

/// A file's sectors and largest transfer, from the block device under its
/// filesystem where there is one.
struct FileSectors {
    /// The block device under the filesystem (not tmpfs's, not btrfs's
    /// anonymous devices).
    backing: Option<BlockProbe>,
    logical_sector_bytes: u32,
    physical_sector_bytes: u32,
    max_transfer_bytes: u32,
}

/// The sectors of the file `meta` describes: its direct-I/O offset
/// alignment (`offset_align`) or its backing device's logical block, that
/// device's physical block or the file's block size, and the device's
/// largest transfer.
fn file_sectors(host: &Host, meta: &Metadata, offset_align: Option<u32>) -> FileSectors {
    // The block device under the filesystem, when there is one (not tmpfs, not btrfs's anonymous devices).
    let (fs_major, fs_minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
    let backing = (fs_major != 0)
        .then(|| host.block_dir(fs_major, fs_minor))
        .flatten()
        .map(|_| block_facts(host, fs_major, fs_minor));
    let backing_queue = |attr: &str| {
        backing.as_ref().and_then(|b| {
            let dir =
                host.block_dir_by_name(b.partition.as_ref().map_or(&b.name, |p| &p.parent))?;
            Host::attr_u64(&dir.join("queue").join(attr))
        })
    };
    let logical_sector_bytes = offset_align
        .or_else(|| backing_queue("logical_block_size").map(|v| v as u32))
        .unwrap_or(512);
    let physical_sector_bytes = backing_queue("physical_block_size")
        .map(|v| v as u32)
        .unwrap_or(meta.blksize() as u32)
        .max(logical_sector_bytes);
    let max_transfer_bytes = backing
        .as_ref()
        .map(BlockProbe::max_transfer_bytes)
        .unwrap_or(FILE_MAX_TRANSFER_DEFAULT_BYTES)
        .max(logical_sector_bytes);
    FileSectors {
        backing,
        logical_sector_bytes,
        physical_sector_bytes,
        max_transfer_bytes,
    }
}

/// Why the file cannot be written, if it cannot: a read-only mount, or no
/// write bit in its mode.
fn file_read_only_reason(file: &File, meta: &Metadata) -> Option<String> {
    let readonly_mount = rustix::fs::fstatvfs(file)
        .is_ok_and(|svfs| svfs.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY));
    let no_write_bits = meta.mode() & 0o222 == 0;
    if readonly_mount {
        Some("its filesystem is mounted read-only".to_string())
    } else if no_write_bits {
        Some(format!(
            "its mode is {:04o}, with no write permission",
            meta.mode() & 0o7777
        ))
    } else {
        None
    }
}

/// Who else uses the file `meta` describes: loop devices over it, swap.
fn file_in_use(host: &Host, meta: &Metadata) -> InUse {
    let loop_devices = host
        .loop_devices()
        .into_iter()
        .filter(|(_, backing_file)| {
            fs::metadata(backing_file).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
        })
        .map(|(name, _)| name)
        .collect();
    InUse {
        swap: host.swaps().iter().any(|swap| {
            fs::metadata(swap)
                .is_ok_and(|m| m.is_file() && m.dev() == meta.dev() && m.ino() == meta.ino())
        }),
        loop_devices,
        ..InUse::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn sparse_file_probe() {
        let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
        let path = dir.path().join("disk.img");
        let f = File::create(&path).unwrap();
        f.set_len(64 << 20).unwrap();
        let p = probe(&path, &Host::real()).unwrap();
        assert_eq!(p.kind, DeviceKind::File);
        assert_eq!(p.size_bytes, 64 << 20);
        let file = p.file.as_ref().unwrap();
        assert_eq!(file.allocated_bytes, 0, "a new sparse file holds nothing");
        assert!(p.logical_sector_bytes.is_power_of_two() && p.logical_sector_bytes >= 512);
        assert!(!p.read_only);
        assert!(p.in_use.describe().is_none());
    }

    #[test]
    fn allocation_is_reported() {
        let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
        let path = dir.path().join("disk.img");
        let mut f = File::create(&path).unwrap();
        f.set_len(8 << 20).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        let p = probe(&path, &Host::real()).unwrap();
        assert!(p.file.unwrap().allocated_bytes >= 1 << 20);
    }

    #[test]
    fn read_only_mode_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ro.img");
        File::create(&path).unwrap().set_len(4 << 20).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
        let p = probe(&path, &Host::real()).unwrap();
        assert!(p.read_only);
        assert!(p.read_only_reason.unwrap().contains("0444"));
    }

    #[test]
    fn a_path_of_a_multipath_device_names_its_parent() {
        let (_root, host) = crate::test_support::sysfs_fixture::multipath();
        let sdb = block_facts(&host, 8, 16);
        assert_eq!(sdb.name, "sdb");
        assert_eq!(sdb.holders, vec!["dm-0"]);
        let parent = sdb.multipath_parent.expect("sdb is a multipath path");
        assert_eq!(parent.name.as_deref(), Some("mpatha"));
        assert_eq!(
            parent.mapper_path,
            Some(PathBuf::from("/dev/mapper/mpatha"))
        );
        assert_eq!(sdb.max_sectors_kb, Some(512));
        assert_eq!(sdb.wwid.as_deref(), Some("naa.600a0b80001"));

        let mpath = block_facts(&host, 253, 0);
        let dm = mpath.device_mapper.expect("dm-0 is device-mapper");
        assert!(dm.multipath);
        assert_eq!(mpath.slaves, vec!["sdb", "sdc"]);
        assert_eq!(mpath.wwid.as_deref(), Some("3600a0b80001"));

        let sdd = block_facts(&host, 8, 48);
        assert_eq!(sdd.holders, vec!["dm-1"]);
        assert!(
            sdd.multipath_parent.is_none(),
            "an LVM holder is not multipath"
        );
    }

    #[test]
    fn wrong_kinds_of_path() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            probe(dir.path(), &Host::real()),
            Err(OpenError::IsDirectory { .. })
        ));
        assert!(matches!(
            probe(&dir.path().join("missing"), &Host::real()),
            Err(OpenError::NotFound { .. })
        ));
        assert!(matches!(
            probe(Path::new("/dev/null"), &Host::real()),
            Err(OpenError::NotADevice {
                what: "character device",
                ..
            })
        ));
    }
}
