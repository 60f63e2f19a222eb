//! `Group::initialize_file` and the published extent map: read straight from
//! the member disks through the file's snapshot (what the data plane uses), a
//! file must hold exactly what the group reads, on every copy; an extent
//! never written must read as zeros even where its AUs held an earlier file's
//! bytes, and once initialised it stays so across a remount.

#![allow(clippy::unwrap_used)]

use cairn_format::DiskLabel;
use cairn_io::{AlignedBuf, DeviceId, IoEngine};
use cairn_io_sim::{geometry, SimEngine};
use cairn_store::group::plane::FileSnapshot;
use cairn_store::group::{self, CreateOptions, Group, GroupSpec, NewDisk, Redundancy};
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use uuid::Uuid;

const MIB: u64 = 1 << 20;

fn sim_with_disks(count: usize, size: u64) -> (SimEngine, Vec<DeviceId>) {
    let mut sim = SimEngine::new(7, 64);
    let mut ids = Vec::new();
    for i in 0..count {
        // No discard: a freed AU keeps its bytes, as on a disk that is not thin.
        let mut g = geometry(size, 4096, 4096, 512 << 10);
        g.discard = cairn_io::geometry::DiscardSupport::Unsupported;
        let d = sim.add_disk(g);
        write_label(
            &mut sim,
            d,
            &LabelSpec {
                label: DiskLabel::parse(&format!("D{i}")).unwrap(),
                disk_uuid: Uuid::from_u128(0xD15C << 16 | i as u128),
                now_unix_seconds: 1_763_700_000,
                generation: 1,
            },
        )
        .unwrap();
        ids.push(d);
    }
    (sim, ids)
}

fn normal_group<'e>(engine: &'e mut dyn IoEngine, ids: &[DeviceId]) -> Group<'e> {
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{i}")),
        })
        .collect();
    group::create(
        engine,
        &disks,
        &GroupSpec {
            name: "MAP".into(),
            redundancy: Redundancy::Normal,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(0x3A9),
        },
    )
    .unwrap()
}

fn path(name: &str) -> GroupPath {
    GroupPath::parse(&format!("+MAP/{name}")).unwrap()
}

/// Read `len` bytes at `offset` of the file through its snapshot, from copy
/// `k` of every piece, straight from the disks.
fn read_via_snapshot(
    group: &mut Group<'_>,
    snap: &FileSnapshot,
    k: usize,
    offset: u64,
    len: u64,
) -> Vec<u8> {
    let mut out = vec![0u8; len as usize];
    for piece in snap.pieces(offset, len).unwrap() {
        let copy = snap.extent(piece.extent).unwrap().copies()[k];
        let device = group.disk_device(copy.disk).unwrap();
        let at = u64::from(copy.au) * snap.au_bytes + piece.within;
        let data: AlignedBuf = group
            .engine()
            .read_at(device, at, piece.len as usize)
            .unwrap();
        out[piece.at..piece.at + piece.len as usize].copy_from_slice(&data[..]);
    }
    out
}

fn snapshot(group: &Group<'_>, number: u32) -> std::sync::Arc<FileSnapshot> {
    group.data_plane().file(number).unwrap()
}

#[test]
fn the_published_map_reads_what_the_group_reads_on_every_copy() {
    let (mut sim, ids) = sim_with_disks(3, 96 * MIB);
    let mut group = normal_group(&mut sim, &ids);
    let mut rng = ChaCha8Rng::seed_from_u64(11);

    // A file written all over and removed: its AUs go back to the free pool
    // holding its bytes, for the next files to be given.
    let old = group
        .create_file(&path("old"), 110 * MIB, &CreateOptions::default())
        .unwrap();
    let mut junk = vec![0u8; 110 * MIB as usize];
    rng.fill_bytes(&mut junk);
    group.write(old.number, 0, &junk).unwrap();
    group.remove(&path("old")).unwrap();

    for (name, template) in [("coarse", "DATAFILE"), ("fine", "ONLINELOG")] {
        let size = 12 * MIB;
        let info = group
            .create_file(
                &path(name),
                size,
                &CreateOptions {
                    template: Some(template.into()),
                    ..CreateOptions::default()
                },
            )
            .unwrap();
        // Some of it written through the group, the rest never touched.
        let mut model = vec![0u8; size as usize];
        for _ in 0..6 {
            let offset = rng.next_u64() % (size / 4096 - 64) * 4096;
            let len = (1 + rng.next_u64() % 64) * 4096;
            let mut data = vec![0u8; len as usize];
            rng.fill_bytes(&mut data);
            group.write(info.number, offset, &data).unwrap();
            model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
        }

        assert!(
            snapshot(&group, info.number)
                .extents()
                .any(|e| !e.initialized),
            "{name}: some extents were never written"
        );
        let zeroed = group.initialize_file(info.number).unwrap();
        assert!(zeroed > 0, "{name}: some extents were never written");
        assert_eq!(group.initialize_file(info.number).unwrap(), 0);
        let map = snapshot(&group, info.number);
        assert_eq!(map.size_bytes, size);
        assert!(
            map.extents().all(|e| e.initialized),
            "{name}: published initialised"
        );
        assert!(
            map.extents().all(|e| e.copies().len() == 2),
            "normal redundancy: two copies"
        );

        let mut through_group = vec![0u8; size as usize];
        group.read(info.number, 0, &mut through_group).unwrap();
        assert!(through_group == model, "{name}: the group reads the model");
        for k in 0..2 {
            let direct = read_via_snapshot(&mut group, &map, k, 0, size);
            assert!(
                direct == model,
                "{name}: copy {k} read through the snapshot differs from the group's read"
            );
        }
        // Unaligned-to-the-layout ranges: pieces cross AU or stripe units.
        for _ in 0..20 {
            let offset = rng.next_u64() % (size / 4096) * 4096;
            let len = (1 + rng.next_u64() % 96) * 4096;
            let len = len.min(size - offset);
            let direct = read_via_snapshot(&mut group, &map, 0, offset, len);
            assert!(direct == model[offset as usize..(offset + len) as usize]);
        }
        assert!(map.pieces(size - 4096, 8192).is_none(), "past the end");
        if name == "fine" {
            // 1 MiB from offset 0 of a fine-striped file is eight 128 KiB units.
            assert_eq!(map.pieces(0, MIB).unwrap().len(), 8);
        }
    }
    // Marked initialised durably: still mapped after a remount.
    group.dismount().unwrap();
    let (group, _) =
        group::mount(&mut sim, &ids, &group::GroupSelector::Name("MAP".into())).unwrap();
    let number = group.open(&path("coarse")).unwrap().number;
    assert!(snapshot(&group, number).extents().all(|e| e.initialized));
}

#[test]
fn a_strict_mount_refuses_a_missing_disk_and_changes_nothing() {
    let (mut sim, ids) = sim_with_disks(3, 96 * MIB);
    normal_group(&mut sim, &ids).dismount().unwrap();
    let name = group::GroupSelector::Name("MAP".into());
    let refused = group::mount_with(&mut sim, &ids[..2], &name, group::MissingDisks::Refuse);
    let Err(e) = refused else {
        panic!("mounted without disk D2");
    };
    assert!(e.to_string().contains("missing disk(s) D2"), "{e}");
    // Nothing was written: with every disk, all are online.
    let (group, report) = group::mount(&mut sim, &ids, &name).unwrap();
    assert!(report.disks_marked_offline.is_empty());
    assert!(group
        .disks()
        .iter()
        .all(|d| d.state == cairn_format::group::DiskState::Online));
    group.dismount().unwrap();
    // The default mount marks it offline, as a lost disk.
    let (_, report) = group::mount(&mut sim, &ids[..2], &name).unwrap();
    assert_eq!(report.disks_marked_offline.len(), 1);
}
