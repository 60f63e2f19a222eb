//! The control socket's request decoder on arbitrary bytes: never panics,
//! its errors are one line, what it accepts encodes back to itself, and a
//! request's own check of its fields never panics either.
#![no_main]

use cairn_command::wire::{decode_request, encode_request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_request(data) {
        Ok(line) => {
            let _ = line.request.validate();
            let _ = line.request.concern();
            let mut again = encode_request(&line);
            again.pop();
            assert_eq!(decode_request(&again).ok(), Some(line));
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "multi-line error: {e}"),
    }
});
