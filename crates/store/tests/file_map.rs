//! `Group::initialize_file` and `Group::map_file`: the extent map a caller
//! takes whole to do its own I/O to the member disks (the benchmark's direct
//! path). Read through the map, a file must hold exactly what the group reads;
//! every copy must hold the same; an extent never written must read as zeros
//! even where its AUs held an earlier file's bytes.

#![allow(clippy::unwrap_used)]

use cairn_format::DiskLabel;
use cairn_io::{AlignedBuf, DeviceId, IoEngine};
use cairn_io_sim::{geometry, SimEngine};
use cairn_store::group::{self, CreateOptions, Group, GroupSpec, NewDisk, Redundancy};
use cairn_store::labeling::{write_label, LabelSpec};
use cairn_store::names::GroupPath;
use cairn_store::placement::{FileLayout, Striping, FINE_STRIPE_BYTES};
use proptest::prelude::*;
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

/// Read `len` bytes at `offset` of the file through its map, from copy `k`
/// of every piece, straight from the disks.
fn read_via_map(
    group: &mut Group<'_>,
    map: &group::FileMap,
    k: usize,
    offset: u64,
    len: u64,
) -> Vec<u8> {
    let mut out = vec![0u8; len as usize];
    for piece in map.pieces(offset, len).unwrap() {
        let (disk, at) = piece.on_copy(k).unwrap();
        let device = group.disk_device(disk).unwrap();
        let data: AlignedBuf = group
            .engine()
            .read_at(device, at, piece.len as usize)
            .unwrap();
        out[piece.at as usize..(piece.at + piece.len) as usize].copy_from_slice(&data[..]);
    }
    out
}

#[test]
fn the_map_reads_what_the_group_reads_on_every_copy() {
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
            group.map_file(info.number).is_err(),
            "{name}: a file with extents never written cannot be mapped"
        );
        let zeroed = group.initialize_file(info.number).unwrap();
        assert!(zeroed > 0, "{name}: some extents were never written");
        assert_eq!(group.initialize_file(info.number).unwrap(), 0);
        let map = group.map_file(info.number).unwrap();
        assert_eq!(map.size_bytes, size);
        assert_eq!(map.copies_max(), 2, "normal redundancy: two copies");

        let mut through_group = vec![0u8; size as usize];
        group.read(info.number, 0, &mut through_group).unwrap();
        assert!(through_group == model, "{name}: the group reads the model");
        for k in 0..2 {
            let direct = read_via_map(&mut group, &map, k, 0, size);
            assert!(
                direct == model,
                "{name}: copy {k} read through the map differs from the group's read"
            );
        }
        // Unaligned-to-the-layout ranges: pieces cross AU or stripe units.
        for _ in 0..20 {
            let offset = rng.next_u64() % (size / 4096) * 4096;
            let len = (1 + rng.next_u64() % 96) * 4096;
            let len = len.min(size - offset);
            let direct = read_via_map(&mut group, &map, 0, offset, len);
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
    assert!(group.map_file(number).is_ok());
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

proptest! {
    /// `FileMap::pieces` tiles a range exactly: pieces in order from 0, each
    /// inside one extent (and one stripe unit when fine), carrying that
    /// extent's copies; a range past the end has no pieces.
    #[test]
    fn pieces_tile_the_range_inside_their_extents(
        shift in 0u32..=6,
        fine in any::<bool>(),
        sets in 1u64..6,
        pick_offset in any::<u64>(),
        pick_len in any::<u64>(),
    ) {
        let striping = if fine { Striping::Fine } else { Striping::Coarse };
        let layout = FileLayout::new(MIB << shift, striping);
        let count = sets * 8;
        let size = layout.capacity_bytes(count);
        // Each extent's copies name it: disk = its index, start = index AUs.
        let extents: Vec<Vec<(u16, u64)>> =
            (0..count).map(|e| vec![(e as u16, e * 1000), (e as u16 + 100, 7)]).collect();
        let map = group::FileMap { size_bytes: size, layout, extents };
        let sector = 4096u64;
        let offset = pick_offset % (size / sector) * sector;
        let len = (1 + pick_len % (4 * (MIB << shift) / sector)) * sector;
        let len = len.min(size - offset);
        let pieces = map.pieces(offset, len).unwrap();
        let mut at = 0u64;
        for piece in &pieces {
            prop_assert_eq!(piece.at, at);
            prop_assert!(piece.len > 0);
            let loc = layout.locate(offset + at);
            prop_assert_eq!(piece.within, loc.offset_in_extent);
            prop_assert!(piece.within + piece.len <= layout.extent_bytes(loc.extent));
            prop_assert_eq!(piece.copies, &map.extents[loc.extent as usize][..]);
            prop_assert_eq!(piece.on_copy(0), Some((loc.extent as u16, loc.extent * 1000 + piece.within)));
            if fine {
                prop_assert_eq!(piece.within / FINE_STRIPE_BYTES, (piece.within + piece.len - 1) / FINE_STRIPE_BYTES);
            }
            at += piece.len;
        }
        prop_assert_eq!(at, len);
        prop_assert!(pieces.len() <= map.pieces_max(len));
        prop_assert!(map.pieces(size - sector, 2 * sector).is_none());
    }
}
