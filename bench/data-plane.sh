#!/usr/bin/env bash
# The group's data plane against the raw device, in one run, on a RAM-backed
# loop device (see bench/README.md and docs/measuring.md): 8 KiB
# random reads, and 70/30 reads/writes, on one external-redundancy group file
# from 1, 2 and 4 threads (QD1 each, each thread its own io_uring engine),
# against the same threads doing the same I/O on the raw device, on the
# blocks the group's file occupies, the threads switching between the two
# every 10 ms; then file create + delete per second, with their latencies,
# while two threads run 70/30 on the group. Target: group >= 0.97x raw at
# every count.
#
# Then the test kit's engine at depth, where per-I/O CPU shows: `cairn bench
# quick`, 8 KiB random reads at QD32 from 2 workers, on two files of a
# mirrored (normal redundancy) group over two RAM-backed loop devices,
# against the same command on the two loop devices themselves, in runs of
# KIT_SECONDS alternating raw, group, group, raw, ... for KIT_ROUNDS pairs;
# it prints each pair's ratio, their median and both sides' CPU per I/O.
# Target: median >= 0.95x.
#
# Environment: IMG_MIB (loop device size, default 1280: a 1 GiB file and the
# group's metadata must fit), SECTOR (logical sector size of the loop
# device, 512 or 4096; default 4096), KIT_ROUNDS (default 12; 0 leaves the
# kit's case out), KIT_SECONDS (default 2), KIT_ONLY=1 (the kit's case
# alone).
# Arguments are passed to the benchmark: --seconds N (a round, default 6),
# --rounds N (default 5), --slice-ms N (how often the threads switch between
# raw and group within a round, default 10), --threads 1,2,4, --mix
# read|oltp|both|write, --file-mib N (default 1024), --quiet-wait N, --control
# (the group side replaced by the raw device again: an A/A run that shows
# how far the machine's noise alone moves the ratios).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help_if_asked "$@"
img_mib="${IMG_MIB:-1280}"
sector="${SECTOR:-4096}"

need_root "it attaches a loop device"
need_loop
kit_rounds="${KIT_ROUNDS:-12}"
kit_seconds="${KIT_SECONDS:-2}"
kit_img_mib=1280
if [ "$kit_rounds" -gt 0 ]; then
    need_tools python3
    need_shm $((img_mib + 2 * kit_img_mib + 256))
else
    need_shm $((img_mib + 256))
fi

bench="$(build_example cairn-store group_bench)"
if [ "$kit_rounds" -gt 0 ]; then
    cairn="$(build_cairn)"
fi

img="/dev/shm/cairn-data-plane-bench-$$.img"
kit_dir="/dev/shm/cairn-data-plane-kit-$$"
loopdev=""
kit_loops=()
cleanup() {
    if [ -n "$loopdev" ]; then losetup -d "$loopdev" || true; fi
    for l in "${kit_loops[@]}"; do losetup -d "$l" || true; done
    rm -f "$img"
    rm -rf "$kit_dir"
}
trap cleanup EXIT INT TERM

# Pre-fill: first touch of tmpfs pages runs at ~375 MB/s against ~12 GB/s for
# pages that exist, so every page is written before anything is measured.
dd if=/dev/zero of="$img" bs=1M count="$img_mib" status=none
loopdev="$(losetup --find --show --direct-io=on --sector-size "$sector" "$img")"

echo "== group data plane vs raw device"
echo "host: $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "loop: $(losetup --list --noheadings --output NAME,SIZELIMIT,DIO,LOG-SEC,BACK-FILE "$loopdev" | tr -s ' ')" \
     "max_sectors_kb=$(cat /sys/block/"$(basename "$loopdev")"/queue/max_sectors_kb)"
if [ "${KIT_ONLY:-0}" != 1 ]; then
    "$bench" data-plane --device "$loopdev" "$@"
fi

if [ "$kit_rounds" -le 0 ]; then
    exit 0
fi
# The kit's engine at QD32 from 2 workers: files of a mirrored group against
# the raw devices, with the same command line but for the targets.
losetup -d "$loopdev"
loopdev=""
rm -f "$img"
mkdir -p "$kit_dir"
for i in 0 1; do
    dd if=/dev/zero of="$kit_dir/disk$i.img" bs=1M count="$kit_img_mib" status=none
    kit_loops+=("$(losetup --find --show --direct-io=on --sector-size "$sector" "$kit_dir/disk$i.img")")
done
export CAIRN_DISCOVER="${kit_loops[0]},${kit_loops[1]}"
"$cairn" group create KIT --redundancy normal --disk "${kit_loops[0]}=A" --disk "${kit_loops[1]}=B" >/dev/null
head -c $((512 * 1048576)) /dev/zero > "$kit_dir/src"
"$cairn" cp "$kit_dir/src" +KIT/f1 >/dev/null
"$cairn" cp "$kit_dir/src" +KIT/f2 >/dev/null
rm -f "$kit_dir/src"
common=(--qd 32 --workers 2 --bs 8k --rw randread --time "${kit_seconds}s" --json)
one() { # side, then the targets: prints "iops cpu_us_per_io"
    local side=$1
    shift
    rm -rf "$kit_dir/out-$side"
    "$cairn" bench quick "$@" "${common[@]}" --out "$kit_dir/out-$side" > "$kit_dir/$side.json"
    python3 - "$kit_dir/$side.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
total = run["totals"]["all"]["all"]
cpu = run["cpu"]
print(f'{total["iops"]:.0f} {(cpu["user_s"] + cpu["sys_s"]) * 1e6 / max(total["ios"], 1):.2f}')
PY
}
raw() { one raw --target "${kit_loops[0]}" --target "${kit_loops[1]}" --size 512m --force; }
group() { one group --target +KIT/f1 --target +KIT/f2; }
echo
echo "== the kit's engine at depth: 8 KiB random read, QD32 x 2 workers, mirrored group files vs raw"
echo "loops: ${kit_loops[*]} (RAM-backed, direct I/O, ${sector} B sectors); ${kit_rounds} pairs of ${kit_seconds} s runs"
printf '%-6s %12s %12s %8s %14s %14s\n' pair raw_iops group_iops ratio raw_cpu_us/io grp_cpu_us/io
ratios=()
for n in $(seq "$kit_rounds"); do
    # Alternate which side goes first, so that neither always does.
    if [ $((n % 2)) -eq 1 ]; then
        read -r r_iops r_cpu < <(raw); read -r g_iops g_cpu < <(group)
    else
        read -r g_iops g_cpu < <(group); read -r r_iops r_cpu < <(raw)
    fi
    ratio=$(python3 -c "print(f'{$g_iops / $r_iops:.3f}')")
    ratios+=("$ratio")
    printf '%-6s %12s %12s %8s %14s %14s\n' "$n" "$r_iops" "$g_iops" "$ratio" "$r_cpu" "$g_cpu"
done
python3 -c "
import statistics, sys
r = [float(x) for x in sys.argv[1:]]
print(f'median group/raw: {statistics.median(r):.3f}x (min {min(r):.3f}, max {max(r):.3f}; target >= 0.95x)')
" "${ratios[@]}"
