//! The slob.conf reader on arbitrary text: never panics, errors are one line
//! at a line of the input, and what it accepts is a valid configuration whose
//! `effective()` settings read back to the same one.
#![no_main]

use cairn_oltp::conf::parse_conf_str;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_conf_str(text, "fuzz.conf") {
        Ok(parsed) => {
            let conf = parsed.conf;
            assert!(
                conf.validate().is_ok(),
                "accepted an invalid conf: {conf:?}"
            );
            let lines = text.split('\n').count();
            assert!(
                parsed.ignored.iter().all(|(_, l)| (1..=lines).contains(l)),
                "ignored key outside the file"
            );
            let back: String = conf
                .effective()
                .iter()
                .map(|(k, v)| format!("{k}={v}\n"))
                .collect();
            match parse_conf_str(&back, "effective.conf") {
                Ok(again) => assert_eq!(again.conf, conf, "effective() does not read back"),
                Err(e) => panic!("effective() does not parse: {e}\n{back}"),
            }
            // Whatever the block size, the scale check answers without panicking.
            for block_size in [512, 8192, 65536] {
                let _ = conf.check_scale(block_size);
            }
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(!shown.contains('\n'), "multi-line error: {shown}");
            assert!(e.line >= 1, "no line: {shown}");
        }
    }
});
