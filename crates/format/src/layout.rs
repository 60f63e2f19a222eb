//! Where the disk header copies live on a device.
//!
//! Three copies of one 4 KiB header block:
//!
//! | copy | offset | why there |
//! |---|---|---|
//! | 0 (primary) | 0 | where every tool looks first |
//! | 1 | 1 MiB | survives anything that rewrites only the first sectors (an MBR or GPT written over the disk, a stray `echo > /dev/sdX`) |
//! | 2 | start of the last whole MiB | survives a wipe of the first megabytes (`dd ... count=1024`, the ASMFD post) and keeps clear of the last sectors, where GPT backups and md 1.0 superblocks go |
//!
//! The block is 4 KiB whatever the logical sector size: a multiple of 512 and of
//! 4096, so one aligned write on 512n, 512e and 4Kn devices, and one physical
//! sector on 4 KiB-physical media. The front 2 MiB and the last reserved MiB
//! belong to the header; later structures must start after
//! [`FRONT_RESERVED_BYTES`] and end before the tail copy.

/// Size of one header block, in bytes.
pub const HEADER_BLOCK_BYTES: u64 = 4096;
/// How many header copies a device carries.
pub const HEADER_COPY_COUNT: usize = 3;
const MIB: u64 = 1 << 20;
/// Offset of copy 1.
pub const COPY1_OFFSET_BYTES: u64 = MIB;
/// Bytes at the front of a device that only header copies may use.
pub const FRONT_RESERVED_BYTES: u64 = 2 * MIB;
/// The smallest device Cairn labels: 8 MiB, so the tail copy (at 7 MiB or
/// beyond) survives a wipe of the first 4 MiB, as in the ASMFD post. Three MiB
/// would hold the copies, but a 4 MiB `dd` would then destroy all three.
pub const DEVICE_SIZE_MIN_BYTES: u64 = 8 * MIB;

/// The offsets of the header copies on a device of a given size, in copy order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPlacement {
    pub offsets_bytes: [u64; HEADER_COPY_COUNT],
}

/// The device cannot hold a header and its copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the device is {size_bytes} bytes; a Cairn disk needs at least {} bytes (8 MiB) for its header copies", DEVICE_SIZE_MIN_BYTES)]
pub struct DeviceTooSmall {
    pub size_bytes: u64,
}

impl HeaderPlacement {
    /// Placement for a device of `device_size_bytes`.
    pub fn for_device(device_size_bytes: u64) -> Result<Self, DeviceTooSmall> {
        if device_size_bytes < DEVICE_SIZE_MIN_BYTES {
            return Err(DeviceTooSmall {
                size_bytes: device_size_bytes,
            });
        }
        let tail = (device_size_bytes / MIB) * MIB - MIB;
        let placement = Self {
            offsets_bytes: [0, COPY1_OFFSET_BYTES, tail],
        };
        assert!(
            tail >= FRONT_RESERVED_BYTES,
            "invariant: tail copy clear of the front reserve"
        );
        assert!(
            tail + HEADER_BLOCK_BYTES <= device_size_bytes,
            "invariant: tail copy inside the device"
        );
        Ok(placement)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimum_and_too_small() {
        assert_eq!(
            HeaderPlacement::for_device(DEVICE_SIZE_MIN_BYTES - 512),
            Err(DeviceTooSmall {
                size_bytes: DEVICE_SIZE_MIN_BYTES - 512
            })
        );
        let p = HeaderPlacement::for_device(DEVICE_SIZE_MIN_BYTES).unwrap();
        assert_eq!(p.offsets_bytes, [0, MIB, 7 * MIB]);
    }

    #[test]
    fn on_every_device_size_some_copy_survives_a_4_mib_wipe() {
        let mut size = DEVICE_SIZE_MIN_BYTES;
        while size < 64 * MIB {
            let p = HeaderPlacement::for_device(size).unwrap();
            assert!(p.offsets_bytes[2] >= 4 * MIB, "size {size}");
            size += 512 * 7;
        }
    }

    #[test]
    fn tail_copy_survives_a_4_mib_wipe_and_a_gpt_backup() {
        for size in [64 * MIB, 64 * MIB + 4096, (1 << 40) + 512 * 7] {
            let p = HeaderPlacement::for_device(size).unwrap();
            let tail = p.offsets_bytes[2];
            assert!(tail >= 4 * MIB);
            assert_eq!(tail % 4096, 0);
            // GPT's backup occupies the last 33 sectors (16.5 KiB at 512 B).
            assert!(tail + HEADER_BLOCK_BYTES <= size - 33 * 512);
        }
    }
}
