"""A request flood must not wedge the store (issue 28, defect 1).

Clients that pipeline thousands of calls another actor answers (QueryTask
goes to the tasks actor) and never read their replies, then go away, used
to leave every RPC method on every endpoint unanswered for minutes and made
crescentd deaf to SIGTERM: segments waited on its full ring to tasks for
each forwarded call while tasks waited on its full ring back, and a reply
tasks could not send was dropped, so the call never came back.

Each test floods one endpoint, checks that other clients are still served
while the flooders hold their calls (refused "busy" past the bound, counted
in busy_total), then closes the flooders and expects full service on every
endpoint within FULL_SERVICE_S, and a clean stop on SIGTERM.  Bounds are
generous for a loaded 2-core machine; the wedge they catch lasted minutes."""
import socket
import struct
import time

import pytest
import zmq

from conftest import actors_by_name, free_port, http_get
from master_client import STATUS, RpcError, MasterClient, NativeMasterClient, ShmMasterClient, load_proto

FULL_SERVICE_S = 3.0  # from the flooders' close to every endpoint answering
WAIT_S = 10


def start(daemon, *extra):
    port, native = free_port(), f"127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{port}", "--rpc-tcp-address", native, *extra)
    return d, {"zmq": f"tcp://127.0.0.1:{port}", "native": f"crescent://{native}",
               "shm": f"shm://@crescent-rpc/{port}"}


def query_task_frames(pb, count, first_id=1):
    """`count` QueryTask requests as one-frame envelopes, each [u16 method]
    [u64 id][body]: the tasks actor answers them (not found)."""
    body = pb.QueryTaskRequest(task_id=pb.UUID(first=7, second=7)).SerializeToString()
    return [struct.pack(">HQ", pb.QUERY_TASK, first_id + i) + body for i in range(count)]


def stream(frames):
    return b"".join(struct.pack(">I", len(f)) + f for f in frames)


def counters(d, actor):
    return actors_by_name(d.port)[actor]["counters"]


def serves_everything(d, eps, budget_s, busy_ok=False):
    """Seconds until every endpoint answered a Ping and a QueryTask and
    /health said 200; fails past budget_s.  busy_ok: a QueryTask refused
    "busy" (AGAIN) counts as answered (under a flood)."""
    start = time.monotonic()
    deadline = start + budget_s
    done = set()
    clients = {}
    try:
        while time.monotonic() < deadline and len(done) < 4:
            if "health" not in done and http_get(d.port, "/health", timeout=budget_s)[0] == 200:
                done.add("health")
            for name, cls in (("zmq", MasterClient), ("native", NativeMasterClient),
                              ("shm", ShmMasterClient)):
                if name in done:
                    continue
                try:
                    c = clients.get(name) or clients.setdefault(name, cls(eps[name], timeout=0.5))
                    if c.ping().status_code != 0:
                        continue
                    try:
                        rep = c.query_task(c.pb.UUID(first=9, second=9))
                    except RpcError as e:
                        if busy_ok and e.status == STATUS["AGAIN"]:
                            done.add(name)
                        continue
                    if rep.status_code != 0:  # the task is unknown: answered, not refused
                        done.add(name)
                except (TimeoutError, zmq.Again, ConnectionError, RpcError):
                    if name in clients:
                        clients.pop(name).close()
        assert len(done) == 4, f"after {budget_s} s only {sorted(done)} answered"
        return time.monotonic() - start
    finally:
        for c in clients.values():
            c.close()


def flood_native(eps, pb, conns=16, calls=2000):
    socks = []
    for i in range(conns):
        host, port = eps["native"][len("crescent://"):].rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=WAIT_S)
        s.setblocking(False)
        data = stream(query_task_frames(pb, calls, i * calls + 1))
        sent, deadline = 0, time.monotonic() + WAIT_S
        while sent < len(data) and time.monotonic() < deadline:
            try:
                sent += s.send(data[sent:])
            except BlockingIOError:
                time.sleep(0.005)
        socks.append(s)
    return socks


def flood_shm(eps, pb, clients=16, calls=2000):
    shms = []
    for i in range(clients):
        c = ShmMasterClient(eps["shm"], timeout=2)
        try:
            c.send_raw(stream(query_task_frames(pb, calls, i * calls + 1)))
        except TimeoutError:
            pass  # its request ring is full: crescentd reads no more from it
        shms.append(c)
    return shms


def flood_zmq(eps, pb, dealers=64, calls=3000):
    ctx = zmq.Context()
    socks = []
    for i in range(dealers):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SNDHWM, 0)
        s.setsockopt(zmq.RCVHWM, 1)  # never read: let crescentd's queue fill
        s.connect(eps["zmq"])
        for f in query_task_frames(pb, calls, i * calls + 1):
            s.send(f, zmq.DONTWAIT)
        socks.append(s)
    return ctx, socks


def check_flood(d, eps, flood, close, busy_views):
    pb = load_proto()
    held = flood(eps, pb)
    try:
        # While the flooders hold their calls, the others are served.
        serves_everything(d, eps, 4 * FULL_SERVICE_S, busy_ok=True)
    finally:
        close(held)
    took = serves_everything(d, eps, FULL_SERVICE_S)
    busy = sum(counters(d, v)["busy_total"] for v in busy_views)
    assert busy > 0, "the flood was never refused 'busy'"
    code, err = d.stop(timeout=WAIT_S)
    assert code == 0, err
    return took


def test_native_flood_then_full_service(daemon):
    d, eps = start(daemon)
    check_flood(d, eps, flood_native, lambda socks: [s.close() for s in socks], ["rpc_tcp"])


def test_shm_flood_then_full_service(daemon):
    d, eps = start(daemon)
    check_flood(d, eps, flood_shm, lambda cs: [c.close() for c in cs], ["rpc_shm"])


def test_zmq_flood_then_full_service(daemon):
    d, eps = start(daemon)

    def close(held):
        ctx, socks = held
        for s in socks:
            s.close()
        ctx.term()

    check_flood(d, eps, flood_zmq, close, ["rpc"])


def test_sigterm_stops_crescentd_during_a_flood(daemon):
    """SIGTERM while the flooders (every endpoint at once) still hold their
    calls: crescentd stops within WAIT_S."""
    d, eps = start(daemon)
    pb = load_proto()
    socks = flood_native(eps, pb)
    shms = flood_shm(eps, pb, clients=4)
    ctx, dealers = flood_zmq(eps, pb, dealers=16, calls=1000)
    try:
        code, err = d.stop(timeout=WAIT_S)
        assert code == 0, err
    finally:
        for s in socks + dealers:
            s.close()
        for c in shms:
            c.close()
        ctx.term()
