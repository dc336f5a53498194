#!/usr/bin/env python3
"""Time for a restarted crescentd to rebuild its index from its publishers
(issue 11): 4 publishers as vLLM's behave (kv_publishers.RealisticPublisher:
replay ROUTER with ZMQ's default send HWM, a buffer of 10000 batches), each
holding 10000 batches of 32 blocks (16 tokens each).  crescentd starts with
them in its static config; the clock runs from its start until every
publisher's last seq is applied, then /query checks one prompt of each.
Prints one line per run: seconds, batches/s, blocks/s.

    CRESCENT_BIN_DIR=zig-out/bin python3 bench/indexer_rebuild.py [runs]"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import kv_publishers as kp  # noqa: E402
from conftest import free_port  # noqa: E402

PUBLISHERS, BATCHES, BLOCKS, BS = 4, 10000, 32, 16


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


def fill(pub, p):
    """BATCHES batches, each a run of BLOCKS blocks of its own prompt."""
    for b in range(BATCHES):
        base = (p * BATCHES + b) * BLOCKS * BS
        toks = list(range(base, base + BLOCKS * BS))
        hashes = [(p << 48) + b * BLOCKS + i + 1 for i in range(BLOCKS)]
        pub.send(kp.batch([kp.vllm_stored(hashes, None, toks, BS)]), deliver=False)


def run(pubs, bin_dir):
    with tempfile.TemporaryDirectory() as tmp:
        conf = os.path.join(tmp, "conductor.json")
        with open(conf, "w") as f:
            json.dump({"kvevent_instance": {f"p{i}": {
                "endpoint": p.endpoint, "replay_endpoint": p.replay_endpoint,
                "modelname": "m", "block_size": BS} for i, p in enumerate(pubs)}}, f)
        ports = [free_port() for _ in range(4)]
        start = time.monotonic()
        proc = subprocess.Popen([os.path.join(bin_dir, "crescentd"), "--no-pin",
                                 "--indexer-config", conf,
                                 "--http-address", f"127.0.0.1:{ports[0]}",
                                 "--rpc-address", f"tcp://127.0.0.1:{ports[1]}",
                                 "--event-address", f"tcp://127.0.0.1:{ports[2]}",
                                 "--replay-address", f"tcp://127.0.0.1:{ports[3]}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                try:
                    s = get(ports[0], "/services")["services"]
                    if len(s) == PUBLISHERS and all(
                            x["last_seq"] == BATCHES - 1 and not x["replaying"] for x in s):
                        break
                except OSError:
                    pass
                time.sleep(0.05)
            took = time.monotonic() - start
            for i in range(PUBLISHERS):  # the last prompt of each, whole
                base = (i * BATCHES + BATCHES - 1) * BLOCKS * BS
                body = json.dumps({"model": "m", "block_size": BS,
                                   "token_ids": list(range(base, base + BLOCKS * BS))}).encode()
                req = urllib.request.Request(f"http://127.0.0.1:{ports[0]}/query", data=body,
                                             method="POST",
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=10) as r:
                    got = json.loads(r.read())
                assert got["default"][f"p{i}"]["longest_matched"] == BLOCKS * BS, got
            stale = [x["key"] for x in s if x["possibly_stale"]]
            assert not stale, stale
            return took
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    bin_dir = os.environ.get("CRESCENT_BIN_DIR", os.path.join(HERE, "..", "zig-out", "bin"))
    pubs = [kp.RealisticPublisher(buffer=BATCHES) for _ in range(PUBLISHERS)]
    try:
        for i, p in enumerate(pubs):
            fill(p, i)
        times = []
        for r in range(runs):
            took = run(pubs, bin_dir)
            times.append(took)
            n = PUBLISHERS * BATCHES
            print(f"run {r}: {took:.2f} s, {n / took:,.0f} batches/s, "
                  f"{n * BLOCKS / took:,.0f} blocks/s", flush=True)
        print(f"median {statistics.median(times):.2f} s over {runs} runs")
    finally:
        for p in pubs:
            p.close()


if __name__ == "__main__":
    main()
