//! The config file parser (cairn.toml) on arbitrary text: never panics, and its
//! errors are one line.
#![no_main]

use std::path::Path;

use cairn_store::discovery::parse_config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = parse_config(text, Path::new("cairn.toml")) {
        assert!(!e.to_string().contains('\n'), "multi-line error: {e}");
    }
});
