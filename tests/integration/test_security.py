"""Exposing crescentd safely (issue 10, item 5): CurveZMQ on the RPC, event
and replay sockets; with no keys configured everything is as before.

Keys come from `crescentctl keygen`; the clients are python3-zmq with its
CURVE support (libzmq with libsodium) and crescentctl (libcrescent, keys
from the environment).

Run: CRESCENT_BIN_DIR=... /usr/bin/python3 -m pytest -q tests/integration/test_security.py
"""
import os
import subprocess
import sys

import pytest
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import binary, free_port  # noqa: E402
from master_client import MasterClient  # noqa: E402

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
