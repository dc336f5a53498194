"""MooncakeDistributedStore between two engine processes on one host
(bench/RESULTS.md, "MooncakeDistributedStore"):

  batch_get_into of 32 x 256 KiB blocks that another process hosts, over shm
  and over tcp, against ceilings measured in the same run: memcpy of the same
  bytes (shm) and a bare loopback TCP stream of the same bytes between the
  same two processes (tcp); over shm also with the checksums split between
  the reading thread and a helper (CRESCENT_VERIFY_THREAD=1,
  src/client/client_verify.h), in the same rounds;
  over shm also by a second reader that reaches crescentd by its same-host
  shared-memory RPC endpoint (master "shm://@crescent-rpc/PORT", crescentd's
  default --rpc-shm-path) instead of ZMQ over loopback TCP, in the same rounds;
  the per-call Python cost of is_exist / batch_is_exist(32) against a bare
  ctypes call of the same libcrescent function on the same client.

Rounds interleave the cases; medians are printed.  It starts its own crescentd
(zig-out/bin, loopback, free ports, no local segment) and a second process
that hosts the segment the blocks live in.

    /usr/bin/python3 bench/mooncake_store.py [--rounds 15]
"""
import argparse
import ctypes
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

BLOCKS, BLOCK = 32, 256 << 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_role(master, no_shm, stream_port):
    """The second process: hosts a segment, stores the blocks, serves a raw
    TCP stream of the same bytes for the baseline, until stdin closes."""
    from crescent import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 0, "tcp", "", master,
                 data_no_shm=no_shm)
    assert rc == 0, rc
    data = (ctypes.c_char * (BLOCKS * BLOCK))()
    ctypes.memset(data, 7, len(data))
    keys = [f"blk{i}" for i in range(BLOCKS)]
    assert s.batch_put_from(keys, [ctypes.addressof(data) + i * BLOCK for i in range(BLOCKS)],
                            [BLOCK] * BLOCKS) == [0] * BLOCKS
    listener = socket.create_server(("127.0.0.1", stream_port))
    print("ready", flush=True)
    conn, _ = listener.accept()
    view = memoryview(data)
    while conn.recv(1):          # one byte asks for the whole 8 MiB
        conn.sendall(view)
    s.close()


def timed(fn, n):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--host-role", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.host_role:
        return host_role(args.host_role[0], args.host_role[1] == "1", int(args.host_role[2]))

    ports = [free_port() for _ in range(6)]
    daemon = subprocess.Popen(
        [os.path.join(ROOT, "zig-out", "bin", "crescentd"), "--no-pin",
         "--http-address", f"127.0.0.1:{ports[0]}", "--rpc-address", f"tcp://127.0.0.1:{ports[1]}",
         "--rpc-tcp-address", f"127.0.0.1:{ports[2]}", "--event-address",
         f"tcp://127.0.0.1:{ports[3]}", "--replay-address", f"tcp://127.0.0.1:{ports[4]}",
         "--metrics-port", str(ports[5]), "--local-segment-size", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    master = f"127.0.0.1:{ports[1]}"
    try:
        return run(master, f"shm://@crescent-rpc/{ports[1]}", args.rounds)
    finally:
        daemon.terminate()
        daemon.wait()


def start_host(master, no_shm):
    port = free_port()
    env = dict(os.environ, CRESCENT_LOG_LEVEL="WARN")
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--host-role", master,
                          "1" if no_shm else "0", str(port)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=env, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p, socket.create_connection(("127.0.0.1", port))


def run(master, master_shm, rounds):
    from crescent import MooncakeDistributedStore
    from crescent._lib import lib, StatusList
    keys = [f"blk{i}" for i in range(BLOCKS)]
    dst = (ctypes.c_char * (BLOCKS * BLOCK))()
    src = (ctypes.c_char * (BLOCKS * BLOCK))()
    ctypes.memset(src, 7, len(src))
    ptrs = [ctypes.addressof(dst) + i * BLOCK for i in range(BLOCKS)]
    results = {}
    for transport, no_shm in (("shm", False), ("tcp", True)):
        host, stream = start_host(master, no_shm)
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master) == 0
        assert s.batch_get_into(keys, ptrs, [BLOCK] * BLOCKS) == [BLOCK] * BLOCKS  # warm
        assert dst.raw[:4] == b"\x07" * 4

        def stream_once():
            stream.sendall(b"x")
            view, got = memoryview(dst), 0
            while got < len(dst):
                got += stream.recv_into(view[got:])

        def get_once():
            s.batch_get_into(keys, ptrs, [BLOCK] * BLOCKS)

        if transport == "shm":  # the same reads, the master reached over shm://
            s_shm = MooncakeDistributedStore()
            assert s_shm.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master_shm) == 0
            assert s_shm.batch_get_into(keys, ptrs, [BLOCK] * BLOCKS) == [BLOCK] * BLOCKS

        def get_shm_rpc_once():
            s_shm.batch_get_into(keys, ptrs, [BLOCK] * BLOCKS)

        def two_threads_once():  # checksums split with a helper thread (client_verify.h)
            os.environ["CRESCENT_VERIFY_THREAD"] = "1"
            try:
                get_once()
            finally:
                del os.environ["CRESCENT_VERIFY_THREAD"]

        store_t, base_t, one_t, rpc_shm_t = [], [], [], []
        for _ in range(rounds):
            store_t.append(timed(get_once, 5))
            base_t.append(timed(lambda: ctypes.memmove(dst, src, len(dst)), 5)
                          if transport == "shm" else timed(stream_once, 5))
            if transport == "shm":
                one_t.append(timed(two_threads_once, 5))
                rpc_shm_t.append(timed(get_shm_rpc_once, 5))
        gb = BLOCKS * BLOCK / 1e9
        results[transport] = (gb / statistics.median(store_t), gb / statistics.median(base_t))
        if transport == "shm":
            results["shm two threads"] = gb / statistics.median(one_t)
            results["shm, master over shm"] = gb / statistics.median(rpc_shm_t)
            s_shm.close()
        if transport == "shm":
            results["calls"] = call_overhead(s, lib, StatusList, rounds)
        s.close()
        host.stdin.close()
        stream.close()
        host.wait()
    print(f"load (uptime): {open('/proc/loadavg').read().split()[:3]}")
    for transport, baseline in (("shm", "memcpy"), ("tcp", "bare loopback stream")):
        store_gbs, base_gbs = results[transport]
        print(f"batch_get_into 32x256KiB over {transport}: {store_gbs:.2f} GB/s; {baseline} "
              f"{base_gbs:.2f} GB/s; ratio {store_gbs / base_gbs:.2f}")
    print(f"  the same over shm with the checksums split with a helper thread "
          f"(CRESCENT_VERIFY_THREAD=1): {results['shm two threads']:.2f} GB/s; ratio "
          f"{results['shm two threads'] / results['shm'][1]:.2f}")
    print(f"  the same over shm with the master reached over shm:// (same-host RPC): "
          f"{results['shm, master over shm']:.2f} GB/s; ratio "
          f"{results['shm, master over shm'] / results['shm'][1]:.2f}")
    for name, (wrapped, bare) in results["calls"].items():
        print(f"{name}: {wrapped * 1e6:.1f} us/call through the class, {bare * 1e6:.1f} us/call "
              f"bare ctypes; ratio {wrapped / bare:.2f}")


def call_overhead(s, lib, StatusList, rounds):
    keys = [f"blk{i}" for i in range(BLOCKS)]
    ckeys = (ctypes.c_char_p * BLOCKS)(*[k.encode() for k in keys])
    exists = ctypes.c_bool()
    out = StatusList()

    def bare_exist():
        lib.cr_client_exist_key(s._client, None, b"blk0", ctypes.byref(exists))

    def bare_batch():
        lib.cr_client_batch_exist_key(s._client, None, ckeys, BLOCKS, ctypes.byref(out))
        lib.cr_client_status_list_free(ctypes.byref(out))

    cases = {"is_exist": (lambda: s.is_exist("blk0"), bare_exist),
             "batch_is_exist(32)": (lambda: s.batch_is_exist(keys), bare_batch)}
    out_t = {}
    for name, (wrapped, bare) in cases.items():
        w, b = [], []
        for _ in range(rounds):
            w.append(timed(wrapped, 200))
            b.append(timed(bare, 200))
        out_t[name] = (statistics.median(w), statistics.median(b))
    return out_t


if __name__ == "__main__":
    sys.exit(main())
