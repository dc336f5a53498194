"""Fake KV-event publishers for the indexer's integration tests: engines that
behave as vLLM (positional arrays, and >= 0.26 maps), SGLang (signed hashes,
attn_dp_rank) and the store (seed-000 events), each with a PUB socket and a
ROUTER replay endpoint that answers in that engine's layout.

Also the standard prefix hashing, computed independently of crescent with the
pure-Python XXH3 of tests/unit/gen_xxh3_vectors.py (written from the XXH3
specification; python3-xxhash is not installed on the test machines)."""
import os
import struct
import sys
import threading
import time

import msgpack
import zmq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "unit"))
import gen_xxh3_vectors as xxh3  # noqa: E402

END = b"\xff" * 8


def be64(n):
    return struct.pack(">Q", n)


def namespace_seed(lora="", salt=""):
    return xxh3.namespace_seed(0, lora, salt)


def seq_hashes(tokens, block_size, lora="", salt=""):
    """Standard rolling sequence hashes of the complete blocks of tokens."""
    return xxh3.chain(tokens, block_size, namespace_seed(lora, salt))


def signed(h):
    return h - (1 << 64) if h >= (1 << 63) else h


# ---- events ----

def vllm_stored(hashes, parent, tokens, block_size, medium=None, lora_name=None,
                spec_kind=None, group_idx=None):
    ev = ["BlockStored", hashes, parent, tokens, block_size, None, medium, lora_name]
    if spec_kind is not None or group_idx is not None:
        ev += [None, group_idx, spec_kind]
    return ev


def vllm_removed(hashes, medium=None):
    return ["BlockRemoved", hashes, medium]


def vllm_cleared():
    return ["AllBlocksCleared"]


def map_stored(hashes, parent, tokens, block_size, medium=None, **extra):
    ev = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
          "token_ids": tokens, "block_size": block_size, "unknown_future_field": [1, 2]}
    if medium is not None:
        ev["medium"] = medium
    ev.update(extra)
    return ev


def map_removed(hashes, medium=None):
    ev = {"type": "BlockRemoved", "block_hashes": hashes}
    if medium is not None:
        ev["medium"] = medium
    return ev


def store_block(key, tokens, block_size, block_hash="", parent="", model="",
                replicas=(("memory", "tcp://10.0.0.1:1"),)):
    return ["BlockStoreEvent", key, [list(r) for r in replicas], model, block_size, block_hash,
            parent, tokens]


def store_update(key, replicas):
    return ["BlockUpdateEvent", key, [list(r) for r in replicas]]


def store_remove_all():
    return ["RemoveAllEvent"]


# ---- batches ----

def batch(events, dialect="vllm", dp_rank=None):
    ts = time.time()
    if dialect == "vllm":
        return msgpack.packb([ts, events, dp_rank])
    if dialect == "vllm_old":
        return msgpack.packb([ts, events])
    if dialect == "map":
        return msgpack.packb({"ts": ts, "events": events, "data_parallel_rank": dp_rank})
    if dialect == "sglang":
        return msgpack.packb({"ts": ts, "events": events, "attn_dp_rank": dp_rank})
    if dialect == "store":
        return msgpack.packb([ts, events])
    raise ValueError(dialect)


class Publisher:
    """PUB [topic, seq, payload] and a ROUTER replay endpoint.

    replay_layout: "vllm"   -> replies [id, "", seq, payload], end [id, "", FF*8, ""]
                   "topic"  -> vLLM >= 0.26: [id, "", topic, seq, payload], end likewise
                   "store"  -> seed 000: [id, "", seq, payload], end payload FF*8
                   None     -> no replay endpoint
    """

    def __init__(self, topic=b"", replay_layout="vllm", first_seq=0, history_max=None,
                 sndbuf=None, router_sndhwm=0):
        self.ctx = zmq.Context.instance()
        self.topic = topic
        self.layout = replay_layout
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        if sndbuf is not None:  # bytes the kernel holds for a slow subscriber
            self.pub.setsockopt(zmq.SNDBUF, sndbuf)
        self.port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.seq = first_seq
        self.history = []  # (seq, payload)
        self.history_max = history_max  # None: keep all; else a bounded replay buffer
        self.replay_requests = []  # frames as the ROUTER saw them, identity dropped
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.replay_gate = threading.Event()  # clear it to hold replay answers back
        self.replay_gate.set()
        self.replay_seen = threading.Event()  # set when a replay request arrives
        self.replay_endpoint = ""
        self.thread = None
        if replay_layout is not None:
            self.router = self.ctx.socket(zmq.ROUTER)
            self.router.setsockopt(zmq.LINGER, 0)
            # router_sndhwm=0: a replay is answered whole, as crescentd's
            # replay does.  None keeps ZMQ's default (1000), as vLLM's and
            # SGLang's replay ROUTER do: replies past it are dropped without
            # a word (see RealisticPublisher).
            if router_sndhwm is not None:
                self.router.setsockopt(zmq.SNDHWM, router_sndhwm)
            rport = self.router.bind_to_random_port("tcp://127.0.0.1")
            self.replay_endpoint = f"tcp://127.0.0.1:{rport}"
            self.thread = threading.Thread(target=self._serve_replay, daemon=True)
            self.thread.start()

    def send(self, payload, deliver=True):
        """Numbers the payload with the next seq; deliver=False loses it (a gap)."""
        with self.lock:
            seq = self.seq
            self.seq += 1
            self.history.append((seq, payload))
            if self.history_max is not None and len(self.history) > self.history_max:
                del self.history[0]
        if deliver:
            self.pub.send_multipart([self.topic, be64(seq), payload])
        return seq

    def restart(self, first_seq=0):
        """An engine restart: numbering starts again and the history is gone."""
        with self.lock:
            self.seq = first_seq
            self.history = []

    def _reply_frames(self, ident, seq, payload):
        if self.layout == "topic":
            return [ident, b"", self.topic, be64(seq), payload]
        return [ident, b"", be64(seq), payload]

    def _end_frames(self, ident):
        if self.layout == "topic":
            return [ident, b"", self.topic, END, b""]
        if self.layout == "store":
            return [ident, b"", be64(self.seq), END]
        return [ident, b"", END, b""]

    def _serve_replay(self):
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        while not self.stop_flag.is_set():
            if not dict(poller.poll(50)):
                continue
            frames = self.router.recv_multipart()
            ident, rest = frames[0], frames[1:]
            self.replay_requests.append(rest)
            if len(rest) != 2 or rest[0] != b"" or len(rest[1]) != 8:
                continue  # malformed (e.g. no empty delimiter): ignored, as a ROUTER peer would
            start = struct.unpack(">Q", rest[1])[0]
            self.replay_seen.set()
            self.replay_gate.wait(60)  # held by the test; bounded in case it never lets go
            with self.lock:
                items = [(s, p) for s, p in self.history if s >= start]
            for s, p in items:
                self.router.send_multipart(self._reply_frames(ident, s, p))
            self.router.send_multipart(self._end_frames(ident))

    def close(self):
        self.stop_flag.set()
        if self.thread is not None:
            self.thread.join(timeout=2)
            self.router.close(0)
        self.pub.close(0)


class RealisticPublisher(Publisher):
    """A publisher as vLLM's and SGLang's ZmqEventPublisher behave: seq from 0,
    a bounded buffer of the last `buffer` batches (vLLM's buffer_steps,
    10000 by default), and a replay ROUTER with ZMQ's default send
    high-water mark, which answers a request with every buffered batch at or
    after the start seq in one loop and drops what does not fit in the send
    queue without a word (the end marker included)."""

    def __init__(self, buffer=10000, **kw):
        kw.setdefault("replay_layout", "vllm")
        super().__init__(history_max=buffer, router_sndhwm=None, **kw)


class Chain:
    """What a publisher published, as one chain of blocks: batch i stores
    block i (parent: block i-1), so one /query of the whole token run answers
    how many of the first blocks the index holds -- a hole anywhere ends the
    match there."""

    def __init__(self, block_size, base=1):
        self.bs = block_size
        self.base = base
        self.blocks = 0

    def tokens(self, n=None):
        n = self.blocks if n is None else n
        return [self.base + i for i in range(n * self.bs)]

    def next_batch(self):
        i = self.blocks
        self.blocks += 1
        toks = [self.base + i * self.bs + k for k in range(self.bs)]
        h = (self.base << 32) + i + 1  # opaque engine ids, unique per chain
        parent = None if i == 0 else h - 1
        return batch([vllm_stored([h], parent, toks, self.bs)])


class ConnectingPublisher(Publisher):
    """A publisher whose PUB connects to its consumer's bound SUB (vLLM's
    when its endpoint names a host rather than "*"); the replay ROUTER still
    binds, as vLLM's always does."""

    def __init__(self, consumer_endpoint, **kw):
        super().__init__(**kw)
        self.pub.close()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub.connect(consumer_endpoint)
        self.endpoint = consumer_endpoint
