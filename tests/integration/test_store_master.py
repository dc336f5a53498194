"""The store master over its RPC, driven as a foreign client (python3-zmq and
protobuf classes generated from proto/master.proto): two-phase puts, client
checks, leases, eviction, zombie puts, client liveness, malformed frames,
pipelining, bad input and the admin HTTP routes."""
import json
import socket
import struct
import subprocess
import threading
import time

import pytest
import zmq

from conftest import actors_by_name, binary, free_port, http_get
from master_client import STATUS, MasterClient, RpcError, load_proto

MiB = 1 << 20
A = (0xA, 1)  # client ids
B = (0xB, 2)


def start_master(daemon, *extra):
    """Starts crescentd on free ports; returns (daemon, rpc endpoint)."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--event-address", f"tcp://127.0.0.1:{free_port()}",
               "--replay-address", f"tcp://127.0.0.1:{free_port()}", *extra)
    return d, rpc


def stats(d):
    status, body = http_get(d.port, "/api/v1/stats")
    assert status == 200, body
    return json.loads(body)


def wait_for(cond, timeout=10.0, what="condition", between=None):
    """Bounded polling: returns once cond() is true, fails after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if between:
            between()
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def master(daemon):
    clients = []

    def start(*extra, client_id=A):
        d, rpc = start_master(daemon, *extra)
        c = MasterClient(rpc, client_id=client_id)
        clients.append(c)
        return d, c

    yield start
    for c in clients:
        c.close()


def test_version_and_ping(master):
    d, c = master()
    v = c.get_version()
    assert v.status_code == 0 and v.ready and v.version
    p = c.ping()
    assert p.status_code == 0 and p.client_ttl_ms == 10000


def test_two_phase_put(master):
    d, c = master()
    assert c.mount_segment("seg-a", 4 * MiB, base=0x7000_0000).status_code == 0
    start = c.put_start("k1", 4096, block={"model_name": "m", "block_size": 16,
                                           "block_hash": "h1", "token_ids": [1, 2, 3]})
    assert start.status_code == 0
    assert len(start.replica_list) == 1
    h = start.replica_list[0].handles[0]
    assert h.segment_name == "seg-a" and h.size == 4096
    assert 0x7000_0000 <= h.buffer < 0x7000_0000 + 4 * MiB
    assert h.transport_endpoint == "127.0.0.1:17000"
    assert start.replica_list[0].status == c.pb.ReplicaInfo.INITIALIZED
    # Not readable before PutEnd, and the key is taken.
    assert c.get_replica_list("k1").status_code == STATUS["OBJECT_NOT_READY"]
    assert c.put_start("k1", 4096).status_code == STATUS["OBJECT_ALREADY_EXISTS"]
    assert c.put_end("k1").status_code == 0
    assert c.put_end("k1").status_code == 0  # idempotent
    got = c.get_replica_list("k1")
    assert got.status_code == 0
    assert got.replica_list[0].status == c.pb.ReplicaInfo.COMPLETE
    assert got.replica_list[0].handles[0].buffer == h.buffer
    e = c.exist_key("k1")
    assert e.status_code == 0 and e.exists
    e = c.exist_key("nope")
    assert e.status_code == 0 and not e.exists
    # Tenants are separate key spaces.
    assert c.get_replica_list("k1", tenant="t2").status_code == STATUS["OBJECT_NOT_FOUND"]
    assert c.put("k1", 4096, tenant="t2")[1].status_code == 0
    s = stats(d)
    assert s["objects"] == 2 and s["used_bytes"] == 8192 and s["capacity_bytes"] == 4 * MiB


def test_empty_object(master):
    """value_length 0 over the wire: handles of size 0, each replica holding a
    1-byte allocation of its own (docs/architecture.md, "0-byte objects")."""
    d, c = master()
    c.mount_segment("seg-a", MiB, base=0x7000_0000)
    c.mount_segment("seg-b", MiB, base=0x9000_0000)
    start = c.put_start("empty", 0, replica_num=2)
    assert start.status_code == 0 and len(start.replica_list) == 2
    assert c.get_replica_list("empty").status_code == STATUS["OBJECT_NOT_READY"]
    assert c.put_end("empty").status_code == 0
    got = c.get_replica_list("empty")
    assert got.status_code == 0
    handles = [r.handles[0] for r in got.replica_list]
    assert {h.segment_name for h in handles} == {"seg-a", "seg-b"}
    assert all(h.size == 0 for h in handles)
    assert stats(d)["used_bytes"] == 2
    assert c.remove("empty", force=True).status_code == 0
    assert stats(d)["used_bytes"] == 0


def test_put_end_and_revoke_only_from_the_starting_client(master):
    d, c = master()
    c.mount_segment("seg-a", MiB)
    assert c.put_start("k", 1000).status_code == 0
    assert c.put_end("k", client_id=B).status_code == STATUS["ILLEGAL_CLIENT"]
    assert c.put_revoke("k", client_id=B).status_code == STATUS["ILLEGAL_CLIENT"]
    assert c.put_revoke("k").status_code == 0
    assert c.get_replica_list("k").status_code == STATUS["OBJECT_NOT_FOUND"]
    assert stats(d)["used_bytes"] == 0
    assert c.put_end("k").status_code == STATUS["OBJECT_NOT_FOUND"]


def test_lease_blocks_remove_until_forced(master):
    d, c = master("--default-kv-lease-ttl", "60000")
    c.mount_segment("seg-a", MiB)
    for k in ("r1", "r2", "r3"):
        c.put(k, 1000)
    assert c.get_replica_list("r1").status_code == 0  # a reader holds a lease now
    assert c.remove("r1").status_code == STATUS["OBJECT_HAS_LEASE"]
    assert c.exist_key("r1").exists
    assert c.remove("r1", force=True).status_code == 0
    assert c.get_replica_list("r1").status_code == STATUS["OBJECT_NOT_FOUND"]
    # RemoveAll skips leased objects unless forced.
    assert c.exist_key("r2").exists  # leases r2
    assert c.remove_all().removed_count == 1  # r3 only
    assert c.exist_key("r2").exists
    assert c.remove_all(force=True).removed_count == 1
    assert stats(d)["objects"] == 0


def test_eviction_reaches_the_watermark_sparing_leased_and_soft_pinned(master):
    d, c = master("--default-kv-lease-ttl", "60000", "--eviction-high-watermark-ratio", "0.5",
                  "--eviction-ratio", "0.1", "--allow-evict-soft-pinned-objects", "false")
    c.mount_segment("seg-a", MiB)
    size = 64 * 1024
    assert c.put("pinned", size, soft_pin=True)[1].status_code == 0
    assert c.put("leased", size)[1].status_code == 0
    assert c.get_replica_list("leased").status_code == 0
    for i in range(10):  # 12 x 64 KiB = 75% of the segment
        start, end = c.put(f"plain{i}", size)
        assert start.status_code == 0 and end.status_code == 0
    wait_for(lambda: stats(d)["usage_ratio"] <= 0.5, what="usage at or below the watermark")
    s = stats(d)
    assert s["evictions"] >= 4
    assert c.exist_key("pinned").exists and c.exist_key("leased").exists
    status, body = http_get(d.port, "/api/v1/objects/pinned")
    assert status == 200 and json.loads(body)["soft_pinned"] is True
    # Nothing evictable left beyond what the policy allows: a failing PutStart
    # still evicts plain objects to make room.
    left = [i for i in range(10) if c.exist_key(f"plain{i}").exists]
    assert len(left) < 10


def test_put_into_a_full_store_evicts_for_its_room(master):
    d, c = master("--eviction-high-watermark-ratio", "0.99", "--default-kv-lease-ttl", "1")
    c.mount_segment("seg-a", 256 * 1024)
    for i in range(4):
        assert c.put(f"o{i}", 64 * 1024)[1].status_code == 0
    # Full: the next PutStart evicts an object itself and succeeds at once,
    # without waiting for the leases actor's next pass.
    assert c.put_start("late", 64 * 1024).status_code == 0
    assert stats(d)["evictions"] >= 1
    assert sum(c.exist_key(f"o{i}").exists for i in range(4)) == 3


def test_zombie_put_is_preempted_and_its_space_reclaimed(master):
    d, c = master("--put-start-discard-timeout-sec", "1", "--put-start-release-timeout-sec", "2")
    c.mount_segment("seg-a", MiB)
    size = 100_000
    assert c.put_start("z", size).status_code == 0  # client A never ends it
    assert c.put_start("z", size, client_id=B).status_code == STATUS["OBJECT_ALREADY_EXISTS"]
    wait_for(lambda: c.put_start("z", size, client_id=B).status_code == 0, timeout=5,
             what="the zombie put to be preemptable")
    assert c.put_end("z", client_id=B).status_code == 0
    assert c.put_end("z").status_code == STATUS["ILLEGAL_CLIENT"]  # A lost it
    s = stats(d)
    assert s["zombies_preempted"] == 1 and s["used_bytes"] == 2 * size  # parked until release
    wait_for(lambda: stats(d)["used_bytes"] == size, timeout=6,
             what="the zombie's space to be reclaimed")
    assert stats(d)["zombie_bytes_reclaimed"] == size
    assert c.get_replica_list("z").status_code == 0


def test_client_that_stops_pinging_loses_its_segments(master):
    """crescentd has no clock a test can drive, so the live client's pings
    must never be a TTL apart as crescentd sees them: they come from a thread
    of their own every 50 ms from right after its mount (they used to start
    only after three more calls, then ride between slow HTTP looks, against a
    1 s TTL), with a TTL of 3 s; its segment must still be mounted after the
    wait, so a stall that broke that premise fails by its own name."""
    d, c = master("--client-ttl", "3")
    other = MasterClient(c.endpoint, client_id=B)
    stop = threading.Event()

    def keep_alive():
        pinger = MasterClient(c.endpoint, client_id=B)
        try:
            while not stop.wait(0.05):
                pinger.ping()
        finally:
            pinger.close()

    pinging = threading.Thread(target=keep_alive)
    try:
        assert other.mount_segment("seg-alive", MiB, base=0x2000_0000).status_code == 0
        pinging.start()
        assert c.mount_segment("seg-silent", MiB, base=0x1000_0000).status_code == 0
        assert c.put("on-silent", 1000, preferred_segment="seg-silent")[1].status_code == 0
        assert c.put_start("unfinished", 1000, preferred_segment="seg-silent").status_code == 0

        def names():
            return {s["name"] for s in json.loads(http_get(d.port, "/api/v1/segments")[1])["segments"]}

        wait_for(lambda: "seg-silent" not in names(), timeout=60,
                 what="the silent client's segment to be unmounted")
        assert names() == {"seg-alive"}, "the pinging client lost its segment too"
        assert c.get_replica_list("on-silent").status_code == STATUS["OBJECT_NOT_FOUND"]
        assert c.put_end("unfinished").status_code == STATUS["OBJECT_NOT_FOUND"]
        assert stats(d)["clients_expired"] == 1
    finally:
        stop.set()
        if pinging.is_alive():
            pinging.join()
        other.close()


def test_malformed_frames_get_error_replies_and_others_are_served(master):
    d, c = master()
    pb = c.pb
    bad = [
        [b"x"],                                                   # one frame
        [struct.pack(">H", pb.PING), struct.pack(">Q", 7)],       # no body
        [b"\x00", struct.pack(">Q", 8), b""],                      # short method
        [struct.pack(">H", pb.PING), b"\x01\x02", b""],            # short id
        [struct.pack(">H", pb.PING), struct.pack(">Q", 9), b"", b"extra"],
    ]
    for frames in bad:
        c.send_frames(frames)
        rid, status, body = c.recv()
        assert status == STATUS["PROTOCOL"] and b"malformed" in body
    c.send_frames([struct.pack(">H", 999), struct.pack(">Q", 41), b""])
    assert c.recv()[:2] == (41, STATUS["INVALID_PARAMS"])
    c.send_frames([struct.pack(">H", pb.PUT_START), struct.pack(">Q", 42), b"\xff\xff\xff"])
    rid, status, body = c.recv()
    assert (rid, status) == (42, STATUS["PROTOCOL"]) and b"PutStartRequest" in body
    # A body missing required fields does not decode either.
    c.send_frames([struct.pack(">H", pb.PING), struct.pack(">Q", 43), b""])
    assert c.recv()[:2] == (43, STATUS["PROTOCOL"])
    with pytest.raises(RpcError):
        c.call(pb.GET_REPLICA_LIST, b"\x0a")
    # Still serving, this client and another.
    assert c.ping().status_code == 0
    with MasterClient(c.endpoint, client_id=B) as other:
        assert other.ping().status_code == 0
    rpc = actors_by_name(d.port)
    extra = rpc["rpc"]["counters"]
    assert extra["malformed_total"] == 5 and extra["unknown_method_total"] == 1
    assert extra["decode_errors_total"] == 3


def test_one_frame_envelope(master):
    """A request in one frame [method][id][body] is answered in one frame
    [id][status][body]; one shorter than its header is malformed, answered in
    one frame with id 0; three-frame requests keep three-frame replies."""
    d, c = master()
    pb = c.pb
    ping = pb.PingRequest(client_id=c.uuid()).SerializeToString()
    c.send_frames([struct.pack(">HQ", pb.PING, 77) + ping])
    frames = c.recv_frames()
    assert len(frames) == 1
    rid, status = struct.unpack(">Qi", frames[0][:12])
    assert (rid, status) == (77, 0)
    resp = pb.PingResponse()
    resp.ParseFromString(frames[0][12:])
    assert resp.status_code == 0
    c.send_frames([struct.pack(">HQ", 999, 78)])  # unknown method, empty body
    assert c.recv()[:2] == (78, STATUS["INVALID_PARAMS"])
    c.send_frames([b"\x00\x05\x00"])  # three bytes: not even the header
    frames = c.recv_frames()
    assert len(frames) == 1 and struct.unpack(">Qi", frames[0][:12]) == (0, STATUS["PROTOCOL"])
    assert b"malformed" in frames[0][12:]
    c.send_frames([struct.pack(">H", pb.PING), struct.pack(">Q", 79), ping])
    frames = c.recv_frames()
    assert len(frames) == 3 and struct.unpack(">Q", frames[0])[0] == 79


def test_pipelined_requests_are_matched_by_id(master):
    d, c = master()
    c.mount_segment("seg-a", 16 * MiB)
    n = 500
    ids = {c.send(c.pb.PUT_START, c.put_start_request(f"p{i}", 4096)): f"p{i}" for i in range(n)}
    seen = set()
    for _ in range(n):
        rid, status, body = c.recv()
        assert status == 0 and rid in ids and rid not in seen
        r = c.decode(c.pb.PUT_START, status, body)
        assert r.status_code == 0
        seen.add(rid)
    assert seen == set(ids)
    ends = [c.send(c.pb.PUT_END, c.pb.PutEndRequest(key=k, client_id=c.uuid())) for k in ids.values()]
    for rid in ends:
        status, body = c.wait(rid)
        assert c.decode(c.pb.PUT_END, status, body).status_code == 0
    assert stats(d)["objects"] == n


def test_bad_input_gets_clear_codes_and_changes_nothing(master):
    d, c = master()
    inv = STATUS["INVALID_PARAMS"]
    c.mount_segment("seg-a", MiB)
    assert c.mount_segment("seg-a", MiB, base=0x5000_0000).status_code == STATUS["SEGMENT_ALREADY_EXISTS"]
    assert c.mount_segment("seg-b", 0).status_code == inv
    assert c.unmount_segment("nope").status_code == STATUS["SEGMENT_NOT_FOUND"]
    assert c.put_start("", 10).status_code == inv
    assert c.put_start("k" * 4097, 10).status_code == inv
    assert c.put_start("k", -5).status_code == inv
    assert c.put_start("k", 10, replica_num=0).status_code == inv
    assert c.put_start("k", 10, replica_num=9).status_code == inv
    assert c.put_start("k", 10, replica_num=2).status_code == inv  # one segment mounted
    assert c.put_start("k", 10, tenant="t" * 40).status_code == inv
    assert c.put_start("k", 2 * MiB).status_code == STATUS["NO_AVAILABLE_HANDLE"]
    assert c.get_replica_list("").status_code == inv
    assert c.get_replica_list("k", tenant="unknown").status_code == STATUS["OBJECT_NOT_FOUND"]
    assert c.get_replica_list_by_regex("(").status_code == inv
    c.put("a" * 40 + "b", 10)
    assert c.get_replica_list_by_regex("(a+)+$").status_code == inv  # backtracks forever
    assert c.remove_by_regex("(a+)+$", force=True).status_code == inv
    assert c.exist_key("a" * 40 + "b").exists  # nothing removed
    # A batch with one bad key is refused whole.
    r = c.batch_put_start([("good", 10), ("", 10)])
    assert r.status_code == inv and len(r.responses) == 0
    assert c.exist_key("good").exists is False
    assert stats(d)["objects"] == 1


def test_batch_and_regex_methods(master):
    d, c = master("--default-kv-lease-ttl", "1")
    c.mount_segment("seg-a", MiB, endpoint="10.1.2.3:9000")
    c.mount_segment("seg-b", MiB, base=0x9000_0000, endpoint="10.1.2.4:9000")
    r = c.batch_put_start([(f"b{i}", 100) for i in range(5)], replica_num=2)
    assert r.status_code == 0 and len(r.responses) == 5
    assert all(len(x.replica_list) == 2 for x in r.responses)
    segs = {h.segment_name for x in r.responses[0].replica_list for h in x.handles}
    assert segs == {"seg-a", "seg-b"}  # replicas on distinct segments
    assert list(c.batch_put_end([f"b{i}" for i in range(4)]).status_codes) == [0] * 4
    assert list(c.batch_put_revoke(["b4"]).status_codes) == [0]
    ex = c.batch_exist_key(["b0", "b4"])
    assert list(ex.status_codes) == [0, STATUS["OBJECT_NOT_FOUND"]]
    g = c.batch_get_replica_list(["b1", "zz"])
    assert [x.status_code for x in g.responses] == [0, STATUS["OBJECT_NOT_FOUND"]]
    rx = c.get_replica_list_by_regex("^b[12]$")
    assert rx.status_code == 0 and set(rx.object_map.keys()) == {"b1", "b2"}
    assert len(rx.object_map["b1"].replica_list) == 2
    time.sleep(0.01)  # let the 1 ms leases lapse (not a wait for a condition)
    rr = c.remove_by_regex("^b[01]$")
    assert rr.status_code == 0 and rr.removed_count == 2
    br = c.batch_remove(["b2", "nope"])
    assert list(br.status_codes) == [0, STATUS["OBJECT_NOT_FOUND"]]
    ip = c.batch_query_ip([A, B])
    assert ip.status_code == 0
    assert sorted(ip.client_ip_map[0].addresses.ip_addresses) == ["10.1.2.3", "10.1.2.4"]
    assert len(ip.client_ip_map) == 1  # seed 004: a client without segments is skipped
    cl = c.batch_replica_clear(["b3"])
    assert cl.status_code == 0 and list(cl.cleared_keys) == ["b3"]
    assert stats(d)["objects"] == 0
    assert c.remount_segment("seg-a", MiB, endpoint="10.1.2.3:9000").status_code == 0
    assert c.unmount_segment("seg-b", client_id=B).status_code == STATUS["ILLEGAL_CLIENT"]
    assert c.unmount_segment("seg-b").status_code == 0


def test_batches_past_one_prefetch_group_answer_like_single_calls(master):
    # Batches run their keys in groups of 32 with the lookups prefetched a
    # few keys ahead, and write their replies entry by entry: across group
    # boundaries, with present, missing, unended and removed keys mixed,
    # every entry answers as the single call for that key does.
    d, c = master()
    c.mount_segment("seg-a", MiB, endpoint="10.1.2.3:9000")
    c.mount_segment("seg-b", MiB, base=0x9000_0000)
    keys = [f"g{i:03}" for i in range(100)]
    started = c.batch_put_start([(k, 1000) for k in keys[:90]] + [("g000", 1000)], replica_num=2)
    assert [r.status_code for r in started.responses[:90]] == [0] * 90
    assert started.responses[90].status_code != 0 and started.responses[90].error_message
    ended = c.batch_put_end(keys[:70] + ["zz-missing"])
    assert list(ended.status_codes) == [0] * 70 + [STATUS["OBJECT_NOT_FOUND"]]
    mixed = [k for i, k in enumerate(keys) if i % 3 != 1] + keys[60:75]
    ex = c.batch_exist_key(mixed)
    assert len(ex.status_codes) == len(mixed)
    for k, code in zip(mixed, ex.status_codes):
        single = c.exist_key(k)
        assert code == (0 if single.exists else single.status_code or STATUS["OBJECT_NOT_FOUND"]), k
    g = c.batch_get_replica_list(mixed)
    assert g.status_code == 0 and len(g.responses) == len(mixed)
    for k, entry in zip(mixed, g.responses):
        single = c.get_replica_list(k)
        assert entry.status_code == single.status_code, k
        assert list(entry.replica_list) == list(single.replica_list), k
        assert entry.HasField("lease_ttl_ms") == single.HasField("lease_ttl_ms"), k
    time.sleep(0.01)  # not a wait for a condition: nothing below depends on the leases
    rm = c.batch_remove(keys[:40] + ["zz-missing"], force=True)
    assert list(rm.status_codes) == [0] * 40 + [STATUS["OBJECT_NOT_FOUND"]]
    assert list(c.batch_exist_key(keys[38:42]).status_codes) == [
        STATUS["OBJECT_NOT_FOUND"]] * 2 + [0] * 2
    assert stats(d)["objects"] == 50


def test_regex_calls_past_regex_max_matches_fail_whole(master):
    out = subprocess.run([binary("crescentd"), "--help"], capture_output=True, text=True)
    assert "--regex-max-matches" in out.stdout
    d, c = master("--regex-max-matches", "3")
    c.mount_segment("seg-a", MiB)
    for i in range(4):
        assert c.put(f"k{i}", 100)[1].status_code == 0
    got = c.get_replica_list_by_regex("^k")  # 4 matches, one over the bound
    assert got.status_code == STATUS["INVALID_PARAMS"] and len(got.object_map) == 0
    assert "regex_max_matches" in got.error_message  # the store's reason reaches the client
    rm = c.remove_by_regex("^k", force=True)
    assert rm.status_code == STATUS["INVALID_PARAMS"] and rm.removed_count == 0
    assert "narrow the pattern" in rm.error_message
    assert stats(d)["objects"] == 4  # nothing removed
    got = c.get_replica_list_by_regex("^k[0-2]$")  # exactly the bound
    assert got.status_code == 0 and set(got.object_map.keys()) == {"k0", "k1", "k2"}
    rm = c.remove_by_regex("^k[1-3]$", force=True)
    assert rm.status_code == 0 and rm.removed_count == 3
    assert stats(d)["objects"] == 1


def test_admin_http_routes(master):
    d, c = master()
    c.mount_segment("seg-a", MiB, base=4096)
    c.put("alpha/1", 1000)
    c.put("alpha/2", 1000)
    c.put("beta/1", 1000)
    c.put("other", 1000, tenant="t2")
    status, body = http_get(d.port, "/api/v1/segments")
    segs = json.loads(body)
    assert status == 200 and segs["count"] == 1
    seg = segs["segments"][0]
    assert seg["name"] == "seg-a" and seg["size"] == MiB and seg["used_bytes"] == 4000
    assert seg["owner"] == "%016x%016x" % A
    status, body = http_get(d.port, "/api/v1/segments/seg-a")
    assert status == 200 and json.loads(body)["base"] == 4096
    assert http_get(d.port, "/api/v1/segments/nope")[0] == 404
    objs = json.loads(http_get(d.port, "/api/v1/objects?prefix=alpha/")[1])
    assert sorted(o["key"] for o in objs["objects"]) == ["alpha/1", "alpha/2"]
    objs = json.loads(http_get(d.port, "/api/v1/objects?limit=2")[1])
    assert objs["count"] == 2 and objs["truncated"] is True
    objs = json.loads(http_get(d.port, "/api/v1/objects?tenant=t2")[1])
    assert [o["key"] for o in objs["objects"]] == ["other"]
    assert http_get(d.port, "/api/v1/objects?limit=0")[0] == 400
    status, body = http_get(d.port, "/api/v1/objects/beta/1")
    o = json.loads(body)
    assert status == 200 and o["complete"] and o["replicas"][0]["segment"] == "seg-a"
    assert http_get(d.port, "/api/v1/objects/other?tenant=t2")[0] == 200
    assert http_get(d.port, "/api/v1/objects/missing")[0] == 404
    s = stats(d)
    for field in ("capacity_bytes", "used_bytes", "objects", "replicas", "active_leases",
                  "evictions", "zombies_preempted", "zombie_bytes_reclaimed"):
        assert field in s
    assert s["objects"] == 4 and s["replicas"] == 4
    metrics = http_get(d.port, "/metrics")[1].decode()
    assert "crescent_segments_objects" in metrics
    assert "crescent_rpc_requests_put_start_total" in metrics


def test_rpc_address_in_use_exits_2():
    ctx = zmq.Context()
    holder = ctx.socket(zmq.ROUTER)
    port = holder.bind_to_random_port("tcp://127.0.0.1")
    try:
        p = subprocess.run([binary("crescentd"), "--rpc-address", f"tcp://127.0.0.1:{port}",
                            "--http-address", f"127.0.0.1:{free_port()}", "--no-pin"],
                           capture_output=True, timeout=10)
        assert p.returncode == 2
        err = p.stderr.decode().strip()
        assert len(err.splitlines()) == 1 and f"tcp://127.0.0.1:{port}" in err
    finally:
        holder.close(0)
        ctx.term()


def test_a_client_that_does_not_read_is_dropped_not_waited_for(master):
    d, c = master()
    c.mount_segment("seg-a", 64 * MiB)
    for i in range(0, 200, 50):
        r = c.batch_put_start([(f"{'x' * 60}{j:04d}", 100) for j in range(i, i + 50)])
        assert r.status_code == 0
        c.batch_put_end([f"{'x' * 60}{j:04d}" for j in range(i, i + 50)])
    # A reader that never reads: tiny receive buffers, replies of ~20 KB each.
    slow = c.ctx.socket(zmq.DEALER)
    slow.setsockopt(zmq.RCVHWM, 1)
    slow.setsockopt(zmq.RCVBUF, 4096)
    slow.setsockopt(zmq.LINGER, 0)
    slow.connect(c.endpoint)
    body = c.pb.GetReplicaListByRegexRequest(key_regex="^x").SerializeToString()
    try:
        for i in range(4000):
            slow.send_multipart([struct.pack(">H", c.pb.GET_REPLICA_LIST_BY_REGEX),
                                 struct.pack(">Q", i), body])

        def dropped():
            return actors_by_name(d.port)["rpc"]["counters"]["send_dropped_total"] > 0

        # Others are served all along, promptly.
        def ping_fast():
            t0 = time.monotonic()
            assert c.ping().status_code == 0
            assert time.monotonic() - t0 < 2.0

        wait_for(dropped, timeout=30, between=ping_fast, what="replies to the slow reader to be dropped")
    finally:
        slow.close(0)


# ---- regressions found in review ---------------------------------------------


def test_many_tiny_batch_entries_are_refused_before_decoding(master):
    """31 M empty keys once made protobuf-c allocate 2.3 GB before the
    4096-entry check: the wire pre-scan refuses them unread."""
    d, c = master()
    body = b"\x0a\x00" * 200_000  # BatchExistKeyRequest.keys = "" x 200k
    status, text = c.wait(c.send(c.pb.BATCH_EXIST_KEY, body))
    assert status != 0 and b"more than 4096" in text
    assert c.get_version().status_code == 0  # still serving
    assert stats(d)["objects"] == 0


def test_batch_bodies_read_by_hand_answer_as_protobuf_c_did(master):
    """The six batch requests are decoded by hand at the intake
    (src/rpc/rpc_batch.c); whatever that decoder does not take goes the
    general way (pre-scan, protobuf-c, cr_rpc_validate), so refusals keep
    their texts and the wire forms protobuf-c accepts keep working."""
    d, c = master()
    c.mount_segment("seg-a", MiB, base=4096)
    assert c.put_start("k", 100, tenant="t2").status_code == 0
    assert c.put_end("k", tenant="t2").status_code == 0
    pb = c.pb
    cases = [  # (method, body, the sentence in error_message)
        (pb.BATCH_GET_REPLICA_LIST, b"\x0a\x01k\x0a\x00", "key 1 is empty"),
        (pb.BATCH_EXIST_KEY, b"\x0a\x81\x20" + b"k" * 4097, "key 0 is longer than 4096 bytes"),
        (pb.BATCH_REMOVE, b"\x0a\x01k\x12\x18" + b"t" * 24, "tenant_id is longer than 23 bytes"),
    ]
    for method, body, why in cases:
        resp = c.call(method, body)
        assert resp.status_code == STATUS["INVALID_PARAMS"] and resp.error_message == why
    bad = c.put_start_request("p", 100)
    bad.config.replica_num = 9
    resp = c.call(pb.BATCH_PUT_START, pb.BatchPutStartRequest(requests=[bad]))
    assert resp.error_message == "replica_num of put 0 must be 1 to 8"
    status, text = c.wait(c.send(pb.BATCH_GET_REPLICA_LIST, b"\x0a\x03k\x00y"))
    assert status == STATUS["PROTOCOL"]
    assert text == (b"the body is not a valid crescent.master.BatchGetReplicaListRequest: "
                    b"a string has a NUL byte")
    # A tenant given twice (the last counts), and an unknown field: protobuf-c's forms.
    twice = b"\x0a\x01k\x12\x02t1\x12\x02t2"
    assert list(c.call(pb.BATCH_EXIST_KEY, twice).status_codes) == [0]
    assert list(c.call(pb.BATCH_EXIST_KEY, twice + b"\x78\x05").status_codes) == [0]
    # The same batch in the form clients send, read by hand.
    assert list(c.batch_exist_key(["k", "x"], tenant="t2").status_codes) == \
        [0, STATUS["OBJECT_NOT_FOUND"]]


def test_batch_refused_whole_when_one_entry_is_out_of_bounds(master):
    """The gateway applies the store's own static limits, so no entry can be
    refused inside the store after earlier ones were applied."""
    d, c = master()
    c.mount_segment("seg-a", MiB, base=4096)
    ok = c.put_start_request("good", 1000)
    bad = c.put_start_request("bad", 1000)
    bad.block.token_ids.extend(range(70_000))  # over the 65536 the store keeps
    reply = c.call(c.pb.BATCH_PUT_START, c.pb.BatchPutStartRequest(requests=[ok, bad]))
    assert reply.status_code == STATUS["INVALID_PARAMS"]
    assert stats(d)["objects"] == 0 and stats(d)["inflight_puts"] == 0


def test_admin_http_refuses_over_long_query_values(master):
    d, c = master()
    c.mount_segment("seg-a", MiB, base=4096)
    c.put("mine", 1000, tenant="t2")
    status, body = http_get(d.port, "/api/v1/objects?tenant=" + "x" * 300)
    assert status == 400, body  # was: treated as absent, listing every tenant
    status, _ = http_get(d.port, "/api/v1/objects?limit=" + "9" * 20)
    assert status == 400


def test_over_long_regex_is_refused(master):
    d, c = master()
    reply = c.get_replica_list_by_regex("a" * 5000)
    assert reply.status_code == STATUS["INVALID_PARAMS"]


def test_keys_with_a_nul_byte_are_refused_not_aliased(master):
    """protobuf-c cuts strings at their first NUL, so "k\\0one" and "k\\0two"
    would both be the key "k": the gateway refuses them instead."""
    d, c = master()
    c.mount_segment("seg-a", MiB, base=4096)
    with pytest.raises(RpcError) as refused:
        c.put_start("k\x00one", 1000)
    assert "NUL" in refused.value.message
    with pytest.raises(RpcError):
        c.batch_exist_key(["fine", "k\x00two"])
    assert stats(d)["objects"] == 0
    c.put("k", 1000)  # the plain key is unaffected
    assert c.exist_key("k").exists


def test_refusals_carry_an_error_message(master):
    """A non-zero status_code comes with error_message: the gateway's validation
    reason, or the store's; a success carries none."""
    d, c = master()
    c.mount_segment("seg-a", MiB)
    ok = c.put("k", 100)[1]
    assert ok.status_code == 0 and not ok.HasField("error_message")
    dup = c.put_start("k", 100)  # already exists
    assert dup.status_code == STATUS["OBJECT_ALREADY_EXISTS"] and dup.error_message == "object exists"
    empty = c.put_start("", 100)  # refused by the gateway's validation
    assert empty.status_code == STATUS["INVALID_PARAMS"] and "key" in empty.error_message
    missing = c.call(c.pb.GET_REPLICA_LIST, c.pb.GetReplicaListRequest(key="nope"))
    assert missing.status_code == STATUS["OBJECT_NOT_FOUND"] and missing.error_message


# The cases every RPC endpoint must answer exactly as the ZMQ one does:
# test_rpc_native.py and test_rpc_shm.py run them over their endpoints.
KEY_CASES = [
    test_version_and_ping,
    test_two_phase_put,
    test_put_end_and_revoke_only_from_the_starting_client,
    test_lease_blocks_remove_until_forced,
    test_pipelined_requests_are_matched_by_id,
    test_bad_input_gets_clear_codes_and_changes_nothing,
    test_batch_and_regex_methods,
    test_batch_refused_whole_when_one_entry_is_out_of_bounds,
    test_keys_with_a_nul_byte_are_refused_not_aliased,
    test_refusals_carry_an_error_message,
]


def endpoint_master(daemon, start, client_class):
    """The body of a `master`-like fixture over another endpoint: start(daemon,
    *extra) returns (daemon, ZMQ endpoint, endpoint), and each started
    crescentd gets a client_class client there, closed at teardown."""
    clients = []

    def make(*extra, client_id=A):
        d, _, endpoint = start(daemon, *extra)
        c = client_class(endpoint, client_id=client_id)
        clients.append(c)
        return d, c

    yield make
    for c in clients:
        c.close()
