//! Helpers shared by the live-group tests on the simulator.

#![allow(dead_code, clippy::unwrap_used)]

use cairn_format::DiskLabel;
use cairn_io::{DeviceId, IoEngine};
use cairn_io_sim::{geometry, SharedSim, SimEngine};
use cairn_store::group::{
    self, GroupError, GroupSelector, GroupSpec, LiveGroup, MissingDisks, MountReport, NewDisk,
    Redundancy, SameDevices,
};
use cairn_store::labeling::{write_label, LabelSpec};
use uuid::Uuid;

pub const MIB: u64 = 1 << 20;

/// Add a disk per geometry to `sim`, each labelled `D<i>` with the uuid
/// `uuid(i)`; their device ids, in order.
pub fn labelled_disks(
    sim: &mut SimEngine,
    geometries: impl IntoIterator<Item = cairn_io::Geometry>,
    uuid: impl Fn(usize) -> u128,
) -> Vec<DeviceId> {
    let mut ids = Vec::new();
    for (i, g) in geometries.into_iter().enumerate() {
        let d = sim.add_disk(g);
        write_label(
            sim,
            d,
            &LabelSpec {
                label: DiskLabel::parse(&format!("D{i}")).unwrap(),
                disk_uuid: Uuid::from_u128(uuid(i)),
                now_unix_seconds: 1_763_700_000,
                generation: 1,
            },
        )
        .unwrap();
        ids.push(d);
    }
    ids
}

/// Mount group `name` on `shared`'s disks live for writing: the metadata
/// plane on one handle, and a new handle for every data handle.
pub fn mount_live(
    shared: &SharedSim,
    ids: &[DeviceId],
    name: &str,
) -> Result<(LiveGroup, MountReport), GroupError> {
    let (g, report) = group::mount_owned(
        Box::new(shared.handle()),
        ids,
        &GroupSelector::Name(name.into()),
        MissingDisks::MarkOffline,
    )?;
    let source = shared.clone();
    let live = LiveGroup::new(
        g,
        Box::new(SameDevices(move |_depth| {
            Box::new(source.handle()) as Box<dyn IoEngine>
        })),
    );
    Ok((live, report))
}

/// Four 128 MiB disks in two failure groups (disks 0 and 2 in one, 1 and 3
/// in the other), a normal-redundancy group `name` with 1 MiB AUs, mounted
/// live. The simulator takes `sim_depth` requests at once, from every engine
/// on it.
pub fn four_disk_live_group(
    seed: u64,
    name: &str,
    group_tag: u128,
    sim_depth: usize,
) -> (SharedSim, Vec<DeviceId>, LiveGroup) {
    let mut sim = SimEngine::new(seed, sim_depth);
    let ids = labelled_disks(
        &mut sim,
        (0..4).map(|_| geometry(128 * MIB, 4096, 4096, 512 << 10)),
        |i| u128::from(seed) << 8 | i as u128,
    );
    let disks: Vec<NewDisk> = ids
        .iter()
        .enumerate()
        .map(|(i, d)| NewDisk {
            device: *d,
            failgroup: Some(format!("FG{}", i % 2)),
        })
        .collect();
    let g = group::create(
        &mut sim,
        &disks,
        &GroupSpec {
            name: name.into(),
            redundancy: Redundancy::Normal,
            au_bytes: MIB,
            sector_bytes: None,
            force: false,
            now_unix_seconds: 1_763_700_000,
            group_uuid: Uuid::from_u128(group_tag << 64 | u128::from(seed)),
        },
    )
    .unwrap();
    g.dismount().unwrap();
    let shared = SharedSim::new(sim);
    let (live, _) = mount_live(&shared, &ids, name).unwrap();
    (shared, ids, live)
}
