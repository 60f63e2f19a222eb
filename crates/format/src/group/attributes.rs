//! Group attributes (file 6): name = value pairs.

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::group::fields::{cast, cast_mut, get_name, put_name};
use crate::meta::{payload, payload_mut, Block, MetaError, PAYLOAD_BYTES};

pub const ATTRIBUTES_PER_BLOCK: usize = PAYLOAD_BYTES / 128;
/// The longest attribute name, and value, a block holds (bytes).
pub const ATTRIBUTE_NAME_LEN_MAX: usize = 32;
pub const ATTRIBUTE_VALUE_LEN_MAX: usize = 96;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawAttribute {
    pub name: [u8; ATTRIBUTE_NAME_LEN_MAX],
    pub value: [u8; ATTRIBUTE_VALUE_LEN_MAX],
}
const _: () = assert!(size_of::<RawAttribute>() == 128);

pub fn encode_attributes(block: &mut Block, attributes: &[(String, String)]) {
    assert!(
        attributes.len() <= ATTRIBUTES_PER_BLOCK,
        "invariant: attributes fit"
    );
    let raw: &mut [RawAttribute; ATTRIBUTES_PER_BLOCK] = cast_mut(payload_mut(block));
    raw.zero();
    for (out, (name, value)) in raw.iter_mut().zip(attributes) {
        put_name(&mut out.name, name);
        put_name(&mut out.value, value);
    }
}

pub fn decode_attributes(block: &[u8]) -> Result<Vec<(String, String)>, MetaError> {
    let raw: &[RawAttribute; ATTRIBUTES_PER_BLOCK] = cast(payload(block));
    raw.iter()
        .filter(|r| r.as_bytes().iter().any(|b| *b != 0))
        .map(|r| {
            Ok((
                get_name(&r.name, "attribute.name")?,
                get_name(&r.value, "attribute.value")?,
            ))
        })
        .collect()
}
