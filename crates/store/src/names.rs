//! Names inside a disk group: group names, path components and group paths.
//!
//! A file in a disk group is written `+DATA/orcl/datafile/users.dbf`, as in Oracle
//! ASM: a `+`, the group's name, then `/`-separated components. This module owns the
//! syntax of those names and nothing else — it is pure, does no I/O and knows nothing
//! of which groups, directories or files exist.
//!
//! Invariants of the values it hands out (the rules every parser and `join` enforces):
//! - [`GroupName`]: `[A-Za-z][A-Za-z0-9_]{0,29}`, stored in upper case, because group
//!   names are case-insensitive (`+data` is group `DATA`), like disk labels.
//! - [`Component`]: 1 to [`COMPONENT_LEN_MAX`] bytes of printable ASCII; a space only
//!   between other characters; none of `/ \ * ? " < > | :`; no leading `+` (so a
//!   component never looks like a group path); never `.` or `..`, because a group
//!   path is always spelled out from the group's root. The spelling is kept as given
//!   (case-preserving); [`Component::key`] is the case-insensitive identity. `==` on
//!   a `Component` compares spellings; ask `key()` whether two name the same entry.
//! - [`GroupPath`]: at most [`PATH_DEPTH_MAX`] components whose `/`-joined length is
//!   at most [`PATH_LEN_MAX`] bytes. Its fields are public for matching; code that
//!   builds one by hand rather than through `parse`/`join` owns these limits.
//!
//! Names are ASCII so that case-insensitivity is well defined: ASCII upper and lower
//! case pair one to one, whereas Unicode case folding depends on locale and version
//! (`ß`, Turkish dotless `i`) and would let two spellings name one file on one node
//! and two files on another. Non-ASCII input is refused with an error that says so.
//!
//! Parsing is strict rather than forgiving: `+DATA//x` is an error, not `+DATA/x`,
//! so that a typo in a script cannot silently address a different file. One trailing
//! `/` is accepted (`+DATA/orcl/`), as shells complete directories that way.
//!
//! Every [`NameError`] message is one line (offending text is quoted with escapes and
//! shortened past [`QUOTE_CHARS_MAX`] characters), names the part at fault and the
//! rule, and says what to type instead.
//!
//! Not here: looking names up, directory semantics, aliases, and Oracle's
//! system-generated names (`USERS.259.1123`); those belong to the catalog of files.

use std::fmt;

/// Longest group name, in characters (ASCII, so also bytes) — the same as disk labels
/// and ASM disk group names.
pub const GROUP_NAME_LEN_MAX: usize = 30;
/// Longest path component, in bytes.
pub const COMPONENT_LEN_MAX: usize = 96;
/// Longest path inside a group, in bytes: the components joined by `/`, not counting
/// the `+GROUP/` prefix or a trailing `/`.
pub const PATH_LEN_MAX: usize = 1024;
/// Most components in one group path.
pub const PATH_DEPTH_MAX: usize = 32;
/// Longest quotation of user input in an error message, in characters; longer text is
/// cut and ends in `…`, so that a 1 MiB argument does not become a 1 MiB message.
pub const QUOTE_CHARS_MAX: usize = 64;

/// Characters a path component may never contain, besides control characters:
/// `/` separates components, the others are reserved by shells and other systems'
/// paths, so a name that round-trips through a script or a Windows copy stays intact.
const COMPONENT_FORBIDDEN: &[char] = &['/', '\\', '*', '?', '"', '<', '>', '|', ':'];

/// Why a name was refused. Each message is one line and says what to type instead.
/// `path` fields hold the whole group path the part came from, when there was one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{} is not a group path: a group path starts with '+', as in \"+DATA/orcl/datafile/users.dbf\"", quote(.text))]
    NotGroupPath { text: String },
    #[error("{} ends with '/', so it names a directory; drop the '/' to name a file", quote(.path))]
    DirectorySyntax { path: String },

    #[error("group name is empty{}: write the group's name after the '+', as in \"+DATA\"", within(.path))]
    GroupEmpty { path: Option<String> },
    #[error("group name {}{} contains {:?} ({}), which is not ASCII: names are ASCII so that case-insensitive matching is well defined; use letters A-Z, digits and '_'", quote(.name), within(.path), .ch, codepoint(*.ch))]
    GroupNonAscii {
        name: String,
        ch: char,
        path: Option<String>,
    },
    #[error("group name {}{} starts with {:?}: a group name starts with a letter, as in \"DATA\"", quote(.name), within(.path), .ch)]
    GroupFirstNotLetter {
        name: String,
        ch: char,
        path: Option<String>,
    },
    #[error("group name {}{} contains the character {:?}, which is not allowed: use only letters, digits and '_'", quote(.name), within(.path), .ch)]
    GroupBadChar {
        name: String,
        ch: char,
        path: Option<String>,
    },
    #[error("group name {}{} is {len_bytes} bytes; the limit is {GROUP_NAME_LEN_MAX}: use a shorter name", quote(.name), within(.path))]
    GroupTooLong {
        name: String,
        len_bytes: usize,
        path: Option<String>,
    },

    #[error("empty path component{}: write exactly one '/' between names, each 1 to {COMPONENT_LEN_MAX} bytes", within(.path))]
    ComponentEmpty { path: Option<String> },
    #[error("path component {}{} is not allowed: use a name other than \".\" or \"..\"; group paths are always written in full from the group", quote(.component), within(.path))]
    ComponentDot {
        component: String,
        path: Option<String>,
    },
    #[error("path component {}{} contains {:?} ({}), which is not ASCII: names are ASCII so that case-insensitive matching is well defined; use ASCII letters, digits and punctuation", quote(.component), within(.path), .ch, codepoint(*.ch))]
    ComponentNonAscii {
        component: String,
        ch: char,
        path: Option<String>,
    },
    #[error("path component {}{} is {len_bytes} bytes; the limit is {COMPONENT_LEN_MAX}: use a shorter name", quote(.component), within(.path))]
    ComponentTooLong {
        component: String,
        len_bytes: usize,
        path: Option<String>,
    },
    #[error("path component {}{} contains the character {:?}, which is not allowed: leave out / \\ * ? \" < > | : and control characters", quote(.component), within(.path), .ch)]
    ComponentBadChar {
        component: String,
        ch: char,
        path: Option<String>,
    },
    #[error("path component {}{} starts with '+', which is not allowed because it would read as a group path: rename it without the leading '+'", quote(.component), within(.path))]
    ComponentLeadingPlus {
        component: String,
        path: Option<String>,
    },
    #[error("path component {}{} starts with a space, which is not allowed: remove leading and trailing spaces", quote(.component), within(.path))]
    ComponentLeadingSpace {
        component: String,
        path: Option<String>,
    },
    #[error("path component {}{} ends with a space, which is not allowed: remove leading and trailing spaces", quote(.component), within(.path))]
    ComponentTrailingSpace {
        component: String,
        path: Option<String>,
    },

    #[error("path {} has {depth} components; the limit is {PATH_DEPTH_MAX}: use fewer directory levels", quote(.path))]
    PathTooDeep { path: String, depth: usize },
    #[error("path {} is {len_bytes} bytes after the group name; the limit is {PATH_LEN_MAX}: use shorter names or fewer directory levels", quote(.path))]
    PathTooLong { path: String, len_bytes: usize },
}

impl NameError {
    /// The same error, saying which group path the part came from.
    fn in_path(mut self, text: &str) -> Self {
        match &mut self {
            NameError::GroupEmpty { path }
            | NameError::GroupNonAscii { path, .. }
            | NameError::GroupFirstNotLetter { path, .. }
            | NameError::GroupBadChar { path, .. }
            | NameError::GroupTooLong { path, .. }
            | NameError::ComponentEmpty { path }
            | NameError::ComponentDot { path, .. }
            | NameError::ComponentNonAscii { path, .. }
            | NameError::ComponentTooLong { path, .. }
            | NameError::ComponentBadChar { path, .. }
            | NameError::ComponentLeadingPlus { path, .. }
            | NameError::ComponentLeadingSpace { path, .. }
            | NameError::ComponentTrailingSpace { path, .. } => *path = Some(text.to_string()),
            NameError::NotGroupPath { .. }
            | NameError::DirectorySyntax { .. }
            | NameError::PathTooDeep { .. }
            | NameError::PathTooLong { .. } => {}
        }
        self
    }
}

/// User input for a message: in double quotes, escaped so it stays on one line and shows
/// control characters, and cut to [`QUOTE_CHARS_MAX`] characters.
fn quote(text: &str) -> String {
    if text.chars().count() <= QUOTE_CHARS_MAX {
        format!("{text:?}")
    } else {
        let mut cut: String = text.chars().take(QUOTE_CHARS_MAX - 1).collect();
        cut.push('…');
        format!("{cut:?}")
    }
}

fn within(path: &Option<String>) -> String {
    match path {
        Some(p) => format!(" in {}", quote(p)),
        None => String::new(),
    }
}

fn codepoint(ch: char) -> String {
    format!("U+{:04X}", u32::from(ch))
}

/// A validated group name: `[A-Za-z][A-Za-z0-9_]{0,29}`, stored in upper case
/// (group names are case-insensitive).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct GroupName(String);

impl GroupName {
    /// Validate a group name as typed, without the `+`, and upper-case it.
    ///
    /// Errors: empty, non-ASCII, not starting with a letter, a character other than a
    /// letter, digit or `_`, longer than [`GROUP_NAME_LEN_MAX`].
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let name = || s.to_string();
        let Some(first) = s.chars().next() else {
            return Err(NameError::GroupEmpty { path: None });
        };
        if let Some(ch) = s.chars().find(|c| !c.is_ascii()) {
            return Err(NameError::GroupNonAscii {
                name: name(),
                ch,
                path: None,
            });
        }
        if !first.is_ascii_alphabetic() {
            return Err(NameError::GroupFirstNotLetter {
                name: name(),
                ch: first,
                path: None,
            });
        }
        if let Some(ch) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
        {
            return Err(NameError::GroupBadChar {
                name: name(),
                ch,
                path: None,
            });
        }
        if s.len() > GROUP_NAME_LEN_MAX {
            return Err(NameError::GroupTooLong {
                name: name(),
                len_bytes: s.len(),
                path: None,
            });
        }
        Ok(Self(s.to_ascii_uppercase()))
    }

    /// The name in upper case, without the `+`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One validated path component, spelled as given.
///
/// `==` and `Hash` compare the spelling; two components name the same entry exactly
/// when their [`key`](Component::key)s are equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Component(String);

impl Component {
    /// Validate one component (no `/`) against the rules in the module doc.
    ///
    /// Errors, checked in this order: empty; `.` or `..`; non-ASCII; longer than
    /// [`COMPONENT_LEN_MAX`] bytes; a forbidden or control character; a leading `+`;
    /// a leading or trailing space.
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let component = || s.to_string();
        if s.is_empty() {
            return Err(NameError::ComponentEmpty { path: None });
        }
        if s == "." || s == ".." {
            return Err(NameError::ComponentDot {
                component: component(),
                path: None,
            });
        }
        if let Some(ch) = s.chars().find(|c| !c.is_ascii()) {
            return Err(NameError::ComponentNonAscii {
                component: component(),
                ch,
                path: None,
            });
        }
        if s.len() > COMPONENT_LEN_MAX {
            return Err(NameError::ComponentTooLong {
                component: component(),
                len_bytes: s.len(),
                path: None,
            });
        }
        if let Some(ch) = s
            .chars()
            .find(|c| c.is_ascii_control() || COMPONENT_FORBIDDEN.contains(c))
        {
            return Err(NameError::ComponentBadChar {
                component: component(),
                ch,
                path: None,
            });
        }
        if s.starts_with('+') {
            return Err(NameError::ComponentLeadingPlus {
                component: component(),
                path: None,
            });
        }
        if s.starts_with(' ') {
            return Err(NameError::ComponentLeadingSpace {
                component: component(),
                path: None,
            });
        }
        if s.ends_with(' ') {
            return Err(NameError::ComponentTrailingSpace {
                component: component(),
                path: None,
            });
        }
        Ok(Self(s.to_string()))
    }

    /// The component as spelled.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The comparison key: the spelling in ASCII lower case. Two components name the
    /// same entry if and only if their keys are equal.
    pub fn key(&self) -> String {
        self.0.to_ascii_lowercase()
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A path inside a group: zero or more components; zero is the group's root.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupPath {
    pub group: GroupName,
    pub components: Vec<Component>,
}

/// Bytes of the components joined by `/`.
fn joined_len_bytes(components: &[Component]) -> usize {
    components.iter().map(|c| c.0.len()).sum::<usize>() + components.len().saturating_sub(1)
}

impl GroupPath {
    /// Parse `+DATA/a/b`. `+DATA` and `+DATA/` are the root; one trailing `/` is
    /// allowed; `+data` is group `DATA`; components keep their case.
    ///
    /// Errors: no leading `+`; a bad group name or component (the error carries `s`);
    /// an empty component (`+DATA//x`, `+DATA/x//`); more than [`PATH_DEPTH_MAX`]
    /// components; more than [`PATH_LEN_MAX`] bytes after the group name.
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let Some(rest) = s.strip_prefix('+') else {
            return Err(NameError::NotGroupPath {
                text: s.to_string(),
            });
        };
        let (group_text, body) = match rest.split_once('/') {
            Some((group_text, after)) => (group_text, after),
            None => (rest, ""),
        };
        let group = GroupName::parse(group_text).map_err(|e| e.in_path(s))?;
        let components = if body.is_empty() {
            Vec::new()
        } else {
            // Only one trailing '/': `+DATA//` still has an empty component.
            let body = body.strip_suffix('/').unwrap_or(body);
            body.split('/')
                .map(|c| Component::parse(c).map_err(|e| e.in_path(s)))
                .collect::<Result<Vec<_>, _>>()?
        };
        if components.len() > PATH_DEPTH_MAX {
            return Err(NameError::PathTooDeep {
                path: s.to_string(),
                depth: components.len(),
            });
        }
        let len_bytes = joined_len_bytes(&components);
        if len_bytes > PATH_LEN_MAX {
            return Err(NameError::PathTooLong {
                path: s.to_string(),
                len_bytes,
            });
        }
        Ok(Self { group, components })
    }

    /// Parse a path that must name a file (to create, or to alias): as
    /// [`GroupPath::parse`], but a trailing `/` — which says "directory" — and
    /// the root are refused.
    pub fn parse_file(s: &str) -> Result<Self, NameError> {
        let path = Self::parse(s)?;
        if path.is_root() || s.ends_with('/') {
            return Err(NameError::DirectorySyntax {
                path: s.to_string(),
            });
        }
        Ok(path)
    }

    /// Whether the text of a path ends with `/`: it names a directory (a copy
    /// goes into it).
    pub fn names_directory(s: &str) -> bool {
        s.ends_with('/')
    }

    /// Whether this is the group's root (no components).
    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The path without its last component; `None` for the root.
    pub fn parent(&self) -> Option<GroupPath> {
        let (_, init) = self.components.split_last()?;
        Some(GroupPath {
            group: self.group.clone(),
            components: init.to_vec(),
        })
    }

    /// The last component; `None` for the root.
    pub fn file_name(&self) -> Option<&Component> {
        self.components.last()
    }

    /// This path with `c` appended.
    ///
    /// Errors: the result would have more than [`PATH_DEPTH_MAX`] components or more
    /// than [`PATH_LEN_MAX`] bytes after the group name.
    pub fn join(&self, c: Component) -> Result<GroupPath, NameError> {
        let mut components = self.components.clone();
        components.push(c);
        let joined = GroupPath {
            group: self.group.clone(),
            components,
        };
        if joined.components.len() > PATH_DEPTH_MAX {
            return Err(NameError::PathTooDeep {
                path: joined.to_string(),
                depth: joined.components.len(),
            });
        }
        let len_bytes = joined_len_bytes(&joined.components);
        if len_bytes > PATH_LEN_MAX {
            return Err(NameError::PathTooLong {
                path: joined.to_string(),
                len_bytes,
            });
        }
        Ok(joined)
    }
}

impl fmt::Display for GroupPath {
    /// `+DATA/orcl/datafile/users.dbf`: the group in upper case, components as spelled;
    /// the root is `+DATA`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{}", self.group)?;
        for c in &self.components {
            write!(f, "/{c}")?;
        }
        Ok(())
    }
}

/// Whether a command-line argument names a group path (starts with `+`) rather than
/// an OS path. Says nothing about whether the group path is valid.
pub fn is_group_path(s: &str) -> bool {
    s.starts_with('+')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err(result: Result<impl fmt::Debug, NameError>) -> NameError {
        match result {
            Ok(v) => panic!("expected an error, got {v:?}"),
            Err(e) => e,
        }
    }

    /// Asserts the message is one line and contains every fragment.
    fn assert_message(e: &NameError, fragments: &[&str]) {
        let message = e.to_string();
        assert!(!message.contains('\n'), "two lines: {message}");
        for fragment in fragments {
            assert!(
                message.contains(fragment),
                "message {message:?} lacks {fragment:?}"
            );
        }
    }

    fn component(s: &str) -> Component {
        Component::parse(s).unwrap()
    }

    fn path(s: &str) -> GroupPath {
        GroupPath::parse(s).unwrap()
    }

    // ---- group names ----

    #[test]
    fn group_name_is_upper_cased() {
        assert_eq!(GroupName::parse("data").unwrap().as_str(), "DATA");
        assert_eq!(GroupName::parse("Reco_1").unwrap().to_string(), "RECO_1");
        assert_eq!(GroupName::parse("x").unwrap().as_str(), "X");
        assert_eq!(
            GroupName::parse("data").unwrap(),
            GroupName::parse("DATA").unwrap()
        );
    }

    #[test]
    fn group_name_length_limit() {
        let longest = format!("A{}", "b".repeat(GROUP_NAME_LEN_MAX - 1));
        assert_eq!(
            GroupName::parse(&longest).unwrap().as_str(),
            longest.to_ascii_uppercase()
        );
        let e = err(GroupName::parse(&format!("{longest}C")));
        assert!(matches!(e, NameError::GroupTooLong { len_bytes: 31, .. }));
        assert_message(
            &e,
            &["group name", "is 31 bytes; the limit is 30", "shorter"],
        );
    }

    #[test]
    fn group_name_empty() {
        let e = err(GroupName::parse(""));
        assert_eq!(e, NameError::GroupEmpty { path: None });
        assert_message(&e, &["group name is empty", "\"+DATA\""]);
    }

    #[test]
    fn group_name_must_start_with_letter() {
        for bad in ["1DATA", "_DATA"] {
            let e = err(GroupName::parse(bad));
            assert!(matches!(e, NameError::GroupFirstNotLetter { .. }), "{bad}");
            assert_message(&e, &[&format!("{bad:?}"), "starts with a letter"]);
        }
    }

    #[test]
    fn group_name_characters() {
        for (bad, ch) in [("DA-TA", '-'), ("DA TA", ' '), ("DA/TA", '/'), ("D.", '.')] {
            let e = err(GroupName::parse(bad));
            assert!(
                matches!(e, NameError::GroupBadChar { ch: c, .. } if c == ch),
                "{bad}: {e:?}"
            );
            assert_message(
                &e,
                &[&format!("the character {ch:?}"), "letters, digits and '_'"],
            );
        }
    }

    #[test]
    fn group_name_non_ascii() {
        let e = err(GroupName::parse("DÄTA"));
        assert!(matches!(e, NameError::GroupNonAscii { ch: 'Ä', .. }));
        assert_message(
            &e,
            &["\"DÄTA\"", "'Ä' (U+00C4)", "not ASCII", "case-insensitive"],
        );
    }

    // ---- components ----

    #[test]
    fn component_keeps_case_and_accepts_ordinary_names() {
        for good in [
            "users.dbf",
            "Users.DBF",
            "a b",
            "a+b",
            ".hidden",
            "...",
            "x.",
            "~",
            "a=b,c;d@e#f$g%h&i'j(k)l[m]n{o}p!q^r`s",
        ] {
            assert_eq!(component(good).as_str(), good);
            assert_eq!(component(good).to_string(), good);
        }
    }

    #[test]
    fn component_length_limit() {
        let longest = "a".repeat(COMPONENT_LEN_MAX);
        assert_eq!(component(&longest).as_str(), longest);
        let e = err(Component::parse(&"a".repeat(COMPONENT_LEN_MAX + 1)));
        assert_message(&e, &["is 97 bytes; the limit is 96", "shorter name"]);

        let e = err(Component::parse(&"a".repeat(120)));
        assert!(matches!(
            e,
            NameError::ComponentTooLong { len_bytes: 120, .. }
        ));
        let shown = format!(
            "component \"{}…\" is 120 bytes",
            "a".repeat(QUOTE_CHARS_MAX - 1)
        );
        assert_message(&e, &[&shown, "the limit is 96"]);
    }

    #[test]
    fn component_empty() {
        let e = err(Component::parse(""));
        assert_eq!(e, NameError::ComponentEmpty { path: None });
        assert_message(&e, &["empty path component", "one '/' between names"]);
    }

    #[test]
    fn component_dot_and_dot_dot() {
        for bad in [".", ".."] {
            let e = err(Component::parse(bad));
            assert!(matches!(e, NameError::ComponentDot { .. }));
            assert_message(
                &e,
                &[
                    &format!("path component {bad:?} is not allowed"),
                    "other than",
                ],
            );
        }
    }

    #[test]
    fn component_forbidden_characters() {
        for ch in COMPONENT_FORBIDDEN {
            let bad = format!("x{ch}y");
            let e = err(Component::parse(&bad));
            assert_eq!(
                e,
                NameError::ComponentBadChar {
                    component: bad.clone(),
                    ch: *ch,
                    path: None
                }
            );
            assert_message(
                &e,
                &[&format!(
                    "contains the character {ch:?}, which is not allowed"
                )],
            );
        }
        let e = err(Component::parse("x*y"));
        assert_message(
            &e,
            &["path component \"x*y\" contains the character '*', which is not allowed"],
        );
    }

    #[test]
    fn component_control_characters() {
        for ch in ['\0', '\t', '\n', '\r', '\x1b', '\x7f'] {
            let bad = format!("a{ch}b");
            let e = err(Component::parse(&bad));
            assert!(
                matches!(e, NameError::ComponentBadChar { ch: c, .. } if c == ch),
                "{ch:?}"
            );
            // One line even though the input is not; the character is shown escaped.
            assert_message(&e, &[&format!("{ch:?}"), "control characters"]);
        }
    }

    #[test]
    fn component_leading_plus() {
        let e = err(Component::parse("+DATA"));
        assert!(matches!(e, NameError::ComponentLeadingPlus { .. }));
        assert_message(&e, &["\"+DATA\" starts with '+'", "group path"]);
    }

    #[test]
    fn component_spaces_only_inside() {
        let e = err(Component::parse(" a"));
        assert!(matches!(e, NameError::ComponentLeadingSpace { .. }));
        assert_message(&e, &["\" a\" starts with a space", "remove"]);
        let e = err(Component::parse("a "));
        assert!(matches!(e, NameError::ComponentTrailingSpace { .. }));
        assert_message(&e, &["\"a \" ends with a space", "remove"]);
        assert!(matches!(
            err(Component::parse(" ")),
            NameError::ComponentLeadingSpace { .. }
        ));
    }

    #[test]
    fn component_non_ascii() {
        let e = err(Component::parse("café.dbf"));
        assert!(matches!(e, NameError::ComponentNonAscii { ch: 'é', .. }));
        assert_message(
            &e,
            &[
                "\"café.dbf\"",
                "'é' (U+00E9)",
                "not ASCII",
                "case-insensitive",
            ],
        );
    }

    #[test]
    fn component_key_ignores_ascii_case_only() {
        assert_eq!(component("Users.DBF").key(), "users.dbf");
        assert_eq!(component("Users.DBF").key(), component("uSERS.dbf").key());
        assert_ne!(component("users.dbf").key(), component("users.dbg").key());
        assert_ne!(component("Users.DBF"), component("users.dbf"));
    }

    // ---- group paths ----

    #[test]
    fn path_parses_group_and_components() {
        let p = path("+data/orcl/DataFile/users.dbf");
        assert_eq!(p.group.as_str(), "DATA");
        let spelled: Vec<&str> = p.components.iter().map(Component::as_str).collect();
        assert_eq!(spelled, ["orcl", "DataFile", "users.dbf"]);
        assert_eq!(p.to_string(), "+DATA/orcl/DataFile/users.dbf");
        assert!(!p.is_root());
    }

    #[test]
    fn path_root_forms() {
        for root in ["+DATA", "+DATA/", "+data", "+Data/"] {
            let p = path(root);
            assert!(p.is_root(), "{root}");
            assert_eq!(p.group.as_str(), "DATA");
            assert_eq!(p.to_string(), "+DATA");
            assert_eq!(p.parent(), None);
            assert_eq!(p.file_name(), None);
        }
    }

    #[test]
    fn path_one_trailing_slash_only() {
        assert_eq!(path("+DATA/a/b/"), path("+DATA/a/b"));
        for bad in [
            "+DATA//",
            "+DATA//x",
            "+DATA/a//",
            "+DATA/a//b",
            "+DATA/a///",
        ] {
            let e = err(GroupPath::parse(bad));
            assert_eq!(
                e,
                NameError::ComponentEmpty {
                    path: Some(bad.to_string())
                },
                "{bad}"
            );
            assert_message(&e, &["empty path component", &format!("in {bad:?}")]);
        }
    }

    #[test]
    fn path_needs_plus() {
        for bad in ["DATA/a", "", "/DATA/a", " +DATA"] {
            let e = err(GroupPath::parse(bad));
            assert_eq!(
                e,
                NameError::NotGroupPath {
                    text: bad.to_string()
                }
            );
            assert_message(
                &e,
                &[&format!("{bad:?} is not a group path"), "starts with '+'"],
            );
        }
    }

    #[test]
    fn path_group_errors_name_the_path() {
        let e = err(GroupPath::parse("+"));
        assert_eq!(
            e,
            NameError::GroupEmpty {
                path: Some("+".to_string())
            }
        );
        assert!(matches!(
            err(GroupPath::parse("+/a")),
            NameError::GroupEmpty { .. }
        ));
        let e = err(GroupPath::parse("+1DATA/x"));
        assert_message(
            &e,
            &[
                "group name \"1DATA\" in \"+1DATA/x\"",
                "starts with a letter",
            ],
        );
        let e = err(GroupPath::parse("++DATA"));
        assert!(matches!(e, NameError::GroupFirstNotLetter { ch: '+', .. }));
    }

    #[test]
    fn path_component_errors_name_the_path() {
        let e = err(GroupPath::parse("+DATA/a/../b"));
        assert_eq!(
            e,
            NameError::ComponentDot {
                component: "..".to_string(),
                path: Some("+DATA/a/../b".to_string())
            }
        );
        assert_message(
            &e,
            &[
                "path component \"..\" in \"+DATA/a/../b\" is not allowed",
                "use a name other than \".\" or \"..\"",
            ],
        );
        let e = err(GroupPath::parse("+DATA/x*y"));
        assert_message(
            &e,
            &["path component \"x*y\" in \"+DATA/x*y\" contains the character '*', which is not allowed"],
        );
        let e = err(GroupPath::parse("+DATA/+RECO/x"));
        assert!(matches!(e, NameError::ComponentLeadingPlus { .. }));
        let e = err(GroupPath::parse("+DATA/a\\b"));
        assert!(matches!(e, NameError::ComponentBadChar { ch: '\\', .. }));
        let e = err(GroupPath::parse("+DATA/naïve"));
        assert_message(&e, &["in \"+DATA/naïve\"", "not ASCII"]);
    }

    fn deep(depth: usize) -> String {
        let mut s = "+DATA".to_string();
        for i in 0..depth {
            s.push_str(&format!("/d{i}"));
        }
        s
    }

    #[test]
    fn path_depth_limit() {
        assert_eq!(path(&deep(PATH_DEPTH_MAX)).components.len(), PATH_DEPTH_MAX);
        let e = err(GroupPath::parse(&deep(PATH_DEPTH_MAX + 1)));
        assert!(matches!(e, NameError::PathTooDeep { depth: 33, .. }));
        assert_message(
            &e,
            &[
                "has 33 components; the limit is 32",
                "fewer directory levels",
            ],
        );
    }

    /// `+DATA/` then components joined by '/' of exactly `len_bytes` bytes.
    fn long(len_bytes: usize) -> String {
        let full = (len_bytes + 1) / (COMPONENT_LEN_MAX + 1);
        let mut parts = vec!["a".repeat(COMPONENT_LEN_MAX); full];
        let rest = len_bytes - full * (COMPONENT_LEN_MAX + 1);
        assert!(rest > 0, "pick a length that leaves a last component");
        parts.push("b".repeat(rest));
        let s = format!("+DATA/{}", parts.join("/"));
        assert_eq!(s.len() - "+DATA/".len(), len_bytes);
        s
    }

    #[test]
    fn path_length_limit() {
        let longest = path(&long(PATH_LEN_MAX));
        assert_eq!(joined_len_bytes(&longest.components), PATH_LEN_MAX);
        // The trailing '/' does not count.
        assert!(GroupPath::parse(&format!("{}/", long(PATH_LEN_MAX))).is_ok());
        let e = err(GroupPath::parse(&long(PATH_LEN_MAX + 1)));
        assert!(matches!(
            e,
            NameError::PathTooLong {
                len_bytes: 1025,
                ..
            }
        ));
        assert_message(
            &e,
            &[
                "is 1025 bytes after the group name; the limit is 1024",
                "…\"",
            ],
        );
    }

    #[test]
    fn parent_and_file_name() {
        let p = path("+DATA/orcl/datafile/users.dbf");
        assert_eq!(p.file_name(), Some(&component("users.dbf")));
        let parent = p.parent().unwrap();
        assert_eq!(parent.to_string(), "+DATA/orcl/datafile");
        assert_eq!(parent.file_name(), Some(&component("datafile")));
        let top = path("+DATA/orcl");
        assert_eq!(top.parent(), Some(path("+DATA")));
    }

    #[test]
    fn join_appends_and_enforces_limits() {
        let p = path("+DATA/orcl").join(component("Users.dbf")).unwrap();
        assert_eq!(p.to_string(), "+DATA/orcl/Users.dbf");
        assert_eq!(p.parent(), Some(path("+DATA/orcl")));
        assert_eq!(path("+DATA").join(component("a")).unwrap(), path("+DATA/a"));

        let full_depth = path(&deep(PATH_DEPTH_MAX));
        let e = err(full_depth.join(component("x")));
        assert!(matches!(e, NameError::PathTooDeep { depth: 33, .. }));
        assert_message(&e, &["the limit is 32"]);

        let almost = path(&long(PATH_LEN_MAX - 2));
        assert!(almost.join(component("x")).is_ok());
        let e = err(almost.join(component("xy")));
        assert!(matches!(
            e,
            NameError::PathTooLong {
                len_bytes: 1025,
                ..
            }
        ));
        assert_message(&e, &["the limit is 1024"]);
    }

    #[test]
    fn group_path_detection() {
        assert!(is_group_path("+DATA/a"));
        assert!(is_group_path("+"));
        assert!(!is_group_path("/dev/sdb"));
        assert!(!is_group_path("DATA"));
        assert!(!is_group_path(""));
    }

    #[test]
    fn serializes_as_strings() {
        let p = path("+data/Orcl");
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"group":"DATA","components":["Orcl"]}"#
        );
    }

    // ---- properties ----

    /// Bytes a component may hold anywhere but its ends: printable ASCII and space,
    /// minus the forbidden set — restated here rather than taken from the module.
    fn middle_bytes() -> Vec<u8> {
        (0x20u8..=0x7e)
            .filter(|b| !br#"/\*?"<>|:"#.contains(b))
            .collect()
    }

    fn valid_component(len_max: usize) -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(middle_bytes()), 1..=len_max)
            .prop_map(|bytes| String::from_utf8(bytes).unwrap())
            .prop_filter("component rules", |s| {
                !s.starts_with(' ')
                    && !s.ends_with(' ')
                    && !s.starts_with('+')
                    && s != "."
                    && s != ".."
            })
    }

    /// A group, as typed (any case), and components within the limits.
    fn valid_path() -> impl Strategy<Value = (String, Vec<String>)> {
        let short = prop::collection::vec(valid_component(12), 0..=PATH_DEPTH_MAX);
        let long = prop::collection::vec(valid_component(COMPONENT_LEN_MAX), 0..=12);
        (
            "[A-Za-z][A-Za-z0-9_]{0,29}",
            prop_oneof![short, long].prop_map(|mut parts| {
                while parts.iter().map(|p| p.len() + 1).sum::<usize>() > PATH_LEN_MAX + 1 {
                    parts.pop();
                }
                parts
            }),
        )
    }

    /// Strings near the grammar, so that parsing gets past the first check.
    fn near_path() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "\\+[A-Za-z0-9_+ ]{0,33}(/{1,2}[ -~\\t\\n]{0,100}){0,40}/?",
            "\\+[A-Za-z]{1,4}(/[a-z.]{0,3}){0,6}/{0,2}",
            "\\+[A-Za-z]{1,4}(/[a-z\u{e9}\u{130}\u{df}]{1,3}){0,3}",
        ]
    }

    proptest! {
        #[test]
        fn prop_display_then_parse_round_trips((group, parts) in valid_path(), trailing_slash in any::<bool>()) {
            let p = GroupPath {
                group: GroupName::parse(&group).unwrap(),
                components: parts.iter().map(|c| Component::parse(c).unwrap()).collect(),
            };
            let shown = p.to_string();
            let mut expected = format!("+{}", group.to_ascii_uppercase());
            for part in &parts {
                expected.push('/');
                expected.push_str(part);
            }
            prop_assert_eq!(&shown, &expected);
            prop_assert_eq!(GroupPath::parse(&shown).unwrap(), p.clone());
            let mut typed = format!("+{group}");
            for part in &parts {
                typed.push('/');
                typed.push_str(part);
            }
            if trailing_slash {
                typed.push('/');
            }
            prop_assert_eq!(GroupPath::parse(&typed).unwrap(), p.clone());

            // Building the same path one join at a time gives the same value.
            let mut built = GroupPath { group: p.group.clone(), components: Vec::new() };
            for part in &p.components {
                built = built.join(part.clone()).unwrap();
            }
            prop_assert_eq!(built, p);
        }

        #[test]
        fn prop_parse_never_panics_and_results_are_valid(s in near_path()) {
            match GroupPath::parse(&s) {
                Ok(p) => {
                    prop_assert!(is_group_path(&s));
                    prop_assert!(p.components.len() <= PATH_DEPTH_MAX);
                    prop_assert!(joined_len_bytes(&p.components) <= PATH_LEN_MAX);
                    for c in &p.components {
                        prop_assert!(!c.as_str().is_empty() && c.as_str().len() <= COMPONENT_LEN_MAX);
                        prop_assert!(c.as_str().bytes().all(|b| (0x20..=0x7e).contains(&b)));
                    }
                    prop_assert_eq!(GroupPath::parse(&p.to_string()).unwrap(), p);
                }
                Err(e) => {
                    let message = e.to_string();
                    prop_assert!(!message.contains('\n'), "two lines: {}", message);
                    prop_assert!(message.chars().count() < 2 * 10 * QUOTE_CHARS_MAX + 400, "too long: {}", message);
                }
            }
        }

        #[test]
        fn prop_key_equality_is_ascii_case_insensitive_equality(
            a in valid_component(8),
            flips in prop::collection::vec(any::<bool>(), 8),
            change in prop::option::of((0usize..8, prop::sample::select(middle_bytes()))),
            other in valid_component(8),
        ) {
            let a_component = Component::parse(&a).unwrap();
            // b: a with some letters' case flipped and maybe one byte replaced.
            let mut b: Vec<u8> = a.bytes().zip(flips.iter().cycle())
                .map(|(byte, flip)| if *flip { byte ^ (u8::from(byte.is_ascii_alphabetic()) << 5) } else { byte })
                .collect();
            if let Some((at, byte)) = change {
                let at = at % b.len();
                b[at] = byte;
            }
            let b = String::from_utf8(b).unwrap();
            for candidate in [b, other] {
                if let Ok(c) = Component::parse(&candidate) {
                    prop_assert_eq!(
                        a_component.key() == c.key(),
                        a.eq_ignore_ascii_case(&candidate),
                        "{:?} vs {:?}", a, candidate
                    );
                }
            }
            prop_assert_eq!(a_component.key().len(), a.len());
        }

        #[test]
        fn prop_components_parse_alone_iff_in_a_path(s in "[ -~\u{e9}]{0,100}") {
            let alone = Component::parse(&s);
            let in_path = GroupPath::parse(&format!("+DATA/{s}"));
            if s.is_empty() || s.contains('/') {
                return Ok(());
            }
            match (alone, in_path) {
                (Ok(c), Ok(p)) => prop_assert_eq!(p.components, vec![c]),
                (Err(e), Err(e_path)) => prop_assert_eq!(e.in_path(&format!("+DATA/{s}")), e_path),
                (alone, in_path) => prop_assert!(false, "{:?} vs {:?}", alone, in_path),
            }
        }
    }
}
