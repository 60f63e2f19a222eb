//! What `check_invariants` found broken.

use std::fmt;

/// What `check_invariants` found broken, one line per violation.
#[derive(Debug, Default)]
pub struct Violations {
    lines: Vec<String>,
}

impl Violations {
    /// Note `what` unless `ok`.
    pub(in crate::group) fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.lines.push(what());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Each violation, as found.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A broken table can break thousands of records alike: the first
        // few say what is wrong.
        const SHOWN: usize = 8;
        write!(f, "{} invariant(s) broken: ", self.lines.len())?;
        for (i, line) in self.lines.iter().take(SHOWN).enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(line)?;
        }
        if self.lines.len() > SHOWN {
            write!(f, "; and {} more", self.lines.len() - SHOWN)?;
        }
        Ok(())
    }
}

impl std::error::Error for Violations {}
