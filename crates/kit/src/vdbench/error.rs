//! What a parameter file that cannot be run reports: a position in the
//! files read, and the message, made one line and safe to quote.

use std::path::{Path, PathBuf};

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

    pub(super) fn into_parse_error(self, paths: &[PathBuf], top: &Path) -> ParseError {
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
