#!/usr/bin/env bash
# The disk life cycle's costs, in one run (see bench/README.md, "Rebalance
# and resync", and docs/measuring.md):
#
#   sudo bench/rebalance.sh            # 512 MiB of file data
#   sudo bench/rebalance.sh --quick    # 192 MiB
#
# Devices: six RAM-backed 4Kn loop devices (pre-filled /dev/shm files,
# losetup --direct-io=on --sector-size 4096), made afresh for every case.
# A normal-redundancy group over L0..L3 (failure groups A: L0 L1, B: L2 L3)
# holds one file of random data; L4 (A) and L5 (B) are spares.
#
#  1. Movement: `alter --add L4=A --add L5=B --drop L1 --drop L3` in one
#     command, against `alter --add ...` then `alter --drop ...`: AUs moved
#     against the minimum (what L1 and L3 held). Target: one command moves
#     exactly the minimum. `--explain` before it, against what it moved
#     (target: equal).
#  2. Throughput: the same one-command change at power 1, 4, 16 and 1024:
#     MiB/s copied, against the devices' own sequential copy rate measured
#     in the same run (fio: 1 MiB reads on one device and 1 MiB writes on
#     another at once, QD8 each; the copy rate is the slower of the two).
#     Target: >= 0.8x at power 1024. The rebalance also discards the AUs it
#     frees: the devices' discard rate (blkdiscard on a spare) is measured
#     too, and the ratio against "copy, then discard" printed beside; so is
#     where the rebalance's time went (its report's metadata, copy and
#     switch times).
#  3. Resync: L3 offline, N MiB written to a new file, L3 online: bytes the
#     resync copied against N (target: <= N rounded up to AUs), and its time.
#  4. Impact: p99 of 8 KiB random reads (QD1) while the change runs at power
#     1 and 1024, against idle. The change runs as a command that holds the
#     group (no service), so the reads are taken on a member device that the
#     rebalance reads from (L1, read-only), for as long as the change took in
#     case 2.
#
# Environment: BENCH_DATA_MIB (512, quick 192), BENCH_OUT (default
# target/rebalance/<UTC time>).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
data_mib="${BENCH_DATA_MIB:-$([ "$quick" -eq 1 ] && echo 192 || echo 512)}"
out="$(bench_out)"
# Each disk holds about half a copy of the data, with room to take a dropped
# disk's share.
img_mib=$((data_mib + 256))

need_root "it attaches loop devices"
need_loop
need_shm $((6 * img_mib + data_mib + 256))
need_tools fio python3

cairn="$(build_cairn)"
mkdir -p "$out"
src="/dev/shm/cairn-rebalance-$$-src.bin"
head -c "$((data_mib << 20))" /dev/urandom > "$src"

imgs=()
loops=()
detach() {
    for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
    for i in "${imgs[@]}"; do rm -f "$i"; done
    loops=()
    imgs=()
}
trap 'detach; rm -f "$src"' EXIT INT TERM

# Six fresh devices and group MOV on L0..L3 holding the file; prints nothing.
setup() {
    detach
    for i in 0 1 2 3 4 5; do
        img="/dev/shm/cairn-rebalance-$$-$i.img"
        imgs+=("$img")
        dd if=/dev/zero of="$img" bs=1M count="$img_mib" status=none
        loops+=("$(losetup --find --show --direct-io=on --sector-size 4096 "$img")")
    done
    export CAIRN_DISCOVER
    CAIRN_DISCOVER="$(IFS=,; echo "${loops[*]}")"
    export CAIRN_RUN_DIR="$out/run"
    export CAIRN_CONFIG=/nonexistent/cairn.toml
    "$cairn" group create MOV --redundancy normal --au-size 4M \
        --disk "${loops[0]}=A" --disk "${loops[1]}=A" \
        --disk "${loops[2]}=B" --disk "${loops[3]}=B" >/dev/null
    "$cairn" cp "$src" +MOV/data.dbf >/dev/null
    # RAM-backed loops say they spin (every loop device does): the compact
    # pass would run and be counted in the throughput; on flash, as here,
    # it is wasted I/O (docs/rebalance.md).
    "$cairn" group set MOV rebalance_compact=false >/dev/null
}

used_aus() { # label
    "$cairn" group disks MOV --json | jq --arg l "$1" '.[] | select(.label == $l) | .total_aus - .free_aus'
}

now() { date +%s.%N; }

echo "host: $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "data: ${data_mib} MiB of random data in one file, normal redundancy, 4 MiB AUs; disks ${img_mib} MiB each, 4Kn, RAM loop"

# 1. Movement.
setup
minimum=$(( $(used_aus MOV_0001) + $(used_aus MOV_0003) ))
change=(--add "${loops[4]}=A" --add "${loops[5]}=B" --drop MOV_0001 --drop MOV_0003)
explained=$("$cairn" group alter MOV "${change[@]}" --explain --json | jq .explain.aus_to_move)
one=$("$cairn" group alter MOV "${change[@]}" --power 1024 --json | jq .rebalance.aus_moved)
"$cairn" group check MOV >/dev/null
setup
a=$("$cairn" group alter MOV --add "${loops[4]}=A" --add "${loops[5]}=B" --power 1024 --json | jq .rebalance.aus_moved)
b=$("$cairn" group alter MOV --drop MOV_0001 --drop MOV_0003 --power 1024 --json | jq .rebalance.aus_moved)
two=$((a + b))
echo
echo "1. movement (AUs of 4 MiB; minimum = what the dropped disks held: $minimum)"
printf "   %-34s %6s AUs  %5.2fx the minimum\n" "add 2 + drop 2 in one alter" "$one" "$(echo "$one / $minimum" | bc -l)"
printf "   %-34s %6s AUs  %5.2fx the minimum (%s + %s)\n" "alter --add, then alter --drop" "$two" "$(echo "$two / $minimum" | bc -l)" "$a" "$b"
printf "   %-34s %6s AUs  (the change moved %s: %s)\n" "--explain said" "$explained" "$one" "$([ "$explained" -eq "$one" ] && echo equal || echo DIFFERENT)"

# 2. Throughput, against the devices' copy rate.
setup
fio --name=rd --filename="${loops[1]}" --rw=read --bs=1M --iodepth=8 --ioengine=libaio \
    --direct=1 --size="${data_mib}M" --time_based --runtime=4 --output-format=json \
    --name=wr --filename="${loops[4]}" --rw=write --bs=1M --iodepth=8 --ioengine=libaio \
    --direct=1 --size="${data_mib}M" --time_based --runtime=4 > "$out/fio-copy.json"
copy_mibs=$(jq '[.jobs[] | (.read.bw_bytes + .write.bw_bytes)] | min / 1048576' "$out/fio-copy.json")
# The rebalance also discards what it frees (thin provisioning): the
# device's own cost of that, for the same bytes, on a spare whose pages are
# allocated (on a RAM loop a discard frees memory: CPU work, not free).
t0=$(now)
blkdiscard -o 0 -l "$((data_mib << 20))" "${loops[5]}"
t1=$(now)
discard_mibs=$(echo "$data_mib / ($t1 - $t0)" | bc -l)
# Copy, then discard the source: the device's rate for the whole job.
both_mibs=$(echo "1 / (1 / $copy_mibs + 1 / $discard_mibs)" | bc -l)
echo
echo "2. throughput (MiB copied per second of the rebalance; the whole command's time beside it)"
printf "   device, fio: copy %.0f MiB/s; blkdiscard %.0f MiB/s; copy and discard the source %.0f MiB/s\n" \
    "$copy_mibs" "$discard_mibs" "$both_mibs"
declare -A took
for power in 1 4 16 1024; do
    setup
    t0=$(now)
    "$cairn" group alter MOV "${change[@]}" --power "$power" --json > "$out/alter-$power.json"
    t1=$(now)
    whole=$(echo "$t1 - $t0" | bc -l)
    bytes=$(jq .rebalance.bytes_copied "$out/alter-$power.json")
    secs=$(jq '.rebalance.elapsed_ms / 1000' "$out/alter-$power.json")
    took[$power]=$whole
    mibs=$(echo "$bytes / 1048576 / $secs" | bc -l)
    printf "   power %-5s %6.0f MiB in %5.2f s = %6.0f MiB/s  %5.2fx the copy rate, %5.2fx copy and discard  (command: %.2f s)\n" \
        "$power" "$(echo "$bytes / 1048576" | bc -l)" "$secs" "$mibs" "$(echo "$mibs / $copy_mibs" | bc -l)" \
        "$(echo "$mibs / $both_mibs" | bc -l)" "$whole"
    # (copy_ms is whole milliseconds: at least 1 here, so nothing divides by 0;
    # bytes_copied includes the metadata moves', a few AUs.)
    read -r meta_s copy_s switch_s < <(jq -r '.rebalance | "\(.metadata_ms / 1000) \([.copy_ms, 1] | max / 1000) \(.switch_ms / 1000)"' "$out/alter-$power.json")
    printf "        of it: metadata %.2f s; copying %.2f s (%.0f MiB/s, %.2fx the copy rate); commits and discards %.2f s\n" \
        "$meta_s" "$copy_s" "$(echo "$bytes / 1048576 / $copy_s" | bc -l)" \
        "$(echo "$bytes / 1048576 / $copy_s / $copy_mibs" | bc -l)" "$switch_s"
done

# 3. Resync: only what was written while the disk was away.
echo
echo "3. resync (L3 offline while the first N MiB of the file are rewritten, then online)"
for n in 16 64 $((data_mib / 4)); do
    setup
    "$cairn" group offline MOV MOV_0003 >/dev/null
    "$cairn" bench quick --target +MOV/data.dbf --rw write --bs 1m --qd 8 --size "${n}m" \
        --time 1s --force --out "$out/resync-write-$n" --json >/dev/null
    t0=$(now)
    report=$("$cairn" group online MOV MOV_0003 --power 16 --json)
    t1=$(now)
    copied=$(echo "$report" | jq '.resync.bytes_copied + .mount_resync.bytes_copied')
    bound=$(( (n + 3) / 4 * 4 ))
    printf "   N = %4s MiB: resync copied %6.1f MiB (bound: %s MiB, N rounded up to AUs) in %.2f s\n" \
        "$n" "$(echo "$copied / 1048576" | bc -l)" "$bound" "$(echo "$t1 - $t0" | bc -l)"
done

# 4. Impact on reads of a member the rebalance reads from.
p99() { # seconds -> p99 µs of 8 KiB random reads QD1 on L1
    "$cairn" --engine sync bench quick --target "${loops[1]}" --rw randread --bs 8k --qd 1 \
        --time "$1s" --size "${data_mib}m" --out "$out/impact-$RANDOM" --json |
        jq '.runs[0].totals.all.all.latency.percentiles[] | select(.p == 99) | .us'
}
echo
echo "4. impact: p99 of 8 KiB random reads (QD1) on L1 while the change runs"
setup
idle=$(p99 3)
printf "   %-12s p99 %7.0f µs\n" "idle" "$idle"
for power in 1 1024; do
    setup
    secs=$(printf %.0f "${took[$power]}")
    [ "$secs" -ge 1 ] || secs=1
    "$cairn" group alter MOV "${change[@]}" --power "$power" --json > "$out/impact-alter-$power.json" &
    busy=$(p99 "$secs")
    wait
    printf "   %-12s p99 %7.0f µs  %5.2fx idle (reads over %s s, the change's time at this power)\n" \
        "power $power" "$busy" "$(echo "$busy / $idle" | bc -l)" "$secs"
done
echo
echo "figures under $out"
