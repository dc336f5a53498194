"""Mooncake's own client (MooncakeDistributedStore, protocol "tcp") against
crescentd as its master and metadata server, compared call by call with the
same client against Mooncake's own mooncake_master, both run here.

Two processes (tests/integration/mooncake_roles.py): A hosts a segment and
puts (one key, a duplicate, a batch); B, another process, gets A's bytes over
Mooncake's Transfer Engine and runs is_exist, the batch forms, remove of a
missing key and of a key under its read lease, remove_by_regex, batch_remove
and remove_all.  Every answer must equal mooncake_master's.  Then the puts
must have reached crescent's event plane, and the indexer must hold the
keys in Mooncake's block-hash form as blocks (/query_by_hash) until they are
removed, and the HTTP metadata server must answer GET/PUT/DELETE as the
reference's does.

Mooncake's client and master are ../shared/mooncake relative to the checkout
(built unmodified at the commit docs/mooncake.md names; CRESCENT_MOONCAKE_DIR
overrides); the test is skipped, saying so, only when that folder is absent.
Its Debian packages are installed by scripts/setup.sh."""
import json
import os
import pathlib
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import msgpack
import pytest
import zmq

from conftest import binary, free_port, http_get, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
MC = pathlib.Path(os.environ.get("CRESCENT_MOONCAKE_DIR") or ROOT.parent / "shared" / "mooncake")
ROLES = pathlib.Path(__file__).with_name("mooncake_roles.py")
LEASE_MS = "3000"
HASH_KEYS = ["0x1f2e3d4c5b6a7988", "1234567890123456789"]  # as mooncake_roles.py puts

pytestmark = pytest.mark.skipif(
    not (MC / "bin" / "mooncake_master").exists(),
    reason=f"Mooncake's client and master are not at {MC} (../shared/mooncake relative to "
           "the checkout, or CRESCENT_MOONCAKE_DIR)")


def client_env():
    return {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(MC)}


def port_open(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def run_pair(master, metadata, tmp, between=None):
    """Roles A and B against one master (between(): after A's puts, before B);
    returns their JSON answers."""
    tmp.mkdir()
    ready, done = tmp / "ready", tmp / "done"
    a = subprocess.Popen(["/usr/bin/python3", str(ROLES), "A", master, metadata, str(ready),
                          str(done)], env=client_env(), stdout=subprocess.PIPE,
                         stderr=open(tmp / "a.err", "w"), text=True)
    try:
        wait_for(lambda: ready.exists() or a.poll() is not None, "process A ready", timeout=120)
        if between is not None and a.poll() is None:
            between()
        b = subprocess.run(["/usr/bin/python3", str(ROLES), "B", master, metadata],
                           env=client_env(), capture_output=True, text=True, timeout=180)
    finally:
        done.write_text("done")
        out_a, _ = a.communicate(timeout=60)
    assert b.returncode == 0, b.stderr[-3000:]
    assert a.returncode == 0, (tmp / "a.err").read_text()[-3000:]
    return json.loads(out_a.strip().splitlines()[-1]), json.loads(b.stdout.strip().splitlines()[-1])


def query_by_hash(port, hashes):
    """The indexer's answer for these sequence hashes under the store's
    defaults for hash-keyed objects (--store-hash-key-model '', block size 16)."""
    body = json.dumps({"model": "", "block_size": 16, "seq_hashes": hashes}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/query_by_hash", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def http(method, port, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


METADATA_CALLS = [
    ("PUT", "/metadata?key=mooncake%2Fram%2Fseg1", b'{"name":"seg1"}'),
    ("GET", "/metadata?key=mooncake%2Fram%2Fseg1", None),
    ("PUT", "/metadata?key=mooncake%2Fram%2Fseg1", b'{"name":"seg1","v":2}'),
    ("GET", "/metadata?key=mooncake%2Fram%2Fseg1", None),
    ("PUT", "/metadata?key=mooncake%2Frpc_meta%2Fseg1", b'{"ip":"1"}'),
    ("PUT", "/metadata?key=mooncake%2Frpc_meta%2Fseg1", b'{"ip":"1"}'),
    ("PUT", "/metadata?key=mooncake%2Frpc_meta%2Fseg1", b'{"ip":"2"}'),
    ("DELETE", "/metadata?key=mooncake%2Fram%2Fseg1", None),
    ("GET", "/metadata?key=mooncake%2Fram%2Fseg1", None),
    ("DELETE", "/metadata?key=mooncake%2Fram%2Fseg1", None),
    ("GET", "/metadata", None),
    ("GET", "/health", None),
]


@pytest.fixture
def reference(tmp_path):
    rpc, meta = free_port(), free_port()
    log = open(tmp_path / "mooncake_master.log", "w")
    proc = subprocess.Popen([str(MC / "bin" / "mooncake_master"), "--rpc_port", str(rpc),
                             "--rpc_address", "127.0.0.1", "--metrics_port", "0",
                             "--enable_http_metadata_server=true",
                             "--http_metadata_server_port", str(meta),
                             "--http_metadata_server_host", "127.0.0.1",
                             "--default_kv_lease_ttl", LEASE_MS],
                            stdout=log, stderr=log)
    try:
        wait_for(lambda: port_open(rpc) and port_open(meta), "mooncake_master listening")
        yield rpc, meta
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_mooncake_client_on_crescentd_answers_as_on_mooncake_master(daemon, reference, tmp_path):
    ref_rpc, ref_meta = reference
    rpc, meta, events = free_port(), free_port(), f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc_port", str(rpc), "--enable_http_metadata_server=true",
               "--http_metadata_server_port", str(meta), "--http_metadata_server_host",
               "127.0.0.1", "--default_kv_lease_ttl", LEASE_MS, "--event-address", events)
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(events)
    time.sleep(0.5)  # the subscription reaches the publisher before the puts

    ref_a, ref_b = run_pair(f"127.0.0.1:{ref_rpc}", f"http://127.0.0.1:{ref_meta}/metadata",
                            tmp_path / "reference")
    seen = {}

    def crescent_client_sees_the_put():
        """crescent's own client reads the object Mooncake's client put, and
        the indexer holds the hash-keyed ones as blocks of the store."""
        zmq_rpc = d.args[d.args.index("--rpc-address") + 1]
        r = subprocess.run([binary("crescentctl"), "--rpc", zmq_rpc, "--json", "replicas", "k"],
                           capture_output=True, text=True, timeout=60)
        seen["rc"], seen["out"] = r.returncode, r.stdout + r.stderr
        for h in HASH_KEYS:  # each key one block: found alone (the store's events are lazy)
            wait_for(lambda: query_by_hash(d.port, [h]).get("default", {}).get(
                "crescent-store", {}).get("longest_matched") == 16, f"block {h} indexed",
                timeout=30)
        seen["indexed"] = query_by_hash(d.port, HASH_KEYS)

    a, b = run_pair(f"127.0.0.1:{rpc}", f"http://127.0.0.1:{meta}/metadata",
                    tmp_path / "crescentd", between=crescent_client_sees_the_put)
    # The reference's answers are what they should be (so equality means something).
    assert ref_a == {"setup": 0, "put": 0, "put_duplicate": 0, "put_batch": 0,
                     "put_hash_keys": 0, "is_exist": 1}
    assert ref_b["get_equal"] and ref_b["remove_under_lease"] == -706
    assert ref_b["remove_missing"] == -704 and ref_b["batch_is_exist"] == [1, 1, 0]
    assert (a, b) == (ref_a, ref_b)
    assert seen["rc"] == 0 and "102404" in seen["out"], seen
    # Both hash-keyed objects are blocks of the store's instance, in memory.
    store = seen["indexed"]["default"]["crescent-store"]
    assert store["longest_matched"] == 32 and store["CPU"] == 32, seen["indexed"]

    # The event plane published the puts (seed 000 batches), and the indexer
    # took the store's events.
    keys = set()
    deadline = time.monotonic() + 30
    while not {"k", "b1", "b2", "c1", *HASH_KEYS} <= keys and time.monotonic() < deadline:
        if sub.poll(1000):
            _, _, payload = sub.recv_multipart()
            for event in msgpack.unpackb(payload, raw=False)[1]:
                if event[0] == "BlockStoreEvent":
                    keys.add(event[1])
    sub.close()
    ctx.term()
    assert {"k", "b1", "b2", "c1", *HASH_KEYS} <= keys, keys
    status, body = http_get(d.port, "/global_view")
    assert status == 200
    store = json.loads(body)["store"]
    assert store["events"] >= 6 and store["blocks_stored"] >= 2, store
    # B's remove_all took them out of the index too.
    wait_for(lambda: query_by_hash(d.port, HASH_KEYS) == {}, "hash-keyed blocks removed",
             timeout=30)

    # The HTTP metadata server answers as the reference's.
    for method, path, data in METADATA_CALLS:
        assert http(method, meta, path, data) == http(method, ref_meta, path, data), (method, path)

    # A call crescentd does not serve (UpsertStart) gets Mooncake's
    # UNAVAILABLE_IN_CURRENT_MODE (-1011), not a dropped connection, and a log
    # line naming it.
    c = subprocess.run(["/usr/bin/python3", str(ROLES), "C", f"127.0.0.1:{rpc}",
                        f"http://127.0.0.1:{meta}/metadata"], env=client_env(),
                       capture_output=True, text=True, timeout=180)
    assert c.returncode == 0, c.stderr[-3000:]
    assert json.loads(c.stdout.strip().splitlines()[-1]) == {
        "setup": 0, "upsert": -1011, "is_exist_after": 0}
    code, err = d.stop()
    assert code == 0
    assert "Mooncake's UpsertStart" in err and "UNAVAILABLE_IN_CURRENT_MODE" in err, err[-2000:]


def metadata_keys_after_kill(master, meta_port, tmp):
    """Role D mounts a segment and is killed (-9): the segment's Transfer
    Engine keys, before, and once the master expired the client."""
    tmp.mkdir()
    ready = tmp / "ready"
    d = subprocess.Popen(["/usr/bin/python3", str(ROLES), "D", master,
                          f"http://127.0.0.1:{meta_port}/metadata", str(ready)],
                         env=client_env(), stdout=subprocess.PIPE,
                         stderr=open(tmp / "d.err", "w"), text=True)
    try:
        wait_for(lambda: ready.exists() or d.poll() is not None, "process D ready", timeout=120)
        out = json.loads(d.stdout.readline())
        assert out["setup"] == 0 and out["name"], (out, (tmp / "d.err").read_text()[-2000:])
    finally:
        d.kill()
        d.wait(timeout=30)
    # Encoded as the Transfer Engine sends it (the reference matches the key as sent).
    name = urllib.parse.quote(out["name"], safe="")
    paths = [f"/metadata?key=mooncake%2F{kind}%2F{name}" for kind in ("ram", "rpc_meta")]
    before = [http("GET", meta_port, p)[0] for p in paths]
    wait_for(lambda: all(http("GET", meta_port, p)[0] == 404 for p in paths),
             "the expired client's metadata keys removed", timeout=60)
    return before


def test_expired_clients_metadata_keys_are_removed(daemon, tmp_path):
    """--enable_metadata_cleanup_on_timeout=true: when crescentd expires a
    Mooncake client (--client_ttl), the keys its Transfer Engine published for
    its segment (mooncake/ram/NAME, mooncake/rpc_meta/NAME) leave the metadata
    server, as Mooncake's master means to do.  (mooncake_master at the pinned
    commit tries and removes nothing: its metadata server keeps a key as the
    Transfer Engine sent it, URL-encoded, and its cleanup looks for the decoded
    name, "ram_key_removed=0" in its log; so this is not compared with it.)"""
    rpc, meta = free_port(), free_port()
    d = daemon("--rpc_port", str(rpc), "--http_metadata_server_port", str(meta),
               "--enable_http_metadata_server=true", "--http_metadata_server_host", "127.0.0.1",
               "--enable_metadata_cleanup_on_timeout=true", "--client_ttl", "2")
    before = metadata_keys_after_kill(f"127.0.0.1:{rpc}", meta, tmp_path / "crescentd")
    assert before == [200, 200]
    status, body = http_get(d.port, "/metrics")
    assert status == 200
    text = body.decode()
    assert "crescent_mooncake_rpc_metadata_keys_removed_total 2" in text, \
        [line for line in text.splitlines() if "mooncake_rpc" in line]
    assert "crescent_mooncake_rpc_clients_forgotten_total 1" in text
