//! Fixed fields of the payload layouts: zero-padded ASCII names, and the
//! casts of a payload to its raw layout.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::meta::{invalid, MetaError};

pub(crate) fn put_name(out: &mut [u8], name: &str) {
    assert!(name.len() <= out.len(), "invariant: name fits its field");
    out.fill(0);
    out[..name.len()].copy_from_slice(name.as_bytes());
}

/// A zero-padded ASCII name; printable, no interior zero.
pub(crate) fn get_name(raw: &[u8], field: &'static str) -> Result<String, MetaError> {
    let len = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
    if raw[len..].iter().any(|b| *b != 0) {
        return Err(invalid(field, "bytes after the terminating zero"));
    }
    let bytes = &raw[..len];
    if !bytes.iter().all(|b| (0x20..0x7F).contains(b)) {
        return Err(invalid(field, "not printable ASCII"));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

pub(crate) fn cast<T: FromBytes + KnownLayout + Immutable>(bytes: &[u8]) -> &T {
    T::ref_from_prefix(bytes)
        .expect("invariant: payload layouts fit the payload")
        .0
}

pub(crate) fn cast_mut<T: FromBytes + IntoBytes + KnownLayout>(bytes: &mut [u8]) -> &mut T {
    T::mut_from_prefix(bytes)
        .expect("invariant: payload layouts fit the payload")
        .0
}
