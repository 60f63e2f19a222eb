use std::mem::offset_of;

use uuid::Uuid;
use zerocopy::little_endian::{U16, U32};

use super::*;
use crate::disk_header::FeatureSet;
use crate::meta::{empty_block, open, seal, BlockId, BlockType};

fn extent(disks: &[u16], au: u32) -> Extent {
    let copies: Vec<AuAddr> = disks.iter().map(|d| AuAddr { disk: *d, au }).collect();
    Extent::new(&copies, au.is_multiple_of(2))
}

#[test]
fn file_entry_round_trips_through_a_sealed_block() {
    let entry = FileEntry {
        number: 300,
        incarnation: 7,
        state: FileState::Active,
        copies: 2,
        striping: STRIPING_FINE,
        size_bytes: 123 << 20,
        extent_count: 200,
        target_bytes: 0,
        created_unix_seconds: 1,
        modified_unix_seconds: 2,
        template: "DATAFILE".into(),
        attrs: None,
        direct: (0..DIRECT_EXTENTS as u32)
            .map(|i| extent(&[0, 1], 10 + i))
            .collect(),
        indirect: vec![extent(&[1, 0], 99)],
    };
    let mut block = empty_block();
    entry.encode_into(&mut block);
    let id = BlockId {
        block_type: BlockType::FileEntry,
        owner: FILE_DIRECTORY,
        owner_tag: 0,
        index: 300,
    };
    seal(&mut block, id, Uuid::nil(), 5);
    assert_eq!(open(block.as_slice(), id, Uuid::nil()), Ok(5));
    assert_eq!(FileEntry::decode(block.as_slice(), 300), Ok(Some(entry)));
    assert!(FileEntry::decode(block.as_slice(), 301).is_err());
    assert_eq!(FileEntry::decode(empty_block().as_slice(), 3), Ok(None));
}

#[test]
fn file_and_directory_attributes_round_trip_and_garbage_is_refused() {
    let mut entry = FileEntry {
        number: 300,
        incarnation: 7,
        state: FileState::Active,
        copies: 1,
        striping: STRIPING_COARSE,
        size_bytes: 8192,
        extent_count: 0,
        target_bytes: 0,
        created_unix_seconds: 1,
        modified_unix_seconds: 2,
        template: "DEFAULT".into(),
        attrs: Some(FileAttrs {
            mode: 0o4640,
            uid: 26,
            gid: 27,
            mtime_ns: 1_700_000_000_123_456_789,
            ctime_ns: -5,
            byte_size: 5000,
        }),
        direct: Vec::new(),
        indirect: Vec::new(),
    };
    let mut block = empty_block();
    entry.encode_into(&mut block);
    assert_eq!(
        FileEntry::decode(block.as_slice(), 300),
        Ok(Some(entry.clone()))
    );
    let at = 64 + offset_of!(RawFileEntry, attrs);
    // A byte size past the sectors, a mode beyond the permission bits,
    // an unknown flag, attributes without the flag: refused.
    for (offset, value) in [(32usize, 8193u64), (0, 0o10000), (12, 3)] {
        let mut bad = block.clone();
        bad[at + offset..at + offset + 8].copy_from_slice(&value.to_le_bytes());
        if offset != 32 {
            // Keep the neighbouring field as it was.
            bad[at + offset + 4..at + offset + 8]
                .copy_from_slice(&block[at + offset + 4..at + offset + 8]);
        }
        assert!(
            FileEntry::decode(bad.as_slice(), 300).is_err(),
            "field at {offset} = {value}"
        );
    }
    entry.attrs = None;
    entry.encode_into(&mut block);
    assert!(block[at..at + 40].iter().all(|b| *b == 0));
    block[at + 4] = 1; // a uid without the present flag
    assert!(FileEntry::decode(block.as_slice(), 300).is_err());

    let dir = AliasRecord {
        id: 1,
        parent: 0,
        kind: AliasKind::Directory,
        name: "pg".into(),
        file_number: 0,
        file_incarnation: 0,
        created_unix_seconds: 3,
        dir_attrs: Some(DirAttrs {
            mode: 0o1777,
            uid: 26,
            gid: 0,
        }),
    };
    let mut block = empty_block();
    encode_alias_block(&mut block, 0, &[&dir]);
    assert_eq!(decode_alias_block(block.as_slice(), 0), Ok(vec![dir]));
    // Directory attributes on a file's name are refused.
    let at = 64 + offset_of!(RawAlias, kind);
    block[at] = AliasKind::File.code();
    assert!(decode_alias_block(block.as_slice(), 0).is_err());
}

/// Found by fuzzing: a template name longer than the encoder allows was
/// accepted, and re-encoding the entry then panicked.
#[test]
fn a_template_name_past_the_limit_is_refused() {
    let mut block = empty_block();
    FileEntry {
        number: 300,
        incarnation: 1,
        state: FileState::Active,
        copies: 1,
        striping: STRIPING_COARSE,
        size_bytes: 0,
        extent_count: 0,
        target_bytes: 0,
        created_unix_seconds: 0,
        modified_unix_seconds: 0,
        template: "T".into(),
        attrs: None,
        direct: Vec::new(),
        indirect: Vec::new(),
    }
    .encode_into(&mut block);
    let template_at = 64 + offset_of!(RawFileEntry, template);
    block[template_at..template_at + 32].fill(b'X');
    assert!(FileEntry::decode(block.as_slice(), 300).is_err());
}

#[test]
fn extent_rules_are_enforced() {
    let mut raw = extent(&[1, 2], 4).encode();
    assert!(Extent::decode(&raw).unwrap().is_some());
    raw.copies[0].disk = U16::new(NO_DISK);
    assert!(Extent::decode(&raw).is_err(), "a copy after an empty slot");
    let mut raw = extent(&[1], 4).encode();
    raw.copies[0].au = U32::new(0);
    assert!(Extent::decode(&raw).is_err(), "AU 0");
    let mut raw = extent(&[1], 4).encode();
    raw.flags = U32::new(0x80);
    assert!(Extent::decode(&raw).is_err(), "unknown flag");
}

#[test]
fn superblock_and_directory_round_trip() {
    let sup = GroupSuper {
        name: "DATA".into(),
        copies: 2,
        au_bytes: 4 << 20,
        logical_sector_bytes: 512,
        disk_number: 1,
        disk_count: 40,
        created_unix_seconds: 9,
        features: FeatureSet::default(),
        file_directory: extent(&[0, 1], 2),
        journal: vec![extent(&[2, 0], 3), extent(&[1, 2], 4)],
    };
    let mut block = empty_block();
    sup.encode_into(&mut block);
    assert_eq!(GroupSuper::decode(block.as_slice()), Ok(sup));
    let disks: Vec<DiskEntry> = (0..40u16)
        .map(|n| DiskEntry {
            number: n,
            disk_uuid: Uuid::from_u128(u128::from(n) + 1),
            label: format!("D{n}"),
            failgroup: format!("FG{}", n % 3),
            failgroup_id: n % 3,
            state: match n {
                5 => DiskState::Offline,
                6 => DiskState::Syncing,
                _ => DiskState::Online,
            },
            flags: if n == 5 { DISK_FLAG_HELD } else { 0 },
            au_count: 1000 + u64::from(n),
            size_bytes: 1 << 32,
            logical_sector_bytes: 512,
            physical_sector_bytes: 4096,
            created_unix_seconds: 3,
            drop_after_minutes: if n == 5 { 90 } else { 0 },
            offline_seconds: if n == 5 { 7_200 } else { 0 },
            synced_generation: if n == 5 { 0xDEAD_BEEF } else { 0 },
        })
        .collect();
    let mut decoded = Vec::new();
    for index in 0..2 {
        let mut block = empty_block();
        encode_disk_directory(&mut block, index, &disks);
        decoded.extend(decode_disk_directory(block.as_slice(), index).unwrap());
    }
    assert_eq!(decoded, disks);
}

#[test]
fn at_layout_reserves_the_front_and_the_table() {
    let layout = AtLayout::for_disk(16 << 40, 4 << 20).unwrap();
    assert_eq!(layout.au_count, ((16u64 << 40) - (1 << 20)) / (4 << 20));
    assert_eq!(layout.bitmap_blocks, layout.au_count.div_ceil(32256));
    assert_eq!(layout.summary_blocks, 1);
    assert_eq!(
        layout.first_data_au, 1,
        "2 MiB + 131 blocks fit in AU 0 of 4 MiB"
    );
    let small = AtLayout::for_disk(64 << 20, 1 << 20).unwrap();
    assert_eq!(small.au_count, 63);
    assert_eq!(
        small.first_data_au, 3,
        "2 MiB front + 2 table blocks spill into AU 2"
    );
    assert!(AtLayout::for_disk(8 << 20, 64 << 20).is_none());
}

#[test]
fn the_discard_map_lies_in_the_slack_below_the_first_data_au() {
    let big = AtLayout::for_disk(16 << 40, 4 << 20).unwrap();
    assert!(
        big.has_clean_map(),
        "131 map blocks fit the 380 left in AU 0"
    );
    assert_eq!(big.clean_offset_bytes(0), (4 << 20) - 4096);
    let table_end = AT_START_BYTES + (big.summary_blocks + big.bitmap_blocks) * 4096;
    assert!(big.clean_offset_bytes(big.bitmap_blocks - 1) >= table_end);
    // 1 MiB AUs on 16 TiB: 521 bitmap blocks spill into AU 4, leaving
    // less slack than a map needs.
    let crowded = AtLayout::for_disk(16 << 40, 1 << 20).unwrap();
    assert!(!crowded.has_clean_map());
    let small = AtLayout::for_disk(64 << 20, 1 << 20).unwrap();
    assert!(small.has_clean_map());
    assert_eq!(small.clean_offset_bytes(0), (3 << 20) - 4096);
}

#[test]
fn alias_templates_attributes_journal_round_trip() {
    let records = vec![
        AliasRecord {
            id: 32,
            parent: 0,
            kind: AliasKind::Directory,
            name: "orcl".into(),
            file_number: 0,
            file_incarnation: 0,
            created_unix_seconds: 1,
            dir_attrs: None,
        },
        AliasRecord {
            id: 40,
            parent: 32,
            kind: AliasKind::File,
            name: "users.dbf".into(),
            file_number: 256,
            file_incarnation: 3,
            created_unix_seconds: 2,
            dir_attrs: None,
        },
    ];
    let mut block = empty_block();
    encode_alias_block(&mut block, 1, &records.iter().collect::<Vec<_>>());
    assert_eq!(decode_alias_block(block.as_slice(), 1).unwrap(), records);

    let templates = vec![Template {
        name: "ONLINELOG".into(),
        copies: 0,
        striping: STRIPING_FINE,
    }];
    let mut block = empty_block();
    encode_templates(&mut block, &templates);
    assert_eq!(decode_templates(block.as_slice()).unwrap(), templates);
    // A name the block's 32 bytes hold but a file's entry (30) cannot is
    // refused: a file created with it panicked the entry's encoder.
    for name in [
        "X".repeat(TEMPLATE_NAME_LEN_MAX),
        "X".repeat(TEMPLATE_NAME_LEN_MAX + 1),
    ] {
        let mut block = empty_block();
        encode_templates(
            &mut block,
            &[Template {
                name: name.clone(),
                copies: 0,
                striping: STRIPING_COARSE,
            }],
        );
        assert_eq!(
            decode_templates(block.as_slice()).is_ok(),
            name.len() <= TEMPLATE_NAME_LEN_MAX,
            "{} bytes",
            name.len()
        );
    }

    let attributes = vec![("au_size".to_string(), "4194304".to_string())];
    let mut block = empty_block();
    encode_attributes(&mut block, &attributes);
    assert_eq!(decode_attributes(block.as_slice()).unwrap(), attributes);

    let record = JournalRecord {
        seq: 12,
        prev_checksum: 0xdead,
        image_count: 2,
        images_crc: 77,
        targets: vec![
            JournalTarget {
                image: 0,
                disk: 1,
                offset_bytes: 4096,
            },
            JournalTarget {
                image: 1,
                disk: 0,
                offset_bytes: 8192,
            },
        ],
    };
    let mut block = empty_block();
    record.encode_into(&mut block);
    assert_eq!(JournalRecord::decode(block.as_slice()).unwrap(), record);
}
