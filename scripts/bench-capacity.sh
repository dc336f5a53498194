#!/usr/bin/env bash
# Runs bench/capacity against a crescentd started here on free loopback ports:
# 20 M live 4 KiB objects by default, then puts past the count watermark
# while eviction makes room; prints crescentd's memory per object, then
# stops it.  Needs about 10 GiB of free memory for the defaults.  Usage:
#   scripts/bench-capacity.sh [--bin DIR] [--bench DIR] [--max-objects N] [-- capacity options...]
# DIR defaults: zig-out/bin (crescentd) and zig-out/bench (capacity); build
# them with `zig build` and `zig build bench`.  --max-objects defaults to
# 21.5 M: with --eviction-high-watermark-ratio 0.95 and --eviction-ratio 0.01
# the store holds 20.2 to 20.4 M objects once full.  Extra options go to
# capacity (--fill 20000000 --churn 2000000 --threads 4 --batch 64).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir="$root/zig-out/bin"
bench_dir="$root/zig-out/bench"
max_objects=21500000
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin_dir=$2; shift 2 ;;
        --bench) bench_dir=$2; shift 2 ;;
        --max-objects) max_objects=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "bench-capacity.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

read -r http_port rpc_port event_port replay_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
http="127.0.0.1:$http_port"
rpc="tcp://127.0.0.1:$rpc_port"
log=$(mktemp /tmp/bench-capacity-crescentd.XXXXXX.log)
# --client-ttl 3600: the bench's segment owner connects once, at the start.
"$bin_dir/crescentd" --no-pin --log-level WARN --http-address "$http" --rpc-address "$rpc" \
    --metrics-port 0 --local-segment-size 0 --client-ttl 3600 \
    --max-objects "$max_objects" --eviction-ratio 0.01 \
    --event-address "tcp://127.0.0.1:$event_port" \
    --replay-address "tcp://127.0.0.1:$replay_port" >"$log" 2>&1 &
pid=$!
stop() {
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        wait "$pid" || true
    fi
}
trap stop EXIT

metrics() {
    python3 - "$http" <<'PY'
import re, sys, urllib.request
body = urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=60).read().decode()
want = ("crescent_segments_objects", "crescent_segments_max_objects",
        "crescent_segments_key_index_slots", "crescent_segments_evictions_total",
        "crescent_segments_room_evictions_total", "crescent_leases_count_eviction_passes_total",
        "crescent_indexer_index_bytes")
for line in body.splitlines():
    name = line.split(" ")[0]
    if name in want:
        print("#", line)
PY
}

for _ in $(seq 1 200); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://$http/health', timeout=1)" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "bench-capacity.sh: crescentd exited; its log:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 0.05
done

echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# idle crescentd: VmRSS $(grep VmRSS /proc/$pid/status | awk '{print $2}') kB"
"$bench_dir/capacity" --rpc "$rpc" --pid "$pid" "$@"
metrics
rss_kb=$(grep VmRSS /proc/$pid/status | awk '{print $2}')
objects=$(metrics | awk '$2 == "crescent_segments_objects" {print $3}')
echo "# crescentd VmRSS ${rss_kb} kB for ${objects} live objects: $(( rss_kb * 1024 / objects )) bytes per object; load: $(cut -d' ' -f1-3 /proc/loadavg)"
