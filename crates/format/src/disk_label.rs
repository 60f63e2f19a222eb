//! Disk label names: the name a person gives a disk (`cairn disk label DATA1 /dev/sdb`).
//!
//! Rule (the same shape as Oracle ASM disk names, which our users already type):
//! 1 to 30 characters, ASCII letters, digits and `_`, starting with a letter.
//! Labels are case-insensitive and stored in upper case, so `data1` and `DATA1` are
//! the same disk — as `asmcmd afd_label` does. Thirty characters fit the 32-byte
//! on-disk field with room for a terminating NUL.

use std::fmt;

/// Longest label, in characters (ASCII, so also bytes).
pub const LABEL_LEN_MAX: usize = 30;

/// A validated, upper-cased disk label.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DiskLabel(String);

/// Why a label name was refused. The messages tell the person what to type instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelNameError {
    #[error("the label name is empty; use 1 to {LABEL_LEN_MAX} letters, digits or '_', starting with a letter")]
    Empty,
    #[error("label name '{name}' is {len} characters long; the limit is {LABEL_LEN_MAX}")]
    TooLong { name: String, len: usize },
    #[error("label name '{name}' must start with a letter, not '{}'", first.escape_debug())]
    BadFirst { name: String, first: char },
    #[error("label name '{name}' has '{}' at position {position}; use only letters, digits and '_'", ch.escape_debug())]
    BadChar {
        name: String,
        ch: char,
        position: usize,
    },
}

impl DiskLabel {
    /// Validate a name as typed by a person and upper-case it.
    pub fn parse(name: &str) -> Result<Self, LabelNameError> {
        let shown = || name.escape_debug().to_string();
        let Some(first) = name.chars().next() else {
            return Err(LabelNameError::Empty);
        };
        if let Some((index, ch)) = name
            .chars()
            .enumerate()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        {
            return Err(LabelNameError::BadChar {
                name: shown(),
                ch,
                position: index + 1,
            });
        }
        if !first.is_ascii_alphabetic() {
            return Err(LabelNameError::BadFirst {
                name: shown(),
                first,
            });
        }
        if name.len() > LABEL_LEN_MAX {
            return Err(LabelNameError::TooLong {
                name: shown(),
                len: name.len(),
            });
        }
        Ok(Self(name.to_ascii_uppercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DiskLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_uppercases() {
        assert_eq!(DiskLabel::parse("v512data1").unwrap().as_str(), "V512DATA1");
        assert_eq!(DiskLabel::parse("A_1").unwrap().as_str(), "A_1");
        let longest = "A".repeat(LABEL_LEN_MAX);
        assert_eq!(DiskLabel::parse(&longest).unwrap().as_str(), longest);
    }

    #[test]
    fn refuses_what_does_not_belong() {
        assert_eq!(DiskLabel::parse(""), Err(LabelNameError::Empty));
        assert!(matches!(
            DiskLabel::parse("1DATA"),
            Err(LabelNameError::BadFirst { first: '1', .. })
        ));
        assert!(matches!(
            DiskLabel::parse("_DATA"),
            Err(LabelNameError::BadFirst { first: '_', .. })
        ));
        assert!(matches!(
            DiskLabel::parse("DATA-1"),
            Err(LabelNameError::BadChar {
                ch: '-',
                position: 5,
                ..
            })
        ));
        assert!(matches!(
            DiskLabel::parse("DATÄ"),
            Err(LabelNameError::BadChar { ch: 'Ä', .. })
        ));
        assert!(matches!(
            DiskLabel::parse("A B"),
            Err(LabelNameError::BadChar { ch: ' ', .. })
        ));
        assert!(matches!(
            DiskLabel::parse(&"A".repeat(LABEL_LEN_MAX + 1)),
            Err(LabelNameError::TooLong { len: 31, .. })
        ));
    }

    #[test]
    fn error_messages_are_one_line() {
        for bad in ["", "9", "a/b", "a\nb", &"X".repeat(40)] {
            let message = DiskLabel::parse(bad).unwrap_err().to_string();
            assert!(!message.contains('\n'), "{message:?}");
        }
    }
}
