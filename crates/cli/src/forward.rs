//! The CLI's side of the control socket: a command on a group that a
//! running `cairn serve` holds is sent to it and carried out there; its
//! output, progress and exit status come back and are shown as if this
//! process had done the work (`docs/serve.md`, "The control socket").
//!
//! No service (no socket, or nobody answering on it), a socket this user may
//! not open, or a service that does not hold the group: the CLI does the
//! work itself, as it always has.

use std::io::{BufRead, BufReader};
use std::os::fd::RawFd;
use std::os::unix::net::UnixStream;

use anyhow::{anyhow, Result};
use cairn_serve::control::{self, Reply, Request, PROTOCOL};

use crate::Outcome;

/// The longest reply line taken from a service (a listing of many files is
/// one output reply).
const REPLY_BYTES_MAX: u64 = 256 << 20;

/// A `cp` out of a served group, as the service answers it: the path the
/// file is read at through its file system, and (for a copy to a group)
/// the source file's template.
#[derive(Default)]
pub(crate) struct ReadThrough {
    pub(crate) path: Option<std::path::PathBuf>,
    pub(crate) template: Option<String>,
}

/// Send the command line `argv` (after the program's name) to the
/// service, if one holds what it is about: `None` when the CLI is to carry
/// it out itself. `fds`: descriptors the command hands over (the file `cp`
/// copies in). `read_through`: set when the service answers a `cp` out of
/// its group.
pub(crate) fn forward(
    argv: Vec<String>,
    discover_flag: Option<&str>,
    fds: &[RawFd],
    read_through: &mut ReadThrough,
) -> Option<Result<Outcome>> {
    let stream = UnixStream::connect(control::socket_path()).ok()?;
    // Only a service run by root, or by this user, is told the command
    // (and believed): anyone else who made a socket there is not.
    let server = control::peer_of(&stream).ok()?;
    // SAFETY: geteuid has no preconditions.
    if server.uid != 0 && server.uid != unsafe { libc::geteuid() } {
        return None;
    }
    let discovery = crate::discovery(discover_flag)
        .map(|d| d.text)
        .unwrap_or_default();
    let json = argv.iter().any(|a| a == "--json");
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|d| d.into_os_string().into_string().ok())
        .unwrap_or_default();
    let request = Request {
        protocol: PROTOCOL,
        argv,
        discovery,
        cwd,
    };
    let mut line = serde_json::to_vec(&request).ok()?;
    line.push(b'\n');
    // A refusal (this user may not use the socket) may come, and the
    // service stop reading, before the request is all sent: the answer
    // is read either way.
    let sent = control::send_request(&stream, &line, fds);
    let mut replies = BufReader::new(std::io::Read::take(stream, REPLY_BYTES_MAX));
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut first = true;
    let mut text = Vec::new();
    loop {
        text.clear();
        let outcome = match replies.read_until(b'\n', &mut text) {
            Ok(0) | Err(_) if first && sent.is_err() => return None,
            Ok(0) | Err(_) => Err(anyhow!(
                "the Cairn service ended the connection before the command finished (see its log); what the command did is in place, what it had not done is not"
            )),
            Ok(_) => match serde_json::from_slice::<Reply>(&text) {
                Err(e) => Err(anyhow!("the Cairn service sent a reply this CLI does not understand ({e}); are they the same version?")),
                Ok(Reply::NotHeld) if first => return None,
                Ok(Reply::NotHeld) => Err(anyhow!("the Cairn service sent a reply out of order")),
                Ok(Reply::Out(out)) => {
                    print!("{out}");
                    first = false;
                    continue;
                }
                Ok(Reply::ReadThrough(path)) => {
                    read_through.path = Some(path.into());
                    first = false;
                    continue;
                }
                Ok(Reply::SourceTemplate(t)) => {
                    read_through.template = Some(t);
                    first = false;
                    continue;
                }
                Ok(Reply::Err(line)) => {
                    eprintln!("{line}");
                    first = false;
                    continue;
                }
                Ok(Reply::Progress(p)) => {
                    let b = bar.get_or_insert_with(|| {
                        let b = match p.unit.as_str() {
                            "byte" => crate::group_cmd::bytes_progress(json),
                            _ => crate::group_cmd::au_progress(json),
                        };
                        b.set_message(p.what.clone());
                        b
                    });
                    b.set_length(p.total);
                    b.set_position(p.done);
                    first = false;
                    continue;
                }
                Ok(Reply::Exit { status, message }) => Ok(match (status, message) {
                    (0, _) => Outcome::Done,
                    (crate::EXIT_DEGRADED, m) => {
                        Outcome::Degraded(m.unwrap_or_else(|| "the group is DEGRADED".into()))
                    }
                    (_, m) => Outcome::Failed(
                        m.unwrap_or_else(|| "the Cairn service says the command failed".into()),
                    ),
                }),
            },
        };
        if let Some(b) = bar.take() {
            b.finish_and_clear();
        }
        return Some(outcome);
    }
}
