#!/usr/bin/env python3
"""What data-plane capabilities cost end to end (issue 28): libcrescent Put and
Get rates against crescentd's local segment, in three modes, interleaved
rounds, medians:

  base      a build without capabilities (--base-bin, e.g. the branch point's
            zig-out/bin): no key, nothing signed, sent or checked
  caps      this build, the flag off: the master signs every handle, libcrescent
            sends the capability, the server checks it (the default)
  required  this build, --data-require-capability true

Each case runs one client process (this package's Python client over the
mode's libcrescent) doing Puts of fresh keys for --seconds, then Gets of those
keys for --seconds, values of --size bytes, over shm (same host, the default)
or tcp (--tcp: crescentd --data-no-shm).  A Put is PutStart (signs a write
capability), the transfer (checked) and PutEnd; a Get is GetReplicaList (signs
a read capability) and the transfer (checked; over shm only the first map
request of the segment is, then the client copies itself).

    python3 bench/data_capability.py --base-bin /path/to/base/zig-out/bin \\
        --bin zig-out/bin --rounds 5 --seconds 2 --size 4096
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import os, sys, time, json
sys.path.insert(0, sys.argv[1])
from crescent import Store
port, seconds, size = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = Store()
s.setup(master_server_address=f"127.0.0.1:{port}", timeout_ms=20000)
value = os.urandom(size)
keys = []
end = time.monotonic() + seconds
t0 = time.monotonic()
while time.monotonic() < end:
    k = f"k{len(keys)}"
    s.put(k, value)
    keys.append(k)
puts = len(keys) / (time.monotonic() - t0)
gets = 0
end = time.monotonic() + seconds
t0 = time.monotonic()
while time.monotonic() < end:
    assert len(s.get(keys[gets % len(keys)])) == size
    gets += 1
print(json.dumps({"put": puts, "get": gets / (time.monotonic() - t0)}))
s.close()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(bin_dir, python_dir, extra, seconds, size, tcp):
    ports = {f: free_port() for f in ("rpc", "tcp", "event", "replay", "http", "mc", "metrics")}
    args = [os.path.join(bin_dir, "crescentd"),
            "--rpc-address", f"tcp://127.0.0.1:{ports['rpc']}",
            "--rpc-tcp-address", f"127.0.0.1:{ports['tcp']}",
            "--event-address", f"tcp://127.0.0.1:{ports['event']}",
            "--replay-address", f"tcp://127.0.0.1:{ports['replay']}",
            "--http-address", f"127.0.0.1:{ports['http']}",
            "--mooncake-rpc-address", f"127.0.0.1:{ports['mc']}",
            "--metrics-port", str(ports["metrics"]),
            "--local-segment-size", "512M", *extra]
    if tcp:
        args += ["--data-no-shm", "true"]
    with tempfile.TemporaryFile() as log:
        d = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        try:
            env = dict(os.environ, CRESCENT_LIB=os.path.join(bin_dir, "..", "lib",
                                                           "libcrescent.so"))
            deadline = time.monotonic() + 30
            while True:
                try:
                    out = subprocess.run([sys.executable, "-c", CHILD, python_dir,
                                          str(ports["rpc"]), str(seconds), str(size)],
                                         env=env, capture_output=True, timeout=120 + seconds * 2)
                except subprocess.TimeoutExpired:
                    out = None
                if out is not None and out.returncode == 0:
                    return json.loads(out.stdout)
                if time.monotonic() > deadline:
                    log.seek(0)
                    raise SystemExit(f"case failed: {out.stderr.decode() if out else 'timeout'}"
                                     f"\ncrescentd: {log.read().decode()[-2000:]}")
                time.sleep(0.5)  # crescentd not up yet
        finally:
            d.send_signal(signal.SIGTERM)
            d.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "zig-out", "bin"))
    ap.add_argument("--python", default=os.path.join(HERE, "..", "python"))
    ap.add_argument("--base-bin", help="a build without capabilities (its zig-out/bin)")
    ap.add_argument("--base-python", help="that build's python/ (default: --python)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--tcp", action="store_true", help="crescentd --data-no-shm true")
    a = ap.parse_args()
    modes = [("caps", a.bin, a.python, []),
             ("required", a.bin, a.python, ["--data-require-capability", "true"])]
    if a.base_bin:
        modes.insert(0, ("base", a.base_bin, a.base_python or a.python, []))
    results = {m[0]: {"put": [], "get": []} for m in modes}
    print(f"load before: {os.getloadavg()}", flush=True)
    for r in range(a.rounds):
        order = modes if r % 2 == 0 else list(reversed(modes))
        for name, bin_dir, py, extra in order:
            res = run_case(bin_dir, py, extra, a.seconds, a.size, a.tcp)
            for op in ("put", "get"):
                results[name][op].append(res[op])
            print(f"round {r + 1} {name}: put {res['put']:.0f}/s get {res['get']:.0f}/s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"load after: {os.getloadavg()}")
    ref = "base" if a.base_bin else "caps"
    print(f"\n| mode | put/s (median) | vs {ref} | get/s (median) | vs {ref} |")
    print("|---|---:|---:|---:|---:|")
    med = {m: {op: statistics.median(v) for op, v in ops.items()} for m, ops in results.items()}
    for name in results:
        print(f"| {name} | {med[name]['put']:,.0f} | {med[name]['put'] / med[ref]['put']:.0%} | "
              f"{med[name]['get']:,.0f} | {med[name]['get'] / med[ref]['get']:.0%} |")


if __name__ == "__main__":
    main()
