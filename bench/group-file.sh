#!/usr/bin/env bash
# `cairn bench` on a Cairn group file against the same engine on a raw device
# of the same kind, in one run (see bench/README.md, "A group file as a
# benchmark target", and docs/measuring.md).
#
#   sudo bench/group-file.sh            # 3 rounds x 5 s per side and case
#   sudo bench/group-file.sh --quick    # 3 rounds x 2 s
#
# Devices: three RAM-backed 4Kn loop devices of the same size (pre-filled
# /dev/shm files, losetup --direct-io=on --sector-size 4096):
#   raw     the peer: `cairn bench quick --target /dev/loopA`
#   ext     group EXT, external redundancy, on loopB: `--target +EXT/f`
#   mirror  group MIR, normal redundancy, on loopB' and loopC (two failure
#           groups): every write is two device writes — informative
# Cases: 8 KiB random read QD1 (--engine sync), 8 KiB random read QD32,
# 8 KiB random write QD32, 1 MiB sequential read QD8 (io_uring). Each case
# alternates the sides, the order rotated every round; the ratio printed is
# the median over rounds of group-file IOPS / raw IOPS.
#
# Environment: BENCH_SECONDS (5, quick 2), BENCH_ROUNDS (3; at least 3),
# BENCH_FILE_MIB (the file and the raw region; 512), BENCH_OUT (default
# target/group-file/<UTC time>).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
seconds="${BENCH_SECONDS:-$([ "$quick" -eq 1 ] && echo 2 || echo 5)}"
rounds="${BENCH_ROUNDS:-3}"
file_mib="${BENCH_FILE_MIB:-512}"
out="$(bench_out)"
# Room for the file, the group's metadata and some slack.
img_mib=$((file_mib + 256))

need_rounds "$rounds"
need_root "it attaches loop devices"
need_loop
need_shm $((4 * img_mib + 256))
need_tools python3
cairn="$(build_cairn)"
mkdir -p "$out"

imgs=()
loops=()
cleanup() {
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    for i in "${imgs[@]}"; do rm -f "$i"; done
}
trap cleanup EXIT INT TERM
for name in raw ext mir0 mir1; do
    img="/dev/shm/cairn-group-file-$$-$name.img"
    imgs+=("$img")
    # Pre-filled: the first touch of a tmpfs page is far slower than a rewrite.
    dd if=/dev/zero of="$img" bs=1M count="$img_mib" status=none
    loops+=("$(losetup --find --show --direct-io=on --sector-size 4096 "$img")")
done
raw="${loops[0]}"
export CAIRN_DISCOVER="${loops[1]},${loops[2]},${loops[3]}"
export CAIRN_RUN_DIR="$out/run"
export CAIRN_CONFIG=/nonexistent/cairn.toml
"$cairn" group create EXT --redundancy external --disk "${loops[1]}" >/dev/null
"$cairn" group create MIR --redundancy normal --disk "${loops[2]}=FG1" --disk "${loops[3]}=FG2" >/dev/null
echo "host: $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "devices: raw $raw, EXT on ${loops[1]}, MIR on ${loops[2]} ${loops[3]} ($img_mib MiB each, 4Kn, RAM)"

# Every side's data is written through its loop device before anything is
# measured: pages written through the loop read faster than pages dd wrote
# into the backing file directly (1 MiB reads: ~1.45x here), so a raw side
# filled only by the dd above would lose for a reason that is not Cairn's.
dd if=/dev/zero of="$raw" bs=1M count="$file_mib" oflag=direct status=none
# The group files are created by a plan that reads, so Cairn fills them
# through the group first.
for t in +EXT/f +MIR/f; do
    "$cairn" bench quick --target "$t" --size "${file_mib}m" --rw randread \
        --time 1s --out "$out/fill-${t//[+\/]/_}" --json >/dev/null
done

python3 - "$cairn" "$raw" "$seconds" "$rounds" "$file_mib" "$out" <<'EOF'
import json, statistics, subprocess, sys

cairn, raw, seconds, rounds, file_mib, out = sys.argv[1:]
seconds, rounds = int(seconds), int(rounds)
cases = [
    ("8k randread QD1", "randread", "8k", 1, "sync"),
    ("8k randread QD32", "randread", "8k", 32, "uring"),
    ("8k randwrite QD32", "randwrite", "8k", 32, "uring"),
    ("1m read QD8", "read", "1m", 8, "uring"),
]
sides = [("raw", raw), ("ext", "+EXT/f"), ("mirror", "+MIR/f")]

def run(side, target, case, r):
    name, rw, bs, qd, engine = case
    stem = f"{out}/{name.replace(' ', '_')}.{side}.{r}"
    cmd = [cairn, "--engine", engine, "bench", "quick", "--target", target, "--rw", rw,
           "--bs", bs, "--qd", str(qd), "--time", f"{seconds}s", "--size", f"{file_mib}m",
           "--out", stem, "--seed", str(r + 1), "--force", "--json"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    a = json.load(open(f"{stem}/result.json"))["runs"][0]["totals"]["all"]["all"]
    pct = {p["p"]: p["us"] for p in a["latency"]["percentiles"]}
    return a["iops"], pct[50.0]

print(f"\n{'case':18} {'side':7} {'IOPS (median)':>14} {'p50 µs':>8} {'vs raw':>7}")
for case in cases:
    got = {s: [] for s, _ in sides}
    for r in range(rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for side, target in order:
            got[side].append(run(side, target, case, r))
    raw_iops = [i for i, _ in got["raw"]]
    for side, _ in sides:
        iops = statistics.median(i for i, _ in got[side])
        p50 = statistics.median(p for _, p in got[side])
        ratios = [g[0] / b for g, b in zip(got[side], raw_iops)]
        ratio = "" if side == "raw" else f"{statistics.median(ratios):.2f}x"
        print(f"{case[0]:18} {side:7} {iops:>14,.0f} {p50:>8.1f} {ratio:>7}", flush=True)
print(f"\nratio: median over {rounds} rounds of (group file IOPS / raw IOPS) in the same round")
EOF
