//! The extent-mapping rules pinned by a fixture: extent sizes by index, and
//! where logical bytes of coarse- and fine-striped files live, for every AU
//! size at the points where the rules change (tier boundaries, stripe sets,
//! unit edges) and far out.
//!
//! These rules are part of the on-disk format: an extent map only names AU
//! runs, and a reader that mapped bytes differently would read the wrong
//! bytes from a healthy map. A fixture that no longer matches means the
//! format changed, which needs a new format version, not a regenerated
//! fixture. After such a deliberate change, write the file with
//! `CAIRN_UPDATE_FIXTURES=1 cargo test -p cairn-format --test extent_map_fixture`
//! and review the diff.

#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::PathBuf;

use cairn_format::extent_map::{
    extent_aus, FileLayout, Striping, EXTENT_TIER1_FROM, EXTENT_TIER2_FROM, FINE_STRIPE_BYTES,
    FINE_STRIPE_WIDTH,
};
use cairn_format::group::{STRIPING_COARSE, STRIPING_FINE};

const MIB: u64 = 1 << 20;

/// The table the fixture holds, computed by the rules as they are.
fn table() -> String {
    let mut out = String::new();
    writeln!(out, "# extent-mapping rules, format version 1").unwrap();
    writeln!(out, "# extent_aus INDEX = AUS").unwrap();
    for index in [
        0,
        1,
        EXTENT_TIER1_FROM - 1,
        EXTENT_TIER1_FROM,
        EXTENT_TIER2_FROM - 1,
        EXTENT_TIER2_FROM,
        u64::MAX,
    ] {
        writeln!(out, "extent_aus {index} = {}", extent_aus(index)).unwrap();
    }
    writeln!(
        out,
        "# locate AU STRIPING OFFSET = EXTENT OFFSET_IN_EXTENT RUN_BYTES"
    )
    .unwrap();
    writeln!(out, "# count AU STRIPING SIZE = EXTENTS CAPACITY_OF_THEM").unwrap();
    for au in [MIB, 4 * MIB, 64 * MIB] {
        for striping in [Striping::Coarse, Striping::Fine] {
            let layout = FileLayout::new(au, striping);
            let name = match striping {
                Striping::Coarse => "coarse",
                Striping::Fine => "fine",
            };
            let tier1 = layout.capacity_bytes(EXTENT_TIER1_FROM);
            let tier2 = layout.capacity_bytes(EXTENT_TIER2_FROM);
            let set = layout.capacity_bytes(FINE_STRIPE_WIDTH);
            let mut offsets = vec![
                0,
                4096,
                FINE_STRIPE_BYTES - 1,
                FINE_STRIPE_BYTES,
                FINE_STRIPE_BYTES * 7 + 12_345,
                FINE_STRIPE_BYTES * 8,
                au - 1,
                au,
                au + FINE_STRIPE_BYTES * 3,
                set - 1,
                set,
                set + FINE_STRIPE_BYTES * 9 + 8192,
                tier1 - 1,
                tier1,
                tier1 + FINE_STRIPE_BYTES * 11,
                tier2 - 1,
                tier2,
                tier2 + FINE_STRIPE_BYTES * 13 + 512,
                1 << 50,
                (1 << 50) + FINE_STRIPE_BYTES * 5 + 4096,
            ];
            offsets.sort_unstable();
            offsets.dedup();
            for offset in offsets {
                let at = layout.locate(offset);
                writeln!(
                    out,
                    "locate {} {name} {offset} = {} {} {}",
                    au >> 20,
                    at.extent,
                    at.offset_in_extent,
                    at.run_bytes
                )
                .unwrap();
            }
            for size in [
                0,
                1,
                au,
                au + 1,
                set,
                set + 1,
                tier1 + 1,
                tier2 + 1,
                1 << 44,
            ] {
                let count = layout.extent_count_for(size);
                writeln!(
                    out,
                    "count {} {name} {size} = {count} {}",
                    au >> 20,
                    layout.capacity_bytes(count)
                )
                .unwrap();
            }
        }
    }
    out
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/extent_map_v1.txt")
}

#[test]
fn the_mapping_rules_match_the_fixture() {
    let now = table();
    if std::env::var_os("CAIRN_UPDATE_FIXTURES").is_some() {
        std::fs::write(fixture(), &now).unwrap();
    }
    let pinned = std::fs::read_to_string(fixture()).unwrap();
    for (n, (want, got)) in pinned.lines().zip(now.lines()).enumerate() {
        assert_eq!(
            want,
            got,
            "line {} of {}: the extent-mapping rules changed, which is a format change",
            n + 1,
            fixture().display()
        );
    }
    assert_eq!(pinned.lines().count(), now.lines().count());
}

#[test]
fn striping_codes_are_the_stored_ones() {
    assert_eq!(Striping::from_code(STRIPING_COARSE), Some(Striping::Coarse));
    assert_eq!(Striping::from_code(STRIPING_FINE), Some(Striping::Fine));
    assert_eq!(Striping::from_code(0), None);
    assert_eq!(Striping::Fine.code(), STRIPING_FINE);
    assert_eq!(Striping::Coarse.code(), STRIPING_COARSE);
}
