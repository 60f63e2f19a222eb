//! The AWR HTML and Statspack readers on arbitrary bytes: never panic, and
//! every warning names a section and says something.
#![no_main]

use cairn_awr::html::parse_awr_html;
use cairn_awr::statspack::parse_statspack_text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for report in [
        parse_awr_html(&text, "fuzz.html"),
        parse_statspack_text(&text, "fuzz.txt"),
    ] {
        for w in &report.warnings {
            assert!(!w.section.is_empty() && !w.message.is_empty(), "{w:?}");
            assert!(!w.message.contains('\n'), "multi-line warning: {w:?}");
        }
        for h in &report.histograms {
            assert!(!h.event.is_empty() && !h.table.is_empty());
        }
    }
});
