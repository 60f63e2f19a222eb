//! Opening a loaded dataset for a run: every data target's header read and
//! checked against the others and the redo file's, nothing written.

use std::path::{Path, PathBuf};

use cairn_io::host::Host;
use cairn_io::{DeviceFile, OpenMode};

use crate::layout::Layout;
use crate::OltpError;

use super::checks::{check_distinct, check_sector, fmt_mib};
use super::header::{
    DatasetState, HeaderIo, HeaderProblem, RedoHeader, TargetHeader, HEADER_IO_BYTES,
};

/// A loaded dataset, open read-write for a run.
#[derive(Debug)]
pub struct Dataset {
    pub id: u64,
    pub layout: Layout,
    /// In the order of the loaded targets.
    pub data: Vec<DeviceFile>,
    pub data_paths: Vec<PathBuf>,
    pub redo: DeviceFile,
    pub redo_path: PathBuf,
    /// The byte range of the redo file that holds the log (after its header).
    pub redo_start: u64,
    pub redo_end: u64,
    /// The state the headers recorded when the dataset was opened.
    pub state_at_open: DatasetState,
}

/// What a run expects of the dataset.
pub struct OpenOptions<'a> {
    pub host: &'a Host,
    pub block_size: u32,
    pub table_blocks: u64,
    pub scan_blocks: u64,
    /// Schemas the run uses: at most the number loaded.
    pub schemas: u32,
}

/// Open a loaded dataset and check it is the one the run expects. Never
/// writes: a target that is not a loaded data target is refused untouched.
pub fn open(targets: &[PathBuf], redo: &Path, opts: &OpenOptions) -> Result<Dataset, OltpError> {
    check_distinct(targets, redo)?;
    let (data, header) = open_loaded(targets, OpenMode::WRITE_EXCLUSIVE, opts.host)?;
    let shape = header.shape;
    if header.state == DatasetState::Loading {
        return Err(OltpError::Usage(format!(
            "{}: setup did not finish (its header says loading): run 'cairn bench oltp setup' again",
            targets[0].display()
        )));
    }
    if opts.block_size != shape.block_size {
        return Err(OltpError::Usage(format!(
            "loaded with {}-byte blocks; the run asks for {}-byte blocks: run setup again or use the loaded block size",
            shape.block_size, opts.block_size
        )));
    }
    if opts.table_blocks != shape.table_blocks {
        return Err(OltpError::Usage(format!(
            "loaded with SCALE={} blocks; slob.conf says {}: run setup again or use the loaded SCALE",
            shape.table_blocks, opts.table_blocks
        )));
    }
    if opts.scan_blocks != shape.scan_blocks {
        return Err(OltpError::Usage(format!(
            "loaded with SCAN_TABLE_SZ={} blocks; slob.conf says {}: run setup again or use the loaded SCAN_TABLE_SZ",
            shape.scan_blocks, opts.scan_blocks
        )));
    }
    if opts.schemas > shape.schemas || opts.schemas == 0 {
        return Err(OltpError::Usage(format!(
            "the run asks for {} schemas; {} were loaded: ask for 1 to {}, or run setup with more schemas",
            opts.schemas, shape.schemas, shape.schemas
        )));
    }
    for (path, device) in targets.iter().zip(&data) {
        check_sector(path, device, shape.block_size)?;
    }
    let (redo_dev, redo_header) =
        open_redo(redo, header.dataset, OpenMode::WRITE_EXCLUSIVE, opts.host)?;
    Ok(Dataset {
        id: header.dataset,
        layout: Layout::new(shape, targets.len()),
        data,
        data_paths: targets.to_vec(),
        redo: redo_dev,
        redo_path: redo.to_path_buf(),
        redo_start: redo_header.log_start,
        redo_end: redo_header.log_end,
        state_at_open: header.state,
    })
}

impl Dataset {
    /// Record `state` in every data target's header (and flush). Each header is
    /// read back first and must still name this dataset: a target replaced
    /// under a run is not overwritten.
    pub fn mark(&mut self, state: DatasetState) -> Result<(), OltpError> {
        let mut io = HeaderIo::new(&self.data, &self.data_paths)?;
        for i in 0..self.data.len() {
            let path = self.data_paths[i].display();
            let buf = io.read(i)?;
            let mut header = match TargetHeader::decode(&buf) {
                Ok(h) if h.dataset == self.id => h,
                _ => {
                    return Err(OltpError::Usage(format!(
                        "{path} no longer carries the header of dataset {:016x}; its state was not changed",
                        self.id
                    )))
                }
            };
            header.state = state;
            io.write(i, header.encode())?;
        }
        io.flush_all()
    }
}

/// Open every data target, read its header, and check that together they are
/// one whole dataset given in load order. Returns the handles in that order and
/// the first target's header.
pub(super) fn open_loaded(
    targets: &[PathBuf],
    mode: OpenMode,
    host: &Host,
) -> Result<(Vec<DeviceFile>, TargetHeader), OltpError> {
    let mut devices = Vec::with_capacity(targets.len());
    let mut headers = Vec::with_capacity(targets.len());
    for path in targets {
        let (device, header) = open_target(path, mode, host)?;
        headers.push(header);
        devices.push(device);
    }
    let first = headers[0];
    for (path, h) in targets.iter().zip(&headers) {
        if h.dataset != first.dataset {
            return Err(OltpError::Usage(format!(
                "{} belongs to dataset {:016x} and {} to dataset {:016x}: give the data targets of one dataset",
                targets[0].display(),
                first.dataset,
                path.display(),
                h.dataset
            )));
        }
        if h.shape != first.shape || h.targets != first.targets {
            return Err(OltpError::Usage(format!(
                "{} and {} disagree on the shape of dataset {:016x}: run setup again",
                targets[0].display(),
                path.display(),
                first.dataset
            )));
        }
    }
    if first.targets as usize != targets.len() {
        return Err(OltpError::Usage(format!(
            "dataset {:016x} was loaded on {} data targets; {} given: give all of them, in load order",
            first.dataset,
            first.targets,
            targets.len()
        )));
    }
    check_load_order(targets, &headers)?;
    let layout = Layout::new(first.shape, targets.len());
    let needed = layout.target_bytes_needed();
    for (path, d) in targets.iter().zip(&devices) {
        let size = d.geometry().size_bytes;
        if size < needed {
            return Err(OltpError::Usage(format!(
                "{} holds {}; dataset {:016x} needs {} there: it was truncated or replaced — run setup again",
                path.display(),
                fmt_mib(size),
                first.dataset,
                fmt_mib(needed)
            )));
        }
    }
    // The dataset's state: the least finished any target records.
    let state = headers
        .iter()
        .map(|h| h.state)
        .fold(DatasetState::Clean, |acc, s| match (acc, s) {
            (DatasetState::Loading, _) | (_, DatasetState::Loading) => DatasetState::Loading,
            (DatasetState::Running, _) | (_, DatasetState::Running) => DatasetState::Running,
            _ => DatasetState::Clean,
        });
    Ok((devices, TargetHeader { state, ..first }))
}

/// Open one data target and read its dataset header; a target without one,
/// or with a damaged one, is refused, saying to run setup.
fn open_target(
    path: &PathBuf,
    mode: OpenMode,
    host: &Host,
) -> Result<(DeviceFile, TargetHeader), OltpError> {
    let device = DeviceFile::open(path, mode, host).map_err(|e| OltpError::Usage(e.to_string()))?;
    let mut io = HeaderIo::new(std::slice::from_ref(&device), std::slice::from_ref(path))?;
    // A device too small to hold a header cannot be a data target.
    let header = if device.geometry().size_bytes < HEADER_IO_BYTES as u64 {
        Err(HeaderProblem::Absent)
    } else {
        TargetHeader::decode(&io.read(0)?)
    };
    match header {
        Ok(h) => Ok((device, h)),
        Err(HeaderProblem::Absent) => Err(OltpError::Usage(format!(
            "{} is not a loaded Cairn OLTP data target (no dataset header): run 'cairn bench oltp setup' first",
            path.display()
        ))),
        Err(HeaderProblem::Damaged(why)) => Err(OltpError::Usage(format!(
            "{}: its Cairn OLTP dataset header is damaged ({why}): run 'cairn bench oltp setup' again",
            path.display()
        ))),
    }
}

/// The data targets of one dataset, given in the order setup loaded them:
/// two that claim the same place (one is a copy) or any out of place are
/// refused, the latter saying the order to give.
fn check_load_order(targets: &[PathBuf], headers: &[TargetHeader]) -> Result<(), OltpError> {
    let dataset = headers[0].dataset;
    let mut in_order: Vec<Option<&PathBuf>> = vec![None; targets.len()];
    for (path, h) in targets.iter().zip(headers) {
        let slot = &mut in_order[h.index as usize];
        if let Some(other) = slot {
            return Err(OltpError::Usage(format!(
                "{} and {} both say they are data target {} of dataset {:016x}: one is a copy; give the targets setup loaded",
                other.display(),
                path.display(),
                h.index + 1,
                dataset
            )));
        }
        *slot = Some(path);
    }
    if headers
        .iter()
        .enumerate()
        .any(|(i, h)| h.index as usize != i)
    {
        let places: Vec<String> = targets
            .iter()
            .zip(headers)
            .map(|(p, h)| format!("{} belongs at position {}", p.display(), h.index + 1))
            .collect();
        let order: Vec<String> = in_order
            .iter()
            .flatten()
            .map(|p| p.display().to_string())
            .collect();
        return Err(OltpError::Usage(format!(
            "the data targets are not in load order: {}; give them as {}",
            places.join(", "),
            order.join(" ")
        )));
    }
    Ok(())
}

pub(super) fn open_redo(
    redo: &Path,
    dataset: u64,
    mode: OpenMode,
    host: &Host,
) -> Result<(DeviceFile, RedoHeader), OltpError> {
    let device = DeviceFile::open(redo, mode, host).map_err(|e| OltpError::Usage(e.to_string()))?;
    let header = if device.geometry().size_bytes < HEADER_IO_BYTES as u64 {
        Err(HeaderProblem::Absent)
    } else {
        let mut io = HeaderIo::new(std::slice::from_ref(&device), &[redo.to_path_buf()])?;
        RedoHeader::decode(&io.read(0)?)
    };
    let header = match header {
        Ok(h) => h,
        Err(HeaderProblem::Absent) => {
            return Err(OltpError::Usage(format!(
                "{} is not a Cairn redo file (no redo header): run 'cairn bench oltp setup' first",
                redo.display()
            )))
        }
        Err(HeaderProblem::Damaged(why)) => {
            return Err(OltpError::Usage(format!(
                "{}: its redo header is damaged ({why}): run 'cairn bench oltp setup' again",
                redo.display()
            )))
        }
    };
    if header.dataset != dataset {
        return Err(OltpError::Usage(format!(
            "redo file {} belongs to dataset {:016x}, the data targets to dataset {dataset:016x}: give the redo file setup formatted with these targets",
            redo.display(),
            header.dataset
        )));
    }
    let geometry = device.geometry();
    if header.log_end > geometry.size_bytes
        || !u64::from(header.block_bytes).is_multiple_of(u64::from(geometry.logical_sector_bytes))
    {
        return Err(OltpError::Usage(format!(
            "redo file {} changed since setup (its size or sector size): run setup again",
            redo.display()
        )));
    }
    Ok((device, header))
}
