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
source "$(dirname "$0")/bench-lib.sh"
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
            start "leader-$mode-$r" --durability async --state-dir "$parent/leader-$mode-$r"
            lhttp=$http lnative=$native
        else
            start "leader-$mode-$r" --durability async --state-dir "$parent/leader-$mode-$r" \
                --replication-address "127.0.0.1:$repl" --replication "$mode"
            lhttp=$http lnative=$native
            start "standby-$mode-$r" --durability async --state-dir "$parent/standby-$mode-$r" \
                --standby-of "127.0.0.1:$repl"
            for _ in $(seq 100); do
                curl -s "http://127.0.0.1:$lhttp/api/v1/ha" | grep -q '"acked_lsn"' && break
                sleep 0.1
            done
        fi
        ops=$(put_load "$lnative" "$conns" "$secs")
        extra=""
        if [ "$mode" != none ]; then
            l=$(curl -s "http://127.0.0.1:$lhttp/metrics" | lag)
            extra=" (standby lag p50 <= $(echo "$l" | cut -d' ' -f1) ms, p99 <= $(echo "$l" | cut -d' ' -f2) ms over $(echo "$l" | cut -d' ' -f3) blocks)"
            lags+="$mode round $r: $l"$'\n'
        fi
        stop_all
        results[$mode]+="$ops "
        echo "round $r $mode: $ops put pairs/s$extra (load $(cut -d' ' -f1 /proc/loadavg))"
    done
done
report "no standby" none async sync
