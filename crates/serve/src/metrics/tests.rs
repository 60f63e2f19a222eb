//! The exposition of a known status, read back whole: every family's name,
//! HELP, type, and every series' labels and value, against
//! `tests/golden/metrics.txt` (the exposition as it was first written
//! here). The text itself may differ where the format allows (how a float
//! is spelt, a family's order of series is kept); a renamed metric, a
//! label or a value that moved, or a family missing or added fails.
//! And the endpoint that serves it, over a real socket.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cairn_io::counted::{DeviceIo, OpStats};
use cairn_store::group::StateChangeCount;
use cairn_store::ops::OpStatus;

use super::*;

const GOLDEN: &str = "tests/golden/metrics.txt";

/// Requests recorded into fresh counters: (bytes, failed, microseconds).
fn ops(requests: &[(u64, bool, u64)]) -> OpSnapshot {
    let stats = OpStats::default();
    for (bytes, failed, us) in requests {
        stats.record(*bytes, *failed, Duration::from_micros(*us));
    }
    stats.snapshot()
}

fn disk(label: &str, failgroup: &str, state: &str, n: u64) -> DiskStatus {
    let io = DeviceIo::default();
    // Latencies on each side of the buckets' bounds (50 µs is in the
    // first, 51 µs in the second), up to past the last.
    for us in [1, 50, 51, 2_500, 999_999, 1_000_000, 1_000_001, 7_000_000] {
        io.reads
            .record(4096 * n, false, Duration::from_micros(us * n));
    }
    io.writes.record(8192, n == 2, Duration::from_micros(120));
    io.flushes.record(0, false, Duration::from_micros(40_000));
    DiskStatus {
        number: n as u16,
        label: label.into(),
        failgroup: failgroup.into(),
        state: state.into(),
        total_aus: 1000,
        free_aus: Some(900 - n),
        stale_aus: 3 * n,
        missing_copy_aus: 5 * n,
        io: io.snapshot(),
    }
}

fn known_status() -> Status {
    let data = GroupStatus {
        name: "DATA".into(),
        redundancy: "NORMAL".into(),
        total_mb: 4000,
        free_mb: 3500,
        usable_file_mb: 1250,
        offline_disks: 1,
        redundancy_lowered_extents: 17,
        redundancy_lowered_bytes: 17 << 20,
        state_changes: vec![
            StateChangeCount {
                disk: "D1".into(),
                to: "OFFLINE".into(),
                count: 2,
            },
            StateChangeCount {
                disk: "D1".into(),
                to: "SYNCING".into(),
                count: 1,
            },
        ],
        disks: vec![
            disk("D0", "A", "ONLINE", 0),
            disk("D1", "B", "OFFLINE", 1),
            disk("D2", "B", "DROPPING", 2),
        ],
        reads: ops(&[(65536, false, 30), (65536, false, 300), (4096, true, 3)]),
        writes: ops(&[(1 << 20, false, 2_000)]),
        syncs: ops(&[(0, false, 15_000), (0, false, 60_000)]),
        discards: ops(&[]),
    };
    let fra = GroupStatus {
        name: "FRA".into(),
        redundancy: "EXTERNAL".into(),
        total_mb: 100,
        free_mb: 0,
        // Mirroring asks more than is free: usable space is negative.
        usable_file_mb: -20,
        offline_disks: 0,
        redundancy_lowered_extents: 0,
        redundancy_lowered_bytes: 0,
        state_changes: Vec::new(),
        disks: vec![disk("F0", "F0", "ONLINE", 3)],
        reads: ops(&[]),
        writes: ops(&[(512, false, 1)]),
        syncs: ops(&[]),
        discards: ops(&[(1 << 30, false, 900)]),
    };
    Status {
        pid: 4242,
        uptime_seconds: 3725,
        groups: vec![data, fra],
        operations: vec![OpStatus {
            group: "DATA".into(),
            group_uuid: uuid::Uuid::nil(),
            pass: "RESYNC".into(),
            state: "RUN".into(),
            why: None,
            power: 2,
            aus_done: 40,
            aus_total: 120,
            bytes_done: 40 << 20,
            rate_bytes_per_second: Some(1e6),
            eta_seconds: Some(80),
            redundancy_eta_seconds: Some(80),
            resumed: false,
            pid: 4242,
            started_unix_seconds: 1,
            updated_unix_seconds: 2,
        }],
        // A volume's name is a path: any byte but NUL, so quotes,
        // backslashes and line feeds must come through escaped.
        volumes: vec![VolumeStatus {
            name: "+DATA/v \"1\"\\x\ny".into(),
            device: "/dev/nbd0".into(),
            size_bytes: 1 << 30,
            reads: 10,
            read_bytes: 40960,
            writes: 20,
            write_bytes: 81920,
            discards: 1,
            discard_bytes: 1 << 20,
            flushes: 4,
            in_flight: 2,
            busy_ms: 77,
        }],
    }
}

/// One series: its name as written (with `_bucket`, `_sum`, `_count` for a
/// histogram's), its labels in order, its value.
#[derive(Debug, PartialEq)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

#[derive(Debug, PartialEq)]
struct Family {
    help: String,
    kind: String,
    samples: Vec<Sample>,
}

/// A label value's escapes undone (`\\`, `\"`, `\n`), up to its closing
/// quote; the rest of the text after it.
fn label_value(text: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (value, &text[i + 1..]),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, c @ ('\\' | '"'))) => value.push(c),
                other => panic!("a bad escape {other:?} in {text:?}"),
            },
            c => value.push(c),
        }
    }
    panic!("a label value without its closing quote: {text:?}")
}

/// `name{k="v",...} value`, strictly.
fn sample(line: &str) -> Sample {
    let end = line
        .find(['{', ' '])
        .unwrap_or_else(|| panic!("a sample without a value: {line:?}"));
    let name = line[..end].to_string();
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(mut inner) = rest.strip_prefix('{') {
        if let Some(after) = inner.strip_prefix('}') {
            rest = after;
        } else {
            loop {
                let (key, after) = inner
                    .split_once("=\"")
                    .unwrap_or_else(|| panic!("a label without a value in {line:?}"));
                let (value, after) = label_value(after);
                // `le` is a number: Prometheus reads it as one, and
                // clients spell it differently (`0.00005`, `5e-05`).
                let value = if key == "le" {
                    let bound: f64 = value
                        .parse()
                        .unwrap_or_else(|_| panic!("le={value:?} in {line:?}"));
                    format!("{bound:?}")
                } else {
                    value
                };
                labels.push((key.to_string(), value));
                if let Some(after) = after.strip_prefix(',') {
                    inner = after;
                } else if let Some(after) = after.strip_prefix('}') {
                    rest = after;
                    break;
                } else {
                    panic!("labels not closed in {line:?}");
                }
            }
        }
    }
    let value = rest
        .strip_prefix(' ')
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no value in {line:?}"));
    Sample {
        name,
        labels,
        value,
    }
}

/// Every family of an exposition, by name: `# HELP`, then `# TYPE`, then
/// its samples, each of its own name (or a histogram's parts). Anything
/// else (a sample outside its family, a family twice, a stray line)
/// fails.
fn families(text: &str) -> BTreeMap<String, Family> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let (name, help) = line
            .strip_prefix("# HELP ")
            .and_then(|l| l.split_once(' '))
            .unwrap_or_else(|| panic!("a line outside a family: {line:?}"));
        let kind = lines
            .next()
            .and_then(|l| l.strip_prefix(&format!("# TYPE {name} ")))
            .unwrap_or_else(|| panic!("{name}: no # TYPE after its # HELP"))
            .to_string();
        let mut samples = Vec::new();
        while let Some(line) = lines.next_if(|l| !l.starts_with('#')) {
            let s = sample(line);
            let part = s.name.strip_prefix(name).unwrap_or("?");
            let parts: &[&str] = if kind == "histogram" {
                &["_bucket", "_sum", "_count"]
            } else {
                &[""]
            };
            assert!(parts.contains(&part), "{line:?} in family {name}");
            samples.push(s);
        }
        let family = Family {
            help: help.to_string(),
            kind,
            samples,
        };
        assert!(
            out.insert(name.to_string(), family).is_none(),
            "{name} twice"
        );
    }
    out
}

#[test]
fn the_exposition_keeps_every_family_name_label_and_value() {
    let text = prometheus(known_status());
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
    if std::env::var_os("CAIRN_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).expect("writes the golden exposition");
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; create it with CAIRN_UPDATE_GOLDEN=1 cargo test -p cairn-serve --lib metrics",
            path.display()
        )
    });
    let (got, mut want) = (families(&text), families(&golden));
    // The one change the encoder forces: it names every counter
    // `NAME_total`, so the uptime, a counter without the suffix, is a
    // gauge to keep its name.
    if let Some(uptime) = want.get_mut("cairn_uptime_seconds") {
        uptime.kind = "gauge".into();
    }
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "the families"
    );
    for (name, want) in &want {
        assert_eq!(&got[name], want, "family {name}");
    }
    // The known status reaches every family: none passes empty.
    for (name, f) in &got {
        assert!(!f.samples.is_empty(), "{name} has no series");
    }
}

/// One exchange with the endpoint at `addr`: the status line, the
/// headers, the body (the endpoint closes the connection after it).
fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> (String, String, String) {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a timeout");
    s.write_all(request).expect("sends");
    let mut text = String::new();
    s.read_to_string(&mut text)
        .expect("an answer, then the end of it");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let (status, headers) = head.split_once("\r\n").expect("headers");
    (status.into(), headers.into(), body.into())
}

#[test]
fn the_endpoint_answers_each_request_and_a_silent_client_does_not_hold_its_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let endpoint = Endpoint::start("127.0.0.1:0", Vec::new(), Instant::now(), dir.path().into())
        .expect("starts");
    let addr = endpoint.addr;
    let (status, headers, body) = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
        "{headers}"
    );
    assert!(headers.contains("Connection: close"), "{headers}");
    let up = &families(&body)["cairn_up"];
    assert_eq!((up.kind.as_str(), up.samples[0].value), ("gauge", 1.0));
    let (status, _, body) = exchange(addr, b"GET /x HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert_eq!(body, "not found: the metrics are at /metrics\n");
    for request in [
        &b"\x01\x02garbage\r\n\r\n"[..],
        b"POST /metrics HTTP/1.1\r\n\r\n",
    ] {
        let (status, _, body) = exchange(addr, request);
        assert_eq!(status, "HTTP/1.1 400 Bad Request");
        assert_eq!(body, "bad request\n");
    }
    // A client that connects and says nothing: the endpoint gives up on it
    // at the request's deadline, so stopping it (the service's shutdown
    // waits for that) ends while the client still holds its connection.
    let silent = TcpStream::connect(addr).expect("connects");
    let (stopped, stop) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(endpoint);
        let _ = stopped.send(());
    });
    stop.recv_timeout(REQUEST_TIME_MAX * 10)
        .expect("the endpoint stops while a silent client holds a connection");
    drop(silent);
    assert!(
        TcpStream::connect(addr).is_err(),
        "nothing listens at {addr} once stopped"
    );
}
