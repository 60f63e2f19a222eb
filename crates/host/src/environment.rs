//! The tool, the host and the wall clock, as `result.json` records them.
//!
//! A result is read months later, on another machine, next to results from other
//! kernels and CPUs; these are the facts needed to know whether two results are
//! comparable at all.

use std::fs;
use std::time::{SystemTime, UNIX_EPOCH};

use cairn_io::host::Host;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
    /// `git describe` of the build, or "unknown".
    pub commit: String,
}

/// The machine the bench ran on.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// `PRETTY_NAME` from /etc/os-release.
    pub os: String,
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: u32,
    pub memory_bytes: u64,
    /// Clock ticks per second, for converting /proc figures.
    pub clock_ticks: u64,
}

/// This build of Cairn. The commit comes from `git describe` at build time
/// (see `build.rs`), so a result names the exact code that produced it.
pub fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "cairn".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: option_env!("CAIRN_COMMIT")
            .filter(|c| !c.is_empty())
            .unwrap_or("unknown")
            .to_string(),
    }
}

/// The machine, from `uname`, `/etc/os-release`, `host.proc` (`cpuinfo`,
/// `meminfo`), `host.sys` (online CPUs) and `sysconf`. A fact that cannot be read
/// is left empty or zero rather than failing the bench.
pub fn environment(host: &Host) -> Environment {
    let (hostname, kernel) = uname();
    let os = ["/etc/os-release", "/usr/lib/os-release"]
        .iter()
        .find_map(|p| {
            fs::read_to_string(p)
                .ok()
                .and_then(|t| parse_os_release(&t))
        })
        .unwrap_or_default();
    let cpu_model = fs::read_to_string(host.proc.join("cpuinfo"))
        .map(|t| cpu_model_from_cpuinfo(&t))
        .unwrap_or_default();
    let cpus = Host::attr(&host.sys.join("devices/system/cpu/online"))
        .and_then(|list| count_cpu_list(&list))
        .unwrap_or_else(sysconf_online_cpus);
    let memory_bytes = fs::read_to_string(host.proc.join("meminfo"))
        .ok()
        .and_then(|t| mem_total_bytes(&t))
        .unwrap_or(0);
    Environment {
        hostname,
        kernel,
        os,
        cpu_model,
        cpus,
        memory_bytes,
        clock_ticks: clock_ticks_per_s(),
    }
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of `/proc/stat`;
/// 100 when sysconf does not say, as on every Linux architecture in use.
pub(crate) fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

fn sysconf_online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    // We are running, so at least one CPU is online.
    u32::try_from(n).ok().filter(|n| *n > 0).unwrap_or(1)
}

/// `(nodename, release)` from uname(2); empty strings if it fails.
fn uname() -> (String, String) {
    // SAFETY: utsname is plain data; all-zero is a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uts is a valid, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return (String::new(), String::new());
    }
    (c_field(&uts.nodename), c_field(&uts.release))
}

fn c_field(field: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = field
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `PRETTY_NAME` from an os-release file (shell-style quoting removed), or
/// `NAME` when there is no `PRETTY_NAME`.
pub fn parse_os_release(text: &str) -> Option<String> {
    let value = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.trim().split_once('=')?;
            (k == key)
                .then(|| unquote(v.trim()))
                .filter(|v| !v.is_empty())
        })
    };
    value("PRETTY_NAME").or_else(|| value("NAME"))
}

fn unquote(v: &str) -> String {
    let inner = match v.as_bytes() {
        [q @ (b'"' | b'\''), .., last] if last == q && v.len() >= 2 => &v[1..v.len() - 1],
        _ => v,
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The CPU's name from `/proc/cpuinfo`. x86 and newer 32-bit ARM kernels say
/// `model name`; older ARM kernels `Processor`; arm64 gives only implementer
/// and part numbers, named here for the common server and phone cores; MIPS
/// says `cpu model`, POWER `cpu`. `Hardware` (an ARM board's name) is the last
/// resort.
pub fn cpu_model_from_cpuinfo(text: &str) -> String {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key)
                .then(|| v.trim().to_string())
                .filter(|v| !v.is_empty())
        })
    };
    if let Some(name) = field("model name").or_else(|| field("Processor")) {
        return name;
    }
    if let (Some(implementer), Some(part)) = (field("CPU implementer"), field("CPU part")) {
        return arm_cpu_name(&implementer, &part);
    }
    ["cpu model", "cpu", "Hardware"]
        .iter()
        .find_map(|k| field(k))
        .unwrap_or_default()
}

fn parse_hex(text: &str) -> Option<u32> {
    u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

fn arm_cpu_name(implementer: &str, part: &str) -> String {
    let (Some(imp), Some(p)) = (parse_hex(implementer), parse_hex(part)) else {
        return format!("implementer {implementer} part {part}");
    };
    let vendor = match imp {
        0x41 => "ARM",
        0x42 => "Broadcom",
        0x43 => "Cavium",
        0x46 => "Fujitsu",
        0x48 => "HiSilicon",
        0x4e => "NVIDIA",
        0x50 => "APM",
        0x51 => "Qualcomm",
        0x61 => "Apple",
        0xc0 => "Ampere",
        _ => return format!("implementer {imp:#04x} part {p:#05x}"),
    };
    let core = match (imp, p) {
        (0x41, 0xd03) => Some("Cortex-A53"),
        (0x41, 0xd05) => Some("Cortex-A55"),
        (0x41, 0xd07) => Some("Cortex-A57"),
        (0x41, 0xd08) => Some("Cortex-A72"),
        (0x41, 0xd0b) => Some("Cortex-A76"),
        (0x41, 0xd0c) => Some("Neoverse-N1"),
        (0x41, 0xd40) => Some("Neoverse-V1"),
        (0x41, 0xd49) => Some("Neoverse-N2"),
        (0x41, 0xd4f) => Some("Neoverse-V2"),
        (0x41, 0xd84) => Some("Neoverse-V3"),
        (0x41, 0xd8e) => Some("Neoverse-N3"),
        (0xc0, 0xac3) => Some("Ampere-1"),
        (0xc0, 0xac4) => Some("Ampere-1a"),
        _ => None,
    };
    match core {
        Some(core) => format!("{vendor} {core}"),
        None => format!("{vendor} part {p:#05x}"),
    }
}

/// How many CPUs a sysfs CPU list names (`0-3,8,10-11` → 7).
pub fn count_cpu_list(list: &str) -> Option<u32> {
    let mut count = 0u32;
    for item in list.trim().split(',').filter(|i| !i.is_empty()) {
        let (lo, hi) = match item.split_once('-') {
            Some((lo, hi)) => (lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?),
            None => {
                let n = item.parse::<u32>().ok()?;
                (n, n)
            }
        };
        count = count.checked_add(hi.checked_sub(lo)? + 1)?;
    }
    (count > 0).then_some(count)
}

/// `MemTotal` from `/proc/meminfo`, in bytes.
pub fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    // The kernel writes kB (KiB) here.
    let scale = match words.next() {
        Some("kB") | None => 1024,
        Some(_) => return None,
    };
    value.checked_mul(scale)
}

/// Now, in UTC, as RFC 3339 to the second (`2026-11-21T10:02:03Z`).
pub fn utc_now_rfc3339() -> String {
    let s = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_secs()).unwrap_or(i64::MAX),
    };
    rfc3339_from_unix_s(s)
}

/// A Unix time in seconds as RFC 3339 in UTC. The date comes from the
/// days-since-epoch count by the proleptic Gregorian calendar (eras of 400
/// years, each exactly 146 097 days), which needs no time-zone database.
pub fn rfc3339_from_unix_s(unix_s: i64) -> String {
    let days = unix_s.div_euclid(86_400);
    let secs_of_day = unix_s.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs_of_day / 3600,
        secs_of_day % 3600 / 60,
        secs_of_day % 60
    )
}

/// `(year, month, day)` for a count of days since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01 so that the leap day ends each year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months counted from March, each a run of 153-day five-month cycles.
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
