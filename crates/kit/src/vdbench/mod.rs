//! vdbench parameter files into a [`Plan`].
//!
//! A parameter file is read in three steps, each in its own module:
//!
//! 1. `lexer`: lines, comments, `$variables` and `include=` into items
//!    (`key=value` with the file, line and column of every token);
//! 2. `parser`: items into general parameters and `sd`, `wd` and `rd` records,
//!    with `xx=default` records, name lists and wildcards resolved, and every
//!    value checked (the keys each record takes, and those Cairn does not
//!    support, are the tables of `keys`);
//! 3. `expand`: each `rd` into the runs its `for…` loops, `iorate=` lists and
//!    curves stand for.
//!
//! Nothing is silently ignored: an unknown key, a vdbench key Cairn does not
//! support, a bad value, a name that resolves to nothing, a record out of order
//! all fail with the position of the offending token, because a benchmark
//! that quietly ran something other than what its file says is worse than none.
//! The grammar and where Cairn differs from vdbench are in `docs/vdbench.md`.

mod expand;
mod keys;
mod lexer;
mod parser;
mod value;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::model::{Plan, Source};

pub(crate) use parser::THREADS_MAX;
pub(crate) use value::size_bytes as value_size_bytes;
pub use value::SizeError;

/// A parameter file that cannot be run, with where and why.
///
/// `line` and `column` count from 1 (columns in characters); a `$variable`
/// reports the column of its `$`, so an error in a substituted value points at
/// the place in the file that brought it in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{}:{}: {}", .file.display(), .line, .column, .message)]
pub struct ParseError {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Reads and parses the parameter file at `path`; `include=` files are read
/// relative to the directory of the file that names them.
pub fn parse_file(path: &Path, variables: &BTreeMap<String, String>) -> Result<Plan, ParseError> {
    let text = std::fs::read_to_string(path).map_err(|e| ParseError {
        file: path.to_path_buf(),
        line: 1,
        column: 1,
        message: format!("cannot read the parameter file: {e}"),
    })?;
    parse_str(path, &text, variables, &mut |p: &Path| {
        std::fs::read_to_string(p)
    })
}

/// For fuzzing and tests: parse text as if read from `path`; include= is
/// resolved by `read_include` (which returns the included file's text or an
/// io error).
pub fn parse_str(
    path: &Path,
    text: &str,
    variables: &BTreeMap<String, String>,
    read_include: &mut dyn FnMut(&Path) -> std::io::Result<String>,
) -> Result<Plan, ParseError> {
    let mut lexer = lexer::Lexer::new(variables, read_include);
    let lexed = lexer.lex_file(path, text);
    let paths = lexer.paths().to_vec();
    let to_parse_error = |e: Error| e.into_parse_error(&paths, path);
    lexed.map_err(to_parse_error)?;
    let lexed = lexer.finish();
    let (general, sds, wds, runs) =
        parser::parse(&lexed.lines, lexed.end).map_err(to_parse_error)?;
    if let Some(unused) = variables
        .keys()
        .find(|name| !lexed.used_variables.contains(*name))
    {
        return Err(ParseError {
            file: path.to_path_buf(),
            line: 1,
            column: 1,
            message: format!(
                "variable `{}` was given on the command line but the file never uses ${}; remove it or check its spelling",
                clean(unused),
                clean(unused)
            ),
        });
    }
    Ok(Plan {
        general,
        sds,
        wds,
        runs,
        source: Source::Vdbench {
            path: path.to_path_buf(),
            files: lexed.files,
            variables: variables.clone(),
        },
    })
}

/// Where a token is: `file` indexes the list of files read (the top file is 0,
/// then each `include=` in the order met).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    pub file: usize,
    pub line: usize,
    pub column: usize,
}

/// A problem at a position, before the position's file index is turned into a path.
#[derive(Debug, Clone)]
pub(crate) struct Error {
    pub pos: Pos,
    pub message: String,
}

impl Error {
    pub(crate) fn at(pos: Pos, message: impl Into<String>) -> Self {
        Self {
            pos,
            message: message.into(),
        }
    }

    fn into_parse_error(self, paths: &[PathBuf], top: &Path) -> ParseError {
        let file = paths
            .get(self.pos.file)
            .cloned()
            .unwrap_or_else(|| top.to_path_buf());
        // Messages quote the file's own text, which never holds a newline, but a
        // command-line variable or an io error might: keep the error one line.
        let message = self.message.replace(['\n', '\r'], " ");
        ParseError {
            file,
            line: self.pos.line,
            column: self.pos.column,
            message,
        }
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// `text` safe to quote in a one-line message: control characters escaped and
/// long text cut, so a message stays readable whatever the input.
pub(crate) fn clean(text: &str) -> String {
    const SHOWN_MAX: usize = 60;
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == SHOWN_MAX {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_escapes_and_cuts() {
        assert_eq!(clean("a\nb"), "a\\nb");
        assert_eq!(clean(&"x".repeat(100)).chars().count(), 61);
    }
}
