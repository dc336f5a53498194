#!/usr/bin/env bash
# Runs bench/master against a crescentd started here on free loopback ports,
# then stops it.  Usage:
#   scripts/bench-master.sh [--bin DIR] [--bench DIR] [--sync] [--pin] [-- options...]
# DIR defaults: zig-out/bin (crescentd) and zig-out/bench (master); build them
# with `zig build` (-Doptimize=ReleaseFast for numbers) and `zig build bench`.
# Extra options go to the benchmark:
#   master (pipelined):  --threads 1,8,64 --ops 200000 --depth 32
#   --sync: master_sync, synchronous calls over the three endpoints (ZMQ,
#           native crescent://, same-host shm://) next to the ZMQ and TCP echo
#           ceilings, with crescentd's CPU per call (issue 14's driver):
#           --threads 1,8,64 --seconds 5 --rounds 3 --cases ... --echo zmq,tcp
# --pin starts crescentd without --no-pin (its actors pinned to CPUs).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir="$root/zig-out/bin"
bench_dir="$root/zig-out/bench"
sync=false
pin=(--no-pin)
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin_dir=$2; shift 2 ;;
        --bench) bench_dir=$2; shift 2 ;;
        --sync) sync=true; shift ;;
        --pin) pin=(); shift ;;
        --) shift; break ;;
        *) echo "bench-master.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

# Five free loopback ports, held open together while they are chosen so no
# two are the same.
read -r http_port rpc_port event_port replay_port native_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
http="127.0.0.1:$http_port"
rpc="tcp://127.0.0.1:$rpc_port"
native="crescent://127.0.0.1:$native_port"  # the native endpoint (--rpc-tcp-address)
shm="shm://@crescent-rpc/$rpc_port"        # the shm endpoint's default name (--rpc-shm-path)
log=$(mktemp /tmp/bench-master-crescentd.XXXXXX.log)
"$bin_dir/crescentd" "${pin[@]}" --log-level WARN --http-address "$http" --rpc-address "$rpc" \
    --metrics-port 0 --rpc-tcp-address "127.0.0.1:$native_port" \
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
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg); crescentd ${pin[*]:-pinned}"
if $sync; then
    "$bench_dir/master_sync" --rpc "crescent-zmq=$rpc" --rpc "crescent-native=$native" \
        --rpc "crescent-shm=$shm" --server-pid "$pid" "$@"
else
    "$bench_dir/master" --rpc "$rpc" "$@"
fi
