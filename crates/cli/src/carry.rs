//! A command's request carried out: forwarded to the service that answers
//! for it, or run here through the same executor.

use anyhow::Result;
use cairn_command::request::Request;
use cairn_command::{Caller, Input, Outcome};

use crate::args::{discovery, engine_kind, EngineArg};
use crate::{forward, show};

/// A command's request carried out: by the service, when one answers for
/// what it is about; else here, through the same executor, on a mount of
/// this command's own. Its events are shown as it goes, then its reply.
pub(crate) fn carry_out(
    request: Request,
    discover: Option<&str>,
    json: bool,
    engine: EngineArg,
) -> Result<Outcome> {
    let reply = request_reply(request, discover, json, engine, Input::default(), &[])?;
    show::reply(&reply, json)
}

/// [`carry_out`] up to the reply, with what comes with the request: `fds`
/// for the service, `input` for this process's own executor.
pub(crate) fn request_reply(
    request: Request,
    discover: Option<&str>,
    json: bool,
    engine: EngineArg,
    input: Input,
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> Result<cairn_command::Reply> {
    let mut shown = show::Shown::new(json);
    let forwarded = match request.concern() {
        cairn_command::request::Concern::Asker => None,
        _ => {
            // The discovery string goes along as resolved: the service
            // answers for a group only when it reaches the very group it
            // holds.
            let d = discovery(discover).map(|d| d.text).unwrap_or_default();
            forward::forward(&request, &d, fds, &mut shown)
        }
    };
    let reply = match forwarded {
        Some(Ok(reply)) => reply,
        Some(Err(refused)) => return Err(refused.into()),
        None => execute_here(request, discover, engine, input, &mut shown)?,
    };
    shown.finish();
    Ok(reply)
}

/// Carry `request` out in this process, on a mount of its own.
pub(crate) fn execute_here(
    request: Request,
    discover: Option<&str>,
    engine: EngineArg,
    input: Input,
    events: &mut dyn cairn_command::Events,
) -> Result<cairn_command::Reply> {
    let host = cairn_command::held::HeldHost::new(
        discovery(discover)?,
        engine_kind(engine),
        cairn_store::group_lock::run_dir(),
    );
    Ok(cairn_command::execute(
        &host,
        &Caller::this_process(),
        request,
        input,
        events,
    )?)
}
