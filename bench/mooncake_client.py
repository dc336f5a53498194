#!/usr/bin/python3
"""Mooncake's own client against crescentd and against mooncake_master,
interleaved in one run (docs/mooncake.md, bench/RESULTS.md).

  PYTHONPATH=../shared/mooncake /usr/bin/python3 bench/mooncake_client.py \
      [--rounds 3] [--seconds 5] [--threads 1,64]

For each round and each thread count, against each master in turn (reference
first, then crescentd, alternating which goes first each round): one client
process (MooncakeDistributedStore, protocol tcp) puts 16 keys of 4 KiB, then
N threads call is_exist (ExistKey) and get_replica_desc (GetReplicaList) in a
loop for --seconds.  Reported: calls/s and the server's CPU per call
(utime + stime from /proc/PID/stat over the measured window, divided by the
calls), medians over rounds.  The client and the servers share the machine;
the client (Python threads over one store, whose calls hold the GIL only
around the binding) is the ceiling of calls/s, so CPU per call is the fairer
comparison."""
import argparse
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
MC = pathlib.Path(os.environ.get("CRESCENT_MOONCAKE_DIR") or ROOT.parent / "shared" / "mooncake")
sys.path.insert(0, str(MC))
from mooncake.store import MooncakeDistributedStore  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start(kind, bin_dir):
    rpc, meta = free_port(), free_port()
    common = ["--enable_http_metadata_server=true", "--http_metadata_server_port", str(meta),
              "--http_metadata_server_host", "127.0.0.1", "--rpc_port", str(rpc)]
    if kind == "mooncake_master":
        args = [str(MC / "bin" / "mooncake_master"), "--rpc_address", "127.0.0.1",
                "--metrics_port", "0", *common]
    else:
        args = [str(bin_dir / "crescentd"), "--no-pin", "--metrics-port", "0",
                "--local-segment-size", "0", "--http-address", f"127.0.0.1:{free_port()}",
                "--rpc-address", f"tcp://127.0.0.1:{free_port()}",
                "--rpc-tcp-address", f"127.0.0.1:{free_port()}",
                "--event-address", f"tcp://127.0.0.1:{free_port()}",
                "--replay-address", f"tcp://127.0.0.1:{free_port()}", *common]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(rpc)
    wait_port(meta)
    return proc, f"127.0.0.1:{rpc}", f"http://127.0.0.1:{meta}/metadata"


def measure(store, threads, seconds, pid):
    keys = [f"bench{i}" for i in range(16)]
    counts = [0] * threads
    stop = threading.Event()

    def worker(t):
        n = 0
        while not stop.is_set():
            key = keys[(t + n) % len(keys)]
            store.is_exist(key)
            store.get_replica_desc(key)
            n += 2
        counts[t] = n

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    cpu0, t0 = cpu_s(pid), time.monotonic()
    for p in pool:
        p.start()
    time.sleep(seconds)
    stop.set()
    for p in pool:
        p.join()
    elapsed, cpu = time.monotonic() - t0, cpu_s(pid) - cpu0
    calls = sum(counts)
    return calls / elapsed, cpu / max(calls, 1) * 1e6


def one(kind, threads, seconds, bin_dir):
    proc, master, metadata = start(kind, bin_dir)
    try:
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", metadata, 64 << 20, 16 << 20, "tcp", "", master) == 0
        for i in range(16):
            assert s.put(f"bench{i}", b"v" * 4096) == 0
        rate, us = measure(s, threads, seconds, proc.pid)
        s.close()
        return rate, us
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--threads", default="1,64")
    ap.add_argument("--bin-dir", default=str(ROOT / "zig-out" / "bin"))
    a = ap.parse_args()
    bin_dir = pathlib.Path(a.bin_dir)
    results = {}
    for r in range(a.rounds):
        for threads in [int(x) for x in a.threads.split(",")]:
            order = ["mooncake_master", "crescentd"]
            if r % 2:
                order.reverse()
            for kind in order:
                rate, us = one(kind, threads, a.seconds, bin_dir)
                results.setdefault((threads, kind), []).append((rate, us))
                print(f"round {r} threads {threads} {kind}: {rate:.0f} calls/s, "
                      f"server {us:.1f} us CPU/call", flush=True)
    print(f"load average at the end: {os.getloadavg()}")
    print("| clients (threads) | server | calls/s (median) | server CPU per call (median) |")
    print("|---:|---|---:|---:|")
    for (threads, kind), v in sorted(results.items()):
        print(f"| {threads} | {kind} | {statistics.median(x[0] for x in v):.0f} | "
              f"{statistics.median(x[1] for x in v):.1f} us |")


if __name__ == "__main__":
    main()
