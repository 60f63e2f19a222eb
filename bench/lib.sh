# The preamble every benchmark script shares: its arguments, what it needs
# of the host (root, loop devices, FUSE, room in /dev/shm, tools), where it
# writes, and the binaries it builds. Sourced, not run:
#
#     source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#     bench_args "$@"           # --quick, -h/--help; sets $quick
#     need_root "it attaches loop devices"
#     need_loop
#     need_shm 3072
#     cairn="$(build_cairn)"
#     out="$(bench_out)"
#
# A host that lacks what a benchmark needs gets one line starting with
# "skipped:" and exit 0: a benchmark is run by hand or by a harness that
# reads its output, and says why it measured nothing. A wrong argument is
# exit 2. Read docs/measuring.md before trusting a figure from a shared
# 2-core machine.

set -euo pipefail
# A command substitution fails with what fails inside it.
shopt -s inherit_errexit

# The repository's root, whichever directory the script was started from.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench_name="$(basename "$0")"
quick=0

# The script's opening comment (its second line up to the first line that is
# not a comment), without the leading "# ".
bench_help() {
    awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
}

# The usual arguments: --quick (a shorter run), -h or --help.
bench_args() {
    local arg
    for arg in "$@"; do
        case "$arg" in
            --quick) quick=1 ;;
            -h|--help) bench_help; exit 0 ;;
            *) echo "$bench_name: unknown argument '$arg'; expected --quick or nothing" >&2; exit 2 ;;
        esac
    done
}

# For a script that passes its arguments on to a benchmark program:
# -h or --help among them prints the script's help and exits.
bench_help_if_asked() {
    local arg
    for arg in "$@"; do
        case "$arg" in -h|--help) bench_help; exit 0 ;; esac
    done
}

# Where a run writes its figures: $BENCH_OUT, or a new directory under
# target/ named after the script and the time.
bench_out() {
    echo "${BENCH_OUT:-$root/target/${bench_name%.sh}/$(date -u +%Y%m%dT%H%M%SZ)}"
}

# skipped: WHY, and exit 0.
bench_skip() {
    echo "skipped: $*"
    exit 0
}

need_root() {
    [ "$(id -u)" -eq 0 ] || bench_skip "needs root ($1)"
}

need_loop() {
    if [ ! -e /dev/loop-control ] || ! command -v losetup >/dev/null; then
        bench_skip "no loop device support (/dev/loop-control or losetup missing)"
    fi
}

need_fuse() {
    [ -e /dev/fuse ] || bench_skip "needs /dev/fuse"
}

# need_shm MIB: /dev/shm has at least MIB MiB free (RAM-backed loop devices).
need_shm() {
    [ -d /dev/shm ] || bench_skip "no /dev/shm to back a RAM loop device"
    local free_mib=$(( $(stat -f -c '%a*%S' /dev/shm) / 1048576 ))
    if [ "$free_mib" -lt "$1" ]; then
        bench_skip "/dev/shm has ${free_mib} MiB free; the run needs $1 MiB"
    fi
}

# need_rounds N: a median needs at least three rounds.
need_rounds() {
    if [ "$1" -lt 3 ]; then
        echo "$bench_name: BENCH_ROUNDS=$1; at least 3 rounds are needed for a median" >&2
        exit 2
    fi
}

# need_tools CMD...: runs scripts/install-deps (Debian's packages) when one
# of the commands is missing, then skips if one still is.
need_tools() {
    local tool
    for tool in "$@"; do
        if ! command -v "$tool" >/dev/null; then
            "$root/scripts/install-deps" >/dev/null
            break
        fi
    done
    for tool in "$@"; do
        command -v "$tool" >/dev/null || bench_skip "$tool is not installed (scripts/install-deps installs it as root on Debian)"
    done
}

# The release `cairn` binary, built if it is stale; prints its path.
build_cairn() {
    echo "building cairn (release)" >&2
    (cd "$root" && cargo build --release --quiet -p cairn-cli) >&2 || return
    echo "$root/target/release/cairn"
}

# build_example PACKAGE EXAMPLE: a release example program; prints its path.
build_example() {
    (cd "$root" && cargo build --release --quiet -p "$1" --example "$2") >&2 || return
    echo "$root/target/release/examples/$2"
}
