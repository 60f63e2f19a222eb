//! The repository says what is: the architecture drawing names every crate
//! and what each uses, the README's layout names every crate and every
//! note in docs/, nothing points at a path outside the repository, and
//! every benchmark script shares bench/lib.sh's preamble. Each is a claim a
//! newcomer reads and trusts; each test fails the day the claim drifts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository's root")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The workspace's crates, by directory name (`crates/io-sim` is `io-sim`),
/// each with the workspace crates it depends on (normal dependencies only:
/// a test's use of the simulator is not an arrow of the architecture).
fn crates() -> BTreeMap<String, BTreeSet<String>> {
    let root = repo();
    let workspace: toml::Table = read(&root.join("Cargo.toml"))
        .parse()
        .expect("Cargo.toml parses");
    let members = workspace["workspace"]["members"]
        .as_array()
        .expect("workspace.members is a list");
    let mut out = BTreeMap::new();
    for member in members {
        let dir = member.as_str().expect("a member is a path");
        let name = dir.rsplit('/').next().expect("a path has a last part");
        let manifest: toml::Table = read(&root.join(dir).join("Cargo.toml"))
            .parse()
            .expect("a crate's Cargo.toml parses");
        let uses = manifest
            .get("dependencies")
            .and_then(|d| d.as_table())
            .map(|deps| {
                deps.keys()
                    .filter_map(|k| k.strip_prefix("cairn-"))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        out.insert(name.to_string(), uses);
    }
    assert!(
        out.len() >= 8,
        "the workspace lists {} crates: {out:?}",
        out.len()
    );
    out
}

/// The lines of `text` under the heading `heading`, up to the next `## `.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect()
}

fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| !w.is_empty())
}

#[test]
fn the_architecture_draws_every_crate_and_says_what_each_uses() {
    let crates = crates();
    let doc = read(&repo().join("docs/ARCHITECTURE.md"));
    let lines = section(&doc, "## Crates and the direction of dependencies");
    assert!(
        !lines.is_empty(),
        "docs/ARCHITECTURE.md has no section \"## Crates and the direction of dependencies\""
    );

    // The drawing: the first fenced block of the section.
    let drawing: Vec<&str> = lines
        .iter()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .copied()
        .collect();
    let drawn: BTreeSet<&str> = drawing.iter().flat_map(|l| words(l)).collect();
    for name in crates.keys() {
        assert!(
            drawn.contains(name.as_str()),
            "crate {name} is not in docs/ARCHITECTURE.md's drawing"
        );
    }

    // The table: | crate | uses (ours) | what it is |
    let mut table = BTreeMap::new();
    for row in lines.iter().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (name, uses) = (cells[1], cells[2]);
        if name == "crate" || name.starts_with("---") {
            continue;
        }
        let uses: BTreeSet<String> = uses
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty() && *u != "—")
            .map(str::to_string)
            .collect();
        table.insert(name.to_string(), uses);
    }
    assert_eq!(
        table, crates,
        "docs/ARCHITECTURE.md's table of crates (left) is not what the crates' Cargo.toml say (right)"
    );
}

#[test]
fn the_readme_layout_names_every_crate_and_every_note() {
    let root = repo();
    let readme = read(&root.join("README.md"));
    let layout = section(&readme, "## Layout").join("\n");
    assert!(!layout.is_empty(), "README.md has no \"## Layout\"");
    for name in crates().keys() {
        assert!(
            layout.contains(&format!("crates/{name} ")),
            "README.md's layout does not name crates/{name}"
        );
    }
    let mut notes = 0;
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let name = entry.expect("a docs/ entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".md") {
            notes += 1;
            let named = layout
                .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '(')
                .any(|w| w == name);
            assert!(named, "README.md's layout does not name docs/{name}");
        }
    }
    assert!(notes > 10, "docs/ holds {notes} notes");
}

/// The files a clone holds: git's list where this is a git checkout, else
/// (an unpacked archive) every file but build output and fuzzing's corpora.
fn tracked_files(root: &Path) -> Vec<PathBuf> {
    let listed = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output();
    if let Ok(out) = listed {
        if out.status.success() && !out.stdout.is_empty() {
            return out
                .stdout
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
                .collect();
        }
    }
    let mut files = Vec::new();
    walk(root, &mut files);
    files
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let entry = entry.expect("a directory entry");
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = entry.file_type().expect("a file type");
        if name == ".git" {
            // A directory in a clone, a file naming the real one in a
            // git worktree: git's own either way.
            continue;
        }
        if kind.is_dir() {
            if !matches!(name.as_ref(), "target" | "corpus" | "artifacts") {
                walk(&path, out);
            }
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

#[test]
fn nothing_points_at_a_path_outside_the_repository() {
    let root = repo();
    let files = tracked_files(&root);
    assert!(files.len() > 100, "only {} files found", files.len());
    // Spelled in parts so that this file does not name them itself.
    let outside = [
        format!("/{}/", "work"),
        format!("../{}/", "shared"),
        format!("{}.md", "MEASURING"),
        format!("{}.md", "STYLE"),
    ];
    let mut found = Vec::new();
    for file in &files {
        // Text a person wrote is small; a big file is data (a disk image
        // left by the demo, a fixture) and names no path.
        let small = std::fs::metadata(file).is_ok_and(|m| m.len() <= 4 << 20);
        let Some(text) = small.then(|| std::fs::read_to_string(file).ok()).flatten() else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if outside.iter().any(|o| line.contains(o.as_str())) {
                found.push(format!(
                    "{}:{}: {}",
                    file.strip_prefix(&root).unwrap_or(file).display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "paths outside the repository (cite docs/sources.md or docs/measuring.md instead):\n{}",
        found.join("\n")
    );
}

#[test]
fn every_benchmark_script_shares_the_preamble_and_parses() {
    let bench = repo().join("bench");
    let mut scripts = 0;
    for entry in std::fs::read_dir(&bench).expect("bench/") {
        let path = entry.expect("a bench/ entry").path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(name) = name.filter(|n| n.ends_with(".sh")) else {
            continue;
        };
        let out = std::process::Command::new("bash")
            .arg("-n")
            .arg(&path)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "bash -n bench/{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if name == "lib.sh" {
            continue;
        }
        scripts += 1;
        let text = read(&path);
        assert!(
            text.contains("source \"$(dirname \"${BASH_SOURCE[0]}\")/lib.sh\""),
            "bench/{name} does not source bench/lib.sh"
        );
        for own in ["root=\"$(cd", "set -euo pipefail", "-h|--help) sed"] {
            assert!(
                !text.contains(own),
                "bench/{name} writes its own `{own}`: bench/lib.sh has it"
            );
        }
    }
    assert!(scripts >= 10, "bench/ holds {scripts} scripts");
}
