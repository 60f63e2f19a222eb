//! Tests of the group as a whole, and the simulated groups other tests build on.
#![allow(clippy::unwrap_used)]

use cairn_format::meta::BLOCK_BYTES;
use cairn_format::DiskLabel;
use cairn_io::{AlignedBuf, DeviceId, IoEngine};
use cairn_io_sim::{geometry, SimEngine};
use uuid::Uuid;

use super::create::create;
use super::error::GroupError;
use super::journal::DurableItem;
use super::mounted::Group;
use super::spec::{GroupSpec, NewDisk, Redundancy};
use super::tables::{shared_aus, OwnedRun};
use crate::labeling;

const MIB: u64 = 1 << 20;
const DISK_BYTES: u64 = 64 * MIB;

/// Four labelled simulated disks in two failure groups (0, 1 in A; 2, 3 in B).
pub(super) fn four_disks() -> (SimEngine, Vec<DeviceId>) {
    four_disks_of(4096)
}

/// [`four_disks`] with `sector`-byte sectors, logical and physical (512:
/// a power cut may tear a 4 KiB block).
pub(super) fn four_disks_of(sector: u32) -> (SimEngine, Vec<DeviceId>) {
    let mut sim = SimEngine::new(3, 64);
    let mut ids = Vec::new();
    for i in 0..4 {
        let d = sim.add_disk(geometry(DISK_BYTES, sector, sector, 512 << 10));
        labeling::write_label(
            &mut sim,
            d,
            &labeling::LabelSpec {
                label: DiskLabel::parse(&format!("D{i}")).unwrap(),
                disk_uuid: Uuid::from_u128(0xD0 + i as u128),
                now_unix_seconds: 1,
                generation: 1,
            },
        )
        .unwrap();
        ids.push(d);
    }
    (sim, ids)
}

/// A normal-redundancy group `T` with 1 MiB AUs over `ids`.
pub(super) fn create_normal<'e>(engine: &'e mut dyn IoEngine, ids: &[DeviceId]) -> Group<'e> {
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(if i < 2 { "A" } else { "B" }.into()),
        })
        .collect();
    create(
        engine,
        &disks,
        &GroupSpec {
            name: "T".into(),
            redundancy: Redundancy::Normal,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1,
            group_uuid: Uuid::from_u128(0x7E57),
        },
    )
    .unwrap()
}

/// Group `T` (normal redundancy, 1 MiB AUs) over [`four_disks`],
/// dismounted.
pub(super) fn group_on_sim() -> (SimEngine, Vec<DeviceId>) {
    let (mut sim, ids) = four_disks();
    create_normal(&mut sim, &ids).dismount().unwrap();
    (sim, ids)
}

/// Group T on `shared`'s disks, mounted live.
pub(super) fn live_group(
    shared: &cairn_io_sim::SharedSim,
    ids: &[DeviceId],
) -> crate::group::live::LiveGroup {
    let (g, _) = crate::group::mount_owned(
        Box::new(shared.handle()),
        ids,
        &crate::group::GroupSelector::Name("T".into()),
        crate::group::MissingDisks::MarkOffline,
    )
    .unwrap();
    let source = shared.clone();
    crate::group::live::LiveGroup::new(
        g,
        Box::new(crate::group::engines::SameDevices(move |_depth| {
            Box::new(source.handle()) as Box<dyn IoEngine>
        })),
    )
}

/// Two blocks, each mirrored across the failure groups: P on disks 0 and
/// 2, Q on disks 1 and 3. Disks 0 and 2 fail: Q is whole, P is on no copy,
/// although only half of the disks failed. The write must not pass for
/// durable.
#[test]
// One failing range is meant: `write_error_ranges` is a list of ranges.
#[allow(clippy::single_range_in_vec_init)]
fn a_durable_write_needs_a_copy_of_every_block_not_just_some_disks() {
    let (mut sim, ids) = four_disks();
    // An AU in the middle: nothing of the group's is there.
    let failing = 40 * MIB;
    for d in [ids[0], ids[2]] {
        sim.disk_mut(d).faults.write_error_ranges = vec![failing..failing + MIB];
    }
    let mut g = create_normal(&mut sim, &ids);
    let block = |b: u8| AlignedBuf::from_slice(&[b; BLOCK_BYTES]);
    let items = vec![
        DurableItem::block(
            "block P",
            vec![(0, failing, block(1)), (2, failing, block(1))],
        ),
        DurableItem::block(
            "block Q",
            vec![(1, failing, block(2)), (3, failing, block(2))],
        ),
    ];
    let err = g.write_durably(items, "test blocks").unwrap_err();
    assert!(
        matches!(err, GroupError::WriteFailed(_)),
        "a write failure is not a mount error: {err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("block P") && text.contains("D0") && text.contains("D2"),
        "names the block lost and the disks: {text}"
    );
    assert!(!text.contains("block Q"), "{text}");
}

fn run(file: u32, disk: u16, au: u64, len: u64) -> OwnedRun {
    OwnedRun {
        disk,
        au,
        len,
        file,
        index: 0,
        indirect: false,
        copy: 0,
    }
}

#[test]
fn shared_aus_lists_every_claim_of_an_overlap_and_nothing_else() {
    let runs = [
        run(1, 0, 10, 4), // 10..14
        run(2, 0, 12, 4), // 12..16: 12, 13 shared with file 1
        run(2, 0, 13, 1), // file 2 claims 13 a second time
        run(3, 1, 12, 4), // another disk: no overlap
        run(4, 0, 16, 2), // adjacent, not overlapping
    ];
    let shared = shared_aus(&runs);
    let mut got: Vec<((u16, u64), Vec<u32>)> = shared
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_unstable();
            (k, v)
        })
        .collect();
    got.sort();
    assert_eq!(got, vec![((0, 12), vec![1, 2]), ((0, 13), vec![1, 2, 2])]);
}
