#!/usr/bin/env python3
"""Failover under a put load (issue 25: "failover within 2 x lease TTL"):
three crescentd with --ha etcd on one real etcd (Debian's, on loopback), each
--durability sync on a state directory of its own and streaming the leader's
log (--replication sync), a crescent-store whose segment holds the bytes, and
a Python client naming the cluster as etcd://.  The client puts 4 KiB values
in a loop; the leader gets SIGKILL; measured from the kill:

  - elected: the first /health poll (every 20 ms) in which a standby says it
    leads, with a term above the old one;
  - first put: the first put sent through the etcd:// client after the kill
    that succeeded, when it was answered (it found the new leader, the store
    server had remounted there);
  - floor: no standby can be elected before the old leader's etcd lease
    ends, TTL after its last renewal (a leader renews every TTL/3: 2/3 TTL to
    TTL after a kill).  Printed: what the leader's /health said it could
    still write for just before the kill (writable_for_ms; the leader stops
    writing before its lease ends, so the lease had at least that left).

Rounds per TTL, each on a fresh cluster; medians.  The machine's load
(`uptime`) is printed beside each round.

    CRESCENT_BIN_DIR=zig-out/bin python3 bench/failover.py [ROUNDS] [TTL ...]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "integration"))
from conftest import binary, free_port, wait_for  # noqa: E402
from test_ha import Etcd, Node, leader_of  # noqa: E402
from crescent import CrescentError, Store  # noqa: E402  (test_ha set its path)

def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def writable_left_s(leader):
    """Seconds the leader may still write on its lease (/health's
    writable_for_ms): it stops before the lease ends, so the etcd lease a
    standby must wait out has at least this much left."""
    return leader.ha()["writable_for_ms"] / 1000.0


def one_round(ttl, work):
    e = Etcd(work, 1)
    cluster, store, client = [], None, None
    try:
        for i in range(3):
            cluster.append(Node(work, f"n{i}", e.endpoints(), "--state-dir",
                                str(work / f"state{i}"), "--durability", "sync",
                                "--replication", "sync", "--replication-address",
                                f"127.0.0.1:{free_port()}", ttl=ttl))
        leader, term = wait_for(lambda: leader_of(cluster), "a leader", timeout=30)
        master = f"etcd://{e.endpoints()}"
        store_log = open(work / "store.log", "wb")
        store = subprocess.Popen(
            [binary("crescent-store"), "--master", master, "--segment-name", "seg0",
             "--segment-size", str(64 << 20), "--no-pin", "--ping-interval-ms", "200",
             "--data-address", f"127.0.0.1:{free_port()}"],
            stdout=store_log, stderr=subprocess.STDOUT)
        client = Store()
        client.setup(master_server_address=master, timeout_ms=3000)
        wait_for(lambda: all(n.ha_all().get("connected") for n in cluster if n is not leader),
                 "standbys streaming", timeout=60)
        value = os.urandom(4096)
        ok, failed, stop = [], [], threading.Event()

        def put_loop():
            i = 0
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    client.put(f"k{i}", value)
                    ok.append((t0, time.monotonic()))
                except CrescentError as err:
                    failed.append((t0, time.monotonic(), err.name))
                    time.sleep(0.01)
                i += 1

        worker = threading.Thread(target=put_loop)
        worker.start()
        wait_for(lambda: len(ok) >= 50, "puts before the kill", timeout=60)
        left = writable_left_s(leader)
        killed = time.monotonic()
        leader.proc.kill()
        leader.proc.wait(timeout=10)
        elected = None
        while elected is None and time.monotonic() - killed < 10 * ttl:
            found = leader_of(cluster, exclude=(leader,))
            if found is not None and found[1] > term:
                elected = time.monotonic() - killed
            else:
                time.sleep(0.02)
        first = wait_for(lambda: next((t1 for t0, t1 in ok if t0 > killed), None),
                         "a put on the new leader", timeout=60) - killed
        stop.set()
        worker.join(timeout=60)
        if os.environ.get("FAILOVER_VERBOSE"):
            for t0, t1, name in failed:
                print(f"  failed put: sent {t0 - killed:+.3f} s, answered {t1 - killed:+.3f} s: {name}")
        return left, elected, first
    finally:
        if client is not None:
            client.close()
        if store is not None:
            store.kill()
            store.wait(timeout=20)
        for n in cluster:
            n.stop()
        e.stop()


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    ttls = [int(t) for t in sys.argv[2:]] or [2, 5]
    print(f"# {os.cpu_count()} CPUs; load {load()}")
    for ttl in ttls:
        firsts, elects = [], []
        for r in range(rounds):
            work = Path(tempfile.mkdtemp(prefix="failover-"))
            try:
                left, elected, first = one_round(ttl, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            firsts.append(first)
            elects.append(elected if elected is not None else float("inf"))
            print(f"TTL {ttl} s round {r + 1} (load {load()}): leader writable for "
                  f"{left:.2f} s more at the kill; new leader after {elects[-1]:.2f} s; first put after "
                  f"{first:.2f} s ({first / ttl:.2f} x TTL)", flush=True)
        print(f"TTL {ttl} s: median of {rounds}: new leader {statistics.median(elects):.2f} s, "
              f"first put {statistics.median(firsts):.2f} s = "
              f"{statistics.median(firsts) / ttl:.2f} x TTL (target <= 2 x TTL)", flush=True)


if __name__ == "__main__":
    main()
