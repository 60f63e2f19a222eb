//! cairn-host: environment, CPU accounting, /proc/diskstats in iostat -x terms,
//! and which devices a target's statistics come from — on fixture trees, and on
//! the real machine (a RAM-backed loop device when run as root).

#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::{symlink, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cairn_host::environment::{
    count_cpu_list, cpu_model_from_cpuinfo, mem_total_bytes, parse_os_release,
};
use cairn_host::{
    cpu_interval, cpu_sample, cpu_summary, device_stats, devices_for, devices_for_block, diskstats,
    environment, rfc3339_from_unix_s, tool_info, utc_now_rfc3339, CpuSample, DeviceStats,
    DiskCounters, DiskStatsSnapshot, ProcStatCpu,
};
use cairn_io::host::Host;
use cairn_io::test_support::LoopDevice;
use cairn_io::AlignedBuf;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysinfo")
        .join(name)
}

fn read_fixture(name: &str) -> String {
    fs::read_to_string(fixture(name)).unwrap()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn assert_close(what: &str, got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{what}: got {got}, want {want}"
    );
}

fn assert_sane(stats: &DeviceStats) {
    for (what, v) in [
        ("r_s", stats.r_s),
        ("w_s", stats.w_s),
        ("rmb_s", stats.rmb_s),
        ("wmb_s", stats.wmb_s),
        ("rareq_sz_kb", stats.rareq_sz_kb),
        ("wareq_sz_kb", stats.wareq_sz_kb),
        ("aqu_sz", stats.aqu_sz),
        ("r_await_ms", stats.r_await_ms),
        ("w_await_ms", stats.w_await_ms),
        ("util_pct", stats.util_pct),
        ("d_s", stats.d_s),
        ("f_s", stats.f_s),
    ] {
        assert!(v.is_finite() && v >= 0.0, "{} {what} = {v}", stats.device);
    }
    assert!(
        stats.util_pct <= 100.0,
        "{}: util {}",
        stats.device,
        stats.util_pct
    );
}

// ---------------------------------------------------------------- tool and time

#[test]
fn tool_info_names_this_build() {
    let tool = tool_info();
    assert_eq!(tool.name, "cairn");
    assert_eq!(tool.version, env!("CARGO_PKG_VERSION"));
    assert!(!tool.commit.is_empty());
    let describe = Command::new("git")
        .args(["describe", "--always", "--abbrev=12"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    match describe {
        Ok(out) if out.status.success() => {
            assert_ne!(
                tool.commit, "unknown",
                "git works here, so build.rs should have found the commit"
            );
            let plain = tool.commit.trim_end_matches("-dirty");
            // A bare hash without tags, `tag-N-g<hash>` with them.
            let hash = plain.rsplit("-g").next().unwrap();
            assert!(
                hash.len() >= 12 && hash.chars().all(|c| c.is_ascii_hexdigit()),
                "commit {:?} is not a git describe",
                tool.commit
            );
        }
        // No git, or no repository (a source tarball): build.rs says so
        // rather than inventing a commit.
        _ => assert_eq!(
            tool.commit, "unknown",
            "git describe does not work here, yet build.rs found a commit"
        ),
    }
}

#[test]
fn rfc3339_known_instants() {
    for (s, want) in [
        (0, "1970-01-01T00:00:00Z"),
        (-1, "1969-12-31T23:59:59Z"),
        (951_782_400, "2000-02-29T00:00:00Z"),
        (1_700_000_000, "2023-11-14T22:13:20Z"),
        (1_795_082_523, "2026-11-19T10:02:03Z"),
        (4_107_542_400, "2100-03-01T00:00:00Z"),
        (-62_135_596_800, "0001-01-01T00:00:00Z"),
        (253_402_300_799, "9999-12-31T23:59:59Z"),
    ] {
        assert_eq!(rfc3339_from_unix_s(s), want, "unix {s}");
    }
}

fn ymd(text: &str) -> (i64, u32, u32) {
    let date = &text[..10];
    let mut parts = date.split('-');
    (
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
    )
}

#[test]
fn rfc3339_days_follow_the_gregorian_calendar() {
    // Walk day by day from 1600 to 2400 (covering the 1700/1800/1900/2100
    // non-leap centuries and the 2000 leap one) checking each successor date.
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = |y: i64, m: u32| match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let start_day = -135_140; // 1600-01-01
    let mut prev = ymd(&rfc3339_from_unix_s(start_day * 86_400));
    assert_eq!(prev, (1600, 1, 1));
    for day in start_day + 1..=start_day + 292_194 {
        let cur = ymd(&rfc3339_from_unix_s(day * 86_400 + 43_210));
        let (y, m, d) = prev;
        let want = if d < month_days(y, m) {
            (y, m, d + 1)
        } else if m < 12 {
            (y, m + 1, 1)
        } else {
            (y + 1, 1, 1)
        };
        assert_eq!(cur, want, "day {day}");
        prev = cur;
    }
    assert_eq!(prev, (2400, 1, 1));
}

#[test]
fn utc_now_is_between_two_clock_readings() {
    let unix_now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    let before = rfc3339_from_unix_s(unix_now());
    let now = utc_now_rfc3339();
    let after = rfc3339_from_unix_s(unix_now());
    assert_eq!(now.len(), "2026-11-21T10:02:03Z".len());
    assert!(
        before <= now && now <= after,
        "{before} <= {now} <= {after}"
    );
}

// ---------------------------------------------------------------- environment

#[test]
fn cpu_models_per_architecture() {
    assert_eq!(
        cpu_model_from_cpuinfo(&read_fixture("cpuinfo-x86.txt")),
        "AMD EPYC 7R13 Processor"
    );
    assert_eq!(
        cpu_model_from_cpuinfo(&read_fixture("proc-arm64/cpuinfo")),
        "ARM Neoverse-N1"
    );
    assert_eq!(
        cpu_model_from_cpuinfo(&read_fixture("cpuinfo-armv7.txt")),
        "ARMv7 Processor rev 4 (v7l)"
    );
    assert_eq!(
        cpu_model_from_cpuinfo(&read_fixture("cpuinfo-armv5.txt")),
        "ARM926EJ-S rev 5 (v5l)"
    );
    assert_eq!(
        cpu_model_from_cpuinfo("processor\t: 0\nCPU implementer\t: 0xc0\nCPU part\t: 0xfff\n"),
        "Ampere part 0xfff"
    );
    assert_eq!(
        cpu_model_from_cpuinfo("processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\n"),
        "POWER9 (raw), altivec supported"
    );
    assert_eq!(cpu_model_from_cpuinfo(""), "");
}

#[test]
fn os_release_memory_and_cpu_lists() {
    assert_eq!(
        parse_os_release(&read_fixture("os-release.txt")).as_deref(),
        Some("Debian GNU/Linux 12 (bookworm)")
    );
    assert_eq!(
        parse_os_release("NAME='Alpine Linux'\nID=alpine\n").as_deref(),
        Some("Alpine Linux")
    );
    assert_eq!(
        parse_os_release("PRETTY_NAME=\"Say \\\"hi\\\"\"\n").as_deref(),
        Some("Say \"hi\"")
    );
    assert_eq!(parse_os_release("ID=x\n"), None);

    assert_eq!(count_cpu_list("0-1\n"), Some(2));
    assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
    assert_eq!(count_cpu_list("0"), Some(1));
    assert_eq!(count_cpu_list("3-1"), None);
    assert_eq!(count_cpu_list(""), None);

    assert_eq!(mem_total_bytes("MemTotal:   16 kB\n"), Some(16 * 1024));
    assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
}

#[test]
fn environment_from_a_fixture_host() {
    let host = Host {
        sys: fixture("sys-arm64"),
        proc: fixture("proc-arm64"),
    };
    let env = environment(&host);
    assert_eq!(env.cpu_model, "ARM Neoverse-N1");
    assert_eq!(env.cpus, 5, "online list 0-3,6");
    assert_eq!(env.memory_bytes, 8_039_932 * 1024);
    assert!(env.clock_ticks > 0);
}

#[test]
fn environment_of_this_machine() {
    let env = environment(&Host::real());
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(env.kernel, release.trim());
    assert!(env.cpus >= 1);
    assert!(env.memory_bytes > 0);
    assert!(env.clock_ticks > 0);
    assert!(!env.cpu_model.is_empty(), "{env:?}");
    println!("{env:?}");
}

// ---------------------------------------------------------------- CPU

fn sample_at(at: Instant, user_us: u64, sys_us: u64, stat: &str) -> CpuSample {
    CpuSample {
        at,
        user_us,
        sys_us,
        machine: ProcStatCpu::parse(stat),
    }
}

#[test]
fn proc_stat_aggregate_line() {
    let a = ProcStatCpu::parse(&read_fixture("proc-stat-a.txt")).unwrap();
    // user nice system irq softirq steal; guest is already inside user.
    assert_eq!(a.busy, 10_000 + 100 + 4_000 + 300 + 200 + 50);
    assert_eq!(a.idle, 50_000);
    assert_eq!(a.iowait, 1_000);
    // A 2.6.0-era line with no steal column.
    let old = ProcStatCpu::parse("cpu  1 2 3 4 5 6 7\n").unwrap();
    assert_eq!((old.busy, old.idle, old.iowait), (1 + 2 + 3 + 6 + 7, 4, 5));
    assert_eq!(ProcStatCpu::parse("cpu0 1 2 3 4\n"), None);
    assert_eq!(ProcStatCpu::parse("cpu  1 x 3 4\n"), None);
}

#[test]
fn cpu_interval_and_summary_from_fixture_pairs() {
    let t0 = Instant::now();
    let a = sample_at(t0, 2_000_000, 1_000_000, &read_fixture("proc-stat-a.txt"));
    let b = sample_at(
        t0 + Duration::from_secs(5),
        3_500_000,
        1_250_000,
        &read_fixture("proc-stat-b.txt"),
    );
    let i = cpu_interval(&a, &b);
    assert_close("user_s", i.user_s, 1.5);
    assert_close("sys_s", i.sys_s, 0.25);
    // Δbusy = 500 user + 200 system + 20 irq + 20 softirq + 10 steal = 750;
    // Δidle 200 + Δiowait 50; the 300 guest ticks are inside user already.
    assert_close("machine_busy_pct", i.machine_busy_pct, 75.0);

    let s = cpu_summary(&a, &b, 35_000);
    assert_close("user_s", s.user_s, 1.5);
    assert_close("sys_s", s.sys_s, 0.25);
    assert_close("iops_per_cpu_s", s.iops_per_cpu_s, 20_000.0);
    assert_close("machine_busy_pct", s.machine_busy_pct, 75.0);
}

#[test]
fn cpu_counters_going_backwards_give_no_negative() {
    let t0 = Instant::now();
    // iowait runs backwards on some NO_HZ kernels; rusage cannot, but the
    // samples might be passed in the wrong order.
    let a = sample_at(t0, 5_000_000, 5_000_000, "cpu  100 0 100 1000 500 0 0 0\n");
    let b = sample_at(t0, 4_000_000, 4_000_000, "cpu  150 0 150 1100 400 0 0 0\n");
    let i = cpu_interval(&a, &b);
    assert_eq!((i.user_s, i.sys_s), (0.0, 0.0));
    // Δbusy 100, Δidle 100, Δiowait counted as 0.
    assert_close("machine_busy_pct", i.machine_busy_pct, 50.0);
    let s = cpu_summary(&a, &b, 1000);
    assert_eq!(
        s.iops_per_cpu_s, 0.0,
        "no CPU time measured: no efficiency figure"
    );

    let no_proc = CpuSample { machine: None, ..a };
    assert_eq!(cpu_interval(&no_proc, &b).machine_busy_pct, 0.0);
    let same = cpu_interval(&b, &b);
    assert_eq!(same.machine_busy_pct, 0.0, "no ticks passed");
}

#[test]
fn cpu_sample_reads_the_hosts_proc_stat() {
    let host = Host {
        sys: fixture("sys-arm64"),
        proc: fixture("proc-arm64"),
    };
    let s = cpu_sample(&host);
    assert_eq!(
        s.machine,
        ProcStatCpu::parse(&read_fixture("proc-stat-a.txt"))
    );
    let nowhere = Host {
        sys: fixture("absent"),
        proc: fixture("absent"),
    };
    assert_eq!(cpu_sample(&nowhere).machine, None);
}

#[test]
fn cpu_sample_of_this_process_sees_its_own_work() {
    let host = Host::real();
    let a = cpu_sample(&host);
    assert!(a.machine.is_some(), "/proc/stat is readable on Linux");
    // Spin until getrusage moves (its resolution is a tick on some kernels).
    let mut x = 0u64;
    let mut b = cpu_sample(&host);
    for _ in 0..10_000 {
        for i in 0..100_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
        }
        b = cpu_sample(&host);
        if b.user_us + b.sys_us > a.user_us + a.sys_us {
            break;
        }
    }
    let i = cpu_interval(&a, &b);
    assert!(i.user_s + i.sys_s > 0.0, "this process used CPU: {i:?}");
    assert!((0.0..=100.0).contains(&i.machine_busy_pct), "{i:?}");
}

// ---------------------------------------------------------------- diskstats

#[test]
fn diskstats_lines_of_each_kernel_era() {
    // 14 fields: kernels before 4.18.
    let text = read_fixture("diskstats-14.txt");
    let (name, c) = DiskCounters::parse_line(text.lines().next().unwrap()).unwrap();
    assert_eq!(name, "sda");
    assert_eq!(
        c,
        DiskCounters {
            reads: 52_301,
            reads_merged: 1_203,
            sectors_read: 2_340_178,
            read_ms: 41_210,
            writes: 80_722,
            writes_merged: 70_112,
            sectors_written: 4_361_944,
            write_ms: 912_340,
            in_flight: 0,
            io_ms: 201_044,
            weighted_ms: 953_620,
            ..DiskCounters::default()
        }
    );
    // 18 fields: discards from 4.18.
    let text = read_fixture("diskstats-18.txt");
    let (name, c) = DiskCounters::parse_line(text.lines().next().unwrap()).unwrap();
    assert_eq!(name, "nvme0n1");
    assert_eq!(c.in_flight, 3);
    assert_eq!(c.weighted_ms, 3_202_668);
    assert_eq!(
        (
            c.discards,
            c.discards_merged,
            c.sectors_discarded,
            c.discard_ms
        ),
        (1_204, 0, 8_912_896, 412)
    );
    assert_eq!((c.flushes, c.flush_ms), (0, 0));
    // 20 fields: flushes from 5.5.
    let text = read_fixture("diskstats-20-a.txt");
    let (name, c) = DiskCounters::parse_line(text.lines().next().unwrap()).unwrap();
    assert_eq!(name, "loop0");
    assert_eq!(c.reads, 161_496_843);
    assert_eq!(c.sectors_read, 2_638_766_265);
    assert_eq!(c.weighted_ms, 25_408_926);
    assert_eq!(
        (c.discards, c.sectors_discarded, c.discard_ms),
        (270, 24_953_086, 27)
    );
    assert_eq!((c.flushes, c.flush_ms), (6_387, 806));
    // Before 2.6.25 a partition had four counters.
    let (name, c) = DiskCounters::parse_line("   3    1 hda1 35486 38030 38030 38030").unwrap();
    assert_eq!(name, "hda1");
    assert_eq!(
        (
            c.reads,
            c.sectors_read,
            c.writes,
            c.sectors_written,
            c.read_ms
        ),
        (35_486, 38_030, 38_030, 38_030, 0)
    );
    for bad in [
        "",
        "8 0 sda",
        "8 0 sda 1 2 3 4 5 6 7 8 9 x 11",
        "8 0 sda 1 2 3 4 5",
    ] {
        assert_eq!(DiskCounters::parse_line(bad), None, "{bad:?}");
    }
}

#[test]
fn snapshot_keeps_the_devices_asked_for_in_order() {
    let text = read_fixture("diskstats-20-a.txt");
    let snap = DiskStatsSnapshot::parse(&text, &names(&["dm-0", "nosuch", "sda"]), Instant::now());
    let found: Vec<(&str, bool)> = snap
        .devices
        .iter()
        .map(|(n, c)| (n.as_str(), c.is_some()))
        .collect();
    assert_eq!(found, [("dm-0", true), ("nosuch", false), ("sda", true)]);
    assert_eq!(snap.get("dm-0").unwrap().reads, 5_000);
    assert!(snap.get("nosuch").is_none());
}

#[test]
fn iostat_figures_for_a_known_pair() {
    let t0 = Instant::now();
    let devices = names(&["sda", "dm-0", "loop0", "sdc"]);
    let a = DiskStatsSnapshot::parse(&read_fixture("diskstats-20-a.txt"), &devices, t0);
    let b = DiskStatsSnapshot::parse(
        &read_fixture("diskstats-20-b.txt"),
        &devices,
        t0 + Duration::from_secs(2),
    );
    let stats = device_stats(&a, &b);
    // sdc appears only in the later snapshot: left out, not reported idle.
    let listed: Vec<&str> = stats.iter().map(|s| s.device.as_str()).collect();
    assert_eq!(listed, ["sda", "dm-0", "loop0"]);
    stats.iter().for_each(assert_sane);

    // sda over 2 s: 400 reads of 16 sectors (8 KiB), 100 writes of 256 sectors
    // (128 KiB), 200 ms reading, 1000 ms writing, 1500 ms busy, 2400 ms
    // weighted, 4 discards, 20 flushes.
    let sda = &stats[0];
    assert_close("r/s", sda.r_s, 200.0);
    assert_close("w/s", sda.w_s, 50.0);
    assert_close("rMB/s", sda.rmb_s, 400.0 * 8192.0 / 1_048_576.0 / 2.0); // 1.5625 (MiB)
    assert_close("wMB/s", sda.wmb_s, 100.0 * 131_072.0 / 1_048_576.0 / 2.0); // 6.25
    assert_close("rareq-sz", sda.rareq_sz_kb, 8.0);
    assert_close("wareq-sz", sda.wareq_sz_kb, 128.0);
    assert_close("r_await", sda.r_await_ms, 0.5);
    assert_close("w_await", sda.w_await_ms, 10.0);
    assert_close("aqu-sz", sda.aqu_sz, 1.2);
    assert_close("%util", sda.util_pct, 75.0);
    assert_close("d/s", sda.d_s, 2.0);
    assert_close("f/s", sda.f_s, 10.0);

    // dm-0: 100 reads of 4 KiB; io_ms moved 2100 ms in a 2000 ms interval.
    let dm = &stats[1];
    assert_close("r/s", dm.r_s, 50.0);
    assert_close("rareq-sz", dm.rareq_sz_kb, 4.0);
    assert_close("r_await", dm.r_await_ms, 1.0);
    assert_close("aqu-sz", dm.aqu_sz, 0.05);
    assert_close("%util", dm.util_pct, 100.0);
    assert_eq!((dm.w_s, dm.wareq_sz_kb, dm.w_await_ms), (0.0, 0.0, 0.0));

    // loop0 did nothing: every figure zero, none NaN.
    assert_eq!(
        stats[2],
        DeviceStats {
            device: "loop0".into(),
            ..DeviceStats::default()
        }
    );
}

#[test]
fn wrapped_or_backward_counters_count_as_no_change() {
    let t0 = Instant::now();
    let devices = names(&["sdx", "sdy"]);
    // sdx: 32-bit counters that wrapped (reads, sectors, ms) on an old kernel;
    // sdy: removed and re-added, every counter back near zero.
    let a = DiskStatsSnapshot::parse(
        "8 0 sdx 4294967000 0 4294966000 4294967200 10 0 80 5 0 4294967000 4294967290\n\
         8 16 sdy 900 0 7200 900 900 0 7200 900 0 1800 1800\n",
        &devices,
        t0,
    );
    let b = DiskStatsSnapshot::parse(
        "8 0 sdx 200 0 1600 100 20 0 160 9 0 400 300\n\
         8 16 sdy 3 0 24 1 0 0 0 0 0 2 2\n",
        &devices,
        t0 + Duration::from_secs(1),
    );
    let stats = device_stats(&a, &b);
    assert_eq!(stats.len(), 2);
    stats.iter().for_each(assert_sane);
    let sdx = &stats[0];
    assert_eq!(
        (sdx.r_s, sdx.rmb_s, sdx.rareq_sz_kb, sdx.r_await_ms),
        (0.0, 0.0, 0.0, 0.0)
    );
    assert_eq!((sdx.util_pct, sdx.aqu_sz), (0.0, 0.0));
    // The writes did not wrap and still count.
    assert_close("w/s", sdx.w_s, 10.0);
    assert_close("w_await", sdx.w_await_ms, 0.4);
    assert_eq!(
        stats[1],
        DeviceStats {
            device: "sdy".into(),
            ..DeviceStats::default()
        }
    );
}

#[test]
fn zero_or_reversed_interval_gives_no_rates() {
    let t0 = Instant::now();
    let devices = names(&["sda"]);
    let a = DiskStatsSnapshot::parse(&read_fixture("diskstats-20-a.txt"), &devices, t0);
    let b = DiskStatsSnapshot::parse(&read_fixture("diskstats-20-b.txt"), &devices, t0);
    let same_instant = device_stats(&a, &b);
    assert_sane(&same_instant[0]);
    assert_eq!(same_instant[0].r_s, 0.0);
    // Per-request figures need no clock.
    assert_close("rareq-sz", same_instant[0].rareq_sz_kb, 8.0);
    assert_close("r_await", same_instant[0].r_await_ms, 0.5);
    let mut reversed = b.clone();
    reversed.at = t0;
    let mut earlier = a.clone();
    earlier.at = t0 + Duration::from_secs(1);
    device_stats(&earlier, &reversed)
        .iter()
        .for_each(assert_sane);
}

#[test]
fn diskstats_through_the_host() {
    let host = Host {
        sys: fixture("sys-arm64"),
        proc: fixture("proc-arm64"),
    };
    let snap = diskstats(&host, &names(&["sda", "vdq"]));
    assert_eq!(snap.get("sda").unwrap().sectors_written, 160_000);
    assert!(snap.get("vdq").is_none());
    let nowhere = Host {
        sys: fixture("absent"),
        proc: fixture("absent"),
    };
    let empty = diskstats(&nowhere, &names(&["sda"]));
    assert_eq!(empty.devices, [("sda".to_string(), None)]);
    assert!(device_stats(&empty, &diskstats(&nowhere, &names(&["sda"]))).is_empty());
}

// ---------------------------------------------------------------- devices_for, fixture

/// A fixture sysfs: sda with partition sda1; dm-0 (multipath) over sdb and
/// sdc; dm-1 (LVM) over dm-0; dm-2 over sdb and dm-0 (a repeat to dedupe);
/// loop0 backed by a real file whose filesystem is fixture device `vdz`, with
/// partition loop0p1; loop1 backed by a file that no longer exists.
struct SysFixture {
    _root: tempfile::TempDir,
    host: Host,
    backing_file: PathBuf,
    /// Whether the backing file's filesystem has a device number sysfs can name.
    backing_has_device: bool,
}

fn sys_fixture() -> SysFixture {
    // Under the target dir, not /tmp: the backing file needs a filesystem with a real device number.
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sys = root.path().join("sys");
    let backing_file = root.path().join("loop0.img");
    fs::write(&backing_file, b"").unwrap();
    let dev = fs::metadata(&backing_file).unwrap().dev();
    let backing_dev = format!("{}:{}", libc::major(dev), libc::minor(dev));
    let backing_has_device = libc::major(dev) != 0;

    let mk = |rel: &str, content: &str| {
        let p = sys.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    };
    fs::create_dir_all(sys.join("dev/block")).unwrap();
    fs::create_dir_all(sys.join("class/block")).unwrap();
    let register = |dir: &str, name: &str, dev: &str| {
        mk(&format!("{dir}/dev"), dev);
        symlink(sys.join(dir), sys.join(format!("dev/block/{dev}"))).unwrap();
        symlink(sys.join(dir), sys.join(format!("class/block/{name}"))).unwrap();
    };
    let slave = |dir: &str, name: &str, target: &str| {
        fs::create_dir_all(sys.join(dir).join("slaves")).unwrap();
        symlink(sys.join(target), sys.join(dir).join("slaves").join(name)).unwrap();
    };
    let sd = "devices/pci0/host0/block";
    let virt = "devices/virtual/block";
    register(&format!("{sd}/sda"), "sda", "8:0");
    register(&format!("{sd}/sda/sda1"), "sda1", "8:1");
    mk(&format!("{sd}/sda/sda1/partition"), "1");
    register(&format!("{sd}/sdb"), "sdb", "8:16");
    register(&format!("{sd}/sdc"), "sdc", "8:32");
    register(&format!("{virt}/dm-0"), "dm-0", "253:0");
    slave(&format!("{virt}/dm-0"), "sdb", &format!("{sd}/sdb"));
    slave(&format!("{virt}/dm-0"), "sdc", &format!("{sd}/sdc"));
    register(&format!("{virt}/dm-1"), "dm-1", "253:1");
    slave(&format!("{virt}/dm-1"), "dm-0", &format!("{virt}/dm-0"));
    register(&format!("{virt}/dm-2"), "dm-2", "253:2");
    slave(&format!("{virt}/dm-2"), "dm-0", &format!("{virt}/dm-0"));
    slave(&format!("{virt}/dm-2"), "sdb", &format!("{sd}/sdb"));
    register(&format!("{virt}/loop0"), "loop0", "7:0");
    mk(
        &format!("{virt}/loop0/loop/backing_file"),
        &format!("{}\n", backing_file.display()),
    );
    register(&format!("{virt}/loop0/loop0p1"), "loop0p1", "259:0");
    mk(&format!("{virt}/loop0/loop0p1/partition"), "1");
    register(&format!("{virt}/loop1"), "loop1", "7:1");
    mk(
        &format!("{virt}/loop1/loop/backing_file"),
        "/nonexistent/loop1.img (deleted)\n",
    );
    if backing_has_device {
        register("devices/pci0/virtio9/block/vdz", "vdz", &backing_dev);
    }
    let host = Host {
        sys,
        proc: root.path().join("proc"),
    };
    SysFixture {
        _root: root,
        host,
        backing_file,
        backing_has_device,
    }
}

#[test]
fn devices_for_stacked_partitioned_and_loop_devices() {
    let f = sys_fixture();
    let host = &f.host;
    assert_eq!(devices_for_block(host, 8, 0), names(&["sda"]));
    // A partition has its own line; its disk's is not added.
    assert_eq!(devices_for_block(host, 8, 1), names(&["sda1"]));
    assert_eq!(
        devices_for_block(host, 253, 0),
        names(&["dm-0", "sdb", "sdc"])
    );
    assert_eq!(
        devices_for_block(host, 253, 1),
        names(&["dm-1", "dm-0", "sdb", "sdc"])
    );
    // sdb is reached twice (directly and through dm-0) and listed once.
    assert_eq!(
        devices_for_block(host, 253, 2),
        names(&["dm-2", "dm-0", "sdb", "sdc"])
    );
    assert_eq!(devices_for_block(host, 7, 1), names(&["loop1"]));
    assert!(devices_for_block(host, 9, 9).is_empty());
    if f.backing_has_device {
        assert_eq!(devices_for_block(host, 7, 0), names(&["loop0", "vdz"]));
        // A loop partition's requests also end in the whole loop device's backing file.
        assert_eq!(devices_for_block(host, 259, 0), names(&["loop0p1", "vdz"]));
        // A regular file: the device of its filesystem.
        assert_eq!(devices_for(host, &f.backing_file), names(&["vdz"]));
    } else {
        // Overlay, tmpfs, btrfs: the backing file's filesystem has no block
        // device to add, and none is invented.
        println!("note: the target dir's filesystem has an anonymous device number: the loop device alone is checked");
        assert_eq!(devices_for_block(host, 7, 0), names(&["loop0"]));
    }
    assert!(devices_for(host, Path::new("/nonexistent/file")).is_empty());
}

// ---------------------------------------------------------------- devices_for, real

#[test]
fn a_file_under_the_target_dir_maps_to_its_filesystems_device() {
    let host = Host::real();
    let file = tempfile::NamedTempFile::new_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let devices = devices_for(&host, file.path());
    let dev = fs::metadata(file.path()).unwrap().dev();
    if libc::major(dev) != 0 {
        // A real device number: that device comes first.
        let sysfs = fs::canonicalize(format!(
            "/sys/dev/block/{}:{}",
            libc::major(dev),
            libc::minor(dev)
        ))
        .unwrap();
        assert_eq!(
            devices.first().map(String::as_str),
            Some(&*sysfs.file_name().unwrap().to_string_lossy()),
            "{devices:?}"
        );
    } else {
        // Overlay, tmpfs, btrfs: whatever devices are found, they are real.
        println!(
            "note: the filesystem of {} has an anonymous device number (0:{}); found {devices:?}",
            file.path().display(),
            libc::minor(dev)
        );
    }
    let snap = diskstats(&host, &devices);
    for (name, counters) in &snap.devices {
        assert!(
            counters.is_some(),
            "{name} of {devices:?} is not in /proc/diskstats"
        );
    }
}

/// A RAM-backed loop device (backing file in /dev/shm), or the reason there is none.
fn ram_loop(tag: &str, size_bytes: u64) -> Result<(LoopDevice, PathBuf), String> {
    if !Path::new("/dev/shm").is_dir() {
        return Err("no /dev/shm".into());
    }
    let backing = PathBuf::from(format!(
        "/dev/shm/cairn-bench-sysinfo-{tag}-{}.img",
        std::process::id()
    ));
    match LoopDevice::create(&backing, size_bytes, 512) {
        Ok(dev) => Ok((dev, backing)),
        Err(reason) => {
            let _ = fs::remove_file(&backing);
            Err(reason)
        }
    }
}

#[test]
fn real_loop_devices_map_to_themselves_and_their_backing() {
    let host = Host::real();
    let (ram, ram_backing) = match ram_loop("map", 16 << 20) {
        Ok(x) => x,
        Err(reason) => {
            cairn_io::test_support::prerequisite::missing(&reason);
            return;
        }
    };
    // Backed by tmpfs, which is on no block device.
    assert_eq!(devices_for(&host, &ram.path), [ram.name()]);
    drop(ram);
    fs::remove_file(ram_backing).unwrap();

    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let backing = dir.path().join("disk.img");
    let on_disk = LoopDevice::create(&backing, 16 << 20, 512).unwrap();
    let mut want = vec![on_disk.name()];
    want.extend(devices_for(&host, &backing));
    assert_eq!(devices_for(&host, &on_disk.path), want);
}

#[test]
fn direct_reads_on_a_ram_loop_device_show_in_its_diskstats() {
    const READS: u64 = 300;
    const READ_BYTES: usize = 4096;
    let host = Host::real();
    let (dev, backing) = match ram_loop("reads", 64 << 20) {
        Ok(x) => x,
        Err(reason) => {
            cairn_io::test_support::prerequisite::missing(&reason);
            return;
        }
    };
    let device = fs::File::options()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&dev.path)
        .unwrap();
    let names = vec![dev.name()];
    let mut buf = AlignedBuf::zeroed(READ_BYTES);
    let a = diskstats(&host, &names);
    for i in 0..READS {
        // Far apart, so no two could ever be merged into one request.
        let offset = (i * 37 % 256) * 256 * 1024 + (i % 7) * READ_BYTES as u64;
        let n = device.read_at(&mut buf, offset).unwrap();
        assert_eq!(n, READ_BYTES);
    }
    let b = diskstats(&host, &names);
    drop(device);
    drop(dev);
    fs::remove_file(backing).unwrap();

    let (ca, cb) = (a.get(&names[0]).unwrap(), b.get(&names[0]).unwrap());
    assert_eq!(cb.reads - ca.reads, READS, "one request per read issued");
    assert_eq!(cb.reads_merged - ca.reads_merged, 0);
    assert_eq!(
        cb.sectors_read - ca.sectors_read,
        READS * READ_BYTES as u64 / 512
    );
    assert_eq!(cb.writes - ca.writes, 0);

    let stats = device_stats(&a, &b);
    assert_eq!(stats.len(), 1);
    let s = &stats[0];
    assert_sane(s);
    let dt_s = b.at.duration_since(a.at).as_secs_f64();
    assert_close("r/s × Δt", s.r_s * dt_s, READS as f64);
    assert_close("rareq-sz", s.rareq_sz_kb, 4.0);
    assert_close(
        "rMB/s × Δt",
        s.rmb_s * dt_s,
        READS as f64 * READ_BYTES as f64 / 1_048_576.0,
    );
    assert_eq!((s.w_s, s.wmb_s), (0.0, 0.0));
}
