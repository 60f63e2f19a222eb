//! The data path's unit tests, on a port over the simulated disk.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use cairn_format::group::{AuAddr, Extent};
use cairn_io::{
    AlignedBuf, Completion, DeviceId, EngineStats, Geometry, IoEngine, IoError, Op, Request,
    SubmitError,
};
use cairn_io_sim::{geometry, SimEngine};

use super::common::{DataPort, FailedDisks, StaleMark, WRITE_ATTEMPTS_MAX};
use super::copy::{copy, Copied, CopyIo};
use super::write;
use crate::group::error::GroupError;
use crate::group::plane::{DataPlane, DiskView, FileSnapshot};

const KIB: u64 = 1 << 10;

/// An engine that records, over a simulated one, the most requests it
/// held at once and the order requests reached it.
struct Watched {
    sim: SimEngine,
    most: usize,
    /// (a write, its device) of every request, in order.
    kinds: Vec<(bool, u32)>,
}

impl IoEngine for Watched {
    fn name(&self) -> &'static str {
        "watched"
    }
    fn geometry(&self, device: DeviceId) -> Option<&Geometry> {
        self.sim.geometry(device)
    }
    fn submit(&mut self, request: Request) -> Result<(), SubmitError> {
        let kind = (matches!(request.op, Op::Write { .. }), request.device.0);
        self.sim.submit(request)?;
        self.kinds.push(kind);
        self.most = self.most.max(self.sim.in_flight());
        Ok(())
    }
    fn wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        self.sim.wait(min_completions)
    }
    fn set_io_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.sim.set_io_timeout(timeout);
    }
    fn pop_completion(&mut self) -> Option<Completion> {
        self.sim.pop_completion()
    }
    fn in_flight(&self) -> usize {
        self.sim.in_flight()
    }
    fn depth_max(&self) -> usize {
        self.sim.depth_max()
    }
    fn stats(&self) -> EngineStats {
        self.sim.stats()
    }
}

/// Disks 0..4 are the engine's devices 0..4.
struct Port {
    plane: Arc<DataPlane>,
    engine: Watched,
    wrote: BTreeSet<u16>,
}

impl DataPort for Port {
    fn plane(&self) -> &Arc<DataPlane> {
        &self.plane
    }
    fn engine(&mut self) -> &mut dyn IoEngine {
        &mut self.engine
    }
    fn device(&self, disk: u16) -> Option<DeviceId> {
        (disk < 4).then_some(DeviceId(u32::from(disk)))
    }
    fn may_write(&self) -> bool {
        true
    }
    fn wrote(&mut self, disk: u16) {
        self.wrote.insert(disk);
    }
    fn mark_initialized(
        &mut self,
        _: u32,
        _: u32,
        _: &[(u64, Extent)],
        _: &BTreeSet<u16>,
    ) -> Result<(), GroupError> {
        unreachable!("a copy marks nothing")
    }
    fn mark_unwritten(
        &mut self,
        _: u32,
        _: u32,
        _: &[(u64, Extent)],
    ) -> Result<Vec<u64>, GroupError> {
        unreachable!("a copy marks nothing")
    }
    fn disks_failed(&mut self, _: &FailedDisks, _: u64) -> Result<(), GroupError> {
        unreachable!("a copy reports, its caller fails disks")
    }
    fn mark_stale(&mut self, _: u32, _: u32, _: &[StaleMark]) -> Result<(), GroupError> {
        unreachable!("a copy marks nothing")
    }
    fn missed_writes(&mut self, _: &BTreeSet<u16>) {
        unreachable!("a copy marks nothing")
    }
}

fn port() -> Port {
    let mut sim = SimEngine::new(7, 64).with_latency(1_000..50_000);
    for _ in 0..4 {
        sim.add_disk(geometry(4 << 20, 4096, 4096, 64 << 10));
    }
    Port {
        plane: Arc::new(DataPlane::new()),
        engine: Watched {
            sim,
            most: 0,
            kinds: Vec::new(),
        },
        wrote: BTreeSet::new(),
    }
}

fn fill(port: &mut Port, disk: u16, offset: u64, len: u64, seed: u8) -> Vec<u8> {
    let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(seed)).collect();
    let dev = port.device(disk).unwrap();
    port.engine
        .sim
        .write_at(dev, offset, AlignedBuf::from_slice(&data), false)
        .expect("the fill is written");
    data
}

#[test]
#[allow(clippy::single_range_in_vec_init)]
fn a_copy_keeps_its_window_overlaps_writes_with_reads_and_says_what_failed() {
    let mut port = port();
    // 24 pieces of 64 KiB: disk 0 → disk 2 and disk 1 → disk 3.
    let mut pieces = Vec::new();
    let mut want = Vec::new();
    for i in 0..24u64 {
        let (from, to) = if i % 2 == 0 { (0, 2) } else { (1, 3) };
        let at = i * 64 * KIB;
        want.push(fill(&mut port, from, at, 64 * KIB, i as u8 + 3));
        pieces.push(CopyIo {
            from: (from, at),
            to: (to, at + (1 << 20)),
            len: 64 * KIB,
        });
    }
    // Piece 4's source cannot be read, piece 7's target not written;
    // piece 9 goes to a disk the port does not have.
    port.engine
        .sim
        .disk_mut(DeviceId(0))
        .faults
        .read_error_ranges = vec![4 * 64 * KIB..5 * 64 * KIB];
    port.engine
        .sim
        .disk_mut(DeviceId(3))
        .faults
        .write_error_ranges = vec![(1 << 20) + 7 * 64 * KIB..(1 << 20) + 8 * 64 * KIB];
    pieces[9].to.0 = 9;
    let mut pool = Vec::new();
    let out = copy(&mut port, &pieces, 6, &mut pool).unwrap();
    for (i, o) in out.iter().enumerate() {
        let expected = match i {
            4 => Copied::ReadFailed,
            7 | 9 => Copied::WriteFailed,
            _ => Copied::Done,
        };
        assert_eq!(*o, expected, "piece {i}");
        if i == 4 || i == 7 {
            // Nothing reached the target of a piece that failed.
            let dev = port.device(pieces[i].to.0).unwrap();
            let got = port
                .engine
                .sim
                .contents(dev, pieces[i].to.1, 64 * KIB as usize);
            assert!(got.iter().all(|b| *b == 0), "piece {i}'s target untouched");
        }
        if expected == Copied::Done {
            let dev = port.device(pieces[i].to.0).unwrap();
            let got = port
                .engine
                .sim
                .contents(dev, pieces[i].to.1, 64 * KIB as usize);
            assert!(got == want[i], "piece {i} copied whole");
        }
    }
    assert_eq!(port.wrote, BTreeSet::from([2, 3]));
    assert_eq!(port.engine.sim.in_flight(), 0, "the engine is idle again");
    assert!(port.engine.most <= 6, "window kept: {}", port.engine.most);
    // Writes began before the last read: they overlap.
    let first_write = port.engine.kinds.iter().position(|k| k.0).unwrap();
    let last_read = port.engine.kinds.iter().rposition(|k| !k.0).unwrap();
    assert!(first_write < last_read, "{:?}", port.engine.kinds);
    // Buffers were reused: no more were made than the window.
    assert!(pool.len() <= 6, "{} buffers", pool.len());
}

#[test]
fn reads_go_first_to_the_least_busy_source_disk() {
    let mut port = port();
    // Pieces listed disk by disk: all of disk 0's, then disk 1's.
    let pieces: Vec<CopyIo> = (0..16u64)
        .map(|i| CopyIo {
            from: (u16::from(i >= 8), (i % 8) * 64 * KIB),
            to: (2, i * 64 * KIB),
            len: 64 * KIB,
        })
        .collect();
    let out = copy(&mut port, &pieces, 4, &mut Vec::new()).unwrap();
    assert!(out.iter().all(|o| *o == Copied::Done));
    // Every read is of the disk with fewer I/Os in flight: the two
    // source disks alternate, though the pieces came disk by disk.
    let reads: Vec<u32> = port
        .engine
        .kinds
        .iter()
        .filter(|k| !k.0)
        .map(|k| k.1)
        .collect();
    assert_eq!(reads.len(), 16);
    assert_eq!(&reads[..4], &[0, 1, 0, 1], "{reads:?}");
    assert_eq!(port.engine.sim.in_flight(), 0);
}

/// A port onto file 9 (two extents, 1 MiB AUs, copies on disks 0 and
/// 1), whose metadata plane never lets a writer settle: with `flip`,
/// every look at the file (`snapshot`) finds a new publication in which
/// extents 0 and 1 have swapped which one is written (a client looping
/// ftruncate cuts and grows them again, and another writer first-writes
/// one meanwhile); with `offline`, disk 1 is offline in the view and a
/// stale mark never takes (each is for a copy the file no longer has by
/// the time it is made). It counts the looks and the marks asked for.
struct Churn {
    plane: Arc<DataPlane>,
    engine: SimEngine,
    flip: bool,
    view: Arc<DiskView>,
    looks: u32,
    marks: u32,
}

impl Churn {
    fn new(flip: bool, offline: bool) -> Self {
        let mut engine = SimEngine::new(11, 64);
        for _ in 0..2 {
            engine.add_disk(geometry(64 << 20, 4096, 4096, 64 << 10));
        }
        Self {
            plane: Arc::new(DataPlane::new()),
            engine,
            flip,
            view: Arc::new(DiskView {
                epoch: 1,
                online: vec![true, !offline],
                writable: vec![true, !offline],
                member: vec![true, true],
                devices: vec![Some(DeviceId(0)), Some(DeviceId(1))],
                names: vec!["D0".into(), "D1".into()],
            }),
            looks: 0,
            marks: 0,
        }
    }

    fn layout() -> cairn_format::extent_map::FileLayout {
        cairn_format::extent_map::FileLayout::new(
            1 << 20,
            cairn_format::extent_map::Striping::Coarse,
        )
    }
}

impl DataPort for Churn {
    fn plane(&self) -> &Arc<DataPlane> {
        &self.plane
    }
    fn engine(&mut self) -> &mut dyn IoEngine {
        &mut self.engine
    }
    fn device(&self, disk: u16) -> Option<DeviceId> {
        (disk < 2).then_some(DeviceId(u32::from(disk)))
    }
    fn may_write(&self) -> bool {
        true
    }
    fn wrote(&mut self, _: u16) {}
    fn mark_initialized(
        &mut self,
        _: u32,
        _: u32,
        _: &[(u64, Extent)],
        _: &BTreeSet<u16>,
    ) -> Result<(), GroupError> {
        Ok(())
    }
    fn mark_unwritten(
        &mut self,
        _: u32,
        _: u32,
        _: &[(u64, Extent)],
    ) -> Result<Vec<u64>, GroupError> {
        Ok(Vec::new())
    }
    fn disks_failed(&mut self, _: &FailedDisks, _: u64) -> Result<(), GroupError> {
        Ok(())
    }
    fn mark_stale(&mut self, _: u32, _: u32, _: &[StaleMark]) -> Result<(), GroupError> {
        self.marks += 1;
        Ok(())
    }
    fn missed_writes(&mut self, _: &BTreeSet<u16>) {}
    fn snapshot(&mut self, number: u32) -> Option<Arc<FileSnapshot>> {
        self.looks += 1;
        let first_written = !self.flip || self.looks % 2 == 1;
        let extents: Vec<Extent> = [first_written, !self.flip || !first_written]
            .iter()
            .enumerate()
            .map(|(i, written)| {
                let au = 100 + 10 * i as u32;
                Extent::new(&[AuAddr { disk: 0, au }, AuAddr { disk: 1, au }], *written)
            })
            .collect();
        let layout = Self::layout();
        Some(Arc::new(FileSnapshot::build(
            number,
            1,
            layout.capacity_bytes(2),
            layout,
            4096,
            2,
            None,
            &extents,
            None,
        )))
    }
    fn disk_view(&mut self) -> Arc<DiskView> {
        self.view.clone()
    }
}

/// A write across two extents beside a client that changes the file at
/// every look (the latches the writer took no longer cover what it must
/// write): it gives up after `WRITE_ATTEMPTS_MAX` looks with an error
/// that says what happened, having written nothing, instead of
/// panicking the thread that serves it.
#[test]
fn a_write_beside_a_file_that_keeps_changing_gives_up_with_an_error() {
    let mut port = Churn::new(true, false);
    // The last 4 KiB of extent 0 and the first of extent 1.
    let at = Churn::layout().extent_bytes(0) - 4096;
    let err = write(&mut port, None, 9, at, &[7u8; 8192]).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, GroupError::WriteFailed(_)),
        "not an I/O error nor a panic: {err:?}"
    );
    assert!(
        text.contains("file 9") && text.contains(&format!("offset {at}")),
        "names the write: {text}"
    );
    assert!(text.contains("changed"), "says why: {text}");
    assert!(
        port.looks <= WRITE_ATTEMPTS_MAX * 2 + 2,
        "bounded: {} looks",
        port.looks
    );
    assert_eq!(port.engine.stats().bytes_written, 0, "nothing written");
}

/// A write whose copy on an offline disk must be marked stale first,
/// where the mark never takes: it asks at most `WRITE_ATTEMPTS_MAX`
/// times and fails, instead of calling itself again without end.
#[test]
fn a_write_whose_stale_marks_never_take_gives_up_with_an_error() {
    let mut port = Churn::new(false, true);
    let err = write(&mut port, None, 9, 0, &[7u8; 4096]).unwrap_err();
    assert!(matches!(err, GroupError::WriteFailed(_)), "{err:?}");
    assert!(
        (1..=WRITE_ATTEMPTS_MAX).contains(&port.marks),
        "{} marks asked for",
        port.marks
    );
    assert_eq!(port.engine.stats().bytes_written, 0, "nothing written");
}

/// A file of two written 1 MiB extents, each copy on its own disk, for the
/// checksum tests: the snapshot never changes, and the port counts what it
/// is asked.
struct Mirror {
    plane: Arc<DataPlane>,
    engine: SimEngine,
    view: Arc<DiskView>,
    copies: u16,
    may_write: bool,
    /// The group's sector, and so the checksums' unit.
    sector: u32,
    /// Whether extent 1 has been written (else it reads as zeros, no I/O).
    second_written: bool,
}

const MIRROR_AU: u64 = 1 << 20;

impl Mirror {
    fn new(copies: u16) -> Self {
        Self::with_sector(copies, 4096)
    }

    fn with_sector(copies: u16, sector: u32) -> Self {
        let mut engine = SimEngine::new(5, 64);
        for _ in 0..copies {
            engine.add_disk(geometry(64 << 20, sector, sector, 64 << 10));
        }
        let n = usize::from(copies);
        Self {
            plane: Arc::new(DataPlane::new()),
            engine,
            view: Arc::new(DiskView {
                epoch: 1,
                online: vec![true; n],
                writable: vec![true; n],
                member: vec![true; n],
                devices: (0..copies).map(|d| Some(DeviceId(u32::from(d)))).collect(),
                names: (0..copies).map(|d| format!("D{d}")).collect(),
            }),
            copies,
            may_write: true,
            sector,
            second_written: true,
        }
    }

    /// Where byte `offset` of the file is on `disk`.
    fn place(disk: u16, offset: u64) -> u64 {
        let extent = offset / MIRROR_AU;
        (10 + 10 * extent + u64::from(disk)) * MIRROR_AU + offset % MIRROR_AU
    }

    /// Write `bytes` at `offset` of the file straight onto every copy.
    fn put(&mut self, offset: u64, bytes: &[u8]) {
        for disk in 0..self.copies {
            self.put_on(disk, offset, bytes);
        }
    }

    /// Write `bytes` at `offset` of the file onto the copy on `disk`,
    /// extent by extent.
    fn put_on(&mut self, disk: u16, offset: u64, bytes: &[u8]) {
        let mut done = 0usize;
        while done < bytes.len() {
            let at = offset + done as u64;
            let len = ((MIRROR_AU - at % MIRROR_AU) as usize).min(bytes.len() - done);
            // Straight to the durable image, so that rot is not hidden
            // under an unflushed write.
            self.engine.scribble(
                DeviceId(u32::from(disk)),
                Self::place(disk, at),
                &bytes[done..done + len],
            );
            done += len;
        }
    }

    /// What the copy on `disk` holds of the file's `len` bytes at `offset`.
    fn on(&self, disk: u16, offset: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let at = offset + out.len() as u64;
            let n = ((MIRROR_AU - at % MIRROR_AU) as usize).min(len - out.len());
            out.extend(
                self.engine
                    .contents(DeviceId(u32::from(disk)), Self::place(disk, at), n),
            );
        }
        out
    }
}

impl DataPort for Mirror {
    fn plane(&self) -> &Arc<DataPlane> {
        &self.plane
    }
    fn engine(&mut self) -> &mut dyn IoEngine {
        &mut self.engine
    }
    fn device(&self, disk: u16) -> Option<DeviceId> {
        (disk < self.copies).then_some(DeviceId(u32::from(disk)))
    }
    fn may_write(&self) -> bool {
        self.may_write
    }
    fn wrote(&mut self, _: u16) {}
    fn mark_initialized(
        &mut self,
        _: u32,
        _: u32,
        _: &[(u64, Extent)],
        _: &BTreeSet<u16>,
    ) -> Result<(), GroupError> {
        unreachable!("the extents are written")
    }
    fn mark_unwritten(
        &mut self,
        _: u32,
        _: u32,
        _: &[(u64, Extent)],
    ) -> Result<Vec<u64>, GroupError> {
        unreachable!("nothing is punched")
    }
    fn disks_failed(&mut self, disks: &FailedDisks, _: u64) -> Result<(), GroupError> {
        panic!("no disk fails here: {disks:?}")
    }
    fn mark_stale(&mut self, _: u32, _: u32, _: &[StaleMark]) -> Result<(), GroupError> {
        unreachable!("no write misses a copy")
    }
    fn missed_writes(&mut self, _: &BTreeSet<u16>) {}
    fn snapshot(&mut self, number: u32) -> Option<Arc<FileSnapshot>> {
        let extents: Vec<Extent> = (0..2u32)
            .map(|e| {
                let copies: Vec<AuAddr> = (0..self.copies)
                    .map(|disk| AuAddr {
                        disk,
                        au: 10 + 10 * e + u32::from(disk),
                    })
                    .collect();
                Extent::new(&copies, e == 0 || self.second_written)
            })
            .collect();
        let layout = Churn::layout();
        Some(Arc::new(FileSnapshot::build(
            number,
            1,
            layout.capacity_bytes(2),
            layout,
            self.sector,
            self.copies as u8,
            None,
            &extents,
            None,
        )))
    }
    fn disk_view(&mut self) -> Arc<DiskView> {
        self.view.clone()
    }
}

/// A file's checksums, as the tests set them: per unit, newest first.
struct Sums(std::collections::HashMap<u64, Vec<u32>>, u32);

impl Sums {
    /// The checksums of `bytes`, the file from its first byte, in 4 KiB
    /// units.
    fn of(bytes: &[u8]) -> Self {
        Self::of_units(bytes, 4096)
    }

    fn of_units(bytes: &[u8], unit: u32) -> Self {
        Self(
            bytes
                .chunks(unit as usize)
                .enumerate()
                .map(|(u, b)| (u as u64, vec![cairn_format::group::unit_checksum(b)]))
                .collect(),
            unit,
        )
    }
}

impl super::verify::UnitSums for Sums {
    fn unit_bytes(&self) -> u32 {
        self.1
    }
    fn candidates(&self, unit: u64, out: &mut Vec<u32>) {
        out.clear();
        out.extend(self.0.get(&unit).into_iter().flatten());
    }
}

fn file_bytes() -> Vec<u8> {
    (0..2 * MIRROR_AU)
        .map(|i| (i as u8) ^ ((i >> 12) as u8))
        .collect()
}

fn rot(port: &mut Mirror, disk: u16, offset: u64) {
    port.engine
        .rot(DeviceId(u32::from(disk)), Mirror::place(disk, offset), 3);
}

/// Units rotten on the primary copy in both extents: the read returns the
/// file's bytes, rewrites each bad copy from the mirror, and counts each
/// against its disk (a mirror that is not read is scrub's to judge).
#[test]
fn a_rotten_copy_is_never_returned_and_is_healed_from_one_that_matches() {
    let mut port = Mirror::new(2);
    let data = file_bytes();
    port.put(0, &data);
    let sums = Sums::of(&data);
    rot(&mut port, 0, 3 * 4096 + 17);
    rot(&mut port, 0, MIRROR_AU + 200 * 4096);
    assert_ne!(port.on(0, 3 * 4096, 4096), data[3 * 4096..4 * 4096]);
    // One read over both extents, and one by the short path (one piece).
    let mut buf = vec![0u8; data.len()];
    super::read(&mut port, None, 9, 0, &mut buf, &|_| true, Some(&sums)).unwrap();
    assert!(buf == data, "the read returned what was written");
    let counts = port.plane.checksum_counts().by_disk();
    assert_eq!((counts[&0].mismatches, counts[&0].healed), (2, 2));
    assert!(!counts.contains_key(&1), "{counts:?}");
    for disk in 0..2 {
        assert_eq!(port.on(disk, 0, data.len()), data, "disk {disk} healed");
    }
    rot(&mut port, 0, 4096);
    let mut one = vec![0u8; 4096];
    super::read(&mut port, None, 9, 4096, &mut one, &|_| true, Some(&sums)).unwrap();
    assert_eq!(one, data[4096..8192]);
    assert_eq!(port.on(0, 4096, 4096), data[4096..8192]);
    assert_eq!(port.plane.checksum_counts().by_disk()[&0].healed, 3);
}

/// A unit bad on every copy: the read fails naming the file and the byte
/// range, and no copy is written over.
#[test]
fn a_unit_no_copy_vouches_for_fails_the_read_naming_its_range() {
    let mut port = Mirror::new(3);
    let data = file_bytes();
    port.put(0, &data);
    let sums = Sums::of(&data);
    for disk in 0..3 {
        rot(&mut port, disk, 5 * 4096 + u64::from(disk));
        rot(&mut port, disk, 6 * 4096 + 9);
    }
    let before: Vec<Vec<u8>> = (0..3).map(|d| port.on(d, 0, 8 * 4096)).collect();
    let written = port.engine.stats().bytes_written;
    let mut buf = vec![0u8; 8 * 4096];
    let err = super::read(&mut port, None, 9, 0, &mut buf, &|_| true, Some(&sums)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, GroupError::Unreadable(_)), "{err:?}");
    assert!(
        text.contains("file 9") && text.contains("bytes 20480..28672"),
        "names the file and the range: {text}"
    );
    assert_eq!(
        port.engine.stats().bytes_written,
        written,
        "nothing rewritten"
    );
    for d in 0..3u16 {
        assert_eq!(port.on(d, 0, 8 * 4096), before[usize::from(d)]);
        assert_eq!(port.plane.checksum_counts().by_disk()[&d].mismatches, 2);
    }
}

/// Beside a write in flight either checksum is right: a copy holding the
/// older bytes is read as good and not rewritten. A unit with no checksum
/// yet is served as read. A read-only mount mends the read but writes
/// nothing.
#[test]
fn older_bytes_beside_a_write_in_flight_are_good_and_a_read_only_mount_heals_nothing() {
    let mut port = Mirror::new(2);
    let data = file_bytes();
    port.put(0, &data);
    let mut sums = Sums::of(&data);
    let newer = vec![0xa5u8; 4096];
    port.put_on(1, 2 * 4096, &newer);
    let old = sums.0[&2][0];
    sums.0
        .insert(2, vec![cairn_format::group::unit_checksum(&newer), old]);
    let written = port.engine.stats().bytes_written;
    let mut buf = vec![0u8; 4 * 4096];
    super::read(&mut port, None, 9, 0, &mut buf, &|_| true, Some(&sums)).unwrap();
    assert_eq!(buf, data[..4 * 4096], "the primary's older bytes");
    assert_eq!(port.engine.stats().bytes_written, written);
    assert!(port.plane.checksum_counts().by_disk().is_empty());

    sums.0.remove(&3);
    rot(&mut port, 0, 3 * 4096);
    super::read(&mut port, None, 9, 0, &mut buf, &|_| true, Some(&sums)).unwrap();
    assert_ne!(buf[3 * 4096..], data[3 * 4096..4 * 4096], "served as read");

    port.may_write = false;
    rot(&mut port, 0, 4096);
    super::read(&mut port, None, 9, 0, &mut buf, &|_| true, Some(&sums)).unwrap();
    assert_eq!(buf[4096..8192], data[4096..8192], "mended from the mirror");
    assert_ne!(port.on(0, 4096, 4096), data[4096..8192], "and not written");
    assert_eq!(port.engine.stats().bytes_written, written);
}

/// The primary's read of a piece fails (a bad sector elsewhere in it) and
/// the mirror, read instead, has a rotten unit that the primary holds
/// whole: the read returns the file's bytes, the mirror's unit is healed
/// from the primary, and the repair of the primary's failed piece does not
/// copy the mirror's rotten unit over the one good copy of it.
#[test]
fn the_repair_of_a_failed_piece_never_copies_a_rotten_unit_over_the_good_one() {
    let mut port = Mirror::new(2);
    let data = file_bytes();
    port.put(0, &data);
    let sums = Sums::of(&data);
    let bad_sector = Mirror::place(0, 10 * 4096);
    port.engine
        .disk_mut(DeviceId(0))
        .faults
        .read_error_ranges
        .push(bad_sector..bad_sector + 4096);
    rot(&mut port, 1, 3 * 4096 + 5);
    let mut buf = vec![0u8; 2 * MIRROR_AU as usize];
    super::read(&mut port, None, 9, 0, &mut buf, &|_| true, Some(&sums)).unwrap();
    assert!(buf == data, "the read returned what was written");
    port.engine
        .disk_mut(DeviceId(0))
        .faults
        .read_error_ranges
        .clear();
    assert!(
        port.on(0, 3 * 4096, 4096) == data[3 * 4096..4 * 4096],
        "the primary's good unit was kept"
    );
    assert!(
        port.on(1, 3 * 4096, 4096) == data[3 * 4096..4 * 4096],
        "the mirror's rotten unit was healed"
    );
    assert!(port.on(0, 0, data.len()) == data, "the primary whole");
}

/// 512-byte units, a read that starts inside the first extent and ends
/// inside the second: each rotten unit is found where it is, mended from
/// the mirror, and healed there, and the units beside it are untouched.
#[test]
fn units_of_a_512_byte_group_are_checked_across_pieces_from_any_offset() {
    let mut port = Mirror::with_sector(2, 512);
    let data = file_bytes();
    port.put(0, &data);
    let sums = Sums::of_units(&data, 512);
    let first = MIRROR_AU - 5 * 512;
    let rotten = [MIRROR_AU - 3 * 512, MIRROR_AU + 512];
    for at in rotten {
        rot(&mut port, 0, at + 100);
    }
    let mut buf = vec![0u8; 10 * 512];
    super::read(&mut port, None, 9, first, &mut buf, &|_| true, Some(&sums)).unwrap();
    assert!(buf == data[first as usize..first as usize + buf.len()]);
    for at in rotten {
        assert!(port.on(0, at, 512) == data[at as usize..at as usize + 512]);
    }
    let counts = port.plane.checksum_counts().by_disk();
    assert_eq!((counts[&0].mismatches, counts[&0].healed), (2, 2));
}

/// A checksum that says an extent never written holds data (it reads as
/// zeros without I/O): the read fails, saying the extent was never
/// written, not that every copy is damaged.
#[test]
fn a_checksum_for_an_extent_never_written_fails_the_read_saying_so() {
    let mut port = Mirror::new(2);
    port.second_written = false;
    let data = file_bytes();
    let sums = Sums::of(&data);
    let mut buf = vec![0u8; 4096];
    let err = super::read(
        &mut port,
        None,
        9,
        MIRROR_AU,
        &mut buf,
        &|_| true,
        Some(&sums),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("never written"), "{text}");
    assert!(text.contains("bytes 1048576..1052672"), "{text}");
    assert!(port.plane.checksum_counts().by_disk().is_empty());
}

/// Beside a write in flight, three copies: the primary rotten, one with the
/// write's bytes, one with the bytes before it. The read returns the
/// newer, heals the rotten copy from it, and leaves the older copy to the
/// write (it is right to read until the write completes).
#[test]
fn beside_a_write_in_flight_only_the_rotten_copy_is_healed() {
    let mut port = Mirror::new(3);
    let data = file_bytes();
    port.put(0, &data);
    let mut sums = Sums::of(&data);
    let newer = vec![0x5au8; 4096];
    port.put_on(0, 2 * 4096, &newer);
    port.put_on(1, 2 * 4096, &newer);
    rot(&mut port, 0, 2 * 4096 + 1);
    let old = sums.0[&2][0];
    sums.0
        .insert(2, vec![cairn_format::group::unit_checksum(&newer), old]);
    let mut buf = vec![0u8; 4 * 4096];
    super::read(&mut port, None, 9, 0, &mut buf, &|_| true, Some(&sums)).unwrap();
    assert!(buf[2 * 4096..3 * 4096] == newer[..], "the newer bytes");
    assert!(
        port.on(0, 2 * 4096, 4096) == newer,
        "the rotten copy healed"
    );
    assert!(
        port.on(2, 2 * 4096, 4096) == data[2 * 4096..3 * 4096],
        "the older copy left to the write"
    );
    let counts = port.plane.checksum_counts().by_disk();
    assert_eq!((counts[&0].mismatches, counts[&0].healed), (1, 1));
    assert_eq!(counts.len(), 1, "{counts:?}");
}
