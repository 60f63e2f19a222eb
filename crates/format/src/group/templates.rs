//! Templates (file 5): the redundancy and striping a type of file gets.

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::group::extent::COPIES_MAX;
use crate::group::fields::{cast, cast_mut, get_name, put_name};
use crate::group::file_entry::{STRIPING_COARSE, STRIPING_FINE, TEMPLATE_NAME_LEN_MAX};
use crate::meta::{invalid, payload, payload_mut, Block, MetaError, PAYLOAD_BYTES};

pub const TEMPLATES_PER_BLOCK: usize = PAYLOAD_BYTES / 64;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
pub struct RawTemplate {
    pub name: [u8; 32],
    pub copies: u8,
    pub striping: u8,
    pub reserved: [u8; 30],
}
const _: () = assert!(size_of::<RawTemplate>() == 64);

/// Redundancy and striping for a type of file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Template {
    pub name: String,
    /// 0: the group's redundancy; else a copy count.
    pub copies: u8,
    pub striping: u8,
}

pub fn encode_templates(block: &mut Block, templates: &[Template]) {
    assert!(
        templates.len() <= TEMPLATES_PER_BLOCK,
        "invariant: templates fit"
    );
    let raw: &mut [RawTemplate; TEMPLATES_PER_BLOCK] = cast_mut(payload_mut(block));
    raw.zero();
    for (out, t) in raw.iter_mut().zip(templates) {
        put_name(&mut out.name, &t.name);
        out.copies = t.copies;
        out.striping = t.striping;
    }
}

pub fn decode_templates(block: &[u8]) -> Result<Vec<Template>, MetaError> {
    let raw: &[RawTemplate; TEMPLATES_PER_BLOCK] = cast(payload(block));
    let mut out = Vec::new();
    for r in raw.iter() {
        if r.as_bytes().iter().all(|b| *b == 0) {
            continue;
        }
        if usize::from(r.copies) > COPIES_MAX {
            return Err(invalid("template.copies", format!("{}", r.copies)));
        }
        if r.striping != STRIPING_COARSE && r.striping != STRIPING_FINE {
            return Err(invalid("template.striping", format!("{}", r.striping)));
        }
        let name = get_name(&r.name, "template.name")?;
        // A file's entry names its template in 30 bytes: a longer name
        // (or none) is one no Cairn writes.
        if name.is_empty() || name.len() > TEMPLATE_NAME_LEN_MAX {
            return Err(invalid("template.name", format!("{name:?}")));
        }
        out.push(Template {
            name,
            copies: r.copies,
            striping: r.striping,
        });
    }
    Ok(out)
}
