"""Shared memory handed to a same-uid client cannot be shrunk under the
process that serves it (issue 28, defect 2).

A client that mapped a segment through a store server's shm socket
(crescentd's local segment, or a crescent-store's) used to be able to
ftruncate its memfd to 0: the server's next touch of the segment (a copy
task's read, a transfer) was a SIGBUS that killed crescentd and
crescent-store.  Every memfd handed out is now sealed against shrinking
(F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_SEAL).  The RPC rings' memfds:
test_rpc_shm_hostile.py."""
import errno
import json
import os
import socket
import struct

from conftest import http_get
from test_tasks_data import ctl, segments_of, start

MAGIC = 0x33534d58  # CR_XFER_SHM_MAGIC ("XMS3"), src/rdma/xfer_shm.h
NAME_MAX = 255
F_GET_SEALS = 1034
F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW = 1, 2, 4
ALL = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW


def map_request(endpoint, name):
    """The segment's memfd and the control memfd, as a same-host client gets
    them (src/rdma/xfer_server_shm.c); None when refused."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    s.connect("\0crescent-xfer/" + endpoint)
    raw = name.encode()
    # struct cr_xfer_shm_request: u32 magic, u8 name_len, u8 has_cap, u8 kind (0: map),
    # char name[255], u8 cap[48], u64 addr, u64 length (a file request's; native
    # alignment, 328 bytes); no capability (crescentd does not require one)
    s.send(struct.pack("@IBBB255s48sQQ", MAGIC, len(raw), 0, 0, raw, b"", 0, 0))
    msg, fds, _, _ = socket.recv_fds(s, 64, 2)
    s.close()
    magic, status = struct.unpack_from("=Ii", msg)
    assert magic == MAGIC
    if status != 0:
        for fd in fds:
            os.close(fd)
        return None
    assert len(fds) == 2
    return fds


def segment_endpoint(d, name):
    segs = json.loads(http_get(d.port, "/api/v1/segments")[1])["segments"]
    return {s["name"]: s["endpoint"] for s in segs}[name]


def test_handed_out_segments_cannot_be_shrunk(daemon, tmp_path):
    import fcntl
    d, rpc, stores = start(daemon, tmp_path, stores=1, local=True)
    try:
        payload = os.urandom(64 << 10)
        src = tmp_path / "obj.in"
        src.write_bytes(payload)
        for name in ("crescentd-local", "seg0"):
            ctl(rpc, "put", f"k-{name}", str(src), "--preferred", name)
            fds = map_request(segment_endpoint(d, name), name)
            assert fds is not None, f"{name} was not handed out over shm"
            shrunk, seals = [], []
            try:
                for fd in fds:
                    seals.append(fcntl.fcntl(fd, F_GET_SEALS))
                    try:
                        os.ftruncate(fd, 0)
                        shrunk.append(fd)
                    except PermissionError as e:
                        assert e.errno == errno.EPERM
            finally:
                for fd in fds:
                    os.close(fd)
            # The server then touches the segment: a copy task reads it.
            other = "seg0" if name == "crescentd-local" else "crescentd-local"
            copied = ctl(rpc, "copy", f"k-{name}", other, "--wait", check=False)
            assert d.proc.poll() is None, f"crescentd died ({d.proc.returncode}): {name} shrunk"
            assert all(s.proc.poll() is None for s in stores), "crescent-store died"
            assert not shrunk, f"{name}: a handed-out memfd was shrunk (seals {seals})"
            assert all(x & ALL == ALL for x in seals), (name, seals)
            assert b"SUCCESS" in copied.stdout, copied.stderr
            assert segments_of(d, f"k-{name}") == sorted([name, other])
            assert ctl(rpc, "get", f"k-{name}", "-").stdout == payload
    finally:
        for s in stores:
            s.stop()
