"""The SSD tier's churn target (issue 26; docs/tiers.md, "Local SSD tier"):
a working set 4x the memory pool, put once through the Python client
(libcrescent's cr_client_put), then read back in random order.  With the
store server's SSD tier, memory eviction offloads what it picks (local_disk
replicas) and the reads find them there; memory-only, eviction drops them.
The hit rate is the share of gets that returned the object's bytes (the
client checks each against the put's XXH3).

Then a hot phase: --hot objects the churn left on the SSD only are read
--rounds times each, round by round (waiting between rounds until no task
is in flight); "memory reads" counts the hot reads a memory replica served
(libcrescent's per-tier read counts).  With promotion (crescentd
--promotion-hits 2, the default) the second round's reads copy them back
and later rounds read memory; with --promotion-hits 0 every round reads the
SSD.  Both SSD cases evict a fifth of the pool per pass
(--eviction-ratio 0.2, passed to crescentd; 0.05 is crescentd's default),
so the settled pool has room to promote into.

Each case starts its own crescentd (no local segment) and one crescent-store
(zig-out/bin, loopback, free ports) with a --segment MiB segment, with and
without --ssd-dir in a temporary directory.  A put refused for room while
offloads are in flight is retried (counted).  Not a timing benchmark: the
hit rate does not depend on the machine's load; the wall times printed do.

    /usr/bin/python3 bench/ssd_churn.py [--segment-mib 64] [--factor 4] [--object-kib 1024]
                                        [--hot 8] [--rounds 4] [--eviction-ratio 0.2]
"""
import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BIN = os.environ.get("CRESCENT_BIN_DIR", os.path.join(ROOT, "zig-out", "bin"))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN, "..", "lib", "libcrescent.so"))
os.environ.pop("CRESCENT_ROOT_FS_DIR", None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(http, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10) as r:
        m = re.search(rf"^{name} (\d+)$", r.read().decode(), re.M)
    return int(m.group(1)) if m else None


def wait(cond, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def value_of(i, size):
    """Object i's bytes: its index, repeated (distinct per object, cheap)."""
    return (i.to_bytes(8, "little") * (size // 8 + 1))[:size]


def tiers_by_key(http):
    import json
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/api/v1/objects?limit=1000",
                                timeout=30) as r:
        listing = json.loads(r.read())
    return {o["key"]: sorted(rep["tier"] for rep in o["replicas"]) for o in listing["objects"]}


def tier_reads(st):
    lat = st.read_latency()
    return lat["memory"]["count"], lat["local_disk"]["count"]


def hot_phase(st, http, hot, rounds, size):
    """Reads each hot key `rounds` times; returns (memory reads, SSD reads, hits)."""
    mem0, _ = tier_reads(st)
    hits = 0
    for _ in range(rounds):
        for i in hot:
            try:
                hits += st.get(f"k{i}") == value_of(i, size)
            except Exception:
                pass
        time.sleep(0.3)  # a tick of crescentd's: promotions begun
        wait(lambda: metric(http, "crescent_tasks_in_flight") == 0, "promotions settled")
    mem1, _ = tier_reads(st)
    # libcrescent does not count local_disk reads in its per-tier histogram
    # yet: a hot read that returned the bytes and was not a memory read was
    # the SSD's.
    return mem1 - mem0, hits - (mem1 - mem0), hits


def run_case(segment, objects, size, ssd_dir, promotion_hits=2, hot_count=8, rounds=4,
             eviction_ratio=0.2):
    from crescent import Store
    http, rpc_port = free_port(), free_port()
    d = subprocess.Popen(
        [os.path.join(BIN, "crescentd"), "--rpc-address", f"tcp://127.0.0.1:{rpc_port}",
         "--http-address", f"127.0.0.1:{http}", "--local-segment-size", "0", "--no-pin",
         "--rpc-tcp-address", "", "--mooncake-rpc-address", "off",
         "--event-address", f"tcp://127.0.0.1:{free_port()}",
         "--replay-address", f"tcp://127.0.0.1:{free_port()}",
         "--promotion-hits", str(promotion_hits)]
        + (["--eviction-ratio", str(eviction_ratio)] if ssd_dir is not None else []),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store_args = [os.path.join(BIN, "crescent-store"), "--master", f"tcp://127.0.0.1:{rpc_port}",
                  "--segment-name", "seg0", "--segment-size", str(segment), "--no-pin",
                  "--ping-interval-ms", "100"]
    if ssd_dir is not None:
        store_args += ["--ssd-dir", ssd_dir, "--ssd-size", str(2 * objects * (size + 8192))]
    s = None
    try:
        wait(lambda: _up(http), "crescentd")
        s = subprocess.Popen(store_args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait(lambda: metric(http, "crescent_segments_segments") == 1, "segment")
        st = Store()
        assert st.setup("localhost", "", 0, 0, "tcp", "", f"127.0.0.1:{rpc_port}") == 0
        retries, failed_puts = 0, 0
        t0 = time.monotonic()
        for i in range(objects):
            deadline = time.monotonic() + 30
            while True:
                try:
                    st.put(f"k{i}", value_of(i, size))
                    break
                except Exception:  # no room while offloads are in flight
                    if time.monotonic() > deadline:
                        failed_puts += 1
                        break
                    retries += 1
                    time.sleep(0.02)
        put_s = time.monotonic() - t0
        wait(lambda: metric(http, "crescent_tasks_in_flight") == 0, "offloads settled")
        order = list(range(objects))
        random.Random(7).shuffle(order)
        hits = 0
        t0 = time.monotonic()
        for i in order:
            try:
                hits += st.get(f"k{i}") == value_of(i, size)
            except Exception:
                pass
        get_s = time.monotonic() - t0
        hot, hot_mem, hot_ssd, hot_hits = [], 0, 0, 0
        if ssd_dir is not None:
            tiers = tiers_by_key(http)  # by the admin view: a GetReplicaList would count a read
            hot = [i for i in range(objects) if tiers.get(f"k{i}") == ["local_disk"]]
            hot = hot[:hot_count]
            hot_mem, hot_ssd, hot_hits = hot_phase(st, http, hot, rounds, size)
        out = {"hits": hits, "gets": objects, "put_retries": retries, "failed_puts": failed_puts,
               "put_s": put_s, "get_s": get_s,
               "offloads": metric(http, "crescent_segments_offloads_done_total"),
               "local_disk": metric(http, "crescent_segments_local_disk_replicas"),
               "objects": metric(http, "crescent_segments_objects"),
               "hot_reads": len(hot) * rounds, "hot_hits": hot_hits, "hot_memory": hot_mem,
               "hot_ssd": hot_ssd,
               "promotions": metric(http, "crescent_segments_promotions_done_total"),
               "no_room": metric(http, "crescent_segments_promotions_no_room_total")}
        st.close()
        return out
    finally:
        for p in (s, d):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)


def _up(http):
    try:
        return metric(http, "crescent_segments_segments") is not None
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segment-mib", type=int, default=64)
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--object-kib", type=int, default=1024)
    ap.add_argument("--hot", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--eviction-ratio", type=float, default=0.2,
                    help="crescentd --eviction-ratio of the SSD cases (its default: 0.05)")
    a = ap.parse_args()
    segment, size = a.segment_mib << 20, a.object_kib << 10
    objects = a.factor * segment // size
    print(f"working set {objects} x {a.object_kib} KiB = {a.factor}x a {a.segment_mib} MiB "
          f"segment; SSD cases --eviction-ratio {a.eviction_ratio}; load {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = (("memory only", None, 2), ("SSD, no promotion", os.path.join(tmp, "ssd0"), 0),
                 ("SSD, promotion", os.path.join(tmp, "ssd2"), 2))
        for name, ssd, hits in cases:
            r = run_case(segment, objects, size, ssd, hits, a.hot, a.rounds, a.eviction_ratio)
            print(f"{name:18s} hit rate {r['hits'] / r['gets']:.3f} ({r['hits']}/{r['gets']}); "
                  f"objects kept {r['objects']}, offloads {r['offloads']}, local_disk "
                  f"{r['local_disk']}; put retries {r['put_retries']}, failed puts "
                  f"{r['failed_puts']}; puts {r['put_s']:.1f} s, gets {r['get_s']:.1f} s")
            if ssd is not None:
                print(f"{'':18s} hot phase: {r['hot_reads']} reads, {r['hot_hits']} hits, "
                      f"memory reads {r['hot_memory']}, SSD reads {r['hot_ssd']}; promotions "
                      f"{r['promotions']}, no room {r['no_room']}")


if __name__ == "__main__":
    main()
