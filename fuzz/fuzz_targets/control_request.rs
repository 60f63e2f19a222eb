//! The control socket's request decoder on arbitrary bytes: never panics,
//! its errors are one line, and what it accepts encodes back to itself.
#![no_main]

use cairn_serve::control::decode_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_request(data) {
        Ok(request) => {
            let again = serde_json::to_vec(&request).expect("a request encodes");
            assert_eq!(decode_request(&again).ok(), Some(request));
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "multi-line error: {e}"),
    }
});
