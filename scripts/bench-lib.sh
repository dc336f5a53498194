# Shared by scripts/bench-durable.sh and scripts/bench-replication.sh (sourced,
# not run): crescentd on free loopback ports, a put load with crescent-bench,
# medians of interleaved rounds and ratios against a baseline of the same run.
# The caller sets `parent` (a directory for state and logs) before start.
bin=${CRESCENT_BIN_DIR:-$(dirname "$0")/../zig-out/bin}

# A free loopback port (the machine is shared: fixed or random ones collide).
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start NAME ARGS...: a crescentd on free ports with ARGS, healthy; sets http
# and native (its ports) and appends its pid to pids.  A non-empty `launch`
# (e.g. "taskset -c 1") is the command it runs under.
start() {
    local name=$1
    shift
    http=$(port)
    native=$(port)
    ${launch:-} "$bin/crescentd" --no-pin --http-address "127.0.0.1:$http" \
        --rpc-address "tcp://127.0.0.1:$(port)" --rpc-tcp-address "127.0.0.1:$native" \
        --event-address "tcp://127.0.0.1:$(port)" \
        --replay-address "tcp://127.0.0.1:$(port)" --metrics-port 0 \
        --mooncake-rpc-address "127.0.0.1:$(port)" --rpc-shm-path off \
        --local-segment-size 0 "$@" >"$parent/crescentd-$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$http/health" >/dev/null && return
        sleep 0.1
    done
    echo "crescentd $name did not start: $(tail -n 2 "$parent/crescentd-$name.log")" >&2
    exit 1
}

# stop_all: ends the crescentd processes start began (by pid) and empties pids.
stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" || true; done
    pids=()
}

# put_load NATIVE_PORT CONNECTIONS SECONDS: put pairs/s of a fresh-key put load.
put_load() {
    "$bin/crescent-bench" --workload put --connections "$2" \
        --rpc "crescent://127.0.0.1:$1" --mount-fake --duration "$3" \
        --warmup 1 --quiet --json - 2>/dev/null |
        python3 -c 'import json,sys; print(round(json.load(sys.stdin)["throughput_ops_s"]))'
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# report BASELINE_LABEL MODE...: medians of results[MODE] and each one's ratio
# to the first mode's median, then the load.
report() {
    local label=$1
    shift
    local base
    base=$(echo "${results[$1]}" | median)
    for mode in "$@"; do
        local m
        m=$(echo "${results[$mode]}" | median)
        python3 -c "print(f'$mode: median $m put pairs/s, {$m / $base:.2f}x $label')"
    done
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
}
