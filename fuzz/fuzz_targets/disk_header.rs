//! The disk header decoder on arbitrary bytes: never panics, and anything it
//! accepts re-encodes to the same bytes.
#![no_main]

use cairn_format::disk_header::describe;
use cairn_format::DiskHeader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = describe(data);
    if let Ok(decoded) = DiskHeader::decode(data) {
        let again = decoded.header.encode(usize::from(decoded.copy_index));
        if decoded.header.features.rewritable() {
            assert_eq!(again[..], data[..], "decode/encode round trip");
        } else {
            // A newer Cairn's features may use the reserved tail (and so change
            // the checksum); every field this version knows still round-trips.
            assert_eq!(again[12..0xC0], data[12..0xC0], "decode/encode round trip of known fields");
        }
    }
});
