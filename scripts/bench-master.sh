#!/usr/bin/env bash
# Runs bench/master against a crescentd started here on free loopback ports,
# then stops it.  Usage:
#   scripts/bench-master.sh [--bin DIR] [--bench DIR] [-- master options...]
# DIR defaults: zig-out/bin (crescentd) and zig-out/bench (master); build them
# with `zig build` and `zig build bench`.  Extra options go to master
# (--threads 1,8,64 --ops 200000 --depth 32).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir="$root/zig-out/bin"
bench_dir="$root/zig-out/bench"
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin_dir=$2; shift 2 ;;
        --bench) bench_dir=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "bench-master.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

# Four free loopback ports, held open together while they are chosen so no
# two are the same.
read -r http_port rpc_port event_port replay_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
http="127.0.0.1:$http_port"
rpc="tcp://127.0.0.1:$rpc_port"
log=$(mktemp /tmp/bench-master-crescentd.XXXXXX.log)
"$bin_dir/crescentd" --no-pin --log-level WARN --http-address "$http" --rpc-address "$rpc" \
    --metrics-port 0 \
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

# Ready when /health answers 200 (bounded: 10 s).
for _ in $(seq 1 200); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://$http/health', timeout=1)" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "bench-master.sh: crescentd exited; its log:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 0.05
done

echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"$bench_dir/master" --rpc "$rpc" "$@"
