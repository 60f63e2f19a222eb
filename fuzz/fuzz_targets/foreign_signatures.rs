//! The foreign-signature recognisers on arbitrary head and tail samples.
#![no_main]

use cairn_format::foreign::{recognise, DeviceSample};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let size = u64::from_le_bytes(data[..8].try_into().unwrap_or_default());
    let rest = &data[8..];
    let split = rest.len() / 2;
    for found in recognise(&DeviceSample {
        head: &rest[..split],
        tail: &rest[split..],
        device_size_bytes: size,
    }) {
        let _ = found.signature.to_string();
        for (offset, len) in found.magic_ranges {
            assert!(offset.checked_add(len).is_some(), "a magic range inside the address space");
        }
    }
});
