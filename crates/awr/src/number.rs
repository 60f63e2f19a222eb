//! The numbers in an AWR or Statspack cell, as Oracle prints them.
//!
//! Reports print `1,234,567.8` (thousands separators), `1.936982535373E+13`
//! (scientific notation when a value outgrows its column), `59.6K` / `1.2M`
//! (decimal K/M/G/T suffixes in the 12c event tables), `845.96us` / `1.69ms` /
//! `2.31s` (latencies with their unit, 12.2 on), `12.3%`, and blanks, `N/A` or
//! a run of `#` where there is no value or it did not fit. Reports pasted into
//! a blog or a mail add non-breaking spaces, a unicode minus and stray
//! punctuation. Every function here returns `None` for what is not a number,
//! never panics, and never guesses: `1.2.3` or `12KB` are not numbers.

/// The value of a plain numeric cell: separators removed, scientific notation
/// read, a K/M/G/T suffix multiplied out in powers of 1000 (as AWR's event
/// tables mean them). `None` for a blank, `N/A`, `#####` or anything else.
pub fn parse_number(cell: &str) -> Option<f64> {
    let s = normalize(cell)?;
    let (body, scale) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1e3),
        b'M' | b'm' => (&s[..s.len() - 1], 1e6),
        b'G' | b'g' => (&s[..s.len() - 1], 1e9),
        b'T' | b't' => (&s[..s.len() - 1], 1e12),
        _ => (s.as_str(), 1.0),
    };
    plain(body).map(|v| v * scale)
}

/// A size in bytes, where K/M/G/T are powers of 1024 (`8K` block size,
/// `3,200M` buffer cache); a bare number is bytes.
pub fn parse_size_bytes(cell: &str) -> Option<f64> {
    let s = normalize(cell)?;
    let s = s.strip_suffix(['B', 'b']).map_or(s.as_str(), |t| t);
    let (body, scale) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1024.0),
        b'M' | b'm' => (&s[..s.len() - 1], 1024.0 * 1024.0),
        b'G' | b'g' => (&s[..s.len() - 1], 1024.0 * 1024.0 * 1024.0),
        b'T' | b't' => (&s[..s.len() - 1], 1024.0 * 1024.0 * 1024.0 * 1024.0),
        _ => (s, 1.0),
    };
    plain(body).map(|v| v * scale)
}

/// A latency in microseconds. A cell with a unit (`845.96us`, `1.69ms`,
/// `2.31s`, `120ns`, also `1.69 ms`) says which; a bare number is in
/// `bare_unit_us` microseconds per unit (1000 for the `Avg wait (ms)` columns
/// of 10g and 11g).
pub fn parse_latency_us(cell: &str, bare_unit_us: f64) -> Option<f64> {
    let s = normalize(cell)?;
    let lower = s.to_ascii_lowercase();
    for (unit, us) in [
        ("ns", 1e-3),
        ("us", 1.0),
        ("µs", 1.0),
        ("ms", 1e3),
        ("s", 1e6),
    ] {
        if let Some(body) = lower.strip_suffix(unit) {
            return plain(body.trim_end()).map(|v| v * us);
        }
    }
    plain(&s).map(|v| v * bare_unit_us)
}

/// A percentage, with or without its `%` sign (`12.3%`, `12.3`).
pub fn parse_percent(cell: &str) -> Option<f64> {
    let s = normalize(cell)?;
    plain(s.strip_suffix('%').map_or(s.as_str(), str::trim_end))
}

/// Trim, map the characters pasting introduces to ASCII, drop thousands
/// separators; `None` for an empty cell or a marker of no value.
fn normalize(cell: &str) -> Option<String> {
    let mut s = String::with_capacity(cell.len());
    for c in cell.trim().chars() {
        match c {
            ',' | '\u{00a0}' | '\u{202f}' | '\u{2009}' | '\'' => {}
            '\u{2212}' | '\u{2013}' => s.push('-'),
            _ => s.push(c),
        }
    }
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("n/a") || t.chars().all(|c| c == '#' || c == '-') {
        return None;
    }
    Some(t.to_string())
}

/// A decimal or scientific number and nothing else (no `inf`, no `nan`, no
/// hex, no second dot), as Rust's float parser would otherwise accept some.
fn plain(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - digits_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        digits += i - frac;
    }
    if digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let exp = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A count printed as a number (CPUs, instance number): whole, in `u32`.
pub(crate) fn whole_u32(v: f64) -> Option<u32> {
    (v.is_finite() && v >= 0.0 && v <= f64::from(u32::MAX) && v.fract() == 0.0).then_some(v as u32)
}

/// Words separated by single spaces (any run of whitespace, NBSP included).
pub(crate) fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_numbers_separators_and_scientific_notation() {
        assert_eq!(parse_number("55,301,220"), Some(55_301_220.0));
        assert_eq!(parse_number("  7,682.5 "), Some(7682.5));
        assert_eq!(parse_number("1.936982535373E+13"), Some(1.936982535373e13));
        assert_eq!(parse_number("2.69087766E+09"), Some(2.69087766e9));
        assert_eq!(parse_number("4.1334639E+08"), Some(4.1334639e8));
        assert_eq!(parse_number("0.0"), Some(0.0));
        assert_eq!(parse_number("-1.5"), Some(-1.5));
        assert_eq!(parse_number(".5"), Some(0.5));
    }

    #[test]
    fn decimal_suffixes_of_the_event_tables() {
        assert_eq!(parse_number("59.6K"), Some(59_600.0));
        assert_eq!(parse_number("1.2M"), Some(1_200_000.0));
        assert_eq!(parse_number("3G"), Some(3e9));
        assert_eq!(parse_number("1T"), Some(1e12));
        assert_eq!(parse_number("1,234K"), Some(1_234_000.0));
    }

    #[test]
    fn no_value_markers_and_garbage_are_none() {
        for cell in [
            "", "   ", "N/A", "n/a", "#####", "-", "---", "1.2.3", "12KB", "abc", "1e", "inf",
            "NaN", "0x10", "1 2", "K", ".",
        ] {
            assert_eq!(parse_number(cell), None, "{cell:?}");
        }
    }

    #[test]
    fn pasted_text_characters_are_understood() {
        assert_eq!(parse_number("1\u{00a0}305\u{00a0}547.7"), Some(1_305_547.7));
        assert_eq!(parse_number("\u{2212}3.5"), Some(-3.5));
        assert_eq!(parse_number("1'234"), Some(1234.0));
    }

    #[test]
    fn sizes_use_powers_of_1024() {
        assert_eq!(parse_size_bytes("8K"), Some(8192.0));
        assert_eq!(parse_size_bytes("3,200M"), Some(3200.0 * 1048576.0));
        assert_eq!(parse_size_bytes("8192"), Some(8192.0));
        assert_eq!(parse_size_bytes("16KB"), Some(16384.0));
        assert_eq!(parse_size_bytes("2G"), Some(2.0 * 1073741824.0));
        assert_eq!(parse_size_bytes("x"), None);
    }

    #[test]
    fn latencies_with_and_without_units() {
        assert_eq!(parse_latency_us("845.96us", 1000.0), Some(845.96));
        assert_eq!(parse_latency_us("1.69ms", 1000.0), Some(1690.0));
        assert_eq!(parse_latency_us("1.69 ms", 1000.0), Some(1690.0));
        assert_eq!(parse_latency_us("2.31s", 1000.0), Some(2_310_000.0));
        assert_eq!(parse_latency_us("120ns", 1000.0), Some(0.12));
        assert_eq!(parse_latency_us("4.71", 1000.0), Some(4710.0));
        assert_eq!(parse_latency_us("12", 1.0), Some(12.0));
        assert_eq!(parse_latency_us("ms", 1000.0), None);
        assert_eq!(parse_latency_us("", 1000.0), None);
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("12.3%"), Some(12.3));
        assert_eq!(parse_percent(" 72.0 "), Some(72.0));
        assert_eq!(parse_percent("100.0 %"), Some(100.0));
        assert_eq!(parse_percent("%"), None);
    }

    proptest! {
        #[test]
        fn never_panics_on_any_text(s in "\\PC{0,40}") {
            let _ = parse_number(&s);
            let _ = parse_size_bytes(&s);
            let _ = parse_latency_us(&s, 1000.0);
            let _ = parse_percent(&s);
        }

        #[test]
        fn a_grouped_integer_reads_back(n in 0u64..1_000_000_000_000) {
            let digits = n.to_string();
            let mut grouped = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i) % 3 == 0 {
                    grouped.push(',');
                }
                grouped.push(c);
            }
            prop_assert_eq!(parse_number(&grouped), Some(n as f64));
        }
    }
}
