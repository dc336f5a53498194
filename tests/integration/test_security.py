"""Exposing crescentd safely (issue 10, item 5): CurveZMQ on the RPC, event
and replay sockets; the admin token on destructive RPCs and HTTP mutations;
with no keys and no token everything is as before.

Keys come from `crescentctl keygen`; the clients are python3-zmq with its
CURVE support (libzmq with libsodium) and crescentctl (libcrescent, keys
from the environment).

Run: CRESCENT_BIN_DIR=... /usr/bin/python3 -m pytest -q tests/integration/test_security.py
"""
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import binary, free_port  # noqa: E402
from master_client import MasterClient, connect  # noqa: E402

WAIT_S = 10
REFUSED_WAIT_MS = 1500  # a refused handshake never answers; this bounds the wait


def keygen(tmp_path, name):
    prefix = tmp_path / name
    subprocess.run([binary("crescentctl"), "keygen", str(prefix)], check=True,
                   capture_output=True)
    return (prefix.with_suffix(".pub").read_text().strip(),
            prefix.with_suffix(".key").read_text().strip(), prefix)


def endpoints():
    return [f"tcp://127.0.0.1:{free_port()}" for _ in range(3)]


@pytest.fixture
def curve_daemon(daemon, tmp_path):
    server_pub, _, server = keygen(tmp_path, "server")
    alice_pub, alice_sec, _ = keygen(tmp_path, "alice")
    clients = tmp_path / "clients"
    clients.mkdir()
    (clients / "alice.pub").write_text(f"# alice\n{alice_pub}\n")
    rpc, pub, replay = endpoints()
    d = daemon("--rpc-address", rpc, "--event-address", pub, "--replay-address", replay,
               "--curve-secret-key-file", str(server) + ".key", "--curve-clients", str(clients))
    return {"daemon": d, "rpc": rpc, "pub": pub, "replay": replay, "server": server_pub,
            "alice": (alice_pub, alice_sec), "tmp": tmp_path}


def curve_socket(ctx, kind, server_key, keys):
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    if keys is not None:
        s.curve_serverkey = server_key.encode()
        s.curve_publickey = keys[0].encode()
        s.curve_secretkey = keys[1].encode()
    return s


def get_version(ctx, endpoint, server_key, keys):
    """One GetVersion over a DEALER; the reply's transport status, or None
    when no reply came (the handshake was refused)."""
    client = MasterClient(endpoint, timeout=REFUSED_WAIT_MS / 1000, ctx=ctx)
    client.sock.close(linger=0)
    client.sock = curve_socket(ctx, zmq.DEALER, server_key, keys)
    client.sock.connect(endpoint)
    try:
        return client.get_version().status_code
    except TimeoutError:
        return None
    finally:
        client.close()


def test_curve_admits_only_listed_clients(curve_daemon):
    c = curve_daemon
    ctx = zmq.Context()
    try:
        assert get_version(ctx, c["rpc"], c["server"], c["alice"]) == 0
        mallory = zmq.curve_keypair()
        assert get_version(ctx, c["rpc"], c["server"],
                           (mallory[0].decode(), mallory[1].decode())) is None
        assert get_version(ctx, c["rpc"], c["server"], None) is None  # plain TCP
        # Replay: a request from alice is answered (end marker), mallory's is not.
        for keys, answered in ((c["alice"], True),
                               ((mallory[0].decode(), mallory[1].decode()), False)):
            d = curve_socket(ctx, zmq.DEALER, c["server"], keys)
            d.connect(c["replay"])
            d.send_multipart([b"", (0).to_bytes(8, "big")])
            assert bool(d.poll(WAIT_S * 1000 if answered else REFUSED_WAIT_MS)) == answered
            d.close()
    finally:
        ctx.destroy(linger=0)
    # The daemon logged each refusal with the key it refused.
    code, err = c["daemon"].stop()
    assert code == 0
    assert "not in curve_clients" in err and mallory[0].decode() in err


def test_curve_events_reach_only_listed_subscribers(curve_daemon):
    c = curve_daemon
    ctx = zmq.Context()
    try:
        subs = {}
        mallory = zmq.curve_keypair()
        for name, keys in (("alice", c["alice"]),
                           ("mallory", (mallory[0].decode(), mallory[1].decode()))):
            s = curve_socket(ctx, zmq.SUB, c["server"], keys)
            s.setsockopt(zmq.SUBSCRIBE, b"")
            s.connect(c["pub"])
            subs[name] = s
        env = dict(os.environ, CRESCENT_RPC=c["rpc"], CRESCENT_CURVE_SERVER_KEY=c["server"],
                   CRESCENT_CURVE_PUBLIC_KEY=c["alice"][0],
                   CRESCENT_CURVE_SECRET_KEY=c["alice"][1],
                   CRESCENT_CLIENT_ID="00000000-0000-4000-8000-00000000000a")
        ctl = [binary("crescentctl"), "--timeout-ms", str(WAIT_S * 1000)]

        def run(*args):
            done = subprocess.run(ctl + list(args), env=env, capture_output=True, text=True)
            assert done.returncode == 0, (args, done.stdout, done.stderr)

        run("mount", "seg", "1048576", "--endpoint", "127.0.0.1:17000")
        # Puts until alice's subscription is seen to work (PUB/SUB joins late).
        for i in range(100):
            run("put-start", f"k{i}", "64")
            run("put-end", f"k{i}")
            if subs["alice"].poll(50):
                break
        assert subs["alice"].poll(0)
        assert not subs["mallory"].poll(REFUSED_WAIT_MS)
        # crescentctl without keys is refused: it times out, exit 3.
        plain = {k: v for k, v in env.items() if not k.startswith("CRESCENT_CURVE_")}
        refused = subprocess.run([binary("crescentctl"), "--timeout-ms", "1000", "ping"],
                                 env=plain, capture_output=True, text=True)
        assert refused.returncode == 3, refused
    finally:
        ctx.destroy(linger=0)


def test_curve_flags_checked_at_start(daemon, tmp_path):
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    clients = tmp_path / "clients"
    clients.write_text("")
    rpc, pub, replay = endpoints()
    args = [binary("crescentd"), "--no-pin", "--http-address", f"127.0.0.1:{free_port()}",
            "--rpc-address", rpc, "--event-address", pub, "--replay-address", replay]
    half = subprocess.run(args + ["--curve-clients", str(clients)], capture_output=True,
                          text=True, timeout=WAIT_S)
    assert half.returncode == 2 and "go together" in half.stderr
    wrong = subprocess.run(args + ["--curve-clients", str(clients), "--curve-secret-key-file",
                                   str(bad)], capture_output=True, text=True, timeout=WAIT_S)
    assert wrong.returncode != 0 and "bad.key line 1: not a Z85 CURVE key" in wrong.stderr


def test_no_keys_plain_tcp_as_before(daemon):
    rpc, pub, replay = endpoints()
    daemon("--rpc-address", rpc, "--event-address", pub, "--replay-address", replay)
    with MasterClient(rpc, timeout=WAIT_S) as client:
        assert client.get_version().status_code == 0


# ---- the admin token -------------------------------------------------------

TOKEN = "s3cret-admin-token-0123456789"


def status_of(resp):
    return resp.status_code, resp.error_message


def serving(daemon, transport, *extra):
    """crescentd on free ports; the RPC endpoint of `transport`: its ZMQ
    one, its native one (crescent://, --rpc-tcp-address) or its shm one
    (shm://, --rpc-shm-path), which must enforce the token and the secrets
    exactly as the ZMQ one does."""
    rpc, pub, replay = endpoints()
    native = f"127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--event-address", pub, "--replay-address", replay,
               "--rpc-tcp-address", native, *extra)
    if transport == "shm":  # the default name, from --rpc-address's port
        return d, f"shm://@crescent-rpc/{rpc.rsplit(':', 1)[1]}"
    return d, rpc if transport == "zmq" else f"crescent://{native}"


@pytest.fixture(params=["zmq", "native", "shm"])
def transport(request):
    return request.param


@pytest.fixture
def token_daemon(daemon, tmp_path, transport):
    path = tmp_path / "admin.token"
    path.write_text(TOKEN + "\n")
    d, rpc = serving(daemon, transport, "--admin-token-file", str(path))
    return d, rpc, path


def test_admin_token_gates_destructive_rpcs(token_daemon):
    d, rpc, _ = token_daemon
    ILLEGAL = -601
    with connect(rpc, timeout=WAIT_S) as c:
        pb = c.pb
        assert c.mount_segment("seg", 1 << 24, endpoint="10.0.0.1:1").status_code == 0
        for key in ("a", "b", "c"):
            start, end = c.put(key, 4096)
            assert start.status_code == 0 and end.status_code == 0
        calls = [
            (pb.REMOVE_ALL, lambda t: pb.RemoveAllRequest(force=False, admin_token=t)),
            (pb.REMOVE_BY_REGEX, lambda t: pb.RemoveByRegexRequest(key_regex="^zz",
                                                                   admin_token=t)),
            (pb.BATCH_QUERY_IP, lambda t: pb.BatchQueryIpRequest(
                client_ids=[c.uuid()], admin_token=t)),
            (pb.BATCH_REPLICA_CLEAR, lambda t: pb.BatchReplicaClearRequest(
                object_keys=["zz"], client_id=c.uuid(), admin_token=t)),
            (pb.REMOVE, lambda t: pb.RemoveRequest(key="a", force=True, admin_token=t)),
            (pb.BATCH_REMOVE, lambda t: pb.BatchRemoveRequest(keys=["b"], force=True,
                                                             admin_token=t)),
        ]
        for method, make in calls:
            req = make(None)
            req.ClearField("admin_token")
            code, message = status_of(c.call(method, req))
            assert code == ILLEGAL and "no admin token" in message, (method, message)
            assert "--admin-token-file" in message and "CRESCENT_ADMIN_TOKEN" in message
            code, message = status_of(c.call(method, make("wrong-token-0123456789")))
            assert code == ILLEGAL and "wrong admin token" in message, (method, message)
        assert c.get_replica_list("a").status_code == 0  # nothing was removed
        for method, make in calls:
            code, message = status_of(c.call(method, make(TOKEN)))
            assert code != ILLEGAL, (method, message)
        assert c.get_replica_list("a").status_code == -704  # the forced Remove ran
        # A plain Remove is anybody's: no token needed.
        assert all(r.status_code == 0 for r in c.put("d", 4096))
        assert c.remove("d").status_code == 0
        # Unmount: the owner as before; another client only with the token.
        assert c.mount_segment("seg2", 1 << 24, base=0x90000000,
                               endpoint="10.0.0.2:1").status_code == 0
        other = pb.UnmountSegmentRequest(segment_name="seg2", client_id=c.uuid((9, 9)))
        code, message = status_of(c.call(pb.UNMOUNT_SEGMENT, other))
        assert code == ILLEGAL and "another client" in message
        other.admin_token = TOKEN
        assert c.call(pb.UNMOUNT_SEGMENT, other).status_code == 0
        assert c.unmount_segment("seg").status_code == 0


def http(port, method, path, body=None, token=None):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=WAIT_S) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_admin_token_gates_http_mutations_and_owner_ids(token_daemon):
    d, rpc, _ = token_daemon
    body = {"endpoint": "tcp://127.0.0.1:1", "type": "vLLM", "modelname": "m",
            "instance_id": "e1", "block_size": 16}
    status, answer = http(d.port, "POST", "/register", body)
    assert status == 401 and answer["error"] == "admin token required"
    assert "Authorization: Bearer" in answer["detail"]
    status, answer = http(d.port, "POST", "/register", body, token="nope-nope-nope-nope")
    assert status == 401 and answer["error"] == "wrong admin token"
    status, answer = http(d.port, "POST", "/unregister", {"instance_id": "e1"})
    assert status == 401
    status, answer = http(d.port, "POST", "/register", body, token=TOKEN)
    assert status != 401, answer
    # Reads stay open.
    status, _ = http(d.port, "POST", "/query", {"model": "m", "block_size": 16,
                                                "token_ids": [1, 2]})
    assert status == 200
    # Owner ids only for admins.
    with connect(rpc, client_id=(7, 7), timeout=WAIT_S) as c:
        assert c.mount_segment("seg", 1 << 24, endpoint="10.0.0.1:1").status_code == 0
    status, seg = http(d.port, "GET", "/api/v1/segments/seg")
    assert status == 200 and seg["owner"] is None
    status, seg = http(d.port, "GET", "/api/v1/segments/seg", token=TOKEN)
    assert status == 200 and seg["owner"] == "00000000000000070000000000000007"


def test_crescentctl_sends_the_admin_token(token_daemon):
    d, rpc, path = token_daemon
    env = dict(os.environ, CRESCENT_RPC=rpc)
    env.pop("CRESCENT_ADMIN_TOKEN", None)
    ctl = [binary("crescentctl"), "--timeout-ms", str(WAIT_S * 1000)]
    refused = subprocess.run(ctl + ["rm-regex", "^x"], env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "no admin token" in refused.stderr
    by_file = subprocess.run(ctl + ["--admin-token-file", str(path), "rm-regex", "^x"], env=env,
                             capture_output=True, text=True)
    assert by_file.returncode == 0, by_file.stderr
    by_env = subprocess.run(ctl + ["rm-regex", "^x"], env=dict(env, CRESCENT_ADMIN_TOKEN=TOKEN),
                            capture_output=True, text=True)
    assert by_env.returncode == 0, by_env.stderr


def test_admin_token_file_checked_at_start(tmp_path):
    short = tmp_path / "short.token"
    short.write_text("abc\n")
    rpc, pub, replay = endpoints()
    args = [binary("crescentd"), "--no-pin", "--http-address", f"127.0.0.1:{free_port()}",
            "--rpc-address", rpc, "--event-address", pub, "--replay-address", replay]
    for path, why in ((short, "16 to 256 printable"), (tmp_path / "missing", "cannot read")):
        r = subprocess.run(args + ["--admin-token-file", str(path)], capture_output=True,
                           text=True, timeout=WAIT_S)
        assert r.returncode != 0 and why in r.stderr, r.stderr


def test_no_token_everything_open_as_before(daemon):
    rpc, pub, replay = endpoints()
    d = daemon("--rpc-address", rpc, "--event-address", pub, "--replay-address", replay)
    with connect(rpc, client_id=(7, 7), timeout=WAIT_S) as c:
        assert c.remove_all(force=True).status_code == 0
        assert c.batch_query_ip([(7, 7)]).status_code == 0
        assert c.mount_segment("seg", 1 << 24, endpoint="10.0.0.1:1").status_code == 0
    status, seg = http(d.port, "GET", "/api/v1/segments/seg")
    assert status == 200 and seg["owner"] == "00000000000000070000000000000007"


# ---- client secrets: a client id alone does not act as that client ---------

VICTIM = (0x5151, 0x7777)
ILLEGAL_CLIENT = -601  # include/crescent/error.h


def poll_until(fn, timeout_s=30.0):
    """fn() until it returns true, within a generous bound (the machine is loaded)."""
    import time
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.05)
    return False


def test_forged_client_id_refused_owner_works(daemon, transport):
    _, rpc = serving(daemon, transport)
    with connect(rpc, client_id=VICTIM, timeout=WAIT_S) as owner, \
            connect(rpc, client_id=VICTIM, timeout=WAIT_S, keep_secrets=False) as thief:
        mounted = owner.mount_segment("victim-seg", 1 << 20)
        assert mounted.status_code == 0
        assert len(mounted.client_secret) == 16  # issued at the first mount
        assert owner.put_start("victim-key", 4096).status_code == 0
        # The thief knows the client id (GET /api/v1/segments/NAME shows it)
        # but not the secret: every state-changing call is refused.
        for call in (lambda: thief.unmount_segment("victim-seg"),
                     lambda: thief.put_revoke("victim-key"),
                     lambda: thief.put_end("victim-key"),
                     lambda: thief.ping(),
                     lambda: thief.batch_put_revoke(["victim-key"])):
            resp = call()
            codes = list(getattr(resp, "status_codes", [])) or [resp.status_code]
            assert codes == [ILLEGAL_CLIENT], resp
        resp = thief.ping()
        assert "carries none" in resp.error_message and "TTL" in resp.error_message
        wrong = thief.pb.UnmountSegmentRequest(segment_name="victim-seg",
                                               client_id=thief.uuid(), client_secret=b"x" * 16)
        resp = thief.call(thief.pb.UNMOUNT_SEGMENT, wrong)
        assert resp.status_code == ILLEGAL_CLIENT and "another secret" in resp.error_message
        # The owner's own calls all work, with the secret its client kept.
        assert owner.ping().client_known
        assert owner.put_end("victim-key").status_code == 0
        assert owner.unmount_segment("victim-seg").status_code == 0


def test_a_put_only_client_secret_goes_to_its_own_connection(daemon, transport):
    """Issue 28 item 4: a client that had only done PutStart had no secret,
    and a Ping with its id from any connection was issued one: the real
    client's PutEnd was then refused and the thief's PutRevoke taken.  The
    secret now goes only to the connection that made the id known."""
    _, rpc = serving(daemon, transport)
    with connect(rpc, client_id=(0x5e5e, 1), timeout=WAIT_S) as server, \
            connect(rpc, client_id=VICTIM, timeout=WAIT_S) as owner, \
            connect(rpc, client_id=VICTIM, timeout=WAIT_S, keep_secrets=False) as thief:
        assert server.mount_segment("store-seg", 1 << 20).status_code == 0
        assert owner.put_start("put-only-key", 4096).status_code == 0
        stolen = thief.ping()
        assert stolen.status_code == 0 and len(stolen.client_secret) == 0, stolen
        assert thief.ping().client_secret == b""  # asked again: still not issued
        mine = owner.ping()
        assert len(mine.client_secret) == 16  # issued on the owner's own connection
        assert thief.put_revoke("put-only-key").status_code == ILLEGAL_CLIENT
        assert owner.put_end("put-only-key").status_code == 0
        assert owner.exist_key("put-only-key").exists


def test_task_executors_show_only_to_the_admin(daemon, tmp_path):
    """Issue 28 item 4: /api/v1/tasks named each task's executor (a client id)
    to anyone, with an admin token set; now only to requests carrying it, as
    the owners in /api/v1/segments and /api/v1/objects."""
    path = tmp_path / "admin.token"
    path.write_text(TOKEN + "\n")
    d, rpc = serving(daemon, "zmq", "--admin-token-file", str(path))
    with MasterClient(rpc, client_id=(0xA, 1), timeout=WAIT_S) as a, \
            MasterClient(rpc, client_id=(0xB, 2), timeout=WAIT_S) as b:
        assert a.mount_segment("seg-a", 1 << 20, base=0,
                               endpoint="10.0.0.1:17000").status_code == 0
        assert b.mount_segment("seg-c", 1 << 20, base=1 << 30,
                               endpoint="10.0.0.2:17000").status_code == 0
        a.put("k", 4096, preferred_segment="seg-a")
        assert a.create_copy_task("k", ["seg-c"]).status_code == 0
    status, seen = http(d.port, "GET", "/api/v1/tasks")
    assert status == 200 and seen["tasks"] and seen["tasks"][0]["assigned_client"] is None
    status, seen = http(d.port, "GET", "/api/v1/tasks", token=TOKEN)
    assert status == 200 and isinstance(seen["tasks"][0]["assigned_client"], str)
    one = seen["tasks"][0]["id"]
    status, seen = http(d.port, "GET", f"/api/v1/tasks/{one}")
    assert status == 200 and seen["assigned_client"] is None


def test_batch_put_entries_each_show_their_secret(daemon, transport):
    """crescentd checks a batch's client secret once for a run of entries that
    carry the same id and secret: an entry with another secret, or none, in
    the same batch is still refused, alone, before and after good ones."""
    _, rpc = serving(daemon, transport)
    with connect(rpc, client_id=VICTIM, timeout=WAIT_S) as owner, \
            connect(rpc, client_id=VICTIM, timeout=WAIT_S, keep_secrets=False) as caller:
        mounted = owner.mount_segment("batch-seg", 1 << 20)
        assert mounted.status_code == 0 and len(mounted.client_secret) == 16
        right = mounted.client_secret
        secrets = [right, b"x" * 16, right, None, right, right[:-1] + bytes([right[-1] ^ 1]),
                   right]
        want = [0 if s == right else ILLEGAL_CLIENT for s in secrets]
        keys = ["batch-secret-%d" % i for i in range(len(secrets))]

        def with_secrets(reqs):
            for r, secret in zip(reqs, secrets):
                if secret is not None:
                    r.client_secret = secret
            return reqs

        starts = with_secrets([caller.put_start_request(k, 4096) for k in keys])
        resp = caller.call(caller.pb.BATCH_PUT_START,
                           caller.pb.BatchPutStartRequest(requests=starts))
        assert [r.status_code for r in resp.responses] == want, resp
        ends = with_secrets([caller.pb.PutEndRequest(key=k, tenant_id="default",
                                                     client_id=caller.uuid()) for k in keys])
        # The refused entries were never started: give them a start of their own.
        for k, code in zip(keys, want):
            if code != 0:
                assert owner.put_start(k, 4096).status_code == 0
        resp = caller.call(caller.pb.BATCH_PUT_END, caller.pb.BatchPutEndRequest(requests=ends))
        assert list(resp.status_codes) == want, resp
        for k, code in zip(keys, want):
            assert owner.exist_key(k).exists == (code == 0)


def test_stolen_client_id_cannot_fetch_or_report_tasks(daemon):
    """FetchTasks and MarkTaskToComplete run on the tasks actor; segments checks
    the executor's secret first, so the id alone neither takes its tasks nor
    reports them done."""
    rpc, pub, replay = endpoints()
    daemon("--rpc-address", rpc, "--event-address", pub, "--replay-address", replay)
    with MasterClient(rpc, client_id=VICTIM, timeout=WAIT_S) as owner, \
            MasterClient(rpc, client_id=VICTIM, timeout=WAIT_S, keep_secrets=False) as thief:
        for name, base in (("exec-a", 0x1000_0000), ("exec-b", 0x2000_0000)):
            assert owner.mount_segment(name, 1 << 20, base=base).status_code == 0
        start, end = owner.put("task-key", 4096, preferred_segment="exec-a")
        assert start.status_code == 0 and end.status_code == 0
        created = owner.create_copy_task("task-key", ["exec-b"])
        assert created.status_code == 0, created
        tid = created.task_id
        stolen = thief.fetch_tasks()
        assert stolen.status_code == ILLEGAL_CLIENT and len(stolen.tasks) == 0
        assert "carries none" in stolen.error_message
        assert owner.query_task(tid).status == owner.pb.PENDING  # not handed to the thief
        got = owner.fetch_tasks().tasks
        assert len(got) == 1 and got[0].task_id == tid
        for success in (True, False):
            forged = thief.mark_task_to_complete(tid, success=success)
            assert forged.status_code == ILLEGAL_CLIENT, forged
            assert "carries none" in forged.error_message
        wrong = thief.pb.MarkTaskToCompleteRequest(client_id=thief.uuid(), task_id=tid,
                                                   status=thief.pb.SUCCESS,
                                                   client_secret=b"x" * 16)
        resp = thief.call(thief.pb.MARK_TASK_TO_COMPLETE, wrong)
        assert resp.status_code == ILLEGAL_CLIENT and "another secret" in resp.error_message
        assert owner.query_task(tid).status == owner.pb.PROCESSING
        assert owner.mark_task_to_complete(tid).status_code == 0
        assert owner.query_task(tid).status == owner.pb.SUCCESS


def test_client_id_free_after_ttl_expiry(daemon):
    rpc, pub, replay = endpoints()
    daemon("--rpc-address", rpc, "--event-address", pub, "--replay-address", replay,
           "--client-ttl", "1")
    with MasterClient(rpc, client_id=VICTIM, timeout=WAIT_S) as owner, \
            MasterClient(rpc, client_id=VICTIM, timeout=WAIT_S, keep_secrets=False) as other:
        assert owner.mount_segment("ttl-seg", 1 << 20).status_code == 0
        assert other.ping().status_code == ILLEGAL_CLIENT
        # Once the owner stops pinging, crescentd forgets it and its secret:
        # the id answers "not known", then a new mount registers it afresh.
        assert poll_until(lambda: (lambda r: r.status_code == 0 and not r.client_known)(
            other.ping()))
        fresh = other.mount_segment("ttl-seg-2", 1 << 20)
        assert fresh.status_code == 0 and len(fresh.client_secret) == 16


# ---- crescent-store as a client of a secured crescentd ---------------------

def test_store_server_takes_client_keys(daemon, tmp_path):
    """crescent-store opens its master connection as libcrescent does: with
    the CRESCENT_CURVE_* keys it mounts at a Curve-only crescentd and its
    SIGTERM unmounts (its own segment: no admin token needed); without them
    its handshake is refused and it exits non-zero, never mounted."""
    server_pub, _, server = keygen(tmp_path, "server")
    store_pub, store_sec, _ = keygen(tmp_path, "store")
    clients = tmp_path / "clients"
    clients.mkdir()
    (clients / "store.pub").write_text(store_pub + "\n")
    rpc, pub, replay = endpoints()
    d = daemon("--rpc-address", rpc, "--event-address", pub, "--replay-address", replay,
               "--curve-secret-key-file", str(server) + ".key", "--curve-clients", str(clients))
    plain = {k: v for k, v in os.environ.items() if not k.startswith("CRESCENT_CURVE_")}
    keys = dict(plain, CRESCENT_CURVE_SERVER_KEY=server_pub,
                CRESCENT_CURVE_PUBLIC_KEY=store_pub, CRESCENT_CURVE_SECRET_KEY=store_sec)

    def segments():
        with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/api/v1/stats", timeout=5) as r:
            return json.loads(r.read())["segments"]

    def wait_segments(n):
        for _ in range(WAIT_S * 20):
            if segments() == n:
                return
            subprocess.run(["sleep", "0.05"])
        raise AssertionError(f"timed out waiting for {n} segments")

    def store(name, env):
        return subprocess.Popen([binary("crescent-store"), "--master", rpc, "--segment-name",
                                 name, "--segment-size", "16M", "--no-pin"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    p = store("with-keys", keys)
    try:
        wait_segments(1)
    finally:
        p.terminate()
    out = p.communicate(timeout=30)[0].decode()
    assert p.returncode == 0 and "unmount of" not in out, out
    wait_segments(0)
    log = tmp_path / "no-keys.log"
    with open(log, "wb") as f:
        p = subprocess.Popen([binary("crescent-store"), "--master", rpc, "--segment-name",
                              "no-keys", "--segment-size", "16M", "--no-pin",
                              "--timeout-ms", "300"], env=plain, stdout=f,
                             stderr=subprocess.STDOUT)
        try:
            for _ in range(WAIT_S * 20):
                if "does not answer" in log.read_text():
                    break
                subprocess.run(["sleep", "0.05"])
            text = log.read_text()
            assert "does not answer" in text and "mounted" not in text, text
            assert segments() == 0
        finally:
            p.terminate()
            p.wait(timeout=30)
