//! Checks on what a command is given: the shape, the paths (each once, the
//! redo file apart), the sectors; and the sparse files setup creates.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use cairn_io::DeviceFile;

use crate::layout::{Layout, Shape};
use crate::OltpError;

pub(super) const MIB: f64 = 1024.0 * 1024.0;

pub(super) fn validate_shape(shape: &Shape) -> Result<(), OltpError> {
    let bs = shape.block_size;
    if !(2048..=32768).contains(&bs) || !bs.is_power_of_two() {
        return Err(OltpError::Usage(format!(
            "block size {bs} is not supported: give a power of two from 2048 to 32768 bytes"
        )));
    }
    if shape.schemas == 0 {
        return Err(OltpError::Usage("at least one schema is needed".into()));
    }
    if shape.table_blocks == 0 {
        return Err(OltpError::Usage(
            "SCALE is 0 blocks: a table needs at least one block".into(),
        ));
    }
    Ok(())
}

pub(super) fn check_sector(
    path: &Path,
    device: &DeviceFile,
    block_size: u32,
) -> Result<(), OltpError> {
    let sector = device.geometry().logical_sector_bytes;
    if block_size < sector {
        return Err(OltpError::Usage(format!(
            "{} has {sector}-byte logical sectors, larger than the {block_size}-byte blocks: use blocks of at least {sector} bytes",
            path.display()
        )));
    }
    Ok(())
}

/// What a path names, to tell two spellings of one file or device apart.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum PathIdentity {
    Block(u64),
    File(u64, u64),
    /// Not there yet: where it would be created.
    Missing(PathBuf),
}

fn identity(path: &Path) -> PathIdentity {
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() => PathIdentity::Block(m.rdev()),
        Ok(m) => PathIdentity::File(m.dev(), m.ino()),
        Err(_) => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let base = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
            PathIdentity::Missing(base.join(path.file_name().unwrap_or_default()))
        }
    }
}

/// Refuse a list with no data target, a path given twice (in any spelling),
/// or the redo file among the data targets.
pub(super) fn check_distinct(targets: &[PathBuf], redo: &Path) -> Result<(), OltpError> {
    if targets.is_empty() {
        return Err(OltpError::Usage(
            "no data target: give at least one --target".into(),
        ));
    }
    let mut seen: BTreeMap<PathIdentity, &Path> = BTreeMap::new();
    for path in targets {
        if let Some(other) = seen.insert(identity(path), path) {
            return Err(OltpError::Usage(if other == path.as_path() {
                format!(
                    "data target {} is given twice: give each once",
                    path.display()
                )
            } else {
                format!(
                    "data targets {} and {} are the same device: give each once",
                    other.display(),
                    path.display()
                )
            }));
        }
    }
    if let Some(other) = seen.get(&identity(redo)) {
        return Err(OltpError::Usage(format!(
            "the redo file {} is also data target {}: give the redo log its own file or device",
            redo.display(),
            other.display()
        )));
    }
    Ok(())
}

/// Create a missing regular file, sparse, of `size` bytes. Returns whether it did.
pub(super) fn create_if_missing(path: &Path, size: u64, what: &str) -> Result<bool, OltpError> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let real_parent = std::fs::canonicalize(&parent).map_err(|e| {
        OltpError::Usage(format!(
            "cannot create {what} {}: its directory {} cannot be used ({e}); create the directory or check the path",
            path.display(),
            parent.display()
        ))
    })?;
    // A missing device is a typo, not a request: never put a file under /dev.
    if path.starts_with("/dev") || real_parent.starts_with("/dev") {
        return Err(OltpError::Usage(format!(
            "{what} {} does not exist, and paths under /dev are never created; check the path",
            path.display()
        )));
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            OltpError::Usage(format!(
                "cannot create {what} {}: {e}; check the directory is writable",
                path.display()
            ))
        })?;
    if let Err(e) = file.set_len(size) {
        std::fs::remove_file(path).ok();
        return Err(OltpError::Usage(format!(
            "cannot size the new {what} {} to {}: {e}",
            path.display(),
            fmt_mib(size)
        )));
    }
    Ok(true)
}

pub(super) fn too_small_message(path: &Path, size: u64, layout: &Layout) -> String {
    let s = layout.shape;
    let bs = if s.block_size >= 1024 {
        format!("{} KiB", s.block_size / 1024)
    } else {
        format!("{} bytes", s.block_size)
    };
    let over = if layout.targets == 1 {
        "over 1 target need".to_string()
    } else {
        format!("over {} targets need", layout.targets)
    };
    let each = if layout.targets == 1 { "" } else { " each" };
    format!(
        "data target {} holds {}; {} schema{} × SCALE {} blocks of {bs} (+ index and scan tables) {over} {}{each}",
        path.display(),
        fmt_mib(size),
        s.schemas,
        if s.schemas == 1 { "" } else { "s" },
        s.table_blocks,
        fmt_mib(layout.target_bytes_needed())
    )
}

pub(super) fn fmt_mib(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_too_small_message_says_what_is_needed() {
        let layout = Layout::new(
            Shape {
                block_size: 8192,
                schemas: 2,
                table_blocks: 10_000,
                scan_blocks: 0,
                obfuscate: false,
            },
            1,
        );
        let m = too_small_message(Path::new("/x"), 100 << 20, &layout);
        assert_eq!(
            m,
            format!(
                "data target /x holds 100 MiB; 2 schemas × SCALE 10000 blocks of 8 KiB (+ index and scan tables) over 1 target need {}",
                fmt_mib(layout.target_bytes_needed())
            )
        );
        assert!(fmt_mib(layout.target_bytes_needed()).ends_with(" MiB"));
    }
}
