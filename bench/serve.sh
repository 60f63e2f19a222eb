#!/usr/bin/env bash
# What `cairn serve`'s FUSE mount costs, in one run, as ratios (issue 16's
# benchmark; see bench/README.md and docs/measuring.md):
#
#   sudo bench/serve.sh             # 10 s a case
#   sudo bench/serve.sh --quick     # 3 s a case
#
# Devices: three RAM-backed 4Kn loop devices (pre-filled /dev/shm files,
# losetup --direct-io=on --sector-size 4096), one per side:
#   raw      fio on L0 itself;
#   plane    `cairn bench quick --target +DATA/bench.dat`: a 256 MiB file of
#            an external-redundancy group over L1, through Cairn's data
#            plane (the engine the service uses), no kernel in between;
#   fuse     fio on the same file through `cairn serve`'s mount (O_DIRECT);
#   bindfs   the peer that shows what FUSE itself costs here: fio on a file
#            of an ext4 on L2 through `bindfs --multithreaded` (O_DIRECT).
# Cases: 8 KiB random read and random write at QD1 (psync; the plane: one
# synchronous thread) and QD32 (io_uring). Printed: IOPS and p50 latency per
# side, and the issue's targets: fuse QD1 p50 within raw + 15 µs; fuse QD32
# IOPS >= 0.8x the plane's, or, where FUSE's own cost rules that out,
# >= 1.5x bindfs's; CPU seconds per I/O of the fuse side (service + fio).
#
# Environment: BENCH_SECONDS (10, quick 3), BENCH_OUT (default
# target/serve/<UTC time>), BENCH_SERVE_ARGS (more arguments for
# `cairn serve`, e.g. "--threads 8").
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
seconds="${BENCH_SECONDS:-$([ "$quick" -eq 1 ] && echo 3 || echo 10)}"
out="$(bench_out)"
img_mib=768

need_root "loop devices, FUSE mounts"
need_loop
need_fuse
need_shm $((3 * img_mib + 256))
need_tools fio bindfs python3

cairn="$(build_cairn)"
mkdir -p "$out"
work="$out/work"
mkdir -p "$work/mnt" "$work/ext4" "$work/bindfs" "$work/run"

loops=()
serve_pid=
cleanup() {
    [ -n "$serve_pid" ] && kill -TERM "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
    umount "$work/bindfs" 2>/dev/null || true
    umount "$work/ext4" 2>/dev/null || true
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    rm -f /dev/shm/cairn-serve-$$-*.img
}
trap cleanup EXIT
for i in 0 1 2; do
    img="/dev/shm/cairn-serve-$$-$i.img"
    dd if=/dev/zero of="$img" bs=1M count="$img_mib" status=none
    loops+=("$(losetup --find --show --direct-io=on --sector-size 4096 "$img")")
done
export CAIRN_DISCOVER="${loops[1]}" CAIRN_RUN_DIR="$work/run" CAIRN_CONFIG=/nonexistent
"$cairn" disk label L1 "${loops[1]}" >/dev/null
"$cairn" group create DATA --redundancy external --disk "${loops[1]}" >/dev/null
mkfs.ext4 -q -F "${loops[2]}"
mount "${loops[2]}" "$work/ext4"
bindfs --multithreaded "$work/ext4" "$work/bindfs"

export BENCH_CAIRN="$cairn" BENCH_SECONDS="$seconds" BENCH_WORK="$work" BENCH_RAW="${loops[0]}"
python3 - "$out" <<'EOF'
import json, os, signal, socket, subprocess, sys, time

out = sys.argv[1]
cairn, seconds, work, raw = (os.environ[k] for k in
                             ("BENCH_CAIRN", "BENCH_SECONDS", "BENCH_WORK", "BENCH_RAW"))
size = "256M"
cases = [("randread", 1), ("randwrite", 1), ("randread", 32), ("randwrite", 32)]

def fio(path, rw, qd, tag):
    engine = ["--ioengine=psync"] if qd == 1 else ["--ioengine=io_uring", f"--iodepth={qd}"]
    cmd = ["fio", "--name=s", f"--filename={path}", f"--size={size}", f"--rw={rw}",
           "--bs=8k", "--direct=1", "--time_based", f"--runtime={seconds}",
           "--randrepeat=0", "--output-format=json"] + engine
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    open(f"{out}/{tag}.json", "w").write(r.stdout)
    j = json.loads(r.stdout)["jobs"][0]
    side = j["read"] if rw == "randread" else j["write"]
    return side["iops"], side["clat_ns"]["percentile"]["50.000000"] / 1000

def plane(rw, qd, tag):
    engine = ["--engine", "sync"] if qd == 1 else ["--engine", "uring"]
    subprocess.run([cairn, "bench", "quick", "--target", "+DATA/bench.dat", "--size", size,
                    "--rw", rw, "--bs", "8k", "--qd", str(qd), "--time", f"{seconds}s",
                    "--out", f"{out}/{tag}", "--seed", "1", "--force", "--json"] + engine,
                   capture_output=True, check=True)
    a = json.load(open(f"{out}/{tag}/result.json"))["runs"][0]["totals"]["all"]["all"]
    pct = {p["p"]: p["us"] for p in a["latency"]["percentiles"]}
    return a["iops"], pct[50.0]

def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

results = {}
# The data plane first: a served group is held by the service.
for rw, qd in cases:
    results[("plane", rw, qd)] = plane(rw, qd, f"plane-{rw}-qd{qd}")
for rw, qd in cases:
    results[("raw", rw, qd)] = fio(raw, rw, qd, f"raw-{rw}-qd{qd}")
    results[("bindfs", rw, qd)] = fio(f"{work}/bindfs/bench.dat", rw, qd, f"bindfs-{rw}-qd{qd}")

# The service, ready when it says READY=1.
notify = f"{work}/notify.sock"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(notify)
s.settimeout(120)
serve = subprocess.Popen([cairn, "serve", "--mountpoint", f"{work}/mnt"]
                         + os.environ.get("BENCH_SERVE_ARGS", "").split(),
                         env=dict(os.environ, NOTIFY_SOCKET=notify),
                         stderr=open(f"{out}/serve.log", "w"))
assert s.recv(64) == b"READY=1\n"
cpu = {}
try:
    for rw, qd in cases:
        before = cpu_seconds(serve.pid)
        t = time.time()
        iops, p50 = fio(f"{work}/mnt/DATA/bench.dat", rw, qd, f"fuse-{rw}-qd{qd}")
        results[("fuse", rw, qd)] = (iops, p50)
        cpu[(rw, qd)] = (cpu_seconds(serve.pid) - before) / (iops * (time.time() - t))
finally:
    serve.send_signal(signal.SIGTERM)
    serve.wait()

print(f"\n{'case':16} {'side':7} {'IOPS':>9} {'p50 µs':>8}")
for rw, qd in cases:
    for side in ("raw", "plane", "fuse", "bindfs"):
        iops, p50 = results[(side, rw, qd)]
        print(f"{rw + ' QD' + str(qd):16} {side:7} {iops:>9,.0f} {p50:>8.1f}")
print()
for rw, qd in cases:
    f_iops, f_p50 = results[("fuse", rw, qd)]
    r_iops, r_p50 = results[("raw", rw, qd)]
    p_iops, _ = results[("plane", rw, qd)]
    b_iops, b_p50 = results[("bindfs", rw, qd)]
    line = f"{rw} QD{qd}: fuse/plane {f_iops / p_iops:.2f}x, fuse/bindfs {f_iops / b_iops:.2f}x"
    if qd == 1:
        line += f", fuse p50 = raw + {f_p50 - r_p50:.1f} µs (target <= 15), bindfs p50 = raw + {b_p50 - r_p50:.1f} µs"
    line += f"; service CPU {cpu[(rw, qd)] * 1e6:.1f} µs per I/O"
    print(line)
EOF
echo "fio and bench outputs: $out"
