//! What a write workload writes: data with a requested compression and
//! deduplication ratio, and — with validation — blocks that carry their own
//! address and a checksum.
//!
//! Cost matters: a tool that spends its CPU generating data measures itself.
//! Each buffer is filled once, when it is made; a write then only *stamps* it:
//! 16 bytes per dedupe unit (the unit's address and a write counter), which is
//! enough to make every unit unique to a deduplicating array.
//!
//! - Compression ratio c: the first 1/c of every unit is random, the rest
//!   zeros; a compressor gets about c:1 (zeros cost nearly nothing, random
//!   bytes cannot be squeezed).
//! - Dedupe ratio d: each written unit is unique with probability 1/d;
//!   otherwise it is an exact copy of one of [`DUPLICATE_SETS`] canonical units,
//!   so the array stores about one unit for every d written.
//! - Validation: every validation unit starts with a 32-byte header (magic,
//!   key, sd tag, its own unit number, CRC-32C of the whole unit); a read
//!   checks all of it against the key the engine remembers for that unit.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// Distinct contents duplicate units are drawn from.
pub const DUPLICATE_SETS: u64 = 1024;
/// Bytes of the per-write stamp at the start of each unique unit.
pub const STAMP_BYTES: usize = 16;

/// How write buffers are filled and stamped.
#[derive(Debug, Clone)]
pub struct DataPattern {
    compratio: f64,
    dedupratio: f64,
    unit: usize,
    seed: u64,
    /// Canonical contents of the duplicate units (empty without dedupe).
    duplicates: Vec<Vec<u8>>,
}

impl DataPattern {
    /// `unit` is the dedupe unit in bytes (at least 512).
    pub fn new(compratio: f64, dedupratio: f64, unit: u64, seed: u64) -> Self {
        let unit = (unit as usize).max(512);
        let mut pattern = Self {
            compratio: compratio.max(1.0),
            dedupratio: dedupratio.max(1.0),
            unit,
            seed,
            duplicates: Vec::new(),
        };
        if pattern.dedupratio > 1.0 {
            pattern.duplicates = (0..DUPLICATE_SETS)
                .map(|k| {
                    let mut u = vec![0u8; unit];
                    pattern.prefill_unit(&mut u, u64::MAX - k);
                    u[..8].copy_from_slice(&k.to_le_bytes());
                    u[8..16].copy_from_slice(b"CAIRNDUP");
                    u
                })
                .collect();
        }
        pattern
    }

    pub fn unit_bytes(&self) -> usize {
        self.unit
    }

    /// Fill a new buffer once: each unit random for its first 1/compratio, zeros after.
    pub fn prefill(&self, buf: &mut [u8], buffer_index: u64) {
        for (i, unit) in buf.chunks_mut(self.unit).enumerate() {
            self.prefill_unit(unit, buffer_index.wrapping_mul(1 << 20) + i as u64);
        }
    }

    fn prefill_unit(&self, unit: &mut [u8], key: u64) {
        let random = ((unit.len() as f64 / self.compratio).ceil() as usize)
            .clamp(STAMP_BYTES.min(unit.len()), unit.len());
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ key.rotate_left(17));
        rng.fill_bytes(&mut unit[..random]);
        unit[random..].fill(0);
    }

    /// Make a prefilled buffer into the data of one write at `offset` (bytes on
    /// the sd): every unit gets a unique stamp, or becomes a duplicate.
    /// `choice` supplies the randomness of the dedupe draw.
    #[inline]
    pub fn stamp(&self, buf: &mut [u8], offset: u64, counter: u64, choice: &mut ChaCha8Rng) {
        let dedupe = !self.duplicates.is_empty();
        for (i, unit) in buf.chunks_mut(self.unit).enumerate() {
            if dedupe && unit.len() == self.unit {
                // Unique with probability 1/d.
                let draw = (choice.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                if draw >= 1.0 / self.dedupratio {
                    let k = choice.next_u64() % DUPLICATE_SETS;
                    unit.copy_from_slice(&self.duplicates[k as usize]);
                    continue;
                }
            }
            let n = unit.len().min(STAMP_BYTES);
            let address = offset + (i * self.unit) as u64;
            let mut stamp = [0u8; STAMP_BYTES];
            stamp[..8].copy_from_slice(&address.to_le_bytes());
            stamp[8..].copy_from_slice(&counter.to_le_bytes());
            unit[..n].copy_from_slice(&stamp[..n]);
        }
    }

    /// Prefill and stamp: the data of a one-off write.
    pub fn fill(&self, buf: &mut [u8], offset: u64, counter: u64) {
        self.prefill(buf, counter);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ counter);
        self.stamp(buf, offset, counter, &mut rng);
    }
}

/// Magic at the start of every validation unit: "CVAL".
const VALIDATION_MAGIC: u32 = 0x4C41_5643;
/// Bytes of the validation header.
pub const VALIDATION_HEADER_BYTES: usize = 32;

/// What a validation unit says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitHeader {
    pub key: u8,
    pub sd_tag: u32,
    pub lba: u64,
}

/// Write a validation header into `unit` (after its data is in place).
pub fn seal_unit(unit: &mut [u8], header: UnitHeader) {
    unit[0..4].copy_from_slice(&VALIDATION_MAGIC.to_le_bytes());
    unit[4] = header.key;
    unit[5..8].fill(0);
    unit[8..12].copy_from_slice(&header.sd_tag.to_le_bytes());
    unit[12..16].fill(0);
    unit[16..24].copy_from_slice(&header.lba.to_le_bytes());
    unit[24..32].fill(0);
    let crc = crc32c::crc32c(unit);
    unit[24..28].copy_from_slice(&crc.to_le_bytes());
}

/// Check a unit read back against what was last written there. `None` if it
/// is right, else what is wrong, in words for the report.
pub fn check_unit(unit: &[u8], want: UnitHeader) -> Option<String> {
    if unit.len() < VALIDATION_HEADER_BYTES {
        return Some("unit shorter than its header".into());
    }
    let u32_at = |i: usize| u32::from_le_bytes([unit[i], unit[i + 1], unit[i + 2], unit[i + 3]]);
    let mut lba_bytes = [0u8; 8];
    lba_bytes.copy_from_slice(&unit[16..24]);
    let lba = u64::from_le_bytes(lba_bytes);
    if u32_at(0) != VALIDATION_MAGIC {
        return Some(if unit.iter().all(|b| *b == 0) {
            "reads as zeros (the write was lost)".into()
        } else {
            "no validation header (overwritten by something else)".into()
        });
    }
    let stored_crc = u32_at(24);
    let mut digest = crc32c::crc32c(&unit[..24]);
    digest = crc32c::crc32c_append(digest, &[0u8; 4]);
    digest = crc32c::crc32c_append(digest, &unit[28..]);
    if digest != stored_crc {
        return Some(format!(
            "bad checksum (stored {stored_crc:#010x}, computed {digest:#010x}): the data was corrupted"
        ));
    }
    if u32_at(8) != want.sd_tag {
        return Some("holds a block written to another sd".into());
    }
    if lba != want.lba {
        return Some(format!("wrong address: holds the block of lba {lba}"));
    }
    if unit[4] != want.key {
        return Some(format!(
            "stale data: key {}, expected {} (a write was lost or reordered)",
            unit[4], want.key
        ));
    }
    None
}

/// A small stable tag for an sd name, so a block of one sd found on another is caught.
pub fn sd_tag(name: &str) -> u32 {
    crc32c::crc32c(name.as_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashSet;

    fn zero_fraction(buf: &[u8]) -> f64 {
        buf.iter().filter(|b| **b == 0).count() as f64 / buf.len() as f64
    }

    #[test]
    fn compression_ratio_sets_the_share_of_zeros() {
        for c in [1.0, 2.0, 4.0] {
            let p = DataPattern::new(c, 1.0, 8192, 1);
            let mut buf = vec![0u8; 1 << 20];
            p.prefill(&mut buf, 0);
            let want = 1.0 - 1.0 / c;
            let got = zero_fraction(&buf);
            // Random bytes are zero 1/256 of the time.
            assert!(
                (got - want).abs() < 0.01,
                "compratio {c}: {got} zeros, want {want}"
            );
        }
    }

    #[test]
    fn every_unit_of_every_write_is_unique_without_dedupe() {
        let p = DataPattern::new(2.0, 1.0, 4096, 9);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut buf = vec![0u8; 64 << 10];
        p.prefill(&mut buf, 0);
        let mut seen = HashSet::new();
        for counter in 0..100u64 {
            // The same buffer rewritten at the same place: still unique each time.
            p.stamp(&mut buf, 0, counter, &mut rng);
            for unit in buf.chunks(4096) {
                assert!(seen.insert(unit.to_vec()), "a duplicate unit");
            }
        }
    }

    #[test]
    fn dedupe_ratio_is_the_written_to_distinct_ratio() {
        for d in [2.0, 4.0] {
            let p = DataPattern::new(1.0, d, 4096, 3);
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let mut buf = vec![0u8; 64 << 10];
            let mut distinct = HashSet::new();
            let mut written = 0u64;
            for counter in 0..2000u64 {
                p.prefill(&mut buf, counter % 8);
                p.stamp(&mut buf, counter * 65536, counter, &mut rng);
                for unit in buf.chunks(4096) {
                    distinct.insert(crc32c::crc32c(unit) as u64 ^ (unit[0] as u64) << 32);
                    written += 1;
                }
            }
            let ratio = written as f64 / distinct.len() as f64;
            // 32,000 units: unique ones ≈ 32000/d, plus at most 1024 duplicate sets.
            let want = written as f64 / (written as f64 / d + DUPLICATE_SETS as f64);
            assert!(
                (ratio - want).abs() / want < 0.05,
                "dedupratio {d}: got {ratio:.2}, want about {want:.2}"
            );
        }
    }

    #[test]
    fn a_sealed_unit_checks_and_each_kind_of_damage_is_named() {
        let want = UnitHeader {
            key: 7,
            sd_tag: sd_tag("sd1"),
            lba: 42,
        };
        let mut unit = vec![0xA5u8; 4096];
        seal_unit(&mut unit, want);
        assert_eq!(check_unit(&unit, want), None);

        let mut rotted = unit.clone();
        rotted[1000] ^= 1;
        assert!(check_unit(&rotted, want).unwrap().contains("bad checksum"));

        let mut elsewhere = vec![0xA5u8; 4096];
        seal_unit(&mut elsewhere, UnitHeader { lba: 17, ..want });
        assert!(check_unit(&elsewhere, want).unwrap().contains("lba 17"));

        let mut stale = vec![0xA5u8; 4096];
        seal_unit(&mut stale, UnitHeader { key: 6, ..want });
        assert!(check_unit(&stale, want).unwrap().contains("stale"));

        assert!(check_unit(&vec![0u8; 4096], want)
            .unwrap()
            .contains("zeros"));
        let mut other_sd = vec![0xA5u8; 4096];
        seal_unit(
            &mut other_sd,
            UnitHeader {
                sd_tag: sd_tag("sd2"),
                ..want
            },
        );
        assert!(check_unit(&other_sd, want).unwrap().contains("another sd"));
    }
}
