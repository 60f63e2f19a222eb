//! Where metadata lives: the places (disk, byte offset) of every copy of a
//! metadata block, the self-address each kind of block is sealed with, and
//! the encoding of a dirty block from the state in memory.

use cairn_format::group::{
    entry_place, AliasRecord, AtLayout, ALIASES_PER_BLOCK, DIRECT_EXTENTS,
    EXTENTS_PER_INDIRECT_BLOCK, FILE_ALIAS_DIRECTORY, FILE_ATTRIBUTES, FILE_TEMPLATES,
};
use cairn_format::meta::{Block, BlockId, BlockType, BLOCK_BYTES};
use cairn_format::{group as fmt, meta};
use cairn_io::AlignedBuf;

use super::alloc::DiskAlloc;
use super::block_ids::{entry_id, map_block_id, per_disk_id};
use super::journal::DurableItem;
use super::mounted::Group;
use super::parts::files::FileRec;
use super::parts::txn::Dirty;

impl Group<'_> {
    /// Physical places of block `block` of a metadata file (all copies).
    pub(super) fn file_block_places(&self, file: u32, block: u64) -> Vec<(u16, u64)> {
        let rec = self
            .files
            .get(file)
            .expect("invariant: metadata files exist");
        let extent = &rec.extents[(block / self.blocks_per_au()) as usize];
        let within = (block % self.blocks_per_au()) * BLOCK_BYTES as u64;
        extent
            .copies()
            .iter()
            .map(|c| (c.disk, u64::from(c.au) * self.au_bytes + within))
            .collect()
    }

    /// Physical places of block `block` of data file `file`'s checksum map
    /// (all copies): the map is laid out as any file, its extents growing.
    pub(super) fn map_block_places(&self, file: u32, block: u64) -> Vec<(u16, u64)> {
        let Some(rec) = self.files.get(fmt::map_number(file)) else {
            return Vec::new();
        };
        let loc = self.layout_for(rec).locate(block * BLOCK_BYTES as u64);
        rec.extents
            .get(loc.extent as usize)
            .map(|extent| {
                extent
                    .copies()
                    .iter()
                    .map(|c| {
                        (
                            c.disk,
                            u64::from(c.au) * self.au_bytes + loc.offset_in_extent,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn indirect_places(&self, file: u32, block: u64) -> Vec<(u16, u64)> {
        let rec = &self.files[&file];
        let pointer = &rec.entry.indirect[(block / self.blocks_per_au()) as usize];
        let within = (block % self.blocks_per_au()) * BLOCK_BYTES as u64;
        pointer
            .copies()
            .iter()
            .map(|c| (c.disk, u64::from(c.au) * self.au_bytes + within))
            .collect()
    }

    pub(super) fn dirty_id_and_places(&self, d: Dirty) -> (BlockId, Vec<(u16, u64)>) {
        let file_block = |file: u32, block_type: BlockType, owner_tag: u32, index: u64| {
            (
                BlockId {
                    block_type,
                    owner: file,
                    owner_tag,
                    index,
                },
                self.file_block_places(file, index),
            )
        };
        match d {
            Dirty::Summary { disk, index } => {
                let layout = self.layout_of(disk);
                let offset = layout.summary_offset_bytes(index);
                (
                    per_disk_id(BlockType::AtSummary, disk, offset),
                    vec![(disk, offset)],
                )
            }
            Dirty::Bitmap { disk, index } => {
                let layout = self.layout_of(disk);
                let offset = layout.bitmap_offset_bytes(index);
                (
                    per_disk_id(BlockType::AtBitmap, disk, offset),
                    vec![(disk, offset)],
                )
            }
            Dirty::Clean { disk, index } => {
                let layout = self.layout_of(disk);
                let offset = layout.clean_offset_bytes(index);
                (
                    per_disk_id(BlockType::AtClean, disk, offset),
                    vec![(disk, offset)],
                )
            }
            Dirty::Entry(n) => {
                let (dir, block) = entry_place(n);
                (entry_id(n), self.file_block_places(dir, block))
            }
            Dirty::Indirect { file, block } => {
                let incarnation = self.files.get(file).map_or(0, |r| r.entry.incarnation);
                (
                    BlockId {
                        block_type: BlockType::Indirect,
                        owner: file,
                        owner_tag: incarnation,
                        index: block,
                    },
                    self.indirect_places(file, block),
                )
            }
            Dirty::Alias(block) => file_block(FILE_ALIAS_DIRECTORY, BlockType::Alias, 0, block),
            Dirty::Templates => file_block(FILE_TEMPLATES, BlockType::Template, 0, 0),
            Dirty::Attributes => file_block(FILE_ATTRIBUTES, BlockType::Attribute, 0, 0),
            Dirty::MapBlock { file, block } => {
                let incarnation = self
                    .files
                    .get(fmt::map_number(file))
                    .map_or(0, |r| r.entry.incarnation);
                (
                    map_block_id(file, incarnation, block),
                    self.map_block_places(file, block),
                )
            }
        }
    }

    pub(super) fn layout_of(&self, disk: u16) -> AtLayout {
        self.member(disk)
            .and_then(|m| m.alloc.as_ref())
            .map(|a| a.layout)
            .expect("invariant: table blocks are dirtied on online disks only")
    }

    /// The block image for a dirty address, sealed with `generation`. A file
    /// entry or alias block that became empty is sealed with an empty payload
    /// (free): it carries a generation, so a stale copy of what it held
    /// before, left on a mirror by a lost write, is recognised as older.
    pub(super) fn encode_dirty(&self, d: Dirty, generation: u64) -> Box<Block> {
        let (id, _) = self.dirty_id_and_places(d);
        let mut block = meta::empty_block();
        match d {
            Dirty::Summary { disk, index } => {
                let alloc = self.member(disk).and_then(|m| m.alloc.as_ref());
                let alloc = alloc.expect("invariant: online disk");
                fmt::encode_summary(&mut block, alloc.summary_counts(index));
            }
            Dirty::Bitmap { disk, index } => {
                let alloc = self.member(disk).and_then(|m| m.alloc.as_ref());
                let alloc = alloc.expect("invariant: online disk");
                fmt::encode_bitmap(&mut block, alloc.bitmap_bytes(index));
            }
            Dirty::Clean { disk, index } => {
                let alloc = self.member(disk).and_then(|m| m.alloc.as_ref());
                let alloc = alloc.expect("invariant: online disk");
                fmt::encode_bitmap(&mut block, &alloc.clean_bytes(index));
            }
            Dirty::Entry(n) => {
                if let Some(rec) = self.files.get(n) {
                    self.encode_entry(rec, &mut block);
                }
            }
            Dirty::Indirect { file, block: index } => {
                let rec = &self.files[&file];
                let first = DIRECT_EXTENTS + index as usize * EXTENTS_PER_INDIRECT_BLOCK;
                let last = (first + EXTENTS_PER_INDIRECT_BLOCK).min(rec.extents.len());
                fmt::encode_indirect(&mut block, rec.extents.get(first..last).unwrap_or(&[]));
            }
            Dirty::Alias(index) => {
                let first = (index * ALIASES_PER_BLOCK as u64 + 1) as u32;
                let last = first + ALIASES_PER_BLOCK as u32;
                let records: Vec<&AliasRecord> = self.names.range(first..last).collect();
                fmt::encode_alias_block(&mut block, index, &records);
            }
            Dirty::Templates => fmt::encode_templates(&mut block, self.settings.templates()),
            Dirty::Attributes => fmt::encode_attributes(&mut block, self.settings.attributes()),
            Dirty::MapBlock { file, block: index } => {
                if let Some(sums) = self.txn.map_image(file, index) {
                    fmt::encode_map_block(&mut block, sums);
                }
            }
        }
        meta::seal(&mut block, id, self.uuid, generation);
        block
    }

    /// Block `d` encoded (generation 0) as a durable write to each of its
    /// places: what a new disk's table and a new group's metadata are
    /// written with, before any journal exists for them.
    pub(super) fn durable_block(&self, d: Dirty) -> DurableItem {
        let (id, places) = self.dirty_id_and_places(d);
        let block = self.encode_dirty(d, 0);
        let copies = places
            .into_iter()
            .map(|(disk, offset)| (disk, offset, AlignedBuf::from_slice(&block[..])))
            .collect();
        DurableItem::block(id.to_string(), copies)
    }

    pub(super) fn encode_entry(&self, rec: &FileRec, block: &mut Block) {
        let mut entry = rec.entry.clone();
        entry.extent_count = rec.extents.len() as u64;
        entry.direct = rec.extents.iter().take(DIRECT_EXTENTS).copied().collect();
        entry.encode_into(block);
    }

    pub(super) fn mark_table_dirty(&mut self) {
        let mut found = Vec::new();
        for m in self.members.iter_mut() {
            let n = m.entry.number;
            if let Some(alloc) = m.alloc.as_mut() {
                for b in alloc.take_dirty() {
                    found.push(Dirty::of_table_block(n, b));
                }
            }
        }
        self.txn.mark_all(found);
    }

    pub(super) fn dirty_count(&self) -> usize {
        self.txn.dirty_count()
            + self
                .members
                .iter()
                .filter_map(|m| m.alloc.as_ref())
                .map(DiskAlloc::dirty_count)
                .sum::<usize>()
    }
}
