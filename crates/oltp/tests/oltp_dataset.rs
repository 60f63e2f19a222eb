//! The emulated database's data on real files (and loop devices as root):
//! setup, open for a run, verify, and what each refuses.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use cairn_io::host::Host;
use cairn_io::EngineKind;
use cairn_kit_group::CairnTargets;
use cairn_oltp::block;
use cairn_oltp::dataset::{
    self, key_map, DatasetState, LoadReport, OpenOptions, SetupOptions, REDO_BYTES_MIN,
};
use cairn_oltp::layout::{Layout, Segment, Shape};
use cairn_oltp::OltpError;

const MIB: u64 = 1 << 20;

fn shape(schemas: u32, table_blocks: u64, scan_blocks: u64, obfuscate: bool) -> Shape {
    Shape {
        block_size: 8192,
        schemas,
        table_blocks,
        scan_blocks,
        obfuscate,
    }
}

/// Verify the dataset on `targets` and `redo` (the default engine, no
/// progress, never interrupted).
fn verify_all(targets: &[PathBuf], redo: &Path, host: &Host) -> dataset::VerifyReport {
    dataset::verify(
        targets,
        redo,
        host,
        EngineKind::Auto,
        None,
        &AtomicBool::new(false),
    )
    .unwrap()
}

/// Targets opened as `cairn bench oltp setup` opens them.
static CAIRN: CairnTargets = CairnTargets::new(None);

fn opts(host: &Host, shape: Shape) -> SetupOptions<'_> {
    SetupOptions {
        host,
        opener: &CAIRN,
        shape,
        parallel: 2,
        force: false,
        progress: None,
        seed: 1,
        redo_bytes: REDO_BYTES_MIN,
        engine: EngineKind::Auto,
    }
}

fn open_opts(host: &Host, shape: Shape) -> OpenOptions<'_> {
    OpenOptions {
        host,
        block_size: shape.block_size,
        table_blocks: shape.table_blocks,
        scan_blocks: shape.scan_blocks,
        schemas: shape.schemas,
    }
}

fn paths(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| dir.join(n)).collect()
}

fn setup(targets: &[PathBuf], redo: &Path, o: &SetupOptions) -> LoadReport {
    dataset::setup(targets, redo, o, &AtomicBool::new(false)).unwrap()
}

fn usage(e: OltpError) -> String {
    match e {
        OltpError::Usage(m) => m,
        other => panic!("expected a usage error, got {other}"),
    }
}

fn read_block(path: &Path, offset: u64, bs: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).unwrap();
    let mut b = vec![0u8; bs];
    f.read_exact_at(&mut b, offset).unwrap();
    b
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
    f.sync_all().unwrap();
}

/// Every block of a loaded dataset, in block order.
fn all_blocks(layout: &Layout, targets: &[PathBuf]) -> Vec<Vec<u8>> {
    let files: Vec<Vec<u8>> = targets.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let bs = layout.block_bytes() as usize;
    (0..layout.total_blocks())
        .map(|id| {
            let at = layout.locate(id);
            let o = at.offset_bytes as usize;
            files[at.target][o..o + bs].to_vec()
        })
        .collect()
}

#[test]
fn setup_then_verify_is_clean() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1"]);
    let redo = dir.path().join("redo");
    let s = shape(2, 2000, 100, false);
    let report = setup(&targets, &redo, &opts(&host, s));
    let layout = Layout::new(s, 1);
    assert_eq!(report.blocks, layout.total_blocks());
    assert_eq!(report.bytes, layout.total_blocks() * 8192);
    assert_eq!(report.created.len(), 2);
    assert!(report.targets[0].created && report.redo.created);
    assert_eq!(
        std::fs::metadata(&targets[0]).unwrap().len(),
        layout.target_bytes_needed()
    );
    assert_eq!(std::fs::metadata(&redo).unwrap().len(), REDO_BYTES_MIN);

    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.dataset_id, report.dataset_id);
    assert_eq!(v.state, DatasetState::Clean);
    assert_eq!(v.blocks_checked, layout.total_blocks());
    assert_eq!(v.table_versions, 0);
    assert_eq!(v.problems_total, 0, "{:?}", v.problems.first());

    // A run opens it, marks it running; a crash leaves it so, and verify says so.
    let mut ds = dataset::open(&targets, &redo, &open_opts(&host, s)).unwrap();
    assert_eq!(ds.state_at_open, DatasetState::Clean);
    assert_eq!(ds.id, report.dataset_id);
    assert_eq!(ds.redo_start, 1 << 20);
    assert_eq!(ds.redo_end, REDO_BYTES_MIN);
    ds.mark(DatasetState::Running).unwrap();
    drop(ds);
    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.state, DatasetState::Running);
    assert_eq!(v.problems_total, 0);
    let ds = dataset::open(&targets, &redo, &open_opts(&host, s)).unwrap();
    assert_eq!(ds.state_at_open, DatasetState::Running);
}

#[test]
fn verify_counts_versions_of_updated_blocks() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1"]);
    let redo = dir.path().join("redo");
    let s = shape(1, 500, 0, false);
    let report = setup(&targets, &redo, &opts(&host, s));
    let layout = Layout::new(s, 1);
    // Update table block 7 three times, as a run's writer would leave it.
    let at = layout.locate(7);
    let mut b = read_block(&targets[0], at.offset_bytes, 8192);
    for _ in 0..3 {
        block::update_row(&mut b, 2, &mut Vec::new());
    }
    write_at(&targets[0], at.offset_bytes, &b);
    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.problems_total, 0, "{:?}", v.problems);
    assert_eq!(v.table_versions, 3);
    assert_eq!(v.dataset_id, report.dataset_id);
}

#[test]
fn two_targets_get_extents_round_robin() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1", "d2"]);
    let redo = dir.path().join("redo");
    let s = shape(2, 2000, 100, false);
    let report = setup(&targets, &redo, &opts(&host, s));
    let layout = Layout::new(s, 2);
    let eb = layout.extent_blocks();
    assert_eq!(layout.locate(0).target, 0);
    assert_eq!(layout.locate(eb).target, 1);
    for id in [
        0,
        5,
        eb - 1,
        eb,
        eb + 9,
        2 * eb + 3,
        3 * eb,
        layout.total_blocks() - 1,
    ] {
        let at = layout.locate(id);
        let r = layout.block_ref(id).unwrap();
        let b = read_block(&targets[at.target], at.offset_bytes, 8192);
        assert_eq!(
            block::check(&b, r, report.dataset_id),
            Ok(0),
            "block {id} at {at:?}"
        );
        // The same offset on the other target holds another block.
        let other = read_block(&targets[1 - at.target], at.offset_bytes, 8192);
        assert!(block::check(&other, r, report.dataset_id).is_err());
    }
    // Each target holds its share: both sized alike.
    let needed = layout.target_bytes_needed();
    for t in &targets {
        assert_eq!(std::fs::metadata(t).unwrap().len(), needed);
    }
    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.problems_total, 0);
    assert_eq!(v.blocks_checked, layout.total_blocks());
}

#[test]
fn the_index_maps_every_key_to_its_row_scattered_over_the_table() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1"]);
    let redo = dir.path().join("redo");
    let s = shape(1, 2000, 0, false);
    let report = setup(&targets, &redo, &opts(&host, s));
    let layout = Layout::new(s, 1);
    let blocks = all_blocks(&layout, &targets);
    let kpl = layout.keys_per_leaf();
    let mut jumps = 0;
    let mut last = None;
    for key in 0..s.table_blocks {
        let leaf = layout.segment_start(0, Segment::Index) + key / kpl;
        let entry = block::index_entry(&blocks[leaf as usize], (key % kpl) as usize).unwrap();
        assert_eq!(entry, key_map(report.dataset_id, 0, &s).block_of(key));
        let row = block::read_row(
            &blocks[entry as usize],
            layout.block_ref(entry).unwrap(),
            report.dataset_id,
        )
        .unwrap();
        assert_eq!(row.key, key);
        if last.is_some_and(|l: u64| l.abs_diff(entry) > 1) {
            jumps += 1;
        }
        last = Some(entry);
    }
    assert!(
        jumps > 1900,
        "consecutive keys should land on scattered blocks: {jumps}"
    );
}

#[test]
fn a_corrupted_block_is_reported_with_its_place() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1", "d2"]);
    let redo = dir.path().join("redo");
    let s = shape(2, 2000, 100, false);
    let report = setup(&targets, &redo, &opts(&host, s));
    let layout = Layout::new(s, 2);
    // Schema 2's table block 300, and schema 1's first index leaf.
    let bad_row = layout.segment_start(1, Segment::Table) + 300;
    let bad_leaf = layout.segment_start(0, Segment::Index);
    for id in [bad_row, bad_leaf] {
        let at = layout.locate(id);
        write_at(&targets[at.target], at.offset_bytes + 1000, &[0x5A; 8]);
    }
    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.problems_total, 2, "{:?}", v.problems);
    assert_eq!(v.dataset_id, report.dataset_id);
    // In block order: the leaf (schema 1) first.
    let leaf = &v.problems[0];
    let at = layout.locate(bad_leaf);
    assert_eq!(leaf.target, targets[at.target].display().to_string());
    assert_eq!(leaf.offset_bytes, at.offset_bytes);
    assert_eq!(
        (leaf.schema, leaf.segment.as_str(), leaf.number),
        (1, "index", 0)
    );
    assert!(leaf.problem.starts_with("bad checksum"), "{}", leaf.problem);
    let row = &v.problems[1];
    let at = layout.locate(bad_row);
    assert_eq!(row.target, targets[at.target].display().to_string());
    assert_eq!(row.offset_bytes, at.offset_bytes);
    assert_eq!(
        (row.schema, row.segment.as_str(), row.number),
        (2, "table", 300)
    );
    assert!(row.problem.starts_with("bad checksum"), "{}", row.problem);
    assert_eq!(v.blocks_checked, layout.total_blocks());
}

#[test]
fn a_misdirected_write_is_named() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1"]);
    let redo = dir.path().join("redo");
    let s = shape(1, 500, 0, false);
    setup(&targets, &redo, &opts(&host, s));
    let layout = Layout::new(s, 1);
    let b17 = read_block(&targets[0], layout.locate(17).offset_bytes, 8192);
    write_at(&targets[0], layout.locate(5).offset_bytes, &b17);
    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.problems_total, 1);
    assert_eq!(v.problems[0].number, 5);
    assert_eq!(
        v.problems[0].problem,
        "holds schema 1 table block 17, expected schema 1 table block 5"
    );
}

fn digest(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn a_target_too_small_is_refused_with_the_size_needed_and_left_untouched() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("small");
    let content: Vec<u8> = (0..4 * MIB).map(|i| (i % 251) as u8).collect();
    std::fs::write(&target, &content).unwrap();
    let redo = dir.path().join("redo");
    let s = shape(2, 2000, 100, false);
    let e = dataset::setup(
        std::slice::from_ref(&target),
        &redo,
        &opts(&host, s),
        &AtomicBool::new(false),
    )
    .unwrap_err();
    let needed = Layout::new(s, 1).target_bytes_needed();
    assert_eq!(
        usage(e),
        format!(
            "data target {} holds 4 MiB; 2 schemas × SCALE 2000 blocks of 8 KiB (+ index and scan tables) over 1 target need {} MiB",
            target.display(),
            needed / MIB
        )
    );
    assert_eq!(digest(&target), content, "nothing written");
    assert!(
        !redo.exists(),
        "the redo file it would have created is not left behind"
    );
}

/// An ext4 superblock's magic, with the fields a recogniser checks for sanity.
fn plant_ext4(path: &Path) {
    let mut sb = [0u8; 1024];
    sb[0x18..0x1C].copy_from_slice(&2u32.to_le_bytes()); // log block size: 4 KiB
    sb[0x20..0x24].copy_from_slice(&32768u32.to_le_bytes()); // blocks per group
    sb[0x38..0x3A].copy_from_slice(&0xEF53u16.to_le_bytes());
    write_at(path, 1024, &sb);
}

#[test]
fn a_target_with_someone_elses_data_is_refused_without_force() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("fs");
    let s = shape(1, 500, 0, false);
    let needed = Layout::new(s, 1).target_bytes_needed();
    std::fs::File::create(&target)
        .unwrap()
        .set_len(needed)
        .unwrap();
    plant_ext4(&target);
    let before = digest(&target);
    let redo = dir.path().join("redo");
    let e = dataset::setup(
        std::slice::from_ref(&target),
        &redo,
        &opts(&host, s),
        &AtomicBool::new(false),
    )
    .unwrap_err();
    let m = usage(e);
    assert!(
        m.contains("carries an ext2 filesystem") && m.contains("--force"),
        "{m}"
    );
    assert_eq!(digest(&target), before, "nothing written");
    assert!(!redo.exists());
    // With force, it is overwritten.
    let o = SetupOptions {
        force: true,
        ..opts(&host, s)
    };
    setup(std::slice::from_ref(&target), &redo, &o);
    assert_ne!(digest(&target), before);
}

#[test]
fn setup_refuses_a_path_twice_and_the_redo_among_the_targets() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let s = shape(1, 500, 0, false);
    let a = dir.path().join("a");
    std::fs::File::create(&a)
        .unwrap()
        .set_len(64 * MIB)
        .unwrap();
    let redo = dir.path().join("redo");
    let twice = vec![a.clone(), a.clone()];
    let m =
        usage(dataset::setup(&twice, &redo, &opts(&host, s), &AtomicBool::new(false)).unwrap_err());
    assert!(m.contains("is given twice"), "{m}");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let m = usage(
        dataset::setup(
            &[a.clone(), link],
            &redo,
            &opts(&host, s),
            &AtomicBool::new(false),
        )
        .unwrap_err(),
    );
    assert!(m.contains("are the same device"), "{m}");
    let m = usage(
        dataset::setup(
            std::slice::from_ref(&a),
            &a,
            &opts(&host, s),
            &AtomicBool::new(false),
        )
        .unwrap_err(),
    );
    assert!(
        m.contains("redo file") && m.contains("also data target"),
        "{m}"
    );
    let m =
        usage(dataset::setup(&[], &redo, &opts(&host, s), &AtomicBool::new(false)).unwrap_err());
    assert!(m.contains("no data target"), "{m}");
    let m = usage(
        dataset::setup(
            &[PathBuf::from("/dev/cairn-no-such-disk")],
            &redo,
            &opts(&host, s),
            &AtomicBool::new(false),
        )
        .unwrap_err(),
    );
    assert!(m.contains("never created"), "{m}");
    assert!(!redo.exists());
}

#[test]
fn open_refuses_an_unloaded_target_and_writes_nothing() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("blank");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(64 * MIB)
        .unwrap();
    write_at(&target, 0, b"someone's bytes");
    let before = digest(&target);
    let redo = dir.path().join("redo");
    std::fs::File::create(&redo)
        .unwrap()
        .set_len(REDO_BYTES_MIN)
        .unwrap();
    let s = shape(1, 500, 0, false);
    let m = usage(
        dataset::open(std::slice::from_ref(&target), &redo, &open_opts(&host, s)).unwrap_err(),
    );
    assert_eq!(
        m,
        format!(
            "{} is not a loaded Cairn OLTP data target (no dataset header): run 'cairn bench oltp setup' first",
            target.display()
        )
    );
    assert_eq!(digest(&target), before);
    let m = usage(
        dataset::verify(
            std::slice::from_ref(&target),
            &redo,
            &host,
            EngineKind::Auto,
            None,
            &AtomicBool::new(false),
        )
        .unwrap_err(),
    );
    assert!(m.contains("no dataset header"), "{m}");
}

#[test]
fn open_refuses_another_shape_the_wrong_order_and_another_datasets_redo() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1", "d2"]);
    let redo = dir.path().join("redo");
    let s = shape(2, 2000, 100, false);
    setup(&targets, &redo, &opts(&host, s));

    let asked = OpenOptions {
        table_blocks: 4000,
        ..open_opts(&host, s)
    };
    assert_eq!(
        usage(dataset::open(&targets, &redo, &asked).unwrap_err()),
        "loaded with SCALE=2000 blocks; slob.conf says 4000: run setup again or use the loaded SCALE"
    );
    let asked = OpenOptions {
        scan_blocks: 50,
        ..open_opts(&host, s)
    };
    assert!(usage(dataset::open(&targets, &redo, &asked).unwrap_err())
        .starts_with("loaded with SCAN_TABLE_SZ=100 blocks; slob.conf says 50"));
    let asked = OpenOptions {
        block_size: 16384,
        ..open_opts(&host, s)
    };
    assert!(usage(dataset::open(&targets, &redo, &asked).unwrap_err())
        .starts_with("loaded with 8192-byte blocks"));
    let asked = OpenOptions {
        schemas: 3,
        ..open_opts(&host, s)
    };
    assert!(usage(dataset::open(&targets, &redo, &asked).unwrap_err())
        .starts_with("the run asks for 3 schemas; 2 were loaded"));
    // Fewer schemas than loaded is fine.
    let asked = OpenOptions {
        schemas: 1,
        ..open_opts(&host, s)
    };
    drop(dataset::open(&targets, &redo, &asked).unwrap());

    let reversed = vec![targets[1].clone(), targets[0].clone()];
    assert_eq!(
        usage(dataset::open(&reversed, &redo, &open_opts(&host, s)).unwrap_err()),
        format!(
            "the data targets are not in load order: {} belongs at position 2, {} belongs at position 1; give them as {} {}",
            targets[1].display(),
            targets[0].display(),
            targets[0].display(),
            targets[1].display()
        )
    );
    let m = usage(dataset::open(&targets[..1], &redo, &open_opts(&host, s)).unwrap_err());
    assert!(m.contains("was loaded on 2 data targets; 1 given"), "{m}");

    // Another dataset's redo file (and another dataset's target).
    let other = paths(dir.path(), &["o1"]);
    let other_redo = dir.path().join("other-redo");
    let o = setup(&other, &other_redo, &opts(&host, s));
    let m = usage(dataset::open(&targets, &other_redo, &open_opts(&host, s)).unwrap_err());
    assert!(
        m.starts_with(&format!(
            "redo file {} belongs to dataset {:016x}",
            other_redo.display(),
            o.dataset_id
        )),
        "{m}"
    );
    let mixed = vec![targets[0].clone(), other[0].clone()];
    let m = usage(dataset::open(&mixed, &redo, &open_opts(&host, s)).unwrap_err());
    assert!(m.contains("give the data targets of one dataset"), "{m}");
    // All still intact.
    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.problems_total, 0);
}

#[test]
fn an_unfinished_setup_is_refused_by_open() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1"]);
    let redo = dir.path().join("redo");
    let s = shape(1, 500, 0, false);
    setup(&targets, &redo, &opts(&host, s));
    // Put the header back to loading, as a crash mid-setup leaves it.
    let mut ds = dataset::open(&targets, &redo, &open_opts(&host, s)).unwrap();
    ds.mark(DatasetState::Loading).unwrap();
    drop(ds);
    let m = usage(dataset::open(&targets, &redo, &open_opts(&host, s)).unwrap_err());
    assert!(m.contains("setup did not finish"), "{m}");
}

#[test]
fn interrupting_setup_removes_the_files_it_created() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1", "d2"]);
    let redo = dir.path().join("redo");
    // Setup reports its first loaded extent with the loading header on
    // disk; the report itself interrupts it, so the interruption lands
    // mid-load whatever the machine's speed (the dataset has many extents).
    let s = shape(2, 4000, 0, false);
    let flag = AtomicBool::new(false);
    let watched = targets[0].clone();
    let saw = std::sync::Mutex::new(None::<(u64, u64, bool)>);
    let interrupt = |done: u64, total: u64| {
        let mut saw = saw.lock().unwrap();
        if saw.is_none() {
            let mut magic = [0u8; 10];
            let header = std::fs::File::open(&watched)
                .and_then(|f| std::io::Read::read_exact(&mut &f, &mut magic))
                .is_ok()
                && &magic == b"CAIRNOLTP1";
            *saw = Some((done, total, header));
            flag.store(true, Ordering::SeqCst);
        }
    };
    let o = SetupOptions {
        parallel: 1,
        progress: Some(&interrupt),
        ..opts(&host, s)
    };
    let result = dataset::setup(&targets, &redo, &o, &flag);
    let (done, total, header) = saw.lock().unwrap().expect("setup reported progress");
    assert!(
        done > 0 && done < total,
        "the first report comes mid-load: {done} of {total} bytes"
    );
    assert!(header, "the loading header is on disk while setup loads");
    assert!(matches!(result, Err(OltpError::Interrupted)), "{result:?}");
    for p in targets.iter().chain([&redo]) {
        assert!(!p.exists(), "{} left behind", p.display());
    }

    // Interrupted before it starts: the same.
    let flag = AtomicBool::new(true);
    let r = dataset::setup(
        &targets,
        &redo,
        &opts(&host, shape(1, 100, 0, false)),
        &flag,
    );
    assert!(matches!(r, Err(OltpError::Interrupted)));
    assert!(!targets[0].exists() && !redo.exists());
}

/// Distinct 8-byte words in the table blocks: what a compressor (or a
/// fine-grained dedupe) could fold.
fn distinct_words(blocks: &[Vec<u8>]) -> (usize, usize) {
    let words: Vec<&[u8]> = blocks.iter().flat_map(|b| b.chunks_exact(8)).collect();
    let distinct = words.iter().collect::<HashSet<_>>().len();
    (distinct, words.len())
}

#[test]
fn default_blocks_compress_and_obfuscated_ones_do_not() {
    let host = Host::real();
    for obfuscate in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let targets = paths(dir.path(), &["d1"]);
        let redo = dir.path().join("redo");
        let s = shape(1, 300, 20, obfuscate);
        let report = setup(&targets, &redo, &opts(&host, s));
        let layout = Layout::new(s, 1);
        let blocks = all_blocks(&layout, &targets);
        let table: Vec<Vec<u8>> = blocks[..300].to_vec();
        let (distinct, total) = distinct_words(&table);
        if obfuscate {
            assert!(
                distinct * 10 > total * 9,
                "obfuscated: {distinct} of {total}"
            );
        } else {
            assert!(distinct * 10 < total, "default: {distinct} of {total}");
        }
        let v = verify_all(&targets, &redo, &host);
        assert_eq!(v.problems_total, 0);
        assert_eq!(v.dataset_id, report.dataset_id);
    }
}

#[test]
fn no_two_blocks_share_a_4k_half() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1", "d2"]);
    let redo = dir.path().join("redo");
    let s = shape(3, 1500, 200, false);
    setup(&targets, &redo, &opts(&host, s));
    let layout = Layout::new(s, 2);
    let mut halves = HashSet::new();
    for (id, b) in all_blocks(&layout, &targets).iter().enumerate() {
        for half in b.chunks(4096) {
            assert!(
                halves.insert(half.to_vec()),
                "block {id} repeats a 4 KiB half"
            );
        }
    }
    assert_eq!(halves.len() as u64, 2 * layout.total_blocks());
}

#[test]
fn on_loop_devices_setup_open_and_verify_agree() {
    if let Some(reason) = cairn_io::test_support::loop_device::unavailable_reason() {
        cairn_io::test_support::prerequisite::missing(&reason);
        return;
    }
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let s = shape(2, 1000, 50, true);
    let needed = Layout::new(s, 2).target_bytes_needed();
    let mut devices = Vec::new();
    for (name, size, sector) in [
        ("d1.img", needed, 4096),
        ("d2.img", needed, 512),
        ("redo.img", REDO_BYTES_MIN, 512),
    ] {
        match cairn_io::test_support::loop_device::LoopDevice::create(
            &dir.path().join(name),
            size,
            sector,
        ) {
            Ok(d) => devices.push(d),
            Err(reason) => {
                cairn_io::test_support::prerequisite::missing(&reason);
                return;
            }
        }
    }
    let targets = vec![devices[0].path.clone(), devices[1].path.clone()];
    let redo = devices[2].path.clone();
    let report = setup(&targets, &redo, &opts(&host, s));
    assert!(report.created.is_empty());
    assert_eq!(report.targets[0].kind, "block");
    assert_eq!(report.targets[0].logical_sector_bytes, 4096);
    let mut ds = dataset::open(&targets, &redo, &open_opts(&host, s)).unwrap();
    assert_eq!(ds.state_at_open, DatasetState::Clean);
    assert_eq!(ds.redo_end, REDO_BYTES_MIN);
    ds.mark(DatasetState::Running).unwrap();
    drop(ds);
    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.state, DatasetState::Running);
    assert_eq!(v.problems_total, 0, "{:?}", v.problems.first());
    assert_eq!(v.blocks_checked, Layout::new(s, 2).total_blocks());
    // A device too small for the shape: the needed size, nothing written.
    let bigger = shape(4, 4000, 50, false);
    let m = usage(
        dataset::setup(
            &targets,
            &redo,
            &opts(&host, bigger),
            &AtomicBool::new(false),
        )
        .unwrap_err(),
    );
    assert!(
        m.contains("over 2 targets need") && m.contains("each"),
        "{m}"
    );
    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.problems_total, 0);
}

#[test]
fn setup_again_over_a_loaded_dataset_needs_no_force_and_makes_a_new_one() {
    let host = Host::real();
    let dir = tempfile::tempdir().unwrap();
    let targets = paths(dir.path(), &["d1"]);
    let redo = dir.path().join("redo");
    let s = shape(1, 500, 10, false);
    let first = setup(&targets, &redo, &opts(&host, s));
    let second = setup(&targets, &redo, &opts(&host, shape(1, 400, 0, true)));
    assert!(second.created.is_empty());
    assert!(!second.targets[0].created);
    assert_ne!(
        first.dataset_id, second.dataset_id,
        "same seed, yet a new id"
    );
    // The old shape is refused, the new one opens.
    let m = usage(dataset::open(&targets, &redo, &open_opts(&host, s)).unwrap_err());
    assert!(m.starts_with("loaded with SCALE=400 blocks"), "{m}");
    let v = verify_all(&targets, &redo, &host);
    assert_eq!(v.dataset_id, second.dataset_id);
    assert!(v.shape.obfuscate);
    assert_eq!(v.problems_total, 0);
}

/// Oracle formats an online redo log when it creates it, so the log writer
/// never pays for the filesystem allocating blocks (nor does the report count
/// that allocation's metadata writes as redo): a new redo file holds no holes.
#[test]
fn setup_formats_the_whole_log_area_of_a_new_redo_file() {
    use std::os::unix::fs::MetadataExt;
    let host = Host::real();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let targets = paths(dir.path(), &["data"]);
    let redo = dir.path().join("redo");
    let mut o = opts(&host, shape(1, 500, 8, false));
    o.redo_bytes = 16 << 20;
    setup(&targets, &redo, &o);
    let meta = std::fs::metadata(&redo).unwrap();
    assert_eq!(meta.len(), 16 << 20);
    assert!(
        meta.blocks() * 512 >= meta.len() - (1 << 20),
        "the log area is allocated: {} of {} bytes",
        meta.blocks() * 512,
        meta.len()
    );
}
