#!/usr/bin/env bash
# Cairn's workload engine against fio, side by side, on the same targets in
# one run (see bench/README.md, "Cairn's workload engine against fio", and
# docs/measuring.md).
#
#   sudo bench/compare-fio.sh            # 3 rounds x 10 s per tool and case
#   sudo bench/compare-fio.sh --quick    # 3 rounds x 2 s, 512 MiB targets
#
# Targets: a RAM-backed loop device (a pre-filled /dev/shm file behind
# losetup --direct-io=on --sector-size 4096) and a pre-filled file on the root
# filesystem (under target/). Cases, on each target:
#   8 KiB random read  QD1   cairn --engine sync (threads=1)  vs fio psync
#   8 KiB random read  QD32  cairn --engine uring             vs fio io_uring
#   8 KiB random write QD32  cairn --engine uring             vs fio io_uring
#   1 MiB sequential read QD8 cairn --engine uring            vs fio io_uring
# Each case alternates the two tools, fio first in odd rounds and cairn first
# in even ones; both use O_DIRECT, time-based runs of the same length over the
# same region (fio with norandommap).
#
# Environment: BENCH_SECONDS (per run; 10, quick 2), BENCH_ROUNDS (3; at
# least 3), BENCH_SIZE_MIB (target size; 2048, quick 512), BENCH_TARGETS
# ("loop file"), QUIET_WAIT (seconds to wait before each run for a quiet
# machine, 10; 0 = do not wait), BENCH_OUT (output directory; default
# target/compare-fio/<UTC time>).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
if [ "$quick" -eq 1 ]; then
    seconds="${BENCH_SECONDS:-2}"
    size_mib="${BENCH_SIZE_MIB:-512}"
else
    seconds="${BENCH_SECONDS:-10}"
    size_mib="${BENCH_SIZE_MIB:-2048}"
fi
rounds="${BENCH_ROUNDS:-3}"
targets="${BENCH_TARGETS:-loop file}"
quiet_wait="${QUIET_WAIT:-10}"
out="$(bench_out)"

need_rounds "$rounds"
need_root "it attaches a loop device and may install fio"
case " $targets " in
    *" loop "*)
        need_loop
        need_shm $((size_mib + 256))
        ;;
esac
# fio from Debian's packages; python3 to run and read.
need_tools fio python3
cairn="$(build_cairn)"

mkdir -p "$out"
img="/dev/shm/cairn-compare-fio-$$.img"
file="$root/target/compare-fio/target-$$.dat"
loopdev=""
cleanup() {
    if [ -n "$loopdev" ]; then losetup -d "$loopdev" || true; fi
    rm -f "$img" "$file"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

target_args=()
for t in $targets; do
    case "$t" in
        loop)
            # Pre-fill: first touch of tmpfs pages runs at ~375 MB/s against
            # ~12 GB/s for pages that exist; no measured run may pay it.
            dd if=/dev/zero of="$img" bs=1M count="$size_mib" status=none
            loopdev="$(losetup --find --show --direct-io=on --sector-size 4096 "$img")"
            echo "loop: $loopdev ($(losetup --list --noheadings --output SIZELIMIT,DIO,LOG-SEC,BACK-FILE "$loopdev" | tr -s ' '))," \
                 "max_sectors_kb=$(cat /sys/block/"$(basename "$loopdev")"/queue/max_sectors_kb)"
            target_args+=("loop=$loopdev")
            ;;
        file)
            mkdir -p "$(dirname "$file")"
            # Written in full with data (reading holes measures the zero page).
            fio --name=fill --filename="$file" --rw=write --bs=1m --size="${size_mib}m" \
                --ioengine=psync --direct=1 --output=/dev/null
            sync
            echo "file: $file ($(df --output=fstype,source "$file" | tail -1 | tr -s ' '))"
            target_args+=("file=$file")
            ;;
        *) echo "compare-fio.sh: unknown target '$t' in BENCH_TARGETS; expected loop and/or file" >&2; exit 2 ;;
    esac
done

cat >"$out/compare.py" <<'PY'
"""Run fio and cairn alternately on each target and case, then summarise.

Every run is measured the same way for both tools: IOPS and latency
percentiles from the tool's own output (fio's JSON, cairn's result.json);
CPU as the whole process's user + system time from wait4() (the child and
every descendant it reaped: fio's job processes too), and the whole
machine's busy time from /proc/stat around the run (which also counts the
loop device's kworkers and interrupt work that no process is charged for).
"""
import json
import os
import statistics
import subprocess
import sys
import time

out, cairn, seconds, rounds, size_mib, quiet_wait = sys.argv[1:7]
seconds, rounds, size_mib, quiet_wait = int(seconds), int(rounds), int(size_mib), float(quiet_wait)
targets = [a.split("=", 1) for a in sys.argv[7:]]
TICK = os.sysconf("SC_CLK_TCK")

# name, --rw, bs, qd, cairn engine, fio ioengine
CASES = [
    ("randread-8k-qd1", "randread", "8k", 1, "sync", "psync"),
    ("randread-8k-qd32", "randread", "8k", 32, "uring", "io_uring"),
    ("randwrite-8k-qd32", "randwrite", "8k", 32, "uring", "io_uring"),
    ("read-1m-qd8", "read", "1m", 8, "uring", "io_uring"),
]


def proc_stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v), v[3] + v[4]  # all ticks; idle + iowait


def wait_quiet():
    """Up to quiet_wait s for a 250 ms window with the machine >= 85% idle."""
    deadline = time.monotonic() + quiet_wait
    while True:
        t0, i0 = proc_stat()
        time.sleep(0.25)
        t1, i1 = proc_stat()
        if (i1 - i0) >= 0.85 * max(1, t1 - t0):
            return True
        if time.monotonic() >= deadline:
            return False


def measure(cmd, log):
    t0, i0 = proc_stat()
    w0 = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - w0
    t1, i1 = proc_stat()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed ({os.waitstatus_to_exitcode(status)}): {' '.join(cmd)}\n" + open(log).read()[-2000:])
    busy = ((t1 - t0) - (i1 - i0)) / TICK
    return {"user_s": ru.ru_utime, "sys_s": ru.ru_stime, "wall_s": wall, "machine_busy_s": busy}


def run_fio(path, case, stem):
    name, rw, bs, qd, _, engine = case
    cmd = ["fio", "--name=cmp", f"--filename={path}", f"--rw={rw}", f"--bs={bs}",
           f"--ioengine={engine}", f"--iodepth={qd}", "--direct=1", "--time_based",
           f"--runtime={seconds}", f"--size={size_mib}m", "--norandommap", "--randrepeat=0",
           "--lat_percentiles=1", "--output-format=json", f"--output={stem}.fio.json"]
    cpu = measure(cmd, f"{stem}.fio.log")
    job = json.load(open(f"{stem}.fio.json"))["jobs"][0]
    d = job["write"] if "write" in rw else job["read"]
    pct = d["lat_ns"]["percentile"]
    return dict(cpu, ios=d["total_ios"], iops=d["iops"],
                p50_us=pct["50.000000"] / 1e3, p99_us=pct["99.000000"] / 1e3,
                clat_p50_us=d["clat_ns"]["percentile"]["50.000000"] / 1e3,
                # fio's own figure: its job's CPU only (see docs/measuring.md); for the record.
                own_cpu_s=(job["usr_cpu"] + job["sys_cpu"]) / 100 * job["elapsed"])


def run_cairn(path, case, stem, seed):
    name, rw, bs, qd, engine, _ = case
    cmd = [cairn, "--engine", engine, "bench", "quick", "--target", path, "--rw", rw,
           "--bs", bs, "--qd", str(qd), "--time", f"{seconds}s", "--out", f"{stem}.cairn",
           "--seed", str(seed), "--force"]
    cpu = measure(cmd, f"{stem}.cairn.log")
    run = json.load(open(f"{stem}.cairn/result.json"))["runs"][0]
    a = run["totals"]["all"]["all"]
    pct = {p["p"]: p["us"] for p in a["latency"]["percentiles"]}
    return dict(cpu, ios=a["ios"], iops=a["iops"], p50_us=pct[50.0], p99_us=pct[99.0],
                # cairn's own figure: over the measured window only; for the record.
                own_iops_per_cpu_s=run["cpu"]["iops_per_cpu_s"])


def per_cpu(r):
    cpu = r["user_s"] + r["sys_s"]
    r["iops_per_cpu_s"] = r["ios"] / cpu if cpu > 0 else float("nan")
    r["iops_per_machine_cpu_s"] = r["ios"] / r["machine_busy_s"] if r["machine_busy_s"] > 0 else float("nan")
    return r


os.makedirs(f"{out}/raw", exist_ok=True)
rows = []
noisy = 0
print(f"{rounds} rounds x {len(targets)} targets x {len(CASES)} cases x 2 tools x {seconds} s;"
      f" tools alternate, fio first in odd rounds; before each run, wait up to {quiet_wait:g} s"
      f" for the machine to be >= 85% idle")
for rnd in range(1, rounds + 1):
    for tname, path in targets:
        for case in CASES:
            order = ["fio", "cairn"] if rnd % 2 else ["cairn", "fio"]
            got = {}
            for tool in order:
                if quiet_wait > 0 and not wait_quiet():
                    noisy += 1
                stem = f"{out}/raw/{tname}.{case[0]}.r{rnd}"
                r = run_fio(path, case, stem) if tool == "fio" else run_cairn(path, case, stem, rnd)
                got[tool] = per_cpu(r)
                rows.append(dict(r, round=rnd, target=tname, case=case[0], tool=tool))
            print(f"round {rnd} {tname:4} {case[0]:18} " + "  ".join(
                f"{t}={got[t]['iops']:>9.0f} IO/s p50 {got[t]['p50_us']:>7.1f} µs "
                f"{got[t]['iops_per_cpu_s']:>8.0f} IO/CPU-s" for t in order), flush=True)

med = statistics.median
summary = {"seconds": seconds, "rounds": rounds, "size_mib": size_mib,
           "runs_without_a_quiet_window": noisy, "cases": []}
print()
print("medians over rounds; ratio = cairn / fio. IOPS per CPU-second: I/Os over the process's"
      " user+sys (wait4); machine: over the whole machine's busy time (/proc/stat)")
hdr = (f"{'target':6} {'case':18} {'tool':5} {'IOPS':>9} {'p50 µs':>8} {'p99 µs':>8} "
       f"{'IO/CPU-s':>9} {'IO/mach-s':>9}")
print(hdr)
print("-" * len(hdr))
verdicts = []
for tname, _ in targets:
    for case in CASES:
        m = {}
        for tool in ("fio", "cairn"):
            rs = [r for r in rows if r["target"] == tname and r["case"] == case[0] and r["tool"] == tool]
            m[tool] = {k: med(r[k] for r in rs) for k in
                       ("iops", "p50_us", "p99_us", "iops_per_cpu_s", "iops_per_machine_cpu_s",
                        "user_s", "sys_s", "machine_busy_s")}
            m[tool]["iops_per_round"] = [round(r["iops"]) for r in rs]
            x = m[tool]
            print(f"{tname:6} {case[0]:18} {tool:5} {x['iops']:>9.0f} {x['p50_us']:>8.1f} "
                  f"{x['p99_us']:>8.1f} {x['iops_per_cpu_s']:>9.0f} {x['iops_per_machine_cpu_s']:>9.0f}")
        ratio = {k: m["cairn"][k] / m["fio"][k] for k in
                 ("iops", "iops_per_cpu_s", "iops_per_machine_cpu_s", "p50_us", "p99_us")}
        checks = []
        if case[3] == 32:
            checks.append(("IOPS >= 0.97x fio", ratio["iops"] >= 0.97))
            checks.append(("IOPS per CPU-s >= 1.0x fio", ratio["iops_per_cpu_s"] >= 1.0))
        if case[3] == 1:
            checks.append(("p50 within 5% of fio", abs(ratio["p50_us"] - 1) <= 0.05))
        verdict = "; ".join(f"{what}: {'meets' if ok else 'SHORT'}" for what, ok in checks)
        print(f"{tname:6} {case[0]:18} ratio {ratio['iops']:>9.3f} {ratio['p50_us']:>8.3f} "
              f"{ratio['p99_us']:>8.3f} {ratio['iops_per_cpu_s']:>9.3f} "
              f"{ratio['iops_per_machine_cpu_s']:>9.3f}  {verdict}")
        print()
        summary["cases"].append({"target": tname, "case": case[0], "rw": case[1], "bs": case[2],
                                 "qd": case[3], "cairn_engine": case[4], "fio_ioengine": case[5],
                                 "fio": m["fio"], "cairn": m["cairn"], "ratio_cairn_over_fio": ratio,
                                 "checks": [{"target": w, "met": ok} for w, ok in checks]})
        verdicts += checks
if noisy:
    print(f"note: {noisy} runs started without a quiet window (the machine was busy); "
          "treat their figures with care")
with open(f"{out}/summary.json", "w") as f:
    json.dump(summary, f, indent=2)
with open(f"{out}/rounds.tsv", "w") as f:
    keys = ["round", "target", "case", "tool", "iops", "p50_us", "p99_us", "ios", "user_s",
            "sys_s", "wall_s", "machine_busy_s", "iops_per_cpu_s", "iops_per_machine_cpu_s",
            "own_cpu_s", "own_iops_per_cpu_s"]
    f.write("\t".join(keys) + "\n")
    for r in rows:
        f.write("\t".join(str(r.get(k, "")) for k in keys) + "\n")
met = sum(ok for _, ok in verdicts)
print(f"targets met: {met} of {len(verdicts)}; summary: {out}/summary.json, per run: {out}/rounds.tsv")
PY

echo "host: $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%M:%SZ); $(fio --version); cairn $("$cairn" --version 2>/dev/null | head -1)"
python3 "$out/compare.py" "$out" "$cairn" "$seconds" "$rounds" "$size_mib" "$quiet_wait" "${target_args[@]}"
