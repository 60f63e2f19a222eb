//! The CLI's side of the control socket: a command about a group that a
//! running `cairn serve` holds is sent to it, typed, and carried out there;
//! its events and reply come back and are shown as if this process had
//! done the work (`docs/serve.md`, "The control socket").
//!
//! No service (no socket, or nobody answering on it), or a service that
//! does not hold the group: the CLI carries the command out itself, through
//! the same executor. A socket this user may not use is said so: a service
//! is there, and the command is meant to go through it.

use std::io::{BufRead, BufReader};
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;

use cairn_command::event::Events;
use cairn_command::reply::Reply;
use cairn_command::request::Request;
use cairn_command::wire::{self, ReplyLine, RequestLine, PROTOCOL};
use cairn_serve::control;

/// The longest reply line taken from a service (a listing of many files is
/// one reply).
const REPLY_BYTES_MAX: u64 = 256 << 20;

/// How a forwarded command failed: the status the CLI exits with, and the
/// line it says.
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) status: u8,
    pub(crate) message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refused {}

fn refused(message: String) -> Refused {
    Refused { status: 1, message }
}

/// Send `request` to the service, if one answers for what it is about:
/// `None` when the CLI is to carry it out itself. `fds`: descriptors the
/// command hands over (the file `cp` copies in). Events go to `events` as
/// they come.
pub(crate) fn forward(
    request: &Request,
    discovery: &str,
    fds: &[BorrowedFd<'_>],
    events: &mut dyn Events,
) -> Option<Result<Reply, Refused>> {
    let path = control::socket_path();
    let stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Some(Err(refused(format!(
                "permission denied: this user may not use the Cairn service's socket {} (it is for root, the service's user and its --socket-group); ask to be added to that group, or run as root",
                path.display()
            ))))
        }
        Err(_) => return None,
    };
    // Only a service run by root, or by this user, is told the command
    // (and believed): anyone else who made a socket there is not.
    let server = control::peer_of(&stream).ok()?;
    // SAFETY: geteuid has no preconditions.
    if server.uid != 0 && server.uid != unsafe { libc::geteuid() } {
        return None;
    }
    let line = wire::encode_request(&RequestLine {
        protocol: PROTOCOL,
        discovery: discovery.to_string(),
        request: request.clone(),
    });
    // A refusal (this user may not use the socket) may come, and the
    // service stop reading, before the request is all sent: the answer is
    // read either way.
    let sent = control::send_request(&stream, &line, fds);
    let mut replies = BufReader::new(std::io::Read::take(stream, REPLY_BYTES_MAX));
    let mut first = true;
    let mut text = Vec::new();
    loop {
        text.clear();
        let line = match replies.read_until(b'\n', &mut text) {
            Ok(0) | Err(_) if first && sent.is_err() => return None,
            Ok(0) | Err(_) => {
                return Some(Err(refused(
                    "the Cairn service ended the connection before the command finished (see its log); what the command did is in place, what it had not done is not".into(),
                )))
            }
            Ok(_) => wire::decode_reply(text.strip_suffix(b"\n").unwrap_or(&text)),
        };
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                return Some(Err(refused(format!(
                    "the Cairn service sent a reply this CLI does not understand ({e}); are they the same version?"
                ))))
            }
        };
        match line {
            ReplyLine::NotHeld if first => return None,
            ReplyLine::NotHeld => {
                return Some(Err(refused(
                    "the Cairn service sent a reply out of order".into(),
                )))
            }
            ReplyLine::Event(e) => {
                first = false;
                events.send(e);
            }
            ReplyLine::Reply(r) => return Some(Ok(r)),
            ReplyLine::Error { status, message } => return Some(Err(Refused { status, message })),
        }
    }
}
