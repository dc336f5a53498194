"""The soak run behind scripts/soak.sh (not part of CI): one crescentd under
put/get/remove churn with block metadata (so every put publishes a
BlockStoreEvent the indexer files) plus a simulated vLLM engine publishing KV
events (stored and removed blocks, tests/integration/kv_publishers.py) and
/query calls; prints crescentd's RSS once a minute, then a verdict: RSS
after warm-up (the first minute) must stay flat."""
import argparse
import json
import os
import random
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from conftest import free_port  # noqa: E402
from kv_publishers import Publisher, batch, vllm_removed, vllm_stored  # noqa: E402
from master_client import MasterClient  # noqa: E402

BS = 16


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "zig-out", "bin", "crescentd"))
    ap.add_argument("--crescentd-arg", action="append", default=[], metavar="ARG",
                    help="one more crescentd argument (repeatable), e.g. --crescentd-arg=--ring-slots=256")
    args = ap.parse_args()
    http, rpc = free_port(), f"tcp://127.0.0.1:{free_port()}"
    proc = subprocess.Popen([args.bin, "--http-address", f"127.0.0.1:{http}", "--no-pin",
                             "--rpc-address", rpc, "--rpc-tcp-address", f"127.0.0.1:{free_port()}",
                             "--event-address", f"tcp://127.0.0.1:{free_port()}",
                             "--replay-address", f"tcp://127.0.0.1:{free_port()}",
                             "--metrics-port", "0", "--log-level", "WARN", *args.crescentd_arg])
    try:
        run(args, proc, http, rpc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run(args, proc, http, rpc):
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    pub = Publisher()
    post(http, "/register", {"endpoint": pub.endpoint, "replay_endpoint": pub.replay_endpoint,
                             "type": "vLLM", "modelname": "m", "instance_id": "engine-1",
                             "block_size": BS})
    rng = random.Random(1)
    c = MasterClient(rpc, client_id=(0x50, 0x4b))
    c.mount_segment("soak", 256 << 20)
    start = time.monotonic()
    next_report, minute, samples = start, 0, []
    ops = {"put": 0, "get": 0, "remove": 0, "events": 0, "query": 0}
    live, engine_live, n = [], [], 0
    while time.monotonic() - start < args.minutes * 60:
        n += 1
        key = f"soak/{n}"
        toks = [rng.randrange(1 << 20) for _ in range(BS)]
        block = {"model_name": "m", "block_size": BS, "block_hash": f"h{n}",
                 "parent_block_hash": f"h{n - 1}", "token_ids": toks}
        c.put(key, 4096, block=block)
        live.append(key)
        ops["put"] += 1
        c.get_replica_list(live[rng.randrange(len(live))])
        ops["get"] += 1
        if len(live) > 40:  # the store holds 0-40 objects, as in the churn
            c.remove(live.pop(0), force=True)
            ops["remove"] += 1
        h = (1 << 40) + n
        pub.send(batch([vllm_stored([h], None, toks, BS)]))
        engine_live.append(h)
        if len(engine_live) > 40:
            pub.send(batch([vllm_removed([engine_live.pop(0)])]))
        ops["events"] += 1
        if n % 50 == 0:
            post(http, "/query", {"model": "m", "block_size": BS, "token_ids": toks})
            ops["query"] += 1
            c.ping()
        if time.monotonic() >= next_report:
            rss = rss_mb(proc.pid)
            samples.append(rss)
            print(f"minute {minute:3d}: RSS {rss:7.1f} MB  ops {ops}", flush=True)
            minute += 1
            next_report = start + minute * 60
    rss = rss_mb(proc.pid)
    samples.append(rss)
    print(f"end: RSS {rss:.1f} MB  ops {ops}", flush=True)
    after = samples[1:] or samples
    growth = after[-1] - after[0]
    mins = max(len(after) - 1, 1)
    print(f"after warm-up: {after[0]:.1f} -> {after[-1]:.1f} MB "
          f"({growth / mins:+.2f} MB/min over {mins} min)", flush=True)
    pub.close()
    c.close()


if __name__ == "__main__":
    main()
