//! The discovery string: where Cairn looks for disks.
//!
//! A comma-separated list of globs (`/dev/mapper/asm*,/dev/sd[b-e]`), as ASM's
//! `asm_diskstring`. Disks are then known by label and UUID, never by the path
//! they happened to get at boot.
//!
//! Where it comes from, first found wins:
//! 1. `--discover` on the command line;
//! 2. the `CAIRN_DISCOVER` environment variable;
//! 3. `discovery_string` in the config file — `$CAIRN_CONFIG`, else
//!    `/etc/cairn/cairn.toml`;
//! 4. the built-in default, [`DEFAULT_DISCOVERY`].

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Where whole disks and LUNs usually appear on Linux.
pub const DEFAULT_DISCOVERY: &str =
    "/dev/sd*,/dev/vd*,/dev/xvd*,/dev/nvme*n*,/dev/mapper/*,/dev/loop*";
/// The config file read when `CAIRN_CONFIG` is not set.
pub const CONFIG_PATH_DEFAULT: &str = "/etc/cairn/cairn.toml";

/// Where a discovery string came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiscoverySource {
    Flag,
    Env,
    Config(PathBuf),
    Default,
}

impl fmt::Display for DiscoverySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiscoverySource::Flag => write!(f, "--discover"),
            DiscoverySource::Env => write!(f, "CAIRN_DISCOVER"),
            DiscoverySource::Config(p) => write!(f, "{}", p.display()),
            DiscoverySource::Default => write!(f, "the built-in default"),
        }
    }
}

/// A parsed discovery string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryString {
    pub text: String,
    pub globs: Vec<String>,
    pub source: DiscoverySource,
}

/// What the globs found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expansion {
    /// Block devices and regular files, in glob order, each once.
    pub paths: Vec<PathBuf>,
    /// Globs that matched no block device or file.
    pub unmatched_globs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    #[error("the discovery string from {from} is empty; give comma-separated globs such as '/dev/mapper/asm*'")]
    Empty { from: DiscoverySource },
    #[error("discovery glob '{glob}' (from {from}) is malformed: {message}")]
    BadGlob {
        glob: String,
        from: DiscoverySource,
        message: String,
    },
    #[error(
        "discovery string '{text}' (from {from}) matched no block device or file; check the globs"
    )]
    NothingMatched { text: String, from: DiscoverySource },
    #[error("{}:{line}:{column}: {message}; the file takes one key: discovery_string = \"GLOB,GLOB\"", path.display())]
    Config {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: cannot read the config file: {message}", path.display())]
    ConfigUnreadable { path: PathBuf, message: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    discovery_string: Option<String>,
}

impl DiscoveryString {
    /// Parse `text` (comma-separated globs).
    pub fn parse(text: &str, source: DiscoverySource) -> Result<Self, DiscoveryError> {
        let globs: Vec<String> = text
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_string)
            .collect();
        if globs.is_empty() {
            return Err(DiscoveryError::Empty { from: source });
        }
        for glob in &globs {
            if let Err(e) = glob::Pattern::new(glob) {
                return Err(DiscoveryError::BadGlob {
                    glob: glob.clone(),
                    from: source,
                    message: format!("{} at character {}", e.msg, e.pos + 1),
                });
            }
        }
        Ok(Self {
            text: text.to_string(),
            globs,
            source,
        })
    }

    /// Pick the discovery string from the flag, the environment, the config file
    /// at `config_path`, or the default.
    pub fn resolve(
        flag: Option<&str>,
        env: Option<&str>,
        config_path: &Path,
    ) -> Result<Self, DiscoveryError> {
        if let Some(text) = flag {
            return Self::parse(text, DiscoverySource::Flag);
        }
        if let Some(text) = env {
            return Self::parse(text, DiscoverySource::Env);
        }
        if let Some(text) = read_config(config_path)? {
            return Self::parse(&text, DiscoverySource::Config(config_path.to_path_buf()));
        }
        Self::parse(DEFAULT_DISCOVERY, DiscoverySource::Default)
    }

    /// Expand the globs. Only the built-in default may match nothing at all.
    pub fn expand(&self) -> Result<Expansion, DiscoveryError> {
        let mut expansion = Expansion::default();
        for pattern in &self.globs {
            let entries = glob::glob(pattern).map_err(|e| DiscoveryError::BadGlob {
                glob: pattern.clone(),
                from: self.source.clone(),
                message: e.msg.to_string(),
            })?;
            let mut matched = false;
            for path in entries.filter_map(Result::ok) {
                let is_device = fs::metadata(&path)
                    .is_ok_and(|m| m.is_file() || m.file_type().is_block_device());
                if is_device {
                    matched = true;
                    if !expansion.paths.contains(&path) {
                        expansion.paths.push(path);
                    }
                }
            }
            if !matched {
                expansion.unmatched_globs.push(pattern.clone());
            }
        }
        if expansion.paths.is_empty() && self.source != DiscoverySource::Default {
            return Err(DiscoveryError::NothingMatched {
                text: self.text.clone(),
                from: self.source.clone(),
            });
        }
        Ok(expansion)
    }
}

fn read_config(path: &Path) -> Result<Option<String>, DiscoveryError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(DiscoveryError::ConfigUnreadable {
                path: path.into(),
                message: e.to_string(),
            })
        }
    };
    parse_config(&text, path)
}

/// The discovery string a config file's text sets, if any; errors carry
/// `path:line:column`. Never panics (fuzzed).
pub fn parse_config(text: &str, path: &Path) -> Result<Option<String>, DiscoveryError> {
    toml::from_str::<ConfigFile>(text)
        .map(|c| c.discovery_string)
        .map_err(|e| {
            let mut offset = e.span().map(|s| s.start).unwrap_or(0).min(text.len());
            while !text.is_char_boundary(offset) {
                offset -= 1;
            }
            let before = &text[..offset];
            let line = before.matches('\n').count() + 1;
            let column = offset - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            DiscoveryError::Config {
                path: path.into(),
                line,
                column,
                message: e.message().replace('\n', " "),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("cairn.toml");
        fs::write(&config, "discovery_string = \"/from/config*\"\n").unwrap();
        let flag = DiscoveryString::resolve(Some("/a*, /b*"), Some("/env*"), &config).unwrap();
        assert_eq!(
            (flag.globs, flag.source),
            (
                vec!["/a*".to_string(), "/b*".to_string()],
                DiscoverySource::Flag
            )
        );
        assert_eq!(
            DiscoveryString::resolve(None, Some("/env*"), &config)
                .unwrap()
                .source,
            DiscoverySource::Env
        );
        let from_config = DiscoveryString::resolve(None, None, &config).unwrap();
        assert_eq!(from_config.globs, vec!["/from/config*"]);
        let missing = dir.path().join("none.toml");
        assert_eq!(
            DiscoveryString::resolve(None, None, &missing)
                .unwrap()
                .source,
            DiscoverySource::Default
        );
    }

    #[test]
    fn config_errors_name_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("cairn.toml");
        fs::write(&config, "# comment\ndiscovery_sting = \"x\"\n").unwrap();
        let err = DiscoveryString::resolve(None, None, &config).unwrap_err();
        let DiscoveryError::Config { line, column, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!((*line, *column), (2, 1));
        assert!(err.to_string().contains("discovery_sting"), "{err}");
        assert!(!err.to_string().contains('\n'));
    }

    #[test]
    fn bad_and_empty_strings() {
        assert!(matches!(
            DiscoveryString::parse(" , ", DiscoverySource::Flag),
            Err(DiscoveryError::Empty { .. })
        ));
        let err = DiscoveryString::parse("/dev/sd[a", DiscoverySource::Flag).unwrap_err();
        assert!(matches!(err, DiscoveryError::BadGlob { .. }), "{err:?}");
    }

    #[test]
    fn expansion_keeps_devices_and_files_and_names_unmatched_globs() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.img"), b"").unwrap();
        fs::create_dir(dir.path().join("subdir.img")).unwrap();
        let text = format!("{0}/*.img,{0}/nothing*", dir.path().display());
        let ds = DiscoveryString::parse(&text, DiscoverySource::Flag).unwrap();
        let e = ds.expand().unwrap();
        assert_eq!(e.paths, vec![dir.path().join("a.img")]);
        assert_eq!(
            e.unmatched_globs,
            vec![format!("{}/nothing*", dir.path().display())]
        );
        let none = DiscoveryString::parse(
            &format!("{}/nothing*", dir.path().display()),
            DiscoverySource::Env,
        )
        .unwrap();
        assert!(matches!(
            none.expand(),
            Err(DiscoveryError::NothingMatched { .. })
        ));
    }
}
