//! `result.json`: the schema is pinned by a golden file, readers refuse what they
//! cannot read with one clear line, and the reports are written whole or not at all.
#![allow(clippy::unwrap_used)]

mod report_fixture;

use std::fs;
use std::path::{Path, PathBuf};

use cairn_kit::result::BenchResult;
use cairn_kit_report::report_file::{load_result, write_reports};
use cairn_kit_report::{report_html, summary_text};
use report_fixture::sample_result;

/// The sample cut to what pins the schema while staying short enough to review:
/// the plan whole, and one run — the curve point that was not held, which fills
/// every optional part (target, curve membership, rate message, I/O errors,
/// validation errors) — with two intervals (one warm-up).
fn golden_result() -> BenchResult {
    let mut r = sample_result();
    r.runs = vec![r.runs[4].clone()];
    for run in &mut r.runs {
        run.intervals.truncate(2);
    }
    r
}

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/result_v1.json")
}

/// Any change to the JSON a bench writes shows up here, and so in review: a
/// renamed or removed field needs `SCHEMA_VERSION` bumped (and a new golden
/// file); an added field only a regenerated golden file.
#[test]
fn result_json_matches_the_golden_file() {
    let json = format!(
        "{}\n",
        serde_json::to_string_pretty(&golden_result()).unwrap()
    );
    let path = golden_path();
    if std::env::var_os("CAIRN_UPDATE_GOLDEN").is_some() {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &json).unwrap();
        println!("updated {}", path.display());
    }
    let want = fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; create it with CAIRN_UPDATE_GOLDEN=1 cargo test -p cairn-kit-report --test report_golden",
            path.display()
        )
    });
    if json != want {
        let (n, (got, exp)) = json
            .lines()
            .zip(want.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .unwrap_or((
                json.lines().count().min(want.lines().count()),
                ("<end>", "<end>"),
            ));
        panic!(
            "result.json no longer matches {} (first difference at line {}: golden `{exp}`, now `{got}`).\n\
             If the change is intended, regenerate it with CAIRN_UPDATE_GOLDEN=1 cargo test -p cairn-kit-report --test report_golden, \
             and bump SCHEMA_VERSION if a field was renamed or removed.",
            path.display(),
            n + 1
        );
    }
    // The golden file also reads back into the same result, to the last bit of
    // every float: a report rebuilt from result.json rounds exactly as the first.
    let back: BenchResult = serde_json::from_str(&want).unwrap();
    assert!(
        back == golden_result(),
        "the golden file does not read back into the result it was written from"
    );
}

#[test]
fn written_reports_load_back_and_leave_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run1");
    let result = sample_result();
    // Twice: the second write replaces the first in place.
    write_reports(&out, &result).unwrap();
    write_reports(&out, &result).unwrap();
    let mut names: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["report.html", "result.json", "summary.txt"]);
    assert_eq!(load_result(&out.join("result.json")).unwrap(), result);
    assert_eq!(
        fs::read_to_string(out.join("summary.txt")).unwrap(),
        summary_text(&result)
    );
    assert_eq!(
        fs::read_to_string(out.join("report.html")).unwrap(),
        report_html(&result)
    );
    let json = fs::read_to_string(out.join("result.json")).unwrap();
    assert!(
        json.starts_with("{\n  \"schema\": \"cairn-bench-result\",\n  \"schema_version\": 1,"),
        "pretty, schema first: {}",
        &json[..80]
    );
}

#[test]
fn write_reports_fails_with_the_path_when_the_directory_cannot_be_made() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    fs::write(&file, "x").unwrap();
    let err = write_reports(&file.join("out"), &sample_result()).unwrap_err();
    assert!(err.to_string().contains("not-a-dir"), "{err}");
}

fn load_text(text: &str) -> Result<BenchResult, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.json");
    fs::write(&path, text).unwrap();
    load_result(&path).map_err(|e| e.to_string())
}

fn sample_value() -> serde_json::Value {
    serde_json::to_value(sample_result()).unwrap()
}

#[test]
fn load_refuses_what_it_cannot_read_in_one_line() {
    let cases: Vec<(String, &str)> =
        vec![
        (
            r#"{"schema":"fio-json","schema_version":1}"#.to_string(),
            "is not a Cairn bench result (schema \"fio-json\", expected \"cairn-bench-result\")",
        ),
        (r#"{"jobs":[]}"#.to_string(), "is not a Cairn bench result (schema missing"),
        ("fio-3.33\nnot json".to_string(), "is not a Cairn bench result (not JSON"),
        (
            {
                let mut v = sample_value();
                v["schema_version"] = 2.into();
                v.to_string()
            },
            "was written by a newer Cairn (schema_version 2); this Cairn reads 1",
        ),
        (
            {
                let mut v = sample_value();
                v["schema_version"] = 0.into();
                v.to_string()
            },
            "has schema_version 0, which no Cairn writes; this Cairn reads 1",
        ),
        (
            {
                let mut v = sample_value();
                v.as_object_mut().unwrap().remove("runs");
                v.to_string()
            },
            "is a damaged Cairn bench result (missing field `runs`",
        ),
    ];
    for (text, want) in cases {
        let err = load_text(&text).unwrap_err();
        assert!(err.contains(want), "want `{want}` in `{err}`");
        assert!(err.contains("result.json"), "names the file: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
    let err = load_result(Path::new("/nonexistent/result.json"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("cannot read /nonexistent/result.json: "),
        "{err}"
    );
}
