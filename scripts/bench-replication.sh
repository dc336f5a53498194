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
# Free loopback ports (the machine is shared: fixed or random ones collide).
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start() { # NAME ARGS...: a crescentd on free ports, healthy; sets http and native
    local name=$1
    shift
    http=$(port)
    native=$(port)
    "$bin/crescentd" --no-pin --http-address "127.0.0.1:$http" \
        --rpc-address "tcp://127.0.0.1:$(port)" --rpc-tcp-address "127.0.0.1:$native" \
        --event-address "tcp://127.0.0.1:$(port)" \
        --replay-address "tcp://127.0.0.1:$(port)" --metrics-port 0 \
        --mooncake-rpc-address "127.0.0.1:$(port)" --rpc-shm-path off \
        --local-segment-size 0 --durability async "$@" >"$parent/crescentd-$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$http/health" >/dev/null && return
        sleep 0.1
    done
    echo "crescentd $name did not start: $(tail -n 2 "$parent/crescentd-$name.log")" >&2
    exit 1
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
        repl=$(port)
        rm -rf "$parent/leader-$mode-$r" "$parent/standby-$mode-$r"
        if [ "$mode" = none ]; then
            start "leader-$mode-$r" --state-dir "$parent/leader-$mode-$r"
            lhttp=$http lnative=$native
        else
            start "leader-$mode-$r" --state-dir "$parent/leader-$mode-$r" \
                --replication-address "127.0.0.1:$repl" --replication "$mode"
            lhttp=$http lnative=$native
            start "standby-$mode-$r" --state-dir "$parent/standby-$mode-$r" \
                --standby-of "127.0.0.1:$repl"
            for _ in $(seq 100); do
                curl -s "http://127.0.0.1:$lhttp/api/v1/ha" | grep -q '"acked_lsn"' && break
                sleep 0.1
            done
        fi
        ops=$("$bin/crescent-bench" --workload put --connections "$conns" \
            --rpc "crescent://127.0.0.1:$lnative" --mount-fake --duration "$secs" \
            --warmup 1 --quiet --json - 2>/dev/null |
            python3 -c 'import json,sys; print(round(json.load(sys.stdin)["throughput_ops_s"]))')
        extra=""
        if [ "$mode" != none ]; then
            l=$(curl -s "http://127.0.0.1:$lhttp/metrics" | lag)
            extra=" (standby lag p50 <= $(echo "$l" | cut -d' ' -f1) ms, p99 <= $(echo "$l" | cut -d' ' -f2) ms over $(echo "$l" | cut -d' ' -f3) blocks)"
            lags+="$mode round $r: $l"$'\n'
        fi
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" || true; done
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
