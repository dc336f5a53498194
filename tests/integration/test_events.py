"""The event plane from the outside: a subscriber written from seed 000's guide.

crescentd runs with its own free ports; store changes are made through the
store-master RPC (master_client.py), so every event here comes from a real
PutEnd / replica change / RemoveAll.  Subscribers use python3-zmq and
python3-msgpack exactly as the guide shows: 3 frames [topic, seq (8-byte
big-endian), payload], payload [ts, [events]]; replay over a DEALER:
request ["", start_seq], replies ["", seq, payload], end marker ["", FF×8, FF×8].

PUB/SUB drops what is published before a subscription reaches the
publisher, so each subscriber first waits for a probe put of its own.

Run: CRESCENT_BIN_DIR=... /usr/bin/python3 -m pytest -q tests/integration/test_events.py
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import msgpack
import pytest
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import Daemon, binary, free_port, http_get  # noqa: E402
from master_client import MasterClient  # noqa: E402

FF8 = b"\xff" * 8
U32_MAX = 2**32 - 1
REPLICA_TYPES = {"memory", "disk", "local_disk"}
WAIT_S = 10
SLOW_S = 60  # for what a loaded machine may take long over: only a hang reaches it


def _until(done, value, what, timeout_s=SLOW_S):
    """Polls `done` until true; returns value() then."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)
    return value()


def endpoint():
    return f"tcp://127.0.0.1:{free_port()}"


class Plane:
    """A crescentd with free ports, an RPC client and mounted segments."""

    def __init__(self, daemon, *extra, topic=None, ports=None):
        self.rpc, self.pub, self.replay = ports or (endpoint(), endpoint(), endpoint())
        args = ["--rpc-address", self.rpc, "--event-address", self.pub,
                "--replay-address", self.replay, *extra]
        if topic is not None:
            args += ["--event-topic", topic]
        self.topic = (topic or "mooncake").encode()
        self.daemon = daemon(*args)
        self.ctx = zmq.Context()
        self.client = MasterClient(self.rpc, timeout=WAIT_S)
        resp = self.client.mount_segment("seg0", 1 << 30, base=0x10000000,
                                         endpoint="10.0.0.1:6000")
        assert resp.status_code == 0
        self.probes = 0

    def close(self):
        self.client.close()
        self.ctx.destroy(linger=0)

    def put(self, key, **kw):
        start, end = self.client.put(key, 4096, **kw)
        assert start.status_code == 0 and end.status_code == 0, (start, end)

    def subscriber(self, topic=None):
        sub = self.ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 0)
        sub.setsockopt(zmq.SUBSCRIBE, self.topic if topic is None else topic)
        sub.connect(self.pub)
        return sub

    def ready(self, sub):
        """Puts probes until `sub` gets one, then a fence probe, and drains up
        to the fence; returns the next seq `sub` will see.  (Probes put before
        the subscription took effect are lost to `sub`: that is PUB/SUB.)"""
        deadline = time.monotonic() + WAIT_S
        while True:
            assert time.monotonic() < deadline, "the subscription never took effect"
            self.probes += 1
            self.put(f"probe-{self.probes}")
            if sub.poll(50):
                break
        self.probes += 1
        fence = f"probe-{self.probes}"
        self.put(fence)
        while True:
            last, events = recv_batch(sub, self.topic)
            if events[-1][0] == "BlockStoreEvent" and events[-1][1] == fence:
                return last + 1

    def dealer(self):
        d = self.ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.LINGER, 0)
        d.connect(self.replay)
        return d

    def events_info(self):
        status, body = http_get(self.daemon.port, "/api/v1/events")
        assert status == 200
        return json.loads(body)


@pytest.fixture
def plane(daemon):
    planes = []

    def start(*extra, **kw):
        p = Plane(daemon, *extra, **kw)
        planes.append(p)
        return p

    yield start
    for p in planes:
        p.close()


def recv_batch(sock, topic, timeout_s=WAIT_S):
    """One event message, checked frame by frame as the guide describes."""
    assert sock.poll(int(timeout_s * 1000)), "no event message in time"
    frames = sock.recv_multipart()
    assert len(frames) == 3
    assert frames[0] == topic
    assert len(frames[1]) == 8
    seq = int.from_bytes(frames[1], "big")
    return seq, check_payload(frames[2])


def check_payload(payload):
    """Seed 000's batch: [ts float64, [events]], in canonical msgpack."""
    assert payload[0] == 0x92 and payload[1] == 0xCB, "array of 2 starting with a float64"
    batch = msgpack.unpackb(payload, raw=False)
    assert msgpack.packb(batch, use_bin_type=True) == payload
    assert isinstance(batch, list) and len(batch) == 2
    ts, events = batch
    assert isinstance(ts, float) and abs(ts - time.time()) < 3600
    assert isinstance(events, list) and len(events) > 0
    for event in events:
        check_event(event)
    return events


def check_replicas(replicas):
    assert isinstance(replicas, list)
    for pair in replicas:
        assert isinstance(pair, list) and len(pair) == 2
        assert pair[0] in REPLICA_TYPES and isinstance(pair[1], str)


def check_event(event):
    assert isinstance(event, list) and isinstance(event[0], str)
    kind = event[0]
    if kind == "BlockStoreEvent":
        assert len(event) == 8
        _, key, replicas, model, block_size, block_hash, parent, tokens = event
        assert isinstance(key, str) and isinstance(model, str)
        check_replicas(replicas)
        assert isinstance(block_size, int) and 0 <= block_size <= U32_MAX
        assert isinstance(block_hash, str) and isinstance(parent, str)
        assert isinstance(tokens, list)
        assert all(isinstance(t, int) and 0 <= t <= U32_MAX for t in tokens)
    elif kind == "BlockUpdateEvent":
        assert len(event) == 3
        assert isinstance(event[1], str)
        check_replicas(event[2])
    else:
        assert kind == "RemoveAllEvent" and event == ["RemoveAllEvent"]


def recv_events(sock, topic, count, first_seq):
    """Receives batches until `count` events; seqs must run on from first_seq."""
    events, seq = [], first_seq
    while len(events) < count:
        got, batch = recv_batch(sock, topic)
        assert got == seq, f"seq {got}, expected {seq}"
        seq += 1
        events += batch
    assert len(events) == count
    return events, seq


def replay(dealer, start_seq):
    """Sends one request; returns [(seq, events)] up to the end marker."""
    dealer.send_multipart([b"", start_seq.to_bytes(8, "big")])
    out = []
    while True:
        assert dealer.poll(WAIT_S * 1000), "replay stalled"
        frames = dealer.recv_multipart()
        assert len(frames) == 3 and frames[0] == b""
        if frames[1] == FF8:
            assert frames[2] == FF8  # the seed's marker and vLLM's at once
            return out
        out.append((int.from_bytes(frames[1], "big"), check_payload(frames[2])))


def wait_kept(p, seq):
    deadline = time.monotonic() + WAIT_S
    while (p.events_info()["replay"]["newest_seq"] or -1) < seq:
        assert time.monotonic() < deadline
        time.sleep(0.01)


# --------------------------------------------------------------------------


def test_three_events_field_counts_and_types(plane):
    p = plane()
    sub = p.subscriber()
    seq = p.ready(sub)
    block = {"model_name": "llama2-7b", "block_size": 512, "block_hash": "0x41234125",
             "parent_block_hash": "0x51512342", "token_ids": [1, 2, 3, 4, 5, U32_MAX]}
    p.put("with-info", block=block)
    p.put("no-info")
    assert p.client.mount_segment("seg1", 1 << 30, base=0x80000000,
                                  endpoint="10.0.0.2:6000").status_code == 0
    p.put("two", replica_num=2)
    assert p.client.unmount_segment("seg1").status_code == 0
    p.client.remove_all(force=True)
    events, _ = recv_events(sub, p.topic, 5, seq)
    stored = {e[1]: e for e in events if e[0] == "BlockStoreEvent"}
    assert stored["with-info"][2] == [["memory", "10.0.0.1:6000"]]
    assert stored["with-info"][3:] == ["llama2-7b", 512, "0x41234125", "0x51512342",
                                       [1, 2, 3, 4, 5, U32_MAX]]
    assert stored["no-info"][3:] == ["", 0, "", "", []]  # StoreEventInfo unset
    assert len(stored["two"][2]) == 2
    updates = [e for e in events if e[0] == "BlockUpdateEvent"]
    assert updates == [["BlockUpdateEvent", "two", [["memory", "10.0.0.1:6000"]]]]
    assert events[-1] == ["RemoveAllEvent"]
    info = p.events_info()
    by_type = info["events_by_type"]
    assert by_type["BlockStoreEvent"] == 3 + p.probes
    assert by_type["BlockUpdateEvent"] == 1 and by_type["RemoveAllEvent"] == 1


def test_seq_contiguous_under_load(plane):
    p = plane()
    sub = p.subscriber()
    seq = p.ready(sub)
    keys = [f"load-{i}" for i in range(3000)]
    for i in range(0, len(keys), 100):
        chunk = keys[i:i + 100]
        p.client.batch_put_start([(k, 4096) for k in chunk])
        p.client.batch_put_end(chunk)
    events, next_seq = recv_events(sub, p.topic, len(keys), seq)
    assert [e[1] for e in events] == keys
    info = p.events_info()
    assert info["seq"] == next_seq and info["last_seq"] == next_seq - 1
    assert info["send_drops"] == 0
    status, body = http_get(p.daemon.port, "/metrics")
    metrics = body.decode()
    assert f"crescent_publisher_seq {next_seq}\n" in metrics
    assert re.search(r"^crescent_publisher_batches_total \d+$", metrics, re.M)
    assert re.search(r"^crescent_replay_sessions_total 0$", metrics, re.M)


def test_lone_event_is_not_held(plane):
    p = plane("--event-flush-us", "1000")
    sub = p.subscriber()
    seq = p.ready(sub)
    start = time.monotonic()
    p.put("lone")
    events, _ = recv_events(sub, p.topic, 1, seq)
    assert events[0][1] == "lone"
    assert time.monotonic() - start < 1.0


def test_replay_from_zero_middle_and_beyond(plane):
    p = plane("--event-batch-max", "1")
    sub = p.subscriber()
    seq = p.ready(sub)
    for i in range(20):
        p.put(f"r-{i}")
    _, next_seq = recv_events(sub, p.topic, 20, seq)
    newest = next_seq - 1
    wait_kept(p, newest)
    d = p.dealer()
    got = replay(d, 0)
    assert [s for s, _ in got] == list(range(newest + 1))
    assert [e[1] for _, ev in got[-20:] for e in ev] == [f"r-{i}" for i in range(20)]
    got = replay(d, newest - 4)
    assert [s for s, _ in got] == list(range(newest - 4, newest + 1))
    assert replay(d, newest + 1) == []
    assert replay(d, 2**63) == []
    info = p.events_info()["replay"]
    assert info["sessions_served"] == 4 and info["sessions_clamped"] == 0
    assert info["oldest_seq"] == 0 and info["newest_seq"] == newest


def test_replay_before_oldest_kept_and_malformed(plane):
    p = plane("--event-batch-max", "1", "--replay-batches", "5")
    sub = p.subscriber()
    seq = p.ready(sub)
    for i in range(12):
        p.put(f"o-{i}")
    _, next_seq = recv_events(sub, p.topic, 12, seq)
    newest = next_seq - 1
    wait_kept(p, newest)
    d = p.dealer()
    got = replay(d, 0)
    assert [s for s, _ in got] == list(range(newest - 4, newest + 1))
    # Malformed: a short seq; three frames after the delimiter.
    for frames in ([b"", b"abc"], [b"", b"\0" * 8, b"extra"], [b"x", b"\0" * 8]):
        d.send_multipart(frames)
        assert d.poll(WAIT_S * 1000)
        assert d.recv_multipart() == [b"", FF8, FF8]
    info = p.events_info()["replay"]
    assert info["sessions_clamped"] == 1
    assert info["malformed_requests"] == 3
    assert info["batches_kept"] == 5 and info["oldest_seq"] == newest - 4


def test_topic_filter(plane):
    p = plane(topic="kv-tenant-a")
    good = p.subscriber()
    other = p.subscriber(topic=b"mooncake")
    everything = p.subscriber(topic=b"")
    p.ready(good)
    p.ready(everything)
    p.put("filtered")
    for sock in (good, everything):  # every message carries the configured topic
        keys = []
        while "filtered" not in keys:
            _, events = recv_batch(sock, b"kv-tenant-a")
            keys += [e[1] for e in events]
    # None reached the subscriber of another topic (probes included).
    assert other.poll(200) == 0


def test_many_replay_clients_while_publishing(plane):
    p = plane("--event-batch-max", "1")
    sub = p.subscriber()
    seq = p.ready(sub)
    for i in range(300):
        p.put(f"m-{i}")
    _, next_seq = recv_events(sub, p.topic, 300, seq)
    wait_kept(p, next_seq - 1)
    writer_client = MasterClient(p.rpc, timeout=WAIT_S)
    stop = threading.Event()
    written = []

    def writer():
        i = 0
        while not stop.is_set() and i < 2000:
            s, e = writer_client.put(f"w-{i}", 4096)
            assert s.status_code == 0 and e.status_code == 0
            written.append(i)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    results = {}

    def replayer(n):
        d = p.dealer()
        results[n] = replay(d, 0)
        d.close()

    threads = [threading.Thread(target=replayer, args=(n,)) for n in range(24)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(WAIT_S * 3)
    stop.set()
    t.join(WAIT_S * 3)
    writer_client.close()
    assert len(results) == 24
    for got in results.values():
        seqs = [s for s, _ in got]
        assert seqs == list(range(len(seqs))) and len(seqs) >= next_seq
    events, _ = recv_events(sub, p.topic, len(written), next_seq)
    assert [e[1] for e in events] == [f"w-{i}" for i in written]
    info = p.events_info()["replay"]
    assert info["sessions_served"] == 24 and info["clients_dropped"] == 0


def run_follower(p, *args):
    return subprocess.Popen([binary("crescentctl"), "events", "--follow", "--sub", p.pub,
                             "--replay", p.replay, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_crescentctl_follow_from_replays_then_follows(plane):
    p = plane("--event-batch-max", "1")
    sub = p.subscriber()
    seq = p.ready(sub)
    for i in range(10):
        p.put(f"before-{i}")
    _, next_seq = recv_events(sub, p.topic, 10, seq)
    wait_kept(p, next_seq - 1)
    total = next_seq + 5  # every batch from 0, one event each
    proc = run_follower(p, "--from", "0", "--count", str(total))
    # Live puts until the follower has them all; it must neither skip nor repeat.
    i = 0
    deadline = time.monotonic() + WAIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        if i < 5:
            p.put(f"after-{i}")
            i += 1
        else:
            time.sleep(0.01)
    out, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [e["seq"] for e in lines] == list(range(total))
    keys = [e["key"] for e in lines if e["type"] == "BlockStoreEvent"]
    assert keys[-15:] == [f"before-{i}" for i in range(10)] + [f"after-{i}" for i in range(5)]
    assert lines[-1]["replicas"] == [{"type": "memory", "location": "10.0.0.1:6000"}]


class LineReader:
    """Collects a process's stdout lines on a thread, so a test can wait for one."""

    def __init__(self, stream):
        self.lines = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.thread.start()

    def _run(self, stream):
        for line in stream:
            with self.cond:
                self.lines.append(json.loads(line))
                self.cond.notify_all()

    def wait_for(self, predicate, timeout_s=0.05):
        with self.cond:
            return self.cond.wait_for(lambda: any(predicate(e) for e in self.lines), timeout_s)


def test_restart_resets_seq_to_zero(daemon):
    """crescentd numbers batches from 0 on every start (documented); a
    follower sees seq go backwards and says so on stderr.

    A follower cannot tell a new run whose first batch it sees carries exactly
    the next seq it expects (events_follow.h), and it sees the new run only
    once its SUB has reconnected, after however many batches the load allows.
    So the first life numbers up to first_life_batches and waits
    until the follower has the last of them; the second life then stays
    below that number: every batch of it the follower can see is numbered
    behind what it expects, and the restart must be reported."""
    first_life_batches = 240  # the second life's budget: 240 puts, 0.25 s each
    ports = (endpoint(), endpoint(), endpoint())
    p = Plane(daemon, "--event-batch-max", "1", ports=ports)
    follower = run_follower(p)
    reader = LineReader(follower.stdout)
    try:
        deadline = time.monotonic() + SLOW_S
        n = 0
        while not reader.wait_for(lambda e: e.get("key", "").startswith("first-")):
            assert time.monotonic() < deadline, "the follower saw nothing"
            p.put(f"first-{n}")
            n += 1
        while p.events_info()["seq"] < first_life_batches:
            p.put(f"first-{n}")
            n += 1
        last = f"first-{n - 1}"
        assert reader.wait_for(lambda e: e.get("key") == last, SLOW_S), \
            "the follower never caught up with the first life"
        expected_next = p.events_info()["seq"]
        p.client.close()
        code, _ = p.daemon.stop()
        assert code == 0
        # Same endpoints: the follower's sockets reconnect by themselves.
        p2 = Plane(daemon, "--event-batch-max", "1", ports=ports)
        p2.put("second-0")
        # The put answers before its event reaches the publisher and replay.
        info = _until(lambda: p2.events_info()["replay"]["newest_seq"] is not None,
                      p2.events_info, "the new life's first batch never reached replay")
        assert info["seq"] == 1 and info["last_seq"] == 0  # numbering restarted at 0
        d = p2.dealer()
        got = replay(d, 0)
        assert got[0][0] == 0 and got[0][1][0][1] == "second-0"
        n = 1
        while not reader.wait_for(lambda e: e.get("key", "").startswith("second-"), 0.25):
            assert p2.events_info()["seq"] < expected_next, \
                f"the follower printed none of the new life's batches 0..{expected_next - 1}"
            p2.put(f"second-{n}")
            n += 1
        p2.close()
    finally:
        follower.send_signal(signal.SIGTERM)
        follower.wait(timeout=WAIT_S)
        err = follower.stderr.read()
        p.ctx.destroy(linger=0)
    assert re.search(r"seq went back from \d+ to \d+: crescentd restarted", err), err


def test_bind_failure_names_the_address():
    holder = zmq.Context().socket(zmq.PUB)
    port = holder.bind_to_random_port("tcp://127.0.0.1")
    busy = f"tcp://127.0.0.1:{port}"
    try:
        proc = subprocess.run(
            [binary("crescentd"), "--no-pin", "--http-address", f"127.0.0.1:{free_port()}",
             "--rpc-address", endpoint(), "--event-address", busy,
             "--rpc-tcp-address", f"127.0.0.1:{free_port()}",
             "--replay-address", endpoint()],
            capture_output=True, text=True, timeout=WAIT_S)
    finally:
        holder.close(linger=0)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr  # one line naming it
    lines = [line for line in proc.stderr.splitlines() if busy in line]
    assert lines and "cannot bind" in lines[0], proc.stderr
