//! The vdbench parameter-file parser on arbitrary text: never panics, errors
//! are one line with a position, and what it accepts is a consistent plan.
#![no_main]

use std::collections::BTreeMap;
use std::path::Path;

use cairn_kit::vdbench::parse_str;
use libfuzzer_sys::fuzz_target;

/// Every `include=` is served this file, whatever it names (so includes and
/// include depth are exercised without a file system).
const INCLUDED: &str = "* included\nsd=sdinc,lun=$dir/inc.dat,size=1m\n";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let variables = BTreeMap::from([
        ("dir".to_string(), "/tmp/fuzz".to_string()),
        ("lun".to_string(), "/tmp/fuzz/lun.dat".to_string()),
    ]);
    let mut read_include = |_: &Path| -> std::io::Result<String> { Ok(INCLUDED.to_string()) };
    match parse_str(Path::new("fuzz.vdb"), text, &variables, &mut read_include) {
        Ok(plan) => {
            assert!(!plan.runs.is_empty(), "a plan with no runs");
            for run in &plan.runs {
                assert!(run.warmup < run.elapsed && !run.interval.is_zero());
                assert!(
                    run.wds.iter().all(|w| plan.wd(w).is_some()),
                    "run names an unknown wd"
                );
            }
            for wd in &plan.wds {
                assert!(!wd.sds.is_empty() && wd.sds.iter().all(|s| plan.sd(s).is_some()));
                assert!((0.0..=100.0).contains(&wd.rdpct));
            }
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(!shown.contains('\n'), "multi-line error: {shown}");
            assert!(e.line >= 1 && e.column >= 1, "no position: {shown}");
        }
    }
});
