//! The slob.conf reader: the files SLOB users publish, every key's default,
//! every form of line a slob.conf carries, every validation error at its line,
//! Oracle-only keys listed as ignored, the `effective()` round trip, and no
//! panics on any input.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use cairn_oltp::conf::{
    ignored_reason, parse_conf_file, parse_conf_str, Amount, ConfError, ParsedConf, RedoStress,
    SlobConf, IGNORED_KEYS, RETIRED_KEYS, SETTING_KEYS,
};
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/slob")
        .join(name)
}

fn parse(text: &str) -> ParsedConf {
    parse_conf_str(text, "slob.conf").unwrap_or_else(|e| panic!("{e}\n--- text:\n{text}"))
}

fn conf(text: &str) -> SlobConf {
    parse(text).conf
}

fn error(text: &str) -> ConfError {
    match parse_conf_str(text, "slob.conf") {
        Ok(p) => panic!("parsed, expected an error:\n{text}\n{:#?}", p.conf),
        Err(e) => e,
    }
}

/// The error is on `line`, its message contains every one of `parts`, and it
/// is one line.
fn assert_error(text: &str, line: usize, parts: &[&str]) {
    let e = error(text);
    assert_eq!(e.line, line, "wrong line for {e}\n--- text:\n{text}");
    assert_eq!(e.file, "slob.conf");
    let shown = e.to_string();
    assert!(!shown.contains('\n'), "multi-line error: {shown}");
    assert!(
        shown.starts_with(&format!("slob.conf:{line}: ")),
        "not file:line: {shown}"
    );
    for part in parts {
        assert!(shown.contains(part), "{shown:?} lacks {part:?}");
    }
}

fn ignored_keys(p: &ParsedConf) -> Vec<(&str, usize)> {
    p.ignored.iter().map(|(k, l)| (k.as_str(), *l)).collect()
}

// ------------------------------------------------------- published files

/// The slob.conf of the VirtualBox tests in the ASMFD post (reference 003).
#[test]
fn virtualbox_file_from_the_asmfd_post_parses() {
    let p = parse_conf_file(&data("virtualbox.conf")).unwrap();
    let c = &p.conf;
    assert_eq!(c.update_pct, 50);
    assert_eq!(c.scan_pct, 0);
    assert_eq!(c.run_time_s, 600);
    assert_eq!(c.work_loop, 0);
    assert_eq!(c.scale, Amount::Bytes(512 * MIB));
    assert_eq!(c.scale.blocks(8192), 65_536);
    assert_eq!(c.scan_table_sz, Amount::Bytes(MIB));
    assert_eq!(c.work_unit, 32);
    assert_eq!(c.redo_stress, RedoStress::Lite);
    assert_eq!(c.load_parallel_degree, 2);
    assert_eq!(c.threads_per_schema, 4);
    assert!(!c.do_hotspot);
    assert_eq!(c.hotspot_mb, 8);
    assert_eq!(c.hotspot_offset_mb, 16);
    assert_eq!(c.hotspot_frequency, 3);
    assert_eq!(c.hot_schema_frequency, 0);
    assert_eq!(c.think_tm_frequency, 0);
    assert_eq!(c.think_tm_min_s, 0.1);
    assert_eq!(c.think_tm_max_s, 0.5);
    assert!(!c.obfuscate_columns);
    assert_eq!(
        ignored_keys(&p),
        vec![
            ("AWR_SRC", 9),
            ("DATABASE_STATISTICS_TYPE", 11),
            ("DBA_PRIV_USER", 12),
            ("SYSDBA_PASSWD", 13),
            ("EXTERNAL_SCRIPT", 14),
        ]
    );
    assert!(p.overridden.is_empty());
    assert_eq!(
        p.text,
        std::fs::read_to_string(data("virtualbox.conf")).unwrap()
    );
    c.check_scale(8192).unwrap();
}

/// The slob.conf of the AWS tests in the same post.
#[test]
fn aws_file_from_the_asmfd_post_parses() {
    let p = parse_conf_file(&data("aws.conf")).unwrap();
    let c = &p.conf;
    assert_eq!((c.update_pct, c.scan_pct, c.run_time_s), (30, 20, 3600));
    assert_eq!(c.scale, Amount::Bytes(8192 * MIB));
    assert_eq!(c.scale.blocks(8192), 1_048_576);
    assert_eq!(c.work_unit, 32);
    assert_eq!(c.threads_per_schema, 4);
    assert_eq!(p.ignored.len(), 5);
    c.check_scale(8192).unwrap();
}

#[test]
fn crlf_file_parses_like_its_lf_twin() {
    let lf = parse_conf_file(&data("virtualbox.conf")).unwrap();
    let crlf = parse_conf_file(&data("virtualbox-crlf.conf")).unwrap();
    assert!(crlf.text.contains("\r\n"));
    assert_eq!(crlf.conf, lf.conf);
    assert_eq!(crlf.ignored, lf.ignored);
}

#[test]
fn crlf_error_is_at_its_line_and_does_not_show_the_cr() {
    let e = error("UPDATE_PCT=25\r\nSCAN_PCT=abc\r\n");
    assert_eq!(e.line, 2);
    assert!(e.message.contains("SCAN_PCT=abc:"), "{e}");
    assert!(
        !e.message.contains('\r') && !e.message.contains("\\r"),
        "{e}"
    );
}

#[test]
fn every_form_of_line_in_one_file() {
    let p = parse_conf_file(&data("forms.conf")).unwrap();
    let c = &p.conf;
    assert_eq!(c.update_pct, 10);
    assert_eq!(c.scan_pct, 5);
    assert_eq!(c.run_time_s, 120);
    assert_eq!(c.scale, Amount::Bytes(1 << 30));
    assert_eq!(c.scan_table_sz, Amount::Bytes(2 * MIB));
    assert_eq!(c.work_unit, 64);
    assert_eq!(c.redo_stress, RedoStress::Heavy);
    assert_eq!((c.load_parallel_degree, c.threads_per_schema), (4, 2));
    assert!(c.do_hotspot);
    assert_eq!(
        (c.hotspot_mb, c.hotspot_offset_mb, c.hotspot_frequency),
        (16, 32, 5)
    );
    assert_eq!((c.hot_schema_frequency, c.think_tm_frequency), (7, 11));
    assert_eq!((c.think_tm_min_s, c.think_tm_max_s), (0.25, 2.0));
    assert!(c.obfuscate_columns);
    let keys: Vec<&str> = p.ignored.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "ADMIN_SQLNET_SERVICE",
            "SQLNET_SERVICE_BASE",
            "SQLNET_SERVICE_MAX",
            "DBA_PRIV_USER",
            "SYSDBA_PASSWD",
            "DATABASE_STATISTICS_TYPE",
            "AWR_SRC",
            "EXTERNAL_SCRIPT",
        ]
    );
    c.check_scale(8192).unwrap();
}

// -------------------------------------------------------------- defaults

#[test]
fn an_empty_file_gives_slobs_defaults() {
    let p = parse("");
    assert_eq!(p.conf, SlobConf::default());
    assert!(p.ignored.is_empty() && p.overridden.is_empty());
    let d = SlobConf::default();
    assert_eq!(d.update_pct, 25);
    assert_eq!(d.scan_pct, 0);
    assert_eq!(d.run_time_s, 300);
    assert_eq!(d.work_loop, 0);
    assert_eq!(d.scale, Amount::Blocks(10_000));
    assert_eq!(d.scan_table_sz, Amount::Bytes(MIB));
    assert_eq!(d.work_unit, 256);
    assert_eq!(d.redo_stress, RedoStress::Lite);
    assert_eq!(d.load_parallel_degree, 1);
    assert_eq!(d.threads_per_schema, 1);
    assert!(!d.do_hotspot);
    assert_eq!(d.hotspot_mb, 8);
    assert_eq!(d.hotspot_offset_mb, 16);
    assert_eq!(d.hotspot_frequency, 3);
    assert_eq!(d.hot_schema_frequency, 0);
    assert_eq!(d.think_tm_frequency, 0);
    assert_eq!(d.think_tm_min_s, 0.1);
    assert_eq!(d.think_tm_max_s, 0.5);
    assert!(!d.obfuscate_columns);
    d.validate().unwrap();
    d.check_scale(8192).unwrap();
}

#[test]
fn a_key_left_out_keeps_its_default() {
    let c = conf("UPDATE_PCT=0\n");
    assert_eq!(c.update_pct, 0);
    assert_eq!(
        SlobConf {
            update_pct: 25,
            ..c
        },
        SlobConf::default()
    );
}

#[test]
fn comments_and_blank_lines_only() {
    assert_eq!(
        conf("# a comment\n\n   \n\t# indented\n#UPDATE_PCT=99\n"),
        SlobConf::default()
    );
}

// ------------------------------------------------------------ each key

#[test]
fn every_setting_parses() {
    let c = conf(
        "UPDATE_PCT=100\nSCAN_PCT=0\nRUN_TIME=1\nWORK_LOOP=1000\nSCALE=20000\n\
         SCAN_TABLE_SZ=3\nWORK_UNIT=1024\nREDO_STRESS=HEAVY\nLOAD_PARALLEL_DEGREE=1024\n\
         THREADS_PER_SCHEMA=1024\nDO_HOTSPOT=FALSE\nHOTSPOT_MB=0\nHOTSPOT_OFFSET_MB=0\n\
         HOTSPOT_FREQUENCY=0\nHOT_SCHEMA_FREQUENCY=4\nTHINK_TM_FREQUENCY=13\n\
         THINK_TM_MIN=0\nTHINK_TM_MAX=3600\nOBFUSCATE_COLUMNS=false\n",
    );
    assert_eq!(
        c,
        SlobConf {
            update_pct: 100,
            scan_pct: 0,
            run_time_s: 1,
            work_loop: 1000,
            scale: Amount::Blocks(20_000),
            scan_table_sz: Amount::Blocks(3),
            work_unit: 1024,
            redo_stress: RedoStress::Heavy,
            load_parallel_degree: 1024,
            threads_per_schema: 1024,
            do_hotspot: false,
            hotspot_mb: 0,
            hotspot_offset_mb: 0,
            hotspot_frequency: 0,
            hot_schema_frequency: 4,
            think_tm_frequency: 13,
            think_tm_min_s: 0.0,
            think_tm_max_s: 3600.0,
            obfuscate_columns: false,
        }
    );
}

#[test]
fn sizes_take_blocks_or_binary_suffixes() {
    let scale = |v: &str| conf(&format!("SCALE={v}\n")).scale;
    assert_eq!(scale("10000"), Amount::Blocks(10_000));
    assert_eq!(scale("512K"), Amount::Bytes(512 << 10));
    assert_eq!(scale("512M"), Amount::Bytes(512 << 20));
    assert_eq!(scale("8192M"), Amount::Bytes(8192 << 20));
    assert_eq!(scale("75G"), Amount::Bytes(75 << 30));
    assert_eq!(scale("2T"), Amount::Bytes(2 << 40));
    assert_eq!(scale("1g"), Amount::Bytes(1 << 30), "suffix in lower case");
    assert_eq!(scale("1G").blocks(8192), 131_072);
    // Bytes that are not whole blocks round up.
    assert_eq!(scale("12K").blocks(8192), 2);
}

#[test]
fn think_time_takes_fractions_as_slob_writes_them() {
    let min = |v: &str| conf(&format!("THINK_TM_MIN={v}\nTHINK_TM_MAX=100\n")).think_tm_min_s;
    assert_eq!(min(".1"), 0.1);
    assert_eq!(min("0.1"), 0.1);
    assert_eq!(min("2"), 2.0);
    assert_eq!(min("2."), 2.0);
    assert_eq!(min("0"), 0.0);
}

#[test]
fn booleans_are_true_or_false_in_any_case() {
    for (v, want) in [
        ("TRUE", true),
        ("true", true),
        ("True", true),
        ("FALSE", false),
        ("false", false),
    ] {
        assert_eq!(
            conf(&format!("OBFUSCATE_COLUMNS={v}\n")).obfuscate_columns,
            want,
            "{v}"
        );
    }
    for v in ["1", "0", "YES", "no", "T", ""] {
        assert_error(
            &format!("OBFUSCATE_COLUMNS={v}\n"),
            1,
            &["OBFUSCATE_COLUMNS", "expected TRUE or FALSE"],
        );
    }
}

#[test]
fn redo_stress_is_lite_or_heavy() {
    assert_eq!(conf("REDO_STRESS=lite\n").redo_stress, RedoStress::Lite);
    assert_eq!(conf("REDO_STRESS=Heavy\n").redo_stress, RedoStress::Heavy);
    assert_error(
        "REDO_STRESS=MEDIUM\n",
        1,
        &["REDO_STRESS=MEDIUM: expected LITE or HEAVY"],
    );
}

/// SLOB refuses UPDATE_PCT 51–99; Cairn runs it as the literal percentage.
#[test]
fn update_pct_between_51_and_99_is_accepted() {
    assert_eq!(conf("UPDATE_PCT=75\n").update_pct, 75);
    assert_eq!(conf("UPDATE_PCT=99\n").update_pct, 99);
}

// ------------------------------------------------------ quoting, comments

#[test]
fn values_can_be_quoted_either_way() {
    let p = parse("UPDATE_PCT=\"30\"\nSCAN_PCT='20'\nSCALE=\"5\"'12'M\n");
    assert_eq!((p.conf.update_pct, p.conf.scan_pct), (30, 20));
    assert_eq!(
        p.conf.scale,
        Amount::Bytes(512 * MIB),
        "adjacent quoted parts join"
    );
}

#[test]
fn quoted_values_keep_spaces_hashes_and_dollars_literally() {
    let p = parse(
        "SYSDBA_PASSWD='a $HOME; b'  # single quotes take everything\n\
         DBA_PRIV_USER=\"x # y\"\n\
         EXTERNAL_SCRIPT=\"say \\\"hi\\\" \\$5\"\n\
         AWR_SRC=cost$\n\
         ADMIN_SQLNET_SERVICE=a#b\n",
    );
    assert_eq!(p.ignored.len(), 5);
}

#[test]
fn trailing_comments_and_blanks_are_dropped() {
    let c = conf(
        "DO_HOTSPOT=TRUE   # Permitted VALUES: [TRUE|FALSE]\nWORK_UNIT=64\t#tab\n  RUN_TIME=60  \n",
    );
    assert!(c.do_hotspot);
    assert_eq!((c.work_unit, c.run_time_s), (64, 60));
}

#[test]
fn the_published_statistics_line_with_its_comment_is_ignored() {
    let p = parse("DATABASE_STATISTICS_TYPE=awr   # Permitted VALUES: [statspack|awr]\n");
    assert_eq!(ignored_keys(&p), vec![("DATABASE_STATISTICS_TYPE", 1)]);
}

#[test]
fn export_lines_are_accepted() {
    let p = parse("export UPDATE_PCT\nUPDATE_PCT=40\nexport SCAN_PCT RUN_TIME   # comment\n\texport  WORK_UNIT=8 SCALE\n");
    assert_eq!(p.conf.update_pct, 40);
    assert_eq!(p.conf.work_unit, 8, "export KEY=value assigns");
    assert_eq!(p.conf.scan_pct, 0, "a bare export changes nothing");
}

#[test]
fn export_errors() {
    assert_error("export\n", 1, &["export names no key"]);
    assert_error("export # nothing\n", 1, &["export names no key"]);
    assert_error(
        "export -n UPDATE_PCT\n",
        1,
        &["export: expected a key name", "-n UPDATE_PCT"],
    );
    assert_error(
        "export UPDATE_PCT;\n",
        1,
        &["export: unexpected \";\" after UPDATE_PCT"],
    );
    assert_error("export FOO\n", 1, &["unknown key FOO"]);
    assert_error(
        "export WORK_UNIT=$X\n",
        1,
        &["WORK_UNIT", "shell expansion"],
    );
}

#[test]
fn a_byte_order_mark_is_skipped() {
    assert_eq!(conf("\u{feff}UPDATE_PCT=7\n").update_pct, 7);
}

#[test]
fn no_final_newline_is_fine() {
    assert_eq!(conf("UPDATE_PCT=7").update_pct, 7);
}

#[test]
fn a_key_given_twice_takes_the_last_value_and_is_reported() {
    let p = parse("UPDATE_PCT=10\nSCAN_PCT=1\nUPDATE_PCT=20\nUPDATE_PCT=30\nSYSDBA_PASSWD=a\nSYSDBA_PASSWD=b\n");
    assert_eq!(p.conf.update_pct, 30);
    assert_eq!(
        p.overridden,
        vec![
            ("UPDATE_PCT".to_string(), 1),
            ("UPDATE_PCT".to_string(), 3),
            ("SYSDBA_PASSWD".to_string(), 5)
        ]
    );
    assert_eq!(ignored_keys(&p), vec![("SYSDBA_PASSWD", 6)]);
}

#[test]
fn a_bad_value_replaced_by_a_later_line_is_no_error() {
    // As in a shell, only the last assignment counts.
    assert_eq!(conf("UPDATE_PCT=abc\nUPDATE_PCT=5\n").update_pct, 5);
    assert_error("UPDATE_PCT=5\nUPDATE_PCT=abc\n", 2, &["UPDATE_PCT=abc"]);
}

// ----------------------------------------------------------- line errors

#[test]
fn a_line_that_is_not_an_assignment_is_an_error() {
    for (text, found) in [
        ("if [ -z \"$X\" ]; then\n", "if [ -z"),
        ("fi\n", "fi"),
        ("source other.conf\n", "source other.conf"),
        ("=5\n", "=5"),
        ("1KEY=5\n", "1KEY=5"),
        ("UPDATE_PCT\n", "UPDATE_PCT"),
    ] {
        assert_error(
            &format!("UPDATE_PCT=1\n{text}"),
            2,
            &[
                "expected KEY=value, export KEY, a # comment or a blank line",
                found,
            ],
        );
    }
}

#[test]
fn spaces_around_equals_are_an_error() {
    assert_error(
        "\nUPDATE_PCT = 25\n",
        2,
        &["no spaces are allowed before '='", "UPDATE_PCT=value"],
    );
    assert_error(
        "UPDATE_PCT= 25\n",
        1,
        &["unexpected \"25\" after the value of UPDATE_PCT"],
    );
}

#[test]
fn expansion_is_an_error() {
    assert_error(
        "RUN_TIME=$(cat t)\n",
        1,
        &[
            "RUN_TIME: $(…) is shell expansion",
            "write the value itself",
        ],
    );
    assert_error("RUN_TIME=$T\n", 1, &["RUN_TIME: $… is shell expansion"]);
    assert_error("RUN_TIME=${T:-5}\n", 1, &["shell expansion"]);
    assert_error("RUN_TIME=\"$T\"\n", 1, &["shell expansion"]);
    assert_error("RUN_TIME=`cat t`\n", 1, &["`…` is shell expansion"]);
    assert_error("RUN_TIME=\"`cat t`\"\n", 1, &["`…` is shell expansion"]);
}

#[test]
fn shell_operators_and_continuations_are_errors() {
    assert_error("UPDATE_PCT=1; SCAN_PCT=2\n", 1, &["shell operator ';'"]);
    assert_error("UPDATE_PCT=1 && echo\n", 1, &["shell operator '&'"]);
    assert_error("UPDATE_PCT=(1)\n", 1, &["shell operator '('"]);
    assert_error(
        "UPDATE_PCT=1 SCAN_PCT=2\n",
        1,
        &["unexpected \"SCAN_PCT=2\" after the value of UPDATE_PCT"],
    );
    assert_error(
        "SYSDBA_PASSWD=a b\n",
        1,
        &["quote a value that holds spaces"],
    );
    assert_error("UPDATE_PCT=1\\\n", 1, &["continues it in a shell"]);
}

#[test]
fn unterminated_quotes_are_errors() {
    assert_error(
        "\n\nSYSDBA_PASSWD=\"abc\n",
        3,
        &["SYSDBA_PASSWD: unterminated \" quote"],
    );
    assert_error(
        "SYSDBA_PASSWD='abc\n",
        1,
        &["SYSDBA_PASSWD: unterminated ' quote"],
    );
}

#[test]
fn unknown_keys_are_errors_naming_the_keys() {
    assert_error(
        "UPDATE_PCT=1\nFOO=2\n",
        2,
        &[
            "unknown key FOO",
            "slob.conf keys are UPDATE_PCT, SCAN_PCT,",
            "OBFUSCATE_COLUMNS",
            "see docs/slob-conf.md",
        ],
    );
    assert_error(
        "update_pct=1\n",
        1,
        &["unknown key update_pct", "did you mean UPDATE_PCT?"],
    );
    // An unknown key is found before any value is checked.
    assert_error("UPDATE_PCT=abc\nFOO=2\n", 2, &["unknown key FOO"]);
}

#[test]
fn unknown_key_message_is_one_line_and_shows_control_characters_escaped() {
    let e = error("K\u{7}EY=1\n");
    assert_eq!(e.line, 1);
    assert!(!e.to_string().contains('\u{7}'), "{e}");
}

// ------------------------------------------------------ value errors

#[test]
fn numbers_must_be_numbers() {
    assert_error(
        "UPDATE_PCT=abc\n",
        1,
        &["UPDATE_PCT=abc: expected a whole number from 0 to 100"],
    );
    assert_error(
        "\nUPDATE_PCT=\n",
        2,
        &["UPDATE_PCT is empty: expected a whole number from 0 to 100"],
    );
    assert_error("UPDATE_PCT=\"\"\n", 1, &["UPDATE_PCT is empty"]);
    assert_error("UPDATE_PCT=-1\n", 1, &["UPDATE_PCT=-1: expected"]);
    assert_error("UPDATE_PCT=+1\n", 1, &["UPDATE_PCT=+1: expected"]);
    assert_error("UPDATE_PCT=2.5\n", 1, &["UPDATE_PCT=2.5: expected"]);
    assert_error("UPDATE_PCT=' 5'\n", 1, &["UPDATE_PCT= 5: expected"]);
    assert_error(
        "RUN_TIME=10s\n",
        1,
        &["RUN_TIME=10s: expected a whole number of seconds"],
    );
    assert_error(
        "WORK_LOOP=1e3\n",
        1,
        &["WORK_LOOP=1e3: expected a whole number of loop iterations"],
    );
    assert_error(
        "HOTSPOT_MB=8M\n",
        1,
        &["HOTSPOT_MB=8M: expected a whole number of MiB"],
    );
    assert_error(
        "THINK_TM_FREQUENCY=x\n",
        1,
        &["THINK_TM_FREQUENCY=x: expected a whole number (0 = off)"],
    );
}

#[test]
fn numbers_too_large_for_their_key_say_so() {
    assert_error(
        "WORK_LOOP=99999999999999999999999\n",
        1,
        &["WORK_LOOP=99999999999999999999999: too large"],
    );
    assert_error(
        "UPDATE_PCT=4294967296\n",
        1,
        &["UPDATE_PCT=4294967296: too large"],
    );
    assert_error(
        "HOTSPOT_FREQUENCY=4294967296\n",
        1,
        &["HOTSPOT_FREQUENCY=4294967296: too large"],
    );
    assert_error("SCALE=20000000T\n", 1, &["SCALE=20000000T: too large"]);
    assert_error(
        "SCALE=99999999999999999999999\n",
        1,
        &["SCALE=99999999999999999999999: too large"],
    );
}

#[test]
fn long_values_are_cut_in_messages() {
    let e = error(&format!("UPDATE_PCT={}\n", "x".repeat(500)));
    assert!(e.message.len() < 200, "{e}");
    assert!(e.message.contains('…'), "{e}");
}

#[test]
fn sizes_must_be_sizes() {
    for v in ["", "M", "12X", "1.5G", "-5", "5 M", "0", "0M", "1MB"] {
        assert_error(
            &format!("SCALE='{v}'\n"),
            1,
            &["SCALE", "expected a number of blocks"],
        );
    }
    assert_error(
        "SCAN_TABLE_SZ=0\n",
        1,
        &["SCAN_TABLE_SZ=0: expected", "at least 1"],
    );
}

#[test]
fn think_times_must_be_plain_decimals() {
    for v in ["", ".", "-.1", "1e2", "1..2", "0.1.2", "abc", "inf", "NaN"] {
        assert_error(
            &format!("THINK_TM_MIN='{v}'\n"),
            1,
            &["THINK_TM_MIN", "expected seconds from 0 to 3600"],
        );
    }
    assert_error(
        "THINK_TM_MAX=3600.5\n",
        1,
        &["THINK_TM_MAX=3600.5: expected seconds from 0 to 3600"],
    );
}

#[test]
fn percentages_range_from_0_to_100() {
    assert_error(
        "UPDATE_PCT=101\n",
        1,
        &["UPDATE_PCT=101: expected a whole number from 0 to 100"],
    );
    assert_error(
        "\nSCAN_PCT=150\n",
        2,
        &["SCAN_PCT=150: expected a whole number from 0 to 100"],
    );
}

#[test]
fn percentages_together_at_most_100_reported_at_the_later_key() {
    assert_error(
        "SCAN_PCT=50\n# x\nUPDATE_PCT=60\n",
        3,
        &["UPDATE_PCT=60 and SCAN_PCT=50 add up to 110", "at most 100"],
    );
    assert_error("UPDATE_PCT=60\nSCAN_PCT=50\n", 2, &["add up to 110"]);
    // With SCAN_PCT left at 0 the sum is UPDATE_PCT, always fine.
    assert_eq!(conf("UPDATE_PCT=100\n").update_pct, 100);
    assert_eq!(conf("UPDATE_PCT=40\nSCAN_PCT=60\n").scan_pct, 60);
}

#[test]
fn work_unit_ranges_from_3_to_1024() {
    assert_error(
        "WORK_UNIT=2\n",
        1,
        &["WORK_UNIT=2: expected a whole number from 3 to 1024"],
    );
    assert_error(
        "WORK_UNIT=1025\n",
        1,
        &["WORK_UNIT=1025: expected a whole number from 3 to 1024"],
    );
    assert_eq!(conf("WORK_UNIT=3\n").work_unit, 3);
}

#[test]
fn run_time_needs_a_second_unless_work_loop_bounds_the_run() {
    assert_error(
        "RUN_TIME=0\n",
        1,
        &["RUN_TIME=0 with WORK_LOOP=0 would run nothing"],
    );
    assert_error(
        "RUN_TIME=0\nWORK_LOOP=0\n",
        2,
        &["RUN_TIME=0 with WORK_LOOP=0"],
    );
    let c = conf("RUN_TIME=0\nWORK_LOOP=500\n");
    assert_eq!((c.run_time_s, c.work_loop), (0, 500));
    assert_error(
        "RUN_TIME=31536001\n",
        1,
        &["RUN_TIME=31536001: expected a whole number of seconds from 0 to 31536000"],
    );
}

#[test]
fn thread_and_loader_counts_range_from_1_to_1024() {
    assert_error(
        "THREADS_PER_SCHEMA=0\n",
        1,
        &["THREADS_PER_SCHEMA=0: expected a whole number from 1 to 1024"],
    );
    assert_error("THREADS_PER_SCHEMA=1025\n", 1, &["THREADS_PER_SCHEMA=1025"]);
    assert_error(
        "LOAD_PARALLEL_DEGREE=0\n",
        1,
        &["LOAD_PARALLEL_DEGREE=0: expected a whole number from 1 to 1024"],
    );
    assert_error(
        "LOAD_PARALLEL_DEGREE=2000\n",
        1,
        &["LOAD_PARALLEL_DEGREE=2000"],
    );
}

#[test]
fn hot_spot_needs_a_size_and_a_frequency_when_on() {
    assert_error(
        "DO_HOTSPOT=TRUE\nHOTSPOT_FREQUENCY=0\n",
        2,
        &["HOTSPOT_FREQUENCY=0 with DO_HOTSPOT=TRUE", "N >= 1"],
    );
    assert_error(
        "HOTSPOT_FREQUENCY=0\nDO_HOTSPOT=TRUE\n",
        2,
        &["HOTSPOT_FREQUENCY=0 with DO_HOTSPOT=TRUE"],
    );
    assert_error(
        "HOTSPOT_MB=0\nDO_HOTSPOT=true\n",
        2,
        &["HOTSPOT_MB=0 with DO_HOTSPOT=TRUE"],
    );
    // Off, the hot-spot settings are not used and 0 is SLOB's own fallback.
    let c = conf("DO_HOTSPOT=FALSE\nHOTSPOT_FREQUENCY=0\nHOTSPOT_MB=0\n");
    assert_eq!((c.hotspot_frequency, c.hotspot_mb), (0, 0));
    assert_error(
        "HOTSPOT_MB=1099511627777\n",
        1,
        &["HOTSPOT_MB=1099511627777: expected a whole number of MiB"],
    );
    assert_error(
        "HOTSPOT_OFFSET_MB=1099511627777\n",
        1,
        &["HOTSPOT_OFFSET_MB=1099511627777"],
    );
}

#[test]
fn think_time_min_at_most_max() {
    assert_error(
        "THINK_TM_MIN=.6\nTHINK_TM_MAX=.5\n",
        2,
        &["THINK_TM_MIN=0.6 is more than THINK_TM_MAX=0.5"],
    );
    assert_error(
        "THINK_TM_MIN=1\n",
        1,
        &["THINK_TM_MIN=1 is more than THINK_TM_MAX=0.5"],
    );
    assert_eq!(conf("THINK_TM_MIN=.5\n").think_tm_min_s, 0.5);
}

#[test]
fn the_first_problem_in_the_file_is_reported() {
    // Value problems come in file order, whatever the key order in SlobConf.
    assert_error(
        "THREADS_PER_SCHEMA=0\nUPDATE_PCT=101\n",
        1,
        &["THREADS_PER_SCHEMA=0"],
    );
    assert_error("WORK_UNIT=abc\nUPDATE_PCT=xyz\n", 1, &["WORK_UNIT=abc"]);
}

#[test]
fn validate_checks_settings_changed_after_parsing() {
    let mut c = conf("THREADS_PER_SCHEMA=4\n");
    c.validate().unwrap();
    c.threads_per_schema = 0;
    let e = c.validate().unwrap_err();
    assert!(e.starts_with("THREADS_PER_SCHEMA=0: expected"), "{e}");
    c.threads_per_schema = 2;
    c.update_pct = 80;
    c.scan_pct = 30;
    assert!(c.validate().unwrap_err().contains("add up to 110"));
}

// ------------------------------------------------------- ignored keys

#[test]
fn oracle_only_keys_are_ignored_with_their_lines() {
    let keys = [
        "SYSDBA_PASSWD",
        "DBA_PRIV_USER",
        "ADMIN_SQLNET_SERVICE",
        "SQLNET_SERVICE_BASE",
        "SQLNET_SERVICE_MAX",
        "ADMIN_CONNECT_STRING",
        "NON_ADMIN_CONNECT_STRING",
        "DATABASE_STATISTICS_TYPE",
        "AWR_SRC",
        "EXTERNAL_SCRIPT",
        "BLOCK_SZ",
        "UNIQUE_INDEX",
    ];
    let text: String = keys
        .iter()
        .map(|k| format!("{k}=\"whatever it is\"\n"))
        .collect();
    let p = parse(&format!("# header\n{text}"));
    let want: Vec<(&str, usize)> = keys.iter().enumerate().map(|(i, k)| (*k, i + 2)).collect();
    assert_eq!(ignored_keys(&p), want);
    assert_eq!(p.conf, SlobConf::default());
    for k in keys {
        assert!(ignored_reason(k).is_some(), "{k} has no reason");
    }
    assert_eq!(ignored_reason("UPDATE_PCT"), None);
    assert_eq!(ignored_reason("FOO"), None);
}

#[test]
fn slob_2_2_workload_keys_are_ignored_only_when_inert() {
    let p = parse(
        "DO_UPDATE_HOTSPOT=FALSE\nHOTSPOT_PCT=10\nTHINK_TM_MODULUS=0\nSHARED_DATA_MODULUS=0\n",
    );
    assert_eq!(
        ignored_keys(&p),
        vec![
            ("DO_UPDATE_HOTSPOT", 1),
            ("HOTSPOT_PCT", 2),
            ("THINK_TM_MODULUS", 3),
            ("SHARED_DATA_MODULUS", 4)
        ]
    );
    assert_eq!(p.conf, SlobConf::default());
    assert_error(
        "\nDO_UPDATE_HOTSPOT=TRUE\n",
        2,
        &[
            "DO_UPDATE_HOTSPOT=TRUE: a SLOB 2.2 setting Cairn does not implement",
            "DO_HOTSPOT",
        ],
    );
    assert_error(
        "THINK_TM_MODULUS=7\n",
        1,
        &["THINK_TM_MODULUS=7", "rename it"],
    );
    assert_error(
        "SHARED_DATA_MODULUS=3\n",
        1,
        &["SHARED_DATA_MODULUS=3", "set it to 0"],
    );
    assert_eq!(RETIRED_KEYS.len(), 4);
}

#[test]
fn key_lists_do_not_overlap() {
    let mut all: Vec<&str> = SETTING_KEYS.to_vec();
    all.extend(IGNORED_KEYS.iter().map(|(k, _)| *k));
    all.extend(RETIRED_KEYS.iter().map(|(k, _, _)| *k));
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a key in two lists");
}

// ------------------------------------------------------------- files

#[test]
fn a_missing_file_is_an_error_at_line_0_naming_it() {
    let path = data("no-such-slob.conf");
    let e = parse_conf_file(&path).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.message.contains(&path.display().to_string()), "{e}");
    assert!(e.message.contains("No such file"), "{e}");
}

#[test]
fn a_directory_is_an_error_at_line_0() {
    let dir = tempfile::tempdir().unwrap();
    let e = parse_conf_file(dir.path()).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.message.starts_with("cannot read"), "{e}");
}

#[test]
fn a_file_that_is_not_text_is_an_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slob.conf");
    std::fs::write(&path, b"UPDATE_PCT=1\nSCAN_PCT=\xff\n").unwrap();
    let e = parse_conf_file(&path).unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("not UTF-8"), "{e}");
}

#[test]
fn a_huge_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slob.conf");
    std::fs::write(&path, "#".repeat(2 << 20)).unwrap();
    let e = parse_conf_file(&path).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.message.contains("check the path"), "{e}");
}

// --------------------------------------------------------- check_scale

#[test]
fn scale_must_hold_one_work_unit() {
    let c = conf("SCALE=100\nWORK_UNIT=256\n");
    let e = c.check_scale(8192).unwrap_err().to_string();
    assert!(
        e.contains("SCALE=100 is 100 blocks of 8192 bytes, fewer than WORK_UNIT=256"),
        "{e}"
    );
    assert!(e.contains("at least 256 blocks (2097152 bytes)"), "{e}");
    conf("SCALE=256\nWORK_UNIT=256\n")
        .check_scale(8192)
        .unwrap();
    // 1M is 128 blocks of 8 KiB but 32 blocks of 32 KiB.
    let c = conf("SCALE=1M\nWORK_UNIT=64\n");
    c.check_scale(8192).unwrap();
    assert!(c.check_scale(32768).is_err());
}

#[test]
fn hot_spot_must_lie_inside_scale() {
    let c = conf("SCALE=16M\nDO_HOTSPOT=TRUE\nHOTSPOT_MB=8\nHOTSPOT_OFFSET_MB=16\nWORK_UNIT=8\n");
    let e = c.check_scale(8192).unwrap_err().to_string();
    assert!(e.contains("HOTSPOT_OFFSET_MB=16 + HOTSPOT_MB=8 = 24 MiB reaches beyond SCALE=16M (16 MiB per schema)"), "{e}");
    conf("SCALE=24M\nDO_HOTSPOT=TRUE\nWORK_UNIT=8\n")
        .check_scale(8192)
        .unwrap();
    // Off, the hot spot is not checked.
    conf("SCALE=16M\nWORK_UNIT=8\n").check_scale(8192).unwrap();
}

#[test]
fn scale_bytes_must_fit_64_bits() {
    let c = conf("SCALE=18446744073709551615\nWORK_UNIT=8\n");
    assert!(c
        .check_scale(8192)
        .unwrap_err()
        .to_string()
        .contains("lower SCALE"));
    let c = conf("SCAN_TABLE_SZ=18446744073709551615\n");
    assert!(c
        .check_scale(8192)
        .unwrap_err()
        .to_string()
        .contains("lower SCAN_TABLE_SZ"));
    assert!(SlobConf::default().check_scale(0).is_err());
}

// ------------------------------------------------------------ effective

#[test]
fn effective_lists_every_setting_in_order() {
    let eff = SlobConf::default().effective();
    let keys: Vec<&str> = eff.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, SETTING_KEYS);
    let get = |k: &str| eff.iter().find(|(key, _)| key == k).unwrap().1.clone();
    assert_eq!(get("SCALE"), "10000");
    assert_eq!(get("SCAN_TABLE_SZ"), "1M");
    assert_eq!(get("REDO_STRESS"), "LITE");
    assert_eq!(get("DO_HOTSPOT"), "FALSE");
    assert_eq!(get("THINK_TM_MIN"), "0.1");
    assert_eq!(get("WORK_UNIT"), "256");
}

fn write_back(c: &SlobConf) -> String {
    c.effective()
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

#[test]
fn effective_round_trips_the_published_files() {
    for name in ["virtualbox.conf", "aws.conf", "forms.conf"] {
        let c = parse_conf_file(&data(name)).unwrap().conf;
        assert_eq!(conf(&write_back(&c)), c, "{name}");
    }
}

#[test]
fn amounts_display_with_the_largest_exact_suffix() {
    assert_eq!(Amount::Bytes(512 << 20).to_string(), "512M");
    assert_eq!(Amount::Bytes(8192 << 20).to_string(), "8G");
    assert_eq!(Amount::Bytes(3 << 40).to_string(), "3T");
    assert_eq!(Amount::Bytes(1536 << 10).to_string(), "1536K");
    assert_eq!(
        Amount::Bytes(1000).to_string(),
        "1K",
        "rounded up to whole KiB"
    );
    assert_eq!(Amount::Blocks(42).to_string(), "42");
}

fn arb_amount() -> impl Strategy<Value = Amount> {
    prop_oneof![
        (1u64..=u64::MAX).prop_map(Amount::Blocks),
        (1u64..=(u64::MAX >> 10)).prop_map(|k| Amount::Bytes(k << 10)),
        (1u64..=4096).prop_map(|m| Amount::Bytes(m << 20)),
        (1u64..=64).prop_map(|g| Amount::Bytes(g << 30)),
    ]
}

/// Seconds as a user writes them: a few decimals, from 0 to 3600.
fn arb_seconds() -> impl Strategy<Value = f64> {
    prop_oneof![
        (0u32..=3600).prop_map(f64::from),
        (0u32..=36_000_000)
            .prop_map(|n| format!("{}.{:04}", n / 10_000, n % 10_000).parse().unwrap()),
        0.0f64..=3600.0,
    ]
}

prop_compose! {
    fn arb_conf()(
        pcts in (0u32..=100).prop_flat_map(|u| (Just(u), 0..=100 - u)),
        run_time_s in 1u64..=31_536_000,
        work_loop in any::<u64>(),
        scale in arb_amount(),
        scan_table_sz in arb_amount(),
        work_unit in 3u32..=1024,
        heavy in any::<bool>(),
        load_parallel_degree in 1u32..=1024,
        threads_per_schema in 1u32..=1024,
        do_hotspot in any::<bool>(),
        hotspot_mb in 1u64..=(1 << 40),
        hotspot_offset_mb in 0u64..=(1 << 40),
        hotspot_frequency in 1u32..=u32::MAX,
        hot_schema_frequency in any::<u32>(),
        think_tm_frequency in any::<u32>(),
        think in (arb_seconds(), arb_seconds()),
        obfuscate_columns in any::<bool>(),
    ) -> SlobConf {
        SlobConf {
            update_pct: pcts.0,
            scan_pct: pcts.1,
            run_time_s,
            work_loop,
            scale,
            scan_table_sz,
            work_unit,
            redo_stress: if heavy { RedoStress::Heavy } else { RedoStress::Lite },
            load_parallel_degree,
            threads_per_schema,
            do_hotspot,
            hotspot_mb,
            hotspot_offset_mb,
            hotspot_frequency,
            hot_schema_frequency,
            think_tm_frequency,
            think_tm_min_s: think.0.min(think.1),
            think_tm_max_s: think.0.max(think.1),
            obfuscate_columns,
        }
    }
}

proptest! {
    #[test]
    fn effective_written_back_parses_to_the_same_conf(c in arb_conf()) {
        c.validate().unwrap();
        let text = write_back(&c);
        let back = parse_conf_str(&text, "effective.conf").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back.conf, c);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse_conf_str(&text, "fuzz.conf") {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }

    /// Text made of slob.conf's own pieces reaches deeper than random bytes.
    #[test]
    fn random_slob_like_text_never_panics(
        lines in proptest::collection::vec(
            (
                prop::sample::select(vec![
                    "UPDATE_PCT", "SCAN_PCT", "RUN_TIME", "WORK_LOOP", "SCALE", "WORK_UNIT",
                    "DO_HOTSPOT", "HOTSPOT_FREQUENCY", "THINK_TM_MIN", "THINK_TM_MAX",
                    "SYSDBA_PASSWD", "DO_UPDATE_HOTSPOT", "export UPDATE_PCT", "FOO", "",
                ]),
                "[ =\"'#$`;.0-9MGTKa-zA-Z\\\\\t\r]{0,12}",
            ),
            0..12,
        )
    ) {
        let text: String = lines.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        match parse_conf_str(&text, "fuzz.conf") {
            Ok(p) => {
                p.conf.validate().unwrap();
                prop_assert!(p.ignored.iter().all(|(_, l)| *l >= 1 && *l <= lines.len()));
            }
            Err(e) => {
                prop_assert!(!e.to_string().contains('\n'));
                prop_assert!(e.line >= 1 && e.line <= lines.len() + 1, "{}", e);
            }
        }
    }
}
