"""The store master over its native TCP endpoint (--rpc-tcp-address,
src/msgs/rpc_stream.h): the ZMQ endpoint's key cases run unchanged over it
(test_store_master's own test functions, with a native client), malformed
frames close only their own connection, libcrescent (crescentctl) speaks it
as crescent://HOST:PORT, and CURVE keeps it off unless asked for on
loopback.  Admin token and client secrets over both endpoints:
test_security.py (its `transport` parameter)."""
import socket
import struct
import subprocess

import pytest

import test_store_master as sm
from conftest import actors_by_name, binary, free_port
from master_client import STATUS, MasterClient, NativeMasterClient

WAIT_S = 10


def start_native(daemon, *extra):
    """crescentd on free ports; returns (daemon, ZMQ endpoint, native endpoint)."""
    rpc, native = f"tcp://127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--event-address", f"tcp://127.0.0.1:{free_port()}",
               "--replay-address", f"tcp://127.0.0.1:{free_port()}",
               "--rpc-tcp-address", native, *extra)
    return d, rpc, f"crescent://{native}"


@pytest.fixture
def native_master(daemon):
    """test_store_master's `master` fixture, with a native client."""
    yield from sm.endpoint_master(daemon, start_native, NativeMasterClient)


@pytest.mark.parametrize("case", sm.KEY_CASES, ids=lambda f: f.__name__[len("test_"):])
def test_store_master_cases_over_native(native_master, case):
    case(native_master)


def actor_counters(d, name):
    return actors_by_name(d.port)[name]["counters"]


def test_malformed_frames_close_only_their_connection(daemon):
    d, _, native = start_native(daemon)
    good = NativeMasterClient(native, timeout=WAIT_S)
    pb = good.pb
    assert good.ping().status_code == 0
    # Within a frame, what the ZMQ endpoint refuses is refused the same way,
    # and the connection keeps serving.
    good.send_frames([struct.pack(">HQ", 999, 41)])
    assert good.recv()[:2] == (41, STATUS["INVALID_PARAMS"])
    good.send_frames([struct.pack(">HQ", pb.PUT_START, 42), b"\xff\xff\xff"])
    rid, status, body = good.recv()
    assert (rid, status) == (42, STATUS["PROTOCOL"]) and b"PutStartRequest" in body
    # A length below the envelope's header, above 16 MiB + header, or
    # 0xffffffff: answered under id 0, then the connection is closed.
    for length in (3, 10 + (16 << 20) + 1, 0xFFFFFFFF):
        bad = NativeMasterClient(native, timeout=WAIT_S)
        bad.send_raw(struct.pack(">I", length) + b"\x00" * 16)
        rid, status, body = bad.recv()
        assert (rid, status) == (0, STATUS["PROTOCOL"]) and b"malformed frame" in body
        assert bad.closed_by_peer()
        bad.close()
        assert good.ping().status_code == 0  # the others are still served
    # A frame cut short by a client that goes away changes nothing.
    cut = NativeMasterClient(native, timeout=WAIT_S)
    cut.send_raw(struct.pack(">IHQ", 200, pb.PING, 7) + b"\x0a")
    cut.close()
    assert good.exist_key("k").status_code == 0
    counters = actor_counters(d, "rpc_tcp")
    assert counters["connections_closed_malformed_total"] == 3
    assert counters["malformed_total"] == 3 and counters["unknown_method_total"] == 1
    assert counters["decode_errors_total"] == 1
    good.close()


def test_pipelining_across_many_connections(daemon):
    """Calls pipelined on several connections at once are answered to the
    right connection under the right id."""
    d, _, native = start_native(daemon)
    clients = [NativeMasterClient(native, client_id=(0xC, i), timeout=WAIT_S) for i in range(8)]
    clients[0].mount_segment("seg", 64 << 20)
    sent = {}
    for i, c in enumerate(clients):
        for j in range(50):
            sent[(i, c.send(c.pb.PUT_START, c.put_start_request(f"c{i}-{j}", 4096)))] = j
    for (i, rid), _ in sent.items():
        c = clients[i]
        status, body = c.wait(rid)
        assert c.decode(c.pb.PUT_START, status, body).status_code == 0
    assert sm.stats(d)["objects"] == 400
    for c in clients:
        c.close()


def test_requests_past_the_queue_bound_wait_and_are_all_answered(daemon):
    """With --rpc-tcp-queue-max 4, a burst of 200 pipelined requests written
    at once is taken 4 at a time (the rest wait, read or not) and every one
    is answered."""
    d, _, native = start_native(daemon, "--rpc-tcp-queue-max", "4")
    c = NativeMasterClient(native, timeout=WAIT_S)
    pb = c.pb
    burst = b"".join(struct.pack(">IHQ", 10 + len(body), pb.EXIST_KEY, i) + body
                     for i, body in ((i, pb.ExistKeyRequest(key=f"q{i}").SerializeToString())
                                     for i in range(1, 201)))
    c.send_raw(burst)
    seen = set()
    for _ in range(200):
        rid, status, body = c.recv()
        assert status == 0 and c.decode(pb.EXIST_KEY, status, body).status_code == 0
        seen.add(rid)
    assert seen == set(range(1, 201))
    assert actor_counters(d, "rpc_tcp")["in_flight"] == 0
    c.close()


def test_replies_a_client_reads_late_all_arrive(daemon):
    """A client that pipelines 600 BatchGetReplicaList calls (about 8 MB of
    replies, beyond what the sockets hold) before reading any: segments'
    sends hit EAGAIN and the rest must go out on EPOLLOUT as the client
    reads (the edge asks for it only when a flush leaves bytes unwritten)."""
    d, _, native = start_native(daemon)
    c = NativeMasterClient(native, timeout=WAIT_S)
    pb = c.pb
    name, endpoint = "s" * 200, "e" * 200 + ":1"
    assert c.mount_segment(name, 64 * 1024 * 1024, endpoint=endpoint).status_code == 0
    keys = [f"late-{i}" for i in range(32)]
    assert c.batch_put_start([(k, 100) for k in keys]).status_code == 0
    assert list(c.batch_put_end(keys).status_codes) == [0] * 32
    body = pb.BatchGetReplicaListRequest(keys=keys).SerializeToString()
    frame = lambda i: struct.pack(">IHQ", 10 + len(body), pb.BATCH_GET_REPLICA_LIST, i) + body
    c.send_raw(b"".join(frame(i) for i in range(1, 601)))
    seen = set()
    for _ in range(600):
        rid, status, reply = c.recv()
        resp = c.decode(pb.BATCH_GET_REPLICA_LIST, status, reply)
        assert [r.status_code for r in resp.responses] == [0] * 32
        seen.add(rid)
    assert seen == set(range(1, 601))
    assert len(reply) > 13_000  # 32 long names and endpoints: 600 replies take 8 MB
    c.close()


def test_connections_past_the_bound_are_closed(daemon):
    d, _, native = start_native(daemon, "--rpc-tcp-connections-max", "2")
    kept = [NativeMasterClient(native, timeout=WAIT_S) for _ in range(2)]
    for c in kept:
        assert c.get_version().status_code == 0
    extra = NativeMasterClient(native, timeout=WAIT_S)
    assert extra.closed_by_peer()
    extra.close()
    assert actor_counters(d, "rpc_tcp")["connections_refused_total"] == 1
    kept[0].close()
    sm.wait_for(lambda: actor_counters(d, "rpc_tcp")["connections_open"] == 1,
                what="the closed connection's slot freed")
    again = NativeMasterClient(native, timeout=WAIT_S)
    assert again.get_version().status_code == 0
    again.close()
    kept[1].close()


def test_crescentctl_over_native(daemon, tmp_path):
    """libcrescent takes crescent://HOST:PORT: crescentctl mounts, puts and
    reads replicas over it, and sees what a ZMQ client stored."""
    d, rpc, native = start_native(daemon)
    env = {"CRESCENT_CLIENT_ID": "00000000-0000-4000-8000-00000000000a"}
    ctl = [binary("crescentctl"), "--rpc", native, "--timeout-ms", str(WAIT_S * 1000)]

    def run(*args):
        import os
        r = subprocess.run(ctl + list(args), capture_output=True, text=True, timeout=WAIT_S * 3,
                           env=dict(os.environ, **env))
        assert r.returncode == 0, r.stderr
        return r.stdout

    run("mount", "seg0", "16M", "--endpoint", "127.0.0.1:1")
    run("put-start", "kn", "4096")
    run("put-end", "kn")
    assert "seg0" in run("replicas", "kn")
    with MasterClient(rpc, timeout=WAIT_S) as z:
        assert z.exist_key("kn").exists
    bad = subprocess.run([binary("crescentctl"), "--rpc", f"crescent://127.0.0.1:{free_port()}",
                          "--timeout-ms", "2000", "exist", "kn"], capture_output=True, text=True,
                         timeout=WAIT_S)
    assert bad.returncode != 0 and "--rpc-tcp-address" in bad.stderr


def keygen(tmp_path, name):
    prefix = tmp_path / name
    subprocess.run([binary("crescentctl"), "keygen", str(prefix)], check=True,
                   capture_output=True)
    return prefix.with_suffix(".pub").read_text().strip(), prefix


def test_curve_keeps_the_native_endpoint_off_unless_asked_on_loopback(daemon, tmp_path):
    server_pub, server = keygen(tmp_path, "server")
    client_pub, _ = keygen(tmp_path, "client")
    (tmp_path / "clients.pub").write_text(client_pub + "\n")
    curve = ["--curve-secret-key-file", str(server) + ".key",
             "--curve-clients", str(tmp_path / "clients.pub")]
    # With CURVE on, the native endpoint is off: nothing listens there.
    _, _, native = start_native(daemon, *curve)
    port = int(native.rsplit(":", 1)[1])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT_S).close()
    # Asked for, it serves loopback.
    _, _, native = start_native(daemon, *curve, "--rpc-tcp-with-curve", "true")
    with NativeMasterClient(native, timeout=WAIT_S) as c:
        assert c.get_version().status_code == 0
    # Never anything but loopback.
    args = [binary("crescentd"), "--no-pin", "--http-address", f"127.0.0.1:{free_port()}",
            "--metrics-port", "0", "--local-segment-size", "0",
            "--rpc-address", f"tcp://127.0.0.1:{free_port()}",
            "--event-address", f"tcp://127.0.0.1:{free_port()}",
            "--replay-address", f"tcp://127.0.0.1:{free_port()}",
            "--rpc-tcp-address", f"0.0.0.0:{free_port()}", "--rpc-tcp-with-curve", "true", *curve]
    r = subprocess.run(args, capture_output=True, text=True, timeout=WAIT_S * 3)
    assert r.returncode == 2 and "loopback" in r.stderr, r.stderr


def test_python_client_over_native(daemon):
    """The Python client (ctypes over libcrescent) takes crescent://HOST:PORT
    as its master address and works as over ZMQ."""
    import os
    import sys
    from conftest import BIN_DIR
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
    from crescent import Store  # noqa: E402
    d, rpc, native = start_native(daemon)
    with MasterClient(rpc, client_id=(0xD, 1), timeout=WAIT_S) as z:
        assert z.mount_segment("py-seg", 16 << 20).status_code == 0
        store = Store()
        store.setup("localhost", "", 0, 0, "tcp", "", native)
        store.put_start("py-key", 4096)
        store.put_end("py-key")
        assert store.is_exist("py-key") == 1
        assert z.exist_key("py-key").exists
        store.close()


def test_default_address_is_best_effort_a_given_one_must_bind(daemon):
    """A second crescentd on a host whose default native address (50052) is
    taken still starts, without the native endpoint, and says so; a native
    address the user chose that is taken fails the start (exit 2)."""
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", 50052))
        holder.listen(1)
    except OSError:
        pass  # held by someone else already: in use either way
    try:
        d, rpc, _ = start_native(daemon)
        d.stop()
        d2 = daemon("--rpc-tcp-address", "127.0.0.1:50052")
        code, err = d2.stop()
        assert code == 0 and "default address 127.0.0.1:50052 is in use" in err, err
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        args = [binary("crescentd"), "--no-pin", "--http-address", f"127.0.0.1:{free_port()}",
                "--metrics-port", "0", "--local-segment-size", "0",
                "--rpc-address", f"tcp://127.0.0.1:{free_port()}",
                "--event-address", f"tcp://127.0.0.1:{free_port()}",
                "--replay-address", f"tcp://127.0.0.1:{free_port()}",
                "--rpc-tcp-address", f"127.0.0.1:{busy.getsockname()[1]}"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=WAIT_S * 3)
        busy.close()
        assert r.returncode == 2 and "cannot bind the native RPC address" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    finally:
        holder.close()


# ---- the endpoint on segments' thread (src/rpc/edge.h) -------------------

def test_task_calls_over_native(daemon):
    """Calls another actor answers go there by message and come back to
    segments, which writes them to the connection: a copy task created
    (segments reserves, tasks answers), handed out by a ping and by
    FetchTasks (segments checks the secret, tasks answers), queried
    (tasks alone) and completed, all over crescent://."""
    d, _, native = start_native(daemon)
    a = NativeMasterClient(native, client_id=(0xA, 1), timeout=WAIT_S)
    b = NativeMasterClient(native, client_id=(0xB, 2), timeout=WAIT_S)
    pb = a.pb
    assert a.mount_segment("seg-a", 1 << 20, base=0x1000_0000,
                           endpoint="10.0.0.1:7001").status_code == 0
    assert b.mount_segment("seg-c", 1 << 20, base=0x3000_0000,
                           endpoint="10.0.0.2:7003").status_code == 0
    tasks = []
    for key in ("t0", "t1"):
        start, end = a.put(key, 4096, preferred_segment="seg-a")
        assert start.status_code == 0 and end.status_code == 0
        created = b.create_copy_task(key, ["seg-c"])
        assert created.status_code == 0, created
        assert b.query_task(created.task_id).status == pb.PENDING
        tasks.append(created.task_id.SerializeToString())
    handed = list(a.ping(max_tasks=1).tasks) + list(a.fetch_tasks().tasks)
    assert sorted(t.task_id.SerializeToString() for t in handed) == sorted(tasks)
    for t in handed:
        assert a.mark_task_to_complete(t.task_id).status_code == 0
        sm.wait_for(lambda: b.query_task(t.task_id).status == pb.SUCCESS, timeout=WAIT_S,
                    what="the task's success")
    replicas = b.get_replica_list("t0").replica_list
    assert sorted(r.handles[0].segment_name for r in replicas) == ["seg-a", "seg-c"]
    counters = actor_counters(d, "rpc_tcp")
    assert counters["in_flight"] == 0 and counters["send_dropped_total"] == 0
    a.close()
    b.close()


def test_client_gone_with_calls_in_flight(daemon):
    """A client that closes its connection while calls of its are still out
    (a regex scan running in slices, task queries at tasks) takes nothing
    down: the late replies are dropped and counted, in_flight gets back to
    0, and another client is served throughout."""
    d, _, native = start_native(daemon, "--client-ttl", "600")
    c = NativeMasterClient(native, client_id=(7, 7), timeout=WAIT_S)
    pb = c.pb
    assert c.mount_segment("s", 64 << 20).status_code == 0
    # Each key costs ^(a+)+$ some 10^5-10^6 steps: the scan takes hundreds
    # of slices (one per loop round) before the step budget refuses it.
    keys = ["a" * 18 + f"_{i}" for i in range(300)]
    for method, make in ((pb.PUT_START, lambda k: c.put_start_request(k, 4096)),
                         (pb.PUT_END, lambda k: pb.PutEndRequest(key=k, tenant_id="default",
                                                                 client_id=c.uuid()))):
        for rid in [c.send(method, make(k)) for k in keys]:
            status, body = c.wait(rid)
            assert c.decode(method, status, body).status_code == 0
    gone = NativeMasterClient(native, client_id=(8, 8), timeout=WAIT_S)
    gone.send(pb.GET_REPLICA_LIST_BY_REGEX, pb.GetReplicaListByRegexRequest(key_regex="^(a+)+$"))
    for _ in range(16):
        gone.send(pb.QUERY_TASK, pb.QueryTaskRequest(task_id=c.uuid((1, 2))))
    gone.send(pb.EXIST_KEY, pb.ExistKeyRequest(key=keys[0]))
    gone.close()

    def settled():
        assert c.exist_key(keys[0]).exists  # served while the scan runs
        counters = actor_counters(d, "rpc_tcp")
        return counters["in_flight"] == 0 and counters["send_dropped_total"] >= 1

    sm.wait_for(settled, timeout=60, what="the gone client's calls finished and dropped")
    counters = actor_counters(d, "rpc_tcp")
    assert counters["connections_open"] == 1
    assert sm.stats(d)["objects"] == len(keys)
    c.close()
    code, err = d.stop()
    assert code == 0, err


def test_other_actors_reach_segments_while_a_native_client_hammers(daemon):
    """The native endpoint runs on segments' thread, whose mailbox must
    still be served while a client keeps it busy: ZMQ calls (through the
    rpc actor), HTTP asks and the leases actor's eviction polls all reach
    segments while 64 pipelined calls at a time keep coming."""
    import threading
    d, rpc, native = start_native(daemon)
    probe = NativeMasterClient(native, timeout=WAIT_S)
    pb = probe.pb
    probe.close()
    body = pb.ExistKeyRequest(key="h").SerializeToString()
    burst = b"".join(struct.pack(">IHQ", 10 + len(body), pb.EXIST_KEY, i) + body
                     for i in range(1, 65))
    stop, answered, failures = threading.Event(), [0], []

    def hammer():
        try:
            with NativeMasterClient(native, client_id=(9, 9), timeout=WAIT_S) as h:
                while not stop.is_set():
                    h.send_raw(burst)
                    for _ in range(64):
                        assert h.recv()[1] == 0
                    answered[0] += 64
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        sm.wait_for(lambda: answered[0] >= 640 or failures, timeout=WAIT_S, what="the hammer")
        polls = actor_counters(d, "segments")["evict_polls_total"]
        start = answered[0]
        with MasterClient(rpc, client_id=(5, 5), timeout=WAIT_S) as z:
            assert z.mount_segment("z", 16 << 20).status_code == 0
            for i in range(10):
                s, e = z.put(f"z{i}", 4096)
                assert s.status_code == 0 and e.status_code == 0
                assert z.exist_key(f"z{i}").exists
                assert sm.stats(d)["objects"] == i + 1  # HTTP: an ask to segments
        sm.wait_for(lambda: actor_counters(d, "segments")["evict_polls_total"] > polls + 2,
                    timeout=WAIT_S, what="the leases actor's polls answered")
        assert answered[0] > start and not failures  # the hammer ran throughout
    finally:
        stop.set()
        thread.join(WAIT_S * 2)
    assert not failures, failures
