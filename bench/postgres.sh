#!/usr/bin/env bash
# PostgreSQL on a Cairn volume against PostgreSQL on the raw device, in one
# run, as ratios (issue 17's benchmark; see bench/README.md §10 and
# docs/measuring.md):
#
#   sudo bench/postgres.sh             # pgbench 60 s a run, 3 rounds
#   sudo bench/postgres.sh --quick     # 15 s a run, 1 round
#
# Devices: four RAM-backed 4Kn loop devices (pre-filled /dev/shm files,
# losetup --direct-io=on --sector-size 4096):
#   raw       XFS on L0 itself;
#   external  XFS on a volume of group EXT (external redundancy) over L1;
#   normal    XFS on a volume of group NORM (normal redundancy) over L2 and
#             L3, in two failure groups: every write goes to both.
# The volumes are written whole first (4 MiB at a time: every extent
# written, as L0's pages are), and every XFS is made with -K (no discard),
# so no side starts with holes. One `cairn serve` serves both groups.
# PostgreSQL 15 on each (initdb -k, default settings), `pgbench -i -s 20`,
# then rounds of `pgbench -c 8 -j 8 -T 60` on each side in turn (the order
# rotates each round). Printed per run: TPS and average latency; then the
# medians, the ratios against raw, the target (external >= 0.9x raw TPS),
# the service's CPU per transaction, and `pg_test_fsync` on every side.
#
# Environment: BENCH_SECONDS (60, quick 15), BENCH_ROUNDS (3, quick 1),
# BENCH_SCALE (20), BENCH_CLIENTS (8), BENCH_OUT (default
# target/postgres/<UTC time>).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
seconds="${BENCH_SECONDS:-$([ "$quick" -eq 1 ] && echo 15 || echo 60)}"
rounds="${BENCH_ROUNDS:-$([ "$quick" -eq 1 ] && echo 1 || echo 3)}"
scale="${BENCH_SCALE:-20}"
clients="${BENCH_CLIENTS:-8}"
out="$(bench_out)"
vol_mib=2560
img_mib=3072
pg=/usr/lib/postgresql/15/bin

need_root "loop devices, FUSE, runuser postgres"
need_loop
need_fuse
need_shm $((vol_mib + 3 * img_mib + 256))
if [ ! -x "$pg/pgbench" ]; then
    "$root/scripts/install-deps" >/dev/null
fi
need_tools mkfs.xfs python3
cairn="$(build_cairn)"
mkdir -p "$out"
# The work directory: /tmp, which every user can traverse (postgres must
# reach its data directory and sockets).
work="$(mktemp -d /tmp/cairn-pgbench.XXXXXX)"
chmod 755 "$work"
mkdir -p "$work/mnt" "$work/run" "$work/raw" "$work/external" "$work/normal"

loops=()
serve_pid=
cleanup() {
    set +e
    for side in raw external normal; do
        [ -f "$work/$side/data/postmaster.pid" ] &&
            runuser -u postgres -- "$pg/pg_ctl" -D "$work/$side/data" -m immediate -w stop >/dev/null 2>&1
        cp "$work/$side/server.log" "$out/postgres-$side.log" 2>/dev/null
        umount "$work/$side" 2>/dev/null
    done
    for v in +EXT/vol/pg +NORM/vol/pg; do
        [ -n "$serve_pid" ] && "$cairn" volume detach "$v" >/dev/null 2>&1
    done
    if [ -n "$serve_pid" ] && kill -TERM "$serve_pid" 2>/dev/null; then
        while kill -0 "$serve_pid" 2>/dev/null; do sleep 0.1; done
    fi
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    rm -f /dev/shm/cairn-pgbench-$$-*.img
    rm -rf "$work"
}
trap cleanup EXIT

echo "devices: pre-filling $((vol_mib + 3 * img_mib)) MiB of /dev/shm"
for i in 0 1 2 3; do
    img="/dev/shm/cairn-pgbench-$$-$i.img"
    mib=$([ "$i" -eq 0 ] && echo "$vol_mib" || echo "$img_mib")
    dd if=/dev/zero of="$img" bs=1M count="$mib" status=none
    loops+=("$(losetup --find --show --direct-io=on --sector-size 4096 "$img")")
done
export CAIRN_DISCOVER="${loops[1]},${loops[2]},${loops[3]}" CAIRN_RUN_DIR="$work/run" \
    CAIRN_CONFIG=/nonexistent CAIRN_SOCKET="$work/run/cairn.sock"
for i in 1 2 3; do "$cairn" disk label "L$i" "${loops[$i]}" >/dev/null; done
"$cairn" group create EXT --redundancy external --disk "${loops[1]}" >/dev/null
"$cairn" group create NORM --redundancy normal --disk "${loops[2]}=A" --disk "${loops[3]}=B" >/dev/null

# The service, ready when it says READY=1 (systemd's protocol).
serve_pid=$(python3 - "$work/notify.sock" "$cairn" "$work/mnt" "$out/serve.log" <<'EOF'
import os, socket, subprocess, sys
notify, cairn, mnt, log = sys.argv[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(notify)
s.settimeout(120)
p = subprocess.Popen([cairn, "serve", "--mountpoint", mnt], env=dict(os.environ, NOTIFY_SOCKET=notify),
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
assert s.recv(64) == b"READY=1\n"
print(p.pid)
EOF
)

declare -A device
device[raw]="${loops[0]}"
for g in EXT NORM; do
    side=$([ "$g" = EXT ] && echo external || echo normal)
    "$cairn" volume create "+$g/vol/pg" --size "${vol_mib}M" >/dev/null
    device[$side]="$("$cairn" volume attach "+$g/vol/pg")"
    # Every extent written once, whole: no side starts with holes.
    dd if=/dev/zero of="${device[$side]}" bs=4M count=$((vol_mib / 4)) oflag=direct status=none
done
for side in raw external normal; do
    mkfs.xfs -q -f -K "${device[$side]}"
    mount "${device[$side]}" "$work/$side"
    chown postgres:postgres "$work/$side"
    runuser -u postgres -- "$pg/initdb" -k -A trust -D "$work/$side/data" >/dev/null
    runuser -u postgres -- "$pg/pg_ctl" -D "$work/$side/data" -l "$work/$side/server.log" \
        -o "-k $work/$side -c listen_addresses=''" -w start >/dev/null
    echo "pgbench -i -s $scale on $side (${device[$side]})"
    runuser -u postgres -- "$pg/pgbench" -h "$work/$side" -i -s "$scale" -q postgres \
        >"$out/init-$side.log" 2>&1
    runuser -u postgres -- "$pg/psql" -h "$work/$side" -qAtc checkpoint postgres
done

export BENCH_WORK="$work" BENCH_OUT="$out" BENCH_PG="$pg" BENCH_SERVE_PID="$serve_pid" \
    BENCH_SECONDS="$seconds" BENCH_ROUNDS="$rounds" BENCH_CLIENTS="$clients"
python3 - <<'EOF'
import os, re, statistics, subprocess

work, out, pg = os.environ["BENCH_WORK"], os.environ["BENCH_OUT"], os.environ["BENCH_PG"]
serve_pid = int(os.environ["BENCH_SERVE_PID"])
seconds, rounds, clients = (int(os.environ[k]) for k in
                            ("BENCH_SECONDS", "BENCH_ROUNDS", "BENCH_CLIENTS"))
sides = ["raw", "external", "normal"]

def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def busy_seconds():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(f) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")

def pgbench(side, tag):
    cmd = ["runuser", "-u", "postgres", "--", f"{pg}/pgbench", "-h", f"{work}/{side}",
           "-c", str(clients), "-j", str(clients), "-T", str(seconds), "postgres"]
    cpu0, busy0 = cpu_seconds(serve_pid), busy_seconds()
    r = subprocess.run(cmd, capture_output=True, text=True)
    cpu, busy = cpu_seconds(serve_pid) - cpu0, busy_seconds() - busy0
    text = r.stdout + r.stderr
    open(f"{out}/{tag}.txt", "w").write(text)
    if r.returncode != 0:
        raise SystemExit(f"pgbench on {side} failed:\n{text}")
    tps = float(re.search(r"tps = ([0-9.]+)", text).group(1))
    lat = float(re.search(r"latency average = ([0-9.]+) ms", text).group(1))
    done = int(re.search(r"actually processed: (\d+)", text).group(1))
    failed = int(re.search(r"number of failed transactions: (\d+)", text).group(1))
    return {"tps": tps, "lat": lat, "done": done, "failed": failed,
            "service_us": cpu / done * 1e6, "busy_us": busy / done * 1e6}

runs = {s: [] for s in sides}
print(f"\n{'round':>5} {'side':9} {'TPS':>9} {'lat ms':>7} {'failed':>6} "
      f"{'svc CPU µs/tx':>13} {'machine CPU µs/tx':>17}")
for r in range(rounds):
    order = sides[r % 3:] + sides[:r % 3]
    for side in order:
        x = pgbench(side, f"pgbench-{side}-{r + 1}")
        runs[side].append(x)
        print(f"{r + 1:>5} {side:9} {x['tps']:>9,.0f} {x['lat']:>7.2f} {x['failed']:>6} "
              f"{x['service_us']:>13.0f} {x['busy_us']:>17.0f}")

med = {s: {k: statistics.median(x[k] for x in runs[s]) for k in runs[s][0]} for s in sides}
print("\nmedians:")
for s in sides:
    m = med[s]
    print(f"  {s:9} {m['tps']:>9,.0f} TPS, {m['lat']:.2f} ms average latency, "
          f"service {m['service_us']:.0f} µs CPU per transaction")
ext, norm = med["external"]["tps"] / med["raw"]["tps"], med["normal"]["tps"] / med["raw"]["tps"]
print(f"external / raw TPS: {ext:.2f}x (target >= 0.9: {'met' if ext >= 0.9 else 'MISSED'}); "
      f"normal / raw TPS: {norm:.2f}x")
print(f"failed transactions: {sum(x['failed'] for s in sides for x in runs[s])}")

# pg_test_fsync on each file system (2 s a test).
print("\npg_test_fsync (ops/sec), 8 kB writes:")
fsync = {}
for s in sides:
    cmd = ["runuser", "-u", "postgres", "--", f"{pg}/pg_test_fsync", "-s", "2",
           "-f", f"{work}/{s}/pg_test_fsync.out"]
    # (It exits 1 where a 2 kB O_DIRECT write is refused, on 4Kn devices,
    # after the sections read here.)
    text = subprocess.run(cmd, capture_output=True, text=True).stdout
    open(f"{out}/pg_test_fsync-{s}.txt", "w").write(text)
    # The first section: one 8 kB write per sync, by method.
    first = text.split("Compare file sync methods using two 8kB writes")[0]
    fsync[s] = {m: float(v) for m, v in
                re.findall(r"^\s+(\S+)\s+([0-9.]+) ops/sec", first, re.M)}
methods = [m for m in fsync["raw"] if m in fsync["external"]]
print(f"  {'method':22} " + " ".join(f"{s:>9}" for s in sides) + "  ext/raw  norm/raw")
for m in methods:
    v = [fsync[s].get(m, 0.0) for s in sides]
    print(f"  {m:22} " + " ".join(f"{x:>9,.0f}" for x in v)
          + f"  {v[1] / v[0]:>6.2f}x  {v[2] / v[0]:>7.2f}x")
EOF
echo "pgbench and pg_test_fsync outputs: $out"
