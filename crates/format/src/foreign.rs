//! Recognisers for other owners' signatures: what must stop `cairn disk label`.
//!
//! Each recogniser reads a few bytes at a fixed place, as libblkid does, and names
//! what it found in words a person acts on ("an ext4 filesystem labelled 'home'").
//! The rule is conservative: a false positive costs a `--force`, a false negative
//! can cost someone's data, so cheap checks that might over-match are accepted.
//!
//! Inputs are a [`DeviceSample`]: the first [`HEAD_SAMPLE_BYTES`] and the last
//! [`TAIL_SAMPLE_BYTES`] of the device. Everything here is pure and never panics
//! on any bytes (fuzzed).
//!
//! Not recognised here: Cairn's own header (the caller decodes it with
//! [`crate::DiskHeader`]), and the long tail of formats libblkid knows (the store
//! layer asks `wipefs` as a second opinion where it is installed).

use std::fmt;

/// Bytes of the start of a device the recognisers need: btrfs's superblock ends at
/// 64 KiB + 4 KiB, swap's signature sits at the end of a page of up to 64 KiB.
pub const HEAD_SAMPLE_BYTES: usize = 128 * 1024;
/// Bytes of the end of a device: md 0.90 keeps its superblock in the last 64 KiB
/// (aligned), md 1.0 in the last 8 KiB.
pub const TAIL_SAMPLE_BYTES: usize = 128 * 1024;

/// What was read of a device.
#[derive(Debug, Clone, Copy)]
pub struct DeviceSample<'a> {
    /// Bytes from offset 0 (may be shorter than [`HEAD_SAMPLE_BYTES`] on a small device).
    pub head: &'a [u8],
    /// Bytes ending at the end of the device.
    pub tail: &'a [u8],
    pub device_size_bytes: u64,
}

impl DeviceSample<'_> {
    fn at(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len as u64)?;
        if end <= self.head.len() as u64 {
            return self.head.get(offset as usize..end as usize);
        }
        let tail_start = self.device_size_bytes.checked_sub(self.tail.len() as u64)?;
        if offset >= tail_start && end <= self.device_size_bytes {
            let from = (offset - tail_start) as usize;
            return self.tail.get(from..from + len);
        }
        None
    }

    fn has(&self, offset: u64, magic: &[u8]) -> bool {
        self.at(offset, magic.len()) == Some(magic)
    }

    fn le_u32(&self, offset: u64) -> Option<u32> {
        let b = self.at(offset, 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// A signature of another owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signature {
    Ext {
        version: u8,
        volume_label: String,
    },
    Xfs {
        volume_label: String,
    },
    Btrfs {
        volume_label: String,
    },
    Swap {
        page_bytes: u32,
    },
    LvmPhysicalVolume,
    MdRaid {
        superblock: &'static str,
    },
    Luks,
    /// An MBR partition table or a boot sector (FAT and NTFS boot sectors share the 0x55AA mark).
    Mbr,
    Vfat,
    Ntfs,
    Gpt {
        sector_bytes: u32,
    },
    /// An ASMLib or ASM Filter Driver label ("ORCLDISK" at byte 32).
    OracleAsmLabel {
        label: String,
    },
    /// An Oracle ASM disk header (KFBTYP_DISKHEAD).
    OracleAsmDisk {
        status: &'static str,
        disk_name: String,
        group_name: String,
    },
}

impl Signature {
    /// A short machine name ("ext4", "gpt", "oracle-asm"...), as in `--json`.
    pub fn kind(&self) -> &'static str {
        match self {
            Signature::Ext { version: 2, .. } => "ext2",
            Signature::Ext { version: 3, .. } => "ext3",
            Signature::Ext { .. } => "ext4",
            Signature::Xfs { .. } => "xfs",
            Signature::Btrfs { .. } => "btrfs",
            Signature::Swap { .. } => "swap",
            Signature::LvmPhysicalVolume => "lvm2-pv",
            Signature::MdRaid { .. } => "md-raid",
            Signature::Luks => "luks",
            Signature::Mbr => "mbr",
            Signature::Vfat => "vfat",
            Signature::Ntfs => "ntfs",
            Signature::Gpt { .. } => "gpt",
            Signature::OracleAsmLabel { .. } => "oracle-asm-label",
            Signature::OracleAsmDisk { .. } => "oracle-asm",
        }
    }
}

fn quoted_label(label: &str) -> String {
    if label.is_empty() {
        String::new()
    } else {
        format!(" labelled '{label}'")
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signature::Ext { volume_label, .. } => {
                write!(
                    f,
                    "an {} filesystem{}",
                    self.kind(),
                    quoted_label(volume_label)
                )
            }
            Signature::Xfs { volume_label } => {
                write!(f, "an xfs filesystem{}", quoted_label(volume_label))
            }
            Signature::Btrfs { volume_label } => {
                write!(f, "a btrfs filesystem{}", quoted_label(volume_label))
            }
            Signature::Swap { .. } => write!(f, "a swap area"),
            Signature::LvmPhysicalVolume => write!(f, "an LVM2 physical volume"),
            Signature::MdRaid { superblock } => {
                write!(f, "an md RAID superblock (version {superblock})")
            }
            Signature::Luks => write!(f, "a LUKS encrypted volume"),
            Signature::Mbr => write!(f, "an MBR partition table or boot sector"),
            Signature::Vfat => write!(f, "a FAT filesystem"),
            Signature::Ntfs => write!(f, "an NTFS filesystem"),
            Signature::Gpt { sector_bytes } => {
                write!(f, "a GPT partition table ({sector_bytes}-byte sectors)")
            }
            Signature::OracleAsmLabel { label } => {
                write!(f, "an Oracle ASMLib/AFD label '{label}'")
            }
            Signature::OracleAsmDisk {
                status,
                disk_name,
                group_name,
            } => {
                write!(f, "an Oracle ASM disk header ({status}")?;
                if !disk_name.is_empty() {
                    write!(f, ", disk {disk_name}")?;
                }
                if !group_name.is_empty() {
                    write!(f, ", disk group {group_name}")?;
                }
                write!(f, ")")
            }
        }
    }
}

fn text_field(bytes: Option<&[u8]>) -> String {
    bytes
        .unwrap_or_default()
        .iter()
        .take_while(|b| **b != 0)
        .map(|b| {
            if b.is_ascii_graphic() || *b == b' ' {
                *b as char
            } else {
                '?'
            }
        })
        .collect::<String>()
        .trim_end()
        .to_string()
}

/// A signature and where its magic bytes lie: the bytes that, zeroed, make the
/// signature disappear (what `wipefs` erases).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub signature: Signature,
    /// `(offset, length)` in bytes from the start of the device.
    pub magic_ranges: Vec<(u64, u64)>,
}

impl Found {
    fn new(signature: Signature, magic_ranges: Vec<(u64, u64)>) -> Self {
        Self {
            signature,
            magic_ranges,
        }
    }
}

/// Every signature found in the sample, most specific first.
pub fn recognise(sample: &DeviceSample<'_>) -> Vec<Found> {
    let mut found = Vec::new();
    oracle_asm(sample, &mut found);
    ext(sample, &mut found);
    if sample.has(0, b"XFSB") {
        let volume_label = text_field(sample.at(108, 12));
        found.push(Found::new(Signature::Xfs { volume_label }, vec![(0, 4)]));
    }
    if sample.has(0x10040, b"_BHRfS_M") {
        let volume_label = text_field(sample.at(0x1012B, 256));
        found.push(Found::new(
            Signature::Btrfs { volume_label },
            vec![(0x10040, 8)],
        ));
    }
    // libblkid's page sizes: 4 KiB (x86), 8, 16, 32 KiB and 64 KiB (ppc64, aarch64).
    for page_bytes in [4096u32, 8192, 16384, 32768, 65536] {
        let at = u64::from(page_bytes) - 10;
        if sample.has(at, b"SWAPSPACE2") || sample.has(at, b"SWAP-SPACE") {
            found.push(Found::new(Signature::Swap { page_bytes }, vec![(at, 10)]));
            break;
        }
    }
    if let Some(sector) = (0..4u64).find(|sector| {
        sample.has(sector * 512, b"LABELONE") && sample.has(sector * 512 + 24, b"LVM2 001")
    }) {
        found.push(Found::new(
            Signature::LvmPhysicalVolume,
            vec![(sector * 512, 8), (sector * 512 + 24, 8)],
        ));
    }
    md_raid(sample, &mut found);
    if sample.has(0, b"LUKS\xba\xbe") {
        found.push(Found::new(Signature::Luks, vec![(0, 6)]));
    }
    partition_tables(sample, &mut found);
    found
}

fn oracle_asm(sample: &DeviceSample<'_>, found: &mut Vec<Found>) {
    // kfbh: endian (0 or 1), hard = 0x82, type = 1 (KFBTYP_DISKHEAD); kfdhdb follows
    // at 0x20: provstr[8], reserved, ..., hdrsts at +0x27, dskname at +0x28,
    // grpname at +0x48.
    let Some(kfbh) = sample.at(0, 4) else { return };
    if kfbh[0] <= 1 && kfbh[1] == 0x82 && kfbh[2] == 1 {
        let status = match sample.at(0x47, 1).map(|b| b[0]) {
            Some(1) => "candidate",
            Some(2) => "provisioned",
            Some(3) => "member",
            Some(4) => "former member",
            Some(5) => "incompatible",
            _ => "unknown status",
        };
        let signature = Signature::OracleAsmDisk {
            status,
            disk_name: text_field(sample.at(0x48, 32)),
            group_name: text_field(sample.at(0x68, 32)),
        };
        found.push(Found::new(signature, vec![(0, 4), (0x20, 8)]));
    } else if sample.has(0x20, b"ORCLDISK") {
        let label = text_field(sample.at(0x28, 24));
        found.push(Found::new(
            Signature::OracleAsmLabel { label },
            vec![(0x20, 8)],
        ));
    }
}

fn ext(sample: &DeviceSample<'_>, found: &mut Vec<Found>) {
    const SB: u64 = 1024;
    if !sample.has(SB + 0x38, &[0x53, 0xEF]) {
        return;
    }
    // Sanity checks against a chance 0xEF53: block size of at most 64 KiB and
    // a non-zero blocks-per-group.
    let sane = sample.le_u32(SB + 0x18).is_some_and(|log| log <= 6)
        && sample
            .le_u32(SB + 0x20)
            .is_some_and(|per_group| per_group > 0);
    if !sane {
        return;
    }
    let compat = sample.le_u32(SB + 0x5C).unwrap_or(0);
    let incompat = sample.le_u32(SB + 0x60).unwrap_or(0);
    let ro_compat = sample.le_u32(SB + 0x64).unwrap_or(0);
    // ext3 knows only FILETYPE, RECOVER and META_BG incompat bits and only
    // SPARSE_SUPER, LARGE_FILE and BTREE_DIR ro-compat bits; anything beyond is ext4.
    let beyond_ext3 =
        incompat & !(0x0002 | 0x0004 | 0x0010) != 0 || ro_compat & !(0x1 | 0x2 | 0x4) != 0;
    let version = if beyond_ext3 {
        4
    } else if compat & 0x4 != 0 {
        3
    } else {
        2
    };
    let signature = Signature::Ext {
        version,
        volume_label: text_field(sample.at(SB + 0x78, 16)),
    };
    found.push(Found::new(signature, vec![(SB + 0x38, 2)]));
}

fn md_raid(sample: &DeviceSample<'_>, found: &mut Vec<Found>) {
    const MD_MAGIC: u32 = 0xa92b_4efc;
    let size = sample.device_size_bytes;
    let v1_0 = (size / 512).checked_sub(16).map(|s| (s & !7) * 512);
    let v0_90 = (size & !(65536 - 1)).checked_sub(65536);
    // Version 1 superblocks are little-endian; 0.90 is in the writer's byte order.
    let places = [
        (Some(0), "1.1", false),
        (Some(4096), "1.2", false),
        (v1_0, "1.0", false),
        (v0_90, "0.90", true),
    ];
    for (offset, superblock, either_endian) in places {
        let Some(offset) = offset else { continue };
        let Some(bytes) = sample.at(offset, 4) else {
            continue;
        };
        let word = [bytes[0], bytes[1], bytes[2], bytes[3]];
        if u32::from_le_bytes(word) == MD_MAGIC
            || (either_endian && u32::from_be_bytes(word) == MD_MAGIC)
        {
            found.push(Found::new(
                Signature::MdRaid { superblock },
                vec![(offset, 4)],
            ));
            return;
        }
    }
}

fn partition_tables(sample: &DeviceSample<'_>, found: &mut Vec<Found>) {
    for sector_bytes in [512u32, 4096] {
        let sector = u64::from(sector_bytes);
        if sample.has(sector, b"EFI PART") {
            let mut ranges = vec![(sector, 8)];
            // The backup header sits in the last LBA; it alone lets a partitioner
            // rebuild the table.
            if let Some(last) = sample.device_size_bytes.checked_sub(sector) {
                if sample.has(last, b"EFI PART") {
                    ranges.push((last, 8));
                }
            }
            if sample.has(510, &[0x55, 0xAA]) {
                ranges.push((510, 2));
            }
            found.push(Found::new(Signature::Gpt { sector_bytes }, ranges));
            return;
        }
    }
    if !sample.has(510, &[0x55, 0xAA]) {
        return;
    }
    let signature = if sample.has(3, b"NTFS    ") {
        Signature::Ntfs
    } else if sample.has(82, b"FAT32   ")
        || sample.has(54, b"FAT12   ")
        || sample.has(54, b"FAT16   ")
    {
        Signature::Vfat
    } else if (0..4u64).any(|entry| sample.at(446 + entry * 16 + 4, 1) == Some(&[0xEE][..])) {
        // A protective MBR (type 0xEE) without a readable GPT header is still a GPT disk.
        Signature::Gpt { sector_bytes: 0 }
    } else {
        Signature::Mbr
    };
    found.push(Found::new(signature, vec![(510, 2)]));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SIZE: u64 = 64 << 20;

    fn with(head_patch: &[(usize, &[u8])]) -> Vec<Signature> {
        found_with(head_patch)
            .into_iter()
            .map(|f| f.signature)
            .collect()
    }

    fn found_with(head_patch: &[(usize, &[u8])]) -> Vec<Found> {
        let mut head = vec![0u8; HEAD_SAMPLE_BYTES];
        for (offset, bytes) in head_patch {
            head[*offset..offset + bytes.len()].copy_from_slice(bytes);
        }
        let tail = vec![0u8; TAIL_SAMPLE_BYTES];
        recognise(&DeviceSample {
            head: &head,
            tail: &tail,
            device_size_bytes: SIZE,
        })
    }

    #[test]
    fn blank_device_has_no_signature() {
        assert!(with(&[]).is_empty());
    }

    #[test]
    fn ext_versions() {
        let magic = (1024 + 0x38, &[0x53u8, 0xEF][..]);
        let per_group = (1024 + 0x20, &[0x00u8, 0x80, 0, 0][..]);
        assert_eq!(with(&[magic, per_group])[0].kind(), "ext2");
        assert_eq!(
            with(&[magic, per_group, (1024 + 0x5C, &[0x04])])[0].kind(),
            "ext3"
        );
        let sigs = with(&[
            magic,
            per_group,
            (1024 + 0x60, &[0x40]),
            (1024 + 0x78, b"home"),
        ]);
        assert_eq!(sigs[0].to_string(), "an ext4 filesystem labelled 'home'");
        // A chance 0xEF53 with an absurd block size is not a filesystem.
        assert!(with(&[magic, per_group, (1024 + 0x18, &[0x20])]).is_empty());
    }

    #[test]
    fn the_asmfd_post_label_and_a_kfed_header() {
        // od -c of /dev/dm-14 in the ASMFD post: "ORCLDISKV512DATA1" at 0x20.
        let sigs = with(&[(0x20, b"ORCLDISKV512DATA1")]);
        assert_eq!(
            sigs,
            vec![Signature::OracleAsmLabel {
                label: "V512DATA1".into()
            }]
        );
        let sigs = with(&[
            (0, &[1, 0x82, 1, 1]),
            (0x20, b"ORCLDISK"),
            (0x47, &[3]),
            (0x48, b"DATA_0000"),
            (0x68, b"DATA"),
        ]);
        assert_eq!(
            sigs[0].to_string(),
            "an Oracle ASM disk header (member, disk DATA_0000, disk group DATA)"
        );
    }

    #[test]
    fn others() {
        assert_eq!(with(&[(0, b"XFSB")])[0].kind(), "xfs");
        assert_eq!(with(&[(0x10040, b"_BHRfS_M")])[0].kind(), "btrfs");
        assert_eq!(with(&[(4086, b"SWAPSPACE2")])[0].kind(), "swap");
        assert_eq!(
            with(&[(512, b"LABELONE"), (536, b"LVM2 001")])[0].kind(),
            "lvm2-pv"
        );
        assert_eq!(
            with(&[(4096, &0xa92b_4efcu32.to_le_bytes())])[0].to_string(),
            "an md RAID superblock (version 1.2)"
        );
        assert_eq!(with(&[(0, b"LUKS\xba\xbe")])[0].kind(), "luks");
        assert_eq!(with(&[(510, &[0x55, 0xAA])])[0].kind(), "mbr");
        assert_eq!(
            with(&[(510, &[0x55, 0xAA]), (446 + 4, &[0xEE])])[0].kind(),
            "gpt"
        );
        assert_eq!(
            with(&[(4096, b"EFI PART")])[0],
            Signature::Gpt { sector_bytes: 4096 }
        );
        assert_eq!(
            with(&[(510, &[0x55, 0xAA]), (3, b"NTFS    ")])[0].kind(),
            "ntfs"
        );
    }

    #[test]
    fn magic_ranges_point_at_the_magic() {
        let f = found_with(&[(0x10040, b"_BHRfS_M")]);
        assert_eq!(f[0].magic_ranges, vec![(0x10040, 8)]);
        let f = found_with(&[(32758, b"SWAPSPACE2")]);
        assert_eq!(
            (f[0].signature.clone(), f[0].magic_ranges.clone()),
            (Signature::Swap { page_bytes: 32768 }, vec![(32758, 10)])
        );
        // A GPT's backup header at the last LBA is found and erasable too.
        let mut head = vec![0u8; HEAD_SAMPLE_BYTES];
        head[512..520].copy_from_slice(b"EFI PART");
        let mut tail = vec![0u8; TAIL_SAMPLE_BYTES];
        tail[TAIL_SAMPLE_BYTES - 512..TAIL_SAMPLE_BYTES - 504].copy_from_slice(b"EFI PART");
        let f = recognise(&DeviceSample {
            head: &head,
            tail: &tail,
            device_size_bytes: SIZE,
        });
        assert_eq!(f[0].magic_ranges, vec![(512, 8), (SIZE - 512, 8)]);
    }

    #[test]
    fn md_090_in_big_endian() {
        let head = vec![0u8; HEAD_SAMPLE_BYTES];
        let mut tail = vec![0u8; TAIL_SAMPLE_BYTES];
        let at = TAIL_SAMPLE_BYTES - 65536;
        tail[at..at + 4].copy_from_slice(&0xa92b_4efcu32.to_be_bytes());
        let f = recognise(&DeviceSample {
            head: &head,
            tail: &tail,
            device_size_bytes: SIZE,
        });
        assert_eq!(f[0].signature, Signature::MdRaid { superblock: "0.90" });
    }

    #[test]
    fn md_superblocks_at_the_end() {
        let head = vec![0u8; HEAD_SAMPLE_BYTES];
        for (offset_from_end, version) in [(65536u64, "0.90"), (8192, "1.0")] {
            let mut tail = vec![0u8; TAIL_SAMPLE_BYTES];
            let at = TAIL_SAMPLE_BYTES - offset_from_end as usize;
            tail[at..at + 4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
            let found = recognise(&DeviceSample {
                head: &head,
                tail: &tail,
                device_size_bytes: SIZE,
            });
            assert_eq!(
                found[0].signature,
                Signature::MdRaid {
                    superblock: version
                }
            );
            assert_eq!(found[0].magic_ranges, vec![(SIZE - offset_from_end, 4)]);
        }
    }

    proptest! {
        #[test]
        fn prop_never_panics(head in prop::collection::vec(any::<u8>(), 0..70_000), tail in prop::collection::vec(any::<u8>(), 0..70_000), size in any::<u64>()) {
            for found in recognise(&DeviceSample { head: &head, tail: &tail, device_size_bytes: size }) {
                let _ = found.signature.to_string();
            }
        }
    }
}
