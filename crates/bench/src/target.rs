//! Opening the sds: the safety rules of a tool that writes wherever it is told.
//!
//! - A plan that writes opens every target exclusively and refuses one that is
//!   in use (mounted, held by LVM/md/device-mapper, a swap area) and — unless
//!   `--force` — one that carries a Cairn label, an Oracle ASM header, a
//!   filesystem, LVM, md, a partition table or any other owner's signature
//!   (the same judgement `cairn disk label` makes, in `cairn_store::admin`).
//! - A plan that only reads opens shared and read-only: reading harms nothing.
//! - A file that does not exist is created at its `size=`, sparse; if the plan
//!   reads, it is first filled with data, because reading a hole measures the
//!   filesystem's zero page rather than the storage. Paths under `/dev/` are
//!   never created: a missing device is a typo, not a request.
//! - Two sds naming the same lun share one open (a block device can be claimed
//!   exclusively only once).

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::PathBuf;

use cairn_io::host::Host;
use cairn_io::probe::DeviceKind;
use cairn_io::uring_engine::UringEngine;
use cairn_io::{AlignedBuf, DeviceFile, FileEngine, Op, OpenMode, Request};

use crate::model::{Band, Bound, Plan, SdDef};
use crate::pattern::DataPattern;
use crate::result::TargetInfo;

/// An sd, open, with the byte range its workloads use.
#[derive(Debug)]
pub struct Target {
    pub sd: SdDef,
    pub device: DeviceFile,
    /// Workload addresses run over `[start_bytes, end_bytes)` of the sd; the
    /// sd's `offset=` is added when the I/O is issued.
    pub start_bytes: u64,
    pub end_bytes: u64,
    pub created: bool,
}

impl Target {
    pub fn sector_bytes(&self) -> u64 {
        u64::from(self.device.geometry().logical_sector_bytes)
    }

    /// What the result records of this target; `devices` is left for the
    /// caller, who knows the host's block devices.
    pub fn info(&self) -> TargetInfo {
        let mut info = target_info(
            &self.sd.name,
            &self.device,
            self.start_bytes + self.sd.offset_bytes,
            self.end_bytes + self.sd.offset_bytes,
            self.created,
        );
        info.path = self.sd.lun.display().to_string();
        info
    }
}

/// What a result records of an open device or file used over bytes
/// `[start, end)`, named `name`: its kind, size and geometry. `devices` (the
/// kernel devices under it) is left empty for the caller to fill.
pub fn target_info(
    name: &str,
    device: &DeviceFile,
    start_bytes: u64,
    end_bytes: u64,
    created: bool,
) -> TargetInfo {
    let probe = device.probe();
    let geometry = device.geometry();
    let block = probe.block.as_ref();
    TargetInfo {
        sd: name.to_string(),
        path: device.path().display().to_string(),
        kind: match probe.kind {
            DeviceKind::Block => "block".into(),
            DeviceKind::File => "file".into(),
        },
        size_bytes: geometry.size_bytes,
        start_bytes,
        end_bytes,
        logical_sector_bytes: geometry.logical_sector_bytes,
        physical_sector_bytes: geometry.physical_sector_bytes,
        sector_format: geometry.sector_format(),
        max_transfer_bytes: geometry.max_transfer_bytes,
        optimal_io_bytes: block.and_then(|b| b.optimal_io_bytes).unwrap_or(0),
        rotational: block.and_then(|b| b.rotational),
        discard: !matches!(
            geometry.discard,
            cairn_io::geometry::DiscardSupport::Unsupported
        ),
        devices: Vec::new(),
        created,
    }
}

/// Why a target could not be used. One line each: what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("sd={sd}: {} does not exist, and paths under /dev are never created; check the lun= (--target) path", path.display())]
    NoSuchDevice { sd: String, path: PathBuf },
    #[error("sd={sd}: {} does not exist; give size= (--size) so Cairn can create it", path.display())]
    NoSizeToCreate { sd: String, path: PathBuf },
    #[error("sd={sd}: cannot create {}: {error}; check the directory exists and is writable", path.display())]
    Create {
        sd: String,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("sd={sd}: filling the new file {} failed: {error}; it was removed — free some space or give a smaller size=", path.display())]
    Fill {
        sd: String,
        path: PathBuf,
        error: String,
    },
    #[error("sd={sd}: {error}")]
    Open {
        sd: String,
        error: cairn_store::admin::AdminError,
    },
    #[error("sd={sd}: {}: size={size_bytes} is larger than the {device_bytes} bytes there; give a smaller size= or omit it", path.display())]
    TooSmall {
        sd: String,
        path: PathBuf,
        size_bytes: u64,
        device_bytes: u64,
    },
    #[error("sd={sd}: {what} {value} is not a multiple of the {sector}-byte logical sector of {}; direct I/O needs sector alignment", path.display())]
    Misaligned {
        sd: String,
        path: PathBuf,
        what: &'static str,
        value: u64,
        sector: u64,
    },
    #[error("sd={sd}: {message}")]
    Range { sd: String, message: String },
}

/// How targets are opened.
pub struct TargetOptions<'a> {
    pub host: &'a Host,
    /// Overwrite a target that carries someone's data.
    pub force: bool,
    /// Called while a new file is filled: (bytes done, bytes total); returning
    /// false stops the fill (interrupted), and the new file is removed.
    pub fill_progress: &'a mut dyn FnMut(u64, u64) -> bool,
}

/// Close the targets and remove the files this run created: for a run
/// refused before any I/O, which must leave nothing behind.
pub fn close_and_remove_created(targets: Vec<Target>) {
    let created: Vec<PathBuf> = targets
        .iter()
        .filter(|t| t.created)
        .map(|t| t.sd.lun.clone())
        .collect();
    drop(targets);
    for path in created {
        std::fs::remove_file(path).ok();
    }
}

/// Open every sd of the plan.
pub fn open_targets(
    plan: &Plan,
    options: &mut TargetOptions<'_>,
) -> Result<Vec<Target>, TargetError> {
    let writes = plan.writes();
    let reads = plan_reads(plan);
    let mut created_files: Vec<PathBuf> = Vec::new();
    let outcome = open_all(plan, options, writes, reads, &mut created_files);
    if outcome.is_err() {
        // Leave nothing behind that this call made.
        for path in &created_files {
            std::fs::remove_file(path).ok();
        }
    }
    outcome
}

fn open_all(
    plan: &Plan,
    options: &mut TargetOptions<'_>,
    writes: bool,
    reads: bool,
    created_files: &mut Vec<PathBuf>,
) -> Result<Vec<Target>, TargetError> {
    let mut opened: BTreeMap<PathBuf, usize> = BTreeMap::new();
    let mut targets: Vec<Target> = Vec::new();
    for sd in &plan.sds {
        // A file made for an earlier sd already exists by now, so two sds
        // naming one new file share it.
        let newly = create_if_missing(sd, reads, options)?;
        if newly {
            created_files.push(sd.lun.clone());
        }
        let key = std::fs::canonicalize(&sd.lun).unwrap_or_else(|_| sd.lun.clone());
        let (device, created) = if let Some(&i) = opened.get(&key) {
            let device = targets[i]
                .device
                .try_clone()
                .map_err(|error| TargetError::Create {
                    sd: sd.name.clone(),
                    path: sd.lun.clone(),
                    error,
                })?;
            (device, false)
        } else {
            let created = newly;
            let device = if writes || created {
                cairn_store::admin::open_for_overwrite(
                    options.host,
                    &sd.lun,
                    options.force || created,
                )
            } else {
                DeviceFile::open(&sd.lun, OpenMode::READ, options.host)
                    .map_err(cairn_store::admin::AdminError::Open)
            }
            .map_err(|error| TargetError::Open {
                sd: sd.name.clone(),
                error,
            });
            let device = device?;
            opened.insert(key, targets.len());
            (device, created)
        };
        let mut target = bounds(sd, device)?;
        target.created = created;
        if created && reads {
            if let Err(error) = fill(&mut target, options.fill_progress) {
                return Err(TargetError::Fill {
                    sd: sd.name.clone(),
                    path: sd.lun.clone(),
                    error,
                });
            }
        }
        targets.push(target);
    }
    Ok(targets)
}

fn plan_reads(plan: &Plan) -> bool {
    plan.runs.iter().any(|run| {
        run.wds
            .iter()
            .filter_map(|w| plan.wd(w))
            .any(|wd| run.rdpct.unwrap_or(wd.rdpct) > 0.0)
    })
}

/// Create a missing file target (sparse, at its size). Returns whether it did.
fn create_if_missing(
    sd: &SdDef,
    _reads: bool,
    _options: &mut TargetOptions<'_>,
) -> Result<bool, TargetError> {
    let path = &sd.lun;
    if path.exists() || std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    // Judge where the file would really land: `/tmp/../dev/sdx` or a symlinked
    // directory must not slip a regular file into /dev.
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let real_parent = std::fs::canonicalize(&parent).map_err(|error| TargetError::Create {
        sd: sd.name.clone(),
        path: path.clone(),
        error,
    })?;
    if path.starts_with("/dev") || real_parent.starts_with("/dev") {
        return Err(TargetError::NoSuchDevice {
            sd: sd.name.clone(),
            path: path.clone(),
        });
    }
    let Some(size) = sd.size_bytes else {
        return Err(TargetError::NoSizeToCreate {
            sd: sd.name.clone(),
            path: path.clone(),
        });
    };
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|error| TargetError::Create {
            sd: sd.name.clone(),
            path: path.clone(),
            error,
        })?;
    if let Err(error) = file.set_len(size) {
        std::fs::remove_file(path).ok();
        return Err(TargetError::Create {
            sd: sd.name.clone(),
            path: path.clone(),
            error,
        });
    }
    Ok(true)
}

/// The byte range the sd's workloads use.
fn bounds(sd: &SdDef, device: DeviceFile) -> Result<Target, TargetError> {
    let geometry = device.geometry().clone();
    let sector = u64::from(geometry.logical_sector_bytes);
    let misaligned = |what, value| TargetError::Misaligned {
        sd: sd.name.clone(),
        path: sd.lun.clone(),
        what,
        value,
        sector,
    };
    if !sd.offset_bytes.is_multiple_of(sector) {
        return Err(misaligned("offset=", sd.offset_bytes));
    }
    if let Some(align) = sd.align_bytes {
        if align == 0 || !align.is_multiple_of(sector) {
            return Err(misaligned("align=", align));
        }
    }
    let available = geometry.size_bytes.saturating_sub(sd.offset_bytes) / sector * sector;
    let size = match sd.size_bytes {
        Some(size) if size > geometry.size_bytes => {
            return Err(TargetError::TooSmall {
                sd: sd.name.clone(),
                path: sd.lun.clone(),
                size_bytes: size,
                device_bytes: geometry.size_bytes,
            })
        }
        Some(size) => (size / sector * sector).min(available),
        None => available,
    };
    let (start, end) = match &sd.range {
        Some(band) => {
            let (s, e) =
                resolve_band(band, size, sector).map_err(|message| TargetError::Range {
                    sd: sd.name.clone(),
                    message: format!("range=: {message}"),
                })?;
            if e > size {
                return Err(TargetError::Range {
                    sd: sd.name.clone(),
                    message: "range= may not wrap past the end of an sd (only hotband= may)".into(),
                });
            }
            (s, e)
        }
        None => (0, size),
    };
    if end <= start {
        return Err(TargetError::Range {
            sd: sd.name.clone(),
            message: format!(
                "the usable part of {} is empty (size {size} bytes); check size=, range= and offset=",
                sd.lun.display()
            ),
        });
    }
    Ok(Target {
        sd: sd.clone(),
        device,
        start_bytes: start,
        end_bytes: end,
        created: false,
    })
}

/// A band of a region `len` bytes long, as byte offsets rounded to whole
/// sectors. The end may exceed `len` (up to twice it) for a band that wraps.
pub fn resolve_band(band: &Band, len: u64, sector: u64) -> Result<(u64, u64), String> {
    let at = |b: &Bound| -> Result<u64, String> {
        match *b {
            Bound::Percent(p) if (0.0..=200.0).contains(&p) => {
                Ok(((len as f64 * p / 100.0) as u64) / sector * sector)
            }
            Bound::Percent(p) => Err(format!("{p}% is outside 0–200%")),
            Bound::Bytes(b) => Ok(b / sector * sector),
        }
    };
    let start = at(&band.start)?;
    let end = at(&band.end)?;
    if end <= start {
        return Err(format!(
            "the band ends ({end} bytes) at or before it starts ({start} bytes)"
        ));
    }
    if start >= len {
        return Err(format!(
            "the band starts at {start} bytes, past the end ({len} bytes)"
        ));
    }
    if end - start > len {
        return Err("the band is longer than the region it lies in".into());
    }
    Ok((start, end))
}

/// Write data over a new file's whole range, so reads reach the storage.
fn fill(target: &mut Target, progress: &mut dyn FnMut(u64, u64) -> bool) -> Result<(), String> {
    const CHUNK: u64 = 1 << 20;
    const DEPTH: usize = 8;
    let total = target.end_bytes + target.sd.offset_bytes;
    let device = target.device.try_clone().map_err(|e| e.to_string())?;
    let mut engine = UringEngine::new(DEPTH)
        .map(|e| Box::new(e) as Box<dyn FileEngine>)
        .unwrap_or_else(|_| Box::new(cairn_io::sync_engine::SyncEngine::new(DEPTH)));
    let id = engine.attach(device);
    let pattern = DataPattern::new(1.0, 1.0, 8192, 0x5eed);
    let mut bufs: Vec<AlignedBuf> = (0..DEPTH)
        .map(|_| AlignedBuf::zeroed(CHUNK as usize))
        .collect();
    let mut offset = 0u64;
    let mut done = 0u64;
    let mut counter = 0u64;
    while done < total {
        while offset < total && engine.in_flight() < DEPTH {
            let len = CHUNK.min(total - offset) as usize;
            let mut buf = match bufs.pop() {
                Some(b) if b.len() == len => b,
                _ => AlignedBuf::zeroed(len),
            };
            counter += 1;
            pattern.fill(&mut buf, offset, counter);
            engine
                .submit(Request {
                    device: id,
                    tag: offset,
                    op: Op::Write {
                        offset_bytes: offset,
                        buf,
                        fua: false,
                    },
                })
                .map_err(|_| "the fill queue refused a write".to_string())?;
            offset += len as u64;
        }
        engine.wait(1).map_err(|e| e.to_string())?;
        while let Some(c) = engine.pop_completion() {
            let n = c.result.map_err(|e| e.to_string())?;
            done += n;
            if let Some(b) = c.buf {
                bufs.push(b);
            }
        }
        if !progress(done, total) {
            // Let what is in flight finish before the file is removed.
            while engine.in_flight() > 0 {
                engine.wait(1).map_err(|e| e.to_string())?;
                while engine.pop_completion().is_some() {}
            }
            return Err("interrupted".into());
        }
    }
    engine.flush(id).map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bands_resolve_in_percent_and_bytes() {
        let band = |a, b| Band { start: a, end: b };
        let len = 1 << 30;
        assert_eq!(
            resolve_band(&band(Bound::Percent(10.0), Bound::Percent(20.0)), len, 4096).unwrap(),
            (107_372_544, 214_745_088)
        );
        assert_eq!(
            resolve_band(
                &band(Bound::Bytes(1 << 20), Bound::Bytes(2 << 20)),
                len,
                4096
            )
            .unwrap(),
            (1 << 20, 2 << 20)
        );
        // 90–110% wraps: the end lies past the region.
        let (s, e) = resolve_band(
            &band(Bound::Percent(90.0), Bound::Percent(110.0)),
            len,
            4096,
        )
        .unwrap();
        assert!(s < len && e > len && e - s <= len);
        assert!(
            resolve_band(&band(Bound::Percent(20.0), Bound::Percent(10.0)), len, 4096).is_err()
        );
        assert!(
            resolve_band(&band(Bound::Percent(0.0), Bound::Percent(250.0)), len, 4096).is_err()
        );
    }
}
