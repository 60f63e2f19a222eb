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

mod error;
mod expand;
mod keys;
mod lexer;
mod parser;
mod value;

use std::collections::BTreeMap;
use std::path::Path;

use crate::model::{Plan, Source};
use error::{clean, Error};

pub use error::ParseError;
pub(crate) use parser::THREADS_MAX;
pub(crate) use value::size_bytes as value_size_bytes;
pub use value::SizeError;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_escapes_and_cuts() {
        assert_eq!(clean("a\nb"), "a\\nb");
        assert_eq!(clean(&"x".repeat(100)).chars().count(), 61);
    }
}
