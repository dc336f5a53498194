"""The shared file tier's targets (docs/tiers.md; bench/RESULTS.md, "File tier"):

  get: cr_client_get_into of 1 MiB objects whose only replica is their file
  (the memory replica's server has unmounted), against a plain pread of the
  same number of bytes from the same files into the same buffer (the
  ceiling: no RPC, no header, no checksum), both from Python through ctypes;
  put: crescent-bench --workload put-bytes (1 MiB values, libcrescent's
  cr_client_put) against a crescentd with the file tier and
  CRESCENT_ROOT_FS_DIR set, and against one without (memory only).

Rounds interleave the cases; medians are printed.  It starts its own crescentd
and crescent-store (zig-out/bin, loopback, free ports) with the file tier in a
temporary directory (--dir to put it on another file system).

    /usr/bin/python3 bench/file_tier.py [--rounds 7] [--objects 64] [--put-count 200] [--dir /tmp]
        [--rpc shm|zmq] [--cases get,put] [--put-rounds N]

--cases picks what runs (both by default); --put-rounds the number of put
rounds of each kind (default max(3, rounds / 2)).

--rpc picks the clients' endpoint at crescentd: shm (its same-host
shared-memory endpoint, shm://@crescent-rpc/PORT, the default here) or zmq
(tcp://127.0.0.1:PORT); the ceilings make no RPC, so the ratio counts it.
"""
import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BIN = os.environ.get("CRESCENT_BIN_DIR", os.path.join(ROOT, "zig-out", "bin"))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN, "..", "lib", "libcrescent.so"))
MIB = 1 << 20
RPC_KIND = "shm"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(http, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10) as r:
        m = re.search(rf"^{name} (\d+)$", r.read().decode(), re.M)
    return int(m.group(1)) if m else None


def wait(cond, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


class Cluster:
    """crescentd (no local segment) and one crescent-store of `segment` bytes."""

    def __init__(self, root, segment, *extra):
        self.rpc_port, self.http = free_port(), free_port()
        self.rpc = f"tcp://127.0.0.1:{self.rpc_port}"
        # What clients dial: ZMQ, or the same-host shm endpoint crescentd opens
        # by default under the --rpc-address port (docs/rpc-shm.md).
        self.client_rpc = self.rpc if RPC_KIND == "zmq" else f"shm://@crescent-rpc/{self.rpc_port}"
        self.json_path = os.path.join(tempfile.gettempdir(), f"file-tier-bench-{self.http}.json")
        args = [os.path.join(BIN, "crescentd"), "--rpc-address", self.rpc, "--http-address",
                f"127.0.0.1:{self.http}", "--local-segment-size", "0", "--no-pin",
                "--rpc-tcp-address", "", "--mooncake-rpc-address", "off",
                "--event-address", f"tcp://127.0.0.1:{free_port()}",
                "--replay-address", f"tcp://127.0.0.1:{free_port()}", *extra]
        if root is not None:
            args.append(f"--root_fs_dir={root}")
        self.log_path = self.json_path + ".log"  # crescentd's log, shown when a round fails
        self.log = open(self.log_path, "wb")
        self.d = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        wait(lambda: self._up(), "crescentd")
        self.s = subprocess.Popen(
            [os.path.join(BIN, "crescent-store"), "--master", self.rpc, "--segment-name", "seg0",
             "--segment-size", str(segment), "--no-pin"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait(lambda: metric(self.http, "crescent_segments_segments") == 1, "segment")

    def _up(self):
        try:
            return metric(self.http, "crescent_segments_segments") is not None
        except OSError:
            return False

    def stop_store(self):
        self.s.send_signal(signal.SIGTERM)
        self.s.wait(timeout=30)
        wait(lambda: metric(self.http, "crescent_segments_segments") == 0, "unmount")

    def close(self):
        for p in (self.s, self.d):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)


def get_case(root, objects, rounds):
    from crescent import Store
    c = Cluster(root, 4 * objects * MIB)
    os.environ["CRESCENT_ROOT_FS_DIR"] = root
    master = c.client_rpc
    st = Store()
    assert st.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    value = os.urandom(MIB)
    keys = [f"obj{i}" for i in range(objects)]
    for k in keys:
        st.put(k, value)
    st.close()  # flushes the writer and reports
    c.stop_store()  # memory replicas gone: every get reads its file
    assert metric(c.http, "crescent_segments_file_tier_replicas") == objects
    files = []
    for dirpath, _, names in os.walk(os.path.join(root, "mooncake_cluster")):
        files += [os.path.join(dirpath, n) for n in names if n.endswith(".obj")]
    assert len(files) == objects
    st = Store()
    assert st.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    buf = bytearray(MIB)
    fds = [os.open(f, os.O_RDONLY) for f in files]

    def tier():
        t = time.perf_counter()
        for k in keys:
            st.get_into(k, buf)
        return objects / (time.perf_counter() - t)

    def pread():
        t = time.perf_counter()
        for fd in fds:
            os.preadv(fd, [buf], 0)
        return objects / (time.perf_counter() - t)

    def rpc_only():
        t = time.perf_counter()
        for k in keys:
            st.get_replica_list(k)
        return objects / (time.perf_counter() - t)

    def open_pread():
        t = time.perf_counter()
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            os.preadv(fd, [buf], 0)
            os.close(fd)
        return objects / (time.perf_counter() - t)

    assert bytes(st.get("obj0")) == value
    res = {"tier": [], "pread": [], "open_pread": [], "rpc": []}
    for _ in range(rounds):
        res["tier"].append(tier())
        res["pread"].append(pread())
        res["open_pread"].append(open_pread())
        res["rpc"].append(rpc_only())
    for fd in fds:
        os.close(fd)
    st.close()
    c.close()
    return {k: statistics.median(v) for k, v in res.items()}


def put_round(root, count):
    """ops/s of put-bytes, 1 MiB values, with the file tier (root) or without (None)."""
    c = Cluster(root, 512 * MIB)
    env = dict(os.environ)
    env.pop("CRESCENT_ROOT_FS_DIR", None)
    if root is not None:
        env["CRESCENT_ROOT_FS_DIR"] = root
    p = subprocess.run([os.path.join(BIN, "crescent-bench"), "--rpc", c.client_rpc, "--workload",
                        "put-bytes", "--object-bytes", str(MIB), "--count", str(count),
                        "--warmup", "0.5", "--json", c.json_path], capture_output=True,
                       text=True, env=env, timeout=120)
    if p.returncode != 0:  # say why, and let the caller retry
        c.close()
        print(f"crescent-bench failed ({p.returncode}): {p.stdout[-300:]} {p.stderr[-300:]}",
              flush=True)
        return None, 0
    with open(c.json_path) as f:
        ops = json.load(f)["throughput_ops_s"]
    try:
        reported = metric(c.http, "crescent_segments_file_tier_reported_total") or 0
        # persists the client skipped because its writer was behind (docs/tiers.md)
        skipped = metric(c.http, "crescent_segments_file_tier_persist_skipped_busy_total") or 0
        reported = f"{reported} recorded, {skipped} skipped busy" if root is not None else reported
    except OSError:  # crescentd gone after the measured puts: say so, keep the number
        reported = -1
        with open(c.log_path, "rb") as f:
            print("crescentd stopped during the round's cleanup:",
                  f.read().decode(errors="replace").splitlines()[-1], flush=True)
    c.close()
    if root is not None:
        shutil.rmtree(os.path.join(root, "mooncake_cluster"), ignore_errors=True)
    return ops, reported


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--objects", type=int, default=64)
    ap.add_argument("--put-count", type=int, default=200)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rpc", choices=("shm", "zmq"), default="shm")
    ap.add_argument("--cases", default="get,put")
    ap.add_argument("--put-rounds", type=int, default=None)
    a = ap.parse_args()
    cases = a.cases.split(",")
    global RPC_KIND
    RPC_KIND = a.rpc
    base = tempfile.mkdtemp(prefix="crescent-file-tier-", dir=a.dir)
    try:
        print(f"load: {os.getloadavg()}; clients' rpc: {RPC_KIND}", flush=True)
        if "get" in cases:
            os.makedirs(os.path.join(base, "get"))
            g = get_case(os.path.join(base, "get"), a.objects, a.rounds)
            print(f"get 1 MiB from the file tier: {g['tier']:.0f} ops/s; pread (open fd): "
                  f"{g['pread']:.0f} ops/s -> {100 * g['tier'] / g['pread']:.0f}%; "
                  f"open+pread+close: {g['open_pread']:.0f} ops/s -> "
                  f"{100 * g['tier'] / g['open_pread']:.0f}%; GetReplicaList alone: "
                  f"{g['rpc']:.0f} ops/s", flush=True)
        if "put" not in cases:
            return
        os.makedirs(os.path.join(base, "put"))
        on, off, reported = [], [], []
        for _ in range(a.put_rounds or max(3, a.rounds // 2)):
            ops, _ = put_round(None, a.put_count)
            ops_on, rep = put_round(os.path.join(base, "put"), a.put_count)
            if ops is None or ops_on is None:
                continue
            off.append(ops)
            on.append(ops_on)
            reported.append(rep)
            print(f"  round: memory only {ops:.0f} ops/s, file tier on {ops_on:.0f} ops/s "
                  f"({ops_on / ops:.2f}); {rep}; load {os.getloadavg()[0]:.1f}", flush=True)
        m_on, m_off = statistics.median(on), statistics.median(off)
        print(f"put-bytes 1 MiB: file tier on {m_on:.0f} ops/s, memory only {m_off:.0f} ops/s "
              f"-> {100 * m_on / m_off:.0f}%; files recorded per run: {reported}", flush=True)
        print(f"load: {os.getloadavg()}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
