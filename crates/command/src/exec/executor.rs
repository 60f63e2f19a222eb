//! One command's executor: the host it runs on and who asks, and what
//! every command's code shares (a group opened and closed around it, a
//! long operation's status file, what a command only a service answers
//! says without one).

use std::sync::Arc;

use cairn_store::ops::OpTracker;

use crate::caller::Caller;
use crate::error::CommandError;
use crate::event::Events;
use crate::host::{Access, Host, Opened};

/// Requests in flight for the engines the executor opens itself (new
/// disks, a group listed).
pub(crate) const ENGINE_DEPTH: usize = 64;

/// What a command that only a service carries out says without one.
pub(super) fn no_service(what: &str) -> CommandError {
    CommandError::failed(format!(
        "no Cairn service answers on {}, and `cairn {what}` is the service's to answer (start one with `cairn serve`, or set $CAIRN_SOCKET to its socket)",
        socket_shown()
    ))
}

fn socket_shown() -> String {
    std::env::var("CAIRN_SOCKET")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/run/cairn/cairn.sock".into())
}

/// One command's executor: the host and who asks.
pub(super) struct Exec<'a> {
    pub(super) host: &'a dyn Host,
    pub(super) caller: &'a Caller,
}

impl Exec<'_> {
    /// Open group `name`, run `f` on it, and close it whatever `f` did
    /// (a host that mounted it dismounts it, saying which disks the command
    /// took offline).
    pub(super) fn with_group<R>(
        &self,
        name: &str,
        access: Access,
        events: &mut dyn Events,
        f: impl FnOnce(&Arc<Opened>, &mut dyn Events) -> Result<R, CommandError>,
    ) -> Result<R, CommandError> {
        let g = self.host.open(name, access, events)?;
        let result = f(&g, events);
        let closed = self.host.close(g, result.is_err(), events);
        let r = result?;
        closed?;
        Ok(r)
    }

    /// A status file `group ops` lists while a long operation runs.
    pub(super) fn tracker(
        run_dir: &std::path::Path,
        g: &Opened,
        pass: &str,
        power: u16,
        rebuild_aus: u64,
    ) -> Result<OpTracker, CommandError> {
        let (uuid, au) = g.live.meta(|m| (m.uuid(), m.au_bytes()))?;
        Ok(OpTracker::start(
            run_dir,
            &g.name,
            uuid,
            pass,
            usize::from(power),
            au,
            rebuild_aus,
            false,
        ))
    }
}
