"""Object bytes end to end: crescentd as the master, two crescent-store
processes hosting segments (and crescentd's own local segment when it has
one), libcrescent's Put/Get through the transfer layer.

A foreign client (this Python test) writes files, stores them with
`crescentctl put`, reads them back with `crescentctl get` and compares bytes;
tests/tools/data_check drives the C API (random sizes 0 B to 64 MiB, get_into,
batch forms, concurrent clients).  Faults: a store server killed with SIGKILL
(its segment still mounted) makes reads fall back to the other replica, then
fail with the reason; a put whose only replica is on a dead server is revoked
and never readable, and so is one whose server is killed while the put's
bytes are being written to it (one replica or two).  A master restart is
followed by a remount."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import binary, free_port, http_get, wait_for
from store_server import StoreServer

SEGMENT = 256 << 20


def stats(d):
    # 503 is the admin API's answer when an actor does not answer its ask in
    # time, which a heavily loaded machine can cause: ask again.
    deadline = time.monotonic() + 20
    while True:
        status, body = http_get(d.port, "/api/v1/stats")
        if status != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == 200, (status, body)
    return json.loads(body)


class Store(StoreServer):
    """A store server with a SEGMENT-byte segment: data_check's objects reach 64 MiB."""

    def __init__(self, rpc, log_path, name, *extra):
        super().__init__(rpc, log_path, name, *extra, segment_size=SEGMENT)


@pytest.fixture(params=["shm", "tcp"])
def cluster(request, daemon, tmp_path):
    """crescentd without its local segment plus two store servers, served to
    this host's clients by shm (the default) or, with --no-shm, by tcp."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0")
    extra = ["--no-shm"] if request.param == "tcp" else []
    stores = [Store(rpc, tmp_path / f"store{i}.log", f"seg{i}", *extra) for i in range(2)]
    wait_for(lambda: stats(d)["segments"] == 2, "both segments mounted")
    yield d, rpc, stores, request.param
    for s in stores:
        s.stop(signal.SIGKILL)


def ctl(rpc, *args, stdin=None, check=True):
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", "10000", *args],
                       input=stdin, capture_output=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr.decode()
    return p


def data_check(rpc, *args, transport=None):
    """Runs tests/tools/data_check; `transport` (shm, tcp) is the one its log must name."""
    p = subprocess.run([binary("data_check"), "--rpc", rpc, *map(str, args)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"
    if transport is not None:
        assert f"transport {transport}" in p.stderr, p.stderr


def test_ctl_put_get_file_and_stdin(cluster, tmp_path):
    _, rpc, _, transport = cluster
    src = tmp_path / "in.bin"
    payload = os.urandom(3 << 20) + b"tail"
    src.write_bytes(payload)
    out = ctl(rpc, "put", "file-key", str(src), "--replicas", "2")
    assert out.stdout.decode().strip() == f"stored file-key: {len(payload)} bytes"
    dst = tmp_path / "out.bin"
    ctl(rpc, "get", "file-key", str(dst))
    assert dst.read_bytes() == payload
    assert ctl(rpc, "get", "file-key").stdout == payload          # default: stdout
    ctl(rpc, "put", "stdin-key", "-", stdin=b"hello\x00world")
    assert ctl(rpc, "get", "stdin-key", "-").stdout == b"hello\x00world"
    replicas = ctl(rpc, "replicas", "file-key").stdout.decode()
    assert "2 replicas" in replicas and "seg0" in replicas and "seg1" in replicas
    # An empty file and empty stdin store 0-byte objects, read back as empty files.
    (tmp_path / "empty.bin").write_bytes(b"")
    stored = ctl(rpc, "put", "empty-file", str(tmp_path / "empty.bin"), "--replicas", "2")
    assert stored.stdout.decode().strip() == "stored empty-file: 0 bytes"
    ctl(rpc, "put", "empty-stdin", "-", stdin=b"")
    for key in ("empty-file", "empty-stdin"):
        (tmp_path / "empty-out.bin").write_bytes(b"stale")
        ctl(rpc, "get", key, str(tmp_path / "empty-out.bin"))
        assert (tmp_path / "empty-out.bin").read_bytes() == b""
        assert ctl(rpc, "get", key).stdout == b""
    assert "2 replicas" in ctl(rpc, "replicas", "empty-file").stdout.decode()
    # A missing key is refused with a reason; nothing is written.
    missing = ctl(rpc, "get", "nokey", str(tmp_path / "never"), check=False)
    assert missing.returncode == 1 and b"not found" in missing.stderr
    assert not (tmp_path / "never").exists()


def test_roundtrips_of_random_sizes(cluster):
    _, rpc, _, transport = cluster
    data_check(rpc, "roundtrip", 1, 11, 64 << 20, 2, transport=transport)  # 64 MiB, 2 replicas
    data_check(rpc, "roundtrip", 40, 12, 1 << 20, 2, transport=transport)  # 0 B .. 1 MiB


def test_batch_forms(cluster):
    _, rpc, _, transport = cluster
    data_check(rpc, "batch", 64, 21, 256 << 10, transport=transport)


def test_concurrent_readers_and_writers(cluster):
    _, rpc, _, transport = cluster
    data_check(rpc, "concurrent", 4, 12, 31, 512 << 10, transport=transport)


def test_local_segment_and_two_store_servers(daemon, tmp_path):
    """crescentd's own segment next to two crescent-store segments: replicas
    of one object land on all three, and every one of them serves reads."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "128M")
    stores = [Store(rpc, tmp_path / f"s{i}.log", f"seg{i}") for i in range(2)]
    try:
        wait_for(lambda: stats(d)["segments"] == 3, "three segments mounted")
        replicas = ctl(rpc, "put", "k3", "-", "--replicas", "3", stdin=b"abc" * 100000)
        assert replicas.returncode == 0
        listing = ctl(rpc, "replicas", "k3").stdout.decode()
        assert "crescentd-local" in listing and "seg0" in listing and "seg1" in listing
        data_check(rpc, "roundtrip", 20, 41, 2 << 20, 3)
        for s in stores:              # with both store servers gone, the local one serves
            s.stop(signal.SIGKILL)
        assert ctl(rpc, "get", "k3").stdout == b"abc" * 100000
    finally:
        for s in stores:
            s.stop(signal.SIGKILL)


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_local_segment_alone(daemon, transport):
    """crescentd's local segment as the only store, read by this host's clients
    by shm (the default) or, with --data-no-shm, by tcp."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    extra = ["--data-no-shm", "true"] if transport == "tcp" else []
    d = daemon("--rpc-address", rpc, "--local-segment-size", "128M", *extra)
    wait_for(lambda: stats(d)["segments"] == 1, "the local segment mounted")
    data_check(rpc, "roundtrip", 12, 43, 8 << 20, 1, transport=transport)
    assert ctl(rpc, "put", "alone", "-", stdin=b"xyz" * 5000).returncode == 0
    assert ctl(rpc, "get", "alone").stdout == b"xyz" * 5000


def test_verbs_turned_off_selects_tcp_and_says_why(daemon, tmp_path):
    """--data-no-verbs true (crescentd) and --no-verbs (crescent-store): no
    RDMA device is opened, the segments are mounted with protocol tcp, and
    both logs say that the flag turned verbs off (this host has no device
    either: without the flag the logs name the missing device instead)."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "32M", "--data-no-verbs", "true")
    s = Store(rpc, tmp_path / "store.log", "seg0", "--no-verbs", "--no-shm")
    try:
        wait_for(lambda: stats(d)["segments"] == 2, "both segments mounted")
        ctl(rpc, "put", "off", "-", "--replicas", "2", stdin=b"v" * 70000)
        assert ctl(rpc, "get", "off").stdout == b"v" * 70000
        assert s.stop(signal.SIGTERM) == 0
        store_log = s.text()
        assert "verbs off (--no-verbs)" in store_log, store_log
        assert "verbs: disabled by config" in store_log
        assert "served on tcp://" in store_log
    finally:
        s.stop(signal.SIGKILL)
    _, err = d.stop()
    assert "verbs off (--data-no-verbs true)" in err, err
    assert "verbs: disabled by config" in err
    assert "served on tcp://" in err


def test_server_killed_reads_fall_back_then_fail(cluster, tmp_path):
    d, rpc, stores, transport = cluster
    payload = os.urandom(1 << 20)
    ctl(rpc, "put", "two", "-", "--replicas", "2", stdin=payload)
    stores[0].stop(signal.SIGKILL)  # no unmount: the master still lists its replica
    for _ in range(3):              # whichever replica comes first, the bytes come back
        assert ctl(rpc, "get", "two").stdout == payload
    stores[1].stop(signal.SIGKILL)
    failed = ctl(rpc, "get", "two", str(tmp_path / "none"), check=False)
    assert failed.returncode == 1
    assert b"replica on 'seg" in failed.stderr, failed.stderr
    assert not (tmp_path / "none").exists()


def test_checksum_mismatch_falls_back_then_fails(cluster):
    """Bytes changed behind the master's back are never returned as the object."""
    _, rpc, _, transport = cluster
    payload = os.urandom(100000)
    ctl(rpc, "put", "sum", "-", "--replicas", "2", stdin=payload)
    data_check(rpc, "corrupt", "sum", 0)
    for _ in range(3):                      # the intact replica serves every read
        assert ctl(rpc, "get", "sum").stdout == payload
    data_check(rpc, "corrupt", "sum", 1)
    failed = ctl(rpc, "get", "sum", check=False)
    assert failed.returncode == 1 and failed.stdout == b""
    assert b"do not match the put's checksum" in failed.stderr, failed.stderr
    p = subprocess.run([binary("data_check"), "--rpc", rpc, "expect", "sum", "CHECKSUM"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def test_read_past_its_lease_fails(daemon, tmp_path):
    """A 1 ms lease cannot outlast reading 64 MiB: the get fails, naming the lease."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--default-kv-lease-ttl", "1")
    s = Store(rpc, tmp_path / "store.log", "seg-lease")
    try:
        wait_for(lambda: stats(d)["segments"] == 1, "the segment mounted")
        data_check(rpc, "put", "big", 64 << 20, 5)
        p = subprocess.run([binary("data_check"), "--rpc", rpc, "expect", "big", "LEASE_EXPIRED"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "lease" in p.stdout
    finally:
        s.stop(signal.SIGKILL)


def test_writer_gone_after_put_start_is_never_readable(cluster):
    """A writer that dies between PutStart and PutEnd (here: put-start alone, the
    process exits) leaves a zombie put: readers get OBJECT_NOT_READY, never bytes,
    until the master reclaims it (--put-start-release-timeout-sec)."""
    d, rpc, _, _ = cluster
    ctl(rpc, "put-start", "zombie", "64K")
    failed = ctl(rpc, "get", "zombie", check=False)
    assert failed.returncode == 1 and failed.stdout == b""
    assert b"NOT_READY" in failed.stderr or b"not ended" in failed.stderr, failed.stderr


def test_put_to_a_dead_server_is_revoked(cluster):
    d, rpc, stores, transport = cluster
    stores[0].stop(signal.SIGKILL)
    failed = ctl(rpc, "put", "doomed", "-", "--preferred", "seg0", stdin=b"x" * 5000,
                 check=False)
    assert failed.returncode == 1 and b"revoked" in failed.stderr, failed.stderr
    # Readers never see it: the master has no such object.
    assert ctl(rpc, "replicas", "doomed", check=False).returncode == 1
    assert stats(d)["objects"] == 0


def test_sigterm_unmounts_and_master_restart_remounts(daemon, tmp_path):
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0")
    s = Store(rpc, tmp_path / "store.log", "seg-r")
    wait_for(lambda: stats(d)["segments"] == 1, "the segment mounted")
    assert d.stop()[0] == 0
    d2 = daemon("--rpc-address", rpc, "--local-segment-size", "0")
    wait_for(lambda: stats(d2)["segments"] == 1, "the segment remounted")
    assert "remount" in s.text()
    ctl(rpc, "put", "after-restart", "-", stdin=b"still here")
    assert ctl(rpc, "get", "after-restart").stdout == b"still here"
    assert s.stop(signal.SIGTERM) == 0
    assert stats(d2)["segments"] == 0
    assert "stopped cleanly" in s.text()


def test_store_help_and_bad_flags():
    p = subprocess.run([binary("crescent-store"), "--help"], capture_output=True, text=True)
    assert p.returncode == 0
    for flag in ("--master", "--segment-name", "--segment-size", "--data-address", "--cpu",
                 "--no-shm", "--no-verbs", "--rdma-devices", "--rdma-gid-index", "--ping-interval-ms"):
        assert flag in p.stdout
    gid = subprocess.run([binary("crescent-store"), "--rdma-gid-index", "x"], capture_output=True,
                         text=True)
    assert gid.returncode == 2 and "--rdma-gid-index 'x': want auto or 0..255" in gid.stderr
    bad = subprocess.run([binary("crescent-store"), "--segment-size", "0"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "--segment-size" in bad.stderr


@pytest.mark.parametrize("replicas", [1, 2])
def test_server_killed_mid_put_is_never_readable(daemon, tmp_path, replicas):
    """A store server SIGKILLed while a 64 MiB put's bytes are being written to
    it over tcp: the put fails naming the server and is revoked; no reader ever
    gets bytes, during the put or after it, through the master's release
    timeout (with 2 replicas the other one was written whole and is still
    never readable).  The kill lands mid-write by construction: the server is
    SIGSTOPped first, so once the master holds the pending put the writer is
    blocked with far more bytes left than the socket buffers hold."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    # The pending put is visible (NOT_READY) until the release timeout: 8 s, as
    # each polling crescentctl can take seconds to start on a loaded machine
    # (with 2 s, CI's polls at load 30 missed the whole window).
    release_s = 8
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0",
               "--put-start-discard-timeout-sec", "1",
               "--put-start-release-timeout-sec", str(release_s))
    stores = [Store(rpc, tmp_path / f"store{i}.log", f"seg{i}", "--no-shm") for i in range(2)]
    try:
        wait_for(lambda: stats(d)["segments"] == 2, "both segments mounted")
        victim = stores[0]
        victim.proc.send_signal(signal.SIGSTOP)
        src = tmp_path / "big.bin"
        src.write_bytes(os.urandom(64 << 20))
        place = ["--replicas", "2"] if replicas == 2 else ["--preferred", "seg0"]
        writer = subprocess.Popen([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", "60000",
                                   "put", "mid", str(src), *place],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pending = []

        def put_started():        # every poll is also a read that must get no bytes
            p = ctl(rpc, "get", "mid", check=False)
            assert p.returncode == 1 and p.stdout == b"", p.stderr
            pending.append(p.stderr)
            return b"NOT_READY" in p.stderr or b"not ended" in p.stderr

        wait_for(put_started, "the master to hold the pending put")
        assert writer.poll() is None, "the put ended although its server is stopped"
        victim.stop(signal.SIGKILL)
        while writer.poll() is None:                  # readers during the failing put
            put_started()
        out, err = writer.communicate(timeout=60)
        assert writer.returncode == 1 and out == b"", err
        assert b"put 'mid' revoked: write to 'seg0'" in err, err
        # Revoked or released as a zombie, never readable: poll past the release timeout.
        deadline = time.monotonic() + release_s + 2
        while time.monotonic() < deadline:
            p = ctl(rpc, "get", "mid", str(tmp_path / "never"), check=False)
            assert p.returncode == 1 and p.stdout == b"", p.stderr
            assert not (tmp_path / "never").exists()
            assert ctl(rpc, "replicas", "mid", check=False).returncode == 1
            assert ctl(rpc, "exist", "mid", check=False).returncode == 1
        assert stats(d)["objects"] == 0
    finally:
        for s in stores:
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGCONT)
            s.stop(signal.SIGKILL)
