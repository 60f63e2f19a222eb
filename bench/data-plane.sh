#!/usr/bin/env bash
# The group's data plane against the raw device, in one run, on a RAM-backed
# loop device (see bench/README.md and /work/shared/MEASURING.md): 8 KiB
# random reads, and 70/30 reads/writes, on one external-redundancy group file
# from 1, 2 and 4 threads (QD1 each, each thread its own io_uring engine),
# against the same threads doing the same I/O on the raw device, on the
# blocks the group's file occupies, the threads switching between the two
# every 10 ms; then file create + delete per second, with their latencies,
# while two threads run 70/30 on the group. Target: group >= 0.97x raw at
# every count.
#
# Environment: IMG_MIB (loop device size, default 1280: a 1 GiB file and the
# group's metadata must fit), SECTOR (logical sector size of the loop
# device, 512 or 4096; default 4096).
# Arguments are passed to the benchmark: --seconds N (a round, default 6),
# --rounds N (default 5), --slice-ms N (how often the threads switch between
# raw and group within a round, default 10), --threads 1,2,4, --mix
# read|oltp|both|write, --file-mib N (default 1024), --quiet-wait N, --control
# (the group side replaced by the raw device again: an A/A run that shows
# how far the machine's noise alone moves the ratios).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
img_mib="${IMG_MIB:-1280}"
sector="${SECTOR:-4096}"

if [ "$(id -u)" -ne 0 ]; then
    echo "skipped: needs root (it attaches a loop device)"
    exit 0
fi
if [ ! -e /dev/loop-control ] || ! command -v losetup >/dev/null; then
    echo "skipped: no loop device support (/dev/loop-control or losetup missing)"
    exit 0
fi
if [ ! -d /dev/shm ]; then
    echo "skipped: no /dev/shm to back a RAM loop device"
    exit 0
fi
shm_free_mib=$(( $(stat -f -c '%a*%S' /dev/shm) / 1048576 ))
if [ "$shm_free_mib" -lt $((img_mib + 256)) ]; then
    echo "skipped: /dev/shm has ${shm_free_mib} MiB free, the loop device needs ${img_mib} MiB"
    exit 0
fi

(cd "$root" && cargo build --release --quiet -p cairn-store --example group_bench)
bench="$root/target/release/examples/group_bench"

img="/dev/shm/cairn-data-plane-bench-$$.img"
loopdev=""
cleanup() {
    if [ -n "$loopdev" ]; then losetup -d "$loopdev" || true; fi
    rm -f "$img"
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
"$bench" data-plane --device "$loopdev" "$@"
