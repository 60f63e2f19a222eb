//! The control socket's lines: how a [`Request`] travels from the CLI to the
//! service, and its events and reply back (`docs/serve.md`, "The control
//! socket").
//!
//! One request per connection: a line of JSON ([`RequestLine`], at most
//! [`REQUEST_BYTES_MAX`] bytes) carrying the typed request — never a
//! command line — and the discovery string the CLI resolved. The answer is
//! lines of JSON ([`ReplyLine`]): events as the command goes, and last its
//! reply or its error; or, alone, [`ReplyLine::NotHeld`], which sends the
//! CLI to carry the command out itself.
//!
//! Every line is outside input to whoever reads it: decoding gives a value
//! or an error saying what and at which byte, never a panic (fuzzed:
//! `fuzz/fuzz_targets/control_request.rs`).

use serde::{Deserialize, Serialize};

use crate::error::CommandError;
use crate::event::Event;
use crate::reply::Reply;
use crate::request::Request;

/// What this version speaks; a request in another is refused, saying so.
/// 1 carried the command line; 2 carries typed requests.
pub const PROTOCOL: u32 = 2;

/// The longest request line, newline excluded.
pub const REQUEST_BYTES_MAX: usize = 64 << 10;

/// A request as it travels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestLine {
    pub protocol: u32,
    /// The discovery string the client resolved (its `--discover`,
    /// `$CAIRN_DISCOVER` or configuration): the service answers for a
    /// group only when it reaches the very group the service holds.
    pub discovery: String,
    pub request: Request,
}

/// One line of an answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ReplyLine {
    /// Something the command says as it goes.
    Event(Event),
    /// The last line: the command's answer.
    Reply(Reply),
    /// The last line: why the command did not do what it was asked, and
    /// the exit status the CLI ends with (1 refused or failed, 2 a request
    /// line the service could not read).
    Error { status: u8, message: String },
    /// The service does not hold what the command is about: the CLI
    /// carries it out itself. Only ever the first and only line.
    NotHeld,
}

impl ReplyLine {
    /// The last line for a command's error.
    pub fn error(e: &CommandError) -> Self {
        ReplyLine::Error {
            status: 1,
            message: one_line(&e.to_string()),
        }
    }
}

/// Text on one line, spaces collapsed.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why a request line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("the request is longer than {REQUEST_BYTES_MAX} bytes")]
    TooLong,
    #[error("the request ended before its newline")]
    Unterminated,
    #[error("the request is not a valid request at byte {at}: {what}")]
    Malformed { at: usize, what: String },
    #[error("the request speaks protocol {0}, this service {PROTOCOL}: the CLI and the service are different Cairn versions (restart the service after an upgrade)")]
    Protocol(u32),
    #[error("the request carries more than {0} descriptors")]
    TooManyFds(usize),
}

/// Decode one request line (without its newline). Outside input: any bytes
/// give a request or an error saying where, never a panic. The protocol
/// is checked before the request itself, so that an older or newer CLI is
/// told the versions differ rather than that its request is malformed.
pub fn decode_request(line: &[u8]) -> Result<RequestLine, RequestError> {
    if line.len() > REQUEST_BYTES_MAX {
        return Err(RequestError::TooLong);
    }
    #[derive(Deserialize)]
    struct Version {
        protocol: u32,
    }
    if let Ok(v) = serde_json::from_slice::<Version>(line) {
        if v.protocol != PROTOCOL {
            return Err(RequestError::Protocol(v.protocol));
        }
    }
    serde_json::from_slice(line).map_err(|e| malformed(&e))
}

/// A JSON error as one short line, at its byte.
fn malformed(e: &serde_json::Error) -> RequestError {
    // serde_json counts lines and columns; a request is one line, so the
    // column is the byte (1-based) — or past the end.
    let what = e.to_string();
    // One line, and short: a name quoted from the request may hold any
    // character, and be long.
    let what: String = what
        .split(" at line ")
        .next()
        .unwrap_or(what.as_str())
        .chars()
        .flat_map(|c| match c.is_control() {
            true => c.escape_default().collect::<Vec<_>>(),
            false => vec![c],
        })
        .take(200)
        .collect();
    RequestError::Malformed {
        at: e.column(),
        what,
    }
}

/// Encode a request line, newline included.
pub fn encode_request(line: &RequestLine) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(line).expect("invariant: a request encodes");
    bytes.push(b'\n');
    bytes
}

/// Encode a reply line, newline included.
pub fn encode_reply(line: &ReplyLine) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(line).expect("invariant: a reply encodes");
    bytes.push(b'\n');
    bytes
}

/// Decode a reply line (the CLI reads the service's answer with it).
pub fn decode_reply(line: &[u8]) -> Result<ReplyLine, RequestError> {
    serde_json::from_slice(line).map_err(|e| malformed(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{NewDiskSpec, ReclaimWay, Resize, Setting};

    /// One request of every kind. The match forces a new command to be
    /// added here (and so to the schema test below).
    pub(crate) fn one_of_each() -> Vec<Request> {
        let all = vec![
            Request::GroupCreate {
                group: "DATA".into(),
                redundancy: "normal".into(),
                disks: vec![NewDiskSpec {
                    path: "/dev/sdb".into(),
                    failgroup: Some("FG1".into()),
                }],
                au_bytes: 4 << 20,
                sector_bytes: Some(4096),
                force: false,
                take_from: vec![],
            },
            Request::GroupList,
            Request::GroupDisks {
                group: "DATA".into(),
            },
            Request::GroupMount {
                group: "DATA".into(),
                force: true,
            },
            Request::GroupCheck {
                group: "DATA".into(),
                repair: true,
            },
            Request::GroupScrub {
                group: "DATA".into(),
                power: 4,
                repair: true,
                prefer: Some("DATA_0001".into()),
                wait: false,
            },
            Request::GroupReclaim {
                group: "DATA".into(),
                explain: false,
                rate_bytes: Some(256_000_000),
                power: 1,
                way: ReclaimWay::Discard,
                force: false,
                compact: false,
                wait: true,
            },
            Request::GroupSpace {
                group: "DATA".into(),
            },
            Request::GroupOnline {
                group: "DATA".into(),
                disks: Some(vec!["DATA_0001".into()]),
                power: 8,
                wait: true,
            },
            Request::GroupOffline {
                group: "DATA".into(),
                disks: vec!["DATA_0001".into()],
                drop_after_seconds: Some(3600),
            },
            Request::GroupAlter {
                group: "DATA".into(),
                add: vec![NewDiskSpec {
                    path: "/dev/sdc".into(),
                    failgroup: None,
                }],
                drop: vec!["DATA_0002".into()],
                resize: vec![Resize {
                    disk: "DATA_0003".into(),
                    size_bytes: 20 << 30,
                }],
                power: 4,
                explain: true,
                force: false,
                wait: false,
            },
            Request::GroupRebalance {
                group: "DATA".into(),
                power: 4,
                wait: false,
            },
            Request::GroupUndrop {
                group: "DATA".into(),
            },
            Request::GroupDropDisk {
                group: "DATA".into(),
                disk: "DATA_0001".into(),
                power: 4,
                wait: false,
            },
            Request::GroupReplace {
                group: "DATA".into(),
                disk: "DATA_0001".into(),
                with: "/dev/sdd".into(),
                power: 4,
                force: false,
                wait: false,
            },
            Request::GroupOps { group: None },
            Request::GroupSet {
                group: "DATA".into(),
                settings: vec![Setting {
                    key: "disk_repair_time".into(),
                    value: "1h".into(),
                }],
            },
            Request::GroupGet {
                group: "DATA".into(),
                keys: vec![],
            },
            Request::Ls {
                path: "+DATA/a".into(),
            },
            Request::Du {
                path: "+DATA/a".into(),
            },
            Request::Mkdir {
                path: "+DATA/a".into(),
                parents: true,
            },
            Request::Rm {
                paths: vec!["+DATA/a/b".into()],
            },
            Request::Mkalias {
                target: "+DATA/a/b".into(),
                alias: "+DATA/a/c".into(),
            },
            Request::CpIn {
                source: "/tmp/x".into(),
                source_name: Some("x".into()),
                dest: "+DATA/a/".into(),
                template: None,
                redundancy: None,
                max_bytes: Some(1 << 20),
            },
            Request::CpOut {
                source: "+DATA/a/b".into(),
                dest: "/tmp/b".into(),
            },
            Request::CpBetween {
                source: "+DATA/a/b".into(),
                dest: "+FRA/b".into(),
                template: None,
                redundancy: None,
            },
            Request::Status,
            Request::VolumeCreate {
                name: "+DATA/vol/v".into(),
                size_bytes: 1 << 30,
                redundancy: None,
            },
            Request::VolumeAttach {
                name: "+DATA/vol/v".into(),
            },
            Request::VolumeDetach {
                name: "+DATA/vol/v".into(),
            },
            Request::VolumeResize {
                name: "+DATA/vol/v".into(),
                size_bytes: 2 << 30,
            },
            Request::VolumeList { group: None },
        ];
        for r in &all {
            // Every variant is here: adding one without a sample fails to
            // compile.
            match r {
                Request::GroupCreate { .. }
                | Request::GroupList
                | Request::GroupDisks { .. }
                | Request::GroupMount { .. }
                | Request::GroupCheck { .. }
                | Request::GroupScrub { .. }
                | Request::GroupReclaim { .. }
                | Request::GroupSpace { .. }
                | Request::GroupOnline { .. }
                | Request::GroupOffline { .. }
                | Request::GroupAlter { .. }
                | Request::GroupRebalance { .. }
                | Request::GroupUndrop { .. }
                | Request::GroupDropDisk { .. }
                | Request::GroupReplace { .. }
                | Request::GroupOps { .. }
                | Request::GroupSet { .. }
                | Request::GroupGet { .. }
                | Request::Ls { .. }
                | Request::Du { .. }
                | Request::Mkdir { .. }
                | Request::Rm { .. }
                | Request::Mkalias { .. }
                | Request::CpIn { .. }
                | Request::CpOut { .. }
                | Request::CpBetween { .. }
                | Request::Status
                | Request::VolumeCreate { .. }
                | Request::VolumeAttach { .. }
                | Request::VolumeDetach { .. }
                | Request::VolumeResize { .. }
                | Request::VolumeList { .. } => {}
            }
        }
        all
    }

    fn line(request: Request) -> Vec<u8> {
        let mut l = encode_request(&RequestLine {
            protocol: PROTOCOL,
            discovery: "/dev/sd*".into(),
            request,
        });
        l.pop();
        l
    }

    #[test]
    fn every_request_round_trips_and_validates() {
        for r in one_of_each() {
            r.validate().unwrap_or_else(|e| panic!("{r:?}: {e}"));
            let decoded = decode_request(&line(r.clone())).expect("decodes");
            assert_eq!(decoded.request, r);
        }
    }

    /// The wire carries what a command is, never how it was typed: no
    /// request has a free-form list of arguments for the service to parse.
    /// Every field of every command is named and typed; a list is a list
    /// of named things (disks, paths, keys, settings), each a string or a
    /// structure of its own. A field that smuggles a command line fails
    /// here.
    #[test]
    fn the_wire_schema_carries_no_command_line() {
        fn walk(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        let lower = k.to_ascii_lowercase();
                        assert!(
                            ![
                                "argv",
                                "args",
                                "arguments",
                                "command_line",
                                "cmdline",
                                "words"
                            ]
                            .contains(&lower.as_str()),
                            "{at}.{k}: a free-form argument list on the wire"
                        );
                        walk(v, &format!("{at}.{k}"), out);
                    }
                }
                serde_json::Value::Array(items) => {
                    out.push(at.to_string());
                    for i in items {
                        walk(i, at, out);
                    }
                }
                _ => {}
            }
        }
        let mut lists = Vec::new();
        for r in one_of_each() {
            let v = serde_json::to_value(&r).expect("encodes");
            walk(&v, r.name(), &mut lists);
        }
        lists.sort();
        lists.dedup();
        // The only lists a request may carry, each of named things.
        let allowed = [
            "group alter.add",
            "group alter.drop",
            "group alter.resize",
            "group create.disks",
            "group create.take_from",
            "group get.keys",
            "group offline.disks",
            "group online.disks",
            "group set.settings",
            "rm.paths",
        ];
        for l in &lists {
            assert!(
                allowed.contains(&l.as_str()),
                "{l}: a list the wire schema does not declare (is it a command line?)"
            );
        }
        // The protocol-1 shape is refused, not half-read.
        let old = br#"{"protocol":2,"discovery":"","request":{"command":"ls","path":"+DATA"},"argv":["ls","+DATA"]}"#;
        assert!(matches!(
            decode_request(old),
            Err(RequestError::Malformed { .. })
        ));
        let v1 = br#"{"protocol":1,"argv":["group","disks","DATA"],"discovery":""}"#;
        assert_eq!(decode_request(v1), Err(RequestError::Protocol(1)));
    }

    #[test]
    fn bad_requests_say_what_and_where() {
        let at = |bytes: &[u8]| decode_request(bytes).expect_err("refused");
        assert!(matches!(at(b""), RequestError::Malformed { .. }));
        match at(br#"{"protocol":2,"discovery":x}"#) {
            RequestError::Malformed { at, .. } => assert_eq!(at, 27),
            e => panic!("{e:?}"),
        }
        assert!(matches!(
            at(br#"{"protocol":2,"discovery":"","request":{"command":"rm","paths":[],"x":1}}"#),
            RequestError::Malformed { .. }
        ));
        assert!(matches!(
            at(br#"{"protocol":2,"discovery":"","request":{"command":"format_everything"}}"#),
            RequestError::Malformed { .. }
        ));
        // Found by fuzzing protocol 1: a field name with a newline made a
        // two-line error.
        let e = at(br#"{"p*\rpt!*|*\npt"#);
        assert!(!e.to_string().contains('\n'), "{e}");
        let long = format!(r#"{{"{}":1}}"#, "x".repeat(10_000));
        assert!(at(long.as_bytes()).to_string().len() < 400);
        assert_eq!(
            at(br#"{"protocol":7,"discovery":"","request":{"command":"status"}}"#),
            RequestError::Protocol(7)
        );
        let long = vec![b' '; REQUEST_BYTES_MAX + 1];
        assert_eq!(at(&long), RequestError::TooLong);
    }

    #[test]
    fn replies_are_one_json_line_each() {
        let lines = [
            ReplyLine::Event(Event::Note("a\nb".into())),
            ReplyLine::Event(Event::Progress(crate::event::Progress {
                what: "resync".into(),
                unit: crate::event::Unit::Au,
                done: 1,
                total: 2,
            })),
            ReplyLine::NotHeld,
            ReplyLine::Reply(Reply::Done),
            ReplyLine::Error {
                status: 1,
                message: "no".into(),
            },
        ];
        for l in lines {
            let bytes = encode_reply(&l);
            assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
            let back = decode_reply(&bytes[..bytes.len() - 1]).expect("decodes");
            assert_eq!(
                serde_json::to_string(&back).expect("encodes"),
                serde_json::to_string(&l).expect("encodes")
            );
        }
    }
}
