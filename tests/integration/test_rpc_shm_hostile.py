"""Hostile same-uid clients of the shm RPC endpoint (issue 28, defects 2
and 8): a client that ftruncates its RPC memfd to 0 used to kill crescentd
with SIGBUS at its next read of the rings; connections that never say hello
used to hold --rpc-shm-clients-max slots for good."""
import errno
import os
import socket
import time

from conftest import actors_by_name
from master_client import ShmMasterClient
from test_rpc_shm import start_shm

F_GET_SEALS = 1034
ALL_SEALS = 1 | 2 | 4  # F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW


def shm_counters(d):
    return actors_by_name(d.port)["rpc_shm"]["counters"]


def test_a_client_cannot_shrink_its_rings(daemon, monkeypatch):
    import fcntl
    d, _, shm = start_shm(daemon)
    kept = []
    real = socket.recv_fds

    def keep_memfd(*args, **kw):  # the memfd the client maps, kept open
        msg, fds, flags, addr = real(*args, **kw)
        if fds:
            kept.append(os.dup(fds[0]))
        return msg, fds, flags, addr

    monkeypatch.setattr(socket, "recv_fds", keep_memfd)
    c = ShmMasterClient(shm, timeout=10)
    monkeypatch.undo()
    assert len(kept) == 1
    shrunk = False
    try:
        seals = fcntl.fcntl(kept[0], F_GET_SEALS)
        try:
            os.ftruncate(kept[0], 0)
            shrunk = True
        except PermissionError as e:
            assert e.errno == errno.EPERM
            shrunk = False
        if shrunk:
            # Our own mapping is gone too: wake crescentd without touching it
            # (it reads the ring indices in the shared header).
            os.write(c.to_server, (1).to_bytes(8, "little"))
            time.sleep(1)
        assert d.proc.poll() is None, f"crescentd died ({d.proc.returncode}) of a shrunk memfd"
        assert not shrunk and seals & ALL_SEALS == ALL_SEALS, seals
        assert c.ping().status_code == 0  # crescentd reads and writes the rings
    finally:
        os.close(kept[0])
        if not shrunk:
            c.close()
    code, err = d.stop()
    assert code == 0, err


def test_silent_connections_do_not_hold_the_slots(daemon):
    d, _, shm = start_shm(daemon, "--rpc-shm-clients-max", "4",
                          "--rpc-shm-hello-timeout-ms", "300")
    name = shm[len("shm://"):]
    silent = []
    for _ in range(4):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect("\0" + name[1:])
        silent.append(s)
    try:
        # A real client gets a slot once the silent ones are timed out.
        deadline, last = time.monotonic() + 10, None
        while True:
            try:
                c = ShmMasterClient(shm, timeout=5)
                break
            except ConnectionError as e:  # "4 shm clients are connected"
                last = e
                assert time.monotonic() < deadline, f"no slot in 10 s: {last}"
                time.sleep(0.1)
        assert c.ping().status_code == 0
        c.close()
        counters = shm_counters(d)
        assert counters["clients_hello_timeout_total"] >= 4, counters
        for s in silent:  # crescentd closed them
            s.settimeout(5)
            assert s.recv(1) == b""
    finally:
        for s in silent:
            s.close()
