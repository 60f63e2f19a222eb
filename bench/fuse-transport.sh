#!/usr/bin/env bash
# Is FUSE over io_uring worth it here? (issue 16's question; see
# docs/serve.md, "The transport", and bench/README.md §9.)
#
#   bench/fuse-transport.sh            # 10 s a case, as root
#   bench/fuse-transport.sh --quick    # 3 s a case
#
# One file system, two transports, in one run: the example server
# crates/serve/examples/fuse_transport.rs serves one 256 MiB file (pread and
# pwrite on a file in /dev/shm: almost no work of its own, so what is left
# is the transport) over
#   dev        /dev/fuse read and writev, 2 threads (one per core);
#   dev16      the same with 16 threads (what `cairn serve` runs);
#   uring      FUSE over io_uring: a ring per CPU queue, 32 entries each
#              (fuse.enable_uring is set for the run and put back after).
# Cases: fio 8 KiB random read and write, O_DIRECT, at QD1 (psync) and QD32
# (io_uring). Printed: IOPS, p50 latency and the server's CPU per I/O for
# each, and uring against dev as ratios (IOPS) and differences (p50).
#
# Environment: BENCH_SECONDS (10, quick 3), BENCH_OUT (default
# target/fuse-transport/<UTC time>).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
seconds="${BENCH_SECONDS:-$([ "$quick" -eq 1 ] && echo 3 || echo 10)}"
out="$(bench_out)"

need_root "FUSE mounts"
need_fuse
param=/sys/module/fuse/parameters/enable_uring
[ -w "$param" ] || bench_skip "needs a kernel with FUSE over io_uring ($param)"
need_tools fio python3

echo "building the example server (release)"
server="$(build_example cairn-serve fuse_transport)"
mkdir -p "$out/mnt"
backing="/dev/shm/cairn-fuse-transport-$$"
dd if=/dev/zero of="$backing" bs=1M count=256 status=none
was="$(cat "$param")"
pid=
cleanup() {
    umount "$out/mnt" 2>/dev/null || true
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
    echo "$was" > "$param"
    rm -f "$backing"
}
trap cleanup EXIT

export BENCH_SERVER="$server" BENCH_SECONDS="$seconds" BENCH_BACKING="$backing" BENCH_PARAM="$param"
python3 - "$out" <<'EOF'
import json, os, subprocess, sys, time

out = sys.argv[1]
server, seconds, backing, param = (os.environ[k] for k in
                                   ("BENCH_SERVER", "BENCH_SECONDS", "BENCH_BACKING", "BENCH_PARAM"))
mnt = f"{out}/mnt"
cases = [("randread", 1), ("randwrite", 1), ("randread", 32), ("randwrite", 32)]
sides = {"dev": ["--transport", "dev", "--threads", "2"],
         "dev16": ["--transport", "dev", "--threads", "16"],
         "uring": ["--transport", "uring", "--depth", "32"]}

def fio(rw, qd, tag):
    engine = ["--ioengine=psync"] if qd == 1 else ["--ioengine=io_uring", f"--iodepth={qd}"]
    cmd = ["fio", "--name=t", f"--filename={mnt}/file", "--size=256M", f"--rw={rw}",
           "--bs=8k", "--direct=1", "--time_based", f"--runtime={seconds}",
           "--randrepeat=0", "--output-format=json"] + engine
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    open(f"{out}/{tag}.json", "w").write(r.stdout)
    j = json.loads(r.stdout)["jobs"][0]
    side = j["read"] if rw == "randread" else j["write"]
    return side["iops"], side["clat_ns"]["percentile"]["50.000000"] / 1000

def cpu_seconds(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
        total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")

def mounted():
    return any(l.split()[1] == mnt for l in open("/proc/self/mounts"))

results, counts = {}, {}
for side, args in sides.items():
    open(param, "w").write("Y" if side == "uring" else "N")
    log = open(f"{out}/{side}.log", "w")
    p = subprocess.Popen([server, "--mountpoint", mnt, "--backing", backing] + args, stdout=log, stderr=log)
    for _ in range(100):
        if mounted() and os.path.exists(f"{mnt}/file"):
            break
        time.sleep(0.05)
    try:
        for rw, qd in cases:
            before, t = cpu_seconds(p.pid), time.time()
            iops, p50 = fio(rw, qd, f"{side}-{rw}-qd{qd}")
            cpu = (cpu_seconds(p.pid) - before) / (iops * (time.time() - t))
            results[(side, rw, qd)] = (iops, p50, cpu)
    finally:
        subprocess.run(["umount", mnt])
        p.wait()
        log.close()
    counts[side] = open(f"{out}/{side}.log").read().strip().splitlines()[-1]

print(f"\n{'case':16} {'side':6} {'IOPS':>9} {'p50 µs':>8} {'CPU µs/IO':>10}")
for rw, qd in cases:
    for side in sides:
        iops, p50, cpu = results[(side, rw, qd)]
        print(f"{rw + ' QD' + str(qd):16} {side:6} {iops:>9,.0f} {p50:>8.1f} {cpu * 1e6:>10.1f}")
print()
for rw, qd in cases:
    u, d, d16 = (results[(s, rw, qd)] for s in ("uring", "dev", "dev16"))
    print(f"{rw} QD{qd}: uring/dev {u[0] / d[0]:.2f}x, uring/dev16 {u[0] / d16[0]:.2f}x IOPS; "
          f"p50 uring - dev {u[1] - d[1]:+.1f} µs; server CPU per I/O uring {u[2] * 1e6:.1f} µs, dev {d[2] * 1e6:.1f} µs")
for side, line in counts.items():
    print(f"{side}: {line}")
EOF
echo "fio outputs and server logs: $out"
