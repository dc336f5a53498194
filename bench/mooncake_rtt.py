#!/usr/bin/python3
"""coro_rpc round trips against mooncake_master, crescentd and a bare echo
(the machine's ceiling), interleaved in one run (bench/RESULTS.md, "Mooncake's
endpoint at one client").

  /usr/bin/python3 bench/mooncake_rtt.py [--rounds 5] [--seconds 3] [--conns 1,64]
      [--rtt zig-out/bench/coro_rtt] [--bin-dir zig-out/bin]
      [--compare-bin-dir DIR] [--compare-args 'ARGS']

--compare-bin-dir / --compare-args add a fourth server to every round,
"crescentd-b": another build, or the same one with other flags (e.g.
'--spin-adaptive false'), so a change is measured against its baseline in
the same run.

bench/coro_rtt.c is the client (C, one connection per thread, one call at a
time per connection, as Mooncake's synchronous client) and the echo (one
thread, epoll, answers every request at once with ServiceReady's result).  For
each round, connection count and call (ServiceReady: framing only, answered
by the endpoint; ExistKey of a missing key: through crescent's intake and
store), each server in turn, the order rotating each round: calls/s, p50 and
p99, and the server's CPU per call (utime + stime of its process over the
window / calls).  Medians over rounds, and each server's ratio to the echo
and crescentd's to mooncake_master."""
import argparse
import os
import pathlib
import re
import socket
import statistics
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
MC = pathlib.Path(os.environ.get("CRESCENT_MOONCAKE_DIR") or ROOT.parent / "shared" / "mooncake")
TICK = os.sysconf("SC_CLK_TCK")
CALLS = {  # name: (function id, struct_pack arguments), from tests/fixtures/mooncake/frames.jsonl
    "ServiceReady": ("7b81bb56", ""),
    "ExistKey": ("89385f09", "d91ef97c04fd800c800cff00046e6f70650764656661756c74"),
}


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_port(port, timeout=60):
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


def start(kind, a):
    p = free_ports(8)
    if kind == "echo":
        args = [a.rtt, "echo", f"127.0.0.1:{p[0]}"]
    elif kind == "mooncake_master":
        args = [str(MC / "bin" / "mooncake_master"), "--rpc_address", "127.0.0.1",
                "--rpc_port", str(p[0]), "--metrics_port", "0"]
    else:
        bin_dir = a.compare_bin_dir or a.bin_dir if kind == "crescentd-b" else a.bin_dir
        extra = a.compare_args.split() if kind == "crescentd-b" else []
        args = [str(pathlib.Path(bin_dir) / "crescentd"), *extra, "--no-pin", "--metrics-port", "0",
                "--local-segment-size", "0", "--rpc_port", str(p[0]),
                "--http-address", f"127.0.0.1:{p[1]}", "--rpc-address", f"tcp://127.0.0.1:{p[2]}",
                "--rpc-tcp-address", f"127.0.0.1:{p[3]}", "--rpc-shm-path", "off",
                "--event-address", f"tcp://127.0.0.1:{p[4]}",
                "--replay-address", f"tcp://127.0.0.1:{p[5]}"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(p[0])
    return proc, p[0]


LINE = re.compile(r"([\d.]+) ops/s\s+p50\s+([\d.]+) us\s+p99\s+([\d.]+) us")


def one(kind, call, conns, a):
    proc, port = start(kind, a)
    try:
        fid, body = CALLS[call]
        cpu0 = cpu_s(proc.pid)
        out = subprocess.run([a.rtt, "client", f"127.0.0.1:{port}", str(a.seconds), str(conns),
                              fid, body], capture_output=True, text=True, timeout=a.seconds + 60)
        cpu = cpu_s(proc.pid) - cpu0
        m = LINE.search(out.stdout)
        if m is None:
            raise SystemExit(f"{kind}: {out.stdout}{out.stderr}")
        rate, p50, p99 = (float(x) for x in m.groups())
        return rate, p50, p99, cpu / max(rate * a.seconds, 1) * 1e6
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--conns", default="1,64")
    ap.add_argument("--calls", default="ServiceReady,ExistKey")
    ap.add_argument("--rtt", default=str(ROOT / "zig-out" / "bench" / "coro_rtt"))
    ap.add_argument("--bin-dir", default=str(ROOT / "zig-out" / "bin"))
    ap.add_argument("--compare-bin-dir", default="")
    ap.add_argument("--compare-args", default="")
    a = ap.parse_args()
    kinds = ["echo", "mooncake_master", "crescentd"]
    if a.compare_bin_dir or a.compare_args:
        kinds.append("crescentd-b")
    results = {}
    print(f"load average at the start: {os.getloadavg()}", flush=True)
    for r in range(a.rounds):
        for conns in [int(x) for x in a.conns.split(",")]:
            for call in a.calls.split(","):
                order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
                for kind in order:
                    v = one(kind, call, conns, a)
                    results.setdefault((call, conns, kind), []).append(v)
                    print(f"round {r} {call} conns {conns} {kind}: {v[0]:.0f} calls/s "
                          f"p50 {v[1]:.1f} us p99 {v[2]:.1f} us, server {v[3]:.1f} us CPU/call",
                          flush=True)
    print(f"load average at the end: {os.getloadavg()}")
    print("| call | conns | server | calls/s | p50 | p99 | server CPU/call | "
          "calls/s vs echo | vs mooncake_master |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for call in a.calls.split(","):
        for conns in [int(x) for x in a.conns.split(",")]:
            med = {k: [statistics.median(x[i] for x in results[(call, conns, k)])
                       for i in range(4)] for k in kinds}
            for k in kinds:
                rate, p50, p99, us = med[k]
                vs_mc = (f"{rate / med['mooncake_master'][0]:.2f}x"
                         if k.startswith("crescentd") else "")
                print(f"| {call} | {conns} | {k} | {rate:.0f} | {p50:.1f} us | {p99:.1f} us | "
                      f"{us:.1f} us | {rate / med['echo'][0]:.2f}x | {vs_mc} |")


if __name__ == "__main__":
    main()
