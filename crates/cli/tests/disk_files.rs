//! End to end on sparse files: the real binary, no root needed. A tool that
//! is missing or fails (mkfs, sgdisk…) skips its case, out loud; under
//! CAIRN_REQUIRE_TOOLS (CI) it fails the test.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cairn_io::test_support::prerequisite;
use common::*;

const MIB: u64 = 1 << 20;

fn glob_of(dir: &Path) -> String {
    format!("{}/*", dir.display())
}

#[test]
fn label_list_inspect_wipe_and_repair_a_sparse_file() {
    let dir = scratch();
    let disk = sparse(&dir.path().join("disk1.img"), 256 * MIB);
    let d = glob_of(dir.path());
    let path = disk.to_str().unwrap();

    let label = cairn(&d, &["disk", "label", "data1", path, "--json"])
        .ok()
        .json();
    assert_eq!(label["label"], "DATA1");
    assert_eq!(
        label["copy_offsets_bytes"],
        serde_json::json!([0, MIB, 255 * MIB])
    );
    // A label on a thin LUN allocates almost nothing: three 4 KiB blocks.
    assert!(
        allocated(&disk) <= 64 * 1024,
        "allocated {}",
        allocated(&disk)
    );

    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    let e = entry(&list, &disk);
    assert_eq!(
        (
            e["status"].as_str(),
            e["header"].as_str(),
            e["label"].as_str()
        ),
        (Some("PROVISIONED"), Some("ok"), Some("DATA1"))
    );

    let inspect = cairn(&d, &["disk", "inspect", path, "--json"]).ok().json();
    assert_eq!(inspect["valid"], true);
    let field = |name: &str| {
        inspect["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(field("label")["value"], "\"DATA1\"");
    assert_eq!(field("label")["offset"], 0x80);
    assert_eq!(field("disk_uuid")["value"], label["disk_uuid"]);
    assert_eq!(inspect["block_hex"].as_str().unwrap().len(), 8192);
    let text = cairn(&d, &["disk", "inspect", path, "--copy", "2"])
        .ok()
        .stdout;
    assert!(
        text.contains("dskhdr.magic") && text.contains("0x000") && text.contains("CAIRNDSK"),
        "{text}"
    );

    // The ASMFD post's accident: dd if=/dev/zero bs=4k count=1024 over the disk.
    write_at(&disk, 0, &vec![0u8; 4 * MIB as usize]);
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    let e = entry(&list, &disk);
    assert_eq!(e["header"], "damaged");
    assert_eq!(e["status"], "PROVISIONED", "still known by its tail copy");
    assert!(e["copies"][0].as_str().unwrap().contains("blank"), "{e:#}");
    let text = cairn(&d, &["disk", "list"]).ok().stdout;
    assert!(
        text.contains("damaged") && text.contains("cairn disk repair"),
        "{text}"
    );
    cairn(&d, &["disk", "inspect", path]).refused("not a valid Cairn header");

    let before = digest(&disk);
    let dry = cairn(&d, &["disk", "repair", path, "--dry-run", "--json"])
        .ok()
        .json();
    assert_eq!(dry["rewrites"].as_array().unwrap().len(), 2);
    assert_eq!(digest(&disk), before, "--dry-run writes nothing");

    let repaired = cairn(&d, &["disk", "repair", path, "--json"]).ok().json();
    assert_eq!(repaired["source_copy"], 2);
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    assert_eq!(entry(&list, &disk)["header"], "ok");
    assert_eq!(entry(&list, &disk)["disk_uuid"], label["disk_uuid"]);
    let again = cairn(&d, &["disk", "repair", path]).ok().stdout;
    assert!(again.contains("nothing to repair"), "{again}");
}

#[test]
fn both_engines_label_the_same_way() {
    let dir = scratch();
    let d = glob_of(dir.path());
    for engine in ["uring", "sync"] {
        let disk = sparse(&dir.path().join(format!("{engine}.img")), 64 * MIB);
        let name = format!("E_{engine}");
        let out = cairn(
            &d,
            &[
                "--engine",
                engine,
                "disk",
                "label",
                &name,
                disk.to_str().unwrap(),
                "--json",
            ],
        )
        .ok()
        .json();
        assert_eq!(out["label"], name.to_uppercase());
        let inspect = cairn(
            &d,
            &[
                "--engine",
                engine,
                "disk",
                "inspect",
                disk.to_str().unwrap(),
                "--json",
            ],
        )
        .ok()
        .json();
        assert_eq!(inspect["valid"], true);
    }
}

#[test]
fn unlabel_removes_every_copy() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let path = disk.to_str().unwrap();
    cairn(&d, &["disk", "label", "gone", path]).ok();
    let out = cairn(&d, &["disk", "unlabel", path, "--json"]).ok().json();
    assert_eq!(out["erased_offsets"], serde_json::json!([0, MIB, 63 * MIB]));
    assert_eq!(
        digest(&disk),
        digest(&sparse(&dir.path().join("blank.cmp"), 64 * MIB)),
        "every copy zeroed"
    );
    std::fs::remove_file(dir.path().join("blank.cmp")).unwrap();
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    assert_eq!(entry(&list, &disk)["status"], "CANDIDATE");
    cairn(&d, &["disk", "unlabel", path]).refused("carries no Cairn label");
}

/// The refusals the issue names, each on a fresh file: the command exits 1 with
/// one line naming what it found, and the file is byte-for-byte unchanged.
#[test]
fn foreign_signatures_are_refused_and_nothing_is_written() {
    let dir = scratch();
    let d = glob_of(dir.path());
    type Maker = fn(&Path) -> Result<(), String>;
    let cases: &[(&str, u64, Maker, &str)] = &[
        (
            "ext4",
            64 * MIB,
            |p| {
                tool(
                    "mkfs.ext4",
                    &["-q", "-F", "-L", "home", p.to_str().unwrap()],
                )
            },
            "an ext4 filesystem labelled 'home'",
        ),
        (
            "swap",
            64 * MIB,
            |p| tool("mkswap", &[p.to_str().unwrap()]),
            "a swap area",
        ),
        (
            "gpt",
            64 * MIB,
            |p| tool("sgdisk", &["-n", "1:2048:+16M", p.to_str().unwrap()]),
            "a GPT partition table",
        ),
        (
            "xfs",
            512 * MIB,
            |p| tool("mkfs.xfs", &["-q", "-f", "-L", "logs", p.to_str().unwrap()]),
            "an xfs filesystem labelled 'logs'",
        ),
        (
            "btrfs",
            128 * MIB,
            |p| {
                tool(
                    "mkfs.btrfs",
                    &["-q", "-f", "-L", "pool", p.to_str().unwrap()],
                )
            },
            "a btrfs filesystem labelled 'pool'",
        ),
        (
            "asm-header",
            64 * MIB,
            |p| {
                write_at(p, 0, &asm_disk_header());
                Ok(())
            },
            "an Oracle ASM disk header (member, disk DATA_0000, disk group DATA)",
        ),
        (
            "asmlib-label",
            64 * MIB,
            |p| {
                // od -c of an AFD-labelled disk in the ASMFD post.
                write_at(p, 32, b"ORCLDISKV512DATA1");
                Ok(())
            },
            "an Oracle ASMLib/AFD label 'V512DATA1'",
        ),
    ];
    for (name, size, make, expected) in cases {
        let disk = sparse(&dir.path().join(format!("{name}.img")), *size);
        if let Err(reason) = make(&disk) {
            prerequisite::missing(&format!("{name}: {reason}"));
            continue;
        }
        let path = disk.to_str().unwrap();
        let before = digest(&disk);
        let run = cairn(&d, &["disk", "label", "x", path]);
        run.refused(expected).refused("--force");
        assert_eq!(
            digest(&disk),
            before,
            "{name}: refused, so not one byte written"
        );
        let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
        assert_eq!(entry(&list, &disk)["status"], "FOREIGN", "{name}");
        let forced = cairn(
            &d,
            &[
                "disk",
                "label",
                &format!("F_{}", name.replace('-', "_")),
                path,
                "--force",
                "--json",
            ],
        )
        .ok()
        .json();
        assert!(
            forced["overrode"][0]
                .as_str()
                .unwrap()
                .contains(expected.split(" (").next().unwrap()),
            "{forced:#}"
        );
        // --force erased what it overrode, wherever its magic was (btrfs at
        // 64 KiB, GPT's backup at the last LBA), not only under the header.
        let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
        let e = entry(&list, &disk);
        assert_eq!(
            (e["status"].as_str(), e["header"].as_str()),
            (Some("PROVISIONED"), Some("ok")),
            "{name}: {e:#}"
        );
        assert_eq!(
            e["foreign"],
            serde_json::json!([]),
            "{name}: nothing of the old owner is recognisable"
        );
        if let Some(types) = wipefs_types(&disk) {
            assert!(types.is_empty(), "{name}: wipefs still finds {types:?}");
        }
        assert_ne!(
            read_at(&disk, size - 512, 8),
            b"EFI PART",
            "{name}: no GPT backup header left"
        );
    }
}

/// The seed's damage (the ASMFD post: `dd if=/dev/zero bs=4k count=1024`,
/// then `echo CORRUPTION > disk`): bytes nobody recognises in copy 0's own
/// place, on a disk whose other good copies agree, are damage. `disk list`
/// says to repair, and `repair` restores the copy and says what it
/// overwrote. A recognised signature still needs --overwrite-foreign.
#[test]
fn repair_restores_unknown_bytes_in_a_copys_place_and_refuses_a_recognised_owner() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let path = disk.to_str().unwrap();
    cairn(&d, &["disk", "label", "data1", path]).ok();
    write_at(&disk, 0, &vec![0u8; 4 << 20]);
    write_at(&disk, 0, b"CORRUPTION\n");
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    let e = entry(&list, &disk);
    assert!(
        e["notes"].to_string().contains("cairn disk repair"),
        "{e:#}"
    );
    let run = cairn(&d, &["disk", "repair", path]).ok();
    assert!(
        run.stdout.contains("overwrote damage: copy 0's place (0) held bytes that are not Cairn's: \"CORRUPTION\\n\" then 4085 zero bytes"),
        "{}",
        run.stdout
    );
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    assert_eq!(entry(&list, &disk)["header"], "ok");

    // A filesystem only libblkid knows (the review's case): mkfs.minix over the disk.
    let other = sparse(&dir.path().join("m.img"), 64 * MIB);
    let other_path = other.to_str().unwrap();
    cairn(&d, &["disk", "label", "data2", other_path]).ok();
    if let Err(reason) = tool("mkfs.minix", &[other_path]) {
        prerequisite::missing(&format!("minix case: {reason}"));
        return;
    }
    let before = digest(&other);
    cairn(&d, &["disk", "repair", other_path, "--dry-run"]).refused("minix");
    cairn(&d, &["disk", "repair", other_path]).refused("minix");
    assert_eq!(digest(&other), before);
}

#[test]
fn relabel_and_unlabel_leave_no_stray_copy_after_the_device_grows() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let path = disk.to_str().unwrap();
    let old = cairn(&d, &["disk", "label", "old", path, "--json"])
        .ok()
        .json();
    // The LUN grows: the old tail copy stays at 63 MiB.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&disk)
        .unwrap()
        .set_len(128 * MIB)
        .unwrap();
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    assert_eq!(
        entry(&list, &disk)["header"],
        "ok",
        "the recorded tail copy is found after growth"
    );
    let new = cairn(&d, &["disk", "label", "new", path, "--force", "--json"])
        .ok()
        .json();
    assert_eq!(new["copy_offsets_bytes"][2], 127 * MIB);
    assert_ne!(
        read_at(&disk, 63 * MIB, 8),
        b"CAIRNDSK",
        "the old label's tail copy is erased"
    );
    cairn(&d, &["disk", "unlabel", path]).ok();
    // Shrink back: nothing of either label may come back.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&disk)
        .unwrap()
        .set_len(64 * MIB)
        .unwrap();
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    let e = entry(&list, &disk);
    assert_eq!(e["status"], "CANDIDATE", "{e:#}");
    assert_ne!(e["disk_uuid"], old["disk_uuid"]);
}

#[test]
fn unlabel_needs_force_for_a_header_it_cannot_read() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let path = disk.to_str().unwrap();
    cairn(&d, &["disk", "label", "data1", path]).ok();
    for offset in [0, MIB, 63 * MIB] {
        write_at(&disk, offset + 0x100, &[0xFF]);
    }
    let before = digest(&disk);
    cairn(&d, &["disk", "unlabel", path]).refused("cannot be checked; run again with --force");
    assert_eq!(digest(&disk), before);
    let out = cairn(&d, &["disk", "unlabel", path, "--force"]).ok();
    assert!(
        out.stdout.contains("removed a damaged Cairn header"),
        "{}",
        out.stdout
    );
}

#[test]
fn labelling_without_a_second_opinion_says_so() {
    let dir = scratch();
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["disk", "label", "data1", disk.to_str().unwrap()])
        .env("CAIRN_DISCOVER", glob_of(dir.path()))
        .env("CAIRN_CONFIG", "/nonexistent")
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("cairn: warning: wipefs could not run"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1);
}
#[test]
fn another_cairn_label_is_refused_without_force() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let path = disk.to_str().unwrap();
    let first = cairn(&d, &["disk", "label", "one", path, "--json"])
        .ok()
        .json();
    let before = digest(&disk);
    cairn(&d, &["disk", "label", "two", path]).refused("already labelled: Cairn disk ONE");
    assert_eq!(digest(&disk), before);
    let second = cairn(&d, &["disk", "label", "two", path, "--force", "--json"])
        .ok()
        .json();
    assert_ne!(
        first["disk_uuid"], second["disk_uuid"],
        "a relabel is a new disk"
    );
    // A relabel outranks the label it replaces, so a relabel cut short can never
    // lose to it: generation 2.
    let inspect = cairn(&d, &["disk", "inspect", path, "--json"]).ok().json();
    let generation = inspect["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "generation")
        .unwrap();
    assert_eq!(generation["value"], "2");
}

#[test]
fn a_label_already_used_in_the_discovery_string_is_refused() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let a = sparse(&dir.path().join("a.img"), 64 * MIB);
    let b = sparse(&dir.path().join("b.img"), 64 * MIB);
    cairn(&d, &["disk", "label", "data1", a.to_str().unwrap()]).ok();
    let before = digest(&b);
    cairn(&d, &["disk", "label", "DATA1", b.to_str().unwrap()])
        .refused("label DATA1 is already used by");
    assert_eq!(digest(&b), before);
    // Relabelling the same disk with its own name is not a duplicate.
    cairn(
        &d,
        &["disk", "label", "data1", a.to_str().unwrap(), "--force"],
    )
    .ok();
}

#[test]
fn one_disk_seen_by_two_paths_is_listed_once_and_a_clone_is_a_conflict() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("a.img"), 64 * MIB);
    cairn(&d, &["disk", "label", "data1", disk.to_str().unwrap()]).ok();
    std::os::unix::fs::symlink(&disk, dir.path().join("a-by-id")).unwrap();
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    assert_eq!(list["disks"].as_array().unwrap().len(), 1, "{list:#}");
    assert_eq!(
        entry(&list, &disk)["also_seen_at"][0],
        dir.path().join("a-by-id").display().to_string()
    );

    // A cloned LUN: the same bytes on another device.
    let clone = dir.path().join("clone.img");
    std::fs::copy(&disk, &clone).unwrap();
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    assert_eq!(list["disks"].as_array().unwrap().len(), 2);
    assert_eq!(
        entry(&list, &disk)["uuid_conflict_with"][0],
        clone.display().to_string()
    );
    assert_eq!(
        entry(&list, &clone)["uuid_conflict_with"][0],
        disk.display().to_string()
    );
    let text = cairn(&d, &["disk", "list"]).ok().stdout;
    assert!(text.contains("UUID CONFLICT"), "{text}");
}

#[test]
fn repair_refuses_copies_of_two_disks_until_forced() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let a = sparse(&dir.path().join("a.img"), 64 * MIB);
    let b = sparse(&dir.path().join("b.img"), 64 * MIB);
    cairn(&d, &["disk", "label", "aa", a.to_str().unwrap()]).ok();
    cairn(&d, &["disk", "label", "bb", b.to_str().unwrap()]).ok();
    // b's tail copy lands on a (a half-finished clone).
    write_at(&a, 63 * MIB, &read_at(&b, 63 * MIB, 4096));
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    assert_eq!(entry(&list, &a)["header"], "conflict");
    let before = digest(&a);
    cairn(&d, &["disk", "repair", a.to_str().unwrap()]).refused("disagree on the disk UUID");
    assert_eq!(digest(&a), before);
    cairn(&d, &["disk", "repair", a.to_str().unwrap(), "--force"]).ok();
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    assert_eq!(entry(&list, &a)["header"], "ok");
}

#[test]
fn repair_will_not_write_over_data_someone_put_there() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let path = disk.to_str().unwrap();
    cairn(&d, &["disk", "label", "data1", path]).ok();
    if let Err(reason) = tool("mkswap", &[path]) {
        prerequisite::missing(&reason);
        return;
    }
    let before = digest(&disk);
    cairn(&d, &["disk", "repair", path])
        .refused("now carries a swap area")
        .refused("--overwrite-foreign");
    cairn(&d, &["disk", "repair", path, "--force"]).refused("now carries a swap area");
    assert_eq!(
        digest(&disk),
        before,
        "--force (UUID conflicts) does not license overwriting"
    );
    cairn(&d, &["disk", "repair", path, "--overwrite-foreign"]).ok();
    let inspect = cairn(&d, &["disk", "inspect", path, "--json"]).ok().json();
    assert_eq!(inspect["valid"], true);
}

/// Bad input: one line saying what is wrong and what to do, a non-zero exit, no
/// byte written.
#[test]
fn bad_input_gets_one_line_and_writes_nothing() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let good = sparse(&dir.path().join("good.img"), 64 * MIB);
    let good_path = good.to_str().unwrap();
    let tiny = sparse(&dir.path().join("tiny.img"), 8 * MIB - 4096);
    let ro = sparse(&dir.path().join("ro.img"), 64 * MIB);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    let missing = dir.path().join("missing.img");
    let dir_path = dir.path().to_str().unwrap();
    let snapshot = |paths: &[&Path]| paths.iter().map(|p| digest(p)).collect::<Vec<_>>();
    let before = snapshot(&[&good, &tiny, &ro]);

    cairn(&d, &["disk", "label", "x", missing.to_str().unwrap()]).refused("no such file or device");
    cairn(&d, &["disk", "label", "x", dir_path]).refused("is a directory");
    cairn(&d, &["disk", "label", "x", "/dev/null"]).refused("is a character device");
    cairn(&d, &["disk", "label", "x", tiny.to_str().unwrap()])
        .refused("needs at least 8388608 bytes (8 MiB)");
    cairn(&d, &["disk", "label", "x", ro.to_str().unwrap()])
        .refused("is read-only (its mode is 0444");
    cairn(&d, &["disk", "label", "data-1", good_path]).refused("has '-' at position 5");
    cairn(&d, &["disk", "label", "1data", good_path]).refused("must start with a letter");
    cairn(&d, &["disk", "label", &"X".repeat(31), good_path]).refused("the limit is 30");
    cairn(&d, &["disk", "label", "", good_path]).refused("the label name is empty");
    cairn(&d, &["disk", "unlabel", good_path]).refused("carries no Cairn label");
    cairn(&d, &["disk", "repair", good_path]).refused("carries no Cairn label");
    cairn(&d, &["disk", "inspect", good_path, "--copy", "7"]).refused("copy 7 does not exist");
    cairn(&d, &["disk", "list", "--discover", "/nonexistent/disks*"])
        .refused("matched no block device or file");
    cairn(&d, &["disk", "list", "--discover", "/dev/sd[a"]).refused("is malformed");
    cairn(&d, &["device", "probe", missing.to_str().unwrap()]).refused("no such file or device");
    assert_eq!(
        snapshot(&[&good, &tiny, &ro]),
        before,
        "refused commands wrote nothing"
    );

    // A damaged Cairn header (no good copy) is neither relabelled nor repaired silently.
    cairn(&d, &["disk", "label", "x", good_path]).ok();
    for offset in [0, MIB, 63 * MIB] {
        write_at(&good, offset + 0x100, &[0xFF]);
    }
    let damaged = digest(&good);
    cairn(&d, &["disk", "repair", good_path]).refused("no good copy of the Cairn header");
    cairn(&d, &["disk", "label", "y", good_path])
        .refused("a damaged Cairn header with no good copy");
    assert_eq!(digest(&good), damaged);
    std::fs::write(good.with_extension("cfg"), "discovery_string = [1]\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["disk", "list"])
        .env_remove("CAIRN_DISCOVER")
        .env("CAIRN_CONFIG", good.with_extension("cfg"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("good.cfg:1:20:") && stderr.lines().count() == 1,
        "{stderr}"
    );

    // clap's own usage errors exit 2.
    assert_eq!(cairn(&d, &["disk", "label"]).code, 2);
}

#[test]
fn every_listing_has_json_and_help() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let p = disk.to_str().unwrap();
    cairn(&d, &["disk", "label", "j", p, "--json"]).ok().json();
    cairn(&d, &["disk", "list", "--json"]).ok().json();
    cairn(&d, &["disk", "inspect", p, "--json"]).ok().json();
    cairn(&d, &["disk", "repair", p, "--json"]).ok().json();
    cairn(&d, &["device", "probe", p, "--json"]).ok().json();
    cairn(&d, &["disk", "unlabel", p, "--json"]).ok().json();
    for args in [
        vec!["--help"],
        vec!["disk", "--help"],
        vec!["device", "--help"],
        vec!["device", "probe", "--help"],
        vec!["disk", "label", "--help"],
        vec!["disk", "unlabel", "--help"],
        vec!["disk", "list", "--help"],
        vec!["disk", "inspect", "--help"],
        vec!["disk", "repair", "--help"],
    ] {
        let run = cairn(&d, &args).ok();
        assert!(
            run.stdout.contains("Usage: cairn"),
            "{args:?}: {}",
            run.stdout
        );
    }
}

#[test]
fn probing_a_file_reports_thin_usage_and_writes_nothing() {
    let dir = scratch();
    let disk = sparse(&dir.path().join("thin.img"), 1 << 30);
    write_at(&disk, 512 * MIB, &vec![7u8; MIB as usize]);
    let before = (
        digest(&disk),
        std::fs::metadata(&disk).unwrap().modified().unwrap(),
    );
    let probe = cairn("", &["device", "probe", disk.to_str().unwrap(), "--json"])
        .ok()
        .json();
    let p = &probe[0];
    assert_eq!(p["kind"], "file");
    assert_eq!(p["size_bytes"], 1u64 << 30);
    let allocated = p["file"]["allocated_bytes"].as_u64().unwrap();
    assert!(
        (MIB..4 * MIB).contains(&allocated),
        "1 MiB written, {allocated} allocated"
    );
    assert_eq!(p["file"]["direct_io"]["supported"], true);
    assert!(p["max_transfer_bytes"].as_u64().unwrap() >= 4096);
    let text = cairn("", &["device", "probe", disk.to_str().unwrap()])
        .ok()
        .stdout;
    assert!(
        text.contains("allocated") && text.contains("punch hole") && text.contains("direct I/O"),
        "{text}"
    );
    assert_eq!(
        (
            digest(&disk),
            std::fs::metadata(&disk).unwrap().modified().unwrap()
        ),
        before
    );
}

/// repair --overwrite-foreign erases what it overrides, as label --force does:
/// a GPT written over a labelled disk leaves a backup header at the last LBA.
#[test]
fn repair_over_foreign_data_erases_it_everywhere() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let path = disk.to_str().unwrap();
    cairn(&d, &["disk", "label", "data1", path]).ok();
    if let Err(reason) = tool("sgdisk", &["-o", path]) {
        prerequisite::missing(&reason);
        return;
    }
    assert_eq!(
        read_at(&disk, 64 * MIB - 512, 8),
        b"EFI PART",
        "sgdisk wrote a backup header"
    );
    cairn(&d, &["disk", "repair", path]).refused("a GPT partition table");
    let out = cairn(
        &d,
        &["disk", "repair", path, "--overwrite-foreign", "--json"],
    )
    .ok()
    .json();
    assert!(
        !out["erased_ranges"].as_array().unwrap().is_empty(),
        "{out:#}"
    );
    assert_ne!(
        read_at(&disk, 64 * MIB - 512, 8),
        b"EFI PART",
        "the backup GPT header is erased"
    );
    let list = cairn(&d, &["disk", "list", "--json"]).ok().json();
    let e = entry(&list, &disk);
    assert_eq!(
        (e["header"].as_str(), e["foreign"].as_array().map(Vec::len)),
        (Some("ok"), Some(0)),
        "{e:#}"
    );
    if let Some(types) = wipefs_types(&disk) {
        assert!(types.is_empty(), "wipefs still finds {types:?}");
    }
}

#[test]
fn repair_of_a_newer_format_says_to_upgrade_whatever_the_flags() {
    let dir = scratch();
    let d = glob_of(dir.path());
    let disk = sparse(&dir.path().join("d.img"), 64 * MIB);
    let path = disk.to_str().unwrap();
    cairn(&d, &["disk", "label", "data1", path]).ok();
    // Every copy claims format version 2, checksum resealed.
    for offset in [0, MIB, 63 * MIB] {
        let mut block = read_at(&disk, offset, 4096);
        block[0x0E] = 2;
        let crc = crc32c::crc32c(&block[12..]);
        block[8..12].copy_from_slice(&crc.to_le_bytes());
        write_at(&disk, offset, &block);
    }
    let before = digest(&disk);
    for flags in [
        &[][..],
        &["--force"][..],
        &["--force", "--overwrite-foreign"][..],
    ] {
        let mut args = vec!["disk", "repair", path];
        args.extend_from_slice(flags);
        cairn(&d, &args)
            .refused("was written by a newer Cairn (format version 2); upgrade Cairn to repair it");
    }
    assert_eq!(digest(&disk), before);
}

/// Like any Unix tool, a command whose reader has gone (`cairn disk list |
/// head`) ends by SIGPIPE, quietly, instead of printing an EPIPE error.
#[test]
fn a_listing_into_a_closed_pipe_ends_quietly_by_sigpipe() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch();
    sparse(&dir.path().join("disk1.img"), 64 * MIB);
    let (reader, writer) = std::io::pipe().unwrap();
    // The reader gone before the command writes: its first write breaks.
    drop(reader);
    let out = cairn_command(&glob_of(dir.path()), &[])
        .args(["disk", "list"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
