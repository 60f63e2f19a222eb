//! The emulation end to end, as a library: setup, run, verify on real files
//! and loop devices, and the books balanced — every block change on disk
//! after a clean shutdown, physical reads equal to cache misses, redo bytes
//! equal to the records generated and written, every commit covered.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cairn_io::host::Host;
use cairn_io::test_support::LoopDevice;
use cairn_io::EngineKind;
use cairn_kit_group::CairnTargets;
use cairn_oltp::conf::{parse_conf_str, ParsedConf};
use cairn_oltp::dataset::{self, DatasetState, SetupOptions};
use cairn_oltp::layout::Shape;
use cairn_oltp::redo::{scan_log, RedoConfig};
use cairn_oltp::run::{run_oltp, RunOptions, RunOutcome};
use cairn_oltp::session::ReadPath;
use cairn_oltp::stats::{Event, Stat};

static NOT_INTERRUPTED: AtomicBool = AtomicBool::new(false);

const BLOCK: u32 = 8192;

fn conf(text: &str) -> ParsedConf {
    parse_conf_str(text, "test.conf").unwrap()
}

struct Db {
    _dir: tempfile::TempDir,
    targets: Vec<PathBuf>,
    redo: PathBuf,
    parsed: ParsedConf,
    schemas: u32,
}

/// Load `schemas` schemas per `conf_text` onto `data_targets` new files.
fn load(conf_text: &str, schemas: u32, data_targets: usize) -> Db {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let targets: Vec<PathBuf> = (0..data_targets)
        .map(|i| dir.path().join(format!("data{i}.dbf")))
        .collect();
    let redo = dir.path().join("redo.log");
    let parsed = conf(conf_text);
    load_onto(&parsed, schemas, &targets, &redo);
    Db {
        _dir: dir,
        targets,
        redo,
        parsed,
        schemas,
    }
}

fn load_onto(parsed: &ParsedConf, schemas: u32, targets: &[PathBuf], redo: &Path) {
    let c = &parsed.conf;
    let host = Host::real();
    dataset::setup(
        targets,
        redo,
        &SetupOptions {
            host: &host,
            opener: &CairnTargets::new(None),
            shape: Shape {
                block_size: BLOCK,
                schemas,
                table_blocks: c.scale.blocks(BLOCK),
                scan_blocks: c.scan_table_sz.blocks(BLOCK),
                obfuscate: c.obfuscate_columns,
            },
            parallel: c.load_parallel_degree,
            force: false,
            progress: None,
            seed: 7,
            redo_bytes: 64 << 20,
            engine: EngineKind::Auto,
        },
        &NOT_INTERRUPTED,
    )
    .unwrap();
}

fn run(db: &Db, cache_bytes: u64, read_path: ReadPath, warmup: Duration) -> RunOutcome {
    run_on(
        &db.parsed,
        db.schemas,
        &db.targets,
        &db.redo,
        cache_bytes,
        read_path,
        warmup,
        Duration::from_millis(500),
    )
}

#[allow(clippy::too_many_arguments)]
fn run_on(
    parsed: &ParsedConf,
    schemas: u32,
    targets: &[PathBuf],
    redo: &Path,
    cache_bytes: u64,
    read_path: ReadPath,
    warmup: Duration,
    interval: Duration,
) -> RunOutcome {
    let host = Host::real();
    let opts = RunOptions {
        host: &host,
        conf: parsed,
        conf_path: "test.conf".into(),
        schemas,
        threads_per_schema: None,
        cache_bytes,
        block_size: BLOCK,
        read_path,
        batch_reads: 8,
        warmup,
        interval,
        checkpoint_interval: Duration::from_millis(700),
        log_buffer_bytes: 1 << 20,
        seed: 11,
        interrupted: &NOT_INTERRUPTED,
        engine: EngineKind::Auto,
    };
    run_oltp(targets, redo, &opts, &mut |_| {}).unwrap()
}

fn verify(db: &Db) -> dataset::VerifyReport {
    dataset::verify(
        &db.targets,
        &db.redo,
        &Host::real(),
        EngineKind::Auto,
        None,
        &NOT_INTERRUPTED,
    )
    .unwrap()
}

const MIXED: &str = "UPDATE_PCT=40\nSCAN_PCT=10\nRUN_TIME=3\nSCALE=3000\nSCAN_TABLE_SZ=40\nWORK_UNIT=16\nREDO_STRESS=LITE\nTHREADS_PER_SCHEMA=2\nLOAD_PARALLEL_DEGREE=2\n";

#[test]
fn a_mixed_run_balances_its_books_and_leaves_every_change_on_disk() {
    let db = load(MIXED, 2, 2);
    // 2 MiB: 256 buffers for 6,000+ table blocks, so most gets miss.
    let out = run(&db, 2 << 20, ReadPath::Cache, Duration::ZERO);
    let l = &out.lifetime;
    let r = &out.result;
    assert!(r.ended_early.is_none(), "{:?}", r.ended_early);
    assert_eq!(l.get(Stat::BlockCorruptions), 0);
    // Every get is a hit or a miss, and every miss is one block read into the cache.
    assert_eq!(
        l.get(Stat::SessionLogicalReads),
        l.get(Stat::CacheHits) + l.get(Stat::CacheMisses)
    );
    assert_eq!(l.get(Stat::PhysicalReadsCache), l.get(Stat::CacheMisses));
    assert!(
        l.get(Stat::CacheMisses) > 1000,
        "the small cache must force reads"
    );
    // Redo: what sessions generated is what the log writer wrote, byte for byte.
    assert!(l.get(Stat::RedoSize) > 0);
    assert_eq!(l.get(Stat::RedoSize), out.redo.bytes_generated);
    assert_eq!(out.redo.bytes_generated, out.redo.bytes_written);
    assert_eq!(l.get(Stat::RedoBytesWritten), l.get(Stat::RedoSize));
    // Every commit waited for a write that covered it; group commit batched some.
    assert!(l.get(Stat::UserCommits) > 10);
    assert_eq!(l.get(Stat::CommitsUncovered), 0);
    assert_eq!(l.event(Event::LogFileSync).waits, l.get(Stat::UserCommits));
    // Each changed block made one LITE change vector (2 × 128 bytes) of redo.
    assert!(l.get(Stat::RedoEntries) >= l.get(Stat::DbBlockChanges) + l.get(Stat::UserCommits));
    // The writer wrote, scans happened, and the report's window is a subset of the lifetime.
    assert!(l.get(Stat::PhysicalWrites) > 0);
    assert!(l.get(Stat::TableScansShort) + l.get(Stat::TableScansLong) > 0);
    assert!(r.stat("physical reads") <= l.get(Stat::PhysicalReads));
    assert!(
        r.event(Event::DbFileSequentialRead).is_some()
            || r.event(Event::DbFileParallelRead).is_some()
    );

    // After the clean shutdown every change is on disk: the versions the data
    // files hold add up to the block changes made, and every block checks.
    let v = verify(&db);
    assert_eq!(v.state, DatasetState::Clean);
    assert_eq!(v.problems_total, 0, "{:?}", v.problems);
    assert_eq!(v.table_versions, l.get(Stat::DbBlockChanges));

    // Every commit and every change is in the log on disk (the log did not wrap).
    let redo_file =
        cairn_io::DeviceFile::open(&db.redo, cairn_io::OpenMode::READ, &Host::real()).unwrap();
    let size = redo_file.geometry().size_bytes;
    let scan = scan_log(
        &redo_file,
        &RedoConfig {
            log_buffer_bytes: 1 << 20,
            start: 1 << 20,
            end: size,
            block_bytes: redo_file.geometry().logical_sector_bytes.max(512),
            max_write_bytes: 1 << 20,
            dataset: v.dataset_id,
        },
    )
    .unwrap();
    drop(redo_file);
    assert_eq!(scan.commit_records, l.get(Stat::UserCommits));
    assert_eq!(scan.change_records, l.get(Stat::DbBlockChanges));
    // Verify reads the log back too: after a clean shutdown no block is behind it.
    assert_eq!(v.redo.commits, l.get(Stat::UserCommits));
    assert_eq!(v.redo.blocks_behind, 0, "{:?}", v.redo);
    assert!(v.redo.unreadable.is_none());

    // Put one changed table block back to its load-time image (a lost write,
    // or a crash before the writer got to it): verify names it as behind the
    // redo, with the versions, and calls nothing corrupt.
    let (&id, &newest) = scan.max_version.iter().next().unwrap();
    let layout = cairn_oltp::layout::Layout::new(v.shape, db.targets.len());
    let at = layout.block_ref(id).unwrap();
    let key = dataset::key_map(v.dataset_id, at.schema, &v.shape).key_of(at.number);
    let mut image = vec![0u8; BLOCK as usize];
    cairn_oltp::block::format_table_block(&mut image, at, v.dataset_id, key, false);
    let loc = layout.locate(id);
    let saved = {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&db.targets[loc.target])
            .unwrap();
        let mut saved = vec![0u8; BLOCK as usize];
        f.read_exact_at(&mut saved, loc.offset_bytes).unwrap();
        f.write_all_at(&image, loc.offset_bytes).unwrap();
        f.sync_all().unwrap();
        saved
    };
    let rolled = verify(&db);
    assert_eq!(rolled.problems_total, 0, "an old image is not corrupt");
    assert_eq!(rolled.redo.blocks_behind, 1);
    let behind = &rolled.redo.behind[0];
    assert_eq!((behind.schema, behind.number), (at.schema + 1, at.number));
    assert!(
        behind.problem.contains(&format!("version {newest}")),
        "{}",
        behind.problem
    );
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&db.targets[loc.target])
            .unwrap();
        f.write_all_at(&saved, loc.offset_bytes).unwrap();
        f.sync_all().unwrap();
    }

    // A second run continues from there.
    let again = run(&db, 2 << 20, ReadPath::Cache, Duration::ZERO);
    let v2 = verify(&db);
    assert_eq!(v2.problems_total, 0);
    assert_eq!(
        v2.table_versions,
        l.get(Stat::DbBlockChanges) + again.lifetime.get(Stat::DbBlockChanges)
    );
}

#[test]
fn work_loop_runs_exactly_that_many_operations_per_session() {
    let text = "UPDATE_PCT=20\nSCAN_PCT=0\nRUN_TIME=0\nWORK_LOOP=50\nSCALE=2000\nSCAN_TABLE_SZ=8\nWORK_UNIT=8\nTHREADS_PER_SCHEMA=3\n";
    let db = load(text, 1, 1);
    let out = run(&db, 4 << 20, ReadPath::Cache, Duration::ZERO);
    assert_eq!(out.operations, vec![50, 50, 50]);
    // The default engine is io_uring where the kernel allows it.
    let auto = cairn_io::new_file_engine(EngineKind::Auto, 1).unwrap();
    assert_eq!(out.result.settings.engine, auto.name());
    assert_eq!(out.lifetime.get(Stat::ExecuteCount), 150);
    // Each select or update reads WORK_UNIT table rows (and the leaf that maps them).
    assert!(out.lifetime.get(Stat::RowsTouched) >= 150 * 8);
    assert_eq!(
        verify(&db).table_versions,
        out.lifetime.get(Stat::DbBlockChanges)
    );
}

/// `--engine sync`: the writers and the batched reads on pread/pwrite, and
/// the books balance just the same.
#[test]
fn a_run_on_the_sync_engine_says_so_and_balances_its_books() {
    let text = "UPDATE_PCT=30\nSCAN_PCT=0\nRUN_TIME=0\nWORK_LOOP=60\nSCALE=2000\nSCAN_TABLE_SZ=8\nWORK_UNIT=8\nTHREADS_PER_SCHEMA=2\n";
    let db = load(text, 1, 1);
    let host = Host::real();
    let opts = RunOptions {
        host: &host,
        conf: &db.parsed,
        conf_path: "test.conf".into(),
        schemas: db.schemas,
        threads_per_schema: None,
        cache_bytes: 2 << 20,
        block_size: BLOCK,
        read_path: ReadPath::Cache,
        batch_reads: 8,
        warmup: Duration::ZERO,
        interval: Duration::from_millis(500),
        checkpoint_interval: Duration::from_millis(300),
        log_buffer_bytes: 1 << 20,
        seed: 5,
        interrupted: &NOT_INTERRUPTED,
        engine: EngineKind::Sync,
    };
    let out = run_oltp(&db.targets, &db.redo, &opts, &mut |_| {}).unwrap();
    assert_eq!(out.result.settings.engine, "sync");
    assert_eq!(out.operations, vec![60, 60]);
    let l = &out.lifetime;
    assert!(l.event(Event::LogFileParallelWrite).waits > 0);
    assert!(l.event(Event::DbFileParallelWrite).waits > 0);
    assert_eq!(l.get(Stat::UserCommits), l.event(Event::LogFileSync).waits);
    assert_eq!(verify(&db).table_versions, l.get(Stat::DbBlockChanges));
}

#[test]
fn the_direct_path_reads_around_the_cache() {
    let text = "UPDATE_PCT=0\nSCAN_PCT=0\nRUN_TIME=2\nSCALE=3000\nSCAN_TABLE_SZ=8\nWORK_UNIT=16\nTHREADS_PER_SCHEMA=2\n";
    let db = load(text, 1, 1);
    let out = run(&db, 2 << 20, ReadPath::Direct, Duration::ZERO);
    let l = &out.lifetime;
    assert!(l.get(Stat::PhysicalReadsDirect) > 100);
    assert_eq!(
        l.get(Stat::PhysicalReadsDirect),
        l.event(Event::DirectPathRead).waits
    );
    // Only the index leaves went through the cache.
    assert_eq!(l.get(Stat::PhysicalReadsCache), l.get(Stat::CacheMisses));
    assert!(
        l.get(Stat::CacheMisses) <= 3,
        "one leaf block per 1,016 keys"
    );
    assert_eq!(l.get(Stat::UserCommits), 0);
}

#[test]
fn a_run_refuses_a_dataset_of_another_shape_and_changes_nothing() {
    let db = load(MIXED, 1, 1);
    let before = std::fs::read(&db.targets[0]).unwrap();
    let other = conf(&MIXED.replace("SCALE=3000", "SCALE=6000"));
    let host = Host::real();
    let opts = RunOptions {
        host: &host,
        conf: &other,
        conf_path: "test.conf".into(),
        schemas: 1,
        threads_per_schema: None,
        cache_bytes: 2 << 20,
        block_size: BLOCK,
        read_path: ReadPath::Cache,
        batch_reads: 8,
        warmup: Duration::ZERO,
        interval: Duration::from_secs(1),
        checkpoint_interval: Duration::from_secs(1),
        log_buffer_bytes: 1 << 20,
        seed: 1,
        interrupted: &NOT_INTERRUPTED,
        engine: EngineKind::Auto,
    };
    let err = run_oltp(&db.targets, &db.redo, &opts, &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("SCALE"), "{err}");
    // More schemas than were loaded.
    let opts = RunOptions {
        conf: &db.parsed,
        schemas: 2,
        ..opts
    };
    let err = run_oltp(&db.targets, &db.redo, &opts, &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("schema"), "{err}");
    assert!(
        std::fs::read(&db.targets[0]).unwrap() == before,
        "a refused run wrote to the data"
    );
}

#[test]
fn a_cache_too_small_for_the_sessions_is_refused_before_any_io() {
    let db = load(MIXED, 1, 1);
    let host = Host::real();
    let opts = RunOptions {
        host: &host,
        conf: &db.parsed,
        conf_path: "test.conf".into(),
        schemas: 1,
        threads_per_schema: Some(64),
        cache_bytes: 1 << 20,
        block_size: BLOCK,
        read_path: ReadPath::Cache,
        batch_reads: 32,
        warmup: Duration::ZERO,
        interval: Duration::from_secs(1),
        checkpoint_interval: Duration::from_secs(1),
        log_buffer_bytes: 1 << 20,
        seed: 1,
        interrupted: &NOT_INTERRUPTED,
        engine: EngineKind::Auto,
    };
    let err = run_oltp(&db.targets, &db.redo, &opts, &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("--cache"), "{err}");
    assert_eq!(verify(&db).state, DatasetState::Clean);
}

/// The CI run: 60 s on two sparse files (data and redo) behind loop
/// devices, so that each has its own /proc/diskstats line, and the report's
/// I/O figures must match the kernel's within 5%.
#[test]
fn a_sixty_second_run_matches_the_kernels_diskstats_within_five_percent() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data_file = dir.path().join("data.img");
    let redo_file = dir.path().join("redo.img");
    let data = match LoopDevice::create(&data_file, 256 << 20, 4096) {
        Ok(d) => d,
        Err(reason) => {
            cairn_io::test_support::prerequisite::missing(&reason);
            return;
        }
    };
    let redo = LoopDevice::create(&redo_file, 64 << 20, 4096).unwrap();
    let text = "UPDATE_PCT=25\nSCAN_PCT=0\nRUN_TIME=60\nSCALE=16M\nSCAN_TABLE_SZ=1M\nWORK_UNIT=32\nREDO_STRESS=LITE\nTHREADS_PER_SCHEMA=2\nLOAD_PARALLEL_DEGREE=2\n";
    let parsed = conf(text);
    let targets = vec![data.path.clone()];
    load_onto(&parsed, 2, &targets, &redo.path);
    let out = run_on(
        &parsed,
        2,
        &targets,
        &redo.path,
        8 << 20,
        ReadPath::Cache,
        Duration::from_secs(2),
        Duration::from_secs(2),
    );
    let r = &out.result;
    assert!(r.ended_early.is_none(), "{:?}", r.ended_early);
    assert!(
        (r.elapsed_s - 60.0).abs() < 2.0,
        "measured {} s",
        r.elapsed_s
    );
    assert_eq!(r.crosscheck.len(), 2, "{:?}", r.crosscheck);
    let within = |cairn: u64, kernel: u64, what: &str, dev: &str| {
        let ratio = kernel as f64 / cairn.max(1) as f64;
        assert!(
            (0.95..=1.05).contains(&ratio),
            "{dev} {what}: Cairn {cairn}, kernel {kernel} (ratio {ratio:.3})"
        );
    };
    for c in &r.crosscheck {
        eprintln!(
            "{}: reads {} / {} (kernel/Cairn {:.4}), writes {} / {} ({:.4}), read bytes {:.4}, write bytes {:.4}",
            c.device,
            c.kernel_reads,
            c.cairn_reads,
            c.kernel_reads as f64 / c.cairn_reads.max(1) as f64,
            c.kernel_writes,
            c.cairn_writes,
            c.kernel_writes as f64 / c.cairn_writes.max(1) as f64,
            c.kernel_read_bytes as f64 / c.cairn_read_bytes.max(1) as f64,
            c.kernel_write_bytes as f64 / c.cairn_write_bytes.max(1) as f64,
        );
    }
    for c in &r.crosscheck {
        if c.cairn_reads > 0 || c.kernel_reads > 1000 {
            within(c.cairn_reads, c.kernel_reads, "read requests", &c.device);
            within(
                c.cairn_read_bytes,
                c.kernel_read_bytes,
                "read bytes",
                &c.device,
            );
        }
        within(c.cairn_writes, c.kernel_writes, "write requests", &c.device);
        within(
            c.cairn_write_bytes,
            c.kernel_write_bytes,
            "write bytes",
            &c.device,
        );
    }
    assert!(r.stat("physical read IO requests") > 10_000);
    assert_eq!(out.lifetime.get(Stat::CommitsUncovered), 0);
    let v = dataset::verify(
        &targets,
        &redo.path,
        &Host::real(),
        EngineKind::Auto,
        None,
        &NOT_INTERRUPTED,
    )
    .unwrap();
    assert_eq!(v.problems_total, 0);
    assert_eq!(v.table_versions, out.lifetime.get(Stat::DbBlockChanges));
}

#[test]
fn a_run_refused_after_opening_leaves_the_dataset_clean() {
    let db = load(MIXED, 1, 1);
    let host = Host::real();
    let opts = RunOptions {
        host: &host,
        conf: &db.parsed,
        conf_path: "test.conf".into(),
        schemas: 1,
        threads_per_schema: None,
        cache_bytes: 2 << 20,
        block_size: BLOCK,
        read_path: ReadPath::Cache,
        batch_reads: 8,
        warmup: Duration::ZERO,
        interval: Duration::from_secs(1),
        checkpoint_interval: Duration::from_secs(1),
        // Below the log writer's minimum: refused when the log starts.
        log_buffer_bytes: 4096,
        seed: 1,
        interrupted: &NOT_INTERRUPTED,
        engine: EngineKind::Auto,
    };
    let err = run_oltp(&db.targets, &db.redo, &opts, &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("--log-buffer"), "{err}");
    assert_eq!(verify(&db).state, DatasetState::Clean);
    // A cache bigger than the machine is refused with the figure, not an abort.
    let opts = RunOptions {
        cache_bytes: 1 << 40,
        log_buffer_bytes: 1 << 20,
        ..opts
    };
    let err = run_oltp(&db.targets, &db.redo, &opts, &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("--cache") && err.contains("memory"), "{err}");
    let opts = RunOptions {
        cache_bytes: 1 << 50,
        ..opts
    };
    let err = run_oltp(&db.targets, &db.redo, &opts, &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("--cache") && err.contains("smaller"), "{err}");
    assert_eq!(verify(&db).state, DatasetState::Clean);
}

#[test]
fn a_run_that_ends_during_its_warm_up_says_so() {
    let text = "UPDATE_PCT=0\nRUN_TIME=0\nWORK_LOOP=5\nSCALE=2000\nSCAN_TABLE_SZ=8\nWORK_UNIT=8\n";
    let db = load(text, 1, 1);
    let out = run(&db, 4 << 20, ReadPath::Cache, Duration::from_secs(30));
    let why = out.result.ended_early.unwrap_or_default();
    assert!(why.contains("warm-up"), "{why:?}");
}
