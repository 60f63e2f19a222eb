//! Sets `CAIRN_COMMIT` to `git describe --always --dirty --abbrev=12` of the
//! source tree, so every result.json names the code that produced it; to
//! `unknown` when there is no git or no repository (a source tarball). Nothing
//! here may fail the build.
//!
//! It reruns when HEAD moves (a commit, a checkout). Edits that only make the
//! tree dirty do not rerun it: watching the index would rebuild this crate on
//! every `git status`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match git_dir(&manifest_dir) {
        Some(git_dir) => {
            for path in watched(&git_dir) {
                println!("cargo:rerun-if-changed={}", path.display());
            }
            describe(&manifest_dir).unwrap_or_else(|| "unknown".to_string())
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=CAIRN_COMMIT={commit}");
}

/// The repository's git directory: `.git` in this directory or an ancestor,
/// following a worktree's `gitdir:` file.
fn git_dir(start: &Path) -> Option<PathBuf> {
    let dot_git = start
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|p| p.exists())?;
    if dot_git.is_dir() {
        return Some(dot_git);
    }
    let text = fs::read_to_string(&dot_git).ok()?;
    let target = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
    let dir = if target.is_absolute() {
        target
    } else {
        dot_git.parent()?.join(target)
    };
    dir.is_dir().then_some(dir)
}

/// HEAD, and the files that hold the branch it points to — only those that
/// exist, since cargo reruns every time for a path that does not.
fn watched(git_dir: &Path) -> Vec<PathBuf> {
    let head = git_dir.join("HEAD");
    let mut paths = Vec::new();
    let branch = fs::read_to_string(&head)
        .ok()
        .and_then(|t| t.trim().strip_prefix("ref:").map(|r| r.trim().to_string()));
    if head.is_file() {
        paths.push(head);
    }
    if let Some(branch) = branch {
        // A linked worktree keeps its refs in the main repository's directory.
        let common = fs::read_to_string(git_dir.join("commondir"))
            .ok()
            .map(|c| git_dir.join(c.trim()))
            .unwrap_or_else(|| git_dir.to_path_buf());
        for dir in [git_dir, common.as_path()] {
            paths.push(dir.join(&branch));
            paths.push(dir.join("packed-refs"));
        }
    }
    paths.retain(|p| p.is_file());
    paths.dedup();
    paths
}

fn describe(dir: &Path) -> Option<String> {
    let output = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .current_dir(dir)
        // Do not take the index lock other git commands in the tree may want.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty() && !text.contains('\n')).then(|| text.to_string())
}
