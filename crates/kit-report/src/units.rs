//! How the reports print numbers, so that every report prints a figure the same way.
//!
//! Latencies are shown as AWR shows them (`846us`, `1.69ms`, `2.31s`) with three
//! significant figures: the histograms hold 0.1%, so more digits would be noise
//! and fewer would hide real differences. Rates and counts carry thousands
//! separators, as AWR's do.

/// A latency given in µs, with a unit that fits its size: `8.42us`, `84.2us`,
/// `842us`, `8.42ms`, `84.2ms`, `842ms`, `8.42s`.
pub fn latency_us(us: f64) -> String {
    if !us.is_finite() {
        return "n/a".to_string();
    }
    let sign = if us < 0.0 { "-" } else { "" };
    let a = us.abs();
    let body = if a < 10.0 {
        format!("{a:.2}us")
    } else if a < 100.0 {
        format!("{a:.1}us")
    } else if a < 999.5 {
        format!("{a:.0}us")
    } else if a < 9_995.0 {
        format!("{:.2}ms", a / 1e3)
    } else if a < 99_950.0 {
        format!("{:.1}ms", a / 1e3)
    } else if a < 999_500.0 {
        format!("{:.0}ms", a / 1e3)
    } else {
        format!("{:.2}s", a / 1e6)
    };
    format!("{sign}{body}")
}

/// A latency given in ms (as iostat's `r_await`).
pub fn latency_ms(ms: f64) -> String {
    latency_us(ms * 1e3)
}

/// `v` with `decimals` decimals and thousands separators: `12,345.6`.
pub fn grouped(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "n/a".to_string();
    }
    let text = format!("{:.*}", decimals, v.abs());
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (text.as_str(), None),
    };
    let mut out = String::with_capacity(text.len() + int.len() / 3 + 1);
    // "-0.0" would claim a sign for what rounds to nothing.
    if v < 0.0 && text.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        out.push('-');
    }
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// A count with thousands separators.
pub fn count(n: u64) -> String {
    grouped(n as f64, 0)
}

/// A size in bytes, binary units: `512 B`, `8 KiB`, `1.50 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.2} {}", UNITS[unit])
    }
}

/// Seconds without needless decimals: `60s`, `0.5s`.
pub fn seconds(s: f64) -> String {
    if !s.is_finite() {
        return "n/a".to_string();
    }
    let text = format!("{s:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}s")
}

/// A percentage with one decimal, no sign: `60.0`.
pub fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "n/a".to_string()
    }
}

/// A bucket's share the way an AWR histogram cell shows it: `-` for none at all,
/// `<0.1` for a few, so that a rare stall never reads as zero.
pub fn bucket_pct(count: u64, pct: f64) -> String {
    if count == 0 {
        "-".to_string()
    } else if pct < 0.05 {
        "<0.1".to_string()
    } else {
        format!("{pct:.1}")
    }
}

/// A percentile's name: `p50`, `p99.9`, `p99.999`.
pub fn percentile_name(p: f64) -> String {
    let text = format!("{p:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("p{text}")
}

/// A signed value with thousands separators: `+300.0`, `-12.50`.
pub fn signed(v: f64, decimals: usize) -> String {
    let body = grouped(v, decimals);
    if v > 0.0 && body.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        format!("+{body}")
    } else {
        body
    }
}

/// A compact axis label: `950`, `1.5k`, `20k`, `1.2M`.
pub fn compact(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = if scaled.abs() >= 100.0 || scaled.fract().abs() < 1e-9 {
        format!("{scaled:.0}")
    } else if scaled.abs() >= 10.0 {
        format!("{scaled:.1}")
    } else {
        format!("{scaled:.2}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_keep_three_significant_figures() {
        assert_eq!(latency_us(8.421), "8.42us");
        assert_eq!(latency_us(84.21), "84.2us");
        assert_eq!(latency_us(845.96), "846us");
        assert_eq!(latency_us(1690.0), "1.69ms");
        assert_eq!(latency_us(28_620.0), "28.6ms");
        assert_eq!(latency_us(999_700.0), "1.00s");
        assert_eq!(latency_us(-1500.0), "-1.50ms");
        assert_eq!(latency_ms(0.25), "250us");
    }

    #[test]
    fn grouping_and_signs() {
        assert_eq!(grouped(1_377_287.6, 1), "1,377,287.6");
        assert_eq!(grouped(999.0, 0), "999");
        assert_eq!(grouped(-1234.5, 1), "-1,234.5");
        assert_eq!(grouped(-0.01, 1), "0.0");
        assert_eq!(signed(300.0, 1), "+300.0");
        assert_eq!(signed(-300.0, 1), "-300.0");
        assert_eq!(count(3000), "3,000");
    }

    #[test]
    fn sizes_names_and_shares() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(8192), "8 KiB");
        assert_eq!(bytes(1536 * 1024 * 1024), "1.50 GiB");
        assert_eq!(seconds(60.0), "60s");
        assert_eq!(seconds(0.5), "0.5s");
        assert_eq!(percentile_name(99.99), "p99.99");
        assert_eq!(percentile_name(50.0), "p50");
        assert_eq!(bucket_pct(0, 0.0), "-");
        assert_eq!(bucket_pct(1, 0.001), "<0.1");
        assert_eq!(bucket_pct(3, 60.0), "60.0");
        assert_eq!(compact(1500.0), "1.5k");
        assert_eq!(compact(20_000.0), "20k");
        assert_eq!(compact(0.25), "0.25");
    }
}
