#!/usr/bin/env bash
# Put pairs (PutStart + PutEnd) at N connections over the leader's native
# endpoint: no standby, one standby with --replication async, one with
# --replication sync (every crescentd with --durability async on a fresh
# --state-dir), interleaved rounds, medians and ratios against no standby
# measured in the same run; and the standby's lag (a block of records from
# its sending to the standby's acknowledgement: p50/p99 from the leader's
# crescent_journal_replication_lag_seconds histogram, bucket bounds).
#   scripts/bench-replication.sh [ROUNDS] [CONNECTIONS] [SECONDS] [STATE_PARENT]
set -euo pipefail
rounds=${1:-3}
conns=${2:-64}
secs=${3:-5}
parent=${4:-$(mktemp -d)}
mkdir -p "$parent"
bin=${CRESCENT_BIN_DIR:-$(dirname "$0")/../zig-out/bin}
port() { python3 -c 'import random; print(random.randrange(20000, 32000))'; }
start() { # NAME BASE ARGS...: a crescentd on BASE..BASE+5, healthy
    local name=$1 base=$2
    shift 2
    "$bin/crescentd" --no-pin --http-address "127.0.0.1:$((base + 1))" \
        --rpc-address "tcp://127.0.0.1:$base" --rpc-tcp-address "127.0.0.1:$((base + 2))" \
        --event-address "tcp://127.0.0.1:$((base + 3))" \
        --replay-address "tcp://127.0.0.1:$((base + 4))" --metrics-port 0 \
        --mooncake-rpc-address "127.0.0.1:$((base + 6))" --rpc-shm-path off \
        --local-segment-size 0 --durability async "$@" >"$parent/crescentd-$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$((base + 1))/health" >/dev/null && return
        sleep 0.1
    done
}
# p50 and p99 (bucket upper bounds, ms) of the lag histogram in /metrics text.
lag() {
    python3 -c '
import re, sys
b = []
for line in sys.stdin:
    m = re.match(r"crescent_journal_replication_lag_seconds_bucket\{.*le=\"([^\"]+)\"\} (\d+)", line)
    if m: b.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), int(m.group(2))))
total = b[-1][1] if b else 0
def q(p):
    for le, c in b:
        if total and c >= p * total: return f"{le * 1000:g}"
    return "-"
print(f"{q(0.5)} {q(0.99)} {total}")'
}
declare -A results
lags=""
for r in $(seq "$rounds"); do
    for mode in none async sync; do
        pids=()
        base=$(port)
        repl=$((base + 5))
        rm -rf "$parent/leader-$mode-$r" "$parent/standby-$mode-$r"
        if [ "$mode" = none ]; then
            start "leader-$mode-$r" "$base" --state-dir "$parent/leader-$mode-$r"
        else
            start "leader-$mode-$r" "$base" --state-dir "$parent/leader-$mode-$r" \
                --replication-address "127.0.0.1:$repl" --replication "$mode"
            sbase=$((base + 10))
            start "standby-$mode-$r" "$sbase" --state-dir "$parent/standby-$mode-$r" \
                --standby-of "127.0.0.1:$repl"
            for _ in $(seq 100); do
                curl -s "http://127.0.0.1:$((base + 1))/api/v1/ha" | grep -q '"acked_lsn"' && break
                sleep 0.1
            done
        fi
        ops=$("$bin/crescent-bench" --workload put --connections "$conns" \
            --rpc "crescent://127.0.0.1:$((base + 2))" --mount-fake --duration "$secs" \
            --warmup 1 --quiet --json - 2>/dev/null |
            python3 -c 'import json,sys; print(round(json.load(sys.stdin)["throughput_ops_s"]))')
        extra=""
        if [ "$mode" != none ]; then
            l=$(curl -s "http://127.0.0.1:$((base + 1))/metrics" | lag)
            extra=" (standby lag p50 <= $(echo "$l" | cut -d' ' -f1) ms, p99 <= $(echo "$l" | cut -d' ' -f2) ms over $(echo "$l" | cut -d' ' -f3) blocks)"
            lags+="$mode round $r: $l"$'\n'
        fi
        for p in "${pids[@]}"; do kill "$p"; wait "$p" || true; done
        results[$mode]+="$ops "
        echo "round $r $mode: $ops put pairs/s$extra"
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
none=$(echo "${results[none]}" | median)
for mode in none async sync; do
    m=$(echo "${results[$mode]}" | median)
    python3 -c "print(f'$mode: median $m put pairs/s, {$m / $none:.2f}x no standby')"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
