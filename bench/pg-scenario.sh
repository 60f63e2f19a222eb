#!/usr/bin/env bash
# The PostgreSQL scenario at full size (issue 17): PostgreSQL 15 on XFS on a
# volume of a normal-redundancy group over four loop devices (sparse files,
# two failure groups), `initdb -k`, `pgbench -i -s 20`, then, under pgbench
# with 8 clients: a member's path lost and restored (`group online` resyncs
# it), `group alter --add` two disks `--drop` two to the end, a clean 60 s
# run, and a `kill -9` of the service with crash recovery. At the end
# `pg_amcheck --heapallindexed`, `pg_checksums -c`, and the rows of
# pgbench_history against the transactions pgbench reported.
#
#   sudo bench/pg-scenario.sh
#
# It is the CI test `postgres_on_a_volume_keeps_every_transaction_through_a_
# disk_failure_a_rebalance_and_a_kill_9` (crates/cli/tests/serve_cli.rs) at
# full size, so the two never drift apart: CAIRN_PG_SCALE (20; CI 5),
# CAIRN_PG_CLIENTS (8), CAIRN_PG_SECONDS (60; CI 5) override it. Its last
# line is the scenario's figures.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in
    -h|--help) bench_help; exit 0 ;;
    "") ;;
    *) echo "$bench_name: unknown argument '$1'; it takes none" >&2; exit 2 ;;
esac
need_root "loop devices, FUSE, runuser postgres"
"$root/scripts/install-deps" >/dev/null
cd "$root"
CAIRN_REQUIRE_TOOLS=1 \
CAIRN_PG_SCALE="${CAIRN_PG_SCALE:-20}" \
CAIRN_PG_CLIENTS="${CAIRN_PG_CLIENTS:-8}" \
CAIRN_PG_SECONDS="${CAIRN_PG_SECONDS:-60}" \
    cargo test --release --quiet -p cairn-cli --test serve_cli \
    postgres_on_a_volume_keeps_every_transaction -- --nocapture 2>&1 \
    | grep -v -E '^(WARNING|DETAIL|HINT):' 
