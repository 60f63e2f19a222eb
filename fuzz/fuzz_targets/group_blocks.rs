//! Every disk-group metadata decoder on arbitrary bytes: none panics, and what
//! the structured decoders accept re-encodes to what they read.
#![no_main]

use cairn_format::group::{
    decode_alias_block, decode_attributes, decode_disk_directory, decode_indirect,
    decode_map_block, decode_summary, decode_templates, encode_map_block, FileEntry, GroupSuper,
    IntentRecord, JournalHeader, JournalRecord, LogHeader,
};
use cairn_format::heartbeat::Heartbeat;
use cairn_format::meta::{self, BlockId, BlockType, BLOCK_BYTES};
use libfuzzer_sys::fuzz_target;
use uuid::Uuid;

fuzz_target!(|data: &[u8]| {
    let mut block = [0u8; BLOCK_BYTES];
    let n = data.len().min(BLOCK_BYTES);
    block[..n].copy_from_slice(&data[..n]);
    // The envelope, with the address and group the block claims and others.
    let group = meta::claimed_group(&block).unwrap_or_else(Uuid::nil);
    for block_type in [BlockType::GroupSuper, BlockType::FileEntry, BlockType::JournalRecord, BlockType::Heartbeat, BlockType::ChecksumMap, BlockType::ChecksumLog, BlockType::ChecksumLogHeader] {
        let id = BlockId { block_type, owner: u32::from(block[0x20]), owner_tag: 0, index: u64::from(block[0x28]) };
        let _ = meta::open(&block, id, group);
        let _ = meta::open(&data[..n], id, group);
    }
    if let Ok(sup) = GroupSuper::decode(&block) {
        let mut again = meta::empty_block();
        again[..64].copy_from_slice(&block[..64]);
        sup.encode_into(&mut again);
        assert_eq!(GroupSuper::decode(&again[..]), Ok(sup));
    }
    let number = u32::from_le_bytes([block[64], block[65], block[66], block[67]]);
    if let Ok(Some(entry)) = FileEntry::decode(&block, number) {
        let mut again = meta::empty_block();
        again[..64].copy_from_slice(&block[..64]);
        entry.encode_into(&mut again);
        assert_eq!(FileEntry::decode(&again[..], number), Ok(Some(entry)));
    }
    let _ = decode_disk_directory(&block, usize::from(block[1] % 16));
    let _ = decode_summary(&block);
    let _ = decode_indirect(&block, usize::from(block[2]));
    let _ = decode_alias_block(&block, u64::from(block[3]));
    let _ = decode_templates(&block);
    let _ = decode_attributes(&block);
    let _ = JournalHeader::decode(&block);
    let _ = Heartbeat::decode(&data[..n]);
    if let Ok(beat) = Heartbeat::decode(&block) {
        let mut again = meta::empty_block();
        beat.encode_into(&mut again);
        assert_eq!(Heartbeat::decode(&again[..]), Ok(beat));
    }
    if let Ok(record) = JournalRecord::decode(&block) {
        let mut again = meta::empty_block();
        record.encode_into(&mut again);
        assert_eq!(JournalRecord::decode(&again[..]), Ok(record));
    }
    if let Ok(header) = LogHeader::decode(&block) {
        let mut again = meta::empty_block();
        header.encode_into(&mut again);
        assert_eq!(LogHeader::decode(&again[..]), Ok(header));
    }
    if let Ok(record) = IntentRecord::decode(&block) {
        let mut again = meta::empty_block();
        record.encode_into(&mut again);
        assert_eq!(IntentRecord::decode(&again[..]), Ok(record));
    }
    // Any payload is a map block; what it decodes to encodes back to it.
    let sums = decode_map_block(&block, 0x98f9_4189);
    let mut again = meta::empty_block();
    again[..64].copy_from_slice(&block[..64]);
    again[0] = b'C';
    encode_map_block(&mut again, &sums);
    assert_eq!(decode_map_block(&again[..], 0), sums);
});
