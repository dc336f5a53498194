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
bin=${CRESCENT_BIN_DIR:-$(dirname "$0")/../zig-out/bin}
port() { python3 -c 'import random; print(random.randrange(20000, 32000))'; }
declare -A results
for r in $(seq "$rounds"); do
    for mode in none async sync; do
        state="$parent/state-$mode-$r"
        rm -rf "$state"
        base=$(port)
        "$bin/crescentd" --no-pin --http-address "127.0.0.1:$((base + 1))" \
            --rpc-address "tcp://127.0.0.1:$base" --rpc-tcp-address "127.0.0.1:$((base + 2))" \
            --event-address "tcp://127.0.0.1:$((base + 3))" \
            --replay-address "tcp://127.0.0.1:$((base + 4))" --metrics-port 0 \
            --local-segment-size 0 --state-dir "$state" --durability "$mode" \
            >"$parent/crescentd-$mode-$r.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do
            curl -sf "http://127.0.0.1:$((base + 1))/health" >/dev/null && break
            sleep 0.1
        done
        ops=$("$bin/crescent-bench" --workload put --connections "$conns" \
            --rpc "crescent://127.0.0.1:$((base + 2))" --mount-fake --duration "$secs" \
            --warmup 1 --quiet --json - 2>/dev/null |
            python3 -c 'import json,sys; print(round(json.load(sys.stdin)["throughput_ops_s"]))')
        syncs=$(curl -s "http://127.0.0.1:$((base + 1))/metrics" |
            awk '/^crescent_journal_log_syncs_total/ {print $2}')
        kill "$pid"
        wait "$pid" || true
        results[$mode]+="$ops "
        echo "round $r $mode: $ops put pairs/s (log syncs: ${syncs:-0})"
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
none=$(echo "${results[none]}" | median)
for mode in none async sync; do
    m=$(echo "${results[$mode]}" | median)
    python3 -c "print(f'$mode: median $m put pairs/s, {$m / $none:.2f}x none')" ||
        echo "$mode: median $m"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
