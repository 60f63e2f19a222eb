//! The kernel's own views of the machine — sysfs and procfs — behind roots that a
//! test can point at a fixture tree (a multipath setup this kernel cannot build,
//! say). Read-only; a missing or unreadable attribute is `None`, because sysfs
//! differs between kernels and drivers and none of it is guaranteed.

use std::fs;
use std::path::{Path, PathBuf};

/// Where sysfs and procfs are mounted.
#[derive(Debug, Clone)]
pub struct Host {
    pub sys: PathBuf,
    pub proc: PathBuf,
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub major: u32,
    pub minor: u32,
    pub mount_point: PathBuf,
    pub fs_type: String,
    pub source: String,
}

impl Default for Host {
    fn default() -> Self {
        Self::real()
    }
}

impl Host {
    /// The running system's `/sys` and `/proc`.
    pub fn real() -> Self {
        Self {
            sys: PathBuf::from("/sys"),
            proc: PathBuf::from("/proc"),
        }
    }

    /// The sysfs directory of a block device or partition, resolved to its
    /// canonical place under `devices/`.
    pub fn block_dir(&self, major: u32, minor: u32) -> Option<PathBuf> {
        fs::canonicalize(self.sys.join(format!("dev/block/{major}:{minor}"))).ok()
    }

    /// The sysfs directory of a block device or partition by kernel name (`sda1`, `dm-3`).
    pub fn block_dir_by_name(&self, name: &str) -> Option<PathBuf> {
        let dir = self.sys.join("class/block").join(name);
        fs::canonicalize(&dir).ok().or_else(|| {
            let dir = self.sys.join("block").join(name);
            dir.exists().then_some(dir)
        })
    }

    /// Names of the entries of a sysfs directory (holders, slaves), sorted.
    pub fn list(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// A sysfs attribute, trimmed; `None` if absent, unreadable or empty.
    pub fn attr(path: &Path) -> Option<String> {
        let text = fs::read_to_string(path).ok()?;
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// A numeric sysfs attribute.
    pub fn attr_u64(path: &Path) -> Option<u64> {
        Self::attr(path)?.parse().ok()
    }

    /// Every mounted filesystem, from mountinfo.
    pub fn mounts(&self) -> Vec<Mount> {
        let text = fs::read_to_string(self.proc.join("self/mountinfo")).unwrap_or_default();
        text.lines().filter_map(parse_mountinfo_line).collect()
    }

    /// Paths of active swap areas, from /proc/swaps.
    pub fn swaps(&self) -> Vec<PathBuf> {
        let text = fs::read_to_string(self.proc.join("swaps")).unwrap_or_default();
        text.lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().next())
            .map(|p| PathBuf::from(unescape_octal(p)))
            .collect()
    }

    /// Every loop device with a backing file: `(loopN, backing file)`.
    pub fn loop_devices(&self) -> Vec<(String, PathBuf)> {
        Self::list(&self.sys.join("block"))
            .into_iter()
            .filter(|name| name.starts_with("loop"))
            .filter_map(|name| {
                let backing =
                    Self::attr(&self.sys.join("block").join(&name).join("loop/backing_file"))?;
                Some((name, PathBuf::from(backing)))
            })
            .collect()
    }
}

fn unescape_octal(text: &str) -> String {
    // mountinfo and /proc/swaps write space, tab, newline and backslash as \ooo.
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match escaped {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_mountinfo_line(line: &str) -> Option<Mount> {
    let mut fields = line.split(' ');
    let _id = fields.next()?;
    let _parent = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let _root = fields.next()?;
    let mount_point = unescape_octal(fields.next()?);
    let mut rest = fields.skip_while(|f| *f != "-");
    rest.next()?;
    let fs_type = rest.next()?.to_string();
    let source = unescape_octal(rest.next().unwrap_or(""));
    Some(Mount {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        mount_point: PathBuf::from(mount_point),
        fs_type,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines() {
        let m = parse_mountinfo_line(
            "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
        )
        .unwrap();
        assert_eq!((m.major, m.minor), (98, 0));
        assert_eq!(m.mount_point, PathBuf::from("/mnt/with space"));
        assert_eq!(m.fs_type, "ext3");
        assert_eq!(m.source, "/dev/root");
        assert!(parse_mountinfo_line("garbage").is_none());
    }

    #[test]
    fn real_host_has_mounts() {
        // Every Linux process sees at least its root mount.
        assert!(!Host::real().mounts().is_empty());
    }
}
