"""The store master over its same-host shared-memory endpoint
(--rpc-shm-path, src/msgs/rpc_shm.h): the ZMQ endpoint's key cases run
unchanged over it (test_store_master's own test functions, with an shm
client), malformed frames and hostile ring indices close only their own
client, a client gone with calls in flight is freed, the client bound is
an error naming its flag, libcrescent (crescentctl) speaks it as
shm://NAME, and the default name is best effort.  Admin token and client
secrets over every endpoint: test_security.py (its `transport`
parameter)."""
import os
import struct
import subprocess

import pytest

import test_store_master as sm
from conftest import actors_by_name, binary, free_port
from master_client import STATUS, MasterClient, ShmMasterClient

WAIT_S = 10


def start_shm(daemon, *extra):
    """crescentd on free ports; returns (daemon, ZMQ endpoint, shm endpoint),
    the shm name the default one derived from --rpc-address's port."""
    port = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{port}",
               "--event-address", f"tcp://127.0.0.1:{free_port()}",
               "--replay-address", f"tcp://127.0.0.1:{free_port()}",
               "--rpc-tcp-address", f"127.0.0.1:{free_port()}", *extra)
    return d, f"tcp://127.0.0.1:{port}", f"shm://@crescent-rpc/{port}"


@pytest.fixture
def shm_master(daemon):
    """test_store_master's `master` fixture, with an shm client."""
    yield from sm.endpoint_master(daemon, start_shm, ShmMasterClient)


@pytest.mark.parametrize("case", sm.KEY_CASES, ids=lambda f: f.__name__[len("test_"):])
def test_store_master_cases_over_shm(shm_master, case):
    case(shm_master)


def shm_counters(d):
    return actors_by_name(d.port)["rpc_shm"]["counters"]


def test_malformed_frames_and_hostile_indices_close_only_that_client(daemon):
    d, _, shm = start_shm(daemon)
    good = ShmMasterClient(shm, timeout=WAIT_S)
    pb = good.pb
    assert good.ping().status_code == 0
    # Within a frame, what the other endpoints refuse is refused the same way.
    good.send_frames([struct.pack(">HQ", 999, 41)])
    assert good.recv()[:2] == (41, STATUS["INVALID_PARAMS"])
    good.send_frames([struct.pack(">HQ", pb.PUT_START, 42), b"\xff\xff\xff"])
    rid, status, _ = good.recv()
    assert (rid, status) == (42, STATUS["PROTOCOL"])
    # A length outside the bounds: answered under id 0, that client closed.
    bad = ShmMasterClient(shm, timeout=WAIT_S)
    bad.send_raw(struct.pack(">I", 3))
    rid, status, body = bad.recv()
    assert (rid, status) == (0, STATUS["PROTOCOL"]) and b"outside" in body
    assert bad.closed_by_peer()
    bad.close()
    # A tail moved past the ring: closed without a reply.
    hostile = ShmMasterClient(shm, timeout=WAIT_S)
    hostile.set_u64(hostile.REQ_TAIL, hostile.ring + 1)
    hostile._wake()
    assert hostile.closed_by_peer()
    hostile.close()
    assert good.ping().status_code == 0
    counters = shm_counters(d)
    assert counters["clients_closed_malformed_total"] == 2
    sm.wait_for(lambda: shm_counters(d)["clients_open"] == 1, what="closed clients freed")
    good.close()


def test_client_gone_with_calls_in_flight_and_the_client_bound(daemon):
    """A client that leaves with calls still at tasks is freed at its
    socket's EOF, the late replies dropped; one client past
    --rpc-shm-clients-max is refused with an error naming the flag."""
    d, _, shm = start_shm(daemon, "--rpc-shm-clients-max", "2")
    c = ShmMasterClient(shm, client_id=(7, 7), timeout=WAIT_S)
    pb = c.pb
    gone = ShmMasterClient(shm, client_id=(8, 8), timeout=WAIT_S)
    with pytest.raises(ConnectionError, match="--rpc-shm-clients-max"):
        ShmMasterClient(shm, timeout=WAIT_S)
    for _ in range(16):
        gone.send(pb.QUERY_TASK, pb.QueryTaskRequest(task_id=c.uuid((1, 2))))
    gone.close()

    def settled():
        counters = shm_counters(d)
        return counters["clients_open"] == 1 and counters["in_flight"] == 0

    sm.wait_for(settled, timeout=60, what="the gone client's rings freed, its calls finished")
    assert shm_counters(d)["clients_refused_full_total"] == 1
    again = ShmMasterClient(shm, timeout=WAIT_S)  # its slot is free again
    assert again.get_version().status_code == 0
    again.close()
    assert c.get_version().status_code == 0
    c.close()
    code, err = d.stop()
    assert code == 0, err


def test_crescentctl_over_shm(daemon, tmp_path):
    """libcrescent takes shm://NAME: crescentctl mounts, puts, reads and
    removes over it, and sees what a ZMQ client stored; a name nobody
    serves is an error naming --rpc-shm-path."""
    d, rpc, shm = start_shm(daemon, "--local-segment-size", str(16 << 20))
    env = {"CRESCENT_CLIENT_ID": "00000000-0000-4000-8000-00000000000b"}
    ctl = [binary("crescentctl"), "--rpc", shm, "--http", f"127.0.0.1:{d.port}",
           "--timeout-ms", str(WAIT_S * 1000)]

    def run(*args, code=0):
        r = subprocess.run(ctl + list(args), capture_output=True, text=True, timeout=WAIT_S * 3,
                           env=dict(os.environ, **env))
        assert r.returncode == code, r.stderr
        return r.stdout + r.stderr

    # Bytes through crescentd's own segment (the only one yet).
    data = tmp_path / "in.bin"
    data.write_bytes(os.urandom(3000))
    run("put", "kb", str(data))
    out = tmp_path / "out.bin"
    run("get", "kb", str(out))
    assert out.read_bytes() == data.read_bytes()
    # The same refusal over shm as over the other endpoints: leased.
    assert "OBJECT_HAS_LEASE" in run("rm", "kb", code=1)
    run("rm", "kb", "--force")
    run("exist", "kb", code=1)
    run("mount", "seg0", "16M", "--endpoint", "127.0.0.1:1")
    run("put-start", "ks", "4096", "--preferred", "seg0")
    run("put-end", "ks")
    assert "seg0" in run("replicas", "ks")
    with MasterClient(rpc, timeout=WAIT_S) as z:
        assert z.exist_key("ks").exists
    bad = subprocess.run([binary("crescentctl"), "--rpc", "shm://@crescent-rpc/nobody-here",
                          "--timeout-ms", "2000", "exist", "ks"], capture_output=True, text=True,
                         timeout=WAIT_S)
    assert bad.returncode != 0 and "--rpc-shm-path" in bad.stderr, bad.stderr


def test_default_name_is_best_effort_a_given_one_must_bind_and_off(daemon):
    """A second crescentd whose default shm name is taken starts without
    it and says so; a name the user chose that is taken fails the start
    (exit 2, one line); --rpc-shm-path off serves none."""
    d, rpc, shm = start_shm(daemon)
    port = rpc.rsplit(":", 1)[1]
    base = [binary("crescentd"), "--no-pin", "--metrics-port", "0", "--local-segment-size", "0",
            "--rpc-tcp-address", f"127.0.0.1:{free_port()}",
            "--event-address", f"tcp://127.0.0.1:{free_port()}",
            "--replay-address", f"tcp://127.0.0.1:{free_port()}"]
    # Same default name (port), another ZMQ address: the port is in the name only.
    d2 = daemon("--rpc-address", f"tcp://127.0.0.2:{port}",
                "--rpc-tcp-address", f"127.0.0.1:{free_port()}",
                "--event-address", f"tcp://127.0.0.1:{free_port()}",
                "--replay-address", f"tcp://127.0.0.1:{free_port()}")
    code, err = d2.stop()
    assert code == 0 and "default name @crescent-rpc/" in err and "is taken" in err, err
    r = subprocess.run(base + ["--http-address", f"127.0.0.1:{free_port()}",
                               "--rpc-address", f"tcp://127.0.0.1:{free_port()}",
                               "--rpc-shm-path", shm[len("shm://"):]],
                       capture_output=True, text=True, timeout=WAIT_S * 3)
    assert r.returncode == 2 and "cannot serve shm RPC" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    d.stop()
    d3, _, shm3 = start_shm(daemon, "--rpc-shm-path", "off")
    with pytest.raises(OSError):
        ShmMasterClient(shm3, timeout=WAIT_S)
    assert shm_counters(d3)["clients_open"] == 0
