//! Golden fixtures for the disk-group metadata blocks (metadata format version 1).
//!
//! Each test builds one fixed example of a block kind with the public encoders,
//! seals it with the self-address the store gives that kind, and compares every
//! byte with `tests/fixtures/group_*_v1.hex`. It then opens and decodes the
//! fixture bytes and expects the value it started from, so the fixtures pin both
//! directions. `docs/on_disk_format.md` ("Disk groups") explains every byte; the
//! test `documented_offsets_hold` checks the offsets that document quotes.
//!
//! A fixture that no longer matches means the on-disk format changed: that needs
//! a new format version (or a feature bit) and a version-history entry, not a
//! regenerated fixture. To write the files after such a deliberate change, run
//! `CAIRN_UPDATE_FIXTURES=1 cargo test -p cairn-format --test group_fixtures`
//! and review the diff byte by byte against the document.
//!
//! Fixture format (as `tests/fixtures/disk_header_v1.hex`): `#` comment lines,
//! then one line per 16 bytes, `offset: b0 b1 ... b15` in hex; lines are
//! consecutive from offset 0, and every byte after the last line is zero.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use cairn_format::group::{
    self, AliasKind, AliasRecord, AuAddr, DiskEntry, DiskState, Extent, FileEntry, FileState,
    GroupSuper, JournalHeader, JournalRecord, JournalTarget, Template, FILE_ALIAS_DIRECTORY,
    FILE_ATTRIBUTES, FILE_DIRECTORY, FILE_JOURNAL, FILE_TEMPLATES, STRIPING_COARSE, STRIPING_FINE,
    SUPER_SLOT_OFFSETS_BYTES,
};
use cairn_format::heartbeat::{Heartbeat, HeartbeatState, HEARTBEAT_OFFSET_BYTES};
use cairn_format::meta::{self, Block, BlockId, BlockType, BLOCK_BYTES};
use cairn_format::FeatureSet;
use uuid::Uuid;

const MIB: u64 = 1 << 20;
/// The example group: three 64 MiB 4Kn disks, normal redundancy, 4 MiB AUs.
const AU_BYTES: u64 = 4 * MIB;
const GROUP: Uuid = Uuid::from_u128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff);
/// 2025-11-21T04:40:00Z, as in the disk header fixture.
const CREATED: u64 = 1_763_700_000;
/// The transaction (journal sequence number) that wrote the journaled examples.
const SEQ: u64 = 7;

fn block_index(offset_bytes: u64) -> u64 {
    offset_bytes / BLOCK_BYTES as u64
}

/// Per-disk blocks: owner = disk number, tag 0, index = byte offset / 4096.
fn per_disk(block_type: BlockType, disk: u16, offset_bytes: u64) -> BlockId {
    BlockId {
        block_type,
        owner: u32::from(disk),
        owner_tag: 0,
        index: block_index(offset_bytes),
    }
}

/// Blocks of metadata files: owner = file number, tag 0, index = block in the file.
fn file_block(block_type: BlockType, file: u32, index: u64) -> BlockId {
    BlockId {
        block_type,
        owner: file,
        owner_tag: 0,
        index,
    }
}

fn extent(copies: &[(u16, u32)], initialized: bool) -> Extent {
    let addrs: Vec<AuAddr> = copies
        .iter()
        .map(|&(disk, au)| AuAddr { disk, au })
        .collect();
    Extent::new(&addrs, initialized)
}

/// The file directory's first extent: AU 1 of disks 0 and 1.
fn file_directory_extent() -> Extent {
    extent(&[(0, 1), (1, 1)], true)
}

fn sealed(id: BlockId, generation: u64, fill: impl FnOnce(&mut Block)) -> Box<Block> {
    let mut block = meta::empty_block();
    fill(&mut block);
    meta::seal(&mut block, id, GROUP, generation);
    block
}

// ---------------------------------------------------------------------------
// The examples

/// Slot B (the slot generation 1 selects) of disk 1.
const SUPER_ID: BlockId = BlockId {
    block_type: BlockType::GroupSuper,
    owner: 1,
    owner_tag: 0,
    index: 258,
};

fn superblock() -> GroupSuper {
    GroupSuper {
        name: "DATA".into(),
        copies: 2,
        au_bytes: AU_BYTES as u32,
        logical_sector_bytes: 4096,
        disk_number: 1,
        disk_count: 3,
        created_unix_seconds: CREATED,
        features: FeatureSet::default(),
        file_directory: file_directory_extent(),
        journal: Vec::new(),
    }
}

fn disks() -> Vec<DiskEntry> {
    (0..3u16)
        .map(|n| DiskEntry {
            number: n,
            disk_uuid: Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677 + u128::from(n)),
            label: format!("DATA{}", n + 1),
            failgroup: format!("FG{}", n + 1),
            failgroup_id: n,
            state: if n == 2 {
                DiskState::Offline
            } else {
                DiskState::Online
            },
            // 64 MiB device: the tail header copy at 63 MiB leaves 15 whole 4 MiB AUs.
            au_count: 15,
            size_bytes: 64 * MIB,
            logical_sector_bytes: 4096,
            physical_sector_bytes: 4096,
            created_unix_seconds: CREATED,
            flags: 0,
            drop_after_minutes: 0,
            offline_seconds: 0,
            synced_generation: 0,
        })
        .collect()
}

/// A file in the middle of a grow from 8 MiB to 12 MiB: the third extent is
/// allocated but not yet written. The indirect pointer is there to show the
/// field in a short fixture: the store keeps indirect AUs only for extents past
/// the 106th, but the format (and the decoder) has no such rule.
fn file_entry() -> FileEntry {
    FileEntry {
        number: 256,
        incarnation: 1,
        state: FileState::Resizing,
        copies: 2,
        striping: STRIPING_COARSE,
        size_bytes: 8 * MIB,
        extent_count: 3,
        target_bytes: 12 * MIB,
        created_unix_seconds: CREATED,
        modified_unix_seconds: CREATED + 60,
        template: "DATAFILE".into(),
        attrs: None,
        direct: vec![
            extent(&[(0, 2), (1, 2)], true),
            extent(&[(1, 3), (2, 2)], true),
            extent(&[(2, 3), (0, 3)], false),
        ],
        indirect: vec![extent(&[(1, 4), (2, 4)], true)],
    }
}

fn indirect_extents() -> Vec<Extent> {
    vec![
        extent(&[(0, 4), (1, 5)], true),
        extent(&[(1, 6), (2, 5)], false),
    ]
}

fn aliases() -> Vec<AliasRecord> {
    vec![
        AliasRecord {
            id: 1,
            parent: 0,
            kind: AliasKind::Directory,
            name: "orcl".into(),
            file_number: 0,
            file_incarnation: 0,
            created_unix_seconds: CREATED,
            dir_attrs: None,
        },
        AliasRecord {
            id: 2,
            parent: 1,
            kind: AliasKind::File,
            name: "users.dbf".into(),
            file_number: 256,
            file_incarnation: 1,
            created_unix_seconds: CREATED + 1,
            dir_attrs: None,
        },
        AliasRecord {
            id: 3,
            parent: 0,
            kind: AliasKind::Alias,
            name: "USERS.256.1".into(),
            file_number: 256,
            file_incarnation: 1,
            created_unix_seconds: CREATED + 2,
            dir_attrs: None,
        },
    ]
}

fn templates() -> Vec<Template> {
    vec![
        Template {
            name: "DATAFILE".into(),
            copies: 0,
            striping: STRIPING_COARSE,
        },
        Template {
            name: "ONLINELOG".into(),
            copies: 3,
            striping: STRIPING_FINE,
        },
    ]
}

fn attributes() -> Vec<(String, String)> {
    vec![
        ("au_size".into(), AU_BYTES.to_string()),
        ("compatible.cairn".into(), "0.1".into()),
    ]
}

/// The header written by the first checkpoint (generation 1, so slot 1).
fn journal_header() -> JournalHeader {
    JournalHeader {
        header_generation: 1,
        next_seq: 1,
        ring_blocks: 1022,
    }
}

/// Where the file entry of file 256 lives: block 256 of the file directory,
/// whose first extent is AU 1 on disks 0 and 1.
fn entry_offset_bytes() -> u64 {
    AU_BYTES + 256 * BLOCK_BYTES as u64
}

/// The journal record that carries the file entry and the indirect block: the
/// first record after a checkpoint (ring position 2, no previous checksum).
fn journal_record() -> JournalRecord {
    let images = [file_entry_block(), indirect_block()];
    let indirect_offset = 4 * AU_BYTES;
    JournalRecord {
        seq: SEQ,
        prev_checksum: 0,
        image_count: 2,
        images_crc: group::images_crc(&[&images[0], &images[1]]),
        targets: vec![
            JournalTarget {
                image: 0,
                disk: 0,
                offset_bytes: entry_offset_bytes(),
            },
            JournalTarget {
                image: 0,
                disk: 1,
                offset_bytes: entry_offset_bytes(),
            },
            JournalTarget {
                image: 1,
                disk: 1,
                offset_bytes: indirect_offset,
            },
            JournalTarget {
                image: 1,
                disk: 2,
                offset_bytes: indirect_offset,
            },
        ],
    }
}

// ---------------------------------------------------------------------------
// Sealed blocks

fn superblock_block() -> Box<Block> {
    sealed(SUPER_ID, 1, |b| superblock().encode_into(b))
}

fn disk_directory_id() -> BlockId {
    per_disk(
        BlockType::DiskDirectory,
        1,
        SUPER_SLOT_OFFSETS_BYTES[1] + BLOCK_BYTES as u64,
    )
}

fn disk_directory_block() -> Box<Block> {
    sealed(disk_directory_id(), 1, |b| {
        group::encode_disk_directory(b, 0, &disks());
    })
}

fn summary_id() -> BlockId {
    per_disk(BlockType::AtSummary, 1, group::AT_START_BYTES)
}

fn bitmap_id() -> BlockId {
    per_disk(BlockType::AtBitmap, 1, group::AT_START_BYTES + 4096)
}

/// Disk 1 uses AUs 1 to 5 (AU 0 holds the reserve and the table).
fn summary_block() -> Box<Block> {
    sealed(summary_id(), SEQ, |b| group::encode_summary(b, &[5]))
}

fn bitmap_bits() -> Vec<u8> {
    let mut bits = vec![0u8; meta::PAYLOAD_BYTES];
    bits[0] = 0b0011_1110;
    bits
}

fn bitmap_block() -> Box<Block> {
    sealed(bitmap_id(), SEQ, |b| {
        group::encode_bitmap(b, &bitmap_bits())
    })
}

fn entry_id() -> BlockId {
    file_block(BlockType::FileEntry, FILE_DIRECTORY, 256)
}

fn file_entry_block() -> Box<Block> {
    sealed(entry_id(), SEQ, |b| file_entry().encode_into(b))
}

/// Indirect block 0 of file 256, incarnation 1.
const INDIRECT_ID: BlockId = BlockId {
    block_type: BlockType::Indirect,
    owner: 256,
    owner_tag: 1,
    index: 0,
};

fn indirect_block() -> Box<Block> {
    sealed(INDIRECT_ID, SEQ, |b| {
        group::encode_indirect(b, &indirect_extents());
    })
}

fn alias_id() -> BlockId {
    file_block(BlockType::Alias, FILE_ALIAS_DIRECTORY, 0)
}

fn alias_block() -> Box<Block> {
    let records = aliases();
    sealed(alias_id(), SEQ, |b| {
        group::encode_alias_block(b, 0, &records.iter().collect::<Vec<_>>());
    })
}

fn template_id() -> BlockId {
    file_block(BlockType::Template, FILE_TEMPLATES, 0)
}

/// Written at group creation, outside the journal: generation 0.
fn template_block() -> Box<Block> {
    sealed(template_id(), 0, |b| {
        group::encode_templates(b, &templates())
    })
}

fn attribute_id() -> BlockId {
    file_block(BlockType::Attribute, FILE_ATTRIBUTES, 0)
}

fn attribute_block() -> Box<Block> {
    sealed(attribute_id(), 0, |b| {
        group::encode_attributes(b, &attributes());
    })
}

fn journal_header_id() -> BlockId {
    file_block(BlockType::JournalHeader, FILE_JOURNAL, 1)
}

fn journal_header_block() -> Box<Block> {
    sealed(journal_header_id(), 1, |b| journal_header().encode_into(b))
}

fn journal_record_id() -> BlockId {
    file_block(BlockType::JournalRecord, FILE_JOURNAL, 2)
}

fn journal_record_block() -> Box<Block> {
    sealed(journal_record_id(), SEQ, |b| {
        journal_record().encode_into(b)
    })
}

// ---------------------------------------------------------------------------
// Fixture files

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("group_{name}_v1.hex"))
}

fn to_hex(block: &[u8], comment: &str) -> String {
    let mut out = String::new();
    for line in comment.lines() {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    let lines = block
        .chunks(16)
        .rposition(|c| c.iter().any(|b| *b != 0))
        .map_or(0, |last| last + 1);
    for (i, chunk) in block.chunks(16).take(lines).enumerate() {
        out.push_str(&format!("{:03x}:", i * 16));
        for b in chunk {
            out.push_str(&format!(" {b:02x}"));
        }
        out.push('\n');
    }
    out
}

/// Parse a fixture into a whole block; lines must run consecutively from 0.
fn from_hex(text: &str, path: &std::path::Path) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(BLOCK_BYTES);
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (offset, rest) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("{}: line without an offset: {line}", path.display()));
        let offset = usize::from_str_radix(offset.trim(), 16).unwrap();
        assert_eq!(
            offset,
            bytes.len(),
            "{}: lines must be consecutive",
            path.display()
        );
        bytes.extend(
            rest.split_whitespace()
                .map(|h| u8::from_str_radix(h, 16).unwrap()),
        );
    }
    assert!(
        bytes.len() <= BLOCK_BYTES,
        "{}: longer than a block",
        path.display()
    );
    bytes.resize(BLOCK_BYTES, 0);
    bytes
}

/// Compare `block` with fixture `name`; write it instead under CAIRN_UPDATE_FIXTURES=1.
fn check_fixture(name: &str, block: &Block, comment: &str) {
    let path = fixture_path(name);
    if std::env::var_os("CAIRN_UPDATE_FIXTURES").is_some_and(|v| v == "1") {
        // Through a rename, so a test reading another fixture never sees half a file.
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let temporary = path.with_extension("hex.new");
        std::fs::write(&temporary, to_hex(block, comment)).unwrap();
        std::fs::rename(&temporary, &path).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; generate it with CAIRN_UPDATE_FIXTURES=1",
            path.display()
        )
    });
    let expected = from_hex(&text, &path);
    if let Some(at) = (0..BLOCK_BYTES).find(|i| expected[*i] != block[*i]) {
        panic!(
            "{name}: format drifted from {} at byte {at:#05x} (fixture {:#04x}, code {:#04x}); \
             a format change needs a new version and a docs/on_disk_format.md entry",
            path.display(),
            expected[at],
            block[at]
        );
    }
}

/// The fixture's bytes, for the decode half of each test.
fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; generate it with CAIRN_UPDATE_FIXTURES=1",
            path.display()
        )
    });
    from_hex(&text, &path)
}

fn opens_as(bytes: &[u8], id: BlockId, generation: u64) {
    assert_eq!(meta::open(bytes, id, GROUP), Ok(generation), "{id}");
}

// ---------------------------------------------------------------------------
// Tests

#[test]
fn superblock_fixture() {
    check_fixture(
        "superblock",
        &superblock_block(),
        "Group superblock, metadata format 1: slot B (offset 1 MiB + 8 KiB, block 258)\n\
         of disk 1 in group DATA (uuid 00112233-4455-6677-8899-aabbccddeeff), slot\n\
         generation 1; normal redundancy, 4 MiB AUs, 4096-byte sectors, 3 disks,\n\
         created 2025-11-21T04:40:00Z; file directory extent 0 at AU 1 of disks 0 and 1.\n\
         Offsets are from the block start (payload offset + 64); every byte after the\n\
         last line is zero. docs/on_disk_format.md explains each field.",
    );
    let bytes = fixture_bytes("superblock");
    opens_as(&bytes, SUPER_ID, 1);
    assert_eq!(GroupSuper::decode(&bytes), Ok(superblock()));
}

#[test]
fn disk_directory_fixture() {
    check_fixture(
        "disk_directory",
        &disk_directory_block(),
        "Disk directory block 0 of slot B on disk 1 (offset 1 MiB + 12 KiB, block 259),\n\
         slot generation 1: disks 0-2 labelled DATA1-DATA3 in failure groups FG1-FG3,\n\
         64 MiB 4Kn devices of 15 AUs each; disk 2 is OFFLINE. Offsets are from the\n\
         block start; every byte after the last line is zero.",
    );
    let bytes = fixture_bytes("disk_directory");
    opens_as(&bytes, disk_directory_id(), 1);
    assert_eq!(group::decode_disk_directory(&bytes, 0), Ok(disks()));
}

#[test]
fn allocation_table_fixtures() {
    check_fixture(
        "at_summary",
        &summary_block(),
        "Allocation summary block 0 of disk 1 (offset 2 MiB, block 512), written by\n\
         transaction 7: bitmap block 0 has 5 AUs in use. Every byte after the last\n\
         line is zero.",
    );
    check_fixture(
        "at_bitmap",
        &bitmap_block(),
        "Allocation bitmap block 0 of disk 1 (offset 2 MiB + 4 KiB, block 513), written\n\
         by transaction 7: AUs 1-5 in use (bit i of byte j = AU 8j + i). Every byte\n\
         after the last line is zero.",
    );
    let bytes = fixture_bytes("at_summary");
    opens_as(&bytes, summary_id(), SEQ);
    assert_eq!(group::decode_summary(&bytes)[..2], [5, 0]);
    let bytes = fixture_bytes("at_bitmap");
    opens_as(&bytes, bitmap_id(), SEQ);
    assert_eq!(group::decode_bitmap(&bytes), bitmap_bits());
}

#[test]
fn file_entry_fixture() {
    check_fixture(
        "file_entry",
        &file_entry_block(),
        "File directory entry of file 256 (file 1, block 256), incarnation 1, written\n\
         by transaction 7: RESIZING from 8 MiB to 12 MiB, 2 copies, coarse, template\n\
         DATAFILE; three direct extents (the third not yet initialised) and one\n\
         indirect pointer. Offsets are from the block start; every byte after the\n\
         last line is zero.",
    );
    let bytes = fixture_bytes("file_entry");
    opens_as(&bytes, entry_id(), SEQ);
    assert_eq!(FileEntry::decode(&bytes, 256), Ok(Some(file_entry())));
}

#[test]
fn indirect_fixture() {
    check_fixture(
        "indirect",
        &indirect_block(),
        "Indirect block 0 of file 256 incarnation 1 (owner 256, tag 1, index 0),\n\
         written by transaction 7: two extents (the file's extents 106 and 107).\n\
         Every byte after the last line is zero.",
    );
    let bytes = fixture_bytes("indirect");
    opens_as(&bytes, INDIRECT_ID, SEQ);
    assert_eq!(group::decode_indirect(&bytes, 2), Ok(indirect_extents()));
    let stale = BlockId {
        owner_tag: 2,
        ..INDIRECT_ID
    };
    assert!(
        meta::open(&bytes, stale, GROUP).is_err(),
        "a block of an earlier incarnation is refused"
    );
}

#[test]
fn alias_fixture() {
    check_fixture(
        "alias",
        &alias_block(),
        "Alias directory block 0 (file 4, block 0), written by transaction 7:\n\
         id 1 directory orcl, id 2 file orcl/users.dbf -> file 256.1, id 3 alias\n\
         USERS.256.1 -> file 256.1. Every byte after the last line is zero.",
    );
    let bytes = fixture_bytes("alias");
    opens_as(&bytes, alias_id(), SEQ);
    assert_eq!(group::decode_alias_block(&bytes, 0), Ok(aliases()));
}

#[test]
fn template_and_attribute_fixtures() {
    check_fixture(
        "templates",
        &template_block(),
        "Templates block (file 5, block 0), written at group creation (generation 0):\n\
         DATAFILE (group redundancy, coarse), ONLINELOG (3 copies, fine). Every byte\n\
         after the last line is zero.",
    );
    check_fixture(
        "attributes",
        &attribute_block(),
        "Attributes block (file 6, block 0), written at group creation (generation 0):\n\
         au_size=4194304, compatible.cairn=0.1. Every byte after the last line is zero.",
    );
    let bytes = fixture_bytes("templates");
    opens_as(&bytes, template_id(), 0);
    assert_eq!(group::decode_templates(&bytes), Ok(templates()));
    let bytes = fixture_bytes("attributes");
    opens_as(&bytes, attribute_id(), 0);
    assert_eq!(group::decode_attributes(&bytes), Ok(attributes()));
}

#[test]
fn journal_fixtures() {
    check_fixture(
        "journal_header",
        &journal_header_block(),
        "Journal header, slot 1 of the journal (file 3, block 1), header generation 1:\n\
         replay starts at ring block 2 with sequence 1; 1022 ring blocks. Every byte\n\
         after the last line is zero.",
    );
    check_fixture(
        "journal_record",
        &journal_record_block(),
        "Journal record header at ring block 2 (file 3, block 2), sequence 7, first\n\
         after a checkpoint (previous checksum 0): two images follow it in blocks 3\n\
         and 4 (the file entry and indirect fixtures), image 0 to disks 0 and 1 at\n\
         4 MiB + 1 MiB, image 1 to disks 1 and 2 at 16 MiB. Every byte after the last\n\
         line is zero.",
    );
    let bytes = fixture_bytes("journal_header");
    opens_as(&bytes, journal_header_id(), 1);
    assert_eq!(JournalHeader::decode(&bytes), Ok(journal_header()));
    let bytes = fixture_bytes("journal_record");
    opens_as(&bytes, journal_record_id(), SEQ);
    assert_eq!(JournalRecord::decode(&bytes), Ok(journal_record()));
    // The images checksum is over the images as the ring holds them: the
    // fixtures of the two blocks the record carries.
    let images: Vec<Box<Block>> = ["file_entry", "indirect"]
        .iter()
        .map(|n| {
            let mut b = meta::empty_block();
            b.copy_from_slice(&fixture_bytes(n));
            b
        })
        .collect();
    assert_eq!(
        group::images_crc(&[&images[0], &images[1]]),
        journal_record().images_crc
    );
}

/// Disk 1's heartbeat, sequence 42, by host `dbhost1` (pid 4242), whose
/// mount wrote superblock generation 3, beating every second and stopping
/// after 10 seconds without one landing; written 500 ms after `CREATED`.
fn heartbeat() -> Heartbeat {
    Heartbeat {
        host_id: Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10),
        host_name: "dbhost1".into(),
        pid: 4242,
        written_unix_ms: CREATED * 1000 + 500,
        mount_generation: 3,
        interval_ms: 1000,
        fail_intervals: 10,
        state: HeartbeatState::Active,
    }
}

fn heartbeat_id() -> BlockId {
    per_disk(BlockType::Heartbeat, 1, HEARTBEAT_OFFSET_BYTES)
}

fn heartbeat_block() -> Box<Block> {
    sealed(heartbeat_id(), 42, |b| heartbeat().encode_into(b))
}

#[test]
fn heartbeat_fixture() {
    check_fixture(
        "heartbeat",
        &heartbeat_block(),
        "Heartbeat of disk 1 (block 1), sequence 42: host dbhost1, host id\n\
         01020304-0506-0708-090a-0b0c0d0e0f10, pid 4242, written 1763700000500 ms,\n\
         mount generation 3, every 1000 ms, stops after 10 intervals, active. Every\n\
         byte after the last line is zero.",
    );
    let bytes = fixture_bytes("heartbeat");
    opens_as(&bytes, heartbeat_id(), 42);
    assert_eq!(Heartbeat::decode(&bytes), Ok(heartbeat()));
    // The offsets the format document quotes.
    let b = heartbeat_block();
    assert_eq!(u16_at(&b[..], 0x0C), 14, "block type");
    assert_eq!(u64_at(&b[..], 0x28), 1, "index");
    assert_eq!(&b[0x40..0x50], heartbeat().host_id.as_bytes(), "host_id");
    assert_eq!(
        u64_at(&b[..], 0x50),
        CREATED * 1000 + 500,
        "written_unix_ms"
    );
    assert_eq!(u64_at(&b[..], 0x58), 3, "mount_generation");
    assert_eq!(u32_at(&b[..], 0x60), 1000, "interval_ms");
    assert_eq!(u16_at(&b[..], 0x64), 10, "fail_intervals");
    assert_eq!(b[0x66], 1, "state");
    assert_eq!(u32_at(&b[..], 0x68), 4242, "pid");
    assert_eq!(&b[0x70..0x77], b"dbhost1", "host_name");
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The block offsets `docs/on_disk_format.md` quotes, read from the encoders'
/// output: if one of these fails, the document or the code is wrong.
#[test]
fn documented_offsets_hold() {
    // Envelope.
    let b = file_entry_block();
    assert_eq!(&b[0x00..0x08], b"CAIRNMTA");
    assert_eq!(u32_at(&b[..], 0x08), meta::checksum_of(&b[..]));
    assert_eq!(u32_at(&b[..], 0x08), crc32c::crc32c(&b[0x0C..]));
    assert_eq!(u16_at(&b[..], 0x0C), 6);
    assert_eq!(u16_at(&b[..], 0x0E), 1);
    assert_eq!(&b[0x10..0x20], GROUP.as_bytes());
    assert_eq!(u32_at(&b[..], 0x20), FILE_DIRECTORY);
    assert_eq!(u32_at(&b[..], 0x24), 0);
    assert_eq!(u64_at(&b[..], 0x28), 256);
    assert_eq!(u64_at(&b[..], 0x30), SEQ);
    assert_eq!(&b[0x38..0x40], &[0; 8]);

    // File entry (payload offset + 64).
    assert_eq!(u32_at(&b[..], 64), 256, "file_number");
    assert_eq!(u32_at(&b[..], 68), 1, "incarnation");
    assert_eq!(b[72], 3, "state: resizing");
    assert_eq!(b[73], 2, "copies");
    assert_eq!(b[74], STRIPING_COARSE, "striping");
    assert_eq!(u16_at(&b[..], 76), 1, "indirect_count");
    assert_eq!(u64_at(&b[..], 80), 8 * MIB, "size_bytes");
    assert_eq!(u64_at(&b[..], 88), 3, "extent_count");
    assert_eq!(u64_at(&b[..], 96), 12 * MIB, "target_bytes");
    assert_eq!(&b[120..128], b"DATAFILE", "template");
    // indirect[0] at 192, direct[0] at 704, direct[2] at 768.
    assert_eq!(u32_at(&b[..], 192), 1, "indirect[0].flags");
    assert_eq!(u32_at(&b[..], 200), 4, "indirect[0] copy 0 AU");
    assert_eq!(u16_at(&b[..], 204), 1, "indirect[0] copy 0 disk");
    assert_eq!(u16_at(&b[..], 220), 0xFFFF, "indirect[0] copy 2: empty");
    assert_eq!(u32_at(&b[..], 704), 1, "direct[0] initialised");
    assert_eq!(u32_at(&b[..], 712), 2, "direct[0] copy 0 AU");
    assert_eq!(u32_at(&b[..], 768), 0, "direct[2] not initialised");
    assert_eq!(u16_at(&b[..], 768 + 12), 2, "direct[2] copy 0 disk");

    // Superblock.
    let b = superblock_block();
    assert_eq!(&b[64..68], b"DATA");
    assert_eq!(b[96], 2, "copies");
    assert_eq!(u32_at(&b[..], 100), AU_BYTES as u32, "au_bytes");
    assert_eq!(u32_at(&b[..], 104), 4096, "logical_sector_bytes");
    assert_eq!(u16_at(&b[..], 108), 1, "disk_number");
    assert_eq!(u16_at(&b[..], 110), 3, "disk_count");
    assert_eq!(u64_at(&b[..], 112), CREATED);
    assert_eq!(u32_at(&b[..], 144), 1, "file_directory.flags");
    assert_eq!(u32_at(&b[..], 152), 1, "file_directory copy 0 AU");
    assert_eq!(u64_at(&b[..], 0x28), 258, "slot B self-address");

    // Disk directory: entry n at 64 + 128 n.
    let b = disk_directory_block();
    let e2 = 64 + 2 * 128;
    assert_eq!(&b[e2..e2 + 16], disks()[2].disk_uuid.as_bytes());
    assert_eq!(&b[e2 + 16..e2 + 21], b"DATA3");
    assert_eq!(&b[e2 + 48..e2 + 51], b"FG3");
    assert_eq!(u16_at(&b[..], e2 + 80), 2, "number");
    assert_eq!(b[e2 + 82], 2, "state: offline");
    assert_eq!(u16_at(&b[..], e2 + 84), 2, "failgroup_id");
    assert_eq!(u64_at(&b[..], e2 + 88), 15, "au_count");
    assert_eq!(u64_at(&b[..], e2 + 96), 64 * MIB, "size_bytes");
    assert_eq!(u32_at(&b[..], e2 + 104), 4096);
    assert_eq!(u32_at(&b[..], e2 + 108), 4096);
    assert_eq!(u64_at(&b[..], e2 + 112), CREATED);

    // Alias record n at 64 + 128 (n - 1) in block 0.
    let b = alias_block();
    let r2 = 64 + 128;
    assert_eq!(u32_at(&b[..], r2), 1, "parent");
    assert_eq!(b[r2 + 4], 2, "kind: file");
    assert_eq!(b[r2 + 5], 9, "name_len");
    assert_eq!(u32_at(&b[..], r2 + 8), 256, "file_number");
    assert_eq!(u32_at(&b[..], r2 + 12), 1, "file_incarnation");
    assert_eq!(u64_at(&b[..], r2 + 16), CREATED + 1);
    assert_eq!(&b[r2 + 24..r2 + 33], b"users.dbf");

    // Templates (64 bytes each) and attributes (128 bytes each).
    let b = template_block();
    assert_eq!(&b[128..137], b"ONLINELOG");
    assert_eq!(b[128 + 32], 3, "copies");
    assert_eq!(b[128 + 33], STRIPING_FINE);
    let b = attribute_block();
    assert_eq!(&b[192..208], b"compatible.cairn");
    assert_eq!(&b[192 + 32..192 + 35], b"0.1");

    // Journal header and record.
    let b = journal_header_block();
    assert_eq!(u64_at(&b[..], 64), 1, "header_generation");
    assert_eq!(u64_at(&b[..], 72), 1, "next_seq");
    assert_eq!(u64_at(&b[..], 80), 1022, "ring_blocks");
    let b = journal_record_block();
    let r = journal_record();
    assert_eq!(u64_at(&b[..], 64), SEQ, "seq");
    assert_eq!(u32_at(&b[..], 72), 0, "prev_checksum");
    assert_eq!(u16_at(&b[..], 76), 2, "image_count");
    assert_eq!(u16_at(&b[..], 78), 4, "target_count");
    assert_eq!(u32_at(&b[..], 80), r.images_crc, "images_crc");
    // target k at 96 + 16 k.
    assert_eq!(u16_at(&b[..], 96 + 32), 1, "target 2 image");
    assert_eq!(u16_at(&b[..], 96 + 34), 1, "target 2 disk");
    assert_eq!(u64_at(&b[..], 96 + 40), 16 * MIB, "target 2 offset");

    // Allocation table.
    assert_eq!(u32_at(&summary_block()[..], 64), 5);
    assert_eq!(bitmap_block()[64], 0b0011_1110);
}

/// Every fixture is a block no other example is: each one's self-address
/// differs, so a fixture pasted in the wrong place is caught by `open`.
#[test]
fn self_addresses_are_distinct() {
    let ids = [
        SUPER_ID,
        disk_directory_id(),
        summary_id(),
        bitmap_id(),
        entry_id(),
        INDIRECT_ID,
        alias_id(),
        template_id(),
        attribute_id(),
        journal_header_id(),
        journal_record_id(),
        heartbeat_id(),
    ];
    for (i, a) in ids.iter().enumerate() {
        for b in &ids[i + 1..] {
            assert_ne!(a, b);
        }
    }
    assert_eq!(SUPER_ID.index, block_index(SUPER_SLOT_OFFSETS_BYTES[1]));
}
