#!/usr/bin/env bash
# Thin reclaim's cost to a running database, in one run (issue 18's
# benchmark; see bench/README.md and docs/measuring.md):
#
#   sudo bench/reclaim.sh            # 8 GiB returnable, 4 GiB of data a round
#   sudo bench/reclaim.sh --quick    # 2 GiB returnable
#
# Devices: four RAM-backed 4Kn loop devices (pre-filled /dev/shm files,
# losetup --direct-io=on --sector-size 4096). A normal-redundancy group
# DATA over them (failure groups A: L0 L1, B: L2 L3) with
# thin_provisioned=false, served (`cairn serve`), holds `hot.dbf` (512 MiB,
# the foreground's file). Every round: a file of half the returnable bytes
# is written through the mount and deleted, so its copies (the returnable
# bytes) are free and held; a first reclaim before the rounds has marked
# every never-written AU, so each round's reclaim gives back exactly them.
#
# The foreground: fio, 8 KiB random reads at QD1 (O_DIRECT, psync) on
# hot.dbf through the mount, for as long as each reclaim runs; its p99
# against the same workload with nothing else running (idle, 20 s).
# The p99s are of the reads that completed while the reclaim sent its
# requests (fio's per-I/O latency log, cut to that window).
# Rounds: the reclaim at its default pace (256 MB/s a disk, backing off
# while the foreground slows), and unpaced (--rate 0). Printed: each
# reclaim's time and rate, how far the back-off went, and the foreground's
# p50/p99 against idle. Target: p99 during the paced reclaim <= 1.5x idle.
#
# Environment: BENCH_RETURN_MIB (8192, quick 2048), BENCH_OUT (default
# target/reclaim/<UTC time>).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
return_mib="${BENCH_RETURN_MIB:-$([ "$quick" -eq 1 ] && echo 2048 || echo 8192)}"
out="$(bench_out)"
# Each disk holds a quarter of the copies of a round's file and of hot.dbf,
# with room to spare.
img_mib=$((return_mib / 4 + 1024))

need_root "loop devices, FUSE mounts"
need_loop
need_fuse
# Sparse images: they hold what is written, and give back what is discarded.
need_shm $((return_mib + 2048))
need_tools fio python3

cairn="$(build_cairn)"
mkdir -p "$out"
work="$out/work"
mkdir -p "$work/mnt" "$work/run"

loops=()
cleanup() {
    pkill -TERM -f "$cairn serve --mountpoint $work/mnt" 2>/dev/null || true
    sleep 1
    umount "$work/mnt" 2>/dev/null || true
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    rm -f /dev/shm/cairn-reclaim-$$-*.img
}
trap cleanup EXIT
specs=()
for i in 0 1 2 3; do
    img="/dev/shm/cairn-reclaim-$$-$i.img"
    truncate -s "${img_mib}M" "$img"
    l="$(losetup --find --show --direct-io=on --sector-size 4096 "$img")"
    loops+=("$l")
    specs+=(--disk "$l=$([ "$i" -lt 2 ] && echo A || echo B)")
done
export CAIRN_DISCOVER="$(IFS=,; echo "${loops[*]}")" CAIRN_RUN_DIR="$work/run" CAIRN_CONFIG=/nonexistent
for i in 0 1 2 3; do "$cairn" disk label "L$i" "${loops[$i]}" >/dev/null; done
"$cairn" group create DATA --redundancy normal "${specs[@]}" >/dev/null
"$cairn" group set DATA thin_provisioned=false >/dev/null
# Nothing was ever written: the first reclaim marks every free AU, so the
# rounds' reclaims give back exactly what their file held.
"$cairn" group reclaim DATA --rate 0 --json > "$out/first-reclaim.json"

export BENCH_CAIRN="$cairn" BENCH_WORK="$work" BENCH_RETURN_MIB="$return_mib"
export BENCH_IMAGES="/dev/shm/cairn-reclaim-$$-"
python3 - "$out" <<'EOF'
import glob, json, os, signal, socket, subprocess, sys, time

out = sys.argv[1]
cairn, work = os.environ["BENCH_CAIRN"], os.environ["BENCH_WORK"]
return_mib = int(os.environ["BENCH_RETURN_MIB"])
images = sorted(glob.glob(os.environ["BENCH_IMAGES"] + "*.img"))
mnt = f"{work}/mnt"

def held_mib():
    return sum(os.stat(p).st_blocks * 512 for p in images) / 2**20

def fio_cmd(tag, seconds=None):
    cmd = ["fio", "--name=fg", f"--filename={mnt}/DATA/hot.dbf", "--size=512M",
           "--rw=randread", "--bs=8k", "--direct=1", "--ioengine=psync",
           "--randrepeat=0", "--output-format=json", f"--output={out}/{tag}.json"]
    if seconds:
        cmd += ["--time_based", f"--runtime={seconds}"]
    else:
        # Every I/O's completion latency, timed from the job's start: the
        # p99 is taken over the reclaim's own window.
        cmd += ["--time_based", "--runtime=3600", f"--write_lat_log={out}/{tag}",
                "--log_avg_msec=0"]
    return cmd

def window_result(tag, start, end):
    lat = []
    with open(f"{out}/{tag}_clat.1.log") as f:
        for line in f:
            t, ns = line.split(",")[:2]
            if start <= int(t) / 1000 <= end:
                lat.append(int(ns) / 1000)
    lat.sort()
    if not lat:
        return 0, 0.0, 0.0, 0.0
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    return len(lat) / (end - start), pick(0.50), pick(0.99), lat[-1]

def fio_result(tag):
    # (fio stopped by SIGINT says so on the first line.)
    text = open(f"{out}/{tag}.json").read()
    j = json.loads(text[text.index("{"):])["jobs"][0]["read"]
    p = j["clat_ns"]["percentile"]
    return j["iops"], p["50.000000"] / 1000, p["99.000000"] / 1000, j["clat_ns"]["max"] / 1000

notify = f"{work}/notify.sock"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(notify)
s.settimeout(120)
serve = subprocess.Popen([cairn, "serve", "--mountpoint", mnt],
                         env=dict(os.environ, NOTIFY_SOCKET=notify),
                         stderr=open(f"{out}/serve.log", "w"))
assert s.recv(64) == b"READY=1\n"
rows = []
try:
    subprocess.run(["dd", "if=/dev/urandom", f"of={mnt}/DATA/hot.dbf", "bs=1M", "count=512",
                    "oflag=direct", "status=none"], check=True)
    subprocess.run(fio_cmd("idle", 20), check=True)
    idle = fio_result("idle")
    for tag, rate in (("paced", None), ("unpaced", "0")):
        # A round's file: its copies are what the reclaim gives back.
        subprocess.run(["dd", "if=/dev/urandom", f"of={mnt}/DATA/drop.dbf", "bs=4M",
                        f"count={return_mib // 2 // 4}", "oflag=direct", "status=none"], check=True)
        os.remove(f"{mnt}/DATA/drop.dbf")
        held = held_mib()
        fio_started = time.time()
        fg = subprocess.Popen(fio_cmd(tag), stdout=subprocess.DEVNULL)
        time.sleep(2)  # the foreground running before the reclaim looks at it
        args = [cairn, "group", "reclaim", "DATA", "--wait", "--json"]
        if rate is not None:
            args += ["--rate", rate]
        t = time.time()
        r = subprocess.run(args, capture_output=True, text=True, check=True)
        secs = time.time() - t
        fg.send_signal(signal.SIGINT)
        fg.wait()
        rep = json.loads(r.stdout)["reclaim"]
        open(f"{out}/{tag}-reclaim.json", "w").write(r.stdout)
        # The window: from the reclaim's first request (after the 0.5 s it
        # spends measuring the foreground's baseline, when paced) to its end.
        first = 0.5 if rate is None else 0.0
        window = (t - fio_started + first, t - fio_started + secs)
        rows.append((tag, rep, secs, held - held_mib(), window_result(tag, *window)))
finally:
    serve.send_signal(signal.SIGTERM)
    serve.wait()

i_iops, i_p50, i_p99, i_max = idle
print(f"\nforeground idle: {i_iops:,.0f} IOPS, p50 {i_p50:.0f} µs, p99 {i_p99:.0f} µs, max {i_max:,.0f} µs")
print(f"\n{'reclaim':8} {'returned':>10} {'freed':>9} {'time':>7} {'rate':>10} {'back-off':>9} {'fg IOPS':>8} {'p50 µs':>7} {'p99 µs':>7} {'max µs':>8} {'p99/idle':>8}")
for tag, rep, secs, freed, (iops, p50, p99, mx) in rows:
    ret = rep["returned_bytes"] / 2**20
    print(f"{tag:8} {ret:>7,.0f} MiB {freed:>5,.0f} MiB {secs:>6.1f}s {ret / secs:>6,.0f} MiB/s "
          f"{'1/' + format(1 / rep['slowest_fraction'], '.0f'):>9} {iops:>8,.0f} {p50:>7.0f} {p99:>7.0f} {mx:>8,.0f} {p99 / i_p99:>7.2f}x")
paced = rows[0][4][2] / i_p99
print(f"\ntarget: p99 during the paced reclaim <= 1.5x idle: {paced:.2f}x ({'met' if paced <= 1.5 else 'missed'})")
EOF
echo "outputs: $out"
