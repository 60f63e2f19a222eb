#!/usr/bin/env bash
# Create and mount a 1 PiB group: 64 sparse files of 16 TiB (16 TiB - 4 KiB
# where the filesystem refuses 16 TiB, as ext4 with 4 KiB blocks does), 4 MiB
# AUs. No root needed.
#
# Environment: BENCH_DIR (where the temporary directory goes; default
# /var/tmp, which must be a filesystem allowing files of ~16 TiB: ext4 with
# 4 KiB blocks, xfs, btrfs). Arguments are passed to the benchmark:
# --disks N (default 64), --disk-bytes N (default: 16 TiB, or 16 TiB - 4 KiB),
# --au-mib N (4).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help_if_asked "$@"
parent="${BENCH_DIR:-/var/tmp}"

bench="$(build_example cairn-store group_bench)"

dir="$(mktemp -d "$parent/cairn-1pib.XXXXXX")"
trap 'rm -rf "$dir"' EXIT INT TERM

fs="$(stat -f -c %T "$dir")"
probe="$dir/probe.img"
if ! truncate -s 17592186040320 "$probe" 2>/dev/null; then
    echo "skipped: $parent ($fs) does not allow a file of 16 TiB - 4 KiB; set BENCH_DIR to ext4, xfs or btrfs"
    exit 0
fi
rm -f "$probe"
size_args=()
if truncate -s 16T "$probe" 2>/dev/null; then
    note="(16 TiB files allowed: the group is a true 1 PiB)"
    case " $* " in *" --disk-bytes "*) ;; *) size_args=(--disk-bytes 17592186044416) ;; esac
else
    note="(16 TiB exactly is refused here, File too large: disks are 16 TiB - 4 KiB)"
fi
rm -f "$probe"
if [ "$fs" = tmpfs ]; then
    note="$note; note: O_DIRECT on tmpfs is not direct I/O, times are not comparable"
fi

echo "== create and mount a 1 PiB group"
echo "host: $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%M:%SZ); files on $fs under $parent $note"
"$bench" create-1pib --dir "$dir" "${size_args[@]}" "$@"
echo "files after the mount (ls -ls: allocated KiB, apparent size), first three:"
ls -ls "$dir" | sed -n '2,4p'
echo "du of the directory: $(du -sh "$dir" | cut -f1)"
