//! What several commands take from the command line alike: the I/O
//! engine, where disks are discovered, `--json`, and sizes.

use anyhow::{bail, Context, Result};
use cairn_io::{new_file_engine, EngineKind, FileEngine};
use cairn_store::discovery::DiscoveryString;
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum EngineArg {
    Auto,
    Uring,
    Sync,
}

#[derive(Args)]
pub(crate) struct Output {
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct Discover {
    /// Comma-separated globs where disks are looked for (else $CAIRN_DISCOVER, else the config file, else a default).
    #[arg(long, value_name = "GLOBS")]
    pub(crate) discover: Option<String>,
}

pub(crate) fn engine_depth(kind: EngineArg, depth: usize) -> Result<Box<dyn FileEngine>> {
    new_file_engine(engine_kind(kind), depth)
        .context("cannot start the io_uring engine; try --engine sync")
}

pub(crate) fn engine_kind(arg: EngineArg) -> EngineKind {
    match arg {
        EngineArg::Auto => EngineKind::Auto,
        EngineArg::Uring => EngineKind::Uring,
        EngineArg::Sync => EngineKind::Sync,
    }
}

/// A size from the command line: `4M`, `64m`, `1048576`, `1.5g`, and the
/// same with `iB` or `B` after the unit (`4MiB`, `4MB`, `512B`). Units are
/// powers of 1024, as every size in Cairn (AUs, sectors, transfers) is.
pub(crate) fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let unit = |c: char| matches!(c.to_ascii_lowercase(), 'k' | 'm' | 'g' | 't');
    let core = if let Some(rest) = t.strip_suffix("iB").or_else(|| t.strip_suffix("ib")) {
        rest.ends_with(unit).then_some(rest)
    } else if let Some(rest) = t.strip_suffix('B').or_else(|| t.strip_suffix('b')) {
        Some(rest)
    } else {
        Some(t)
    };
    let parsed = core
        .filter(|c| !c.is_empty())
        .map(cairn_kit::quick::parse_size);
    match parsed {
        Some(Ok(bytes)) => Ok(bytes),
        Some(Err(e)) => bail!(
            "size {text:?}: {e}; write a number with an optional unit: 4096, 64K, 4M, 4MiB, 1G"
        ),
        None => {
            bail!("size {text:?}: write a number with an optional unit: 4096, 64K, 4M, 4MiB, 1G")
        }
    }
}

pub(crate) fn discovery(flag: Option<&str>) -> Result<DiscoveryString> {
    Ok(cairn_command::resolve_discovery(flag)?)
}

#[cfg(test)]
mod size_tests {
    use super::parse_size;

    #[test]
    fn sizes_take_their_unit_with_or_without_ib() {
        for (text, bytes) in [
            ("4M", 4 << 20),
            ("4m", 4 << 20),
            ("4MiB", 4 << 20),
            ("4MB", 4 << 20),
            ("64KiB", 64 << 10),
            ("1g", 1 << 30),
            ("1048576", 1 << 20),
            ("512B", 512),
            ("2T", 2 << 40),
        ] {
            assert_eq!(parse_size(text).ok(), Some(bytes), "{text}");
        }
        for bad in ["", "B", "iB", "4iB", "4X", "4MiBs", "-1M", "M"] {
            assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        }
    }
}
