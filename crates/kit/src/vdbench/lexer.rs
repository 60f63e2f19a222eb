//! Parameter-file text into lines of `key=value` items.
//!
//! Per physical line: drop comments (a line whose first non-blank character is
//! `*` or `#` or that starts with `//`; from a `#` that follows a blank to the
//! end of the line), substitute `$name` / `${name}`, split into comma-separated
//! `key=value` items, and splice `include=FILE` lines by reading the file in
//! place. Every character keeps the column it had in the file (characters
//! substituted for a `$variable` take the column of the `$`), so every later
//! error can point at its token.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path, PathBuf};

use super::error::{clean, Error, Pos, Result};
use crate::model::SourceFile;

/// How deep `include=` may nest: deep enough for any real file layout, small
/// enough that a cycle the path comparison cannot see (through a symlink) ends.
pub(crate) const INCLUDE_DEPTH_MAX: usize = 16;
/// Lines read in all, across includes: bounds the work a file that includes
/// the same file many times (at many levels) can cause.
pub(crate) const LINES_MAX: usize = 100_000;

/// One value: a scalar, or a parenthesised list of scalars.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Scalar(Scalar),
    List { open: Pos, items: Vec<Scalar> },
}

impl Value {
    pub(crate) fn pos(&self) -> Pos {
        match self {
            Value::Scalar(s) => s.pos,
            Value::List { open, .. } => *open,
        }
    }

    /// The scalars, one for a scalar value.
    pub(crate) fn elements(&self) -> &[Scalar] {
        match self {
            Value::Scalar(s) => std::slice::from_ref(s),
            Value::List { items, .. } => items,
        }
    }
}

/// A token's text and the column of each of its characters.
#[derive(Debug, Clone)]
pub(crate) struct Scalar {
    pub text: String,
    pub pos: Pos,
    /// Column of each character of `text` (same length as `text.chars()`).
    cols: Vec<usize>,
}

impl Scalar {
    /// The part of this scalar from character `start` on, with its own position
    /// (for the `to` of a range `from-to`).
    pub(crate) fn tail(&self, start: usize) -> Scalar {
        let text: String = self.text.chars().skip(start).collect();
        let cols: Vec<usize> = self.cols.iter().skip(start).copied().collect();
        let column = cols.first().copied().unwrap_or(self.pos.column);
        Scalar {
            text,
            pos: Pos { column, ..self.pos },
            cols,
        }
    }

    /// The first `len` characters.
    pub(crate) fn head(&self, len: usize) -> Scalar {
        Scalar {
            text: self.text.chars().take(len).collect(),
            pos: self.pos,
            cols: self.cols.iter().take(len).copied().collect(),
        }
    }
}

/// `key=value`; the key lower-cased (keywords are case-insensitive).
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub key: String,
    pub key_pos: Pos,
    pub value: Value,
}

/// The items of one physical line (never empty once lexed).
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub items: Vec<Item>,
    /// The line ended in a comma: the record it belongs to goes on.
    pub trailing_comma: bool,
}

/// Everything read: the lines of all files in order, includes spliced.
pub(crate) struct Lexed {
    pub lines: Vec<Line>,
    pub files: Vec<SourceFile>,
    pub used_variables: BTreeSet<String>,
    /// Just past the last line of the top file (for "missing rd" errors).
    pub end: Pos,
}

pub(crate) struct Lexer<'a> {
    variables: &'a BTreeMap<String, String>,
    read_include: &'a mut dyn FnMut(&Path) -> io::Result<String>,
    /// Pos.file → the path as named (joined to the including file's directory).
    paths: Vec<PathBuf>,
    files: Vec<SourceFile>,
    /// Normalised paths of the files being read, outermost first (cycle check).
    stack: Vec<PathBuf>,
    used_variables: BTreeSet<String>,
    lines: Vec<Line>,
    lines_read: usize,
    end: Pos,
}

type Chars = Vec<(char, usize)>;

impl<'a> Lexer<'a> {
    pub(crate) fn new(
        variables: &'a BTreeMap<String, String>,
        read_include: &'a mut dyn FnMut(&Path) -> io::Result<String>,
    ) -> Self {
        Self {
            variables,
            read_include,
            paths: Vec::new(),
            files: Vec::new(),
            stack: Vec::new(),
            used_variables: BTreeSet::new(),
            lines: Vec::new(),
            lines_read: 0,
            end: Pos {
                file: 0,
                line: 1,
                column: 1,
            },
        }
    }

    pub(crate) fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    pub(crate) fn finish(self) -> Lexed {
        Lexed {
            lines: self.lines,
            files: self.files,
            used_variables: self.used_variables,
            end: self.end,
        }
    }

    /// Reads one file's text (the top file, or an included one) into lines.
    pub(crate) fn lex_file(&mut self, path: &Path, text: &str) -> Result<()> {
        // A byte-order mark (editors on Windows add one) is not part of the first key.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let file = self.paths.len();
        self.paths.push(path.to_path_buf());
        if !self.files.iter().any(|f| f.path == path) {
            self.files.push(SourceFile {
                path: path.to_path_buf(),
                text: text.to_string(),
            });
        }
        self.stack.push(normalise(path));
        let mut last_line = 0;
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            last_line = line;
            self.lines_read += 1;
            if self.lines_read > LINES_MAX {
                return Err(Error::at(
                    Pos {
                        file,
                        line,
                        column: 1,
                    },
                    format!(
                        "more than {LINES_MAX} lines with every include= read; \
                         expected a smaller parameter file (is a file included many times over?)"
                    ),
                ));
            }
            let chars = strip_comment(raw);
            let chars = self.substitute(&chars, file, line)?;
            let parsed = tokenize(&chars, file, line)?;
            if parsed.items.is_empty() {
                continue;
            }
            if let Some(at) = parsed.items.iter().position(|item| item.key == "include") {
                self.include(path, &parsed, at)?;
                continue;
            }
            self.lines.push(parsed);
        }
        if file == 0 {
            self.end = Pos {
                file,
                line: last_line.max(1),
                column: 1,
            };
        }
        self.stack.pop();
        Ok(())
    }

    fn include(&mut self, including: &Path, line: &Line, at: usize) -> Result<()> {
        let item = &line.items[at];
        if line.items.len() != 1 {
            return Err(Error::at(
                item.key_pos,
                "include= shares its line with other parameters; expected include=FILE on a line of its own",
            ));
        }
        let Value::Scalar(name) = &item.value else {
            return Err(Error::at(
                item.value.pos(),
                "include= names a list; expected one file: include=FILE",
            ));
        };
        if name.text.is_empty() {
            return Err(Error::at(
                name.pos,
                "include= names no file; expected include=FILE",
            ));
        }
        let target = including.parent().unwrap_or(Path::new("")).join(&name.text);
        let normal = normalise(&target);
        if let Some(first) = self.stack.iter().position(|p| *p == normal) {
            let chain: Vec<String> = self.stack[first..]
                .iter()
                .chain(std::iter::once(&normal))
                .map(|p| clean(&p.display().to_string()))
                .collect();
            return Err(Error::at(
                name.pos,
                format!("include cycle: {}; expected each file to be included at most once along a chain", chain.join(" includes ")),
            ));
        }
        if self.stack.len() >= INCLUDE_DEPTH_MAX {
            return Err(Error::at(
                name.pos,
                format!("include= nested more than {INCLUDE_DEPTH_MAX} deep; expected a shallower chain of includes"),
            ));
        }
        let text = (self.read_include)(&target).map_err(|e| {
            Error::at(
                name.pos,
                format!(
                    "cannot read included file `{}`: {e}",
                    clean(&target.display().to_string())
                ),
            )
        })?;
        self.lex_file(&target, &text)
    }

    /// Replaces `$name` and `${name}` by the command-line value; the value's
    /// characters take the `$`'s column.
    fn substitute(&mut self, chars: &[(char, usize)], file: usize, line: usize) -> Result<Chars> {
        let mut out = Vec::with_capacity(chars.len());
        let mut i = 0;
        while i < chars.len() {
            let (c, column) = chars[i];
            if c != '$' {
                out.push((c, column));
                i += 1;
                continue;
            }
            let pos = Pos { file, line, column };
            let (name, next) = if chars.get(i + 1).map(|x| x.0) == Some('{') {
                let Some(close) = chars[i + 2..].iter().position(|x| x.0 == '}') else {
                    return Err(Error::at(pos, "`${` is not closed; expected ${name}"));
                };
                let name: String = chars[i + 2..i + 2 + close].iter().map(|x| x.0).collect();
                (name, i + 3 + close)
            } else {
                let len = chars[i + 1..]
                    .iter()
                    .take_while(|x| x.0.is_ascii_alphanumeric() || x.0 == '_')
                    .count();
                let name: String = chars[i + 1..i + 1 + len].iter().map(|x| x.0).collect();
                (name, i + 1 + len)
            };
            if !is_variable_name(&name) {
                return Err(Error::at(
                    pos,
                    format!("`${}` is not a variable; expected $name or ${{name}} (letters, digits, `_`)", clean(&name)),
                ));
            }
            let Some(value) = self.variables.get(&name) else {
                let defined = if self.variables.is_empty() {
                    "none is defined".to_string()
                } else {
                    let names: Vec<String> = self.variables.keys().map(|k| clean(k)).collect();
                    format!("defined: {}", names.join(", "))
                };
                return Err(Error::at(
                    pos,
                    format!(
                        "undefined variable `${}`; expected it on the command line as {}=VALUE ({defined})",
                        clean(&name),
                        clean(&name)
                    ),
                ));
            };
            self.used_variables.insert(name);
            out.extend(value.chars().map(|c| (c, column)));
            i = next;
        }
        Ok(out)
    }
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `a/./b/../c` → `a/c`, without touching the file system (the text may not
/// come from one): enough to see that a file includes itself.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !matches!(out.components().next_back(), Some(Component::Normal(_))) || !out.pop()
                {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The line's characters with their columns, comments removed.
fn strip_comment(raw: &str) -> Chars {
    let chars: Chars = raw.chars().enumerate().map(|(i, c)| (c, i + 1)).collect();
    let Some(first) = chars.iter().position(|x| !x.0.is_whitespace()) else {
        return Vec::new();
    };
    let c = chars[first].0;
    if c == '*' || c == '#' || (c == '/' && chars.get(first + 1).map(|x| x.0) == Some('/')) {
        return Vec::new();
    }
    let mut in_quote = false;
    for k in first..chars.len() {
        match chars[k].0 {
            '"' => in_quote = !in_quote,
            '#' if !in_quote && chars[k - 1].0.is_whitespace() => return chars[..k].to_vec(),
            _ => {}
        }
    }
    chars
}

/// Splits a line into `key=value` items separated by commas.
fn tokenize(chars: &[(char, usize)], file: usize, line: usize) -> Result<Line> {
    let mut t = Tokens {
        chars,
        i: 0,
        file,
        line,
    };
    let mut items = Vec::new();
    let mut trailing_comma = false;
    t.skip_blanks();
    if t.at_end() {
        return Ok(Line {
            items,
            trailing_comma,
        });
    }
    loop {
        t.skip_blanks();
        items.push(t.item()?);
        t.skip_blanks();
        match t.peek() {
            None => break,
            Some(',') => {
                t.i += 1;
                t.skip_blanks();
                if t.at_end() {
                    trailing_comma = true;
                    break;
                }
            }
            Some(c) => {
                return Err(Error::at(
                    t.pos(),
                    format!(
                        "unexpected `{}` after a value; expected `,` or the end of the line",
                        clean(&c.to_string())
                    ),
                ))
            }
        }
    }
    Ok(Line {
        items,
        trailing_comma,
    })
}

struct Tokens<'c> {
    chars: &'c [(char, usize)],
    i: usize,
    file: usize,
    line: usize,
}

impl Tokens<'_> {
    fn at_end(&self) -> bool {
        self.i >= self.chars.len()
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).map(|x| x.0)
    }

    fn pos_of(&self, i: usize) -> Pos {
        let column = match self.chars.get(i) {
            Some(x) => x.1,
            None => self.chars.last().map_or(1, |x| x.1 + 1),
        };
        Pos {
            file: self.file,
            line: self.line,
            column,
        }
    }

    fn pos(&self) -> Pos {
        self.pos_of(self.i)
    }

    fn skip_blanks(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.i += 1;
        }
    }

    /// `key=value` from the current position.
    fn item(&mut self) -> Result<Item> {
        let start = self.i;
        while self.peek().is_some_and(|c| c != '=' && c != ',') {
            self.i += 1;
        }
        let raw: String = self.chars[start..self.i].iter().map(|x| x.0).collect();
        let key = raw.trim_end();
        let key_pos = self.pos_of(start);
        match self.peek() {
            Some('=') => {}
            _ if key.is_empty() => {
                return Err(Error::at(
                    key_pos,
                    "empty parameter between commas; expected key=value",
                ));
            }
            _ => {
                return Err(Error::at(
                    key_pos,
                    format!("expected key=value, found `{}` with no `=`", clean(key)),
                ));
            }
        }
        if key.is_empty() {
            return Err(Error::at(
                key_pos,
                "`=` with no parameter name before it; expected key=value",
            ));
        }
        if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::at(
                key_pos,
                format!("`{}` is not a parameter name; expected key=value with a name of letters, digits and `_`", clean(key)),
            ));
        }
        let key = key.to_ascii_lowercase();
        let equals = self.i;
        self.i += 1;
        self.skip_blanks();
        let value = match self.peek() {
            None | Some(',') => {
                return Err(Error::at(
                    self.pos_of(equals),
                    format!("`{key}=` has no value; expected {key}=VALUE"),
                ));
            }
            Some('(') => self.list()?,
            Some('"') => Value::Scalar(self.quoted()?),
            Some(_) => Value::Scalar(self.bare(&key, false)?),
        };
        Ok(Item {
            key,
            key_pos,
            value,
        })
    }

    /// `(a,b,…)`, on one line.
    fn list(&mut self) -> Result<Value> {
        let open = self.pos();
        self.i += 1;
        let mut items = Vec::new();
        loop {
            self.skip_blanks();
            match self.peek() {
                None => {
                    return Err(Error::at(
                        open,
                        "`(` is not closed; expected `)` before the end of the line (a list cannot span lines)",
                    ))
                }
                Some(')') if items.is_empty() => return Err(Error::at(open, "empty list `()`; expected (value,…)")),
                Some('"') => items.push(self.quoted()?),
                Some(',') | Some(')') => {
                    return Err(Error::at(self.pos(), "empty list element; expected a value between the commas"))
                }
                Some(_) => items.push(self.bare("", true)?),
            }
            self.skip_blanks();
            match self.peek() {
                Some(',') => self.i += 1,
                Some(')') => {
                    self.i += 1;
                    return Ok(Value::List { open, items });
                }
                None => {
                    return Err(Error::at(
                        open,
                        "`(` is not closed; expected `)` before the end of the line (a list cannot span lines)",
                    ))
                }
                Some(c) => {
                    return Err(Error::at(
                        self.pos(),
                        format!("unexpected `{}` in a list; expected `,` or `)`", clean(&c.to_string())),
                    ))
                }
            }
        }
    }

    /// `"…"`: commas, parentheses and `#` are literal inside.
    fn quoted(&mut self) -> Result<Scalar> {
        let open = self.pos();
        self.i += 1;
        let start = self.i;
        while self.peek().is_some_and(|c| c != '"') {
            self.i += 1;
        }
        if self.at_end() {
            return Err(Error::at(
                open,
                "`\"` is not closed; expected a closing `\"` on the same line",
            ));
        }
        let scalar = self.scalar(start, self.i);
        self.i += 1;
        Ok(Scalar {
            pos: if scalar.text.is_empty() {
                open
            } else {
                scalar.pos
            },
            ..scalar
        })
    }

    /// A value up to the next `,` (or `)` in a list), trailing blanks dropped.
    fn bare(&mut self, key: &str, in_list: bool) -> Result<Scalar> {
        let start = self.i;
        while let Some(c) = self.peek() {
            match c {
                ',' => break,
                ')' if in_list => break,
                '(' | ')' | '"' => {
                    let what = if in_list {
                        "lists do not nest and quotes must enclose a whole element".to_string()
                    } else {
                        format!("a list must be the whole value, as in {key}=(a,b)")
                    };
                    return Err(Error::at(
                        self.pos(),
                        format!("unexpected `{c}` inside a value; {what}"),
                    ));
                }
                _ => self.i += 1,
            }
        }
        let mut end = self.i;
        while end > start && self.chars[end - 1].0.is_whitespace() {
            end -= 1;
        }
        Ok(self.scalar(start, end))
    }

    fn scalar(&self, start: usize, end: usize) -> Scalar {
        let slice = &self.chars[start..end];
        Scalar {
            text: slice.iter().map(|x| x.0).collect(),
            pos: self.pos_of(start),
            cols: slice.iter().map(|x| x.1).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn lex(text: &str) -> Result<Vec<Line>> {
        let vars = BTreeMap::from([("dir".to_string(), "/tmp/x".to_string())]);
        let mut read =
            |_: &Path| -> io::Result<String> { Err(io::Error::other("no includes here")) };
        let mut lexer = Lexer::new(&vars, &mut read);
        lexer.lex_file(Path::new("t.vdb"), text)?;
        Ok(lexer.finish().lines)
    }

    #[test]
    fn comments_are_dropped_but_hashes_inside_values_stay() {
        let lines =
            lex("* star\n# hash\n// slashes\n  * indented\nsd=sd1,lun=/a#b # tail\n").unwrap();
        assert_eq!(lines.len(), 1);
        let Value::Scalar(lun) = &lines[0].items[1].value else {
            panic!("scalar")
        };
        assert_eq!(lun.text, "/a#b");
    }

    #[test]
    fn columns_follow_the_file_through_substitution() {
        let lines = lex("sd=sd1,lun=$dir/f,size=1x").unwrap();
        let Value::Scalar(lun) = &lines[0].items[1].value else {
            panic!("scalar")
        };
        assert_eq!(lun.text, "/tmp/x/f");
        assert_eq!(lun.pos.column, 12);
        assert_eq!(lines[0].items[2].key_pos.column, 19);
        let Value::Scalar(size) = &lines[0].items[2].value else {
            panic!("scalar")
        };
        assert_eq!(size.pos.column, 24);
    }

    #[test]
    fn lists_quotes_and_trailing_commas() {
        let lines = lex("wd=w, xfersize=( 4k , 50,8k,50 ) ,lun=\"a, (b)\",").unwrap();
        assert!(lines[0].trailing_comma);
        let Value::List { items, open } = &lines[0].items[1].value else {
            panic!("list")
        };
        assert_eq!(open.column, 16);
        let texts: Vec<&str> = items.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["4k", "50", "8k", "50"]);
        assert_eq!(items[0].pos.column, 18);
        let Value::Scalar(lun) = &lines[0].items[2].value else {
            panic!("scalar")
        };
        assert_eq!(lun.text, "a, (b)");
    }

    #[test]
    fn malformed_lines_point_at_the_token() {
        let cases = [
            ("sd=sd1,,lun=x", 8, "empty parameter"),
            ("sd=sd1,lun", 8, "no `=`"),
            ("sd=sd1,lun=", 11, "has no value"),
            ("sd=sd1,size=(1,2", 13, "not closed"),
            ("sd=sd1,size=(1,(2))", 16, "lists do not nest"),
            ("sd=sd1,size=1(2)", 14, "a list must be the whole value"),
            ("sd=sd1,size=(1,2) x", 19, "expected `,`"),
            ("sd=sd1,lun=\"abc", 12, "not closed"),
            ("sd=sd1,l n=x", 8, "not a parameter name"),
            ("sd=sd1,=x", 8, "no parameter name"),
            ("sd=sd1,lun=$nope", 12, "undefined variable `$nope`"),
            ("sd=sd1,lun=${dir", 12, "not closed"),
            ("sd=sd1,lun=$-", 12, "not a variable"),
            ("sd=sd1,size=()", 13, "empty list"),
            ("sd=sd1,size=(1,,2)", 16, "empty list element"),
        ];
        for (text, column, fragment) in cases {
            let e = lex(text).err().unwrap_or_else(|| panic!("{text} parsed"));
            assert_eq!(
                (e.pos.line, e.pos.column),
                (1, column),
                "{text}: {}",
                e.message
            );
            assert!(e.message.contains(fragment), "{text}: {}", e.message);
        }
    }

    #[test]
    fn normalise_resolves_dots_lexically() {
        assert_eq!(normalise(Path::new("a/./b/../c")), PathBuf::from("a/c"));
        assert_eq!(normalise(Path::new("../a")), PathBuf::from("../a"));
        assert_eq!(normalise(Path::new("a/../../b")), PathBuf::from("../b"));
    }
}
