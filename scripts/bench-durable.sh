#!/usr/bin/env bash
# Put pairs (PutStart + PutEnd) at N connections over crescentd's native
# endpoint with --durability none, async and sync (--state-dir on a fresh
# directory each run), interleaved rounds, medians and ratios against none
# measured in the same run (docs/durability.md, bench/RESULTS.md).
#   scripts/bench-durable.sh [ROUNDS] [CONNECTIONS] [SECONDS] [STATE_PARENT]
# STATE_PARENT (default a temporary directory) decides the disk being synced.
set -euo pipefail
rounds=${1:-3}
conns=${2:-64}
secs=${3:-5}
parent=${4:-$(mktemp -d)}
mkdir -p "$parent"
source "$(dirname "$0")/bench-lib.sh"
declare -A results
pids=()
for r in $(seq "$rounds"); do
    for mode in none async sync; do
        state="$parent/state-$mode-$r"
        rm -rf "$state"
        start "$mode-$r" --state-dir "$state" --durability "$mode"
        ops=$(put_load "$native" "$conns" "$secs")
        syncs=$(curl -s "http://127.0.0.1:$http/metrics" |
            awk '/^crescent_journal_log_syncs_total/ {print $2}')
        stop_all
        results[$mode]+="$ops "
        echo "round $r $mode: $ops put pairs/s (log syncs: ${syncs:-0}; load $(cut -d' ' -f1 /proc/loadavg))"
    done
done
report none none async sync
