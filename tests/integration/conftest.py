"""Shared fixtures: where the binaries are, free loopback ports, a crescentd
process that is always stopped (and checked) at the end of a test."""
import json
import os
import random
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

BIN_DIR = os.environ.get(
    "CRESCENT_BIN_DIR",
    os.path.join(os.path.dirname(__file__), "..", "..", "zig-out", "bin"))


def binary(name):
    path = os.path.join(BIN_DIR, name)
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built (run zig build)")
    return path



def python_client():
    """python/crescent, this tree's Python client, over the libcrescent built
    beside BIN_DIR (CRESCENT_LIB when that is not set): python_client().Store."""
    import sys
    path = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    if path not in sys.path:
        sys.path.insert(0, path)
    os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
    import crescent
    return crescent

# Ports are drawn below Linux's ephemeral range (32768-60999 by default), so a
# port handed out here is never taken meanwhile by the kernel for some outgoing
# connection, and no port is handed out twice in one run: asking the kernel for
# port 0 twice can return the same port when nothing has bound the first one yet
# (a daemon gets its RPC, event, replay and HTTP ports before it binds any).
_PORT_RANGE = (20000, 32000)
_handed_out = set()
_rng = random.Random(os.getpid() ^ time.monotonic_ns())


def free_port():
    for _ in range(1000):
        port = _rng.randrange(*_PORT_RANGE)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise AssertionError(f"no free loopback port in {_PORT_RANGE} after 1000 tries")


def http_get(port, path, timeout=5):
    """Returns (status, body bytes) without raising on 4xx/5xx."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def actors_by_name(port, wait_s=10):
    """GET /api/v1/actors as {name: entry}.  An actor that did not answer the
    stats ask in time is listed {"name":…, "up":false} (docs/http-api.md);
    on a loaded machine that happens now and then, so ask again (up to
    wait_s) until every actor answered, then return the last listing."""
    deadline = time.monotonic() + wait_s
    while True:
        actors = json.loads(http_get(port, "/api/v1/actors")[1])["actors"]
        if all(a["up"] for a in actors) or time.monotonic() > deadline:
            return {a["name"]: a for a in actors}
        time.sleep(0.1)


class Daemon:
    def __init__(self, args):
        self.port = free_port()
        self.args = [binary("crescentd"), "--http-address", f"127.0.0.1:{self.port}",
                     "--no-pin", *args]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"crescentd exited early: {self.proc.stderr.read().decode()}")
            try:
                if http_get(self.port, "/health", timeout=1)[0] == 200:
                    return
            except OSError:
                time.sleep(0.02)
        raise AssertionError("crescentd did not become healthy in 10 s")

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stops crescentd; returns (exit code, stderr text)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"crescentd did not stop within {timeout} s")
        return self.proc.returncode, err.decode()


@pytest.fixture
def daemon():
    started = []

    def start(*args):
        d = Daemon(list(args))
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc.poll() is None:
            d.stop()


# Every crescentd binds the store-master RPC (ZMQ and native), event and replay
# sockets, and tests run in parallel (with other engineers' daemons too): a daemon started
# by the fixture gets free loopback ports for those unless the test names them.
# Its local segment (on by default: 1 GiB) is off unless the test names
# --local-segment-size: the store-master tests count segments, bytes and
# placements exactly, with the segments they mount themselves.  test_daemon
# and test_data_path run with it.
_daemon_init_with_args = Daemon.__init__


def _daemon_init_with_free_sockets(self, args):
    args = list(args)
    for flag in ("--rpc-address", "--event-address", "--replay-address"):
        if flag not in args:
            args += [flag, f"tcp://127.0.0.1:{free_port()}"]
    if "--rpc-tcp-address" not in args and "--rpc_tcp_address" not in args:  # native RPC
        args += ["--rpc-tcp-address", f"127.0.0.1:{free_port()}"]
    if "--local-segment-size" not in args and "--local_segment_size" not in args:
        args += ["--local-segment-size", "0"]
    if "--metrics-port" not in args and "--metrics_port" not in args:  # Mooncake's, 9003
        args += ["--metrics-port", str(free_port())]
    if not {"--mooncake-rpc-address", "--rpc_port", "--port", "--rpc-port"} & set(args):
        args += ["--mooncake-rpc-address", f"127.0.0.1:{free_port()}"]  # coro_rpc, 50053
    _daemon_init_with_args(self, args)


Daemon.__init__ = _daemon_init_with_free_sockets


def wait_for(condition, what, timeout=60, interval=0.05):
    """Bounded polling: returns condition()'s first true value, fails naming
    `what` after `timeout` seconds.  Generous by default: only a hang should
    reach it on a loaded machine."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(interval)
