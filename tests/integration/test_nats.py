"""crescentd fed by Dynamo workers over NATS (seed 003): RouterEvents on
kv_events into the index (one instance per worker_id), ForwardPassMetrics on
load_metrics into /route's load, a worker whose metrics stop marked stale,
a KVHitRateEvent published after each /route, and malformed payloads
counted by cause without harm.  Debian's nats-server runs on loopback; the
workers are a raw NATS protocol client (the protocol is text lines)."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import free_port, http_get, wait_for
from test_indexer import post_json
from test_metrics import metrics as strict_metrics

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "unit"))
import gen_xxh3_vectors as xxh3  # noqa: E402  (XXH3 written from its spec, no libxxhash)

BS = 16
NS = "namespace.dynamo.component"
KV, METRICS, HIT = f"{NS}.VllmWorker.kv_events", f"{NS}.VllmWorker.load_metrics", \
    f"{NS}.Router.kv-hit-rate"

pytestmark = pytest.mark.skipif(shutil.which("nats-server") is None,
                                reason="nats-server (Debian package) is not installed")


class Nats:
    """A minimal NATS client: CONNECT, PUB, SUB, and MSG read back."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.lock = threading.Lock()
        assert self._line().startswith(b"INFO ")
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        assert self._line() == b"PONG"

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "NATS server closed the connection"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n):
        while len(self.buf) < n + 2:
            self.buf += self.sock.recv(65536)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def pub(self, subject, payload):
        if not isinstance(payload, bytes):
            payload = json.dumps(payload).encode()
        with self.lock:
            self.sock.sendall(f"PUB {subject} {len(payload)}\r\n".encode() + payload + b"\r\n")

    def sub(self, subject, sid=1):
        self.sock.sendall(f"SUB {subject} {sid}\r\nPING\r\n".encode())
        while self._line() != b"PONG":
            pass

    def next_msg(self, timeout=30):
        self.sock.settimeout(timeout)
        while True:
            line = self._line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
                continue
            if line.startswith(b"MSG "):
                parts = line.split()
                return parts[1].decode(), self._take(int(parts[-1]))

    def close(self):
        self.sock.close()


@pytest.fixture
def nats_port():
    port = free_port()
    proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    wait_for(up, "nats-server to listen", timeout=30)
    yield port
    proc.terminate()
    proc.wait(timeout=10)


def stats(d):
    status, body = http_get(d.port, "/metrics")
    assert status == 200
    out = {}
    for m in re.finditer(r"^crescent_indexer_(nats_\w+) (\d+)$", body.decode(), re.M):
        out[m.group(1)] = int(m.group(2))
    return out


def stored(worker, hashes, tokens, parent=None):
    body = {"request_id": "r", "token_ids": tokens, "block_hashes": hashes, "lora_id": None}
    if parent is not None:
        body["parent_hash"] = parent
    return {"worker_id": worker, "data": {"Stored": body}}


def load(worker, active):
    return {"worker_id": worker, "endpoint_name": "generate", "metrics": {
        "request_active_slots": 1, "request_total_slots": 8, "kv_active_blocks": active,
        "kv_total_blocks": 100, "gpu_cache_usage_perc": active / 100,
        "gpu_prefix_cache_hit_rate": 0.0, "num_requests_waiting": 0}}


def query(d, tokens):
    status, r = post_json(d.port, "/query", {"model": "m", "token_ids": tokens, "block_size": BS})
    assert status == 200, r
    return {w: v["longest_matched"] for w, v in r.get("default", {}).items()}


def route(d, tokens):
    status, r = post_json(d.port, "/route", {"model": "m", "token_ids": tokens, "block_size": BS})
    assert status == 200, r
    return r


def test_dynamo_workers_over_nats(daemon, nats_port):
    d = daemon("--nats-url", f"nats://127.0.0.1:{nats_port}", "--nats-model", "m",
               "--nats-block-size", str(BS), "--nats-stale-ms", "3000")
    worker, watcher = Nats(nats_port), Nats(nats_port)
    watcher.sub(HIT)
    live = {7: 10, 8: 10}  # worker -> kv_active_blocks it reports every 100 ms
    stop = threading.Event()

    def report():
        while not stop.is_set():
            for w, active in list(live.items()):
                worker.pub(METRICS, load(w, active))
            time.sleep(0.1)

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    try:
        # crescentd subscribes in the background: metrics arriving show it has.
        wait_for(lambda: stats(d).get("nats_metrics_total", 0) >= 2, "metrics over NATS")
        toks = [1000 + i for i in range(4 * BS + 5)]  # four blocks and a partial one
        big = [2**64 - 1, 2**63 + 5, 3, 4]  # u64 hashes above INT64_MAX
        worker.pub(KV, stored(7, big, toks))
        worker.pub(KV, {"worker_id": 8, "event": {"event_id": 1, "data": {"stored": {
            "parent_hash": None, "token_ids": toks[:2 * BS],
            "blocks": [{"block_hash": 50, "tokens_hash": 1}, {"block_hash": 51, "tokens_hash": 2}]}}}})
        wait_for(lambda: stats(d).get("nats_events_total") == 2, "two RouterEvents applied")
        assert query(d, toks) == {"7": 4 * BS, "8": 2 * BS}

        # /route: the longest overlap at equal load, then the hit-rate event.
        r = route(d, toks)
        assert r["instance_id"] == "7" and r["longest_matched"] == 4 * BS
        subject, payload = watcher.next_msg()
        assert subject == HIT
        assert json.loads(payload) == {"isl_tokens": len(toks), "hit_tokens": 4 * BS,
                                       "worker_id": 7}
        # Load from NATS counts: 7 full, 8 wins.
        live[7] = 100
        wait_for(lambda: route(d, toks)["instance_id"] == "8", "worker 7's load to count")
        _, payload = watcher.next_msg()
        assert json.loads(payload)["worker_id"] in (7, 8)
        live[7] = 10

        # Removed and a chained Stored (parent) go through the same path.
        worker.pub(KV, {"worker_id": 7, "data": {"Removed": {"block_hashes": [3, 4]}}})
        wait_for(lambda: query(d, toks).get("7") == 2 * BS, "worker 7's blocks 3-4 removed")
        worker.pub(KV, stored(7, [9], toks[2 * BS:3 * BS], parent=2**63 + 5))
        wait_for(lambda: query(d, toks).get("7") == 3 * BS, "worker 7's chained block")

        # Malformed payloads: counted by cause, nothing applied, no crash.
        before = stats(d)
        for bad in (b"not json", b'{"worker_id": 7, "data": {"Stored": {"block_hashes": [-1]}}}',
                    b'{"worker_id": 7, "data": {"Moved": {}}}', b'{"data": "Cleared"}',
                    b'{"worker_id": 7, "data": {"Stored": {"block_hashes": [1], '
                    b'"token_ids": [4294967296]}}}', b"[" * 100000, b""):
            worker.pub(KV, bad)
        worker.pub(METRICS, b'{"worker_id": 7, "metrics": {"kv_total_blocks": -1}}')

        def refused():
            s = stats(d)
            return all(s.get(f"nats_refused_{c}_total", 0) - before.get(f"nats_refused_{c}_total", 0)
                       >= n for c, n in (("bad_json", 3), ("bad_hash", 1), ("bad_kind", 1),
                                         ("bad_field", 2), ("bad_tokens", 1))) and s
        s = wait_for(refused, "malformed payloads counted")
        assert s["nats_events_total"] == before["nats_events_total"]
        assert query(d, toks) == {"7": 3 * BS, "8": 2 * BS}

        # Worker 7's metrics stop: stale after --nats-stale-ms, left out of /route.
        del live[7]
        wait_for(lambda: stats(d).get("nats_workers_stale") == 1, "worker 7 marked stale")
        r = route(d, toks)
        assert r["instance_id"] == "8" and r["excluded_unhealthy"] == 1
        live[7] = 10
        wait_for(lambda: stats(d).get("nats_workers_stale") == 0, "worker 7 live again")

        # Cleared empties a worker.
        worker.pub(KV, {"worker_id": 8, "data": "Cleared"})
        wait_for(lambda: "8" not in query(d, toks), "worker 8 cleared")
        assert stats(d)["nats_workers"] == 2
        strict_metrics(d)  # every new family has its HELP and TYPE
    finally:
        stop.set()
        reporter.join()
        worker.close()
        watcher.close()
    code, err = d.stop()
    assert code == 0, err


def test_nats_server_down_at_start_then_up(daemon):
    port = free_port()
    d = daemon("--nats-url", f"nats://127.0.0.1:{port}", "--nats-model", "m")
    proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def sent():
            try:
                c = Nats(port)
            except OSError:
                return False
            c.pub(METRICS, load(1, 5))
            c.sub("x")  # a round trip: the PUB was taken
            c.close()
            return stats(d).get("nats_metrics_total", 0) >= 1
        wait_for(sent, "crescentd to connect once the server is up", timeout=60, interval=0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    code, err = d.stop()
    assert code == 0, err


DYNAMO_SEED = 1337  # Dynamo's XXH3_SEED: tokens_hash and its sequence hashes


def tokens_hashes(tokens):
    """What a Dynamo worker puts in each block's tokens_hash."""
    return [xxh3.xxh3_64(xxh3.le32s(tokens[i:i + BS]), DYNAMO_SEED)
            for i in range(0, len(tokens) - BS + 1, BS)]


def dynamo_stored(worker, event_id, parent, block_hashes, locals_):
    """A RouterEvent exactly as Dynamo's serde writes it: no token ids."""
    return {"worker_id": worker, "event": {"event_id": event_id, "data": {"stored": {
        "parent_hash": parent,
        "blocks": [{"block_hash": h, "tokens_hash": t, "mm_extra_info": None}
                   for h, t in zip(block_hashes, locals_)]}}, "dp_rank": 0}}


def test_dynamo_events_without_token_ids(daemon, nats_port):
    """Blocks that carry only Dynamo's tokens_hash match /query by tokens
    once --prefix-hash-seed is Dynamo's 1337."""
    d = daemon("--nats-url", f"nats://127.0.0.1:{nats_port}", "--nats-model", "m",
               "--nats-block-size", str(BS), "--prefix-hash-seed", str(DYNAMO_SEED))
    worker = Nats(nats_port)
    try:
        def subscribed():
            worker.pub(METRICS, load(21, 1))
            return stats(d).get("nats_metrics_total", 0) >= 1
        wait_for(subscribed, "crescentd subscribed", interval=0.2)
        toks = [7000 + 3 * i for i in range(4 * BS + 3)]
        locals_ = tokens_hashes(toks)
        engine = [2**64 - 11, 2**63 + 1, 17, 2**40]  # the engine's own ids, opaque
        # Blocks 0-1 at the root, then 2-3 continuing from block 1 by its engine id.
        worker.pub(KV, dynamo_stored(21, 1, None, engine[:2], locals_[:2]))
        worker.pub(KV, dynamo_stored(21, 2, engine[1], engine[2:], locals_[2:]))
        wait_for(lambda: stats(d).get("nats_events_total") == 2, "two hash-only RouterEvents")
        assert query(d, toks) == {"21": 4 * BS}
        # Dynamo's own sequence hashes are ours: /query_by_hash finds them too.
        seq = xxh3.chain(toks, BS, DYNAMO_SEED)
        status, r = post_json(d.port, "/query_by_hash",
                              {"model": "m", "seq_hashes": seq, "block_size": BS})
        assert status == 200 and r["default"]["21"]["longest_matched"] == 4 * BS, r
        # A worker sending the seed's shape (token ids) shares the same blocks.
        worker.pub(KV, stored(22, locals_[:3], toks[:3 * BS]))
        wait_for(lambda: query(d, toks).get("22") == 3 * BS, "worker 22's tokens")
        # Removed by engine id, as any run.
        worker.pub(KV, {"worker_id": 21, "event": {"event_id": 3, "data": {"removed": {
            "block_hashes": [engine[2]]}}, "dp_rank": 0}})
        wait_for(lambda: query(d, toks).get("21") == 2 * BS, "worker 21's block 2 removed")
        # Unknown parent, or a LoRA whose seeding crescent cannot follow: orphans.
        before = stats(d)["nats_orphan_runs_total"]
        worker.pub(KV, dynamo_stored(21, 4, 999, [5], locals_[:1]))
        lora = dynamo_stored(21, 5, None, [6], locals_[:1])
        lora["event"]["data"]["stored"]["lora_id"] = 3
        worker.pub(KV, lora)
        wait_for(lambda: stats(d)["nats_orphan_runs_total"] == before + 2, "two orphan runs")
        assert query(d, toks) == {"21": 2 * BS, "22": 3 * BS}
    finally:
        worker.close()
    code, err = d.stop()
    assert code == 0, err
