//! Cairn's commands, once: what each asks (a typed [`Request`]), what it
//! answers (a typed [`Reply`]), and the one executor that carries it out
//! (`exec`) over a [`Host`] — a group the asking process mounts for
//! itself ([`held::HeldHost`]), or a live group the service holds (its
//! host is in `cairn-serve`). Every rule a command enforces (which disk may
//! come back, who may remove a name, what a field may hold) is here, so the
//! CLI and the service cannot disagree: the CLI parses its command line
//! into a request and renders the reply; the service decodes the request
//! from its socket (`wire`) and never sees a command line.
//!
//! `docs/commands.md` says why it is built this way.

pub mod access;
pub mod caller;
pub mod error;
pub mod event;
pub mod exec;
pub mod held;
pub mod host;
pub mod reply;
pub mod request;
pub mod status;
pub mod wire;

pub use caller::Caller;
pub use error::CommandError;
pub use event::{Event, Events, Progress, Unit};
pub use exec::{execute, Input};
pub use host::{Access, Host, Opened};
pub use reply::{Outcome, Reply};
pub use request::Request;

/// The discovery string in force: `flag` (a `--discover`), else
/// `$CAIRN_DISCOVER`, else the configuration file (`$CAIRN_CONFIG`, else
/// the default path), else the default globs.
pub fn resolve_discovery(
    flag: Option<&str>,
) -> Result<cairn_store::discovery::DiscoveryString, CommandError> {
    let env = std::env::var("CAIRN_DISCOVER").ok();
    let config = std::env::var_os("CAIRN_CONFIG")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(cairn_store::discovery::CONFIG_PATH_DEFAULT));
    Ok(cairn_store::discovery::DiscoveryString::resolve(
        flag,
        env.as_deref(),
        &config,
    )?)
}
