//! The AWR text report reader on arbitrary text: never panics, and every
//! warning is one line that points inside the input (or at the whole report).
#![no_main]

use cairn_awr::text::parse_awr_text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let report = parse_awr_text(text, "fuzz.txt");
    let lines = text.split('\n').count();
    for w in &report.warnings {
        assert!(w.line <= lines, "warning past the end of the input: {w:?}");
        assert!(!w.message.contains('\n'), "multi-line warning: {w:?}");
    }
    // A report with nothing read says why.
    let empty = report.load_profile.is_empty()
        && report.instance_activity.is_empty()
        && report.top_events.is_empty()
        && report.io_profile.is_empty();
    assert!(!empty || !report.warnings.is_empty(), "nothing read and no warning");
});
