//! The log writer against real files (and a RAM-backed loop device when run as
//! root): every commit is covered by a log write, commits are grouped, redo size
//! is exactly the sum of the records, writes respect the largest transfer, the
//! log wraps and can still be read back, a small buffer makes sessions wait
//! without losing redo, and an I/O error fails commits instead of hanging them.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use cairn_io::host::Host;
use cairn_io::test_support::LoopDevice;
use cairn_io::{DeviceFile, OpenMode};
use cairn_oltp::redo::{
    change_record_bytes, scan_log, RedoConfig, RedoLog, COMMIT_RECORD_BYTES,
    REDO_BLOCK_HEADER_BYTES,
};
use cairn_oltp::stats::{Counts, Event, OpStats, Stat, StatsHub};
use cairn_oltp::Health;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// REDO_STRESS's two change sizes: 2 × 128 and 19 × 128 bytes per changed block.
const CHANGE_LITE: usize = 2 * 128;
const CHANGE_HEAVY: usize = 19 * 128;
/// Only a guard against a hang: no test result depends on it.
const HANG_GUARD: Duration = Duration::from_secs(30);

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn open(path: &Path, mode: OpenMode) -> DeviceFile {
    DeviceFile::open(path, mode, &Host::real()).unwrap()
}

fn sparse_file(dir: &Path, name: &str, size: u64) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::File::create(&path).unwrap().set_len(size).unwrap();
    path
}

fn config(file: &DeviceFile, area: u64, buffer: u64, max_write: u64) -> RedoConfig {
    let block_bytes = file.geometry().logical_sector_bytes.max(512);
    RedoConfig {
        log_buffer_bytes: buffer as usize,
        start: 64 * KIB,
        end: 64 * KIB + area,
        block_bytes,
        max_write_bytes: max_write,
        dataset: 0x5eed_0000_1234_abcd,
    }
}

struct Started {
    log: Arc<RedoLog>,
    hub: Arc<StatsHub>,
    health: Arc<Health>,
}

fn start(file: DeviceFile, cfg: RedoConfig) -> Started {
    let hub = Arc::new(StatsHub::new());
    let health = Arc::new(Health::new());
    let log = RedoLog::start(file, cfg, hub.slot(), Arc::clone(&health)).unwrap();
    Started { log, hub, health }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < HANG_GUARD, "hung waiting for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// What the sessions of a workload generated, as the test computes it.
#[derive(Default)]
struct Expected {
    redo_bytes: u64,
    entries: u64,
    changes: u64,
    commits: u64,
    max_version: HashMap<u64, u64>,
}

impl Expected {
    fn add(&mut self, other: Expected) {
        self.redo_bytes += other.redo_bytes;
        self.entries += other.entries;
        self.changes += other.changes;
        self.commits += other.commits;
        for (b, v) in other.max_version {
            let e = self.max_version.entry(b).or_default();
            *e = (*e).max(v);
        }
    }
}

/// `threads` sessions, each doing `transactions` of one or two changes and a
/// commit; each checks that its commit returned only once the log covered it.
fn run_sessions(started: &Started, threads: u64, transactions: u64) -> Expected {
    let mut handles = Vec::new();
    for t in 0..threads {
        let log = Arc::clone(&started.log);
        let slot = started.hub.slot();
        handles.push(thread::spawn(move || {
            let mut exp = Expected::default();
            let mut op = OpStats::new();
            for i in 0..transactions {
                let changes = 1 + (i + t) % 2;
                for c in 0..changes {
                    let len = if (i + c) % 3 == 0 {
                        CHANGE_HEAVY
                    } else {
                        CHANGE_LITE
                    };
                    let block = t * 1000 + (i + c) % 7;
                    let version = i * 2 + c + 1;
                    let change = vec![(i as u8) | 1; len];
                    log.append_change(block, version, &change, &mut op).unwrap();
                    exp.redo_bytes += change_record_bytes(len);
                    exp.entries += 1;
                    exp.changes += 1;
                    let e = exp.max_version.entry(block).or_default();
                    *e = (*e).max(version);
                }
                let lsn = log.commit(&mut op).unwrap();
                assert!(
                    log.written() >= lsn,
                    "commit at LSN {lsn} returned before the log was written there"
                );
                exp.redo_bytes += COMMIT_RECORD_BYTES as u64;
                exp.entries += 1;
                exp.commits += 1;
                slot.publish(&mut op);
            }
            exp
        }));
    }
    let mut expected = Expected::default();
    for h in handles {
        expected.add(h.join().unwrap());
    }
    expected
}

/// The checks every workload must pass, on any device; returns the counts.
fn check_counts_and_log(
    started: &Started,
    file: &DeviceFile,
    cfg: &RedoConfig,
    expected: &Expected,
) -> Counts {
    // After stop: the log writer publishes each write after waking its committers.
    let summary = started.log.stop().unwrap();
    let counts = started.hub.drain();
    assert_eq!(counts.get(Stat::UserCommits), expected.commits);
    assert_eq!(counts.get(Stat::CommitsUncovered), 0);
    assert_eq!(counts.event(Event::LogFileSync).waits, expected.commits);
    assert_eq!(counts.get(Stat::RedoSize), expected.redo_bytes);
    assert_eq!(counts.get(Stat::RedoEntries), expected.entries);
    assert_eq!(summary.bytes_generated, expected.redo_bytes);
    assert_eq!(summary.bytes_written, summary.bytes_generated);
    assert_eq!(counts.get(Stat::RedoBytesWritten), expected.redo_bytes);
    assert_eq!(counts.get(Stat::RedoWrites), summary.writes);
    assert_eq!(
        counts.event(Event::LogFileParallelWrite).waits,
        summary.writes
    );
    let bb = u64::from(cfg.block_bytes);
    let payload = bb - REDO_BLOCK_HEADER_BYTES as u64;
    let blocks = counts.get(Stat::RedoBlocksWritten);
    assert_eq!(
        blocks * payload,
        expected.redo_bytes + counts.get(Stat::RedoWastage),
        "blocks written = record bytes + padding"
    );
    // No request larger than max_write_bytes: at least blocks × block / max requests.
    assert!(
        counts.get(Stat::RedoWriteIoRequests) >= (blocks * bb).div_ceil(cfg.max_write_bytes),
        "{} requests for {} bytes with {}-byte writes",
        counts.get(Stat::RedoWriteIoRequests),
        blocks * bb,
        cfg.max_write_bytes
    );
    assert!(counts.get(Stat::RedoWriteIoRequests) >= summary.writes);
    assert!(
        counts.background_cpu_ns > 0,
        "the log writer's CPU is counted"
    );
    assert!(!started.health.failed());

    // Everything fits in the area: the log reads back whole.
    let scan = scan_log(file, cfg).unwrap();
    assert_eq!(summary.wraps, 0);
    assert_eq!(scan.blocks, blocks);
    assert_eq!(scan.records, expected.entries);
    assert_eq!(scan.commit_records, expected.commits);
    assert_eq!(scan.change_records, expected.changes);
    assert_eq!(scan.max_version, expected.max_version);
    counts
}

#[test]
fn sixteen_sessions_commit_covered_and_grouped_with_exact_redo_size() {
    let dir = scratch();
    let path = sparse_file(dir.path(), "redo", 16 * MIB);
    let file = open(&path, OpenMode::WRITE_EXCLUSIVE);
    let cfg = config(&file, 8 * MIB, MIB, 8 * KIB);
    let reader = file.try_clone().unwrap();
    let started = start(file, cfg);
    let expected = run_sessions(&started, 16, 60);
    let counts = check_counts_and_log(&started, &reader, &cfg, &expected);
    assert!(
        counts.get(Stat::RedoWrites) < counts.get(Stat::UserCommits),
        "group commit: {} writes for {} commits",
        counts.get(Stat::RedoWrites),
        counts.get(Stat::UserCommits)
    );
}

#[test]
fn commits_that_arrive_during_a_write_share_the_next_one() {
    let dir = scratch();
    let path = sparse_file(dir.path(), "redo", 4 * MIB);
    let file = open(&path, OpenMode::WRITE_EXCLUSIVE);
    let cfg = config(&file, 2 * MIB, 256 * KIB, MIB);
    let started = start(file, cfg);
    // Hold the writer as if a write were in flight while 16 sessions commit.
    started.log.hold_writer(true);
    let slot = started.hub.slot();
    let sessions: Vec<_> = (0..16)
        .map(|_| {
            let log = Arc::clone(&started.log);
            let slot = Arc::clone(&slot);
            thread::spawn(move || {
                let mut op = OpStats::new();
                let lsn = log.commit(&mut op).unwrap();
                assert!(log.written() >= lsn);
                slot.publish(&mut op);
            })
        })
        .collect();
    let all = 16 * COMMIT_RECORD_BYTES as u64;
    wait_until("16 commit records", || started.log.appended() == all);
    assert_eq!(started.log.written(), 0, "no write while held");
    started.log.hold_writer(false);
    for s in sessions {
        s.join().unwrap();
    }
    assert_eq!(started.log.written(), all);
    let summary = started.log.stop().unwrap();
    let counts = started.hub.drain();
    assert_eq!(counts.get(Stat::UserCommits), 16);
    assert_eq!(counts.get(Stat::RedoWrites), 1, "one write covers all 16");
    assert_eq!(counts.get(Stat::CommitsUncovered), 0);
    assert_eq!(summary.writes, 1);
    assert_eq!(summary.bytes_written, all);
}

#[test]
fn a_commit_released_before_its_write_is_counted_as_uncovered() {
    let dir = scratch();
    let path = sparse_file(dir.path(), "redo", 4 * MIB);
    let file = open(&path, OpenMode::WRITE_EXCLUSIVE);
    let cfg = config(&file, 2 * MIB, 256 * KIB, MIB);
    let started = start(file, cfg);
    let mut op = OpStats::new();
    started.log.hold_writer(true);
    started.log.release_commits_early(true);
    let lsn = started.log.commit(&mut op).unwrap();
    assert!(started.log.written() < lsn);
    assert_eq!(
        op.get(Stat::CommitsUncovered),
        1,
        "the violation is counted"
    );
    started.log.release_commits_early(false);
    started.log.hold_writer(false);
    let mut op = OpStats::new();
    let lsn = started.log.commit(&mut op).unwrap();
    assert!(started.log.written() >= lsn);
    assert_eq!(op.get(Stat::CommitsUncovered), 0);
    assert_eq!(op.get(Stat::UserCommits), 1);
    started.log.stop().unwrap();
}

#[test]
fn flush_to_waits_for_the_write_ahead_lsn() {
    let dir = scratch();
    let path = sparse_file(dir.path(), "redo", 4 * MIB);
    let file = open(&path, OpenMode::WRITE_EXCLUSIVE);
    let cfg = config(&file, 2 * MIB, 256 * KIB, MIB);
    let started = start(file, cfg);
    let mut op = OpStats::new();
    let lsn = started
        .log
        .append_change(7, 1, &[9; CHANGE_LITE], &mut op)
        .unwrap();
    assert_eq!(lsn, change_record_bytes(CHANGE_LITE));
    started.log.flush_to(lsn).unwrap();
    assert!(started.log.written() >= lsn);
    assert!(
        started.log.flush_to(lsn + 1).is_err(),
        "beyond the redo generated"
    );
    let summary = started.log.stop().unwrap();
    assert_eq!(summary.bytes_written, lsn);
    // After stop, nothing more is taken, and nothing hangs.
    assert!(started.log.commit(&mut op).is_err());
    assert!(started.log.append_change(7, 2, &[1; 8], &mut op).is_err());
}

#[test]
fn the_log_wraps_and_still_reads_back_the_newest_versions() {
    let dir = scratch();
    let path = sparse_file(dir.path(), "redo", 4 * MIB);
    let probe = open(&path, OpenMode::READ);
    let sector = probe.geometry().logical_sector_bytes.max(512);
    drop(probe);
    let mut block_sizes = vec![sector];
    if sector < 4096 {
        block_sizes.push(4096);
    }
    for block_bytes in block_sizes {
        // A fresh file each time: a child forked by another test (losetup) may
        // briefly hold a copy of a closed descriptor, and with it the file's lock.
        let path = sparse_file(dir.path(), &format!("redo{block_bytes}"), 4 * MIB);
        let file = open(&path, OpenMode::WRITE_EXCLUSIVE);
        let reader = file.try_clone().unwrap();
        let mut cfg = config(&file, 64 * KIB, 64 * KIB, 8 * KIB);
        cfg.block_bytes = block_bytes;
        let started = start(file, cfg);
        let mut op = OpStats::new();
        let versions = 300u64;
        for v in 1..=versions {
            for block in 0..20u64 {
                let len = if (v + block) % 4 == 0 {
                    CHANGE_HEAVY
                } else {
                    CHANGE_LITE
                };
                started
                    .log
                    .append_change(block, v, &vec![0xa5; len], &mut op)
                    .unwrap();
            }
            if v % 10 == 0 {
                started.log.commit(&mut op).unwrap();
            }
        }
        let summary = started.log.stop().unwrap();
        assert!(summary.wraps > 0, "{summary:?}");
        assert_eq!(summary.bytes_written, summary.bytes_generated);
        let scan = scan_log(&reader, &cfg).unwrap();
        assert_eq!(
            scan.blocks,
            64 * KIB / u64::from(block_bytes),
            "every block valid"
        );
        assert!(scan.records > 0 && scan.records < op.get(Stat::RedoEntries));
        for block in 0..20u64 {
            assert_eq!(
                scan.max_version.get(&block),
                Some(&versions),
                "block {block} with {block_bytes}-byte redo blocks"
            );
        }
        // A scan under another dataset id finds nothing of this one.
        let other = RedoConfig {
            dataset: cfg.dataset ^ 1,
            ..cfg
        };
        let scan = scan_log(&reader, &other).unwrap();
        assert_eq!((scan.blocks, scan.records), (0, 0));
    }
}

#[test]
fn a_full_log_buffer_makes_sessions_wait_without_losing_redo() {
    let dir = scratch();
    let path = sparse_file(dir.path(), "redo", 4 * MIB);
    let file = open(&path, OpenMode::WRITE_EXCLUSIVE);
    let reader = file.try_clone().unwrap();
    let cfg = config(&file, 2 * MIB, 64 * KIB, MIB);
    let started = start(file, cfg);
    started.log.hold_writer(true);
    let slot = started.hub.slot();
    let records = 200u64;
    let session = {
        let log = Arc::clone(&started.log);
        let slot = Arc::clone(&slot);
        thread::spawn(move || {
            let mut op = OpStats::new();
            for v in 1..=records {
                log.append_change(v % 5, v, &[3; CHANGE_HEAVY], &mut op)
                    .unwrap();
            }
            log.commit(&mut op).unwrap();
            slot.publish(&mut op);
        })
    };
    wait_until("a session waiting for log buffer space", || {
        started.log.space_waiters() > 0
    });
    started.log.hold_writer(false);
    session.join().unwrap();
    let counts = started.hub.drain();
    assert!(counts.event(Event::LogBufferSpace).waits >= 1);
    let summary = started.log.stop().unwrap();
    let generated = records * change_record_bytes(CHANGE_HEAVY) + COMMIT_RECORD_BYTES as u64;
    assert_eq!(summary.bytes_generated, generated);
    assert_eq!(summary.bytes_written, generated);
    let scan = scan_log(&reader, &cfg).unwrap();
    assert_eq!(scan.records, records + 1);
    assert_eq!(scan.change_records, records);
    for b in 0..5u64 {
        assert_eq!(scan.max_version.get(&b), Some(&(records - (5 - b) % 5)));
    }
}

#[test]
fn an_io_error_fails_commits_promptly_instead_of_hanging() {
    let dir = scratch();
    let path = sparse_file(dir.path(), "redo", 4 * MIB);
    // A read-only handle: every log write fails with EBADF.
    let file = open(&path, OpenMode::READ);
    let cfg = config(&file, 2 * MIB, 256 * KIB, MIB);
    let started = start(file, cfg);
    let (tx, rx) = mpsc::channel();
    let sessions: Vec<_> = (0..4)
        .map(|_| {
            let log = Arc::clone(&started.log);
            let tx = tx.clone();
            thread::spawn(move || {
                let mut op = OpStats::new();
                let _ = log.append_change(1, 1, &[1; CHANGE_LITE], &mut op);
                tx.send(log.commit(&mut op).map(|_| ())).unwrap();
            })
        })
        .collect();
    for _ in 0..4 {
        let result = rx.recv_timeout(HANG_GUARD).expect("a commit hung");
        let err = result.unwrap_err().to_string();
        assert!(err.contains("redo file offset"), "{err}");
    }
    for s in sessions {
        s.join().unwrap();
    }
    assert!(started.health.failed());
    let message = started.health.error().unwrap();
    assert!(message.contains("redo file offset 65536"), "{message}");
    assert!(!message.contains('\n'));
    let mut op = OpStats::new();
    assert!(started.log.append_change(2, 1, &[1; 8], &mut op).is_err());
    assert!(started.log.flush_to(started.log.appended()).is_err());
    assert!(started.log.stop().is_err());
}

#[test]
fn bad_configurations_are_refused_with_the_size_needed() {
    let dir = scratch();
    let path = sparse_file(dir.path(), "redo", 4 * MIB);
    let file = open(&path, OpenMode::WRITE_EXCLUSIVE);
    let good = config(&file, 2 * MIB, 256 * KIB, MIB);
    let cases = [
        (
            RedoConfig {
                log_buffer_bytes: 4096,
                ..good
            },
            "log buffer",
        ),
        (
            RedoConfig {
                end: good.start + 8 * 512,
                ..good
            },
            "too small",
        ),
        (
            RedoConfig {
                end: 64 * MIB,
                ..good
            },
            "holds only",
        ),
        (
            RedoConfig {
                block_bytes: 1000,
                ..good
            },
            "power of two",
        ),
    ];
    for (cfg, want) in cases {
        let hub = StatsHub::new();
        let err = RedoLog::start(
            file.try_clone().unwrap(),
            cfg,
            hub.slot(),
            Arc::new(Health::new()),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(want), "{err} (wanted {want})");
    }
}

#[test]
fn sessions_on_a_ram_loop_device() {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        scratch()
    };
    for sector in [512u32, 4096] {
        let lo = match LoopDevice::create(
            &dir.path().join(format!("redo{sector}.img")),
            16 * MIB,
            sector,
        ) {
            Ok(lo) => lo,
            Err(reason) => {
                cairn_io::test_support::prerequisite::missing(&reason);
                return;
            }
        };
        let file = open(&lo.path, OpenMode::WRITE_EXCLUSIVE);
        assert_eq!(file.geometry().logical_sector_bytes, sector);
        let reader = file.try_clone().unwrap();
        let cfg = config(&file, 8 * MIB, MIB, 16 * KIB);
        let started = start(file, cfg);
        let expected = run_sessions(&started, 8, 40);
        check_counts_and_log(&started, &reader, &cfg, &expected);
    }
}
