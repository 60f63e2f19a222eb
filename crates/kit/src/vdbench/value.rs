//! Values: numbers, sizes with k/m/g/t (powers of 1024), durations, percentages,
//! bands, lists and ranges `(from-to,step)`, and name lists with wildcards.
//!
//! Sizes are computed exactly (integers, never through a float), so `1.5k` is
//! 1536 and `1.3k` is an error rather than 1331 bytes.

use std::time::Duration;

use super::error::{clean, Error, Pos, Result};
use super::lexer::{Scalar, Value};
use crate::model::{Band, Bound, Seek};

/// Values one list or range may expand into: `forthreads=(1-1000000)` is a
/// mistake, not a plan.
pub(crate) const LIST_VALUES_MAX: usize = 10_000;
/// The longest time a duration may be: a run's longest (anything longer is a typo).
pub(crate) const DURATION_MAX_SECS: f64 = crate::model::RUN_TIME_MAX.as_secs_f64();

/// `digits[.digits]` as (all digits as an integer, digits after the point).
fn decimal(text: &str) -> Option<(u128, u32)> {
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, f),
        None => (text, ""),
    };
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    if text.contains('.') && frac.is_empty() {
        return None;
    }
    // 38 digits fit in a u128; more are never a real parameter.
    if int.len() + frac.len() > 36 {
        return None;
    }
    let mut mantissa: u128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        mantissa = mantissa * 10 + u128::from(b - b'0');
    }
    Some((mantissa, u32::try_from(frac.len()).ok()?))
}

fn to_f64(mantissa: u128, frac_digits: u32) -> f64 {
    // Precision loss is fine: these are rates and percentages, not addresses.
    #[allow(clippy::cast_precision_loss)]
    let m = mantissa as f64;
    m / 10f64.powi(i32::try_from(frac_digits).unwrap_or(i32::MAX))
}

/// A plain non-negative decimal: `70`, `12.5`.
pub(crate) fn number(s: &Scalar, what: &str) -> Result<f64> {
    match decimal(s.text.trim()) {
        Some((m, f)) => Ok(to_f64(m, f)),
        None => Err(Error::at(
            s.pos,
            format!("expected {what}, found `{}`", clean(&s.text)),
        )),
    }
}

/// A whole number with no suffix.
pub(crate) fn whole(s: &Scalar, what: &str) -> Result<u64> {
    match decimal(s.text.trim()) {
        Some((m, 0)) => u64::try_from(m)
            .map_err(|_| Error::at(s.pos, format!("{what} `{}` is too large", clean(&s.text)))),
        _ => Err(Error::at(
            s.pos,
            format!(
                "expected {what} (a whole number), found `{}`",
                clean(&s.text)
            ),
        )),
    }
}

/// A whole number in `min..=max`.
pub(crate) fn whole_in(s: &Scalar, what: &str, min: u64, max: u64) -> Result<u64> {
    let n = whole(s, what)?;
    if n < min || n > max {
        return Err(Error::at(
            s.pos,
            format!("{what} {n} is out of range; expected {min} to {max}"),
        ));
    }
    Ok(n)
}

/// A percentage, 0 to 100.
pub(crate) fn percent(s: &Scalar, what: &str) -> Result<f64> {
    let n = number(s, &format!("{what} as a percentage from 0 to 100"))?;
    if n > 100.0 {
        return Err(Error::at(
            s.pos,
            format!(
                "{what} {} is over 100; expected a percentage from 0 to 100",
                fmt_num(n)
            ),
        ));
    }
    Ok(n)
}

fn multiplier(suffix: char) -> Option<u128> {
    match suffix.to_ascii_lowercase() {
        'k' => Some(1 << 10),
        'm' => Some(1 << 20),
        'g' => Some(1 << 30),
        't' => Some(1 << 40),
        _ => None,
    }
}

/// Why a text is not a size (the text quoted safely, [`clean`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error(
        "expected a size like 8k, 1m, 1.5g or 4096 (k, m, g, t are powers of 1024), found `{0}`"
    )]
    NotASize(String),
    #[error("size `{0}` is too large")]
    TooLarge(String),
    #[error("size `{0}` is not a whole number of bytes")]
    NotWhole(String),
}

/// Bytes from `8k`, `1m`, `4096`, `1.5g` (k = 1024; case-insensitive).
pub(crate) fn size_bytes(text: &str) -> std::result::Result<u64, SizeError> {
    let text = text.trim();
    let expected = || SizeError::NotASize(clean(text));
    let (digits, mult) = match text.chars().last().and_then(multiplier) {
        Some(mult) => (&text[..text.len() - 1], mult),
        None => (text, 1),
    };
    let (mantissa, frac_digits) = decimal(digits).ok_or_else(expected)?;
    let scale = 10u128.pow(frac_digits);
    let too_large = || SizeError::TooLarge(clean(text));
    let scaled = mantissa.checked_mul(mult).ok_or_else(too_large)?;
    if scaled % scale != 0 {
        return Err(SizeError::NotWhole(clean(text)));
    }
    u64::try_from(scaled / scale).map_err(|_| too_large())
}

/// A size in bytes (see [`size_bytes`]).
pub(crate) fn size(s: &Scalar, what: &str) -> Result<u64> {
    size_bytes(&s.text).map_err(|e| Error::at(s.pos, format!("{what}: {e}")))
}

/// A transfer size: more than zero, whole 512-byte sectors (O_DIRECT needs at
/// least that; the target checks its own logical block size), at most 256 MiB.
pub(crate) fn xfer_bytes(s: &Scalar, what: &str) -> Result<u64> {
    const XFERSIZE_MAX: u64 = 256 << 20;
    let n = size(s, what)?;
    if n == 0 || !n.is_multiple_of(512) || n > XFERSIZE_MAX {
        return Err(Error::at(
            s.pos,
            format!(
                "{what} {} is not usable; expected a multiple of 512 bytes from 512 to 256m",
                format_size(n)
            ),
        ));
    }
    Ok(n)
}

/// Seconds, with an optional `s`, `m` or `h` suffix: `30`, `90s`, `5m`, `1h`, `0.5`.
pub(crate) fn duration(s: &Scalar, what: &str) -> Result<Duration> {
    let text = s.text.trim();
    let (digits, unit) = match text.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('s') => (&text[..text.len() - 1], 1.0),
        Some('m') => (&text[..text.len() - 1], 60.0),
        Some('h') => (&text[..text.len() - 1], 3600.0),
        _ => (text, 1.0),
    };
    let Some((m, f)) = decimal(digits) else {
        return Err(Error::at(
            s.pos,
            format!(
                "expected {what} in seconds like 30, 90s, 5m or 1h, found `{}`",
                clean(&s.text)
            ),
        ));
    };
    let secs = to_f64(m, f) * unit;
    if secs > DURATION_MAX_SECS {
        return Err(Error::at(
            s.pos,
            format!(
                "{what} `{}` is longer than a year; expected a shorter time",
                clean(&s.text)
            ),
        ));
    }
    Duration::try_from_secs_f64(secs)
        .map_err(|e| Error::at(s.pos, format!("{what} `{}`: {e}", clean(&s.text))))
}

/// `seekpct=`: `0`/`sequential`/`seq`, `eof`, `random`, or 1–100.
pub(crate) fn seek(s: &Scalar) -> Result<Seek> {
    match s.text.trim().to_ascii_lowercase().as_str() {
        "sequential" | "seq" => return Ok(Seek::Sequential),
        "eof" => return Ok(Seek::Eof),
        "random" => return Ok(Seek::Random(100.0)),
        _ => {}
    }
    match decimal(s.text.trim()) {
        Some((m, f)) => seek_from_pct(to_f64(m, f), s.pos),
        None => Err(Error::at(
            s.pos,
            format!(
                "expected seekpct 0 to 100, sequential, seq, eof or random, found `{}`",
                clean(&s.text)
            ),
        )),
    }
}

pub(crate) fn seek_from_pct(pct: f64, pos: Pos) -> Result<Seek> {
    if pct > 100.0 {
        return Err(Error::at(
            pos,
            format!("seekpct {} is over 100; expected 0 to 100", fmt_num(pct)),
        ));
    }
    Ok(if pct == 0.0 {
        Seek::Sequential
    } else {
        Seek::Random(pct)
    })
}

/// `(start,end)`: each end up to 200 is a percentage of the sd, above is bytes
/// (k/m/g/t allowed); `0` with a byte end is byte 0.
pub(crate) fn band(value: &Value, key: &str) -> Result<Band> {
    let items = match value {
        Value::List { items, .. } if items.len() == 2 => items,
        _ => {
            return Err(Error::at(
                value.pos(),
                format!(
                    "expected {key}=(start,end), e.g. (0,50) in percent of the sd or (1g,2g) in bytes, found {}",
                    describe(value)
                ),
            ))
        }
    };
    let mut start = bound(&items[0], key)?;
    let mut end = bound(&items[1], key)?;
    match (start, end) {
        (Bound::Percent(0.0), Bound::Bytes(_)) => start = Bound::Bytes(0),
        (Bound::Bytes(_), Bound::Percent(0.0)) => end = Bound::Bytes(0),
        _ => {}
    }
    let ordered = match (start, end) {
        (Bound::Percent(a), Bound::Percent(b)) => a < b,
        (Bound::Bytes(a), Bound::Bytes(b)) => a < b,
        _ => {
            return Err(Error::at(
                items[1].pos,
                format!(
                    "{key}= mixes a percentage and a byte offset; expected both ends up to 200 (percent) or both above (bytes)"
                ),
            ))
        }
    };
    if !ordered {
        return Err(Error::at(
            items[1].pos,
            format!("{key}= ends before it starts; expected start < end"),
        ));
    }
    Ok(Band { start, end })
}

fn bound(s: &Scalar, key: &str) -> Result<Bound> {
    let has_suffix = s.text.trim().chars().last().and_then(multiplier).is_some();
    if !has_suffix {
        if let Some((m, f)) = decimal(s.text.trim()) {
            let n = to_f64(m, f);
            if n <= 200.0 {
                return Ok(Bound::Percent(n));
            }
        }
    }
    let bytes = size(s, &format!("{key}= bound"))?;
    if bytes <= 200 {
        #[allow(clippy::cast_precision_loss)]
        return Ok(Bound::Percent(bytes as f64));
    }
    Ok(Bound::Bytes(bytes))
}

/// How a value looks, for "found …" in messages.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Scalar(s) => format!("`{}`", clean(&s.text)),
        Value::List { items, .. } => format!("a list of {}", items.len()),
    }
}

/// The one scalar of a value that must not be a list.
pub(crate) fn scalar<'v>(value: &'v Value, key: &str, expected: &str) -> Result<&'v Scalar> {
    match value {
        Value::Scalar(s) => Ok(s),
        Value::List { open, items } => Err(Error::at(
            *open,
            format!(
                "`{key}=` takes one value, found a list of {}; expected {expected}",
                items.len()
            ),
        )),
    }
}

/// A range `(from-to)` / `(from-to,step)` / `(from-to,d)` (d doubles), if the
/// value is one: its parts.
struct Range {
    from: Scalar,
    to: Scalar,
    step: Option<Scalar>,
}

fn range(value: &Value) -> Result<Option<Range>> {
    let Value::List { items, .. } = value else {
        return Ok(None);
    };
    let dash = |s: &Scalar| s.text.chars().skip(1).position(|c| c == '-').map(|p| p + 1);
    let Some(split) = dash(&items[0]) else {
        if let Some(s) = items.iter().find(|s| dash(s).is_some()) {
            return Err(Error::at(
                s.pos,
                "a range must come first and alone in its list; expected (from-to) or (from-to,step)",
            ));
        }
        return Ok(None);
    };
    if items.len() > 2 {
        return Err(Error::at(
            items[2].pos,
            format!("a range takes at most a step after it, found {} values; expected (from-to) or (from-to,step)", items.len()),
        ));
    }
    Ok(Some(Range {
        from: items[0].head(split),
        to: items[0].tail(split + 1),
        step: items.get(1).cloned(),
    }))
}

/// The numbers of a scalar, a list `(a,b,c)` or a range `(from-to,step)`, each
/// with the position that names it (a range's values take the range's position).
pub(crate) fn expand(
    value: &Value,
    parse: &dyn Fn(&Scalar) -> Result<f64>,
) -> Result<Vec<(f64, Pos)>> {
    let Some(r) = range(value)? else {
        if value.elements().len() > LIST_VALUES_MAX {
            return Err(Error::at(
                value.pos(),
                format!("more than {LIST_VALUES_MAX} values in one list"),
            ));
        }
        return value
            .elements()
            .iter()
            .map(|s| Ok((parse(s)?, s.pos)))
            .collect();
    };
    let from = parse(&r.from)?;
    let to = parse(&r.to)?;
    if from > to {
        return Err(Error::at(
            r.to.pos,
            format!(
                "range {}-{} goes down; expected the smaller value first",
                fmt_num(from),
                fmt_num(to)
            ),
        ));
    }
    let pos = r.from.pos;
    let too_many = || {
        Error::at(pos, format!("range expands to more than {LIST_VALUES_MAX} values; expected a larger step or a shorter range"))
    };
    let mut out = Vec::new();
    match &r.step {
        Some(step) if step.text.trim().eq_ignore_ascii_case("d") => {
            if from <= 0.0 {
                return Err(Error::at(
                    pos,
                    "a doubling range (from-to,d) must start above 0",
                ));
            }
            let mut v = from;
            while v <= to {
                if out.len() == LIST_VALUES_MAX {
                    return Err(too_many());
                }
                out.push((v, pos));
                v *= 2.0;
            }
        }
        step => {
            let by = match step {
                Some(s) => step_value(s)?,
                None => 1.0,
            };
            if by <= 0.0 {
                let at = step.as_ref().map_or(pos, |s| s.pos);
                return Err(Error::at(
                    at,
                    "range step is 0; expected a step above 0, or d to double",
                ));
            }
            let count = ((to - from) / by + 1e-9).floor() + 1.0;
            #[allow(clippy::cast_precision_loss)]
            if count > LIST_VALUES_MAX as f64 {
                return Err(too_many());
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let count = count as usize;
            #[allow(clippy::cast_precision_loss)]
            // Whole steps are exact; fractional ones are rounded to a billionth so
            // (0.1-0.3,0.1) gives 0.3, not 0.30000000000000004.
            let whole_steps = from.fract() == 0.0 && by.fract() == 0.0;
            #[allow(clippy::cast_precision_loss)]
            out.extend((0..count).map(|i| {
                let v = from + by * i as f64;
                (
                    if whole_steps {
                        v
                    } else {
                        (v * 1e9).round() / 1e9
                    },
                    pos,
                )
            }));
        }
    }
    Ok(out)
}

/// Whether the value is a range `(from-to[,step])` rather than a list (an
/// error for a malformed one, such as a range that is not first in its list).
pub(crate) fn is_range(value: &Value) -> Result<bool> {
    Ok(range(value)?.is_some())
}

/// `forseekpct=`: a list of seekpct values, or a numeric range of percentages.
pub(crate) fn expand_seeks(value: &Value) -> Result<Vec<Seek>> {
    if range(value)?.is_some() {
        return expand(value, &|s| percent(s, "seekpct"))?
            .into_iter()
            .map(|(pct, pos)| seek_from_pct(pct, pos))
            .collect();
    }
    value.elements().iter().map(seek).collect()
}

/// A range's step: a number (`2`, `0.5`) or a size (`4k`); checked as a step,
/// not as one of the range's values.
fn step_value(s: &Scalar) -> Result<f64> {
    let text = s.text.trim();
    if let Some((m, f)) = decimal(text) {
        return Ok(to_f64(m, f));
    }
    match size_bytes(text) {
        #[allow(clippy::cast_precision_loss)]
        Ok(n) => Ok(n as f64),
        Err(_) => Err(Error::at(
            s.pos,
            format!(
                "expected a range step like 2, 4k or d (to double), found `{}`",
                clean(&s.text)
            ),
        )),
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matcher with one backtrack point: linear-ish, no recursion.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// `sd1-sd4` (or `sd1-4`) as the names it stands for, if it is such a range.
fn name_range(text: &str) -> Option<Vec<String>> {
    let (a, b) = text.split_once('-')?;
    let split = |s: &str| {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        (
            s[..s.len() - digits].to_string(),
            s[s.len() - digits..].to_string(),
        )
    };
    let (prefix, from) = split(a);
    let (prefix_b, to) = split(b);
    if from.is_empty() || to.is_empty() || !(prefix_b.is_empty() || prefix_b == prefix) {
        return None;
    }
    let (lo, hi) = (from.parse::<u64>().ok()?, to.parse::<u64>().ok()?);
    if lo > hi || hi - lo >= LIST_VALUES_MAX as u64 {
        return None;
    }
    let width = if from.starts_with('0') { from.len() } else { 0 };
    Some((lo..=hi).map(|n| format!("{prefix}{n:0width$}")).collect())
}

/// The names a value selects from `defined` (in the value's order, each once):
/// names, lists, ranges `sd1-sd4` and wildcards `sd*`. A part that selects
/// nothing is an error.
pub(crate) fn names(value: &Value, defined: &[String], kind: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let list_defined = || {
        if defined.is_empty() {
            format!("no {kind} is defined")
        } else {
            let shown: Vec<&str> = defined.iter().take(20).map(String::as_str).collect();
            format!(
                "defined: {}{}",
                clean(&shown.join(", ")),
                if defined.len() > 20 { ", …" } else { "" }
            )
        }
    };
    for s in value.elements() {
        let text = s.text.trim();
        let selected: Vec<String> = if text.contains('*') {
            let hits: Vec<String> = defined
                .iter()
                .filter(|d| glob_match(text, d))
                .cloned()
                .collect();
            if hits.is_empty() {
                return Err(Error::at(
                    s.pos,
                    format!(
                        "`{}` matches no {kind}; expected a pattern matching a defined {kind} ({})",
                        clean(text),
                        list_defined()
                    ),
                ));
            }
            hits
        } else if defined.iter().any(|d| d == text) {
            vec![text.to_string()]
        } else if let Some(range) = name_range(text) {
            if let Some(missing) = range.iter().find(|n| !defined.contains(n)) {
                return Err(Error::at(
                    s.pos,
                    format!(
                        "{kind} `{}` (in the range `{}`) is not defined; expected defined {kind}s ({})",
                        clean(missing),
                        clean(text),
                        list_defined()
                    ),
                ));
            }
            range
        } else {
            return Err(Error::at(
                s.pos,
                format!(
                    "unknown {kind} `{}`; expected a defined {kind} ({})",
                    clean(text),
                    list_defined()
                ),
            ));
        };
        for name in selected {
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    Ok(out)
}

/// `1536` → `1.5k`? No: sizes print exactly, with the largest suffix that
/// divides them (`4k`, `1m`, `1536`), the way a parameter file writes them.
pub(crate) fn format_size(bytes: u64) -> String {
    for (suffix, shift) in [("t", 40), ("g", 30), ("m", 20), ("k", 10)] {
        let unit = 1u64 << shift;
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// `50` rather than `50.0`; `12.5` as is.
pub(crate) fn fmt_num(n: f64) -> String {
    format!("{n}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sizes_are_exact_powers_of_1024() {
        assert_eq!(size_bytes("4096"), Ok(4096));
        assert_eq!(size_bytes("8k"), Ok(8192));
        assert_eq!(size_bytes("8K"), Ok(8192));
        assert_eq!(size_bytes("1m"), Ok(1 << 20));
        assert_eq!(size_bytes("1.5g"), Ok(3 << 29));
        assert_eq!(size_bytes("2t"), Ok(2 << 40));
        assert_eq!(size_bytes("1.5k"), Ok(1536));
        let error = |text| size_bytes(text).unwrap_err().to_string();
        assert!(error("1.3k").contains("not a whole number"));
        assert!(error("8kb").contains("expected a size"));
        assert!(error("").contains("expected a size"));
        assert!(error("-1").contains("expected a size"));
        assert!(error("1.").contains("expected a size"));
        assert!(error("99999999999999999999t").contains("too large"));
        assert!(size_bytes("k").is_err());
    }

    #[test]
    fn glob_matches_stars_anywhere() {
        assert!(glob_match("sd*", "sd1"));
        assert!(glob_match("sd*", "sd"));
        assert!(glob_match("*_read", "wd_rand_read"));
        assert!(glob_match("wd*rand*", "wd_oracle_rand_write"));
        assert!(!glob_match("sd*", "xsd1"));
        assert!(!glob_match("a*b", "ac"));
        assert!(glob_match("*", ""));
    }

    #[test]
    fn name_ranges_expand_with_padding() {
        assert_eq!(name_range("sd1-sd3").unwrap(), ["sd1", "sd2", "sd3"]);
        assert_eq!(name_range("sd1-3").unwrap(), ["sd1", "sd2", "sd3"]);
        assert_eq!(name_range("d08-d10").unwrap(), ["d08", "d09", "d10"]);
        assert!(name_range("sd1-wd3").is_none());
        assert!(name_range("sd3-sd1").is_none());
        assert!(name_range("sd-x").is_none());
    }

    #[test]
    fn sizes_print_with_the_largest_exact_suffix() {
        assert_eq!(format_size(4096), "4k");
        assert_eq!(format_size(1 << 20), "1m");
        assert_eq!(format_size(1536), "1536");
        assert_eq!(format_size(768 << 10), "768k");
        assert_eq!(format_size(0), "0");
    }
}
