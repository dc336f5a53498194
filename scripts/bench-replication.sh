#!/usr/bin/env bash
# Put pairs (PutStart + PutEnd) at N connections over the leader's native
# endpoint: no standby, one standby with --replication async, one with
# --replication sync (every crescentd with --durability async on a fresh
# --state-dir), interleaved rounds, medians and ratios against no standby
# measured in the same run; and the standby's lag (a block of records from
# its sending to the standby's acknowledgement: p50/p99 from the leader's
# crescent_journal_replication_lag_seconds histogram, bucket bounds, and the
# exact max), beside its ceiling in the same round: bench/repl_ceiling.c
# streaming blocks of the async round's mean size at its rate over a bare
# loopback connection to a process that acknowledges each read, while the
# same put load runs against a leader without a standby (the "none" round),
# so it competes for the CPUs as a standby would.
#   scripts/bench-replication.sh [ROUNDS] [CONNECTIONS] [SECONDS] [STATE_PARENT]
# BASE_CRESCENTD=PATH adds "async-base": --replication async with that
# crescentd binary (another build), in the same rounds.  LEADER_CPU=N and
# STANDBY_CPU=M pin the leader and the standby to those CPUs (taskset), and
# the ceiling's sender and acknowledger the same way.  On a shared machine,
# run it at a high priority (nice -n -10) so other work yields to it.
set -euo pipefail
rounds=${1:-3}
conns=${2:-64}
secs=${3:-5}
parent=${4:-$(mktemp -d)}
mkdir -p "$parent"
source "$(dirname "$0")/bench-lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
ceiling="$parent/repl_ceiling"
cc -std=gnu17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$ceiling" "$here/bench/repl_ceiling.c" -lpthread
# p50 and p99 (bucket upper bounds, ms) of the lag histogram, its sample
# count, the exact max (ms), the bytes streamed, from /metrics text.
lag() {
    python3 -c '
import re, sys
b = []
mx = sent = 0
for line in sys.stdin:
    m = re.match(r"crescent_journal_replication_lag_seconds_bucket\{.*le=\"([^\"]+)\"\} (\d+)", line)
    if m: b.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), int(m.group(2))))
    m = re.match(r"crescent_journal_repl_lag_max_us(?:\{[^}]*\})? (\d+)", line)
    if m: mx = int(m.group(1))
    m = re.match(r"crescent_journal_repl_bytes_sent_total(?:\{[^}]*\})? (\d+)", line)
    if m: sent = int(m.group(1))
total = b[-1][1] if b else 0
def q(p):
    for le, c in b:
        if total and c >= p * total: return f"{le * 1000:g}"
    return "-"
print(f"{q(0.5)} {q(0.99)} {total} {mx / 1000:g} {sent}")'
}
modes="async none sync"
[ -n "${BASE_CRESCENTD:-}" ] && modes="async-base async none sync"
size=4096 rate=2000 # the ceiling's blocks until an async round measured them
declare -A results
for r in $(seq "$rounds"); do
    for mode in $modes; do
        pids=()
        repl=$(port)
        saved_bin=$bin
        rmode=$mode
        if [ "$mode" = async-base ]; then
            mkdir -p "$parent/base-bin"
            cp -f "$BASE_CRESCENTD" "$parent/base-bin/crescentd"
            bin="$parent/base-bin" rmode=async
        fi
        rm -rf "$parent/leader-$mode-$r" "$parent/standby-$mode-$r"
        if [ "$mode" = none ]; then
            launch=${LEADER_CPU:+taskset -c $LEADER_CPU}
            start "leader-$mode-$r" --durability async --state-dir "$parent/leader-$mode-$r"
            lhttp=$http lnative=$native
        else
            launch=${LEADER_CPU:+taskset -c $LEADER_CPU}
            start "leader-$mode-$r" --durability async --state-dir "$parent/leader-$mode-$r" \
                --replication-address "127.0.0.1:$repl" --replication "$rmode"
            lhttp=$http lnative=$native
            launch=${STANDBY_CPU:+taskset -c $STANDBY_CPU}
            start "standby-$mode-$r" --durability async --state-dir "$parent/standby-$mode-$r" \
                --standby-of "127.0.0.1:$repl"
            for _ in $(seq 100); do
                curl -s "http://127.0.0.1:$lhttp/api/v1/ha" | grep -q '"acked_lsn"' && break
                sleep 0.1
            done
        fi
        bin=$saved_bin
        launch=""
        extra=""
        cpid=""
        if [ "$mode" = none ]; then
            "$ceiling" "$size" "$rate" "$((secs + 1))" ${LEADER_CPU:-} ${STANDBY_CPU:-} \
                >"$parent/ceiling-$r" &
            cpid=$!
        fi
        ops=$(put_load "$lnative" "$conns" "$secs")
        if [ -n "$cpid" ]; then
            wait "$cpid" || true
            read -r c50 c99 cmx cn <"$parent/ceiling-$r"
            extra=" (ceiling: $size B blocks at $rate/s beside the load: p50 $c50 ms, p99 $c99 ms, max $cmx ms over $cn blocks)"
        fi
        if [ "$mode" != none ]; then
            read -r p50 p99 n mx sent <<<"$(curl -s "http://127.0.0.1:$lhttp/metrics" | lag)"
            extra=" (lag p50 <= $p50 ms, p99 <= $p99 ms, max $mx ms over $n blocks)"
            if [ "$mode" = async ] && [ "$n" -gt 0 ]; then
                # The ceiling's blocks: this round's mean size and rate.
                size=$((sent / n > 8 ? sent / n : 8))
                rate=$(((n + secs) / (secs + 1)))
            fi
        fi
        stop_all
        results[$mode]+="$ops "
        echo "round $r $mode: $ops put pairs/s$extra (load $(cut -d' ' -f1 /proc/loadavg))"
    done
done
report "no standby" none ${modes/none /}
echo "uptime: $(uptime)"
