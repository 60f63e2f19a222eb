#!/usr/bin/env bash
# "Everything is a CPU problem" (Closson): physical read IOPS per CPU through
# Cairn's buffer cache against the same reads around it (direct path), and the
# SLOB "LIO" model (everything cached). See bench/README.md.
#
#   sudo bench/oltp-cpu.sh            # 3 rounds x 20 s per path
#   sudo bench/oltp-cpu.sh --quick    # 3 rounds x 5 s
#
# Target: a RAM-backed loop device (a /dev/shm file behind losetup
# --direct-io=on --sector-size 4096), loaded by `cairn bench oltp setup` (so
# every page exists before measuring), with a second one for redo.
# Physical-read cases: UPDATE_PCT=0, 2 schemas of SCALE=128M, a 16 MiB cache
# (1/16 of the data), 4 sessions (2 per schema) on this 2-core machine, and
# --batch-reads 1, so that both paths do exactly one synchronous pread per
# block (db file sequential read versus direct path read); they alternate,
# cache first in odd rounds. LIO case: SCALE=8M in a 64 MiB cache, 4 s of
# warm-up to load it, then no physical reads at all.
#
# Figures per run, from result.json: physical read IOPS, DB CPU (session
# threads' CPU, user + system), process CPU; then IOPS per DB-CPU second and
# per CPU core busy (process CPU / elapsed). Medians of the rounds; the ratio
# cache/direct is the headline (Closson measured 0.65 on Oracle: 19,306 vs
# 29,884 IOPS per DB CPU; Cairn's target is >= 0.85).
#
# Environment: BENCH_SECONDS (20, quick 5), BENCH_ROUNDS (3; at least 3),
# BENCH_OUT (default target/oltp-cpu/<UTC time>).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
seconds="${BENCH_SECONDS:-$([ "$quick" -eq 1 ] && echo 5 || echo 20)}"
rounds="${BENCH_ROUNDS:-3}"
out="$(bench_out)"
need_rounds "$rounds"
need_root "it attaches loop devices"
need_loop
need_shm 768
need_tools python3

mkdir -p "$out"
cairn="$(build_cairn)"

shm="/dev/shm/cairn-oltp-cpu-$$"
loops=()
cleanup() {
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    rm -f "$shm".*
}
trap cleanup EXIT
attach() { # size_mib name -> loop path
    truncate -s "$1M" "$shm.$2"
    losetup -f --show --direct-io=on --sector-size 4096 "$shm.$2"
}
data="$(attach 384 data)"; loops+=("$data")
redo="$(attach 128 redo)"; loops+=("$redo")

conf() { # scale seconds -> conf file
    local f="$out/slob-$1.conf"
    cat >"$f" <<EOF
UPDATE_PCT=0
SCAN_PCT=0
RUN_TIME=$2
SCALE=$1
SCAN_TABLE_SZ=1M
WORK_UNIT=32
REDO_STRESS=LITE
LOAD_PARALLEL_DEGREE=2
THREADS_PER_SCHEMA=2
EOF
    echo "$f"
}

run() { # label conf extra-args...
    local label="$1" c="$2"
    shift 2
    "$cairn" bench oltp run --conf "$c" --target "$data" --redo "$redo" --schemas 2 \
        --interval 1s --seed 1 --out "$out/$label" --json "$@" >/dev/null
}

echo "== physical reads: cache vs direct path (RAM loop, 4 sessions, ${seconds}s x $rounds rounds) =="
big="$(conf 128M "$seconds")"
"$cairn" bench oltp setup --conf "$big" --target "$data" --redo "$redo" --schemas 2 --seed 1 --json >"$out/setup-big.json"
for i in $(seq 1 "$rounds"); do
    if [ $((i % 2)) -eq 1 ]; then order="cache direct"; else order="direct cache"; fi
    for path in $order; do
        run "$path-$i" "$big" --cache 16m --batch-reads 1 --read-path "$path"
    done
done

echo "== logical reads: everything cached (the LIO model) =="
small="$(conf 8M "$seconds")"
"$cairn" bench oltp setup --conf "$small" --target "$data" --redo "$redo" --schemas 2 --seed 1 --json >"$out/setup-small.json"
for i in $(seq 1 "$rounds"); do
    run "lio-$i" "$small" --cache 64m --warmup 4s
done

python3 - "$out" "$rounds" <<'EOF'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def fig(d):
    r = json.load(open(os.path.join(out, d, "result.json")))
    s = {x["name"]: x["value"] for x in r["totals"]["stats"]}
    el = r["elapsed_s"]
    proc = r["cpu"]["user_s"] + r["cpu"]["sys_s"]
    return {
        "iops": s["physical read IO requests"] / el,
        "lio": s["session logical reads"] / el,
        "db_cpu": r["totals"]["db_cpu_s"],
        "per_db_cpu": s["physical read IO requests"] / max(r["totals"]["db_cpu_s"], 1e-9),
        "per_core": s["physical read IO requests"] / max(proc, 1e-9),
        "lio_per_core": s["session logical reads"] / max(proc, 1e-9),
        "lio_per_db_cpu": s["session logical reads"] / max(r["totals"]["db_cpu_s"], 1e-9),
        "busy": proc / el,
    }
med = lambda xs: statistics.median(xs)
rows = {}
for path in ("cache", "direct", "lio"):
    runs = [fig(f"{path}-{i}") for i in range(1, rounds + 1)]
    rows[path] = {k: med([r[k] for r in runs]) for k in runs[0]}
c, d, l = rows["cache"], rows["direct"], rows["lio"]
print(f"{'case':<8} {'phys rd IOPS':>13} {'per DB-CPU s':>13} {'per CPU core':>13} {'cores busy':>10}")
for name in ("cache", "direct"):
    r = rows[name]
    print(f"{name:<8} {r['iops']:>13,.0f} {r['per_db_cpu']:>13,.0f} {r['per_core']:>13,.0f} {r['busy']:>10.2f}")
print(f"ratio cache/direct: IOPS {c['iops']/d['iops']:.3f}, IOPS per DB-CPU second {c['per_db_cpu']/d['per_db_cpu']:.3f}, "
      f"per CPU core {c['per_core']/d['per_core']:.3f}  (Closson on Oracle: 0.65; target >= 0.85)")
print(f"LIO model: {l['lio']:,.0f} logical reads/s, {l['lio_per_db_cpu']:,.0f} per DB-CPU second, "
      f"{l['lio_per_core']:,.0f} per CPU core ({l['busy']:.2f} cores busy)")
json.dump(rows, open(os.path.join(out, "summary.json"), "w"), indent=2)
EOF
echo "results: $out"
