//! The heartbeat block: who writes a disk group now, and how often.
//!
//! Owns [`RawHeartbeat`] (the payload of block type 14) and its domain type
//! [`Heartbeat`]. Every member disk has one at [`HEARTBEAT_OFFSET_BYTES`],
//! sealed in the metadata envelope like every other metadata block: the
//! self-address is (heartbeat, disk number, tag 0, index 1), the envelope
//! generation is the heartbeat's *sequence*, which grows with every write,
//! whoever writes (a host that takes a group over continues from the
//! highest sequence it read).
//!
//! Why a block of its own, outside the journal: it is rewritten every
//! interval (a second), by a thread that must never wait for the metadata
//! plane; going through the journal would make every beat a transaction.
//! It needs no mirror: each disk carries its own copy, and a reader takes
//! the newest it can read on any disk.
//!
//! Defends against: a second host mounting a group that another still
//! writes (what a SAN makes possible, and what a lock on one host cannot
//! see). A torn, rotten or misdirected heartbeat fails its checks and reads
//! as no heartbeat on that disk; the other disks still carry one.
//!
//! Deliberately not here: what a reader concludes (the store's
//! `group::heartbeat`), and the wall clock's truth: `written_unix_ms` is
//! what the writer's clock said, shown to people, never compared with
//! another host's clock to decide anything.

use std::mem::offset_of;

use uuid::Uuid;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::group::{cast, cast_mut, get_name, put_name, SUPER_SLOT_OFFSETS_BYTES};
use crate::meta::{invalid, payload, payload_mut, Block, MetaError, PAYLOAD_BYTES};

/// Where each member disk keeps its heartbeat: block 1, between the disk
/// header's copy 0 and superblock slot A, in the front reserve no other
/// structure uses.
pub const HEARTBEAT_OFFSET_BYTES: u64 = 4096;
const _: () = assert!(HEARTBEAT_OFFSET_BYTES + 4096 <= SUPER_SLOT_OFFSETS_BYTES[0]);

/// Bytes for the writer's host name (`uname -n` is at most 64 on Linux).
pub const HOST_NAME_BYTES: usize = 64;

/// The longest interval a heartbeat may declare: a writer that beats less
/// often than this is no protection, and a reader that trusted a larger
/// value from a damaged block would wait for ever.
pub const HEARTBEAT_INTERVAL_MS_MAX: u32 = 60_000;
/// The most intervals a writer may go without a heartbeat landing before it
/// stops writing (the reader's wait follows from it).
pub const HEARTBEAT_FAIL_INTERVALS_MAX: u16 = 100;

/// The payload, little-endian, 4032 bytes.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct RawHeartbeat {
    /// The writer's host id; never nil.
    pub host_id: [u8; 16],
    /// The writer's clock (Unix milliseconds) when it wrote this block.
    pub written_unix_ms: U64,
    /// The superblock generation the writer's mount started (0 while it is
    /// still mounting).
    pub mount_generation: U64,
    /// How often the writer beats.
    pub interval_ms: U32,
    /// How many intervals the writer goes without a heartbeat landing on
    /// any disk before it stops writing the group.
    pub fail_intervals: U16,
    /// [`HeartbeatState`].
    pub state: u8,
    pub reserved0: u8,
    /// The writer's process id, for people.
    pub pid: U32,
    pub reserved1: U32,
    /// The writer's host name, printable ASCII, NUL padded, for people.
    pub host_name: [u8; HOST_NAME_BYTES],
    pub reserved_tail: [u8; PAYLOAD_BYTES - 112],
}

const _: () = {
    assert!(size_of::<RawHeartbeat>() == PAYLOAD_BYTES);
    assert!(offset_of!(RawHeartbeat, written_unix_ms) == 16);
    assert!(offset_of!(RawHeartbeat, mount_generation) == 24);
    assert!(offset_of!(RawHeartbeat, interval_ms) == 32);
    assert!(offset_of!(RawHeartbeat, fail_intervals) == 36);
    assert!(offset_of!(RawHeartbeat, state) == 38);
    assert!(offset_of!(RawHeartbeat, pid) == 40);
    assert!(offset_of!(RawHeartbeat, host_name) == 48);
};

/// What the writer was doing when it wrote the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeartbeatState {
    /// It has the group mounted for writing, and beats.
    Active = 1,
    /// It let go cleanly: nobody writes the group, and the next mount, on
    /// any host, need not wait to see whether it still beats.
    Released = 2,
}

/// A decoded heartbeat (the sequence is the envelope's generation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub host_id: Uuid,
    pub host_name: String,
    pub pid: u32,
    pub written_unix_ms: u64,
    pub mount_generation: u64,
    pub interval_ms: u32,
    pub fail_intervals: u16,
    pub state: HeartbeatState,
}

impl Heartbeat {
    /// Fill `block`'s payload (the envelope is sealed by the caller). The
    /// host name must fit [`HOST_NAME_BYTES`] and be printable ASCII (the
    /// caller makes it so).
    pub fn encode_into(&self, block: &mut Block) {
        assert!(
            self.host_name.len() <= HOST_NAME_BYTES
                && self.host_name.bytes().all(|b| (0x20..0x7F).contains(&b)),
            "invariant: the host name was made printable and short"
        );
        let raw: &mut RawHeartbeat = cast_mut(payload_mut(block));
        raw.zero();
        raw.host_id = *self.host_id.as_bytes();
        raw.written_unix_ms = U64::new(self.written_unix_ms);
        raw.mount_generation = U64::new(self.mount_generation);
        raw.interval_ms = U32::new(self.interval_ms);
        raw.fail_intervals = U16::new(self.fail_intervals);
        raw.state = self.state as u8;
        raw.pid = U32::new(self.pid);
        put_name(&mut raw.host_name, &self.host_name);
    }

    /// Decode a heartbeat's payload. Never panics.
    pub fn decode(block: &[u8]) -> Result<Self, MetaError> {
        if block.len() < crate::meta::BLOCK_BYTES {
            return Err(MetaError::WrongLength {
                len_bytes: block.len(),
            });
        }
        let raw: &RawHeartbeat = cast(payload(block));
        let host_id = Uuid::from_bytes(raw.host_id);
        if host_id.is_nil() {
            return Err(invalid("host_id", "nil"));
        }
        let interval_ms = raw.interval_ms.get();
        if interval_ms == 0 || interval_ms > HEARTBEAT_INTERVAL_MS_MAX {
            return Err(invalid(
                "interval_ms",
                format!("{interval_ms} is outside 1..={HEARTBEAT_INTERVAL_MS_MAX}"),
            ));
        }
        let fail_intervals = raw.fail_intervals.get();
        if fail_intervals == 0 || fail_intervals > HEARTBEAT_FAIL_INTERVALS_MAX {
            return Err(invalid(
                "fail_intervals",
                format!("{fail_intervals} is outside 1..={HEARTBEAT_FAIL_INTERVALS_MAX}"),
            ));
        }
        let state = match raw.state {
            1 => HeartbeatState::Active,
            2 => HeartbeatState::Released,
            other => return Err(invalid("state", format!("{other}"))),
        };
        Ok(Self {
            host_id,
            host_name: get_name(&raw.host_name, "host_name")?,
            pid: raw.pid.get(),
            written_unix_ms: raw.written_unix_ms.get(),
            mount_generation: raw.mount_generation.get(),
            interval_ms,
            fail_intervals,
            state,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::meta::empty_block;

    fn example() -> Heartbeat {
        Heartbeat {
            host_id: Uuid::from_u128(0xfeed),
            host_name: "dbhost1.example.com".into(),
            pid: 4242,
            written_unix_ms: 1_763_700_000_500,
            mount_generation: 3,
            interval_ms: 1000,
            fail_intervals: 10,
            state: HeartbeatState::Active,
        }
    }

    #[test]
    fn a_heartbeat_round_trips() {
        let mut block = empty_block();
        example().encode_into(&mut block);
        assert_eq!(Heartbeat::decode(&block[..]), Ok(example()));
        let released = Heartbeat {
            state: HeartbeatState::Released,
            host_name: "x".repeat(HOST_NAME_BYTES),
            ..example()
        };
        released.encode_into(&mut block);
        assert_eq!(Heartbeat::decode(&block[..]), Ok(released));
    }

    #[test]
    fn out_of_range_fields_are_refused() {
        let mut block = empty_block();
        example().encode_into(&mut block);
        let at = |field: usize| 64 + field;
        for (offset, bytes, field) in [
            (0usize, vec![0u8; 16], "host_id"),
            (32, 0u32.to_le_bytes().to_vec(), "interval_ms"),
            (
                32,
                (HEARTBEAT_INTERVAL_MS_MAX + 1).to_le_bytes().to_vec(),
                "interval_ms",
            ),
            (36, 0u16.to_le_bytes().to_vec(), "fail_intervals"),
            (
                36,
                (HEARTBEAT_FAIL_INTERVALS_MAX + 1).to_le_bytes().to_vec(),
                "fail_intervals",
            ),
            (38, vec![3], "state"),
            (48, vec![0x07], "host_name"),
        ] {
            let mut bad = block.clone();
            bad[at(offset)..at(offset) + bytes.len()].copy_from_slice(&bytes);
            match Heartbeat::decode(&bad[..]) {
                Err(MetaError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        assert!(Heartbeat::decode(&block[..100]).is_err());
    }
}
