"""The prefix indexer over HTTP, fed by fake engines (kv_publishers.py):
vLLM array and map dialects, SGLang, the store; answers checked against
hashes computed here; gaps recovered by replay in every reply layout; a
restart; registration at run time under load; errors; /route and /load."""
import json
import os
import subprocess
import threading
import time
import urllib.request

import msgpack
import pytest

import kv_publishers as kp
from conftest import binary, free_port, wait_for

BS = 16


def post(port, path, body, content_type="application/json", timeout=5):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method="POST",
                                 headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def post_json(port, path, body):
    status, raw = post(port, path, body)
    return status, json.loads(raw)


def get_json(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return json.loads(r.read())


SLOW_S = 60.0  # waits for what a loaded machine may take long over: only a hang reaches it


def service(port, instance, tenant="default", dp=0):
    for s in get_json(port, "/services")["services"]:
        if (s["instance_id"], s["tenant_id"], s["dp_rank"]) == (instance, tenant, dp):
            return s
    return None


_started = []


@pytest.fixture(autouse=True)
def clean_exit():
    """Every crescentd a test started must stop cleanly (exit 0, no sanitizer report)."""
    _started.clear()
    yield
    for d in _started:
        code, err = d.stop()
        assert code == 0 and "Sanitizer" not in err, err[-3000:]


def start(daemon, *extra):
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{free_port()}",
                  "--event-address", f"tcp://127.0.0.1:{free_port()}",
                  "--replay-address", f"tcp://127.0.0.1:{free_port()}", *extra)
    _started.append(d)
    return d


def register(port, pub, instance, model="m", tenant="default", dp=0, kind="vLLM", bs=BS,
             replay=True, lora="", salt=""):
    body = {"endpoint": pub.endpoint, "type": kind, "modelname": model, "tenant_id": tenant,
            "instance_id": instance, "block_size": bs, "dp_rank": dp, "lora_name": lora,
            "additionalsalt": salt}
    if replay and pub.replay_endpoint:
        body["replay_endpoint"] = pub.replay_endpoint
    status, answer = post_json(port, "/register", body)
    assert status == 200, answer
    assert answer == {"status": "registered successfully", "instance_id": instance}
    connect(port, pub, instance, tenant, dp)
    # The first-subscribe replay (and a late SUB's gap replay) are over: tests
    # that wait for a replay request wait for the next one.
    pub.replay_seen.clear()


def connect(port, pub, instance, tenant="default", dp=0, dialect="vllm"):
    """SUB connects asynchronously: publish empty batches until one arrives
    live (the first-subscribe replay may have answered before the SUB joined)."""
    def seen():
        pub.send(kp.batch([], dialect))
        s = service(port, instance, tenant, dp)
        return (s is not None and s["last_seq"] is not None and
                s["counters"]["batches"] > s["counters"]["replayed_batches"])
    wait_for(seen, f"{instance} to receive its first batch")


def applied(port, pub, instance, tenant="default", dp=0):
    """Waits until the indexer has taken every batch the publisher numbered."""
    wait_for(lambda: (service(port, instance, tenant, dp) or {}).get("last_seq") == pub.seq - 1
             and not service(port, instance, tenant, dp)["replaying"],
             f"{instance} to apply seq {pub.seq - 1}")


def query(port, tokens, model="m", tenant=None, bs=BS, **extra):
    body = {"model": model, "token_ids": tokens, "block_size": bs, **extra}
    if tenant is not None:
        body["tenant_id"] = tenant
    status, answer = post_json(port, "/query", body)
    assert status == 200, answer
    return answer


def tokens_of(n, base=1000):
    return [base + i for i in range(n)]


def expect(tokens_matched, medium="GPU", dp=0):
    out = {"longest_matched": tokens_matched, "GPU": 0, "CPU": 0, "DISK": 0,
           "DP": {str(dp): tokens_matched}}
    out[medium] = tokens_matched
    return out


@pytest.fixture
def pubs():
    made = []

    def make(**kw):
        p = kp.Publisher(**kw)
        made.append(p)
        return p
    yield make
    for p in made:
        p.close()


def test_vllm_array_chain_and_queries(daemon, pubs):
    d = start(daemon)
    pub = pubs()
    register(d.port, pub, "vllm-a")
    toks = tokens_of(6 * BS + 5)  # six complete blocks and a partial one
    hashes = [11, 12, 13, 14, 15, 16]
    pub.send(kp.batch([kp.vllm_stored(hashes[:4], None, toks[:4 * BS], BS)]))
    # The next run continues the chain from its parent (engine hash 14).
    pub.send(kp.batch([kp.vllm_stored(hashes[4:], 14, toks[4 * BS:6 * BS], BS)]))
    applied(d.port, pub, "vllm-a")

    assert query(d.port, toks) == {"default": {"vllm-a": expect(6 * BS)}}
    # The scan stops at the first miss: block 2 differs.
    other = toks[:2 * BS] + [7] * (4 * BS)
    assert query(d.port, other) == {"default": {"vllm-a": expect(2 * BS)}}
    # By hash, with hashes computed here from the standard (independent XXH3).
    seq = kp.seq_hashes(toks, BS)
    assert len(seq) == 6
    status, answer = post_json(d.port, "/query_by_hash",
                               {"model": "m", "block_size": BS, "seq_hashes": seq[:5]})
    assert status == 200 and answer == {"default": {"vllm-a": expect(5 * BS)}}
    status, answer = post_json(d.port, "/query_by_hash",
                               {"model": "m", "block_size": BS,
                                "block_hash": [str(h) for h in seq[:3]]})
    assert status == 200 and answer == {"default": {"vllm-a": expect(3 * BS)}}
    # Removal of block 3 cuts the prefix there.
    pub.send(kp.batch([kp.vllm_removed([14])]))
    applied(d.port, pub, "vllm-a")
    assert query(d.port, toks) == {"default": {"vllm-a": expect(3 * BS)}}
    # Isolation: another tenant, model, LoRA, salt or block size sees nothing.
    assert query(d.port, toks, tenant="other") == {}
    assert query(d.port, toks, model="m2") == {}
    assert query(d.port, toks, lora_name="adapter") == {}
    assert query(d.port, toks, cache_salt="s") == {}
    assert query(d.port, toks[:96], bs=32) == {}


def test_vllm_map_sglang_media_dp_and_filter(daemon, pubs):
    d = start(daemon)
    vllm, sgl = pubs(replay_layout="topic"), pubs()
    register(d.port, vllm, "vllm-map")
    register(d.port, sgl, "sglang", dp=1)
    toks = tokens_of(4 * BS)
    vllm.send(kp.batch([kp.map_stored([1, 2, 3, 4], None, toks, BS, medium="cpu")], "map"))
    # SGLang: one BlockStored per page, signed int64 hashes, attn_dp_rank.
    sh = [kp.signed((1 << 64) - 5 - i) for i in range(3)]
    events = [kp.map_stored([sh[0]], None, toks[:BS], BS)]
    events += [kp.map_stored([sh[i]], sh[i - 1], toks[i * BS:(i + 1) * BS], BS) for i in (1, 2)]
    sgl.send(kp.batch(events, "sglang", dp_rank=1))
    applied(d.port, vllm, "vllm-map")
    applied(d.port, sgl, "sglang", dp=1)

    assert query(d.port, toks) == {"default": {"vllm-map": expect(4 * BS, "CPU"),
                                               "sglang": expect(3 * BS, dp=1)}}
    assert query(d.port, toks, instance_id="sglang") == {"default": {"sglang": expect(3 * BS, dp=1)}}
    assert query(d.port, toks, instance_id="nobody") == {}
    # Sliding-window groups are not prefix caches: skipped.
    vllm.send(kp.batch([kp.vllm_stored([9], None, tokens_of(BS, 5), BS,
                                       spec_kind="sliding_window", group_idx=1)]))
    applied(d.port, vllm, "vllm-map")
    assert query(d.port, tokens_of(BS, 5)) == {}
    assert service(d.port, "vllm-map")["counters"]["skipped_groups"] == 1
    # AllBlocksCleared clears only that publisher.
    vllm.send(kp.batch([kp.vllm_cleared()]))
    applied(d.port, vllm, "vllm-map")
    assert query(d.port, toks) == {"default": {"sglang": expect(3 * BS, dp=1)}}


def test_store_dialect_publisher(daemon, pubs):
    d = start(daemon)
    pub = pubs(topic=b"mooncake", replay_layout="store")
    register(d.port, pub, "store-1", kind="Mooncake", tenant="t1")
    toks = tokens_of(2 * BS, 50)
    pub.send(kp.batch([kp.store_block("k0", toks[:BS], BS, "h0", "", "m"),
                       kp.store_block("k1", toks[BS:], BS, "h1", "h0", "m",
                                      replicas=[("disk", "/d/1")])], "store"))
    applied(d.port, pub, "store-1", tenant="t1")
    got = query(d.port, toks, tenant="t1")
    assert got == {"t1": {"store-1": {"longest_matched": 2 * BS, "GPU": 0, "CPU": BS,
                                      "DISK": BS, "DP": {"0": 2 * BS}}}}
    # The replica of k0 moves to disk.
    pub.send(kp.batch([kp.store_update("k0", [("local_disk", "/d/0")])], "store"))
    applied(d.port, pub, "store-1", tenant="t1")
    assert query(d.port, toks, tenant="t1")["t1"]["store-1"]["DISK"] == 2 * BS
    pub.send(kp.batch([kp.store_remove_all()], "store"))
    applied(d.port, pub, "store-1", tenant="t1")
    assert query(d.port, toks, tenant="t1") == {}


@pytest.mark.parametrize("layout", ["vllm", "topic", "store"])
def test_gap_recovered_by_replay(daemon, pubs, layout):
    d = start(daemon)
    pub = pubs(replay_layout=layout)
    register(d.port, pub, "r")
    before = service(d.port, "r")["counters"]  # the first-subscribe replay, a late SUB's gap
    toks = tokens_of(3 * BS)
    pub.send(kp.batch([kp.vllm_stored([1], None, toks[:BS], BS)]))
    lost = pub.send(kp.batch([kp.vllm_stored([2], 1, toks[BS:2 * BS], BS)]), deliver=False)
    pub.send(kp.batch([kp.vllm_stored([3], 2, toks[2 * BS:], BS)]))
    applied(d.port, pub, "r")
    assert query(d.port, toks) == {"default": {"r": expect(3 * BS)}}
    # The request carried the empty delimiter frame and started at the lost seq.
    assert [b"", kp.be64(lost)] in pub.replay_requests
    s = service(d.port, "r")
    assert s["counters"]["gaps"] - before["gaps"] == 1
    assert s["counters"]["replays"] - before["replays"] == 1
    assert s["possibly_stale"] is False
    # Batches after the lost one came twice (replay and live): applied once.
    assert s["counters"]["duplicates"] >= 1


def test_live_batches_queued_during_replay_are_duplicates(daemon, pubs):
    d = start(daemon)
    pub = pubs()
    register(d.port, pub, "q")
    toks = tokens_of(4 * BS)
    pub.send(kp.batch([kp.vllm_stored([1], None, toks[:BS], BS)]))
    pub.replay_gate.clear()
    pub.send(kp.batch([kp.vllm_stored([2], 1, toks[BS:2 * BS], BS)]), deliver=False)
    pub.send(kp.batch([kp.vllm_stored([3], 2, toks[2 * BS:3 * BS], BS)]))
    assert pub.replay_seen.wait(SLOW_S)
    # Published while the replay is held: queued on SUB, and also in the replay.
    pub.send(kp.batch([kp.vllm_stored([4], 3, toks[3 * BS:], BS)]))
    pub.replay_gate.set()
    applied(d.port, pub, "q")
    wait_for(lambda: service(d.port, "q")["counters"]["duplicates"] >= 2, "duplicates")
    s = service(d.port, "q")
    assert s["counters"]["restarts"] == 0 and s["possibly_stale"] is False
    assert query(d.port, toks) == {"default": {"q": expect(4 * BS)}}


def test_gap_without_replay_flags_stale(daemon, pubs):
    d = start(daemon)
    pub = pubs(replay_layout=None)
    register(d.port, pub, "n", replay=False)
    pub.send(kp.batch([]), deliver=False)
    pub.send(kp.batch([]))
    applied(d.port, pub, "n")
    assert service(d.port, "n")["possibly_stale"] is True
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{d.port}/metrics", timeout=5).read()
    assert b"crescent_indexer_publishers_possibly_stale 1" in metrics


def test_publisher_restart_clears_its_blocks(daemon, pubs):
    d = start(daemon)
    pub = pubs()
    register(d.port, pub, "e")
    old, new = tokens_of(BS, 1), tokens_of(BS, 900)
    for _ in range(3):
        pub.send(kp.batch([]))
    pub.send(kp.batch([kp.vllm_stored([5], None, old, BS)]))
    applied(d.port, pub, "e")
    assert query(d.port, old) == {"default": {"e": expect(BS)}}
    pub.restart()
    pub.send(kp.batch([kp.vllm_stored([5], None, new, BS)]))
    applied(d.port, pub, "e")
    assert query(d.port, old) == {}
    assert query(d.port, new) == {"default": {"e": expect(BS)}}
    assert service(d.port, "e")["counters"]["restarts"] == 1


def test_malformed_batches_are_counted_not_applied(daemon, pubs):
    d = start(daemon)
    pub = pubs()
    register(d.port, pub, "bad")
    toks = tokens_of(2 * BS)
    good = kp.vllm_stored([1], None, toks[:BS], BS)
    wrong = kp.vllm_stored([2], 1, toks[BS:BS + 3], BS)  # 3 tokens for one block of 16
    pub.send(kp.batch([good, wrong]))
    pub.send(b"\x93\xcb")  # truncated msgpack
    applied(d.port, pub, "bad")
    assert service(d.port, "bad")["counters"]["malformed_batches"] == 2
    assert query(d.port, toks) == {}  # nothing of the bad batch was applied


def test_http_errors_and_unknowns(daemon):
    d = start(daemon)
    cases = [b"{not json", json.dumps({"token_ids": [1], "block_size": 16}).encode(),
             json.dumps({"model": "m", "token_ids": [1], "block_size": 0}).encode(),
             json.dumps({"model": "m", "token_ids": "x", "block_size": 16}).encode(),
             json.dumps({"model": 3, "token_ids": [1], "block_size": 16}).encode(),
             json.dumps({"model": "m", "token_ids": [-1], "block_size": 16}).encode()]
    for body in cases:
        status, raw = post(d.port, "/query", body)
        answer = json.loads(raw)
        assert status == 400 and set(answer) == {"error", "detail"}, (body, answer)
    status, raw = post(d.port, "/query_by_hash", {"model": "m", "block_size": 16})
    assert status == 400
    status, raw = post(d.port, "/register", {"endpoint": "tcp://127.0.0.1:1", "modelname": "m",
                                             "instance_id": "x", "block_size": 0})
    assert status == 400 and "block_size" in json.loads(raw)["detail"]
    status, raw = post(d.port, "/unregister", {"instance_id": "ghost"})
    assert status == 404
    assert query(d.port, tokens_of(64), tenant="nobody", model="none") == {}
    # Hashes above 2^63 as bare JSON integers are accepted.
    status, raw = post(d.port, "/query_by_hash", b'{"model":"m","block_size":16,'
                                                 b'"seq_hashes":[18446744073709551615]}')
    assert status == 200 and json.loads(raw) == {}


def test_query_in_msgpack(daemon, pubs):
    d = start(daemon)
    pub = pubs()
    register(d.port, pub, "mp")
    toks = tokens_of(2 * BS)
    pub.send(kp.batch([kp.vllm_stored([1, 2], None, toks, BS)]))
    applied(d.port, pub, "mp")
    body = msgpack.packb({"model": "m", "token_ids": toks, "block_size": BS})
    status, raw = post(d.port, "/query", body, content_type="application/msgpack")
    assert status == 200
    assert msgpack.unpackb(raw) == {"default": {"mp": expect(2 * BS)}}
    status, raw = post(d.port, "/query", b"\xdd\xff\xff\xff\xff", "application/msgpack")
    assert status == 400


def test_top_k_names_the_longest_matches_only(daemon, pubs):
    d = start(daemon)
    toks = tokens_of(4 * BS)
    depth = {"i1": 1, "i2": 3, "i3": 3, "i4": 4}  # i2 and i3 tie
    for name, blocks in depth.items():
        pub = pubs()
        register(d.port, pub, name)
        pub.send(kp.batch([kp.vllm_stored(list(range(1, blocks + 1)), None,
                                          toks[:blocks * BS], BS)]))
        applied(d.port, pub, name)
    full = query(d.port, toks)["default"]
    assert full == {n: expect(b * BS) for n, b in depth.items()}
    order = list(full)  # the answer's own order: top_k keeps it
    for k, names in ((1, {"i4"}), (3, {"i4", "i2", "i3"}), (4, set(depth)), (9, set(depth))):
        top = query(d.port, toks, top_k=k)["default"]
        assert set(top) == names and list(top) == [n for n in order if n in names]
        assert all(top[n] == full[n] for n in top)
    # A tie at the cut goes to the instance the full answer names first.
    tied = [n for n in order if n in ("i2", "i3")]
    assert set(query(d.port, toks, top_k=2)["default"]) == {"i4", tied[0]}
    status, r = post_json(d.port, "/route", {"model": "m", "token_ids": toks,
                                             "block_size": BS, "top_k": 1})
    assert status == 200 and r["instance_id"] == "i4" and list(r["matches"]["default"]) == ["i4"]
    body = msgpack.packb({"model": "m", "token_ids": toks, "block_size": BS, "top_k": 1})
    status, raw = post(d.port, "/query", body, content_type="application/msgpack")
    assert status == 200 and msgpack.unpackb(raw) == {"default": {"i4": expect(4 * BS)}}
    for bad in (0, 65537, "2", 1.5):
        status, answer = post_json(d.port, "/query", {"model": "m", "token_ids": toks,
                                                      "block_size": BS, "top_k": bad})
        assert status == 400 and "'top_k' must be an integer from 1 to 65536" in answer["detail"]


def test_route_uses_overlap_and_load_and_counts_hit_rate(daemon, pubs):
    d = start(daemon)
    a, b = pubs(), pubs()
    register(d.port, a, "a")
    register(d.port, b, "b")
    toks = tokens_of(4 * BS)
    a.send(kp.batch([kp.vllm_stored([1, 2, 3, 4], None, toks, BS)]))
    applied(d.port, a, "a")
    status, r = post_json(d.port, "/route", {"model": "m", "token_ids": toks, "block_size": BS})
    assert status == 200 and r["instance_id"] == "a" and r["longest_matched"] == 4 * BS
    assert r["candidates"] == 2 and r["request_tokens"] == 4 * BS
    assert r["matches"] == {"default": {"a": expect(4 * BS)}}
    # a is full: b wins despite the overlap.
    assert post_json(d.port, "/load", {"instance_id": "a", "kv_active_blocks": 100,
                                       "kv_total_blocks": 100, "num_requests_waiting": 9})[0] == 200
    assert post_json(d.port, "/load", {"instance_id": "b", "metrics": {
        "kv_active_blocks": 1, "kv_total_blocks": 100}})[0] == 200
    status, r = post_json(d.port, "/route", {"model": "m", "token_ids": toks, "block_size": BS})
    assert r["instance_id"] == "b" and r["longest_matched"] == 0
    sa, sb = service(d.port, "a"), service(d.port, "b")
    assert sa["route"] == {"requests": 1, "request_tokens": 64, "hit_tokens": 64, "hit_rate": 1.0}
    assert sb["route"]["requests"] == 1 and sb["route"]["hit_tokens"] == 0
    assert get_json(d.port, "/global_view")["route"]["hit_rate"] == 0.5


def test_register_unregister_under_load(daemon, pubs):
    d = start(daemon)
    base = pubs()
    register(d.port, base, "base")
    toks = tokens_of(8 * BS)
    base.send(kp.batch([kp.vllm_stored(list(range(1, 9)), None, toks, BS)]))
    applied(d.port, base, "base")
    failures, stop = [], threading.Event()

    def hammer():
        while not stop.is_set():
            try:
                got = query(d.port, toks)
                if got["default"]["base"]["longest_matched"] != 8 * BS:
                    failures.append(got)
            except Exception as e:  # noqa: BLE001 - any failure fails the test
                failures.append(repr(e))
    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(8):
            p = pubs()
            register(d.port, p, f"tmp{i}")
            p.send(kp.batch([kp.vllm_stored([1, 2], None, toks[:2 * BS], BS)]))
            applied(d.port, p, f"tmp{i}")
            assert f"tmp{i}" in query(d.port, toks)["default"]
            status, answer = post_json(d.port, "/unregister", {"instance_id": f"tmp{i}"})
            assert status == 200
            assert answer == {"status": "unregistered successfully",
                              "removed_instances": [f"tmp{i}|default|0"]}
            assert f"tmp{i}" not in query(d.port, toks)["default"]
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert failures == []
    assert get_json(d.port, "/global_view")["instances"] == 1


def test_static_config_file_and_env(daemon, pubs, tmp_path):
    pub = pubs()
    conf = tmp_path / "conductor_config.json"
    conf.write_text(json.dumps({"http_server_port": 13333, "kvevent_instance": {
        "static-1": {"endpoint": pub.endpoint, "replay_endpoint": pub.replay_endpoint,
                     "type": "vLLM", "modelname": "m", "tenant_id": "default",
                     "block_size": BS, "dp_rank": 0}}}))
    os.environ["CONDUCTOR_CONFIG_PATH"] = str(conf)
    try:
        d = start(daemon)
    finally:
        del os.environ["CONDUCTOR_CONFIG_PATH"]
    connect(d.port, pub, "static-1")
    toks = tokens_of(BS)
    pub.send(kp.batch([kp.vllm_stored([1], None, toks, BS)]))
    applied(d.port, pub, "static-1")
    assert query(d.port, toks) == {"default": {"static-1": expect(BS)}}


@pytest.mark.parametrize("text", ["{bad", '{"kvevent_instance": {"x": {"endpoint": "tcp://a:1"}}}',
                                  '{"kvevent_instance": {"x": {"endpoint": "nope://", '
                                  '"modelname": "m", "block_size": 16}}}',
                                  '{"kvevent_instance": {"x": {"endpoint": "tcp://*:5557", '
                                  '"modelname": "m", "block_size": 16, "bind": true}}}'])
def test_bad_static_config_exits_2(tmp_path, text):
    conf = tmp_path / "c.json"
    conf.write_text(text)
    proc = subprocess.run([binary("crescentd"), "--http-address", f"127.0.0.1:{free_port()}",
                           "--no-pin", "--indexer-config", str(conf),
                           "--rpc-address", f"tcp://127.0.0.1:{free_port()}",
                           "--rpc-tcp-address", f"127.0.0.1:{free_port()}",
                           "--event-address", f"tcp://127.0.0.1:{free_port()}",
                           "--replay-address", f"tcp://127.0.0.1:{free_port()}"],
                          capture_output=True, timeout=10)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.decode().splitlines() if "indexer config" in ln]
    assert len(lines) == 1 and str(conf) in lines[0]


def test_names_are_escaped_in_answers(daemon, pubs):
    d = start(daemon)
    pub = pubs()
    name = 'we"ird\\name\t1'
    register(d.port, pub, name, tenant='t"1')
    toks = tokens_of(BS)
    pub.send(kp.batch([kp.vllm_stored([1], None, toks, BS)]))
    applied(d.port, pub, name, tenant='t"1')
    assert query(d.port, toks, tenant='t"1') == {'t"1': {name: expect(BS)}}
    status, r = post_json(d.port, "/route", {"model": "m", "token_ids": toks, "block_size": BS,
                                             "tenant_id": 't"1'})
    assert status == 200 and r["instance_id"] == name


def test_publisher_bound_is_a_clear_error(daemon):
    d = start(daemon)
    body = {"endpoint": "tcp://127.0.0.1:9", "modelname": "m", "block_size": BS}
    for i in range(256):
        status, answer = post_json(d.port, "/register", {**body, "instance_id": f"p{i}"})
        assert status == 200, answer
    status, answer = post_json(d.port, "/register", {**body, "instance_id": "one-too-many"})
    assert status == 503 and "at most 256" in answer["detail"]
    assert len(get_json(d.port, "/services")["services"]) == 256
    status, _ = post_json(d.port, "/unregister", {"instance_id": "p0"})
    assert status == 200
    status, _ = post_json(d.port, "/register", {**body, "instance_id": "one-too-many"})
    assert status == 200


def test_standardized_events_with_seq_hashes(daemon, pubs):
    d = start(daemon)
    pub = pubs()
    register(d.port, pub, "std")
    toks = tokens_of(3 * BS, 70)
    seq = kp.seq_hashes(toks, BS)
    ev = {"event_id": 1, "timestamp": 1700000000000, "event_type": "stored", "model_name": "m",
          "block_size": BS, "seq_hashes": seq, "base_block_idx": 0, "parent_hash": None,
          "token_ids": toks, "medium": "DISK", "dp_rank": 0, "additional_salt": "",
          "lora_name": "", "tenant_id": "default", "backend_id": "b"}
    pub.send(msgpack.packb([int(time.time() * 1000), [ev], 0]))
    applied(d.port, pub, "std")
    assert query(d.port, toks) == {"default": {"std": expect(3 * BS, "DISK")}}
    rm = {"event_id": 2, "timestamp": 1700000000001, "event_type": "removed", "model_name": "m",
          "block_size": BS, "seq_hashes": seq[2:], "base_block_idx": 2}
    pub.send(msgpack.packb([int(time.time() * 1000), [rm], 0]))
    applied(d.port, pub, "std")
    assert query(d.port, toks) == {"default": {"std": expect(2 * BS, "DISK")}}


# ---- regressions found in review ----------------------------------------------


def test_restart_clears_every_dp_rank_the_engine_used(daemon, pubs):
    """Registered as dp_rank 0, the engine names rank 1 in its batches: a
    restart must clear the blocks filed under rank 1 too (engine hashes are
    per process, so nothing could remove them later)."""
    d = start(daemon)
    pub = pubs()
    register(d.port, pub, "e")
    old = tokens_of(BS, 1)
    pub.send(kp.batch([kp.vllm_stored([5], None, old, BS)], dp_rank=1))
    applied(d.port, pub, "e")
    assert query(d.port, old) == {"default": {"e": expect(BS, dp=1)}}
    pub.restart()
    pub.send(kp.batch([], dp_rank=1))
    applied(d.port, pub, "e")
    assert service(d.port, "e")["counters"]["restarts"] == 1
    assert query(d.port, old) == {}


def test_junk_contexts_cannot_starve_other_publishers(daemon, pubs):
    """Contexts are never reclaimed, so each publisher has a quota; a batch
    that would pass it is rejected whole (nothing of it applied), and other
    publishers keep working."""
    d = start(daemon)
    junk, good = pubs(), pubs()
    register(d.port, junk, "junk")
    register(d.port, good, "good")
    toks = tokens_of(BS, 1)
    first = [kp.vllm_stored([i + 1], None, toks, BS, lora_name=f"junk-{i}") for i in range(40)]
    junk.send(kp.batch(first))
    applied(d.port, junk, "junk")
    contexts = get_json(d.port, "/global_view")["contexts"]
    malformed = service(d.port, "junk")["counters"]["malformed_batches"]
    more = [kp.vllm_stored([i + 100], None, toks, BS, lora_name=f"more-{i}") for i in range(40)]
    junk.send(kp.batch(more))  # 40 + 40 > the quota of 64: rejected as a whole
    applied(d.port, junk, "junk")
    assert service(d.port, "junk")["counters"]["malformed_batches"] == malformed + 1
    assert get_json(d.port, "/global_view")["contexts"] == contexts
    assert query(d.port, toks, lora_name="more-0") == {}
    good.send(kp.batch([kp.vllm_stored([77], None, toks, BS)]))
    applied(d.port, good, "good")
    assert query(d.port, toks)["default"]["good"]["longest_matched"] == BS


def test_restart_inside_the_replayed_window_is_a_restart(daemon, pubs):
    """After a replay, live copies of replayed batches are duplicates, but an
    engine that restarted and whose new numbering lands inside the replayed
    seq window is a restart: its batches are newer than everything replayed.
    (It used to be dropped as duplicates, with the old blocks kept.)"""
    d = start(daemon)
    pub = pubs()
    register(d.port, pub, "w")
    old = tokens_of(BS, 1)
    pub.send(kp.batch([kp.vllm_stored([5], None, old, BS)]))
    applied(d.port, pub, "w")
    pub.replay_gate.clear()
    pub.send(kp.batch([]), deliver=False)          # lost: the next one starts a replay
    pub.send(kp.batch([]))
    assert pub.replay_seen.wait(SLOW_S)
    copies = [pub.send(kp.batch([])) for _ in range(2)]  # queued on SUB, also replayed
    for _ in range(6):
        pub.send(kp.batch([]), deliver=False)      # replayed only (SUB lost them)
    replayed_until = pub.seq - 1
    pub.replay_gate.set()
    applied(d.port, pub, "w")
    wait_for(lambda: service(d.port, "w")["counters"]["duplicates"] >= 1 + len(copies),
             "the live copies to be dropped")
    assert service(d.port, "w")["counters"]["restarts"] == 0
    # The engine restarts; the first batch of its new run that arrives is
    # numbered inside (last copy, replayed_until].
    pub.restart(first_seq=copies[-1] + 2)
    assert copies[-1] < pub.seq <= replayed_until
    new = tokens_of(BS, 900)
    pub.send(kp.batch([kp.vllm_stored([5], None, new, BS)]))
    applied(d.port, pub, "w")
    s = service(d.port, "w")
    assert s["counters"]["restarts"] == 1
    # The new run's earlier seqs are asked for from 0: this publisher started
    # its new run at first_seq, so its replay begins there (seqs below it
    # count as lost) and repeats the live batch (one more duplicate, or more
    # when the SUB's copies arrive after that replay).
    assert s["counters"]["duplicates"] >= 2 + len(copies)
    assert s["possibly_stale"] is True
    assert query(d.port, old) == {}
    assert query(d.port, new) == {"default": {"w": expect(BS)}}


def test_failed_registration_leaves_no_instance(daemon, pubs):
    """A /register refused for its endpoint leaves nothing in the instance
    table; refused again for a key that is registered, it keeps the old one."""
    d = start(daemon)
    body = {"endpoint": "nope://x", "modelname": "m", "block_size": BS, "instance_id": "typo"}
    status, answer = post_json(d.port, "/register", body)
    assert status == 400 and "nope://x" in answer["detail"]
    view = get_json(d.port, "/global_view")
    assert view["instances"] == 0 and view["instance_list"] == []
    pub = pubs()
    register(d.port, pub, "kept")
    status, _ = post_json(d.port, "/register", {**body, "instance_id": "kept"})
    assert status == 400
    assert service(d.port, "kept")["endpoint"] == pub.endpoint
    assert get_json(d.port, "/global_view")["instances"] == 1


def test_load_only_instance_is_counted_and_claimed_by_registration(daemon, pubs):
    """/load for an instance nobody registered makes a route candidate that
    counts against the load-only bound until a publisher registers for it."""
    d = start(daemon)

    def load_only():
        text = urllib.request.urlopen(f"http://127.0.0.1:{d.port}/metrics", timeout=5).read()
        line = [ln for ln in text.decode().splitlines()
                if ln.startswith("crescent_indexer_load_only_instances ")]
        return int(line[0].split()[1])
    assert post_json(d.port, "/load", {"instance_id": "solo", "kv_total_blocks": 10})[0] == 200
    status, r = post_json(d.port, "/route", {"model": "m", "token_ids": tokens_of(BS),
                                             "block_size": BS})
    assert status == 200 and r["instance_id"] == "solo" and r["candidates"] == 1
    assert load_only() == 1
    register(d.port, pubs(), "solo")
    assert load_only() == 0


def test_load_only_bound_is_a_clear_503(daemon):
    """Past 1024 instances known only from /load, a report for a new one is
    refused with 503 and an actionable detail; known ones still report."""
    d = start(daemon)
    for i in range(1024):
        assert post_json(d.port, "/load", {"instance_id": f"junk-{i}"})[0] == 200
    status, body = post_json(d.port, "/load", {"instance_id": "one-too-many"})
    assert status == 503
    assert body["error"] == "too many instances without a publisher"
    assert "1024" in body["detail"] and "register" in body["detail"]
    assert post_json(d.port, "/load", {"instance_id": "junk-7", "kv_total_blocks": 4})[0] == 200


def match_of(port, path, body):
    """The answer and its X-Crescent-Match header."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read()), r.headers.get("X-Crescent-Match")


def test_unknown_tenant_model_instance_told_apart_from_a_miss(daemon, pubs):
    d = start(daemon)
    toks = tokens_of(2 * BS)
    q = {"model": "m", "block_size": BS, "token_ids": toks}
    # Nothing registered: every tenant is unknown; the body keeps the
    # conductor's shape ({}) so routers written for it keep working.
    assert match_of(d.port, "/query", q) == ({}, "unknown-tenant")
    pub = pubs()
    register(d.port, pub, "vllm-a")
    pub.send(kp.batch([kp.vllm_stored([21], None, toks[:BS], BS)]))
    applied(d.port, pub, "vllm-a")
    hit = {"default": {"vllm-a": expect(BS)}}
    assert match_of(d.port, "/query", q) == (hit, "hit")
    seq = kp.seq_hashes(toks, BS)
    assert match_of(d.port, "/query_by_hash",
                    {"model": "m", "block_size": BS, "seq_hashes": seq}) == (hit, "hit")
    # Known context, prompt not held: a real miss.
    assert match_of(d.port, "/query", {**q, "token_ids": tokens_of(BS, base=5)}) == ({}, "miss")
    assert match_of(d.port, "/query", {**q, "tenant_id": "t2"}) == ({}, "unknown-tenant")
    for other in ({"model": "m2"}, {"block_size": 32}, {"lora_name": "adapter"},
                  {"cache_salt": "s"}):
        assert match_of(d.port, "/query", {**q, **other}) == ({}, "unknown-model"), other
    assert match_of(d.port, "/query", {**q, "instance_id": "ghost"}) == ({}, "unknown-instance")
    assert match_of(d.port, "/query", {**q, "instance_id": "vllm-a"}) == (hit, "hit")
    answer, header = match_of(d.port, "/route", {**q, "model": "m2"})
    assert answer["matches"] == {} and header == "unknown-model"
