"""Issue 26's get targets, hot and cold: a whole Get of a 1 MiB object from
the SSD tier and from the shared file tier, against a plain pread of a
1 MiB file in the same directory (docs/tiers.md; bench/RESULTS.md, "Gets
from the tiers, hot and cold").

Two clusters run side by side, each its own crescentd (no local segment)
and one crescent-store (zig-out/bin, loopback, free ports):

  ssd   crescent-store --ssd-dir DIR/ssd with a small segment; --objects
        1 MiB objects are put past it, memory eviction offloads them, and
        the ones whose only replica is `local_disk` are read (crescentd
        --promotion-hits 0: they stay there).  A Get is GetReplicaList, a
        file request on the store's shm socket (same host: the server checks
        the capability, opens the file, checks its header and passes the
        descriptor), then the client's preads of header and value and its
        XXH3 check.
  ssd-tcp  the same with crescent-store --no-shm: the Get's read is a
        transfer-layer READ of `seg0#ssd` over loopback tcp (the server opens
        the file, checks header and XXH3, sends), then libcrescent's XXH3.
  file  crescentd --root_fs_dir DIR/file; objects put, flushed, then the
        store server stopped, so each object's only replica is its file.  A
        Get is GetReplicaList, then the client opens the file, reads it and
        checks header and XXH3.

Each Get is the Python client's Store.get_into (libcrescent's
cr_client_get_into) into one 1 MiB buffer; the ceiling is os.preadv of a
plain 1 MiB file written beside the tier's files (same directory, same
file system), on an open descriptor, into the same buffer.  Two cache
states, interleaved within every round:

  hot   nothing done between ops: every file sits in the page cache, so
        the pread is a ~25 us copy from the cache;
  cold  posix_fadvise(POSIX_FADV_DONTNEED) of the tier's files and of the
        plain file before every op (not timed), so each op reads the device.

Each op is timed alone; a round's median per op is kept, and the medians
of the rounds are printed with the ratios of throughput (pread time / Get
time).  Also the GetReplicaList RPC alone (the master's round trip, which a
bare pread does not make).  Run it at `nice -n -10` on a shared machine.

    /usr/bin/python3 bench/tier_get.py [--rounds 9] [--ops 16] [--dir DIR] [--rpc shm|zmq]
        [--cases ssd,ssd-tcp,file]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import file_tier  # noqa: E402  (its cluster helpers; sets CRESCENT_LIB)
from file_tier import BIN, MIB, free_port, metric, wait  # noqa: E402

DONTNEED = os.POSIX_FADV_DONTNEED


def daemon(http, rpc_port, *extra):
    args = [os.path.join(BIN, "crescentd"), "--rpc-address", f"tcp://127.0.0.1:{rpc_port}",
            "--http-address", f"127.0.0.1:{http}", "--local-segment-size", "0", "--no-pin",
            "--rpc-tcp-address", "", "--mooncake-rpc-address", "off",
            "--event-address", f"tcp://127.0.0.1:{free_port()}",
            "--replay-address", f"tcp://127.0.0.1:{free_port()}", *extra]
    d = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up():
        try:
            return metric(http, "crescent_segments_segments") is not None
        except OSError:
            return False
    wait(up, "crescentd")
    return d


def store(rpc_port, segment, *extra):
    return subprocess.Popen(
        [os.path.join(BIN, "crescent-store"), "--master", f"tcp://127.0.0.1:{rpc_port}",
         "--segment-name", "seg0", "--segment-size", str(segment), "--no-pin",
         "--ping-interval-ms", "100", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def client_rpc(rpc_port):
    return (f"tcp://127.0.0.1:{rpc_port}" if file_tier.RPC_KIND == "zmq"
            else f"shm://@crescent-rpc/{rpc_port}")


def objects_listing(http):
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/api/v1/objects?limit=1000",
                                timeout=30) as r:
        return json.loads(r.read())["objects"]


def plain_file(directory):
    path = os.path.join(directory, "plain-1MiB.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(MIB))
        f.flush()
        os.fsync(f.fileno())
    return os.open(path, os.O_RDONLY)


class Tier:
    """One cluster whose objects' only replica is on one tier: keys, the
    descriptors of their files (for fadvise), a plain file beside them."""

    def __init__(self, name, procs, st, keys, files, plain_fd):
        self.name, self.procs, self.st, self.keys = name, procs, st, keys
        self.files, self.plain_fd = files, plain_fd

    def close(self):
        self.st.close()
        for fd in self.files + [self.plain_fd]:
            os.close(fd)
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)


def value_of(i):
    return (i.to_bytes(8, "little") * (MIB // 8))


def ssd_tier(base, objects, name="ssd", *store_flags):
    from crescent import Store
    ssd_dir = os.path.join(base, name)
    os.makedirs(ssd_dir)
    http, rpc_port = free_port(), free_port()
    d = daemon(http, rpc_port, "--promotion-hits", "0", "--eviction-ratio", "0.2")
    segment = 16 * MIB
    s = store(rpc_port, segment, "--ssd-dir", ssd_dir, "--ssd-size", str(4 * objects * 2 * MIB),
              *store_flags)
    wait(lambda: metric(http, "crescent_segments_segments") == 1, "segment")
    st = Store()
    assert st.setup("localhost", "", 0, 0, "tcp", "", client_rpc(rpc_port)) == 0
    total = objects + segment // MIB + 8  # past the segment: the early ones are offloaded
    for i in range(total):
        deadline = time.monotonic() + 60
        while True:
            try:
                st.put(f"s{i}", value_of(i))
                break
            except Exception:  # refused for room while offloads run: retry
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
    wait(lambda: metric(http, "crescent_tasks_in_flight") == 0, "offloads settled")
    only = [o for o in objects_listing(http)
            if [r["tier"] for r in o["replicas"]] == ["local_disk"]]
    only = only[:objects]
    if len(only) < objects:
        raise SystemExit(f"only {len(only)} objects are on the SSD alone, {objects} wanted")
    keys = [o["key"] for o in only]
    files = [os.open(os.path.join(ssd_dir, "%016x.crs" % o["replicas"][0]["buffer"]), os.O_RDONLY)
             for o in only]
    return Tier(name, [s, d], st, keys, files, plain_file(ssd_dir))


def file_tier_case(base, objects):
    from crescent import Store
    root = os.path.join(base, "file")
    os.makedirs(root)
    http, rpc_port = free_port(), free_port()
    d = daemon(http, rpc_port, f"--root_fs_dir={root}")
    s = store(rpc_port, 4 * objects * MIB)
    wait(lambda: metric(http, "crescent_segments_segments") == 1, "segment")
    os.environ["CRESCENT_ROOT_FS_DIR"] = root
    st = Store()
    assert st.setup("localhost", "", 0, 0, "tcp", "", client_rpc(rpc_port)) == 0
    from crescent._lib import lib
    keys = [f"f{i}" for i in range(objects)]
    for i, k in enumerate(keys):
        st.put(k, value_of(i))
        # each file written before the next put, so none is skipped for a busy writer
        assert lib.cr_client_file_tier_flush(st._need(), 30000) == 0
    st.close()  # flushes the writer and its reports
    s.send_signal(signal.SIGTERM)
    s.wait(timeout=30)
    wait(lambda: metric(http, "crescent_segments_segments") == 0, "unmount")
    if metric(http, "crescent_segments_file_tier_replicas") != objects:
        raise SystemExit("not every object has its file")
    paths = {}
    for dirpath, _, names in os.walk(os.path.join(root, "mooncake_cluster")):
        for n in names:
            if n.endswith(".obj"):
                paths[n.rsplit("-", 1)[1][:-4]] = os.path.join(dirpath, n)
    files = [os.open(paths[k], os.O_RDONLY) for k in keys]
    st = Store()
    assert st.setup("localhost", "", 0, 0, "tcp", "", client_rpc(rpc_port)) == 0
    # the plain file goes where the tier's files are (one fan-out directory)
    return Tier("file", [d], st, keys, files, plain_file(os.path.dirname(paths[keys[0]])))


def timed(fn, drop):
    """Seconds of fn() alone; drop() (untimed) first."""
    drop()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def round_of(t, buf, ops, cold):
    """Median seconds per op of: the tier's Get, the pread, GetReplicaList."""
    files = t.files

    def drop_tier(i):
        return (lambda: os.posix_fadvise(files[i], 0, 0, DONTNEED)) if cold else (lambda: None)

    def drop_plain():
        if cold:
            os.posix_fadvise(t.plain_fd, 0, 0, DONTNEED)
    gets, preads = [], []
    for n in range(ops):
        i = n % len(t.keys)
        key = t.keys[i]
        # alternate which goes first, so neither always follows the other
        pair = [lambda: gets.append(timed(lambda: t.st.get_into(key, buf), drop_tier(i))),
                lambda: preads.append(timed(lambda: os.preadv(t.plain_fd, [buf], 0), drop_plain))]
        for f in (pair if n % 2 == 0 else pair[::-1]):
            f()
    rpcs = [timed(lambda: t.st.get_replica_list(k), lambda: None) for k in t.keys[:ops]]
    return statistics.median(gets), statistics.median(preads), statistics.median(rpcs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--ops", type=int, default=16, help="Gets (and preads) per round and case")
    ap.add_argument("--objects", type=int, default=16)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rpc", choices=("shm", "zmq"), default="shm")
    ap.add_argument("--cases", default="ssd,ssd-tcp,file")
    a = ap.parse_args()
    cases = a.cases.split(",")
    file_tier.RPC_KIND = a.rpc
    base = tempfile.mkdtemp(prefix="crescent-tier-get-", dir=a.dir)
    tiers = []
    try:
        print(f"load {os.getloadavg()}; rpc {a.rpc}; dir {base}", flush=True)
        makers = {"ssd": lambda: ssd_tier(base, a.objects),
                  "ssd-tcp": lambda: ssd_tier(base, a.objects, "ssd-tcp", "--no-shm"),
                  "file": lambda: file_tier_case(base, a.objects)}
        tiers = [makers[c]() for c in cases]
        buf = bytearray(MIB)
        time.sleep(1)  # crescentd's and the store's work after the puts settles
        for t in tiers:  # each object read twice (connections set up), and checked
            for _ in range(2):
                for k in t.keys:
                    t.st.get_into(k, buf)
                    assert bytes(buf) == value_of(int(k[1:])), (t.name, k)
        res = {(t.name, c): [] for t in tiers for c in ("hot", "cold")}
        for _ in range(a.rounds):
            for t in tiers:
                for cold in (False, True):
                    res[(t.name, "cold" if cold else "hot")].append(
                        round_of(t, buf, a.ops, cold))
        print(f"{a.rounds} rounds x {a.ops} ops, medians of round medians "
              f"(Get = Store.get_into, 1 MiB):")
        for (name, state), rows in res.items():
            g = statistics.median(r[0] for r in rows)
            p = statistics.median(r[1] for r in rows)
            rpc = statistics.median(r[2] for r in rows)
            per_round = " ".join(f"{r[1] / r[0]:.2f}" for r in rows)
            print(f"  {name:7} {state:4}: Get {g * 1e6:8.1f} us  pread {p * 1e6:8.1f} us  "
                  f"ratio {p / g:.2f}  GetReplicaList {rpc * 1e6:6.1f} us  "
                  f"(per round: {per_round})", flush=True)
        for t in tiers:
            if t.name.startswith("ssd"):
                print(f"  {t.name} client: {t.st.offload_shm_counts()}", flush=True)
        print(f"load {os.getloadavg()}", flush=True)
    finally:
        for t in tiers:
            t.close()
        os.environ.pop("CRESCENT_ROOT_FS_DIR", None)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
